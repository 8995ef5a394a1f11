//! AAL5: the CPCS-PDU, its segmentation into cells and per-VC reassembly (ITU-T I.363.5).
//!
//! ```text
//!  CPCS-PDU = CPCS-SDU (1..=65535 octets) | PAD (0..=47) | UU | CPI | Length(2) | CRC-32(4)
//! ```
//!
//! The PDU is a whole number of 48-octet cell payloads; the last cell carries the 8-octet
//! trailer and is marked by the SDU-type bit of its PT (I.363.5 §9.1: "ATM-user-to-ATM-user
//! indication" = 1). The CRC-32 (§10.1, [`crate::crc::crc32`]) covers the whole PDU except
//! the CRC field. Length 0 is the abort code (§9.2.2.2), so an empty SDU cannot be sent.
//!
//! - [`CpcsPdu`] is a zero-copy view over a reassembled PDU; [`CpcsPduRepr`] its owned form.
//! - [`Segmenter`] turns one SDU into cells (an iterator of `[u8; 53]`, no allocation).
//! - [`Reassembler`] rebuilds one VC's frames, sans-IO: the shell passes the time in. It
//!   keeps "incomplete" (`None`) apart from "invalid" (`Some(Err(..))`): CRC error, length
//!   error, abort, oversize or timeout.
//! - [`VcReassembler`] demultiplexes cells of many VCs onto one reassembler each.
//!
//! Panic contract: nothing here panics on any input bytes. Reassembly allocates only when
//! a frame is longer than any this VC has seen; the steady state allocates nothing.

use std::collections::HashMap;

use atmlab_core::ids::VcId;
use atmlab_core::time::{Duration, Instant};

use crate::WireError;
use crate::cell::{CELL_LEN, Cell, CellHeader, HeaderFormat, PAYLOAD_LEN, Pti};
use crate::crc::{CRC32_AAL5, crc32};

/// Octets in the CPCS-PDU trailer.
pub const TRAILER_LEN: usize = 8;
/// The largest CPCS-SDU (the Length field is 16 bits).
pub const MAX_SDU: usize = 65_535;

const WHAT: &str = "AAL5 CPCS-PDU";

/// Field offsets within the trailer, counted from the end of the PDU.
pub mod field {
    /// CPCS user-to-user indication.
    pub const UU: usize = 8;
    /// Common part indicator.
    pub const CPI: usize = 7;
    /// Length of the CPCS-SDU (2 octets, big-endian).
    pub const LENGTH: usize = 6;
    /// CRC-32 (4 octets, big-endian).
    pub const CRC: usize = 4;
}

/// The length of the CPCS-PDU (SDU + pad + trailer) that carries an `sdu_len`-octet SDU.
pub const fn pdu_len(sdu_len: usize) -> usize {
    (sdu_len + TRAILER_LEN).div_ceil(PAYLOAD_LEN) * PAYLOAD_LEN
}

/// The number of cells that carry an `sdu_len`-octet SDU.
pub const fn cells_for(sdu_len: usize) -> usize {
    pdu_len(sdu_len) / PAYLOAD_LEN
}

/// A zero-copy view of a whole CPCS-PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpcsPdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> CpcsPdu<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        CpcsPdu { buffer }
    }

    /// Wraps a buffer, checking that it is a non-empty whole number of cell payloads.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let got = buffer.as_ref().len();
        WireError::check_len(WHAT, PAYLOAD_LEN, got)?;
        if got % PAYLOAD_LEN != 0 {
            return Err(WireError::Malformed {
                what: WHAT,
                reason: "length is not a multiple of 48 octets",
            });
        }
        Ok(CpcsPdu { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn tail(&self, from_end: usize) -> u8 {
        let b = self.buffer.as_ref();
        b[b.len() - from_end]
    }

    /// CPCS-UU.
    pub fn uu(&self) -> u8 {
        self.tail(field::UU)
    }
    /// CPI.
    pub fn cpi(&self) -> u8 {
        self.tail(field::CPI)
    }
    /// The Length field.
    pub fn length(&self) -> u16 {
        u16::from_be_bytes([self.tail(field::LENGTH), self.tail(field::LENGTH - 1)])
    }
    /// The CRC-32 field.
    pub fn crc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let n = b.len();
        u32::from_be_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]])
    }
    /// The CRC-32 computed over the PDU, CRC field excluded.
    pub fn compute_crc(&self) -> u32 {
        let b = self.buffer.as_ref();
        crc32(&b[..b.len() - field::CRC])
    }
    /// True when the carried CRC matches.
    pub fn verify_crc(&self) -> bool {
        self.crc() == self.compute_crc()
    }
    /// Octets available for SDU and pad (the PDU less its trailer).
    pub fn body_len(&self) -> usize {
        self.buffer.as_ref().len() - TRAILER_LEN
    }
    /// The SDU as the Length field delimits it, if the Length is consistent.
    pub fn sdu(&self) -> Option<&[u8]> {
        let len = usize::from(self.length());
        let body = self.body_len();
        (len > 0 && len <= body && body - len < PAYLOAD_LEN).then(|| &self.buffer.as_ref()[..len])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CpcsPdu<T> {
    fn tail_mut(&mut self, from_end: usize) -> &mut u8 {
        let b = self.buffer.as_mut();
        let n = b.len();
        &mut b[n - from_end]
    }
    /// Sets CPCS-UU.
    pub fn set_uu(&mut self, v: u8) {
        *self.tail_mut(field::UU) = v;
    }
    /// Sets CPI.
    pub fn set_cpi(&mut self, v: u8) {
        *self.tail_mut(field::CPI) = v;
    }
    /// Sets the Length field.
    pub fn set_length(&mut self, v: u16) {
        let [a, b] = v.to_be_bytes();
        *self.tail_mut(field::LENGTH) = a;
        *self.tail_mut(field::LENGTH - 1) = b;
    }
    /// Sets the CRC field as given.
    pub fn set_crc(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        let n = b.len();
        b[n - 4..].copy_from_slice(&v.to_be_bytes());
    }
    /// Computes and writes the CRC.
    pub fn fill_crc(&mut self) {
        let c = self.compute_crc();
        self.set_crc(c);
    }
}

/// The owned, validated form of a CPCS-PDU: the SDU and the two user fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpcsPduRepr<'a> {
    /// The CPCS-SDU, 1..=65535 octets.
    pub sdu: &'a [u8],
    /// CPCS user-to-user indication (transparent to AAL5).
    pub uu: u8,
    /// Common part indicator (0 in I.363.5; carried as given).
    pub cpi: u8,
}

impl<'a> CpcsPduRepr<'a> {
    /// Parses and validates a PDU: CRC first, then Length (abort, overrun, pad > 47).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(pdu: &CpcsPdu<&'a T>) -> Result<Self, WireError> {
        let bytes: &'a [u8] = pdu.buffer.as_ref();
        let view = CpcsPdu::new_checked(bytes)?;
        check_pdu(bytes)?;
        Ok(CpcsPduRepr {
            sdu: &bytes[..usize::from(view.length())],
            uu: view.uu(),
            cpi: view.cpi(),
        })
    }

    fn check(&self) -> Result<(), WireError> {
        check_sdu_len(self.sdu.len())
    }

    /// Octets [`CpcsPduRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        pdu_len(self.sdu.len())
    }

    /// Writes the PDU (SDU, zero pad, trailer, CRC) into the front of `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let n = self.buffer_len();
        let out = WireError::room(WHAT, n, out)?;
        out[..self.sdu.len()].copy_from_slice(self.sdu);
        out[self.sdu.len()..n - TRAILER_LEN].fill(0);
        let mut v = CpcsPdu::new_unchecked(out);
        v.set_uu(self.uu);
        v.set_cpi(self.cpi);
        v.set_length(self.sdu.len() as u16);
        v.fill_crc();
        Ok(n)
    }
}

fn check_sdu_len(len: usize) -> Result<(), WireError> {
    if len == 0 {
        return Err(WireError::Malformed {
            what: "AAL5 CPCS-SDU",
            reason: "an empty SDU cannot be sent: Length 0 is the abort code (I.363.5 9.2.2.2)",
        });
    }
    if len > MAX_SDU {
        return Err(WireError::FieldRange {
            field: "AAL5 CPCS-SDU length",
            value: len as u64,
            max: MAX_SDU as u64,
        });
    }
    Ok(())
}

/// Validates a complete PDU (a non-empty multiple of 48 octets): CRC, then Length.
fn check_pdu(pdu: &[u8]) -> Result<(), WireError> {
    let v = CpcsPdu::new_unchecked(pdu);
    let (received, computed) = (v.crc(), v.compute_crc());
    if received != computed {
        return Err(WireError::Crc {
            what: WHAT,
            received,
            computed,
        });
    }
    let len = usize::from(v.length());
    if len == 0 {
        return Err(WireError::Malformed {
            what: WHAT,
            reason: "aborted by the sender (Length = 0)",
        });
    }
    let body = v.body_len();
    if len > body || body - len >= PAYLOAD_LEN {
        return Err(WireError::Length {
            what: WHAT,
            field: len,
            actual: body,
        });
    }
    Ok(())
}

/// Turns one CPCS-SDU into cells: an iterator of complete 53-octet cells with HEC, the
/// last marked end-of-frame. Allocation-free; the CRC is computed as cells are produced.
#[derive(Clone)]
pub struct Segmenter<'a> {
    header: CellHeader,
    /// The header of every cell but the last, and of the last (SDU-type 1), HEC included:
    /// computed once per frame rather than once per cell.
    mid_header: [u8; 5],
    last_header: [u8; 5],
    sdu: &'a [u8],
    uu: u8,
    cpi: u8,
    cells: usize,
    next: usize,
    crc: crc::Digest<'static, u32, crc::Table<16>>,
}

impl core::fmt::Debug for Segmenter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Segmenter")
            .field("header", &self.header)
            .field("sdu_len", &self.sdu.len())
            .field("cells", &self.cells)
            .field("next", &self.next)
            .finish()
    }
}

impl<'a> Segmenter<'a> {
    /// Segments `sdu` onto the VC of `header` (its PT is replaced: user data, SDU-type 0
    /// except on the last cell; its CLP is kept).
    pub fn new(header: CellHeader, sdu: &'a [u8], uu: u8, cpi: u8) -> Result<Self, WireError> {
        header.check()?;
        check_sdu_len(sdu.len())?;
        let with_pti = |end| {
            CellHeader {
                pti: Pti::user(end),
                ..header
            }
            .to_bytes()
        };
        Ok(Segmenter {
            header,
            mid_header: with_pti(false),
            last_header: with_pti(true),
            sdu,
            uu,
            cpi,
            cells: cells_for(sdu.len()),
            next: 0,
            crc: CRC32_AAL5.digest(),
        })
    }

    /// Writes the next cell into `out`; false when all cells have been produced.
    pub fn next_into(&mut self, out: &mut [u8; CELL_LEN]) -> bool {
        if self.next >= self.cells {
            return false;
        }
        let last = self.next + 1 == self.cells;
        out[..5].copy_from_slice(if last {
            &self.last_header
        } else {
            &self.mid_header
        });
        let start = self.next * PAYLOAD_LEN;
        let payload = &mut out[5..];
        // The last cell (or two) may carry no SDU octets at all, only pad and trailer.
        let rest = self.sdu.get(start..).unwrap_or_default();
        let from_sdu = rest.len().min(PAYLOAD_LEN);
        payload[..from_sdu].copy_from_slice(&rest[..from_sdu]);
        payload[from_sdu..].fill(0);
        if last {
            let len = self.sdu.len() as u16;
            payload[40] = self.uu;
            payload[41] = self.cpi;
            payload[42..44].copy_from_slice(&len.to_be_bytes());
            self.crc.update(&payload[..44]);
            let crc = core::mem::replace(&mut self.crc, CRC32_AAL5.digest()).finalize();
            payload[44..].copy_from_slice(&crc.to_be_bytes());
        } else {
            self.crc.update(payload);
        }
        self.next += 1;
        true
    }

    /// Appends all remaining cells to `out`.
    pub fn write_all(mut self, out: &mut Vec<u8>) {
        out.reserve((self.cells - self.next) * CELL_LEN);
        let mut c = [0u8; CELL_LEN];
        while self.next_into(&mut c) {
            out.extend_from_slice(&c);
        }
    }
}

impl Iterator for Segmenter<'_> {
    type Item = [u8; CELL_LEN];
    fn next(&mut self) -> Option<[u8; CELL_LEN]> {
        let mut c = [0u8; CELL_LEN];
        self.next_into(&mut c).then_some(c)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.cells - self.next;
        (n, Some(n))
    }
}
impl ExactSizeIterator for Segmenter<'_> {}

/// Segments `sdu` and returns its cells back to back (a convenience over [`Segmenter`]).
pub fn segment(header: CellHeader, sdu: &[u8], uu: u8, cpi: u8) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::new();
    Segmenter::new(header, sdu, uu, cpi)?.write_all(&mut out);
    Ok(out)
}

/// A frame delivered by the reassembler. Borrows the reassembler's buffer until its next
/// call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aal5Frame<'a> {
    /// The CPCS-SDU.
    pub sdu: &'a [u8],
    /// CPCS-UU.
    pub uu: u8,
    /// CPI.
    pub cpi: u8,
}

/// What one call to the reassembler produced: `None` while a frame is incomplete.
pub type Outcome<'a> = Option<Result<Aal5Frame<'a>, WireError>>;

/// Reassembly settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblerConfig {
    /// The largest SDU accepted (at most 65535). Longer frames are discarded and reported
    /// as oversize as soon as they pass the limit.
    pub max_sdu: usize,
    /// The reassembly timer: a partial frame older than this is discarded and reported by
    /// [`Reassembler::handle_timeout`]. `None` disables the timer.
    pub timeout: Option<Duration>,
}

impl Default for ReassemblerConfig {
    fn default() -> Self {
        ReassemblerConfig {
            max_sdu: MAX_SDU,
            timeout: None,
        }
    }
}

/// Counters of one reassembler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReassemblyStats {
    /// Cells received.
    pub cells: u64,
    /// Good frames delivered.
    pub frames: u64,
    /// Frames with a CRC error.
    pub crc_errors: u64,
    /// Frames with an inconsistent Length field (or Length 0: aborted).
    pub length_errors: u64,
    /// Frames discarded for exceeding the maximum SDU size.
    pub oversize: u64,
    /// Partial frames discarded by the reassembly timer.
    pub timeouts: u64,
}

/// Reassembles the frames of one VC, sans-IO.
///
/// Call order for a shell: whenever the deadline from [`Reassembler::poll_timeout`]
/// passes, call [`Reassembler::handle_timeout`]; for each user-data cell of the VC, call
/// [`Reassembler::handle_cell`]. `handle_cell` never expires a frame by itself, so a shell
/// that never calls `handle_timeout` gets a reassembler without a timer.
#[derive(Debug, Clone)]
pub struct Reassembler {
    config: ReassemblerConfig,
    buf: Vec<u8>,
    /// The buffer holds a finished PDU (delivered or bad), cleared by the next cell.
    finished: bool,
    /// Dropping cells until the end of an oversize frame.
    discarding: bool,
    started: Instant,
    stats: ReassemblyStats,
}

impl Reassembler {
    /// A reassembler with `config`; `max_sdu` is clamped to 65535.
    pub fn new(mut config: ReassemblerConfig) -> Self {
        config.max_sdu = config.max_sdu.min(MAX_SDU);
        Reassembler {
            config,
            buf: Vec::new(),
            finished: false,
            discarding: false,
            started: Instant::ZERO,
            stats: ReassemblyStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// Octets of an incomplete frame held now.
    pub fn pending(&self) -> usize {
        if self.finished { 0 } else { self.buf.len() }
    }

    /// The octets of the last finished PDU as received (good or bad, trailer included),
    /// until the next cell arrives; empty otherwise. Captures record bad frames from this.
    pub fn last_pdu(&self) -> &[u8] {
        if self.finished { &self.buf } else { &[] }
    }

    fn max_pdu(&self) -> usize {
        pdu_len(self.config.max_sdu)
    }

    /// Handles one cell payload of this VC; `end_of_frame` is the SDU-type bit of its PT.
    pub fn handle_cell(
        &mut self,
        now: Instant,
        payload: &[u8; PAYLOAD_LEN],
        end_of_frame: bool,
    ) -> Outcome<'_> {
        self.stats.cells += 1;
        if self.finished {
            self.buf.clear();
            self.finished = false;
        }
        if self.discarding {
            // The rest of an oversize frame, already reported: drop through its last cell.
            if end_of_frame {
                self.discarding = false;
            }
            return None;
        }
        if self.buf.is_empty() {
            self.started = now;
        }
        if self.buf.len() + PAYLOAD_LEN > self.max_pdu() {
            let size = self.buf.len() + PAYLOAD_LEN;
            self.buf.clear();
            self.discarding = !end_of_frame;
            self.stats.oversize += 1;
            return Some(Err(WireError::Oversize {
                what: WHAT,
                size: size.saturating_sub(TRAILER_LEN),
                max: self.config.max_sdu,
            }));
        }
        self.buf.extend_from_slice(payload);
        if !end_of_frame {
            return None;
        }
        self.finished = true;
        match check_pdu(&self.buf) {
            Ok(()) => {
                self.stats.frames += 1;
                let v = CpcsPdu::new_unchecked(&self.buf[..]);
                let (uu, cpi, len) = (v.uu(), v.cpi(), usize::from(v.length()));
                Some(Ok(Aal5Frame {
                    sdu: &self.buf[..len],
                    uu,
                    cpi,
                }))
            }
            Err(e) => {
                match e {
                    WireError::Crc { .. } => self.stats.crc_errors += 1,
                    _ => self.stats.length_errors += 1,
                }
                Some(Err(e))
            }
        }
    }

    /// When the reassembly timer of the frame in progress expires, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = self.config.timeout?;
        (self.pending() > 0).then(|| self.started.saturating_add(t))
    }

    /// Expires the frame in progress if its timer has run out at `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<WireError> {
        let deadline = self.poll_timeout()?;
        if now < deadline {
            return None;
        }
        let octets = self.buf.len();
        self.buf.clear();
        self.stats.timeouts += 1;
        Some(WireError::Timeout { what: WHAT, octets })
    }
}

/// Reassembly across many VCs: one [`Reassembler`] per (VPI, VCI), created on the VC's
/// first cell. Non-user-data cells (OAM, RM) are ignored.
#[derive(Debug, Clone)]
pub struct VcReassembler {
    format: HeaderFormat,
    config: ReassemblerConfig,
    vcs: HashMap<VcId, Reassembler>,
    /// Cells whose header failed the HEC check.
    pub hec_errors: u64,
    /// Cells that were not user data (OAM, RM, reserved).
    pub non_user_cells: u64,
}

impl VcReassembler {
    /// A demultiplexer for cells with `format` headers.
    pub fn new(format: HeaderFormat, config: ReassemblerConfig) -> Self {
        VcReassembler {
            format,
            config,
            vcs: HashMap::new(),
            hec_errors: 0,
            non_user_cells: 0,
        }
    }

    /// Handles one 53-octet cell. Returns the VC and the reassembler's outcome; a cell with
    /// a bad HEC yields the HEC error with no VC (its header cannot be trusted).
    pub fn handle_cell(
        &mut self,
        now: Instant,
        cell: &[u8],
    ) -> Option<(Option<VcId>, Result<Aal5Frame<'_>, WireError>)> {
        let c = match Cell::new_checked(cell) {
            Ok(c) => c,
            Err(e) => return Some((None, Err(e))),
        };
        let hdr = match CellHeader::parse(&c, self.format) {
            Ok(h) => h,
            Err(e) => {
                self.hec_errors += 1;
                return Some((None, Err(e)));
            }
        };
        let Pti::UserData { sdu_type, .. } = hdr.pti else {
            self.non_user_cells += 1;
            return None;
        };
        let vc = VcId::new(hdr.vpi, hdr.vci);
        let config = self.config;
        let r = self
            .vcs
            .entry(vc)
            .or_insert_with(|| Reassembler::new(config));
        let payload: &[u8; PAYLOAD_LEN] = c.payload().try_into().ok()?;
        r.handle_cell(now, payload, sdu_type).map(|o| (Some(vc), o))
    }

    /// The reassembler of `vc`, if it has seen a cell.
    pub fn vc(&self, vc: VcId) -> Option<&Reassembler> {
        self.vcs.get(&vc)
    }

    /// All VCs seen, with their reassemblers.
    pub fn vcs(&self) -> impl Iterator<Item = (&VcId, &Reassembler)> {
        self.vcs.iter()
    }

    /// Expires timed-out frames on every VC, returning what was discarded.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<(VcId, WireError)> {
        let mut out: Vec<_> = self
            .vcs
            .iter_mut()
            .filter_map(|(vc, r)| r.handle_timeout(now).map(|e| (*vc, e)))
            .collect();
        out.sort_by_key(|(vc, _)| *vc);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr() -> CellHeader {
        CellHeader::uni(1, 100, Pti::user(false))
    }

    /// Reassembles a run of cells of one VC and returns every outcome, owned.
    fn reassemble_all(r: &mut Reassembler, cells: &[u8]) -> Vec<Result<Vec<u8>, WireError>> {
        let mut out = Vec::new();
        for c in cells.chunks(CELL_LEN) {
            let cell = Cell::new_checked(c).unwrap();
            let p: &[u8; 48] = cell.payload().try_into().unwrap();
            if let Some(o) = r.handle_cell(Instant::ZERO, p, cell.pti().is_end_of_frame()) {
                out.push(o.map(|f| f.sdu.to_vec()));
            }
        }
        out
    }

    /// Known answers from the AAL5 CRC examples of I.363.5 (as used by ATM Forum test
    /// suites): 40-octet SDUs, UU = CPI = 0, Length = 0x28, one cell.
    #[test]
    fn crc32_known_pdus() {
        let cases: [([u8; 40], u32); 3] = [
            ([0x00; 40], 0x864D_7F99),
            ([0xFF; 40], 0xC55E_457A),
            (core::array::from_fn(|i| i as u8 + 1), 0xBF67_1ED0),
        ];
        for (sdu, crc) in cases {
            let mut pdu = vec![0xa5; 48];
            let n = CpcsPduRepr {
                sdu: &sdu,
                uu: 0,
                cpi: 0,
            }
            .emit(&mut pdu)
            .unwrap();
            assert_eq!(n, 48);
            let v = CpcsPdu::new_checked(&pdu[..]).unwrap();
            assert_eq!(v.length(), 0x28);
            assert_eq!(v.crc(), crc, "sdu {:02x?}", &sdu[..4]);
            assert_eq!(&pdu[40..44], &[0, 0, 0, 0x28]);
        }
    }

    #[test]
    fn trailer_accessors_in_dirty_buffer() {
        let mut v = CpcsPdu::new_checked(vec![0xa5; 96]).unwrap();
        v.set_uu(0x12);
        v.set_cpi(0x34);
        v.set_length(0x5678);
        v.set_crc(0x9abc_def0);
        assert_eq!(
            (v.uu(), v.cpi(), v.length(), v.crc()),
            (0x12, 0x34, 0x5678, 0x9abc_def0)
        );
        let b = v.into_inner();
        assert_eq!(&b[88..], &[0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0]);
        assert_eq!(&b[..88], &[0xa5; 88][..]);
        assert!(CpcsPdu::new_checked(&[0u8; 47][..]).is_err());
        assert!(CpcsPdu::new_checked(&[0u8; 50][..]).is_err());
    }

    #[test]
    fn pdu_sizes() {
        assert_eq!(pdu_len(1), 48);
        assert_eq!(pdu_len(40), 48);
        assert_eq!(pdu_len(41), 96);
        assert_eq!(cells_for(9180), 192);
        assert_eq!(cells_for(65535), 1366);
    }

    #[test]
    fn segment_marks_last_cell_and_round_trips() {
        let sdu: Vec<u8> = (0..1500u32).map(|i| (i * 7) as u8).collect();
        let cells = segment(hdr(), &sdu, 0x5a, 0).unwrap();
        assert_eq!(cells.len(), 32 * CELL_LEN);
        for (i, c) in cells.chunks(CELL_LEN).enumerate() {
            let c = Cell::new_checked(c).unwrap();
            assert!(c.verify_hec());
            assert_eq!((c.vpi(HeaderFormat::Uni), c.vci()), (1, 100));
            assert_eq!(c.pti().is_end_of_frame(), i == 31);
        }
        let mut r = Reassembler::new(ReassemblerConfig::default());
        assert_eq!(reassemble_all(&mut r, &cells), vec![Ok(sdu.clone())]);
        assert_eq!(r.stats().frames, 1);
        // The delivered frame carries its UU.
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let mut last = None;
        for c in cells.chunks(CELL_LEN) {
            let cell = Cell::new_checked(c).unwrap();
            if let Some(Ok(f)) = r.handle_cell(
                Instant::ZERO,
                cell.payload().try_into().unwrap(),
                cell.pti().is_end_of_frame(),
            ) {
                last = Some((f.uu, f.cpi, f.sdu.len()));
            }
        }
        assert_eq!(last, Some((0x5a, 0, 1500)));
    }

    #[test]
    fn trailer_alone_in_the_last_cell() {
        // 41..=47 octets: the SDU fills the first cell partly and the second cell holds
        // only pad and trailer (found by the round-trip property test).
        for n in 41..=88 {
            let sdu: Vec<u8> = (0..n as u8).collect();
            let cells = segment(hdr(), &sdu, 1, 2).unwrap();
            assert_eq!(cells.len() / CELL_LEN, cells_for(n));
            let mut r = Reassembler::new(ReassemblerConfig::default());
            assert_eq!(reassemble_all(&mut r, &cells), vec![Ok(sdu)]);
        }
    }

    #[test]
    fn empty_and_huge_sdus_refused() {
        assert!(matches!(
            Segmenter::new(hdr(), &[], 0, 0),
            Err(WireError::Malformed { .. })
        ));
        let big = vec![0u8; 65_536];
        assert!(matches!(
            Segmenter::new(hdr(), &big, 0, 0),
            Err(WireError::FieldRange { .. })
        ));
        let bad_vpi = CellHeader { vpi: 300, ..hdr() };
        assert!(Segmenter::new(bad_vpi, b"x", 0, 0).is_err());
    }

    #[test]
    fn crc_error_detected_and_counted() {
        let mut cells = segment(hdr(), &[7u8; 100], 0, 0).unwrap();
        cells[5 + 10] ^= 0x01; // a payload bit of the first cell
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let out = reassemble_all(&mut r, &cells);
        assert!(matches!(out[..], [Err(WireError::Crc { .. })]));
        assert_eq!(r.stats().crc_errors, 1);
        assert_eq!(r.last_pdu().len(), 144);
    }

    #[test]
    fn lost_last_cell_merges_and_fails() {
        let a = segment(hdr(), &[1u8; 100], 0, 0).unwrap();
        let b = segment(hdr(), &[2u8; 100], 0, 0).unwrap();
        let mut stream = a[..2 * CELL_LEN].to_vec(); // a without its last cell
        stream.extend_from_slice(&b);
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let out = reassemble_all(&mut r, &stream);
        assert_eq!(out.len(), 1);
        assert!(out[0].is_err());
        // The next frame is clean again.
        assert_eq!(reassemble_all(&mut r, &b), vec![Ok(vec![2u8; 100])]);
    }

    #[test]
    fn length_errors() {
        // A PDU with a correct CRC but a Length larger than the body.
        let mut pdu = vec![0u8; 48];
        let mut v = CpcsPdu::new_unchecked(&mut pdu[..]);
        v.set_length(41);
        v.fill_crc();
        assert!(matches!(
            check_pdu(&pdu),
            Err(WireError::Length {
                field: 41,
                actual: 40,
                ..
            })
        ));
        // Pad of 48 or more: Length too small for the number of cells.
        let mut pdu = vec![0u8; 96];
        let mut v = CpcsPdu::new_unchecked(&mut pdu[..]);
        v.set_length(10);
        v.fill_crc();
        assert!(matches!(check_pdu(&pdu), Err(WireError::Length { .. })));
        // Length 0: abort.
        let mut pdu = vec![0u8; 48];
        CpcsPdu::new_unchecked(&mut pdu[..]).fill_crc();
        assert!(matches!(check_pdu(&pdu), Err(WireError::Malformed { .. })));
        let pdu_view = CpcsPdu::new_unchecked(&pdu[..]);
        assert!(CpcsPduRepr::parse(&pdu_view).is_err());
    }

    #[test]
    fn oversize_is_reported_once_and_recovered() {
        let cfg = ReassemblerConfig {
            max_sdu: 100,
            timeout: None,
        };
        let mut r = Reassembler::new(cfg);
        let big = segment(hdr(), &[3u8; 500], 0, 0).unwrap();
        let out = reassemble_all(&mut r, &big);
        assert!(matches!(
            out[..],
            [Err(WireError::Oversize { max: 100, .. })]
        ));
        let ok = segment(hdr(), &[4u8; 100], 0, 0).unwrap();
        assert_eq!(reassemble_all(&mut r, &ok), vec![Ok(vec![4u8; 100])]);
        assert_eq!(r.stats().oversize, 1);
    }

    #[test]
    fn reassembly_timer() {
        let cfg = ReassemblerConfig {
            max_sdu: MAX_SDU,
            timeout: Some(Duration::from_millis(10)),
        };
        let mut r = Reassembler::new(cfg);
        let cells = segment(hdr(), &[5u8; 100], 0, 0).unwrap();
        let first = Cell::new_checked(&cells[..CELL_LEN]).unwrap();
        let t0 = Instant::from_picos(1_000);
        assert!(
            r.handle_cell(t0, first.payload().try_into().unwrap(), false)
                .is_none()
        );
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_millis(10)));
        assert_eq!(r.handle_timeout(t0 + Duration::from_millis(9)), None);
        assert_eq!(
            r.handle_timeout(t0 + Duration::from_millis(10)),
            Some(WireError::Timeout {
                what: WHAT,
                octets: 48
            })
        );
        assert_eq!(r.pending(), 0);
        assert_eq!(r.poll_timeout(), None);
        assert_eq!(reassemble_all(&mut r, &cells), vec![Ok(vec![5u8; 100])]);
    }

    #[test]
    fn vc_demultiplexing() {
        let a = segment(CellHeader::uni(0, 100, Pti::user(false)), &[1u8; 60], 0, 0).unwrap();
        let b = segment(CellHeader::uni(0, 200, Pti::user(false)), &[2u8; 60], 0, 0).unwrap();
        // Interleave the two VCs cell by cell.
        let mut stream = Vec::new();
        for (x, y) in a.chunks(CELL_LEN).zip(b.chunks(CELL_LEN)) {
            stream.extend_from_slice(x);
            stream.extend_from_slice(y);
        }
        let mut d = VcReassembler::new(HeaderFormat::Uni, ReassemblerConfig::default());
        let mut got = Vec::new();
        for c in stream.chunks(CELL_LEN) {
            if let Some((vc, o)) = d.handle_cell(Instant::ZERO, c) {
                got.push((vc.unwrap().to_string(), o.unwrap().sdu.to_vec()));
            }
        }
        assert_eq!(
            got,
            vec![
                ("0/100".into(), vec![1u8; 60]),
                ("0/200".into(), vec![2u8; 60])
            ]
        );
        let mut bad = a[..CELL_LEN].to_vec();
        bad[0] ^= 0xff;
        assert!(matches!(
            d.handle_cell(Instant::ZERO, &bad),
            Some((None, Err(WireError::Hec { .. })))
        ));
        assert!(matches!(
            d.handle_cell(Instant::ZERO, &bad[..10]),
            Some((None, Err(WireError::Truncated { .. })))
        ));
    }
}
