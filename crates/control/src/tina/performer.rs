//! The connection performers of TINA (paper 001 §1.2.1): the EML-CP, one per switch,
//! which sets up its switch's part of a connection through the switch server, and the
//! NML-CP, one per subnetwork, which splits its part over its children. Both serve the
//! one `atmlab.v1.ConnectionPerformer` interface (tina.proto), as TINA's EML-CP
//! specializes the NML-CP's subnetwork connection (SNC) interface, so a parent invokes a
//! child subnetwork and a switch alike.
//!
//! Every performer counts the remote invocations it makes, in the deployment's totals
//! ([`Invocations`]) and, for the call at hand, in its reply (summed from its children's
//! replies), so the LNC can say what one connection cost. A refused setup leaves nothing
//! in the subnetwork: each performer gives back what it reserved or committed before the
//! error goes up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_performer_client::ConnectionPerformerClient;
use atmlab_rpc::v1::connection_performer_server::ConnectionPerformer;
use atmlab_rpc::v1::switch_server_client::SwitchServerClient;
use tokio::task::JoinSet;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::partition::Subnetwork;
use super::{Counts, Invocations, SetupMode, iface};

/// The per-call invocation count of one performer: its own calls, and what its callees
/// reported.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
}

impl Tally {
    fn own(&mut self, shared: &Invocations, iface: &str) {
        shared.count(iface);
        *self.counts.entry(iface.to_string()).or_default() += 1;
    }

    fn absorb(&mut self, m: &HashMap<String, u64>) {
        super::merge(&mut self.counts, m);
    }

    fn into_map(self) -> HashMap<String, u64> {
        self.counts.into_iter().collect()
    }
}

/// TrimSnc keeps at least one hop: a cut before the first is a release.
fn keeps_a_hop(keep: u32) -> Result<(), Status> {
    if keep == 0 {
        return Err(Status::invalid_argument(
            "TrimSnc keeps at least one hop (release the SNC instead)",
        ));
    }
    Ok(())
}

/// Waits the emulated network round trip of one remote invocation (none when zero).
pub(crate) async fn wire(delay: Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}

fn one_vc(v: Option<&pb::VcId>, what: &str) -> Result<pb::VcId, Status> {
    v.copied()
        .ok_or_else(|| Status::internal(format!("{what}: no identifier in the reply")))
}

// ----- EML-CP ----------------------------------------------------------------------------

/// What an EML-CP holds for one subnetwork connection (one hop).
#[derive(Debug, Clone)]
struct EmlSnc {
    /// The switch connection; `None` once released there while the source's VC is
    /// still to be given back (a retried release does only that).
    connection: Option<u64>,
    /// The source's VC, reserved on the input port when the caller gave none: held for
    /// the connection's life (no other call can take it) and given back on release.
    source: Option<(u32, pb::VcId)>,
    traffic: pb::TrafficDescriptor,
}

/// The Element Management Layer Connection Performer of one switch: sets up, releases
/// and modifies its switch's cross-connects through the switch server (two-phase:
/// Reserve, then Commit).
pub struct EmlCp {
    switch: String,
    client: SwitchServerClient<Channel>,
    owner: String,
    totals: Invocations,
    delay: Duration,
    sncs: Mutex<HashMap<u64, EmlSnc>>,
    next: AtomicU64,
}

impl EmlCp {
    /// The EML-CP of `switch`, driving it through `client` as `owner`, each call to the
    /// switch after the emulated round trip `delay`.
    pub fn new(
        switch: String,
        client: SwitchServerClient<Channel>,
        owner: String,
        totals: Invocations,
        delay: Duration,
    ) -> Self {
        EmlCp {
            switch,
            client,
            owner,
            totals,
            delay,
            sncs: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }

    fn check(&self, switch: &str) -> Result<(), Status> {
        if switch == self.switch {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!(
                "the EML-CP of {} was asked about switch {switch:?}",
                self.switch
            )))
        }
    }

    /// Branches are added to and dropped from this EML-CP's own connections only.
    fn owns(&self, connection: u64) -> Result<(), Status> {
        let sncs = self.sncs.lock().unwrap_or_else(|e| e.into_inner());
        if sncs.values().any(|s| s.connection == Some(connection)) {
            Ok(())
        } else {
            Err(Status::not_found(format!(
                "{}: connection {connection} is not one this EML-CP set up",
                self.switch
            )))
        }
    }

    async fn reserve(&self, t: &mut Tally, port: u32) -> Result<pb::VcId, Status> {
        t.own(&self.totals, iface::EML_SWITCH);
        wire(self.delay).await;
        let r = self
            .client
            .clone()
            .reserve(pb::ReserveRequest {
                port,
                count: 1,
                owner: self.owner.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        one_vc(r.ids.first(), "Reserve")
    }

    async fn unreserve(&self, t: &mut Tally, port: u32, id: pb::VcId) -> Result<(), Status> {
        t.own(&self.totals, iface::EML_SWITCH);
        wire(self.delay).await;
        self.client
            .clone()
            .unreserve(pb::UnreserveRequest {
                port,
                ids: vec![id],
                owner: self.owner.clone(),
            })
            .await?;
        Ok(())
    }

    /// Gives back what a refused setup had reserved itself; a failure here can only be
    /// logged (the refusal is what the caller hears).
    async fn give_back(&self, t: &mut Tally, held: &[(u32, pb::VcId)]) {
        for &(port, id) in held {
            if let Err(e) = self.unreserve(t, port, id).await {
                tracing::warn!(switch = %self.switch, port, error = %e, "EML-CP: giving back a reservation failed");
            }
        }
    }
}

#[tonic::async_trait]
impl ConnectionPerformer for EmlCp {
    async fn setup_snc(
        &self,
        r: Request<pb::SetupSncRequest>,
    ) -> Result<Response<pb::SetupSncReply>, Status> {
        let r = r.into_inner();
        let [hop] = r.hops.as_slice() else {
            return Err(Status::invalid_argument(format!(
                "the EML-CP of {} sets up one hop, not {}",
                self.switch,
                r.hops.len()
            )));
        };
        self.check(&hop.switch)?;
        let traffic = r
            .traffic
            .ok_or_else(|| Status::invalid_argument("no traffic descriptor"))?;
        let mut t = Tally::default();
        // What this call reserves itself, to give back if it is refused.
        let mut held: Vec<(u32, pb::VcId)> = Vec::new();
        let in_id = match r.in_id {
            Some(v) => v,
            None => {
                let v = self.reserve(&mut t, hop.in_port).await?;
                held.push((hop.in_port, v));
                v
            }
        };
        let out_id = match r.out_id {
            Some(v) => v,
            None => match self.reserve(&mut t, hop.out_port).await {
                Ok(v) => {
                    held.push((hop.out_port, v));
                    v
                }
                Err(e) => {
                    self.give_back(&mut t, &held).await;
                    return Err(e);
                }
            },
        };
        t.own(&self.totals, iface::EML_SWITCH);
        wire(self.delay).await;
        let committed = self
            .client
            .clone()
            .commit(pb::CommitRequest {
                kind: pb::ConnectionKind::Vc as i32,
                in_port: hop.in_port,
                in_id: Some(in_id),
                branches: vec![pb::Branch {
                    port: hop.out_port,
                    id: Some(out_id),
                }],
                traffic: Some(traffic),
                buffer_cells: r.buffer_cells,
                owner: self.owner.clone(),
                replenish: 0,
                tag: r.tag.clone(),
            })
            .await;
        let connection = match committed {
            Ok(c) => c.into_inner().connection,
            Err(e) => {
                self.give_back(&mut t, &held).await;
                return Err(e);
            }
        };
        let snc = self.next.fetch_add(1, Ordering::Relaxed);
        let source = (r.in_id.is_none()).then_some((hop.in_port, in_id));
        self.sncs.lock().unwrap_or_else(|e| e.into_inner()).insert(
            snc,
            EmlSnc {
                connection: Some(connection),
                source,
                traffic,
            },
        );
        Ok(Response::new(pb::SetupSncReply {
            snc,
            in_id: Some(in_id),
            out_id: Some(out_id),
            hops: vec![pb::HopInfo {
                switch: self.switch.clone(),
                connection,
                in_port: hop.in_port,
                in_id: Some(in_id),
                out_port: hop.out_port,
                out_id: Some(out_id),
                branches: vec![pb::Branch {
                    port: hop.out_port,
                    id: Some(out_id),
                }],
            }],
            invocations: t.into_map(),
        }))
    }

    async fn release_snc(
        &self,
        r: Request<pb::ReleaseSncRequest>,
    ) -> Result<Response<pb::ReleaseSncReply>, Status> {
        let id = r.into_inner().snc;
        let snc = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .ok_or_else(|| Status::not_found(format!("{}: no SNC {id}", self.switch)))?;
        let mut t = Tally::default();
        if let Some(connection) = snc.connection {
            t.own(&self.totals, iface::EML_SWITCH);
            wire(self.delay).await;
            if let Err(e) = self
                .client
                .clone()
                .release(pb::ReleaseRequest {
                    connection,
                    keep_reserved: false,
                })
                .await
            {
                // Still ours: a retry of the release can find it.
                self.sncs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, snc);
                return Err(e);
            }
        }
        if let Some((port, vc)) = snc.source
            && let Err(e) = self.unreserve(&mut t, port, vc).await
        {
            // The connection is gone; the source's VC is still held: a retry gives
            // back only that.
            self.sncs.lock().unwrap_or_else(|e| e.into_inner()).insert(
                id,
                EmlSnc {
                    connection: None,
                    ..snc
                },
            );
            return Err(e);
        }
        Ok(Response::new(pb::ReleaseSncReply {
            invocations: t.into_map(),
        }))
    }

    async fn modify_snc(
        &self,
        r: Request<pb::ModifySncRequest>,
    ) -> Result<Response<pb::ModifySncReply>, Status> {
        let r = r.into_inner();
        let traffic = r
            .traffic
            .ok_or_else(|| Status::invalid_argument("no traffic descriptor"))?;
        let connection = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&r.snc)
            .and_then(|s| s.connection)
            .ok_or_else(|| Status::not_found(format!("{}: no SNC {}", self.switch, r.snc)))?;
        let mut t = Tally::default();
        t.own(&self.totals, iface::EML_SWITCH);
        wire(self.delay).await;
        self.client
            .clone()
            .modify(pb::ModifyRequest {
                connection,
                traffic: Some(traffic),
            })
            .await?;
        if let Some(s) = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&r.snc)
        {
            s.traffic = traffic;
        }
        Ok(Response::new(pb::ModifySncReply {
            invocations: t.into_map(),
        }))
    }

    async fn reserve_link(
        &self,
        r: Request<pb::ReserveLinkRequest>,
    ) -> Result<Response<pb::ReserveLinkReply>, Status> {
        let r = r.into_inner();
        self.check(&r.switch)?;
        let mut t = Tally::default();
        let id = self.reserve(&mut t, r.port).await?;
        Ok(Response::new(pb::ReserveLinkReply {
            id: Some(id),
            invocations: t.into_map(),
        }))
    }

    async fn unreserve_link(
        &self,
        r: Request<pb::UnreserveLinkRequest>,
    ) -> Result<Response<pb::UnreserveLinkReply>, Status> {
        let r = r.into_inner();
        self.check(&r.switch)?;
        let id =
            r.id.ok_or_else(|| Status::invalid_argument("no identifier"))?;
        self.unreserve(&mut Tally::default(), r.port, id).await?;
        Ok(Response::new(pb::UnreserveLinkReply {}))
    }

    async fn add_branch(
        &self,
        r: Request<pb::AddSncBranchRequest>,
    ) -> Result<Response<pb::AddSncBranchReply>, Status> {
        let r = r.into_inner();
        self.check(&r.switch)?;
        self.owns(r.connection)?;
        let mut t = Tally::default();
        let id = self.reserve(&mut t, r.port).await?;
        t.own(&self.totals, iface::EML_SWITCH);
        wire(self.delay).await;
        let added = self
            .client
            .clone()
            .add_branch(pb::AddBranchRequest {
                connection: r.connection,
                branch: Some(pb::Branch {
                    port: r.port,
                    id: Some(id),
                }),
            })
            .await;
        if let Err(e) = added {
            self.give_back(&mut t, &[(r.port, id)]).await;
            return Err(e);
        }
        Ok(Response::new(pb::AddSncBranchReply {
            id: Some(id),
            invocations: t.into_map(),
        }))
    }

    async fn drop_branch(
        &self,
        r: Request<pb::DropSncBranchRequest>,
    ) -> Result<Response<pb::DropSncBranchReply>, Status> {
        let r = r.into_inner();
        self.check(&r.switch)?;
        self.owns(r.connection)?;
        let id =
            r.id.ok_or_else(|| Status::invalid_argument("no identifier"))?;
        let mut t = Tally::default();
        t.own(&self.totals, iface::EML_SWITCH);
        wire(self.delay).await;
        self.client
            .clone()
            .drop_branch(pb::DropBranchRequest {
                connection: r.connection,
                branch: Some(pb::Branch {
                    port: r.port,
                    id: Some(id),
                }),
            })
            .await?;
        Ok(Response::new(pb::DropSncBranchReply {
            invocations: t.into_map(),
        }))
    }

    /// An EML-CP's SNC is one hop: keeping at least one hop keeps all of it.
    async fn trim_snc(
        &self,
        r: Request<pb::TrimSncRequest>,
    ) -> Result<Response<pb::TrimSncReply>, Status> {
        let r = r.into_inner();
        keeps_a_hop(r.keep)?;
        if !self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&r.snc)
        {
            return Err(Status::not_found(format!(
                "{}: no SNC {}",
                self.switch, r.snc
            )));
        }
        Ok(Response::new(pb::TrimSncReply::default()))
    }
}

// ----- NML-CP ----------------------------------------------------------------------------

/// A child of an NML-CP: a remote performer and the interface its invocations count
/// under ("nml->nml" or "nml->eml").
#[derive(Debug, Clone)]
pub struct Child {
    /// The child's client.
    pub client: ConnectionPerformerClient<Channel>,
    /// The interface name.
    pub iface: &'static str,
    /// The emulated network round trip of each invocation ([`super::TinaConfig`]).
    pub delay: Duration,
}

impl Child {
    async fn setup_snc(
        &self,
        r: pb::SetupSncRequest,
    ) -> Result<Response<pb::SetupSncReply>, Status> {
        wire(self.delay).await;
        self.client.clone().setup_snc(r).await
    }

    async fn release_snc(
        &self,
        r: pb::ReleaseSncRequest,
    ) -> Result<Response<pb::ReleaseSncReply>, Status> {
        wire(self.delay).await;
        self.client.clone().release_snc(r).await
    }

    async fn modify_snc(
        &self,
        r: pb::ModifySncRequest,
    ) -> Result<Response<pb::ModifySncReply>, Status> {
        wire(self.delay).await;
        self.client.clone().modify_snc(r).await
    }

    async fn reserve_link(
        &self,
        r: pb::ReserveLinkRequest,
    ) -> Result<Response<pb::ReserveLinkReply>, Status> {
        wire(self.delay).await;
        self.client.clone().reserve_link(r).await
    }

    async fn unreserve_link(
        &self,
        r: pb::UnreserveLinkRequest,
    ) -> Result<Response<pb::UnreserveLinkReply>, Status> {
        wire(self.delay).await;
        self.client.clone().unreserve_link(r).await
    }

    async fn add_branch(
        &self,
        r: pb::AddSncBranchRequest,
    ) -> Result<Response<pb::AddSncBranchReply>, Status> {
        wire(self.delay).await;
        self.client.clone().add_branch(r).await
    }

    async fn drop_branch(
        &self,
        r: pb::DropSncBranchRequest,
    ) -> Result<Response<pb::DropSncBranchReply>, Status> {
        wire(self.delay).await;
        self.client.clone().drop_branch(r).await
    }

    async fn trim_snc(&self, r: pb::TrimSncRequest) -> Result<Response<pb::TrimSncReply>, Status> {
        wire(self.delay).await;
        self.client.clone().trim_snc(r).await
    }
}

/// What an NML-CP holds for one subnetwork connection: the children's SNCs, in route
/// order.
#[derive(Debug, Clone)]
struct NmlSnc {
    parts: Vec<(usize, u64)>,
    /// Hops in each part (TrimSnc finds the part a cut falls in).
    lens: Vec<u32>,
    traffic: pb::TrafficDescriptor,
}

/// The Network Management Layer Connection Performer of one subnetwork: splits a
/// subnetwork connection into the runs inside its children and invokes them,
/// sequentially or in parallel ([`SetupMode`]).
pub struct NmlCp {
    subnetwork: Subnetwork,
    children: Vec<Child>,
    mode: SetupMode,
    totals: Invocations,
    sncs: Mutex<HashMap<u64, NmlSnc>>,
    next: AtomicU64,
}

type Joined<T> = Vec<(usize, Result<T, Status>)>;

/// Runs `f(i)` for every `i` in `items` concurrently and returns the results by index.
async fn all_at_once<T, F, Fut>(items: Vec<usize>, f: F) -> Joined<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, Status>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for i in items {
        let fut = f(i);
        set.spawn(async move { (i, fut.await) });
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        match r {
            Ok(x) => out.push(x),
            Err(e) => tracing::error!(error = %e, "NML-CP: a concurrent invocation panicked"),
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out
}

impl NmlCp {
    /// The NML-CP of `subnetwork`, its children in the order of
    /// [`Subnetwork::child_of`] (child subnetworks, or at the lowest level one EML-CP
    /// per switch).
    pub fn new(
        subnetwork: Subnetwork,
        children: Vec<Child>,
        mode: SetupMode,
        totals: Invocations,
    ) -> Self {
        NmlCp {
            subnetwork,
            children,
            mode,
            totals,
            sncs: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }

    fn child(&self, i: usize) -> Result<&Child, Status> {
        self.children.get(i).ok_or_else(|| {
            Status::internal(format!(
                "{}: child {i} is not connected",
                self.subnetwork.name
            ))
        })
    }

    fn child_of(&self, switch: &str) -> Result<usize, Status> {
        self.subnetwork.child_of(switch).ok_or_else(|| {
            Status::invalid_argument(format!(
                "switch {switch:?} is not in subnetwork {}",
                self.subnetwork.name
            ))
        })
    }

    /// Releases `parts`; returns the ones still held (their release failed) and the
    /// first error, so the caller can keep them for a retry instead of forgetting them.
    async fn release_parts_keeping(
        &self,
        t: &mut Tally,
        parts: &[(usize, u64)],
    ) -> (Vec<(usize, u64)>, Option<Status>) {
        let mut first_err = None;
        let mut held = Vec::new();
        match self.mode {
            SetupMode::Sequential => {
                for &(c, snc) in parts {
                    let child = match self.child(c) {
                        Ok(ch) => ch,
                        Err(e) => {
                            held.push((c, snc));
                            first_err.get_or_insert(e);
                            continue;
                        }
                    };
                    t.own(&self.totals, child.iface);
                    match child.release_snc(pb::ReleaseSncRequest { snc }).await {
                        Ok(r) => t.absorb(&r.into_inner().invocations),
                        Err(e) => {
                            held.push((c, snc));
                            first_err.get_or_insert(e);
                        }
                    }
                }
            }
            SetupMode::Parallel => {
                let mut jobs: Vec<(Child, usize, u64)> = Vec::new();
                for &(c, snc) in parts {
                    match self.child(c) {
                        Ok(ch) => jobs.push((ch.clone(), c, snc)),
                        Err(e) => {
                            held.push((c, snc));
                            first_err.get_or_insert(e);
                        }
                    }
                }
                for (child, _, _) in &jobs {
                    t.own(&self.totals, child.iface);
                }
                let results = all_at_once((0..jobs.len()).collect(), |i| {
                    let (child, _, snc) = jobs[i].clone();
                    async move {
                        Ok(child
                            .release_snc(pb::ReleaseSncRequest { snc })
                            .await?
                            .into_inner())
                    }
                })
                .await;
                for (i, r) in results {
                    match r {
                        Ok(r) => t.absorb(&r.invocations),
                        Err(e) => {
                            held.push((jobs[i].1, jobs[i].2));
                            first_err.get_or_insert(e);
                        }
                    }
                }
            }
        }
        // Route order, whatever order the failures came in.
        held.sort_by_key(|p| parts.iter().position(|q| q == p));
        (held, first_err)
    }

    async fn release_parts(&self, t: &mut Tally, parts: &[(usize, u64)]) -> Result<(), Status> {
        match self.release_parts_keeping(t, parts).await {
            (_, Some(e)) => Err(e),
            (_, None) => Ok(()),
        }
    }

    async fn unreserve_links(&self, t: &mut Tally, links: &[(usize, String, u32, pb::VcId)]) {
        for (c, switch, port, id) in links {
            let Ok(child) = self.child(*c) else { continue };
            t.own(&self.totals, child.iface);
            if let Err(e) = child
                .unreserve_link(pb::UnreserveLinkRequest {
                    switch: switch.clone(),
                    port: *port,
                    id: Some(*id),
                })
                .await
            {
                tracing::warn!(subnetwork = %self.subnetwork.name, %switch, error = %e, "NML-CP: giving back a link identifier failed");
            }
        }
    }

    /// The reply of a setup whose children all answered, in route order.
    fn assemble(
        &self,
        traffic: pb::TrafficDescriptor,
        parts: Vec<(usize, pb::SetupSncReply)>,
        mut t: Tally,
    ) -> pb::SetupSncReply {
        let in_id = parts.first().and_then(|p| p.1.in_id);
        let out_id = parts.last().and_then(|p| p.1.out_id);
        let mut hops = Vec::new();
        let mut record = Vec::new();
        let mut lens = Vec::new();
        for (c, r) in parts {
            t.absorb(&r.invocations);
            lens.push(u32::try_from(r.hops.len()).unwrap_or(u32::MAX));
            hops.extend(r.hops);
            record.push((c, r.snc));
        }
        let snc = self.next.fetch_add(1, Ordering::Relaxed);
        self.sncs.lock().unwrap_or_else(|e| e.into_inner()).insert(
            snc,
            NmlSnc {
                parts: record,
                lens,
                traffic,
            },
        );
        pb::SetupSncReply {
            snc,
            in_id,
            out_id,
            hops,
            invocations: t.into_map(),
        }
    }

    async fn setup_sequential(
        &self,
        r: pb::SetupSncRequest,
        runs: Vec<(usize, std::ops::Range<usize>)>,
        traffic: pb::TrafficDescriptor,
    ) -> Result<pb::SetupSncReply, Status> {
        let mut t = Tally::default();
        let mut done: Vec<(usize, pb::SetupSncReply)> = Vec::new();
        let mut in_id = r.in_id;
        let last = runs.len() - 1;
        for (k, (c, range)) in runs.into_iter().enumerate() {
            let child = self.child(c)?;
            t.own(&self.totals, child.iface);
            let req = pb::SetupSncRequest {
                hops: r.hops[range].to_vec(),
                in_id,
                out_id: if k == last { r.out_id } else { None },
                traffic: Some(traffic),
                buffer_cells: r.buffer_cells,
                tag: r.tag.clone(),
            };
            match child.setup_snc(req).await {
                Ok(rep) => {
                    let rep = rep.into_inner();
                    in_id = rep.out_id;
                    done.push((c, rep));
                }
                Err(e) => {
                    // Roll back what the children before this one set up, last first.
                    let parts: Vec<(usize, u64)> =
                        done.iter().rev().map(|(c, r)| (*c, r.snc)).collect();
                    if let Err(re) = self.release_parts(&mut t, &parts).await {
                        tracing::warn!(subnetwork = %self.subnetwork.name, error = %re, "NML-CP: rollback incomplete");
                    }
                    return Err(e);
                }
            }
        }
        Ok(self.assemble(traffic, done, t))
    }

    async fn setup_parallel(
        &self,
        r: pb::SetupSncRequest,
        runs: Vec<(usize, std::ops::Range<usize>)>,
        traffic: pb::TrafficDescriptor,
    ) -> Result<pb::SetupSncReply, Status> {
        let mut t = Tally::default();
        // 1. The identifiers on the links between consecutive runs, all at once: each is
        // reserved on the output port of the run's last hop, by the child holding it.
        let links: Vec<(usize, String, u32)> = runs[..runs.len() - 1]
            .iter()
            .map(|(c, range)| {
                let h = &r.hops[range.end - 1];
                (*c, h.switch.clone(), h.out_port)
            })
            .collect();
        let clients: Vec<Child> = runs
            .iter()
            .map(|(c, _)| self.child(*c).cloned())
            .collect::<Result<_, _>>()?;
        for c in &clients[..links.len()] {
            t.own(&self.totals, c.iface);
        }
        let reserved = all_at_once((0..links.len()).collect(), |k| {
            let (client, (_, switch, port)) = (clients[k].clone(), links[k].clone());
            async move {
                Ok(client
                    .reserve_link(pb::ReserveLinkRequest { switch, port })
                    .await?
                    .into_inner())
            }
        })
        .await;
        let mut ids: Vec<Option<pb::VcId>> = vec![None; links.len()];
        let mut first_err = None;
        for (k, res) in reserved {
            match res {
                Ok(rep) => {
                    t.absorb(&rep.invocations);
                    ids[k] = rep.id;
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if ids.iter().any(Option::is_none) {
            let held: Vec<(usize, String, u32, pb::VcId)> = ids
                .iter()
                .enumerate()
                .filter_map(|(k, id)| id.map(|v| (links[k].0, links[k].1.clone(), links[k].2, v)))
                .collect();
            self.unreserve_links(&mut t, &held).await;
            return Err(first_err.unwrap_or_else(|| {
                Status::internal("ReserveLink answered without an identifier")
            }));
        }
        // 2. Every child at once, its end identifiers known.
        let last = runs.len() - 1;
        let reqs: Vec<pb::SetupSncRequest> = runs
            .iter()
            .enumerate()
            .map(|(k, (_, range))| pb::SetupSncRequest {
                hops: r.hops[range.clone()].to_vec(),
                in_id: if k == 0 { r.in_id } else { ids[k - 1] },
                out_id: if k == last { r.out_id } else { ids[k] },
                traffic: Some(traffic),
                buffer_cells: r.buffer_cells,
                tag: r.tag.clone(),
            })
            .collect();
        for c in &clients {
            t.own(&self.totals, c.iface);
        }
        let results = all_at_once((0..runs.len()).collect(), |k| {
            let (client, req) = (clients[k].clone(), reqs[k].clone());
            async move { Ok(client.setup_snc(req).await?.into_inner()) }
        })
        .await;
        let mut done = Vec::new();
        let mut failed = Vec::new();
        let mut first_err = None;
        for (k, res) in results {
            match res {
                Ok(rep) => done.push((runs[k].0, rep)),
                Err(e) => {
                    failed.push(k);
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            let parts: Vec<(usize, u64)> = done.iter().map(|(c, r)| (*c, r.snc)).collect();
            for (_, r) in &done {
                t.absorb(&r.invocations);
            }
            if let Err(re) = self.release_parts(&mut t, &parts).await {
                tracing::warn!(subnetwork = %self.subnetwork.name, error = %re, "NML-CP: rollback incomplete");
            }
            // A link identifier is carried (and freed on release) by the run ending at
            // it; where that run failed, it is still only reserved: give it back.
            let held: Vec<(usize, String, u32, pb::VcId)> = failed
                .iter()
                .filter(|&&k| k < links.len())
                .filter_map(|&k| ids[k].map(|v| (links[k].0, links[k].1.clone(), links[k].2, v)))
                .collect();
            self.unreserve_links(&mut t, &held).await;
            return Err(e);
        }
        Ok(self.assemble(traffic, done, t))
    }

    async fn modify_parts(
        &self,
        t: &mut Tally,
        parts: &[(usize, u64)],
        traffic: pb::TrafficDescriptor,
    ) -> (Vec<(usize, u64)>, Option<Status>) {
        let mut changed = Vec::new();
        let mut first_err = None;
        let jobs: Vec<(Child, u64, usize)> = parts
            .iter()
            .filter_map(|&(c, snc)| self.child(c).ok().map(|ch| (ch.clone(), snc, c)))
            .collect();
        match self.mode {
            SetupMode::Sequential => {
                for (child, snc, c) in jobs {
                    t.own(&self.totals, child.iface);
                    match child
                        .modify_snc(pb::ModifySncRequest {
                            snc,
                            traffic: Some(traffic),
                        })
                        .await
                    {
                        Ok(r) => {
                            t.absorb(&r.into_inner().invocations);
                            changed.push((c, snc));
                        }
                        Err(e) => {
                            first_err = Some(e);
                            break;
                        }
                    }
                }
            }
            SetupMode::Parallel => {
                for (child, _, _) in &jobs {
                    t.own(&self.totals, child.iface);
                }
                let results = all_at_once((0..jobs.len()).collect(), |i| {
                    let (child, snc, _) = jobs[i].clone();
                    async move {
                        Ok(child
                            .modify_snc(pb::ModifySncRequest {
                                snc,
                                traffic: Some(traffic),
                            })
                            .await?
                            .into_inner())
                    }
                })
                .await;
                for (i, r) in results {
                    match r {
                        Ok(r) => {
                            t.absorb(&r.invocations);
                            changed.push((jobs[i].2, jobs[i].1));
                        }
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
            }
        }
        (changed, first_err)
    }
}

#[tonic::async_trait]
impl ConnectionPerformer for NmlCp {
    async fn setup_snc(
        &self,
        r: Request<pb::SetupSncRequest>,
    ) -> Result<Response<pb::SetupSncReply>, Status> {
        let r = r.into_inner();
        if r.hops.is_empty() {
            return Err(Status::invalid_argument(
                "a subnetwork connection of no hops",
            ));
        }
        let traffic = r
            .traffic
            .ok_or_else(|| Status::invalid_argument("no traffic descriptor"))?;
        let route: Vec<&str> = r.hops.iter().map(|h| h.switch.as_str()).collect();
        let runs = self
            .subnetwork
            .runs(&route)
            .map_err(Status::invalid_argument)?;
        let rep = match (self.mode, runs.len()) {
            // One run: nothing to do in parallel.
            (SetupMode::Sequential, _) | (_, 1) => self.setup_sequential(r, runs, traffic).await,
            (SetupMode::Parallel, _) => self.setup_parallel(r, runs, traffic).await,
        }?;
        Ok(Response::new(rep))
    }

    async fn release_snc(
        &self,
        r: Request<pb::ReleaseSncRequest>,
    ) -> Result<Response<pb::ReleaseSncReply>, Status> {
        let id = r.into_inner().snc;
        let snc = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .ok_or_else(|| Status::not_found(format!("{}: no SNC {id}", self.subnetwork.name)))?;
        let mut t = Tally::default();
        let (held, err) = self.release_parts_keeping(&mut t, &snc.parts).await;
        if let Some(e) = err {
            // What could not be released stays recorded under the same id, so a retry
            // of the release finds it (and releases only that).
            let lens = held
                .iter()
                .map(|p| {
                    snc.parts
                        .iter()
                        .position(|q| q == p)
                        .map_or(0, |i| snc.lens[i])
                })
                .collect();
            self.sncs.lock().unwrap_or_else(|e| e.into_inner()).insert(
                id,
                NmlSnc {
                    parts: held,
                    lens,
                    traffic: snc.traffic,
                },
            );
            return Err(e);
        }
        Ok(Response::new(pb::ReleaseSncReply {
            invocations: t.into_map(),
        }))
    }

    async fn modify_snc(
        &self,
        r: Request<pb::ModifySncRequest>,
    ) -> Result<Response<pb::ModifySncReply>, Status> {
        let r = r.into_inner();
        let traffic = r
            .traffic
            .ok_or_else(|| Status::invalid_argument("no traffic descriptor"))?;
        let snc = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&r.snc)
            .cloned()
            .ok_or_else(|| {
                Status::not_found(format!("{}: no SNC {}", self.subnetwork.name, r.snc))
            })?;
        let mut t = Tally::default();
        let (changed, err) = self.modify_parts(&mut t, &snc.parts, traffic).await;
        if let Some(e) = err {
            // Change back what was changed: the connection keeps its old contract.
            let (_, back) = self.modify_parts(&mut t, &changed, snc.traffic).await;
            if let Some(be) = back {
                tracing::error!(subnetwork = %self.subnetwork.name, error = %be, "NML-CP: restoring the old contract failed");
            }
            return Err(e);
        }
        if let Some(s) = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&r.snc)
        {
            s.traffic = traffic;
        }
        Ok(Response::new(pb::ModifySncReply {
            invocations: t.into_map(),
        }))
    }

    async fn reserve_link(
        &self,
        r: Request<pb::ReserveLinkRequest>,
    ) -> Result<Response<pb::ReserveLinkReply>, Status> {
        let r = r.into_inner();
        let child = self.child(self.child_of(&r.switch)?)?;
        let mut t = Tally::default();
        t.own(&self.totals, child.iface);
        let rep = child.reserve_link(r).await?.into_inner();
        t.absorb(&rep.invocations);
        Ok(Response::new(pb::ReserveLinkReply {
            id: rep.id,
            invocations: t.into_map(),
        }))
    }

    async fn unreserve_link(
        &self,
        r: Request<pb::UnreserveLinkRequest>,
    ) -> Result<Response<pb::UnreserveLinkReply>, Status> {
        let r = r.into_inner();
        let child = self.child(self.child_of(&r.switch)?)?;
        self.totals.count(child.iface);
        child.unreserve_link(r).await?;
        Ok(Response::new(pb::UnreserveLinkReply {}))
    }

    async fn add_branch(
        &self,
        r: Request<pb::AddSncBranchRequest>,
    ) -> Result<Response<pb::AddSncBranchReply>, Status> {
        let r = r.into_inner();
        let child = self.child(self.child_of(&r.switch)?)?;
        let mut t = Tally::default();
        t.own(&self.totals, child.iface);
        let rep = child.add_branch(r).await?.into_inner();
        t.absorb(&rep.invocations);
        Ok(Response::new(pb::AddSncBranchReply {
            id: rep.id,
            invocations: t.into_map(),
        }))
    }

    async fn drop_branch(
        &self,
        r: Request<pb::DropSncBranchRequest>,
    ) -> Result<Response<pb::DropSncBranchReply>, Status> {
        let r = r.into_inner();
        let child = self.child(self.child_of(&r.switch)?)?;
        let mut t = Tally::default();
        t.own(&self.totals, child.iface);
        let rep = child.drop_branch(r).await?.into_inner();
        t.absorb(&rep.invocations);
        Ok(Response::new(pb::DropSncBranchReply {
            invocations: t.into_map(),
        }))
    }

    async fn trim_snc(
        &self,
        r: Request<pb::TrimSncRequest>,
    ) -> Result<Response<pb::TrimSncReply>, Status> {
        let r = r.into_inner();
        keeps_a_hop(r.keep)?;
        let snc = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&r.snc)
            .cloned()
            .ok_or_else(|| {
                Status::not_found(format!("{}: no SNC {}", self.subnetwork.name, r.snc))
            })?;
        // The part the cut falls in is trimmed (if the cut is inside it); every part
        // after it is released whole, downstream first.
        let mut start = 0u32;
        let mut cut = snc.parts.len();
        let mut inner: Option<(usize, u32)> = None;
        for (i, &len) in snc.lens.iter().enumerate() {
            if start + len >= r.keep {
                cut = i + 1;
                if start + len > r.keep {
                    inner = Some((i, r.keep - start));
                }
                break;
            }
            start += len;
        }
        let mut t = Tally::default();
        let tail: Vec<(usize, u64)> = snc.parts[cut..].iter().rev().copied().collect();
        let (held, err) = self.release_parts_keeping(&mut t, &tail).await;
        let mut trim_err = None;
        let mut trimmed_len = None;
        if let Some((i, keep)) = inner {
            let (c, part) = snc.parts[i];
            let child = self.child(c)?;
            t.own(&self.totals, child.iface);
            match child.trim_snc(pb::TrimSncRequest { snc: part, keep }).await {
                Ok(rep) => {
                    t.absorb(&rep.into_inner().invocations);
                    trimmed_len = Some((i, keep));
                }
                Err(e) => trim_err = Some(e),
            }
        }
        // The record keeps the head and whatever could not be released, in route order.
        if let Some(s) = self
            .sncs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&r.snc)
        {
            let mut parts = snc.parts[..cut].to_vec();
            let mut lens = snc.lens[..cut].to_vec();
            if let Some((i, keep)) = trimmed_len {
                lens[i] = keep;
            }
            for p in held.iter().rev() {
                if let Some(k) = snc.parts.iter().position(|q| q == p) {
                    parts.push(*p);
                    lens.push(snc.lens[k]);
                }
            }
            s.parts = parts;
            s.lens = lens;
        }
        if let Some(e) = err.or(trim_err) {
            return Err(e);
        }
        Ok(Response::new(pb::TrimSncReply {
            invocations: t.into_map(),
        }))
    }
}
