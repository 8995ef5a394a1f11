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

/// How long after the last request for a snapshot (with no page streaming) the
/// collector keeps reading the network.
const IDLE_AFTER: Duration = Duration::from_secs(10);

/// Who is looking: the event streams open, and when a snapshot was last asked for. With
/// nobody looking the collector reads nothing, so a network whose dashboard is not open
/// (a benchmark against `atmlab up`, say) carries none of its load.
#[derive(Default)]
struct Demand {
    streams: std::sync::atomic::AtomicUsize,
    asked: std::sync::Mutex<Option<tokio::time::Instant>>,
    wake: tokio::sync::Notify,
}

impl Demand {
    fn wanted(&self) -> bool {
        self.streams.load(std::sync::atomic::Ordering::Relaxed) > 0
            || self
                .asked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_some_and(|t| t.elapsed() < IDLE_AFTER)
    }

    /// Someone looks: the collector wakes at once if it slept.
    fn ask(&self) {
        *self
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tokio::time::Instant::now());
        self.wake.notify_one();
    }
}

/// An open event stream, counted in [`Demand::streams`] until it drops.
struct Watching(Arc<Demand>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0
            .streams
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The routes' state.
#[derive(Clone)]
struct Shared {
    latest: watch::Receiver<Arc<str>>,
    demand: Arc<Demand>,
}

/// A running dashboard: its collector task and the latest snapshot.
pub struct Dashboard {
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Dashboard {
    /// Starts the collector: a snapshot every `period` while someone looks (a page
    /// streams, or a snapshot was asked for in the last ten seconds), none otherwise.
    pub fn start(source: DashboardSource, period: Duration) -> Dashboard {
        let (tx, latest) = watch::channel::<Arc<str>>(Arc::from("{}"));
        let demand = Arc::new(Demand::default());
        let looking = demand.clone();
        let task = tokio::spawn(async move {
            let mut collector = Collector::new(source);
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                if !looking.wanted() {
                    looking.wake.notified().await;
                    tick.reset_immediately();
                }
                tick.tick().await;
                let snap = collector.snapshot().await;
                if tx.send(Arc::from(snap.to_string())).is_err() {
                    break;
                }
            }
        });
        Dashboard {
            shared: Shared { latest, demand },
            task,
        }
    }

    /// The page's routes, to merge with the metrics' on one server.
    pub fn routes(&self) -> Router {
        Router::new()
            .route("/", get(|| async { Html(INDEX_HTML) }))
            .route("/api/snapshot", get(snapshot))
            .route("/api/events", get(events))
            .with_state(self.shared.clone())
    }

    /// The latest snapshot, as JSON text.
    pub fn latest(&self) -> Arc<str> {
        self.shared.latest.borrow().clone()
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

/// The latest snapshot; when nobody was looking, the one the woken collector takes
/// next (within a few seconds), not a stale one.
async fn snapshot(State(shared): State<Shared>) -> impl IntoResponse {
    let mut latest = shared.latest.clone();
    let idle = !shared.demand.wanted();
    shared.demand.ask();
    if idle {
        latest.mark_unchanged();
        let _ = tokio::time::timeout(Duration::from_secs(5), latest.changed()).await;
    }
    let body = latest.borrow().to_string();
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn events(State(shared): State<Shared>) -> impl IntoResponse {
    shared
        .demand
        .streams
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    shared.demand.wake.notify_one();
    let watching = Watching(shared.demand.clone());
    let stream = WatchStream::new(shared.latest).map(move |snap| {
        let _counted = &watching;
        Ok::<_, std::convert::Infallible>(Event::default().event("snapshot").data(&*snap))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
