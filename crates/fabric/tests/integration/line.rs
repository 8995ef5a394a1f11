//! Acceptance: a 3-switch line with two hosts on loopback, controlled over gRPC with
//! mutual TLS. Commit a path by calling each switch server directly (two-phase: reserve
//! then commit), send 1,000 AAL5 frames of random sizes from host A, receive all of them
//! byte-identical at host B on the translated VPI/VCI, release, and find every table
//! empty and every reservation returned.

use std::time::Duration;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::units::BitRate;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::host::HostPort;
use atmlab_fabric::live::server::{self, RunningSwitch, ServerFile};
use atmlab_fabric::*;
use rand::{Rng, SeedableRng};

use crate::common::{self, any_addr, grpc_client, reserve_via};

fn server_file(name: &str) -> ServerFile {
    ServerFile::parse(
        &format!(
            r#"
name = "{name}"
[[ports]]
id = 0
[[ports]]
id = 1
interface = "nni"
"#
        ),
        "test",
    )
    .unwrap()
}

async fn wire(a: &RunningSwitch, pa: u16, b: &RunningSwitch, pb: u16) {
    let addr = |s: &RunningSwitch, p: u16| s.ports.iter().find(|(id, _)| id.0 == p).unwrap().1;
    assert!(a.data_plane.set_peer(PortId(pa), addr(b, pb), &a.switch));
    assert!(b.data_plane.set_peer(PortId(pb), addr(a, pa), &b.switch));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_switch_line_carries_1000_frames_and_releases_cleanly() {
    let certs = tempfile::tempdir().unwrap();
    let files = atmlab_rpc::tls::init_certs(
        certs.path(),
        &atmlab_rpc::tls::Subject::list(&["switch:s1", "switch:s2", "switch:s3", "cm:cm"]).unwrap(),
        false,
    )
    .unwrap();
    let mut switches = Vec::new();
    for (i, name) in ["s1", "s2", "s3"].iter().enumerate() {
        let id = files[i].load().unwrap();
        switches.push(server::start(&server_file(name), Some(&id)).await.unwrap());
    }
    wire(&switches[0], 1, &switches[1], 0).await;
    wire(&switches[1], 1, &switches[2], 0).await;
    let cm = files[3].load().unwrap();
    let mut clients = Vec::new();
    for s in &switches {
        clients.push(grpc_client(s.grpc_addr, Some(&cm)).await);
    }

    // The path: A -> s1 0/100 -> (s1.1 -> s2.0) -> (s2.1 -> s3.0) -> s3.1 -> B.
    // Phase 1 on each switch's output port, phase 2 with the reserved identifier; the
    // input identifier of each hop is the output identifier of the hop before.
    let mut in_id = VcId::new(0, 100);
    let mut conns = Vec::new();
    let mut leftovers = Vec::new();
    for c in &clients {
        let ids = reserve_via(c, 1, 4, Atomicity::AllOrNothing).await;
        let out = ids[0];
        let (conn, _) = c
            .commit(&Commit {
                buffer_cells: 64,
                tag: "line".into(),
                ..common::commit(0, in_id, 1, out, 100_000.0)
            })
            .await
            .unwrap();
        conns.push(conn);
        leftovers.push(ids[1..].to_vec());
        in_id = out;
    }
    let out_vc = in_id;

    let host_rate = BitRate(40e6);
    let s1_port0 = switches[0].ports[0].1;
    let s3_port1 = switches[2].ports[1].1;
    let mut b = HostPort::attach(any_addr(), s3_port1, host_rate)
        .await
        .unwrap();
    let mut a = HostPort::attach(any_addr(), s1_port0, host_rate)
        .await
        .unwrap();
    // Host ports are bound through the control path (here in process), not by the
    // hosts' first datagrams.
    assert!(switches[0].attach_host(PortId(0), a.local_addr().unwrap()));
    assert!(switches[2].attach_host(PortId(1), b.local_addr().unwrap()));
    let learned = |s: &RunningSwitch, p: u16| {
        s.data_plane
            .peers()
            .iter()
            .any(|(id, peer)| id.0 == p && peer.is_some())
    };
    common::eventually("both hosts' attachments are learned", || {
        learned(&switches[0], 0) && learned(&switches[2], 1)
    })
    .await;

    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let frames: Vec<Vec<u8>> = (0..1000)
        .map(|_| {
            let n = rng.random_range(1..=4000);
            (0..n).map(|_| rng.random()).collect()
        })
        .collect();
    let sender = tokio::spawn(async move {
        for f in &frames {
            a.send_frame(VcId::new(0, 100), f).await.unwrap();
        }
        frames
    });
    let mut got = Vec::with_capacity(1000);
    while got.len() < 1000 {
        match b.recv_frame(Duration::from_secs(10)).await.unwrap() {
            Some(r) => got.push(r),
            None => break,
        }
    }
    let frames = sender.await.unwrap();
    assert_eq!(
        got.len(),
        1000,
        "frames lost; host B reassembly errors: {}",
        b.errors
    );
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(g.vc, out_vc, "received on the translated VC");
        assert_eq!(&g.sdu, f, "byte-identical");
    }
    assert_eq!(b.errors, 0);

    // Per-connection counters saw every cell on every hop.
    // An AAL5 frame of n octets takes ceil((n + 8) / 48) cells.
    let cells: u64 = frames
        .iter()
        .map(|f| (f.len() + 8).div_ceil(48) as u64)
        .sum::<u64>();
    for (s, conn) in switches.iter().zip(&conns) {
        let counted = s
            .switch
            .with_switch(|sw| sw.connection(*conn).unwrap().cells);
        assert_eq!(
            counted,
            cells,
            "switch {} counted every cell",
            s.switch.describe_now().name
        );
    }
    for (c, conn) in clients.iter().zip(&conns) {
        let listed = c.connections().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, *conn);
    }

    // Release, return the spare reservations: every table empty, every reservation back.
    for ((c, conn), spare) in clients.iter().zip(&conns).zip(&leftovers) {
        c.release(*conn, false).await.unwrap();
        let r = c
            .execute(
                vec![Command::Unreserve(Unreserve {
                    port: PortId(1),
                    ids: spare.clone(),
                    owner: "cm".into(),
                })],
                Atomicity::AllOrNothing,
            )
            .await
            .unwrap();
        assert!(r[0].is_ok(), "{r:?}");
        assert!(c.connections().await.unwrap().is_empty());
        assert!(c.reservations().await.unwrap().is_empty());
        let d = c.describe().await.unwrap();
        for p in &d.ports {
            assert_eq!(
                (p.allocated, p.buffer_allocated, p.reserved, p.committed),
                (0.0, 0, 0, 0),
                "port {}",
                p.config.id
            );
        }
    }
    for s in switches {
        s.stop().await;
    }
}
