//! A QoS mapper as a connection manager sees it (paper 000 §II-C-1): collocated, a function
//! call into the core, or remote, a gRPC call to `atmlab.v1.QosMapper`.

use std::future::Future;

use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1::qos_mapper_client::QosMapperClient;
use tonic::transport::Channel;

use super::convert::{cell_qos_from_pb, pb_cell_qos, pb_user_qos, user_qos_from_pb};
use super::mapper::{CellQos, QosMapper, UserQos};
use crate::ControlError;

/// A QoS mapper as a connection manager sees it: in its own address space or across the
/// network (paper 000 §II-C-1: "collocated" makes the mapping a local invocation "with
/// almost no change to the rest of the code"). Cheap to clone.
pub trait MapQos: Clone + Send + Sync + 'static {
    /// User-level QoS to the cell-level contract.
    fn map(&self, q: &UserQos) -> impl Future<Output = Result<CellQos, ControlError>> + Send;
    /// A cell-level contract back to user terms.
    fn unmap(&self, c: &CellQos) -> impl Future<Output = Result<UserQos, ControlError>> + Send;
}

impl MapQos for QosMapper {
    fn map(&self, q: &UserQos) -> impl Future<Output = Result<CellQos, ControlError>> + Send {
        std::future::ready(QosMapper::map(self, q))
    }
    fn unmap(&self, c: &CellQos) -> impl Future<Output = Result<UserQos, ControlError>> + Send {
        std::future::ready(Ok(QosMapper::unmap(self, c)))
    }
}

/// A client of a remote `atmlab.v1.QosMapper`. Cheap to clone (clones share the channel).
#[derive(Debug, Clone)]
pub struct RemoteQosMapper {
    client: QosMapperClient<Channel>,
}

impl RemoteQosMapper {
    /// Connects to the mapper at `addr` (`host:port` or a URI), with mutual TLS when
    /// `tls` is given.
    pub async fn connect(addr: &str, tls: Option<&TlsIdentity>) -> Result<Self, ControlError> {
        // The QoS mapper runs beside a connection manager (paper 000 §II-C1), with its
        // identity.
        let expect = atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Cm);
        Ok(RemoteQosMapper::new(
            atmlab_rpc::channel_to(addr, tls, expect).await?,
        ))
    }

    /// A client over an existing channel.
    pub fn new(channel: Channel) -> Self {
        RemoteQosMapper {
            client: QosMapperClient::new(channel),
        }
    }

    /// `QosMapper.Map`. A refusal keeps the service's code (INVALID_ARGUMENT) and message
    /// (which names the field) in [`ControlError::Call`].
    pub async fn map(&self, q: &UserQos) -> Result<CellQos, ControlError> {
        let reply = self
            .client
            .clone()
            .map(pb_user_qos(q))
            .await
            .map_err(|s| call_error("QosMapper.Map", &s))?;
        cell_qos_from_pb(&reply.into_inner())
    }

    /// `QosMapper.Unmap`.
    pub async fn unmap(&self, c: &CellQos) -> Result<UserQos, ControlError> {
        let reply = self
            .client
            .clone()
            .unmap(pb_cell_qos(c))
            .await
            .map_err(|s| call_error("QosMapper.Unmap", &s))?;
        user_qos_from_pb(&reply.into_inner())
    }
}

fn call_error(call: &'static str, s: &tonic::Status) -> ControlError {
    ControlError::Call {
        call,
        kind: crate::ErrorKind::from_code(s.code() as i32),
        message: s.message().to_string(),
    }
}

impl MapQos for RemoteQosMapper {
    fn map(&self, q: &UserQos) -> impl Future<Output = Result<CellQos, ControlError>> + Send {
        RemoteQosMapper::map(self, q)
    }
    fn unmap(&self, c: &CellQos) -> impl Future<Output = Result<UserQos, ControlError>> + Send {
        RemoteQosMapper::unmap(self, c)
    }
}

/// Either kind of mapper, chosen at run time (a configuration issue, §II-C-1).
#[derive(Debug, Clone)]
pub enum Mapper {
    /// In the caller's address space: a function call.
    Collocated(QosMapper),
    /// Across the network: a gRPC call.
    Remote(RemoteQosMapper),
}

impl MapQos for Mapper {
    async fn map(&self, q: &UserQos) -> Result<CellQos, ControlError> {
        match self {
            Mapper::Collocated(m) => QosMapper::map(m, q),
            Mapper::Remote(m) => m.map(q).await,
        }
    }
    async fn unmap(&self, c: &CellQos) -> Result<UserQos, ControlError> {
        match self {
            Mapper::Collocated(m) => Ok(QosMapper::unmap(m, c)),
            Mapper::Remote(m) => m.unmap(c).await,
        }
    }
}
