//! [`Ratio`]: a count over a count, such as a cell loss probability.

/// A numerator over a denominator, each an event count: cells lost over cells offered,
/// calls blocked over calls attempted, cells tagged over cells conforming.
///
/// The counters saturate at `u64::MAX` instead of overflowing (never reached in practice:
/// at 10^9 events per second it takes 584 years).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ratio {
    numerator: u64,
    denominator: u64,
}

impl Ratio {
    /// `0 / 0`.
    pub const fn new() -> Self {
        Ratio {
            numerator: 0,
            denominator: 0,
        }
    }

    /// Counts one trial in the denominator, and in the numerator too when `hit` (e.g.
    /// `loss.record(dropped)` for every cell offered). O(1).
    #[inline]
    pub fn record(&mut self, hit: bool) {
        self.denominator = self.denominator.saturating_add(1);
        self.numerator = self.numerator.saturating_add(u64::from(hit));
    }

    /// Adds `numerator` and `denominator` to the counts, for ratios that are not a
    /// fraction of trials (e.g. cells per frame), or to add a batch at once.
    #[inline]
    pub fn add(&mut self, numerator: u64, denominator: u64) {
        self.numerator = self.numerator.saturating_add(numerator);
        self.denominator = self.denominator.saturating_add(denominator);
    }

    /// The numerator count.
    pub fn numerator(&self) -> u64 {
        self.numerator
    }

    /// The denominator count.
    pub fn denominator(&self) -> u64 {
        self.denominator
    }

    /// `numerator / denominator`; NaN when the denominator is 0 (no trials, no estimate).
    pub fn value(&self) -> f64 {
        if self.denominator == 0 {
            f64::NAN
        } else {
            self.numerator as f64 / self.denominator as f64
        }
    }

    /// Adds the counts of `other` (e.g. from another replication or port).
    pub fn merge(&mut self, other: &Ratio) {
        self.add(other.numerator, other.denominator);
    }

    /// Sets both counts to 0 (e.g. at the end of the warm-up period).
    pub fn reset(&mut self) {
        *self = Ratio::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_probability() {
        let mut loss = Ratio::new();
        assert!(loss.value().is_nan());
        for i in 0..1000 {
            loss.record(i % 250 == 0);
        }
        assert_eq!(loss.numerator(), 4);
        assert_eq!(loss.denominator(), 1000);
        assert_eq!(loss.value(), 0.004);
    }

    #[test]
    fn add_merge_reset() {
        let mut a = Ratio::default();
        a.add(3, 4);
        let mut b = Ratio::new();
        b.add(1, 4);
        a.merge(&b);
        assert_eq!(a.value(), 0.5);
        a.reset();
        assert_eq!(a, Ratio::new());
    }

    #[test]
    fn saturates() {
        let mut r = Ratio::new();
        r.add(u64::MAX, u64::MAX);
        r.record(true);
        assert_eq!(r.numerator(), u64::MAX);
        assert_eq!(r.value(), 1.0);
    }
}
