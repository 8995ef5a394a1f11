//! Fuzz target: aal5 decoders of atmlab-wire. Run: `cargo +nightly fuzz run aal5`.
#![no_main]

#[path = "../../crates/wire/tests/integration/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::aal5(data));
