//! What the dashboard shows, read from a running network as any client reads it: the
//! name service lists the switch servers, hosts and connection managers; the route
//! object's `discover` gives the topology with each port's admitted bandwidth; each
//! switch's Statistics its port counters; each manager's GetStatus and ListConnections
//! its calls. So `atmlab dashboard --names ADDR` sees any network, in process or across
//! machines, and needs no hook into the parts. Rates are counter differences between
//! two snapshots, over the time between them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use atmlab_control::cm::live::CmHandle;
use atmlab_control::names::{NameClient, ObjectKind};
use atmlab_rpc::tls::{Expect, Role, TlsIdentity};
use atmlab_rpc::v1 as pb;
use serde_json::{Value, json};
use tonic::transport::Channel;

use super::SmdsProbe;

/// How long one part may take to answer before the snapshot leaves it out.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the collector reads the network.
#[derive(Clone)]
pub struct DashboardSource {
    /// The name service's URL (`None`: no ATM network, e.g. `smds net up`).
    pub names_url: Option<String>,
    /// Our identity (an observer's or an admin's certificate; `None`: plain text).
    pub tls: Option<TlsIdentity>,
    /// The SMDS servers of this process, if any.
    pub smds: Option<SmdsProbe>,
    /// Managers of this process that serve no gRPC (the demo's), by name, each read
    /// through its handle; the demo adds each as it starts it.
    pub local: LocalManagers,
}

/// Managers read in process: see [`DashboardSource::local`].
pub type LocalManagers = std::sync::Arc<std::sync::Mutex<Vec<(String, CmHandle)>>>;

/// Counters of the last snapshot, for rates.
#[derive(Default)]
struct Previous {
    at: Option<Instant>,
    /// (switch, port) -> (cells in, cells out).
    ports: HashMap<(String, u32), (u64, u64)>,
    /// manager -> (established, blocked, setup seconds sum, setups timed).
    managers: HashMap<String, (u64, u64, f64, u64)>,
}

/// Builds snapshots, keeping channels and the last counters between them.
pub struct Collector {
    source: DashboardSource,
    names: Option<NameClient>,
    /// The topology's reader, keeping its channel to each switch between snapshots.
    discoverer: atmlab_control::route::Discoverer,
    switches: HashMap<String, pb::switch_server_client::SwitchServerClient<Channel>>,
    managers: HashMap<String, pb::connection_manager_client::ConnectionManagerClient<Channel>>,
    previous: Previous,
}

impl Collector {
    /// A collector reading `source`.
    pub fn new(source: DashboardSource) -> Collector {
        Collector {
            discoverer: atmlab_control::route::Discoverer::new(source.tls.clone()),
            source,
            names: None,
            switches: HashMap::new(),
            managers: HashMap::new(),
            previous: Previous::default(),
        }
    }

    /// One snapshot of the network, as the page reads it (see `index.html`). A part
    /// that does not answer is left out (and its channel dropped, to reconnect next time);
    /// a name service that does not answer leaves the ATM side empty.
    pub async fn snapshot(&mut self) -> Value {
        let now = Instant::now();
        let dt = self
            .previous
            .at
            .map(|t| (now - t).as_secs_f64())
            .filter(|d| *d > 0.0);
        let mut previous = std::mem::take(&mut self.previous);
        previous.at = Some(now);
        let mut next = Previous {
            at: Some(now),
            ..Previous::default()
        };
        let (switches, links, hosts, managers) = match self.atm(dt, &previous, &mut next).await {
            Ok(parts) => parts,
            Err(e) => {
                tracing::debug!(error = %e, "dashboard: the name service did not answer");
                self.names = None;
                (vec![], vec![], vec![], vec![])
            }
        };
        self.previous = next;
        let smds = self
            .source
            .smds
            .as_ref()
            .map_or(Value::Array(vec![]), |p| p());
        json!({
            "switches": switches,
            "links": links,
            "hosts": hosts,
            "managers": managers,
            "smds": smds,
        })
    }

    async fn names(&mut self, url: &str) -> Result<NameClient, atmlab_control::ControlError> {
        if let Some(n) = &self.names {
            return Ok(n.clone());
        }
        let n = NameClient::connect(url, self.source.tls.as_ref()).await?;
        self.names = Some(n.clone());
        Ok(n)
    }

    #[allow(clippy::type_complexity)] // reason: the snapshot's four lists, built together
    async fn atm(
        &mut self,
        dt: Option<f64>,
        previous: &Previous,
        next: &mut Previous,
    ) -> Result<(Vec<Value>, Vec<Value>, Vec<Value>, Vec<Value>), atmlab_control::ControlError>
    {
        let Some(url) = self.source.names_url.clone() else {
            return Ok((vec![], vec![], vec![], vec![]));
        };
        let names = self.names(&url).await?;
        let view = self.discoverer.discover(&names).await?;
        let registered = names.list(Some(ObjectKind::SwitchServer)).await?;
        let address: HashMap<String, String> = registered
            .into_iter()
            .map(|(o, _)| {
                let n = o.name.strip_prefix("switch/").unwrap_or(&o.name).to_owned();
                (n, o.address)
            })
            .collect();
        let rate = |now: u64, before: Option<u64>| match (dt, before) {
            (Some(dt), Some(b)) if now >= b => Some((now - b) as f64 / dt),
            _ => None,
        };
        // Per switch: its ports with their counters and rates.
        let mut switches = Vec::new();
        // (switch, port) -> (allocated, capacity, cells out per s), for the links.
        let mut port_use: HashMap<(String, u16), (f64, f64, f64)> = HashMap::new();
        for (name, ports) in &view.switches {
            let Some(addr) = address.get(name) else {
                continue;
            };
            let stats = self.statistics(name, addr).await;
            let connections = stats.as_ref().map_or(0, |s| s.connections.len());
            let mut rows = Vec::new();
            for p in ports {
                let s = stats
                    .as_ref()
                    .and_then(|s| s.ports.iter().find(|x| x.port == u32::from(p.port)));
                let key = (name.clone(), u32::from(p.port));
                let (cin, cout) = s.map_or((0, 0), |s| (s.cells_in, s.cells_out));
                let before = previous.ports.get(&key).copied();
                if s.is_some() {
                    next.ports.insert(key, (cin, cout));
                }
                let out_rate = rate(cout, before.map(|b| b.1));
                port_use.insert(
                    (name.clone(), p.port),
                    (p.allocated, p.capacity, out_rate.unwrap_or(0.0)),
                );
                rows.push(json!({
                    "port": p.port,
                    "capacity": p.capacity,
                    "allocated": p.allocated,
                    "peer": p.peer.as_ref().map(|(s, q)| format!("{s}:{q}")),
                    "cells_in": cin,
                    "cells_out": cout,
                    "cells_in_per_s": rate(cin, before.map(|b| b.0)),
                    "cells_out_per_s": out_rate,
                    "cells_hec_errors": s.map(|s| s.cells_hec_errors),
                    "cells_unknown": s.map(|s| s.cells_unknown),
                    "cells_discarded": s.map(|s| s.cells_discarded_clp1 + s.cells_discarded_full),
                    "queue_cells": s.map(|s| s.queue_cells),
                    "cells_policed": s.map(|s| s.cells_policed),
                    "datagrams_refused": s.map(|s| s.datagrams_refused),
                }));
            }
            switches.push(json!({
                "name": name,
                "address": addr,
                "connections": connections,
                "answered": stats.is_some(),
                "ports": rows,
            }));
        }
        // A duplex link: both directions' reservations and cells, summed.
        let links: Vec<Value> = view
            .links()
            .into_iter()
            .map(|(a, b)| {
                let ua = port_use.get(&a).copied().unwrap_or_default();
                let ub = port_use.get(&b).copied().unwrap_or_default();
                json!({
                    "a": format!("{}:{}", a.0, a.1),
                    "b": format!("{}:{}", b.0, b.1),
                    "allocated": ua.0 + ub.0,
                    "capacity": ua.1 + ub.1,
                    "cells_per_s": ua.2 + ub.2,
                })
            })
            .collect();
        let hosts: Vec<Value> = view
            .hosts
            .iter()
            .map(|(h, s, p)| json!({ "name": h, "switch": s, "port": p }))
            .collect();
        let managers = self.managers(&names, dt, previous, next).await?;
        Ok((switches, links, hosts, managers))
    }

    async fn statistics(&mut self, name: &str, addr: &str) -> Option<pb::StatisticsReply> {
        if !self.switches.contains_key(addr) {
            let expect = Expect::object(Role::Switch, name);
            let ch = atmlab_rpc::channel_to(addr, self.source.tls.as_ref(), expect)
                .await
                .ok()?;
            self.switches.insert(
                addr.to_owned(),
                pb::switch_server_client::SwitchServerClient::new(ch),
            );
        }
        let mut c = self.switches.get(addr)?.clone();
        let answer = tokio::time::timeout(
            ANSWER_TIMEOUT,
            c.statistics(pb::StatisticsRequest::default()),
        )
        .await;
        match answer {
            Ok(Ok(r)) => Some(r.into_inner()),
            _ => {
                self.switches.remove(addr);
                None
            }
        }
    }

    async fn managers(
        &mut self,
        names: &NameClient,
        dt: Option<f64>,
        previous: &Previous,
        next: &mut Previous,
    ) -> Result<Vec<Value>, atmlab_control::ControlError> {
        // (name, address, status, connections): the registered managers over gRPC,
        // then this process's own.
        let mut read = Vec::new();
        for (o, _) in names.list(Some(ObjectKind::ConnectionManager)).await? {
            let name = o.name.strip_prefix("cm/").unwrap_or(&o.name).to_owned();
            if let Some((status, list)) = self.manager(&o.address).await {
                read.push((name, o.address, status, list));
            }
        }
        let local: Vec<(String, CmHandle)> = self
            .source
            .local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for (name, h) in local {
            let answer = tokio::time::timeout(ANSWER_TIMEOUT, async {
                let s = h.status().await.ok()?;
                let l = h.list().await;
                Some((s, l))
            })
            .await;
            if let Ok(Some((s, l))) = answer {
                let status = atmlab_control::cm::service::pb_status(&s);
                let list = l.iter().map(atmlab_control::cm::service::pb_info).collect();
                read.push((name, "in process".to_owned(), status, list));
            }
        }
        let mut out = Vec::new();
        for (name, address, status, list) in read {
            out.push(Self::manager_json(
                name, address, &status, &list, dt, previous, next,
            ));
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)] // reason: one manager's reading and the rates' state
    fn manager_json(
        name: String,
        address: String,
        status: &pb::CmStatus,
        list: &[pb::ConnectionInfo],
        dt: Option<f64>,
        previous: &Previous,
        next: &mut Previous,
    ) -> Value {
        let before = previous.managers.get(&name).copied();
        let sum = status.setup_seconds_sum;
        next.managers.insert(
            name.clone(),
            (status.established, status.blocked, sum, status.setups_timed),
        );
        let per_s = |now: u64, then: Option<u64>| match (dt, then) {
            (Some(dt), Some(t)) if now >= t => Some((now - t) as f64 / dt),
            _ => None,
        };
        // The mean setup over the interval: the latency sum's growth over the setups
        // timed in it (a service that times its setups); else the mean of the setups
        // of the connections up now (a manager read in process).
        let mean_ms = before
            .and_then(|b| {
                let n = status.setups_timed.checked_sub(b.3)?;
                (n > 0).then(|| (sum - b.2) / n as f64 * 1e3)
            })
            .or_else(|| {
                (status.setups_timed == 0 && !list.is_empty()).then(|| {
                    list.iter().map(|c| c.setup_us as f64).sum::<f64>() / list.len() as f64 / 1e3
                })
            });
        let connections: Vec<Value> = list.iter().map(connection).collect();
        json!({
            "name": name,
            "address": address,
            "kind": status.kind,
            "setups": status.established,
            "releases": status.released,
            "blocked": status.blocked,
            "failed": status.failed,
            "setups_per_s": per_s(status.established, before.map(|b| b.0)),
            "blocked_per_s": per_s(status.blocked, before.map(|b| b.1)),
            "mean_setup_ms": mean_ms,
            "connections": connections,
        })
    }

    async fn manager(&mut self, addr: &str) -> Option<(pb::CmStatus, Vec<pb::ConnectionInfo>)> {
        if !self.managers.contains_key(addr) {
            // A manager's certificate names its owner, which its registration does not
            // say: any manager of the lab.
            let expect = Expect::Role(Role::Cm);
            let ch = atmlab_rpc::channel_to(addr, self.source.tls.as_ref(), expect)
                .await
                .ok()?;
            self.managers.insert(
                addr.to_owned(),
                pb::connection_manager_client::ConnectionManagerClient::new(ch),
            );
        }
        let mut c = self.managers.get(addr)?.clone();
        let both = async {
            let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
            let l = c
                .list_connections(pb::ListCmConnectionsRequest {})
                .await?
                .into_inner();
            Ok::<_, tonic::Status>((s, l.connections))
        };
        match tokio::time::timeout(ANSWER_TIMEOUT, both).await {
            Ok(Ok(r)) => Some(r),
            _ => {
                self.managers.remove(addr);
                None
            }
        }
    }
}

fn vc(v: Option<&pb::VcId>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{}/{}", v.vpi, v.vci))
}

/// A hop's outputs, `port:VPI/VCI` each: its one output, or one per branch.
pub fn hop_outs(h: &pb::HopInfo) -> Vec<String> {
    if h.branches.is_empty() {
        vec![format!("{}:{}", h.out_port, vc(h.out_id.as_ref()))]
    } else {
        h.branches
            .iter()
            .map(|b| format!("{}:{}", b.port, vc(b.id.as_ref())))
            .collect()
    }
}

/// One hop of a connection as JSON: the switch, its connection there, the input
/// `port:VPI/VCI` and every output (one per branch). What the page and
/// `atmlab cm ... --json` show.
pub fn hop_json(h: &pb::HopInfo) -> Value {
    let outs = hop_outs(h);
    json!({
        "switch": h.switch,
        "connection": h.connection,
        "in": format!("{}:{}", h.in_port, vc(h.in_id.as_ref())),
        "out": outs,
    })
}

/// A manager's connection as the page shows it: ends, rate, and hop by hop.
fn connection(i: &pb::ConnectionInfo) -> Value {
    let hops: Vec<Value> = i.hops.iter().map(hop_json).collect();
    let pcr = i
        .cell_qos
        .as_ref()
        .and_then(|q| q.traffic.as_ref())
        .map(|t| t.pcr);
    json!({
        "id": i.id,
        "source": i.source,
        "destinations": i.destinations,
        "pcr": pcr,
        "hops": hops,
    })
}
