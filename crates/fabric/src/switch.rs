//! The sans-IO switch core: ports, the translation table, xbind's two-phase identifier
//! allocation, admission control, and the per-cell switching function.
//!
//! Paper 000 §II-B describes the switch server's job as managing "the VPI/VCI space,
//! bandwidth and buffers" of a switch for connection managers that run elsewhere; paper
//! 001 §3 calls the same object ReTINA's ConnectionServer. This module is that object
//! without any I/O: the live shell (`crate::live`) feeds it requests and cells from
//! sockets, a simulator could feed it the same from an event queue.
//!
//! # Control
//! - Phase 1, [`Switch::reserve`]: set aside output identifiers on a port for an owner
//!   (a connection manager's VCI cache, filled ahead in bulk). [`Switch::unreserve`]
//!   gives them back.
//! - Phase 2, [`Switch::commit`]: install a translation-table entry (VC or VP,
//!   point-to-point or point-to-multipoint) on reserved or free identifiers, and admit its
//!   bandwidth ([`crate::cac`]) and buffer on every branch's port. A commit may piggyback
//!   the replenishment of the owner's cache.
//! - [`Switch::release`], [`Switch::add_branch`], [`Switch::drop_branch`].
//! - [`Switch::execute`]: a batch, all-or-nothing (undone exactly on the first failure)
//!   or continue-on-error.
//!
//! Every operation validates everything before it changes anything, so a refused request
//! leaves the switch as it was.
//!
//! # Cells
//! [`Switch::handle_cell`] checks the HEC (I.432.1 correction/detection), looks the cell
//! up by (port, VPI, VCI) (or (port, VPI) for a VP cross-connect), rewrites the header
//! for each branch and queues a copy on each branch's output port, discarding CLP = 1
//! cells above the port's threshold and every cell when the buffer is full.
//! [`Switch::poll_transmit`] / [`Switch::drain`] take cells off an output queue. Nothing
//! on this path allocates once a queue has grown to its working size.
//!
//! # Identifier conventions
//! A VP connection or reservation names its VPI with `vci = 0` (VCI 0 is the unassigned
//! cell and never a channel), so one `VcId` type serves both kinds.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_wire::cell::{CELL_LEN, HecOutcome, HecReceiver};
use atmlab_wire::crc;

use crate::cac;
use crate::config::{Interface, PortConfig, SwitchConfig};
use crate::error::FabricError;

/// The most branches one connection may have.
pub const MAX_BRANCHES: usize = 256;
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
    /// The owner; only it may commit or unreserve these.
    pub owner: String,
}

/// Return reserved identifiers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Unreserve {
    /// Output port.
    pub port: PortId,
    /// The identifiers (VCI 0 names a reserved VPI).
    pub ids: Vec<VcId>,
    /// Their owner.
    pub owner: String,
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
    pub owner: String,
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

/// One control command (the unit of [`Switch::execute`]).
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

/// How [`Switch::execute`] treats a failure.
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
}

/// State of an output identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdState {
    Reserved(u32),
    Committed(u64),
}

/// Precomputed rewrite for one branch: the per-cell path only ORs in PTI/CLP (VC) or
/// the VCI bits too (VP), then computes the HEC.
#[derive(Debug, Clone, Copy)]
struct Rewrite {
    port: u16,
    header: [u8; 4],
}

/// What the per-cell path reads, kept apart from the rest of a connection so that the
/// look-up touches one small, dense record (see docs/performance.md for the effect).
#[derive(Debug, Clone, Default)]
struct Hot {
    kind: ConnectionKind,
    rewrites: SmallVec<[Rewrite; 2]>,
    cells: u64,
    discarded: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    kind: ConnectionKind,
    in_port: PortId,
    in_id: VcId,
    branches: Vec<Branch>,
    traffic: TrafficDescriptor,
    clr: f64,
    admitted: f64,
    buffer_cells: u32,
    owner: u32,
    tag: String,
    cells: u64,
    discarded: u64,
}

#[derive(Debug)]
struct Port {
    config: PortConfig,
    allocated: f64,
    buffer_allocated: u32,
    /// Output identifiers in use: VCs keyed by `vpi << 16 | vci`.
    vc_ids: FxHashMap<u32, IdState>,
    /// Whole VPIs held by VP connections or reservations.
    vp_ids: FxHashMap<u16, IdState>,
    /// Output VC identifiers held per VPI (a VPI with any cannot be taken whole).
    vcs_per_vpi: FxHashMap<u16, u32>,
    /// Used output VCIs per VPI as a bitmap (1,024 words for 65,536 VCIs), so a
    /// reservation finds free identifiers a word at a time instead of probing the hash
    /// map VCI by VCI (which, with a busy port, made Reserve the hot spot of the whole
    /// control plane: 84% of a saturated run's samples).
    vc_bits: FxHashMap<u16, Box<[u64; 1024]>>,
    /// Next VCI to try per VPI, so reservations do not rescan the used prefix.
    cursor: FxHashMap<u16, u16>,
    reserved: u32,
    committed: u32,
    /// Input side: VP cross-connects on this port (counted, to skip the VP look-up).
    vp_inputs: u32,
    /// Input side: VC entries per VPI (a VP input needs its VPI free of them).
    vc_inputs_per_vpi: FxHashMap<u16, u32>,
    hec: HecReceiver,
    queue: VecDeque<[u8; CELL_LEN]>,
    counters: PortCounters,
}

/// The undo log of an all-or-nothing batch.
#[derive(Debug)]
enum Undo {
    /// Remove reservations made.
    Unreserve(usize, Vec<VcId>),
    /// Restore reservations removed.
    Rereserve(usize, Vec<VcId>, u32),
    /// Remove a connection made; restore each branch's identifier to its prior state.
    Uncommit(u64, Vec<Option<IdState>>),
    /// Restore a connection removed (with its branch identifiers' post-release states).
    Recommit(Box<Entry>),
    /// Remove a branch added (its identifier's prior state).
    UnaddBranch(u64, Branch, Option<IdState>),
    /// Restore a branch dropped, at its index.
    UndropBranch(u64, Branch, usize),
    /// Restore a connection's contract (traffic, clr, admitted) before a Modify.
    Unmodify(u64, TrafficDescriptor, f64, f64),
}

/// A software ATM switch, sans I/O.
#[derive(Debug)]
pub struct Switch {
    name: String,
    ports: Vec<Port>,
    /// Port id -> index into `ports`.
    port_index: Vec<u16>,
    /// Input look-up: `port << 32 | vpi << 16 | vci` -> slot.
    vc_table: FxHashMap<u64, u32>,
    /// Input look-up for VP cross-connects: `port << 16 | vpi` -> slot.
    vp_table: FxHashMap<u32, u32>,
    slots: Vec<Option<Entry>>,
    /// The per-cell part of each slot.
    hot: Vec<Hot>,
    free_slots: Vec<u32>,
    by_id: FxHashMap<u64, u32>,
    next_id: u64,
    owners: Vec<String>,
    owner_index: FxHashMap<String, u32>,
}

const NO_PORT: u16 = u16::MAX;

#[inline]
fn vc_key(port: PortId, id: VcId) -> u64 {
    (u64::from(port.0) << 32) | (u64::from(id.vpi.0) << 16) | u64::from(id.vci.0)
}

#[inline]
fn vp_key(port: PortId, vpi: u16) -> u32 {
    (u32::from(port.0) << 16) | u32::from(vpi)
}

#[inline]
fn out_key(id: VcId) -> u32 {
    (u32::from(id.vpi.0) << 16) | u32::from(id.vci.0)
}

/// The 4 header octets with VPI and VCI set and PTI/CLP zero (GFC zero at a UNI).
fn header_for(interface: Interface, id: VcId) -> [u8; 4] {
    let vpi = id.vpi.0;
    let vci = id.vci.0;
    let b0 = match interface {
        Interface::Uni => (vpi >> 4) as u8 & 0x0f,
        Interface::Nni => (vpi >> 4) as u8,
    };
    [
        b0,
        ((vpi as u8 & 0x0f) << 4) | (vci >> 12) as u8,
        (vci >> 4) as u8,
        (vci as u8 & 0x0f) << 4,
    ]
}

impl Switch {
    /// A switch from a validated configuration.
    pub fn new(config: &SwitchConfig) -> Result<Self, FabricError> {
        config.validate()?;
        let max_id = config.ports.iter().map(|p| p.id.0).max().unwrap_or(0);
        let mut port_index = vec![NO_PORT; usize::from(max_id) + 1];
        let mut ports = Vec::with_capacity(config.ports.len());
        for (i, p) in config.ports.iter().enumerate() {
            port_index[usize::from(p.id.0)] = i as u16;
            ports.push(Port {
                config: p.clone(),
                allocated: 0.0,
                buffer_allocated: 0,
                vc_ids: FxHashMap::default(),
                vp_ids: FxHashMap::default(),
                vcs_per_vpi: FxHashMap::default(),
                vc_bits: FxHashMap::default(),
                cursor: FxHashMap::default(),
                reserved: 0,
                committed: 0,
                vp_inputs: 0,
                vc_inputs_per_vpi: FxHashMap::default(),
                hec: HecReceiver::new(),
                queue: VecDeque::new(),
                counters: PortCounters::default(),
            });
        }
        Ok(Switch {
            name: config.name.clone(),
            ports,
            port_index,
            vc_table: FxHashMap::default(),
            vp_table: FxHashMap::default(),
            slots: Vec::new(),
            hot: Vec::new(),
            free_slots: Vec::new(),
            by_id: FxHashMap::default(),
            next_id: 1,
            owners: vec![String::new()],
            owner_index: FxHashMap::from_iter([(String::new(), 0)]),
        })
    }

    /// The switch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of connections installed.
    pub fn connection_count(&self) -> usize {
        self.by_id.len()
    }

    /// The ids of the ports, in configuration order.
    pub fn port_ids(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports.iter().map(|p| p.config.id)
    }

    #[inline]
    fn index(&self, port: PortId) -> Option<usize> {
        match self.port_index.get(usize::from(port.0)) {
            Some(&i) if i != NO_PORT => Some(usize::from(i)),
            _ => None,
        }
    }

    fn port_idx(&self, port: PortId) -> Result<usize, FabricError> {
        self.index(port).ok_or(FabricError::UnknownPort(port))
    }

    fn owner_id(&mut self, owner: &str) -> u32 {
        if let Some(&i) = self.owner_index.get(owner) {
            return i;
        }
        let i = self.owners.len() as u32;
        self.owners.push(owner.to_string());
        self.owner_index.insert(owner.to_string(), i);
        i
    }

    fn existing_owner(&self, owner: &str) -> Option<u32> {
        self.owner_index.get(owner).copied()
    }

    /// The state of a port.
    pub fn port_status(&self, port: PortId) -> Result<PortStatus, FabricError> {
        let p = &self.ports[self.port_idx(port)?];
        Ok(PortStatus {
            config: p.config.clone(),
            allocated: p.allocated,
            buffer_allocated: p.buffer_allocated,
            reserved: p.reserved,
            committed: p.committed,
            counters: PortCounters {
                cells_hec_corrected: p.hec.corrected,
                ..p.counters
            },
            queue_cells: p.queue.len() as u32,
        })
    }

    /// The state of every port.
    pub fn ports(&self) -> Vec<PortStatus> {
        self.port_ids()
            .map(|id| self.port_status(id).expect("listed port exists"))
            .collect()
    }

    fn entry_view(&self, slot: usize) -> Connection {
        let e = self.slots[slot].as_ref().expect("a live slot");
        let hot = &self.hot[slot];
        Connection {
            id: e.id,
            kind: e.kind,
            in_port: e.in_port,
            in_id: e.in_id,
            branches: e.branches.clone(),
            traffic: e.traffic,
            clr: e.clr,
            admitted: e.admitted,
            buffer_cells: e.buffer_cells,
            owner: self.owners[e.owner as usize].clone(),
            tag: e.tag.clone(),
            cells: hot.cells,
            cells_discarded: hot.discarded,
        }
    }

    /// One connection.
    pub fn connection(&self, id: u64) -> Result<Connection, FabricError> {
        let slot = *self
            .by_id
            .get(&id)
            .ok_or(FabricError::UnknownConnection(id))?;
        Ok(self.entry_view(slot as usize))
    }

    /// Every connection, by id.
    pub fn connections(&self) -> Vec<Connection> {
        let mut v: Vec<Connection> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .map(|(i, _)| self.entry_view(i))
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// Every outstanding reservation, by port and identifier.
    pub fn reservations(&self) -> Vec<Reservation> {
        let mut v = Vec::new();
        for p in &self.ports {
            for (&k, st) in &p.vc_ids {
                if let IdState::Reserved(o) = st {
                    v.push(Reservation {
                        port: p.config.id,
                        id: VcId::new((k >> 16) as u16, k as u16),
                        owner: self.owners[*o as usize].clone(),
                    });
                }
            }
            for (&vpi, st) in &p.vp_ids {
                if let IdState::Reserved(o) = st {
                    v.push(Reservation {
                        port: p.config.id,
                        id: VcId::new(vpi, 0),
                        owner: self.owners[*o as usize].clone(),
                    });
                }
            }
        }
        v.sort_by_key(|r| (r.port, r.id));
        v
    }

    // ----- validation helpers ------------------------------------------------------

    fn check_vpi(p: &Port, vpi: u32) -> Result<(), FabricError> {
        let (min, max) = p.config.vpi_range;
        if vpi < u32::from(min) || vpi > u32::from(max) {
            return Err(FabricError::VpiOutOfRange {
                port: p.config.id,
                vpi,
                min,
                max,
            });
        }
        Ok(())
    }

    fn check_vci(p: &Port, vci: u32) -> Result<(), FabricError> {
        let (min, max) = p.config.vci_range;
        if vci < u32::from(min) || vci > u32::from(max) {
            return Err(FabricError::VciOutOfRange {
                port: p.config.id,
                vci,
                min,
                max,
            });
        }
        Ok(())
    }

    fn check_id(p: &Port, kind: ConnectionKind, id: VcId) -> Result<(), FabricError> {
        Self::check_vpi(p, u32::from(id.vpi.0))?;
        match kind {
            ConnectionKind::Vc => Self::check_vci(p, u32::from(id.vci.0)),
            ConnectionKind::Vp if id.vci.0 != 0 => Err(FabricError::Invalid(
                "a VP connection names its VPIs with VCI 0",
            )),
            ConnectionKind::Vp => Ok(()),
        }
    }

    fn out_state(p: &Port, kind: ConnectionKind, id: VcId) -> Option<IdState> {
        match kind {
            ConnectionKind::Vc => p.vc_ids.get(&out_key(id)).copied(),
            ConnectionKind::Vp => p.vp_ids.get(&id.vpi.0).copied(),
        }
    }

    /// May `owner` use output `id` of `p` for a new branch?
    fn check_output(
        p: &Port,
        kind: ConnectionKind,
        id: VcId,
        owner: Option<u32>,
    ) -> Result<(), FabricError> {
        let port = p.config.id;
        match Self::out_state(p, kind, id) {
            Some(IdState::Committed(by)) => return Err(FabricError::OutputInUse { port, id, by }),
            Some(IdState::Reserved(o)) if Some(o) != owner => {
                return Err(FabricError::ReservedByOther { port, id });
            }
            Some(IdState::Reserved(_)) => return Ok(()),
            None => {}
        }
        // A free identifier: its path must not be taken the other way.
        match kind {
            ConnectionKind::Vc if p.vp_ids.contains_key(&id.vpi.0) => Err(FabricError::PathBusy {
                port,
                vpi: id.vpi.0,
                why: "held by a VP connection or reservation",
            }),
            ConnectionKind::Vp if p.vcs_per_vpi.get(&id.vpi.0).copied().unwrap_or(0) > 0 => {
                Err(FabricError::PathBusy {
                    port,
                    vpi: id.vpi.0,
                    why: "partly used by VCs",
                })
            }
            _ => Ok(()),
        }
    }

    /// Admission control on one port: `bw` cells/s and `buf` cells more must fit. The
    /// relative slack absorbs float sums of many small rates.
    fn check_room(p: &Port, bw: f64, buf: u32) -> Result<(), FabricError> {
        let available = (p.config.capacity.per_sec() - p.allocated).max(0.0);
        if bw > available * (1.0 + 1e-12) + 1e-9 {
            return Err(FabricError::InsufficientBandwidth {
                port: p.config.id,
                needed: bw,
                available,
            });
        }
        let free_buf = p.config.buffer_cells - p.buffer_allocated;
        if buf > free_buf {
            return Err(FabricError::InsufficientBuffer {
                port: p.config.id,
                needed: buf,
                available: free_buf,
            });
        }
        Ok(())
    }

    fn check_traffic(t: &TrafficDescriptor, clr: f64) -> Result<(), FabricError> {
        let pcr = t.pcr.per_sec();
        if !(pcr.is_finite() && pcr > 0.0) {
            return Err(FabricError::Invalid("the peak cell rate must be positive"));
        }
        if matches!(t.class, ServiceClass::RtVbr | ServiceClass::NrtVbr) {
            let scr = t.scr.per_sec();
            if !(scr.is_finite() && scr > 0.0 && scr <= pcr) {
                return Err(FabricError::Invalid(
                    "a VBR sustainable cell rate must be positive and at most the peak",
                ));
            }
            if t.mbs == 0 {
                return Err(FabricError::Invalid(
                    "a VBR maximum burst size must be at least 1",
                ));
            }
        }
        if !(clr.is_finite() && (0.0..1.0).contains(&clr)) {
            return Err(FabricError::Invalid(
                "the cell loss ratio must be in [0, 1)",
            ));
        }
        Ok(())
    }

    // ----- identifier state primitives (no validation) ------------------------------

    fn set_out(&mut self, pi: usize, kind: ConnectionKind, id: VcId, st: Option<IdState>) {
        let p = &mut self.ports[pi];
        let old = match kind {
            ConnectionKind::Vc => match st {
                Some(s) => p.vc_ids.insert(out_key(id), s),
                None => p.vc_ids.remove(&out_key(id)),
            },
            ConnectionKind::Vp => match st {
                Some(s) => p.vp_ids.insert(id.vpi.0, s),
                None => p.vp_ids.remove(&id.vpi.0),
            },
        };
        match old {
            Some(IdState::Reserved(_)) => p.reserved -= 1,
            Some(IdState::Committed(_)) => p.committed -= 1,
            None => {}
        }
        match st {
            Some(IdState::Reserved(_)) => p.reserved += 1,
            Some(IdState::Committed(_)) => p.committed += 1,
            None => {}
        }
        if kind == ConnectionKind::Vc {
            let delta = i32::from(st.is_some()) - i32::from(old.is_some());
            if delta != 0 {
                let bits = p
                    .vc_bits
                    .entry(id.vpi.0)
                    .or_insert_with(|| Box::new([0u64; 1024]));
                let (w, b) = (usize::from(id.vci.0 >> 6), id.vci.0 & 63);
                if delta > 0 {
                    bits[w] |= 1 << b;
                } else {
                    bits[w] &= !(1 << b);
                }
                let n = p.vcs_per_vpi.entry(id.vpi.0).or_insert(0);
                *n = n.wrapping_add_signed(delta);
                if *n == 0 {
                    p.vcs_per_vpi.remove(&id.vpi.0);
                }
            }
        }
    }

    // ----- phase 1 --------------------------------------------------------------------

    /// Phase 1: reserve `count` free output identifiers (all or none).
    pub fn reserve(&mut self, r: &Reserve) -> Result<Vec<VcId>, FabricError> {
        let pi = self.port_idx(r.port)?;
        if r.count == 0 || r.count > MAX_RESERVE {
            return Err(FabricError::Invalid(
                "a reservation asks for 1 to 65536 identifiers",
            ));
        }
        let ids = self.find_free(pi, r)?;
        let owner = self.owner_id(&r.owner);
        let kind = if r.vp {
            ConnectionKind::Vp
        } else {
            ConnectionKind::Vc
        };
        for &id in &ids {
            self.set_out(pi, kind, id, Some(IdState::Reserved(owner)));
        }
        if let (Some(last), false) = (ids.last(), r.vp) {
            self.ports[pi]
                .cursor
                .insert(r.vpi, last.vci.0.wrapping_add(1));
        }
        Ok(ids)
    }

    /// Finds `r.count` free identifiers for `r` without changing anything.
    fn find_free(&self, pi: usize, r: &Reserve) -> Result<Vec<VcId>, FabricError> {
        let p = &self.ports[pi];
        let port = p.config.id;
        let full = if r.vp {
            p.config.vpi_range
        } else {
            p.config.vci_range
        };
        let (lo, hi) = match r.within {
            None => full,
            Some((a, b)) => {
                if a > b {
                    return Err(FabricError::Invalid("the partition's range is reversed"));
                }
                if r.vp {
                    Self::check_vpi(p, u32::from(a))?;
                    Self::check_vpi(p, u32::from(b))?;
                } else {
                    Self::check_vci(p, u32::from(a))?;
                    Self::check_vci(p, u32::from(b))?;
                }
                (a, b)
            }
        };
        let want = r.count as usize;
        let mut ids = Vec::with_capacity(want);
        if r.vp {
            for vpi in lo..=hi {
                if !p.vp_ids.contains_key(&vpi) && !p.vcs_per_vpi.contains_key(&vpi) {
                    ids.push(VcId::new(vpi, 0));
                    if ids.len() == want {
                        return Ok(ids);
                    }
                }
            }
        } else {
            Self::check_vpi(p, u32::from(r.vpi))?;
            if p.vp_ids.contains_key(&r.vpi) {
                return Err(FabricError::PathBusy {
                    port,
                    vpi: r.vpi,
                    why: "held by a VP connection or reservation",
                });
            }
            let start = p.cursor.get(&r.vpi).copied().unwrap_or(lo).clamp(lo, hi);
            let bits = p.vc_bits.get(&r.vpi);
            let used =
                |vci: u16| bits.is_some_and(|b| b[usize::from(vci >> 6)] & (1 << (vci & 63)) != 0);
            // From the cursor to the top of the range, then from the bottom to the
            // cursor; whole words of used identifiers are skipped at once.
            for (a, b) in [(start, hi), (lo, start.saturating_sub(1).max(lo))] {
                if a > b {
                    continue;
                }
                let mut vci = u32::from(a);
                while vci <= u32::from(b) {
                    let v = vci as u16;
                    if v & 63 == 0
                        && u32::from(v) + 63 <= u32::from(b)
                        && bits.is_some_and(|x| x[usize::from(v >> 6)] == u64::MAX)
                    {
                        vci += 64;
                        continue;
                    }
                    if !used(v) {
                        ids.push(VcId::new(r.vpi, v));
                        if ids.len() == want {
                            return Ok(ids);
                        }
                    }
                    vci += 1;
                }
                if start == lo {
                    break;
                }
            }
        }
        Err(FabricError::NoFreeIdentifiers {
            port,
            wanted: r.count,
            free: ids.len() as u32,
        })
    }

    /// Returns reserved identifiers (all or none).
    pub fn unreserve(&mut self, u: &Unreserve) -> Result<(), FabricError> {
        let pi = self.port_idx(u.port)?;
        let owner = self.existing_owner(&u.owner);
        let p = &self.ports[pi];
        let mut seen = rustc_hash::FxHashSet::default();
        for &id in &u.ids {
            let kind = ConnectionKind::of_id(id);
            let mine = matches!(
                (Self::out_state(p, kind, id), owner),
                (Some(IdState::Reserved(o)), Some(w)) if o == w
            );
            if !mine || !seen.insert(id) {
                return Err(FabricError::NotReserved { port: u.port, id });
            }
        }
        for &id in &u.ids {
            let kind = ConnectionKind::of_id(id);
            self.set_out(pi, kind, id, None);
        }
        Ok(())
    }

    // ----- phase 2 --------------------------------------------------------------------

    /// Phase 2: install a connection and admit its resources; with `replenish`, also
    /// reserve up to that many more identifiers on the first branch's port (as many as
    /// are free: a short replenishment never fails the commit).
    pub fn commit(&mut self, c: &Commit) -> Result<(u64, Vec<VcId>), FabricError> {
        let (id, _) = self.commit_inner(c)?;
        let replenished = self.replenish(c);
        Ok((id, replenished))
    }

    fn replenish(&mut self, c: &Commit) -> Vec<VcId> {
        if c.replenish == 0 {
            return Vec::new();
        }
        let first = c.branches[0];
        let mut r = Reserve {
            port: first.port,
            count: c.replenish.min(MAX_RESERVE),
            vpi: first.id.vpi.0,
            vp: c.kind == ConnectionKind::Vp,
            within: None,
            owner: c.owner.clone(),
        };
        while r.count > 0 {
            match self.reserve(&r) {
                Ok(ids) => return ids,
                Err(FabricError::NoFreeIdentifiers { free, .. }) if free < r.count => {
                    r.count = free
                }
                Err(_) => break,
            }
        }
        Vec::new()
    }

    fn admitted_for(&self, c: &Commit, pi: usize) -> f64 {
        cac::effective_bandwidth(
            &c.traffic,
            c.buffer_cells,
            self.ports[pi].config.buffer_cells,
            c.clr,
        )
    }

    /// Validates and installs; returns the id and each branch identifier's prior state.
    fn commit_inner(&mut self, c: &Commit) -> Result<(u64, Vec<Option<IdState>>), FabricError> {
        if c.branches.is_empty() {
            return Err(FabricError::Invalid(
                "a connection needs at least one branch",
            ));
        }
        if c.branches.len() > MAX_BRANCHES {
            return Err(FabricError::Invalid(
                "a connection has at most 256 branches",
            ));
        }
        Self::check_traffic(&c.traffic, c.clr)?;
        let in_pi = self.port_idx(c.in_port)?;
        let inp = &self.ports[in_pi];
        Self::check_id(inp, c.kind, c.in_id)?;
        match c.kind {
            ConnectionKind::Vc => {
                if let Some(&s) = self.vp_table.get(&vp_key(c.in_port, c.in_id.vpi.0)) {
                    return Err(FabricError::InputInUse {
                        port: c.in_port,
                        id: c.in_id,
                        by: self.slots[s as usize].as_ref().expect("live").id,
                    });
                }
                if let Some(&s) = self.vc_table.get(&vc_key(c.in_port, c.in_id)) {
                    return Err(FabricError::InputInUse {
                        port: c.in_port,
                        id: c.in_id,
                        by: self.slots[s as usize].as_ref().expect("live").id,
                    });
                }
            }
            ConnectionKind::Vp => {
                if let Some(&s) = self.vp_table.get(&vp_key(c.in_port, c.in_id.vpi.0)) {
                    return Err(FabricError::InputInUse {
                        port: c.in_port,
                        id: c.in_id,
                        by: self.slots[s as usize].as_ref().expect("live").id,
                    });
                }
                if inp.vc_inputs_per_vpi.contains_key(&c.in_id.vpi.0) {
                    return Err(FabricError::PathBusy {
                        port: c.in_port,
                        vpi: c.in_id.vpi.0,
                        why: "partly used by VCs on input",
                    });
                }
            }
        }
        let owner = self.existing_owner(&c.owner);
        let mut need_bw: Vec<(usize, f64, u32)> = Vec::new();
        for (i, b) in c.branches.iter().enumerate() {
            let pi = self.port_idx(b.port)?;
            let p = &self.ports[pi];
            Self::check_id(p, c.kind, b.id)?;
            if c.branches[..i].contains(b) {
                return Err(FabricError::Invalid("a branch appears twice"));
            }
            Self::check_output(p, c.kind, b.id, owner)?;
            let bw = self.admitted_for(c, pi);
            match need_bw.iter_mut().find(|(q, _, _)| *q == pi) {
                Some(n) => {
                    n.1 += bw;
                    n.2 += c.buffer_cells;
                }
                None => need_bw.push((pi, bw, c.buffer_cells)),
            }
        }
        for &(pi, bw, buf) in &need_bw {
            Self::check_room(&self.ports[pi], bw, buf)?;
        }
        // Everything checked: install.
        let id = self.next_id;
        self.next_id += 1;
        let owner = self.owner_id(&c.owner);
        let prior: Vec<Option<IdState>> = c
            .branches
            .iter()
            .map(|b| {
                let pi = self.index(b.port).expect("checked");
                Self::out_state(&self.ports[pi], c.kind, b.id)
            })
            .collect();
        let admitted = self.admitted_for(c, self.index(c.branches[0].port).expect("checked"));
        let entry = Entry {
            id,
            kind: c.kind,
            in_port: c.in_port,
            in_id: c.in_id,
            branches: c.branches.clone(),
            traffic: c.traffic,
            clr: c.clr,
            admitted,
            buffer_cells: c.buffer_cells,
            owner,
            tag: c.tag.clone(),
            cells: 0,
            discarded: 0,
        };
        self.install(entry);
        Ok((id, prior))
    }

    /// Installs a validated entry: tables, identifier states, resources.
    fn install(&mut self, e: Entry) {
        let rewrites: SmallVec<[Rewrite; 2]> =
            e.branches.iter().map(|b| self.rewrite_for(b)).collect();
        for b in &e.branches {
            let pi = self.index(b.port).expect("validated");
            self.set_out(pi, e.kind, b.id, Some(IdState::Committed(e.id)));
            let p = &mut self.ports[pi];
            p.allocated += e.admitted;
            p.buffer_allocated += e.buffer_cells;
        }
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.hot.push(Hot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.hot[slot as usize] = Hot {
            kind: e.kind,
            rewrites,
            cells: e.cells,
            discarded: e.discarded,
        };
        let in_pi = self.index(e.in_port).expect("validated");
        match e.kind {
            ConnectionKind::Vc => {
                self.vc_table.insert(vc_key(e.in_port, e.in_id), slot);
                *self.ports[in_pi]
                    .vc_inputs_per_vpi
                    .entry(e.in_id.vpi.0)
                    .or_insert(0) += 1;
            }
            ConnectionKind::Vp => {
                self.vp_table.insert(vp_key(e.in_port, e.in_id.vpi.0), slot);
                self.ports[in_pi].vp_inputs += 1;
            }
        }
        self.by_id.insert(e.id, slot);
        self.slots[slot as usize] = Some(e);
    }

    fn rewrite_for(&self, b: &Branch) -> Rewrite {
        let pi = self.index(b.port).expect("validated");
        Rewrite {
            port: pi as u16,
            header: header_for(self.ports[pi].config.interface, b.id),
        }
    }

    /// Removes a connection from the tables and returns its resources; its output
    /// identifiers become free. Returns the entry.
    fn uninstall(&mut self, id: u64) -> Result<Entry, FabricError> {
        let slot = self
            .by_id
            .remove(&id)
            .ok_or(FabricError::UnknownConnection(id))?;
        let mut e = self.slots[slot as usize]
            .take()
            .expect("indexed slot is live");
        let hot = std::mem::take(&mut self.hot[slot as usize]);
        e.cells = hot.cells;
        e.discarded = hot.discarded;
        self.free_slots.push(slot);
        let in_pi = self.index(e.in_port).expect("installed");
        match e.kind {
            ConnectionKind::Vc => {
                self.vc_table.remove(&vc_key(e.in_port, e.in_id));
                let m = &mut self.ports[in_pi].vc_inputs_per_vpi;
                let n = m.get_mut(&e.in_id.vpi.0).expect("counted at install");
                *n -= 1;
                if *n == 0 {
                    m.remove(&e.in_id.vpi.0);
                }
            }
            ConnectionKind::Vp => {
                self.vp_table.remove(&vp_key(e.in_port, e.in_id.vpi.0));
                self.ports[in_pi].vp_inputs -= 1;
            }
        }
        for b in &e.branches {
            let pi = self.index(b.port).expect("installed");
            self.set_out(pi, e.kind, b.id, None);
            let p = &mut self.ports[pi];
            p.allocated = (p.allocated - e.admitted).max(0.0);
            p.buffer_allocated -= e.buffer_cells;
            if p.committed == 0 {
                // Float sums drift; a port that carries nothing has nothing admitted, so
                // an audit after release finds exactly zero.
                p.allocated = 0.0;
            }
        }
        Ok(e)
    }

    /// Removes a connection; its identifiers go back to the pool, or to the owner's
    /// reservations with `keep_reserved`.
    pub fn release(&mut self, r: &Release) -> Result<(), FabricError> {
        self.release_inner(r).map(|_| ())
    }

    fn release_inner(&mut self, r: &Release) -> Result<Entry, FabricError> {
        let e = self.uninstall(r.connection)?;
        if r.keep_reserved {
            for b in &e.branches {
                let pi = self.index(b.port).expect("installed");
                self.set_out(pi, e.kind, b.id, Some(IdState::Reserved(e.owner)));
            }
        }
        Ok(e)
    }

    /// Adds a branch (leaf) to a connection, admitting its bandwidth on the new port.
    pub fn add_branch(&mut self, ch: &BranchChange) -> Result<(), FabricError> {
        self.add_branch_inner(ch).map(|_| ())
    }

    fn add_branch_inner(&mut self, ch: &BranchChange) -> Result<Option<IdState>, FabricError> {
        let slot = *self
            .by_id
            .get(&ch.connection)
            .ok_or(FabricError::UnknownConnection(ch.connection))?;
        let e = self.slots[slot as usize].as_ref().expect("live");
        if e.branches.len() >= MAX_BRANCHES {
            return Err(FabricError::Invalid(
                "a connection has at most 256 branches",
            ));
        }
        if e.branches.contains(&ch.branch) {
            return Err(FabricError::Invalid(
                "the connection already has this branch",
            ));
        }
        let (kind, owner, admitted, buf) = (e.kind, e.owner, e.admitted, e.buffer_cells);
        let pi = self.port_idx(ch.branch.port)?;
        let p = &self.ports[pi];
        Self::check_id(p, kind, ch.branch.id)?;
        Self::check_output(p, kind, ch.branch.id, Some(owner))?;
        Self::check_room(p, admitted, buf)?;
        let prior = Self::out_state(p, kind, ch.branch.id);
        self.attach_branch(slot, ch.branch, None);
        Ok(prior)
    }

    fn attach_branch(&mut self, slot: u32, b: Branch, at: Option<usize>) {
        let rw = self.rewrite_for(&b);
        let pi = usize::from(rw.port);
        let e = self.slots[slot as usize].as_mut().expect("live");
        let at = at.unwrap_or(e.branches.len()).min(e.branches.len());
        e.branches.insert(at, b);
        self.hot[slot as usize].rewrites.insert(at, rw);
        let (kind, id, admitted, buf) = (e.kind, e.id, e.admitted, e.buffer_cells);
        self.set_out(pi, kind, b.id, Some(IdState::Committed(id)));
        let p = &mut self.ports[pi];
        p.allocated += admitted;
        p.buffer_allocated += buf;
    }

    /// Drops one branch; its identifier goes back to the pool. The last branch cannot be
    /// dropped: release the connection instead.
    pub fn drop_branch(&mut self, ch: &BranchChange) -> Result<(), FabricError> {
        self.drop_branch_inner(ch).map(|_| ())
    }

    fn drop_branch_inner(&mut self, ch: &BranchChange) -> Result<usize, FabricError> {
        let slot = *self
            .by_id
            .get(&ch.connection)
            .ok_or(FabricError::UnknownConnection(ch.connection))?;
        let e = self.slots[slot as usize].as_mut().expect("live");
        let at =
            e.branches
                .iter()
                .position(|b| *b == ch.branch)
                .ok_or(FabricError::UnknownBranch {
                    connection: ch.connection,
                    port: ch.branch.port,
                    id: ch.branch.id,
                })?;
        if e.branches.len() == 1 {
            return Err(FabricError::Invalid(
                "cannot drop the last branch; release the connection",
            ));
        }
        self.detach_branch(slot, at, None);
        Ok(at)
    }

    /// Removes branch `at` of the connection in `slot`, returns its bandwidth and buffer,
    /// and leaves its output identifier in state `after` (free, or back to a reservation
    /// when an all-or-nothing batch undoes an AddBranch).
    fn detach_branch(&mut self, slot: u32, at: usize, after: Option<IdState>) {
        let e = self.slots[slot as usize].as_mut().expect("live");
        let b = e.branches.remove(at);
        let rw = self.hot[slot as usize].rewrites.remove(at);
        let (kind, admitted, buf) = (e.kind, e.admitted, e.buffer_cells);
        let pi = usize::from(rw.port);
        self.set_out(pi, kind, b.id, after);
        let p = &mut self.ports[pi];
        p.allocated = (p.allocated - admitted).max(0.0);
        p.buffer_allocated -= buf;
        if p.committed == 0 {
            p.allocated = 0.0;
        }
    }

    /// Changes a connection's traffic contract. The new bandwidth is admitted on every
    /// port a branch leaves by (only an increase needs room); nothing changes when one
    /// refuses. Returns the old (traffic, clr, admitted), for an undo.
    pub fn modify(&mut self, m: &Modify) -> Result<(), FabricError> {
        self.modify_inner(m).map(|_| ())
    }

    fn modify_inner(&mut self, m: &Modify) -> Result<(TrafficDescriptor, f64, f64), FabricError> {
        let slot = *self
            .by_id
            .get(&m.connection)
            .ok_or(FabricError::UnknownConnection(m.connection))?;
        let e = self.slots[slot as usize].as_ref().expect("live");
        let clr = if m.clr > 0.0 { m.clr } else { e.clr };
        Self::check_traffic(&m.traffic, clr)?;
        let first = self.index(e.branches[0].port).expect("installed");
        let admitted = cac::effective_bandwidth(
            &m.traffic,
            e.buffer_cells,
            self.ports[first].config.buffer_cells,
            clr,
        );
        let old = (e.traffic, e.clr, e.admitted);
        // Each port is charged once per branch leaving by it (as at commit).
        let mut per_port: SmallVec<[(usize, u32); 4]> = SmallVec::new();
        for b in &e.branches {
            let pi = self.index(b.port).expect("installed");
            match per_port.iter_mut().find(|(q, _)| *q == pi) {
                Some(n) => n.1 += 1,
                None => per_port.push((pi, 1)),
            }
        }
        let delta = admitted - e.admitted;
        if delta > 0.0 {
            for &(pi, n) in &per_port {
                Self::check_room(&self.ports[pi], delta * f64::from(n), 0)?;
            }
        }
        for &(pi, n) in &per_port {
            let p = &mut self.ports[pi];
            p.allocated = (p.allocated + delta * f64::from(n)).max(0.0);
        }
        let e = self.slots[slot as usize].as_mut().expect("live");
        e.traffic = m.traffic;
        e.clr = clr;
        e.admitted = admitted;
        Ok(old)
    }

    fn unmodify(&mut self, conn: u64, traffic: TrafficDescriptor, clr: f64, admitted: f64) {
        let slot = self.by_id[&conn];
        let e = self.slots[slot as usize].as_mut().expect("live");
        let delta = admitted - e.admitted;
        e.traffic = traffic;
        e.clr = clr;
        e.admitted = admitted;
        let ports: SmallVec<[PortId; 4]> = e.branches.iter().map(|b| b.port).collect();
        for port in ports {
            let pi = self.index(port).expect("installed");
            let p = &mut self.ports[pi];
            p.allocated = (p.allocated + delta).max(0.0);
        }
    }

    // ----- batches ----------------------------------------------------------------------

    /// Runs one command.
    pub fn apply(&mut self, cmd: &Command) -> Result<Reply, FabricError> {
        self.apply_logged(cmd, None)
    }

    fn apply_logged(
        &mut self,
        cmd: &Command,
        log: Option<&mut Vec<Undo>>,
    ) -> Result<Reply, FabricError> {
        match cmd {
            Command::Reserve(r) => {
                let ids = self.reserve(r)?;
                if let Some(log) = log {
                    log.push(Undo::Unreserve(
                        self.index(r.port).expect("ok"),
                        ids.clone(),
                    ));
                }
                Ok(Reply::Reserved(ids))
            }
            Command::Unreserve(u) => {
                self.unreserve(u)?;
                if let Some(log) = log {
                    let owner = self.existing_owner(&u.owner).expect("it held reservations");
                    log.push(Undo::Rereserve(
                        self.index(u.port).expect("ok"),
                        u.ids.clone(),
                        owner,
                    ));
                }
                Ok(Reply::Unreserved)
            }
            Command::Commit(c) => {
                let (id, prior) = self.commit_inner(c)?;
                let replenished = self.replenish(c);
                if let Some(log) = log {
                    log.push(Undo::Uncommit(id, prior));
                    if !replenished.is_empty() {
                        let pi = self.index(c.branches[0].port).expect("ok");
                        log.push(Undo::Unreserve(pi, replenished.clone()));
                    }
                }
                Ok(Reply::Committed {
                    connection: id,
                    replenished,
                })
            }
            Command::Release(r) => {
                let e = self.release_inner(r)?;
                if let Some(log) = log {
                    log.push(Undo::Recommit(Box::new(e)));
                }
                Ok(Reply::Released)
            }
            Command::AddBranch(ch) => {
                let prior = self.add_branch_inner(ch)?;
                if let Some(log) = log {
                    log.push(Undo::UnaddBranch(ch.connection, ch.branch, prior));
                }
                Ok(Reply::BranchAdded)
            }
            Command::DropBranch(ch) => {
                let at = self.drop_branch_inner(ch)?;
                if let Some(log) = log {
                    log.push(Undo::UndropBranch(ch.connection, ch.branch, at));
                }
                Ok(Reply::BranchDropped)
            }
            Command::Modify(m) => {
                let (t, clr, admitted) = self.modify_inner(m)?;
                if let Some(log) = log {
                    log.push(Undo::Unmodify(m.connection, t, clr, admitted));
                }
                Ok(Reply::Modified)
            }
        }
    }

    fn undo(&mut self, u: Undo) {
        match u {
            Undo::Unreserve(pi, ids) => {
                for id in ids {
                    let kind = ConnectionKind::of_id(id);
                    self.set_out(pi, kind, id, None);
                }
            }
            Undo::Rereserve(pi, ids, owner) => {
                for id in ids {
                    let kind = ConnectionKind::of_id(id);
                    self.set_out(pi, kind, id, Some(IdState::Reserved(owner)));
                }
            }
            Undo::Uncommit(id, prior) => {
                let e = self.uninstall(id).expect("undoing a commit of this batch");
                for (b, st) in e.branches.iter().zip(prior) {
                    let pi = self.index(b.port).expect("installed");
                    self.set_out(pi, e.kind, b.id, st);
                }
                if self.next_id == id + 1 {
                    self.next_id = id;
                }
            }
            Undo::Recommit(e) => {
                // Its identifiers are free or reserved by its owner now; install()
                // marks them committed again.
                self.install(*e);
            }
            Undo::UnaddBranch(conn, b, prior) => {
                let slot = self.by_id[&conn];
                let e = self.slots[slot as usize].as_ref().expect("live");
                let at = e
                    .branches
                    .iter()
                    .position(|x| *x == b)
                    .expect("the branch this batch added");
                self.detach_branch(slot, at, prior);
            }
            Undo::UndropBranch(conn, b, at) => {
                let slot = self.by_id[&conn];
                self.attach_branch(slot, b, Some(at));
            }
            Undo::Unmodify(conn, t, clr, admitted) => self.unmodify(conn, t, clr, admitted),
        }
    }

    /// Runs a batch (xbind's message aggregation; P4Runtime's Write). With
    /// [`Atomicity::AllOrNothing`], the first failure undoes every earlier command of the
    /// batch exactly and the later ones report [`FabricError::Aborted`]; the switch is
    /// then as it was before the batch.
    pub fn execute(
        &mut self,
        cmds: &[Command],
        atomicity: Atomicity,
    ) -> Vec<Result<Reply, FabricError>> {
        self.execute_observed(cmds, atomicity, |_, _, _| {})
    }

    /// [`Switch::execute`], calling `observe(switch, command, reply)` right after each
    /// command succeeds, with the switch as that command left it (a journal or an event
    /// feed needs the state between commands: a batch may commit and release the same
    /// connection). Under [`Atomicity::AllOrNothing`] a batch that fails has been
    /// observed up to its failure and then undone: the caller must drop what it observed
    /// when any result is an error.
    pub fn execute_observed(
        &mut self,
        cmds: &[Command],
        atomicity: Atomicity,
        mut observe: impl FnMut(&Switch, &Command, &Reply),
    ) -> Vec<Result<Reply, FabricError>> {
        match atomicity {
            Atomicity::ContinueOnError => cmds
                .iter()
                .map(|c| {
                    let r = self.apply(c);
                    if let Ok(reply) = &r {
                        observe(self, c, reply);
                    }
                    r
                })
                .collect(),
            Atomicity::AllOrNothing => {
                let mut log = Vec::new();
                let mut out: Vec<Result<Reply, FabricError>> = Vec::with_capacity(cmds.len());
                for (i, c) in cmds.iter().enumerate() {
                    match self.apply_logged(c, Some(&mut log)) {
                        Ok(r) => {
                            observe(self, c, &r);
                            out.push(Ok(r));
                        }
                        Err(e) => {
                            while let Some(u) = log.pop() {
                                self.undo(u);
                            }
                            for r in out.iter_mut() {
                                *r = Err(FabricError::Aborted);
                            }
                            out.push(Err(e));
                            out.extend((i + 1..cmds.len()).map(|_| Err(FabricError::Aborted)));
                            return out;
                        }
                    }
                }
                out
            }
        }
    }

    /// Reinstalls a connection listed before (a switch server restoring its table after
    /// a restart). Validated like a commit; the id is kept, and later ids follow it.
    pub fn restore(&mut self, c: &Connection) -> Result<(), FabricError> {
        if self.by_id.contains_key(&c.id) {
            return Err(FabricError::Invalid("a connection with this id exists"));
        }
        let commit = Commit {
            kind: c.kind,
            in_port: c.in_port,
            in_id: c.in_id,
            branches: c.branches.clone(),
            traffic: c.traffic,
            clr: c.clr,
            buffer_cells: c.buffer_cells,
            owner: c.owner.clone(),
            replenish: 0,
            tag: c.tag.clone(),
        };
        let saved = self.next_id;
        self.next_id = c.id;
        let r = self.commit_inner(&commit);
        self.next_id = saved.max(c.id + 1);
        r.map(|_| ())
    }

    // ----- cells ------------------------------------------------------------------------

    /// The per-cell switching function: HEC check, look-up, header rewrite, and a copy
    /// queued on each branch's output port (CLP = 1 discarded above the threshold, every
    /// cell when the buffer is full). `cell` may be corrected in place by the HEC
    /// receiver.
    #[inline]
    pub fn handle_cell(&mut self, in_port: PortId, cell: &mut [u8; CELL_LEN]) -> CellFate {
        let Some(pi) = self.index(in_port) else {
            return CellFate::NoSuchPort;
        };
        let port = &mut self.ports[pi];
        port.counters.cells_in += 1;
        if port.hec.check(cell) == HecOutcome::Discard {
            port.counters.cells_hec_errors += 1;
            return CellFate::HecError;
        }
        let vpi = match port.config.interface {
            Interface::Uni => (u16::from(cell[0] & 0x0f) << 4) | u16::from(cell[1] >> 4),
            Interface::Nni => (u16::from(cell[0]) << 4) | u16::from(cell[1] >> 4),
        };
        let vci =
            (u16::from(cell[1] & 0x0f) << 12) | (u16::from(cell[2]) << 4) | u16::from(cell[3] >> 4);
        let has_vp = port.vp_inputs > 0;
        let slot = if has_vp {
            self.vp_table.get(&vp_key(in_port, vpi)).copied()
        } else {
            None
        };
        let slot = match slot {
            Some(s) => s,
            None => match self.vc_table.get(&vc_key(in_port, VcId::new(vpi, vci))) {
                Some(&s) => s,
                None => {
                    self.ports[pi].counters.cells_unknown += 1;
                    return CellFate::Unknown;
                }
            },
        };
        let e = &mut self.hot[slot as usize];
        e.cells += 1;
        let clp = cell[3] & 0x01 != 0;
        let (mut queued, mut discarded) = (0u16, 0u16);
        for rw in &e.rewrites {
            let mut h = rw.header;
            match e.kind {
                ConnectionKind::Vc => h[3] |= cell[3] & 0x0f,
                ConnectionKind::Vp => {
                    h[1] = (h[1] & 0xf0) | (cell[1] & 0x0f);
                    h[2] = cell[2];
                    h[3] = cell[3];
                }
            }
            let out = &mut self.ports[usize::from(rw.port)];
            let len = out.queue.len() as u32;
            if len >= out.config.buffer_cells {
                out.counters.cells_discarded_full += 1;
                discarded += 1;
                continue;
            }
            if clp && len >= out.config.clp_threshold {
                out.counters.cells_discarded_clp1 += 1;
                discarded += 1;
                continue;
            }
            // Copy the cell once, into its queue slot, and rewrite the header there.
            out.queue.push_back(*cell);
            let slot = out.queue.back_mut().expect("just pushed");
            slot[..4].copy_from_slice(&h);
            slot[4] = crc::hec(h);
            queued += 1;
        }
        e.discarded += u64::from(discarded);
        CellFate::Switched { queued, discarded }
    }

    /// Takes the next cell off a port's output queue.
    #[inline]
    pub fn poll_transmit(&mut self, port: PortId) -> Option<[u8; CELL_LEN]> {
        let pi = self.index(port)?;
        let p = &mut self.ports[pi];
        let c = p.queue.pop_front()?;
        p.counters.cells_out += 1;
        Some(c)
    }

    /// Appends up to `max` cells of a port's output queue to `out`; returns how many.
    pub fn drain(&mut self, port: PortId, out: &mut Vec<u8>, max: usize) -> usize {
        let Some(pi) = self.index(port) else { return 0 };
        let p = &mut self.ports[pi];
        let n = p.queue.len().min(max);
        if n == p.queue.len() {
            // The whole queue: at most two contiguous runs, copied in one go each.
            let (a, b) = p.queue.as_slices();
            out.extend_from_slice(a.as_flattened());
            out.extend_from_slice(b.as_flattened());
            p.queue.clear();
        } else {
            for c in p.queue.drain(..n) {
                out.extend_from_slice(&c);
            }
        }
        p.counters.cells_out += n as u64;
        n
    }

    /// Cells waiting on a port's output queue.
    pub fn queue_len(&self, port: PortId) -> usize {
        self.index(port).map_or(0, |pi| self.ports[pi].queue.len())
    }
}
