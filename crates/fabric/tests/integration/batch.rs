//! Batched datagram I/O (issue 28; `atmlab_fabric::live::batch`): what a segmented send
//! puts on loopback arrives as the same datagrams through a batched, GRO-enabled
//! receive, however the kernel coalesced them, including the longest train one send
//! carries and a short last datagram; a host's empty attach stays one datagram.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atmlab_fabric::live::batch::{BatchSocket, RecvBatch};
use atmlab_fabric::live::dataplane::bind_udp;

fn socket() -> BatchSocket {
    let s = bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
    BatchSocket::new(Arc::new(s)).unwrap()
}

/// Receives until `n` datagrams came (or a deadline passed): their senders and bytes.
async fn receive(rx: &BatchSocket, n: usize) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut batch = RecvBatch::default();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv(&mut batch)).await {
            Ok(r) => {
                r.unwrap();
            }
            Err(_) => break,
        }
        got.extend(batch.datagrams().map(|(a, d)| (a, d.to_vec())));
    }
    got
}

#[tokio::test]
async fn a_segmented_train_arrives_as_the_same_datagrams() {
    let (tx, rx) = (socket(), socket());
    let to = rx.socket().local_addr().unwrap();
    let from = tx.socket().local_addr().unwrap();
    let segment = 24 * 53;
    // More datagrams than one send may carry (64 segments of 1,272 octets exceed an
    // IP datagram's 65,507): the send splits them, and no receive buffer truncates.
    for count in [1usize, 2, 51, 64, 200] {
        let mut contents = Vec::new();
        for i in 0..count {
            contents.extend(std::iter::repeat_n((i % 251) as u8, segment));
        }
        // A short last datagram.
        contents.extend(std::iter::repeat_n(0xEE, 500));
        tx.send(to, &contents, segment).await.unwrap();
        let got = receive(&rx, count + 1).await;
        assert_eq!(got.len(), count + 1, "{count} + 1 datagrams sent");
        for (i, (a, d)) in got.iter().enumerate() {
            assert_eq!(*a, from);
            if i < count {
                assert_eq!(d.len(), segment, "datagram {i} of {count}");
                assert!(
                    d.iter().all(|b| *b == (i % 251) as u8),
                    "datagram {i} of {count}"
                );
            } else {
                assert_eq!(d, &vec![0xEE; 500], "the short last datagram");
            }
        }
    }
}

#[tokio::test]
async fn an_empty_attach_is_one_datagram_of_nothing() {
    let (tx, rx) = (socket(), socket());
    let to = rx.socket().local_addr().unwrap();
    tx.socket().send_to(&[], to).await.unwrap();
    tx.socket().send_to(&[1, 2, 3], to).await.unwrap();
    let got = receive(&rx, 2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].1.is_empty());
    assert_eq!(got[1].1, vec![1, 2, 3]);
}
