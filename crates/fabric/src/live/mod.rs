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
//! - [`raw`]: ReTINA's raw-socket interface (paper 001 §3.2.3): the same operations in a
//!   compact binary protocol on TCP, server and client.
//! - [`grpc`]: the gRPC SwitchServer and its client; [`convert`]: IDL <-> core.
//! - [`server`]: a whole switch server process from one configuration file.

pub mod authz;
pub mod backend;
pub mod batch;
pub mod convert;
pub mod dataplane;
pub mod grpc;
pub mod host;
pub mod journal;
pub mod loadgen;
pub mod local;
pub mod raw;
pub mod server;

/// Starts the raw-TCP front end on `addr` under `limits`, with mutual TLS when `tls` is
/// given; returns its address and its counters of refusals.
pub(crate) async fn raw_listen(
    tasks: &mut tokio::task::JoinSet<()>,
    addr: std::net::SocketAddr,
    switch: local::LocalSwitch,
    tls: Option<&atmlab_rpc::tls::TlsIdentity>,
    limits: &raw::RawLimits,
    authz: std::sync::Arc<authz::AuthzStats>,
) -> Result<(std::net::SocketAddr, atmlab_rpc::tls::IncomingStats), crate::error::FabricError> {
    use crate::error::FabricError;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| FabricError::Setup(format!("raw-TCP listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| FabricError::Setup(format!("raw-TCP listener on {addr}: {e}")))?;
    let acceptor = tls
        .map(atmlab_rpc::tls::TlsIdentity::acceptor)
        .transpose()
        .map_err(|e| FabricError::Config(format!("raw-TCP TLS on {local}: {e}")))?;
    let stats = atmlab_rpc::tls::IncomingStats::default();
    let (limits, counted) = (limits.clone(), stats.clone());
    tasks.spawn(async move {
        raw::run_raw_server(listener, switch, acceptor, &limits, counted, authz).await;
    });
    Ok((local, stats))
}
