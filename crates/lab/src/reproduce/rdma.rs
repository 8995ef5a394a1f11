//! `atmlab reproduce rdma`: paper 003's Tables 1 and 2 and Figures 8-11, with the
//! paper's published numbers beside ours and a verdict for each, computed from the
//! numbers.
//!
//! The scenarios are the files of `scenarios/rdma/`, embedded in the binary so that it
//! works from any directory. Each runs through the engine's runner, so the numbers do not
//! depend on the thread count. `quick` shortens every run (and keeps fewer loads of the
//! backbone sweeps): the form CI runs, with wide confidence intervals.
//!
//! The run's numbers are gathered into [`RdmaResults`]; [`verdicts()`] is a pure function
//! of them (a test changes a number and sees the verdict follow). The report opens with
//! that verdict table; the template's prose explains verdicts, it never sets one.
//!
//! What is written into the output directory:
//! - `report.md`: the verdict table, then each table side by side (paper, then atmlab
//!   mean ± 95% CI, each of the two definitions of jitter and occupancy with the one the
//!   paper's column is compared with marked), each figure, and the Figure 11 readings;
//! - `verdicts.csv`; `table1.csv`, `table2.csv`, `table2-frames.csv`: mechanism, metric,
//!   paper, mean, ci95;
//! - `fig08.png` … `fig11.png` (and `.svg`) with `fig08.csv` … `fig11.csv`, and
//!   `fig11-readings.csv`;
//! - one directory per scenario with the runner's own result files (`results.json`,
//!   `results.csv`, `replications.csv`, `run.json`).
//!
//! The files are written with [`crate::report`]; the report's prose is
//! `templates/rdma.md`.

use std::path::{Path, PathBuf};

use atmlab_core::time::Duration;
use atmlab_sim::plot::{PlotSpec, Series};
use atmlab_sim::report::write_results;
use atmlab_sim::runner::{self, PointResult, RunOptions, RunReport};
use atmlab_sim::scenario::{RunLength, Scenario, Warmup};
use atmlab_sim::stats::Estimate;
use minijinja::context;

use crate::report::verdict::{
    Direction, Relation, at_least, at_most, order, show, sig, trend, value,
};
use crate::report::{self, Check, Column, Format, Table, Value, Verdict, Verdicts, plot, write};
use crate::{LabError, cells};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../templates/rdma.md");

const TABLE1: &str = include_str!("../../../../scenarios/rdma/table1-voice.toml");
const TABLE2: &str = include_str!("../../../../scenarios/rdma/table2-video.toml");
const TABLE2_FRAMES: &str = include_str!("../../../../scenarios/rdma/table2-video-frames.toml");
const BACKBONE: &str = include_str!("../../../../scenarios/rdma/fig08-11-backbone.toml");
const READINGS: &str = include_str!("../../../../scenarios/rdma/fig11-readings.toml");

/// How to run the reproduction.
#[derive(Default)]
pub struct RdmaOptions<'a> {
    /// The short form (CI).
    pub quick: bool,
    /// Worker threads (0: one per core). Results do not depend on it.
    pub threads: usize,
    /// Called with a line of progress before each experiment.
    pub progress: Option<&'a dyn Fn(&str)>,
}

/// One experiment that ran.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentRun {
    /// Its name (`table1-voice`, ...).
    pub name: &'static str,
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
}

/// What the reproduction wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmaReport {
    /// The markdown report.
    pub report: PathBuf,
    /// Every file written, the report first.
    pub files: Vec<PathBuf>,
    /// The experiments, in order.
    pub experiments: Vec<ExperimentRun>,
    /// The verdicts the report opens with.
    pub verdicts: Verdicts,
}

/// The metrics of one run point (a table row or a point of a curve), by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metrics(pub Vec<(String, Estimate)>);

impl Metrics {
    /// The estimate of `name`; NaN when the run did not report it.
    pub fn get(&self, name: &str) -> Estimate {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(nan(), |(_, e)| *e)
    }

    /// Sets (or adds) `name`.
    pub fn set(&mut self, name: &str, e: Estimate) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some(x) => x.1 = e,
            None => self.0.push((name.to_owned(), e)),
        }
    }
}

fn nan() -> Estimate {
    Estimate {
        mean: f64::NAN,
        ci95: f64::NAN,
        n: 0,
    }
}

/// A backbone curve: one mechanism over the loads, in load order.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The mechanism, as the figures name it.
    pub label: String,
    /// (load, the point's metrics).
    pub points: Vec<(f64, Metrics)>,
}

impl Curve {
    /// `metric` at the lowest load.
    fn first(&self, metric: &str) -> Option<(f64, Estimate)> {
        self.points.first().map(|(l, m)| (*l, m.get(metric)))
    }
    /// `metric` at the highest load.
    fn last(&self, metric: &str) -> Option<(f64, Estimate)> {
        self.points.last().map(|(l, m)| (*l, m.get(metric)))
    }
    /// `metric` at the highest load strictly below `load`.
    fn below(&self, load: f64, metric: &str) -> Option<(f64, Estimate)> {
        self.points
            .iter()
            .rfind(|(l, _)| *l < load - 1e-9)
            .map(|(l, m)| (*l, m.get(metric)))
    }
    /// `metric` at the lowest load at or above `load`.
    fn from(&self, load: f64, metric: &str) -> Option<(f64, Estimate)> {
        self.points
            .iter()
            .find(|(l, _)| *l >= load - 1e-9)
            .map(|(l, m)| (*l, m.get(metric)))
    }
    /// `metric` over the loads.
    fn series(&self, metric: &str) -> Vec<(f64, Estimate)> {
        self.points
            .iter()
            .map(|(l, m)| (*l, m.get(metric)))
            .collect()
    }
}

/// One combination of buffers tried for Figure 11 (see `fig11-readings.toml`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// C3's buffer, cells.
    pub buffer: f64,
    /// Each periphery's buffer, cells.
    pub periphery_buffer: f64,
    /// The curves, in [`READING_CURVES`] order.
    pub curves: Vec<Curve>,
}

/// Everything the verdicts are computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmaResults {
    /// Table 1's rows, in [`T1_ROWS`] order.
    pub table1: Vec<Metrics>,
    /// Table 2's rows (cells spread over the frame), in [`T2_ROWS`] order.
    pub table2: Vec<Metrics>,
    /// Table 2's rows with each frame's cells generated together.
    pub table2_frames: Vec<Metrics>,
    /// The backbone curves, in [`CURVES`] order.
    pub backbone: Vec<Curve>,
    /// The backbone's buffer at every node, cells.
    pub buffer: f64,
    /// The Figure 11 readings.
    pub readings: Vec<Reading>,
}

/// One row of a table in the paper: the mechanism as the paper names it, then its four
/// numbers (mean delay s, max jitter s, mean jitter s, mean occupation cells).
struct PaperRow {
    label: &'static str,
    values: [f64; 4],
}

const fn paper(label: &'static str, values: [f64; 4]) -> PaperRow {
    PaperRow { label, values }
}

/// Table 1, voice, as printed.
const PAPER_TABLE1: [PaperRow; 5] = [
    paper("RDMA", [0.0001, 0.000116, 0.000009, 0.5]),
    paper("L. Bucket C=1.2", [1.0058, 0.0138, 0.00523, 65.57]),
    paper("L. Bucket C=1.4", [0.2930, 0.0119, 0.00242, 22.29]),
    paper("V. Clock", [0.2814, 0.6501, 0.0335, 27.22]),
    paper("V. Clock C=1.2", [0.1930, 0.6501, 0.0144, 19.03]),
];

/// Table 2, video, as printed.
const PAPER_TABLE2: [PaperRow; 6] = [
    paper("RDMA", [0.00787, 0.0001217, 0.000041, 125.65]),
    paper("L. Bucket C=1.15", [0.16115, 0.000086, 0.000010, 1282.0]),
    paper(
        "L. Bucket C=1.15 Credits=918",
        [0.13198, 0.000086, 0.000008, 947.34],
    ),
    paper("L. Bucket C=1.4", [0.0166, 0.00007, 0.000002, 210.79]),
    paper("V. Clock", [0.00904, 0.03300, 0.000102, 88.22]),
    paper("V. Clock C=1.2", [0.00456, 0.03300, 0.000027, 45.19]),
];

/// One of our rows: its label, the paper's row it is compared with, and whether its
/// Virtual Clock bound was fitted to the paper's max jitter (then that cell is no test).
pub struct OurRow {
    /// The row's label in our tables.
    pub label: &'static str,
    /// Index of the paper's row.
    pub paper: usize,
    /// The bound was read from the paper's max jitter.
    pub fitted: bool,
}

const fn row(label: &'static str, paper: usize, fitted: bool) -> OurRow {
    OurRow {
        label,
        paper,
        fitted,
    }
}

/// Table 1's rows, in the scenario's sweep order.
pub const T1_ROWS: [OurRow; 7] = [
    row("RDMA", 0, false),
    row("L. Bucket C=1.2", 1, false),
    row("L. Bucket C=1.4", 2, false),
    row("V. Clock B = AI = 360 ms", 3, false),
    row("V. Clock C=1.2 B = AI = 360 ms", 4, false),
    row("V. Clock B = 650 ms (fitted)", 3, true),
    row("V. Clock C=1.2 B = 650 ms (fitted)", 4, true),
];

/// Table 2's rows, in the scenario's sweep order (both readings).
pub const T2_ROWS: [OurRow; 6] = [
    row("RDMA", 0, false),
    row("L. Bucket C=1.15", 1, false),
    row("L. Bucket C=1.15 Credits=918", 2, false),
    row("L. Bucket C=1.4", 3, false),
    row("V. Clock", 4, false),
    row("V. Clock C=1.2", 5, false),
];

/// A column of the paper's tables: its heading, the metric the paper's number is
/// compared with, and the other definition shown beside it (if any).
struct PaperColumn {
    heading: &'static str,
    paper_def: (&'static str, &'static str),
    other_def: Option<(&'static str, &'static str)>,
}

/// The paper's four columns. Which definition is the paper's, and why, is in the
/// template ("Definitions").
const COLUMNS: [PaperColumn; 4] = [
    PaperColumn {
        heading: "Mean Delay (s)",
        paper_def: ("mean_delay", "mean"),
        other_def: None,
    },
    PaperColumn {
        heading: "Max Jitter (s)",
        paper_def: ("max_jitter", "largest increase"),
        other_def: Some(("max_abs_jitter", "largest abs change")),
    },
    PaperColumn {
        heading: "Mean Jitter (s)",
        paper_def: ("mean_jitter", "mean increase"),
        other_def: Some(("mean_abs_jitter", "mean abs change")),
    },
    PaperColumn {
        heading: "Mean Occupation (cells)",
        paper_def: ("mean_occupancy_events", "event average"),
        other_def: Some(("mean_occupancy", "time average")),
    },
];

/// The backbone curves of the main run, in its sweep order.
pub const CURVES: [&str; 5] = [
    "RDMA (one tree)",
    "RDMA (two trees)",
    "Leaky Bucket C=1.4",
    "Virtual Clock (0.1 ms)",
    "Virtual Clock (5 ms)",
];

/// The curves of the Figure 11 readings (the same mechanisms, the same order).
pub const READING_CURVES: [&str; 5] = CURVES;

const RDMA1: usize = 0;
const RDMA2: usize = 1;
const LB: usize = 2;
const VC01: usize = 3;
const VC5: usize = 4;

/// The paper's Figure 11 axis: "Scale=10^-3" over ticks 0 to 0.6, delays up to 0.6 ms.
const FIG11_TOP: f64 = 0.6e-3;

/// A figure: its file stem and title (the plot's and the report's), what it plots, and
/// which of [`CURVES`] the paper draws. What the paper says of it is in the template.
struct Figure {
    stem: &'static str,
    title: &'static str,
    metric: &'static str,
    y_label: &'static str,
    log_y: bool,
    curves: &'static [usize],
}

const FIGURES: [Figure; 5] = [
    Figure {
        stem: "fig08",
        title: "Figure 8: loss at backbone periphery",
        metric: "periphery_loss",
        y_label: "cells lost / cells offered",
        log_y: false,
        curves: &[RDMA1, RDMA2, LB, VC01],
    },
    Figure {
        stem: "fig09",
        title: "Figure 9: contention node (C3) occupancy",
        metric: "internal_occupancy",
        y_label: "mean cells waiting at C3",
        log_y: false,
        curves: &[RDMA1, RDMA2, LB, VC01],
    },
    Figure {
        stem: "fig10",
        title: "Figure 10: contention node (C3) losses",
        metric: "internal_loss",
        y_label: "cells lost / cells arriving at C3",
        log_y: false,
        curves: &[RDMA1, RDMA2, LB, VC01],
    },
    Figure {
        stem: "fig10-cells",
        title: "Figure 10 (cells/s): contention node (C3) losses",
        metric: "internal_lost_per_s",
        y_label: "cells lost at C3 per second",
        log_y: false,
        curves: &[RDMA1, RDMA2, LB, VC01],
    },
    Figure {
        stem: "fig11",
        title: "Figure 11: delay of an MMPP flow at the periphery",
        metric: "periphery_delay",
        y_label: "mean access delay (s)",
        log_y: true,
        curves: &[RDMA1, LB, VC01, VC5],
    },
];

fn err(what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::run(format!("reproduce {what}"), e)
}

fn secs(s: f64) -> RunLength {
    RunLength::Duration(Duration::from_secs_f64(s))
}

/// Parses an embedded scenario and applies the quick form.
fn scenario(name: &str, text: &str, quick: bool) -> Result<Scenario, LabError> {
    let mut scn = Scenario::parse(&format!("scenarios/rdma/{name}.toml"), text, &[])
        .map_err(|e| err(name, e))?;
    if quick {
        let (duration, warmup, loads): (f64, f64, &[f64]) = match name {
            "table1-voice" => (2_100.0, 100.0, &[]),
            "table2-video" | "table2-video-frames" => (21.0, 1.0, &[]),
            "fig11-readings" => (0.22, 0.02, &[0.1, 0.9]),
            _ => (0.42, 0.02, &[0.1, 0.3, 0.5, 0.7, 0.9]),
        };
        scn.run.length = secs(duration);
        scn.run.warmup = Warmup::Time(Duration::from_secs_f64(warmup));
        scn.run.batches = Some(5);
        for (k, values) in &mut scn.sweep {
            if k == "load" && !loads.is_empty() {
                *values = loads.iter().map(|l| toml::Value::Float(*l)).collect();
            }
        }
    }
    Ok(scn)
}

fn run_one(
    name: &'static str,
    text: &str,
    opts: &RdmaOptions<'_>,
    out: &Path,
    files: &mut Vec<PathBuf>,
    runs: &mut Vec<ExperimentRun>,
) -> Result<RunReport, LabError> {
    let scn = scenario(name, text, opts.quick)?;
    if let Some(p) = opts.progress {
        p(&format!("running {name} ({} points)", scn.points().len()));
    }
    let kind =
        atmlab_models::model_kind(&scn.model).ok_or_else(|| err(name, "unknown model kind"))?;
    let report = runner::run(
        &scn,
        kind,
        &RunOptions {
            threads: opts.threads,
            progress: None,
        },
    )
    .map_err(|e| err(name, e))?;
    let dir = out.join(name);
    write_results(&dir, &report).map_err(|e| err(name, e))?;
    for f in [
        "results.json",
        "results.csv",
        "replications.csv",
        "run.json",
    ] {
        files.push(dir.join(f));
    }
    runs.push(ExperimentRun {
        name,
        events: report.events,
        wall_seconds: report.wall_seconds,
    });
    Ok(report)
}

fn metrics_of(p: &PointResult) -> Metrics {
    Metrics(p.metrics.clone())
}

fn swept_number(p: &PointResult, key: &str) -> f64 {
    p.swept
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        .unwrap_or(f64::NAN)
}

/// The points of a run whose swept `mechanism` is the `c`-th value, in load order.
fn curves_of(report: &RunReport, points: &[&PointResult], labels: &[&str]) -> Vec<Curve> {
    let mechanisms = report
        .scenario
        .sweep
        .iter()
        .find(|(k, _)| k == "mechanism")
        .map_or(&[][..], |(_, v)| v.as_slice());
    labels
        .iter()
        .enumerate()
        .map(|(c, label)| {
            let mut pts: Vec<(f64, Metrics)> = points
                .iter()
                .filter(|p| {
                    mechanisms
                        .get(c)
                        .is_some_and(|m| p.swept.iter().any(|(k, v)| k == "mechanism" && v == m))
                })
                .map(|p| (swept_number(p, "load"), metrics_of(p)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Curve {
                label: (*label).to_owned(),
                points: pts,
            }
        })
        .collect()
}

/// Gathers the runs' numbers.
pub fn results(
    t1: &RunReport,
    t2: &RunReport,
    t2f: &RunReport,
    bb: &RunReport,
    readings: &RunReport,
) -> RdmaResults {
    let rows = |r: &RunReport| r.points.iter().map(metrics_of).collect::<Vec<_>>();
    let all: Vec<&PointResult> = bb.points.iter().collect();
    let buffer = bb
        .scenario
        .params
        .get("buffer")
        .and_then(|v| v.as_integer().map(|i| i as f64).or_else(|| v.as_float()))
        .unwrap_or(20_000.0);
    let mut combos: Vec<(f64, f64)> = Vec::new();
    for p in &readings.points {
        let c = (
            swept_number(p, "buffer"),
            swept_number(p, "periphery_buffer"),
        );
        if !combos.contains(&c) {
            combos.push(c);
        }
    }
    let readings = combos
        .into_iter()
        .map(|(b, pb)| {
            let pts: Vec<&PointResult> = readings
                .points
                .iter()
                .filter(|p| {
                    swept_number(p, "buffer") == b && swept_number(p, "periphery_buffer") == pb
                })
                .collect();
            Reading {
                buffer: b,
                periphery_buffer: pb,
                curves: curves_of(readings, &pts, &READING_CURVES),
            }
        })
        .collect();
    RdmaResults {
        table1: rows(t1),
        table2: rows(t2),
        table2_frames: rows(t2f),
        backbone: curves_of(bb, &all, &CURVES),
        buffer,
        readings,
    }
}

/// The worst of several verdicts (the order of [`Verdict`]: reproduces best).
fn worst(checks: Vec<Check>, item: &str, claim: &str) -> Check {
    let verdict = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::NotApplicable);
    let ours = checks
        .iter()
        .map(|c| c.ours.clone())
        .collect::<Vec<_>>()
        .join("; ");
    let why = checks
        .iter()
        .map(|c| c.why.clone())
        .collect::<Vec<_>>()
        .join("; ");
    Check::new(item, claim, ours, verdict, why)
}

/// The paper's table cells against one of our tables.
fn table_checks(
    v: &mut Verdicts,
    name: &str,
    paper_rows: &[PaperRow],
    ours: &[OurRow],
    rows: &[Metrics],
    tolerance: f64,
) {
    for (r, m) in ours.iter().zip(rows) {
        let p = &paper_rows[r.paper];
        for (i, col) in COLUMNS.iter().enumerate() {
            let item = format!("{name} [{}] {}", r.label, col.heading);
            let est = m.get(col.paper_def.0);
            if r.fitted && i == 1 {
                v.push(Check::not_applicable(
                    item,
                    sig(p.values[i]),
                    format!(
                        "the bound B = 650 ms was read from this number (fitted); ours {}",
                        show(&est)
                    ),
                ));
                continue;
            }
            let mut c = value(item, p.values[i], &est, tolerance);
            c.why = format!("{}: {}", col.paper_def.1, c.why);
            if p.label != r.label {
                c.paper = format!("{} ({})", c.paper, p.label);
            }
            if let Some((other, name)) = col.other_def {
                let o = m.get(other);
                let off = (o.mean - p.values[i]).abs() / p.values[i].abs();
                c.ours = format!("{} ({})", c.ours, col.paper_def.1);
                c.why = format!(
                    "{}; {name} {} ({}% off, shown, not judged)",
                    c.why,
                    show(&o),
                    sig(100.0 * off)
                );
            }
            v.push(c);
        }
    }
}

/// `a` below every one of `others` (by `metric`), the worst pair deciding.
fn smallest(
    item: &str,
    claim: &str,
    rows: &[Metrics],
    labels: &[&str],
    a: usize,
    others: &[usize],
    metric: &str,
) -> Check {
    let ea = rows[a].get(metric);
    let checks = others
        .iter()
        .map(|&o| {
            let eo = rows[o].get(metric);
            order(
                item,
                claim,
                (labels[a], &ea),
                Relation::Less,
                (labels[o], &eo),
            )
        })
        .collect();
    worst(checks, item, claim)
}

fn labels(rows: &[OurRow]) -> Vec<&'static str> {
    rows.iter().map(|r| r.label).collect()
}

/// An absent point (a run without that load): not applicable.
fn missing(item: &str, claim: &str) -> Check {
    Check::not_applicable(item, claim, "this run has no such load")
}

/// The verdicts, a pure function of the results: each cell of Tables 1 and 2, each
/// figure's claims, and each of the paper's conclusions.
pub fn verdicts(r: &RdmaResults) -> Verdicts {
    let mut v = Verdicts::new();
    // Tables: each cell, within the paper's stated accuracy (6% voice, 8% video).
    table_checks(&mut v, "Table 1", &PAPER_TABLE1, &T1_ROWS, &r.table1, 0.06);
    table_checks(&mut v, "Table 2", &PAPER_TABLE2, &T2_ROWS, &r.table2, 0.08);
    table_checks(
        &mut v,
        "Table 2 (frame bursts)",
        &PAPER_TABLE2,
        &T2_ROWS,
        &r.table2_frames,
        0.08,
    );
    table_claims(&mut v, r);
    backbone_claims(&mut v, r);
    // verdicts.csv writes the item unquoted and the other fields quoted without
    // escaping: keep commas out of the item and double quotes out of every field.
    let mut safe = Verdicts::new();
    for c in v.checks() {
        let mut c = c.clone();
        c.item = c.item.replace(',', ";").replace('"', "'");
        c.paper = c.paper.replace('"', "'");
        c.ours = c.ours.replace('"', "'");
        c.why = c.why.replace('"', "'");
        safe.push(c);
    }
    safe
}

fn table_claims(v: &mut Verdicts, r: &RdmaResults) {
    let l1 = labels(&T1_ROWS);
    let l2 = labels(&T2_ROWS);
    // The text-bound rows only: the fitted ones are not the paper's parameters.
    let t1_others = [1, 2, 3, 4];
    if r.table1.len() >= 5 {
        let item = "Table 1: RDMA has the smallest voice delay";
        v.push(smallest(
            item,
            "RDMA's mean delay below every other mechanism's",
            &r.table1,
            &l1,
            0,
            &t1_others,
            "mean_delay",
        ));
        let item = "Table 1: the Leaky Bucket C=1.2 has the largest voice delay";
        let lb = r.table1[1].get("mean_delay");
        let checks = [0, 2, 3, 4]
            .iter()
            .map(|&o| {
                let eo = r.table1[o].get("mean_delay");
                order(item, "", (l1[1], &lb), Relation::Greater, (l1[o], &eo))
            })
            .collect();
        v.push(worst(checks, item, "L. Bucket C=1.2 above every other"));
        for (metric, what) in [
            ("mean_jitter", "mean jitter (mean increase)"),
            ("max_jitter", "max jitter (largest increase)"),
            ("mean_occupancy_events", "occupation (event average)"),
        ] {
            let item = format!("Table 1: RDMA's voice {what} is the smallest");
            v.push(smallest(
                &item,
                "\"Jitter and occupation for RDMA was smaller as well\"",
                &r.table1,
                &l1,
                0,
                &t1_others,
                metric,
            ));
        }
        // Issue 22: the fitted bound's rows only show what 650 ms gives.
        for (i, c) in [(3, "C=1"), (4, "C=1.2")] {
            let loss = r.table1[i].get("loss_probability");
            v.push(at_most(
                format!("Virtual Clock {c} B = AI: no cell lost (paper's footnote)"),
                "infinite buffers avoid losses from each mechanism",
                &loss,
                0.0,
            ));
        }
    }
    if r.table2.len() >= 6 {
        let d = |i: usize| r.table2[i].get("mean_delay");
        let item = "Table 2: RDMA's video delay exceeds only L. Bucket C=1.4 and V. Clock C=1.2";
        let mut checks = Vec::new();
        for i in [3, 5] {
            checks.push(order(
                item,
                "",
                ("RDMA", &d(0)),
                Relation::Greater,
                (l2[i], &d(i)),
            ));
        }
        for i in [1, 2, 4] {
            checks.push(order(
                item,
                "",
                ("RDMA", &d(0)),
                Relation::Less,
                (l2[i], &d(i)),
            ));
        }
        let mut ch = worst(
            checks,
            item,
            "\"The delay suffered by RDMA is only greater than the one by Leaky Bucket for C=1.4 and the one by Virtual Clock for C=1.2\"",
        );
        let (p_rdma, p_lb) = (PAPER_TABLE2[0].values[0], PAPER_TABLE2[3].values[0]);
        ch.why = format!(
            "{}; the paper's own Table 2 contradicts the claim: RDMA {} s < L. Bucket C=1.4 {} s",
            ch.why,
            sig(p_rdma),
            sig(p_lb)
        );
        v.push(ch);
        let o = |i: usize| r.table2[i].get("mean_occupancy_events");
        let item = "Table 2: the Leaky Bucket C=1.15 has the highest occupation (event average)";
        let checks = [0, 3, 4, 5]
            .iter()
            .map(|&i| order(item, "", (l2[1], &o(1)), Relation::Greater, (l2[i], &o(i))))
            .collect();
        v.push(worst(
            checks,
            item,
            "\"mainly for Leaky Bucket with C = 1.15\"",
        ));
        let item = "Table 2: Virtual Clock has the smallest occupation (event average)";
        v.push(smallest(
            item,
            "\"Virtual Clock had the smallest occupation\"",
            &r.table2,
            &l2,
            5,
            &[0, 1, 2, 3],
            "mean_occupancy_events",
        ));
        for (rows, name) in [
            (&r.table2, "Table 2"),
            (&r.table2_frames, "Table 2 (frame bursts)"),
        ] {
            for (i, c) in [(1, 1.15), (3, 1.4)] {
                let credit = 1.0 / (c * 10_156.0);
                let mut ch = value(
                    format!("{name}: L. Bucket C={c} max jitter is the inter-credit time"),
                    credit,
                    &rows[i].get("max_jitter"),
                    0.08,
                );
                ch.paper = format!("1/(C x 10,156) = {}", sig(credit));
                v.push(ch);
            }
            for (i, c) in [(4, "C=1"), (5, "C=1.2")] {
                let mut ch = value(
                    format!("{name}: V. Clock {c} max jitter is the 33 ms penalty bound"),
                    0.033,
                    &rows[i].get("max_abs_jitter"),
                    0.02,
                );
                ch.paper = "\"due to the maximal penalty delay\" (33 ms)".into();
                ch.why = format!("largest change: {}", ch.why);
                v.push(ch);
            }
        }
    }
}

fn backbone_claims(v: &mut Verdicts, r: &RdmaResults) {
    let bb = &r.backbone;
    if bb.len() < CURVES.len() {
        return;
    }
    let loss = "periphery_loss";
    // Fig. 8.
    for c in [RDMA1, LB] {
        let item = format!(
            "Fig. 8: {} loses nothing below the 50% dimensioning load",
            bb[c].label
        );
        let claim = "losses occur after an offered load of 50%";
        v.push(match bb[c].below(0.5, loss) {
            Some((l, e)) => {
                let mut ch = at_most(&item, claim, &e, 1e-3);
                ch.ours = format!("load {l}: {}", ch.ours);
                ch
            }
            None => missing(&item, claim),
        });
        let item = format!("Fig. 8: {} loses heavily in overload", bb[c].label);
        let claim = "very high losses above 50% (an instability region)";
        v.push(match bb[c].last(loss) {
            Some((l, e)) if l > 0.5 => {
                let mut ch = at_least(&item, claim, &e, 0.05);
                ch.ours = format!("load {l}: {}", ch.ours);
                ch
            }
            _ => missing(&item, claim),
        });
    }
    let item = "Fig. 8: Virtual Clock practically suffers no periphery loss even in overload";
    let claim = "\"practically, does not suffer losses\"";
    v.push(match bb[VC01].last(loss) {
        Some((l, e)) => {
            let mut ch = at_most(item, claim, &e, 1e-3);
            ch.ours = format!("load {l}: {}", ch.ours);
            ch
        }
        None => missing(item, claim),
    });
    // Fig. 9.
    let occ = "internal_occupancy";
    let item = "Fig. 9: RDMA with two trees keeps C3's occupancy nearly zero";
    let claim = "\"nearly zero, even when the offered load is greater\"";
    let worst_two = bb[RDMA2]
        .series(occ)
        .into_iter()
        .max_by(|a, b| a.1.mean.total_cmp(&b.1.mean));
    v.push(match worst_two {
        Some((l, e)) => {
            let mut ch = at_most(item, claim, &e, 1.0);
            ch.ours = format!("largest, at load {l}: {}", ch.ours);
            ch.why = format!("nearly zero read as at most 1 cell; {}", ch.why);
            ch
        }
        None => missing(item, claim),
    });
    let item = "Fig. 9: RDMA with two trees has the lowest C3 occupancy";
    v.push(match bb[RDMA2].last(occ) {
        Some((l, two)) => {
            let checks = [RDMA1, LB, VC01]
                .iter()
                .filter_map(|&c| bb[c].last(occ).map(|x| (c, x.1)))
                .map(|(c, e)| {
                    order(
                        item,
                        "",
                        ("two trees", &two),
                        Relation::Less,
                        (&bb[c].label, &e),
                    )
                })
                .collect();
            let mut ch = worst(checks, item, "\"the lower average occupancy\"");
            ch.ours = format!("load {l}: {}", ch.ours);
            ch
        }
        None => missing(item, ""),
    });
    let item = "Fig. 9: Leaky Bucket occupancy appears only from its dimensioning load";
    let claim =
        "\"perceived only after the offered load becomes the same load used to its dimensioning\"";
    v.push(match bb[LB].below(0.5, occ) {
        Some((l, e)) => {
            let mut ch = at_most(item, claim, &e, 1.0);
            ch.ours = format!("load {l}: {}", ch.ours);
            ch.why = format!("below 50% read as at most 1 cell; {}", ch.why);
            ch
        }
        None => missing(item, claim),
    });
    let item = "Fig. 9: Leaky Bucket occupancy at C3 does not grow to the memory";
    let claim = "\"it does not grow indefinitely, being shaped\"";
    let half = r.buffer / 2.0;
    v.push(match bb[LB].last(occ) {
        Some((l, e)) => {
            let mut ch = at_most(item, claim, &e, half);
            ch.ours = format!("load {l}: {}", ch.ours);
            ch.why = format!(
                "read as below half the {}-cell memory; two shapers at 1.4 x 50% offer C3 up to 2 x 0.7 = 1.4 of its link, so from a load of 0.5 C3 is overloaded whatever its memory; {}",
                sig(r.buffer),
                ch.why
            );
            ch
        }
        None => missing(item, claim),
    });
    let item = "Fig. 9: with one tree RDMA reaches C3's memory from 30%";
    let claim = "\"From 30%, the upper bound of internal node memory was reached\"";
    v.push(match bb[RDMA1].from(0.3, occ) {
        Some((l, e)) => {
            let mut ch = at_least(item, claim, &e, 0.9 * r.buffer);
            ch.ours = format!("load {l}: {}", ch.ours);
            ch.why = format!("reached read as at least 90% of it; {}", ch.why);
            ch
        }
        None => missing(item, claim),
    });
    // Fig. 10.
    let c3loss = "internal_loss";
    let item = "Fig. 10: Virtual Clock's discards at C3 grow after 50%";
    let claim = "\"after a load of 50%, its mean number of discarded cells grows indefinitely\"";
    let over: Vec<(f64, Estimate)> = bb[VC01]
        .series("internal_lost_per_s")
        .into_iter()
        .filter(|(l, _)| *l >= 0.5 - 1e-9)
        .collect();
    let mut ch = trend(item, claim, &over, Direction::Increasing);
    if let Some((l, e)) = bb[VC01].last(c3loss) {
        let at = at_least(item, claim, &e, 1e-3);
        ch.ours = format!("{}; loss ratio at load {l}: {}", ch.ours, at.ours);
        ch.why = format!("cells/s over loads ≥ 0.5: {}; ratio: {}", ch.why, at.why);
        ch.verdict = ch.verdict.max(at.verdict);
    }
    v.push(ch);
    let item = "Fig. 10: with one tree RDMA loses cells at C3 from 30%";
    let claim = "\"From 30% ... losses occurred\"";
    v.push(
        match (bb[RDMA1].below(0.3, c3loss), bb[RDMA1].from(0.3, c3loss)) {
            (Some((l0, e0)), Some((l1, e1))) => {
                let a = at_most(item, claim, &e0, 1e-3);
                let b = at_least(item, claim, &e1, 1e-3);
                let mut ch = worst(vec![a, b], item, claim);
                ch.ours = format!("load {l0} then {l1}: {}", ch.ours);
                ch
            }
            _ => missing(item, claim),
        },
    );
    // Fig. 11.
    let d = "periphery_delay";
    let item = "Fig. 11: at low load RDMA's delay is the largest";
    let claim = "\"the RDMA delay is bigger than the others for low loads\"";
    v.push(match bb[RDMA1].first(d) {
        Some((l, rd)) => {
            let checks = [LB, VC01, VC5]
                .iter()
                .filter_map(|&c| bb[c].first(d).map(|x| (c, x.1)))
                .map(|(c, e)| {
                    order(
                        item,
                        "",
                        ("RDMA", &rd),
                        Relation::Greater,
                        (&bb[c].label, &e),
                    )
                })
                .collect();
            let mut ch = worst(checks, item, claim);
            ch.ours = format!("load {l}: {}", ch.ours);
            ch
        }
        None => missing(item, claim),
    });
    for c in [LB, VC01] {
        let item = format!(
            "Fig. 11: at high load {}'s delay surpasses RDMA's",
            bb[c].label
        );
        let claim = "\"as the offered load grows, the delay for Leaky Bucket and Virtual Clock surpass RDMA\"";
        v.push(match (bb[c].last(d), bb[RDMA1].last(d)) {
            (Some((l, e)), Some((_, rd))) => {
                let mut ch = order(
                    &item,
                    claim,
                    (&bb[c].label, &e),
                    Relation::Greater,
                    ("RDMA", &rd),
                );
                ch.ours = format!("load {l}: {}", ch.ours);
                ch
            }
            _ => missing(&item, claim),
        });
    }
    let item = "Fig. 11: Virtual Clock (5 ms) stays below RDMA";
    let claim = "\"(except for Virtual Clock with 5ms penalty time)\"";
    v.push(match (bb[VC5].last(d), bb[RDMA1].last(d)) {
        (Some((l, e)), Some((_, rd))) => {
            let mut ch = order(item, claim, ("VC 5 ms", &e), Relation::Less, ("RDMA", &rd));
            ch.ours = format!("load {l}: {}", ch.ours);
            ch
        }
        _ => missing(item, claim),
    });
    let item = "Fig. 11: delays within the paper's axis (up to 0.6 ms)";
    let claim = "axis \"Scale=10^-3\", ticks 0 to 0.6";
    let checks: Vec<Check> = [RDMA1, LB, VC01, VC5]
        .iter()
        .filter_map(|&c| bb[c].last(d).map(|x| (c, x.1)))
        .map(|(c, e)| {
            let mut ch = at_most(item, claim, &e, FIG11_TOP);
            ch.ours = format!("{} {}", bb[c].label, ch.ours);
            ch
        })
        .collect();
    v.push(if checks.is_empty() {
        missing(item, claim)
    } else {
        worst(checks, item, claim)
    });
    // The readings: does any give both the magnitude and the crossover?
    let fits: Vec<String> = fig11_readings(r)
        .into_iter()
        .filter(|x| x.magnitude && x.crossover)
        .map(|x| x.name)
        .collect();
    let tried = fig11_readings(r).len();
    v.push(Check::new(
        "Fig. 11: a reading of buffers and delay with both the magnitude and the crossover",
        "delays up to 0.6 ms; RDMA largest at low load, LB and VC (0.1 ms) above RDMA at high load",
        if fits.is_empty() {
            format!("none of {tried} readings")
        } else {
            fits.join("; ")
        },
        if tried == 0 {
            Verdict::NotApplicable
        } else if fits.is_empty() {
            Verdict::Differs
        } else {
            Verdict::Reproduces
        },
        "each reading's means at the lowest and highest load (see the readings table); intervals not used: a screening",
    ));
}

/// One Figure 11 reading, judged on its means.
struct ReadingFit {
    name: String,
    /// RDMA (each tree count), LB, VC 0.1 ms, VC 5 ms at the highest load.
    top: Vec<f64>,
    magnitude: bool,
    crossover: bool,
}

/// Each (buffers, delay, RDMA trees) reading with its verdict on magnitude and crossover.
fn fig11_readings(r: &RdmaResults) -> Vec<ReadingFit> {
    let mut out = Vec::new();
    for rd in &r.readings {
        if rd.curves.len() < READING_CURVES.len() {
            continue;
        }
        for metric in ["periphery_delay", "delivered_delay"] {
            for rdma in [RDMA1, RDMA2] {
                let lo = |c: usize| rd.curves[c].first(metric).map_or(f64::NAN, |x| x.1.mean);
                let hi = |c: usize| rd.curves[c].last(metric).map_or(f64::NAN, |x| x.1.mean);
                let top = vec![hi(rdma), hi(LB), hi(VC01), hi(VC5)];
                let magnitude = top.iter().all(|t| *t <= FIG11_TOP);
                let crossover = [LB, VC01, VC5].iter().all(|&c| lo(rdma) > lo(c))
                    && hi(LB) > hi(rdma)
                    && hi(VC01) > hi(rdma);
                out.push(ReadingFit {
                    name: format!(
                        "C3 {} cells, periphery {} cells, {metric}, {}",
                        sig(rd.buffer),
                        sig(rd.periphery_buffer),
                        rd.curves[rdma].label
                    ),
                    top,
                    magnitude,
                    crossover,
                });
            }
        }
    }
    out
}

/// A number in the tables: four significant digits.
fn fmt(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    sig(x)
}

fn fmt_ci(e: &Estimate) -> String {
    if e.mean.is_nan() {
        "n/a".into()
    } else if e.ci95.is_finite() {
        format!("{} ± {}", fmt(e.mean), fmt(e.ci95))
    } else {
        fmt(e.mean)
    }
}

/// A CI half-width in a CSV: empty where there is none.
fn ci_field(ci: f64) -> Value {
    if ci.is_finite() {
        Value::Float(ci)
    } else {
        Value::Empty
    }
}

/// A table of the paper beside ours: wide in the markdown (paper, then ours under each
/// definition, the paper's definition marked), long in the CSV.
fn table(paper: &[PaperRow], ours: &[OurRow], rows: &[Metrics]) -> Table {
    let mut columns = vec![Column::md("Mechanism")];
    for col in &COLUMNS {
        columns.push(
            Column::md(&format!("{}: paper", col.heading))
                .right()
                .format(Format::Custom(fmt)),
        );
        columns.push(Column::md(&format!("{} (paper's)", col.paper_def.1)).right());
        if let Some((_, name)) = col.other_def {
            columns.push(Column::md(name).right());
        }
    }
    columns.push(Column::md("Loss").right());
    columns.extend(["mechanism", "metric", "paper", "mean", "ci95"].map(Column::csv));
    let mut t = Table::new(columns).compact();
    for (r, m) in ours.iter().zip(rows) {
        let p = &paper[r.paper];
        let mut md = cells![r.label];
        for (i, col) in COLUMNS.iter().enumerate() {
            let e = m.get(col.paper_def.0);
            md.extend(cells![p.values[i], fmt_ci(&e)]);
            t.csv_row(cells![
                r.label,
                col.paper_def.0,
                p.values[i],
                e.mean,
                ci_field(e.ci95)
            ]);
            if let Some((other, _)) = col.other_def {
                let o = m.get(other);
                md.push(fmt_ci(&o).into());
                t.csv_row(cells![
                    r.label,
                    other,
                    Value::Empty,
                    o.mean,
                    ci_field(o.ci95)
                ]);
            }
        }
        let l = m.get("loss_probability");
        md.push(fmt_ci(&l).into());
        t.csv_row(cells![
            r.label,
            "loss_probability",
            Value::Empty,
            l.mean,
            ci_field(l.ci95)
        ]);
        t.md_row(md);
    }
    t
}

/// What the report says of a table's run.
fn table_context(t: &Table, report: &RunReport) -> minijinja::Value {
    context! {
        table => t.markdown(),
        events => report.events,
        wall => report.wall_seconds,
        threads => report.threads,
        batches => report
            .points
            .first()
            .map_or(0, |p| p.metrics.first().map_or(0, |m| m.1.n)),
    }
}

/// Plots and writes each figure (PNG, SVG, CSV); returns what the report shows of them.
fn figures(
    out: &Path,
    r: &RdmaResults,
    files: &mut Vec<PathBuf>,
) -> Result<Vec<minijinja::Value>, LabError> {
    let mut shown = Vec::new();
    for f in &FIGURES {
        let series: Vec<Series> = f
            .curves
            .iter()
            .filter_map(|&c| r.backbone.get(c))
            .map(|c| Series {
                label: c.label.clone(),
                points: c
                    .series(f.metric)
                    .into_iter()
                    .map(|(l, e)| (l, e.mean, e.ci95))
                    .collect(),
            })
            .collect();
        let spec = PlotSpec {
            title: f.title,
            x_label: "offered load of each LAN (share of 150 Mb/s)",
            y_label: f.y_label,
            log_y: f.log_y,
        };
        plot(out, f.stem, spec, &series)?;
        let mut csv = Table::new(["load", "curve", "mean", "ci95"].map(Column::csv));
        for s in &series {
            for &(l, m, ci) in &s.points {
                csv.csv_row(cells![l, &s.label, m, ci_field(ci)]);
            }
        }
        let csv_name = format!("{}.csv", f.stem);
        write(out, &csv_name, &csv.csv())?;
        files.push(out.join(f.stem).with_extension("png"));
        files.push(out.join(csv_name));

        // The markdown: a row per load, a column per curve.
        let mut t = Table::new(
            std::iter::once(Column::md("load").right())
                .chain(series.iter().map(|s| Column::md(&s.label).right())),
        )
        .compact();
        let n = series.first().map_or(0, |s| s.points.len());
        for i in 0..n {
            let mut row = cells![series[0].points[i].0];
            row.extend(series.iter().map(|s| {
                let (_, m, ci) = s.points[i];
                Value::from(fmt_ci(&Estimate {
                    mean: m,
                    ci95: ci,
                    n: 0,
                }))
            }));
            t.md_row(row);
        }
        shown.push(context! { stem => f.stem, title => f.title, table => t.markdown() });
    }
    Ok(shown)
}

/// The Figure 11 readings: a row per reading, its delays at the highest load and whether
/// it gives the magnitude and the crossover.
fn readings_table(
    out: &Path,
    r: &RdmaResults,
    files: &mut Vec<PathBuf>,
) -> Result<String, LabError> {
    let mut t = Table::new([
        Column::new("reading", "reading"),
        Column::new("RDMA", "rdma").right(),
        Column::new("Leaky Bucket", "lb").right(),
        Column::new("VC 0.1 ms", "vc_01").right(),
        Column::new("VC 5 ms", "vc_5").right(),
        Column::new("≤ 0.6 ms", "magnitude").right(),
        Column::new("crossover", "crossover").right(),
    ])
    .compact();
    let yes = |b: bool| if b { "yes" } else { "no" };
    for x in fig11_readings(r) {
        let mut row = cells![x.name];
        row.extend(x.top.iter().map(|d| Value::from(fmt(*d))));
        row.extend(cells![yes(x.magnitude), yes(x.crossover)]);
        t.row(row);
    }
    write(out, "fig11-readings.csv", &t.csv())?;
    files.push(out.join("fig11-readings.csv"));
    Ok(t.markdown())
}

/// Runs the reproduction into `out` (created if needed).
pub fn run(out: &Path, opts: &RdmaOptions<'_>) -> Result<RdmaReport, LabError> {
    report::create_dir(out)?;
    let mut files = Vec::new();
    let mut runs = Vec::new();
    let t1 = run_one("table1-voice", TABLE1, opts, out, &mut files, &mut runs)?;
    let t2 = run_one("table2-video", TABLE2, opts, out, &mut files, &mut runs)?;
    let t2f = run_one(
        "table2-video-frames",
        TABLE2_FRAMES,
        opts,
        out,
        &mut files,
        &mut runs,
    )?;
    let bb = run_one(
        "fig08-11-backbone",
        BACKBONE,
        opts,
        out,
        &mut files,
        &mut runs,
    )?;
    let rd = run_one("fig11-readings", READINGS, opts, out, &mut files, &mut runs)?;
    let results = results(&t1, &t2, &t2f, &bb, &rd);
    let verdicts = verdicts(&results);
    let verdict_md = verdicts.write(out)?;
    files.push(out.join("verdicts.csv"));

    let table1 = table(&PAPER_TABLE1, &T1_ROWS, &results.table1);
    let table2 = table(&PAPER_TABLE2, &T2_ROWS, &results.table2);
    let table2f = table(&PAPER_TABLE2, &T2_ROWS, &results.table2_frames);
    for (name, t) in [
        ("table1.csv", &table1),
        ("table2.csv", &table2),
        ("table2-frames.csv", &table2f),
    ] {
        write(out, name, &t.csv())?;
        files.push(out.join(name));
    }
    let figures = figures(out, &results, &mut files)?;
    let readings = readings_table(out, &results, &mut files)?;
    let mut run_table = Table::new([
        Column::md("experiment"),
        Column::md("events").right(),
        Column::md("wall (s)").right().format(Format::Fixed(1)),
    ])
    .compact();
    for r in &runs {
        run_table.md_row(cells![r.name, r.events, r.wall_seconds]);
    }
    let md = report::render(
        "rdma.md",
        TEMPLATE,
        context! {
            quick => opts.quick,
            verdicts => verdict_md,
            table1 => table_context(&table1, &t1),
            table2 => table_context(&table2, &t2),
            table2f => table_context(&table2f, &t2f),
            figures => figures,
            readings => readings,
            runs => run_table.markdown(),
        },
    )?;
    write(out, "report.md", &md)?;
    let report = out.join("report.md");
    files.insert(0, report.clone());
    Ok(RdmaReport {
        report,
        files,
        experiments: runs,
        verdicts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(mean: f64, ci95: f64) -> Estimate {
        Estimate { mean, ci95, n: 10 }
    }

    /// Results shaped like the paper's: its own table values as our means with narrow
    /// intervals, and backbone curves that follow its figures' claims.
    fn paper_like() -> RdmaResults {
        let table = |paper: &[PaperRow], ours: &[OurRow]| -> Vec<Metrics> {
            ours.iter()
                .map(|r| {
                    let p = &paper[r.paper].values;
                    let mut m = Metrics::default();
                    for (i, col) in COLUMNS.iter().enumerate() {
                        m.set(col.paper_def.0, est(p[i], p[i] * 0.01));
                        if let Some((o, _)) = col.other_def {
                            m.set(o, est(p[i] * 2.0, p[i] * 0.01));
                        }
                    }
                    m.set("loss_probability", est(0.0, 0.0));
                    m
                })
                .collect()
        };
        let mut t2 = table(&PAPER_TABLE2, &T2_ROWS);
        for (i, c) in [(1, 1.15), (3, 1.4)] {
            t2[i].set("max_jitter", est(1.0 / (c * 10_156.0), 1e-9));
        }
        for i in [4, 5] {
            t2[i].set("max_abs_jitter", est(0.033, 1e-5));
        }
        let loads = [0.1, 0.3, 0.5, 0.7, 0.9];
        // (periphery loss, C3 occupancy, C3 loss, C3 lost/s, delay) by curve and load.
        let curve = |c: usize| -> Curve {
            let points = loads
                .iter()
                .map(|&l| {
                    let over = (l - 0.5_f64).max(0.0);
                    let (pl, occ, c3, c3s, d) = match c {
                        RDMA1 => (
                            over,
                            if l >= 0.3 { 19_900.0 } else { 100.0 },
                            if l >= 0.3 { 0.3 } else { 0.0 },
                            1e4,
                            4e-5 + over * 0.5e-3,
                        ),
                        RDMA2 => (over, 0.01, 0.0, 0.0, 4e-5 + over * 0.5e-3),
                        LB => (
                            over * 0.5,
                            if l >= 0.5 { 500.0 } else { 0.0 },
                            0.0,
                            0.0,
                            1e-6 + over * 1e-3,
                        ),
                        VC01 => (0.0, 3.0, over, over * 1e5, 1e-6 + over * 1e-3),
                        _ => (0.0, 3.0, over, over * 1e5, 1e-6 + over * 1e-4),
                    };
                    let mut m = Metrics::default();
                    m.set("periphery_loss", est(pl, pl * 0.01));
                    m.set("internal_occupancy", est(occ, occ * 0.01));
                    m.set("internal_loss", est(c3, c3 * 0.01));
                    m.set("internal_lost_per_s", est(c3s, c3s * 0.01));
                    m.set("periphery_delay", est(d, d * 0.01));
                    m.set("delivered_delay", est(d, d * 0.01));
                    (l, m)
                })
                .collect();
            Curve {
                label: CURVES[c].to_owned(),
                points,
            }
        };
        let curves: Vec<Curve> = (0..5).map(curve).collect();
        RdmaResults {
            table1: table(&PAPER_TABLE1, &T1_ROWS),
            table2: t2.clone(),
            table2_frames: t2,
            backbone: curves.clone(),
            buffer: 20_000.0,
            readings: vec![Reading {
                buffer: 20_000.0,
                periphery_buffer: 100.0,
                curves,
            }],
        }
    }

    #[test]
    fn the_papers_own_numbers_reproduce_and_a_changed_number_differs() {
        let mut r = paper_like();
        let v = verdicts(&r);
        // The one claim the paper's own table contradicts (RDMA 0.00787 s < LB C=1.4
        // 0.0166 s) differs on its own numbers too.
        let own = "Table 2: RDMA's video delay exceeds only L. Bucket C=1.4 and V. Clock C=1.2";
        assert_eq!(v.verdict(own), Some(Verdict::Differs));
        let bad: Vec<_> = v
            .checks()
            .iter()
            .filter(|c| c.item != own)
            .filter(|c| !matches!(c.verdict, Verdict::Reproduces | Verdict::NotApplicable))
            .map(|c| format!("{}: {} — {}", c.item, c.verdict, c.why))
            .collect();
        assert!(bad.is_empty(), "{bad:#?}");
        let item = "Table 1 [RDMA] Mean Delay (s)";
        assert_eq!(v.verdict(item), Some(Verdict::Reproduces));
        // Change one number: the verdict follows.
        r.table1[0].set("mean_delay", est(0.00015, 1e-7));
        assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Differs));
        // The fitted bound's max jitter is never a test.
        assert_eq!(
            v.verdict("Table 1 [V. Clock B = 650 ms (fitted)] Max Jitter (s)"),
            Some(Verdict::NotApplicable)
        );
    }

    #[test]
    fn figure_claims_follow_the_curves() {
        let mut r = paper_like();
        let vc = "Fig. 8: Virtual Clock practically suffers no periphery loss even in overload";
        assert_eq!(verdicts(&r).verdict(vc), Some(Verdict::Reproduces));
        // A Virtual Clock that drops at the periphery (the old reading) fails the claim.
        let last = r.backbone[VC01].points.len() - 1;
        r.backbone[VC01].points[last]
            .1
            .set("periphery_loss", est(0.44, 0.005));
        assert_eq!(verdicts(&r).verdict(vc), Some(Verdict::Differs));
        // And one whose C3 loses nothing in overload fails Fig. 10's.
        let grow = "Fig. 10: Virtual Clock's discards at C3 grow after 50%";
        assert_eq!(verdicts(&r).verdict(grow), Some(Verdict::Reproduces));
        for p in &mut r.backbone[VC01].points {
            p.1.set("internal_loss", est(0.0, 0.0));
            p.1.set("internal_lost_per_s", est(0.0, 0.0));
        }
        assert_ne!(verdicts(&r).verdict(grow), Some(Verdict::Reproduces));
        // Fig. 11's crossover: RDMA's delay above the Leaky Bucket's at high load.
        let cross = "Fig. 11: at high load Leaky Bucket C=1.4's delay surpasses RDMA's";
        assert!(
            verdicts(&r).checks().iter().all(|c| !c.item.contains(',')),
            "items go unquoted into verdicts.csv"
        );
        assert!(
            verdicts(&r)
                .checks()
                .iter()
                .all(|c| !format!("{}{}{}", c.paper, c.ours, c.why).contains('"')),
            "fields are quoted without escaping"
        );
        assert_eq!(verdicts(&r).verdict(cross), Some(Verdict::Reproduces));
        r.backbone[RDMA1].points[last]
            .1
            .set("periphery_delay", est(0.1, 1e-4));
        assert_eq!(verdicts(&r).verdict(cross), Some(Verdict::Differs));
        // LB filling C3's memory contradicts "does not grow indefinitely".
        let lb = "Fig. 9: Leaky Bucket occupancy at C3 does not grow to the memory";
        assert_eq!(verdicts(&r).verdict(lb), Some(Verdict::Reproduces));
        r.backbone[LB].points[last]
            .1
            .set("internal_occupancy", est(19_950.0, 50.0));
        assert_eq!(verdicts(&r).verdict(lb), Some(Verdict::Differs));
    }

    #[test]
    fn orderings_need_separated_intervals() {
        let mut r = paper_like();
        let item = "Table 1: RDMA has the smallest voice delay";
        assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Reproduces));
        // RDMA's delay overlapping the Virtual Clock C=1.2's: undecided, not "holds".
        r.table1[0].set("mean_delay", est(0.19, 0.01));
        assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Undecided));
        r.table1[0].set("mean_delay", est(2.0, 0.01));
        assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Differs));
    }

    #[test]
    fn a_reading_fits_only_with_both_magnitude_and_crossover() {
        let mut r = paper_like();
        let item =
            "Fig. 11: a reading of buffers and delay with both the magnitude and the crossover";
        assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Reproduces));
        // Delays of 0.1 s at high load: no reading is within the paper's axis.
        for c in &mut r.readings[0].curves {
            for p in &mut c.points {
                if p.0 > 0.8 {
                    p.1.set("periphery_delay", est(0.1, 1e-4));
                    p.1.set("delivered_delay", est(0.1, 1e-4));
                }
            }
        }
        assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Differs));
    }
}
