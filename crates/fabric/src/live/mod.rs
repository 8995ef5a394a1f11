//! The live shells of the switch: what runs the sans-IO [`crate::switch::Switch`] for real,
//! over sockets (paper 000 §II-B: the switch server; paper 001 §3: ReTINA's
//! ConnectionServer over CORBA and over raw sockets).
//!
//! - [`backend`]: [`backend::SwitchBackend`], the operations every front end offers and
//!   every client speaks, so that a gRPC server can sit on a local switch or, as ReTINA's
//!   hybrid, on a raw-TCP client (the proxy).

pub mod backend;
pub mod raw;
