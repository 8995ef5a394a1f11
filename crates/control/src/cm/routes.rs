//! The route cache of the xbind connection manager (paper 000 §II-C1(b): "routes cached
//! time out after 5 s"): one route per (source, destination) from the
//! [`RouteObject`], reused until it times out, so most setups need no route computation.
//! A cached route may be stale (a link filled up since): the switches' admission control
//! then refuses the call, and the entry is dropped so the next call routes afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use atmlab_core::time::{Duration, Instant};

use super::core::{CallError, HopSpec};
use super::live::Router;
use crate::route::RouteObject;

/// How long a cached route lives (the paper's 5 s).
pub const ROUTE_CACHE_TTL: Duration = Duration::from_secs(5);

/// A [`Router`] over a shared route object, with a per-pair cache.
#[derive(Debug)]
pub struct CachedRouter {
    route: Arc<Mutex<RouteObject>>,
    ttl: Duration,
    cache: HashMap<(String, String), (Vec<HopSpec>, Instant)>,
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
            cache: HashMap::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// Forgets the route of a pair (after a refusal on it).
    pub fn invalidate(&mut self, source: &str, destination: &str) {
        self.cache
            .remove(&(source.to_string(), destination.to_string()));
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
        let key = (source.to_string(), destination.to_string());
        if let Some((hops, at)) = self.cache.get(&key)
            && now.saturating_duration_since(*at) < self.ttl
        {
            self.hits += 1;
            return Ok(hops.clone());
        }
        self.misses += 1;
        let r = self
            .route
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .route(source, destination, bandwidth)
            .map_err(|e| CallError {
                kind: atmlab_fabric::ErrorKind::from_code(e.kind().code()),
                message: e.to_string(),
            })?;
        let hops: Vec<HopSpec> = r
            .hops
            .into_iter()
            .map(|h| HopSpec {
                switch: h.switch,
                in_port: h.in_port,
                out_port: h.out_port,
            })
            .collect();
        self.cache.insert(key, (hops.clone(), now));
        Ok(hops)
    }
}
