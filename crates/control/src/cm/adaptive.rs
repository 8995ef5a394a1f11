//! Adaptive message threshold (paper 000 §IV-B): estimate the call arrival rate and move
//! between load regions, each with its own T. The paper used three regions, 0-50,
//! 50-100 and over 100 calls/s, with T = 1, 4 (or 5) and 10; ours are configurable, and
//! the defaults keep the paper's shape, scaled to the call rates this manager handles
//! (docs/performance.md has the measurements behind them).

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
        // The arrivals counted fell anywhere in the windows that closed: a manager too
        // busy to look every window (overload) must not read its backlog as idle
        // windows, or the estimate would fall as the load rises and T with it.
        let rate = self.count as f64 / (windows as f64 * w as f64 * 1e-12);
        // Smooth: half the new span, half the old estimate, so one odd window does not
        // flip the region back and forth; a long silence forgets the past.
        self.rate = if self.rate == 0.0 || (self.count == 0 && windows >= 16) {
            rate
        } else {
            0.5 * rate + 0.5 * self.rate
        };
        self.window_start = Some(Instant::from_picos(start.as_picos() + windows * w));
        self.count = 0;
        true
    }

    /// The current estimate, calls/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Instant {
        Instant::from_picos(us * 1_000_000)
    }

    #[test]
    fn a_manager_that_looks_rarely_still_sees_the_rate() {
        // 10,000 arrivals/s, but (overloaded) the manager only handles them in bursts
        // every 350 ms with a 100 ms window: the estimate must stay near 10,000, not
        // read the unseen windows as idle.
        let mut e = ArrivalEstimator::new(Duration::from_millis(100));
        let mut t = 0;
        for _burst in 0..10 {
            for _ in 0..3_500 {
                e.arrival(at(t));
            }
            t += 350_000;
        }
        let r = e.rate();
        assert!((r - 10_000.0).abs() < 1_500.0, "{r}");
        // A real silence still brings it down to nothing (the first look closes the
        // span that holds the last burst; the next sees only silence).
        e.advance(at(t + 5_000_000));
        assert!(e.rate() < 10_000.0);
        e.advance(at(t + 10_000_000));
        assert_eq!(e.rate(), 0.0);
    }

    #[test]
    fn a_steady_rate_is_estimated_and_regions_follow() {
        let mut e = ArrivalEstimator::new(Duration::from_millis(100));
        for i in 0..20_000u64 {
            e.arrival(at(i * 100)); // 10,000/s
        }
        assert!((e.rate() - 10_000.0).abs() < 200.0, "{}", e.rate());
        let r = Regions::default();
        assert_eq!(r.region_of(e.rate()), 1);
        assert_eq!(r.region_of(100.0), 0);
        assert_eq!(r.region_of(50_000.0), 2);
    }
}
