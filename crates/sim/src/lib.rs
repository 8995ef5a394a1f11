//! # atmlab-sim: the discrete-event simulation engine
//!
//! Virtual time on `atmlab_core::time`, a deterministic event set with FIFO lanes and
//! cancellable events ([`event_set`]), components exchanging typed messages through ports
//! ([`component`]), RNG streams keyed by (seed, replication, stream) ([`rng`]), statistics
//! with confidence intervals, scenario files, sweeps and replications.
//!
//! What it is not: no sockets, no wall clock; the models live in `atmlab-models`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod component;
pub mod event_set;
pub mod model;
pub mod plot;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod shard;
pub mod stats;

mod error;
pub use error::SimError;
