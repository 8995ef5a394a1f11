//! The receive side of AAL3/4 (ITU-T I.363.3): [`Reassembler`] rebuilds CPCS-SDUs from
//! the interleaved SAR-PDUs of up to 1024 MIDs, sans-IO (the caller passes the time in),
//! and reports each frame ([`Aal34Frame`]) or discard ([`Aal34Error`]) as it happens.

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use super::{
    CPCS_HEADER_LEN, CPCS_WHAT, CpcsPdu, CpcsPduRepr, MAX_CPCS_SDU, MAX_MID, REASM_WHAT, SarPdu,
    SarPduRepr, SegmentType, cpcs_pdu_len,
};
use crate::WireError;

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
    /// Buffers of finished PDUs, kept to be reused. (`spare` and `done` are visible to
    /// the tests beside this file, which check that buffers are reused.)
    pub(super) spare: Vec<Vec<u8>>,
    /// The CPCS-PDU of the frame last delivered (the frame borrows it).
    pub(super) done: Vec<u8>,
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
