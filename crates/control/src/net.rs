//! Networks from a topology file: `atmlab net up TOPO` starts a name service, one switch
//! server per switch, wires the links and registers everything, on loopback, in one
//! command (the testbeds of papers 000 §III and 001 §4, in one process).
//!
//! The topology file's format is [`crate::topology`]'s.
//!
//! Each switch gets a gRPC and a raw-TCP control address and a UDP socket per port, all on
//! 127.0.0.1 with ports the OS picks; links are wired by telling each end its
//! neighbour's address (a trunk port takes cells from that address only); a host port is
//! bound to its host by the host's first attach datagram, or through the control path
//! (the AttachHost RPC: `atmlab host --control`), and then holds. Everything
//! is registered in the name service: `switch/NAME` (gRPC address; attributes `raw` and
//! `port.N` = the port's UDP address) and `host/NAME` (address = the UDP address of the
//! switch port it attaches to; attributes `switch`, `port`).

use std::net::SocketAddr;
use std::path::Path;

use atmlab_core::ids::PortId;
use atmlab_fabric::live::server::{self, PortFile, RunningSwitch, ServerFile};
use atmlab_rpc::tls::TlsIdentity;
use tokio::net::TcpListener;

use crate::ControlError;
use crate::names::{
    DirectoryConfig, NameClient, NameServiceImpl, ObjectInfo, ObjectKind, RenewalHandle,
};
pub use crate::topology::{HostSpec, LinkSpec, PortDefaults, PortRef, SwitchSpec, Topology};

/// A switch server's entry in the name service: `switch/NAME` at its gRPC URL (`scheme`
/// "https" or "http"), with attributes `raw` (its raw-TCP address) and `port.N`
/// (`udp:ADDR`, each port's socket: how the route object finds the links).
pub fn switch_object(name: &str, sw: &RunningSwitch, scheme: &str) -> ObjectInfo {
    let mut obj = ObjectInfo::new(
        format!("switch/{name}"),
        ObjectKind::SwitchServer,
        format!("{scheme}://{}", sw.grpc_addr),
    );
    if let Some(raw) = sw.raw_addr {
        obj = obj.with_attribute("raw", raw.to_string());
    }
    for (p, a) in &sw.ports {
        obj = obj.with_attribute(format!("port.{}", p.0), format!("udp:{a}"));
    }
    obj
}

/// A host's entry: `host/NAME` at the UDP address of the switch port it attaches to
/// (`port_udp`), with attributes `switch` and `port`.
pub fn host_object(host: &str, switch: &str, port: u16, port_udp: SocketAddr) -> ObjectInfo {
    ObjectInfo::new(
        format!("host/{host}"),
        ObjectKind::Host,
        format!("udp:{port_udp}"),
    )
    .with_attribute("switch", switch.to_owned())
    .with_attribute("port", port.to_string())
}

/// Registers a switch server run on its own (`atmlab switch serve --names`) with its own
/// certificate, and renews until the handles drop: `switch/NAME` and, for each of its
/// ports whose file names a host (`host_name`), that host's entry (a switch may hold the
/// hosts at its own ports). So the parts of a network run apart, on several machines,
/// find one another as `net up`'s do.
pub async fn register_switch(
    names_url: &str,
    tls: Option<&TlsIdentity>,
    file: &ServerFile,
    sw: &RunningSwitch,
    lease: std::time::Duration,
) -> Result<Vec<RenewalHandle>, ControlError> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let client = NameClient::connect(names_url, tls).await?;
    let mut renewals = vec![
        client
            .register_and_renew(switch_object(&file.name, sw, scheme), lease)
            .await?,
    ];
    for p in &file.ports {
        let Some(host) = &p.host_name else { continue };
        let Some((_, at)) = sw.ports.iter().find(|(id, _)| id.0 == p.id) else {
            continue;
        };
        let obj = host_object(host, &file.name, p.id, *at);
        renewals.push(client.register_and_renew(obj, lease).await?);
    }
    Ok(renewals)
}

impl Topology {
    /// The switch-server configuration of one switch (loopback, ephemeral ports).
    pub fn server_file(
        &self,
        name: &str,
        journal_dir: Option<&Path>,
    ) -> Result<ServerFile, ControlError> {
        let spec = self.switch(name)?;
        let trunk = self.trunk_ports(name);
        let d = self.port_settings(spec);
        let any: SocketAddr = "127.0.0.1:0".parse().expect("literal");
        let ports = (0..spec.ports)
            .map(|id| PortFile {
                // The topology's host at this port may bind it with its certificate.
                host_name: self
                    .hosts
                    .iter()
                    .find(|h| {
                        self.port_ref(&h.at)
                            .is_ok_and(|r| r.switch == name && r.port == id)
                    })
                    .map(|h| h.name.clone()),
                id,
                interface: Some(if trunk.contains(&id) { "nni" } else { "uni" }.into()),
                link_rate: d.link_rate.clone(),
                capacity: d.capacity.clone(),
                buffer_cells: d.buffer_cells,
                clp_threshold: None,
                vpi: d.vpi,
                vci: d.vci,
                udp: Some(any),
                peer: None,
                host: None,
                attach: None,
            })
            .collect();
        Ok(ServerFile {
            name: name.to_string(),
            grpc: Some(any),
            raw: Some(any),
            journal: journal_dir.map(|d| d.join(format!("{name}.table"))),
            journal_sync: false,
            cells_per_datagram: None,
            police: None,
            ports,
            // The control ports' guards at their defaults (docs/live.md, "Limits").
            limits: Default::default(),
        })
    }
}

/// What `net up` started: addresses to print and to hand to clients.
#[derive(Debug)]
pub struct Network {
    /// The topology.
    pub topology: Topology,
    /// The name service's address.
    pub names_addr: SocketAddr,
    /// The switch servers, in topology order.
    pub switches: Vec<RunningSwitch>,
    /// Whether control traffic uses mutual TLS.
    pub tls: bool,
    /// The name service (a clone sharing its directory: the metrics read it).
    pub names: NameServiceImpl,
    names_task: tokio::task::JoinHandle<()>,
    names_stop: Option<tokio::sync::oneshot::Sender<()>>,
    renewals: Vec<RenewalHandle>,
}

/// Where `net up` finds certificates: the directory and whether to use them.
#[derive(Debug, Clone)]
pub struct NetSecurity {
    /// `None` for plain text (`--insecure`).
    pub certs: Option<std::path::PathBuf>,
}

/// Every certificate a network of `topology` needs, with its role: each switch's
/// (`switch`), the name service's (`names`) and the operator's (`admin`).
pub fn certificate_subjects(topology: &Topology) -> Vec<atmlab_rpc::tls::Subject> {
    use atmlab_rpc::tls::{Role, Subject};
    let mut v: Vec<Subject> = topology
        .switches
        .iter()
        .map(|s| Subject::new(Role::Switch, s.name.clone()))
        .collect();
    v.extend(
        topology
            .hosts
            .iter()
            .map(|h| Subject::new(Role::Host, h.name.clone())),
    );
    v.push(Subject::new(Role::Names, "names"));
    v.push(Subject::new(Role::Admin, "admin"));
    v
}

impl Network {
    /// Starts the network: name service, switch servers, links, registrations. With
    /// certificates, each object uses its own (`NAME.pem`), and the name service's
    /// clients (the switches' registrations) use `admin`.
    pub async fn up(
        topology: Topology,
        security: &NetSecurity,
        journal_dir: Option<&Path>,
    ) -> Result<Network, ControlError> {
        let load = |name: &str| -> Result<Option<TlsIdentity>, ControlError> {
            match &security.certs {
                None => Ok(None),
                Some(dir) => Ok(Some(atmlab_rpc::tls::TlsFiles::in_dir(dir, name).load()?)),
            }
        };
        let names_listener =
            TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| ControlError::Serve {
                    what: "the name service",
                    reason: e.to_string(),
                })?;
        let names_addr = names_listener
            .local_addr()
            .map_err(|e| ControlError::Serve {
                what: "the name service",
                reason: e.to_string(),
            })?;
        let names_tls = load("names")?;
        let (names_stop, rx) = tokio::sync::oneshot::channel::<()>();
        let names = NameServiceImpl::new(DirectoryConfig::default());
        let svc = names.clone();
        let names_task = tokio::spawn(async move {
            if let Err(e) = svc
                .serve(names_listener, names_tls, async {
                    let _ = rx.await;
                })
                .await
            {
                tracing::error!(error = %e, "name service stopped");
            }
        });
        let mut switches = Vec::with_capacity(topology.switches.len());
        for s in &topology.switches {
            let file = topology.server_file(&s.name, journal_dir)?;
            let tls = load(&s.name)?;
            switches.push(server::start(&file, tls.as_ref()).await?);
        }
        // Wire the links: each end learns the other's UDP address.
        let index = |name: &str| {
            topology
                .switches
                .iter()
                .position(|s| s.name == name)
                .expect("checked")
        };
        let udp = |sw: &RunningSwitch, port: u16| {
            sw.ports
                .iter()
                .find(|(p, _)| p.0 == port)
                .map(|(_, a)| *a)
                .expect("every configured port is bound")
        };
        for l in &topology.links {
            let a = topology.port_ref(&l.a).expect("checked");
            let b = topology.port_ref(&l.b).expect("checked");
            let (sa, sb) = (index(&a.switch), index(&b.switch));
            let (addr_a, addr_b) = (udp(&switches[sa], a.port), udp(&switches[sb], b.port));
            switches[sa]
                .data_plane
                .set_peer(PortId(a.port), addr_b, &switches[sa].switch);
            switches[sb]
                .data_plane
                .set_peer(PortId(b.port), addr_a, &switches[sb].switch);
        }
        // Register everything, renewing until the network stops.
        let admin = load("admin")?;
        let scheme = if security.certs.is_some() {
            "https"
        } else {
            "http"
        };
        let client =
            NameClient::connect(&format!("{scheme}://{names_addr}"), admin.as_ref()).await?;
        let lease = std::time::Duration::from_secs(10);
        let mut renewals = Vec::new();
        for (spec, sw) in topology.switches.iter().zip(&switches) {
            let obj = switch_object(&spec.name, sw, scheme);
            // Each switch registers (and renews) its own name with its own certificate,
            // so that it alone holds the entry (issue 24).
            let own = load(&spec.name)?;
            let own =
                NameClient::connect(&format!("{scheme}://{names_addr}"), own.as_ref()).await?;
            renewals.push(own.register_and_renew(obj, lease).await?);
        }
        for h in &topology.hosts {
            let r = topology.port_ref(&h.at).expect("checked");
            let sw = &switches[index(&r.switch)];
            let obj = host_object(&h.name, &r.switch, r.port, udp(sw, r.port));
            renewals.push(client.register_and_renew(obj, lease).await?);
        }
        Ok(Network {
            topology,
            names_addr,
            switches,
            tls: security.certs.is_some(),
            names,
            names_task,
            names_stop: Some(names_stop),
            renewals,
        })
    }

    /// The name service's URL (`https://` with TLS).
    pub fn names_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.names_addr)
    }

    /// Binds the port of the topology's host `host` to the socket `at`, in process (what
    /// the process that starts the hosts does; a host process binds its own port
    /// through the AttachHost RPC with its certificate, `atmlab host --control --as
    /// NAME`).
    pub fn attach_host(&self, host: &str, at: SocketAddr) -> Result<(), ControlError> {
        let unknown = || ControlError::UnknownHost {
            host: host.to_owned(),
        };
        let spec = self
            .topology
            .hosts
            .iter()
            .find(|h| h.name == host)
            .ok_or_else(unknown)?;
        let r = self.topology.port_ref(&spec.at).map_err(|_| unknown())?;
        let sw = self
            .topology
            .switches
            .iter()
            .position(|s| s.name == r.switch)
            .ok_or_else(unknown)?;
        if self.switches[sw].attach_host(PortId(r.port), at) {
            Ok(())
        } else {
            Err(unknown())
        }
    }

    /// A gRPC client of every switch server, by switch name, calling as `tls`.
    pub async fn switch_clients(
        &self,
        tls: Option<&TlsIdentity>,
    ) -> Result<Vec<(String, atmlab_fabric::live::grpc::GrpcSwitch)>, ControlError> {
        let mut clients = Vec::with_capacity(self.switches.len());
        for s in &self.switches {
            let name = s.switch.describe_now().name;
            let expect =
                atmlab_rpc::tls::Expect::object(atmlab_rpc::tls::Role::Switch, name.as_str());
            let ch = atmlab_rpc::channel_to(&s.grpc_addr.to_string(), tls, expect).await?;
            clients.push((name, atmlab_fabric::live::grpc::GrpcSwitch::new(ch)));
        }
        Ok(clients)
    }

    /// The network as JSON: where everything is (written to `net.json` by `net up`).
    pub fn to_json(&self) -> serde_json::Value {
        let scheme = if self.tls { "https" } else { "http" };
        let switches: Vec<serde_json::Value> = self
            .topology
            .switches
            .iter()
            .zip(&self.switches)
            .map(|(spec, sw)| {
                let ports: serde_json::Map<String, serde_json::Value> = sw
                    .ports
                    .iter()
                    .map(|(p, a)| (p.0.to_string(), serde_json::Value::String(a.to_string())))
                    .collect();
                serde_json::json!({
                    "name": spec.name,
                    "grpc": format!("{scheme}://{}", sw.grpc_addr),
                    "raw": sw.raw_addr.map(|a| a.to_string()),
                    "ports": ports,
                })
            })
            .collect();
        let hosts: Vec<serde_json::Value> = self
            .topology
            .hosts
            .iter()
            .map(|h| {
                let r = self.topology.port_ref(&h.at).expect("checked");
                let i = self.topology.switches.iter().position(|s| s.name == r.switch).expect("checked");
                let addr = self.switches[i]
                    .ports
                    .iter()
                    .find(|(p, _)| p.0 == r.port)
                    .map(|(_, a)| a.to_string())
                    .unwrap_or_default();
                // "control": the switch server that binds the host port to a host
                // (`atmlab host ... --control ADDR --port N`, the AttachHost RPC).
                let control = self.switches[i].grpc_addr.to_string();
                serde_json::json!({"name": h.name, "switch": r.switch, "port": r.port, "attach": addr, "control": control})
            })
            .collect();
        serde_json::json!({
            "name": self.topology.name,
            "names": format!("{scheme}://{}", self.names_addr),
            "tls": self.tls,
            "switches": switches,
            "hosts": hosts,
        })
    }

    /// Stops everything: registrations, switch servers, the name service.
    pub async fn down(mut self) {
        for r in self.renewals.drain(..) {
            r.stop().await;
        }
        for s in self.switches.drain(..) {
            s.stop().await;
        }
        if let Some(tx) = self.names_stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.names_task).await;
    }
}
