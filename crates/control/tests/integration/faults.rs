//! Issue 10, acceptance (2): with 5% of the messages between the manager and its switch
//! servers dropped, 5% duplicated, 5% delayed and 5% reordered, in both directions,
//! every call completes or fails cleanly, and after the manager's shutdown the audit of
//! every switch is clean.

use atmlab_control::audit::{AuditOptions, audit, snapshot};
use atmlab_control::cm::core::{CmConfig, CmKind, HopSpec};
use atmlab_control::cm::journal::JournalAt;
use atmlab_control::cm::live::{self, StaticRouter};

use crate::common::line_route;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_manager_takes_back_whole_connections_and_repairs_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    takes_back_whole_connections_and_repairs_the_rest(dir.path().join("cm.sqlite").into()).await;
}

/// The same, with the journal in PostgreSQL (issue 26, item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy tier (scripts/test.sh): a PostgreSQL server started by the test"]
async fn a_restarted_manager_takes_back_whole_connections_from_postgresql() {
    let pg = crate::pg::Postgres::start();
    let url = pg.database("restart");
    takes_back_whole_connections_and_repairs_the_rest(JournalAt::Postgres(url)).await;
}

async fn takes_back_whole_connections_and_repairs_the_rest(journal: JournalAt) {
    use atmlab_control::cm::live::LiveOptions;
    use atmlab_core::ids::{PortId, VcId};
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::switch::{Atomicity, Branch, Command, Commit, ConnectionKind, Release};

    let (net, clients) = crate::common::line3().await;
    let opts = LiveOptions {
        faults: None,
        journal: Some(journal),
        ..LiveOptions::default()
    };
    let config = CmConfig::new(CmKind::Xbind);
    let router = || Box::new(StaticRouter::new().with("a", "b", line_route()));
    let (cm, found) = live::start_with(config.clone(), clients.clone(), router(), opts.clone())
        .await
        .unwrap();
    assert_eq!(
        found,
        vec!["journal: 0 connections, 0 taken back, 0 rolled back"]
    );
    let mut calls = Vec::new();
    for _ in 0..3 {
        let c = cm
            .add("a", "b", TrafficDescriptor::cbr(CellRate(10.0)), 0.0, "j")
            .await
            .unwrap();
        calls.push(c.view);
    }
    // The manager stops without releasing its calls (as a crash would leave them).
    cm.shutdown().await;
    // Meanwhile s2 loses call 2's hop, and s3 holds a cross-connect of the manager that
    // no journaled call explains (a setup half made when it died).
    let s2 = &clients[1].1;
    s2.execute(
        vec![Command::Release(Release {
            connection: calls[1].hops[1].1,
            keep_reserved: false,
        })],
        Atomicity::AllOrNothing,
    )
    .await
    .unwrap();
    let s3 = &clients[2].1;
    let half = s3
        .execute(
            vec![Command::Commit(Commit {
                kind: ConnectionKind::Vc,
                in_port: PortId(0),
                in_id: VcId::new(0, 900),
                branches: vec![Branch {
                    port: PortId(1),
                    id: VcId::new(0, 901),
                }],
                traffic: TrafficDescriptor::cbr(CellRate(10.0)),
                clr: 0.0,
                buffer_cells: 0,
                owner: config.owner.as_str().into(),
                replenish: 0,
                tag: "half".into(),
            })],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    assert!(half[0].is_ok(), "{half:?}");

    let (cm, found) = live::start_with(config, clients.clone(), router(), opts)
        .await
        .unwrap();
    assert_eq!(
        found[0], "journal: 3 connections, 2 taken back, 1 rolled back",
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.contains(&format!("connection {}", calls[1].id)) && f.contains("s2")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("s3:") && f.contains("2 cross-connects")),
        "call 2's surviving hop on s3 and the half-made one: {found:?}"
    );
    let held: Vec<u64> = cm.list().await.iter().map(|c| c.view.id).collect();
    assert_eq!(held, vec![calls[0].id, calls[2].id]);
    assert_eq!(cm.status().await.unwrap().recovery, found);
    // Everything the manager holds is on the switches, and nothing else is.
    let views: Vec<_> = cm.list().await.into_iter().map(|c| c.view).collect();
    let r = audit(
        &views,
        &snapshot(&clients).await.unwrap(),
        AuditOptions::default(),
    );
    assert!(r.is_clean(), "{r}");
    for id in held {
        cm.delete(id).await.unwrap();
    }
    cm.shutdown().await;
    let r = audit(
        &[],
        &snapshot(&clients).await.unwrap(),
        AuditOptions { quiescent: true },
    );
    assert!(r.is_clean(), "{r}");
    net.down().await;
}

/// Changes are journaled before they are answered: a manager restarted on its journal
/// after an AddLeaf, a DropLeaf and a ModifyConnection takes the call back as changed,
/// and can change and release it further.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_manager_takes_back_a_changed_multipoint_call_as_changed() {
    let dir = tempfile::tempdir().unwrap();
    takes_back_a_changed_multipoint_call(dir.path().join("cm.sqlite").into()).await;
}

/// The same, with the journal in PostgreSQL (issue 26, item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy tier (scripts/test.sh): a PostgreSQL server started by the test"]
async fn a_restarted_manager_takes_back_a_changed_call_from_postgresql() {
    let pg = crate::pg::Postgres::start();
    let url = pg.database("changed");
    takes_back_a_changed_multipoint_call(JournalAt::Postgres(url)).await;
}

async fn takes_back_a_changed_multipoint_call(journal: JournalAt) {
    use atmlab_control::cm::live::LiveOptions;
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use atmlab_fabric::live::backend::SwitchBackend;

    let (net, clients) = crate::common::network("tree4.toml").await;
    let opts = LiveOptions {
        faults: None,
        journal: Some(journal),
        ..LiveOptions::default()
    };
    let hop = |s: &str, i: u16, o: u16| HopSpec {
        switch: s.into(),
        in_port: i,
        out_port: o,
    };
    let router = || {
        Box::new(
            StaticRouter::new()
                .with("a", "b", vec![hop("s1", 0, 1), hop("s2", 0, 1)])
                .with("a", "c", vec![hop("s1", 0, 1), hop("s2", 0, 2)])
                .with("a", "d", vec![hop("s1", 0, 2), hop("s3", 0, 1)]),
        )
    };
    let config = CmConfig::new(CmKind::Xbind);
    let cbr = |pcr: f64| TrafficDescriptor::cbr(CellRate(pcr));
    let (cm, _) = live::start_with(config.clone(), clients.clone(), router(), opts.clone())
        .await
        .unwrap();
    let call = cm
        .add_multipoint(
            "a",
            &["b".to_string(), "c".to_string()],
            cbr(100.0),
            0.0,
            "j",
        )
        .await
        .unwrap();
    let id = call.view.id;
    cm.add_leaf(id, "d").await.unwrap();
    cm.drop_leaf(id, "c").await.unwrap();
    cm.modify(id, cbr(300.0), 0.0).await.unwrap();
    cm.shutdown().await;

    let (cm, found) = live::start_with(config.clone(), clients.clone(), router(), opts.clone())
        .await
        .unwrap();
    assert_eq!(
        found[0], "journal: 1 connections, 1 taken back, 0 rolled back",
        "{found:?}"
    );
    let back = cm.get(id).await.unwrap();
    assert_eq!(back.view.leaf_names(), vec!["b", "d"]);
    assert_eq!(back.view.traffic.pcr.per_sec(), 300.0);
    cm.drop_leaf(id, "d").await.unwrap();
    cm.delete(id).await.unwrap();
    cm.shutdown().await;
    for (name, c) in &clients {
        assert!(
            c.connections().await.unwrap().is_empty(),
            "{name} still holds a connection"
        );
        assert!(
            c.reservations().await.unwrap().is_empty(),
            "{name} has reservations left"
        );
    }
    net.down().await;
}

/// No mistake tears a network down (issue 24, item 2): a manager started on a fresh
/// journal (an emptied one, or a mistyped path) while the switches hold its owner's
/// connections refuses to start and names them, and leaves every switch as it was; a
/// journal whose directory does not exist is an error naming it, not a new journal; and
/// only when told to release the strays does it release them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_journal_never_releases_a_running_networks_connections() {
    use atmlab_control::cm::live::LiveOptions;
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;

    let (net, clients) = crate::common::line3().await;
    let dir = tempfile::tempdir().unwrap();
    let journal = |name: &str| LiveOptions {
        journal: Some(dir.path().join(name).into()),
        ..LiveOptions::default()
    };
    let config = CmConfig::new(CmKind::Xbind);
    let router = || Box::new(StaticRouter::new().with("a", "b", line_route()));
    let (cm, _) = live::start_with(
        config.clone(),
        clients.clone(),
        router(),
        journal("cm.sqlite"),
    )
    .await
    .unwrap();
    for _ in 0..3 {
        cm.add("a", "b", TrafficDescriptor::cbr(CellRate(10.0)), 0.0, "j")
            .await
            .unwrap();
    }
    // Stopped as a crash leaves it: the calls stay up.
    cm.shutdown().await;
    let before = snapshot(&clients).await.unwrap();
    let held = |s: &[atmlab_control::audit::SwitchSnapshot]| -> usize {
        s.iter().map(|x| x.connections.len()).sum()
    };
    assert_eq!(held(&before), 9);

    // A mistyped journal: a new file, no connections.
    let e = live::start_with(
        config.clone(),
        clients.clone(),
        router(),
        journal("cm2.sqlite"),
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains("9 cross-connects")
            && e.message.contains("s1: 3")
            && e.message.contains("--release-strays")
            && e.message.contains("cm2.sqlite"),
        "{}",
        e.message
    );
    // A journal in a directory that does not exist.
    let e = live::start_with(
        config.clone(),
        clients.clone(),
        router(),
        journal("nowhere/cm.sqlite"),
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains("nowhere") && e.message.contains("does not exist"),
        "{}",
        e.message
    );
    assert!(!dir.path().join("nowhere").exists());
    let after = snapshot(&clients).await.unwrap();
    assert_eq!(held(&after), 9, "a refused start changed the switches");

    // Told to, it releases them, and the network is empty.
    let (cm, found) = live::start_with(
        config,
        clients.clone(),
        router(),
        LiveOptions {
            release_strays: true,
            ..journal("cm2.sqlite")
        },
    )
    .await
    .unwrap();
    assert!(
        found.iter().any(|f| f.contains("3 cross-connects")),
        "{found:?}"
    );
    cm.shutdown().await;
    let r = audit(
        &[],
        &snapshot(&clients).await.unwrap(),
        AuditOptions { quiescent: true },
    );
    assert!(r.is_clean(), "{r}");
    net.down().await;
}

/// Issue 24, item 2's `--adopt`: a manager with calls up is killed and its journal
/// deleted; restarted without --adopt or --release-strays it refuses, naming the counts;
/// with --adopt it rebuilds every call from the switches' cross-connects of its owner
/// (following each hop's output over the topology's links to the next switch's input
/// and VC), journals them, and releases only a fragment that forms no whole call. The
/// calls can then be released through it, and the audit is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_whose_journal_was_lost_adopts_its_calls_from_the_switches() {
    use atmlab_control::cm::live::LiveOptions;
    use atmlab_core::ids::{PortId, VcId};
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::switch::{Atomicity, Branch, Command, Commit, ConnectionKind};

    let (net, clients) = crate::common::line3().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cm.sqlite");
    let opts = LiveOptions {
        journal: Some(path.clone().into()),
        ..LiveOptions::default()
    };
    let config = CmConfig::new(CmKind::Xbind);
    let router = || Box::new(StaticRouter::new().with("a", "b", line_route()));
    let (cm, _) = live::start_with(config.clone(), clients.clone(), router(), opts.clone())
        .await
        .unwrap();
    let mut calls = Vec::new();
    for pcr in [10.0, 20.0, 30.0] {
        let c = cm
            .add("a", "b", TrafficDescriptor::cbr(CellRate(pcr)), 0.0, "j")
            .await
            .unwrap();
        calls.push(c.view);
    }
    cm.shutdown().await;
    // The journal is lost, and s2 holds a fragment of the owner's (no whole call).
    for f in ["cm.sqlite", "cm.sqlite-wal", "cm.sqlite-shm"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    let frag = clients[1]
        .1
        .execute(
            vec![Command::Commit(Commit {
                kind: ConnectionKind::Vc,
                in_port: PortId(0),
                in_id: VcId::new(0, 900),
                branches: vec![Branch {
                    port: PortId(1),
                    id: VcId::new(0, 901),
                }],
                traffic: TrafficDescriptor::cbr(CellRate(10.0)),
                clr: 0.0,
                buffer_cells: 0,
                owner: config.owner.as_str().into(),
                replenish: 0,
                tag: "fragment".into(),
            })],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    assert!(frag[0].is_ok(), "{frag:?}");

    let e = live::start_with(config.clone(), clients.clone(), router(), opts.clone())
        .await
        .unwrap_err();
    assert!(
        e.message.contains("10 cross-connects")
            && e.message.contains("s2: 4")
            && e.message.contains("--adopt"),
        "{}",
        e.message
    );
    // --adopt needs the topology to follow the links.
    let adopt = LiveOptions {
        adopt: true,
        ..opts.clone()
    };
    let e = live::start_with(config.clone(), clients.clone(), router(), adopt.clone())
        .await
        .unwrap_err();
    assert!(e.message.contains("--adopt"), "{}", e.message);
    let adopt = LiveOptions {
        network: Some(net.topology.view().unwrap()),
        ..adopt
    };
    let (cm, found) = live::start_with(config.clone(), clients.clone(), router(), adopt)
        .await
        .unwrap();
    assert!(
        found
            .iter()
            .any(|f| f.contains("adopted 3 connections (9 cross-connects")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("s2:") && f.contains("1 cross-connects")),
        "the fragment is released: {found:?}"
    );
    let back = cm.list().await;
    assert_eq!(back.len(), 3);
    let mut rates: Vec<f64> = back.iter().map(|c| c.view.traffic.pcr.per_sec()).collect();
    rates.sort_by(f64::total_cmp);
    assert_eq!(rates, vec![10.0, 20.0, 30.0]);
    for (c, orig) in back.iter().zip(&calls) {
        assert_eq!(
            (&c.source, &c.destination),
            (&"a".to_string(), &"b".to_string())
        );
        assert_eq!(c.view.hops.len(), orig.hops.len());
    }
    let views: Vec<_> = back.iter().map(|c| c.view.clone()).collect();
    let r = audit(
        &views,
        &snapshot(&clients).await.unwrap(),
        AuditOptions::default(),
    );
    assert!(r.is_clean(), "{r}");
    cm.shutdown().await;
    // Adopted calls are journaled: a plain restart takes them back.
    let (cm, found) = live::start_with(config, clients.clone(), router(), opts)
        .await
        .unwrap();
    assert_eq!(
        found[0], "journal: 3 connections, 3 taken back, 0 rolled back",
        "{found:?}"
    );
    for c in cm.list().await {
        cm.delete(c.view.id).await.unwrap();
    }
    cm.shutdown().await;
    let r = audit(
        &[],
        &snapshot(&clients).await.unwrap(),
        AuditOptions { quiescent: true },
    );
    assert!(r.is_clean(), "{r}");
    net.down().await;
}
