//! Running a model whose one measuring component reports the metrics: by duration, with
//! a warm-up by time and, optionally, batch means (the runner's `[run] batches`). Paper
//! 003's `access` and `backbone` models run this way, and read their common `link`
//! parameter here ([`link_rate`]).

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, ComponentId, Simulation};
use atmlab_sim::model::{RepResult, Replication, grand_means};
use atmlab_sim::scenario::{Params, RunConfig, RunLength, Warmup, parse_bit_rate};

/// The component that measures a run.
pub(crate) trait Measured {
    /// Its metrics at `now`.
    fn measure(&mut self, now: Instant) -> Vec<(&'static str, f64)>;
    /// Starts a new batch at `now` (statistics restart; the state carries on).
    fn new_batch(&mut self, now: Instant);
}

/// Runs `sim` for the replication's duration, measuring with component `id`.
///
/// The simulation may hold its components boxed or by value (`S`); with one component
/// type, `S` is `C` itself.
pub(crate) fn run_by_duration<M: 'static, S: Component<M>, C: Component<M> + Measured>(
    sim: &mut Simulation<M, S>,
    id: ComponentId,
    rep: &Replication,
    model: &str,
) -> Result<RepResult, SimError> {
    let RunLength::Duration(d) = rep.length else {
        return Err(SimError::Model {
            model: model.into(),
            message: "run by duration only: set [run] duration".into(),
        });
    };
    if let Warmup::Time(w) = rep.warmup
        && w > Duration::ZERO
    {
        sim.run_until(Instant::ZERO + w, None)?;
        sim.reset_stats();
    }
    let missing = || SimError::Model {
        model: model.into(),
        message: "its measuring component is missing".into(),
    };
    let end = Instant::ZERO + d;
    let batches = u64::from(rep.batches.max(1));
    let mut batch_metrics: Vec<Vec<f64>> = Vec::new();
    sim.run_in_batches(end, batches, |sim, t, last| {
        if batches > 1 {
            let c = sim.component_mut::<C>(id).ok_or_else(missing)?;
            batch_metrics.push(c.measure(t).into_iter().map(|(_, v)| v).collect());
            if !last {
                c.new_batch(t);
            }
        }
        Ok(())
    })?;
    let c = sim.component_mut::<C>(id).ok_or_else(missing)?;
    let mut metrics = c.measure(end);
    grand_means(&mut metrics, &batch_metrics);
    Ok(RepResult {
        metrics,
        events: sim.events_processed(),
        simulated: d,
        truncation: None,
        batch_metrics,
    })
}

/// Refuses the run settings such a model cannot honour: a run length by count, and the
/// automatic warm-up (MSER-5 needs a pilot run the batch structure does not give).
pub(crate) fn check_run(params: &Params<'_>, run: &RunConfig, model: &str) -> Result<(), SimError> {
    if let RunLength::Count(_) = run.length {
        return Err(params.error_at(
            "run.count",
            format!("the {model} model runs by time: set [run] duration, not count"),
        ));
    }
    if run.warmup == Warmup::Auto {
        return Err(params.error_at(
            "run.warmup",
            format!("the {model} model takes a warm-up time, not \"auto\""),
        ));
    }
    Ok(())
}

/// The `link` parameter of paper 003's models: the link rate in bits/s, 150 Mb/s (the
/// paper's links) when absent. A rate of zero is refused: every cell time derives from it.
pub(crate) fn link_rate(params: &Params<'_>) -> Result<f64, SimError> {
    let link = match params.raw("link") {
        None => 150e6,
        Some(v) => parse_bit_rate(v).map_err(|m| params.error("link", m))?,
    };
    // `parse_bit_rate` already refuses negative and non-finite rates.
    if !(link.is_finite() && link > 0.0) {
        return Err(params.error("link", "must be faster than 0 b/s"));
    }
    Ok(link)
}
