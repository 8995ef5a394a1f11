//! # atmlab-control: the control plane of xbind and ReTINA
//!
//! Will hold (see the connection management issues): the `.proto` IDL (`atmlab.v1`), the
//! name service, the `QosMapper`, the `RouteObject`, the connection managers (sequential,
//! xbind with `VciCache` and `MessageAggregator`, TINA's LNC / NML-CP / EML-CP hierarchy),
//! the journal, and the call generator (paper 000 §II-III, paper 001 §3-4).
//!
//! Status: empty; `atmlab cm`, `names` and `callgen` say so.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
