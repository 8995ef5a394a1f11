//! Acceptance: the connection manager sets up a 3-hop connection through live switch
//! servers (gRPC streams, loopback), frames flow host to host on the identifiers it
//! chose, the delete empties every switch table, and the manager's shutdown returns every
//! reservation. For both kinds.

use std::time::Duration;

use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::live::{self, StaticRouter};
use atmlab_core::ids::PortId;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::host::HostPort;

use crate::common::line_route;

/// Three switch servers in a line and an xbind manager over them, routing a -> b.
async fn xbind_on_line3() -> (
    atmlab_control::net::Network,
    Vec<(String, atmlab_fabric::live::grpc::GrpcSwitch)>,
    live::CmHandle,
) {
    let (net, clients) = crate::common::line3().await;
    let router = StaticRouter::new().with("a", "b", line_route());
    let cm = live::start(
        CmConfig::new(CmKind::Xbind),
        clients.clone(),
        Box::new(router),
    )
    .unwrap();
    (net, clients, cm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cm_sets_up_a_three_hop_path_that_carries_frames_then_leaves_nothing() {
    let (net, clients) = crate::common::line3().await;
    for kind in [CmKind::Xbind, CmKind::Sequential] {
        let router = StaticRouter::new().with("a", "b", line_route());
        let cm = live::start(CmConfig::new(kind), clients.clone(), Box::new(router)).unwrap();
        let info = cm
            .add(
                "a",
                "b",
                TrafficDescriptor::cbr(CellRate(20_000.0)),
                0.0,
                "e2e",
            )
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e:?}"));
        assert_eq!(info.view.hops.len(), 3);
        // Every switch holds exactly its hop.
        for ((_, c), hop) in clients.iter().zip(&info.view.hops) {
            let conns = c.connections().await.unwrap();
            assert_eq!(conns.len(), 1);
            assert_eq!(conns[0].id, hop.1);
        }
        // Frames flow from a to b on the identifiers the CM chose.
        let any = "127.0.0.1:0".parse().unwrap();
        let a_port = net.switches[0].ports[0].1;
        let b_port = net.switches[2].ports[1].1;
        let mut b = HostPort::attach(any, b_port, BitRate(50e6)).await.unwrap();
        let mut a = HostPort::attach(any, a_port, BitRate(50e6)).await.unwrap();
        // Each manager kind's run attaches new hosts to the ports the last run's held:
        // bound through the control path (an attach datagram does not move a port).
        assert!(net.switches[2].attach_host(PortId(1), b.local_addr().unwrap()));
        assert!(net.switches[0].attach_host(PortId(0), a.local_addr().unwrap()));
        let frames: Vec<Vec<u8>> = (0..100u32)
            .map(|i| (0..(i * 53 % 2000 + 1)).map(|k| (k ^ i) as u8).collect())
            .collect();
        for f in &frames {
            a.send_frame(info.view.source_vc, f).await.unwrap();
        }
        for f in &frames {
            let got = b
                .recv_frame(Duration::from_secs(10))
                .await
                .unwrap()
                .expect("frame arrives");
            assert_eq!(got.vc, info.view.destination_vc);
            assert_eq!(&got.sdu, f);
        }
        cm.delete(info.view.id).await.unwrap();
        for (name, c) in &clients {
            assert!(
                c.connections().await.unwrap().is_empty(),
                "{kind:?}: {name} still holds a connection"
            );
            let d = c.describe().await.unwrap();
            assert!(
                d.ports
                    .iter()
                    .all(|p| p.allocated == 0.0 && p.committed == 0),
                "{kind:?}: {name}"
            );
        }
        let st = cm.status().await.unwrap();
        assert_eq!((st.stats.established, st.stats.released), (1, 1));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_its_client_abandons_is_released_not_left_up() {
    use atmlab_control::cm::adaptive::Regions;
    use atmlab_control::cm::service::CmService;
    use atmlab_rpc::v1 as pb;
    use atmlab_rpc::v1::connection_manager_server::ConnectionManager;

    let (net, clients, cm) = xbind_on_line3().await;
    let service = CmService::new(cm.clone(), None, Regions::default());
    let request = || {
        tonic::Request::new(pb::AddConnectionRequest {
            source: "a".into(),
            destinations: vec!["b".into()],
            cell_qos: Some(pb::CellQos {
                traffic: Some(atmlab_fabric::live::convert::pb_traffic(
                    &TrafficDescriptor::cbr(CellRate(1_000.0)),
                    0.0,
                )),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    // Tonic drops a handler whose client went away (cancelled, past its deadline, its
    // connection broken). Dropped here after its first poll, long before three switches
    // can answer.
    let abandoned = 20;
    for _ in 0..abandoned {
        tokio::select! {
            biased;
            r = service.add_connection(request()) => panic!("answered at once: {r:?}"),
            () = std::future::ready(()) => {}
        }
    }
    // A setup that is waited for stays up, beside them.
    let kept = service
        .add_connection(request())
        .await
        .unwrap()
        .into_inner();
    let mut settled = false;
    for _ in 0..600 {
        let s = cm.status().await.unwrap();
        if s.stats.established == abandoned + 1 && s.stats.released == abandoned && s.active == 1 {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = cm.status().await.unwrap();
    assert!(
        settled,
        "abandoned setups not released: {:?}, {} active",
        s.stats, s.active
    );
    let conns = clients[0].1.connections().await.unwrap();
    assert_eq!(conns.len(), 1, "only the kept call holds a hop");
    assert_eq!(cm.list().await.len(), 1);
    assert_eq!(cm.list().await[0].view.id, kept.id);
    cm.shutdown().await;
    net.down().await;
}

/// An xbind manager on the line of three, served over gRPC on loopback, and a client of
/// it.
async fn served_xbind() -> (
    atmlab_control::net::Network,
    Vec<(String, atmlab_fabric::live::grpc::GrpcSwitch)>,
    live::CmHandle,
    atmlab_rpc::v1::connection_manager_client::ConnectionManagerClient<tonic::transport::Channel>,
) {
    use atmlab_control::cm::adaptive::Regions;
    use atmlab_control::cm::service::CmService;
    let (net, clients, cm) = xbind_on_line3().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = CmService::new(cm.clone(), None, Regions::default());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let ch = atmlab_rpc::client_channel(&addr.to_string(), None)
        .await
        .unwrap();
    let client = atmlab_rpc::v1::connection_manager_client::ConnectionManagerClient::new(ch);
    (net, clients, cm, client)
}

/// A Calls request setting up a -> b (CBR 1,000 cells/s) under the client's `id`.
fn stream_setup(id: u64) -> atmlab_rpc::v1::CallRequest {
    use atmlab_rpc::v1 as pb;
    pb::CallRequest {
        id,
        op: Some(pb::call_request::Op::Setup(pb::AddConnectionRequest {
            source: "a".into(),
            destinations: vec!["b".into()],
            cell_qos: Some(crate::common::cbr_cell(1_000.0)),
            ..Default::default()
        })),
    }
}

/// Issue 28 item 2: many setups in flight on one stream, each answered under its own
/// id, in the order they complete (not the order sent); released on the same stream;
/// nothing left up on the manager or any switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_one_stream_are_answered_by_id_and_released() {
    use atmlab_rpc::v1 as pb;
    use pb::call_reply::Result as R;
    let (net, clients, cm, mut client) = served_xbind().await;
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let mut replies = client
        .calls(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    // 40 setups under ids of ours (sparse, to show they are ours), then a request with
    // no operation: it is answered at once, before setups sent ahead of it.
    let n = 40u64;
    for i in 0..n {
        tx.send(stream_setup(1_000 + 7 * i)).await.unwrap();
    }
    tx.send(pb::CallRequest { id: 5, op: None }).await.unwrap();
    let mut order = Vec::new();
    let mut conns = std::collections::HashMap::new();
    while order.len() < n as usize + 1 {
        let r = replies
            .message()
            .await
            .unwrap()
            .expect("a reply per request");
        order.push(r.id);
        match r.result {
            Some(R::Info(info)) => {
                assert!(
                    conns.insert(r.id, info.id).is_none(),
                    "one reply per id: {}",
                    r.id
                );
                assert_eq!(info.hops.len(), 3);
            }
            Some(R::Error(e)) => {
                assert_eq!(r.id, 5, "only the empty request fails: {e:?}");
                assert_eq!(e.code, tonic::Code::InvalidArgument as i32);
            }
            other => panic!("reply {}: {other:?}", r.id),
        }
    }
    let mut sent: Vec<u64> = (0..n).map(|i| 1_000 + 7 * i).collect();
    sent.push(5);
    assert_ne!(
        order, sent,
        "answers as they complete, not in the order sent"
    );
    order.sort_unstable();
    sent.sort_unstable();
    assert_eq!(order, sent, "every request answered once, under its id");
    let distinct: std::collections::HashSet<_> = conns.values().collect();
    assert_eq!(distinct.len(), n as usize, "a connection per setup");
    assert_eq!(cm.list().await.len(), n as usize);
    // Released on the same stream, under ids of their own.
    for (i, conn) in conns.values().enumerate() {
        tx.send(pb::CallRequest {
            id: 10_000 + i as u64,
            op: Some(pb::call_request::Op::Release(pb::DeleteConnectionRequest {
                id: *conn,
            })),
        })
        .await
        .unwrap();
    }
    drop(tx);
    let mut released = 0;
    while let Some(r) = replies.message().await.unwrap() {
        assert!(
            matches!(r.result, Some(R::Released(_))),
            "release {}: {:?}",
            r.id,
            r.result
        );
        released += 1;
    }
    assert_eq!(
        released, n,
        "the stream ends once every request is answered"
    );
    // The audit: nothing up on the manager or any switch.
    assert!(cm.list().await.is_empty());
    for (name, c) in &clients {
        assert!(
            c.connections().await.unwrap().is_empty(),
            "{name} holds a hop"
        );
    }
    let s = cm.status().await.unwrap();
    assert_eq!((s.stats.established, s.stats.released, s.active), (n, n, 0));
    cm.shutdown().await;
    net.down().await;
}

/// A client that drops its stream while its setups are in flight leaves nothing up:
/// every setup that completes after the stream is gone is released by the manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_dropped_mid_setup_leaves_nothing_up() {
    let (net, clients, cm, mut client) = served_xbind().await;
    // Commands wait for 300 ms in the manager's batches (T far above the load), so the
    // setups are surely in flight, with no reply sent, when the stream goes.
    cm.tune(10_000, atmlab_core::time::Duration::from_millis(300), None)
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let replies = client
        .calls(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let n = 30u64;
    for i in 0..n {
        tx.send(stream_setup(i)).await.unwrap();
    }
    // Gone once the manager has taken setups of the stream, without reading a reply.
    let cm2 = cm.clone();
    crate::common::eventually("the manager takes a setup of the stream", || {
        let cm = cm2.clone();
        async move {
            let s = cm.status().await.unwrap();
            s.cache.0 + s.cache.1 > 0 || s.load.0 > 0.0
        }
    })
    .await;
    assert_eq!(
        cm.status().await.unwrap().stats.established,
        0,
        "all in flight"
    );
    drop(replies);
    drop(tx);
    let cm2 = cm.clone();
    crate::common::eventually("every setup of the dropped stream is released", || {
        let cm = cm2.clone();
        async move {
            let s = cm.status().await.unwrap();
            s.active == 0 && s.stats.released == s.stats.established
        }
    })
    .await;
    let s = cm.status().await.unwrap();
    assert!(s.stats.established > 0, "{:?}", s.stats);
    for (name, c) in &clients {
        assert!(
            c.connections().await.unwrap().is_empty(),
            "{name} holds a hop"
        );
    }
    cm.shutdown().await;
    net.down().await;
}

/// Issue 28: overload control at the door. While the manager holds its bound of calls in
/// setup, a setup is refused in the caller's task, before it is queued to the manager,
/// and counted with the blocked calls; once the bound has room, setups go through again,
/// and nothing is left on the switches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_at_its_bound_refuses_setups_before_they_are_queued() {
    use atmlab_control::cm::faults::FaultPlan;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (_net, clients) = crate::common::line3().await;
    let router = StaticRouter::new().with("a", "b", line_route());
    // Every message to and from the switches late by up to 100 ms: setups stay in
    // flight long enough to be seen.
    let faults = FaultPlan {
        delay: 1.0,
        max_delay: atmlab_core::time::Duration::from_millis(100),
        ..FaultPlan::default()
    };
    let config = CmConfig {
        max_setups: 2,
        ..CmConfig::new(CmKind::Xbind)
    };
    let cm =
        live::start_with_faults(config, clients.clone(), Box::new(router), Some(faults)).unwrap();
    let traffic = TrafficDescriptor::cbr(CellRate(100.0));
    // Two callers keep the bound full.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (cm, stop) = (cm.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(i) = cm.add("a", "b", traffic, 0.0, "busy").await {
                        cm.delete(i.view.id).await.unwrap();
                    }
                }
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let refused = loop {
        match cm.add("a", "b", traffic, 0.0, "probe").await {
            Err(e) if e.message.contains("before it was queued") => break e,
            Err(e) => assert!(e.blocked(), "{e:?}"),
            Ok(i) => cm.delete(i.view.id).await.unwrap(),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no setup was refused at the door"
        );
    };
    assert!(
        refused.blocked() && refused.message.contains("overloaded"),
        "{refused:?}"
    );
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let status = cm.status().await.unwrap();
    assert!(status.stats.blocked >= 1, "counted: {:?}", status.stats);
    // The bound has room again: a setup goes through.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let info = loop {
        match cm.add("a", "b", traffic, 0.0, "after").await {
            Ok(i) => break i,
            Err(e) => assert!(std::time::Instant::now() < deadline, "{e:?}"),
        }
    };
    cm.delete(info.view.id).await.unwrap();
    cm.shutdown().await;
    for (name, c) in &clients {
        assert!(c.connections().await.unwrap().is_empty(), "{name}");
    }
}
