//! Networks from a topology file: `atmlab net up TOPO` starts a name service, one switch
//! server per switch, wires the links and registers everything, on loopback, in one
//! command (the testbeds of papers 000 §III and 001 §4, in one process).
//!
//! A topology (TOML):
//!
//! ```toml
//! name = "line3"
//! [defaults]                 # optional, for every port
//! link_rate = "155.52 Mb/s"
//! buffer_cells = 1024
//!
//! [[switch]]
//! name = "s1"
//! ports = 2                  # ports 0..2
//!
//! [[link]]                   # a duplex link between two switch ports (NNI)
//! a = "s1:1"
//! b = "s2:0"
//!
//! [[host]]                   # an end system on a switch port (UNI)
//! name = "a"
//! at = "s1:0"
//! ```
//!
//! Each switch gets a gRPC and a raw-TCP control address and a UDP socket per port, all on
//! 127.0.0.1 with ports the OS picks; links are wired by telling each end its
//! neighbour's address; host ports learn their host from its first datagram. Everything
//! is registered in the name service: `switch/NAME` (gRPC address; attributes `raw` and
//! `port.N` = the port's UDP address) and `host/NAME` (address = the UDP address of the
//! switch port it attaches to; attributes `switch`, `port`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;

use atmlab_core::ids::PortId;
use atmlab_fabric::live::server::{self, PortFile, RunningSwitch, ServerFile};
use atmlab_rpc::tls::TlsIdentity;
use serde::Deserialize;
use tokio::net::TcpListener;

use crate::ControlError;
use crate::names::{
    DirectoryConfig, NameClient, NameServiceImpl, ObjectInfo, ObjectKind, RenewalHandle,
};

/// Port settings shared by every port unless a switch says otherwise.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortDefaults {
    /// Link rate, e.g. "155.52 Mb/s".
    pub link_rate: Option<String>,
    /// Admissible bandwidth, e.g. "300000 cells/s".
    pub capacity: Option<String>,
    /// Output buffer (cells).
    pub buffer_cells: Option<u32>,
    /// VPI range.
    pub vpi: Option<[u16; 2]>,
    /// VCI range.
    pub vci: Option<[u16; 2]>,
}

/// One switch of a topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Its name (letters, digits, '-', '.'; it is also its certificate's name).
    pub name: String,
    /// Number of ports, numbered from 0.
    pub ports: u16,
    /// Overrides of the defaults for this switch's ports.
    #[serde(default)]
    pub port: Option<PortDefaults>,
}

/// A link between two switch ports, written "switch:port".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
}

/// An end system attached to a switch port.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Its name.
    pub name: String,
    /// "switch:port".
    pub at: String,
}

/// A whole topology file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The network's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Port defaults.
    #[serde(default)]
    pub defaults: PortDefaults,
    /// Switches.
    #[serde(rename = "switch", default)]
    pub switches: Vec<SwitchSpec>,
    /// Links.
    #[serde(rename = "link", default)]
    pub links: Vec<LinkSpec>,
    /// Hosts.
    #[serde(rename = "host", default)]
    pub hosts: Vec<HostSpec>,
}

/// A "switch:port" reference.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRef {
    /// The switch.
    pub switch: String,
    /// The port.
    pub port: u16,
}

impl Topology {
    /// Parses and checks a topology; errors name the origin and the key.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ControlError> {
        let t: Topology = toml::from_str(text).map_err(|e| ControlError::Topology {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        t.check(origin)?;
        Ok(t)
    }

    /// Reads a topology file.
    pub fn load(path: &Path) -> Result<Self, ControlError> {
        let text = std::fs::read_to_string(path).map_err(|e| ControlError::Topology {
            origin: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Resolves "switch:port", checking both exist.
    pub fn port_ref(&self, s: &str) -> Result<PortRef, String> {
        let (sw, p) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not written \"switch:port\""))?;
        let port: u16 = p
            .parse()
            .map_err(|_| format!("{s:?}: {p:?} is not a port number"))?;
        let spec = self
            .switches
            .iter()
            .find(|x| x.name == sw)
            .ok_or_else(|| format!("{s:?}: there is no switch {sw:?}"))?;
        if port >= spec.ports {
            return Err(format!("{s:?}: switch {sw} has ports 0..{}", spec.ports));
        }
        Ok(PortRef {
            switch: sw.to_string(),
            port,
        })
    }

    fn check(&self, origin: &str) -> Result<(), ControlError> {
        let err = |message: String| ControlError::Topology {
            origin: origin.to_string(),
            message,
        };
        let bad = |message: String| Err(err(message));
        if self.switches.is_empty() {
            return bad("no [[switch]]".into());
        }
        let mut names = BTreeSet::new();
        for s in &self.switches {
            let ok = !s.name.is_empty()
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
                && s.name != "ca"
                && s.name != "names"
                && s.name != "admin";
            if !ok {
                return bad(format!(
                    "switch name {:?}: use letters, digits, '-' and '.' (not ca, names, admin)",
                    s.name
                ));
            }
            if !names.insert(s.name.clone()) {
                return bad(format!("switch {:?} appears twice", s.name));
            }
            if s.ports == 0 {
                return bad(format!("switch {}: ports must be at least 1", s.name));
            }
        }
        let mut used: BTreeMap<PortRef, String> = BTreeMap::new();
        let mut claim = |r: PortRef, by: String| -> Result<(), String> {
            if let Some(prev) = used.insert(r.clone(), by.clone()) {
                return Err(format!(
                    "{}:{} is used by both {prev} and {by}",
                    r.switch, r.port
                ));
            }
            Ok(())
        };
        for (i, l) in self.links.iter().enumerate() {
            let a = self
                .port_ref(&l.a)
                .map_err(|e| err(format!("link[{i}].a: {e}")))?;
            let b = self
                .port_ref(&l.b)
                .map_err(|e| err(format!("link[{i}].b: {e}")))?;
            claim(a, format!("link[{i}]")).map_err(err)?;
            claim(b, format!("link[{i}]")).map_err(err)?;
        }
        let mut hosts = BTreeSet::new();
        for h in &self.hosts {
            if !hosts.insert(h.name.clone()) {
                return bad(format!("host {:?} appears twice", h.name));
            }
            let r = self
                .port_ref(&h.at)
                .map_err(|e| err(format!("host {}: at: {e}", h.name)))?;
            claim(r, format!("host {}", h.name)).map_err(err)?;
        }
        Ok(())
    }

    /// Every name that needs a certificate: the switches, the name service, and `admin`.
    pub fn certificate_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.switches.iter().map(|s| s.name.clone()).collect();
        v.push("names".into());
        v.push("admin".into());
        v
    }

    /// The switch-server configuration of one switch (loopback, ephemeral ports).
    pub fn server_file(
        &self,
        name: &str,
        journal_dir: Option<&Path>,
    ) -> Result<ServerFile, ControlError> {
        let spec = self
            .switches
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| ControlError::Topology {
                origin: "topology".into(),
                message: format!("no switch {name:?}"),
            })?;
        let trunk: BTreeSet<u16> = self
            .links
            .iter()
            .flat_map(|l| [self.port_ref(&l.a), self.port_ref(&l.b)])
            .flatten()
            .filter(|r| r.switch == name)
            .map(|r| r.port)
            .collect();
        let d = spec.port.clone().unwrap_or_default();
        let pick = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
        let any: SocketAddr = "127.0.0.1:0".parse().expect("literal");
        let ports = (0..spec.ports)
            .map(|id| PortFile {
                id,
                interface: Some(if trunk.contains(&id) { "nni" } else { "uni" }.into()),
                link_rate: pick(&d.link_rate, &self.defaults.link_rate),
                capacity: pick(&d.capacity, &self.defaults.capacity),
                buffer_cells: d.buffer_cells.or(self.defaults.buffer_cells),
                clp_threshold: None,
                vpi: d.vpi.or(self.defaults.vpi),
                vci: d.vci.or(self.defaults.vci),
                udp: Some(any),
                peer: None,
            })
            .collect();
        Ok(ServerFile {
            name: name.to_string(),
            grpc: Some(any),
            raw: Some(any),
            journal: journal_dir.map(|d| d.join(format!("{name}.table"))),
            journal_sync: false,
            cells_per_datagram: None,
            ports,
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
        let names_task = tokio::spawn(async move {
            let svc = NameServiceImpl::new(DirectoryConfig::default());
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
            let mut obj = ObjectInfo::new(
                format!("switch/{}", spec.name),
                ObjectKind::SwitchServer,
                format!("{scheme}://{}", sw.grpc_addr),
            );
            if let Some(raw) = sw.raw_addr {
                obj = obj.with_attribute("raw", raw.to_string());
            }
            for (p, a) in &sw.ports {
                obj = obj.with_attribute(format!("port.{}", p.0), format!("udp:{a}"));
            }
            renewals.push(client.register_and_renew(obj, lease).await?);
        }
        for h in &topology.hosts {
            let r = topology.port_ref(&h.at).expect("checked");
            let sw = &switches[index(&r.switch)];
            let obj = ObjectInfo::new(
                format!("host/{}", h.name),
                ObjectKind::Host,
                format!("udp:{}", udp(sw, r.port)),
            )
            .with_attribute("switch", r.switch.clone())
            .with_attribute("port", r.port.to_string());
            renewals.push(client.register_and_renew(obj, lease).await?);
        }
        Ok(Network {
            topology,
            names_addr,
            switches,
            tls: security.certs.is_some(),
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

    /// A gRPC client of every switch server, by switch name, calling as `tls`.
    pub async fn switch_clients(
        &self,
        tls: Option<&TlsIdentity>,
    ) -> Result<Vec<(String, atmlab_fabric::live::grpc::GrpcSwitch)>, ControlError> {
        let mut clients = Vec::with_capacity(self.switches.len());
        for s in &self.switches {
            let ch = atmlab_rpc::client_channel(&s.grpc_addr.to_string(), tls).await?;
            clients.push((
                s.switch.describe_now().name,
                atmlab_fabric::live::grpc::GrpcSwitch::new(ch),
            ));
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
                serde_json::json!({"name": h.name, "switch": r.switch, "port": r.port, "attach": addr})
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
