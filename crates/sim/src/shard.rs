//! Sweeps on a cluster scheduler: one shard's results, and the merge of all of them into
//! the files an unsharded run writes (issue 26, "sweeps on a scheduler").
//!
//! A parameter study of the papers' figures is hundreds of (point, replication) jobs,
//! each independent of the others by construction (own model, own RNG streams keyed by
//! seed and replication; [`crate::runner`]). `atmlab sim run --shard I/N` runs the jobs of
//! one [`Shard`] and writes [`SHARD_FILE`]: the scenario as given (its text and
//! overrides, so the merge needs no copy of the file), and each job's raw result with
//! every number as its exact bits. `atmlab sim merge` reads the N shard files, checks that
//! they are the N shards of one run, and assembles the same [`RunReport`] the unsharded
//! run gives, so `results.json` comes out byte for byte the same. The task array of
//! Slurm, an Indexed Job of Kubernetes or GNU parallel runs the shards; `docs/cluster.md`
//! gives the recipes.

use std::path::Path;

use serde_json::{Value as Json, json};

use crate::SimError;
use crate::model::{ModelKind, RepResult};
use crate::runner::{RawRun, RunReport, Shard, assemble};
use crate::scenario::Scenario;

/// The file a shard writes in its output directory.
pub const SHARD_FILE: &str = "shard.json";

/// The version of [`SHARD_FILE`]'s layout; a merge refuses any other.
const VERSION: u64 = 1;

/// Where a run's scenario came from, so that a merge can rebuild it exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioSource {
    /// The file name as given (it appears in `results.json`).
    pub file: String,
    /// Its text.
    pub text: String,
    /// The `--set` overrides, in order.
    pub overrides: Vec<String>,
}

impl ScenarioSource {
    /// Reads `path` (named as given).
    pub fn read(path: &Path, overrides: &[String]) -> Result<ScenarioSource, SimError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SimError::Io {
            path: file.clone(),
            message: format!("cannot read the scenario: {e}"),
        })?;
        Ok(ScenarioSource {
            file,
            text,
            overrides: overrides.to_vec(),
        })
    }

    /// The scenario it describes.
    pub fn scenario(&self) -> Result<Scenario, SimError> {
        Scenario::parse(&self.file, &self.text, &self.overrides)
    }
}

/// Exact: a float as its bits (JSON numbers would round some, and cannot hold NaN).
fn bits(x: f64) -> Json {
    json!(x.to_bits())
}

fn rep_json(point: usize, rep: u32, r: &RepResult) -> Json {
    json!({
        "point": point,
        "replication": rep,
        "metrics": r.metrics.iter().map(|m| bits(m.1)).collect::<Vec<_>>(),
        "events": r.events,
        "simulated_ps": r.simulated.as_picos(),
        "truncation": r.truncation,
        "batches": r.batch_metrics
            .iter()
            .map(|b| b.iter().map(|x| bits(*x)).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
    })
}

/// The contents of [`SHARD_FILE`] for `raw`, the results of `shard` of the run of
/// `source`.
pub fn shard_json(source: &ScenarioSource, shard: Shard, raw: &RawRun) -> Json {
    let jobs: Vec<Json> = raw
        .points
        .iter()
        .enumerate()
        .flat_map(|(p, reps)| reps.iter().map(move |(n, r)| rep_json(p, *n, r)))
        .collect();
    json!({
        "version": VERSION,
        "shard": shard.to_string(),
        "scenario": {
            "file": source.file,
            "text": source.text,
            "overrides": source.overrides,
        },
        "jobs": jobs,
        "warnings": raw.warnings,
        "events": raw.events,
        "simulated_seconds": bits(raw.simulated_seconds),
        "wall_seconds": bits(raw.wall_seconds),
        "jobs_run": raw.jobs_run,
        "threads": raw.threads,
    })
}

/// Writes `shard`'s results into `dir` (created if needed) as [`SHARD_FILE`].
pub fn write_shard(
    dir: &Path,
    source: &ScenarioSource,
    shard: Shard,
    raw: &RawRun,
) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let text = serde_json::to_string(&shard_json(source, shard, raw)).unwrap_or_default();
    crate::report::write(dir, SHARD_FILE, &(text + "\n"))
}

/// One shard's file, read back.
#[derive(Debug, Clone)]
pub struct ShardFile {
    /// Where it was read from.
    pub path: String,
    /// Which shard.
    pub shard: Shard,
    /// The run's scenario.
    pub source: ScenarioSource,
    /// Its jobs: (point, replication, what the model reported as metric values, events,
    /// simulated picoseconds, truncation, batches).
    jobs: Vec<(usize, u32, RepRaw)>,
    warnings: Vec<String>,
    events: u64,
    simulated_seconds: f64,
    wall_seconds: f64,
    jobs_run: u64,
    threads: usize,
}

#[derive(Debug, Clone)]
struct RepRaw {
    metrics: Vec<f64>,
    events: u64,
    simulated_ps: u64,
    truncation: Option<u64>,
    batches: Vec<Vec<f64>>,
}

impl ShardFile {
    /// Reads the [`SHARD_FILE`] in `dir`; errors name the file and what is wrong.
    pub fn read(dir: &Path) -> Result<ShardFile, SimError> {
        let path = dir.join(SHARD_FILE);
        let shown = path.display().to_string();
        let bad = |what: &str| SimError::Io {
            path: shown.clone(),
            message: format!("not a shard of `atmlab sim run --shard`: {what}"),
        };
        let text = std::fs::read_to_string(&path).map_err(|e| SimError::Io {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let doc: Json = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
        if doc["version"].as_u64() != Some(VERSION) {
            return Err(bad(&format!(
                "layout version {} (this build reads {VERSION})",
                doc["version"]
            )));
        }
        let shard: Shard = doc["shard"]
            .as_str()
            .ok_or_else(|| bad("no shard"))?
            .parse()
            .map_err(|e: String| bad(&e))?;
        let sc = &doc["scenario"];
        let source = ScenarioSource {
            file: sc["file"]
                .as_str()
                .ok_or_else(|| bad("no scenario file"))?
                .to_owned(),
            text: sc["text"]
                .as_str()
                .ok_or_else(|| bad("no scenario text"))?
                .to_owned(),
            overrides: strings(&sc["overrides"]).ok_or_else(|| bad("bad overrides"))?,
        };
        let float = |v: &Json| v.as_u64().map(f64::from_bits);
        let floats = |v: &Json| -> Option<Vec<f64>> { v.as_array()?.iter().map(float).collect() };
        let mut jobs = Vec::new();
        for j in doc["jobs"].as_array().ok_or_else(|| bad("no jobs"))? {
            let job = (|| {
                Some((
                    usize::try_from(j["point"].as_u64()?).ok()?,
                    u32::try_from(j["replication"].as_u64()?).ok()?,
                    RepRaw {
                        metrics: floats(&j["metrics"])?,
                        events: j["events"].as_u64()?,
                        simulated_ps: j["simulated_ps"].as_u64()?,
                        truncation: match &j["truncation"] {
                            Json::Null => None,
                            t => Some(t.as_u64()?),
                        },
                        batches: j["batches"]
                            .as_array()?
                            .iter()
                            .map(floats)
                            .collect::<Option<_>>()?,
                    },
                ))
            })()
            .ok_or_else(|| bad("a malformed job"))?;
            jobs.push(job);
        }
        Ok(ShardFile {
            path: shown.clone(),
            shard,
            source,
            jobs,
            warnings: strings(&doc["warnings"]).ok_or_else(|| bad("bad warnings"))?,
            events: doc["events"].as_u64().ok_or_else(|| bad("no events"))?,
            simulated_seconds: float(&doc["simulated_seconds"]).ok_or_else(|| bad("no time"))?,
            wall_seconds: float(&doc["wall_seconds"]).ok_or_else(|| bad("no wall time"))?,
            jobs_run: doc["jobs_run"]
                .as_u64()
                .ok_or_else(|| bad("no job count"))?,
            threads: doc["threads"]
                .as_u64()
                .and_then(|t| usize::try_from(t).ok())
                .ok_or_else(|| bad("no thread count"))?,
        })
    }
}

fn strings(v: &Json) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// Puts the N shards of one run together into the report the unsharded run gives: the
/// same scenario in every shard, shards 1..=N each once, every job of the run exactly
/// once. Warnings are each kept once; the costs (events, times) are summed, threads are
/// the most any shard used.
pub fn merge(shards: &[ShardFile], kind: &dyn ModelKind) -> Result<RunReport, SimError> {
    let Some(first) = shards.first() else {
        return Err(SimError::Io {
            path: "-".into(),
            message: "no shard to merge".into(),
        });
    };
    let mismatch = |s: &ShardFile, what: String| SimError::Io {
        path: s.path.clone(),
        message: what,
    };
    let n = first.shard.count;
    let mut seen = vec![false; n as usize];
    for s in shards {
        if s.source != first.source {
            return Err(mismatch(
                s,
                format!(
                    "another run than {} (its scenario or overrides differ)",
                    first.path
                ),
            ));
        }
        if s.shard.count != n {
            return Err(mismatch(
                s,
                format!("shard {} of a run cut in {n}", s.shard),
            ));
        }
        let i = (s.shard.index - 1) as usize;
        if std::mem::replace(&mut seen[i], true) {
            return Err(mismatch(s, format!("shard {} given twice", s.shard)));
        }
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(SimError::Io {
            path: first.path.clone(),
            message: format!("shard {}/{n} is missing", missing + 1),
        });
    }
    let scn = first.source.scenario()?;
    if scn.model != kind.name() {
        return Err(mismatch(first, format!("a run of model {:?}", scn.model)));
    }
    let names = kind.metrics();
    let points = scn.points().len();
    let mut per_point: Vec<Vec<(u32, RepResult)>> = vec![Vec::new(); points];
    let mut raw = RawRun {
        points: Vec::new(),
        warnings: Vec::new(),
        events: 0,
        simulated_seconds: 0.0,
        wall_seconds: 0.0,
        jobs_run: 0,
        threads: 0,
    };
    for s in shards {
        for (p, rep, r) in &s.jobs {
            let slot = per_point.get_mut(*p).ok_or_else(|| {
                mismatch(s, format!("a job of point {p}, in a sweep of {points}"))
            })?;
            if r.metrics.len() > names.len() {
                return Err(mismatch(
                    s,
                    format!("{} metrics for a model of {}", r.metrics.len(), names.len()),
                ));
            }
            slot.push((
                *rep,
                RepResult {
                    metrics: names
                        .iter()
                        .copied()
                        .zip(r.metrics.iter().copied())
                        .collect(),
                    events: r.events,
                    simulated: atmlab_core::time::Duration::from_picos(r.simulated_ps),
                    truncation: r.truncation,
                    batch_metrics: r.batches.clone(),
                },
            ));
        }
        for w in &s.warnings {
            if !raw.warnings.contains(w) {
                raw.warnings.push(w.clone());
            }
        }
        raw.events += s.events;
        raw.simulated_seconds += s.simulated_seconds;
        raw.wall_seconds += s.wall_seconds;
        raw.jobs_run += s.jobs_run;
        raw.threads = raw.threads.max(s.threads);
    }
    for reps in &mut per_point {
        reps.sort_by_key(|(n, _)| *n);
    }
    raw.points = per_point;
    assemble(&scn, kind, raw)
}
