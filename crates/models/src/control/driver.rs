//! What both simulated control planes share (paper 000's managers in `shell`, paper
//! 001's TINA performers in `tina`): the loop of warm-up, batches and period marks that
//! drives a replication, what each counts of its calls, and the draws of a call's hosts
//! and holding time.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::model::{RepResult, Replication};
use atmlab_sim::rng::{SimRng, exp1};
use atmlab_sim::scenario::{RunLength, Warmup};
use atmlab_sim::stats::Histogram;
use rand::Rng;

use super::{ControlConfig, Holding, METRICS, Pairs};

/// What every plane counts of its calls in a measured period (the managers' and
/// TINA's).
#[derive(Debug, Clone, Default)]
pub(super) struct Calls {
    pub(super) attempts: u64,
    pub(super) established: u64,
    pub(super) blocked: u64,
    pub(super) failed: u64,
    pub(super) invocations: u64,
    pub(super) latency_sum: f64,
}

impl Calls {
    /// The first nine of [`METRICS`], the ones every plane has: blocking and failure
    /// probability, mean, 99th, 5th and 95th percentile setup latency (`latency` holds
    /// the period's setups), setups and offered calls per second, invocations per call.
    pub(super) fn metrics(&self, latency: &Histogram, secs: f64) -> [f64; 9] {
        let quantile = |q: f64| {
            if latency.count() > 0 {
                latency.quantile(q)
            } else {
                f64::NAN
            }
        };
        let decided = (self.established + self.blocked + self.failed) as f64;
        let ratio = |x: u64| {
            if decided > 0.0 {
                x as f64 / decided
            } else {
                0.0
            }
        };
        [
            ratio(self.blocked),
            ratio(self.failed),
            if self.established > 0 {
                self.latency_sum / self.established as f64
            } else {
                f64::NAN
            },
            quantile(0.99),
            quantile(0.05),
            quantile(0.95),
            self.established as f64 / secs,
            self.attempts as f64 / secs,
            if self.attempts > 0 {
                self.invocations as f64 / self.attempts as f64
            } else {
                0.0
            },
        ]
    }
}

/// The run's measured length and warm-up, both durations.
pub(super) fn lengths(rep: &Replication) -> Result<(Duration, Duration), SimError> {
    let d = match rep.length {
        RunLength::Duration(d) => d,
        RunLength::Count(_) => {
            return Err(model_err(
                "runs by duration: set run.duration, not run.count",
            ));
        }
    };
    let warmup = match rep.warmup {
        Warmup::Time(w) => w,
        Warmup::Observations(0) => Duration::ZERO,
        _ => {
            return Err(model_err(
                "the warm-up is a duration (run.warmup = \"30 s\"), not auto",
            ));
        }
    };
    Ok((d, warmup))
}

/// What the replication loop needs of a simulated control plane (the managers' here,
/// TINA's performers' in `tina`): the one loop of marks, batches and metrics for both.
pub(super) trait Driven {
    /// Schedules a period mark at `at`.
    fn schedule_mark(&mut self, at: Instant);
    /// Schedules the first call's arrival, at zero.
    fn begin(&mut self);
    /// Applies the next event due by `end`: `None` when there is none, `Some(true)` when
    /// it was a period mark.
    fn advance(&mut self, end: Instant) -> Option<bool>;
    /// Applies the events due by `end` up to the next period mark: how many (the mark
    /// counted) and whether a mark ended them (false: none is left by `end`). One call
    /// per period, so that a plane can run its events in a loop of its own, with no
    /// call through the trait object per event.
    fn advance_to_mark(&mut self, end: Instant) -> (u64, bool) {
        let mut n = 0;
        while let Some(is_mark) = self.advance(end) {
            n += 1;
            if is_mark {
                return (n, true);
            }
        }
        (n, false)
    }
    /// A new measured period: counters to zero, busy times noted.
    fn new_period(&mut self);
    /// The metrics of the period that lasted `span`, in [`METRICS`]' order.
    fn measure(&self, span: Duration) -> Vec<(&'static str, f64)>;
}

/// Runs `plane` for the warm-up and `d` in `rep.batches` batches.
pub(super) fn drive(
    plane: &mut dyn Driven,
    rep: &Replication,
    d: Duration,
    warmup: Duration,
) -> Result<RepResult, SimError> {
    let batches = rep.batches.max(1);
    let start = Instant::ZERO + warmup;
    let mut marks = vec![start];
    for b in 1..=batches {
        marks.push(start + Duration::from_picos(d.as_picos() / u64::from(batches) * u64::from(b)));
    }
    let end = *marks.last().unwrap_or(&start);
    for &m in &marks {
        plane.schedule_mark(m);
    }
    plane.begin();
    let mut batch_metrics = Vec::new();
    let mut mark = 0usize;
    let mut processed = 0u64;
    loop {
        let (n, is_mark) = plane.advance_to_mark(end);
        processed += n;
        if !is_mark {
            break;
        }
        if mark > 0 {
            let m = plane.measure(marks[mark] - marks[mark - 1]);
            batch_metrics.push(m.into_iter().map(|(_, v)| v).collect::<Vec<f64>>());
        }
        plane.new_period();
        mark += 1;
        if mark == marks.len() {
            break;
        }
    }
    let metrics: Vec<(&'static str, f64)> = if batches == 1 {
        METRICS
            .iter()
            .copied()
            .zip(batch_metrics.pop().unwrap_or_default())
            .collect()
    } else {
        // As wide as the batches (a plane without crashes reports none of their metrics).
        let width = batch_metrics.first().map_or(METRICS.len(), Vec::len);
        let mut m: Vec<(&'static str, f64)> =
            METRICS.iter().take(width).map(|k| (*k, 0.0)).collect();
        atmlab_sim::model::grand_means(&mut m, &batch_metrics);
        m
    };
    Ok(RepResult {
        metrics,
        events: processed,
        simulated: end - Instant::ZERO,
        truncation: None,
        batch_metrics: if batches > 1 {
            batch_metrics
        } else {
            Vec::new()
        },
    })
}

/// A call's host pair, drawn as the scenario says.
pub(super) fn draw_pair(cfg: &ControlConfig, rng: &mut SimRng) -> (usize, usize) {
    match &cfg.pairs {
        Pairs::List(list) if list.len() == 1 => list[0],
        Pairs::List(list) => list[rng.random_range(0..list.len())],
        Pairs::Any => {
            let n = cfg.hosts.len();
            let a = rng.random_range(0..n);
            let b = (a + 1 + rng.random_range(0..n - 1)) % n;
            (a, b)
        }
    }
}

/// A call's holding time, drawn as the scenario says.
pub(super) fn draw_hold(cfg: &ControlConfig, rng: &mut SimRng) -> Duration {
    match cfg.holding {
        Holding::Exponential(mean) => Duration::from_secs_f64(exp1(rng) * mean.as_secs_f64()),
        Holding::Deterministic(d) => d,
    }
}

/// `d` taken `n` times.
pub(super) fn times(d: Duration, n: u64) -> Duration {
    Duration::from_picos(d.as_picos().saturating_mul(n))
}

pub(super) fn model_err(message: impl Into<String>) -> SimError {
    SimError::Model {
        model: "control".into(),
        message: message.into(),
    }
}
