//! Crash faults of the simulated control plane (issue 23 items 1 and 3; paper 000 §II-C's
//! manager and switch servers, recovered as atmlab's live ones are, issue 10): a switch
//! server or a connection manager that crashes and restarts, at a given time or as a
//! Poisson process, and what recovery is asked of the plane's shell
//! (`shell::recovery`). This module holds the scenario's side: the parameters, their
//! checks, and the metrics they add.
//!
//! The form follows what users of the packet simulators know: a scripted failure at a
//! time with a repair after a down-time (INET's `ScenarioManager` `<crash>` and
//! `<startup>` lifecycle operations, ns-3's `Simulator::Schedule` of a node's
//! shutdown), or failures drawn as a Poisson process with a mean time between failures
//! (reliability's MTBF, an exponential up-time) and a down-time. Written in
//! `faults = { crashes = [ ... ] }`:
//!
//! ```toml
//! faults = { crashes = [
//!   { node = "s2", at = "10 s", down = "200 ms" },        # switch server s2, once
//!   { node = "manager", at = "20 s", down = "500 ms" },   # the (first) manager, once
//!   { node = "s1", mtbf = "60 s", down = "200 ms" },      # Poisson crashes of s1
//! ], recovery = true, sweep = "10 s" }
//! ```
//!
//! Times are from the replication's start (the warm-up included). `node` is a switch of
//! the topology or `"manager"` (`"manager:N"` for the N-th of several). `recovery =
//! false` is the ablation: no reconcile after a switch restarts, no sweeps, and a manager
//! restarted without its journal, as one started without `--journal`. `sweep` is how
//! often each manager lists every switch to release its strays (two sweeps in a row
//! must find one), the live manager's default unless given; `"0 s"`: never.

use atmlab_control::cm::core::{CmConfig, CmKind};
use atmlab_core::time::Duration;
use atmlab_sim::SimError;
use atmlab_sim::scenario::{Params, parse_duration};

/// What crashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// The switch server of this index (the topology's order).
    Switch(usize),
    /// The connection manager of this index.
    Manager(usize),
}

/// When it crashes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    /// Once, this long after the replication's start.
    At(Duration),
    /// Repeatedly: exponential up-times of this mean (from the start, then from each
    /// restart).
    Poisson(Duration),
}

/// One crash fault of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crash {
    /// What crashes.
    pub node: Node,
    /// When.
    pub when: When,
    /// How long it stays down before it restarts.
    pub down: Duration,
}

/// The crash faults of a scenario and whether the plane recovers from them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Crashes {
    /// The crashes, as written.
    pub crashes: Vec<Crash>,
    /// Recovery as the live system does it (the default); `false`: none (the ablation).
    pub recovery: bool,
    /// How often each manager sweeps every switch for this owner's strays (with
    /// recovery): the live manager's `CmConfig::sweep_interval` by default; `None`
    /// (`sweep = "0 s"`): never, to see what reconcile and the start-up audit do alone.
    pub sweep: Option<Duration>,
}

impl Crashes {
    /// True if any manager may crash (the plane then keeps a journal).
    pub fn managers_crash(&self) -> bool {
        self.crashes
            .iter()
            .any(|c| matches!(c.node, Node::Manager(_)))
    }
}

/// The metrics a plane with crashes adds after [`super::METRICS`]' others, over the whole
/// replication (warm-up included: a crash is an event of the run, not of a period), the
/// last three from an audit after the run: arrivals stopped, every call ended, every
/// manager's caches given back.
///
/// - `crashes`: crashes that happened;
/// - `crash_calls_lost`: calls a crash cost: setups a manager's crash cut off, setups
///   sent to a manager while it was down, established calls not taken back after its
///   restart;
/// - `crash_calls_recovered`: established calls a restarted manager took back
///   (`CmCore::adopt`, by the start-up audit) and setups whose commits a restarted
///   switch held and the manager's reconcile completed (`CmCore::reconcile`);
/// - `crash_strays_released`: connections that reconcile and the start-up audit
///   released (made, but no call's);
/// - `leaked_calls`: calls a manager still held after the run drained;
/// - `leaked_connections`: connections left at the switches that no call holds;
/// - `leaked_reservations`: identifiers left reserved at the switches.
pub const CRASH_METRICS: &[&str] = &[
    "crashes",
    "crash_calls_lost",
    "crash_calls_recovered",
    "crash_strays_released",
    "leaked_calls",
    "leaked_connections",
    "leaked_reservations",
];

/// The `faults.crashes` list and `faults.recovery` of a scenario; `switches` are the
/// topology's switch names, `managers` how many managers there are.
pub(super) fn parse(
    f: &Params<'_>,
    switches: &[String],
    managers: usize,
) -> Result<Crashes, SimError> {
    let recovery = f.bool_or("recovery", true)?;
    let sweep = if f.has("sweep") {
        Some(f.duration("sweep")?).filter(|d| *d > Duration::ZERO)
    } else {
        CmConfig::new(CmKind::Xbind).sweep_interval
    };
    let Some(raw) = f.raw("crashes") else {
        return Ok(Crashes {
            crashes: Vec::new(),
            recovery,
            sweep,
        });
    };
    let toml::Value::Array(list) = raw else {
        return Err(f.error("crashes", "expected a list of tables"));
    };
    let mut crashes = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let key = |k: &str| format!("crashes[{i}].{k}");
        let toml::Value::Table(t) = v else {
            return Err(f.error(&format!("crashes[{i}]"), "expected a table"));
        };
        for k in t.keys() {
            if !["node", "at", "mtbf", "down"].contains(&k.as_str()) {
                return Err(f.error(&key(k), "unknown key; expected node, at, mtbf, down"));
            }
        }
        let duration = |k: &str| -> Result<Option<Duration>, SimError> {
            t.get(k)
                .map(|v| parse_duration(v).map_err(|m| f.error(&key(k), m)))
                .transpose()
        };
        let name = match t.get("node") {
            Some(toml::Value::String(s)) => s.as_str(),
            _ => return Err(f.error(&key("node"), "expected a switch's name or \"manager\"")),
        };
        let node = if let Some(s) = switches.iter().position(|s| s == name) {
            Node::Switch(s)
        } else if name == "manager" {
            Node::Manager(0)
        } else if let Some(n) = name.strip_prefix("manager:") {
            match n.parse::<usize>() {
                Ok(m) if m < managers => Node::Manager(m),
                _ => {
                    return Err(f.error(
                        &key("node"),
                        format!("{name:?}: there are {managers} managers, numbered from 0"),
                    ));
                }
            }
        } else {
            return Err(f.error(
                &key("node"),
                format!("{name:?} is no switch of the topology, nor \"manager\""),
            ));
        };
        let when = match (duration("at")?, duration("mtbf")?) {
            (Some(at), None) => When::At(at),
            (None, Some(m)) if m > Duration::ZERO => When::Poisson(m),
            (None, Some(_)) => return Err(f.error(&key("mtbf"), "must be longer than zero")),
            _ => {
                return Err(f.error(
                    &key("at"),
                    "give either `at` (one crash) or `mtbf` (Poisson crashes)",
                ));
            }
        };
        let down = duration("down")?
            .ok_or_else(|| f.error(&key("down"), "missing: how long it stays down"))?;
        if down == Duration::ZERO {
            return Err(f.error(&key("down"), "must be longer than zero"));
        }
        crashes.push(Crash { node, when, down });
    }
    Ok(Crashes {
        crashes,
        recovery,
        sweep,
    })
}
