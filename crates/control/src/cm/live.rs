//! The live shell of the connection manager: one task owns the [`CmCore`], one link task
//! per switch server carries its batches over the SwitchServer command stream (request
//! ids make re-sends idempotent), and a handle serves callers (the gRPC
//! ConnectionManager service, the in-process call generator).
//!
//! The core decides everything; this shell only moves messages and reads the clock
//! (DESIGN.md §2), so the same core runs in the simulator.

use std::collections::HashMap;

use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_fabric::error::{ErrorKind, FabricError};
use atmlab_fabric::live::convert as cv;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::{Command, Reply};
use atmlab_rpc::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt;

use super::adaptive::Regions;
use super::core::{
    CallError, CallEvent, CallView, CmConfig, CmCore, CmStats, HopSpec, SetupRequest,
};
use super::dimension::NvProbe;
use super::faults::{Fate, FaultInjector, FaultPlan, stream_id};
use super::journal::{CmJournal, JournaledCall};
use crate::clock::LiveClock;

/// Resolves a source-destination pair to a route (the route object with its cache).
pub trait Router: Send + 'static {
    /// The hops from `source`'s switch port to `destination`'s, with `bandwidth`
    /// (cells/s) free on every output port.
    fn route(
        &mut self,
        now: Instant,
        source: &str,
        destination: &str,
        bandwidth: f64,
    ) -> Result<Vec<HopSpec>, CallError>;
}

/// A call as the shell reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    /// The tree and identifiers (its leaves are the destination hosts).
    pub view: CallView,
    /// Source host.
    pub source: String,
    /// The first destination host (every leaf: `view.leaves`).
    pub destination: String,
}

/// The manager's counters and tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct CmStatus {
    /// "sequential" or "xbind".
    pub kind: &'static str,
    /// Counters.
    pub stats: CmStats,
    /// Calls held.
    pub active: u64,
    /// VCI cache hits and misses.
    pub cache: (u64, u64),
    /// Current T and flush time-out, and whether T adapts.
    pub threshold: u32,
    /// The flush time-out.
    pub flush_timeout: Duration,
    /// Whether T adapts.
    pub adaptive: bool,
    /// Arrival-rate estimate and region.
    pub load: (f64, usize),
    /// `N_v` per (switch, output port), as arrivals saw it (paper 000 §IV-A).
    pub nv: Vec<(String, u16, NvProbe)>,
    /// What the start-up audit against the journal found and did (empty without a
    /// journal, or when everything matched).
    pub recovery: Vec<String>,
    /// The partition of the VCI space this manager reserves from.
    pub partition: Option<(u16, u16)>,
}

enum Request {
    Add {
        source: String,
        destinations: Vec<String>,
        traffic: TrafficDescriptor,
        clr: f64,
        tag: String,
        reply: oneshot::Sender<Result<CallInfo, CallError>>,
    },
    Delete {
        id: u64,
        reply: oneshot::Sender<Result<(), CallError>>,
    },
    AddLeaf {
        id: u64,
        leaf: String,
        reply: ChangeWaiter,
    },
    DropLeaf {
        id: u64,
        leaf: String,
        reply: ChangeWaiter,
    },
    Modify {
        id: u64,
        traffic: TrafficDescriptor,
        clr: f64,
        reply: ChangeWaiter,
    },
    Get {
        id: u64,
        reply: oneshot::Sender<Option<CallInfo>>,
    },
    List {
        reply: oneshot::Sender<Vec<CallInfo>>,
    },
    Status {
        reply: oneshot::Sender<CmStatus>,
    },
    Tune {
        threshold: u32,
        flush_timeout: Duration,
        adaptive: Option<Regions>,
        reply: oneshot::Sender<CmStatus>,
    },
    Prefill {
        ports: Vec<(String, u16)>,
        reply: oneshot::Sender<()>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

/// A caller's handle on a running connection manager. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CmHandle {
    tx: mpsc::Sender<Request>,
}

fn gone() -> CallError {
    CallError {
        kind: ErrorKind::Unavailable,
        message: "the connection manager stopped".into(),
    }
}

impl CmHandle {
    /// Sets up a call from `source` to `destination` (host names).
    pub async fn add(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
        clr: f64,
        tag: &str,
    ) -> Result<CallInfo, CallError> {
        self.add_multipoint(source, &[destination.to_string()], traffic, clr, tag)
            .await
    }

    /// Sets up a point-to-multipoint call from `source` to every host of
    /// `destinations` (one: point-to-point).
    pub async fn add_multipoint(
        &self,
        source: &str,
        destinations: &[String],
        traffic: TrafficDescriptor,
        clr: f64,
        tag: &str,
    ) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Add {
                source: source.into(),
                destinations: destinations.to_vec(),
                traffic,
                clr,
                tag: tag.into(),
                reply,
            })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Releases a call.
    pub async fn delete(&self, id: u64) -> Result<(), CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Delete { id, reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Adds host `leaf` to call `id` (AddLeaf); returns the call as changed.
    pub async fn add_leaf(&self, id: u64, leaf: &str) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        let leaf = leaf.to_string();
        self.ask(Request::AddLeaf { id, leaf, reply }, rx).await
    }

    /// Drops host `leaf` from call `id` (DropLeaf); returns the call as changed.
    pub async fn drop_leaf(&self, id: u64, leaf: &str) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        let leaf = leaf.to_string();
        self.ask(Request::DropLeaf { id, leaf, reply }, rx).await
    }

    /// Changes call `id`'s contract in place (ModifyConnection); returns the call as
    /// changed. On a refusal the call keeps its old contract.
    pub async fn modify(
        &self,
        id: u64,
        traffic: TrafficDescriptor,
        clr: f64,
    ) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        self.ask(
            Request::Modify {
                id,
                traffic,
                clr,
                reply,
            },
            rx,
        )
        .await
    }

    async fn ask(
        &self,
        r: Request,
        rx: oneshot::Receiver<Result<CallInfo, CallError>>,
    ) -> Result<CallInfo, CallError> {
        self.tx.send(r).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// One call.
    pub async fn get(&self, id: u64) -> Option<CallInfo> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Request::Get { id, reply }).await.ok()?;
        rx.await.ok().flatten()
    }

    /// Every established call.
    pub async fn list(&self) -> Vec<CallInfo> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Request::List { reply }).await.is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Counters and tuning.
    pub async fn status(&self) -> Result<CmStatus, CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Status { reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Changes T and the flush time-out; `adaptive` lets T follow the arrival rate.
    pub async fn tune(
        &self,
        threshold: u32,
        flush_timeout: Duration,
        adaptive: Option<Regions>,
    ) -> Result<CmStatus, CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Tune {
                threshold,
                flush_timeout,
                adaptive,
                reply,
            })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Fills the VCI caches of these (switch, port)s ahead of calls, and waits until the
    /// fills are sent.
    pub async fn prefill(&self, ports: Vec<(String, u16)>) -> Result<(), CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Prefill { ports, reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Returns every cached identifier to its switch and stops the manager.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Request::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

type Inbox = mpsc::UnboundedSender<(u64, Result<Reply, FabricError>)>;

/// One switch server's link: its command stream, re-opened when it breaks, and the
/// faults injected on it, if any.
struct Link {
    name: String,
    client: GrpcSwitch,
    client_id: String,
    inbox: Inbox,
    stream_tx: Option<mpsc::Sender<pb::StreamRequest>>,
    faults: Option<FaultPlan>,
    /// A stream was open once: opening another means the switch came back.
    was_open: bool,
    /// Where the switch's connections go after it came back, for the manager to
    /// reconcile.
    reconcile: mpsc::UnboundedSender<SwitchListing>,
}

/// Why a switch's connections were listed for the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// The switch came back: reconcile ([`CmCore::reconcile`]).
    Reopened,
    /// The periodic sweep ([`CmConfig::sweep_interval`]).
    Sweep,
    /// The last sweep of a stopping manager.
    Final,
}

/// A switch's connections and reservations as listed (the reservations only for
/// sweeps), and why.
type SwitchListing = (
    String,
    Vec<atmlab_fabric::switch::Connection>,
    Vec<atmlab_fabric::switch::Reservation>,
    Listing,
);

/// Lists `switch`'s connections and reservations in the background for the manager; a
/// switch that does not answer within two seconds counts as holding nothing (the next
/// sweep, or its stream's re-opening, looks again).
fn list_connections(
    name: String,
    client: GrpcSwitch,
    why: Listing,
    to: mpsc::UnboundedSender<SwitchListing>,
) {
    use atmlab_fabric::live::backend::SwitchBackend;
    tokio::spawn(async move {
        let listed = tokio::time::timeout(std::time::Duration::from_secs(2), async {
            Ok::<_, atmlab_fabric::FabricError>((
                client.connections().await?,
                client.reservations().await?,
            ))
        })
        .await;
        let (conns, res) = match listed {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                tracing::warn!(switch = %name, error = %e, "cannot list a switch to sweep");
                Default::default()
            }
            Err(_) => {
                tracing::warn!(switch = %name, "listing a switch to sweep timed out");
                Default::default()
            }
        };
        let _ = to.send((name, conns, res, why));
    });
}

impl Link {
    /// The open stream, opening it if needed; `None` if the switch is unreachable.
    async fn stream(&mut self) -> Option<mpsc::Sender<pb::StreamRequest>> {
        if self.stream_tx.as_ref().is_none_or(|t| t.is_closed()) {
            self.stream_tx =
                open_stream(&self.name, &self.client, self.inbox.clone(), self.faults).await;
            if self.stream_tx.is_some() {
                if self.was_open {
                    // The switch server came back (perhaps restarted from its journal):
                    // what it holds now goes to the manager to reconcile.
                    use atmlab_fabric::live::backend::SwitchBackend;
                    match self.client.connections().await {
                        Ok(conns) => {
                            let _ = self.reconcile.send((
                                self.name.clone(),
                                conns,
                                Vec::new(),
                                Listing::Reopened,
                            ));
                        }
                        Err(e) => {
                            tracing::warn!(switch = %self.name, error = %e, "cannot list connections to reconcile");
                        }
                    }
                }
                self.was_open = true;
            }
        }
        self.stream_tx.clone()
    }

    fn requests(&self, batch: Vec<(u64, Command)>) -> Vec<pb::StreamRequest> {
        batch
            .into_iter()
            .map(|(req, cmd)| pb::StreamRequest {
                client_id: self.client_id.clone(),
                request_id: req,
                command: Some(cv::pb_command(&cmd)),
            })
            .collect()
    }

    async fn send(&mut self, batch: Vec<(u64, Command)>) {
        let Some(tx) = self.stream().await else {
            // The switch is unreachable: the commands are lost; the core re-sends them
            // after its command time-out, and we try to reconnect then.
            return;
        };
        for r in self.requests(batch) {
            if tx.send(r).await.is_err() {
                self.stream_tx = None;
                break;
            }
        }
    }
}

async fn run_link(mut link: Link, mut batches: mpsc::UnboundedReceiver<Vec<(u64, Command)>>) {
    let mut faults = link
        .faults
        .map(|p| FaultInjector::new(p, stream_id(&link.name, true)));
    // A batch held back to be reordered: it goes after the next one (a re-send, at the
    // latest, comes when the manager's time-out expires).
    let mut held: Option<Vec<(u64, Command)>> = None;
    while let Some(batch) = batches.recv().await {
        match faults.as_mut().map_or(Fate::Deliver, FaultInjector::decide) {
            Fate::Deliver => link.send(batch).await,
            Fate::Drop => {}
            Fate::Duplicate => {
                link.send(batch.clone()).await;
                link.send(batch).await;
            }
            Fate::Delay(d) => {
                if let Some(tx) = link.stream().await {
                    let reqs = link.requests(batch);
                    tokio::spawn(async move {
                        tokio::time::sleep(std::time::Duration::from_nanos(d.as_nanos())).await;
                        for r in reqs {
                            if tx.send(r).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            }
            Fate::Reorder if held.is_none() => {
                held = Some(batch);
                continue;
            }
            Fate::Reorder => link.send(batch).await,
        }
        if let Some(h) = held.take() {
            link.send(h).await;
        }
    }
}

async fn open_stream(
    name: &str,
    client: &GrpcSwitch,
    inbox: Inbox,
    faults: Option<FaultPlan>,
) -> Option<mpsc::Sender<pb::StreamRequest>> {
    let (tx, rx) = mpsc::channel::<pb::StreamRequest>(4096);
    let replies = client
        .raw()
        .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await;
    let mut replies = match replies {
        Ok(r) => r.into_inner(),
        Err(e) => {
            tracing::warn!(switch = name, error = %e, "cannot open the command stream");
            return None;
        }
    };
    let mut faults = faults.map(|p| FaultInjector::new(p, stream_id(name, false)));
    let name = name.to_string();
    tokio::spawn(async move {
        let mut held: Option<(u64, Result<Reply, FabricError>)> = None;
        while let Some(r) = replies.next().await {
            match r {
                Ok(r) => {
                    let result = match r.result.as_ref() {
                        Some(x) => cv::result(x),
                        None => Err(FabricError::Invalid("a stream reply without a result")),
                    };
                    let answer = (r.request_id, result);
                    let delivered = match faults
                        .as_mut()
                        .map_or(Fate::Deliver, FaultInjector::decide)
                    {
                        Fate::Deliver => inbox.send(answer).is_ok(),
                        Fate::Drop => true,
                        Fate::Duplicate => {
                            inbox.send(answer.clone()).is_ok() && inbox.send(answer).is_ok()
                        }
                        Fate::Delay(d) => {
                            let inbox = inbox.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(std::time::Duration::from_nanos(d.as_nanos()))
                                    .await;
                                let _ = inbox.send(answer);
                            });
                            true
                        }
                        Fate::Reorder if held.is_none() => {
                            held = Some(answer);
                            continue;
                        }
                        Fate::Reorder => inbox.send(answer).is_ok(),
                    };
                    if let Some(h) = held.take()
                        && inbox.send(h).is_err()
                    {
                        return;
                    }
                    if !delivered {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(switch = %name, error = %e, "command stream broke");
                    break;
                }
            }
        }
        if let Some(h) = held.take() {
            let _ = inbox.send(h);
        }
    });
    Some(tx)
}

/// Starts a connection manager over these switch servers. `client_id` names this
/// manager's stream requests (unique per run, so a restarted manager's ids never collide
/// with answers a switch remembers from before).
pub fn start(
    config: CmConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
) -> Result<CmHandle, CallError> {
    start_with_faults(config, switches, router, None)
}

/// [`start`], with `faults` injected on every switch link in both directions (see
/// [`super::faults`]).
pub fn start_with_faults(
    config: CmConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    faults: Option<FaultPlan>,
) -> Result<CmHandle, CallError> {
    let core = CmCore::new(config).map_err(|e| CallError {
        kind: ErrorKind::InvalidArgument,
        message: e.to_string(),
    })?;
    spawn(core, switches, router, faults, None)
}

/// How a manager runs besides its configuration.
#[derive(Debug, Clone, Default)]
pub struct LiveOptions {
    /// Faults injected on every switch link.
    pub faults: Option<FaultPlan>,
    /// The SQLite journal: established connections are written to it before their
    /// callers hear of them, and a manager started on an existing journal audits it
    /// against the switches first (see [`recover`]).
    pub journal: Option<std::path::PathBuf>,
}

/// Starts a manager with a journal and faults as `opts` says. With a journal, the
/// start-up audit runs first; its findings are logged, returned, and reported by
/// `status` (and the gRPC GetStatus).
pub async fn start_with(
    config: CmConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    opts: LiveOptions,
) -> Result<(CmHandle, Vec<String>), CallError> {
    let mut core = CmCore::new(config).map_err(|e| CallError {
        kind: ErrorKind::InvalidArgument,
        message: e.to_string(),
    })?;
    let recovered = match &opts.journal {
        None => None,
        Some(path) => {
            let journal = CmJournal::open(path).map_err(|e| CallError {
                kind: ErrorKind::Unavailable,
                message: e.to_string(),
            })?;
            Some(recover(&mut core, journal, &switches).await?)
        }
    };
    let findings = recovered
        .as_ref()
        .map(|r| r.findings.clone())
        .unwrap_or_default();
    let handle = spawn(core, switches, router, opts.faults, recovered)?;
    Ok((handle, findings))
}

fn unavailable(what: String) -> CallError {
    CallError {
        kind: ErrorKind::Unavailable,
        message: what,
    }
}

/// The start-up audit of a restarted manager: every journaled connection whose hops all
/// exist on their switches, as recorded, is taken back into `core`; one with a hop
/// missing is rolled back (its other hops released) and forgotten; cross-connects of
/// this manager's owner that no journaled connection explains (half-made setups) are
/// released; identifiers it had reserved (its caches, lost with the process) are given
/// back, except each taken-back connection's source identifier. Returns what it found
/// and did, one line each.
pub async fn recover(
    core: &mut CmCore,
    mut journal: CmJournal,
    switches: &[(String, GrpcSwitch)],
) -> Result<Recovered, CallError> {
    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::switch::{Atomicity, Release, Unreserve};
    let owner = core.config().owner.clone();
    let calls = journal.load().map_err(|e| unavailable(e.to_string()))?;
    let mut held = HashMap::new();
    for (name, c) in switches {
        let conns = c
            .connections()
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot read {name}: {e}")))?;
        let res = c
            .reservations()
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot read {name}: {e}")))?;
        held.insert(name.clone(), (conns, res));
    }
    let mut findings = Vec::new();
    let mut kept: std::collections::HashSet<(String, u64)> = Default::default();
    let mut sources: std::collections::HashSet<(String, u16, atmlab_core::ids::VcId)> =
        Default::default();
    let mut to_release: HashMap<String, Vec<u64>> = HashMap::new();
    let mut forget = Vec::new();
    let mut hosts = Vec::new();
    let now = LiveClock::start().now();
    for jc in &calls {
        let v = &jc.view;
        let present: Vec<bool> = v
            .hops
            .iter()
            .map(|(h, conn, i, o)| {
                held.get(&h.switch).is_some_and(|(conns, _)| {
                    conns.iter().any(|x| {
                        x.id == *conn
                            && x.in_port.0 == h.in_port
                            && x.in_id == *i
                            && x.branches
                                .iter()
                                .any(|b| b.port.0 == h.out_port && b.id == *o)
                    })
                })
            })
            .collect();
        if present.iter().all(|p| *p) {
            if let Err(e) = core.adopt(now, v) {
                findings.push(format!("connection {}: not taken back: {e}", v.id));
                forget.push(v.id);
                continue;
            }
            for (h, conn, ..) in &v.hops {
                kept.insert((h.switch.clone(), *conn));
            }
            hosts.push((v.id, jc.source.clone(), jc.destination.clone()));
            sources.insert((v.hops[0].0.switch.clone(), v.hops[0].0.in_port, v.source_vc));
        } else {
            let missing: Vec<&str> = v
                .hops
                .iter()
                .zip(&present)
                .filter(|(_, p)| !**p)
                .map(|((h, ..), _)| h.switch.as_str())
                .collect();
            findings.push(format!(
                "connection {} ({} -> {}): hops missing on {}; rolled back",
                v.id,
                jc.source,
                jc.destination,
                missing.join(", ")
            ));
            forget.push(v.id);
            // Its surviving hops are released below, as cross-connects nobody explains.
        }
    }
    for (name, (conns, _)) in &held {
        for x in conns {
            if x.owner == owner && !kept.contains(&(name.clone(), x.id)) {
                to_release.entry(name.clone()).or_default().push(x.id);
            }
        }
    }
    for (name, c) in switches {
        let (_, res) = &held[name];
        let cmds: Vec<Command> = to_release
            .get(name)
            .into_iter()
            .flatten()
            .map(|&id| {
                Command::Release(Release {
                    connection: id,
                    keep_reserved: false,
                })
            })
            .collect();
        let released = cmds.len();
        let mut give_back: std::collections::BTreeMap<u16, Vec<atmlab_core::ids::VcId>> =
            Default::default();
        for r in res {
            if r.owner == owner && !sources.contains(&(name.clone(), r.port.0, r.id)) {
                give_back.entry(r.port.0).or_default().push(r.id);
            }
        }
        let mut all = cmds;
        let returned: usize = give_back.values().map(Vec::len).sum();
        for (port, ids) in give_back {
            all.push(Command::Unreserve(Unreserve {
                port: atmlab_core::ids::PortId(port),
                ids,
                owner: owner.clone(),
            }));
        }
        if all.is_empty() {
            continue;
        }
        let results = c
            .execute(all, Atomicity::ContinueOnError)
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot repair {name}: {e}")))?;
        let failed = results.iter().filter(|r| r.is_err()).count();
        if released > 0 {
            findings.push(format!(
                "{name}: {released} cross-connects of {owner} not in the journal released"
            ));
        }
        if returned > 0 {
            findings.push(format!(
                "{name}: {returned} identifiers reserved by {owner} given back"
            ));
        }
        if failed > 0 {
            findings.push(format!("{name}: {failed} of those repairs failed"));
        }
    }
    journal
        .apply(&[], &forget)
        .map_err(|e| unavailable(e.to_string()))?;
    let taken = calls.len() - forget.len();
    if findings.is_empty() {
        tracing::info!(
            connections = taken,
            "start-up audit: the journal and the switches agree"
        );
    }
    for f in &findings {
        tracing::warn!("start-up audit: {f}");
    }
    findings.insert(
        0,
        format!(
            "journal: {} connections, {taken} taken back, {} rolled back",
            calls.len(),
            forget.len()
        ),
    );
    Ok(Recovered {
        journal,
        findings,
        hosts,
    })
}

/// What [`recover`] leaves: the journal, its findings, and the end points of each
/// connection taken back.
#[derive(Debug)]
pub struct Recovered {
    /// The journal, reconciled.
    pub journal: CmJournal,
    /// One line per finding; the first sums up.
    pub findings: Vec<String>,
    /// (call id, source, destination) of each connection taken back.
    pub hosts: Vec<(u64, String, String)>,
}

fn spawn(
    core: CmCore,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    faults: Option<FaultPlan>,
    recovered: Option<Recovered>,
) -> Result<CmHandle, CallError> {
    if let Some(f) = &faults {
        f.validate().map_err(|message| CallError {
            kind: ErrorKind::InvalidArgument,
            message,
        })?;
    }
    let (tx, rx) = mpsc::channel(65_536);
    let (inbox_tx, inbox_rx) = mpsc::unbounded_channel();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let client_id = format!("{}-{}-{nonce}", core.config().owner, std::process::id());
    let (reconcile_tx, reconcile_rx) = mpsc::unbounded_channel();
    let mut links = HashMap::new();
    let listed = switches.clone();
    for (name, client) in switches {
        let (btx, brx) = mpsc::unbounded_channel();
        tokio::spawn(run_link(
            Link {
                name: name.clone(),
                client,
                client_id: client_id.clone(),
                inbox: inbox_tx.clone(),
                stream_tx: None,
                faults,
                was_open: false,
                reconcile: reconcile_tx.clone(),
            },
            brx,
        ));
        links.insert(name, btx);
    }
    tokio::spawn(run_manager(
        core,
        router,
        Channels {
            api: rx,
            inbox: inbox_rx,
            reconcile: reconcile_rx,
            listings: reconcile_tx,
            switches: listed,
        },
        links,
        recovered,
    ));
    Ok(CmHandle { tx })
}

/// A caller waiting for a setup, with the call's source and destination.
type AddWaiter = (oneshot::Sender<Result<CallInfo, CallError>>, String, String);

/// A caller waiting for a change (AddLeaf, DropLeaf, Modify) to end.
type ChangeWaiter = oneshot::Sender<Result<CallInfo, CallError>>;

struct Shell {
    core: CmCore,
    router: Box<dyn Router>,
    clock: LiveClock,
    links: HashMap<String, mpsc::UnboundedSender<Vec<(u64, Command)>>>,
    add_waiters: HashMap<u64, AddWaiter>,
    delete_waiters: HashMap<u64, oneshot::Sender<Result<(), CallError>>>,
    change_waiters: HashMap<u64, ChangeWaiter>,
    hosts: HashMap<u64, (String, String)>,
    journal: Option<std::sync::mpsc::Sender<JournalJob>>,
    recovery: Vec<String>,
}

/// A caller's answer, held until the journal has the change.
enum Ack {
    Added(oneshot::Sender<Result<CallInfo, CallError>>, Box<CallInfo>),
    /// A change (AddLeaf, DropLeaf, Modify) done: answered once the journal holds it.
    Changed(ChangeWaiter, Box<CallInfo>),
    Deleted(oneshot::Sender<Result<(), CallError>>),
}

/// One turn's changes for the journal, and the answers they hold back.
#[derive(Default)]
struct JournalJob {
    up: Vec<JournaledCall>,
    gone: Vec<u64>,
    acks: Vec<Ack>,
}

/// The journal's writer thread: takes every job waiting, writes them in one transaction
/// (group commit), then answers their callers. Calls it could not write are reported to
/// `failed`, for the manager to take down; their callers hear UNAVAILABLE.
fn journal_writer(
    mut journal: CmJournal,
    failed: mpsc::UnboundedSender<Vec<u64>>,
) -> std::sync::mpsc::Sender<JournalJob> {
    let (tx, rx) = std::sync::mpsc::channel::<JournalJob>();
    std::thread::spawn(move || {
        while let Ok(first) = rx.recv() {
            let mut jobs = vec![first];
            while let Ok(more) = rx.try_recv() {
                jobs.push(more);
            }
            let mut up = Vec::new();
            let mut gone = Vec::new();
            for j in &mut jobs {
                up.append(&mut j.up);
                gone.append(&mut j.gone);
            }
            let result = journal.apply(&up, &gone);
            if let Err(e) = &result {
                tracing::error!(error = %e, "the journal could not be written");
                let _ = failed.send(up.iter().map(|c| c.view.id).collect());
            }
            for j in jobs {
                for a in j.acks {
                    match (a, &result) {
                        (Ack::Added(w, info) | Ack::Changed(w, info), Ok(())) => {
                            let _ = w.send(Ok(*info));
                        }
                        // The call is taken down (`failed`): its caller hears why.
                        (Ack::Added(w, _) | Ack::Changed(w, _), Err(e)) => {
                            let _ = w.send(Err(CallError {
                                kind: ErrorKind::Unavailable,
                                message: format!("the journal could not be written: {e}"),
                            }));
                        }
                        // A release the journal could not forget is still released; a
                        // restarted manager finds its hops gone and drops the entry.
                        (Ack::Deleted(w), _) => {
                            let _ = w.send(Ok(()));
                        }
                    }
                }
            }
        }
    });
    tx
}

impl Shell {
    fn info(&self, id: u64) -> Option<CallInfo> {
        let view = self.core.view(id)?;
        let (s, d) = self.hosts.get(&id)?.clone();
        let destination = view.leaves.first().map_or(d, |l| l.0.clone());
        Some(CallInfo {
            view,
            source: s,
            destination,
        })
    }

    fn status(&self) -> CmStatus {
        let c = self.core.config();
        CmStatus {
            kind: c.kind.name(),
            stats: self.core.stats(),
            active: self.core.active() as u64,
            cache: self.core.cache_counts(),
            threshold: c.threshold,
            flush_timeout: c.flush_timeout,
            adaptive: c.adaptive.is_some(),
            load: self.core.load(),
            nv: self.core.nv_probes(),
            recovery: self.recovery.clone(),
            partition: c.partition,
        }
    }

    fn request(&mut self, now: Instant, r: Request) -> Option<oneshot::Sender<()>> {
        match r {
            Request::Add {
                source,
                destinations,
                traffic,
                clr,
                tag,
                reply,
            } => {
                if destinations.is_empty() {
                    let _ = reply.send(Err(CallError {
                        kind: ErrorKind::InvalidArgument,
                        message: "no destination".into(),
                    }));
                    return None;
                }
                let mut routes = Vec::with_capacity(destinations.len());
                for d in &destinations {
                    match self.router.route(now, &source, d, traffic.pcr.per_sec()) {
                        Ok(h) => routes.push((d.clone(), h)),
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            return None;
                        }
                    }
                }
                let destination = destinations[0].clone();
                let id = self.core.add(
                    now,
                    SetupRequest {
                        routes,
                        traffic,
                        clr,
                        buffer_cells: 0,
                        tag,
                    },
                );
                self.hosts.insert(id, (source.clone(), destination.clone()));
                self.add_waiters.insert(id, (reply, source, destination));
            }
            Request::Delete { id, reply } => {
                if self.core.delete(now, id) {
                    self.delete_waiters.insert(id, reply);
                } else {
                    let _ = reply.send(Err(CallError {
                        kind: ErrorKind::NotFound,
                        message: format!("no connection {id}"),
                    }));
                }
            }
            Request::AddLeaf { id, leaf, reply } => {
                let result = match self.hosts.get(&id) {
                    None => Err(CallError {
                        kind: ErrorKind::NotFound,
                        message: format!("no connection {id}"),
                    }),
                    Some((source, _)) => {
                        let bw = self.core.view(id).map_or(0.0, |v| v.traffic.pcr.per_sec());
                        let source = source.clone();
                        self.router
                            .route(now, &source, &leaf, bw)
                            .and_then(|route| self.core.add_leaf(now, id, &leaf, &route))
                    }
                };
                self.change_started(id, result, reply);
            }
            Request::DropLeaf { id, leaf, reply } => {
                let result = self.core.drop_leaf(now, id, &leaf);
                self.change_started(id, result, reply);
            }
            Request::Modify {
                id,
                traffic,
                clr,
                reply,
            } => {
                let result = self.core.modify(now, id, traffic, clr);
                self.change_started(id, result, reply);
            }
            Request::Get { id, reply } => {
                let _ = reply.send(self.info(id));
            }
            Request::List { reply } => {
                let v = self
                    .core
                    .views()
                    .into_iter()
                    .filter_map(|v| self.info(v.id))
                    .collect();
                let _ = reply.send(v);
            }
            Request::Status { reply } => {
                let _ = reply.send(self.status());
            }
            Request::Tune {
                threshold,
                flush_timeout,
                adaptive,
                reply,
            } => {
                self.core.tune(threshold, flush_timeout, adaptive);
                let _ = reply.send(self.status());
            }
            Request::Prefill { ports, reply } => {
                for (s, p) in ports {
                    self.core.prefill(now, &s, p);
                }
                // The fills leave at the next flush; the caller waits for the answers
                // by watching the cache (status) if it must.
                let _ = reply.send(());
            }
            Request::Shutdown { reply } => {
                self.core.drain_caches(now);
                return Some(reply);
            }
        }
        None
    }

    /// A change was started (its answer waits for [`CallEvent::Changed`]) or refused.
    fn change_started(&mut self, id: u64, result: Result<(), CallError>, reply: ChangeWaiter) {
        match result {
            Ok(()) => {
                self.change_waiters.insert(id, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    fn events(&mut self) {
        let mut job = JournalJob::default();
        while let Some(ev) = self.core.poll_event() {
            match ev {
                CallEvent::Changed { call, result } => {
                    let info = self.info(call);
                    if result.is_ok()
                        && self.journal.is_some()
                        && let Some(i) = &info
                    {
                        // The journal holds the call as changed (the row is replaced).
                        job.up.push(JournaledCall {
                            view: i.view.clone(),
                            source: i.source.clone(),
                            destination: i.destination.clone(),
                        });
                    }
                    if let Some(w) = self.change_waiters.remove(&call) {
                        match (result.and_then(|()| info.ok_or_else(gone)), &self.journal) {
                            // Like a setup, a change is answered once the journal has it,
                            // so a restarted manager never forgets a change it confirmed.
                            (Ok(i), Some(_)) => job.acks.push(Ack::Changed(w, Box::new(i))),
                            (answer, _) => {
                                let _ = w.send(answer);
                            }
                        }
                    }
                }
                CallEvent::Established { call, .. } => {
                    let view = self.core.view(call);
                    if self.journal.is_some()
                        && let (Some(view), Some((s, d))) = (&view, self.hosts.get(&call))
                    {
                        job.up.push(JournaledCall {
                            view: view.clone(),
                            source: s.clone(),
                            destination: d.clone(),
                        });
                    }
                    if let Some((w, s, d)) = self.add_waiters.remove(&call)
                        && let Some(view) = view
                    {
                        // A caller that went away leaves the call up; it can be listed
                        // and deleted.
                        let info = CallInfo {
                            view,
                            source: s,
                            destination: d,
                        };
                        match self.journal {
                            Some(_) => job.acks.push(Ack::Added(w, Box::new(info))),
                            None => {
                                let _ = w.send(Ok(info));
                            }
                        }
                    }
                }
                CallEvent::Failed { call, error } => {
                    self.hosts.remove(&call);
                    if let Some((w, _, _)) = self.add_waiters.remove(&call) {
                        let _ = w.send(Err(error.clone()));
                    }
                    if let Some(w) = self.delete_waiters.remove(&call) {
                        let _ = w.send(Err(error));
                    }
                }
                CallEvent::Released { call } => {
                    self.hosts.remove(&call);
                    if self.journal.is_some() {
                        job.gone.push(call);
                    }
                    if let Some(w) = self.delete_waiters.remove(&call) {
                        match self.journal {
                            Some(_) => job.acks.push(Ack::Deleted(w)),
                            None => {
                                let _ = w.send(Ok(()));
                            }
                        }
                    }
                }
            }
        }
        // The journal first: a caller hears of a connection only once it is written,
        // and of a release once it is forgotten. The writer thread does the writing (a
        // checkpoint may take tens of milliseconds) and answers the callers; this task
        // goes on with other calls meanwhile.
        if let Some(j) = &self.journal
            && !(job.up.is_empty() && job.gone.is_empty() && job.acks.is_empty())
        {
            let _ = j.send(job);
        }
    }

    fn transmit(&mut self, now: Instant) {
        while let Some(t) = self.core.poll_transmit(now) {
            match self.links.get(&t.switch) {
                Some(link) => {
                    let _ = link.send(t.commands);
                }
                None => {
                    // A route through a switch we have no link to: answer every command
                    // as unavailable so the call rolls back.
                    for (req, _) in t.commands {
                        self.core.handle_reply(
                            now,
                            req,
                            Err(FabricError::Unavailable(format!(
                                "no link to switch {}",
                                t.switch
                            ))),
                        );
                    }
                }
            }
        }
    }
}

/// What the manager's task listens to.
struct Channels {
    api: mpsc::Receiver<Request>,
    inbox: mpsc::UnboundedReceiver<(u64, Result<Reply, FabricError>)>,
    reconcile: mpsc::UnboundedReceiver<SwitchListing>,
    /// Where sweeps send their listings (the same channel).
    listings: mpsc::UnboundedSender<SwitchListing>,
    /// The switches, to list for sweeps.
    switches: Vec<(String, GrpcSwitch)>,
}

/// The next tick of the sweep, or never.
async fn tick(t: &mut Option<tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn run_manager(
    core: CmCore,
    router: Box<dyn Router>,
    channels: Channels,
    links: HashMap<String, mpsc::UnboundedSender<Vec<(u64, Command)>>>,
    recovered: Option<Recovered>,
) {
    let Channels {
        mut api,
        mut inbox,
        mut reconcile,
        listings,
        switches,
    } = channels;
    let list_all = |why: Listing| {
        for (name, client) in &switches {
            list_connections(name.clone(), client.clone(), why, listings.clone());
        }
    };
    let mut sweep_tick = core.config().sweep_interval.map(|d| {
        let d = std::time::Duration::from_nanos(d.as_picos() / 1000);
        tokio::time::interval_at(tokio::time::Instant::now() + d, d)
    });
    // The last sweep's listings still to come (`None` until the manager stops).
    let mut final_left: Option<usize> = None;
    let (failed_tx, mut failed) = mpsc::unbounded_channel::<Vec<u64>>();
    let (journal, recovery, hosts) = match recovered {
        Some(r) => (
            Some(journal_writer(r.journal, failed_tx)),
            r.findings,
            r.hosts.into_iter().map(|(id, s, d)| (id, (s, d))).collect(),
        ),
        None => (None, Vec::new(), HashMap::new()),
    };
    let mut sh = Shell {
        core,
        router,
        clock: LiveClock::start(),
        links,
        add_waiters: HashMap::new(),
        delete_waiters: HashMap::new(),
        change_waiters: HashMap::new(),
        hosts,
        journal,
        recovery,
    };
    let mut stopping: Option<oneshot::Sender<()>> = None;
    loop {
        let now = sh.clock.now();
        let wake = sh.core.poll_timeout().map(|t| {
            let d = t.saturating_duration_since(now);
            tokio::time::Instant::now() + std::time::Duration::from_nanos(d.as_picos() / 1000)
        });
        tokio::select! {
            biased;
            r = inbox.recv() => {
                let Some((req, res)) = r else { return };
                let now = sh.clock.now();
                sh.core.handle_reply(now, req, res);
                // Take whatever else has arrived before sending anything: replies come in
                // bursts, and one pass over them lets the aggregators fill.
                for _ in 0..4096 {
                    match inbox.try_recv() {
                        Ok((req, res)) => sh.core.handle_reply(now, req, res),
                        Err(_) => break,
                    }
                }
            }
            r = api.recv(), if stopping.is_none() => {
                let Some(r) = r else { return };
                let now = sh.clock.now();
                stopping = sh.request(now, r);
                for _ in 0..4096 {
                    if stopping.is_some() { break; }
                    match api.try_recv() {
                        Ok(r) => stopping = sh.request(now, r),
                        Err(_) => break,
                    }
                }
            }
            Some(ids) = failed.recv() => {
                // Calls the journal could not hold were refused to their callers: take
                // them down.
                let now = sh.clock.now();
                for id in ids {
                    sh.core.delete(now, id);
                }
            }
            Some((switch, conns, reservations, why)) = reconcile.recv() => {
                let now = sh.clock.now();
                match why {
                    Listing::Reopened => {
                        let (completed, released) = sh.core.reconcile(now, &switch, &conns);
                        if completed + released > 0 {
                            tracing::warn!(%switch, completed, released, "reconciled with a switch that came back");
                        }
                    }
                    Listing::Sweep | Listing::Final => {
                        let last = why == Listing::Final;
                        let released = sh.core.sweep(now, &switch, &conns, !last);
                        let given = sh.core.sweep_reservations(now, &switch, &reservations, !last);
                        if released + given > 0 {
                            tracing::warn!(%switch, released, given, "swept connections and reservations of ours that nothing explains");
                        }
                        if last {
                            final_left = final_left.map(|n| n.saturating_sub(1));
                        }
                    }
                }
            }
            _ = tick(&mut sweep_tick), if stopping.is_none() => list_all(Listing::Sweep),
            _ = sleep_until(wake) => {
                sh.core.handle_timeout(sh.clock.now());
            }
        }
        let now = sh.clock.now();
        sh.transmit(now);
        sh.events();
        if stopping.is_some() && sh.core.in_flight() == 0 {
            // Nothing in flight: one last sweep of every switch (a commit given up whose
            // answers were all lost left a connection nothing else would release), and
            // the answers to what it releases; then stop.
            if final_left.is_none() {
                final_left = Some(switches.len());
                list_all(Listing::Final);
            }
            if final_left != Some(0) {
                continue;
            }
            if let Some(s) = stopping.take() {
                let _ = s.send(());
            }
            return;
        }
    }
}

async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// A fixed table of routes, for tests and for topologies known in advance.
#[derive(Debug, Clone, Default)]
pub struct StaticRouter {
    routes: HashMap<(String, String), Vec<HopSpec>>,
}

impl StaticRouter {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route.
    pub fn with(mut self, source: &str, destination: &str, hops: Vec<HopSpec>) -> Self {
        self.routes
            .insert((source.into(), destination.into()), hops);
        self
    }
}

impl Router for StaticRouter {
    fn route(
        &mut self,
        _: Instant,
        source: &str,
        destination: &str,
        _: f64,
    ) -> Result<Vec<HopSpec>, CallError> {
        self.routes
            .get(&(source.to_string(), destination.to_string()))
            .cloned()
            .ok_or_else(|| CallError {
                kind: ErrorKind::InvalidArgument,
                message: format!("no route from {source:?} to {destination:?}"),
            })
    }
}
