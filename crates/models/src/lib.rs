//! # atmlab-models: simulation models built from the sans-IO cores
//!
//! Will hold: traffic sources (ON-OFF voice, AR(1) video, MMPP, bursty two-state), access
//! control (`LeakyBucket`, `VirtualClock`, `Rdma`), queues and switches, the FDDI
//! `TimedTokenRing`, the ATM-FDDI gateway (`Spp`, `Mpp`, `Npe`), the RDMA backbone, and the
//! scenario kinds `atmlab sim run` understands (papers 003 and 004).
//!
//! What it is not: no I/O; the engine is `atmlab-sim`, the byte formats `atmlab-wire`.
//!
//! Status: empty.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
