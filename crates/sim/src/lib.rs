//! # atmlab-sim: the discrete-event simulation engine
//!
//! Virtual time on `atmlab_core::time`, a deterministic scheduler with cancellable timers,
//! components exchanging typed messages through ports (the BONeS block, the OMNeT++
//! module), RNG streams keyed by (seed, replication, stream), statistics with confidence
//! intervals, scenario files, sweeps and replications.
//!
//! What it is not: no sockets, no wall clock; the models live in `atmlab-models`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod rng;
