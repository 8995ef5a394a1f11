//! The accept loop of a control server: TCP in, authenticated streams out, and a server
//! that idle or hostile connections cannot take down (issue 24, "Ports that hold").
//!
//! [`incoming`] owns the listener in a task of its own. Each accepted connection gets
//! `TCP_NODELAY` and, with TLS, its handshake runs in a task of its own bounded by
//! [`AcceptLimits::handshake_timeout`], so a slow or hostile client holds up no one. The
//! loop itself never waits for a handshake: past [`AcceptLimits::max_pending_per_addr`]
//! handshakes pending from one source address a new connection is closed at once and
//! counted, so one address holding thousands of silent connections costs the others
//! nothing; past [`AcceptLimits::max_pending`] in all, it takes the place of the oldest
//! handshake of the address holding the most (or is closed if it holds as many), so
//! neither do many addresses together (before, the loop stopped accepting at 256
//! pending handshakes, each held for 10 s, and every client waited behind them).
//!
//! Refusals (failed or timed-out handshakes, connections over a cap, failed `accept`s)
//! are counted in [`IncomingStats`] by [`Refusal`] and logged as one `WARN` summary per
//! [`AcceptLimits::summary_interval`] that had any, naming the listener's address and the
//! last refused peer with its reason; each refusal on its own is logged at `debug` only,
//! so a flood of them cannot flood the log. Listener errors (out of file descriptors,
//! say) are counted and retried after a pause that doubles up to a second, never
//! returned: one bad moment must not stop a switch server, nor make it spin.
//!
//! The stream ends only when dropped; dropping it closes the listener and abandons the
//! handshakes in flight. tonic drops it when its shutdown signal fires.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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

/// Authenticated connections waiting for the server to pick them up.
const QUEUE: usize = 64;

/// The listen backlog [`incoming_with`] sets (the kernel caps it at `somaxconn`). tokio
/// binds with 128, and a burst of silent connections larger than the backlog makes the
/// kernel drop SYNs, a legitimate client's among them, which then waits a second for
/// its retransmission however fast the loop accepts.
pub const LISTEN_BACKLOG: i32 = 4096;

/// The first pause after a failed `accept` (typically EMFILE); it doubles on each failure
/// in a row up to [`ACCEPT_BACKOFF_MAX`], so the loop neither spins nor sleeps long once
/// descriptors are back.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause after failed `accept`s.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The limits an accept loop enforces; [`Default`] gives the values every server of the
/// project uses unless told otherwise (docs/live.md, "Limits").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptLimits {
    /// How long a peer may take to finish its TLS handshake (default 3 s): on loopback or
    /// a LAN a handshake takes milliseconds, and a silent peer holds a slot until then.
    pub handshake_timeout: Duration,
    /// Handshakes pending at once from one source address (default 16); past it a new
    /// connection from that address is closed at once.
    pub max_pending_per_addr: usize,
    /// Handshakes pending at once in all (default 512). Bounds the memory and
    /// descriptors silent peers can hold. Past it, a new connection takes the place of
    /// the oldest handshake of the source holding the most, if that source holds at
    /// least two more than the new one's; otherwise it is closed at once.
    pub max_pending: usize,
    /// How often refusals are summarized in one log line (default 10 s).
    pub summary_interval: Duration,
}

impl Default for AcceptLimits {
    fn default() -> Self {
        AcceptLimits {
            handshake_timeout: super::SERVER_HANDSHAKE_TIMEOUT,
            max_pending_per_addr: 16,
            max_pending: 512,
            summary_interval: Duration::from_secs(10),
        }
    }
}

/// Why a connection was refused or closed by a server's guards; the kinds
/// [`IncomingStats`] counts and the summary line lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The TLS handshake failed (no certificate, unknown issuer, not TLS, ...).
    HandshakeFailed,
    /// The TLS handshake (or, on a raw port, the first request) did not come in time.
    HandshakeTimeout,
    /// Over the cap of pending handshakes from one source address.
    PendingPerAddr,
    /// Over the cap of pending handshakes in all.
    PendingTotal,
    /// Over a server's cap of open connections from one source address (raw TCP).
    ConnectionsPerAddr,
    /// Over a server's cap of open connections in all (raw TCP).
    ConnectionsTotal,
    /// An open connection closed for sending nothing for too long (raw TCP).
    Idle,
    /// `accept` itself failed (out of file descriptors, say).
    AcceptError,
}

impl Refusal {
    /// Every kind, in the order the summary line lists them.
    pub const ALL: [Refusal; 8] = [
        Refusal::HandshakeTimeout,
        Refusal::HandshakeFailed,
        Refusal::PendingPerAddr,
        Refusal::PendingTotal,
        Refusal::ConnectionsPerAddr,
        Refusal::ConnectionsTotal,
        Refusal::Idle,
        Refusal::AcceptError,
    ];

    fn index(self) -> usize {
        Refusal::ALL
            .iter()
            .position(|&r| r == self)
            .expect("every kind is in ALL")
    }

    /// How the summary line names `n` of this kind.
    fn describe(self) -> &'static str {
        match self {
            Refusal::HandshakeTimeout => "handshake time-outs",
            Refusal::HandshakeFailed => "failed handshakes",
            Refusal::PendingPerAddr => "over the per-address cap of pending handshakes",
            Refusal::PendingTotal => "over the cap of pending handshakes",
            Refusal::ConnectionsPerAddr => "over the per-address connection cap",
            Refusal::ConnectionsTotal => "over the connection cap",
            Refusal::Idle => "closed idle",
            Refusal::AcceptError => "failed accepts",
        }
    }
}

/// Counters of an [`Incoming`] stream (and of a raw-TCP server's own guards, which count
/// into the same), shared with it: clone freely; they stay live after the stream moves
/// into a server.
#[derive(Debug, Clone, Default)]
pub struct IncomingStats {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    refusals: [AtomicU64; Refusal::ALL.len()],
    /// The last refusal's peer and reason, for the summary line.
    last: Mutex<Option<String>>,
}

impl IncomingStats {
    /// Connections handed to the server (after a successful handshake, with TLS).
    pub fn accepted(&self) -> u64 {
        self.inner.accepted.load(Ordering::Relaxed)
    }

    /// Connections refused or closed by a guard, of every kind but [`Refusal::Idle`] and
    /// [`Refusal::AcceptError`] (neither refuses a connection that was there).
    pub fn refused(&self) -> u64 {
        Refusal::ALL
            .iter()
            .filter(|r| !matches!(r, Refusal::Idle | Refusal::AcceptError))
            .map(|&r| self.count(r))
            .sum()
    }

    /// The refusals of one kind so far.
    pub fn count(&self, kind: Refusal) -> u64 {
        self.inner.refusals[kind.index()].load(Ordering::Relaxed)
    }

    /// Counts one refusal of `kind`, remembering `detail` (who and why) for the next
    /// summary line; logs it at `debug` only.
    pub fn refuse(&self, kind: Refusal, detail: &dyn fmt::Display) {
        self.inner.refusals[kind.index()].fetch_add(1, Ordering::Relaxed);
        let detail = detail.to_string();
        tracing::debug!(kind = ?kind, %detail, "refused");
        *self
            .inner
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(detail);
    }

    fn snapshot(&self) -> [u64; Refusal::ALL.len()] {
        Refusal::ALL.map(|r| self.count(r))
    }
}

/// Logs one `WARN` line for the refusals counted since `since` (and moves `since` on),
/// or nothing if there were none: "refused N connections in the last 10 s: 3 handshake
/// time-outs, 1,984 over the per-address cap of pending handshakes (last: ...)".
pub(crate) fn log_summary(
    stats: &IncomingStats,
    local: &str,
    interval: Duration,
    since: &mut [u64; Refusal::ALL.len()],
) {
    let now = stats.snapshot();
    let delta: Vec<(Refusal, u64)> = Refusal::ALL
        .iter()
        .zip(now.iter().zip(since.iter()))
        .map(|(&r, (n, s))| (r, n.saturating_sub(*s)))
        .filter(|&(_, d)| d > 0)
        .collect();
    *since = now;
    if delta.is_empty() {
        return;
    }
    let total: u64 = delta.iter().map(|&(_, d)| d).sum();
    let parts: Vec<String> = delta
        .iter()
        .map(|&(r, d)| format!("{d} {}", r.describe()))
        .collect();
    let last = stats
        .inner
        .last
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default();
    tracing::warn!(
        local = %local,
        last = %last,
        "refused {total} connections in the last {interval:?}: {}",
        parts.join(", ")
    );
}

/// A stream of accepted connections, plain or TLS-authenticated; see the module doc.
///
/// Implements `Stream<Item = io::Result<ServerStream>>` for tonic's
/// `Server::serve_with_incoming` / `serve_with_incoming_shutdown`, and can be read with
/// `tokio_stream::StreamExt::next` by a raw-TCP server. It never yields an error: failed
/// connections are counted and skipped.
#[derive(Debug)]
pub struct Incoming {
    connections: mpsc::Receiver<ServerStream>,
    accept_loop: AbortHandle,
    local_addr: SocketAddr,
    stats: IncomingStats,
}

/// Accepts connections on `listener` under the default [`AcceptLimits`]; with `tls`,
/// runs a TLS handshake on each and yields only those that pass (for mutual TLS, use an
/// acceptor from [`TlsIdentity::acceptor`] or [`TlsIdentity::grpc_acceptor`]); without,
/// yields every TCP connection.
///
/// Must be called inside a tokio runtime (it spawns the accept loop).
pub fn incoming(listener: TcpListener, tls: Option<TlsAcceptor>) -> Incoming {
    incoming_with(
        listener,
        tls,
        &AcceptLimits::default(),
        IncomingStats::default(),
    )
}

/// [`incoming`] under `limits`, counting into `stats` (which a raw-TCP server shares, so
/// that its own refusals go into the same summary line).
pub fn incoming_with(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: &AcceptLimits,
    stats: IncomingStats,
) -> Incoming {
    // A listener whose address cannot be read is still usable; the address is only
    // reported.
    let local_addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    // listen() again on a listening socket only changes its backlog. A failure leaves
    // the backlog the listener had, which still works.
    if let Err(error) = socket2::SockRef::from(&listener).listen(LISTEN_BACKLOG) {
        tracing::debug!(addr = %local_addr, %error, "cannot enlarge the listen backlog");
    }
    let (tx, connections) = mpsc::channel(QUEUE);
    let accept_loop = tokio::spawn(accept_loop(
        listener,
        tls,
        limits.clone(),
        tx,
        stats.clone(),
    ))
    .abort_handle();
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
    grpc_incoming_with(listener, tls, &AcceptLimits::default())
}

/// [`grpc_incoming`] under `limits`.
pub fn grpc_incoming_with(
    listener: TcpListener,
    tls: Option<&TlsIdentity>,
    limits: &AcceptLimits,
) -> Result<Incoming, RpcError> {
    let acceptor = tls.map(TlsIdentity::grpc_acceptor).transpose()?;
    Ok(incoming_with(
        listener,
        acceptor,
        limits,
        IncomingStats::default(),
    ))
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

/// The source a per-address cap counts under: an IPv4 address (an IPv4-mapped IPv6 one
/// too), or the /64 prefix of an IPv6 address, since one host commonly holds a whole /64
/// and would otherwise have 2^64 caps.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::from(u64::MAX)))),
        },
    }
}

/// Pending handshakes by source address, oldest first, so that the loop can refuse the
/// one address that holds too many without refusing the others, and, when the total is
/// full, make room for an address that holds few by dropping the oldest handshake of
/// the one that holds the most.
#[derive(Default)]
struct Pending {
    by_addr: HashMap<IpAddr, VecDeque<AbortHandle>>,
    by_task: HashMap<tokio::task::Id, IpAddr>,
}

impl Pending {
    fn from(&self, source: IpAddr) -> usize {
        self.by_addr.get(&source).map_or(0, VecDeque::len)
    }

    fn len(&self) -> usize {
        self.by_task.len()
    }

    fn add(&mut self, task: AbortHandle, source: IpAddr) {
        self.by_task.insert(task.id(), source);
        self.by_addr.entry(source).or_default().push_back(task);
    }

    fn done(&mut self, task: tokio::task::Id) {
        let Some(source) = self.by_task.remove(&task) else {
            return;
        };
        if let Some(queue) = self.by_addr.get_mut(&source) {
            queue.retain(|t| t.id() != task);
            if queue.is_empty() {
                self.by_addr.remove(&source);
            }
        }
    }

    /// Aborts the oldest pending handshake of the source holding the most, if it holds
    /// more than `than` (so that two sources never trade places back and forth); returns
    /// that source.
    fn evict_from_largest(&mut self, than: usize) -> Option<IpAddr> {
        let (&source, queue) = self.by_addr.iter().max_by_key(|(_, q)| q.len())?;
        if queue.len() <= than {
            return None;
        }
        let oldest = self.by_addr.get_mut(&source)?.pop_front()?;
        oldest.abort();
        // Its entry goes now, so that the total has room at once; the join of the
        // aborted task then finds nothing to remove.
        self.done(oldest.id());
        Some(source)
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: AcceptLimits,
    tx: mpsc::Sender<ServerStream>,
    stats: IncomingStats,
) {
    // Named in the logs, so that the refusals of a process's several listeners (gRPC,
    // raw TCP) can be told apart.
    let local = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let mut handshakes = JoinSet::new();
    let mut pending = Pending::default();
    let mut summary = tokio::time::interval(limits.summary_interval);
    summary.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut since = stats.snapshot();
    let mut backoff = ACCEPT_BACKOFF;
    loop {
        let (tcp, peer) = tokio::select! {
            () = tx.closed() => return,
            Some(done) = handshakes.join_next_with_id(), if !handshakes.is_empty() => {
                match done {
                    Ok((id, ())) => pending.done(id),
                    Err(e) => pending.done(e.id()),
                }
                continue;
            }
            _ = summary.tick() => {
                log_summary(&stats, &local, limits.summary_interval, &mut since);
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok(accepted) => {
                    backoff = ACCEPT_BACKOFF;
                    accepted
                }
                Err(error) => {
                    stats.refuse(
                        Refusal::AcceptError,
                        &format_args!("accept on {local} failed: {error}"),
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            },
        };
        let Some(acceptor) = &tls else {
            // Plain TCP: nothing to wait for; the server (or a raw server's own caps)
            // takes it from here.
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
            }
            stats.inner.accepted.fetch_add(1, Ordering::Relaxed);
            if tx.send(ServerStream::Plain(tcp)).await.is_err() {
                return;
            }
            continue;
        };
        // The caps are checked before anything else is spent on the connection; closing
        // it at once returns its descriptor.
        let source = source_key(peer.ip());
        if pending.from(source) >= limits.max_pending_per_addr {
            stats.refuse(
                Refusal::PendingPerAddr,
                &format_args!(
                    "{peer}: {} handshakes already pending from {source}",
                    limits.max_pending_per_addr,
                ),
            );
            continue;
        }
        if pending.len() >= limits.max_pending {
            // Full: room for this source only at the expense of one holding at least two
            // more handshakes than it, so that many addresses' silent connections together
            // cannot shut out an address that holds few.
            let mine = pending.from(source);
            match pending.evict_from_largest(mine + 1) {
                Some(largest) => stats.refuse(
                    Refusal::PendingTotal,
                    &format_args!(
                        "the oldest handshake pending from {largest} dropped for {peer}: \
                         {} handshakes pending",
                        limits.max_pending
                    ),
                ),
                None => {
                    stats.refuse(
                        Refusal::PendingTotal,
                        &format_args!("{peer}: {} handshakes already pending", limits.max_pending),
                    );
                    continue;
                }
            }
        }
        // Control messages are small and latency-bound; Nagle would hold them back.
        // (tonic ignores its own tcp_nodelay setting with an external stream.)
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        let stats = stats.clone();
        let local = local.clone();
        let timeout = limits.handshake_timeout;
        let task = handshakes.spawn(async move {
            match handshake(&acceptor, tcp, peer, timeout).await {
                Ok(stream) => {
                    stats.inner.accepted.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%peer, local = %local, "TLS connection accepted");
                    // The server may have gone; then the connection just closes.
                    let _ = tx.send(ServerStream::Tls(Box::new(stream))).await;
                }
                Err(error) => {
                    let kind = match error {
                        RpcError::HandshakeTimeout { .. } => Refusal::HandshakeTimeout,
                        _ => Refusal::HandshakeFailed,
                    };
                    // The error names the peer.
                    stats.refuse(kind, &error);
                }
            }
        });
        pending.add(task, source);
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
    /// The role and name the caller's certificate carries (under TLS; `None` for a
    /// certificate without a role). Read it through [`Caller`](super::Caller).
    pub identity: Option<super::PeerIdentity>,
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
            identity: self
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(super::identity_of),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_host_is_one_source_per_64_prefix() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::7".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(c));
        assert_eq!(source_key(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(source_key(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(source_key(v4), v4);
    }

    #[test]
    fn the_summary_counts_what_came_since_the_last() {
        let stats = IncomingStats::default();
        let mut since = stats.snapshot();
        stats.refuse(Refusal::HandshakeTimeout, &"a");
        stats.refuse(Refusal::PendingPerAddr, &"b");
        stats.refuse(Refusal::PendingPerAddr, &"c");
        assert_eq!(stats.refused(), 3);
        log_summary(&stats, "here", Duration::from_secs(10), &mut since);
        assert_eq!(since, stats.snapshot());
        // Idle closes and failed accepts are counted, but refuse no connection.
        stats.refuse(Refusal::Idle, &"d");
        stats.refuse(Refusal::AcceptError, &"e");
        assert_eq!(stats.refused(), 3);
        assert_eq!(stats.count(Refusal::Idle), 1);
        assert_eq!(stats.count(Refusal::PendingPerAddr), 2);
    }
}
