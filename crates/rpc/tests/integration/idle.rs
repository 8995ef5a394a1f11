//! Ports that hold (issue 24, "Why" 3): silent TCP connections, the cheapest attack on a
//! control port, must not delay a legitimate mutual-TLS call. Before, the accept loop
//! stopped accepting at 256 pending handshakes and waited up to 10 s for each, so 260
//! silent connections made a call take 8.7 s and 2,000 made it fail.
//!
//! The silent connections come from 127.0.0.2 and the legitimate client from 127.0.0.1:
//! the pending handshakes are bounded per source address, so one address cannot starve
//! another (an attacker behind the same address as the client is not what this bounds).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use atmlab_rpc::probe;
use atmlab_rpc::tls::{self, Refusal, TlsIdentity};
use atmlab_rpc::v1::name_service_server::NameServiceServer;
use tokio::net::TcpSocket;

use crate::{Echo, labs, resolve, wait_for, with_tls};

/// The probe: 2,000 connections that send nothing.
pub const IDLE: usize = 2_000;

/// Silent connections open before the legitimate calls start (the rest open while they
/// run): more than the old accept loop's 256 pending handshakes, so that a loop that waits
/// for them is caught waiting.
pub const BEFORE_CALLS: usize = 300;

/// The acceptance line: the silent connections delay a legitimate call by less
/// than this.
pub const ACCEPTABLE_DELAY: Duration = Duration::from_millis(100);

/// Raises the soft limit on open files to the hard one: the test holds [`IDLE`] sockets
/// and the server some of its own, past the usual soft limit of 1,024.
pub fn raise_fd_limit() {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
}

/// [`probe::attacker`] for [`IDLE`] connections.
pub fn attacker(
    addr: SocketAddr,
    opened: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Vec<std::net::TcpStream>> {
    probe::attacker(addr, IDLE, opened)
}

/// Legitimate calls made one after another, each on a new connection (TCP, the TLS
/// handshake, one Resolve), and how long each took; one that fails or takes more than
/// [`GIVE_UP`] counts as [`GIVE_UP`].
pub async fn legitimate_calls(addr: SocketAddr, client: &TlsIdentity) -> Vec<Duration> {
    let mut took = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        took.push(
            match tokio::time::timeout(GIVE_UP, resolve(with_tls(addr, client))).await {
                Ok(Ok(_)) => t.elapsed(),
                Ok(Err(e)) => {
                    eprintln!("a legitimate call failed: {e}");
                    GIVE_UP
                }
                Err(_) => GIVE_UP,
            },
        );
    }
    took
}

/// Legitimate calls measured with and without the silent connections.
pub const CALLS: usize = 5;

/// A call that takes this long was held up, not slowed by a busy machine.
pub const GIVE_UP: Duration = Duration::from_secs(1);

/// The median of `calls`.
pub fn median(calls: &[Duration]) -> Duration {
    let mut sorted = calls.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// The acceptance line, robust to a busy machine: every call gets through within
/// [`GIVE_UP`] (none waited for a silent connection's time-out), and the median call
/// with the silent connections is less than [`ACCEPTABLE_DELAY`] slower than without.
pub fn assert_not_delayed(quiet: &[Duration], loud: &[Duration], silent: usize) {
    eprintln!(
        "{silent} silent connections; legitimate calls took {quiet:?} without them, {loud:?} with"
    );
    assert!(
        loud.iter().all(|&t| t < GIVE_UP),
        "with {silent} silent connections a legitimate call was held up: {loud:?}"
    );
    let (quiet, loud) = (median(quiet), median(loud));
    assert!(
        loud < quiet + ACCEPTABLE_DELAY,
        "{silent} silent connections delayed a legitimate call from {quiet:?} to {loud:?}"
    );
    assert!(
        silent >= IDLE * 9 / 10,
        "only {silent} of {IDLE} silent connections were made: the probe did not happen"
    );
}

#[test]
fn two_thousand_silent_connections_do_not_delay_a_legitimate_call() {
    let _heavy = crate::heavy();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(silent_connections_against_a_name_service());
}

async fn silent_connections_against_a_name_service() {
    raise_fd_limit();
    let labs = labs();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // The path every gRPC server of the project takes, with its default limits.
    let incoming = tls::grpc_incoming(listener, Some(&labs.server)).unwrap();
    let (addr, stats) = (incoming.local_addr(), incoming.stats());
    let routes = atmlab_rpc::Services::new(NameServiceServer::new(Echo::default()));
    tokio::spawn(atmlab_rpc::serve_incoming(
        "name service",
        incoming,
        routes,
        std::future::pending(),
    ));

    let quiet = legitimate_calls(addr, &labs.client).await;
    let opened = Arc::new(AtomicUsize::new(0));
    let opener = attacker(addr, opened.clone());
    wait_for("the first silent connections", || {
        opened.load(Ordering::Relaxed) >= BEFORE_CALLS
    })
    .await;
    let loud = legitimate_calls(addr, &labs.client).await;
    let silent = opener.join().unwrap();
    assert_not_delayed(&quiet, &loud, silent.len());
    // Every silent connection was refused and counted: the excess over the per-address
    // cap at once, the rest when their handshake timed out.
    let n = silent.len() as u64;
    wait_for("every silent connection's refusal", || {
        stats.count(Refusal::PendingPerAddr) + stats.count(Refusal::HandshakeTimeout) >= n
    })
    .await;
    assert!(stats.count(Refusal::PendingPerAddr) > 0);
    drop(silent);
}

/// Silent connections from eight addresses (127.0.0.2 to 127.0.0.9), each up to its
/// per-address cap, fill the total cap twice over; a client from a ninth address still
/// gets its handshakes done, each in the place of the oldest silent handshake of an
/// address that holds many.
#[test]
fn many_addresses_filling_the_total_cap_do_not_shut_out_another() {
    let _heavy = crate::heavy();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let labs = labs();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let limits = tls::AcceptLimits {
                max_pending_per_addr: 16,
                max_pending: 64,
                ..Default::default()
            };
            let incoming = tls::grpc_incoming_with(listener, Some(&labs.server), &limits).unwrap();
            let (addr, stats) = (incoming.local_addr(), incoming.stats());
            let routes = atmlab_rpc::Services::new(NameServiceServer::new(Echo::default()));
            tokio::spawn(atmlab_rpc::serve_incoming(
                "name service",
                incoming,
                routes,
                std::future::pending(),
            ));
            let mut silent = Vec::new();
            for host in 2..10u8 {
                for _ in 0..16 {
                    let socket = TcpSocket::new_v4().unwrap();
                    socket
                        .bind(SocketAddr::from(([127, 0, 0, host], 0)))
                        .unwrap();
                    silent.push(socket.connect(addr).await.unwrap());
                }
            }
            // 128 silent connections, 64 places: the total is full (the later ones took
            // the places of the earlier ones, or were refused).
            wait_for("the total cap to fill", || {
                stats.count(Refusal::PendingTotal) >= 64
            })
            .await;
            let calls = legitimate_calls(addr, &labs.client).await;
            eprintln!("with the total cap full, legitimate calls took {calls:?}");
            assert!(
                calls.iter().all(|&t| t < GIVE_UP),
                "a client from another address was shut out: {calls:?}"
            );
            drop(silent);
        });
}
