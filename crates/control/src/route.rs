//! The route object: a link-state view of the network and QoS-constrained routes through it
//! (paper 000 §II-B step 3 of Fig. 2: "a path in the network is obtained from the
//! RouteObject ... Routes are updated asynchronously"; §II-C-1 on caching alternate
//! routes per source-destination pair).
//!
//! [`RouteObject`] is the sans-IO core: switches, their ports (capacity and bandwidth
//! allocated, in cells/s), the duplex links between ports and the hosts on ports, kept as
//! a petgraph [`Graph`] with one node per switch and one directed edge per direction of a
//! link. Bandwidth is charged on a switch's *output* port, as the switches' admission
//! control charges it, so a route needs `free >= bandwidth` on every output port it uses,
//! the last one (towards the destination host) included.
//!
//! **Which route.** [`RouteObject::route`] returns the widest-shortest path: fewest hops
//! among the ports with enough free bandwidth; among those, the one whose tightest port
//! has the most free bandwidth (it leaves the most room, so later calls block less);
//! then, to be deterministic, the smallest sequence of (switch name, output port).
//! [`RouteObject::k_routes`] gives up to `k` loop-free alternates in that order, by Yen's
//! algorithm (J. Y. Yen, "Finding the k shortest loopless paths in a network", Management
//! Science 17(11), 1971) over the same search.
//!
//! **Freshness.** The view is what the switches said when last asked; the switches'
//! admission control has the last word. [`discover`] asks them (through the name service
//! and each switch server's Describe); [`spawn_refresher`] does so every period and
//! replaces the view. [`RouteObject::set_allocated`] lets a connection manager record
//! what it has just allocated before the next refresh shows it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::tls::TlsIdentity;
use petgraph::graph::{EdgeIndex, Graph, NodeIndex};
use petgraph::visit::EdgeRef;
use tokio::task::JoinHandle;

use crate::ControlError;
use crate::names::{NameClient, ObjectKind};

/// How long [`discover`] waits for one switch's Describe before leaving it out.
const DESCRIBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The shortest refresh period [`spawn_refresher`] accepts: a floor against a busy loop.
const MIN_REFRESH_PERIOD: std::time::Duration = std::time::Duration::from_millis(10);

/// One switch on a route.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hop {
    /// The switch.
    pub switch: String,
    /// Where the connection's cells come in.
    pub in_port: u16,
    /// Where they go out.
    pub out_port: u16,
}

/// A path from a host to a host: the first hop's `in_port` is the source host's port, the
/// last hop's `out_port` the destination host's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// The switches in order.
    pub hops: Vec<Hop>,
}

/// One port as the view knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PortState {
    /// Its number.
    pub port: u16,
    /// Admissible bandwidth, cells/s.
    pub capacity: f64,
    /// Bandwidth admitted, cells/s.
    pub allocated: f64,
    /// The (switch, port) at the other end of its link; `None` for a host port or a port
    /// not wired.
    pub peer: Option<(String, u16)>,
}

impl PortState {
    /// Bandwidth still free, cells/s (negative if over-allocated).
    pub fn free(&self) -> f64 {
        self.capacity - self.allocated
    }
}

/// A snapshot of the network: what [`RouteObject::new`] and [`RouteObject::update`] take
/// and [`discover`] makes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkView {
    /// Each switch with its ports.
    pub switches: Vec<(String, Vec<PortState>)>,
    /// Each host: (host, switch, port).
    pub hosts: Vec<(String, String, u16)>,
}

impl NetworkView {
    /// Every duplex link once, as ((switch, port), (switch, port)) with the smaller end
    /// first, sorted; a link counts only if both ends name each other.
    pub fn links(&self) -> Vec<((String, u16), (String, u16))> {
        let ends: BTreeMap<(&str, u16), &(String, u16)> = self
            .switches
            .iter()
            .flat_map(|(s, ports)| {
                ports
                    .iter()
                    .filter_map(move |p| p.peer.as_ref().map(|peer| ((s.as_str(), p.port), peer)))
            })
            .collect();
        let mut out = BTreeSet::new();
        for (&(s, p), (ps, pp)) in &ends {
            if ends
                .get(&(ps.as_str(), *pp))
                .is_some_and(|back| back.0 == s && back.1 == p)
            {
                let a = (s.to_string(), p);
                let b = (ps.clone(), *pp);
                out.insert(if a <= b { (a, b) } else { (b, a) });
            }
        }
        out.into_iter().collect()
    }
}

/// A switch in the graph.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    ports: BTreeMap<u16, PortState>,
}

/// One direction of a link: out of the source switch's `out_port`, into the target's
/// `in_port`.
#[derive(Debug, Clone, Copy)]
struct Link {
    out_port: u16,
    in_port: u16,
}

/// A path between switches, with what orders it.
#[derive(Debug, Clone)]
struct Path {
    nodes: Vec<NodeIndex>,
    edges: Vec<EdgeIndex>,
    /// The least free bandwidth on the path's inter-switch output ports (infinite with
    /// none).
    bottleneck: f64,
    /// (switch, output port) per edge, for deterministic ties. Node indices follow switch
    /// names, so this orders by name.
    key: Vec<(NodeIndex, u16)>,
}

impl Path {
    /// Fewer hops first, then the wider, then the smaller key.
    fn cmp_rank(&self, other: &Path) -> std::cmp::Ordering {
        self.edges
            .len()
            .cmp(&other.edges.len())
            .then(other.bottleneck.total_cmp(&self.bottleneck))
            .then_with(|| self.key.cmp(&other.key))
    }
}

/// The route object's core: a link-state view and routes through it. No I/O.
#[derive(Debug, Clone)]
pub struct RouteObject {
    graph: Graph<Node, Link>,
    index: BTreeMap<String, NodeIndex>,
    hosts: BTreeMap<String, (String, u16)>,
    /// What the last lenient update left out, so a refresh warns once, not every period.
    problems: Vec<String>,
}

impl RouteObject {
    /// A route object over `view`, which must hang together: names given once, every
    /// link to a port that exists and that names this port back, every host on a port
    /// that exists and is not a link. Errors list every problem.
    pub fn new(view: NetworkView) -> Result<Self, ControlError> {
        let r = Self::build(view);
        if r.problems.is_empty() {
            Ok(r)
        } else {
            Err(ControlError::InvalidView {
                reason: r.problems.join("; "),
            })
        }
    }

    /// Replaces the view (a refresh). Lenient, as a view of a live network may be caught
    /// mid-change (a switch restarting): a link to a switch or port not in the view is
    /// left out (a one-way link is kept in the direction that exists), and the problems
    /// are logged at `warn` when they change.
    pub fn update(&mut self, view: NetworkView) {
        let next = Self::build(view);
        if next.problems != self.problems && !next.problems.is_empty() {
            tracing::warn!(problems = %next.problems.join("; "), "network view refreshed with problems");
        }
        *self = next;
    }

    fn build(view: NetworkView) -> Self {
        let mut problems = Vec::new();
        let mut switches: BTreeMap<String, BTreeMap<u16, PortState>> = BTreeMap::new();
        for (name, ports) in view.switches {
            if switches.contains_key(&name) {
                problems.push(format!("switch {name} appears twice"));
                continue;
            }
            let mut map = BTreeMap::new();
            for p in ports {
                if !(p.capacity.is_finite() && p.allocated.is_finite()) {
                    problems.push(format!(
                        "{name}:{}: capacity {} and allocated {} must be finite",
                        p.port, p.capacity, p.allocated
                    ));
                }
                if map.contains_key(&p.port) {
                    problems.push(format!("{name}:{} appears twice", p.port));
                    continue;
                }
                map.insert(p.port, p);
            }
            switches.insert(name, map);
        }
        // Nodes in name order, so node indices order routes by name.
        let mut graph = Graph::new();
        let mut index = BTreeMap::new();
        for (name, ports) in &switches {
            let i = graph.add_node(Node {
                name: name.clone(),
                ports: ports.clone(),
            });
            index.insert(name.clone(), i);
        }
        for (name, ports) in &switches {
            for p in ports.values() {
                let Some((peer, peer_port)) = &p.peer else {
                    continue;
                };
                let Some(back) = switches.get(peer).and_then(|ps| ps.get(peer_port)) else {
                    problems.push(format!(
                        "{name}:{}'s peer {peer}:{peer_port} is not in the view",
                        p.port
                    ));
                    continue;
                };
                if back.peer.as_ref() != Some(&(name.clone(), p.port)) {
                    problems.push(format!(
                        "the link {name}:{} -> {peer}:{peer_port} is one-way ({peer}:{peer_port}'s peer is {})",
                        p.port,
                        back.peer
                            .as_ref()
                            .map_or("none".to_string(), |(s, q)| format!("{s}:{q}"))
                    ));
                }
                graph.add_edge(
                    index[name],
                    index[peer],
                    Link {
                        out_port: p.port,
                        in_port: *peer_port,
                    },
                );
            }
        }
        let mut hosts = BTreeMap::new();
        for (host, switch, port) in view.hosts {
            if hosts.contains_key(&host) {
                problems.push(format!("host {host} appears twice"));
                continue;
            }
            match switches.get(&switch).and_then(|ps| ps.get(&port)) {
                None => problems.push(format!(
                    "host {host} is at {switch}:{port}, not in the view"
                )),
                Some(PortState {
                    peer: Some((s, q)), ..
                }) => problems.push(format!(
                    "host {host} is at {switch}:{port}, which is a link to {s}:{q}"
                )),
                Some(_) => {}
            }
            hosts.insert(host, (switch, port));
        }
        RouteObject {
            graph,
            index,
            hosts,
            problems,
        }
    }

    /// The view as it stands (switches and hosts sorted by name, ports by number).
    pub fn view(&self) -> NetworkView {
        NetworkView {
            switches: self
                .index
                .values()
                .map(|&i| {
                    let n = &self.graph[i];
                    (n.name.clone(), n.ports.values().cloned().collect())
                })
                .collect(),
            hosts: self
                .hosts
                .iter()
                .map(|(h, (s, p))| (h.clone(), s.clone(), *p))
                .collect(),
        }
    }

    /// One port's state.
    pub fn port(&self, switch: &str, port: u16) -> Option<&PortState> {
        self.graph[*self.index.get(switch)?].ports.get(&port)
    }

    /// Records the bandwidth now allocated on a port (a connection manager's own
    /// allocation, ahead of the next refresh). An unknown port is ignored: the next
    /// refresh brings the truth anyway.
    pub fn set_allocated(&mut self, switch: &str, port: u16, allocated: f64) {
        match self
            .index
            .get(switch)
            .and_then(|&i| self.graph[i].ports.get_mut(&port))
        {
            Some(p) => p.allocated = allocated,
            None => tracing::debug!(switch, port, "set_allocated on a port not in the view"),
        }
    }

    /// Where a host attaches: (switch, port).
    pub fn host(&self, name: &str) -> Option<(&str, u16)> {
        self.hosts.get(name).map(|(s, p)| (s.as_str(), *p))
    }

    /// The widest-shortest route from `src_host` to `dst_host` with `bandwidth` cells/s
    /// free on every output port (see the module doc for the order). Hosts on one switch
    /// get a one-hop route.
    ///
    /// Errors: [`ControlError::UnknownHost`]; [`ControlError::NoRoute`] (blocked,
    /// RESOURCE_EXHAUSTED) naming the port that is short or saying the switches are not
    /// connected; [`ControlError::InvalidRouteRequest`] for a bandwidth that is negative
    /// or not a number, or a host to itself.
    pub fn route(
        &self,
        src_host: &str,
        dst_host: &str,
        bandwidth: f64,
    ) -> Result<Route, ControlError> {
        let ends = self.ends(src_host, dst_host, bandwidth)?;
        let blocked = |reason: String| ControlError::NoRoute {
            from: src_host.to_string(),
            to: dst_host.to_string(),
            bandwidth,
            reason,
        };
        let (src, dst) = match ends {
            Ends::Ok { src, dst } => (src, dst),
            Ends::Blocked(reason) => return Err(blocked(reason)),
        };
        let none = BTreeSet::new();
        match self.best_path(src, dst, bandwidth, &[], &none) {
            Some(path) => Ok(self.to_route(src_host, dst_host, &path)),
            None if self
                .best_path(src, dst, f64::NEG_INFINITY, &[], &none)
                .is_some() =>
            {
                Err(blocked(format!(
                    "every path from {} to {} has a port with less than {bandwidth} cells/s free",
                    self.graph[src].name, self.graph[dst].name
                )))
            }
            None => Err(blocked(format!(
                "switches {} and {} are not connected",
                self.graph[src].name, self.graph[dst].name
            ))),
        }
    }

    /// Up to `k` loop-free routes from `src_host` to `dst_host` with `bandwidth` cells/s
    /// free on every output port, best first ([`RouteObject::route`]'s is the first).
    /// Empty where `route` would fail.
    pub fn k_routes(&self, src_host: &str, dst_host: &str, bandwidth: f64, k: usize) -> Vec<Route> {
        let Ok(Ends::Ok { src, dst }) = self.ends(src_host, dst_host, bandwidth) else {
            return Vec::new();
        };
        let none = BTreeSet::new();
        let Some(first) = (k > 0)
            .then(|| self.best_path(src, dst, bandwidth, &[], &none))
            .flatten()
        else {
            return Vec::new();
        };
        // Yen: each accepted path spawns candidates that leave it at one of its nodes (the
        // spur) by an edge no accepted path with the same root took, and never revisit
        // the root.
        let mut accepted = vec![first];
        let mut candidates: Vec<Path> = Vec::new();
        while accepted.len() < k {
            let last = accepted.last().expect("at least the first").clone();
            for i in 0..last.edges.len() {
                let root = &last.edges[..i];
                let banned_edges: BTreeSet<EdgeIndex> = accepted
                    .iter()
                    .filter(|p| p.edges.len() > i && &p.edges[..i] == root)
                    .map(|p| p.edges[i])
                    .collect();
                let Some(spur) = self.best_path(
                    last.nodes[i],
                    dst,
                    bandwidth,
                    &last.nodes[..i],
                    &banned_edges,
                ) else {
                    continue;
                };
                let mut edges = root.to_vec();
                edges.extend(spur.edges);
                let path = self.path_of(src, edges);
                let seen = |p: &Path| p.edges == path.edges;
                if !accepted.iter().any(seen) && !candidates.iter().any(seen) {
                    candidates.push(path);
                }
            }
            let Some(best) =
                (0..candidates.len()).min_by(|&a, &b| candidates[a].cmp_rank(&candidates[b]))
            else {
                break;
            };
            accepted.push(candidates.swap_remove(best));
        }
        accepted
            .iter()
            .map(|p| self.to_route(src_host, dst_host, p))
            .collect()
    }

    /// Checks a request and finds its end switches; `Blocked` when the destination's own
    /// port lacks the bandwidth or a switch is missing from the view.
    fn ends(&self, src_host: &str, dst_host: &str, bandwidth: f64) -> Result<Ends, ControlError> {
        if !(bandwidth >= 0.0 && bandwidth.is_finite()) {
            return Err(ControlError::InvalidRouteRequest {
                reason: format!(
                    "bandwidth must be a finite number of cells/s >= 0, not {bandwidth}"
                ),
            });
        }
        let unknown = |h: &str| ControlError::UnknownHost {
            host: h.to_string(),
        };
        let (ss, _) = self.host(src_host).ok_or_else(|| unknown(src_host))?;
        let (ds, dp) = self.host(dst_host).ok_or_else(|| unknown(dst_host))?;
        if src_host == dst_host {
            return Err(ControlError::InvalidRouteRequest {
                reason: format!("a connection from host {src_host} to itself"),
            });
        }
        let (Some(&src), Some(&dst)) = (self.index.get(ss), self.index.get(ds)) else {
            let missing = if self.index.contains_key(ss) { ds } else { ss };
            return Ok(Ends::Blocked(format!(
                "switch {missing} is not in the network view"
            )));
        };
        match self.graph[dst].ports.get(&dp) {
            Some(p) if p.free() >= bandwidth => Ok(Ends::Ok { src, dst }),
            Some(p) => Ok(Ends::Blocked(format!(
                "the port to {dst_host} ({ds}:{dp}) has {} cells/s free",
                p.free()
            ))),
            None => Ok(Ends::Blocked(format!(
                "port {ds}:{dp} is not in the network view"
            ))),
        }
    }

    /// The best path from `from` to `to` over edges whose output port has `bandwidth`
    /// free, avoiding `banned_nodes` and `banned_edges`: breadth-first by hop count, and
    /// within a hop count the best label per switch (a path's rank extends
    /// monotonically, so the best path to a switch extends the best paths before it).
    fn best_path(
        &self,
        from: NodeIndex,
        to: NodeIndex,
        bandwidth: f64,
        banned_nodes: &[NodeIndex],
        banned_edges: &BTreeSet<EdgeIndex>,
    ) -> Option<Path> {
        let mut settled = vec![false; self.graph.node_count()];
        for n in banned_nodes {
            settled[n.index()] = true;
        }
        settled[from.index()] = true;
        let mut frontier = vec![Path {
            nodes: vec![from],
            edges: Vec::new(),
            bottleneck: f64::INFINITY,
            key: Vec::new(),
        }];
        if from == to {
            return frontier.pop();
        }
        while !frontier.is_empty() {
            let mut next: BTreeMap<NodeIndex, Path> = BTreeMap::new();
            for path in &frontier {
                let u = *path.nodes.last().expect("a path has a node");
                for e in self.graph.edges(u) {
                    let v = e.target();
                    if settled[v.index()] || banned_edges.contains(&e.id()) {
                        continue;
                    }
                    let free = self.free(u, e.weight().out_port);
                    // A NaN (a broken report) is never enough.
                    if free.is_nan() || free < bandwidth {
                        continue;
                    }
                    let mut cand = path.clone();
                    cand.nodes.push(v);
                    cand.edges.push(e.id());
                    cand.bottleneck = cand.bottleneck.min(free);
                    cand.key.push((u, e.weight().out_port));
                    match next.get(&v) {
                        Some(best) if best.cmp_rank(&cand).is_le() => {}
                        _ => {
                            next.insert(v, cand);
                        }
                    }
                }
            }
            for v in next.keys() {
                settled[v.index()] = true;
            }
            if let Some(found) = next.remove(&to) {
                return Some(found);
            }
            frontier = next.into_values().collect();
        }
        None
    }

    /// A path from its edges, with its rank recomputed.
    fn path_of(&self, from: NodeIndex, edges: Vec<EdgeIndex>) -> Path {
        let mut nodes = vec![from];
        let mut bottleneck = f64::INFINITY;
        let mut key = Vec::with_capacity(edges.len());
        for &e in &edges {
            let (u, v) = self.graph.edge_endpoints(e).expect("an edge of this graph");
            let out = self.graph[e].out_port;
            bottleneck = bottleneck.min(self.free(u, out));
            key.push((u, out));
            nodes.push(v);
        }
        Path {
            nodes,
            edges,
            bottleneck,
            key,
        }
    }

    fn free(&self, switch: NodeIndex, port: u16) -> f64 {
        self.graph[switch]
            .ports
            .get(&port)
            .map_or(f64::NEG_INFINITY, PortState::free)
    }

    fn to_route(&self, src_host: &str, dst_host: &str, path: &Path) -> Route {
        let (_, src_port) = self.host(src_host).expect("checked");
        let (_, dst_port) = self.host(dst_host).expect("checked");
        let mut in_port = src_port;
        let mut hops = Vec::with_capacity(path.nodes.len());
        for (i, &n) in path.nodes.iter().enumerate() {
            let (out_port, next_in) = match path.edges.get(i) {
                Some(&e) => (self.graph[e].out_port, self.graph[e].in_port),
                None => (dst_port, 0),
            };
            hops.push(Hop {
                switch: self.graph[n].name.clone(),
                in_port,
                out_port,
            });
            in_port = next_in;
        }
        Route { hops }
    }
}

enum Ends {
    Ok { src: NodeIndex, dst: NodeIndex },
    Blocked(String),
}

// ---------------------------------------------------------------------------------------
// The live refresher.

/// Builds the network view from the live network: every `SwitchServer` registered in the
/// name service (`switch/NAME`, with a `port.N = "udp:ADDR"` attribute per port), asked
/// for its Describe (in parallel, each within a time-out), and every `Host` (`host/NAME`,
/// attributes `switch` and `port`). A link is a port whose peer address is another
/// switch's `port.N` address.
///
/// A switch that cannot be reached, or a registration that cannot be read, is left out
/// and logged at `warn` (a link-state view lives with the switches it can see); only a
/// name service failure is an error.
pub async fn discover(
    names: &NameClient,
    tls: Option<&TlsIdentity>,
) -> Result<NetworkView, ControlError> {
    let registered = names.list(Some(ObjectKind::SwitchServer)).await?;
    let host_objects = names.list(Some(ObjectKind::Host)).await?;
    // Each port's UDP address to (switch, port).
    let mut book: HashMap<String, (String, u16)> = HashMap::new();
    let mut set = tokio::task::JoinSet::new();
    for (object, _) in registered {
        let name = bare(&object.name, "switch/");
        for (key, value) in &object.attributes {
            if let Some(port) = key.strip_prefix("port.") {
                match port.parse::<u16>() {
                    Ok(port) => {
                        book.insert(value.clone(), (name.clone(), port));
                    }
                    Err(_) => tracing::warn!(switch = %name, key, "not a port attribute"),
                }
            }
        }
        let tls = tls.cloned();
        set.spawn(async move {
            let described = describe(&object.address, tls.as_ref()).await;
            (name, object.address, described)
        });
    }
    let mut described = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((name, _, Ok(d))) => described.push((name, d)),
            Ok((name, address, Err(e))) => {
                tracing::warn!(switch = %name, %address, error = %e, "switch left out of the view");
            }
            Err(e) => tracing::warn!(error = %e, "a Describe task failed"),
        }
    }
    described.sort_by(|a, b| a.0.cmp(&b.0));
    let switches = described
        .into_iter()
        .map(|(name, d)| {
            let ports = d
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| PortState {
                    port: p.config.id.0,
                    capacity: p.config.capacity.per_sec(),
                    allocated: p.allocated,
                    // "udp:learn@..." (a host port) matches no switch port.
                    peer: d.peers.get(i).and_then(|a| book.get(a)).cloned(),
                })
                .collect();
            (name, ports)
        })
        .collect();
    let mut hosts = Vec::new();
    for (object, _) in host_objects {
        let name = bare(&object.name, "host/");
        let switch = object.attributes.get("switch");
        let port = object
            .attributes
            .get("port")
            .and_then(|p| p.parse::<u16>().ok());
        match (switch, port) {
            (Some(switch), Some(port)) => hosts.push((name, switch.clone(), port)),
            _ => {
                tracing::warn!(host = %name, "host registration without switch and port attributes")
            }
        }
    }
    Ok(NetworkView { switches, hosts })
}

fn bare(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix).unwrap_or(name).to_string()
}

async fn describe(
    address: &str,
    tls: Option<&TlsIdentity>,
) -> Result<atmlab_fabric::live::backend::Description, ControlError> {
    let channel = atmlab_rpc::client_channel(address, tls).await?;
    match tokio::time::timeout(DESCRIBE_TIMEOUT, GrpcSwitch::new(channel).describe()).await {
        Ok(d) => Ok(d?),
        Err(_) => Err(ControlError::Call {
            call: "SwitchServer.Describe",
            code: tonic::Code::DeadlineExceeded,
            message: format!("no answer within {DESCRIBE_TIMEOUT:?}"),
        }),
    }
}

/// Refreshes `route` from the live network every `period` (at least 10 ms; the first at
/// once), asynchronously, until the returned task is aborted. A failed refresh keeps the
/// old view and is logged at `warn`.
pub fn spawn_refresher(
    route: Arc<Mutex<RouteObject>>,
    names: NameClient,
    tls: Option<TlsIdentity>,
    period: std::time::Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period.max(MIN_REFRESH_PERIOD));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match discover(&names, tls.as_ref()).await {
                Ok(view) => route
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .update(view),
                Err(e) => tracing::warn!(error = %e, "route refresh failed; keeping the old view"),
            }
        }
    })
}

/// The route object of a running network: discovered from the name service at
/// `names_addr` and the switches' Describe, refreshed every second in the background by
/// the returned task (abort it to stop).
pub async fn start(
    names_addr: &str,
    tls: Option<&TlsIdentity>,
) -> Result<(Arc<Mutex<RouteObject>>, JoinHandle<()>), ControlError> {
    let names = NameClient::connect(names_addr, tls).await?;
    let view = discover(&names, tls).await?;
    let route = Arc::new(Mutex::new(RouteObject::new(view)?));
    let refresher = spawn_refresher(
        route.clone(),
        names,
        tls.cloned(),
        std::time::Duration::from_secs(1),
    );
    Ok((route, refresher))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(port: u16, capacity: f64, peer: Option<(&str, u16)>) -> PortState {
        PortState {
            port,
            capacity,
            allocated: 0.0,
            peer: peer.map(|(s, p)| (s.to_string(), p)),
        }
    }

    /// Switches with `ports` ports each, `links` "s1:1"-"s2:0" and hosts at "s:p".
    fn view(
        switches: &[(&str, u16)],
        links: &[(&str, &str)],
        hosts: &[(&str, &str)],
    ) -> NetworkView {
        let split = |s: &str| {
            let (a, b) = s.split_once(':').unwrap();
            (a.to_string(), b.parse::<u16>().unwrap())
        };
        let mut peers: BTreeMap<(String, u16), (String, u16)> = BTreeMap::new();
        for (a, b) in links {
            peers.insert(split(a), split(b));
            peers.insert(split(b), split(a));
        }
        NetworkView {
            switches: switches
                .iter()
                .map(|&(name, n)| {
                    let ports = (0..n)
                        .map(|p| PortState {
                            peer: peers.get(&(name.to_string(), p)).cloned(),
                            ..port(p, 1000.0, None)
                        })
                        .collect();
                    (name.to_string(), ports)
                })
                .collect(),
            hosts: hosts
                .iter()
                .map(|(h, at)| {
                    let (s, p) = split(at);
                    (h.to_string(), s, p)
                })
                .collect(),
        }
    }

    fn hops(r: &Route) -> Vec<(&str, u16, u16)> {
        r.hops
            .iter()
            .map(|h| (h.switch.as_str(), h.in_port, h.out_port))
            .collect()
    }

    fn line3() -> RouteObject {
        RouteObject::new(view(
            &[("s1", 2), ("s2", 2), ("s3", 2)],
            &[("s1:1", "s2:0"), ("s2:1", "s3:0")],
            &[("a", "s1:0"), ("b", "s3:1")],
        ))
        .unwrap()
    }

    /// A ring s1-s2-s3-s4-s1 (port 1 clockwise, port 2 anticlockwise), a host on port 0 of
    /// each, and a chord s1:3-s3:3.
    fn ring(chord: bool) -> RouteObject {
        let mut links = vec![
            ("s1:1", "s2:2"),
            ("s2:1", "s3:2"),
            ("s3:1", "s4:2"),
            ("s4:1", "s1:2"),
        ];
        if chord {
            links.push(("s1:3", "s3:3"));
        }
        RouteObject::new(view(
            &[("s1", 4), ("s2", 4), ("s3", 4), ("s4", 4)],
            &links,
            &[
                ("h1", "s1:0"),
                ("h2", "s2:0"),
                ("h3", "s3:0"),
                ("h4", "s4:0"),
            ],
        ))
        .unwrap()
    }

    #[test]
    fn a_line_gives_the_one_path() {
        let r = line3();
        assert_eq!(r.host("a"), Some(("s1", 0)));
        assert_eq!(r.host("c"), None);
        let route = r.route("a", "b", 500.0).unwrap();
        assert_eq!(hops(&route), [("s1", 0, 1), ("s2", 0, 1), ("s3", 0, 1)]);
        let back = r.route("b", "a", 500.0).unwrap();
        assert_eq!(hops(&back), [("s3", 1, 0), ("s2", 1, 0), ("s1", 1, 0)]);
        assert_eq!(r.k_routes("a", "b", 500.0, 5), [route]);
        assert_eq!(r.view().links().len(), 2);
    }

    #[test]
    fn hosts_on_one_switch_get_one_hop() {
        let r = RouteObject::new(view(&[("s1", 3)], &[], &[("a", "s1:0"), ("b", "s1:2")])).unwrap();
        let route = r.route("a", "b", 10.0).unwrap();
        assert_eq!(hops(&route), [("s1", 0, 2)]);
        assert_eq!(r.k_routes("a", "b", 10.0, 3), [route]);
        let e = r.route("a", "a", 10.0).unwrap_err();
        assert!(matches!(e, ControlError::InvalidRouteRequest { .. }), "{e}");
    }

    #[test]
    fn unknown_hosts_are_named() {
        let r = line3();
        for (src, dst) in [("x", "b"), ("a", "x")] {
            let e = r.route(src, dst, 1.0).unwrap_err();
            assert!(
                matches!(&e, ControlError::UnknownHost { host } if host == "x"),
                "{e}"
            );
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert!(e.to_string().contains("\"x\""), "{e}");
            assert!(r.k_routes(src, dst, 1.0, 3).is_empty());
        }
        let e = r.route("a", "b", -1.0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
        let e = r.route("a", "b", f64::NAN).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    }

    #[test]
    fn a_call_without_bandwidth_is_blocked() {
        let mut r = line3();
        // A middle link short of bandwidth.
        r.set_allocated("s2", 1, 800.0);
        let e = r.route("a", "b", 500.0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
        assert!(e.to_string().contains("every path from s1 to s3"), "{e}");
        assert!(r.k_routes("a", "b", 500.0, 3).is_empty());
        // What is left still fits.
        assert!(r.route("a", "b", 200.0).is_ok());
        assert!(r.route("a", "b", 200.5).is_err());
        // The destination host's own port.
        r.set_allocated("s2", 1, 0.0);
        r.set_allocated("s3", 1, 1000.0);
        let e = r.route("a", "b", 1.0).unwrap_err();
        assert!(matches!(e, ControlError::NoRoute { .. }), "{e}");
        assert!(e.to_string().contains("s3:1"), "{e}");
        // Not connected at all.
        let r = RouteObject::new(view(
            &[("s1", 1), ("s2", 1)],
            &[],
            &[("a", "s1:0"), ("b", "s2:0")],
        ))
        .unwrap();
        let e = r.route("a", "b", 0.0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.to_string().contains("not connected"), "{e}");
    }

    #[test]
    fn a_ring_has_alternates_fewest_hops_first() {
        let r = ring(false);
        // h1 to h2: one hop clockwise or three anticlockwise.
        let routes = r.k_routes("h1", "h2", 100.0, 5);
        assert_eq!(routes.len(), 2);
        assert_eq!(hops(&routes[0]), [("s1", 0, 1), ("s2", 2, 0)]);
        assert_eq!(
            hops(&routes[1]),
            [("s1", 0, 2), ("s4", 1, 2), ("s3", 1, 2), ("s2", 1, 0)]
        );
        assert_eq!(r.route("h1", "h2", 100.0).unwrap(), routes[0]);
        assert_eq!(r.k_routes("h1", "h2", 100.0, 1), routes[..1]);
        assert!(r.k_routes("h1", "h2", 100.0, 0).is_empty());
    }

    #[test]
    fn equal_hops_go_the_wider_way_then_by_name() {
        let mut r = ring(false);
        // h1 to h3: two hops either way; equal free bandwidth, so by name: via s2.
        let via = |r: &RouteObject| r.route("h1", "h3", 100.0).unwrap().hops[1].switch.clone();
        assert_eq!(via(&r), "s2");
        // Load the s2 way a little: the wider s4 way wins.
        r.set_allocated("s2", 1, 300.0);
        assert_eq!(via(&r), "s4");
        let routes = r.k_routes("h1", "h3", 100.0, 3);
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].hops[1].switch, "s4");
        assert_eq!(routes[1].hops[1].switch, "s2");
        // Deterministic: the same view gives the same answer.
        assert_eq!(r.clone().k_routes("h1", "h3", 100.0, 3), routes);
    }

    #[test]
    fn bandwidth_constraints_reroute_around_a_full_link() {
        let mut r = ring(true);
        // h1 to h3 over the chord: one hop.
        assert_eq!(
            hops(&r.route("h1", "h3", 100.0).unwrap()),
            [("s1", 0, 3), ("s3", 3, 0)]
        );
        let all = r.k_routes("h1", "h3", 100.0, 10);
        assert_eq!(all.len(), 3, "{all:?}"); // chord, via s2, via s4
        assert_eq!(all[0].hops.len(), 2);
        assert_eq!(all[1].hops.len(), 3);
        assert_eq!(all[2].hops.len(), 3);
        // Fill the chord: around the ring instead.
        r.set_allocated("s1", 3, 950.0);
        let route = r.route("h1", "h3", 100.0).unwrap();
        assert_eq!(hops(&route), [("s1", 0, 1), ("s2", 2, 1), ("s3", 2, 0)]);
        assert_eq!(r.k_routes("h1", "h3", 100.0, 10).len(), 2);
        // A small call still takes the chord.
        assert_eq!(r.route("h1", "h3", 50.0).unwrap().hops.len(), 2);
        // The reverse direction's ports are other ports: unaffected.
        assert_eq!(r.route("h3", "h1", 100.0).unwrap().hops.len(), 2);
    }

    #[test]
    fn k_routes_are_loop_free_and_distinct() {
        // A 3x3 grid: many alternates.
        let mut switches = Vec::new();
        let mut links = Vec::new();
        let name = |x: u16, y: u16| format!("g{x}{y}");
        let names: Vec<String> = (0..3)
            .flat_map(|x| (0..3).map(move |y| name(x, y)))
            .collect();
        for n in &names {
            switches.push((n.as_str(), 5));
        }
        let mut link_names = Vec::new();
        for x in 0..3 {
            for y in 0..3 {
                if x < 2 {
                    link_names.push((format!("{}:1", name(x, y)), format!("{}:2", name(x + 1, y))));
                }
                if y < 2 {
                    link_names.push((format!("{}:3", name(x, y)), format!("{}:4", name(x, y + 1))));
                }
            }
        }
        for (a, b) in &link_names {
            links.push((a.as_str(), b.as_str()));
        }
        let r =
            RouteObject::new(view(&switches, &links, &[("a", "g00:0"), ("b", "g22:0")])).unwrap();
        // Corner to corner of a 3x3 grid there are exactly 12 self-avoiding paths.
        let routes = r.k_routes("a", "b", 1.0, 20);
        assert_eq!(routes.len(), 12);
        // The six shortest (4 links, 5 switches) come first.
        assert!(routes[..6].iter().all(|r| r.hops.len() == 5));
        assert!(
            routes
                .windows(2)
                .all(|w| w[0].hops.len() <= w[1].hops.len())
        );
        let distinct: BTreeSet<Vec<(String, u16, u16)>> = routes
            .iter()
            .map(|r| {
                r.hops
                    .iter()
                    .map(|h| (h.switch.clone(), h.in_port, h.out_port))
                    .collect()
            })
            .collect();
        assert_eq!(distinct.len(), 12);
        for route in &routes {
            let switches: BTreeSet<&str> = route.hops.iter().map(|h| h.switch.as_str()).collect();
            assert_eq!(switches.len(), route.hops.len(), "a loop: {route:?}");
            assert_eq!(route.hops.first().unwrap().switch, "g00");
            assert_eq!(route.hops.last().unwrap().switch, "g22");
        }
    }

    #[test]
    fn parallel_links_are_alternates_too() {
        let r = RouteObject::new(view(
            &[("s1", 3), ("s2", 3)],
            &[("s1:1", "s2:1"), ("s1:2", "s2:2")],
            &[("a", "s1:0"), ("b", "s2:0")],
        ))
        .unwrap();
        let routes = r.k_routes("a", "b", 1.0, 5);
        assert_eq!(routes.len(), 2);
        assert_eq!(hops(&routes[0]), [("s1", 0, 1), ("s2", 1, 0)]);
        assert_eq!(hops(&routes[1]), [("s1", 0, 2), ("s2", 2, 0)]);
    }

    #[test]
    fn a_view_that_does_not_hang_together_is_refused_then_tolerated() {
        let mut v = view(
            &[("s1", 2), ("s2", 2)],
            &[("s1:1", "s2:0")],
            &[("a", "s1:0"), ("b", "s2:1"), ("c", "s9:0"), ("d", "s1:1")],
        );
        v.switches[0].1[0].peer = Some(("s9".into(), 3));
        let e = RouteObject::new(v.clone()).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let text = e.to_string();
        for needle in [
            "s1:0's peer s9:3",
            "host c",
            "host d is at s1:1, which is a link",
        ] {
            assert!(text.contains(needle), "{needle:?} in {text}");
        }
        // As a refresh, what hangs together is used.
        let mut r = line3();
        r.update(v);
        assert_eq!(
            hops(&r.route("a", "b", 1.0).unwrap()),
            [("s1", 0, 1), ("s2", 0, 1)]
        );
        let e = r.route("a", "c", 1.0).unwrap_err();
        assert!(
            e.to_string()
                .contains("switch s9 is not in the network view"),
            "{e}"
        );
        // A one-way link is kept in its direction.
        let mut v = view(
            &[("s1", 2), ("s2", 2)],
            &[("s1:1", "s2:0")],
            &[("a", "s1:0"), ("b", "s2:1")],
        );
        v.switches[1].1[0].peer = None;
        assert!(
            RouteObject::new(v.clone())
                .unwrap_err()
                .to_string()
                .contains("one-way")
        );
        r.update(v);
        assert!(r.route("a", "b", 1.0).is_ok());
        assert!(r.route("b", "a", 1.0).is_err());
        assert!(r.view().links().is_empty());
    }

    #[test]
    fn update_replaces_the_view() {
        let mut r = line3();
        r.set_allocated("s1", 1, 900.0);
        assert_eq!(r.port("s1", 1).unwrap().free(), 100.0);
        assert!(r.route("a", "b", 500.0).is_err());
        // A refresh brings the switches' truth back.
        r.update(line3().view());
        assert!(r.route("a", "b", 500.0).is_ok());
        assert_eq!(r.view(), line3().view());
        // Unknown ports are ignored.
        r.set_allocated("s9", 1, 1.0);
        r.set_allocated("s1", 9, 1.0);
        assert_eq!(r.view(), line3().view());
    }
}
