//! A connection manager as a network object (paper 000 §II-C, Fig. 4: the connection
//! manager is a remote object that clients invoke; paper 001 §3: the TINA LNC behind
//! the same interface): a manager of any kind started over a set of switch servers,
//! registered in the name service as `cm/NAME` with a renewing lease, and serving
//! `atmlab.v1.ConnectionManager` until told to stop. `atmlab cm serve` and `atmlab up`
//! are thin shells over it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::Services;
use atmlab_rpc::tls::TlsIdentity;
use tokio::net::TcpListener;

use super::adaptive::Regions;
use super::core::CmConfig;
use super::live::{self, CmHandle, LiveOptions};
use super::routes::{CachedRouter, ROUTE_CACHE_TTL};
use super::service::{CmService, collocated_mapper};
use crate::ControlError;
use crate::names::{NameClient, ObjectInfo, ObjectKind, RenewalHandle};
use crate::qos::QosMapper;
use crate::route::RouteObject;
use crate::tina::TinaConfig;
use crate::tina::lnc::Tina;
use crate::tina::service::TinaService;

/// Which manager to run.
#[derive(Debug, Clone)]
pub enum ManagerKind {
    /// The sequential or xbind manager ([`super::core::CmCore`]), with its shell options
    /// (journal, faults).
    Core(CmConfig, LiveOptions),
    /// TINA's LNC over NML-CPs over one EML-CP per switch, each performer a gRPC server
    /// of its own, with its journal options (journal, release strays, adopt).
    Tina(TinaConfig, LiveOptions),
}

/// How long the manager's registration lives without renewal.
const LEASE: StdDuration = StdDuration::from_secs(10);

enum Running {
    Core(CmHandle),
    Tina(Tina),
}

/// A manager started, registered and listening, not yet serving (see
/// [`ManagerServer::serve`]).
pub struct ManagerServer {
    running: Running,
    /// The accept loop, made as soon as the port is bound (a TLS configuration error
    /// shows before the start-up audit), its counters readable before and while it
    /// serves ([`ManagerServer::tls_stats`]).
    incoming: atmlab_rpc::tls::Incoming,
    registration: RenewalHandle,
    /// The manager's claim on its owner name (`owner/OWNER`), held while it runs.
    claim: Option<RenewalHandle>,
    /// Told each setup's time from request to answer, when set (the metrics'
    /// histogram, `atmlab up --metrics`).
    setup_observer: Option<super::service::SetupObserver>,
    /// Where the manager listens, `http://` or `https://`.
    pub url: String,
    /// What the start-up audit against the journal found and did (any kind, with a
    /// journal).
    pub recovery: Vec<String>,
    /// TINA: every performer's name and endpoint.
    pub performers: Vec<(String, SocketAddr)>,
}

/// A gRPC client of every switch server the name service lists (of those in `only`,
/// when given), by switch name, in the order listed.
pub async fn switch_clients(
    names: &NameClient,
    only: &[String],
    tls: Option<&TlsIdentity>,
) -> Result<Vec<(String, GrpcSwitch)>, ControlError> {
    let mut clients = Vec::new();
    for (obj, _) in names.list(Some(ObjectKind::SwitchServer)).await? {
        let name = obj.name.trim_start_matches("switch/").to_string();
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let expect = atmlab_rpc::tls::Expect::object(atmlab_rpc::tls::Role::Switch, name.as_str());
        let ch = atmlab_rpc::channel_to(&obj.address, tls, expect)
            .await
            .map_err(|e| ControlError::Serve {
                what: "the connection manager",
                reason: format!("connecting to {}: {e}", obj.name),
            })?;
        clients.push((name, GrpcSwitch::new(ch)));
    }
    Ok(clients)
}

/// Claims `owner/OWNER` for the manager at `url`. A claim held at another address is
/// waited out for one lease (a manager killed and restarted on a new port finds its own
/// old claim, which lapses); still held after that, another manager is running for this
/// owner, and the start is refused naming it.
async fn claim_owner(
    names: &NameClient,
    owner: &str,
    url: &str,
) -> Result<RenewalHandle, ControlError> {
    let object = ObjectInfo::new(
        format!("owner/{owner}"),
        ObjectKind::OwnerClaim,
        url.to_string(),
    );
    let deadline = std::time::Instant::now() + LEASE + StdDuration::from_secs(2);
    let mut said = false;
    loop {
        match names.claim_and_renew(object.clone(), LEASE).await {
            Ok(h) => return Ok(h),
            Err(ControlError::Call { kind, message, .. })
                if kind.code() == 6 && std::time::Instant::now() < deadline =>
            {
                if !said {
                    tracing::warn!(%owner, %message, "owner held; waiting for its claim to lapse");
                    said = true;
                }
                tokio::time::sleep(StdDuration::from_millis(200)).await;
            }
            Err(e) => {
                return Err(ControlError::Serve {
                    what: "the connection manager",
                    reason: format!(
                        "owner {owner:?}: {e}; another manager acts for this owner: give this \
                         one its own --owner, or stop the other first"
                    ),
                });
            }
        }
    }
}

impl ManagerServer {
    /// Starts a manager of `kind` over `switches` (routing with the route object
    /// `route`, through xbind's route cache), binds `listen`, and registers it in the
    /// name service `names` as `cm/NAME`. With `tls`, the manager's listener, its
    /// clients of the switches and of the name service, and TINA's performers all use
    /// that identity.
    pub async fn start(
        kind: ManagerKind,
        mut switches: Vec<(String, GrpcSwitch)>,
        route: Arc<Mutex<RouteObject>>,
        names: &NameClient,
        name: &str,
        listen: SocketAddr,
        tls: Option<TlsIdentity>,
    ) -> Result<ManagerServer, ControlError> {
        // A manager acts for the owner its certificate names (issue 24): the switch
        // servers refuse a `cm` identity any other, so say so now, not at the first call.
        if let Some(subject) = tls.as_ref().and_then(TlsIdentity::subject) {
            let owner = match &kind {
                ManagerKind::Core(c, _) => c.owner.as_str(),
                ManagerKind::Tina(c, _) => c.owner.as_str(),
            };
            use atmlab_rpc::tls::Role;
            let refuse = match subject.role {
                Role::Cm if subject.name != owner => Some(format!(
                    "its certificate is {subject}, but its owner is {owner:?}: a manager \
                     acts only for the owner its certificate names (use --owner {:?}, or \
                     a certificate issued with `atmlab certs issue --role cm {owner}`)",
                    subject.name
                )),
                Role::Cm | Role::Admin => None,
                _ => Some(format!(
                    "its certificate is {subject}: only a cm (or admin) certificate may \
                     run a connection manager"
                )),
            };
            if let Some(reason) = refuse {
                return Err(ControlError::Serve {
                    what: "the connection manager",
                    reason,
                });
            }
        }
        // The port first: a manager that cannot serve must not have audited (and
        // repaired) the switches first.
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| ControlError::Serve {
                what: "the connection manager",
                reason: format!("binding {listen}: {e}"),
            })?;
        let addr = listener.local_addr().map_err(|e| ControlError::Serve {
            what: "the connection manager",
            reason: e.to_string(),
        })?;
        let incoming = atmlab_rpc::tls::grpc_incoming(listener, tls.as_ref())?;
        // --adopt follows connections over the links the route object knows.
        let network = route.lock().unwrap_or_else(|e| e.into_inner()).view();
        let router = Box::new(CachedRouter::new(route, ROUTE_CACHE_TTL));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        // One manager per owner: its name is claimed in the name service before the
        // start-up audit, which would otherwise release (as strays) the connections of
        // another manager running under the same owner (issue 24, item 2).
        let (owner, fence) = match &kind {
            ManagerKind::Core(config, o) => (&config.owner, o.fence),
            ManagerKind::Tina(config, o) => (&config.owner, o.fence),
        };
        // A leader elected for its owner (active and standby managers, issue 26 item 3)
        // holds the owner by its election: the dead leader's claim here would keep the
        // new one waiting for its lease.
        let claim = match fence {
            None => Some(claim_owner(names, owner, &url).await?),
            Some(_) => None,
        };
        let (running, recovery, performers) = match kind {
            ManagerKind::Core(config, mut options) => {
                if options.adopt && options.network.is_none() {
                    options.network = Some(network);
                }
                let (handle, recovery) = live::start_with(config, switches, router, options)
                    .await
                    .map_err(|e| ControlError::Serve {
                        what: "the connection manager",
                        reason: e.message,
                    })?;
                (Running::Core(handle), recovery, Vec::new())
            }
            ManagerKind::Tina(config, mut options) => {
                if options.adopt && options.network.is_none() {
                    options.network = Some(network);
                }
                // Subnetworks are contiguous runs of this order: s2 before s10.
                switches.sort_by_key(|(n, _)| {
                    let digits = n.trim_start_matches(|c: char| !c.is_ascii_digit());
                    (
                        n.len() - digits.len(),
                        digits.parse::<u64>().ok(),
                        n.clone(),
                    )
                });
                let tina =
                    crate::tina::lnc::start_with(config, switches, router, tls.as_ref(), &options)
                        .await?;
                let performers = tina.endpoints.clone();
                let recovery = tina.recovery.clone();
                (Running::Tina(tina), recovery, performers)
            }
        };
        let registration = names
            .register_and_renew(
                ObjectInfo::new(
                    format!("cm/{name}"),
                    ObjectKind::ConnectionManager,
                    url.clone(),
                ),
                LEASE,
            )
            .await?;
        Ok(ManagerServer {
            running,
            incoming,
            registration,
            claim,
            setup_observer: None,
            url,
            recovery,
            performers,
        })
    }

    /// The handle of a sequential or xbind manager (`None` for TINA), to read its
    /// status (the metrics).
    pub fn handle(&self) -> Option<CmHandle> {
        match &self.running {
            Running::Core(h) => Some(h.clone()),
            Running::Tina(_) => None,
        }
    }

    /// The counters of the manager's accept loop (connections accepted and refused).
    pub fn tls_stats(&self) -> atmlab_rpc::tls::IncomingStats {
        self.incoming.stats()
    }

    /// Has each setup's time, from the request's arrival to its answer, handed to
    /// `observer` (every kind).
    pub fn observe_setups(&mut self, observer: super::service::SetupObserver) {
        self.setup_observer = Some(observer);
    }

    /// TINA's LNC (`None` for the other kinds), to read its status (the metrics).
    pub fn lnc(&self) -> Option<Arc<crate::tina::lnc::Lnc>> {
        match &self.running {
            Running::Tina(t) => Some(t.lnc.clone()),
            Running::Core(_) => None,
        }
    }

    /// What TINA's LNC is configured as (`None` for the other kinds).
    pub fn tina_config(&self) -> Option<&TinaConfig> {
        match &self.running {
            Running::Tina(t) => Some(t.lnc.config()),
            Running::Core(_) => None,
        }
    }

    /// Serves `atmlab.v1.ConnectionManager` (user-level QoS mapped by a collocated QoS
    /// mapper) until `shutdown` resolves, then stops the manager (answering what is in
    /// flight) and withdraws its registration.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), ControlError> {
        let mapper = Some(collocated_mapper(QosMapper::default()));
        let routes = match &self.running {
            Running::Core(handle) => Services::new(
                CmService::new(handle.clone(), mapper, Regions::default())
                    .with_setup_observer(self.setup_observer.clone())
                    .into_server(),
            ),
            Running::Tina(tina) => Services::new(
                TinaService::new(tina.lnc.clone(), mapper)
                    .with_setup_observer(self.setup_observer.clone())
                    .into_server(),
            ),
        };
        let served =
            atmlab_rpc::serve_incoming("connection manager", self.incoming, routes, shutdown).await;
        match self.running {
            Running::Core(handle) => handle.shutdown().await,
            Running::Tina(tina) => tina.shutdown().await,
        }
        self.registration.stop().await;
        if let Some(claim) = self.claim {
            claim.stop().await;
        }
        Ok(served?)
    }
}
