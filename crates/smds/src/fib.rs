//! The forwarding half of an SMDS server: the header processing of paper 002 §3.1 and
//! §4.1 (Table 1), as a sans-IO core.
//!
//! [`Fib`] is the forwarding state, immutable once built: per SNI the individual
//! addresses assigned to the subscriber and its screening lists, the routes by
//! Destination Address (local SNI, next-hop ISSI toward the owning server, or an ICI),
//! the group addresses, and the CMP cuts toward congested neighbours. The control half
//! ([`crate::server::Control`]: link-state routing and CMP) builds a new one whenever
//! routes or cuts change and hands it out in an `Arc`, so any number of [`Forwarder`]s
//! (one per worker of the parallel server, [`crate::parallel`]) share it without locks.
//!
//! A [`Forwarder`] takes one datagram at a time and queues [`Transmit`]s; it never
//! allocates for user data. Its paths are the paper's: SNI to ISSI (the subscriber's PDU
//! injected into the network), ISSI to SNI (delivery), ISSI to ISSI (switching), plus SNI
//! to SNI (both ends on this server) and the ICI. On the way in from an SNI it checks:
//! the PDU decodes ([`L3PduRepr::parse`]: lengths, tags, CRC32, address types); the
//! Source Address is one assigned to that SNI (no spoofing); the Destination Address
//! passes the SNI's destination screen. On the way out to an SNI it checks the Source
//! Address against that SNI's source screen (Bellcore's two screening lists). A group
//! Destination Address is expanded at the ingress server: one copy to each local SNI with
//! members, and one copy per remote server with members, carried with that server as the
//! envelope's target so transit servers do not expand it again: every member's SNI gets
//! the PDU exactly once (two members behind one SNI share that one copy, as on a LAN).
//!
//! Anything that cannot be delivered is dropped and counted under its reason in
//! [`Counters`]; the forwarder never fails and never panics on input octets.

use std::collections::VecDeque;
use std::sync::Arc;

use atmlab_wire::E164Address;
use atmlab_wire::smds::{L3Pdu, L3PduRepr};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::SmdsError;
use crate::ids::{IfaceId, IfaceKind, ServerId};
use crate::msg::{ENVELOPE_LEN, MAX_HOPS, envelope, open_envelope};

/// A screening list of an SNI (Bellcore's destination and source address screening).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ScreenList {
    /// No screening: every address passes.
    #[default]
    Open,
    /// Only these addresses pass.
    Allow(Vec<E164Address>),
    /// These addresses are refused; all others pass.
    Deny(Vec<E164Address>),
}

/// A Subscriber Network Interface's service profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SniConfig {
    /// The individual addresses assigned to the subscriber: the only Source Addresses it
    /// may send from, and the addresses delivered to it.
    pub addresses: Vec<E164Address>,
    /// Which Destination Addresses this subscriber may send to.
    pub destination_screen: ScreenList,
    /// Which Source Addresses may reach this subscriber.
    pub source_screen: ScreenList,
}

/// An Inter-Carrier Interface: the address prefixes another carrier serves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IciConfig {
    /// Prefixes (the digits of an individual address, fewer than a full number) routed
    /// to this carrier.
    pub prefixes: Vec<E164Address>,
}

/// One interface of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterfaceConfig {
    /// A subscriber.
    Sni(SniConfig),
    /// A link to another server, with its routing cost.
    Issi {
        /// The cost link-state routing adds for crossing it (at least 1).
        cost: u32,
    },
    /// Another carrier.
    Ici(IciConfig),
}

impl InterfaceConfig {
    /// The interface kind.
    pub fn kind(&self) -> IfaceKind {
        match self {
            InterfaceConfig::Sni(_) => IfaceKind::Sni,
            InterfaceConfig::Issi { .. } => IfaceKind::Issi,
            InterfaceConfig::Ici(_) => IfaceKind::Ici,
        }
    }
}

/// A group address and its members (individual addresses anywhere in the network).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// The group address.
    pub address: E164Address,
    /// The members.
    pub members: Vec<E164Address>,
}

/// What one server is, before any routing: its identity, interfaces and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// This server (not 0).
    pub id: ServerId,
    /// Its interfaces; [`IfaceId`] is the index into this list.
    pub interfaces: Vec<InterfaceConfig>,
    /// The group addresses (every server of a network is normally given the same list;
    /// each acts on the members behind its own SNIs).
    pub groups: Vec<GroupConfig>,
}

impl LocalConfig {
    /// Checks the configuration hangs together; the error names what does not.
    pub fn validate(&self) -> Result<(), SmdsError> {
        let bad = |s: String| Err(SmdsError::Config(s));
        if self.id.0 == 0 {
            return bad("server id 0 is reserved".into());
        }
        if self.interfaces.len() > usize::from(u16::MAX) {
            return bad("more than 65535 interfaces".into());
        }
        let mut seen = FxHashSet::default();
        for (i, ifc) in self.interfaces.iter().enumerate() {
            match ifc {
                InterfaceConfig::Sni(s) => {
                    if s.addresses.is_empty() {
                        return bad(format!("interface {i} (SNI) has no address"));
                    }
                    for a in &s.addresses {
                        if !a.is_individual() {
                            return bad(format!(
                                "interface {i} (SNI): {a} is not an individual address"
                            ));
                        }
                        if !seen.insert(key(a)) {
                            return bad(format!("address {a} is assigned twice"));
                        }
                    }
                }
                InterfaceConfig::Issi { cost } if *cost == 0 => {
                    return bad(format!("interface {i} (ISSI) has cost 0; costs start at 1"));
                }
                InterfaceConfig::Issi { .. } => {}
                InterfaceConfig::Ici(c) => {
                    if c.prefixes.is_empty() {
                        return bad(format!("interface {i} (ICI) has no prefix"));
                    }
                }
            }
        }
        for g in &self.groups {
            if !g.address.is_group() {
                return bad(format!("group {} is not a group address", g.address));
            }
            if let Some(m) = g.members.iter().find(|m| !m.is_individual()) {
                return bad(format!(
                    "group {}: member {m} is not an individual address",
                    g.address
                ));
            }
        }
        Ok(())
    }

    /// The addresses this server advertises: its subscribers' individual addresses and
    /// the groups with members behind its SNIs.
    pub fn advertised(&self) -> Vec<E164Address> {
        let mut v: Vec<E164Address> = self
            .interfaces
            .iter()
            .filter_map(|i| match i {
                InterfaceConfig::Sni(s) => Some(s.addresses.iter().copied()),
                _ => None,
            })
            .flatten()
            .collect();
        let mine: FxHashSet<u64> = v.iter().map(key).collect();
        for g in &self.groups {
            if g.members.iter().any(|m| mine.contains(&key(m))) {
                v.push(g.address);
            }
        }
        v
    }

    /// The ICI prefixes this server advertises.
    pub fn prefixes(&self) -> Vec<E164Address> {
        self.interfaces
            .iter()
            .filter_map(|i| match i {
                InterfaceConfig::Ici(c) => Some(c.prefixes.iter().copied()),
                _ => None,
            })
            .flatten()
            .collect()
    }
}

/// An address as a hash key: its 8 wire octets.
#[inline]
pub fn key(a: &E164Address) -> u64 {
    u64::from_be_bytes(a.to_bytes())
}

/// What routing computed: how to reach other servers and who owns which address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// The ISSI toward each reachable server.
    pub next_hop: FxHashMap<ServerId, IfaceId>,
    /// Addresses other servers advertise (individual and group), with the owner.
    pub owners: Vec<(E164Address, ServerId)>,
    /// ICI prefixes other servers advertise, with the owner.
    pub prefixes: Vec<(E164Address, ServerId)>,
}

/// Where an individual address goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A subscriber of this server.
    Local(IfaceId),
    /// A subscriber of `server`, through this ISSI.
    Remote {
        /// The owning server.
        server: ServerId,
        /// The next-hop ISSI.
        via: IfaceId,
    },
    /// Another carrier, through this ICI.
    Ici(IfaceId),
}

#[derive(Debug, Clone, Default)]
struct Screen {
    allow: bool,
    set: FxHashSet<u64>,
}

impl Screen {
    fn new(l: &ScreenList) -> Self {
        match l {
            ScreenList::Open => Screen {
                allow: false,
                set: FxHashSet::default(),
            },
            ScreenList::Allow(v) => Screen {
                allow: true,
                set: v.iter().map(key).collect(),
            },
            ScreenList::Deny(v) => Screen {
                allow: false,
                set: v.iter().map(key).collect(),
            },
        }
    }
    #[inline]
    fn passes(&self, k: u64) -> bool {
        // No list (the common case) costs no hash.
        if self.set.is_empty() {
            return !self.allow;
        }
        self.set.contains(&k) == self.allow
    }
}

#[derive(Debug, Clone, Default)]
struct SniState {
    addresses: FxHashSet<u64>,
    destination: Screen,
    source: Screen,
}

#[derive(Debug, Clone, Default)]
struct GroupRoute {
    local: Vec<IfaceId>,
    remote: Vec<(ServerId, IfaceId)>,
}

/// The forwarding state of one server (see the module doc). Build with [`Fib::build`].
#[derive(Debug, Clone, Default)]
pub struct Fib {
    me: ServerId,
    kinds: Vec<IfaceKind>,
    sni: Vec<Option<SniState>>,
    routes: FxHashMap<u64, Route>,
    prefixes: Vec<(E164Address, usize, Route)>,
    groups: FxHashMap<u64, GroupRoute>,
    next_hop: FxHashMap<ServerId, IfaceId>,
    cut: Vec<u16>,
}

impl Fib {
    /// Builds the forwarding state from the local configuration, the routes and the CMP
    /// cuts (per mille of user data to drop per interface; empty for none). Where two
    /// servers advertise one address the local subscriber wins, then the lowest server.
    pub fn build(local: &LocalConfig, routes: &Routes, cut: &[u16]) -> Fib {
        let n = local.interfaces.len();
        let mut f = Fib {
            me: local.id,
            kinds: local.interfaces.iter().map(InterfaceConfig::kind).collect(),
            sni: vec![None; n],
            next_hop: routes.next_hop.clone(),
            cut: (0..n).map(|i| cut.get(i).copied().unwrap_or(0)).collect(),
            ..Fib::default()
        };
        for (i, ifc) in local.interfaces.iter().enumerate() {
            let id = IfaceId(i as u16);
            match ifc {
                InterfaceConfig::Sni(s) => {
                    for a in &s.addresses {
                        f.routes.insert(key(a), Route::Local(id));
                    }
                    f.sni[i] = Some(SniState {
                        addresses: s.addresses.iter().map(key).collect(),
                        destination: Screen::new(&s.destination_screen),
                        source: Screen::new(&s.source_screen),
                    });
                }
                InterfaceConfig::Ici(c) => {
                    for p in &c.prefixes {
                        f.prefixes.push((*p, p.digit_count(), Route::Ici(id)));
                    }
                }
                InterfaceConfig::Issi { .. } => {}
            }
        }
        for g in &local.groups {
            let mut local_ifs: Vec<IfaceId> = g
                .members
                .iter()
                .filter_map(|m| match f.routes.get(&key(m)) {
                    Some(Route::Local(i)) => Some(*i),
                    _ => None,
                })
                .collect();
            local_ifs.sort_unstable();
            local_ifs.dedup();
            f.groups.entry(key(&g.address)).or_default().local = local_ifs;
        }
        let mut owners = routes.owners.clone();
        owners.sort_by_key(|(a, s)| (key(a), *s));
        for (a, s) in owners {
            if s == local.id {
                continue;
            }
            let Some(&via) = routes.next_hop.get(&s) else {
                continue;
            };
            if a.is_group() {
                let g = f.groups.entry(key(&a)).or_default();
                if !g.remote.iter().any(|(r, _)| *r == s) {
                    g.remote.push((s, via));
                }
            } else {
                f.routes
                    .entry(key(&a))
                    .or_insert(Route::Remote { server: s, via });
            }
        }
        for (p, s) in &routes.prefixes {
            if *s == local.id {
                continue;
            }
            if let Some(&via) = routes.next_hop.get(s) {
                f.prefixes
                    .push((*p, p.digit_count(), Route::Remote { server: *s, via }));
            }
        }
        // Longest prefix first; ties by server order for determinism.
        f.prefixes.sort_by_key(|(p, n, _)| (usize::MAX - n, key(p)));
        f
    }

    /// This server.
    pub fn me(&self) -> ServerId {
        self.me
    }

    /// The kind of each interface.
    pub fn kinds(&self) -> &[IfaceKind] {
        &self.kinds
    }

    /// Where an individual address goes, if anywhere.
    pub fn route(&self, a: &E164Address) -> Option<Route> {
        self.lookup(key(a), a)
    }

    #[inline]
    fn lookup(&self, k: u64, a: &E164Address) -> Option<Route> {
        if let Some(r) = self.routes.get(&k) {
            return Some(*r);
        }
        if self.prefixes.is_empty() {
            return None;
        }
        self.prefixes
            .iter()
            .find(|(p, n, _)| a.digits().take(*n).eq(p.digits()) && a.digit_count() >= *n)
            .map(|(_, _, r)| *r)
    }

    /// The number of individual addresses with a route.
    pub fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// The routes to the other servers: each reachable server and the interface its
    /// PDUs leave by, sorted by server (what an operator reads as the routing table).
    pub fn next_hops(&self) -> Vec<(ServerId, IfaceId)> {
        let mut v: Vec<(ServerId, IfaceId)> = self.next_hop.iter().map(|(s, i)| (*s, *i)).collect();
        v.sort_unstable_by_key(|(s, _)| s.0);
        v
    }
}

/// Why a PDU was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// It did not decode (length, tags, CRC32, address type, envelope).
    Malformed,
    /// Its Source Address is not one assigned to the SNI it came from.
    Spoofed,
    /// The sending SNI's destination screen refused its Destination Address.
    DestinationScreened,
    /// The receiving SNI's source screen refused its Source Address.
    SourceScreened,
    /// No route to its Destination Address (or the group has no member).
    NoRoute,
    /// It crossed [`MAX_HOPS`] servers.
    HopLimit,
    /// The server was overwhelmed (its input queue was full).
    Overload,
    /// A CMP cut asked by a congested neighbour.
    CmpCut,
}

/// What a forwarder did, by path and by drop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Datagrams handed to the forwarder.
    pub received: u64,
    /// SNI to ISSI (Table 1's first row).
    pub sni_to_issi: u64,
    /// ISSI to SNI (Table 1's second row).
    pub issi_to_sni: u64,
    /// ISSI to ISSI (Table 1's third row: switching).
    pub issi_to_issi: u64,
    /// SNI to SNI on this server.
    pub sni_to_sni: u64,
    /// Out through an ICI.
    pub to_ici: u64,
    /// In through an ICI.
    pub from_ici: u64,
    /// Copies made for group addresses (beyond the first).
    pub group_copies: u64,
    /// PDUs delivered to SNIs.
    pub delivered: u64,
    /// Octets of L3_PDU delivered to SNIs.
    pub delivered_octets: u64,
    /// Dropped: malformed.
    pub malformed: u64,
    /// Dropped: spoofed Source Address.
    pub spoofed: u64,
    /// Dropped: destination screen.
    pub destination_screened: u64,
    /// Dropped: source screen.
    pub source_screened: u64,
    /// Dropped: no route.
    pub no_route: u64,
    /// Dropped: hop limit.
    pub hop_limit: u64,
    /// Dropped: the server was overwhelmed.
    pub overload: u64,
    /// Dropped: a neighbour's CMP cut.
    pub cmp_cut: u64,
}

impl Counters {
    /// Counts a discard.
    pub fn discard(&mut self, why: Discard) {
        *match why {
            Discard::Malformed => &mut self.malformed,
            Discard::Spoofed => &mut self.spoofed,
            Discard::DestinationScreened => &mut self.destination_screened,
            Discard::SourceScreened => &mut self.source_screened,
            Discard::NoRoute => &mut self.no_route,
            Discard::HopLimit => &mut self.hop_limit,
            Discard::Overload => &mut self.overload,
            Discard::CmpCut => &mut self.cmp_cut,
        } += 1;
    }

    /// Every drop together.
    pub fn dropped(&self) -> u64 {
        self.malformed
            + self.spoofed
            + self.destination_screened
            + self.source_screened
            + self.no_route
            + self.hop_limit
            + self.overload
            + self.cmp_cut
    }

    /// Adds another forwarder's counts (the parallel server's workers).
    pub fn add(&mut self, o: &Counters) {
        let pairs: [(&mut u64, u64); 18] = [
            (&mut self.received, o.received),
            (&mut self.sni_to_issi, o.sni_to_issi),
            (&mut self.issi_to_sni, o.issi_to_sni),
            (&mut self.issi_to_issi, o.issi_to_issi),
            (&mut self.sni_to_sni, o.sni_to_sni),
            (&mut self.to_ici, o.to_ici),
            (&mut self.from_ici, o.from_ici),
            (&mut self.group_copies, o.group_copies),
            (&mut self.delivered, o.delivered),
            (&mut self.delivered_octets, o.delivered_octets),
            (&mut self.malformed, o.malformed),
            (&mut self.spoofed, o.spoofed),
            (&mut self.destination_screened, o.destination_screened),
            (&mut self.source_screened, o.source_screened),
            (&mut self.no_route, o.no_route),
            (&mut self.hop_limit, o.hop_limit),
            (&mut self.overload, o.overload),
            (&mut self.cmp_cut, o.cmp_cut),
        ];
        for (a, b) in pairs {
            *a += b;
        }
    }

    /// The counters as (name, value) pairs, for reports and JSON.
    pub fn fields(&self) -> [(&'static str, u64); 18] {
        [
            ("received", self.received),
            ("sni_to_issi", self.sni_to_issi),
            ("issi_to_sni", self.issi_to_sni),
            ("issi_to_issi", self.issi_to_issi),
            ("sni_to_sni", self.sni_to_sni),
            ("to_ici", self.to_ici),
            ("from_ici", self.from_ici),
            ("group_copies", self.group_copies),
            ("delivered", self.delivered),
            ("delivered_octets", self.delivered_octets),
            ("malformed", self.malformed),
            ("spoofed", self.spoofed),
            ("destination_screened", self.destination_screened),
            ("source_screened", self.source_screened),
            ("no_route", self.no_route),
            ("hop_limit", self.hop_limit),
            ("overload", self.overload),
            ("cmp_cut", self.cmp_cut),
        ]
    }
}

/// What to send: either (part of) the datagram just handled, possibly behind a new
/// envelope, or octets of the server's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// The datagram most recently handed to the forwarder, less its first `skip` octets,
    /// behind `prefix` if there is one. It refers to that datagram: a shell must take
    /// every such transmit before handing over the next datagram.
    Input {
        /// A Data envelope to put in front.
        prefix: Option<[u8; ENVELOPE_LEN]>,
        /// Octets of the input to leave out at the front (an envelope being replaced).
        skip: usize,
    },
    /// A frame of the server's own (a control frame).
    Owned(Vec<u8>),
}

/// One datagram to send on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The interface.
    pub iface: IfaceId,
    /// What to send.
    pub payload: Payload,
}

impl Transmit {
    /// The octets to send, given the datagram the forwarder last handled (copies).
    pub fn bytes(&self, input: &[u8]) -> Vec<u8> {
        match &self.payload {
            Payload::Owned(v) => v.clone(),
            Payload::Input { prefix, skip } => {
                let body = input.get(*skip..).unwrap_or(&[]);
                let mut v = Vec::with_capacity(ENVELOPE_LEN + body.len());
                if let Some(p) = prefix {
                    v.extend_from_slice(p);
                }
                v.extend_from_slice(body);
                v
            }
        }
    }

    /// Writes the octets to send into `out` (cleared first), without allocating once
    /// `out` is large enough.
    pub fn write_into(&self, input: &[u8], out: &mut Vec<u8>) {
        out.clear();
        match &self.payload {
            Payload::Owned(v) => out.extend_from_slice(v),
            Payload::Input { prefix, skip } => {
                if let Some(p) = prefix {
                    out.extend_from_slice(p);
                }
                out.extend_from_slice(input.get(*skip..).unwrap_or(&[]));
            }
        }
    }
}

/// The per-datagram engine over a shared [`Fib`] (see the module doc).
#[derive(Debug, Clone)]
pub struct Forwarder {
    fib: Arc<Fib>,
    st: State,
}

/// A forwarder's own mutable state, apart from the shared `Fib` so that the per-PDU
/// path borrows both at once without touching the `Arc`'s count.
#[derive(Debug, Clone)]
struct State {
    counters: Counters,
    cut_acc: Vec<u16>,
    out: VecDeque<Transmit>,
}

impl Forwarder {
    /// A forwarder over `fib`.
    pub fn new(fib: Arc<Fib>) -> Self {
        let n = fib.kinds.len();
        Forwarder {
            fib,
            st: State {
                counters: Counters::default(),
                cut_acc: vec![0; n],
                out: VecDeque::with_capacity(8),
            },
        }
    }

    /// Replaces the forwarding state (new routes or cuts).
    pub fn set_fib(&mut self, fib: Arc<Fib>) {
        self.st.cut_acc.resize(fib.kinds.len(), 0);
        self.fib = fib;
    }

    /// The forwarding state in use.
    pub fn fib(&self) -> &Arc<Fib> {
        &self.fib
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        &self.st.counters
    }

    /// Counts a datagram the shell had to discard because the server was overwhelmed
    /// (the SMDS policy of §5.2: discard incoming user data when overwhelmed).
    pub fn discard_overload(&mut self) {
        self.st.counters.received += 1;
        self.st.counters.discard(Discard::Overload);
    }

    /// The next datagram to send, if any.
    #[inline]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.st.out.pop_front()
    }

    /// Drops every queued transmit without sending (a benchmark's sink).
    #[inline]
    pub fn clear_transmits(&mut self) -> usize {
        let n = self.st.out.len();
        self.st.out.clear();
        n
    }

    /// Handles a user-data datagram that arrived on `iface`: an L3_PDU on an SNI or ICI,
    /// a Data frame on an ISSI. Queues what must be sent; counts what is dropped.
    #[inline]
    pub fn handle_datagram(&mut self, iface: IfaceId, data: &[u8]) {
        let (fib, st) = (&*self.fib, &mut self.st);
        st.counters.received += 1;
        match fib.kinds.get(iface.index()) {
            Some(IfaceKind::Sni) => st.on_sni(fib, iface, data),
            Some(IfaceKind::Issi) => st.on_issi(fib, data),
            Some(IfaceKind::Ici) => st.on_ici(fib, data),
            None => st.counters.discard(Discard::Malformed),
        }
    }
}

impl State {
    #[inline]
    fn on_sni(&mut self, fib: &Fib, iface: IfaceId, data: &[u8]) {
        let Ok(pdu) = parse(data) else {
            return self.counters.discard(Discard::Malformed);
        };
        let Some(sni) = fib.sni[iface.index()].as_ref() else {
            return self.counters.discard(Discard::Malformed);
        };
        if !sni.addresses.contains(&key(&pdu.source)) {
            return self.counters.discard(Discard::Spoofed);
        }
        let dk = key(&pdu.destination);
        if !sni.destination.passes(dk) {
            return self.counters.discard(Discard::DestinationScreened);
        }
        if pdu.destination.is_group() {
            return self.expand_group(fib, Some(iface), dk, &pdu, 0);
        }
        match fib.lookup(dk, &pdu.destination) {
            Some(Route::Local(out)) => {
                if self.deliver(fib, out, &pdu, 0) {
                    self.counters.sni_to_sni += 1;
                }
            }
            Some(Route::Remote { via, .. }) => {
                if self.send_issi(fib, via, envelope(ServerId(0), 1), 0) {
                    self.counters.sni_to_issi += 1;
                }
            }
            Some(Route::Ici(out)) => self.send_ici(out, 0),
            None => self.counters.discard(Discard::NoRoute),
        }
    }

    #[inline]
    fn on_issi(&mut self, fib: &Fib, data: &[u8]) {
        let Some((target, hops, body)) = open_envelope(data) else {
            return self.counters.discard(Discard::Malformed);
        };
        let Ok(pdu) = parse(body) else {
            return self.counters.discard(Discard::Malformed);
        };
        if hops >= MAX_HOPS {
            return self.counters.discard(Discard::HopLimit);
        }
        if target.0 != 0 {
            if target == fib.me {
                // A group copy for our members.
                let dk = key(&pdu.destination);
                let Some(g) = fib.groups.get(&dk) else {
                    return self.counters.discard(Discard::NoRoute);
                };
                let mut any = false;
                for &out in &g.local {
                    if self.deliver(fib, out, &pdu, ENVELOPE_LEN) {
                        self.counters.issi_to_sni += 1;
                        any = true;
                    }
                }
                if !any && g.local.is_empty() {
                    self.counters.discard(Discard::NoRoute);
                }
                return;
            }
            let Some(&via) = fib.next_hop.get(&target) else {
                return self.counters.discard(Discard::NoRoute);
            };
            if self.send_issi(fib, via, envelope(target, hops + 1), ENVELOPE_LEN) {
                self.counters.issi_to_issi += 1;
            }
            return;
        }
        let dk = key(&pdu.destination);
        if pdu.destination.is_group() {
            // Groups travel with a target; one without is not ours to expand again.
            return self.counters.discard(Discard::NoRoute);
        }
        match fib.lookup(dk, &pdu.destination) {
            Some(Route::Local(out)) => {
                if self.deliver(fib, out, &pdu, ENVELOPE_LEN) {
                    self.counters.issi_to_sni += 1;
                }
            }
            Some(Route::Remote { via, .. }) => {
                if self.send_issi(fib, via, envelope(ServerId(0), hops + 1), ENVELOPE_LEN) {
                    self.counters.issi_to_issi += 1;
                }
            }
            Some(Route::Ici(out)) => self.send_ici(out, ENVELOPE_LEN),
            None => self.counters.discard(Discard::NoRoute),
        }
    }

    fn on_ici(&mut self, fib: &Fib, data: &[u8]) {
        let Ok(pdu) = parse(data) else {
            return self.counters.discard(Discard::Malformed);
        };
        self.counters.from_ici += 1;
        let dk = key(&pdu.destination);
        if pdu.destination.is_group() {
            return self.expand_group(fib, None, dk, &pdu, 0);
        }
        match fib.lookup(dk, &pdu.destination) {
            Some(Route::Local(out)) => {
                self.deliver(fib, out, &pdu, 0);
            }
            Some(Route::Remote { via, .. }) => {
                self.send_issi(fib, via, envelope(ServerId(0), 1), 0);
            }
            // Never hand a PDU from one carrier straight to another.
            Some(Route::Ici(_)) | None => self.counters.discard(Discard::NoRoute),
        }
    }

    fn expand_group(
        &mut self,
        fib: &Fib,
        ingress: Option<IfaceId>,
        dk: u64,
        pdu: &L3PduRepr<'_>,
        skip: usize,
    ) {
        let Some(g) = fib.groups.get(&dk) else {
            return self.counters.discard(Discard::NoRoute);
        };
        let mut copies = 0u64;
        for &out in &g.local {
            if Some(out) != ingress && self.deliver(fib, out, pdu, skip) {
                self.counters.sni_to_sni += 1;
                copies += 1;
            }
        }
        for &(server, via) in &g.remote {
            if self.send_issi(fib, via, envelope(server, 1), skip) {
                self.counters.sni_to_issi += 1;
                copies += 1;
            }
        }
        if copies == 0 && g.local.iter().all(|i| Some(*i) == ingress) && g.remote.is_empty() {
            self.counters.discard(Discard::NoRoute);
        }
        self.counters.group_copies += copies.saturating_sub(1);
    }

    /// Delivers to a local SNI after its source screen; true if queued.
    #[inline]
    fn deliver(&mut self, fib: &Fib, out: IfaceId, pdu: &L3PduRepr<'_>, skip: usize) -> bool {
        if let Some(Some(sni)) = fib.sni.get(out.index())
            && !sni.source.passes(key(&pdu.source))
        {
            self.counters.discard(Discard::SourceScreened);
            return false;
        }
        self.counters.delivered += 1;
        self.counters.delivered_octets += pdu.buffer_len() as u64;
        self.out.push_back(Transmit {
            iface: out,
            payload: Payload::Input { prefix: None, skip },
        });
        true
    }

    /// Sends on an ISSI behind a new envelope, unless a CMP cut drops it; true if queued.
    #[inline]
    fn send_issi(&mut self, fib: &Fib, via: IfaceId, env: [u8; ENVELOPE_LEN], skip: usize) -> bool {
        let cut = fib.cut.get(via.index()).copied().unwrap_or(0);
        if cut > 0 {
            // Deterministic thinning: of every 1000 PDUs toward `via`, `cut` are dropped,
            // spread evenly (an accumulator, like a Bresenham line).
            let acc = &mut self.cut_acc[via.index()];
            *acc += cut;
            if *acc >= 1000 {
                *acc -= 1000;
                self.counters.discard(Discard::CmpCut);
                return false;
            }
        }
        self.out.push_back(Transmit {
            iface: via,
            payload: Payload::Input {
                prefix: Some(env),
                skip,
            },
        });
        true
    }

    fn send_ici(&mut self, out: IfaceId, skip: usize) {
        self.counters.to_ici += 1;
        self.out.push_back(Transmit {
            iface: out,
            payload: Payload::Input { prefix: None, skip },
        });
    }
}

/// The L3_PDU, validated ([`L3PduRepr::parse`]: lengths, tags, CRC32 when present, the
/// address types).
#[inline]
fn parse(data: &[u8]) -> Result<L3PduRepr<'_>, atmlab_wire::WireError> {
    L3PduRepr::parse(&L3Pdu::new_checked(data)?)
}
