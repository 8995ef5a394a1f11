//! Model kinds: what `atmlab sim run` can simulate.
//!
//! A model kind turns validated parameters into a prepared model, which runs one
//! replication at a time from its (seed, replication) and returns its metrics. The kinds
//! themselves live in `atmlab-models`; this crate only fixes the contract, so that the
//! runner, the scenario files and the reports are the same for every model.

use atmlab_core::time::Duration;

use crate::SimError;
use crate::scenario::{Params, RunConfig, RunLength, Warmup};

/// One documented parameter of a model kind (for `atmlab sim list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamDoc {
    /// The key, dotted for sub-tables (e.g. `arrival.kind`).
    pub key: &'static str,
    /// What it means, its unit and its default.
    pub doc: &'static str,
}

/// One replication to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replication {
    /// The scenario seed.
    pub seed: u64,
    /// The replication number (0-based).
    pub replication: u32,
    /// How long.
    pub length: RunLength,
    /// The warm-up (`Auto` only in a pilot run, whose truncation the runner then passes
    /// back as `Observations`).
    pub warmup: Warmup,
    /// Batches of the measured period (1: no batching; see [`RunConfig::batches`]).
    pub batches: u32,
}

/// What one replication measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RepResult {
    /// The metrics, in the order of [`ModelKind::metrics`].
    pub metrics: Vec<(&'static str, f64)>,
    /// Events the engine processed.
    pub events: u64,
    /// Simulated time covered.
    pub simulated: Duration,
    /// For a pilot run with `Warmup::Auto`: the MSER-5 truncation point, in observations
    /// of the model's primary series.
    pub truncation: Option<u64>,
    /// With batch means: each batch's metrics, in order (empty otherwise).
    pub batch_metrics: Vec<Vec<f64>>,
}

/// A model with validated parameters, ready to run replications (from any thread).
pub trait Prepared: Send + Sync {
    /// Warnings about the parameters (e.g. an unstable queue), shown before the run.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// Runs one replication. With `Warmup::Auto` it is a pilot run that reports the
    /// MSER-5 truncation point in [`RepResult::truncation`].
    fn run(&self, rep: &Replication) -> Result<RepResult, SimError>;
}

/// A kind of model.
pub trait ModelKind: Sync {
    /// The name used in scenario files (`model = "queue"`).
    fn name(&self) -> &'static str;
    /// One line on what it models.
    fn summary(&self) -> &'static str;
    /// Its parameters.
    fn parameters(&self) -> &'static [ParamDoc];
    /// Its metrics, by name.
    fn metrics(&self) -> &'static [&'static str];
    /// The unit of the metric `name` as a person reads it ("s", "cells", "ratio",
    /// "Mb/s"), shown in `sim run`'s table and on its plots' axes; `None` for a name the
    /// kind does not define (or a kind that says none).
    fn metric_unit(&self, name: &str) -> Option<&'static str> {
        let _ = name;
        None
    }
    /// The metrics among [`ModelKind::metrics`] that only some runs report (those a
    /// fault adds, say): a point has such a metric only when one of its replications
    /// reports it (a replication's metrics stop short of it), so that results of runs
    /// without it are as they were before the kind had it.
    fn conditional_metrics(&self) -> &'static [&'static str] {
        &[]
    }
    /// Validates the parameters of one point. The caller then checks for unread keys with
    /// [`Params::finish`].
    fn prepare(&self, params: &Params<'_>, run: &RunConfig) -> Result<Box<dyn Prepared>, SimError>;
}

/// Looks `name` up in a model kind's table of metric units: an entry whose name ends in
/// `*` covers every metric that starts with what precedes it (`nv_cdf_*`).
pub fn unit_in(units: &[(&'static str, &'static str)], name: &str) -> Option<&'static str> {
    units.iter().find_map(|&(m, u)| {
        let hit = match m.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => m == name,
        };
        hit.then_some(u)
    })
}

/// A replication's overall metrics from its batches: the grand mean of the batch means,
/// in place of `metrics`' values (no-op without batches).
pub fn grand_means(metrics: &mut [(&'static str, f64)], batches: &[Vec<f64>]) {
    if batches.is_empty() {
        return;
    }
    for (i, m) in metrics.iter_mut().enumerate() {
        m.1 = batches
            .iter()
            .map(|b| b.get(i).copied().unwrap_or(f64::NAN))
            .sum::<f64>()
            / batches.len() as f64;
    }
}
