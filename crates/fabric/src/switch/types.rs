//! The plain types of the switch-server operations (paper 000 §II-B; paper 001 §3.2):
//! the commands a connection manager sends ([`Reserve`], [`Unreserve`], [`Commit`],
//! [`Release`], [`BranchChange`], [`Modify`]), their replies, and what the switch lists
//! for audits (connections, reservations, port status and counters). Plain data, shared
//! by the core, the codecs and every shell.

use std::sync::Arc;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;

use crate::config::PortConfig;

/// The most branches one connection may have.
pub const MAX_BRANCHES: usize = 256;

/// The least peak (and sustainable) cell rate admitted, cells/s. UNI signalling carries
/// cell rates as whole cells per second, so one is the least a user can ask for; a rate
/// below it (1e-300) would be admitted as no bandwidth at all.
pub const MIN_CELL_RATE: f64 = 1.0;
/// The most identifiers one reservation may ask for.
pub const MAX_RESERVE: u32 = 65_536;

/// VC or VP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConnectionKind {
    /// A virtual channel: matches (port, VPI, VCI), rewrites both.
    #[default]
    Vc,
    /// A virtual path: matches (port, VPI), rewrites the VPI, keeps the VCI.
    Vp,
}

impl ConnectionKind {
    /// The kind an identifier names by the module's convention: VCI 0 is a whole VPI.
    pub const fn of_id(id: VcId) -> Self {
        if id.vci.0 == 0 {
            ConnectionKind::Vp
        } else {
            ConnectionKind::Vc
        }
    }
}

/// One output of a connection: a port and the identifier the cells leave with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Branch {
    /// Output port.
    pub port: PortId,
    /// Outgoing VPI/VCI (VCI 0 for a VP connection).
    pub id: VcId,
}

/// Phase 1: reserve output identifiers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reserve {
    /// Output port.
    pub port: PortId,
    /// How many, 1..=[`MAX_RESERVE`].
    pub count: u32,
    /// The VPI to reserve VCIs in (ignored when `vp`).
    pub vpi: u16,
    /// Reserve whole VPIs instead of VCIs.
    pub vp: bool,
    /// Restrict to this part of the port's VCI (or, with `vp`, VPI) range.
    pub within: Option<(u16, u16)>,
    /// The owner; only it may commit or unreserve these (shared: a manager puts its
    /// name on every command it sends).
    pub owner: Arc<str>,
}

/// Return reserved identifiers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Unreserve {
    /// Output port.
    pub port: PortId,
    /// The identifiers (VCI 0 names a reserved VPI).
    pub ids: Vec<VcId>,
    /// Their owner.
    pub owner: Arc<str>,
}

/// Phase 2: install a connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// VC or VP.
    pub kind: ConnectionKind,
    /// Input port.
    pub in_port: PortId,
    /// Incoming identifier (VCI 0 for VP).
    pub in_id: VcId,
    /// Outputs; one for point-to-point.
    pub branches: Vec<Branch>,
    /// The traffic contract admission control judges.
    pub traffic: TrafficDescriptor,
    /// Target cell loss ratio for the effective-bandwidth rule; 0 means the default.
    pub clr: f64,
    /// Buffer set aside on each branch's port, in cells.
    pub buffer_cells: u32,
    /// Owner of the reservations used.
    pub owner: Arc<str>,
    /// Piggybacked replenishment: reserve this many more on the first branch's port.
    pub replenish: u32,
    /// The caller's label for the connection.
    pub tag: String,
}

/// Remove a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Release {
    /// The connection.
    pub connection: u64,
    /// Return the output identifiers to the owner's reservations instead of the pool.
    pub keep_reserved: bool,
}

/// Add or drop one branch of a point-to-multipoint connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchChange {
    /// The connection.
    pub connection: u64,
    /// The branch.
    pub branch: Branch,
}

/// Change a connection's traffic contract in place (ReTINA's and UNI 4.0's connection
/// modification): admission control charges the new bandwidth on every branch's port
/// before it takes effect; the translation entry does not change, so no cell is lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modify {
    /// The connection.
    pub connection: u64,
    /// The new contract.
    pub traffic: TrafficDescriptor,
    /// Target loss for admission control (0 means the connection's current one).
    pub clr: f64,
}

/// One control command (the unit of [`Switch::execute`](super::Switch::execute)).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Phase 1.
    Reserve(Reserve),
    /// Give back reservations.
    Unreserve(Unreserve),
    /// Phase 2.
    Commit(Commit),
    /// Remove a connection.
    Release(Release),
    /// Add a leaf.
    AddBranch(BranchChange),
    /// Drop a leaf.
    DropBranch(BranchChange),
    /// Change the traffic contract.
    Modify(Modify),
}

/// The answer to a successful command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The identifiers reserved.
    Reserved(Vec<VcId>),
    /// Reservations returned.
    Unreserved,
    /// The new connection's id and the replenished identifiers.
    Committed {
        /// Switch-local connection id.
        connection: u64,
        /// Identifiers reserved by the piggybacked replenishment.
        replenished: Vec<VcId>,
    },
    /// Connection removed.
    Released,
    /// Branch added.
    BranchAdded,
    /// Branch dropped.
    BranchDropped,
    /// Contract changed.
    Modified,
}

/// How [`Switch::execute`](super::Switch::execute) treats a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Atomicity {
    /// Each command stands alone.
    #[default]
    ContinueOnError,
    /// The first failure undoes every earlier command; later ones are not run.
    AllOrNothing,
}

/// An installed connection, as listed for audits.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    /// Switch-local id (never reused while the switch runs).
    pub id: u64,
    /// VC or VP.
    pub kind: ConnectionKind,
    /// Input port.
    pub in_port: PortId,
    /// Incoming identifier.
    pub in_id: VcId,
    /// Outputs.
    pub branches: Vec<Branch>,
    /// Traffic contract.
    pub traffic: TrafficDescriptor,
    /// Target loss used by admission control.
    pub clr: f64,
    /// Bandwidth charged on each branch's port (cells/s).
    pub admitted: f64,
    /// Buffer set aside on each branch's port (cells).
    pub buffer_cells: u32,
    /// Owner name.
    pub owner: String,
    /// Caller's label.
    pub tag: String,
    /// Cells switched.
    pub cells: u64,
    /// Cells discarded at output queues.
    pub cells_discarded: u64,
}

/// A reservation, as listed for audits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Port.
    pub port: PortId,
    /// Identifier (VCI 0: a whole VPI).
    pub id: VcId,
    /// Owner name.
    pub owner: String,
}

/// Counters of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// Cells received.
    pub cells_in: u64,
    /// Cells taken off the output queue for transmission.
    pub cells_out: u64,
    /// Cells that matched no connection (including unassigned cells).
    pub cells_unknown: u64,
    /// Cells dropped by the HEC receiver.
    pub cells_hec_errors: u64,
    /// Headers corrected by the HEC receiver.
    pub cells_hec_corrected: u64,
    /// CLP = 1 cells discarded above the threshold.
    pub cells_discarded_clp1: u64,
    /// Cells discarded because the buffer was full.
    pub cells_discarded_full: u64,
    /// Datagrams the live data plane refused on this port: they came from an address
    /// that is not the port's peer (issue 24; see `live::dataplane`). Zero in the sans-IO
    /// core, which has no addresses; filled in by the live switch's Describe.
    pub datagrams_refused: u64,
    /// The whole cells those refused datagrams carried.
    pub cells_refused: u64,
    /// Cells that entered here and failed their connection's conformance test (usage
    /// parameter control: tagged CLP = 1 or discarded, as the switch polices).
    pub cells_policed: u64,
}

/// The state of one port, for Describe and Statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct PortStatus {
    /// Its configuration.
    pub config: PortConfig,
    /// Bandwidth admitted (cells/s).
    pub allocated: f64,
    /// Buffer set aside (cells).
    pub buffer_allocated: u32,
    /// Output identifiers reserved (phase 1).
    pub reserved: u32,
    /// Output identifiers committed.
    pub committed: u32,
    /// Counters.
    pub counters: PortCounters,
    /// Cells waiting in the output queue.
    pub queue_cells: u32,
}

/// What became of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellFate {
    /// Queued on this many output ports (some copies may have been discarded).
    Switched {
        /// Copies queued.
        queued: u16,
        /// Copies discarded at full or over-threshold queues.
        discarded: u16,
    },
    /// No connection matches its header.
    Unknown,
    /// The HEC receiver discarded it.
    HecError,
    /// The port does not exist.
    NoSuchPort,
    /// The usage parameter control discarded it (non-conforming; see `Policing`).
    Policed,
}
