//! `atmlab smds`: run SMDS servers (paper 002) and be their subscribers. The work is in
//! `atmlab_smds::live`; this parses arguments and prints.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use atmlab_smds::config::{DEFAULT_QUEUE, ServerFile, TopologyFile};
use atmlab_smds::live::{LiveNetwork, Subscriber, describe};
use atmlab_smds::msg::l3_pdu;
use atmlab_wire::E164Address;
use atmlab_wire::smds::MAX_INFO;
use clap::{Args, Subcommand};

use crate::live::{init_logging, runtime, shutdown_signal};

/// Arguments of `atmlab smds`.
#[derive(Debug, Args)]
pub struct SmdsArgs {
    #[command(subcommand)]
    command: SmdsCommand,
    /// Print results as JSON: `serve` its interfaces at start and its counters at the
    /// end, `send` and `recv` a summary (on stderr when stdout carries the received
    /// Info), `net up` its net.json.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum SmdsCommand {
    /// Run one SMDS server from its TOML file (interfaces are UDP sockets) until Ctrl-C.
    Serve {
        /// The server file (see `atmlab_smds::config`).
        #[arg(long)]
        config: PathBuf,
        /// Rewrite this file with the server's counters and routing state (JSON) every
        /// 200 ms.
        #[arg(long)]
        status: Option<PathBuf>,
        /// Worker threads: the interfaces' forwarders share them (the parallel server,
        /// one server id and routing table). 0: one per core.
        #[arg(long, default_value_t = 0)]
        workers: usize,
        /// Serve Prometheus metrics over HTTP at ADDR/metrics (port 0: one the OS
        /// picks; printed).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
    },
    /// Send L3_PDUs from a subscriber: a file or stdin cut into PDUs, or generated ones.
    Send {
        /// The SNI's UDP address.
        #[arg(long)]
        sni: SocketAddr,
        /// Our (individual) address, as assigned on that SNI.
        #[arg(long)]
        from: E164Address,
        /// The destination (individual or group).
        #[arg(long)]
        to: E164Address,
        /// Send this many generated PDUs of `--size` octets of Info instead of reading a
        /// file.
        #[arg(long)]
        count: Option<u64>,
        /// Info octets per PDU (at most 9188).
        #[arg(long, default_value_t = MAX_INFO)]
        size: usize,
        /// PDUs per second (0: as fast as possible).
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// The file to send (default: stdin) when `--count` is not given.
        file: Option<PathBuf>,
        /// Our UDP address (default: any free port). An SNI not configured with its
        /// subscriber's address is held by the first address that attaches to it, so
        /// send again from the same `--bind` (or configure the SNI's `peer`).
        #[arg(long)]
        bind: Option<SocketAddr>,
    },
    /// Attach to an SNI as a subscriber and receive PDUs: one line each on stderr, their
    /// Info on stdout (or `--out`).
    Recv {
        /// The SNI's UDP address.
        #[arg(long)]
        sni: SocketAddr,
        /// Stop after this many PDUs.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds without a PDU.
        #[arg(long, default_value_t = 10.0)]
        idle: f64,
        /// Our UDP address (default: any free port; see `send --bind`).
        #[arg(long)]
        bind: Option<SocketAddr>,
        /// Write the Info fields here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Manage a whole SMDS network on loopback.
    Net {
        #[command(subcommand)]
        command: NetCommand,
    },
}

#[derive(Debug, Subcommand)]
enum NetCommand {
    /// Start every server of a topology file in this process, on 127.0.0.1, until Ctrl-C.
    Up {
        /// The topology file.
        topo: PathBuf,
        /// Where to write net.json (every interface's UDP address); default: smds/ in
        /// the data directory (--data).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Serve Prometheus metrics over HTTP at ADDR/metrics (port 0: one the OS
        /// picks; printed).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        #[command(flatten)]
        dashboard: crate::dashboard::DashboardFlag,
    },
}

/// Runs `atmlab smds`.
pub fn run(args: SmdsArgs) -> Result<ExitCode> {
    let json = args.json;
    match args.command {
        SmdsCommand::Serve {
            config,
            status,
            workers,
            metrics,
        } => serve(config, status, workers, json, metrics),
        SmdsCommand::Send {
            sni,
            from,
            to,
            count,
            size,
            rate,
            file,
            bind,
        } => send(sni, bind, from, to, count, size, rate, file, json),
        SmdsCommand::Recv {
            sni,
            count,
            idle,
            out,
            bind,
        } => recv(sni, bind, count, idle, out, json),
        SmdsCommand::Net {
            command:
                NetCommand::Up {
                    topo,
                    state,
                    metrics,
                    dashboard,
                },
        } => net_up(topo, state, json, metrics, dashboard),
    }
}

fn serve(
    config: PathBuf,
    status: Option<PathBuf>,
    workers: usize,
    json: bool,
    metrics: Option<std::net::SocketAddr>,
) -> Result<ExitCode> {
    init_logging();
    let file = ServerFile::load(&config)?;
    if let Some(p) = &status {
        crate::live::writable_file("--status", p)?;
    }
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if workers > 0 {
        b.worker_threads(workers);
    }
    let rt = b
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        // Interfaces over ATM need the cell data plane, which the lab's bridge brings.
        let running = atmlab_lab::smds_atm::bind(&file).await?;
        let server = &running.server;
        let name = format!("s{}", server.id().0);
        let _metrics = atmlab_lab::metrics::smds::serve(metrics, [(name.as_str(), server)]).await?;
        let interfaces = server
            .addrs()
            .iter()
            .zip(&file.config.local.interfaces)
            .zip(&file.endpoints);
        if json {
            let list: Vec<serde_json::Value> = interfaces
                .map(|((a, ifc), e)| {
                    let mut v = serde_json::json!({
                        "kind": ifc.kind().to_string().to_lowercase(),
                        "addr": a.to_string(),
                    });
                    if let Some(atm) = e.atm {
                        v["atm"] = serde_json::json!({
                            "switch": atm.switch.to_string(),
                            "send_vc": atm.send_vc.to_string(),
                            "recv_vc": atm.recv_vc.to_string(),
                            "mid": atm.mid,
                        });
                    }
                    v
                })
                .collect();
            say!(
                "{}",
                serde_json::json!({
                    "server": server.id().0,
                    "interfaces": list,
                    "metrics": _metrics.as_ref().map(|m| m.metrics_url()),
                })
            );
        } else {
            say!("smds server s{} up", server.id().0);
            for (i, ((a, ifc), e)) in interfaces.enumerate() {
                match e.atm {
                    None => say!("  interface {} {} udp {a}", i + 1, ifc.kind()),
                    Some(atm) => say!(
                        "  interface {} {} atm host {a} on switch port {}, sends on {}, receives on {} (AAL3/4, MID {})",
                        i + 1,
                        ifc.kind(),
                        atm.switch,
                        atm.send_vc,
                        atm.recv_vc,
                        atm.mid
                    ),
                }
            }
            if let Some(m) = &_metrics {
                say!("  metrics {}", m.metrics_url());
            }
        }
        let _ = std::io::stdout().flush();
        let writer = async {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Some(p) = &status {
                    let text = serde_json::to_string_pretty(&running.status_json())? + "\n";
                    let tmp = p.with_extension("tmp");
                    std::fs::write(&tmp, text)
                        .with_context(|| format!("writing {}", tmp.display()))?;
                    std::fs::rename(&tmp, p).with_context(|| format!("writing {}", p.display()))?;
                }
            }
            #[allow(unreachable_code)] // reason: the loop's type for `?` above
            Ok::<(), anyhow::Error>(())
        };
        tokio::select! {
            r = writer => r?,
            _ = shutdown_signal() => {}
        }
        let end = running.status_json();
        if json {
            say!("{end}");
        } else {
            say!("{}", serde_json::to_string_pretty(&end)?);
        }
        Ok(ExitCode::SUCCESS)
    })
}

#[allow(clippy::too_many_arguments)] // reason: one per command-line flag, passed once
fn send(
    sni: SocketAddr,
    bind: Option<SocketAddr>,
    from: E164Address,
    to: E164Address,
    count: Option<u64>,
    size: usize,
    rate: f64,
    file: Option<PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    if size == 0 || size > MAX_INFO {
        bail!("--size {size}: Info is 1 to {MAX_INFO} octets");
    }
    let chunks: Vec<Vec<u8>> = match count {
        Some(n) => (0..n)
            .map(|i| (0..size).map(|k| (k as u64 + i) as u8).collect())
            .collect(),
        None => {
            let mut data = Vec::new();
            match &file {
                Some(p) => {
                    data = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?
                }
                None => {
                    std::io::stdin()
                        .read_to_end(&mut data)
                        .context("reading stdin")?;
                }
            }
            data.chunks(size).map(<[u8]>::to_vec).collect()
        }
    };
    let rt = runtime()?;
    rt.block_on(async move {
        let bind = subscriber_bind(sni, bind)?;
        let sub = Subscriber::attach(bind, sni).await?;
        let gap = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
        let start = tokio::time::Instant::now();
        let mut octets = 0usize;
        for (i, c) in chunks.iter().enumerate() {
            let pdu = l3_pdu(from, to, c, i as u8)?;
            octets += c.len();
            sub.send(&pdu).await?;
            if let Some(g) = gap {
                tokio::time::sleep_until(start + g * (i as u32 + 1)).await;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        if json {
            say!(
                "{}",
                serde_json::json!({
                    "pdus": chunks.len(), "octets": octets, "seconds": secs,
                    "sni": sni.to_string(), "from": from.to_string(), "to": to.to_string(),
                })
            );
        } else {
            eprintln!(
                "sent {} PDUs, {octets} octets of Info, in {secs:.3} s",
                chunks.len()
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The subscriber's address: `--bind`, or any free port of the SNI's family.
fn subscriber_bind(sni: SocketAddr, bind: Option<SocketAddr>) -> Result<SocketAddr> {
    Ok(match bind {
        Some(b) => b,
        None => if sni.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse()?,
    })
}

fn recv(
    sni: SocketAddr,
    bind: Option<SocketAddr>,
    count: Option<u64>,
    idle: f64,
    out: Option<PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    if let Some(p) = &out {
        crate::live::writable_file("--out", p)?;
    }
    let rt = runtime()?;
    rt.block_on(async move {
        let bind = subscriber_bind(sni, bind)?;
        let sub = Subscriber::attach(bind, sni).await?;
        eprintln!("attached to {sni}");
        let mut sink: Box<dyn Write> = match &out {
            Some(p) => Box::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            ),
            None => Box::new(std::io::stdout()),
        };
        let mut buf = vec![0u8; 65_536];
        let (mut got, mut bad, mut octets) = (0u64, 0u64, 0usize);
        let idle = Duration::from_secs_f64(idle.max(0.001));
        let mut last_attach = tokio::time::Instant::now();
        while count.is_none_or(|c| got < c) {
            let n = match tokio::time::timeout(idle, sub.recv(&mut buf)).await {
                Ok(r) => r?,
                Err(_) => break,
            };
            match describe(&buf[..n]) {
                Ok((src, dst, info)) => {
                    got += 1;
                    octets += info.len();
                    eprintln!("{src} -> {dst}: {} octets", info.len());
                    sink.write_all(info)?;
                }
                Err(e) => {
                    bad += 1;
                    eprintln!("a datagram that is not an L3_PDU: {e}");
                }
            }
            // Keep the server's idea of our address fresh.
            if last_attach.elapsed() > Duration::from_secs(5) {
                sub.reattach().await?;
                last_attach = tokio::time::Instant::now();
            }
        }
        sink.flush()?;
        if json {
            let v = serde_json::json!({ "pdus": got, "octets": octets, "bad": bad });
            // Stdout carries the Info unless --out took it.
            if out.is_some() {
                say!("{v}");
            } else {
                eprintln!("{v}");
            }
        } else {
            eprintln!("received {got} PDUs ({bad} bad)");
        }
        Ok(if bad == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
}

fn net_up(
    topo: PathBuf,
    state: Option<PathBuf>,
    json: bool,
    metrics: Option<std::net::SocketAddr>,
    dashboard: crate::dashboard::DashboardFlag,
) -> Result<ExitCode> {
    init_logging();
    let t = TopologyFile::load(&topo)?;
    let dashboard = dashboard.addr()?;
    // An SMDS network holds its own state directory (the ATM network beside it holds
    // the data directory): two SMDS networks cannot share one.
    let state = state.unwrap_or_else(|| crate::live::data_dir().join("smds"));
    let _lock = crate::live::lock_data_dir(&state)?;
    let rt = runtime()?;
    rt.block_on(async move {
        let net = LiveNetwork::up(&t, DEFAULT_QUEUE).await?;
        let servers = net.servers.iter().map(|(n, s)| (n.as_str(), s));
        let _metrics = atmlab_lab::metrics::smds::serve(metrics, servers).await?;
        // The dashboard shows the SMDS servers (there is no ATM network here).
        let m = atmlab_lab::metrics::Metrics::new();
        let mut readers = Vec::new();
        for (name, s) in &net.servers {
            atmlab_lab::metrics::smds::SmdsSource::add(&m, name, s);
            readers.push((name.clone(), s.status_reader()));
        }
        let source = atmlab_lab::dashboard::DashboardSource {
            names_url: None,
            tls: None,
            smds: Some(atmlab_lab::dashboard::smds_probe(readers)),
            local: Default::default(),
        };
        let _dashboard = crate::dashboard::start(dashboard, source, m).await?;
        let stop = shutdown_signal();
        let mut info = net.to_json(&t);
        if let Some(m) = &_metrics {
            info["metrics"] = m.metrics_url().into();
        }
        if let Some(d) = &_dashboard {
            info["dashboard"] = d.url().into();
        }
        std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
        let path = state.join("net.json");
        std::fs::write(&path, serde_json::to_string_pretty(&info)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        if json {
            say!("{}", serde_json::to_string_pretty(&info)?);
        } else {
            say!(
                "SMDS network up ({} servers); {}",
                net.servers.len(),
                path.display()
            );
            for s in info["servers"].as_array().into_iter().flatten() {
                say!("  {} (id {})", s["name"].as_str().unwrap_or(""), s["id"]);
                for i in s["interfaces"].as_array().into_iter().flatten() {
                    let addrs: Vec<&str> = i["addresses"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a.as_str())
                        .collect();
                    say!(
                        "    {} udp {} {}",
                        i["kind"].as_str().unwrap_or(""),
                        i["addr"].as_str().unwrap_or(""),
                        addrs.join(" ")
                    );
                }
            }
            if let Some(m) = &_metrics {
                say!("  metrics {}", m.metrics_url());
            }
            if let Some(d) = &_dashboard {
                say!("  dashboard {}", d.url());
            }
            say!(
                "send with: atmlab smds send --sni ADDR --from I:... --to I:... FILE; \
                 receive with: atmlab smds recv --sni ADDR"
            );
        }
        let _ = std::io::stdout().flush();
        stop.await;
        Ok(ExitCode::SUCCESS)
    })
}
