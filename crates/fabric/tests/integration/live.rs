//! The live data plane and journal, in process: real UDP sockets on loopback.

use std::time::Duration;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::units::BitRate;
use atmlab_fabric::live::dataplane::DataPlane;
use atmlab_fabric::live::host::HostPort;
use atmlab_fabric::live::journal::Journal;
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::*;

use crate::common::{self, any_addr};

/// A cross-connect of 10,000 cells/s owned by "test", tagged (the journal keeps tags).
fn p2p(in_port: u16, in_id: VcId, out_port: u16, out_id: VcId) -> Command {
    Command::Commit(Commit {
        owner: "test".into(),
        tag: "t".into(),
        ..common::commit(in_port, in_id, out_port, out_id, 10_000.0)
    })
}

#[tokio::test]
async fn frames_cross_one_switch_on_the_translated_vc() {
    let sw = Switch::new(&SwitchConfig::uniform("s1", 2, BitRate(155.52e6))).unwrap();
    let local = LocalSwitch::new(sw, None);
    let dp = DataPlane::bind(
        &[(PortId(0), any_addr(), None), (PortId(1), any_addr(), None)],
        24,
    )
    .await
    .unwrap();
    let addrs = dp.local_addrs();
    let _tasks = dp.spawn(local.clone());
    let r = local
        .execute_now(
            &[p2p(0, VcId::new(0, 100), 1, VcId::new(0, 200))],
            Atomicity::AllOrNothing,
        )
        .unwrap();
    assert!(r[0].is_ok());
    let mut b = HostPort::attach(any_addr(), addrs[1].1, BitRate(155.52e6))
        .await
        .unwrap();
    let mut a = HostPort::attach(any_addr(), addrs[0].1, BitRate(155.52e6))
        .await
        .unwrap();
    common::eventually("both attachments are learned", || {
        dp.peers().iter().all(|(_, p)| p.is_some())
    })
    .await;
    let frames: Vec<Vec<u8>> = (0..50u32)
        .map(|i| (0..(i * 37 % 3000 + 1)).map(|k| (k * i) as u8).collect())
        .collect();
    for f in &frames {
        a.send_frame(VcId::new(0, 100), f).await.unwrap();
    }
    for f in &frames {
        let got = b
            .recv_frame(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("frame arrives");
        assert_eq!(got.vc, VcId::new(0, 200));
        assert_eq!(&got.sdu, f);
    }
    assert_eq!(b.errors, 0);
}

#[test]
fn journal_replays_commits_and_releases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1.table");
    let cfg = SwitchConfig::uniform("s1", 3, BitRate(155.52e6));
    let (j, restored) = Journal::open(&path, false).unwrap();
    assert!(restored.is_empty());
    let local = LocalSwitch::new(Switch::new(&cfg).unwrap(), Some(j));
    let mut cmds: Vec<Command> = (0..10u16)
        .map(|i| p2p(0, VcId::new(0, 40 + i), 1 + i % 2, VcId::new(0, 40 + i)))
        .collect();
    cmds.push(Command::Release(Release {
        connection: 3,
        keep_reserved: false,
    }));
    cmds.push(Command::AddBranch(BranchChange {
        connection: 4,
        branch: Branch {
            port: PortId(2),
            id: VcId::new(1, 77),
        },
    }));
    let out = local
        .execute_now(&cmds, Atomicity::ContinueOnError)
        .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
    let before = local.with_switch(|s| s.connections());
    drop(local);
    let (_j, restored) = Journal::open(&path, false).unwrap();
    let mut fresh = Switch::new(&cfg).unwrap();
    for c in &restored {
        fresh.restore(c).unwrap();
    }
    assert_eq!(fresh.connections(), before);
}

/// A journal whose last record was torn (the switch died writing it: no newline) still
/// opens, without that record, and is rewritten whole; a damaged record anywhere else is
/// an error naming the file and the line (issue 24, item 6).
#[test]
fn a_torn_last_record_is_dropped_and_a_bad_one_elsewhere_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1.table");
    let cfg = SwitchConfig::uniform("s1", 3, BitRate(155.52e6));
    let (j, _) = Journal::open(&path, false).unwrap();
    let local = LocalSwitch::new(Switch::new(&cfg).unwrap(), Some(j));
    let cmds: Vec<Command> = (0..3u16)
        .map(|i| p2p(0, VcId::new(0, 40 + i), 1, VcId::new(0, 40 + i)))
        .collect();
    let out = local
        .execute_now(&cmds, Atomicity::ContinueOnError)
        .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
    drop(local);
    let whole = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    assert_eq!(lines.len(), 3);
    // Torn inside the third record: two connections come back, and the file is whole.
    let cut = whole.len() - lines[2].len() / 2 - 1;
    std::fs::write(&path, &whole[..cut]).unwrap();
    let (_j, restored) = Journal::open(&path, false).unwrap();
    assert_eq!(restored.len(), 2);
    assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
    // A torn release ("R 12" cut to "R 1") is dropped too, not read as another release.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("R 1");
    std::fs::write(&path, &text).unwrap();
    let (_j, restored) = Journal::open(&path, false).unwrap();
    assert_eq!(restored.len(), 2);
    // Damage in the middle is refused, naming the file and line.
    let text = std::fs::read_to_string(&path).unwrap();
    let damaged = text.replacen(' ', "#", 1);
    std::fs::write(&path, damaged).unwrap();
    let e = Journal::open(&path, false).unwrap_err().to_string();
    assert!(e.contains("s1.table") && e.contains("line 1"), "{e}");
}

/// A UDP port already taken is named: the switch port and the address, not only the
/// operating system's "Address already in use" (issue 27, item 6).
#[tokio::test]
async fn a_taken_udp_port_is_named() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = match DataPlane::bind(
        &[(PortId(0), any_addr(), None), (PortId(3), addr, None)],
        24,
    )
    .await
    {
        Ok(_) => panic!("bound a taken port"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("port 3") && e.contains(&addr.to_string()), "{e}");
}

/// Replays the seed corpus of the `journal` fuzz target (and any crash inputs committed
/// beside it): each file a switch server might start on.
#[test]
fn journal_fuzz_corpus_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal");
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("missing seed corpus {}: {e}", dir.display()));
    let mut n = 0;
    for e in entries {
        let data = std::fs::read(e.unwrap().path()).unwrap();
        crate::journal_harness::journal_replay(&data);
        n += 1;
    }
    assert!(n > 0, "the seed corpus is empty");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// The journal harness on mutated records, so CI exercises it without nightly: a
    /// valid journal with one byte changed, and random lines of the record's alphabet.
    #[test]
    fn the_journal_harness_never_panics(
        at in 0usize..400,
        byte in proptest::prelude::any::<u8>(),
        noise in "[CR0-9a-f ./:,\n-]{0,120}",
    ) {
        let mut valid = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal/valid"),
        )
        .unwrap();
        let n = valid.len();
        valid[at % n] = byte;
        crate::journal_harness::journal_replay(&valid);
        crate::journal_harness::journal_replay(noise.as_bytes());
    }
}
