//! The raw switch protocol's sans-IO codec: exact round trips and robustness against
//! untrusted bytes. Its tokio shell is tested in `raw_shell`.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::ops::Description;
use atmlab_fabric::raw::{
    Decoded, Frame, FrameDecoder, MAX_BATCH, MAX_FRAME_LEN, Message, MessageType,
};
use atmlab_fabric::*;
use proptest::prelude::*;

use crate::raw_harness::{decode_stream, raw_frame};

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
                owner: owner.into(),
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
                    owner: owner.into(),
                })
            }),
        (any::<u16>(), prop::collection::vec(vcid(), 0..8), text()).prop_map(
            |(port, ids, owner)| Command::Unreserve(Unreserve {
                port: PortId(port),
                ids,
                owner: owner.into(),
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
                    // Not in raw protocol version 1 (the data plane's refusals).
                    ..PortCounters::default()
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
pub(crate) fn claiming(t: MessageType, count: u32) -> Vec<u8> {
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
