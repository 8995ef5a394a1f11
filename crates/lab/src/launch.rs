//! The launcher every live experiment stands on: a network from a topology on loopback
//! (paper 000 §III's testbed, paper 001 §4's chain), its name service, a client of each
//! switch server, and the route object discovered from them. `atmlab demo`, `atmlab up`,
//! `atmlab soak` and the xbind and ReTINA reproductions all start their network here,
//! so certificates, `net.json` and the route object are made one way.
//!
//! Also here: the manager presets the experiments compare (sequential, xbind with a fixed
//! T and a cache large enough for the demo's loads, adaptive T).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use atmlab_control::cm::adaptive::Regions;
use atmlab_control::cm::core::{CallError, CmConfig, CmKind};
use atmlab_control::cm::live::{self, CallInfo, CmHandle};
use atmlab_control::cm::routes::CachedRouter;
use atmlab_control::net::{NetSecurity, Network, Topology};
use atmlab_control::route::RouteObject;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::tls::TlsIdentity;

use crate::LabError;

/// The demo's network: four switches in a ring, host `a` on s1, host `b` on s3, so a call
/// a -> b crosses three switches by either of two routes.
pub const DEFAULT_TOPOLOGY: &str = r#"
name = "demo-ring4"
[defaults]
link_rate = "622.08 Mb/s"
buffer_cells = 4096
vci = [32, 65535]
[[switch]]
name = "s1"
ports = 3
[[switch]]
name = "s2"
ports = 3
[[switch]]
name = "s3"
ports = 3
[[switch]]
name = "s4"
ports = 3
[[link]]
a = "s1:1"
b = "s2:1"
[[link]]
a = "s2:2"
b = "s3:1"
[[link]]
a = "s3:2"
b = "s4:1"
[[link]]
a = "s4:2"
b = "s1:2"
[[host]]
name = "a"
at = "s1:0"
[[host]]
name = "b"
at = "s3:0"
"#;

/// The demo's topology, parsed.
pub fn default_topology() -> Result<Topology, LabError> {
    Ok(Topology::parse(DEFAULT_TOPOLOGY, "the demo topology")?)
}

/// Every (switch, port) the route between two hosts uses: the caches to warm.
pub fn route_ports(
    route: &Mutex<RouteObject>,
    source: &str,
    destination: &str,
) -> Vec<(String, u16)> {
    let Ok(r) = route
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .route(source, destination, 1.0)
    else {
        return Vec::new();
    };
    let mut v: Vec<(String, u16)> = r
        .hops
        .first()
        .map(|h| (h.switch.clone(), h.in_port))
        .into_iter()
        .collect();
    v.extend(r.hops.iter().map(|h| (h.switch.clone(), h.out_port)));
    v
}

pub use atmlab_control::cm::routes::ROUTE_CACHE_TTL;

/// An xbind manager with T fixed and a cache large enough that calls at the demo's
/// loads hit (the paper's Fig. 6 runs had "> 200" cached): 256 reserved at a time,
/// refilled below 64, trimmed above 2,048.
pub fn xbind_config(threshold: u32) -> CmConfig {
    CmConfig {
        threshold,
        cache_fill: 256,
        cache_low: 64,
        cache_max: 2048,
        ..CmConfig::new(CmKind::Xbind)
    }
}

/// [`xbind_config`] with T following the arrival rate (`Regions::default()`).
pub fn xbind_adaptive_config() -> CmConfig {
    CmConfig {
        adaptive: Some(Regions::default()),
        ..xbind_config(1)
    }
}

/// The managers the demo compares: sequential, xbind with T = 1, 4, 10, and adaptive;
/// each with the live managers' overload control (`cm serve --setup-target`'s default).
pub fn managers() -> Vec<(String, CmConfig)> {
    let mut v = vec![("sequential".to_string(), CmConfig::new(CmKind::Sequential))];
    for t in [1, 4, 10] {
        v.push((format!("xbind T={t}"), xbind_config(t)));
    }
    v.push(("xbind adaptive".to_string(), xbind_adaptive_config()));
    for (_, c) in &mut v {
        c.setup_target = Some(LIVE_SETUP_TARGET);
    }
    v
}

/// The setup latency the live managers' overload control keeps to (`--setup-target`).
pub const LIVE_SETUP_TARGET: atmlab_core::time::Duration =
    atmlab_core::time::Duration::from_millis(10);

fn err(what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::run("the lab", format!("{what}: {e}"))
}

/// How to start a [`Lab`].
#[derive(Debug, Clone)]
pub struct LabSpec {
    /// The network.
    pub topology: Topology,
    /// The certificate directory (the CA and any missing certificate are made there on
    /// first use), or `None` for plain text.
    pub certs: Option<PathBuf>,
    /// The certificate the lab's own clients present (switch clients, route object), by
    /// role and name: `admin`, or the manager's owner with the role `cm` (`atmlab up`).
    pub identity: atmlab_rpc::tls::Subject,
    /// Where `net.json` goes (made if missing).
    pub data_dir: PathBuf,
    /// Where each switch server keeps its journal (`NAME.table`, made if missing), so
    /// that its table survives the process (`atmlab up`); `None` for a lab that starts
    /// empty every time (the demo, the reproductions, tests).
    pub journals: Option<PathBuf>,
}

impl LabSpec {
    /// `topology` with its certificates under `data_dir/certs` (or plain text), the
    /// clients acting as `admin`: what the demo and the reproductions use.
    pub fn in_data_dir(topology: Topology, data_dir: &Path, insecure: bool) -> LabSpec {
        LabSpec {
            topology,
            certs: (!insecure).then(|| data_dir.join("certs")),
            identity: atmlab_rpc::tls::Subject::new(atmlab_rpc::tls::Role::Admin, "admin"),
            data_dir: data_dir.to_owned(),
            journals: None,
        }
    }
}

/// A running laboratory: a network on loopback, its route object, and a client of each
/// switch server (the pieces the demo, `atmlab up` and the reproductions share).
pub struct Lab {
    /// The switch servers and the name service.
    pub net: Network,
    /// The route object, refreshed in the background.
    pub route: Arc<Mutex<RouteObject>>,
    /// A gRPC client of each switch server, by name.
    pub clients: Vec<(String, GrpcSwitch)>,
    /// The identity the clients present (`None` in plain text).
    pub identity: Option<TlsIdentity>,
    /// The certificate directory (`None` in plain text).
    pub certs: Option<PathBuf>,
    refresher: tokio::task::JoinHandle<()>,
}

impl Lab {
    /// Starts [`DEFAULT_TOPOLOGY`] with its certificates under `data_dir/certs` (made
    /// on first use) or, `insecure`, in plain text.
    pub async fn up(
        data_dir: &Path,
        insecure: bool,
        say: &mut impl FnMut(&str),
    ) -> Result<Lab, LabError> {
        Lab::up_with(default_topology()?, data_dir, insecure, say).await
    }

    /// [`Lab::up`] on another topology; certificates missing from `data_dir/certs` (a
    /// switch the demo's ring does not have) are issued from the same CA.
    pub async fn up_with(
        topo: Topology,
        data_dir: &Path,
        insecure: bool,
        say: &mut impl FnMut(&str),
    ) -> Result<Lab, LabError> {
        Lab::start(LabSpec::in_data_dir(topo, data_dir, insecure), say).await
    }

    /// Starts the network `spec` describes, writes `net.json`, connects a client to
    /// every switch server and discovers the route object.
    pub async fn start(spec: LabSpec, say: &mut impl FnMut(&str)) -> Result<Lab, LabError> {
        if let Some(dir) = &spec.certs {
            let mut subjects = atmlab_control::net::certificate_subjects(&spec.topology);
            if !subjects.contains(&spec.identity) {
                subjects.push(spec.identity.clone());
            }
            atmlab_rpc::tls::ensure_certs(dir, &subjects)?;
        }
        std::fs::create_dir_all(&spec.data_dir)
            .map_err(|e| err("creating the data directory", e))?;
        if let Some(dir) = &spec.journals {
            std::fs::create_dir_all(dir).map_err(|e| {
                err(
                    &format!("creating the journal directory {}", dir.display()),
                    e,
                )
            })?;
        }
        let net = Network::up(
            spec.topology.clone(),
            &NetSecurity {
                certs: spec.certs.clone(),
            },
            spec.journals.as_deref(),
        )
        .await?;
        let lab_json = spec.data_dir.join("net.json");
        std::fs::write(
            &lab_json,
            serde_json::to_string_pretty(&net.to_json()).unwrap_or_default(),
        )
        .map_err(|e| err("writing net.json", e))?;
        say(&format!(
            "network up: {} switch servers (gRPC + raw TCP, {}), name service at {}",
            net.switches.len(),
            if spec.certs.is_some() {
                "mutual TLS"
            } else {
                "plain text"
            },
            net.names_addr
        ));
        let identity = match &spec.certs {
            Some(d) => match atmlab_rpc::tls::TlsFiles::in_dir(d, &spec.identity.name).load() {
                Ok(id) => Some(id),
                Err(e) => {
                    net.down().await;
                    return Err(e.into());
                }
            },
            None => None,
        };
        let clients = match net.switch_clients(identity.as_ref()).await {
            Ok(c) => c,
            Err(e) => {
                net.down().await;
                return Err(e.into());
            }
        };
        let (route, refresher) =
            match atmlab_control::route::start(&net.names_url(), identity.as_ref()).await {
                Ok(r) => r,
                Err(e) => {
                    net.down().await;
                    return Err(e.into());
                }
            };
        Ok(Lab {
            net,
            route,
            clients,
            identity,
            certs: spec.certs,
            refresher,
        })
    }

    /// xbind's route cache over the lab's route object.
    pub fn router(&self) -> CachedRouter {
        CachedRouter::new(self.route.clone(), ROUTE_CACHE_TTL)
    }

    /// Starts a connection manager over the lab's switches, its caches warmed on the
    /// route a -> b.
    pub async fn manager(&self, config: CmConfig) -> Result<live::CmHandle, LabError> {
        let warm = route_ports(&self.route, "a", "b");
        let cm = live::start(config, self.clients.clone(), Box::new(self.router()))
            .map_err(|e| err("starting a manager", e.message))?;
        cm.prefill(warm)
            .await
            .map_err(|e| err("warming the caches", e.message))?;
        tokio::time::sleep(StdDuration::from_millis(50)).await;
        Ok(cm)
    }

    /// The audit after a manager shut down: no connection and no reservation is left on
    /// any switch.
    pub async fn audit(&self, name: &str) -> Result<(), LabError> {
        for (sw, c) in &self.clients {
            let left = c.connections().await?.len();
            let held = c.reservations().await?;
            if left > 0 || !held.is_empty() {
                let mut per_port: std::collections::BTreeMap<u16, usize> = Default::default();
                for r in &held {
                    *per_port.entry(r.port.0).or_default() += 1;
                }
                return Err(err(
                    "audit",
                    format!(
                        "{name} left {left} connections and {} reservations on {sw} (by port: {per_port:?})",
                        held.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Runs `f` on the lab, then stops the lab whatever `f` returned.
    pub async fn within<T>(
        self,
        f: impl AsyncFnOnce(&Lab) -> Result<T, LabError>,
    ) -> Result<T, LabError> {
        let result = f(&self).await;
        self.down().await;
        result
    }

    /// Stops everything.
    pub async fn down(self) {
        self.refresher.abort();
        self.net.down().await;
    }
}

/// Sets up a CBR call from host `a` to host `b` (three switches apart on the default
/// ring) at `pcr` cells/s, tagged `tag`.
pub async fn call_a_to_b(cm: &CmHandle, pcr: f64, tag: &str) -> Result<CallInfo, CallError> {
    cm.add("a", "b", TrafficDescriptor::cbr(CellRate(pcr)), 0.0, tag)
        .await
}
