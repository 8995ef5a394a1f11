//! Predefined PDUs on a server with every kind of path, for the header-processing
//! measurements (paper 002 §4.1: "the server is always told that a PDU is ready to be
//! read and the reception is simulated (a fixed set of predefined PDU is used)") and the
//! parallel server's aggregate throughput (§5.2).
//!
//! The server under test is `s1` with `snis` SNIs (subscriber `k` has
//! [`address`]`(1, k)`) and `issis` ISSIs; behind ISSI `j` is server `100 + j` with
//! subscriber [`address`]`(100 + j, 0)`.

use std::sync::Arc;

use crate::fib::{Fib, InterfaceConfig, LocalConfig, Routes, SniConfig};
use crate::harness::address;
use crate::ids::{IfaceId, ServerId};
use crate::msg::{envelope, l3_pdu};

/// The paths of Table 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// A subscriber's PDU injected into the network.
    SniToIssi,
    /// A PDU from the network delivered to a subscriber.
    IssiToSni,
    /// Switching: from one ISSI to another.
    IssiToIssi,
}

impl Path {
    /// The three, in Table 1's order.
    pub const ALL: [Path; 3] = [Path::SniToIssi, Path::IssiToSni, Path::IssiToIssi];

    /// Table 1's name for the path.
    pub fn name(self) -> &'static str {
        match self {
            Path::SniToIssi => "SNI to ISSI",
            Path::IssiToSni => "ISSI to SNI",
            Path::IssiToIssi => "Switching (ISSI to ISSI)",
        }
    }

    /// The paper's Table 1: headers per second and mean processing time (us) on a Sun
    /// SPARCstation 20.
    pub fn paper(self) -> (f64, f64) {
        match self {
            Path::SniToIssi => (5025.0, 199.0),
            Path::IssiToSni => (8093.0, 124.0),
            Path::IssiToIssi => (5347.0, 187.0),
        }
    }
}

/// The server under test and its forwarding state.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Its configuration.
    pub local: LocalConfig,
    /// Its forwarding state, with routes to the servers behind its ISSIs.
    pub fib: Arc<Fib>,
    snis: usize,
    issis: usize,
}

impl Workload {
    /// A server with `snis` SNIs and `issis` ISSIs (both at least 1).
    pub fn new(snis: usize, issis: usize) -> Workload {
        let (snis, issis) = (snis.max(1), issis.max(1));
        let mut interfaces: Vec<InterfaceConfig> = (0..snis)
            .map(|k| {
                InterfaceConfig::Sni(SniConfig {
                    addresses: vec![address(1, k as u32)],
                    ..SniConfig::default()
                })
            })
            .collect();
        interfaces.extend((0..issis).map(|_| InterfaceConfig::Issi { cost: 1 }));
        let local = LocalConfig {
            id: ServerId(1),
            interfaces,
            groups: Vec::new(),
        };
        let mut routes = Routes::default();
        for j in 0..issis {
            let s = ServerId(100 + j as u32);
            routes.next_hop.insert(s, IfaceId((snis + j) as u16));
            routes.owners.push((address(s.0, 0), s));
        }
        let fib = Arc::new(Fib::build(&local, &routes, &[]));
        Workload {
            local,
            fib,
            snis,
            issis,
        }
    }

    /// The ISSI interface `j`.
    pub fn issi(&self, j: usize) -> IfaceId {
        IfaceId((self.snis + j % self.issis) as u16)
    }

    /// `count` predefined datagrams for `path`, each with `info` octets of Info, spread
    /// over the interfaces: (interface it arrives on, octets).
    pub fn frames(&self, path: Path, info: usize, count: usize) -> Vec<(IfaceId, Vec<u8>)> {
        let body: Vec<u8> = (0..info).map(|i| i as u8).collect();
        (0..count)
            .map(|i| {
                let k = i % self.snis;
                let j = i % self.issis;
                let remote = address(100 + j as u32, 0);
                let next = address(100 + ((j + 1) % self.issis) as u32, 0);
                let pdu = |s, d| l3_pdu(s, d, &body, i as u8).expect("valid PDU");
                let issi = |pdu: Vec<u8>| {
                    let mut v = envelope(ServerId(0), 1).to_vec();
                    v.extend(pdu);
                    v
                };
                match path {
                    Path::SniToIssi => (IfaceId(k as u16), pdu(address(1, k as u32), remote)),
                    Path::IssiToSni => (self.issi(j), issi(pdu(remote, address(1, k as u32)))),
                    Path::IssiToIssi => (self.issi(j), issi(pdu(remote, next))),
                }
            })
            .collect()
    }
}

/// The link-state database of a random connected network of `n` servers: a ring (so it
/// is connected) plus `extra` random links per server on average, cost 1-10, one
/// subscriber address per server; seeded, so the same arguments give the same network.
pub fn random_network(n: usize, extra: f64, seed: u64) -> Vec<crate::msg::Lsa> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut adj: Vec<Vec<(ServerId, u32)>> = vec![Vec::new(); n];
    let link = |a: usize, b: usize, c: u32, adj: &mut Vec<Vec<(ServerId, u32)>>| {
        if a == b || adj[a].iter().any(|(x, _)| x.0 as usize == b + 1) {
            return;
        }
        adj[a].push((ServerId(b as u32 + 1), c));
        adj[b].push((ServerId(a as u32 + 1), c));
    };
    for i in 0..n {
        let c = rng.random_range(1..=10);
        link(i, (i + 1) % n, c, &mut adj);
    }
    let extra_links = (extra * n as f64 / 2.0).round() as usize;
    for _ in 0..extra_links {
        let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
        let c = rng.random_range(1..=10);
        link(a, b, c, &mut adj);
    }
    adj.into_iter()
        .enumerate()
        .map(|(i, mut links)| {
            links.sort();
            crate::msg::Lsa {
                origin: ServerId(i as u32 + 1),
                seq: 1,
                age: 0,
                links,
                addresses: vec![address(i as u32 + 1, 0)],
                prefixes: Vec::new(),
            }
        })
        .collect()
}

/// Route recomputation as a server does it when its database changes: Dijkstra from
/// `me` over `lsas` ([`crate::linkstate::spf`]), then the forwarding state rebuilt with
/// every advertised address. Returns the number of routes (so nothing is optimised
/// away).
pub fn recompute(me: ServerId, lsas: &[crate::msg::Lsa]) -> usize {
    let first = crate::linkstate::spf(me, lsas.iter());
    let mut routes = Routes::default();
    // Interface k leads to the k-th neighbour of `me`.
    let mine = lsas.iter().find(|l| l.origin == me);
    let nbrs: Vec<ServerId> = mine
        .map(|l| l.links.iter().map(|x| x.0).collect())
        .unwrap_or_default();
    for (dest, hop) in &first {
        if let Some(k) = nbrs.iter().position(|n| n == hop) {
            routes.next_hop.insert(*dest, IfaceId(k as u16));
        }
    }
    for l in lsas {
        if l.origin != me && routes.next_hop.contains_key(&l.origin) {
            routes
                .owners
                .extend(l.addresses.iter().map(|a| (*a, l.origin)));
        }
    }
    let local = LocalConfig {
        id: me,
        interfaces: (0..nbrs.len())
            .map(|_| InterfaceConfig::Issi { cost: 1 })
            .collect(),
        groups: Vec::new(),
    };
    Fib::build(&local, &routes, &[]).route_count()
}
