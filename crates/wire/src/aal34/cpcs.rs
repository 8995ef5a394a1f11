//! The AAL3/4 common part convergence sublayer (ITU-T I.363.3, CPCS-PDU structure): the
//! CPCS-PDU as a zero-copy view ([`CpcsPdu`]) and a validated representation
//! ([`CpcsPduRepr`]), and the arithmetic of its PAD, its length and the SAR-PDUs that
//! carry it.

use super::{
    CPCS_HEADER_LEN, CPCS_MIN_LEN, CPCS_TRAILER_LEN, CPCS_WHAT, MAX_CPCS_SDU, SAR_PAYLOAD_LEN,
    field,
};
use crate::WireError;
use crate::envelope;

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
        WireError::check_len(CPCS_WHAT, CPCS_MIN_LEN, buffer.as_ref().len())?;
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
        envelope::at_end(self.b(), from_end)
    }

    /// Common part indicator (0: BASize and Length count octets).
    #[inline]
    pub fn cpi(&self) -> u8 {
        self.b()[field::CPI]
    }

    /// Beginning tag.
    #[inline]
    pub fn btag(&self) -> u8 {
        envelope::tag(self.b())
    }

    /// Buffer allocation size.
    #[inline]
    pub fn basize(&self) -> u16 {
        envelope::basize(self.b())
    }

    /// The alignment octet of the trailer.
    #[inline]
    pub fn al(&self) -> u8 {
        self.b()[self.trailer_at(field::AL_FROM_END)]
    }

    /// End tag.
    #[inline]
    pub fn etag(&self) -> u8 {
        envelope::end_tag(self.b())
    }

    /// The Length field: payload octets, PAD excluded.
    #[inline]
    pub fn length(&self) -> u16 {
        envelope::length(self.b())
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
        envelope::set_tag(self.bm(), btag);
    }

    /// Sets the buffer allocation size.
    #[inline]
    pub fn set_basize(&mut self, basize: u16) {
        envelope::set_basize(self.bm(), basize);
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
        envelope::set_end_tag(self.bm(), etag);
    }

    /// Sets the Length field.
    #[inline]
    pub fn set_length(&mut self, length: u16) {
        envelope::set_length(self.bm(), length);
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
        envelope::check_tags(CPCS_WHAT, bytes)?;
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
    pub(super) fn header(&self) -> [u8; 4] {
        envelope::word(self.btag, self.basize)
    }

    /// The four trailer octets.
    pub(super) fn trailer(&self) -> [u8; 4] {
        // `check` holds the payload to 65535 octets before anything is emitted.
        envelope::word(self.btag, self.payload.len() as u16)
    }

    /// Writes the PDU into the first [`CpcsPduRepr::buffer_len`] octets of `buf`, after
    /// checking the fields; returns the octets written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let need = self.buffer_len();
        let out = WireError::room(CPCS_WHAT, need, buf)?;
        let n = self.payload.len();
        out[..CPCS_HEADER_LEN].copy_from_slice(&self.header());
        out[CPCS_HEADER_LEN..CPCS_HEADER_LEN + n].copy_from_slice(self.payload);
        out[CPCS_HEADER_LEN + n..need - CPCS_TRAILER_LEN].fill(0);
        out[need - CPCS_TRAILER_LEN..].copy_from_slice(&self.trailer());
        Ok(need)
    }
}
