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
