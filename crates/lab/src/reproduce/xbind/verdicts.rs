//! The verdict table of the xbind reproduction (paper 000; issue 22): each of the
//! paper's tables, figures and claims beside our number and a verdict computed from
//! [`XbindResults`] by a stated criterion. A pure function: change a number in the
//! results, the verdict follows (the tests below do).
//!
//! Our live measurements are one run each, so our numbers carry no interval (the rows
//! say "no interval"): a claim about an ordering is decided by the points, and a value
//! by a tolerance that the row states. The tolerances are ours, set before looking at
//! the results they judge, except where a row derives one from the paper's own numbers.

use atmlab_control::cm::dimension::poisson_cdf;

use super::simulated::SimPoint;
use super::{CurvePoint, NvResult, PAPER_TABLE_I, SCALE, XbindResults};
use crate::report::verdict::{
    Check, Relation, Verdict, Verdicts, at_least, at_most, median, order, point, sig, value,
};

/// The paper's §III-B means, ms: sequential, threaded, and xbind's smallest (Fig. 6, at
/// one call/s).
const PAPER_SEQUENTIAL_MS: f64 = 23.4;
const PAPER_THREADED_MS: f64 = 24.9;
const PAPER_XBIND_MS: f64 = 11.0;

/// "Similar" (Fig. 6's 10-25 calls/s region): mean latencies within this factor (ours).
const SIMILAR_FACTOR: f64 = 1.5;

/// Adaptive T "takes the best" at a load when its mean latency is within this factor of
/// the best fixed T's (ours).
const ADAPTIVE_FACTOR: f64 = 1.25;

/// Fig. 9's "match rather well" where P{N_v <= x} > 0.9: the largest gap between
/// estimate and measurement the paper's own Table I shows (0.9354 against 0.9081 at
/// X = 12), rounded up.
const FIG9_GAP: f64 = 0.03;

/// Table I's measured hit frequencies against ours: relative tolerance (ours).
const TABLE_I_TOLERANCE: f64 = 0.005;

/// λ/α two ways (λ x latency, and the mean of N_v): relative tolerance (ours).
const TWO_WAYS_TOLERANCE: f64 = 0.1;

/// Fig. 10's formula against our counts: relative tolerance (ours).
const FIG10_TOLERANCE: f64 = 0.05;

/// A manager's curve, in load order.
fn curve<'a>(r: &'a XbindResults, manager: &str) -> Vec<&'a CurvePoint> {
    let mut v: Vec<&CurvePoint> = r.curves.iter().filter(|c| c.manager == manager).collect();
    v.sort_by(|a, b| a.report.offered_per_s.total_cmp(&b.report.offered_per_s));
    v
}

/// A curve's capacity: the most setups/s it measured in the sweep and in each capacity
/// pass after it (`XbindResults::capacity_passes`), and whether that is its capacity
/// (some load it was offered was not carried) or only a lower bound on it (it carried
/// every load offered, so the grid stopped below its knee).
#[derive(Debug, Clone)]
struct Capacity {
    /// The most setups/s of each pass, the sweep first; `None` where a pass did not
    /// measure the manager.
    peaks: Vec<Option<f64>>,
    reached: bool,
}

impl Capacity {
    fn of(r: &XbindResults, manager: &str) -> Option<Capacity> {
        let sweep = curve(r, manager);
        let peak = |points: &mut dyn Iterator<Item = &CurvePoint>| {
            points.map(|c| c.report.setups_per_s).max_by(f64::total_cmp)
        };
        let mut peaks = vec![Some(peak(&mut sweep.iter().copied())?)];
        let mut reached = sweep.iter().any(|c| !c.carried());
        for pass in &r.capacity_passes {
            let mine = || pass.iter().filter(|c| c.manager == manager);
            peaks.push(peak(&mut mine()));
            reached |= mine().any(|c| !c.carried());
        }
        Some(Capacity { peaks, reached })
    }

    /// The median of the passes' peaks.
    fn peak(&self) -> f64 {
        median(self.peaks.iter().flatten().copied().collect())
    }

    fn show(&self) -> String {
        let each: Vec<String> = self.peaks.iter().flatten().map(|&p| per_s(p)).collect();
        let passes = if each.len() > 1 {
            format!("; passes {}", each.join(" / "))
        } else {
            String::new()
        };
        if self.reached {
            format!("{}{passes}", per_s(self.peak()))
        } else {
            format!(
                "at least {} (carried every load{passes})",
                per_s(self.peak())
            )
        }
    }
}

/// How far past 1 the median ratio of two live curves' peaks must be to order them
/// (ours): a live capacity has no interval, and peaks within this share of each other
/// cannot be told apart (between runs they have moved by more).
const CAPACITY_MARGIN: f64 = 0.10;

/// Whether `more` has more capacity than `less`, judged only as far as the grid shows
/// and beyond [`CAPACITY_MARGIN`], on the median over the passes that measured both of
/// the ratio of their peaks in the same pass (seconds apart, so that a pass the machine
/// was slow for is slow for both): a capacity or a lower bound past the other's capacity
/// by the margin reproduces; a lower bound (or a capacity) of `less` past `more`'s
/// capacity by the margin differs; a median ratio within the margin, two lower bounds,
/// or a lower bound under a capacity cannot tell.
fn more_capacity(more: &Capacity, less: &Capacity) -> Verdict {
    let ratios: Vec<f64> = more
        .peaks
        .iter()
        .zip(&less.peaks)
        .filter_map(|(a, b)| Some(a.as_ref()? / b.as_ref()?))
        .collect();
    let ratio = median(ratios);
    match (more.reached, less.reached) {
        (_, true) if ratio > 1.0 + CAPACITY_MARGIN => Verdict::Reproduces,
        (true, _) if ratio * (1.0 + CAPACITY_MARGIN) < 1.0 => Verdict::Differs,
        _ => Verdict::Undecided,
    }
}

/// A check that `more` (named first) has more capacity than `less`.
fn capacity_order(
    item: &str,
    claim: &str,
    (more_name, more): (&str, &Capacity),
    (less_name, less): (&str, &Capacity),
) -> Check {
    let verdict = more_capacity(more, less);
    let why = match verdict {
        Verdict::Reproduces => format!("{more_name} > {less_name}"),
        Verdict::Differs => format!("{more_name} > {less_name} reversed"),
        _ => format!(
            "{more_name} > {less_name}: cannot tell (peaks within {}% of each other, or a curve that carried every load offered, which gives only a lower bound on its capacity)",
            sig(CAPACITY_MARGIN * 100.0)
        ),
    };
    Check::new(
        item,
        claim,
        format!("{more_name} {}, {less_name} {}", more.show(), less.show()),
        verdict,
        format!(
            "{why}; most setups/s at any load in the sweep and each capacity pass, ordered on the median ratio of two peaks of one pass; a capacity only where some load was not carried"
        ),
    )
}

/// The highest load a curve carried (95% of it set up).
fn carried_up_to(points: &[&CurvePoint]) -> Option<f64> {
    points
        .iter()
        .filter(|c| c.carried())
        .map(|c| c.report.offered_per_s)
        .max_by(f64::total_cmp)
}

fn at<'a>(points: &[&'a CurvePoint], rate: f64) -> Option<&'a CurvePoint> {
    points
        .iter()
        .copied()
        .find(|c| c.report.offered_per_s == rate)
}

fn ms(x: f64) -> String {
    format!("{} ms", sig(x))
}

fn per_s(x: f64) -> String {
    format!("{}/s", sig(x))
}

/// A row the run did not give the points for.
fn missing(item: &str, paper: &str, what: &str) -> Check {
    Check::not_applicable(item, paper, format!("this run has no {what}"))
}

/// The verdict table, from the results alone.
pub fn verdicts(r: &XbindResults) -> Verdicts {
    let mut v = Verdicts::new();
    baseline(r, &mut v);
    fig6(r, &mut v);
    fig7(r, &mut v);
    fig11(r, &mut v);
    fig9(r, &mut v);
    table_i(r, &mut v);
    fig10(r, &mut v);
    super::sim_dimension::verdicts(&r.simulated_dimension, &mut v);
    v
}

fn baseline(r: &XbindResults, v: &mut Verdicts) {
    let seq = r.baseline.iter().find(|b| b.manager == "sequential");
    let xb = r.baseline.iter().find(|b| b.manager == "xbind T=1");
    v.push(Check::new(
        "§III-B: sequential manager mean setup latency one at a time",
        ms(PAPER_SEQUENTIAL_MS),
        seq.map_or("—".into(), |b| ms(b.mean_ms)),
        Verdict::NotApplicable,
        "absolute times: HP 9000/700s on Orbix against loopback gRPC on today's cores; \
         compared as ratios and orderings below",
    ));
    v.push(Check::not_applicable(
        "§III-B and Fig. 6: threaded manager (thread pool; 24.9 ms mean)",
        format!(
            "{} ms, slightly slower than sequential",
            sig(PAPER_THREADED_MS)
        ),
        "atmlab's control plane has no thread-pool manager (CmKind is sequential or \
         xbind). A pool of independent sequential managers would share no state, and the \
         paper puts its threaded manager's slowdown on locking shared state and switching \
         threads; adding a manager kind is a control-plane change outside this \
         reproduction",
    ));
    match (seq, xb) {
        (Some(s), Some(x)) => {
            v.push(order(
                "§III-B and Fig. 6: xbind (T = 1) faster than sequential at light load",
                format!(
                    "xbind {} < sequential {}",
                    ms(PAPER_XBIND_MS),
                    ms(PAPER_SEQUENTIAL_MS)
                ),
                ("xbind", &point(x.mean_ms)),
                Relation::Less,
                ("sequential", &point(s.mean_ms)),
            ));
            let ours = if x.mean_ms > 0.0 {
                s.mean_ms / x.mean_ms
            } else {
                f64::NAN
            };
            let mut c = value(
                "§III-B and Fig. 6: speed-up of xbind over sequential (mean latencies)",
                PAPER_SEQUENTIAL_MS / PAPER_XBIND_MS,
                &point(ours),
                0.25,
            );
            c.paper = format!(
                "{} ({} / {} ms)",
                sig(PAPER_SEQUENTIAL_MS / PAPER_XBIND_MS),
                sig(PAPER_SEQUENTIAL_MS),
                sig(PAPER_XBIND_MS)
            );
            v.push(c);
        }
        _ => {
            v.push(missing(
                "§III-B and Fig. 6: xbind (T = 1) faster than sequential at light load",
                "11.0 < 23.4 ms",
                "baseline of both managers",
            ));
        }
    }
}

fn fig6(r: &XbindResults, v: &mut Verdicts) {
    let seq = curve(r, "sequential");
    let t1 = curve(r, "xbind T=1");
    let (Some(seq_cap), Some(t1_cap)) =
        (Capacity::of(r, "sequential"), Capacity::of(r, "xbind T=1"))
    else {
        v.push(missing(
            "Fig. 6: sequential saturates first",
            "sequential at about 25 calls/s",
            "curves of sequential and T = 1",
        ));
        return;
    };
    v.push(capacity_order(
        "Fig. 6: sequential saturates first (most setups/s)",
        "sequential at about 25 calls/s; xbind beyond 60",
        ("xbind T=1", &t1_cap),
        ("sequential", &seq_cap),
    ));
    let seq_peak = seq_cap.peak();
    let mut c = value(
        "Fig. 6: sequential's saturation throughput (ours x 1/100)",
        25.0,
        &point(seq_peak / SCALE),
        0.25,
    );
    c.paper = "about 25 calls/s".into();
    c.ours = format!(
        "{} ({} at our scale)",
        sig(seq_peak / SCALE),
        per_s(seq_peak)
    );
    if !seq_cap.reached {
        c.verdict = Verdict::Undecided;
        c.why = format!(
            "{}; but it carried every load offered, so this is a lower bound",
            c.why
        );
    }
    v.push(c);

    // The paper's 10-25 calls/s region, at our scale: where both were offered.
    let item = "Fig. 6: xbind similar to sequential at 10-25 calls/s (ours 1000-2500/s)";
    let region: Vec<(f64, f64, f64)> = seq
        .iter()
        .filter(|c| (10.0 * SCALE..=25.0 * SCALE).contains(&c.report.offered_per_s))
        .filter_map(|s| {
            at(&t1, s.report.offered_per_s).map(|x| {
                (
                    s.report.offered_per_s,
                    s.report.mean_setup_ms,
                    x.report.mean_setup_ms,
                )
            })
        })
        .collect();
    if region.is_empty() {
        v.push(missing(item, "similar latency", "point in 1,000-2,500/s"));
    } else {
        let worst = region
            .iter()
            .map(|(_, s, x)| (s / x).max(x / s))
            .fold(1.0, f64::max);
        let ours = region
            .iter()
            .map(|(l, s, x)| format!("at {}: sequential {}, T = 1 {}", per_s(*l), ms(*s), ms(*x)))
            .collect::<Vec<_>>()
            .join("; ");
        let verdict = if worst <= SIMILAR_FACTOR {
            Verdict::Reproduces
        } else {
            Verdict::Differs
        };
        v.push(Check::new(
            item,
            "similar latency (a synchronous call slightly cheaper than two asynchronous)",
            ours,
            verdict,
            format!(
                "similar: means within a factor {} (ours); largest factor {}",
                sig(SIMILAR_FACTOR),
                sig(worst)
            ),
        ));
    }

    let item = "Fig. 6: xbind T = 1 supports 60 calls/s (ours 6000/s)";
    match carried_up_to(&t1) {
        Some(up) => {
            let mut c = at_least(item, "60 calls/s at about 40 ms", &point(up), 60.0 * SCALE);
            c.ours = format!("carried up to {} offered", per_s(up));
            v.push(c);
        }
        None => {
            v.push(missing(item, "60 calls/s", "carried point of T = 1"));
        }
    }
    // The lightest load against the highest load carried: the paper's 60 calls/s is
    // about 60% of its T = 1's capacity, where its curve has risen; 6,000/s (x 100) is
    // under a tenth of ours, where latencies at light loads differ by noise (a run read
    // 0.86 ms there, the next 0.22 ms).
    let item = "Fig. 6: T = 1's latency grows with load";
    match (t1.first(), t1.iter().rev().find(|c| c.carried())) {
        (Some(lo), Some(hi)) if hi.report.offered_per_s > lo.report.offered_per_s => {
            v.push(order(
                item,
                "11.0 ms at 1 call/s, about 40 ms at 60",
                (
                    &format!("at {}", per_s(lo.report.offered_per_s)),
                    &point(lo.report.mean_setup_ms),
                ),
                Relation::Less,
                (
                    &format!("at {}", per_s(hi.report.offered_per_s)),
                    &point(hi.report.mean_setup_ms),
                ),
            ));
        }
        _ => {
            v.push(missing(item, "grows", "two carried points of T = 1"));
        }
    }
}

fn fig7(r: &XbindResults, v: &mut Verdicts) {
    let ts = [1u32, 4, 10, 15];
    let caps: Vec<(u32, Capacity)> = ts
        .iter()
        .filter_map(|t| Capacity::of(r, &format!("xbind T={t}")).map(|c| (*t, c)))
        .collect();
    let item = "Fig. 7: the throughput supported grows with T";
    if caps.len() < 2 {
        v.push(missing(item, "T = 15 highest", "curves of two thresholds"));
    } else {
        let mut ranked = caps.clone();
        ranked.sort_by(|a, b| b.1.peak().total_cmp(&a.1.peak()));
        let ours = ranked
            .iter()
            .map(|(t, c)| format!("T = {t}: {}", c.show()))
            .collect::<Vec<_>>()
            .join(" > ");
        // Each T against the next: one reversal differs; all in order reproduces; a
        // pair the grid cannot order leaves the whole undecided.
        let pairs: Vec<Verdict> = caps
            .windows(2)
            .map(|w| more_capacity(&w[1].1, &w[0].1))
            .collect();
        let verdict = if pairs.contains(&Verdict::Differs) {
            Verdict::Differs
        } else if pairs.iter().all(|p| *p == Verdict::Reproduces) {
            Verdict::Reproduces
        } else {
            Verdict::Undecided
        };
        v.push(Check::new(
            item,
            "T = 1 below 100 calls/s; T = 15 up to 170 calls/s",
            format!("most setups/s measured: {ours}"),
            verdict,
            format!("each T's capacity must exceed the next smaller T's by {}% (ours: the median over the sweep and the capacity passes of the ratio of two peaks of one pass); a curve that carried every load offered gives only a lower bound, and a pair the grid or the margin cannot order is undecided", sig(CAPACITY_MARGIN * 100.0)),
        ));
    }
    let t1 = curve(r, "xbind T=1");
    let t15 = curve(r, "xbind T=15");
    match (Capacity::of(r, "xbind T=1"), Capacity::of(r, "xbind T=15")) {
        (Some(a), Some(b)) => {
            v.push(capacity_order(
                "Fig. 7: T = 15 carries more than T = 1",
                "170 against under 100 calls/s",
                ("T = 15", &b),
                ("T = 1", &a),
            ));
        }
        _ => {
            v.push(missing(
                "Fig. 7: T = 15 carries more than T = 1",
                "170 against under 100 calls/s",
                "curves of T = 1 and T = 15",
            ));
        }
    }
    let item = "Fig. 7: T = 1 cannot carry more than 100 calls/s (ours 10000/s)";
    match carried_up_to(&t1) {
        Some(up) => {
            let mut c = at_most(item, "under 100 calls/s", &point(up), 100.0 * SCALE);
            c.ours = format!("carried up to {} offered", per_s(up));
            v.push(c);
        }
        None => {
            v.push(missing(item, "under 100 calls/s", "carried point of T = 1"));
        }
    }
    let item = "Fig. 7: at light load a larger T is slower (T = 15 against T = 1)";
    match (t1.first(), t15.first()) {
        (Some(a), Some(b)) if a.report.offered_per_s == b.report.offered_per_s => {
            let mut c = order(
                item,
                "T = 1 lowest latency at light load",
                ("T = 15", &point(b.report.mean_setup_ms)),
                Relation::Greater,
                ("T = 1", &point(a.report.mean_setup_ms)),
            );
            c.why = format!(
                "{} (at {} offered, flush time-out {})",
                c.why,
                per_s(a.report.offered_per_s),
                ms(r.flush_ms)
            );
            v.push(c);
        }
        _ => {
            v.push(missing(
                item,
                "T = 1 lowest",
                "light-load points of T = 1 and 15",
            ));
        }
    }
    let item = "Fig. 7: the light-load latency of T = 15 follows the flush time-out";
    let sweep: Vec<_> = r.flush_sweep.iter().filter(|f| f.threshold == 15).collect();
    match (sweep.first(), sweep.last()) {
        (Some(lo), Some(hi)) if hi.flush_ms > lo.flush_ms => {
            let mut c = order(
                item,
                "a lone command waits for the flush (1 s in the paper)",
                (
                    &format!("flush {}", ms(lo.flush_ms)),
                    &point(lo.report.mean_setup_ms),
                ),
                Relation::Less,
                (
                    &format!("flush {}", ms(hi.flush_ms)),
                    &point(hi.report.mean_setup_ms),
                ),
            );
            c.ours = sweep
                .iter()
                .map(|f| format!("{}: {}", ms(f.flush_ms), ms(f.report.mean_setup_ms)))
                .collect::<Vec<_>>()
                .join("; ");
            v.push(c);
        }
        _ => {
            v.push(missing(item, "grows with the time-out", "flush sweep"));
        }
    }
    simulated(r, v);
    fig11_simulated(r, v);
}

/// How close a simulated prediction must come to the paper's figure (relative): the
/// profile was fitted to two one-at-a-time numbers (23.4 ms, 11 ms), so a prediction
/// under load within a quarter of the paper's is read as reproducing it. Ours.
pub const PREDICTION_TOLERANCE: f64 = 0.25;

fn sim_curve<'a>(r: &'a XbindResults, manager: &str) -> Vec<&'a SimPoint> {
    r.simulated
        .iter()
        .filter(|p| p.manager == manager)
        .collect()
}

/// A simulated curve's knee: the highest offered rate carried, with every lower rate
/// carried too, and the next rate simulated (not carried), if any.
fn sim_knee(r: &XbindResults, manager: &str) -> Option<(f64, Option<f64>)> {
    let mut curve = sim_curve(r, manager);
    curve.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let carried = curve.iter().take_while(|p| p.carried()).count();
    let knee = curve.get(carried.checked_sub(1)?)?.rate;
    Some((knee, curve.get(carried).map(|p| p.rate)))
}

/// Figs. 6 and 7 at the paper's costs: the simulated control plane's predictions.
fn simulated(r: &XbindResults, v: &mut Verdicts) {
    let item = "Fig. 7 at the paper's costs (simulated, paper-000): T = 15 carries more than T = 1";
    let paper = "T = 15 carries 170 calls/s, T = 1 about 100";
    let top = |m: &str| {
        sim_curve(r, m)
            .into_iter()
            .max_by(|a, b| a.rate.total_cmp(&b.rate))
    };
    match (top("xbind T=1"), top("xbind T=15")) {
        (Some(a), Some(b)) if a.rate == b.rate => v.push(order(
            item,
            paper,
            ("T = 15", &b.setups_per_s),
            Relation::Greater,
            ("T = 1", &a.setups_per_s),
        )),
        _ => v.push(missing(item, paper, "simulated T = 1 and T = 15 curve")),
    };
    let item = "Fig. 7 at the paper's costs (simulated): large T at 170 calls/s, mean setup";
    let paper = 0.085;
    match sim_curve(r, "xbind T=15")
        .into_iter()
        .find(|p| p.rate == 170.0)
    {
        Some(p) => v.push(
            value(item, paper, &p.latency_s, PREDICTION_TOLERANCE)
                .with_paper("85 ms at 170 calls/s (600,000 calls/h)"),
        ),
        None => v.push(missing(item, "85 ms", "simulated point at 170 calls/s")),
    };
    // "Saturates at a call arrival rate of about 25 calls/s" (§III-B) is a point on
    // Fig. 6's axis of offered calls: the highest rate the manager still carries (its
    // knee), not the most setups it completes past it, where a finite run favours setups
    // over the releases queued behind them.
    let item = "Fig. 6 at the paper's costs (simulated): the sequential manager saturates";
    match sim_knee(r, "sequential") {
        Some((knee, next)) => {
            let mut c = value(item, 25.0, &point(knee), PREDICTION_TOLERANCE)
                .with_paper("at about 25 calls/s");
            c.why = format!(
                "{}; the highest rate carried (setups within 5% of the rate, under 1% refused){}",
                c.why,
                next.map_or(String::new(), |n| format!(", {} not", sig(n)))
            );
            v.push(c);
        }
        None => {
            v.push(missing(
                item,
                "about 25 calls/s",
                "simulated sequential curve with a carried rate",
            ));
        }
    };
    let item =
        "§III-B at the paper's costs (simulated): threaded slightly less efficient than sequential";
    let paper = "24.9 against 23.4 ms one at a time; both saturate near 25 calls/s";
    match (
        sim_knee(r, "threaded (4 threads)"),
        sim_knee(r, "sequential"),
    ) {
        (Some((t, _)), Some((s, _))) => {
            let mut c = order(
                item,
                paper,
                ("threaded knee", &point(t)),
                Relation::Less,
                ("sequential knee", &point(s)),
            );
            c.why = format!(
                "{}; the model has no cost of locking shared state, the paper's explanation",
                c.why
            );
            v.push(c);
        }
        _ => {
            v.push(missing(item, paper, "simulated threaded curve"));
        }
    };
    // Not a prediction: the profile's `oneway` was fitted to it (in the models' tests),
    // so this row checks that the fit holds in the report's own runs.
    let item =
        "Abstract at the paper's costs (simulated; the fit's own figure): xbind's light-load setup";
    match sim_curve(r, "xbind T=1")
        .into_iter()
        .min_by(|a, b| a.rate.total_cmp(&b.rate))
    {
        Some(p) => v.push(
            value(item, 0.011, &p.latency_s, PREDICTION_TOLERANCE)
                .with_paper("11 ms at 3,600 call operations/h"),
        ),
        None => v.push(missing(item, "11 ms", "simulated xbind T = 1 curve")),
    };
    // Not a prediction either: the stalls were fitted to these quantiles.
    let item = "§III-B at the paper's costs (simulated; the fit's own figures): the sequential setup's 5% and 95% quantiles";
    match sim_curve(r, "sequential")
        .into_iter()
        .min_by(|a, b| a.rate.total_cmp(&b.rate))
    {
        Some(p) => {
            // Judged on the spread, 95% less 5% (10.5 ms), which the stalls were fitted
            // to: a quantile alone may pass with every setup alike.
            let spread = p.quantiles_s.1.mean - p.quantiles_s.0.mean;
            let mut c = value(item, 0.0105, &point(spread), PREDICTION_TOLERANCE);
            c.paper = "5% 20.5 ms, 95% 31.0 ms (one at a time): 10.5 ms apart".into();
            c.ours = format!(
                "5% {}, 95% {} at {} call/s: {} apart",
                ms(p.quantiles_s.0.mean * 1e3),
                ms(p.quantiles_s.1.mean * 1e3),
                sig(p.rate),
                ms(spread * 1e3)
            );
            v.push(c);
        }
        None => {
            v.push(missing(
                item,
                "20.5 and 31.0 ms",
                "simulated sequential curve",
            ));
        }
    };
    // §IV, on Fig. 6: "the system can support up to 60 calls/s with average call setup
    // latency of about 40 ms" (xbind, T = 1, caches warm).
    let item = "Fig. 6 at the paper's costs (simulated): xbind (T = 1) at 60 calls/s, mean setup";
    match sim_curve(r, "xbind T=1")
        .into_iter()
        .find(|p| p.rate == 60.0)
    {
        Some(p) if p.carried() => {
            v.push(
                value(item, 0.040, &p.latency_s, PREDICTION_TOLERANCE)
                    .with_paper("up to 60 calls/s at about 40 ms"),
            );
        }
        Some(p) => {
            let mut c = value(item, 0.040, &p.latency_s, PREDICTION_TOLERANCE)
                .with_paper("up to 60 calls/s at about 40 ms");
            c.verdict = Verdict::Differs;
            c.why = format!(
                "60 calls/s not carried ({} setups/s); {}",
                sig(p.setups_per_s.mean),
                c.why
            );
            v.push(c);
        }
        None => {
            v.push(missing(
                item,
                "about 40 ms",
                "simulated xbind T = 1 point at 60 calls/s",
            ));
        }
    };
}

fn fig11(r: &XbindResults, v: &mut Verdicts) {
    let item = "Fig. 11 and §IV-B: adaptive T (the paper's regions x 100) takes the best of T = 1 / 4 / 10";
    let adaptive = curve(r, "xbind adaptive");
    let fixed: Vec<Vec<&CurvePoint>> = [1, 4, 10]
        .iter()
        .map(|t| curve(r, &format!("xbind T={t}")))
        .collect();
    let mut worse = Vec::new();
    let mut compared = 0;
    for a in &adaptive {
        let load = a.report.offered_per_s;
        let best = fixed
            .iter()
            .filter_map(|c| at(c, load))
            .filter(|c| c.carried())
            .min_by(|x, y| x.report.mean_setup_ms.total_cmp(&y.report.mean_setup_ms));
        let Some(best) = best else { continue };
        compared += 1;
        if !a.carried() || a.report.mean_setup_ms > ADAPTIVE_FACTOR * best.report.mean_setup_ms {
            worse.push(format!(
                "at {}: adaptive {}{} (T mostly {}), {} {}",
                per_s(load),
                ms(a.report.mean_setup_ms),
                if a.carried() {
                    String::new()
                } else {
                    format!(", {} carried", per_s(a.report.setups_per_s))
                },
                a.threshold,
                best.manager,
                ms(best.report.mean_setup_ms)
            ));
        }
    }
    v.push(adaptive_row(
        item,
        "load carried by a fixed T and offered to adaptive T",
        "load",
        compared,
        &worse,
    ));
}

/// Fig. 11's row: adaptive T against the best fixed T at each of `compared` loads (`one`
/// names a load: "load", "rate"), `worse` those where it falls short (`what` the data
/// missing when none was compared).
fn adaptive_row(item: &str, what: &str, one: &str, compared: usize, worse: &[String]) -> Check {
    if compared == 0 {
        return missing(item, "best of both", what);
    }
    let ours = if worse.is_empty() {
        format!(
            "within a factor {} of the best fixed T at all {compared} {one}s",
            sig(ADAPTIVE_FACTOR)
        )
    } else {
        worse.join("; ")
    };
    Check::new(
        item,
        "a good trade of latency and throughput at every load",
        ours,
        if worse.is_empty() {
            Verdict::Reproduces
        } else {
            Verdict::Differs
        },
        format!(
            "at every {one} some fixed T carried: adaptive carries it, mean within a \
             factor {} of the best fixed T's (ours); {} of {compared} {one}s fail",
            sig(ADAPTIVE_FACTOR),
            worse.len()
        ),
    )
}

/// Fig. 11 where the paper's costs hold: the simulated adaptive manager (the paper's own
/// regions, unscaled: below 50 calls/s T = 1, to 100 T = 4, above T = 10) against the
/// best of the simulated fixed T = 1, 4 and 10 at each rate, by the same criterion as
/// the live rows (carried, mean within [`ADAPTIVE_FACTOR`] of the best fixed T's).
fn fig11_simulated(r: &XbindResults, v: &mut Verdicts) {
    let item = "Fig. 11 at the paper's costs (simulated): adaptive T (the paper's regions) takes the best of T = 1 / 4 / 10";
    let adaptive = sim_curve(r, "xbind adaptive");
    let fixed: Vec<Vec<&SimPoint>> = [1, 4, 10]
        .iter()
        .map(|t| sim_curve(r, &format!("xbind T={t}")))
        .collect();
    let mut worse = Vec::new();
    let mut compared = 0;
    for a in &adaptive {
        let best = fixed
            .iter()
            .filter_map(|c| c.iter().find(|p| p.rate == a.rate))
            .filter(|p| p.carried())
            .min_by(|x, y| x.latency_s.mean.total_cmp(&y.latency_s.mean));
        let Some(best) = best else { continue };
        compared += 1;
        if !a.carried() || a.latency_s.mean > ADAPTIVE_FACTOR * best.latency_s.mean {
            worse.push(format!(
                "at {} calls/s: adaptive {} ms{}, {} {} ms",
                sig(a.rate),
                sig(a.latency_s.mean * 1e3),
                if a.carried() { "" } else { " (not carried)" },
                best.manager,
                sig(best.latency_s.mean * 1e3)
            ));
        }
    }
    v.push(adaptive_row(
        item,
        "simulated adaptive and fixed-T curves",
        "rate",
        compared,
        &worse,
    ));
}

/// The largest gap between measured and Poisson P{N_v <= x} where the estimate is above
/// 0.9 (the paper's region of interest).
fn fig9_gap(n: &NvResult) -> f64 {
    let m = n.probe.mean();
    let top = n.probe.at_arrival.len() + 1;
    (0..=top)
        .filter(|&x| poisson_cdf(m, x) > 0.9)
        .map(|x| (n.probe.cdf(x) - poisson_cdf(m, x)).abs())
        .fold(0.0, f64::max)
}

fn fig9(r: &XbindResults, v: &mut Verdicts) {
    for n in &r.nv {
        let mut c = at_most(
            format!(
                "Fig. 9 {}: measured N_v against its Poisson estimate",
                n.case.panel
            ),
            "match rather well where P{N_v <= x} > 0.9",
            &point(fig9_gap(n)),
            FIG9_GAP,
        );
        c.why = format!(
            "{}; the largest gap between measured and Poisson there, tolerance the paper's own Table I gap (0.027) rounded up",
            c.why
        );
        v.push(c);
    }
    for n in &r.nv {
        let mut c = value(
            format!(
                "§IV-A {}: λ/α two ways (λ x latency; mean of N_v)",
                n.case.panel
            ),
            n.probe.mean(),
            &point(n.direct_mean()),
            TWO_WAYS_TOLERANCE,
        );
        c.paper = format!("equal (ours: mean of N_v {})", sig(n.probe.mean()));
        c.ours = format!("λ x latency {}", sig(n.direct_mean()));
        v.push(c);
    }
}

fn table_i(r: &XbindResults, v: &mut Verdicts) {
    for (panel, rows) in PAPER_TABLE_I {
        let Some(n) = r.nv.iter().find(|n| n.case.panel == panel) else {
            v.push(missing(
                &format!("Table I {panel}"),
                "hit frequencies",
                "N_v run at this load",
            ));
            continue;
        };
        for (x, _, measured) in rows {
            v.push(value(
                format!("Table I {panel}: measured hit frequency with a cache of {x}"),
                measured,
                &point(n.probe.hit_ratio(x)),
                TABLE_I_TOLERANCE,
            ));
        }
        // The sign of measured minus estimated at the paper's smallest size, like for
        // like: the paper's estimate is P{N_v <= X}.
        let (x, est, meas) = rows[0];
        let paper_gap = meas - est;
        let ours_gap = n.probe.hit_ratio(x) - poisson_cdf(n.probe.mean(), x);
        let same = paper_gap.signum() == ours_gap.signum();
        v.push(Check::new(
            format!("Table I {panel}: measured minus estimated with a cache of {x}"),
            format!("{:+.4} ({meas} − {est})", paper_gap),
            format!(
                "{:+.4} ({:.4} − {:.4})",
                ours_gap,
                n.probe.hit_ratio(x),
                poisson_cdf(n.probe.mean(), x)
            ),
            if same {
                Verdict::Reproduces
            } else {
                Verdict::Differs
            },
            "the sign must agree; estimate P{N_v <= X}, Poisson with the mean of N_v at arrivals",
        ));
    }
}

fn fig10(r: &XbindResults, v: &mut Verdicts) {
    for i in &r.invocations {
        let mut c = value(
            format!(
                "Fig. 10: invocations per call at T = {} and {}",
                i.threshold,
                per_s(i.rate)
            ),
            i.formula_per_call(),
            &point(i.invocations_per_call()),
            FIG10_TOLERANCE,
        );
        c.paper = format!("4(1 + 3/{}) = {}", i.threshold, sig(i.formula_per_call()));
        c.ours = format!(
            "{} counted: {} requests + {} to switch servers (formula's part {})",
            sig(i.invocations_per_call()),
            sig(i.request_invocations_per_call()),
            sig(i.switch_invocations_per_call()),
            sig(i.formula_switch_per_call())
        );
        v.push(c);
    }
}

#[cfg(test)]
pub(crate) mod tests;
