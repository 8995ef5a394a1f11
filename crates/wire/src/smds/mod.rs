//! The SMDS Level 3 PDU (L3_PDU) of the SMDS Interface Protocol (Bellcore
//! TR-TSV-000772 and TR-TSV-000773; the IEEE 802.6 initial MAC PDU with SMDS's choices).
//!
//! ```text
//!  offset  size  field
//!   0       1    Reserved (0)
//!   1       1    BEtag: beginning-end tag, equal to the trailer's
//!   2       2    BAsize: octets from the Destination Address through the CRC32
//!   4       8    Destination Address (individual or group E.164, see [`crate::e164`])
//!  12       8    Source Address (individual)
//!  20       1    X+ HLPI (6) | PAD length (2)
//!  21       1    X+ QoS (4) | CIB (1) | HEL (3)
//!  22       2    X+ Bridging
//!  24      12    Header Extension (HEL = 3 words)
//!  36   <=9188   Info
//!   .     0-3    PAD (zeros, Info + PAD a multiple of 4)
//!   .     0/4    X+ CRC32 (present when CIB = 1)
//!   .       1    Reserved (0)
//!   .       1    BEtag
//!   .       2    Length (= BAsize)
//! ```
//!
//! The readings this module implements. The Bellcore and IEEE texts were not at hand
//! while it was written: the rules below are the author's reading of them, of RFC 1209
//! (IP over SMDS) and of published descriptions of the L3_PDU, and the points that rest
//! on less than that say so.
//!
//! - BAsize and Length both count the octets from the Destination Address up to and
//!   including the CRC32 (or the PAD when there is no CRC32): the whole PDU less the
//!   4-octet common header and the 4-octet trailer. SMDS sets them equal; the decoder
//!   demands BAsize = Length = the octets actually present.
//! - The header BEtag equals the trailer BEtag (it catches the loss of the end of one PDU
//!   and the start of the next).
//! - The PAD length field gives 0-3 octets so that Info + PAD is a multiple of 4.
//! - The X+ fields (HLPI, QoS, Bridging, CRC32) are carried across the network unchanged;
//!   SMDS gives them no meaning. The 4-bit QoS is 802.6's QOS_DELAY (3) and QOS_LOSS (1);
//!   it is kept as one number here. HLPI 1 is LLC (RFC 1209 for IP over SMDS).
//! - CIB = 1 says a CRC32 follows the PAD. The CRC32 covers the Destination Address
//!   through the end of the PAD (802.6: the MCP header, the header extension, Info and
//!   PAD), not the common header, not itself, not the trailer. It is the 802 generator
//!   sent most significant bit first, which is the AAL5 CRC-32 of [`crate::crc`]
//!   (CRC-32/BZIP2). The bit order is the author's reading of 802.6 (which transmits
//!   octets MSB first, as ATM does); no captured SMDS frame with a CRC32 was at hand to
//!   confirm it.
//! - HEL counts 32-bit words of Header Extension. IEEE 802.6 allows 0-5; SMDS fixes it at
//!   3 (12 octets), so the header is always 36 octets and the decoder rejects any other
//!   HEL.
//! - The Header Extension is a list of elements: Element Length (1 octet), Element Type
//!   (1), Element Value; a zero Element Length starts the HE PAD. That the Element Length
//!   counts its own octet and the Type octet as well as the Value is inferred from the
//!   version-1 extension `03 00 01` (length 3, type 0 = Version, value 1) that SMDS
//!   equipment sends. Type 1 is Carrier Selection. The PDU decoder keeps the 12 octets
//!   raw and does not check them (the service, not the framing, acts on them);
//!   [`HeElements`] walks them on demand.
//! - Reserved octets are sent as zero and ignored on receipt; so are the PAD octets
//!   (the CRC32, when present, covers them anyway).
//! - The Destination Address must be individual or group; the Source Address must be
//!   individual.
//!
//! [`L3Pdu`] is a zero-copy view (smoltcp style) and [`L3PduRepr`] the validated
//! representation, borrowing the Info field, with `parse` / `buffer_len` / `emit`.
//!
//! Panic contract: [`L3Pdu::new_checked`] rejects a buffer shorter than [`MIN_LEN`]
//! (header and trailer, no Info); after that no accessor panics, whatever the fields say
//! (the Info, PAD and CRC32 positions are clamped to the buffer). A view made with
//! [`L3Pdu::new_unchecked`] panics on a short buffer, as slice indexing does. The buffer
//! must end where the PDU ends, as the trailer is read from its last four octets.
//! [`L3PduRepr::parse`] never panics and never allocates.
//!
//! The files: `view.rs` holds the zero-copy [`L3Pdu`]; `repr.rs` the validated
//! [`L3PduRepr`]; `header_ext.rs` the walk over the header extension ([`HeElements`]).
//! This file keeps the constants and field offsets they share and re-exports every item,
//! so that a path is `atmlab_wire::smds::X` whichever file holds `X`.

mod header_ext;
mod repr;
#[cfg(test)]
mod tests;
mod view;

pub use header_ext::{HeElement, HeElements, he_version};
pub use repr::L3PduRepr;
pub use view::L3Pdu;

use crate::WireError;

/// Octets in the L3_PDU header (SMDS: HEL is always 3).
pub const HEADER_LEN: usize = 36;
/// Octets in the L3_PDU trailer.
pub const TRAILER_LEN: usize = 4;
/// The shortest L3_PDU: header and trailer, no Info, no CRC32.
pub const MIN_LEN: usize = HEADER_LEN + TRAILER_LEN;
/// The largest Info field SMDS carries.
pub const MAX_INFO: usize = 9188;
/// Octets in the header extension (HEL 3 words).
pub const HE_LEN: usize = 12;
/// The HEL value SMDS requires.
pub const SMDS_HEL: u8 = 3;
/// Octets in the CRC32 field when present.
pub const CRC32_LEN: usize = 4;
/// The octets BAsize and Length do not count: the common header and the trailer.
pub const UNCOUNTED_LEN: usize = 8;
/// The largest L3_PDU (9188 octets of Info with a CRC32).
pub const MAX_LEN: usize = HEADER_LEN + MAX_INFO + CRC32_LEN + TRAILER_LEN;
/// HLPI code point for LLC (IEEE 802.2), as IP over SMDS uses (RFC 1209).
pub const HLPI_LLC: u8 = 1;
/// Header extension element type: Version.
pub const HE_TYPE_VERSION: u8 = 0;
/// Header extension element type: Carrier Selection.
pub const HE_TYPE_CARRIER_SELECTION: u8 = 1;
/// The header extension of SMDS version 1: a Version element with value 1, then HE PAD.
pub const HE_VERSION_1: [u8; HE_LEN] = [3, HE_TYPE_VERSION, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];

const WHAT: &str = "SMDS L3_PDU";

const fn malformed(reason: &'static str) -> WireError {
    WireError::Malformed { what: WHAT, reason }
}

/// Field offsets within an L3_PDU.
pub mod field {
    use core::ops::Range;
    /// Reserved octet of the common header.
    pub const RESERVED: usize = 0;
    /// Beginning-end tag.
    pub const BETAG: usize = 1;
    /// Buffer allocation size.
    pub const BASIZE: Range<usize> = 2..4;
    /// Destination Address.
    pub const DA: Range<usize> = 4..12;
    /// Source Address.
    pub const SA: Range<usize> = 12..20;
    /// HLPI (high 6 bits) and PAD length (low 2 bits).
    pub const HLPI_PL: usize = 20;
    /// QoS (high 4 bits), CIB (bit 3), HEL (low 3 bits).
    pub const QOS_CIB_HEL: usize = 21;
    /// Bridging.
    pub const BRIDGING: Range<usize> = 22..24;
    /// Header extension.
    pub const HE: Range<usize> = 24..36;
    /// Where the Info field starts.
    pub const INFO: usize = 36;
    /// Where the CRC32 coverage starts (the Destination Address).
    pub const CRC_START: usize = 4;
    /// Trailer, counted back from the end: the reserved octet.
    pub const TRAILER_RESERVED_FROM_END: usize = 4;
    /// Trailer, counted back from the end: the BEtag.
    pub const TRAILER_BETAG_FROM_END: usize = 3;
    /// Trailer, counted back from the end: the Length field (2 octets).
    pub const LENGTH_FROM_END: usize = 2;
}

/// The PAD length for `info_len` octets of Info (0-3, to a multiple of 4).
pub const fn pad_len(info_len: usize) -> usize {
    info_len.wrapping_neg() & 3
}
