//! The LNC's point-to-multipoint changes (paper 001 §1: connections beyond
//! point-to-point; TINA's NML-CP "create, modify and release" of edges below): grafting
//! a leaf onto a call's tree (AddBranch at the fork, then one subnetwork connection for
//! the rest of its route; refused, the branch is dropped again and the tree is as it
//! was) and pruning one (the segments that carried only it released whole or trimmed,
//! leaf side first, then the branch at the fork dropped).

use atmlab_core::time::Instant;

use super::super::{HopSpec, OpId, SncError, SncReply, SncRequest, SncResult, unexpected};
use super::LncCore;
use super::types::{
    AfterGraft, AfterSegment, Call, Dropping, LncReply, Then, Work, sum, tree_error,
};
use crate::cm::tree::Graft;

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
            return self.invoke(op, started, call, Work::Branch(graft, then), request);
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
    pub(super) fn graft_segment_done(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        (graft, branch): (Graft, Option<(usize, usize)>),
        r: Result<(), SncError>,
        then: AfterGraft,
    ) {
        match (r, branch) {
            (Ok(()), _) => self.graft_done(op, started, call, Ok(()), then),
            (Err(error), Some((h, s))) => {
                let request = call.branch(h, s, true);
                let work = Work::Unbranch(graft, error, then);
                self.invoke(op, started, call, work, request);
            }
            (Err(e), None) => self.graft_failed(op, started, call, graft, e, then),
        }
    }

    /// The graft's outcome, for the operation that grafted.
    fn graft_done(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        r: Result<(), SncError>,
        then: AfterGraft,
    ) {
        let AfterGraft::Add(rest) = then else {
            // AddLeaf: the call goes back, with the leaf or as it was.
            let info = self.put(call);
            return self.reply(op, r.map(|()| LncReply::Connection(Box::new(info))));
        };
        match r {
            Ok(()) => self.add_next(op, started, call, rest),
            Err(e) => self.add_failed(op, started, call, e),
        }
    }

    /// The answer to a graft's AddBranch: the branch's identifier, then the segment.
    pub(super) fn branch_answered(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        (graft, then): (Graft, AfterGraft),
        answer: SncResult,
    ) {
        match (answer, graft.new_branch) {
            (Ok(SncReply::BranchAdded { id, invocations }), Some((h, s))) => {
                call.invocations += invocations.values().sum::<u64>();
                call.ids[s] = id;
                self.graft_segment(op, started, call, graft, Some((h, s)), then);
            }
            (Ok(rep), _) => {
                let e = unexpected("AddBranch", &rep);
                self.graft_failed(op, started, call, graft, e, then);
            }
            (Err(e), _) => self.graft_failed(op, started, call, graft, e, then),
        }
    }

    /// The answer to the DropBranch taking back a refused graft's branch.
    pub(super) fn unbranch_answered(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        (graft, error, then): (Graft, SncError, AfterGraft),
        answer: SncResult,
    ) {
        match answer {
            Ok(rep) => call.invocations += sum(&rep),
            Err(de) => {
                tracing::warn!(call = call.id, error = %de, "LNC: taking back a refused leaf's branch failed");
            }
        }
        self.graft_failed(op, started, call, graft, error, then);
    }

    /// A refused graft: the tree is as it was.
    fn graft_failed(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        graft: Graft,
        e: SncError,
        then: AfterGraft,
    ) {
        call.tree.ungraft(&graft);
        call.grow();
        self.graft_done(op, started, call, Err(e), then);
    }

    /// The answer to a prune's TrimSnc of segment `i` to `keep` hops (`trim`), or to
    /// its DropBranch (`None`).
    pub(super) fn prune_answered(
        &mut self,
        (op, started): (OpId, Instant),
        mut call: Call,
        mut d: Dropping,
        trim: Option<(usize, usize)>,
        answer: SncResult,
    ) {
        match (trim, answer) {
            (Some((i, keep)), Ok(rep)) => {
                call.invocations += sum(&rep);
                call.segments[i].hops.truncate(keep);
            }
            (Some(_), Err(e)) => d.failed(&call, e),
            (None, Ok(rep)) => call.invocations += sum(&rep),
            (None, Err(e)) => {
                d.first_err.get_or_insert(e);
            }
        }
        if trim.is_some() {
            return self.drop_next(op, started, call, d);
        }
        self.pruned(op, call, d);
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
                let then = Then::DropLeaf(d);
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
        self.pruned(op, call, d);
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

impl LncCore {
    /// DropLeaf's end: the call goes back, and the answer is its first failure, if any.
    fn pruned(&mut self, op: OpId, call: Call, d: Dropping) {
        let info = self.put(call);
        let r = d
            .first_err
            .map_or(Ok(LncReply::Connection(Box::new(info))), Err);
        self.reply(op, r);
    }
}

impl Dropping {
    fn failed(&mut self, call: &Call, e: SncError) {
        tracing::warn!(call = call.id, leaf = %self.leaf, error = %e, "LNC: releasing a dropped leaf's hops failed; they stay with the call");
        self.first_err.get_or_insert(e);
    }
}
