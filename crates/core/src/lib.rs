//! # atmlab-core: the shared vocabulary of atmlab
//!
//! Every other crate speaks these types: virtual and live time ([`time::Instant`],
//! [`time::Duration`], integer picoseconds), link rates and their human spelling
//! ([`units::BitRate`], `"155.52 Mb/s"`), the connection identifiers of an ATM port
//! ([`ids::Vpi`], [`ids::Vci`], [`ids::PortId`]), and traffic descriptors and service
//! classes ([`traffic::TrafficDescriptor`], [`traffic::ServiceClass`]), and the GCRA
//! conformance test every usage parameter control uses ([`gcra::Gcra`]).
//!
//! What it is not: no I/O, no clock, no threads, no tokio, no serde. The shells
//! (live and simulated) hand time to the cores as an [`time::Instant`]; only they read
//! the OS clock, through `clock::LiveClock`, which exists only with the `clock` feature
//! that only the live shells enable. See DESIGN.md §2, "one core, two shells".

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "clock")]
pub mod clock;
pub mod gcra;
pub mod ids;
pub mod time;
pub mod traffic;
pub mod units;

mod error;
pub use error::CoreError;
