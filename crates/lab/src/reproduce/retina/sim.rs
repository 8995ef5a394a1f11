//! The simulated rows of paper 001's reproduction (§4.3): the real TINA performers'
//! cores (LNC, NML-CP, EML-CP) and switch cores in virtual time at the `paper-001` costs
//! (model kind `control`, the embedded scenario `scenarios/control/tina-paper001.toml`,
//! calibrated from Table 3.3 only), one call at a time through one switch and across
//! three, sequential (Alcin's way) and parallel, the EML-CP remote or co-located. They
//! stand beside the live rows: the live ones show the shapes on this machine, these the
//! milliseconds the same cores take at the paper's cost per invocation.

use atmlab_sim::runner::{self, PointResult, RunOptions};
use atmlab_sim::scenario::Scenario;
use atmlab_sim::stats::Estimate;

use crate::LabError;

/// The scenario, embedded so that the reproduction runs from any directory.
pub const SCENARIO: &str = include_str!("../../../../../scenarios/control/tina-paper001.toml");

/// Its path in the repository (for error messages and the report).
pub const SCENARIO_PATH: &str = "scenarios/control/tina-paper001.toml";

/// One simulated configuration, one call at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPoint {
    /// "sequential" or "parallel".
    pub mode: String,
    /// The EML-CPs in their NML-CP's process.
    pub colocated: bool,
    /// Switches crossed.
    pub switches: usize,
    /// Mean setup time, ms, with its 95% interval over the replications.
    pub setup_ms: Estimate,
    /// 99th percentile of the setup time, ms (mean over the replications).
    pub p99_ms: f64,
    /// Remote invocations per call: its setup and its release, the user's own
    /// AddConnection and DeleteConnection and the route object's query included.
    pub invocations: f64,
}

impl SimPoint {
    /// "sim paper-001, tina sequential" (", EML-CP co-located").
    pub fn label(&self) -> String {
        format!(
            "sim paper-001, tina {}{}",
            self.mode,
            if self.colocated {
                ", EML-CP co-located"
            } else {
                ""
            }
        )
    }
}

fn err(e: impl std::fmt::Display) -> LabError {
    LabError::run("the retina reproduction's simulation", e.to_string())
}

/// Runs the scenario (every point, one thread: the numbers do not depend on it).
pub fn run() -> Result<Vec<SimPoint>, LabError> {
    let scn = Scenario::parse(SCENARIO_PATH, SCENARIO, &[]).map_err(err)?;
    let kind = atmlab_models::model_kind(&scn.model).ok_or_else(|| err("no model kind"))?;
    let report = runner::run(
        &scn,
        kind,
        &RunOptions {
            threads: 1,
            progress: None,
        },
    )
    .map_err(err)?;
    report.points.iter().map(point).collect()
}

fn point(p: &PointResult) -> Result<SimPoint, LabError> {
    let manager = p
        .params
        .get("manager")
        .and_then(|m| m.as_table())
        .ok_or_else(|| err("a point without its manager"))?;
    let mode = manager
        .get("mode")
        .and_then(|m| m.as_str())
        .unwrap_or("sequential")
        .to_string();
    let colocated = manager
        .get("colocate")
        .and_then(|c| c.as_bool())
        .unwrap_or(false);
    // The chain's hosts: a on s1, hL on sL, so a -> hL crosses L switches.
    let pair = p
        .params
        .get("pairs")
        .and_then(|v| v.as_array())
        .and_then(|a| a.first())
        .and_then(|v| v.as_str())
        .ok_or_else(|| err("a point without its pair"))?;
    let switches = pair
        .split_once(":h")
        .and_then(|(_, l)| l.parse().ok())
        .ok_or_else(|| err(format!("pair {pair:?} is not a -> hL")))?;
    let metric = |name: &str| {
        p.metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, e)| *e)
            .ok_or_else(|| err(format!("no metric {name}")))
    };
    let ms = |e: Estimate| Estimate {
        mean: e.mean * 1e3,
        ci95: e.ci95 * 1e3,
        n: e.n,
    };
    Ok(SimPoint {
        mode,
        colocated,
        switches,
        setup_ms: ms(metric("mean_setup_latency")?),
        p99_ms: metric("p99_setup_latency")?.mean * 1e3,
        invocations: metric("invocations_per_call")?.mean,
    })
}
