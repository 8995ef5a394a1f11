//! The live data plane: each switch port is a UDP socket carrying cells to its neighbour.
//!
//! Papers 000 and 001 ran their control planes over real ATM switches; atmlab's switches
//! forward real 53-octet cells (header, HEC and payload) over UDP instead of fibre. A
//! datagram carries one or more whole cells back to back (at most `cells_per_datagram`,
//! 24 by default so a datagram fits a 1,500-octet Ethernet MTU). An empty datagram is an
//! *attach*: a port configured without a peer learns its peer from the first datagram it
//! receives, so a host on an ephemeral port can attach to a switch port; a later attach
//! from another address moves the port to the new host (a restarted receiver).
//!
//! One task per port receives a datagram, switches its cells under the switch lock,
//! drains every output queue the cells reached, and sends the drained cells to each
//! port's peer. The live data plane does not pace output to the link rate (the host does,
//! see [`crate::live::host`]); a port's queue holds only the cells of the datagrams being
//! switched, so queue-overflow discard happens only when many inputs converge at once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use atmlab_core::ids::PortId;
use atmlab_wire::cell::CELL_LEN;
use tokio::net::UdpSocket;
use tokio::task::JoinSet;

use crate::live::local::LocalSwitch;

/// Cells per datagram when the configuration does not say: 24 x 53 = 1,272 octets.
pub const DEFAULT_CELLS_PER_DATAGRAM: usize = 24;
/// The largest datagram a port accepts.
const MAX_DATAGRAM: usize = 65_507;

/// The socket buffers asked for: bursts of cells queue in the kernel while the port's
/// task is busy; the kernel caps the request at `net.core.rmem_max` / `wmem_max`.
pub const SOCKET_BUFFER: usize = 4 << 20;

/// Binds a non-blocking UDP socket with [`SOCKET_BUFFER`]-sized buffers.
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: a smaller buffer still works, it only drops sooner under bursts.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

/// One port's socket and peer.
#[derive(Debug)]
pub struct PortSocket {
    /// The switch port.
    pub port: PortId,
    /// Its bound UDP socket.
    pub socket: Arc<UdpSocket>,
    /// Where its cells go; `None` until learned from the first datagram.
    pub peer: Mutex<Option<SocketAddr>>,
    /// A host port (no peer configured): it learns its peer, and an attach (an empty
    /// datagram) from a new host moves it there.
    pub learns: bool,
}

/// Counters of the live data plane, beyond the switch's own.
#[derive(Debug, Default)]
pub struct DataPlaneCounters {
    /// Datagrams whose length was not a multiple of 53 (the tail is dropped).
    pub ragged_datagrams: std::sync::atomic::AtomicU64,
    /// Cells dropped because the output port has no peer yet.
    pub cells_no_peer: std::sync::atomic::AtomicU64,
    /// Datagrams the OS refused to send.
    pub send_errors: std::sync::atomic::AtomicU64,
}

/// The data plane of one switch: its port sockets.
#[derive(Debug, Clone)]
pub struct DataPlane {
    ports: Arc<Vec<PortSocket>>,
    counters: Arc<DataPlaneCounters>,
    cells_per_datagram: usize,
}

impl DataPlane {
    /// Binds one UDP socket per `(port, bind, peer)`.
    pub async fn bind(
        bindings: &[(PortId, SocketAddr, Option<SocketAddr>)],
        cells_per_datagram: usize,
    ) -> std::io::Result<Self> {
        let mut ports = Vec::with_capacity(bindings.len());
        for &(port, bind, peer) in bindings {
            // Say which port and address: "Address already in use" alone names neither.
            let socket = bind_udp(bind).map_err(|e| {
                std::io::Error::new(e.kind(), format!("port {} on {bind}: {e}", port.0))
            })?;
            ports.push(PortSocket {
                port,
                socket: Arc::new(socket),
                peer: Mutex::new(peer),
                learns: peer.is_none(),
            });
        }
        Ok(DataPlane {
            ports: Arc::new(ports),
            counters: Arc::new(DataPlaneCounters::default()),
            cells_per_datagram: cells_per_datagram.clamp(1, MAX_DATAGRAM / CELL_LEN),
        })
    }

    /// Each port's bound address.
    pub fn local_addrs(&self) -> Vec<(PortId, SocketAddr)> {
        self.ports
            .iter()
            .filter_map(|p| Some((p.port, p.socket.local_addr().ok()?)))
            .collect()
    }

    /// Each port's peer, if known.
    pub fn peers(&self) -> Vec<(PortId, Option<SocketAddr>)> {
        self.ports
            .iter()
            .map(|p| (p.port, *p.peer.lock().unwrap_or_else(|e| e.into_inner())))
            .collect()
    }

    /// Points a port at its neighbour (how `atmlab net up` wires links after binding
    /// every port on an ephemeral address).
    pub fn set_peer(&self, port: PortId, peer: SocketAddr, switch: &LocalSwitch) -> bool {
        let Some(p) = self.ports.iter().find(|p| p.port == port) else {
            return false;
        };
        *p.peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer);
        // A wired port is a trunk: it no longer follows attaches.
        switch.set_peer(port, format!("udp:{peer}"));
        true
    }

    /// The data plane's own counters.
    pub fn counters(&self) -> &DataPlaneCounters {
        &self.counters
    }

    /// Runs every port until the returned set is dropped or aborted.
    pub fn spawn(&self, switch: LocalSwitch) -> JoinSet<()> {
        for p in self.ports.iter() {
            let peer = p
                .peer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map(|a| format!("udp:{a}"))
                .unwrap_or_else(|| {
                    format!(
                        "udp:learn@{}",
                        p.socket
                            .local_addr()
                            .map(|a| a.to_string())
                            .unwrap_or_default()
                    )
                });
            switch.set_peer(p.port, peer);
        }
        let mut set = JoinSet::new();
        for i in 0..self.ports.len() {
            let dp = self.clone();
            let sw = switch.clone();
            set.spawn(async move { dp.run_port(i, sw).await });
        }
        set
    }

    async fn run_port(self, index: usize, switch: LocalSwitch) {
        use std::sync::atomic::Ordering::Relaxed;
        let me = &self.ports[index];
        let mut buf = vec![0u8; MAX_DATAGRAM];
        // Drained cells per output port, reused across datagrams.
        let mut outs: Vec<Vec<u8>> = vec![Vec::new(); self.ports.len()];
        loop {
            let (n, from) = match me.socket.recv_from(&mut buf).await {
                Ok(x) => x,
                Err(e) => {
                    // ICMP port-unreachable from a peer that went away surfaces here on
                    // some systems; it is not fatal to the port.
                    tracing::debug!(port = %me.port, error = %e, "recv failed");
                    continue;
                }
            };
            if me.learns {
                let mut peer = me.peer.lock().unwrap_or_else(|e| e.into_inner());
                // The first datagram attaches a host; a later attach (an empty
                // datagram) from elsewhere means the host moved or restarted.
                if peer.is_none() || (n == 0 && *peer != Some(from)) {
                    tracing::info!(port = %me.port, peer = %from, "host attached");
                    *peer = Some(from);
                    switch.set_peer(me.port, format!("udp:{from}"));
                }
            }
            if !n.is_multiple_of(CELL_LEN) {
                self.counters.ragged_datagrams.fetch_add(1, Relaxed);
            }
            if n < CELL_LEN {
                continue;
            }
            switch.with_switch(|s| {
                for chunk in buf[..n - n % CELL_LEN].chunks_exact_mut(CELL_LEN) {
                    let cell: &mut [u8; CELL_LEN] = chunk.try_into().expect("exact chunk");
                    s.handle_cell(me.port, cell);
                }
                for (j, p) in self.ports.iter().enumerate() {
                    if s.queue_len(p.port) > 0 {
                        s.drain(p.port, &mut outs[j], usize::MAX);
                    }
                }
            });
            for (j, out) in outs.iter_mut().enumerate() {
                if out.is_empty() {
                    continue;
                }
                let p = &self.ports[j];
                let peer = *p.peer.lock().unwrap_or_else(|e| e.into_inner());
                match peer {
                    None => {
                        self.counters
                            .cells_no_peer
                            .fetch_add((out.len() / CELL_LEN) as u64, Relaxed);
                    }
                    Some(to) => {
                        for dgram in out.chunks(self.cells_per_datagram * CELL_LEN) {
                            if p.socket.send_to(dgram, to).await.is_err() {
                                self.counters.send_errors.fetch_add(1, Relaxed);
                            }
                        }
                    }
                }
                out.clear();
            }
        }
    }
}
