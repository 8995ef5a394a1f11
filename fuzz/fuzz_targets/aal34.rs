//! Fuzz target: aal34 decoders of atmlab-wire. Run: `cargo +nightly fuzz run aal34`.
#![no_main]

#[path = "../../crates/wire/tests/integration/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::aal34(data));
