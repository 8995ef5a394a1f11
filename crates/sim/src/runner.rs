//! Runs a scenario: every sweep point times every replication, in parallel, reproducibly.
//!
//! Jobs are (point, replication) pairs. Each job builds its own model and draws from its
//! own RNG streams, keyed by (seed, replication, stream), so no job can influence another
//! and the results do not depend on the number of threads or the order jobs finish in:
//! they are collected by index. A job with an automatic warm-up runs twice: a pilot pass
//! that finds the MSER-5 truncation point, then the measured pass, which replays the same
//! random numbers and resets its statistics at that point.
//!
//! With `batches` set, the one replication of each point is cut into consecutive batches
//! and the interval comes from the batch means instead (the model reports them).
//!
//! Memory: a job keeps its model only while it runs; what survives is one value per
//! metric, so a sweep of thousands of points holds no raw samples.

use std::time::Instant as WallClock;

use rayon::prelude::*;
use toml::{Table, Value};

use crate::SimError;
use crate::model::{ModelKind, Prepared, RepResult, Replication};
use crate::scenario::{Params, Scenario, Warmup};
use crate::stats::Estimate;

/// One point of a sweep, and what its replications measured.
#[derive(Debug, Clone)]
pub struct PointResult {
    /// The swept keys and their values at this point.
    pub swept: Vec<(String, Value)>,
    /// The full parameter table of this point.
    pub params: Table,
    /// Each metric across replications.
    pub metrics: Vec<(String, Estimate)>,
    /// The replications, in order.
    pub replications: Vec<RepResult>,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The scenario as run (after overrides).
    pub scenario: Scenario,
    /// The points, in sweep order.
    pub points: Vec<PointResult>,
    /// Warnings from the models, one per point that had any.
    pub warnings: Vec<String>,
    /// Events processed over all jobs.
    pub events: u64,
    /// Simulated seconds over all jobs.
    pub simulated_seconds: f64,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Threads used.
    pub threads: usize,
}

/// How to run.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Called after each job with (jobs done, jobs in all), from worker threads (with one
    /// thread, from the calling thread).
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// The prepared model of each point, and the warnings about them.
pub type PreparedPoints = (Vec<Box<dyn Prepared>>, Vec<String>);

/// Validates every point of `scn` against `kind` without running anything; returns the
/// prepared models and their warnings.
pub fn prepare(scn: &Scenario, kind: &dyn ModelKind) -> Result<PreparedPoints, SimError> {
    let mut prepared = Vec::new();
    let mut warnings = Vec::new();
    for point in scn.points() {
        let table = scn.params_at(&point)?;
        let params = Params::new(&scn.file, &table);
        let p = kind.prepare(&params, &scn.run)?;
        params.finish()?;
        for w in p.warnings() {
            let at = if point.is_empty() {
                String::new()
            } else {
                let kv: Vec<String> = point
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", crate::scenario::show(v)))
                    .collect();
                format!(" (at {})", kv.join(", "))
            };
            warnings.push(format!("{}: {w}{at}", scn.file));
        }
        prepared.push(p);
    }
    Ok((prepared, warnings))
}

fn run_job(p: &dyn Prepared, scn: &Scenario, replication: u32) -> Result<RepResult, SimError> {
    let mut rep = Replication {
        seed: scn.run.seed,
        replication,
        length: scn.run.length,
        warmup: scn.run.warmup,
        batches: scn.run.batches.unwrap_or(1),
    };
    if rep.warmup == Warmup::Auto {
        let pilot = p.run(&rep)?;
        rep.warmup = Warmup::Observations(pilot.truncation.unwrap_or(0));
        let mut r = p.run(&rep)?;
        r.events += pilot.events;
        r.truncation = pilot.truncation;
        return Ok(r);
    }
    p.run(&rep)
}

/// Runs every point and replication of `scn`.
pub fn run(
    scn: &Scenario,
    kind: &dyn ModelKind,
    opts: &RunOptions<'_>,
) -> Result<RunReport, SimError> {
    let (prepared, warnings) = prepare(scn, kind)?;
    let points = scn.points();
    let reps = scn.run.replications;
    let jobs: Vec<(usize, u32)> = (0..points.len())
        .flat_map(|p| (0..reps).map(move |r| (p, r)))
        .collect();
    let total = jobs.len() as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let one = |&(p, r): &(usize, u32)| {
        let out = run_job(prepared[p].as_ref(), scn, r);
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if let Some(cb) = opts.progress {
            cb(n, total);
        }
        out
    };
    // One thread: no pool, the jobs run here, in order. A pool of one would hand each job
    // to a fresh thread whose allocator heap starts empty, so the first job paid for
    // faulting in that heap's pages inside the measured time (1-7% of the M/M/1 benchmark
    // in alternated runs); there is nothing to gain from the hand-over.
    let pool = (opts.threads != 1)
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(opts.threads)
                .build()
                .map_err(|e| SimError::Model {
                    model: scn.model.clone(),
                    message: format!("cannot start worker threads: {e}"),
                })
        })
        .transpose()?;
    let threads = pool.as_ref().map_or(1, |p| p.current_num_threads());
    let start = WallClock::now();
    let results: Vec<Result<RepResult, SimError>> = match &pool {
        Some(pool) => pool.install(|| jobs.par_iter().map(one).collect()),
        None => jobs.iter().map(one).collect(),
    };
    let wall_seconds = start.elapsed().as_secs_f64();
    let mut results = results.into_iter();
    let mut out = Vec::with_capacity(points.len());
    let (mut events, mut simulated) = (0u64, 0f64);
    for point in points {
        let table = scn.params_at(&point)?;
        let mut reps_out = Vec::with_capacity(reps as usize);
        for _ in 0..reps {
            let r = results.next().expect("one result per job")?;
            if scn.run.batches.is_some() && r.batch_metrics.is_empty() {
                return Err(SimError::Model {
                    model: scn.model.clone(),
                    message: "this model kind does not report batches: drop [run] batches and use replications".into(),
                });
            }
            events += r.events;
            simulated += r.simulated.as_secs_f64();
            reps_out.push(r);
        }
        let batched = scn.run.batches.is_some();
        let metrics = kind
            .metrics()
            .iter()
            .enumerate()
            .map(|(i, name)| {
                // Replications, or with batch means the batches of the one replication.
                let samples: Vec<f64> = if batched {
                    reps_out
                        .iter()
                        .flat_map(|r| {
                            r.batch_metrics
                                .iter()
                                .map(move |b| b.get(i).copied().unwrap_or(f64::NAN))
                        })
                        .collect()
                } else {
                    reps_out
                        .iter()
                        .map(|r| r.metrics.get(i).map_or(f64::NAN, |m| m.1))
                        .collect()
                };
                ((*name).to_owned(), Estimate::from_samples(&samples))
            })
            .collect();
        out.push(PointResult {
            swept: point,
            params: table,
            metrics,
            replications: reps_out,
        });
    }
    Ok(RunReport {
        scenario: scn.clone(),
        points: out,
        warnings,
        events,
        simulated_seconds: simulated,
        wall_seconds,
        threads,
    })
}
