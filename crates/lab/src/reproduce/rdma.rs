//! `atmlab reproduce rdma`: paper 003's Tables 1 and 2 and Figures 8-11, with the
//! paper's published numbers beside ours.
//!
//! The scenarios are the files of `scenarios/rdma/`, embedded in the binary so that it
//! works from any directory. Each runs through the engine's runner, so the numbers do not
//! depend on the thread count. `quick` shortens every run (and keeps three loads of the
//! backbone sweep): the form CI runs, with wide confidence intervals.
//!
//! What is written into the output directory:
//! - `report.md`: each table side by side (paper, then atmlab mean ± 95% CI), each
//!   figure with the paper's statements about it checked against our curves;
//! - `table1.csv`, `table2.csv`: mechanism, metric, paper, mean, ci95;
//! - `fig08.png` … `fig11.png` (and `.svg`) with `fig08.csv` … `fig11.csv`;
//! - `table1-voice/`, `table2-video/`, `fig08-11-backbone/`: the runner's own result
//!   files (`results.json`, `results.csv`, `replications.csv`, `run.json`).
//!
//! The files are written with [`crate::report`]; the report's prose, with the paper's
//! statement about each figure, is `templates/rdma.md`.

use std::path::{Path, PathBuf};

use atmlab_core::time::Duration;
use atmlab_sim::plot::{PlotSpec, Series};
use atmlab_sim::report::write_results;
use atmlab_sim::runner::{self, PointResult, RunOptions, RunReport};
use atmlab_sim::scenario::{RunLength, Scenario, Warmup};
use minijinja::context;

use crate::report::{self, Column, Format, Table, Value, plot, write};
use crate::{LabError, cells};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../templates/rdma.md");

const TABLE1: &str = include_str!("../../../../scenarios/rdma/table1-voice.toml");
const TABLE2: &str = include_str!("../../../../scenarios/rdma/table2-video.toml");
const BACKBONE: &str = include_str!("../../../../scenarios/rdma/fig08-11-backbone.toml");

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

/// The table columns: the paper's heading and our metric.
const TABLE_METRICS: [(&str, &str); 4] = [
    ("Mean Delay (s)", "mean_delay"),
    ("Max Jitter (s)", "max_jitter"),
    ("Mean Jitter (s)", "mean_jitter"),
    ("Mean Occupation (cells)", "mean_occupancy"),
];

/// The backbone curves: label, and the mechanism table value that selects them.
const CURVES: [&str; 5] = [
    "RDMA, one tree",
    "RDMA, two trees",
    "Leaky Bucket C=1.4",
    "Virtual Clock (0.1 ms)",
    "Virtual Clock (5 ms)",
];

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
        curves: &[0, 1, 2, 3],
    },
    Figure {
        stem: "fig09",
        title: "Figure 9: contention node (C3) occupancy",
        metric: "internal_occupancy",
        y_label: "mean cells waiting at C3",
        log_y: false,
        curves: &[0, 1, 2, 3],
    },
    Figure {
        stem: "fig10",
        title: "Figure 10: contention node (C3) losses",
        metric: "internal_loss",
        y_label: "cells lost / cells arriving at C3",
        log_y: false,
        curves: &[0, 1, 2, 3],
    },
    Figure {
        stem: "fig10-cells",
        title: "Figure 10 (cells/s): contention node (C3) losses",
        metric: "internal_lost_per_s",
        y_label: "cells lost at C3 per second",
        log_y: false,
        curves: &[0, 1, 2, 3],
    },
    Figure {
        stem: "fig11",
        title: "Figure 11: delay of an MMPP flow at the periphery",
        metric: "periphery_delay",
        y_label: "mean access delay (s)",
        log_y: true,
        curves: &[0, 2, 3, 4],
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
        let (duration, warmup) = match scn.model.as_str() {
            "access" if name.contains("voice") => (2_100.0, 100.0),
            "access" => (21.0, 1.0),
            _ => (0.42, 0.02),
        };
        scn.run.length = secs(duration);
        scn.run.warmup = Warmup::Time(Duration::from_secs_f64(warmup));
        scn.run.batches = Some(5);
        for (k, values) in &mut scn.sweep {
            if k == "load" {
                *values = [0.3, 0.5, 0.7].map(toml::Value::Float).to_vec();
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

fn metric(p: &PointResult, name: &str) -> (f64, f64) {
    p.metrics
        .iter()
        .find(|(n, _)| n == name)
        .map_or((f64::NAN, f64::NAN), |(_, e)| (e.mean, e.ci95))
}

/// A number in the tables: four significant digits, plain or scientific.
fn fmt(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if (1e-3..1e5).contains(&a) {
        let digits = (3 - a.log10().floor() as i32).max(0) as usize;
        format!("{x:.digits$}")
    } else {
        format!("{x:.3e}")
    }
}

fn fmt_ci(mean: f64, ci: f64) -> String {
    if ci.is_finite() {
        format!("{} ± {}", fmt(mean), fmt(ci))
    } else {
        fmt(mean)
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

/// A table of the paper beside ours: wide in the markdown (paper, atmlab per metric),
/// long in the CSV (mechanism, metric, paper, mean, ci95).
fn table(paper: &[PaperRow], report: &RunReport) -> Table {
    let mut columns = vec![Column::md("Mechanism")];
    for (h, _) in TABLE_METRICS {
        columns.push(
            Column::md(&format!("{h}: paper"))
                .right()
                .format(Format::Custom(fmt)),
        );
        columns.push(Column::md("atmlab").right());
    }
    columns.push(Column::md("Loss (atmlab)").right());
    columns.extend(["mechanism", "metric", "paper", "mean", "ci95"].map(Column::csv));
    let mut t = Table::new(columns).compact();
    for (row, point) in paper.iter().zip(&report.points) {
        let mut md = cells![row.label];
        for (i, (_, m)) in TABLE_METRICS.iter().enumerate() {
            let (mean, ci) = metric(point, m);
            md.extend(cells![row.values[i], fmt_ci(mean, ci)]);
            t.csv_row(cells![row.label, *m, row.values[i], mean, ci_field(ci)]);
        }
        let (loss, lci) = metric(point, "loss_probability");
        md.push(fmt_ci(loss, lci).into());
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

/// The backbone point of curve `c` at each load, in load order.
fn curve(report: &RunReport, c: usize) -> Vec<(f64, &PointResult)> {
    let n_loads = report
        .scenario
        .sweep
        .iter()
        .find(|(k, _)| k == "load")
        .map_or(1, |(_, v)| v.len());
    report
        .points
        .iter()
        .skip(c * n_loads)
        .take(n_loads)
        .map(|p| {
            let load = p
                .swept
                .iter()
                .find(|(k, _)| k == "load")
                .and_then(|(_, v)| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
                .unwrap_or(f64::NAN);
            (load, p)
        })
        .collect()
}

/// The smallest load at which curve `c`'s `metric` exceeds `threshold`.
fn first_load_above(report: &RunReport, c: usize, m: &str, threshold: f64) -> Option<f64> {
    curve(report, c)
        .into_iter()
        .find(|(_, p)| metric(p, m).0 > threshold)
        .map(|(l, _)| l)
}

/// Plots and writes each figure (PNG, SVG, CSV); returns what the report shows of them.
fn figures(
    out: &Path,
    report: &RunReport,
    files: &mut Vec<PathBuf>,
) -> Result<Vec<minijinja::Value>, LabError> {
    let mut shown = Vec::new();
    for f in &FIGURES {
        let series: Vec<Series> = f
            .curves
            .iter()
            .map(|&c| Series {
                label: CURVES[c].to_owned(),
                points: curve(report, c)
                    .into_iter()
                    .map(|(l, p)| {
                        let (m, ci) = metric(p, f.metric);
                        (l, m, ci)
                    })
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
                Value::from(fmt_ci(m, ci))
            }));
            t.md_row(row);
        }
        shown.push(context! { stem => f.stem, title => f.title, table => t.markdown() });
    }
    Ok(shown)
}

/// A mechanism and its value, as a conclusion names them.
fn named(label: &str, v: f64) -> minijinja::Value {
    context! { label => label, value => fmt(v) }
}

/// The paper's conclusions, each checked on our numbers: for each, whether it holds and
/// the numbers that say so.
fn conclusions(t1: &RunReport, t2: &RunReport, bb: &RunReport) -> minijinja::Value {
    let values =
        |r: &RunReport, m: &str| -> Vec<f64> { r.points.iter().map(|p| metric(p, m).0).collect() };
    let argmin = |v: &[f64]| {
        v.iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |x| x.0)
    };
    let argmax = |v: &[f64]| {
        v.iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |x| x.0)
    };
    let smallest = |table: &[PaperRow], v: &[f64]| named(table[argmin(v)].label, v[argmin(v)]);
    let largest = |table: &[PaperRow], v: &[f64]| named(table[argmax(v)].label, v[argmax(v)]);

    let d1 = values(t1, "mean_delay");
    let j1 = values(t1, "mean_jitter");
    let o1 = values(t1, "mean_occupancy");
    let d2 = values(t2, "mean_delay");
    let below_rdma: Vec<&str> = d2
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, d)| **d < d2[0])
        .map(|(i, _)| PAPER_TABLE2[i].label)
        .collect();
    let o2 = values(t2, "mean_occupancy");

    let onset = |c: usize, m: &str| first_load_above(bb, c, m, 1e-3);
    let (r1, lb, vc) = (
        onset(0, "periphery_loss"),
        onset(2, "periphery_loss"),
        onset(3, "periphery_loss"),
    );
    let max_over = |c: usize, m: &str| {
        curve(bb, c)
            .iter()
            .map(|(_, p)| metric(p, m).0)
            .fold(f64::NAN, f64::max)
    };
    let two = max_over(1, "internal_occupancy");
    let others: Vec<f64> = [0, 2, 3]
        .iter()
        .map(|&c| max_over(c, "internal_occupancy"))
        .collect();
    let one_tree = onset(0, "internal_loss");
    let delay_at = |c: usize, last: bool| {
        let points = curve(bb, c);
        let p = if last { points.last() } else { points.first() };
        p.map_or(f64::NAN, |(_, p)| metric(p, "periphery_delay").0)
    };
    let delays = |last: bool| -> Vec<f64> { (0..5).map(|c| delay_at(c, last)).collect() };
    let (low, high) = (delays(false), delays(true));
    let fig11 = |d: &[f64], holds: bool| {
        context! {
            holds => holds,
            rdma => fmt(d[0]),
            lb => fmt(d[2]),
            vc_short => fmt(d[3]),
            vc_long => fmt(d[4]),
        }
    };
    context! {
        t1_delay => context! {
            holds => argmin(&d1) == 0 && (argmax(&d1) == 1 || argmax(&d1) == 2),
            smallest => smallest(&PAPER_TABLE1, &d1),
            largest => largest(&PAPER_TABLE1, &d1),
        },
        t1_jitter => context! { holds => argmin(&j1) == 0, smallest => smallest(&PAPER_TABLE1, &j1) },
        t1_occupation => context! { holds => argmin(&o1) == 0, smallest => smallest(&PAPER_TABLE1, &o1) },
        t2_delay => context! {
            holds => below_rdma == ["L. Bucket C=1.4", "V. Clock C=1.2"],
            rdma => fmt(d2[0]),
            below => below_rdma,
        },
        t2_occupation => context! {
            holds => argmax(&o2) == 1 || argmax(&o2) == 2,
            largest => largest(&PAPER_TABLE2, &o2),
        },
        fig8_onset => context! {
            holds => r1.is_some_and(|l| l > 0.5) && lb.is_some_and(|l| l > 0.5),
            rdma => r1,
            lb => lb,
        },
        fig8_vc => context! { holds => vc.is_none(), vc => vc },
        fig9 => context! {
            holds => others.iter().all(|o| two <= *o),
            two => fmt(two),
            one => fmt(others[0]),
            lb => fmt(others[1]),
            vc => fmt(others[2]),
        },
        fig10 => context! { holds => one_tree.is_some_and(|l| l <= 0.35), one_tree => one_tree },
        fig11_low => fig11(&low, [2, 3, 4].iter().all(|&c| low[0] > low[c])),
        fig11_high => fig11(&high, high[2] > high[0] && high[3] > high[0]),
    }
}

/// Runs the reproduction into `out` (created if needed).
pub fn run(out: &Path, opts: &RdmaOptions<'_>) -> Result<RdmaReport, LabError> {
    report::create_dir(out)?;
    let mut files = Vec::new();
    let mut runs = Vec::new();
    let t1 = run_one("table1-voice", TABLE1, opts, out, &mut files, &mut runs)?;
    let t2 = run_one("table2-video", TABLE2, opts, out, &mut files, &mut runs)?;
    let bb = run_one(
        "fig08-11-backbone",
        BACKBONE,
        opts,
        out,
        &mut files,
        &mut runs,
    )?;

    let table1 = table(&PAPER_TABLE1, &t1);
    let table2 = table(&PAPER_TABLE2, &t2);
    write(out, "table1.csv", &table1.csv())?;
    write(out, "table2.csv", &table2.csv())?;
    files.push(out.join("table1.csv"));
    files.push(out.join("table2.csv"));
    let figures = figures(out, &bb, &mut files)?;
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
            table1 => table_context(&table1, &t1),
            table2 => table_context(&table2, &t2),
            figures => figures,
            checks => conclusions(&t1, &t2, &bb),
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
    })
}
