//! The call generator (paper 000 §III-B: "a call generator ... generates calls according
//! to a Poisson process" and measures setup latency and throughput): Poisson arrivals at
//! rate lambda, exponential (or fixed) holding times, endpoint pairs, and a latency
//! histogram (HdrHistogram) of every setup.
//!
//! It drives any [`CallTarget`]: a connection manager in the same process (its
//! [`CmHandle`]) or a remote one over gRPC: one unary round trip per setup and release
//! ([`RemoteCm`]), or all of them pipelined on one stream ([`StreamCm`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_rpc::v1 as pb;
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

use atmlab_control::cm::core::CallError;
use atmlab_control::cm::live::CmHandle;

/// Something calls can be placed with.
pub trait CallTarget: Clone + Send + Sync + 'static {
    /// Sets up a call; returns its id.
    fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> impl std::future::Future<Output = Result<u64, CallError>> + Send;
    /// Releases it.
    fn release(&self, id: u64) -> impl std::future::Future<Output = Result<(), CallError>> + Send;
    /// For a setup the target turns away before any work (an overloaded manager's
    /// closed door), how to build its refusal; None if it would take the call. The
    /// generator counts such a refusal without starting a call's task, and builds the
    /// error once: past the knee most arrivals are refusals, and a task, a lock and a
    /// cause's string each took the cores the manager was carrying calls on.
    fn refuse_now(&self) -> Option<fn() -> CallError> {
        None
    }
}

impl CallTarget for CmHandle {
    async fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> Result<u64, CallError> {
        self.add(source, destination, traffic, 0.0, "callgen")
            .await
            .map(|i| i.view.id)
    }

    async fn release(&self, id: u64) -> Result<(), CallError> {
        self.delete(id).await
    }

    fn refuse_now(&self) -> Option<fn() -> CallError> {
        self.refused_at_the_door()
            .then_some(CmHandle::door_refusal as fn() -> CallError)
    }
}

/// A remote connection manager over gRPC.
#[derive(Clone, Debug)]
pub struct RemoteCm {
    client: pb::connection_manager_client::ConnectionManagerClient<tonic::transport::Channel>,
}

impl RemoteCm {
    /// A client on an open channel.
    pub fn new(channel: tonic::transport::Channel) -> Self {
        RemoteCm {
            client: pb::connection_manager_client::ConnectionManagerClient::new(channel),
        }
    }
}

fn status_error(s: tonic::Status) -> CallError {
    use tonic::Code;
    let kind = match s.code() {
        // The transport's failures (tonic reports a broken connection as Unknown, a
        // request it gave up as Cancelled): the manager may or may not have acted.
        Code::Unknown | Code::Cancelled | Code::DeadlineExceeded | Code::Internal => {
            atmlab_fabric::ErrorKind::Unavailable
        }
        code => atmlab_fabric::ErrorKind::from_code(code as i32),
    };
    // A server without the ConnectionManager service (the name service's or a switch's
    // port given as --cm) answers UNIMPLEMENTED with no message: say what that means.
    let message = match (s.code(), s.message()) {
        (Code::Unimplemented, "") => {
            "wrong service: the server there is not a connection manager".to_string()
        }
        (_, m) => m.to_string(),
    };
    CallError { kind, message }
}

/// Tries of a release whose answer was lost before the call counts as failed.
const RELEASE_TRIES: u32 = 3;

/// Releases call `id`, again when the answer is lost on the way (the connection broke):
/// a release left undone would hold the connection up for good. A repeat that finds the
/// call gone means an earlier try did release it.
async fn release_reliably<T: CallTarget>(t: &T, id: u64) -> Result<(), CallError> {
    let mut tries = 1;
    loop {
        match t.release(id).await {
            Ok(()) => return Ok(()),
            Err(e) if tries > 1 && e.kind == atmlab_fabric::ErrorKind::NotFound => return Ok(()),
            Err(e) if tries < RELEASE_TRIES && e.kind == atmlab_fabric::ErrorKind::Unavailable => {
                tokio::time::sleep(Duration::from_millis(10 << tries)).await;
                tries += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

impl CallTarget for RemoteCm {
    async fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> Result<u64, CallError> {
        let req = setup_request(source, destination, traffic);
        let r = self
            .client
            .clone()
            .add_connection(req)
            .await
            .map_err(status_error)?;
        Ok(r.into_inner().id)
    }

    async fn release(&self, id: u64) -> Result<(), CallError> {
        self.client
            .clone()
            .delete_connection(pb::DeleteConnectionRequest { id })
            .await
            .map_err(status_error)?;
        Ok(())
    }
}

/// A remote connection manager over one `Calls` stream (cm.proto, issue 28): every
/// setup and release is a request on the stream with an id of ours, and its reply, which
/// may come before those of requests sent earlier, is matched to it by that id. Many
/// calls are in flight on the stream at once instead of one unary round trip each; the
/// server reads no further while its bound of requests in flight is unanswered, and
/// HTTP/2 flow control then holds our sends back.
///
/// A setup whose caller stopped waiting (it gave up at its deadline) is released when
/// its answer comes, never left up.
#[derive(Clone, Debug)]
pub struct StreamCm {
    inner: Arc<StreamShared>,
    tx: tokio::sync::mpsc::Sender<pb::CallRequest>,
}

/// What a stream's callers share with its reader.
#[derive(Debug, Default)]
struct StreamShared {
    next: std::sync::atomic::AtomicU64,
    /// Requests sent and not answered: each caller's waiter, by request id.
    pending: Mutex<std::collections::HashMap<u64, tokio::sync::oneshot::Sender<CallOutcome>>>,
    /// Set (before `pending` is emptied) when the reply stream has ended.
    closed: std::sync::atomic::AtomicBool,
}

type CallOutcome = Option<pb::call_reply::Result>;

/// Requests queued to a stream before a caller waits to send (the stream's own bound is
/// the server's).
const STREAM_QUEUE: usize = 1024;

impl StreamCm {
    /// Opens a Calls stream on an open channel.
    pub async fn open(channel: tonic::transport::Channel) -> Result<Self, CallError> {
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_QUEUE);
        let mut client = pb::connection_manager_client::ConnectionManagerClient::new(channel);
        let mut replies = client
            .calls(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .map_err(status_error)?
            .into_inner();
        let inner = Arc::new(StreamShared::default());
        let shared = inner.clone();
        let releases = tx.clone();
        tokio::spawn(async move {
            loop {
                let reply = match replies.message().await {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!("the Calls stream ended: {e}");
                        break;
                    }
                };
                let waiter = shared
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&reply.id);
                let outcome = reply.result;
                let undelivered = match waiter {
                    Some(w) => w.send(outcome).err().flatten(),
                    // The reply to a release of ours (below), or to nothing we sent.
                    None => None,
                };
                // A setup nobody waits for any more: release it on the same stream (its
                // reply has no waiter and is dropped).
                if let Some(pb::call_reply::Result::Info(info)) = undelivered {
                    let id = shared
                        .next
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let release = pb::CallRequest {
                        id,
                        op: Some(pb::call_request::Op::Release(pb::DeleteConnectionRequest {
                            id: info.id,
                        })),
                    };
                    if releases.send(release).await.is_err() {
                        tracing::warn!(id = info.id, "an abandoned setup could not be released");
                    }
                }
            }
            shared
                .closed
                .store(true, std::sync::atomic::Ordering::SeqCst);
            shared
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        });
        Ok(StreamCm { inner, tx })
    }

    /// Sends `op` and waits for its reply.
    async fn call(&self, op: pb::call_request::Op) -> Result<pb::call_reply::Result, CallError> {
        let gone = || CallError {
            kind: atmlab_fabric::ErrorKind::Unavailable,
            message: "the Calls stream ended".into(),
        };
        let id = self
            .inner
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (w, answer) = tokio::sync::oneshot::channel();
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, w);
        // Inserted before the check: a reader that ends after it empties `pending` and
        // drops the waiter; one that ended before it set `closed` first.
        if self.inner.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(gone());
        }
        let req = pb::CallRequest { id, op: Some(op) };
        self.tx.send(req).await.map_err(|_| gone())?;
        match answer.await.map_err(|_| gone())? {
            Some(pb::call_reply::Result::Error(e)) => Err(status_error(tonic::Status::new(
                tonic::Code::from_i32(e.code),
                e.message,
            ))),
            Some(r) => Ok(r),
            None => Err(CallError {
                kind: atmlab_fabric::ErrorKind::Unavailable,
                message: "a Calls reply with no result".into(),
            }),
        }
    }
}

impl CallTarget for StreamCm {
    async fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> Result<u64, CallError> {
        match self
            .call(pb::call_request::Op::Setup(setup_request(
                source,
                destination,
                traffic,
            )))
            .await?
        {
            pb::call_reply::Result::Info(i) => Ok(i.id),
            other => Err(CallError {
                kind: atmlab_fabric::ErrorKind::Unavailable,
                message: format!("a setup answered {other:?}"),
            }),
        }
    }

    async fn release(&self, id: u64) -> Result<(), CallError> {
        self.call(pb::call_request::Op::Release(pb::DeleteConnectionRequest {
            id,
        }))
        .await
        .map(|_| ())
    }
}

/// The AddConnection request of a call of callgen's.
fn setup_request(
    source: &str,
    destination: &str,
    traffic: TrafficDescriptor,
) -> pb::AddConnectionRequest {
    pb::AddConnectionRequest {
        source: source.into(),
        destinations: vec![destination.into()],
        qos: None,
        cell_qos: Some(pb::CellQos {
            traffic: Some(atmlab_fabric::live::convert::pb_traffic(&traffic, 0.0)),
            ..Default::default()
        }),
        tag: "callgen".into(),
    }
}

/// A connection manager found by its registered name (`cm/NAME`) in the name service,
/// and found again when it stops answering (issue 26, item 3): when an active manager
/// dies, the standby that takes over registers the same name, and the calls go on
/// through it. A setup the lost manager may have acted on fails (its answer is lost: the
/// call may be up, journaled, and taken back by the new leader, or not); the setups after
/// it wait, up to `patience`, for a manager to answer at the name; a release is retried
/// there (the new leader holds every call the old one acknowledged).
#[derive(Clone, Debug)]
pub struct NamedCm {
    names: atmlab_control::names::NameClient,
    name: String,
    tls: Option<atmlab_rpc::tls::TlsIdentity>,
    state: Arc<tokio::sync::Mutex<Found>>,
    patience: Duration,
}

/// The manager found at the name, how many were found before it, and when a look
/// gave up last (nobody answered at the name for a whole `patience`).
#[derive(Debug, Default)]
struct Found {
    current: Option<(u64, RemoteCm)>,
    found: u64,
    gave_up: Option<Instant>,
}

impl NamedCm {
    /// The manager registered as `cm/NAME` in `names`, reached with `tls`; setups and
    /// releases wait up to `patience` for one to answer there.
    pub fn new(
        names: atmlab_control::names::NameClient,
        name: &str,
        tls: Option<atmlab_rpc::tls::TlsIdentity>,
        patience: Duration,
    ) -> Self {
        NamedCm {
            names,
            name: name.trim_start_matches("cm/").to_string(),
            tls,
            state: Default::default(),
            patience,
        }
    }

    /// The manager at the name: the one found last, unless it failed; else found again
    /// (one caller looks, the others wait for what it finds). Connecting is part of
    /// finding: a manager that does not take the connection was sent nothing.
    async fn connected(&self) -> Result<(u64, RemoteCm), CallError> {
        let asked = Instant::now();
        let name = format!("cm/{}", self.name);
        let nobody = |why: &str| CallError {
            kind: atmlab_fabric::ErrorKind::Unavailable,
            message: format!(
                "no connection manager answered at {name} within {:?}{why}",
                self.patience
            ),
        };
        let mut st = self.state.lock().await;
        if let Some(c) = &st.current {
            return Ok(c.clone());
        }
        // Another caller looked for the whole patience while this one waited for the
        // lock: give up with it, rather than each waiting caller looking again in turn.
        if st.gave_up.is_some_and(|t| t >= asked) {
            return Err(nobody(""));
        }
        let deadline = asked + self.patience;
        loop {
            let why = match self.names.resolve(&name).await {
                Ok((obj, _)) => {
                    // A manager's certificate is named as it registers: an entry
                    // pointed elsewhere is refused at the handshake.
                    let this_manager = atmlab_rpc::tls::Expect::object(
                        atmlab_rpc::tls::Role::Cm,
                        self.name.as_str(),
                    );
                    match atmlab_rpc::channel_to(&obj.address, self.tls.as_ref(), this_manager)
                        .await
                    {
                        Ok(ch) => {
                            st.found += 1;
                            let c = (st.found, RemoteCm::new(ch));
                            st.current = Some(c.clone());
                            return Ok(c);
                        }
                        Err(e) => format!("{name} at {}: {e}", obj.address),
                    }
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                st.gave_up = Some(Instant::now());
                return Err(nobody(&format!(": {why}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The manager found `which`-th failed: the next caller looks again.
    async fn failed(&self, which: u64) {
        let mut st = self.state.lock().await;
        if st.current.as_ref().is_some_and(|c| c.0 == which) {
            st.current = None;
        }
    }
}

impl CallTarget for NamedCm {
    async fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> Result<u64, CallError> {
        let (which, cm) = self.connected().await?;
        let r = cm.setup(source, destination, traffic).await;
        if r.as_ref()
            .is_err_and(|e| e.kind == atmlab_fabric::ErrorKind::Unavailable)
        {
            self.failed(which).await;
        }
        r
    }

    async fn release(&self, id: u64) -> Result<(), CallError> {
        let deadline = Instant::now() + self.patience;
        let mut tries = 0;
        loop {
            let (which, cm) = self.connected().await?;
            tries += 1;
            match cm.release(id).await {
                Ok(()) => return Ok(()),
                // A repeat that finds the call gone: an earlier try released it.
                Err(e) if tries > 1 && e.kind == atmlab_fabric::ErrorKind::NotFound => {
                    return Ok(());
                }
                Err(e)
                    if e.kind == atmlab_fabric::ErrorKind::Unavailable
                        && Instant::now() < deadline =>
                {
                    self.failed(which).await;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Calls spread round robin over several managers (xbind §II-C1: managers on disjoint
/// partitions of the identifier space share the load). A call's id names its manager:
/// `id * n + k` for the call `id` of manager `k` of `n`.
#[derive(Debug)]
pub struct Spread<T> {
    targets: std::sync::Arc<Vec<T>>,
    next: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl<T> Clone for Spread<T> {
    fn clone(&self) -> Self {
        Spread {
            targets: self.targets.clone(),
            next: self.next.clone(),
        }
    }
}

impl<T: CallTarget> Spread<T> {
    /// Over these managers (at least one).
    pub fn new(targets: Vec<T>) -> Self {
        assert!(!targets.is_empty(), "a spread needs a manager");
        Spread {
            targets: std::sync::Arc::new(targets),
            next: Default::default(),
        }
    }
}

impl<T: CallTarget> CallTarget for Spread<T> {
    async fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> Result<u64, CallError> {
        let n = self.targets.len() as u64;
        let k = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as u64 % n;
        let id = self.targets[k as usize]
            .setup(source, destination, traffic)
            .await?;
        Ok(id * n + k)
    }

    async fn release(&self, id: u64) -> Result<(), CallError> {
        let n = self.targets.len() as u64;
        self.targets[(id % n) as usize].release(id / n).await
    }
}

/// How calls are offered.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Arrival rate, calls/s (Poisson).
    pub rate: f64,
    /// How long arrivals go on.
    pub duration: Duration,
    /// Mean holding time (exponential), or fixed with `fixed_holding`.
    pub holding: Duration,
    /// Hold every call exactly `holding`.
    pub fixed_holding: bool,
    /// (source, destination) pairs, used round robin.
    pub pairs: Vec<(String, String)>,
    /// The contract of each call.
    pub traffic: TrafficDescriptor,
    /// Seed of the arrival and holding streams.
    pub seed: u64,
    /// Keep every arrival to its Poisson instant, to within the OS timer's slack (tens
    /// of microseconds), with a pacer thread; the tokio timer ticks in milliseconds, so
    /// without it arrivals less than 500 us ahead go at once and, at thousands of calls
    /// per second, leave in clumps: fine for throughput, wrong for anything that assumes
    /// Poisson arrivals (the M/G/∞ cache model).
    pub precise: bool,
}

impl Load {
    /// `rate` calls/s for `duration`, 1 ms mean holding, CBR 10 cells/s, between `a` and `b`.
    pub fn poisson(rate: f64, duration: Duration, a: &str, b: &str) -> Self {
        Load {
            rate,
            duration,
            holding: Duration::from_millis(1),
            fixed_holding: false,
            pairs: vec![(a.into(), b.into())],
            traffic: TrafficDescriptor::cbr(CellRate(10.0)),
            seed: 1,
            precise: false,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The offered rate, calls/s.
    pub offered_per_s: f64,
    /// Calls offered.
    pub offered: u64,
    /// Calls offered per second over the span [`Report::setups_per_s`] is measured on:
    /// what was offered, where `offered_per_s` is the Poisson process's target (a short
    /// run at 100/s can draw 112 calls).
    pub arrived_per_s: f64,
    /// Setups completed per second of the run (from the first arrival to the last setup).
    pub setups_per_s: f64,
    /// Call operations (setups + releases) per second.
    pub operations_per_s: f64,
    /// Calls set up.
    pub established: u64,
    /// Calls refused for lack of resources.
    pub blocked: u64,
    /// Calls that failed otherwise (or whose release failed).
    pub failed: u64,
    /// Calls not set up within the run's deadline ([`run_with_deadline`]): abandoned,
    /// and released if their setup completed later. Not in `established`, `blocked` or
    /// `failed`; their cause is "deadline: ...".
    pub abandoned: u64,
    /// Setup latency, milliseconds.
    pub mean_setup_ms: f64,
    /// Percentiles of the setup latency, ms.
    pub p50_setup_ms: f64,
    /// 95th percentile.
    pub p95_setup_ms: f64,
    /// 99th percentile.
    pub p99_setup_ms: f64,
    /// Largest.
    pub max_setup_ms: f64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// Why calls were refused or failed: each distinct error (its first
    /// [`CAUSE_CHARS`] characters) with how many calls it ended, most frequent first, at
    /// most [`CAUSES`] of them.
    pub causes: Vec<(String, u64)>,
}

/// The most distinct causes a [`Report`] keeps.
pub const CAUSES: usize = 5;
/// How much of an error's text a cause keeps.
pub const CAUSE_CHARS: usize = 200;

impl Report {
    /// The report as one JSON object (the `--json` output of `atmlab callgen`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "offered_per_s": self.offered_per_s,
            "offered": self.offered,
            "arrived_per_s": self.arrived_per_s,
            "setups_per_s": self.setups_per_s,
            "operations_per_s": self.operations_per_s,
            "established": self.established,
            "blocked": self.blocked,
            "failed": self.failed,
            "abandoned": self.abandoned,
            "mean_setup_ms": self.mean_setup_ms,
            "p50_setup_ms": self.p50_setup_ms,
            "p95_setup_ms": self.p95_setup_ms,
            "p99_setup_ms": self.p99_setup_ms,
            "max_setup_ms": self.max_setup_ms,
            "seconds": self.seconds,
            "causes": self
                .causes
                .iter()
                .map(|(c, n)| serde_json::json!({ "cause": c, "calls": n }))
                .collect::<Vec<_>>(),
        })
    }
}

#[derive(Default)]
struct Tally {
    established: u64,
    blocked: u64,
    failed: u64,
    abandoned: u64,
    released: u64,
    last: Option<Instant>,
    causes: std::collections::HashMap<String, u64>,
}

impl Tally {
    /// A call refused or failed with `message`.
    fn cause(&mut self, message: &str) {
        self.cause_n(message, 1);
    }

    /// `n` calls refused or failed with `message`.
    fn cause_n(&mut self, message: &str, n: u64) {
        let cause: String = message.chars().take(CAUSE_CHARS).collect();
        *self.causes.entry(cause).or_default() += n;
    }
}

/// The arrival stream and the holding stream of a seed: independent, the second being the
/// first jumped 2^128 draws ahead. One stream drawn by two readers would make them the
/// same sequence: with precise pacing the pacer thread draws the gaps and the loop the
/// holds, and from one seed each hold was the gap before its call times rate x holding
/// (9 at 112.5 calls/s held 80 ms), so calls that came in a burst left at once and a
/// trunk blocked less than Erlang-B says.
fn streams(
    seed: u64,
) -> (
    rand_xoshiro::Xoshiro256PlusPlus,
    rand_xoshiro::Xoshiro256PlusPlus,
) {
    let arrivals = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut holds = arrivals.clone();
    holds.jump();
    (arrivals, holds)
}

/// Offers `load` to `target` and measures it. Arrivals keep to their Poisson schedule
/// whatever the target's latency (an open system, as the paper's generator); calls in
/// progress at the end are waited for.
pub async fn run<T: CallTarget>(target: T, load: &Load) -> Report {
    run_with_deadline(target, load, None).await
}

/// [`run`], with each call abandoned when it is not set up within `deadline` (its
/// client gives up: the latency it sees is bounded however long the manager's queue).
/// An abandoned call's setup goes on in its own task, and if it completes it is
/// released at once: nothing is left up that the generator stopped waiting for.
pub async fn run_with_deadline<T: CallTarget>(
    target: T,
    load: &Load,
    deadline: Option<Duration>,
) -> Report {
    let (mut rng, mut hold_rng) = streams(load.seed);
    let gaps = Exp::new(load.rate.max(1e-9)).expect("positive rate");
    let hold_mean = load.holding.as_secs_f64().max(1e-9);
    let holds = Exp::new(1.0 / hold_mean).expect("positive holding");
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds"),
    ));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    let end = start + load.duration;
    let mut next = start;
    let mut tasks = tokio::task::JoinSet::new();
    // Precise pacing: an OS thread sleeps to each arrival instant (the kernel's
    // high-resolution timers, tens of microseconds late at worst) and ticks the loop
    // below, which follows the same schedule; no core is spent spinning.
    let mut ticks = load.precise.then(|| {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (mut rng, _) = streams(load.seed);
        let gaps = Exp::new(load.rate.max(1e-9)).expect("positive rate");
        std::thread::spawn(move || {
            let mut next = start;
            loop {
                next += Duration::from_secs_f64(gaps.sample(&mut rng));
                if next >= end {
                    return;
                }
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        rx
    });
    let mut offered = 0u64;
    // Setups the target refused at its door (`CallTarget::refuse_now`), and the first
    // refusal's error.
    let mut door: (u64, Option<CallError>) = (0, None);
    loop {
        if let Some(ticks) = ticks.as_mut() {
            // The pacer thread draws the arrival instants and says when each is due; the
            // loop draws none of its own (a second schedule, cut off at `end` on its own,
            // would end the run at whichever schedule ran out first).
            if ticks.recv().await.is_none() {
                break;
            }
        } else {
            next += Duration::from_secs_f64(gaps.sample(&mut rng));
            if next >= end {
                break;
            }
            if next > Instant::now() + Duration::from_micros(500) {
                tokio::time::sleep_until(tokio::time::Instant::from_std(next)).await;
            }
        }
        let pair = (offered as usize) % load.pairs.len();
        offered += 1;
        let hold = if load.fixed_holding {
            load.holding
        } else {
            Duration::from_secs_f64(holds.sample(&mut hold_rng))
        };
        if let Some(refusal) = target.refuse_now() {
            // Counted here and added to the tally once, at the end.
            door.0 += 1;
            door.1.get_or_insert_with(refusal);
            // Refusals need no await: give the runtime's other tasks (the manager's,
            // which alone opens the door) a turn now and then.
            if door.0.is_multiple_of(64) {
                tokio::task::yield_now().await;
            }
            continue;
        }
        // Named only for a call that goes ahead: a refusal allocates nothing.
        let (src, dst) = load.pairs[pair].clone();
        let (t, h, c) = (target.clone(), hist.clone(), tally.clone());
        let traffic = load.traffic;
        tasks.spawn(async move {
            let t0 = Instant::now();
            let result = match deadline {
                None => t.setup(&src, &dst, traffic).await,
                // The setup runs on its own so that giving up on it does not drop it
                // half-way (a dropped in-process setup could complete with nobody to
                // release it).
                Some(d) => {
                    let setup = {
                        let t = t.clone();
                        tokio::spawn(async move { t.setup(&src, &dst, traffic).await })
                    };
                    let joined = |r: Result<Result<u64, CallError>, tokio::task::JoinError>| {
                        r.unwrap_or_else(|e| {
                            Err(CallError {
                                kind: atmlab_fabric::ErrorKind::Unavailable,
                                message: format!("the setup task: {e}"),
                            })
                        })
                    };
                    let mut setup = std::pin::pin!(setup);
                    match tokio::time::timeout(d, &mut setup).await {
                        // The timer has a granularity (a millisecond) and wakes late on a
                        // loaded machine: a setup it let through after the deadline is
                        // late all the same.
                        Ok(r) if t0.elapsed() <= d => joined(r),
                        outcome => {
                            {
                                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                                c.abandoned += 1;
                                c.cause(&format!("deadline: not set up within {d:?}"));
                            }
                            let r = match outcome {
                                Ok(r) => joined(r),
                                Err(_) => joined(setup.await),
                            };
                            // Set up after all: released at once, never left up.
                            if let Ok(id) = r
                                && let Err(e) = release_reliably(&t, id).await
                            {
                                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                                c.failed += 1;
                                c.cause(&format!("release of an abandoned call: {}", e.message));
                            }
                            return;
                        }
                    }
                }
            };
            match result {
                Ok(id) => {
                    let us = t0.elapsed().as_micros().max(1) as u64;
                    let _ = h
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .record(us.min(60_000_000));
                    {
                        let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                        c.established += 1;
                        c.last = Some(Instant::now());
                    }
                    tokio::time::sleep(hold).await;
                    let released = release_reliably(&t, id).await;
                    let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                    match released {
                        Ok(()) => c.released += 1,
                        Err(e) => {
                            c.failed += 1;
                            c.cause(&format!("release: {}", e.message));
                        }
                    }
                }
                Err(e) => {
                    let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                    if e.blocked() {
                        c.blocked += 1;
                    } else {
                        c.failed += 1;
                    }
                    c.cause(&e.message);
                }
            }
        });
        // Reap finished calls now and then so the set stays small at high rates.
        if offered.is_multiple_of(1024) {
            while tasks.try_join_next().is_some() {}
        }
    }
    let arrivals_end = Instant::now();
    while tasks.join_next().await.is_some() {}
    let h = hist.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = tally.lock().unwrap_or_else(|e| e.into_inner());
    if let (n, Some(e)) = door {
        if e.blocked() {
            c.blocked += n;
        } else {
            c.failed += n;
        }
        c.cause_n(&e.message, n);
    }
    let span = c
        .last
        .map_or(arrivals_end, |l| l.max(arrivals_end))
        .duration_since(start)
        .as_secs_f64()
        .max(1e-9);
    let ms = |us: u64| us as f64 / 1000.0;
    let mut causes: Vec<(String, u64)> = c.causes.iter().map(|(k, &n)| (k.clone(), n)).collect();
    causes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    causes.truncate(CAUSES);
    Report {
        offered_per_s: load.rate,
        offered,
        arrived_per_s: offered as f64 / span,
        setups_per_s: c.established as f64 / span,
        operations_per_s: (c.established + c.released) as f64
            / start.elapsed().as_secs_f64().max(1e-9),
        established: c.established,
        blocked: c.blocked,
        failed: c.failed,
        abandoned: c.abandoned,
        mean_setup_ms: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
        p50_setup_ms: ms(h.value_at_quantile(0.5)),
        p95_setup_ms: ms(h.value_at_quantile(0.95)),
        p99_setup_ms: ms(h.value_at_quantile(0.99)),
        max_setup_ms: ms(h.max()),
        seconds: start.elapsed().as_secs_f64(),
        causes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target that accepts every call at once (a mock, for the generator alone).
    #[derive(Clone, Default)]
    struct Instant0(Arc<std::sync::atomic::AtomicU64>);

    impl CallTarget for Instant0 {
        async fn setup(&self, _: &str, _: &str, _: TrafficDescriptor) -> Result<u64, CallError> {
            Ok(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        }
        async fn release(&self, _: u64) -> Result<(), CallError> {
            Ok(())
        }
    }

    /// Precise pacing offers exactly the calls of its Poisson schedule: the arrivals of
    /// the seeded stream before the end, no fewer (a second schedule drawn beside it
    /// used to end the run at whichever ran out first).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn precise_pacing_offers_exactly_the_schedules_arrivals() {
        let load = Load {
            precise: true,
            holding: Duration::from_micros(100),
            ..Load::poisson(2_000.0, Duration::from_millis(300), "a", "b")
        };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(load.seed);
        let gaps = Exp::new(load.rate).unwrap();
        let (mut t, mut expected) = (Duration::ZERO, 0u64);
        loop {
            t += Duration::from_secs_f64(gaps.sample(&mut rng));
            if t >= load.duration {
                break;
            }
            expected += 1;
        }
        let report = run(Instant0::default(), &load).await;
        assert_eq!(report.offered, expected);
        assert_eq!(report.established, expected);
    }

    /// A target that refuses every other call at its door and sets the rest up at once.
    #[derive(Clone, Default)]
    struct HalfShut {
        asked: Arc<std::sync::atomic::AtomicU64>,
        set_up: Arc<std::sync::atomic::AtomicU64>,
    }

    impl CallTarget for HalfShut {
        async fn setup(&self, _: &str, _: &str, _: TrafficDescriptor) -> Result<u64, CallError> {
            Ok(self
                .set_up
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        }
        async fn release(&self, _: u64) -> Result<(), CallError> {
            Ok(())
        }
        fn refuse_now(&self) -> Option<fn() -> CallError> {
            let n = self
                .asked
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            n.is_multiple_of(2).then_some(|| CallError {
                kind: atmlab_fabric::ErrorKind::ResourceExhausted,
                message: "shut".into(),
            })
        }
    }

    /// Refusals at the door are calls offered and blocked, with their cause, and start
    /// no setup.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refusals_at_the_door_are_counted_as_blocked_calls() {
        let load = Load {
            holding: Duration::from_micros(100),
            ..Load::poisson(5_000.0, Duration::from_millis(200), "a", "b")
        };
        let target = HalfShut::default();
        let report = run(target.clone(), &load).await;
        let set_up = target.set_up.load(std::sync::atomic::Ordering::Relaxed);
        assert!(report.offered > 500, "{}", report.offered);
        assert_eq!(report.established, set_up);
        assert_eq!(report.blocked + report.established, report.offered);
        assert_eq!(report.blocked, report.offered.div_ceil(2));
        assert_eq!(report.causes, vec![("shut".to_string(), report.blocked)]);
    }

    /// A target that accepts every call at once and notes when each was set up and
    /// released.
    #[derive(Clone, Default)]
    struct Noting(Arc<Mutex<Vec<SetUpReleased>>>);

    /// When a call was set up and, once it is, released.
    type SetUpReleased = (Instant, Option<Instant>);

    impl CallTarget for Noting {
        async fn setup(&self, _: &str, _: &str, _: TrafficDescriptor) -> Result<u64, CallError> {
            let mut v = self.0.lock().unwrap();
            v.push((Instant::now(), None));
            Ok(v.len() as u64 - 1)
        }
        async fn release(&self, id: u64) -> Result<(), CallError> {
            self.0.lock().unwrap()[id as usize].1 = Some(Instant::now());
            Ok(())
        }
    }

    /// A call's holding time says nothing of when it came, with precise pacing too (its
    /// pacer thread once drew the gaps from the stream the holds came from, so each hold
    /// was the gap before its call times rate x holding: correlation 1).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn holding_times_are_independent_of_the_arrivals() {
        let load = Load {
            precise: true,
            holding: Duration::from_millis(20),
            ..Load::poisson(200.0, Duration::from_millis(600), "a", "b")
        };
        let target = Noting::default();
        let report = run(target.clone(), &load).await;
        let calls = target.0.lock().unwrap().clone();
        assert_eq!(report.offered as usize, calls.len());
        // Each call's gap since the one before and its hold, ordered by setup (the
        // calls' order: the target answers at once).
        let mut calls: Vec<(Instant, Instant)> =
            calls.into_iter().map(|(s, r)| (s, r.unwrap())).collect();
        calls.sort();
        let pairs: Vec<(f64, f64)> = calls
            .windows(2)
            .map(|w| {
                let gap = (w[1].0 - w[0].0).as_secs_f64();
                (gap, (w[1].1 - w[1].0).as_secs_f64())
            })
            .collect();
        let n = pairs.len() as f64;
        assert!(n > 60.0, "{n} calls");
        let (mg, mh) = (
            pairs.iter().map(|p| p.0).sum::<f64>() / n,
            pairs.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let cov = pairs.iter().map(|p| (p.0 - mg) * (p.1 - mh)).sum::<f64>();
        let vg = pairs.iter().map(|p| (p.0 - mg).powi(2)).sum::<f64>();
        let vh = pairs.iter().map(|p| (p.1 - mh).powi(2)).sum::<f64>();
        let r = cov / (vg * vh).sqrt();
        // Independent: r about 0 within 1/sqrt(n) (about 0.09 here); the shared stream
        // gave r near 1, blurred only by timer slack.
        assert!(r.abs() < 0.4, "gap-hold correlation {r:.3} over {n} calls");
    }

    /// A target whose setups take `delay` and that notes which calls are up.
    #[derive(Clone)]
    struct Slow {
        delay: Duration,
        up: Arc<Mutex<std::collections::HashSet<u64>>>,
        next: Arc<std::sync::atomic::AtomicU64>,
    }

    impl CallTarget for Slow {
        async fn setup(&self, _: &str, _: &str, _: TrafficDescriptor) -> Result<u64, CallError> {
            tokio::time::sleep(self.delay).await;
            let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.up.lock().unwrap().insert(id);
            Ok(id)
        }
        async fn release(&self, id: u64) -> Result<(), CallError> {
            self.up.lock().unwrap().remove(&id);
            Ok(())
        }
    }

    /// `--deadline`: a call not set up within its deadline is abandoned, counted as its
    /// own cause and not as set up, and released when it comes up later: nothing is
    /// left up. A call within its deadline is set up as before.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_past_its_deadline_is_abandoned_and_released_when_it_comes_up() {
        let load = Load {
            holding: Duration::from_millis(1),
            ..Load::poisson(500.0, Duration::from_millis(100), "a", "b")
        };
        let slow = Slow {
            delay: Duration::from_millis(100),
            up: Default::default(),
            next: Default::default(),
        };
        let r = run_with_deadline(slow.clone(), &load, Some(Duration::from_millis(10))).await;
        assert!(r.offered > 10, "{r:?}");
        assert_eq!(
            (r.abandoned, r.established, r.failed),
            (r.offered, 0, 0),
            "{r:?}"
        );
        assert!(r.causes[0].0.starts_with("deadline"), "{:?}", r.causes);
        assert_eq!(r.causes[0].1, r.offered);
        assert!(
            slow.up.lock().unwrap().is_empty(),
            "every late setup released"
        );
        assert_eq!(
            slow.next.load(std::sync::atomic::Ordering::Relaxed),
            r.offered,
            "every abandoned setup did come up (and was released)"
        );
        // Well within the deadline: set up and released, none abandoned.
        let quick = Slow {
            delay: Duration::from_millis(1),
            ..slow.clone()
        };
        let r = run_with_deadline(quick, &load, Some(Duration::from_secs(5))).await;
        assert_eq!((r.abandoned, r.established), (0, r.offered), "{r:?}");
        assert!(slow.up.lock().unwrap().is_empty());
    }
}
