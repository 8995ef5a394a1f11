//! The Layer Network Coordinator's shell (paper 001 §1.2.1): the LNC's core
//! ([`LncCore`]) behind the shell's `Driver`, its routes from the same [`Router`] the other
//! managers use, its root invocations to the root NML-CP over gRPC (a [`Child`] counted
//! under "lnc->nml"), and the answers as cm.proto's ConnectionInfo.
//!
//! [`start`] brings a deployment up: one EML-CP per switch and one NML-CP per subnetwork
//! of the [`hierarchy`], each serving `atmlab.v1.ConnectionPerformer` on its own loopback
//! endpoint (mutual TLS when given an identity), children first, so every parent can
//! connect to its children.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use atmlab_core::ids::VcId;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_performer_client::ConnectionPerformerClient;
use atmlab_rpc::v1::connection_performer_server::{ConnectionPerformer, ConnectionPerformerServer};
use tonic::Status;
use tonic::transport::Channel;

use super::convert::{self, pb_info};
use super::core::lnc::{Contract, LncCore, LncReply, LncRequest, RouteRequest};
use super::core::{
    AdoptSnc, HopSpec, InvocationId, OpId, SncError, SncRequest, SncResult, Traffic,
};
use super::partition::{Subnetwork, hierarchy};
use super::performer::{Child, ChildTarget, EmlCp, NmlCp};
use super::shell::{Driver, Machine};
use super::{Counts, Invocations, TinaConfig, iface};
use crate::ControlError;
use crate::cm::core::CallError;
use crate::cm::journal::{CmJournal, JournalAck, JournalWriter, JournaledCall, QosBounds};
use crate::cm::live::{LiveOptions, Router, audit};
use atmlab_core::clock::LiveClock;

pub use super::core::lnc::LncStats;

/// What the LNC's core asks of its shell.
enum LncCall {
    /// An invocation of the root NML-CP.
    Root(SncRequest),
    /// A route, from the route object (a local call, not counted).
    Route(RouteRequest),
}

/// The answer to an [`LncCall`].
enum LncAnswer {
    Root(SncResult),
    Route(Result<Vec<HopSpec>, CallError>),
}

/// The LNC's core with the clock its shell hands it, and the journal it writes.
struct LncMachine {
    core: LncCore,
    clock: LiveClock,
    /// Where each operation's outcome is journaled (issue 24, item 8), in the order the
    /// core finished them.
    journal: Option<JournalWriter>,
    /// The call each operation on an existing call concerns, for the journal.
    concerns: HashMap<OpId, u64>,
}

impl LncMachine {
    /// Journals call `id` as it now is: written if held, forgotten if gone, left alone
    /// while another operation has it out (that one journals it when done).
    fn record(&self, journal: &JournalWriter, id: u64) -> Option<JournalAck> {
        match (self.core.view(id), self.core.get(id)) {
            (Some(view), Some(info)) => {
                let c = info.contract;
                let call = JournaledCall {
                    view,
                    source: info.source.clone(),
                    destination: info.destinations.first().cloned().unwrap_or_default(),
                    bounds: QosBounds {
                        clr: c.traffic.clr,
                        ctd_us: c.ctd_us,
                        cdv_us: c.cdv_us,
                        burst_tolerance_us: c.burst_tolerance_us,
                    },
                };
                Some(journal.submit(vec![call], Vec::new()))
            }
            (None, None) => Some(journal.submit(Vec::new(), vec![id])),
            _ => None,
        }
    }
}

/// What the LNC answers, with the journal's word on it when there is a journal.
type Journaled = (LncReply, Option<JournalAck>);

impl Machine for LncMachine {
    type Request = LncRequest;
    type Reply = Journaled;
    type Call = LncCall;
    type Answer = LncAnswer;

    fn request(&mut self, op: OpId, r: LncRequest) {
        if self.journal.is_some() {
            match &r {
                LncRequest::Add { .. } => {}
                LncRequest::Delete { id }
                | LncRequest::AddLeaf { id, .. }
                | LncRequest::DropLeaf { id, .. }
                | LncRequest::Modify { id, .. } => {
                    self.concerns.insert(op, *id);
                }
            }
        }
        self.core.handle_request(self.clock.now(), op, r);
    }
    fn answer(&mut self, id: InvocationId, a: LncAnswer) {
        let now = self.clock.now();
        match a {
            LncAnswer::Root(a) => self.core.handle_answer(now, id, a),
            LncAnswer::Route(r) => self.core.handle_route(now, id, r),
        }
    }
    fn poll_call(&mut self) -> Option<(InvocationId, Option<&'static str>, LncCall)> {
        if let Some(t) = self.core.poll_transmit() {
            return Some((t.id, Some(t.iface), LncCall::Root(t.call)));
        }
        let r = self.core.poll_route()?;
        Some((r.id, None, LncCall::Route(r)))
    }
    fn poll_reply(&mut self) -> Option<(OpId, Result<Journaled, SncError>)> {
        let (op, r) = self.core.poll_reply()?;
        let concerned = self.concerns.remove(&op);
        let id = match &r {
            Ok(LncReply::Connection(info)) => Some(info.id),
            _ => concerned,
        };
        // Journaled here, in the order the core finished operations, so two operations
        // on one call reach the journal in the order they happened; the caller is
        // answered once the write is done (`Lnc::settled`).
        let ack = match (&self.journal, id) {
            (Some(j), Some(id)) => self.record(j, id),
            _ => None,
        };
        Some((op, r.map(|rep| (rep, ack))))
    }
    fn lost(call: &LncCall, e: SncError) -> LncAnswer {
        match call {
            LncCall::Root(_) => LncAnswer::Root(Err(e)),
            LncCall::Route(_) => LncAnswer::Route(Err(CallError {
                kind: atmlab_fabric::error::ErrorKind::Unavailable,
                message: e.message,
            })),
        }
    }
}

/// The Layer Network Coordinator.
pub struct Lnc {
    driver: Arc<Driver<LncMachine>>,
    config: TinaConfig,
    totals: Invocations,
    /// What the start-up audit found and did (empty without a journal).
    recovery: Mutex<Vec<String>>,
}

/// The call an answer describes.
fn connection(r: LncReply) -> Result<pb::ConnectionInfo, Status> {
    match r {
        LncReply::Connection(info) => Ok(pb_info(&info)),
        LncReply::Deleted => Err(Status::internal("the LNC answered another operation")),
    }
}

impl Lnc {
    fn new(root: Child, router: Box<dyn Router>, config: TinaConfig, totals: Invocations) -> Lnc {
        let clock = LiveClock::start();
        let router = Arc::new(Mutex::new(router));
        let perform = Box::new(move |call: LncCall| {
            let (root, router) = (root.clone(), router.clone());
            Box::pin(async move {
                match call {
                    LncCall::Root(r) => LncAnswer::Root(root.invoke(r).await),
                    LncCall::Route(r) => {
                        LncAnswer::Route(router.lock().unwrap_or_else(|e| e.into_inner()).route(
                            clock.now(),
                            &r.source,
                            &r.destination,
                            r.bandwidth,
                        ))
                    }
                }
            }) as _
        });
        let machine = LncMachine {
            core: LncCore::new(),
            clock,
            journal: None,
            concerns: HashMap::new(),
        };
        Lnc {
            driver: Driver::new(machine, perform, totals.clone()),
            config,
            totals,
            recovery: Mutex::new(Vec::new()),
        }
    }

    /// Runs `request`; with a journal, answers once the journal holds the outcome. A
    /// call whose new state the journal could not take is taken down (a restarted LNC
    /// must never hold a call nobody was told of, nor miss one that was confirmed), and
    /// its caller hears UNAVAILABLE.
    async fn settled(&self, request: LncRequest) -> Result<LncReply, Status> {
        let (reply, ack) = self
            .driver
            .run(request)
            .await
            .map_err(|e| convert::status(&e))?;
        let Some(ack) = ack else {
            return Ok(reply);
        };
        let written = ack
            .await
            .unwrap_or_else(|_| Err("the journal's writer stopped".into()));
        match (written, &reply) {
            (Ok(()), _) => Ok(reply),
            // Deposed (a newer leader took the journal): nothing is taken down, as the
            // call may be one the new leader holds (changed here just then).
            (Err(e), LncReply::Connection(_)) if e.contains(crate::cm::journal::DEPOSED) => Err(
                Status::unavailable(format!("the journal could not be written: {e}")),
            ),
            (Err(e), LncReply::Connection(info)) => {
                let id = info.id;
                if let Err(d) = self.driver.run(LncRequest::Delete { id }).await {
                    tracing::error!(id, error = %d, "TINA: taking down a call the journal could not hold failed");
                }
                Err(Status::unavailable(format!(
                    "the journal could not be written: {e}"
                )))
            }
            // Released all the same: a restarted LNC finds its hops gone and forgets it.
            (Err(_), LncReply::Deleted) => Ok(reply),
        }
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &TinaConfig {
        &self.config
    }

    /// Remote invocations so far, by interface.
    pub fn invocations(&self) -> Counts {
        self.totals.snapshot()
    }

    /// The counters.
    pub fn stats(&self) -> LncStats {
        self.driver.with(|m| m.core.stats())
    }

    /// Sets up a connection from `source` to `destination` (host names) with the
    /// cell-level contract `cell`. The reply's `invocations` counts every remote
    /// invocation the setup made, the LNC's own included.
    pub async fn add(
        &self,
        source: &str,
        destination: &str,
        cell: pb::CellQos,
        tag: &str,
    ) -> Result<pb::ConnectionInfo, Status> {
        self.add_multipoint(source, &[destination.to_string()], cell, tag)
            .await
    }

    /// Sets up a point-to-multipoint connection from `source` to every one of
    /// `destinations` (one: point-to-point). The route to the first is one subnetwork
    /// connection through the hierarchy; each further leaf is grafted where its route
    /// leaves the tree (a branch at the fork's switch, then one subnetwork connection
    /// for the rest). Refused anywhere, everything set up is released.
    pub async fn add_multipoint(
        &self,
        source: &str,
        destinations: &[String],
        cell: pb::CellQos,
        tag: &str,
    ) -> Result<pb::ConnectionInfo, Status> {
        let request = LncRequest::Add {
            source: source.to_string(),
            destinations: destinations.to_vec(),
            contract: convert::contract(&cell)?,
            tag: tag.to_string(),
        };
        connection(self.settled(request).await?)
    }

    /// Releases a connection down the hierarchy, every segment, downstream first. What
    /// could not be released stays with the call, so a retried delete finishes it.
    pub async fn delete(&self, id: u64) -> Result<(), Status> {
        self.settled(LncRequest::Delete { id }).await.map(drop)
    }

    /// Adds the leaf `leaf` (a host) to connection `id`, while it carries traffic: the
    /// switches upstream of the fork are not touched. Refused, the connection is as it
    /// was.
    pub async fn add_leaf(&self, id: u64, leaf: &str) -> Result<pb::ConnectionInfo, Status> {
        let leaf = leaf.to_string();
        connection(self.settled(LncRequest::AddLeaf { id, leaf }).await?)
    }

    /// Drops leaf `leaf` of connection `id`: the hops that carried only it are released
    /// (whole segments, or the tail of one: TrimSnc), then its branch at the fork is
    /// dropped; the other leaves keep receiving throughout. Refused for the last leaf.
    pub async fn drop_leaf(&self, id: u64, leaf: &str) -> Result<pb::ConnectionInfo, Status> {
        let leaf = leaf.to_string();
        connection(self.settled(LncRequest::DropLeaf { id, leaf }).await?)
    }

    /// Changes a connection's contract on every hop, admission first; refused, every
    /// hop keeps the old one.
    pub async fn modify(&self, id: u64, cell: pb::CellQos) -> Result<pb::ConnectionInfo, Status> {
        let contract = convert::contract(&cell)?;
        connection(self.settled(LncRequest::Modify { id, contract }).await?)
    }

    /// One connection.
    pub fn get(&self, id: u64) -> Option<pb::ConnectionInfo> {
        self.driver.with(|m| m.core.get(id).map(pb_info))
    }

    /// Every connection held.
    pub fn list(&self) -> Vec<pb::ConnectionInfo> {
        self.driver.with(|m| m.core.list().map(pb_info).collect())
    }

    /// The status as GetStatus answers it: kind "tina", the counters, and the remote
    /// invocations by interface (`messages` is their total, `commands` the switch
    /// operations among them).
    pub fn status(&self) -> pb::CmStatus {
        let (s, active) = self.driver.with(|m| (m.core.stats(), m.core.active()));
        let inv = self.invocations();
        let mut recovery = vec![format!(
            "tina: {} setup, {} level(s) of NML-CP, fan-out {}",
            self.config.mode.name(),
            self.config.depth,
            self.config.fanout
        )];
        recovery.extend(
            self.recovery
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        pb::CmStatus {
            kind: "tina".into(),
            established: s.established,
            released: s.released,
            blocked: s.blocked,
            failed: s.failed,
            active: active as u64,
            messages: inv.values().sum(),
            commands: inv.get(iface::EML_SWITCH).copied().unwrap_or(0),
            rollbacks: s.rollbacks,
            recovery,
            invocations: inv.into_iter().collect(),
            ..Default::default()
        }
    }
}

struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// What one sweep of the switches did ([`Tina::sweep`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Cross-connects of the owner that no call explains, released.
    pub released: usize,
    /// Identifiers reserved by the owner that no call holds, given back.
    pub given_back: usize,
    /// Found unexplained for the first time: released if the next sweep finds them too.
    pub suspects: usize,
}

/// Connections (switch, id) and reservations (switch, port, identifier).
type Suspects = (HashSet<(String, u64)>, HashSet<(String, u16, VcId)>);

/// The deployment's sweep of its switches (the xbind manager sweeps its own the same
/// way): what a lost answer left behind, a commit or a reservation no performer heard
/// of, is found by listing the switches and given back.
struct Sweeper {
    lnc: Arc<Lnc>,
    switches: Vec<(String, GrpcSwitch)>,
    owner: String,
    /// What the last sweep found unexplained.
    suspects: tokio::sync::Mutex<Suspects>,
}

impl Sweeper {
    async fn sweep(&self, at_once: bool) -> Result<Swept, ControlError> {
        use atmlab_fabric::live::backend::SwitchBackend;
        use atmlab_fabric::switch::{Atomicity, Command, Release, Unreserve};
        let mut suspects = self.suspects.lock().await;
        let failed = |name: &str, e: atmlab_fabric::error::FabricError| ControlError::Serve {
            what: "the TINA manager's sweep",
            reason: format!("switch {name}: {e}"),
        };
        let mut listed = Vec::new();
        for (name, c) in &self.switches {
            let conns = c.connections().await.map_err(|e| failed(name, e))?;
            let res = c.reservations().await.map_err(|e| failed(name, e))?;
            listed.push((name, c, conns, res));
        }
        // The calls after the listings: a call that completed in between is explained.
        let (held, sources) = self.lnc.driver.with(|m| {
            let mut held = HashSet::new();
            let mut sources = HashSet::new();
            for c in m.core.list() {
                for h in &c.hops {
                    held.insert((h.switch.clone(), h.connection));
                }
                if let (Some(h), Some(v)) = (c.hops.first(), c.source_vc) {
                    sources.insert((h.switch.clone(), h.in_port.0, v));
                }
            }
            (held, sources)
        });
        let mut out = Swept::default();
        let mut next: Suspects = Default::default();
        for (name, c, conns, res) in listed {
            let mut cmds = Vec::new();
            for x in conns.iter().filter(|x| x.owner == self.owner) {
                let key = (name.clone(), x.id);
                if held.contains(&key) {
                    continue;
                }
                if at_once || suspects.0.contains(&key) {
                    cmds.push(Command::Release(Release {
                        connection: x.id,
                        keep_reserved: false,
                    }));
                    out.released += 1;
                } else {
                    next.0.insert(key);
                }
            }
            for r in res.iter().filter(|r| r.owner == self.owner) {
                let key = (name.clone(), r.port.0, r.id);
                if sources.contains(&key) {
                    continue;
                }
                if at_once || suspects.1.contains(&key) {
                    cmds.push(Command::Unreserve(Unreserve {
                        port: r.port,
                        ids: vec![r.id],
                        owner: self.owner.as_str().into(),
                    }));
                    out.given_back += 1;
                } else {
                    next.1.insert(key);
                }
            }
            if !cmds.is_empty() {
                // One repair failing (released meanwhile) leaves the others to be done.
                c.execute(cmds, Atomicity::ContinueOnError)
                    .await
                    .map_err(|e| failed(name, e))?;
            }
        }
        out.suspects = next.0.len() + next.1.len();
        *suspects = next;
        if out.released + out.given_back > 0 {
            tracing::warn!(
                released = out.released,
                given_back = out.given_back,
                "TINA: swept cross-connects and reservations of ours that no call explains"
            );
        }
        Ok(out)
    }
}

/// A running TINA deployment: the LNC and the performers' servers.
pub struct Tina {
    /// The LNC.
    pub lnc: Arc<Lnc>,
    /// Every performer's endpoint: ("eml/s1", address), ("nml.0", address), ...
    pub endpoints: Vec<(String, SocketAddr)>,
    servers: Vec<Server>,
    /// What the start-up audit against the journal found and did, one line each, the
    /// first a summary (empty without a journal).
    pub recovery: Vec<String>,
    sweeper: Arc<Sweeper>,
    sweeping: Option<tokio::task::JoinHandle<()>>,
}

impl Tina {
    /// Stops every performer's server (and the periodic sweep). The calls stay up.
    pub async fn shutdown(self) {
        if let Some(t) = self.sweeping {
            t.abort();
        }
        stop_all(self.servers).await;
    }

    /// Sweeps the switches for cross-connects and reservations of this deployment's
    /// owner that no call of the LNC explains: what a lost answer left (a commit or a
    /// reservation whose caller heard "unavailable"). Released are those the previous
    /// sweep found too (what is found once may belong to a setup still in flight), or,
    /// with `at_once`, everything found (when nothing is in flight).
    pub async fn sweep(&self, at_once: bool) -> Result<Swept, ControlError> {
        self.sweeper.sweep(at_once).await
    }
}

async fn stop_all(servers: Vec<Server>) {
    for s in servers {
        let _ = s.stop.send(());
        let _ = s.task.await;
    }
}

fn serve_err(e: impl std::fmt::Display) -> ControlError {
    ControlError::Serve {
        what: "a TINA connection performer",
        reason: e.to_string(),
    }
}

async fn serve<S: ConnectionPerformer>(
    svc: S,
    tls: Option<&TlsIdentity>,
) -> Result<(SocketAddr, Server), ControlError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(serve_err)?;
    let addr = listener.local_addr().map_err(serve_err)?;
    let incoming = atmlab_rpc::tls::grpc_incoming(listener, tls)?;
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let routes = atmlab_rpc::Services::new(ConnectionPerformerServer::new(svc));
    let task = tokio::spawn(async move {
        let stopped = async {
            let _ = rx.await;
        };
        if let Err(e) =
            atmlab_rpc::serve_incoming("TINA connection performer", incoming, routes, stopped).await
        {
            tracing::error!(error = %e, "a TINA connection performer stopped");
        }
    });
    Ok((addr, Server { stop, task }))
}

async fn connect(
    addr: SocketAddr,
    tls: Option<&TlsIdentity>,
) -> Result<ConnectionPerformerClient<Channel>, ControlError> {
    // Every performer of a deployment serves with the deployment's own identity.
    let expect = tls.and_then(TlsIdentity::subject).map_or(
        atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Cm),
        atmlab_rpc::tls::Expect::Object,
    );
    let ch = atmlab_rpc::channel_to(&addr.to_string(), tls, expect).await?;
    Ok(ConnectionPerformerClient::new(ch))
}

/// Starts a TINA deployment over `switches` (partitioned in the order given): an
/// EML-CP per switch, the NML-CP hierarchy of `config`, and the LNC over `router`. With
/// `tls`, every performer serves and calls with that identity (mutual TLS).
pub async fn start(
    config: TinaConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    tls: Option<&TlsIdentity>,
) -> Result<Tina, ControlError> {
    start_with(config, switches, router, tls, &LiveOptions::default()).await
}

/// The performers' cores by name, for the start-up audit to hand taken-back SNCs to.
struct Hierarchy {
    nmls: HashMap<String, NmlCp>,
    emls: HashMap<String, EmlCp>,
}

impl Hierarchy {
    /// `s` taken back by the NML-CP of `sub` and, below it, by its children.
    fn adopt(&self, sub: &Subnetwork, s: AdoptSnc) -> Result<u64, SncError> {
        let nml = self
            .nmls
            .get(&sub.name)
            .ok_or_else(|| SncError::internal(format!("no NML-CP {}", sub.name)))?;
        nml.driver().with(|core| {
            core.adopt(&s, &mut |c, part| match sub.children.get(c) {
                Some(child) => self.adopt(child, part),
                None => {
                    let sw = sub.switches.get(c).map(String::as_str).unwrap_or_default();
                    let eml = self
                        .emls
                        .get(sw)
                        .ok_or_else(|| SncError::internal(format!("no EML-CP of {sw:?}")))?;
                    eml.driver().with(|e| e.adopt(&part))
                }
            })
        })
    }
}

/// [`start`] with a journal (`opts.journal`): every call is journaled before its caller
/// hears of it, and a deployment started on an existing journal first audits it against
/// the switches as the other managers do ([`crate::cm::live::audit`]): the calls whose
/// hops all exist are taken back into the LNC and the performers below it, the others
/// rolled back, what no call explains released; on an empty journal while the switches
/// hold cross-connects of this owner it refuses to start unless `opts.release_strays`
/// or `opts.adopt` (which takes back the whole calls among them). The findings are in [`Tina::recovery`] and GetStatus. (`opts.faults`
/// is the other managers' and is not used here.)
pub async fn start_with(
    config: TinaConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    tls: Option<&TlsIdentity>,
    opts: &LiveOptions,
) -> Result<Tina, ControlError> {
    let names: Vec<String> = switches.iter().map(|(n, _)| n.clone()).collect();
    let tree = hierarchy(&names, config.depth, config.fanout)?;
    let strays = opts.strays().map_err(|e| ControlError::Serve {
        what: "the TINA manager",
        reason: e.message,
    })?;
    // The journal before anything is started: a journal that cannot be opened starts
    // nothing.
    let journal = match &opts.journal {
        None => None,
        Some(path) => {
            let mut journal = CmJournal::open_at(path)?;
            if let Some(token) = opts.fence {
                journal.fence(token)?;
            }
            Some((path.clone(), journal))
        }
    };
    let totals = Invocations::default();
    let mut servers = Vec::new();
    let mut endpoints = Vec::new();
    let mut addr_of: HashMap<String, SocketAddr> = HashMap::new();
    let mut held = Hierarchy {
        nmls: HashMap::new(),
        emls: HashMap::new(),
    };
    let result: Result<ConnectionPerformerClient<Channel>, ControlError> = async {
        let mut local: HashMap<String, Arc<EmlCp>> = HashMap::new();
        for (name, client) in &switches {
            let eml = EmlCp::with_faults(
                name.clone(),
                client.raw(),
                config.owner.clone(),
                totals.clone(),
                config.invocation_delay,
                config.faults,
            );
            held.emls.insert(name.clone(), eml.clone());
            if config.colocate_eml {
                // Held by its NML-CP, in this address space: no server of its own.
                local.insert(name.clone(), Arc::new(eml));
                continue;
            }
            let (addr, server) = serve(eml, tls).await?;
            servers.push(server);
            endpoints.push((format!("eml/{name}"), addr));
            addr_of.insert(format!("eml/{name}"), addr);
        }
        // Children before parents: reversed pre-order.
        for sub in tree.all().into_iter().rev() {
            let mut children = Vec::new();
            if sub.children.is_empty() {
                for sw in &sub.switches {
                    children.push(match local.get(sw) {
                        Some(eml) => Child {
                            target: ChildTarget::Local(eml.clone()),
                            iface: iface::NML_EML_LOCAL,
                            delay: std::time::Duration::ZERO,
                        },
                        None => Child::remote(
                            connect(addr_of[&format!("eml/{sw}")], tls).await?,
                            iface::NML_EML,
                            config.invocation_delay,
                        ),
                    });
                }
            } else {
                for c in &sub.children {
                    children.push(Child::remote(
                        connect(addr_of[&c.name], tls).await?,
                        iface::NML_NML,
                        config.invocation_delay,
                    ));
                }
            }
            let nml = NmlCp::new(sub.clone(), children, config.mode, totals.clone());
            held.nmls.insert(sub.name.clone(), nml.clone());
            let (addr, server) = serve(nml, tls).await?;
            servers.push(server);
            endpoints.push((sub.name.clone(), addr));
            addr_of.insert(sub.name.clone(), addr);
        }
        connect(addr_of[&tree.name], tls).await
    }
    .await;
    let root = match result {
        Ok(r) => r,
        Err(e) => {
            stop_all(servers).await;
            return Err(e);
        }
    };
    let root = Child::remote(root, iface::LNC_NML, config.invocation_delay);
    let owner = config.owner.clone();
    let interval = config.sweep_interval;
    let lnc = Lnc::new(root, router, config, totals);
    let mut recovery = Vec::new();
    if let Some((path, journal)) = journal {
        // New calls get ids above every id the journal held (`CmJournal::next_id`): a
        // released call's id given to a new call would let a release retried across the
        // restart take the new call down.
        let next = match journal.next_id() {
            Ok(n) => n,
            Err(e) => {
                stop_all(servers).await;
                return Err(ControlError::Serve {
                    what: "the TINA manager",
                    reason: format!("journal {path}: {e}"),
                });
            }
        };
        lnc.driver.with(|m| m.core.skip_ids_below(next));
        // Each call taken back goes into the LNC and, segment by segment, into the
        // performers below it; nothing is invoked.
        let mut take_back = |c: &JournaledCall| -> Result<(), String> {
            let d = c.view.traffic;
            let contract = Contract {
                traffic: Traffic {
                    class: d.class,
                    pcr: d.pcr.per_sec(),
                    scr: d.scr.per_sec(),
                    mbs: d.mbs,
                    clr: c.bounds.clr,
                },
                ctd_us: c.bounds.ctd_us,
                cdv_us: c.bounds.cdv_us,
                burst_tolerance_us: c.bounds.burst_tolerance_us,
            };
            lnc.driver
                .with(|m| {
                    m.core
                        .adopt(&c.view, &c.source, contract, &mut |s| held.adopt(&tree, s))
                })
                .map_err(|e| e.message)
        };
        let audited = audit(&owner, journal, &switches, &strays, &mut take_back).await;
        let r = match audited {
            Ok(r) => r,
            Err(e) => {
                stop_all(servers).await;
                return Err(ControlError::Serve {
                    what: "the TINA manager",
                    reason: format!("journal {path}: {}", e.message),
                });
            }
        };
        recovery = r.findings;
        let writer = JournalWriter::spawn(r.journal);
        lnc.driver.with(|m| m.journal = Some(writer));
        *lnc.recovery.lock().unwrap_or_else(|e| e.into_inner()) = recovery.clone();
    }
    let lnc = Arc::new(lnc);
    let sweeper = Arc::new(Sweeper {
        lnc: lnc.clone(),
        switches,
        owner,
        suspects: Default::default(),
    });
    let sweeping = interval.filter(|d| !d.is_zero()).map(|every| {
        let s = sweeper.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                if let Err(e) = s.sweep(false).await {
                    tracing::warn!(error = %e, "TINA: a sweep of the switches failed");
                }
            }
        })
    });
    Ok(Tina {
        lnc,
        endpoints,
        servers,
        recovery,
        sweeper,
        sweeping,
    })
}
