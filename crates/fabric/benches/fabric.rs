//! Criterion benchmarks of the switch core: the per-cell switching function (look-up,
//! header rewrite, HEC, output queue) and control operations (commit + release, batched).
//! Figures and the command that produced them are in docs/performance.md:
//!
//!     cargo bench -p atmlab-fabric --bench fabric

#![allow(
    missing_docs,
    reason = "criterion_group! generates undocumented functions"
)]

use std::hint::black_box;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::*;
use atmlab_wire::cell::{CELL_LEN, Cell, CellHeader, Pti};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

const PORTS: u16 = 16;
const CONNS: u16 = 1024;
const BURST: usize = 4096;

/// A CBR VC cross-connect `in_port 0/vci -> out_port 0/vci` of `rate` cells/s.
fn commit(in_port: u16, out_port: u16, vci: u16, rate: f64, owner: &str) -> Commit {
    Commit {
        kind: ConnectionKind::Vc,
        in_port: PortId(in_port),
        in_id: VcId::new(0, vci),
        branches: vec![Branch {
            port: PortId(out_port),
            id: VcId::new(0, vci),
        }],
        traffic: TrafficDescriptor::cbr(CellRate(rate)),
        clr: 0.0,
        buffer_cells: 0,
        owner: owner.into(),
        replenish: 0,
        tag: String::new(),
    }
}

fn loaded_switch() -> Switch {
    let mut s = Switch::new(&SwitchConfig::uniform("bench", PORTS, BitRate(622.08e6))).unwrap();
    for i in 0..CONNS {
        s.commit(&commit(i % PORTS, (i + 1) % PORTS, 32 + i, 100.0, "bench"))
            .unwrap();
    }
    s
}

fn cells() -> Vec<(PortId, [u8; CELL_LEN])> {
    (0..BURST)
        .map(|k| {
            let i = (k * 7919 % usize::from(CONNS)) as u16;
            let mut buf = [0x5a; CELL_LEN];
            CellHeader::uni(0, 32 + i, Pti::user(k % 8 == 0))
                .emit(&mut Cell::new_unchecked(&mut buf[..]))
                .unwrap();
            (PortId(i % PORTS), buf)
        })
        .collect()
}

fn switching(c: &mut Criterion) {
    let mut g = c.benchmark_group("fabric");
    g.throughput(Throughput::Elements(BURST as u64));
    let input = cells();
    let mut s = loaded_switch();
    let mut out = Vec::with_capacity(BURST * CELL_LEN);
    g.bench_function("switch_cell_16_ports_1024_vcs", |b| {
        b.iter(|| {
            for (port, cell) in &input {
                let mut c = *cell;
                black_box(s.handle_cell(*port, &mut c));
            }
            out.clear();
            for p in 0..PORTS {
                s.drain(PortId(p), &mut out, usize::MAX);
            }
            black_box(out.len())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("fabric_control");
    g.throughput(Throughput::Elements(200));
    g.bench_function("commit_release_100_pairs_batched", |b| {
        b.iter_batched(
            || {
                let s = Switch::new(&SwitchConfig::uniform("b", 4, BitRate(155.52e6))).unwrap();
                let cmds: Vec<Command> = (0..100u16)
                    .map(|i| Command::Commit(commit(0, 1, 32 + i, 10.0, "cm")))
                    .collect();
                let rel: Vec<Command> = (1..=100u64)
                    .map(|id| {
                        Command::Release(Release {
                            connection: id,
                            keep_reserved: false,
                        })
                    })
                    .collect();
                (s, cmds, rel)
            },
            |(mut s, cmds, rel)| {
                black_box(s.execute(&cmds, Atomicity::AllOrNothing));
                black_box(s.execute(&rel, Atomicity::AllOrNothing));
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, switching);
criterion_main!(benches);
