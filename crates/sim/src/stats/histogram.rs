//! [`Histogram`]: quantiles of waiting times in bounded memory, HdrHistogram's layout.

use atmlab_core::time::Duration;

/// The default precision: 3 significant decimal digits (reported quantiles at most 0.1 %
/// above the exact sample quantile).
pub const DEFAULT_SIGNIFICANT_DIGITS: u8 = 3;

/// The largest value kept, in picoseconds (2^62 − 1 ps, about 53 days). Larger values are
/// recorded as this one.
const MAX_PICOS: u64 = (1 << 62) - 1;

/// Quantiles of non-negative values in seconds — waiting times, delays, inter-cell gaps — in
/// memory that grows only with the logarithm of the range, not with the number of values.
///
/// Values are converted to integer picoseconds (the unit of `atmlab_core::time`) and
/// counted in the bucket layout of Gil Tene's HdrHistogram (as the `hdrhistogram` crate
/// lays it out with a lowest discernible value of 1 and auto-resizing): values below
/// `2·10^d` ps are counted exactly, larger ones in buckets whose width is at most `10^-d`
/// of the value, `d` being the number of significant digits (3 by default). Quantiles and
/// fractions follow the crate's rules, so they are the values that crate would report (a
/// test records the same values into both); the counting is done here because the
/// crate's general `record` showed in the M/M/1 benchmark's profile, where a delay is
/// recorded for every customer.
///
/// Precision of [`quantile`](Histogram::quantile): let `x` be the exact sample quantile by
/// the nearest-rank rule (the `⌈q·n⌉`-th smallest value, at least the first). The result
/// `v` satisfies `x ≤ v ≤ x·(1 + 10^-d)`, up to the rounding of seconds to whole
/// picoseconds (±0.5 ps): like HdrHistogram it reports the top of the bucket, so quantiles
/// err upwards, the safe side for delay bounds. `v` never leaves `[min, max]`, which are
/// exact.
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
    /// Counts in HdrHistogram's order: index `((b + 1) << half_mag) + (v >> b) - half` for
    /// a value `v` in bucket `b`; grown on demand.
    counts: Vec<u64>,
    /// Values recorded.
    total: u64,
    digits: u8,
    /// log2 of half the sub-bucket count: `log2(v | sub_mask) - half_mag` is `v`'s bucket
    /// (one `bsr` and a subtraction; counting leading zeros, HdrHistogram's form, takes
    /// two more instructions on CPUs without `lzcnt`).
    half_mag: u32,
    /// The sub-bucket count minus one.
    sub_mask: u64,
    /// Exact extremes in picoseconds: the buckets only know them to bucket precision.
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
        Self::with_significant_digits(DEFAULT_SIGNIFICANT_DIGITS)
            .unwrap_or_else(|| unreachable!("3 significant digits are always valid"))
    }

    /// An empty histogram keeping `digits` significant decimal digits; `None` unless
    /// `digits` is in `1..=5`. Memory grows about tenfold per extra digit.
    pub fn with_significant_digits(digits: u8) -> Option<Self> {
        if !(1..=5).contains(&digits) {
            return None;
        }
        // HdrHistogram's sub-bucket count: the power of two covering 2·10^d single units.
        let largest = 2 * 10u64.pow(u32::from(digits));
        let mag = 64 - (largest - 1).leading_zeros(); // ceil(log2(largest))
        Some(Histogram {
            counts: Vec::new(),
            total: 0,
            digits,
            half_mag: mag - 1,
            sub_mask: (1u64 << mag) - 1,
            min_ps: u64::MAX,
            max_ps: 0,
            rejected: 0,
        })
    }

    /// The number of significant decimal digits kept.
    pub fn significant_digits(&self) -> u8 {
        self.digits
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
    fn bucket(&self, ps: u64) -> u32 {
        (ps | self.sub_mask).ilog2() - self.half_mag
    }

    #[inline]
    fn index(&self, ps: u64) -> usize {
        let b = self.bucket(ps);
        // HdrHistogram's `((b + 1) << half_mag) + (ps >> b) - half`, with its two constant
        // terms cancelled: `(b + 1) << half_mag` less `half = 1 << half_mag`.
        ((u64::from(b) << self.half_mag) + (ps >> b)) as usize
    }

    /// The lowest value counted at `index`.
    fn value_at(&self, index: usize) -> u64 {
        let half = 1u64 << self.half_mag;
        let i = index as u64;
        let bucket = i >> self.half_mag;
        let sub = (i & (half - 1)) + half;
        if bucket == 0 {
            sub - half
        } else {
            sub << (bucket - 1)
        }
    }

    fn lowest_equivalent(&self, ps: u64) -> u64 {
        let b = self.bucket(ps);
        (ps >> b) << b
    }

    fn highest_equivalent(&self, ps: u64) -> u64 {
        if ps == u64::MAX {
            return u64::MAX;
        }
        let b = self.bucket(ps);
        self.lowest_equivalent(ps).saturating_add(1u64 << b) - 1
    }

    #[inline]
    fn record_picos(&mut self, ps: u64) {
        self.record_n(ps.min(MAX_PICOS), 1);
    }

    #[inline]
    fn record_n(&mut self, ps: u64, n: u64) {
        self.count_n(ps, n);
        if ps < self.min_ps {
            self.min_ps = ps;
        }
        if ps > self.max_ps {
            self.max_ps = ps;
        }
    }

    /// Counts `n` values `ps` (the extremes are left alone).
    #[inline]
    fn count_n(&mut self, ps: u64, n: u64) {
        let i = self.index(ps);
        match self.counts.get_mut(i) {
            Some(c) => *c += n,
            None => self.grow_and_count(i, n),
        }
        // Not saturating: 2^64 values are beyond any run.
        self.total += n;
    }

    /// Grows the counts to the end of `i`'s bucket, then counts `n` at `i`.
    #[cold]
    fn grow_and_count(&mut self, i: usize, n: u64) {
        let half = 1usize << self.half_mag;
        let end = (i / half + 1) * half;
        self.counts.resize(end, 0);
        self.counts[i] += n;
    }

    /// The number of values recorded (rejected ones not included).
    pub fn count(&self) -> u64 {
        self.total
    }

    /// `true` when no value has been recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
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
        // HdrHistogram's rule: the first bucket whose running count reaches ⌈q·n⌉ (at
        // least 1), reported as the top of that bucket (its bottom for q = 0).
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut running = 0u64;
        let mut ps = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            running += c;
            if running >= rank {
                let v = self.value_at(i);
                ps = if q == 0.0 {
                    self.lowest_equivalent(v)
                } else {
                    self.highest_equivalent(v)
                };
                break;
            }
        }
        Duration::from_picos(ps.clamp(self.min_ps, self.max_ps)).as_secs_f64()
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
        // Every value counted in buckets up to and including `ps`'s.
        let end = (self.index(ps) + 1).min(self.counts.len());
        let below: u64 = self.counts[..end].iter().sum();
        below as f64 / self.total as f64
    }

    /// Adds everything `other` has recorded (e.g. per-replication histograms into one).
    /// With equal precision the result is exactly that of recording every value here; from
    /// a histogram with more digits, values are rounded to this one's buckets.
    pub fn merge(&mut self, other: &Histogram) {
        self.rejected += other.rejected;
        if other.is_empty() {
            return;
        }
        if other.digits == self.digits {
            if self.counts.len() < other.counts.len() {
                self.counts.resize(other.counts.len(), 0);
            }
            for (a, b) in self.counts.iter_mut().zip(&other.counts) {
                *a += b;
            }
            self.total = self.total.saturating_add(other.total);
        } else {
            // As HdrHistogram adds across layouts: each bucket's lowest value, n times.
            for (i, &c) in other.counts.iter().enumerate() {
                if c != 0 {
                    self.count_n(other.value_at(i), c);
                }
            }
        }
        self.min_ps = self.min_ps.min(other.min_ps);
        self.max_ps = self.max_ps.max(other.max_ps);
    }

    /// Forgets every value (e.g. at the end of the warm-up period); keeps the memory.
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
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

        /// The same quantiles and fractions as the `hdrhistogram` crate (auto-resizing,
        /// lowest discernible value 1 ps) given the same values: the layout and rules are
        /// that crate's, so results did not change when the counting moved here.
        #[test]
        fn same_as_hdrhistogram(
            xs in proptest::collection::vec(
                prop_oneof![Just(0u64), 0u64..3_000, 0u64..10_000_000, 0u64..200_000_000_000_000], 1..400),
            qs in proptest::collection::vec(0.0f64..=1.0, 1..10),
            digits in 1u8..=4,
        ) {
            let mut ours = Histogram::with_significant_digits(digits).expect("valid");
            let mut theirs = hdrhistogram::Histogram::<u64>::new(digits).expect("valid");
            for &x in &xs {
                ours.record_duration(Duration::from_picos(x));
                theirs.record(x).expect("in range");
            }
            let (lo, hi) = (*xs.iter().min().unwrap(), *xs.iter().max().unwrap());
            prop_assert_eq!(ours.count(), theirs.len());
            for &q in qs.iter().chain(&[0.0, 0.5, 0.99, 1.0]) {
                let want = Duration::from_picos(theirs.value_at_quantile(q).clamp(lo, hi)).as_secs_f64();
                prop_assert_eq!(ours.quantile(q), want, "q={}", q);
            }
            for &x in xs.iter().take(10) {
                let secs = Duration::from_picos(x).as_secs_f64();
                let want = theirs.quantile_below(Duration::from_secs_f64(secs).as_picos());
                prop_assert_eq!(ours.fraction_at_or_below(secs), want);
            }
        }

        #[test]
        fn merge_across_digits_as_hdrhistogram(
            xs in proptest::collection::vec(0u64..50_000_000_000, 1..200),
            ys in proptest::collection::vec(0u64..50_000_000_000, 1..200),
        ) {
            let (mut a, mut b) = (Histogram::with_significant_digits(2).unwrap(), Histogram::with_significant_digits(3).unwrap());
            let (mut ha, mut hb) = (hdrhistogram::Histogram::<u64>::new(2).unwrap(), hdrhistogram::Histogram::<u64>::new(3).unwrap());
            for &x in &xs { a.record_duration(Duration::from_picos(x)); ha.record(x).unwrap(); }
            for &y in &ys { b.record_duration(Duration::from_picos(y)); hb.record(y).unwrap(); }
            a.merge(&b);
            ha.add(&hb).unwrap();
            let lo = xs.iter().chain(&ys).min().copied().unwrap();
            let hi = xs.iter().chain(&ys).max().copied().unwrap();
            prop_assert_eq!(a.count(), ha.len());
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
                let want = Duration::from_picos(ha.value_at_quantile(q).clamp(lo, hi)).as_secs_f64();
                prop_assert_eq!(a.quantile(q), want, "q={}", q);
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
