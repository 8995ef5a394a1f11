//! `atmlab net`: check a topology file, or bring the whole network up on loopback.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use atmlab_control::net::{NetSecurity, Network, Topology};
use clap::{Args, Subcommand};

use crate::live::{self, Security};

/// `atmlab net`.
#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    command: NetCommand,
    #[command(flatten)]
    security: Security,
}

#[derive(Debug, Subcommand)]
enum NetCommand {
    /// Check a topology file and print what it describes.
    Check {
        /// The topology (TOML; see topologies/).
        topo: PathBuf,
        /// What it describes as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Start the name service, every switch server and link of a topology, on loopback,
    /// and keep them running until Ctrl-C.
    Up {
        /// The topology (TOML; see topologies/).
        topo: PathBuf,
        /// Where to write net.json (the addresses) and the switches' journals
        /// (journals/NAME.table); default: the data directory (--data).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Print the addresses as JSON only.
        #[arg(long)]
        json: bool,
        /// Serve Prometheus metrics (every switch, the name service) over HTTP at
        /// ADDR/metrics (port 0: one the OS picks; printed, and in net.json as
        /// "metrics").
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        #[command(flatten)]
        dashboard: crate::dashboard::DashboardFlag,
    },
}

/// Runs `atmlab net`.
pub fn run(args: NetArgs) -> Result<ExitCode> {
    match args.command {
        NetCommand::Check { topo, json } => {
            let t = Topology::load(&topo)?;
            if json {
                let names = |v: Vec<&str>| serde_json::json!(v);
                say!(
                    "{}",
                    serde_json::json!({
                        "file": topo,
                        "name": t.name,
                        "switches": names(t.switches.iter().map(|s| s.name.as_str()).collect()),
                        "links": t.links.len(),
                        "hosts": names(t.hosts.iter().map(|h| h.name.as_str()).collect()),
                    })
                );
                return Ok(ExitCode::SUCCESS);
            }
            say!(
                "{}: {} switches, {} links, {} hosts",
                topo.display(),
                t.switches.len(),
                t.links.len(),
                t.hosts.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        NetCommand::Up {
            topo,
            state,
            json,
            metrics,
            dashboard,
        } => {
            live::init_logging();
            let t = Topology::load(&topo)?;
            let dashboard = dashboard.addr()?;
            let state = state.unwrap_or_else(live::data_dir);
            // The topology is valid: only now is anything written (the lock first).
            let _lock = live::lock_data_dir(&state)?;
            let journals = state.join("journals");
            let certs = if args.security.insecure {
                None
            } else {
                // A lab CA is made on first use, with a certificate for every object.
                let dir = args.security.certs_dir();
                let subjects = atmlab_control::net::certificate_subjects(&t);
                let made = atmlab_rpc::tls::ensure_certs(&dir, &subjects)
                    .with_context(|| format!("making certificates in {}", dir.display()))?;
                if made.made_ca {
                    eprintln!("made a lab CA and certificates in {}", dir.display());
                }
                Some(dir)
            };
            std::fs::create_dir_all(&journals)
                .with_context(|| format!("creating {}", journals.display()))?;
            live::runtime()?.block_on(async move {
                let net = Network::up(
                    t,
                    &NetSecurity {
                        certs: certs.clone(),
                    },
                    Some(&journals),
                )
                .await?;
                let m = atmlab_lab::metrics::network(&net);
                let metrics = match metrics {
                    Some(addr) => {
                        Some(atmlab_lab::metrics::http::HttpServer::metrics(addr, m.clone()).await?)
                    }
                    None => None,
                };
                let source = atmlab_lab::dashboard::DashboardSource {
                    names_url: Some(net.names_url()),
                    tls: args.security.own_identity("admin")?,
                    smds: None,
                    local: Default::default(),
                };
                let dashboard = crate::dashboard::start(dashboard, source, m).await?;
                let stop = live::shutdown_signal();
                let mut info = net.to_json();
                if let Some(m) = &metrics {
                    info["metrics"] = serde_json::Value::String(m.metrics_url());
                }
                if let Some(d) = &dashboard {
                    info["dashboard"] = serde_json::Value::String(d.url());
                }
                let path = state.join("net.json");
                std::fs::write(&path, serde_json::to_string_pretty(&info)? + "\n")
                    .with_context(|| format!("writing {}", path.display()))?;
                if json {
                    say!("{info}");
                } else {
                    print_network(&info, certs.as_deref(), &path);
                }
                stop.await;
                net.down().await;
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}

fn print_network(
    info: &serde_json::Value,
    certs: Option<&std::path::Path>,
    path: &std::path::Path,
) {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    say!(
        "network {} is up ({})",
        s(&info["name"]),
        if certs.is_some() {
            "mutual TLS"
        } else {
            "INSECURE: plain text"
        }
    );
    say!("  name service   {}", s(&info["names"]));
    if let Some(d) = info["dashboard"].as_str() {
        say!("  dashboard      {d}");
    }
    for sw in info["switches"].as_array().into_iter().flatten() {
        say!(
            "  switch {:<7} gRPC {}  raw {}",
            s(&sw["name"]),
            s(&sw["grpc"]),
            s(&sw["raw"])
        );
        if let Some(ports) = sw["ports"].as_object() {
            for (p, a) in ports {
                say!("      port {p}: udp {}", s(a));
            }
        }
    }
    let sec = match certs {
        Some(d) => format!("--certs {}", d.display()),
        None => "--insecure".to_string(),
    };
    for h in info["hosts"].as_array().into_iter().flatten() {
        say!(
            "  host {:<9} on {}:{}  attach: atmlab host recv --switch {} --vc 0/100   (or: host send ... FILE)",
            s(&h["name"]),
            s(&h["switch"]),
            h["port"],
            s(&h["attach"])
        );
    }
    if let Some(sw) = info["switches"].as_array().and_then(|a| a.first()) {
        let addr = s(&sw["grpc"]);
        let addr = addr.split("://").nth(1).unwrap_or(&addr);
        say!("  query:  atmlab switch describe --addr {addr} {sec}");
    }
    say!(
        "  names:  atmlab names list --addr {} {sec}",
        s(&info["names"]).split("://").nth(1).unwrap_or("")
    );
    if let Some(m) = info["metrics"].as_str() {
        say!("  metrics: {m}");
    }
    say!(
        "  addresses written to {}; Ctrl-C stops the network",
        path.display()
    );
}
