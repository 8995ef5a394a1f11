//! The Layer Network Coordinator (paper 001 §1.2.1): the top of TINA's connection
//! management for one layer network. It takes a connection request, gets the route from
//! the same [`Router`] the other managers use, and hands the whole route to the root
//! NML-CP as one subnetwork connection; it keeps the connections it set up.
//!
//! A point-to-multipoint connection (paper 001 §4 asks for multipoint connections and
//! sessions) is a [`Tree`], the same pure tree the sequential and xbind managers use,
//! held as *segments*: the route to the first leaf is one subnetwork connection (SNC);
//! each further leaf is grafted where its route leaves the tree, with a branch on the
//! fork's switch connection (AddBranch, forwarded down to that switch's EML-CP) and one
//! SNC for the rest of its route. Dropping a leaf releases the hops that carried only
//! it, which are a tail of every segment they lie in (each such hop had one branch, to
//! the next hop of its own segment): whole segments are released, the one cut inside is
//! trimmed (TrimSnc), leaf side first, then the branch at the fork is dropped.
//!
//! [`start`] brings a deployment up: one EML-CP per switch and one NML-CP per subnetwork
//! of the [`hierarchy`], each serving `atmlab.v1.ConnectionPerformer` on its own loopback
//! endpoint (mutual TLS when given an identity), children first, so every parent can
//! connect to its children.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use atmlab_fabric::live::convert as cv;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_performer_client::ConnectionPerformerClient;
use atmlab_rpc::v1::connection_performer_server::{ConnectionPerformer, ConnectionPerformerServer};
use tonic::Status;
use tonic::transport::Channel;

use super::partition::hierarchy;
use super::performer::{Child, EmlCp, NmlCp};
use super::{Counts, Invocations, TinaConfig, iface};
use crate::ControlError;
use crate::clock::LiveClock;
use crate::cm::core::{CmCore, HopSpec};
use crate::cm::live::Router;
use crate::cm::service::call_status;
use crate::cm::tree::{Graft, Tree, TreeError};

/// Counters of the LNC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LncStats {
    /// Connections set up.
    pub established: u64,
    /// Connections released.
    pub released: u64,
    /// Setups refused for lack of resources (route or admission).
    pub blocked: u64,
    /// Setups failed otherwise.
    pub failed: u64,
    /// Setups refused part-way and rolled back below.
    pub rollbacks: u64,
    /// Contracts changed.
    pub modified: u64,
}

/// A subnetwork connection the LNC holds for a call: a chain of tree hops set up by one
/// SetupSnc of the root NML-CP. A point-to-point call is one segment; each leaf added
/// later grows one more, below the branch it forks from. Segments are kept in the order
/// they were set up, so every segment comes after the one it hangs from.
#[derive(Debug, Clone)]
struct Segment {
    snc: u64,
    /// Tree hop indices, upstream first.
    hops: Vec<usize>,
}

/// One call as the LNC keeps it: its tree ([`Tree`], shared with the other managers),
/// the identifier of every slot, the switch connection of every hop, and the segments
/// that hold them in the hierarchy.
#[derive(Debug, Clone)]
struct Call {
    id: u64,
    source: String,
    tree: Tree,
    /// Per tree slot.
    ids: Vec<Option<pb::VcId>>,
    /// Per tree hop: the switch connection.
    conns: Vec<u64>,
    segments: Vec<Segment>,
    cell: pb::CellQos,
    tag: String,
    setup_us: u64,
    /// Remote invocations made for this call so far (setup, changes), the LNC's own
    /// included.
    invocations: u64,
}

impl Call {
    /// The call as cm.proto's ConnectionInfo: one HopInfo per switch connection, every
    /// branch where the tree forks; destinations in the order they joined.
    fn info(&self) -> pb::ConnectionInfo {
        let t = &self.tree;
        let hops = t
            .live_hops()
            .map(|h| {
                let hop = t.hop(h);
                let branches: Vec<pb::Branch> = hop
                    .outs
                    .iter()
                    .map(|&s| pb::Branch {
                        port: u32::from(t.slot(s).port),
                        id: self.ids[s],
                    })
                    .collect();
                pb::HopInfo {
                    switch: hop.switch.clone(),
                    connection: self.conns[h],
                    in_port: u32::from(hop.in_port),
                    in_id: self.ids[hop.in_slot],
                    out_port: branches.first().map_or(0, |b| b.port),
                    out_id: branches.first().and_then(|b| b.id),
                    branches,
                }
            })
            .collect();
        let (destinations, destination_vcs) = t
            .leaves()
            .into_iter()
            .map(|(l, s)| (l.to_string(), self.ids[s].unwrap_or_default()))
            .unzip();
        pb::ConnectionInfo {
            id: self.id,
            source: self.source.clone(),
            destinations,
            source_vc: self.ids[0],
            destination_vcs,
            hops,
            cell_qos: Some(self.cell),
            setup_us: self.setup_us,
            tag: self.tag.clone(),
            invocations: u32::try_from(self.invocations).unwrap_or(u32::MAX),
        }
    }

    /// Per-slot and per-hop vectors the tree's size (after a graft, or an ungraft).
    fn grow(&mut self) {
        self.ids.resize(self.tree.slots().len(), None);
        self.conns.resize(self.tree.hops().len(), 0);
    }
}

/// A call in the LNC's table: its last answer, and the call itself unless a change
/// (AddLeaf, DropLeaf, Modify, Delete) has it out.
struct Held {
    info: pb::ConnectionInfo,
    call: Option<Call>,
}

/// The Layer Network Coordinator.
pub struct Lnc {
    router: Mutex<Box<dyn Router>>,
    clock: LiveClock,
    root: ConnectionPerformerClient<Channel>,
    config: TinaConfig,
    totals: Invocations,
    connections: Mutex<BTreeMap<u64, Held>>,
    next: AtomicU64,
    stats: Mutex<LncStats>,
}

fn sum(m: &HashMap<String, u64>) -> u64 {
    m.values().sum()
}

fn tree_status(e: TreeError) -> Status {
    match e {
        TreeError::LastLeaf(_) => Status::failed_precondition(e.to_string()),
        e => call_status(&CmCore::tree_error(e)),
    }
}

impl Lnc {
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
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, f: impl FnOnce(&mut LncStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn route(&self, source: &str, destination: &str, pcr: f64) -> Result<Vec<HopSpec>, Status> {
        self.router
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .route(self.clock.now(), source, destination, pcr)
            .map_err(|e| {
                self.count(|s| {
                    if e.blocked() {
                        s.blocked += 1
                    } else {
                        s.failed += 1
                    }
                });
                call_status(&e)
            })
    }

    /// One invocation of the root NML-CP by the LNC: counted, after the emulated round
    /// trip.
    async fn invoke(&self, call: &mut Call) -> ConnectionPerformerClient<Channel> {
        self.totals.count(iface::LNC_NML);
        call.invocations += 1;
        super::performer::wire(self.config.invocation_delay).await;
        self.root.clone()
    }

    /// Sets up `hops` (new tree hops, a chain, upstream first) as one subnetwork
    /// connection entering on `in_id` (`None`: the source's VC, chosen below).
    async fn setup_segment(
        &self,
        call: &mut Call,
        hops: &[usize],
        in_id: Option<pb::VcId>,
    ) -> Result<(), Status> {
        let t = &call.tree;
        let req = pb::SetupSncRequest {
            hops: hops
                .iter()
                .map(|&h| {
                    let hop = t.hop(h);
                    pb::SncHop {
                        switch: hop.switch.clone(),
                        in_port: u32::from(hop.in_port),
                        out_port: u32::from(t.slot(hop.outs[0]).port),
                    }
                })
                .collect(),
            in_id,
            out_id: None,
            traffic: call.cell.traffic,
            buffer_cells: 0,
            tag: call.tag.clone(),
        };
        let rep = self.invoke(call).await.setup_snc(req).await?.into_inner();
        call.invocations += sum(&rep.invocations);
        if rep.hops.len() != hops.len() {
            return Err(Status::internal(format!(
                "the root NML-CP set up {} hops of {}",
                rep.hops.len(),
                hops.len()
            )));
        }
        for (&h, info) in hops.iter().zip(&rep.hops) {
            let hop = call.tree.hop(h);
            let (in_slot, out_slot) = (hop.in_slot, hop.outs[0]);
            call.conns[h] = info.connection;
            call.ids[in_slot] = info.in_id;
            call.ids[out_slot] = info.out_id;
        }
        call.segments.push(Segment {
            snc: rep.snc,
            hops: hops.to_vec(),
        });
        Ok(())
    }

    /// Adds `leaf` along `route` to the call: a new branch where the route leaves the
    /// tree (AddBranch at that switch's EML-CP), then the rest of the route as one new
    /// segment. Refused, the call is as it was, at the switches too.
    async fn graft(&self, call: &mut Call, leaf: &str, route: &[HopSpec]) -> Result<(), Status> {
        let g = call.tree.graft(leaf, route).map_err(tree_status)?;
        call.grow();
        let result = self.graft_commands(call, &g).await;
        if result.is_err() {
            call.tree.ungraft(&g);
            call.grow();
        }
        result
    }

    async fn graft_commands(&self, call: &mut Call, g: &Graft) -> Result<(), Status> {
        let mut branch = None;
        if let Some((h, s)) = g.new_branch {
            let req = pb::AddSncBranchRequest {
                switch: call.tree.hop(h).switch.clone(),
                connection: call.conns[h],
                port: u32::from(call.tree.slot(s).port),
            };
            let rep = self.invoke(call).await.add_branch(req).await?.into_inner();
            call.invocations += sum(&rep.invocations);
            call.ids[s] = rep.id;
            branch = Some((h, s));
        }
        if g.new_hops.is_empty() {
            return Ok(());
        }
        let in_id = call.ids[call.tree.hop(g.new_hops[0]).in_slot];
        let Err(e) = self.setup_segment(call, &g.new_hops, in_id).await else {
            return Ok(());
        };
        if let Some((h, s)) = branch
            && let Err(de) = self.drop_branch(call, h, s).await
        {
            tracing::warn!(call = call.id, error = %de, "LNC: taking back a refused leaf's branch failed");
        }
        Err(e)
    }

    async fn drop_branch(&self, call: &mut Call, h: usize, s: usize) -> Result<(), Status> {
        let req = pb::DropSncBranchRequest {
            switch: call.tree.hop(h).switch.clone(),
            connection: call.conns[h],
            port: u32::from(call.tree.slot(s).port),
            id: call.ids[s],
        };
        let rep = self.invoke(call).await.drop_branch(req).await?.into_inner();
        call.invocations += sum(&rep.invocations);
        Ok(())
    }

    /// Releases the segments at `which` (indices into `call.segments`), downstream
    /// first; the ones released leave the call, the others stay for a retry.
    async fn release_segments(&self, call: &mut Call, mut which: Vec<usize>) -> Result<(), Status> {
        which.sort_unstable();
        let mut first_err = None;
        let mut gone = Vec::new();
        for &i in which.iter().rev() {
            let snc = call.segments[i].snc;
            match self
                .invoke(call)
                .await
                .release_snc(pb::ReleaseSncRequest { snc })
                .await
            {
                Ok(r) => {
                    call.invocations += sum(&r.into_inner().invocations);
                    gone.push(i);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        // `gone` is in descending order: removing from the back keeps indices valid.
        for i in gone {
            call.segments.remove(i);
        }
        first_err.map_or(Ok(()), Err)
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
        let started = std::time::Instant::now();
        let (traffic, _) = cv::traffic(cell.traffic.as_ref())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let Some((first, rest)) = destinations.split_first() else {
            return Err(Status::invalid_argument("no destination"));
        };
        let pcr = traffic.pcr.per_sec();
        let mut routes = Vec::with_capacity(destinations.len());
        for d in destinations {
            routes.push(self.route(source, d, pcr)?);
        }
        let tree = Tree::path(first, &routes[0]).map_err(tree_status)?;
        let mut call = Call {
            id: 0,
            source: source.to_string(),
            ids: vec![None; tree.slots().len()],
            conns: vec![0; tree.hops().len()],
            tree,
            segments: Vec::new(),
            cell,
            tag: tag.to_string(),
            setup_us: 0,
            invocations: 0,
        };
        let all: Vec<usize> = (0..call.tree.hops().len()).collect();
        let mut result = self.setup_segment(&mut call, &all, None).await;
        if result.is_ok() {
            for (leaf, route) in rest.iter().zip(&routes[1..]) {
                result = self.graft(&mut call, leaf, route).await;
                if result.is_err() {
                    break;
                }
            }
        }
        if let Err(e) = result {
            self.count(|s| {
                if e.code() == tonic::Code::ResourceExhausted {
                    s.blocked += 1
                } else {
                    s.failed += 1
                }
                s.rollbacks += 1;
            });
            let n = call.segments.len();
            if let Err(re) = self.release_segments(&mut call, (0..n).collect()).await {
                tracing::error!(error = %re, "LNC: rolling back a refused multipoint setup failed");
            }
            return Err(e);
        }
        call.id = self.next.fetch_add(1, Ordering::Relaxed);
        call.setup_us = started.elapsed().as_micros() as u64;
        let info = call.info();
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                call.id,
                Held {
                    info: info.clone(),
                    call: Some(call),
                },
            );
        self.count(|s| s.established += 1);
        Ok(info)
    }

    /// Takes call `id` out of the table for a change; refused if there is none or
    /// another change has it.
    fn take(&self, id: u64) -> Result<Call, Status> {
        let mut conns = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let held = conns
            .get_mut(&id)
            .ok_or_else(|| Status::not_found(format!("no connection {id}")))?;
        held.call.take().ok_or_else(|| {
            Status::aborted(format!(
                "connection {id} is already being changed; try again"
            ))
        })
    }

    /// Puts a call back after a change; returns its answer.
    fn put(&self, call: Call) -> pb::ConnectionInfo {
        let info = call.info();
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                call.id,
                Held {
                    info: info.clone(),
                    call: Some(call),
                },
            );
        info
    }

    /// Releases a connection down the hierarchy, every segment, downstream first. What
    /// could not be released stays with the call, so a retried delete finishes it.
    pub async fn delete(&self, id: u64) -> Result<(), Status> {
        let mut call = self.take(id)?;
        let n = call.segments.len();
        if let Err(e) = self.release_segments(&mut call, (0..n).collect()).await {
            self.put(call);
            return Err(e);
        }
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.count(|s| s.released += 1);
        Ok(())
    }

    /// Adds the leaf `leaf` (a host) to connection `id`, while it carries traffic: the
    /// switches upstream of the fork are not touched. Refused, the connection is as it
    /// was.
    pub async fn add_leaf(&self, id: u64, leaf: &str) -> Result<pb::ConnectionInfo, Status> {
        let mut call = self.take(id)?;
        let pcr = cv::traffic(call.cell.traffic.as_ref())
            .map(|(t, _)| t.pcr.per_sec())
            .unwrap_or(0.0);
        let result = match self.route(&call.source, leaf, pcr) {
            Ok(route) => self.graft(&mut call, leaf, &route).await,
            Err(e) => Err(e),
        };
        let info = self.put(call);
        result.map(|()| info)
    }

    /// Drops leaf `leaf` of connection `id`: the hops that carried only it are released
    /// (whole segments, or the tail of one: TrimSnc), then its branch at the fork is
    /// dropped; the other leaves keep receiving throughout. Refused for the last leaf.
    /// A release that fails leaves those hops with the call (the leaf is gone from the
    /// tree); deleting the connection releases them.
    pub async fn drop_leaf(&self, id: u64, leaf: &str) -> Result<pb::ConnectionInfo, Status> {
        let mut call = self.take(id)?;
        let p = match call.tree.prune(leaf) {
            Ok(p) => p,
            Err(e) => {
                self.put(call);
                return Err(tree_status(e));
            }
        };
        let mut first_err = None;
        // Downstream segments first.
        for i in (0..call.segments.len()).rev() {
            let seg = &call.segments[i];
            let Some(keep) = seg.hops.iter().position(|h| p.released_hops.contains(h)) else {
                continue;
            };
            let snc = seg.snc;
            let r = if keep == 0 {
                self.release_segments(&mut call, vec![i]).await
            } else {
                let req = pb::TrimSncRequest {
                    snc,
                    keep: u32::try_from(keep).unwrap_or(u32::MAX),
                };
                match self.invoke(&mut call).await.trim_snc(req).await {
                    Ok(r) => {
                        call.invocations += sum(&r.into_inner().invocations);
                        call.segments[i].hops.truncate(keep);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
            if let Err(e) = r {
                tracing::warn!(call = id, leaf, error = %e, "LNC: releasing a dropped leaf's hops failed; they stay with the call");
                first_err.get_or_insert(e);
            }
        }
        if let Some((h, s)) = p.dropped_branch
            && let Err(e) = self.drop_branch(&mut call, h, s).await
        {
            first_err.get_or_insert(e);
        }
        let info = self.put(call);
        first_err.map_or(Ok(info), Err)
    }

    /// Changes a connection's contract on every hop, admission first; refused, every
    /// hop keeps the old one.
    pub async fn modify(&self, id: u64, cell: pb::CellQos) -> Result<pb::ConnectionInfo, Status> {
        cv::traffic(cell.traffic.as_ref()).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut call = self.take(id)?;
        let mut changed = Vec::new();
        let mut err = None;
        for i in 0..call.segments.len() {
            let snc = call.segments[i].snc;
            let req = pb::ModifySncRequest {
                snc,
                traffic: cell.traffic,
            };
            match self.invoke(&mut call).await.modify_snc(req).await {
                Ok(r) => {
                    call.invocations += sum(&r.into_inner().invocations);
                    changed.push(snc);
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = err {
            // Change back the segments already changed: going back is a decrease where
            // the new contract was an increase, so it is not refused.
            for snc in changed {
                let req = pb::ModifySncRequest {
                    snc,
                    traffic: call.cell.traffic,
                };
                if let Err(be) = self.invoke(&mut call).await.modify_snc(req).await {
                    tracing::error!(call = id, error = %be, "LNC: restoring the old contract failed");
                }
            }
            self.put(call);
            return Err(e);
        }
        call.cell = cell;
        let info = self.put(call);
        self.count(|s| s.modified += 1);
        Ok(info)
    }

    /// One connection.
    pub fn get(&self, id: u64) -> Option<pb::ConnectionInfo> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .map(|h| h.info.clone())
    }

    /// Every connection held.
    pub fn list(&self) -> Vec<pb::ConnectionInfo> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|h| h.info.clone())
            .collect()
    }

    /// The status as GetStatus answers it: kind "tina", the counters, and the remote
    /// invocations by interface (`messages` is their total, `commands` the switch
    /// operations among them).
    pub fn status(&self) -> pb::CmStatus {
        let s = self.stats();
        let inv = self.invocations();
        pb::CmStatus {
            kind: "tina".into(),
            established: s.established,
            released: s.released,
            blocked: s.blocked,
            failed: s.failed,
            active: self
                .connections
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len() as u64,
            messages: inv.values().sum(),
            commands: inv.get(iface::EML_SWITCH).copied().unwrap_or(0),
            rollbacks: s.rollbacks,
            recovery: vec![format!(
                "tina: {} setup, {} level(s) of NML-CP, fan-out {}",
                self.config.mode.name(),
                self.config.depth,
                self.config.fanout
            )],
            invocations: inv.into_iter().collect(),
            ..Default::default()
        }
    }
}

struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// A running TINA deployment: the LNC and the performers' servers.
pub struct Tina {
    /// The LNC.
    pub lnc: Arc<Lnc>,
    /// Every performer's endpoint: ("eml/s1", address), ("nml.0", address), ...
    pub endpoints: Vec<(String, SocketAddr)>,
    servers: Vec<Server>,
}

impl Tina {
    /// Stops every performer's server.
    pub async fn shutdown(self) {
        stop_all(self.servers).await;
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
    let task = tokio::spawn(async move {
        if let Err(e) = atmlab_rpc::server()
            .tcp_nodelay(true)
            .add_service(ConnectionPerformerServer::new(svc))
            .serve_with_incoming_shutdown(incoming, async {
                let _ = rx.await;
            })
            .await
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
    let ch = atmlab_rpc::client_channel(&addr.to_string(), tls).await?;
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
    let names: Vec<String> = switches.iter().map(|(n, _)| n.clone()).collect();
    let tree = hierarchy(&names, config.depth, config.fanout)?;
    let totals = Invocations::default();
    let mut servers = Vec::new();
    let mut endpoints = Vec::new();
    let mut addr_of: HashMap<String, SocketAddr> = HashMap::new();
    let result: Result<ConnectionPerformerClient<Channel>, ControlError> = async {
        for (name, client) in &switches {
            let eml = EmlCp::new(
                name.clone(),
                client.raw(),
                config.owner.clone(),
                totals.clone(),
                config.invocation_delay,
            );
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
                    children.push(Child {
                        client: connect(addr_of[&format!("eml/{sw}")], tls).await?,
                        iface: iface::NML_EML,
                        delay: config.invocation_delay,
                    });
                }
            } else {
                for c in &sub.children {
                    children.push(Child {
                        client: connect(addr_of[&c.name], tls).await?,
                        iface: iface::NML_NML,
                        delay: config.invocation_delay,
                    });
                }
            }
            let nml = NmlCp::new(sub.clone(), children, config.mode, totals.clone());
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
    let lnc = Lnc {
        router: Mutex::new(router),
        clock: LiveClock::start(),
        root,
        config,
        totals,
        connections: Mutex::new(BTreeMap::new()),
        next: AtomicU64::new(1),
        stats: Mutex::new(LncStats::default()),
    };
    Ok(Tina {
        lnc: Arc::new(lnc),
        endpoints,
        servers,
    })
}
