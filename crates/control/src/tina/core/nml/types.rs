//! What the NML-CP emits (paper 001 §1.2.1: an invocation of one of its children) and
//! what it keeps between invocations: its subnetwork connections, and where each
//! operation stands (a batch waiting for its answers; a sequential or parallel setup,
//! §4.3; a release, modification or trim sweeping its parts).

use std::ops::Range;

use atmlab_core::ids::{PortId, VcId};

use super::super::{Counts, SetupSnc, SncError, SncRequest, SncResult, SncSetUp, Traffic};

/// An invocation of child `child` (an index in the order of
/// [`Subnetwork::child_of`](crate::tina::partition::Subnetwork::child_of)).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildCall {
    /// Which child.
    pub child: usize,
    /// The operation.
    pub request: SncRequest,
}

/// A child's part of an SNC: (child, the child's SNC id).
pub(super) type Part = (usize, u64);

/// A link identifier reserved for a parallel setup: (child, switch, port, identifier).
pub(super) type HeldLink = (
    usize,
    String,
    atmlab_core::ids::PortId,
    atmlab_core::ids::VcId,
);

/// What the NML-CP holds for one subnetwork connection: the children's SNCs, in route
/// order.
#[derive(Debug, Clone)]
pub(super) struct NmlSnc {
    pub(super) parts: Vec<Part>,
    /// Hops in each part (TrimSnc finds the part a cut falls in).
    pub(super) lens: Vec<u32>,
    pub(super) traffic: Traffic,
}

/// Parts visited with one operation each (ReleaseSnc, or ModifySnc to one contract):
/// sequentially one after another, in parallel all at once.
#[derive(Debug)]
pub(super) struct Sweep {
    pub(super) parts: Vec<Part>,
    pub(super) next: usize,
    pub(super) in_flight: Vec<Part>,
    /// The parts that answered, and those refused (or whose child is not connected).
    pub(super) done: Vec<Part>,
    pub(super) failed: Vec<Part>,
    pub(super) first_err: Option<SncError>,
}

/// What a sweep does to each part, and what follows it.
#[derive(Debug)]
pub(super) enum Then {
    /// A refused setup's rollback (a release): then give back `links`, then refuse with
    /// `error`.
    Rollback {
        error: SncError,
        links: Vec<HeldLink>,
    },
    /// ReleaseSnc of `snc`: what could not be released stays recorded.
    Release { snc: u64, record: NmlSnc },
    /// TrimSnc: the tail is released; the part the cut falls in is trimmed next.
    Trim(Trimming),
    /// ModifySnc of `snc` to `new`; refused, the changed parts go back to `old`.
    Change {
        snc: u64,
        new: Traffic,
        old: Traffic,
    },
    /// The change back to `to` after `error`.
    Restore { to: Traffic, error: SncError },
}

impl Then {
    /// A change skips children not connected and, sequentially, stops at the first
    /// refusal; a release counts them as failed and goes on.
    pub(super) fn modifies(&self) -> bool {
        matches!(self, Then::Change { .. } | Then::Restore { .. })
    }

    pub(super) fn request(&self, snc: u64) -> SncRequest {
        match self {
            Then::Change { new: t, .. } | Then::Restore { to: t, .. } => SncRequest::Modify {
                snc,
                traffic: Some(*t),
            },
            _ => SncRequest::Release { snc },
        }
    }
}

/// A TrimSnc past the release of its tail.
#[derive(Debug)]
pub(super) struct Trimming {
    pub(super) snc: u64,
    pub(super) record: NmlSnc,
    /// Parts kept whole: `record.parts[..cut]`.
    pub(super) cut: usize,
    /// The part the cut falls inside, and the hops it keeps.
    pub(super) inner: Option<(usize, u32)>,
    pub(super) held: Vec<Part>,
    pub(super) err: Option<SncError>,
}

/// Where an operation stands: the batch it waits for.
#[derive(Debug)]
pub(super) enum Step {
    /// One child operation whose answer is this one's.
    Forward,
    Sequential(Sequential),
    ReserveLinks(Parallel),
    SetupRuns(Parallel),
    Sweep(Sweep, Then),
    /// Giving back link identifiers one at a time, then the refusal.
    GiveBackLinks(Vec<HeldLink>, SncError),
    TrimInner(Trimming),
}

#[derive(Debug)]
pub(super) struct Op {
    pub(super) step: Step,
    pub(super) tally: Counts,
    pub(super) answers: Vec<Option<SncResult>>,
    pub(super) outstanding: usize,
}

/// A run of the route inside one child: (child, hop range).
pub(super) type Run = (usize, Range<usize>);

/// A sequential setup: `done.len()` runs set up, the next one in flight.
#[derive(Debug)]
pub(super) struct Sequential {
    pub(super) req: SetupSnc,
    pub(super) traffic: Traffic,
    pub(super) runs: Vec<Run>,
    /// The identifier into the next run (the last run's output).
    pub(super) in_id: Option<VcId>,
    pub(super) done: Vec<(usize, SncSetUp)>,
}

/// A parallel setup: the link identifiers, then every run.
#[derive(Debug)]
pub(super) struct Parallel {
    pub(super) req: SetupSnc,
    pub(super) traffic: Traffic,
    pub(super) runs: Vec<Run>,
    /// Per link between runs `k` and `k + 1`: the child holding its output port, the
    /// switch, the port.
    pub(super) links: Vec<(usize, String, PortId)>,
    pub(super) ids: Vec<Option<VcId>>,
}

impl Parallel {
    /// The links whose identifier is known, for `which` of them.
    pub(super) fn held(&self, which: impl Iterator<Item = usize>) -> Vec<HeldLink> {
        which
            .filter_map(|k| {
                let (c, switch, port) = self.links.get(k)?;
                Some((*c, switch.clone(), *port, self.ids[k]?))
            })
            .collect()
    }
}
