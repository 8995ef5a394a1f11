//! Adaptive message threshold (paper 000 §IV-B): estimate the call arrival rate and move
//! between load regions, each with its own T. The paper used three regions, 0-50,
//! 50-100 and over 100 calls/s, with T = 1, 4 (or 5) and 10; ours are configurable, and
//! the defaults are scaled to a machine that sets up calls three orders of magnitude
//! faster.

use atmlab_core::time::{Duration, Instant};

/// Load regions: `bounds[i]` is the upper arrival rate (calls/s) of region i, and
/// `thresholds` has one more entry than `bounds` (the last region is open above).
#[derive(Debug, Clone, PartialEq)]
pub struct Regions {
    /// Upper bounds, calls/s, increasing.
    pub bounds: Vec<f64>,
    /// T per region.
    pub thresholds: Vec<u32>,
    /// The measurement window of the rate estimate.
    pub window: Duration,
}

impl Default for Regions {
    fn default() -> Self {
        // The paper's shape (T = 1, 4, 10) at our scale: below 2,000 calls/s a message
        // per command keeps latency lowest; above 20,000 batching pays.
        Regions {
            bounds: vec![2_000.0, 20_000.0],
            thresholds: vec![1, 4, 10],
            window: Duration::from_millis(100),
        }
    }
}

impl Regions {
    /// The paper's own regions (0-50, 50-100, >100 calls/s; T = 1, 4, 10).
    pub fn paper() -> Self {
        Regions {
            bounds: vec![50.0, 100.0],
            thresholds: vec![1, 4, 10],
            window: Duration::from_secs(1),
        }
    }

    /// Checks the shape.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.thresholds.len() != self.bounds.len() + 1 {
            return Err("regions need one more threshold than bounds");
        }
        if self.bounds.windows(2).any(|w| w[0] >= w[1])
            || self.bounds.iter().any(|b| b.is_nan() || *b <= 0.0)
        {
            return Err("region bounds must be positive and increasing");
        }
        if self.thresholds.contains(&0) || self.window.as_picos() == 0 {
            return Err("thresholds must be at least 1 and the window positive");
        }
        Ok(())
    }

    /// The region of an arrival rate.
    pub fn region_of(&self, rate: f64) -> usize {
        self.bounds.iter().take_while(|b| rate >= **b).count()
    }
}

/// Counts arrivals per window; the estimate is the last full window's rate, smoothed.
#[derive(Debug, Clone)]
pub struct ArrivalEstimator {
    window: Duration,
    window_start: Option<Instant>,
    count: u64,
    rate: f64,
}

impl ArrivalEstimator {
    /// An estimator with the given window.
    pub fn new(window: Duration) -> Self {
        ArrivalEstimator {
            window,
            window_start: None,
            count: 0,
            rate: 0.0,
        }
    }

    /// Records an arrival at `now`; returns true when a window closed (the estimate moved).
    pub fn arrival(&mut self, now: Instant) -> bool {
        let closed = self.advance(now);
        self.count += 1;
        closed
    }

    /// Closes every window that ended by `now` (an idle spell decays the estimate).
    pub fn advance(&mut self, now: Instant) -> bool {
        let start = *self.window_start.get_or_insert(now);
        let w = self.window.as_picos().max(1);
        let elapsed = now.as_picos().saturating_sub(start.as_picos());
        if elapsed < w {
            return false;
        }
        let windows = elapsed / w;
        let secs = w as f64 * 1e-12;
        // The first closed window holds the arrivals counted; any further ones were empty.
        let mut rate = self.count as f64 / secs;
        for _ in 1..windows.min(16) {
            rate *= 0.5;
        }
        // Smooth: half the new window, half the old estimate, so one odd window does not
        // flip the region back and forth.
        self.rate = if self.rate == 0.0 {
            rate
        } else {
            0.5 * rate + 0.5 * self.rate
        };
        if windows >= 16 {
            self.rate = 0.0;
        }
        self.window_start = Some(Instant::from_picos(start.as_picos() + windows * w));
        self.count = 0;
        true
    }

    /// The current estimate, calls/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}
