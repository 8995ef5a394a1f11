//! Cell streams: a run of raw 53-octet cells, as a file or a pipe holds them, taken through
//! the receive side of the ATM layer and AAL5 (the HEC receiver of ITU-T I.432.1 §4.3.2,
//! then per-VC reassembly of I.363.5), and out again as frames, a report of every fault, a
//! capture file or a cell listing. [`Roundtrip`] sends a buffer the whole way:
//! segmentation, a damaged link, reassembly, and the check that AAL5 caught exactly the
//! frames that were damaged.
//!
//! This is the logic behind `atmlab wire reassemble`, `pcap`, `decode` and `roundtrip`,
//! kept here so that the command line only parses and dispatches, and so that it is
//! tested as a library. It stays sans-IO: the stream is a byte slice the caller read;
//! frames, captures and listings go to an [`io::Write`] the caller hands in; and which
//! cells a round trip damages is the caller's choice (a list, or its own random number
//! generator behind [`pick_flips`]), so that this crate needs no source of randomness.
//!
//! A stream carries no timestamps: its cells are timed as if back to back on a
//! 155.52 Mb/s link, [`CELL_TIME`] apart, which is what the capture files show.
//!
//! - [`process`] is the pipeline itself: it hands each finished frame, good or bad, to a
//!   closure as an [`Event`] and returns a [`Report`] of counts and [`Fault`]s.
//! - [`reassemble`] writes the good frames' SDUs to a writer; [`capture`] writes every
//!   frame (bad ones as received) to a [`PcapWriter`]; [`decode`] lists the cells.
//! - [`Roundtrip`] (in `roundtrip.rs`) is the end-to-end check.

mod roundtrip;
#[cfg(test)]
mod tests;

pub use roundtrip::{BitFlip, Received, Roundtrip, pick_flips};

use core::fmt;
use std::collections::BTreeMap;
use std::io::{self, Write};

use atmlab_core::ids::VcId;
use atmlab_core::time::{Duration, Instant};

use crate::WireError;
use crate::aal5::{ReassemblerConfig, VcReassembler};
use crate::cell::{CELL_LEN, Cell, CellHeader, HeaderFormat, HecOutcome, HecReceiver, vci};
use crate::pcap::{Direction, PcapWriter, SunAtmRecord};

/// The time between two cells of a stream: one 53-octet cell on a 155.52 Mb/s link
/// (2.726 us), so that the times a capture shows are those of a busy OC-3 line.
pub const CELL_TIME: Duration = Duration::from_picos(2_726_337);

/// What [`process`] hands its caller, one event per finished frame or discarded cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A good frame: its SDU and the whole CPCS-PDU it came in.
    Frame {
        /// The VC it arrived on.
        vc: VcId,
        /// The time of its last cell.
        time: Instant,
        /// The CPCS-SDU.
        sdu: &'a [u8],
        /// The CPCS-PDU: SDU, PAD and trailer.
        pdu: &'a [u8],
    },
    /// A bad frame, or a cell discarded on its own (then `vc` is `None`).
    Bad {
        /// The VC, when the header could be trusted.
        vc: Option<VcId>,
        /// The time of the cell that ended it.
        time: Instant,
        /// The PDU as received, when the reassembler kept one (empty otherwise).
        pdu: &'a [u8],
    },
}

impl<'a> Event<'a> {
    /// The VC and capture record of this event: a good frame, or a bad one with the PDU
    /// as received. `None` for a cell discarded alone, or a bad frame of which nothing
    /// was kept (an oversize frame): there is nothing to show.
    pub fn record(&self) -> Option<(VcId, SunAtmRecord<'a>)> {
        let (vc, time, pdu) = match *self {
            Event::Frame { vc, time, pdu, .. } => (vc, time, pdu),
            Event::Bad {
                vc: Some(vc),
                time,
                pdu,
            } if !pdu.is_empty() => (vc, time, pdu),
            Event::Bad { .. } => return None,
        };
        let rec = SunAtmRecord {
            time,
            direction: Direction::Received,
            vpi: vc.vpi.0,
            vci: vc.vci.0,
            pdu,
        };
        Some((vc, rec))
    }
}

/// One thing wrong with a stream, as [`Report::faults`] lists them. Its `Display` is the
/// line a user reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The stream ends with a partial cell, which is not read.
    PartialCell {
        /// Octets left over.
        octets: usize,
    },
    /// A cell whose header error the HEC receiver could not correct; it was discarded.
    HeaderDiscarded {
        /// The cell's index in the stream, from 0.
        cell: usize,
    },
    /// A cell the reassembler refused before it could be given to a VC.
    Cell {
        /// The cell's index in the stream.
        cell: usize,
        /// Why.
        error: WireError,
    },
    /// A frame the reassembler discarded.
    Frame {
        /// Its VC.
        vc: VcId,
        /// Its number on the VC, from 1, counting good and bad frames.
        frame: u64,
        /// The index of the cell that ended it.
        last_cell: usize,
        /// Why.
        error: WireError,
    },
    /// The stream ended inside a frame: no end-of-frame cell came.
    Unfinished {
        /// Its VC.
        vc: VcId,
        /// Octets received of it.
        octets: usize,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::PartialCell { octets } => write!(
                f,
                "input ends with {octets} octet(s) that do not make a whole 53-octet cell"
            ),
            Fault::HeaderDiscarded { cell } => write!(
                f,
                "cell {cell}: header error the HEC cannot correct; cell discarded"
            ),
            Fault::Cell { cell, error } => write!(f, "cell {cell}: {error}"),
            Fault::Frame {
                vc,
                frame,
                last_cell,
                error,
            } => write!(
                f,
                "VC {vc} frame {frame} (ending at cell {last_cell}): {error}"
            ),
            Fault::Unfinished { vc, octets } => write!(
                f,
                "VC {vc}: input ends inside a frame ({octets} octets received, no end-of-frame cell)"
            ),
        }
    }
}

/// Counts and faults of one cell stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Whole cells read.
    pub cells: u64,
    /// Good frames delivered.
    pub frames: u64,
    /// Octets of SDU in the good frames.
    pub octets: u64,
    /// Cells whose header had a single-bit error that the HEC corrected.
    pub corrected_headers: u64,
    /// Everything that went wrong, in stream order (unfinished frames last, by VC).
    pub faults: Vec<Fault>,
}

impl Report {
    /// True when nothing went wrong (a corrected header is not a fault).
    pub fn is_clean(&self) -> bool {
        self.faults.is_empty()
    }

    /// The lines to show a user: one per fault, then a note of corrected headers if any.
    pub fn diagnostics(&self) -> impl Iterator<Item = String> + '_ {
        let note = (self.corrected_headers > 0).then(|| {
            format!(
                "note: {} cell header(s) had a single-bit error, corrected by the HEC",
                self.corrected_headers
            )
        });
        self.faults.iter().map(ToString::to_string).chain(note)
    }
}

/// Runs a stream of cells through the I.432.1 HEC receiver and per-VC AAL5 reassembly,
/// handing every finished frame and discarded cell to `sink`. A partial cell at the end
/// stops the run; frames still open at the end are reported as unfinished.
pub fn process(
    data: &[u8],
    format: HeaderFormat,
    config: ReassemblerConfig,
    mut sink: impl FnMut(Event<'_>),
) -> Report {
    let mut rep = Report::default();
    let mut hec = HecReceiver::new();
    let mut d = VcReassembler::new(format, config);
    // Frames seen per VC, good and bad, to number the faults.
    let mut frame_no: BTreeMap<VcId, u64> = BTreeMap::new();
    for (i, chunk) in data.chunks(CELL_LEN).enumerate() {
        let time = Instant::ZERO + CELL_TIME.saturating_mul(i as u64);
        let Ok(mut cell) = <[u8; CELL_LEN]>::try_from(chunk) else {
            rep.faults.push(Fault::PartialCell {
                octets: chunk.len(),
            });
            break;
        };
        rep.cells += 1;
        match hec.check(&mut cell) {
            HecOutcome::Valid => {}
            HecOutcome::Corrected(_) => rep.corrected_headers += 1,
            HecOutcome::Discard => {
                rep.faults.push(Fault::HeaderDiscarded { cell: i });
                sink(Event::Bad {
                    vc: None,
                    time,
                    pdu: &[],
                });
                continue;
            }
        }
        // Keep only plain values from the outcome, so that the reassembler can be asked
        // for the PDU as received.
        let (vc, result) = match d.handle_cell(time, &cell) {
            None => continue,
            Some((vc, Ok(f))) => (vc, Ok(f.sdu.len())),
            Some((vc, Err(e))) => (vc, Err(e)),
        };
        let Some(vc) = vc else {
            if let Err(error) = result {
                rep.faults.push(Fault::Cell { cell: i, error });
            }
            continue;
        };
        let n = frame_no.entry(vc).or_default();
        *n += 1;
        let pdu = d.vc(vc).map(|r| r.last_pdu()).unwrap_or_default();
        match result {
            Ok(len) => {
                rep.frames += 1;
                rep.octets += len as u64;
                sink(Event::Frame {
                    vc,
                    time,
                    sdu: &pdu[..len.min(pdu.len())],
                    pdu,
                });
            }
            Err(error) => {
                rep.faults.push(Fault::Frame {
                    vc,
                    frame: *n,
                    last_cell: i,
                    error,
                });
                sink(Event::Bad {
                    vc: Some(vc),
                    time,
                    pdu,
                });
            }
        }
    }
    let mut open: Vec<(VcId, usize)> = d
        .vcs()
        .filter(|(_, r)| r.pending() > 0)
        .map(|(vc, r)| (*vc, r.pending()))
        .collect();
    open.sort_unstable();
    rep.faults.extend(
        open.into_iter()
            .map(|(vc, octets)| Fault::Unfinished { vc, octets }),
    );
    rep
}

/// Reassembles a stream and writes every good frame's SDU to `out`, in order. Frames are
/// written as they complete; after a write error nothing more is written, the stream is
/// still read to the end, and the error is returned in place of the report.
pub fn reassemble<W: Write + ?Sized>(
    data: &[u8],
    format: HeaderFormat,
    config: ReassemblerConfig,
    out: &mut W,
) -> io::Result<Report> {
    let mut write_err = None;
    let report = process(data, format, config, |ev| {
        if let Event::Frame { sdu, .. } = ev
            && write_err.is_none()
        {
            write_err = out.write_all(sdu).err();
        }
    });
    match write_err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// A frame [`capture`] could not record, and why (a VPI above 255 does not fit the
/// capture's pseudo-header; or the writer failed).
#[derive(Debug)]
pub struct NotCaptured {
    /// The frame's VC.
    pub vc: VcId,
    /// The writer's error.
    pub error: io::Error,
}

impl fmt::Display for NotCaptured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VC {}: frame not captured: {}", self.vc, self.error)
    }
}

/// What [`capture`] did.
#[derive(Debug)]
pub struct Captured {
    /// The stream's report.
    pub report: Report,
    /// Frames that could not be recorded; every other frame was.
    pub not_captured: Vec<NotCaptured>,
}

impl Captured {
    /// True when the stream was clean and every frame was recorded.
    pub fn is_clean(&self) -> bool {
        self.report.is_clean() && self.not_captured.is_empty()
    }
}

/// Reassembles a stream and records every frame in `w`: good frames, and bad ones as
/// received (so that Wireshark shows what arrived, and flags it). A frame that cannot be
/// recorded is listed and the capture goes on. The caller finishes the writer.
pub fn capture<W: Write>(
    data: &[u8],
    format: HeaderFormat,
    config: ReassemblerConfig,
    w: &mut PcapWriter<W>,
) -> Captured {
    let mut not_captured = Vec::new();
    let report = process(data, format, config, |ev| {
        if let Some((vc, rec)) = ev.record()
            && let Err(error) = w.write(&rec)
        {
            not_captured.push(NotCaptured { vc, error });
        }
    });
    Captured {
        report,
        not_captured,
    }
}

/// One line of a cell listing: where a cell goes, what it carries and whether its header
/// is intact. Its `Display` is the line `atmlab wire decode` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellLine {
    /// The cell's index in the stream, from 0.
    pub index: usize,
    /// The header fields as received (the HEC not applied).
    pub header: CellHeader,
    /// The HEC octet as received.
    pub hec: u8,
    /// Whether the HEC matches the header.
    pub hec_ok: bool,
}

impl CellLine {
    /// Reads the header of `cell` (no correction: a listing shows the cell as it is).
    pub fn of<T: AsRef<[u8]>>(index: usize, cell: &Cell<T>, format: HeaderFormat) -> CellLine {
        CellLine {
            index,
            header: CellHeader::parse_unchecked(cell, format),
            hec: cell.hec(),
            hec_ok: cell.verify_hec(),
        }
    }
}

impl fmt::Display for CellLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CellLine { index, header, .. } = *self;
        write!(f, "{index:>6} {}/{}", header.vpi, header.vci)?;
        if let Some(n) = vci::name(header.vci) {
            write!(f, " ({n})")?;
        }
        if header.format == HeaderFormat::Uni {
            write!(f, " gfc={}", header.gfc)?;
        }
        write!(
            f,
            " pt={} clp={} hec={:02x} {}",
            header.pti.name(),
            u8::from(header.clp),
            self.hec,
            if self.hec_ok { "ok" } else { "BAD" },
        )
    }
}

/// What [`decode`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Listing {
    /// Whole cells listed.
    pub cells: usize,
    /// Cells whose HEC did not match.
    pub bad_hec: usize,
    /// Octets of a partial cell at the end, if any (not listed).
    pub partial: Option<usize>,
}

impl Listing {
    /// True when every cell was whole and every HEC matched.
    pub fn is_clean(&self) -> bool {
        self.bad_hec == 0 && self.partial.is_none()
    }
}

/// Writes one [`CellLine`] per cell of `data` to `out`, each as it is read.
pub fn decode<W: Write + ?Sized>(
    data: &[u8],
    format: HeaderFormat,
    out: &mut W,
) -> io::Result<Listing> {
    let mut listing = Listing::default();
    for (i, chunk) in data.chunks(CELL_LEN).enumerate() {
        let Ok(c) = Cell::new_checked(chunk) else {
            listing.partial = Some(chunk.len());
            break;
        };
        let line = CellLine::of(i, &c, format);
        listing.cells += 1;
        listing.bad_hec += usize::from(!line.hec_ok);
        writeln!(out, "{line}")?;
    }
    Ok(listing)
}
