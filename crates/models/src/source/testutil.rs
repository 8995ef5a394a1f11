//! Shared helpers of the statistical tests: replications, a Student-t confidence
//! interval, and a driver that checks the trait's promises on every arrival.
//!
//! Every statistical check uses `REPS` = 20 independent replications (different RNG
//! streams of one seed), so the interval is mean ± t(0.975, 19) · s / √20. A 95 %
//! interval misses the truth in 5 % of seeds by design; the seeds are fixed, so a test
//! that passes keeps passing.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::rng::{RngFactory, SimRng};

use super::{Arrival, PhaseStats, TrafficSource};

/// Independent replications per statistical check.
pub(crate) const REPS: u32 = 20;

/// t(0.975, df = 19): the two-sided 95 % Student-t quantile for `REPS` = 20 replications.
const T_975_DF19: f64 = 2.093;

/// The RNG stream of replication `rep` of a test seeded with `seed`.
pub(crate) fn rng(seed: u64, rep: u32) -> SimRng {
    RngFactory::new(seed, rep).stream(0)
}

/// Sample mean and 95 % Student-t half-width of `REPS` independent estimates.
pub(crate) fn mean_hw(xs: &[f64]) -> (f64, f64) {
    assert_eq!(xs.len(), REPS as usize, "the t quantile is for df = 19");
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, T_975_DF19 * (var / n).sqrt())
}

/// Asserts that `truth` lies in the 95 % confidence interval built from `xs`, and
/// returns `(mean, half_width)` for reporting.
pub(crate) fn assert_ci(what: &str, xs: &[f64], truth: f64) -> (f64, f64) {
    let (m, hw) = mean_hw(xs);
    println!(
        "{what}: estimate {m:.6} ± {hw:.6} (95 % CI, {REPS} reps), theory {truth:.6}, \
         |error|/hw = {:.2}",
        (m - truth).abs() / hw
    );
    assert!(
        (m - truth).abs() <= hw,
        "{what}: theory {truth} outside 95 % CI {m} ± {hw}"
    );
    (m, hw)
}

/// Pulls arrivals until the first one at or after `horizon`, checking on each that time
/// never goes back and that `units >= 1`; returns the units that arrived before
/// `horizon` and the arrivals themselves when `keep` is set.
pub(crate) fn run_until<S: TrafficSource>(
    src: &mut S,
    rng: &mut SimRng,
    horizon: Instant,
    keep: bool,
) -> (u64, Vec<Arrival>) {
    let mut units = 0u64;
    let mut last = Instant::ZERO;
    let mut kept = Vec::new();
    while let Some(a) = src.next_arrival(rng) {
        assert!(a.at >= last, "arrival at {} before previous {}", a.at, last);
        assert!(a.units >= 1, "arrival with zero units at {}", a.at);
        last = a.at;
        if a.at >= horizon {
            break;
        }
        units += u64::from(a.units);
        if keep {
            kept.push(a);
        }
    }
    (units, kept)
}

/// What a two-phase source (phase 1 the burst, phase 0 the silence) showed in each of
/// `REPS` replications: its rate, its mean units per burst, and its mean burst and silence
/// durations in seconds.
pub(crate) struct TwoPhaseSamples {
    pub(crate) rate: Vec<f64>,
    pub(crate) burst: Vec<f64>,
    pub(crate) on: Vec<f64>,
    pub(crate) off: Vec<f64>,
}

/// Runs `REPS` replications of `secs` seconds of the source `mk` makes (replication `rep`
/// on stream [`rng`]`(seed, rep)`) and collects its [`TwoPhaseSamples`] from `stats`.
pub(crate) fn two_phase_samples<S: TrafficSource>(
    mk: impl Fn() -> S,
    stats: impl Fn(&S) -> &PhaseStats,
    seed: u64,
    secs: u64,
) -> TwoPhaseSamples {
    let horizon = Instant::ZERO + Duration::from_secs(secs);
    let mut out = TwoPhaseSamples {
        rate: Vec::new(),
        burst: Vec::new(),
        on: Vec::new(),
        off: Vec::new(),
    };
    for rep in 0..REPS {
        let mut src = mk();
        let (n, _) = run_until(&mut src, &mut rng(seed, rep), horizon, false);
        out.rate.push(n as f64 / secs as f64);
        let s = stats(&src);
        out.burst.push(s.mean_units(1).unwrap());
        out.on.push(s.mean_duration_secs(1).unwrap());
        out.off.push(s.mean_duration_secs(0).unwrap());
    }
    out
}
