//! The one error type of atmlab-smds.
//!
//! The per-PDU path never builds one: a PDU that cannot be switched is counted under its
//! reason ([`crate::fib::Discard`]) and dropped, as the SMDS service discards what it cannot
//! deliver. These errors are for decoding control frames, configuration and the shells.

use atmlab_wire::WireError;

/// What went wrong in atmlab-smds.
#[derive(Debug, thiserror::Error)]
pub enum SmdsError {
    /// A frame on an ISSI breaks a rule of its format.
    #[error("malformed ISSI frame: {0}")]
    Malformed(&'static str),
    /// A frame on an ISSI ends before its format does.
    #[error("truncated ISSI frame ({what}): need {need} octets, got {got}")]
    Truncated {
        /// The part being decoded.
        what: &'static str,
        /// Octets needed.
        need: usize,
        /// Octets present.
        got: usize,
    },
    /// A byte format of atmlab-wire (L3_PDU, E.164 address) was wrong.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A configuration or topology does not hang together; the text names what.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An I/O operation of a shell failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl SmdsError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SmdsError::Io {
            context: context.into(),
            source,
        }
    }
}
