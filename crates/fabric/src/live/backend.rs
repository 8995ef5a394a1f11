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
    /// The owner of each of `ids` (`None` for an unknown connection), for the server's
    /// check that a manager touches only its own connections
    /// ([`Authorized`](crate::live::authz::Authorized)). By default from
    /// [`connections`](SwitchBackend::connections); a local switch looks them up.
    fn owners(
        &self,
        ids: Vec<u64>,
    ) -> impl Future<Output = Result<Vec<Option<String>>, FabricError>> + Send {
        let this = self.clone();
        async move {
            let all = this.connections().await?;
            Ok(ids
                .iter()
                .map(|id| all.iter().find(|c| c.id == *id).map(|c| c.owner.clone()))
                .collect())
        }
    }
}
