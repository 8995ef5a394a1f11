//! The AAL3/4 SAR sublayer (ITU-T I.363.3, SAR sublayer PDU structure): the 48-octet
//! SAR-PDU as a zero-copy view ([`SarPdu`]) and a validated representation
//! ([`SarPduRepr`]), its segment types and LI rules ([`SegmentType`]), and the CRC-10
//! field ([`sar_crc10`]). The rules read here are set out in the documentation of
//! [`crate::aal34`].

use super::{LI_ABORT, MAX_MID, SAR_PAYLOAD_LEN, SAR_PDU_LEN, SAR_WHAT, field};
use crate::WireError;
use crate::crc;

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
        WireError::check_len(SAR_WHAT, SAR_PDU_LEN, buffer.as_ref().len())?;
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
        WireError::check_len(SAR_WHAT, SAR_PDU_LEN, bytes.len())?;
        let bytes = &bytes[..SAR_PDU_LEN];
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
        let out = WireError::room(SAR_WHAT, SAR_PDU_LEN, sar.bm())?;
        write_sar(out, self.segment_type, self.sn, self.mid, self.li(), |p| {
            p[..self.payload.len()].copy_from_slice(self.payload)
        });
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
pub(super) fn write_sar(
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
