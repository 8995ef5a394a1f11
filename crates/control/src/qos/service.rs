//! `atmlab.v1.QosMapper`: the tonic service over the core.

use std::future::Future;

use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::qos_mapper_server::{QosMapper as QosMapperRpc, QosMapperServer};
use tokio::net::TcpListener;

use super::convert::{cell_qos_from_pb, pb_cell_qos, pb_user_qos, user_qos_from_pb};
use super::mapper::QosMapper;
use crate::ControlError;

/// `atmlab.v1.QosMapper` over a [`QosMapper`]. Requests are validated on the way in;
/// refusals are INVALID_ARGUMENT naming the field.
#[derive(Debug, Clone, Default)]
pub struct QosMapperService {
    mapper: QosMapper,
}

impl QosMapperService {
    /// The service over `mapper`.
    pub fn new(mapper: QosMapper) -> Self {
        QosMapperService { mapper }
    }

    /// The tonic service, for `Server::builder().add_service(..)`.
    pub fn server(&self) -> QosMapperServer<Self> {
        QosMapperServer::new(self.clone())
    }

    /// Serves on `listener` (mutual TLS with `tls`, plain HTTP/2 without) until
    /// `shutdown` completes.
    pub async fn serve(
        self,
        listener: TcpListener,
        tls: Option<TlsIdentity>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ControlError> {
        let routes = atmlab_rpc::Services::new(self.server());
        Ok(atmlab_rpc::serve("QoS mapper", listener, tls.as_ref(), routes, shutdown).await?)
    }
}

#[tonic::async_trait]
impl QosMapperRpc for QosMapperService {
    async fn map(
        &self,
        request: tonic::Request<pb::UserQos>,
    ) -> Result<tonic::Response<pb::CellQos>, tonic::Status> {
        atmlab_rpc::tls::Caller::of(&request).require(&atmlab_rpc::tls::Role::ALL, "map QoS")?;
        let q = user_qos_from_pb(request.get_ref())?;
        let c = self.mapper.map(&q)?;
        Ok(tonic::Response::new(pb_cell_qos(&c)))
    }

    async fn unmap(
        &self,
        request: tonic::Request<pb::CellQos>,
    ) -> Result<tonic::Response<pb::UserQos>, tonic::Status> {
        atmlab_rpc::tls::Caller::of(&request).require(&atmlab_rpc::tls::Role::ALL, "unmap QoS")?;
        let c = cell_qos_from_pb(request.get_ref())?;
        Ok(tonic::Response::new(pb_user_qos(&self.mapper.unmap(&c))))
    }
}
