//! The Layer Network Coordinator (paper 001 §1.2.1): the top of TINA's connection
//! management for one layer network. It takes a connection request, gets the route from
//! the same [`Router`] the other managers use, and hands the whole route to the root
//! NML-CP as one subnetwork connection; it keeps the connections it set up.
//!
//! [`start`] brings a deployment up: one EML-CP per switch and one NML-CP per subnetwork
//! of the [`hierarchy`], each serving `atmlab.v1.ConnectionPerformer` on its own loopback
//! endpoint (mutual TLS when given an identity), children first, so every parent can
//! connect to its children.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use atmlab_fabric::live::convert as cv;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_performer_client::ConnectionPerformerClient;
use atmlab_rpc::v1::connection_performer_server::{ConnectionPerformer, ConnectionPerformerServer};
use tonic::Status;
use tonic::transport::Channel;

use super::partition::hierarchy;
use super::performer::{Child, EmlCp, NmlCp};
use super::{Counts, Invocations, TinaConfig, iface};
use crate::ControlError;
use crate::clock::LiveClock;
use crate::cm::live::Router;
use crate::cm::service::call_status;

/// Counters of the LNC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LncStats {
    /// Connections set up.
    pub established: u64,
    /// Connections released.
    pub released: u64,
    /// Setups refused for lack of resources (route or admission).
    pub blocked: u64,
    /// Setups failed otherwise.
    pub failed: u64,
    /// Setups refused part-way and rolled back below.
    pub rollbacks: u64,
    /// Contracts changed.
    pub modified: u64,
}

struct Held {
    info: pb::ConnectionInfo,
    snc: u64,
}

/// The Layer Network Coordinator.
pub struct Lnc {
    router: Mutex<Box<dyn Router>>,
    clock: LiveClock,
    root: ConnectionPerformerClient<Channel>,
    config: TinaConfig,
    totals: Invocations,
    connections: Mutex<BTreeMap<u64, Held>>,
    next: AtomicU64,
    stats: Mutex<LncStats>,
}

fn sum(m: &HashMap<String, u64>) -> u64 {
    m.values().sum()
}

impl Lnc {
    /// The configuration it runs with.
    pub fn config(&self) -> &TinaConfig {
        &self.config
    }

    /// Remote invocations so far, by interface.
    pub fn invocations(&self) -> Counts {
        self.totals.snapshot()
    }

    /// The counters.
    pub fn stats(&self) -> LncStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, f: impl FnOnce(&mut LncStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Sets up a connection from `source` to `destination` (host names) with the
    /// cell-level contract `cell`. The reply's `invocations` counts every remote
    /// invocation the setup made, the LNC's own included.
    pub async fn add(
        &self,
        source: &str,
        destination: &str,
        cell: pb::CellQos,
        tag: &str,
    ) -> Result<pb::ConnectionInfo, Status> {
        let started = std::time::Instant::now();
        let (traffic, _) = cv::traffic(cell.traffic.as_ref())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let route = self.router.lock().unwrap_or_else(|e| e.into_inner()).route(
            self.clock.now(),
            source,
            destination,
            traffic.pcr.per_sec(),
        );
        let hops = match route {
            Ok(h) => h,
            Err(e) => {
                self.count(|s| {
                    if e.blocked() {
                        s.blocked += 1
                    } else {
                        s.failed += 1
                    }
                });
                return Err(call_status(&e));
            }
        };
        self.totals.count(iface::LNC_NML);
        super::performer::wire(self.config.invocation_delay).await;
        let setup = self
            .root
            .clone()
            .setup_snc(pb::SetupSncRequest {
                hops: hops
                    .iter()
                    .map(|h| pb::SncHop {
                        switch: h.switch.clone(),
                        in_port: u32::from(h.in_port),
                        out_port: u32::from(h.out_port),
                    })
                    .collect(),
                in_id: None,
                out_id: None,
                traffic: cell.traffic,
                buffer_cells: 0,
                tag: tag.to_string(),
            })
            .await;
        let rep = match setup {
            Ok(r) => r.into_inner(),
            Err(e) => {
                self.count(|s| {
                    if e.code() == tonic::Code::ResourceExhausted {
                        s.blocked += 1
                    } else {
                        s.failed += 1
                    }
                    s.rollbacks += 1;
                });
                return Err(e);
            }
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let info = pb::ConnectionInfo {
            id,
            source: source.to_string(),
            destinations: vec![destination.to_string()],
            source_vc: rep.in_id,
            destination_vcs: rep.out_id.into_iter().collect(),
            hops: rep.hops,
            cell_qos: Some(cell),
            setup_us: started.elapsed().as_micros() as u64,
            tag: tag.to_string(),
            invocations: u32::try_from(1 + sum(&rep.invocations)).unwrap_or(u32::MAX),
        };
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Held {
                    info: info.clone(),
                    snc: rep.snc,
                },
            );
        self.count(|s| s.established += 1);
        Ok(info)
    }

    fn snc_of(&self, id: u64) -> Result<u64, Status> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .map(|h| h.snc)
            .ok_or_else(|| Status::not_found(format!("no connection {id}")))
    }

    /// Releases a connection down the hierarchy.
    pub async fn delete(&self, id: u64) -> Result<(), Status> {
        let snc = self.snc_of(id)?;
        self.totals.count(iface::LNC_NML);
        super::performer::wire(self.config.invocation_delay).await;
        self.root
            .clone()
            .release_snc(pb::ReleaseSncRequest { snc })
            .await?;
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.count(|s| s.released += 1);
        Ok(())
    }

    /// Changes a connection's contract on every hop, admission first; refused, every
    /// hop keeps the old one.
    pub async fn modify(&self, id: u64, cell: pb::CellQos) -> Result<pb::ConnectionInfo, Status> {
        cv::traffic(cell.traffic.as_ref()).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let snc = self.snc_of(id)?;
        self.totals.count(iface::LNC_NML);
        super::performer::wire(self.config.invocation_delay).await;
        self.root
            .clone()
            .modify_snc(pb::ModifySncRequest {
                snc,
                traffic: cell.traffic,
            })
            .await?;
        let mut conns = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let held = conns
            .get_mut(&id)
            .ok_or_else(|| Status::not_found(format!("connection {id} was released meanwhile")))?;
        held.info.cell_qos = Some(cell);
        let info = held.info.clone();
        drop(conns);
        self.count(|s| s.modified += 1);
        Ok(info)
    }

    /// One connection.
    pub fn get(&self, id: u64) -> Option<pb::ConnectionInfo> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .map(|h| h.info.clone())
    }

    /// Every connection held.
    pub fn list(&self) -> Vec<pb::ConnectionInfo> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|h| h.info.clone())
            .collect()
    }

    /// The status as GetStatus answers it: kind "tina", the counters, and the remote
    /// invocations by interface (`messages` is their total, `commands` the switch
    /// operations among them).
    pub fn status(&self) -> pb::CmStatus {
        let s = self.stats();
        let inv = self.invocations();
        pb::CmStatus {
            kind: "tina".into(),
            established: s.established,
            released: s.released,
            blocked: s.blocked,
            failed: s.failed,
            active: self
                .connections
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len() as u64,
            messages: inv.values().sum(),
            commands: inv.get(iface::EML_SWITCH).copied().unwrap_or(0),
            rollbacks: s.rollbacks,
            recovery: vec![format!(
                "tina: {} setup, {} level(s) of NML-CP, fan-out {}",
                self.config.mode.name(),
                self.config.depth,
                self.config.fanout
            )],
            invocations: inv.into_iter().collect(),
            ..Default::default()
        }
    }
}

struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// A running TINA deployment: the LNC and the performers' servers.
pub struct Tina {
    /// The LNC.
    pub lnc: Arc<Lnc>,
    /// Every performer's endpoint: ("eml/s1", address), ("nml.0", address), ...
    pub endpoints: Vec<(String, SocketAddr)>,
    servers: Vec<Server>,
}

impl Tina {
    /// Stops every performer's server.
    pub async fn shutdown(self) {
        stop_all(self.servers).await;
    }
}

async fn stop_all(servers: Vec<Server>) {
    for s in servers {
        let _ = s.stop.send(());
        let _ = s.task.await;
    }
}

fn serve_err(e: impl std::fmt::Display) -> ControlError {
    ControlError::Serve {
        what: "a TINA connection performer",
        reason: e.to_string(),
    }
}

async fn serve<S: ConnectionPerformer>(
    svc: S,
    tls: Option<&TlsIdentity>,
) -> Result<(SocketAddr, Server), ControlError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(serve_err)?;
    let addr = listener.local_addr().map_err(serve_err)?;
    let incoming = atmlab_rpc::tls::grpc_incoming(listener, tls)?;
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        if let Err(e) = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .add_service(ConnectionPerformerServer::new(svc))
            .serve_with_incoming_shutdown(incoming, async {
                let _ = rx.await;
            })
            .await
        {
            tracing::error!(error = %e, "a TINA connection performer stopped");
        }
    });
    Ok((addr, Server { stop, task }))
}

async fn connect(
    addr: SocketAddr,
    tls: Option<&TlsIdentity>,
) -> Result<ConnectionPerformerClient<Channel>, ControlError> {
    let ch = atmlab_rpc::client_channel(&addr.to_string(), tls).await?;
    Ok(ConnectionPerformerClient::new(ch))
}

/// Starts a TINA deployment over `switches` (partitioned in the order given): an
/// EML-CP per switch, the NML-CP hierarchy of `config`, and the LNC over `router`. With
/// `tls`, every performer serves and calls with that identity (mutual TLS).
pub async fn start(
    config: TinaConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    tls: Option<&TlsIdentity>,
) -> Result<Tina, ControlError> {
    let names: Vec<String> = switches.iter().map(|(n, _)| n.clone()).collect();
    let tree = hierarchy(&names, config.depth, config.fanout)?;
    let totals = Invocations::default();
    let mut servers = Vec::new();
    let mut endpoints = Vec::new();
    let mut addr_of: HashMap<String, SocketAddr> = HashMap::new();
    let result: Result<ConnectionPerformerClient<Channel>, ControlError> = async {
        for (name, client) in &switches {
            let eml = EmlCp::new(
                name.clone(),
                client.raw(),
                config.owner.clone(),
                totals.clone(),
                config.invocation_delay,
            );
            let (addr, server) = serve(eml, tls).await?;
            servers.push(server);
            endpoints.push((format!("eml/{name}"), addr));
            addr_of.insert(format!("eml/{name}"), addr);
        }
        // Children before parents: reversed pre-order.
        for sub in tree.all().into_iter().rev() {
            let mut children = Vec::new();
            if sub.children.is_empty() {
                for sw in &sub.switches {
                    children.push(Child {
                        client: connect(addr_of[&format!("eml/{sw}")], tls).await?,
                        iface: iface::NML_EML,
                        delay: config.invocation_delay,
                    });
                }
            } else {
                for c in &sub.children {
                    children.push(Child {
                        client: connect(addr_of[&c.name], tls).await?,
                        iface: iface::NML_NML,
                        delay: config.invocation_delay,
                    });
                }
            }
            let nml = NmlCp::new(sub.clone(), children, config.mode, totals.clone());
            let (addr, server) = serve(nml, tls).await?;
            servers.push(server);
            endpoints.push((sub.name.clone(), addr));
            addr_of.insert(sub.name.clone(), addr);
        }
        connect(addr_of[&tree.name], tls).await
    }
    .await;
    let root = match result {
        Ok(r) => r,
        Err(e) => {
            stop_all(servers).await;
            return Err(e);
        }
    };
    let lnc = Lnc {
        router: Mutex::new(router),
        clock: LiveClock::start(),
        root,
        config,
        totals,
        connections: Mutex::new(BTreeMap::new()),
        next: AtomicU64::new(1),
        stats: Mutex::new(LncStats::default()),
    };
    Ok(Tina {
        lnc: Arc::new(lnc),
        endpoints,
        servers,
    })
}
