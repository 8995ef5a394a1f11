//! Cell headers and the I.432.1 HEC receiver.

use atmlab_wire::cell::{CELL_LEN, HecMode, HecOutcome};
use atmlab_wire::{Cell, CellHeader, HecReceiver, Pti};
use proptest::prelude::*;

fn header() -> impl Strategy<Value = CellHeader> {
    (
        any::<bool>(),
        0u8..16,
        0u16..4096,
        any::<u16>(),
        0u8..8,
        any::<bool>(),
    )
        .prop_map(|(nni, gfc, vpi, vci, pt, clp)| {
            let format = crate::format_of(nni);
            CellHeader {
                format,
                gfc: if nni { 0 } else { gfc },
                vpi: vpi & format.max_vpi(),
                vci,
                pti: Pti::from_bits(pt),
                clp,
            }
        })
}

proptest! {
    #[test]
    fn header_emit_parse_round_trip(h in header(), fill in any::<u8>()) {
        let mut c = Cell::new_checked([fill; CELL_LEN]).unwrap();
        h.emit(&mut c).unwrap();
        prop_assert!(c.verify_hec());
        prop_assert_eq!(CellHeader::parse(&c, h.format).unwrap(), h);
        prop_assert_eq!(&c.into_inner()[5..], &[fill; 48][..]);
    }

    #[test]
    fn every_single_bit_error_is_corrected(h in header()) {
        let good = h.to_bytes();
        for bit in 0..40u8 {
            let mut rx = HecReceiver::new();
            let mut bad = good;
            bad[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
            prop_assert_eq!(rx.check(&mut bad), HecOutcome::Corrected(bit));
            prop_assert_eq!(bad, good);
            prop_assert_eq!(rx.mode(), HecMode::Detection);
        }
    }

    #[test]
    fn double_bit_errors_are_never_miscorrected(h in header(), a in 0u8..40, b in 0u8..40) {
        prop_assume!(a != b);
        let good = h.to_bytes();
        let mut bad = good;
        for bit in [a, b] {
            bad[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
        }
        let mut rx = HecReceiver::new();
        prop_assert_eq!(rx.check(&mut bad), HecOutcome::Discard);
    }

    #[test]
    fn detection_mode_discards_until_a_good_header(h in header(), bits in proptest::collection::vec(0u8..40, 1..5)) {
        let good = h.to_bytes();
        let mut rx = HecReceiver::new();
        // Put the receiver into detection mode with a first single-bit error.
        let mut first = good;
        first[0] ^= 0x80;
        prop_assert!(matches!(rx.check(&mut first), HecOutcome::Corrected(0)));
        for bit in bits {
            let mut bad = good;
            bad[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
            prop_assert_eq!(rx.check(&mut bad), HecOutcome::Discard);
        }
        let mut ok = good;
        prop_assert_eq!(rx.check(&mut ok), HecOutcome::Valid);
        prop_assert_eq!(rx.mode(), HecMode::Correction);
    }
}
