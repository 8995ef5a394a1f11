//! SMDS over ATM: paper 002's servers and subscribers on the live cell data plane.
//!
//! The paper's server sat on an ATM network (§4.2: Fore SBA-200 boards, 150 Mb/s), its
//! L3_PDUs carried as AAL3/4 cells, and it blamed its flow rate on that interface ("the
//! network-server interface, SAR, and OS overhead"). Here an SMDS interface (SNI, ISSI
//! or ICI) can run the same way: a host attached to a switch port of the live data plane
//! (`atmlab_fabric::live::host::HostPort`), each message (an L3_PDU, or an ISSI frame)
//! one AAL3/4 CPCS-PDU cut into cells on a VC through atmlab switches, and rebuilt at the
//! other end by `atmlab_wire::aal34::Reassembler` inside the same host code.
//!
//! Why here and not in `atmlab-smds`: the SMDS crate depends on `core` and `wire` only,
//! and the cell data plane (hosts, switches) is `atmlab-fabric`'s (docs/ARCHITECTURE.md).
//! So the SMDS shell takes an interface as a [`FrameLink`] (messages in and out), and
//! this bridge, in the one crate that may know both, pumps the messages between it and a
//! [`HostPort`]. Nothing here segments, reassembles or builds a cell.
//!
//! - [`attach`]: one interface over ATM ([`AtmAttach`], from the server file's `atm`).
//! - [`bind`]: a whole server from its file, ATM interfaces and UDP ones alike (what
//!   `atmlab smds serve` runs).
//! - [`duplex`]: the two connections (one per direction) an interface needs, set up
//!   through a connection manager over the lab's switches; [`host_port`] finds a
//!   topology host's switch port.
//! - [`AtmSubscriber`]: a subscriber whose SNI is over ATM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration as StdDuration;

use atmlab_control::cm::live::CmHandle;
use atmlab_control::net::Network;
use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::host::{Aal34Counters, HostPort};
use atmlab_smds::config::{AtmAttach, ServerFile};
use atmlab_smds::live::{FrameLink, Link, LiveServer};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::LabError;

/// Messages queued between the server and its ATM adapter, each way.
const ADAPTER_QUEUE: usize = 1024;

/// What one interface over ATM counted, beside its reassembler's [`Aal34Counters`].
#[derive(Debug, Default)]
pub struct AtmStats {
    /// Messages the server sent.
    pub sent: AtomicU64,
    /// Cells sent.
    pub cells_sent: AtomicU64,
    /// Messages reassembled on the receive VC and handed to the server.
    pub received: AtomicU64,
    /// Messages reassembled that the server's queue had no room for (discarded).
    pub dropped: AtomicU64,
    /// Frames that arrived on another VC, or as AAL5 (discarded).
    pub other_vc: AtomicU64,
    /// Messages the host refused to send (too long for AAL3/4).
    pub send_errors: AtomicU64,
    aal34: std::sync::Mutex<Aal34Counters>,
}

impl AtmStats {
    /// What the receive VC's AAL3/4 reassembly counted (messages lost, stray cells).
    pub fn aal34(&self) -> Aal34Counters {
        *self.aal34.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running ATM adapter of one interface; stops when dropped.
#[derive(Debug)]
pub struct AtmInterface {
    /// The host's address on the cell data plane.
    pub local: SocketAddr,
    /// Its counters.
    pub stats: Arc<AtmStats>,
    task: JoinHandle<()>,
}

impl Drop for AtmInterface {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Attaches one interface to its switch port as a host bound on `bind`, and returns the
/// [`FrameLink`] to start the server with and the running adapter.
pub async fn attach(
    atm: AtmAttach,
    bind: SocketAddr,
) -> Result<(FrameLink, AtmInterface), LabError> {
    let mut host = HostPort::attach(bind, atm.switch, atm.rate).await?;
    host.expect_aal34(atm.recv_vc);
    let local = host.local_addr()?;
    let (to_server, incoming) = mpsc::channel(ADAPTER_QUEUE);
    let (out, from_server) = mpsc::channel(ADAPTER_QUEUE);
    let stats = Arc::new(AtmStats::default());
    let task = tokio::spawn(pump(host, atm, from_server, to_server, Arc::clone(&stats)));
    Ok((
        FrameLink {
            out,
            incoming,
            local,
        },
        AtmInterface { local, stats, task },
    ))
}

/// The adapter: the server's messages out as AAL3/4 on the send VC, the receive VC's
/// messages in. One task owns the host, so sending (paced at the link rate) and
/// receiving take turns; the kernel's socket buffer holds the cells that arrive while a
/// message is being sent.
async fn pump(
    mut host: HostPort,
    atm: AtmAttach,
    mut from_server: mpsc::Receiver<Vec<u8>>,
    to_server: mpsc::Sender<Vec<u8>>,
    stats: Arc<AtmStats>,
) {
    loop {
        tokio::select! {
            m = from_server.recv() => {
                let Some(msg) = m else { return };
                match host.send_aal34(atm.send_vc, atm.mid, &msg).await {
                    Ok(cells) => {
                        stats.sent.fetch_add(1, Relaxed);
                        stats.cells_sent.fetch_add(cells as u64, Relaxed);
                    }
                    Err(_) => {
                        stats.send_errors.fetch_add(1, Relaxed);
                    }
                }
            }
            r = host.recv_frame(StdDuration::from_millis(100)) => {
                match r {
                    Ok(Some(f)) if f.vc == atm.recv_vc && f.mid.is_some() => {
                        // Never wait on the server here: it may be waiting on us.
                        if to_server.try_send(f.sdu).is_ok() {
                            stats.received.fetch_add(1, Relaxed);
                        } else {
                            stats.dropped.fetch_add(1, Relaxed);
                        }
                    }
                    Ok(Some(_)) => {
                        stats.other_vc.fetch_add(1, Relaxed);
                    }
                    // A time-out (the reassembler's timers ran), or an ICMP error from a
                    // port not yet up: keep going.
                    Ok(None) | Err(_) => {}
                }
                if let Some(c) = host.aal34_counters(atm.recv_vc) {
                    *stats.aal34.lock().unwrap_or_else(|e| e.into_inner()) = c;
                }
            }
        }
    }
}

/// A server with interfaces over ATM: the server, and each interface's adapter (`None`
/// for a UDP interface).
#[derive(Debug)]
pub struct AtmServer {
    /// The server.
    pub server: LiveServer,
    /// Per interface, its ATM adapter if it runs over ATM.
    pub atm: Vec<Option<AtmInterface>>,
}

impl AtmServer {
    /// The server's status (`atmlab smds serve --status`) with, under `atm`, what each
    /// interface over ATM counted (`iface` numbered from 1, as in the server file).
    pub fn status_json(&self) -> serde_json::Value {
        let mut j = self.server.status().to_json();
        let atm: Vec<serde_json::Value> = self
            .atm
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let s = &a.as_ref()?.stats;
                let c = s.aal34();
                Some(serde_json::json!({
                    "iface": i + 1,
                    "sent": s.sent.load(Relaxed),
                    "cells_sent": s.cells_sent.load(Relaxed),
                    "received": s.received.load(Relaxed),
                    "dropped": s.dropped.load(Relaxed),
                    "other_vc": s.other_vc.load(Relaxed),
                    "send_errors": s.send_errors.load(Relaxed),
                    "lost": c.lost,
                    "stray_cells": c.stray_cells,
                    "hec_errors": c.hec_errors,
                }))
            })
            .collect();
        if let Some(o) = j.as_object_mut() {
            o.insert("atm".into(), atm.into());
        }
        j
    }
}

/// Starts the server of `file`: UDP interfaces bound as `LiveServer::bind` binds them,
/// ATM interfaces attached to their switch ports.
pub async fn bind(file: &ServerFile) -> Result<AtmServer, LabError> {
    let mut links = Vec::new();
    let mut adapters = Vec::new();
    for (i, e) in file.endpoints.iter().enumerate() {
        match e.atm {
            Some(a) => {
                let (link, adapter) = attach(a, e.bind).await?;
                links.push(Link::Frames(link));
                adapters.push(Some(adapter));
            }
            None => {
                let s = UdpSocket::bind(e.bind).await.map_err(|err| {
                    LabError::io(format!("interface {}: binding {}", i + 1, e.bind), err)
                })?;
                links.push(Link::Udp(s, e.peer));
                adapters.push(None);
            }
        }
    }
    let server = LiveServer::start_links(file.config.clone(), links, file.queue)?;
    Ok(AtmServer {
        server,
        atm: adapters,
    })
}

/// The VCs of one end of an interface over ATM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndVcs {
    /// What it sends on.
    pub send: VcId,
    /// What it receives on.
    pub recv: VcId,
}

/// Sets up the two connections between hosts `x` and `y` of the lab's topology (x to y
/// and y to x, CBR at `pcr` cells/s each, committed on every switch of the route by the
/// manager), and returns each end's VCs.
pub async fn duplex(
    cm: &CmHandle,
    x: &str,
    y: &str,
    pcr: f64,
) -> Result<(EndVcs, EndVcs), LabError> {
    let call = async |a: &str, b: &str| {
        cm.add(a, b, TrafficDescriptor::cbr(CellRate(pcr)), 0.0, "smds-atm")
            .await
            .map_err(|e| {
                LabError::run(
                    "SMDS over ATM",
                    format!("connecting {a} to {b}: {}", e.message),
                )
            })
    };
    let xy = call(x, y).await?;
    let yx = call(y, x).await?;
    Ok((
        EndVcs {
            send: xy.view.source_vc,
            recv: yx.view.destination_vc,
        },
        EndVcs {
            send: yx.view.source_vc,
            recv: xy.view.destination_vc,
        },
    ))
}

/// The UDP address of the switch port host `host` of the network's topology is at.
pub fn host_port(net: &Network, host: &str) -> Result<SocketAddr, LabError> {
    let missing = |why: &str| LabError::run("SMDS over ATM", format!("host {host:?}: {why}"));
    let spec = net
        .topology
        .hosts
        .iter()
        .find(|h| h.name == host)
        .ok_or_else(|| missing("not in the topology"))?;
    let (sw, port) = spec
        .at
        .split_once(':')
        .ok_or_else(|| missing("its place is not SWITCH:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| missing("its port is not a number"))?;
    let i = net
        .topology
        .switches
        .iter()
        .position(|s| s.name == sw)
        .ok_or_else(|| missing("its switch is not in the topology"))?;
    net.switches
        .get(i)
        .and_then(|s| s.ports.iter().find(|(p, _)| *p == PortId(port)))
        .map(|(_, a)| *a)
        .ok_or_else(|| missing("its switch port is not running"))
}

/// The attachment of an interface end at `host`: its switch port, its VCs, the link
/// rate, MID 1.
pub fn attachment(
    net: &Network,
    host: &str,
    vcs: EndVcs,
    rate: BitRate,
) -> Result<AtmAttach, LabError> {
    Ok(AtmAttach {
        switch: host_port(net, host)?,
        send_vc: vcs.send,
        recv_vc: vcs.recv,
        rate,
        mid: 1,
    })
}

/// A subscriber whose SNI runs over ATM: L3_PDUs sent and received as AAL3/4 on its VCs.
#[derive(Debug)]
pub struct AtmSubscriber {
    host: HostPort,
    atm: AtmAttach,
    cells_sent: u64,
}

impl AtmSubscriber {
    /// Attaches to the switch port of `atm` (its send VC leads to the SNI, its receive VC
    /// comes from it).
    pub async fn attach(atm: AtmAttach) -> Result<AtmSubscriber, LabError> {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut host = HostPort::attach(any, atm.switch, atm.rate).await?;
        host.expect_aal34(atm.recv_vc);
        Ok(AtmSubscriber {
            host,
            atm,
            cells_sent: 0,
        })
    }

    /// The subscriber's address on the cell data plane (what its switch port is bound
    /// to).
    pub fn local_addr(&self) -> Result<SocketAddr, LabError> {
        Ok(self.host.local_addr()?)
    }

    /// Sends one L3_PDU; the cells it took.
    pub async fn send(&mut self, pdu: &[u8]) -> Result<usize, LabError> {
        let cells = self
            .host
            .send_aal34(self.atm.send_vc, self.atm.mid, pdu)
            .await?;
        self.cells_sent += cells as u64;
        Ok(cells)
    }

    /// Cells sent so far.
    pub fn cells_sent(&self) -> u64 {
        self.cells_sent
    }

    /// The next L3_PDU from the SNI, waiting up to `idle`; `None` on time-out.
    pub async fn recv(&mut self, idle: StdDuration) -> Result<Option<Vec<u8>>, LabError> {
        let deadline = tokio::time::Instant::now() + idle;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.host.recv_frame(left).await? {
                None => return Ok(None),
                Some(f) if f.vc == self.atm.recv_vc && f.mid.is_some() => return Ok(Some(f.sdu)),
                Some(_) => {}
            }
        }
    }

    /// What the receive VC's reassembly counted.
    pub fn counters(&self) -> Aal34Counters {
        self.host
            .aal34_counters(self.atm.recv_vc)
            .unwrap_or_default()
    }
}
