//! `atmlab names`: run the name service, or query it.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use atmlab_control::names::{DirectoryConfig, NameClient, NameServiceImpl, ObjectKind};
use clap::{Args, Subcommand};

use crate::live::{self, Security};

/// `atmlab names`.
#[derive(Debug, Args)]
pub struct NamesArgs {
    #[command(subcommand)]
    command: NamesCommand,
    #[command(flatten)]
    security: Security,
}

#[derive(Debug, Subcommand)]
enum NamesCommand {
    /// Run a name service.
    Serve {
        /// Listen address.
        #[arg(long, default_value = "127.0.0.1:50050")]
        listen: SocketAddr,
        /// Certificate name of the service.
        #[arg(long = "as", default_value = "names")]
        who: String,
        /// Print its address as one JSON object ({"names": URL}).
        #[arg(long)]
        json: bool,
        /// Serve Prometheus metrics (entries, registrations, renewals, expiries, the
        /// accept loop) over HTTP at ADDR/metrics (port 0: one the OS picks; printed).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
    },
    /// List live registrations.
    List {
        /// The registry: the name service's address, or an etcd cluster,
        /// etcd://HOST:PORT,HOST:PORT,... (etcds:// over mutual TLS).
        #[arg(long, visible_alias = "registry", value_name = "URL")]
        addr: String,
        /// Only this kind: switch, cm, route, qos, host, names, owner (a manager's claim on its owner name).
        #[arg(long)]
        kind: Option<String>,
        /// Our certificate name.
        #[arg(long = "as", default_value = "admin")]
        who: String,
        /// One JSON object per registration (name, kind, address, attributes, lease_s).
        #[arg(long)]
        json: bool,
    },
    /// Resolve one name.
    Resolve {
        /// The registry: the name service's address, or an etcd cluster,
        /// etcd://HOST:PORT,HOST:PORT,... (etcds:// over mutual TLS).
        #[arg(long, visible_alias = "registry", value_name = "URL")]
        addr: String,
        /// Our certificate name.
        #[arg(long = "as", default_value = "admin")]
        who: String,
        /// The name, e.g. switch/s1.
        name: String,
        /// The registration as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn kind(s: &str) -> Result<ObjectKind> {
    Ok(match s {
        "switch" => ObjectKind::SwitchServer,
        "cm" => ObjectKind::ConnectionManager,
        "route" => ObjectKind::RouteObject,
        "qos" => ObjectKind::QosMapper,
        "host" => ObjectKind::Host,
        "names" => ObjectKind::NameService,
        "owner" => ObjectKind::OwnerClaim,
        _ => {
            return Err(anyhow!(
                "--kind {s:?}: expected switch, cm, route, qos, host, names or owner"
            ));
        }
    })
}

fn show(o: &atmlab_control::names::ObjectInfo, lease: std::time::Duration, json: bool) {
    if json {
        say!(
            "{}",
            serde_json::json!({
                "name": o.name,
                "kind": format!("{:?}", o.kind),
                "address": o.address,
                "attributes": o.attributes,
                "lease_s": lease.as_secs_f64(),
            })
        );
        return;
    }
    let attrs: Vec<String> = o
        .attributes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    say!(
        "{:<16} {:<18} {:<28} lease {:>5.1} s  {}",
        o.name,
        format!("{:?}", o.kind),
        o.address,
        lease.as_secs_f64(),
        attrs.join(" ")
    );
}

/// Runs `atmlab names`.
pub fn run(args: NamesArgs) -> Result<ExitCode> {
    live::init_logging();
    live::runtime()?.block_on(async move {
        match args.command {
            NamesCommand::Serve {
                listen,
                who,
                json,
                metrics,
            } => {
                let tls = args.security.identity(&who)?;
                let listener = tokio::net::TcpListener::bind(listen)
                    .await
                    .with_context(|| format!("listening on {listen}"))?;
                let scheme = if tls.is_some() { "https" } else { "http" };
                let url = format!("{scheme}://{}", listener.local_addr()?);
                let service = NameServiceImpl::new(DirectoryConfig::default());
                let metrics = match metrics {
                    Some(addr) => {
                        let m = atmlab_lab::metrics::Metrics::new();
                        atmlab_lab::metrics::names::NamesSource::add(&m, "names", &service);
                        Some(atmlab_lab::metrics::http::HttpServer::metrics(addr, m).await?)
                    }
                    None => None,
                };
                if json {
                    say!(
                        "{}",
                        serde_json::json!({
                            "names": url,
                            "metrics": metrics.as_ref().map(|m| m.metrics_url()),
                        })
                    );
                } else {
                    say!("name service: {url}");
                    if let Some(m) = &metrics {
                        say!("metrics: {}", m.metrics_url());
                    }
                }
                service
                    .serve(listener, tls, live::shutdown_signal())
                    .await?;
                if let Some(m) = metrics {
                    m.stop().await;
                }
                Ok(ExitCode::SUCCESS)
            }
            NamesCommand::List {
                addr,
                kind: k,
                who,
                json,
            } => {
                args.security.peer(&addr);
                let tls = args.security.identity(&who)?;
                let c = NameClient::connect(&addr, tls.as_ref()).await?;
                let k = k.as_deref().map(kind).transpose()?;
                for (o, lease) in c.list(k).await? {
                    show(&o, lease, json);
                }
                Ok(ExitCode::SUCCESS)
            }
            NamesCommand::Resolve {
                addr,
                who,
                name,
                json,
            } => {
                args.security.peer(&addr);
                let tls = args.security.identity(&who)?;
                let c = NameClient::connect(&addr, tls.as_ref()).await?;
                let (o, lease) = c.resolve(&name).await?;
                show(&o, lease, json);
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}
