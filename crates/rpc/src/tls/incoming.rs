//! The accept loop of a control server: TCP in, authenticated streams out.
//!
//! [`incoming`] owns the listener in a task of its own. Each accepted connection gets
//! `TCP_NODELAY` and, with TLS, its handshake runs in a separate task bounded by
//! [`HANDSHAKE_TIMEOUT`](super::HANDSHAKE_TIMEOUT), so a slow or hostile client holds up
//! no one. A refused handshake is logged with `tracing::warn!` (peer address and reason:
//! no certificate, unknown issuer, timeout, ...) and counted in [`IncomingStats`]; the
//! loop goes on. Listener errors (out of file descriptors, say) are logged and retried
//! after a pause, never returned: one bad moment must not stop a switch server.
//!
//! The stream ends only when dropped; dropping it closes the listener and abandons the
//! handshakes in flight. tonic drops it when its shutdown signal fires.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tokio_rustls::{TlsAcceptor, server};
use tokio_stream::Stream;

use super::{TlsIdentity, handshake};
use crate::error::RpcError;

/// Handshakes in flight at once; past this the loop stops accepting until one ends, so
/// a flood of half-open connections costs bounded memory.
const MAX_PENDING_HANDSHAKES: usize = 256;

/// Authenticated connections waiting for the server to pick them up.
const QUEUE: usize = 64;

/// The pause after a failed `accept` (typically EMFILE), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A stream of accepted connections, plain or TLS-authenticated; see the module doc.
///
/// Implements `Stream<Item = io::Result<ServerStream>>` for tonic's
/// `Server::serve_with_incoming` / `serve_with_incoming_shutdown`, and can be read with
/// `tokio_stream::StreamExt::next` by a raw-TCP server. It never yields an error: failed
/// connections are logged and skipped.
#[derive(Debug)]
pub struct Incoming {
    connections: mpsc::Receiver<ServerStream>,
    accept_loop: AbortHandle,
    local_addr: SocketAddr,
    stats: IncomingStats,
}

/// Counters of an [`Incoming`] stream, shared with it (clone freely; they stay live after
/// the stream moves into a server).
#[derive(Debug, Clone, Default)]
pub struct IncomingStats {
    accepted: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
}

impl IncomingStats {
    /// Connections handed to the server (after a successful handshake, with TLS).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
    /// Connections dropped because their TLS handshake failed or timed out.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// Accepts connections on `listener`; with `tls`, runs a TLS handshake on each and
/// yields only those that pass (for mutual TLS, use an acceptor from
/// [`TlsIdentity::acceptor`] or [`TlsIdentity::grpc_acceptor`]); without, yields every
/// TCP connection.
///
/// Must be called inside a tokio runtime (it spawns the accept loop).
pub fn incoming(listener: TcpListener, tls: Option<TlsAcceptor>) -> Incoming {
    // A listener whose address cannot be read is still usable; the address is only
    // reported.
    let local_addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let stats = IncomingStats::default();
    let (tx, connections) = mpsc::channel(QUEUE);
    let accept_loop = tokio::spawn(accept_loop(listener, tls, tx, stats.clone())).abort_handle();
    Incoming {
        connections,
        accept_loop,
        local_addr,
        stats,
    }
}

/// [`incoming`] for a gRPC server: with `tls`, the acceptor requires a client
/// certificate from the lab CA and negotiates HTTP/2 (ALPN `h2`, which tonic's clients
/// insist on); without, plain TCP (for tests and `--insecure` runs only).
///
/// ```no_run
/// # async fn run(svc: atmlab_rpc::v1::name_service_server::NameServiceServer<impl atmlab_rpc::v1::name_service_server::NameService>,
/// #              identity: atmlab_rpc::tls::TlsIdentity) -> Result<(), Box<dyn std::error::Error>> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let incoming = atmlab_rpc::tls::grpc_incoming(listener, Some(&identity))?;
/// tonic::transport::Server::builder()
///     .add_service(svc)
///     .serve_with_incoming_shutdown(incoming, std::future::pending::<()>())
///     .await?;
/// # Ok(()) }
/// ```
pub fn grpc_incoming(
    listener: TcpListener,
    tls: Option<&TlsIdentity>,
) -> Result<Incoming, RpcError> {
    let acceptor = tls.map(TlsIdentity::grpc_acceptor).transpose()?;
    Ok(incoming(listener, acceptor))
}

impl Incoming {
    /// The address the listener is bound to (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The stream's counters; they stay readable after the stream moves into a server.
    pub fn stats(&self) -> IncomingStats {
        self.stats.clone()
    }
}

impl Stream for Incoming {
    type Item = io::Result<ServerStream>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.connections.poll_recv(cx).map(|c| c.map(Ok))
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        // Closes the listener and drops the handshakes in flight with it.
        self.accept_loop.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    tx: mpsc::Sender<ServerStream>,
    stats: IncomingStats,
) {
    // Named in the logs, so that the refusals of a process's several listeners (gRPC,
    // raw TCP) can be told apart.
    let local = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let mut handshakes = JoinSet::new();
    loop {
        while handshakes.try_join_next().is_some() {}
        if handshakes.len() >= MAX_PENDING_HANDSHAKES {
            handshakes.join_next().await;
            continue;
        }
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = tx.closed() => return,
        };
        // Control messages are small and latency-bound; Nagle would hold them back.
        // (tonic ignores its own tcp_nodelay setting with an external stream.)
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        match &tls {
            None => {
                stats.accepted.fetch_add(1, Ordering::Relaxed);
                if tx.send(ServerStream::Plain(tcp)).await.is_err() {
                    return;
                }
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                let stats = stats.clone();
                let local = local.clone();
                handshakes.spawn(async move {
                    match handshake(&acceptor, tcp, peer).await {
                        Ok(stream) => {
                            stats.accepted.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(%peer, local = %local, "TLS connection accepted");
                            // The server may have gone; then the connection just closes.
                            let _ = tx.send(ServerStream::Tls(Box::new(stream))).await;
                        }
                        Err(error) => {
                            stats.refused.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(%peer, local = %local, %error, "refused a connection");
                        }
                    }
                });
            }
        }
    }
}

/// One accepted connection: plain TCP, or TLS whose peer presented a certificate the lab
/// CA signed.
#[derive(Debug)]
pub enum ServerStream {
    /// No TLS (insecure mode).
    Plain(TcpStream),
    /// Mutual TLS, handshake complete.
    Tls(Box<server::TlsStream<TcpStream>>),
}

/// What a tonic service learns about its caller, from `request.extensions()`
/// (`.get::<PeerInfo>()`), when served from an [`Incoming`] stream.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// The caller's address.
    pub remote_addr: Option<SocketAddr>,
    /// The server's own address on this connection.
    pub local_addr: Option<SocketAddr>,
    /// The caller's certificate chain (its own first), under TLS.
    pub certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

impl ServerStream {
    fn tcp(&self) -> &TcpStream {
        match self {
            ServerStream::Plain(tcp) => tcp,
            ServerStream::Tls(tls) => tls.get_ref().0,
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// The peer's certificate chain (its own first), under TLS.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        match self {
            ServerStream::Plain(_) => None,
            ServerStream::Tls(tls) => tls.get_ref().1.peer_certificates(),
        }
    }
}

impl tonic::transport::server::Connected for ServerStream {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        PeerInfo {
            remote_addr: self.tcp().peer_addr().ok(),
            local_addr: self.tcp().local_addr().ok(),
            certificates: self.peer_certificates().map(|c| Arc::new(c.to_vec())),
        }
    }
}

// Both variants are `Unpin`, so the enum is too, and forwarding needs no pin projection.
impl AsyncRead for ServerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ServerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ServerStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ServerStream::Plain(s) => s.is_write_vectored(),
            ServerStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
