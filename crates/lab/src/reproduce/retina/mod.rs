//! `atmlab reproduce retina`: paper 001's measurements, repeated on a live chain of
//! switch servers on loopback (mutual TLS unless `--insecure`), with the paper's numbers
//! beside ours.
//!
//! - §4.3: connection setup time against the number of switches crossed (1 to 8), one
//!   call at a time (latency, not throughput), for TINA with sequential sub-connection
//!   setup (Alcin's behaviour: 28 ms for one switch, about 44 ms across three), TINA
//!   with parallel sub-connection setup (what the paper asks for), and the xbind manager;
//!   and the remote invocations each setup makes, by interface.
//! - §3.3-3.6: the cost of one switch operation (a commit, a release) through gRPC (the
//!   ORB), the raw TCP protocol (the socket interface), a gRPC proxy relaying to the raw
//!   protocol (the hybrid of §3.4), and SNMP-like per-attribute operations (one UDP
//!   request/response per attribute of the cross-connect row, §3.6).
//!
//! - §4.3 in the simulator (`sim`): the same TINA cores in virtual time at the
//!   `paper-001` costs (Table 3.3's cost per invocation), one and three switches,
//!   sequential and parallel, the EML-CP remote or co-located.
//!
//! Nothing is fitted to the paper: the machine is far faster per invocation than the
//! paper's, so the live comparison is of shapes (growth with path length, ratios between
//! interfaces), not of milliseconds; the simulated rows compare milliseconds at a cost
//! per invocation taken from Table 3.3, never from §4.3.
//!
//! The report (`README.md`, its CSVs and figures) is built with [`crate::report`]; its
//! prose is `templates/retina.md`.

use std::path::{Path, PathBuf};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use atmlab_control::cm::routes::CachedRouter;
use atmlab_control::net::Topology;
use atmlab_control::tina::{Counts, SetupMode, TinaConfig};
use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::convert as cv;
use atmlab_fabric::live::grpc::{GrpcSwitch, SwitchService};
use atmlab_fabric::live::raw::RawClient;
use atmlab_fabric::switch::{Atomicity, Branch, Command, Commit, ConnectionKind, Release, Reply};
use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1 as pb;
use atmlab_sim::plot::{PlotSpec, Series};
use atmlab_sim::stats::{Estimate, student_t_quantile};
use hdrhistogram::Histogram;
use minijinja::context;
use serde_json::json;

use super::Experiments;
use crate::launch::{Lab, ROUTE_CACHE_TTL, route_ports};
use crate::report::{self, Column, Format, SeriesSet, Table, Value, plot, write};
use crate::{LabError, cells};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../../templates/retina.md");

/// The longest path measured (switches crossed).
pub const MAX_PATH: usize = 8;

/// The round trip of the emulation of the paper's ORB costs, added to every remote
/// invocation of the second sweep ([`TinaConfig::invocation_delay`]). Not the paper's
/// number (its 2 ms per Orbix invocation was mostly the ORB's CPU time): ours, chosen
/// long against this machine's own time per invocation (up to several ms in a debug
/// build on two busy cores) and the timer's 1 ms rounding, so that waiting, not
/// computing, dominates, as it did in the paper. Results are compared with the paper in
/// units of this cost (invocations' worth per switch), never in milliseconds.
pub const EMULATED_RTT: StdDuration = StdDuration::from_millis(20);

/// What to run.
#[derive(Debug, Clone)]
pub struct RetinaOptions {
    /// Where the report goes (`reports/retina`).
    pub out: PathBuf,
    /// Certificates and state (`atmlab-data`).
    pub data_dir: PathBuf,
    /// Plain text instead of mutual TLS.
    pub insecure: bool,
    /// The short form: fewer calls per point.
    pub quick: bool,
}

/// A chain of `n` switches: s1 .. sN, s_k's port 2 to s_{k+1}'s port 1; host `a` on
/// s1's port 3 and host `h_k` on s_k's port 0, so a call a -> h_L crosses L switches.
pub fn chain_topology(n: usize) -> Result<Topology, LabError> {
    let mut t = String::from(
        "name = \"retina-chain\"\n[defaults]\nlink_rate = \"622.08 Mb/s\"\nbuffer_cells = 4096\nvci = [32, 65535]\n",
    );
    for k in 1..=n {
        t.push_str(&format!("[[switch]]\nname = \"s{k}\"\nports = 4\n"));
    }
    for k in 1..n {
        t.push_str(&format!("[[link]]\na = \"s{k}:2\"\nb = \"s{}:1\"\n", k + 1));
    }
    t.push_str("[[host]]\nname = \"a\"\nat = \"s1:3\"\n");
    for k in 1..=n {
        t.push_str(&format!("[[host]]\nname = \"h{k}\"\nat = \"s{k}:0\"\n"));
    }
    Ok(Topology::parse(&t, "the retina chain")?)
}

/// Setup time and invocations of one manager at one path length.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupPoint {
    /// "tina sequential", "tina parallel", "xbind T=1".
    pub manager: String,
    /// Switches crossed.
    pub switches: usize,
    /// Calls measured.
    pub calls: u64,
    /// Setup latency, ms: mean, median, 99th percentile.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Remote invocations per setup, by interface (xbind: "cm->switch", the messages).
    pub invocations: Counts,
    /// Every setup time measured, ms, in order (the intervals are computed from them).
    pub samples_ms: Vec<f64>,
}

impl SetupPoint {
    /// The mean setup time, ms, with its 95% interval over the setups.
    pub fn mean(&self) -> Estimate {
        Estimate::from_samples(&self.samples_ms)
    }

    /// Remote invocations per setup, all interfaces.
    pub fn total_invocations(&self) -> f64 {
        self.invocations.values().sum::<u64>() as f64 / self.calls.max(1) as f64
    }
}

/// One row of the §3 table: a way of reaching the switch.
#[derive(Debug, Clone, PartialEq)]
pub struct InterfaceRow {
    /// "gRPC", "raw TCP", "gRPC proxy -> raw TCP", "SNMP-like (per attribute)".
    pub interface: String,
    /// Whether every hop ran over mutual TLS.
    pub tls: bool,
    /// Connections created and deleted.
    pub pairs: u64,
    /// Remote invocations per create + delete.
    pub invocations_per_pair: u32,
    /// Operations (creates or deletes) per second, one at a time.
    pub ops_per_s: f64,
    /// Median time of one create + delete, µs.
    pub p50_pair_us: f64,
    /// Mean time of one create + delete, µs, with its 95% interval.
    pub pair_us: Estimate,
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct RetinaResults {
    /// Setup time against path length.
    pub setup: Vec<SetupPoint>,
    /// Invocations per setup at the longest path for each hierarchy depth (mode, depth,
    /// per interface).
    pub depths: Vec<(String, u32, Counts)>,
    /// The switch interface table.
    pub interfaces: Vec<InterfaceRow>,
    /// The simulated rows: the same TINA cores in virtual time at the paper-001 costs.
    pub sim: Vec<SimPoint>,
    /// The short form.
    pub quick: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// The least-squares slope of y against x.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// The least-squares slope of y against x with the half-width of its 95% interval
/// (Student t on n - 2 degrees of freedom over the residuals); NaN half-width below
/// three points.
pub fn slope_estimate(points: &[(f64, f64)]) -> Estimate {
    let b = slope(points);
    let n = points.len();
    if n < 3 {
        return Estimate {
            mean: b,
            ci95: f64::NAN,
            n: n as u64,
        };
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let a = my - b * mx;
    let ssr: f64 = points.iter().map(|p| (p.1 - a - b * p.0).powi(2)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let se = if sxx == 0.0 {
        f64::NAN
    } else {
        (ssr / (nf - 2.0) / sxx).sqrt()
    };
    Estimate {
        mean: b,
        ci95: student_t_quantile(0.975, nf - 2.0) * se,
        n: n as u64,
    }
}

impl RetinaResults {
    /// The slope of median setup time (ms per switch) of a manager over path length.
    pub fn slope_of(&self, manager: &str) -> f64 {
        let pts: Vec<(f64, f64)> = self
            .setup
            .iter()
            .filter(|p| p.manager == manager)
            .map(|p| (p.switches as f64, p.p50_ms))
            .collect();
        slope(&pts)
    }

    /// The slope (ms per switch) of a manager's setup times over path length, fitted to
    /// every setup measured, with its 95% interval.
    pub fn slope_estimate_of(&self, manager: &str) -> Estimate {
        let pts: Vec<(f64, f64)> = self
            .setup
            .iter()
            .filter(|p| p.manager == manager)
            .flat_map(|p| p.samples_ms.iter().map(|&y| (p.switches as f64, y)))
            .collect();
        slope_estimate(&pts)
    }

    /// A manager's point at `switches`.
    pub fn point(&self, manager: &str, switches: usize) -> Option<&SetupPoint> {
        self.setup
            .iter()
            .find(|p| p.manager == manager && p.switches == switches)
    }

    /// The §3 row whose interface name starts with `prefix`, under that security.
    pub fn interface(&self, prefix: &str, tls: bool) -> Option<&InterfaceRow> {
        self.interfaces
            .iter()
            .find(|i| i.interface.starts_with(prefix) && i.tls == tls)
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::run("the retina reproduction", format!("{what}: {e}"))
}

fn cbr() -> TrafficDescriptor {
    TrafficDescriptor::cbr(CellRate(10.0))
}

fn cell_qos() -> pb::CellQos {
    pb::CellQos {
        traffic: Some(cv::pb_traffic(&cbr(), 0.0)),
        ..Default::default()
    }
}

struct Hist {
    h: Histogram<u64>,
    sum: u128,
    n: u64,
    /// Every sample, ms (a few thousand at most).
    samples_ms: Vec<f64>,
}

impl Hist {
    fn new() -> Result<Self, LabError> {
        Ok(Hist {
            h: Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| err("histogram", e))?,
            sum: 0,
            n: 0,
            samples_ms: Vec::new(),
        })
    }
    fn record(&mut self, d: StdDuration) {
        let ns = (d.as_nanos() as u64).clamp(1, 60_000_000_000);
        let _ = self.h.record(ns);
        self.sum += u128::from(ns);
        self.n += 1;
        self.samples_ms.push(d.as_secs_f64() * 1e3);
    }
    fn mean_ms(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64 / 1e6
        }
    }
    fn q_ms(&self, q: f64) -> f64 {
        self.h.value_at_quantile(q) as f64 / 1e6
    }
}

fn delta(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// The experiments of [`run`]: two sweeps of setup latency (as the machine is, then with
/// the paper's ORB round trip), invocations by depth, the switch's interfaces, and the
/// simulated rows.
const EXPERIMENTS: usize = 5;

/// Runs the reproduction on a fresh chain; `say` hears progress lines.
pub async fn run(
    opts: &RetinaOptions,
    mut say: impl FnMut(&str),
) -> Result<RetinaResults, LabError> {
    let started = StdInstant::now();
    let mut experiments = Experiments::new("retina", EXPERIMENTS);
    let lab = Lab::up_with(
        chain_topology(MAX_PATH)?,
        &opts.data_dir,
        opts.insecure,
        &mut say,
    )
    .await?;
    let mut results = lab
        .within(async |lab| run_on(opts, lab, &mut say, &mut experiments).await)
        .await?;
    // The simulated rows, once the live lab is down (a second or so of CPU).
    experiments.start("the simulated rows (the paper's costs)");
    results.sim = sim::run()?;
    for p in &results.sim {
        say(&format!(
            "{:>48} over {} switch(es): mean {} ms, {:.1} invocations per call",
            p.label(),
            p.switches,
            crate::report::verdict::show(&p.setup_ms),
            p.invocations
        ));
    }
    results.seconds = started.elapsed().as_secs_f64();
    write_report(&opts.out, &results)?;
    Ok(results)
}

fn identity(
    opts: &RetinaOptions,
    role: atmlab_rpc::tls::Role,
    name: &str,
) -> Result<Option<TlsIdentity>, LabError> {
    if opts.insecure {
        return Ok(None);
    }
    let dir = opts.data_dir.join("certs");
    atmlab_rpc::tls::ensure_certs(&dir, &[atmlab_rpc::tls::Subject::new(role, name)])?;
    Ok(Some(atmlab_rpc::tls::TlsFiles::in_dir(&dir, name).load()?))
}

/// What the §3 clients expect of the server they measure: a switch server (s1, or the
/// proxy in front of it, which serves with s1's certificate).
fn a_switch() -> atmlab_rpc::tls::Expect {
    atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch)
}

async fn run_on(
    opts: &RetinaOptions,
    lab: &Lab,
    say: &mut impl FnMut(&str),
    experiments: &mut Experiments,
) -> Result<RetinaResults, LabError> {
    // The TINA deployment is a manager: the role cm, named for its owner.
    let tina_id = identity(opts, atmlab_rpc::tls::Role::Cm, "tina")?;
    let mut setup = Vec::new();
    let all: Vec<usize> = (1..=MAX_PATH).collect();
    // The headline sweep: the machine as it is, nothing injected; then the emulation of
    // the paper's ORB costs (a round trip added to every remote invocation).
    // (delay, path lengths, calls measured, calls to warm up first)
    let sweeps: [(StdDuration, Vec<usize>, usize, usize); 2] = if opts.quick {
        [
            (StdDuration::ZERO, vec![1, 4, 8], 10, 2),
            (EMULATED_RTT, vec![1, 2, 4, 6, 8], 5, 1),
        ]
    } else {
        [
            (StdDuration::ZERO, all.clone(), 200, 10),
            (EMULATED_RTT, all, 50, 5),
        ]
    };
    for (delay, lengths, calls, warm) in sweeps {
        experiments.start(&if delay.is_zero() {
            "§4.3 setup latency against path length, as the machine is".to_string()
        } else {
            format!(
                "§4.3 setup latency against path length, {} ms added per invocation",
                delay.as_secs_f64() * 1e3
            )
        });
        sweep(
            lab,
            tina_id.as_ref(),
            delay,
            &lengths,
            calls,
            warm,
            &mut setup,
            say,
        )
        .await?;
    }

    // Invocations per setup at the longest path, by depth of the hierarchy.
    experiments.start("invocations per setup by depth of the hierarchy");
    let mut depths = Vec::new();
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        for depth in 1..=3 {
            let config = TinaConfig {
                mode,
                depth,
                ..TinaConfig::default()
            };
            let tina = start_tina(lab, config, tina_id.as_ref()).await?;
            let before = tina.lnc.invocations();
            let c = tina
                .lnc
                .add("a", &format!("h{MAX_PATH}"), cell_qos(), "retina")
                .await;
            let after = tina.lnc.invocations();
            if let Ok(c) = &c {
                let _ = tina.lnc.delete(c.id).await;
            }
            tina.shutdown().await;
            lab.audit("tina").await?;
            c.map_err(|e| err("tina depth run", e.message()))?;
            depths.push((mode.name().to_string(), depth, delta(&after, &before)));
        }
    }

    // §3: one switch operation through each interface.
    experiments.start("§3: one switch operation through each interface");
    let interfaces = switch_interfaces(opts, lab, if opts.quick { 100 } else { 2000 }, say).await?;
    Ok(RetinaResults {
        setup,
        depths,
        interfaces,
        sim: Vec::new(),
        quick: opts.quick,
        seconds: 0.0,
    })
}

/// A TINA LNC (over its NML-CP and EML-CP hierarchy) on the lab's switches, routing
/// through a cache of the lab's route object.
async fn start_tina(
    lab: &Lab,
    config: TinaConfig,
    tls: Option<&TlsIdentity>,
) -> Result<atmlab_control::tina::lnc::Tina, LabError> {
    let router = CachedRouter::new(lab.route.clone(), ROUTE_CACHE_TTL);
    Ok(
        atmlab_control::tina::lnc::start(config, lab.clients.clone(), Box::new(router), tls)
            .await?,
    )
}

/// The manager's name in a sweep: bare as the machine is, marked with the emulated
/// ORB cost.
pub fn label(manager: &str, delay: StdDuration) -> String {
    if delay.is_zero() {
        manager.to_string()
    } else {
        format!("{manager}, emulated ORB {} ms", delay.as_millis())
    }
}

/// The co-located configuration's name (paper 001 §4.3: Alcin and the EML-CP in one
/// address space).
pub const COLOCATED: &str = "tina sequential, EML-CP co-located";

#[allow(
    clippy::too_many_arguments,
    reason = "one sweep's parameters, called twice"
)]
async fn sweep(
    lab: &Lab,
    tina_id: Option<&TlsIdentity>,
    delay: StdDuration,
    lengths: &[usize],
    calls: usize,
    warm: usize,
    setup: &mut Vec<SetupPoint>,
    say: &mut impl FnMut(&str),
) -> Result<(), LabError> {
    // §4.3: TINA, sequential and parallel.
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        let name = label(&format!("tina {}", mode.name()), delay);
        let config = TinaConfig {
            mode,
            invocation_delay: delay,
            ..TinaConfig::default()
        };
        let tina = start_tina(lab, config, tina_id).await?;
        let r = measure_tina(&tina.lnc, &name, lengths, calls, warm, say).await;
        tina.shutdown().await;
        lab.audit(&name).await?;
        setup.extend(r?);
    }
    // §4.3's co-located configuration: sequential, the EML-CPs in their NML-CP's address
    // space, at one switch (where the paper measured it) and the longest path.
    {
        let name = label(COLOCATED, delay);
        let config = TinaConfig {
            mode: SetupMode::Sequential,
            invocation_delay: delay,
            colocate_eml: true,
            ..TinaConfig::default()
        };
        let tina = start_tina(lab, config, tina_id).await?;
        let ends = [1, MAX_PATH];
        let r = measure_tina(&tina.lnc, &name, &ends, calls, warm, say).await;
        tina.shutdown().await;
        lab.audit(&name).await?;
        setup.extend(r?);
    }

    // xbind (paper 000), T = 1, its caches warmed on every port of the chain; the same
    // mean round trip added to its messages (a uniform delay up to it each way).
    {
        let name = label("xbind T=1", delay);
        let router = CachedRouter::new(lab.route.clone(), ROUTE_CACHE_TTL);
        let faults = (!delay.is_zero()).then(|| atmlab_control::cm::faults::FaultPlan {
            delay: 1.0,
            max_delay: delay.into(),
            ..Default::default()
        });
        let cm = atmlab_control::cm::live::start_with_faults(
            crate::launch::xbind_config(1),
            lab.clients.clone(),
            Box::new(router),
            faults,
        )
        .map_err(|e| err("starting xbind", e.message))?;
        let mut ports: Vec<(String, u16)> = Vec::new();
        for l in 1..=MAX_PATH {
            for p in route_ports(&lab.route, "a", &format!("h{l}")) {
                if !ports.contains(&p) {
                    ports.push(p);
                }
            }
        }
        cm.prefill(ports)
            .await
            .map_err(|e| err("warming the caches", e.message))?;
        let mut r = Ok(());
        for &l in lengths {
            let dest = format!("h{l}");
            let mut h = Hist::new()?;
            let mut msgs = 0u64;
            let mut held = Vec::new();
            for i in 0..warm + calls {
                let before = cm.status().await.map_err(|e| err(&name, e.message))?;
                let t0 = StdInstant::now();
                let call = match cm.add("a", &dest, cbr(), 0.0, "retina").await {
                    Ok(c) => c,
                    Err(e) => {
                        r = Err(err(&name, e.message));
                        break;
                    }
                };
                let dt = t0.elapsed();
                let after = cm.status().await.map_err(|e| err(&name, e.message))?;
                if i >= warm {
                    h.record(dt);
                    msgs += after.stats.messages - before.stats.messages;
                }
                held.push(call.view.id);
            }
            // Released together, as for tina.
            let mut set = tokio::task::JoinSet::new();
            for id in held.drain(..) {
                let cm = cm.clone();
                set.spawn(async move { cm.delete(id).await });
            }
            while let Some(d) = set.join_next().await {
                d.map_err(|e| err(&name, e))?
                    .map_err(|e| err(&name, e.message))?;
            }
            if r.is_err() {
                break;
            }
            let p = SetupPoint {
                manager: name.clone(),
                switches: l,
                calls: h.n,
                mean_ms: h.mean_ms(),
                p50_ms: h.q_ms(0.5),
                p99_ms: h.q_ms(0.99),
                invocations: [("cm->switch".to_string(), msgs)].into_iter().collect(),
                samples_ms: h.samples_ms.clone(),
            };
            say_point(say, &p);
            setup.push(p);
        }
        cm.shutdown().await;
        lab.audit(&name).await?;
        r?;
    }
    Ok(())
}

fn say_point(say: &mut impl FnMut(&str), p: &SetupPoint) {
    say(&format!(
        "{:>16} over {} switch(es): mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, {:.1} invocations per setup",
        p.manager,
        p.switches,
        p.mean_ms,
        p.p50_ms,
        p.p99_ms,
        p.total_invocations()
    ));
}

async fn measure_tina(
    lnc: &std::sync::Arc<atmlab_control::tina::lnc::Lnc>,
    name: &str,
    lengths: &[usize],
    calls: usize,
    warm: usize,
    say: &mut impl FnMut(&str),
) -> Result<Vec<SetupPoint>, LabError> {
    let mut out = Vec::new();
    for &l in lengths {
        let dest = format!("h{l}");
        let mut h = Hist::new()?;
        let mut inv = Counts::new();
        let mut held = Vec::new();
        for i in 0..warm + calls {
            let before = lnc.invocations();
            let t0 = StdInstant::now();
            let c = lnc
                .add("a", &dest, cell_qos(), "retina")
                .await
                .map_err(|e| err(name, e.message()))?;
            let dt = t0.elapsed();
            let after = lnc.invocations();
            if i >= warm {
                h.record(dt);
                atmlab_control::tina::merge(
                    &mut inv,
                    &delta(&after, &before).into_iter().collect(),
                );
            }
            held.push(c.id);
        }
        // Released together once the setups are measured: a release costs as much as a
        // setup, and doing them one by one in between would double the run for nothing
        // measured.
        let mut set = tokio::task::JoinSet::new();
        for id in held.drain(..) {
            let lnc = lnc.clone();
            set.spawn(async move { lnc.delete(id).await });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(|e| err(name, e))?
                .map_err(|e| err(name, e.message()))?;
        }
        let p = SetupPoint {
            manager: name.to_string(),
            switches: l,
            calls: h.n,
            mean_ms: h.mean_ms(),
            p50_ms: h.q_ms(0.5),
            p99_ms: h.q_ms(0.99),
            invocations: inv,
            samples_ms: h.samples_ms.clone(),
        };
        say_point(say, &p);
        out.push(p);
    }
    Ok(out)
}

// ----- §3: the switch interface ------------------------------------------------------------

/// The commit a §3 measurement creates (and then releases): s1, port 3 -> port 0, fixed
/// identifiers well away from what managers take.
fn probe_commit() -> Commit {
    Commit {
        kind: ConnectionKind::Vc,
        in_port: PortId(3),
        in_id: VcId::new(0, 60_000),
        branches: vec![Branch {
            port: PortId(0),
            id: VcId::new(0, 60_000),
        }],
        traffic: cbr(),
        clr: 0.0,
        buffer_cells: 0,
        owner: "retina-s3".into(),
        replenish: 0,
        tag: "retina §3".into(),
    }
}

async fn pairs_over<B: SwitchBackend>(backend: &B, n: u64) -> Result<Hist, LabError> {
    let mut h = Hist::new()?;
    for _ in 0..n {
        let t0 = StdInstant::now();
        let r = backend
            .execute(
                vec![Command::Commit(probe_commit())],
                Atomicity::AllOrNothing,
            )
            .await?;
        let connection = match r.into_iter().next() {
            Some(Ok(Reply::Committed { connection, .. })) => connection,
            other => return Err(err("§3 commit", format!("{other:?}"))),
        };
        backend
            .execute(
                vec![Command::Release(Release {
                    connection,
                    keep_reserved: false,
                })],
                Atomicity::AllOrNothing,
            )
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| err("§3 release", "no result"))??;
        h.record(t0.elapsed());
    }
    Ok(h)
}

fn row(interface: &str, tls: bool, invocations: u32, h: &Hist) -> InterfaceRow {
    InterfaceRow {
        interface: interface.into(),
        tls,
        pairs: h.n,
        invocations_per_pair: invocations,
        ops_per_s: if h.sum == 0 {
            0.0
        } else {
            2.0 * h.n as f64 / (h.sum as f64 / 1e9)
        },
        p50_pair_us: h.q_ms(0.5) * 1e3,
        pair_us: {
            let us: Vec<f64> = h.samples_ms.iter().map(|ms| ms * 1e3).collect();
            Estimate::from_samples(&us)
        },
    }
}

async fn switch_interfaces(
    opts: &RetinaOptions,
    lab: &Lab,
    n: u64,
    say: &mut impl FnMut(&str),
) -> Result<Vec<InterfaceRow>, LabError> {
    let admin = identity(opts, atmlab_rpc::tls::Role::Admin, "admin")?;
    let tls = admin.is_some();
    let sw = &lab.net.switches[0];
    let mut rows = Vec::new();
    // gRPC, the ORB.
    let grpc = GrpcSwitch::new(
        atmlab_rpc::channel_to(&sw.grpc_addr.to_string(), admin.as_ref(), a_switch()).await?,
    );
    pairs_over(&grpc, 10).await?;
    rows.push(row(GRPC, tls, 2, &pairs_over(&grpc, n).await?));
    // Raw TCP, the socket interface.
    let raw_addr = sw
        .raw_addr
        .ok_or_else(|| err("raw TCP", "s1 serves no raw interface"))?;
    let raw = raw_client(raw_addr, admin.as_ref()).await?;
    pairs_over(&raw, 10).await?;
    rows.push(row(RAW, tls, 2, &pairs_over(&raw, n).await?));
    // The hybrid: a gRPC proxy in front, relaying to the raw interface.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| err("the proxy", e))?;
    let proxy_addr = listener.local_addr().map_err(|e| err("the proxy", e))?;
    let upstream = raw_client(raw_addr, admin.as_ref()).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The proxy fronts s1, and serves as s1.
    let proxy_tls = identity(
        opts,
        atmlab_rpc::tls::Role::Switch,
        &sw.switch.describe_now().name,
    )?;
    let proxy = tokio::spawn(async move {
        atmlab_fabric::live::grpc::serve(
            listener,
            proxy_tls.as_ref(),
            SwitchService::new(upstream, None),
            async {
                let _ = stopped.await;
            },
        )
        .await
    });
    let via_proxy = GrpcSwitch::new(
        atmlab_rpc::channel_to(&proxy_addr.to_string(), admin.as_ref(), a_switch()).await?,
    );
    pairs_over(&via_proxy, 10).await?;
    let h = pairs_over(&via_proxy, n).await;
    let _ = stop.send(());
    let _ = proxy.await;
    rows.push(row(PROXY, tls, 4, &h?));
    // SNMP-like: one request/response per attribute.
    let agent = snmp::Agent::start(sw.switch.clone()).await?;
    let mut h = Hist::new()?;
    let c = probe_commit();
    for i in 0..n + 10 {
        let t0 = StdInstant::now();
        let row_index = agent.create(&c).await?;
        agent.destroy(row_index).await?;
        if i >= 10 {
            h.record(t0.elapsed());
        }
    }
    agent.stop();
    rows.push(row(SNMP, false, snmp::CREATE_SETS + 1, &h));
    // SNMP has no security: the ORB and the sockets again in plain text, on front ends
    // of the same switch, so that SNMP is compared under the same security.
    if tls {
        rows.extend(plain_text_rows(sw.switch.clone(), n).await?);
    }
    // The server's own work: the same create + delete on the switch in this process,
    // no transport at all.
    let local = sw.switch.clone();
    pairs_over(&local, 10).await?;
    rows.push(row(IN_PROCESS, false, 0, &pairs_over(&local, n).await?));
    for r in &rows {
        say(&format!(
            "§3 {:>36}: {:>9.0} operations/s, a create + delete in {:.1} µs (median), {} invocations",
            r.interface, r.ops_per_s, r.p50_pair_us, r.invocations_per_pair
        ));
    }
    Ok(rows)
}

/// The §3 interfaces' names.
pub(crate) const GRPC: &str = "gRPC (the ORB)";
pub(crate) const RAW: &str = "raw TCP (sockets)";
pub(crate) const PROXY: &str = "gRPC proxy -> raw TCP (the hybrid)";
pub(crate) const SNMP: &str = "SNMP-like (a UDP set per attribute)";
pub(crate) const IN_PROCESS: &str = "in process (the server's own work)";

/// gRPC and raw TCP in plain text on front ends of `switch` served for the measurement.
async fn plain_text_rows(
    switch: atmlab_fabric::live::local::LocalSwitch,
    n: u64,
) -> Result<Vec<InterfaceRow>, LabError> {
    let bind = async || {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| err("a plain-text front end", e))?;
        let a = l
            .local_addr()
            .map_err(|e| err("a plain-text front end", e))?;
        Ok::<_, LabError>((l, a))
    };
    let (grpc_listener, grpc_addr) = bind().await?;
    let (raw_listener, raw_addr) = bind().await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = SwitchService::new(switch.clone(), None);
    let grpc_task = tokio::spawn(atmlab_fabric::live::grpc::serve(
        grpc_listener,
        None,
        service,
        async {
            let _ = stopped.await;
        },
    ));
    let raw_task = tokio::spawn(async move {
        while let Ok((stream, _)) = raw_listener.accept().await {
            let backend = switch.clone();
            tokio::spawn(async move {
                let _ = atmlab_fabric::live::raw::serve_raw(stream, backend).await;
            });
        }
    });
    let result = async {
        let grpc = GrpcSwitch::new(atmlab_rpc::client_channel(&grpc_addr.to_string(), None).await?);
        pairs_over(&grpc, 10).await?;
        let g = row(GRPC, false, 2, &pairs_over(&grpc, n).await?);
        let raw = raw_client(raw_addr, None).await?;
        pairs_over(&raw, 10).await?;
        let r = row(RAW, false, 2, &pairs_over(&raw, n).await?);
        Ok::<_, LabError>(vec![g, r])
    }
    .await;
    let _ = stop.send(());
    let _ = grpc_task.await;
    raw_task.abort();
    result
}

async fn raw_client(
    addr: std::net::SocketAddr,
    id: Option<&TlsIdentity>,
) -> Result<RawClient, LabError> {
    match id {
        None => Ok(RawClient::connect(addr).await?),
        Some(id) => {
            let stream = atmlab_rpc::tls::connect(&id.connector()?, addr, &a_switch()).await?;
            Ok(RawClient::new(stream))
        }
    }
}

mod sim;
mod snmp;
pub use sim::SimPoint;

mod verdicts;
pub use verdicts::{RATIO_TOLERANCE, verdicts};

mod write;
pub use write::write_report;

#[cfg(test)]
mod tests;
