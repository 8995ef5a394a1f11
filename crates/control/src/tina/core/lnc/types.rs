//! What the LNC answers (paper 001 §1.2.1: the connection a client asked for, its
//! contract, its hops and identifiers) and what it keeps of a call between
//! invocations: the call's tree, identifiers, switch connections and segments, and
//! where each operation stands.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::Instant;

use super::super::{
    BranchAt, BranchInfo, ErrorKind, HopInfo, HopSpec, InvocationId, SncError, SncReply,
    SncRequest, Traffic,
};
use crate::cm::core::CmCore;
use crate::cm::tree::{Graft, Prune, Tree, TreeError};

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
    Connection(Box<CallInfo>),
    /// Released (Delete).
    Deleted,
}

/// A route the LNC needs: from `source` to `destination` with `bandwidth` (cells/s)
/// free on every output port. Answered with [`LncCore::handle_route`](super::LncCore::handle_route).
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

/// Where an operation stands.
#[derive(Debug)]
pub(super) enum Step {
    /// AddConnection's routes, one at a time.
    Routes(AddRoutes),
    /// AddLeaf's route.
    LeafRoute(Call, String),
    /// A root invocation for the call, and what its answer continues.
    Root(Call, Work),
}

/// An operation in progress: when it started, and where it stands.
#[derive(Debug)]
pub(super) struct Op {
    pub(super) started: Instant,
    pub(super) step: Step,
}

/// What an answer reports its callees invoked, in all.
pub(super) fn sum(reply: &SncReply) -> u64 {
    reply.invocations().map_or(0, |m| m.values().sum())
}

/// A tree refusal as the LNC answers it: dropping the last leaf is a precondition
/// failure; the rest as the other managers classify them.
pub(super) fn tree_error(e: TreeError) -> SncError {
    match e {
        TreeError::LastLeaf(_) => SncError::new(ErrorKind::FailedPrecondition, e.to_string()),
        e => {
            let c = CmCore::tree_error(e);
            SncError::new(SncError::of_fabric(c.kind), c.message)
        }
    }
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

/// One call as the LNC keeps it: its tree (shared with the other managers), the
/// identifier of every slot, the switch connection of every hop, and the segments that
/// hold them in the hierarchy.
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
    pub(super) setup_us: u64,
    /// Remote invocations made for the call so far, the LNC's own included.
    pub(super) invocations: u64,
}

impl Call {
    /// The call as its answers describe it: one entry per switch connection, every
    /// branch where the tree forks; destinations in the order they joined.
    pub(super) fn info(&self) -> CallInfo {
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
                    switch: hop.switch.to_string(),
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

    /// Hop `h`'s branch `s` as AddBranch (`drop` false) or DropBranch names it.
    pub(super) fn branch(&self, h: usize, s: usize, drop: bool) -> SncRequest {
        let at = BranchAt {
            switch: self.tree.hop(h).switch.to_string(),
            connection: self.conns[h],
            port: PortId(self.tree.slot(s).port),
        };
        match drop {
            false => SncRequest::AddBranch(at),
            true => SncRequest::DropBranch(at, self.ids[s]),
        }
    }
}

/// A call in the table: its last answer, and the call itself unless a change (AddLeaf,
/// DropLeaf, Modify, Delete) has it out.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) info: CallInfo,
    pub(super) call: Option<Call>,
}

/// AddConnection before its tree: the routes found so far.
#[derive(Debug)]
pub(super) struct AddRoutes {
    pub(super) source: String,
    pub(super) destinations: Vec<String>,
    pub(super) contract: Contract,
    pub(super) tag: String,
    pub(super) routes: Vec<Vec<HopSpec>>,
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
pub(super) enum Then {
    /// A refused AddConnection, refused with this.
    AddRollback(SncError),
    /// DeleteConnection.
    Delete,
    /// DropLeaf goes on.
    DropLeaf(Dropping),
}

/// A release of segments `todo` (the last first), one at a time.
#[derive(Debug)]
pub(super) struct Releasing {
    pub(super) todo: Vec<usize>,
    /// Released, in descending order.
    pub(super) gone: Vec<usize>,
    pub(super) first_err: Option<SncError>,
    pub(super) then: Then,
}

/// A ModifyConnection: segment `next` is being changed to `new`, after `changed`.
#[derive(Debug)]
pub(super) struct Modifying {
    pub(super) new: Contract,
    pub(super) next: usize,
    pub(super) changed: Vec<u64>,
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
    Branch(Graft, AfterGraft),
    /// DropBranch taking back a graft's branch, refused with the error.
    Unbranch(Graft, SncError, AfterGraft),
    Release(Releasing),
    /// DropLeaf's TrimSnc of segment `i` to `keep` hops, or (`None`) its DropBranch.
    Prune(Dropping, Option<(usize, usize)>),
    Modify(Modifying),
    /// The change back of these segments after `error`.
    Restore {
        todo: Vec<u64>,
        error: SncError,
    },
}

/// A DropLeaf between its invocations: segments are visited from the last down.
#[derive(Debug)]
pub(super) struct Dropping {
    pub(super) leaf: String,
    pub(super) prune: Prune,
    /// Segments below this index are still to visit.
    pub(super) next: usize,
    pub(super) first_err: Option<SncError>,
}
