//! The NML-CP's state machine (paper 001 §1.2.1: a Network Management Layer Connection
//! Performer "attempts to satisfy requests to create, modify and release connections
//! within its own subnetwork" and passes them on to the performers of its partitions;
//! §4.3: sequential against parallel sub-connection setup). It splits each request over
//! its children (child subnetworks, or at the lowest level one EML-CP per switch) and
//! emits their invocations as [`ChildCall`]s: one at a time in [`SetupMode::Sequential`],
//! a whole batch at once in [`SetupMode::Parallel`].
//!
//! This file holds the machine, the batch mechanics (an operation waits until every
//! invocation of its batch is answered), the forwarded operations, and release, modify
//! and trim; setup is in `setup`; the
//! types of what it keeps are in `types`.
//!
//! Nothing is forgotten on a failure: a refused setup releases what its children set up
//! and gives back the link identifiers it reserved; a release that fails part-way keeps
//! the parts not released under the same SNC, so a retry releases only those; a refused
//! modification changes back the parts already changed.

mod setup;
mod types;

use std::collections::HashMap;

pub use types::ChildCall;
use types::{HeldLink, NmlSnc, Op, Part, Step, Sweep, Then, Trimming};

use super::super::partition::Subnetwork;
use super::super::{Counts, SetupMode};
use super::{
    AdoptSnc, InvocationId, OpId, Outbox, SncCore, SncError, SncReply, SncRequest, SncResult,
    Transmit, absorb, count, keeps_a_hop,
};

/// The NML-CP of one subnetwork.
#[derive(Debug)]
pub struct NmlCore {
    subnetwork: Subnetwork,
    /// The interface each connected child's invocations count under.
    ifaces: Vec<&'static str>,
    mode: SetupMode,
    sncs: HashMap<u64, NmlSnc>,
    next_snc: u64,
    ops: HashMap<OpId, Op>,
    /// Each invocation's operation and its place in the operation's batch.
    out: Outbox<ChildCall, SncReply, (OpId, usize)>,
}

impl NmlCore {
    /// The NML-CP of `subnetwork`, its children in the order of
    /// [`Subnetwork::child_of`], each counted under its interface in `ifaces`
    /// ("nml->nml" or "nml->eml"; a child without one is not connected).
    pub fn new(subnetwork: Subnetwork, ifaces: Vec<&'static str>, mode: SetupMode) -> Self {
        NmlCore {
            subnetwork,
            ifaces,
            mode,
            sncs: HashMap::new(),
            next_snc: 1,
            ops: HashMap::new(),
            out: Outbox::new(),
        }
    }

    /// Its subnetwork.
    pub fn subnetwork(&self) -> &Subnetwork {
        &self.subnetwork
    }

    /// Every child invocation emitted so far, by interface.
    pub fn invocations(&self) -> &Counts {
        &self.out.totals
    }

    /// Subnetwork connections held.
    pub fn sncs(&self) -> usize {
        self.sncs.len()
    }

    /// Takes back an SNC the switches hold (a restarted hierarchy's start-up audit): the
    /// route split into the runs inside each child as a setup splits it, each run taken
    /// back by `child` (index, the run), which answers the child's SNC id; recorded as if
    /// this NML-CP had set it up; returns its id.
    pub fn adopt(
        &mut self,
        s: &AdoptSnc,
        child: &mut dyn FnMut(usize, AdoptSnc) -> Result<u64, SncError>,
    ) -> Result<u64, SncError> {
        if s.hops.is_empty() {
            return Err(SncError::invalid("a subnetwork connection of no hops"));
        }
        let route: Vec<&str> = s.hops.iter().map(|h| h.switch.as_str()).collect();
        let runs = self.subnetwork.runs(&route).map_err(SncError::invalid)?;
        let mut parts = Vec::with_capacity(runs.len());
        let mut lens = Vec::with_capacity(runs.len());
        for (c, range) in runs {
            self.iface(c)?;
            let run = AdoptSnc {
                holds_source: s.holds_source && range.start == 0,
                hops: s.hops[range.clone()].to_vec(),
                traffic: s.traffic,
            };
            parts.push((c, child(c, run)?));
            lens.push(u32::try_from(range.len()).unwrap_or(u32::MAX));
        }
        let snc = self.next_snc;
        self.next_snc += 1;
        self.sncs.insert(
            snc,
            NmlSnc {
                parts,
                lens,
                traffic: s.traffic,
            },
        );
        Ok(snc)
    }

    fn reply(&mut self, op: OpId, r: SncResult) {
        self.out.reply(op, r);
    }

    /// The interface of child `i`, if it is connected.
    fn iface(&self, i: usize) -> Result<&'static str, SncError> {
        self.ifaces.get(i).copied().ok_or_else(|| {
            SncError::internal(format!(
                "{}: child {i} is not connected",
                self.subnetwork.name
            ))
        })
    }

    fn child_of(&self, switch: &str) -> Result<usize, SncError> {
        let i = self.subnetwork.child_of(switch).ok_or_else(|| {
            SncError::invalid(format!(
                "switch {switch:?} is not in subnetwork {}",
                self.subnetwork.name
            ))
        })?;
        self.iface(i)?;
        Ok(i)
    }

    fn no_snc(&self, snc: u64) -> SncError {
        SncError::not_found(format!("{}: no SNC {snc}", self.subnetwork.name))
    }

    /// Emits `calls` (children known connected) for `op`, which then waits at `step`
    /// until every one is answered.
    fn park(&mut self, op: OpId, step: Step, mut tally: Counts, calls: Vec<(usize, SncRequest)>) {
        if calls.is_empty() {
            return self.advance(op, step, tally, Vec::new());
        }
        let n = calls.len();
        for (slot, (child, request)) in calls.into_iter().enumerate() {
            let iface = self.ifaces[child];
            count(&mut tally, iface);
            self.out
                .emit(iface, ChildCall { child, request }, (op, slot));
        }
        let answers = vec![None; n];
        let o = Op {
            step,
            tally,
            answers,
            outstanding: n,
        };
        self.ops.insert(op, o);
    }

    fn start(&mut self, op: OpId, request: SncRequest) -> Result<(), SncError> {
        let t = Counts::new();
        match request {
            SncRequest::Setup(req) => self.setup(op, req)?,
            SncRequest::Release { snc } => {
                let record = self.sncs.remove(&snc).ok_or_else(|| self.no_snc(snc))?;
                let parts = record.parts.clone();
                self.sweep(op, t, parts, Then::Release { snc, record });
            }
            SncRequest::Modify { snc, traffic } => {
                let new = traffic.ok_or_else(|| SncError::invalid("no traffic descriptor"))?;
                let record = self.sncs.get(&snc).ok_or_else(|| self.no_snc(snc))?;
                let (parts, old) = (record.parts.clone(), record.traffic);
                self.sweep(op, t, parts, Then::Change { snc, new, old });
            }
            SncRequest::ReserveLink(_)
            | SncRequest::UnreserveLink(..)
            | SncRequest::AddBranch(_)
            | SncRequest::DropBranch(..) => {
                let child = self.child_of(request.switch().unwrap_or_default())?;
                self.park(op, Step::Forward, t, vec![(child, request)]);
            }
            SncRequest::Trim { snc, keep } => {
                keeps_a_hop(keep)?;
                let record = self.sncs.get(&snc).ok_or_else(|| self.no_snc(snc))?.clone();
                self.trim(op, t, snc, record, keep);
            }
        }
        Ok(())
    }

    /// Takes `op` past the batch just answered.
    fn advance(&mut self, op: OpId, step: Step, mut t: Counts, answers: Vec<SncResult>) {
        match step {
            Step::Forward => {
                let r = answers
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Err(SncError::internal("a forwarded operation unanswered")));
                let r = r.map(|rep| {
                    absorb(&mut t, &rep);
                    rep.with_invocations(t)
                });
                self.reply(op, r);
            }
            Step::Sequential(s) => self.sequential_answered(op, t, s, answers),
            Step::ReserveLinks(p) => self.links_answered(op, t, p, answers),
            Step::SetupRuns(p) => self.runs_answered(op, t, p, answers),
            Step::Sweep(mut sw, then) => {
                for (part, a) in std::mem::take(&mut sw.in_flight).into_iter().zip(answers) {
                    match a {
                        Ok(rep) => {
                            absorb(&mut t, &rep);
                            sw.done.push(part);
                        }
                        Err(e) => {
                            sw.failed.push(part);
                            sw.first_err.get_or_insert(e);
                        }
                    }
                }
                self.sweep_more(op, t, sw, then);
            }
            Step::GiveBackLinks(links, error) => {
                for a in answers {
                    if let Err(e) = a {
                        tracing::warn!(subnetwork = %self.subnetwork.name, error = %e, "NML-CP: giving back a link identifier failed");
                    }
                }
                self.give_back_links(op, t, links, error);
            }
            Step::TrimInner(mut tr) => {
                let mut trim_err = None;
                match answers.into_iter().next() {
                    Some(Ok(rep)) => absorb(&mut t, &rep),
                    Some(Err(e)) => trim_err = Some(e),
                    None => trim_err = Some(SncError::internal("TrimSnc unanswered")),
                }
                if trim_err.is_some() {
                    tr.inner = None;
                }
                self.trimmed(op, t, tr, trim_err);
            }
        }
    }

    /// Visits `parts` as `then` says, then goes on with it.
    fn sweep(&mut self, op: OpId, t: Counts, parts: Vec<Part>, then: Then) {
        let sw = Sweep {
            parts,
            next: 0,
            in_flight: Vec::new(),
            done: Vec::new(),
            failed: Vec::new(),
            first_err: None,
        };
        self.sweep_more(op, t, sw, then);
    }

    fn sweep_more(&mut self, op: OpId, t: Counts, mut sw: Sweep, then: Then) {
        let sequential = self.mode == SetupMode::Sequential;
        let stopped = sequential && then.modifies() && sw.first_err.is_some();
        while !stopped && sw.next < sw.parts.len() {
            let part = sw.parts[sw.next];
            sw.next += 1;
            match self.iface(part.0) {
                Ok(_) => sw.in_flight.push(part),
                Err(_) if then.modifies() => continue,
                Err(e) => {
                    sw.failed.push(part);
                    sw.first_err.get_or_insert(e);
                    continue;
                }
            }
            if sequential {
                break;
            }
        }
        if sw.in_flight.is_empty() {
            return self.swept(op, t, sw, then);
        }
        let calls = sw
            .in_flight
            .iter()
            .map(|&(c, snc)| (c, then.request(snc)))
            .collect();
        self.park(op, Step::Sweep(sw, then), t, calls);
    }

    fn swept(&mut self, op: OpId, t: Counts, mut sw: Sweep, then: Then) {
        // Route order, whatever order the failures came in.
        let parts = &sw.parts;
        sw.failed.sort_by_key(|p| parts.iter().position(|q| q == p));
        match (then, sw.first_err) {
            (Then::Rollback { error, links }, re) => {
                if let Some(re) = re {
                    tracing::warn!(subnetwork = %self.subnetwork.name, error = %re, "NML-CP: rollback incomplete");
                }
                self.give_back_links(op, t, links, error);
            }
            (Then::Release { snc, record }, Some(e)) => {
                // What could not be released stays recorded under the same id, so a
                // retry of the release finds it (and releases only that).
                let lens = sw
                    .failed
                    .iter()
                    .map(|p| {
                        let at = record.parts.iter().position(|q| q == p);
                        at.map_or(0, |i| record.lens[i])
                    })
                    .collect();
                let kept = NmlSnc {
                    parts: sw.failed,
                    lens,
                    traffic: record.traffic,
                };
                self.sncs.insert(snc, kept);
                self.reply(op, Err(e));
            }
            (Then::Release { .. }, None) => {
                self.reply(op, Ok(SncReply::Released { invocations: t }));
            }
            (Then::Trim(mut tr), err) => {
                tr.held = sw.failed;
                tr.err = err;
                self.trim_inner(op, t, tr);
            }
            // Change back what was changed: the connection keeps its old contract.
            (Then::Change { old, .. }, Some(error)) => {
                self.sweep(op, t, sw.done, Then::Restore { to: old, error });
            }
            (Then::Change { snc, new, .. }, None) => {
                if let Some(s) = self.sncs.get_mut(&snc) {
                    s.traffic = new;
                }
                self.reply(op, Ok(SncReply::Modified { invocations: t }));
            }
            (Then::Restore { error, .. }, back) => {
                if let Some(be) = back {
                    tracing::error!(subnetwork = %self.subnetwork.name, error = %be, "NML-CP: restoring the old contract failed");
                }
                self.reply(op, Err(error));
            }
        }
    }

    /// Gives back `links` one at a time (a failure can only be logged), then refuses
    /// with `error`.
    fn give_back_links(&mut self, op: OpId, t: Counts, mut links: Vec<HeldLink>, error: SncError) {
        while !links.is_empty() {
            let (c, switch, port, id) = links.remove(0);
            if self.iface(c).is_err() {
                continue;
            }
            let request = SncRequest::UnreserveLink(super::LinkEnd { switch, port }, Some(id));
            self.park(op, Step::GiveBackLinks(links, error), t, vec![(c, request)]);
            return;
        }
        self.reply(op, Err(error));
    }

    /// TrimSnc: the part the cut falls in is trimmed (if the cut is inside it); every
    /// part after it is released whole, downstream first.
    fn trim(&mut self, op: OpId, t: Counts, snc: u64, record: NmlSnc, keep: u32) {
        let mut start = 0u32;
        let mut cut = record.parts.len();
        let mut inner = None;
        for (i, &len) in record.lens.iter().enumerate() {
            if start + len >= keep {
                cut = i + 1;
                if start + len > keep {
                    inner = Some((i, keep - start));
                }
                break;
            }
            start += len;
        }
        let tail = record.parts[cut..].iter().rev().copied().collect();
        let tr = Trimming {
            snc,
            record,
            cut,
            inner,
            held: Vec::new(),
            err: None,
        };
        self.sweep(op, t, tail, Then::Trim(tr));
    }

    fn trim_inner(&mut self, op: OpId, t: Counts, tr: Trimming) {
        let Some((i, keep)) = tr.inner else {
            return self.trimmed(op, t, tr, None);
        };
        let (c, part) = tr.record.parts[i];
        if let Err(e) = self.iface(c) {
            return self.reply(op, Err(e));
        }
        let request = SncRequest::Trim { snc: part, keep };
        self.park(op, Step::TrimInner(tr), t, vec![(c, request)]);
    }

    /// The record keeps the head and whatever could not be released, in route order.
    fn trimmed(&mut self, op: OpId, t: Counts, tr: Trimming, trim_err: Option<SncError>) {
        if let Some(s) = self.sncs.get_mut(&tr.snc) {
            let old = &tr.record;
            let mut parts = old.parts[..tr.cut].to_vec();
            let mut lens = old.lens[..tr.cut].to_vec();
            if let Some((i, keep)) = tr.inner {
                lens[i] = keep;
            }
            for p in tr.held.iter().rev() {
                if let Some(k) = old.parts.iter().position(|q| q == p) {
                    parts.push(*p);
                    lens.push(old.lens[k]);
                }
            }
            s.parts = parts;
            s.lens = lens;
        }
        match tr.err.or(trim_err) {
            Some(e) => self.reply(op, Err(e)),
            None => self.reply(op, Ok(SncReply::Trimmed { invocations: t })),
        }
    }
}

impl SncCore for NmlCore {
    type Call = ChildCall;
    type Done = SncReply;

    fn handle_request(&mut self, op: OpId, request: SncRequest) {
        if let Err(e) = self.start(op, request) {
            self.reply(op, Err(e));
        }
    }

    /// A child's answer to invocation `id`: the operation goes on once its whole batch
    /// is answered.
    fn handle_answer(&mut self, id: InvocationId, answer: SncResult) {
        let Some((op, slot)) = self.out.answered(id) else {
            return;
        };
        let Some(o) = self.ops.get_mut(&op) else {
            return;
        };
        if let Some(a) = o.answers.get_mut(slot) {
            *a = Some(answer);
            o.outstanding -= 1;
        }
        if o.outstanding > 0 {
            return;
        }
        let Some(o) = self.ops.remove(&op) else {
            return;
        };
        let answers = o
            .answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(SncError::internal("an invocation unanswered"))))
            .collect();
        self.advance(op, o.step, o.tally, answers);
    }

    fn poll_transmit(&mut self) -> Option<Transmit<ChildCall>> {
        self.out.transmits.pop_front()
    }

    fn poll_reply(&mut self) -> Option<(OpId, SncResult)> {
        self.out.replies.pop_front()
    }
}
