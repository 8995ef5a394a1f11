//! The live shell on loopback: real UDP sockets, routing converging in real time, a PDU
//! from a subscriber of one server to a subscriber of another.

use std::time::Duration;

use atmlab_smds::IfaceId;
use atmlab_smds::config::TopologyFile;
use atmlab_smds::live::{LiveNetwork, Subscriber, describe};
use atmlab_smds::msg::l3_pdu;
use atmlab_wire::E164Address;

fn a(s: &str) -> E164Address {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_on_loopback_converge_and_deliver() {
    let topo = TopologyFile::parse(
        r#"
hello_ms = 50
[[server]]
name = "s1"
subscribers = ["I:15550101"]
[[server]]
name = "s2"
subscribers = []
[[server]]
name = "s3"
subscribers = ["I:15550301"]
[[link]]
a = "s1"
b = "s2"
[[link]]
a = "s2"
b = "s3"
"#,
        "live.toml",
    )
    .unwrap();
    let net = LiveNetwork::up(&topo, 256).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !net.converged() {
        assert!(tokio::time::Instant::now() < deadline, "no convergence");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sni1 = net.servers[0].1.addrs()[0];
    let sni3 = net.servers[2].1.addrs()[0];
    let any = "127.0.0.1:0".parse().unwrap();
    let alice = Subscriber::attach(any, sni1).await.unwrap();
    let bob = Subscriber::attach(any, sni3).await.unwrap();
    // Both attach datagrams read: each SNI sends to its subscriber.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (sni, bob_at) = (IfaceId(0), bob.local_addr().unwrap());
    while net.servers[2].1.peer(sni) != Some(bob_at)
        || net.servers[0].1.peer(sni) != Some(alice.local_addr().unwrap())
    {
        assert!(tokio::time::Instant::now() < deadline, "never attached");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pdu = l3_pdu(a("I:15550101"), a("I:15550301"), b"over loopback", 1).unwrap();
    alice.send(&pdu).await.unwrap();
    // A spoofed one (alice claims bob's address) goes nowhere and is counted.
    let spoof = l3_pdu(a("I:15550301"), a("I:15550301"), b"spoof", 1).unwrap();
    alice.send(&spoof).await.unwrap();
    let mut buf = vec![0u8; 10_000];
    let n = tokio::time::timeout(Duration::from_secs(5), bob.recv(&mut buf))
        .await
        .expect("bob receives")
        .unwrap();
    let (src, dst, info) = describe(&buf[..n]).unwrap();
    assert_eq!(
        (src, dst, info),
        (a("I:15550101"), a("I:15550301"), &b"over loopback"[..])
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let s1 = net.servers[0].1.status();
        if s1.counters.spoofed == 1 {
            assert_eq!(s1.counters.sni_to_issi, 1);
            assert_eq!(net.servers[1].1.status().counters.issi_to_issi, 1);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{s1:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
