//! Every refusal of the gRPC SwitchServer: the right status code, a message naming the
//! problem, and no change to the switch. And nobody gets in without a certificate from
//! the lab CA.

use atmlab_core::ids::VcId;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::convert::pb_commit;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::live::server::{self, ServerFile};
use atmlab_fabric::*;
use atmlab_rpc::v1 as pb;
use tonic::Code;

use crate::common::{self, grpc_client};

fn file() -> ServerFile {
    ServerFile::parse(
        r#"
name = "s1"
[[ports]]
id = 0
[[ports]]
id = 1
buffer_cells = 100
"#,
        "test",
    )
    .unwrap()
}

fn commit(in_vci: u16, out_vci: u16, rate: f64) -> Commit {
    common::commit(0, VcId::new(0, in_vci), 1, VcId::new(0, out_vci), rate)
}

type State = (Vec<Connection>, Vec<Reservation>, Vec<(u32, u32, u32, u64)>);

async fn state(c: &GrpcSwitch) -> State {
    let d = c.describe().await.unwrap();
    (
        c.connections().await.unwrap(),
        c.reservations().await.unwrap(),
        d.ports
            .iter()
            .map(|p| {
                (
                    p.reserved,
                    p.committed,
                    p.buffer_allocated,
                    p.allocated as u64,
                )
            })
            .collect(),
    )
}

#[tokio::test]
async fn every_refusal_gets_its_status_and_changes_nothing() {
    let certs = tempfile::tempdir().unwrap();
    let files = atmlab_rpc::tls::init_certs(
        certs.path(),
        &atmlab_rpc::tls::Subject::list(&["switch:s1", "admin:cm"]).unwrap(),
        false,
    )
    .unwrap();
    let sw = server::start(&file(), Some(&files[0].load().unwrap()))
        .await
        .unwrap();
    let c = grpc_client(sw.grpc_addr, Some(&files[1].load().unwrap())).await;
    let mut raw = c.raw();
    // Existing state to protect: one connection, two reservations of another owner.
    let (conn, _) = c.commit(&commit(100, 200, 300_000.0)).await.unwrap();
    let theirs = raw
        .reserve(pb::ReserveRequest {
            port: 1,
            count: 2,
            owner: "other".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .ids;
    let before = state(&c).await;

    let mut cases: Vec<(pb::CommitRequest, Code, &str)> = Vec::new();
    let base = pb_commit(&commit(101, 300, 10.0));
    let mut r = base.clone();
    r.in_port = 9;
    cases.push((r, Code::NotFound, "unknown port 9"));
    let mut r = base.clone();
    r.branches[0].port = 70_000;
    cases.push((r, Code::InvalidArgument, "port number does not fit"));
    let mut r = base.clone();
    r.in_id = Some(pb::VcId { vpi: 99, vci: 101 });
    cases.push((r, Code::OutOfRange, "VPI 99"));
    let mut r = base.clone();
    r.branches[0].id = Some(pb::VcId { vpi: 0, vci: 5000 });
    cases.push((r, Code::OutOfRange, "VCI 5000"));
    let mut r = base.clone();
    r.in_id = Some(pb::VcId { vpi: 0, vci: 100 });
    cases.push((r, Code::AlreadyExists, "input 0/100 is already used"));
    let mut r = base.clone();
    r.branches[0].id = Some(pb::VcId { vpi: 0, vci: 200 });
    cases.push((r, Code::AlreadyExists, "output 0/200 is already used"));
    let mut r = base.clone();
    r.branches[0].id = Some(theirs[0]);
    cases.push((r, Code::AlreadyExists, "reserved by another owner"));
    let mut r = base.clone();
    r.traffic.as_mut().unwrap().pcr = 100_000.0;
    cases.push((r, Code::ResourceExhausted, "cells/s free"));
    let mut r = base.clone();
    r.buffer_cells = 101;
    cases.push((r, Code::ResourceExhausted, "buffer cells"));
    let mut r = base.clone();
    r.traffic.as_mut().unwrap().service_class = 0;
    cases.push((r, Code::InvalidArgument, "service_class"));
    let mut r = base.clone();
    r.traffic = None;
    cases.push((r, Code::InvalidArgument, "traffic descriptor is missing"));
    let mut r = base.clone();
    r.branches.clear();
    cases.push((r, Code::InvalidArgument, "at least one branch"));
    for (req, code, needle) in cases {
        let err = raw.commit(req.clone()).await.unwrap_err();
        assert_eq!(err.code(), code, "{req:?}: {}", err.message());
        assert!(
            err.message().contains(needle),
            "{:?} lacks {needle:?}",
            err.message()
        );
        assert_eq!(state(&c).await, before, "{req:?} changed the switch");
    }

    let err = raw
        .reserve(pb::ReserveRequest {
            port: 1,
            count: 100_000,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = raw
        .reserve(pb::ReserveRequest {
            port: 1,
            count: 4064,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(
        err.message().contains("4064 identifiers asked"),
        "{}",
        err.message()
    );
    let err = raw
        .unreserve(pb::UnreserveRequest {
            port: 1,
            ids: theirs.clone(),
            owner: "cm".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = raw
        .release(pb::ReleaseRequest {
            connection: 77,
            keep_reserved: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = raw
        .drop_branch(pb::DropBranchRequest {
            connection: conn,
            branch: Some(pb::Branch {
                port: 1,
                id: Some(pb::VcId { vpi: 0, vci: 200 }),
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = raw
        .statistics(pb::StatisticsRequest {
            connections: vec![12345],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    // A command that does not decode fails the whole Execute.
    let err = raw
        .execute(pb::ExecuteRequest {
            commands: vec![pb::Command { op: None }],
            atomicity: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("command 0"));
    // An all-or-nothing batch with one bad command changes nothing.
    let out = c
        .execute(
            vec![
                Command::Commit(commit(110, 310, 10.0)),
                Command::Commit(commit(111, 200, 10.0)),
            ],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    assert_eq!(out[0].as_ref().unwrap_err().kind(), ErrorKind::Aborted);
    assert_eq!(
        out[1].as_ref().unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(state(&c).await, before);
    sw.stop().await;
}

#[tokio::test]
async fn clients_without_a_lab_certificate_are_refused() {
    let certs = tempfile::tempdir().unwrap();
    let files = atmlab_rpc::tls::init_certs(
        certs.path(),
        &atmlab_rpc::tls::Subject::list(&["switch:s1", "admin:cm"]).unwrap(),
        false,
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let foreign = atmlab_rpc::tls::init_certs(
        elsewhere.path(),
        &atmlab_rpc::tls::Subject::list(&["admin:cm"]).unwrap(),
        false,
    )
    .unwrap();
    let sw = server::start(&file(), Some(&files[0].load().unwrap()))
        .await
        .unwrap();
    let addr = sw.grpc_addr.to_string();

    // A certificate from another CA: the handshake or the first call fails.
    let foreign_id = foreign[0]
        .load()
        .unwrap()
        .expecting(atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch));
    let refused = match atmlab_rpc::client_channel(&addr, Some(&foreign_id)).await {
        Err(_) => true,
        Ok(ch) => GrpcSwitch::new(ch).describe().await.is_err(),
    };
    assert!(refused, "a certificate from another CA got in");

    // No TLS at all.
    let refused = match atmlab_rpc::client_channel(&addr, None).await {
        Err(_) => true,
        Ok(ch) => GrpcSwitch::new(ch).describe().await.is_err(),
    };
    assert!(refused, "a plain-text client got in");

    // And the switch is untouched; the right certificate works.
    let ok = grpc_client(sw.grpc_addr, Some(&files[1].load().unwrap())).await;
    assert_eq!(ok.describe().await.unwrap().connections, 0);
    sw.stop().await;
}
