//! The EML-CP's state machine (paper 001 §1.2.1: the Element Management Layer
//! Connection Performer, "an object that has access to an agent on a real switch", which
//! specializes the NML-CP's SNC interface; §4.2: it runs beside the switch and drives it
//! through the connection server). It sets up, releases and modifies one switch's
//! cross-connects with the switch's own two-phase commands (Reserve, then Commit), as
//! [`Command`]s for its shell to send, one at a time.
//!
//! A refused setup leaves nothing: what the setup reserved itself is given back before
//! the refusal goes up. A release that fails part-way keeps what is left under the same
//! SNC, so a retried release finishes it; a switch that answers a release "not found"
//! has nothing of it left (the answer to an earlier try was lost), and the release
//! goes on as if it had been answered. (What a lost answer leaves on a switch, a commit
//! or reservation nobody heard of, the deployment's sweep gives back.)

use std::collections::HashMap;

use atmlab_core::ids::{PortId, VcId};
use atmlab_fabric::switch::{
    Branch, BranchChange, Command, Commit, ConnectionKind, Modify, Release, Reply, Reserve,
    Unreserve,
};

use super::super::{Counts, iface};
use super::{
    AdoptSnc, BranchInfo, ErrorKind, HopInfo, InvocationId, OpId, Outbox, SetupSnc, SncCore,
    SncError, SncReply, SncRequest, SncResult, SncSetUp, Traffic, Transmit, count, keeps_a_hop,
};

/// What the EML-CP holds for one subnetwork connection (one hop).
#[derive(Debug, Clone)]
struct EmlSnc {
    /// The switch connection; `None` once released there while the source's VC is
    /// still to be given back (a retried release does only that).
    connection: Option<u64>,
    /// The source's VC, reserved on the input port when the caller gave none: held for
    /// the connection's life (no other call can take it) and given back on release.
    source: Option<(PortId, VcId)>,
    traffic: Traffic,
}

/// A setup between its commands.
#[derive(Debug)]
struct Setup {
    req: SetupSnc,
    traffic: Traffic,
    in_id: Option<VcId>,
    out_id: Option<VcId>,
    /// What this setup reserved itself, to give back if it is refused.
    held: Vec<(PortId, VcId)>,
}

/// Where an operation stands: the command it waits for.
#[derive(Debug)]
enum Step {
    /// Reserve for the setup's input (the source's VC) or output identifier.
    SetupReserve(Setup),
    SetupCommit(Setup),
    /// Giving back a refused operation's reservations, one at a time, then the refusal.
    GiveBack(Vec<(PortId, VcId)>, SncError),
    /// ReleaseSnc: the switch connection, then the source's VC.
    Release(u64, EmlSnc),
    Modify(u64, Traffic),
    ReserveLink,
    UnreserveLink,
    BranchReserve(u64, PortId),
    BranchAdd(PortId, VcId),
    BranchDrop,
}

#[derive(Debug)]
struct Op {
    step: Step,
    /// The invocations made for it.
    tally: Counts,
}

/// The EML-CP of one switch.
#[derive(Debug)]
pub struct EmlCore {
    switch: String,
    owner: std::sync::Arc<str>,
    sncs: HashMap<u64, EmlSnc>,
    next_snc: u64,
    ops: HashMap<OpId, Op>,
    out: Outbox<Command, SncReply, OpId>,
}

impl EmlCore {
    /// The EML-CP of `switch`, reserving and committing as `owner`.
    pub fn new(switch: impl Into<String>, owner: impl Into<String>) -> Self {
        EmlCore {
            switch: switch.into(),
            owner: owner.into().into(),
            sncs: HashMap::new(),
            next_snc: 1,
            ops: HashMap::new(),
            out: Outbox::new(),
        }
    }

    /// Its switch.
    pub fn switch(&self) -> &str {
        &self.switch
    }

    /// Every switch command emitted so far ("eml->switch").
    pub fn invocations(&self) -> &Counts {
        &self.out.totals
    }

    /// Subnetwork connections held.
    pub fn sncs(&self) -> usize {
        self.sncs.len()
    }

    /// Takes back a one-hop SNC the switch holds (a restarted hierarchy's start-up
    /// audit): recorded as if this EML-CP had set it up; returns its id.
    pub fn adopt(&mut self, s: &AdoptSnc) -> Result<u64, SncError> {
        let [hop] = s.hops.as_slice() else {
            return Err(SncError::invalid(format!(
                "the EML-CP of {} takes back one hop, not {}",
                self.switch,
                s.hops.len()
            )));
        };
        self.check(&hop.switch)?;
        let source = match (s.holds_source, hop.in_id) {
            (true, Some(v)) => Some((hop.in_port, v)),
            (true, None) => return Err(SncError::invalid("a source without its identifier")),
            (false, _) => None,
        };
        let snc = self.next_snc;
        self.next_snc += 1;
        self.sncs.insert(
            snc,
            EmlSnc {
                connection: Some(hop.connection),
                source,
                traffic: s.traffic,
            },
        );
        Ok(snc)
    }

    fn check(&self, switch: &str) -> Result<(), SncError> {
        if switch == self.switch {
            Ok(())
        } else {
            Err(SncError::invalid(format!(
                "the EML-CP of {} was asked about switch {switch:?}",
                self.switch
            )))
        }
    }

    /// Branches are added to and dropped from this EML-CP's own connections only.
    fn owns(&self, connection: u64) -> Result<(), SncError> {
        if self.sncs.values().any(|s| s.connection == Some(connection)) {
            Ok(())
        } else {
            Err(SncError::not_found(format!(
                "{}: connection {connection} is not one this EML-CP set up",
                self.switch
            )))
        }
    }

    fn no_snc(&self, snc: u64) -> SncError {
        SncError::not_found(format!("{}: no SNC {snc}", self.switch))
    }

    /// Emits `command` for `op`, which then waits at `step`.
    fn send(&mut self, op: OpId, step: Step, mut tally: Counts, command: Command) {
        count(&mut tally, iface::EML_SWITCH);
        self.out.emit(iface::EML_SWITCH, command, op);
        self.ops.insert(op, Op { step, tally });
    }

    fn reserve(&self, port: PortId) -> Command {
        Command::Reserve(Reserve {
            port,
            count: 1,
            owner: self.owner.clone(),
            ..Default::default()
        })
    }

    fn unreserve(&self, port: PortId, id: VcId) -> Command {
        Command::Unreserve(Unreserve {
            port,
            ids: vec![id],
            owner: self.owner.clone(),
        })
    }

    fn start(&mut self, op: OpId, request: SncRequest) -> Result<(), SncError> {
        let t = Counts::new();
        match request {
            SncRequest::Setup(req) => {
                let [hop] = req.hops.as_slice() else {
                    return Err(SncError::invalid(format!(
                        "the EML-CP of {} sets up one hop, not {}",
                        self.switch,
                        req.hops.len()
                    )));
                };
                self.check(&hop.switch)?;
                let traffic = req
                    .traffic
                    .ok_or_else(|| SncError::invalid("no traffic descriptor"))?;
                let s = Setup {
                    in_id: req.in_id,
                    out_id: req.out_id,
                    req,
                    traffic,
                    held: Vec::new(),
                };
                self.setup_next(op, s, t);
            }
            SncRequest::Release { snc } => {
                let held = self.sncs.remove(&snc).ok_or_else(|| self.no_snc(snc))?;
                self.release_next(op, snc, held, t);
            }
            SncRequest::Modify { snc, traffic } => {
                let traffic = traffic.ok_or_else(|| SncError::invalid("no traffic descriptor"))?;
                let connection = self
                    .sncs
                    .get(&snc)
                    .and_then(|s| s.connection)
                    .ok_or_else(|| self.no_snc(snc))?;
                let command = Command::Modify(Modify {
                    connection,
                    traffic: traffic.descriptor(),
                    clr: traffic.clr,
                });
                self.send(op, Step::Modify(snc, traffic), t, command);
            }
            SncRequest::ReserveLink(l) => {
                self.check(&l.switch)?;
                self.send(op, Step::ReserveLink, t, self.reserve(l.port));
            }
            SncRequest::UnreserveLink(l, id) => {
                self.check(&l.switch)?;
                let id = id.ok_or_else(|| SncError::invalid("no identifier"))?;
                self.send(op, Step::UnreserveLink, t, self.unreserve(l.port, id));
            }
            SncRequest::AddBranch(b) => {
                self.check(&b.switch)?;
                self.owns(b.connection)?;
                let step = Step::BranchReserve(b.connection, b.port);
                self.send(op, step, t, self.reserve(b.port));
            }
            SncRequest::DropBranch(b, id) => {
                self.check(&b.switch)?;
                self.owns(b.connection)?;
                let id = id.ok_or_else(|| SncError::invalid("no identifier"))?;
                let branch = Branch { port: b.port, id };
                let change = BranchChange {
                    connection: b.connection,
                    branch,
                };
                self.send(op, Step::BranchDrop, t, Command::DropBranch(change));
            }
            // An EML-CP's SNC is one hop: keeping at least one hop keeps all of it.
            SncRequest::Trim { snc, keep } => {
                keeps_a_hop(keep)?;
                if !self.sncs.contains_key(&snc) {
                    return Err(self.no_snc(snc));
                }
                let invocations = Counts::new();
                self.out.reply(op, Ok(SncReply::Trimmed { invocations }));
            }
        }
        Ok(())
    }

    /// The setup's next command: the source's VC if not given, the output identifier if
    /// not given, then the commit.
    fn setup_next(&mut self, op: OpId, s: Setup, tally: Counts) {
        let hop = &s.req.hops[0];
        let command = match (s.in_id, s.out_id) {
            (None, _) => self.reserve(PortId(hop.in_port)),
            (_, None) => self.reserve(PortId(hop.out_port)),
            (Some(in_id), Some(out_id)) => {
                let command = Command::Commit(Commit {
                    kind: ConnectionKind::Vc,
                    in_port: PortId(hop.in_port),
                    in_id,
                    branches: vec![Branch {
                        port: PortId(hop.out_port),
                        id: out_id,
                    }],
                    traffic: s.traffic.descriptor(),
                    clr: s.traffic.clr,
                    buffer_cells: s.req.buffer_cells,
                    owner: self.owner.clone(),
                    replenish: 0,
                    tag: s.req.tag.clone(),
                });
                return self.send(op, Step::SetupCommit(s), tally, command);
            }
        };
        self.send(op, Step::SetupReserve(s), tally, command);
    }

    /// The release's next command: the switch connection, then the source's VC.
    fn release_next(&mut self, op: OpId, snc: u64, held: EmlSnc, tally: Counts) {
        let command = match (held.connection, held.source) {
            (Some(connection), _) => Command::Release(Release {
                connection,
                keep_reserved: false,
            }),
            (None, Some((port, vc))) => self.unreserve(port, vc),
            (None, None) => {
                let invocations = tally;
                return self.out.reply(op, Ok(SncReply::Released { invocations }));
            }
        };
        self.send(op, Step::Release(snc, held), tally, command);
    }

    /// Gives back `held` one at a time, then refuses with `error`; a failed give-back
    /// can only be logged (the refusal is what the caller hears).
    fn give_back(
        &mut self,
        op: OpId,
        mut held: Vec<(PortId, VcId)>,
        error: SncError,
        tally: Counts,
    ) {
        if held.is_empty() {
            self.out.reply(op, Err(error));
            return;
        }
        let (port, id) = held.remove(0);
        let command = self.unreserve(port, id);
        self.send(op, Step::GiveBack(held, error), tally, command);
    }

    /// Takes `op` one command further; `Some` when it is finished.
    fn advance(
        &mut self,
        op: OpId,
        step: Step,
        t: Counts,
        answer: Result<Reply, SncError>,
    ) -> Option<SncResult> {
        match step {
            Step::SetupReserve(mut s) => match reserved(answer) {
                Ok(v) => {
                    let hop = &s.req.hops[0];
                    let port = if s.in_id.is_none() {
                        s.in_id = Some(v);
                        hop.in_port
                    } else {
                        s.out_id = Some(v);
                        hop.out_port
                    };
                    s.held.push((PortId(port), v));
                    self.setup_next(op, s, t);
                }
                Err(e) => self.give_back(op, s.held, e, t),
            },
            Step::SetupCommit(s) => match answer {
                Ok(Reply::Committed { connection, .. }) => {
                    return Some(Ok(self.set_up(s, connection, t)));
                }
                Ok(other) => self.give_back(op, s.held, unexpected_reply("Commit", &other), t),
                Err(e) => self.give_back(op, s.held, e, t),
            },
            Step::GiveBack(held, error) => {
                if let Err(e) = answer {
                    tracing::warn!(switch = %self.switch, error = %e, "EML-CP: giving back a reservation failed");
                }
                self.give_back(op, held, error, t);
            }
            Step::Release(snc, mut held) => match answer {
                // Not there: gone already (an earlier release whose answer was lost on
                // the way back, or a sweep), which is what the release wanted.
                Ok(_)
                | Err(SncError {
                    kind: ErrorKind::NotFound,
                    ..
                }) => {
                    if held.connection.take().is_none() {
                        held.source = None;
                    }
                    self.release_next(op, snc, held, t);
                }
                Err(e) => {
                    // Still ours: a retry of the release finds what is left (after the
                    // connection, only the source's VC to give back).
                    self.sncs.insert(snc, held);
                    return Some(Err(e));
                }
            },
            Step::Modify(snc, traffic) => {
                return Some(answer.map(|_| {
                    if let Some(s) = self.sncs.get_mut(&snc) {
                        s.traffic = traffic;
                    }
                    SncReply::Modified { invocations: t }
                }));
            }
            Step::ReserveLink => {
                return Some(reserved(answer).map(|v| SncReply::LinkReserved {
                    id: Some(v),
                    invocations: t,
                }));
            }
            Step::UnreserveLink => return Some(answer.map(|_| SncReply::LinkUnreserved)),
            Step::BranchReserve(connection, port) => match reserved(answer) {
                Ok(id) => {
                    let change = BranchChange {
                        connection,
                        branch: Branch { port, id },
                    };
                    self.send(op, Step::BranchAdd(port, id), t, Command::AddBranch(change));
                }
                Err(e) => return Some(Err(e)),
            },
            Step::BranchAdd(port, id) => match answer {
                Ok(_) => {
                    return Some(Ok(SncReply::BranchAdded {
                        id: Some(id),
                        invocations: t,
                    }));
                }
                Err(e) => self.give_back(op, vec![(port, id)], e, t),
            },
            Step::BranchDrop => {
                return Some(answer.map(|_| SncReply::BranchDropped { invocations: t }));
            }
        }
        None
    }

    /// Records a committed setup and answers it.
    fn set_up(&mut self, s: Setup, connection: u64, invocations: Counts) -> SncReply {
        let hop = &s.req.hops[0];
        let (in_port, out_port) = (PortId(hop.in_port), PortId(hop.out_port));
        let snc = self.next_snc;
        self.next_snc += 1;
        let source = match (s.req.in_id, s.in_id) {
            (None, Some(v)) => Some((in_port, v)),
            _ => None,
        };
        self.sncs.insert(
            snc,
            EmlSnc {
                connection: Some(connection),
                source,
                traffic: s.traffic,
            },
        );
        SncReply::SetUp(SncSetUp {
            snc,
            in_id: s.in_id,
            out_id: s.out_id,
            hops: vec![HopInfo {
                switch: self.switch.clone(),
                connection,
                in_port,
                in_id: s.in_id,
                out_port,
                out_id: s.out_id,
                branches: vec![BranchInfo {
                    port: out_port,
                    id: s.out_id,
                }],
            }],
            invocations,
        })
    }
}

impl SncCore for EmlCore {
    type Call = Command;
    type Done = Reply;

    fn handle_request(&mut self, op: OpId, request: SncRequest) {
        if let Err(e) = self.start(op, request) {
            self.out.reply(op, Err(e));
        }
    }

    /// The switch's answer to command `id`.
    fn handle_answer(&mut self, id: InvocationId, answer: Result<Reply, SncError>) {
        let Some(op) = self.out.answered(id) else {
            return;
        };
        let Some(Op { step, tally }) = self.ops.remove(&op) else {
            return;
        };
        if let Some(done) = self.advance(op, step, tally, answer) {
            self.out.reply(op, done);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit<Command>> {
        self.out.transmits.pop_front()
    }

    fn poll_reply(&mut self) -> Option<(OpId, SncResult)> {
        self.out.replies.pop_front()
    }
}

/// The one identifier a Reserve of one answered.
fn reserved(answer: Result<Reply, SncError>) -> Result<VcId, SncError> {
    match answer? {
        Reply::Reserved(ids) => ids
            .first()
            .copied()
            .ok_or_else(|| SncError::internal("Reserve: no identifier in the reply")),
        other => Err(unexpected_reply("Reserve", &other)),
    }
}

fn unexpected_reply(what: &str, got: &Reply) -> SncError {
    SncError::internal(format!("{what} was answered with {got:?}"))
}
