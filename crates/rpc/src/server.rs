//! The HTTP/2 settings every control interface's gRPC server shares.
//!
//! xbind's connection manager answers call requests as fast as the machine allows, and past
//! its knee (paper 000 §IV, Fig. 7) requests arrive faster than it can take them. The
//! server must then hold the excess back, not die of it. HTTP/2 (h2 0.4.16 and later)
//! guards a connection against floods of small DATA frames: every small frame received and
//! not yet read by its handler costs up to 256 bytes of a budget that is half the
//! connection's flow-control window, and when the budget runs out the connection is closed
//! with `ENHANCE_YOUR_CALM` and every call in flight on it fails. A unary request is one
//! such frame, so with hyper's 1 MiB window about 2,500 requests waiting for a busy
//! manager's handlers were enough: `atmlab callgen` past the manager's knee over gRPC lost
//! calls by the thousand to "transport error", and connections whose release was lost
//! with them stayed up (docs/performance.md, "The manager over gRPC past its knee").
//!
//! So every server here limits the streams a client may have open at once
//! ([`MAX_CONCURRENT_STREAMS`]); the client's HTTP/2 layer queues the rest, which is the
//! back-pressure the manager needs. A long-lived stream (a manager's command stream to a
//! switch server) may hold at most [`STREAM_WINDOW`] bytes not yet read, and the connection
//! window ([`CONNECTION_WINDOW`]) makes the budget large enough for both.
//!
//! Every server also offers what operators' tools expect of a gRPC server (issue 25):
//! server reflection (`grpc.reflection.v1` and `v1alpha`, over the compiled IDL
//! [`crate::FILE_DESCRIPTOR_SET`]), so that `grpcurl list` and `describe` work without
//! the `.proto` files, and the standard health service (`grpc.health.v1`), SERVING for
//! the server ("") and for each atmlab service it offers while it serves, NOT_SERVING
//! from the moment it begins to stop. Both are reads: any authenticated role may use
//! them (docs/security.md); a certificate without a role is refused, as everywhere.

use std::convert::Infallible;
use std::future::Future;

use tokio::net::TcpListener;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_health::ServingStatus;

use crate::error::{RpcError, chain};
use crate::tls::{Caller, Incoming, Role, TlsIdentity, grpc_incoming};

/// Streams a client may have open on one connection at once: 1,024 unread unary requests
/// cost at most 256 KiB of the data-frame budget.
///
/// Fewer than a connection manager's overload guard lets be in setup (2,000), so one
/// client past the manager's knee queues in its own HTTP/2 layer instead of being refused:
/// that carries more setups per second than a cap above the guard (measured with
/// `bench/callgen-grpc` against 4,096, under which the manager spent its time refusing
/// the excess; figures in docs/performance.md), at the price of latency that grows in the
/// client's queue. A client that wants a bound sets a deadline; the manager releases the
/// setups it abandons. Many clients together still meet the guard.
pub const MAX_CONCURRENT_STREAMS: u32 = 1024;

/// The flow-control window of one stream: the bytes a lagging handler may leave unread
/// (the HTTP/2 default, 64 KiB). Control messages are tens to hundreds of bytes, and on
/// the loopback or a LAN this window does not limit their rate.
pub const STREAM_WINDOW: u32 = 65_535;

/// The connection's flow-control window. Its half (2 MiB) is h2's budget for small DATA
/// frames not yet read: room for every unary stream (256 KiB) beside a full stream window
/// of 20-byte messages (3,277 x 236 bytes = 0.8 MB).
pub const CONNECTION_WINDOW: u32 = 4 << 20;

/// The gRPC services of one server, with their names: what [`serve`] routes, lists through
/// reflection and reports SERVING through the health service.
#[derive(Debug)]
pub struct Services {
    routes: Routes,
    names: Vec<&'static str>,
}

impl Services {
    /// One service (a generated tonic server: `SwitchServerServer::new(..)`).
    pub fn new<S>(service: S) -> Services
    where
        S: tonic::codegen::Service<
                http::Request<Body>,
                Response = http::Response<Body>,
                Error = Infallible,
            > + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Services {
            routes: Routes::new(service),
            names: vec![S::NAME],
        }
    }

    /// These services and `service`.
    pub fn add_service<S>(mut self, service: S) -> Services
    where
        S: tonic::codegen::Service<
                http::Request<Body>,
                Response = http::Response<Body>,
                Error = Infallible,
            > + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        self.routes = self.routes.add_service(service);
        self.names.push(S::NAME);
        self
    }

    /// The fully qualified names of the services (`atmlab.v1.SwitchServer`, ...).
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }
}

/// The health service's name, as grpcurl and probes call it.
pub const HEALTH_SERVICE: &str = "grpc.health.v1.Health";
/// The reflection services' names (v1, and v1alpha for older tools).
pub const REFLECTION_SERVICES: [&str; 2] = [
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The role check of the operators' services: a read, so any caller with a role
/// (or a plain-text one); a certificate without a role is refused, as by every service.
#[allow(
    clippy::result_large_err,
    reason = "tonic's interceptor signature returns a Status"
)]
fn read_only(request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    // Reflection and health are reads, which every role may do.
    Caller::of(&request).require(&Role::ALL, "read reflection or health")?;
    Ok(request)
}

/// A reflection builder over the compiled IDL and the operators' own descriptors, listing
/// `offered` (the IDL holds every atmlab service; a server lists only its own) and the
/// operators' services.
fn reflection(offered: &[&'static str]) -> tonic_reflection::server::Builder<'static> {
    let builder = tonic_reflection::server::Builder::configure()
        .include_reflection_service(false)
        .register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET);
    offered
        .iter()
        .copied()
        .chain([HEALTH_SERVICE])
        .chain(REFLECTION_SERVICES)
        .fold(builder, |b, name| b.with_service_name(name))
}

/// `services`' routes with reflection and health beside them, and the health reporter
/// that [`serve_incoming`] turns to NOT_SERVING when the server begins to stop.
async fn with_operator_services(
    services: Services,
) -> Result<(Routes, tonic_health::server::HealthReporter), RpcError> {
    let (reporter, health) = tonic_health::server::health_reporter();
    for name in services.names() {
        reporter
            .set_service_status(*name, ServingStatus::Serving)
            .await;
    }
    let failed = |e: tonic_reflection::server::Error| RpcError::Reflection(e.to_string());
    let v1 = reflection(services.names()).build_v1().map_err(failed)?;
    let v1alpha = reflection(services.names())
        .build_v1alpha()
        .map_err(failed)?;
    use tonic::service::interceptor::InterceptedService as Checked;
    let routes = services
        .routes
        .add_service(Checked::new(health, read_only))
        .add_service(Checked::new(v1, read_only))
        .add_service(Checked::new(v1alpha, read_only));
    Ok((routes, reporter))
}

/// A tonic server builder with the settings above and `TCP_NODELAY` (control messages are
/// small and latency-bound).
pub fn server() -> Server {
    Server::builder()
        .tcp_nodelay(true)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
}

/// Serves `services` (one or more tonic services: `Services::new(service)`), with server
/// reflection and the health service beside them, on `listener` until `shutdown`
/// resolves: every connection's TLS handshake through
/// [`grpc_incoming`] (mutual TLS with `tls`, plain HTTP/2 without; handshakes concurrent
/// and bounded per source address, refusals counted and summarized), the settings of
/// [`server`], and a log line (`name`, at `info`) when it starts listening and when it
/// stops. The one start-up of every control interface (switch servers, the name
/// service, the QoS mapper, connection managers, TINA's performers), so that all of them
/// authenticate, log refusals and hold back excess requests the same way.
pub async fn serve(
    name: &str,
    listener: TcpListener,
    tls: Option<&TlsIdentity>,
    services: Services,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RpcError> {
    serve_incoming(name, grpc_incoming(listener, tls)?, services, shutdown).await
}

/// [`serve`] on an accept loop already made (so that a TLS configuration error shows
/// before the server's task is spawned, or to give it limits other than the defaults:
/// [`crate::tls::grpc_incoming_with`], whose stream's `stats()` stay readable).
pub async fn serve_incoming(
    name: &str,
    incoming: Incoming,
    services: Services,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RpcError> {
    let addr = incoming.local_addr();
    let offered = services.names.clone();
    let (routes, health) = with_operator_services(services).await?;
    // NOT_SERVING as soon as the stop begins: a probe (or a watcher) sees the server
    // going before its connections close.
    let shutdown = async move {
        shutdown.await;
        for name in offered.iter().copied().chain([""]) {
            health
                .set_service_status(name, ServingStatus::NotServing)
                .await;
        }
    };
    tracing::info!(server = name, %addr, "listening");
    let result = server()
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| RpcError::Serve {
            addr,
            reason: chain(&e),
        });
    tracing::info!(server = name, "stopped");
    result
}
