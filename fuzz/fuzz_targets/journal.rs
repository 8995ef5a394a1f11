//! Fuzz target: the switch journal's replay (atmlab-fabric `live::journal`: a switch
//! server starting on a journal file of arbitrary bytes). Run:
//! `cargo +nightly fuzz run journal`.
#![no_main]

#[path = "../../crates/fabric/tests/integration/journal_harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::journal_replay(data));
