//! Recovery and inspection in the core (paper 000 §II-C; issue 10): the audit of a
//! network against a manager's calls, reconciling with a switch that came back, releases
//! that linger until their switch answers, and sweeps for this owner's strays.

use super::*;

fn snapshots(net: &Net) -> Vec<atmlab_control::audit::SwitchSnapshot> {
    let mut names: Vec<&String> = net.switches.keys().collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let s = &net.switches[n];
            atmlab_control::audit::SwitchSnapshot {
                name: n.clone(),
                description: atmlab_fabric::live::backend::Description {
                    name: n.clone(),
                    ports: s.ports(),
                    peers: Vec::new(),
                    connections: s.connections().len() as u32,
                },
                connections: s.connections(),
                reservations: s.reservations(),
            }
        })
        .collect()
}

#[test]
fn the_audit_finds_missing_hops_orphans_bad_accounting_and_held_identifiers() {
    use atmlab_control::audit::{AuditOptions, Finding, audit};
    let mut net = Net::new(None);
    let mut core = CmCore::new(xbind()).unwrap();
    let a = core.add(net.now, call(100.0));
    net.settle(&mut core);
    assert!(established(&net, a));
    let views = core.views();
    let running = AuditOptions { quiescent: false };
    let r = audit(&views, &snapshots(&net), running);
    assert!(r.is_clean(), "{r}");
    assert_eq!((r.switches, r.connections, r.calls), (3, 3, 1));

    // The manager forgets the call: three orphans.
    let r = audit(&[], &snapshots(&net), running);
    assert_eq!(
        r.findings
            .iter()
            .filter(|f| matches!(f, Finding::Orphan { .. }))
            .count(),
        3,
        "{r}"
    );
    // The manager holds a hop the switch lost, and one it recorded wrongly.
    let mut wrong = views.clone();
    wrong[0].hops[0].1 += 1000;
    wrong[0].hops[1].3 = atmlab_core::ids::VcId::new(0, 4000);
    let r = audit(&wrong, &snapshots(&net), running);
    assert!(
        r.findings
            .iter()
            .any(|f| matches!(f, Finding::Missing { switch, .. } if switch == "s1")),
        "{r}"
    );
    assert!(
        r.findings
            .iter()
            .any(|f| matches!(f, Finding::Mismatch { switch, .. } if switch == "s2")),
        "{r}"
    );
    // A port whose books do not add up.
    let mut snaps = snapshots(&net);
    snaps[1].description.ports[1].allocated += 5.0;
    let r = audit(&views, &snaps, running);
    assert!(
        r.findings.iter().any(|f| matches!(f, Finding::Accounting { switch, port: 1, what } if switch == "s2" && what.contains("admitted"))),
        "{r}"
    );
    // Quiescent: the manager's cached identifiers are a leak until given back.
    core.delete(net.now, a);
    net.settle(&mut core);
    let quiet = AuditOptions { quiescent: true };
    let r = audit(&[], &snapshots(&net), quiet);
    assert!(
        r.findings
            .iter()
            .all(|f| matches!(f, Finding::Reserved { .. }))
            && !r.is_clean(),
        "{r}"
    );
    core.drain_caches(net.now);
    net.settle(&mut core);
    let r = audit(&[], &snapshots(&net), quiet);
    assert!(r.is_clean(), "{r}");
    assert!(r.to_string().ends_with("clean"));
}

#[test]
fn reconcile_completes_a_commit_whose_answer_died_with_the_switch_and_releases_strays() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(xbind()).unwrap();
    let warm = core.add(net.now, call(100.0));
    net.settle(&mut core);
    assert!(established(&net, warm));
    // The next call's commit at s2 is applied, but s2 dies before answering: its answer
    // and its memory of answers are gone.
    let id = core.add(net.now, call(100.0));
    let mut lost = None;
    while let Some(t) = core.poll_transmit(net.now) {
        let sw = net.switches.get_mut(&*t.switch).unwrap();
        for (req, cmd) in t.commands {
            let r = sw.apply(&cmd);
            if &*t.switch == "s2" {
                lost = Some(req);
            } else {
                core.handle_reply(net.now, req, r);
            }
        }
    }
    assert!(lost.is_some());
    // And s2 holds a cross-connect of this manager that no call explains.
    let stray = net
        .switches
        .get_mut("s2")
        .unwrap()
        .apply(&atmlab_fabric::switch::Command::Commit(
            atmlab_fabric::switch::Commit {
                kind: atmlab_fabric::switch::ConnectionKind::Vc,
                in_port: PortId(0),
                in_id: atmlab_core::ids::VcId::new(0, 3000),
                branches: vec![atmlab_fabric::switch::Branch {
                    port: PortId(1),
                    id: atmlab_core::ids::VcId::new(0, 3001),
                }],
                traffic: TrafficDescriptor::cbr(CellRate(1.0)),
                clr: 0.0,
                buffer_cells: 0,
                owner: xbind().owner.into(),
                replenish: 0,
                tag: "stray".into(),
            },
        ));
    assert!(stray.is_ok());
    // s2 is back: the manager reconciles with what it lists.
    let listed = net.switches["s2"].connections();
    let (completed, released) = core.reconcile(net.now, "s2", &listed);
    assert_eq!((completed, released), (1, 1));
    while let Some(e) = core.poll_event() {
        net.events.push(e);
    }
    assert!(
        established(&net, id),
        "the commit's result completed the call"
    );
    net.settle(&mut core);
    assert_eq!(
        net.switches["s2"].connections().len(),
        2,
        "the stray is gone"
    );
    for c in [warm, id] {
        core.delete(net.now, c);
    }
    net.settle(&mut core);
    assert!(net.empty());
    core.drain_caches(net.now);
    net.settle(&mut core);
    assert_eq!(net.reservations(), 0);
}

#[test]
fn a_release_no_switch_answered_lingers_until_the_switch_is_back() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(xbind()).unwrap();
    let a = core.add(net.now, call(100.0));
    net.settle(&mut core);
    assert!(established(&net, a));
    net.dead.insert("s2".into());
    core.delete(net.now, a);
    net.settle(&mut core);
    // Every re-send goes unanswered; the call ends for its caller.
    for _ in 0..10 {
        net.advance(&mut core, Duration::from_secs(3));
        net.settle(&mut core);
    }
    assert!(
        net.events
            .iter()
            .any(|e| matches!(e, CallEvent::Released { call } if *call == a))
    );
    assert!(
        core.lingering() + core.in_flight() >= 1,
        "s2's release waits to be re-sent, or is out again"
    );
    assert_eq!(net.switches["s2"].connections().len(), 1);
    // s2 is back (say, restarted from its journal with the hop): the release reaches it.
    net.dead.clear();
    for _ in 0..10 {
        net.advance(&mut core, Duration::from_secs(3));
        net.settle(&mut core);
    }
    assert_eq!(core.lingering() + core.in_flight(), 0);
    assert!(net.empty(), "the lingering release removed the hop");
}

/// A commit given up after its retries, every answer of which was lost, left its
/// connection on the switch; the sweep finds it and releases it as the late answer would
/// have been. A connection of this owner that nothing explains is released by the
/// second sweep that finds it, not the first (it could be in flight); a stopping
/// manager's last sweep releases at once. Established calls are never touched.
#[test]
fn sweeps_release_what_a_lost_commit_left_and_unexplained_strays_but_no_call() {
    use atmlab_core::ids::VcId;
    use atmlab_fabric::switch::{Branch, Command, Commit, ConnectionKind};
    for kind in [CmKind::Xbind, CmKind::Sequential] {
        let mut net = Net::new(None);
        let mut core = CmCore::new(CmConfig {
            command_timeout: Duration::from_millis(10),
            max_retries: 2,
            kind,
            ..xbind()
        })
        .unwrap();
        // A call that stays up throughout.
        let kept = core.add(net.now, call(10.0));
        net.settle(&mut core);
        assert!(established(&net, kept), "{kind:?}");
        let conns_of = |net: &Net, sw: &str| net.switches[sw].connections();
        let before: Vec<usize> = ["s1", "s2", "s3"]
            .iter()
            .map(|s| conns_of(&net, s).len())
            .collect();

        // s2 answers nothing: the second call's commit there runs, but the manager gives
        // it up and rolls the call back; the connection stays on s2. (xbind: its
        // identifiers come from caches, so the commit is the first thing s2 sees; the
        // sequential manager's Reserve would be lost first, and no commit sent.)
        if kind == CmKind::Xbind {
            net.mute.insert("s2".into());
            let lost = core.add(net.now, call(10.0));
            for _ in 0..20 {
                net.settle(&mut core);
                net.advance(&mut core, Duration::from_millis(11));
            }
            net.mute.clear();
            net.settle(&mut core);
            assert!(
                net.events
                    .iter()
                    .any(|e| matches!(e, CallEvent::Failed { call, .. } if *call == lost)),
                "{kind:?}: {:?}",
                net.events
            );
            assert_eq!(
                conns_of(&net, "s2").len(),
                before[1] + 1,
                "{kind:?}: the orphan"
            );
            let listing = conns_of(&net, "s2");
            assert_eq!(core.sweep(net.now, "s2", &listing, true), 1, "{kind:?}");
            net.settle(&mut core);
            assert_eq!(conns_of(&net, "s2").len(), before[1], "{kind:?}");
        }

        // Someone with our owner name left a connection on s3 (a journal's stray): the
        // first periodic sweep only notes it, the second releases it.
        let stray = Command::Commit(Commit {
            kind: ConnectionKind::Vc,
            in_port: PortId(0),
            in_id: VcId::new(0, 3_000),
            branches: vec![Branch {
                port: PortId(1),
                id: VcId::new(0, 3_000),
            }],
            traffic: TrafficDescriptor::cbr(CellRate(1.0)),
            clr: 0.0,
            buffer_cells: 0,
            owner: core.config().owner.as_str().into(),
            replenish: 0,
            tag: "stray".into(),
        });
        for confirm in [true, false] {
            net.switches.get_mut("s3").unwrap().apply(&stray).unwrap();
            let listing = conns_of(&net, "s3");
            if confirm {
                assert_eq!(core.sweep(net.now, "s3", &listing, true), 0, "{kind:?}");
                net.settle(&mut core);
                assert_eq!(conns_of(&net, "s3").len(), before[2] + 1);
            }
            assert_eq!(core.sweep(net.now, "s3", &listing, confirm), 1, "{kind:?}");
            net.settle(&mut core);
            assert_eq!(conns_of(&net, "s3").len(), before[2], "{kind:?}");
        }

        // An identifier reserved for our owner that no cache or call holds (a fill whose
        // answers were lost): noted by the first sweep, given back by the second; the
        // caches' and the call's identifiers stay reserved.
        let reserved = |net: &Net| net.switches["s3"].reservations().len();
        let cached = reserved(&net);
        let stray_id = Command::Reserve(atmlab_fabric::switch::Reserve {
            port: PortId(1),
            count: 1,
            owner: core.config().owner.as_str().into(),
            ..Default::default()
        });
        net.switches
            .get_mut("s3")
            .unwrap()
            .apply(&stray_id)
            .unwrap();
        let listing = net.switches["s3"].reservations();
        assert_eq!(core.sweep_reservations(net.now, "s3", &listing, true), 0);
        assert_eq!(core.sweep_reservations(net.now, "s3", &listing, true), 1);
        net.settle(&mut core);
        assert_eq!(reserved(&net), cached, "{kind:?}");

        // The call kept is whole, and releases cleanly.
        for (i, sw) in ["s1", "s2", "s3"].iter().enumerate() {
            assert_eq!(conns_of(&net, sw).len(), before[i], "{kind:?}: {sw}");
        }
        assert!(core.delete(net.now, kept));
        net.settle(&mut core);
        assert!(net.empty(), "{kind:?}");
    }
}
