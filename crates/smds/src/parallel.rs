//! The parallel SMDS server (paper 002 §5, Figs. 4-6): one logical server whose work is
//! spread over N worker threads.
//!
//! **The choice.** The paper ran N copies of the sequential server, each a server of its
//! own with its own id in the routing protocol (SPMD, Fig. 4), and named the cost in its
//! conclusion: N times the servers in every link-state database, route computation
//! growing faster than N (it is one Dijkstra per server, O(n log n) over n servers,
//! toward the 100 ms bound), and traffic between nodes of one parallel server crossing
//! ISSIs like any other hop. Its future work was "an unique ID for all nodes, and
//! possibly the sharing of the routing tables". atmlab takes that second design: one
//! [`crate::server::Control`] runs the routing protocol and the CMP under one id and
//! builds an immutable [`Fib`]; the N workers share it through an `Arc` (no lock on the
//! per-PDU path: a new `Fib` is swapped in whole), and any worker can send on any
//! interface. Nothing the rest of the network sees changes with N. In the live shell
//! ([`crate::live`]) the workers are the tokio runtime's threads (`atmlab smds serve
//! --workers N`) and each interface's forwarder task runs on whichever is free.
//!
//! [`measure`] is the switching-capacity measurement of §5.2 in memory: N threads, each
//! a [`Forwarder`] over the shared `Fib`, switch predefined Data frames ISSI to ISSI and
//! copy every PDU out (the data movement a send costs), for a fixed time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::fib::{Fib, Forwarder};
use crate::workload::{Path, Workload};

/// One measurement of the parallel server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParallelPoint {
    /// Worker threads.
    pub workers: usize,
    /// PDUs switched in all.
    pub pdus: u64,
    /// Octets of L3_PDU switched.
    pub octets: u64,
    /// Measured wall time, s.
    pub seconds: f64,
    /// CPU time the workers got, s, summed (Linux's per-thread schedstat; NaN where it
    /// cannot be read). Divided by `seconds` it says how many cores they really had.
    pub cpu_seconds: f64,
}

impl ParallelPoint {
    /// PDUs switched per second.
    pub fn pdus_per_s(&self) -> f64 {
        self.pdus as f64 / self.seconds.max(1e-9)
    }

    /// PDUs switched per second of CPU the workers got: flat against N if the work
    /// scales with the cores given, whatever else competes for them.
    pub fn pdus_per_cpu_s(&self) -> f64 {
        self.pdus as f64 / self.cpu_seconds
    }

    /// Cores the workers had on average over the run.
    pub fn cores_used(&self) -> f64 {
        self.cpu_seconds / self.seconds.max(1e-9)
    }

    /// User data switched, Mb/s (L3_PDU octets).
    pub fn mbps(&self) -> f64 {
        self.octets as f64 * 8.0 / self.seconds.max(1e-9) / 1e6
    }
}

/// Switches ISSI to ISSI with `workers` threads sharing one [`Fib`] for `run`, PDUs of
/// `info` octets of Info, each copied out as it would be sent.
pub fn measure(workers: usize, info: usize, run: Duration) -> ParallelPoint {
    let wl = Workload::new(1, 8);
    let frames = Arc::new(wl.frames(Path::IssiToIssi, info, 64));
    let fib: Arc<Fib> = Arc::clone(&wl.fib);
    spread(workers, run, move |w| {
        // Made on the worker's own thread: its Forwarder, counters and output buffer
        // are its own allocations, not neighbours of another worker's.
        let frames = Arc::clone(&frames);
        let mut fwd = Forwarder::new(Arc::clone(&fib));
        let mut out = Vec::with_capacity(16_384);
        let mut i = w * 7;
        move |pdus: &mut u64, octets: &mut u64| {
            for _ in 0..64 {
                let (iface, f) = &frames[i % frames.len()];
                i += 1;
                fwd.handle_datagram(*iface, f);
                while let Some(t) = fwd.poll_transmit() {
                    t.write_into(f, &mut out);
                    *octets += (out.len() - crate::msg::ENVELOPE_LEN) as u64;
                    *pdus += 1;
                }
            }
            std::hint::black_box(&out);
        }
    })
}

/// The machine's own scaling, for comparison with [`measure`]: `workers` threads each
/// running a loop of register-only arithmetic (xorshift steps, counted as `pdus`; no
/// memory, nothing shared) for `run`. Whatever one more thread loses per CPU-second
/// here, the machine takes (a lower clock with more cores busy, a hypervisor's
/// placement of the vCPUs), not the code, and no server on it can scale better.
pub fn reference(workers: usize, run: Duration) -> ParallelPoint {
    spread(workers, run, |w| {
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
        move |steps: &mut u64, _: &mut u64| {
            for _ in 0..4096 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            std::hint::black_box(x);
            *steps += 4096;
        }
    })
}

/// Runs `workers` threads for `run`, each calling its batch (made by `make` on the
/// thread itself) until told to stop, and adds up what they counted and the CPU time
/// each got.
fn spread<F, B>(workers: usize, run: Duration, make: F) -> ParallelPoint
where
    F: Fn(usize) -> B + Send + Sync + 'static,
    B: FnMut(&mut u64, &mut u64),
{
    let make = Arc::new(make);
    let stop = Arc::new(AtomicBool::new(false));
    let workers = workers.max(1);
    let start = Arc::new(Barrier::new(workers + 1));
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (make, stop, start) = (Arc::clone(&make), Arc::clone(&stop), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut batch = make(w);
                let (mut pdus, mut octets) = (0u64, 0u64);
                start.wait();
                let cpu0 = thread_cpu_ns();
                while !stop.load(Ordering::Relaxed) {
                    batch(&mut pdus, &mut octets);
                }
                let cpu = match (cpu0, thread_cpu_ns()) {
                    (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9,
                    _ => f64::NAN,
                };
                (pdus, octets, cpu)
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    let mut p = ParallelPoint {
        workers,
        pdus: 0,
        octets: 0,
        seconds: 0.0,
        cpu_seconds: 0.0,
    };
    for h in handles {
        let (n, o, c) = h.join().unwrap_or((0, 0, f64::NAN));
        p.pdus += n;
        p.octets += o;
        p.cpu_seconds += c;
    }
    p.seconds = t0.elapsed().as_secs_f64();
    p
}

/// The calling thread's CPU time, ns: the first field of Linux's
/// `/proc/thread-self/schedstat` (time spent running). `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Least-squares slope of `y` against `x`.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return f64::NAN;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_switches_and_the_counts_add_up() {
        let p = measure(2, 100, Duration::from_millis(30));
        assert!(p.pdus > 0);
        assert_eq!(p.octets, p.pdus * 140);
        assert!((slope(&[(1.0, 1.0), (2.0, 3.0)]) - 2.0).abs() < 1e-12);
        let r = reference(2, Duration::from_millis(30));
        assert!(r.pdus > 0 && r.pdus.is_multiple_of(4096) && r.octets == 0);
    }
}
