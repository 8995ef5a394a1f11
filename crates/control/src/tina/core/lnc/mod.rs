//! The LNC's state machine (paper 001 §1.2.1: the Layer Network Coordinator "receives
//! requests for connectivity in a layer network" and hands them to the NML-CP hierarchy
//! below it). It asks its shell for each route ([`RouteRequest`], answered from the same
//! route object the other managers use), hands a call to the root NML-CP as subnetwork
//! connections (root invocations, [`Transmit`]s of [`SncRequest`]s, one at a time), and
//! keeps the calls it set up.
//!
//! A point-to-multipoint call (paper 001 §1 asks for connections beyond point-to-point)
//! is a [`Tree`](crate::cm::tree::Tree), the same pure tree the sequential and xbind managers use, held as
//! *segments*: the route to the first leaf is one subnetwork connection (SNC); each
//! further leaf is grafted where its route leaves the tree, with a branch on the fork's
//! switch connection (AddBranch, forwarded down to that switch's EML-CP) and one SNC for
//! the rest of its route (`lnc_leaves.rs`). Dropping a leaf releases the hops that
//! carried only it, which are a tail of every segment they lie in: whole segments are
//! released, the one cut inside is trimmed (TrimSnc), leaf side first, then the branch at
//! the fork is dropped.
//!
//! This file holds the vocabulary and the machine's inputs and outputs; the calls
//! themselves are in `lnc_calls.rs` (set up, release, change of contract) and
//! `lnc_leaves.rs` (leaves added and dropped). Its only time is the `now` a shell passes
//! in, for the setup time each answer reports.

//!
//! The LNC is split as the manager's core is, one `impl` per concern: `types` (what it
//! answers and what it keeps of a call), this module (the core and its inputs and
//! outputs), `calls` (AddConnection, DeleteConnection, ModifyConnection), `leaves`
//! (AddLeaf, DropLeaf) and `recovery` (a call as journaled, and taken back).

mod calls;
mod leaves;
mod recovery;
mod types;

use std::collections::{BTreeMap, HashMap, VecDeque};

use atmlab_core::time::Instant;

use types::{AddRoutes, AfterGraft, Call, Held, Modifying, Op, Step, Then, Work};
pub use types::{CallInfo, Contract, LncReply, LncRequest, LncStats, RouteRequest};

use super::super::{Counts, iface};
use super::{
    ErrorKind, HopSpec, InvocationId, OpId, Outbox, SncError, SncRequest, SncResult, Transmit,
};
use crate::cm::core::CallError;

/// The Layer Network Coordinator.
#[derive(Debug)]
pub struct LncCore {
    calls: BTreeMap<u64, Held>,
    next_call: u64,
    stats: LncStats,
    ops: HashMap<OpId, Op>,
    out: Outbox<SncRequest, LncReply, OpId>,
    routes: VecDeque<RouteRequest>,
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
            out: Outbox::new(),
            routes: VecDeque::new(),
            now: Instant::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> LncStats {
        self.stats
    }

    /// Root invocations emitted so far ("lnc->nml").
    pub fn invocations(&self) -> &Counts {
        &self.out.totals
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
        self.out.transmits.pop_front()
    }

    /// The next route to look up.
    pub fn poll_route(&mut self) -> Option<RouteRequest> {
        self.routes.pop_front()
    }

    /// The next finished operation.
    pub fn poll_reply(&mut self) -> Option<(OpId, Result<LncReply, SncError>)> {
        self.out.replies.pop_front()
    }

    /// A new operation `op`.
    pub fn handle_request(&mut self, now: Instant, op: OpId, request: LncRequest) {
        self.now = now;
        let started = now;
        let (id, leaf) = match request {
            LncRequest::Add {
                source,
                destinations,
                contract,
                tag,
            } => {
                if destinations.is_empty() {
                    return self.reply(op, Err(SncError::invalid("no destination")));
                }
                let add = AddRoutes {
                    source,
                    destinations,
                    contract,
                    tag,
                    routes: Vec::new(),
                };
                return self.next_route(op, started, add);
            }
            LncRequest::Delete { id } => (id, None),
            LncRequest::AddLeaf { id, leaf } => (id, Some(Ok(leaf))),
            LncRequest::DropLeaf { id, leaf } => (id, Some(Err(leaf))),
            LncRequest::Modify { id, contract } => {
                let call = match self.take(id) {
                    Ok(call) => call,
                    Err(e) => return self.reply(op, Err(e)),
                };
                let m = Modifying {
                    new: contract,
                    next: 0,
                    changed: Vec::new(),
                };
                return self.modify_next(op, started, call, m);
            }
        };
        let call = match self.take(id) {
            Ok(call) => call,
            Err(e) => return self.reply(op, Err(e)),
        };
        match leaf {
            None => {
                let all = (0..call.segments.len()).collect();
                self.release_segments(op, started, call, all, Then::Delete);
            }
            Some(Ok(leaf)) => {
                let ends = (call.source.clone(), leaf.clone());
                let bandwidth = call.contract.traffic.pcr;
                self.ask_route(op, started, Step::LeafRoute(call, leaf), ends, bandwidth);
            }
            Some(Err(leaf)) => self.drop_leaf(op, started, call, &leaf),
        }
    }

    /// The root NML-CP's answer to invocation `id`.
    pub fn handle_answer(&mut self, now: Instant, id: InvocationId, answer: SncResult) {
        self.now = now;
        let Some((op, Op { started, step })) = self.resume(id) else {
            return;
        };
        match step {
            Step::Root(call, work) => self.answered(op, started, call, work, answer),
            other => self.mismatched(op, other, "a root answer"),
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
            (Step::Routes(mut add), Ok(r)) => {
                add.routes.push(r);
                self.next_route(op, started, add);
            }
            (Step::LeafRoute(call, leaf), Ok(r)) => {
                self.graft(op, started, call, &leaf, &r, AfterGraft::AddLeaf);
            }
            (Step::LeafRoute(call, _), Err(e)) => {
                self.put(call);
                self.reply(op, Err(e));
            }
            (Step::Routes(_), Err(e)) => self.reply(op, Err(e)),
            (step @ Step::Root(..), _) => self.mismatched(op, step, "a route"),
        }
    }

    /// An answer of the wrong kind for where `op` stands (a shell that mixed up its
    /// invocation ids): the call goes back into the table, so it is not stranded as
    /// "being changed", and the operation fails with an internal error.
    fn mismatched(&mut self, op: OpId, step: Step, what: &str) {
        debug_assert!(false, "the LNC got {what} for an operation at {step:?}");
        match step {
            Step::Root(call, _) | Step::LeafRoute(call, _) => {
                self.put(call);
            }
            Step::Routes(_) => {}
        }
        self.reply(
            op,
            Err(SncError::new(
                ErrorKind::Internal,
                format!("{what} arrived for an operation not waiting for one"),
            )),
        );
    }

    fn reply(&mut self, op: OpId, r: Result<LncReply, SncError>) {
        self.out.reply(op, r);
    }

    fn resume(&mut self, id: InvocationId) -> Option<(OpId, Op)> {
        let op = self.out.answered(id)?;
        Some((op, self.ops.remove(&op)?))
    }

    /// Asks the route object for the route between `ends`; `op` then waits at `step`.
    fn ask_route(
        &mut self,
        op: OpId,
        started: Instant,
        step: Step,
        (source, destination): (String, String),
        bandwidth: f64,
    ) {
        let id = self.out.expect(op);
        self.routes.push_back(RouteRequest {
            id,
            source,
            destination,
            bandwidth,
        });
        self.ops.insert(op, Op { started, step });
    }

    /// Invokes the root NML-CP for `call` (counted for the call and in the totals); the
    /// operation then waits at `work`.
    fn invoke(
        &mut self,
        op: OpId,
        started: Instant,
        mut call: Call,
        work: Work,
        request: SncRequest,
    ) {
        call.invocations += 1;
        self.out.emit(iface::LNC_NML, request, op);
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
            let busy = format!("connection {id} is already being changed; try again");
            SncError::new(ErrorKind::Aborted, busy)
        })
    }

    /// Puts a call back after a change; returns its answer.
    fn put(&mut self, call: Call) -> CallInfo {
        let info = call.info();
        let held = Held {
            info: info.clone(),
            call: Some(call),
        };
        self.calls.insert(info.id, held);
        info
    }
}
