//! The control plane's integration tests: one binary (DESIGN.md §7), a module per
//! part, the helpers they share in [`common`].

mod cm_core;
mod cm_live;
mod common;
mod etcd;
mod etcd_server;
mod faults;
mod journal;
mod multipoint;
mod names;
mod pg;
mod qos;
mod route;
mod tina;
