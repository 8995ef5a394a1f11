//! The transmit side of AAL3/4 (ITU-T I.363.3): [`Segmenter`] cuts a CPCS-PDU into
//! SAR-PDUs (SSM, or BOM, COMs and EOM) and numbers them per MID; [`Segments`] produces
//! them one at a time from the borrowed payload, without assembling the PDU in memory.

use super::sar::write_sar;
use super::{CpcsPduRepr, MAX_MID, SAR_PAYLOAD_LEN, SAR_PDU_LEN, SegmentType, cpcs_pad_len};
use crate::WireError;

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
