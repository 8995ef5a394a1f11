//! Fuzz target: smds decoders of atmlab-wire. Run: `cargo +nightly fuzz run smds`.
#![no_main]

#[path = "../../crates/wire/tests/integration/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::smds(data));
