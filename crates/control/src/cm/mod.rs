//! Connection management (paper 000 §II-C, §III, §IV): the connection manager core and
//! its parts, and the live shell that runs it against switch servers over gRPC.
//!
//! - [`core`]: [`core::CmCore`], the sans-IO state machine of both kinds (`sequential`,
//!   `xbind`), with recovery.
//! - [`cache`]: [`cache::VciCache`], identifiers reserved ahead per (switch, port).
//! - [`aggregator`]: [`aggregator::MessageAggregator`], one per target switch server.
//! - [`adaptive`]: the arrival-rate estimate and load regions that set T (§IV-B).
//! - [`journal`]: the SQLite journal of established connections, written before the
//!   caller is answered, read back by a restarted manager.
//! - [`faults`]: seeded message faults (drop, duplicate, delay, reorder) on the switch
//!   links, for tests and `atmlab cm serve --faults`.
//! - [`dimension`]: the M/G/∞ cache dimensioning and invocation counts of §IV (Table I,
//!   Figs. 9-10), and [`dimension::NvProbe`], which measures `N_v` on a running manager.
//! - [`tree`]: point-to-multipoint connection trees (identifier slots, AddLeaf's graft,
//!   DropLeaf's prune), shared by every manager kind.

pub mod adaptive;
pub mod aggregator;
pub mod cache;
pub mod core;
pub mod dimension;
pub mod faults;
#[cfg(feature = "live")]
pub mod journal;
#[cfg(feature = "live")]
pub mod live;
pub mod overload;
pub mod routes;
#[cfg(feature = "live")]
pub mod server;
#[cfg(feature = "live")]
pub mod service;
pub mod tree;
