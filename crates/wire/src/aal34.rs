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

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use crate::WireError;
use crate::crc;

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

/// The segment type of a SAR-PDU (I.363.3 Table 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentType {
    /// `10`: beginning of message.
    Bom,
    /// `00`: continuation of message.
    Com,
    /// `01`: end of message.
    Eom,
    /// `11`: single-segment message.
    Ssm,
}

impl SegmentType {
    /// Decodes the 2-bit ST field (higher bits ignored).
    pub const fn from_bits(b: u8) -> SegmentType {
        match b & 0b11 {
            0b10 => SegmentType::Bom,
            0b00 => SegmentType::Com,
            0b01 => SegmentType::Eom,
            _ => SegmentType::Ssm,
        }
    }

    /// The 2-bit ST field.
    pub const fn to_bits(self) -> u8 {
        match self {
            SegmentType::Bom => 0b10,
            SegmentType::Com => 0b00,
            SegmentType::Eom => 0b01,
            SegmentType::Ssm => 0b11,
        }
    }

    /// Whether `li` is a legal LI for this segment type (see the module documentation).
    pub const fn li_allowed(self, li: u8) -> bool {
        match self {
            SegmentType::Bom | SegmentType::Com => li as usize == SAR_PAYLOAD_LEN,
            SegmentType::Eom => {
                li == LI_ABORT
                    || (li >= 4 && li as usize <= SAR_PAYLOAD_LEN && li.is_multiple_of(4))
            }
            SegmentType::Ssm => li >= 8 && li as usize <= SAR_PAYLOAD_LEN && li.is_multiple_of(4),
        }
    }

    const fn li_rule(self) -> &'static str {
        match self {
            SegmentType::Bom | SegmentType::Com => "LI of a BOM or COM must be 44",
            SegmentType::Eom => "LI of an EOM must be 4 to 44 in steps of 4, or 63 (abort)",
            SegmentType::Ssm => "LI of an SSM must be 8 to 44 in steps of 4",
        }
    }
}

/// The CRC-10 field for a SAR-PDU: the remainder of (the first 374 bits) x^10 divided by
/// the generator. `sar` must hold at least 47 octets; the CRC field itself is not read.
///
/// The catalogue CRC-10 works on whole octets and cannot take the 374-bit message
/// directly, so this takes the CRC of the first 46 octets (a remainder of H x^10), adds
/// the 6 LI bits at their place (LI x^4) and multiplies the sum by x^6, reducing as it
/// goes: (H x^10 + LI x^4) x^6 = (H x^6 + LI) x^10, the required remainder.
pub fn sar_crc10(sar: &[u8]) -> u16 {
    let head = sar.get(..46).unwrap_or(&[]);
    let li = u16::from(sar.get(46).copied().unwrap_or(0) >> 2);
    let mut v = crc::crc10(head) ^ (li << 4);
    for _ in 0..6 {
        v <<= 1;
        if v & 0x400 != 0 {
            // The generator with its x^10 term: x^10 + x^9 + x^5 + x^4 + x + 1.
            v ^= 0x633;
        }
    }
    v
}

/// A zero-copy view of a SAR-PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SarPdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SarPdu<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> SarPdu<T> {
        SarPdu { buffer }
    }

    /// Wraps a buffer, checking it holds a whole SAR-PDU (octets past 48 are ignored).
    pub fn new_checked(buffer: T) -> Result<SarPdu<T>, WireError> {
        let got = buffer.as_ref().len();
        if got < SAR_PDU_LEN {
            return Err(WireError::Truncated {
                what: SAR_WHAT,
                need: SAR_PDU_LEN,
                got,
            });
        }
        Ok(SarPdu { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The segment type.
    #[inline]
    pub fn segment_type(&self) -> SegmentType {
        SegmentType::from_bits(self.b()[0] >> 6)
    }

    /// The sequence number (0-15).
    #[inline]
    pub fn sn(&self) -> u8 {
        (self.b()[0] >> 2) & 0x0f
    }

    /// The multiplexing identifier (0-1023).
    #[inline]
    pub fn mid(&self) -> u16 {
        let b = self.b();
        (u16::from(b[0] & 0x03) << 8) | u16::from(b[1])
    }

    /// All 44 payload octets, valid or not.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[field::SAR_PAYLOAD]
    }

    /// The first LI payload octets: the valid ones. Empty when LI exceeds 44 (an abort).
    #[inline]
    pub fn data(&self) -> &[u8] {
        self.payload().get(..usize::from(self.li())).unwrap_or(&[])
    }

    /// The length indicator (0-63).
    #[inline]
    pub fn li(&self) -> u8 {
        self.b()[46] >> 2
    }

    /// The CRC-10 field as carried.
    #[inline]
    pub fn crc(&self) -> u16 {
        let b = self.b();
        (u16::from(b[46] & 0x03) << 8) | u16::from(b[47])
    }

    /// The CRC-10 the header, payload and LI call for.
    #[inline]
    pub fn computed_crc(&self) -> u16 {
        sar_crc10(self.b())
    }

    /// True when the CRC-10 matches: the remainder of all 48 octets is zero.
    #[inline]
    pub fn verify_crc(&self) -> bool {
        crc::crc10(&self.b()[..SAR_PDU_LEN]) == 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> SarPdu<&'a T> {
    /// The buffer with the lifetime of the borrow it was made from, so that a
    /// representation parsed from this view may outlive the view.
    fn data_a(&self) -> &'a [u8] {
        let b: &'a T = self.buffer;
        b.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SarPdu<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the segment type.
    #[inline]
    pub fn set_segment_type(&mut self, st: SegmentType) {
        let b = self.bm();
        b[0] = (b[0] & 0x3f) | (st.to_bits() << 6);
    }

    /// Sets the sequence number; only the low 4 bits are used.
    #[inline]
    pub fn set_sn(&mut self, sn: u8) {
        let b = self.bm();
        b[0] = (b[0] & 0xc3) | ((sn & 0x0f) << 2);
    }

    /// Sets the MID; bits beyond the 10-bit field are dropped.
    #[inline]
    pub fn set_mid(&mut self, mid: u16) {
        let b = self.bm();
        b[0] = (b[0] & 0xfc) | ((mid >> 8) as u8 & 0x03);
        b[1] = mid as u8;
    }

    /// The 44 payload octets, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::SAR_PAYLOAD]
    }

    /// Sets the length indicator; only the low 6 bits are used.
    #[inline]
    pub fn set_li(&mut self, li: u8) {
        let b = self.bm();
        b[46] = (b[46] & 0x03) | (li << 2);
    }

    /// Sets the CRC-10 field as given (see [`SarPdu::fill_crc`] to compute it).
    #[inline]
    pub fn set_crc(&mut self, crc: u16) {
        let b = self.bm();
        b[46] = (b[46] & 0xfc) | ((crc >> 8) as u8 & 0x03);
        b[47] = crc as u8;
    }

    /// Computes and writes the CRC-10 for the current contents.
    #[inline]
    pub fn fill_crc(&mut self) {
        let c = self.computed_crc();
        self.set_crc(c);
    }
}

/// A validated SAR-PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SarPduRepr<'a> {
    /// The segment type.
    pub segment_type: SegmentType,
    /// The sequence number (0-15).
    pub sn: u8,
    /// The multiplexing identifier (0-1023).
    pub mid: u16,
    /// The valid payload octets (LI of them); empty in an abort EOM.
    pub payload: &'a [u8],
    /// An EOM with LI = 63: the sender abandoned the CPCS-PDU.
    pub abort: bool,
}

impl<'a> SarPduRepr<'a> {
    /// Parses a SAR-PDU: first the CRC-10 (nothing else can be trusted without it), then
    /// the LI rules of its segment type.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        sar: &SarPdu<&'a T>,
    ) -> Result<SarPduRepr<'a>, WireError> {
        let bytes = sar.data_a();
        let Some(bytes) = bytes.get(..SAR_PDU_LEN) else {
            return Err(WireError::Truncated {
                what: SAR_WHAT,
                need: SAR_PDU_LEN,
                got: bytes.len(),
            });
        };
        let view = SarPdu::new_unchecked(bytes);
        if !view.verify_crc() {
            return Err(WireError::Crc {
                what: SAR_WHAT,
                received: view.crc().into(),
                computed: view.computed_crc().into(),
            });
        }
        let st = view.segment_type();
        let li = view.li();
        if !st.li_allowed(li) {
            return Err(WireError::Malformed {
                what: SAR_WHAT,
                reason: st.li_rule(),
            });
        }
        let abort = li == LI_ABORT;
        Ok(SarPduRepr {
            segment_type: st,
            sn: view.sn(),
            mid: view.mid(),
            payload: if abort {
                &[]
            } else {
                &bytes[2..2 + usize::from(li)]
            },
            abort,
        })
    }

    /// The LI this representation emits.
    pub fn li(&self) -> u8 {
        if self.abort {
            LI_ABORT
        } else {
            // Checked by `check` before use; saturate so a bad length cannot alias 63.
            self.payload.len().min(usize::from(u8::MAX)) as u8
        }
    }

    /// Checks every field fits its bits and the LI rules hold.
    pub fn check(&self) -> Result<(), WireError> {
        if self.sn > 0x0f {
            return Err(WireError::FieldRange {
                field: "AAL3/4 SN",
                value: self.sn.into(),
                max: 0x0f,
            });
        }
        if self.mid > MAX_MID {
            return Err(WireError::FieldRange {
                field: "AAL3/4 MID",
                value: self.mid.into(),
                max: MAX_MID.into(),
            });
        }
        let rule_broken = if self.abort {
            self.segment_type != SegmentType::Eom || !self.payload.is_empty()
        } else {
            self.payload.len() > SAR_PAYLOAD_LEN
                || !self.segment_type.li_allowed(self.li())
                || self.li() == LI_ABORT
        };
        if rule_broken {
            return Err(WireError::Malformed {
                what: SAR_WHAT,
                reason: self.segment_type.li_rule(),
            });
        }
        Ok(())
    }

    /// Octets [`SarPduRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        SAR_PDU_LEN
    }

    /// Writes the whole SAR-PDU, unused payload octets zero and the CRC computed, after
    /// checking the fields.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, sar: &mut SarPdu<T>) -> Result<(), WireError> {
        self.check()?;
        let got = sar.buffer.as_ref().len();
        if got < SAR_PDU_LEN {
            return Err(WireError::BufferTooSmall {
                what: SAR_WHAT,
                need: SAR_PDU_LEN,
                got,
            });
        }
        write_sar(
            sar.bm(),
            self.segment_type,
            self.sn,
            self.mid,
            self.li(),
            |p| p[..self.payload.len()].copy_from_slice(self.payload),
        );
        Ok(())
    }

    /// The 48 octets of the SAR-PDU, after checking the fields.
    pub fn to_bytes(&self) -> Result<[u8; SAR_PDU_LEN], WireError> {
        let mut out = [0u8; SAR_PDU_LEN];
        self.emit(&mut SarPdu::new_unchecked(&mut out[..]))?;
        Ok(out)
    }
}

/// Writes a whole SAR-PDU into `out[..48]`: the payload zeroed, then filled by `fill`,
/// then the CRC. The fields are assumed to fit.
fn write_sar(
    out: &mut [u8],
    st: SegmentType,
    sn: u8,
    mid: u16,
    li: u8,
    fill: impl FnOnce(&mut [u8]),
) {
    let mut v = SarPdu::new_unchecked(&mut out[..SAR_PDU_LEN]);
    let b = v.bm();
    b[0] = (st.to_bits() << 6) | ((sn & 0x0f) << 2) | ((mid >> 8) as u8 & 0x03);
    b[1] = mid as u8;
    b[field::SAR_PAYLOAD].fill(0);
    b[46] = li << 2;
    b[47] = 0;
    fill(v.payload_mut());
    v.fill_crc();
}

/// The PAD length for a CPCS payload of `len` octets (0-3, to a multiple of 4).
pub const fn cpcs_pad_len(len: usize) -> usize {
    len.wrapping_neg() & 3
}

/// The length of the CPCS-PDU carrying `len` payload octets.
pub const fn cpcs_pdu_len(len: usize) -> usize {
    CPCS_MIN_LEN + len + cpcs_pad_len(len)
}

/// How many SAR-PDUs carry a CPCS-PDU with `len` payload octets.
pub const fn sar_pdus_needed(len: usize) -> usize {
    cpcs_pdu_len(len).div_ceil(SAR_PAYLOAD_LEN)
}

/// A zero-copy view of a CPCS-PDU. The buffer must end where the PDU ends: the trailer
/// is read from its last four octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpcsPdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> CpcsPdu<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> CpcsPdu<T> {
        CpcsPdu { buffer }
    }

    /// Wraps a buffer, checking it holds at least a header and a trailer.
    pub fn new_checked(buffer: T) -> Result<CpcsPdu<T>, WireError> {
        let got = buffer.as_ref().len();
        if got < CPCS_MIN_LEN {
            return Err(WireError::Truncated {
                what: CPCS_WHAT,
                need: CPCS_MIN_LEN,
                got,
            });
        }
        Ok(CpcsPdu { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn trailer_at(&self, from_end: usize) -> usize {
        self.b().len() - from_end
    }

    /// Common part indicator (0: BASize and Length count octets).
    #[inline]
    pub fn cpi(&self) -> u8 {
        self.b()[field::CPI]
    }

    /// Beginning tag.
    #[inline]
    pub fn btag(&self) -> u8 {
        self.b()[field::BTAG]
    }

    /// Buffer allocation size.
    #[inline]
    pub fn basize(&self) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[2], b[3]])
    }

    /// The alignment octet of the trailer.
    #[inline]
    pub fn al(&self) -> u8 {
        self.b()[self.trailer_at(field::AL_FROM_END)]
    }

    /// End tag.
    #[inline]
    pub fn etag(&self) -> u8 {
        self.b()[self.trailer_at(field::ETAG_FROM_END)]
    }

    /// The Length field: payload octets, PAD excluded.
    #[inline]
    pub fn length(&self) -> u16 {
        let b = self.b();
        let i = self.trailer_at(field::LENGTH_FROM_END);
        u16::from_be_bytes([b[i], b[i + 1]])
    }

    /// The octets between header and trailer (payload and PAD).
    fn body_range(&self) -> core::ops::Range<usize> {
        field::CPCS_PAYLOAD..self.trailer_at(CPCS_TRAILER_LEN)
    }

    /// The payload as the Length field delimits it, clamped to the buffer.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let body = &self.b()[self.body_range()];
        &body[..usize::from(self.length()).min(body.len())]
    }

    /// The PAD octets after the payload (empty if Length overruns the buffer).
    #[inline]
    pub fn pad(&self) -> &[u8] {
        let body = &self.b()[self.body_range()];
        body.get(usize::from(self.length())..).unwrap_or(&[])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> CpcsPdu<&'a T> {
    /// The buffer with the lifetime of the borrow it was made from.
    fn data_a(&self) -> &'a [u8] {
        let b: &'a T = self.buffer;
        b.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CpcsPdu<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the common part indicator.
    #[inline]
    pub fn set_cpi(&mut self, cpi: u8) {
        self.bm()[field::CPI] = cpi;
    }

    /// Sets the beginning tag.
    #[inline]
    pub fn set_btag(&mut self, btag: u8) {
        self.bm()[field::BTAG] = btag;
    }

    /// Sets the buffer allocation size.
    #[inline]
    pub fn set_basize(&mut self, basize: u16) {
        self.bm()[field::BASIZE].copy_from_slice(&basize.to_be_bytes());
    }

    /// Sets the alignment octet.
    #[inline]
    pub fn set_al(&mut self, al: u8) {
        let i = self.trailer_at(field::AL_FROM_END);
        self.bm()[i] = al;
    }

    /// Sets the end tag.
    #[inline]
    pub fn set_etag(&mut self, etag: u8) {
        let i = self.trailer_at(field::ETAG_FROM_END);
        self.bm()[i] = etag;
    }

    /// Sets the Length field.
    #[inline]
    pub fn set_length(&mut self, length: u16) {
        let i = self.trailer_at(field::LENGTH_FROM_END);
        self.bm()[i..i + 2].copy_from_slice(&length.to_be_bytes());
    }

    /// The payload as the current Length field delimits it, writable (set Length first).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let r = self.body_range();
        let len = usize::from(self.length()).min(r.len());
        &mut self.bm()[r.start..r.start + len]
    }
}

/// A validated CPCS-PDU (CPI 0, Etag equal to Btag, AL and PAD zero on emission).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpcsPduRepr<'a> {
    /// The tag carried as Btag and Etag.
    pub btag: u8,
    /// Buffer allocation size: the payload length in message mode, at least it in
    /// streaming mode.
    pub basize: u16,
    /// The CPCS-SDU.
    pub payload: &'a [u8],
}

impl<'a> CpcsPduRepr<'a> {
    /// A message-mode PDU: BASize equal to the payload length.
    pub fn message(btag: u8, payload: &'a [u8]) -> CpcsPduRepr<'a> {
        CpcsPduRepr {
            btag,
            basize: payload.len().min(MAX_CPCS_SDU) as u16,
            payload,
        }
    }

    /// Parses a whole CPCS-PDU. The checks, in order: CPI is 0; Etag equals Btag; the
    /// buffer is exactly header + Length + PAD + trailer; BASize is at least Length. The
    /// AL and PAD octets are not checked (they carry no information).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        pdu: &CpcsPdu<&'a T>,
    ) -> Result<CpcsPduRepr<'a>, WireError> {
        let bytes = pdu.data_a();
        let view = CpcsPdu::new_checked(bytes)?;
        if view.cpi() != 0 {
            return Err(WireError::Malformed {
                what: CPCS_WHAT,
                reason: "CPI is not 0 (only octet counting is defined)",
            });
        }
        if view.btag() != view.etag() {
            return Err(WireError::TagMismatch {
                what: CPCS_WHAT,
                btag: view.btag(),
                etag: view.etag(),
            });
        }
        let length = usize::from(view.length());
        if cpcs_pdu_len(length) != bytes.len() {
            return Err(WireError::Length {
                what: CPCS_WHAT,
                field: length,
                actual: bytes.len() - CPCS_MIN_LEN,
            });
        }
        if usize::from(view.basize()) < length {
            return Err(WireError::Length {
                what: "AAL3/4 CPCS-PDU BASize",
                field: view.basize().into(),
                actual: length,
            });
        }
        Ok(CpcsPduRepr {
            btag: view.btag(),
            basize: view.basize(),
            payload: &bytes[CPCS_HEADER_LEN..CPCS_HEADER_LEN + length],
        })
    }

    /// Checks the payload fits the Length field and BASize covers it.
    pub fn check(&self) -> Result<(), WireError> {
        if self.payload.len() > MAX_CPCS_SDU {
            return Err(WireError::FieldRange {
                field: "AAL3/4 CPCS-PDU Length",
                value: self.payload.len() as u64,
                max: MAX_CPCS_SDU as u64,
            });
        }
        if usize::from(self.basize) < self.payload.len() {
            return Err(WireError::Length {
                what: "AAL3/4 CPCS-PDU BASize",
                field: self.basize.into(),
                actual: self.payload.len(),
            });
        }
        Ok(())
    }

    /// Octets [`CpcsPduRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        cpcs_pdu_len(self.payload.len())
    }

    /// The four header octets.
    fn header(&self) -> [u8; 4] {
        let [h, l] = self.basize.to_be_bytes();
        [0, self.btag, h, l]
    }

    /// The four trailer octets.
    fn trailer(&self) -> [u8; 4] {
        let [h, l] = (self.payload.len() as u16).to_be_bytes();
        [0, self.btag, h, l]
    }

    /// Writes the PDU into the first [`CpcsPduRepr::buffer_len`] octets of `buf`, after
    /// checking the fields; returns the octets written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let need = self.buffer_len();
        let got = buf.len();
        let Some(out) = buf.get_mut(..need) else {
            return Err(WireError::BufferTooSmall {
                what: CPCS_WHAT,
                need,
                got,
            });
        };
        let n = self.payload.len();
        out[..CPCS_HEADER_LEN].copy_from_slice(&self.header());
        out[CPCS_HEADER_LEN..CPCS_HEADER_LEN + n].copy_from_slice(self.payload);
        out[CPCS_HEADER_LEN + n..need - CPCS_TRAILER_LEN].fill(0);
        out[need - CPCS_TRAILER_LEN..].copy_from_slice(&self.trailer());
        Ok(need)
    }
}

/// The transmit side of the SAR: cuts CPCS-PDUs into SAR-PDUs and keeps the sequence
/// number of every MID.
///
/// A CPCS-PDU of up to 44 octets (a payload of up to 36) goes as one SSM; a longer one as
/// a BOM, COMs and an EOM. The SN runs on from one PDU to the next on the same MID, as
/// I.363.3 numbers SAR-PDUs rather than PDUs.
#[derive(Debug, Clone)]
pub struct Segmenter {
    sn: [u8; MAX_MID as usize + 1],
}

impl Default for Segmenter {
    fn default() -> Self {
        Segmenter {
            sn: [0; MAX_MID as usize + 1],
        }
    }
}

impl Segmenter {
    /// A segmenter with every MID's sequence number at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The SN the next SAR-PDU on `mid` will carry (0 for a MID out of range).
    pub fn next_sn(&self, mid: u16) -> u8 {
        self.sn.get(usize::from(mid)).copied().unwrap_or(0)
    }

    /// Segments a message-mode CPCS-PDU around `frame` with the given Btag.
    pub fn segment_frame<'a>(
        &mut self,
        mid: u16,
        btag: u8,
        frame: &'a [u8],
    ) -> Result<Segments<'a>, WireError> {
        self.segment(mid, &CpcsPduRepr::message(btag, frame))
    }

    /// Segments the CPCS-PDU `repr` on `mid`. The SAR-PDUs come from the returned
    /// iterator, one 48-octet array each, or are written into caller buffers with
    /// [`Segments::write_next`]; nothing is allocated.
    pub fn segment<'a>(
        &mut self,
        mid: u16,
        repr: &CpcsPduRepr<'a>,
    ) -> Result<Segments<'a>, WireError> {
        repr.check()?;
        let Some(sn) = self.sn.get_mut(usize::from(mid)) else {
            return Err(WireError::FieldRange {
                field: "AAL3/4 MID",
                value: mid.into(),
                max: MAX_MID.into(),
            });
        };
        let total = repr.buffer_len();
        let cells = total.div_ceil(SAR_PAYLOAD_LEN);
        let first_sn = *sn;
        *sn = ((usize::from(first_sn) + cells) % 16) as u8;
        Ok(Segments {
            header: repr.header(),
            payload: repr.payload,
            pad: cpcs_pad_len(repr.payload.len()),
            trailer: repr.trailer(),
            total,
            offset: 0,
            mid,
            sn: first_sn,
        })
    }
}

/// The SAR-PDUs of one CPCS-PDU, produced on demand from the borrowed payload.
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    header: [u8; 4],
    payload: &'a [u8],
    pad: usize,
    trailer: [u8; 4],
    /// CPCS-PDU octets in all.
    total: usize,
    /// CPCS-PDU octets already segmented.
    offset: usize,
    mid: u16,
    sn: u8,
}

impl Segments<'_> {
    /// SAR-PDUs still to come.
    pub fn remaining(&self) -> usize {
        (self.total - self.offset).div_ceil(SAR_PAYLOAD_LEN)
    }

    /// Copies CPCS-PDU octets `at..at + dst.len()` into `dst`. The PDU is never
    /// assembled in memory: its four pieces are read where they are.
    fn copy_out(&self, at: usize, dst: &mut [u8]) {
        const ZEROS: [u8; 3] = [0; 3];
        let pieces: [&[u8]; 4] = [
            &self.header,
            self.payload,
            &ZEROS[..self.pad],
            &self.trailer,
        ];
        let end = at + dst.len();
        let mut start = 0;
        for p in pieces {
            let p_end = start + p.len();
            let lo = at.max(start);
            let hi = end.min(p_end);
            if lo < hi {
                dst[lo - at..hi - at].copy_from_slice(&p[lo - start..hi - start]);
            }
            start = p_end;
        }
    }

    /// Writes the next SAR-PDU into `out[..48]`; false when there is none left (or
    /// `out` is shorter than 48 octets, in which case nothing is consumed).
    pub fn write_next(&mut self, out: &mut [u8]) -> bool {
        if self.offset >= self.total || out.len() < SAR_PDU_LEN {
            return false;
        }
        let n = (self.total - self.offset).min(SAR_PAYLOAD_LEN);
        let first = self.offset == 0;
        let last = self.offset + n == self.total;
        let st = match (first, last) {
            (true, true) => SegmentType::Ssm,
            (true, false) => SegmentType::Bom,
            (false, false) => SegmentType::Com,
            (false, true) => SegmentType::Eom,
        };
        let at = self.offset;
        write_sar(out, st, self.sn, self.mid, n as u8, |p| {
            self.copy_out(at, &mut p[..n])
        });
        self.offset += n;
        self.sn = (self.sn + 1) & 0x0f;
        true
    }
}

impl Iterator for Segments<'_> {
    type Item = [u8; SAR_PDU_LEN];

    fn next(&mut self) -> Option<[u8; SAR_PDU_LEN]> {
        let mut out = [0u8; SAR_PDU_LEN];
        self.write_next(&mut out).then_some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Segments<'_> {}

/// Limits of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblerConfig {
    /// How many MIDs may have a CPCS-PDU in progress at once; a BOM for one more is
    /// rejected. Bounds the memory a stream of BOMs can claim.
    pub max_mids: usize,
    /// The largest CPCS-SDU (payload) accepted, at most [`MAX_CPCS_SDU`].
    pub max_sdu: usize,
    /// How long after its BOM a CPCS-PDU may take to complete. The timer runs from the
    /// BOM, not from the latest cell, so a trickle of COMs cannot hold a buffer forever.
    pub timeout: Duration,
}

impl Default for ReassemblerConfig {
    /// Every MID, the largest SDU the format allows, one second.
    fn default() -> Self {
        ReassemblerConfig {
            max_mids: usize::from(MAX_MID) + 1,
            max_sdu: MAX_CPCS_SDU,
            timeout: Duration::from_secs(1),
        }
    }
}

/// A reassembled CPCS-SDU, borrowed from the reassembler until its next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aal34Frame<'a> {
    /// The MID it arrived on.
    pub mid: u16,
    /// Its Btag (= Etag).
    pub btag: u8,
    /// Its BASize.
    pub basize: u16,
    /// The CPCS-SDU.
    pub payload: &'a [u8],
}

/// A CPCS-PDU (or a SAR-PDU) the reassembler discarded, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aal34Error {
    /// The MID concerned; `None` when the SAR-PDU was too short or failed its CRC-10,
    /// so that its MID cannot be trusted (the cell is dropped and no PDU is touched).
    pub mid: Option<u16>,
    /// What was wrong.
    pub error: WireError,
}

impl core::fmt::Display for Aal34Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.mid {
            Some(mid) => write!(f, "MID {mid}: {}", self.error),
            None => write!(f, "MID unknown: {}", self.error),
        }
    }
}

impl std::error::Error for Aal34Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// What one SAR-PDU completed: a frame, or the discard of a PDU or of the cell.
pub type Aal34Outcome<'a> = Result<Aal34Frame<'a>, Aal34Error>;

const NO_SLOT: u16 = u16::MAX;

/// A CPCS-PDU in progress on one MID.
#[derive(Debug, Clone)]
struct Slot {
    mid: u16,
    /// The SN the next COM or EOM must carry.
    next_sn: u8,
    /// When its BOM arrived.
    started: Instant,
    /// The CPCS-PDU octets received so far.
    buf: Vec<u8>,
}

/// The receive side of the SAR and CPCS: rebuilds CPCS-SDUs from SAR-PDUs of up to
/// 1024 interleaved MIDs.
///
/// Sans-IO: [`Reassembler::handle_sar`] takes each SAR-PDU with the time it arrived and
/// answers `None` (nothing to report: the PDU is incomplete, or the cell was a BOM),
/// `Some(Ok(frame))` or `Some(Err(error))`. Errors that no cell reveals at the time it
/// arrives come from [`Reassembler::expire`]: reassembly timeouts, and a PDU abandoned
/// because an SSM arrived on its MID (the SSM's own frame is delivered at once).
///
/// What it detects: CRC-10 errors (the cell is dropped and no PDU touched, since its
/// MID is suspect), LI errors, SN gaps, a COM or EOM without a BOM, a BOM or SSM while a
/// PDU is in progress on its MID (the old PDU is discarded, the new one proceeds), the
/// abort EOM, Btag/Etag mismatch, a Length or BASize that disagrees with the data, a PDU
/// over the size limit, too many MIDs in progress, and timeouts.
#[derive(Debug, Clone)]
pub struct Reassembler {
    config: ReassemblerConfig,
    /// For each MID, its index in `slots`, or `NO_SLOT`.
    index: Vec<u16>,
    slots: Vec<Slot>,
    /// Buffers of finished PDUs, kept to be reused.
    spare: Vec<Vec<u8>>,
    /// The CPCS-PDU of the frame last delivered (the frame borrows it).
    done: Vec<u8>,
    deferred: VecDeque<Aal34Error>,
    /// Frames delivered.
    pub frames: u64,
    /// Errors reported (by `handle_sar` and `expire`).
    pub errors: u64,
}

impl Default for Reassembler {
    fn default() -> Self {
        Self::new(ReassemblerConfig::default())
    }
}

impl Reassembler {
    /// A reassembler with the given limits (`max_sdu` is clamped to [`MAX_CPCS_SDU`],
    /// `max_mids` to 1024).
    pub fn new(config: ReassemblerConfig) -> Self {
        let config = ReassemblerConfig {
            max_mids: config.max_mids.min(usize::from(MAX_MID) + 1),
            max_sdu: config.max_sdu.min(MAX_CPCS_SDU),
            ..config
        };
        Reassembler {
            config,
            index: vec![NO_SLOT; usize::from(MAX_MID) + 1],
            slots: Vec::new(),
            spare: Vec::new(),
            done: Vec::new(),
            deferred: VecDeque::new(),
            frames: 0,
            errors: 0,
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &ReassemblerConfig {
        &self.config
    }

    /// How many MIDs have a CPCS-PDU in progress.
    pub fn active(&self) -> usize {
        self.slots.len()
    }

    /// True when `mid` has a CPCS-PDU in progress.
    pub fn in_progress(&self, mid: u16) -> bool {
        self.slot_of(mid).is_some()
    }

    /// The earliest instant at which [`Reassembler::expire`] will time a PDU out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.slots
            .iter()
            .map(|s| s.started.saturating_add(self.config.timeout))
            .min()
    }

    /// Discards every PDU in progress (without reporting them) and pending errors.
    pub fn clear(&mut self) {
        while let Some(i) = self.slots.len().checked_sub(1) {
            self.remove_slot(i);
        }
        self.deferred.clear();
    }

    fn slot_of(&self, mid: u16) -> Option<usize> {
        match self.index.get(usize::from(mid)).copied() {
            None | Some(NO_SLOT) => None,
            Some(i) => Some(usize::from(i)),
        }
    }

    /// The largest CPCS-PDU a buffer may grow to.
    fn max_pdu(&self) -> usize {
        cpcs_pdu_len(self.config.max_sdu)
    }

    /// Removes slot `i` from the table.
    fn take_slot(&mut self, i: usize) -> Slot {
        let slot = self.slots.swap_remove(i);
        self.index[usize::from(slot.mid)] = NO_SLOT;
        if let Some(moved) = self.slots.get(i) {
            self.index[usize::from(moved.mid)] = i as u16;
        }
        slot
    }

    /// Removes slot `i`, keeping its buffer for reuse; returns the octets it held.
    fn remove_slot(&mut self, i: usize) -> usize {
        let slot = self.take_slot(i);
        let octets = slot.buf.len();
        self.recycle(slot.buf);
        octets
    }

    fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < self.config.max_mids {
            buf.clear();
            self.spare.push(buf);
        }
    }

    fn err(&mut self, mid: Option<u16>, error: WireError) -> Aal34Error {
        self.errors += 1;
        Aal34Error { mid, error }
    }

    fn malformed(&mut self, mid: u16, reason: &'static str) -> Aal34Error {
        self.err(
            Some(mid),
            WireError::Malformed {
                what: REASM_WHAT,
                reason,
            },
        )
    }

    /// Discards the PDU in progress on `mid`, if any; true if there was one.
    fn abandon(&mut self, mid: u16) -> bool {
        match self.slot_of(mid) {
            Some(i) => {
                self.remove_slot(i);
                true
            }
            None => false,
        }
    }

    /// Handles one SAR-PDU (48 octets; more are ignored) arriving at `now`.
    pub fn handle_sar(&mut self, now: Instant, sar: &[u8]) -> Option<Aal34Outcome<'_>> {
        let view = match SarPdu::new_checked(sar) {
            Ok(v) => v,
            Err(e) => return Some(Err(self.err(None, e))),
        };
        let repr = match SarPduRepr::parse(&view) {
            Ok(r) => r,
            Err(e @ WireError::Crc { .. }) => return Some(Err(self.err(None, e))),
            Err(e) => {
                // The CRC passed, so the MID is good and so is the verdict: whatever
                // was being reassembled on it has lost a cell's worth of data.
                let mid = view.mid();
                self.abandon(mid);
                return Some(Err(self.err(Some(mid), e)));
            }
        };
        let mid = repr.mid;
        match repr.segment_type {
            SegmentType::Bom => self.bom(now, &repr).map(Err),
            SegmentType::Com | SegmentType::Eom => {
                let Some(i) = self.slot_of(mid) else {
                    let reason = if repr.segment_type == SegmentType::Com {
                        "COM without a BOM"
                    } else {
                        "EOM without a BOM"
                    };
                    return Some(Err(self.malformed(mid, reason)));
                };
                if repr.abort {
                    self.remove_slot(i);
                    return Some(Err(
                        self.malformed(mid, "CPCS-PDU aborted by the sender (EOM with LI 63)")
                    ));
                }
                let expected = self.slots[i].next_sn;
                if repr.sn != expected {
                    self.remove_slot(i);
                    let e = WireError::Sequence {
                        what: REASM_WHAT,
                        expected,
                        got: repr.sn,
                    };
                    return Some(Err(self.err(Some(mid), e)));
                }
                let max = self.max_pdu();
                let size = self.slots[i].buf.len() + repr.payload.len();
                if size > max {
                    self.remove_slot(i);
                    let e = WireError::Oversize {
                        what: CPCS_WHAT,
                        size,
                        max,
                    };
                    return Some(Err(self.err(Some(mid), e)));
                }
                let slot = &mut self.slots[i];
                slot.buf.extend_from_slice(repr.payload);
                slot.next_sn = (expected + 1) & 0x0f;
                if repr.segment_type == SegmentType::Com {
                    return None;
                }
                // Move the finished buffer to `done` and keep the old one for reuse.
                let slot = self.take_slot(i);
                let old = core::mem::replace(&mut self.done, slot.buf);
                self.recycle(old);
                Some(self.deliver(mid))
            }
            SegmentType::Ssm => {
                if self.abandon(mid) {
                    let e = self.malformed(mid, "SSM while a CPCS-PDU is in progress on its MID");
                    if self.deferred.len() >= self.config.max_mids.max(1) {
                        self.deferred.pop_front();
                    }
                    self.deferred.push_back(e);
                }
                let max = self.max_pdu();
                if repr.payload.len() > max {
                    // Only reachable with a tiny max_sdu: an SSM holds 44 octets at most.
                    let e = WireError::Oversize {
                        what: CPCS_WHAT,
                        size: repr.payload.len(),
                        max,
                    };
                    return Some(Err(self.err(Some(mid), e)));
                }
                self.done.clear();
                self.done.extend_from_slice(repr.payload);
                Some(self.deliver(mid))
            }
        }
    }

    /// Starts a PDU on a BOM; returns the error to report, if any.
    fn bom(&mut self, now: Instant, repr: &SarPduRepr<'_>) -> Option<Aal34Error> {
        let mid = repr.mid;
        let interrupted = self
            .abandon(mid)
            .then(|| self.malformed(mid, "BOM while a CPCS-PDU is in progress on its MID"));
        // BASize announces the size before any data arrive; refuse early what cannot fit.
        let basize = repr
            .payload
            .get(2..4)
            .map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])));
        if basize > self.config.max_sdu {
            let e = WireError::Oversize {
                what: "AAL3/4 CPCS-PDU BASize",
                size: basize,
                max: self.config.max_sdu,
            };
            return Some(interrupted.unwrap_or_else(|| self.err(Some(mid), e)));
        }
        if self.slots.len() >= self.config.max_mids {
            // Cannot happen after an interruption, which freed a slot.
            let e = WireError::FieldRange {
                field: "AAL3/4 MIDs in reassembly",
                value: self.slots.len() as u64 + 1,
                max: self.config.max_mids as u64,
            };
            return Some(self.err(Some(mid), e));
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.extend_from_slice(repr.payload);
        self.index[usize::from(mid)] = self.slots.len() as u16;
        self.slots.push(Slot {
            mid,
            next_sn: (repr.sn + 1) & 0x0f,
            started: now,
            buf,
        });
        interrupted
    }

    /// Parses the CPCS-PDU in `done` and hands out its payload.
    fn deliver(&mut self, mid: u16) -> Aal34Outcome<'_> {
        // Keep only plain values from the parse, so that no borrow of `done` is held
        // across the error paths (which need all of `self`).
        let parsed = CpcsPduRepr::parse(&CpcsPdu::new_unchecked(&self.done[..]))
            .map(|r| (r.btag, r.basize, r.payload.len()));
        match parsed {
            Ok((_, _, len)) if len > self.config.max_sdu => {
                // Only an SSM gets here: a BOM's BASize was already held to max_sdu, and
                // Length cannot exceed BASize.
                let e = WireError::Oversize {
                    what: "AAL3/4 CPCS-SDU",
                    size: len,
                    max: self.config.max_sdu,
                };
                Err(self.err(Some(mid), e))
            }
            Ok((btag, basize, len)) => {
                self.frames += 1;
                Ok(Aal34Frame {
                    mid,
                    btag,
                    basize,
                    payload: &self.done[CPCS_HEADER_LEN..CPCS_HEADER_LEN + len],
                })
            }
            Err(e) => Err(self.err(Some(mid), e)),
        }
    }

    /// Reports, one per call, the errors no SAR-PDU revealed when it arrived: first PDUs
    /// abandoned because an SSM arrived on their MID, then PDUs whose reassembly timer
    /// has run out by `now` (which are discarded). Call until it returns `None`, e.g.
    /// at [`Reassembler::next_deadline`].
    pub fn expire(&mut self, now: Instant) -> Option<Aal34Error> {
        if let Some(e) = self.deferred.pop_front() {
            return Some(e);
        }
        let timeout = self.config.timeout;
        let i = self
            .slots
            .iter()
            .position(|s| now.saturating_duration_since(s.started) >= timeout)?;
        let mid = self.slots[i].mid;
        let octets = self.remove_slot(i);
        let e = WireError::Timeout {
            what: REASM_WHAT,
            octets,
        };
        Some(self.err(Some(mid), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polynomial division of the bit string `bytes` by the CRC-10 generator, one bit at
    /// a time: the independent reference for the SAR-PDU CRC.
    fn remainder(bytes: &[u8]) -> u16 {
        let mut r: u16 = 0;
        for &byte in bytes {
            for k in (0..8).rev() {
                r = (r << 1) | u16::from((byte >> k) & 1);
                if r & 0x400 != 0 {
                    r ^= 0x633;
                }
            }
        }
        r
    }

    /// C. M. Heard's table-driven CRC-10 as Wireshark's packet-atm.c runs it: entry i of
    /// the table is the remainder of i x^10, and each octet enters at the low end of the
    /// register, so the register holds the plain remainder of the octets read so far.
    fn heard_table() -> [u16; 256] {
        let mut table = [0u16; 256];
        for (i, t) in table.iter_mut().enumerate() {
            // i followed by ten zero bits, as a 24-bit string.
            let v = (i as u32) << 10;
            *t = remainder(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
        }
        table
    }

    fn heard(bytes: &[u8]) -> u16 {
        let table = heard_table();
        let mut acc: u16 = 0;
        for &b in bytes {
            acc = ((acc << 8) & 0x3ff) ^ table[usize::from((acc >> 2) & 0xff)] ^ u16::from(b);
        }
        acc
    }

    fn sample_sar() -> [u8; SAR_PDU_LEN] {
        let payload: Vec<u8> = (0..44u8).collect();
        SarPduRepr {
            segment_type: SegmentType::Bom,
            sn: 5,
            mid: 0x2a7,
            payload: &payload,
            abort: false,
        }
        .to_bytes()
        .unwrap()
    }

    #[test]
    fn heard_table_matches_published_entries() {
        // The first and last entries of the table in Heard's crc10.c (and packet-atm.c).
        let t = heard_table();
        assert_eq!(
            t[..8],
            [0x000, 0x233, 0x255, 0x066, 0x299, 0x0aa, 0x0cc, 0x2ff]
        );
        assert_eq!(
            t[248..],
            [0x21e, 0x02d, 0x04b, 0x278, 0x087, 0x2b4, 0x2d2, 0x0e1]
        );
    }

    #[test]
    fn crc10_known_answer_vector() {
        let sar = sample_sar();
        // Header: BOM (10), SN 5 (0101), MID 0x2a7 (10 1010 0111).
        assert_eq!(sar[..2], [0b1001_0110, 0xa7]);
        assert_eq!(sar[2..46], (0..44u8).collect::<Vec<_>>()[..]);
        assert_eq!(sar[46] >> 2, 44);
        let crc = SarPdu::new_unchecked(&sar[..]).crc();
        // Pinned: the value Heard's algorithm (whose table matches the published one, see
        // above) and the bitwise division both give, so that a change to any of the three
        // computations shows.
        assert_eq!(crc, 0x13d, "CRC-10 of the sample BOM");
        // Transmit: the field is the remainder of the message with the field zeroed.
        let mut zeroed = sar;
        zeroed[46] &= 0xfc;
        zeroed[47] = 0;
        assert_eq!(remainder(&zeroed), crc);
        assert_eq!(heard(&zeroed), crc);
        // Receive: all 48 octets leave no remainder, by every method.
        assert_eq!(remainder(&sar), 0);
        assert_eq!(heard(&sar), 0);
        assert_eq!(crc::crc10(&sar), 0);
        assert!(SarPdu::new_unchecked(&sar[..]).verify_crc());
    }

    #[test]
    fn crc10_agrees_with_division_on_many_pdus() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..500 {
            let mut sar = [0u8; SAR_PDU_LEN];
            for b in sar.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            sar[46] &= 0xfc;
            sar[47] = 0;
            let want = remainder(&sar);
            assert_eq!(sar_crc10(&sar), want);
            let mut v = SarPdu::new_unchecked(&mut sar[..]);
            v.fill_crc();
            assert_eq!(v.crc(), want);
            assert!(v.verify_crc());
            assert_eq!(crc::crc10(&sar), 0);
            // Any single-bit error is caught.
            let bit = (x % 384) as usize;
            sar[bit / 8] ^= 0x80 >> (bit % 8);
            assert!(!SarPdu::new_unchecked(&sar[..]).verify_crc());
        }
    }

    #[test]
    fn sar_accessors_in_dirty_buffer() {
        let mut v = SarPdu::new_checked(vec![0xa5; SAR_PDU_LEN]).unwrap();
        v.set_segment_type(SegmentType::Eom);
        v.set_sn(0xb);
        v.set_mid(0x155);
        v.set_li(12);
        v.payload_mut()[..12].copy_from_slice(b"hello, world");
        v.fill_crc();
        assert_eq!(v.segment_type(), SegmentType::Eom);
        assert_eq!(v.sn(), 0xb);
        assert_eq!(v.mid(), 0x155);
        assert_eq!(v.li(), 12);
        assert_eq!(v.data(), b"hello, world");
        assert_eq!(v.payload()[12..], [0xa5; 32]);
        assert!(v.verify_crc());
        assert_eq!(v.crc(), v.computed_crc());
        let raw = v.into_inner();
        assert_eq!(raw[..2], [0b0110_1101, 0x55]);
        assert_eq!(raw[46] >> 2, 12);
        // Setters touch only their bits.
        let mut v = SarPdu::new_unchecked([0xffu8; SAR_PDU_LEN]);
        v.set_sn(0);
        assert_eq!(v.into_inner()[0], 0xc3);
        let mut v = SarPdu::new_unchecked([0u8; SAR_PDU_LEN]);
        v.set_crc(0x3ff);
        v.set_li(0);
        assert_eq!(v.into_inner()[46..], [0x03, 0xff]);
        let mut v = SarPdu::new_unchecked([0u8; SAR_PDU_LEN]);
        v.set_mid(0xffff);
        assert_eq!(v.mid(), 0x3ff);
        assert_eq!(v.segment_type(), SegmentType::Com);
        assert_eq!(v.sn(), 0);
    }

    #[test]
    fn segment_type_code_points() {
        for b in 0..4 {
            assert_eq!(SegmentType::from_bits(b).to_bits(), b);
        }
        assert_eq!(SegmentType::from_bits(0b10), SegmentType::Bom);
        assert_eq!(SegmentType::from_bits(0b00), SegmentType::Com);
        assert_eq!(SegmentType::from_bits(0b01), SegmentType::Eom);
        assert_eq!(SegmentType::from_bits(0b11), SegmentType::Ssm);
        let legal = |st: SegmentType| (0..64).filter(|&li| st.li_allowed(li)).collect::<Vec<u8>>();
        assert_eq!(legal(SegmentType::Bom), [44]);
        assert_eq!(legal(SegmentType::Com), [44]);
        assert_eq!(
            legal(SegmentType::Eom),
            [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 63]
        );
        assert_eq!(
            legal(SegmentType::Ssm),
            [8, 12, 16, 20, 24, 28, 32, 36, 40, 44]
        );
    }

    #[test]
    fn sar_repr_round_trip_and_errors() {
        let sar = sample_sar();
        let r = SarPduRepr::parse(&SarPdu::new_checked(&sar[..]).unwrap()).unwrap();
        assert_eq!(r.segment_type, SegmentType::Bom);
        assert_eq!((r.sn, r.mid, r.abort), (5, 0x2a7, false));
        assert_eq!(r.payload, &sar[2..46]);
        let mut out = SarPdu::new_unchecked(vec![0xa5; 48]);
        r.emit(&mut out).unwrap();
        assert_eq!(out.into_inner(), sar);

        let mut bad = sar;
        bad[10] ^= 1;
        assert!(matches!(
            SarPduRepr::parse(&SarPdu::new_unchecked(&bad[..])),
            Err(WireError::Crc {
                what: SAR_WHAT,
                received: 0x13d,
                ..
            })
        ));
        assert_eq!(
            SarPduRepr::parse(&SarPdu::new_unchecked(&sar[..47])),
            Err(WireError::Truncated {
                what: SAR_WHAT,
                need: 48,
                got: 47
            })
        );
        // A BOM with LI 40 has a good CRC but breaks the LI rule.
        let mut li = SarPdu::new_unchecked(sar);
        li.set_li(40);
        li.fill_crc();
        assert_eq!(
            SarPduRepr::parse(&SarPdu::new_unchecked(&li.into_inner()[..])),
            Err(WireError::Malformed {
                what: SAR_WHAT,
                reason: "LI of a BOM or COM must be 44"
            })
        );

        // The abort EOM.
        let abort = SarPduRepr {
            segment_type: SegmentType::Eom,
            sn: 1,
            mid: 3,
            payload: &[],
            abort: true,
        };
        let bytes = abort.to_bytes().unwrap();
        assert_eq!(bytes[46] >> 2, 63);
        assert_eq!(
            SarPduRepr::parse(&SarPdu::new_unchecked(&bytes[..])),
            Ok(abort)
        );
        assert_eq!(SarPdu::new_unchecked(&bytes[..]).data(), b"");

        // check() rejects what cannot be emitted.
        let bad = [
            SarPduRepr { sn: 16, ..abort },
            SarPduRepr { mid: 1024, ..abort },
            SarPduRepr {
                segment_type: SegmentType::Ssm,
                ..abort
            },
            SarPduRepr {
                payload: &[0; 4],
                ..abort
            },
            SarPduRepr {
                abort: false,
                payload: &[0; 6],
                ..abort
            },
            SarPduRepr {
                abort: false,
                segment_type: SegmentType::Ssm,
                payload: &[0; 4],
                ..abort
            },
            SarPduRepr {
                abort: false,
                segment_type: SegmentType::Com,
                payload: &[0; 40],
                ..abort
            },
            SarPduRepr {
                abort: false,
                payload: &[0; 48],
                ..abort
            },
        ];
        for r in bad {
            assert!(r.check().is_err(), "{r:?}");
            assert!(r.to_bytes().is_err());
        }
        let mut short = SarPdu::new_unchecked([0u8; 47]);
        assert!(matches!(
            abort.emit(&mut short),
            Err(WireError::BufferTooSmall { need: 48, .. })
        ));
    }

    #[test]
    fn cpcs_accessors_in_dirty_buffer() {
        let n = cpcs_pdu_len(5);
        assert_eq!(n, 16);
        let mut v = CpcsPdu::new_checked(vec![0xa5; n]).unwrap();
        v.set_cpi(0);
        v.set_btag(0x42);
        v.set_basize(5);
        v.set_al(0);
        v.set_etag(0x42);
        v.set_length(5);
        v.payload_mut().copy_from_slice(b"abcde");
        assert_eq!((v.cpi(), v.btag(), v.basize()), (0, 0x42, 5));
        assert_eq!((v.al(), v.etag(), v.length()), (0, 0x42, 5));
        assert_eq!(v.payload(), b"abcde");
        assert_eq!(v.pad(), [0xa5; 3]);
        assert_eq!(
            v.into_inner(),
            [
                0, 0x42, 0, 5, b'a', b'b', b'c', b'd', b'e', 0xa5, 0xa5, 0xa5, 0, 0x42, 0, 5
            ]
        );
        // A Length past the buffer is clamped, not a panic.
        let mut v = CpcsPdu::new_checked([0u8; 8]).unwrap();
        v.set_length(0xffff);
        assert_eq!(v.payload(), b"");
        assert_eq!(v.pad(), b"");
        assert_eq!(v.payload_mut().len(), 0);
        assert_eq!(
            CpcsPdu::new_checked(&[0u8; 7][..]),
            Err(WireError::Truncated {
                what: CPCS_WHAT,
                need: 8,
                got: 7
            })
        );
    }

    #[test]
    fn cpcs_repr_round_trip_and_errors() {
        let r = CpcsPduRepr::message(7, b"hello");
        assert_eq!(r.buffer_len(), 16);
        let mut buf = vec![0xa5; 20];
        assert_eq!(r.emit(&mut buf), Ok(16));
        assert_eq!(
            buf[..16],
            [
                0, 7, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0, 0, 7, 0, 5
            ]
        );
        assert_eq!(buf[16..], [0xa5; 4]);
        assert_eq!(
            CpcsPduRepr::parse(&CpcsPdu::new_unchecked(&buf[..16])),
            Ok(r)
        );
        assert!(matches!(
            r.emit(&mut [0u8; 15]),
            Err(WireError::BufferTooSmall {
                need: 16,
                got: 15,
                ..
            })
        ));

        let pdu = buf[..16].to_vec();
        let parse =
            |b: &[u8]| CpcsPduRepr::parse(&CpcsPdu::new_unchecked(b)).map(|r| r.payload.to_vec());
        let mut cpi = pdu.clone();
        cpi[0] = 1;
        assert!(matches!(parse(&cpi), Err(WireError::Malformed { .. })));
        let mut tag = pdu.clone();
        tag[13] = 8;
        assert_eq!(
            parse(&tag),
            Err(WireError::TagMismatch {
                what: CPCS_WHAT,
                btag: 7,
                etag: 8
            })
        );
        let mut len = pdu.clone();
        len[15] = 9;
        assert_eq!(
            parse(&len),
            Err(WireError::Length {
                what: CPCS_WHAT,
                field: 9,
                actual: 8
            })
        );
        assert!(matches!(
            parse(&pdu[..12]),
            Err(WireError::TagMismatch { .. }) | Err(WireError::Length { .. })
        ));
        let mut basize = pdu.clone();
        basize[3] = 4;
        assert_eq!(
            parse(&basize),
            Err(WireError::Length {
                what: "AAL3/4 CPCS-PDU BASize",
                field: 4,
                actual: 5
            })
        );
        // Streaming mode: BASize above Length is fine.
        let mut stream = pdu.clone();
        stream[2] = 1;
        assert_eq!(parse(&stream), Ok(b"hello".to_vec()));
        assert!(matches!(parse(&pdu[..7]), Err(WireError::Truncated { .. })));
        // Empty payload: the 8-octet minimum.
        let empty = CpcsPduRepr::message(0, b"");
        let mut b = [0xffu8; 8];
        assert_eq!(empty.emit(&mut b), Ok(8));
        assert_eq!(b, [0, 0, 0, 0, 0, 0, 0, 0]);
        // check()
        let big = vec![0u8; MAX_CPCS_SDU + 1];
        assert!(matches!(
            CpcsPduRepr::message(0, &big).check(),
            Err(WireError::FieldRange { .. })
        ));
        let small = CpcsPduRepr { basize: 1, ..r };
        assert!(matches!(
            small.emit(&mut buf),
            Err(WireError::Length { .. })
        ));
    }

    fn segment_all(seg: &mut Segmenter, mid: u16, btag: u8, frame: &[u8]) -> Vec<[u8; 48]> {
        seg.segment_frame(mid, btag, frame).unwrap().collect()
    }

    #[test]
    fn segmenter_layout() {
        let mut seg = Segmenter::new();
        // 36 octets of payload: a 44-octet CPCS-PDU, one SSM.
        let cells = segment_all(&mut seg, 9, 0x11, &[0x5a; 36]);
        assert_eq!(cells.len(), 1);
        let v = SarPdu::new_unchecked(&cells[0][..]);
        assert_eq!(
            (v.segment_type(), v.sn(), v.mid(), v.li()),
            (SegmentType::Ssm, 0, 9, 44)
        );
        assert_eq!(v.payload()[..4], [0, 0x11, 0, 36]);
        assert_eq!(v.payload()[40..], [0, 0x11, 0, 36]);
        assert!(v.verify_crc());
        assert_eq!(seg.next_sn(9), 1);

        // 37 octets: 48-octet PDU (3 pad), BOM 44 + EOM 4.
        let cells = segment_all(&mut seg, 9, 0x12, &[0x5a; 37]);
        assert_eq!(cells.len(), 2);
        let bom = SarPdu::new_unchecked(&cells[0][..]);
        let eom = SarPdu::new_unchecked(&cells[1][..]);
        assert_eq!(
            (bom.segment_type(), bom.sn(), bom.li()),
            (SegmentType::Bom, 1, 44)
        );
        assert_eq!(
            (eom.segment_type(), eom.sn(), eom.li()),
            (SegmentType::Eom, 2, 4)
        );
        assert_eq!(
            bom.payload()[40..],
            [0x5a, 0, 0, 0],
            "the last payload octet, then PAD"
        );
        assert_eq!(eom.payload()[..4], [0, 0x12, 0, 37]);
        assert_eq!(eom.payload()[4..], [0; 40], "unused octets are zero");

        // 100 octets: 108-octet PDU: BOM, COM, EOM (20); SN wraps per MID.
        let mut seg = Segmenter::new();
        for _ in 0..5 {
            segment_all(&mut seg, 1, 0, &[0; 100]);
        }
        assert_eq!(seg.next_sn(1), 15);
        assert_eq!(seg.next_sn(2), 0);
        let cells = segment_all(&mut seg, 1, 0, &[0; 100]);
        let sts: Vec<_> = cells
            .iter()
            .map(|c| SarPdu::new_unchecked(&c[..]).segment_type())
            .collect();
        assert_eq!(sts, [SegmentType::Bom, SegmentType::Com, SegmentType::Eom]);
        let sns: Vec<_> = cells
            .iter()
            .map(|c| SarPdu::new_unchecked(&c[..]).sn())
            .collect();
        assert_eq!(sns, [15, 0, 1]);
        assert_eq!(SarPdu::new_unchecked(&cells[2][..]).li(), 20);

        assert!(matches!(
            seg.segment_frame(1024, 0, b"x"),
            Err(WireError::FieldRange { .. })
        ));
        assert_eq!(sar_pdus_needed(0), 1);
        assert_eq!(sar_pdus_needed(36), 1);
        assert_eq!(sar_pdus_needed(37), 2);
        assert_eq!(sar_pdus_needed(9188), 209);
    }

    #[test]
    fn segments_write_next_and_size_hint() {
        let mut seg = Segmenter::new();
        let frame: Vec<u8> = (0..500u16).map(|i| i as u8).collect();
        let mut it = seg.segment_frame(4, 9, &frame).unwrap();
        assert_eq!(it.len(), sar_pdus_needed(500));
        let mut bufs = vec![[0xa5u8; 48]; it.len()];
        assert!(!it.write_next(&mut [0u8; 47]));
        for b in bufs.iter_mut() {
            assert!(it.write_next(b));
        }
        assert!(!it.write_next(&mut [0u8; 48]));
        assert_eq!(it.next(), None);
        // The payload octets, concatenated, are the CPCS-PDU.
        let mut pdu = Vec::new();
        for b in &bufs {
            pdu.extend_from_slice(SarPdu::new_unchecked(&b[..]).data());
        }
        let r = CpcsPduRepr::parse(&CpcsPdu::new_unchecked(&pdu[..])).unwrap();
        assert_eq!(r.payload, &frame[..]);
        assert_eq!(r.btag, 9);
    }

    fn at(ms: u64) -> Instant {
        Instant::from_picos(ms * 1_000_000_000)
    }

    /// Feeds cells and collects (payload or error) for every `Some`.
    fn feed(r: &mut Reassembler, cells: &[[u8; 48]]) -> Vec<Result<Vec<u8>, Aal34Error>> {
        cells
            .iter()
            .filter_map(|c| {
                r.handle_sar(at(0), c)
                    .map(|o| o.map(|f| f.payload.to_vec()))
            })
            .collect()
    }

    #[test]
    fn reassembles_ssm_and_multi_cell() {
        let mut seg = Segmenter::new();
        let mut r = Reassembler::default();
        let small = segment_all(&mut seg, 3, 1, b"tiny");
        let big: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let cells = segment_all(&mut seg, 3, 2, &big);
        assert_eq!(feed(&mut r, &small), [Ok(b"tiny".to_vec())]);
        for c in &cells[..cells.len() - 1] {
            assert_eq!(r.handle_sar(at(0), c), None);
        }
        assert!(r.in_progress(3));
        let f = r
            .handle_sar(at(0), &cells[cells.len() - 1])
            .unwrap()
            .unwrap();
        assert_eq!((f.mid, f.btag, f.basize), (3, 2, 1000));
        assert_eq!(f.payload, &big[..]);
        assert_eq!(r.active(), 0);
        assert_eq!((r.frames, r.errors), (2, 0));
    }

    fn err_of(o: Option<Aal34Outcome<'_>>) -> Aal34Error {
        match o {
            Some(Err(e)) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn detects_each_error() {
        let mut seg = Segmenter::new();
        let frame = [0x33u8; 200];
        let cells = segment_all(&mut seg, 7, 5, &frame);
        assert_eq!(cells.len(), 5);
        let mut r = Reassembler::default();

        // CRC error: no MID, nothing disturbed.
        let mut bad = cells[0];
        bad[20] ^= 0x10;
        assert_eq!(
            err_of(r.handle_sar(at(0), &bad)),
            Aal34Error {
                mid: None,
                error: WireError::Crc {
                    what: SAR_WHAT,
                    received: SarPdu::new_unchecked(&bad[..]).crc().into(),
                    computed: SarPdu::new_unchecked(&bad[..]).computed_crc().into(),
                }
            }
        );
        assert!(matches!(
            err_of(r.handle_sar(at(0), &cells[0][..40])).error,
            WireError::Truncated { .. }
        ));

        // COM and EOM without a BOM.
        let e = err_of(r.handle_sar(at(0), &cells[1]));
        assert_eq!(e.mid, Some(7));
        assert_eq!(
            e.error,
            WireError::Malformed {
                what: REASM_WHAT,
                reason: "COM without a BOM"
            }
        );
        let e = err_of(r.handle_sar(at(0), &cells[4]));
        assert!(matches!(
            e.error,
            WireError::Malformed {
                reason: "EOM without a BOM",
                ..
            }
        ));

        // A sequence gap (lost COM).
        assert_eq!(r.handle_sar(at(0), &cells[0]), None);
        assert_eq!(r.handle_sar(at(0), &cells[1]), None);
        let e = err_of(r.handle_sar(at(0), &cells[3]));
        assert_eq!(
            e.error,
            WireError::Sequence {
                what: REASM_WHAT,
                expected: 2,
                got: 3
            }
        );
        assert!(!r.in_progress(7));

        // A BOM while in progress: the old PDU is reported, the new one completes.
        assert_eq!(r.handle_sar(at(0), &cells[0]), None);
        assert_eq!(r.handle_sar(at(0), &cells[1]), None);
        let e = err_of(r.handle_sar(at(0), &cells[0]));
        assert!(matches!(
            e.error,
            WireError::Malformed {
                reason: "BOM while a CPCS-PDU is in progress on its MID",
                ..
            }
        ));
        for c in &cells[1..4] {
            assert_eq!(r.handle_sar(at(0), c), None);
        }
        assert_eq!(
            r.handle_sar(at(0), &cells[4]).unwrap().unwrap().payload,
            &frame[..]
        );

        // An LI error on a COM abandons the PDU.
        let mut li = SarPdu::new_unchecked(cells[1]);
        li.set_li(20);
        li.fill_crc();
        assert_eq!(r.handle_sar(at(0), &cells[0]), None);
        let e = err_of(r.handle_sar(at(0), &li.into_inner()));
        assert_eq!(
            (e.mid, e.error),
            (
                Some(7),
                WireError::Malformed {
                    what: SAR_WHAT,
                    reason: "LI of a BOM or COM must be 44"
                }
            )
        );
        assert!(!r.in_progress(7));

        // The abort EOM.
        assert_eq!(r.handle_sar(at(0), &cells[0]), None);
        let abort = SarPduRepr {
            segment_type: SegmentType::Eom,
            sn: 1,
            mid: 7,
            payload: &[],
            abort: true,
        }
        .to_bytes()
        .unwrap();
        let e = err_of(r.handle_sar(at(0), &abort));
        assert!(matches!(
            e.error,
            WireError::Malformed {
                reason: "CPCS-PDU aborted by the sender (EOM with LI 63)",
                ..
            }
        ));
        assert_eq!(r.active(), 0);
    }

    /// Builds SAR-PDUs around a hand-made CPCS-PDU (to break its fields).
    fn cells_of(pdu: &[u8], mid: u16) -> Vec<[u8; 48]> {
        let chunks: Vec<&[u8]> = pdu.chunks(44).collect();
        let n = chunks.len();
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let st = match (i == 0, i + 1 == n) {
                    (true, true) => SegmentType::Ssm,
                    (true, false) => SegmentType::Bom,
                    (false, false) => SegmentType::Com,
                    (false, true) => SegmentType::Eom,
                };
                SarPduRepr {
                    segment_type: st,
                    sn: (i % 16) as u8,
                    mid,
                    payload: c,
                    abort: false,
                }
                .to_bytes()
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn detects_cpcs_errors() {
        let mut r = Reassembler::default();
        let mut pdu = vec![0u8; 108];
        CpcsPduRepr::message(1, &[9; 100]).emit(&mut pdu).unwrap();
        let mut tag = pdu.clone();
        tag[105] = 2;
        let e = feed(&mut r, &cells_of(&tag, 0));
        assert_eq!(
            e,
            [Err(Aal34Error {
                mid: Some(0),
                error: WireError::TagMismatch {
                    what: CPCS_WHAT,
                    btag: 1,
                    etag: 2
                }
            })]
        );
        let mut len = pdu.clone();
        len[107] = 96;
        let e = feed(&mut r, &cells_of(&len, 0));
        assert!(matches!(
            e[..],
            [Err(Aal34Error {
                error: WireError::Length {
                    field: 96,
                    actual: 100,
                    ..
                },
                ..
            })]
        ));
        // A single-cell PDU with a bad Length.
        let mut ssm = [0u8; 12];
        CpcsPduRepr::message(3, b"abcd").emit(&mut ssm).unwrap();
        ssm[11] = 8;
        let e = feed(&mut r, &cells_of(&ssm, 2));
        assert!(matches!(
            e[..],
            [Err(Aal34Error {
                mid: Some(2),
                error: WireError::Length { .. }
            })]
        ));
        assert_eq!(r.errors, 3);
    }

    #[test]
    fn oversize_and_mid_limit() {
        let cfg = ReassemblerConfig {
            max_mids: 2,
            max_sdu: 100,
            timeout: Duration::from_millis(10),
        };
        let mut r = Reassembler::new(cfg);
        let mut seg = Segmenter::new();
        // BASize announces too much: refused at the BOM.
        let cells = segment_all(&mut seg, 1, 0, &[1; 101]);
        let e = err_of(r.handle_sar(at(0), &cells[0]));
        assert_eq!(
            e.error,
            WireError::Oversize {
                what: "AAL3/4 CPCS-PDU BASize",
                size: 101,
                max: 100
            }
        );
        // BASize lies low: caught as the data grow; the rest of the PDU then has no BOM.
        let mut pdu = vec![0u8; cpcs_pdu_len(200)];
        CpcsPduRepr::message(0, &[0; 200]).emit(&mut pdu).unwrap();
        pdu[2..4].copy_from_slice(&50u16.to_be_bytes());
        let out = feed(&mut r, &cells_of(&pdu, 1));
        assert_eq!(
            out[0],
            Err(Aal34Error {
                mid: Some(1),
                error: WireError::Oversize {
                    what: CPCS_WHAT,
                    size: 132,
                    max: 108
                }
            })
        );
        assert_eq!(out.len(), 3, "two more cells without a BOM: {out:?}");
        assert!(!r.in_progress(1));

        // Only two MIDs at once.
        let a = segment_all(&mut seg, 10, 0, &[0; 50]);
        let b = segment_all(&mut seg, 11, 0, &[0; 50]);
        let c = segment_all(&mut seg, 12, 0, &[0; 50]);
        assert_eq!(r.handle_sar(at(0), &a[0]), None);
        assert_eq!(r.handle_sar(at(0), &b[0]), None);
        let e = err_of(r.handle_sar(at(0), &c[0]));
        assert_eq!(
            e.error,
            WireError::FieldRange {
                field: "AAL3/4 MIDs in reassembly",
                value: 3,
                max: 2
            }
        );
        assert_eq!(
            r.handle_sar(at(0), &a[1]).unwrap().unwrap().payload,
            &[0; 50][..]
        );
        assert_eq!(r.handle_sar(at(0), &c[0]), None);
        assert_eq!(r.active(), 2);
    }

    #[test]
    fn oversize_single_segment() {
        // An SSM is not announced by a BOM, so its size is checked on arrival.
        let mut r = Reassembler::new(ReassemblerConfig {
            max_sdu: 10,
            ..ReassemblerConfig::default()
        });
        let mut seg = Segmenter::new();
        let e = err_of(r.handle_sar(at(0), &segment_all(&mut seg, 0, 0, &[0; 20])[0]));
        assert_eq!(
            e.error,
            WireError::Oversize {
                what: CPCS_WHAT,
                size: 28,
                max: 20
            }
        );
        // 11 octets pad to the same 20-octet PDU as 10 do: caught on the SDU length.
        let e = err_of(r.handle_sar(at(0), &segment_all(&mut seg, 0, 0, &[0; 11])[0]));
        assert_eq!(
            e.error,
            WireError::Oversize {
                what: "AAL3/4 CPCS-SDU",
                size: 11,
                max: 10
            }
        );
        let f = r.handle_sar(at(0), &segment_all(&mut seg, 0, 0, &[1; 10])[0]);
        assert_eq!(f.unwrap().unwrap().payload, &[1; 10][..]);
    }

    #[test]
    fn timeouts_and_deferred_errors() {
        let cfg = ReassemblerConfig {
            timeout: Duration::from_millis(10),
            ..ReassemblerConfig::default()
        };
        let mut r = Reassembler::new(cfg);
        let mut seg = Segmenter::new();
        let a = segment_all(&mut seg, 1, 0, &[0; 100]);
        let b = segment_all(&mut seg, 2, 0, &[0; 100]);
        assert_eq!(r.handle_sar(at(0), &a[0]), None);
        assert_eq!(r.handle_sar(at(5), &b[0]), None);
        assert_eq!(r.next_deadline(), Some(at(10)));
        assert_eq!(r.expire(at(9)), None);
        let e = r.expire(at(10)).unwrap();
        assert_eq!(
            e,
            Aal34Error {
                mid: Some(1),
                error: WireError::Timeout {
                    what: REASM_WHAT,
                    octets: 44
                }
            }
        );
        assert_eq!(r.expire(at(10)), None);
        assert_eq!(r.next_deadline(), Some(at(15)));
        // A later cell for the expired MID is now a COM without a BOM.
        assert!(matches!(
            err_of(r.handle_sar(at(11), &a[1])).error,
            WireError::Malformed { .. }
        ));

        // An SSM on a MID in progress: its frame now, the abandoned PDU from expire().
        let s = segment_all(&mut seg, 2, 0, b"ssm!");
        assert_eq!(
            r.handle_sar(at(12), &s[0]).unwrap().unwrap().payload,
            b"ssm!"
        );
        let e = r.expire(at(12)).unwrap();
        assert_eq!(e.mid, Some(2));
        assert!(matches!(
            e.error,
            WireError::Malformed {
                reason: "SSM while a CPCS-PDU is in progress on its MID",
                ..
            }
        ));
        assert_eq!(r.expire(at(100)), None);
        assert_eq!(r.next_deadline(), None);
        // clear() forgets everything.
        assert_eq!(r.handle_sar(at(0), &a[0]), None);
        r.clear();
        assert_eq!(r.active(), 0);
        assert!(!r.in_progress(1));
    }

    #[test]
    fn buffers_are_reused() {
        let mut r = Reassembler::default();
        let mut seg = Segmenter::new();
        let frame = vec![7u8; 3000];
        for _ in 0..3 {
            for c in seg.segment_frame(5, 1, &frame).unwrap() {
                if let Some(o) = r.handle_sar(at(0), &c) {
                    assert_eq!(o.unwrap().payload.len(), 3000);
                }
            }
        }
        // Each BOM took the buffer the delivery before last gave back: one spare, grown.
        assert_eq!(r.spare.len(), 1);
        assert!(r.spare[0].capacity() >= 3000);
        assert!(r.done.capacity() >= 3000);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn frames() -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
            // A few MIDs, small and large frames, some MIDs carrying two frames.
            let frame = prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..=60),
                proptest::collection::vec(any::<u8>(), 0..=9188),
            ];
            proptest::collection::vec((0u16..6, frame), 1..6)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn segment_then_reassemble_is_identity(
                frames in frames(),
                picks in proptest::collection::vec(any::<u16>(), 0..2000),
            ) {
                let mut seg = Segmenter::new();
                // Per-MID queues of cells, in order.
                let mut queues: Vec<(u16, VecDeque<[u8; 48]>)> = Vec::new();
                let mut expected: Vec<(u16, Vec<u8>)> = Vec::new();
                for (i, (mid, frame)) in frames.iter().enumerate() {
                    let mid = mid * 171 % 1024;
                    let cells = seg.segment_frame(mid, i as u8, frame).unwrap();
                    match queues.iter_mut().find(|(m, _)| *m == mid) {
                        Some((_, q)) => q.extend(cells),
                        None => queues.push((mid, cells.collect())),
                    }
                    expected.push((mid, frame.clone()));
                }
                // Interleave: repeatedly take the head of a randomly chosen queue.
                let mut r = Reassembler::default();
                let mut got: Vec<(u16, Vec<u8>)> = Vec::new();
                let mut k = 0usize;
                loop {
                    let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].1.is_empty()).collect();
                    if live.is_empty() {
                        break;
                    }
                    let pick = picks.get(k).copied().unwrap_or(0);
                    k += 1;
                    let q = live[usize::from(pick) % live.len()];
                    let cell = queues[q].1.pop_front().unwrap();
                    if let Some(o) = r.handle_sar(Instant::ZERO, &cell) {
                        let f = o.unwrap();
                        got.push((f.mid, f.payload.to_vec()));
                    }
                }
                prop_assert_eq!(r.active(), 0);
                prop_assert_eq!(r.errors, 0);
                // Per MID, frames come out in the order they went in.
                for (mid, _) in &queues {
                    let want: Vec<&Vec<u8>> = expected.iter().filter(|(m, _)| m == mid).map(|(_, f)| f).collect();
                    let have: Vec<&Vec<u8>> = got.iter().filter(|(m, _)| m == mid).map(|(_, f)| f).collect();
                    prop_assert_eq!(want, have);
                }
            }

            #[test]
            fn random_bytes_never_panic(
                bytes in proptest::collection::vec(any::<u8>(), 0..200),
            ) {
                if let Ok(v) = SarPdu::new_checked(&bytes[..]) {
                    let _ = (v.segment_type(), v.sn(), v.mid(), v.li(), v.crc(), v.data(), v.verify_crc());
                }
                let _ = SarPduRepr::parse(&SarPdu::new_unchecked(&bytes[..]));
                if let Ok(v) = CpcsPdu::new_checked(&bytes[..]) {
                    let _ = (v.cpi(), v.btag(), v.basize(), v.al(), v.etag(), v.length(), v.payload(), v.pad());
                }
                let _ = CpcsPduRepr::parse(&CpcsPdu::new_unchecked(&bytes[..]));
                let mut r = Reassembler::new(ReassemblerConfig { max_mids: 4, max_sdu: 500, ..Default::default() });
                for chunk in bytes.chunks(48) {
                    let _ = r.handle_sar(Instant::ZERO, chunk);
                }
                while r.expire(Instant::MAX).is_some() {}
            }

            #[test]
            fn random_cells_with_good_crc_never_panic(
                cells in proptest::collection::vec(proptest::array::uniform32(any::<u8>()), 1..60),
                lis in proptest::collection::vec(0u8..64, 60),
            ) {
                // Random headers and LIs with valid CRCs reach past the CRC check.
                let mut r = Reassembler::new(ReassemblerConfig { max_mids: 3, max_sdu: 300, ..Default::default() });
                for (i, c) in cells.iter().enumerate() {
                    let mut sar = [0u8; 48];
                    sar[..32].copy_from_slice(c);
                    sar[1] &= 0x03; // few MIDs, so that PDUs collide
                    sar[0] &= 0xfc;
                    let mut v = SarPdu::new_unchecked(&mut sar[..]);
                    v.set_li(if i % 2 == 0 { 44 } else { lis[i] });
                    v.fill_crc();
                    let _ = r.handle_sar(Instant::from_picos(i as u64), &sar);
                    let _ = r.expire(Instant::from_picos(i as u64));
                }
            }
        }
    }
}
