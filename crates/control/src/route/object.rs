//! The route object's sans-IO core (paper 000 §II-B step 3): the link-state view as a
//! petgraph graph, widest-shortest routes and Yen's k loop-free alternates, as the module
//! doc of [`crate::route`] states them.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{EdgeIndex, Graph, NodeIndex};
use petgraph::visit::EdgeRef;
use rustc_hash::FxHashMap;

use crate::ControlError;

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
/// and [`discover`](crate::route::discover) makes.
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
    /// Each port's free bandwidth (`PortState::free`) by port number, `-inf` where
    /// there is no port: the search reads it for every edge it tries, and a B-tree
    /// look-up per edge was most of a route's cost on a large network. Empty when the
    /// port numbers are too large for a table (then `ports` is searched).
    free: Vec<f64>,
}

/// Port numbers below this get a dense table of free bandwidth ([`Node::free`]).
const DENSE_PORTS: u16 = 1024;

impl Node {
    fn new(name: String, ports: BTreeMap<u16, PortState>) -> Node {
        let mut free = Vec::new();
        if let Some(&max) = ports.keys().next_back()
            && max < DENSE_PORTS
        {
            free = vec![f64::NEG_INFINITY; usize::from(max) + 1];
            for (&p, st) in &ports {
                free[usize::from(p)] = st.free();
            }
        }
        Node { name, ports, free }
    }
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
    /// Where each host attaches; hashed, as every route looks two hosts up (thousands of
    /// them on a large network).
    hosts: FxHashMap<String, (String, u16)>,
    /// What the last lenient update left out, so a refresh warns once, not every period.
    problems: Vec<String>,
    /// Each switch's links out, as (peer, output port, edge) in the graph's order: read
    /// for every switch the search reaches.
    adj: Vec<Vec<(NodeIndex, u16, EdgeIndex)>>,
    /// Each switch's links in, as the peers they come from: the searches backwards.
    radj: Vec<Vec<NodeIndex>>,
    /// Per destination switch, every switch's hop count to it over the links (bandwidth
    /// aside; `u16::MAX`: none), computed the first time a route ends there and kept
    /// until the view is replaced. It confines the search to the links that lie on a
    /// fewest-hop path ([`RouteObject::best_path`]).
    hops_to: Vec<std::sync::OnceLock<Box<[u16]>>>,
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
            let i = graph.add_node(Node::new(name.clone(), ports.clone()));
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
        let mut hosts = FxHashMap::default();
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
        let adj = graph
            .node_indices()
            .map(|u| {
                graph
                    .edges(u)
                    .map(|e| (e.target(), e.weight().out_port, e.id()))
                    .collect()
            })
            .collect();
        let mut radj: Vec<Vec<NodeIndex>> = vec![Vec::new(); graph.node_count()];
        for u in graph.node_indices() {
            for e in graph.edges(u) {
                radj[e.target().index()].push(u);
            }
        }
        let hops_to = (0..graph.node_count())
            .map(|_| std::sync::OnceLock::new())
            .collect();
        RouteObject {
            graph,
            index,
            hosts,
            problems,
            adj,
            radj,
            hops_to,
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
            hosts: {
                let mut hosts: Vec<(String, String, u16)> = self
                    .hosts
                    .iter()
                    .map(|(h, (s, p))| (h.clone(), s.clone(), *p))
                    .collect();
                hosts.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                hosts
            },
        }
    }

    /// One port's state.
    pub fn port(&self, switch: &str, port: u16) -> Option<&PortState> {
        self.graph[*self.index.get(switch)?].ports.get(&port)
    }

    /// Records the bandwidth now allocated on a port, ahead of the next refresh (a tool
    /// or a test that knows better than the last snapshot; the connection managers do
    /// not call it, see the module doc of [`crate::route`]). An unknown port is ignored:
    /// the next refresh brings the truth anyway.
    pub fn set_allocated(&mut self, switch: &str, port: u16, allocated: f64) {
        let node = self.index.get(switch).map(|&i| &mut self.graph[i]);
        match node.and_then(|n| Some((n.ports.get_mut(&port)?, &mut n.free))) {
            Some((p, free)) => {
                p.allocated = allocated;
                if let Some(f) = free.get_mut(usize::from(port)) {
                    *f = p.free();
                }
            }
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
    ///
    /// A label is a switch's best path of this hop count, kept as its last edge and its
    /// bottleneck, not as a copy of the whole path: the paths of one hop count have keys
    /// of one length, so a path's key compares as its parent's place among them (its
    /// rank) and then its own last (switch, port). The same paths as comparing the
    /// copies, without copying a path for every edge tried.
    ///
    /// The search first follows only the links that bring it one hop closer to `to` (the
    /// fewest-hop paths, bandwidth aside): when one of those paths has room, the widest
    /// of them is the answer, and only the switches between the two ends are read
    /// (a few on a large network, not all of them). The labels and ranks of those
    /// switches are the ones the whole search gives them, as every path of the fewest
    /// hops to a switch on the way runs through such links alone; the answer is the
    /// same. When none has room, the whole search runs.
    fn best_path(
        &self,
        from: NodeIndex,
        to: NodeIndex,
        bandwidth: f64,
        banned_nodes: &[NodeIndex],
        banned_edges: &BTreeSet<EdgeIndex>,
    ) -> Option<Path> {
        if from != to {
            let hops = self.hops_to(to);
            if hops[from.index()] == u16::MAX {
                return None; // no path at all, whatever has room
            }
            let shortest = self.search(from, to, bandwidth, banned_nodes, banned_edges, Some(hops));
            if shortest.is_some() {
                return shortest;
            }
        }
        self.search(from, to, bandwidth, banned_nodes, banned_edges, None)
    }

    /// Every switch's hop count to `to` (see `hops_to`'s field), by a breadth-first
    /// search backwards from it.
    fn hops_to(&self, to: NodeIndex) -> &[u16] {
        self.hops_to[to.index()].get_or_init(|| {
            let mut hops = vec![u16::MAX; self.radj.len()];
            hops[to.index()] = 0;
            let mut frontier = vec![to];
            let mut next = Vec::new();
            let mut d = 0u16;
            while !frontier.is_empty() {
                d = d.saturating_add(1);
                for &v in &frontier {
                    for &u in &self.radj[v.index()] {
                        if hops[u.index()] == u16::MAX {
                            hops[u.index()] = d;
                            next.push(u);
                        }
                    }
                }
                frontier.clear();
                std::mem::swap(&mut frontier, &mut next);
            }
            hops.into_boxed_slice()
        })
    }

    /// [`RouteObject::best_path`]'s breadth-first search, over every link or, with
    /// `closer`, only over links to a switch one hop closer to `to`.
    fn search(
        &self,
        from: NodeIndex,
        to: NodeIndex,
        bandwidth: f64,
        banned_nodes: &[NodeIndex],
        banned_edges: &BTreeSet<EdgeIndex>,
        closer: Option<&[u16]>,
    ) -> Option<Path> {
        if from == to {
            return Some(Path {
                nodes: vec![from],
                edges: Vec::new(),
                bottleneck: f64::INFINITY,
                key: Vec::new(),
            });
        }
        /// A candidate label: the path to `u` of rank `rank` in its hop count, extended
        /// by `edge` out of `u`'s `port`.
        #[derive(Clone, Copy)]
        struct Label {
            bottleneck: f64,
            rank: u32,
            u: NodeIndex,
            port: u16,
            edge: EdgeIndex,
        }
        impl Label {
            /// Whether this label ranks before `other` ([`Path::cmp_rank`] for two paths
            /// of one hop count: the wider, then the smaller key).
            fn before(&self, other: &Label) -> bool {
                self.bottleneck
                    .total_cmp(&other.bottleneck)
                    .reverse()
                    .then_with(|| {
                        (self.rank, self.u, self.port).cmp(&(other.rank, other.u, other.port))
                    })
                    .is_lt()
            }
        }
        let n = self.graph.node_count();
        let mut settled = vec![false; n];
        for b in banned_nodes {
            settled[b.index()] = true;
        }
        settled[from.index()] = true;
        // Each switch's label once settled: its path's last edge and bottleneck, and its
        // rank among the paths of its hop count.
        let mut label: Vec<Option<Label>> = vec![None; n];
        let mut bottleneck = vec![f64::INFINITY; n];
        let mut rank = vec![0u32; n];
        let mut frontier = vec![from];
        let mut reached: Vec<NodeIndex> = Vec::new();
        while !frontier.is_empty() {
            reached.clear();
            for &u in &frontier {
                for &(v, port, edge) in &self.adj[u.index()] {
                    if settled[v.index()]
                        || (!banned_edges.is_empty() && banned_edges.contains(&edge))
                        || closer.is_some_and(|h| h[v.index()].wrapping_add(1) != h[u.index()])
                    {
                        continue;
                    }
                    let free = self.free(u, port);
                    // A NaN (a broken report) is never enough.
                    if free.is_nan() || free < bandwidth {
                        continue;
                    }
                    let cand = Label {
                        bottleneck: bottleneck[u.index()].min(free),
                        rank: rank[u.index()],
                        u,
                        port,
                        edge,
                    };
                    match &label[v.index()] {
                        Some(best) if !cand.before(best) => {}
                        Some(_) => label[v.index()] = Some(cand),
                        None => {
                            label[v.index()] = Some(cand);
                            reached.push(v);
                        }
                    }
                }
            }
            for &v in &reached {
                settled[v.index()] = true;
                bottleneck[v.index()] = label[v.index()].expect("reached").bottleneck;
            }
            if label[to.index()].is_some() {
                let mut nodes = vec![to];
                let mut edges = Vec::new();
                let mut key = Vec::new();
                let mut at = to;
                while at != from {
                    let l = label[at.index()].expect("on the path");
                    nodes.push(l.u);
                    edges.push(l.edge);
                    key.push((l.u, l.port));
                    at = l.u;
                }
                nodes.reverse();
                edges.reverse();
                key.reverse();
                return Some(Path {
                    nodes,
                    edges,
                    bottleneck: bottleneck[to.index()],
                    key,
                });
            }
            // The next hop count's paths in key order: their ranks.
            reached.sort_unstable_by_key(|v| {
                let l = label[v.index()].expect("reached");
                (l.rank, l.u, l.port)
            });
            for (i, v) in reached.iter().enumerate() {
                rank[v.index()] = i as u32;
            }
            std::mem::swap(&mut frontier, &mut reached);
        }
        None
    }

    /// [`RouteObject::best_path`] as it was written first, copying a path for every edge
    /// tried: the reference the tests hold the faster one to.
    #[cfg(test)]
    fn best_path_by_copies(
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

    /// Checks [`RouteObject::best_path`] against [`RouteObject::best_path_by_copies`]
    /// between every two switches, with nothing banned, with each switch banned in turn
    /// and with every `m`-th edge banned; panics on the first difference. For tests.
    #[cfg(test)]
    pub(super) fn check_best_paths(&self, bandwidth: f64, m: usize) -> usize {
        let nodes: Vec<NodeIndex> = self.graph.node_indices().collect();
        let every_m: BTreeSet<EdgeIndex> = self
            .graph
            .edge_indices()
            .filter(|e| e.index() % m.max(1) == 0)
            .collect();
        let none = BTreeSet::new();
        let mut found = 0;
        for &a in &nodes {
            for &b in &nodes {
                let mut cases: Vec<(Vec<NodeIndex>, &BTreeSet<EdgeIndex>)> =
                    vec![(Vec::new(), &none), (Vec::new(), &every_m)];
                cases.extend(nodes.iter().map(|&c| (vec![c], &none)));
                for (banned, edges) in cases {
                    let fast = self.best_path(a, b, bandwidth, &banned, edges);
                    let slow = self.best_path_by_copies(a, b, bandwidth, &banned, edges);
                    let view = |p: &Option<Path>| {
                        p.as_ref().map(|p| {
                            (
                                p.nodes.clone(),
                                p.edges.clone(),
                                p.bottleneck.to_bits(),
                                p.key.clone(),
                            )
                        })
                    };
                    assert_eq!(
                        view(&fast),
                        view(&slow),
                        "{a:?} -> {b:?} at {bandwidth}, banned {banned:?} and {edges:?}"
                    );
                    found += usize::from(fast.is_some());
                }
            }
        }
        found
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

    #[inline]
    fn free(&self, switch: NodeIndex, port: u16) -> f64 {
        let n = &self.graph[switch];
        if !n.free.is_empty() {
            return n
                .free
                .get(usize::from(port))
                .copied()
                .unwrap_or(f64::NEG_INFINITY);
        }
        n.ports
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
