//! The AAL5 round trip (ITU-T I.363.5): a buffer cut into frames, segmented into cells,
//! damaged on the way by flipping payload bits in chosen cells, reassembled, and checked.
//! The check is the point of the exercise: every frame with a damaged cell must be
//! reported bad, and every other frame must come back intact and in order, so the CRC-32
//! must miss nothing and spoil nothing.
//!
//! Which cells to damage is the caller's choice: a list of [`BitFlip`]s, or
//! [`pick_flips`] with the caller's own random number generator, so that a seeded run
//! repeats exactly without this crate depending on one.

use std::collections::BTreeSet;
use std::io::Write;

use super::{Event, Report, process};
use crate::WireError;
use crate::aal5::{self, ReassemblerConfig, Segmenter};
use crate::cell::{CELL_LEN, CellHeader, HEADER_LEN, HeaderFormat, PAYLOAD_LEN};
use crate::pcap::PcapWriter;

/// One payload bit to flip in one cell of a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BitFlip {
    /// The cell's index among the cells sent, from 0.
    pub cell: usize,
    /// The bit within the 48-octet payload, 0-383, most significant bit of the first
    /// octet first.
    pub bit: usize,
}

/// Chooses `count` distinct cells of `cells` (all of them if `count` is larger) and one
/// payload bit in each, with `below(n)`, which must return a uniformly drawn number
/// below `n`. The cells are drawn first, until enough distinct ones have come up; then a
/// bit for each, in cell order. The result is in cell order.
pub fn pick_flips(
    cells: usize,
    count: usize,
    mut below: impl FnMut(usize) -> usize,
) -> Vec<BitFlip> {
    let mut hit = BTreeSet::new();
    while hit.len() < count.min(cells) {
        // A generator that strays out of range cannot name a cell that is not there.
        hit.insert(below(cells) % cells);
    }
    let bits = PAYLOAD_LEN * 8;
    hit.into_iter()
        .map(|cell| BitFlip {
            cell,
            bit: below(bits) % bits,
        })
        .collect()
}

/// A buffer on its way through AAL5: segmented at [`Roundtrip::segment`], damaged with
/// [`Roundtrip::corrupt`], received and checked with [`Roundtrip::receive`].
#[derive(Debug, Clone)]
pub struct Roundtrip<'a> {
    data: &'a [u8],
    mtu: usize,
    /// The header format of the cells, which the receiver reads them with.
    format: HeaderFormat,
    cells: Vec<u8>,
    frames: u64,
    /// The cells damaged.
    hit: BTreeSet<usize>,
}

/// What came back from a round trip, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The report of the receiving stream: good frames, and a fault per bad one.
    pub report: Report,
    /// The SDUs of the good frames, in order.
    pub octets: Vec<u8>,
    /// Frames reported bad (every fault of the report).
    pub frames_bad: u64,
    /// Frames that had at least one damaged cell.
    pub frames_hit: u64,
    /// True when the buffer came back byte for byte.
    pub identical: bool,
    /// True when exactly the damaged frames were caught and every other frame came back
    /// intact and in order.
    pub check_passed: bool,
}

impl<'a> Roundtrip<'a> {
    /// Cuts `data` into frames of `mtu` octets (the last may be shorter) and segments each
    /// into AAL5 cells with `header` (UU and CPI 0). Fails on an `mtu` of 0 or above
    /// [`aal5::MAX_SDU`], or a header that does not fit its format.
    pub fn segment(data: &'a [u8], header: CellHeader, mtu: usize) -> Result<Self, WireError> {
        if mtu == 0 || mtu > aal5::MAX_SDU {
            return Err(WireError::FieldRange {
                field: "AAL5 round-trip frame size (MTU)",
                value: mtu as u64,
                max: aal5::MAX_SDU as u64,
            });
        }
        let mut cells = Vec::new();
        let mut frames = 0u64;
        for frame in data.chunks(mtu) {
            Segmenter::new(header, frame, 0, 0)?.write_all(&mut cells);
            frames += 1;
        }
        Ok(Roundtrip {
            data,
            mtu,
            format: header.format,
            cells,
            frames,
            hit: BTreeSet::new(),
        })
    }

    /// Frames sent.
    pub fn frames_sent(&self) -> u64 {
        self.frames
    }

    /// Cells sent.
    pub fn cell_count(&self) -> usize {
        self.cells.len() / CELL_LEN
    }

    /// The cells as they will be received (damage included), 53 octets each.
    pub fn cells(&self) -> &[u8] {
        &self.cells
    }

    /// Cells damaged so far (each counted once).
    pub fn cells_corrupted(&self) -> usize {
        self.hit.len()
    }

    /// Flips each bit listed. A cell listed twice is damaged twice (and counted once). A
    /// flip past the last cell or the last payload bit is refused, before any is made.
    pub fn corrupt(&mut self, flips: &[BitFlip]) -> Result<(), WireError> {
        let cells = self.cell_count();
        let bits = PAYLOAD_LEN * 8;
        for f in flips {
            if f.cell >= cells {
                return Err(WireError::FieldRange {
                    field: "cell to corrupt",
                    value: f.cell as u64,
                    max: cells.saturating_sub(1) as u64,
                });
            }
            if f.bit >= bits {
                return Err(WireError::FieldRange {
                    field: "payload bit to flip",
                    value: f.bit as u64,
                    max: (bits - 1) as u64,
                });
            }
        }
        for f in flips {
            self.hit.insert(f.cell);
            self.cells[f.cell * CELL_LEN + HEADER_LEN + f.bit / 8] ^= 0x80 >> (f.bit % 8);
        }
        Ok(())
    }

    /// Receives the cells (default reassembly limits), records every frame
    /// in `capture` if given (bad ones as received), and checks the result. A capture
    /// write error stops the capture and is returned; the caller finishes the writer.
    pub fn receive<W: Write>(
        &self,
        mut capture: Option<&mut PcapWriter<W>>,
    ) -> std::io::Result<Received> {
        let mut octets = Vec::with_capacity(self.data.len());
        let mut write_err = None;
        let report = process(
            &self.cells,
            self.format,
            ReassemblerConfig::default(),
            |ev| {
                if let Event::Frame { sdu, .. } = ev {
                    octets.extend_from_slice(sdu);
                }
                if let Some(w) = capture.as_deref_mut()
                    && write_err.is_none()
                    && let Some((_, rec)) = ev.record()
                {
                    write_err = w.write(&rec).err();
                }
            },
        );
        if let Some(e) = write_err {
            return Err(e);
        }
        let frames_bad = report.faults.len() as u64;
        let mut expected = Vec::with_capacity(self.data.len());
        let mut frames_hit = 0u64;
        let mut first_cell = 0;
        for frame in self.data.chunks(self.mtu) {
            let n = aal5::cells_for(frame.len());
            if self.hit.range(first_cell..first_cell + n).next().is_some() {
                frames_hit += 1;
            } else {
                expected.extend_from_slice(frame);
            }
            first_cell += n;
        }
        let check_passed = octets == expected && frames_bad == frames_hit;
        Ok(Received {
            identical: octets == self.data,
            report,
            octets,
            frames_bad,
            frames_hit,
            check_passed,
        })
    }
}
