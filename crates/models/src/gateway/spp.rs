//! The SAR Protocol Processor (SPP), paper 004 §2 and §5 (Fig. 10, "SPP Model"): the
//! forward pipeline that reassembles MCHIP segments from ATM cells, and the reverse
//! pipeline that fragments FDDI frames into cells.
//!
//! # Forward pipeline, as a sans-IO core ([`Spp`])
//!
//! Fig. 10's blocks map onto [`Spp::handle_cell`] in order: *Strip Headers* (the caller
//! hands in the cell's VCI, sequence number and F bit), *Sequence Checker* (against the
//! Expected Sequence Number table), *Write Cell?* (is there a reassembly queue for the
//! connection with room), *Reassembly Buffer* (the write) and *Update Queue Status* (a
//! completed frame makes its queue busy and emits a read request for the MPP, the
//! *Request* block, polled with [`Spp::poll_request`]). The MPP's acknowledgement
//! ([`Spp::handle_ack`]) is the *Read Frame* block: the queue is read out and idle again.
//!
//! The five state tables of §5 are kept exactly as the paper lists them, as integer
//! vectors indexed by connection (via the VCI) or by queue number, and are readable for
//! functional verification ([`Spp::tables`]):
//!
//! | table | index | values |
//! | --- | --- | --- |
//! | Queue Number | connection | the queue being assembled into, or none |
//! | Queue Status | queue | `Idle` (empty or partial) / `Busy` (a complete frame awaits the MPP) |
//! | Frame Status | queue | `NoError` / `InError` |
//! | Expected Sequence Number | connection | SAR sequence number of the next cell |
//! | Start Sequence Number | connection | first sequence number of the segment after the current one |
//!
//! # Decisions the paper leaves open, and how we read them
//!
//! - **Reassembly buffer**: two queues per connection, each holding one frame of at most
//!   the maximum FDDI frame ("we allow for reassembly of a maximum of two full size FDDI
//!   frames per active connection", §2). A queue is allocated to a connection when a
//!   cell needs one (lazily), and released when the MPP acknowledges its frame.
//! - **Write Cell?**: a cell is dropped when its connection has no queue to write into
//!   (both queues hold complete frames the MPP has not read: "the reassembly buffer is
//!   full", §3) or when its queue is full. These are the SPP's cell losses (§3).
//! - **A damaged segment is still reassembled**: once a cell of a segment is missing, the
//!   rest of the segment is written and the frame is marked `InError`, so that the MPP's
//!   *Drop Frame?* block discards it (§5: "The frame status information is forwarded to
//!   and used by the MPP to determine if the frame should be dropped or forwarded"). So
//!   one lost cell costs the whole frame, as §6.1 observes, while the SPP's cell loss
//!   counts only the cells it really dropped.
//! - **Lost framing cell**: segments have the size negotiated at set-up (Table 3's
//!   "Frame Size Assembled"), so a cell whose sequence number reaches the Start Sequence
//!   Number belongs to the next segment: the current frame is closed `InError` and the
//!   new cell starts the next one (itself `InError` if its first cells are missing). An F
//!   bit before the negotiated size ends a shorter segment.
//! - **Out of sequence**: a cell older than the expected number (late or duplicated) is
//!   dropped and changes nothing; a cell ahead of it means the cells between were lost.
//!   Sequence numbers are 16-bit and compared in serial-number arithmetic.
//!
//! # Reverse pipeline ([`Fragmenter`])
//!
//! *SAR Lookup* (the connection's next sequence number), *Read Payload* and *Generate ATM
//! Cells*: a frame of `n` data octets becomes `ceil(n/45)` cells, the last with F set.

use std::collections::{BTreeMap, VecDeque};

use atmlab_core::time::Instant;

use super::sar::{DATA_OCTETS, SarCell};
use crate::ModelsError;

/// A reassembly queue's number (an index into the Queue Status and Frame Status tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueId(pub u16);

/// Queue Status table entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueStatus {
    /// Empty, or holding a partially reassembled frame.
    Idle,
    /// Holding a completely reassembled frame that the MPP has not read yet.
    Busy,
}

/// Frame Status table entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameStatus {
    /// Every cell so far arrived in sequence and was written.
    NoError,
    /// A cell of the frame is missing.
    InError,
}

/// What the SPP sees of a cell after *Strip Headers*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SppCell {
    /// The VCI.
    pub vci: u16,
    /// The SAR sequence number.
    pub seq: u16,
    /// The F (framing) bit: last cell of its segment.
    pub framing: bool,
}

impl From<&SarCell> for SppCell {
    fn from(c: &SarCell) -> Self {
        SppCell {
            vci: c.vci,
            seq: c.seq,
            framing: c.framing,
        }
    }
}

/// Why the SPP dropped a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// No reassembly queue free for the connection: both hold frames the MPP has not read.
    NoQueue,
    /// The connection's queue holds a maximum-size frame already.
    QueueFull,
    /// Older than the expected sequence number (late or duplicated).
    OutOfSequence,
    /// No connection with this VCI.
    UnknownVci,
}

/// What became of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellOutcome {
    /// Written into `queue`; `completed` when it ended the frame there.
    Written {
        /// The queue.
        queue: QueueId,
        /// The cell completed the frame (a read request was issued).
        completed: bool,
    },
    /// Dropped (a cell loss of the SPP).
    Dropped(DropReason),
}

/// A read request for the MPP: a complete frame waits in `queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// The queue holding it.
    pub queue: QueueId,
    /// Its connection.
    pub vci: u16,
    /// Frame Status at completion.
    pub status: FrameStatus,
    /// Cells written (its data octets are `cells * 45`).
    pub cells: u32,
    /// When its first written cell arrived at the SPP (for the latency of §3).
    pub first_arrival: Instant,
}

/// The SPP's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SppConfig {
    /// The active connections' VCIs (each gets the queues below).
    pub vcis: Vec<u16>,
    /// Reassembly queues per connection (2: "two full size FDDI frames per connection").
    pub queues_per_connection: u16,
    /// Cells one queue holds (one maximum-size frame).
    pub queue_cells: u32,
    /// The segment size negotiated at set-up, in cells (Table 3: 85).
    pub segment_cells: u32,
}

/// A snapshot of the state tables of §5 for one connection and its queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionTables {
    /// Queue Number.
    pub queue_number: Option<QueueId>,
    /// Expected Sequence Number.
    pub expected_seq: u16,
    /// Start Sequence Number.
    pub start_seq: u16,
    /// (queue, Queue Status, Frame Status, cells held) for each of its queues.
    pub queues: Vec<(QueueId, QueueStatus, FrameStatus, u32)>,
}

/// Counters of the forward pipeline since the last [`Spp::reset_counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SppCounters {
    /// Cells that reached the SPP.
    pub cells_in: u64,
    /// Cells written into the reassembly buffer.
    pub cells_written: u64,
    /// Cells dropped, any reason.
    pub cells_dropped: u64,
    /// Frames completed (read requests issued), with or without error.
    pub frames_completed: u64,
    /// Segments of which no cell reached a reassembly queue: lost in the SPP as a whole,
    /// so the MPP never sees them.
    pub segments_lost: u64,
}

/// The SPP's forward pipeline (sans-IO).
///
/// Call [`Spp::handle_cell`] for each cell in arrival order, then drain
/// [`Spp::poll_request`]; call [`Spp::handle_ack`] when the MPP has read or dropped a
/// queue's frame.
#[derive(Debug, Clone)]
pub struct Spp {
    cfg: SppConfig,
    /// VCI to connection index (the VCI look-up of the tables).
    slot: BTreeMap<u16, usize>,
    // Per-connection tables.
    queue_number: Vec<Option<QueueId>>,
    expected_seq: Vec<u16>,
    start_seq: Vec<u16>,
    // Per-queue tables.
    queue_status: Vec<QueueStatus>,
    frame_status: Vec<FrameStatus>,
    queue_fill: Vec<u32>,
    queue_first: Vec<Instant>,
    requests: VecDeque<ReadRequest>,
    occupied_cells: u64,
    counters: SppCounters,
}

/// `a - b` in 16-bit serial-number arithmetic.
fn serial_diff(a: u16, b: u16) -> i32 {
    i32::from(a.wrapping_sub(b) as i16)
}

impl Spp {
    /// An SPP with every connection at sequence number 0 and every queue idle.
    pub fn new(cfg: SppConfig) -> Result<Self, ModelsError> {
        const M: &str = "Spp";
        let bad = |param, reason: String| ModelsError::InvalidParameter {
            model: M,
            param,
            reason,
        };
        if cfg.vcis.is_empty() {
            return Err(bad("vcis", "at least one connection is needed".into()));
        }
        if cfg.queues_per_connection == 0 {
            return Err(bad("queues_per_connection", "must be at least 1".into()));
        }
        if cfg.segment_cells == 0 || cfg.segment_cells > cfg.queue_cells {
            return Err(bad(
                "segment_cells",
                format!(
                    "must be 1..={} (what one reassembly queue holds), got {}",
                    cfg.queue_cells, cfg.segment_cells
                ),
            ));
        }
        if cfg.segment_cells > 16384 {
            return Err(bad(
                "segment_cells",
                "must stay well inside the 16-bit sequence space (at most 16384)".into(),
            ));
        }
        let queues = cfg.vcis.len() * usize::from(cfg.queues_per_connection);
        if queues > usize::from(u16::MAX) {
            return Err(bad("vcis", format!("{queues} queues is too many")));
        }
        let mut slot = BTreeMap::new();
        for (i, v) in cfg.vcis.iter().enumerate() {
            if slot.insert(*v, i).is_some() {
                return Err(bad("vcis", format!("VCI {v} is listed twice")));
            }
        }
        let n = cfg.vcis.len();
        let seg = cfg.segment_cells as u16;
        Ok(Spp {
            slot,
            queue_number: vec![None; n],
            expected_seq: vec![0; n],
            start_seq: vec![seg; n],
            queue_status: vec![QueueStatus::Idle; queues],
            frame_status: vec![FrameStatus::NoError; queues],
            queue_fill: vec![0; queues],
            queue_first: vec![Instant::ZERO; queues],
            requests: VecDeque::new(),
            occupied_cells: 0,
            counters: SppCounters::default(),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SppConfig {
        &self.cfg
    }

    /// The counters.
    pub fn counters(&self) -> SppCounters {
        self.counters
    }

    /// Zeroes the counters (end of the warm-up); the state is kept.
    pub fn reset_counters(&mut self) {
        self.counters = SppCounters::default();
    }

    /// Cells held in the reassembly buffer now.
    pub fn occupied_cells(&self) -> u64 {
        self.occupied_cells
    }

    /// The state tables of the connection `vci` and its queues.
    pub fn tables(&self, vci: u16) -> Option<ConnectionTables> {
        let c = *self.slot.get(&vci)?;
        let queues = self
            .queues_of(c)
            .map(|q| {
                let i = usize::from(q.0);
                (
                    q,
                    self.queue_status[i],
                    self.frame_status[i],
                    self.queue_fill[i],
                )
            })
            .collect();
        Some(ConnectionTables {
            queue_number: self.queue_number[c],
            expected_seq: self.expected_seq[c],
            start_seq: self.start_seq[c],
            queues,
        })
    }

    fn queues_of(&self, c: usize) -> impl Iterator<Item = QueueId> + use<> {
        let k = self.cfg.queues_per_connection;
        let first = c as u16 * k;
        (first..first + k).map(QueueId)
    }

    /// First sequence number of the segment being assembled on connection `c`.
    fn segment_start(&self, c: usize) -> u16 {
        self.start_seq[c].wrapping_sub(self.cfg.segment_cells as u16)
    }

    /// *Sequence Checker*, *Write Cell?*, *Reassembly Buffer* and *Update Queue Status*
    /// for one cell arriving at `now`.
    pub fn handle_cell(&mut self, now: Instant, cell: SppCell) -> CellOutcome {
        self.counters.cells_in += 1;
        let Some(&c) = self.slot.get(&cell.vci) else {
            return self.drop_cell(DropReason::UnknownVci);
        };
        let ahead = serial_diff(cell.seq, self.expected_seq[c]);
        if ahead < 0 {
            return self.drop_cell(DropReason::OutOfSequence);
        }
        if ahead > 0 {
            // Cells were lost before this one.
            if serial_diff(cell.seq, self.start_seq[c]) >= 0 {
                // Among them the framing cell of the current segment: close it in error,
                // then move the segment boundary up to the one this cell belongs to.
                self.close_segment(c, true);
                let seg = self.cfg.segment_cells as u16;
                while serial_diff(cell.seq, self.start_seq[c]) >= 0 {
                    self.start_seq[c] = self.start_seq[c].wrapping_add(seg);
                    if serial_diff(cell.seq, self.start_seq[c]) >= 0 {
                        // A whole segment went by without a single cell reaching us.
                        self.counters.segments_lost += 1;
                    }
                }
            } else if let Some(q) = self.queue_number[c] {
                self.frame_status[usize::from(q.0)] = FrameStatus::InError;
            }
        }
        self.expected_seq[c] = cell.seq.wrapping_add(1);
        let last = cell.framing || cell.seq.wrapping_add(1) == self.start_seq[c];

        // Write Cell?
        let queue = match self.queue_number[c] {
            Some(q) => Some(q),
            None => self.allocate(c, now, cell.seq),
        };
        let outcome = match queue {
            None => self.drop_cell(DropReason::NoQueue),
            Some(q) => {
                let i = usize::from(q.0);
                if self.queue_fill[i] >= self.cfg.queue_cells {
                    self.frame_status[i] = FrameStatus::InError;
                    self.drop_cell(DropReason::QueueFull)
                } else {
                    self.queue_fill[i] += 1;
                    self.occupied_cells += 1;
                    self.counters.cells_written += 1;
                    CellOutcome::Written {
                        queue: q,
                        completed: last,
                    }
                }
            }
        };
        if last {
            self.close_segment(c, false);
            self.start_seq[c] = cell
                .seq
                .wrapping_add(1)
                .wrapping_add(self.cfg.segment_cells as u16);
        }
        outcome
    }

    fn drop_cell(&mut self, why: DropReason) -> CellOutcome {
        self.counters.cells_dropped += 1;
        CellOutcome::Dropped(why)
    }

    /// Gives connection `c` an empty idle queue for the cell `seq`, if one is free.
    fn allocate(&mut self, c: usize, now: Instant, seq: u16) -> Option<QueueId> {
        let q = self.queues_of(c).find(|q| {
            let i = usize::from(q.0);
            self.queue_status[i] == QueueStatus::Idle && self.queue_fill[i] == 0
        })?;
        let i = usize::from(q.0);
        // A frame whose first cells did not reach a queue (dropped for want of one, or
        // lost upstream) is in error from the start: the Start Sequence Number says where
        // the segment began.
        self.frame_status[i] = if seq == self.segment_start(c) {
            FrameStatus::NoError
        } else {
            FrameStatus::InError
        };
        self.queue_first[i] = now;
        self.queue_number[c] = Some(q);
        Some(q)
    }

    /// Ends the segment being assembled on `c`: its queue (if it got one) becomes busy and
    /// a read request goes to the MPP; `error` marks it in error first.
    fn close_segment(&mut self, c: usize, error: bool) {
        match self.queue_number[c].take() {
            Some(q) => {
                let i = usize::from(q.0);
                if error {
                    self.frame_status[i] = FrameStatus::InError;
                }
                self.queue_status[i] = QueueStatus::Busy;
                self.counters.frames_completed += 1;
                self.requests.push_back(ReadRequest {
                    queue: q,
                    vci: self.cfg.vcis[c],
                    status: self.frame_status[i],
                    cells: self.queue_fill[i],
                    first_arrival: self.queue_first[i],
                });
            }
            None => {
                // Cells of this segment arrived but none found a queue.
                self.counters.segments_lost += 1;
            }
        }
    }

    /// The next read request for the MPP, oldest first.
    pub fn poll_request(&mut self) -> Option<ReadRequest> {
        self.requests.pop_front()
    }

    /// *Read Frame*: the MPP has read (or dropped) the frame in `queue`; the queue is idle
    /// and empty again. Acknowledging a queue that is not busy is an error.
    pub fn handle_ack(&mut self, queue: QueueId) -> Result<(), ModelsError> {
        let i = usize::from(queue.0);
        match self.queue_status.get(i) {
            Some(QueueStatus::Busy) => {
                self.queue_status[i] = QueueStatus::Idle;
                self.frame_status[i] = FrameStatus::NoError;
                self.occupied_cells -= u64::from(self.queue_fill[i]);
                self.queue_fill[i] = 0;
                Ok(())
            }
            _ => Err(ModelsError::InvalidParameter {
                model: "Spp",
                param: "queue",
                reason: format!("acknowledged queue {} holds no complete frame", queue.0),
            }),
        }
    }
}

/// The reverse pipeline's *SAR Lookup* and *Generate ATM Cells*: per-connection sequence
/// numbers and the cells of a frame.
#[derive(Debug, Clone, Default)]
pub struct Fragmenter {
    next_seq: BTreeMap<u16, u16>,
}

/// A fragmented frame: `cells` cells on `vci`, numbered from `first_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragments {
    /// The VCI.
    pub vci: u16,
    /// The first cell's sequence number.
    pub first_seq: u16,
    /// How many cells.
    pub cells: u32,
    /// Data octets of the frame.
    pub octets: u32,
}

impl Fragments {
    /// The cells, with `payload` (the frame's data, `octets` long) cut into 45-octet
    /// pieces; the last carries F.
    pub fn cells(&self, payload: &[u8]) -> Vec<SarCell> {
        let chunks: Vec<&[u8]> = if payload.is_empty() {
            vec![&[0u8][..]]
        } else {
            payload.chunks(DATA_OCTETS as usize).collect()
        };
        let n = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, d)| SarCell {
                vci: self.vci,
                seq: self.first_seq.wrapping_add(i as u16),
                framing: i + 1 == n,
                control: false,
                data: d.to_vec(),
            })
            .collect()
    }
}

impl Fragmenter {
    /// A fragmenter with every connection at sequence number 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fragments a frame of `octets` data octets for `vci`, advancing its numbers.
    pub fn fragment(&mut self, vci: u16, octets: u32) -> Fragments {
        let cells = SarCell::cells_for(octets);
        let seq = self.next_seq.entry(vci).or_insert(0);
        let first_seq = *seq;
        *seq = seq.wrapping_add(cells as u16);
        Fragments {
            vci,
            first_seq,
            cells,
            octets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::time::Duration;

    const V: u16 = 40;

    fn spp(segment: u32) -> Spp {
        Spp::new(SppConfig {
            vcis: vec![V, 41],
            queues_per_connection: 2,
            queue_cells: 90,
            segment_cells: segment,
        })
        .unwrap()
    }

    fn t(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    fn cell(seq: u16, framing: bool) -> SppCell {
        SppCell {
            vci: V,
            seq,
            framing,
        }
    }

    /// Sends cells `seqs` of an `n`-cell segment numbering (F on each segment's last).
    fn send(s: &mut Spp, seqs: impl IntoIterator<Item = u16>, n: u16) -> Vec<CellOutcome> {
        seqs.into_iter()
            .map(|q| s.handle_cell(t(u64::from(q)), cell(q, (q + 1) % n == 0)))
            .collect()
    }

    #[test]
    fn in_sequence_frames_are_reassembled() {
        let mut s = spp(4);
        let out = send(&mut s, 0..4, 4);
        assert_eq!(
            out[3],
            CellOutcome::Written {
                queue: QueueId(0),
                completed: true
            }
        );
        let r = s.poll_request().unwrap();
        assert_eq!(
            r,
            ReadRequest {
                queue: QueueId(0),
                vci: V,
                status: FrameStatus::NoError,
                cells: 4,
                first_arrival: t(0),
            }
        );
        let tb = s.tables(V).unwrap();
        assert_eq!(tb.queue_number, None);
        assert_eq!((tb.expected_seq, tb.start_seq), (4, 8));
        assert_eq!(tb.queues[0].1, QueueStatus::Busy);
        // The next frame goes into the other queue while the MPP holds the first.
        send(&mut s, 4..6, 4);
        let tb = s.tables(V).unwrap();
        assert_eq!(tb.queue_number, Some(QueueId(1)));
        assert_eq!(
            tb.queues[1],
            (QueueId(1), QueueStatus::Idle, FrameStatus::NoError, 2)
        );
        assert_eq!(s.occupied_cells(), 6);
        s.handle_ack(QueueId(0)).unwrap();
        assert_eq!(s.occupied_cells(), 2);
        assert!(s.handle_ack(QueueId(0)).is_err(), "acked twice");
        let c = s.counters();
        assert_eq!((c.cells_in, c.cells_written, c.cells_dropped), (6, 6, 0));
    }

    #[test]
    fn lost_first_cell_marks_the_frame_in_error() {
        let mut s = spp(4);
        // Cell 0 is lost upstream: cell 1 opens a queue in error.
        send(&mut s, 1..4, 4);
        let r = s.poll_request().unwrap();
        assert_eq!((r.status, r.cells), (FrameStatus::InError, 3));
        // The next segment is clean.
        s.handle_ack(r.queue).unwrap();
        send(&mut s, 4..8, 4);
        let r = s.poll_request().unwrap();
        assert_eq!((r.status, r.cells), (FrameStatus::NoError, 4));
        assert_eq!(s.counters().cells_dropped, 0);
    }

    #[test]
    fn lost_framing_cell_is_caught_by_the_start_sequence_number() {
        let mut s = spp(4);
        // Cells 0-2, then the framing cell 3 is lost; cell 4 starts the next segment.
        send(&mut s, 0..3, 4);
        assert_eq!(s.tables(V).unwrap().start_seq, 4);
        assert!(s.poll_request().is_none());
        let o = s.handle_cell(t(4), cell(4, false));
        // The first frame closed in error...
        let r = s.poll_request().unwrap();
        assert_eq!(
            (r.queue, r.status, r.cells),
            (QueueId(0), FrameStatus::InError, 3)
        );
        // ...and cell 4 opened the second one cleanly.
        assert_eq!(
            o,
            CellOutcome::Written {
                queue: QueueId(1),
                completed: false
            }
        );
        let tb = s.tables(V).unwrap();
        assert_eq!((tb.expected_seq, tb.start_seq), (5, 8));
        assert_eq!(tb.queues[1].2, FrameStatus::NoError);
        send(&mut s, 5..8, 4);
        let r = s.poll_request().unwrap();
        assert_eq!((r.status, r.cells), (FrameStatus::NoError, 4));
    }

    #[test]
    fn losing_framing_and_first_cells_of_the_next_segment() {
        let mut s = spp(4);
        send(&mut s, 0..2, 4);
        // 2, 3 (F), 4 lost: cell 5 is the second of the next segment.
        s.handle_cell(t(5), cell(5, false));
        assert_eq!(s.poll_request().unwrap().status, FrameStatus::InError);
        let tb = s.tables(V).unwrap();
        assert_eq!(tb.queues[1].2, FrameStatus::InError);
        assert_eq!(tb.start_seq, 8);
        // Whole segments lost: cell 17 after 5 skips segments 8-11 and 12-15 entirely.
        s.handle_cell(t(17), cell(17, false));
        assert_eq!(s.counters().segments_lost, 2);
        assert_eq!(s.tables(V).unwrap().start_seq, 20);
    }

    #[test]
    fn cells_out_of_sequence_are_dropped() {
        let mut s = spp(4);
        send(&mut s, 0..2, 4);
        assert_eq!(
            s.handle_cell(t(9), cell(1, false)),
            CellOutcome::Dropped(DropReason::OutOfSequence)
        );
        assert_eq!(s.tables(V).unwrap().expected_seq, 2);
        // A gap inside the segment: cell 2 lost, cell 3 arrives with F.
        s.handle_cell(t(9), cell(3, true));
        let r = s.poll_request().unwrap();
        assert_eq!((r.status, r.cells), (FrameStatus::InError, 3));
        // Late cell 2 now: dropped, and nothing changes.
        assert_eq!(
            s.handle_cell(t(10), cell(2, false)),
            CellOutcome::Dropped(DropReason::OutOfSequence)
        );
        assert_eq!(
            s.handle_cell(
                t(10),
                SppCell {
                    vci: 99,
                    seq: 0,
                    framing: false
                }
            ),
            CellOutcome::Dropped(DropReason::UnknownVci)
        );
    }

    #[test]
    fn reassembly_buffer_full_drops_cells_and_loses_the_frame() {
        let mut s = spp(4);
        // Two frames complete; the MPP reads neither (transmit buffer full).
        send(&mut s, 0..8, 4);
        assert_eq!(
            s.tables(V)
                .unwrap()
                .queues
                .iter()
                .filter(|q| q.1 == QueueStatus::Busy)
                .count(),
            2
        );
        // The third frame's first two cells find no queue.
        let out = send(&mut s, 8..10, 4);
        assert!(
            out.iter()
                .all(|o| *o == CellOutcome::Dropped(DropReason::NoQueue))
        );
        assert_eq!(s.tables(V).unwrap().queue_number, None);
        // The MPP frees queue 0: the rest of the segment is written, in error.
        let r0 = s.poll_request().unwrap();
        s.handle_ack(r0.queue).unwrap();
        send(&mut s, 10..12, 4);
        let _r1 = s.poll_request().unwrap();
        let r2 = s.poll_request().unwrap();
        assert_eq!(
            (r2.queue, r2.status, r2.cells),
            (QueueId(0), FrameStatus::InError, 2)
        );
        let c = s.counters();
        assert_eq!((c.cells_in, c.cells_written, c.cells_dropped), (12, 10, 2));
        // A segment dropped entirely (no queue from first to last cell) never reaches the MPP.
        send(&mut s, 12..16, 4);
        assert_eq!(s.counters().segments_lost, 1);
        assert!(s.poll_request().is_none());
        // The other connection is unaffected: its own queues are free.
        let o = s.handle_cell(
            t(20),
            SppCell {
                vci: 41,
                seq: 0,
                framing: false,
            },
        );
        assert_eq!(
            o,
            CellOutcome::Written {
                queue: QueueId(2),
                completed: false
            }
        );
    }

    #[test]
    fn a_queue_never_overflows() {
        // A segment longer than a queue (its F bit lost and the boundary never reached)
        // cannot be built: the configuration is refused.
        let bad = Spp::new(SppConfig {
            vcis: vec![1],
            queues_per_connection: 2,
            queue_cells: 4,
            segment_cells: 5,
        });
        assert!(bad.is_err());
        // With segment = queue size, the last cell fits exactly.
        let mut s = Spp::new(SppConfig {
            vcis: vec![V],
            queues_per_connection: 2,
            queue_cells: 4,
            segment_cells: 4,
        })
        .unwrap();
        let out = send(&mut s, 0..4, 4);
        assert!(matches!(
            out[3],
            CellOutcome::Written {
                completed: true,
                ..
            }
        ));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut s = spp(4);
        // 16,384 four-cell frames take the numbers once round the 16-bit space; the
        // frame straddling nothing ends exactly at 65535, and the next starts at 0 again.
        for f in 0..16_400u32 {
            for k in 0..4u32 {
                let q = (f * 4 + k) as u16;
                s.handle_cell(t(0), cell(q, k == 3));
            }
            let r = s.poll_request().unwrap();
            assert_eq!((r.status, r.cells), (FrameStatus::NoError, 4), "frame {f}");
            s.handle_ack(r.queue).unwrap();
        }
        assert_eq!(s.counters().cells_dropped, 0);
        assert_eq!(s.tables(V).unwrap().expected_seq, (16_400u32 * 4) as u16);
    }

    #[test]
    fn fragmenter_numbers_cells_and_sets_f_on_the_last() {
        let mut f = Fragmenter::new();
        let a = f.fragment(7, 100);
        assert_eq!((a.first_seq, a.cells), (0, 3));
        let payload: Vec<u8> = (0..100).map(|i| i as u8).collect();
        let cells = a.cells(&payload);
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[2].data.len(), 10);
        assert!(cells[2].framing && !cells[0].framing);
        let b = f.fragment(7, 45);
        assert_eq!((b.first_seq, b.cells), (3, 1));
        assert_eq!(f.fragment(8, 1).first_seq, 0);
        // Fragmented cells reassemble in the SPP.
        let mut s = Spp::new(SppConfig {
            vcis: vec![7],
            queues_per_connection: 2,
            queue_cells: 90,
            segment_cells: 3,
        })
        .unwrap();
        for c in &cells {
            let mut buf = [0u8; 53];
            c.emit(&mut buf).unwrap();
            let back = SarCell::parse(&buf).unwrap();
            s.handle_cell(t(0), SppCell::from(&back));
        }
        assert_eq!(s.poll_request().unwrap().status, FrameStatus::NoError);
    }
}
