//! An end system attached to a switch port: AAL5 frames in and out over the live data
//! plane (papers 000 and 001 measured their control planes with hosts sending over the
//! connections they set up; paper 004's gateway reassembles the same AAL5 frames).
//!
//! The host segments each frame with [`atmlab_wire::aal5::Segmenter`] into UNI cells on
//! one VC, paces them at its link rate (a real host cannot send faster than its line),
//! and sends them in datagrams of whole cells. It receives with a
//! [`atmlab_wire::aal5::VcReassembler`] and hands complete, CRC-checked frames up.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use atmlab_core::ids::VcId;
use atmlab_core::units::BitRate;
use atmlab_wire::aal5::{ReassemblerConfig, Segmenter, VcReassembler};
use atmlab_wire::cell::{CELL_LEN, CellHeader, HeaderFormat, Pti};
use tokio::net::UdpSocket;

use crate::error::FabricError;
use crate::live::dataplane::DEFAULT_CELLS_PER_DATAGRAM;

/// How far ahead of its schedule the sender may run before it sleeps.
const PACING_AHEAD: Duration = Duration::from_millis(1);
/// How much time lost to a late timer the sender may make up (as a burst).
const PACING_CATCH_UP: Duration = Duration::from_millis(5);

/// A host's attachment to a switch port.
#[derive(Debug)]
pub struct HostPort {
    socket: UdpSocket,
    switch: SocketAddr,
    cells_per_datagram: usize,
    cell_time: Duration,
    /// When the next cell may leave (pacing).
    next_send: Instant,
    reassembler: VcReassembler,
    epoch: Instant,
    buf: Vec<u8>,
    pending: std::collections::VecDeque<Received>,
    /// Frames that failed reassembly (CRC, length, oversize), by VC.
    pub errors: u64,
}

/// A frame received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The VC it arrived on.
    pub vc: VcId,
    /// The AAL5 SDU.
    pub sdu: Vec<u8>,
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
        let socket = crate::live::dataplane::bind_udp(bind).map_err(io)?;
        socket.send_to(&[], switch).await.map_err(io)?;
        let cell_rate = link_rate.to_cell_rate().per_sec().max(1.0);
        Ok(HostPort {
            socket,
            switch,
            cells_per_datagram: DEFAULT_CELLS_PER_DATAGRAM,
            cell_time: Duration::from_secs_f64(1.0 / cell_rate),
            next_send: Instant::now(),
            reassembler: VcReassembler::new(HeaderFormat::Uni, ReassemblerConfig::default()),
            epoch: Instant::now(),
            buf: vec![0; 65_536],
            pending: std::collections::VecDeque::new(),
            errors: 0,
        })
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
        let n = cells.len() / CELL_LEN;
        for dgram in cells.chunks(self.cells_per_datagram * CELL_LEN) {
            let now = Instant::now();
            if self.next_send > now + PACING_AHEAD {
                tokio::time::sleep(self.next_send - now).await;
            }
            // Timers wake late (a millisecond or more); keep the credit of an overslept
            // pause, up to a bound, or the long-run rate falls below the link rate.
            let now = Instant::now();
            let floor = now.checked_sub(PACING_CATCH_UP).unwrap_or(now);
            self.next_send =
                self.next_send.max(floor) + self.cell_time * (dgram.len() / CELL_LEN) as u32;
            self.socket.send_to(dgram, self.switch).await.map_err(io)?;
        }
        Ok(n)
    }

    /// Waits up to `idle` for the next complete frame; `None` on time-out.
    pub async fn recv_frame(&mut self, idle: Duration) -> Result<Option<Received>, FabricError> {
        loop {
            if let Some(r) = self.pending.pop_front() {
                return Ok(Some(r));
            }
            let n = match tokio::time::timeout(idle, self.socket.recv_from(&mut self.buf)).await {
                Err(_) => return Ok(None),
                Ok(r) => r.map_err(io)?.0,
            };
            let now = atmlab_core::time::Instant::from_picos(
                (self.epoch.elapsed().as_nanos() as u64).saturating_mul(1000),
            );
            for cell in self.buf[..n - n % CELL_LEN].chunks_exact(CELL_LEN) {
                match self.reassembler.handle_cell(now, cell) {
                    Some((Some(vc), Ok(frame))) => self.pending.push_back(Received {
                        vc,
                        sdu: frame.sdu.to_vec(),
                    }),
                    Some((_, Err(_))) | Some((None, Ok(_))) => self.errors += 1,
                    None => {}
                }
            }
        }
    }
}
