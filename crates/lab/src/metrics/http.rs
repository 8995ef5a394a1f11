//! The live processes' HTTP side: one small axum server per process, on the address
//! `--metrics ADDR` gives, serving `/metrics` (and, later, the dashboard on the same
//! server: a caller adds its routes to [`router`]'s before [`HttpServer::start`]).
//! Plain HTTP on purpose: Prometheus scrapes it as any exporter, and it only reads.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::Metrics;
use crate::LabError;

/// The content type of OpenMetrics text, which `prometheus-client`'s encoder writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The routes of the metrics: `GET /metrics`.
pub fn router(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(metrics)
}

async fn scrape(State(metrics): State<Metrics>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, OPENMETRICS)],
        metrics.render().await,
    )
}

/// A running HTTP server; stops when dropped or [`HttpServer::stop`]ped.
#[derive(Debug)]
pub struct HttpServer {
    /// Where it listens (the port the OS picked for `:0`).
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl HttpServer {
    /// Binds `addr` and serves `routes` in a task.
    pub async fn start(addr: SocketAddr, routes: Router) -> Result<HttpServer, LabError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| LabError::io(format!("binding the metrics address {addr}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| LabError::io("the metrics address", e))?;
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, routes)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the metrics server stopped");
            }
        });
        tracing::info!(%addr, "metrics at http://{addr}/metrics");
        Ok(HttpServer {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Serves [`router`]`(metrics)` on `addr`.
    pub async fn metrics(addr: SocketAddr, metrics: Metrics) -> Result<HttpServer, LabError> {
        HttpServer::start(addr, router(metrics)).await
    }

    /// The URL of its `/metrics`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Stops serving and waits for the task.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}
