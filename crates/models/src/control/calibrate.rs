//! Fitting a testbed's cost profile to its one-at-a-time figures (paper 000 §III-B and
//! §IV; issue 23: "calibration uses only one-at-a-time figures; the curves under load are
//! predictions"). `paper-000`'s fitted numbers are this fit of the paper's four figures
//! (the sequential manager's mean setup, 23.4 ms, its 5% and 95% quantiles, 20.5 and
//! 31.0 ms, and xbind's 11.0 ms at 1 call/s), run by the simulator itself, so that the
//! profile is a function of those figures and of the split the profile states as ours.
//!
//! One call at a time nothing queues, so the three figures of the sequential setup
//! separate: the stalls (how often a work period stalls, and for how long) give the
//! distribution its shape, the spread from the 5% to the 95% quantile and the mean's
//! height above the 5% quantile, and the wire's latency then moves the whole
//! distribution to the paper's mean. xbind's setup, whose exchanges are asynchronous,
//! then fixes `oneway` (a synchronous manager pays none). Each is a bisection on a
//! quantity that grows with the parameter; each evaluation is a simulated run of
//! `calls` setups one at a time.

use std::path::Path;

use atmlab_core::time::Duration;
use atmlab_sim::SimError;
use atmlab_sim::model::Replication;
use atmlab_sim::scenario::{Params, RunLength, Warmup};

use super::ControlConfig;
use super::driver::model_err;

/// The figures a profile is fitted to, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Targets {
    /// The sequential manager's mean setup, one call at a time.
    pub sequential_mean: f64,
    /// Its 5% quantile.
    pub sequential_p5: f64,
    /// Its 95% quantile.
    pub sequential_p95: f64,
    /// xbind's mean setup (T = 1, caches warm) at 1 call/s.
    pub xbind_mean: f64,
}

impl Targets {
    /// Paper 000's: §III-B (23.4 ms mean, 5% 20.5 ms, 95% 31.0 ms) and §IV (11.0 ms).
    pub const PAPER_000: Targets = Targets {
        sequential_mean: 23.4e-3,
        sequential_p5: 20.5e-3,
        sequential_p95: 31.0e-3,
        xbind_mean: 11.0e-3,
    };
}

/// The fitted numbers of a profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// One-way time on the wire.
    pub latency: Duration,
    /// An asynchronous invocation's extra cost at each end.
    pub oneway: Duration,
    /// The chance that a work period stalls.
    pub stall_probability: f64,
    /// A stall's mean.
    pub stall_mean: Duration,
}

/// What one run of calls one at a time measured, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OneAtATime {
    /// Mean setup.
    pub mean: f64,
    /// 5% quantile.
    pub p5: f64,
    /// 95% quantile.
    pub p95: f64,
}

/// The manager tables of the two managers measured.
const SEQUENTIAL: &str = r#"{ kind = "sequential" }"#;
const XBIND: &str = r#"{ kind = "xbind", threshold = 1, flush = "1 s" }"#;

/// `calls` setups through `topology` by `manager` ("sequential" or "xbind") at the
/// costs of `base` changed by `fit`: the sequential manager's calls far apart (0.2 /s,
/// a setup overlapping another about one call in 200) and briefly held; xbind's as the
/// paper measured it (1 call/s, held 0.5 s, §IV).
pub fn one_at_a_time(
    topology: &Path,
    base: &str,
    xbind: bool,
    fit: &Fit,
    calls: u64,
) -> Result<OneAtATime, SimError> {
    let (manager, rate, hold) = if xbind {
        (XBIND, 1.0, r#"{ kind = "exponential", mean = "500 ms" }"#)
    } else {
        (
            SEQUENTIAL,
            0.2,
            r#"{ kind = "deterministic", mean = "10 ms" }"#,
        )
    };
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let text = format!(
        r#"topology = {topology:?}
manager = {manager}
arrival = {{ kind = "poisson", rate = "{rate} /s" }}
holding = {hold}
pcr = "100 /s"
pairs = ["a:b"]
profile = {{ base = "{base}", latency = "{} us", oneway = "{} us", stall_probability = {}, stall_mean = "{} us" }}
"#,
        us(fit.latency),
        us(fit.oneway),
        fit.stall_probability,
        us(fit.stall_mean),
    );
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| model_err(format!("the calibration scenario: {e}")))?;
    let p = Params::new("the calibration scenario", &table);
    let c = ControlConfig::from_params(&p)?;
    p.finish()?;
    let seconds = (calls as f64 / rate).ceil() as u64;
    let r = c.run_replication(&Replication {
        seed: 1,
        replication: 0,
        length: RunLength::Duration(Duration::from_secs(seconds)),
        warmup: Warmup::Time(Duration::from_secs(10)),
        batches: 1,
    })?;
    let get = |k: &str| {
        r.metrics
            .iter()
            .find(|(m, _)| *m == k)
            .map(|(_, v)| *v)
            .filter(|v| v.is_finite())
            .ok_or_else(|| model_err(format!("the calibration run measured no {k}")))
    };
    Ok(OneAtATime {
        mean: get("mean_setup_latency")?,
        p5: get("p5_setup_latency")?,
        p95: get("p95_setup_latency")?,
    })
}

/// The `x` in `[lo, hi]`, to within `tol`, at which the increasing `f` reaches `target`.
fn bisect(
    target: f64,
    (mut lo, mut hi): (f64, f64),
    tol: f64,
    mut f: impl FnMut(f64) -> Result<f64, SimError>,
) -> Result<f64, SimError> {
    while hi - lo > tol {
        let mid = 0.5 * (lo + hi);
        if f(mid)? < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

/// Fits `base`'s latency, oneway and stalls to `targets` on `topology` (paper 000's
/// testbed: `topologies/line3.toml`), each evaluation `calls` setups.
pub fn fit(topology: &Path, base: &str, targets: &Targets, calls: u64) -> Result<Fit, SimError> {
    let secs = Duration::from_secs_f64;
    let mut fit = Fit {
        latency: secs(0.3e-3),
        oneway: Duration::ZERO,
        stall_probability: 0.0,
        stall_mean: Duration::ZERO,
    };
    let spread = targets.sequential_p95 - targets.sequential_p5;
    let height = targets.sequential_mean - targets.sequential_p5;
    // The shape: for each stall probability, the stall mean that gives the spread; then
    // the probability whose distribution stands the mean that high above its 5%
    // quantile (more, shorter stalls lift the 5% quantile off the floor less than the
    // mean). The latency does not change the shape: it is held.
    let shape_at = |q: f64, fit: &mut Fit| -> Result<f64, SimError> {
        fit.stall_probability = q;
        let mean = bisect(spread, (0.0, 0.02), 2e-6, |d| {
            let f = Fit {
                stall_mean: secs(d),
                ..*fit
            };
            let m = one_at_a_time(topology, base, false, &f, calls)?;
            Ok(m.p95 - m.p5)
        })?;
        fit.stall_mean = secs(mean);
        let m = one_at_a_time(topology, base, false, fit, calls)?;
        Ok(m.mean - m.p5)
    };
    let q = bisect(height, (0.01, 0.3), 5e-4, |q| shape_at(q, &mut fit.clone()))?;
    shape_at(q, &mut fit)?;
    // The height of the whole distribution: the wire.
    let latency = bisect(targets.sequential_mean, (0.0, 0.01), 1e-7, |l| {
        let f = Fit {
            latency: secs(l),
            ..fit
        };
        Ok(one_at_a_time(topology, base, false, &f, calls)?.mean)
    })?;
    fit.latency = secs(latency);
    // xbind's asynchronous exchanges.
    let oneway = bisect(targets.xbind_mean, (0.0, 0.01), 1e-7, |o| {
        let f = Fit {
            oneway: secs(o),
            ..fit
        };
        Ok(one_at_a_time(topology, base, true, &f, calls)?.mean)
    })?;
    fit.oneway = secs(oneway);
    Ok(fit)
}
