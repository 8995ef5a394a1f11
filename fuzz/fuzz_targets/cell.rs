//! Fuzz target: cell decoders of atmlab-wire. Run: `cargo +nightly fuzz run cell`.
#![no_main]

#[path = "../../crates/wire/tests/integration/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::cell(data));
