//! [`BatchMeans`]: confidence intervals from one long run by non-overlapping batch means,
//! with batch-size doubling to bound memory.

use super::batch_store::BatchStore;
use super::estimate::Estimate;
use super::tally::Tally;

/// The number of batches [`BatchMeans::estimate`] is usually asked for: Schmeiser (1982)
/// finds 10 to 30 batches a good compromise between too few degrees of freedom (a wide
/// t quantile) and batches too short to be independent.
pub const DEFAULT_NUM_BATCHES: usize = 20;

/// The default bound on stored batch means of [`BatchMeans::new`]: 8 KiB, and fine enough
/// that, once the run has 1024 observations, regrouping into [`DEFAULT_NUM_BATCHES`]
/// batches leaves out at most 19 of at least 512 stored batches (under 4 % of the run).
pub const DEFAULT_MAX_STORED_BATCHES: usize = 1024;

/// The method of non-overlapping batch means over a single long run (Law, *Simulation
/// Modeling and Analysis*, ch. 9).
///
/// Observations of a steady-state run are correlated, so their sample variance says little
/// about the error of their mean. Cut into `k` long batches, the batch means are nearly
/// independent and nearly normal; the Student-t interval of [`Estimate`] is then formed
/// from those `k` means. Delete the warm-up first (e.g. with [`Mser5`](super::Mser5), then
/// [`reset`](BatchMeans::reset)): batch means assume a stationary series.
///
/// Bounded memory: the run length is not known in advance, so observations go into
/// batches of size `m` (starting at 1) and at most `M` batch means are stored
/// ([`DEFAULT_MAX_STORED_BATCHES`] by default). When `M` batches are full, adjacent pairs
/// are averaged into `M/2` batches of size `2m` — exact, since the batches are equally
/// long — and filling goes on with size `2m` (the batch-doubling scheme of Fishman and
/// Yarberry 1997). Recording is O(1) amortised and never allocates; the store is allocated
/// once up front.
///
/// [`estimate(k)`](BatchMeans::estimate) regroups the `L` stored batches into `k` equal
/// batches of `⌊L/k⌋` stored ones each. The `L mod k` oldest stored batches (those nearest
/// the initial transient) and the incomplete batch being filled are left out, so that all
/// `k` batches have the same size, as the method assumes.
#[derive(Debug, Clone)]
pub struct BatchMeans {
    /// The batches, in bounded memory.
    store: BatchStore,
    /// Every observation, for the overall mean, count and extremes.
    all: Tally,
}

impl Default for BatchMeans {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchMeans {
    /// Batch means storing at most [`DEFAULT_MAX_STORED_BATCHES`] batches.
    pub fn new() -> Self {
        Self::with_max_stored_batches(DEFAULT_MAX_STORED_BATCHES)
    }

    /// Batch means storing at most `max_stored` batches (rounded up to an even number, at
    /// least 4). To leave out little data, keep it well above the `k` asked of
    /// [`estimate`](BatchMeans::estimate): at most `k − 1` of at least `max_stored / 2`
    /// stored batches are dropped.
    pub fn with_max_stored_batches(max_stored: usize) -> Self {
        BatchMeans {
            store: BatchStore::new(max_stored, 1),
            all: Tally::new(),
        }
    }

    /// Adds one observation. O(1) amortised: every `max_stored/2 · m` observations, one
    /// O(`max_stored`) pass halves the store. No allocation.
    #[inline]
    pub fn record(&mut self, x: f64) {
        self.all.record(x);
        self.store.record(x);
    }

    /// The number of observations recorded.
    pub fn count(&self) -> u64 {
        self.all.count()
    }

    /// The mean of every observation recorded, the incomplete batch included; NaN when
    /// empty.
    pub fn mean(&self) -> f64 {
        self.all.mean()
    }

    /// The current batch size `m`: observations per stored batch.
    pub fn batch_size(&self) -> u64 {
        self.store.batch_size()
    }

    /// The stored complete batch means, oldest first, each over
    /// [`batch_size`](BatchMeans::batch_size) observations.
    pub fn batch_means(&self) -> &[f64] {
        self.store.means()
    }

    /// The 95 % confidence interval for the steady-state mean from `num_batches` equal
    /// batches ([`DEFAULT_NUM_BATCHES`] is the usual choice); `n` in the result is the
    /// number of batches actually used. With fewer stored batches than asked for, each
    /// stored batch is one batch (so `n` is smaller than asked, and below 2 the interval
    /// is NaN, as for [`Estimate`]). `num_batches` below 2 is taken as 2.
    pub fn estimate(&self, num_batches: usize) -> Estimate {
        let k = num_batches.max(2);
        let means = self.store.means();
        let stored = means.len();
        if stored <= k {
            return Estimate::from_samples(means);
        }
        let group = stored / k;
        // Drop the oldest leftovers: they are the ones nearest the initial transient.
        let used = &means[stored - group * k..];
        let mut batches = Tally::new();
        for chunk in used.chunks_exact(group) {
            batches.record(chunk.iter().sum::<f64>() / group as f64);
        }
        Estimate::from_tally(&batches)
    }

    /// Forgets every observation and returns to batch size 1 (e.g. after the warm-up);
    /// keeps the memory.
    pub fn reset(&mut self) {
        self.store.reset();
        self.all.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn doubling_keeps_exact_batch_means() {
        let mut bm = BatchMeans::with_max_stored_batches(4);
        for i in 0..16 {
            bm.record(f64::from(i));
        }
        // 16 observations: stores filled at 4 (→ 2 of size 2), 8 (→ 2 of size 4), 16
        // (→ 2 of size 8).
        assert_eq!(bm.batch_size(), 8);
        assert_eq!(bm.batch_means(), &[3.5, 11.5]);
        assert_eq!(bm.count(), 16);
        assert_eq!(bm.mean(), 7.5);
        assert!(bm.batch_means().len() < 4);
    }

    #[test]
    fn estimate_groups_newest_batches() {
        let mut bm = BatchMeans::with_max_stored_batches(100);
        for i in 0..7 {
            bm.record(f64::from(i));
        }
        // 7 stored batches of 1; k = 3 → groups of 2 from the newest 6: 1.5, 3.5, 5.5.
        let e = bm.estimate(3);
        assert_eq!(e.n, 3);
        assert_eq!(e.mean, 3.5);
        assert_eq!(e, Estimate::from_samples(&[1.5, 3.5, 5.5]));
        // Fewer stored than asked: each stored batch counts as one.
        assert_eq!(bm.estimate(20).n, 7);
        assert_eq!(bm.estimate(0).n, 2);
    }

    #[test]
    fn empty_and_reset() {
        let mut bm = BatchMeans::default();
        let e = bm.estimate(DEFAULT_NUM_BATCHES);
        assert_eq!(e.n, 0);
        assert!(e.mean.is_nan() && e.ci95.is_nan());
        for _ in 0..5000 {
            bm.record(1.0);
        }
        bm.reset();
        assert_eq!(bm.count(), 0);
        assert_eq!(bm.batch_size(), 1);
        assert!(bm.batch_means().is_empty());
    }

    #[test]
    fn iid_data_agrees_with_replications() {
        // On independent data batch means and independent replications estimate the same
        // thing: both intervals cover the true mean and have similar widths (the ratio of
        // two s's with 19 degrees of freedom each rarely leaves [0.5, 2]).
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
        let normal = Normal::new(5.0, 2.0).expect("valid normal");
        let mut bm = BatchMeans::new();
        let mut reps = Vec::new();
        for _ in 0..20 {
            let mut rep = Tally::new();
            for _ in 0..5000 {
                let x = normal.sample(&mut rng);
                bm.record(x);
                rep.record(x);
            }
            reps.push(rep.mean());
        }
        let by_reps = Estimate::from_samples(&reps);
        let by_batches = bm.estimate(DEFAULT_NUM_BATCHES);
        assert_eq!(by_batches.n, 20);
        assert!(by_reps.contains(5.0), "{by_reps:?}");
        assert!(by_batches.contains(5.0), "{by_batches:?}");
        let ratio = by_batches.ci95 / by_reps.ci95;
        assert!((0.5..2.0).contains(&ratio), "{by_batches:?} vs {by_reps:?}");
        // The ideal half-width: 2.093 · 2 / √100 000.
        let ideal = 2.093 * 2.0 / (100_000f64).sqrt();
        assert!((0.5..2.0).contains(&(by_batches.ci95 / ideal)));
    }

    #[test]
    fn correlated_data_widens_the_interval() {
        // AR(1) with φ = 0.9: the variance of the mean is (1 + φ)/(1 − φ) = 19 times the
        // iid one, so the honest interval is about √19 ≈ 4.4 times the naive one.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let noise = Normal::new(0.0, 1.0).expect("valid normal");
        let mut bm = BatchMeans::new();
        let mut naive = Tally::new();
        let mut x = 0.0;
        for _ in 0..200_000 {
            x = 0.9 * x + noise.sample(&mut rng);
            bm.record(x);
            naive.record(x);
        }
        let naive_ci = 1.96 * naive.std_dev() / (naive.count() as f64).sqrt();
        let e = bm.estimate(DEFAULT_NUM_BATCHES);
        let widening = e.ci95 / naive_ci;
        assert!((2.5..8.0).contains(&widening), "widening {widening}");
        assert!(e.contains(0.0), "{e:?}");
    }

    proptest! {
        #[test]
        fn bookkeeping_invariants(
            xs in proptest::collection::vec(-100.0f64..100.0, 0..600),
            max_stored in 1usize..40,
        ) {
            let mut bm = BatchMeans::with_max_stored_batches(max_stored);
            let mut all = Tally::new();
            for &x in &xs {
                bm.record(x);
                all.record(x);
            }
            let stored = bm.batch_means().len() as u64;
            prop_assert!(bm.batch_means().len() < max_stored.max(4).next_multiple_of(2));
            prop_assert!(bm.count() - stored * bm.batch_size() < bm.batch_size());
            prop_assert_eq!(bm.count(), xs.len() as u64);
            if !xs.is_empty() {
                prop_assert!((bm.mean() - all.mean()).abs() < 1e-9);
            }
            // The stored batch means are the means of consecutive runs of batch_size values.
            let m = bm.batch_size() as usize;
            for (i, &b) in bm.batch_means().iter().enumerate() {
                let direct = xs[i * m..(i + 1) * m].iter().sum::<f64>() / m as f64;
                prop_assert!((b - direct).abs() < 1e-9, "batch {}: {} vs {}", i, b, direct);
            }
        }
    }
}
