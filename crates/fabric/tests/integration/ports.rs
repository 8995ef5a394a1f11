//! Ports that hold (issue 24, "Why" 3), on a switch server's two control ports: silent
//! connections do not delay a legitimate mutual-TLS call on the gRPC port, and the raw-TCP
//! port closes a connection that sends nothing and refuses one over its per-address cap,
//! counting both, while the connections it keeps go on working.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::live::raw::{RawClient, RawLimits, run_raw_server};
use atmlab_fabric::live::server::{self, ServerFile};
use atmlab_fabric::*;
use atmlab_rpc::tls::{IncomingStats, Refusal, TlsIdentity};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::common::{self, HANG};

/// The probe: 2,000 connections that send nothing.
const IDLE: usize = 2_000;
/// The acceptance line.
const ACCEPTABLE_DELAY: Duration = Duration::from_millis(100);
/// A call that takes this long was held up, not slowed by a busy machine.
const GIVE_UP: Duration = Duration::from_secs(1);
/// Legitimate calls measured with and without the silent connections.
const CALLS: usize = 5;
/// Silent connections open before the legitimate calls start: more than the old accept
/// loop's 256 pending handshakes.
const BEFORE_CALLS: usize = 300;

/// Polls `done` until it holds or [`HANG`] passes.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Legitimate Describes, each on a new mutual-TLS connection, and how long each took
/// (one that fails or takes [`GIVE_UP`] counts as [`GIVE_UP`]).
async fn describes(addr: SocketAddr, client: &TlsIdentity) -> Vec<Duration> {
    let mut took = Vec::new();
    for _ in 0..CALLS {
        let t = Instant::now();
        let call = async {
            let ch = atmlab_rpc::client_channel(&addr.to_string(), Some(client))
                .await
                .map_err(|e| e.to_string())?;
            atmlab_fabric::live::grpc::GrpcSwitch::new(ch)
                .describe()
                .await
                .map_err(|e| e.to_string())
        };
        took.push(match tokio::time::timeout(GIVE_UP, call).await {
            Ok(Ok(_)) => t.elapsed(),
            Ok(Err(e)) => {
                eprintln!("a legitimate call failed: {e}");
                GIVE_UP
            }
            Err(_) => GIVE_UP,
        });
    }
    took
}

fn median(calls: &[Duration]) -> Duration {
    let mut sorted = calls.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_do_not_delay_a_switch_servers_describe() {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let certs = tempfile::tempdir().unwrap();
    let files = atmlab_rpc::tls::init_certs(
        certs.path(),
        &atmlab_rpc::tls::Subject::list(&["switch:s1", "cm:cm"]).unwrap(),
        false,
    )
    .unwrap();
    let file = ServerFile::parse("name = \"s1\"\n[[ports]]\nid = 0\n", "test").unwrap();
    let sw = server::start(&file, Some(&files[0].load().unwrap()))
        .await
        .unwrap();
    let client = files[1]
        .load()
        .unwrap()
        .expecting(atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch));

    let quiet = describes(sw.grpc_addr, &client).await;
    let opened = Arc::new(AtomicUsize::new(0));
    // On a thread and runtime of its own, as another process would, so that opening
    // them does not take the test's runtime from the legitimate client.
    let opener = atmlab_rpc::probe::attacker(sw.grpc_addr, IDLE, opened.clone());
    wait_for("the first silent connections", || {
        opened.load(Ordering::Relaxed) >= BEFORE_CALLS
    })
    .await;
    let loud = describes(sw.grpc_addr, &client).await;
    let silent = opener.join().unwrap();
    eprintln!(
        "{} silent connections; Describe took {quiet:?} without them, {loud:?} with",
        silent.len()
    );
    assert!(
        loud.iter().all(|&t| t < GIVE_UP),
        "with {} silent connections a Describe was held up: {loud:?}",
        silent.len()
    );
    assert!(
        median(&loud) < median(&quiet) + ACCEPTABLE_DELAY,
        "silent connections delayed a Describe from {:?} to {:?}",
        median(&quiet),
        median(&loud)
    );
    assert!(
        silent.len() >= IDLE * 9 / 10,
        "only {} silent connections",
        silent.len()
    );
    drop(silent);
    sw.stop().await;
}

/// A raw-TCP server on a local switch under `limits`; its address and counters.
async fn raw_server(limits: RawLimits) -> (SocketAddr, IncomingStats, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let switch = LocalSwitch::new(Switch::new(&common::config3()).unwrap(), None);
    let stats = IncomingStats::default();
    let task = tokio::spawn({
        let stats = stats.clone();
        async move { run_raw_server(listener, switch, None, &limits, stats, Default::default()).await }
    });
    (addr, stats, task)
}

/// Reads `tcp` until the server closes it (every octet it sent before is discarded), or
/// fails after [`HANG`].
async fn wait_for_eof(tcp: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => {}
            Err(_) => panic!("{what} is still open after {HANG:?}"),
        }
    }
}

#[tokio::test]
async fn the_raw_port_closes_a_connection_that_sends_nothing() {
    let limits = RawLimits {
        idle_timeout: Duration::from_millis(200),
        ..RawLimits::default()
    };
    let (addr, stats, server) = raw_server(limits).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let eof = tokio::spawn(async move {
        wait_for_eof(&mut silent, "the silent connection").await;
    });
    // A client that keeps asking (every 50 ms, a quarter of the idle time-out) while the
    // silent one waits stays; the silent one goes.
    let busy = RawClient::connect(addr).await.unwrap();
    let mut asked = 0;
    while !eof.is_finished() {
        busy.describe().await.unwrap();
        asked += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eof.await.unwrap();
    assert!(asked >= 2, "the busy client asked {asked} times");
    assert_eq!(stats.count(Refusal::Idle), 1);
    busy.describe().await.unwrap();
    server.abort();
}

#[tokio::test]
async fn a_quiet_raw_client_keeps_its_connection_with_keep_alives() {
    let limits = RawLimits {
        idle_timeout: Duration::from_millis(300),
        ..RawLimits::default()
    };
    let (addr, stats, server) = raw_server(limits).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let quiet = RawClient::with_keepalive(tcp, Duration::from_millis(100));
    quiet.describe().await.unwrap();
    // Quiet for three idle time-outs (each measured by a connection that sends nothing
    // and is closed for it, one after the other), then asked again.
    for _ in 0..3 {
        let mut silent = TcpStream::connect(addr).await.unwrap();
        wait_for_eof(&mut silent, "a connection that sends nothing").await;
    }
    assert!(!quiet.is_closed(), "the quiet client was closed as idle");
    quiet.describe().await.unwrap();
    assert_eq!(stats.count(Refusal::Idle), 3, "only the silent ones go");
    server.abort();
}

#[tokio::test]
async fn the_raw_port_refuses_a_connection_over_its_per_address_cap() {
    let limits = RawLimits {
        max_connections_per_addr: 2,
        ..RawLimits::default()
    };
    let (addr, stats, server) = raw_server(limits).await;
    let first = RawClient::connect(addr).await.unwrap();
    let second = RawClient::connect(addr).await.unwrap();
    // Both are served before the third comes (the cap counts open connections).
    first.describe().await.unwrap();
    second.describe().await.unwrap();
    let mut third = TcpStream::connect(addr).await.unwrap();
    wait_for_eof(&mut third, "the connection over the cap").await;
    wait_for("the refusal", || {
        stats.count(Refusal::ConnectionsPerAddr) == 1
    })
    .await;
    // The connections already open keep working...
    first.describe().await.unwrap();
    second.describe().await.unwrap();
    // ...another address is not held to this one's cap...
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let other = RawClient::new(socket.connect(addr).await.unwrap());
    other.describe().await.unwrap();
    // ...and a closed connection frees its place.
    drop(second);
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let again = RawClient::connect(addr).await.unwrap();
        if again.describe().await.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place was not freed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(stats.count(Refusal::ConnectionsTotal), 0);
    server.abort();
}

#[tokio::test]
async fn a_switch_servers_limits_come_from_its_file() {
    let file = ServerFile::parse(
        "name = \"s1\"\nraw = \"127.0.0.1:0\"\n[limits]\nidle_timeout = 0.2\n\
         max_connections_per_addr = 1\n[[ports]]\nid = 0\n",
        "test",
    )
    .unwrap();
    let sw = server::start(&file, None).await.unwrap();
    let raw = sw.raw_addr.unwrap();
    let stats = sw.raw_stats.clone().unwrap();
    let mut first = TcpStream::connect(raw).await.unwrap();
    let mut second = TcpStream::connect(raw).await.unwrap();
    wait_for_eof(&mut second, "the connection over the file's cap").await;
    wait_for_eof(&mut first, "the connection idle past the file's time-out").await;
    wait_for("the counts", || {
        stats.count(Refusal::ConnectionsPerAddr) == 1 && stats.count(Refusal::Idle) == 1
    })
    .await;
    sw.stop().await;

    // A value that cannot be a limit is refused, naming the switch and the key.
    let bad = ServerFile::parse(
        "name = \"s1\"\n[limits]\nidle_timeout = -1.0\n[[ports]]\nid = 0\n",
        "test",
    )
    .unwrap();
    let e = server::start(&bad, None).await.unwrap_err().to_string();
    assert!(e.contains("s1") && e.contains("limits.idle_timeout"), "{e}");
    let e = ServerFile::parse(
        "name = \"s1\"\n[limits]\nidle = 1.0\n[[ports]]\nid = 0\n",
        "test",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("idle"), "{e}");
}
