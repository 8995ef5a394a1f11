//! atmlab-fabric integration tests (one test binary per crate, to keep link time down).

mod core;
mod line;
mod live;
mod raw;
pub mod raw_harness;
mod refusals;
mod services;
