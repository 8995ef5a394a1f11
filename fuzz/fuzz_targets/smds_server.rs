//! Fuzz target: a whole SMDS server's input (atmlab-smds: L3_PDUs on SNIs, Data and
//! control frames on ISSIs). Run: `cargo +nightly fuzz run smds_server`.
#![no_main]

#[path = "../../crates/smds/tests/integration/fuzz_harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::smds_server(data));
