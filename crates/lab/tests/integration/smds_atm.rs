//! SMDS over ATM (paper 002 §4.2: the servers sat on an ATM network): two SMDS servers,
//! the first one's SNI over a VC through the three switches of `topologies/line3.toml`
//! (L3_PDUs as AAL3/4 cells; the server started from a file with the `atm` option), the
//! ISSI and the second SNI over UDP. PDUs arrive intact
//! both ways; a cell lost or corrupted between the subscriber and its switch loses
//! exactly the PDU it belonged to, and the server's reassembly counts it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::live;
use atmlab_core::units::BitRate;
use atmlab_lab::smds_atm::{self, AtmSubscriber};
use atmlab_smds::config::{ServerFile, TopologyFile};
use atmlab_smds::live::{Link, LiveServer, Subscriber, describe};
use atmlab_smds::msg::l3_pdu;
/// Octets in a cell (atmlab_wire::cell::CELL_LEN; the lab does not depend on the wire crate).
const CELL_LEN: usize = 53;
use tokio::net::UdpSocket;

use crate::common;

const NONE: u64 = u64::MAX;

/// A UDP relay between a host and its switch port that can drop or corrupt one cell
/// going up (host to switch), counted from the relay's start.
struct Relay {
    addr: SocketAddr,
    drop_at: Arc<AtomicU64>,
    corrupt_at: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(switch: SocketAddr) -> Relay {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let (drop_at, corrupt_at) = (
            Arc::new(AtomicU64::new(NONE)),
            Arc::new(AtomicU64::new(NONE)),
        );
        let (d, c) = (Arc::clone(&drop_at), Arc::clone(&corrupt_at));
        let task = tokio::spawn(async move {
            let mut host: Option<SocketAddr> = None;
            let mut buf = vec![0u8; 65_536];
            let mut cells_up = 0u64;
            loop {
                let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                    continue;
                };
                if from == switch {
                    if let Some(h) = host {
                        let _ = sock.send_to(&buf[..n], h).await;
                    }
                    continue;
                }
                host = Some(from);
                let mut out = Vec::with_capacity(n);
                for cell in buf[..n].chunks(CELL_LEN) {
                    let i = cells_up;
                    cells_up += 1;
                    if i == d.load(Relaxed) {
                        continue;
                    }
                    out.extend_from_slice(cell);
                    if i == c.load(Relaxed) {
                        // A payload bit: the HEC passes, the SAR-PDU's CRC-10 fails.
                        let at = out.len() - CELL_LEN + 20;
                        out[at] ^= 0x10;
                    }
                }
                // An empty datagram is the host's attach: pass it on too.
                let _ = sock.send_to(&out, switch).await;
            }
        });
        Relay {
            addr,
            drop_at,
            corrupt_at,
            task,
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The PDU numbered `seq` (its number in the first Info octets) of `len` Info octets.
fn body(seq: u32, len: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..len).map(|k| (k as u32 * 31 + seq) as u8).collect();
    b[..4].copy_from_slice(&seq.to_be_bytes());
    b
}

/// Receives until `want` PDUs arrived or nothing came for a while; their sequence
/// numbers, each checked intact.
async fn receive(sub: &Subscriber, want: usize, len: usize) -> Vec<u32> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while got.len() < want {
        let Ok(r) = tokio::time::timeout(Duration::from_secs(2), sub.recv(&mut buf)).await else {
            break;
        };
        let n = r.unwrap();
        let (_, _, info) = describe(&buf[..n]).unwrap();
        let seq = u32::from_be_bytes(info[..4].try_into().unwrap());
        assert_eq!(info, body(seq, len).as_slice(), "PDU {seq} arrived damaged");
        got.push(seq);
    }
    got
}

/// Polls `f` until it holds or five seconds pass.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sni_over_atm_carries_l3_pdus_and_a_lost_cell_loses_one_pdu() {
    let dir = tempfile::tempdir().unwrap();
    let lab = common::lab("line3.toml", dir.path()).await;
    let cm = live::start(
        CmConfig::new(CmKind::Xbind),
        lab.clients.clone(),
        Box::new(lab.router()),
    )
    .unwrap();
    // The subscriber is host a (s1:0), server A's SNI host b (s3:1): the VC each way
    // crosses the three switches.
    let (sub_vcs, sni_vcs) = smds_atm::duplex(&cm, "a", "b", 10_000.0).await.unwrap();
    let rate = BitRate(155.52e6);
    let sni = smds_atm::attachment(&lab.net, "b", sni_vcs, rate).unwrap();
    let mut sub_atm = smds_atm::attachment(&lab.net, "a", sub_vcs, rate).unwrap();
    let relay = Relay::start(sub_atm.switch).await;
    sub_atm.switch = relay.addr;
    // Host ports are bound through the control path, here in process: a's to the relay.
    lab.net.attach_host("a", relay.addr).unwrap();

    // Server A from a server file, its SNI over ATM (the file's `atm` option); server B
    // on UDP sockets.
    let issi_b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr_b = issi_b.local_addr().unwrap();
    let file = ServerFile::parse(
        &format!(
            r#"
id = 1
hello_ms = 50
queue = 64
[[interface]]
kind = "sni"
addresses = ["I:15550101"]
atm = {{ switch = "{}", send_vc = "{}", recv_vc = "{}" }}
[[interface]]
kind = "issi"
bind = "127.0.0.1:0"
peer = "{addr_b}"
"#,
            sni.switch, sni.send_vc, sni.recv_vc
        ),
        "a.toml",
    )
    .unwrap();
    let running = smds_atm::bind(&file).await.unwrap();
    let (server_a, adapter) = (&running.server, running.atm[0].as_ref().unwrap());
    lab.net.attach_host("b", adapter.local).unwrap();
    assert!(running.atm[1].is_none());
    let addr_a = server_a.addrs()[1];
    let topo = TopologyFile::parse(
        "hello_ms = 50\n[[server]]\nname = \"a\"\nsubscribers = [\"I:15550101\"]\n\
         [[server]]\nname = \"b\"\nsubscribers = [\"I:15550201\"]\n[[link]]\na = \"a\"\nb = \"b\"\n",
        "test",
    )
    .unwrap();
    let any = "127.0.0.1:0".parse().unwrap();
    let sni_b = UdpSocket::bind(any).await.unwrap();
    let server_b = LiveServer::start_links(
        topo.servers[1].1.clone(),
        vec![Link::Udp(sni_b, None), Link::Udp(issi_b, Some(addr_a))],
        64,
    )
    .unwrap();
    eventually("the servers converge", || {
        [server_a, &server_b].iter().all(|s| {
            let st = s.status();
            st.lsas == 2 && st.neighbours.iter().all(|n| n.2)
        })
    })
    .await;
    let u2 = Subscriber::attach(any, server_b.addrs()[0]).await.unwrap();
    let mut u1 = AtmSubscriber::attach(sub_atm).await.unwrap();
    eventually("u2 attached", || {
        server_b.peer(atmlab_smds::IfaceId(0)).is_some()
    })
    .await;
    let (from, to) = ("I:15550101".parse().unwrap(), "I:15550201".parse().unwrap());
    let len = 1000;
    let mut cells_per_pdu = 0u64;
    let mut send = async |u1: &mut AtmSubscriber, seqs: std::ops::Range<u32>| {
        for seq in seqs {
            let pdu = l3_pdu(from, to, &body(seq, len), seq as u8).unwrap();
            cells_per_pdu = u1.send(&pdu).await.unwrap() as u64;
        }
        cells_per_pdu
    };

    // 1. Twenty PDUs up the ATM SNI, through A and the ISSI to B's subscriber: all
    //    intact, in order.
    let c = send(&mut u1, 0..20).await;
    assert_eq!(receive(&u2, 20, len).await, (0..20).collect::<Vec<_>>());
    assert!(c > 20, "a 1,040-octet L3_PDU takes {c} cells");
    let stats = &adapter.stats;
    assert_eq!(stats.received.load(Relaxed), 20);
    assert_eq!(stats.aal34().lost, 0);

    // 2. The fifth cell of PDU 20 is lost: PDU 20 alone is lost, and counted.
    relay.drop_at.store(20 * c + 4, Relaxed);
    send(&mut u1, 20..30).await;
    assert_eq!(receive(&u2, 9, len).await, (21..30).collect::<Vec<_>>());
    eventually("the lost PDU counted", || stats.aal34().lost == 1).await;
    assert_eq!(stats.aal34().delivered, 29);
    assert!(stats.aal34().stray_cells > 0, "{:?}", stats.aal34());

    // 3. A cell of PDU 30 corrupted (its CRC-10 fails): PDU 30 alone is lost.
    relay.corrupt_at.store(30 * c + 7, Relaxed);
    send(&mut u1, 30..40).await;
    assert_eq!(receive(&u2, 9, len).await, (31..40).collect::<Vec<_>>());
    eventually("the corrupt PDU counted", || stats.aal34().lost == 2).await;
    assert_eq!(stats.aal34().delivered, 38);
    eventually("server A switched exactly the PDUs that arrived", || {
        server_a.status().counters.sni_to_issi == 38
    })
    .await;
    assert_eq!(server_a.status().counters.received, 38);

    // 4. And down: B's subscriber to A's, the last hop AAL3/4 cells to the ATM host.
    for seq in 100..110 {
        u2.send(&l3_pdu(to, from, &body(seq, len), 0).unwrap())
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    while let Some(pdu) = u1.recv(Duration::from_secs(2)).await.unwrap() {
        let (_, _, info) = describe(&pdu).unwrap();
        let seq = u32::from_be_bytes(info[..4].try_into().unwrap());
        assert_eq!(info, body(seq, len).as_slice());
        got.push(seq);
        if got.len() == 10 {
            break;
        }
    }
    assert_eq!(got, (100..110).collect::<Vec<_>>());
    assert_eq!(u1.counters().lost, 0);
    assert_eq!(stats.sent.load(Relaxed), 10);
    // The server's status reports what its ATM interface counted.
    let st = running.status_json();
    assert_eq!(st["atm"][0]["iface"], 1, "{st}");
    assert_eq!(st["atm"][0]["lost"], 2, "{st}");
    assert_eq!(st["atm"][0]["received"], 38, "{st}");
    drop((running, server_b));
    cm.shutdown().await;
    lab.down().await;
}
