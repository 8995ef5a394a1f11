//! The call generator against live managers: over gRPC with user-level QoS, under 5%
//! faults of every kind between a manager and its switches (issue 10, acceptance 2), and
//! spread over two managers on disjoint VCI partitions (issue 9). After each, every
//! switch is audited empty.

use std::collections::HashSet;
use std::time::Duration;

use atmlab_control::audit::{AuditOptions, audit_settled};
use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::faults::FaultPlan;
use atmlab_control::cm::live::{self, StaticRouter};
use atmlab_core::time::Duration as CoreDuration;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_lab::callgen::{self, Load, RemoteCm, Spread};
use atmlab_lab::launch::xbind_config;

use crate::common::{assert_empty, line_route};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy tier (scripts/test.sh): the call generator against live managers"]
async fn the_cm_grpc_service_maps_user_qos_and_serves_the_call_generator() {
    use atmlab_control::cm::adaptive::Regions;
    use atmlab_control::cm::service::{CmService, collocated_mapper};
    use atmlab_rpc::v1 as pb;

    let dir = tempfile::tempdir().unwrap();
    let lab = crate::common::lab("line3.toml", dir.path()).await;
    let clients = lab.clients.clone();
    let router = StaticRouter::new().with("a", "b", line_route());
    let cm = live::start(
        CmConfig::new(CmKind::Xbind),
        clients.clone(),
        Box::new(router),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = CmService::new(
        cm.clone(),
        Some(collocated_mapper(Default::default())),
        Regions::default(),
    );
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let ch = atmlab_rpc::client_channel(&addr.to_string(), None)
        .await
        .unwrap();
    let mut client = pb::connection_manager_client::ConnectionManagerClient::new(ch.clone());
    // User-level QoS: 100 frames/s of 1,000 octets, CBR, 10 ms delay.
    let info = client
        .add_connection(pb::AddConnectionRequest {
            source: "a".into(),
            destinations: vec!["b".into()],
            qos: Some(pb::UserQos {
                service_class: pb::ServiceClass::Cbr as i32,
                frame_rate: 100.0,
                frame_size: 1000,
                frame_loss: 1e-6,
                delay_us: 10_000,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.hops.len(), 3);
    let pcr = info.cell_qos.unwrap().traffic.unwrap().pcr;
    // 1,000 octets in AAL5: ceil(1008 / 48) = 21 cells a frame.
    assert!((pcr - 2_100.0).abs() < 1e-6, "pcr {pcr}");
    let conns = clients[1].1.connections().await.unwrap();
    assert!((conns[0].traffic.pcr.per_sec() - 2_100.0).abs() < 1e-6);
    // Refusals come back as statuses.
    let err = client
        .add_connection(pb::AddConnectionRequest {
            source: "a".into(),
            destinations: vec!["nowhere".into()],
            qos: None,
            cell_qos: None,
            tag: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    client
        .delete_connection(pb::DeleteConnectionRequest { id: info.id })
        .await
        .unwrap();
    let err = client
        .delete_connection(pb::DeleteConnectionRequest { id: info.id })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    // The call generator over gRPC.
    let report = callgen::run(
        RemoteCm::new(ch),
        &Load::poisson(200.0, Duration::from_millis(500), "a", "b"),
    )
    .await;
    assert!(report.established > 50, "{report:?}");
    assert_eq!((report.blocked, report.failed), (0, 0));
    assert!(report.p99_setup_ms >= report.p50_setup_ms && report.mean_setup_ms > 0.0);
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.established, report.established + 1);
    assert_eq!(status.released, status.established);
    cm.shutdown().await;
    for (name, c) in &clients {
        assert!(c.connections().await.unwrap().is_empty(), "{name}");
        assert!(c.reservations().await.unwrap().is_empty(), "{name}");
    }
    server.abort();
    lab.down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy tier (scripts/test.sh): the call generator against live managers"]
async fn five_percent_faults_every_call_ends_cleanly_and_nothing_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let lab = crate::common::lab("line3.toml", dir.path()).await;
    let clients = lab.clients.clone();
    // The sequential manager waits out each lost message one call at a time: a lighter
    // load keeps the test short.
    for (kind, rate) in [(CmKind::Xbind, 400.0), (CmKind::Sequential, 100.0)] {
        let plan = FaultPlan {
            drop: 0.05,
            duplicate: 0.05,
            delay: 0.05,
            reorder: 0.05,
            max_delay: CoreDuration::from_millis(3),
            seed: 7,
        };
        let config = CmConfig {
            // Loopback answers in well under a millisecond: a lost message is re-sent
            // after 50 ms rather than the default 2 s, so the test is short.
            command_timeout: CoreDuration::from_millis(50),
            max_retries: 5,
            threshold: 2,
            ..CmConfig::new(kind)
        };
        let router = StaticRouter::new().with("a", "b", line_route());
        let cm =
            live::start_with_faults(config, clients.clone(), Box::new(router), Some(plan)).unwrap();
        let load = Load {
            holding: Duration::from_millis(5),
            ..Load::poisson(rate, Duration::from_secs(1), "a", "b")
        };
        let report = callgen::run(cm.clone(), &load).await;
        // Every call ended one way or the other, and its release was answered.
        assert_eq!(
            report.established + report.blocked + report.failed,
            report.offered,
            "{kind:?}: {report:?}"
        );
        assert!(
            report.established as f64 >= 0.95 * report.offered as f64,
            "{kind:?}: recovery should save nearly every call: {report:?}"
        );
        let status = cm.status().await.unwrap();
        assert!(
            status.stats.retries > 0,
            "{kind:?}: the faults must have cost re-sends"
        );
        assert_eq!(status.active, 0, "{kind:?}: every call released");
        cm.shutdown().await;
        // Late duplicates and delayed answers settle: poll the audit against a deadline.
        let r = audit_settled(
            &[],
            &clients,
            AuditOptions { quiescent: true },
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        assert!(r.is_clean(), "{kind:?}: {r}");
        eprintln!(
            "{kind:?}: {} calls offered, {} set up, {} failed, {} re-sends; audit {r}",
            report.offered, report.established, report.failed, status.stats.retries
        );
    }
    lab.down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy tier (scripts/test.sh): the call generator against live managers"]
async fn two_managers_on_disjoint_partitions_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let lab = crate::common::lab("line3.toml", dir.path()).await;
    let (net, clients) = (&lab.net, lab.clients.clone());
    let parts = [(32u16, 1999u16), (2000u16, 4095u16)];
    let mut cms = Vec::new();
    for (k, &p) in parts.iter().enumerate() {
        let config = CmConfig {
            owner: format!("cm-x{k}"),
            partition: Some(p),
            ..xbind_config(4)
        };
        cms.push(live::start(config, clients.clone(), Box::new(lab.router())).unwrap());
    }
    let load = Load {
        rate: 2_000.0,
        duration: Duration::from_millis(1500),
        holding: Duration::from_millis(20),
        fixed_holding: false,
        precise: false,
        pairs: vec![("a".into(), "b".into()), ("b".into(), "a".into())],
        traffic: TrafficDescriptor::cbr(CellRate(10.0)),
        seed: 9,
    };
    let spread = Spread::new(cms.clone());
    let run = tokio::spawn(async move { callgen::run(spread, &load).await });
    // While the load runs: every identifier a switch holds for a manager, reserved or
    // committed, is inside that manager's partition, and none is held twice.
    let mut samples = 0;
    while !run.is_finished() {
        for s in &net.switches {
            // One consistent look at the switch (its table and reservations under one
            // lock), so an identifier moving between the two is not seen twice.
            let (name, conns, res) = s
                .switch
                .with_switch(|sw| (sw.name().to_string(), sw.connections(), sw.reservations()));
            let mut seen = HashSet::new();
            for x in conns {
                let k: usize = x.owner.trim_start_matches("cm-x").parse().unwrap();
                for br in &x.branches {
                    let v = br.id.vci.0;
                    assert!(
                        (parts[k].0..=parts[k].1).contains(&v),
                        "{name}: {} committed VCI {v} outside its partition",
                        x.owner
                    );
                    assert!(seen.insert((br.port.0, br.id)), "{name}: {br:?} twice");
                }
            }
            for r in res {
                let k: usize = r.owner.trim_start_matches("cm-x").parse().unwrap();
                assert!(
                    (parts[k].0..=parts[k].1).contains(&r.id.vci.0),
                    "{name}: {} reserved {:?} outside its partition",
                    r.owner,
                    r.id
                );
                assert!(seen.insert((r.port.0, r.id)), "{name}: {r:?} twice");
            }
        }
        samples += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = run.await.unwrap();
    assert!(samples >= 3, "the load ended before it was sampled");
    assert!(report.established > 1000, "{report:?}");
    assert_eq!(
        report.failed, 0,
        "a collision would fail a call: {report:?}"
    );
    for cm in &cms {
        let st = cm.status().await.unwrap();
        assert!(
            st.stats.established > 400,
            "both managers carried calls: {st:?}"
        );
        cm.shutdown().await;
    }
    assert_empty(&clients, "two managers").await;
    for (name, c) in &clients {
        assert!(c.reservations().await.unwrap().is_empty(), "{name}");
    }
    lab.down().await;
}

/// A manager found by name (issue 26, item 3): while nobody answers at the name, the
/// callers that were waiting while one of them looked for the whole patience give up
/// with it, rather than each looking again for a whole patience in turn (ten callers
/// would otherwise take ten patiences); a caller that comes later looks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_of_a_named_manager_that_never_answers_give_up_together() {
    use atmlab_control::names::{NameClient, ObjectInfo, ObjectKind, serve_names};
    use atmlab_lab::callgen::{CallTarget, NamedCm};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let names = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_names(listener, None, async {
        let _ = stopped.await;
    }));
    let nc = NameClient::connect(&names, None).await.unwrap();
    // Registered at a port where nothing listens: the manager died.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    nc.register(
        &ObjectInfo::new("cm/ghost", ObjectKind::ConnectionManager, dead.to_string()),
        None,
    )
    .await
    .unwrap();
    let patience = Duration::from_millis(300);
    let cm = NamedCm::new(nc, "ghost", None, patience);
    let started = std::time::Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let cm = cm.clone();
        calls.spawn(async move {
            cm.setup("a", "b", TrafficDescriptor::cbr(CellRate(10.0)))
                .await
        });
    }
    while let Some(r) = calls.join_next().await {
        let e = r.unwrap().unwrap_err();
        assert!(e.message.contains("cm/ghost"), "{}", e.message);
    }
    // One patience for all of them (ten in turn would be 3 s); the bound is loose.
    assert!(
        started.elapsed() < patience * 5,
        "the waiting callers looked in turn: {:?}",
        started.elapsed()
    );
    // A later caller looks again (and gives up after its own patience).
    let again = std::time::Instant::now();
    assert!(
        cm.release(1).await.is_err() && again.elapsed() >= patience,
        "a later caller did not look again"
    );
    let _ = stop.send(());
    let _ = server.await;
}
