//! Property tests of atmlab-wire's public API: round trips, error detection, and decoders
//! fed arbitrary bytes. One test binary for the crate keeps link time down.

mod aal5_props;
mod cell_props;
pub mod harness;
mod robustness;
