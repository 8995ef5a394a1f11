//! # atmlab-smds: the SMDS connectionless server
//!
//! Paper 002 (Jézéquel & Guerber, "Performance issues in implementing a portable SMDS
//! server", IFIP HPN 1995): servers that switch SMDS Level 3 PDUs between subscriber
//! (SNI), inter-switching-system (ISSI) and inter-carrier (ICI) interfaces by E.164
//! address, with address screening, link-state routing, congestion management, and a
//! parallel (SPMD) form.
//!
//! Sans-IO cores (no socket, thread or clock; time is passed in):
//! - [`fib`]: [`fib::Fib`] (forwarding state) and [`fib::Forwarder`] (the per-PDU header
//!   processing of Table 1), [`fib::Counters`];
//! - [`linkstate`]: [`linkstate::LinkState`], hellos, LSAs, reliable flooding, database
//!   synchronisation, Dijkstra ([`linkstate::spf`]);
//! - [`cmp`]: [`cmp::Cmp`], the Congestion Management Protocol;
//! - [`server`]: [`server::Control`] and [`server::Server`], a whole server;
//! - [`msg`]: the ISSI frames (Data envelope, Hello, LSU, LSAck, CMP).
//!
//! Around them: [`harness`] runs many servers in simulated time (tests, the
//! reproduction); [`parallel`] is the parallel server and its throughput measurement,
//! [`workload`] the PDUs and networks it measures with. Behind the default feature
//! `live`: `config` reads server and topology files (serde, TOML) and `live` is the
//! tokio UDP shell (`atmlab smds serve`, `send`, `recv`, `net up`); without it the crate
//! builds with no tokio and no serde, which CI checks.
//!
//! Not here: the byte formats (L3_PDU, E.164, AAL3/4) are in `atmlab-wire`; the
//! reproduction of paper 002 is in `atmlab-lab`; this crate has no gRPC and no cell
//! switching. Error type: [`SmdsError`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cmp;
#[cfg(feature = "live")]
pub mod config;
mod error;
pub mod fib;
pub mod harness;
pub mod ids;
pub mod linkstate;
#[cfg(feature = "live")]
pub mod live;
pub mod msg;
pub mod parallel;
pub mod server;
pub mod workload;

pub use error::SmdsError;
pub use ids::{IfaceId, IfaceKind, ServerId};
