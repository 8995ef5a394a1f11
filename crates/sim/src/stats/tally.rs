//! [`Tally`]: running count, mean, variance, min and max (Welford; Chan et al. to merge).

/// Count, mean, variance, minimum and maximum of a stream of `f64` observations.
///
/// Mean and variance use Welford's (1962) one-pass recurrence: each observation moves the
/// mean by `(x − mean)/n` and adds `(x − mean_old)(x − mean_new)` to the sum of squared
/// deviations, so no large sums of squares are formed and cancelled. [`Tally::merge`] uses
/// the pairwise formula of Chan, Golub and LeVeque (1979), which gives the same result (up
/// to rounding) as recording every observation into one tally.
///
/// With no observations, [`mean`](Tally::mean), [`min`](Tally::min) and
/// [`max`](Tally::max) are NaN; [`variance`](Tally::variance) is NaN below two
/// observations. A NaN observation is counted and poisons the mean and variance (on
/// purpose: a bad value upstream should show, not vanish); min and max ignore it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tally {
    count: u64,
    mean: f64,
    /// Sum of squared deviations from the running mean (Welford's `M2`).
    m2: f64,
    min: f64,
    max: f64,
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

impl Tally {
    /// An empty tally.
    pub const fn new() -> Self {
        Tally {
            count: 0,
            mean: 0.0,
            m2: 0.0,
            // Identities of min/max, so the first observation needs no special case.
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// Adds one observation. O(1), no allocation.
    #[inline]
    pub fn record(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
        // Comparisons rather than `f64::min`/`max`: the same result (a NaN compares false
        // and is ignored, as `f64::min` ignores it) in three instructions instead of seven.
        if x < self.min {
            self.min = x;
        }
        if x > self.max {
            self.max = x;
        }
    }

    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// `true` when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sample mean; NaN when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 { f64::NAN } else { self.mean }
    }

    /// The sum of the observations (`mean · count`); 0 when empty.
    pub fn sum(&self) -> f64 {
        self.mean * self.count as f64
    }

    /// The unbiased sample variance `Σ(x − x̄)²/(n − 1)`; NaN below two observations.
    pub fn variance(&self) -> f64 {
        if self.count < 2 {
            f64::NAN
        } else {
            // Rounding can leave M2 a hair below zero for (nearly) constant data.
            (self.m2 / (self.count - 1) as f64).max(0.0)
        }
    }

    /// The sample standard deviation, `√variance`; NaN below two observations.
    pub fn std_dev(&self) -> f64 {
        self.variance().sqrt()
    }

    /// The smallest observation; NaN when empty.
    pub fn min(&self) -> f64 {
        if self.count == 0 { f64::NAN } else { self.min }
    }

    /// The largest observation; NaN when empty.
    pub fn max(&self) -> f64 {
        if self.count == 0 { f64::NAN } else { self.max }
    }

    /// Adds everything `other` has recorded, as if its observations had been recorded here
    /// (Chan, Golub and LeVeque's pairwise update).
    pub fn merge(&mut self, other: &Tally) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n_a = self.count as f64;
        let n_b = other.count as f64;
        let n = n_a + n_b;
        let delta = other.mean - self.mean;
        // Weighting delta by the other side's share keeps the update exact when one side is
        // much larger than the other.
        self.mean += delta * (n_b / n);
        self.m2 += other.m2 + delta * delta * (n_a * n_b / n);
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Forgets every observation (e.g. at the end of the warm-up period).
    pub fn reset(&mut self) {
        *self = Tally::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Naive two-pass mean and sample variance: the reference the one-pass update must match.
    fn two_pass(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
        (a - b).abs() <= abs + rel * a.abs().max(b.abs())
    }

    #[test]
    fn empty_is_nan() {
        let t = Tally::new();
        assert_eq!(t.count(), 0);
        assert!(t.is_empty());
        assert!(t.mean().is_nan());
        assert!(t.variance().is_nan());
        assert!(t.min().is_nan());
        assert!(t.max().is_nan());
        assert_eq!(t.sum(), 0.0);
    }

    #[test]
    fn one_observation() {
        let mut t = Tally::default();
        t.record(4.5);
        assert_eq!(t.mean(), 4.5);
        assert!(t.variance().is_nan());
        assert_eq!(t.min(), 4.5);
        assert_eq!(t.max(), 4.5);
    }

    #[test]
    fn known_values() {
        let mut t = Tally::new();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            t.record(x);
        }
        assert_eq!(t.count(), 8);
        assert_eq!(t.mean(), 5.0);
        // Σ(x − 5)² = 32; 32/7.
        assert!(close(t.variance(), 32.0 / 7.0, 1e-15, 0.0));
        assert_eq!(t.min(), 2.0);
        assert_eq!(t.max(), 9.0);
        assert_eq!(t.sum(), 40.0);
    }

    #[test]
    fn large_offset_does_not_cancel() {
        // The naive Σx² − n·x̄² loses every digit here; Welford keeps them.
        let mut t = Tally::new();
        for x in [1e9 + 4.0, 1e9 + 7.0, 1e9 + 13.0, 1e9 + 16.0] {
            t.record(x);
        }
        assert!(close(t.variance(), 30.0, 1e-9, 0.0));
    }

    #[test]
    fn constant_data_has_zero_variance() {
        let mut t = Tally::new();
        for _ in 0..1000 {
            t.record(0.1);
        }
        assert!(t.variance() >= 0.0 && t.variance() < 1e-25);
    }

    #[test]
    fn merge_with_empty_and_reset() {
        let mut a = Tally::new();
        a.record(1.0);
        a.record(3.0);
        let before = a;
        a.merge(&Tally::new());
        assert_eq!(a, before);
        let mut e = Tally::new();
        e.merge(&a);
        assert_eq!(e, a);
        e.reset();
        assert_eq!(e, Tally::new());
    }

    #[test]
    fn nan_poisons_mean_not_extremes() {
        let mut t = Tally::new();
        t.record(1.0);
        t.record(f64::NAN);
        t.record(2.0);
        assert_eq!(t.count(), 3);
        assert!(t.mean().is_nan());
        assert_eq!(t.min(), 1.0);
        assert_eq!(t.max(), 2.0);
    }

    proptest! {
        #[test]
        fn matches_two_pass(xs in proptest::collection::vec(-1e6f64..1e6, 2..200)) {
            let mut t = Tally::new();
            for &x in &xs {
                t.record(x);
            }
            let (mean, var) = two_pass(&xs);
            prop_assert_eq!(t.count(), xs.len() as u64);
            prop_assert!(close(t.mean(), mean, 1e-9, 1e-9), "{} vs {}", t.mean(), mean);
            prop_assert!(close(t.variance(), var, 1e-9, 1e-6), "{} vs {}", t.variance(), var);
            let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert_eq!(t.min(), min);
            prop_assert_eq!(t.max(), max);
        }

        #[test]
        fn merge_equals_recording_all(
            xs in proptest::collection::vec(-1e6f64..1e6, 0..200),
            split in 0usize..200,
        ) {
            let split = split.min(xs.len());
            let (left, right) = xs.split_at(split);
            let mut a = Tally::new();
            let mut b = Tally::new();
            let mut all = Tally::new();
            for &x in left {
                a.record(x);
                all.record(x);
            }
            for &x in right {
                b.record(x);
                all.record(x);
            }
            a.merge(&b);
            prop_assert_eq!(a.count(), all.count());
            if !xs.is_empty() {
                prop_assert!(close(a.mean(), all.mean(), 1e-9, 1e-9));
                prop_assert_eq!(a.min(), all.min());
                prop_assert_eq!(a.max(), all.max());
            }
            if xs.len() >= 2 {
                prop_assert!(close(a.variance(), all.variance(), 1e-9, 1e-6));
            }
        }
    }
}
