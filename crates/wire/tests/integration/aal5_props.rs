//! AAL5: segmentation and reassembly are inverse; corruption never goes unnoticed.

use atmlab_core::time::Instant;
use atmlab_wire::aal5::{self, ReassemblerConfig, VcReassembler};
use atmlab_wire::cell::{CELL_LEN, PAYLOAD_LEN};
use atmlab_wire::{CellHeader, HeaderFormat, Pti, WireError};
use proptest::prelude::*;

fn vc_header() -> impl Strategy<Value = CellHeader> {
    (any::<bool>(), 0u16..4096, 32u16..=u16::MAX, any::<bool>()).prop_map(|(nni, vpi, vci, clp)| {
        let format = crate::format_of(nni);
        CellHeader {
            format,
            gfc: 0,
            vpi: vpi & format.max_vpi(),
            vci,
            pti: Pti::user(false),
            clp,
        }
    })
}

/// A good frame: VPI, VCI and SDU.
type Delivered = (u16, u16, Vec<u8>);

/// Reassembles a stream and returns the good frames and the errors.
fn run(format: HeaderFormat, cells: &[u8]) -> (Vec<Delivered>, Vec<WireError>) {
    let mut d = VcReassembler::new(format, ReassemblerConfig::default());
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for c in cells.chunks(CELL_LEN) {
        match d.handle_cell(Instant::ZERO, c) {
            Some((Some(vc), Ok(f))) => good.push((vc.vpi.0, vc.vci.0, f.sdu.to_vec())),
            Some((_, Err(e))) => bad.push(e),
            Some((None, Ok(_))) | None => {}
        }
    }
    (good, bad)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn segment_then_reassemble_is_identity(
        h in vc_header(),
        sdu in proptest::collection::vec(any::<u8>(), 1..20_000),
        uu in any::<u8>(),
        cpi in any::<u8>(),
    ) {
        let cells = aal5::segment(h, &sdu, uu, cpi).unwrap();
        prop_assert_eq!(cells.len(), aal5::cells_for(sdu.len()) * CELL_LEN);
        let mut d = VcReassembler::new(h.format, ReassemblerConfig::default());
        let mut got = None;
        for c in cells.chunks(CELL_LEN) {
            if let Some((vc, o)) = d.handle_cell(Instant::ZERO, c) {
                let f = o.unwrap();
                got = Some((vc.unwrap(), f.sdu.to_vec(), f.uu, f.cpi));
            }
        }
        let (vc, back, uu2, cpi2) = got.expect("a frame");
        prop_assert_eq!((vc.vpi.0, vc.vci.0), (h.vpi, h.vci));
        prop_assert_eq!(back, sdu);
        prop_assert_eq!((uu2, cpi2), (uu, cpi));
    }

    #[test]
    fn interleaved_vcs_reassemble_independently(
        a in proptest::collection::vec(any::<u8>(), 1..3000),
        b in proptest::collection::vec(any::<u8>(), 1..3000),
        picks in proptest::collection::vec(any::<bool>(), 200),
    ) {
        let ca = aal5::segment(CellHeader::uni(1, 100, Pti::user(false)), &a, 0, 0).unwrap();
        let cb = aal5::segment(CellHeader::uni(1, 101, Pti::user(false)), &b, 0, 0).unwrap();
        let (mut ia, mut ib) = (ca.chunks(CELL_LEN), cb.chunks(CELL_LEN));
        let mut stream = Vec::new();
        let mut p = picks.iter().cycle();
        loop {
            let next = if *p.next().unwrap() { ia.next().or_else(|| ib.next()) } else { ib.next().or_else(|| ia.next()) };
            match next {
                Some(c) => stream.extend_from_slice(c),
                None => break,
            }
        }
        let (mut good, bad) = run(HeaderFormat::Uni, &stream);
        prop_assert!(bad.is_empty());
        good.sort();
        prop_assert_eq!(good, vec![(1, 100, a), (1, 101, b)]);
    }

    #[test]
    fn every_payload_corruption_is_detected(
        sdu in proptest::collection::vec(any::<u8>(), 1..5000),
        cell_pick in any::<prop::sample::Index>(),
        corruption in proptest::collection::vec((0usize..PAYLOAD_LEN, 1u8..=255), 1..8),
    ) {
        let h = CellHeader::uni(0, 42, Pti::user(false));
        let mut cells = aal5::segment(h, &sdu, 0, 0).unwrap();
        let n = cells.len() / CELL_LEN;
        let i = cell_pick.index(n);
        for (off, mask) in &corruption {
            cells[i * CELL_LEN + 5 + off] ^= mask;
        }
        let (good, bad) = run(HeaderFormat::Uni, &cells);
        // The XORs may cancel out (same offset twice); only a real change must be caught.
        let changed = aal5::segment(h, &sdu, 0, 0).unwrap() != cells;
        if changed {
            prop_assert!(good.is_empty(), "a corrupted frame was delivered");
            prop_assert_eq!(bad.len(), 1);
            let detected = matches!(bad[0], WireError::Crc { .. } | WireError::Length { .. } | WireError::Malformed { .. });
            prop_assert!(detected, "unexpected outcome {:?}", bad[0]);
        } else {
            prop_assert_eq!(good.len(), 1);
        }
    }
}

#[test]
fn largest_frame_round_trips() {
    let sdu: Vec<u8> = (0..aal5::MAX_SDU).map(|i| (i % 251) as u8).collect();
    let cells = aal5::segment(CellHeader::uni(0, 32, Pti::user(false)), &sdu, 0, 0).unwrap();
    let (good, bad) = run(HeaderFormat::Uni, &cells);
    assert!(bad.is_empty());
    assert_eq!(good[0].2, sdu);
}
