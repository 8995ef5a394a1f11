//! What the call generator itself costs per call (the twin check's `client_work`,
//! `atmlab_lab::twin::generator`): calls offered to a target that sets up and releases at
//! once, at several rates, paced precisely (an OS thread sleeping to each arrival, as the
//! twin check and the xbind reproduction pace) and by the runtime's timer (arrivals due
//! within 0.5 ms go at once); the process's CPU and the threads' parks per call.
//!
//! `cargo run --release -p atmlab-lab --example callgen_cost`

use std::time::Duration;

use atmlab_lab::callgen::Load;
use atmlab_lab::twin::generator;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), atmlab_lab::LabError> {
    println!("calls/s  pacing   us of CPU a call  parks a call");
    for rate in [2_000.0, 10_000.0, 20_000.0, 40_000.0] {
        for precise in [true, false] {
            let load = Load {
                holding: Duration::from_millis(50),
                precise,
                ..Load::poisson(rate, Duration::from_secs(2), "a", "b")
            };
            let g = generator::measure(&load).await?;
            let pacing = if precise { "precise" } else { "timer" };
            println!(
                "{rate:>7}  {pacing:<7}  {:>16.1}  {:>12.2}",
                g.cpu_us, g.parks
            );
        }
    }
    Ok(())
}
