//! ATM adaptation layer type 3/4 (ITU-T I.363.3): the SAR-PDU, the common part
//! convergence sublayer PDU (CPCS-PDU), a segmenter and a MID-multiplexed reassembler.
//!
//! ```text
//!  SAR-PDU (48 octets, one cell payload; I.363.3, SAR sublayer PDU structure)
//!  octet 0:     ST (2) | SN (4) | MID[9:8] (2)
//!  octet 1:     MID[7:0]
//!  octets 2-45: SAR-PDU payload (44)
//!  octet 46:    LI (6) | CRC[9:8] (2)
//!  octet 47:    CRC[7:0]
//!
//!  CPCS-PDU (I.363.3, common part convergence sublayer PDU structure)
//!  CPI (1) | Btag (1) | BASize (2) | payload (<= 65535) | PAD (0-3) | AL (1) | Etag (1) | Length (2)
//! ```
//!
//! - ST, the segment type: BOM `10` (beginning), COM `00` (continuation), EOM `01` (end),
//!   SSM `11` (single-segment message).
//! - SN counts SAR-PDUs modulo 16, separately for each MID; MID multiplexes up to 1024
//!   CPCS-PDUs over one connection (connectionless service, SMDS).
//! - LI is the number of valid payload octets. The rules enforced here (the author's
//!   reading; the I.363.3 text was not at hand): 44 in a BOM or COM;
//!   4 to 44 in steps of 4 in an EOM, or 63 for the abort EOM that abandons a CPCS-PDU;
//!   8 to 44 in steps of 4 in an SSM. Steps of 4 because a CPCS-PDU is always a whole
//!   number of 32-bit words (the same rule IEEE 802.6 / SMDS state for their Level 2 PDU,
//!   which is this SAR-PDU); 8 in an SSM because that is the smallest CPCS-PDU (the
//!   header and trailer around an empty payload).
//! - CRC is the CRC-10 of [`crate::crc`] (generator 0x233, initial value 0) over the whole
//!   SAR-PDU. The field holds the remainder of the first 374 bits times x^10, so the
//!   remainder of all 384 bits is zero on receipt. That is the check Wireshark's
//!   `packet-atm.c` makes (C. M. Heard's CRC-10 over the 48 octets, expecting 0).
//!   [`sar_crc10`] builds the field from the catalogue CRC-10 of the first 46 octets; the
//!   tests cross-check it against a bitwise polynomial division.
//! - CPCS-PDU: CPI 0 means BASize and Length count octets (other values are undefined
//!   and rejected). Btag and Etag must be equal. BASize (buffer allocation size) equals
//!   Length in message mode and is at least Length in streaming mode. PAD makes the
//!   payload plus PAD a multiple of 4; AL is a zero octet that aligns the trailer.
//!   Length counts the payload only.
//!
//! [`SarPdu`] and [`CpcsPdu`] are zero-copy views (smoltcp style); [`SarPduRepr`] and
//! [`CpcsPduRepr`] the validated representations with `parse` / `emit`; [`Segmenter`]
//! cuts a CPCS-PDU into SAR-PDUs without allocating; [`Reassembler`] rebuilds CPCS-PDUs
//! from interleaved SAR-PDUs of many MIDs, sans-IO (the caller passes the time in).
//!
//! Panic contract: [`SarPdu::new_checked`] rejects a buffer shorter than [`SAR_PDU_LEN`]
//! and [`CpcsPdu::new_checked`] one shorter than [`CPCS_MIN_LEN`]; after that no
//! accessor panics, whatever the field values say (lengths are clamped to the buffer).
//! `new_unchecked` views panic on a short buffer, as slice indexing does. The decoders
//! (`parse`, [`Reassembler::handle_sar`]) never panic on any input. Parsing does not
//! allocate; the reassembler allocates only to grow its per-MID buffers, which it reuses.
//!
//! The files follow the sublayers: `sar.rs` holds the SAR-PDU view and representation,
//! its segment types and CRC-10; `cpcs.rs` the CPCS-PDU view and representation and the
//! PAD and length arithmetic; `segment.rs` the transmit side ([`Segmenter`],
//! [`Segments`]); `reassembly.rs` the receive side ([`Reassembler`] and what it reports).
//! This file keeps the constants and field offsets they share, and re-exports every item,
//! so that a path is `atmlab_wire::aal34::X` whichever file holds `X`.

mod cpcs;
mod reassembly;
mod sar;
mod segment;
#[cfg(test)]
mod tests;

pub use cpcs::{CpcsPdu, CpcsPduRepr, cpcs_pad_len, cpcs_pdu_len, sar_pdus_needed};
pub use reassembly::{Aal34Error, Aal34Frame, Aal34Outcome, Reassembler, ReassemblerConfig};
pub use sar::{SarPdu, SarPduRepr, SegmentType, sar_crc10};
pub use segment::{Segmenter, Segments};

/// Octets in a SAR-PDU (one cell payload).
pub const SAR_PDU_LEN: usize = 48;
/// Octets of SAR-PDU payload.
pub const SAR_PAYLOAD_LEN: usize = 44;
/// The LI of an abort EOM.
pub const LI_ABORT: u8 = 63;
/// The largest MID (10 bits).
pub const MAX_MID: u16 = 1023;
/// Octets in the CPCS-PDU header (CPI, Btag, BASize).
pub const CPCS_HEADER_LEN: usize = 4;
/// Octets in the CPCS-PDU trailer (AL, Etag, Length).
pub const CPCS_TRAILER_LEN: usize = 4;
/// The smallest CPCS-PDU: header and trailer around an empty payload.
pub const CPCS_MIN_LEN: usize = CPCS_HEADER_LEN + CPCS_TRAILER_LEN;
/// The largest CPCS-SDU (the Length field is 16 bits).
pub const MAX_CPCS_SDU: usize = 65535;

const SAR_WHAT: &str = "AAL3/4 SAR-PDU";
const CPCS_WHAT: &str = "AAL3/4 CPCS-PDU";
const REASM_WHAT: &str = "AAL3/4 reassembly";

/// Field offsets (octet ranges) within a SAR-PDU and a CPCS-PDU.
pub mod field {
    use core::ops::Range;
    /// SAR-PDU: ST, SN and MID.
    pub const SAR_HEADER: Range<usize> = 0..2;
    /// SAR-PDU: the 44-octet payload.
    pub const SAR_PAYLOAD: Range<usize> = 2..46;
    /// SAR-PDU: LI and CRC.
    pub const SAR_TRAILER: Range<usize> = 46..48;
    /// CPCS-PDU: common part indicator.
    pub const CPI: usize = 0;
    /// CPCS-PDU: beginning tag.
    pub const BTAG: usize = 1;
    /// CPCS-PDU: buffer allocation size.
    pub const BASIZE: Range<usize> = 2..4;
    /// CPCS-PDU: where the payload starts.
    pub const CPCS_PAYLOAD: usize = 4;
    /// CPCS-PDU trailer, counted back from the end: the alignment octet.
    pub const AL_FROM_END: usize = 4;
    /// CPCS-PDU trailer, counted back from the end: the end tag.
    pub const ETAG_FROM_END: usize = 3;
    /// CPCS-PDU trailer, counted back from the end: the Length field (2 octets).
    pub const LENGTH_FROM_END: usize = 2;
}
