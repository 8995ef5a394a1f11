//! The model kind `control`: the control planes of paper 000 (xbind, §II-§IV) and paper
//! 001 (TINA's connection performers, §1.2.1, §4.3) on the simulator, with the real
//! cores (the connection manager, the LNC, NML-CP and EML-CP performers, the switches,
//! the route object and its cache) driven in virtual time by its `shell` and `tina`
//! modules, at costs set by a [`CostProfile`]. The topology is the live network's own file
//! (`atmlab_control::topology`), so a scenario and `atmlab net up` describe one network.
//!
//! A scenario:
//!
//! ```toml
//! model = "control"
//! [run]
//! duration = "600 s"
//! warmup = "30 s"
//! replications = 5
//! seed = 1
//! [params]
//! topology = "topologies/line3.toml"   # relative to the scenario, else to the cwd
//! capacity = "1250 cells/s"            # optional: every port's admissible bandwidth
//! manager = { kind = "xbind", threshold = 4, flush = "10 ms" }
//! arrival = { kind = "poisson", rate = "100 /s" }
//! holding = { kind = "exponential", mean = "80 ms" }
//! pcr = "100 /s"                      # or qos = { class = "cbr", frame_rate = "25 /s", frame_size = 4000, delay = "100 ms" }
//! pairs = ["a:b"]
//! profile = "paper-000"
//! ```
//!
//! Managers: `xbind` (caches, aggregation with `threshold` T and `flush`, an optional
//! `adaptive` T, asynchronous: no thread held while a call waits), `sequential`
//! (paper 000's synchronous baseline: one call at a time) and `threaded` (the same with a
//! pool of `threads`, its §III-B "multithreaded version"). Faults (loss and delay between
//! the manager and the switches) are recovered by the core's re-sends; crashes of a
//! switch server or a manager (`faults.crashes`, see [`crash`]) by the cores' recovery,
//! as live (reconcile, the journal, the start-up audit). And `tina`
//! (paper 001): the LNC over `depth` levels of NML-CPs (`fanout` children each) over one
//! EML-CP per switch, `mode` sequential (Alcin's) or parallel sub-connection setup, the
//! EML-CPs optionally co-located with their NML-CP (`colocate`); it takes no faults.
//! Several managers (`managers = n`) share the switches, each reserving from its own
//! partition of every port's VCI range (paper 000 §II-C1), the calls dealt to them in
//! turn.

pub mod calibrate;
pub mod costs;
pub mod crash;
mod driver;
mod probes;
pub mod qos;
mod servers;
mod shell;
mod tina;

use std::path::{Path, PathBuf};

use atmlab_control::cm::adaptive::Regions;
use atmlab_control::cm::core::CmKind;
use atmlab_control::route::NetworkView;
use atmlab_control::tina::SetupMode;
use atmlab_control::topology::Topology;
use atmlab_core::time::Duration;
use atmlab_core::units::CellRate;
use atmlab_fabric::SwitchConfig;
use atmlab_sim::SimError;
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication};
use atmlab_sim::scenario::{Params, RunConfig};

pub use costs::{CostProfile, Reading};
pub use probes::CDF_POINTS;

/// The manager of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerSpec {
    /// The core's kind.
    pub kind: CmKind,
    /// Its name in the scenario (`xbind`, `sequential`, `threaded`).
    pub name: &'static str,
    /// The aggregation threshold T.
    pub threshold: u32,
    /// The aggregators' flush time-out.
    pub flush: Duration,
    /// T following the arrival rate.
    pub adaptive: Option<Regions>,
    /// Threads (1 but for `threaded`).
    pub threads: u32,
    /// Whether a thread is held for a call's whole operation (synchronous calls).
    pub blocking: bool,
    /// How long a cached route lives (xbind: the paper's 5 s; the synchronous managers
    /// ask the route object every time).
    pub route_ttl: Duration,
    /// Identifiers reserved per cache fill, the low mark that triggers a refill, and
    /// the most a cache keeps (xbind; `CmConfig`'s defaults otherwise).
    pub cache: (u32, u32, u32),
    /// TINA's performers instead of a connection manager core (`kind = "tina"`).
    pub tina: Option<TinaSpec>,
    /// Managers sharing the switches, each on its own partition of every port's VCI
    /// range (paper 000 §II-C1); calls are dealt to them in turn.
    pub managers: u32,
    /// Releases ride: they count not toward T (xbind, `releases = "ride"`; the reading
    /// of paper 000 §IV-A that its Table I fits; `CmConfig::releases_ride`).
    pub releases_ride: bool,
}

/// The shape of a TINA deployment (paper 001 §1.2.1, §4.3), as
/// `atmlab_control::tina::TinaConfig` gives it to the live one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TinaSpec {
    /// Sequential (Alcin's) or parallel sub-connection setup.
    pub mode: SetupMode,
    /// Levels of NML-CPs (1: one NML-CP over every EML-CP, Alcin's shape).
    pub depth: u32,
    /// Children per NML-CP above the lowest level.
    pub fanout: u32,
    /// Each EML-CP in its NML-CP's address space: their invocations are local calls,
    /// neither marshalled nor on the wire nor counted (paper 001 §4.3's second Alcin
    /// configuration).
    pub colocate: bool,
}

/// How long a call is held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Holding {
    /// Exponential with this mean.
    Exponential(Duration),
    /// Always this.
    Deterministic(Duration),
}

/// Faults on the messages between the manager and the switches (as the live fault
/// injector, `atmlab_control::cm::faults`): each message is lost with probability
/// `loss`, and delayed by a uniform extra up to `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Probability that a message is lost, in [0, 1).
    pub loss: f64,
    /// The most a message is delayed on top of the wire's latency.
    pub max_delay: Duration,
}

/// Which hosts calls go between.
#[derive(Debug, Clone, PartialEq)]
pub enum Pairs {
    /// These (source, destination) pairs, indices into the hosts.
    List(Vec<(usize, usize)>),
    /// Any two distinct hosts.
    Any,
}

/// A validated scenario point of the `control` model.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// Each switch's configuration, in the topology's order.
    pub switches: Vec<SwitchConfig>,
    /// The route object's view of the topology.
    pub view: NetworkView,
    /// The manager.
    pub manager: ManagerSpec,
    /// Calls per second (Poisson).
    pub arrival_rate: f64,
    /// How long each call is held once established.
    pub holding: Holding,
    /// The peak cell rate each call's route must have room for, cells/s (the contract's).
    pub pcr: f64,
    /// What each call asks for: a CBR rate, or a user's QoS the QoS mapper maps.
    pub contract: qos::Contract,
    /// The topology's hosts, by index.
    pub hosts: Vec<String>,
    /// The host pairs calls go between, chosen uniformly.
    pub pairs: Pairs,
    /// The costs.
    pub costs: CostProfile,
    /// Faults between the manager and the switches.
    pub faults: Faults,
    /// Crashes of switch servers and managers, and whether the plane recovers.
    pub crashes: crash::Crashes,
}

/// The `control` model kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ControlKind;

/// The metrics, in the order a replication reports them. Per call means per call
/// attempted in the period; latencies are in seconds; utilisations are the busiest
/// server's share of its threads' time. From `cache_hit_ratio` on, the managers' plane
/// only (TINA's reports NaN):
///
/// - `cache_hit_ratio`: identifier lookups served from the manager's caches;
/// - `nv_mean`, `nv_dispersion`: `N_v`, the identifiers in use at the first output
///   port's cache (paper 000 §IV-A), time-averaged: its mean and its variance over its
///   mean (1 for the Poisson law M/G/∞ gives);
/// - `switch_messages_per_call`: messages the manager sent to switch servers (re-sends
///   included), each one remote invocation with its answer (§IV-B, Fig. 10);
/// - `nv_arrival_mean`: the mean of `N_v` as arriving calls found it;
/// - `nv_poisson_gap`: Fig. 9's check, the largest gap between the measured P{N_v <= x}
///   at arrivals and the Poisson law with that mean, where the latter exceeds 0.9;
/// - `nv_cdf_0` .. `nv_cdf_31`: P{N_v <= x} at arrivals; a cache of X identifiers hits
///   with `nv_cdf_{X-1}` (Table I).
///
/// `processor_utilisation` is the shared processors' share of their time worked (the
/// profile's `cpus`, the call generator's work included); 0 when each server has a
/// processor of its own (the papers' testbeds), whose shares are the two before it.
///
/// The managers' probes are read by `probes` from the core's own counters.
pub const METRICS: &[&str] = &[
    "blocking_probability",
    "failure_probability",
    "mean_setup_latency",
    "p99_setup_latency",
    "p5_setup_latency",
    "p95_setup_latency",
    "setups_per_s",
    "offered_per_s",
    "invocations_per_call",
    "cache_hit_ratio",
    "manager_utilisation",
    "switch_utilisation",
    "processor_utilisation",
    "nv_mean",
    "nv_dispersion",
    "switch_messages_per_call",
    "nv_arrival_mean",
    "nv_poisson_gap",
    "nv_cdf_0",
    "nv_cdf_1",
    "nv_cdf_2",
    "nv_cdf_3",
    "nv_cdf_4",
    "nv_cdf_5",
    "nv_cdf_6",
    "nv_cdf_7",
    "nv_cdf_8",
    "nv_cdf_9",
    "nv_cdf_10",
    "nv_cdf_11",
    "nv_cdf_12",
    "nv_cdf_13",
    "nv_cdf_14",
    "nv_cdf_15",
    "nv_cdf_16",
    "nv_cdf_17",
    "nv_cdf_18",
    "nv_cdf_19",
    "nv_cdf_20",
    "nv_cdf_21",
    "nv_cdf_22",
    "nv_cdf_23",
    "nv_cdf_24",
    "nv_cdf_25",
    "nv_cdf_26",
    "nv_cdf_27",
    "nv_cdf_28",
    "nv_cdf_29",
    "nv_cdf_30",
    "nv_cdf_31",
    // Only with crash faults (`crash::CRASH_METRICS`, in that order).
    "crashes",
    "crash_calls_lost",
    "crash_calls_recovered",
    "crash_strays_released",
    "leaked_calls",
    "leaked_connections",
    "leaked_reservations",
];

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "topology",
        doc: "the live network's topology file (TOML), relative to the scenario or the working directory",
    },
    ParamDoc {
        key: "capacity",
        doc: "optional: every port's admissible bandwidth, e.g. \"1250 cells/s\" (default: the topology's)",
    },
    ParamDoc {
        key: "manager",
        doc: "{ kind = \"xbind\" | \"sequential\" | \"threaded\", threshold = T (xbind, default 1), flush = duration (xbind, default \"1 s\", the paper's), threads = n (threaded, default 4), route_ttl = duration (xbind, default \"5 s\"), managers = n (default 1: several managers on disjoint partitions of every port's VCI range, calls dealt in turn), adaptive = \"paper\" | { bounds = [calls/s...], thresholds = [T...], window = duration } (xbind: T follows the arrival rate, §IV-B), cache_fill, cache_low, cache_max = identifiers per fill, refill mark, most kept (xbind, defaults 64, 16, 256), releases = \"count\" | \"ride\" (xbind, default count: releases count toward T, §II-C4; ride: they wait for the next message without counting, the reading §IV-A's Table I fits) }; or { kind = \"tina\", mode = \"sequential\" | \"parallel\" (default sequential), depth = NML-CP levels (default 2), fanout = children per NML-CP (default 2), colocate = EML-CPs in their NML-CP's process (default false), threads = per performer (default 1), route_ttl = duration (default \"0 s\": the route object asked every call) }",
    },
    ParamDoc {
        key: "arrival",
        doc: "{ kind = \"poisson\", rate = \"100 /s\" }",
    },
    ParamDoc {
        key: "holding",
        doc: "{ kind = \"exponential\" | \"deterministic\", mean = duration }",
    },
    ParamDoc {
        key: "pcr",
        doc: "each call's CBR peak cell rate, e.g. \"100 /s\" (or give `qos`)",
    },
    ParamDoc {
        key: "qos",
        doc: "instead of `pcr`: each call's QoS as an application states it, mapped at every setup by the QoS mapper core (paper 000 step 2): { class = \"cbr\" | \"rt-vbr\" | \"nrt-vbr\" | \"ubr\", frame_rate = \"25 /s\", frame_size = octets, peak_frame_size, peak_frame_rate, frame_loss, delay }",
    },
    ParamDoc {
        key: "pairs",
        doc: "host pairs calls go between, [\"a:b\", ...], or \"any\" (every ordered pair of distinct hosts); each call picks one uniformly",
    },
    ParamDoc {
        key: "faults",
        doc: "optional: { loss = probability, delay = duration } on every message between the manager and the switches (lost messages are re-sent by the manager after its command time-out); crashes = [{ node = \"s2\" | \"manager\" | \"manager:N\", at = duration (once, from the run's start) or mtbf = duration (Poisson crashes: exponential up-times of that mean), down = duration }, ...] (INET's crash/startup operations, ns-3's scheduled shutdowns): a switch server restarts from its journal (connections kept, reservations and answers lost) and each manager reconciles with it; a manager restarts from its journal, takes its calls back and runs the start-up audit; each manager sweeps every switch for its strays every sweep = duration (default the live manager's 10 s; \"0 s\": never); recovery = false (default true) restarts without any of these, the ablation. Adds the metrics crashes, crash_calls_lost, crash_calls_recovered, crash_strays_released and, from an audit after the run drains, leaked_calls, leaked_connections, leaked_reservations",
    },
    ParamDoc {
        key: "profile",
        doc: "the costs: \"paper-000\", \"paper-001\", \"fast\", \"measured\" (profiles/measured.toml, from `atmlab sim measure-costs`), { file = PATH }, or a table { base = NAME, name, latency, per_message, per_command, switch_per_command, manager_step, route_work, qos_work, oneway, stall_probability, stall_mean, switch_threads, colocated, links, cpus, coalesce, awake_message, client_work, wakeup, idle_wake = { quiet = [DURATION...], extra = [DURATION...] } }",
    },
];

/// The unit of each metric (`sim run`'s table and plot axes; `*` ends a prefix).
const METRIC_UNITS: &[(&str, &str)] = &[
    ("blocking_probability", "ratio"),
    ("failure_probability", "ratio"),
    ("mean_setup_latency", "s"),
    ("p99_setup_latency", "s"),
    ("p5_setup_latency", "s"),
    ("p95_setup_latency", "s"),
    ("setups_per_s", "/s"),
    ("offered_per_s", "/s"),
    ("invocations_per_call", "per call"),
    ("cache_hit_ratio", "ratio"),
    ("manager_utilisation", "ratio"),
    ("switch_utilisation", "ratio"),
    ("processor_utilisation", "ratio"),
    ("nv_mean", "identifiers"),
    ("nv_dispersion", "ratio"),
    ("switch_messages_per_call", "per call"),
    ("nv_arrival_mean", "identifiers"),
    ("nv_poisson_gap", "probability"),
    ("nv_cdf_*", "probability"),
    ("crashes", "crashes"),
    ("crash_strays_released", "connections"),
    ("crash_*", "calls"),
    ("leaked_calls", "calls"),
    ("leaked_connections", "connections"),
    ("leaked_reservations", "identifiers"),
];

impl ModelKind for ControlKind {
    fn name(&self) -> &'static str {
        "control"
    }
    fn summary(&self) -> &'static str {
        "papers 000 and 001's control planes: the real connection manager (or TINA performers), switch and route cores in virtual time"
    }
    fn parameters(&self) -> &'static [ParamDoc] {
        PARAMS
    }
    fn metrics(&self) -> &'static [&'static str] {
        METRICS
    }
    fn metric_unit(&self, name: &str) -> Option<&'static str> {
        atmlab_sim::model::unit_in(METRIC_UNITS, name)
    }
    fn conditional_metrics(&self) -> &'static [&'static str] {
        crash::CRASH_METRICS
    }
    fn prepare(&self, p: &Params<'_>, _run: &RunConfig) -> Result<Box<dyn Prepared>, SimError> {
        Ok(Box::new(ControlConfig::from_params(p)?))
    }
}

impl Prepared for ControlConfig {
    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        self.run_replication(rep)
    }
}

impl ControlConfig {
    /// Runs one replication: the managers' plane, or TINA's performers' (`tina`). The
    /// choice is made here, so that the two shells share the loop (`driver::drive`)
    /// without depending on each other.
    fn run_replication(&self, rep: &Replication) -> Result<RepResult, SimError> {
        match &self.manager.tina {
            Some(t) => {
                let (d, warmup) = driver::lengths(rep)?;
                driver::drive(&mut tina::TinaPlane::new(self, t, rep)?, rep, d, warmup)
            }
            None => self.run_managers(rep),
        }
    }
}

/// Where a path a scenario names is: beside the scenario, else as given.
pub(crate) fn resolve(scenario: &str, path: &str) -> PathBuf {
    let beside = Path::new(scenario)
        .parent()
        .map(|d| d.join(path))
        .unwrap_or_else(|| PathBuf::from(path));
    if beside.exists() {
        beside
    } else {
        PathBuf::from(path)
    }
}

/// The repository's small topologies, built in, so that scenarios embedded in the binary
/// (the reproductions') run from any directory: `topologies/NAME` is read from disk when
/// it is there, else from here.
const BUILT_IN: &[(&str, &str)] = &[
    (
        "line3.toml",
        include_str!("../../../../topologies/line3.toml"),
    ),
    (
        "chain3.toml",
        include_str!("../../../../topologies/chain3.toml"),
    ),
    (
        "tree4.toml",
        include_str!("../../../../topologies/tree4.toml"),
    ),
];

/// A topology file's text: from disk, else a built-in topology of the same file name.
fn topology_text(file: &Path) -> Result<String, String> {
    match std::fs::read_to_string(file) {
        Ok(t) => Ok(t),
        Err(e) => {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            BUILT_IN
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| (*t).to_string())
                .ok_or_else(|| format!("{}: {e}", file.display()))
        }
    }
}

impl ControlConfig {
    /// Reads and checks a scenario point's parameters.
    pub fn from_params(p: &Params<'_>) -> Result<ControlConfig, SimError> {
        let topo_path = p.string("topology")?;
        let file = resolve(p.file(), topo_path);
        let text = topology_text(&file).map_err(|e| p.error("topology", e))?;
        let topology = Topology::parse(&text, &file.display().to_string())
            .map_err(|e| p.error("topology", e.to_string()))?;
        let capacity = if p.has("capacity") {
            Some(p.positive_rate("capacity")?)
        } else {
            None
        };
        ControlConfig::build(p, &topology, capacity)
    }

    fn build(
        p: &Params<'_>,
        topology: &Topology,
        capacity: Option<f64>,
    ) -> Result<ControlConfig, SimError> {
        let mut switches = Vec::new();
        let configs = topology
            .switch_configs()
            .map_err(|e| p.error("topology", e.to_string()))?;
        for (s, mut c) in topology.switches.iter().zip(configs) {
            if let Some(cap) = capacity {
                for port in &mut c.ports {
                    if cap > port.link_rate.to_cell_rate().0 {
                        return Err(p.error(
                            "capacity",
                            format!(
                                "{cap} cells/s is more than the link carries on {}:{}",
                                s.name, port.id.0
                            ),
                        ));
                    }
                    port.capacity = CellRate(cap);
                }
            }
            switches.push(c);
        }
        let mut view = topology
            .view()
            .map_err(|e| p.error("topology", e.to_string()))?;
        for (name, ports) in &mut view.switches {
            if let Some(c) = switches.iter().find(|c| &c.name == name) {
                for ps in ports.iter_mut() {
                    if let Some(pc) = c.ports.iter().find(|pc| pc.id.0 == ps.port) {
                        ps.capacity = pc.capacity.0;
                    }
                }
            }
        }
        let manager = manager(p)?;
        let arrival = p.table("arrival")?;
        match arrival.string("kind")? {
            "poisson" => {}
            other => {
                return Err(arrival.error("kind", format!("{other:?}: only \"poisson\" arrivals")));
            }
        }
        let arrival_rate = arrival.positive_rate("rate")?;
        arrival.finish()?;
        let h = p.table("holding")?;
        let mean = h.duration("mean")?;
        if mean == Duration::ZERO {
            return Err(h.error("mean", "must be longer than zero"));
        }
        let holding = match h.string("kind")? {
            "exponential" => Holding::Exponential(mean),
            "deterministic" => Holding::Deterministic(mean),
            other => {
                return Err(h.error(
                    "kind",
                    format!("{other:?}: expected \"exponential\" or \"deterministic\""),
                ));
            }
        };
        h.finish()?;
        let contract = qos::Contract::from_params(p)?;
        let pcr = contract.pcr().map_err(|e| p.error("qos", e))?;
        let hosts: Vec<String> = topology.hosts.iter().map(|h| h.name.clone()).collect();
        let host = |name: &str| hosts.iter().position(|h| h == name);
        let pairs = match p.raw("pairs") {
            Some(toml::Value::String(s)) if s == "any" => {
                if hosts.len() < 2 {
                    return Err(
                        p.error("pairs", "\"any\" needs at least two hosts in the topology")
                    );
                }
                Pairs::Any
            }
            Some(toml::Value::Array(a)) if !a.is_empty() => Pairs::List(
                a.iter()
                    .map(|v| {
                        let s = v
                            .as_str()
                            .ok_or_else(|| p.error("pairs", "expected strings \"src:dst\""))?;
                        let (a, b) = s.split_once(':').ok_or_else(|| {
                            p.error("pairs", format!("{s:?} is not written \"src:dst\""))
                        })?;
                        let find = |name: &str| {
                            host(name).ok_or_else(|| {
                                p.error("pairs", format!("{s:?}: no host {name:?} in the topology"))
                            })
                        };
                        let (a, b) = (find(a)?, find(b)?);
                        if a == b {
                            return Err(p.error("pairs", format!("{s:?}: a call needs two hosts")));
                        }
                        Ok((a, b))
                    })
                    .collect::<Result<Vec<_>, SimError>>()?,
            ),
            _ => {
                return Err(p.error(
                    "pairs",
                    "expected a non-empty list, e.g. [\"a:b\"], or \"any\"",
                ));
            }
        };
        let costs = CostProfile::from_params(p)?;
        if manager.tina.is_some()
            && (costs.colocated
                || costs.links
                || costs.coalesce
                || costs.cpus > 0
                || costs.wakeup != Duration::ZERO
                || !costs.idle_wake.is_empty())
        {
            // The TINA shell models the papers' testbeds: a server per performer, remote
            // objects, the caller marshalling; a profile of the live lab's structure
            // would be silently misread.
            return Err(p.error(
                "profile",
                "the TINA shell does not model `colocated`, `links`, `coalesce`, `wakeup`, `idle_wake` or shared `cpus` (a `measured` profile's structure)",
            ));
        }
        let mut crashes = crash::Crashes {
            crashes: Vec::new(),
            recovery: true,
            sweep: None,
        };
        let faults = if p.has("faults") {
            let f = p.table("faults")?;
            let loss = f.number_or("loss", 0.0)?;
            if !(0.0..1.0).contains(&loss) {
                return Err(f.error("loss", "a probability from 0 up to (not including) 1"));
            }
            let max_delay = if f.has("delay") {
                f.duration("delay")?
            } else {
                Duration::ZERO
            };
            let names: Vec<String> = switches.iter().map(|c| c.name.clone()).collect();
            let managers = manager.managers.max(1) as usize;
            crashes = crash::parse(&f, &names, managers)?;
            f.finish()?;
            if manager.tina.is_some() {
                return Err(p.error(
                    "faults",
                    "the TINA shell injects no faults (the managers' shell does)",
                ));
            }
            Faults { loss, max_delay }
        } else {
            Faults::default()
        };
        Ok(ControlConfig {
            switches,
            view,
            manager,
            arrival_rate,
            holding,
            pcr,
            contract,
            hosts,
            pairs,
            costs,
            faults,
            crashes,
        })
    }
}

/// xbind's adaptive T (paper 000 §IV-B): `adaptive = "paper"` (its regions: below 50
/// calls/s T = 1, to 100 T = 4, above T = 10, the rate estimated over 1 s) or a table
/// `{ bounds = [calls/s, ...], thresholds = [T, ...], window = duration }`; none by
/// default (T fixed).
fn adaptive(m: &Params<'_>) -> Result<Option<Regions>, SimError> {
    let regions = match m.raw("adaptive") {
        None => return Ok(None),
        Some(toml::Value::String(s)) if s == "paper" => Regions::paper(),
        Some(toml::Value::Table(_)) => {
            let t = m.table("adaptive")?;
            let bounds = t.numbers("bounds")?;
            let thresholds = t
                .numbers("thresholds")?
                .into_iter()
                .map(|x| {
                    if x >= 1.0 && x.fract() == 0.0 && x <= 1_000.0 {
                        Ok(x as u32)
                    } else {
                        Err(t.error("thresholds", "each a whole number from 1 to 1000"))
                    }
                })
                .collect::<Result<Vec<u32>, SimError>>()?;
            let window = if t.has("window") {
                t.duration("window")?
            } else {
                Duration::from_secs(1)
            };
            t.finish()?;
            Regions {
                bounds,
                thresholds,
                window,
            }
        }
        Some(_) => {
            return Err(m.error(
                "adaptive",
                "expected \"paper\" or { bounds = [...], thresholds = [...], window = duration }",
            ));
        }
    };
    regions.validate().map_err(|e| m.error("adaptive", e))?;
    Ok(Some(regions))
}

/// xbind's `releases`: whether they ride ("ride") or count toward T ("count", the
/// default).
fn releases_ride(m: &Params<'_>) -> Result<bool, SimError> {
    match if m.has("releases") {
        m.string("releases")?
    } else {
        "count"
    } {
        "count" => Ok(false),
        "ride" => Ok(true),
        other => Err(m.error(
            "releases",
            format!("{other:?}: expected \"count\" or \"ride\""),
        )),
    }
}

fn manager(p: &Params<'_>) -> Result<ManagerSpec, SimError> {
    let m = p.table("manager")?;
    let name = m.string("kind")?;
    let whole = |key: &str, default: u32, max: u32| -> Result<u32, SimError> {
        let x = m.number_or(key, f64::from(default))?;
        if !(x >= 1.0 && x.fract() == 0.0 && x <= f64::from(max)) {
            return Err(m.error(key, format!("expected a whole number from 1 to {max}")));
        }
        Ok(x as u32)
    };
    let duration_or = |key: &str, default: Duration| -> Result<Duration, SimError> {
        if m.has(key) {
            m.duration(key)
        } else {
            Ok(default)
        }
    };
    let spec = match name {
        "xbind" => ManagerSpec {
            kind: CmKind::Xbind,
            name: "xbind",
            threshold: whole("threshold", 1, 1_000)?,
            flush: duration_or("flush", Duration::from_secs(1))?,
            adaptive: adaptive(&m)?,
            threads: 1,
            blocking: false,
            route_ttl: duration_or("route_ttl", Duration::from_secs(5))?,
            cache: {
                let d = atmlab_control::cm::core::CmConfig::new(CmKind::Xbind);
                let fill = whole("cache_fill", d.cache_fill, 65_535)?;
                let low = whole("cache_low", d.cache_low.min(fill), fill)?;
                let max = whole("cache_max", d.cache_max.max(fill), 65_535)?;
                if max < fill {
                    return Err(
                        m.error("cache_max", format!("{max} is less than cache_fill {fill}"))
                    );
                }
                (fill, low, max)
            },
            tina: None,
            managers: whole("managers", 1, 64)?,
            releases_ride: releases_ride(&m)?,
        },
        "sequential" | "threaded" => ManagerSpec {
            kind: CmKind::Sequential,
            name: if name == "sequential" {
                "sequential"
            } else {
                "threaded"
            },
            threshold: 1,
            flush: Duration::ZERO,
            adaptive: None,
            threads: if name == "threaded" {
                whole("threads", 4, 1_024)?
            } else {
                1
            },
            blocking: true,
            route_ttl: Duration::ZERO,
            cache: {
                let d = atmlab_control::cm::core::CmConfig::new(CmKind::Sequential);
                (d.cache_fill, d.cache_low, d.cache_max)
            },
            tina: None,
            managers: whole("managers", 1, 64)?,
            releases_ride: false,
        },
        "tina" => {
            let mode = if m.has("mode") {
                m.string("mode")?
                    .parse::<SetupMode>()
                    .map_err(|_| m.error("mode", "expected \"sequential\" or \"parallel\""))?
            } else {
                SetupMode::Sequential
            };
            let defaults = atmlab_control::tina::TinaConfig::default();
            let colocate = m.bool_or("colocate", false)?;
            ManagerSpec {
                // Unused: the TINA shell runs the performers' cores, not a CmCore.
                kind: CmKind::Sequential,
                name: "tina",
                threshold: 1,
                flush: Duration::ZERO,
                adaptive: None,
                threads: whole("threads", 1, 1_024)?,
                blocking: false,
                route_ttl: duration_or("route_ttl", Duration::ZERO)?,
                cache: (0, 0, 0),
                tina: Some(TinaSpec {
                    mode,
                    depth: whole("depth", defaults.depth, 16)?,
                    fanout: whole("fanout", defaults.fanout, 1_024)?,
                    colocate,
                }),
                managers: 1,
                releases_ride: false,
            }
        }
        other => {
            return Err(m.error(
                "kind",
                format!("{other:?}: expected \"xbind\", \"sequential\", \"threaded\" or \"tina\""),
            ));
        }
    };
    m.finish()?;
    Ok(spec)
}

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod tests;
