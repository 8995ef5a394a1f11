//! The `atmlab.v1.ConnectionManager` service over the LNC: TINA's connection management
//! behind the same interface as the sequential and xbind managers (cm.proto), so a
//! client (the call generator, the Python client) cannot tell them apart except by
//! GetStatus's kind, "tina", and its invocation counts.

use std::sync::Arc;

use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_manager_server::{ConnectionManager, ConnectionManagerServer};
use tonic::{Request, Response, Status};

use super::lnc::Lnc;
use crate::cm::service::{QosFn, SetupObserver, SetupTimer, resolve_qos};

/// The service.
pub struct TinaService {
    lnc: Arc<Lnc>,
    mapper: Option<QosFn>,
    timer: SetupTimer,
}

impl TinaService {
    /// A service over `lnc`; `mapper` turns `qos` into a contract when a caller gives no
    /// `cell_qos`.
    pub fn new(lnc: Arc<Lnc>, mapper: Option<QosFn>) -> Self {
        TinaService {
            lnc,
            mapper,
            timer: SetupTimer::default(),
        }
    }

    /// Hands each successful setup's time to `observer`, when given.
    pub fn with_setup_observer(mut self, observer: Option<SetupObserver>) -> Self {
        self.timer = SetupTimer::new(observer);
        self
    }

    /// The tonic service.
    pub fn into_server(self) -> ConnectionManagerServer<Self> {
        ConnectionManagerServer::new(self)
    }
}

#[tonic::async_trait]
impl ConnectionManager for TinaService {
    async fn add_connection(
        &self,
        r: Request<pb::AddConnectionRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "set up calls")?;
        let started = std::time::Instant::now();
        let r = r.into_inner();
        let cell = resolve_qos(r.cell_qos.as_ref(), r.qos.as_ref(), self.mapper.as_ref())?;
        let (lnc, undo) = (self.lnc.clone(), self.lnc.clone());
        let info = crate::cm::service::setup_detached(
            async move {
                lnc.add_multipoint(&r.source, &r.destinations, cell, &r.tag)
                    .await
            },
            |info: &pb::ConnectionInfo| info.id,
            move |id| async move {
                if let Err(e) = undo.delete(id).await {
                    tracing::warn!(id, "releasing an abandoned setup: {e}");
                }
            },
        )
        .await??;
        self.timer.record(started.elapsed());
        Ok(Response::new(info))
    }

    type CallsStream = crate::cm::service::CallsStream;

    /// Not for TINA: its setups go down the LNC's hierarchy one invocation at a time
    /// (tina.proto), and the pipelined stream is measured on the xbind manager only.
    async fn calls(
        &self,
        _: Request<tonic::Streaming<pb::CallRequest>>,
    ) -> Result<Response<Self::CallsStream>, Status> {
        Err(Status::unimplemented(
            "the Calls stream is served by the sequential and xbind managers, not tina: \
             use AddConnection and DeleteConnection (callgen without --stream)",
        ))
    }

    async fn delete_connection(
        &self,
        r: Request<pb::DeleteConnectionRequest>,
    ) -> Result<Response<pb::DeleteConnectionReply>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "release calls")?;
        self.lnc.delete(r.into_inner().id).await?;
        Ok(Response::new(pb::DeleteConnectionReply {}))
    }

    async fn get_connection(
        &self,
        r: Request<pb::GetConnectionRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&atmlab_rpc::tls::Role::ALL, "read calls")?;
        let id = r.into_inner().id;
        self.lnc
            .get(id)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no connection {id}")))
    }

    async fn list_connections(
        &self,
        r: Request<pb::ListCmConnectionsRequest>,
    ) -> Result<Response<pb::ListCmConnectionsReply>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&atmlab_rpc::tls::Role::ALL, "list calls")?;
        Ok(Response::new(pb::ListCmConnectionsReply {
            connections: self.lnc.list(),
        }))
    }

    async fn get_status(
        &self,
        r: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::CmStatus>, Status> {
        atmlab_rpc::tls::Caller::of(&r)
            .require(&atmlab_rpc::tls::Role::ALL, "read a manager's status")?;
        let mut out = self.lnc.status();
        self.timer.fill(&mut out);
        Ok(Response::new(out))
    }

    /// TINA has no aggregation threshold to tune: the status, unchanged.
    async fn tune(&self, r: Request<pb::TuneRequest>) -> Result<Response<pb::CmStatus>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "tune a manager")?;
        Ok(Response::new(self.lnc.status()))
    }

    async fn add_leaf(
        &self,
        r: Request<pb::AddLeafRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "add leaves")?;
        let pb::AddLeafRequest { id, destination } = r.into_inner();
        self.lnc.add_leaf(id, &destination).await.map(Response::new)
    }

    /// The leaf's hops are released before its branch at the fork is dropped.
    async fn drop_leaf(
        &self,
        r: Request<pb::DropLeafRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "drop leaves")?;
        let leaf = r.into_inner();
        let info = self.lnc.drop_leaf(leaf.id, &leaf.destination).await?;
        Ok(Response::new(info))
    }

    async fn modify_connection(
        &self,
        r: Request<pb::ModifyConnectionRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "modify calls")?;
        let pb::ModifyConnectionRequest { id, qos, cell_qos } = r.into_inner();
        let cell = resolve_qos(cell_qos.as_ref(), qos.as_ref(), self.mapper.as_ref())?;
        self.lnc.modify(id, cell).await.map(Response::new)
    }
}
