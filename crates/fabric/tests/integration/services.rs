//! The rest of the SwitchServer contract: Watch reports table changes in order, the
//! command stream answers a retried request id with its first answer (xbind's oneway
//! calls made idempotent), Statistics counts cells, and a gRPC server in front of the
//! raw-TCP interface (ReTINA's proxy) behaves as the switch itself.

use atmlab_core::ids::{PortId, VcId};
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::convert::{pb_command, pb_commit};
use atmlab_fabric::live::grpc::{self, GrpcSwitch, SwitchService};
use atmlab_fabric::live::raw::RawClient;
use atmlab_fabric::live::server::{self, ServerFile};
use atmlab_fabric::*;
use atmlab_rpc::v1 as pb;
use tokio_stream::StreamExt;

use crate::common::{self, HANG, grpc_client};

fn file() -> ServerFile {
    ServerFile::parse(
        "name = \"s1\"\nraw = \"127.0.0.1:0\"\n[[ports]]\nid = 0\n[[ports]]\nid = 1\n",
        "test",
    )
    .unwrap()
}

/// A cross-connect 0 0/vci -> 1 0/vci with a piggybacked replenishment of two.
fn commit(vci: u16) -> Commit {
    let id = VcId::new(0, vci);
    Commit {
        replenish: 2,
        tag: "w".into(),
        ..common::commit(0, id, 1, id, 10.0)
    }
}

/// Opens the command stream; requests go into the sender.
async fn open_stream(
    c: &GrpcSwitch,
) -> (
    tokio::sync::mpsc::Sender<pb::StreamRequest>,
    tonic::Streaming<pb::StreamReply>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let replies = c
        .raw()
        .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (tx, replies)
}

#[tokio::test]
async fn watch_reports_changes_in_order() {
    let sw = server::start(&file(), None).await.unwrap();
    let c = grpc_client(sw.grpc_addr, None).await;
    let mut events = c
        .raw()
        .watch(pb::WatchRequest {})
        .await
        .unwrap()
        .into_inner();
    // The subscription is live once the server has it; commit until the first event shows.
    let (id, replenished) = c.commit(&commit(40)).await.unwrap();
    c.release(id, false).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let ev = tokio::time::timeout(HANG, events.next())
            .await
            .expect("an event arrives")
            .unwrap()
            .unwrap();
        seen.push(ev);
    }
    use pb::switch_event::Event as E;
    assert!(matches!(&seen[0].event, Some(E::Committed(x)) if x.connection == id && x.tag == "w"));
    assert!(matches!(&seen[1].event, Some(E::Reserved(r)) if r.owner == "cm"));
    assert!(matches!(&seen[2].event, Some(E::Reserved(_))));
    assert!(matches!(&seen[3].event, Some(E::Released(x)) if *x == id));
    assert_eq!(replenished.len(), 2);
    let seq: Vec<u64> = seen.iter().map(|e| e.sequence).collect();
    assert!(seq.windows(2).all(|w| w[0] <= w[1]), "{seq:?}");
    assert!(seen.iter().all(|e| e.lagged == 0));
    sw.stop().await;
}

#[tokio::test]
async fn a_retried_stream_request_gets_its_first_answer_and_runs_once() {
    let sw = server::start(&file(), None).await.unwrap();
    let c = grpc_client(sw.grpc_addr, None).await;
    let req = |id: u64, vci: u16| pb::StreamRequest {
        client_id: "cm-1".into(),
        request_id: id,
        command: Some(pb_command(&Command::Commit(Commit {
            replenish: 0,
            ..commit(vci)
        }))),
        more: Vec::new(),
    };
    // First stream: request 7 commits 0/50.
    let (tx, mut replies) = open_stream(&c).await;
    tx.send(req(7, 50)).await.unwrap();
    let first = replies.next().await.unwrap().unwrap();
    assert_eq!(first.request_id, 7);
    assert_eq!(first.result.as_ref().unwrap().code, 0);
    drop(tx);
    // The client "lost" the answer and retries on a new stream, same client id and
    // request id: the same answer, and no second connection (a second commit of 0/50
    // would have failed with ALREADY_EXISTS).
    let (tx, mut replies) = open_stream(&c).await;
    tx.send(req(7, 50)).await.unwrap();
    tx.send(req(8, 50)).await.unwrap();
    let again = replies.next().await.unwrap().unwrap();
    assert_eq!(again, first);
    let other = replies.next().await.unwrap().unwrap();
    assert_eq!(other.request_id, 8);
    assert_eq!(
        other.result.unwrap().code,
        6,
        "a new request id runs and is refused"
    );
    assert_eq!(c.connections().await.unwrap().len(), 1);
    sw.stop().await;
}

#[tokio::test]
async fn a_duplicated_stream_request_runs_once_even_within_one_batch() {
    // Both copies are on the wire before the server reads, so they arrive in one batch:
    // the memory of answers (filled after a batch runs) cannot catch the second copy.
    let sw = server::start(&file(), None).await.unwrap();
    let c = grpc_client(sw.grpc_addr, None).await;
    let req = pb::StreamRequest {
        client_id: "cm-dup".into(),
        request_id: 9,
        command: Some(pb_command(&Command::Commit(Commit {
            replenish: 0,
            ..commit(60)
        }))),
        more: Vec::new(),
    };
    let mut replies = c
        .raw()
        .stream(tokio_stream::iter(vec![req.clone(), req]))
        .await
        .unwrap()
        .into_inner();
    let a = replies.next().await.unwrap().unwrap();
    let b = replies.next().await.unwrap().unwrap();
    assert_eq!(a.result.as_ref().unwrap().code, 0, "{a:?}");
    assert_eq!(a, b, "the copy gets the first copy's answer");
    assert_eq!(c.connections().await.unwrap().len(), 1, "and runs once");
    sw.stop().await;
}

/// A request carrying several commands (`more`) gets one reply with an answer for each,
/// in order: a command already answered on an earlier request is answered from memory
/// and not run again, a copy within the request gets the first copy's answer, and a
/// request without a command is refused alone.
#[tokio::test]
async fn a_request_of_several_commands_gets_one_reply_answering_each() {
    let sw = server::start(&file(), None).await.unwrap();
    let c = grpc_client(sw.grpc_addr, None).await;
    let commit_of = |vci: u16| {
        Some(pb_command(&Command::Commit(Commit {
            replenish: 0,
            ..commit(vci)
        })))
    };
    let (tx, mut replies) = open_stream(&c).await;
    tx.send(pb::StreamRequest {
        client_id: "cm-batch".into(),
        request_id: 1,
        command: commit_of(70),
        more: Vec::new(),
    })
    .await
    .unwrap();
    let first = replies.next().await.unwrap().unwrap();
    assert_eq!(first.result.as_ref().unwrap().code, 0, "{first:?}");
    assert!(first.more.is_empty());
    tx.send(pb::StreamRequest {
        client_id: "cm-batch".into(),
        request_id: 2,
        command: commit_of(71),
        more: vec![
            pb::StreamCommand {
                request_id: 1,
                command: commit_of(70),
            },
            pb::StreamCommand {
                request_id: 3,
                command: None,
            },
            pb::StreamCommand {
                request_id: 4,
                command: commit_of(72),
            },
            pb::StreamCommand {
                request_id: 2,
                command: commit_of(71),
            },
        ],
    })
    .await
    .unwrap();
    let r = replies.next().await.unwrap().unwrap();
    let ids: Vec<u64> = std::iter::once(r.request_id)
        .chain(r.more.iter().map(|m| m.request_id))
        .collect();
    assert_eq!(ids, [2, 1, 3, 4, 2], "one answer per command, in order");
    let codes: Vec<i32> = std::iter::once(r.result.as_ref().unwrap().code)
        .chain(r.more.iter().map(|m| m.result.as_ref().unwrap().code))
        .collect();
    assert_eq!(codes[0], 0, "{r:?}");
    assert_eq!(
        r.more[0].result, first.result,
        "request 1 answered from memory"
    );
    assert_ne!(codes[2], 0, "a command-less entry is refused: {r:?}");
    assert_eq!(codes[3], 0, "{r:?}");
    assert_eq!(
        r.more[3].result, r.result,
        "the copy gets the first copy's answer"
    );
    assert_eq!(
        c.connections().await.unwrap().len(),
        3,
        "70, 71 and 72, each run once"
    );
    sw.stop().await;
}

#[tokio::test]
async fn statistics_count_cells_per_port_and_connection() {
    let sw = server::start(&file(), None).await.unwrap();
    let c = grpc_client(sw.grpc_addr, None).await;
    let (id, _) = c.commit(&commit(60)).await.unwrap();
    sw.switch.with_switch(|s| {
        for _ in 0..5 {
            let mut cell = [0u8; 53];
            let h = atmlab_wire::CellHeader::uni(0, 60, atmlab_wire::Pti::user(false));
            h.emit(&mut atmlab_wire::Cell::new_unchecked(&mut cell[..]))
                .unwrap();
            s.handle_cell(PortId(0), &mut cell);
        }
    });
    let st = c
        .raw()
        .statistics(pb::StatisticsRequest {
            connections: vec![id],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.connections.len(), 1);
    assert_eq!(st.connections[0].cells, 5);
    assert_eq!(st.ports.iter().find(|p| p.port == 0).unwrap().cells_in, 5);
    assert_eq!(
        st.ports.iter().find(|p| p.port == 1).unwrap().queue_cells,
        5
    );
    sw.stop().await;
}

#[tokio::test]
async fn a_grpc_proxy_over_the_raw_interface_is_the_switch() {
    let sw = server::start(&file(), None).await.unwrap();
    let raw = RawClient::connect(sw.raw_addr.unwrap()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let proxy = tokio::spawn(grpc::serve(
        listener,
        None,
        SwitchService::new(raw, None),
        async {
            let _ = stopped.await;
        },
    ));
    let via = grpc_client(proxy_addr, None).await;
    let direct = grpc_client(sw.grpc_addr, None).await;
    let (id, _) = via.commit(&commit(70)).await.unwrap();
    assert_eq!(direct.connections().await.unwrap()[0].id, id);
    // A refusal crosses the proxy with its code and text.
    let err = via.raw().commit(pb_commit(&commit(70))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::AlreadyExists);
    assert!(
        err.message().contains("input 0/70 is already used"),
        "{}",
        err.message()
    );
    assert_eq!(via.describe().await.unwrap().connections, 1);
    // Watch needs the switch itself, not a proxy.
    assert_eq!(
        via.raw()
            .watch(pb::WatchRequest {})
            .await
            .unwrap_err()
            .code(),
        tonic::Code::Unimplemented
    );
    via.release(id, false).await.unwrap();
    assert!(direct.connections().await.unwrap().is_empty());
    let _ = stop.send(());
    proxy.await.unwrap().unwrap();
    sw.stop().await;
}
