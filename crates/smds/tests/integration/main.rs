//! Tests of the SMDS server cores on the in-memory harness, in simulated time, and of
//! the live UDP shell on loopback. One test binary for the crate.

mod fuzz_harness;
#[cfg(feature = "live")]
mod live;
mod neighbours;
mod network;
#[cfg(feature = "live")]
mod peers;
mod robustness;
