//! `atmlab dashboard`, and the `--dashboard` flag of `up`, `net up`, `demo` and
//! `smds net up`: the live page of `atmlab_lab::dashboard`, served with the metrics.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use atmlab_lab::dashboard::{DashboardServer, DashboardSource};
use clap::Args;

use crate::live::{self, Security};

/// `--dashboard ADDR|off`.
#[derive(Debug, Clone, Args)]
pub struct DashboardFlag {
    /// Serve the live dashboard (a page in the browser, and /metrics beside it) over
    /// HTTP at ADDR, e.g. 127.0.0.1:8080 (port 0: one the OS picks; the URL is printed
    /// and written into net.json as "dashboard"); "off": none.
    #[arg(
        long = "dashboard",
        value_name = "ADDR|off",
        default_value = "127.0.0.1:0"
    )]
    pub dashboard: String,
}

impl DashboardFlag {
    /// The address, or `None` for "off"; checked before any work.
    pub fn addr(&self) -> Result<Option<SocketAddr>> {
        if self.dashboard == "off" {
            return Ok(None);
        }
        self.dashboard.parse().map(Some).map_err(|e| {
            anyhow!(
                "--dashboard {:?}: {e} (an address such as 127.0.0.1:8080, or \"off\")",
                self.dashboard
            )
        })
    }
}

/// Starts the dashboard at `addr` (when given) over `source`, with `metrics` at
/// `/metrics`.
pub async fn start(
    addr: Option<SocketAddr>,
    source: DashboardSource,
    metrics: atmlab_lab::metrics::Metrics,
) -> Result<Option<DashboardServer>> {
    match addr {
        Some(a) => Ok(Some(DashboardServer::start(a, source, metrics).await?)),
        None => Ok(None),
    }
}

/// `atmlab dashboard`.
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// The registry of the network to show: its name service's URL (e.g.
    /// https://127.0.0.1:50050, as `atmlab up` prints it), or an etcd cluster,
    /// etcd://HOST:PORT,HOST:PORT,... (etcds:// over mutual TLS).
    #[arg(long, visible_alias = "registry", value_name = "URL")]
    names: String,
    /// Where the page is served.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Our certificate name (any role reads; an observer's is enough).
    #[arg(long = "as", default_value = "admin")]
    who: String,
    /// Print the page's URL as one JSON object ({"dashboard": URL}).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    security: Security,
}

/// Runs `atmlab dashboard` until Ctrl-C.
pub fn run(args: DashboardArgs) -> Result<ExitCode> {
    live::init_logging();
    live::runtime()?.block_on(async move {
        args.security.peer(&args.names);
        let tls = args.security.identity(&args.who)?;
        let source = DashboardSource {
            names_url: Some(args.names.clone()),
            tls,
            smds: None,
            local: Default::default(),
        };
        let server =
            DashboardServer::start(args.listen, source, atmlab_lab::metrics::Metrics::new())
                .await?;
        if args.json {
            say!("{}", serde_json::json!({ "dashboard": server.url() }));
        } else {
            say!("dashboard of {}: {}", args.names, server.url());
        }
        live::shutdown_signal().await;
        server.stop().await;
        Ok(ExitCode::SUCCESS)
    })
}
