//! Tests of the cell-stream pipeline: events and faults in stream order, the HEC receiver
//! in front of reassembly, the writers (frames, captures, listings), and the round trip's
//! verdict.

use std::io;

use super::*;
use crate::Pti;
use crate::aal5;
use crate::pcap::LinkType;

fn header(vpi: u16, vci: u16) -> CellHeader {
    CellHeader::uni(vpi, vci, Pti::user(false))
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn cells(vpi: u16, vci: u16, sdu: &[u8]) -> Vec<u8> {
    aal5::segment(header(vpi, vci), sdu, 0, 0).unwrap()
}

/// Three frames: 100 octets on 0/100 (3 cells), 200 on 1/200 (5 cells), 50 on 0/100
/// (2 cells).
fn three_frames() -> (Vec<u8>, [Vec<u8>; 3]) {
    let f = [frame(100, 1), frame(200, 2), frame(50, 3)];
    let mut s = cells(0, 100, &f[0]);
    s.extend(cells(1, 200, &f[1]));
    s.extend(cells(0, 100, &f[2]));
    (s, f)
}

/// The events of a run, owned: (VC, SDU) for a frame, (VC, PDU length) for a bad one.
#[derive(Debug, PartialEq)]
enum Seen {
    Frame(VcId, Vec<u8>),
    Bad(Option<VcId>, usize),
}

fn run(data: &[u8]) -> (Report, Vec<Seen>) {
    let mut seen = Vec::new();
    let report = process(data, HeaderFormat::Uni, Default::default(), |ev| {
        seen.push(match ev {
            Event::Frame { vc, sdu, pdu, .. } => {
                assert_eq!(pdu.len(), aal5::pdu_len(sdu.len()));
                Seen::Frame(vc, sdu.to_vec())
            }
            Event::Bad { vc, pdu, .. } => Seen::Bad(vc, pdu.len()),
        })
    });
    (report, seen)
}

#[test]
fn a_clean_stream_delivers_every_frame_in_order() {
    let (s, f) = three_frames();
    let (report, seen) = run(&s);
    assert!(report.is_clean());
    assert_eq!((report.cells, report.frames), (10, 3));
    assert_eq!(report.octets, 350);
    assert_eq!(report.diagnostics().count(), 0);
    assert_eq!(
        seen,
        [
            Seen::Frame(VcId::new(0, 100), f[0].clone()),
            Seen::Frame(VcId::new(1, 200), f[1].clone()),
            Seen::Frame(VcId::new(0, 100), f[2].clone()),
        ]
    );
}

#[test]
fn a_damaged_frame_is_a_fault_numbered_on_its_vc() {
    let (mut s, f) = three_frames();
    // A payload octet of the third frame (second on 0/100), whose cells are 8 and 9.
    s[8 * CELL_LEN + 30] ^= 0x40;
    let (report, seen) = run(&s);
    assert_eq!(report.frames, 2);
    let [
        Fault::Frame {
            vc,
            frame,
            last_cell,
            error: WireError::Crc { .. },
        },
    ] = report.faults[..]
    else {
        panic!("{:?}", report.faults);
    };
    assert_eq!((vc, frame, last_cell), (VcId::new(0, 100), 2, 9));
    assert!(
        report.faults[0]
            .to_string()
            .starts_with("VC 0/100 frame 2 (ending at cell 9): AAL5 CPCS-PDU: CRC mismatch")
    );
    // The bad frame comes with its PDU as received: two cell payloads.
    assert_eq!(seen[2], Seen::Bad(Some(VcId::new(0, 100)), 96));
    assert_eq!(seen[1], Seen::Frame(VcId::new(1, 200), f[1].clone()));
}

#[test]
fn the_hec_corrects_one_bit_and_discards_two() {
    let (mut s, f) = three_frames();
    s[2] ^= 0x08; // one header bit of cell 0: corrected
    let (report, seen) = run(&s);
    assert!(report.is_clean());
    assert_eq!(report.corrected_headers, 1);
    assert_eq!(
        report.diagnostics().collect::<Vec<_>>(),
        ["note: 1 cell header(s) had a single-bit error, corrected by the HEC"]
    );
    assert_eq!(seen[0], Seen::Frame(VcId::new(0, 100), f[0].clone()));

    let (mut s, _) = three_frames();
    s[3 * CELL_LEN + 1] ^= 0x30; // two header bits of cell 3: discarded
    let (report, seen) = run(&s);
    assert_eq!(report.faults[0], Fault::HeaderDiscarded { cell: 3 });
    assert_eq!(
        report.faults[0].to_string(),
        "cell 3: header error the HEC cannot correct; cell discarded"
    );
    assert_eq!(seen[1], Seen::Bad(None, 0));
    // The frame that lost its first cell fails its CRC.
    assert!(matches!(report.faults[1], Fault::Frame { frame: 1, .. }));
}

#[test]
fn a_partial_cell_and_open_frames_end_the_report() {
    let (s, _) = three_frames();
    // Cells 0-1 of 0/100's first frame and cells 3-4 of 1/200's, then 7 stray octets.
    let mut cut = s[..2 * CELL_LEN].to_vec();
    cut.extend_from_slice(&s[3 * CELL_LEN..5 * CELL_LEN]);
    cut.extend_from_slice(&[0; 7]);
    let (report, seen) = run(&cut);
    assert!(seen.is_empty());
    assert_eq!(report.cells, 4);
    assert_eq!(
        report.faults,
        [
            Fault::PartialCell { octets: 7 },
            Fault::Unfinished {
                vc: VcId::new(0, 100),
                octets: 96
            },
            Fault::Unfinished {
                vc: VcId::new(1, 200),
                octets: 96
            },
        ]
    );
    let lines: Vec<String> = report.diagnostics().collect();
    assert_eq!(
        lines[0],
        "input ends with 7 octet(s) that do not make a whole 53-octet cell"
    );
    assert_eq!(
        lines[1],
        "VC 0/100: input ends inside a frame (96 octets received, no end-of-frame cell)"
    );
}

#[test]
fn cells_are_timed_back_to_back() {
    let (s, _) = three_frames();
    let mut times = Vec::new();
    process(&s, HeaderFormat::Uni, Default::default(), |ev| {
        if let Event::Frame { time, .. } = ev {
            times.push(time);
        }
    });
    let at = |cell: u64| Instant::ZERO + CELL_TIME.saturating_mul(cell);
    assert_eq!(times, [at(2), at(7), at(9)]);
}

/// A writer that takes `room` octets and then fails.
struct Full {
    room: usize,
    got: Vec<u8>,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.got.len() >= self.room {
            return Err(io::Error::other("full"));
        }
        let n = buf.len().min(self.room - self.got.len());
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn reassemble_writes_the_good_sdus_and_stops_at_a_write_error() {
    let (mut s, f) = three_frames();
    s[4 * CELL_LEN + 20] ^= 1; // spoil the frame on 1/200
    let mut out = Vec::new();
    let report = reassemble(&s, HeaderFormat::Uni, Default::default(), &mut out).unwrap();
    assert_eq!(out, [f[0].clone(), f[2].clone()].concat());
    assert_eq!(report.faults.len(), 1);

    let mut full = Full {
        room: 120,
        got: Vec::new(),
    };
    let e = reassemble(&s, HeaderFormat::Uni, Default::default(), &mut full).unwrap_err();
    assert_eq!(e.to_string(), "full");
    assert_eq!(full.got.len(), 120);
}

#[test]
fn capture_records_every_frame_and_lists_what_it_cannot() {
    let (mut s, _) = three_frames();
    s[4 * CELL_LEN + 20] ^= 1;
    let mut w = PcapWriter::with_link_type(Vec::new(), LinkType::SunAtm).unwrap();
    let c = capture(&s, HeaderFormat::Uni, Default::default(), &mut w);
    assert_eq!(w.records(), 3, "the bad frame is recorded too");
    assert!(!c.is_clean());
    assert!(c.not_captured.is_empty());
    let bytes = w.finish().unwrap();
    // File header, then three records of pcap header (16) + SunATM header (4) + PDU.
    assert_eq!(bytes.len(), 24 + 3 * 20 + (144 + 240 + 96));

    // An NNI VPI above 255 does not fit the SunATM pseudo-header.
    let nni = CellHeader {
        format: HeaderFormat::Nni,
        vpi: 4000,
        ..header(0, 1000)
    };
    let s = aal5::segment(nni, &frame(40, 0), 0, 0).unwrap();
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let c = capture(&s, HeaderFormat::Nni, Default::default(), &mut w);
    assert!(c.report.is_clean());
    assert_eq!(w.records(), 0);
    assert_eq!(
        c.not_captured[0].to_string(),
        "VC 4000/1000: frame not captured: \
         VPI in a SunATM or ERF capture (8 bits) = 4000 is out of range (maximum 255)"
    );
}

#[test]
fn decode_lists_each_cell() {
    let mut s = cells(0, 5, &frame(60, 0));
    s[CELL_LEN + 4] ^= 0xff; // spoil the HEC of the second cell
    s.extend_from_slice(&[1, 2, 3]);
    let mut out = Vec::new();
    let listing = decode(&s, HeaderFormat::Uni, &mut out).unwrap();
    assert_eq!(
        listing,
        Listing {
            cells: 2,
            bad_hec: 1,
            partial: Some(3)
        }
    );
    assert!(!listing.is_clean());
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let hec0 = crate::crc::hec([0, 0, 0, 0x50]);
    let hec1 = crate::crc::hec([0, 0, 0, 0x52]) ^ 0xff;
    assert_eq!(
        lines,
        [
            format!("     0 0/5 (signalling) gfc=0 pt=user clp=0 hec={hec0:02x} ok"),
            format!("     1 0/5 (signalling) gfc=0 pt=user,end clp=0 hec={hec1:02x} BAD"),
        ]
    );
    // NNI: no GFC; a user VCI has no name.
    let s = aal5::segment(
        CellHeader {
            format: HeaderFormat::Nni,
            vpi: 300,
            ..header(0, 77)
        },
        b"x",
        0,
        0,
    )
    .unwrap();
    let mut out = Vec::new();
    assert!(decode(&s, HeaderFormat::Nni, &mut out).unwrap().is_clean());
    let line = String::from_utf8(out).unwrap();
    assert!(
        line.starts_with("     0 300/77 pt=user,end clp=0 hec="),
        "{line}"
    );
}

#[test]
fn pti_names() {
    let names: Vec<&str> = (0..8).map(|b| Pti::from_bits(b).name()).collect();
    assert_eq!(
        names,
        [
            "user",
            "user,end",
            "user,efci",
            "user,efci,end",
            "oam-f5-segment",
            "oam-f5-end-to-end",
            "rm",
            "reserved"
        ]
    );
}

/// A small deterministic generator for the round-trip tests.
fn lcg(seed: u64) -> impl FnMut(usize) -> usize {
    let mut x = seed;
    move |n| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((x >> 33) as usize) % n
    }
}

#[test]
fn pick_flips_draws_distinct_cells_then_their_bits() {
    let flips = pick_flips(10, 4, lcg(1));
    assert_eq!(flips.len(), 4);
    assert!(flips.windows(2).all(|w| w[0].cell < w[1].cell));
    assert!(flips.iter().all(|f| f.cell < 10 && f.bit < 384));
    assert_eq!(
        flips,
        pick_flips(10, 4, lcg(1)),
        "same generator, same flips"
    );
    // More than there are: every cell once.
    let all = pick_flips(3, 99, lcg(2));
    assert_eq!(all.iter().map(|f| f.cell).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(pick_flips(0, 5, lcg(3)).is_empty());
    // The order of the draws: cells until enough distinct ones, then one bit per cell.
    let mut draws = vec![7, 2, 7, 5, 100, 200, 300].into_iter();
    let mut asked = Vec::new();
    let flips = pick_flips(9, 3, |n| {
        asked.push(n);
        draws.next().unwrap()
    });
    assert_eq!(asked, [9, 9, 9, 9, 384, 384, 384]);
    let got: Vec<(usize, usize)> = flips.iter().map(|f| (f.cell, f.bit)).collect();
    assert_eq!(got, [(2, 100), (5, 200), (7, 300)]);
}

#[test]
fn roundtrip_comes_back_whole_without_damage() {
    let data = frame(20_000, 9);
    let trip = Roundtrip::segment(&data, header(0, 100), 9180).unwrap();
    assert_eq!(trip.frames_sent(), 3);
    assert_eq!(
        trip.cell_count(),
        2 * aal5::cells_for(9180) + aal5::cells_for(1640)
    );
    assert_eq!(trip.cells().len(), trip.cell_count() * CELL_LEN);
    let got = trip.receive(None::<&mut PcapWriter<Vec<u8>>>).unwrap();
    assert!(got.identical && got.check_passed);
    assert_eq!(got.octets, data);
    assert_eq!((got.frames_bad, got.frames_hit), (0, 0));
    assert_eq!(got.report.frames, 3);
}

#[test]
fn roundtrip_catches_exactly_the_damaged_frames() {
    let data = frame(20_000, 9);
    let mut trip = Roundtrip::segment(&data, header(0, 100), 1000).unwrap();
    assert_eq!(trip.frames_sent(), 20);
    // 21 cells a frame: damage frames 0 (twice), 3 and 19.
    let flips = [
        BitFlip { cell: 0, bit: 0 },
        BitFlip { cell: 5, bit: 383 },
        BitFlip { cell: 70, bit: 17 },
        BitFlip {
            cell: 419,
            bit: 200,
        },
    ];
    trip.corrupt(&flips).unwrap();
    assert_eq!(trip.cells_corrupted(), 4);
    let mut w = PcapWriter::with_link_type(Vec::new(), LinkType::Erf).unwrap();
    let got = trip.receive(Some(&mut w)).unwrap();
    assert!(got.check_passed && !got.identical);
    assert_eq!((got.frames_bad, got.frames_hit), (3, 3));
    assert_eq!(got.report.frames, 17);
    let mut want = data[1000..3000].to_vec();
    want.extend_from_slice(&data[4000..19_000]);
    assert_eq!(got.octets, want);
    assert_eq!(w.records(), 20, "bad frames are captured as received");
}

#[test]
fn roundtrip_refuses_what_it_cannot_do() {
    let data = frame(100, 0);
    assert!(matches!(
        Roundtrip::segment(&data, header(0, 100), 0),
        Err(WireError::FieldRange { value: 0, .. })
    ));
    assert!(Roundtrip::segment(&data, header(0, 100), aal5::MAX_SDU + 1).is_err());
    // A UNI VPI has 8 bits.
    assert!(Roundtrip::segment(&data, header(300, 100), 50).is_err());
    let mut trip = Roundtrip::segment(&data, header(0, 100), 50).unwrap();
    assert_eq!(trip.cell_count(), 4);
    let before = trip.cells().to_vec();
    let bad_cell = [BitFlip { cell: 0, bit: 1 }, BitFlip { cell: 4, bit: 0 }];
    assert!(trip.corrupt(&bad_cell).is_err());
    assert!(trip.corrupt(&[BitFlip { cell: 0, bit: 384 }]).is_err());
    assert_eq!(trip.cells(), before, "a refused list flips nothing");
    assert_eq!(trip.cells_corrupted(), 0);
    // An empty buffer sends nothing and receives nothing, intact.
    let trip = Roundtrip::segment(&[], header(0, 100), 50).unwrap();
    assert_eq!((trip.frames_sent(), trip.cell_count()), (0, 0));
    assert!(
        trip.receive(None::<&mut PcapWriter<Vec<u8>>>)
            .unwrap()
            .check_passed
    );
}
