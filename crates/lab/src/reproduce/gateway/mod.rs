//! `atmlab reproduce gateway`: paper 004's Figures 13-23 (§6.1-§6.4) and the reverse-path
//! experiment of §6.5, regenerated from the scenarios in `scenarios/gateway/` (embedded
//! here, so the binary works from any directory).
//!
//! Each experiment runs through the runner (replications on a thread pool, collected by
//! index: the numbers do not depend on `--threads`); its result files go to
//! `OUT/<experiment>/`, each figure to `OUT/figNN-<metric>.{png,svg,csv}`, and
//! `OUT/README.md` opens with the verdict table ([`verdicts()`], computed from the runs'
//! replications, also written as `OUT/verdicts.csv`) and puts the paper's findings beside
//! ours, with the numbers of every point. The quick form (`--quick`, what CI runs) keeps every figure but runs fewer
//! points, two short replications each: its numbers show the shape, not the precision.
//!
//! The files are written with [`crate::report`]; the report's prose, with the paper's
//! statement about each figure, is `templates/gateway.md`.

use std::path::{Path, PathBuf};

use atmlab_core::time::Duration;
use atmlab_sim::plot::{PlotSpec, Series};
use atmlab_sim::report::write_results;
use atmlab_sim::runner::{self, RunOptions, RunReport};
use atmlab_sim::scenario::{RunLength, Scenario, Warmup, parse_bit_rate, show};
use toml::Value;

use atmlab_models::gateway::GatewayKind;
use minijinja::context;

use super::Experiments;
use crate::report::{self, Column, Format, SeriesSet, Table, plot, write};
use crate::{LabError, cells};

pub mod verdicts;

pub use verdicts::{Cutoff, GatewayResults, verdicts};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../../templates/gateway.md");

/// One experiment of §6: its scenario file, embedded.
struct Experiment {
    /// The paper's section.
    section: &'static str,
    /// The scenario's file name (and the report's subdirectory).
    name: &'static str,
    text: &'static str,
    /// The swept key on the x axis.
    x_key: &'static str,
    /// Quick form: the x values kept, and per other swept key the values kept.
    quick_x: &'static [&'static str],
    quick_other: &'static [(&'static str, &'static str)],
}

/// The loads of the quick form of §6.1-§6.4.
const QUICK_LOADS: &[&str] = &["40 Mb/s", "100 Mb/s", "130 Mb/s"];

/// An [`Experiment`] of the scenario `scenarios/gateway/NAME.toml`: by default over the
/// offered load, the quick form at [`QUICK_LOADS`]; `keep K = V` keeps only that value
/// of another swept key in the quick form; `x KEY at [...]` sweeps another x.
macro_rules! experiment {
    ($section:literal, $name:literal) => {
        experiment!(@ $section, $name, "offered_load", QUICK_LOADS, &[])
    };
    ($section:literal, $name:literal, keep $key:literal = $value:literal) => {
        experiment!(@ $section, $name, "offered_load", QUICK_LOADS, &[($key, $value)])
    };
    ($section:literal, $name:literal, x $x_key:literal at [$($q:literal),*]) => {
        experiment!(@ $section, $name, $x_key, &[$($q),*], &[])
    };
    (@ $section:literal, $name:literal, $x_key:literal, $quick_x:expr, $quick_other:expr) => {
        Experiment {
            section: $section,
            name: $name,
            text: include_str!(concat!("../../../../../scenarios/gateway/", $name, ".toml")),
            x_key: $x_key,
            quick_x: $quick_x,
            quick_other: $quick_other,
        }
    };
}

const EXPERIMENTS: &[Experiment] = &[
    experiment!("6.1", "6.1-burst-factor"),
    experiment!("6.2", "6.2-peak-to-average"),
    experiment!("6.3", "6.3-npe-rate", keep "burst_factor" = "43"),
    experiment!("6.4", "6.4-transmit-buffer"),
    experiment!("6.5", "6.5-reverse-path", x "reverse.load" at ["40 Mb/s", "90 Mb/s"]),
];

/// One regenerated figure (what the paper says it shows is in the template).
struct Figure {
    /// File stem, e.g. `fig13-throughput`.
    stem: &'static str,
    /// The paper's caption (or ours, for figures the paper does not have).
    caption: &'static str,
    /// Index into [`EXPERIMENTS`].
    experiment: usize,
    metric: &'static str,
    y_label: &'static str,
    log_y: bool,
}

const FIGURES: &[Figure] = &[
    Figure {
        stem: "fig13-throughput",
        caption: "Figure 13: Offered Load vs. Throughput (burst factor)",
        experiment: 0,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
    },
    Figure {
        stem: "fig14-cell-loss",
        caption: "Figure 14: Cell Loss Probability vs. Offered Load (burst factor)",
        experiment: 0,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
    },
    Figure {
        stem: "fig15-frame-loss",
        caption: "Figure 15: Frame Loss Probability vs. Offered Load (burst factor)",
        experiment: 0,
        metric: "frame_loss_probability",
        y_label: "MPP frame loss probability",
        log_y: true,
    },
    Figure {
        stem: "fig16-latency",
        caption: "Figure 16: Gateway Latency vs. Offered Load (burst factor)",
        experiment: 0,
        metric: "latency_mean",
        y_label: "latency of complete frames (s)",
        log_y: true,
    },
    Figure {
        stem: "fig17-throughput",
        caption: "Figure 17: Throughput vs. Offered Load (peak-to-average ratio)",
        experiment: 1,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
    },
    Figure {
        stem: "fig18-cell-loss",
        caption: "Figure 18: Cell Loss Probability vs. Offered Load (peak-to-average ratio)",
        experiment: 1,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
    },
    Figure {
        stem: "fig19-throughput",
        caption: "Figure 19: Throughput vs. Offered Load (NPE rate R, burst factor B; 8-cell segments)",
        experiment: 2,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
    },
    Figure {
        stem: "fig20-cell-loss",
        caption: "Figure 20: Cell Loss Probability vs. Offered Load (NPE rate R, burst factor B)",
        experiment: 2,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
    },
    Figure {
        stem: "fig21-throughput",
        caption: "Figure 21: Gateway Throughput vs. Offered Load for various Transmit Buffer Sizes",
        experiment: 3,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
    },
    Figure {
        stem: "fig22-cell-loss",
        caption: "Figure 22: Cell Loss Probability vs. Offered Load (transmit buffer size)",
        experiment: 3,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
    },
    Figure {
        stem: "fig23-latency",
        caption: "Figure 23: Gateway Latency vs. Offered Load (transmit buffer size)",
        experiment: 3,
        metric: "latency_mean",
        y_label: "latency of complete frames (s)",
        log_y: true,
    },
    Figure {
        stem: "figx1-transmit-occupancy",
        caption: "(not in the paper) Transmit buffer occupancy vs. Offered Load (transmit buffer size)",
        experiment: 3,
        metric: "transmit_buffer_occupancy",
        y_label: "mean transmit buffer occupancy (full frames)",
        log_y: false,
    },
    Figure {
        stem: "figr1-reverse-throughput",
        caption: "(§6.5, no figure in the paper) Reverse path throughput vs. FDDI load (receive buffer)",
        experiment: 4,
        metric: "reverse_throughput_mbps",
        y_label: "data carried to the ATM side (Mb/s)",
        log_y: false,
    },
    Figure {
        stem: "figr2-reverse-loss",
        caption: "(§6.5) Receive buffer frame loss vs. FDDI load (receive buffer)",
        experiment: 4,
        metric: "reverse_frame_loss_probability",
        y_label: "frames refused by the receive buffer",
        log_y: true,
    },
    Figure {
        stem: "figr3-receive-max",
        caption: "(§6.5) Largest receive buffer occupancy vs. FDDI load (receive buffer)",
        experiment: 4,
        metric: "receive_buffer_max",
        y_label: "largest receive buffer occupancy (full frames)",
        log_y: false,
    },
];

/// A progress callback: (experiment name, jobs done, jobs in all).
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// How to run the reproduction.
#[derive(Default)]
pub struct Options<'a> {
    /// The short form.
    pub quick: bool,
    /// Worker threads (0: one per core); the results do not depend on it.
    pub threads: usize,
    /// Called with (experiment name, jobs done, jobs in all).
    pub progress: Option<Progress<'a>>,
}

/// What a reproduction produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The report (`README.md`).
    pub report: PathBuf,
    /// Every file written.
    pub files: Vec<PathBuf>,
    /// Events processed over all runs.
    pub events: u64,
    /// Wall-clock seconds of the simulation runs.
    pub wall_seconds: f64,
    /// Threads used.
    pub threads: usize,
}

/// The experiment's scenario, shortened for the quick form.
fn scenario(exp: &Experiment, quick: bool) -> Result<Scenario, LabError> {
    let file = format!("scenarios/gateway/{}.toml", exp.name);
    let mut s = Scenario::parse(&file, exp.text, &[])?;
    if quick {
        s.run.length = RunLength::Duration(Duration::from_millis(250));
        s.run.warmup = Warmup::Time(Duration::from_millis(50));
        s.run.replications = 2;
        for (k, values) in &mut s.sweep {
            if k == exp.x_key {
                *values = exp
                    .quick_x
                    .iter()
                    .map(|v| Value::String((*v).into()))
                    .collect();
            } else if let Some((_, keep)) = exp.quick_other.iter().find(|(q, _)| q == k) {
                values.retain(|v| show(v).trim_matches('"') == *keep);
            }
        }
    }
    Ok(s)
}

/// A short label for a swept key and its value.
fn label(key: &str, v: &Value) -> String {
    let name = match key {
        "burst_factor" => "B",
        "peak_to_average" => "peak/avg",
        "npe_rate" => "R",
        "transmit_buffer" => "transmit buffer",
        "receive_buffer" => "receive buffer",
        other => other,
    };
    format!("{name} = {}", show(v).trim_matches('"'))
}

/// The series of `metric` in `r`: one per combination of the non-x swept keys, x in Mb/s.
fn series(r: &RunReport, x_key: &str, metric: &str) -> Vec<Series> {
    let mut out = SeriesSet::new();
    for p in &r.points {
        let Some(x) = p
            .swept
            .iter()
            .find(|(k, _)| k == x_key)
            .and_then(|(_, v)| parse_bit_rate(v).ok())
        else {
            continue;
        };
        let name = p
            .swept
            .iter()
            .filter(|(k, _)| k != x_key)
            .map(|(k, v)| label(k, v))
            .collect::<Vec<_>>()
            .join(", ");
        let Some((_, e)) = p.metrics.iter().find(|(m, _)| m == metric) else {
            continue;
        };
        out.push(&name, (x / 1e6, e.mean, e.ci95));
    }
    out.into_vec()
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() >= 0.01 && x.abs() < 1e5 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    }
}

/// A figure's points: its CSV (series, x, mean, ci95) and its markdown (a row per x
/// value, a column per series).
fn figure_tables(ss: &[Series]) -> (Table, Table) {
    let mut csv = Table::new([
        Column::csv("series").csv_format(Format::Quoted),
        Column::csv("x_mbps"),
        Column::csv("mean"),
        Column::csv("ci95"),
    ]);
    for s in ss {
        for &(x, m, h) in &s.points {
            csv.csv_row(cells![&s.label, x, m, h]);
        }
    }
    let mut xs: Vec<f64> = ss
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut md = Table::new(
        std::iter::once(Column::md("load (Mb/s)")).chain(ss.iter().map(|s| Column::md(&s.label))),
    );
    for x in xs {
        let mut row = cells![x];
        row.extend(ss.iter().map(|s| {
            s.points
                .iter()
                .find(|p| p.0 == x)
                .map(|(_, m, h)| format!("{} ± {}", fmt(*m), fmt(*h)))
                .into()
        }));
        md.md_row(row);
    }
    (csv, md)
}

/// Runs the reproduction and writes everything into `out`.
pub fn run(out: &Path, opts: &Options<'_>) -> Result<Outcome, LabError> {
    report::create_dir(out)?;
    let mut files = Vec::new();
    let mut reports = Vec::new();
    let (mut events, mut wall, mut threads) = (0u64, 0f64, 0usize);
    let mut experiments = Experiments::new("gateway", EXPERIMENTS.len());
    for exp in EXPERIMENTS {
        let what = exp.name.strip_prefix(exp.section).unwrap_or(exp.name);
        experiments.start(&format!(
            "§{} {}",
            exp.section,
            what.trim_start_matches('-').replace('-', " ")
        ));
        let scn = scenario(exp, opts.quick)?;
        let progress = |done: u64, total: u64| {
            if let Some(p) = opts.progress {
                p(exp.name, done, total);
            }
        };
        let ro = RunOptions {
            threads: opts.threads,
            progress: Some(&progress),
        };
        let r = runner::run(&scn, &GatewayKind, &ro)?;
        let dir = out.join(exp.name);
        write_results(&dir, &r)?;
        files.push(dir.join("results.json"));
        events += r.events;
        wall += r.wall_seconds;
        threads = r.threads;
        reports.push(r);
    }

    let experiments: Vec<minijinja::Value> = EXPERIMENTS
        .iter()
        .zip(&reports)
        .map(|(e, r)| {
            context! {
                section => e.section,
                name => e.name,
                points => r.points.len(),
                replications => r.scenario.run.replications,
                length => match r.scenario.run.length {
                    RunLength::Duration(d) => d.as_secs_f64(),
                    RunLength::Count(n) => n as f64,
                },
                warmup => match r.scenario.run.warmup {
                    Warmup::Time(d) => d.as_secs_f64(),
                    _ => f64::NAN,
                },
                seed => r.scenario.run.seed,
                events => r.events,
            }
        })
        .collect();

    let mut figures = Vec::new();
    for fig in FIGURES {
        let exp = &EXPERIMENTS[fig.experiment];
        let r = &reports[fig.experiment];
        let ss = series(r, exp.x_key, fig.metric);
        let x_label = if exp.x_key == "offered_load" {
            "offered load, average ATM bandwidth (Mb/s)"
        } else {
            "load sent to the gateway on FDDI (Mb/s)"
        };
        let spec = PlotSpec {
            title: fig.caption,
            x_label,
            y_label: fig.y_label,
            log_y: fig.log_y,
        };
        plot(out, fig.stem, spec, &ss)?;
        let (csv, md) = figure_tables(&ss);
        let csv_name = format!("{}.csv", fig.stem);
        write(out, &csv_name, &csv.csv())?;
        files.push(out.join(csv_name));
        files.push(out.join(format!("{}.png", fig.stem)));
        files.push(out.join(format!("{}.svg", fig.stem)));
        figures.push(context! {
            stem => fig.stem,
            caption => fig.caption,
            metric => fig.metric,
            section => exp.section,
            table => md.markdown(),
        });
    }
    let verdict_table = verdicts(&results(&reports)).write(out)?;
    files.push(out.join("verdicts.csv"));
    let text = report::render(
        "gateway.md",
        TEMPLATE,
        context! {
            quick => opts.quick,
            verdicts => verdict_table,
            cutoff_loss => verdicts::CUTOFF_LOSS,
            experiments => experiments,
            events => events,
            wall => wall,
            threads => threads,
            mevents_per_s => events as f64 / wall.max(1e-9) / 1e6,
            figures => figures,
            findings => findings(&reports),
        },
    )?;
    write(out, "README.md", &text)?;
    let report = out.join("README.md");
    files.push(report.clone());
    Ok(Outcome {
        report,
        files,
        events,
        wall_seconds: wall,
        threads,
    })
}

/// Every curve of every metric of the runs, with its replications: what [`verdicts()`]
/// reads.
pub fn results(reports: &[RunReport]) -> GatewayResults {
    let mut out = GatewayResults::default();
    for (exp, r) in EXPERIMENTS.iter().zip(reports) {
        let metrics: Vec<String> = r
            .points
            .first()
            .map(|p| p.metrics.iter().map(|(m, _)| m.clone()).collect())
            .unwrap_or_default();
        for metric in &metrics {
            let mut curves: Vec<verdicts::Curve> = Vec::new();
            for p in &r.points {
                let Some(x) = p
                    .swept
                    .iter()
                    .find(|(k, _)| k == exp.x_key)
                    .and_then(|(_, v)| parse_bit_rate(v).ok())
                else {
                    continue;
                };
                let label = p
                    .swept
                    .iter()
                    .filter(|(k, _)| k != exp.x_key)
                    .map(|(k, v)| label(k, v))
                    .collect::<Vec<_>>()
                    .join(", ");
                let reps = p
                    .replications
                    .iter()
                    .filter_map(|rep| {
                        rep.metrics
                            .iter()
                            .find(|(m, _)| m == metric)
                            .map(|(_, v)| *v)
                    })
                    .collect();
                let point = verdicts::Point { x: x / 1e6, reps };
                match curves.iter_mut().find(|c| c.label == label) {
                    Some(c) => c.points.push(point),
                    None => curves.push(verdicts::Curve {
                        label,
                        points: vec![point],
                    }),
                }
            }
            for c in curves {
                out.insert(exp.name, metric, c);
            }
        }
    }
    out
}

/// The figure's value of `metric` at the point whose swept values match `at`.
pub fn value_at(r: &RunReport, metric: &str, at: &[(&str, &str)]) -> Option<f64> {
    r.points
        .iter()
        .find(|p| {
            at.iter().all(|(k, v)| {
                p.swept
                    .iter()
                    .any(|(pk, pv)| pk == k && show(pv).trim_matches('"') == *v)
            })
        })
        .and_then(|p| p.metrics.iter().find(|(m, _)| m == metric))
        .map(|(_, e)| e.mean)
}

/// The findings computed from the runs, for the template to state next to the paper's.
fn findings(reports: &[RunReport]) -> minijinja::Value {
    // §6.1: the SAR overhead gap below the threshold, the cap at the FDDI rate.
    let r = &reports[0];
    let mut lowest: Option<(f64, f64, f64)> = None;
    let mut max_tp: f64 = 0.0;
    for p in &r.points {
        let get = |m: &str| p.metrics.iter().find(|(n, _)| n == m).map(|(_, e)| e.mean);
        if let (Some(o), Some(t)) = (get("offered_load_mbps"), get("throughput_mbps")) {
            max_tp = max_tp.max(t);
            if lowest.is_none_or(|l| o < l.0) {
                lowest = Some((o, t, t / o));
            }
        }
    }
    let below = lowest.map(|(o, t, ratio)| {
        context! { offered => o, carried => t, less_pct => (1.0 - ratio) * 100.0 }
    });
    // Cut-offs as ranges decided by the intervals, per series.
    let res = results(reports);
    let cutoff = |i: usize| -> Vec<minijinja::Value> {
        res.figures
            .iter()
            .filter(|(e, m, _)| e == EXPERIMENTS[i].name && m == "cell_loss_probability")
            .flat_map(|(_, _, cs)| cs)
            .map(|c| {
                let cut = Cutoff::of(c);
                context! { label => &c.label, lo => cut.lo, hi => cut.hi }
            })
            .collect()
    };
    // §6.3: the NPE knee.
    let knees: Vec<minijinja::Value> = series(&reports[2], "offered_load", "throughput_mbps")
        .iter()
        .map(|s| {
            let m = s.points.iter().map(|p| p.1).fold(0.0, f64::max);
            context! { label => &s.label, max => m }
        })
        .collect();
    // §6.4: the loss-latency trade-off at the highest load.
    let r = &reports[3];
    let lat = series(r, "offered_load", "latency_mean");
    let loss = series(r, "offered_load", "cell_loss_probability");
    let tradeoff: Vec<minijinja::Value> = lat
        .iter()
        .zip(&loss)
        .filter_map(|(l, c)| {
            let (x, lm, _) = *l.points.last()?;
            let (_, cm, _) = *c.points.last()?;
            Some(context! { label => &l.label, latency_ms => lm * 1e3, loss => fmt(cm), x => x })
        })
        .collect();
    // §6.5: the reverse path.
    let r = &reports[4];
    let tp = series(r, "reverse.load", "reverse_throughput_mbps");
    let mx = series(r, "reverse.load", "receive_buffer_max");
    let lo = series(r, "reverse.load", "reverse_frame_loss_probability");
    let reverse: Vec<minijinja::Value> = tp
        .iter()
        .zip(&mx)
        .zip(&lo)
        .filter_map(|((a, b), c)| {
            let (x, tm, _) = *a.points.last()?;
            let bm = b.points.iter().map(|p| p.1).fold(0.0, f64::max);
            let cm = c.points.iter().map(|p| p.1).fold(0.0, f64::max);
            Some(context! { label => &a.label, carried => tm, x => x, held => bm, loss => fmt(cm) })
        })
        .collect();
    context! {
        below => below,
        max_tp => max_tp,
        cutoff_burst => cutoff(0),
        cutoff_peak => cutoff(1),
        cutoff_buffer => cutoff(3),
        knees => knees,
        tradeoff => tradeoff,
        reverse => reverse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_parses_and_prepares() {
        for exp in EXPERIMENTS {
            for quick in [false, true] {
                let s = scenario(exp, quick).unwrap();
                assert_eq!(s.model, "gateway");
                assert!(s.sweep.iter().any(|(k, _)| k == exp.x_key), "{}", exp.name);
                runner::prepare(&s, &GatewayKind).unwrap();
            }
        }
        assert!(FIGURES.iter().all(|f| f.experiment < EXPERIMENTS.len()));
    }
}
