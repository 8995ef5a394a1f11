//! `atmlab reproduce gateway`: paper 004's Figures 13-23 (§6.1-§6.4) and the reverse-path
//! experiment of §6.5, regenerated from the scenarios in `scenarios/gateway/` (embedded
//! here, so the binary works from any directory).
//!
//! Each experiment runs through the runner (replications on a thread pool, collected by
//! index: the numbers do not depend on `--threads`); its result files go to
//! `OUT/<experiment>/`, each figure to `OUT/figNN-<metric>.{png,svg,csv}`, and
//! `OUT/report.md` puts the paper's findings beside ours, with the numbers of every
//! point. The quick form (`--quick`, what CI runs) keeps every figure but runs fewer
//! points, two short replications each: its numbers show the shape, not the precision.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use atmlab_core::time::Duration;
use atmlab_sim::plot::{PlotSpec, Series, plot_metric};
use atmlab_sim::report::write_results;
use atmlab_sim::runner::{self, RunOptions, RunReport};
use atmlab_sim::scenario::{RunLength, Scenario, Warmup, parse_bit_rate, show};
use toml::Value;

use atmlab_models::gateway::GatewayKind;

use crate::LabError;

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

const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        section: "6.1",
        name: "6.1-burst-factor",
        text: include_str!("../../../../scenarios/gateway/6.1-burst-factor.toml"),
        x_key: "offered_load",
        quick_x: &["40 Mb/s", "100 Mb/s", "130 Mb/s"],
        quick_other: &[],
    },
    Experiment {
        section: "6.2",
        name: "6.2-peak-to-average",
        text: include_str!("../../../../scenarios/gateway/6.2-peak-to-average.toml"),
        x_key: "offered_load",
        quick_x: &["40 Mb/s", "100 Mb/s", "130 Mb/s"],
        quick_other: &[],
    },
    Experiment {
        section: "6.3",
        name: "6.3-npe-rate",
        text: include_str!("../../../../scenarios/gateway/6.3-npe-rate.toml"),
        x_key: "offered_load",
        quick_x: &["40 Mb/s", "100 Mb/s", "130 Mb/s"],
        quick_other: &[("burst_factor", "43")],
    },
    Experiment {
        section: "6.4",
        name: "6.4-transmit-buffer",
        text: include_str!("../../../../scenarios/gateway/6.4-transmit-buffer.toml"),
        x_key: "offered_load",
        quick_x: &["40 Mb/s", "100 Mb/s", "130 Mb/s"],
        quick_other: &[],
    },
    Experiment {
        section: "6.5",
        name: "6.5-reverse-path",
        text: include_str!("../../../../scenarios/gateway/6.5-reverse-path.toml"),
        x_key: "reverse.load",
        quick_x: &["40 Mb/s", "90 Mb/s"],
        quick_other: &[],
    },
];

/// One regenerated figure.
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
    /// What the paper says the figure shows.
    paper: &'static str,
}

const FIGURES: &[Figure] = &[
    Figure {
        stem: "fig13-throughput",
        caption: "Figure 13: Offered Load vs. Throughput (burst factor)",
        experiment: 0,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
        paper: "Up to a threshold, throughput increases linearly with the load, independent of the burst factor, about 15 percent below the offered load (8 of 53 octets are SAR overhead); beyond it the throughput levels off at the FDDI link speed of 100 Mb/s, lower for higher burst factors because of cell and frame loss.",
    },
    Figure {
        stem: "fig14-cell-loss",
        caption: "Figure 14: Cell Loss Probability vs. Offered Load (burst factor)",
        experiment: 0,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
        paper: "The cutoff bandwidth beyond which the SPP begins to drop cells is sensitive to the burst factor; near the cutoff the loss is small, at very high loads it reaches about 5 percent.",
    },
    Figure {
        stem: "fig15-frame-loss",
        caption: "Figure 15: Frame Loss Probability vs. Offered Load (burst factor)",
        experiment: 0,
        metric: "frame_loss_probability",
        y_label: "MPP frame loss probability",
        log_y: true,
        paper: "Same cutoff as the cell loss; even a small cell loss probability becomes a large frame loss probability, since one lost cell loses its whole segment.",
    },
    Figure {
        stem: "fig16-latency",
        caption: "Figure 16: Gateway Latency vs. Offered Load (burst factor)",
        experiment: 0,
        metric: "latency_mean",
        y_label: "latency of complete frames (s)",
        log_y: true,
        paper: "At low loads the latency is dominated by reassembly delay, which falls as the load rises; at very high loads it is independent of the burst factor (the transmit buffer is full and served by the timed token).",
    },
    Figure {
        stem: "fig17-throughput",
        caption: "Figure 17: Throughput vs. Offered Load (peak-to-average ratio)",
        experiment: 1,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
        paper: "At high loads the throughput is lower for higher peak-to-average ratios, because of increased frame and cell loss.",
    },
    Figure {
        stem: "fig18-cell-loss",
        caption: "Figure 18: Cell Loss Probability vs. Offered Load (peak-to-average ratio)",
        experiment: 1,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
        paper: "At high loads, doubling the peak-to-average ratio increases the cell loss probability dramatically.",
    },
    Figure {
        stem: "fig19-throughput",
        caption: "Figure 19: Throughput vs. Offered Load (NPE rate R, burst factor B; 8-cell segments)",
        experiment: 2,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
        paper: "Throughput rises linearly up to a knee where the segment request rate matches the NPE rate, then stays constant at the rate the NPE can handle; for a slow NPE the maximum throughput is restricted by the NPE rate.",
    },
    Figure {
        stem: "fig20-cell-loss",
        caption: "Figure 20: Cell Loss Probability vs. Offered Load (NPE rate R, burst factor B)",
        experiment: 2,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
        paper: "Cell loss increases dramatically with a slower node processor and grows rapidly with load once the throughput saturates.",
    },
    Figure {
        stem: "fig21-throughput",
        caption: "Figure 21: Gateway Throughput vs. Offered Load for various Transmit Buffer Sizes",
        experiment: 3,
        metric: "throughput_mbps",
        y_label: "throughput, carried load (Mb/s)",
        log_y: false,
        paper: "A larger transmit buffer improves the gateway throughput significantly.",
    },
    Figure {
        stem: "fig22-cell-loss",
        caption: "Figure 22: Cell Loss Probability vs. Offered Load (transmit buffer size)",
        experiment: 3,
        metric: "cell_loss_probability",
        y_label: "SPP cell loss probability",
        log_y: true,
        paper: "The cutoff bandwidth depends strongly on the transmit buffer size; even the SUPERNET maximum (68 frames, 256 KB) is inadequate for a high, very bursty load.",
    },
    Figure {
        stem: "fig23-latency",
        caption: "Figure 23: Gateway Latency vs. Offered Load (transmit buffer size)",
        experiment: 3,
        metric: "latency_mean",
        y_label: "latency of complete frames (s)",
        log_y: true,
        paper: "Larger transmit buffers give greater delay, remarkably higher at high loads with the maximum buffer: a trade-off between cell/frame loss and latency.",
    },
    Figure {
        stem: "figx1-transmit-occupancy",
        caption: "(not in the paper) Transmit buffer occupancy vs. Offered Load (transmit buffer size)",
        experiment: 3,
        metric: "transmit_buffer_occupancy",
        y_label: "mean transmit buffer occupancy (full frames)",
        log_y: false,
        paper: "§6.1: at high loads the transmit buffer occupancy reaches its maximum and incoming frames always see it full.",
    },
    Figure {
        stem: "figr1-reverse-throughput",
        caption: "(§6.5, no figure in the paper) Reverse path throughput vs. FDDI load (receive buffer)",
        experiment: 4,
        metric: "reverse_throughput_mbps",
        y_label: "data carried to the ATM side (Mb/s)",
        log_y: false,
        paper: "The reverse path has no bottleneck and carries a 100 Mb/s load from FDDI to ATM; a receive buffer of 16 full-size FDDI frames is sufficient for very bursty traffic.",
    },
    Figure {
        stem: "figr2-reverse-loss",
        caption: "(§6.5) Receive buffer frame loss vs. FDDI load (receive buffer)",
        experiment: 4,
        metric: "reverse_frame_loss_probability",
        y_label: "frames refused by the receive buffer",
        log_y: true,
        paper: "A receive buffer of 16 full-size FDDI frames is sufficient (no loss).",
    },
    Figure {
        stem: "figr3-receive-max",
        caption: "(§6.5) Largest receive buffer occupancy vs. FDDI load (receive buffer)",
        experiment: 4,
        metric: "receive_buffer_max",
        y_label: "largest receive buffer occupancy (full frames)",
        log_y: false,
        paper: "16 frames suffice.",
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
    /// The report (`report.md`).
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

fn io_err(path: &Path, e: std::io::Error) -> LabError {
    LabError::io(format!("writing {}", path.display()), e)
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
    let mut out: Vec<Series> = Vec::new();
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
        let pt = (x / 1e6, e.mean, e.ci95);
        match out.iter_mut().find(|s| s.label == name) {
            Some(s) => s.points.push(pt),
            None => out.push(Series {
                label: name,
                points: vec![pt],
            }),
        }
    }
    out
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

/// Runs the reproduction and writes everything into `out`.
pub fn run(out: &Path, opts: &Options<'_>) -> Result<Outcome, LabError> {
    std::fs::create_dir_all(out).map_err(|e| io_err(out, e))?;
    let mut files = Vec::new();
    let mut reports = Vec::new();
    let (mut events, mut wall, mut threads) = (0u64, 0f64, 0usize);
    for exp in EXPERIMENTS {
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

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Paper 004 reproduced: Simulation of an ATM-FDDI Gateway\n\n\
         Buddhikot, Kapoor and Parulkar, WUCS-92-36 (1992), §6, Figures 13-23, regenerated by \
         `atmlab reproduce gateway{}`.\n",
        if opts.quick { " --quick" } else { "" }
    );
    if opts.quick {
        let _ = writeln!(
            md,
            "**Quick form**: few points, two replications of 0.25 s each. The shapes are \
             indicative only; the committed full run is in `docs/reproductions/gateway.md`.\n"
        );
    }
    let _ = writeln!(
        md,
        "Every point is the mean of independent replications with its 95% Student-t \
         confidence half-width (`mean ± ci`). The scenario files are in \
         `scenarios/gateway/`; each experiment's raw results (results.json, results.csv, \
         replications.csv, run.json) are in the subdirectory of its name.\n"
    );
    for exp in EXPERIMENTS.iter().zip(&reports) {
        let (e, r) = exp;
        let _ = writeln!(
            md,
            "- §{} `{}`: {} points x {} replications of {} s (warm-up {} s), seed {}, {} events",
            e.section,
            e.name,
            r.points.len(),
            r.scenario.run.replications,
            match r.scenario.run.length {
                RunLength::Duration(d) => d.as_secs_f64(),
                RunLength::Count(n) => n as f64,
            },
            match r.scenario.run.warmup {
                Warmup::Time(d) => d.as_secs_f64(),
                _ => f64::NAN,
            },
            r.scenario.run.seed,
            r.events
        );
    }
    let _ = writeln!(
        md,
        "\nCost: {events} events in {wall:.1} s of wall-clock time on {threads} thread(s), \
         {:.2} M events/s.\n",
        events as f64 / wall.max(1e-9) / 1e6
    );

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
        let stem = out.join(fig.stem);
        plot_metric(&stem, &spec, &ss)?;
        let mut csv = String::from("series,x_mbps,mean,ci95\n");
        for s in &ss {
            for (x, m, h) in &s.points {
                let _ = writeln!(csv, "\"{}\",{x},{m},{h}", s.label);
            }
        }
        let csv_path = stem.with_extension("csv");
        std::fs::write(&csv_path, csv).map_err(|e| io_err(&csv_path, e))?;
        files.push(csv_path);
        files.push(out.join(format!("{}.png", fig.stem)));
        files.push(out.join(format!("{}.svg", fig.stem)));

        let _ = writeln!(md, "## {}\n", fig.caption);
        let _ = writeln!(md, "![{}]({}.png)\n", fig.caption, fig.stem);
        let _ = writeln!(md, "**Paper:** {}\n", fig.paper);
        let _ = writeln!(md, "**Ours** (`{}`, §{}):\n", fig.metric, exp.section);
        // A table: rows are x values, columns are series.
        let mut xs: Vec<f64> = ss
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let _ = write!(md, "| load (Mb/s) |");
        for s in &ss {
            let _ = write!(md, " {} |", s.label);
        }
        let _ = write!(md, "\n| --- |");
        for _ in &ss {
            let _ = write!(md, " --- |");
        }
        let _ = writeln!(md);
        for x in xs {
            let _ = write!(md, "| {x} |");
            for s in &ss {
                match s.points.iter().find(|p| p.0 == x) {
                    Some((_, m, h)) => {
                        let _ = write!(md, " {} ± {} |", fmt(*m), fmt(*h));
                    }
                    None => {
                        let _ = write!(md, " |");
                    }
                }
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "{}", findings(&reports));
    let report = out.join("report.md");
    std::fs::write(&report, md).map_err(|e| io_err(&report, e))?;
    files.push(report.clone());
    Ok(Outcome {
        report,
        files,
        events,
        wall_seconds: wall,
        threads,
    })
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

/// Findings computed from the runs, stated next to the paper's.
fn findings(reports: &[RunReport]) -> String {
    let mut md = String::from("## Findings, computed from these runs\n\n");
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
    if let Some((o, t, ratio)) = lowest {
        let _ = writeln!(
            md,
            "- §6.1, below the threshold: at {o:.1} Mb/s offered the gateway carries {t:.1} Mb/s, \
             {:.1}% less (the SAR overhead alone is 8/53 = 15.1%; the paper: \"approximately 15 percent\").",
            (1.0 - ratio) * 100.0
        );
    }
    let _ = writeln!(
        md,
        "- §6.1, the cap: the largest throughput measured is {max_tp:.1} Mb/s (FDDI: 100 Mb/s \
         minus its 28 octets of framing per 3853-octet frame and the token's passes)."
    );
    // Cut-offs: the smallest load with a measured cell loss, per series.
    for (i, what) in [
        (0usize, "burst factor"),
        (1, "peak-to-average ratio"),
        (3, "transmit buffer"),
    ] {
        let r = &reports[i];
        let ss = series(r, "offered_load", "cell_loss_probability");
        let cut: Vec<String> = ss
            .iter()
            .map(|s| {
                let c = s
                    .points
                    .iter()
                    .find(|p| p.1 > 1e-4)
                    .map_or("none up to the largest load".to_string(), |p| {
                        format!("{} Mb/s", p.0)
                    });
                format!("{}: {c}", s.label)
            })
            .collect();
        let _ = writeln!(
            md,
            "- §6.{}, cut-off (first load with cell loss above 1e-4) by {what}: {}.",
            i + 1,
            cut.join("; ")
        );
    }
    // §6.3: the NPE knee.
    let r = &reports[2];
    let ss = series(r, "offered_load", "throughput_mbps");
    let knees: Vec<String> = ss
        .iter()
        .map(|s| {
            let m = s.points.iter().map(|p| p.1).fold(0.0, f64::max);
            format!("{}: {m:.1} Mb/s", s.label)
        })
        .collect();
    let _ = writeln!(
        md,
        "- §6.3, the largest throughput per NPE rate (an NPE serving R segments of 8 cells per \
         second cannot carry more than R x 8 x 45 x 8 bits/s, 72 Mb/s at R = 25 /ms, or \
         68.2 Mb/s with the 2.25 us copy of each segment): {}.",
        knees.join("; ")
    );
    // §6.4: the loss-latency trade-off at the highest load.
    let r = &reports[3];
    let lat = series(r, "offered_load", "latency_mean");
    let loss = series(r, "offered_load", "cell_loss_probability");
    let t: Vec<String> = lat
        .iter()
        .zip(&loss)
        .filter_map(|(l, c)| {
            let (x, lm, _) = *l.points.last()?;
            let (_, cm, _) = *c.points.last()?;
            Some(format!(
                "{}: latency {:.1} ms, cell loss {} at {x} Mb/s",
                l.label,
                lm * 1e3,
                fmt(cm)
            ))
        })
        .collect();
    let _ = writeln!(
        md,
        "- §6.4, the trade-off at the highest load: {}.",
        t.join("; ")
    );
    // §6.5: the reverse path.
    let r = &reports[4];
    let tp = series(r, "reverse.load", "reverse_throughput_mbps");
    let mx = series(r, "reverse.load", "receive_buffer_max");
    let lo = series(r, "reverse.load", "reverse_frame_loss_probability");
    let t: Vec<String> = tp
        .iter()
        .zip(&mx)
        .zip(&lo)
        .filter_map(|((a, b), c)| {
            let (x, tm, _) = *a.points.last()?;
            let bm = b.points.iter().map(|p| p.1).fold(0.0, f64::max);
            let cm = c.points.iter().map(|p| p.1).fold(0.0, f64::max);
            Some(format!(
                "{}: {tm:.1} Mb/s carried at {x} Mb/s sent, at most {bm:.1} frames held, largest loss {}",
                a.label,
                fmt(cm)
            ))
        })
        .collect();
    let _ = writeln!(md, "- §6.5, the reverse path: {}.", t.join("; "));
    md
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
