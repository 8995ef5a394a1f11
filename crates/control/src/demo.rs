//! `atmlab demo`: the whole laboratory in one process, on embedded defaults (paper 000
//! §III's testbed, on loopback). A ring of four switch servers with a host on each side,
//! a name service, connection managers of each kind; one connection carries AAL5 frames
//! host to host; then the call generator measures throughput and setup latency at a few
//! loads per manager, and the table, CSV, JSON and plots go to the reports directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use atmlab_core::ids::PortId;
use atmlab_core::time::Duration;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::live::host::HostPort;

use crate::ControlError;
use crate::callgen::{self, Load, Report};
use crate::cm::adaptive::Regions;
use crate::cm::core::{CmConfig, CmKind};
use crate::cm::live;
use crate::cm::routes::CachedRouter;
use crate::names::NameClient;
use crate::net::{NetSecurity, Network, Topology};
use crate::route::RouteObject;

/// The demo's network: four switches in a ring, host `a` on s1, host `b` on s3, so a call
/// a -> b crosses three switches by either of two routes.
pub const DEFAULT_TOPOLOGY: &str = r#"
name = "demo-ring4"
[defaults]
link_rate = "622.08 Mb/s"
buffer_cells = 4096
vci = [32, 65535]
[[switch]]
name = "s1"
ports = 3
[[switch]]
name = "s2"
ports = 3
[[switch]]
name = "s3"
ports = 3
[[switch]]
name = "s4"
ports = 3
[[link]]
a = "s1:1"
b = "s2:1"
[[link]]
a = "s2:2"
b = "s3:1"
[[link]]
a = "s3:2"
b = "s4:1"
[[link]]
a = "s4:2"
b = "s1:2"
[[host]]
name = "a"
at = "s1:0"
[[host]]
name = "b"
at = "s3:0"
"#;

/// The route object of a running network: discovered from its name service and the
/// switches' Describe, refreshed every second in the background (the returned task).
pub async fn route_object(
    names_addr: &str,
    tls: Option<&atmlab_rpc::tls::TlsIdentity>,
) -> Result<(Arc<Mutex<RouteObject>>, tokio::task::JoinHandle<()>), ControlError> {
    let names = NameClient::connect(names_addr, tls).await?;
    let view = crate::route::discover(&names, tls).await?;
    let route = Arc::new(Mutex::new(RouteObject::new(view)?));
    let refresher = crate::route::spawn_refresher(
        route.clone(),
        names,
        tls.cloned(),
        StdDuration::from_secs(1),
    );
    Ok((route, refresher))
}

/// Every (switch, port) the route between two hosts uses: the caches to warm.
pub fn route_ports(
    route: &Mutex<RouteObject>,
    source: &str,
    destination: &str,
) -> Vec<(String, u16)> {
    let Ok(r) = route
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .route(source, destination, 1.0)
    else {
        return Vec::new();
    };
    let mut v: Vec<(String, u16)> = r
        .hops
        .first()
        .map(|h| (h.switch.clone(), h.in_port))
        .into_iter()
        .collect();
    v.extend(r.hops.iter().map(|h| (h.switch.clone(), h.out_port)));
    v
}

/// The route cache's time-out (the paper's 5 s).
pub const ROUTE_CACHE_TTL: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Certificates and state (`./atmlab-data`).
    pub data_dir: PathBuf,
    /// Where the table, CSV, JSON and plots go (`reports/demo`).
    pub reports_dir: PathBuf,
    /// Plain text instead of mutual TLS.
    pub insecure: bool,
    /// Offered loads, calls/s.
    pub loads: Vec<f64>,
    /// Seconds per load.
    pub seconds: f64,
    /// Mean holding time.
    pub holding: StdDuration,
    /// Only the managers whose names contain one of these (all when empty).
    pub managers: Vec<String>,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            data_dir: PathBuf::from("atmlab-data"),
            reports_dir: PathBuf::from("reports/demo"),
            insecure: false,
            loads: vec![100.0, 1_000.0, 10_000.0, 30_000.0],
            seconds: 2.0,
            holding: StdDuration::from_millis(5),
            managers: Vec::new(),
        }
    }
}

/// One row of the throughput-delay table.
#[derive(Debug, Clone)]
pub struct DemoRow {
    /// The manager, e.g. "xbind T=4".
    pub manager: String,
    /// What the call generator measured.
    pub report: Report,
}

/// An xbind manager with T fixed and a cache large enough that calls at the demo's
/// loads hit (the paper's Fig. 6 runs had "> 200" cached): 256 reserved at a time,
/// refilled below 64, trimmed above 2,048.
pub fn xbind_config(threshold: u32) -> CmConfig {
    CmConfig {
        threshold,
        cache_fill: 256,
        cache_low: 64,
        cache_max: 2048,
        ..CmConfig::new(CmKind::Xbind)
    }
}

/// [`xbind_config`] with T following the arrival rate (`Regions::default()`).
pub fn xbind_adaptive_config() -> CmConfig {
    CmConfig {
        adaptive: Some(Regions::default()),
        ..xbind_config(1)
    }
}

/// The managers the demo compares: sequential, xbind with T = 1, 4, 10, and adaptive.
pub fn managers() -> Vec<(String, CmConfig)> {
    let mut v = vec![("sequential".to_string(), CmConfig::new(CmKind::Sequential))];
    for t in [1, 4, 10] {
        v.push((format!("xbind T={t}"), xbind_config(t)));
    }
    v.push(("xbind adaptive".to_string(), xbind_adaptive_config()));
    v
}

fn err(what: &str, e: impl std::fmt::Display) -> ControlError {
    ControlError::Serve {
        what: "the demo",
        reason: format!("{what}: {e}"),
    }
}

/// A running laboratory: the demo's network on loopback, its route object, and a client
/// of each switch server (the pieces the demo and `atmlab reproduce xbind` share).
pub struct Lab {
    /// The switch servers and the name service.
    pub net: Network,
    /// The route object, refreshed in the background.
    pub route: Arc<Mutex<RouteObject>>,
    /// A gRPC client of each switch server, by name.
    pub clients: Vec<(String, GrpcSwitch)>,
    refresher: tokio::task::JoinHandle<()>,
}

impl Lab {
    /// Starts [`DEFAULT_TOPOLOGY`] with its certificates under `data_dir/certs` (made
    /// on first use) or, `insecure`, in plain text.
    pub async fn up(
        data_dir: &Path,
        insecure: bool,
        say: &mut impl FnMut(&str),
    ) -> Result<Lab, ControlError> {
        let topo = Topology::parse(DEFAULT_TOPOLOGY, "the demo topology")?;
        Lab::up_with(topo, data_dir, insecure, say).await
    }

    /// [`Lab::up`] on another topology; certificates missing from `data_dir/certs` (a
    /// switch the demo's ring does not have) are issued from the same CA.
    pub async fn up_with(
        topo: Topology,
        data_dir: &Path,
        insecure: bool,
        say: &mut impl FnMut(&str),
    ) -> Result<Lab, ControlError> {
        let certs = if insecure {
            None
        } else {
            let dir = data_dir.join("certs");
            let names = topo.certificate_names();
            if !dir.join("ca.pem").exists() {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                atmlab_rpc::tls::init_certs(&dir, &names, false)?;
            }
            for n in &names {
                if !dir.join(format!("{n}.pem")).exists() {
                    atmlab_rpc::tls::issue_cert(&dir, n)?;
                }
            }
            Some(dir)
        };
        std::fs::create_dir_all(data_dir).map_err(|e| err("creating the data directory", e))?;
        let net = Network::up(
            topo.clone(),
            &NetSecurity {
                certs: certs.clone(),
            },
            None,
        )
        .await?;
        std::fs::write(
            data_dir.join("net.json"),
            serde_json::to_string_pretty(&net.to_json()).unwrap_or_default(),
        )
        .map_err(|e| err("writing net.json", e))?;
        say(&format!(
            "network up: {} switch servers (gRPC + raw TCP, {}), name service at {}",
            net.switches.len(),
            if certs.is_some() {
                "mutual TLS"
            } else {
                "plain text"
            },
            net.names_addr
        ));
        let admin = match &certs {
            Some(d) => Some(atmlab_rpc::tls::TlsFiles::in_dir(d, "admin").load()?),
            None => None,
        };
        let clients = match net.switch_clients(admin.as_ref()).await {
            Ok(c) => c,
            Err(e) => {
                net.down().await;
                return Err(e);
            }
        };
        let (route, refresher) = match route_object(&net.names_url(), admin.as_ref()).await {
            Ok(r) => r,
            Err(e) => {
                net.down().await;
                return Err(e);
            }
        };
        Ok(Lab {
            net,
            route,
            clients,
            refresher,
        })
    }

    /// Starts a connection manager over the lab's switches, its caches warmed on the
    /// route a -> b.
    pub async fn manager(&self, config: CmConfig) -> Result<live::CmHandle, ControlError> {
        let router = CachedRouter::new(self.route.clone(), ROUTE_CACHE_TTL);
        let warm = route_ports(&self.route, "a", "b");
        let cm = live::start(config, self.clients.clone(), Box::new(router))
            .map_err(|e| err("starting a manager", e.message))?;
        cm.prefill(warm)
            .await
            .map_err(|e| err("warming the caches", e.message))?;
        tokio::time::sleep(StdDuration::from_millis(50)).await;
        Ok(cm)
    }

    /// The audit after a manager shut down: no connection and no reservation is left on
    /// any switch.
    pub async fn audit(&self, name: &str) -> Result<(), ControlError> {
        for (sw, c) in &self.clients {
            let left = c.connections().await?.len();
            let held = c.reservations().await?;
            if left > 0 || !held.is_empty() {
                let mut per_port: std::collections::BTreeMap<u16, usize> = Default::default();
                for r in &held {
                    *per_port.entry(r.port.0).or_default() += 1;
                }
                return Err(err(
                    "audit",
                    format!(
                        "{name} left {left} connections and {} reservations on {sw} (by port: {per_port:?})",
                        held.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Stops everything.
    pub async fn down(self) {
        self.refresher.abort();
        self.net.down().await;
    }
}

/// Runs the demo; `say` hears progress lines.
pub async fn run(
    opts: &DemoOptions,
    mut say: impl FnMut(&str),
) -> Result<Vec<DemoRow>, ControlError> {
    let lab = Lab::up(&opts.data_dir, opts.insecure, &mut say).await?;
    let result = run_on(opts, &lab, &mut say).await;
    lab.down().await;
    result
}

async fn run_on(
    opts: &DemoOptions,
    lab: &Lab,
    say: &mut impl FnMut(&str),
) -> Result<Vec<DemoRow>, ControlError> {
    let (net, route, clients) = (&lab.net, &lab.route, &lab.clients);
    // 1. One connection a -> b through three switches, carrying AAL5 frames.
    let router = CachedRouter::new(route.clone(), ROUTE_CACHE_TTL);
    let cm = live::start(
        CmConfig::new(CmKind::Xbind),
        clients.to_vec(),
        Box::new(router),
    )
    .map_err(|e| err("starting the connection manager", e.message))?;
    let call = cm
        .add(
            "a",
            "b",
            TrafficDescriptor::cbr(CellRate(100_000.0)),
            0.0,
            "demo",
        )
        .await
        .map_err(|e| err("setting up a -> b", e.message))?;
    let path: Vec<String> = call.view.hops.iter().map(|h| h.0.switch.clone()).collect();
    say(&format!(
        "connection a -> b set up in {:.3} ms over {} (a sends on {}, b receives on {})",
        call.view.setup.as_picos() as f64 / 1e9,
        path.join(" -> "),
        call.view.source_vc,
        call.view.destination_vc
    ));
    let port_addr = |sw: &str, port: u16| {
        net.switches
            .iter()
            .find(|s| s.switch.describe_now().name == sw)
            .and_then(|s| {
                s.ports
                    .iter()
                    .find(|(p, _)| *p == PortId(port))
                    .map(|x| x.1)
            })
    };
    let (a_addr, b_addr) = (port_addr("s1", 0), port_addr("s3", 0));
    let (Some(a_addr), Some(b_addr)) = (a_addr, b_addr) else {
        return Err(err("host ports", "missing"));
    };
    let any = "127.0.0.1:0".parse().expect("literal");
    let mut b = HostPort::attach(any, b_addr, BitRate(155.52e6)).await?;
    let mut a = HostPort::attach(any, a_addr, BitRate(155.52e6)).await?;
    tokio::time::sleep(StdDuration::from_millis(50)).await;
    let frames: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            (0..(i * 97 % 9000 + 1))
                .map(|k| (k * 7 + i) as u8)
                .collect()
        })
        .collect();
    let sender = {
        let frames = frames.clone();
        let vc = call.view.source_vc;
        tokio::spawn(async move {
            for f in &frames {
                a.send_frame(vc, f).await?;
            }
            Ok::<_, atmlab_fabric::FabricError>(())
        })
    };
    let mut intact = 0;
    for f in &frames {
        match b.recv_frame(StdDuration::from_secs(5)).await? {
            Some(r) if r.vc == call.view.destination_vc && &r.sdu == f => intact += 1,
            Some(_) => {}
            None => break,
        }
    }
    sender.await.map_err(|e| err("the sender", e))??;
    say(&format!(
        "host a sent {} AAL5 frames ({} octets); host b received {intact} intact on the translated VC",
        frames.len(),
        frames.iter().map(Vec::len).sum::<usize>()
    ));
    cm.delete(call.view.id)
        .await
        .map_err(|e| err("deleting a -> b", e.message))?;
    cm.shutdown().await;

    // 2. The call generator against each manager.
    let mut rows = Vec::new();
    for (name, config) in managers() {
        if !opts.managers.is_empty() && !opts.managers.iter().any(|m| name.contains(m.as_str())) {
            continue;
        }
        let cm = lab.manager(config).await?;
        for &rate in &opts.loads {
            let load = Load {
                holding: opts.holding,
                ..Load::poisson(rate, StdDuration::from_secs_f64(opts.seconds), "a", "b")
            };
            let report = callgen::run(cm.clone(), &load).await;
            say(&format!(
                "{name:>15} offered {:>8.0}/s: {:>9.0} setups/s, mean {:>8.3} ms, p99 {:>8.3} ms, blocked {}, failed {}",
                rate,
                report.setups_per_s,
                report.mean_setup_ms,
                report.p99_setup_ms,
                report.blocked,
                report.failed
            ));
            rows.push(DemoRow {
                manager: name.clone(),
                report,
            });
        }
        if let Ok(st) = cm.status().await {
            say(&format!(
                "{name:>15}: {} messages carried {} commands; cache {} hits, {} misses; {} re-sent, {} rolled back",
                st.stats.messages,
                st.stats.commands,
                st.cache.0,
                st.cache.1,
                st.stats.retries,
                st.stats.rollbacks
            ));
        }
        cm.shutdown().await;
        // The audit: the manager left nothing on any switch.
        lab.audit(&name).await?;
    }
    write_reports(&opts.reports_dir, &rows)?;
    Ok(rows)
}

/// Writes `results.csv`, `results.json` and the throughput-delay plots.
pub fn write_reports(dir: &Path, rows: &[DemoRow]) -> Result<(), ControlError> {
    std::fs::create_dir_all(dir).map_err(|e| err("creating the reports directory", e))?;
    let mut csv = String::from(
        "manager,offered_per_s,setups_per_s,operations_per_s,mean_setup_ms,p50_setup_ms,p95_setup_ms,p99_setup_ms,max_setup_ms,established,blocked,failed\n",
    );
    for r in rows {
        let p = &r.report;
        csv.push_str(&format!(
            "{},{},{:.1},{:.1},{:.4},{:.4},{:.4},{:.4},{:.4},{},{},{}\n",
            r.manager,
            p.offered_per_s,
            p.setups_per_s,
            p.operations_per_s,
            p.mean_setup_ms,
            p.p50_setup_ms,
            p.p95_setup_ms,
            p.p99_setup_ms,
            p.max_setup_ms,
            p.established,
            p.blocked,
            p.failed
        ));
    }
    std::fs::write(dir.join("results.csv"), csv).map_err(|e| err("results.csv", e))?;
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = r.report.to_json();
            v["manager"] = serde_json::Value::String(r.manager.clone());
            v
        })
        .collect();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default() + "\n",
    )
    .map_err(|e| err("results.json", e))?;
    // Throughput-delay, in the manner of the paper's Figs. 6, 7 and 11: one curve per
    // manager, mean setup latency against throughput.
    let mut series: Vec<atmlab_sim::plot::Series> = Vec::new();
    for r in rows {
        let pt = (r.report.setups_per_s, r.report.mean_setup_ms, 0.0);
        match series.iter_mut().find(|s| s.label == r.manager) {
            Some(s) => s.points.push(pt),
            None => series.push(atmlab_sim::plot::Series {
                label: r.manager.clone(),
                points: vec![pt],
            }),
        }
    }
    atmlab_sim::plot::plot_metric(
        &dir.join("throughput_delay"),
        &atmlab_sim::plot::PlotSpec {
            title: "Call setup: mean latency against throughput (3 hops, loopback)",
            x_label: "setups per second",
            y_label: "mean setup latency (ms)",
            log_y: true,
        },
        &series,
    )
    .map_err(|e| err("plotting", e))?;
    Ok(())
}
