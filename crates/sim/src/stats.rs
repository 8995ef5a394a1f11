//! Output analysis: the statistics a simulation run collects, and the confidence intervals
//! drawn from them.
//!
//! What is here, and the method behind each:
//!
//! - [`Tally`]: count, mean, variance, min and max of observations (e.g. cell delays).
//!   Observations are taken in blocks of 16: a block's mean and squared deviations in two
//!   passes, then the block joins the running moments by the pairwise formula of Chan,
//!   Golub and LeVeque (1979), which also merges two tallies (per thread or per
//!   replication). This stays accurate where the textbook `Σx² − n·x̄²` cancels
//!   catastrophically, at least as well as Welford's (1962) recurrence, which it replaced
//!   because of its division per observation.
//! - [`TimeWeighted`]: the time average of a piecewise-constant quantity (queue length,
//!   buffer occupancy, number of active connections), the integral `∫ x(t) dt / T`
//!   accumulated at each change, with [`TimeWeighted::reset`] for warm-up deletion.
//! - [`DurationMean`] and [`TimeWeightedCount`]: the mean of durations and the time average
//!   of a whole-valued quantity, kept exactly in integer picoseconds and rounded once when
//!   read; cheaper than the two above on a hot path, and without their variance and
//!   extremes.
//! - [`Histogram`]: quantiles of non-negative values (waiting times) in bounded memory, on
//!   Gil Tene's HdrHistogram layout (its quantiles, counted here): values are kept at integer
//!   picoseconds with 3 significant decimal digits by default, so a reported quantile is at
//!   most 0.1 % above the exact sample quantile.
//! - [`Ratio`]: a numerator over a denominator, e.g. cells lost over cells offered.
//! - [`Estimate`]: a point estimate and the half-width of its two-sided 95 % Student-t
//!   confidence interval, from independent replications — the fixed-sample-size procedure
//!   of Law and Kelton (A. M. Law, *Simulation Modeling and Analysis*, 5th ed., 2015, ch. 9):
//!   `x̄ ± t(0.975; n−1) · s/√n`. The t quantile comes from the `statrs` crate
//!   ([`student_t_quantile`]).
//! - [`BatchMeans`]: the method of (non-overlapping) batch means over one long run (Law,
//!   ch. 9): the run is cut into `k` batches whose means are nearly independent when the
//!   batches are long, and the Student-t interval is formed from the `k` batch means. Memory
//!   is bounded by doubling the batch size whenever the stored batches fill up, as in
//!   Fishman and Yarberry (1997, *INFORMS J. Computing* 9(3)); 10 to 30 batches are
//!   recommended by Schmeiser (1982, *Operations Research* 30(3)), hence
//!   [`DEFAULT_NUM_BATCHES`] = 20.
//! - [`Mser5`]: warm-up (initial transient) detection by MSER-5 (White 1997, *Simulation*
//!   69(6); White, Cobb and Spratt 2000, *Proc. Winter Simulation Conference*): the
//!   truncation point minimises the marginal standard error of the batch means of 5
//!   observations that remain, searched over the first half of the run.
//!
//! Conventions shared by all of them:
//! - Recording is O(1) (amortised for the batch stores) and allocates nothing, so they can
//!   sit on the simulator's hot path: the batch stores are allocated once up front, and the
//!   histogram grows only when a value passes a new power of two, a few dozen times at most.
//! - A statistic with no data is `f64::NAN`, never a made-up 0: a serializer writes it as
//!   `null` (serde_json does), which a report shows as "no data". The same holds for the
//!   half-width of a confidence interval from fewer than two samples.
//! - Nothing here fails or panics on odd input (NaN, negative waiting times, time running
//!   backwards); each type documents what it does instead.
//! - Everything is deterministic: no clocks, no I/O, no hashing with random state.

mod batch_means;
mod batch_store;
mod estimate;
mod exact;
mod histogram;
mod mser;
mod ratio;
mod tally;
mod time_weighted;

pub use batch_means::{BatchMeans, DEFAULT_MAX_STORED_BATCHES, DEFAULT_NUM_BATCHES};
pub use estimate::{Estimate, student_t_quantile};
pub use exact::{DurationMean, TimeWeightedCount};
pub use histogram::{DEFAULT_SIGNIFICANT_DIGITS, Histogram};
pub use mser::{DEFAULT_MAX_MSER_BATCHES, MSER_BATCH_SIZE, Mser5};
pub use ratio::Ratio;
pub use tally::Tally;
pub use time_weighted::TimeWeighted;

use atmlab_core::time::Duration;

/// `d` in seconds, as statistics take it: the picoseconds times `1e-12`.
///
/// [`Duration::as_secs_f64`] divides by 10^12 instead, and converts the picoseconds as an
/// unsigned integer (several instructions on x86-64 without AVX-512); on the M/M/1
/// benchmark's path (two per customer) the division and its latency showed in the
/// profile. The product can differ from the quotient in the last bit (`1e-12` is not exact
/// in binary), which is why models use it for statistics and not for times.
#[inline(always)]
pub fn duration_secs(d: Duration) -> f64 {
    picos_f64(d.as_picos()) * 1e-12
}

/// `ps as f64`, the same value, converted as a signed integer when it fits (one
/// instruction on x86-64, where the unsigned conversion takes five).
///
/// The rare case is a function of its own on purpose: with both conversions inline, the
/// compiler sees that they agree and merges them back into the unsigned one.
#[inline(always)]
pub(crate) fn picos_f64(ps: u64) -> f64 {
    if ps <= i64::MAX as u64 {
        ps as i64 as f64
    } else {
        large_u64_to_f64(ps)
    }
}

#[cold]
#[inline(never)]
fn large_u64_to_f64(x: u64) -> f64 {
    x as f64
}
