//! `atmlab reproduce xbind`: paper 000's measurements, repeated on the live laboratory
//! (the demo's ring of four switch servers on loopback, a 3-hop path a -> b), with the
//! paper's published numbers beside ours.
//!
//! - §III-B, the baseline: one call at a time, setup latency of the sequential manager
//!   (and of xbind), minimum, mean, maximum, 5% and 95% quantiles.
//! - Figs. 6, 7 and 11: throughput-delay curves of `sequential` and `xbind` with
//!   T = 1, 4, 10, 15 and adaptive T, under Poisson calls.
//! - §IV-A, Fig. 9 and Table I: the distribution of `N_v`, the identifiers of one output
//!   port in use, measured at each arrival, beside its M/G/∞ (Poisson) estimate, and the
//!   hit frequency of each cache size, estimated and measured; the cache size the model
//!   picks for a target hit ratio.
//! - §IV-B, Fig. 10: remote invocations per call against N = 4λ(1 + k/T).
//!
//! Our machine sets calls up far faster than the paper's HP 9000/700s on Orbix, so the
//! experiments that depend on the load (Fig. 9, Table I, Fig. 10) run at the paper's
//! rates times [`SCALE`], with its times (holding time, flush time-out) divided by it:
//! the ratios the paper reasons with (cache size to active calls, batch fill time to
//! time-out) stay the same. Nothing here is fitted to the paper's numbers.
//!
//! The report (`README.md`, its CSVs and figures) is built with [`crate::report`]; its
//! prose is `templates/xbind.md`.

use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use atmlab_core::time::Duration;
use hdrhistogram::Histogram;
use serde_json::json;

use atmlab_sim::plot::PlotSpec;
use minijinja::context;

use crate::callgen::{self, Load, Report};
use crate::launch::Lab;
use crate::report::{self, Column, Format, SeriesSet, Table, Value, plot, write};
use crate::{LabError, cells};
use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::dimension::{
    NvProbe, cache_size_for, estimated_hit_ratio, invocations_per_s, offered_identifiers,
    poisson_cdf,
};
use atmlab_control::cm::live::CmHandle;

/// The report's prose.
const TEMPLATE: &str = include_str!("../../templates/xbind.md");

/// Our rates are the paper's times this; our times the paper's divided by it.
pub const SCALE: f64 = 100.0;

/// Switch servers on the path a -> b (the paper's Fig. 10 uses three as well).
pub const HOPS: u32 = 3;

/// What to run.
#[derive(Debug, Clone)]
pub struct XbindOptions {
    /// Where the report goes (`reports/xbind`).
    pub out: PathBuf,
    /// Certificates and state (`atmlab-data`).
    pub data_dir: PathBuf,
    /// Plain text instead of mutual TLS.
    pub insecure: bool,
    /// The short form: fewer points, shorter runs.
    pub quick: bool,
}

/// One `N_v` experiment of Fig. 9: the paper's (λ, T), run at λ x [`SCALE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NvCase {
    /// The paper's panel, e.g. "(b) medium load".
    pub panel: &'static str,
    /// The paper's arrival rate, calls/s.
    pub paper_rate: f64,
    /// The message threshold.
    pub threshold: u32,
}

/// The paper's four panels of Fig. 9 (holding time 5 s, i.e. μ = 0.2).
pub const NV_CASES: [NvCase; 4] = [
    NvCase {
        panel: "(a) low load",
        paper_rate: 10.0,
        threshold: 5,
    },
    NvCase {
        panel: "(b) medium load",
        paper_rate: 50.0,
        threshold: 5,
    },
    NvCase {
        panel: "(c) high load",
        paper_rate: 100.0,
        threshold: 5,
    },
    NvCase {
        panel: "(d) high load",
        paper_rate: 100.0,
        threshold: 15,
    },
];

/// A row of the paper's Table I: cache size, estimated and measured hit frequency.
pub type TableIRow = (usize, f64, f64);

/// The paper's Table I, for the medium load (λ = 50, T = 5) and the high load (λ = 100,
/// T = 15).
pub const PAPER_TABLE_I: [(&str, [TableIRow; 4]); 2] = [
    (
        "(b) medium load",
        [
            (5, 0.9529, 0.9859),
            (7, 0.9950, 0.9996),
            (9, 0.9997, 0.9999),
            (10, 0.9999, 0.9999),
        ],
    ),
    (
        "(d) high load",
        [
            (12, 0.9354, 0.9081),
            (13, 0.9653, 0.9429),
            (15, 0.9916, 0.9771),
            (20, 0.9999, 0.9935),
        ],
    ),
];

/// The run lengths and points of the full and quick forms.
#[derive(Debug, Clone)]
struct Plan {
    baseline_calls: usize,
    loads: Vec<f64>,
    load_seconds: f64,
    nv_seconds: f64,
    nv_cases: Vec<NvCase>,
    invocation_rates: Vec<f64>,
    invocation_thresholds: Vec<u32>,
    invocation_seconds: f64,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                baseline_calls: 50,
                loads: vec![500.0, 5_000.0],
                load_seconds: 0.3,
                nv_seconds: 0.5,
                nv_cases: vec![NV_CASES[1], NV_CASES[3]],
                invocation_rates: vec![2_000.0],
                invocation_thresholds: vec![1, 4],
                invocation_seconds: 0.3,
            }
        } else {
            Plan {
                baseline_calls: 1_000,
                loads: vec![
                    100.0, 1_000.0, 5_000.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 60_000.0,
                ],
                load_seconds: 2.0,
                nv_seconds: 8.0,
                nv_cases: NV_CASES.to_vec(),
                invocation_rates: vec![1_000.0, 10_000.0],
                invocation_thresholds: vec![1, 2, 4, 10, 15],
                invocation_seconds: 1.5,
            }
        }
    }
}

/// §III-B: one call at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// The manager.
    pub manager: String,
    /// Calls measured.
    pub calls: u64,
    /// Setup latency, ms: minimum, mean, maximum, 5% and 95% quantiles.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// 5% quantile.
    pub p5_ms: f64,
    /// 95% quantile.
    pub p95_ms: f64,
}

/// One point of a throughput-delay curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// The manager, e.g. "xbind T=4".
    pub manager: String,
    /// What the call generator measured.
    pub report: Report,
    /// T as the manager mostly had it during the run (adaptive T moves).
    pub threshold: u32,
}

/// One `N_v` experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct NvResult {
    /// The paper's case.
    pub case: NvCase,
    /// Our arrival rate, calls/s.
    pub rate: f64,
    /// The call generator's measurements.
    pub report: Report,
    /// `N_v` of the first switch's output port on the path.
    pub probe: NvProbe,
    /// The port, "switch:port".
    pub port: String,
}

impl NvResult {
    /// λ/α estimated directly: the measured arrival rate times the mean replacement
    /// latency.
    pub fn direct_mean(&self) -> f64 {
        offered_identifiers(self.measured_rate(), self.probe.mean_latency())
    }

    /// Arrivals per second seen by the port, over the time it was observed.
    pub fn measured_rate(&self) -> f64 {
        let t = self.probe.observed();
        if t > 0.0 {
            self.probe.arrivals() as f64 / t
        } else {
            0.0
        }
    }
}

/// One remote-invocation measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationResult {
    /// Our arrival rate, calls/s.
    pub rate: f64,
    /// The message threshold.
    pub threshold: u32,
    /// Calls set up (and released).
    pub calls: u64,
    /// Messages to switch servers, re-sends excluded: the paper's count is of a
    /// fault-free run, and a loaded machine (a debug build, other work beside it) makes
    /// answers late enough to re-send, which says nothing about T.
    pub messages: u64,
    /// Commands those messages carried.
    pub commands: u64,
    /// Commands re-sent after a time-out (not in `messages`; with T = 1 each was a
    /// message of its own).
    pub retries: u64,
    /// Of the commands (first sends), those that moved identifiers for the cache
    /// (misses, fills, trims) rather than set up or released a call's channel.
    pub identifier_commands: u64,
    /// Calls offered that were not set up (refused or failed); their commands count
    /// in `commands` and `messages` too.
    pub not_established: u64,
}

impl InvocationResult {
    /// Switch-server invocations per call: each message and its answer.
    pub fn switch_invocations_per_call(&self) -> f64 {
        if self.calls == 0 {
            return 0.0;
        }
        2.0 * self.messages as f64 / self.calls as f64
    }

    /// Total per call, counting as the paper does the setup and delete requests and
    /// their answers (4 per call).
    pub fn invocations_per_call(&self) -> f64 {
        4.0 + self.switch_invocations_per_call()
    }

    /// Identifier commands (cache misses, fills, trims) per call set up.
    pub fn identifier_commands_per_call(&self) -> f64 {
        if self.calls == 0 {
            return 0.0;
        }
        self.identifier_commands as f64 / self.calls as f64
    }

    /// Commands per message, re-sends included on both sides.
    pub fn commands_per_message(&self) -> f64 {
        let sent = self.messages + self.retries;
        if sent == 0 {
            return 0.0;
        }
        self.commands as f64 / sent as f64
    }

    /// The part of [`InvocationResult::invocations_per_call`] that the paper's formula
    /// describes: the messages are shared out between call commands and identifier
    /// commands in proportion to their numbers (a message may carry both), and only
    /// the call commands' share is kept. The rest is the price of cache misses, which
    /// grows with N_v, so with the machine's latency; this part does not.
    pub fn call_invocations_per_call(&self) -> f64 {
        let first = self.commands.saturating_sub(self.retries);
        if self.calls == 0 || first == 0 {
            return 0.0;
        }
        let call_share = first.saturating_sub(self.identifier_commands) as f64 / first as f64;
        4.0 + 2.0 * self.messages as f64 * call_share / self.calls as f64
    }

    /// The paper's N/λ = 4(1 + k/T).
    pub fn formula_per_call(&self) -> f64 {
        invocations_per_s(1.0, HOPS, self.threshold)
    }
}

/// Everything the reproduction measured.
#[derive(Debug, Clone, PartialEq)]
pub struct XbindResults {
    /// §III-B.
    pub baseline: Vec<Baseline>,
    /// Figs. 6, 7, 11.
    pub curves: Vec<CurvePoint>,
    /// Fig. 9, Table I.
    pub nv: Vec<NvResult>,
    /// Fig. 10.
    pub invocations: Vec<InvocationResult>,
    /// Whether this was the quick form.
    pub quick: bool,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
}

fn err(what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::run("the xbind reproduction", format!("{what}: {e}"))
}

/// An xbind manager with a cache large enough that every call hits (as the paper's
/// Fig. 6 and Fig. 9 runs had, "> 200"), T fixed, and the paper's 1 s flush time-out
/// scaled.
fn xbind(threshold: u32, flush: Duration) -> CmConfig {
    CmConfig {
        flush_timeout: flush,
        ..crate::launch::xbind_config(threshold)
    }
}

/// The managers of the throughput-delay curves.
fn curve_managers() -> Vec<(String, CmConfig)> {
    // The demo's tuning (flush 200 us: at our latencies a batch older than that costs
    // more than it saves) plus T = 15, the paper's largest.
    let mut v = crate::launch::managers();
    let flush = CmConfig::new(CmKind::Xbind).flush_timeout;
    let pos = v
        .iter()
        .position(|(n, _)| n == "xbind adaptive")
        .unwrap_or(v.len());
    v.insert(pos, ("xbind T=15".into(), xbind(15, flush)));
    v
}

/// Runs the reproduction on a fresh lab; `say` hears progress lines.
pub async fn run(opts: &XbindOptions, mut say: impl FnMut(&str)) -> Result<XbindResults, LabError> {
    let started = std::time::Instant::now();
    let lab = Lab::up(&opts.data_dir, opts.insecure, &mut say).await?;
    let mut results = lab
        .within(async |lab| run_on(opts, lab, &mut say).await)
        .await?;
    results.seconds = started.elapsed().as_secs_f64();
    write_report(&opts.out, &results)?;
    Ok(results)
}

async fn run_on(
    opts: &XbindOptions,
    lab: &Lab,
    say: &mut impl FnMut(&str),
) -> Result<XbindResults, LabError> {
    let plan = Plan::new(opts.quick);
    let holding = StdDuration::from_secs_f64(5.0 / SCALE);
    let flush = Duration::from_secs_f64(1.0 / SCALE);

    // §III-B: one call at a time.
    let mut baseline = Vec::new();
    for (name, config) in [
        ("sequential".to_string(), CmConfig::new(CmKind::Sequential)),
        ("xbind T=1".to_string(), xbind(1, flush)),
    ] {
        let cm = lab.manager(config).await?;
        let b = one_at_a_time(&cm, &name, plan.baseline_calls).await;
        cm.shutdown().await;
        lab.audit(&name).await?;
        let b = b?;
        say(&format!(
            "baseline {name:>12}: {} calls one at a time: min {:.3} ms, mean {:.3} ms, max {:.3} ms (5% {:.3}, 95% {:.3})",
            b.calls, b.min_ms, b.mean_ms, b.max_ms, b.p5_ms, b.p95_ms
        ));
        baseline.push(b);
    }

    // Figs. 6, 7, 11: throughput-delay.
    let mut curves = Vec::new();
    for (name, config) in curve_managers() {
        let cm = lab.manager(config).await?;
        for &rate in &plan.loads {
            let load = Load {
                holding: StdDuration::from_millis(5),
                ..Load::poisson(
                    rate,
                    StdDuration::from_secs_f64(plan.load_seconds),
                    "a",
                    "b",
                )
            };
            // T as the manager had it while the load ran (adaptive T moves; read after
            // the run, it would show the idle drain's region).
            let seen: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<u32, u32>>> =
                Default::default();
            let watch = {
                let (cm, seen) = (cm.clone(), seen.clone());
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(StdDuration::from_millis(50)).await;
                        let Ok(s) = cm.status().await else { return };
                        *seen
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(s.threshold)
                            .or_default() += 1;
                    }
                })
            };
            let report = callgen::run(cm.clone(), &load).await;
            watch.abort();
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let threshold = match seen.iter().max_by_key(|(_, n)| **n) {
                Some((t, _)) => *t,
                None => cm.status().await.map(|s| s.threshold).unwrap_or(0),
            };
            say(&format!(
                "curve {name:>15} offered {rate:>7.0}/s: {:>8.0} setups/s, mean {:>8.3} ms (T mostly {threshold})",
                report.setups_per_s, report.mean_setup_ms
            ));
            let saturated = report.setups_per_s < 0.5 * rate;
            curves.push(CurvePoint {
                manager: name.clone(),
                report,
                threshold,
            });
            // Past saturation every higher load only measures the overload guard.
            if saturated {
                break;
            }
        }
        cm.shutdown().await;
        lab.audit(&name).await?;
    }

    // Fig. 9 and Table I: N_v at the paper's loads, scaled.
    let mut nv = Vec::new();
    for case in &plan.nv_cases {
        let rate = case.paper_rate * SCALE;
        let name = format!("xbind T={} at {rate} calls/s", case.threshold);
        let cm = lab.manager(xbind(case.threshold, flush)).await?;
        let load = Load {
            holding,
            // The model assumes Poisson arrivals: keep each to its instant.
            precise: true,
            ..Load::poisson(rate, StdDuration::from_secs_f64(plan.nv_seconds), "a", "b")
        };
        let report = callgen::run(cm.clone(), &load).await;
        let status = cm.status().await.map_err(|e| err("status", e.message))?;
        cm.shutdown().await;
        lab.audit(&name).await?;
        // The first switch's output port on the path (the paper looks at one port);
        // the route cache keeps one of the ring's two routes for 5 s, so one port of the
        // first switch carries (nearly) all the calls.
        let first = crate::launch::route_ports(&lab.route, "a", "b")
            .first()
            .map(|p| p.0.clone())
            .ok_or_else(|| err("the route a -> b", "is empty"))?;
        let Some((sw, port, probe)) = status
            .nv
            .into_iter()
            .filter(|(s, _, _)| *s == first)
            .max_by_key(|(_, _, p)| p.arrivals())
        else {
            return Err(err("N_v", format!("no arrivals measured at {first}")));
        };
        let r = NvResult {
            case: *case,
            rate,
            report,
            probe,
            port: format!("{sw}:{port}"),
        };
        say(&format!(
            "N_v {} ({name}): {} arrivals at {} (gap CV² {:.2}), mean N_v {:.3} at arrivals, {:.3} over time, λ/α {:.3} (latency {:.3} ms)",
            case.panel,
            r.probe.arrivals(),
            r.port,
            r.probe.gap_cv2(),
            r.probe.mean(),
            r.probe.time_mean(),
            r.direct_mean(),
            r.probe.mean_latency().as_secs_f64() * 1e3
        ));
        nv.push(r);
    }

    // Fig. 10: invocations per call against T.
    let mut invocations = Vec::new();
    for &t in &plan.invocation_thresholds {
        let name = format!("xbind T={t}");
        let cm = lab.manager(xbind(t, flush)).await?;
        for &rate in &plan.invocation_rates {
            let before = cm.status().await.map_err(|e| err("status", e.message))?;
            let load = Load {
                holding,
                ..Load::poisson(
                    rate,
                    StdDuration::from_secs_f64(plan.invocation_seconds),
                    "a",
                    "b",
                )
            };
            let report = callgen::run(cm.clone(), &load).await;
            let after = cm.status().await.map_err(|e| err("status", e.message))?;
            let r = InvocationResult {
                rate,
                threshold: t,
                calls: report.established,
                messages: (after.stats.messages - before.stats.messages)
                    .saturating_sub(after.stats.retries - before.stats.retries),
                commands: after.stats.commands - before.stats.commands,
                retries: after.stats.retries - before.stats.retries,
                identifier_commands: after.stats.identifier_commands
                    - before.stats.identifier_commands,
                not_established: report.offered.saturating_sub(report.established),
            };
            say(&format!(
                "invocations {name:>11} at {rate:>6.0} calls/s: {:.2} per call, {:.2} for the calls' own commands (formula {:.2}); {:.2} commands per message, {} identifier commands, {} calls not set up",
                r.invocations_per_call(),
                r.call_invocations_per_call(),
                r.formula_per_call(),
                r.commands_per_message(),
                r.identifier_commands,
                r.not_established
            ));
            invocations.push(r);
        }
        cm.shutdown().await;
        lab.audit(&name).await?;
    }
    Ok(XbindResults {
        baseline,
        curves,
        nv,
        invocations,
        quick: opts.quick,
        seconds: 0.0,
    })
}

/// Sets up and releases `n` calls, one at a time, and measures the setups.
async fn one_at_a_time(cm: &CmHandle, name: &str, n: usize) -> Result<Baseline, LabError> {
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| err("histogram", e))?;
    let (mut sum, mut calls) = (0u128, 0u64);
    for _ in 0..n {
        let t0 = std::time::Instant::now();
        let call = crate::launch::call_a_to_b(cm, 10.0, "baseline")
            .await
            .map_err(|e| err(name, e.message))?;
        let ns = (t0.elapsed().as_nanos() as u64).max(1);
        hist.record(ns.min(60_000_000_000))
            .map_err(|e| err("histogram", e))?;
        sum += ns as u128;
        calls += 1;
        cm.delete(call.view.id)
            .await
            .map_err(|e| err(name, e.message))?;
    }
    // Let the releases' answers come back before the audit.
    tokio::time::sleep(StdDuration::from_millis(20)).await;
    let ms = |v: u64| v as f64 / 1e6;
    Ok(Baseline {
        manager: name.to_string(),
        calls,
        min_ms: ms(hist.min()),
        mean_ms: if calls > 0 {
            sum as f64 / calls as f64 / 1e6
        } else {
            0.0
        },
        max_ms: ms(hist.max()),
        p5_ms: ms(hist.value_at_quantile(0.05)),
        p95_ms: ms(hist.value_at_quantile(0.95)),
    })
}

// ----- the report ------------------------------------------------------------------------

/// The cache sizes a Table I row shows for a case: every size from where the estimate
/// or the measurement first passes 0.9 to where the estimate reaches 0.9999, then the
/// sizes the measurement needs for 0.99, 0.999 and 0.9999.
fn table_sizes(r: &NvResult) -> Vec<usize> {
    let m = r.probe.mean();
    let top = r.probe.at_arrival.len() + 1;
    let measured = |target: f64| r.probe.size_for(target).unwrap_or(top);
    let lo = cache_size_for(m, 0.9).unwrap_or(1).min(measured(0.9));
    let hi = cache_size_for(m, 0.9999).unwrap_or(lo).max(lo);
    let mut v: Vec<usize> = (lo..=hi.min(lo + 12)).collect();
    v.extend([measured(0.99), measured(0.999), measured(0.9999)]);
    v.sort_unstable();
    v.dedup();
    v
}

/// §III-B: the paper's two servers beside our managers.
fn baseline_table(r: &XbindResults) -> Table {
    let ms = |md: &str, csv: &str| Column::new(md, csv).right().fixed(3, 4);
    let mut t = Table::new([
        Column::md("manager"),
        Column::csv("manager"),
        Column::new("calls", "calls").right(),
        ms("min ms", "min_ms"),
        ms("mean ms", "mean_ms"),
        ms("max ms", "max_ms"),
        ms("5% ms", "p5_ms"),
        ms("95% ms", "p95_ms"),
    ]);
    for paper in [
        [
            "paper, sequential (Orbix, HP 9000/700)",
            ">= 1000",
            "20.0",
            "23.4",
            "63.3",
            "20.5",
            "31.0",
        ],
        [
            "paper, threaded",
            ">= 1000",
            "22.5",
            "24.9",
            "213",
            "23.1",
            "35.1",
        ],
    ] {
        t.md_row(paper.map(Value::from).to_vec());
    }
    for b in &r.baseline {
        t.row(cells![
            format!("atmlab, {}", b.manager),
            &b.manager,
            b.calls,
            b.min_ms,
            b.mean_ms,
            b.max_ms,
            b.p5_ms,
            b.p95_ms
        ]);
    }
    t
}

/// Figs. 6, 7 and 11: every point of every curve, and the curves.
fn curves_table(r: &XbindResults) -> (Table, SeriesSet) {
    let mut t = Table::new([
        Column::new("manager", "manager"),
        Column::new("offered /s", "offered_per_s")
            .right()
            .md_format(Format::Fixed(0)),
        Column::new("setups /s", "setups_per_s").right().fixed(0, 1),
        Column::csv("operations_per_s").format(Format::Fixed(1)),
        Column::new("mean ms", "mean_setup_ms").right().fixed(3, 4),
        Column::csv("p50_setup_ms").format(Format::Fixed(4)),
        Column::new("p99 ms", "p99_setup_ms").right().fixed(3, 4),
        Column::csv("max_setup_ms").format(Format::Fixed(4)),
        Column::csv("established"),
        Column::new("blocked", "blocked").right(),
        Column::csv("failed"),
        Column::new("T during", "threshold_during").right(),
    ]);
    let mut series = SeriesSet::new();
    for c in &r.curves {
        let p = &c.report;
        t.row(cells![
            &c.manager,
            p.offered_per_s,
            p.setups_per_s,
            p.operations_per_s,
            p.mean_setup_ms,
            p.p50_setup_ms,
            p.p99_setup_ms,
            p.max_setup_ms,
            p.established,
            p.blocked,
            p.failed,
            c.threshold
        ]);
        series.push(&c.manager, (p.setups_per_s, p.mean_setup_ms, f64::NAN));
    }
    (t, series)
}

/// Fig. 9: one line per case.
fn nv_table(r: &XbindResults) -> Table {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        Column::new("panel", "panel"),
        Column::md("paper λ, T"),
        Column::csv("paper_rate"),
        Column::csv("threshold"),
        num("our λ /s", "rate").md_format(Format::Fixed(0)),
        Column::csv("measured_rate").format(Format::Fixed(1)),
        num("arrivals", "arrivals"),
        Column::new("port", "port"),
        num("gap CV² (Poisson: 1)", "gap_cv2").fixed(2, 4),
        num("mean N_v at arrivals", "mean_nv_arrivals").fixed(3, 4),
        num("mean N_v over time", "mean_nv_time").fixed(3, 4),
        num("λ/α = λ x latency", "direct_mean").fixed(3, 4),
        num("replacement latency ms", "latency_ms").fixed(3, 4),
        num("size for 99% (model)", "size99_model"),
        num("size for 99% (measured)", "size99_measured"),
    ]);
    for n in &r.nv {
        let m = n.probe.mean();
        t.row(cells![
            n.case.panel,
            format!("{}, {}", n.case.paper_rate, n.case.threshold),
            n.case.paper_rate,
            n.case.threshold,
            n.rate,
            n.measured_rate(),
            n.probe.arrivals(),
            &n.port,
            n.probe.gap_cv2(),
            m,
            n.probe.time_mean(),
            n.direct_mean(),
            n.probe.mean_latency().as_secs_f64() * 1e3,
            cache_size_for(m, 0.99).unwrap_or(0),
            n.probe.size_for(0.99).unwrap_or(0)
        ]);
    }
    t
}

/// Fig. 9, one case: P{N_v <= x} measured (at arrivals, over time) and estimated
/// (Poisson with the measured mean, and with λ x latency). Writes its CSV and plot;
/// returns its file stem.
fn nv_figure(dir: &Path, n: &NvResult) -> Result<String, LabError> {
    let m = n.probe.mean();
    let stem = format!(
        "nv_{}",
        n.case
            .panel
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            + &format!("_t{}", n.case.threshold)
    );
    let top = n
        .probe
        .at_arrival
        .len()
        .max(cache_size_for(m, 0.9999).unwrap_or(1))
        + 1;
    let mut csv = Table::new(
        [
            "x",
            "measured_at_arrivals",
            "measured_over_time",
            "poisson_mean_nv",
            "poisson_direct",
        ]
        .map(|c| Column::csv(c).format(Format::Fixed(6))),
    );
    let labels = [
        "measured, at arrivals",
        "measured, over time",
        "Poisson, mean of N_v",
        "Poisson, λ x latency",
    ];
    let mut series = SeriesSet::new();
    for x in 0..=top {
        let ys = [
            n.probe.cdf(x),
            n.probe.time_cdf(x),
            poisson_cdf(m, x),
            poisson_cdf(n.direct_mean(), x),
        ];
        csv.csv_row(cells![x, ys[0], ys[1], ys[2], ys[3]]);
        for (label, y) in labels.iter().zip(ys) {
            series.push(label, (x as f64, y, f64::NAN));
        }
    }
    write(dir, &format!("{stem}.csv"), &csv.csv())?;
    let title = format!(
        "Fig. 9 {}: P{{N_v <= x}}, λ = {:.0}/s, T = {}",
        n.case.panel, n.rate, n.case.threshold
    );
    plot(
        dir,
        &stem,
        PlotSpec {
            title: &title,
            x_label: "x (identifiers in use)",
            y_label: "P{N_v <= x}",
            log_y: false,
        },
        series.as_slice(),
    )?;
    Ok(stem)
}

/// Table I: per panel, the paper's rows and ours (a markdown table each); one CSV.
fn table_i(r: &XbindResults) -> (Vec<minijinja::Value>, Table) {
    let columns = || {
        let p = |md: &str, csv: &str| Column::new(md, csv).right().fixed(4, 6);
        [
            Column::csv("panel"),
            Column::md("source"),
            Column::csv("source"),
            Column::new("cache size X", "cache_size").right(),
            p("estimated", "estimated"),
            p("paper's reading P{N_v <= X}", "papers_reading"),
            p("measured", "measured"),
        ]
    };
    let mut panels = Vec::new();
    let mut all = Table::new(columns());
    for (panel, rows) in PAPER_TABLE_I {
        let mut t = Table::new(columns());
        for (x, e, m) in rows {
            t.md_row(cells!["paper", x, Value::Empty, e, m]);
            // The paper's numbers as printed.
            t.csv_row(cells![
                panel,
                "paper",
                x,
                Value::Empty,
                e.to_string(),
                m.to_string()
            ]);
        }
        if let Some(n) = r.nv.iter().find(|n| n.case.panel == panel) {
            let mean = n.probe.mean();
            for x in table_sizes(n) {
                t.row(cells![
                    panel,
                    format!("atmlab (λ = {:.0}/s)", n.rate),
                    "atmlab",
                    x,
                    estimated_hit_ratio(mean, x),
                    poisson_cdf(mean, x),
                    n.probe.hit_ratio(x)
                ]);
            }
        }
        panels.push(context! { panel => panel, table => t.markdown() });
        all.extend(t);
    }
    (panels, all)
}

/// Fig. 10: invocations per call, measured and by the formula, against T.
fn invocations_table(r: &XbindResults) -> (Table, SeriesSet) {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        num("T", "threshold"),
        num("λ /s", "rate").md_format(Format::Fixed(0)),
        num("calls", "calls"),
        num("not set up", "not_established"),
        num("messages", "messages"),
        Column::csv("commands"),
        Column::csv("retries"),
        Column::csv("identifier_commands"),
        Column::md("commands per message")
            .right()
            .format(Format::Fixed(2)),
        Column::md("identifier commands per call")
            .right()
            .format(Format::Fixed(2)),
        num("measured per call", "measured_per_call").fixed(2, 4),
        num("calls' own per call", "call_invocations_per_call").fixed(2, 4),
        num("formula 4(1+3/T)", "formula_per_call").fixed(2, 4),
    ]);
    let mut series = SeriesSet::new();
    for i in &r.invocations {
        t.row(cells![
            i.threshold,
            i.rate,
            i.calls,
            i.not_established,
            i.messages,
            i.commands,
            i.retries,
            i.identifier_commands,
            i.commands_per_message(),
            i.identifier_commands_per_call(),
            i.invocations_per_call(),
            i.call_invocations_per_call(),
            i.formula_per_call()
        ]);
        let x = f64::from(i.threshold);
        series.push(
            &format!("measured, λ = {:.0}/s", i.rate),
            (x, i.invocations_per_call(), f64::NAN),
        );
        series.push(
            &format!("calls' own, λ = {:.0}/s", i.rate),
            (x, i.call_invocations_per_call(), f64::NAN),
        );
    }
    let mut ts: Vec<u32> = r.invocations.iter().map(|i| i.threshold).collect();
    ts.sort_unstable();
    ts.dedup();
    series.add(
        "4(1 + 3/T)",
        ts.iter()
            .map(|&t| (f64::from(t), invocations_per_s(1.0, HOPS, t), f64::NAN))
            .collect(),
    );
    series.add(
        "T = infinity: 4",
        ts.iter().map(|&t| (f64::from(t), 4.0, f64::NAN)).collect(),
    );
    (t, series)
}

/// Writes `README.md`, the CSVs, `results.json` and the plots into `dir`.
pub fn write_report(dir: &Path, r: &XbindResults) -> Result<(), LabError> {
    report::create_dir(dir)?;
    let baseline = baseline_table(r);
    write(dir, "baseline.csv", &baseline.csv())?;

    let (curves, series) = curves_table(r);
    write(dir, "throughput_delay.csv", &curves.csv())?;
    plot(
        dir,
        "throughput_delay",
        PlotSpec {
            title: "Figs. 6, 7, 11: mean setup latency against throughput (3 hops)",
            x_label: "call setups per second",
            y_label: "mean setup latency (ms)",
            log_y: true,
        },
        series.as_slice(),
    )?;

    let nv = nv_table(r);
    let mut nv_figures = Vec::new();
    for n in &r.nv {
        let stem = nv_figure(dir, n)?;
        nv_figures.push(context! { panel => n.case.panel, stem => stem });
    }
    write(dir, "nv_summary.csv", &nv.csv())?;

    let (table1_panels, table1) = table_i(r);
    write(dir, "table1.csv", &table1.csv())?;

    let (invocations, series) = invocations_table(r);
    write(dir, "invocations.csv", &invocations.csv())?;
    plot(
        dir,
        "invocations",
        PlotSpec {
            title: "Fig. 10: remote invocations per call against T (k = 3)",
            x_label: "message threshold T",
            y_label: "invocations per call (N / λ)",
            log_y: false,
        },
        series.as_slice(),
    )?;

    let md = report::render(
        "xbind.md",
        TEMPLATE,
        context! {
            quick => r.quick,
            seconds => r.seconds,
            scale => SCALE,
            baseline => baseline.markdown(),
            curves => curves.markdown(),
            nv => nv.markdown(),
            nv_figures => nv_figures,
            table1 => table1_panels,
            invocations => invocations.markdown(),
        },
    )?;
    write(dir, "README.md", &md)?;
    report::write_json(dir, "results.json", &results_json(r))
}

/// Everything measured, for `results.json`.
fn results_json(r: &XbindResults) -> serde_json::Value {
    json!({
        "paper": "xbind",
        "quick": r.quick,
        "seconds": r.seconds,
        "scale": SCALE,
        "baseline": r.baseline.iter().map(|b| json!({
            "manager": b.manager, "calls": b.calls, "min_ms": b.min_ms, "mean_ms": b.mean_ms,
            "max_ms": b.max_ms, "p5_ms": b.p5_ms, "p95_ms": b.p95_ms,
        })).collect::<Vec<_>>(),
        "curves": r.curves.iter().map(|c| {
            let mut v = c.report.to_json();
            v["manager"] = json!(c.manager);
            v["threshold_during"] = json!(c.threshold);
            v
        }).collect::<Vec<_>>(),
        "nv": r.nv.iter().map(|n| json!({
            "panel": n.case.panel, "paper_rate": n.case.paper_rate, "threshold": n.case.threshold,
            "rate": n.rate, "port": n.port, "arrivals": n.probe.arrivals(),
            "mean_nv": n.probe.mean(), "mean_nv_over_time": n.probe.time_mean(),
            "measured_rate": n.measured_rate(), "direct_mean": n.direct_mean(),
            "gap_cv2": n.probe.gap_cv2(),
            "latency_ms": n.probe.mean_latency().as_secs_f64() * 1e3,
            "at_arrival": n.probe.at_arrival,
            "time_at_ps": n.probe.time_at,
        })).collect::<Vec<_>>(),
        "invocations": r.invocations.iter().map(|i| json!({
            "threshold": i.threshold, "rate": i.rate, "calls": i.calls,
            "messages": i.messages, "commands": i.commands, "retries": i.retries,
            "identifier_commands": i.identifier_commands,
            "not_established": i.not_established,
            "commands_per_message": i.commands_per_message(),
            "measured_per_call": i.invocations_per_call(),
            "call_invocations_per_call": i.call_invocations_per_call(),
            "formula_per_call": i.formula_per_call(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rate: f64) -> Report {
        Report {
            offered_per_s: rate,
            offered: 100,
            setups_per_s: rate,
            operations_per_s: 2.0 * rate,
            established: 100,
            blocked: 0,
            failed: 0,
            mean_setup_ms: 1.0,
            p50_setup_ms: 0.9,
            p95_setup_ms: 1.5,
            p99_setup_ms: 2.0,
            max_setup_ms: 3.0,
            seconds: 1.0,
        }
    }

    #[test]
    fn the_report_renders_every_section() {
        let mut probe = NvProbe::default();
        probe.at_arrival = vec![10, 20, 10];
        probe.time_at = vec![1_000, 2_000, 1_000];
        let r = XbindResults {
            baseline: vec![Baseline {
                manager: "sequential".into(),
                calls: 3,
                min_ms: 0.1,
                mean_ms: 0.2,
                max_ms: 0.3,
                p5_ms: 0.1,
                p95_ms: 0.3,
            }],
            curves: vec![CurvePoint {
                manager: "xbind T=1".into(),
                report: report(500.0),
                threshold: 1,
            }],
            nv: vec![NvResult {
                case: NV_CASES[1],
                rate: 5_000.0,
                report: report(5_000.0),
                probe,
                port: "s1:1".into(),
            }],
            invocations: vec![InvocationResult {
                rate: 2_000.0,
                threshold: 4,
                calls: 10,
                messages: 8,
                commands: 30,
                retries: 0,
                identifier_commands: 0,
                not_established: 0,
            }],
            quick: true,
            seconds: 3.0,
        };
        let (dir, md) = super::super::written(|dir| write_report(dir, &r));
        assert!(md.starts_with("# xbind (paper 000), reproduced\n\nGenerated by `atmlab reproduce xbind --quick` in 3 s"));
        assert!(
            md.contains("| atmlab, sequential | 3 | 0.100 | 0.200 | 0.300 | 0.100 | 0.300 |\n")
        );
        assert!(md.contains("### (b) medium load\n\n| source |"));
        assert!(md.contains("| paper | 5 | | 0.9529 | 0.9859 |\n"));
        assert!(md.ends_with("![invocations](invocations.png)\n"));
        let csv = std::fs::read_to_string(dir.path().join("table1.csv")).unwrap();
        assert!(csv.starts_with("panel,source,cache_size,estimated,papers_reading,measured\n(b) medium load,paper,5,,0.9529,0.9859\n"));
    }
}
