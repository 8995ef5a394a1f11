//! The decoder harness shared by the robustness tests and the cargo-fuzz targets
//! (`fuzz/fuzz_targets/*.rs` include this file), so both exercise the same entry points.
//! Each function feeds arbitrary bytes to decoders and must never panic.

#![allow(
    dead_code,
    reason = "each fuzz target includes this file and uses one function"
)]

use atmlab_core::time::{Duration, Instant};
use atmlab_wire::aal5::{CpcsPdu, CpcsPduRepr, ReassemblerConfig, VcReassembler};
use atmlab_wire::cell::CELL_LEN;
use atmlab_wire::{Cell, CellHeader, HeaderFormat, HecReceiver};

/// The cell view, the header repr and the HEC receiver.
pub fn cell(data: &[u8]) {
    for format in [HeaderFormat::Uni, HeaderFormat::Nni] {
        if let Ok(c) = Cell::new_checked(data) {
            let _ = (
                c.gfc(),
                c.vpi(format),
                c.vci(),
                c.pti(),
                c.clp(),
                c.hec(),
                c.payload().len(),
            );
            if let Ok(h) = CellHeader::parse(&c, format) {
                // A header that parsed must emit back to the same five octets.
                assert_eq!(&h.to_bytes()[..], &data[..5]);
            }
        }
    }
    let mut rx = HecReceiver::new();
    let mut buf = data.to_vec();
    for chunk in buf.chunks_mut(CELL_LEN) {
        rx.check(chunk);
    }
}

/// AAL5: per-VC reassembly of a cell stream (with a timer and a small SDU limit, so every
/// outcome is reachable), and the CPCS-PDU view and repr.
pub fn aal5(data: &[u8]) {
    for format in [HeaderFormat::Uni, HeaderFormat::Nni] {
        let cfg = ReassemblerConfig {
            max_sdu: 1000,
            timeout: Some(Duration::from_micros(50)),
        };
        let mut d = VcReassembler::new(format, cfg);
        for (i, c) in data.chunks(CELL_LEN).enumerate() {
            let now = Instant::from_picos(i as u64 * 2_726_000);
            let _ = d.handle_cell(now, c);
            let _ = d.handle_timeout(now);
        }
    }
    if let Ok(p) = CpcsPdu::new_checked(data) {
        let _ = (
            p.uu(),
            p.cpi(),
            p.length(),
            p.crc(),
            p.verify_crc(),
            p.sdu(),
        );
        if let Ok(r) = CpcsPduRepr::parse(&p) {
            // A PDU that parsed must emit back to the same octets.
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out).unwrap();
            assert_eq!(&out[..], data);
        }
    }
}

/// Every cell-level decoder.
pub fn cells_and_aal5(data: &[u8]) {
    cell(data);
    aal5(data);
}

/// AAL3/4: the SAR-PDU and CPCS-PDU views and reprs, and MID-multiplexed reassembly of
/// the input cut into 48-octet SAR-PDUs.
pub fn aal34(data: &[u8]) {
    use atmlab_wire::aal34::{self, Reassembler, ReassemblerConfig, SarPdu, SarPduRepr};
    for chunk in data.chunks(48) {
        if let Ok(s) = SarPdu::new_checked(chunk) {
            let _ = (
                s.segment_type(),
                s.sn(),
                s.mid(),
                s.li(),
                s.crc(),
                s.verify_crc(),
                s.data().len(),
            );
            if let Ok(r) = SarPduRepr::parse(&s) {
                // A SAR-PDU that parsed must emit to one that parses to the same repr.
                // (Not to the same octets: the payload past LI is padding, covered by the
                // CRC but not kept, and emitted as zeros; found by fuzzing.)
                let bytes = r.to_bytes().unwrap();
                let again = SarPdu::new_checked(&bytes[..]).unwrap();
                assert_eq!(SarPduRepr::parse(&again).unwrap(), r);
            }
        }
    }
    if let Ok(c) = aal34::CpcsPdu::new_checked(data) {
        let _ = (
            c.cpi(),
            c.btag(),
            c.basize(),
            c.al(),
            c.etag(),
            c.length(),
            c.payload().len(),
            c.pad().len(),
        );
        let _ = aal34::CpcsPduRepr::parse(&c);
    }
    let cfg = ReassemblerConfig {
        max_mids: 4,
        max_sdu: 2000,
        timeout: Duration::from_micros(100),
    };
    let mut r = Reassembler::new(cfg);
    for (i, chunk) in data.chunks(48).enumerate() {
        let now = Instant::from_picos(i as u64 * 2_726_000);
        let _ = r.handle_sar(now, chunk);
        let _ = r.expire(now);
    }
}

/// SMDS: the L3_PDU view and repr, and E.164 addresses from octets and from text.
pub fn smds(data: &[u8]) {
    use atmlab_wire::{E164Address, L3Pdu, L3PduRepr};
    if let Ok(p) = L3Pdu::new_checked(data) {
        let _ = (
            p.betag(),
            p.basize(),
            p.destination(),
            p.source(),
            p.hlpi(),
            p.pad_len(),
            p.qos(),
        );
        let _ = (
            p.cib(),
            p.hel(),
            p.bridging(),
            p.header_extension().len(),
            p.info().len(),
            p.pad().len(),
        );
        let _ = (p.crc32(), p.trailer_betag(), p.length());
        if let Ok(r) = L3PduRepr::parse(&p) {
            let _ = (r.version(), r.he_elements().count());
            // A PDU that parsed must emit back to the same octets, reserved and PAD
            // octets aside (they are ignored on receipt and written as zero).
            let mut out = vec![0u8; r.buffer_len()];
            let n = r.emit(&mut out).unwrap();
            assert_eq!(n, data.len());
            let again = L3Pdu::new_checked(&out[..]).unwrap();
            assert_eq!(L3PduRepr::parse(&again).unwrap(), r);
        }
    }
    for chunk in data.chunks(8) {
        if let Ok(a) = E164Address::parse(chunk) {
            let text = a.to_string();
            assert_eq!(text.parse::<E164Address>().unwrap(), a, "{text}");
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = s.parse::<E164Address>();
    }
}
