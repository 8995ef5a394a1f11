//! The configuration of a switch: its ports and their resources (paper 000 §II-B: the
//! switch server "abstracts the switch as a set of ports with VPI/VCI spaces, bandwidth
//! and buffers").
//!
//! Plain data, validated by [`SwitchConfig::validate`]; the live shell reads it from TOML
//! and converts it here, so this crate's core knows no file format.

use atmlab_core::ids::{PortId, Vpi};
use atmlab_core::units::{BitRate, CellRate};

use crate::error::FabricError;

/// Which cell header a port carries (ITU-T I.361).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Interface {
    /// User-network interface: GFC and an 8-bit VPI (host ports).
    #[default]
    Uni,
    /// Network-node interface: a 12-bit VPI (trunks between switches).
    Nni,
}

impl Interface {
    /// The largest VPI the header can carry.
    pub const fn max_vpi(self) -> u16 {
        match self {
            Interface::Uni => Vpi::MAX_UNI,
            Interface::Nni => Vpi::MAX_NNI,
        }
    }
}

/// One port of a switch.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    /// The port's number.
    pub id: PortId,
    /// UNI or NNI header.
    pub interface: Interface,
    /// The link rate (e.g. 155.52 Mb/s).
    pub link_rate: BitRate,
    /// The bandwidth admission control may hand out; at most the link's cell rate.
    pub capacity: CellRate,
    /// The output buffer, in cells.
    pub buffer_cells: u32,
    /// Above this queue length, cells with CLP = 1 are discarded (partial buffer sharing).
    pub clp_threshold: u32,
    /// The VPIs this port may hand out, inclusive.
    pub vpi_range: (u16, u16),
    /// The VCIs this port may hand out, inclusive. VCIs 0-31 are reserved by ITU-T and
    /// the ATM Forum for signalling and OAM, so the default starts at 32.
    pub vci_range: (u16, u16),
}

impl PortConfig {
    /// A port with the defaults: UNI, capacity = link cell rate, 1,024 cells of buffer,
    /// CLP threshold at 3/4 of it, VPI 0-15, VCI 32-4095.
    pub fn new(id: u16, link_rate: BitRate) -> Self {
        PortConfig {
            id: PortId(id),
            interface: Interface::Uni,
            link_rate,
            capacity: link_rate.to_cell_rate(),
            buffer_cells: 1024,
            clp_threshold: 768,
            vpi_range: (0, 15),
            vci_range: (32, 4095),
        }
    }

    /// The same port with an NNI header.
    pub fn nni(mut self) -> Self {
        self.interface = Interface::Nni;
        self
    }
}

/// A whole switch.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchConfig {
    /// The switch's name (e.g. "s1"); the name service key is `switch/NAME`.
    pub name: String,
    /// Its ports, in any order, with distinct ids.
    pub ports: Vec<PortConfig>,
}

impl SwitchConfig {
    /// `n` ports numbered 0..n at `link_rate`, with the defaults of [`PortConfig::new`].
    pub fn uniform(name: &str, n: u16, link_rate: BitRate) -> Self {
        SwitchConfig {
            name: name.to_string(),
            ports: (0..n).map(|i| PortConfig::new(i, link_rate)).collect(),
        }
    }

    /// Checks that the configuration describes a switch; the error names the port and
    /// the field.
    pub fn validate(&self) -> Result<(), FabricError> {
        let bad = |p: &PortConfig, what: String| {
            Err(FabricError::Config(format!("port {}: {what}", p.id)))
        };
        if self.name.is_empty() {
            return Err(FabricError::Config("the switch has no name".into()));
        }
        if self.ports.is_empty() {
            return Err(FabricError::Config("the switch has no ports".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for p in &self.ports {
            if !seen.insert(p.id) {
                return bad(p, "appears twice".into());
            }
            if !(p.link_rate.bps().is_finite() && p.link_rate.bps() > 0.0) {
                return bad(
                    p,
                    format!("link rate {} b/s must be positive", p.link_rate.bps()),
                );
            }
            let link = p.link_rate.to_cell_rate().per_sec();
            let cap = p.capacity.per_sec();
            if !(cap.is_finite() && cap > 0.0 && cap <= link * (1.0 + 1e-9)) {
                return bad(
                    p,
                    format!("capacity {cap} cells/s must be in (0, {link}] (the link's cell rate)"),
                );
            }
            if p.buffer_cells == 0 {
                return bad(p, "buffer_cells must be at least 1".into());
            }
            if p.clp_threshold > p.buffer_cells {
                return bad(
                    p,
                    format!(
                        "clp_threshold {} exceeds buffer_cells {}",
                        p.clp_threshold, p.buffer_cells
                    ),
                );
            }
            let (lo, hi) = p.vpi_range;
            if lo > hi || hi > p.interface.max_vpi() {
                return bad(
                    p,
                    format!(
                        "VPI range {lo}..={hi} must be ordered and within 0..={} for {:?}",
                        p.interface.max_vpi(),
                        p.interface
                    ),
                );
            }
            let (lo, hi) = p.vci_range;
            if lo == 0 || lo > hi {
                return bad(
                    p,
                    format!("VCI range {lo}..={hi} must be ordered and exclude VCI 0 (unassigned)"),
                );
            }
        }
        Ok(())
    }
}
