//! The route object on a live network: `Network::up` on `topologies/line3.toml` behind
//! mutual TLS, `discover` through the name service and each switch server's Describe,
//! and the refresher following an allocation made on a switch. Waits poll up to a
//! generous deadline, so a slow machine makes the test slower, never red.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atmlab_control::names::NameClient;
use atmlab_control::net::{NetSecurity, Network, Topology};
use atmlab_control::route::{Hop, RouteObject, discover, spawn_refresher};
use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::{Branch, Commit, ConnectionKind};
use atmlab_rpc::tls::{self, TlsFiles};

/// Only reached when something is broken.
const DEADLINE: Duration = Duration::from_secs(30);

fn hop(switch: &str, in_port: u16, out_port: u16) -> Hop {
    Hop {
        switch: switch.into(),
        in_port,
        out_port,
    }
}

#[tokio::test]
async fn discover_sees_line3_and_the_refresher_follows_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let topo_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml");
    let topology = Topology::load(&topo_path).unwrap();
    let subjects = atmlab_control::net::certificate_subjects(&topology);
    tls::init_certs(dir.path(), &subjects, false).unwrap();
    let security = NetSecurity {
        certs: Some(dir.path().to_path_buf()),
    };
    let net = Network::up(topology, &security, None).await.unwrap();
    let admin = TlsFiles::in_dir(dir.path(), "admin").load().unwrap();
    let names = NameClient::connect(&format!("https://{}", net.names_addr), Some(&admin))
        .await
        .unwrap();

    let view = discover(&names, Some(&admin)).await.unwrap();
    let switches: Vec<&str> = view.switches.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(switches, ["s1", "s2", "s3"]);
    assert!(view.switches.iter().all(|(_, ports)| ports.len() == 2));
    let link = |a: &str, pa: u16, b: &str, pb: u16| ((a.to_string(), pa), (b.to_string(), pb));
    assert_eq!(
        view.links(),
        [link("s1", 1, "s2", 0), link("s2", 1, "s3", 0)]
    );
    assert_eq!(
        view.hosts,
        [
            ("a".to_string(), "s1".to_string(), 0),
            ("b".to_string(), "s3".to_string(), 1)
        ]
    );
    // Host ports have no switch at the other end.
    assert_eq!(view.switches[0].1[0].peer, None);
    let capacity = view.switches[1].1[1].capacity;
    assert!(capacity > 0.0, "{capacity}");

    let route = Arc::new(Mutex::new(RouteObject::new(view).unwrap()));
    let expected = [hop("s1", 0, 1), hop("s2", 0, 1), hop("s3", 0, 1)];
    assert_eq!(
        route.lock().unwrap().route("a", "b", 1000.0).unwrap().hops,
        expected
    );
    assert_eq!(
        route.lock().unwrap().route("b", "a", 1000.0).unwrap().hops,
        [hop("s3", 1, 0), hop("s2", 1, 0), hop("s1", 1, 0)]
    );

    // Someone takes most of s2:1 on the switch itself; the refresher notices.
    let refresher = spawn_refresher(
        route.clone(),
        names.clone(),
        Some(admin.clone()),
        Duration::from_millis(50),
    );
    let s2 = GrpcSwitch::new(
        atmlab_rpc::channel_to(
            &format!("https://{}", net.switches[1].grpc_addr),
            Some(&admin),
            tls::Expect::object(tls::Role::Switch, "s2"),
        )
        .await
        .unwrap(),
    );
    let taken = capacity - 500.0;
    s2.commit(&Commit {
        kind: ConnectionKind::Vc,
        in_port: PortId(0),
        in_id: VcId::new(0, 100),
        branches: vec![Branch {
            port: PortId(1),
            id: VcId::new(0, 100),
        }],
        traffic: TrafficDescriptor::cbr(CellRate(taken)),
        clr: 0.0,
        buffer_cells: 0,
        owner: "".into(),
        replenish: 0,
        tag: "route-test".into(),
    })
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let allocated = route.lock().unwrap().port("s2", 1).map(|p| p.allocated);
        if allocated == Some(taken) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the refresher never saw the allocation ({allocated:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let r = route.lock().unwrap();
        let e = r.route("a", "b", 1000.0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
        assert_eq!(r.route("a", "b", 400.0).unwrap().hops, expected);
        // The other direction uses other ports.
        assert!(r.route("b", "a", 1000.0).is_ok());
    }

    // Refreshing again and again costs each switch requests, not connections: the
    // refresher keeps its channel to s2 (it opened a TLS connection per switch per
    // refresh before). Three more allocations, each seen by a refresh of its own.
    let accepted = || net.switches[1].grpc_stats.accepted();
    let before = accepted();
    let mut seen = taken;
    for vci in 101..104u16 {
        s2.commit(&Commit {
            kind: ConnectionKind::Vc,
            in_port: PortId(0),
            in_id: VcId::new(0, vci),
            branches: vec![Branch {
                port: PortId(1),
                id: VcId::new(0, vci),
            }],
            traffic: TrafficDescriptor::cbr(CellRate(100.0)),
            clr: 0.0,
            buffer_cells: 0,
            owner: "".into(),
            replenish: 0,
            tag: "route-test".into(),
        })
        .await
        .unwrap();
        seen += 100.0;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while route.lock().unwrap().port("s2", 1).map(|p| p.allocated) != Some(seen) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the refresher never saw {seen}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(
        accepted() <= before + 1,
        "s2 accepted {} connections over three refreshes or more",
        accepted() - before
    );
    refresher.abort();
    net.down().await;
}
