//! The live shells of the switch: what runs the sans-IO [`crate::switch::Switch`] for real,
//! over sockets (paper 000 §II-B: the switch server; paper 001 §3: ReTINA's
//! ConnectionServer over CORBA and over raw sockets).
//!
//! - [`backend`]: [`backend::SwitchBackend`], the operations every front end offers and
//!   every client speaks, so that a gRPC server can sit on a local switch or, as ReTINA's
//!   hybrid, on a raw-TCP client (the proxy).
//! - [`local`]: [`local::LocalSwitch`], the switch behind a lock, with its journal and
//!   event feed; every front end and the data plane share it.
//! - [`journal`]: what a switch keeps across a restart of its server.
//! - [`dataplane`]: UDP cell ports.
//! - [`host`]: an end system sending and receiving AAL5 frames.

pub mod backend;
pub mod convert;
pub mod dataplane;
pub mod grpc;
pub mod host;
pub mod journal;
pub mod local;
pub mod server;

/// Starts the raw-TCP front end on `addr` (filled in when the raw protocol lands).
pub(crate) async fn raw_listen(
    _tasks: &mut tokio::task::JoinSet<()>,
    addr: std::net::SocketAddr,
    _switch: local::LocalSwitch,
    _tls: Option<&atmlab_rpc::tls::TlsIdentity>,
) -> Result<std::net::SocketAddr, crate::error::FabricError> {
    Err(crate::error::FabricError::Config(format!(
        "raw-TCP interface on {addr}: not built yet"
    )))
}
