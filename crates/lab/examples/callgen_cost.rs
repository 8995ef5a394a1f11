//! What the call generator itself costs per call: calls placed with a target that sets
//! up and releases at once, at several rates, paced precisely (an OS thread sleeping to
//! each arrival) and by the runtime's timer; the process's CPU and the threads' parks
//! per call offered.
//!
//! `cargo run --release -p atmlab-lab --example callgen_cost`

use std::time::Duration;

use atmlab_control::cm::core::CallError;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_lab::callgen::{self, CallTarget, Load};

#[derive(Clone, Default)]
struct Null;

impl CallTarget for Null {
    async fn setup(&self, _: &str, _: &str, _: TrafficDescriptor) -> Result<u64, CallError> {
        Ok(1)
    }
    async fn release(&self, _: u64) -> Result<(), CallError> {
        Ok(())
    }
}

fn cpu() -> f64 {
    let t = std::fs::read_to_string("/proc/self/stat").unwrap();
    let a = &t[t.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = a.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

fn parks() -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let s = std::fs::read_to_string(e.unwrap().path().join("status")).unwrap_or_default();
        n += s
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map(|v| v.trim().parse::<u64>().unwrap())
            .unwrap_or(0);
    }
    n
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    for rate in [2_000.0, 10_000.0, 20_000.0, 40_000.0] {
        for precise in [true, false] {
            let load = Load {
                holding: Duration::from_millis(50),
                precise,
                ..Load::poisson(rate, Duration::from_secs(2), "a", "b")
            };
            let (c0, p0) = (cpu(), parks());
            let r = callgen::run(Null, &load).await;
            let (c, p) = (cpu() - c0, parks().saturating_sub(p0));
            let n = r.offered.max(1) as f64;
            println!(
                "rate {rate:>6} precise {precise:>5}: {} calls, {:.1} us CPU a call, {:.2} parks a call",
                r.offered,
                c / n * 1e6,
                p as f64 / n
            );
        }
    }
}
