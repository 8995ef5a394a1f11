//! The parallel server's aggregate rate against workers (paper 002 §4, Figs. 5-6), the
//! measurement `atmlab reproduce smds` makes, alone and alternated so a noisy machine
//! shows as spread rather than as a trend; beside it, the machine's own scaling
//! ([`atmlab_smds::parallel::reference`]: register-only arithmetic, nothing shared), the
//! best any server could do on these cores:
//!
//! ```sh
//! cargo run --release -p atmlab-smds --example parallel -- [ROUNDS] [INFO_OCTETS]
//! ```

use std::time::Duration;

use atmlab_smds::parallel::{measure, reference};

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let info: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut best = vec![0.0f64; cores];
    let mut best_ref = vec![0.0f64; cores];
    let mut per_cpu = vec![0.0f64; cores];
    let mut per_cpu_ref = vec![0.0f64; cores];
    for r in 0..rounds {
        for n in 1..=cores {
            let p = measure(n, info, Duration::from_millis(500));
            best[n - 1] = best[n - 1].max(p.pdus_per_s());
            per_cpu[n - 1] = per_cpu[n - 1].max(p.pdus_per_cpu_s());
            println!(
                "round {r}: {n} worker(s): {:.0} PDUs/s, {:.2} cores obtained, {:.0} PDUs per CPU-s",
                p.pdus_per_s(),
                p.cores_used(),
                p.pdus_per_cpu_s()
            );
            let q = reference(n, Duration::from_millis(500));
            best_ref[n - 1] = best_ref[n - 1].max(q.pdus_per_s());
            per_cpu_ref[n - 1] = per_cpu_ref[n - 1].max(q.pdus_per_cpu_s());
            println!(
                "round {r}: {n} reference thread(s): {:.0} steps/s, {:.2} cores obtained, {:.0} steps per CPU-s",
                q.pdus_per_s(),
                q.cores_used(),
                q.pdus_per_cpu_s()
            );
        }
    }
    for i in 0..cores {
        println!(
            "best, {} worker(s): {:.0} PDUs/s, speed-up {:.2}, per CPU-s {:.2} of one worker's; reference: speed-up {:.2}, per CPU-s {:.2}",
            i + 1,
            best[i],
            best[i] / best[0],
            per_cpu[i] / per_cpu[0],
            best_ref[i] / best_ref[0],
            per_cpu_ref[i] / per_cpu_ref[0]
        );
    }
    if cores > 1 {
        let k = (cores - 1) as f64;
        let s = (best[cores - 1] / best[0] - 1.0) / k;
        let s_ref = (best_ref[cores - 1] / best_ref[0] - 1.0) / k;
        println!(
            "slope per added worker up to {cores} cores: {s:.2} (the machine's own, by the reference: {s_ref:.2})"
        );
    }
}
