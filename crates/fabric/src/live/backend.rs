//! The switch-server operations as one async trait, implemented by the local switch and
//! by every client (gRPC, raw TCP), so front ends and clients compose: a gRPC server over
//! a raw-TCP client is ReTINA's hybrid (paper 001 §3.2), the proxy.

use std::future::Future;

use crate::error::FabricError;
use crate::switch::{Atomicity, Command, Connection, Reservation};

// The plain types of the operations live in the core (`crate::ops`, so the sans-IO codec
// needs no shell); re-exported here, where the shells and their users find them.
pub use crate::ops::{BatchResult, Description};

/// The operations of a switch server. The outer `Result` is the transport (a dead server
/// is `Err(FabricError::Unavailable)`); the inner ones are per command.
pub trait SwitchBackend: Clone + Send + Sync + 'static {
    /// Runs a batch of commands.
    fn execute(
        &self,
        commands: Vec<Command>,
        atomicity: Atomicity,
    ) -> impl Future<Output = Result<BatchResult, FabricError>> + Send;
    /// The switch's name, ports, ranges and capacities.
    fn describe(&self) -> impl Future<Output = Result<Description, FabricError>> + Send;
    /// Every connection (with its counters).
    fn connections(&self) -> impl Future<Output = Result<Vec<Connection>, FabricError>> + Send;
    /// Every outstanding reservation.
    fn reservations(&self) -> impl Future<Output = Result<Vec<Reservation>, FabricError>> + Send;
}
