//! Issue 9's acceptance, end to end over live switch servers (gRPC command streams) and
//! their data planes (cells over UDP on loopback), with the route object choosing the
//! routes:
//!
//! - a point-to-multipoint connection to three leaves carries frames to all of them,
//!   byte-identical; DropLeaf leaves the others working; AddLeaf adds one under way;
//! - ModifyConnection while frames flow loses none of them;
//! - two xbind managers on disjoint VCI partitions, under one call generator's load,
//!   never hand out the same identifier and stay inside their partitions;
//!
//! and after each, the audit finds every switch empty.

use std::time::Duration;

use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::live::{self, CmHandle};
use atmlab_control::cm::routes::CachedRouter;
use atmlab_control::net::Network;
use atmlab_core::ids::VcId;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::live::host::HostPort;

async fn manager(net: &Network, clients: &[(String, GrpcSwitch)], config: CmConfig) -> CmHandle {
    let (route, _refresher) = atmlab_control::route::start(&net.names_url(), None)
        .await
        .unwrap();
    let router = CachedRouter::new(route, atmlab_control::cm::routes::ROUTE_CACHE_TTL);
    live::start(config, clients.to_vec(), Box::new(router)).unwrap()
}

/// A host attached to `switch:port` of the network: the port is bound to it through
/// the control path (the tests attach a new host to a port an earlier one held, which a
/// host's own attach datagram may not take over).
async fn host(net: &Network, switch: usize, port: usize) -> HostPort {
    let any = "127.0.0.1:0".parse().unwrap();
    let sw = &net.switches[switch];
    let (id, addr) = sw.ports[port];
    let h = HostPort::attach(any, addr, BitRate(50e6)).await.unwrap();
    let me = h.local_addr().unwrap();
    assert!(sw.attach_host(id, me));
    assert_eq!(sw.data_plane.peers()[port].1, Some(me));
    h
}

fn frames(n: u32, seed: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            (0..((i * 97 + seed) % 1500 + 1))
                .map(|k| (k ^ i ^ seed) as u8)
                .collect()
        })
        .collect()
}

/// Every frame arrives at `h` on `vc`, in order, byte-identical.
async fn expect(h: &mut HostPort, vc: VcId, sent: &[Vec<u8>], who: &str) {
    for (i, f) in sent.iter().enumerate() {
        let got = h
            .recv_frame(Duration::from_secs(10))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{who}: frame {i} of {} never came", sent.len()));
        assert_eq!(got.vc, vc, "{who}");
        assert_eq!(&got.sdu, f, "{who}: frame {i}");
    }
}

fn leaf_vc(info: &live::CallInfo, leaf: &str) -> VcId {
    let v = &info.view;
    let e = v.leaves.iter().find(|l| l.0 == leaf).expect("a leaf").1;
    v.hops[e].3
}

async fn assert_empty(clients: &[(String, GrpcSwitch)], what: &str) {
    for (name, c) in clients {
        assert!(
            c.connections().await.unwrap().is_empty(),
            "{what}: {name} still holds a connection"
        );
        let d = c.describe().await.unwrap();
        assert!(
            d.ports
                .iter()
                .all(|p| p.allocated == 0.0 && p.committed == 0),
            "{what}: {name} has bandwidth or identifiers left"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipoint_reaches_every_leaf_and_drop_leaf_leaves_the_others_working() {
    let (net, clients) = crate::common::network("tree4.toml").await;
    // Switch indices in tree4.toml: s1 0, s2 1, s3 2.
    for kind in [CmKind::Xbind, CmKind::Sequential] {
        let cm = manager(&net, &clients, CmConfig::new(kind)).await;
        let leaves: Vec<String> = ["b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let info = cm
            .add_multipoint(
                "a",
                &leaves,
                TrafficDescriptor::cbr(CellRate(20_000.0)),
                0.0,
                "mp",
            )
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e:?}"));
        assert_eq!(info.view.leaf_names(), leaves);
        // One switch connection per switch; s1 and s2 fork.
        let branches = |c: &Vec<atmlab_fabric::Connection>| {
            c.iter().map(|x| x.branches.len()).collect::<Vec<_>>()
        };
        assert_eq!(
            branches(&clients[0].1.connections().await.unwrap()),
            vec![2]
        );
        assert_eq!(
            branches(&clients[1].1.connections().await.unwrap()),
            vec![2]
        );
        assert_eq!(
            branches(&clients[2].1.connections().await.unwrap()),
            vec![1]
        );

        let mut a = host(&net, 0, 0).await;
        let mut b = host(&net, 1, 1).await;
        let mut c = host(&net, 1, 2).await;
        let mut d = host(&net, 2, 1).await;
        let sent = frames(40, 1);
        for f in &sent {
            a.send_frame(info.view.source_vc, f).await.unwrap();
        }
        expect(&mut b, leaf_vc(&info, "b"), &sent, "b").await;
        expect(&mut c, leaf_vc(&info, "c"), &sent, "c").await;
        expect(&mut d, leaf_vc(&info, "d"), &sent, "d").await;

        // Drop c: b and d keep receiving, c gets nothing; s2 lost one branch only.
        let after = cm.drop_leaf(info.view.id, "c").await.unwrap();
        assert_eq!(after.view.leaf_names(), vec!["b", "d"]);
        assert_eq!(
            branches(&clients[1].1.connections().await.unwrap()),
            vec![1]
        );
        let sent = frames(20, 2);
        for f in &sent {
            a.send_frame(info.view.source_vc, f).await.unwrap();
        }
        expect(&mut b, leaf_vc(&after, "b"), &sent, "b after the drop").await;
        expect(&mut d, leaf_vc(&after, "d"), &sent, "d after the drop").await;
        assert!(
            c.recv_frame(Duration::from_millis(300))
                .await
                .unwrap()
                .is_none(),
            "{kind:?}: the dropped leaf still receives"
        );

        // Add e (a branch at s3) while the others stay up.
        let mut e = host(&net, 2, 2).await;
        let grown = cm.add_leaf(info.view.id, "e").await.unwrap();
        assert_eq!(grown.view.leaf_names(), vec!["b", "d", "e"]);
        assert_eq!(
            branches(&clients[2].1.connections().await.unwrap()),
            vec![2]
        );
        let sent = frames(20, 3);
        for f in &sent {
            a.send_frame(info.view.source_vc, f).await.unwrap();
        }
        for (h, leaf) in [(&mut b, "b"), (&mut d, "d"), (&mut e, "e")] {
            expect(h, leaf_vc(&grown, leaf), &sent, leaf).await;
        }
        // The last leaf cannot be dropped; an unknown host cannot be added.
        cm.drop_leaf(info.view.id, "b").await.unwrap();
        cm.drop_leaf(info.view.id, "d").await.unwrap();
        assert!(cm.drop_leaf(info.view.id, "e").await.is_err());
        assert!(cm.add_leaf(info.view.id, "nobody").await.is_err());

        cm.delete(info.view.id).await.unwrap();
        assert_empty(&clients, &format!("{kind:?}")).await;
        cm.shutdown().await;
        for (name, c) in &clients {
            assert!(
                c.reservations().await.unwrap().is_empty(),
                "{kind:?}: {name} has reservations left"
            );
        }
    }
    net.down().await;
}

/// Sends 300 frames from a (s1 port 0) to the leaves b (s2 port 1) and d (s3 port 1)
/// while `modify` changes the contract up, beyond what a port can admit (refused),
/// down and up again; every frame must arrive, and every hop hold the last contract.
/// `modify` answers the new peak cell rate or the refusal's kind.
async fn changes_under_traffic<F, Fut>(
    net: &Network,
    clients: &[(String, GrpcSwitch)],
    source: VcId,
    (vc_b, vc_d): (VcId, VcId),
    mut modify: F,
) where
    F: FnMut(f64) -> Fut,
    Fut: std::future::Future<Output = Result<f64, String>>,
{
    let mut a = host(net, 0, 0).await;
    let mut b = host(net, 1, 1).await;
    let mut d = host(net, 2, 1).await;
    let sent = frames(300, 4);
    let sender = {
        let sent = sent.clone();
        tokio::spawn(async move {
            for f in &sent {
                a.send_frame(source, f).await.unwrap();
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        })
    };
    let capacity = clients[0].1.describe().await.unwrap().ports[1]
        .config
        .capacity
        .per_sec();
    let mut outcomes = Vec::new();
    for pcr in [50_000.0, capacity * 2.0, 5_000.0, 80_000.0] {
        outcomes.push(modify(pcr).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        outcomes,
        vec![
            Ok(50_000.0),
            Err("ResourceExhausted".to_string()),
            Ok(5_000.0),
            Ok(80_000.0)
        ]
    );
    expect(&mut b, vc_b, &sent, "b").await;
    expect(&mut d, vc_d, &sent, "d").await;
    sender.await.unwrap();
    // Every hop holds the last contract, and admission control charged it.
    for (name, c) in clients {
        for x in c.connections().await.unwrap() {
            assert_eq!(x.traffic.pcr.per_sec(), 80_000.0, "{name}");
            assert!(
                (x.admitted - 80_000.0).abs() < 1e-6,
                "{name}: {}",
                x.admitted
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modify_connection_under_traffic_loses_nothing() {
    let (net, clients) = crate::common::network("tree4.toml").await;
    let cm = manager(&net, &clients, CmConfig::new(CmKind::Xbind)).await;
    let leaves = vec!["b".to_string(), "d".to_string()];
    let info = cm
        .add_multipoint(
            "a",
            &leaves,
            TrafficDescriptor::cbr(CellRate(10_000.0)),
            0.0,
            "modify",
        )
        .await
        .unwrap();
    let vcs = (leaf_vc(&info, "b"), leaf_vc(&info, "d"));
    changes_under_traffic(&net, &clients, info.view.source_vc, vcs, |pcr| {
        let cm = &cm;
        async move {
            cm.modify(info.view.id, TrafficDescriptor::cbr(CellRate(pcr)), 0.0)
                .await
                .map(|i| i.view.traffic.pcr.per_sec())
                .map_err(|e| format!("{:?}", e.kind))
        }
    })
    .await;
    cm.delete(info.view.id).await.unwrap();
    assert_empty(&clients, "modify").await;
    cm.shutdown().await;
    net.down().await;
}

/// The same through TINA: the call is two segments (a to b, then d grafted at s1), and
/// ModifySnc goes to each; a refusal at any hop changes every segment back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tina_modify_connection_under_traffic_loses_nothing() {
    use atmlab_control::tina::SetupMode;
    use atmlab_fabric::live::convert as cv;

    let (net, clients) = crate::common::network("tree4.toml").await;
    let cell = crate::common::cbr_cell;
    let deployment = tina_over(&net, &clients, SetupMode::Parallel, None).await;
    let lnc = deployment.lnc.clone();
    let info = lnc
        .add_multipoint(
            "a",
            &["b".to_string(), "d".to_string()],
            cell(10_000.0),
            "modify",
        )
        .await
        .unwrap();
    let vcs = (pb_leaf_vc(&info, "b"), pb_leaf_vc(&info, "d"));
    let source = cv::vc_id(info.source_vc.as_ref()).unwrap();
    changes_under_traffic(&net, &clients, source, vcs, |pcr| {
        let lnc = lnc.clone();
        async move {
            lnc.modify(info.id, cell(pcr))
                .await
                .map(|i| {
                    cv::traffic(i.cell_qos.and_then(|c| c.traffic).as_ref())
                        .unwrap()
                        .0
                        .pcr
                        .per_sec()
                })
                .map_err(|e| format!("{:?}", e.code()))
        }
    })
    .await;
    lnc.delete(info.id).await.unwrap();
    assert_empty(&clients, "tina modify").await;
    deployment.shutdown().await;
    net.down().await;
}

/// A TINA deployment over `clients` in `mode`, routing with `router` (`None`: the
/// network's route object).
async fn tina_over(
    net: &Network,
    clients: &[(String, GrpcSwitch)],
    mode: atmlab_control::tina::SetupMode,
    router: Option<Box<dyn atmlab_control::cm::live::Router>>,
) -> atmlab_control::tina::lnc::Tina {
    let router = match router {
        Some(r) => r,
        None => {
            let (route, _refresher) = atmlab_control::route::start(&net.names_url(), None)
                .await
                .unwrap();
            Box::new(CachedRouter::new(
                route,
                atmlab_control::cm::routes::ROUTE_CACHE_TTL,
            ))
        }
    };
    atmlab_control::tina::lnc::start(
        atmlab_control::tina::TinaConfig {
            mode,
            ..Default::default()
        },
        clients.to_vec(),
        router,
        None,
    )
    .await
    .unwrap()
}

/// A ConnectionInfo's VC for `leaf` (TINA answers in cm.proto terms).
fn pb_leaf_vc(info: &atmlab_rpc::v1::ConnectionInfo, leaf: &str) -> VcId {
    let i = info
        .destinations
        .iter()
        .position(|d| d == leaf)
        .unwrap_or_else(|| panic!("{leaf} is not a leaf of {:?}", info.destinations));
    atmlab_fabric::live::convert::vc_id(info.destination_vcs.get(i)).unwrap()
}

/// Issue 9 item 2 for the TINA manager: the same tree, through the LNC, the NML-CP
/// hierarchy and the EML-CPs (two levels: {s1, s2} and {s3}), in both setup modes. The
/// leaves a, b, c, d are as in the test above; dropping b later prunes s2's hop, which
/// is the tail of the first subnetwork connection (TrimSnc through two levels).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tina_multipoint_reaches_every_leaf_and_prunes_only_the_dropped_branch() {
    use atmlab_control::tina::SetupMode;

    let (net, clients) = crate::common::network("tree4.toml").await;
    let cell = crate::common::cbr_cell(20_000.0);
    let branches =
        |c: &Vec<atmlab_fabric::Connection>| c.iter().map(|x| x.branches.len()).collect::<Vec<_>>();
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        let deployment = tina_over(&net, &clients, mode, None).await;
        let lnc = deployment.lnc.clone();
        let leaves: Vec<String> = ["b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let info = lnc
            .add_multipoint("a", &leaves, cell, "mp")
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert_eq!(info.destinations, leaves);
        // One switch connection per switch, forking at s1 and s2, as for the others.
        for (i, want) in [(0, vec![2]), (1, vec![2]), (2, vec![1])] {
            assert_eq!(
                branches(&clients[i].1.connections().await.unwrap()),
                want,
                "{mode:?}: switch {i}"
            );
        }
        assert_eq!(info.hops.len(), 3);
        assert!(info.invocations > 0);

        let source_vc = atmlab_fabric::live::convert::vc_id(info.source_vc.as_ref()).unwrap();
        let mut a = host(&net, 0, 0).await;
        let mut b = host(&net, 1, 1).await;
        let mut c = host(&net, 1, 2).await;
        let mut d = host(&net, 2, 1).await;
        let sent = frames(40, 11);
        for f in &sent {
            a.send_frame(source_vc, f).await.unwrap();
        }
        expect(&mut b, pb_leaf_vc(&info, "b"), &sent, "b").await;
        expect(&mut c, pb_leaf_vc(&info, "c"), &sent, "c").await;
        expect(&mut d, pb_leaf_vc(&info, "d"), &sent, "d").await;

        // Drop c: s2 loses one branch only; b and d keep receiving, c gets nothing.
        let after = lnc.drop_leaf(info.id, "c").await.unwrap();
        assert_eq!(after.destinations, vec!["b", "d"]);
        assert_eq!(
            branches(&clients[1].1.connections().await.unwrap()),
            vec![1]
        );
        let sent = frames(20, 12);
        for f in &sent {
            a.send_frame(source_vc, f).await.unwrap();
        }
        expect(&mut b, pb_leaf_vc(&after, "b"), &sent, "b after the drop").await;
        expect(&mut d, pb_leaf_vc(&after, "d"), &sent, "d after the drop").await;
        assert!(
            c.recv_frame(Duration::from_millis(300))
                .await
                .unwrap()
                .is_none(),
            "{mode:?}: the dropped leaf still receives"
        );

        // Add e (a branch at s3) while the others stay up; then drop b, which prunes
        // s2's whole hop (the tail of the first subnetwork connection) and s1's branch.
        let mut e = host(&net, 2, 2).await;
        let grown = lnc.add_leaf(info.id, "e").await.unwrap();
        assert_eq!(grown.destinations, vec!["b", "d", "e"]);
        assert_eq!(
            branches(&clients[2].1.connections().await.unwrap()),
            vec![2]
        );
        let sent = frames(20, 13);
        for f in &sent {
            a.send_frame(source_vc, f).await.unwrap();
        }
        for (h, leaf) in [(&mut b, "b"), (&mut d, "d"), (&mut e, "e")] {
            expect(h, pb_leaf_vc(&grown, leaf), &sent, leaf).await;
        }
        let pruned = lnc.drop_leaf(info.id, "b").await.unwrap();
        assert_eq!(pruned.destinations, vec!["d", "e"]);
        assert!(
            clients[1].1.connections().await.unwrap().is_empty(),
            "{mode:?}: s2 still holds the pruned hop"
        );
        assert_eq!(
            branches(&clients[0].1.connections().await.unwrap()),
            vec![1]
        );
        let sent = frames(10, 14);
        for f in &sent {
            a.send_frame(source_vc, f).await.unwrap();
        }
        for (h, leaf) in [(&mut d, "d"), (&mut e, "e")] {
            expect(h, pb_leaf_vc(&pruned, leaf), &sent, leaf).await;
        }
        assert!(
            b.recv_frame(Duration::from_millis(300))
                .await
                .unwrap()
                .is_none(),
            "{mode:?}: b still receives after its drop"
        );
        // A leaf can come back over the pruned route; refusals change nothing.
        let back = lnc.add_leaf(info.id, "b").await.unwrap();
        assert_eq!(back.destinations, vec!["d", "e", "b"]);
        let sent = frames(10, 15);
        for f in &sent {
            a.send_frame(source_vc, f).await.unwrap();
        }
        expect(&mut b, pb_leaf_vc(&back, "b"), &sent, "b back").await;
        assert_eq!(
            lnc.add_leaf(info.id, "b").await.unwrap_err().code(),
            tonic::Code::AlreadyExists
        );
        assert_eq!(
            lnc.drop_leaf(info.id, "c").await.unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert!(lnc.add_leaf(info.id, "nobody").await.is_err());
        assert_eq!(lnc.get(info.id).unwrap(), back);
        lnc.drop_leaf(info.id, "d").await.unwrap();
        lnc.drop_leaf(info.id, "e").await.unwrap();
        assert_eq!(
            lnc.drop_leaf(info.id, "b").await.unwrap_err().code(),
            tonic::Code::FailedPrecondition
        );
        // A change of contract covers every segment (here: the first, the regrown b).
        let mut bigger = cell;
        bigger.traffic = Some(atmlab_fabric::live::convert::pb_traffic(
            &TrafficDescriptor::cbr(CellRate(30_000.0)),
            0.0,
        ));
        lnc.modify(info.id, bigger).await.unwrap();

        lnc.delete(info.id).await.unwrap();
        assert_empty(&clients, &format!("tina {mode:?}")).await;
        for (name, c) in &clients {
            assert!(
                c.reservations().await.unwrap().is_empty(),
                "tina {mode:?}: {name} has reservations left"
            );
        }
        deployment.shutdown().await;
    }
    net.down().await;
}

/// A refused graft through TINA (admission refused at the new segment's last hop, below
/// a branch already added at the fork) takes the branch back: the connection and every
/// switch are as they were. A multipoint setup refused at its second leaf leaves
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tina_refused_add_leaf_and_refused_multipoint_setup_leave_nothing() {
    use atmlab_control::cm::core::HopSpec;
    use atmlab_control::cm::live::StaticRouter;
    use atmlab_control::tina::{self, SetupMode};

    let (net, clients) = crate::common::network("tree4.toml").await;
    let cell = crate::common::cbr_cell;
    // Someone else takes most of s3's port to d.
    crate::common::block_port(&clients[2].1, 50_000.0).await;
    for mode in [SetupMode::Sequential, SetupMode::Parallel] {
        // Fixed routes: the route object would refuse d's route for want of bandwidth
        // before any switch is asked; the switch's own refusal is what is tested.
        let hop = |s: &str, i: u16, o: u16| HopSpec {
            switch: s.into(),
            in_port: i,
            out_port: o,
        };
        let router = StaticRouter::new()
            .with("a", "b", vec![hop("s1", 0, 1), hop("s2", 0, 1)])
            .with("a", "c", vec![hop("s1", 0, 1), hop("s2", 0, 2)])
            .with("a", "d", vec![hop("s1", 0, 2), hop("s3", 0, 1)]);
        let deployment = tina_over(&net, &clients, mode, Some(Box::new(router))).await;
        let lnc = deployment.lnc.clone();
        let info = lnc
            .add_multipoint("a", &["b".to_string()], cell(100_000.0), "g")
            .await
            .unwrap();
        let before: Vec<_> = {
            let mut v = Vec::new();
            for (_, c) in &clients {
                v.push((
                    c.connections().await.unwrap(),
                    c.reservations().await.unwrap(),
                ));
            }
            v
        };
        let lnc_nml = || lnc.invocations().get(tina::iface::LNC_NML).copied();
        let calls = lnc_nml();
        let e = lnc.add_leaf(info.id, "d").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{mode:?}: {e}");
        // Refused by the switch, not by the route object: the branch at s1 was added,
        // the segment to d refused at s3, and the branch dropped again.
        assert_eq!(
            lnc_nml().unwrap() - calls.unwrap(),
            3,
            "{mode:?}: AddBranch, SetupSnc, DropBranch"
        );
        for (i, (_, c)) in clients.iter().enumerate() {
            let now = (
                c.connections().await.unwrap(),
                c.reservations().await.unwrap(),
            );
            assert_eq!(
                now, before[i],
                "{mode:?}: switch {i} changed by a refused AddLeaf"
            );
        }
        let same = lnc.get(info.id).unwrap();
        assert_eq!(same.destinations, vec!["b"]);
        assert_eq!(same.hops, info.hops);
        // A leaf that fits still joins afterwards.
        lnc.add_leaf(info.id, "c").await.unwrap();
        lnc.delete(info.id).await.unwrap();

        // Refused at its second leaf: the first leaf's part is released too.
        let e = lnc
            .add_multipoint(
                "a",
                &["b".to_string(), "d".to_string()],
                cell(100_000.0),
                "g2",
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{mode:?}: {e}");
        assert!(lnc.list().is_empty());
        for (i, (name, c)) in clients.iter().enumerate() {
            let conns = c.connections().await.unwrap();
            assert_eq!(
                conns.len(),
                usize::from(i == 2),
                "{mode:?}: {name} holds {conns:?}"
            );
            assert!(
                c.reservations().await.unwrap().is_empty(),
                "{mode:?}: {name}"
            );
        }
        deployment.shutdown().await;
    }
    net.down().await;
}
