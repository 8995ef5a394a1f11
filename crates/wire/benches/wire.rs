//! Criterion benchmarks of the wire formats' hot paths. Figures and the command that
//! produced them are in docs/performance.md:
//!
//!     cargo bench -p atmlab-wire --bench wire

#![allow(
    missing_docs,
    reason = "criterion_group! generates undocumented functions"
)]

use std::hint::black_box;

use atmlab_core::time::Instant;
use atmlab_wire::aal5::{self, Reassembler, ReassemblerConfig};
use atmlab_wire::cell::{CELL_LEN, PAYLOAD_LEN};
use atmlab_wire::{CellHeader, HecReceiver, Pti, crc};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const FRAME_SIZES: [usize; 4] = [64, 1500, 9180, 65_535];

fn headers(n: usize) -> Vec<[u8; 5]> {
    (0..n)
        .map(|i| {
            CellHeader::uni(
                (i % 256) as u16,
                (i * 7 % 65_536) as u16,
                Pti::user(i % 3 == 0),
            )
            .to_bytes()
        })
        .collect()
}

fn bench_hec(c: &mut Criterion) {
    let hs = headers(4096);
    let mut g = c.benchmark_group("hec");
    g.throughput(Throughput::Elements(hs.len() as u64));
    g.bench_function("generate", |b| {
        b.iter(|| {
            let mut acc = 0u8;
            for h in &hs {
                acc ^= crc::hec(black_box([h[0], h[1], h[2], h[3]]));
            }
            acc
        })
    });
    g.bench_function("check", |b| {
        b.iter(|| {
            let mut bad = 0u32;
            for h in &hs {
                bad += u32::from(crc::hec_syndrome(black_box(*h)) != 0);
            }
            bad
        })
    });
    g.bench_function("receiver_state_machine", |b| {
        let mut cells = hs.clone();
        let mut rx = HecReceiver::new();
        b.iter(|| {
            for h in cells.iter_mut() {
                black_box(rx.check(h));
            }
        })
    });
    g.finish();
}

fn bench_aal5(c: &mut Criterion) {
    let header = CellHeader::uni(1, 100, Pti::user(false));
    for &n in &FRAME_SIZES {
        let sdu: Vec<u8> = (0..n).map(|i| i as u8).collect();
        let cells = aal5::segment(header, &sdu, 0, 0).unwrap();
        let mut g = c.benchmark_group(format!("aal5/{n}"));
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function("segment", |b| {
            let mut out = [0u8; CELL_LEN];
            b.iter(|| {
                let mut s = aal5::Segmenter::new(header, black_box(&sdu), 0, 0).unwrap();
                while s.next_into(&mut out) {
                    black_box(&out);
                }
            })
        });
        // Payloads and end-of-frame flags as a receiver sees them after the header look-up.
        let payloads: Vec<(&[u8; PAYLOAD_LEN], bool)> = cells
            .chunks(CELL_LEN)
            .map(|c| {
                (
                    c[5..].try_into().unwrap(),
                    Pti::from_bits(c[3] >> 1).is_end_of_frame(),
                )
            })
            .collect();
        g.bench_function("reassemble", |b| {
            let mut r = Reassembler::new(ReassemblerConfig::default());
            b.iter(|| {
                for &(p, end) in &payloads {
                    if let Some(o) = r.handle_cell(Instant::ZERO, black_box(p), end) {
                        black_box(o.unwrap().sdu.len());
                    }
                }
            })
        });
        g.finish();
    }
}

fn bench_aal34(c: &mut Criterion) {
    use atmlab_wire::aal34::{
        Reassembler as Aal34Reassembler, ReassemblerConfig as Aal34Config,
        Segmenter as Aal34Segmenter,
    };
    for &n in &FRAME_SIZES {
        let sdu: Vec<u8> = (0..n).map(|i| i as u8).collect();
        let mut g = c.benchmark_group(format!("aal34/{n}"));
        g.throughput(Throughput::Bytes(n as u64));
        let mut seg = Aal34Segmenter::new();
        g.bench_function("segment", |b| {
            let mut out = [0u8; 48];
            b.iter(|| {
                let mut s = seg.segment_frame(7, 1, black_box(&sdu)).unwrap();
                while s.write_next(&mut out) {
                    black_box(&out);
                }
            })
        });
        // The receiver does not check the SN of a BOM, so the same PDU can be replayed.
        let sars: Vec<[u8; 48]> = Aal34Segmenter::new()
            .segment_frame(7, 1, &sdu)
            .unwrap()
            .collect();
        g.bench_function("reassemble", |b| {
            let mut r = Aal34Reassembler::new(Aal34Config::default());
            b.iter(|| {
                for s in &sars {
                    if let Some(o) = r.handle_sar(Instant::ZERO, black_box(s)) {
                        black_box(o.unwrap().payload.len());
                    }
                }
            })
        });
        g.finish();
    }
}

fn bench_smds(c: &mut Criterion) {
    use atmlab_wire::{E164Address, L3Pdu, L3PduRepr};
    let info = vec![0x5au8; 64];
    let repr = L3PduRepr {
        betag: 1,
        destination: E164Address::individual("15551234567").unwrap(),
        source: E164Address::individual("15557654321").unwrap(),
        hlpi: 1,
        qos: 0,
        crc32: false,
        bridging: 0,
        header_extension: [0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        info: &info,
    };
    let mut pdu = vec![0u8; repr.buffer_len()];
    repr.emit(&mut pdu).unwrap();
    let mut g = c.benchmark_group("smds_l3");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse", |b| {
        b.iter(|| {
            let v = L3Pdu::new_checked(black_box(&pdu[..])).unwrap();
            black_box(L3PduRepr::parse(&v).unwrap().destination)
        })
    });
    g.bench_function("parse_emit", |b| {
        let mut out = vec![0u8; pdu.len()];
        b.iter(|| {
            let v = L3Pdu::new_checked(black_box(&pdu[..])).unwrap();
            let r = L3PduRepr::parse(&v).unwrap();
            black_box(r.emit(&mut out).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, bench_hec, bench_aal5, bench_aal34, bench_smds);
criterion_main!(benches);
