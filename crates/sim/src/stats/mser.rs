//! [`Mser5`]: warm-up detection by MSER-5 (White 1997; White, Cobb and Spratt 2000).

use super::batch_store::BatchStore;

/// Raw observations per batch in MSER-5 before any coarsening.
pub const MSER_BATCH_SIZE: u64 = 5;

/// The default bound on stored batch means of [`Mser5::new`] (32 KiB): runs of fewer than
/// 20 480 observations are analysed exactly, longer ones at a truncation resolution of at
/// most 1/2048 of the run.
pub const DEFAULT_MAX_MSER_BATCHES: usize = 4096;

/// Warm-up (initial transient) detection by the MSER-5 rule.
///
/// A run started empty and idle spends a while far from steady state; its early
/// observations bias the mean. MSER (Marginal Standard Error Rule, White 1997, *Simulation*
/// 69(6)) deletes the first `d` values where `d` minimises
///
/// ```text
/// MSER(d) = 1/(k − d)² · Σ_{j=d+1..k} (Z_j − Z̄(d))²
/// ```
///
/// the squared standard error of the mean of what is kept, up to a constant: deleting
/// biased values shrinks the sum faster than it shrinks `k − d`, until only noise is left.
/// MSER-5 applies the rule to the means `Z_j` of consecutive batches of 5 observations,
/// which smooths the noise that makes plain MSER erratic (White, Cobb and Spratt 2000,
/// *Proc. Winter Simulation Conference*, where it did best of five heuristics). Following
/// them, `d` is searched only over the first half of the batches: a minimum further out
/// comes from the few last values, and says the run is too short, not where it settles.
/// The incomplete last batch takes no part.
///
/// Bounded memory, an approximation: storing every 5-batch would grow with the run. At
/// most [`DEFAULT_MAX_MSER_BATCHES`] batch means are stored; when the store is full,
/// adjacent pairs are averaged, so batches hold 10, then 20, 40, … observations (the
/// analysis becomes MSER-10, MSER-20, …). Two things change: the truncation point can only
/// fall on a multiple of the current batch size, a resolution of at most 1/(store/2) of
/// the run; and the statistic is computed on coarser means (the same rule, MSER-m with
/// m = 5·2^j), which smooth more and can hide a transient shorter than a batch. Keeping
/// at least half the store (2048 batches by default) makes both effects small next to the
/// transients a run long enough to need the coarsening has to resolve. The stored 2^j-fold
/// means are exact means of their batches, so nothing else is lost.
///
/// Recording is O(1) amortised and never allocates (the store is allocated up front);
/// [`truncation`](Mser5::truncation) is O(stored batches).
#[derive(Debug, Clone)]
pub struct Mser5 {
    /// The 5-batches (or coarser), in bounded memory.
    store: BatchStore,
    count: u64,
}

impl Default for Mser5 {
    fn default() -> Self {
        Self::new()
    }
}

impl Mser5 {
    /// An empty analysis storing at most [`DEFAULT_MAX_MSER_BATCHES`] batch means.
    pub fn new() -> Self {
        Self::with_max_stored_batches(DEFAULT_MAX_MSER_BATCHES)
    }

    /// An empty analysis storing at most `max_stored` batch means (rounded up to an even
    /// number, at least 4).
    pub fn with_max_stored_batches(max_stored: usize) -> Self {
        Mser5 {
            store: BatchStore::new(max_stored, MSER_BATCH_SIZE),
            count: 0,
        }
    }

    /// Adds the next observation of the output series. O(1) amortised, no allocation.
    #[inline]
    pub fn record(&mut self, x: f64) {
        self.count += 1;
        self.store.record(x);
    }

    /// The number of observations recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The current number of observations per batch: 5, or 5·2^j after coarsening.
    pub fn batch_size(&self) -> u64 {
        self.store.batch_size()
    }

    /// The number of complete batches stored.
    pub fn num_batches(&self) -> usize {
        self.store.means().len()
    }

    /// The MSER-minimising number of batches to delete, `d*`, and whether it lies strictly
    /// inside the searched first half.
    fn optimum(&self) -> (usize, bool) {
        let means = self.store.means();
        let k = means.len();
        if k < 2 {
            return (0, false);
        }
        let last_d = k / 2;
        // Walk from the end with Welford's update, so each suffix's sum of squared
        // deviations comes without the cancellation of Σz² − (Σz)²/n (a transient at 100
        // over noise of 0.01 would lose it all).
        let (mut n, mut mean, mut m2) = (0.0f64, 0.0f64, 0.0f64);
        let mut best = (f64::INFINITY, 0usize);
        for d in (0..k).rev() {
            let z = means[d];
            n += 1.0;
            let delta = z - mean;
            mean += delta / n;
            m2 += delta * (z - mean);
            if d <= last_d {
                let stat = m2 / (n * n);
                // `<=`: on ties, prefer the smaller d (d is decreasing), deleting less.
                if stat <= best.0 {
                    best = (stat, d);
                }
            }
        }
        (best.1, best.1 < last_d)
    }

    /// The number of raw observations to delete as warm-up: `d* · batch_size`. 0 with
    /// fewer than two complete batches. Always at most half the observations.
    pub fn truncation(&self) -> usize {
        let (d, _) = self.optimum();
        let raw = d as u64 * self.store.batch_size();
        usize::try_from(raw).unwrap_or(usize::MAX)
    }

    /// Whether the truncation point is trustworthy: `false` when the minimum lies on the
    /// edge of the searched half (or fewer than two batches exist), the sign White, Cobb and
    /// Spratt (2000) read as a run too short for its transient. Lengthen the run then.
    pub fn truncation_is_reliable(&self) -> bool {
        self.optimum().1
    }

    /// The mean of the observations kept after deleting [`truncation`](Mser5::truncation)
    /// of them, the incomplete last batch included: the MSER estimate of the steady-state
    /// mean. NaN when nothing was recorded.
    pub fn truncated_mean(&self) -> f64 {
        let (d, _) = self.optimum();
        let means = self.store.means();
        let kept = &means[d.min(means.len())..];
        let m = self.store.batch_size() as f64;
        let (partial_sum, partial_count) = self.store.partial();
        let sum = kept.iter().sum::<f64>() * m + partial_sum;
        let n = kept.len() as f64 * m + partial_count as f64;
        if n == 0.0 { f64::NAN } else { sum / n }
    }

    /// Forgets every observation and returns to batches of 5; keeps the memory.
    pub fn reset(&mut self) {
        self.store.reset();
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// 500 observations at 100, then `rest` observations of noise around 1.
    fn step_series(rest: usize, seed: u64) -> Vec<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let noise = Normal::new(1.0, 0.5).expect("valid normal");
        let mut xs = vec![100.0; 500];
        xs.extend((0..rest).map(|_| noise.sample(&mut rng)));
        xs
    }

    #[test]
    fn finds_step_transient() {
        let mut m = Mser5::new();
        for x in step_series(4500, 1) {
            m.record(x);
        }
        assert_eq!(m.batch_size(), 5); // no coarsening at this length
        assert_eq!(m.truncation(), 500);
        assert!(m.truncation_is_reliable());
        assert!(
            (m.truncated_mean() - 1.0).abs() < 0.05,
            "{}",
            m.truncated_mean()
        );
    }

    #[test]
    fn finds_step_transient_when_coarsened() {
        // A store of 64 batches forces batch sizes 10, 20, 40, 80 over 5000 values: the
        // cut can only fall on a multiple of 80, so it lands on 480 or 560.
        let mut m = Mser5::with_max_stored_batches(64);
        for x in step_series(4500, 2) {
            m.record(x);
        }
        assert_eq!(m.batch_size(), 80);
        let t = m.truncation();
        assert!((480..=560).contains(&t), "truncation {t}");
        assert!(m.truncation_is_reliable());
        // Deleting at 480 keeps 20 values of 100 among 4520: a mean near 1.44 at worst.
        assert!(
            (m.truncated_mean() - 1.0).abs() < 0.5,
            "{}",
            m.truncated_mean()
        );
    }

    #[test]
    fn finds_smooth_transient() {
        // An exponentially decaying start, time constant 300, over noise: the bias is under
        // the noise's standard error after a few time constants.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let noise = Normal::new(0.0, 1.0).expect("valid normal");
        let mut m = Mser5::new();
        for i in 0..20_000 {
            let x = 50.0 * (-f64::from(i) / 300.0).exp() + noise.sample(&mut rng);
            m.record(x);
        }
        let t = m.truncation();
        assert!((600..4000).contains(&t), "truncation {t}");
        assert!(m.truncation_is_reliable());
        assert!(m.truncated_mean().abs() < 0.1);
    }

    #[test]
    fn stationary_series_deletes_little() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let noise = Normal::new(3.0, 1.0).expect("valid normal");
        let mut m = Mser5::new();
        for _ in 0..10_000 {
            m.record(noise.sample(&mut rng));
        }
        assert!(m.truncation() < 2500, "truncation {}", m.truncation());
        assert!((m.truncated_mean() - 3.0).abs() < 0.05);
    }

    #[test]
    fn short_or_empty_series() {
        let mut m = Mser5::default();
        assert_eq!(m.truncation(), 0);
        assert!(m.truncated_mean().is_nan());
        assert!(!m.truncation_is_reliable());
        for x in [1.0, 2.0, 3.0] {
            m.record(x);
        }
        // Only an incomplete batch: nothing to analyse, nothing deleted.
        assert_eq!(m.num_batches(), 0);
        assert_eq!(m.truncation(), 0);
        assert_eq!(m.truncated_mean(), 2.0);
        m.reset();
        assert_eq!(m.count(), 0);
        assert!(m.truncated_mean().is_nan());
    }

    #[test]
    fn constant_series_deletes_nothing() {
        let mut m = Mser5::new();
        for _ in 0..1000 {
            m.record(7.0);
        }
        assert_eq!(m.truncation(), 0);
        assert_eq!(m.truncated_mean(), 7.0);
    }

    proptest! {
        #[test]
        fn truncation_in_first_half_on_batch_boundary(
            xs in proptest::collection::vec(-10.0f64..10.0, 0..800),
            max_stored in 4usize..50,
        ) {
            let mut m = Mser5::with_max_stored_batches(max_stored);
            for &x in &xs {
                m.record(x);
            }
            let t = m.truncation() as u64;
            prop_assert_eq!(t % m.batch_size(), 0);
            prop_assert!(t <= m.count() / 2, "t={} n={}", t, m.count());
            if !xs.is_empty() {
                let kept = &xs[t as usize..];
                let direct = kept.iter().sum::<f64>() / kept.len() as f64;
                prop_assert!((m.truncated_mean() - direct).abs() < 1e-9);
            }
        }
    }
}
