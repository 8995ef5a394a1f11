//! The raw-TCP switch server and client (paper 001 §3.2.3: ReTINA's raw socket interface
//! to the connection server; §3.4: the hybrid, a CORBA proxy forwarding over it): the
//! tokio shell around the codec of [`crate::raw`].
//!
//! - [`serve_raw`] answers one connection over any byte stream (plain TCP, or TLS
//!   wrapped by the caller), pipelined: it reads frames continuously, runs each request
//!   on its own task against a [`SwitchBackend`], and writes each reply, tagged with its
//!   request's id, as soon as it is ready, so replies may overtake each other.
//! - [`run_raw_listener`] accepts plain TCP connections; [`run_raw_server`] accepts
//!   plain or TLS connections under [`RawLimits`] (issue 24, "Ports that hold"): the TLS
//!   handshake time-out and the caps on pending handshakes of every control port
//!   (`atmlab_rpc::tls::incoming_with`), caps on open connections in all and per source
//!   address, and an idle time-out that closes a connection that sends nothing. Refusals
//!   are counted in an `IncomingStats` and summarized in one log line per interval.
//! - [`RawClient`] connects, keeps any number of requests outstanding (a writer task, a
//!   reader task and a map from request id to the waiting caller), and is itself a
//!   [`SwitchBackend`], so a gRPC server can sit on it (the proxy of §3.4).
//!
//! The client sends a keep-alive request (a Describe) after [`KEEPALIVE`] without a
//! request, so that a server's idle time-out never closes a client that is only quiet.
//!
//! Every TCP socket gets TCP_NODELAY: a request is one small segment, and Nagle's
//! algorithm would hold it back waiting for the previous reply's ACK (paper 000 measured
//! the switch server's latency, not the OS's coalescing).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use atmlab_rpc::tls::{AcceptLimits, IncomingStats, Refusal, TlsAcceptor};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio_stream::StreamExt as _;
use tracing::{Instrument, debug, info, warn};

use crate::error::FabricError;
use crate::live::authz::{Authorized, AuthzStats};
use crate::live::backend::{BatchResult, Description, SwitchBackend};
use crate::raw::{Decoded, FrameDecoder, Message};
use crate::switch::{Atomicity, Command, Connection, Reservation};

/// Requests one server connection runs at once; beyond this it stops reading, so a
/// client that floods it meets TCP flow control rather than unbounded memory.
pub const MAX_IN_FLIGHT: usize = 256;

/// Octets read from a socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Replies (or requests) already queued are written together up to this size: under
/// pipelining, one system call carries many frames.
const COALESCE: usize = 64 * 1024;

/// The request id of Error frames about the connection rather than one request.
const CONNECTION_ID: u64 = 0;

/// The request id of the client's keep-alive requests (its own ids count up from 1 and
/// never get here); their replies go to no caller.
const KEEPALIVE_ID: u64 = u64::MAX;

/// A [`RawClient`] with no request for this long sends a keep-alive (a Describe), well
/// within the default [`RawLimits::idle_timeout`].
pub const KEEPALIVE: Duration = Duration::from_secs(30);

/// The limits of a raw-TCP switch server; [`Default`] gives what a switch server uses
/// unless its configuration says otherwise (docs/live.md, "Limits").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLimits {
    /// The accept loop's: the TLS handshake time-out, the caps on pending handshakes,
    /// the summary interval.
    pub accept: AcceptLimits,
    /// A connection that sends nothing for this long, with no request of its running, is
    /// closed (default 120 s: four times a [`RawClient`]'s [`KEEPALIVE`]).
    pub idle_timeout: Duration,
    /// Connections open at once in all (default 1,024); past it a new one is closed at
    /// once.
    pub max_connections: usize,
    /// Connections open at once from one source address (default 64).
    pub max_connections_per_addr: usize,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            accept: AcceptLimits::default(),
            idle_timeout: Duration::from_secs(120),
            max_connections: 1024,
            max_connections_per_addr: 64,
        }
    }
}

/// How a served connection ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The peer closed it (after its replies were written).
    Closed,
    /// It sent nothing for the idle time-out and was closed.
    Idle,
}

/// Encodes a reply, falling back to an Error frame when it cannot be sent (a listing
/// beyond the 16 MiB frame maximum), so the request still gets an answer.
fn encode_reply(id: u64, message: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    if let Err(e) = message.emit(id, &mut out) {
        warn!(id, error = %e, "reply cannot be encoded; answering with an error");
        out.clear();
        Message::Error(e)
            .emit(id, &mut out)
            .expect("an error frame with a short text fits a frame");
    }
    out
}

/// Answers one connection until the peer closes it (after the replies to everything it
/// sent have been written), the stream fails, or the peer sends octets that cannot be
/// framed (answered with an Error frame of id 0 before closing).
///
/// Requests run concurrently on their own tasks (at most [`MAX_IN_FLIGHT`]); each reply
/// carries its request's id. Dropping the future aborts the requests still running and
/// closes the stream.
pub async fn serve_raw<B, S>(stream: S, backend: B) -> io::Result<()>
where
    B: SwitchBackend,
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    serve_raw_with(stream, backend, None).await.map(|_| ())
}

/// [`serve_raw`], closing the connection when it has sent nothing for `idle` (if given)
/// while none of its requests runs: it then gets an Error frame of id 0 saying so, and
/// its write side is shut down, so the peer reads the end of the stream.
pub async fn serve_raw_with<B, S>(
    stream: S,
    backend: B,
    idle: Option<Duration>,
) -> io::Result<Ended>
where
    B: SwitchBackend,
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
    let (read, write) = tokio::join!(read_requests(rd, backend, tx, idle), write_frames(wr, rx));
    let ended = read?;
    write.map(|()| ended)
}

async fn read_requests<R, B>(
    mut rd: R,
    backend: B,
    tx: mpsc::Sender<Vec<u8>>,
    idle: Option<Duration>,
) -> io::Result<Ended>
where
    R: AsyncRead + Unpin,
    B: SwitchBackend,
{
    let mut decoder = FrameDecoder::new();
    let mut tasks = JoinSet::new();
    let mut buf = vec![0u8; READ_CHUNK];
    // Moved on by every read and every answered request.
    let mut quiet_since = tokio::time::Instant::now();
    let result = 'read: loop {
        // Start what is buffered, up to the bound.
        while tasks.len() < MAX_IN_FLIGHT {
            match decoder.poll_frame() {
                Ok(Some(Decoded::Frame(frame))) => {
                    let (backend, tx) = (backend.clone(), tx.clone());
                    tasks.spawn(answer(backend, frame.id, frame.message, tx));
                }
                Ok(Some(Decoded::Malformed { id, error })) => {
                    debug!(id, %error, "malformed request");
                    if tx
                        .send(encode_reply(id, &Message::Error(error)))
                        .await
                        .is_err()
                    {
                        break 'read Ok(Ended::Closed);
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    warn!(%error, "stream out of step; closing");
                    let _ = tx
                        .send(encode_reply(CONNECTION_ID, &Message::Error(error.clone())))
                        .await;
                    break 'read Err(io::Error::new(io::ErrorKind::InvalidData, error));
                }
            }
        }
        let idle_at = idle.map(|d| quiet_since + d);
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                quiet_since = tokio::time::Instant::now();
                if let Err(e) = joined {
                    warn!(error = %e, "request task failed");
                }
            }
            // The writer is gone (the stream broke): nothing read could be answered.
            () = tx.closed() => break Ok(Ended::Closed),
            n = rd.read(&mut buf), if tasks.len() < MAX_IN_FLIGHT => match n {
                Ok(0) => break Ok(Ended::Closed),
                Ok(n) => {
                    quiet_since = tokio::time::Instant::now();
                    decoder.handle_bytes(&buf[..n]);
                }
                Err(e) => break Err(e),
            },
            () = sleep_until_some(idle_at), if tasks.is_empty() => {
                let idle = idle.unwrap_or_default();
                debug!(?idle, "closing an idle connection");
                let why = FabricError::Unavailable(format!(
                    "the switch server closes a connection idle for {idle:?}"
                ));
                let _ = tx.send(encode_reply(CONNECTION_ID, &Message::Error(why))).await;
                break Ok(Ended::Idle);
            }
        }
    };
    // The peer may have half-closed after its last request: its replies still go out.
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            warn!(error = %e, "request task failed");
        }
    }
    result
}

/// Sleeps until `at`, or for ever without it.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends an Error frame for a request whose task ends without answering (the backend
/// panicked), so the client is not left waiting for an id that will never come.
struct AnswerGuard {
    id: u64,
    tx: mpsc::Sender<Vec<u8>>,
    answered: bool,
}

impl Drop for AnswerGuard {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let frame = encode_reply(
            self.id,
            &Message::Error(FabricError::Unavailable(
                "the switch server failed while answering".into(),
            )),
        );
        if let Err(mpsc::error::TrySendError::Full(frame)) = self.tx.try_send(frame)
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let tx = self.tx.clone();
            rt.spawn(async move {
                let _ = tx.send(frame).await;
            });
        }
    }
}

async fn answer<B: SwitchBackend>(
    backend: B,
    id: u64,
    request: Message,
    tx: mpsc::Sender<Vec<u8>>,
) {
    let mut guard = AnswerGuard {
        id,
        tx,
        answered: false,
    };
    let reply = match request {
        Message::ExecuteRequest {
            atomicity,
            commands,
        } => backend
            .execute(commands, atomicity)
            .await
            .map(|results| Message::ExecuteReply { results }),
        Message::DescribeRequest => backend.describe().await.map(Message::DescribeReply),
        Message::ListConnectionsRequest => backend
            .connections()
            .await
            .map(Message::ListConnectionsReply),
        Message::ListReservationsRequest => backend
            .reservations()
            .await
            .map(Message::ListReservationsReply),
        other => {
            debug!(id, kind = ?other.message_type(), "a reply sent as a request");
            Err(FabricError::Frame("not a request"))
        }
    };
    let frame = encode_reply(id, &reply.unwrap_or_else(Message::Error));
    guard.answered = true;
    // A closed channel means the connection is gone; the reply has nowhere to go.
    let _ = guard.tx.send(frame).await;
}

/// Puts `first` and whatever is already queued behind it (`more` yields it without
/// waiting) into `out`, up to [`COALESCE`] octets, so that one write carries them all.
fn coalesce(out: &mut Vec<u8>, first: &[u8], mut more: impl FnMut() -> Option<Vec<u8>>) {
    out.clear();
    out.extend_from_slice(first);
    while out.len() < COALESCE {
        match more() {
            Some(frame) => out.extend_from_slice(&frame),
            None => break,
        }
    }
}

/// Writes queued frames, coalescing what is already queued into one write, until every
/// sender is gone; then shuts the write side down.
async fn write_frames<W>(mut wr: W, mut rx: mpsc::Receiver<Vec<u8>>) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut out = Vec::with_capacity(COALESCE);
    while let Some(first) = rx.recv().await {
        coalesce(&mut out, &first, || rx.try_recv().ok());
        wr.write_all(&out).await?;
        // A TLS stream buffers until flushed.
        wr.flush().await?;
    }
    wr.shutdown().await
}

/// Accepts plain TCP connections (TCP_NODELAY set) and serves each with [`serve_raw`]
/// on its own task under the default [`RawLimits`], until the future is dropped or its
/// task aborted, which closes every connection it accepted. [`run_raw_server`] takes
/// TLS and limits.
pub async fn run_raw_listener<B: SwitchBackend>(listener: TcpListener, backend: B) {
    run_raw_server(
        listener,
        backend,
        None,
        &RawLimits::default(),
        IncomingStats::default(),
        Arc::default(),
    )
    .await
}

/// Accepts connections on `listener` (with `tls`, mutual TLS: use
/// `TlsIdentity::acceptor`) and serves each on its own task under `limits`, counting
/// refusals into `stats` (readable while it runs), until the future is dropped or its
/// task aborted, which closes every connection it accepted. Each connection's commands
/// run with its certificate's rights ([`Authorized`]); commands refused for them are
/// counted in `authz`.
///
/// The accept loop is `atmlab_rpc::tls::incoming_with`: handshakes run concurrently,
/// each within the time-out, bounded per source address and in all. A connection over
/// [`RawLimits::max_connections_per_addr`] or [`RawLimits::max_connections`] is closed
/// at once; one idle for [`RawLimits::idle_timeout`] is closed ([`serve_raw_with`]).
/// Each is counted, and the accept loop logs one summary line per interval.
pub async fn run_raw_server<B: SwitchBackend>(
    listener: TcpListener,
    backend: B,
    tls: Option<TlsAcceptor>,
    limits: &RawLimits,
    stats: IncomingStats,
    authz: Arc<AuthzStats>,
) {
    let local = listener.local_addr().ok();
    let mut incoming = atmlab_rpc::tls::incoming_with(listener, tls, &limits.accept, stats.clone());
    info!(addr = ?local, "raw switch server listening");
    // Owning the connection tasks here means dropping this future closes them all.
    let mut conns = JoinSet::new();
    let mut open = OpenConnections::default();
    loop {
        tokio::select! {
            next = incoming.next() => {
                // The stream never ends nor fails while it is held.
                let Some(Ok(stream)) = next else { return };
                let Ok(peer) = stream.peer_addr() else { continue };
                let source = atmlab_rpc::tls::source_key(peer.ip());
                if open.from(source) >= limits.max_connections_per_addr {
                    stats.refuse(
                        Refusal::ConnectionsPerAddr,
                        &format_args!(
                            "{peer}: {} connections already open from {source}",
                            limits.max_connections_per_addr,
                        ),
                    );
                    continue;
                }
                if conns.len() >= limits.max_connections {
                    stats.refuse(
                        Refusal::ConnectionsTotal,
                        &format_args!(
                            "{peer}: {} connections already open",
                            limits.max_connections
                        ),
                    );
                    continue;
                }
                // Each connection's commands run with its certificate's rights.
                let caller = atmlab_rpc::tls::Caller::from_peer(
                    &tonic::transport::server::Connected::connect_info(&stream),
                );
                let backend = Authorized::new(backend.clone(), caller, authz.clone());
                let stats = stats.clone();
                let idle = limits.idle_timeout;
                let span = tracing::info_span!("raw", %peer);
                let task = conns.spawn(
                    async move {
                        debug!("accepted");
                        match serve_raw_with(stream, backend, Some(idle)).await {
                            Ok(Ended::Closed) => debug!("closed"),
                            Ok(Ended::Idle) => stats.refuse(
                                Refusal::Idle,
                                &format_args!("{peer}: sent nothing for {idle:?}"),
                            ),
                            // A client that exits without a TLS close_notify is
                            // the common way for a connection to end, not a fault.
                            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                                debug!(error = %e, "connection ended without close_notify")
                            }
                            Err(e) => debug!(error = %e, "connection ended"),
                        }
                    }
                    .instrument(span),
                );
                open.add(task.id(), source);
            }
            Some(joined) = conns.join_next_with_id(), if !conns.is_empty() => match joined {
                Ok((id, ())) => open.done(id),
                Err(e) => {
                    open.done(e.id());
                    warn!(error = %e, "connection task failed");
                }
            },
        }
    }
}

/// Open connections by source address, so that one address over its cap is refused
/// without refusing the others.
#[derive(Default)]
struct OpenConnections {
    by_addr: HashMap<IpAddr, usize>,
    by_task: HashMap<tokio::task::Id, IpAddr>,
}

impl OpenConnections {
    fn from(&self, ip: IpAddr) -> usize {
        self.by_addr.get(&ip).copied().unwrap_or(0)
    }

    fn add(&mut self, task: tokio::task::Id, ip: IpAddr) {
        *self.by_addr.entry(ip).or_insert(0) += 1;
        self.by_task.insert(task, ip);
    }

    fn done(&mut self, task: tokio::task::Id) {
        let Some(ip) = self.by_task.remove(&task) else {
            return;
        };
        if let Some(n) = self.by_addr.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.by_addr.remove(&ip);
            }
        }
    }
}

// ----- the client ---------------------------------------------------------------------

type Waiter = oneshot::Sender<Result<Message, FabricError>>;

/// What the caller-side handle and the reader and writer tasks share.
struct Shared {
    state: Mutex<State>,
    /// Set once, when the connection is closed; wakes the reader and writer tasks.
    closed: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Waiter>,
    /// Why the connection is closed, once it is.
    closed: Option<String>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent under every operation, so a panic elsewhere while
        // holding the lock leaves nothing half done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the connection closed and fails every pending call; later calls fail at
    /// once. The first reason given is kept.
    fn close(&self, why: String) {
        let waiters: Vec<Waiter> = {
            let mut st = self.lock();
            if st.closed.is_none() {
                debug!(reason = %why, "raw client connection closed");
                st.closed = Some(why);
            }
            st.pending.drain().map(|(_, w)| w).collect()
        };
        let why = self.reason();
        for w in waiters {
            let _ = w.send(Err(FabricError::Unavailable(why.clone())));
        }
        self.closed.send_replace(true);
    }

    fn reason(&self) -> String {
        self.lock()
            .closed
            .clone()
            .unwrap_or_else(|| "the connection is closed".into())
    }

    fn deliver(&self, id: u64, reply: Result<Message, FabricError>) {
        let waiter = self.lock().pending.remove(&id);
        match waiter {
            // The caller may have given up (its future dropped): nothing to do.
            Some(w) => {
                let _ = w.send(reply);
            }
            None if id == KEEPALIVE_ID => {}
            None if id == CONNECTION_ID => {
                warn!(reply = ?reply, "the raw switch server reports a connection error");
            }
            None => debug!(id, "reply to no pending request"),
        }
    }
}

/// The part of a [`RawClient`] its clones share; dropping the last closes the connection.
struct Handle {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close("the client was dropped".into());
    }
}

/// Removes a call's entry when the call's future is dropped before its reply arrives.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().pending.remove(&self.id);
    }
}

/// A client of the raw switch protocol, pipelined: any number of calls may be
/// outstanding on its one connection, from any number of tasks (it is cheap to clone;
/// the clones share the connection).
///
/// When the server goes away (the stream ends or fails, or sends octets that cannot be
/// framed), every outstanding call fails at once with [`FabricError::Unavailable`], and
/// so does every later call: the client does not reconnect; make a new one.
#[derive(Clone)]
pub struct RawClient {
    inner: Arc<Handle>,
}

impl std::fmt::Debug for RawClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.shared.lock();
        f.debug_struct("RawClient")
            .field("pending", &st.pending.len())
            .field("closed", &st.closed)
            .finish()
    }
}

impl RawClient {
    /// Connects over plain TCP, with TCP_NODELAY.
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> Result<RawClient, FabricError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| FabricError::Unavailable(format!("cannot connect: {e}")))?;
        tcp.set_nodelay(true)
            .map_err(|e| FabricError::Unavailable(format!("cannot set TCP_NODELAY: {e}")))?;
        Ok(RawClient::new(tcp))
    }

    /// A client over an established stream (a TCP socket, or TLS over one). Spawns its
    /// reader and writer tasks, so it must be called inside a tokio runtime.
    pub fn new<S>(stream: S) -> RawClient
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        RawClient::with_keepalive(stream, KEEPALIVE)
    }

    /// [`RawClient::new`], sending a keep-alive after `keepalive` without a request
    /// instead of [`KEEPALIVE`] (for a server whose idle time-out is shorter than the
    /// default's).
    pub fn with_keepalive<S>(stream: S, keepalive: Duration) -> RawClient
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (rd, wr) = tokio::io::split(stream);
        let (tx, rx) = mpsc::unbounded_channel();
        let (closed, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            closed,
        });
        tokio::spawn(read_replies(rd, shared.clone()));
        tokio::spawn(write_requests(wr, rx, shared.clone(), keepalive));
        RawClient {
            inner: Arc::new(Handle {
                tx,
                shared,
                // Id 0 names the connection in Error frames; requests start at 1.
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// Whether the connection is closed (every call now fails with `Unavailable`).
    pub fn is_closed(&self) -> bool {
        self.inner.shared.lock().closed.is_some()
    }

    /// Sends one request and waits for its reply; an Error frame comes back as `Err`.
    async fn call(&self, request: Message) -> Result<Message, FabricError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = Vec::new();
        request.emit(id, &mut frame)?;
        drop(request);
        let shared = &*self.inner.shared;
        let (tx, rx) = oneshot::channel();
        {
            // Registered before sending: the reply may come back before `send` returns.
            let mut st = shared.lock();
            if let Some(why) = &st.closed {
                return Err(FabricError::Unavailable(why.clone()));
            }
            st.pending.insert(id, tx);
        }
        let _guard = PendingGuard { shared, id };
        if self.inner.tx.send(frame).is_err() {
            return Err(FabricError::Unavailable(shared.reason()));
        }
        match rx.await {
            Ok(Ok(Message::Error(e))) => Err(e),
            Ok(reply) => reply,
            // Dropped without an answer: only `close` drains waiters, after setting why.
            Err(_) => Err(FabricError::Unavailable(shared.reason())),
        }
    }
}

async fn read_replies<R>(mut rd: R, shared: Arc<Shared>)
where
    R: AsyncRead + Unpin,
{
    let mut closed = shared.closed.subscribe();
    let mut decoder = FrameDecoder::new();
    let mut buf = vec![0u8; READ_CHUNK];
    let why = 'read: loop {
        let n = tokio::select! {
            // Closed elsewhere (the client dropped, or the writer failed).
            _ = closed.wait_for(|c| *c) => return,
            n = rd.read(&mut buf) => n,
        };
        match n {
            Ok(0) => break "the switch server closed the connection".to_string(),
            Ok(n) => decoder.handle_bytes(&buf[..n]),
            Err(e) => break format!("reading from the switch server: {e}"),
        }
        loop {
            match decoder.poll_frame() {
                Ok(Some(Decoded::Frame(f))) => shared.deliver(f.id, Ok(f.message)),
                Ok(Some(Decoded::Malformed { id, error })) => shared.deliver(id, Err(error)),
                Ok(None) => break,
                Err(e) => break 'read format!("the switch server sent an undecodable stream: {e}"),
            }
        }
    };
    shared.close(why);
}

/// The keep-alive request.
fn keepalive() -> Vec<u8> {
    let mut frame = Vec::new();
    Message::DescribeRequest
        .emit(KEEPALIVE_ID, &mut frame)
        .expect("a Describe request fits a frame");
    frame
}

async fn write_requests<W>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    shared: Arc<Shared>,
    keepalive_after: Duration,
) where
    W: AsyncWrite + Unpin,
{
    let mut closed = shared.closed.subscribe();
    let mut out = Vec::with_capacity(COALESCE);
    loop {
        let first = tokio::select! {
            m = rx.recv() => m,
            _ = closed.wait_for(|c| *c) => None,
            // Quiet for a while: a request whose reply goes to no one, so that the
            // server's idle time-out does not close a client that is only quiet.
            () = tokio::time::sleep(keepalive_after) => Some(keepalive()),
        };
        let Some(first) = first else { break };
        coalesce(&mut out, &first, || rx.try_recv().ok());
        let written = tokio::select! {
            r = async {
                wr.write_all(&out).await?;
                wr.flush().await
            } => r,
            _ = closed.wait_for(|c| *c) => break,
        };
        if let Err(e) = written {
            shared.close(format!("writing to the switch server: {e}"));
            return;
        }
    }
    let _ = wr.shutdown().await;
}

impl SwitchBackend for RawClient {
    async fn execute(
        &self,
        commands: Vec<Command>,
        atomicity: Atomicity,
    ) -> Result<BatchResult, FabricError> {
        let n = commands.len();
        match self
            .call(Message::ExecuteRequest {
                atomicity,
                commands,
            })
            .await?
        {
            Message::ExecuteReply { results } if results.len() == n => Ok(results),
            Message::ExecuteReply { .. } => Err(FabricError::Frame(
                "the reply has a different number of results than the batch had commands",
            )),
            _ => Err(FabricError::Frame("a reply of the wrong type")),
        }
    }

    async fn describe(&self) -> Result<Description, FabricError> {
        match self.call(Message::DescribeRequest).await? {
            Message::DescribeReply(d) => Ok(d),
            _ => Err(FabricError::Frame("a reply of the wrong type")),
        }
    }

    async fn connections(&self) -> Result<Vec<Connection>, FabricError> {
        match self.call(Message::ListConnectionsRequest).await? {
            Message::ListConnectionsReply(cs) => Ok(cs),
            _ => Err(FabricError::Frame("a reply of the wrong type")),
        }
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, FabricError> {
        match self.call(Message::ListReservationsRequest).await? {
            Message::ListReservationsReply(rs) => Ok(rs),
            _ => Err(FabricError::Frame("a reply of the wrong type")),
        }
    }
}
