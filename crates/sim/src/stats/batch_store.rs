//! The bounded store of batch means shared by [`BatchMeans`](super::BatchMeans) and
//! [`Mser5`](super::Mser5): observations fill batches of size `m`; at most `M` complete
//! batch means are kept, and when `M` are full adjacent pairs are averaged into `M/2`
//! batches of size `2m` (exact, since the batches are equally long; the batch-doubling
//! scheme of Fishman and Yarberry 1997).

/// Batch means in bounded memory.
#[derive(Debug, Clone)]
pub(super) struct BatchStore {
    /// Means of the complete stored batches, oldest first, each of `batch_size` values.
    means: Vec<f64>,
    /// Bound on `means.len()`; even, so pairwise merging leaves no odd one out.
    max_stored: usize,
    /// The batch size after a reset.
    initial_size: u64,
    batch_size: u64,
    /// The batch being filled.
    partial_sum: f64,
    partial_count: u64,
}

impl BatchStore {
    /// At most `max_stored` batch means (rounded up to an even number, at least 4), in
    /// batches of `initial_size` observations to begin with. Allocates once, here.
    pub(super) fn new(max_stored: usize, initial_size: u64) -> Self {
        let max_stored = max_stored.max(4).next_multiple_of(2);
        BatchStore {
            means: Vec::with_capacity(max_stored),
            max_stored,
            initial_size,
            batch_size: initial_size,
            partial_sum: 0.0,
            partial_count: 0,
        }
    }

    /// Adds one observation. O(1) amortised: every `max_stored/2 · m` observations, one
    /// O(`max_stored`) pass halves the store. No allocation.
    #[inline]
    pub(super) fn record(&mut self, x: f64) {
        self.partial_sum += x;
        self.partial_count += 1;
        if self.partial_count == self.batch_size {
            self.means.push(self.partial_sum / self.batch_size as f64);
            self.partial_sum = 0.0;
            self.partial_count = 0;
            if self.means.len() == self.max_stored {
                self.coarsen();
            }
        }
    }

    /// Averages adjacent pairs: `M` batches of size `m` become `M/2` of size `2m`.
    fn coarsen(&mut self) {
        let half = self.means.len() / 2;
        for i in 0..half {
            self.means[i] = 0.5 * (self.means[2 * i] + self.means[2 * i + 1]);
        }
        self.means.truncate(half);
        self.batch_size *= 2;
    }

    /// The stored complete batch means, oldest first.
    pub(super) fn means(&self) -> &[f64] {
        &self.means
    }

    /// Observations per stored batch.
    pub(super) fn batch_size(&self) -> u64 {
        self.batch_size
    }

    /// Sum and count of the incomplete batch being filled.
    pub(super) fn partial(&self) -> (f64, u64) {
        (self.partial_sum, self.partial_count)
    }

    /// Forgets everything and returns to the initial batch size; keeps the memory.
    pub(super) fn reset(&mut self) {
        self.means.clear();
        self.batch_size = self.initial_size;
        self.partial_sum = 0.0;
        self.partial_count = 0;
    }
}
