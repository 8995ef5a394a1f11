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

use crate::WireError;
use crate::crc;
use crate::e164::{ADDRESS_LEN, AddressType, E164Address};

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

/// A zero-copy view of an L3_PDU. The buffer must end where the PDU ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L3Pdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> L3Pdu<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> L3Pdu<T> {
        L3Pdu { buffer }
    }

    /// Wraps a buffer, checking it holds at least a header and a trailer.
    pub fn new_checked(buffer: T) -> Result<L3Pdu<T>, WireError> {
        let got = buffer.as_ref().len();
        if got < MIN_LEN {
            return Err(WireError::Truncated {
                what: WHAT,
                need: MIN_LEN,
                got,
            });
        }
        Ok(L3Pdu { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn at_end(&self, n: usize) -> usize {
        self.b().len() - n
    }

    /// The reserved octet of the common header.
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.b()[field::RESERVED]
    }

    /// The header BEtag.
    #[inline]
    pub fn betag(&self) -> u8 {
        self.b()[field::BETAG]
    }

    /// BAsize.
    #[inline]
    pub fn basize(&self) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[2], b[3]])
    }

    /// The Destination Address octets.
    #[inline]
    pub fn destination(&self) -> [u8; ADDRESS_LEN] {
        let mut a = [0u8; ADDRESS_LEN];
        a.copy_from_slice(&self.b()[field::DA]);
        a
    }

    /// The Source Address octets.
    #[inline]
    pub fn source(&self) -> [u8; ADDRESS_LEN] {
        let mut a = [0u8; ADDRESS_LEN];
        a.copy_from_slice(&self.b()[field::SA]);
        a
    }

    /// The higher layer protocol identifier (6 bits).
    #[inline]
    pub fn hlpi(&self) -> u8 {
        self.b()[field::HLPI_PL] >> 2
    }

    /// The PAD length (0-3).
    #[inline]
    pub fn pad_len(&self) -> u8 {
        self.b()[field::HLPI_PL] & 0x03
    }

    /// The QoS field (4 bits).
    #[inline]
    pub fn qos(&self) -> u8 {
        self.b()[field::QOS_CIB_HEL] >> 4
    }

    /// The CRC32 indicator bit: true when a CRC32 follows the PAD.
    #[inline]
    pub fn cib(&self) -> bool {
        self.b()[field::QOS_CIB_HEL] & 0x08 != 0
    }

    /// The header extension length in 32-bit words (3 bits).
    #[inline]
    pub fn hel(&self) -> u8 {
        self.b()[field::QOS_CIB_HEL] & 0x07
    }

    /// The Bridging field.
    #[inline]
    pub fn bridging(&self) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[22], b[23]])
    }

    /// The 12 header extension octets.
    #[inline]
    pub fn header_extension(&self) -> &[u8] {
        &self.b()[field::HE]
    }

    /// Where the body (Info, PAD, CRC32) ends: the start of the trailer.
    fn body_end(&self) -> usize {
        self.at_end(TRAILER_LEN)
    }

    /// Where the CRC32 would start (the trailer start when CIB is clear), clamped.
    fn crc_start(&self) -> usize {
        let crc_len = if self.cib() { CRC32_LEN } else { 0 };
        self.body_end().saturating_sub(crc_len).max(field::INFO)
    }

    /// Where Info ends, as PAD length and CIB place it, clamped to the buffer.
    fn info_end(&self) -> usize {
        self.crc_start()
            .saturating_sub(usize::from(self.pad_len()))
            .max(field::INFO)
    }

    /// The Info field as PAD length and CIB delimit it (empty if they overrun the body).
    #[inline]
    pub fn info(&self) -> &[u8] {
        &self.b()[field::INFO..self.info_end()]
    }

    /// The PAD octets.
    #[inline]
    pub fn pad(&self) -> &[u8] {
        &self.b()[self.info_end()..self.crc_start()]
    }

    /// The CRC32 field, when CIB says there is one and the body can hold it.
    #[inline]
    pub fn crc32(&self) -> Option<u32> {
        if !self.cib() {
            return None;
        }
        let b = self.b().get(field::INFO..self.body_end())?;
        let c = b.last_chunk::<CRC32_LEN>()?;
        Some(u32::from_be_bytes(*c))
    }

    /// The CRC32 of the Destination Address through the end of the PAD.
    #[inline]
    pub fn computed_crc32(&self) -> u32 {
        crc::crc32(&self.b()[field::CRC_START..self.crc_start()])
    }

    /// The reserved octet of the trailer.
    #[inline]
    pub fn trailer_reserved(&self) -> u8 {
        self.b()[self.at_end(field::TRAILER_RESERVED_FROM_END)]
    }

    /// The trailer BEtag.
    #[inline]
    pub fn trailer_betag(&self) -> u8 {
        self.b()[self.at_end(field::TRAILER_BETAG_FROM_END)]
    }

    /// The Length field.
    #[inline]
    pub fn length(&self) -> u16 {
        let b = self.b();
        let i = self.at_end(field::LENGTH_FROM_END);
        u16::from_be_bytes([b[i], b[i + 1]])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> L3Pdu<&'a T> {
    /// The buffer with the lifetime of the borrow it was made from, so that a
    /// representation parsed from this view may outlive the view.
    fn data_a(&self) -> &'a [u8] {
        let b: &'a T = self.buffer;
        b.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> L3Pdu<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the reserved octet of the common header.
    #[inline]
    pub fn set_reserved(&mut self, v: u8) {
        self.bm()[field::RESERVED] = v;
    }

    /// Sets the header BEtag.
    #[inline]
    pub fn set_betag(&mut self, v: u8) {
        self.bm()[field::BETAG] = v;
    }

    /// Sets BAsize.
    #[inline]
    pub fn set_basize(&mut self, v: u16) {
        self.bm()[field::BASIZE].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the Destination Address octets (e.g. [`E164Address::to_bytes`]).
    #[inline]
    pub fn set_destination(&mut self, a: [u8; ADDRESS_LEN]) {
        self.bm()[field::DA].copy_from_slice(&a);
    }

    /// Sets the Source Address octets.
    #[inline]
    pub fn set_source(&mut self, a: [u8; ADDRESS_LEN]) {
        self.bm()[field::SA].copy_from_slice(&a);
    }

    /// Sets the HLPI; only the low 6 bits are used.
    #[inline]
    pub fn set_hlpi(&mut self, v: u8) {
        let b = self.bm();
        b[field::HLPI_PL] = (b[field::HLPI_PL] & 0x03) | (v << 2);
    }

    /// Sets the PAD length; only the low 2 bits are used.
    #[inline]
    pub fn set_pad_len(&mut self, v: u8) {
        let b = self.bm();
        b[field::HLPI_PL] = (b[field::HLPI_PL] & 0xfc) | (v & 0x03);
    }

    /// Sets the QoS field; only the low 4 bits are used.
    #[inline]
    pub fn set_qos(&mut self, v: u8) {
        let b = self.bm();
        b[field::QOS_CIB_HEL] = (b[field::QOS_CIB_HEL] & 0x0f) | (v << 4);
    }

    /// Sets the CRC32 indicator bit.
    #[inline]
    pub fn set_cib(&mut self, v: bool) {
        let b = self.bm();
        b[field::QOS_CIB_HEL] = (b[field::QOS_CIB_HEL] & !0x08) | (u8::from(v) << 3);
    }

    /// Sets the header extension length; only the low 3 bits are used.
    #[inline]
    pub fn set_hel(&mut self, v: u8) {
        let b = self.bm();
        b[field::QOS_CIB_HEL] = (b[field::QOS_CIB_HEL] & 0xf8) | (v & 0x07);
    }

    /// Sets the Bridging field.
    #[inline]
    pub fn set_bridging(&mut self, v: u16) {
        self.bm()[field::BRIDGING].copy_from_slice(&v.to_be_bytes());
    }

    /// The 12 header extension octets, writable.
    #[inline]
    pub fn header_extension_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::HE]
    }

    /// The Info field as the current PAD length and CIB delimit it, writable (set those
    /// first).
    #[inline]
    pub fn info_mut(&mut self) -> &mut [u8] {
        let end = self.info_end();
        &mut self.bm()[field::INFO..end]
    }

    /// The PAD octets, writable.
    #[inline]
    pub fn pad_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.info_end(), self.crc_start());
        &mut self.bm()[start..end]
    }

    /// Writes `v` into the four octets before the trailer, where the CRC32 goes when CIB
    /// is set (does nothing if the body is shorter than four octets).
    #[inline]
    pub fn set_crc32(&mut self, v: u32) {
        let end = self.body_end();
        if let Some(c) = self
            .bm()
            .get_mut(field::INFO..end)
            .and_then(|b| b.last_chunk_mut::<CRC32_LEN>())
        {
            *c = v.to_be_bytes();
        }
    }

    /// Computes the CRC32 over the Destination Address through the PAD and writes it
    /// (meaningful only with CIB set).
    #[inline]
    pub fn fill_crc32(&mut self) {
        let c = self.computed_crc32();
        self.set_crc32(c);
    }

    /// Sets the reserved octet of the trailer.
    #[inline]
    pub fn set_trailer_reserved(&mut self, v: u8) {
        let i = self.at_end(field::TRAILER_RESERVED_FROM_END);
        self.bm()[i] = v;
    }

    /// Sets the trailer BEtag.
    #[inline]
    pub fn set_trailer_betag(&mut self, v: u8) {
        let i = self.at_end(field::TRAILER_BETAG_FROM_END);
        self.bm()[i] = v;
    }

    /// Sets the Length field.
    #[inline]
    pub fn set_length(&mut self, v: u16) {
        let i = self.at_end(field::LENGTH_FROM_END);
        self.bm()[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }
}

/// One element of a header extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeElement<'a> {
    /// The Element Type ([`HE_TYPE_VERSION`], [`HE_TYPE_CARRIER_SELECTION`], ...).
    pub element_type: u8,
    /// The Element Value.
    pub value: &'a [u8],
}

/// The elements of a header extension, in order, up to the HE PAD (a zero Element
/// Length) or the end. A malformed element ends the walk with one `Err`.
#[derive(Debug, Clone)]
pub struct HeElements<'a> {
    rest: &'a [u8],
}

impl<'a> HeElements<'a> {
    /// Walks the elements of `he` (normally the 12 header extension octets).
    pub fn new(he: &'a [u8]) -> Self {
        HeElements { rest: he }
    }
}

impl<'a> Iterator for HeElements<'a> {
    type Item = Result<HeElement<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let len = usize::from(*self.rest.first()?);
        if len == 0 {
            // HE PAD: the rest carries no elements.
            self.rest = &[];
            return None;
        }
        let elem = match self.rest.get(..len) {
            Some(e) if len >= 2 => e,
            _ => {
                self.rest = &[];
                return Some(Err(WireError::Malformed {
                    what: "SMDS header extension",
                    reason: "element length below 2 or past the end of the extension",
                }));
            }
        };
        self.rest = &self.rest[len..];
        Some(Ok(HeElement {
            element_type: elem[1],
            value: &elem[2..],
        }))
    }
}

/// The SMDS version a header extension announces: the one-octet value of its first
/// Version element, if there is one before any malformed element.
pub fn he_version(he: &[u8]) -> Option<u8> {
    HeElements::new(he)
        .map_while(Result::ok)
        .find(|e| e.element_type == HE_TYPE_VERSION)
        .and_then(|e| match e.value {
            [v] => Some(*v),
            _ => None,
        })
}

/// A validated L3_PDU. BAsize, Length, PAD length and HEL are derived, not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L3PduRepr<'a> {
    /// The BEtag of header and trailer.
    pub betag: u8,
    /// Destination: individual or group.
    pub destination: E164Address,
    /// Source: individual.
    pub source: E164Address,
    /// Higher layer protocol identifier (0-63; [`HLPI_LLC`] for LLC).
    pub hlpi: u8,
    /// QoS (0-15), carried unchanged.
    pub qos: u8,
    /// Whether a CRC32 is carried (the CIB bit).
    pub crc32: bool,
    /// Bridging, carried unchanged.
    pub bridging: u16,
    /// The 12 header extension octets, raw (see [`HeElements`]).
    pub header_extension: [u8; HE_LEN],
    /// The Info field (at most [`MAX_INFO`] octets).
    pub info: &'a [u8],
}

impl<'a> L3PduRepr<'a> {
    /// Parses a whole L3_PDU. The checks, in order: the length covers header and trailer;
    /// HEL is 3; the two BEtags agree; Length and BAsize both equal the octets present
    /// from the Destination Address on; Info + PAD is a multiple of 4 and holds the PAD;
    /// Info is at most 9188 octets; the CRC32 matches when CIB is set; the addresses are
    /// valid, the destination individual or group and the source individual.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(pdu: &L3Pdu<&'a T>) -> Result<L3PduRepr<'a>, WireError> {
        let bytes = pdu.data_a();
        let v = L3Pdu::new_checked(bytes)?;
        if v.hel() != SMDS_HEL {
            return Err(malformed(
                "HEL is not 3 (SMDS carries a 12-octet header extension)",
            ));
        }
        if v.betag() != v.trailer_betag() {
            return Err(WireError::TagMismatch {
                what: WHAT,
                btag: v.betag(),
                etag: v.trailer_betag(),
            });
        }
        let actual = bytes.len() - UNCOUNTED_LEN;
        if usize::from(v.length()) != actual {
            return Err(WireError::Length {
                what: WHAT,
                field: v.length().into(),
                actual,
            });
        }
        if usize::from(v.basize()) != actual {
            return Err(WireError::Length {
                what: "SMDS L3_PDU BAsize",
                field: v.basize().into(),
                actual,
            });
        }
        // Info + PAD + CRC32: what follows the 36-octet header.
        let body = bytes.len() - MIN_LEN;
        let crc_len = if v.cib() { CRC32_LEN } else { 0 };
        let Some(info_pad) = body.checked_sub(crc_len) else {
            return Err(malformed("CIB set but no room for the CRC32"));
        };
        if info_pad % 4 != 0 {
            return Err(malformed("Info + PAD is not a multiple of 4 octets"));
        }
        let Some(info_len) = info_pad.checked_sub(usize::from(v.pad_len())) else {
            return Err(malformed("PAD length exceeds Info + PAD"));
        };
        if info_len > MAX_INFO {
            return Err(WireError::FieldRange {
                field: "SMDS Info length",
                value: info_len as u64,
                max: MAX_INFO as u64,
            });
        }
        if let Some(received) = v.crc32() {
            let computed = v.computed_crc32();
            if received != computed {
                return Err(WireError::Crc {
                    what: WHAT,
                    received,
                    computed,
                });
            }
        }
        let destination = E164Address::from_bytes(v.destination())?;
        if let AddressType::Unknown(_) = destination.address_type() {
            return Err(malformed(
                "destination address type is neither individual nor group",
            ));
        }
        let source = E164Address::from_bytes(v.source())?;
        if !source.is_individual() {
            return Err(malformed("source address is not an individual address"));
        }
        let mut header_extension = [0u8; HE_LEN];
        header_extension.copy_from_slice(v.header_extension());
        Ok(L3PduRepr {
            betag: v.betag(),
            destination,
            source,
            hlpi: v.hlpi(),
            qos: v.qos(),
            crc32: v.cib(),
            bridging: v.bridging(),
            header_extension,
            info: &bytes[field::INFO..field::INFO + info_len],
        })
    }

    /// The header extension elements.
    pub fn he_elements(&self) -> HeElements<'_> {
        HeElements::new(&self.header_extension)
    }

    /// The SMDS version the header extension announces (see [`he_version`]).
    pub fn version(&self) -> Option<u8> {
        he_version(&self.header_extension)
    }

    /// Checks every field fits its bits and the address and size rules hold.
    pub fn check(&self) -> Result<(), WireError> {
        if self.info.len() > MAX_INFO {
            return Err(WireError::FieldRange {
                field: "SMDS Info length",
                value: self.info.len() as u64,
                max: MAX_INFO as u64,
            });
        }
        if self.hlpi > 0x3f {
            return Err(WireError::FieldRange {
                field: "SMDS HLPI",
                value: self.hlpi.into(),
                max: 0x3f,
            });
        }
        if self.qos > 0x0f {
            return Err(WireError::FieldRange {
                field: "SMDS QoS",
                value: self.qos.into(),
                max: 0x0f,
            });
        }
        if let AddressType::Unknown(_) = self.destination.address_type() {
            return Err(malformed(
                "destination address type is neither individual nor group",
            ));
        }
        if !self.source.is_individual() {
            return Err(malformed("source address is not an individual address"));
        }
        Ok(())
    }

    /// The value of BAsize and Length: octets from the Destination Address through the
    /// CRC32.
    pub const fn basize(&self) -> usize {
        self.buffer_len() - UNCOUNTED_LEN
    }

    /// Octets [`L3PduRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        let crc_len = if self.crc32 { CRC32_LEN } else { 0 };
        MIN_LEN + self.info.len() + pad_len(self.info.len()) + crc_len
    }

    /// Writes the PDU into the first [`L3PduRepr::buffer_len`] octets of `buf`, after
    /// checking the fields: reserved octets and PAD zero, PAD length, HEL 3, BAsize,
    /// Length and (with `crc32`) the CRC32 computed. Returns the octets written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let need = self.buffer_len();
        let got = buf.len();
        let Some(out) = buf.get_mut(..need) else {
            return Err(WireError::BufferTooSmall {
                what: WHAT,
                need,
                got,
            });
        };
        let n = self.info.len();
        let pad = pad_len(n);
        // Checked above: Info is at most 9188 octets, so BAsize fits 16 bits.
        let basize = self.basize() as u16;
        let mut v = L3Pdu::new_unchecked(out);
        v.set_reserved(0);
        v.set_betag(self.betag);
        v.set_basize(basize);
        v.set_destination(self.destination.to_bytes());
        v.set_source(self.source.to_bytes());
        v.bm()[field::HLPI_PL] = (self.hlpi << 2) | pad as u8;
        v.bm()[field::QOS_CIB_HEL] = (self.qos << 4) | (u8::from(self.crc32) << 3) | SMDS_HEL;
        v.set_bridging(self.bridging);
        v.header_extension_mut()
            .copy_from_slice(&self.header_extension);
        v.info_mut().copy_from_slice(self.info);
        v.pad_mut().fill(0);
        v.set_trailer_reserved(0);
        v.set_trailer_betag(self.betag);
        v.set_length(basize);
        if self.crc32 {
            v.fill_crc32();
        }
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32 of the 802 generator, bit by bit, most significant bit first, initial value
    /// and final XOR all ones: an independent reference for the SMDS CRC32.
    fn crc32_msb_first(data: &[u8]) -> u32 {
        let mut c = u32::MAX;
        for &b in data {
            c ^= u32::from(b) << 24;
            for _ in 0..8 {
                c = if c & 0x8000_0000 != 0 {
                    (c << 1) ^ 0x04c1_1db7
                } else {
                    c << 1
                };
            }
        }
        !c
    }

    fn da() -> E164Address {
        E164Address::individual("15551234567").unwrap()
    }

    fn sa() -> E164Address {
        E164Address::individual("15555550123").unwrap()
    }

    fn repr(info: &[u8], crc32: bool) -> L3PduRepr<'_> {
        L3PduRepr {
            betag: 0x5c,
            destination: da(),
            source: sa(),
            hlpi: HLPI_LLC,
            qos: 0,
            crc32,
            bridging: 0,
            header_extension: HE_VERSION_1,
            info,
        }
    }

    /// The L3_PDU written out by hand from the layout in the module documentation.
    fn hand_made(crc32: bool) -> Vec<u8> {
        let basize: u8 = if crc32 { 44 } else { 40 };
        let mut v = vec![0x00, 0x5c, 0x00, basize];
        v.extend_from_slice(&[0xc1, 0x55, 0x51, 0x23, 0x45, 0x67, 0xff, 0xff]); // DA
        v.extend_from_slice(&[0xc1, 0x55, 0x55, 0x55, 0x01, 0x23, 0xff, 0xff]); // SA
        v.push((1 << 2) | 3); // HLPI 1 (LLC), PAD length 3
        v.push(if crc32 { 0x0b } else { 0x03 }); // QoS 0, CIB, HEL 3
        v.extend_from_slice(&[0x00, 0x00]); // Bridging
        v.extend_from_slice(&[0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // HE: version 1
        v.extend_from_slice(b"ABCDE"); // Info
        v.extend_from_slice(&[0, 0, 0]); // PAD
        if crc32 {
            let c = crc32_msb_first(&v[4..]);
            v.extend_from_slice(&c.to_be_bytes());
        }
        v.extend_from_slice(&[0x00, 0x5c, 0x00, basize]); // trailer
        v
    }

    #[test]
    fn known_layout_without_crc() {
        let want = hand_made(false);
        assert_eq!(want.len(), 48);
        let r = repr(b"ABCDE", false);
        assert_eq!(r.buffer_len(), 48);
        assert_eq!(r.basize(), 40);
        let mut buf = vec![0xa5; 52];
        assert_eq!(r.emit(&mut buf), Ok(48));
        assert_eq!(buf[..48], want[..]);
        assert_eq!(buf[48..], [0xa5; 4]);
        assert_eq!(
            L3PduRepr::parse(&L3Pdu::new_checked(&want[..]).unwrap()),
            Ok(r)
        );
    }

    #[test]
    fn known_layout_with_crc() {
        let want = hand_made(true);
        assert_eq!(want.len(), 52);
        let r = repr(b"ABCDE", true);
        let mut buf = vec![0xa5; 52];
        assert_eq!(r.emit(&mut buf), Ok(52));
        assert_eq!(buf, want);
        let v = L3Pdu::new_checked(&want[..]).unwrap();
        assert_eq!(v.crc32(), Some(crc32_msb_first(&want[4..44])));
        assert_eq!(v.crc32(), Some(crc::crc32(&want[4..44])));
        assert_eq!(L3PduRepr::parse(&v), Ok(r));
        // The CRC32 does not cover the common header or the trailer.
        let mut other = want.clone();
        other[0] = 0x77;
        other[48] = 0x77;
        assert_eq!(
            L3Pdu::new_unchecked(&other[..]).computed_crc32(),
            v.computed_crc32()
        );
        assert_eq!(L3PduRepr::parse(&L3Pdu::new_unchecked(&other[..])), Ok(r));
    }

    #[test]
    fn accessors_in_dirty_buffer() {
        // 7 octets of Info: PAD 1, CRC32 present: 36 + 7 + 1 + 4 + 4 = 52.
        let mut v = L3Pdu::new_checked(vec![0xa5; 52]).unwrap();
        v.set_reserved(0x11);
        v.set_betag(0x22);
        v.set_basize(0x3344);
        v.set_destination(da().to_bytes());
        v.set_source(sa().to_bytes());
        v.set_hlpi(0x2a);
        v.set_pad_len(1);
        v.set_qos(0x9);
        v.set_cib(true);
        v.set_hel(3);
        v.set_bridging(0xbeef);
        v.header_extension_mut().copy_from_slice(&HE_VERSION_1);
        v.info_mut().copy_from_slice(b"payload");
        v.pad_mut().fill(0);
        v.set_trailer_reserved(0x66);
        v.set_trailer_betag(0x77);
        v.set_length(0x8899);
        v.fill_crc32();
        assert_eq!(v.reserved(), 0x11);
        assert_eq!(v.betag(), 0x22);
        assert_eq!(v.basize(), 0x3344);
        assert_eq!(v.destination(), da().to_bytes());
        assert_eq!(v.source(), sa().to_bytes());
        assert_eq!(v.hlpi(), 0x2a);
        assert_eq!(v.pad_len(), 1);
        assert_eq!(v.qos(), 0x9);
        assert!(v.cib());
        assert_eq!(v.hel(), 3);
        assert_eq!(v.bridging(), 0xbeef);
        assert_eq!(v.header_extension(), HE_VERSION_1);
        assert_eq!(v.info(), b"payload");
        assert_eq!(v.pad(), [0]);
        assert_eq!(v.crc32(), Some(crc32_msb_first(&v.b()[4..44])));
        assert_eq!(v.trailer_reserved(), 0x66);
        assert_eq!(v.trailer_betag(), 0x77);
        assert_eq!(v.length(), 0x8899);
        let raw = v.into_inner();
        assert_eq!(raw[..4], [0x11, 0x22, 0x33, 0x44]);
        assert_eq!(raw[20..24], [(0x2a << 2) | 1, 0x9b, 0xbe, 0xef]);
        assert_eq!(raw[48..], [0x66, 0x77, 0x88, 0x99]);

        // Setters touch only their bits.
        let mut v = L3Pdu::new_unchecked([0xffu8; MIN_LEN]);
        v.set_cib(false);
        assert_eq!(v.b()[21], 0xf7);
        v.set_hel(0);
        assert_eq!(v.b()[21], 0xf0);
        v.set_qos(0);
        assert_eq!(v.b()[21], 0x00);
        v.set_pad_len(0);
        assert_eq!(v.b()[20], 0xfc);
        v.set_hlpi(0);
        assert_eq!(v.b()[20], 0x00);
    }

    #[test]
    fn accessors_clamp_inconsistent_fields() {
        // PAD length and CIB that overrun an empty body: empty fields, no panic.
        let mut v = L3Pdu::new_checked([0u8; MIN_LEN]).unwrap();
        v.set_cib(true);
        v.set_pad_len(3);
        assert_eq!(v.info(), b"");
        assert_eq!(v.pad(), b"");
        assert_eq!(v.crc32(), None);
        v.set_crc32(0x1234_5678);
        v.fill_crc32();
        let mut want = [0u8; MIN_LEN];
        want[20] = 3;
        want[21] = 0x08;
        assert_eq!(v.into_inner(), want);
        assert_eq!(
            L3Pdu::new_checked(&[0u8; 39][..]),
            Err(WireError::Truncated {
                what: WHAT,
                need: 40,
                got: 39
            })
        );
    }

    #[test]
    fn empty_info_and_max_info() {
        let r = repr(b"", false);
        let mut buf = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut buf), Ok(40));
        assert_eq!(buf[2..4], [0, 32]);
        assert_eq!(L3PduRepr::parse(&L3Pdu::new_unchecked(&buf[..])), Ok(r));
        let big = vec![0x42u8; MAX_INFO];
        let r = repr(&big, true);
        assert_eq!(r.buffer_len(), MAX_LEN);
        let mut buf = vec![0u8; MAX_LEN];
        assert_eq!(r.emit(&mut buf), Ok(MAX_LEN));
        assert_eq!(L3Pdu::new_unchecked(&buf[..]).basize(), 9224);
        assert_eq!(L3PduRepr::parse(&L3Pdu::new_unchecked(&buf[..])), Ok(r));
    }

    fn parse(b: &[u8]) -> Result<L3PduRepr<'_>, WireError> {
        L3PduRepr::parse(&L3Pdu::new_unchecked(b))
    }

    #[test]
    fn every_validation_error() {
        let good = hand_made(true);
        assert!(parse(&good).is_ok());
        let with = |f: &dyn Fn(&mut L3Pdu<&mut [u8]>)| {
            let mut b = good.clone();
            f(&mut L3Pdu::new_unchecked(&mut b[..]));
            b
        };
        assert!(matches!(
            parse(&good[..39]),
            Err(WireError::Truncated {
                need: 40,
                got: 39,
                ..
            })
        ));
        assert_eq!(
            parse(&with(&|v| v.set_hel(2))),
            Err(malformed(
                "HEL is not 3 (SMDS carries a 12-octet header extension)"
            ))
        );
        assert_eq!(
            parse(&with(&|v| v.set_trailer_betag(0x5d))),
            Err(WireError::TagMismatch {
                what: WHAT,
                btag: 0x5c,
                etag: 0x5d
            })
        );
        assert_eq!(
            parse(&with(&|v| v.set_length(48))),
            Err(WireError::Length {
                what: WHAT,
                field: 48,
                actual: 44
            })
        );
        assert_eq!(
            parse(&with(&|v| v.set_basize(40))),
            Err(WireError::Length {
                what: "SMDS L3_PDU BAsize",
                field: 40,
                actual: 44
            })
        );
        // Info + PAD not a multiple of 4: drop a PAD octet (and fix the lengths).
        let mut short = good.clone();
        short.remove(43);
        let n = short.len();
        let mut v = L3Pdu::new_unchecked(&mut short[..]);
        v.set_basize((n - 8) as u16);
        v.set_length((n - 8) as u16);
        assert_eq!(
            parse(&short),
            Err(malformed("Info + PAD is not a multiple of 4 octets"))
        );
        // CIB set on a body too short for a CRC32.
        let mut e = vec![0u8; 40];
        repr(b"", false).emit(&mut e).unwrap();
        L3Pdu::new_unchecked(&mut e[..]).set_cib(true);
        assert_eq!(
            parse(&e),
            Err(malformed("CIB set but no room for the CRC32"))
        );
        // PAD length with no Info.
        let mut e = vec![0u8; 40];
        repr(b"", false).emit(&mut e).unwrap();
        L3Pdu::new_unchecked(&mut e[..]).set_pad_len(2);
        assert_eq!(parse(&e), Err(malformed("PAD length exceeds Info + PAD")));
        // Info over 9188 octets.
        let big = vec![0u8; MAX_INFO + 4];
        let mut b = vec![0u8; MIN_LEN + big.len()];
        let mut v = L3Pdu::new_unchecked(&mut b[..]);
        v.set_hel(3);
        v.set_basize((big.len() + 32) as u16);
        v.set_length((big.len() + 32) as u16);
        assert_eq!(
            parse(&b),
            Err(WireError::FieldRange {
                field: "SMDS Info length",
                value: 9192,
                max: 9188
            })
        );
        // CRC32 mismatch.
        let bad = with(&|v| v.info_mut()[0] ^= 1);
        assert!(matches!(
            parse(&bad),
            Err(WireError::Crc { what: WHAT, .. })
        ));
        // Addresses (CRC recomputed so that the address check is reached).
        let addr = |da: [u8; 8], sa: [u8; 8]| {
            with(&move |v| {
                v.set_destination(da);
                v.set_source(sa);
                v.fill_crc32();
            })
        };
        let g = E164Address::group("15551230000").unwrap().to_bytes();
        assert!(
            parse(&addr(g, sa().to_bytes())).is_ok(),
            "group destination"
        );
        assert_eq!(
            parse(&addr(sa().to_bytes(), g)),
            Err(malformed("source address is not an individual address"))
        );
        let unknown = E164Address::new(AddressType::Unknown(0xa), "1")
            .unwrap()
            .to_bytes();
        assert_eq!(
            parse(&addr(unknown, sa().to_bytes())),
            Err(malformed(
                "destination address type is neither individual nor group"
            ))
        );
        assert!(matches!(
            parse(&addr(
                [0xc1, 0xf1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                sa().to_bytes()
            )),
            Err(WireError::Malformed {
                what: "E.164 address",
                ..
            })
        ));
        assert!(matches!(
            parse(&addr(da().to_bytes(), [0xcf; 8])),
            Err(WireError::Malformed {
                what: "E.164 address",
                ..
            })
        ));
        // Reserved octets and PAD contents are ignored.
        let lenient = with(&|v| {
            v.set_reserved(0xff);
            v.set_trailer_reserved(0xff);
        });
        assert!(parse(&lenient).is_ok());
        let mut padded = hand_made(false);
        padded[41] = 0xee;
        assert!(parse(&padded).is_ok());
    }

    #[test]
    fn emit_errors() {
        let info = vec![0u8; MAX_INFO + 1];
        assert!(matches!(
            repr(&info, false).emit(&mut []),
            Err(WireError::FieldRange { max: 9188, .. })
        ));
        let r = repr(b"abc", false);
        assert!(matches!(
            L3PduRepr { hlpi: 64, ..r }.check(),
            Err(WireError::FieldRange { max: 63, .. })
        ));
        assert!(matches!(
            L3PduRepr { qos: 16, ..r }.check(),
            Err(WireError::FieldRange { max: 15, .. })
        ));
        let g = E164Address::group("1").unwrap();
        assert!(
            L3PduRepr {
                destination: g,
                ..r
            }
            .check()
            .is_ok()
        );
        assert!(L3PduRepr { source: g, ..r }.check().is_err());
        let u = E164Address::new(AddressType::Unknown(1), "1").unwrap();
        assert!(
            L3PduRepr {
                destination: u,
                ..r
            }
            .check()
            .is_err()
        );
        assert_eq!(
            r.emit(&mut [0u8; 43]),
            Err(WireError::BufferTooSmall {
                what: WHAT,
                need: 44,
                got: 43
            })
        );
    }

    #[test]
    fn header_extension_elements() {
        let r = repr(b"", false);
        assert_eq!(r.version(), Some(1));
        let elems: Vec<_> = r.he_elements().collect();
        assert_eq!(
            elems,
            [Ok(HeElement {
                element_type: HE_TYPE_VERSION,
                value: &[1]
            })]
        );
        // Version, then Carrier Selection (IC code 0288 as BCD), then HE PAD.
        let he = [3, 0, 1, 4, 1, 0x02, 0x88, 0, 0, 0, 0, 0];
        let elems: Vec<_> = HeElements::new(&he).collect();
        assert_eq!(elems.len(), 2);
        assert_eq!(
            elems[1],
            Ok(HeElement {
                element_type: HE_TYPE_CARRIER_SELECTION,
                value: &[0x02, 0x88]
            })
        );
        assert_eq!(he_version(&he), Some(1));
        // Malformed: a length running past the end, and a length of 1.
        let bad = [3, 0, 1, 10, 1, 0, 0, 0, 0, 0, 0, 0];
        let elems: Vec<_> = HeElements::new(&bad).collect();
        assert_eq!(elems.len(), 2);
        assert!(elems[1].is_err());
        assert_eq!(HeElements::new(&[1, 0, 0]).count(), 1);
        assert_eq!(he_version(&[1, 0, 0]), None);
        assert_eq!(he_version(&[0; 12]), None);
        assert_eq!(
            he_version(&[4, 0, 1, 2, 0, 0]),
            None,
            "a version value must be one octet"
        );
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn address(types: &'static [AddressType]) -> impl Strategy<Value = E164Address> {
            (
                proptest::sample::select(types),
                proptest::collection::vec(0u8..10, 1..=15),
            )
                .prop_map(|(t, d)| {
                    let ascii: Vec<u8> = d.iter().map(|x| b'0' + x).collect();
                    E164Address::from_digits(t, &ascii).unwrap()
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            #[test]
            fn round_trip(
                betag in any::<u8>(),
                destination in address(&[AddressType::Individual, AddressType::Group]),
                source in address(&[AddressType::Individual]),
                hlpi in 0u8..64,
                qos in 0u8..16,
                crc32 in any::<bool>(),
                bridging in any::<u16>(),
                header_extension in any::<[u8; 12]>(),
                info in proptest::collection::vec(any::<u8>(), 0..=MAX_INFO),
            ) {
                let r = L3PduRepr { betag, destination, source, hlpi, qos, crc32, bridging, header_extension, info: &info };
                let mut buf = vec![0xa5u8; r.buffer_len()];
                prop_assert_eq!(r.emit(&mut buf), Ok(buf.len()));
                prop_assert_eq!(buf.len() % 4, 0);
                let v = L3Pdu::new_checked(&buf[..]).unwrap();
                prop_assert_eq!(usize::from(v.basize()), buf.len() - 8);
                prop_assert_eq!(v.info(), &info[..]);
                prop_assert_eq!(L3PduRepr::parse(&v), Ok(r));
            }

            #[test]
            fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
                if let Ok(v) = L3Pdu::new_checked(&bytes[..]) {
                    let _ = (v.reserved(), v.betag(), v.basize(), v.destination(), v.source(), v.hlpi(), v.pad_len());
                    let _ = (v.qos(), v.cib(), v.hel(), v.bridging(), v.header_extension(), v.info(), v.pad());
                    let _ = (v.crc32(), v.computed_crc32(), v.trailer_reserved(), v.trailer_betag(), v.length());
                    let _ = HeElements::new(v.header_extension()).count();
                }
                let _ = L3PduRepr::parse(&L3Pdu::new_unchecked(&bytes[..]));
                let _ = E164Address::parse(&bytes);
            }

            #[test]
            fn random_bodies_with_consistent_lengths_never_panic(
                body in proptest::collection::vec(any::<u8>(), 0..120),
                flags in any::<u8>(),
            ) {
                // Past the length checks, into the structure and address checks.
                let mut b = vec![0u8; MIN_LEN + body.len()];
                b[field::INFO..field::INFO + body.len()].copy_from_slice(&body);
                let mut v = L3Pdu::new_unchecked(&mut b[..]);
                v.set_hel(3);
                v.set_pad_len(flags);
                v.set_cib(flags & 4 != 0);
                v.set_basize((body.len() + 32) as u16);
                v.set_length((body.len() + 32) as u16);
                v.fill_crc32();
                let _ = L3PduRepr::parse(&L3Pdu::new_unchecked(&b[..]));
            }
        }
    }
}
