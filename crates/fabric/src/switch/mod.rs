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
//!
//! # Layout
//! One `impl Switch` block per concern, each in its own file:
//! - this file: the [`Switch`] itself, its ports (identifier maps, HEC receiver, output
//!   queue) and the translation-table records the other files share;
//! - `types`: the plain request, reply and status types of the switch-server operations;
//! - `commands`: what each command does (validation, then the table and resource
//!   changes): Reserve, Unreserve, Commit, Release, AddBranch, DropBranch, Modify;
//! - `control`: batches and their atomicity, restore, and the audit views (ports,
//!   connections, reservations);
//! - `undo`: the undo log that makes an all-or-nothing batch exact;
//! - `cells`: the per-cell switching function and the output queues.

mod cells;
mod commands;
mod control;
mod ids;
mod types;
mod undo;

pub use types::{
    Atomicity, Branch, BranchChange, CellFate, Command, Commit, Connection, ConnectionKind,
    MAX_BRANCHES, MAX_RESERVE, MIN_CELL_RATE, Modify, PortCounters, PortStatus, Release, Reply,
    Reservation, Reserve, Unreserve,
};
pub use undo::UndoLog;

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_wire::cell::{CELL_LEN, HecReceiver};

use crate::config::{Interface, PortConfig, SwitchConfig};
use crate::error::FabricError;

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
    /// The connection's usage parameter control (`None`: a contract it cannot police,
    /// e.g. UBR, or a rate the GCRA refuses).
    police: Option<Police>,
    /// Cells found non-conforming at ingress (tagged or discarded).
    policed: u64,
}

/// What the usage parameter control does with a non-conforming cell (ITU-T I.371 §4.4,
/// TM 4.0 §4.5: the network may discard it, or tag it CLP = 1 so that it is the first
/// discarded under congestion). Only [`Switch::handle_cell_at`] polices (the live data
/// plane, which has a clock); [`Switch::handle_cell`] does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policing {
    /// No policing (the default of the sans-IO core).
    #[default]
    Off,
    /// A non-conforming cell goes on with CLP = 1.
    Tag,
    /// A non-conforming cell is discarded.
    Discard,
}

/// One connection's conformance test: GCRA(1/PCR, CDVT), and for VBR also
/// GCRA(1/SCR, BT + CDVT) with the burst tolerance of its MBS (TM 4.0 §4.4.1-2). A cell
/// conforms only if it conforms to both, and only then counts against either.
#[derive(Debug, Clone)]
struct Police {
    pcr: atmlab_core::gcra::Gcra,
    scr: Option<atmlab_core::gcra::Gcra>,
}

impl Police {
    fn for_contract(t: &TrafficDescriptor) -> Option<Police> {
        use atmlab_core::gcra::Gcra;
        use atmlab_core::traffic::ServiceClass;
        let cdvt = atmlab_core::time::Duration::from_picos(t.cdvt_ps);
        if t.class == ServiceClass::Ubr {
            // UBR has no rate to police (its PCR, if any, is a hint to the network).
            return None;
        }
        let pcr = Gcra::for_pcr(t.pcr.0, cdvt).ok()?;
        let scr = match t.class {
            ServiceClass::RtVbr | ServiceClass::NrtVbr if t.scr.0 < t.pcr.0 => {
                Some(Gcra::for_scr(t.scr.0, t.pcr.0, t.mbs.max(1), cdvt).ok()?)
            }
            _ => None,
        };
        Some(Police { pcr, scr })
    }

    /// Tests a cell arriving at `now`; counts it against the contract if it conforms.
    fn conforms(&mut self, now: atmlab_core::time::Instant) -> bool {
        let ok = self.pcr.conforms(now) && self.scr.as_ref().is_none_or(|g| g.conforms(now));
        if ok {
            self.pcr.handle_cell(now);
            if let Some(g) = self.scr.as_mut() {
                g.handle_cell(now);
            }
        }
        ok
    }
}

#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    kind: ConnectionKind,
    in_port: PortId,
    in_id: VcId,
    /// Inline up to two (a point-to-point connection's one branch allocates nothing).
    branches: SmallVec<[Branch; 2]>,
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
    /// Output VC identifiers in use.
    vc_ids: ids::VcIds,
    /// Whole VPIs held by VP connections or reservations.
    vp_ids: FxHashMap<u16, IdState>,
    /// Output VC identifiers held per VPI (a VPI with any cannot be taken whole).
    vcs_per_vpi: PerVpi<u32>,
    /// Used output VCIs per VPI as a bitmap (1,024 words for 65,536 VCIs), so a
    /// reservation finds free identifiers a word at a time instead of probing the hash
    /// map VCI by VCI (which, with a busy port, made Reserve the hot spot of the whole
    /// control plane).
    vc_bits: PerVpi<Option<Box<[u64; 1024]>>>,
    /// Next VCI to try per VPI, so reservations do not rescan the used prefix.
    cursor: PerVpi<Option<u16>>,
    reserved: u32,
    committed: u32,
    /// Input side: VP cross-connects on this port (counted, to skip the VP look-up).
    vp_inputs: u32,
    /// Input side: VC entries per VPI (a VP input needs its VPI free of them).
    vc_inputs_per_vpi: PerVpi<u32>,
    hec: HecReceiver,
    queue: VecDeque<[u8; CELL_LEN]>,
    counters: PortCounters,
}

/// Per-VPI state of a port, indexed by the VPI: a port uses a few low VPIs (most only
/// VPI 0), so a vector grown to the highest VPI written replaces a hash map whose
/// look-ups were paid on every commit and release. Reading a VPI never written gives
/// the default.
#[derive(Debug, Default)]
struct PerVpi<T>(Vec<T>);

impl<T: Default> PerVpi<T> {
    #[inline]
    fn get(&self, vpi: u16) -> Option<&T> {
        self.0.get(usize::from(vpi))
    }

    #[inline]
    fn at(&mut self, vpi: u16) -> &mut T {
        let i = usize::from(vpi);
        if i >= self.0.len() {
            self.0.resize_with(i + 1, T::default);
        }
        &mut self.0[i]
    }
}

impl PerVpi<u32> {
    /// The count at `vpi` (0 if never written).
    #[inline]
    fn count(&self, vpi: u16) -> u32 {
        self.get(vpi).copied().unwrap_or(0)
    }
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
    policing: Policing,
}

const NO_PORT: u16 = u16::MAX;

/// Up to this many owners, an owner is found by comparing names rather than hashing.
const OWNERS_SCANNED: usize = 8;

#[inline]
fn vc_key(port: PortId, id: VcId) -> u64 {
    (u64::from(port.0) << 32) | (u64::from(id.vpi.0) << 16) | u64::from(id.vci.0)
}

#[inline]
fn vp_key(port: PortId, vpi: u16) -> u32 {
    (u32::from(port.0) << 16) | u32::from(vpi)
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
                vc_ids: ids::VcIds::default(),
                vp_ids: FxHashMap::default(),
                vcs_per_vpi: PerVpi::default(),
                vc_bits: PerVpi::default(),
                cursor: PerVpi::default(),
                reserved: 0,
                committed: 0,
                vp_inputs: 0,
                vc_inputs_per_vpi: PerVpi::default(),
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
            policing: Policing::Off,
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
        if let Some(i) = self.existing_owner(owner) {
            return i;
        }
        let i = self.owners.len() as u32;
        self.owners.push(owner.to_string());
        self.owner_index.insert(owner.to_string(), i);
        i
    }

    fn existing_owner(&self, owner: &str) -> Option<u32> {
        // A switch serves a few managers: comparing their names is cheaper than hashing
        // one on every commit.
        if self.owners.len() <= OWNERS_SCANNED {
            return self
                .owners
                .iter()
                .position(|o| o == owner)
                .map(|i| i as u32);
        }
        self.owner_index.get(owner).copied()
    }
}
