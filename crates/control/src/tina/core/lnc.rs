//! The LNC's state machine (paper 001 §1.2.1: the Layer Network Coordinator "receives
//! requests for connectivity in a layer network" and hands them to the NML-CP hierarchy
//! below it). It asks its shell for each route ([`RouteRequest`], answered from the same
//! route object the other managers use), hands a call to the root NML-CP as subnetwork
//! connections (root invocations, [`Transmit`]s of [`SncRequest`]s, one at a time), and
//! keeps the calls it set up.
//!
//! A point-to-multipoint call (paper 001 §1 asks for connections beyond point-to-point)
//! is a [`Tree`], the same pure tree the sequential and xbind managers use, held as
//! *segments*: the route to the first leaf is one subnetwork connection (SNC); each
//! further leaf is grafted where its route leaves the tree, with a branch on the fork's
//! switch connection (AddBranch, forwarded down to that switch's EML-CP) and one SNC for
//! the rest of its route (`lnc_leaves.rs`). Dropping a leaf releases the hops that
//! carried only it, which are a tail of every segment they lie in: whole segments are
//! released, the one cut inside is trimmed (TrimSnc), leaf side first, then the branch at
//! the fork is dropped.
//!
//! This file holds the machine, the call table, AddConnection, DeleteConnection and
//! ModifyConnection. Its only time is the `now` a shell passes in, for the setup time
//! each answer reports.

use std::collections::{BTreeMap, HashMap, VecDeque};

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::Instant;

use super::super::{Counts, iface};
use super::{
    BranchInfo, HopInfo, HopSpec, InvocationId, OpId, SetupSnc, SncError, SncRequest, SncResult,
    Traffic, Transmit, count, set_up,
};
use crate::cm::core::{CallError, CmCore};
use crate::cm::tree::{Graft, Tree, TreeError};

pub(super) use super::lnc_leaves::Dropping;

/// A call's contract as the caller gave it (cm.proto's CellQos), echoed in its answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contract {
    /// The traffic contract every hop admits.
    pub traffic: Traffic,
    /// Cell transfer delay bound, microseconds.
    pub ctd_us: u64,
    /// Cell delay variation bound, microseconds.
    pub cdv_us: u64,
    /// Burst tolerance, microseconds.
    pub burst_tolerance_us: u64,
}

/// An operation of the LNC (the ConnectionManager interface).
#[derive(Debug, Clone, PartialEq)]
pub enum LncRequest {
    /// A call from `source` to every one of `destinations` (one: point-to-point).
    Add {
        /// Source host.
        source: String,
        /// Destination hosts, the first the tree's first leaf.
        destinations: Vec<String>,
        /// The contract.
        contract: Contract,
        /// The caller's label.
        tag: String,
    },
    /// Release call `id`.
    Delete {
        /// The call.
        id: u64,
    },
    /// Add leaf `leaf` to call `id`.
    AddLeaf {
        /// The call.
        id: u64,
        /// The new leaf's host.
        leaf: String,
    },
    /// Drop leaf `leaf` of call `id`.
    DropLeaf {
        /// The call.
        id: u64,
        /// The leaf.
        leaf: String,
    },
    /// Change call `id`'s contract on every hop.
    Modify {
        /// The call.
        id: u64,
        /// The new contract.
        contract: Contract,
    },
}

/// A call as the LNC reports it (cm.proto's ConnectionInfo).
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    /// The call.
    pub id: u64,
    /// Source host.
    pub source: String,
    /// Leaves, in the order they joined.
    pub destinations: Vec<String>,
    /// The source's VC.
    pub source_vc: Option<VcId>,
    /// Each leaf's VC.
    pub destination_vcs: Vec<Option<VcId>>,
    /// One entry per switch connection, every branch where the tree forks.
    pub hops: Vec<HopInfo>,
    /// The contract.
    pub contract: Contract,
    /// Setup time, microseconds.
    pub setup_us: u64,
    /// The caller's label.
    pub tag: String,
    /// Remote invocations made for the call so far (setup, changes), the LNC's own
    /// included.
    pub invocations: u32,
}

/// The answer to an [`LncRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum LncReply {
    /// The call as it now is (Add, AddLeaf, DropLeaf, Modify).
    Connection(CallInfo),
    /// Released (Delete).
    Deleted,
}

/// A route the LNC needs: from `source` to `destination` with `bandwidth` (cells/s)
/// free on every output port. Answered with [`LncCore::handle_route`].
#[derive(Debug, Clone, PartialEq)]
pub struct RouteRequest {
    /// Answer under this id.
    pub id: InvocationId,
    /// Source host.
    pub source: String,
    /// Destination host.
    pub destination: String,
    /// Cells/s.
    pub bandwidth: f64,
}

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
/// SetupSnc of the root NML-CP. Segments are kept in the order they were set up, so
/// every segment comes after the one it hangs from.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub(super) snc: u64,
    /// Tree hop indices, upstream first.
    pub(super) hops: Vec<usize>,
}

/// One call as the LNC keeps it: its tree, the identifier of every slot, the switch
/// connection of every hop, and the segments that hold them in the hierarchy.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) id: u64,
    pub(super) source: String,
    pub(super) tree: Tree,
    /// Per tree slot.
    pub(super) ids: Vec<Option<VcId>>,
    /// Per tree hop: the switch connection.
    pub(super) conns: Vec<u64>,
    pub(super) segments: Vec<Segment>,
    pub(super) contract: Contract,
    pub(super) tag: String,
    setup_us: u64,
    pub(super) invocations: u64,
}

impl Call {
    fn info(&self) -> CallInfo {
        let t = &self.tree;
        let hops = t
            .live_hops()
            .map(|h| {
                let hop = t.hop(h);
                let branches: Vec<BranchInfo> = hop
                    .outs
                    .iter()
                    .map(|&s| BranchInfo {
                        port: PortId(t.slot(s).port),
                        id: self.ids[s],
                    })
                    .collect();
                HopInfo {
                    switch: hop.switch.clone(),
                    connection: self.conns[h],
                    in_port: PortId(hop.in_port),
                    in_id: self.ids[hop.in_slot],
                    out_port: branches.first().map_or(PortId(0), |b| b.port),
                    out_id: branches.first().and_then(|b| b.id),
                    branches,
                }
            })
            .collect();
        let (destinations, destination_vcs) = t
            .leaves()
            .into_iter()
            .map(|(l, s)| (l.to_string(), self.ids[s]))
            .unzip();
        CallInfo {
            id: self.id,
            source: self.source.clone(),
            destinations,
            source_vc: self.ids[0],
            destination_vcs,
            hops,
            contract: self.contract,
            setup_us: self.setup_us,
            tag: self.tag.clone(),
            invocations: u32::try_from(self.invocations).unwrap_or(u32::MAX),
        }
    }

    /// Per-slot and per-hop vectors the tree's size (after a graft, or an ungraft).
    pub(super) fn grow(&mut self) {
        self.ids.resize(self.tree.slots().len(), None);
        self.conns.resize(self.tree.hops().len(), 0);
    }

    /// Hop `h`'s branch `s` as AddBranch (`id: None`) or DropBranch names it.
    pub(super) fn branch(&self, h: usize, s: usize, drop: bool) -> SncRequest {
        let (switch, connection) = (self.tree.hop(h).switch.clone(), self.conns[h]);
        let port = PortId(self.tree.slot(s).port);
        match drop {
            false => SncRequest::AddBranch {
                switch,
                connection,
                port,
            },
            true => SncRequest::DropBranch {
                switch,
                connection,
                port,
                id: self.ids[s],
            },
        }
    }
}

/// A call in the table: its last answer, and the call itself unless a change (AddLeaf,
/// DropLeaf, Modify, Delete) has it out.
struct Held {
    info: CallInfo,
    call: Option<Call>,
}

/// What follows a segment's SetupSnc.
#[derive(Debug)]
pub(super) enum AfterSegment {
    /// The first leaf's route: the other leaves are grafted next.
    First(Vec<(String, Vec<HopSpec>)>),
    /// A graft's new hops, below `branch` if one was added at the fork.
    Graft {
        graft: Graft,
        branch: Option<(usize, usize)>,
        then: AfterGraft,
    },
}

/// What follows a graft.
#[derive(Debug)]
pub(super) enum AfterGraft {
    /// AddConnection: graft these leaves next.
    Add(Vec<(String, Vec<HopSpec>)>),
    /// AddLeaf: the call goes back to the table.
    AddLeaf,
}

/// What follows a release of segments.
#[derive(Debug)]
pub(super) enum AfterRelease {
    /// A refused AddConnection, refused with this.
    AddRollback(SncError),
    /// DeleteConnection.
    Delete,
    /// DropLeaf goes on.
    DropLeaf(Dropping),
}

/// What an operation with its call out of the table waits for.
#[derive(Debug)]
pub(super) enum Work {
    /// SetupSnc of new tree hops.
    Segment {
        hops: Vec<usize>,
        then: AfterSegment,
    },
    /// AddBranch at a graft's fork.
    Branch { graft: Graft, then: AfterGraft },
    /// DropBranch taking back a refused graft's branch.
    Unbranch {
        graft: Graft,
        error: SncError,
        then: AfterGraft,
    },
    /// ReleaseSnc of segments `todo` (the last first), one at a time.
    Release {
        todo: Vec<usize>,
        gone: Vec<usize>,
        first_err: Option<SncError>,
        then: AfterRelease,
    },
    /// DropLeaf's TrimSnc of segment `i` to `keep` hops, or (`None`) its DropBranch.
    Prune(Dropping, Option<(usize, usize)>),
    /// ModifySnc of segment `next`, after `changed`.
    Modify {
        new: Contract,
        next: usize,
        changed: Vec<u64>,
    },
    /// The change back of these segments after `error`.
    Restore { todo: Vec<u64>, error: SncError },
}

/// Where an operation stands.
#[derive(Debug)]
pub(super) enum Step {
    /// AddConnection's routes, one at a time.
    Routes {
        source: String,
        destinations: Vec<String>,
        contract: Contract,
        tag: String,
        routes: Vec<Vec<HopSpec>>,
    },
    /// AddLeaf's route.
    LeafRoute(Call, String),
    /// A root invocation for `Call`.
    Root(Call, Work),
}

#[derive(Debug)]
pub(super) struct Op {
    pub(super) started: Instant,
    pub(super) step: Step,
}

/// The Layer Network Coordinator.
pub struct LncCore {
    calls: BTreeMap<u64, Held>,
    next_call: u64,
    stats: LncStats,
    ops: HashMap<OpId, Op>,
    waiting: HashMap<InvocationId, OpId>,
    next_invocation: InvocationId,
    transmits: VecDeque<Transmit<SncRequest>>,
    routes: VecDeque<RouteRequest>,
    replies: VecDeque<(OpId, Result<LncReply, SncError>)>,
    totals: Counts,
    now: Instant,
}

impl Default for LncCore {
    fn default() -> Self {
        LncCore::new()
    }
}

impl LncCore {
    /// An LNC holding no calls.
    pub fn new() -> Self {
        LncCore {
            calls: BTreeMap::new(),
            next_call: 1,
            stats: LncStats::default(),
            ops: HashMap::new(),
            waiting: HashMap::new(),
            next_invocation: 1,
            transmits: VecDeque::new(),
            routes: VecDeque::new(),
            replies: VecDeque::new(),
            totals: Counts::new(),
            now: Instant::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> LncStats {
        self.stats
    }

    /// Root invocations emitted so far ("lnc->nml").
    pub fn invocations(&self) -> &Counts {
        &self.totals
    }

    /// One call's last answer.
    pub fn get(&self, id: u64) -> Option<&CallInfo> {
        self.calls.get(&id).map(|h| &h.info)
    }

    /// Every call's last answer, by id.
    pub fn list(&self) -> impl Iterator<Item = &CallInfo> {
        self.calls.values().map(|h| &h.info)
    }

    /// Calls held.
    pub fn active(&self) -> usize {
        self.calls.len()
    }

    /// The next root invocation to perform.
    pub fn poll_transmit(&mut self) -> Option<Transmit<SncRequest>> {
        self.transmits.pop_front()
    }

    /// The next route to look up.
    pub fn poll_route(&mut self) -> Option<RouteRequest> {
        self.routes.pop_front()
    }

    /// The next finished operation.
    pub fn poll_reply(&mut self) -> Option<(OpId, Result<LncReply, SncError>)> {
        self.replies.pop_front()
    }

    /// A new operation `op`.
    pub fn handle_request(&mut self, now: Instant, op: OpId, request: LncRequest) {
        self.now = now;
        let started = now;
        match request {
            LncRequest::Add {
                source,
                destinations,
                contract,
                tag,
            } => {
                if destinations.is_empty() {
                    return self.reply(op, Err(SncError::invalid("no destination")));
                }
                let step = Step::Routes {
                    source,
                    destinations,
                    contract,
                    tag,
                    routes: Vec::new(),
                };
                self.next_route(op, started, step);
            }
            LncRequest::Delete { id } => match self.take(id) {
                Ok(call) => {
                    let all = (0..call.segments.len()).collect();
                    self.release_segments(op, started, call, all, AfterRelease::Delete);
                }
                Err(e) => self.reply(op, Err(e)),
            },
            LncRequest::AddLeaf { id, leaf } => match self.take(id) {
                Ok(call) => {
                    let route = RouteRequest {
                        id: self.next_id(op),
                        source: call.source.clone(),
                        destination: leaf.clone(),
                        bandwidth: call.contract.traffic.pcr,
                    };
                    self.routes.push_back(route);
                    let step = Step::LeafRoute(call, leaf);
                    self.ops.insert(op, Op { started, step });
                }
                Err(e) => self.reply(op, Err(e)),
            },
            LncRequest::DropLeaf { id, leaf } => match self.take(id) {
                Ok(call) => self.drop_leaf(op, started, call, &leaf),
                Err(e) => self.reply(op, Err(e)),
            },
            LncRequest::Modify { id, contract } => match self.take(id) {
                Ok(call) => {
                    let work = Work::Modify {
                        new: contract,
                        next: 0,
                        changed: Vec::new(),
                    };
                    self.modify_next(op, started, call, work);
                }
                Err(e) => self.reply(op, Err(e)),
            },
        }
    }

    /// The root NML-CP's answer to invocation `id`.
    pub fn handle_answer(&mut self, now: Instant, id: InvocationId, answer: SncResult) {
        self.now = now;
        let Some((op, Op { started, step })) = self.resume(id) else {
            return;
        };
        let Step::Root(call, work) = step else {
            return;
        };
        match work {
            Work::Segment { hops, then } => {
                let mut call = call;
                let r = self.segment_answered(&mut call, &hops, answer);
                self.segment_done(op, started, call, r, then);
            }
            Work::Release {
                mut todo,
                mut gone,
                mut first_err,
                then,
            } => {
                let mut call = call;
                match answer {
                    Ok(rep) => {
                        call.invocations += sum(&rep);
                        gone.extend(todo.pop());
                    }
                    Err(e) => {
                        todo.pop();
                        first_err.get_or_insert(e);
                    }
                }
                let work = Work::Release {
                    todo,
                    gone,
                    first_err,
                    then,
                };
                self.release_next(op, started, call, work);
            }
            Work::Modify {
                new,
                mut next,
                mut changed,
            } => {
                let mut call = call;
                match answer {
                    Ok(rep) => {
                        call.invocations += sum(&rep);
                        changed.push(call.segments[next].snc);
                        next += 1;
                        let work = Work::Modify { new, next, changed };
                        self.modify_next(op, started, call, work);
                    }
                    Err(error) => {
                        // Change back the segments already changed: going back is a
                        // decrease where the new contract was an increase, so it is not
                        // refused.
                        let work = Work::Restore {
                            todo: changed,
                            error,
                        };
                        self.restore_next(op, started, call, work);
                    }
                }
            }
            Work::Restore { todo, error } => {
                if let Err(be) = answer {
                    tracing::error!(call = call.id, error = %be, "LNC: restoring the old contract failed");
                }
                let work = Work::Restore { todo, error };
                self.restore_next(op, started, call, work);
            }
            work => self.leaf_answered(op, started, call, work, answer),
        }
    }

    /// The route object's answer to route request `id`.
    pub fn handle_route(
        &mut self,
        now: Instant,
        id: InvocationId,
        route: Result<Vec<HopSpec>, CallError>,
    ) {
        self.now = now;
        let Some((op, Op { started, step })) = self.resume(id) else {
            return;
        };
        let route = route.map_err(|e| {
            if e.blocked() {
                self.stats.blocked += 1;
            } else {
                self.stats.failed += 1;
            }
            SncError::new(SncError::of_fabric(e.kind), e.message)
        });
        match (step, route) {
            (
                Step::Routes {
                    source,
                    destinations,
                    contract,
                    tag,
                    mut routes,
                },
                Ok(r),
            ) => {
                routes.push(r);
                let step = Step::Routes {
                    source,
                    destinations,
                    contract,
                    tag,
                    routes,
                };
                self.next_route(op, started, step);
            }
            (Step::LeafRoute(call, leaf), Ok(r)) => {
                self.graft(op, started, call, &leaf, &r, AfterGraft::AddLeaf);
            }
            (Step::LeafRoute(call, _), Err(e)) => {
                self.put(call);
                self.reply(op, Err(e));
            }
            (_, Err(e)) => self.reply(op, Err(e)),
            (Step::Root(..), Ok(_)) => {}
        }
    }

    pub(super) fn reply(&mut self, op: OpId, r: Result<LncReply, SncError>) {
        self.replies.push_back((op, r));
    }

    fn next_id(&mut self, op: OpId) -> InvocationId {
        let id = self.next_invocation;
        self.next_invocation += 1;
        self.waiting.insert(id, op);
        id
    }

    fn resume(&mut self, id: InvocationId) -> Option<(OpId, Op)> {
        let op = self.waiting.remove(&id)?;
        Some((op, self.ops.remove(&op)?))
    }

    /// Invokes the root NML-CP for `call` (counted for the call and in the totals); the
    /// operation then waits at `work`.
    pub(super) fn invoke(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        work: Work,
        request: SncRequest,
    ) {
        call.invocations += 1;
        count(&mut self.totals, iface::LNC_NML);
        let id = self.next_id(op);
        self.transmits.push_back(Transmit {
            id,
            iface: iface::LNC_NML,
            call: request,
        });
        let step = Step::Root(call, work);
        self.ops.insert(op, Op { started, step });
    }

    /// Takes call `id` out of the table for a change; refused if there is none or
    /// another change has it.
    fn take(&mut self, id: u64) -> Result<Call, SncError> {
        let held = self
            .calls
            .get_mut(&id)
            .ok_or_else(|| SncError::not_found(format!("no connection {id}")))?;
        held.call.take().ok_or_else(|| {
            SncError::new(
                super::ErrorKind::Aborted,
                format!("connection {id} is already being changed; try again"),
            )
        })
    }

    /// Puts a call back after a change; returns its answer.
    pub(super) fn put(&mut self, call: Call) -> CallInfo {
        let info = call.info();
        let held = Held {
            info: info.clone(),
            call: Some(call),
        };
        self.calls.insert(info.id, held);
        info
    }

    fn next_route(&mut self, op: OpId, started: Instant, step: Step) {
        let Step::Routes {
            source,
            destinations,
            contract,
            tag,
            routes,
        } = step
        else {
            return;
        };
        if let Some(d) = destinations.get(routes.len()) {
            let route = RouteRequest {
                id: self.next_id(op),
                source: source.clone(),
                destination: d.clone(),
                bandwidth: contract.traffic.pcr,
            };
            self.routes.push_back(route);
            let step = Step::Routes {
                source,
                destinations,
                contract,
                tag,
                routes,
            };
            self.ops.insert(op, Op { started, step });
            return;
        }
        let tree = match Tree::path(&destinations[0], &routes[0]) {
            Ok(t) => t,
            Err(e) => return self.reply(op, Err(tree_error(e))),
        };
        let call = Call {
            id: 0,
            source,
            ids: vec![None; tree.slots().len()],
            conns: vec![0; tree.hops().len()],
            tree,
            segments: Vec::new(),
            contract,
            tag,
            setup_us: 0,
            invocations: 0,
        };
        let rest = destinations.into_iter().zip(routes).skip(1).collect();
        let all = (0..call.tree.hops().len()).collect();
        self.segment(op, started, call, all, None, AfterSegment::First(rest));
    }

    /// Sets up `hops` (new tree hops, a chain, upstream first) as one subnetwork
    /// connection entering on `in_id` (`None`: the source's VC, chosen below).
    pub(super) fn segment(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        hops: Vec<usize>,
        in_id: Option<VcId>,
        then: AfterSegment,
    ) {
        let t = &call.tree;
        let req = SetupSnc {
            hops: hops
                .iter()
                .map(|&h| {
                    let hop = t.hop(h);
                    HopSpec {
                        switch: hop.switch.clone(),
                        in_port: hop.in_port,
                        out_port: t.slot(hop.outs[0]).port,
                    }
                })
                .collect(),
            in_id,
            out_id: None,
            traffic: Some(call.contract.traffic),
            buffer_cells: 0,
            tag: call.tag.clone(),
        };
        let work = Work::Segment { hops, then };
        self.invoke(op, started, call, work, SncRequest::Setup(req));
    }

    /// Records a segment the root set up.
    fn segment_answered(
        &mut self,
        call: &mut Call,
        hops: &[usize],
        answer: SncResult,
    ) -> Result<(), SncError> {
        let rep = set_up(answer)?;
        call.invocations += rep.invocations.values().sum::<u64>();
        if rep.hops.len() != hops.len() {
            return Err(SncError::internal(format!(
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

    fn segment_done(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        r: Result<(), SncError>,
        then: AfterSegment,
    ) {
        match then {
            AfterSegment::First(rest) => match r {
                Ok(()) => self.add_next(op, started, call, rest),
                Err(e) => self.add_failed(op, started, call, e),
            },
            AfterSegment::Graft {
                graft,
                branch,
                then,
            } => self.graft_segment_done(op, started, call, graft, branch, r, then),
        }
    }

    /// AddConnection grafts its next leaf, or is done.
    pub(super) fn add_next(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        mut rest: Vec<(String, Vec<HopSpec>)>,
    ) {
        if rest.is_empty() {
            call.id = self.next_call;
            self.next_call += 1;
            call.setup_us = self.now.saturating_duration_since(started).as_nanos() / 1_000;
            let info = self.put(call);
            self.stats.established += 1;
            return self.reply(op, Ok(LncReply::Connection(info)));
        }
        let (leaf, route) = rest.remove(0);
        self.graft(op, started, call, &leaf, &route, AfterGraft::Add(rest));
    }

    /// A refused AddConnection: everything set up is released.
    pub(super) fn add_failed(&mut self, op: OpId, started: Instant, call: Call, e: SncError) {
        if e.kind == super::ErrorKind::ResourceExhausted {
            self.stats.blocked += 1;
        } else {
            self.stats.failed += 1;
        }
        self.stats.rollbacks += 1;
        let all = (0..call.segments.len()).collect();
        self.release_segments(op, started, call, all, AfterRelease::AddRollback(e));
    }

    /// Releases the segments at `which` (indices into `call.segments`), downstream
    /// first; the ones released leave the call, the others stay for a retry.
    pub(super) fn release_segments(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        mut which: Vec<usize>,
        then: AfterRelease,
    ) {
        which.sort_unstable();
        let work = Work::Release {
            todo: which,
            gone: Vec::new(),
            first_err: None,
            then,
        };
        self.release_next(op, started, call, work);
    }

    fn release_next(&mut self, op: OpId, started: Instant, mut call: Call, work: Work) {
        let Work::Release {
            todo,
            gone,
            first_err,
            then,
        } = work
        else {
            return;
        };
        if let Some(&i) = todo.last() {
            let snc = call.segments[i].snc;
            let work = Work::Release {
                todo,
                gone,
                first_err,
                then,
            };
            return self.invoke(op, started, call, work, SncRequest::Release { snc });
        }
        // `gone` is in descending order: removing from the back keeps indices valid.
        for i in gone {
            call.segments.remove(i);
        }
        match then {
            AfterRelease::AddRollback(e) => {
                if let Some(re) = first_err {
                    tracing::error!(error = %re, "LNC: rolling back a refused multipoint setup failed");
                }
                self.reply(op, Err(e));
            }
            AfterRelease::Delete => match first_err {
                Some(e) => {
                    self.put(call);
                    self.reply(op, Err(e));
                }
                None => {
                    self.calls.remove(&call.id);
                    self.stats.released += 1;
                    self.reply(op, Ok(LncReply::Deleted));
                }
            },
            AfterRelease::DropLeaf(d) => self.dropped_segment(op, started, call, d, first_err),
        }
    }

    fn modify_next(&mut self, op: OpId, started: Instant, mut call: Call, work: Work) {
        let Work::Modify { new, next, changed } = work else {
            return;
        };
        if let Some(seg) = call.segments.get(next) {
            let request = SncRequest::Modify {
                snc: seg.snc,
                traffic: Some(new.traffic),
            };
            let work = Work::Modify { new, next, changed };
            return self.invoke(op, started, call, work, request);
        }
        call.contract = new;
        let info = self.put(call);
        self.stats.modified += 1;
        self.reply(op, Ok(LncReply::Connection(info)));
    }

    fn restore_next(&mut self, op: OpId, started: Instant, call: Call, work: Work) {
        let Work::Restore { mut todo, error } = work else {
            return;
        };
        if todo.is_empty() {
            self.put(call);
            return self.reply(op, Err(error));
        }
        let request = SncRequest::Modify {
            snc: todo.remove(0),
            traffic: Some(call.contract.traffic),
        };
        let work = Work::Restore { todo, error };
        self.invoke(op, started, call, work, request);
    }
}

/// What an answer reports its callees invoked, in all.
pub(super) fn sum(reply: &super::SncReply) -> u64 {
    reply.invocations().map_or(0, |m| m.values().sum())
}

/// A tree refusal as the LNC answers it: dropping the last leaf is a precondition
/// failure; the rest as the other managers classify them.
pub(super) fn tree_error(e: TreeError) -> SncError {
    match e {
        TreeError::LastLeaf(_) => {
            SncError::new(super::ErrorKind::FailedPrecondition, e.to_string())
        }
        e => {
            let c = CmCore::tree_error(e);
            SncError::new(SncError::of_fabric(c.kind), c.message)
        }
    }
}
