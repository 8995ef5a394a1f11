//! `atmlab demo`, `atmlab up`, `atmlab cm serve` and `atmlab callgen`: connection
//! management end to end.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use atmlab_control::cm::adaptive::Regions;
use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_control::cm::faults::FaultPlan;
use atmlab_control::cm::live;
use atmlab_control::cm::server::{ManagerKind, ManagerServer, switch_clients};
use atmlab_control::names::NameClient;
use atmlab_control::net::Topology;
use atmlab_control::tina::TinaConfig;
use atmlab_lab::callgen::{self, Load, RemoteCm};
use atmlab_lab::demo::{self, DemoOptions};
use atmlab_lab::launch::{Lab, LabSpec};
use clap::Args;

use crate::live::{self as shell, Security};

/// `atmlab demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Fewer loads, shorter runs (about 20 s in all).
    #[arg(long)]
    quick: bool,
    /// Where the table, CSV, JSON and plots go.
    #[arg(long, default_value = "reports/demo")]
    reports: PathBuf,
    /// Offered loads, calls/s, comma-separated.
    #[arg(long, value_delimiter = ',')]
    loads: Option<Vec<f64>>,
    /// Seconds per load.
    #[arg(long)]
    seconds: Option<f64>,
    /// Plain text instead of mutual TLS.
    #[arg(long)]
    insecure: bool,
    /// Only these managers (names containing, e.g. "T=10,adaptive").
    #[arg(long, value_delimiter = ',')]
    managers: Vec<String>,
    /// Print the results as JSON on stdout (one object per manager and load, as
    /// `callgen --json` prints one); progress goes to stderr.
    #[arg(long)]
    json: bool,
    /// Serve Prometheus metrics (switches, name service, each manager in turn) over
    /// HTTP at ADDR/metrics while the demo runs (port 0: one the OS picks; printed).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    dashboard: crate::dashboard::DashboardFlag,
}

/// Runs `atmlab demo`.
pub fn demo(args: DemoArgs) -> Result<ExitCode> {
    let mut opts = DemoOptions {
        data_dir: shell::data_dir(),
        reports_dir: args.reports,
        insecure: args.insecure,
        managers: args.managers,
        metrics: args.metrics,
        dashboard: args.dashboard.addr()?,
        ..DemoOptions::default()
    };
    if args.quick {
        opts.loads = vec![100.0, 2_000.0, 20_000.0];
        opts.seconds = 1.0;
    }
    if let Some(l) = args.loads {
        opts.loads = l;
    }
    if let Some(s) = args.seconds {
        opts.seconds = s;
    }
    if opts.loads.iter().any(|l| !l.is_finite() || *l <= 0.0)
        || !opts.seconds.is_finite()
        || opts.seconds <= 0.0
    {
        bail!("--loads must be positive rates and --seconds positive");
    }
    shell::writable_dir("--reports", &opts.reports_dir)?;
    let _lock = shell::lock_data_dir(&opts.data_dir)?;
    shell::init_logging_at("warn");
    let started = std::time::Instant::now();
    let json = args.json;
    let rows = shell::runtime()?.block_on(demo::run(&opts, |line| {
        if json {
            eprintln!("{line}");
        } else {
            say!("{line}");
        }
    }))?;
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| serde_json::json!({ "manager": r.manager, "callgen": r.report.to_json() }))
            .collect();
        say!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "rows": rows,
                "reports": opts.reports_dir,
                "data": opts.data_dir,
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    say!();
    say!("target/s is the Poisson rate asked for; offered/s what it drew in the measured window");
    say!(
        "{:<16} {:>9} {:>10} {:>11} {:>10} {:>10} {:>10} {:>8} {:>7}",
        "manager",
        "target/s",
        "offered/s",
        "setups/s",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "blocked",
        "failed"
    );
    for r in &rows {
        let p = &r.report;
        say!(
            "{:<16} {:>9.0} {:>10.0} {:>11.0} {:>10.3} {:>10.3} {:>10.3} {:>8} {:>7}",
            r.manager,
            p.offered_per_s,
            p.arrived_per_s,
            p.setups_per_s,
            p.mean_setup_ms,
            p.p50_setup_ms,
            p.p99_setup_ms,
            p.blocked,
            p.failed
        );
    }
    say!();
    say!("the paper (xbind, 1996): 170 setups/s at 85 ms mean; 11 ms at light load");
    say!(
        "reports: {} (results.csv, results.json, throughput_delay.svg/.png); data: {}",
        opts.reports_dir.display(),
        opts.data_dir.display()
    );
    say!(
        "done in {:.1} s; every switch audited clean after each manager",
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Connection manager tuning on the command line.
#[derive(Debug, Clone, Args)]
pub struct CmTuning {
    /// sequential | xbind | tina (tina: `cm serve` only)
    #[arg(long, default_value = "xbind")]
    kind: String,
    /// tina: sub-connection setup, sequential | parallel.
    #[arg(long, default_value = "sequential")]
    tina_mode: String,
    /// tina: levels of NML-CPs over the EML-CPs (1: one NML-CP over every switch).
    #[arg(long, default_value_t = 2)]
    tina_depth: u32,
    /// The aggregation threshold T (xbind).
    #[arg(long, default_value_t = 1)]
    threshold: u32,
    /// Let T follow the arrival rate (xbind).
    #[arg(long)]
    adaptive: bool,
    /// Inject faults on the links to the switch servers, e.g. "0.05" (5% each of drop,
    /// duplicate, delay, reorder) or "drop=0.05,reorder=0.02,max_delay=2 ms,seed=7"
    /// (tina: the drop fraction of commands and of answers between each EML-CP and its
    /// switch is lost).
    #[arg(long)]
    faults: Option<String>,
    /// Journal established connections in this SQLite file, or in the PostgreSQL
    /// database at a `postgres://USER[:PASSWORD]@HOST:PORT/DB` URL (one database per
    /// owner; what an active and a standby manager on different hosts share); on start,
    /// audit an existing journal against the switches and take its connections back.
    #[arg(long, value_name = "FILE|URL")]
    journal: Option<atmlab_control::cm::journal::JournalAt>,
    /// With --journal: when the journal holds no connections but the switches hold
    /// cross-connects of this manager's owner, release them (by default the manager
    /// refuses to start, naming them: a fresh or mistyped journal would tear a running
    /// network down).
    #[arg(long, requires = "journal")]
    release_strays: bool,
    /// Take back the whole connections among the cross-connects of this manager's owner
    /// that its journal does not explain (a lost or emptied journal), following each
    /// over the topology's links from a host's port to hosts' ports; release only the
    /// fragments that form no whole connection (`cm serve`: with --journal; `up` keeps
    /// its journal under --data).
    #[arg(long, conflicts_with = "release_strays")]
    adopt: bool,
    /// Reserve identifiers only from this part of every port's VCI range, "LO-HI"
    /// (several managers on disjoint partitions, paper 000 §II-C1).
    #[arg(long)]
    partition: Option<String>,
    /// The owner name of the manager's reservations and connections on the switches
    /// (default "cm-KIND"); several managers need different ones.
    #[arg(long)]
    owner: Option<String>,
    /// How often to sweep the switches for connections of this owner that no call
    /// explains (a commit given up whose answers were all lost), e.g. "10 s"; "off":
    /// only when a switch comes back and when the manager stops.
    #[arg(long, default_value = "10 s")]
    sweep: String,
    /// The setup-age guard (xbind, sequential): refuse at once, as overloaded, a setup
    /// that waited longer than this before the manager took it (e.g. "50 ms"); "off":
    /// no guard.
    #[arg(long, default_value = "off")]
    setup_age: String,
    /// Overload control (xbind, sequential): the bound on calls being set up at once
    /// adapts (additive increase, multiplicative decrease, from 2,000 down to 32) to
    /// keep setups within this latency, and calls past it are refused at once as
    /// overloaded; "off": the bound stays at 2,000 calls.
    #[arg(long, default_value = "10 ms")]
    setup_target: String,
    /// Whether releases count toward the message threshold T (xbind): "count", the
    /// paper's §II-C4 rule; "ride": a release waits without counting and leaves in its
    /// switch's next message or at the flush time-out, the reading §IV-A's Table I fits.
    #[arg(long, default_value = "count", value_parser = ["count", "ride"])]
    releases: String,
}

impl CmTuning {
    /// The manager to run: a core kind with its options, or TINA.
    fn kind(&self) -> Result<ManagerKind> {
        if self.adopt && self.journal.is_none() {
            bail!("--adopt takes connections back into a journal: give --journal");
        }
        if self.kind != "tina" {
            return Ok(ManagerKind::Core(self.config()?, self.options()?));
        }
        let base = TinaConfig::default();
        Ok(ManagerKind::Tina(
            TinaConfig {
                mode: self
                    .tina_mode
                    .parse()
                    .map_err(|e| anyhow!("--tina-mode: {e}"))?,
                depth: self.tina_depth,
                owner: self.owner.clone().unwrap_or(base.owner.clone()),
                // Lost commands and answers between the EML-CPs and their switches.
                faults: self.faults()?,
                sweep_interval: self.sweep_interval()?.map(std::time::Duration::from),
                ..base
            },
            self.options()?,
        ))
    }

    fn options(&self) -> Result<live::LiveOptions> {
        Ok(live::LiveOptions {
            faults: self.faults()?,
            journal: self.journal.clone(),
            release_strays: self.release_strays,
            adopt: self.adopt,
            // Filled from the route object when the manager starts.
            network: None,
            // Set when this manager is elected (--ha).
            fence: None,
        })
    }

    fn sweep_interval(&self) -> Result<Option<atmlab_core::time::Duration>> {
        match self.sweep.as_str() {
            "off" => Ok(None),
            s => {
                let d: atmlab_core::time::Duration = s
                    .parse()
                    .map_err(|e| anyhow!("--sweep {s:?}: {e} (or \"off\")"))?;
                if d.as_picos() == 0 {
                    bail!("--sweep {s:?}: the interval must be positive (or \"off\")");
                }
                Ok(Some(d))
            }
        }
    }

    fn faults(&self) -> Result<Option<FaultPlan>> {
        self.faults
            .as_deref()
            .map(|f| f.parse().map_err(|e| anyhow!("--faults {f:?}: {e}")))
            .transpose()
    }

    fn config(&self) -> Result<CmConfig> {
        let kind = match self.kind.as_str() {
            "xbind" => CmKind::Xbind,
            "sequential" => CmKind::Sequential,
            "tina" => bail!("--kind tina runs under `atmlab cm serve` only"),
            k => bail!("--kind {k:?}: expected sequential, xbind or tina"),
        };
        let partition = match &self.partition {
            None => None,
            Some(p) => Some(parse_partition(p).map_err(|e| anyhow!("--partition {p:?}: {e}"))?),
        };
        let sweep_interval = self.sweep_interval()?;
        let max_setup_age = match self.setup_age.as_str() {
            "off" => None,
            s => Some(
                s.parse::<atmlab_core::time::Duration>()
                    .map_err(|e| anyhow!("--setup-age {s:?}: {e} (or \"off\")"))?,
            ),
        };
        let setup_target = match self.setup_target.as_str() {
            "off" => None,
            s => Some(
                s.parse::<atmlab_core::time::Duration>()
                    .map_err(|e| anyhow!("--setup-target {s:?}: {e} (or \"off\")"))?,
            ),
        };
        let base = CmConfig::new(kind);
        Ok(CmConfig {
            sweep_interval,
            max_setup_age,
            setup_target,
            threshold: self.threshold.max(1),
            adaptive: self.adaptive.then(Regions::default),
            partition,
            owner: self.owner.clone().unwrap_or(base.owner.clone()),
            releases_ride: self.releases == "ride",
            ..base
        })
    }
}

/// "LO-HI", an inclusive VCI range.
fn parse_partition(p: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = p.split_once('-').ok_or("expected LO-HI, e.g. 1000-1999")?;
    let num = |x: &str| {
        x.trim()
            .parse::<u16>()
            .map_err(|_| format!("{x:?} is not a VCI (0-65535)"))
    };
    let (lo, hi) = (num(lo)?, num(hi)?);
    if lo > hi {
        return Err(format!("the range is empty ({lo} > {hi})"));
    }
    Ok((lo, hi))
}

/// `atmlab up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The topology (default: the demo's ring of four switches).
    topo: Option<PathBuf>,
    #[command(flatten)]
    tuning: CmTuning,
    /// Where the connection manager's gRPC listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Print the network's addresses (net.json, with the manager under "cm") as one
    /// JSON object instead of the text.
    #[arg(long)]
    json: bool,
    /// Serve Prometheus metrics (every switch, the name service, the manager) over HTTP
    /// at ADDR/metrics, e.g. 127.0.0.1:9464 (port 0: one the OS picks; the address is
    /// printed and written into net.json as "metrics").
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    dashboard: crate::dashboard::DashboardFlag,
    #[command(flatten)]
    security: Security,
}

/// Runs `atmlab up`.
pub fn up(args: UpArgs) -> Result<ExitCode> {
    shell::init_logging();
    let topology = match &args.topo {
        Some(p) => Topology::load(p)?,
        None => atmlab_lab::launch::default_topology()?,
    };
    // Everything `up` starts keeps its state under the data directory, so that the
    // network survives the process (kill -9) as `net up` and `cm serve --journal` do:
    // each switch's table in journals/NAME.table, the manager's calls in
    // journals/cm.sqlite (unless --journal names another file).
    let data = shell::data_dir();
    let journals = data.join("journals");
    let mut options = args.tuning.options()?;
    if options.journal.is_none() {
        options.journal = Some(journals.join("cm.sqlite").into());
    }
    let config = args.tuning.config()?;
    // The manager's certificate names its owner (the switches refuse it any other).
    let identity = atmlab_rpc::tls::Subject::new(atmlab_rpc::tls::Role::Cm, config.owner.clone());
    let kind = ManagerKind::Core(config, options);
    let dashboard = args.dashboard.addr()?;
    // The options are valid: only now is anything written (the lock first).
    let _lock = shell::lock_data_dir(&data)?;
    let spec = LabSpec {
        topology,
        certs: (!args.security.insecure).then(|| args.security.certs_dir()),
        identity,
        data_dir: data.clone(),
        journals: Some(journals),
    };
    shell::runtime()?.block_on(async move {
        let lab = Lab::start(spec, &mut |_| {}).await?;
        let names = NameClient::connect(&lab.net.names_url(), lab.identity.as_ref()).await?;
        let mut server = ManagerServer::start(
            kind,
            lab.clients.clone(),
            lab.route.clone(),
            &names,
            "xbind",
            args.listen,
            lab.identity.clone(),
        )
        .await?;
        // One set of metrics, at --metrics and beside the dashboard.
        let m = atmlab_lab::metrics::network(&lab.net);
        atmlab_lab::metrics::cm::CmSource::add(&m, "xbind", &mut server);
        let metrics = match args.metrics {
            Some(addr) => {
                Some(atmlab_lab::metrics::http::HttpServer::metrics(addr, m.clone()).await?)
            }
            None => None,
        };
        let source = atmlab_lab::dashboard::DashboardSource {
            names_url: Some(lab.net.names_url()),
            tls: args.security.own_identity("admin")?,
            smds: None,
            local: Default::default(),
        };
        let dashboard = crate::dashboard::start(dashboard, source, m).await?;
        let stop = shell::shutdown_signal();
        let mut info = lab.net.to_json();
        info["cm"] = serde_json::Value::String(server.url.clone());
        if let Some(m) = &metrics {
            info["metrics"] = serde_json::Value::String(m.metrics_url());
        }
        if let Some(d) = &dashboard {
            info["dashboard"] = serde_json::Value::String(d.url());
        }
        let net_json = data.join("net.json");
        std::fs::write(&net_json, serde_json::to_string_pretty(&info)? + "\n")
            .with_context(|| format!("writing {}", net_json.display()))?;
        if args.json {
            for line in &server.recovery {
                eprintln!("start-up audit: {line}");
            }
            say!("{info}");
            server.serve(stop).await?;
            lab.down().await;
            return Ok(ExitCode::SUCCESS);
        }
        for line in &server.recovery {
            say!("start-up audit: {line}");
        }
        say!(
            "network up; connection manager at {}; addresses in {}",
            server.url,
            net_json.display()
        );
        say!("  name service   {}", lab.net.names_url());
        if let Some(m) = &metrics {
            say!("  metrics        {}", m.metrics_url());
        }
        if let Some(d) = &dashboard {
            say!("  dashboard      {}", d.url());
        }
        say!("  data           {}", data.display());
        let sec = match &lab.certs {
            Some(d) => format!("--certs {}", d.display()),
            None => "--insecure".into(),
        };
        let cm_addr = server
            .url
            .split("://")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        say!("try: atmlab callgen --cm {cm_addr} {sec} --rate 100,1000 --pair a:b");
        say!("     atmlab audit --names {} {sec}", lab.net.names_url());
        server.serve(stop).await?;
        lab.down().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// `atmlab cm serve`.
#[derive(Debug, Args)]
pub struct CmArgs {
    #[command(subcommand)]
    command: CmCommand,
}

// Parsed once per process: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
enum CmCommand {
    /// Run a connection manager over the switch servers a name service lists (the route
    /// object discovers the links from them).
    Serve {
        /// The registry: the name service's URL (e.g. https://10.0.0.1:50050), or an etcd
        /// cluster, etcd://HOST:PORT,HOST:PORT,... (names and leases kept in etcd, found
        /// through any member; etcds://... over mutual TLS; see docs/security.md).
        #[arg(long, visible_alias = "registry", value_name = "URL")]
        names: String,
        /// The switches to manage, by name (default: every switch registered).
        #[arg(long, value_delimiter = ',')]
        switches: Vec<String>,
        #[command(flatten)]
        tuning: CmTuning,
        /// Where the manager's gRPC listens.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Our certificate name (default: the owner, as a manager's certificate names
        /// the owner it acts for).
        #[arg(long = "as")]
        who: Option<String>,
        /// Print the manager's address (and its performers', its start-up audit) as one
        /// JSON object instead of the text.
        #[arg(long)]
        json: bool,
        /// Serve Prometheus metrics (the manager's counters, setup latency and accept
        /// loop) over HTTP at ADDR/metrics (port 0: one the OS picks; printed).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Active and standby: run as one of several managers for this owner, elected
        /// through a lease in the etcd cluster at etcd://HOST:PORT,... (election
        /// atmlab/cm/OWNER). The standby prints "standby: ..." and waits; when the
        /// leader's lease lapses (it died, or lost etcd) the standby is elected, takes
        /// the journal (fencing out the old leader's writes), runs the start-up audit
        /// against the switches, registers under the manager's name (callgen --names
        /// finds it there) and serves. Needs a journal both reach: --journal
        /// postgres://... A leader that loses its lease while alive (a partition) exits
        /// at once, status 3. See docs/live.md, "Active and standby managers".
        #[arg(long, value_name = "etcd://HOST:PORT,...")]
        ha: Option<String>,
        /// With --ha: the election lease's TTL. The standby takes over at most about
        /// this long after the leader dies; etcd raises it to its minimum (1.5 election
        /// time-outs: 2 s with etcd's defaults, 1 s with --election-timeout=500).
        #[arg(long, default_value = "2 s", requires = "ha")]
        ha_lease: String,
        #[command(flatten)]
        security: Security,
    },
    /// Size the VPI/VCI cache of an output port with the M/G/∞ model of paper 000 §IV-A
    /// (Table I's method), and show the remote invocations per call for each T (Fig. 10).
    Dimension {
        /// Call arrival rate at the port, calls/s.
        #[arg(long)]
        rate: f64,
        /// Mean replacement latency (from taking an identifier to its commit's answer),
        /// e.g. "0.5 ms".
        #[arg(long)]
        latency: String,
        /// Target hit ratios, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "0.9,0.99,0.999,0.9999")]
        hit: Vec<f64>,
        /// Switch servers on a path, for the invocation count.
        #[arg(long, default_value_t = 3)]
        hops: u32,
        /// The analysis as one JSON object.
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Client(crate::cmclient::ClientCommand),
}

/// `atmlab cm dimension`: the analysis that picks the cache size instead of a guess.
fn dimension(rate: f64, latency: &str, hit: &[f64], hops: u32, json: bool) -> Result<ExitCode> {
    use atmlab_control::cm::dimension::{
        cache_size_for, estimated_hit_ratio, invocations_per_s, offered_identifiers,
    };
    if !rate.is_finite() || rate <= 0.0 {
        bail!("--rate must be a positive number of calls per second, not {rate}");
    }
    let latency: atmlab_core::time::Duration = latency
        .parse()
        .map_err(|e| anyhow!("--latency {latency:?}: {e}"))?;
    if let Some(h) = hit
        .iter()
        .find(|h| !(h.is_finite() && **h > 0.0 && **h < 1.0))
    {
        bail!("--hit {h}: a target hit ratio is between 0 and 1, exclusive");
    }
    let mean = offered_identifiers(rate, latency);
    if json {
        let caches: Vec<serde_json::Value> = hit
            .iter()
            .map(|&h| {
                let size = cache_size_for(mean, h);
                serde_json::json!({
                    "target_hit": h,
                    "cache_size": size,
                    "estimated_hit": size.map(|x| estimated_hit_ratio(mean, x)),
                })
            })
            .collect();
        let invocations: Vec<serde_json::Value> = [1u32, 2, 4, 5, 10, 15, 20]
            .iter()
            .map(|&t| {
                let n = invocations_per_s(rate, hops, t);
                serde_json::json!({"t": t, "per_s": n, "per_call": n / rate})
            })
            .collect();
        say!(
            "{}",
            serde_json::json!({
                "rate_per_s": rate,
                "latency_s": latency.as_secs_f64(),
                "identifiers_in_use_mean": mean,
                "hops": hops,
                "caches": caches,
                "invocations": invocations,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    say!(
        "N_v, identifiers in use at the port, is Poisson with mean λ x latency = {rate} x {:.6} s = {mean:.3} (M/G/∞)",
        latency.as_secs_f64()
    );
    say!(
        "{:>12} {:>12} {:>14}",
        "target hit",
        "cache size",
        "estimated hit"
    );
    for &h in hit {
        match cache_size_for(mean, h) {
            Some(x) => say!("{h:>12} {x:>12} {:>14.6}", estimated_hit_ratio(mean, x)),
            None => say!("{h:>12} {:>12} {:>14}", "-", "-"),
        }
    }
    say!("\nremote invocations at {rate} calls/s over {hops} switch servers, N = 4λ(1 + k/T):");
    say!("{:>4} {:>16} {:>10}", "T", "invocations/s", "per call");
    for t in [1u32, 2, 4, 5, 10, 15, 20] {
        let n = invocations_per_s(rate, hops, t);
        say!("{t:>4} {n:>16.0} {:>10.2}", n / rate);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `atmlab cm`.
pub fn cm(args: CmArgs) -> Result<ExitCode> {
    let (names, switches, tuning, listen, who, json, metrics, ha, security) = match args.command {
        CmCommand::Dimension {
            rate,
            latency,
            hit,
            hops,
            json,
        } => return dimension(rate, &latency, &hit, hops, json),
        CmCommand::Client(c) => return crate::cmclient::run(c),
        CmCommand::Serve {
            names,
            switches,
            tuning,
            listen,
            who,
            json,
            metrics,
            ha,
            ha_lease,
            security,
        } => {
            let ha = match ha {
                None => None,
                Some(spec) => {
                    let ttl: atmlab_core::time::Duration = ha_lease
                        .parse()
                        .map_err(|e| anyhow!("--ha-lease {ha_lease:?}: {e}"))?;
                    Some((spec, std::time::Duration::from(ttl)))
                }
            };
            (
                names, switches, tuning, listen, who, json, metrics, ha, security,
            )
        }
    };
    shell::init_logging();
    let mut kind = tuning.kind()?;
    let (owner, journal) = match &kind {
        ManagerKind::Core(c, o) => (c.owner.clone(), o.journal.clone()),
        ManagerKind::Tina(c, o) => (c.owner.clone(), o.journal.clone()),
    };
    if ha.is_some() && !journal.as_ref().is_some_and(|j| j.is_shared()) {
        bail!(
            "--ha: the standby takes over from the leader's journal, so both must reach it: \
             give --journal postgres://USER@HOST:PORT/DB (a SQLite file is one host's)"
        );
    }
    let who = who.unwrap_or_else(|| owner.clone());
    shell::runtime()?.block_on(async move {
        let id = security.identity(&who)?;
        let nc = NameClient::connect(&names, id.as_ref()).await?;
        let clients = switch_clients(&nc, &switches, id.as_ref()).await?;
        if clients.is_empty() {
            bail!("the name service at {names} lists no switch servers");
        }
        let (route, refresher) = atmlab_control::route::start(&names, id.as_ref()).await?;
        let mut stop = Box::pin(shell::shutdown_signal());
        // Active and standby: everything above is ready before the campaign, so that a
        // standby elected has only the journal, the audit and the registration to do.
        let leader = match &ha {
            None => None,
            Some((spec, ttl)) => {
                let etcd = atmlab_control::etcd::EtcdClient::connect(spec).await?;
                let lease = etcd.grant(*ttl).await?;
                let election = format!("atmlab/cm/{owner}");
                say!(
                    "standby: campaigning for {election} at {spec} (lease {} s)",
                    lease.ttl().as_secs()
                );
                let elections = etcd.election();
                let campaign = elections.campaign(&election, who.clone(), &lease);
                let leader = tokio::select! {
                    l = campaign => l?,
                    () = &mut stop => {
                        let _ = lease.revoke().await;
                        return Ok(ExitCode::SUCCESS);
                    }
                };
                // The key's creation revision grows with every election: the fencing
                // token the journal is taken with.
                let token = u64::try_from(leader.revision()).unwrap_or(0);
                say!("leader: elected for {election} (fencing token {token})");
                match &mut kind {
                    ManagerKind::Core(_, o) | ManagerKind::Tina(_, o) => o.fence = Some(token),
                }
                Some((leader, lease))
            }
        };
        let start = ManagerServer::start(kind, clients, route, &nc, &who, listen, id);
        let mut server = match &leader {
            None => start.await?,
            Some((l, _)) => tokio::select! {
                s = start => s?,
                () = l.lost() => deposed(),
            },
        };
        let metrics = match metrics {
            Some(addr) => {
                let m = atmlab_lab::metrics::Metrics::new();
                atmlab_lab::metrics::cm::CmSource::add(&m, &who, &mut server);
                Some(atmlab_lab::metrics::http::HttpServer::metrics(addr, m).await?)
            }
            None => None,
        };
        if json {
            let scheme = server.url.split("://").next().unwrap_or("http").to_string();
            let performers: serde_json::Map<String, serde_json::Value> = server
                .performers
                .iter()
                .map(|(name, at)| (name.clone(), format!("{scheme}://{at}").into()))
                .collect();
            say!(
                "{}",
                serde_json::json!({
                    "cm": server.url,
                    "owner": who,
                    "tina": server.tina_config().map(|c| serde_json::json!({
                        "mode": c.mode.name(), "depth": c.depth,
                    })),
                    "performers": performers,
                    "metrics": metrics.as_ref().map(|m| m.metrics_url()),
                    "start_up_audit": server.recovery,
                })
            );
            serve_leading(server, stop, leader).await?;
            refresher.abort();
            return Ok(ExitCode::SUCCESS);
        }
        for line in &server.recovery {
            say!("start-up audit: {line}");
        }
        match server.tina_config() {
            Some(c) => say!(
                "connection manager (tina, {}, {} NML-CP level(s)): {}",
                c.mode.name(),
                c.depth,
                server.url
            ),
            None => say!("connection manager: {}", server.url),
        }
        let scheme = server.url.split("://").next().unwrap_or("http").to_string();
        for (name, at) in &server.performers {
            say!("  performer {name}: {scheme}://{at}");
        }
        if let Some(m) = &metrics {
            say!("  metrics: {}", m.metrics_url());
        }
        serve_leading(server, stop, leader).await?;
        refresher.abort();
        Ok(ExitCode::SUCCESS)
    })
}

/// A leader whose lease is lost while it runs (cut off from etcd, or paused past its
/// TTL) stops at once: another manager may be elected from now on, and two managers of
/// one owner would release each other's calls. The process ends without a clean stop
/// (no final sweep, no release): the calls stay up for the new leader, which takes them
/// from the journal.
fn deposed() -> ! {
    eprintln!(
        "error: deposed: this manager's election lease was lost, so another manager may \
         lead its owner now; stopping at once (its calls stay up for the new leader)"
    );
    std::process::exit(3)
}

/// Serves until `stop`; a leader (--ha) also until its lease is lost ([`deposed`]), and
/// on a clean stop resigns, so that the standby takes over at once.
async fn serve_leading(
    server: ManagerServer,
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    leader: Option<(atmlab_control::etcd::Leader, atmlab_control::etcd::Lease)>,
) -> Result<()> {
    match leader {
        None => server.serve(stop).await?,
        Some((l, lease)) => {
            tokio::select! {
                r = server.serve(stop) => r?,
                () = l.lost() => deposed(),
            }
            let _ = l.resign().await;
            let _ = lease.revoke().await;
        }
    }
    Ok(())
}

/// `atmlab callgen`.
#[derive(Debug, Args)]
pub struct CallgenArgs {
    /// The connection manager's gRPC address; several, comma-separated, spread the
    /// calls round robin over them. With --names: the managers' registered names
    /// (cm/NAME, or NAME: as `cm serve --as` or its owner registers it, e.g. cm-xbind).
    #[arg(long, value_delimiter = ',', required_unless_present = "names")]
    cm: Vec<String>,
    /// Find the managers in this registry (the name service's URL, or an etcd cluster,
    /// etcd://HOST:PORT,... or etcds://...): those --cm names, or without --cm every
    /// connection manager registered; and find each again when it stops answering:
    /// with active and standby managers (`cm serve --ha`), the calls go on through the
    /// standby that takes over. A setup in flight when a manager died fails; later
    /// setups and every release wait up to --patience for a manager at the name. A
    /// manager found by name must show a certificate of that name.
    #[arg(long, visible_alias = "registry", value_name = "URL")]
    names: Option<String>,
    /// Pipeline the calls on one Calls stream per manager (many in flight, answers
    /// matched by id as they complete) instead of one unary AddConnection and
    /// DeleteConnection round trip each. The xbind and sequential managers serve it
    /// (tina answers UNIMPLEMENTED).
    #[arg(long, conflicts_with = "names")]
    stream: bool,
    /// A call not set up within this long is abandoned: counted as its own cause
    /// ("deadline"), and released when its setup completes later, never left up.
    #[arg(long, value_name = "DURATION")]
    deadline: Option<String>,
    /// With --names: how long a setup or release waits for a manager at the name.
    #[arg(long, default_value = "10 s", requires = "names")]
    patience: String,
    /// Offered rates, calls/s (Poisson), comma-separated: one run each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100",
        allow_negative_numbers = true
    )]
    rate: Vec<f64>,
    /// Seconds of arrivals per rate.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Mean holding time (exponential).
    #[arg(long, default_value = "5 ms")]
    holding: String,
    /// Endpoint pairs "src:dst" (round robin).
    #[arg(long = "pair", default_value = "a:b")]
    pairs: Vec<String>,
    /// Peak cell rate of each call (CBR), cells/s.
    #[arg(long, default_value_t = 10.0)]
    pcr: f64,
    /// Seed of the arrival and holding streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON object per rate.
    #[arg(long)]
    json: bool,
    /// Exit 0 even when some calls failed (not when all did): a fault-injection run
    /// expects failures. Blocked calls (refused for lack of resources) are never an
    /// error.
    #[arg(long)]
    allow_failures: bool,
    /// Also write results.csv, results.json and the throughput-delay plot (SVG, PNG)
    /// into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The curve's label in the plot and CSV (e.g. "xbind T=4").
    #[arg(long, default_value = "cm")]
    label: String,
    /// Our certificate name.
    #[arg(long = "as", default_value = "admin")]
    who: String,
    #[command(flatten)]
    security: Security,
}

/// The registered names (`cm/NAME`) of the managers `names` (`cm/NAME` or `NAME`) in
/// the registry `nc` at `url`, each looked up once (a name nobody registered is an
/// error now, not a wait at every call), or of every manager registered there when
/// `names` is empty.
async fn manager_names(nc: &NameClient, url: &str, names: &[String]) -> Result<Vec<String>> {
    if names.is_empty() {
        let all: Vec<_> = nc
            .list(Some(atmlab_control::names::ObjectKind::ConnectionManager))
            .await?
            .into_iter()
            .map(|(o, _)| o.name)
            .collect();
        if all.is_empty() {
            bail!("the registry at {url} lists no connection manager");
        }
        return Ok(all);
    }
    let mut out = Vec::new();
    for name in names {
        let name = if name.starts_with("cm/") {
            name.clone()
        } else {
            format!("cm/{name}")
        };
        nc.resolve(&name)
            .await
            .with_context(|| format!("looking {name} up in the registry at {url}"))?;
        out.push(name);
    }
    Ok(out)
}

/// Runs `atmlab callgen`.
pub fn callgen(args: CallgenArgs) -> Result<ExitCode> {
    let holding: atmlab_core::time::Duration = args
        .holding
        .parse()
        .map_err(|e| anyhow!("--holding: {e}"))?;
    let pairs = args
        .pairs
        .iter()
        .map(|p| {
            p.split_once(':')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| anyhow!("--pair {p:?}: expected src:dst"))
        })
        .collect::<Result<Vec<_>>>()?;
    if args.rate.iter().any(|r| !r.is_finite() || *r <= 0.0)
        || !args.seconds.is_finite()
        || args.seconds <= 0.0
    {
        bail!("--rate must be positive and --seconds positive");
    }
    if let Some(dir) = &args.out {
        shell::writable_dir("--out", dir)?;
    }
    let patience: atmlab_core::time::Duration = args
        .patience
        .parse()
        .map_err(|e| anyhow!("--patience: {e}"))?;
    match &args.names {
        Some(n) => args.security.peer(n),
        None => {
            for cm in &args.cm {
                args.security.peer(cm);
            }
        }
    }
    shell::runtime()?.block_on(async move {
        let id = args.security.identity(&args.who)?;
        match &args.names {
            None => {
                let mut channels = Vec::new();
                for cm in &args.cm {
                    let a_manager = atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Cm);
                    let ch = atmlab_rpc::channel_to(cm, id.as_ref(), a_manager)
                        .await
                        .with_context(|| format!("connecting to the connection manager at {cm}"))?;
                    channels.push((cm, ch));
                }
                if args.stream {
                    let mut targets = Vec::new();
                    for (cm, ch) in channels {
                        let s = callgen::StreamCm::open(ch).await.map_err(|e| {
                            anyhow!("opening a Calls stream to {cm}: {}", e.message)
                        })?;
                        targets.push(s);
                    }
                    callgen_runs(&args, callgen::Spread::new(targets), &holding, &pairs).await
                } else {
                    let targets = channels.into_iter().map(|(_, ch)| RemoteCm::new(ch));
                    let targets = targets.collect();
                    callgen_runs(&args, callgen::Spread::new(targets), &holding, &pairs).await
                }
            }
            Some(url) => {
                let nc = NameClient::connect(url, id.as_ref())
                    .await
                    .with_context(|| format!("connecting to the registry at {url}"))?;
                let targets = manager_names(&nc, url, &args.cm)
                    .await?
                    .iter()
                    .map(|cm| callgen::NamedCm::new(nc.clone(), cm, id.clone(), patience.into()))
                    .collect();
                callgen_runs(&args, callgen::Spread::new(targets), &holding, &pairs).await
            }
        }
    })
}

/// Offers each rate of `args` to `target` and reports.
async fn callgen_runs<T: callgen::CallTarget>(
    args: &CallgenArgs,
    target: callgen::Spread<T>,
    holding: &atmlab_core::time::Duration,
    pairs: &[(String, String)],
) -> Result<ExitCode> {
    let holding = *holding;
    let deadline = match &args.deadline {
        Some(d) => {
            let d: atmlab_core::time::Duration =
                d.parse().map_err(|e| anyhow!("--deadline: {e}"))?;
            Some(Duration::from(d))
        }
        None => None,
    };
    {
        let mut rows = Vec::new();
        if !args.json {
            say!(
                "{:>10} {:>11} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7}",
                "offered/s",
                "setups/s",
                "mean ms",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "blocked",
                "failed"
            );
        }
        for &rate in &args.rate {
            let load = Load {
                rate,
                duration: Duration::from_secs_f64(args.seconds),
                holding: holding.into(),
                fixed_holding: false,
                precise: false,
                pairs: pairs.to_vec(),
                traffic: atmlab_core::traffic::TrafficDescriptor::cbr(
                    atmlab_core::units::CellRate(args.pcr),
                ),
                seed: args.seed,
            };
            let r = callgen::run_with_deadline(target.clone(), &load, deadline).await;
            rows.push(demo::DemoRow {
                manager: args.label.clone(),
                report: r.clone(),
            });
            if args.json {
                say!("{}", r.to_json());
            } else {
                say!(
                    "{:>10.0} {:>11.0} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8} {:>7}",
                    r.offered_per_s,
                    r.setups_per_s,
                    r.mean_setup_ms,
                    r.p50_setup_ms,
                    r.p95_setup_ms,
                    r.p99_setup_ms,
                    r.blocked,
                    r.failed
                );
                if deadline.is_some() {
                    say!(
                        "{:>10} abandoned at the deadline (released if set up later)",
                        r.abandoned
                    );
                }
            }
        }
        if let Some(dir) = &args.out {
            demo::write_reports(dir, &rows)?;
            if !args.json {
                say!(
                    "wrote {} (results.csv, results.json, throughput_delay.svg/.png)",
                    dir.display()
                );
            }
        }
        // Why calls did not go through, most frequent first, over every rate.
        let mut causes: std::collections::BTreeMap<&str, u64> = Default::default();
        for row in &rows {
            for (cause, n) in &row.report.causes {
                *causes.entry(cause.as_str()).or_default() += n;
            }
        }
        let mut causes: Vec<(&str, u64)> = causes.into_iter().collect();
        causes.sort_by_key(|c| std::cmp::Reverse(c.1));
        if !causes.is_empty() {
            eprintln!("calls refused or failed, by cause:");
            for (cause, n) in &causes {
                eprintln!("{n:>10}  {cause}");
            }
        }
        let established: u64 = rows.iter().map(|r| r.report.established).sum();
        let offered: u64 = rows.iter().map(|r| r.report.offered).sum();
        if offered > 0 && established == 0 {
            let why = match shell::tls_mismatch() {
                Some(line) => line,
                None => causes.first().map_or("no answer", |c| c.0).to_string(),
            };
            eprintln!("error: not one of {offered} calls was set up ({why})");
            return Ok(ExitCode::FAILURE);
        }
        let failed: u64 = rows.iter().map(|r| r.report.failed).sum();
        if failed > 0 && !args.allow_failures {
            let why = causes.first().map_or("no answer", |c| c.0);
            eprintln!(
                "error: {failed} of {offered} calls failed (first cause: {why}); \
                 --allow-failures accepts that"
            );
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }
}
