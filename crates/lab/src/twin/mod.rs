//! The twin check of the simulated control plane (issue "One core, two shells"): the
//! live xbind manager (paper 000 §II-C, T = 1 and T = 4, flush after 10 ms: the paper's
//! 1 s by the reproductions' scaling rule) on the line of three switches, and the same
//! manager's core in virtual time (`atmlab_models::control`) at the `measured` profile
//! taken from the same live network one operation at a time ([`measure`]). The curves
//! under load are the simulation's predictions; they are set beside the live curves
//! measured in the same run.
//!
//! Criteria, stated here and computed in [`verdicts`]:
//! - **below the knee**: at every offered rate below the live knee, the simulated mean
//!   setup latency is within the tolerance (15%) of the live one;
//! - **the knee**: the offered rate from which on the mean setup latency stays above
//!   [`KNEE_FACTOR`] times the curve's smallest (the last upward crossing, linear between
//!   sweep points); the simulated knee is within the tolerance of the live one. Not
//!   "twice the light-load latency": an aggregating manager's light-load setup is its
//!   wait for the flush, which falls as the load rises, and a live curve is ragged by
//!   tens of microseconds below saturation. A curve that never crosses has no knee in
//!   the sweep: undecided. The live knee is the median of the knees of the sweep and of
//!   [`TwinOptions::passes`] - 1 passes after it, each offering the sweep's last three
//!   rates again (T = 1 and T = 4 one after another): on this shared machine one live
//!   sweep's knee moves by a factor 1.3-1.8 from one run to the next, so one sample
//!   would judge the machine's state more than the model.
//!
//! The live sweep climbs from `start` calls/s by half again each point until the live
//! manager stops carrying what is offered (or its latency passes ten times light load,
//! or more than 1% of its calls fail),
//! so the sweep finds this machine's knee whatever its speed; the simulation runs the
//! same rates and [`SIM_BEYOND`] more, so that a simulated knee past the live one is
//! found too. Each rate is simulated with the call generator's own work at that rate
//! ([`generator`]), which shares the live processors, and twice: with the profile as
//! measured (the verdicts) and with a message to an idle server on busy processors
//! charged its whole `per_message` (`awake_message`, which nothing one at a time
//! measures), so that the report gives the knee at both readings.

pub mod generator;
pub mod measure;

use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use atmlab_control::cm::core::CmConfig;
use atmlab_control::net::Topology;
use atmlab_core::time::Duration;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_models::control::{ControlKind, CostProfile};
use atmlab_sim::runner::{self, RunOptions};
use atmlab_sim::scenario::Scenario;
use atmlab_sim::stats::Estimate;

use crate::LabError;
use crate::callgen::{self, Load};
use crate::launch::Lab;
use crate::report::verdict::{self, Check, Verdict, Verdicts};
use crate::report::{Column, Table};
use atmlab_control::cm::live::CmHandle;

pub use generator::GeneratorCost;
pub use measure::Measurement;

/// The line of three switches (`topologies/line3.toml`).
pub const LINE3: &str = include_str!("../../../../topologies/line3.toml");

/// The thresholds compared.
pub const THRESHOLDS: [u32; 2] = [1, 4];
/// The flush time-out: the paper's 1 s scaled by the reproductions' 100.
pub const FLUSH: StdDuration = StdDuration::from_millis(10);
/// Mean holding time (exponential): the paper's 5 s scaled by 100.
pub const HOLDING: StdDuration = StdDuration::from_millis(50);

/// How the twin check runs.
#[derive(Debug, Clone)]
pub struct TwinOptions {
    /// Where the report, the profile and the CSVs go.
    pub out: PathBuf,
    /// Certificates and state.
    pub data_dir: PathBuf,
    /// Plain text instead of mutual TLS.
    pub insecure: bool,
    /// Seconds of calls per live point.
    pub seconds: f64,
    /// The lowest rate swept, calls/s.
    pub start: f64,
    /// The most points per curve.
    pub max_points: usize,
    /// Replications of each simulated point.
    pub replications: u32,
    /// The relative tolerance of the criteria.
    pub tolerance: f64,
    /// Live samples of each knee: the sweep and `passes - 1` passes after it.
    pub passes: usize,
}

impl TwinOptions {
    /// The full check (a few minutes), or a short one (`quick`: under a minute, for
    /// the tests).
    pub fn new(out: PathBuf, quick: bool) -> TwinOptions {
        TwinOptions {
            out,
            data_dir: PathBuf::from("atmlab-data"),
            insecure: false,
            seconds: if quick { 0.6 } else { 3.0 },
            start: 200.0,
            max_points: if quick { 8 } else { 17 },
            replications: if quick { 2 } else { 3 },
            tolerance: 0.15,
            passes: if quick { 2 } else { 3 },
        }
    }
}

/// One point of a curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// T.
    pub threshold: u32,
    /// Offered calls/s.
    pub rate: f64,
    /// Live: setups carried per second.
    pub live_setups_per_s: f64,
    /// Live: mean setup latency, seconds.
    pub live_latency_s: f64,
    /// Live: the process's threads parked per call offered (voluntary context
    /// switches; the generator's own are in [`GeneratorCost::parks`]).
    pub live_parks: f64,
    /// Live: the process's CPU per call offered, microseconds (the switches', the
    /// manager's and the call generator's).
    pub live_cpu_us: f64,
    /// Simulated: setups carried per second.
    pub sim_setups_per_s: Estimate,
    /// Simulated: mean setup latency, seconds.
    pub sim_latency_s: Estimate,
    /// Simulated: the shared processors' time worked per call offered, microseconds
    /// (`processor_utilisation`; the generator's `client_work` included).
    pub sim_cpu_us: f64,
    /// Live: the manager's task's time in its polls per call offered, microseconds.
    pub live_manager_us: f64,
    /// Live: the manager's links' tasks' time in their polls per call offered,
    /// microseconds (the three links together).
    pub live_links_us: f64,
    /// Simulated: the manager's busy time per call offered, microseconds.
    pub sim_manager_us: f64,
}

/// A live point of a pass after the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct PassPoint {
    /// T.
    pub threshold: u32,
    /// The pass, from 1 (the sweep is pass 0).
    pub pass: usize,
    /// Offered calls/s.
    pub rate: f64,
    /// Setups carried per second.
    pub setups_per_s: f64,
    /// Mean setup latency, seconds.
    pub latency_s: f64,
}

/// A simulated point past the live sweep's last rate, for the simulated knee.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOnly {
    /// T.
    pub threshold: u32,
    /// Offered calls/s.
    pub rate: f64,
    /// Setups carried per second.
    pub setups_per_s: Estimate,
    /// Mean setup latency, seconds.
    pub latency_s: Estimate,
}

/// How many rates past the live sweep's last the simulation runs, each half again the
/// one before: the live sweep stops once the live manager saturates, and a simulated
/// curve that has not crossed by then would leave the knee undecided.
pub const SIM_BEYOND: usize = 3;

/// What the check found.
#[derive(Debug, Clone, PartialEq)]
pub struct TwinResults {
    /// The profile and its readings.
    pub measurement: Measurement,
    /// Both curves of each T, rate by rate.
    pub points: Vec<CurvePoint>,
    /// The live passes after the sweep, near each knee.
    pub passes: Vec<PassPoint>,
    /// The simulated curves continued past each live sweep ([`SIM_BEYOND`] rates).
    pub sim_beyond: Vec<SimOnly>,
    /// The simulated curves at every rate (the sweep's and those beyond) with
    /// `awake_message` charged in full, the bound the profile's waiver leaves open.
    pub charged: Vec<SimOnly>,
    /// The call generator's own work at each rate simulated, charged to the simulated
    /// processors there (`client_work`).
    pub generator: Vec<GeneratorCost>,
    /// The relative tolerance.
    pub tolerance: f64,
}

/// How far above its smallest a curve's latency is past the knee.
pub const KNEE_FACTOR: f64 = 5.0;

/// The knee of a curve `(rate, mean latency)` sorted by rate: the last rate at which the
/// latency crosses [`KNEE_FACTOR`] times its smallest upward, linear between points
/// (a point that carried nothing, latency NaN, counts as above); `None` when it never
/// does.
pub fn knee(curve: &[(f64, f64)]) -> Option<f64> {
    let base = curve
        .iter()
        .map(|&(_, l)| l)
        .filter(|l| l.is_finite())
        .reduce(f64::min)?;
    let limit = KNEE_FACTOR * base;
    let above = |l: f64| !l.is_finite() || l >= limit;
    curve.windows(2).rev().find_map(|w| {
        let ((r0, l0), (r1, l1)) = (w[0], w[1]);
        (!above(l0) && above(l1)).then(|| {
            if l1.is_finite() {
                r0 + (r1 - r0) * (limit - l0) / (l1 - l0)
            } else {
                r1
            }
        })
    })
}

/// The live knees of T = `t`: the sweep's, then each pass's (the sweep's points below
/// the pass's rates, then the pass's own), where the curve crosses.
pub fn live_knees(r: &TwinResults, t: u32) -> Vec<Option<f64>> {
    let sweep: Vec<(f64, f64)> = r
        .points
        .iter()
        .filter(|p| p.threshold == t)
        .map(|p| (p.rate, p.live_latency_s))
        .collect();
    let mut knees = vec![knee(&sweep)];
    let passes = r.passes.iter().filter(|p| p.threshold == t).map(|p| p.pass);
    for pass in 1..=passes.max().unwrap_or(0) {
        let mine: Vec<(f64, f64)> = r
            .passes
            .iter()
            .filter(|p| p.threshold == t && p.pass == pass)
            .map(|p| (p.rate, p.latency_s))
            .collect();
        let Some(&(from, _)) = mine.first() else {
            continue;
        };
        let mut curve: Vec<(f64, f64)> = sweep.iter().copied().filter(|p| p.0 < from).collect();
        curve.extend(mine);
        knees.push(knee(&curve));
    }
    knees
}

/// The simulated curve of T = `t`: at the live sweep's rates, then beyond them.
pub fn sim_curve(r: &TwinResults, t: u32) -> Vec<(f64, f64)> {
    let at_live = r
        .points
        .iter()
        .filter(|p| p.threshold == t)
        .map(|p| (p.rate, p.sim_latency_s.mean));
    let beyond = r
        .sim_beyond
        .iter()
        .filter(|p| p.threshold == t)
        .map(|p| (p.rate, p.latency_s.mean));
    at_live.chain(beyond).collect()
}

/// The simulated curve of T = `t` with `awake_message` charged in full.
pub fn charged_curve(r: &TwinResults, t: u32) -> Vec<(f64, f64)> {
    r.charged
        .iter()
        .filter(|p| p.threshold == t)
        .map(|p| (p.rate, p.latency_s.mean))
        .collect()
}

/// The median of the knees found; `None` unless most samples crossed.
pub fn median_knee(knees: &[Option<f64>]) -> Option<f64> {
    let found: Vec<f64> = knees.iter().flatten().copied().collect();
    (2 * found.len() > knees.len()).then(|| verdict::median(found))
}

/// The verdicts: per T, the latency at every rate below the live knee, and the knee.
pub fn verdicts(r: &TwinResults) -> Verdicts {
    let mut v = Verdicts::new();
    let tol = r.tolerance;
    for t in THRESHOLDS {
        let pts: Vec<&CurvePoint> = r.points.iter().filter(|p| p.threshold == t).collect();
        if pts.is_empty() {
            continue;
        }
        let sim = sim_curve(r, t);
        let knees = live_knees(r, t);
        let live_knee = median_knee(&knees);
        for p in pts.iter().filter(|p| live_knee.is_none_or(|k| p.rate < k)) {
            let ms = Estimate {
                mean: p.sim_latency_s.mean * 1e3,
                ci95: p.sim_latency_s.ci95 * 1e3,
                n: p.sim_latency_s.n,
            };
            let item = format!("xbind T={t} at {} calls/s: mean setup (ms)", p.rate);
            let mut check = verdict::value(item, p.live_latency_s * 1e3, &ms, tol);
            check.why = check.why.replace("paper's", "live");
            v.push(check);
        }
        let item = format!("xbind T={t}: the knee (calls/s)");
        let show = |k: Option<f64>| k.map_or("beyond the sweep".to_owned(), verdict::sig);
        let (verdict, why) = match (live_knee, knee(&sim)) {
            (Some(l), Some(s)) => {
                let off = (s - l).abs() / l;
                let ok = off <= tol;
                (
                    if ok {
                        Verdict::Reproduces
                    } else {
                        Verdict::Differs
                    },
                    format!(
                        "simulated knee {}% off the live one, the median of {} live samples (tolerance {}%)",
                        verdict::sig(off * 100.0),
                        knees.len(),
                        verdict::sig(tol * 100.0)
                    ),
                )
            }
            _ => (
                Verdict::Undecided,
                format!(
                    "the simulated curve, or most live samples, never crossed {KNEE_FACTOR} x its smallest latency in the sweep"
                ),
            ),
        };
        let samples: Vec<String> = knees.iter().map(|&k| show(k)).collect();
        let live_shown = if knees.len() > 1 {
            format!("{} (samples {})", show(live_knee), samples.join(" / "))
        } else {
            show(live_knee)
        };
        v.push(Check::new(item, live_shown, show(knee(&sim)), verdict, why));
    }
    v
}

/// Runs the check: a live line of three switches, the profile measured on it, both
/// curves, and the report in `opts.out`.
pub async fn run(opts: &TwinOptions, say: &mut impl FnMut(&str)) -> Result<TwinResults, LabError> {
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| LabError::run("creating the output directory", e))?;
    let topology = Topology::parse(LINE3, "topologies/line3.toml")?;
    let lab = Lab::up_with(topology, &opts.data_dir, opts.insecure, say).await?;
    let live = lab
        .within(async |lab| live_part(opts, lab, say).await)
        .await?;
    let (measurement, curves, passes) = live;
    crate::report::write(
        &opts.out,
        "measured.toml",
        &measurement.profile.to_toml(&measurement.provenance()),
    )?;
    // Every rate simulated: each T's sweep and [`SIM_BEYOND`] more.
    let rates_of = |curve: &[(f64, callgen::Report, LiveCost)]| {
        let mut rates: Vec<f64> = curve.iter().map(|(r, _, _)| *r).collect();
        if let Some(&last) = rates.last() {
            let mut rate = last;
            for _ in 0..SIM_BEYOND {
                rate = (rate * 1.5).round();
                rates.push(rate);
            }
        }
        rates
    };
    // The generator's own work at each of them (the network is down: nothing else runs).
    let mut all: Vec<f64> = curves.iter().flat_map(|(_, c)| rates_of(c)).collect();
    all.sort_by(f64::total_cmp);
    all.dedup();
    let mut generator = Vec::new();
    for &rate in &all {
        let mut load = twin_load(rate, 1, opts.seconds);
        load.duration = generator::span(opts.seconds);
        let g = generator::measure(&load).await?;
        say(&format!(
            "the call generator alone at {rate:.0}/s: {:.1} us of CPU a call, {:.2} parks a call",
            g.cpu_us, g.parks
        ));
        generator.push(g);
    }
    // Each rate simulated at the profile with the generator's work at that rate, and
    // again with a message to an idle server on busy processors charged its whole
    // `per_message`: profiles written beside the report, removed after.
    let profile_at = |rate: f64, charged: bool| -> Result<PathBuf, LabError> {
        let work = generator
            .iter()
            .find(|g| g.rate == rate)
            .map_or(0.0, |g| g.cpu_us);
        let p = &measurement.profile;
        let profile = CostProfile {
            client_work: Duration::from_secs_f64(work * 1e-6),
            awake_message: if charged {
                p.per_message
            } else {
                p.awake_message
            },
            ..p.clone()
        };
        let name = format!(
            "sim-{}-{rate}.toml",
            if charged { "charged" } else { "waived" }
        );
        crate::report::write(&opts.out, &name, &profile.to_toml(""))?;
        Ok(opts.out.join(name))
    };
    let mut points = Vec::new();
    let mut sim_beyond = Vec::new();
    let mut charged = Vec::new();
    for (t, curve) in curves {
        let rates = rates_of(&curve);
        let live_rates = curve.len();
        let mut sim = Vec::new();
        for &rate in &rates {
            for reading in [false, true] {
                let file = profile_at(rate, reading)?;
                let one = simulate(t, &[rate], &file, opts.replications, opts.seconds);
                let _ = std::fs::remove_file(&file);
                let point = one?.into_iter().next().ok_or_else(|| {
                    LabError::run("the twin check", format!("no simulated point at {rate}"))
                })?;
                if reading {
                    charged.push(SimOnly {
                        threshold: t,
                        rate,
                        setups_per_s: point.setups,
                        latency_s: point.latency,
                    });
                } else {
                    sim.push(point);
                }
            }
        }
        let beyond = sim.split_off(live_rates.min(sim.len()));
        for (
            &rate,
            SimPoint {
                setups, latency, ..
            },
        ) in rates[live_rates..].iter().zip(beyond)
        {
            say(&format!(
                "T={t} at {rate:.0}/s: simulated {:.3} ms ({:.0} setups/s), past the live sweep",
                latency.mean * 1e3,
                setups.mean
            ));
            sim_beyond.push(SimOnly {
                threshold: t,
                rate,
                setups_per_s: setups,
                latency_s: latency,
            });
        }
        let cpus = f64::from(measurement.profile.cpus);
        for ((rate, report, live), p) in curve.into_iter().zip(sim) {
            // Over the calls offered, as the live columns.
            let offered = p.offered.mean.max(f64::MIN_POSITIVE);
            let sim_cpu = p.processors.mean * cpus / offered * 1e6;
            let (setups, latency) = (p.setups, p.latency);
            say(&format!(
                "T={t} at {rate:.0}/s: live {:.3} ms ({:.0} setups/s, {:.1} us of CPU a call), simulated {:.3} ms ({:.0} setups/s, {sim_cpu:.1} us)",
                report.mean_setup_ms,
                report.setups_per_s,
                live.cpu_us,
                latency.mean * 1e3,
                setups.mean
            ));
            points.push(CurvePoint {
                threshold: t,
                rate,
                live_setups_per_s: report.setups_per_s,
                live_latency_s: report.mean_setup_ms / 1e3,
                live_parks: live.parks,
                live_cpu_us: live.cpu_us,
                sim_setups_per_s: setups,
                sim_latency_s: latency,
                sim_cpu_us: sim_cpu,
                live_manager_us: live.manager_us,
                live_links_us: live.links_us,
                sim_manager_us: p.manager.mean / offered * 1e6,
            });
        }
    }
    let results = TwinResults {
        measurement,
        points,
        passes,
        sim_beyond,
        charged,
        generator,
        tolerance: opts.tolerance,
    };
    write_report(&opts.out, &results)?;
    Ok(results)
}

/// Each T's live sweep: (offered rate, the generator's report, the process's work per
/// call offered).
type Curves = Vec<(u32, Vec<(f64, callgen::Report, LiveCost)>)>;

/// What the live process used per call offered at one rate.
#[derive(Debug, Clone, Copy)]
struct LiveCost {
    /// Threads parked.
    parks: f64,
    /// CPU, microseconds.
    cpu_us: f64,
    /// The manager's task's and its links' tasks' time in their polls, microseconds.
    manager_us: f64,
    links_us: f64,
}

/// A simulated point: estimates over the replications.
struct SimPoint {
    setups: Estimate,
    latency: Estimate,
    /// The shared processors' utilisation.
    processors: Estimate,
    /// The manager's utilisation (one manager of one thread: its busy share).
    manager: Estimate,
    offered: Estimate,
}

/// The twin's load: `rate` Poisson calls/s a -> b for `seconds`, paced precisely, held
/// [`HOLDING`], with `seed`.
fn twin_load(rate: f64, seed: u64, seconds: f64) -> Load {
    Load {
        holding: HOLDING,
        precise: true,
        seed,
        traffic: TrafficDescriptor::cbr(CellRate(10.0)),
        ..Load::poisson(rate, StdDuration::from_secs_f64(seconds), "a", "b")
    }
}

/// One live load on `cm`: `rate` calls/s for `opts.seconds`, with `seed`.
async fn live_load(cm: &CmHandle, opts: &TwinOptions, rate: f64, seed: u64) -> callgen::Report {
    callgen::run(cm.clone(), &twin_load(rate, seed, opts.seconds)).await
}

/// The xbind manager of T = `t`, flushing after [`FLUSH`].
async fn manager(lab: &Lab, t: u32) -> Result<CmHandle, LabError> {
    lab.manager(CmConfig {
        flush_timeout: Duration::from_secs_f64(FLUSH.as_secs_f64()),
        ..crate::launch::xbind_config(t)
    })
    .await
}

/// The passes after the sweeps: each offers every T, one after another, the last three
/// rates of its sweep again (the knee's neighbourhood).
async fn live_passes(
    opts: &TwinOptions,
    lab: &Lab,
    curves: &Curves,
    say: &mut impl FnMut(&str),
) -> Result<Vec<PassPoint>, LabError> {
    let mut points = Vec::new();
    for pass in 1..opts.passes {
        for (t, curve) in curves {
            let from = curve.len().saturating_sub(3);
            let cm = manager(lab, *t).await?;
            for (k, (rate, _, _)) in curve.iter().enumerate().skip(from) {
                let report = live_load(&cm, opts, *rate, (pass * 100 + k + 1) as u64).await;
                say(&format!(
                    "live pass {pass} xbind T={t} at {rate:.0}/s: {:.0} setups/s, mean {:.3} ms",
                    report.setups_per_s, report.mean_setup_ms
                ));
                points.push(PassPoint {
                    threshold: *t,
                    pass,
                    rate: *rate,
                    setups_per_s: report.setups_per_s,
                    latency_s: report.mean_setup_ms / 1e3,
                });
            }
            cm.shutdown().await;
            lab.audit(&format!("xbind T={t}, pass {pass}")).await?;
        }
    }
    Ok(points)
}

async fn live_part(
    opts: &TwinOptions,
    lab: &Lab,
    say: &mut impl FnMut(&str),
) -> Result<(Measurement, Curves, Vec<PassPoint>), LabError> {
    let span = StdDuration::from_secs_f64((opts.seconds / 2.0).clamp(0.2, 1.0));
    let m = measure::measure(lab, span, 300, say).await?;
    lab.audit("the cost probe").await?;
    let mut curves = Vec::new();
    for t in THRESHOLDS {
        let cm = manager(lab, t).await?;
        let mut curve: Vec<(f64, callgen::Report, LiveCost)> = Vec::new();
        let mut rate = opts.start;
        while curve.len() < opts.max_points {
            let start = measure::Usage::now()?;
            let busy = cm.busy();
            let report = live_load(&cm, opts, rate, curve.len() as u64 + 1).await;
            let used = start.since()?;
            let (manager, links) = cm.busy();
            let n = report.offered.max(1) as f64;
            let cost = LiveCost {
                parks: used.parks as f64 / n,
                cpu_us: used.cpu / n * 1e6,
                manager_us: (manager - busy.0).as_secs_f64() / n * 1e6,
                links_us: (links - busy.1).as_secs_f64() / n * 1e6,
            };
            say(&format!(
                "live xbind T={t} at {rate:.0}/s: {:.0} setups/s, mean {:.3} ms, {} failed",
                report.setups_per_s, report.mean_setup_ms, report.failed
            ));
            let light = curve
                .first()
                .map_or(report.mean_setup_ms, |(_, r, _)| r.mean_setup_ms);
            // Past saturation: it stops carrying what is offered, its latency is far
            // past light load's, or more than 1% of the calls fail.
            let refused = (report.failed + report.blocked) as f64;
            let saturated = report.setups_per_s < 0.9 * rate
                || report.mean_setup_ms > 10.0 * light
                || refused > 0.01 * report.offered as f64;
            curve.push((rate, report, cost));
            if saturated {
                break;
            }
            rate = (rate * 1.5).round();
        }
        cm.shutdown().await;
        lab.audit(&format!("xbind T={t}")).await?;
        curves.push((t, curve));
    }
    let passes = live_passes(opts, lab, &curves, say).await?;
    Ok((m, curves, passes))
}

/// The simulated xbind manager of T = `t`: the live one's ([`manager`]), its flush and
/// its caches, not the model's defaults.
fn sim_manager(t: u32) -> String {
    let live = crate::launch::xbind_config(t);
    format!(
        r#"{{ kind = "xbind", threshold = {t}, flush = "{} ms", cache_fill = {}, cache_low = {}, cache_max = {} }}"#,
        FLUSH.as_millis(),
        live.cache_fill,
        live.cache_low,
        live.cache_max
    )
}

/// The simulated curve of xbind T = `t` at `rates`, a point per rate.
fn simulate(
    t: u32,
    rates: &[f64],
    profile: &Path,
    replications: u32,
    seconds: f64,
) -> Result<Vec<SimPoint>, LabError> {
    let list: Vec<String> = rates.iter().map(|r| format!("\"{r} /s\"")).collect();
    let text = format!(
        r#"model = "control"
[run]
duration = "{seconds} s"
warmup = "{warmup} s"
replications = {replications}
seed = 1
[params]
topology = "topologies/line3.toml"
manager = {manager}
arrival = {{ kind = "poisson", rate = "1 /s" }}
holding = {{ kind = "exponential", mean = "{hold} ms" }}
pcr = "10 /s"
pairs = ["a:b"]
profile = {{ file = {file:?} }}
[sweep]
"arrival.rate" = [{rates}]
"#,
        warmup = (seconds / 5.0).max(0.2),
        manager = sim_manager(t),
        hold = HOLDING.as_millis(),
        file = profile.display().to_string(),
        rates = list.join(", ")
    );
    let s = Scenario::parse("the twin check", &text, &[])?;
    let r = runner::run(
        &s,
        &ControlKind,
        &RunOptions {
            threads: 0,
            progress: None,
        },
    )?;
    r.points
        .iter()
        .map(|p| {
            let get = |k: &str| {
                p.metrics
                    .iter()
                    .find(|(m, _)| m == k)
                    .map(|(_, e)| *e)
                    .ok_or_else(|| LabError::run("the twin check", format!("no metric {k}")))
            };
            Ok(SimPoint {
                setups: get("setups_per_s")?,
                latency: get("mean_setup_latency")?,
                processors: get("processor_utilisation")?,
                manager: get("manager_utilisation")?,
                offered: get("offered_per_s")?,
            })
        })
        .collect()
}

/// The simulated columns of a curve's table: setups/s, mean latency and its interval.
fn sim_columns() -> [Column; 3] {
    [
        Column::new("simulated setups/s", "sim_setups_per_s")
            .right()
            .fixed(0, 1),
        Column::new("simulated mean (ms)", "sim_latency_ms")
            .right()
            .fixed(3, 4),
        Column::new("± (ms)", "sim_latency_ci95_ms")
            .right()
            .fixed(3, 4),
    ]
}

/// What a thread's park costs in this runtime, read from the generator's probes: its
/// CPU per call against its parks per call over the rates, a line fitted by Theil and
/// Sen (the median of the slopes between every two rates, robust to the lightest
/// rates' cold work) and its intercept (the median of what each rate leaves), in
/// microseconds. `None` with fewer than three rates.
pub fn park_cost(g: &[GeneratorCost]) -> Option<(f64, f64)> {
    if g.len() < 3 {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, a) in g.iter().enumerate() {
        for b in &g[i + 1..] {
            if (b.parks - a.parks).abs() > 1e-9 {
                slopes.push((b.cpu_us - a.cpu_us) / (b.parks - a.parks));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let slope = verdict::median(slopes);
    let intercept = verdict::median(g.iter().map(|x| x.cpu_us - slope * x.parks).collect());
    Some((slope, intercept))
}

/// A table of simulated points without a live one beside them.
fn sim_only_table(points: &[SimOnly]) -> Table {
    let mut table = Table::new(
        [
            Column::new("T", "threshold"),
            Column::new("offered (calls/s)", "rate").right(),
        ]
        .into_iter()
        .chain(sim_columns()),
    );
    for p in points {
        table.row(crate::cells![
            u64::from(p.threshold),
            p.rate,
            p.setups_per_s.mean,
            p.latency_s.mean * 1e3,
            p.latency_s.ci95 * 1e3,
        ]);
    }
    table
}

/// `README.md`, `curves.csv`, `verdicts.csv` and `measured.toml` in `out`.
pub fn write_report(out: &Path, r: &TwinResults) -> Result<(), LabError> {
    let mut table = Table::new(
        [
            Column::new("T", "threshold"),
            Column::new("offered (calls/s)", "rate").right(),
            Column::new("live setups/s", "live_setups_per_s")
                .right()
                .fixed(0, 1),
            Column::new("live mean (ms)", "live_latency_ms")
                .right()
                .fixed(3, 4),
            Column::new("live parks a call", "live_parks")
                .right()
                .fixed(2, 3),
            Column::new("live CPU a call (us)", "live_cpu_us")
                .right()
                .fixed(1, 2),
        ]
        .into_iter()
        .chain(sim_columns())
        .chain([
            Column::new("simulated CPU a call (us)", "sim_cpu_us")
                .right()
                .fixed(1, 2),
            Column::new("live manager task a call (us)", "live_manager_us")
                .right()
                .fixed(1, 2),
            Column::new("live link tasks a call (us)", "live_links_us")
                .right()
                .fixed(1, 2),
            Column::new("simulated manager a call (us)", "sim_manager_us")
                .right()
                .fixed(1, 2),
        ]),
    );
    for p in &r.points {
        table.row(crate::cells![
            u64::from(p.threshold),
            p.rate,
            p.live_setups_per_s,
            p.live_latency_s * 1e3,
            p.live_parks,
            p.live_cpu_us,
            p.sim_setups_per_s.mean,
            p.sim_latency_s.mean * 1e3,
            p.sim_latency_s.ci95 * 1e3,
            p.sim_cpu_us,
            p.live_manager_us,
            p.live_links_us,
            p.sim_manager_us,
        ]);
    }
    crate::report::write(out, "curves.csv", &table.csv())?;
    let mut passes = Table::new([
        Column::new("T", "threshold"),
        Column::new("pass", "pass").right(),
        Column::new("offered (calls/s)", "rate").right(),
        Column::new("live setups/s", "setups_per_s")
            .right()
            .fixed(0, 1),
        Column::new("live mean (ms)", "latency_ms")
            .right()
            .fixed(3, 4),
    ]);
    for p in &r.passes {
        passes.row(crate::cells![
            u64::from(p.threshold),
            p.pass as u64,
            p.rate,
            p.setups_per_s,
            p.latency_s * 1e3,
        ]);
    }
    crate::report::write(out, "passes.csv", &passes.csv())?;
    let beyond = sim_only_table(&r.sim_beyond);
    crate::report::write(out, "sim_beyond.csv", &beyond.csv())?;
    let charged = sim_only_table(&r.charged);
    crate::report::write(out, "charged.csv", &charged.csv())?;
    let mut generator = Table::new([
        Column::new("offered (calls/s)", "rate").right(),
        Column::new("CPU a call (us)", "cpu_us").right().fixed(1, 2),
        Column::new("parks a call", "parks").right().fixed(2, 3),
        Column::new("share of a core", "cores").right().fixed(3, 4),
    ]);
    for g in &r.generator {
        generator.row(crate::cells![
            g.rate,
            g.cpu_us,
            g.parks,
            g.rate * g.cpu_us * 1e-6
        ]);
    }
    crate::report::write(out, "generator.csv", &generator.csv())?;
    // The toolkit's table is the papers'; here the reference is the live system.
    let verdicts = verdicts(r).write(out)?.replacen(
        "| Paper's item | Paper | atmlab (95% CI) |",
        "| Item | Live | Simulated (95% CI) |",
        1,
    );
    let m = &r.measurement;
    let park = match (park_cost(&r.generator), m.round_trips.first()) {
        (Some((slope, intercept)), Some(&(_, _, lone))) => {
            let wakes = m.lone_parks * slope;
            format!(
                "\n\nWhat a park costs in this runtime, from these probes (CPU a call against \
                 parks a call, Theil-Sen over {} rates): {slope:.1} us, and {intercept:.1} us \
                 a call besides. At that price a lone exchange's {:.2} parks are {wakes:.0} us \
                 of its {lone:.0} us of CPU; what is left, shared by its four ends, is \
                 {:.1} us a message: a reading of `awake_message` taken from another \
                 workload's parks (a sleeping pacer and idle workers, not a wake from \
                 `epoll` on an answer), reported and not used.",
                r.generator.len(),
                m.lone_parks,
                ((lone - wakes) / 4.0).max(0.0)
            )
        }
        _ => String::new(),
    };
    let mut knees = String::new();
    for t in THRESHOLDS {
        let show =
            |k: Option<f64>| k.map_or("beyond the sweep".to_owned(), |k| format!("{k:.0} calls/s"));
        let samples = live_knees(r, t);
        let (live, sim) = (median_knee(&samples), knee(&sim_curve(r, t)));
        let full = knee(&charged_curve(r, t));
        let ratio = |k: Option<f64>| match (live, k) {
            (Some(l), Some(s)) => format!(" ({:.2} of the live one)", s / l),
            _ => String::new(),
        };
        let each: Vec<String> = samples.iter().map(|&k| show(k)).collect();
        knees.push_str(&format!(
            "- xbind T={t}: live knee {} (the median of the sweep's and the passes': {}); \
             simulated {}{}, or {}{} with `awake_message` charged in full.\n",
            show(live),
            each.join(", "),
            show(sim),
            ratio(sim),
            show(full),
            ratio(full)
        ));
    }
    let text = format!(
        "# The twin check: the simulated control plane against the live one\n\n\
         Written by `atmlab sim twin`. The live xbind manager (T = 1 and T = 4, flush after \
         {flush} ms, calls held {hold} ms on average) on the line of three switches, and \
         its core in virtual time at the `measured` profile taken one operation at a time \
         from the same network ([measured.toml](measured.toml)), with the call \
         generator's work measured at each rate. The simulated curves are predictions; the \
         criteria are in `atmlab_lab::twin`.\n\n\
         {verdicts}\n\n{knees}\n\
         How to read a miss: the profile's work is measured in process and in trains of \
         commands, and its wake-up (the delay before an idle server starts, holding no \
         processor) is the one number fitted, to the live setup one call at a time, back \
         to back; what a wake-up adds after the machine has been quiet (`idle_wake`) is \
         measured one call at a time after quiet gaps, and charged to a wake-up that \
         finds the processors quiet, by how long they have been (most of the light \
         load's mean); the simulated knee follows from those and the profile's structure \
         alone. A \
         simulated knee later than the live one means the live system spends work the \
         profile does not charge (what a message costs a server on busy processors is \
         not measured: the knees are given both waiving and charging it); an earlier one, that the live work per \
         command under load is less than a train of sixty-four shows (longer trains, fewer \
         system calls). Both are readings, not measured here. Past its \
         knee the simulated manager's backlog grows, calls waiting for their setup hold \
         identifiers, and new calls are refused (the simulated blocking climbs), so what it \
         carries falls (a setup-age guard is the issue \
         \"The live paths at the speed of the machine\").\n\n\
         ## The profile\n\n```\n{provenance}```\n\n## The curves\n\n{curves}\n\n\
         The CPU a call: live, the process's (servers and generator) over the calls \
         offered; simulated, the shared processors' time worked \
         (`processor_utilisation`, the generator's `client_work` included), which holds \
         the threads' wakes only as `per_message` does (a lone exchange's CPU, wakes and \
         all, over its messages; `wakeup` and `idle_wake` are delays that hold no \
         processor). Where the two agree and the latencies do not, the model does the live work and \
         misses where a call waits for it. The tasks a call: the live manager's task's \
         and its three links' tasks' time in their polls (wall time, read at each poll's \
         start and end), against the simulated manager's busy time (its steps; with \
         `links`, a message's marshalling is its link's, charged to the shared \
         processors).\n\n\
         ## The live passes after the sweeps\n\n\
         Each knee's live samples beyond the sweep's: every T offered the last three rates \
         of its sweep again, one T after another. A pass's knee reads its curve as the \
         sweep's points below these rates followed by the pass's own.\n\n{passes}\n\n\
         ## The simulated curves past the live sweeps\n\n\
         The live sweep stops once the live manager saturates; the simulation goes on \
         {beyond_n} rates further, each half again the one before, so that a simulated \
         knee later than the live one is found rather than left beyond the sweep.\n\n\
         {beyond}\n\n\
         ## The call generator's own work\n\n\
         The live calls come from a generator in the same process, on the same cores, \
         pacing each arrival precisely (an OS thread sleeping to each Poisson instant). \
         Its work per call, measured apart at each rate simulated against a target that \
         answers at once, is charged to the simulated processors at that rate \
         (`client_work`): the servers lose what it takes. With the target idle the \
         runtime's workers park between calls more than under load, so this reads it high \
         by the wakes a busy runtime saves. The curves give the live process's parks a \
         call at each rate (generator and servers together) beside these.\n\n\
         {generator}{park}\n\n\
         ## The simulated curves with a message's whole cost charged on busy processors\n\n\
         The profile waives `per_message` for a message that finds its server idle while \
         every processor works (`awake_message` = 0: a worker already awake takes it up, \
         no thread is woken). What such a message still costs (its own socket read and \
         frame, not shared with others in hand) is not measured: a lone exchange's CPU \
         is mostly its threads' wakes, but how much is not known (the profile's \
         readings). These curves charge it in full (`awake_message` = `per_message`), the \
         other bound; the knees above give both. Neither is fitted to the live curve, and \
         neither is the check's prediction beyond the verdicts, which use the profile as \
         measured.\n\n{charged}\n",
        flush = FLUSH.as_millis(),
        hold = HOLDING.as_millis(),
        provenance = m.provenance(),
        curves = table.markdown(),
        passes = passes.markdown(),
        beyond_n = SIM_BEYOND,
        beyond = beyond.markdown(),
        charged = charged.markdown(),
        generator = generator.markdown()
    );
    crate::report::write(out, "README.md", &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(mean: f64) -> Estimate {
        Estimate {
            mean,
            ci95: mean * 0.01,
            n: 3,
        }
    }

    fn results(sim_scale: f64) -> TwinResults {
        let curve = [
            (100.0, 1.0e-3),
            (200.0, 1.1e-3),
            (400.0, 1.5e-3),
            (800.0, 6.0e-3),
        ];
        TwinResults {
            measurement: Measurement {
                profile: CostProfile::named("fast").unwrap(),
                round_trips: vec![],
                lone_parks: 2.0,
                wake_us: 1.0,
                train: (64, 1.0),
                switch_command_us: 1.0,
                route_us: 1.0,
                manager_step_us: 1.0,
                live_setup_ms: 1.0,
                lone_tasks_us: (1.0, 1.0),
                quiet_setups: vec![(1.0, 1.5)],
                sim_setup_ms: 1.0,
                calls: 1,
            },
            points: curve
                .iter()
                .map(|&(rate, lat)| CurvePoint {
                    threshold: 1,
                    rate,
                    live_setups_per_s: rate,
                    live_latency_s: lat,
                    live_parks: 0.0,
                    live_cpu_us: 0.0,
                    sim_setups_per_s: est(rate),
                    sim_latency_s: est(lat * sim_scale),
                    sim_cpu_us: 0.0,
                    live_manager_us: 0.0,
                    live_links_us: 0.0,
                    sim_manager_us: 0.0,
                })
                .collect(),
            passes: Vec::new(),
            sim_beyond: Vec::new(),
            charged: Vec::new(),
            generator: Vec::new(),
            tolerance: 0.15,
        }
    }

    /// The knee is the last upward crossing of five times the smallest latency; a
    /// falling start (an aggregator's flush wait) and a blip below it do not count.
    #[test]
    fn the_knee_is_interpolated() {
        let k = knee(&[
            (100.0, 3.0),
            (200.0, 1.0),
            (400.0, 6.0),
            (800.0, 1.5),
            (1600.0, 9.0),
        ]);
        let k = k.unwrap();
        assert!((k - (800.0 + 800.0 * 3.5 / 7.5)).abs() < 1e-9, "{k}");
        assert_eq!(knee(&[(100.0, 1.0), (200.0, 4.9)]), None);
        assert_eq!(knee(&[(100.0, 1.0), (200.0, f64::NAN)]), Some(200.0));
    }

    /// The live knee is the median of the sweep's and the passes': one slow pass (or
    /// one lucky sweep) does not move it, two do.
    #[test]
    fn the_live_knee_is_the_median_of_the_samples() {
        let knee_item = "xbind T=1: the knee (calls/s)";
        let pass = |pass: usize, lat: [f64; 3]| {
            [200.0, 400.0, 800.0]
                .iter()
                .zip(lat)
                .map(move |(&rate, l)| PassPoint {
                    threshold: 1,
                    pass,
                    rate,
                    setups_per_s: rate,
                    latency_s: l,
                })
        };
        let mut r = results(1.0);
        // The sweep's knee: 400 + 400 x 3.5/4.5 = 711. One pass whose knee comes
        // early (its 400 point already past 5 x 1 ms: 200 + 200 x 3.9/4.9 = 359) and
        // one like the sweep: the median is the sweep's.
        r.passes = pass(1, [1.1e-3, 6.0e-3, 9.0e-3])
            .chain(pass(2, [1.1e-3, 1.5e-3, 6.0e-3]))
            .collect();
        let knees = live_knees(&r, 1);
        assert_eq!(knees.len(), 3);
        let sweep = knees[0].unwrap();
        assert!((knees[2].unwrap() - sweep).abs() < 1e-9, "{knees:?}");
        assert!(knees[1].unwrap() < 400.0, "{knees:?}");
        assert_eq!(median_knee(&knees), Some(sweep));
        let v = verdicts(&r);
        assert_eq!(v.verdict(knee_item), Some(Verdict::Reproduces), "{v:?}");
        assert!(v.get(knee_item).unwrap().paper.contains("samples"), "{v:?}");
        // Both passes early: the median moves, and the simulated knee (the sweep's
        // shape) is now late.
        r.passes = pass(1, [1.1e-3, 6.0e-3, 9.0e-3])
            .chain(pass(2, [1.1e-3, 7.0e-3, 9.0e-3]))
            .collect();
        assert_eq!(verdicts(&r).verdict(knee_item), Some(Verdict::Differs));
        // Most samples never crossing: no live knee, undecided.
        assert_eq!(median_knee(&[Some(1.0), None, None]), None);
        assert_eq!(median_knee(&[Some(1.0), Some(3.0), None]), Some(2.0));
    }

    /// A simulated curve that has not crossed within the live sweep is followed past
    /// it: its knee is found there, and judged late.
    #[test]
    fn the_simulated_knee_is_found_past_the_live_sweep() {
        let knee_item = "xbind T=1: the knee (calls/s)";
        let mut r = results(1.0);
        // Flat to the sweep's end: no simulated knee there.
        r.points[3].sim_latency_s = est(1.5e-3);
        assert_eq!(verdicts(&r).verdict(knee_item), Some(Verdict::Undecided));
        r.sim_beyond = [(1200.0, 2.0e-3), (1800.0, 8.0e-3)]
            .iter()
            .map(|&(rate, l)| SimOnly {
                threshold: 1,
                rate,
                setups_per_s: est(rate),
                latency_s: est(l),
            })
            .collect();
        // Crossing 5 ms between 1,200 and 1,800: 1,200 + 600 x 3/6 = 1,500, against the
        // live 711: late by more than the tolerance.
        let sim = knee(&sim_curve(&r, 1)).unwrap();
        assert!((sim - 1500.0).abs() < 1e-9, "{sim}");
        let v = verdicts(&r);
        assert_eq!(v.verdict(knee_item), Some(Verdict::Differs), "{v:?}");
        // The points past the live sweep are not judged on latency: there is no live one.
        assert_eq!(
            v.verdict("xbind T=1 at 1200 calls/s: mean setup (ms)"),
            None
        );
    }

    /// Change the simulated numbers, the verdicts follow.
    #[test]
    fn verdicts_follow_the_numbers() {
        let v = verdicts(&results(1.0));
        let below = "xbind T=1 at 200 calls/s: mean setup (ms)";
        let knee = "xbind T=1: the knee (calls/s)";
        assert_eq!(v.verdict(below), Some(Verdict::Reproduces), "{v:?}");
        assert_eq!(v.verdict(knee), Some(Verdict::Reproduces), "{v:?}");
        // The point past the live knee is not judged on latency.
        assert_eq!(v.verdict("xbind T=1 at 800 calls/s: mean setup (ms)"), None);
        let v = verdicts(&results(1.3));
        assert_eq!(v.verdict(below), Some(Verdict::Differs), "{v:?}");
        // Every simulated point scaled alike keeps the knee where it was.
        assert_eq!(v.verdict(knee), Some(Verdict::Reproduces), "{v:?}");
        let mut r = results(1.0);
        r.points[2].sim_latency_s = est(5.5e-3);
        assert_eq!(verdicts(&r).verdict(knee), Some(Verdict::Differs));
    }

    /// A park's cost is the slope of the generator's CPU over its parks, robust to one
    /// rate's cold work; fewer than three rates give none.
    #[test]
    fn a_parks_cost_is_the_robust_slope_of_the_generators_probes() {
        let g = |parks: f64, cpu_us: f64| GeneratorCost {
            rate: 1.0,
            cpu_us,
            parks,
        };
        let mut probes: Vec<GeneratorCost> = [0.2, 0.5, 1.0, 2.0, 3.0]
            .iter()
            .map(|&p| g(p, 2.0 + 16.0 * p))
            .collect();
        probes.push(g(4.0, 160.0));
        let (slope, intercept) = park_cost(&probes).unwrap();
        assert!((slope - 16.0).abs() < 1e-9, "{slope}");
        assert!((intercept - 2.0).abs() < 1e-9, "{intercept}");
        assert_eq!(park_cost(&probes[..2]), None);
    }
}
