//! Fuzz target: the raw switch protocol's frame decoders (atmlab-fabric `raw`). Run:
//! `cargo +nightly fuzz run raw_frame`.
#![no_main]

#[path = "../../crates/fabric/tests/integration/raw_harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::raw_frame(data));
