//! The route object's live shell (paper 000 §II-B: "Routes are updated asynchronously"):
//! the view read from the name service and each switch server's Describe, refreshed in
//! the background.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::tls::TlsIdentity;
use tokio::task::JoinHandle;

use super::object::{NetworkView, PortState, RouteObject};
use crate::ControlError;
use crate::names::{NameClient, ObjectKind};

/// How long [`discover`] waits for one switch's Describe before leaving it out.
const DESCRIBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The shortest refresh period [`spawn_refresher`] accepts: a floor against a busy loop.
const MIN_REFRESH_PERIOD: std::time::Duration = std::time::Duration::from_millis(10);

/// Builds the network view from the live network: every `SwitchServer` registered in the
/// name service (`switch/NAME`, with a `port.N = "udp:ADDR"` attribute per port), asked
/// for its Describe (in parallel, each within a time-out), and every `Host` (`host/NAME`,
/// attributes `switch` and `port`). A link is a port whose peer address is another
/// switch's `port.N` address.
///
/// A switch that cannot be reached, or a registration that cannot be read, is left out
/// and logged at `warn` (a link-state view lives with the switches it can see); only a
/// name service failure is an error.
///
/// Each call opens a channel to every switch; something that discovers again and again
/// keeps a [`Discoverer`], which keeps them.
pub async fn discover(
    names: &NameClient,
    tls: Option<&TlsIdentity>,
) -> Result<NetworkView, ControlError> {
    Discoverer::new(tls.cloned()).discover(names).await
}

/// [`discover`] again and again over the same channels: one per switch server (by its
/// name and address), opened at its first Describe and dropped when a Describe fails, so
/// a refresh a second costs each switch one request, not a TLS handshake.
#[derive(Debug, Clone)]
pub struct Discoverer {
    tls: Option<TlsIdentity>,
    channels: Arc<Mutex<HashMap<(String, String), GrpcSwitch>>>,
}

impl Discoverer {
    /// A discoverer with our identity (`None`: plain text).
    pub fn new(tls: Option<TlsIdentity>) -> Self {
        Discoverer {
            tls,
            channels: Arc::default(),
        }
    }

    /// The view now (see [`discover`]).
    pub async fn discover(&self, names: &NameClient) -> Result<NetworkView, ControlError> {
        discover_with(names, self).await
    }

    /// The channel to switch `name` at `address`, opened if this discoverer has none.
    async fn channel(&self, address: &str, name: &str) -> Result<GrpcSwitch, ControlError> {
        let key = (name.to_string(), address.to_string());
        if let Some(c) = self
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(c.clone());
        }
        // The switch registered as `name` must hold that switch's certificate.
        let expect = atmlab_rpc::tls::Expect::object(atmlab_rpc::tls::Role::Switch, name);
        let c = GrpcSwitch::new(atmlab_rpc::channel_to(address, self.tls.as_ref(), expect).await?);
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, c.clone());
        Ok(c)
    }

    /// Forgets the channel to `name` at `address` (its Describe failed).
    fn forget(&self, address: &str, name: &str) {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(name.to_string(), address.to_string()));
    }
}

async fn discover_with(
    names: &NameClient,
    discoverer: &Discoverer,
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
        let discoverer = discoverer.clone();
        set.spawn(async move {
            let described = describe(&discoverer, &object.address, &name).await;
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
    discoverer: &Discoverer,
    address: &str,
    name: &str,
) -> Result<atmlab_fabric::live::backend::Description, ControlError> {
    let switch = discoverer.channel(address, name).await?;
    let described = match tokio::time::timeout(DESCRIBE_TIMEOUT, switch.describe()).await {
        Ok(d) => d.map_err(ControlError::from),
        Err(_) => Err(ControlError::Call {
            call: "SwitchServer.Describe",
            kind: crate::ErrorKind::DeadlineExceeded,
            message: format!("no answer within {DESCRIBE_TIMEOUT:?}"),
        }),
    };
    if described.is_err() {
        // The next refresh opens a new channel (the switch may have moved or restarted).
        discoverer.forget(address, name);
    }
    described
}

/// Refreshes `route` from the live network every `period` (at least 10 ms; the first at
/// once), asynchronously, until the returned task is aborted. A failed refresh keeps the
/// old view and is logged at `warn`. With a registry that can be watched (etcd), a
/// change to it (a switch registered, or gone with its lease) refreshes at once too.
pub fn spawn_refresher(
    route: Arc<Mutex<RouteObject>>,
    names: NameClient,
    tls: Option<TlsIdentity>,
    period: std::time::Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let discoverer = Discoverer::new(tls);
        let mut tick = tokio::time::interval(period.max(MIN_REFRESH_PERIOD));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut changes = match names.watch().await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the registry; polling only");
                None
            }
        };
        loop {
            let changed = async {
                match changes.as_mut() {
                    Some(w) => w.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick.tick() => {}
                change = changed => match change {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "the registry's watch ended; polling only");
                        changes = None;
                    }
                    None => changes = None,
                },
            }
            match discoverer.discover(&names).await {
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
