//! The crate's one error type.

use atmlab_rpc::RpcError;

/// Everything the control plane can refuse or fail at.
///
/// The name service maps each variant to a gRPC status ([`ControlError::code`]);
/// clients map statuses back, so `NotRegistered` means the same on both sides.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// A malformed name.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A registration that cannot be accepted (no kind, no address, ...).
    #[error("invalid registration of {name:?}: {reason}")]
    InvalidRegistration {
        /// The name it was for.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The name is not in the directory: never registered, unregistered, or its lease
    /// lapsed (register it again).
    #[error("{name:?} is not registered (never registered, unregistered, or its lease lapsed)")]
    NotRegistered {
        /// The name asked for.
        name: String,
    },
    /// The directory holds as many registrations as it may.
    #[error("the directory is full ({limit} registrations); {name:?} was not registered")]
    DirectoryFull {
        /// The name refused.
        name: String,
        /// The limit.
        limit: usize,
    },
    /// TLS or connection set-up failed.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// A call to a remote object failed with a status other than the ones above.
    #[error("{call} failed: {code:?}: {message}")]
    Call {
        /// The RPC, e.g. `"NameService.Register"`.
        call: &'static str,
        /// The status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
    /// A topology file that does not describe a network.
    #[error("{origin}: {message}")]
    Topology {
        /// The file (or "topology").
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A switch (server) refused or failed.
    #[error(transparent)]
    Switch(#[from] atmlab_fabric::FabricError),
    /// A QoS specification (user- or cell-level) that cannot be mapped: a rate that is not
    /// positive, a loss outside [0, 1), a peak below its mean, a missing delay bound.
    #[error("invalid QoS: {field}: {reason}")]
    InvalidQos {
        /// The field at fault, as the IDL names it (`frame_rate`, `traffic.scr`, ...).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A host that is not in the route object's network view.
    #[error("unknown host {host:?} (not in the network view)")]
    UnknownHost {
        /// The host asked for.
        host: String,
    },
    /// No route with the bandwidth asked for: the call is blocked.
    #[error("blocked: no route from {from:?} to {to:?} with {bandwidth} cells/s free: {reason}")]
    NoRoute {
        /// Source host.
        from: String,
        /// Destination host.
        to: String,
        /// The bandwidth asked for (cells/s).
        bandwidth: f64,
        /// Why (which port is short, or that the switches are not connected).
        reason: String,
    },
    /// A route request that makes no sense whatever the network (a negative bandwidth, a
    /// host to itself).
    #[error("invalid route request: {reason}")]
    InvalidRouteRequest {
        /// What is wrong.
        reason: String,
    },
    /// A network view that does not hang together (a link to a port that does not exist,
    /// a one-way link, a host on an unknown port, a name given twice).
    #[error("invalid network view: {reason}")]
    InvalidView {
        /// Every problem found, separated by "; ".
        reason: String,
    },
    /// A server could not run (its transport failed).
    #[error("serving {what}: {reason}")]
    Serve {
        /// The service.
        what: &'static str,
        /// The transport error with its causes.
        reason: String,
    },
}

impl ControlError {
    /// The gRPC status code that stands for this error.
    pub fn code(&self) -> tonic::Code {
        match self {
            ControlError::InvalidName { .. } | ControlError::InvalidRegistration { .. } => {
                tonic::Code::InvalidArgument
            }
            ControlError::NotRegistered { .. } => tonic::Code::NotFound,
            ControlError::DirectoryFull { .. } => tonic::Code::ResourceExhausted,
            ControlError::Rpc(_) | ControlError::Serve { .. } => tonic::Code::Unavailable,
            ControlError::Topology { .. }
            | ControlError::InvalidQos { .. }
            | ControlError::UnknownHost { .. }
            | ControlError::InvalidRouteRequest { .. }
            | ControlError::InvalidView { .. } => tonic::Code::InvalidArgument,
            ControlError::NoRoute { .. } => tonic::Code::ResourceExhausted,
            ControlError::Switch(e) => tonic::Code::from_i32(e.kind().code()),
            ControlError::Call { code, .. } => *code,
        }
    }
}

impl From<ControlError> for tonic::Status {
    fn from(e: ControlError) -> tonic::Status {
        tonic::Status::new(e.code(), e.to_string())
    }
}

pub(crate) use atmlab_rpc::error_chain as chain;
