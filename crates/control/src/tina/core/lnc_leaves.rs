//! The LNC's point-to-multipoint changes (paper 001 §1: connections beyond
//! point-to-point; TINA's NML-CP "create, modify and release" of edges below): grafting
//! a leaf onto a call's tree (AddBranch at the fork, then one subnetwork connection for
//! the rest of its route; refused, the branch is dropped again and the tree is as it
//! was) and pruning one (the segments that carried only it released whole or trimmed,
//! leaf side first, then the branch at the fork dropped).

use atmlab_core::time::Instant;

use super::lnc::{
    AfterGraft, AfterRelease, AfterSegment, Call, LncCore, LncReply, Work, sum, tree_error,
};
use super::{HopSpec, OpId, SncError, SncReply, SncRequest, SncResult, unexpected};
use crate::cm::tree::{Graft, Prune};

/// A DropLeaf between its invocations: segments are visited from the last down.
#[derive(Debug)]
pub(crate) struct Dropping {
    leaf: String,
    prune: Prune,
    /// Segments below this index are still to visit.
    next: usize,
    first_err: Option<SncError>,
}

impl LncCore {
    /// Adds `leaf` along `route` to the call: a new branch where the route leaves the
    /// tree, then the rest of the route as one new segment.
    pub(super) fn graft(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        leaf: &str,
        route: &[HopSpec],
        then: AfterGraft,
    ) {
        let graft = match call.tree.graft(leaf, route) {
            Ok(g) => g,
            Err(e) => return self.graft_done(op, started, call, Err(tree_error(e)), then),
        };
        call.grow();
        if let Some((h, s)) = graft.new_branch {
            let request = call.branch(h, s, false);
            return self.invoke(op, started, call, Work::Branch { graft, then }, request);
        }
        self.graft_segment(op, started, call, graft, None, then);
    }

    fn graft_segment(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        graft: Graft,
        branch: Option<(usize, usize)>,
        then: AfterGraft,
    ) {
        let Some(&first) = graft.new_hops.first() else {
            return self.graft_done(op, started, call, Ok(()), then);
        };
        let in_id = call.ids[call.tree.hop(first).in_slot];
        let hops = graft.new_hops.clone();
        let then = AfterSegment::Graft {
            graft,
            branch,
            then,
        };
        self.segment(op, started, call, hops, in_id, then);
    }

    /// The graft's segment answered: refused, the branch added at the fork is taken
    /// back.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn graft_segment_done(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        graft: Graft,
        branch: Option<(usize, usize)>,
        r: Result<(), SncError>,
        then: AfterGraft,
    ) {
        match (r, branch) {
            (Ok(()), _) => self.graft_done(op, started, call, Ok(()), then),
            (Err(error), Some((h, s))) => {
                let request = call.branch(h, s, true);
                let work = Work::Unbranch { graft, error, then };
                self.invoke(op, started, call, work, request);
            }
            (Err(e), None) => {
                call.tree.ungraft(&graft);
                call.grow();
                self.graft_done(op, started, call, Err(e), then);
            }
        }
    }

    fn graft_done(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        r: Result<(), SncError>,
        then: AfterGraft,
    ) {
        match (then, r) {
            (AfterGraft::Add(rest), Ok(())) => self.add_next(op, started, call, rest),
            (AfterGraft::Add(_), Err(e)) => self.add_failed(op, started, call, e),
            (AfterGraft::AddLeaf, r) => {
                let info = self.put(call);
                self.reply(op, r.map(|()| LncReply::Connection(info)));
            }
        }
    }

    /// An answer to a graft's or a prune's root invocation.
    pub(super) fn leaf_answered(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        work: Work,
        answer: SncResult,
    ) {
        match work {
            Work::Branch { graft, then } => match (answer, graft.new_branch) {
                (Ok(SncReply::BranchAdded { id, invocations }), Some((h, s))) => {
                    call.invocations += invocations.values().sum::<u64>();
                    call.ids[s] = id;
                    self.graft_segment(op, started, call, graft, Some((h, s)), then);
                }
                (answer, _) => {
                    let e = match answer {
                        Err(e) => e,
                        Ok(rep) => unexpected("AddBranch", &rep),
                    };
                    call.tree.ungraft(&graft);
                    call.grow();
                    self.graft_done(op, started, call, Err(e), then);
                }
            },
            Work::Unbranch { graft, error, then } => {
                match answer {
                    Ok(rep) => call.invocations += sum(&rep),
                    Err(de) => {
                        tracing::warn!(call = call.id, error = %de, "LNC: taking back a refused leaf's branch failed");
                    }
                }
                call.tree.ungraft(&graft);
                call.grow();
                self.graft_done(op, started, call, Err(error), then);
            }
            Work::Prune(mut d, Some((i, keep))) => {
                match answer {
                    Ok(rep) => {
                        call.invocations += sum(&rep);
                        call.segments[i].hops.truncate(keep);
                    }
                    Err(e) => d.failed(&call, e),
                }
                self.drop_next(op, started, call, d);
            }
            Work::Prune(mut d, None) => {
                match answer {
                    Ok(rep) => call.invocations += sum(&rep),
                    Err(e) => {
                        d.first_err.get_or_insert(e);
                    }
                }
                let info = self.put(call);
                self.reply(op, d.first_err.map_or(Ok(LncReply::Connection(info)), Err));
            }
            _ => {}
        }
    }

    /// Drops `leaf` of the call: the hops that carried only it are released (whole
    /// segments, or the tail of one: TrimSnc), then its branch at the fork is dropped;
    /// the other leaves keep receiving throughout. A release that fails leaves those
    /// hops with the call (the leaf is gone from the tree); deleting the call releases
    /// them.
    pub(super) fn drop_leaf(&mut self, op: OpId, started: Instant, mut call: Call, leaf: &str) {
        let prune = match call.tree.prune(leaf) {
            Ok(p) => p,
            Err(e) => {
                self.put(call);
                return self.reply(op, Err(tree_error(e)));
            }
        };
        let d = Dropping {
            leaf: leaf.to_string(),
            prune,
            next: call.segments.len(),
            first_err: None,
        };
        self.drop_next(op, started, call, d);
    }

    /// The next segment the prune reaches, downstream segments first; then the branch.
    fn drop_next(&mut self, op: OpId, started: Instant, call: Call, mut d: Dropping) {
        while d.next > 0 {
            d.next -= 1;
            let i = d.next;
            let seg = &call.segments[i];
            let released = &d.prune.released_hops;
            let Some(keep) = seg.hops.iter().position(|h| released.contains(h)) else {
                continue;
            };
            if keep == 0 {
                let then = AfterRelease::DropLeaf(d);
                return self.release_segments(op, started, call, vec![i], then);
            }
            let request = SncRequest::Trim {
                snc: seg.snc,
                keep: u32::try_from(keep).unwrap_or(u32::MAX),
            };
            let work = Work::Prune(d, Some((i, keep)));
            return self.invoke(op, started, call, work, request);
        }
        if let Some((h, s)) = d.prune.dropped_branch {
            let request = call.branch(h, s, true);
            return self.invoke(op, started, call, Work::Prune(d, None), request);
        }
        let info = self.put(call);
        self.reply(op, d.first_err.map_or(Ok(LncReply::Connection(info)), Err));
    }

    /// A whole segment of the prune released (or not).
    pub(super) fn dropped_segment(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        mut d: Dropping,
        err: Option<SncError>,
    ) {
        if let Some(e) = err {
            d.failed(&call, e);
        }
        self.drop_next(op, started, call, d);
    }
}

impl Dropping {
    fn failed(&mut self, call: &Call, e: SncError) {
        tracing::warn!(call = call.id, leaf = %self.leaf, error = %e, "LNC: releasing a dropped leaf's hops failed; they stay with the call");
        self.first_err.get_or_insert(e);
    }
}
