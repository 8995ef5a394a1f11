//! atmlab-fabric integration tests (one test binary per crate, to keep link time down).
//! The tests of the live shells need the default feature `live`; the core's run without.

#[cfg(feature = "live")]
mod batch;
mod common;
mod core;
#[cfg(feature = "live")]
pub mod journal_harness;
#[cfg(feature = "live")]
mod line;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "live")]
mod peers;
#[cfg(feature = "live")]
mod ports;
mod raw;
pub mod raw_harness;
#[cfg(feature = "live")]
mod raw_shell;
#[cfg(feature = "live")]
mod refusals;
#[cfg(feature = "live")]
mod roles;
#[cfg(feature = "live")]
mod services;
#[cfg(feature = "live")]
mod upc;
