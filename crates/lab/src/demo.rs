//! `atmlab demo`: the whole laboratory in one process, on embedded defaults (paper 000
//! §III's testbed, on loopback). A ring of four switch servers with a host on each side,
//! a name service, connection managers of each kind; one connection carries AAL5 frames
//! host to host; then the call generator measures throughput and setup latency at a few
//! loads per manager, and the CSV, JSON and plots go to the reports directory (written
//! with [`crate::report`]).

use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::live;
use atmlab_core::ids::PortId;
use atmlab_core::units::BitRate;
use atmlab_fabric::live::host::HostPort;

use atmlab_sim::plot::PlotSpec;

use crate::callgen::{self, Load, Report};
use crate::launch::{Lab, managers};
use crate::report::{self, Column, Format, SeriesSet, Table, plot, write};
use crate::{LabError, cells};

fn err(what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::run("the demo", format!("{what}: {e}"))
}

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
    /// Serve Prometheus metrics at this address's `/metrics` while the demo runs
    /// (switches, name service, each manager in turn).
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the live dashboard (and the metrics) at this address while the demo runs.
    pub dashboard: Option<std::net::SocketAddr>,
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
            metrics: None,
            dashboard: None,
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

/// Runs the demo; `say` hears progress lines.
pub async fn run(opts: &DemoOptions, mut say: impl FnMut(&str)) -> Result<Vec<DemoRow>, LabError> {
    let lab = Lab::up(&opts.data_dir, opts.insecure, &mut say).await?;
    let metrics = crate::metrics::network(&lab.net);
    let server = match opts.metrics {
        Some(addr) => {
            let server = crate::metrics::http::HttpServer::metrics(addr, metrics.clone()).await?;
            say(&format!("metrics at {}", server.metrics_url()));
            Some(server)
        }
        None => None,
    };
    // The demo's managers serve no gRPC: the dashboard reads them in process.
    let local = crate::dashboard::collect::LocalManagers::default();
    let dashboard = match opts.dashboard {
        Some(addr) => {
            let tls = match &lab.certs {
                Some(dir) => Some(
                    atmlab_rpc::tls::TlsFiles::in_dir(dir, "admin")
                        .load()
                        .map_err(|e| LabError::run("the dashboard", e.to_string()))?,
                ),
                None => None,
            };
            let source = crate::dashboard::DashboardSource {
                names_url: Some(lab.net.names_url()),
                tls,
                smds: None,
                local: local.clone(),
            };
            let d = crate::dashboard::DashboardServer::start(addr, source, metrics.clone()).await?;
            say(&format!("dashboard at {}", d.url()));
            Some(d)
        }
        None => None,
    };
    let rows = lab
        .within(async |lab| run_on(opts, lab, &metrics, &local, &mut say).await)
        .await;
    if let Some(s) = server {
        s.stop().await;
    }
    if let Some(d) = dashboard {
        d.stop().await;
    }
    rows
}

async fn run_on(
    opts: &DemoOptions,
    lab: &Lab,
    metrics: &crate::metrics::Metrics,
    local: &crate::dashboard::collect::LocalManagers,
    say: &mut impl FnMut(&str),
) -> Result<Vec<DemoRow>, LabError> {
    let (net, clients) = (&lab.net, &lab.clients);
    // 1. One connection a -> b through three switches, carrying AAL5 frames.
    let cm = live::start(
        CmConfig::new(CmKind::Xbind),
        clients.to_vec(),
        Box::new(lab.router()),
    )
    .map_err(|e| err("starting the connection manager", e.message))?;
    let call = crate::launch::call_a_to_b(&cm, 100_000.0, "demo")
        .await
        .map_err(|e| err("setting up a -> b", e.message))?;
    let path: Vec<String> = call
        .view
        .hops
        .iter()
        .map(|h| h.0.switch.to_string())
        .collect();
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
    // Each host port bound to its host through the control path, as a manager would
    // (rather than waiting for the hosts' attach datagrams to arrive).
    let bind = |sw: &str, port: u16, host: std::net::SocketAddr| {
        net.switches
            .iter()
            .find(|s| s.switch.describe_now().name == sw)
            .is_some_and(|s| s.attach_host(PortId(port), host))
    };
    if !bind("s3", 0, b.local_addr()?) || !bind("s1", 0, a.local_addr()?) {
        return Err(err("attaching the hosts", "a host port is missing"));
    }
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
        // Each manager exported while it runs (a stopped one drops out of the scrape).
        metrics.add(crate::metrics::cm::CmSource::new(name.clone(), cm.clone()));
        // And shown on the dashboard while it runs, alone.
        *local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = vec![(name.clone(), cm.clone())];
        for &rate in &opts.loads {
            let load = Load {
                holding: opts.holding,
                ..Load::poisson(rate, StdDuration::from_secs_f64(opts.seconds), "a", "b")
            };
            let report = callgen::run(cm.clone(), &load).await;
            say(&format!(
                "{name:>15} target {:>6.0}/s, offered {:>8.0}/s: {:>9.0} setups/s, mean {:>8.3} ms, p99 {:>8.3} ms, blocked {}, failed {}",
                rate,
                report.arrived_per_s,
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
pub fn write_reports(dir: &Path, rows: &[DemoRow]) -> Result<(), LabError> {
    report::create_dir(dir)?;
    let mut csv = Table::new([
        Column::csv("manager"),
        Column::csv("offered_per_s"),
        Column::csv("setups_per_s").format(Format::Fixed(1)),
        Column::csv("operations_per_s").format(Format::Fixed(1)),
        Column::csv("mean_setup_ms").format(Format::Fixed(4)),
        Column::csv("p50_setup_ms").format(Format::Fixed(4)),
        Column::csv("p95_setup_ms").format(Format::Fixed(4)),
        Column::csv("p99_setup_ms").format(Format::Fixed(4)),
        Column::csv("max_setup_ms").format(Format::Fixed(4)),
        Column::csv("established"),
        Column::csv("blocked"),
        Column::csv("failed"),
    ]);
    // Throughput-delay, in the manner of the paper's Figs. 6, 7 and 11: one curve per
    // manager, mean setup latency against throughput.
    let mut series = SeriesSet::new();
    for r in rows {
        let p = &r.report;
        csv.csv_row(cells![
            &r.manager,
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
        ]);
        series.push(&r.manager, (p.setups_per_s, p.mean_setup_ms, 0.0));
    }
    write(dir, "results.csv", &csv.csv())?;
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = r.report.to_json();
            v["manager"] = serde_json::Value::String(r.manager.clone());
            v
        })
        .collect();
    report::write_json(dir, "results.json", &serde_json::Value::Array(json))?;
    plot(
        dir,
        "throughput_delay",
        PlotSpec {
            title: "Call setup: mean latency against throughput (3 hops, loopback)",
            x_label: "setups per second",
            y_label: "mean setup latency (ms)",
            log_y: true,
        },
        series.as_slice(),
    )
}
