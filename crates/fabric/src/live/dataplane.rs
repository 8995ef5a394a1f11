//! The live data plane: each switch port is a UDP socket carrying cells to its neighbour.
//!
//! Papers 000 and 001 ran their control planes over real ATM switches; atmlab's switches
//! forward real 53-octet cells (header, HEC and payload) over UDP instead of fibre. A
//! datagram carries one or more whole cells back to back (at most `cells_per_datagram`,
//! 24 by default so a datagram fits a 1,500-octet Ethernet MTU).
//!
//! Each port is bound to one peer, and takes datagrams from that address only (issue 24:
//! a UDP source is all a switch port can check, as a fibre's far end is all a real port
//! can receive from):
//! - a **trunk** port (configured `peer`, or wired by [`DataPlane::set_peer`]) to its
//!   neighbour's socket;
//! - a **host** port to its host, bound by configuration (`host` in the server file),
//!   by an explicit [`DataPlane::attach_host`] (the control path: the process that
//!   starts hosts, or a manager), or, on a port that is still unbound and allows it
//!   ([`DataPlane::set_first_attach`]), by the host's *attach* (an empty datagram, what
//!   [`crate::live::host::HostPort::attach`] sends first). A switch server allows it only
//!   where its file says `attach = "first"` (issue 24: a port is bound when its host
//!   attaches, not by whoever sends the first datagram). Once bound, a host port stays bound: an attach or cells from another address
//!   do not move it (a restarted host on a new address is attached again through the
//!   control path); an unbound port forwards nothing.
//!
//! Every cell is policed at ingress by its connection's conformance test (the switch's
//! usage parameter control, [`crate::switch::Switch::handle_cell_at`]): the cells of a
//! datagram are taken to arrive one cell time apart at the port's link rate, from the
//! moment the datagram was read.
//!
//! Whatever a port refuses is counted per port ([`crate::live::local::LocalSwitch::refusals`],
//! the Statistics RPC) and summed up in one log line per [`REFUSAL_LOG_INTERVAL`], never
//! one line per datagram (a flood must not become a flood of log lines).
//!
//! One task per port receives a batch of datagrams (as many as one system call gives,
//! [`crate::live::batch`]), switches their cells under one taking of the switch lock,
//! draining every output queue the cells reached after each datagram, and sends the
//! drained cells to each port's peer, as many datagrams per system call as the kernel
//! segments. The live data plane does not pace output to the link rate (the host does,
//! see [`crate::live::host`]); a port's queue holds only the cells of the datagrams being
//! switched, so queue-overflow discard happens only when many inputs converge at once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use atmlab_core::ids::PortId;
use atmlab_wire::cell::CELL_LEN;
use tokio::net::UdpSocket;
use tokio::task::JoinSet;

use crate::live::batch::{BatchSocket, RecvBatch};
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

/// How often the data plane sums up what its ports refused in one log line.
pub const REFUSAL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Whom a port is bound to: where its cells go, and the only address it takes cells from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// A host port no host has attached to yet: it forwards nothing, and the first
    /// attach (an empty datagram) binds it.
    Unbound,
    /// A trunk: the neighbour switch's port.
    Trunk(SocketAddr),
    /// A host port bound to its host.
    Host(SocketAddr),
}

impl Binding {
    /// The bound address, if any.
    pub fn addr(self) -> Option<SocketAddr> {
        match self {
            Binding::Unbound => None,
            Binding::Trunk(a) | Binding::Host(a) => Some(a),
        }
    }
}

/// One port's socket and binding.
#[derive(Debug)]
pub struct PortSocket {
    /// The switch port.
    pub port: PortId,
    /// Its bound UDP socket.
    pub socket: Arc<UdpSocket>,
    /// The same socket's batched receive and segmented send.
    io: BatchSocket,
    /// Its peer (see the module doc).
    pub binding: Mutex<Binding>,
    /// The last address a datagram was refused from (for the summary log line).
    last_refused: Mutex<Option<SocketAddr>>,
    /// Whether the host's own first attach may bind the port while it is unbound.
    first_attach: std::sync::atomic::AtomicBool,
}

impl PortSocket {
    fn binding(&self) -> Binding {
        *self.binding.lock().unwrap_or_else(|e| e.into_inner())
    }
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
    /// The origin of the arrival times the usage parameter control sees.
    epoch: std::time::Instant,
}

impl DataPlane {
    /// Binds one UDP socket per `(port, bind, peer)`; a port with a peer is a trunk, one
    /// without a host port (bound later: see the module doc).
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
            let socket = Arc::new(socket);
            let io = BatchSocket::new(socket.clone()).map_err(|e| {
                std::io::Error::new(e.kind(), format!("port {} on {bind}: {e}", port.0))
            })?;
            ports.push(PortSocket {
                port,
                io,
                socket,
                binding: Mutex::new(peer.map_or(Binding::Unbound, Binding::Trunk)),
                last_refused: Mutex::new(None),
                first_attach: std::sync::atomic::AtomicBool::new(true),
            });
        }
        Ok(DataPlane {
            ports: Arc::new(ports),
            counters: Arc::new(DataPlaneCounters::default()),
            cells_per_datagram: cells_per_datagram.clamp(1, MAX_DATAGRAM / CELL_LEN),
            epoch: std::time::Instant::now(),
        })
    }

    /// Each port's bound address.
    pub fn local_addrs(&self) -> Vec<(PortId, SocketAddr)> {
        self.ports
            .iter()
            .filter_map(|p| Some((p.port, p.socket.local_addr().ok()?)))
            .collect()
    }

    /// Each port's peer, if bound.
    pub fn peers(&self) -> Vec<(PortId, Option<SocketAddr>)> {
        self.ports
            .iter()
            .map(|p| (p.port, p.binding().addr()))
            .collect()
    }

    /// Each port's binding.
    pub fn bindings(&self) -> Vec<(PortId, Binding)> {
        self.ports.iter().map(|p| (p.port, p.binding())).collect()
    }

    /// Points a port at its neighbour, as a trunk (how `atmlab net up` wires links after
    /// binding every port on an ephemeral address): it takes cells from `peer` only.
    pub fn set_peer(&self, port: PortId, peer: SocketAddr, switch: &LocalSwitch) -> bool {
        self.bind_port(port, Binding::Trunk(peer), switch)
    }

    /// Binds a host port to the host at `host`: the explicit attach (the control path),
    /// which, unlike a host's own attach datagram, may move a port already bound (a
    /// restarted host on a new address). False if there is no such port or it is a
    /// trunk (a neighbour switch's link is not re-pointed by an attach).
    pub fn attach_host(&self, port: PortId, host: SocketAddr, switch: &LocalSwitch) -> bool {
        let trunk = self
            .ports
            .iter()
            .find(|p| p.port == port)
            .is_some_and(|p| matches!(p.binding(), Binding::Trunk(_)));
        !trunk && self.bind_port(port, Binding::Host(host), switch)
    }

    /// Whether an unbound host port `port` may be bound by its host's own first attach
    /// (`true`, the default) or only by configuration and the control path (`false`:
    /// `attach = "control"` in the server file). False if there is no such port.
    pub fn set_first_attach(&self, port: PortId, allowed: bool) -> bool {
        let Some(p) = self.ports.iter().find(|p| p.port == port) else {
            return false;
        };
        p.first_attach
            .store(allowed, std::sync::atomic::Ordering::Relaxed);
        true
    }

    fn bind_port(&self, port: PortId, binding: Binding, switch: &LocalSwitch) -> bool {
        let Some(p) = self.ports.iter().find(|p| p.port == port) else {
            return false;
        };
        *p.binding.lock().unwrap_or_else(|e| e.into_inner()) = binding;
        switch.set_peer(port, describe_binding(binding, &p.socket));
        if let Binding::Host(h) = binding {
            tracing::info!(port = %port, host = %h, "host attached (control path)");
        }
        true
    }

    /// The data plane's own counters.
    pub fn counters(&self) -> &DataPlaneCounters {
        &self.counters
    }

    /// Runs every port (and the refusal summary) until the returned set is dropped or
    /// aborted.
    pub fn spawn(&self, switch: LocalSwitch) -> JoinSet<()> {
        for p in self.ports.iter() {
            switch.set_peer(p.port, describe_binding(p.binding(), &p.socket));
        }
        switch.set_data_plane(Arc::new(self.clone()));
        let mut set = JoinSet::new();
        for i in 0..self.ports.len() {
            let dp = self.clone();
            let sw = switch.clone();
            set.spawn(async move { dp.run_port(i, sw).await });
        }
        let dp = self.clone();
        set.spawn(async move { dp.report_refusals(switch).await });
        set
    }

    /// Every [`REFUSAL_LOG_INTERVAL`], one WARN line summing up what the ports refused
    /// since the last one (nothing when nothing was refused).
    async fn report_refusals(self, switch: LocalSwitch) {
        let mut last: Vec<u64> = vec![0; self.ports.len()];
        let mut last_policed: Vec<u64> = vec![0; self.ports.len()];
        let mut tick = tokio::time::interval(REFUSAL_LOG_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // The usage parameter control's count too: one line for the interval.
            let policed: Vec<u64> = switch.with_switch(|s| {
                self.ports
                    .iter()
                    .map(|p| {
                        s.port_status(p.port)
                            .map_or(0, |st| st.counters.cells_policed)
                    })
                    .collect()
            });
            let mut upc = Vec::new();
            for (i, now) in policed.into_iter().enumerate() {
                let new = now.saturating_sub(last_policed[i]);
                last_policed[i] = now;
                if new > 0 {
                    upc.push(format!("port {}: {new}", self.ports[i].port.0));
                }
            }
            if !upc.is_empty() {
                tracing::info!(
                    switch = %switch.name(),
                    "usage parameter control: non-conforming cells in the last {:?} ({:?}): {}",
                    REFUSAL_LOG_INTERVAL,
                    switch.with_switch(|s| s.policing()),
                    upc.join(", ")
                );
            }
            let mut parts = Vec::new();
            let mut total = 0;
            for (i, p) in self.ports.iter().enumerate() {
                let now = switch.refusals(p.port).datagrams;
                let new = now.saturating_sub(last[i]);
                last[i] = now;
                if new > 0 {
                    total += new;
                    let from = *p.last_refused.lock().unwrap_or_else(|e| e.into_inner());
                    parts.push(format!(
                        "port {}: {new} (last from {})",
                        p.port.0,
                        from.map_or_else(|| "?".to_string(), |a| a.to_string())
                    ));
                }
            }
            if total > 0 {
                tracing::warn!(
                    switch = %switch.name(),
                    refused = total,
                    "data plane: refused {total} datagrams from senders that are not the \
                     port's peer in the last {:?}: {}",
                    REFUSAL_LOG_INTERVAL,
                    parts.join(", ")
                );
            }
        }
    }

    /// Whether port `index` takes a datagram of `n` octets from `from`; an attach to an
    /// unbound host port binds it.
    fn admit(&self, index: usize, n: usize, from: SocketAddr, switch: &LocalSwitch) -> bool {
        let me = &self.ports[index];
        let mut b = me.binding.lock().unwrap_or_else(|e| e.into_inner());
        match *b {
            Binding::Trunk(a) | Binding::Host(a) if a == from => true,
            Binding::Unbound
                if n == 0 && me.first_attach.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                *b = Binding::Host(from);
                drop(b);
                tracing::info!(port = %me.port, host = %from, "host attached");
                switch.set_peer(me.port, format!("udp:{from}"));
                true
            }
            _ => {
                drop(b);
                switch.count_refused(me.port, (n / CELL_LEN) as u64);
                *me.last_refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(from);
                false
            }
        }
    }

    async fn run_port(self, index: usize, switch: LocalSwitch) {
        use std::sync::atomic::Ordering::Relaxed;
        let me = &self.ports[index];
        let cell_time = switch.with_switch(|s| {
            s.port_status(me.port)
                .map_or(atmlab_core::time::Duration::ZERO, |p| {
                    atmlab_core::time::Duration::from_secs_f64(
                        1.0 / p.config.link_rate.to_cell_rate().0.max(1.0),
                    )
                })
        });
        let mut batch = RecvBatch::default();
        // Drained cells per output port, reused across batches.
        let mut outs: Vec<Vec<u8>> = vec![Vec::new(); self.ports.len()];
        // The indices, in the batch, of the datagrams this port takes.
        let mut taken: Vec<usize> = Vec::new();
        loop {
            if let Err(e) = me.io.recv(&mut batch).await {
                // ICMP port-unreachable from a peer that went away surfaces here on
                // some systems; it is not fatal to the port.
                tracing::debug!(port = %me.port, error = %e, "recv failed");
                continue;
            }
            taken.clear();
            for (k, (from, d)) in batch.datagrams().enumerate() {
                if !self.admit(index, d.len(), from, &switch) {
                    continue;
                }
                if !d.len().is_multiple_of(CELL_LEN) {
                    self.counters.ragged_datagrams.fetch_add(1, Relaxed);
                }
                if d.len() >= CELL_LEN {
                    taken.push(k);
                }
            }
            if taken.is_empty() {
                continue;
            }
            // Arrival times for the usage parameter control: the batch's, and for the
            // cells after its first one cell time apart at the port's link rate (the
            // spacing they would have had on the line: a datagram, and a batch of them
            // read at once, is a train of cells, not cells that arrived together).
            let arrived = atmlab_core::time::Instant::from_picos(
                u64::try_from(self.epoch.elapsed().as_nanos())
                    .unwrap_or(u64::MAX)
                    .saturating_mul(1000),
            );
            switch.with_switch(|s| {
                let mut k = 0u64;
                let mut next = taken.iter().copied().peekable();
                for (i, (_, d)) in batch.datagrams().enumerate() {
                    if next.peek() != Some(&i) {
                        continue;
                    }
                    next.next();
                    for chunk in d[..d.len() - d.len() % CELL_LEN].chunks_exact(CELL_LEN) {
                        let mut cell: [u8; CELL_LEN] = chunk.try_into().expect("exact chunk");
                        let at = arrived.saturating_add(cell_time.saturating_mul(k));
                        s.handle_cell_at(me.port, &mut cell, at);
                        k += 1;
                    }
                    // Each datagram's cells leave the output queues before the next
                    // datagram's arrive, as when datagrams were read one at a time: a
                    // batch is a read, not a burst the queues must hold.
                    for (j, p) in self.ports.iter().enumerate() {
                        if s.queue_len(p.port) > 0 {
                            s.drain(p.port, &mut outs[j], usize::MAX);
                        }
                    }
                }
            });
            for (j, out) in outs.iter_mut().enumerate() {
                if out.is_empty() {
                    continue;
                }
                let p = &self.ports[j];
                match p.binding().addr() {
                    None => {
                        self.counters
                            .cells_no_peer
                            .fetch_add((out.len() / CELL_LEN) as u64, Relaxed);
                    }
                    Some(to) => {
                        // Every datagram of `cells_per_datagram` cells, as many per
                        // system call as the kernel segments.
                        let segment = self.cells_per_datagram * CELL_LEN;
                        if p.io.send(to, out, segment).await.is_err() {
                            self.counters
                                .send_errors
                                .fetch_add(out.len().div_ceil(segment) as u64, Relaxed);
                        }
                    }
                }
                out.clear();
            }
        }
    }
}

/// A port's binding as Describe shows it: "udp:ADDR", or "udp:learn@LOCAL" for a host port
/// waiting for its host's attach.
fn describe_binding(b: Binding, socket: &UdpSocket) -> String {
    match b.addr() {
        Some(a) => format!("udp:{a}"),
        None => format!(
            "udp:learn@{}",
            socket
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        ),
    }
}

impl crate::live::local::HostPorts for DataPlane {
    fn attach_host(&self, port: PortId, host: SocketAddr, switch: &LocalSwitch) -> bool {
        DataPlane::attach_host(self, port, host, switch)
    }
}
