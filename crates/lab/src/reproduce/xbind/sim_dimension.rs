//! Paper 000's §IV at the paper's costs: Fig. 9 (the distribution of `N_v` against its
//! M/G/∞ Poisson estimate), Table I (cache hit frequency by cache size) and Fig. 10
//! (remote invocations per call, N/λ = 4(1 + k/T)) on the simulated control plane
//! (`atmlab_models::control`: the real connection manager, switch and route cores in
//! virtual time) at the `paper-000` costs, on the paper's testbed of three switch
//! servers (`topologies/line3.toml`, calls a -> b). Unlike the live rows, nothing is
//! scaled: the simulated plane runs at the paper's speed, so it takes the paper's own
//! rates and times.
//!
//! - Fig. 9 and Table I: the paper's four panels, λ = 10, 50, 100 and 100 calls/s with
//!   T = 5, 5, 5 and 15, calls held 5 s (μ = 0.2; exponentially, which is ours: the paper
//!   gives only the mean), xbind's flush after the paper's 1 s, and a cache large enough
//!   that every call hits (fills of 256, as the paper's "> 200"), so that `N_v` is what
//!   the calls needed, not what a small cache allowed. The paper measured 100,000 call
//!   setups per panel; the full run sets up as many (five replications of 20,000).
//!   `N_v` is the first switch's output port's (the one the live rows measure), as the
//!   arriving calls found it (`nv_cdf_x`, `nv_arrival_mean`, `nv_poisson_gap` of the
//!   model), and the Poisson estimate uses its mean, as the paper's does.
//! - Fig. 10: T = 1, 2, 4, 10 and 15 at 50 calls/s (ours: the paper's medium load, which
//!   T = 1 carries; the figure is the formula's, at no particular rate), calls held 5 s.
//! - Table I's two panels again with releases riding (`releases = "ride"`: they count
//!   not toward T), the second reading of §IV-A that its implied means fit; its rows are
//!   labelled so, beside the text's reading (§II-C4: deletes count toward T), which the
//!   other rows and Fig. 10's formula take.
//!
//! Each quantity is computed per replication from its metrics and given a 95% interval
//! across replications; the verdicts ([`verdicts`]) are a pure function of
//! [`SimDimension`].

use atmlab_control::cm::dimension::{invocations_per_s, poisson_cdf};
use atmlab_models::control::{CDF_POINTS, ControlKind};
use atmlab_sim::model::RepResult;
use atmlab_sim::runner::{self, PointResult, RunOptions};
use atmlab_sim::scenario::Scenario;
use atmlab_sim::stats::Estimate;
use serde_json::json;

use super::{HOPS, NV_CASES, NvCase, PAPER_TABLE_I};
use crate::report::verdict::{Check, Verdict, Verdicts, at_least, at_most, show, sig, value};
use crate::report::{Column, Table};
use crate::{LabError, cells};

/// Fig. 9's tolerance, the live rows' (the paper's own Table I gap, rounded up).
const FIG9_GAP: f64 = 0.03;

/// Table I's measured hit frequencies against ours: relative tolerance, the live rows'.
const TABLE_I_TOLERANCE: f64 = 0.005;

/// Fig. 10's formula against our counts: relative tolerance, the live rows'.
const FIG10_TOLERANCE: f64 = 0.05;

/// The mean of `N_v` against the mean the paper's estimate column implies (λ/α): the live
/// rows' tolerance for λ/α.
const MEAN_TOLERANCE: f64 = 0.10;

/// The thresholds of Fig. 10's simulated rows.
pub const FIG10_THRESHOLDS: [u32; 5] = [1, 2, 4, 10, 15];

/// Fig. 10's call rate, calls/s (ours: see the module's doc).
pub const FIG10_RATE: f64 = 50.0;

/// The paper's holding time of Fig. 9 (μ = 0.2), seconds, used for Fig. 10 too.
pub const HOLDING_S: f64 = 5.0;

/// One panel of Fig. 9 (and Table I) on the simulated plane.
#[derive(Debug, Clone, PartialEq)]
pub struct SimNv {
    /// The paper's panel.
    pub case: NvCase,
    /// Replications run.
    pub replications: usize,
    /// Calls offered per replication (λ times its length).
    pub calls_per_replication: f64,
    /// Mean of `N_v` as arrivals found it.
    pub mean: Estimate,
    /// Its time average, and the time-average index of dispersion.
    pub time_mean: Estimate,
    /// Variance over mean of the time-average `N_v` (Poisson: 1).
    pub dispersion: Estimate,
    /// Fig. 9's largest |measured − Poisson| where the Poisson P{N_v <= x} > 0.9.
    pub gap: Estimate,
    /// P{N_v <= x} at arrivals, x = 0 .. [`CDF_POINTS`] − 1.
    pub cdf: Vec<Estimate>,
    /// P{N <= x} for N Poisson with each replication's mean, x as `cdf`.
    pub poisson: Vec<Estimate>,
    /// Table I's measured minus estimated for a cache of k + 1, like for like, per
    /// replication: P{N_v <= k} measured (the hit frequency) minus the Poisson
    /// P{N <= k + 1} (the paper's estimate column), k as `cdf` but the last.
    pub excess: Vec<Estimate>,
    /// Setups carried per second, mean setup latency (s), share refused.
    pub setups_per_s: Estimate,
    /// Mean setup latency, seconds.
    pub latency_s: Estimate,
    /// Share of calls refused.
    pub blocking: Estimate,
}

impl SimNv {
    /// The measured hit frequency of a cache of `x` identifiers: P{N_v <= x − 1}.
    pub fn hit(&self, x: usize) -> Option<Estimate> {
        x.checked_sub(1).and_then(|k| self.cdf.get(k)).copied()
    }

    /// The paper's estimate column for a cache of `x`, read as the paper's Table I
    /// reads it: P{N_v <= x}, Poisson with the mean of `N_v` measured.
    pub fn estimated(&self, x: usize) -> Option<Estimate> {
        self.poisson.get(x).copied()
    }

    /// Measured minus estimated for a cache of `x` (see `excess`).
    pub fn excess(&self, x: usize) -> Option<Estimate> {
        x.checked_sub(1).and_then(|k| self.excess.get(k)).copied()
    }
}

/// One threshold of Fig. 10 on the simulated plane.
#[derive(Debug, Clone, PartialEq)]
pub struct SimInvocations {
    /// The message threshold.
    pub threshold: u32,
    /// Offered calls/s.
    pub rate: f64,
    /// The model's `invocations_per_call`: every exchange once (the client's setup and
    /// release, the route object's query on a miss, each message to a switch; xbind's QoS
    /// mapper is local).
    pub model_count: Estimate,
    /// Messages to switch servers per call (re-sends included).
    pub switch_messages: Estimate,
    /// The client's requests per call: a setup, and a release when it was set up.
    pub requests: Estimate,
    /// Counted as the paper counts, a request and its answer each one invocation: twice
    /// the client's requests plus twice the switch messages.
    pub paper_count: Estimate,
    /// Share of calls refused.
    pub blocking: Estimate,
}

impl SimInvocations {
    /// The paper's N/λ = 4(1 + k/T).
    pub fn formula(&self) -> f64 {
        invocations_per_s(1.0, HOPS, self.threshold)
    }
}

/// Fig. 9, Table I and Fig. 10 at the paper's costs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SimDimension {
    /// Fig. 9's panels.
    pub nv: Vec<SimNv>,
    /// Table I's panels with releases riding (the second reading).
    pub riding: Vec<SimNv>,
    /// Fig. 10's thresholds.
    pub invocations: Vec<SimInvocations>,
}

/// A scenario of the paper's testbed at `paper-000` (`simulated::testbed`), calls held
/// [`HOLDING_S`] on average.
fn scenario(manager: &str, rate: f64, seconds: f64, replications: usize, warmup_s: f64) -> String {
    super::simulated::testbed(
        manager,
        (
            &format!("{seconds} s"),
            &format!("{warmup_s} s"),
            replications,
        ),
        &format!("{rate} /s"),
        &format!("{HOLDING_S} s"),
    )
}

/// An xbind manager with T fixed, the paper's 1 s flush, and fills of 256 identifiers
/// (the live rows' `launch::xbind_config`): every call hits. Releases count toward T
/// unless `ride`.
fn xbind(threshold: u32, ride: bool) -> String {
    let releases = if ride { "ride" } else { "count" };
    format!(
        r#"{{ kind = "xbind", threshold = {threshold}, flush = "1 s", cache_fill = 256, cache_low = 64, cache_max = 2048, releases = "{releases}" }}"#
    )
}

fn one_point(text: &str, threads: usize) -> Result<PointResult, LabError> {
    let s = Scenario::parse("the simulated xbind testbed, §IV", text, &[])?;
    let r = runner::run(
        &s,
        &ControlKind,
        &RunOptions {
            threads,
            progress: None,
        },
    )?;
    r.points
        .into_iter()
        .next()
        .ok_or_else(|| LabError::run("the simulated control plane", "no point"))
}

fn metric(rep: &RepResult, k: &str) -> Result<f64, LabError> {
    rep.metrics
        .iter()
        .find(|(m, _)| *m == k)
        .map(|(_, v)| *v)
        .ok_or_else(|| LabError::run("the simulated control plane", format!("no metric {k}")))
}

/// `f` of each replication, with its 95% interval across them.
fn across(
    p: &PointResult,
    f: impl Fn(&RepResult) -> Result<f64, LabError>,
) -> Result<Estimate, LabError> {
    let v = p
        .replications
        .iter()
        .map(f)
        .collect::<Result<Vec<f64>, _>>()?;
    Ok(Estimate::from_samples(&v))
}

/// Runs Fig. 9's panels and Fig. 10's thresholds; the numbers do not depend on
/// `threads`.
pub fn run(
    quick: bool,
    threads: usize,
    say: &mut impl FnMut(&str),
) -> Result<SimDimension, LabError> {
    // Calls per replication and replications: the paper's 100,000 setups per panel in
    // the full run; a tenth of a replication's in the quick one.
    let (calls, reps, warmup) = if quick {
        (2_000.0, 2, 10.0)
    } else {
        (20_000.0, 5, 30.0)
    };
    let mut out = SimDimension::default();
    let panel = |case: NvCase, ride: bool, say: &mut dyn FnMut(&str)| {
        let seconds = (calls / case.paper_rate).round();
        let text = scenario(
            &xbind(case.threshold, ride),
            case.paper_rate,
            seconds,
            reps,
            warmup,
        );
        let n = nv_panel(case, &one_point(&text, threads)?, seconds)?;
        say(&format!(
            "simulated N_v {} (λ = {}, T = {}{}): mean {} at arrivals, {} over time, gap to Poisson {}, {} setups/s",
            case.panel,
            case.paper_rate,
            case.threshold,
            if ride { ", releases riding" } else { "" },
            show(&n.mean),
            show(&n.time_mean),
            show(&n.gap),
            show(&n.setups_per_s)
        ));
        Ok::<_, LabError>(n)
    };
    for case in NV_CASES {
        out.nv.push(panel(case, false, say)?);
    }
    for case in NV_CASES {
        if PAPER_TABLE_I.iter().any(|(p, _)| *p == case.panel) {
            out.riding.push(panel(case, true, say)?);
        }
    }
    let (thresholds, seconds, reps): (&[u32], f64, usize) = if quick {
        (&[1, 15], 40.0, 2)
    } else {
        (&FIG10_THRESHOLDS, 200.0, 3)
    };
    for &t in thresholds {
        let p = one_point(
            &scenario(&xbind(t, false), FIG10_RATE, seconds, reps, warmup),
            threads,
        )?;
        // The client's requests: a setup per call, and a release per call set up.
        let requests = |r: &RepResult| -> Result<f64, LabError> {
            Ok(2.0 - metric(r, "blocking_probability")? - metric(r, "failure_probability")?)
        };
        let i = SimInvocations {
            threshold: t,
            rate: FIG10_RATE,
            model_count: across(&p, |r| metric(r, "invocations_per_call"))?,
            switch_messages: across(&p, |r| metric(r, "switch_messages_per_call"))?,
            requests: across(&p, requests)?,
            paper_count: across(&p, |r| {
                Ok(2.0 * requests(r)? + 2.0 * metric(r, "switch_messages_per_call")?)
            })?,
            blocking: across(&p, |r| metric(r, "blocking_probability"))?,
        };
        say(&format!(
            "simulated invocations T = {t} at {FIG10_RATE} calls/s: {} per call as the paper counts (formula {}), {} switch messages, model's count {}",
            show(&i.paper_count),
            sig(i.formula()),
            show(&i.switch_messages),
            show(&i.model_count)
        ));
        out.invocations.push(i);
    }
    Ok(out)
}

/// One panel's numbers from its point.
fn nv_panel(case: NvCase, p: &PointResult, seconds: f64) -> Result<SimNv, LabError> {
    let cdf = (0..CDF_POINTS)
        .map(|x| across(p, |r| metric(r, &format!("nv_cdf_{x}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let poisson = (0..CDF_POINTS)
        .map(|x| across(p, |r| Ok(poisson_cdf(metric(r, "nv_arrival_mean")?, x))))
        .collect::<Result<Vec<_>, _>>()?;
    let excess = (0..CDF_POINTS - 1)
        .map(|k| {
            across(p, |r| {
                let m = metric(r, "nv_arrival_mean")?;
                Ok(metric(r, &format!("nv_cdf_{k}"))? - poisson_cdf(m, k + 1))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SimNv {
        case,
        replications: p.replications.len(),
        calls_per_replication: case.paper_rate * seconds,
        mean: across(p, |r| metric(r, "nv_arrival_mean"))?,
        time_mean: across(p, |r| metric(r, "nv_mean"))?,
        dispersion: across(p, |r| metric(r, "nv_dispersion"))?,
        gap: across(p, |r| metric(r, "nv_poisson_gap"))?,
        cdf,
        poisson,
        excess,
        setups_per_s: across(p, |r| metric(r, "setups_per_s"))?,
        latency_s: across(p, |r| metric(r, "mean_setup_latency"))?,
        blocking: across(p, |r| metric(r, "blocking_probability"))?,
    })
}

/// The Poisson mean for which P{N <= x} = p (0 < p < 1), by bisection: the mean of
/// N_v the paper's estimate column implies, as its text says it used its measured mean.
pub fn implied_mean(x: usize, p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, x as f64 + 100.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        // P{N <= x} falls as the mean grows.
        if poisson_cdf(mid, x) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// "Misses by": how far our mean lies past `limit` (the paper's value, or a claim's
/// bound), on the side `above` says.
fn miss_by(c: &mut Check, ours: &Estimate, limit: f64, above: bool) {
    if c.verdict == Verdict::Differs {
        let past = if above {
            ours.mean - limit
        } else {
            limit - ours.mean
        };
        c.why = format!("{}; misses by {}", c.why, sig(past));
    }
}

/// Fig. 9's row for panel `n`, under `label` (how the panel was run).
fn fig9_row(n: &SimNv, label: &str) -> Check {
    let mut c = at_most(
        format!(
            "Fig. 9 {} at the paper's costs{label}: N_v against its Poisson estimate",
            n.case.panel
        ),
        "match rather well where P{N_v <= x} > 0.9",
        &n.gap,
        FIG9_GAP,
    );
    c.why = format!(
        "{}; the largest gap between P{{N_v <= x}} at arrivals and Poisson with its mean there, per replication, tolerance the live rows' (0.03); mean N_v {}",
        c.why,
        show(&n.mean)
    );
    miss_by(&mut c, &n.gap, FIG9_GAP, true);
    c
}

/// Table I's measured hit frequencies of panel `n` against the paper's `rows`.
fn hit_rows(item: &str, n: &SimNv, rows: &[super::TableIRow], v: &mut Verdicts) {
    for &(x, _, measured) in rows {
        let item = format!("{item}: measured hit frequency with a cache of {x}");
        match n.hit(x) {
            Some(h) => {
                let mut c = value(item, measured, &h, TABLE_I_TOLERANCE);
                miss_by(&mut c, &h, measured, h.mean > measured);
                v.push(c);
            }
            None => {
                v.push(Check::not_applicable(
                    item,
                    sig(measured),
                    format!(
                        "the model reports P{{N_v <= x}} up to x = {}",
                        CDF_POINTS - 1
                    ),
                ));
            }
        }
    }
}

/// The sign of measured minus estimated at the paper's smallest size, like for like
/// (the paper's estimate is P{N_v <= X}), per replication.
fn sign_row(item: &str, n: &SimNv, (x, est, meas): super::TableIRow, v: &mut Verdicts) {
    if let Some(d) = n.excess(x) {
        let item = format!("{item}: measured minus estimated with a cache of {x}");
        let paper = format!("{:+.4} ({meas} − {est})", meas - est);
        let mut c = if meas >= est {
            at_least(item, paper, &d, 0.0)
        } else {
            at_most(item, paper, &d, 0.0)
        };
        c.why = format!("{}; the sign must agree", c.why);
        v.push(c);
    }
}

/// How a panel run with releases riding is labelled in its rows.
pub const RIDING: &str = ", releases riding (simulated, the second reading)";

/// The simulated rows of Fig. 9, Table I and Fig. 10.
pub fn verdicts(r: &SimDimension, v: &mut Verdicts) {
    for n in &r.nv {
        v.push(fig9_row(n, " (simulated)"));
    }
    for (panel, rows) in PAPER_TABLE_I {
        let item = format!("Table I {panel} at the paper's costs (simulated)");
        let Some(n) = r.nv.iter().find(|n| n.case.panel == panel) else {
            v.push(Check::not_applicable(
                item,
                "hit frequencies",
                "this run has no simulated N_v at this load",
            ));
            continue;
        };
        hit_rows(&item, n, &rows, v);
        let (x, est, _) = rows[0];
        if let Some(e) = n.estimated(x) {
            let mut c = value(
                format!("{item}: estimated hit frequency with a cache of {x}"),
                est,
                &e,
                TABLE_I_TOLERANCE,
            );
            let paper_mean = implied_mean(x, est);
            c.why = format!(
                "{}; P{{N_v <= {x}}} for Poisson with our mean N_v (the paper's reading): the paper's {est} is that for a mean of {} (λ/α, its mean N_v), ours {}, a factor {} of it",
                c.why,
                sig(paper_mean),
                show(&n.mean),
                sig(n.mean.mean / paper_mean)
            );
            miss_by(&mut c, &e, est, e.mean > est);
            v.push(c);
        }
        sign_row(&item, n, rows[0], v);
    }
    // The second reading: releases ride. Its rows say whether the paper's implied mean
    // and its measured hit frequencies follow when setups alone fill the batches.
    for n in &r.riding {
        let Some((_, rows)) = PAPER_TABLE_I.iter().find(|(p, _)| *p == n.case.panel) else {
            continue;
        };
        v.push(fig9_row(n, RIDING));
        let item = format!("Table I {} at the paper's costs{RIDING}", n.case.panel);
        let (x, est, _) = rows[0];
        let paper_mean = implied_mean(x, est);
        let mut c = value(
            format!("{item}: mean N_v at arrivals (λ/α)"),
            paper_mean,
            &n.mean,
            MEAN_TOLERANCE,
        );
        c.paper = format!(
            "{} (the mean its estimate {est} at {x} implies)",
            sig(paper_mean)
        );
        miss_by(&mut c, &n.mean, paper_mean, n.mean.mean > paper_mean);
        v.push(c);
        hit_rows(&item, n, rows, v);
        sign_row(&item, n, rows[0], v);
    }
    for i in &r.invocations {
        let f = i.formula();
        let mut c = value(
            format!(
                "Fig. 10 at the paper's costs (simulated): invocations per call at T = {} and {} calls/s",
                i.threshold,
                sig(i.rate)
            ),
            f,
            &i.paper_count,
            FIG10_TOLERANCE,
        );
        c.paper = format!("4(1 + 3/{}) = {}", i.threshold, sig(f));
        c.ours = format!(
            "{}: 2 x {} client requests + 2 x {} switch messages (formula's part {}); the model's own count, each exchange once, {}",
            show(&i.paper_count),
            sig(i.requests.mean),
            sig(i.switch_messages.mean),
            sig(f - 4.0),
            show(&i.model_count)
        );
        miss_by(&mut c, &i.paper_count, f, i.paper_count.mean > f);
        v.push(c);
    }
}

/// How the panels were run, in words, e.g. "5 replications of 20000 calls each".
pub fn runs(r: &SimDimension) -> String {
    r.nv.first().map_or(String::new(), |n| {
        format!(
            "{} replications of {} calls each",
            n.replications,
            sig(n.calls_per_replication)
        )
    })
}

/// The simulated panels of Fig. 9: one row each.
pub fn nv_table(r: &SimDimension) -> Table {
    let mut t = Table::new([
        Column::new("panel", "panel"),
        Column::new("releases", "releases"),
        Column::new("λ calls/s", "rate").right(),
        Column::new("T", "threshold").right(),
        Column::new("calls", "calls").right(),
        Column::new("mean N_v at arrivals", "mean_nv"),
        Column::new("over time", "mean_nv_over_time"),
        Column::new("dispersion", "dispersion"),
        Column::new("gap to Poisson (P > 0.9)", "gap"),
        Column::new("setups/s", "setups_per_s"),
        Column::new("mean setup ms", "mean_setup_ms")
            .right()
            .fixed(1, 3),
        Column::new("blocked", "blocked").right().fixed(4, 5),
    ]);
    let count = r.nv.iter().map(|n| (n, "count toward T"));
    for (n, releases) in count.chain(r.riding.iter().map(|n| (n, "ride"))) {
        t.row(cells![
            n.case.panel,
            releases,
            n.case.paper_rate,
            n.case.threshold,
            (n.calls_per_replication * n.replications as f64).round() as u64,
            show(&n.mean),
            show(&n.time_mean),
            show(&n.dispersion),
            show(&n.gap),
            show(&n.setups_per_s),
            n.latency_s.mean * 1e3,
            n.blocking.mean
        ]);
    }
    t
}

/// Table I beside the simulated hit frequencies, every size the paper gives.
pub fn table_i(r: &SimDimension) -> Table {
    let mut t = Table::new([
        Column::new("panel", "panel"),
        Column::new("cache size", "cache_size").right(),
        Column::new("paper estimated", "paper_estimated")
            .right()
            .fixed(4, 4),
        Column::new("paper measured", "paper_measured")
            .right()
            .fixed(4, 4),
        Column::new("simulated estimated P{N_v <= X}", "estimated"),
        Column::new("simulated measured", "measured"),
        Column::new("releases riding: measured", "riding_measured"),
    ]);
    for (panel, rows) in PAPER_TABLE_I {
        let Some(n) = r.nv.iter().find(|n| n.case.panel == panel) else {
            continue;
        };
        let riding = r.riding.iter().find(|n| n.case.panel == panel);
        for (x, est, meas) in rows {
            let s = |e: Option<Estimate>| e.map_or("—".to_string(), |e| show(&e));
            t.row(cells![
                panel,
                x as u64,
                est,
                meas,
                s(n.estimated(x)),
                s(n.hit(x)),
                s(riding.and_then(|n| n.hit(x)))
            ]);
        }
    }
    t
}

/// Fig. 10's simulated counts.
pub fn invocations_table(r: &SimDimension) -> Table {
    let mut t = Table::new([
        Column::new("T", "threshold").right(),
        Column::new("calls/s", "rate").right(),
        Column::new("4(1 + 3/T)", "formula").right().fixed(2, 4),
        Column::new("counted as the paper", "paper_count"),
        Column::new("client requests", "requests"),
        Column::new("switch messages", "switch_messages"),
        Column::new("model's count", "model_count"),
    ]);
    for i in &r.invocations {
        t.row(cells![
            i.threshold,
            i.rate,
            i.formula(),
            show(&i.paper_count),
            show(&i.requests),
            show(&i.switch_messages),
            show(&i.model_count)
        ]);
    }
    t
}

/// For `results.json`: every simulated number with its interval.
pub fn to_json(r: &SimDimension) -> serde_json::Value {
    let e = |e: &Estimate| json!({ "mean": e.mean, "ci95": e.ci95, "n": e.n });
    let nv = |n: &SimNv| {
        json!({
            "panel": n.case.panel, "rate": n.case.paper_rate, "threshold": n.case.threshold,
            "replications": n.replications, "calls_per_replication": n.calls_per_replication,
            "mean_nv": e(&n.mean), "mean_nv_over_time": e(&n.time_mean),
            "dispersion": e(&n.dispersion), "gap": e(&n.gap),
            "cdf": n.cdf.iter().map(e).collect::<Vec<_>>(),
            "poisson": n.poisson.iter().map(e).collect::<Vec<_>>(),
            "setups_per_s": e(&n.setups_per_s), "mean_setup_s": e(&n.latency_s),
            "blocking": e(&n.blocking),
        })
    };
    json!({
        "nv": r.nv.iter().map(nv).collect::<Vec<_>>(),
        "nv_releases_riding": r.riding.iter().map(nv).collect::<Vec<_>>(),
        "invocations": r.invocations.iter().map(|i| json!({
            "threshold": i.threshold, "rate": i.rate, "formula": i.formula(),
            "paper_count": e(&i.paper_count), "requests": e(&i.requests),
            "switch_messages": e(&i.switch_messages), "model_count": e(&i.model_count),
            "blocking": e(&i.blocking),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn e(mean: f64) -> Estimate {
        Estimate {
            mean,
            ci95: 0.001,
            n: 5,
        }
    }

    /// Simulated results shaped like the paper's: N_v Poisson with mean 2.6 at (b) and
    /// 8.2 at (d); Fig. 10's counts the formula's.
    pub(crate) fn results() -> SimDimension {
        let panel = |case: NvCase, mean: f64| {
            let cdf: Vec<Estimate> = (0..CDF_POINTS).map(|x| e(poisson_cdf(mean, x))).collect();
            SimNv {
                case,
                replications: 5,
                calls_per_replication: 20_000.0,
                mean: e(mean),
                time_mean: e(mean),
                dispersion: e(1.0),
                gap: e(0.004),
                poisson: cdf.clone(),
                excess: (0..CDF_POINTS - 1)
                    .map(|k| e(poisson_cdf(mean, k) - poisson_cdf(mean, k + 1)))
                    .collect(),
                cdf,
                setups_per_s: e(case.paper_rate),
                latency_s: e(0.05),
                blocking: e(0.0),
            }
        };
        SimDimension {
            nv: vec![
                panel(NV_CASES[0], 0.5),
                panel(NV_CASES[1], 2.6),
                panel(NV_CASES[2], 4.0),
                panel(NV_CASES[3], 8.2),
            ],
            riding: vec![panel(NV_CASES[1], 2.6), panel(NV_CASES[3], 8.2)],
            invocations: FIG10_THRESHOLDS
                .iter()
                .map(|&t| {
                    let m = 6.0 / f64::from(t);
                    SimInvocations {
                        threshold: t,
                        rate: FIG10_RATE,
                        model_count: e(3.0 + m),
                        switch_messages: e(m),
                        requests: e(2.0),
                        paper_count: e(4.0 + 2.0 * m),
                        blocking: e(0.0),
                    }
                })
                .collect(),
        }
    }

    fn table(r: &SimDimension) -> Verdicts {
        let mut v = Verdicts::new();
        verdicts(r, &mut v);
        v
    }

    const FIG9: &str =
        "Fig. 9 (d) high load at the paper's costs (simulated): N_v against its Poisson estimate";
    const FIG10: &str =
        "Fig. 10 at the paper's costs (simulated): invocations per call at T = 4 and 50 calls/s";
    const HIT: &str = "Table I (d) high load at the paper's costs (simulated): measured hit frequency with a cache of 12";
    const SIGN: &str = "Table I (b) medium load at the paper's costs (simulated): measured minus estimated with a cache of 5";

    #[test]
    fn fig9_follows_the_gap() {
        let mut r = results();
        assert_eq!(table(&r).verdict(FIG9), Some(Verdict::Reproduces));
        r.nv[3].gap = e(0.05);
        let v = table(&r);
        assert_eq!(v.verdict(FIG9), Some(Verdict::Differs));
        assert!(
            v.get(FIG9).unwrap().why.ends_with("misses by 0.02"),
            "{:?}",
            v.get(FIG9)
        );
        // An interval across the tolerance cannot tell.
        r.nv[3].gap = Estimate {
            mean: 0.03,
            ci95: 0.01,
            n: 5,
        };
        assert_eq!(table(&r).verdict(FIG9), Some(Verdict::Undecided));
    }

    #[test]
    fn table_i_follows_the_hit_frequencies() {
        let mut r = results();
        // Poisson with mean 8.2 gives P{N_v <= 11} = 0.8731 against the paper's 0.9081:
        // 3.9% off, past the 0.5% tolerance.
        let v = table(&r);
        assert_eq!(v.verdict(HIT), Some(Verdict::Differs), "{:?}", v.get(HIT));
        assert!(
            v.get(HIT).unwrap().why.ends_with("misses by 0.035"),
            "{:?}",
            v.get(HIT)
        );
        r.nv[3].cdf[11] = e(0.909);
        assert_eq!(table(&r).verdict(HIT), Some(Verdict::Reproduces));
        // Poisson measured against Poisson estimated, like for like: P{N_v <= 4} −
        // P{N <= 5} = −0.074, against the paper's +0.033.
        let v = table(&r);
        assert_eq!(v.verdict(SIGN), Some(Verdict::Differs), "{:?}", v.get(SIGN));
        r.nv[1].excess[4] = e(0.03);
        assert_eq!(table(&r).verdict(SIGN), Some(Verdict::Reproduces));
        r.nv[1].excess[4] = e(0.0);
        assert_eq!(table(&r).verdict(SIGN), Some(Verdict::Undecided));
        r.nv.retain(|n| n.case.panel != "(d) high load");
        assert_eq!(
            table(&r).verdict("Table I (d) high load at the paper's costs (simulated)"),
            Some(Verdict::NotApplicable)
        );
    }

    /// The paper's estimates are Poisson CDFs of one mean per panel: 0.9529 at X = 5
    /// implies about 2.6, and the other sizes agree with it.
    #[test]
    fn the_papers_estimate_implies_its_mean() {
        let m = implied_mean(5, 0.9529);
        assert!((m - 2.6).abs() < 0.05, "{m}");
        assert!((poisson_cdf(m, 7) - 0.9950).abs() < 0.002);
        let m = implied_mean(12, 0.9354);
        assert!((poisson_cdf(m, 15) - 0.9916).abs() < 0.003, "{m}");
        let v = table(&results());
        let est = "Table I (b) medium load at the paper's costs (simulated): estimated hit frequency with a cache of 5";
        assert!(
            v.get(est)
                .unwrap()
                .why
                .contains("is that for a mean of 2.573 (λ/α"),
            "{:?}",
            v.get(est)
        );
    }

    #[test]
    fn the_second_reading_has_rows_of_its_own() {
        let mut r = results();
        let mean = format!(
            "Table I (b) medium load at the paper's costs{RIDING}: mean N_v at arrivals (λ/α)"
        );
        let hit = format!(
            "Table I (d) high load at the paper's costs{RIDING}: measured hit frequency with a cache of 12"
        );
        let fig9 = format!(
            "Fig. 9 (d) high load at the paper's costs{RIDING}: N_v against its Poisson estimate"
        );
        // 2.6 against the 2.573 the paper's estimate implies: 1% off.
        let v = table(&r);
        assert_eq!(
            v.verdict(&mean),
            Some(Verdict::Reproduces),
            "{:?}",
            v.get(&mean)
        );
        assert_eq!(v.verdict(&hit), Some(Verdict::Differs));
        assert_eq!(v.verdict(&fig9), Some(Verdict::Reproduces));
        r.riding[0].mean = e(3.0);
        r.riding[1].cdf[11] = e(0.909);
        r.riding[1].gap = e(0.12);
        let v = table(&r);
        assert_eq!(v.verdict(&mean), Some(Verdict::Differs));
        assert!(
            v.get(&mean).unwrap().why.contains("misses by 0.42"),
            "{:?}",
            v.get(&mean)
        );
        assert_eq!(v.verdict(&hit), Some(Verdict::Reproduces));
        assert_eq!(v.verdict(&fig9), Some(Verdict::Differs));
        // The text's rows do not move with the second reading's.
        assert_eq!(
            v.verdict("Table I (d) high load at the paper's costs (simulated): measured hit frequency with a cache of 12"),
            Some(Verdict::Differs)
        );
        r.riding.clear();
        assert!(table(&r).get(&mean).is_none());
    }

    #[test]
    fn fig10_follows_the_counts() {
        let mut r = results();
        // 4 + 2 x 6/4 = 7 = 4(1 + 3/4).
        assert_eq!(table(&r).verdict(FIG10), Some(Verdict::Reproduces));
        r.invocations[2].paper_count = e(8.0);
        let v = table(&r);
        assert_eq!(v.verdict(FIG10), Some(Verdict::Differs));
        assert!(
            v.get(FIG10).unwrap().why.ends_with("misses by 1"),
            "{:?}",
            v.get(FIG10)
        );
    }
}
