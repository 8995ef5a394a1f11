//! The SwitchServer over gRPC (`atmlab.v1.SwitchServer`, see the .proto for the
//! contract): xbind's switch server (paper 000 §II-B) and ReTINA's ConnectionServer
//! (paper 001 §3) with gRPC as the ORB.
//!
//! [`SwitchService`] serves any [`SwitchBackend`]: a [`LocalSwitch`] (the switch server
//! proper) or a [`crate::live::raw::RawClient`] (ReTINA's hybrid: a gRPC front on the
//! raw-socket interface, the proxy). [`GrpcSwitch`] is the client side, itself a
//! `SwitchBackend`.
//!
//! The command stream gives xbind's oneway calls: requests carry ids and are answered as
//! they complete; the server drains whatever requests have already arrived and runs them
//! as one batch (continue-on-error), so a pipelining client gets aggregation for free.
//! Each (client id, request id) is answered once: a retry of an id already answered gets
//! the first answer again from a bounded memory of recent answers ([`DEDUP_CAPACITY`]).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::switch_server_client::SwitchServerClient;
use atmlab_rpc::v1::switch_server_server::{SwitchServer, SwitchServerServer};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::error::FabricError;
use crate::live::authz::{Authorized, AuthzStats};
use crate::live::backend::{BatchResult, Description, SwitchBackend};
use crate::live::convert::{self as cv, status};
use crate::live::local::{LocalSwitch, SwitchEvent};
use crate::switch::{Atomicity, BranchChange, Command, Connection, Release, Reply, Reservation};
use atmlab_core::ids::PortId;

/// How many recent stream answers the server remembers for duplicate suppression.
pub const DEDUP_CAPACITY: usize = 1 << 17;
/// The most stream requests run as one batch.
const STREAM_BATCH: usize = 512;

/// A remembered answer's key: the client's name as a keyed hash, and its request id.
type DedupKey = (u64, u64);

/// The memory of answers: the last [`DEDUP_CAPACITY`] answered commands, by client and
/// request id. The answers sit in a ring in the order they were given. A client's ids
/// rise (a manager numbers its commands in order), so each client's places in the ring
/// are kept in a queue in id order: an answer is pushed at its client's back and, when
/// its slot is taken, popped from the front. The rare answer whose id does not rise (a
/// re-send run again once forgotten, ids out of order) is placed through a map. So the
/// usual answer costs no probe of a large table: a hash map over the whole memory
/// missed the cache on every answer, a tenth of a loaded switch server's CPU.
struct Dedup {
    /// Hashes a client's name into its key. Keyed (SipHash, a random key per process)
    /// so that no client can choose a name whose key is another client's.
    names: std::hash::RandomState,
    /// The clients with answers in the memory.
    clients: rustc_hash::FxHashMap<u64, Answered>,
    /// The places of the answers whose ids did not rise.
    others: rustc_hash::FxHashMap<DedupKey, u32>,
    ring: Vec<(DedupKey, pb::CommandResult)>,
    /// The slot the next answer takes once the ring is full.
    next: usize,
    /// How many answers it keeps: [`DEDUP_CAPACITY`] but in tests.
    capacity: usize,
}

/// One client's answers in the memory.
#[derive(Default)]
struct Answered {
    /// (id, place in the ring) of the answers whose ids rose, in id and ring order.
    rising: std::collections::VecDeque<(u64, u32)>,
    /// How many of its answers `others` places.
    others: usize,
    /// The highest id answered: a higher one is not in the memory.
    highest: u64,
}

impl Default for Dedup {
    fn default() -> Self {
        Dedup {
            names: std::hash::RandomState::new(),
            clients: Default::default(),
            others: Default::default(),
            ring: Vec::new(),
            next: 0,
            capacity: DEDUP_CAPACITY,
        }
    }
}

impl Dedup {
    /// The client named `name`, as the first half of its keys.
    fn client(&self, name: &str) -> u64 {
        use std::hash::BuildHasher;
        self.names.hash_one(name)
    }

    /// The highest id answered to client `who` that the memory holds, if any.
    fn highest(&self, who: u64) -> Option<u64> {
        self.clients.get(&who).map(|c| c.highest)
    }

    fn get(&self, key: &DedupKey) -> Option<pb::CommandResult> {
        let at = match self.others.get(key) {
            Some(&at) => at,
            None => {
                let rising = &self.clients.get(&key.0)?.rising;
                let i = rising.binary_search_by_key(&key.1, |&(id, _)| id).ok()?;
                rising[i].1
            }
        };
        let (held, answer) = &self.ring[at as usize];
        (held == key).then(|| answer.clone())
    }

    fn put(&mut self, key: DedupKey, r: pb::CommandResult) {
        let at = if self.ring.len() < self.capacity {
            if self.ring.capacity() == 0 {
                // Whole at once (untouched pages cost no memory): growing by
                // doubling would copy the answers kept so far each time.
                self.ring.reserve_exact(self.capacity);
            }
            self.ring.push((key, r));
            self.ring.len() - 1
        } else {
            let at = self.next;
            self.next = (at + 1) % self.capacity;
            let (old, _) = std::mem::replace(&mut self.ring[at], (key, r));
            self.forget(old, at as u32);
            at
        };
        let client = self.clients.entry(key.0).or_default();
        let rises = client.rising.back().is_none_or(|&(last, _)| key.1 > last);
        // A second answer to one key replaces the first (`get` asks `others` first).
        if rises {
            client.rising.push_back((key.1, at as u32));
            if client.others > 0 && self.others.remove(&key).is_some() {
                client.others -= 1;
            }
        } else if self.others.insert(key, at as u32).is_none() {
            client.others += 1;
        }
        client.highest = client.highest.max(key.1);
    }

    /// Forgets the answer to `old` that was in slot `at`, now taken.
    fn forget(&mut self, old: DedupKey, at: u32) {
        let Some(client) = self.clients.get_mut(&old.0) else {
            return;
        };
        // Slots are taken in the order they were given, so a rising answer is its
        // client's oldest, at the queue's front.
        if client.rising.front() == Some(&(old.1, at)) {
            client.rising.pop_front();
        } else if self.others.get(&old) == Some(&at) {
            self.others.remove(&old);
            client.others -= 1;
        }
        if client.rising.is_empty() && client.others == 0 {
            self.clients.remove(&old.0);
        }
    }
}

/// What the server does with one command of a batch.
#[derive(Debug, PartialEq)]
enum Sifted {
    /// Answered before: the answer again.
    Answered(pb::CommandResult),
    /// A copy of the batch's command at this index: its answer.
    CopyOf(usize),
    /// New: run it.
    New,
}

/// Sorts one batch's commands, in order, into answered before, copies of one earlier in
/// the batch, and new. Nearly every command is new, from the stream's one client, with
/// its id above every id of that client the memory has answered and above those before
/// it in the batch: such a command is new without a lookup, and the map of the batch's
/// commands is built only when one is not.
struct Sieve<'a> {
    dedup: &'a Dedup,
    rising: Rising,
    /// The batch's new commands so far, by key: built from `news` on first need.
    seen: Option<rustc_hash::FxHashMap<DedupKey, usize>>,
    news: Vec<(DedupKey, usize)>,
}

/// Whether the batch's ids have risen so far, and from which client.
#[derive(Clone, Copy)]
enum Rising {
    /// Nothing seen yet.
    Start,
    /// One client, and its highest id so far (answered or in the batch).
    One { who: u64, last: u64 },
    /// A second client, or one the memory knows nothing of: every command looked up.
    Off,
}

impl<'a> Sieve<'a> {
    fn new(dedup: &'a Dedup) -> Self {
        Sieve {
            dedup,
            rising: Rising::Start,
            seen: None,
            news: Vec::new(),
        }
    }

    /// Sorts the command with `key` at `index` in the batch.
    fn sift(&mut self, index: usize, key: DedupKey) -> Sifted {
        let (who, id) = key;
        let above = match self.rising {
            Rising::Start => match self.dedup.highest(who) {
                Some(last) => id > last,
                None => {
                    self.rising = Rising::Off;
                    false
                }
            },
            Rising::One { who: w, last } if w == who => id > last,
            Rising::One { .. } => {
                self.rising = Rising::Off;
                false
            }
            Rising::Off => false,
        };
        if above {
            self.rising = Rising::One { who, last: id };
        } else {
            if let Some(prev) = self.dedup.get(&key) {
                return Sifted::Answered(prev);
            }
            let news = &self.news;
            let seen = self
                .seen
                .get_or_insert_with(|| news.iter().copied().collect());
            if let Some(&first) = seen.get(&key) {
                return Sifted::CopyOf(first);
            }
        }
        if let Some(seen) = &mut self.seen {
            seen.insert(key, index);
        }
        self.news.push((key, index));
        Sifted::New
    }
}

/// The gRPC SwitchServer over a backend.
pub struct SwitchService<B: SwitchBackend> {
    backend: B,
    /// The switch whose events Watch reports (absent for a proxy).
    events: Option<LocalSwitch>,
    dedup: Arc<Mutex<Dedup>>,
    authz: Arc<AuthzStats>,
    /// Each host port's host by name: its certificate may bind that port (AttachHost).
    host_names: Arc<HashMap<u16, String>>,
}

impl<B: SwitchBackend> SwitchService<B> {
    /// A service over `backend`; `events` enables Watch.
    pub fn new(backend: B, events: Option<LocalSwitch>) -> Self {
        SwitchService {
            backend,
            events,
            dedup: Arc::new(Mutex::new(Dedup::default())),
            authz: Arc::default(),
            host_names: Arc::default(),
        }
    }

    /// The same service, letting the host certificate named for a port bind it through
    /// AttachHost (`host_name` in the switch file).
    pub fn with_host_names(mut self, names: HashMap<u16, String>) -> Self {
        self.host_names = Arc::new(names);
        self
    }

    /// The same service, counting refused commands into `stats` (shared with the raw-TCP
    /// port, so one counter tells an operator what was refused).
    pub fn with_authz(mut self, stats: Arc<AuthzStats>) -> Self {
        self.authz = stats;
        self
    }

    /// Commands refused for the caller's role or owner.
    pub fn authz_stats(&self) -> Arc<AuthzStats> {
        self.authz.clone()
    }

    /// The backend as the caller of `r` may use it.
    fn as_caller<T>(&self, r: &Request<T>) -> Authorized<B> {
        Authorized::new(
            self.backend.clone(),
            atmlab_rpc::tls::Caller::of(r),
            self.authz.clone(),
        )
    }

    /// The tonic service, ready for `Server::builder().add_service`.
    pub fn into_server(self) -> SwitchServerServer<Self> {
        SwitchServerServer::new(self)
    }

    async fn one(
        backend: &Authorized<B>,
        cmd: Result<Command, FabricError>,
    ) -> Result<Reply, Status> {
        let cmd = cmd.map_err(|e| status(&e))?;
        let mut r = backend
            .execute(vec![cmd], Atomicity::AllOrNothing)
            .await
            .map_err(|e| status(&e))?;
        r.pop()
            .ok_or_else(|| Status::internal("the switch returned no result"))?
            .map_err(|e| status(&e))
    }

    /// One command that arrives in its wire form (AddBranch, DropBranch, Modify).
    async fn one_op<T>(
        &self,
        r: Request<T>,
        op: impl FnOnce(T) -> pb::command::Op,
    ) -> Result<Reply, Status> {
        let backend = self.as_caller(&r);
        Self::one(
            &backend,
            cv::command(&pb::Command {
                op: Some(op(r.into_inner())),
            }),
        )
        .await
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl<B: SwitchBackend> SwitchServer for SwitchService<B> {
    async fn describe(
        &self,
        r: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::SwitchDescription>, Status> {
        let d = self
            .as_caller(&r)
            .describe()
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(cv::pb_description(&d)))
    }

    async fn reserve(
        &self,
        r: Request<pb::ReserveRequest>,
    ) -> Result<Response<pb::ReserveReply>, Status> {
        match Self::one(
            &self.as_caller(&r),
            cv::reserve(r.get_ref()).map(Command::Reserve),
        )
        .await?
        {
            Reply::Reserved(ids) => Ok(Response::new(pb::ReserveReply {
                ids: ids.into_iter().map(cv::pb_vc_id).collect(),
            })),
            _ => Err(Status::internal("unexpected reply")),
        }
    }

    async fn unreserve(
        &self,
        r: Request<pb::UnreserveRequest>,
    ) -> Result<Response<pb::UnreserveReply>, Status> {
        Self::one(
            &self.as_caller(&r),
            cv::unreserve(r.get_ref()).map(Command::Unreserve),
        )
        .await?;
        Ok(Response::new(pb::UnreserveReply {}))
    }

    async fn commit(
        &self,
        r: Request<pb::CommitRequest>,
    ) -> Result<Response<pb::CommitReply>, Status> {
        match Self::one(
            &self.as_caller(&r),
            cv::commit(r.get_ref()).map(Command::Commit),
        )
        .await?
        {
            Reply::Committed {
                connection,
                replenished,
            } => Ok(Response::new(pb::CommitReply {
                connection,
                replenished: replenished.into_iter().map(cv::pb_vc_id).collect(),
            })),
            _ => Err(Status::internal("unexpected reply")),
        }
    }

    async fn release(
        &self,
        r: Request<pb::ReleaseRequest>,
    ) -> Result<Response<pb::ReleaseReply>, Status> {
        let backend = self.as_caller(&r);
        let r = r.get_ref();
        Self::one(
            &backend,
            Ok(Command::Release(Release {
                connection: r.connection,
                keep_reserved: r.keep_reserved,
            })),
        )
        .await?;
        Ok(Response::new(pb::ReleaseReply {}))
    }

    async fn add_branch(
        &self,
        r: Request<pb::AddBranchRequest>,
    ) -> Result<Response<pb::AddBranchReply>, Status> {
        self.one_op(r, pb::command::Op::AddBranch).await?;
        Ok(Response::new(pb::AddBranchReply {}))
    }

    async fn drop_branch(
        &self,
        r: Request<pb::DropBranchRequest>,
    ) -> Result<Response<pb::DropBranchReply>, Status> {
        self.one_op(r, pb::command::Op::DropBranch).await?;
        Ok(Response::new(pb::DropBranchReply {}))
    }

    async fn modify(
        &self,
        r: Request<pb::ModifyRequest>,
    ) -> Result<Response<pb::ModifyReply>, Status> {
        self.one_op(r, pb::command::Op::Modify).await?;
        Ok(Response::new(pb::ModifyReply {}))
    }

    async fn execute(
        &self,
        r: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::ExecuteReply>, Status> {
        let backend = self.as_caller(&r);
        let r = r.into_inner();
        let atomicity = match pb::Atomicity::try_from(r.atomicity) {
            Ok(pb::Atomicity::AllOrNothing) => Atomicity::AllOrNothing,
            Ok(pb::Atomicity::ContinueOnError) => Atomicity::ContinueOnError,
            Err(_) => return Err(Status::invalid_argument("unknown atomicity")),
        };
        // A command that does not even decode fails the whole request: running the rest
        // "continue-on-error" around a garbled one would hide a client bug.
        let cmds: Vec<Command> = r
            .commands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cv::command(c).map_err(|e| Status::invalid_argument(format!("command {i}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let results = backend
            .execute(cmds, atomicity)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(pb::ExecuteReply {
            results: results.iter().map(cv::pb_result).collect(),
        }))
    }

    type StreamStream = BoxStream<pb::StreamReply>;

    async fn stream(
        &self,
        r: Request<tonic::Streaming<pb::StreamRequest>>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let backend = self.as_caller(&r);
        let mut inbound = r.into_inner();
        let (tx, rx) = mpsc::channel::<Result<pb::StreamReply, Status>>(4 * STREAM_BATCH);
        let dedup = self.dedup.clone();
        tokio::spawn(async move {
            let mut batch: Vec<pb::StreamRequest> = Vec::with_capacity(STREAM_BATCH);
            // The last client named, and its half of the keys.
            let mut client: Option<(String, u64)> = None;
            loop {
                // Wait for one request, then take whatever else has already arrived.
                match inbound.next().await {
                    Some(Ok(req)) => batch.push(req),
                    Some(Err(_)) | None => return,
                }
                while batch.len() < STREAM_BATCH {
                    match futures_now(&mut inbound) {
                        Some(Some(Ok(req))) => batch.push(req),
                        Some(Some(Err(_))) | Some(None) => break,
                        None => break,
                    }
                }
                // Every command of the batch, a request's `more` included, in order:
                // (the request it came in, its id, its command).
                let mut entries: Vec<(usize, u64, Option<&pb::Command>)> =
                    Vec::with_capacity(batch.len());
                for (r, req) in batch.iter().enumerate() {
                    entries.push((r, req.request_id, req.command.as_ref()));
                    for m in &req.more {
                        entries.push((r, m.request_id, m.command.as_ref()));
                    }
                }
                let mut answers: Vec<Option<pb::CommandResult>> = Vec::with_capacity(entries.len());
                let mut to_run: Vec<Command> = Vec::new();
                let mut run_index: Vec<(usize, DedupKey)> = Vec::new();
                // A copy of a request already in this batch (a duplicated message) is
                // answered with the first copy's result, not run again: the memory of
                // answers only covers requests of earlier batches.
                let mut copies: Vec<(usize, usize)> = Vec::new();
                {
                    let d = dedup.lock().unwrap_or_else(|e| e.into_inner());
                    let mut sieve = Sieve::new(&d);
                    for (i, &(r, id, command)) in entries.iter().enumerate() {
                        // A stream's requests nearly always come from one client: its
                        // name is hashed once, not per request.
                        let name = batch[r].client_id.as_str();
                        let who = match &client {
                            Some((n, who)) if n == name => *who,
                            _ => {
                                let who = d.client(name);
                                client = Some((name.to_owned(), who));
                                who
                            }
                        };
                        let key: DedupKey = (who, id);
                        match sieve.sift(i, key) {
                            Sifted::Answered(prev) => {
                                answers.push(Some(prev));
                                continue;
                            }
                            Sifted::CopyOf(first) => {
                                copies.push((i, first));
                                answers.push(None);
                                continue;
                            }
                            Sifted::New => {}
                        }
                        match command.map(cv::command) {
                            Some(Ok(cmd)) => {
                                to_run.push(cmd);
                                run_index.push((i, key));
                                answers.push(None);
                            }
                            Some(Err(e)) => answers.push(Some(cv::pb_result(&Err(e)))),
                            None => answers.push(Some(cv::pb_result(&Err(FabricError::Invalid(
                                "the request has no command",
                            ))))),
                        }
                    }
                }
                if !to_run.is_empty() {
                    let results = match backend.execute(to_run, Atomicity::ContinueOnError).await {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = tx.send(Err(status(&e))).await;
                            return;
                        }
                    };
                    let mut d = dedup.lock().unwrap_or_else(|e| e.into_inner());
                    for ((i, key), res) in run_index.into_iter().zip(results.iter()) {
                        let pr = cv::pb_result(res);
                        d.put(key, pr.clone());
                        answers[i] = Some(pr);
                    }
                }
                for (i, first) in copies {
                    answers[i] = answers[first].clone();
                }
                // One reply per request, its `more` answered in the same reply: the
                // answers are in `entries`' order, a request's own command then its `more`.
                let mut answers = answers.into_iter();
                for req in &batch {
                    let reply = pb::StreamReply {
                        request_id: req.request_id,
                        result: answers.next().flatten(),
                        more: req
                            .more
                            .iter()
                            .map(|m| pb::StreamResult {
                                request_id: m.request_id,
                                result: answers.next().flatten(),
                            })
                            .collect(),
                    };
                    if tx.send(Ok(reply)).await.is_err() {
                        return;
                    }
                }
                batch.clear();
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn list_connections(
        &self,
        r: Request<pb::ListConnectionsRequest>,
    ) -> Result<Response<pb::ListConnectionsReply>, Status> {
        let v = self
            .as_caller(&r)
            .connections()
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(pb::ListConnectionsReply {
            connections: v.iter().map(cv::pb_connection).collect(),
        }))
    }

    async fn list_reservations(
        &self,
        r: Request<pb::ListReservationsRequest>,
    ) -> Result<Response<pb::ListReservationsReply>, Status> {
        let v = self
            .as_caller(&r)
            .reservations()
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(pb::ListReservationsReply {
            reservations: v.iter().map(cv::pb_reservation).collect(),
        }))
    }

    async fn statistics(
        &self,
        r: Request<pb::StatisticsRequest>,
    ) -> Result<Response<pb::StatisticsReply>, Status> {
        let backend = self.as_caller(&r);
        let want = r.into_inner().connections;
        let d = backend.describe().await.map_err(|e| status(&e))?;
        let conns = backend.connections().await.map_err(|e| status(&e))?;
        for id in &want {
            if !conns.iter().any(|c| c.id == *id) {
                return Err(status(&FabricError::UnknownConnection(*id)));
            }
        }
        Ok(Response::new(pb::StatisticsReply {
            ports: d
                .ports
                .iter()
                .map(|p| pb::PortStatistics {
                    port: u32::from(p.config.id.0),
                    cells_in: p.counters.cells_in,
                    cells_out: p.counters.cells_out,
                    cells_unknown: p.counters.cells_unknown,
                    cells_hec_errors: p.counters.cells_hec_errors,
                    cells_discarded_clp1: p.counters.cells_discarded_clp1,
                    cells_discarded_full: p.counters.cells_discarded_full,
                    queue_cells: p.queue_cells,
                    datagrams_refused: p.counters.datagrams_refused,
                    cells_refused: p.counters.cells_refused,
                    cells_policed: p.counters.cells_policed,
                })
                .collect(),
            connections: conns
                .iter()
                .filter(|c| want.is_empty() || want.contains(&c.id))
                .map(|c| pb::ConnectionStatistics {
                    connection: c.id,
                    cells: c.cells,
                    cells_discarded: c.cells_discarded,
                    cells_policed: self
                        .events
                        .as_ref()
                        .and_then(|sw| sw.with_switch(|s| s.policed(c.id)))
                        .unwrap_or(0),
                })
                .collect(),
        }))
    }

    async fn attach_host(
        &self,
        r: Request<pb::AttachHostRequest>,
    ) -> Result<Response<pb::AttachHostReply>, Status> {
        let Some(sw) = &self.events else {
            return Err(Status::unimplemented(
                "this server fronts a remote switch and has no data plane",
            ));
        };
        // Binding a host port moves where its cells go: a manager's or an operator's
        // act, never a host's (a host could take another's port).
        let caller = atmlab_rpc::tls::Caller::of(&r);
        let r = r.into_inner();
        let port = u16::try_from(r.port)
            .map_err(|_| status(&FabricError::Invalid("a port number is at most 65535")))?;
        // A host may bind the port named for it; any other port only a manager or an
        // operator may (a host could otherwise take another's port).
        let own_port = caller.identity().is_some_and(|id| {
            id.role == atmlab_rpc::tls::Role::Host && self.host_names.get(&port) == Some(&id.name)
        });
        if !own_port {
            let what = format!("attach a host to port {port}");
            if let Err(refused) = caller.require(&[atmlab_rpc::tls::Role::Cm], &what) {
                let why = FabricError::Forbidden(refused.message().to_owned());
                self.authz.count(1, &caller, &why);
                return Err(refused);
            }
        }
        let host: std::net::SocketAddr = r.address.parse().map_err(|_| {
            Status::invalid_argument(format!(
                "address {:?} is not a UDP socket address (host:port)",
                r.address.chars().take(64).collect::<String>()
            ))
        })?;
        sw.attach_host(PortId(port), host).map_err(|e| status(&e))?;
        Ok(Response::new(pb::AttachHostReply {}))
    }

    type WatchStream = BoxStream<pb::SwitchEvent>;

    async fn watch(
        &self,
        _: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let Some(sw) = &self.events else {
            return Err(Status::unimplemented(
                "this server fronts a remote switch and has no event feed",
            ));
        };
        let mut rx = sw.subscribe();
        let (tx, out) = mpsc::channel(1024);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            let mut lagged = 0u64;
            loop {
                let ev = match rx.recv().await {
                    Ok(ev) => ev,
                    Err(RecvError::Lagged(n)) => {
                        lagged += n;
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let mut msgs = Vec::new();
                let mk = |event| pb::SwitchEvent {
                    sequence: ev.sequence,
                    event: Some(event),
                    lagged,
                };
                use pb::switch_event::Event as E;
                match &ev.event {
                    SwitchEvent::Committed(c) => msgs.push(mk(E::Committed(cv::pb_connection(c)))),
                    SwitchEvent::Released(id) => msgs.push(mk(E::Released(*id))),
                    SwitchEvent::BranchesChanged(c) => {
                        msgs.push(mk(E::BranchesChanged(cv::pb_connection(c))))
                    }
                    SwitchEvent::Reserved(rs) => {
                        msgs.extend(rs.iter().map(|r| mk(E::Reserved(cv::pb_reservation(r)))))
                    }
                    SwitchEvent::Unreserved(rs) => {
                        msgs.extend(rs.iter().map(|r| mk(E::Unreserved(cv::pb_reservation(r)))))
                    }
                }
                for m in msgs {
                    if tx.send(Ok(m)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }
}

/// Polls a stream once without waiting: `Some(item)` if ready, `None` if pending.
fn futures_now<S: Stream + Unpin>(s: &mut S) -> Option<Option<S::Item>> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match Pin::new(s).poll_next(&mut cx) {
        std::task::Poll::Ready(x) => Some(x),
        std::task::Poll::Pending => None,
    }
}

/// A gRPC client of a switch server; a [`SwitchBackend`] itself.
#[derive(Clone, Debug)]
pub struct GrpcSwitch {
    client: SwitchServerClient<tonic::transport::Channel>,
}

impl GrpcSwitch {
    /// A client on an open channel.
    pub fn new(channel: tonic::transport::Channel) -> Self {
        GrpcSwitch {
            client: SwitchServerClient::new(channel),
        }
    }

    /// The generated client, for the calls the trait does not cover (Watch, Stream,
    /// Statistics).
    pub fn raw(&self) -> SwitchServerClient<tonic::transport::Channel> {
        self.client.clone()
    }

    /// Unary Commit.
    pub async fn commit(
        &self,
        c: &crate::switch::Commit,
    ) -> Result<(u64, Vec<atmlab_core::ids::VcId>), FabricError> {
        let r = self
            .client
            .clone()
            .commit(cv::pb_commit(c))
            .await
            .map_err(|s| cv::from_status(&s))?
            .into_inner();
        let ids = r
            .replenished
            .iter()
            .map(|i| cv::vc_id(Some(i)))
            .collect::<Result<_, _>>()?;
        Ok((r.connection, ids))
    }

    /// Binds host port `port` of the switch's data plane to the host at `host` (the
    /// explicit attach; see the AttachHost RPC).
    pub async fn attach_host(
        &self,
        port: PortId,
        host: std::net::SocketAddr,
    ) -> Result<(), FabricError> {
        self.client
            .clone()
            .attach_host(pb::AttachHostRequest {
                port: u32::from(port.0),
                address: host.to_string(),
            })
            .await
            .map_err(|s| cv::from_status(&s))?;
        Ok(())
    }

    /// Unary Release.
    pub async fn release(&self, connection: u64, keep_reserved: bool) -> Result<(), FabricError> {
        self.client
            .clone()
            .release(pb::ReleaseRequest {
                connection,
                keep_reserved,
            })
            .await
            .map_err(|s| cv::from_status(&s))?;
        Ok(())
    }

    /// Unary AddBranch.
    pub async fn add_branch(&self, ch: &BranchChange) -> Result<(), FabricError> {
        let cmd = cv::pb_command(&Command::AddBranch(*ch));
        let Some(pb::command::Op::AddBranch(req)) = cmd.op else {
            unreachable!()
        };
        self.client
            .clone()
            .add_branch(req)
            .await
            .map_err(|s| cv::from_status(&s))?;
        Ok(())
    }
}

impl SwitchBackend for GrpcSwitch {
    async fn execute(
        &self,
        commands: Vec<Command>,
        atomicity: Atomicity,
    ) -> Result<BatchResult, FabricError> {
        let req = pb::ExecuteRequest {
            commands: commands.iter().map(cv::pb_command).collect(),
            atomicity: match atomicity {
                Atomicity::AllOrNothing => pb::Atomicity::AllOrNothing,
                Atomicity::ContinueOnError => pb::Atomicity::ContinueOnError,
            } as i32,
        };
        let r = self
            .client
            .clone()
            .execute(req)
            .await
            .map_err(|s| cv::from_status(&s))?
            .into_inner();
        if r.results.len() != commands.len() {
            return Err(FabricError::Unavailable(format!(
                "the server answered {} results for {} commands",
                r.results.len(),
                commands.len()
            )));
        }
        Ok(r.results.iter().map(cv::result).collect())
    }

    async fn describe(&self) -> Result<Description, FabricError> {
        let d = self
            .client
            .clone()
            .describe(pb::DescribeRequest {})
            .await
            .map_err(|s| cv::from_status(&s))?
            .into_inner();
        cv::description(&d)
    }

    async fn connections(&self) -> Result<Vec<Connection>, FabricError> {
        let r = self
            .client
            .clone()
            .list_connections(pb::ListConnectionsRequest {})
            .await
            .map_err(|s| cv::from_status(&s))?
            .into_inner();
        r.connections.iter().map(cv::connection).collect()
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, FabricError> {
        let r = self
            .client
            .clone()
            .list_reservations(pb::ListReservationsRequest {})
            .await
            .map_err(|s| cv::from_status(&s))?
            .into_inner();
        r.reservations.iter().map(cv::reservation).collect()
    }
}

/// Serves `service` on `listener` until `shutdown` resolves; with `tls`, only clients
/// with a certificate from the lab CA get in (refusals are logged by the accept loop).
pub async fn serve<B: SwitchBackend>(
    listener: tokio::net::TcpListener,
    tls: Option<&atmlab_rpc::tls::TlsIdentity>,
    service: SwitchService<B>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), FabricError> {
    let routes = atmlab_rpc::Services::new(service.into_server());
    atmlab_rpc::serve("switch server", listener, tls, routes, shutdown)
        .await
        .map_err(|e| match e {
            atmlab_rpc::RpcError::Serve { .. } => FabricError::Unavailable(e.to_string()),
            other => FabricError::Config(format!("TLS: {other}")),
        })
}

/// [`serve`] on an accept loop already made (`atmlab_rpc::tls::grpc_incoming_with`, for
/// limits other than the defaults and for its counters).
pub async fn serve_incoming<B: SwitchBackend>(
    incoming: atmlab_rpc::tls::Incoming,
    service: SwitchService<B>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), FabricError> {
    let routes = atmlab_rpc::Services::new(service.into_server());
    atmlab_rpc::serve_incoming("switch server", incoming, routes, shutdown)
        .await
        .map_err(|e| FabricError::Unavailable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: i32) -> pb::CommandResult {
        pb::CommandResult {
            code,
            ..Default::default()
        }
    }

    /// A batch's commands sorted: rising ids from one client are new without a lookup;
    /// a copy within the batch, an id answered before and a second client's commands
    /// are still found, whichever way the batch began.
    #[test]
    fn the_sieve_finds_every_answer_and_copy() {
        let mut d = Dedup::default();
        let (a, b) = (d.client("cm-a"), d.client("cm-b"));
        for id in 1..=10 {
            d.put((a, id), answer(id as i32));
        }
        d.put((b, 4), answer(40));
        // The usual batch: ids above the client's highest, rising.
        let mut s = Sieve::new(&d);
        for (i, id) in (11..20).enumerate() {
            assert_eq!(s.sift(i, (a, id)), Sifted::New);
        }
        assert!(s.seen.is_none(), "no lookup for rising ids");
        assert_eq!(s.sift(9, (a, 15)), Sifted::CopyOf(4));
        assert_eq!(s.sift(10, (a, 7)), Sifted::Answered(answer(7)));
        assert_eq!(s.sift(11, (a, 20)), Sifted::New);
        assert_eq!(s.sift(12, (a, 20)), Sifted::CopyOf(11));
        // A second client: its ids are its own, and the first's are still known.
        assert_eq!(s.sift(13, (b, 15)), Sifted::New);
        assert_eq!(s.sift(14, (b, 4)), Sifted::Answered(answer(40)));
        assert_eq!(s.sift(15, (a, 17)), Sifted::CopyOf(6), "above b's, not a's");
        assert_eq!(s.sift(16, (a, 21)), Sifted::New);
        assert_eq!(s.sift(17, (a, 21)), Sifted::CopyOf(16));
        assert_eq!(s.sift(18, (b, 15)), Sifted::CopyOf(13));
        // A batch that begins below the client's highest, then rises past it.
        let mut s = Sieve::new(&d);
        assert_eq!(s.sift(0, (a, 3)), Sifted::Answered(answer(3)));
        assert_eq!(s.sift(1, (b, 2)), Sifted::New, "forgotten or never given");
        assert_eq!(s.sift(2, (b, 5)), Sifted::New);
        assert_eq!(s.sift(3, (b, 2)), Sifted::CopyOf(1));
        assert_eq!(s.sift(4, (b, 5)), Sifted::CopyOf(2));
        // A client the memory has never answered: looked up, and still sorted.
        let c = d.client("cm-c");
        let mut s = Sieve::new(&d);
        assert_eq!(s.sift(0, (c, 1)), Sifted::New);
        assert_eq!(s.sift(1, (c, 2)), Sifted::New);
        assert_eq!(s.sift(2, (c, 1)), Sifted::CopyOf(0));
    }

    proptest::proptest! {
        /// Against the plain reading of its contract, over any sequence of answers from
        /// three clients whose ids mostly rise: a key's answer is the last one given to
        /// it, if that is among the last `capacity` answers given, and nothing else.
        #[test]
        fn the_memory_answers_as_the_last_answers_given(
            capacity in 1usize..40,
            steps in proptest::collection::vec((0u64..3, 0u64..4, 0u64..12), 0..300),
        ) {
            let mut d = Dedup { capacity, ..Dedup::default() };
            let mut given: Vec<DedupKey> = Vec::new();
            let mut next = [0u64; 3];
            for (n, &(who, jump, back)) in steps.iter().enumerate() {
                // Mostly a new, higher id; sometimes an older one again.
                let id = if back < 10 {
                    next[who as usize] += jump;
                    next[who as usize]
                } else {
                    next[who as usize].saturating_sub(jump * 3)
                };
                d.put((who, id), answer(n as i32));
                given.push((who, id));
                let kept = &given[given.len().saturating_sub(capacity)..];
                for who in 0..3 {
                    for id in 0..=next[who as usize] {
                        let want = kept
                            .iter()
                            .rposition(|&k| k == (who, id))
                            .map(|i| answer((given.len() - kept.len() + i) as i32));
                        proptest::prop_assert_eq!(d.get(&(who, id)), want);
                    }
                    let highest = kept.iter().filter(|k| k.0 == who).map(|k| k.1).max();
                    proptest::prop_assert!(d.highest(who) >= highest);
                }
            }
        }
    }

    /// The memory keeps the last DEDUP_CAPACITY answers, by client and id: the oldest go
    /// first, a client's id is not another's, a second answer to one key replaces the
    /// first, and ids that do not rise are kept and forgotten like the others.
    #[test]
    fn the_memory_of_answers_keeps_the_last_ones() {
        let mut d = Dedup::default();
        let (a, b) = (d.client("cm-a"), d.client("cm-b"));
        assert_ne!(a, b);
        assert_eq!(a, d.client("cm-a"), "one name, one key");
        d.put((a, 7), answer(1));
        d.put((a, 7), answer(2));
        d.put((a, 3), answer(3));
        d.put((a, 3), answer(4));
        assert_eq!(d.get(&(a, 7)), Some(answer(2)));
        assert_eq!(d.get(&(a, 3)), Some(answer(4)));
        assert_eq!(d.get(&(b, 7)), None);
        assert_eq!(d.highest(a), Some(7));
        // b's ids rise, but every 1,000th repeats an older one (a re-send run again).
        let n = 3 * DEDUP_CAPACITY as u64;
        let id_of = |i: u64| if i % 1000 == 999 { i - 500 } else { i };
        for i in 1..=n {
            d.put((b, id_of(i)), answer(i as i32));
        }
        assert_eq!(d.get(&(a, 7)), None, "the oldest went first");
        assert_eq!(d.get(&(a, 3)), None);
        assert_eq!(
            d.highest(a),
            None,
            "a client with nothing kept is forgotten"
        );
        assert_eq!(d.clients.len(), 1);
        let first_kept = n - DEDUP_CAPACITY as u64 + 1;
        for i in (first_kept - 2000)..=n {
            let id = id_of(i);
            // The last answer given to `id`, if it is among the last DEDUP_CAPACITY.
            let given = [id, id + 500]
                .into_iter()
                .filter(|&j| j <= n && id_of(j) == id);
            let last = given.max().unwrap_or(i);
            let want = (last >= first_kept).then(|| answer(last as i32));
            assert_eq!(d.get(&(b, id)), want, "id {id}");
        }
        // Every kept answer is placed once, and nothing else is.
        let placed: usize =
            d.clients.values().map(|c| c.rising.len()).sum::<usize>() + d.others.len();
        assert_eq!(placed, DEDUP_CAPACITY);
        for c in d.clients.values() {
            assert!(
                c.rising
                    .iter()
                    .zip(c.rising.iter().skip(1))
                    .all(|(x, y)| x.0 < y.0)
            );
        }
    }
}
