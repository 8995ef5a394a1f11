//! The calls of the LNC's state machine (paper 001 §1.2.1: the LNC hands a connection
//! to the root NML-CP as subnetwork connections and releases and modifies them there):
//! what the LNC keeps of a call (its tree, identifiers, switch connections and
//! segments), AddConnection (a route per leaf, the first leaf's route as one segment,
//! the others grafted), DeleteConnection (every segment released, downstream first,
//! what failed kept for a retry) and ModifyConnection (every segment changed in turn,
//! refused: the changed ones back to the old contract).

use atmlab_core::ids::VcId;
use atmlab_core::time::Instant;

use super::super::{ErrorKind, HopSpec, OpId, SetupSnc, SncError, SncRequest, SncResult, set_up};
use super::LncCore;
use super::types::{
    AddRoutes, AfterGraft, AfterSegment, Call, LncReply, Modifying, Releasing, Segment, Step, Then,
    Work, sum, tree_error,
};
use crate::cm::tree::Tree;

impl LncCore {
    /// A root answer for an operation waiting at `work`.
    pub(super) fn answered(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        work: Work,
        answer: SncResult,
    ) {
        match work {
            Work::Segment { hops, then } => {
                let r = segment_answered(&mut call, &hops, answer);
                self.segment_done(op, started, call, r, then);
            }
            Work::Release(mut rel) => {
                match answer {
                    Ok(rep) => {
                        call.invocations += sum(&rep);
                        rel.gone.extend(rel.todo.pop());
                    }
                    Err(e) => {
                        rel.todo.pop();
                        rel.first_err.get_or_insert(e);
                    }
                }
                self.release_next(op, started, call, rel);
            }
            Work::Modify(mut m) => match answer {
                Ok(rep) => {
                    call.invocations += sum(&rep);
                    m.changed.push(call.segments[m.next].snc);
                    m.next += 1;
                    self.modify_next(op, started, call, m);
                }
                // Change back the segments already changed: going back is a decrease
                // where the new contract was an increase, so it is not refused.
                Err(error) => self.restore_next(op, started, call, m.changed, error),
            },
            Work::Restore { todo, error } => {
                if let Err(be) = answer {
                    tracing::error!(call = call.id, error = %be, "LNC: restoring the old contract failed");
                }
                self.restore_next(op, started, call, todo, error);
            }
            Work::Branch(g, then) => self.branch_answered(op, started, call, (g, then), answer),
            Work::Unbranch(g, e, then) => {
                self.unbranch_answered(op, started, call, (g, e, then), answer)
            }
            Work::Prune(d, trim) => self.prune_answered((op, started), call, d, trim, answer),
        }
    }

    /// AddConnection's next route, or, with every route found, its first segment.
    pub(super) fn next_route(&mut self, op: OpId, started: Instant, add: AddRoutes) {
        if let Some(d) = add.destinations.get(add.routes.len()) {
            let ends = (add.source.clone(), d.clone());
            let bandwidth = add.contract.traffic.pcr;
            return self.ask_route(op, started, Step::Routes(add), ends, bandwidth);
        }
        let tree = match Tree::path(&add.destinations[0], &add.routes[0]) {
            Ok(t) => t,
            Err(e) => return self.reply(op, Err(tree_error(e))),
        };
        let call = Call {
            id: 0,
            source: add.source,
            ids: vec![None; tree.slots().len()],
            conns: vec![0; tree.hops().len()],
            tree,
            segments: Vec::new(),
            contract: add.contract,
            tag: add.tag,
            setup_us: 0,
            invocations: 0,
        };
        let rest = add
            .destinations
            .into_iter()
            .zip(add.routes)
            .skip(1)
            .collect();
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

    fn segment_done(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        r: Result<(), SncError>,
        then: AfterSegment,
    ) {
        match (then, r) {
            (AfterSegment::First(rest), Ok(())) => self.add_next(op, started, call, rest),
            (AfterSegment::First(_), Err(e)) => self.add_failed(op, started, call, e),
            (
                AfterSegment::Graft {
                    graft,
                    branch,
                    then,
                },
                r,
            ) => self.graft_segment_done(op, started, call, (graft, branch), r, then),
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
            return self.reply(op, Ok(LncReply::Connection(Box::new(info))));
        }
        let (leaf, route) = rest.remove(0);
        self.graft(op, started, call, &leaf, &route, AfterGraft::Add(rest));
    }

    /// A refused AddConnection: everything set up is released.
    pub(super) fn add_failed(&mut self, op: OpId, started: Instant, call: Call, e: SncError) {
        if e.kind == ErrorKind::ResourceExhausted {
            self.stats.blocked += 1;
        } else {
            self.stats.failed += 1;
        }
        self.stats.rollbacks += 1;
        let all = (0..call.segments.len()).collect();
        self.release_segments(op, started, call, all, Then::AddRollback(e));
    }

    /// Releases the segments at `which` (indices into `call.segments`), downstream
    /// first; the ones released leave the call, the others stay for a retry.
    pub(super) fn release_segments(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        mut which: Vec<usize>,
        then: Then,
    ) {
        which.sort_unstable();
        let rel = Releasing {
            todo: which,
            gone: Vec::new(),
            first_err: None,
            then,
        };
        self.release_next(op, started, call, rel);
    }

    fn release_next(&mut self, op: OpId, started: Instant, mut call: Call, rel: Releasing) {
        if let Some(&i) = rel.todo.last() {
            let request = SncRequest::Release {
                snc: call.segments[i].snc,
            };
            return self.invoke(op, started, call, Work::Release(rel), request);
        }
        // `gone` is in descending order: removing from the back keeps indices valid.
        for &i in &rel.gone {
            call.segments.remove(i);
        }
        match (rel.then, rel.first_err) {
            (Then::AddRollback(e), re) => {
                if let Some(re) = re {
                    tracing::error!(error = %re, "LNC: rolling back a refused multipoint setup failed");
                }
                self.reply(op, Err(e));
            }
            (Then::Delete, Some(e)) => {
                self.put(call);
                self.reply(op, Err(e));
            }
            (Then::Delete, None) => {
                self.calls.remove(&call.id);
                self.stats.released += 1;
                self.reply(op, Ok(LncReply::Deleted));
            }
            (Then::DropLeaf(d), err) => self.dropped_segment(op, started, call, d, err),
        }
    }

    /// ModifyConnection's next segment, or, every one changed, the new contract kept.
    pub(super) fn modify_next(&mut self, op: OpId, started: Instant, mut call: Call, m: Modifying) {
        if let Some(seg) = call.segments.get(m.next) {
            let request = SncRequest::Modify {
                snc: seg.snc,
                traffic: Some(m.new.traffic),
            };
            return self.invoke(op, started, call, Work::Modify(m), request);
        }
        call.contract = m.new;
        let info = self.put(call);
        self.stats.modified += 1;
        self.reply(op, Ok(LncReply::Connection(Box::new(info))));
    }

    fn restore_next(
        &mut self,
        op: OpId,
        started: Instant,
        call: Call,
        mut todo: Vec<u64>,
        error: SncError,
    ) {
        if todo.is_empty() {
            self.put(call);
            return self.reply(op, Err(error));
        }
        let request = SncRequest::Modify {
            snc: todo.remove(0),
            traffic: Some(call.contract.traffic),
        };
        self.invoke(op, started, call, Work::Restore { todo, error }, request);
    }
}

/// Records a segment the root set up.
fn segment_answered(call: &mut Call, hops: &[usize], answer: SncResult) -> Result<(), SncError> {
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
