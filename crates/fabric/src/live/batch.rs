//! Datagrams in batches: the live data plane's cells cross UDP sockets as papers 000 and
//! 001's crossed fibre, and one system call per datagram of 24 cells is what bounded a
//! software switch (issue 28). [`BatchSocket`] moves many datagrams per call through
//! `quinn-udp`, the UDP layer of the quinn QUIC stack: `recvmmsg` with generic receive
//! offload (GRO: the kernel hands equal-sized datagrams of one sender over as one buffer
//! with a stride) on the way in, and one `sendmsg` with generic segmentation offload
//! (GSO: the kernel cuts one buffer into datagrams of a segment size) on the way out.
//! Where the kernel has neither, `quinn-udp` says so (one segment, no GRO) and the same
//! calls fall back to one datagram each: the datagrams on the wire are the same.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::Arc;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Buffers handed to one receive call. Each holds what GRO coalesces from one sender (up
/// to 64 KiB) or one datagram.
pub const RECV_BATCH: usize = 8;
/// The size of each receive buffer: the largest datagram, and what GRO gives at most.
const RECV_BUFFER: usize = 1 << 16;
/// The most UDP payload one IP datagram carries, and so one segmented send.
const MAX_UDP_PAYLOAD: usize = 65_507;

/// A UDP socket with batched receive and segmented send.
#[derive(Debug)]
pub struct BatchSocket {
    socket: Arc<UdpSocket>,
    state: UdpSocketState,
}

/// One batch's receive buffers and what the kernel said of each.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    meta: Vec<RecvMeta>,
    filled: usize,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("buffers", &self.bufs.len())
            .field("filled", &self.filled)
            .finish()
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            bufs: (0..RECV_BATCH).map(|_| vec![0u8; RECV_BUFFER]).collect(),
            meta: vec![RecvMeta::default(); RECV_BATCH],
            filled: 0,
        }
    }
}

impl RecvBatch {
    /// Every datagram of the last receive: its sender and its bytes (GRO's coalesced
    /// buffers cut at their stride).
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + '_ {
        self.meta[..self.filled]
            .iter()
            .zip(&self.bufs)
            .flat_map(|(m, b)| {
                let data = &b[..m.len.min(b.len())];
                let stride = if m.stride == 0 {
                    data.len().max(1)
                } else {
                    m.stride
                };
                // A zero-length datagram (a host's attach) is one datagram of nothing.
                let n = data.len().div_ceil(stride).max(1);
                (0..n).map(move |i| {
                    let end = ((i + 1) * stride).min(data.len());
                    (m.addr, &data[(i * stride).min(end)..end])
                })
            })
    }

    /// Buffers (senders) in the last receive: each holds one or more datagrams.
    pub fn buffers(&self) -> usize {
        self.filled
    }
}

impl BatchSocket {
    /// Batched I/O on `socket` (it must be non-blocking, as tokio's are).
    pub fn new(socket: Arc<UdpSocket>) -> io::Result<Self> {
        let state = UdpSocketState::new(UdpSockRef::from(&*socket))?;
        Ok(BatchSocket { socket, state })
    }

    /// The socket.
    pub fn socket(&self) -> &Arc<UdpSocket> {
        &self.socket
    }

    /// Datagrams one send may carry (1 without GSO).
    pub fn max_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Waits for datagrams and takes as many as one call gives (at least one).
    pub async fn recv(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        loop {
            self.socket.readable().await?;
            let mut slices: Vec<IoSliceMut<'_>> =
                batch.bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let r = self.socket.try_io(Interest::READABLE, || {
                self.state.recv(
                    UdpSockRef::from(&*self.socket),
                    &mut slices,
                    &mut batch.meta,
                )
            });
            match r {
                Ok(n) => {
                    batch.filled = n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    batch.filled = 0;
                    return Err(e);
                }
            }
        }
    }

    /// Sends `contents` to `to` as datagrams of `segment` octets (the last may be
    /// shorter), as many per system call as the kernel segments; waits while the socket
    /// is full.
    pub async fn send(&self, to: SocketAddr, contents: &[u8], segment: usize) -> io::Result<()> {
        // One IP datagram's length bounds a segmented send (and what a receiver's GRO
        // buffer must hold): at most 65,507 octets of UDP payload in all.
        let per_call = segment
            * self
                .max_segments()
                .clamp(1, (MAX_UDP_PAYLOAD / segment.max(1)).max(1));
        for part in contents.chunks(per_call.max(1)) {
            let transmit = Transmit {
                destination: to,
                ecn: None,
                contents: part,
                segment_size: (part.len() > segment).then_some(segment),
                src_ip: None,
            };
            loop {
                self.socket.writable().await?;
                match self.socket.try_io(Interest::WRITABLE, || {
                    self.state
                        .try_send(UdpSockRef::from(&*self.socket), &transmit)
                }) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    // A kernel that refused the segmentation has made quinn-udp turn
                    // GSO off: the same datagrams, one call each.
                    Err(_) if transmit.segment_size.is_some() && self.max_segments() == 1 => {
                        for d in part.chunks(segment) {
                            Box::pin(self.send(to, d, segment)).await?;
                        }
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}
