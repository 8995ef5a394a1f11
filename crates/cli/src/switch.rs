//! `atmlab switch`: run a switch server, or query one.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::live::server::{self, ServerFile};
use clap::{Args, Subcommand};

use crate::live::{self, Security};

/// `atmlab switch`.
#[derive(Debug, Args)]
pub struct SwitchArgs {
    #[command(subcommand)]
    command: SwitchCommand,
    #[command(flatten)]
    security: Security,
}

#[derive(Debug, Subcommand)]
enum SwitchCommand {
    /// Run a switch server (data plane, gRPC, raw TCP) from its configuration file.
    Serve {
        /// The switch configuration (TOML; see `docs/live.md`).
        #[arg(long)]
        config: PathBuf,
        /// Register in this registry, the name service's URL (e.g.
        /// https://10.0.0.1:50050) or an etcd cluster (etcd://HOST:PORT,... or
        /// etcds://...), with the switch's own certificate, and renew until stopped:
        /// `switch/NAME` and the hosts its ports name (`host_name`), so that managers
        /// elsewhere find it.
        #[arg(long, visible_alias = "registry", value_name = "URL")]
        names: Option<String>,
        /// Print its addresses as one JSON object once it serves (and is registered).
        #[arg(long)]
        json: bool,
        /// Serve Prometheus metrics (the switch's ports, its control ports) over HTTP
        /// at ADDR/metrics (port 0: one the OS picks; printed).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
    },
    /// Describe a switch: ports, ranges, capacities.
    Describe(Target),
    /// List a switch's connections.
    Connections(Target),
    /// List a switch's outstanding reservations.
    Reservations(Target),
    /// Install a CBR VC cross-connect by hand (phase 2 on free identifiers): cells
    /// arriving on IN_PORT:VPI/VCI leave on OUT_PORT:VPI/VCI (several --out for
    /// point-to-multipoint). Prints the connection id.
    Commit {
        #[command(flatten)]
        target: Target,
        /// Input, "port:vpi/vci".
        #[arg(long = "in")]
        input: String,
        /// Output, "port:vpi/vci" (repeat for branches).
        #[arg(long = "out", required = true)]
        outputs: Vec<String>,
        /// Peak cell rate (cells/s) admission control charges.
        #[arg(long, default_value_t = 1000.0)]
        pcr: f64,
        /// Owner of the connection.
        #[arg(long, default_value = "admin")]
        owner: String,
    },
    /// Serve the gRPC SwitchServer in front of a switch's raw-TCP interface (ReTINA's
    /// hybrid, paper 001 §3.4): gRPC in, raw TCP out.
    Proxy {
        /// The switch's raw-TCP address.
        #[arg(long)]
        raw: String,
        /// Where the proxy's gRPC listens.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Our certificate name towards the switch (a cm or admin certificate: the
        /// proxy relays commands).
        #[arg(long = "as", default_value = "admin")]
        who: String,
        /// The switch certificate the proxy serves with (default: that of the switch it
        /// fronts, by the name the switch gives): its clients expect a switch.
        #[arg(long)]
        serve_as: Option<String>,
        /// Print its address as one JSON object ({"proxy": URL, "raw": ADDR}).
        #[arg(long)]
        json: bool,
    },
    /// Offer connection add+delete load to a switch server and report operations/s.
    Bench {
        /// gRPC address (unary, execute, stream modes; or a proxy's).
        #[arg(long)]
        addr: Option<String>,
        /// Raw-TCP address (raw mode).
        #[arg(long)]
        raw: Option<String>,
        /// unary | execute | stream | raw
        #[arg(long, default_value = "unary")]
        mode: String,
        /// Commands per Execute / raw batch, or requests in flight on the stream.
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Concurrent workers (connections' worth of load).
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// How long to run.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Our certificate name.
        #[arg(long = "as", default_value = "admin")]
        who: String,
        /// One JSON line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a connection.
    Release {
        #[command(flatten)]
        target: Target,
        /// The connection id (from commit or connections).
        connection: u64,
    },
}

/// Parses "port:vpi/vci".
fn endpoint(s: &str) -> Result<(atmlab_core::ids::PortId, atmlab_core::ids::VcId)> {
    let (p, id) = s
        .split_once(':')
        .ok_or_else(|| anyhow!("{s:?}: expected \"port:vpi/vci\", e.g. \"0:0/100\""))?;
    let port: u16 = p
        .parse()
        .map_err(|_| anyhow!("{s:?}: {p:?} is not a port number"))?;
    let id: atmlab_core::ids::VcId = id.parse().map_err(|e| anyhow!("{s:?}: {e}"))?;
    Ok((atmlab_core::ids::PortId(port), id))
}

#[derive(Debug, Args)]
struct Target {
    /// The switch server's gRPC address (host:port).
    #[arg(long)]
    addr: String,
    /// Our identity (certificate name) for mutual TLS.
    #[arg(long = "as", default_value = "admin")]
    who: String,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Runs `atmlab switch`.
pub fn run(args: SwitchArgs) -> Result<ExitCode> {
    live::init_logging();
    let rt = live::runtime()?;
    rt.block_on(async move {
        match args.command {
            SwitchCommand::Serve { config, names, json, metrics } => {
                let file = ServerFile::load(&config)?;
                let tls = args.security.identity(&file.name)?;
                // Its errors name the switch, and the address or file at fault.
                let running = server::start(&file, tls.as_ref()).await?;
                let scheme = if tls.is_some() { "https" } else { "http" };
                let registered = match &names {
                    Some(url) => {
                        let lease = std::time::Duration::from_secs(10);
                        atmlab_control::net::register_switch(url, tls.as_ref(), &file, &running, lease)
                            .await
                            .with_context(|| format!("registering switch {} in the name service at {url}", file.name))?
                    }
                    None => Vec::new(),
                };
                let metrics = match metrics {
                    Some(addr) => {
                        let m = atmlab_lab::metrics::Metrics::new();
                        atmlab_lab::metrics::switch::SwitchSource::add(&m, &running);
                        Some(atmlab_lab::metrics::http::HttpServer::metrics(addr, m).await?)
                    }
                    None => None,
                };
                if json {
                    let ports: Vec<_> = running
                        .ports
                        .iter()
                        .map(|(p, a)| serde_json::json!({ "port": p.0, "udp": a.to_string() }))
                        .collect();
                    say!(
                        "{}",
                        serde_json::json!({
                            "switch": file.name,
                            "grpc": format!("{scheme}://{}", running.grpc_addr),
                            "raw": running.raw_addr.map(|a| a.to_string()),
                            "ports": ports,
                            "restored": running.restored,
                            "registered": names.as_ref().map(|_| registered.len()),
                            "metrics": metrics.as_ref().map(|m| m.metrics_url()),
                        })
                    );
                } else {
                    say!("switch {}: gRPC {scheme}://{}", file.name, running.grpc_addr);
                    if let Some(raw) = running.raw_addr {
                        say!("switch {}: raw TCP {raw}", file.name);
                    }
                    for (port, addr) in &running.ports {
                        say!("switch {}: port {port} udp {addr}", file.name);
                    }
                    if running.restored > 0 {
                        say!("switch {}: restored {} connections from the journal", file.name, running.restored);
                    }
                    if let Some(url) = &names {
                        say!("switch {}: registered in {url} ({} entries)", file.name, registered.len());
                    }
                    if let Some(m) = &metrics {
                        say!("switch {}: metrics {}", file.name, m.metrics_url());
                    }
                }
                live::shutdown_signal().await;
                if let Some(m) = metrics {
                    m.stop().await;
                }
                running.stop().await;
                drop(registered);
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Describe(t) => {
                let c = client(&t, &args.security).await?;
                let d = c.describe().await.map_err(|e| anyhow!("{e}"))?;
                if t.json {
                    let ports: Vec<_> = d
                        .ports
                        .iter()
                        .zip(&d.peers)
                        .map(|(p, peer)| {
                            serde_json::json!({
                                "port": p.config.id.0,
                                "link_rate_bps": p.config.link_rate.bps(),
                                "capacity": p.config.capacity.per_sec(),
                                "allocated": p.allocated,
                                "buffer_cells": p.config.buffer_cells,
                                "buffer_allocated": p.buffer_allocated,
                                "vpi": [p.config.vpi_range.0, p.config.vpi_range.1],
                                "vci": [p.config.vci_range.0, p.config.vci_range.1],
                                "reserved": p.reserved,
                                "committed": p.committed,
                                "peer": peer,
                            })
                        })
                        .collect();
                    say!("{}", serde_json::json!({"name": d.name, "connections": d.connections, "ports": ports}));
                } else {
                    say!("switch {}: {} connections", d.name, d.connections);
                    for (p, peer) in d.ports.iter().zip(&d.peers) {
                        say!(
                            "  port {:>3} {:?} {:>8.2} Mb/s  admitted {:.0}/{:.0} cells/s  buffer {}/{}  VPI {}-{} VCI {}-{}  reserved {} committed {}  {}",
                            p.config.id,
                            p.config.interface,
                            p.config.link_rate.bps() / 1e6,
                            p.allocated,
                            p.config.capacity.per_sec(),
                            p.buffer_allocated,
                            p.config.buffer_cells,
                            p.config.vpi_range.0,
                            p.config.vpi_range.1,
                            p.config.vci_range.0,
                            p.config.vci_range.1,
                            p.reserved,
                            p.committed,
                            peer
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Connections(t) => {
                let c = client(&t, &args.security).await?;
                for x in c.connections().await.map_err(|e| anyhow!("{e}"))? {
                    let branches: Vec<String> = x.branches.iter().map(|b| format!("{}:{}", b.port, b.id)).collect();
                    say!(
                        "{:>6} {:?} {}:{} -> {}  {:?} pcr {:.0}  owner {:?} tag {:?}",
                        x.id,
                        x.kind,
                        x.in_port,
                        x.in_id,
                        branches.join(","),
                        x.traffic.class,
                        x.traffic.pcr.per_sec(),
                        x.owner,
                        x.tag
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Commit { target, input, outputs, pcr, owner } => {
                use atmlab_fabric::switch::{Branch, Commit, ConnectionKind};
                let (in_port, in_id) = endpoint(&input)?;
                let branches = outputs
                    .iter()
                    .map(|o| endpoint(o).map(|(port, id)| Branch { port, id }))
                    .collect::<Result<Vec<_>>>()?;
                let c = client(&target, &args.security).await?;
                let (id, _) = c
                    .commit(&Commit {
                        kind: ConnectionKind::Vc,
                        in_port,
                        in_id,
                        branches,
                        traffic: atmlab_core::traffic::TrafficDescriptor::cbr(atmlab_core::units::CellRate(pcr)),
                        clr: 0.0,
                        buffer_cells: 0,
                        owner: owner.into(),
                        replenish: 0,
                        tag: "cli".into(),
                    })
                    .await
                    .map_err(|e| anyhow!("commit refused: {e}"))?;
                say!("{id}");
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Release { target, connection } => {
                let c = client(&target, &args.security).await?;
                c.release(connection, false)
                    .await
                    .map_err(|e| anyhow!("release refused: {e}"))?;
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Proxy { raw, listen, who, serve_as, json } => {
                let id = args.security.identity(&who)?;
                let backend = raw_client(&raw, id.as_ref()).await?;
                let id = match (&id, serve_as) {
                    (None, _) => None,
                    (Some(_), Some(name)) => args.security.identity(&name)?,
                    (Some(_), None) => {
                        use atmlab_fabric::live::backend::SwitchBackend as _;
                        let fronted = backend
                            .describe()
                            .await
                            .map_err(|e| anyhow!("describing the switch at {raw}: {e}"))?
                            .name;
                        args.security.identity(&fronted)?
                    }
                };
                let listener = tokio::net::TcpListener::bind(listen)
                    .await
                    .with_context(|| format!("binding the proxy's gRPC listener on {listen}"))?;
                let scheme = if id.is_some() { "https" } else { "http" };
                let url = format!("{scheme}://{}", listener.local_addr()?);
                if json {
                    say!("{}", serde_json::json!({ "proxy": url, "raw": raw }));
                } else {
                    say!("proxy: gRPC {url} -> raw {raw}");
                }
                let service = atmlab_fabric::live::grpc::SwitchService::new(backend, None);
                atmlab_fabric::live::grpc::serve(listener, id.as_ref(), service, live::shutdown_signal())
                    .await
                    .map_err(|e| anyhow!("{e}"))?;
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Bench { addr, raw, mode, batch, workers, seconds, who, json } => {
                use atmlab_fabric::live::loadgen::{self, Mode};
                let id = args.security.identity(&who)?;
                let duration = std::time::Duration::from_secs_f64(seconds);
                let grpc = match &addr {
                    Some(a) => Some(GrpcSwitch::new(
                        atmlab_rpc::channel_to(a, id.as_ref(), a_switch())
                            .await
                            .with_context(|| format!("connecting to {a}"))?,
                    )),
                    None => None,
                };
                let need_grpc = || anyhow!("--mode {mode} needs --addr (a gRPC address)");
                let result = match mode.as_str() {
                    "unary" => {
                        grpc.as_ref().ok_or_else(need_grpc)?;
                        loadgen::run::<GrpcSwitch>(grpc, None, Mode::Unary, workers, duration).await
                    }
                    "execute" => {
                        grpc.as_ref().ok_or_else(need_grpc)?;
                        loadgen::run::<GrpcSwitch>(grpc, None, Mode::Execute(batch), workers, duration).await
                    }
                    "stream" => {
                        grpc.as_ref().ok_or_else(need_grpc)?;
                        loadgen::run::<GrpcSwitch>(grpc, None, Mode::Stream(batch), workers, duration).await
                    }
                    "raw" => {
                        let r = raw.as_deref().ok_or_else(|| anyhow!("--mode raw needs --raw ADDR"))?;
                        // One raw connection per worker, as one gRPC channel per run.
                        let client = raw_client(r, id.as_ref()).await?;
                        loadgen::run(None, Some(client), Mode::Backend(batch), workers, duration).await
                    }
                    other => return Err(anyhow!("--mode {other:?}: expected unary, execute, stream or raw")),
                }
                .map_err(|e| anyhow!("{e}"))?;
                if json {
                    say!(
                        "{}",
                        serde_json::json!({
                            "mode": mode, "batch": batch, "workers": workers,
                            "operations": result.operations, "refused": result.refused,
                            "seconds": result.seconds, "ops_per_sec": result.rate(),
                        })
                    );
                } else {
                    say!(
                        "{mode} batch {batch} workers {workers}: {} operations in {:.2} s = {:.0} ops/s ({} refused)",
                        result.operations,
                        result.seconds,
                        result.rate(),
                        result.refused
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            SwitchCommand::Reservations(t) => {
                let c = client(&t, &args.security).await?;
                for r in c.reservations().await.map_err(|e| anyhow!("{e}"))? {
                    say!("port {} {} owner {:?}", r.port, r.id, r.owner);
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

/// A raw-TCP client, over mutual TLS when we have an identity.
async fn raw_client(
    addr: &str,
    id: Option<&atmlab_rpc::tls::TlsIdentity>,
) -> Result<atmlab_fabric::live::raw::RawClient> {
    use atmlab_fabric::live::raw::RawClient;
    match id {
        None => RawClient::connect(addr).await.map_err(|e| anyhow!("{e}")),
        Some(id) => {
            let stream = atmlab_rpc::tls::connect(&id.connector()?, addr, &a_switch())
                .await
                .with_context(|| format!("connecting to the raw interface at {addr}"))?;
            Ok(RawClient::new(stream))
        }
    }
}

/// What a client given a switch's address by hand expects: any switch server of the lab.
fn a_switch() -> atmlab_rpc::tls::Expect {
    atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch)
}

async fn client(t: &Target, security: &Security) -> Result<GrpcSwitch> {
    security.peer(&t.addr);
    let id = security.identity(&t.who)?;
    let ch = atmlab_rpc::channel_to(&t.addr, id.as_ref(), a_switch())
        .await
        .with_context(|| format!("connecting to the switch server at {}", t.addr))?;
    Ok(GrpcSwitch::new(ch))
}
