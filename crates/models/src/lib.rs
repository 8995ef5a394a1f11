//! # atmlab-models: simulation models built from the sans-IO cores
//!
//! Traffic sources ([`source`]); later access control (`LeakyBucket`, `VirtualClock`,
//! `Rdma`), queues and switches, the FDDI `TimedTokenRing`, the ATM-FDDI gateway (`Spp`,
//! `Mpp`, `Npe`), the RDMA backbone, and the scenario kinds `atmlab sim run` understands
//! (papers 003 and 004).
//!
//! What it is not: no I/O; the engine is `atmlab-sim`, the byte formats `atmlab-wire`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod source;

mod error;
pub use error::ModelsError;
