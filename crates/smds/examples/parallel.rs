//! The parallel server's aggregate rate against workers (paper 002 §4, Figs. 5-6), the
//! measurement `atmlab reproduce smds` makes, alone and alternated so a noisy machine
//! shows as spread rather than as a trend:
//!
//! ```sh
//! cargo run --release -p atmlab-smds --example parallel -- [ROUNDS] [INFO_OCTETS]
//! ```

use std::time::Duration;

use atmlab_smds::parallel::measure;

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let info: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut best = vec![0.0f64; cores];
    for r in 0..rounds {
        for n in 1..=cores {
            let p = measure(n, info, Duration::from_millis(500));
            best[n - 1] = best[n - 1].max(p.pdus_per_s());
            println!(
                "round {r}: {n} worker(s): {:.0} PDUs/s, {:.2} cores obtained, {:.0} PDUs per CPU-s",
                p.pdus_per_s(),
                p.cores_used(),
                p.pdus_per_cpu_s()
            );
        }
    }
    for (i, b) in best.iter().enumerate() {
        println!(
            "best, {} worker(s): {b:.0} PDUs/s, speed-up {:.2}",
            i + 1,
            b / best[0]
        );
    }
    if cores > 1 {
        println!(
            "slope per added worker up to {cores} cores: {:.2}",
            (best[cores - 1] / best[0] - 1.0) / (cores - 1) as f64
        );
    }
}
