//! The crate's one error type, and its kinds: the core's own classification of a refusal,
//! which only the live shell maps onto gRPC status codes (and clients map back).

/// Everything the control plane can refuse or fail at.
///
/// Each variant has an [`ErrorKind`] ([`ControlError::kind`]); the live shell maps it to a
/// gRPC status and clients map statuses back, so `NotRegistered` means the same on both
/// sides.
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
    /// A claim on a name registered, live, at another address.
    #[error("{name:?} is held by {holder} (its lease lapses if that holder is gone)")]
    Held {
        /// The name claimed.
        name: String,
        /// The address it is registered at.
        holder: String,
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
    #[cfg(feature = "live")]
    #[error(transparent)]
    Rpc(#[from] atmlab_rpc::RpcError),
    /// A call to a remote object failed with a status other than the ones above.
    #[error("{call} failed: {kind}: {message}")]
    Call {
        /// The RPC, e.g. `"NameService.Register"`.
        call: &'static str,
        /// The status, as a kind.
        kind: ErrorKind,
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

/// What kind of refusal or failure a [`ControlError`] is, in the terms of the canonical
/// status codes every RPC system shares (google.rpc.Code), without depending on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request is wrong whatever the state (INVALID_ARGUMENT, 3).
    InvalidArgument,
    /// Deadline passed before an answer (DEADLINE_EXCEEDED, 4).
    DeadlineExceeded,
    /// The thing asked for does not exist (NOT_FOUND, 5).
    NotFound,
    /// No room: a full directory, a blocked call (RESOURCE_EXHAUSTED, 8).
    ResourceExhausted,
    /// The service or the transport is down (UNAVAILABLE, 14).
    Unavailable,
    /// Any other status, by its google.rpc.Code number.
    Other(i32),
}

/// The canonical status names, by code (google.rpc.Code), as gRPC tools print them.
const CODE_NAMES: [&str; 17] = [
    "Ok",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.code();
        match usize::try_from(code).ok().and_then(|c| CODE_NAMES.get(c)) {
            Some(name) => f.write_str(name),
            None => write!(f, "code {code}"),
        }
    }
}

impl ErrorKind {
    /// The google.rpc.Code number.
    pub const fn code(self) -> i32 {
        match self {
            ErrorKind::InvalidArgument => 3,
            ErrorKind::DeadlineExceeded => 4,
            ErrorKind::NotFound => 5,
            ErrorKind::ResourceExhausted => 8,
            ErrorKind::Unavailable => 14,
            ErrorKind::Other(c) => c,
        }
    }

    /// The kind of a google.rpc.Code number.
    pub const fn from_code(code: i32) -> ErrorKind {
        match code {
            3 => ErrorKind::InvalidArgument,
            4 => ErrorKind::DeadlineExceeded,
            5 => ErrorKind::NotFound,
            8 => ErrorKind::ResourceExhausted,
            14 => ErrorKind::Unavailable,
            c => ErrorKind::Other(c),
        }
    }
}

impl ControlError {
    /// The kind of refusal or failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ControlError::InvalidName { .. } | ControlError::InvalidRegistration { .. } => {
                ErrorKind::InvalidArgument
            }
            ControlError::NotRegistered { .. } => ErrorKind::NotFound,
            ControlError::DirectoryFull { .. } => ErrorKind::ResourceExhausted,
            // ALREADY_EXISTS
            ControlError::Held { .. } => ErrorKind::Other(6),
            #[cfg(feature = "live")]
            ControlError::Rpc(_) => ErrorKind::Unavailable,
            ControlError::Serve { .. } => ErrorKind::Unavailable,
            ControlError::Topology { .. }
            | ControlError::InvalidQos { .. }
            | ControlError::UnknownHost { .. }
            | ControlError::InvalidRouteRequest { .. }
            | ControlError::InvalidView { .. } => ErrorKind::InvalidArgument,
            ControlError::NoRoute { .. } => ErrorKind::ResourceExhausted,
            ControlError::Switch(e) => ErrorKind::from_code(e.kind().code()),
            ControlError::Call { kind, .. } => *kind,
        }
    }

    /// The gRPC status code that stands for this error (the live shell's mapping of
    /// [`ControlError::kind`]).
    #[cfg(feature = "live")]
    pub fn code(&self) -> tonic::Code {
        tonic::Code::from_i32(self.kind().code())
    }
}

#[cfg(feature = "live")]
impl From<ControlError> for tonic::Status {
    fn from(e: ControlError) -> tonic::Status {
        tonic::Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keep_their_codes_and_print_their_names() {
        for code in 0..=16 {
            assert_eq!(ErrorKind::from_code(code).code(), code);
        }
        assert_eq!(ErrorKind::from_code(13).to_string(), "Internal");
        assert_eq!(ErrorKind::InvalidArgument.to_string(), "InvalidArgument");
        assert_eq!(ErrorKind::Other(99).to_string(), "code 99");
        let e = ControlError::Call {
            call: "NameService.List",
            kind: ErrorKind::from_code(16),
            message: "who are you".into(),
        };
        assert_eq!(
            e.to_string(),
            "NameService.List failed: Unauthenticated: who are you"
        );
    }
}
