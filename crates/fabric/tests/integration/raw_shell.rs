//! The raw switch protocol's tokio shell over loopback TCP: a server on a local switch,
//! the pipelined client, and what the client does when the server dies.

use std::collections::HashMap;

use atmlab_core::ids::{PortId, VcId};
use atmlab_fabric::live::backend::{BatchResult, Description, SwitchBackend};
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::live::raw::{RawClient, run_raw_listener, serve_raw};
use atmlab_fabric::raw::{Decoded, FrameDecoder, Message, MessageType};
use atmlab_fabric::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use crate::common::{self, HANG, reserve_via};
use crate::raw::claiming;

/// The switch a switch server runs, in this process (no journal), with a peer recorded on
/// every port so that Describe has peers to carry.
fn local() -> LocalSwitch {
    let local = LocalSwitch::new(Switch::new(&common::config3()).unwrap(), None);
    for p in 0..3u16 {
        local.set_peer(PortId(p), format!("udp:127.0.0.1:{}", 4000 + p));
    }
    local
}

/// A backend whose batches never finish (each reports its arrival first), or panic.
#[derive(Clone)]
struct Stuck {
    arrived: tokio::sync::mpsc::UnboundedSender<()>,
    panic: bool,
}

impl SwitchBackend for Stuck {
    async fn execute(&self, _: Vec<Command>, _: Atomicity) -> Result<BatchResult, FabricError> {
        let _ = self.arrived.send(());
        if self.panic {
            panic!("the backend fails (this panic is expected by the test)");
        }
        std::future::pending().await
    }

    async fn describe(&self) -> Result<Description, FabricError> {
        std::future::pending().await
    }

    async fn connections(&self) -> Result<Vec<Connection>, FabricError> {
        std::future::pending().await
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, FabricError> {
        std::future::pending().await
    }
}

/// A listener on 127.0.0.1:0 serving `backend`; the task handle is the server's life.
async fn start<B: SwitchBackend>(
    backend: B,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, tokio::spawn(run_raw_listener(listener, backend)))
}

fn cbr_commit(in_id: VcId, out: Branch, rate: f64) -> Commit {
    Commit {
        replenish: 2,
        tag: "call-1".into(),
        ..common::commit(0, in_id, out.port.0, out.id, rate)
    }
}

/// Decodes a whole stream of replies: one frame per request id, every octet framed.
fn replies_by_id(replies: &[u8]) -> HashMap<u64, Message> {
    let mut d = FrameDecoder::new();
    d.handle_bytes(replies);
    let mut by_id = HashMap::new();
    while let Some(Decoded::Frame(f)) = d.poll_frame().unwrap() {
        assert!(
            by_id.insert(f.id, f.message).is_none(),
            "two replies to one id"
        );
    }
    assert_eq!(d.buffered(), 0);
    by_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_commit_release_through_the_raw_client() {
    let local = local();
    let (addr, server) = start(local.clone()).await;
    let client = timeout(HANG, RawClient::connect(addr))
        .await
        .unwrap()
        .unwrap();

    // Describe matches the switch exactly, configuration and counters included.
    let d = timeout(HANG, client.describe()).await.unwrap().unwrap();
    assert_eq!(d, local.describe().await.unwrap());
    assert_eq!(d.ports.len(), 3);
    assert_eq!(d.ports[2].config.interface, Interface::Nni);

    // Phase 1.
    let ids = reserve_via(&client, 1, 4, Atomicity::ContinueOnError).await;
    assert_eq!(ids.len(), 4);
    assert_eq!(
        client.reservations().await.unwrap(),
        local.reservations().await.unwrap()
    );

    // Phase 2, point to multipoint, with a piggybacked replenishment.
    let mut c = cbr_commit(
        VcId::new(0, 100),
        Branch {
            port: PortId(1),
            id: ids[0],
        },
        1000.0,
    );
    c.branches.push(Branch {
        port: PortId(2),
        id: VcId::new(300, 40),
    });
    let r = client
        .execute(vec![Command::Commit(c)], Atomicity::AllOrNothing)
        .await
        .unwrap();
    let Ok(Reply::Committed {
        connection,
        replenished,
    }) = r[0].clone()
    else {
        panic!("{r:?}")
    };
    assert_eq!(replenished.len(), 2);
    let listed = client.connections().await.unwrap();
    assert_eq!(listed, local.connections().await.unwrap());
    assert_eq!(listed[0].branches.len(), 2);
    assert_eq!(listed[0].tag, "call-1");

    // A refusal comes back with its kind and text; the batch is undone exactly.
    let before = local.connections().await.unwrap();
    let r = client
        .execute(
            vec![
                Command::Release(Release {
                    connection,
                    keep_reserved: false,
                }),
                Command::Commit(cbr_commit(
                    VcId::new(0, 101),
                    Branch {
                        port: PortId(9),
                        id: VcId::new(0, 50),
                    },
                    1.0,
                )),
            ],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    assert_eq!(r[0].as_ref().unwrap_err().kind(), ErrorKind::Aborted);
    let e = r[1].as_ref().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.to_string(), "unknown port 9");
    assert_eq!(local.connections().await.unwrap(), before);

    // Release for real; the reservations left are the three unused and the two
    // replenished.
    let r = client
        .execute(
            vec![Command::Release(Release {
                connection,
                keep_reserved: false,
            })],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap();
    assert_eq!(r, vec![Ok(Reply::Released)]);
    assert!(client.connections().await.unwrap().is_empty());
    assert_eq!(client.reservations().await.unwrap().len(), 5);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_calls_each_get_their_own_answer() {
    let local = local();
    let (addr, server) = start(local.clone()).await;
    let client = RawClient::connect(addr).await.unwrap();
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..1000u32 {
        let client = client.clone();
        calls.spawn(async move {
            let r = client
                .execute(
                    vec![Command::Reserve(Reserve {
                        port: PortId((i % 3) as u16),
                        count: 1 + i % 2,
                        owner: format!("cm{i}").into(),
                        ..Default::default()
                    })],
                    Atomicity::ContinueOnError,
                )
                .await;
            (i, r)
        });
    }
    let mut got: HashMap<String, (u16, Vec<VcId>)> = HashMap::new();
    while let Some(joined) = timeout(HANG, calls.join_next()).await.unwrap() {
        let (i, r) = joined.unwrap();
        let r = r.unwrap();
        let Ok(Reply::Reserved(ids)) = &r[0] else {
            panic!("{r:?}")
        };
        assert_eq!(ids.len() as u32, 1 + i % 2);
        got.insert(format!("cm{i}"), ((i % 3) as u16, ids.clone()));
    }
    assert_eq!(got.len(), 1000);
    // Each caller got the identifiers the switch holds for its owner, on its port: no
    // answer went to another caller.
    let mut held: HashMap<String, (u16, Vec<VcId>)> = HashMap::new();
    for r in client.reservations().await.unwrap() {
        let e = held.entry(r.owner).or_insert((r.port.0, vec![]));
        assert_eq!(e.0, r.port.0);
        e.1.push(r.id);
    }
    for (owner, (port, mut ids)) in got {
        ids.sort();
        let (hport, mut hids) = held.remove(&owner).unwrap();
        hids.sort();
        assert_eq!((port, ids), (hport, hids), "{owner}");
    }
    assert!(held.is_empty());
    server.abort();
}

/// The same at the frame level: 1,000 requests in one write, every reply carrying its
/// request's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pipelined_frames_are_answered_with_their_ids() {
    let local = local();
    let (addr, server) = start(local.clone()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut out = Vec::new();
    for id in 1..=1000u64 {
        let m = if id % 10 == 0 {
            Message::DescribeRequest
        } else {
            Message::ExecuteRequest {
                atomicity: Atomicity::AllOrNothing,
                commands: vec![Command::Reserve(Reserve {
                    port: PortId(1),
                    count: 1,
                    owner: format!("o{id}").into(),
                    ..Default::default()
                })],
            }
        };
        m.emit(id, &mut out).unwrap();
    }
    tcp.write_all(&out).await.unwrap();
    tcp.shutdown().await.unwrap();
    // The server answers everything, then closes: read to the end.
    let mut replies = Vec::new();
    timeout(HANG, tcp.read_to_end(&mut replies))
        .await
        .unwrap()
        .unwrap();
    let by_id = replies_by_id(&replies);
    assert_eq!(by_id.len(), 1000);
    for r in local.reservations().await.unwrap() {
        let id: u64 = r.owner[1..].parse().unwrap();
        assert_eq!(
            by_id[&id],
            Message::ExecuteReply {
                results: vec![Ok(Reply::Reserved(vec![r.id]))]
            }
        );
    }
    for id in (10..=1000).step_by(10) {
        assert!(matches!(by_id[&id], Message::DescribeReply(_)));
    }
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_get_error_frames() {
    let (addr, server) = start(local()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut out = claiming(MessageType::Unknown(0x42), 0);
    // A reply sent as a request.
    Message::ListReservationsReply(vec![])
        .emit(43, &mut out)
        .unwrap();
    Message::DescribeRequest.emit(44, &mut out).unwrap();
    // Then octets that cannot be framed: the server answers on id 0 and closes.
    out.extend_from_slice(&[0xff; 8]);
    tcp.write_all(&out).await.unwrap();
    let mut replies = Vec::new();
    timeout(HANG, tcp.read_to_end(&mut replies))
        .await
        .unwrap()
        .unwrap();
    let by_id = replies_by_id(&replies);
    let err = |m: &Message| match m {
        Message::Error(e) => (e.kind(), e.to_string()),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        err(&by_id[&42]),
        (
            ErrorKind::InvalidArgument,
            "malformed raw-protocol frame: unknown message type".into()
        )
    );
    assert_eq!(
        err(&by_id[&43]).1,
        "malformed raw-protocol frame: not a request"
    );
    assert!(matches!(by_id[&44], Message::DescribeReply(_)));
    assert!(err(&by_id[&0]).1.contains("16 MiB"));
    server.abort();
}

/// The server dies with calls outstanding: each fails with Unavailable, and so does
/// every later call, instead of waiting forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_server_fails_every_call_instead_of_hanging() {
    let (arrived, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
    let (addr, server) = start(Stuck {
        arrived,
        panic: false,
    })
    .await;
    let client = RawClient::connect(addr).await.unwrap();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let client = client.clone();
        calls.spawn(async move { client.execute(vec![], Atomicity::AllOrNothing).await });
    }
    // Wait until the server holds all of them, then kill it.
    for _ in 0..20 {
        timeout(HANG, arrivals.recv()).await.unwrap().unwrap();
    }
    server.abort();
    while let Some(joined) = timeout(HANG, calls.join_next()).await.unwrap() {
        let e = joined.unwrap().unwrap_err();
        assert!(matches!(e, FabricError::Unavailable(_)), "{e:?}");
    }
    let e = timeout(HANG, client.describe()).await.unwrap().unwrap_err();
    assert!(matches!(e, FabricError::Unavailable(_)), "{e:?}");
    assert!(client.is_closed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_listening_is_unavailable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let e = timeout(HANG, RawClient::connect(addr))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
}

/// A backend that panics mid-request: the request is answered with Unavailable, not
/// left waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_whose_task_dies_is_still_answered() {
    let (arrived, _arrivals) = tokio::sync::mpsc::unbounded_channel();
    let (addr, server) = start(Stuck {
        arrived,
        panic: true,
    })
    .await;
    let client = RawClient::connect(addr).await.unwrap();
    let e = timeout(HANG, client.execute(vec![], Atomicity::ContinueOnError))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert!(!client.is_closed(), "the connection itself is fine");
    server.abort();
}

/// serve_raw takes any byte stream (here an in-memory duplex, as TLS would wrap TCP),
/// and a raw client can itself be the backend of a server: the proxy of paper 001 §3.4.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_raw_client_is_a_backend_behind_another_server() {
    let local = local();
    let (addr, server) = start(local.clone()).await;
    let upstream = RawClient::connect(addr).await.unwrap();
    let (a, b) = tokio::io::duplex(4096);
    let proxy = tokio::spawn(serve_raw(b, upstream));
    let client = RawClient::new(a);
    let r = timeout(
        HANG,
        client.execute(
            vec![Command::Reserve(Reserve {
                port: PortId(5),
                count: 1,
                ..Default::default()
            })],
            Atomicity::ContinueOnError,
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(r[0].as_ref().unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(
        client.describe().await.unwrap(),
        local.describe().await.unwrap()
    );
    // The switch server dies behind the proxy: the error travels with its kind. (A call
    // racing the abort may still be answered, hence the loop.)
    server.abort();
    let e = timeout(HANG, async {
        loop {
            if let Err(e) = client.connections().await {
                break e;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert!(matches!(e, FabricError::Remote { .. }), "{e:?}");
    drop(client);
    // The client closed its end; the proxy's connection ends cleanly.
    timeout(HANG, proxy).await.unwrap().unwrap().unwrap();
}
