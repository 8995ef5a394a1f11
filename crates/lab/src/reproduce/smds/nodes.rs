//! Paper 002 §5.2-§5.3 (Figs. 5 and 6) as the paper ran them: a "parallel" SMDS server
//! of N nodes is N independent sequential servers (§5.1, SPMD: "each node ... is actually
//! the sequential SMDS server ... only configuration files have to be modified"), each an
//! operating-system process of its own (`atmlab smds serve`, one worker thread) with its
//! own UDP sockets, and the load is spread over them.
//!
//! What differs from the paper, and why: the paper's nodes switched ISSI to ISSI between
//! eight traffic servers, each on a Paragon node of its own. Here each node carries the
//! same per-node workload between two subscribers on two SNIs of its own (one receive
//! and one send per PDU, as a switched PDU costs; no routing between nodes, since no PDU
//! crosses from one node to another), and the traffic sources and sinks run in this
//! process on the same cores as the servers. The machine decides how many nodes can have
//! a core; the report says how many it had and gives each server's CPU time, so that a
//! node's rate per CPU-second can be told from the share of the cores it got.
//!
//! Two ways to load the nodes: **windowed** (Fig. 6's "optimal conditions", as Fig. 3:
//! each source at most ten PDUs ahead of its sink, so the rate fits the server) and
//! **paced** (Fig. 5's traffic densities: a fixed total rate split evenly over the
//! nodes, open loop, so an overloaded node discards as the SMDS policy says).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use atmlab_smds::live::Subscriber;
use atmlab_smds::msg::l3_pdu;

use crate::LabError;

/// Each node's input queue per interface, in PDUs: the paper's "buffer size (for
/// reception on ISSI links) of 10 PDUs" (§4.2).
pub const QUEUE: usize = 10;

/// The windowed sources' lead over their sinks, in PDUs (as Fig. 3).
pub const WINDOW: u64 = 10;

/// One measurement of N nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeRun {
    /// Nodes (server processes).
    pub nodes: usize,
    /// Info octets per PDU.
    pub info: usize,
    /// The total rate asked of the paced sources, PDUs/s (None: windowed).
    pub asked: Option<f64>,
    /// PDUs the sources sent in the measured interval.
    pub sent: u64,
    /// PDUs the sinks received in it.
    pub delivered: u64,
    /// The measured interval, s.
    pub seconds: f64,
    /// CPU time the server processes got in it, s, summed (NaN where /proc is absent).
    pub server_cpu_seconds: f64,
}

impl NodeRun {
    /// PDUs delivered per second, all nodes.
    pub fn pdus_per_s(&self) -> f64 {
        self.delivered as f64 / self.seconds.max(1e-9)
    }

    /// User data (Info) delivered, Mb/s, all nodes.
    pub fn mbps(&self) -> f64 {
        self.pdus_per_s() * self.info as f64 * 8.0 / 1e6
    }

    /// PDUs offered per second, all nodes.
    pub fn offered_per_s(&self) -> f64 {
        self.sent as f64 / self.seconds.max(1e-9)
    }

    /// The share of the PDUs sent that did not arrive (discarded by a node or its
    /// socket).
    pub fn discarded(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            1.0 - (self.delivered as f64 / self.sent as f64).min(1.0)
        }
    }

    /// Cores the servers had, on average, summed.
    pub fn server_cores(&self) -> f64 {
        self.server_cpu_seconds / self.seconds.max(1e-9)
    }
}

/// One server process and its two SNIs.
struct Node {
    child: Child,
    snis: [SocketAddr; 2],
}

impl Drop for Node {
    fn drop(&mut self) {
        // The process is ours (spawned below); end it by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The subscribers' addresses on node `k`.
fn addresses(k: usize) -> [String; 2] {
    [
        format!("I:1555{:02}01", k + 1),
        format!("I:1555{:02}02", k + 1),
    ]
}

/// Starts node `k`: writes its server file into `dir`, runs `exe smds serve` on it and
/// reads the SNIs' addresses from what it prints.
fn spawn(exe: &Path, dir: &Path, k: usize) -> Result<Node, LabError> {
    let [a, b] = addresses(k);
    let cfg = dir.join(format!("node{}.toml", k + 1));
    let text = format!(
        "# Node {n} of the parallel server (written by atmlab reproduce smds).\n\
         id = {n}\nqueue = {QUEUE}\n\n\
         [[interface]]\nkind = \"sni\"\nbind = \"127.0.0.1:0\"\naddresses = [\"{a}\"]\n\n\
         [[interface]]\nkind = \"sni\"\nbind = \"127.0.0.1:0\"\naddresses = [\"{b}\"]\n",
        n = k + 1
    );
    std::fs::write(&cfg, text)
        .map_err(|e| LabError::io(format!("writing {}", cfg.display()), e))?;
    let mut child = Command::new(exe)
        .args(["smds", "serve", "--workers", "1", "--config"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::io(format!("starting {} smds serve", exe.display()), e))?;
    let stdout = child.stdout.take().expect("piped above");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Keep draining after the addresses are read, so the server never blocks on a
        // full pipe.
        for line in BufReader::new(stdout).lines() {
            let Ok(l) = line else { break };
            let _ = tx.send(l);
        }
    });
    let mut node = Node {
        child,
        snis: ["0.0.0.0:0".parse().expect("literal"); 2],
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut found = 0;
    while found < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).map_err(|_| {
            LabError::run(
                "the smds reproduction",
                format!("node {} did not report its interfaces", k + 1),
            )
        })?;
        // "  interface 1 sni udp 127.0.0.1:40123"
        let t = line.trim();
        if t.starts_with("interface ")
            && let Some(addr) = t.rsplit(' ').next().and_then(|s| s.parse().ok())
        {
            node.snis[found] = addr;
            found += 1;
        }
    }
    Ok(node)
}

/// CPU seconds (user + system) of process `pid` so far; NaN where /proc cannot be read.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command's closing parenthesis: state is the first (field 3), so
    // utime (field 14) and stime (field 15) are the 12th and 13th.
    let Some((_, rest)) = text.rsplit_once(')') else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok());
    match (tick(11), tick(12)) {
        // USER_HZ is 100 on every Linux configuration the kernel's ABI allows to vary.
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

/// Runs `nodes` server processes of `exe` (the atmlab binary), loads each with PDUs of
/// `info` octets between its two subscribers (windowed, or paced at `asked` PDUs/s in
/// all), and measures for `run` after a `warm` interval. Server files go to `dir`.
pub fn measure(
    exe: &Path,
    dir: &Path,
    nodes: usize,
    info: usize,
    asked: Option<f64>,
    warm: Duration,
    run: Duration,
) -> Result<NodeRun, LabError> {
    let started: Vec<Node> = (0..nodes)
        .map(|k| spawn(exe, dir, k))
        .collect::<Result<_, _>>()?;
    let pids: Vec<u32> = started.iter().map(|n| n.child.id()).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| LabError::io("starting a runtime", e))?;
    let result = rt.block_on(async {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("literal");
        let mut pairs = Vec::new();
        for (k, n) in started.iter().enumerate() {
            // A paced run sends from a blocking socket of its own (below), which is the
            // sending SNI's one subscriber: an SNI is held by the first address that
            // attaches to it, so no Subscriber attaches there first.
            let tx = match asked {
                None => Some(Subscriber::attach(any, n.snis[0]).await?),
                Some(_) => None,
            };
            let rx = Subscriber::attach(any, n.snis[1]).await?;
            let [a, b] = addresses(k);
            let pdu = l3_pdu(
                a.parse().expect("valid address"),
                b.parse().expect("valid address"),
                &vec![0x5au8; info],
                1,
            )?;
            pairs.push((tx, Arc::new(rx), pdu, n.snis[0]));
        }
        // The servers learn their subscribers from the attach datagrams.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stop = Instant::now() + warm + run;
        let sent: Arc<Vec<AtomicU64>> = Arc::new((0..nodes).map(|_| AtomicU64::new(0)).collect());
        let got: Arc<Vec<AtomicU64>> = Arc::new((0..nodes).map(|_| AtomicU64::new(0)).collect());
        let mut tasks = Vec::new();
        let mut readers = Vec::new();
        for (k, (tx, rx, pdu, sni)) in pairs.into_iter().enumerate() {
            let notify = Arc::new(tokio::sync::Notify::new());
            {
                let (got, notify) = (Arc::clone(&got), Arc::clone(&notify));
                readers.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 65_536];
                    while rx.recv(&mut buf).await.is_ok() {
                        got[k].fetch_add(1, Ordering::Relaxed);
                        notify.notify_one();
                    }
                }));
            }
            let (sent, got) = (Arc::clone(&sent), Arc::clone(&got));
            let per_node = asked.map(|r| r / nodes as f64);
            tasks.push(tokio::spawn(async move {
                match per_node {
                    None => {
                        let tx = tx.expect("attached for a windowed run");
                        let mut lost = 0u64;
                        while Instant::now() < stop {
                            let s = sent[k].load(Ordering::Relaxed);
                            let d = got[k].load(Ordering::Relaxed);
                            if s.saturating_sub(lost).saturating_sub(d) < WINDOW {
                                tx.send(&pdu).await?;
                                sent[k].fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            // Window full: wait for a delivery, or give the outstanding
                            // ones up as lost.
                            if tokio::time::timeout(Duration::from_millis(20), notify.notified())
                                .await
                                .is_err()
                            {
                                let d = got[k].load(Ordering::Relaxed);
                                lost = s.saturating_sub(d);
                            }
                        }
                    }
                    Some(rate) => {
                        // Paced on a thread of its own with a blocking socket: tokio's
                        // timer ticks by the millisecond, and a millisecond's PDUs sent
                        // at once would overflow a 10-PDU queue at light loads.
                        let sock = std::net::UdpSocket::bind("127.0.0.1:0")
                            .map_err(|e| LabError::io("binding a paced source", e))?;
                        sock.connect(sni)
                            .map_err(|e| LabError::io("connecting a paced source", e))?;
                        let sent = Arc::clone(&sent);
                        tokio::task::spawn_blocking(move || {
                            // The attach: it binds the SNI to this source.
                            sock.send(&[])
                                .map_err(|e| LabError::io("attaching a paced source", e))?;
                            std::thread::sleep(Duration::from_millis(50));
                            let t0 = Instant::now();
                            let mut done = 0u64;
                            while Instant::now() < stop {
                                let due = (t0.elapsed().as_secs_f64() * rate) as u64;
                                if done >= due {
                                    std::thread::sleep(Duration::from_micros(20));
                                    continue;
                                }
                                // A source that fell behind (descheduled on a busy
                                // machine) skips what it missed rather than sending it
                                // in a burst no wire would carry; `sent` counts what it
                                // really offered.
                                done = done.max(due.saturating_sub(2));
                                // A full socket buffer is a discard, as on a wire.
                                let _ = sock.send(&pdu);
                                sent[k].fetch_add(1, Ordering::Relaxed);
                                done += 1;
                            }
                            Ok::<(), LabError>(())
                        })
                        .await
                        .map_err(|e| LabError::run("the smds reproduction", e))??;
                        drop(tx);
                    }
                }
                Ok::<(), LabError>(())
            }));
        }
        let total = |v: &[AtomicU64]| v.iter().map(|a| a.load(Ordering::Relaxed)).sum::<u64>();
        let cpu = || pids.iter().map(|&p| cpu_seconds(p)).sum::<f64>();
        tokio::time::sleep(warm).await;
        let (s0, g0, c0, t0) = (total(&sent), total(&got), cpu(), Instant::now());
        tokio::time::sleep(stop.saturating_duration_since(Instant::now())).await;
        let (s1, g1, c1, secs) = (total(&sent), total(&got), cpu(), t0.elapsed().as_secs_f64());
        for t in tasks {
            t.await
                .map_err(|e| LabError::run("the smds reproduction", e))??;
        }
        for r in readers {
            r.abort();
        }
        Ok::<NodeRun, LabError>(NodeRun {
            nodes,
            info,
            asked,
            sent: s1 - s0,
            delivered: g1 - g0,
            seconds: secs,
            server_cpu_seconds: c1 - c0,
        })
    });
    drop(started);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_reports_what_its_counts_say() {
        let r = NodeRun {
            nodes: 2,
            info: 1000,
            asked: Some(100.0),
            sent: 200,
            delivered: 150,
            seconds: 2.0,
            server_cpu_seconds: 1.0,
        };
        assert_eq!(r.pdus_per_s(), 75.0);
        assert_eq!(r.mbps(), 0.6);
        assert_eq!(r.discarded(), 0.25);
        assert_eq!(r.server_cores(), 0.5);
        // Late arrivals of PDUs sent before the interval do not make a negative loss.
        let late = NodeRun {
            delivered: 210,
            ..r
        };
        assert_eq!(late.discarded(), 0.0);
    }

    #[test]
    fn our_own_cpu_time_is_read() {
        let pid = std::process::id();
        let c = cpu_seconds(pid);
        if std::path::Path::new("/proc").exists() {
            assert!(c >= 0.0, "{c}");
        } else {
            assert!(c.is_nan());
        }
    }
}
