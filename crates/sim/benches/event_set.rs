//! Event-set benchmarks: the classic *hold model* (Vaucher & Duval 1975; Jones 1986).
//!
//! Run with (short measurement times suit the 2-core machine):
//!
//! ```text
//! cargo bench -p atmlab-sim --bench event_set -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Add a filter after `--` to run one group, e.g. `-- hold_exp --warm-up-time 1 ...`.
//!
//! One *hold* operation pops the earliest pending event and schedules one new event later
//! than it, so the set stays at its size `n`. Throughput is in hold operations per second
//! (criterion's "elements"). Compare ratios within one run: the machine is noisy.
//!
//! Groups:
//!
//! - `hold_exp`: the textbook hold model. `n` events are prefilled at times drawn from
//!   Exp(mean 1 s); each hold reschedules the popped event at its time + Exp(mean 1 s).
//!   `event_set` is [`EventSet`] through [`EventSet::schedule`] (the heap path);
//!   `binary_heap` is a bare `BinaryHeap<Reverse<(time, seq)>>` doing the same holds, the
//!   floor any heap-based event set pays, so `event_set / binary_heap` is the overhead of
//!   slots, sequence numbers and cancellation support.
//! - `hold_fifo_d1`, `hold_fifo_d10`: a cell-level pattern. `n / d` lanes (think: links),
//!   each holding `d` cells spaced one cell slot (2.726 µs, 155.52 Mb/s) apart, lanes at
//!   random phases. A hold pops the earliest cell and schedules the cell `d` slots later on
//!   the same link (deterministic increment), so each link keeps `d` cells in flight.
//!   `event_set_lanes` uses [`EventSet::schedule_in_lane`] (one lane per link: the heap
//!   holds `n / d` heads); `event_set_heap` schedules the very same events through
//!   [`EventSet::schedule`] (the heap holds all `n`); `binary_heap` is the bare heap. With
//!   `d = 1` lanes can buy nothing (each lane holds one event) and show their cost; with
//!   `d = 10` the heap under the lanes is ten times smaller.
//!
//! Randomness: fixed seeds, xoshiro256++. The Exp(1 s) increments are precomputed outside
//! the timed loop into a table of 2^16 values (in picoseconds) that every variant walks
//! cyclically, so the timed loop draws no random numbers and all variants see the same
//! increments. Prefill (and a further untimed warm pass of `2 n` holds, to get past the
//! hold model's initial transient) happens once per benchmark, outside the timed section;
//! the state then persists across criterion's samples (hold keeps the size at `n`) and is
//! rebuilt, untimed, only if its clock nears the end of the `u64` picosecond range.

#![allow(
    missing_docs,
    reason = "criterion_group! generates undocumented functions"
)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::rc::Rc;
use std::time::Duration as WallDuration;

use atmlab_core::time::Instant;
use atmlab_sim::event_set::{EventSet, LaneId};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Set sizes.
const SIZES: [usize; 5] = [100, 1_000, 10_000, 100_000, 1_000_000];
/// Picoseconds per second.
const PS_PER_S: f64 = 1e12;
/// Length of the precomputed increment table (a power of two).
const INC_LEN: usize = 1 << 16;
/// Rebuild a state whose clock passed this (10^6 s; `u64` picoseconds end near 1.8e7 s).
const CLOCK_LIMIT: u64 = 1_000_000 * 1_000_000_000_000;
/// One cell slot at 155.52 Mb/s: 424 bits / 155.52e6 b/s, in picoseconds.
const CELL_SLOT_PS: u64 = 2_726_337;

const SEED_INCREMENTS: u64 = 0x1986_0001;
const SEED_PREFILL: u64 = 0x1986_0002;
const SEED_PHASES: u64 = 0x1986_0003;

/// Exp(mean 1 s) increments in picoseconds, precomputed once.
fn increments() -> Rc<[u64]> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED_INCREMENTS);
    (0..INC_LEN)
        .map(|_| exp_picos(&mut rng))
        .collect::<Vec<_>>()
        .into()
}

fn exp_picos(rng: &mut Xoshiro256PlusPlus) -> u64 {
    let x: f64 = rng.sample(Exp1);
    (x * PS_PER_S) as u64
}

/// Exp(mean 1 s) prefill times in picoseconds (the same for every variant of a size).
fn prefill_times(n: usize) -> Vec<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED_PREFILL);
    (0..n).map(|_| exp_picos(&mut rng)).collect()
}

/// Per-lane phases in `[0, CELL_SLOT_PS)` for the FIFO pattern.
fn phases(lanes: usize) -> Vec<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED_PHASES);
    (0..lanes)
        .map(|_| rng.random_range(0..CELL_SLOT_PS))
        .collect()
}

/// A hold-model state kept at a constant size.
trait Hold {
    /// Performs `k` hold operations.
    fn hold(&mut self, k: u64);
    /// The time of the last popped event, in picoseconds.
    fn clock(&self) -> u64;
}

// ---------------------------------------------------------------------------------------
// hold_exp

struct EventSetExp {
    set: EventSet<u64>,
    inc: Rc<[u64]>,
    idx: usize,
    clock: u64,
}

impl EventSetExp {
    fn new(n: usize, inc: Rc<[u64]>) -> Self {
        let mut set = EventSet::new();
        for (i, t) in prefill_times(n).into_iter().enumerate() {
            set.schedule(Instant::from_picos(t), i as u64);
        }
        let mut s = EventSetExp {
            set,
            inc,
            idx: 0,
            clock: 0,
        };
        s.hold(2 * n as u64);
        assert_eq!(s.set.len(), n);
        s
    }
}

impl Hold for EventSetExp {
    fn hold(&mut self, k: u64) {
        for _ in 0..k {
            let Some((t, e)) = self.set.pop() else {
                unreachable!("hold keeps the set at size n")
            };
            let next = t.as_picos() + self.inc[self.idx];
            self.idx = (self.idx + 1) & (INC_LEN - 1);
            self.set.schedule(Instant::from_picos(next), e);
            self.clock = t.as_picos();
        }
    }
    fn clock(&self) -> u64 {
        self.clock
    }
}

struct HeapExp {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    seq: u64,
    inc: Rc<[u64]>,
    idx: usize,
    clock: u64,
}

impl HeapExp {
    fn new(n: usize, inc: Rc<[u64]>) -> Self {
        let times = prefill_times(n);
        let mut heap = BinaryHeap::with_capacity(n);
        for (i, t) in times.into_iter().enumerate() {
            heap.push(Reverse((t, i as u64)));
        }
        let mut s = HeapExp {
            heap,
            seq: n as u64,
            inc,
            idx: 0,
            clock: 0,
        };
        s.hold(2 * n as u64);
        assert_eq!(s.heap.len(), n);
        s
    }
}

impl Hold for HeapExp {
    fn hold(&mut self, k: u64) {
        for _ in 0..k {
            let Some(Reverse((t, _))) = self.heap.pop() else {
                unreachable!("hold keeps the heap at size n")
            };
            let next = t + self.inc[self.idx];
            self.idx = (self.idx + 1) & (INC_LEN - 1);
            self.heap.push(Reverse((next, self.seq)));
            self.seq += 1;
            self.clock = t;
        }
    }
    fn clock(&self) -> u64 {
        self.clock
    }
}

// ---------------------------------------------------------------------------------------
// hold_fifo: n / d links, d cells in flight on each, deterministic spacing.

/// The (time, lane index) of every prefilled cell, in lane-major, time-increasing order.
fn fifo_prefill(n: usize, depth: usize) -> impl Iterator<Item = (u64, usize)> {
    let lanes = n / depth;
    phases(lanes)
        .into_iter()
        .enumerate()
        .flat_map(move |(l, phase)| (0..depth as u64).map(move |k| (phase + k * CELL_SLOT_PS, l)))
}

struct LanesFifo {
    set: EventSet<LaneId>,
    step: u64,
    clock: u64,
}

impl LanesFifo {
    fn new(n: usize, depth: usize) -> Self {
        let mut set = EventSet::new();
        let lanes: Vec<LaneId> = (0..n / depth).map(|_| set.new_lane()).collect();
        for (t, l) in fifo_prefill(n, depth) {
            set.schedule_in_lane(lanes[l], Instant::from_picos(t), lanes[l])
                .expect("prefill is in time order within each lane");
        }
        let mut s = LanesFifo {
            set,
            step: depth as u64 * CELL_SLOT_PS,
            clock: 0,
        };
        s.hold(2 * n as u64);
        assert_eq!(s.set.len(), n);
        s
    }
}

impl Hold for LanesFifo {
    fn hold(&mut self, k: u64) {
        for _ in 0..k {
            let Some((t, lane)) = self.set.pop() else {
                unreachable!("hold keeps the set at size n")
            };
            let next = Instant::from_picos(t.as_picos() + self.step);
            self.set
                .schedule_in_lane(lane, next, lane)
                .expect("a lane's next cell is later than its last");
            self.clock = t.as_picos();
        }
    }
    fn clock(&self) -> u64 {
        self.clock
    }
}

struct EventSetFifo {
    set: EventSet<u32>,
    step: u64,
    clock: u64,
}

impl EventSetFifo {
    fn new(n: usize, depth: usize) -> Self {
        let mut set = EventSet::new();
        for (t, l) in fifo_prefill(n, depth) {
            set.schedule(Instant::from_picos(t), l as u32);
        }
        let mut s = EventSetFifo {
            set,
            step: depth as u64 * CELL_SLOT_PS,
            clock: 0,
        };
        s.hold(2 * n as u64);
        assert_eq!(s.set.len(), n);
        s
    }
}

impl Hold for EventSetFifo {
    fn hold(&mut self, k: u64) {
        for _ in 0..k {
            let Some((t, lane)) = self.set.pop() else {
                unreachable!("hold keeps the set at size n")
            };
            self.set
                .schedule(Instant::from_picos(t.as_picos() + self.step), lane);
            self.clock = t.as_picos();
        }
    }
    fn clock(&self) -> u64 {
        self.clock
    }
}

struct HeapFifo {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    seq: u64,
    step: u64,
    clock: u64,
}

impl HeapFifo {
    fn new(n: usize, depth: usize) -> Self {
        let mut heap = BinaryHeap::with_capacity(n);
        let mut seq = 0;
        for (t, _) in fifo_prefill(n, depth) {
            heap.push(Reverse((t, seq)));
            seq += 1;
        }
        let mut s = HeapFifo {
            heap,
            seq,
            step: depth as u64 * CELL_SLOT_PS,
            clock: 0,
        };
        s.hold(2 * n as u64);
        assert_eq!(s.heap.len(), n);
        s
    }
}

impl Hold for HeapFifo {
    fn hold(&mut self, k: u64) {
        for _ in 0..k {
            let Some(Reverse((t, _))) = self.heap.pop() else {
                unreachable!("hold keeps the heap at size n")
            };
            self.heap.push(Reverse((t + self.step, self.seq)));
            self.seq += 1;
            self.clock = t;
        }
    }
    fn clock(&self) -> u64 {
        self.clock
    }
}

// ---------------------------------------------------------------------------------------
// Driver

/// Benchmarks `k` holds per iteration on a state built once (untimed) by `make`.
fn bench_hold<S: Hold>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    n: usize,
    make: impl Fn() -> S,
) {
    // Built here, not in the first `iter_custom` call: criterion's warm-up times the whole
    // call, so a slow build there would make it size the samples far too small.
    let mut state: Option<S> = Some(make());
    group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
        b.iter_custom(|iters| {
            if state.as_ref().is_none_or(|s| s.clock() > CLOCK_LIMIT) {
                state = None; // free the old state before building the new one
                state = Some(make());
            }
            let s = state.as_mut().expect("built above");
            let start = std::time::Instant::now();
            s.hold(iters);
            let elapsed = start.elapsed();
            black_box(s.clock());
            elapsed
        });
    });
}

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group.throughput(Throughput::Elements(1));
    // Defaults for a plain `cargo bench`; the command line overrides them.
    group.warm_up_time(WallDuration::from_secs(1));
    group.measurement_time(WallDuration::from_secs(3));
}

fn hold_exp(c: &mut Criterion) {
    let inc = increments();
    let mut group = c.benchmark_group("hold_exp");
    configure(&mut group);
    for n in SIZES {
        bench_hold(&mut group, "event_set", n, || {
            EventSetExp::new(n, inc.clone())
        });
        bench_hold(&mut group, "binary_heap", n, || {
            HeapExp::new(n, inc.clone())
        });
    }
    group.finish();
}

fn hold_fifo(c: &mut Criterion) {
    for depth in [1, 10] {
        let mut group = c.benchmark_group(format!("hold_fifo_d{depth}"));
        configure(&mut group);
        for n in SIZES {
            bench_hold(&mut group, "event_set_lanes", n, || {
                LanesFifo::new(n, depth)
            });
            bench_hold(&mut group, "event_set_heap", n, || {
                EventSetFifo::new(n, depth)
            });
            bench_hold(&mut group, "binary_heap", n, || HeapFifo::new(n, depth));
        }
        group.finish();
    }
}

criterion_group!(benches, hold_exp, hold_fifo);
criterion_main!(benches);
