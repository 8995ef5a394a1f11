//! Server and topology files (TOML) for the live shell: what `atmlab smds serve --config
//! FILE` and `atmlab smds net up TOPO` read. Only this module and [`crate::live`] know
//! serde; they convert to the core's plain types ([`ServerConfig`]) by hand, and every
//! error names the file and the entry that was wrong.
//!
//! A server file:
//!
//! ```toml
//! id = 1                      # the server's id in routing (1 or more)
//! hello_ms = 1000             # optional: routing timers
//! dead_ms = 4000
//! queue = 1024                # optional: input queue per interface, in PDUs
//!
//! [[interface]]
//! kind = "sni"                # a subscriber: PDUs are UDP datagrams to and from it
//! bind = "127.0.0.1:7100"
//! addresses = ["I:15550001"]  # assigned to the subscriber; the only valid sources
//! destination_screen = { allow = ["I:15550002"] }  # optional, or { deny = [...] }
//! source_screen = { deny = ["I:15550666"] }         # optional
//! # peer = "127.0.0.1:9000"  # optional: the subscriber's address, the only one taken;
//! #                           # else the subscriber's first attach binds the SNI
//!
//! [[interface]]
//! kind = "issi"               # a link to another server
//! bind = "127.0.0.1:7201"
//! peer = "127.0.0.1:7202"       # the only address its frames are taken from
//! cost = 1
//! neighbour = 2                 # optional: the server there (else the first Hello's)
//!
//! [[interface]]
//! kind = "ici"                # another carrier, reached for these prefixes
//! bind = "127.0.0.1:7300"
//! peer = "127.0.0.1:7301"
//! prefixes = ["I:33"]
//!
//! [[interface]]
//! kind = "sni"                # an SNI over ATM (paper 002's servers sat on ATM):
//! addresses = ["I:15550003"]  # L3_PDUs as AAL3/4 cells on a VC through atmlab switches
//! atm = { switch = "127.0.0.1:7400", send_vc = "0/40", recv_vc = "0/41" }
//! # atm keys: switch (the switch port's UDP address, required); vc = "VPI/VCI" for
//! # both directions, or send_vc and recv_vc (what the connections through the switches
//! # give each end); rate (the link rate that paces sending, default "155.52 Mb/s");
//! # mid (the AAL3/4 MID of the messages sent, 0-1023, default 1). With atm, bind is
//! # the host's own UDP address (default "127.0.0.1:0") and there is no peer: the VC
//! # is the peer. An ISSI or ICI may run over ATM the same way.
//!
//! [[group]]
//! address = "G:15559999"
//! members = ["I:15550001", "I:15550002"]
//! ```
//!
//! A topology file for `net up` (all servers in one process on loopback, ports chosen by
//! the system):
//!
//! ```toml
//! [[server]]
//! name = "s1"
//! subscribers = ["I:15550101", "I:15550102"]   # one SNI each
//!
//! [[server]]
//! name = "s2"
//! subscribers = ["I:15550201"]
//!
//! [[link]]
//! a = "s1"
//! b = "s2"
//! cost = 1                   # optional
//!
//! [[group]]                  # optional, given to every server
//! address = "G:15559999"
//! members = ["I:15550101", "I:15550201"]
//! ```

use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;

use atmlab_core::ids::{VcId, Vpi};
use atmlab_core::time::Duration;
use atmlab_core::units::BitRate;
use atmlab_wire::E164Address;
use serde::Deserialize;

use crate::SmdsError;
use crate::cmp::CmpConfig;
use crate::fib::{GroupConfig, IciConfig, InterfaceConfig, LocalConfig, ScreenList, SniConfig};
use crate::ids::{IfaceId, ServerId};
use crate::linkstate::LinkStateConfig;
use crate::server::ServerConfig;

/// The default input queue per interface, in PDUs.
pub const DEFAULT_QUEUE: usize = 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFileRaw {
    id: u32,
    #[serde(default)]
    hello_ms: Option<u64>,
    #[serde(default)]
    dead_ms: Option<u64>,
    #[serde(default)]
    queue: Option<usize>,
    #[serde(default, rename = "interface")]
    interfaces: Vec<IfaceRaw>,
    #[serde(default, rename = "group")]
    groups: Vec<GroupRaw>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScreenRaw {
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IfaceRaw {
    kind: String,
    #[serde(default)]
    bind: Option<String>,
    #[serde(default)]
    atm: Option<AtmRaw>,
    #[serde(default)]
    peer: Option<String>,
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    destination_screen: Option<ScreenRaw>,
    #[serde(default)]
    source_screen: Option<ScreenRaw>,
    #[serde(default)]
    cost: Option<u32>,
    #[serde(default)]
    neighbour: Option<u32>,
    #[serde(default)]
    prefixes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AtmRaw {
    switch: String,
    #[serde(default)]
    vc: Option<String>,
    #[serde(default)]
    send_vc: Option<String>,
    #[serde(default)]
    recv_vc: Option<String>,
    #[serde(default)]
    rate: Option<String>,
    #[serde(default)]
    mid: Option<u16>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupRaw {
    address: String,
    members: Vec<String>,
}

/// Where one interface's UDP socket binds, and its peer if fixed; or, over ATM, the
/// switch port and VCs it uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Endpoint {
    /// The local address (over ATM: the host's own address on the cell data plane).
    pub bind: SocketAddr,
    /// The peer (required on a UDP ISSI and ICI; on an SNI, learned from the subscriber
    /// if absent; none over ATM).
    pub peer: Option<SocketAddr>,
    /// The interface runs over ATM: its messages are AAL3/4 cells on a VC.
    pub atm: Option<AtmAttach>,
}

/// An interface over ATM: attached to a switch port of the live cell data plane (as a
/// host is), sending on one VC and receiving on another, each message (an L3_PDU on an
/// SNI or ICI, a frame of [`crate::msg`] on an ISSI) one AAL3/4 CPCS-PDU.
///
/// This crate only describes it: the cell data plane is `atmlab-fabric`, which the SMDS
/// crate does not depend on (see docs/ARCHITECTURE.md); `atmlab-lab`'s `smds_atm`
/// bridges the two and `atmlab smds serve` uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AtmAttach {
    /// The switch port's UDP address.
    pub switch: SocketAddr,
    /// The VC the interface sends on.
    pub send_vc: VcId,
    /// The VC the interface receives on.
    pub recv_vc: VcId,
    /// The link rate, which paces sending.
    pub rate: BitRate,
    /// The AAL3/4 MID of the messages sent.
    pub mid: u16,
}

/// The default link rate of an ATM interface: paper 002's SBA-200 boards ran at
/// 155.52 Mb/s (the paper's "150 Mbps").
pub const DEFAULT_ATM_RATE: BitRate = BitRate(155.52e6);

fn atm(file: &str, at: &str, raw: &AtmRaw) -> Result<AtmAttach, SmdsError> {
    let switch = sock(file, &format!("{at}: atm.switch"), &raw.switch)?;
    let vc = |key: &str, s: &str| -> Result<VcId, SmdsError> {
        let vc: VcId = s
            .parse()
            .map_err(|e| cerr(file, format!("{at}: atm.{key} {s:?}: {e}")))?;
        if vc.vpi.0 > Vpi::MAX_UNI {
            return Err(cerr(
                file,
                format!(
                    "{at}: atm.{key} {s:?}: a host's VPI is at most {} (UNI)",
                    Vpi::MAX_UNI
                ),
            ));
        }
        Ok(vc)
    };
    let (send_vc, recv_vc) = match (&raw.vc, &raw.send_vc, &raw.recv_vc) {
        (Some(v), None, None) => (vc("vc", v)?, vc("vc", v)?),
        (None, Some(s), Some(r)) => (vc("send_vc", s)?, vc("recv_vc", r)?),
        _ => {
            return Err(cerr(
                file,
                format!("{at}: atm needs either vc = \"VPI/VCI\" or both send_vc and recv_vc"),
            ));
        }
    };
    let rate = match &raw.rate {
        None => DEFAULT_ATM_RATE,
        Some(r) => {
            let rate: BitRate = r
                .parse()
                .map_err(|e| cerr(file, format!("{at}: atm.rate {r:?}: {e}")))?;
            if !(rate.0.is_finite() && rate.0 > 0.0) {
                return Err(cerr(
                    file,
                    format!("{at}: atm.rate {r:?}: must be positive"),
                ));
            }
            rate
        }
    };
    let mid = raw.mid.unwrap_or(1);
    if mid > atmlab_wire::aal34::MAX_MID {
        return Err(cerr(
            file,
            format!(
                "{at}: atm.mid {mid}: an AAL3/4 MID is 0-{}",
                atmlab_wire::aal34::MAX_MID
            ),
        ));
    }
    Ok(AtmAttach {
        switch,
        send_vc,
        recv_vc,
        rate,
        mid,
    })
}

/// A server file, read and checked.
#[derive(Debug, Clone)]
pub struct ServerFile {
    /// The core configuration.
    pub config: ServerConfig,
    /// One endpoint per interface, in interface order.
    pub endpoints: Vec<Endpoint>,
    /// Input queue per interface, in PDUs.
    pub queue: usize,
}

/// A file's text and its name for messages.
fn read(path: &Path) -> Result<(String, String), SmdsError> {
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| SmdsError::io(format!("reading {name}"), e))?;
    Ok((text, name))
}

fn cerr(file: &str, what: String) -> SmdsError {
    SmdsError::Config(format!("{file}: {what}"))
}

fn addr(file: &str, at: &str, s: &str) -> Result<E164Address, SmdsError> {
    E164Address::from_str(s).map_err(|e| cerr(file, format!("{at}: address {s:?}: {e}")))
}

fn addrs(file: &str, at: &str, v: &[String]) -> Result<Vec<E164Address>, SmdsError> {
    v.iter().map(|s| addr(file, at, s)).collect()
}

fn sock(file: &str, at: &str, s: &str) -> Result<SocketAddr, SmdsError> {
    s.parse()
        .map_err(|e| cerr(file, format!("{at}: socket address {s:?}: {e}")))
}

fn screen(file: &str, at: &str, s: &Option<ScreenRaw>) -> Result<ScreenList, SmdsError> {
    match s {
        None => Ok(ScreenList::Open),
        Some(ScreenRaw {
            allow: Some(a),
            deny: None,
        }) => Ok(ScreenList::Allow(addrs(file, at, a)?)),
        Some(ScreenRaw {
            allow: None,
            deny: Some(d),
        }) => Ok(ScreenList::Deny(addrs(file, at, d)?)),
        Some(_) => Err(cerr(
            file,
            format!("{at}: a screen is either {{ allow = [...] }} or {{ deny = [...] }}"),
        )),
    }
}

fn groups(file: &str, raw: &[GroupRaw]) -> Result<Vec<GroupConfig>, SmdsError> {
    raw.iter()
        .enumerate()
        .map(|(i, g)| {
            let at = format!("group {}", i + 1);
            Ok(GroupConfig {
                address: addr(file, &at, &g.address)?,
                members: addrs(file, &at, &g.members)?,
            })
        })
        .collect()
}

fn timers(hello_ms: Option<u64>, dead_ms: Option<u64>) -> LinkStateConfig {
    let mut ls = LinkStateConfig::default();
    if let Some(h) = hello_ms {
        ls.hello_interval = Duration::from_millis(h.max(1));
        ls.dead_interval = Duration::from_millis(h.max(1) * 4);
    }
    if let Some(d) = dead_ms {
        ls.dead_interval = Duration::from_millis(d.max(1));
    }
    ls
}

impl ServerFile {
    /// Reads a server file.
    pub fn load(path: &Path) -> Result<ServerFile, SmdsError> {
        let (text, name) = read(path)?;
        ServerFile::parse(&text, &name)
    }

    /// Parses the text of a server file called `file` (for messages).
    pub fn parse(text: &str, file: &str) -> Result<ServerFile, SmdsError> {
        let raw: ServerFileRaw = toml::from_str(text).map_err(|e| cerr(file, e.to_string()))?;
        let mut interfaces = Vec::new();
        let mut endpoints = Vec::new();
        let mut neighbours = Vec::new();
        for (i, f) in raw.interfaces.iter().enumerate() {
            let at = format!("interface {} ({})", i + 1, f.kind);
            let over_atm = f.atm.as_ref().map(|a| atm(file, &at, a)).transpose()?;
            let bind = match (&f.bind, &over_atm) {
                (Some(b), _) => sock(file, &at, b)?,
                (None, Some(_)) => SocketAddr::from(([127, 0, 0, 1], 0)),
                (None, None) => return Err(cerr(file, format!("{at}: needs a bind"))),
            };
            let peer = f.peer.as_deref().map(|p| sock(file, &at, p)).transpose()?;
            if over_atm.is_some() && peer.is_some() {
                return Err(cerr(
                    file,
                    format!("{at}: an interface over ATM has no peer (its VC is the peer)"),
                ));
            }
            let only = |ok: bool, what: &str| {
                if ok {
                    Ok(())
                } else {
                    Err(cerr(
                        file,
                        format!("{at}: {what} is not for a {} interface", f.kind),
                    ))
                }
            };
            let ifc = match f.kind.as_str() {
                "sni" => {
                    only(f.cost.is_none(), "cost")?;
                    only(f.neighbour.is_none(), "neighbour")?;
                    only(f.prefixes.is_empty(), "prefixes")?;
                    InterfaceConfig::Sni(SniConfig {
                        addresses: addrs(file, &at, &f.addresses)?,
                        destination_screen: screen(file, &at, &f.destination_screen)?,
                        source_screen: screen(file, &at, &f.source_screen)?,
                    })
                }
                "issi" | "ici" => {
                    only(f.addresses.is_empty(), "addresses")?;
                    only(
                        f.destination_screen.is_none() && f.source_screen.is_none(),
                        "a screen",
                    )?;
                    if peer.is_none() && over_atm.is_none() {
                        return Err(cerr(file, format!("{at}: needs a peer (or atm)")));
                    }
                    if f.kind == "issi" {
                        only(f.prefixes.is_empty(), "prefixes")?;
                        if let Some(n) = f.neighbour {
                            neighbours.push((IfaceId(interfaces.len() as u16), ServerId(n)));
                        }
                        InterfaceConfig::Issi {
                            cost: f.cost.unwrap_or(1),
                        }
                    } else {
                        only(f.cost.is_none(), "cost")?;
                        only(f.neighbour.is_none(), "neighbour")?;
                        InterfaceConfig::Ici(IciConfig {
                            prefixes: addrs(file, &at, &f.prefixes)?,
                        })
                    }
                }
                other => {
                    return Err(cerr(
                        file,
                        format!("{at}: kind {other:?} is not one of \"sni\", \"issi\", \"ici\""),
                    ));
                }
            };
            interfaces.push(ifc);
            endpoints.push(Endpoint {
                bind,
                peer,
                atm: over_atm,
            });
        }
        let local = LocalConfig {
            id: ServerId(raw.id),
            interfaces,
            groups: groups(file, &raw.groups)?,
        };
        local.validate().map_err(|e| cerr(file, e.to_string()))?;
        Ok(ServerFile {
            config: ServerConfig {
                local,
                link_state: timers(raw.hello_ms, raw.dead_ms),
                cmp: CmpConfig::default(),
                neighbours,
            },
            endpoints,
            queue: raw.queue.unwrap_or(DEFAULT_QUEUE).max(1),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopoRaw {
    #[serde(default)]
    hello_ms: Option<u64>,
    #[serde(default)]
    dead_ms: Option<u64>,
    #[serde(rename = "server")]
    servers: Vec<TopoServerRaw>,
    #[serde(default, rename = "link")]
    links: Vec<TopoLinkRaw>,
    #[serde(default, rename = "group")]
    groups: Vec<GroupRaw>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopoServerRaw {
    name: String,
    #[serde(default)]
    subscribers: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopoLinkRaw {
    a: String,
    b: String,
    #[serde(default)]
    cost: Option<u32>,
}

/// A network for `net up`: server names, and for each its core configuration (SNIs
/// first, one per subscriber, then one ISSI per link end in link order).
#[derive(Debug, Clone)]
pub struct TopologyFile {
    /// (name, configuration) per server; ids are 1, 2, ... in file order.
    pub servers: Vec<(String, ServerConfig)>,
    /// Links: ((server index, interface), (server index, interface)).
    pub links: Vec<((usize, u16), (usize, u16))>,
}

impl TopologyFile {
    /// Reads a topology file.
    pub fn load(path: &Path) -> Result<TopologyFile, SmdsError> {
        let (text, name) = read(path)?;
        TopologyFile::parse(&text, &name)
    }

    /// Parses the text of a topology file called `file`.
    pub fn parse(text: &str, file: &str) -> Result<TopologyFile, SmdsError> {
        let raw: TopoRaw = toml::from_str(text).map_err(|e| cerr(file, e.to_string()))?;
        let gs = groups(file, &raw.groups)?;
        let ls = timers(raw.hello_ms, raw.dead_ms);
        let mut servers: Vec<(String, ServerConfig)> = Vec::new();
        for (i, s) in raw.servers.iter().enumerate() {
            if servers.iter().any(|(n, _)| *n == s.name) {
                return Err(cerr(file, format!("server {:?} appears twice", s.name)));
            }
            let at = format!("server {:?}", s.name);
            let interfaces = addrs(file, &at, &s.subscribers)?
                .into_iter()
                .map(|a| {
                    InterfaceConfig::Sni(SniConfig {
                        addresses: vec![a],
                        ..SniConfig::default()
                    })
                })
                .collect();
            let local = LocalConfig {
                id: ServerId(i as u32 + 1),
                interfaces,
                groups: gs.clone(),
            };
            servers.push((
                s.name.clone(),
                ServerConfig {
                    local,
                    link_state: ls,
                    cmp: CmpConfig::default(),
                    neighbours: Vec::new(),
                },
            ));
        }
        let mut links = Vec::new();
        for (k, l) in raw.links.iter().enumerate() {
            let find = |n: &str| {
                servers
                    .iter()
                    .position(|(m, _)| m == n)
                    .ok_or_else(|| cerr(file, format!("link {}: no server called {n:?}", k + 1)))
            };
            let (a, b) = (find(&l.a)?, find(&l.b)?);
            if a == b {
                return Err(cerr(
                    file,
                    format!("link {}: a server linked to itself", k + 1),
                ));
            }
            let mut end = |s: usize| {
                let ifs = &mut servers[s].1.local.interfaces;
                ifs.push(InterfaceConfig::Issi {
                    cost: l.cost.unwrap_or(1),
                });
                (s, (ifs.len() - 1) as u16)
            };
            let ea = end(a);
            let eb = end(b);
            // Each end knows the server at the other (ids are file order from 1).
            servers[a]
                .1
                .neighbours
                .push((IfaceId(ea.1), ServerId(b as u32 + 1)));
            servers[b]
                .1
                .neighbours
                .push((IfaceId(eb.1), ServerId(a as u32 + 1)));
            links.push((ea, eb));
        }
        for (n, s) in &servers {
            s.local
                .validate()
                .map_err(|e| cerr(file, format!("server {n:?}: {e}")))?;
        }
        Ok(TopologyFile { servers, links })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issi_names_its_neighbour_in_the_file_or_the_topology() {
        let f = ServerFile::parse(
            "id = 1\n[[interface]]\nkind = \"sni\"\nbind = \"127.0.0.1:0\"\n\
             addresses = [\"I:15550001\"]\n[[interface]]\nkind = \"issi\"\n\
             bind = \"127.0.0.1:0\"\npeer = \"127.0.0.1:9\"\nneighbour = 7\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(f.config.neighbours, vec![(IfaceId(1), ServerId(7))]);
        // Only an ISSI has a neighbour.
        let e = ServerFile::parse(
            "id = 1\n[[interface]]\nkind = \"sni\"\nbind = \"127.0.0.1:0\"\n\
             addresses = [\"I:15550001\"]\nneighbour = 2\n",
            "s.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("neighbour"), "{e}");
        // The control core refuses a neighbour with this server's own id.
        let mut own = f.config.clone();
        own.neighbours = vec![(IfaceId(1), ServerId(1))];
        let e = crate::server::Control::new(own, atmlab_core::time::Instant::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("neighbour 1 on interface 2"), "{e}");
        // A topology: each end of a link knows the server at the other.
        let t = TopologyFile::parse(
            "[[server]]\nname = \"a\"\nsubscribers = [\"I:15550101\"]\n\
             [[server]]\nname = \"b\"\nsubscribers = []\n[[link]]\na = \"a\"\nb = \"b\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(t.servers[0].1.neighbours, vec![(IfaceId(1), ServerId(2))]);
        assert_eq!(t.servers[1].1.neighbours, vec![(IfaceId(0), ServerId(1))]);
    }

    #[test]
    fn a_server_file_reads_and_a_wrong_one_is_named() {
        let f = ServerFile::parse(
            r#"
id = 3
[[interface]]
kind = "sni"
bind = "127.0.0.1:0"
addresses = ["I:15550001"]
destination_screen = { allow = ["I:15550002"] }
[[interface]]
kind = "issi"
bind = "127.0.0.1:0"
peer = "127.0.0.1:9"
"#,
            "s.toml",
        )
        .unwrap();
        assert_eq!(f.config.local.id, ServerId(3));
        assert_eq!(f.endpoints.len(), 2);
        assert!(f.endpoints.iter().all(|e| e.atm.is_none()));
        // An SNI over ATM: the VCs of each direction, the defaults.
        let f = ServerFile::parse(
            r#"
id = 3
[[interface]]
kind = "sni"
addresses = ["I:15550001"]
atm = { switch = "127.0.0.1:7400", send_vc = "0/40", recv_vc = "1/41" }
[[interface]]
kind = "issi"
atm = { switch = "127.0.0.1:7401", vc = "0/50", rate = "622.08 Mb/s", mid = 7 }
"#,
            "s.toml",
        )
        .unwrap();
        let a = f.endpoints[0].atm.unwrap();
        assert_eq!((a.send_vc, a.recv_vc), (VcId::new(0, 40), VcId::new(1, 41)));
        assert_eq!((a.rate, a.mid), (DEFAULT_ATM_RATE, 1));
        let b = f.endpoints[1].atm.unwrap();
        assert_eq!(
            (b.send_vc, b.recv_vc, b.mid),
            (VcId::new(0, 50), VcId::new(0, 50), 7)
        );
        assert_eq!(b.rate, BitRate(622.08e6));
        for (text, want) in [
            ("id = 1\nbogus = 2", "unknown field"),
            (
                "id = 1\n[[interface]]\nkind = \"sni\"\nbind = \"127.0.0.1:0\"\naddresses = [\"x\"]",
                "interface 1 (sni): address \"x\"",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\nbind = \"127.0.0.1:0\"",
                "needs a peer",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"atm\"\nbind = \"127.0.0.1:0\"",
                "is not one of",
            ),
            ("id = 0", "reserved"),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\natm = { switch = \"127.0.0.1:9\" }",
                "atm needs either vc",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\natm = { switch = \"127.0.0.1:9\", vc = \"300/40\" }",
                "atm.vc \"300/40\": a host's VPI is at most 255",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\natm = { switch = \"127.0.0.1:9\", vc = \"0/40\", mid = 2000 }",
                "atm.mid 2000",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\natm = { switch = \"127.0.0.1:9\", vc = \"0/40\", rate = \"fast\" }",
                "atm.rate \"fast\"",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\npeer = \"127.0.0.1:9\"\natm = { switch = \"127.0.0.1:9\", vc = \"0/40\" }",
                "has no peer",
            ),
            (
                "id = 1\n[[interface]]\nkind = \"issi\"\natm = { switch = \"127.0.0.1:9\", vc = \"0/40\", speed = 1 }",
                "unknown field",
            ),
        ] {
            let e = ServerFile::parse(text, "s.toml").unwrap_err().to_string();
            assert!(e.contains("s.toml") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_topology_reads() {
        let t = TopologyFile::parse(
            r#"
[[server]]
name = "a"
subscribers = ["I:1"]
[[server]]
name = "b"
subscribers = ["I:2", "I:3"]
[[link]]
a = "a"
b = "b"
"#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(t.links, vec![((0, 1), (1, 2))]);
        let e = TopologyFile::parse(
            "[[server]]\nname = \"a\"\n[[link]]\na = \"a\"\nb = \"z\"",
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no server called \"z\""), "{e}");
    }
}
