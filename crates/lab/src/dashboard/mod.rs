//! The live dashboard (issue 25, item 2): a read-only page in the browser that shows a
//! running network as ONOS's GUI shows its own: the topology with each link's reserved
//! bandwidth and live cell rate, the connections and their paths, the call rate, setup
//! latency and blocking as they change, each switch's counters, and the SMDS servers
//! (paper 002) with their routes and congestion state.
//!
//! It is served by the same small HTTP server as the metrics ([`crate::metrics::http`]):
//! `GET /` the page (one HTML file with its script and style, embedded in the binary: no
//! build step, no network access), `GET /api/snapshot` the latest snapshot as JSON, and
//! `GET /api/events` a stream of them (server-sent events, one per period). One
//! collector task per dashboard reads the network ([`collect`]) and hands each snapshot
//! to every open page through a `watch` channel, so a page costs the network nothing.

pub mod collect;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use tokio::sync::watch;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::WatchStream;

pub use collect::{Collector, DashboardSource};

/// The page.
pub const INDEX_HTML: &str = include_str!("index.html");

/// How often the collector reads the network by default.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The SMDS servers of this process, as the page lists them: a JSON array of objects
/// with `name`, `forwarded`, `discarded`, `reachable`, `neighbours` and `congested`.
pub type SmdsProbe = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// A running dashboard: its collector task and the latest snapshot.
pub struct Dashboard {
    latest: watch::Receiver<Arc<str>>,
    task: tokio::task::JoinHandle<()>,
}

impl Dashboard {
    /// Starts the collector: a snapshot at once, then one every `period`.
    pub fn start(source: DashboardSource, period: Duration) -> Dashboard {
        let (tx, latest) = watch::channel::<Arc<str>>(Arc::from("{}"));
        let task = tokio::spawn(async move {
            let mut collector = Collector::new(source);
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let snap = collector.snapshot().await;
                if tx.send(Arc::from(snap.to_string())).is_err() {
                    break;
                }
            }
        });
        Dashboard { latest, task }
    }

    /// The page's routes, to merge with the metrics' on one server.
    pub fn routes(&self) -> Router {
        Router::new()
            .route("/", get(|| async { Html(INDEX_HTML) }))
            .route("/api/snapshot", get(snapshot))
            .route("/api/events", get(events))
            .with_state(self.latest.clone())
    }

    /// The latest snapshot, as JSON text.
    pub fn latest(&self) -> Arc<str> {
        self.latest.borrow().clone()
    }
}

/// A dashboard and the HTTP server that serves it, with the metrics beside it at
/// `/metrics`; both stop when this drops.
pub struct DashboardServer {
    /// The HTTP server (its address: where the page is).
    pub http: crate::metrics::http::HttpServer,
    /// The collector.
    pub dashboard: Dashboard,
}

impl DashboardServer {
    /// Serves the dashboard of `source` and the metrics of `metrics` on `addr`.
    pub async fn start(
        addr: std::net::SocketAddr,
        source: DashboardSource,
        metrics: crate::metrics::Metrics,
    ) -> Result<DashboardServer, crate::LabError> {
        let dashboard = Dashboard::start(source, PERIOD);
        let routes = dashboard
            .routes()
            .merge(crate::metrics::http::router(metrics));
        let http = crate::metrics::http::HttpServer::start(addr, routes).await?;
        Ok(DashboardServer { http, dashboard })
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.http.addr)
    }

    /// Stops serving.
    pub async fn stop(self) {
        self.http.stop().await;
    }
}

/// The probe of a process's SMDS servers (`smds net up`): each server's name, PDUs
/// forwarded (delivered to SNIs, or sent on over an ISSI or ICI) and discarded, its
/// routes (the interface to each other server), its neighbours and its congestion
/// management (CMP) state, read through the servers' status readers.
pub fn smds_probe(servers: Vec<(String, atmlab_smds::live::StatusReader)>) -> SmdsProbe {
    Arc::new(move || {
        let list: Vec<serde_json::Value> = servers
            .iter()
            .map(|(name, r)| {
                let s = r.status();
                let c = &s.counters;
                let iface = |i: atmlab_smds::ids::IfaceId| i.0 + 1;
                serde_json::json!({
                    "name": name,
                    "forwarded": c.delivered + c.sni_to_issi + c.issi_to_issi + c.to_ici,
                    "discarded": c.dropped(),
                    "reachable": s.reachable,
                    "routes": s.next_hops.iter()
                        .map(|(srv, i)| format!("s{} via {}", srv.0, iface(*i)))
                        .collect::<Vec<_>>(),
                    "neighbours": s.neighbours.iter()
                        .map(|(i, n, full)| format!(
                            "s{} on {}{}", n.0, iface(*i), if *full { "" } else { " (forming)" }))
                        .collect::<Vec<_>>(),
                    "congested": s.congested,
                    "cmp_cut": s.cmp_cut,
                    "cmp_episodes": s.cmp_episodes,
                })
            })
            .collect();
        serde_json::Value::Array(list)
    })
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn snapshot(State(latest): State<watch::Receiver<Arc<str>>>) -> impl IntoResponse {
    let body = latest.borrow().to_string();
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn events(State(latest): State<watch::Receiver<Arc<str>>>) -> impl IntoResponse {
    let stream = WatchStream::new(latest).map(|snap| {
        Ok::<_, std::convert::Infallible>(Event::default().event("snapshot").data(&*snap))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
