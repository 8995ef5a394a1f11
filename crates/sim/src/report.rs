//! Result files of a run: `results.json`, `results.csv`, `replications.csv`, `run.json`.
//!
//! `results.json` is exactly `{"scenario": {...}, "points": [{"params": {...}, "metrics":
//! {"NAME": {"mean": m, "ci95": h, "n": k}}}]}` (DESIGN.md §4): tools outside the
//! repository read it. `ci95` is the half-width of the Student-t 95% confidence interval
//! across replications; a value that cannot be computed (fewer than two replications, no
//! observations) is `null`. `replications.csv` carries every replication's own values,
//! with its seed and number, so any figure can be traced to the run that made it.
//! `run.json` holds the run's cost: events, wall time, events per second.
//!
//! serde is used here, at the edge, on hand-built JSON values: the engine's types derive
//! nothing (DESIGN.md §6).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value as Json, json};
use toml::{Table, Value};

use crate::SimError;
use crate::model::ModelKind;
use crate::runner::{PointResult, RunReport};
use crate::scenario::{RunLength, Warmup};

/// A TOML value as JSON (NaN and infinities become null).
pub fn toml_to_json(v: &Value) -> Json {
    match v {
        Value::String(s) => Json::String(s.clone()),
        Value::Integer(i) => json!(i),
        Value::Float(f) => num(*f),
        Value::Boolean(b) => Json::Bool(*b),
        Value::Datetime(d) => Json::String(d.to_string()),
        Value::Array(a) => Json::Array(a.iter().map(toml_to_json).collect()),
        Value::Table(t) => table_to_json(t),
    }
}

fn table_to_json(t: &Table) -> Json {
    Json::Object(
        t.iter()
            .map(|(k, v)| (k.clone(), toml_to_json(v)))
            .collect(),
    )
}

/// A float as JSON; null when not finite.
pub fn num(x: f64) -> Json {
    serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number)
}

/// The `scenario` object of `results.json`.
pub fn scenario_json(r: &RunReport) -> Json {
    let s = &r.scenario;
    let length = match s.run.length {
        RunLength::Duration(d) => json!({"duration_seconds": d.as_secs_f64()}),
        RunLength::Count(n) => json!({"count": n}),
    };
    let warmup = match s.run.warmup {
        Warmup::Time(d) => json!({"seconds": d.as_secs_f64()}),
        Warmup::Auto => json!("auto (MSER-5)"),
        Warmup::Observations(n) => json!({"observations": n}),
    };
    let sweep: Map<String, Json> = s
        .sweep
        .iter()
        .map(|(k, v)| (k.clone(), Json::Array(v.iter().map(toml_to_json).collect())))
        .collect();
    json!({
        "file": s.file,
        "model": s.model,
        "seed": s.run.seed,
        "replications": s.run.replications,
        "method": match (s.run.batches, &s.run.precision) {
            (Some(b), _) => json!({"batch_means": b}),
            (None, Some(p)) => json!({"sequential_replications": {
                "precision": p.relative,
                "max_replications": p.max_replications,
                "metrics": p.metrics,
            }}),
            (None, None) => json!("independent replications"),
        },
        "length": length,
        "warmup": warmup,
        "sweep": sweep,
    })
}

/// The whole `results.json` document.
pub fn results_json(r: &RunReport) -> Json {
    let points: Vec<Json> = r
        .points
        .iter()
        .map(|p| {
            let metrics: Map<String, Json> = p
                .metrics
                .iter()
                .map(|(name, e)| {
                    (
                        name.clone(),
                        json!({"mean": num(e.mean), "ci95": num(e.ci95), "n": e.n}),
                    )
                })
                .collect();
            json!({"params": table_to_json(&p.params), "metrics": metrics})
        })
        .collect();
    json!({"scenario": scenario_json(r), "points": points})
}

/// `a.b = v` pairs of a nested table, in order.
fn flatten(prefix: &str, t: &Table, out: &mut Vec<(String, String)>) {
    for (k, v) in t {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(sub) => flatten(&key, sub, out),
            Value::String(s) => out.push((key, s.clone())),
            other => out.push((key, other.to_string())),
        }
    }
}

/// Quotes a CSV field when it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}

/// `results.csv`: one row per point, its parameters flattened, then mean, ci95 and n of
/// every metric.
pub fn results_csv(r: &RunReport) -> String {
    points_csv(&r.points)
}

fn points_csv(points: &[PointResult]) -> String {
    let mut out = String::new();
    if points.is_empty() {
        return out;
    }
    // The columns are the union over every point, in first-seen order: a sweep may
    // change a parameter's shape (a source's kind brings its own keys) or the metrics a
    // point has, and a row must never slide under another point's header. A value a
    // point lacks is an empty field.
    let mut keys: Vec<String> = Vec::new();
    let mut metrics: Vec<String> = Vec::new();
    let mut rows: Vec<(Vec<(String, String)>, &PointResult)> = Vec::new();
    for p in points {
        let mut vals = Vec::new();
        flatten("", &p.params, &mut vals);
        for (k, _) in &vals {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        for (m, _) in &p.metrics {
            if !metrics.contains(m) {
                metrics.push(m.clone());
            }
        }
        rows.push((vals, p));
    }
    let mut header: Vec<String> = keys.iter().map(|k| csv_field(k)).collect();
    for m in &metrics {
        header.extend([format!("{m}_mean"), format!("{m}_ci95"), format!("{m}_n")]);
    }
    let _ = writeln!(out, "{}", header.join(","));
    for (vals, p) in rows {
        let mut row: Vec<String> = keys
            .iter()
            .map(|k| {
                vals.iter()
                    .find(|(x, _)| x == k)
                    .map_or(String::new(), |(_, v)| csv_field(v))
            })
            .collect();
        for m in &metrics {
            match p.metrics.iter().find(|(x, _)| x == m) {
                Some((_, e)) => row.extend([csv_num(e.mean), csv_num(e.ci95), e.n.to_string()]),
                None => row.extend([String::new(), String::new(), String::new()]),
            }
        }
        let _ = writeln!(out, "{}", row.join(","));
    }
    out
}

/// `replications.csv`: every replication's own metric values, with its seed.
pub fn replications_csv(r: &RunReport) -> String {
    let mut out = String::new();
    let Some(first) = r.points.first() else {
        return out;
    };
    let swept: Vec<String> = first.swept.iter().map(|(k, _)| csv_field(k)).collect();
    let metric_names: Vec<&str> = first.metrics.iter().map(|(m, _)| m.as_str()).collect();
    let mut header = vec!["point".to_owned()];
    header.extend(swept);
    header.extend(
        [
            "replication",
            "seed",
            "events",
            "simulated_seconds",
            "mser5_truncation",
        ]
        .map(String::from),
    );
    header.extend(metric_names.iter().map(|m| (*m).to_owned()));
    let _ = writeln!(out, "{}", header.join(","));
    for (i, p) in r.points.iter().enumerate() {
        for (k, rep) in p.replications.iter().enumerate() {
            let mut row = vec![i.to_string()];
            row.extend(p.swept.iter().map(|(_, v)| {
                csv_field(&match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            }));
            row.push(k.to_string());
            row.push(r.scenario.run.seed.to_string());
            row.push(rep.events.to_string());
            row.push(csv_num(rep.simulated.as_secs_f64()));
            row.push(rep.truncation.map(|t| t.to_string()).unwrap_or_default());
            row.extend(rep.metrics.iter().map(|(_, v)| csv_num(*v)));
            let _ = writeln!(out, "{}", row.join(","));
        }
    }
    out
}

/// `run.json`: what the run cost.
pub fn run_json(r: &RunReport) -> Json {
    let eps = if r.wall_seconds > 0.0 {
        r.events as f64 / r.wall_seconds
    } else {
        f64::NAN
    };
    let sps = if r.wall_seconds > 0.0 {
        r.simulated_seconds / r.wall_seconds
    } else {
        f64::NAN
    };
    json!({
        "events": r.events,
        "wall_seconds": num(r.wall_seconds),
        "events_per_second": num(eps),
        "simulated_seconds": num(r.simulated_seconds),
        "simulated_seconds_per_second": num(sps),
        "threads": r.threads,
        // Jobs run, and the replications kept (with a precision target, each point's own
        // count; the jobs past it that ran in the same round are discarded).
        "jobs": r.jobs_run,
        "replications_kept": r.points.iter().map(|p| p.replications.len() as u64).sum::<u64>(),
        // What the run warned about (a precision not reached shows here, not in
        // results.json, whose shape is fixed).
        "warnings": r.warnings,
    })
}

/// Writes `contents` to `dir/name`; an error names the file. The one file writer of the
/// result files and of the reports (`atmlab-lab` writes through it too).
pub fn write(dir: &Path, name: &str, contents: &str) -> Result<(), SimError> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|e| SimError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Writes the result files into `dir` (created if needed).
pub fn write_results(dir: &Path, r: &RunReport) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let pretty = |j: &Json| serde_json::to_string_pretty(j).unwrap_or_default() + "\n";
    write(dir, "results.json", &pretty(&results_json(r)))?;
    write(dir, "results.csv", &results_csv(r))?;
    write(dir, "replications.csv", &replications_csv(r))?;
    write(dir, "run.json", &pretty(&run_json(r)))?;
    Ok(())
}

/// The numeric value of a swept parameter, for a plot's x axis: a rate, a duration, a bit
/// rate or a plain number, in SI base units.
/// A swept value as a number in base units, with that unit for the axis label ("" for a
/// plain number): rates per second, durations in seconds, bit rates in b/s.
fn sweep_x(v: &Value) -> Option<(f64, &'static str)> {
    use crate::scenario::{parse_bit_rate, parse_duration, parse_number, parse_rate};
    parse_number(v)
        .ok()
        .map(|x| (x, ""))
        .or_else(|| parse_rate(v).ok().map(|x| (x, "/s")))
        .or_else(|| parse_duration(v).ok().map(|d| (d.as_secs_f64(), "s")))
        .or_else(|| parse_bit_rate(v).ok().map(|x| (x, "b/s")))
}

/// An axis label: the key, and its unit in parentheses when it has one.
fn axis_label(key: &str, unit: Option<&str>) -> String {
    match unit {
        Some(u) if !u.is_empty() => format!("{key} ({u})"),
        _ => key.to_owned(),
    }
}

/// Writes `<metric>.svg` and `<metric>.png` for each metric against the last swept key (the
/// one that varies fastest), one series per combination of the other swept keys. Returns
/// the number of metrics plotted (0 without a sweep, or when the swept values are not
/// numbers).
/// The axes are labelled with their units: the swept value's (as written in the scenario)
/// and the metric's ([`ModelKind::metric_unit`]).
pub fn write_plots(dir: &Path, r: &RunReport, kind: &dyn ModelKind) -> Result<usize, SimError> {
    let metrics = kind.metrics();
    use crate::plot::{PlotSpec, Series, plot_metric};
    let Some((x_key, _)) = r.scenario.sweep.last() else {
        return Ok(0);
    };
    let mut xs = Vec::with_capacity(r.points.len());
    let mut x_unit = "";
    for p in &r.points {
        match p.swept.last().and_then(|(_, v)| sweep_x(v)) {
            Some((x, u)) => {
                xs.push(x);
                x_unit = u;
            }
            None => return Ok(0),
        }
    }
    let x_label = axis_label(x_key, Some(x_unit));
    let mut plotted = 0;
    for (mi, m) in metrics.iter().enumerate() {
        let mut series: Vec<Series> = Vec::new();
        for (p, &x) in r.points.iter().zip(&xs) {
            let others: Vec<String> = p.swept[..p.swept.len() - 1]
                .iter()
                .map(|(k, v)| format!("{k} = {}", crate::scenario::show(v)))
                .collect();
            let label = if others.is_empty() {
                (*m).to_owned()
            } else {
                others.join(", ")
            };
            let e = p.metrics.get(mi).map(|(_, e)| *e);
            let Some(e) = e else { continue };
            match series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((x, e.mean, e.ci95)),
                None => series.push(Series {
                    label,
                    points: vec![(x, e.mean, e.ci95)],
                }),
            }
        }
        let title = match &r.scenario.run.precision {
            Some(p) => format!(
                "{m} ({}, 95% CI, replications until within {})",
                r.scenario.model,
                p.percent()
            ),
            None => format!(
                "{m} ({}, 95% CI over {} replications)",
                r.scenario.model, r.scenario.run.replications
            ),
        };
        let y_label = axis_label(m, kind.metric_unit(m));
        let spec = PlotSpec {
            title: &title,
            x_label: &x_label,
            y_label: &y_label,
            log_y: false,
        };
        plot_metric(&dir.join(m), &spec, &series)?;
        plotted += 1;
    }
    Ok(plotted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Estimate;

    fn point(params: &str, metrics: &[&str]) -> PointResult {
        PointResult {
            swept: Vec::new(),
            params: params.parse().unwrap(),
            metrics: metrics
                .iter()
                .map(|m| {
                    (
                        m.to_string(),
                        Estimate {
                            mean: 1.5,
                            ci95: 0.25,
                            n: 4,
                        },
                    )
                })
                .collect(),
            replications: Vec::new(),
        }
    }

    /// A sweep that changes a parameter's shape (a source kind with its own keys) or
    /// the metrics: every row stays under its own header.
    #[test]
    fn heterogeneous_points_keep_their_columns() {
        let csv = points_csv(&[
            point("arrival = { kind = \"poisson\", rate = 2.0 }", &["a"]),
            point("arrival = { kind = \"cbr\", period = 0.5 }", &["a", "b"]),
        ]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "arrival.kind,arrival.rate,arrival.period,a_mean,a_ci95,a_n,b_mean,b_ci95,b_n"
        );
        let width = |l: &str| l.split(',').count();
        assert!(lines.iter().all(|l| width(l) == width(lines[0])), "{csv}");
        assert_eq!(lines[1], "poisson,2.0,,1.5,0.25,4,,,", "{csv}");
        assert_eq!(lines[2], "cbr,,0.5,1.5,0.25,4,1.5,0.25,4", "{csv}");
    }
}
