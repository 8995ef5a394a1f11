//! End-to-end tests of the `atmlab` binary: the fixed `wire` interfaces, the subcommand
//! tree, captures checked by a real tshark, switch servers killed mid-stream, and the IDL
//! used from Python. One test binary for the crate.

mod checks;
mod cli;
mod cm_client;
mod cm_restart;
mod common;
mod dashboard;
mod demo;
#[path = "../../../control/tests/integration/etcd_server.rs"]
mod etcd_server;
mod failover;
mod grpcurl;
mod install;
mod json;
mod kill;
mod logs;
mod metrics;
mod mismatch;
mod net;
mod netns;
mod output;
#[path = "../../../control/tests/integration/pg.rs"]
mod pg;
mod progress;
mod prometheus;
mod python;
mod readme;
mod registry;
mod reproduce;
mod reproduce_gateway;
mod reproduce_rdma;
mod reproduce_retina;
mod reproduce_smds;
mod roles;
mod sim;
mod smds;
mod state;
mod tshark;
mod up;
