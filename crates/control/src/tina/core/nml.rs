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
//! and trim; setup is in `nml_setup.rs`.
//!
//! Nothing is forgotten on a failure: a refused setup releases what its children set up
//! and gives back the link identifiers it reserved; a release that fails part-way keeps
//! the parts not released under the same SNC, so a retry releases only those; a refused
//! modification changes back the parts already changed.

use std::collections::{HashMap, VecDeque};

use super::super::partition::Subnetwork;
use super::super::{Counts, SetupMode};
use super::{
    InvocationId, OpId, SncError, SncReply, SncRequest, SncResult, Traffic, Transmit, absorb,
    count, keeps_a_hop,
};

pub(super) use super::nml_setup::{Parallel, Sequential};

/// An invocation of child `child` (an index in the order of [`Subnetwork::child_of`]).
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
pub(super) type Link = (
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

/// Releasing parts: sequentially one after another, in parallel all at once.
#[derive(Debug)]
pub(super) struct Releasing {
    parts: Vec<Part>,
    next: usize,
    in_flight: Vec<Part>,
    /// The parts whose release failed (they stay held), and the first error.
    held: Vec<Part>,
    first_err: Option<SncError>,
}

/// What follows a release of parts.
#[derive(Debug)]
pub(super) enum AfterRelease {
    /// A refused setup's rollback: then give back `links`, then refuse with `error`.
    Rollback { error: SncError, links: Vec<Link> },
    /// ReleaseSnc of `snc`: what could not be released stays recorded.
    Release { snc: u64, record: NmlSnc },
    /// TrimSnc: the tail is released; the part the cut falls in is trimmed next.
    Trim(Trimming),
}

/// Changing the contract of parts: sequentially up to the first refusal, in parallel
/// all at once.
#[derive(Debug)]
pub(super) struct Modifying {
    jobs: Vec<Part>,
    traffic: Traffic,
    next: usize,
    in_flight: Vec<Part>,
    changed: Vec<Part>,
    first_err: Option<SncError>,
}

/// What follows a change of contract.
#[derive(Debug)]
pub(super) enum AfterModify {
    /// ModifySnc of `snc` to `new`; refused, the changed parts go back to `old`.
    Change {
        snc: u64,
        new: Traffic,
        old: Traffic,
    },
    /// The change back after `error`.
    Restore(SncError),
}

/// A TrimSnc past the release of its tail.
#[derive(Debug)]
pub(super) struct Trimming {
    snc: u64,
    record: NmlSnc,
    /// Parts kept whole: `record.parts[..cut]`.
    cut: usize,
    /// The part the cut falls inside, and the hops it keeps.
    inner: Option<(usize, u32)>,
    held: Vec<Part>,
    err: Option<SncError>,
}

/// Where an operation stands: the batch it waits for.
#[derive(Debug)]
pub(super) enum Step {
    /// One child operation whose answer is this one's.
    Forward,
    Sequential(Sequential),
    ReserveLinks(Parallel),
    SetupRuns(Parallel),
    Release(Releasing, AfterRelease),
    /// Giving back link identifiers one at a time, then the refusal.
    GiveBackLinks(Vec<Link>, SncError),
    Modify(Modifying, AfterModify),
    TrimInner(Trimming),
}

#[derive(Debug)]
struct Op {
    step: Step,
    tally: Counts,
    answers: Vec<Option<SncResult>>,
    outstanding: usize,
}

/// The NML-CP of one subnetwork.
#[derive(Debug)]
pub struct NmlCore {
    pub(super) subnetwork: Subnetwork,
    /// The interface each connected child's invocations count under.
    ifaces: Vec<&'static str>,
    pub(super) mode: SetupMode,
    pub(super) sncs: HashMap<u64, NmlSnc>,
    pub(super) next_snc: u64,
    ops: HashMap<OpId, Op>,
    waiting: HashMap<InvocationId, (OpId, usize)>,
    next_invocation: InvocationId,
    transmits: VecDeque<Transmit<ChildCall>>,
    replies: VecDeque<(OpId, SncResult)>,
    totals: Counts,
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
            waiting: HashMap::new(),
            next_invocation: 1,
            transmits: VecDeque::new(),
            replies: VecDeque::new(),
            totals: Counts::new(),
        }
    }

    /// Its subnetwork.
    pub fn subnetwork(&self) -> &Subnetwork {
        &self.subnetwork
    }

    /// Every child invocation emitted so far, by interface.
    pub fn invocations(&self) -> &Counts {
        &self.totals
    }

    /// Subnetwork connections held.
    pub fn sncs(&self) -> usize {
        self.sncs.len()
    }

    /// The next child invocation to perform.
    pub fn poll_transmit(&mut self) -> Option<Transmit<ChildCall>> {
        self.transmits.pop_front()
    }

    /// The next finished operation.
    pub fn poll_reply(&mut self) -> Option<(OpId, SncResult)> {
        self.replies.pop_front()
    }

    /// A new operation `op`.
    pub fn handle_request(&mut self, op: OpId, request: SncRequest) {
        if let Err(e) = self.start(op, request) {
            self.reply(op, Err(e));
        }
    }

    /// A child's answer to invocation `id`.
    pub fn handle_answer(&mut self, id: InvocationId, answer: SncResult) {
        let Some((op, slot)) = self.waiting.remove(&id) else {
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

    pub(super) fn reply(&mut self, op: OpId, r: SncResult) {
        self.replies.push_back((op, r));
    }

    /// The interface of child `i`, if it is connected.
    pub(super) fn iface(&self, i: usize) -> Result<&'static str, SncError> {
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
    pub(super) fn park(
        &mut self,
        op: OpId,
        step: Step,
        mut tally: Counts,
        calls: Vec<(usize, SncRequest)>,
    ) {
        let n = calls.len();
        for (slot, (child, request)) in calls.into_iter().enumerate() {
            let iface = self.ifaces[child];
            count(&mut tally, iface);
            count(&mut self.totals, iface);
            let id = self.next_invocation;
            self.next_invocation += 1;
            self.waiting.insert(id, (op, slot));
            self.transmits.push_back(Transmit {
                id,
                iface,
                call: ChildCall { child, request },
            });
        }
        self.ops.insert(
            op,
            Op {
                step,
                tally,
                answers: vec![None; n],
                outstanding: n,
            },
        );
    }

    fn start(&mut self, op: OpId, request: SncRequest) -> Result<(), SncError> {
        let t = Counts::new();
        match request {
            SncRequest::Setup(req) => self.setup(op, req)?,
            SncRequest::Release { snc } => {
                let record = self.sncs.remove(&snc).ok_or_else(|| self.no_snc(snc))?;
                let parts = record.parts.clone();
                self.release(op, t, parts, AfterRelease::Release { snc, record });
            }
            SncRequest::Modify { snc, traffic } => {
                let new = traffic.ok_or_else(|| SncError::invalid("no traffic descriptor"))?;
                let record = self.sncs.get(&snc).ok_or_else(|| self.no_snc(snc))?;
                let (parts, old) = (record.parts.clone(), record.traffic);
                self.modify(op, t, parts, new, AfterModify::Change { snc, new, old });
            }
            SncRequest::ReserveLink { ref switch, .. }
            | SncRequest::UnreserveLink { ref switch, .. }
            | SncRequest::AddBranch { ref switch, .. }
            | SncRequest::DropBranch { ref switch, .. } => {
                let child = self.child_of(switch)?;
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
            Step::Release(mut r, then) => {
                for (part, a) in std::mem::take(&mut r.in_flight).into_iter().zip(answers) {
                    match a {
                        Ok(rep) => absorb(&mut t, &rep),
                        Err(e) => {
                            r.held.push(part);
                            r.first_err.get_or_insert(e);
                        }
                    }
                }
                self.release_more(op, t, r, then);
            }
            Step::GiveBackLinks(links, error) => {
                for a in answers {
                    if let Err(e) = a {
                        tracing::warn!(subnetwork = %self.subnetwork.name, error = %e, "NML-CP: giving back a link identifier failed");
                    }
                }
                self.give_back_links(op, t, links, error);
            }
            Step::Modify(mut m, then) => {
                for (part, a) in std::mem::take(&mut m.in_flight).into_iter().zip(answers) {
                    match a {
                        Ok(rep) => {
                            absorb(&mut t, &rep);
                            m.changed.push(part);
                        }
                        Err(e) => {
                            m.first_err.get_or_insert(e);
                        }
                    }
                }
                self.modify_more(op, t, m, then);
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

    /// Releases `parts`, then goes on with `then`.
    pub(super) fn release(&mut self, op: OpId, t: Counts, parts: Vec<Part>, then: AfterRelease) {
        let r = Releasing {
            parts,
            next: 0,
            in_flight: Vec::new(),
            held: Vec::new(),
            first_err: None,
        };
        self.release_more(op, t, r, then);
    }

    fn release_more(&mut self, op: OpId, t: Counts, mut r: Releasing, then: AfterRelease) {
        let mut batch = Vec::new();
        while r.next < r.parts.len() {
            let part = r.parts[r.next];
            r.next += 1;
            if let Err(e) = self.iface(part.0) {
                r.held.push(part);
                r.first_err.get_or_insert(e);
                continue;
            }
            batch.push(part);
            if self.mode == SetupMode::Sequential {
                break;
            }
        }
        if batch.is_empty() {
            return self.released(op, t, r, then);
        }
        let calls = batch
            .iter()
            .map(|&(c, snc)| (c, SncRequest::Release { snc }))
            .collect();
        r.in_flight = batch;
        self.park(op, Step::Release(r, then), t, calls);
    }

    fn released(&mut self, op: OpId, t: Counts, mut r: Releasing, then: AfterRelease) {
        // Route order, whatever order the failures came in.
        let parts = &r.parts;
        r.held.sort_by_key(|p| parts.iter().position(|q| q == p));
        match then {
            AfterRelease::Rollback { error, links } => {
                if let Some(re) = r.first_err {
                    tracing::warn!(subnetwork = %self.subnetwork.name, error = %re, "NML-CP: rollback incomplete");
                }
                self.give_back_links(op, t, links, error);
            }
            AfterRelease::Release { snc, record } => match r.first_err {
                Some(e) => {
                    // What could not be released stays recorded under the same id, so a
                    // retry of the release finds it (and releases only that).
                    let lens = r
                        .held
                        .iter()
                        .map(|p| {
                            record
                                .parts
                                .iter()
                                .position(|q| q == p)
                                .map_or(0, |i| record.lens[i])
                        })
                        .collect();
                    let kept = NmlSnc {
                        parts: r.held,
                        lens,
                        traffic: record.traffic,
                    };
                    self.sncs.insert(snc, kept);
                    self.reply(op, Err(e));
                }
                None => self.reply(op, Ok(SncReply::Released { invocations: t })),
            },
            AfterRelease::Trim(mut tr) => {
                tr.held = r.held;
                tr.err = r.first_err;
                self.trim_inner(op, t, tr);
            }
        }
    }

    /// Gives back `links` one at a time (a failure can only be logged), then refuses
    /// with `error`.
    pub(super) fn give_back_links(
        &mut self,
        op: OpId,
        t: Counts,
        mut links: Vec<Link>,
        error: SncError,
    ) {
        while !links.is_empty() {
            let (c, switch, port, id) = links.remove(0);
            if self.iface(c).is_err() {
                continue;
            }
            let request = SncRequest::UnreserveLink {
                switch,
                port,
                id: Some(id),
            };
            self.park(op, Step::GiveBackLinks(links, error), t, vec![(c, request)]);
            return;
        }
        self.reply(op, Err(error));
    }

    fn modify(
        &mut self,
        op: OpId,
        t: Counts,
        parts: Vec<Part>,
        traffic: Traffic,
        then: AfterModify,
    ) {
        let jobs = parts
            .into_iter()
            .filter(|&(c, _)| self.iface(c).is_ok())
            .collect();
        let m = Modifying {
            jobs,
            traffic,
            next: 0,
            in_flight: Vec::new(),
            changed: Vec::new(),
            first_err: None,
        };
        self.modify_more(op, t, m, then);
    }

    fn modify_more(&mut self, op: OpId, t: Counts, mut m: Modifying, then: AfterModify) {
        let end = match self.mode {
            SetupMode::Sequential => (m.next + 1).min(m.jobs.len()),
            SetupMode::Parallel => m.jobs.len(),
        };
        if m.first_err.is_some() || m.next == end {
            return self.modified(op, t, m, then);
        }
        m.in_flight = m.jobs[m.next..end].to_vec();
        m.next = end;
        let calls = m
            .in_flight
            .iter()
            .map(|&(c, snc)| {
                let traffic = Some(m.traffic);
                (c, SncRequest::Modify { snc, traffic })
            })
            .collect();
        self.park(op, Step::Modify(m, then), t, calls);
    }

    fn modified(&mut self, op: OpId, t: Counts, m: Modifying, then: AfterModify) {
        match (then, m.first_err) {
            (AfterModify::Change { old, .. }, Some(e)) => {
                // Change back what was changed: the connection keeps its old contract.
                self.modify(op, t, m.changed, old, AfterModify::Restore(e));
            }
            (AfterModify::Change { snc, new, .. }, None) => {
                if let Some(s) = self.sncs.get_mut(&snc) {
                    s.traffic = new;
                }
                self.reply(op, Ok(SncReply::Modified { invocations: t }));
            }
            (AfterModify::Restore(e), back) => {
                if let Some(be) = back {
                    tracing::error!(subnetwork = %self.subnetwork.name, error = %be, "NML-CP: restoring the old contract failed");
                }
                self.reply(op, Err(e));
            }
        }
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
        self.release(op, t, tail, AfterRelease::Trim(tr));
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
