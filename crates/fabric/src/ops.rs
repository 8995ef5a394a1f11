//! The plain types of the switch-server operations (paper 000 §II-B: the switch server's
//! interface; paper 001 §3.2: the same operations over CORBA and raw sockets) that are
//! not commands: what Describe answers and what a batch returns.
//!
//! They sit in the core, beside [`crate::switch`], because the sans-IO codec
//! ([`crate::raw`]) encodes them as well as the live shells serve them; the shells
//! (`crate::live::backend`) re-export them.

use crate::error::FabricError;
use crate::switch::{PortStatus, Reply};

/// What Describe answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    /// The switch's name.
    pub name: String,
    /// Its ports.
    pub ports: Vec<PortStatus>,
    /// Where each port's cells go ("udp:127.0.0.1:4000"), parallel to `ports`; empty
    /// strings for ports not attached.
    pub peers: Vec<String>,
    /// Connections installed.
    pub connections: u32,
}

/// The per-command results of a batch.
pub type BatchResult = Vec<Result<Reply, FabricError>>;
