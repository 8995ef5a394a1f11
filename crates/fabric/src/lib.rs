//! # atmlab-fabric: the software ATM switch
//!
//! The switch that xbind's SwitchServer (paper 000 §II-B) and ReTINA's ConnectionServer
//! (paper 001 §3) control, built as a sans-IO core:
//!
//! - [`switch::Switch`]: ports with link rates, VPI/VCI ranges, bandwidth and buffers; the
//!   translation table (VC and VP cross-connects, point-to-multipoint branches); xbind's
//!   two-phase identifier allocation (reserve, commit, release); connection admission
//!   control ([`cac`]); the per-cell switching function with per-port output queues and
//!   CLP-based discard; counters per port and connection.
//! - [`config`]: the switch's configuration, as plain data.
//! - [`ops`]: the plain types of the switch-server operations that are not commands (what
//!   Describe answers, what a batch returns).
//! - [`raw`]: the raw switch protocol (paper 001 §3.2.3), a compact binary framing of the
//!   switch-server operations, as a sans-IO codec; its tokio shell is `live::raw`.
//!
//! and its live shells, in `live` (the default cargo feature `live`): the shared switch
//! with its journal and event feed, the UDP cell data plane, the AAL5 host, the gRPC
//! SwitchServer and its client, the raw-TCP server and client, and the switch server
//! process assembled from a configuration file.
//!
//! The core modules (`switch`, `cac`, `config`, `ops`, `raw`, `error`) do no I/O, read no
//! clock and know no protobuf; only `live` does, and the core does not depend on it:
//! with `default-features = false` the crate builds without tokio, tonic or sockets.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cac;
pub mod config;
pub mod error;
#[cfg(feature = "live")]
pub mod live;
pub mod ops;
pub mod raw;
pub mod switch;

pub use config::{Interface, PortConfig, SwitchConfig};
pub use error::{ErrorKind, FabricError};
pub use switch::{
    Atomicity, Branch, BranchChange, CellFate, Command, Commit, Connection, ConnectionKind, Modify,
    Policing, PortCounters, PortStatus, Release, Reply, Reservation, Reserve, Switch, Unreserve,
};
