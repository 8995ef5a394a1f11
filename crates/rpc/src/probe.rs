//! Probes of a server's control port as an attacker makes them (issue 24, "ports that
//! hold"): connections that never send a byte. The security tests of every server that
//! accepts through [`crate::tls`]'s loop (switches, the name service, managers) use them,
//! so that each probes the same way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};

/// The source address of the probes: another address than a legitimate client's
/// (127.0.0.1), as another host would be, so that per-address limits tell them apart.
pub const PROBE_SOURCE: &str = "127.0.0.2:0";

/// Opens up to `n` TCP connections from [`PROBE_SOURCE`] to `addr` that never send a
/// byte, a batch at a time, counting them in `opened` as they come, and returns those
/// that connected within a few seconds each.
///
/// A batch stays under the listen backlog (128, tokio's and std's): past it the kernel
/// drops SYNs and the clients retry a second later, which slows the prober, not the
/// server.
pub async fn silent_connections(
    addr: SocketAddr,
    n: usize,
    opened: Arc<AtomicUsize>,
) -> Vec<TcpStream> {
    const BATCH: usize = 100;
    let from: SocketAddr = PROBE_SOURCE.parse().expect("a socket address");
    let mut open = Vec::with_capacity(n);
    for start in (0..n).step_by(BATCH) {
        let batch: Vec<_> = (start..n.min(start + BATCH))
            .map(|_| {
                tokio::spawn(async move {
                    let socket = TcpSocket::new_v4().ok()?;
                    socket.bind(from).ok()?;
                    tokio::time::timeout(Duration::from_secs(5), socket.connect(addr))
                        .await
                        .ok()?
                        .ok()
                })
            })
            .collect();
        for c in batch {
            if let Ok(Some(tcp)) = c.await {
                open.push(tcp);
                opened.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    open
}

/// Runs [`silent_connections`] for `n` connections on a thread and runtime of its own,
/// as another process would, so that opening them does not take the caller's runtime
/// (where a server and a legitimate client may run) from the client. The thread returns
/// the connections, kept open until they are dropped.
pub fn attacker(
    addr: SocketAddr,
    n: usize,
    opened: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Vec<std::net::TcpStream>> {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return Vec::new();
        };
        rt.block_on(silent_connections(addr, n, opened))
            .into_iter()
            .filter_map(|tcp| tcp.into_std().ok())
            .collect()
    })
}
