//! Tests of atmlab-models through the engine: queueing theory, exact cross-checks and
//! scenario handling. One test binary for the crate.

mod access_model;
mod control_crash;
mod queue_theory;
