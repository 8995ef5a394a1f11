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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use atmlab_core::time::Duration;
use atmlab_sim::plot::{PlotSpec, Series, plot_metric};
use atmlab_sim::report::write_results;
use atmlab_sim::runner::{self, PointResult, RunOptions, RunReport};
use atmlab_sim::scenario::{RunLength, Scenario, Warmup};
use toml::Value;

use crate::LabError;

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

/// Table 1, voice, as printed.
const PAPER_TABLE1: [PaperRow; 5] = [
    PaperRow {
        label: "RDMA",
        values: [0.0001, 0.000116, 0.000009, 0.5],
    },
    PaperRow {
        label: "L. Bucket C=1.2",
        values: [1.0058, 0.0138, 0.00523, 65.57],
    },
    PaperRow {
        label: "L. Bucket C=1.4",
        values: [0.2930, 0.0119, 0.00242, 22.29],
    },
    PaperRow {
        label: "V. Clock",
        values: [0.2814, 0.6501, 0.0335, 27.22],
    },
    PaperRow {
        label: "V. Clock C=1.2",
        values: [0.1930, 0.6501, 0.0144, 19.03],
    },
];

/// Table 2, video, as printed.
const PAPER_TABLE2: [PaperRow; 6] = [
    PaperRow {
        label: "RDMA",
        values: [0.00787, 0.0001217, 0.000041, 125.65],
    },
    PaperRow {
        label: "L. Bucket C=1.15",
        values: [0.16115, 0.000086, 0.000010, 1282.0],
    },
    PaperRow {
        label: "L. Bucket C=1.15 Credits=918",
        values: [0.13198, 0.000086, 0.000008, 947.34],
    },
    PaperRow {
        label: "L. Bucket C=1.4",
        values: [0.0166, 0.00007, 0.000002, 210.79],
    },
    PaperRow {
        label: "V. Clock",
        values: [0.00904, 0.03300, 0.000102, 88.22],
    },
    PaperRow {
        label: "V. Clock C=1.2",
        values: [0.00456, 0.03300, 0.000027, 45.19],
    },
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

struct Figure {
    stem: &'static str,
    title: &'static str,
    metric: &'static str,
    y_label: &'static str,
    log_y: bool,
    /// Which of [`CURVES`] the paper draws.
    curves: &'static [usize],
    /// What the paper says about it.
    paper: &'static str,
}

const FIGURES: [Figure; 5] = [
    Figure {
        stem: "fig08",
        title: "Figure 8: loss at backbone periphery",
        metric: "periphery_loss",
        y_label: "cells lost / cells offered",
        log_y: false,
        curves: &[0, 1, 2, 3],
        paper: "Losses occur after an offered load of 50% (the load the mechanisms are configured for); very high for RDMA and the Leaky Bucket (an instability region); Virtual Clock practically suffers no losses, even in overload.",
    },
    Figure {
        stem: "fig09",
        title: "Figure 9: contention node (C3) occupancy",
        metric: "internal_occupancy",
        y_label: "mean cells waiting at C3",
        log_y: false,
        curves: &[0, 1, 2, 3],
        paper: "RDMA with two routing trees has the lowest occupancy, nearly zero even in overload. Leaky Bucket occupancy appears only once the load reaches its dimensioning load, and does not grow indefinitely. With one tree RDMA's occupancy is very high already at low load, reaching the 20,000-cell memory from 30%.",
    },
    Figure {
        stem: "fig10",
        title: "Figure 10: contention node (C3) losses",
        metric: "internal_loss",
        y_label: "cells lost / cells arriving at C3",
        log_y: false,
        curves: &[0, 1, 2, 3],
        paper: "Virtual Clock's discards at C3 grow without bound after 50%. RDMA with one tree loses cells from 30%, its losses smoothed from 50% on as the periphery limits what enters.",
    },
    Figure {
        stem: "fig10-cells",
        title: "Figure 10 (cells/s): contention node (C3) losses",
        metric: "internal_lost_per_s",
        y_label: "cells lost at C3 per second",
        log_y: false,
        curves: &[0, 1, 2, 3],
        paper: "The same losses as a count per second (the paper's axis is \"the average number of rejected cells\").",
    },
    Figure {
        stem: "fig11",
        title: "Figure 11: delay of an MMPP flow at the periphery",
        metric: "periphery_delay",
        y_label: "mean access delay (s)",
        log_y: true,
        curves: &[0, 2, 3, 4],
        paper: "RDMA's delay is larger than the others' at low load; as the load grows the Leaky Bucket and Virtual Clock delays surpass RDMA's (except Virtual Clock with a 5 ms penalty).",
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
                *values = vec![Value::Float(0.3), Value::Float(0.5), Value::Float(0.7)];
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

/// Writes a table's markdown and CSV.
fn table(
    md: &mut String,
    csv_path: &Path,
    title: &str,
    paper: &[PaperRow],
    report: &RunReport,
) -> Result<(), LabError> {
    let _ = writeln!(md, "## {title}\n");
    let _ = write!(md, "| Mechanism |");
    for (h, _) in TABLE_METRICS {
        let _ = write!(md, " {h}: paper | atmlab |");
    }
    let _ = write!(md, " Loss (atmlab) |\n|---|");
    for _ in TABLE_METRICS {
        let _ = write!(md, "---:|---:|");
    }
    let _ = writeln!(md, "---:|");
    let mut csv = String::from("mechanism,metric,paper,mean,ci95\n");
    for (row, point) in paper.iter().zip(&report.points) {
        let _ = write!(md, "| {} |", row.label);
        for (i, (_, m)) in TABLE_METRICS.iter().enumerate() {
            let (mean, ci) = metric(point, m);
            let _ = write!(md, " {} | {} |", fmt(row.values[i]), fmt_ci(mean, ci));
            let _ = writeln!(
                csv,
                "{},{m},{},{mean},{}",
                row.label,
                row.values[i],
                if ci.is_finite() {
                    ci.to_string()
                } else {
                    String::new()
                }
            );
        }
        let (loss, lci) = metric(point, "loss_probability");
        let _ = writeln!(md, " {} |", fmt_ci(loss, lci));
    }
    let _ = writeln!(
        md,
        "\natmlab: {} events, {:.1} s wall on {} thread(s); CI over {} batches of one long run.\n",
        report.events,
        report.wall_seconds,
        report.threads,
        report
            .points
            .first()
            .map_or(0, |p| p.metrics.first().map_or(0, |m| m.1.n))
    );
    std::fs::write(csv_path, csv).map_err(|e| err(&csv_path.display().to_string(), e))
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

fn figures(
    md: &mut String,
    out: &Path,
    report: &RunReport,
    files: &mut Vec<PathBuf>,
) -> Result<(), LabError> {
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
        let stem = out.join(f.stem);
        plot_metric(
            &stem,
            &PlotSpec {
                title: f.title,
                x_label: "offered load of each LAN (share of 150 Mb/s)",
                y_label: f.y_label,
                log_y: f.log_y,
            },
            &series,
        )
        .map_err(|e| err(f.stem, e))?;
        let mut csv = String::from("load,curve,mean,ci95\n");
        for s in &series {
            for (l, m, ci) in &s.points {
                let ci = if ci.is_finite() {
                    ci.to_string()
                } else {
                    String::new()
                };
                let _ = writeln!(csv, "{l},{},{m},{ci}", s.label);
            }
        }
        let csv_path = out.join(format!("{}.csv", f.stem));
        std::fs::write(&csv_path, csv).map_err(|e| err(f.stem, e))?;
        files.push(stem.with_extension("png"));
        files.push(csv_path);

        let _ = writeln!(md, "## {}\n", f.title);
        let _ = writeln!(md, "![{}]({}.png)\n", f.title, f.stem);
        let _ = writeln!(md, "The paper: {}\n", f.paper);
        let _ = write!(md, "| load |");
        for s in &series {
            let _ = write!(md, " {} |", s.label);
        }
        let _ = write!(md, "\n|---:|");
        for _ in &series {
            let _ = write!(md, "---:|");
        }
        let _ = writeln!(md);
        let n = series.first().map_or(0, |s| s.points.len());
        for i in 0..n {
            let _ = write!(md, "| {} |", series[0].points[i].0);
            for s in &series {
                let (_, m, ci) = s.points[i];
                let _ = write!(md, " {} |", fmt_ci(m, ci));
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md);
    }
    Ok(())
}

/// The paper's conclusions, each checked on our numbers.
fn conclusions(md: &mut String, t1: &RunReport, t2: &RunReport, bb: &RunReport) {
    let _ = writeln!(md, "## The paper's conclusions, checked\n");
    let mut check = |claim: &str, holds: bool, detail: String| {
        let _ = writeln!(
            md,
            "- {} **{claim}** — {detail}",
            if holds { "holds:" } else { "does not hold:" }
        );
    };
    let delays =
        |r: &RunReport, m: &str| -> Vec<f64> { r.points.iter().map(|p| metric(p, m).0).collect() };
    let d1 = delays(t1, "mean_delay");
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
    check(
        "Table 1: RDMA has the smallest voice delay, the Leaky Bucket the largest",
        argmin(&d1) == 0 && (argmax(&d1) == 1 || argmax(&d1) == 2),
        format!(
            "smallest {} ({} s), largest {} ({} s)",
            PAPER_TABLE1[argmin(&d1)].label,
            fmt(d1[argmin(&d1)]),
            PAPER_TABLE1[argmax(&d1)].label,
            fmt(d1[argmax(&d1)])
        ),
    );
    for (name, m) in [("jitter", "mean_jitter"), ("occupation", "mean_occupancy")] {
        let v = delays(t1, m);
        check(
            &format!("Table 1: RDMA's voice {name} is the smallest"),
            argmin(&v) == 0,
            format!(
                "smallest {} ({})",
                PAPER_TABLE1[argmin(&v)].label,
                fmt(v[argmin(&v)])
            ),
        );
    }
    let d2 = delays(t2, "mean_delay");
    let below_rdma: Vec<&str> = d2
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, d)| **d < d2[0])
        .map(|(i, _)| PAPER_TABLE2[i].label)
        .collect();
    check(
        "Table 2: RDMA's video delay exceeds only Leaky Bucket C=1.4 and Virtual Clock C=1.2",
        below_rdma == ["L. Bucket C=1.4", "V. Clock C=1.2"],
        format!(
            "below RDMA's {} s: {}",
            fmt(d2[0]),
            if below_rdma.is_empty() {
                "none".to_owned()
            } else {
                below_rdma.join(", ")
            }
        ),
    );
    let occ2 = delays(t2, "mean_occupancy");
    check(
        "Table 2: the Leaky Bucket with C=1.15 has the highest occupation",
        argmax(&occ2) == 1 || argmax(&occ2) == 2,
        format!(
            "highest {} ({} cells)",
            PAPER_TABLE2[argmax(&occ2)].label,
            fmt(occ2[argmax(&occ2)])
        ),
    );
    let onset = |c: usize, m: &str| first_load_above(bb, c, m, 1e-3);
    let show =
        |x: Option<f64>| x.map_or("none in the range".to_owned(), |l| format!("from load {l}"));
    let (r1, lb, vc) = (
        onset(0, "periphery_loss"),
        onset(2, "periphery_loss"),
        onset(3, "periphery_loss"),
    );
    check(
        "Fig. 8: periphery losses start above the 50% dimensioning load for RDMA and the Leaky Bucket",
        r1.is_some_and(|l| l > 0.5) && lb.is_some_and(|l| l > 0.5),
        format!("loss > 0.1%: RDMA {}, Leaky Bucket {}", show(r1), show(lb)),
    );
    check(
        "Fig. 8: Virtual Clock practically suffers no periphery loss",
        vc.is_none(),
        format!("Virtual Clock (0.1 ms) loss > 0.1% {}", show(vc)),
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
    check(
        "Fig. 9: RDMA with two trees keeps C3's occupancy lowest, nearly zero",
        others.iter().all(|o| two <= *o),
        format!(
            "largest mean C3 occupancy over the loads: two trees {}, one tree {}, Leaky Bucket {}, Virtual Clock {} cells",
            fmt(two),
            fmt(others[0]),
            fmt(others[1]),
            fmt(others[2])
        ),
    );
    let one_tree = onset(0, "internal_loss");
    check(
        "Fig. 10: with one tree RDMA loses cells at C3 from about 30% load",
        one_tree.is_some_and(|l| l <= 0.35),
        format!("C3 loss > 0.1% with one tree {}", show(one_tree)),
    );
    let low = |c: usize| {
        curve(bb, c)
            .first()
            .map_or(f64::NAN, |(_, p)| metric(p, "periphery_delay").0)
    };
    let high = |c: usize| {
        curve(bb, c)
            .last()
            .map_or(f64::NAN, |(_, p)| metric(p, "periphery_delay").0)
    };
    check(
        "Fig. 11: at low load RDMA's periphery delay is the largest",
        [2, 3, 4].iter().all(|&c| low(0) > low(c)),
        format!(
            "lowest load: RDMA {} s, Leaky Bucket {} s, VC 0.1 ms {} s, VC 5 ms {} s",
            fmt(low(0)),
            fmt(low(2)),
            fmt(low(3)),
            fmt(low(4))
        ),
    );
    check(
        "Fig. 11: at high load the Leaky Bucket and Virtual Clock (0.1 ms) delays surpass RDMA's",
        high(2) > high(0) && high(3) > high(0),
        format!(
            "highest load: RDMA {} s, Leaky Bucket {} s, VC 0.1 ms {} s, VC 5 ms {} s",
            fmt(high(0)),
            fmt(high(2)),
            fmt(high(3)),
            fmt(high(4))
        ),
    );
}

/// Runs the reproduction into `out` (created if needed).
pub fn run(out: &Path, opts: &RdmaOptions<'_>) -> Result<RdmaReport, LabError> {
    std::fs::create_dir_all(out).map_err(|e| err(&out.display().to_string(), e))?;
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

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Paper 003 (RDMA / Isochronets): reproduction{}\n",
        if opts.quick {
            " (quick form: short runs, wide intervals)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        md,
        "Generated by `atmlab reproduce rdma{}`. Each table gives the paper's value, then \
         atmlab's mean ± the half-width of its 95% confidence interval (batch means). The \
         scenarios are `scenarios/rdma/*.toml`; how each unclear value was read, and every \
         difference, is discussed in `docs/reproductions/rdma.md`. Jitter is the increase of \
         the access delay from one cell to the next (see `atmlab_models::access_link`).\n",
        if opts.quick { " --quick" } else { "" }
    );
    let t1_csv = out.join("table1.csv");
    table(
        &mut md,
        &t1_csv,
        "Table 1: voice source",
        &PAPER_TABLE1,
        &t1,
    )?;
    let t2_csv = out.join("table2.csv");
    table(
        &mut md,
        &t2_csv,
        "Table 2: video source",
        &PAPER_TABLE2,
        &t2,
    )?;
    files.push(t1_csv);
    files.push(t2_csv);
    figures(&mut md, out, &bb, &mut files)?;
    conclusions(&mut md, &t1, &t2, &bb);
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "## Runs\n\n| experiment | events | wall (s) |\n|---|---:|---:|"
    );
    for r in &runs {
        let _ = writeln!(md, "| {} | {} | {:.1} |", r.name, r.events, r.wall_seconds);
    }
    let report = out.join("report.md");
    std::fs::write(&report, md).map_err(|e| err("report.md", e))?;
    files.insert(0, report.clone());
    Ok(RdmaReport {
        report,
        files,
        experiments: runs,
    })
}
