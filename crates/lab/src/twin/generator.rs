//! The call generator's own work (issue 23's twin check; the cost model's
//! `client_work`). The live lab drives its manager from a generator in the same process,
//! on the machine's two cores; paper 000's testbed gave the users their own
//! workstations, and the simulated shell's users are free. What the generator takes from
//! the servers is measured here apart from them: the twin's loads, paced as the twin paces
//! them (an OS thread sleeping to each Poisson instant, `Load::precise`), offered to a
//! target that sets a call up and releases it at once. The process's CPU per call is
//! the generator's work at that rate; it falls as the rate rises (the pacer's sleeps and
//! the runtime's parked workers are shared by more calls), so it is measured at each rate
//! the twin simulates.
//!
//! With the target idle the runtime's workers park between calls more than they do when
//! the manager keeps them busy, so this reads the generator's work high by the wakes a
//! busy runtime saves; the parks are counted beside it.

use std::time::Duration as StdDuration;

use atmlab_control::cm::core::CallError;
use atmlab_core::traffic::TrafficDescriptor;

use super::measure::Usage;
use crate::LabError;
use crate::callgen::{self, CallTarget, Load};

/// The generator's work at one rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeneratorCost {
    /// Offered calls/s.
    pub rate: f64,
    /// Process CPU per call offered, microseconds.
    pub cpu_us: f64,
    /// Threads of the process that parked, per call offered.
    pub parks: f64,
}

/// A target that sets every call up and releases it at once, doing nothing.
#[derive(Clone)]
struct AtOnce;

impl CallTarget for AtOnce {
    async fn setup(&self, _: &str, _: &str, _: TrafficDescriptor) -> Result<u64, CallError> {
        Ok(0)
    }
    async fn release(&self, _: u64) -> Result<(), CallError> {
        Ok(())
    }
}

/// The generator's work offering `load` (its rate, pacing and holding) to a target that
/// answers at once.
pub async fn measure(load: &Load) -> Result<GeneratorCost, LabError> {
    let start = Usage::now()?;
    let report = callgen::run(AtOnce, load).await;
    let used = start.since()?;
    if report.offered == 0 {
        return Err(LabError::run(
            "the generator's probe",
            format!("no call offered at {} calls/s", load.rate),
        ));
    }
    let n = report.offered as f64;
    Ok(GeneratorCost {
        rate: load.rate,
        cpu_us: used.cpu / n * 1e6,
        parks: used.parks as f64 / n,
    })
}

/// How long each rate's probe runs, for live points of `seconds`: half as long, from
/// 0.3 to 1.5 s (the process's CPU clock counts nanoseconds; at 200 calls/s even 0.3 s
/// is 60 calls).
pub fn span(seconds: f64) -> StdDuration {
    StdDuration::from_secs_f64((seconds / 2.0).clamp(0.3, 1.5))
}
