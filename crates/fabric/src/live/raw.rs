//! The raw-TCP switch server and client (paper 001 §3.2.3: ReTINA's raw socket interface
//! to the connection server; §3.4: the hybrid, a CORBA proxy forwarding over it): the
//! tokio shell around the codec of [`crate::raw`].
//!
//! - [`serve_raw`] answers one connection over any byte stream (plain TCP, or TLS
//!   wrapped by the caller), pipelined: it reads frames continuously, runs each request
//!   on its own task against a [`SwitchBackend`], and writes each reply, tagged with its
//!   request's id, as soon as it is ready, so replies may overtake each other.
//! - [`run_raw_listener`] accepts plain TCP connections; [`run_raw_listener_with`] runs
//!   an accept hook on each first (a TLS handshake, which the TLS front end passes in).
//! - [`RawClient`] connects, keeps any number of requests outstanding (a writer task, a
//!   reader task and a map from request id to the waiting caller), and is itself a
//!   [`SwitchBackend`], so a gRPC server can sit on it (the proxy of §3.4).
//!
//! Every TCP socket gets TCP_NODELAY: a request is one small segment, and Nagle's
//! algorithm would hold it back waiting for the previous reply's ACK (paper 000 measured
//! the switch server's latency, not the OS's coalescing).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, warn};

use crate::error::FabricError;
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
    let (rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
    let (read, write) = tokio::join!(read_requests(rd, backend, tx), write_frames(wr, rx));
    read.and(write)
}

async fn read_requests<R, B>(mut rd: R, backend: B, tx: mpsc::Sender<Vec<u8>>) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    B: SwitchBackend,
{
    let mut decoder = FrameDecoder::new();
    let mut tasks = JoinSet::new();
    let mut buf = vec![0u8; READ_CHUNK];
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
                        break 'read Ok(());
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
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = joined {
                    warn!(error = %e, "request task failed");
                }
            }
            // The writer is gone (the stream broke): nothing read could be answered.
            () = tx.closed() => break Ok(()),
            n = rd.read(&mut buf), if tasks.len() < MAX_IN_FLIGHT => match n {
                Ok(0) => break Ok(()),
                Ok(n) => decoder.handle_bytes(&buf[..n]),
                Err(e) => break Err(e),
            },
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
/// on its own task, until the future is dropped or its task aborted, which closes every
/// connection it accepted. The TLS front end uses [`run_raw_listener_with`].
pub async fn run_raw_listener<B: SwitchBackend>(listener: TcpListener, backend: B) {
    run_raw_listener_with(listener, backend, |tcp| std::future::ready(Ok(tcp))).await
}

/// [`run_raw_listener`] with an accept hook: each accepted socket (TCP_NODELAY already
/// set) goes through `accept`, e.g. a TLS handshake, on the connection's own task, so a
/// slow handshake holds up no other client. A connection whose hook fails is logged and
/// closed.
pub async fn run_raw_listener_with<B, A, F, S>(listener: TcpListener, backend: B, accept: A)
where
    B: SwitchBackend,
    A: Fn(TcpStream) -> F + Send,
    F: Future<Output = io::Result<S>> + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let local = listener.local_addr().ok();
    info!(addr = ?local, "raw switch server listening");
    // Owning the connection tasks here means dropping this future closes them all.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    if let Err(e) = tcp.set_nodelay(true) {
                        warn!(%peer, error = %e, "cannot set TCP_NODELAY");
                    }
                    let handshake = accept(tcp);
                    let backend = backend.clone();
                    let span = tracing::info_span!("raw", %peer);
                    conns.spawn(
                        async move {
                            debug!("accepted");
                            let stream = match handshake.await {
                                Ok(s) => s,
                                Err(e) => {
                                    warn!(error = %e, "accept hook refused the connection");
                                    return;
                                }
                            };
                            match serve_raw(stream, backend).await {
                                Ok(()) => debug!("closed"),
                                // A client that exits without a TLS close_notify is
                                // the common way for a connection to end, not a fault.
                                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                                    debug!(error = %e, "connection ended without close_notify")
                                }
                                Err(e) => warn!(error = %e, "connection ended"),
                            }
                        }
                        .instrument(span),
                    );
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            Some(joined) = conns.join_next(), if !conns.is_empty() => {
                if let Err(e) = joined {
                    warn!(error = %e, "connection task failed");
                }
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
        let (rd, wr) = tokio::io::split(stream);
        let (tx, rx) = mpsc::unbounded_channel();
        let (closed, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            closed,
        });
        tokio::spawn(read_replies(rd, shared.clone()));
        tokio::spawn(write_requests(wr, rx, shared.clone()));
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

async fn write_requests<W>(mut wr: W, mut rx: mpsc::UnboundedReceiver<Vec<u8>>, shared: Arc<Shared>)
where
    W: AsyncWrite + Unpin,
{
    let mut closed = shared.closed.subscribe();
    let mut out = Vec::with_capacity(COALESCE);
    loop {
        let first = tokio::select! {
            m = rx.recv() => m,
            _ = closed.wait_for(|c| *c) => None,
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
