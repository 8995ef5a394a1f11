//! # atmlab-lab: the experiments and their reports
//!
//! Everything atmlab *runs to find something out*, over the systems the other crates
//! implement: the five reproductions ([`reproduce`]: xbind, ReTINA, SMDS, RDMA, the
//! ATM-FDDI gateway), `atmlab demo` ([`demo`]), `atmlab soak` ([`soak`]), the call
//! generator ([`callgen`]), the launcher they share ([`launch`]) and one small report
//! toolkit ([`report`]: tables written to markdown and CSV from the same rows, plot
//! series, one file writer, the reports' prose as templates).
//!
//! This is the only crate that knows every paper. What it is not: it holds no logic of
//! the systems themselves (no switch, manager, server or model is defined here), so the
//! systems' crates (`atmlab-control`, `atmlab-smds`, `atmlab-models`) stay libraries of
//! the systems alone and do not depend on the engine's plots. Error type: [`LabError`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod callgen;
pub mod dashboard;
pub mod demo;
mod error;
pub mod launch;
pub mod metrics;
pub mod report;
pub mod reproduce;
pub mod smds_atm;
pub mod soak;
pub mod twin;

pub use error::LabError;
