//! The raw switch protocol: the codec's exact round trips and its robustness against
//! untrusted bytes, then the tokio shell over loopback TCP (a server on a local switch,
//! the pipelined client, and what the client does when the server dies).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::backend::{BatchResult, Description, SwitchBackend};
use atmlab_fabric::live::raw::{RawClient, run_raw_listener, serve_raw};
use atmlab_fabric::raw::{
    Decoded, Frame, FrameDecoder, MAX_BATCH, MAX_FRAME_LEN, Message, MessageType,
};
use atmlab_fabric::*;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use crate::raw_harness::{decode_stream, raw_frame};

/// A bound that only a hang reaches; no assertion depends on how fast anything is.
const HANG: Duration = Duration::from_secs(10);

// ----- strategies ---------------------------------------------------------------------

/// Any f64 but NaN (NaN != NaN would fail equality whatever the codec did; NaN
/// payloads have their own test).
fn f64_any() -> impl Strategy<Value = f64> {
    any::<u64>()
        .prop_map(f64::from_bits)
        .prop_filter("NaN is unequal to itself", |x| !x.is_nan())
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

fn vcid() -> impl Strategy<Value = VcId> {
    (any::<u16>(), any::<u16>()).prop_map(|(p, c)| VcId::new(p, c))
}

fn branch() -> impl Strategy<Value = Branch> {
    (any::<u16>(), vcid()).prop_map(|(port, id)| Branch {
        port: PortId(port),
        id,
    })
}

fn kind() -> impl Strategy<Value = ConnectionKind> {
    prop_oneof![Just(ConnectionKind::Vc), Just(ConnectionKind::Vp)]
}

fn traffic() -> impl Strategy<Value = TrafficDescriptor> {
    (
        prop_oneof![
            Just(ServiceClass::Cbr),
            Just(ServiceClass::RtVbr),
            Just(ServiceClass::NrtVbr),
            Just(ServiceClass::Ubr),
        ],
        f64_any(),
        f64_any(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(|(class, pcr, scr, mbs, cdvt_ps)| TrafficDescriptor {
            class,
            pcr: CellRate(pcr),
            scr: CellRate(scr),
            mbs,
            cdvt_ps,
        })
}

fn commit() -> impl Strategy<Value = Commit> {
    (
        (
            kind(),
            any::<u16>(),
            vcid(),
            prop::collection::vec(branch(), 0..6),
        ),
        (traffic(), f64_any(), any::<u32>()),
        (text(), any::<u32>(), text()),
    )
        .prop_map(
            |(
                (kind, in_port, in_id, branches),
                (traffic, clr, buffer_cells),
                (owner, replenish, tag),
            )| Commit {
                kind,
                in_port: PortId(in_port),
                in_id,
                branches,
                traffic,
                clr,
                buffer_cells,
                owner,
                replenish,
                tag,
            },
        )
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (
            any::<u16>(),
            any::<u32>(),
            any::<u16>(),
            any::<bool>(),
            proptest::option::of((any::<u16>(), any::<u16>())),
            text()
        )
            .prop_map(|(port, count, vpi, vp, within, owner)| {
                Command::Reserve(Reserve {
                    port: PortId(port),
                    count,
                    vpi,
                    vp,
                    within,
                    owner,
                })
            }),
        (any::<u16>(), prop::collection::vec(vcid(), 0..8), text()).prop_map(
            |(port, ids, owner)| Command::Unreserve(Unreserve {
                port: PortId(port),
                ids,
                owner,
            })
        ),
        commit().prop_map(Command::Commit),
        (any::<u64>(), any::<bool>()).prop_map(|(connection, keep_reserved)| {
            Command::Release(Release {
                connection,
                keep_reserved,
            })
        }),
        (any::<u64>(), branch()).prop_map(|(connection, branch)| Command::AddBranch(
            BranchChange { connection, branch }
        )),
        (any::<u64>(), branch()).prop_map(|(connection, branch)| Command::DropBranch(
            BranchChange { connection, branch }
        )),
        (any::<u64>(), commit()).prop_map(|(connection, c)| Command::Modify(Modify {
            connection,
            traffic: c.traffic,
            clr: c.clr,
        })),
    ]
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        prop::collection::vec(vcid(), 0..8).prop_map(Reply::Reserved),
        Just(Reply::Unreserved),
        Just(Reply::Modified),
        (any::<u64>(), prop::collection::vec(vcid(), 0..4)).prop_map(
            |(connection, replenished)| Reply::Committed {
                connection,
                replenished
            }
        ),
        Just(Reply::Released),
        Just(Reply::BranchAdded),
        Just(Reply::BranchDropped),
    ]
}

fn error_kind() -> impl Strategy<Value = ErrorKind> {
    prop_oneof![
        Just(ErrorKind::NotFound),
        Just(ErrorKind::OutOfRange),
        Just(ErrorKind::AlreadyExists),
        Just(ErrorKind::ResourceExhausted),
        Just(ErrorKind::InvalidArgument),
        Just(ErrorKind::Aborted),
        Just(ErrorKind::Unavailable),
    ]
}

/// Errors as they arrive from a remote switch (the form that round-trips exactly).
fn remote_error() -> impl Strategy<Value = FabricError> {
    (error_kind(), text()).prop_map(|(kind, message)| FabricError::Remote { kind, message })
}

fn port_status() -> impl Strategy<Value = PortStatus> {
    (
        (
            any::<u16>(),
            prop_oneof![Just(Interface::Uni), Just(Interface::Nni)],
            f64_any(),
            f64_any(),
            any::<u32>(),
            any::<u32>(),
            any::<[u16; 4]>(),
        ),
        (f64_any(), any::<u32>(), any::<u32>(), any::<u32>()),
        any::<[u64; 7]>(),
        any::<u32>(),
    )
        .prop_map(
            |(
                (id, interface, link, capacity, buffer_cells, clp_threshold, r),
                (allocated, buffer_allocated, reserved, committed),
                k,
                queue_cells,
            )| PortStatus {
                config: PortConfig {
                    id: PortId(id),
                    interface,
                    link_rate: BitRate(link),
                    capacity: CellRate(capacity),
                    buffer_cells,
                    clp_threshold,
                    vpi_range: (r[0], r[1]),
                    vci_range: (r[2], r[3]),
                },
                allocated,
                buffer_allocated,
                reserved,
                committed,
                counters: PortCounters {
                    cells_in: k[0],
                    cells_out: k[1],
                    cells_unknown: k[2],
                    cells_hec_errors: k[3],
                    cells_hec_corrected: k[4],
                    cells_discarded_clp1: k[5],
                    cells_discarded_full: k[6],
                },
                queue_cells,
            },
        )
}

fn connection() -> impl Strategy<Value = Connection> {
    (
        (any::<u64>(), kind(), any::<u16>(), vcid()),
        (
            prop::collection::vec(branch(), 0..6),
            traffic(),
            f64_any(),
            f64_any(),
        ),
        (any::<u32>(), text(), text(), any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |(
                (id, kind, in_port, in_id),
                (branches, traffic, clr, admitted),
                (buffer_cells, owner, tag, cells, cells_discarded),
            )| Connection {
                id,
                kind,
                in_port: PortId(in_port),
                in_id,
                branches,
                traffic,
                clr,
                admitted,
                buffer_cells,
                owner,
                tag,
                cells,
                cells_discarded,
            },
        )
}

fn reservation() -> impl Strategy<Value = Reservation> {
    (any::<u16>(), vcid(), text()).prop_map(|(port, id, owner)| Reservation {
        port: PortId(port),
        id,
        owner,
    })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            prop_oneof![
                Just(Atomicity::ContinueOnError),
                Just(Atomicity::AllOrNothing)
            ],
            prop::collection::vec(command(), 0..6)
        )
            .prop_map(|(atomicity, commands)| Message::ExecuteRequest {
                atomicity,
                commands
            }),
        prop::collection::vec(
            prop_oneof![reply().prop_map(Ok), remote_error().prop_map(Err)],
            0..6
        )
        .prop_map(|results| Message::ExecuteReply { results }),
        Just(Message::DescribeRequest),
        (
            text(),
            prop::collection::vec(port_status(), 0..4),
            prop::collection::vec(text(), 0..4),
            any::<u32>()
        )
            .prop_map(|(name, ports, peers, connections)| {
                Message::DescribeReply(Description {
                    name,
                    ports,
                    peers,
                    connections,
                })
            }),
        Just(Message::ListConnectionsRequest),
        prop::collection::vec(connection(), 0..4).prop_map(Message::ListConnectionsReply),
        Just(Message::ListReservationsRequest),
        prop::collection::vec(reservation(), 0..6).prop_map(Message::ListReservationsReply),
        remote_error().prop_map(Message::Error),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (any::<u64>(), message()).prop_map(|(id, message)| Frame { id, message })
}

// ----- the codec ----------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every message of every type comes back exactly, whole and through the streaming
    /// decoder fed in arbitrary pieces.
    #[test]
    fn every_message_round_trips(frames in prop::collection::vec(frame(), 1..5), cut in 1usize..40) {
        let mut stream = Vec::new();
        for f in &frames {
            let bytes = f.to_bytes().unwrap();
            prop_assert_eq!(Frame::parse(&bytes).unwrap(), f.clone());
            let n = f.emit(&mut stream).unwrap();
            prop_assert_eq!(n, bytes.len());
            prop_assert_eq!(u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize, n - 4);
            prop_assert_eq!(MessageType::from(bytes[5]), f.message.message_type());
        }
        let mut decoder = FrameDecoder::new();
        let mut got = Vec::new();
        for piece in stream.chunks(cut) {
            decoder.handle_bytes(piece);
            while let Some(d) = decoder.poll_frame().unwrap() {
                match d {
                    Decoded::Frame(f) => got.push(f),
                    Decoded::Malformed { id, error } => prop_assert!(false, "{id}: {error}"),
                }
            }
        }
        prop_assert_eq!(decoder.buffered(), 0);
        prop_assert_eq!(got, frames);
    }

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        raw_frame(&data);
    }

    /// Random bytes behind a sound header reach the body decoders, which random bytes
    /// alone rarely do.
    #[test]
    fn random_bodies_never_panic(t in any::<u8>(), body in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut data = ((10 + body.len()) as u32).to_be_bytes().to_vec();
        data.extend_from_slice(&[1, t]);
        data.extend_from_slice(&7u64.to_be_bytes());
        data.extend_from_slice(&body);
        raw_frame(&data);
    }

    /// Truncations and bit flips of valid frames never panic; a truncated frame is
    /// never taken for a whole one.
    #[test]
    fn damaged_frames_never_panic(f in frame(), cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), bit in 0u8..8) {
        let bytes = f.to_bytes().unwrap();
        let short = &bytes[..cut.index(bytes.len())];
        raw_frame(short);
        prop_assert!(Frame::parse(short).is_err());
        let (frames, fatal) = decode_stream(short, short.len());
        prop_assert!(frames.is_empty() && fatal.is_none());
        let mut flipped = bytes.clone();
        flipped[flip.index(bytes.len())] ^= 1 << bit;
        raw_frame(&flipped);
    }
}

#[test]
fn nan_payloads_travel_bit_for_bit() {
    let nan = f64::from_bits(0x7ff8_dead_beef_0001);
    let m = Message::ListConnectionsReply(vec![Connection {
        id: 1,
        kind: ConnectionKind::Vc,
        in_port: PortId(0),
        in_id: VcId::new(0, 32),
        branches: vec![],
        traffic: TrafficDescriptor::cbr(CellRate(nan)),
        clr: -0.0,
        admitted: f64::NEG_INFINITY,
        buffer_cells: 0,
        owner: String::new(),
        tag: String::new(),
        cells: 0,
        cells_discarded: 0,
    }]);
    let bytes = Frame { id: 9, message: m }.to_bytes().unwrap();
    let Message::ListConnectionsReply(cs) = Frame::parse(&bytes).unwrap().message else {
        panic!("wrong type");
    };
    assert_eq!(cs[0].traffic.pcr.0.to_bits(), nan.to_bits());
    assert_eq!(cs[0].clr.to_bits(), (-0.0f64).to_bits());
    assert_eq!(cs[0].admitted, f64::NEG_INFINITY);
}

#[test]
fn local_errors_arrive_as_remote_errors_of_the_same_kind_and_text() {
    let local = [
        FabricError::UnknownPort(PortId(7)),
        FabricError::VciOutOfRange {
            port: PortId(1),
            vci: 9000,
            min: 32,
            max: 4095,
        },
        FabricError::InsufficientBandwidth {
            port: PortId(2),
            needed: 1.5,
            available: 0.25,
        },
        FabricError::Aborted,
        FabricError::Unavailable("gone".into()),
        FabricError::Invalid("no branches"),
    ];
    let m = Message::ExecuteReply {
        results: local.iter().cloned().map(Err).collect(),
    };
    let Message::ExecuteReply { results } =
        Frame::parse(&Frame { id: 1, message: m }.to_bytes().unwrap())
            .unwrap()
            .message
    else {
        panic!("wrong type");
    };
    for (sent, got) in local.iter().zip(results) {
        let got = got.unwrap_err();
        assert_eq!(got.kind(), sent.kind());
        assert_eq!(got.to_string(), sent.to_string());
        assert!(matches!(got, FabricError::Remote { .. }));
    }
}

#[test]
fn a_frame_claiming_4_gib_is_refused_on_its_length_field() {
    let mut head = vec![0xff, 0xff, 0xff, 0xff, 1, 0x01];
    head.extend_from_slice(&1u64.to_be_bytes());
    let e = Frame::parse(&head).unwrap_err();
    assert_eq!(
        e,
        FabricError::Frame("the length field exceeds the 16 MiB frame maximum")
    );
    // The streaming decoder refuses it on the four octets alone, holding nothing more.
    let mut d = FrameDecoder::new();
    d.handle_bytes(&head[..4]);
    assert_eq!(d.poll_frame(), Err(e.clone()));
    assert_eq!(d.buffered(), 0);
    // The stream is out of step for good.
    d.handle_bytes(&[0; 100]);
    assert_eq!(d.poll_frame(), Err(e));
    assert_eq!(d.buffered(), 0);
    // One octet over the maximum is refused too; the maximum itself is waited for.
    let mut d = FrameDecoder::new();
    d.handle_bytes(&((MAX_FRAME_LEN + 1) as u32).to_be_bytes());
    assert!(d.poll_frame().is_err());
    let mut d = FrameDecoder::new();
    d.handle_bytes(&(MAX_FRAME_LEN as u32).to_be_bytes());
    assert_eq!(d.poll_frame(), Ok(None));
}

#[test]
fn a_length_shorter_than_a_header_is_out_of_step() {
    let mut d = FrameDecoder::new();
    d.handle_bytes(&[0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(
        d.poll_frame(),
        Err(FabricError::Frame(
            "the length field is shorter than a frame header"
        ))
    );
}

/// A frame with a sound header and a body claiming more elements than it holds.
fn claiming(t: MessageType, count: u32) -> Vec<u8> {
    let mut v = 14u32.to_be_bytes().to_vec();
    v.extend_from_slice(&[1, t.into()]);
    v.extend_from_slice(&42u64.to_be_bytes());
    v.extend_from_slice(&count.to_be_bytes());
    v
}

#[test]
fn counts_are_checked_against_the_octets_left() {
    for (t, what) in [
        (
            MessageType::ListConnectionsReply,
            "more connections than the frame can hold",
        ),
        (
            MessageType::ListReservationsReply,
            "more reservations than the frame can hold",
        ),
        (
            MessageType::ExecuteReply,
            "more results than the frame can hold",
        ),
    ] {
        assert_eq!(
            Frame::parse(&claiming(t, u32::MAX)),
            Err(FabricError::Frame(what))
        );
    }
    // A string longer than the frame.
    assert_eq!(
        Frame::parse(&claiming(MessageType::Error, u32::MAX)),
        Err(FabricError::Frame("the body ends inside a field"))
    );
    assert_eq!(
        Frame::parse(&claiming(MessageType::DescribeReply, 1_000_000)),
        Err(FabricError::Frame("a string longer than the frame"))
    );
}

#[test]
fn a_malformed_body_is_reported_with_its_id_and_the_stream_goes_on() {
    let good = Frame {
        id: 5,
        message: Message::DescribeRequest,
    }
    .to_bytes()
    .unwrap();
    let mut bad = claiming(MessageType::ListConnectionsReply, 3);
    let mut unknown = claiming(MessageType::Unknown(0x42), 0);
    let mut old = claiming(MessageType::DescribeRequest, 0);
    old[4] = 9;
    let mut stream = good.clone();
    stream.append(&mut bad);
    stream.append(&mut unknown);
    stream.append(&mut old);
    stream.extend_from_slice(&good);
    let mut d = FrameDecoder::new();
    d.handle_bytes(&stream);
    let mut got = Vec::new();
    while let Some(x) = d.poll_frame().unwrap() {
        got.push(x);
    }
    let describe = Decoded::Frame(Frame {
        id: 5,
        message: Message::DescribeRequest,
    });
    assert_eq!(
        got,
        vec![
            describe.clone(),
            Decoded::Malformed {
                id: 42,
                error: FabricError::Frame("more connections than the frame can hold")
            },
            Decoded::Malformed {
                id: 42,
                error: FabricError::Frame("unknown message type")
            },
            Decoded::Malformed {
                id: 42,
                error: FabricError::Frame("unsupported protocol version")
            },
            describe,
        ]
    );
    // Trailing octets after a body are an error too.
    let mut long = Frame {
        id: 1,
        message: Message::DescribeRequest,
    }
    .to_bytes()
    .unwrap();
    long.push(0);
    long[3] += 1;
    assert_eq!(
        Frame::parse(&long),
        Err(FabricError::Frame("trailing octets after the body"))
    );
}

#[test]
fn oversized_messages_are_refused_when_encoding() {
    let mut out = vec![1, 2, 3];
    let huge = Message::Error(FabricError::Remote {
        kind: ErrorKind::Aborted,
        message: "x".repeat(MAX_FRAME_LEN),
    });
    assert!(huge.emit(1, &mut out).is_err());
    assert_eq!(out, [1, 2, 3]);
    let batch = Message::ExecuteRequest {
        atomicity: Atomicity::AllOrNothing,
        commands: vec![
            Command::Release(Release {
                connection: 1,
                keep_reserved: false
            });
            MAX_BATCH + 1
        ],
    };
    assert!(batch.emit(1, &mut out).is_err());
    assert_eq!(out, [1, 2, 3]);
}

/// Replays the seed corpus of the `raw_frame` fuzz target (and any crash inputs
/// committed beside it). The wire crate's replay covers its own targets only.
#[test]
fn fuzz_corpus_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/raw_frame");
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("missing seed corpus {}: {e}", dir.display()));
    let mut n = 0;
    for e in entries {
        let data = std::fs::read(e.unwrap().path()).unwrap();
        raw_frame(&data);
        n += 1;
    }
    assert!(n > 0, "the seed corpus is empty");
}

// ----- the shell ----------------------------------------------------------------------

/// A switch in this process behind the backend trait: the test double of a switch server.
#[derive(Clone)]
struct LocalSwitch(Arc<Mutex<Switch>>);

impl LocalSwitch {
    fn new() -> Self {
        let mut cfg = SwitchConfig::uniform("s1", 3, BitRate(155.52e6));
        cfg.ports[2] = cfg.ports[2].clone().nni();
        cfg.ports[2].vpi_range = (0, 4095);
        LocalSwitch(Arc::new(Mutex::new(Switch::new(&cfg).unwrap())))
    }
}

impl SwitchBackend for LocalSwitch {
    async fn execute(
        &self,
        commands: Vec<Command>,
        atomicity: Atomicity,
    ) -> Result<BatchResult, FabricError> {
        Ok(self.0.lock().unwrap().execute(&commands, atomicity))
    }

    async fn describe(&self) -> Result<Description, FabricError> {
        let s = self.0.lock().unwrap();
        let ports = s.ports();
        Ok(Description {
            name: s.name().to_string(),
            peers: ports
                .iter()
                .map(|p| format!("udp:127.0.0.1:{}", 4000 + p.config.id.0))
                .collect(),
            ports,
            connections: s.connection_count() as u32,
        })
    }

    async fn connections(&self) -> Result<Vec<Connection>, FabricError> {
        Ok(self.0.lock().unwrap().connections())
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, FabricError> {
        Ok(self.0.lock().unwrap().reservations())
    }
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
        kind: ConnectionKind::Vc,
        in_port: PortId(0),
        in_id,
        branches: vec![out],
        traffic: TrafficDescriptor::cbr(CellRate(rate)),
        clr: 0.0,
        buffer_cells: 0,
        owner: "cm".into(),
        replenish: 2,
        tag: "call-1".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_commit_release_through_the_raw_client() {
    let local = LocalSwitch::new();
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
    let r = client
        .execute(
            vec![Command::Reserve(Reserve {
                port: PortId(1),
                count: 4,
                owner: "cm".into(),
                ..Default::default()
            })],
            Atomicity::ContinueOnError,
        )
        .await
        .unwrap();
    let Ok(Reply::Reserved(ids)) = &r[0] else {
        panic!("{r:?}")
    };
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
    let local = LocalSwitch::new();
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
                        owner: format!("cm{i}"),
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
    let local = LocalSwitch::new();
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
                    owner: format!("o{id}"),
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
    let mut d = FrameDecoder::new();
    d.handle_bytes(&replies);
    let mut by_id = HashMap::new();
    while let Some(Decoded::Frame(f)) = d.poll_frame().unwrap() {
        assert!(
            by_id.insert(f.id, f.message).is_none(),
            "two replies to one id"
        );
    }
    assert_eq!(d.buffered(), 0);
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
    let (addr, server) = start(LocalSwitch::new()).await;
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
    let mut d = FrameDecoder::new();
    d.handle_bytes(&replies);
    let mut by_id = HashMap::new();
    while let Some(Decoded::Frame(f)) = d.poll_frame().unwrap() {
        by_id.insert(f.id, f.message);
    }
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
    let local = LocalSwitch::new();
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
