//! Exact statistics of whole picoseconds: [`DurationMean`] and [`TimeWeightedCount`].
//!
//! A simulated time span is an integer number of picoseconds, and many quantities whose
//! time average a model wants are integers too (customers waiting, cells in a buffer,
//! busy servers). Their sums and time integrals can then be kept in integer arithmetic,
//! exactly, and rounded once when read. That is more accurate than [`Tally`] and
//! [`TimeWeighted`] (which round at every observation or change), independent of the
//! order of the observations, and cheaper on a model's hot path: recording is an integer
//! add with carry, where a [`Tally`] stores the observation and folds a block of them
//! every sixteenth time, and a [`TimeWeighted`] converts to floating point and tracks the
//! extremes. The `queue` model's two tallies and two time averages were a large share of
//! the M/M/1 benchmark's time; docs/performance.md has the figures.
//!
//! They keep only what a mean needs: use [`Tally`] for a variance or extremes.
//!
//! [`Tally`]: super::Tally
//! [`TimeWeighted`]: super::TimeWeighted

use atmlab_core::time::{Duration, Instant};

/// The mean of durations (waiting times, delays), kept as their count and their exact sum
/// in picoseconds.
///
/// The sum is a `u128`: it cannot overflow (2^64 observations of the longest duration
/// fit). [`DurationMean::mean_secs`] is the exact mean up to the roundings of one division
/// and one multiplication (to seconds), and of the sum's conversion once it passes 2^53 ps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurationMean {
    count: u64,
    sum_ps: u128,
}

impl DurationMean {
    /// No observations.
    pub const fn new() -> Self {
        DurationMean {
            count: 0,
            sum_ps: 0,
        }
    }

    /// Adds one duration. Two integer additions.
    #[inline(always)]
    pub fn record(&mut self, d: Duration) {
        self.count += 1;
        self.sum_ps += u128::from(d.as_picos());
    }

    /// The number of durations recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The exact sum, in picoseconds.
    pub fn sum_picos(&self) -> u128 {
        self.sum_ps
    }

    /// The mean in seconds; NaN when empty.
    pub fn mean_secs(&self) -> f64 {
        if self.count == 0 {
            return f64::NAN;
        }
        // Correctly rounded while the sum is below 2^53 ps (2.5 hours in all); beyond,
        // the sum's conversion adds a rounding of its own.
        self.sum_ps as f64 / self.count as f64 * 1e-12
    }

    /// Adds everything `other` recorded.
    pub fn merge(&mut self, other: &DurationMean) {
        self.count += other.count;
        self.sum_ps += other.sum_ps;
    }

    /// Forgets every observation (the end of the warm-up).
    pub fn reset(&mut self) {
        *self = DurationMean::new();
    }
}

/// The time average of a quantity that takes whole values (queue length, cells in a buffer,
/// busy servers) and changes only at events, with its integral `∫ x(t) dt` kept exactly in
/// value · picoseconds.
///
/// As [`TimeWeighted`](super::TimeWeighted), but exact and without extremes. An instant
/// earlier than the last change is taken as the last change (a hold of zero length), since
/// time never runs backwards in the simulator. The integral is a `u128`: a value of 2^32
/// held for 2^64 ps (213 days) 2^32 times over still fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWeightedCount {
    /// Start of the observed window (construction or last reset).
    start: Instant,
    /// Instant of the last change; the integral is complete up to here.
    last: Instant,
    /// The value held since `last`.
    value: u64,
    /// `∫ x(t) dt` from `start` to `last`, in value · picoseconds.
    area: u128,
}

impl TimeWeightedCount {
    /// Starts observing at `start`, with the quantity at `initial`.
    pub fn new(start: Instant, initial: u64) -> Self {
        TimeWeightedCount {
            start,
            last: start,
            value: initial,
            area: 0,
        }
    }

    /// The quantity changes to `value` at `now`: the old value's hold joins the integral.
    /// A multiplication and an add with carry.
    #[inline(always)]
    pub fn set(&mut self, now: Instant, value: u64) {
        // A branch that is almost always taken, rather than a saturating difference and a
        // maximum (four instructions more on every change).
        if now > self.last {
            let held = (now - self.last).as_picos();
            self.area += u128::from(self.value) * u128::from(held);
            self.last = now;
        }
        self.value = value;
    }

    /// The value held now.
    pub fn current(&self) -> u64 {
        self.value
    }

    /// `∫ x(t) dt` from the start (or the last reset) to `now`, in value · picoseconds.
    pub fn integral_picos(&self, now: Instant) -> u128 {
        let tail = now.saturating_duration_since(self.last).as_picos();
        self.area + u128::from(self.value) * u128::from(tail)
    }

    /// The time average from the start (or the last reset) to `now`. Over a window of zero
    /// length it is the current value (its limit as the window shrinks), not NaN.
    pub fn mean(&self, now: Instant) -> f64 {
        let now = now.max(self.last);
        let total = now.saturating_duration_since(self.start).as_picos();
        if total == 0 {
            return self.value as f64;
        }
        // Correctly rounded while the integral is below 2^53; beyond, its conversion adds
        // a rounding of its own (a relative error of 2^-53 at most).
        self.integral_picos(now) as f64 / total as f64
    }

    /// Starts a new window at `now`, keeping the current value.
    pub fn reset(&mut self, now: Instant) {
        *self = TimeWeightedCount::new(now, self.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Tally, TimeWeighted};

    #[test]
    fn empty_and_exact_means() {
        let mut m = DurationMean::new();
        assert!(m.mean_secs().is_nan());
        for ps in [1u64, 2, 4] {
            m.record(Duration::from_picos(ps));
        }
        assert_eq!(m.count(), 3);
        assert_eq!(m.sum_picos(), 7);
        assert_eq!(m.mean_secs(), 7.0 / 3.0 * 1e-12);
        // Sums beyond u64 stay exact.
        let mut big = DurationMean::new();
        big.record(Duration::MAX);
        big.record(Duration::MAX);
        assert_eq!(big.sum_picos(), 2 * u128::from(u64::MAX));
        assert_eq!(big.mean_secs(), u64::MAX as f64 * 1e-12);
        let mut both = m;
        both.merge(&big);
        assert_eq!(both.count(), 5);
        both.reset();
        assert_eq!(both, DurationMean::new());
    }

    #[test]
    fn duration_mean_agrees_with_tally() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut m = DurationMean::new();
        let mut t = Tally::new();
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let d = Duration::from_picos(state % 50_000_000_000_000);
            m.record(d);
            t.record(crate::stats::duration_secs(d));
        }
        let (a, b) = (m.mean_secs(), t.mean());
        assert!((a - b).abs() <= 1e-13 * b, "{a} vs {b}");
    }

    #[test]
    fn time_weighted_count_is_exact() {
        let t = |ps: u64| Instant::from_picos(ps);
        let mut q = TimeWeightedCount::new(t(100), 0);
        assert_eq!(q.mean(t(100)), 0.0);
        q.set(t(110), 3); // 0 for 10 ps
        q.set(t(120), 1); // 3 for 10 ps
        q.set(t(115), 2); // earlier than the last change: a zero hold
        assert_eq!(q.integral_picos(t(120)), 30);
        assert_eq!(q.current(), 2);
        // 2 for 10 more ps: (30 + 20) / 30.
        assert_eq!(q.mean(t(130)), 50.0 / 30.0);
        q.reset(t(130));
        assert_eq!(q.mean(t(130)), 2.0);
        assert_eq!(q.mean(t(140)), 2.0);
    }

    #[test]
    fn time_weighted_count_agrees_with_time_weighted() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut now = Instant::ZERO;
        let mut exact = TimeWeightedCount::new(now, 0);
        let mut float = TimeWeighted::new(now, 0.0);
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            now += Duration::from_picos(state % 3_000_000_000_000);
            let v = state % 17;
            exact.set(now, v);
            float.set(now, v as f64);
        }
        let end = now + Duration::from_secs(1);
        let (a, b) = (exact.mean(end), float.mean(end));
        assert!((a - b).abs() <= 1e-12 * b, "{a} vs {b}");
    }
}
