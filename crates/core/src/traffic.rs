//! Service classes and ATM traffic descriptors (ATM Forum TM 4.0 §2 and §3; ITU-T I.371).
//!
//! A connection's contract: its service class and the cell-level parameters that the
//! usage parameter control polices (PCR with CDVT; SCR with MBS for VBR).

use crate::units::CellRate;

/// The ATM service categories the papers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceClass {
    /// Constant bit rate: peak rate only.
    Cbr,
    /// Real-time variable bit rate.
    RtVbr,
    /// Non-real-time variable bit rate.
    NrtVbr,
    /// Unspecified bit rate: best effort, no guarantee.
    Ubr,
}

/// The cell-level traffic contract of one connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrafficDescriptor {
    /// Service class.
    pub class: ServiceClass,
    /// Peak cell rate.
    pub pcr: CellRate,
    /// Sustainable cell rate (VBR only; equals `pcr` for CBR).
    pub scr: CellRate,
    /// Maximum burst size in cells (VBR only).
    pub mbs: u32,
    /// Cell delay variation tolerance, in picoseconds.
    pub cdvt_ps: u64,
}

impl TrafficDescriptor {
    /// A CBR contract at `pcr`.
    pub fn cbr(pcr: CellRate) -> Self {
        TrafficDescriptor {
            class: ServiceClass::Cbr,
            pcr,
            scr: pcr,
            mbs: 1,
            cdvt_ps: 0,
        }
    }
}
