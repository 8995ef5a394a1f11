//! An end system attached to a switch port: AAL5 or AAL3/4 frames in and out over the
//! live data plane (papers 000 and 001 measured their control planes with hosts sending
//! over the connections they set up; paper 004's gateway reassembles the same AAL5
//! frames; paper 002's SMDS servers sat on ATM and carried their L3_PDUs as AAL3/4).
//!
//! The host segments each AAL5 frame with [`atmlab_wire::aal5::Segmenter`] into UNI
//! cells on one VC, paces them at its link rate (a real host cannot send faster than its
//! line), and sends them in datagrams of whole cells. It receives with a
//! [`atmlab_wire::aal5::VcReassembler`] and hands complete, CRC-checked frames up.
//!
//! A VC can instead carry AAL3/4 (I.363.3, what SMDS runs over ATM): [`HostPort::send_aal34`]
//! cuts a CPCS-SDU into SAR-PDUs with [`atmlab_wire::aal34::Segmenter`] (one MID per
//! message in flight, given by the caller), and a VC declared with
//! [`HostPort::expect_aal34`] is reassembled by its own [`atmlab_wire::aal34::Reassembler`].
//! Whatever the reassembler refuses is counted in [`Aal34Counters`], as whole messages
//! lost: one lost or corrupt cell loses the one message it belonged to, whichever cell
//! it was (the later cells of a message whose beginning is gone count as stray cells,
//! not as more messages). A lost single-segment message (at most 36 octets) leaves no
//! trace an AAL3/4 receiver could see.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use atmlab_core::ids::VcId;
use atmlab_core::units::BitRate;
use atmlab_wire::aal5::{ReassemblerConfig, Segmenter, VcReassembler};
use atmlab_wire::aal34;
use atmlab_wire::cell::{CELL_LEN, Cell, CellHeader, HeaderFormat, Pti};
use tokio::net::UdpSocket;

use crate::error::FabricError;
use crate::live::batch::{BatchSocket, RecvBatch};
use crate::live::dataplane::DEFAULT_CELLS_PER_DATAGRAM;

/// How far ahead of its schedule the sender may run before it sleeps.
const PACING_AHEAD: Duration = Duration::from_millis(1);
/// How much time lost to a late timer the sender may make up (as a burst).
const PACING_CATCH_UP: Duration = Duration::from_millis(5);

/// A host's attachment to a switch port.
#[derive(Debug)]
pub struct HostPort {
    socket: std::sync::Arc<UdpSocket>,
    /// The same socket's batched receive and segmented send.
    io: BatchSocket,
    switch: SocketAddr,
    cells_per_datagram: usize,
    cell_time: Duration,
    /// When the next cell may leave (pacing).
    next_send: Instant,
    reassembler: VcReassembler,
    epoch: Instant,
    /// The receive buffers (taken while a receive is in flight).
    batch: Option<RecvBatch>,
    pending: std::collections::VecDeque<Received>,
    /// The VCs that carry AAL3/4, each with its SAR state.
    aal34: std::collections::HashMap<VcId, Aal34Vc>,
    /// Frames that failed reassembly (CRC, length, oversize), by VC.
    pub errors: u64,
}

/// A frame received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The VC it arrived on.
    pub vc: VcId,
    /// The AAL5 SDU, or the AAL3/4 CPCS-SDU.
    pub sdu: Vec<u8>,
    /// The AAL3/4 MID it arrived on; `None` for AAL5.
    pub mid: Option<u16>,
}

/// What an AAL3/4 VC's receiver discarded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Aal34Counters {
    /// Messages (CPCS-PDUs) delivered.
    pub delivered: u64,
    /// Messages discarded: a cell of theirs was lost or corrupt, their SAR or CPCS
    /// fields were wrong, or they timed out. One per message, whichever cell was hit.
    pub lost: u64,
    /// Cells discarded that belonged to no message in progress (the rest of a message
    /// already counted lost), and cells whose CRC-10 failed (their MID is suspect).
    pub stray_cells: u64,
    /// Cells whose header failed the HEC check (their VC is unknown: counted on every
    /// AAL3/4 VC's host, not on a VC).
    pub hec_errors: u64,
}

/// One AAL3/4 VC: the transmit numbering, the reassembler, and which MIDs are in the
/// middle of a message already counted lost.
#[derive(Debug)]
struct Aal34Vc {
    segmenter: aal34::Segmenter,
    btag: u8,
    reassembler: aal34::Reassembler,
    /// MIDs whose current message was counted lost; their remaining cells are strays
    /// until the message's EOM.
    lost_mid: Vec<bool>,
    counters: Aal34Counters,
}

impl Aal34Vc {
    fn new() -> Self {
        Aal34Vc {
            segmenter: aal34::Segmenter::new(),
            btag: 0,
            reassembler: aal34::Reassembler::new(aal34::ReassemblerConfig::default()),
            lost_mid: vec![false; usize::from(aal34::MAX_MID) + 1],
            counters: Aal34Counters::default(),
        }
    }

    /// Counts one message lost on `mid`, unless it already was.
    fn lose(&mut self, mid: u16, rest_follows: bool) {
        let flag = &mut self.lost_mid[usize::from(mid & aal34::MAX_MID)];
        if *flag {
            self.counters.stray_cells += 1;
        } else {
            self.counters.lost += 1;
        }
        *flag = rest_follows;
    }

    /// Hands one SAR-PDU to the reassembler; a delivered CPCS-SDU is returned.
    fn handle_sar(
        &mut self,
        now: atmlab_core::time::Instant,
        sar: &[u8],
    ) -> Option<(u16, Vec<u8>)> {
        use aal34::SegmentType::{Bom, Eom, Ssm};
        // What the cell says of itself, read before the reassembler judges it (a view;
        // the reassembler does the checking).
        let (st, mid) = aal34::SarPdu::new_checked(sar)
            .map_or((None, 0), |v| (Some(v.segment_type()), v.mid()));
        let was_in_progress = self.reassembler.in_progress(mid);
        let outcome = match self.reassembler.handle_sar(now, sar) {
            None => {
                if st == Some(Bom) {
                    // A new message began on this MID: whatever was lost on it is over.
                    self.lost_mid[usize::from(mid)] = false;
                }
                return None;
            }
            Some(Ok(frame)) => Ok((frame.mid, frame.payload.to_vec())),
            Some(Err(e)) => Err(e.mid),
        };
        match outcome {
            Ok((mid, sdu)) => {
                self.counters.delivered += 1;
                self.lost_mid[usize::from(mid)] = false;
                Some((mid, sdu))
            }
            // A CRC-10 failure: the cell is dropped; the message it belonged to fails on
            // its next cell (a sequence gap) or times out, and is counted then.
            Err(None) => {
                self.counters.stray_cells += 1;
                None
            }
            Err(Some(m)) => {
                match st {
                    // A BOM (or SSM) that interrupted a message in progress: the old
                    // message is lost, the new one proceeds (or was refused with it).
                    Some(Bom) | Some(Ssm) => {
                        self.lost_mid[usize::from(m)] = false;
                        self.counters.lost += 1;
                    }
                    // A COM or EOM: its message is lost now (a gap, a bad field), or was
                    // already (its beginning is gone: counted on its first such cell).
                    _ => {
                        if was_in_progress {
                            self.lost_mid[usize::from(m)] = false;
                        }
                        self.lose(m, st != Some(Eom));
                    }
                }
                None
            }
        }
    }

    /// Times out messages that will not complete.
    fn expire(&mut self, now: atmlab_core::time::Instant) {
        while let Some(e) = self.reassembler.expire(now) {
            if let Some(m) = e.mid {
                // A message abandoned by an SSM or timed out: lost, and any cells of it
                // still to come are strays.
                self.lost_mid[usize::from(m)] = false;
                self.lose(m, true);
            } else {
                self.counters.stray_cells += 1;
            }
        }
    }
}

fn io(e: std::io::Error) -> FabricError {
    FabricError::Unavailable(format!("host socket: {e}"))
}

impl HostPort {
    /// Binds `bind` and attaches to the switch port at `switch` (an empty datagram, so a
    /// port without a configured peer learns this host's address). `link_rate` paces
    /// sending.
    pub async fn attach(
        bind: SocketAddr,
        switch: SocketAddr,
        link_rate: BitRate,
    ) -> Result<Self, FabricError> {
        let socket = std::sync::Arc::new(crate::live::dataplane::bind_udp(bind).map_err(io)?);
        socket.send_to(&[], switch).await.map_err(io)?;
        let batched = BatchSocket::new(socket.clone()).map_err(io)?;
        let cell_rate = link_rate.to_cell_rate().per_sec().max(1.0);
        Ok(HostPort {
            socket,
            io: batched,
            switch,
            cells_per_datagram: DEFAULT_CELLS_PER_DATAGRAM,
            cell_time: Duration::from_secs_f64(1.0 / cell_rate),
            next_send: Instant::now(),
            reassembler: VcReassembler::new(HeaderFormat::Uni, ReassemblerConfig::default()),
            epoch: Instant::now(),
            batch: Some(RecvBatch::default()),
            pending: std::collections::VecDeque::new(),
            aal34: std::collections::HashMap::new(),
            errors: 0,
        })
    }

    /// The time since attach, as the reassemblers count it.
    fn now(&self) -> atmlab_core::time::Instant {
        atmlab_core::time::Instant::from_picos(
            (self.epoch.elapsed().as_nanos() as u64).saturating_mul(1000),
        )
    }

    /// Declares that `vc` carries AAL3/4: its cells are reassembled by an AAL3/4
    /// reassembler of its own from now on (the other VCs stay AAL5).
    pub fn expect_aal34(&mut self, vc: VcId) {
        self.aal34.entry(vc).or_insert_with(Aal34Vc::new);
    }

    /// What the AAL3/4 receiver of `vc` counted (`None` if `vc` is not AAL3/4).
    pub fn aal34_counters(&self, vc: VcId) -> Option<Aal34Counters> {
        self.aal34.get(&vc).map(|v| v.counters)
    }

    /// The host's own address.
    pub fn local_addr(&self) -> Result<SocketAddr, FabricError> {
        self.socket.local_addr().map_err(io)
    }

    /// Sends one AAL5 frame on `vc`, paced at the link rate.
    pub async fn send_frame(&mut self, vc: VcId, sdu: &[u8]) -> Result<usize, FabricError> {
        let header = CellHeader::uni(vc.vpi.0, vc.vci.0, Pti::user(false));
        let seg = Segmenter::new(header, sdu, 0, 0)
            .map_err(|_| FabricError::Invalid("an AAL5 frame carries at most 65,535 octets"))?;
        let mut cells = Vec::with_capacity(seg.len() * CELL_LEN);
        seg.write_all(&mut cells);
        self.send_cells(&cells).await
    }

    /// Sends one AAL3/4 CPCS-SDU (message mode) on `vc` and `mid`, paced at the link
    /// rate; `vc` is declared AAL3/4 (see [`HostPort::expect_aal34`]). Returns the cells
    /// sent.
    pub async fn send_aal34(
        &mut self,
        vc: VcId,
        mid: u16,
        sdu: &[u8],
    ) -> Result<usize, FabricError> {
        let header = CellHeader::uni(vc.vpi.0, vc.vci.0, Pti::user(false));
        header
            .check()
            .map_err(|_| FabricError::Invalid("a host's VPI is at most 255 (UNI)"))?;
        let state = self.aal34.entry(vc).or_insert_with(Aal34Vc::new);
        let btag = state.btag;
        state.btag = state.btag.wrapping_add(1);
        let seg = state.segmenter.segment_frame(mid, btag, sdu).map_err(|_| {
            FabricError::Invalid("an AAL3/4 message is at most 65,535 octets on a MID of 0-1023")
        })?;
        let head = header.to_bytes();
        let mut cells = Vec::with_capacity(seg.len() * CELL_LEN);
        for sar in seg {
            cells.extend_from_slice(&head);
            cells.extend_from_slice(&sar);
        }
        self.send_cells(&cells).await
    }

    /// Sends whole cells in datagrams, paced at the link rate; the number of cells.
    /// Datagrams leave in trains of as many as one system call carries (GSO), each train
    /// no longer than the pacing lets run ahead of the link.
    async fn send_cells(&mut self, cells: &[u8]) -> Result<usize, FabricError> {
        let n = cells.len() / CELL_LEN;
        let segment = self.cells_per_datagram * CELL_LEN;
        let per_train = (PACING_AHEAD.as_secs_f64()
            / (self.cell_time.as_secs_f64() * self.cells_per_datagram as f64))
            .floor()
            .clamp(1.0, self.io.max_segments().max(1) as f64) as usize;
        for train in cells.chunks(segment * per_train) {
            let now = Instant::now();
            if self.next_send > now + PACING_AHEAD {
                tokio::time::sleep(self.next_send - now).await;
            }
            // Timers wake late (a millisecond or more); keep the credit of an overslept
            // pause, up to a bound, or the long-run rate falls below the link rate.
            let now = Instant::now();
            let floor = now.checked_sub(PACING_CATCH_UP).unwrap_or(now);
            self.next_send =
                self.next_send.max(floor) + self.cell_time * (train.len() / CELL_LEN) as u32;
            self.io
                .send(self.switch, train, segment)
                .await
                .map_err(io)?;
        }
        Ok(n)
    }

    /// Waits up to `idle` for the next complete frame; `None` on time-out.
    pub async fn recv_frame(&mut self, idle: Duration) -> Result<Option<Received>, FabricError> {
        loop {
            if let Some(r) = self.pending.pop_front() {
                return Ok(Some(r));
            }
            let mut batch = self.batch.take().unwrap_or_default();
            let got = tokio::time::timeout(idle, self.io.recv(&mut batch)).await;
            match got {
                Err(_) => {
                    self.batch = Some(batch);
                    let now = self.now();
                    for v in self.aal34.values_mut() {
                        v.expire(now);
                    }
                    return Ok(None);
                }
                Ok(Err(e)) => {
                    self.batch = Some(batch);
                    return Err(io(e));
                }
                Ok(Ok(_)) => {}
            }
            for (_, d) in batch.datagrams() {
                self.take_cells(d);
            }
            self.batch = Some(batch);
        }
    }

    /// The whole cells of one datagram, to the reassemblers.
    fn take_cells(&mut self, d: &[u8]) {
        {
            let now = self.now();
            for cell in d[..d.len() - d.len() % CELL_LEN].chunks_exact(CELL_LEN) {
                if !self.aal34.is_empty() {
                    // The VC decides the adaptation layer; a cell whose header fails
                    // the HEC goes to the AAL5 side, which counts it.
                    let c = Cell::new_checked(cell).ok();
                    let hdr = c
                        .as_ref()
                        .and_then(|c| CellHeader::parse(c, HeaderFormat::Uni).ok());
                    if let (Some(c), Some(h)) = (&c, hdr)
                        && let Some(v) = self.aal34.get_mut(&VcId::new(h.vpi, h.vci))
                    {
                        if matches!(h.pti, Pti::UserData { .. })
                            && let Some((mid, sdu)) = v.handle_sar(now, c.payload())
                        {
                            self.pending.push_back(Received {
                                vc: VcId::new(h.vpi, h.vci),
                                sdu,
                                mid: Some(mid),
                            });
                        }
                        continue;
                    }
                    if hdr.is_none() {
                        for v in self.aal34.values_mut() {
                            v.counters.hec_errors += 1;
                        }
                    }
                }
                match self.reassembler.handle_cell(now, cell) {
                    Some((Some(vc), Ok(frame))) => self.pending.push_back(Received {
                        vc,
                        sdu: frame.sdu.to_vec(),
                        mid: None,
                    }),
                    Some((_, Err(_))) | Some((None, Ok(_))) => self.errors += 1,
                    None => {}
                }
            }
            for v in self.aal34.values_mut() {
                v.expire(now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::time::Instant;

    /// The SAR-PDUs of `n` messages of `len` octets on `mid`.
    fn messages(n: usize, len: usize, mid: u16) -> Vec<Vec<[u8; 48]>> {
        let mut seg = aal34::Segmenter::new();
        (0..n)
            .map(|i| {
                let sdu: Vec<u8> = (0..len).map(|k| (k + i) as u8).collect();
                seg.segment_frame(mid, i as u8, &sdu).unwrap().collect()
            })
            .collect()
    }

    /// Feeds the cells of `msgs` but the one at (message, cell) `skip`, corrupting the
    /// one at `corrupt`; the messages delivered and the counters.
    fn run(
        msgs: &[Vec<[u8; 48]>],
        skip: Option<(usize, usize)>,
        corrupt: Option<(usize, usize)>,
    ) -> (usize, Aal34Counters) {
        let mut vc = Aal34Vc::new();
        let mut delivered = 0;
        for (i, m) in msgs.iter().enumerate() {
            for (j, sar) in m.iter().enumerate() {
                if skip == Some((i, j)) {
                    continue;
                }
                let mut sar = *sar;
                if corrupt == Some((i, j)) {
                    sar[10] ^= 1;
                }
                delivered += vc.handle_sar(Instant::ZERO, &sar).is_some() as usize;
            }
        }
        vc.expire(Instant::ZERO.saturating_add(atmlab_core::time::Duration::from_secs(2)));
        (delivered, vc.counters)
    }

    #[test]
    fn any_lost_or_corrupt_cell_loses_exactly_its_message() {
        let msgs = messages(5, 400, 1);
        let cells = msgs[0].len();
        assert!(cells >= 4);
        let (n, c) = run(&msgs, None, None);
        assert_eq!((n, c.lost, c.stray_cells), (5, 0, 0));
        // The BOM, a COM, the EOM of the middle message; and of the last one (whose
        // loss only the timer can reveal).
        for at in [(2, 0), (2, 1), (2, cells - 1), (4, cells - 1), (0, 2)] {
            let (n, c) = run(&msgs, Some(at), None);
            assert_eq!(
                (n, c.lost, c.delivered),
                (4, 1, 4),
                "cell {at:?} lost: {c:?}"
            );
            let (n, c) = run(&msgs, None, Some(at));
            assert_eq!((n, c.lost), (4, 1), "cell {at:?} corrupt: {c:?}");
            assert!(c.stray_cells >= 1);
        }
        // Two messages hit, two lost.
        let (mut a, b) = (messages(6, 400, 3), messages(1, 400, 3));
        a.extend(b);
        let mut vc = Aal34Vc::new();
        let mut got = 0;
        for (i, m) in a.iter().enumerate() {
            for (j, sar) in m.iter().enumerate() {
                if (i, j) != (1, 0) && (i, j) != (3, 2) {
                    got += vc.handle_sar(Instant::ZERO, sar).is_some() as usize;
                }
            }
        }
        assert_eq!((got, vc.counters.lost), (5, 2));
    }

    #[test]
    fn damaged_cells_are_counted_never_a_panic() {
        // Real cells with random octets changed and (half the time) the CRC-10 made
        // right again, so the reassembler sees wrong fields as well as bad CRCs.
        let msgs = messages(20, 300, 5);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut vc = Aal34Vc::new();
        let mut cells = 0u64;
        for _ in 0..50 {
            for m in &msgs {
                for sar in m {
                    let mut sar = *sar;
                    if next() % 4 == 0 {
                        let r = next();
                        sar[(r % 48) as usize] ^= (r >> 8) as u8 | 1;
                        if r & (1 << 20) != 0 {
                            let crc = aal34::sar_crc10(&sar);
                            sar[46] = (sar[46] & 0xfc) | (crc >> 8) as u8;
                            sar[47] = crc as u8;
                        }
                    }
                    cells += 1;
                    if let Some((_, sdu)) = vc.handle_sar(Instant::ZERO, &sar) {
                        assert!(sdu.len() <= aal34::MAX_CPCS_SDU);
                    }
                }
            }
        }
        vc.expire(Instant::ZERO.saturating_add(atmlab_core::time::Duration::from_secs(2)));
        let c = vc.counters;
        // Every message is either delivered or counted lost (a damaged cell may also
        // start a message of its own, so at least), and something was caught.
        assert!(c.delivered + c.lost >= 1000, "{c:?}");
        assert!(
            c.lost > 0 && c.stray_cells > 0 && c.delivered < cells,
            "{c:?}"
        );
    }
}
