//! The M/M/1 benchmark of `bench/mm1/mm1.toml` without the CLI: for quick A/B runs of the
//! engine (`cargo run --release -p atmlab-models --example mm1_bench -- [CUSTOMERS] [RUNS]`).
//! The figure of record is `atmlab sim run bench/mm1/mm1.toml --threads 1`.

use atmlab_core::time::Duration;
use atmlab_models::queue::{ArrivalSpec, QueueConfig, Service, run_station};
use atmlab_sim::model::Replication;
use atmlab_sim::scenario::{RunLength, Warmup};

fn main() {
    let mut args = std::env::args().skip(1);
    let customers: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let runs: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let cfg = QueueConfig {
        arrival: ArrivalSpec::Poisson { rate: 0.9 },
        service: Service::Exponential(Duration::from_secs(1)),
        capacity: None,
    };
    let rep = Replication {
        seed: 1,
        replication: 0,
        length: RunLength::Count(customers),
        warmup: Warmup::Time(Duration::ZERO),
        batches: 1,
    };
    for _ in 0..runs {
        let t = std::time::Instant::now();
        let (r, _) = run_station(&cfg, &rep, false).expect("runs");
        let wall = t.elapsed().as_secs_f64();
        let mw = r.metrics[0].1;
        let p99 = r.metrics[6].1;
        println!(
            "{:.2} M events/s  ({} events, {:.4} s)  mean_wait {mw:.9} p99 {p99:.6}",
            r.events as f64 / wall / 1e6,
            r.events,
            wall
        );
    }
}
