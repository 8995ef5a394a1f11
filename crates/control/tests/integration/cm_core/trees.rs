//! Point-to-multipoint calls and their changes in the core (issue 9): a tree forks
//! where its routes part, leaves are grafted and pruned, a refused change is undone,
//! and a contract changes on every hop or none.

use super::*;

fn hop(s: &str, i: u16, o: u16) -> HopSpec {
    HopSpec {
        switch: s.into(),
        in_port: i,
        out_port: o,
    }
}

/// Routes from the source at s1 port 0: a and b behind s2 (ports 1, 2), c behind s3,
/// d behind s2 port 3.
fn leaf_route(leaf: &str) -> Vec<HopSpec> {
    match leaf {
        "a" => vec![hop("s1", 0, 1), hop("s2", 0, 1)],
        "b" => vec![hop("s1", 0, 1), hop("s2", 0, 2)],
        "c" => vec![hop("s1", 0, 2), hop("s3", 0, 1)],
        "d" => vec![hop("s1", 0, 1), hop("s2", 0, 3)],
        _ => unreachable!(),
    }
}

fn multipoint(leaves: &[&str], pcr: f64) -> SetupRequest {
    SetupRequest {
        routes: leaves
            .iter()
            .map(|l| (l.to_string(), leaf_route(l)))
            .collect(),
        ..call(pcr)
    }
}

/// (switch, branches) of every connection, sorted.
fn shape(net: &Net) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = net
        .switches
        .iter()
        .flat_map(|(n, s)| {
            s.connections()
                .into_iter()
                .map(move |c| (n.clone(), c.branches.len()))
        })
        .collect();
    v.sort();
    v
}

fn changed(net: &Net, id: u64) -> Vec<Result<(), atmlab_control::cm::core::CallError>> {
    net.events
        .iter()
        .filter_map(|e| match e {
            CallEvent::Changed { call, result } if *call == id => Some(result.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_multipoint_call_forks_where_routes_part_and_releases_everything() {
    for kind in [CmKind::Xbind, CmKind::Sequential] {
        let mut net = Net::with_ports(4, None);
        let mut core = CmCore::new(CmConfig { kind, ..xbind() }).unwrap();
        let id = core.add(net.now, multipoint(&["a", "b", "c"], 100.0));
        net.settle(&mut core);
        assert!(established(&net, id), "{kind:?}: {:?}", net.events);
        // s1 forks to s2 and s3; s2 forks to a and b.
        assert_eq!(
            shape(&net),
            vec![("s1".into(), 2), ("s2".into(), 2), ("s3".into(), 1)],
            "{kind:?}"
        );
        let v = core.view(id).unwrap();
        assert_eq!(v.leaf_names(), vec!["a", "b", "c"]);
        assert_eq!(v.hops.len(), 5);
        // Each leaf's chain runs from the source's VC to its own VC, link by link.
        for (leaf, chain) in v.chains().unwrap() {
            assert_eq!(v.hops[chain[0]].2, v.source_vc, "{leaf}");
            for w in chain.windows(2) {
                assert_eq!(v.hops[w[0]].3, v.hops[w[1]].2, "{leaf}");
            }
        }
        core.delete(net.now, id);
        net.settle(&mut core);
        assert!(net.empty(), "{kind:?}");
        core.drain_caches(net.now);
        net.settle(&mut core);
        assert_eq!(net.reservations(), 0, "{kind:?}");
    }
}

#[test]
fn add_leaf_grafts_and_drop_leaf_prunes_back_to_the_fork() {
    for kind in [CmKind::Xbind, CmKind::Sequential] {
        let mut net = Net::with_ports(4, None);
        let mut core = CmCore::new(CmConfig { kind, ..xbind() }).unwrap();
        let id = core.add(net.now, multipoint(&["a"], 100.0));
        net.settle(&mut core);
        assert!(established(&net, id));
        // b: a branch at s2 only.
        core.add_leaf(net.now, id, "b", &leaf_route("b")).unwrap();
        net.settle(&mut core);
        // c: a branch at s1 and a new hop at s3.
        core.add_leaf(net.now, id, "c", &leaf_route("c")).unwrap();
        net.settle(&mut core);
        assert_eq!(changed(&net, id), vec![Ok(()), Ok(())], "{kind:?}");
        assert_eq!(
            shape(&net),
            vec![("s1".into(), 2), ("s2".into(), 2), ("s3".into(), 1)]
        );
        // Refusals change nothing: a leaf already there, an unknown leaf, the last one.
        let e = core
            .add_leaf(net.now, id, "b", &leaf_route("b"))
            .unwrap_err();
        assert_eq!(e.kind, atmlab_fabric::ErrorKind::AlreadyExists, "{e:?}");
        assert!(core.drop_leaf(net.now, id, "zz").is_err());
        // Drop b: s2 loses one branch; a keeps its path.
        core.drop_leaf(net.now, id, "b").unwrap();
        net.settle(&mut core);
        assert_eq!(
            shape(&net),
            vec![("s1".into(), 2), ("s2".into(), 1), ("s3".into(), 1)]
        );
        // Drop c: s3's hop goes, s1 loses a branch.
        core.drop_leaf(net.now, id, "c").unwrap();
        net.settle(&mut core);
        assert_eq!(shape(&net), vec![("s1".into(), 1), ("s2".into(), 1)]);
        assert_eq!(changed(&net, id).len(), 4);
        assert!(changed(&net, id).iter().all(Result::is_ok));
        let e = core.drop_leaf(net.now, id, "a").unwrap_err();
        assert!(e.message.contains("last leaf"), "{e:?}");
        assert_eq!(core.view(id).unwrap().leaf_names(), vec!["a"]);
        // A leaf can come back; then everything goes on delete.
        core.add_leaf(net.now, id, "c", &leaf_route("c")).unwrap();
        net.settle(&mut core);
        assert_eq!(core.view(id).unwrap().leaf_names(), vec!["a", "c"]);
        core.delete(net.now, id);
        net.settle(&mut core);
        assert!(net.empty(), "{kind:?}");
        core.drain_caches(net.now);
        net.settle(&mut core);
        assert_eq!(net.reservations(), 0, "{kind:?}");
    }
}

#[test]
fn a_refused_add_leaf_undoes_its_branch_and_hops() {
    // s2's port 1 has room for one call of 1000 cells/s: the leaf a of a second call
    // is refused there, after its branch at s1 (towards c) could have been added.
    let mut net = Net::with_ports(4, Some(1500.0));
    let mut core = CmCore::new(xbind()).unwrap();
    let first = core.add(net.now, multipoint(&["a"], 1000.0));
    net.settle(&mut core);
    assert!(established(&net, first));
    let id = core.add(net.now, multipoint(&["c"], 1000.0));
    net.settle(&mut core);
    assert!(established(&net, id));
    let before = shape(&net);
    let view = core.view(id).unwrap();
    core.add_leaf(net.now, id, "a", &leaf_route("a")).unwrap();
    net.settle(&mut core);
    let r = changed(&net, id);
    assert_eq!(r.len(), 1);
    assert!(r[0].as_ref().unwrap_err().blocked(), "{r:?}");
    assert_eq!(shape(&net), before, "the switches are as they were");
    let mut after = core.view(id).unwrap();
    assert!(
        after.invocations > view.invocations,
        "the attempt cost commands"
    );
    after.invocations = view.invocations;
    assert_eq!(after, view, "the call is as it was");
    for c in [first, id] {
        core.delete(net.now, c);
    }
    net.settle(&mut core);
    assert!(net.empty());
    core.drain_caches(net.now);
    net.settle(&mut core);
    assert_eq!(net.reservations(), 0);
}

#[test]
fn modify_changes_every_hop_or_none() {
    let mut net = Net::with_ports(4, Some(5000.0));
    let mut core = CmCore::new(xbind()).unwrap();
    let id = core.add(net.now, multipoint(&["a", "c"], 1000.0));
    net.settle(&mut core);
    assert!(established(&net, id));
    let pcrs = |net: &Net| {
        let mut v: Vec<f64> = net
            .switches
            .values()
            .flat_map(|s| s.connections().into_iter().map(|c| c.traffic.pcr.per_sec()))
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    // Up to 4000: fits everywhere.
    core.modify(net.now, id, TrafficDescriptor::cbr(CellRate(4000.0)), 0.0)
        .unwrap();
    net.settle(&mut core);
    assert_eq!(pcrs(&net), vec![4000.0; 3]);
    assert_eq!(core.view(id).unwrap().traffic.pcr.per_sec(), 4000.0);
    // Up to 9000: s2's port 1 refuses; the hops that changed change back.
    core.modify(net.now, id, TrafficDescriptor::cbr(CellRate(9000.0)), 0.0)
        .unwrap();
    net.settle(&mut core);
    let r = changed(&net, id);
    assert!(r[0].is_ok());
    assert!(r[1].as_ref().unwrap_err().blocked(), "{r:?}");
    assert_eq!(pcrs(&net), vec![4000.0; 3]);
    assert_eq!(core.view(id).unwrap().traffic.pcr.per_sec(), 4000.0);
    let s2 = net.switches["s2"].port_status(PortId(1)).unwrap();
    assert!((s2.allocated - 4000.0).abs() < 1e-6, "{}", s2.allocated);
    // A change while another is in flight is refused.
    core.modify(net.now, id, TrafficDescriptor::cbr(CellRate(100.0)), 0.0)
        .unwrap();
    assert!(
        core.modify(net.now, id, TrafficDescriptor::cbr(CellRate(200.0)), 0.0)
            .is_err()
    );
    net.settle(&mut core);
    assert_eq!(pcrs(&net), vec![100.0; 3]);
    core.delete(net.now, id);
    net.settle(&mut core);
    assert!(net.empty());
}
