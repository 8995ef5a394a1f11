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
//! - `README.md`: the verdict table, then each table side by side (paper, then atmlab
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

use super::Experiments;
use crate::report::verdict::{
    Direction, Relation, at_least, at_most, order, show, sig, trend, value,
};
use crate::report::{self, Check, Column, Format, Table, Value, Verdict, Verdicts, plot, write};
use crate::{LabError, cells};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../../templates/rdma.md");

const TABLE1: &str = include_str!("../../../../../scenarios/rdma/table1-voice.toml");
const TABLE2: &str = include_str!("../../../../../scenarios/rdma/table2-video.toml");
const TABLE2_FRAMES: &str = include_str!("../../../../../scenarios/rdma/table2-video-frames.toml");
const BACKBONE: &str = include_str!("../../../../../scenarios/rdma/fig08-11-backbone.toml");
const READINGS: &str = include_str!("../../../../../scenarios/rdma/fig11-readings.toml");

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

/// The experiments [`run`] runs through [`run_one`].
const EXPERIMENTS: usize = 5;

fn run_one(
    name: &'static str,
    text: &str,
    opts: &RdmaOptions<'_>,
    out: &Path,
    files: &mut Vec<PathBuf>,
    runs: &mut Vec<ExperimentRun>,
    experiments: &mut Experiments,
) -> Result<RunReport, LabError> {
    let scn = scenario(name, text, opts.quick)?;
    let line = format!("{name} ({} points)", scn.points().len());
    experiments.start(&line);
    if let Some(p) = opts.progress {
        p(&format!("running {line}"));
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

mod verdicts;
use verdicts::fig11_readings;
pub use verdicts::verdicts;

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
    let mut experiments = Experiments::new("rdma", EXPERIMENTS);
    let t1 = run_one(
        "table1-voice",
        TABLE1,
        opts,
        out,
        &mut files,
        &mut runs,
        &mut experiments,
    )?;
    let t2 = run_one(
        "table2-video",
        TABLE2,
        opts,
        out,
        &mut files,
        &mut runs,
        &mut experiments,
    )?;
    let t2f = run_one(
        "table2-video-frames",
        TABLE2_FRAMES,
        opts,
        out,
        &mut files,
        &mut runs,
        &mut experiments,
    )?;
    let bb = run_one(
        "fig08-11-backbone",
        BACKBONE,
        opts,
        out,
        &mut files,
        &mut runs,
        &mut experiments,
    )?;
    let rd = run_one(
        "fig11-readings",
        READINGS,
        opts,
        out,
        &mut files,
        &mut runs,
        &mut experiments,
    )?;
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
    write(out, "README.md", &md)?;
    let report = out.join("README.md");
    files.insert(0, report.clone());
    Ok(RdmaReport {
        report,
        files,
        experiments: runs,
        verdicts,
    })
}

#[cfg(test)]
mod tests;
