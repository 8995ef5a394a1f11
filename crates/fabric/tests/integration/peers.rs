//! Security (issue 24, item 4): the data plane is bound to its peers. A trunk port takes
//! cells only from its configured neighbour, a host port only from the host that attached
//! to it; everything else is dropped, counted per port, and visible through the
//! Statistics RPC, while legitimate traffic keeps flowing. Real UDP sockets on loopback;
//! every wait polls against a deadline.

use std::net::SocketAddr;
use std::time::Duration;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::units::BitRate;
use atmlab_fabric::live::host::HostPort;
use atmlab_fabric::live::server::{self, RunningSwitch, ServerFile};
use atmlab_fabric::*;

use crate::common::{self, any_addr, grpc_client};

/// A switch whose host ports take the first attach (`attach = "first"`, the opt-in of a
/// trusted network: these tests are about what happens once a port is bound); port 1 is
/// a trunk when `trunk`.
fn two_ports(name: &str, trunk: bool) -> ServerFile {
    let iface = if trunk { "nni" } else { "uni" };
    let first = "attach = \"first\"\n";
    let first_1 = if trunk { "" } else { first };
    ServerFile::parse(
        &format!(
            "name = \"{name}\"\n[[ports]]\nid = 0\n{first}[[ports]]\nid = 1\ninterface = \"{iface}\"\n{first_1}"
        ),
        "test",
    )
    .unwrap()
}

fn udp(s: &RunningSwitch, port: u16) -> SocketAddr {
    s.ports.iter().find(|(p, _)| p.0 == port).unwrap().1
}

fn frames(n: u32, seed: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            (0..(i * 37 % 2000 + 8))
                .map(|k| (k * 7 + i + seed) as u8)
                .collect()
        })
        .collect()
}

/// Receives frames at `host` until `want` have arrived on `vc` (or a 10 s idle gap);
/// every frame received, whatever its VC.
async fn receive(host: &mut HostPort, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while got.len() < want {
        match host.recv_frame(Duration::from_secs(10)).await.unwrap() {
            Some(r) => got.push(r.sdu),
            None => break,
        }
    }
    got
}

/// `got` is exactly `legit`, in order; said briefly (frames are long).
fn same(got: &[Vec<u8>], legit: &[Vec<u8>], forged: &[Vec<u8>]) {
    let n_forged = got.iter().filter(|f| forged.contains(f)).count();
    assert!(
        got == legit,
        "received {} frames ({n_forged} forged), wanted the {} legitimate ones in order",
        got.len(),
        legit.len()
    );
}

async fn commit(s: &RunningSwitch, c: Commit) {
    let r = s
        .switch
        .execute_now(&[Command::Commit(c)], Atomicity::AllOrNothing)
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_trunk_cells_are_dropped_and_counted_while_traffic_flows() {
    // a -> s1 (0:0/100 -> 1:0/40) -> trunk -> s2 (1:0/40 -> 0:0/200) -> b.
    let s1 = server::start(&two_ports("s1", true), None).await.unwrap();
    let s2 = server::start(&two_ports("s2", true), None).await.unwrap();
    assert!(s1.data_plane.set_peer(PortId(1), udp(&s2, 1), &s1.switch));
    assert!(s2.data_plane.set_peer(PortId(1), udp(&s1, 1), &s2.switch));
    commit(
        &s1,
        common::commit(0, VcId::new(0, 100), 1, VcId::new(0, 40), 20_000.0),
    )
    .await;
    commit(
        &s2,
        common::commit(1, VcId::new(0, 40), 0, VcId::new(0, 200), 20_000.0),
    )
    .await;
    let rate = BitRate(50e6);
    let mut b = HostPort::attach(any_addr(), udp(&s2, 0), rate)
        .await
        .unwrap();
    let mut a = HostPort::attach(any_addr(), udp(&s1, 0), rate)
        .await
        .unwrap();
    common::eventually("both hosts are attached", || {
        s1.data_plane.peers()[0].1.is_some() && s2.data_plane.peers()[0].1.is_some()
    })
    .await;
    // The attacker: an arbitrary socket sending well-formed cells on the trunk's VC
    // straight to s2's trunk port.
    let mut evil = HostPort::attach(any_addr(), udp(&s2, 1), rate)
        .await
        .unwrap();
    let forged = frames(20, 99);
    let legit = frames(50, 0);
    for (i, f) in legit.iter().enumerate() {
        a.send_frame(VcId::new(0, 100), f).await.unwrap();
        if let Some(x) = forged.get(i) {
            evil.send_frame(VcId::new(0, 40), x).await.unwrap();
        }
    }
    let got = receive(&mut b, legit.len()).await;
    same(&got, &legit, &forged);
    // Counted on s2's trunk port, and only there: on the live object and through the
    // Statistics RPC.
    let forged_cells: u64 = forged
        .iter()
        .map(|f| (f.len() as u64 + 8).div_ceil(48))
        .sum();
    common::eventually("the refusals are counted", || {
        s2.refusals(PortId(1)).cells == forged_cells
    })
    .await;
    let r = s2.refusals(PortId(1));
    assert!(r.datagrams >= forged.len() as u64 / 24 && r.datagrams <= forged_cells + 1);
    assert_eq!(s2.refusals(PortId(0)).datagrams, 0);
    assert_eq!(
        s1.refusals(PortId(1)).datagrams,
        0,
        "s2's cells were taken by s1"
    );
    let stats = statistics(&s2).await;
    let trunk = stats.iter().find(|p| p.port == 1).unwrap();
    assert_eq!(
        (trunk.datagrams_refused, trunk.cells_refused),
        (r.datagrams, r.cells)
    );
    assert_eq!(stats.iter().find(|p| p.port == 0).unwrap().cells_refused, 0);
    s1.stop().await;
    s2.stop().await;
}

async fn statistics(s: &RunningSwitch) -> Vec<atmlab_rpc::v1::PortStatistics> {
    grpc_client(s.grpc_addr, None)
        .await
        .raw()
        .statistics(atmlab_rpc::v1::StatisticsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .ports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hijacking_datagram_does_not_move_a_host_port() {
    let s1 = server::start(&two_ports("s1", false), None).await.unwrap();
    commit(
        &s1,
        common::commit(0, VcId::new(0, 100), 1, VcId::new(0, 200), 20_000.0),
    )
    .await;
    let rate = BitRate(50e6);
    let mut b = HostPort::attach(any_addr(), udp(&s1, 1), rate)
        .await
        .unwrap();
    let mut a = HostPort::attach(any_addr(), udp(&s1, 0), rate)
        .await
        .unwrap();
    let b_addr = b.local_addr().unwrap();
    common::eventually("both hosts are attached", || {
        s1.data_plane.peers().iter().all(|(_, p)| p.is_some())
    })
    .await;
    // The hijack of the issue: one empty datagram to b's port from elsewhere.
    let thief = tokio::net::UdpSocket::bind(any_addr()).await.unwrap();
    thief.send_to(&[], udp(&s1, 1)).await.unwrap();
    // And cells injected into a's port from a stranger, on a's VC.
    let mut evil = HostPort::attach(any_addr(), udp(&s1, 0), rate)
        .await
        .unwrap();
    let forged = frames(10, 77);
    for f in &forged {
        evil.send_frame(VcId::new(0, 100), f).await.unwrap();
    }
    let legit = frames(40, 3);
    for f in &legit {
        a.send_frame(VcId::new(0, 100), f).await.unwrap();
    }
    let got = receive(&mut b, legit.len()).await;
    same(&got, &legit, &forged);
    assert_eq!(
        s1.data_plane.peers()[1].1,
        Some(b_addr),
        "b's port stayed b's"
    );
    let mut buf = [0u8; 2048];
    assert!(
        thief.try_recv_from(&mut buf).is_err(),
        "the thief received cells"
    );
    // The hijacking attach on port 1, the injected cells (and the stranger's own
    // attach) on port 0: counted where they arrived.
    let forged_cells: u64 = forged
        .iter()
        .map(|f| (f.len() as u64 + 8).div_ceil(48))
        .sum();
    common::eventually("the refusals are counted", || {
        s1.refusals(PortId(0)).cells == forged_cells && s1.refusals(PortId(1)).datagrams == 1
    })
    .await;
    assert_eq!(
        s1.refusals(PortId(1)).cells,
        0,
        "an attach carries no cells"
    );
    let stats = statistics(&s1).await;
    assert_eq!(
        stats
            .iter()
            .find(|p| p.port == 1)
            .unwrap()
            .datagrams_refused,
        1
    );
    assert_eq!(
        stats.iter().find(|p| p.port == 0).unwrap().cells_refused,
        forged_cells
    );
    s1.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_port_is_bound_by_configuration_or_the_control_path() {
    // Port 1's host is configured: nobody else, not even a first attach, takes it.
    // Port 0 says nothing: by default a host port is bound through the control path
    // only, never by the first datagram (issue 24); port 2 is a trunk.
    let receiver = tokio::net::UdpSocket::bind(any_addr()).await.unwrap();
    let host_b = receiver.local_addr().unwrap();
    drop(receiver);
    let file = ServerFile::parse(
        &format!(
            "name = \"s1\"\n[[ports]]\nid = 0\n\
             [[ports]]\nid = 1\nhost = \"{host_b}\"\n\
             [[ports]]\nid = 2\ninterface = \"nni\"\npeer = \"127.0.0.1:9\"\n"
        ),
        "test",
    )
    .unwrap();
    let s1 = server::start(&file, None).await.unwrap();
    assert_eq!(s1.data_plane.peers()[1].1, Some(host_b));
    commit(
        &s1,
        common::commit(0, VcId::new(0, 100), 1, VcId::new(0, 200), 20_000.0),
    )
    .await;
    let rate = BitRate(50e6);
    // A squatter attaches to port 1 first: refused, the binding holds.
    let _squat = HostPort::attach(any_addr(), udp(&s1, 1), rate)
        .await
        .unwrap();
    common::eventually("the squatter is refused", || {
        s1.refusals(PortId(1)).datagrams == 1
    })
    .await;
    assert_eq!(s1.data_plane.peers()[1].1, Some(host_b));
    // The configured host attaches from its address and receives.
    let mut b = HostPort::attach(host_b, udp(&s1, 1), rate).await.unwrap();
    // Port 0: neither a stranger's attach nor a's own binds it...
    let _stranger = HostPort::attach(any_addr(), udp(&s1, 0), rate)
        .await
        .unwrap();
    let mut a = HostPort::attach(any_addr(), udp(&s1, 0), rate)
        .await
        .unwrap();
    let a_addr = a.local_addr().unwrap();
    common::eventually("both attaches are refused", || {
        s1.refusals(PortId(0)).datagrams == 2
    })
    .await;
    assert_eq!(s1.data_plane.peers()[0].1, None);
    // ... the AttachHost RPC does.
    let client = grpc_client(s1.grpc_addr, None).await;
    client.attach_host(PortId(0), a_addr).await.unwrap();
    assert_eq!(s1.data_plane.peers()[0].1, Some(a_addr));
    // A trunk is not re-pointed by an attach, nor is a port that does not exist.
    let e = client.attach_host(PortId(2), a_addr).await.unwrap_err();
    assert!(e.to_string().contains("trunk"), "{e}");
    assert!(client.attach_host(PortId(9), a_addr).await.is_err());
    assert_eq!(
        s1.data_plane.peers()[2].1,
        Some("127.0.0.1:9".parse().unwrap())
    );
    let bad = client
        .raw()
        .attach_host(atmlab_rpc::v1::AttachHostRequest {
            port: 0,
            address: "not an address".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    let legit = frames(20, 5);
    for f in &legit {
        a.send_frame(VcId::new(0, 100), f).await.unwrap();
    }
    let got = receive(&mut b, legit.len()).await;
    assert_eq!(got, legit);
    assert_eq!(s1.data_plane.peers()[0].1, Some(a_addr));
    // The in-process explicit attach moves a host port (a host back on a new address).
    let moved: SocketAddr = "127.0.0.1:7".parse().unwrap();
    assert!(s1.attach_host(PortId(0), moved));
    assert_eq!(s1.data_plane.peers()[0].1, Some(moved));
    assert!(!s1.attach_host(PortId(2), moved), "a trunk");
    s1.stop().await;
}

#[test]
fn a_port_with_both_a_peer_and_a_host_is_refused() {
    let file = ServerFile::parse(
        "name = \"s1\"\n[[ports]]\nid = 0\npeer = \"127.0.0.1:9\"\nhost = \"127.0.0.1:10\"\n",
        "test",
    )
    .unwrap();
    let e = file.switch_config().unwrap_err().to_string();
    assert!(e.contains("ports.0.host"), "{e}");
    let file = ServerFile::parse(
        "name = \"s1\"\n[[ports]]\nid = 0\nattach = \"any\"\n",
        "test",
    )
    .unwrap();
    let e = file.switch_config().unwrap_err().to_string();
    assert!(e.contains("ports.0.attach"), "{e}");
}
