//! # atmlab-control: the control plane of xbind and ReTINA
//!
//! The objects that set up connections across software switches (paper 000 §II-III,
//! paper 001 §3-4), as cores plus live shells that talk gRPC (`atmlab.v1`, in
//! `atmlab-rpc`) over mutual TLS.
//!
//! Built so far:
//! - [`names`]: the name service, where objects find each other: a sans-IO
//!   [`names::Directory`] of leased registrations, the tonic service over it
//!   ([`names::NameServiceImpl`], [`names::serve_names`]), and a client
//!   ([`names::NameClient`]) whose [`names::RenewalHandle`] keeps a registration alive.
//! - [`clock`]: [`clock::LiveClock`], the OS monotonic clock mapped onto
//!   `atmlab_core::time::Instant` for live shells.
//! - [`net`]: topology files and `Network::up`, the whole network on loopback.
//! - [`qos`]: the QoS mapper (paper 000 §II-B step 2): [`qos::QosMapper`], the sans-IO
//!   mapping of user QoS (frames) to the cell-level contract and back; served by
//!   [`qos::QosMapperService`], called through [`qos::RemoteQosMapper`]; [`qos::MapQos`]
//!   and [`qos::Mapper`] let a connection manager use it collocated or remote.
//! - [`route`]: the route object (paper 000 §II-B step 3): [`route::RouteObject`], a
//!   sans-IO link-state view with QoS-constrained fewest-hop routes and k loop-free
//!   alternates; [`route::discover`] builds the view from the name service and the switch
//!   servers, [`route::spawn_refresher`] keeps it fresh.
//! - [`tina`]: TINA's connection management as ReTINA measured it (paper 001 §1.2.1,
//!   §4.2): the LNC over a recursive hierarchy of NML-CPs over one EML-CP per switch,
//!   every invocation a gRPC call, sequential or parallel sub-connection setup.
//!
//! Cores here do no I/O and read no clock; shells (tokio, tonic) are the only code that
//! knows protobuf. Error type: [`ControlError`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
#[cfg(feature = "live")]
pub mod clock;
pub mod cm;
mod error;
pub mod names;
#[cfg(feature = "live")]
pub mod net;
pub mod qos;
pub mod route;
#[cfg(feature = "live")]
pub mod tina;

pub use error::{ControlError, ErrorKind};
