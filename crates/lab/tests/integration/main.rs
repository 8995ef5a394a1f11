//! The lab's integration tests: the call generator and the launcher against live
//! managers and switch servers on loopback (one binary, DESIGN.md §7).

mod common;
mod dashboard;
mod erlang;
mod load;
mod metrics;
mod smds_atm;
mod twin;
