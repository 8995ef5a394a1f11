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
//! With `precision` set, each point gains replications until its confidence intervals
//! are narrow enough ([`Precision`], Law & Kelton's sequential procedure): the runner
//! runs rounds of jobs for the points not yet done and decides each point's stopping
//! count from its replications in order, so the count, like every result, does not
//! depend on the threads (replications run past it in the same round are discarded).
//!
//! Memory: a job keeps its model only while it runs; what survives is one value per
//! metric, so a sweep of thousands of points holds no raw samples.

use std::time::Instant as WallClock;

use rayon::prelude::*;
use toml::{Table, Value};

use crate::SimError;
use crate::model::{ModelKind, Prepared, RepResult, Replication};
use crate::scenario::{Params, Precision, Scenario, Warmup};
use crate::stats::{Estimate, Tally};

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
    /// Warnings: the models' about their points, and the runner's (a precision not
    /// reached within `max_replications`, a small start for the sequential procedure).
    pub warnings: Vec<String>,
    /// Events processed over all jobs.
    pub events: u64,
    /// Simulated seconds over all jobs.
    pub simulated_seconds: f64,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Jobs run, including replications a sequential run discarded past a point's
    /// stopping count (the events and simulated seconds above count them too).
    pub jobs_run: u64,
    /// Threads used.
    pub threads: usize,
}

/// How to run.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Called after each job with (jobs done, jobs in all), from worker threads (with one
    /// thread, from the calling thread). With a precision target the jobs in all grow
    /// round by round.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// One point of a sweep: each swept key with its value there.
type SweepPoint = Vec<(String, Value)>;

/// The prepared model of each point, and the warnings about them.
pub type PreparedPoints = (Vec<Box<dyn Prepared>>, Vec<String>);

/// Validates every point of `scn` against `kind` without running anything; returns the
/// prepared models and their warnings.
pub fn prepare(scn: &Scenario, kind: &dyn ModelKind) -> Result<PreparedPoints, SimError> {
    let mut prepared = Vec::new();
    // Each distinct warning once, with the points it was raised at: a sweep that runs
    // deliberately past a limit (the gateway's offered load beyond the FDDI ring) says
    // so in one line, not one line per point.
    let mut raised: Vec<(String, Vec<SweepPoint>)> = Vec::new();
    let points = scn.points();
    // A swept parameter's value in [params] is replaced at every point, but a value
    // the file states must still be one the model takes: `sim check` refuses a
    // negative base rate whether or not a sweep overrides it.
    if points.iter().any(|p| !p.is_empty()) {
        let table = scn.params_at(&[])?;
        kind.prepare(&Params::new(&scn.file, &table), &scn.run)
            .map_err(|e| match e {
                SimError::Scenario { file, key, message } => SimError::Scenario {
                    file,
                    key,
                    message: format!(
                        "{message} (in [params]; the sweep replaces it at every point, \
                         but it must be valid too)"
                    ),
                },
                e => e,
            })?;
    }
    for point in &points {
        let table = scn.params_at(point)?;
        let params = Params::new(&scn.file, &table);
        let p = kind.prepare(&params, &scn.run)?;
        params.finish()?;
        for w in p.warnings() {
            match raised.iter_mut().find(|(t, _)| *t == w) {
                Some((_, at)) => at.push(point.clone()),
                None => raised.push((w, vec![point.clone()])),
            }
        }
        prepared.push(p);
    }
    let mut warnings: Vec<String> = raised
        .iter()
        .map(|(w, at)| {
            let at = match at.as_slice() {
                [p] if p.is_empty() => String::new(),
                [p] => format!(" (at {})", describe(p)),
                _ => format!(
                    " (at {} of {} points: {})",
                    at.len(),
                    points.len(),
                    describe_values(at)
                ),
            };
            format!("{}: {w}{at}", scn.file)
        })
        .collect();
    if let Some(prec) = &scn.run.precision {
        let known = kind.metrics();
        for m in &prec.metrics {
            if !known.contains(&m.as_str()) {
                return Err(SimError::Scenario {
                    file: scn.file.clone(),
                    key: "run.precision_metrics".into(),
                    message: format!(
                        "unknown metric {m:?}; model {} reports {}",
                        scn.model,
                        known.join(", ")
                    ),
                });
            }
        }
        if scn.run.replications < 10 {
            warnings.push(format!(
                "{}: run.precision starts from {} replications; Law & Kelton advise at least 10 (a small start can stop on a luckily narrow interval)",
                scn.file, scn.run.replications
            ));
        }
    }
    Ok((prepared, warnings))
}

/// A sweep point as `key = value, ...`, for messages.
fn describe(point: &[(String, Value)]) -> String {
    let kv: Vec<String> = point
        .iter()
        .map(|(k, v)| format!("{k} = {}", crate::scenario::show(v)))
        .collect();
    kv.join(", ")
}

/// The swept values a set of points takes, key by key: `k = a, b; l = c`.
fn describe_values(points: &[SweepPoint]) -> String {
    let Some(first) = points.first() else {
        return String::new();
    };
    let per_key: Vec<String> = first
        .iter()
        .enumerate()
        .map(|(i, (k, _))| {
            let mut seen: Vec<String> = Vec::new();
            for p in points {
                if let Some((_, v)) = p.get(i) {
                    let v = crate::scenario::show(v);
                    if !seen.contains(&v) {
                        seen.push(v);
                    }
                }
            }
            format!("{k} = {}", seen.join(", "))
        })
        .collect();
    per_key.join("; ")
}

/// Whether the metric tallied in `t` (over the first n replications of a point) is
/// within `prec` (see [`Precision`]).
fn met(t: &Tally, prec: &Precision) -> bool {
    // NaN (fewer than two values, or a NaN metric) is never within it.
    let e = Estimate::from_tally(t);
    e.ci95 <= prec.half_width_target() * e.mean.abs()
}

/// The warning for a point that reached `max_replications` (`reps` of them) before its
/// precision; `tallies` are its watched metrics (indices `watched`) over them.
fn unmet(
    scn: &Scenario,
    kind: &dyn ModelKind,
    point: &[(String, Value)],
    reps: usize,
    watched: &[usize],
    tallies: &[Tally],
    prec: &Precision,
) -> String {
    // The metric furthest from its target, among those that miss it (a NaN width, from a
    // metric that could not be computed, counts as furthest).
    let worst = watched
        .iter()
        .zip(tallies)
        .filter(|(_, t)| !met(t, prec))
        .map(|(&i, t)| {
            let w = Estimate::from_tally(t).relative_half_width();
            (i, if w.is_nan() { f64::INFINITY } else { w })
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let at = if point.is_empty() {
        String::new()
    } else {
        format!(" at {}", describe(point))
    };
    let what = worst.map_or_else(String::new, |(i, w)| {
        format!(
            ": {} has a relative half-width of {w:.4}, to reach {:.4} (γ/(1+γ))",
            kind.metrics().get(i).copied().unwrap_or("?"),
            prec.half_width_target()
        )
    });
    format!(
        "{}: run.precision {} not reached{at} after {reps} replications (max_replications){what}",
        scn.file, prec.relative,
    )
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

/// One share of a run's jobs (`atmlab sim run --shard I/N`), so that a sweep can be
/// spread over the tasks of a cluster scheduler and merged ([`crate::shard`]).
///
/// Jobs are dealt round-robin: with independent replications, job `k` of the (point,
/// replication) list in sweep order goes to shard `k mod N + 1`; with a precision target
/// (whose replications of one point depend on one another's results), point `p` with all
/// its replications goes to shard `p mod N + 1`. Every job runs in exactly one shard,
/// with the same seeds as unsharded, so the merged results are the unsharded ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which share, from 1.
    pub index: u32,
    /// How many shares.
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?}: expected I/N with 1 <= I <= N, e.g. 2/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a run (or a shard of one) measured, before the estimates: each point's kept
/// replications, by replication number, and what the run cost.
#[derive(Debug, Clone)]
pub struct RawRun {
    /// Per point (in sweep order), its replications run here: (number, result), in
    /// increasing number.
    pub points: Vec<Vec<(u32, RepResult)>>,
    /// The models' and the runner's warnings.
    pub warnings: Vec<String>,
    /// Events processed over all jobs.
    pub events: u64,
    /// Simulated seconds over all jobs.
    pub simulated_seconds: f64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Jobs run (discarded ones included).
    pub jobs_run: u64,
    /// Threads used.
    pub threads: usize,
}

/// Runs every point and replication of `scn`.
pub fn run(
    scn: &Scenario,
    kind: &dyn ModelKind,
    opts: &RunOptions<'_>,
) -> Result<RunReport, SimError> {
    let raw = run_raw(scn, kind, opts, None)?;
    assemble(scn, kind, raw)
}

/// Runs the jobs of `shard` (all of them without one) and returns what they measured.
pub fn run_raw(
    scn: &Scenario,
    kind: &dyn ModelKind,
    opts: &RunOptions<'_>,
    shard: Option<Shard>,
) -> Result<RawRun, SimError> {
    let (prepared, mut warnings) = prepare(scn, kind)?;
    let points = scn.points();
    // With a precision target a point's replications stay together (its stopping count
    // depends on all of them); otherwise each job is dealt on its own.
    let point_here = |p: usize| match (shard, &scn.run.precision) {
        (Some(s), Some(_)) => p % s.count as usize == (s.index - 1) as usize,
        _ => true,
    };
    let job_here = |k: usize| match (shard, &scn.run.precision) {
        (Some(s), None) => k % s.count as usize == (s.index - 1) as usize,
        _ => true,
    };
    let done = std::sync::atomic::AtomicU64::new(0);
    let total = std::sync::atomic::AtomicU64::new(0);
    let one = |&(p, r): &(usize, u32)| {
        let out = run_job(prepared[p].as_ref(), scn, r);
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if let Some(cb) = opts.progress {
            cb(n, total.load(std::sync::atomic::Ordering::Relaxed));
        }
        out
    };
    // One thread: no pool, the jobs run here, in order. A pool of one would hand each job
    // to a fresh thread whose allocator heap starts empty, so the first job paid for
    // faulting in that heap's pages inside the measured wall-clock time; there is nothing
    // to gain from the hand-over.
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
    let first: Vec<(usize, u32)> = (0..points.len())
        .flat_map(|p| (0..scn.run.replications).map(move |r| (p, r)))
        .enumerate()
        .filter(|&(k, (p, _))| job_here(k) && point_here(p))
        .map(|(_, job)| job)
        .collect();
    let start = WallClock::now();
    let mut per_point: Vec<Vec<(u32, RepResult)>> = vec![Vec::new(); points.len()];
    // Events and simulated time of every job run, kept or not (the speed figures).
    let (mut events, mut simulated) = (0u64, 0f64);
    // Runs `jobs` (in parallel with a pool) and appends their results to their points, in
    // job order.
    let mut run_round = |jobs: &[(usize, u32)],
                         per_point: &mut Vec<Vec<(u32, RepResult)>>|
     -> Result<(), SimError> {
        total.fetch_add(jobs.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let results: Vec<Result<RepResult, SimError>> = match &pool {
            Some(pool) => pool.install(|| jobs.par_iter().map(one).collect()),
            None => jobs.iter().map(one).collect(),
        };
        for (&(p, rep), r) in jobs.iter().zip(results) {
            let r = r?;
            events += r.events;
            simulated += r.simulated.as_secs_f64();
            per_point[p].push((rep, r));
        }
        Ok(())
    };
    run_round(&first, &mut per_point)?;
    if let Some(prec) = &scn.run.precision {
        let watched: Vec<usize> = if prec.metrics.is_empty() {
            (0..kind.metrics().len()).collect()
        } else {
            prec.metrics
                .iter()
                .filter_map(|m| kind.metrics().iter().position(|k| k == m))
                .collect()
        };
        // The stopping count of each point, once decided, and the counts judged so far,
        // with a running tally of each watched metric over them (the same arithmetic, in
        // the same order, as the point's final estimate).
        // A point of another shard is done before it starts: it runs there.
        let mut stop: Vec<Option<usize>> = (0..points.len())
            .map(|p| (!point_here(p)).then_some(0))
            .collect();
        let n0 = scn.run.replications as usize;
        let mut judged = vec![0usize; points.len()];
        let mut tallies: Vec<Vec<Tally>> = vec![vec![Tally::new(); watched.len()]; points.len()];
        loop {
            for (p, reps) in per_point.iter().enumerate() {
                if stop[p].is_some() {
                    continue;
                }
                // Each count from n0 on, in order, once: the first that is precise stops.
                for n in judged[p] + 1..=reps.len() {
                    for (t, &i) in tallies[p].iter_mut().zip(&watched) {
                        t.record(reps[n - 1].1.metrics.get(i).map_or(f64::NAN, |m| m.1));
                    }
                    judged[p] = n;
                    if n >= n0 && tallies[p].iter().all(|t| met(t, prec)) {
                        stop[p] = Some(n);
                        break;
                    }
                }
                if stop[p].is_none() && reps.len() >= prec.max_replications as usize {
                    stop[p] = Some(reps.len());
                    warnings.push(unmet(
                        scn,
                        kind,
                        &points[p],
                        reps.len(),
                        &watched,
                        &tallies[p],
                        prec,
                    ));
                }
            }
            let open: Vec<usize> = (0..points.len()).filter(|&p| stop[p].is_none()).collect();
            if open.is_empty() {
                break;
            }
            // Enough replications per open point to keep every thread busy; how many
            // changes only the work discarded, not where a point stops.
            let step = threads.div_ceil(open.len()).max(1) as u32;
            let jobs: Vec<(usize, u32)> = open
                .iter()
                .flat_map(|&p| {
                    let have = per_point[p].len() as u32;
                    let upto = have.saturating_add(step).min(prec.max_replications);
                    (have..upto).map(move |r| (p, r))
                })
                .collect();
            run_round(&jobs, &mut per_point)?;
        }
        for (reps, n) in per_point.iter_mut().zip(&stop) {
            reps.truncate(n.unwrap_or(reps.len()));
        }
    }
    Ok(RawRun {
        points: per_point,
        warnings,
        events,
        simulated_seconds: simulated,
        wall_seconds: start.elapsed().as_secs_f64(),
        jobs_run: total.load(std::sync::atomic::Ordering::Relaxed),
        threads,
    })
}

/// The report of a run from what its jobs measured: each point's estimates over its
/// replications in order. [`run`] calls it on a whole run, [`crate::shard::merge`] on
/// the shards' results put together; a point must hold its replications 0, 1, ... with
/// none missing.
pub fn assemble(scn: &Scenario, kind: &dyn ModelKind, raw: RawRun) -> Result<RunReport, SimError> {
    let points = scn.points();
    if raw.points.len() != points.len() {
        return Err(SimError::Model {
            model: scn.model.clone(),
            message: format!(
                "{} points of results for a sweep of {}",
                raw.points.len(),
                points.len()
            ),
        });
    }
    let mut out = Vec::with_capacity(points.len());
    for (point, numbered) in points.into_iter().zip(raw.points) {
        if let Some((k, (n, _))) = numbered
            .iter()
            .enumerate()
            .find(|(k, (n, _))| *n as usize != *k)
        {
            return Err(SimError::Model {
                model: scn.model.clone(),
                message: format!(
                    "point {}: replication {k} is missing (found {n} in its place)",
                    describe(&point)
                ),
            });
        }
        let reps_out: Vec<RepResult> = numbered.into_iter().map(|(_, r)| r).collect();
        let table = scn.params_at(&point)?;
        if scn.run.batches.is_some() && reps_out.iter().any(|r| r.batch_metrics.is_empty()) {
            return Err(SimError::Model {
                model: scn.model.clone(),
                message: "this model kind does not report batches: drop [run] batches and use replications".into(),
            });
        }
        let batched = scn.run.batches.is_some();
        let metrics = kind
            .metrics()
            .iter()
            .enumerate()
            .filter(|&(i, name)| {
                // A conditional metric no replication (nor batch) reports is left out.
                !kind.conditional_metrics().contains(name)
                    || reps_out
                        .iter()
                        .any(|r| r.metrics.len() > i || r.batch_metrics.iter().any(|b| b.len() > i))
            })
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
        warnings: raw.warnings,
        events: raw.events,
        simulated_seconds: raw.simulated_seconds,
        wall_seconds: raw.wall_seconds,
        jobs_run: raw.jobs_run,
        threads: raw.threads,
    })
}
