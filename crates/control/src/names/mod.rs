//! The name service: where the objects of the control plane find each other.
//!
//! xbind (paper 000 §II) and ReTINA (paper 001 §3) locate their CORBA objects (switch
//! servers, connection managers, route objects, QoS mappers) through the CORBA naming
//! service. atmlab's equivalent is `atmlab.v1.NameService` (`names.proto`), with one
//! addition the papers' closed testbeds did without: **leases**. An object registers its
//! name, kind and address for a lease and renews it; when it stops renewing (it crashed,
//! or its machine did) the registration lapses, so a dead switch server drops out of the
//! directory by itself instead of being handed to connection managers forever.
//!
//! - [`Directory`]: the sans-IO core. Inputs are `register`, `renew`, `unregister`,
//!   `resolve`, `list` and `expire`, each with the current time; [`Directory::poll_timeout`]
//!   says when the next lease lapses. An entry whose lease has run out is invisible at
//!   once, whether or not `expire` has run yet, so answers never depend on when a shell
//!   gets round to sweeping.
//! - [`NameServiceImpl`] and [`serve_names`]: the live shell, a tonic service over a
//!   mutex-guarded `Directory` and a [`LiveClock`](atmlab_core::clock::LiveClock), served over
//!   mutual TLS through `atmlab_rpc::serve`; a sweeper task removes lapsed
//!   entries and logs each one.
//! - [`NameClient`]: a client; [`NameClient::register_and_renew`] keeps a registration
//!   alive from a background task until its [`RenewalHandle`] is stopped or dropped.
//!   Given `etcd://HOST:PORT,...` instead of a name service's URL, the same client keeps
//!   the directory in an etcd cluster (`etcd.rs`: its own leases and keep-alives), the
//!   registry that survives a host (issue 26); the in-process service stays the
//!   embedded default.

#[cfg(feature = "live")]
mod client;
mod directory;
#[cfg(feature = "live")]
mod etcd;
#[cfg(feature = "live")]
mod service;

#[cfg(feature = "live")]
pub use client::{NameClient, RenewalHandle};
pub use directory::{
    Directory, DirectoryConfig, DirectoryStats, ObjectInfo, ObjectKind, Registration,
};
#[cfg(feature = "live")]
pub use service::{NameServiceImpl, serve_names};
