//! Paper 000's Figs. 6 and 7 where the paper's costs hold: the simulated control plane
//! (`atmlab_models::control`, the real connection manager, switch and route cores in
//! virtual time) on the paper's testbed (three switch servers, `topologies/line3.toml`)
//! at the `paper-000` costs, which were fitted to the paper's two one-at-a-time setups
//! (the sequential manager's 23.4 ms, xbind's 11 ms at 1 call/s) and nothing else.
//! Every curve under load is a prediction, set beside the paper's and beside the live
//! curves measured on this machine, where a remote invocation costs a thousandth of
//! Orbix's and the ordering of T comes out otherwise.
//!
//! The scenarios are built here from one template (one per manager, swept over the call
//! rate); calls are held 0.5 s, exponentially (the paper's "very small holding time of
//! 0.5 s"; its distribution is ours), and xbind's managers flush after the paper's 1 s.

use atmlab_models::control::ControlKind;
use atmlab_sim::runner::{self, RunOptions};
use atmlab_sim::scenario::Scenario;
use atmlab_sim::stats::Estimate;

use crate::LabError;

/// The managers simulated: (name, the scenario's `manager` table).
pub const MANAGERS: &[(&str, &str)] = &[
    ("sequential", r#"{ kind = "sequential" }"#),
    (
        "threaded (4 threads)",
        r#"{ kind = "threaded", threads = 4 }"#,
    ),
    (
        "xbind T=1",
        r#"{ kind = "xbind", threshold = 1, flush = "1 s" }"#,
    ),
    (
        "xbind T=4",
        r#"{ kind = "xbind", threshold = 4, flush = "1 s" }"#,
    ),
    (
        "xbind T=10",
        r#"{ kind = "xbind", threshold = 10, flush = "1 s" }"#,
    ),
    (
        "xbind T=15",
        r#"{ kind = "xbind", threshold = 15, flush = "1 s" }"#,
    ),
    (
        "xbind adaptive",
        r#"{ kind = "xbind", adaptive = "paper", flush = "1 s" }"#,
    ),
];

/// The call rates, calls/s: the paper's Figs. 6 and 7 span 0 to about 200; steps of 5
/// calls/s around the synchronous managers' knees (the paper's 25 calls/s).
const RATES: &[f64] = &[
    1.0, 10.0, 20.0, 25.0, 30.0, 35.0, 40.0, 50.0, 60.0, 100.0, 150.0, 170.0, 200.0, 250.0,
];
const QUICK_RATES: &[f64] = &[1.0, 25.0, 170.0];

/// One simulated point.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPoint {
    /// One of [`MANAGERS`].
    pub manager: String,
    /// Offered calls/s.
    pub rate: f64,
    /// Setups carried per second.
    pub setups_per_s: Estimate,
    /// Mean setup latency, seconds.
    pub latency_s: Estimate,
    /// The 5% and 95% quantiles of the setup latency, seconds.
    pub quantiles_s: (Estimate, Estimate),
    /// Share of calls refused.
    pub blocking: Estimate,
}

impl SimPoint {
    /// Whether the point carried what was offered (within 5%, nothing refused to speak
    /// of): a point past saturation does not.
    pub fn carried(&self) -> bool {
        self.setups_per_s.mean >= 0.95 * self.rate && self.blocking.mean < 0.01
    }
}

/// A scenario of the paper's testbed (`topologies/line3.toml`, one pair, 100 cells/s
/// calls) at `paper-000`: `manager` the manager table, the run's length, warm-up and
/// replications, the Poisson rate and the exponential holding time as TOML values.
pub(super) fn testbed(
    manager: &str,
    (duration, warmup, replications): (&str, &str, usize),
    rate: &str,
    holding: &str,
) -> String {
    format!(
        r#"model = "control"
[run]
duration = "{duration}"
warmup = "{warmup}"
replications = {replications}
seed = 1
[params]
topology = "topologies/line3.toml"
manager = {manager}
arrival = {{ kind = "poisson", rate = "{rate}" }}
holding = {{ kind = "exponential", mean = "{holding}" }}
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
"#
    )
}

fn scenario(manager: &str, quick: bool) -> String {
    let rates: Vec<String> = (if quick { QUICK_RATES } else { RATES })
        .iter()
        .map(|r| format!("\"{r} /s\""))
        .collect();
    let run = if quick {
        ("10 s", "2 s", 2)
    } else {
        ("60 s", "5 s", 3)
    };
    format!(
        "{}[sweep]\n\"arrival.rate\" = [{}]\n",
        testbed(manager, run, "1 /s", "500 ms"),
        rates.join(", ")
    )
}

/// Runs every manager's curve; the numbers do not depend on `threads`.
pub fn run(
    quick: bool,
    threads: usize,
    say: &mut impl FnMut(&str),
) -> Result<Vec<SimPoint>, LabError> {
    let mut out = Vec::new();
    for (name, table) in MANAGERS {
        let text = scenario(table, quick);
        let s = Scenario::parse("the simulated xbind testbed", &text, &[])?;
        let r = runner::run(
            &s,
            &ControlKind,
            &RunOptions {
                threads,
                progress: None,
            },
        )?;
        for p in &r.points {
            let get = |k: &str| {
                p.metrics
                    .iter()
                    .find(|(m, _)| m == k)
                    .map(|(_, e)| *e)
                    .ok_or_else(|| {
                        LabError::run("the simulated control plane", format!("no metric {k}"))
                    })
            };
            let rate = p
                .swept
                .iter()
                .find(|(k, _)| k == "arrival.rate")
                .and_then(|(_, v)| atmlab_sim::scenario::parse_rate(v).ok())
                .unwrap_or(f64::NAN);
            let point = SimPoint {
                manager: (*name).to_string(),
                rate,
                setups_per_s: get("setups_per_s")?,
                latency_s: get("mean_setup_latency")?,
                quantiles_s: (get("p5_setup_latency")?, get("p95_setup_latency")?),
                blocking: get("blocking_probability")?,
            };
            say(&format!(
                "simulated {:>22} at {:>5} calls/s: {:.1} setups/s, {:.1} ms mean setup, {:.3} blocked",
                point.manager,
                rate,
                point.setups_per_s.mean,
                point.latency_s.mean * 1e3,
                point.blocking.mean
            ));
            out.push(point);
        }
    }
    Ok(out)
}
