//! # atmlab-fabric: the software ATM switch
//!
//! Will hold (see the live switch issue): the sans-IO switch core (ports, VPI/VCI
//! translation table, two-phase identifier allocation, connection admission control, the
//! per-cell switching function with output queues and CLP discard, counters), the live
//! UDP cell ports, and the `SwitchServer` (gRPC and raw TCP) of xbind (paper 000 §II) and
//! ReTINA's ConnectionServer (paper 001 §3).
//!
//! Status: empty; `atmlab switch` says so.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
