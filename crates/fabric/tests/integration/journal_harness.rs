//! The switch journal's replay harness, shared by the robustness tests and the cargo-fuzz
//! target `journal` (`fuzz/fuzz_targets/journal.rs` includes this file), so both exercise
//! the same entry point: a switch server starting on a journal file of arbitrary bytes
//! (issue 24: "fuzzing covers ... the journal replay"). It must never panic, and what it
//! accepts must be a table the switch can hold and the file it rewrites must read back
//! as the same table.

use atmlab_core::units::BitRate;
use atmlab_fabric::live::journal::Journal;
use atmlab_fabric::{Switch, SwitchConfig};

/// Starts on `data` as a journal: an error names the file, or the connections come
/// back, are restored into a fresh switch as the server does (each one either restored
/// or refused with an error), and the compacted file reopens to the same connections.
pub fn journal_replay(data: &[u8]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("s1.table");
    std::fs::write(&path, data).expect("the journal is written");
    let (journal, restored) = match Journal::open(&path, false) {
        Ok(x) => x,
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("s1.table"),
                "the error names the file: {text}"
            );
            return;
        }
    };
    drop(journal);
    let mut cfg = SwitchConfig::uniform("s1", 4, BitRate(155.52e6));
    cfg.ports[3] = cfg.ports[3].clone().nni();
    let mut switch = Switch::new(&cfg).expect("a valid switch");
    for c in &restored {
        // A record the switch cannot hold (a port it lacks, a rate it refuses) is an
        // error the server reports; it must not panic.
        let _ = switch.restore(c);
    }
    let (_j, again) = Journal::open(&path, false).expect("the compacted journal reopens");
    assert_eq!(again, restored, "the compacted journal is the same table");
}
