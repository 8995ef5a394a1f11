//! The one error type of atmlab-fabric.
//!
//! Every refusal names what was wrong (the port, the identifier, the amounts), because a
//! connection manager that gets "refused" without a reason cannot pick another route.
//! [`FabricError::kind`] sorts them into the classes the SwitchServer IDL maps onto gRPC
//! status codes.

use atmlab_core::ids::{PortId, VcId};

/// What can go wrong in the switch core and its shells.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FabricError {
    /// The port does not exist on this switch.
    #[error("unknown port {0}")]
    UnknownPort(PortId),
    /// No connection has this id.
    #[error("unknown connection {0}")]
    UnknownConnection(u64),
    /// A VPI outside the port's range.
    #[error("port {port}: VPI {vpi} is outside the port's range {min}..={max}")]
    VpiOutOfRange {
        /// The port.
        port: PortId,
        /// The VPI asked for.
        vpi: u32,
        /// Smallest allowed.
        min: u16,
        /// Largest allowed.
        max: u16,
    },
    /// A VCI outside the port's range.
    #[error("port {port}: VCI {vci} is outside the port's range {min}..={max}")]
    VciOutOfRange {
        /// The port.
        port: PortId,
        /// The VCI asked for.
        vci: u32,
        /// Smallest allowed.
        min: u16,
        /// Largest allowed.
        max: u16,
    },
    /// The input identifier already carries a connection.
    #[error("port {port}: input {id} is already used by connection {by}")]
    InputInUse {
        /// The input port.
        port: PortId,
        /// The identifier.
        id: VcId,
        /// The connection holding it.
        by: u64,
    },
    /// The output identifier already carries a connection.
    #[error("port {port}: output {id} is already used by connection {by}")]
    OutputInUse {
        /// The output port.
        port: PortId,
        /// The identifier.
        id: VcId,
        /// The connection holding it.
        by: u64,
    },
    /// The output identifier is reserved by someone else.
    #[error("port {port}: output {id} is reserved by another owner")]
    ReservedByOther {
        /// The output port.
        port: PortId,
        /// The identifier.
        id: VcId,
    },
    /// Unreserving something that is not reserved by the caller.
    #[error("port {port}: {id} is not reserved by this owner")]
    NotReserved {
        /// The port.
        port: PortId,
        /// The identifier.
        id: VcId,
    },
    /// A whole virtual path is taken (or partly used) where the request needs it free.
    #[error("port {port}: VPI {vpi} is {why}")]
    PathBusy {
        /// The port.
        port: PortId,
        /// The VPI.
        vpi: u16,
        /// "held by a VP connection or reservation" or "partly used by VCs".
        why: &'static str,
    },
    /// Not enough free identifiers for a reservation.
    #[error("port {port}: {wanted} identifiers asked, only {free} free")]
    NoFreeIdentifiers {
        /// The port.
        port: PortId,
        /// How many were asked for.
        wanted: u32,
        /// How many are free in the asked range.
        free: u32,
    },
    /// Admission control refused the bandwidth.
    #[error("port {port}: needs {needed:.1} cells/s, only {available:.1} cells/s free")]
    InsufficientBandwidth {
        /// The output port.
        port: PortId,
        /// The bandwidth the connection would be charged.
        needed: f64,
        /// What is left.
        available: f64,
    },
    /// Not enough output buffer left to set aside.
    #[error("port {port}: needs {needed} buffer cells, only {available} free")]
    InsufficientBuffer {
        /// The output port.
        port: PortId,
        /// Cells asked for.
        needed: u32,
        /// Cells left.
        available: u32,
    },
    /// The connection has no such branch.
    #[error("connection {connection} has no branch to port {port} {id}")]
    UnknownBranch {
        /// The connection.
        connection: u64,
        /// The branch's port.
        port: PortId,
        /// The branch's identifier.
        id: VcId,
    },
    /// A malformed request.
    #[error("invalid request: {0}")]
    Invalid(&'static str),
    /// Not run, because an earlier command of an all-or-nothing batch failed.
    #[error("not run: an earlier command of the all-or-nothing batch failed")]
    Aborted,
    /// A configuration that cannot describe a switch.
    #[error("invalid switch configuration: {0}")]
    Config(String),
    /// A valid configuration the machine cannot give the server: an address or port
    /// already in use, a permission denied. The text names the address and the port.
    #[error("{0}")]
    Bind(String),
    /// The switch server cannot be reached, or the connection to it broke.
    #[error("switch server unavailable: {0}")]
    Unavailable(String),
    /// A raw-protocol frame that cannot be decoded.
    #[error("malformed raw-protocol frame: {0}")]
    Frame(&'static str),
    /// An error that happened on the far side of a connection (a raw-protocol switch
    /// server) and arrived as a code and a message: the original variant stays there,
    /// its class and text come back. Its text is the remote error's text unchanged, so a
    /// proxy forwards it as it was.
    #[error("{message}")]
    Remote {
        /// The class of the remote error.
        kind: ErrorKind,
        /// The remote error's text.
        message: String,
    },
}

/// The classes of refusal, as the IDL maps them onto gRPC status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// NOT_FOUND (5).
    NotFound,
    /// OUT_OF_RANGE (11).
    OutOfRange,
    /// ALREADY_EXISTS (6).
    AlreadyExists,
    /// RESOURCE_EXHAUSTED (8).
    ResourceExhausted,
    /// INVALID_ARGUMENT (3).
    InvalidArgument,
    /// ABORTED (10).
    Aborted,
    /// UNAVAILABLE (14).
    Unavailable,
}

impl ErrorKind {
    /// The google.rpc.Code number.
    pub const fn code(self) -> i32 {
        match self {
            ErrorKind::InvalidArgument => 3,
            ErrorKind::NotFound => 5,
            ErrorKind::AlreadyExists => 6,
            ErrorKind::ResourceExhausted => 8,
            ErrorKind::Aborted => 10,
            ErrorKind::OutOfRange => 11,
            ErrorKind::Unavailable => 14,
        }
    }

    /// The kind of a google.rpc.Code number (unknown codes read as invalid argument).
    pub const fn from_code(code: i32) -> ErrorKind {
        match code {
            5 => ErrorKind::NotFound,
            6 => ErrorKind::AlreadyExists,
            8 => ErrorKind::ResourceExhausted,
            10 => ErrorKind::Aborted,
            11 => ErrorKind::OutOfRange,
            14 => ErrorKind::Unavailable,
            _ => ErrorKind::InvalidArgument,
        }
    }
}

impl FabricError {
    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        use FabricError::*;
        match self {
            UnknownPort(_) | UnknownConnection(_) | UnknownBranch { .. } | NotReserved { .. } => {
                ErrorKind::NotFound
            }
            VpiOutOfRange { .. } | VciOutOfRange { .. } => ErrorKind::OutOfRange,
            InputInUse { .. } | OutputInUse { .. } | ReservedByOther { .. } | PathBusy { .. } => {
                ErrorKind::AlreadyExists
            }
            NoFreeIdentifiers { .. } | InsufficientBandwidth { .. } | InsufficientBuffer { .. } => {
                ErrorKind::ResourceExhausted
            }
            Aborted => ErrorKind::Aborted,
            Unavailable(_) | Bind(_) => ErrorKind::Unavailable,
            Invalid(_) | Config(_) | Frame(_) => ErrorKind::InvalidArgument,
            Remote { kind, .. } => *kind,
        }
    }
}
