//! The TINA connection performers as sans-IO state machines (paper 001 §1.2.1: the LNC,
//! the NML-CPs and the EML-CPs, and the Subnetwork Connection (SNC) interface the
//! EML-CP specializes; §4.3: sequential against parallel sub-connection setup). This
//! module holds the plain vocabulary the three cores share: the SNC operations and their
//! replies, the traffic contract, the error type; [`eml`], [`nml`] and [`lnc`] hold the
//! machines.
//!
//! No core does I/O, keeps a clock or knows about protobuf: a shell hands a core an
//! operation under an id of its choosing ([`OpId`]) and the answers to the invocations
//! the core asked for (each under the core's [`InvocationId`]); the core emits
//! invocations ([`Transmit`]: switch commands from an EML-CP, child operations from an
//! NML-CP, root operations from the LNC) and final replies. Several operations may be in
//! flight at once; a core emits several invocations together only where they may run
//! concurrently (parallel setup), so a shell that performs every emitted invocation at
//! once reproduces the mode the core chose.
//!
//! Every emitted invocation counts once under its interface ([`super::iface`]) in the
//! core's totals, failed ones too; the per-operation tally (a reply's `invocations`) is
//! the core's own invocations plus what its callees' replies reported.
//!
//! Method kinds and the order a shell calls them. Inputs: `handle_request(op, request)`
//! for each new operation, `handle_answer(id, answer)` for each answered invocation (the
//! LNC's also take `now`, and it has `handle_route(now, id, route)` for the routes it
//! asked for). Outputs, drained after every input: `poll_transmit()` (the invocations to
//! perform, every one of a drain concurrently), `poll_route()` (LNC only) and
//! `poll_reply()` (finished operations, by `op`). There is no `poll_timeout`: a core sets
//! no timers; a shell whose transport gives up answers with an error. Queries (`get`,
//! `list`, `stats`, `invocations`) read the state between inputs.

pub mod eml;
pub mod lnc;
pub mod nml;

#[cfg(test)]
mod tests;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;

pub use crate::cm::tree::HopSpec;

use super::Counts;

/// The shell's name for an operation it handed a core; the core's reply carries it.
pub type OpId = u64;

/// The core's name for an invocation it emitted; the shell answers under it.
pub type InvocationId = u64;

/// An invocation a core asks its shell to perform.
#[derive(Debug, Clone, PartialEq)]
pub struct Transmit<C> {
    /// Answer under this id.
    pub id: InvocationId,
    /// The interface it is counted under ([`super::iface`]).
    pub iface: &'static str,
    /// What to invoke.
    pub call: C,
}

/// A cell-level traffic contract as the SNC interface carries it: the service class and
/// the rates as the caller gave them (kept exactly, so an answer echoes them), with the
/// target cell loss ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// Service class.
    pub class: ServiceClass,
    /// Peak cell rate, cells/s.
    pub pcr: f64,
    /// Sustainable cell rate, cells/s (VBR only).
    pub scr: f64,
    /// Maximum burst size, cells (VBR only).
    pub mbs: u32,
    /// Target cell loss ratio (0: the switch's default).
    pub clr: f64,
}

impl Traffic {
    /// The descriptor a switch admits, read as the switch server reads the wire: for CBR
    /// and UBR the SCR is the PCR and the burst one cell, whatever was given.
    pub fn descriptor(&self) -> TrafficDescriptor {
        let vbr = matches!(self.class, ServiceClass::RtVbr | ServiceClass::NrtVbr);
        TrafficDescriptor {
            class: self.class,
            pcr: CellRate(self.pcr),
            scr: CellRate(if vbr { self.scr } else { self.pcr }),
            mbs: if vbr { self.mbs } else { 1 },
            cdvt_ps: 0,
        }
    }
}

/// SetupSnc: a subnetwork connection over a run of hops inside the performer's
/// subnetwork.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupSnc {
    /// The hops, upstream first.
    pub hops: Vec<HopSpec>,
    /// The identifier on the link into the first hop; `None`: chosen inside (the
    /// source's VC, held until release).
    pub in_id: Option<VcId>,
    /// The identifier on the link out of the last hop; `None`: chosen inside.
    pub out_id: Option<VcId>,
    /// The contract (`None` is refused, as the IDL requires one).
    pub traffic: Option<Traffic>,
    /// Output buffer per hop, cells.
    pub buffer_cells: u32,
    /// The caller's label.
    pub tag: String,
}

/// One operation of the SNC interface (tina.proto's ConnectionPerformer), served by the
/// NML-CP and, specialized, by the EML-CP.
#[derive(Debug, Clone, PartialEq)]
pub enum SncRequest {
    /// Set up an SNC.
    Setup(SetupSnc),
    /// Release an SNC: everything it holds returns to the switches.
    Release {
        /// The performer's id of the SNC.
        snc: u64,
    },
    /// Change an SNC's contract, admission first on every hop.
    Modify {
        /// The SNC.
        snc: u64,
        /// The new contract.
        traffic: Option<Traffic>,
    },
    /// Reserve one identifier on a switch's output port inside the subnetwork.
    ReserveLink(LinkEnd),
    /// Give back an identifier ReserveLink reserved and nothing committed.
    UnreserveLink(LinkEnd, Option<VcId>),
    /// A new branch on a switch connection inside the subnetwork (AddLeaf), on an
    /// identifier chosen there.
    AddBranch(BranchAt),
    /// Remove a branch of a switch connection inside the subnetwork (DropLeaf), with its
    /// identifier.
    DropBranch(BranchAt, Option<VcId>),
    /// Keep the first `keep` hops of an SNC, release the rest (DropLeaf).
    Trim {
        /// The SNC.
        snc: u64,
        /// Hops kept, at least 1.
        keep: u32,
    },
}

impl SncRequest {
    /// The switch an operation on one switch names (ReserveLink, UnreserveLink,
    /// AddBranch, DropBranch).
    pub fn switch(&self) -> Option<&str> {
        match self {
            SncRequest::ReserveLink(l) | SncRequest::UnreserveLink(l, _) => Some(&l.switch),
            SncRequest::AddBranch(b) | SncRequest::DropBranch(b, _) => Some(&b.switch),
            _ => None,
        }
    }
}

/// An output port of a switch inside the subnetwork (ReserveLink, UnreserveLink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEnd {
    /// The switch.
    pub switch: String,
    /// Its output port.
    pub port: PortId,
}

/// A branch of a switch connection inside the subnetwork (AddBranch, DropBranch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchAt {
    /// The switch.
    pub switch: String,
    /// The switch connection.
    pub connection: u64,
    /// The branch's output port.
    pub port: PortId,
}

/// One branch of a hop as an answer reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchInfo {
    /// The output port.
    pub port: PortId,
    /// Its identifier, when known.
    pub id: Option<VcId>,
}

/// One hop of a subnetwork connection (or of a call) as set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopInfo {
    /// The switch.
    pub switch: String,
    /// The switch connection.
    pub connection: u64,
    /// Where the cells enter.
    pub in_port: PortId,
    /// Their identifier there.
    pub in_id: Option<VcId>,
    /// The first branch's port.
    pub out_port: PortId,
    /// The first branch's identifier.
    pub out_id: Option<VcId>,
    /// Every branch.
    pub branches: Vec<BranchInfo>,
}

/// A subnetwork connection a restarted hierarchy takes back (the start-up audit against
/// the journal, issue 24): its hops as the switches hold them, in route order, each with
/// both identifiers known. Nothing is invoked: the performers only record it, so that
/// releasing, changing or trimming it later works as for one they set up.
#[derive(Debug, Clone, PartialEq)]
pub struct AdoptSnc {
    /// The hops, upstream first (`in_id` and `out_id` set).
    pub hops: Vec<HopInfo>,
    /// The first hop's input identifier is the source's VC, which the SNC reserved
    /// itself and gives back on release.
    pub holds_source: bool,
    /// The contract.
    pub traffic: Traffic,
}

/// The answer to SetupSnc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SncSetUp {
    /// The performer's id of the new SNC.
    pub snc: u64,
    /// The identifier on the link into the first hop.
    pub in_id: Option<VcId>,
    /// The identifier on the link out of the last hop.
    pub out_id: Option<VcId>,
    /// Every hop, in route order.
    pub hops: Vec<HopInfo>,
    /// Remote invocations made for this operation, by interface.
    pub invocations: Counts,
}

/// The answer to one [`SncRequest`] (the variant matches the request's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SncReply {
    /// SetupSnc.
    SetUp(SncSetUp),
    /// ReleaseSnc.
    Released {
        /// Invocations made for it.
        invocations: Counts,
    },
    /// ModifySnc.
    Modified {
        /// Invocations made for it.
        invocations: Counts,
    },
    /// ReserveLink.
    LinkReserved {
        /// The identifier reserved.
        id: Option<VcId>,
        /// Invocations made for it.
        invocations: Counts,
    },
    /// UnreserveLink.
    LinkUnreserved,
    /// AddBranch.
    BranchAdded {
        /// The branch's identifier.
        id: Option<VcId>,
        /// Invocations made for it.
        invocations: Counts,
    },
    /// DropBranch.
    BranchDropped {
        /// Invocations made for it.
        invocations: Counts,
    },
    /// TrimSnc.
    Trimmed {
        /// Invocations made for it.
        invocations: Counts,
    },
}

impl SncReply {
    /// The invocations the answer reports (none for UnreserveLink).
    pub fn invocations(&self) -> Option<&Counts> {
        match self {
            SncReply::SetUp(s) => Some(&s.invocations),
            SncReply::Released { invocations }
            | SncReply::Modified { invocations }
            | SncReply::LinkReserved { invocations, .. }
            | SncReply::BranchAdded { invocations, .. }
            | SncReply::BranchDropped { invocations }
            | SncReply::Trimmed { invocations } => Some(invocations),
            SncReply::LinkUnreserved => None,
        }
    }

    /// The same answer reporting `invocations` instead.
    pub fn with_invocations(mut self, counts: Counts) -> SncReply {
        match &mut self {
            SncReply::SetUp(s) => s.invocations = counts,
            SncReply::Released { invocations }
            | SncReply::Modified { invocations }
            | SncReply::LinkReserved { invocations, .. }
            | SncReply::BranchAdded { invocations, .. }
            | SncReply::BranchDropped { invocations }
            | SncReply::Trimmed { invocations } => *invocations = counts,
            SncReply::LinkUnreserved => {}
        }
        self
    }
}

/// The class of a refusal; a shell maps it to its transport's status code (gRPC's of the
/// same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A malformed request.
    InvalidArgument,
    /// No such SNC, connection or call.
    NotFound,
    /// Already there (a leaf joined twice).
    AlreadyExists,
    /// Not in this state (the last leaf dropped).
    FailedPrecondition,
    /// Out of resources: admission refused, no free identifier (a blocked call).
    ResourceExhausted,
    /// Busy: another change has the call.
    Aborted,
    /// A value out of range.
    OutOfRange,
    /// A callee could not be reached.
    Unavailable,
    /// A broken invariant (a callee's answer without what it must carry).
    Internal,
    /// Another class a callee answered with, by its google.rpc.Code number, passed up
    /// unchanged.
    Other(i32),
}

/// Why an operation was refused: its class and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SncError {
    /// The class.
    pub kind: ErrorKind,
    /// What happened, naming the performer or switch.
    pub message: String,
}

impl SncError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        SncError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        SncError::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        SncError::new(ErrorKind::NotFound, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        SncError::new(ErrorKind::Internal, message)
    }

    /// The class of a switch or connection manager error, by the IDL's one mapping.
    pub fn of_fabric(kind: atmlab_fabric::error::ErrorKind) -> ErrorKind {
        use atmlab_fabric::error::ErrorKind as F;
        match kind {
            F::NotFound => ErrorKind::NotFound,
            F::OutOfRange => ErrorKind::OutOfRange,
            F::AlreadyExists => ErrorKind::AlreadyExists,
            F::ResourceExhausted => ErrorKind::ResourceExhausted,
            F::InvalidArgument => ErrorKind::InvalidArgument,
            F::Aborted => ErrorKind::Aborted,
            F::Unavailable => ErrorKind::Unavailable,
            F::PermissionDenied => ErrorKind::Other(7),
        }
    }
}

impl std::fmt::Display for SncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// The outcome of one invocation or operation.
pub type SncResult = Result<SncReply, SncError>;

/// What the EML-CP and NML-CP cores share: the SNC interface in, invocations of
/// [`SncCore::Call`] out. The order a shell calls them: [`SncCore::handle_request`] for
/// each operation and [`SncCore::handle_answer`] for each answer, draining
/// [`SncCore::poll_transmit`] and [`SncCore::poll_reply`] after every input.
pub trait SncCore {
    /// What the core invokes.
    type Call;
    /// What a successful invocation answers.
    type Done;
    /// A new operation `op`.
    fn handle_request(&mut self, op: OpId, request: SncRequest);
    /// The answer to invocation `id`.
    fn handle_answer(&mut self, id: InvocationId, answer: Result<Self::Done, SncError>);
    /// The next invocation to perform.
    fn poll_transmit(&mut self) -> Option<Transmit<Self::Call>>;
    /// The next finished operation.
    fn poll_reply(&mut self) -> Option<(OpId, SncResult)>;
}

/// What every core keeps about its outputs: the invocations emitted and not yet polled,
/// what each one's answer resumes (`W`), the replies not yet polled, and the totals of
/// invocations by interface.
#[derive(Debug)]
struct Outbox<C, R, W> {
    next: InvocationId,
    waiting: std::collections::HashMap<InvocationId, W>,
    transmits: std::collections::VecDeque<Transmit<C>>,
    replies: std::collections::VecDeque<(OpId, Result<R, SncError>)>,
    totals: Counts,
}

impl<C, R, W> Outbox<C, R, W> {
    fn new() -> Self {
        Outbox {
            next: 1,
            waiting: Default::default(),
            transmits: Default::default(),
            replies: Default::default(),
            totals: Counts::new(),
        }
    }

    /// A fresh id whose answer resumes `w`.
    fn expect(&mut self, w: W) -> InvocationId {
        let id = self.next;
        self.next += 1;
        self.waiting.insert(id, w);
        id
    }

    /// Emits `call`, counted once under `iface`; its answer resumes `w`.
    fn emit(&mut self, iface: &'static str, call: C, w: W) {
        count(&mut self.totals, iface);
        let id = self.expect(w);
        self.transmits.push_back(Transmit { id, iface, call });
    }

    /// What the answer to `id` resumes (nothing for an unknown or repeated id).
    fn answered(&mut self, id: InvocationId) -> Option<W> {
        self.waiting.remove(&id)
    }

    fn reply(&mut self, op: OpId, r: Result<R, SncError>) {
        self.replies.push_back((op, r));
    }
}

/// TrimSnc keeps at least one hop: a cut before the first is a release.
fn keeps_a_hop(keep: u32) -> Result<(), SncError> {
    if keep == 0 {
        return Err(SncError::invalid(
            "TrimSnc keeps at least one hop (release the SNC instead)",
        ));
    }
    Ok(())
}

/// One more invocation on `iface` in `counts`.
fn count(counts: &mut Counts, iface: &str) {
    *counts.entry(iface.to_string()).or_default() += 1;
}

/// Adds `more` into `counts`.
fn add(counts: &mut Counts, more: &Counts) {
    for (k, v) in more {
        *counts.entry(k.clone()).or_default() += v;
    }
}

/// Adds what a callee's answer reports into `counts`.
fn absorb(counts: &mut Counts, reply: &SncReply) {
    if let Some(m) = reply.invocations() {
        add(counts, m);
    }
}

/// What a callee answered to SetupSnc; any other answer is a broken callee.
fn set_up(a: SncResult) -> Result<SncSetUp, SncError> {
    match a? {
        SncReply::SetUp(s) => Ok(s),
        other => Err(unexpected("SetupSnc", &other)),
    }
}

fn unexpected(what: &str, got: &SncReply) -> SncError {
    SncError::internal(format!("{what} was answered with {got:?}"))
}
