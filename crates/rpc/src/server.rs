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

use std::future::Future;

use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::Server;

use crate::error::{RpcError, chain};
use crate::tls::{Incoming, TlsIdentity, grpc_incoming};

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

/// A tonic server builder with the settings above and `TCP_NODELAY` (control messages are
/// small and latency-bound).
pub fn server() -> Server {
    Server::builder()
        .tcp_nodelay(true)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
}

/// Serves `routes` (one or more tonic services: `Routes::new(service)`) on `listener`
/// until `shutdown` resolves: every connection's TLS handshake through
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
    routes: Routes,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RpcError> {
    serve_incoming(name, grpc_incoming(listener, tls)?, routes, shutdown).await
}

/// [`serve`] on an accept loop already made (so that a TLS configuration error shows
/// before the server's task is spawned, or to give it limits other than the defaults:
/// [`crate::tls::grpc_incoming_with`], whose stream's `stats()` stay readable).
pub async fn serve_incoming(
    name: &str,
    incoming: Incoming,
    routes: Routes,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RpcError> {
    let addr = incoming.local_addr();
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
