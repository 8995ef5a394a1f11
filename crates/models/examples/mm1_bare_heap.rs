//! The reference the engine is measured against: the M/M/1 queue of `bench/mm1/mm1.toml`
//! (lambda 0.9, mu 1, 10^6 customers) hand-written on a bare `std::collections::BinaryHeap`,
//! with no engine at all. Issue 3 asks the engine to run as fast as "a bare binary heap
//! in Rust"; this program measures that reference on the machine at hand, so that
//! `bench/mm1/run.sh` can print both side by side (the machines here drift within
//! minutes, and only figures from one run compare; docs/performance.md has them).
//!
//! What it does per event is the least any M/M/1 simulation must: pop the earliest
//! (time, sequence) key, draw one exponential (`rand_distr::Exp1` on xoshiro256++, the
//! engine's generator), push one key, and sum the waits. What it leaves out, the engine
//! does: FIFO tie-breaking lanes, components and ports, the message dispatch, the order
//! and causality checks, and the statistics the `queue` model reports (system time,
//! queue length, utilisation, loss, the wait histogram for its quantiles).
//!
//! Two ways of writing the key, both plain Rust:
//! - `tuple`: `Reverse<(time, seq, kind)>`, the obvious one. Its derived comparison is
//!   lexicographic, a chain of branches, and one of them is a coin toss in this queue;
//! - `packed`: `Reverse<u128>` with the time in the high half and `seq << 1 | kind` in the
//!   low, one compare-and-borrow without a branch. It beats `tuple` and is the stronger
//!   reference; the engine's own heap compares its keys the same way.
//!
//! The packed key runs a third time keeping the `queue` model's statistics with the same
//! types (`StationStats`): the same work per customer as the engine's model, so the
//! engine's ratio to that run is what the engine itself costs.
//!
//! `cargo run --release -p atmlab-models --example mm1_bare_heap -- [CUSTOMERS] [RUNS] [SEED]
//! [--json]`: each run times the three; with `--json`, one JSON line per variant and run
//! (`engine`, `events`, `wall_seconds`, `events_per_second`, `mean_wait`), as
//! `bench/mm1/run.sh` reads them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::rng::SimRng;
use atmlab_sim::stats::{DurationMean, Histogram, Ratio, TimeWeightedCount};
use rand::{Rng, SeedableRng};
use rand_distr::Exp1;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Arrival = 0,
    Departure = 1,
}

/// A heap key: earliest time first, then earliest sequence number.
trait EventKey: Ord {
    const NAME: &'static str;
    fn new(time: u64, seq: u64, kind: Kind) -> Self;
    fn time(&self) -> u64;
    fn kind(&self) -> Kind;
}

/// The obvious key: a reversed tuple.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Tuple(Reverse<(u64, u64, Kind)>);

/// The packed key: a reversed `u128`.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Packed(Reverse<u128>);

impl EventKey for Tuple {
    const NAME: &'static str = "bare BinaryHeap, tuple key";
    #[inline]
    fn new(time: u64, seq: u64, kind: Kind) -> Self {
        Tuple(Reverse((time, seq, kind)))
    }
    #[inline]
    fn time(&self) -> u64 {
        self.0.0.0
    }
    #[inline]
    fn kind(&self) -> Kind {
        self.0.0.2
    }
}

impl EventKey for Packed {
    const NAME: &'static str = "bare BinaryHeap, packed u128 key";
    #[inline]
    fn new(time: u64, seq: u64, kind: Kind) -> Self {
        Packed(Reverse(
            u128::from(time) << 64 | u128::from(seq << 1 | kind as u64),
        ))
    }
    #[inline]
    fn time(&self) -> u64 {
        (self.0.0 >> 64) as u64
    }
    #[inline]
    fn kind(&self) -> Kind {
        if self.0.0 & 1 == 0 {
            Kind::Arrival
        } else {
            Kind::Departure
        }
    }
}

/// Picoseconds per second: times are integers, as in the engine.
const PS: f64 = 1e12;

/// An exponential delay of mean `mean` picoseconds.
#[inline]
fn exp(rng: &mut SimRng, mean: f64) -> u64 {
    let x: f64 = rng.sample(Exp1);
    (x * mean) as u64
}

/// The statistics the `queue` model keeps per customer, kept here by the same types when
/// asked: the loss ratio per arrival, the wait's exact mean and histogram (for `wait_p50`
/// and `wait_p99`) when service starts, the system time's mean per departure, and the
/// server's busy time (utilisation). The queue length's mean needs nothing per customer
/// (the model derives it from the waits' sum).
struct StationStats {
    loss: Ratio,
    wait: DurationMean,
    wait_hist: Histogram,
    system: DurationMean,
    busy: TimeWeightedCount,
}

/// One run of `customers` departures; returns (events, mean wait in seconds). With
/// `STATS`, it keeps the `queue` model's statistics too (see [`StationStats`]): the same
/// work per customer as the engine's model, without the engine.
fn run<K: EventKey, const STATS: bool>(customers: u64, seed: u64) -> (u64, f64) {
    let mut rng_a = SimRng::seed_from_u64(seed);
    let mut rng_s = SimRng::seed_from_u64(seed ^ 0x5eed);
    let (mean_gap, mean_service) = (PS / 0.9, PS / 1.0);
    let mut heap: BinaryHeap<K> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut busy = false;
    let (mut events, mut departed, mut wait_sum, mut served) = (0u64, 0u64, 0u128, 0u64);
    let mut st = StationStats {
        loss: Ratio::new(),
        wait: DurationMean::new(),
        wait_hist: Histogram::new(),
        system: DurationMean::new(),
        busy: TimeWeightedCount::new(Instant::ZERO, 0),
    };
    // The arrival instant of the customer in service (the engine's model carries it in
    // the departure's message).
    let mut in_service = 0u64;
    let start = |st: &mut StationStats, t: u64, arrived: u64| {
        if STATS {
            let w = Duration::from_picos(t - arrived);
            st.wait.record(w);
            st.wait_hist.record_duration(w);
        }
    };
    heap.push(K::new(exp(&mut rng_a, mean_gap), seq, Kind::Arrival));
    // The instant of the last event: the end of the run, where the statistics are read.
    let mut now = 0u64;
    while let Some(k) = heap.pop() {
        let t = k.time();
        now = t;
        events += 1;
        match k.kind() {
            Kind::Arrival => {
                if STATS {
                    st.loss.record(false);
                }
                if busy {
                    waiting.push_back(t);
                } else {
                    busy = true;
                    if STATS {
                        st.busy.set(Instant::from_picos(t), 1);
                    }
                    start(&mut st, t, t);
                    in_service = t;
                    served += 1;
                    seq += 1;
                    let d = t + exp(&mut rng_s, mean_service);
                    heap.push(K::new(d, seq, Kind::Departure));
                }
                seq += 1;
                heap.push(K::new(t + exp(&mut rng_a, mean_gap), seq, Kind::Arrival));
            }
            Kind::Departure => {
                if STATS {
                    st.system.record(Duration::from_picos(t - in_service));
                }
                departed += 1;
                if departed == customers {
                    break;
                }
                if let Some(arrived) = waiting.pop_front() {
                    wait_sum += u128::from(t - arrived);
                    start(&mut st, t, arrived);
                    in_service = arrived;
                    served += 1;
                    seq += 1;
                    let d = t + exp(&mut rng_s, mean_service);
                    heap.push(K::new(d, seq, Kind::Departure));
                } else {
                    busy = false;
                    if STATS {
                        st.busy.set(Instant::from_picos(t), 0);
                    }
                }
            }
        }
    }
    if STATS {
        // Read the statistics back, as the model's metrics do, so that none is optimised
        // away; the mean wait reported is the kept one.
        let now = Instant::from_picos(now);
        std::hint::black_box((
            st.loss.value(),
            st.wait_hist.quantile(0.5),
            st.wait_hist.quantile(0.99),
            st.system.mean_secs(),
            st.busy.mean(now),
        ));
        return (events, st.wait.mean_secs());
    }
    (events, wait_sum as f64 / PS / served.max(1) as f64)
}

/// Times one run with key `K` (and with the model's statistics if `STATS`) and prints it.
fn report<K: EventKey, const STATS: bool>(customers: u64, seed: u64, json: bool) {
    let t = std::time::Instant::now();
    let (events, mean_wait) = run::<K, STATS>(customers, seed);
    let name = if STATS {
        format!("{}, the model's statistics", K::NAME)
    } else {
        K::NAME.to_owned()
    };
    let wall = t.elapsed().as_secs_f64();
    let eps = events as f64 / wall;
    if json {
        println!(
            "{{\"engine\": \"{name}\", \"events\": {events}, \"wall_seconds\": {wall}, \"events_per_second\": {eps}, \"mean_wait\": {mean_wait}}}"
        );
    } else {
        println!(
            "{:.2} M events/s  ({events} events, {wall:.4} s)  mean_wait {mean_wait:.6}  [{name}]",
            eps / 1e6,
        );
    }
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let mut args = std::env::args().skip(1).filter(|a| a != "--json");
    let customers: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let runs: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    for _ in 0..runs {
        report::<Tuple, false>(customers, seed, json);
        report::<Packed, false>(customers, seed, json);
        report::<Packed, true>(customers, seed, json);
    }
}
