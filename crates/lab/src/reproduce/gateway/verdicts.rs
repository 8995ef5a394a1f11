//! The verdict table of paper 004's report (§6, Figures 13-23 and the reverse path of
//! §6.5), a pure function of the runs' numbers: [`GatewayResults`] holds every curve's
//! replications, [`verdicts()`] turns them into one row per claim of the paper.
//!
//! Replication r of every point draws the same random numbers (the runner keys its
//! streams by seed, replication and stream, not by point), so two curves of one
//! experiment are compared replication by replication: the difference (or ratio) of the
//! two points in each replication is one sample, and its 95% Student-t interval decides
//! the claim (common random numbers; the pairs are independent across replications).
//! Where the paper's word is vague ("dramatic", "significant") the reading is stated in
//! the row's criterion.

use atmlab_sim::stats::Estimate;

use crate::report::verdict::{self, Check, Direction, Verdict, Verdicts, show, sig};

/// One point of a curve: its x (the load in Mb/s) and its value in each replication, in
/// replication order.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The load, Mb/s.
    pub x: f64,
    /// One value per replication.
    pub reps: Vec<f64>,
}

impl Point {
    /// The mean over replications with its 95% interval.
    pub fn est(&self) -> Estimate {
        Estimate::from_samples(&self.reps)
    }
}

/// A curve of a figure: one combination of the non-x swept keys (e.g. `B = 1000`).
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The series label, e.g. `transmit buffer = 16`.
    pub label: String,
    /// The points in x order.
    pub points: Vec<Point>,
}

impl Curve {
    /// The point at load `x` (Mb/s).
    pub fn at(&self, x: f64) -> Option<&Point> {
        self.points.iter().find(|p| p.x == x)
    }

    /// The point at the largest load.
    pub fn last(&self) -> Option<&Point> {
        self.points.iter().max_by(|a, b| a.x.total_cmp(&b.x))
    }
}

/// Every curve of every experiment and metric: what the verdicts are computed from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayResults {
    /// (experiment name, metric, curves).
    pub figures: Vec<(String, String, Vec<Curve>)>,
}

impl GatewayResults {
    /// Adds a curve of `metric` in `experiment`.
    pub fn insert(&mut self, experiment: &str, metric: &str, curve: Curve) {
        match self
            .figures
            .iter_mut()
            .find(|(e, m, _)| e == experiment && m == metric)
        {
            Some((_, _, curves)) => curves.push(curve),
            None => self
                .figures
                .push((experiment.into(), metric.into(), vec![curve])),
        }
    }

    /// The curve labelled `label` of `metric` in `experiment`.
    pub fn curve(&self, experiment: &str, metric: &str, label: &str) -> Option<&Curve> {
        self.figures
            .iter()
            .find(|(e, m, _)| e == experiment && m == metric)
            .and_then(|(_, _, cs)| cs.iter().find(|c| c.label == label))
    }

    fn point(&self, experiment: &str, metric: &str, label: &str, x: At) -> Option<&Point> {
        let c = self.curve(experiment, metric, label)?;
        match x {
            At::Load(x) => c.at(x),
            At::Highest => c.last(),
            At::Lowest => c.points.iter().min_by(|a, b| a.x.total_cmp(&b.x)),
        }
    }
}

/// Where on a curve a claim is checked.
#[derive(Debug, Clone, Copy)]
enum At {
    Load(f64),
    Highest,
    Lowest,
}

const E1: &str = "6.1-burst-factor";
const E2: &str = "6.2-peak-to-average";
const E3: &str = "6.3-npe-rate";
const E4: &str = "6.4-transmit-buffer";
const E5: &str = "6.5-reverse-path";
const TP: &str = "throughput_mbps";
const LOSS: &str = "cell_loss_probability";
const FRAME_LOSS: &str = "frame_loss_probability";
const LATENCY: &str = "latency_mean";

/// The cell loss probability above which a load is past the cut-off (ours: the paper
/// gives no number; 1e-4 is the smallest loss a 10 s run at these loads measures with
/// more than a few cells).
pub const CUTOFF_LOSS: f64 = 1e-4;

/// The per-replication combination `f(a, b)` of two points, if they have the same
/// replications and every value is finite.
fn paired(a: &Point, b: &Point, f: impl Fn(f64, f64) -> f64) -> Option<Estimate> {
    if a.reps.len() != b.reps.len() || a.reps.is_empty() {
        return None;
    }
    let xs: Vec<f64> = a.reps.iter().zip(&b.reps).map(|(x, y)| f(*x, *y)).collect();
    xs.iter()
        .all(|x| x.is_finite())
        .then(|| Estimate::from_samples(&xs))
}

fn missing(item: &str, claim: &str) -> Check {
    Check::not_applicable(item, claim, "the run has no such point (quick form?)")
}

/// The claim "a is larger than b", decided by the paired difference a − b.
fn greater(item: &str, claim: &str, a: (&str, &Point), b: (&str, &Point)) -> Check {
    let Some(d) = paired(a.1, b.1, |x, y| x - y) else {
        return missing(item, claim);
    };
    let (lo, hi) = (d.lower(), d.upper());
    let verdict = if d.mean == 0.0 && (d.ci95 <= 0.0 || d.ci95.is_nan()) {
        // The same value in every replication: no effect at all.
        Verdict::Differs
    } else if lo > 0.0 {
        Verdict::Reproduces
    } else if hi < 0.0 {
        Verdict::Differs
    } else {
        Verdict::Undecided
    };
    let ours = format!(
        "{} {}, {} {}; difference {} (paired)",
        a.0,
        show(&a.1.est()),
        b.0,
        show(&b.1.est()),
        show(&d)
    );
    let why = format!(
        "claim {} > {}: paired difference in [{}, {}]{}",
        a.0,
        b.0,
        sig(lo),
        sig(hi),
        match verdict {
            Verdict::Reproduces => ", above 0",
            Verdict::Differs => ", not above 0",
            _ => ", includes 0",
        }
    );
    Check::new(item, claim, ours, verdict, why)
}

/// The claim "a is at least `factor` times b", decided by the paired ratio a / b (or the
/// ratio of the means, without an interval, when b is 0 in some replication).
fn factor(item: &str, claim: &str, a: (&str, &Point), b: (&str, &Point), factor: f64) -> Check {
    let r = paired(a.1, b.1, |x, y| x / y).unwrap_or_else(|| {
        let (ma, mb) = (a.1.est().mean, b.1.est().mean);
        verdict::point(ma / mb)
    });
    let mut c = verdict::at_least(item, claim, &r, factor);
    c.ours = format!(
        "{} {}, {} {}; ratio {} (paired)",
        a.0,
        show(&a.1.est()),
        b.0,
        show(&b.1.est()),
        show(&r)
    );
    c.why = format!("reading: at least {}x; {}", sig(factor), c.why);
    c
}

/// The claim "a and b are the same within `tol` (relative)": the paired relative
/// difference (a − b) / b lies inside ±tol (reproduces), wholly outside (differs), or
/// across the edge (undecided).
fn same(item: &str, claim: &str, a: (&str, &Point), b: (&str, &Point), tol: f64) -> Check {
    let Some(d) = paired(a.1, b.1, |x, y| (x - y) / y) else {
        return missing(item, claim);
    };
    let (lo, hi) = (d.lower(), d.upper());
    let verdict = if lo >= -tol && hi <= tol {
        Verdict::Reproduces
    } else if lo > tol || hi < -tol {
        Verdict::Differs
    } else {
        Verdict::Undecided
    };
    let ours = format!(
        "{} {}, {} {}; relative difference {} (paired)",
        a.0,
        show(&a.1.est()),
        b.0,
        show(&b.1.est()),
        show(&d)
    );
    let why = format!(
        "reading: equal within ±{}%; paired relative difference in [{}, {}]",
        sig(100.0 * tol),
        sig(lo),
        sig(hi)
    );
    Check::new(item, claim, ours, verdict, why)
}

/// Where a curve's cut-off lies, decided by the intervals: above `lo` (every load up to
/// it loses decidedly less than [`CUTOFF_LOSS`]) and at most `hi` (the first load that
/// loses decidedly more), `None` when no load of the run does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cutoff {
    /// The cut-off is above this load (Mb/s); 0 when even the lowest load is not
    /// decidedly below.
    pub lo: f64,
    /// The cut-off is at most this load (Mb/s).
    pub hi: Option<f64>,
}

impl Cutoff {
    /// The cut-off of `curve` (a cell loss probability against the load).
    pub fn of(curve: &Curve) -> Cutoff {
        let mut points: Vec<&Point> = curve.points.iter().collect();
        points.sort_by(|a, b| a.x.total_cmp(&b.x));
        let mut lo = 0.0;
        for p in &points {
            if p.est().upper() < CUTOFF_LOSS {
                lo = p.x;
            } else {
                break;
            }
        }
        let hi = points
            .iter()
            .find(|p| p.est().lower() > CUTOFF_LOSS)
            .map(|p| p.x);
        Cutoff { lo, hi }
    }

    fn show(&self) -> String {
        match self.hi {
            Some(hi) => format!("({}, {}] Mb/s", sig(self.lo), sig(hi)),
            None => format!("above {} Mb/s", sig(self.lo)),
        }
    }
}

/// The claim "the cut-off of a is lower than that of b": reproduces when a's range lies
/// wholly at or below b's, differs when b's lies wholly at or below a's, undecided when
/// the ranges overlap.
fn cutoff_lower(item: &str, claim: &str, a: (&str, &Curve), b: (&str, &Curve)) -> Check {
    let (ca, cb) = (Cutoff::of(a.1), Cutoff::of(b.1));
    let below = |x: Cutoff, y: Cutoff| x.hi.is_some_and(|h| h <= y.lo);
    let verdict = if below(ca, cb) {
        Verdict::Reproduces
    } else if below(cb, ca) {
        Verdict::Differs
    } else {
        Verdict::Undecided
    };
    let ours = format!("{}: {}; {}: {}", a.0, ca.show(), b.0, cb.show());
    let why = format!(
        "cut-off: first load with loss decidedly above {} (interval above it), after the last decidedly below; claim {} < {}: {}",
        sig(CUTOFF_LOSS),
        a.0,
        b.0,
        match verdict {
            Verdict::Reproduces => "ranges apart, the claimed way",
            Verdict::Differs => "ranges apart, the other way",
            _ => "ranges overlap",
        }
    );
    Check::new(item, claim, ours, verdict, why)
}

/// The verdict table of paper 004, in the paper's order.
pub fn verdicts(r: &GatewayResults) -> Verdicts {
    let mut v = Verdicts::new();
    let p = |e: &str, m: &str, l: &str, x: At| r.point(e, m, l, x);

    // §6.1, Fig. 13.
    let item = "Fig. 13 / §6.1: carried load below the threshold";
    let claim = "about 15% below the offered load (8 of 53 octets are SAR overhead)";
    v.push(
        match (
            p(E1, TP, "B = 1000", At::Lowest),
            p(E1, "offered_load_mbps", "B = 1000", At::Lowest),
        ) {
            (Some(tp), Some(off)) => match paired(tp, off, |t, o| t / o) {
                Some(ratio) => {
                    let mut c = verdict::value(item, 45.0 / 53.0, &ratio, 0.01);
                    c.paper = claim.into();
                    c.ours = format!(
                        "carried / offered = {} at {} Mb/s",
                        show(&ratio),
                        sig(tp.x)
                    );
                    c.why = format!(
                        "45/53 holds by definition (our throughput counts the 45 data octets of each 53-octet cell); what can fail is that something else is lost or held back. {}",
                        c.why
                    );
                    c
                }
                None => missing(item, claim),
            },
            _ => missing(item, claim),
        },
    );
    let item = "Fig. 13: throughput levels off at the FDDI rate";
    let claim = "100 Mb/s";
    v.push(match p(E1, TP, "B = 250", At::Highest) {
        Some(tp) => {
            let mut c = verdict::value(item, 100.0, &tp.est(), 0.05);
            c.why = format!(
                "B = 250 at {} Mb/s; tolerance 5% (ours: FDDI framing takes 28 of 3853 octets, the other stations 3 Mb/s); {}",
                sig(tp.x),
                c.why
            );
            c
        }
        None => missing(item, claim),
    });
    let item = "Fig. 13: at high loads, lower throughput for higher burst factors";
    let claim = "B = 1000 below B = 250";
    v.push(
        match (
            p(E1, TP, "B = 250", At::Highest),
            p(E1, TP, "B = 1000", At::Highest),
        ) {
            (Some(a), Some(b)) => greater(item, claim, ("B = 250", a), ("B = 1000", b)),
            _ => missing(item, claim),
        },
    );

    // Fig. 14.
    let item = "Fig. 14: cut-off against burst factor";
    let claim = "the cut-off decreases for smaller burst factors";
    v.push(
        match (r.curve(E1, LOSS, "B = 250"), r.curve(E1, LOSS, "B = 1000")) {
            (Some(a), Some(b)) => cutoff_lower(item, claim, ("B = 250", a), ("B = 1000", b)),
            _ => missing(item, claim),
        },
    );
    let item = "Fig. 14: cell loss at very high loads";
    let claim = "as high as 5%";
    v.push(match r.curve(E1, LOSS, "B = 1000") {
        Some(c) => {
            let high: Vec<&Point> = c.points.iter().filter(|p| p.x >= 120.0).collect();
            if high.is_empty() {
                missing(item, claim)
            } else {
                let lo = high.iter().map(|p| p.est().lower()).fold(f64::MAX, f64::min);
                let hi = high.iter().map(|p| p.est().upper()).fold(f64::MIN, f64::max);
                let verdict = if (lo..=hi).contains(&0.05) {
                    Verdict::Reproduces
                } else {
                    Verdict::Differs
                };
                let ours = high
                    .iter()
                    .map(|p| format!("{} at {}", show(&p.est()), sig(p.x)))
                    .collect::<Vec<_>>()
                    .join(", ");
                let why = format!(
                    "B = 1000; reading: 'very high' = 120 Mb/s and above (ours); 0.05 {} our intervals there, [{}, {}]",
                    if verdict == Verdict::Reproduces { "inside" } else { "outside" },
                    sig(lo),
                    sig(hi)
                );
                Check::new(item, claim, ours, verdict, why)
            }
        }
        None => missing(item, claim),
    });

    // Fig. 15.
    let item = "Fig. 15: frame loss much larger than cell loss";
    let claim = "a small cell loss becomes a large frame loss";
    v.push(
        match (
            p(E1, FRAME_LOSS, "B = 1000", At::Highest),
            p(E1, LOSS, "B = 1000", At::Highest),
        ) {
            (Some(f), Some(c)) => factor(item, claim, ("frame loss", f), ("cell loss", c), 2.0),
            _ => missing(item, claim),
        },
    );
    let item = "Fig. 15: frame loss has the cell loss's cut-off";
    let claim = "same cut-off as Fig. 14";
    v.push(
        match (
            r.curve(E1, FRAME_LOSS, "B = 1000"),
            r.curve(E1, LOSS, "B = 1000"),
        ) {
            (Some(f), Some(c)) => {
                let (cf, cc) = (Cutoff::of(f), Cutoff::of(c));
                let overlap = cf.hi.is_none_or(|h| h > cc.lo) && cc.hi.is_none_or(|h| h > cf.lo);
                Check::new(
                    item,
                    claim,
                    format!("frame loss {}; cell loss {}", cf.show(), cc.show()),
                    if overlap { Verdict::Reproduces } else { Verdict::Differs },
                    "B = 1000; ranges overlap or not. Close to holding by construction: one lost cell loses its segment",
                )
            }
            _ => missing(item, claim),
        },
    );

    // Fig. 16.
    let item = "Fig. 16: at low loads latency falls as the load rises";
    let claim = "reassembly delay dominates and falls with load";
    v.push(match r.curve(E1, LATENCY, "B = 1000") {
        Some(c) => {
            let pts: Vec<(f64, Estimate)> = c
                .points
                .iter()
                .filter(|p| p.x <= 80.0)
                .map(|p| (p.x, p.est()))
                .collect();
            let mut ch = verdict::trend(item, claim, &pts, Direction::Decreasing);
            ch.why = format!("B = 1000, loads up to 80 Mb/s (ours); {}", ch.why);
            ch
        }
        None => missing(item, claim),
    });
    let item = "Fig. 16: at very high loads latency is independent of the burst factor";
    let claim = "independent of B";
    v.push(
        match (
            p(E1, LATENCY, "B = 1000", At::Highest),
            p(E1, LATENCY, "B = 250", At::Highest),
        ) {
            (Some(a), Some(b)) => same(item, claim, ("B = 1000", a), ("B = 250", b), 0.10),
            _ => missing(item, claim),
        },
    );

    // §6.2, Figs. 17-18.
    let item = "Fig. 17: at high loads, lower throughput for higher peak-to-average ratios";
    let claim = "peak/avg 8 below 2";
    v.push(
        match (
            p(E2, TP, "peak/avg = 2", At::Highest),
            p(E2, TP, "peak/avg = 8", At::Highest),
        ) {
            (Some(a), Some(b)) => greater(item, claim, ("peak/avg 2", a), ("peak/avg 8", b)),
            _ => missing(item, claim),
        },
    );
    for (lo, hi) in [("2", "4"), ("4", "8")] {
        let item = format!("Fig. 18: at high loads, cell loss for peak/avg {lo} → {hi}");
        let claim = "doubling the ratio increases the loss dramatically";
        let (la, lb) = (format!("peak/avg = {hi}"), format!("peak/avg = {lo}"));
        v.push(
            match (p(E2, LOSS, &la, At::Highest), p(E2, LOSS, &lb, At::Highest)) {
                (Some(a), Some(b)) => {
                    let (na, nb) = (format!("peak/avg {hi}"), format!("peak/avg {lo}"));
                    factor(&item, claim, (&na, a), (&nb, b), 2.0).or_shape(greater(
                        &item,
                        claim,
                        (&na, a),
                        (&nb, b),
                    ))
                }
                _ => missing(&item, claim),
            },
        );
    }

    // §6.3, Figs. 19-20 (B = 4: 8-cell segments).
    let item = "Fig. 19: a slow NPE restricts the throughput";
    let claim = "R = 25 /ms flat at what the NPE serves";
    v.push(match p(E3, TP, "B = 4, R = 25 /ms", At::Highest) {
        Some(tp) => {
            let mut c = verdict::at_most(item, claim, &tp.est(), 68.2);
            c.why = format!(
                "B = 4 at {} Mb/s; the NPE bound is 25 /ms x 8 cells x 45 octets with the 2.25 us copy = 68.2 Mb/s (our reading of R); {}",
                sig(tp.x),
                c.why
            );
            c
        }
        None => missing(item, claim),
    });
    let item = "Fig. 19: a faster NPE carries more at high loads";
    let claim = "R = 100 /ms above R = 25 /ms";
    v.push(
        match (
            p(E3, TP, "B = 4, R = 100 /ms", At::Highest),
            p(E3, TP, "B = 4, R = 25 /ms", At::Highest),
        ) {
            (Some(a), Some(b)) => greater(item, claim, ("R = 100", a), ("R = 25", b)),
            _ => missing(item, claim),
        },
    );
    let item = "Fig. 20: a slower NPE loses dramatically more";
    let claim = "cell loss increases dramatically with a slower NPE";
    v.push(
        match (
            p(E3, LOSS, "B = 4, R = 25 /ms", At::Highest),
            p(E3, LOSS, "B = 4, R = 100 /ms", At::Highest),
        ) {
            (Some(a), Some(b)) => factor(item, claim, ("R = 25", a), ("R = 100", b), 2.0)
                .or_shape(greater(item, claim, ("R = 25", a), ("R = 100", b))),
            _ => missing(item, claim),
        },
    );
    let item = "Fig. 20: past the knee the loss grows with the load";
    let claim = "grows rapidly with load once the throughput saturates";
    v.push(match r.curve(E3, LOSS, "B = 4, R = 25 /ms") {
        Some(c) => {
            let pts: Vec<(f64, Estimate)> = c
                .points
                .iter()
                .filter(|p| p.x >= 80.0)
                .map(|p| (p.x, p.est()))
                .collect();
            let mut ch = verdict::trend(item, claim, &pts, Direction::Increasing);
            ch.why = format!("B = 4, R = 25 /ms, loads from 80 Mb/s; {}", ch.why);
            ch
        }
        None => missing(item, claim),
    });

    // §6.4, Figs. 21-23.
    for (small, large) in [("16", "32"), ("32", "68")] {
        let item = format!("Fig. 21: throughput at 100 Mb/s, transmit buffer {small} → {large}");
        let claim = "a larger transmit buffer improves the throughput significantly";
        let (la, lb) = (
            format!("transmit buffer = {large}"),
            format!("transmit buffer = {small}"),
        );
        v.push(
            match (
                p(E4, TP, &la, At::Load(100.0)),
                p(E4, TP, &lb, At::Load(100.0)),
            ) {
                (Some(a), Some(b)) => {
                    let mut c = greater(
                        &item,
                        claim,
                        (&format!("{large} frames"), a),
                        (&format!("{small} frames"), b),
                    );
                    c.why = format!("reading: significant = paired interval above 0; {}", c.why);
                    c
                }
                _ => missing(&item, claim),
            },
        );
    }
    let item = "Fig. 22: the cut-off depends on the transmit buffer";
    let claim = "cut-off strongly dependent on the buffer size";
    v.push(
        match (
            r.curve(E4, LOSS, "transmit buffer = 16"),
            r.curve(E4, LOSS, "transmit buffer = 68"),
        ) {
            (Some(a), Some(b)) => cutoff_lower(item, claim, ("16 frames", a), ("68 frames", b)),
            _ => missing(item, claim),
        },
    );
    let item = "Fig. 22 / §7: even 68 frames lose cells at a high, very bursty load";
    let claim = "68 frames (256 KB) inadequate";
    v.push(match p(E4, LOSS, "transmit buffer = 68", At::Highest) {
        Some(l) => {
            let mut c = verdict::at_least(item, claim, &l.est(), CUTOFF_LOSS);
            c.why = format!(
                "at {} Mb/s, loss above the cut-off level; {}",
                sig(l.x),
                c.why
            );
            c
        }
        None => missing(item, claim),
    });
    let item = "Fig. 23: larger transmit buffers, remarkably more latency at high loads";
    let claim = "68 frames remarkably slower than 16";
    v.push(
        match (
            p(E4, LATENCY, "transmit buffer = 68", At::Highest),
            p(E4, LATENCY, "transmit buffer = 16", At::Highest),
        ) {
            (Some(a), Some(b)) => factor(item, claim, ("68 frames", a), ("16 frames", b), 2.0)
                .or_shape(greater(item, claim, ("68 frames", a), ("16 frames", b))),
            _ => missing(item, claim),
        },
    );
    let item = "§6.1: at high loads arriving frames find the transmit buffer full";
    let claim = "occupancy at its maximum (16 frames)";
    v.push(
        match p(
            E4,
            "transmit_buffer_occupancy",
            "transmit buffer = 16",
            At::Highest,
        ) {
            Some(o) => {
                let mut c = verdict::at_least(item, claim, &o.est(), 0.9 * 16.0);
                c.why = format!(
                    "our metric is the time-average occupancy, not what arrivals see; reading: at least 90% of 16 frames; {}",
                    c.why
                );
                c
            }
            None => missing(item, claim),
        },
    );

    // §6.5, the reverse path.
    let item = "§6.5: 16 frames of receive buffer suffice";
    let claim = "no loss with 16 frames";
    v.push(
        match r.curve(E5, "reverse_frame_loss_probability", "receive buffer = 16") {
            Some(c) if !c.points.is_empty() => {
                let worst = c
                    .points
                    .iter()
                    .max_by(|a, b| a.est().upper().total_cmp(&b.est().upper()))
                    .expect("not empty");
                let mut ch = verdict::at_most(item, claim, &worst.est(), 0.0);
                ch.why = format!("the worst load, {} Mb/s; {}", sig(worst.x), ch.why);
                ch
            }
            _ => missing(item, claim),
        },
    );
    let item = "§6.5: the reverse path has no bottleneck in the gateway";
    let claim = "no bottleneck; carries the FDDI load to ATM";
    v.push(
        match p(E5, "receive_buffer_max", "receive buffer = 16", At::Highest) {
            Some(m) => {
                let mut c = verdict::at_most(item, claim, &m.est(), 1.0);
                c.ours = format!(
                    "largest receive buffer occupancy {} frames at {} Mb/s sent",
                    show(&m.est()),
                    sig(m.x)
                );
                c.why = format!(
                    "reading: a gateway slower than the ring would queue frames; it holds at most the one frame in transit; {}",
                    c.why
                );
                c
            }
            None => missing(item, claim),
        },
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, reps: &[f64]) -> Point {
        Point {
            x,
            reps: reps.to_vec(),
        }
    }

    fn results() -> GatewayResults {
        let mut r = GatewayResults::default();
        // Fig. 21 at 100 Mb/s: each larger buffer carries more in every replication.
        for (label, base) in [
            ("transmit buffer = 16", 76.0),
            ("transmit buffer = 32", 79.0),
            ("transmit buffer = 68", 82.0),
        ] {
            let reps: Vec<f64> = [0.0, 3.0, -2.0, 1.0, -1.0]
                .iter()
                .map(|d| base + d)
                .collect();
            r.insert(
                E4,
                TP,
                Curve {
                    label: label.into(),
                    points: vec![pt(100.0, &reps)],
                },
            );
        }
        // Fig. 22: 16 frames lose from 40 Mb/s on, 68 frames only from 80.
        for (label, losses) in [
            ("transmit buffer = 16", [0.0, 5e-3, 2e-2, 4e-2]),
            ("transmit buffer = 68", [0.0, 0.0, 1e-5, 3e-3]),
        ] {
            let points = [20.0, 40.0, 60.0, 80.0]
                .iter()
                .zip(losses)
                .map(|(&x, l)| pt(x, &[l, l * 1.1, l * 0.9, l * 1.05, l * 0.95]))
                .collect();
            r.insert(
                E4,
                LOSS,
                Curve {
                    label: label.into(),
                    points,
                },
            );
        }
        r
    }

    #[test]
    fn the_verdicts_follow_the_numbers() {
        let r = results();
        let v = verdicts(&r);
        let fig21 = "Fig. 21: throughput at 100 Mb/s, transmit buffer 16 → 32";
        let fig22 = "Fig. 22: the cut-off depends on the transmit buffer";
        assert_eq!(v.verdict(fig21), Some(Verdict::Reproduces), "{v:?}");
        assert_eq!(v.verdict(fig22), Some(Verdict::Reproduces), "{v:?}");
        // Absent curves are not applicable, never a verdict.
        assert_eq!(
            v.verdict("Fig. 17: at high loads, lower throughput for higher peak-to-average ratios"),
            Some(Verdict::NotApplicable)
        );

        // The 32-frame buffer carries less in one replication: the paired interval now
        // includes 0, and the verdict follows.
        let mut r2 = r.clone();
        r2.figures[0].2[1].points[0].reps[1] = 70.0;
        assert_eq!(verdicts(&r2).verdict(fig21), Some(Verdict::Undecided));
        // 32 frames below 16 in every replication: the claim is contradicted.
        let mut r3 = r.clone();
        for x in &mut r3.figures[0].2[1].points[0].reps {
            *x -= 10.0;
        }
        assert_eq!(verdicts(&r3).verdict(fig21), Some(Verdict::Differs));

        // 68 frames losing decidedly at 40 Mb/s: the cut-off ranges overlap.
        let mut r4 = r.clone();
        r4.figures[1].2[1].points[1].reps = vec![4e-3, 5e-3, 6e-3, 5e-3, 4e-3];
        assert_eq!(verdicts(&r4).verdict(fig22), Some(Verdict::Undecided));
        // ...and losing from 20 Mb/s where 16 frames do not: the other way round.
        r4.figures[1].2[1].points[0].reps = vec![4e-3, 5e-3, 6e-3, 5e-3, 4e-3];
        r4.figures[1].2[0].points[1].reps = vec![0.0; 5];
        r4.figures[1].2[0].points[2].reps = vec![0.0; 5];
        assert_eq!(verdicts(&r4).verdict(fig22), Some(Verdict::Differs));
    }

    #[test]
    fn cutoffs_are_ranges_decided_by_the_intervals() {
        let c = Curve {
            label: "x".into(),
            points: vec![
                pt(20.0, &[0.0, 0.0]),
                pt(40.0, &[0.0, 4e-4]),
                pt(60.0, &[3e-3, 3.2e-3]),
            ],
        };
        // 40 Mb/s is neither decidedly below nor above: the cut-off is in (20, 60].
        assert_eq!(
            Cutoff::of(&c),
            Cutoff {
                lo: 20.0,
                hi: Some(60.0)
            }
        );
    }

    #[test]
    fn paired_comparisons_use_the_replications() {
        // Means 1 apart, spread 10 across replications, but the difference is 1 in each:
        // decided, where unpaired intervals would overlap.
        let a = pt(1.0, &[11.0, 21.0, 31.0]);
        let b = pt(1.0, &[10.0, 20.0, 30.0]);
        assert_eq!(
            greater("x", "a > b", ("a", &a), ("b", &b)).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            greater("x", "b > a", ("b", &b), ("a", &a)).verdict,
            Verdict::Differs
        );
        assert_eq!(
            greater("x", "a > a", ("a", &a), ("a", &a)).verdict,
            Verdict::Differs
        );
        assert_eq!(
            same("x", "a = b", ("a", &a), ("b", &b), 0.2).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            factor("x", "a ≥ 2b", ("a", &a), ("b", &b), 2.0).verdict,
            Verdict::Differs
        );
    }
}
