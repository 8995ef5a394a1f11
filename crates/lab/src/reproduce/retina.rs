//! `atmlab reproduce retina`: paper 001's measurements, repeated on a live chain of
//! switch servers on loopback (mutual TLS unless `--insecure`), with the paper's numbers
//! beside ours.
//!
//! - §4.2: connection setup time against the number of switches crossed (1 to 8), one
//!   call at a time (latency, not throughput), for TINA with sequential sub-connection
//!   setup (Alcin's behaviour: 28 ms for one switch, about 44 ms across three), TINA
//!   with parallel sub-connection setup (what the paper asks for), and the xbind manager;
//!   and the remote invocations each setup makes, by interface.
//! - §3.3-3.6: the cost of one switch operation (a commit, a release) through gRPC (the
//!   ORB), the raw TCP protocol (the socket interface), a gRPC proxy relaying to the raw
//!   protocol (the hybrid of §3.4), and SNMP-like per-attribute operations (one UDP
//!   request/response per attribute of the cross-connect row, §3.6).
//!
//! Nothing is fitted to the paper: the machine is far faster per invocation than the
//! paper's, so the comparison is of shapes (growth with path length, ratios between
//! interfaces), not of milliseconds.
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
use hdrhistogram::Histogram;
use minijinja::context;
use serde_json::json;

use crate::launch::{Lab, ROUTE_CACHE_TTL, route_ports};
use crate::report::{self, Column, Format, SeriesSet, Table, Value, plot, write};
use crate::{LabError, cells};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../templates/retina.md");

/// The longest path measured (switches crossed).
pub const MAX_PATH: usize = 8;

/// The network round trip emulated on every remote invocation of the headline sweep
/// ([`TinaConfig::invocation_delay`]). Not the paper's number (its 2 ms per Orbix
/// invocation was mostly the ORB's CPU time): chosen long against this machine's own
/// time per invocation (up to several ms in a debug build on two busy cores), so that
/// waiting, not computing, dominates, as it does when the objects are machines apart.
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
}

impl SetupPoint {
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
    /// Connections created and deleted.
    pub pairs: u64,
    /// Remote invocations per create + delete.
    pub invocations_per_pair: u32,
    /// Operations (creates or deletes) per second, one at a time.
    pub ops_per_s: f64,
    /// Median time of one create + delete, µs.
    pub p50_pair_us: f64,
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
}

impl Hist {
    fn new() -> Result<Self, LabError> {
        Ok(Hist {
            h: Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| err("histogram", e))?,
            sum: 0,
            n: 0,
        })
    }
    fn record(&mut self, d: StdDuration) {
        let ns = (d.as_nanos() as u64).clamp(1, 60_000_000_000);
        let _ = self.h.record(ns);
        self.sum += u128::from(ns);
        self.n += 1;
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

/// Runs the reproduction on a fresh chain; `say` hears progress lines.
pub async fn run(
    opts: &RetinaOptions,
    mut say: impl FnMut(&str),
) -> Result<RetinaResults, LabError> {
    let started = StdInstant::now();
    let lab = Lab::up_with(
        chain_topology(MAX_PATH)?,
        &opts.data_dir,
        opts.insecure,
        &mut say,
    )
    .await?;
    let mut results = lab
        .within(async |lab| run_on(opts, lab, &mut say).await)
        .await?;
    results.seconds = started.elapsed().as_secs_f64();
    write_report(&opts.out, &results)?;
    Ok(results)
}

fn identity(opts: &RetinaOptions, name: &str) -> Result<Option<TlsIdentity>, LabError> {
    if opts.insecure {
        return Ok(None);
    }
    let dir = opts.data_dir.join("certs");
    atmlab_rpc::tls::ensure_certs(&dir, &[name])?;
    Ok(Some(atmlab_rpc::tls::TlsFiles::in_dir(&dir, name).load()?))
}

async fn run_on(
    opts: &RetinaOptions,
    lab: &Lab,
    say: &mut impl FnMut(&str),
) -> Result<RetinaResults, LabError> {
    let tina_id = identity(opts, "tina")?;
    let mut setup = Vec::new();
    let all: Vec<usize> = (1..=MAX_PATH).collect();
    // The headline sweep with the emulated round trip; then the machine as it is, on
    // fewer lengths in the short form.
    // (delay, path lengths, calls measured, calls to warm up first)
    let sweeps: [(StdDuration, Vec<usize>, usize, usize); 2] = if opts.quick {
        [
            (EMULATED_RTT, vec![1, 2, 4, 6, 8], 5, 1),
            (StdDuration::ZERO, vec![1, 8], 3, 1),
        ]
    } else {
        [
            (EMULATED_RTT, all.clone(), 50, 5),
            (StdDuration::ZERO, all, 200, 10),
        ]
    };
    for (delay, lengths, calls, warm) in sweeps {
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
    let interfaces = switch_interfaces(opts, lab, if opts.quick { 100 } else { 2000 }, say).await?;
    Ok(RetinaResults {
        setup,
        depths,
        interfaces,
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

/// The manager's name in a sweep: bare with the emulated round trip, marked without.
pub fn label(manager: &str, delay: StdDuration) -> String {
    if delay.is_zero() {
        format!("{manager}, no added delay")
    } else {
        manager.to_string()
    }
}

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
    // §4.2: TINA, sequential and parallel.
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

fn row(interface: &str, invocations: u32, h: &Hist) -> InterfaceRow {
    InterfaceRow {
        interface: interface.into(),
        pairs: h.n,
        invocations_per_pair: invocations,
        ops_per_s: if h.sum == 0 {
            0.0
        } else {
            2.0 * h.n as f64 / (h.sum as f64 / 1e9)
        },
        p50_pair_us: h.q_ms(0.5) * 1e3,
    }
}

async fn switch_interfaces(
    opts: &RetinaOptions,
    lab: &Lab,
    n: u64,
    say: &mut impl FnMut(&str),
) -> Result<Vec<InterfaceRow>, LabError> {
    let admin = identity(opts, "admin")?;
    let sw = &lab.net.switches[0];
    let mut rows = Vec::new();
    // gRPC, the ORB.
    let grpc = GrpcSwitch::new(
        atmlab_rpc::client_channel(&sw.grpc_addr.to_string(), admin.as_ref()).await?,
    );
    pairs_over(&grpc, 10).await?;
    rows.push(row("gRPC (the ORB)", 2, &pairs_over(&grpc, n).await?));
    // Raw TCP, the socket interface.
    let raw_addr = sw
        .raw_addr
        .ok_or_else(|| err("raw TCP", "s1 serves no raw interface"))?;
    let raw = raw_client(raw_addr, admin.as_ref()).await?;
    pairs_over(&raw, 10).await?;
    rows.push(row("raw TCP (sockets)", 2, &pairs_over(&raw, n).await?));
    // The hybrid: a gRPC proxy in front, relaying to the raw interface.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| err("the proxy", e))?;
    let proxy_addr = listener.local_addr().map_err(|e| err("the proxy", e))?;
    let upstream = raw_client(raw_addr, admin.as_ref()).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let proxy_tls = admin.clone();
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
    let via_proxy =
        GrpcSwitch::new(atmlab_rpc::client_channel(&proxy_addr.to_string(), admin.as_ref()).await?);
    pairs_over(&via_proxy, 10).await?;
    let h = pairs_over(&via_proxy, n).await;
    let _ = stop.send(());
    let _ = proxy.await;
    rows.push(row("gRPC proxy -> raw TCP (the hybrid)", 4, &h?));
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
    rows.push(row(
        "SNMP-like (a UDP set per attribute)",
        snmp::CREATE_SETS + 1,
        &h,
    ));
    for r in &rows {
        say(&format!(
            "§3 {:>36}: {:>9.0} operations/s, a create + delete in {:.1} µs (median), {} invocations",
            r.interface, r.ops_per_s, r.p50_pair_us, r.invocations_per_pair
        ));
    }
    Ok(rows)
}

async fn raw_client(
    addr: std::net::SocketAddr,
    id: Option<&TlsIdentity>,
) -> Result<RawClient, LabError> {
    match id {
        None => Ok(RawClient::connect(addr).await?),
        Some(id) => {
            let stream = atmlab_rpc::tls::connect(
                &id.connector()?,
                addr,
                atmlab_rpc::tls::DEFAULT_SERVER_NAME,
            )
            .await?;
            Ok(RawClient::new(stream))
        }
    }
}

/// The SNMP-like interface of §3.6 as we model it: a manager sets a cross-connect row's
/// attributes one request at a time, as SNMP SETs of the ATM-MIB's
/// `atmVcCrossConnectTable` columns (low and high interface, VPI, VCI, the traffic
/// descriptor, admin status, and last the row status `createAndGo`), each a UDP
/// request/response to an agent on the switch; the agent commits the row when its status
/// arrives. Deleting is one SET (`destroy`). No security (SNMPv1/v2c community strings
/// gave none), no BER encoding (text datagrams), no MIB walk for a free index (the
/// manager picks the row index): a lower bound of SNMP's cost.
mod snmp {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};

    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::live::local::LocalSwitch;
    use atmlab_fabric::switch::{Atomicity, Command, Commit, Release, Reply};
    use tokio::net::UdpSocket;

    use super::err;
    use crate::LabError;

    /// SETs to create a row.
    pub const CREATE_SETS: u32 = 9;

    pub struct Agent {
        socket: UdpSocket,
        task: tokio::task::JoinHandle<()>,
        next_row: AtomicU64,
    }

    impl Agent {
        pub async fn start(switch: LocalSwitch) -> Result<Agent, LabError> {
            let server = UdpSocket::bind("127.0.0.1:0")
                .await
                .map_err(|e| err("the SNMP-like agent", e))?;
            let addr = server
                .local_addr()
                .map_err(|e| err("the SNMP-like agent", e))?;
            let task = tokio::spawn(serve(server, switch));
            let socket = UdpSocket::bind("127.0.0.1:0")
                .await
                .map_err(|e| err("the SNMP-like manager", e))?;
            socket
                .connect(addr)
                .await
                .map_err(|e| err("the SNMP-like manager", e))?;
            Ok(Agent {
                socket,
                task,
                next_row: AtomicU64::new(1),
            })
        }

        pub fn stop(self) {
            self.task.abort();
        }

        async fn set(&self, row: u64, attr: &str, value: &str) -> Result<(), LabError> {
            let req = format!("SET {row} {attr} {value}");
            self.socket
                .send(req.as_bytes())
                .await
                .map_err(|e| err("SNMP-like SET", e))?;
            let mut buf = [0u8; 512];
            let n = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                self.socket.recv(&mut buf),
            )
            .await
            .map_err(|_| err("SNMP-like SET", "no response in 5 s"))?
            .map_err(|e| err("SNMP-like SET", e))?;
            let resp = String::from_utf8_lossy(&buf[..n]);
            if resp == "OK" {
                Ok(())
            } else {
                Err(err(&format!("SNMP-like SET {attr}"), resp))
            }
        }

        /// Creates the cross-connect of `c` attribute by attribute; returns the row.
        pub async fn create(&self, c: &Commit) -> Result<u64, LabError> {
            let row = self.next_row.fetch_add(1, Ordering::Relaxed);
            let b = c.branches[0];
            let sets: [(&str, String); CREATE_SETS as usize] = [
                ("lowIf", c.in_port.0.to_string()),
                ("lowVpi", c.in_id.vpi.0.to_string()),
                ("lowVci", c.in_id.vci.0.to_string()),
                ("highIf", b.port.0.to_string()),
                ("highVpi", b.id.vpi.0.to_string()),
                ("highVci", b.id.vci.0.to_string()),
                ("pcr", c.traffic.pcr.per_sec().to_string()),
                ("adminStatus", "up".into()),
                ("rowStatus", "createAndGo".into()),
            ];
            for (a, v) in sets {
                self.set(row, a, &v).await?;
            }
            Ok(row)
        }

        /// Deletes a row: one SET.
        pub async fn destroy(&self, row: u64) -> Result<(), LabError> {
            self.set(row, "rowStatus", "destroy").await
        }
    }

    #[derive(Default)]
    struct Row {
        attrs: HashMap<String, String>,
        connection: Option<u64>,
    }

    async fn serve(socket: UdpSocket, switch: LocalSwitch) {
        let mut rows: HashMap<u64, Row> = HashMap::new();
        let mut buf = [0u8; 512];
        loop {
            let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let resp = match handle(&mut rows, &switch, &req).await {
                Ok(()) => "OK".to_string(),
                Err(e) => format!("ERR {e}"),
            };
            let _ = socket.send_to(resp.as_bytes(), peer).await;
        }
    }

    async fn handle(
        rows: &mut HashMap<u64, Row>,
        switch: &LocalSwitch,
        req: &str,
    ) -> Result<(), String> {
        let mut it = req.split(' ');
        let (Some("SET"), Some(row), Some(attr), Some(value)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(format!("malformed request {req:?}"));
        };
        let row: u64 = row.parse().map_err(|_| "bad row index".to_string())?;
        match (attr, value) {
            ("rowStatus", "createAndGo") => {
                let r = rows.entry(row).or_default();
                let num = |k: &str| -> Result<u32, String> {
                    r.attrs
                        .get(k)
                        .ok_or_else(|| format!("{k} not set"))?
                        .parse()
                        .map_err(|_| format!("{k} not a number"))
                };
                let pcr: f64 = r
                    .attrs
                    .get("pcr")
                    .ok_or("pcr not set")?
                    .parse()
                    .map_err(|_| "pcr not a number")?;
                let c = super::probe_commit();
                let commit = Commit {
                    in_port: atmlab_core::ids::PortId(num("lowIf")? as u16),
                    in_id: atmlab_core::ids::VcId::new(
                        num("lowVpi")? as u16,
                        num("lowVci")? as u16,
                    ),
                    branches: vec![atmlab_fabric::switch::Branch {
                        port: atmlab_core::ids::PortId(num("highIf")? as u16),
                        id: atmlab_core::ids::VcId::new(
                            num("highVpi")? as u16,
                            num("highVci")? as u16,
                        ),
                    }],
                    traffic: atmlab_core::traffic::TrafficDescriptor::cbr(
                        atmlab_core::units::CellRate(pcr),
                    ),
                    ..c
                };
                let res = switch
                    .execute(vec![Command::Commit(commit)], Atomicity::AllOrNothing)
                    .await
                    .map_err(|e| e.to_string())?;
                match res.into_iter().next() {
                    Some(Ok(Reply::Committed { connection, .. })) => {
                        r.connection = Some(connection);
                        Ok(())
                    }
                    Some(Err(e)) => Err(e.to_string()),
                    _ => Err("no result".into()),
                }
            }
            ("rowStatus", "destroy") => {
                let r = rows.remove(&row).ok_or("no such row")?;
                let connection = r.connection.ok_or("row not active")?;
                let res = switch
                    .execute(
                        vec![Command::Release(Release {
                            connection,
                            keep_reserved: false,
                        })],
                        Atomicity::AllOrNothing,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                match res.into_iter().next() {
                    Some(Ok(_)) => Ok(()),
                    Some(Err(e)) => Err(e.to_string()),
                    None => Err("no result".into()),
                }
            }
            _ => {
                rows.entry(row)
                    .or_default()
                    .attrs
                    .insert(attr.to_string(), value.to_string());
                Ok(())
            }
        }
    }
}

// ----- the report ----------------------------------------------------------------------------

fn counts_text(c: &Counts, calls: u64) -> String {
    c.iter()
        .map(|(k, v)| format!("{k} {:.1}", *v as f64 / calls.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// §4.2: the paper's two points beside every point we measured, and the curves.
fn setup_table(r: &RetinaResults) -> (Table, SeriesSet) {
    let ms = |md: &str, csv: &str| Column::new(md, csv).right().fixed(3, 4);
    let mut t = Table::new([
        Column::md("manager"),
        Column::csv("manager"),
        Column::new("switches", "switches").right(),
        Column::new("calls", "calls").right(),
        ms("mean ms", "mean_ms"),
        ms("p50 ms", "p50_ms"),
        ms("p99 ms", "p99_ms"),
        Column::md("invocations per setup"),
        Column::csv("invocations_per_setup").format(Format::Fixed(2)),
        Column::csv("by_interface"),
    ]);
    let e = Value::Empty;
    t.md_row(cells![
        "paper, Alcin (sequential)",
        1u64,
        e.clone(),
        "28",
        e.clone(),
        e.clone(),
        "13 (9 + 4)"
    ]);
    t.md_row(cells![
        "paper, Alcin (sequential, estimated)",
        3u64,
        e.clone(),
        "44",
        e.clone(),
        e,
        "21 (9 + 3 x 4)"
    ]);
    let mut series = SeriesSet::new();
    for p in &r.setup {
        let counts = counts_text(&p.invocations, p.calls);
        t.row(cells![
            format!("atmlab, {}", p.manager),
            &p.manager,
            p.switches,
            p.calls,
            p.mean_ms,
            p.p50_ms,
            p.p99_ms,
            format!("{:.1} ({counts})", p.total_invocations()),
            p.total_invocations(),
            counts.replace(", ", ";")
        ]);
        series.push(&p.manager, (p.switches as f64, p.mean_ms, f64::NAN));
    }
    (t, series)
}

/// Writes README.md, the CSVs, the plot and results.json.
pub fn write_report(dir: &Path, r: &RetinaResults) -> Result<(), LabError> {
    report::create_dir(dir)?;
    let (setup, series) = setup_table(r);
    write(dir, "setup_time.csv", &setup.csv())?;
    let managers = series.labels();
    let slopes: Vec<minijinja::Value> = managers
        .iter()
        .map(|m| context! { manager => m, slope => r.slope_of(m) })
        .collect();
    let (bare, emulated): (Vec<Series>, Vec<Series>) = series
        .into_vec()
        .into_iter()
        .partition(|s| s.label.ends_with("no added delay"));
    let spec = |title| PlotSpec {
        title,
        x_label: "switches on the path",
        y_label: "mean setup time (ms)",
        log_y: false,
    };
    plot(
        dir,
        "setup_time",
        spec("§4.2: setup time, 20 ms round trip per invocation"),
        &emulated,
    )?;
    plot(
        dir,
        "setup_time_no_delay",
        spec("§4.2: setup time, no added delay"),
        &bare,
    )?;
    let mut paper = SeriesSet::new();
    paper.add(
        "paper, Alcin sequential (Orbix)",
        vec![(1.0, 28.0, f64::NAN), (3.0, 44.0, f64::NAN)],
    );
    plot(
        dir,
        "setup_time_paper",
        PlotSpec {
            title: "§4.2, the paper (Alcin, Orbix)",
            y_label: "setup time (ms)",
            ..spec("")
        },
        paper.as_slice(),
    )?;

    let mut depths = Table::new([
        Column::new("mode", "mode"),
        Column::new("NML-CP levels", "depth").right(),
        Column::new("total", "total").right(),
        Column::md("by interface"),
        Column::csv("by_interface"),
    ]);
    for (mode, depth, c) in &r.depths {
        let total: u64 = c.values().sum();
        let counts = counts_text(c, 1);
        depths.row(cells![
            mode,
            *depth,
            total,
            &counts,
            counts.replace(", ", ";")
        ]);
    }
    write(dir, "invocations.csv", &depths.csv())?;

    let mut interfaces = Table::new([
        Column::new("interface", "interface"),
        Column::new("pairs", "pairs").right(),
        Column::new("invocations per create + delete", "invocations_per_pair").right(),
        Column::new("operations/s", "ops_per_s").right().fixed(0, 1),
        Column::new("median create + delete µs", "p50_pair_us")
            .right()
            .fixed(1, 2),
    ]);
    for i in &r.interfaces {
        interfaces.row(cells![
            &i.interface,
            i.pairs,
            i.invocations_per_pair,
            i.ops_per_s,
            i.p50_pair_us
        ]);
    }
    write(dir, "switch_interface.csv", &interfaces.csv())?;

    let md = report::render(
        "retina.md",
        TEMPLATE,
        context! {
            quick => r.quick,
            seconds => r.seconds,
            max_path => MAX_PATH,
            rtt_ms => u64::try_from(EMULATED_RTT.as_millis()).unwrap_or(u64::MAX),
            setup => setup.markdown(),
            slopes => slopes,
            depths => depths.markdown(),
            interfaces => interfaces.markdown(),
        },
    )?;
    write(dir, "README.md", &md)?;
    let json = json!({
        "quick": r.quick,
        "seconds": r.seconds,
        "setup": r.setup.iter().map(|p| json!({
            "manager": p.manager, "switches": p.switches, "calls": p.calls,
            "mean_ms": p.mean_ms, "p50_ms": p.p50_ms, "p99_ms": p.p99_ms,
            "invocations_per_setup": p.total_invocations(),
            "invocations": p.invocations,
        })).collect::<Vec<_>>(),
        "slopes_ms_per_switch": managers.iter().map(|m| (m.clone(), json!(r.slope_of(m)))).collect::<serde_json::Map<_, _>>(),
        "depths": r.depths.iter().map(|(m, d, c)| json!({"mode": m, "depth": d, "invocations": c})).collect::<Vec<_>>(),
        "interfaces": r.interfaces.iter().map(|i| json!({
            "interface": i.interface, "pairs": i.pairs, "invocations_per_pair": i.invocations_per_pair,
            "ops_per_s": i.ops_per_s, "p50_pair_us": i.p50_pair_us,
        })).collect::<Vec<_>>(),
        "paper": {"alcin_one_switch_ms": 28.0, "alcin_three_switches_ms": 44.0, "orb_share": 0.9,
                  "jorb_rpc_per_s": 418, "socket_rpc_per_s": 1818, "hybrid_rpc_per_s": 97, "snmp_per_s": 50},
    });
    report::write_json(dir, "results.json", &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_renders_every_section() {
        let point = |manager: &str, switches: usize, p50_ms: f64| SetupPoint {
            manager: manager.into(),
            switches,
            calls: 2,
            mean_ms: p50_ms,
            p50_ms,
            p99_ms: p50_ms,
            invocations: [("cm->switch".to_string(), 2 * switches as u64)]
                .into_iter()
                .collect(),
        };
        let r = RetinaResults {
            setup: vec![
                point("xbind T=1", 1, 1.0),
                point("xbind T=1", 2, 2.0),
                point("xbind T=1, no added delay", 1, 0.1),
            ],
            depths: vec![("sequential".into(), 1, Counts::new())],
            interfaces: vec![InterfaceRow {
                interface: "raw TCP (sockets)".into(),
                pairs: 10,
                invocations_per_pair: 2,
                ops_per_s: 1000.0,
                p50_pair_us: 95.5,
            }],
            quick: false,
            seconds: 12.0,
        };
        let (dir, md) = super::super::written(|dir| write_report(dir, &r));
        assert!(md.starts_with("# ReTINA (paper 001), reproduced\n\nGenerated by `atmlab reproduce retina` in 12 s: a chain of 8 switch"));
        assert!(md.contains(
            "| atmlab, xbind T=1 | 2 | 2 | 2.000 | 2.000 | 2.000 | 2.0 (cm->switch 2.0) |\n"
        ));
        assert!(md.contains("- xbind T=1: +1.0000 ms per switch\n"));
        assert!(md.contains("| raw TCP (sockets) | 10 | 2 | 1000 | 95.5 |\n"));
        assert!(md.ends_with("for the discussion.\n"));
        let csv = std::fs::read_to_string(dir.path().join("setup_time.csv")).unwrap();
        assert!(csv.contains("\nxbind T=1,2,2,2.0000,2.0000,2.0000,2.00,cm->switch 2.0\n"));
    }
}
