//! `atmlab reproduce smds`: paper 002's measurements on atmlab's SMDS server, written to
//! `reports/smds/` (README.md opening with the verdict table, verdicts.csv, CSVs,
//! PNG/SVG figures, results.json).
//!
//! 1. **Table 1**, header processing rate per path, in memory: a [`Forwarder`] over
//!    predefined PDUs, transmission reduced to dropping the queued transmit (§4.1).
//! 2. **Fig. 3**, flow rate against PDU size, user to user through two servers joined by
//!    one ISSI: the live shell on loopback UDP in this process, the sender kept at most
//!    ten PDUs ahead of the receiver (the paper's ten-PDU receive buffer and "rate
//!    optimized to fit the throughput of the receiving server"). Then the same over ATM
//!    (§4.2's SBA-200 case): every hop a pair of connections through two atmlab switches
//!    of the live data plane, each L3_PDU or ISSI frame AAL3/4 cells paced at 155.52 Mb/s
//!    ([`crate::smds_atm`]).
//! 3. **Figs. 6 and 5** as the paper ran them ([`nodes`]): N independent server
//!    processes (`atmlab smds serve`), each with its own sockets, windowed (Fig. 6) or
//!    paced at three traffic densities (Fig. 5), for N up to the machine's cores; past
//!    them, a model (labelled so): N nodes each with a core of its own, and Fig. 5's
//!    queueing model on the simulated harness. Beside them, atmlab's own parallel server
//!    (one id, N worker threads over a shared table; not the paper's experiment).
//! 4. **Route recomputation** (§3.3.2's 100 ms bound) against the number of servers,
//!    random networks up to 1,000 servers: one shortest-path tree and the forwarding
//!    state rebuilt (what a server does), and all n trees (the paper's worst case).
//! 5. **§3.3.2's two subnets**: time to full adjacency after the joining link comes up,
//!    with atmlab's synchronisation and with the behaviour the paper describes.
//! 6. **The CMP**: a server overloaded by two neighbours, with and without the CMP.
//!
//! The verdicts are [`verdicts::verdicts`] of the results. Wall-clock figures depend on
//! the machine and on what else runs; the README says so and gives the core count.
//! Nothing is fitted to the paper's numbers. The report is built with
//! [`crate::report`]; its prose is `templates/smds.md`.

mod fig3;
pub mod nodes;
pub mod verdicts;

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use atmlab_core::time::Duration;
use atmlab_sim::plot::PlotSpec;
use minijinja::context;
use rand::{Rng, SeedableRng};

use super::Experiments;
use crate::report::{self, Column, Format, SeriesSet, Table, plot, write};
use crate::smds_atm::{self, AtmSubscriber};
use crate::{LabError, cells};
use atmlab_smds::cmp::CmpConfig;
use atmlab_smds::config::TopologyFile;
use atmlab_smds::fib::Forwarder;
use atmlab_smds::harness::{SimNetwork, Topology, address};
use atmlab_smds::ids::{IfaceId, ServerId};
use atmlab_smds::linkstate::{LinkStateConfig, spf};
use atmlab_smds::live::{LiveNetwork, Subscriber};
use atmlab_smds::msg::l3_pdu;
use atmlab_smds::parallel::{ParallelPoint, measure};

use atmlab_smds::workload::{Path, Workload, random_network, recompute};
use nodes::NodeRun;
use verdicts::{NodesPoint, SmdsResults};

pub use fig3::{ATM_LINK_RATE, AtmCounts, FIG3_ATM_TOPOLOGY, flow_rates, flow_rates_atm};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../../templates/smds.md");

/// How to run the reproduction.
#[derive(Default)]
pub struct Options<'a> {
    /// The short form CI runs.
    pub quick: bool,
    /// The atmlab binary, to run Figs. 5 and 6's server processes (`smds serve`); without
    /// it those figures are not measured (their verdicts say so).
    pub server_exe: Option<PathBuf>,
    /// Called with the name of each step as it starts.
    pub progress: Option<&'a dyn Fn(&str)>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The report (README.md).
    pub report: PathBuf,
    /// Wall time of the run, s.
    pub seconds: f64,
}

/// Table 1: one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeaderRate {
    /// The path.
    pub path: Path,
    /// Headers processed per second.
    pub per_s: f64,
}

/// Fig. 3: one PDU size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowPoint {
    /// Info octets per PDU.
    pub info: usize,
    /// PDUs delivered per second.
    pub pdus_per_s: f64,
    /// Info delivered, Mb/s.
    pub mbps: f64,
    /// PDUs sent and not delivered.
    pub lost: u64,
}

/// Fig. 5: one density and worker count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DensityPoint {
    /// Offered load in units of one worker's capacity.
    pub density: f64,
    /// Workers.
    pub workers: usize,
    /// Delivered, in units of one worker's capacity.
    pub carried: f64,
    /// Fraction of the offered PDUs the parallel server discarded (overload).
    pub discarded: f64,
    /// Fraction cut at the traffic servers by the CMP.
    pub cut: f64,
}

/// Route recomputation for one network size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpfPoint {
    /// Servers.
    pub servers: usize,
    /// One tree and the forwarding state, ms (median).
    pub one_ms: f64,
    /// All n trees, ms (None when not measured).
    pub all_ms: Option<f64>,
}

/// §3.3.2: time to full adjacency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdjacencyPoint {
    /// Whether the synchronisation is flooded onward (atmlab) or not (the paper).
    pub flood_sync: bool,
    /// Seconds from the joining link coming up to full adjacency.
    pub seconds: f64,
}

/// The CMP experiment, one configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CmpPoint {
    /// Whether the CMP was on.
    pub cmp: bool,
    /// PDUs offered.
    pub offered: u64,
    /// PDUs delivered.
    pub delivered: u64,
    /// Discarded by the congested server.
    pub overload: u64,
    /// Cut by its neighbours.
    pub cut: u64,
}

/// The steps of [`run`], each an experiment of the report.
const STEPS: usize = 9;

/// Logs (and tells `opts.progress`) that step `name` starts.
fn step(opts: &Options<'_>, experiments: &mut Experiments, name: &str) {
    experiments.start(name);
    if let Some(p) = opts.progress {
        p(name);
    }
}

/// Table 1 in memory: headers per second on each path, best of `rounds` runs of `run`.
pub fn header_rates(run: StdDuration, rounds: usize) -> Vec<HeaderRate> {
    let wl = Workload::new(8, 8);
    Path::ALL
        .iter()
        .map(|&path| {
            let frames = wl.frames(path, 1024, 64);
            let mut fwd = Forwarder::new(Arc::clone(&wl.fib));
            let mut best = 0.0f64;
            for _ in 0..rounds.max(1) {
                let t0 = StdInstant::now();
                let mut n = 0u64;
                while t0.elapsed() < run {
                    for (iface, f) in &frames {
                        fwd.handle_datagram(*iface, std::hint::black_box(f));
                        std::hint::black_box(fwd.clear_transmits());
                    }
                    n += frames.len() as u64;
                }
                best = best.max(n as f64 / t0.elapsed().as_secs_f64());
            }
            HeaderRate { path, per_s: best }
        })
        .collect()
}

/// Fig. 5 on the harness: eight traffic servers around a parallel server of `workers`
/// units, each unit serving one PDU per `service`; `density` is the offered load in units
/// of one worker's capacity. Returns the point and the simulated run length.
pub fn density_point(
    density: f64,
    workers: usize,
    service: Duration,
    run: Duration,
    seed: u64,
) -> Result<DensityPoint, LabError> {
    const ENV: usize = 8;
    // Star: server 0 is the parallel server (no SNIs of its own matter), 1..=8 traffic.
    let topo = Topology {
        servers: ENV + 1,
        links: (1..=ENV).map(|i| (0, i)).collect(),
        subscribers: 1,
        groups: Vec::new(),
    };
    let ls = LinkStateConfig {
        hello_interval: Duration::from_millis(100),
        dead_interval: Duration::from_millis(400),
        ..LinkStateConfig::default()
    };
    let mut net =
        SimNetwork::from_topology(&topo, ls, CmpConfig::default(), Duration::from_micros(10))?;
    let limit = net.now() + Duration::from_secs(10);
    net.run_until_true(Duration::from_millis(10), limit, |n| {
        n.fully_adjacent() && n.all_reachable()
    })
    .ok_or_else(|| LabError::run("the smds reproduction", "the star did not converge"))?;
    net.set_parallel_capacity(0, service, 10 * workers.max(1), workers);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rate = density / service.as_secs_f64(); // PDUs/s offered in all
    let pdus: Vec<Vec<Vec<u8>>> = (1..=ENV)
        .map(|s| {
            (1..=ENV)
                .map(|d| {
                    l3_pdu(
                        address(s as u32 + 1, 0),
                        address(d as u32 + 1, 0),
                        &[0u8; 1024],
                        0,
                    )
                    .expect("valid PDU")
                })
                .collect()
        })
        .collect();
    let start = net.now();
    let end = start + run;
    let mut offered = 0u64;
    let mut t = start;
    net.take_delivered();
    loop {
        let gap: f64 = -(1.0 - rng.random::<f64>()).ln() / rate;
        t += Duration::from_secs_f64(gap);
        if t >= end {
            break;
        }
        net.run_until(t);
        let s = rng.random_range(1..=ENV);
        let mut d = rng.random_range(1..ENV);
        if d >= s {
            d += 1;
        }
        net.inject(s, IfaceId(0), pdus[s - 1][d - 1].clone());
        offered += 1;
    }
    net.run_for(Duration::from_millis(50));
    let delivered = net.take_delivered().len() as u64;
    let overload = net.servers()[0].counters().overload;
    let cut: u64 = net.servers()[1..]
        .iter()
        .map(|s| s.counters().cmp_cut)
        .sum();
    let unit = 1.0 / service.as_secs_f64();
    Ok(DensityPoint {
        density,
        workers,
        carried: delivered as f64 / run.as_secs_f64() / unit,
        discarded: overload as f64 / offered.max(1) as f64,
        cut: cut as f64 / offered.max(1) as f64,
    })
}

/// Route recomputation times for networks of `sizes` servers (median of `reps`); all n
/// trees for sizes up to `all_up_to`.
pub fn spf_times(sizes: &[usize], reps: usize, all_up_to: usize) -> Vec<SpfPoint> {
    sizes
        .iter()
        .map(|&n| {
            let lsas = random_network(n, 2.0, n as u64);
            let mut v: Vec<f64> = (0..reps.max(1))
                .map(|_| {
                    let t0 = StdInstant::now();
                    std::hint::black_box(recompute(ServerId(1), &lsas));
                    t0.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            v.sort_by(f64::total_cmp);
            let all_ms = (n <= all_up_to).then(|| {
                let t0 = StdInstant::now();
                for me in 1..=n {
                    std::hint::black_box(spf(ServerId(me as u32), lsas.iter()).len());
                }
                t0.elapsed().as_secs_f64() * 1e3
            });
            SpfPoint {
                servers: n,
                one_ms: v[v.len() / 2],
                all_ms,
            }
        })
        .collect()
}

/// §3.3.2: two full meshes of `k` servers joined by one link, which comes up after the
/// subnets converged; seconds (simulated) to full adjacency.
pub fn adjacency_time(k: usize, flood_sync: bool) -> Result<f64, LabError> {
    let topo = Topology::two_subnets(k, 1);
    let join = topo.links.len() - 1;
    let ls = LinkStateConfig {
        flood_sync,
        ..LinkStateConfig::default()
    };
    let mut net =
        SimNetwork::from_topology(&topo, ls, CmpConfig::default(), Duration::from_millis(1))?;
    net.set_link_up(join, false);
    net.run_for(Duration::from_secs(10));
    net.set_link_up(join, true);
    let t0 = net.now();
    let limit = t0 + Duration::from_secs(2 * 3600);
    // Fine steps first, then coarse ones for the long wait.
    let t = net
        .run_until_true(
            Duration::from_millis(10),
            t0 + Duration::from_secs(30),
            |n| n.fully_adjacent(),
        )
        .or_else(|| net.run_until_true(Duration::from_secs(5), limit, |n| n.fully_adjacent()))
        .ok_or_else(|| {
            LabError::run(
                "the smds reproduction",
                "no full adjacency within two hours",
            )
        })?;
    Ok((t - t0).as_secs_f64())
}

/// The CMP experiment: s2 serves one PDU per 100 us; s1 and s3 each offer 8 PDUs/ms to
/// its subscriber for `run`.
pub fn cmp_point(cmp: bool, run: Duration) -> Result<CmpPoint, LabError> {
    let topo = Topology {
        servers: 3,
        links: vec![(0, 1), (1, 2)],
        subscribers: 1,
        groups: Vec::new(),
    };
    let cfg = if cmp {
        CmpConfig::default()
    } else {
        CmpConfig {
            high: f64::INFINITY,
            ..CmpConfig::default()
        }
    };
    let ls = LinkStateConfig {
        hello_interval: Duration::from_millis(100),
        dead_interval: Duration::from_millis(400),
        ..LinkStateConfig::default()
    };
    let mut net = SimNetwork::from_topology(&topo, ls, cfg, Duration::from_millis(1))?;
    let limit = net.now() + Duration::from_secs(10);
    net.run_until_true(Duration::from_millis(10), limit, |n| n.fully_adjacent())
        .ok_or_else(|| LabError::run("the smds reproduction", "no convergence"))?;
    net.set_capacity(1, Duration::from_micros(100), 200);
    let a = l3_pdu(address(1, 0), address(2, 0), &[0u8; 100], 0)?;
    let b = l3_pdu(address(3, 0), address(2, 0), &[0u8; 100], 0)?;
    net.take_delivered();
    let end = net.now() + run;
    let mut offered = 0;
    while net.now() < end {
        net.inject(0, IfaceId(0), a.clone());
        net.inject(2, IfaceId(0), b.clone());
        offered += 2;
        net.run_for(Duration::from_micros(125));
    }
    net.run_for(Duration::from_millis(100));
    Ok(CmpPoint {
        cmp,
        offered,
        delivered: net.take_delivered().len() as u64,
        overload: net.servers()[1].counters().overload,
        cut: net.servers()[0].counters().cmp_cut + net.servers()[2].counters().cmp_cut,
    })
}

/// Runs every step and writes the report into `dir`.
pub fn run(dir: &FsPath, opts: &Options<'_>) -> Result<Outcome, LabError> {
    let t0 = StdInstant::now();
    let q = opts.quick;
    report::create_dir(dir)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut experiments = Experiments::new("smds", STEPS);

    step(opts, &mut experiments, "Table 1: header processing");
    let table1 = header_rates(
        StdDuration::from_millis(if q { 100 } else { 1000 }),
        if q { 1 } else { 3 },
    );

    step(
        opts,
        &mut experiments,
        "Fig. 3: flow rate through two servers over loopback",
    );
    let sizes: Vec<usize> = if q {
        vec![256, 4096, 9188]
    } else {
        vec![64, 256, 512, 1024, 2048, 4096, 8192, 9188]
    };
    let fig3_run = StdDuration::from_millis(if q { 300 } else { 2000 });
    let fig3 = flow_rates(&sizes, fig3_run, 10)?;

    step(
        opts,
        &mut experiments,
        "Fig. 3 over ATM: AAL3/4 cells through two switches at 155.52 Mb/s",
    );
    let scratch = std::env::temp_dir().join(format!("atmlab-smds-{}", std::process::id()));
    let atm = flow_rates_atm(&sizes, fig3_run, 10, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let (fig3_atm, atm_counts) = atm?;

    step(
        opts,
        &mut experiments,
        "Figs. 6 and 5: N independent server processes",
    );
    // Up to one node per core (at least two, so that a speed-up exists to measure).
    let most = if q { 2 } else { cores.max(2) };
    let reps = if q { 3 } else { 5 };
    let (warm, run_live) = if q {
        (StdDuration::from_millis(200), StdDuration::from_millis(500))
    } else {
        (
            StdDuration::from_millis(300),
            StdDuration::from_millis(2000),
        )
    };
    let mut fig6_live: Vec<NodesPoint> = Vec::new();
    let mut fig5_live: Vec<NodesPoint> = Vec::new();
    if let Some(exe) = &opts.server_exe {
        let conf = dir.join("nodes");
        report::create_dir(&conf)?;
        for n in 1..=most {
            let runs = (0..reps)
                .map(|_| nodes::measure(exe, &conf, n, 9188, None, warm, run_live))
                .collect::<Result<Vec<NodeRun>, _>>()?;
            fig6_live.push(NodesPoint {
                nodes: n,
                density: None,
                runs,
            });
        }
        // Fig. 5's densities: the total offered, in units of one node's windowed rate
        // (ours; the paper does not give its densities), split evenly over the nodes.
        let one = fig6_live[0]
            .runs
            .iter()
            .map(NodeRun::pdus_per_s)
            .sum::<f64>()
            / reps as f64;
        for d in DENSITIES {
            for n in [1, most] {
                let runs = (0..reps)
                    .map(|_| nodes::measure(exe, &conf, n, 9188, Some(d * one), warm, run_live))
                    .collect::<Result<Vec<NodeRun>, _>>()?;
                fig5_live.push(NodesPoint {
                    nodes: n,
                    density: Some(d),
                    runs,
                });
            }
        }
    }

    step(
        opts,
        &mut experiments,
        "atmlab's parallel server (one id, shared table), in memory",
    );
    let workers: Vec<usize> = if q { vec![1, 2] } else { vec![1, 2, 3, 4] };
    let run6 = StdDuration::from_millis(if q { 200 } else { 1500 });
    let fig6: Vec<ParallelPoint> = workers.iter().map(|&w| measure(w, 9188, run6)).collect();
    // Small PDUs too: there the work is header processing, not copying 9 KB, so the
    // two series tell the cores' scaling from the memory system's.
    let fig6_small: Vec<ParallelPoint> = workers.iter().map(|&w| measure(w, 64, run6)).collect();

    step(
        opts,
        &mut experiments,
        "Fig. 5 past the cores: the queueing model (simulated)",
    );
    // One node's service time: a live node's PDUs per server CPU-second (a node with a
    // core of its own), else the in-memory worker's rate. Time scales out of the model's
    // results (they are in units of one node's capacity), so the simulated run is long
    // enough for ~20,000 PDUs at the heaviest density.
    let per_node_pdus = fig6_live
        .first()
        .map(|p| per_cpu_second(&p.runs))
        .filter(|x| x.is_finite() && *x > 0.0)
        .unwrap_or_else(|| fig6[0].pdus_per_s().max(1.0));
    let service = Duration::from_secs_f64(1.0 / per_node_pdus);
    let workers5: Vec<usize> = if q {
        vec![1, 2, 4]
    } else {
        vec![1, 2, 4, 6, 8]
    };
    let run5 = Duration::from_secs_f64(service.as_secs_f64() * if q { 3_000.0 } else { 20_000.0 });
    let mut fig5 = Vec::new();
    for &d in &DENSITIES {
        for &w in &workers5 {
            fig5.push(density_point(d, w, service, run5, 5)?);
        }
    }

    step(
        opts,
        &mut experiments,
        "Route recomputation against network size",
    );
    let spf_sizes: Vec<usize> = if q {
        vec![10, 100, 1000]
    } else {
        vec![10, 30, 100, 300, 1000, 3000]
    };
    let spf = spf_times(
        &spf_sizes,
        if q { 3 } else { 11 },
        if q { 100 } else { 1000 },
    );

    step(
        opts,
        &mut experiments,
        "§3.3.2: two subnets joined by one link",
    );
    let k = if q { 3 } else { 5 };
    let adjacency = [
        AdjacencyPoint {
            flood_sync: true,
            seconds: adjacency_time(k, true)?,
        },
        AdjacencyPoint {
            flood_sync: false,
            seconds: adjacency_time(k, false)?,
        },
    ];

    step(opts, &mut experiments, "CMP");
    let cmp_run = Duration::from_millis(if q { 300 } else { 2000 });
    let cmp = [cmp_point(false, cmp_run)?, cmp_point(true, cmp_run)?];

    let seconds = t0.elapsed().as_secs_f64();
    let results = SmdsResults {
        table1,
        fig3,
        fig3_atm,
        atm_link_bps: ATM_LINK_RATE,
        fig6: fig6_live,
        fig5: fig5_live,
        spf,
        adjacency: adjacency.to_vec(),
        cmp: cmp.to_vec(),
    };
    write_report(
        dir,
        q,
        cores,
        seconds,
        &results,
        atm_counts,
        (&fig6, &fig6_small),
        &fig5,
        k,
        per_node_pdus,
    )?;
    Ok(Outcome {
        report: dir.join("README.md"),
        seconds,
    })
}

/// Fig. 5's traffic densities: the total offered, in units of one node's rate (ours).
const DENSITIES: [f64; 3] = [0.5, 2.0, 6.0];

/// PDUs delivered per second of the servers' CPU, over runs.
fn per_cpu_second(runs: &[NodeRun]) -> f64 {
    let pdus: u64 = runs.iter().map(|r| r.delivered).sum();
    let cpu: f64 = runs.iter().map(|r| r.server_cpu_seconds).sum();
    pdus as f64 / cpu
}

/// Table 1: the paper's rate on each path beside ours.
fn table1_table(table1: &[HeaderRate]) -> Table {
    let mut t = Table::new([
        Column::new("path", "path"),
        Column::new("paper headers/s", "paper_per_s")
            .right()
            .md_format(Format::Fixed(0)),
        Column::new("paper us", "paper_us")
            .right()
            .md_format(Format::Fixed(0)),
        Column::new("atmlab headers/s", "atmlab_per_s")
            .right()
            .format(Format::Fixed(0)),
        Column::new("atmlab us", "atmlab_us").right().fixed(3, 5),
        Column::md("ratio")
            .right()
            .format(Format::Custom(|x| format!("{x:.0}x"))),
    ]);
    for r in table1 {
        let (pp, pu) = r.path.paper();
        t.row(cells![
            r.path.name(),
            pp,
            pu,
            r.per_s,
            1e6 / r.per_s,
            r.per_s / pp
        ]);
    }
    t
}

/// Fig. 6: both PDU sizes per worker count, speed-ups against one worker.
fn fig6_table(fig6: &[ParallelPoint], fig6_small: &[ParallelPoint], cores: usize) -> Table {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        Column::md("workers").right(),
        Column::csv("workers"),
        num("9,188-octet PDUs/s", "pdus_per_s").format(Format::Fixed(0)),
        num("Mb/s", "mbps").fixed(0, 1),
        num("speed-up", "speedup").fixed(2, 4),
        num("64-octet PDUs/s", "small_pdus_per_s").format(Format::Fixed(0)),
        num("speed-up", "small_speedup").fixed(2, 4),
        num("cores obtained", "small_cores_used").fixed(2, 3),
        num("64-octet PDUs per CPU-second", "small_pdus_per_cpu_s").format(Format::Fixed(0)),
        Column::md("paper Mb/s").right(),
    ]);
    let base = fig6[0].mbps();
    let base_small = fig6_small[0].pdus_per_s();
    for (p, q) in fig6.iter().zip(fig6_small) {
        let workers = if p.workers > cores {
            format!("{} (oversubscribed)", p.workers)
        } else {
            p.workers.to_string()
        };
        let paper = match p.workers {
            1 => "130",
            8 => "~430",
            _ => "",
        };
        t.row(cells![
            workers,
            p.workers,
            p.pdus_per_s(),
            p.mbps(),
            p.mbps() / base,
            q.pdus_per_s(),
            q.pdus_per_s() / base_small,
            q.cores_used(),
            q.pdus_per_cpu_s(),
            paper
        ]);
    }
    t
}

/// A share as a percentage with one decimal.
fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

#[allow(clippy::too_many_arguments)] // reason: one report of six experiments
fn write_report(
    dir: &FsPath,
    quick: bool,
    cores: usize,
    seconds: f64,
    results: &SmdsResults,
    atm_counts: AtmCounts,
    (fig6, fig6_small): (&[ParallelPoint], &[ParallelPoint]),
    fig5: &[DensityPoint],
    k: usize,
    per_node_pdus: f64,
) -> Result<(), LabError> {
    let (table1, fig3, spf) = (&results.table1, &results.fig3, &results.spf);
    let (adjacency, cmp) = (&results.adjacency, &results.cmp);
    let verdict_table = verdicts::verdicts(results).write(dir)?;
    // Table 1.
    let t1 = table1_table(table1);
    write(dir, "table1.csv", &t1.csv())?;
    let slowest = table1.iter().map(|r| r.per_s).fold(f64::INFINITY, f64::min);

    // Fig. 3, loopback UDP and ATM side by side.
    let mut t3 = Table::new([
        Column::new("Info octets", "info_octets").right(),
        Column::new("UDP PDUs/s", "pdus_per_s").right().fixed(0, 1),
        Column::new("UDP Mb/s (Info)", "mbps").right().fixed(1, 3),
        Column::new("UDP lost", "lost").right(),
        Column::new("ATM PDUs/s", "atm_pdus_per_s")
            .right()
            .fixed(0, 1),
        Column::new("ATM Mb/s (Info)", "atm_mbps")
            .right()
            .fixed(1, 3),
        Column::new("ATM lost", "atm_lost").right(),
        Column::new("link's AAL3/4 capacity, Mb/s (Info)", "atm_capacity_mbps")
            .right()
            .fixed(1, 3),
        Column::new("ATM / capacity", "atm_of_capacity")
            .right()
            .fixed(2, 4),
    ]);
    for p in fig3 {
        let cap = verdicts::aal34_capacity_mbps(p.info, results.atm_link_bps);
        match results.fig3_atm.iter().find(|a| a.info == p.info) {
            Some(a) => t3.row(cells![
                p.info,
                p.pdus_per_s,
                p.mbps,
                p.lost,
                a.pdus_per_s,
                a.mbps,
                a.lost,
                cap,
                a.mbps / cap
            ]),
            None => t3.row(cells![
                p.info,
                p.pdus_per_s,
                p.mbps,
                p.lost,
                f64::NAN,
                f64::NAN,
                "-",
                cap,
                f64::NAN
            ]),
        };
    }
    write(dir, "fig3_flow_rate.csv", &t3.csv())?;
    let mut series = SeriesSet::new();
    for p in fig3 {
        series.push("loopback UDP", (p.info as f64, p.mbps, f64::NAN));
    }
    for p in &results.fig3_atm {
        series.push(
            "ATM: AAL3/4 cells through two switches",
            (p.info as f64, p.mbps, f64::NAN),
        );
    }
    for p in fig3 {
        series.push(
            "the 155.52 Mb/s link's AAL3/4 capacity",
            (
                p.info as f64,
                verdicts::aal34_capacity_mbps(p.info, results.atm_link_bps),
                f64::NAN,
            ),
        );
    }
    plot(
        dir,
        "fig3_flow_rate",
        PlotSpec {
            title: "Fig. 3: flow rate through two servers (loopback UDP, and ATM)",
            x_label: "Info octets per PDU",
            y_label: "user data (Mb/s)",
            log_y: true,
        },
        series.as_slice(),
    )?;
    let best_atm = results
        .fig3_atm
        .iter()
        .max_by(|a, b| a.mbps.total_cmp(&b.mbps))
        .copied();

    // Fig. 6: N server processes, measured, then the model past the cores.
    let mut t6n = Table::new([
        Column::new("nodes", "nodes").right(),
        Column::new("kind", "kind"),
        Column::md("Mb/s (95% CI)").right(),
        Column::csv("mbps").format(Format::Fixed(3)),
        Column::csv("mbps_ci95").format(Format::Fixed(3)),
        Column::new("PDUs/s", "pdus_per_s").right().fixed(0, 1),
        Column::new("server cores obtained", "server_cores")
            .right()
            .fixed(2, 3),
        Column::new("PDUs per server CPU-second", "pdus_per_cpu_s")
            .right()
            .fixed(0, 1),
        Column::md("paper Mb/s").right(),
    ]);
    let mut series6 = SeriesSet::new();
    let paper6 = |n: usize| match n {
        1 => "130",
        8 => "~430",
        _ => "",
    };
    for p in &results.fig6 {
        let e = p.mbps();
        let pdus = p.runs.iter().map(NodeRun::pdus_per_s).sum::<f64>() / p.runs.len() as f64;
        let cores_got = p.runs.iter().map(NodeRun::server_cores).sum::<f64>() / p.runs.len() as f64;
        t6n.row(cells![
            p.nodes,
            "measured",
            report::verdict::show(&e),
            e.mean,
            e.ci95,
            pdus,
            cores_got,
            per_cpu_second(&p.runs),
            paper6(p.nodes)
        ]);
        series6.push("measured (N processes)", (p.nodes as f64, e.mean, e.ci95));
    }
    let measured_up_to = results.fig6.iter().map(|p| p.nodes).max().unwrap_or(0);
    let model = |n: usize| n as f64 * per_node_pdus * 9188.0 * 8.0 / 1e6;
    for n in 1..=8usize {
        if n > measured_up_to {
            t6n.row(cells![
                n,
                "model",
                format!("{:.0} (model)", model(n)),
                model(n),
                f64::NAN,
                model(n) * 1e6 / 9188.0 / 8.0,
                n as f64,
                per_node_pdus,
                paper6(n)
            ]);
        }
        series6.push(
            "model: a core per node, nothing shared",
            (n as f64, model(n), f64::NAN),
        );
    }
    series6.add(
        "paper (Paragon XP/S)",
        vec![(1.0, 130.0, f64::NAN), (8.0, 430.0, f64::NAN)],
    );
    write(dir, "fig6_nodes.csv", &t6n.csv())?;
    plot(
        dir,
        "fig6_nodes",
        PlotSpec {
            title: "Fig. 6: aggregate of N independent server processes (9,188-octet PDUs)",
            x_label: "nodes (server processes)",
            y_label: "user data (Mb/s)",
            log_y: false,
        },
        series6.as_slice(),
    )?;
    let mut t5n = Table::new([
        Column::new("offered (x one node)", "density").right(),
        Column::new("nodes", "nodes").right(),
        Column::new("offered PDUs/s", "offered_per_s")
            .right()
            .fixed(0, 1),
        Column::md("carried Mb/s (95% CI)").right(),
        Column::csv("mbps").format(Format::Fixed(3)),
        Column::csv("mbps_ci95").format(Format::Fixed(3)),
        Column::md("discarded (95% CI)").right(),
        Column::csv("discarded").format(Format::Fixed(4)),
        Column::csv("discarded_ci95").format(Format::Fixed(4)),
    ]);
    let mut series5n = SeriesSet::new();
    for p in &results.fig5 {
        let (e, d) = (p.mbps(), p.discarded());
        let offered = p.runs.iter().map(NodeRun::offered_per_s).sum::<f64>() / p.runs.len() as f64;
        let density = p.density.unwrap_or(f64::NAN);
        t5n.row(cells![
            density,
            p.nodes,
            offered,
            report::verdict::show(&e),
            e.mean,
            e.ci95,
            format!("{} ± {}", percent(d.mean), percent(d.ci95)),
            d.mean,
            d.ci95
        ]);
        series5n.push(
            &format!("offered {density} x one node"),
            (p.nodes as f64, e.mean, e.ci95),
        );
    }
    write(dir, "fig5_nodes.csv", &t5n.csv())?;
    if !results.fig5.is_empty() {
        plot(
            dir,
            "fig5_nodes",
            PlotSpec {
                title: "Fig. 5: carried by N server processes, three densities (measured)",
                x_label: "nodes (server processes)",
                y_label: "user data (Mb/s)",
                log_y: false,
            },
            series5n.as_slice(),
        )?;
    }

    // atmlab's own parallel server, in memory (not the paper's experiment).
    let t6 = fig6_table(fig6, fig6_small, cores);
    write(dir, "parallel_threads.csv", &t6.csv())?;

    // Fig. 5.
    let mut t5 = Table::new([
        Column::new("offered (x one worker)", "density").right(),
        Column::new("workers", "workers").right(),
        Column::new("carried", "carried").right().fixed(2, 4),
        Column::new("discarded at the server", "discarded")
            .right()
            .md_format(Format::Custom(percent))
            .csv_format(Format::Fixed(4)),
        Column::new("cut by CMP at the neighbours", "cut")
            .right()
            .md_format(Format::Custom(percent))
            .csv_format(Format::Fixed(4)),
    ]);
    let mut series = SeriesSet::new();
    for p in fig5 {
        t5.row(cells![p.density, p.workers, p.carried, p.discarded, p.cut]);
        series.push(
            &format!("offered {} x one worker", p.density),
            (p.workers as f64, p.carried, f64::NAN),
        );
    }
    write(dir, "fig5_model.csv", &t5.csv())?;
    plot(
        dir,
        "fig5_model",
        PlotSpec {
            title: "Fig. 5: carried traffic against nodes, three densities (queueing model)",
            x_label: "workers",
            y_label: "carried / one worker's capacity",
            log_y: false,
        },
        series.as_slice(),
    )?;

    // Routing.
    let mut routing = Table::new([
        Column::new("servers", "servers").right(),
        Column::new("one tree + forwarding state, ms", "one_ms")
            .right()
            .fixed(3, 5),
        Column::md("all n trees, ms").right(),
        Column::csv("all_ms").format(Format::Fixed(4)),
        Column::md("within 100 ms"),
    ]);
    for p in spf {
        routing.row(cells![
            p.servers,
            p.one_ms,
            p.all_ms.map_or("-".to_string(), |a| format!("{a:.2}")),
            p.all_ms,
            if p.one_ms <= 100.0 { "yes" } else { "no" }
        ]);
    }
    write(dir, "routing.csv", &routing.csv())?;
    let mut series = SeriesSet::new();
    series.add(
        "one tree + forwarding state",
        spf.iter()
            .map(|p| (p.servers as f64, p.one_ms, f64::NAN))
            .collect(),
    );
    let all: Vec<(f64, f64, f64)> = spf
        .iter()
        .filter_map(|p| p.all_ms.map(|a| (p.servers as f64, a, f64::NAN)))
        .collect();
    if !all.is_empty() {
        series.add("all n trees", all);
    }
    series.add(
        "Bellcore bound (100 ms)",
        spf.iter()
            .map(|p| (p.servers as f64, 100.0, f64::NAN))
            .collect(),
    );
    plot(
        dir,
        "routing",
        PlotSpec {
            title: "Route recomputation time against servers",
            x_label: "servers",
            y_label: "ms",
            log_y: true,
        },
        series.as_slice(),
    )?;

    // Adjacency.
    let mut adj = Table::new([
        Column::md("synchronisation"),
        Column::csv("flood_sync"),
        Column::new("time to full adjacency", "seconds")
            .right()
            .md_format(Format::Custom(|x| format!("{x:.3} s")))
            .csv_format(Format::Fixed(4)),
    ]);
    for a in adjacency {
        adj.row(cells![
            if a.flood_sync {
                "atmlab: LSAs learned in the sync are flooded onward"
            } else {
                "as the paper describes: kept to the synchronising pair"
            },
            a.flood_sync,
            a.seconds
        ]);
    }
    write(dir, "adjacency.csv", &adj.csv())?;

    // CMP.
    let mut tc = Table::new([
        Column::md("CMP"),
        Column::csv("cmp"),
        Column::new("offered", "offered").right(),
        Column::new("delivered", "delivered").right(),
        Column::new("discarded at s2", "overload").right(),
        Column::new("cut at s1, s3", "cut").right(),
    ]);
    for c in cmp {
        tc.row(cells![
            if c.cmp { "on" } else { "off" },
            c.cmp,
            c.offered,
            c.delivered,
            c.overload,
            c.cut
        ]);
    }
    write(dir, "cmp.csv", &tc.csv())?;

    let md = report::render(
        "smds.md",
        TEMPLATE,
        context! {
            quick => quick,
            seconds => seconds,
            cores => cores,
            verdicts => verdict_table,
            live => !results.fig6.is_empty(),
            measured_up_to => measured_up_to,
            per_node_pdus => per_node_pdus,
            fig6_nodes => t6n.markdown(),
            fig5_nodes => t5n.markdown(),
            gbps10 => verdicts::paper_gbps(10.0),
            gbps8 => verdicts::paper_gbps(8.0),
            paper_slope_from_one => verdicts::paper_slopes().1,
            paper_slope_origin => verdicts::paper_slopes().2,
            table1 => t1.markdown(),
            slowest => slowest,
            slowest_gbps => slowest * 9228.0 * 8.0 / 1e9,
            fig3 => t3.markdown(),
            fig3_pdus => fig3.iter().map(|p| p.pdus_per_s).fold(0.0, f64::max),
            fig3_best => fig3.iter().map(|p| p.mbps).fold(0.0, f64::max),
            atm_measured => best_atm.is_some(),
            atm_best_mbps => best_atm.map_or(f64::NAN, |p| p.mbps),
            atm_best_info => best_atm.map_or(0, |p| p.info),
            atm_best_pdus => results.fig3_atm.iter().map(|p| p.pdus_per_s).fold(0.0, f64::max),
            atm_best_capacity => best_atm.map_or(f64::NAN, |p| verdicts::aal34_capacity_mbps(p.info, results.atm_link_bps)),
            atm_cells => atm_counts.cells_sent,
            atm_lost => atm_counts.lost,
            atm_link_mbps => results.atm_link_bps / 1e6,
            fig6 => t6.markdown(),
            fig5 => t5.markdown(),
            routing => routing.markdown(),
            k => k,
            adjacency => adj.markdown(),
            cmp => tc.markdown(),
        },
    )?;
    write(dir, "README.md", &md)?;

    let json = serde_json::json!({
        "quick": quick,
        "cores": cores,
        "seconds": seconds,
        "table1": table1.iter().map(|r| serde_json::json!({
            "path": r.path.name(), "paper_per_s": r.path.paper().0, "per_s": r.per_s })).collect::<Vec<_>>(),
        "fig3": fig3.iter().map(|p| serde_json::json!({
            "info": p.info, "pdus_per_s": p.pdus_per_s, "mbps": p.mbps, "lost": p.lost })).collect::<Vec<_>>(),
        "fig3_atm": results.fig3_atm.iter().map(|p| serde_json::json!({
            "info": p.info, "pdus_per_s": p.pdus_per_s, "mbps": p.mbps, "lost": p.lost,
            "capacity_mbps": verdicts::aal34_capacity_mbps(p.info, results.atm_link_bps) })).collect::<Vec<_>>(),
        "fig3_atm_link_bps": results.atm_link_bps,
        "fig3_atm_cells_sent": atm_counts.cells_sent,
        "fig3_atm_pdus_lost_in_reassembly": atm_counts.lost,
        "fig6_nodes": results.fig6.iter().map(|p| serde_json::json!({
            "nodes": p.nodes, "mbps": p.mbps().mean, "mbps_ci95": p.mbps().ci95,
            "runs": p.runs.iter().map(|r| serde_json::json!({
                "sent": r.sent, "delivered": r.delivered, "seconds": r.seconds,
                "server_cpu_seconds": r.server_cpu_seconds })).collect::<Vec<_>>() })).collect::<Vec<_>>(),
        "fig5_nodes": results.fig5.iter().map(|p| serde_json::json!({
            "density": p.density, "nodes": p.nodes, "mbps": p.mbps().mean,
            "discarded": p.discarded().mean })).collect::<Vec<_>>(),
        "model_per_node_pdus_per_s": per_node_pdus,
        "parallel_threads": fig6.iter().map(|p| serde_json::json!({
            "workers": p.workers, "pdus_per_s": p.pdus_per_s(), "mbps": p.mbps() })).collect::<Vec<_>>(),
        "parallel_threads_small": fig6_small.iter().map(|p| serde_json::json!({
            "workers": p.workers, "pdus_per_s": p.pdus_per_s(),
            "cores_used": p.cores_used(), "pdus_per_cpu_s": p.pdus_per_cpu_s() })).collect::<Vec<_>>(),
        "fig5_model": fig5.iter().map(|p| serde_json::json!({
            "density": p.density, "workers": p.workers, "carried": p.carried,
            "discarded": p.discarded, "cut": p.cut })).collect::<Vec<_>>(),
        "routing": spf.iter().map(|p| serde_json::json!({
            "servers": p.servers, "one_ms": p.one_ms, "all_ms": p.all_ms })).collect::<Vec<_>>(),
        "adjacency": adjacency.iter().map(|a| serde_json::json!({
            "flood_sync": a.flood_sync, "seconds": a.seconds })).collect::<Vec<_>>(),
        "cmp": cmp.iter().map(|c| serde_json::json!({
            "cmp": c.cmp, "offered": c.offered, "delivered": c.delivered,
            "overload": c.overload, "cut": c.cut })).collect::<Vec<_>>(),
    });
    report::write_json(dir, "results.json", &json)
}
