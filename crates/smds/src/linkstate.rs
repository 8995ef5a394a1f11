//! Link-state routing among SMDS servers (paper 002 §3.3.2; Bellcore TA-TSV-001059's
//! OSPF-like ISSI routing, whose requirements O6-1 and O6-5 bound route recomputation to
//! 100 ms).
//!
//! [`LinkState`] is a sans-IO core per server. Inputs: [`LinkState::handle_frame`] (a
//! Hello, LSU or LSAck from an ISSI) and [`LinkState::handle_timeout`]; outputs:
//! [`LinkState::poll_frame`] (frames to send on an ISSI), [`LinkState::poll_timeout`]
//! (when to call `handle_timeout` next) and [`LinkState::take_changed`] (the database
//! changed: recompute routes with [`LinkState::routes`]). Call order for a shell: hand in
//! whatever arrived or fell due, then drain `poll_frame`, then re-arm `poll_timeout`.
//!
//! - **Hellos and adjacencies.** Every hello interval a hello goes out on each ISSI,
//!   listing the neighbour heard there. A neighbour that lists us is two-way, and we form
//!   the adjacency at once (there is no designated router: ISSIs are point to point). A
//!   neighbour unheard for the dead interval is gone.
//! - **LSAs** carry the origin's adjacencies with costs and the addresses it serves, a
//!   sequence number (higher wins) and an age (seconds; refreshed by the origin every
//!   `refresh`, LSRefreshTime, 30 min; flushed at `max_age`, 60 min).
//! - **Reliable flooding.** An LSA newer than ours is installed, acknowledged, and sent to
//!   every other adjacent neighbour, which keeps it on a retransmission list until
//!   acknowledged (an equal copy coming back counts as an acknowledgement); an older
//!   copy is answered with ours.
//! - **Database synchronisation.** When an adjacency forms, each end sends the other its
//!   whole database, and the receiver floods what it learns *onward like any other new
//!   LSA*. That is the fix for the problem of §3.3.2: there, the two servers at the ends of
//!   a link joining two subnets synchronised with each other but did not pass what they
//!   learned to the rest of their subnets, which waited for the half-hourly refresh.
//!   [`LinkStateConfig::flood_sync`] = false restores that behaviour, so the reproduction
//!   can show both.
//! - **Routes**: Dijkstra (petgraph) from this server over the links both ends advertise,
//!   then the first hop of every shortest path ([`spf`]), ties broken by server id so
//!   every run is the same.

use std::collections::{BTreeMap, VecDeque};

use atmlab_core::time::{Duration, Instant};
use atmlab_wire::E164Address;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use rustc_hash::FxHashMap;

use crate::fib::Routes;
use crate::ids::{IfaceId, ServerId};
use crate::msg::{IssiFrame, Lsa, lsa_len};

/// Timers and behaviour of the routing protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkStateConfig {
    /// Hellos go out this often on each ISSI.
    pub hello_interval: Duration,
    /// A neighbour unheard this long is down.
    pub dead_interval: Duration,
    /// An unacknowledged LSA is sent again after this.
    pub rxmt_interval: Duration,
    /// LSRefreshTime: a server re-originates its LSA this often (30 min).
    pub refresh: Duration,
    /// MaxAge: an LSA not refreshed for this long is flushed (60 min).
    pub max_age: Duration,
    /// Flood LSAs learned in a database synchronisation onward (true: atmlab's fix);
    /// false keeps them to the synchronising pair, the behaviour §3.3.2 describes.
    pub flood_sync: bool,
}

impl Default for LinkStateConfig {
    fn default() -> Self {
        LinkStateConfig {
            hello_interval: Duration::from_millis(1000),
            dead_interval: Duration::from_millis(4000),
            rxmt_interval: Duration::from_millis(500),
            refresh: Duration::from_secs(30 * 60),
            max_age: Duration::from_secs(60 * 60),
            flood_sync: true,
        }
    }
}

/// The LSU payload budget: batches stay well under one UDP datagram.
const LSU_BUDGET: usize = 8192;

#[derive(Debug, Clone)]
struct Neighbor {
    id: ServerId,
    full: bool,
    last_heard: Instant,
    /// LSAs sent and not acknowledged: origin -> (seq, when to resend).
    rxmt: BTreeMap<ServerId, (u32, Instant)>,
}

#[derive(Debug, Clone)]
struct Port {
    iface: IfaceId,
    cost: u32,
    nbr: Option<Neighbor>,
    next_hello: Instant,
}

#[derive(Debug, Clone)]
struct Entry {
    lsa: Lsa,
    installed: Instant,
}

/// The link-state routing core of one server (see the module doc).
#[derive(Debug, Clone)]
pub struct LinkState {
    me: ServerId,
    cfg: LinkStateConfig,
    ports: Vec<Port>,
    lsdb: BTreeMap<ServerId, Entry>,
    seq: u32,
    addresses: Vec<E164Address>,
    prefixes: Vec<E164Address>,
    next_refresh: Instant,
    out: VecDeque<(IfaceId, IssiFrame)>,
    changed: bool,
    originated: u64,
}

fn secs(d: Duration) -> u16 {
    (d.as_picos() / 1_000_000_000_000).min(u64::from(u16::MAX)) as u16
}

impl LinkState {
    /// A server `me` with ISSIs `ports` (interface, cost) serving `addresses` (and ICI
    /// `prefixes`); it originates its first LSA and says hello at `now`.
    pub fn new(
        me: ServerId,
        ports: &[(IfaceId, u32)],
        addresses: Vec<E164Address>,
        prefixes: Vec<E164Address>,
        cfg: LinkStateConfig,
        now: Instant,
    ) -> LinkState {
        let mut ls = LinkState {
            me,
            cfg,
            ports: ports
                .iter()
                .map(|&(iface, cost)| Port {
                    iface,
                    cost,
                    nbr: None,
                    next_hello: now,
                })
                .collect(),
            lsdb: BTreeMap::new(),
            seq: 0,
            addresses,
            prefixes,
            next_refresh: now,
            out: VecDeque::new(),
            changed: true,
            originated: 0,
        };
        ls.originate(now);
        ls
    }

    /// This server.
    pub fn me(&self) -> ServerId {
        self.me
    }

    /// The configuration.
    pub fn config(&self) -> &LinkStateConfig {
        &self.cfg
    }

    /// The next frame to send, on which ISSI.
    pub fn poll_frame(&mut self) -> Option<(IfaceId, IssiFrame)> {
        self.out.pop_front()
    }

    /// True (once) if the database changed since the last call: routes need recomputing.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// How many LSAs of its own this server has originated.
    pub fn originated(&self) -> u64 {
        self.originated
    }

    /// The neighbours: (ISSI, neighbour, adjacency formed).
    pub fn neighbours(&self) -> Vec<(IfaceId, ServerId, bool)> {
        self.ports
            .iter()
            .filter_map(|p| p.nbr.as_ref().map(|n| (p.iface, n.id, n.full)))
            .collect()
    }

    /// The database: (origin, sequence number) of every LSA held.
    pub fn database(&self) -> Vec<(ServerId, u32)> {
        self.lsdb.iter().map(|(o, e)| (*o, e.lsa.seq)).collect()
    }

    /// The LSAs held.
    pub fn lsas(&self) -> impl Iterator<Item = &Lsa> {
        self.lsdb.values().map(|e| &e.lsa)
    }

    /// LSAs waiting for an acknowledgement, over all neighbours.
    pub fn unacknowledged(&self) -> usize {
        self.ports
            .iter()
            .filter_map(|p| p.nbr.as_ref())
            .map(|n| n.rxmt.len())
            .sum()
    }

    fn age_at(&self, e: &Entry, now: Instant) -> u16 {
        e.lsa
            .age
            .saturating_add(secs(now.saturating_duration_since(e.installed)))
    }

    fn copy_at(&self, origin: ServerId, now: Instant) -> Option<Lsa> {
        let e = self.lsdb.get(&origin)?;
        let mut l = e.lsa.clone();
        l.age = self.age_at(e, now);
        Some(l)
    }

    /// Originates (again) this server's LSA and floods it.
    fn originate(&mut self, now: Instant) {
        self.seq = self.seq.wrapping_add(1).max(1);
        let mut links: Vec<(ServerId, u32)> = Vec::new();
        for p in &self.ports {
            if let Some(n) = &p.nbr
                && n.full
            {
                match links.iter_mut().find(|(id, _)| *id == n.id) {
                    Some(l) => l.1 = l.1.min(p.cost),
                    None => links.push((n.id, p.cost)),
                }
            }
        }
        links.sort();
        let lsa = Lsa {
            origin: self.me,
            seq: self.seq,
            age: 0,
            links,
            addresses: self.addresses.clone(),
            prefixes: self.prefixes.clone(),
        };
        self.lsdb.insert(
            self.me,
            Entry {
                lsa: lsa.clone(),
                installed: now,
            },
        );
        self.changed = true;
        self.originated += 1;
        self.next_refresh = now + self.cfg.refresh;
        self.flood(&lsa, None, now);
    }

    /// Sends `lsa` to every adjacent neighbour except on port `except`, keeping it for
    /// retransmission until acknowledged.
    fn flood(&mut self, lsa: &Lsa, except: Option<usize>, now: Instant) {
        let due = now + self.cfg.rxmt_interval;
        for (i, p) in self.ports.iter_mut().enumerate() {
            if Some(i) == except {
                continue;
            }
            let Some(n) = p.nbr.as_mut() else { continue };
            if !n.full {
                continue;
            }
            n.rxmt.insert(lsa.origin, (lsa.seq, due));
            self.out.push_back((
                p.iface,
                IssiFrame::Lsu {
                    from: self.me,
                    sync: false,
                    lsas: vec![lsa.clone()],
                },
            ));
        }
    }

    fn port_of(&self, iface: IfaceId) -> Option<usize> {
        self.ports.iter().position(|p| p.iface == iface)
    }

    fn hello(&mut self, i: usize) {
        let p = &self.ports[i];
        let seen = p.nbr.iter().map(|n| n.id).collect();
        self.out.push_back((
            p.iface,
            IssiFrame::Hello {
                from: self.me,
                hello_ms: (self.cfg.hello_interval.as_nanos() / 1_000_000) as u32,
                dead_ms: (self.cfg.dead_interval.as_nanos() / 1_000_000) as u32,
                seen,
            },
        ));
    }

    /// Sends the whole database to the neighbour on port `i` (the adjacency just formed).
    fn synchronise(&mut self, i: usize, now: Instant) {
        let due = now + self.cfg.rxmt_interval;
        let all: Vec<Lsa> = self
            .lsdb
            .keys()
            .filter_map(|o| self.copy_at(*o, now))
            .collect();
        let iface = self.ports[i].iface;
        if let Some(n) = self.ports[i].nbr.as_mut() {
            for l in &all {
                n.rxmt.insert(l.origin, (l.seq, due));
            }
        }
        self.send_batches(iface, all, true);
    }

    fn send_batches(&mut self, iface: IfaceId, lsas: Vec<Lsa>, sync: bool) {
        let mut batch = Vec::new();
        let mut size = 0;
        for l in lsas {
            let n = lsa_len(&l);
            if !batch.is_empty() && size + n > LSU_BUDGET {
                self.out.push_back((
                    iface,
                    IssiFrame::Lsu {
                        from: self.me,
                        sync,
                        lsas: std::mem::take(&mut batch),
                    },
                ));
                size = 0;
            }
            size += n;
            batch.push(l);
        }
        if !batch.is_empty() {
            self.out.push_back((
                iface,
                IssiFrame::Lsu {
                    from: self.me,
                    sync,
                    lsas: batch,
                },
            ));
        }
    }

    /// Handles a Hello, LSU or LSAck that arrived on ISSI `iface` (others are ignored).
    pub fn handle_frame(&mut self, now: Instant, iface: IfaceId, frame: IssiFrame) {
        let Some(i) = self.port_of(iface) else { return };
        match frame {
            IssiFrame::Hello { from, seen, .. } => self.on_hello(now, i, from, &seen),
            IssiFrame::Lsu { from, sync, lsas } => self.on_lsu(now, i, from, sync, lsas),
            IssiFrame::LsAck { from, acks } => {
                if let Some(n) = self.ports[i].nbr.as_mut()
                    && n.id == from
                {
                    for (o, s) in acks {
                        if n.rxmt.get(&o).is_some_and(|(q, _)| *q == s) {
                            n.rxmt.remove(&o);
                        }
                    }
                }
            }
            IssiFrame::Cmp { .. } => {}
        }
    }

    fn on_hello(&mut self, now: Instant, i: usize, from: ServerId, seen: &[ServerId]) {
        if from == self.me || from.0 == 0 {
            return;
        }
        let two_way = seen.contains(&self.me);
        let mut reply = false;
        let mut lost_full = false;
        let slot = &mut self.ports[i].nbr;
        match slot {
            Some(n) if n.id == from => n.last_heard = now,
            _ => {
                lost_full = slot.as_ref().is_some_and(|n| n.full);
                *slot = Some(Neighbor {
                    id: from,
                    full: false,
                    last_heard: now,
                    rxmt: BTreeMap::new(),
                });
                // Answer at once so the neighbour sees two-way without waiting a period.
                reply = true;
            }
        }
        let n = self.ports[i].nbr.as_mut().expect("just set");
        if two_way && !n.full {
            n.full = true;
            self.synchronise(i, now);
            self.originate(now);
        } else if !two_way && n.full {
            // The neighbour restarted (it no longer lists us): the adjacency is gone.
            n.full = false;
            n.rxmt.clear();
            lost_full = true;
            reply = true;
        }
        if reply {
            self.hello(i);
        }
        if lost_full {
            self.originate(now);
        }
    }

    fn on_lsu(&mut self, now: Instant, i: usize, from: ServerId, sync: bool, lsas: Vec<Lsa>) {
        let adjacent = self.ports[i]
            .nbr
            .as_ref()
            .is_some_and(|n| n.id == from && n.full);
        if !adjacent {
            // Not (yet) adjacent: the synchronisation when it forms will bring all this.
            return;
        }
        let iface = self.ports[i].iface;
        let max_age = secs(self.cfg.max_age);
        let mut acks = Vec::with_capacity(lsas.len());
        let mut answer = Vec::new();
        for lsa in lsas {
            acks.push((lsa.origin, lsa.seq));
            if lsa.origin == self.me {
                if lsa.seq >= self.seq {
                    // A copy of ours from before a restart: jump past it.
                    self.seq = lsa.seq;
                    self.originate(now);
                } else if let Some(mine) = self.copy_at(self.me, now) {
                    answer.push(mine);
                }
                continue;
            }
            let cur = self.lsdb.get(&lsa.origin).map(|e| e.lsa.seq);
            match cur {
                Some(s) if s == lsa.seq => {
                    if let Some(n) = self.ports[i].nbr.as_mut()
                        && n.rxmt.get(&lsa.origin).is_some_and(|(q, _)| *q == s)
                    {
                        n.rxmt.remove(&lsa.origin);
                    }
                }
                Some(s) if s > lsa.seq => {
                    if let Some(c) = self.copy_at(lsa.origin, now) {
                        answer.push(c);
                    }
                }
                _ => {
                    if let Some(n) = self.ports[i].nbr.as_mut() {
                        n.rxmt.remove(&lsa.origin);
                    }
                    if lsa.age >= max_age {
                        self.lsdb.remove(&lsa.origin);
                    } else {
                        self.lsdb.insert(
                            lsa.origin,
                            Entry {
                                lsa: lsa.clone(),
                                installed: now,
                            },
                        );
                    }
                    self.changed = true;
                    if !sync || self.cfg.flood_sync {
                        self.flood(&lsa, Some(i), now);
                    }
                }
            }
        }
        self.out.push_back((
            iface,
            IssiFrame::LsAck {
                from: self.me,
                acks,
            },
        ));
        if !answer.is_empty() {
            let due = now + self.cfg.rxmt_interval;
            if let Some(n) = self.ports[i].nbr.as_mut() {
                for l in &answer {
                    n.rxmt.insert(l.origin, (l.seq, due));
                }
            }
            self.send_batches(iface, answer, false);
        }
    }

    /// Does whatever fell due by `now`: hellos, dead neighbours, retransmissions, the
    /// refresh of our LSA, the flushing of LSAs at MaxAge.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.ports.len() {
            if self.ports[i].next_hello <= now {
                self.hello(i);
                self.ports[i].next_hello = now + self.cfg.hello_interval;
            }
        }
        let mut lost = false;
        for p in &mut self.ports {
            if let Some(n) = &p.nbr
                && now.saturating_duration_since(n.last_heard) >= self.cfg.dead_interval
            {
                lost |= n.full;
                p.nbr = None;
            }
        }
        if lost {
            self.originate(now);
        }
        for i in 0..self.ports.len() {
            let Some(n) = self.ports[i].nbr.as_ref() else {
                continue;
            };
            let due: Vec<(ServerId, u32)> = n
                .rxmt
                .iter()
                .filter(|(_, (_, t))| *t <= now)
                .map(|(o, (s, _))| (*o, *s))
                .collect();
            if due.is_empty() {
                continue;
            }
            let mut resend = Vec::new();
            for (o, s) in due {
                match self.copy_at(o, now) {
                    Some(l) if l.seq >= s => resend.push(l),
                    _ => {}
                }
            }
            let next = now + self.cfg.rxmt_interval;
            let n = self.ports[i].nbr.as_mut().expect("checked");
            n.rxmt.retain(|_, (_, t)| *t > now);
            for l in &resend {
                n.rxmt.insert(l.origin, (l.seq, next));
            }
            let iface = self.ports[i].iface;
            self.send_batches(iface, resend, false);
        }
        if self.next_refresh <= now {
            self.originate(now);
        }
        let max_age = secs(self.cfg.max_age);
        let old: Vec<ServerId> = self
            .lsdb
            .iter()
            .filter(|(o, e)| **o != self.me && self.age_at(e, now) >= max_age)
            .map(|(o, _)| *o)
            .collect();
        for o in old {
            self.lsdb.remove(&o);
            self.changed = true;
        }
    }

    /// When [`LinkState::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Instant {
        let mut t = self.next_refresh;
        for p in &self.ports {
            t = t.min(p.next_hello);
            if let Some(n) = &p.nbr {
                t = t.min(n.last_heard + self.cfg.dead_interval);
                if let Some(d) = n.rxmt.values().map(|(_, d)| *d).min() {
                    t = t.min(d);
                }
            }
        }
        for (o, e) in &self.lsdb {
            if *o != self.me {
                let left = u64::from(secs(self.cfg.max_age).saturating_sub(e.lsa.age));
                t = t.min(e.installed + Duration::from_secs(left));
            }
        }
        t
    }

    /// The routes from the database: the ISSI toward every reachable server, and who
    /// serves which address.
    pub fn routes(&self) -> Routes {
        let first = spf(self.me, self.lsdb.values().map(|e| &e.lsa));
        // The cheapest adjacent port to each neighbour.
        let mut port_to: FxHashMap<ServerId, (u32, IfaceId)> = FxHashMap::default();
        for p in &self.ports {
            if let Some(n) = &p.nbr
                && n.full
            {
                let e = port_to.entry(n.id).or_insert((p.cost, p.iface));
                if (p.cost, p.iface) < *e {
                    *e = (p.cost, p.iface);
                }
            }
        }
        let mut r = Routes::default();
        for (dest, hop) in &first {
            if let Some((_, iface)) = port_to.get(hop) {
                r.next_hop.insert(*dest, *iface);
            }
        }
        for e in self.lsdb.values() {
            let o = e.lsa.origin;
            if o == self.me || !r.next_hop.contains_key(&o) {
                continue;
            }
            r.owners.extend(e.lsa.addresses.iter().map(|a| (*a, o)));
            r.prefixes.extend(e.lsa.prefixes.iter().map(|a| (*a, o)));
        }
        r
    }
}

/// Shortest paths from `me` over the links both ends advertise: the first hop (a
/// neighbour of `me`) toward every reachable server. Dijkstra by petgraph; equal-cost
/// ties go to the predecessor with the smaller distance, then the smaller id.
pub fn spf<'a>(me: ServerId, lsas: impl Iterator<Item = &'a Lsa>) -> FxHashMap<ServerId, ServerId> {
    let lsas: Vec<&Lsa> = lsas.collect();
    let mut g: DiGraph<ServerId, u32> = DiGraph::with_capacity(lsas.len(), lsas.len() * 4);
    let mut index: FxHashMap<ServerId, NodeIndex> = FxHashMap::default();
    for l in &lsas {
        index.insert(l.origin, g.add_node(l.origin));
    }
    let by_origin: FxHashMap<ServerId, &Lsa> = lsas.iter().map(|l| (l.origin, *l)).collect();
    for l in &lsas {
        for &(n, cost) in &l.links {
            // Two-way check: the neighbour must list us too.
            let back = by_origin
                .get(&n)
                .is_some_and(|m| m.links.iter().any(|(x, _)| *x == l.origin));
            if back && let (Some(&a), Some(&b)) = (index.get(&l.origin), index.get(&n)) {
                g.add_edge(a, b, cost.max(1));
            }
        }
    }
    let mut first = FxHashMap::default();
    let Some(&src) = index.get(&me) else {
        return first;
    };
    let dist = petgraph::algo::dijkstra(&g, src, None, |e| u64::from(*e.weight()));
    let mut order: Vec<(u64, ServerId, NodeIndex)> =
        dist.iter().map(|(n, d)| (*d, g[*n], *n)).collect();
    order.sort_unstable();
    for &(d, id, v) in &order {
        if v == src {
            continue;
        }
        let mut best: Option<(u64, ServerId)> = None;
        for e in g.edges_directed(v, petgraph::Direction::Incoming) {
            let u = e.source();
            if let Some(&du) = dist.get(&u)
                && du + u64::from(*e.weight()) == d
            {
                let cand = (du, g[u]);
                if best.is_none_or(|b| cand < b) {
                    best = Some(cand);
                }
            }
        }
        let Some((_, u)) = best else { continue };
        let hop = if u == me {
            id
        } else {
            match first.get(&u) {
                Some(h) => *h,
                None => continue,
            }
        };
        first.insert(id, hop);
    }
    first
}
