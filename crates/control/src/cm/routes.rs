//! The route cache of the xbind connection manager (paper 000 §II-C1(b): "routes cached
//! time out after 5 s"): one route per (source, destination) from the
//! [`RouteObject`], reused until it times out, so most setups need no route computation.
//! A cached route may be stale (a link filled up since): the switches' admission control
//! then refuses the call, and the shell tells the router ([`Router::refused`]), which
//! drops the entry so the next call routes afresh.
//!
//! Also here, pure like the cache: the [`Router`] trait a manager resolves routes with,
//! and [`StaticRouter`], a fixed table for tests and known topologies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use atmlab_core::time::{Duration, Instant};
use atmlab_fabric::error::ErrorKind;

use super::core::{CallError, HopSpec};
use crate::route::RouteObject;

/// Resolves a source-destination pair to a route (the route object with its cache).
pub trait Router: Send + 'static {
    /// The hops from `source`'s switch port to `destination`'s, with `bandwidth`
    /// (cells/s) free on every output port.
    fn route(
        &mut self,
        now: Instant,
        source: &str,
        destination: &str,
        bandwidth: f64,
    ) -> Result<Vec<HopSpec>, CallError>;

    /// The switches refused a call from `source` to `destination` for lack of room on
    /// the route given: a cache forgets it, so the next call routes afresh over the
    /// view (which may know of a path with room). Nothing by default.
    fn refused(&mut self, _source: &str, _destination: &str) {}
}

/// How long a cached route lives (the paper's 5 s).
pub const ROUTE_CACHE_TTL: Duration = Duration::from_secs(5);

/// A [`Router`] over a shared route object, with a per-pair cache.
#[derive(Debug)]
pub struct CachedRouter {
    route: Arc<Mutex<RouteObject>>,
    ttl: Duration,
    /// By source, then destination: looked up by the names as given, with no key built
    /// per call.
    cache: FxHashMap<String, FxHashMap<String, (Vec<HopSpec>, Instant)>>,
    /// Setups served from the cache.
    pub hits: u64,
    /// Setups that computed a route.
    pub misses: u64,
}

impl CachedRouter {
    /// A cache over `route` (refreshed elsewhere, e.g. by `route::spawn_refresher`) whose
    /// entries live `ttl`.
    pub fn new(route: Arc<Mutex<RouteObject>>, ttl: Duration) -> Self {
        CachedRouter {
            route,
            ttl,
            cache: FxHashMap::default(),
            hits: 0,
            misses: 0,
        }
    }

    /// Forgets the route of a pair (after a refusal on it).
    pub fn invalidate(&mut self, source: &str, destination: &str) {
        if let Some(m) = self.cache.get_mut(source) {
            m.remove(destination);
        }
    }
}

impl Router for CachedRouter {
    fn route(
        &mut self,
        now: Instant,
        source: &str,
        destination: &str,
        bandwidth: f64,
    ) -> Result<Vec<HopSpec>, CallError> {
        if let Some((hops, at)) = self.cache.get(source).and_then(|m| m.get(destination))
            && now.saturating_duration_since(*at) < self.ttl
        {
            self.hits += 1;
            return Ok(hops.clone());
        }
        self.misses += 1;
        let object = self.route.lock().unwrap_or_else(|e| e.into_inner());
        // The view is a snapshot (refreshed every so often; the managers do not record
        // their commits in it, see `crate::route`), so a port it shows full may have
        // room: where no path has the bandwidth free in the view, the route it would
        // take with the bandwidth free is asked of the switches, whose admission control
        // has the last word. The view only ranks the paths.
        let r = object
            .route(source, destination, bandwidth)
            .or_else(|e| match e {
                crate::ControlError::NoRoute { .. } => {
                    object.route(source, destination, 0.0).map_err(|_| e)
                }
                e => Err(e),
            })
            .map_err(|e| CallError {
                kind: atmlab_fabric::ErrorKind::from_code(e.kind().code()),
                message: e.to_string(),
            })?;
        let hops: Vec<HopSpec> = r
            .hops
            .into_iter()
            .map(|h| HopSpec {
                switch: h.switch.into(),
                in_port: h.in_port,
                out_port: h.out_port,
            })
            .collect();
        self.cache
            .entry(source.to_string())
            .or_default()
            .insert(destination.to_string(), (hops.clone(), now));
        Ok(hops)
    }

    fn refused(&mut self, source: &str, destination: &str) {
        self.invalidate(source, destination);
    }
}

/// A fixed table of routes, for tests and for topologies known in advance.
#[derive(Debug, Clone, Default)]
pub struct StaticRouter {
    routes: HashMap<(String, String), Vec<HopSpec>>,
}

impl StaticRouter {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route.
    pub fn with(mut self, source: &str, destination: &str, hops: Vec<HopSpec>) -> Self {
        self.routes
            .insert((source.into(), destination.into()), hops);
        self
    }
}

impl Router for StaticRouter {
    fn route(
        &mut self,
        _: Instant,
        source: &str,
        destination: &str,
        _: f64,
    ) -> Result<Vec<HopSpec>, CallError> {
        self.routes
            .get(&(source.to_string(), destination.to_string()))
            .cloned()
            .ok_or_else(|| CallError {
                kind: ErrorKind::InvalidArgument,
                message: format!("no route from {source:?} to {destination:?}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{NetworkView, PortState};

    fn port(port: u16, allocated: f64, peer: Option<(&str, u16)>) -> PortState {
        PortState {
            port,
            capacity: 1_000.0,
            allocated,
            peer: peer.map(|(s, p)| (s.to_string(), p)),
        }
    }

    /// s1 -- s2, host a on s1:0, b on s2:1; s1's trunk full in the view.
    fn view(trunk_allocated: f64, wired: bool) -> NetworkView {
        NetworkView {
            switches: vec![
                (
                    "s1".into(),
                    vec![
                        port(0, 0.0, None),
                        port(1, trunk_allocated, wired.then_some(("s2", 0))),
                    ],
                ),
                (
                    "s2".into(),
                    vec![port(0, 0.0, wired.then_some(("s1", 1))), port(1, 0.0, None)],
                ),
            ],
            hosts: vec![("a".into(), "s1".into(), 0), ("b".into(), "s2".into(), 1)],
        }
    }

    /// A port the (stale) view shows full does not refuse the call: the switches decide.
    #[test]
    fn a_full_port_in_the_view_leaves_the_decision_to_the_switches() {
        let object = Arc::new(Mutex::new(RouteObject::new(view(1_000.0, true)).unwrap()));
        let mut r = CachedRouter::new(object.clone(), ROUTE_CACHE_TTL);
        let hops = r.route(Instant::ZERO, "a", "b", 100.0).unwrap();
        assert_eq!(hops.len(), 2);
        // The route object alone refuses it.
        assert!(object.lock().unwrap().route("a", "b", 100.0).is_err());
        // Switches that are not connected still refuse.
        let object = Arc::new(Mutex::new(RouteObject::new(view(0.0, false)).unwrap()));
        let mut r = CachedRouter::new(object, ROUTE_CACHE_TTL);
        let e = r.route(Instant::ZERO, "a", "b", 100.0).unwrap_err();
        assert!(e.message.contains("not connected"), "{}", e.message);
    }

    /// A refusal drops the pair's cached route: the next call computes one over the view
    /// (a miss), where without the refusal it would reuse the cached one (a hit).
    #[test]
    fn a_refusal_drops_the_cached_route() {
        let object = Arc::new(Mutex::new(RouteObject::new(view(0.0, true)).unwrap()));
        let mut r = CachedRouter::new(object, ROUTE_CACHE_TTL);
        r.route(Instant::ZERO, "a", "b", 100.0).unwrap();
        r.route(Instant::ZERO, "a", "b", 100.0).unwrap();
        assert_eq!((r.hits, r.misses), (1, 1));
        Router::refused(&mut r, "b", "a");
        r.route(Instant::ZERO, "a", "b", 100.0).unwrap();
        assert_eq!((r.hits, r.misses), (2, 1), "another pair's refusal kept it");
        Router::refused(&mut r, "a", "b");
        r.route(Instant::ZERO, "a", "b", 100.0).unwrap();
        assert_eq!((r.hits, r.misses), (2, 2));
    }
}
