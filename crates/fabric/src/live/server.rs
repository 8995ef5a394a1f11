//! A whole switch server process: the switch, its journal, its UDP ports, and its
//! control front ends (gRPC, raw TCP), from one configuration file
//! (`atmlab switch serve --config FILE`) or built in memory by `atmlab net up`.
//!
//! The configuration (TOML):
//!
//! ```toml
//! name = "s1"
//! grpc = "127.0.0.1:50051"      # control over gRPC (port 0: any free port)
//! raw = "127.0.0.1:6001"        # control over the raw-TCP protocol (optional)
//! journal = "state/s1.table"    # the table journal (optional; see live::journal)
//! cells_per_datagram = 24
//! police = "tag"                # usage parameter control: "tag" (default), "discard", "off"
//!
//! [[ports]]
//! id = 0
//! interface = "uni"             # or "nni"
//! link_rate = "155.52 Mb/s"
//! capacity = "353207 cells/s"   # optional: what CAC may hand out (default: the link)
//! buffer_cells = 1024
//! clp_threshold = 768
//! vpi = [0, 15]
//! vci = [32, 4095]
//! udp = "127.0.0.1:7000"        # this port's socket
//! peer = "127.0.0.1:7100"       # a trunk: the neighbour's socket, the only sender taken
//! # host = "127.0.0.1:7200"     # or a host port bound to its host from the start
//! # host_name = "a"             # the host whose certificate may bind it (AttachHost)
//! # attach = "first"            # an unbound host port also bound by the first attach
//! #                             # datagram ("control", the default: control path only)
//!
//! [limits]                      # optional; these are the defaults (docs/live.md, "Limits")
//! handshake_timeout = 3.0       # s a peer has to finish its TLS handshake (gRPC, raw)
//! max_pending_per_addr = 16     # pending handshakes from one source address
//! max_pending = 512             # pending handshakes in all
//! idle_timeout = 120.0          # s a raw-TCP connection may send nothing
//! max_connections_per_addr = 64 # raw-TCP connections open from one source address
//! max_connections = 1024        # raw-TCP connections open in all
//! summary_interval = 10.0       # s between summaries of refusals in the log
//! ```
//!
//! A port with neither `peer` nor `host` is a host port bound through the control path:
//! the AttachHost RPC (from a manager, an operator, or the host `host_name` names, by
//! their certificates) or [`RunningSwitch::attach_host`] in process (see
//! [`crate::live::dataplane`]). Binding by the first attach datagram, from whoever sends
//! it, is an opt-in for a trusted network (`attach = "first"`; issue 24: "a host port is
//! bound when the host attaches, not by the first datagram").

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use atmlab_core::ids::PortId;
use atmlab_core::units::{BitRate, CellRate};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::config::{Interface, PortConfig, SwitchConfig};
use crate::error::FabricError;
use crate::live::dataplane::{DEFAULT_CELLS_PER_DATAGRAM, DataPlane};
use crate::live::grpc::{self, SwitchService};
use crate::live::journal::Journal;
use crate::live::local::LocalSwitch;
use crate::live::raw::RawLimits;
use crate::switch::Switch;
use atmlab_rpc::tls::IncomingStats;

/// One port of a switch server's configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortFile {
    /// Port number.
    pub id: u16,
    /// "uni" (default) or "nni".
    #[serde(default)]
    pub interface: Option<String>,
    /// Link rate, e.g. "155.52 Mb/s" (default).
    #[serde(default)]
    pub link_rate: Option<String>,
    /// Admissible bandwidth, e.g. "300000 cells/s" (default: the link's cell rate).
    #[serde(default)]
    pub capacity: Option<String>,
    /// Output buffer in cells (default 1,024).
    #[serde(default)]
    pub buffer_cells: Option<u32>,
    /// CLP = 1 discard threshold (default 3/4 of the buffer).
    #[serde(default)]
    pub clp_threshold: Option<u32>,
    /// VPI range (default [0, 15]).
    #[serde(default)]
    pub vpi: Option<[u16; 2]>,
    /// VCI range (default [32, 4095]).
    #[serde(default)]
    pub vci: Option<[u16; 2]>,
    /// This port's UDP socket (default 127.0.0.1:0).
    #[serde(default)]
    pub udp: Option<SocketAddr>,
    /// The neighbour's socket (a trunk port, which takes cells from it alone).
    #[serde(default)]
    pub peer: Option<SocketAddr>,
    /// A host port's host, bound from the start (absent: bound through the control
    /// path, [`RunningSwitch::attach_host`] / the AttachHost RPC).
    #[serde(default)]
    pub host: Option<SocketAddr>,
    /// The host whose certificate (role `host`, this name) may bind this port through
    /// the AttachHost RPC; managers and operators may bind any host port.
    #[serde(default)]
    pub host_name: Option<String>,
    /// How an unbound host port gets its host: "control" (default: the control path
    /// only) or "first" (also the first attach datagram, from whoever sends it: for a
    /// trusted network).
    #[serde(default)]
    pub attach: Option<String>,
}

/// A switch server's configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    /// The switch's name.
    pub name: String,
    /// gRPC listen address (default 127.0.0.1:0).
    #[serde(default)]
    pub grpc: Option<SocketAddr>,
    /// Raw-TCP listen address (absent: no raw interface).
    #[serde(default)]
    pub raw: Option<SocketAddr>,
    /// The table journal (absent: the table does not survive a restart).
    #[serde(default)]
    pub journal: Option<PathBuf>,
    /// fsync the journal on every batch.
    #[serde(default)]
    pub journal_sync: bool,
    /// Cells per datagram on the data plane.
    #[serde(default)]
    pub cells_per_datagram: Option<usize>,
    /// Usage parameter control of every connection at ingress: "tag" (default: a
    /// non-conforming cell goes on with CLP = 1), "discard", or "off".
    #[serde(default)]
    pub police: Option<String>,
    /// The ports.
    pub ports: Vec<PortFile>,
    /// The control ports' limits (absent: the defaults of [`RawLimits`]).
    #[serde(default)]
    pub limits: LimitsFile,
}

/// The `[limits]` table of a switch server's configuration: the guards of its control
/// ports against idle and hostile connections (issue 24, "Ports that hold"). Every key is
/// optional; an absent one keeps its default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Seconds a peer has to finish its TLS handshake (gRPC and raw TCP).
    pub handshake_timeout: Option<f64>,
    /// Pending handshakes from one source address.
    pub max_pending_per_addr: Option<usize>,
    /// Pending handshakes in all.
    pub max_pending: Option<usize>,
    /// Seconds a raw-TCP connection may send nothing before it is closed.
    pub idle_timeout: Option<f64>,
    /// Raw-TCP connections open from one source address.
    pub max_connections_per_addr: Option<usize>,
    /// Raw-TCP connections open in all.
    pub max_connections: Option<usize>,
    /// Seconds between summaries of refusals in the log.
    pub summary_interval: Option<f64>,
}

impl LimitsFile {
    /// The limits it sets over the defaults; errors name the key.
    pub fn limits(&self) -> Result<RawLimits, FabricError> {
        let mut l = RawLimits::default();
        let seconds = |key: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v < 1e9 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(FabricError::Config(format!(
                    "limits.{key}: {v} is not a positive number of seconds"
                )))
            }
        };
        let count = |key: &str, v: usize| {
            if v > 0 {
                Ok(v)
            } else {
                Err(FabricError::Config(format!(
                    "limits.{key}: must be at least 1"
                )))
            }
        };
        if let Some(v) = self.handshake_timeout {
            l.accept.handshake_timeout = seconds("handshake_timeout", v)?;
        }
        if let Some(v) = self.max_pending_per_addr {
            l.accept.max_pending_per_addr = count("max_pending_per_addr", v)?;
        }
        if let Some(v) = self.max_pending {
            l.accept.max_pending = count("max_pending", v)?;
        }
        if let Some(v) = self.idle_timeout {
            l.idle_timeout = seconds("idle_timeout", v)?;
        }
        if let Some(v) = self.max_connections_per_addr {
            l.max_connections_per_addr = count("max_connections_per_addr", v)?;
        }
        if let Some(v) = self.max_connections {
            l.max_connections = count("max_connections", v)?;
        }
        if let Some(v) = self.summary_interval {
            l.accept.summary_interval = seconds("summary_interval", v)?;
        }
        Ok(l)
    }
}

impl ServerFile {
    /// Parses a configuration; errors name the file and the key.
    pub fn parse(text: &str, origin: &str) -> Result<Self, FabricError> {
        toml::from_str(text).map_err(|e| FabricError::Config(format!("{origin}: {e}")))
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &std::path::Path) -> Result<Self, FabricError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| FabricError::Config(format!("{}: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// How the switch polices non-conforming cells (`police`; "tag" by default).
    pub fn policing(&self) -> Result<crate::switch::Policing, FabricError> {
        use crate::switch::Policing;
        match self.police.as_deref() {
            None | Some("tag") => Ok(Policing::Tag),
            Some("discard") => Ok(Policing::Discard),
            Some("off") => Ok(Policing::Off),
            Some(x) => Err(FabricError::Config(format!(
                "switch {}: police: {:?} is not one of \"tag\", \"discard\", \"off\"",
                self.name,
                x.chars().take(32).collect::<String>()
            ))),
        }
    }

    /// The switch configuration it describes.
    pub fn switch_config(&self) -> Result<SwitchConfig, FabricError> {
        let mut ports = Vec::with_capacity(self.ports.len());
        for p in &self.ports {
            let bad = |key: &str, e: String| {
                FabricError::Config(format!("switch {}: ports.{}.{key}: {e}", self.name, p.id))
            };
            let link = match &p.link_rate {
                Some(s) => BitRate::from_str(s).map_err(|e| bad("link_rate", e.to_string()))?,
                None => BitRate(155.52e6),
            };
            if p.peer.is_some() && p.host.is_some() {
                return Err(bad(
                    "host",
                    "a port has a peer (a trunk) or a host, not both".into(),
                ));
            }
            match p.attach.as_deref() {
                None | Some("first") | Some("control") => {}
                Some(x) => {
                    return Err(bad(
                        "attach",
                        format!("{x:?} is neither \"first\" nor \"control\""),
                    ));
                }
            }
            let mut pc = PortConfig::new(p.id, link);
            pc.interface = match p.interface.as_deref() {
                None | Some("uni") => Interface::Uni,
                Some("nni") => Interface::Nni,
                Some(x) => {
                    return Err(bad(
                        "interface",
                        format!("{x:?} is neither \"uni\" nor \"nni\""),
                    ));
                }
            };
            if let Some(c) = &p.capacity {
                pc.capacity = CellRate::from_str(c).map_err(|e| bad("capacity", e.to_string()))?;
            }
            if let Some(b) = p.buffer_cells {
                pc.buffer_cells = b;
                pc.clp_threshold = b / 4 * 3;
            }
            if let Some(t) = p.clp_threshold {
                pc.clp_threshold = t;
            }
            if let Some([a, b]) = p.vpi {
                pc.vpi_range = (a, b);
            }
            if let Some([a, b]) = p.vci {
                pc.vci_range = (a, b);
            }
            ports.push(pc);
        }
        let cfg = SwitchConfig {
            name: self.name.clone(),
            ports,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// A running switch server.
#[derive(Debug)]
pub struct RunningSwitch {
    /// The switch (for in-process inspection).
    pub switch: LocalSwitch,
    /// Where gRPC listens.
    pub grpc_addr: SocketAddr,
    /// Where the raw-TCP protocol listens, if enabled.
    pub raw_addr: Option<SocketAddr>,
    /// Each port's UDP address.
    pub ports: Vec<(PortId, SocketAddr)>,
    /// The data plane (peers, counters).
    pub data_plane: DataPlane,
    /// Connections restored from the journal at start.
    pub restored: usize,
    /// The gRPC port's counters of refused connections (by `atmlab_rpc::tls::Refusal`).
    pub grpc_stats: IncomingStats,
    /// The raw-TCP port's counters of refused and idle-closed connections, if enabled.
    pub raw_stats: Option<IncomingStats>,
    /// Commands refused for the caller's role or owner, on either port.
    pub authz: std::sync::Arc<crate::live::authz::AuthzStats>,
    tasks: JoinSet<()>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl RunningSwitch {
    /// Stops the server: the gRPC server stops accepting, and every task ends.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.switch.clear_data_plane();
    }

    /// Binds host port `port` to the host at `host` (the explicit attach; moves a port
    /// already bound). False if the switch has no such port.
    pub fn attach_host(&self, port: PortId, host: SocketAddr) -> bool {
        self.data_plane.attach_host(port, host, &self.switch)
    }

    /// What the data plane refused on `port` (datagrams from a sender that is not the
    /// port's peer).
    pub fn refusals(&self, port: PortId) -> crate::live::local::Refusals {
        self.switch.refusals(port)
    }

    /// Waits until a task of the server ends (it should not, short of a fatal error).
    pub async fn wait(&mut self) {
        self.tasks.join_next().await;
    }
}

/// Starts a switch server: restores the journal, binds the ports and the control
/// listeners, and runs until stopped.
pub async fn start(
    file: &ServerFile,
    tls: Option<&atmlab_rpc::tls::TlsIdentity>,
) -> Result<RunningSwitch, FabricError> {
    let cfg = file.switch_config()?;
    let limits = file
        .limits
        .limits()
        .map_err(|e| FabricError::Config(format!("switch {}: {e}", file.name)))?;
    let mut switch = Switch::new(&cfg)?;
    switch.set_policing(file.policing()?);
    let (journal, restored) = match &file.journal {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    FabricError::Setup(format!(
                        "switch {}: journal directory {}: {e}",
                        file.name,
                        dir.display()
                    ))
                })?;
            }
            let (j, conns) = Journal::open(path, file.journal_sync).map_err(|e| match e {
                FabricError::Setup(m) => FabricError::Setup(format!("switch {}: {m}", file.name)),
                e => e,
            })?;
            for c in &conns {
                switch.restore(c).map_err(|e| {
                    FabricError::Config(format!(
                        "journal {}: connection {} cannot be restored: {e}",
                        path.display(),
                        c.id
                    ))
                })?;
            }
            (Some(j), conns.len())
        }
        None => (None, 0),
    };
    let local = LocalSwitch::new(switch, journal);
    let any: SocketAddr = "127.0.0.1:0".parse().expect("literal");
    let bindings: Vec<(PortId, SocketAddr, Option<SocketAddr>)> = file
        .ports
        .iter()
        .map(|p| (PortId(p.id), p.udp.unwrap_or(any), p.peer))
        .collect();
    let data_plane = DataPlane::bind(
        &bindings,
        file.cells_per_datagram
            .unwrap_or(DEFAULT_CELLS_PER_DATAGRAM),
    )
    .await
    .map_err(|e| FabricError::Setup(format!("switch {}: binding its UDP ports: {e}", file.name)))?;
    for p in &file.ports {
        if let Some(h) = p.host {
            data_plane.attach_host(PortId(p.id), h, &local);
        }
        if p.attach.as_deref() != Some("first") {
            data_plane.set_first_attach(PortId(p.id), false);
        }
    }
    let mut tasks = data_plane.spawn(local.clone());
    let grpc_at = file.grpc.unwrap_or(any);
    let grpc_listener = TcpListener::bind(grpc_at).await.map_err(|e| {
        FabricError::Setup(format!(
            "switch {}: gRPC listen on {grpc_at}: {e}",
            file.name
        ))
    })?;
    let grpc_addr = grpc_listener.local_addr().map_err(|e| {
        FabricError::Setup(format!(
            "switch {}: gRPC listener on {grpc_at}: {e}",
            file.name
        ))
    })?;
    let incoming = atmlab_rpc::tls::grpc_incoming_with(grpc_listener, tls, &limits.accept)
        .map_err(|e| FabricError::Config(format!("switch {}: gRPC TLS: {e}", file.name)))?;
    let grpc_stats = incoming.stats();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let authz = std::sync::Arc::<crate::live::authz::AuthzStats>::default();
    let host_names = file
        .ports
        .iter()
        .filter_map(|p| Some((p.id, p.host_name.clone()?)))
        .collect();
    let service = SwitchService::new(local.clone(), Some(local.clone()))
        .with_authz(authz.clone())
        .with_host_names(host_names);
    let name = file.name.clone();
    tasks.spawn(async move {
        let shutdown = async {
            let _ = rx.await;
        };
        if let Err(e) = grpc::serve_incoming(incoming, service, shutdown).await {
            tracing::error!(switch = %name, error = %e, "gRPC server stopped");
        }
    });
    let (raw_addr, raw_stats) = match file.raw {
        Some(addr) => {
            let (at, stats) = crate::live::raw_listen(
                &mut tasks,
                addr,
                local.clone(),
                tls,
                &limits,
                authz.clone(),
            )
            .await
            .map_err(|e| match e {
                FabricError::Setup(m) => FabricError::Setup(format!("switch {}: {m}", file.name)),
                e => e,
            })?;
            (Some(at), Some(stats))
        }
        None => (None, None),
    };
    tracing::info!(switch = %file.name, %grpc_addr, ?raw_addr, restored, "switch server up");
    Ok(RunningSwitch {
        switch: local,
        grpc_addr,
        raw_addr,
        ports: data_plane.local_addrs(),
        data_plane,
        restored,
        grpc_stats,
        raw_stats,
        authz,
        tasks,
        shutdown: Some(tx),
    })
}
