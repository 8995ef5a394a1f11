//! Many SMDS servers in one process, in simulated time: the pure in-memory harness the
//! routing, group and CMP tests run on, and the reproduction's §3.3.2 experiment.
//!
//! [`SimNetwork`] holds [`Server`] cores and point-to-point ISSI links with a fixed
//! delay, and runs them by a time-ordered event list (ties in scheduling order, so a run
//! is a pure function of its inputs). Datagrams a server sends on an ISSI arrive at the
//! other end after the link delay if the link is up; what it sends on an SNI or ICI is
//! recorded as a [`Delivery`]. Servers may be given a finite speed
//! ([`SimNetwork::set_capacity`]): user data then waits in a bounded input queue served
//! one PDU per service time, an arrival finding it full is discarded and counted, and the
//! backlog is reported to the server for its CMP. Control frames bypass the queue, as a
//! real server would give its routing protocol priority.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use atmlab_core::time::{Duration, Instant};
use atmlab_wire::E164Address;
use rustc_hash::FxHashMap;

use crate::SmdsError;
use crate::cmp::CmpConfig;
use crate::fib::{GroupConfig, InterfaceConfig, LocalConfig, SniConfig};
use crate::ids::{IfaceId, IfaceKind, ServerId};
use crate::linkstate::LinkStateConfig;
use crate::msg::kind;
use crate::server::{Server, ServerConfig};

/// A point-to-point ISSI between two servers (indices into the network).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimLink {
    /// One end: (server index, its interface).
    pub a: (usize, IfaceId),
    /// The other end.
    pub b: (usize, IfaceId),
    /// One-way delay.
    pub delay: Duration,
    /// Whether it carries anything.
    pub up: bool,
}

/// A datagram a server sent on an SNI or ICI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// When.
    pub time: Instant,
    /// Which server (index).
    pub server: usize,
    /// On which interface.
    pub iface: IfaceId,
    /// The octets (an L3_PDU).
    pub bytes: Vec<u8>,
}

#[derive(Debug)]
enum Event {
    Arrive {
        server: usize,
        iface: IfaceId,
        bytes: Vec<u8>,
    },
    Wake(usize),
    Served(usize),
}

#[derive(Debug, Default)]
struct Capacity {
    service: Duration,
    cap: usize,
    units: usize,
    queue: VecDeque<(IfaceId, Vec<u8>)>,
    /// Services under way (Served events pending): min(units, queue length).
    busy: usize,
}

/// The simulated network (see the module doc).
#[derive(Debug)]
pub struct SimNetwork {
    now: Instant,
    servers: Vec<Server>,
    links: Vec<SimLink>,
    port_link: FxHashMap<(usize, IfaceId), usize>,
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    events: FxHashMap<u64, Event>,
    seq: u64,
    wake: Vec<Instant>,
    capacity: Vec<Option<Capacity>>,
    delivered: Vec<Delivery>,
    frames: u64,
}

/// The address of subscriber `sub` of server `server` in generated networks:
/// `I:1555SSSSNNNN` (server and subscriber numbers in decimal, zero-padded).
pub fn address(server: u32, sub: u32) -> E164Address {
    E164Address::individual(&format!("1555{:04}{:04}", server % 10_000, sub % 10_000))
        .expect("digits only")
}

/// A generated network's shape: servers `0..servers`, undirected ISSI links, and
/// `subscribers` SNIs per server (SNI `k` of server `i` has [`address`]`(i + 1, k)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Number of servers.
    pub servers: usize,
    /// ISSI links (server index pairs).
    pub links: Vec<(usize, usize)>,
    /// SNIs per server.
    pub subscribers: usize,
    /// Group addresses (given to every server).
    pub groups: Vec<GroupConfig>,
}

impl Topology {
    /// `n` servers in a line.
    pub fn line(n: usize, subscribers: usize) -> Topology {
        Topology {
            servers: n,
            links: (1..n).map(|i| (i - 1, i)).collect(),
            subscribers,
            groups: Vec::new(),
        }
    }

    /// Two full meshes of `k` servers each (0..k and k..2k), joined by one link from
    /// server `k - 1` to server `k`, which is that link's index in `links`: the §3.3.2
    /// topology. The joining link is the last one.
    pub fn two_subnets(k: usize, subscribers: usize) -> Topology {
        let mut links = Vec::new();
        for base in [0, k] {
            for i in 0..k {
                for j in i + 1..k {
                    links.push((base + i, base + j));
                }
            }
        }
        links.push((k - 1, k));
        Topology {
            servers: 2 * k,
            links,
            subscribers,
            groups: Vec::new(),
        }
    }

    /// The server configurations this shape gives: SNIs first, then one ISSI per link
    /// end in link order.
    pub fn configs(&self, ls: LinkStateConfig, cmp: CmpConfig) -> Vec<ServerConfig> {
        (0..self.servers)
            .map(|i| {
                let mut interfaces: Vec<InterfaceConfig> = (0..self.subscribers)
                    .map(|k| {
                        InterfaceConfig::Sni(SniConfig {
                            addresses: vec![address(i as u32 + 1, k as u32)],
                            ..SniConfig::default()
                        })
                    })
                    .collect();
                for &(a, b) in &self.links {
                    if a == i || b == i {
                        interfaces.push(InterfaceConfig::Issi { cost: 1 });
                    }
                }
                ServerConfig {
                    local: LocalConfig {
                        id: ServerId(i as u32 + 1),
                        interfaces,
                        groups: self.groups.clone(),
                    },
                    link_state: ls,
                    cmp,
                    neighbours: Vec::new(),
                }
            })
            .collect()
    }

    /// The [`SimLink`]s matching [`Topology::configs`].
    pub fn sim_links(&self, delay: Duration) -> Vec<SimLink> {
        let mut next: Vec<u16> = vec![self.subscribers as u16; self.servers];
        self.links
            .iter()
            .map(|&(a, b)| {
                let ia = IfaceId(next[a]);
                next[a] += 1;
                let ib = IfaceId(next[b]);
                next[b] += 1;
                SimLink {
                    a: (a, ia),
                    b: (b, ib),
                    delay,
                    up: true,
                }
            })
            .collect()
    }
}

impl SimNetwork {
    /// Servers from their configurations, joined by `links`, all starting at time 0.
    pub fn new(configs: Vec<ServerConfig>, links: Vec<SimLink>) -> Result<SimNetwork, SmdsError> {
        let now = Instant::ZERO;
        let servers = configs
            .into_iter()
            .map(|c| Server::new(c, now))
            .collect::<Result<Vec<_>, _>>()?;
        let mut port_link = FxHashMap::default();
        for (i, l) in links.iter().enumerate() {
            for end in [l.a, l.b] {
                if servers.get(end.0).and_then(|s| s.kind(end.1)) != Some(IfaceKind::Issi) {
                    return Err(SmdsError::Config(format!(
                        "link {i}: server {} interface {} is not an ISSI",
                        end.0, end.1.0
                    )));
                }
                if port_link.insert(end, i).is_some() {
                    return Err(SmdsError::Config(format!(
                        "link {i}: server {} interface {} is on two links",
                        end.0, end.1.0
                    )));
                }
            }
        }
        let n = servers.len();
        let mut net = SimNetwork {
            now,
            servers,
            links,
            port_link,
            heap: BinaryHeap::new(),
            events: FxHashMap::default(),
            seq: 0,
            wake: vec![Instant::MAX; n],
            capacity: (0..n).map(|_| None).collect(),
            delivered: Vec::new(),
            frames: 0,
        };
        for s in 0..n {
            net.drain(s, &[]);
            net.rearm(s);
        }
        Ok(net)
    }

    /// A generated network.
    pub fn from_topology(
        t: &Topology,
        ls: LinkStateConfig,
        cmp: CmpConfig,
        delay: Duration,
    ) -> Result<SimNetwork, SmdsError> {
        SimNetwork::new(t.configs(ls, cmp), t.sim_links(delay))
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The servers.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// The links.
    pub fn links(&self) -> &[SimLink] {
        &self.links
    }

    /// Control and data frames carried over ISSIs so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Gives server `s` a finite speed: one user PDU per `service`, at most `cap` waiting.
    pub fn set_capacity(&mut self, s: usize, service: Duration, cap: usize) {
        self.set_parallel_capacity(s, service, cap, 1);
    }

    /// Gives server `s` `units` workers, each serving one user PDU per `service`, from
    /// one queue of at most `cap` PDUs (the parallel server of §5, as a model).
    pub fn set_parallel_capacity(&mut self, s: usize, service: Duration, cap: usize, units: usize) {
        self.capacity[s] = Some(Capacity {
            service,
            cap,
            units: units.max(1),
            ..Capacity::default()
        });
    }

    /// Takes link `l` up or down (frames in flight on it still arrive).
    pub fn set_link_up(&mut self, l: usize, up: bool) {
        self.links[l].up = up;
    }

    fn push(&mut self, at: Instant, e: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, e);
    }

    /// A subscriber sends `bytes` on SNI (or ICI) `iface` of server `s`, now.
    pub fn inject(&mut self, s: usize, iface: IfaceId, bytes: Vec<u8>) {
        let now = self.now;
        self.push(
            now,
            Event::Arrive {
                server: s,
                iface,
                bytes,
            },
        );
    }

    /// Runs every event up to and including `t`; the clock ends at `t`.
    pub fn run_until(&mut self, t: Instant) {
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if at > t {
                break;
            }
            self.heap.pop();
            self.now = at;
            let Some(e) = self.events.remove(&id) else {
                continue;
            };
            self.handle(e);
        }
        self.now = t;
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Runs in steps of `step` until `done` holds (checked after each step) or `limit`
    /// passes; returns the time it first held.
    pub fn run_until_true(
        &mut self,
        step: Duration,
        limit: Instant,
        mut done: impl FnMut(&SimNetwork) -> bool,
    ) -> Option<Instant> {
        loop {
            if done(self) {
                return Some(self.now);
            }
            if self.now >= limit {
                return None;
            }
            self.run_for(step);
        }
    }

    fn handle(&mut self, e: Event) {
        let now = self.now;
        // Only the server an event is for changes state (what it sends to others waits
        // in the event list until they handle it), so only its timer needs re-arming.
        let touched = match &e {
            Event::Arrive { server, .. } => *server,
            Event::Wake(s) | Event::Served(s) => *s,
        };
        match e {
            Event::Arrive {
                server,
                iface,
                bytes,
            } => {
                let user = self.servers[server].kind(iface) != Some(IfaceKind::Issi)
                    || bytes.first() == Some(&kind::DATA);
                if user && let Some(c) = self.capacity[server].as_mut() {
                    if c.queue.len() >= c.cap {
                        self.servers[server].discard_overload();
                    } else {
                        c.queue.push_back((iface, bytes));
                    }
                    let (len, cap) = (c.queue.len(), c.cap);
                    if c.busy < c.units && c.busy < len {
                        c.busy += 1;
                        let at = now + c.service;
                        self.push(at, Event::Served(server));
                    }
                    self.servers[server].handle_occupancy(now, len, cap);
                    self.drain(server, &[]);
                } else {
                    self.servers[server].handle_datagram(now, iface, &bytes);
                    self.drain(server, &bytes);
                }
            }
            Event::Wake(s) => {
                self.wake[s] = Instant::MAX;
                if self.servers[s].poll_timeout() <= now {
                    self.servers[s].handle_timeout(now);
                    self.drain(s, &[]);
                }
            }
            Event::Served(s) => {
                let Some(c) = self.capacity[s].as_mut() else {
                    return;
                };
                let item = c.queue.pop_front();
                c.busy = c.busy.saturating_sub(1);
                let (len, cap, service) = (c.queue.len(), c.cap, c.service);
                if c.busy < c.units && c.busy < len {
                    c.busy += 1;
                    self.push(now + service, Event::Served(s));
                }
                if let Some((iface, bytes)) = item {
                    self.servers[s].handle_datagram(now, iface, &bytes);
                    self.drain(s, &bytes);
                }
                self.servers[s].handle_occupancy(now, len, cap);
                self.drain(s, &[]);
            }
        }
        self.rearm(touched);
    }

    fn rearm(&mut self, s: usize) {
        let t = self.servers[s].poll_timeout().max(self.now);
        if t < self.wake[s] {
            self.wake[s] = t;
            self.push(t, Event::Wake(s));
        }
    }

    fn drain(&mut self, s: usize, input: &[u8]) {
        while let Some(t) = self.servers[s].poll_transmit() {
            let bytes = t.bytes(input);
            match self.servers[s].kind(t.iface) {
                Some(IfaceKind::Issi) => {
                    let Some(&l) = self.port_link.get(&(s, t.iface)) else {
                        continue;
                    };
                    let link = self.links[l];
                    if !link.up {
                        continue;
                    }
                    let (server, iface) = if link.a == (s, t.iface) {
                        link.b
                    } else {
                        link.a
                    };
                    self.frames += 1;
                    self.push(
                        self.now + link.delay,
                        Event::Arrive {
                            server,
                            iface,
                            bytes,
                        },
                    );
                }
                _ => self.delivered.push(Delivery {
                    time: self.now,
                    server: s,
                    iface: t.iface,
                    bytes,
                }),
            }
        }
    }

    /// What servers delivered on SNIs and ICIs so far.
    pub fn delivered(&self) -> &[Delivery] {
        &self.delivered
    }

    /// Takes the deliveries so far.
    pub fn take_delivered(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.delivered)
    }

    /// True when every up link has formed its adjacency at both ends and every server
    /// holds the same database, with an LSA from every server: the network is fully
    /// adjacent and synchronised.
    pub fn fully_adjacent(&self) -> bool {
        for l in &self.links {
            if !l.up {
                continue;
            }
            for (end, other) in [(l.a, l.b), (l.b, l.a)] {
                let peer = self.servers[other.0].id();
                let ok = self.servers[end.0]
                    .control()
                    .link_state()
                    .neighbours()
                    .iter()
                    .any(|(i, n, full)| *i == end.1 && *n == peer && *full);
                if !ok {
                    return false;
                }
            }
        }
        self.databases_agree()
    }

    /// True when every server holds the same (origin, sequence) database with an LSA
    /// from every server.
    pub fn databases_agree(&self) -> bool {
        let first = self.servers[0].control().link_state().database();
        first.len() == self.servers.len()
            && self
                .servers
                .iter()
                .all(|s| s.control().link_state().database() == first)
    }

    /// True when every server has a route to every other server.
    pub fn all_reachable(&self) -> bool {
        let ids: Vec<ServerId> = self.servers.iter().map(Server::id).collect();
        self.servers.iter().all(|s| {
            let routes = s.control().link_state().routes();
            ids.iter()
                .all(|id| *id == s.id() || routes.next_hop.contains_key(id))
        })
    }
}
