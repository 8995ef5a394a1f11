//! # atmlab-sim: the discrete-event simulation engine
//!
//! Will hold (see the simulation engine issue): virtual time on `atmlab_core::time`, a
//! deterministic scheduler with cancellable timers, components exchanging typed messages
//! through ports (the BONeS block, the OMNeT++ module), RNG streams keyed by
//! (seed, replication, stream), statistics with confidence intervals, scenario files,
//! sweeps, replications, reports and plots.
//!
//! What it is not: no sockets, no wall clock; models live in `atmlab-models`.
//!
//! Status: empty. Nothing here is usable yet; `atmlab sim` says so.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
