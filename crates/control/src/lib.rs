//! # atmlab-control: the control plane of xbind and ReTINA
//!
//! The objects that set up connections across software switches (paper 000 §II-IV,
//! paper 001 §3-4), each a sans-IO core with a live shell that talks gRPC (`atmlab.v1`,
//! in `atmlab-rpc`) over mutual TLS:
//!
//! - [`names`]: the name service (leased registrations): [`names::Directory`] (core),
//!   its tonic service and client (shell).
//! - [`qos`]: the QoS mapper (paper 000 §II-B step 2): [`qos::QosMapper`] (core), its
//!   service, client and IDL conversions (shell).
//! - [`route`]: the route object (paper 000 §II-B step 3): [`route::RouteObject`]
//!   (core), discovery from the name service and the switches (shell).
//! - [`cm`]: the connection managers (paper 000 §II-C): [`cm::core::CmCore`], sequential
//!   and xbind, with caches, aggregation, recovery and multipoint trees (core);
//!   `cm::live`, `cm::service`, `cm::journal` (shell).
//! - [`tina`]: TINA's LNC / NML-CP / EML-CP hierarchy (paper 001 §1.2.1, §4):
//!   `tina::core` (cores), the performers' gRPC services (shell).
//! - [`audit`]: managers' calls against the switches' tables (a pure check, and its
//!   network shell).
//! - `topology` (feature `topology`): topology files, read by both shells.
//! - `net` (shell): `Network::up`, a whole network of a topology on loopback.
//! - `etcd` (shell): an etcd v3 client (KV, leases, watches, elections) for a registry
//!   and managers that survive a host (issue 26).
//!
//! What it is not: no experiments (they are in `atmlab-lab`), no simulator. The cores do
//! no I/O and read no clock; everything that does sits behind the default feature
//! `live`, so `cargo check --no-default-features` proves the cores free of tokio, tonic,
//! SQLite and serde. Error type: [`ControlError`] (its [`ErrorKind`] is mapped to gRPC
//! codes in the shells only).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod cm;
mod error;
#[cfg(feature = "live")]
pub mod etcd;
pub mod names;
#[cfg(feature = "live")]
pub mod net;
pub mod qos;
pub mod route;
pub mod tina;
#[cfg(feature = "topology")]
pub mod topology;

pub use error::{ControlError, ErrorKind};
