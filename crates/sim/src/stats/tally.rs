//! [`Tally`]: running count, mean, variance, min and max (blocks of 16 folded in by the
//! pairwise update of Chan et al.).

/// Observations held back and folded in together (see [`Tally`]).
const BLOCK: usize = 16;

/// Count, mean, variance, minimum and maximum of a stream of `f64` observations.
///
/// Observations are kept in a block of 16 and folded into the running moments when the
/// block fills (or a copy of it, when the tally is read). A block's own mean and sum of
/// squared deviations are taken in two passes (the sum first, then `Σ(x − x̄_block)²`), and
/// the block joins the running count, mean and sum of squared deviations `M2` by the
/// pairwise formula of Chan, Golub and LeVeque (1979), which [`Tally::merge`] also uses.
///
/// Why blocks rather than Welford's (1962) one-pass recurrence, used here before: Welford
/// divides by the count at every observation, and that division and the update that depends
/// on it dominated the M/M/1 benchmark's statistics (docs/performance.md). A block costs one
/// division, its sums are independent of each other (four interleaved partial sums,
/// which the CPU overlaps), and recording is a store. The accuracy is at least Welford's:
/// within a block the two-pass sums are the textbook accurate method, and across blocks the
/// pairwise update adds one rounding per block where Welford adds one per observation, and
/// like Welford it never forms large sums of squares to cancel (a test compares both
/// against exact arithmetic on data with a large offset).
///
/// The results differ from Welford's in the last bits, and depend only on the order of the
/// observations (and of [`Tally::merge`] calls), so runs stay reproducible.
///
/// With no observations, [`mean`](Tally::mean), [`min`](Tally::min) and
/// [`max`](Tally::max) are NaN; [`variance`](Tally::variance) is NaN below two
/// observations. A NaN observation is counted and poisons the mean and variance (on
/// purpose: a bad value upstream should show, not vanish); min and max ignore it.
#[derive(Debug, Clone, Copy)]
pub struct Tally {
    /// Observations folded into the fields below (the block's are not).
    count: u64,
    mean: f64,
    /// Sum of squared deviations from the mean (`M2`).
    m2: f64,
    min: f64,
    max: f64,
    /// Observations waiting in `block[..pending]`; always below [`BLOCK`].
    pending: usize,
    block: [f64; BLOCK],
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

/// Two tallies are equal when they hold the same moments once their blocks are folded in.
impl PartialEq for Tally {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.folded(), other.folded());
        a.count == b.count && a.mean == b.mean && a.m2 == b.m2 && a.min == b.min && a.max == b.max
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
            pending: 0,
            block: [0.0; BLOCK],
        }
    }

    /// Adds one observation. O(1), no allocation: a store, and every 16th time the fold.
    #[inline]
    pub fn record(&mut self, x: f64) {
        // `pending < BLOCK` always; the mask tells the compiler so (no bounds check).
        self.block[self.pending % BLOCK] = x;
        self.pending += 1;
        if self.pending == BLOCK {
            self.fold();
        }
    }

    /// Folds the pending block into the running moments.
    #[inline(never)]
    fn fold(&mut self) {
        let n = self.pending;
        self.pending = 0;
        let b = if n == BLOCK {
            // A full block: a constant length, so the loops unroll and vectorise.
            block_moments(&self.block)
        } else if n > 0 {
            block_moments(&self.block[..n])
        } else {
            return;
        };
        if b.min < self.min {
            self.min = b.min;
        }
        if b.max > self.max {
            self.max = b.max;
        }
        self.combine(n as u64, b.mean, b.m2);
    }

    /// Adds `n_b` observations of mean `mean_b` and sum of squared deviations `m2_b` to
    /// the running moments (Chan, Golub and LeVeque's pairwise update).
    #[inline(always)]
    fn combine(&mut self, count_b: u64, mean_b: f64, m2_b: f64) {
        if self.count == 0 {
            self.count = count_b;
            self.mean = mean_b;
            self.m2 = m2_b;
            return;
        }
        let n_a = self.count as f64;
        let n_b = count_b as f64;
        let n = n_a + n_b;
        let delta = mean_b - self.mean;
        // Weighting delta by the other side's share keeps the update exact when one side is
        // much larger than the other.
        self.mean += delta * (n_b / n);
        self.m2 += m2_b + delta * delta * (n_a * n_b / n);
        self.count += count_b;
    }

    /// This tally with its block folded in (for reading).
    fn folded(&self) -> Tally {
        let mut t = *self;
        t.fold();
        t
    }

    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.count + self.pending as u64
    }

    /// `true` when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// The sample mean; NaN when empty.
    pub fn mean(&self) -> f64 {
        let t = self.folded();
        if t.count == 0 { f64::NAN } else { t.mean }
    }

    /// The sum of the observations (`mean · count`); 0 when empty.
    pub fn sum(&self) -> f64 {
        let t = self.folded();
        t.mean * t.count as f64
    }

    /// The unbiased sample variance `Σ(x − x̄)²/(n − 1)`; NaN below two observations.
    pub fn variance(&self) -> f64 {
        let t = self.folded();
        if t.count < 2 {
            f64::NAN
        } else {
            // Rounding can leave M2 a hair below zero for (nearly) constant data.
            (t.m2 / (t.count - 1) as f64).max(0.0)
        }
    }

    /// The sample standard deviation, `√variance`; NaN below two observations.
    pub fn std_dev(&self) -> f64 {
        self.variance().sqrt()
    }

    /// The smallest observation; NaN when empty.
    pub fn min(&self) -> f64 {
        let t = self.folded();
        if t.count == 0 { f64::NAN } else { t.min }
    }

    /// The largest observation; NaN when empty.
    pub fn max(&self) -> f64 {
        let t = self.folded();
        if t.count == 0 { f64::NAN } else { t.max }
    }

    /// Adds everything `other` has recorded, as if its observations had been recorded here
    /// (Chan, Golub and LeVeque's pairwise update).
    pub fn merge(&mut self, other: &Tally) {
        let other = other.folded();
        if other.count == 0 {
            return;
        }
        self.fold();
        if other.min < self.min {
            self.min = other.min;
        }
        if other.max > self.max {
            self.max = other.max;
        }
        self.combine(other.count, other.mean, other.m2);
    }

    /// Forgets every observation (e.g. at the end of the warm-up period).
    pub fn reset(&mut self) {
        *self = Tally::new();
    }
}

/// Mean, sum of squared deviations, minimum and maximum of one block.
struct BlockMoments {
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

/// The moments of `xs` (not empty) in two passes: the mean, then the squared deviations
/// from it.
#[inline(always)]
fn block_moments(xs: &[f64]) -> BlockMoments {
    // Four interleaved partial sums, minima and maxima, combined in a fixed order:
    // deterministic, and independent operations that overlap (and vectorise) instead of
    // one dependent chain.
    let mut s = [0.0f64; 4];
    let mut lo = [f64::INFINITY; 4];
    let mut hi = [f64::NEG_INFINITY; 4];
    let quads = xs.chunks_exact(4);
    let rest = quads.remainder();
    for q in quads {
        for j in 0..4 {
            s[j] += q[j];
            // A comparison, as `f64::min`/`max` but with one instruction: a NaN compares
            // false and is ignored.
            lo[j] = if q[j] < lo[j] { q[j] } else { lo[j] };
            hi[j] = if q[j] > hi[j] { q[j] } else { hi[j] };
        }
    }
    for (j, &x) in rest.iter().enumerate() {
        s[j] += x;
        lo[j] = if x < lo[j] { x } else { lo[j] };
        hi[j] = if x > hi[j] { x } else { hi[j] };
    }
    let mean = ((s[0] + s[1]) + (s[2] + s[3])) / xs.len() as f64;
    let mut d2 = [0.0f64; 4];
    let quads = xs.chunks_exact(4);
    let rest = quads.remainder();
    for q in quads {
        for j in 0..4 {
            let d = q[j] - mean;
            d2[j] += d * d;
        }
    }
    for (j, &x) in rest.iter().enumerate() {
        let d = x - mean;
        d2[j] += d * d;
    }
    let pick_lo = |a: f64, b: f64| if b < a { b } else { a };
    let pick_hi = |a: f64, b: f64| if b > a { b } else { a };
    BlockMoments {
        mean,
        m2: (d2[0] + d2[1]) + (d2[2] + d2[3]),
        min: pick_lo(pick_lo(lo[0], lo[1]), pick_lo(lo[2], lo[3])),
        max: pick_hi(pick_hi(hi[0], hi[1]), pick_hi(hi[2], hi[3])),
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

    /// Welford's recurrence, which `Tally` used before its blocks: the accuracy to match.
    fn welford(xs: &[f64]) -> (f64, f64) {
        let (mut mean, mut m2) = (0.0, 0.0);
        for (i, &x) in xs.iter().enumerate() {
            let delta = x - mean;
            mean += delta / (i + 1) as f64;
            m2 += delta * (x - mean);
        }
        (mean, m2 / (xs.len() - 1) as f64)
    }

    #[test]
    fn at_least_as_accurate_as_welford() {
        // Integers with a large offset (exact in f64), so the exact mean and variance come
        // from integer arithmetic: Σx and nΣx² − (Σx)² in i128.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for &(offset, spread, n) in &[
            (1e9, 1_000u64, 100_000usize),
            (1e12, 1_000_000, 10_000),
            (0.0, 1 << 40, 100_003),
            (1e6, 7, 1_001),
        ] {
            let xs: Vec<f64> = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    offset + (state % spread) as f64
                })
                .collect();
            let ints: Vec<i128> = xs.iter().map(|&x| x as i128).collect();
            let (s1, s2) = ints
                .iter()
                .fold((0i128, 0i128), |(a, b), &x| (a + x, b + x * x));
            let nn = n as i128;
            let exact_mean = s1 as f64 / n as f64;
            let exact_var = ((nn * s2 - s1 * s1) as f64) / (nn * (nn - 1)) as f64;
            let mut t = Tally::new();
            for &x in &xs {
                t.record(x);
            }
            let (wm, wv) = welford(&xs);
            let err = |a: f64, b: f64| (a - b).abs() / b.abs();
            let (em, ev) = (err(t.mean(), exact_mean), err(t.variance(), exact_var));
            let (wem, wev) = (err(wm, exact_mean), err(wv, exact_var));
            assert!(em <= 1e-14 && ev <= 1e-9, "{offset}: {em} {ev}");
            // No worse than Welford in any case (measured: 2.5-35 times closer in each).
            assert!(
                em <= wem + f64::EPSILON,
                "mean {offset}: {em} vs Welford {wem}"
            );
            assert!(
                ev <= wev + 1e-15,
                "variance {offset}: {ev} vs Welford {wev}"
            );
        }
    }

    #[test]
    fn partial_blocks_and_copies_read_the_same() {
        // Reading folds a copy: the tally itself, its count and later records are unchanged.
        let mut t = Tally::new();
        let xs: Vec<f64> = (0..37).map(|i| f64::from(i * i % 11)).collect();
        for (i, &x) in xs.iter().enumerate() {
            t.record(x);
            assert_eq!(t.count(), i as u64 + 1);
            let (m, _) = two_pass(&xs[..=i]);
            assert!(close(t.mean(), m, 1e-14, 1e-14));
        }
        let copy = t;
        assert_eq!(copy, t);
        assert_eq!(t.min(), 0.0);
        assert_eq!(t.max(), 9.0); // the largest square modulo 11
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
