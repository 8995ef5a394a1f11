//! Tests of the SMDS L3_PDU: the CRC32 against a bitwise reference, the view over dirty
//! buffers, the representation's round trip and every rule `parse` enforces, and the
//! header extension walk.

use super::*;
use crate::WireError;
use crate::crc;
use crate::e164::{AddressType, E164Address};

/// CRC-32 of the 802 generator, bit by bit, most significant bit first, initial value
/// and final XOR all ones: an independent reference for the SMDS CRC32.
fn crc32_msb_first(data: &[u8]) -> u32 {
    let mut c = u32::MAX;
    for &b in data {
        c ^= u32::from(b) << 24;
        for _ in 0..8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04c1_1db7
            } else {
                c << 1
            };
        }
    }
    !c
}

fn da() -> E164Address {
    E164Address::individual("15551234567").unwrap()
}

fn sa() -> E164Address {
    E164Address::individual("15555550123").unwrap()
}

fn repr(info: &[u8], crc32: bool) -> L3PduRepr<'_> {
    L3PduRepr {
        betag: 0x5c,
        destination: da(),
        source: sa(),
        hlpi: HLPI_LLC,
        qos: 0,
        crc32,
        bridging: 0,
        header_extension: HE_VERSION_1,
        info,
    }
}

/// The L3_PDU written out by hand from the layout in the module documentation.
fn hand_made(crc32: bool) -> Vec<u8> {
    let basize: u8 = if crc32 { 44 } else { 40 };
    let mut v = vec![0x00, 0x5c, 0x00, basize];
    v.extend_from_slice(&[0xc1, 0x55, 0x51, 0x23, 0x45, 0x67, 0xff, 0xff]); // DA
    v.extend_from_slice(&[0xc1, 0x55, 0x55, 0x55, 0x01, 0x23, 0xff, 0xff]); // SA
    v.push((1 << 2) | 3); // HLPI 1 (LLC), PAD length 3
    v.push(if crc32 { 0x0b } else { 0x03 }); // QoS 0, CIB, HEL 3
    v.extend_from_slice(&[0x00, 0x00]); // Bridging
    v.extend_from_slice(&[0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // HE: version 1
    v.extend_from_slice(b"ABCDE"); // Info
    v.extend_from_slice(&[0, 0, 0]); // PAD
    if crc32 {
        let c = crc32_msb_first(&v[4..]);
        v.extend_from_slice(&c.to_be_bytes());
    }
    v.extend_from_slice(&[0x00, 0x5c, 0x00, basize]); // trailer
    v
}

#[test]
fn known_layout_without_crc() {
    let want = hand_made(false);
    assert_eq!(want.len(), 48);
    let r = repr(b"ABCDE", false);
    assert_eq!(r.buffer_len(), 48);
    assert_eq!(r.basize(), 40);
    let mut buf = vec![0xa5; 52];
    assert_eq!(r.emit(&mut buf), Ok(48));
    assert_eq!(buf[..48], want[..]);
    assert_eq!(buf[48..], [0xa5; 4]);
    assert_eq!(
        L3PduRepr::parse(&L3Pdu::new_checked(&want[..]).unwrap()),
        Ok(r)
    );
}

#[test]
fn known_layout_with_crc() {
    let want = hand_made(true);
    assert_eq!(want.len(), 52);
    let r = repr(b"ABCDE", true);
    let mut buf = vec![0xa5; 52];
    assert_eq!(r.emit(&mut buf), Ok(52));
    assert_eq!(buf, want);
    let v = L3Pdu::new_checked(&want[..]).unwrap();
    assert_eq!(v.crc32(), Some(crc32_msb_first(&want[4..44])));
    assert_eq!(v.crc32(), Some(crc::crc32(&want[4..44])));
    assert_eq!(L3PduRepr::parse(&v), Ok(r));
    // The CRC32 does not cover the common header or the trailer.
    let mut other = want.clone();
    other[0] = 0x77;
    other[48] = 0x77;
    assert_eq!(
        L3Pdu::new_unchecked(&other[..]).computed_crc32(),
        v.computed_crc32()
    );
    assert_eq!(L3PduRepr::parse(&L3Pdu::new_unchecked(&other[..])), Ok(r));
}

#[test]
fn accessors_in_dirty_buffer() {
    // 7 octets of Info: PAD 1, CRC32 present: 36 + 7 + 1 + 4 + 4 = 52.
    let mut v = L3Pdu::new_checked(vec![0xa5; 52]).unwrap();
    v.set_reserved(0x11);
    v.set_betag(0x22);
    v.set_basize(0x3344);
    v.set_destination(da().to_bytes());
    v.set_source(sa().to_bytes());
    v.set_hlpi(0x2a);
    v.set_pad_len(1);
    v.set_qos(0x9);
    v.set_cib(true);
    v.set_hel(3);
    v.set_bridging(0xbeef);
    v.header_extension_mut().copy_from_slice(&HE_VERSION_1);
    v.info_mut().copy_from_slice(b"payload");
    v.pad_mut().fill(0);
    v.set_trailer_reserved(0x66);
    v.set_trailer_betag(0x77);
    v.set_length(0x8899);
    v.fill_crc32();
    assert_eq!(v.reserved(), 0x11);
    assert_eq!(v.betag(), 0x22);
    assert_eq!(v.basize(), 0x3344);
    assert_eq!(v.destination(), da().to_bytes());
    assert_eq!(v.source(), sa().to_bytes());
    assert_eq!(v.hlpi(), 0x2a);
    assert_eq!(v.pad_len(), 1);
    assert_eq!(v.qos(), 0x9);
    assert!(v.cib());
    assert_eq!(v.hel(), 3);
    assert_eq!(v.bridging(), 0xbeef);
    assert_eq!(v.header_extension(), HE_VERSION_1);
    assert_eq!(v.info(), b"payload");
    assert_eq!(v.pad(), [0]);
    assert_eq!(v.crc32(), Some(crc32_msb_first(&v.b()[4..44])));
    assert_eq!(v.trailer_reserved(), 0x66);
    assert_eq!(v.trailer_betag(), 0x77);
    assert_eq!(v.length(), 0x8899);
    let raw = v.into_inner();
    assert_eq!(raw[..4], [0x11, 0x22, 0x33, 0x44]);
    assert_eq!(raw[20..24], [(0x2a << 2) | 1, 0x9b, 0xbe, 0xef]);
    assert_eq!(raw[48..], [0x66, 0x77, 0x88, 0x99]);

    // Setters touch only their bits.
    let mut v = L3Pdu::new_unchecked([0xffu8; MIN_LEN]);
    v.set_cib(false);
    assert_eq!(v.b()[21], 0xf7);
    v.set_hel(0);
    assert_eq!(v.b()[21], 0xf0);
    v.set_qos(0);
    assert_eq!(v.b()[21], 0x00);
    v.set_pad_len(0);
    assert_eq!(v.b()[20], 0xfc);
    v.set_hlpi(0);
    assert_eq!(v.b()[20], 0x00);
}

#[test]
fn accessors_clamp_inconsistent_fields() {
    // PAD length and CIB that overrun an empty body: empty fields, no panic.
    let mut v = L3Pdu::new_checked([0u8; MIN_LEN]).unwrap();
    v.set_cib(true);
    v.set_pad_len(3);
    assert_eq!(v.info(), b"");
    assert_eq!(v.pad(), b"");
    assert_eq!(v.crc32(), None);
    v.set_crc32(0x1234_5678);
    v.fill_crc32();
    let mut want = [0u8; MIN_LEN];
    want[20] = 3;
    want[21] = 0x08;
    assert_eq!(v.into_inner(), want);
    assert_eq!(
        L3Pdu::new_checked(&[0u8; 39][..]),
        Err(WireError::Truncated {
            what: WHAT,
            need: 40,
            got: 39
        })
    );
}

#[test]
fn empty_info_and_max_info() {
    let r = repr(b"", false);
    let mut buf = vec![0u8; r.buffer_len()];
    assert_eq!(r.emit(&mut buf), Ok(40));
    assert_eq!(buf[2..4], [0, 32]);
    assert_eq!(L3PduRepr::parse(&L3Pdu::new_unchecked(&buf[..])), Ok(r));
    let big = vec![0x42u8; MAX_INFO];
    let r = repr(&big, true);
    assert_eq!(r.buffer_len(), MAX_LEN);
    let mut buf = vec![0u8; MAX_LEN];
    assert_eq!(r.emit(&mut buf), Ok(MAX_LEN));
    assert_eq!(L3Pdu::new_unchecked(&buf[..]).basize(), 9224);
    assert_eq!(L3PduRepr::parse(&L3Pdu::new_unchecked(&buf[..])), Ok(r));
}

fn parse(b: &[u8]) -> Result<L3PduRepr<'_>, WireError> {
    L3PduRepr::parse(&L3Pdu::new_unchecked(b))
}

#[test]
fn every_validation_error() {
    let good = hand_made(true);
    assert!(parse(&good).is_ok());
    let with = |f: &dyn Fn(&mut L3Pdu<&mut [u8]>)| {
        let mut b = good.clone();
        f(&mut L3Pdu::new_unchecked(&mut b[..]));
        b
    };
    assert!(matches!(
        parse(&good[..39]),
        Err(WireError::Truncated {
            need: 40,
            got: 39,
            ..
        })
    ));
    assert_eq!(
        parse(&with(&|v| v.set_hel(2))),
        Err(malformed(
            "HEL is not 3 (SMDS carries a 12-octet header extension)"
        ))
    );
    assert_eq!(
        parse(&with(&|v| v.set_trailer_betag(0x5d))),
        Err(WireError::TagMismatch {
            what: WHAT,
            btag: 0x5c,
            etag: 0x5d
        })
    );
    assert_eq!(
        parse(&with(&|v| v.set_length(48))),
        Err(WireError::Length {
            what: WHAT,
            field: 48,
            actual: 44
        })
    );
    assert_eq!(
        parse(&with(&|v| v.set_basize(40))),
        Err(WireError::Length {
            what: "SMDS L3_PDU BAsize",
            field: 40,
            actual: 44
        })
    );
    // Info + PAD not a multiple of 4: drop a PAD octet (and fix the lengths).
    let mut short = good.clone();
    short.remove(43);
    let n = short.len();
    let mut v = L3Pdu::new_unchecked(&mut short[..]);
    v.set_basize((n - 8) as u16);
    v.set_length((n - 8) as u16);
    assert_eq!(
        parse(&short),
        Err(malformed("Info + PAD is not a multiple of 4 octets"))
    );
    // CIB set on a body too short for a CRC32.
    let mut e = vec![0u8; 40];
    repr(b"", false).emit(&mut e).unwrap();
    L3Pdu::new_unchecked(&mut e[..]).set_cib(true);
    assert_eq!(
        parse(&e),
        Err(malformed("CIB set but no room for the CRC32"))
    );
    // PAD length with no Info.
    let mut e = vec![0u8; 40];
    repr(b"", false).emit(&mut e).unwrap();
    L3Pdu::new_unchecked(&mut e[..]).set_pad_len(2);
    assert_eq!(parse(&e), Err(malformed("PAD length exceeds Info + PAD")));
    // Info over 9188 octets.
    let big = vec![0u8; MAX_INFO + 4];
    let mut b = vec![0u8; MIN_LEN + big.len()];
    let mut v = L3Pdu::new_unchecked(&mut b[..]);
    v.set_hel(3);
    v.set_basize((big.len() + 32) as u16);
    v.set_length((big.len() + 32) as u16);
    assert_eq!(
        parse(&b),
        Err(WireError::FieldRange {
            field: "SMDS Info length",
            value: 9192,
            max: 9188
        })
    );
    // CRC32 mismatch.
    let bad = with(&|v| v.info_mut()[0] ^= 1);
    assert!(matches!(
        parse(&bad),
        Err(WireError::Crc { what: WHAT, .. })
    ));
    // Addresses (CRC recomputed so that the address check is reached).
    let addr = |da: [u8; 8], sa: [u8; 8]| {
        with(&move |v| {
            v.set_destination(da);
            v.set_source(sa);
            v.fill_crc32();
        })
    };
    let g = E164Address::group("15551230000").unwrap().to_bytes();
    assert!(
        parse(&addr(g, sa().to_bytes())).is_ok(),
        "group destination"
    );
    assert_eq!(
        parse(&addr(sa().to_bytes(), g)),
        Err(malformed("source address is not an individual address"))
    );
    let unknown = E164Address::new(AddressType::Unknown(0xa), "1")
        .unwrap()
        .to_bytes();
    assert_eq!(
        parse(&addr(unknown, sa().to_bytes())),
        Err(malformed(
            "destination address type is neither individual nor group"
        ))
    );
    assert!(matches!(
        parse(&addr(
            [0xc1, 0xf1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            sa().to_bytes()
        )),
        Err(WireError::Malformed {
            what: "E.164 address",
            ..
        })
    ));
    assert!(matches!(
        parse(&addr(da().to_bytes(), [0xcf; 8])),
        Err(WireError::Malformed {
            what: "E.164 address",
            ..
        })
    ));
    // Reserved octets and PAD contents are ignored.
    let lenient = with(&|v| {
        v.set_reserved(0xff);
        v.set_trailer_reserved(0xff);
    });
    assert!(parse(&lenient).is_ok());
    let mut padded = hand_made(false);
    padded[41] = 0xee;
    assert!(parse(&padded).is_ok());
}

#[test]
fn emit_errors() {
    let info = vec![0u8; MAX_INFO + 1];
    assert!(matches!(
        repr(&info, false).emit(&mut []),
        Err(WireError::FieldRange { max: 9188, .. })
    ));
    let r = repr(b"abc", false);
    assert!(matches!(
        L3PduRepr { hlpi: 64, ..r }.check(),
        Err(WireError::FieldRange { max: 63, .. })
    ));
    assert!(matches!(
        L3PduRepr { qos: 16, ..r }.check(),
        Err(WireError::FieldRange { max: 15, .. })
    ));
    let g = E164Address::group("1").unwrap();
    assert!(
        L3PduRepr {
            destination: g,
            ..r
        }
        .check()
        .is_ok()
    );
    assert!(L3PduRepr { source: g, ..r }.check().is_err());
    let u = E164Address::new(AddressType::Unknown(1), "1").unwrap();
    assert!(
        L3PduRepr {
            destination: u,
            ..r
        }
        .check()
        .is_err()
    );
    assert_eq!(
        r.emit(&mut [0u8; 43]),
        Err(WireError::BufferTooSmall {
            what: WHAT,
            need: 44,
            got: 43
        })
    );
}

#[test]
fn header_extension_elements() {
    let r = repr(b"", false);
    assert_eq!(r.version(), Some(1));
    let elems: Vec<_> = r.he_elements().collect();
    assert_eq!(
        elems,
        [Ok(HeElement {
            element_type: HE_TYPE_VERSION,
            value: &[1]
        })]
    );
    // Version, then Carrier Selection (IC code 0288 as BCD), then HE PAD.
    let he = [3, 0, 1, 4, 1, 0x02, 0x88, 0, 0, 0, 0, 0];
    let elems: Vec<_> = HeElements::new(&he).collect();
    assert_eq!(elems.len(), 2);
    assert_eq!(
        elems[1],
        Ok(HeElement {
            element_type: HE_TYPE_CARRIER_SELECTION,
            value: &[0x02, 0x88]
        })
    );
    assert_eq!(he_version(&he), Some(1));
    // Malformed: a length running past the end, and a length of 1.
    let bad = [3, 0, 1, 10, 1, 0, 0, 0, 0, 0, 0, 0];
    let elems: Vec<_> = HeElements::new(&bad).collect();
    assert_eq!(elems.len(), 2);
    assert!(elems[1].is_err());
    assert_eq!(HeElements::new(&[1, 0, 0]).count(), 1);
    assert_eq!(he_version(&[1, 0, 0]), None);
    assert_eq!(he_version(&[0; 12]), None);
    assert_eq!(
        he_version(&[4, 0, 1, 2, 0, 0]),
        None,
        "a version value must be one octet"
    );
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn address(types: &'static [AddressType]) -> impl Strategy<Value = E164Address> {
        (
            proptest::sample::select(types),
            proptest::collection::vec(0u8..10, 1..=15),
        )
            .prop_map(|(t, d)| {
                let ascii: Vec<u8> = d.iter().map(|x| b'0' + x).collect();
                E164Address::from_digits(t, &ascii).unwrap()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn round_trip(
            betag in any::<u8>(),
            destination in address(&[AddressType::Individual, AddressType::Group]),
            source in address(&[AddressType::Individual]),
            hlpi in 0u8..64,
            qos in 0u8..16,
            crc32 in any::<bool>(),
            bridging in any::<u16>(),
            header_extension in any::<[u8; 12]>(),
            info in proptest::collection::vec(any::<u8>(), 0..=MAX_INFO),
        ) {
            let r = L3PduRepr { betag, destination, source, hlpi, qos, crc32, bridging, header_extension, info: &info };
            let mut buf = vec![0xa5u8; r.buffer_len()];
            prop_assert_eq!(r.emit(&mut buf), Ok(buf.len()));
            prop_assert_eq!(buf.len() % 4, 0);
            let v = L3Pdu::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(usize::from(v.basize()), buf.len() - 8);
            prop_assert_eq!(v.info(), &info[..]);
            prop_assert_eq!(L3PduRepr::parse(&v), Ok(r));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(v) = L3Pdu::new_checked(&bytes[..]) {
                let _ = (v.reserved(), v.betag(), v.basize(), v.destination(), v.source(), v.hlpi(), v.pad_len());
                let _ = (v.qos(), v.cib(), v.hel(), v.bridging(), v.header_extension(), v.info(), v.pad());
                let _ = (v.crc32(), v.computed_crc32(), v.trailer_reserved(), v.trailer_betag(), v.length());
                let _ = HeElements::new(v.header_extension()).count();
            }
            let _ = L3PduRepr::parse(&L3Pdu::new_unchecked(&bytes[..]));
            let _ = E164Address::parse(&bytes);
        }

        #[test]
        fn random_bodies_with_consistent_lengths_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..120),
            flags in any::<u8>(),
        ) {
            // Past the length checks, into the structure and address checks.
            let mut b = vec![0u8; MIN_LEN + body.len()];
            b[field::INFO..field::INFO + body.len()].copy_from_slice(&body);
            let mut v = L3Pdu::new_unchecked(&mut b[..]);
            v.set_hel(3);
            v.set_pad_len(flags);
            v.set_cib(flags & 4 != 0);
            v.set_basize((body.len() + 32) as u16);
            v.set_length((body.len() + 32) as u16);
            v.fill_crc32();
            let _ = L3PduRepr::parse(&L3Pdu::new_unchecked(&b[..]));
        }
    }
}
