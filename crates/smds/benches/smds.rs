//! Benchmarks of the SMDS server cores (paper 002): header processing per path of
//! Table 1, in memory, with transmission reduced to dropping the queued transmit (as the
//! paper's "transmission only consists in incrementing a counter"); route recomputation
//! against the number of servers (the 100 ms bound of §3.3.2).
//!
//! `cargo bench -p atmlab-smds --bench smds`; figures in docs/performance.md.

#![allow(
    missing_docs,
    reason = "criterion_group! generates undocumented functions"
)]

use std::hint::black_box;

use atmlab_smds::ServerId;
use atmlab_smds::fib::Forwarder;
use atmlab_smds::workload::{Path, Workload, random_network, recompute};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn header_processing(c: &mut Criterion) {
    let wl = Workload::new(8, 8);
    let mut g = c.benchmark_group("smds_header");
    for path in Path::ALL {
        let frames = wl.frames(path, 1024, 64);
        let mut fwd = Forwarder::new(wl.fib.clone());
        g.throughput(Throughput::Elements(frames.len() as u64));
        g.bench_function(format!("{path:?}"), |b| {
            b.iter(|| {
                for (iface, f) in &frames {
                    fwd.handle_datagram(*iface, black_box(f));
                    black_box(fwd.clear_transmits());
                }
            })
        });
    }
    g.finish();
}

fn route_recomputation(c: &mut Criterion) {
    let mut g = c.benchmark_group("smds_spf");
    g.sample_size(20);
    for n in [10usize, 100, 1000] {
        let lsas = random_network(n, 2.0, 1);
        g.bench_function(format!("{n}_servers"), |b| {
            b.iter(|| black_box(recompute(ServerId(1), black_box(&lsas))))
        });
    }
    g.finish();
}

criterion_group!(benches, header_processing, route_recomputation);
criterion_main!(benches);
