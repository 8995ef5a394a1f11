//! The dashboard's collector reads the network only while someone looks (a page
//! streaming, or a snapshot asked for): a network whose dashboard nobody opened carries
//! none of its load. And what it serves is the page, the snapshot and the event stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use atmlab_lab::dashboard::{DashboardServer, DashboardSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

// Paused time: the wait below is ten collection periods of virtual time, at once.
#[tokio::test(start_paused = true)]
async fn the_collector_reads_only_while_someone_looks() {
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = reads.clone();
    let source = DashboardSource {
        names_url: None,
        tls: None,
        smds: Some(Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            serde_json::json!([{ "name": "s1", "forwarded": 7 }])
        })),
        local: Default::default(),
    };
    let server = DashboardServer::start(
        "127.0.0.1:0".parse().unwrap(),
        source,
        atmlab_lab::metrics::Metrics::new(),
    )
    .await
    .unwrap();
    // Nobody looks: over ten collection periods, nothing is read.
    tokio::time::sleep(10 * atmlab_lab::dashboard::PERIOD).await;
    assert_eq!(reads.load(Ordering::Relaxed), 0, "read with nobody looking");
    // A page asks: it gets a fresh snapshot, not the empty one from before.
    let answer = get(server.http.addr, "/api/snapshot").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"forwarded\":7"), "{answer}");
    assert!(reads.load(Ordering::Relaxed) >= 1);
    // The page itself, and the metrics beside it.
    let page = get(server.http.addr, "/").await;
    assert!(page.contains("<title>atmlab dashboard</title>"), "{page}");
    let metrics = get(server.http.addr, "/metrics").await;
    assert!(metrics.contains("# EOF"), "{metrics}");
    server.stop().await;
}
