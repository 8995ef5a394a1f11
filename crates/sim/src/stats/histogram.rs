//! [`Histogram`]: quantiles of waiting times in bounded memory, on HdrHistogram.

use atmlab_core::time::Duration;

/// The default precision: 3 significant decimal digits (reported quantiles at most 0.1 %
/// above the exact sample quantile).
pub const DEFAULT_SIGNIFICANT_DIGITS: u8 = 3;

/// The largest value kept, in picoseconds (2^62 − 1 ps, about 53 days): the top of the range
/// an auto-resizing HdrHistogram can grow to. Larger values are recorded as this one.
const MAX_PICOS: u64 = (1 << 62) - 1;

/// Quantiles of non-negative values in seconds — waiting times, delays, inter-cell gaps — in
/// memory that grows only with the logarithm of the range, not with the number of values.
///
/// Values are converted to integer picoseconds (the unit of `atmlab_core::time`) and
/// counted in Gil Tene's HdrHistogram (the `hdrhistogram` crate): values below
/// `2·10^d` ps are counted exactly, larger ones in buckets whose width is at most
/// `10^-d` of the value, `d` being the number of significant digits (3 by default).
///
/// Precision of [`quantile`](Histogram::quantile): let `x` be the exact sample quantile by
/// the nearest-rank rule (the `⌈q·n⌉`-th smallest value, at least the first). The result
/// `v` satisfies `x ≤ v ≤ x·(1 + 10^-d)`, up to the rounding of seconds to whole
/// picoseconds (±0.5 ps): HdrHistogram reports the top of the bucket, so quantiles err
/// upwards, the safe side for delay bounds. `v` never leaves `[min, max]`, which are exact.
///
/// Zero is an ordinary value (the many zero waits of an M/M/1 queue are counted exactly).
/// NaN and negative values cannot be waiting times: they are not recorded and are counted
/// in [`rejected`](Histogram::rejected) instead, so that a bug upstream shows in a report.
/// Values above about 53 days (2^62 ps) are recorded as 2^62 ps.
///
/// Memory grows with the logarithm of the largest value: with 3 digits about 88 KiB for
/// values up to 1 µs, 200 KiB up to 10 ms, 250 KiB up to 1 s; with 2 digits about a seventh
/// of that (28 KiB up to 10 ms), with 4 digits about thirteen times more. It grows
/// (allocates) only when a value exceeds every earlier one by a power of two, at most about
/// 60 times in a run; recording is otherwise O(1) without allocation.
#[derive(Debug, Clone)]
pub struct Histogram {
    hist: hdrhistogram::Histogram<u64>,
    /// Exact extremes in picoseconds: HdrHistogram only knows them to bucket precision.
    min_ps: u64,
    max_ps: u64,
    rejected: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram with [`DEFAULT_SIGNIFICANT_DIGITS`] (3) significant digits.
    pub fn new() -> Self {
        // 3 is inside 0..=5, the range `hdrhistogram` accepts.
        Self::with_significant_digits(DEFAULT_SIGNIFICANT_DIGITS)
            .unwrap_or_else(|| unreachable!("3 significant digits are always valid"))
    }

    /// An empty histogram keeping `digits` significant decimal digits; `None` unless
    /// `digits` is in `1..=5`. Memory grows about tenfold per extra digit.
    pub fn with_significant_digits(digits: u8) -> Option<Self> {
        if !(1..=5).contains(&digits) {
            return None;
        }
        // Auto-resizing, lowest discernible value 1 ps: the range need not be guessed up
        // front, and a histogram of short delays stays small.
        let hist = hdrhistogram::Histogram::new(digits).ok()?;
        Some(Histogram {
            hist,
            min_ps: u64::MAX,
            max_ps: 0,
            rejected: 0,
        })
    }

    /// The number of significant decimal digits kept.
    pub fn significant_digits(&self) -> u8 {
        self.hist.sigfig()
    }

    /// Records a value in seconds, rounded to the nearest picosecond. NaN and negative
    /// values are counted in [`rejected`](Histogram::rejected) and not recorded.
    #[inline]
    pub fn record(&mut self, value_secs: f64) {
        if value_secs.is_nan() || value_secs < 0.0 {
            self.rejected += 1;
            return;
        }
        self.record_picos(Duration::from_secs_f64(value_secs).as_picos());
    }

    /// Records a duration exactly (no float rounding on the way in).
    #[inline]
    pub fn record_duration(&mut self, d: Duration) {
        self.record_picos(d.as_picos());
    }

    #[inline]
    fn record_picos(&mut self, ps: u64) {
        let ps = ps.min(MAX_PICOS);
        // Auto-resize can fail only beyond MAX_PICOS, which the clamp rules out.
        let recorded = self.hist.record(ps);
        debug_assert!(recorded.is_ok(), "value {ps} ps within the resizable range");
        if recorded.is_ok() {
            self.min_ps = self.min_ps.min(ps);
            self.max_ps = self.max_ps.max(ps);
        }
    }

    /// The number of values recorded (rejected ones not included).
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// `true` when no value has been recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The number of values refused by [`record`](Histogram::record): NaN or negative.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The `q`-quantile in seconds, `q` in `[0, 1]` (0.5 the median, 0.99 the 99th
    /// percentile), within the precision documented on [`Histogram`]. NaN when empty or
    /// when `q` is outside `[0, 1]` or NaN. O(size of the histogram), not O(1): meant for
    /// the end of a run.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.is_empty() || !(0.0..=1.0).contains(&q) {
            return f64::NAN;
        }
        let ps = self
            .hist
            .value_at_quantile(q)
            .clamp(self.min_ps, self.max_ps);
        Duration::from_picos(ps).as_secs_f64()
    }

    /// The smallest value recorded, in seconds (exact to the picosecond); NaN when empty.
    pub fn min(&self) -> f64 {
        if self.is_empty() {
            f64::NAN
        } else {
            Duration::from_picos(self.min_ps).as_secs_f64()
        }
    }

    /// The largest value recorded, in seconds (exact to the picosecond); NaN when empty.
    pub fn max(&self) -> f64 {
        if self.is_empty() {
            f64::NAN
        } else {
            Duration::from_picos(self.max_ps).as_secs_f64()
        }
    }

    /// The fraction of recorded values at or below `value_secs` (e.g. the probability that
    /// a cell waits at most 1 ms), to bucket precision; NaN when empty.
    pub fn fraction_at_or_below(&self, value_secs: f64) -> f64 {
        if self.is_empty() || value_secs.is_nan() {
            return f64::NAN;
        }
        if value_secs < 0.0 {
            return 0.0;
        }
        let ps = Duration::from_secs_f64(value_secs)
            .as_picos()
            .min(MAX_PICOS);
        self.hist.quantile_below(ps)
    }

    /// Adds everything `other` has recorded (e.g. per-replication histograms into one).
    /// With equal precision the result is exactly that of recording every value here; from
    /// a histogram with more digits, values are rounded to this one's buckets.
    pub fn merge(&mut self, other: &Histogram) {
        self.rejected += other.rejected;
        if other.is_empty() {
            return;
        }
        // Both sides hold values up to MAX_PICOS only, so growing to fit cannot fail.
        let added = self.hist.add(&other.hist);
        debug_assert!(added.is_ok(), "merging histograms within range");
        if added.is_ok() {
            self.min_ps = self.min_ps.min(other.min_ps);
            self.max_ps = self.max_ps.max(other.max_ps);
        }
    }

    /// Forgets every value (e.g. at the end of the warm-up period); keeps the memory.
    pub fn reset(&mut self) {
        self.hist.reset();
        self.min_ps = u64::MAX;
        self.max_ps = 0;
        self.rejected = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Nearest-rank quantile of picosecond values, by the same rank rule as HdrHistogram.
    fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    /// `v` (seconds) is within the documented precision of the exact `x` (picoseconds).
    fn within_precision(v: f64, x_ps: u64, digits: u8) -> bool {
        let x = x_ps as f64 * 1e-12;
        let rel = 10f64.powi(-i32::from(digits));
        let slack = 1e-12; // rounding of seconds to picoseconds and back
        v >= x - slack && v <= x * (1.0 + rel) + slack
    }

    #[test]
    fn empty_is_nan() {
        let h = Histogram::new();
        assert_eq!(h.count(), 0);
        assert!(h.quantile(0.5).is_nan());
        assert!(h.min().is_nan());
        assert!(h.max().is_nan());
        assert!(h.fraction_at_or_below(1.0).is_nan());
    }

    #[test]
    fn digits_validated() {
        assert!(Histogram::with_significant_digits(0).is_none());
        assert!(Histogram::with_significant_digits(6).is_none());
        assert_eq!(
            Histogram::with_significant_digits(2).map(|h| h.significant_digits()),
            Some(2)
        );
        assert_eq!(Histogram::default().significant_digits(), 3);
    }

    #[test]
    fn zeros_are_exact() {
        // An M/M/1 queue at load 0.5: half the cells do not wait at all.
        let mut h = Histogram::new();
        for _ in 0..600 {
            h.record(0.0);
        }
        for i in 0..400 {
            h.record(1e-6 * f64::from(i + 1));
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.quantile(0.0), 0.0);
        assert_eq!(h.quantile(0.5), 0.0);
        assert_eq!(h.quantile(0.6), 0.0);
        assert!(h.quantile(0.61) > 0.0);
        assert_eq!(h.min(), 0.0);
        assert_eq!(h.quantile(1.0), 400e-6);
        assert_eq!(h.max(), 400e-6);
        assert!((h.fraction_at_or_below(0.0) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn rejects_nan_and_negative() {
        let mut h = Histogram::new();
        h.record(f64::NAN);
        h.record(-1e-9);
        h.record(2e-6);
        assert_eq!(h.count(), 1);
        assert_eq!(h.rejected(), 2);
        assert!(h.quantile(-0.1).is_nan());
        assert!(h.quantile(1.5).is_nan());
        assert!(h.quantile(f64::NAN).is_nan());
    }

    #[test]
    fn huge_values_are_clamped_not_panicking() {
        let mut h = Histogram::new();
        h.record(f64::INFINITY);
        h.record_duration(Duration::MAX);
        h.record(1.0);
        assert_eq!(h.count(), 3);
        let top = MAX_PICOS as f64 * 1e-12;
        assert_eq!(h.max(), top);
        assert_eq!(h.quantile(1.0), top);
        assert_eq!(h.quantile(0.0), 1.0);
    }

    #[test]
    fn durations_are_exact_in_range() {
        let mut h = Histogram::new();
        // One 155.52 Mb/s cell slot, 2.7 us: far above the exactly-counted range, yet a
        // lone value comes back exact because quantiles are clamped to the exact extremes.
        let slot = Duration::from_picos(2_726_337);
        h.record_duration(slot);
        assert_eq!(h.min(), slot.as_secs_f64());
        assert_eq!(h.quantile(0.5), slot.as_secs_f64());
    }

    #[test]
    fn exponential_quantiles() {
        // Exp(1/mean) quantile: −mean·ln(1 − q). With 20 000 samples the sample quantiles
        // are within a few percent; the histogram adds at most 0.1 %.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let exp = Exp::new(1.0 / 1e-3).expect("positive rate");
        let mut h = Histogram::new();
        for _ in 0..20_000 {
            h.record(exp.sample(&mut rng));
        }
        for q in [0.5f64, 0.9, 0.99] {
            let exact = -1e-3 * (1.0 - q).ln();
            let got = h.quantile(q);
            assert!(
                (got - exact).abs() < 0.06 * exact,
                "q={q}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn reset_keeps_precision() {
        let mut h = Histogram::with_significant_digits(2).expect("valid");
        h.record(1.0);
        h.record(f64::NAN);
        h.reset();
        assert!(h.is_empty());
        assert_eq!(h.rejected(), 0);
        h.record(0.5);
        assert_eq!(h.quantile(1.0), 0.5);
        assert_eq!(h.significant_digits(), 2);
    }

    proptest! {
        // Each case builds histograms of up to ~10^5 counters and scans them per quantile,
        // slow in a debug build: fewer cases keep the suite under a second.
        #![proptest_config(ProptestConfig::with_cases(40))]

        #[test]
        fn quantiles_within_precision(
            xs in proptest::collection::vec(
                prop_oneof![Just(0.0), 0.0f64..1e-6, 0.0f64..10.0], 1..300),
            qs in proptest::collection::vec(0.0f64..=1.0, 1..10),
            digits in 1u8..=3,
        ) {
            let mut h = Histogram::with_significant_digits(digits).expect("valid");
            let mut ps: Vec<u64> = Vec::with_capacity(xs.len());
            for &x in &xs {
                h.record(x);
                ps.push(Duration::from_secs_f64(x).as_picos());
            }
            ps.sort_unstable();
            prop_assert_eq!(h.count(), xs.len() as u64);
            for &q in qs.iter().chain(&[0.0, 1.0]) {
                let x = nearest_rank(&ps, q);
                let v = h.quantile(q);
                prop_assert!(within_precision(v, x, digits), "q={} v={} x={} ps", q, v, x);
            }
        }

        #[test]
        fn merge_equals_recording_all(
            xs in proptest::collection::vec(0.0f64..1e-2, 0..200),
            ys in proptest::collection::vec(0.0f64..1.0, 0..200),
        ) {
            let mut a = Histogram::new();
            let mut b = Histogram::new();
            let mut all = Histogram::new();
            for &x in &xs {
                a.record(x);
                all.record(x);
            }
            for &y in &ys {
                b.record(y);
                all.record(y);
            }
            a.merge(&b);
            prop_assert_eq!(a.count(), all.count());
            for q in [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0] {
                let (l, r) = (a.quantile(q), all.quantile(q));
                prop_assert!(l == r || (l.is_nan() && r.is_nan()), "q={}: {} vs {}", q, l, r);
            }
            prop_assert!(a.max() == all.max() || a.is_empty());
            prop_assert!(a.min() == all.min() || a.is_empty());
        }
    }
}
