//! Verdicts computed from the numbers (DESIGN.md §4, Reports): every reproduction's report
//! opens with a table that sets each of the paper's tables, figures and claims beside our
//! estimate and its 95% interval, and gives a verdict that code computed from those two by
//! a stated criterion. The prose of a report may explain a verdict; it never upgrades one.
//!
//! The verdicts, and the criteria that give them:
//!
//! - **reproduces**: a value is inside our 95% interval, or within a stated relative
//!   tolerance of our mean ([`value`]); a qualitative claim (an ordering, a bound, a trend)
//!   holds with the intervals separated ([`order`], [`at_most`], [`at_least`], [`trend`]);
//! - **shape**: the paper's values are not ours, but its ordering and trend hold
//!   ([`Check::or_shape`]);
//! - **differs**: the value is outside both, or the claim is contradicted with the
//!   intervals separated;
//! - **undecided**: the intervals overlap, so this run cannot tell whether a claim holds
//!   (run longer, or more replications);
//! - **not applicable**: the paper's item has no counterpart here, with the reason.
//!
//! An estimate without an interval (one live measurement, or fewer than two batches) is
//! compared as a point: a claim about it is decided by the point alone, and the row says
//! "no interval" so that the reader knows how little it rests on.

use std::fmt;

use atmlab_sim::stats::Estimate;

use super::table::{Column, Table};

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// The paper's value or claim holds in our numbers.
    Reproduces,
    /// The paper's ordering and trend hold; its values do not.
    Shape,
    /// Our numbers contradict the paper's value or claim.
    Differs,
    /// Our intervals overlap where the claim needs them apart: this run cannot tell.
    Undecided,
    /// The paper's item has no counterpart here (the check says why).
    NotApplicable,
}

impl Verdict {
    /// The verdict's name as the reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduces => "reproduces",
            Verdict::Shape => "shape",
            Verdict::Differs => "differs",
            Verdict::Undecided => "undecided",
            Verdict::NotApplicable => "not applicable",
        }
    }

    /// Every verdict, in the order the summaries list them.
    pub const ALL: [Verdict; 5] = [
        Verdict::Reproduces,
        Verdict::Shape,
        Verdict::Differs,
        Verdict::Undecided,
        Verdict::NotApplicable,
    ];
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of a verdict table: the paper's item, its value or claim, ours, the verdict and
/// the arithmetic behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The paper's table, figure or claim, e.g. `Table 1, RDMA: mean delay (s)`.
    pub item: String,
    /// The paper's value or claim, as the paper gives it.
    pub paper: String,
    /// Our number(s), with the interval.
    pub ours: String,
    /// What the criterion decided.
    pub verdict: Verdict,
    /// The criterion and its arithmetic, e.g. `1.0e-4 outside 6.25e-5 ± 6.7e-9, 37.5% off
    /// (tolerance 10%)`.
    pub why: String,
}

impl Check {
    /// A check with a verdict decided elsewhere; `why` must state the criterion.
    pub fn new(
        item: impl Into<String>,
        paper: impl Into<String>,
        ours: impl Into<String>,
        verdict: Verdict,
        why: impl Into<String>,
    ) -> Check {
        Check {
            item: item.into(),
            paper: paper.into(),
            ours: ours.into(),
            verdict,
            why: why.into(),
        }
    }

    /// An item of the paper with no counterpart here, and why.
    pub fn not_applicable(
        item: impl Into<String>,
        paper: impl Into<String>,
        reason: impl Into<String>,
    ) -> Check {
        Check::new(item, paper, "—", Verdict::NotApplicable, reason)
    }

    /// The same check with the paper's column as the paper gives it (a criterion shows
    /// the bare number it compared).
    pub fn with_paper(mut self, paper: impl Into<String>) -> Check {
        self.paper = paper.into();
        self
    }

    /// A figure's verdict: this check (on the paper's values) if it reproduces, else
    /// `shape` if the shape check reproduces (the paper's ordering and trend hold), else
    /// the worse of the two. The row keeps both arithmetics.
    pub fn or_shape(self, shape: Check) -> Check {
        let verdict = match (self.verdict, shape.verdict) {
            (Verdict::Reproduces, _) => Verdict::Reproduces,
            (_, Verdict::Reproduces) => Verdict::Shape,
            (Verdict::NotApplicable, v) => v,
            (v, Verdict::NotApplicable) => v,
            (a, b) => a.max(b),
        };
        Check {
            verdict,
            why: format!("values: {}; shape: {}", self.why, shape.why),
            ours: if shape.ours.is_empty() || shape.ours == self.ours {
                self.ours
            } else {
                format!("{}; {}", self.ours, shape.ours)
            },
            ..self
        }
    }
}

/// Shows an estimate as `mean ± half-width` with four significant digits, or `mean (no
/// interval)`.
pub fn show(e: &Estimate) -> String {
    if has_interval(e) {
        format!("{} ± {}", sig(e.mean), sig(e.ci95))
    } else {
        format!("{} (no interval)", sig(e.mean))
    }
}

/// The median of `v` (NaN when empty): the live reproductions' reading of a few
/// repeated samples.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `x` with four significant digits, in the shorter of plain and exponent form.
pub fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if (-3..5).contains(&mag) {
        let decimals = (3 - mag).max(0) as usize;
        let s = format!("{x:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    } else {
        format!("{x:.3e}")
    }
}

/// An estimate without an interval: one measurement.
pub fn point(x: f64) -> Estimate {
    Estimate {
        mean: x,
        ci95: f64::NAN,
        n: 1,
    }
}

fn has_interval(e: &Estimate) -> bool {
    e.ci95.is_finite()
}

/// The interval `[lo, hi]` of `e`, a point when it has none.
fn bounds(e: &Estimate) -> (f64, f64) {
    if has_interval(e) {
        (e.lower(), e.upper())
    } else {
        (e.mean, e.mean)
    }
}

/// The paper's value `paper` against ours: reproduces when it lies in our interval or
/// within `tolerance` (relative, e.g. 0.1 for 10%) of our mean; differs otherwise.
pub fn value(item: impl Into<String>, paper: f64, ours: &Estimate, tolerance: f64) -> Check {
    let (lo, hi) = bounds(ours);
    let inside = has_interval(ours) && lo <= paper && paper <= hi;
    let off = if paper == 0.0 {
        if ours.mean == 0.0 { 0.0 } else { f64::INFINITY }
    } else {
        (ours.mean - paper).abs() / paper.abs()
    };
    let within = off <= tolerance;
    let verdict = if inside || within {
        Verdict::Reproduces
    } else {
        Verdict::Differs
    };
    let place = if !has_interval(ours) {
        "no interval".to_owned()
    } else if inside {
        "inside our interval".to_owned()
    } else {
        format!("outside [{}, {}]", sig(lo), sig(hi))
    };
    let why = format!(
        "paper's {} {place}; ours {} off (tolerance {})",
        sig(paper),
        percent(off),
        percent(tolerance)
    );
    Check::new(item, sig(paper), show(ours), verdict, why)
}

fn percent(x: f64) -> String {
    if x.is_finite() {
        format!("{}%", sig(100.0 * x))
    } else {
        "∞".to_owned()
    }
}

/// A claim that our quantity is at most `limit` (e.g. "loses no cell": at most 0):
/// reproduces when our interval lies at or below it, differs when it lies wholly above,
/// undecided otherwise.
pub fn at_most(
    item: impl Into<String>,
    claim: impl Into<String>,
    ours: &Estimate,
    limit: f64,
) -> Check {
    bound(item.into(), claim.into(), ours, limit, Relation::Less)
}

/// A claim that our quantity is at least `limit`: the mirror of [`at_most`].
pub fn at_least(
    item: impl Into<String>,
    claim: impl Into<String>,
    ours: &Estimate,
    limit: f64,
) -> Check {
    bound(item.into(), claim.into(), ours, limit, Relation::Greater)
}

/// A bound on our quantity: at most `limit` (`Less`) or at least (`Greater`).
fn bound(item: String, claim: String, ours: &Estimate, limit: f64, side: Relation) -> Check {
    let (lo, hi) = bounds(ours);
    let (holds, fails, sign) = match side {
        Relation::Less => (hi <= limit, lo > limit, "≤"),
        Relation::Greater => (lo >= limit, hi < limit, "≥"),
    };
    let verdict = if holds {
        Verdict::Reproduces
    } else if fails {
        Verdict::Differs
    } else {
        Verdict::Undecided
    };
    let why = format!(
        "claim: {sign} {}; ours [{}, {}]",
        sig(limit),
        sig(lo),
        sig(hi)
    );
    Check::new(item, claim, show(ours), verdict, why)
}

/// The relation a claim states between two quantities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The first is smaller.
    Less,
    /// The first is larger.
    Greater,
}

/// A claim that `a` stands in `relation` to `b` (each named): reproduces when the
/// intervals are separated the claimed way, differs when they are separated the other
/// way, undecided when they overlap.
pub fn order(
    item: impl Into<String>,
    claim: impl Into<String>,
    a: (&str, &Estimate),
    relation: Relation,
    b: (&str, &Estimate),
) -> Check {
    let (small, large) = match relation {
        Relation::Less => (a, b),
        Relation::Greater => (b, a),
    };
    let (_, small_hi) = bounds(small.1);
    let (large_lo, _) = bounds(large.1);
    let (small_lo, _) = bounds(small.1);
    let (_, large_hi) = bounds(large.1);
    let verdict = if small_hi < large_lo {
        Verdict::Reproduces
    } else if large_hi < small_lo {
        Verdict::Differs
    } else {
        Verdict::Undecided
    };
    let sign = match relation {
        Relation::Less => "<",
        Relation::Greater => ">",
    };
    let ours = format!("{} {}, {} {}", a.0, show(a.1), b.0, show(b.1));
    let why = match verdict {
        Verdict::Reproduces => format!("{} {sign} {}, intervals apart", a.0, b.0),
        Verdict::Differs => format!("{} {sign} {} reversed, intervals apart", a.0, b.0),
        _ => format!("{} {sign} {}: intervals overlap", a.0, b.0),
    };
    Check::new(item, claim, ours, verdict, why)
}

/// The direction a trend claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Grows with x.
    Increasing,
    /// Falls with x.
    Decreasing,
}

/// A claim that a series (in x order) grows or falls: reproduces when the last point's
/// interval is separated from the first's the claimed way and no step between
/// neighbours goes decidedly the other way; differs when the first and last are
/// separated the other way or a step does; undecided otherwise. Fewer than two points
/// are not applicable.
pub fn trend(
    item: impl Into<String>,
    claim: impl Into<String>,
    points: &[(f64, Estimate)],
    direction: Direction,
) -> Check {
    let item = item.into();
    let claim = claim.into();
    if points.len() < 2 {
        return Check::not_applicable(item, claim, "fewer than two points in our run");
    }
    // Orient so that the claim is always "increasing".
    let s = match direction {
        Direction::Increasing => 1.0,
        Direction::Decreasing => -1.0,
    };
    let oriented = |e: &Estimate| {
        let (lo, hi) = bounds(e);
        if s > 0.0 { (lo, hi) } else { (-hi, -lo) }
    };
    let against = points.windows(2).find(|w| {
        let (_, prev_lo) = oriented(&w[0].1);
        let (next_hi, _) = {
            let (lo, hi) = oriented(&w[1].1);
            (hi, lo)
        };
        next_hi < prev_lo
    });
    let first = oriented(&points[0].1);
    let last = oriented(&points[points.len() - 1].1);
    let verdict = if let Some(_w) = against {
        Verdict::Differs
    } else if last.0 > first.1 {
        Verdict::Reproduces
    } else if last.1 < first.0 {
        Verdict::Differs
    } else {
        Verdict::Undecided
    };
    let word = match direction {
        Direction::Increasing => "increasing",
        Direction::Decreasing => "decreasing",
    };
    let first_x = points[0].0;
    let last_x = points[points.len() - 1].0;
    let ours = format!(
        "{} at {}, {} at {}",
        show(&points[0].1),
        sig(first_x),
        show(&points[points.len() - 1].1),
        sig(last_x)
    );
    let why = match (verdict, against) {
        (Verdict::Differs, Some(w)) => format!(
            "claim {word}; a step from x = {} to {} goes the other way, intervals apart",
            sig(w[0].0),
            sig(w[1].0)
        ),
        (Verdict::Differs, None) => format!("claim {word}; ends reversed, intervals apart"),
        (Verdict::Reproduces, _) => {
            format!("{word}: ends apart, no step decidedly against")
        }
        _ => format!("claim {word}: first and last intervals overlap"),
    };
    Check::new(item, claim, ours, verdict, why)
}

/// A report's verdict table: the checks in the paper's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdicts {
    checks: Vec<Check>,
}

impl Verdicts {
    /// An empty table.
    pub fn new() -> Verdicts {
        Verdicts::default()
    }

    /// Adds a check.
    pub fn push(&mut self, check: Check) -> &mut Verdicts {
        self.checks.push(check);
        self
    }

    /// The checks, in order.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The check for `item`, if any.
    pub fn get(&self, item: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.item == item)
    }

    /// The verdict for `item`, if any.
    pub fn verdict(&self, item: &str) -> Option<Verdict> {
        self.get(item).map(|c| c.verdict)
    }

    /// How many checks gave each verdict, in [`Verdict::ALL`]'s order, zeros left out:
    /// e.g. `12 reproduce, 3 shape, 4 differ`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = Verdict::ALL
            .iter()
            .filter_map(|v| {
                let n = self.checks.iter().filter(|c| c.verdict == *v).count();
                (n > 0).then(|| format!("{n} {v}"))
            })
            .collect();
        parts.join(", ")
    }

    /// The table, for the markdown report and for `verdicts.csv`.
    pub fn table(&self) -> Table {
        let mut t = Table::new([
            Column::new("Paper's item", "item").csv_format(super::Format::Quoted),
            Column::new("Paper", "paper").csv_format(super::Format::Quoted),
            Column::new("atmlab (95% CI)", "atmlab").csv_format(super::Format::Quoted),
            Column::new("Verdict", "verdict"),
            Column::new("Criterion", "criterion").csv_format(super::Format::Quoted),
        ]);
        for c in &self.checks {
            t.row(vec![
                c.item.as_str().into(),
                c.paper.as_str().into(),
                c.ours.as_str().into(),
                c.verdict.name().into(),
                c.why.as_str().into(),
            ]);
        }
        t
    }

    /// Writes the table as `dir/verdicts.csv` (what a reader's script, or a test, reads
    /// back) and returns its markdown with the summary line above it, for the report.
    pub fn write(&self, dir: &std::path::Path) -> Result<String, crate::LabError> {
        let table = self.table();
        super::write(dir, "verdicts.csv", &table.csv())?;
        Ok(format!(
            "Verdicts: {}.\n\n{}",
            self.summary(),
            table.markdown()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(mean: f64, ci95: f64) -> Estimate {
        Estimate { mean, ci95, n: 10 }
    }

    #[test]
    fn value_inside_interval_or_tolerance_reproduces() {
        assert_eq!(
            value("x", 1.0, &est(1.05, 0.1), 0.0).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            value("x", 1.0, &est(1.2, 0.01), 0.25).verdict,
            Verdict::Reproduces
        );
        let c = value("x", 1.0, &est(1.2, 0.01), 0.1);
        assert_eq!(c.verdict, Verdict::Differs);
        assert!(c.why.contains("20%"), "{}", c.why);
        // A point without an interval is judged by the tolerance alone.
        assert_eq!(
            value("x", 1.0, &point(1.05), 0.1).verdict,
            Verdict::Reproduces
        );
        assert_eq!(value("x", 1.0, &point(1.5), 0.1).verdict, Verdict::Differs);
        assert_eq!(
            value("x", 0.0, &point(0.0), 0.0).verdict,
            Verdict::Reproduces
        );
        assert_eq!(value("x", 0.0, &point(1e-9), 0.5).verdict, Verdict::Differs);
    }

    #[test]
    fn bounds_are_decided_by_the_interval() {
        assert_eq!(
            at_most("x", "none", &est(0.0, 0.0), 0.0).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            at_most("x", "none", &est(0.1, 0.05), 0.0).verdict,
            Verdict::Differs
        );
        assert_eq!(
            at_most("x", "none", &est(0.01, 0.05), 0.0).verdict,
            Verdict::Undecided
        );
        assert_eq!(
            at_least("x", "big", &est(5.0, 1.0), 3.0).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            at_least("x", "big", &est(1.0, 1.0), 3.0).verdict,
            Verdict::Differs
        );
    }

    #[test]
    fn order_needs_separated_intervals() {
        let a = est(1.0, 0.1);
        let b = est(2.0, 0.1);
        let c = est(1.15, 0.1);
        assert_eq!(
            order("x", "a<b", ("a", &a), Relation::Less, ("b", &b)).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            order("x", "a>b", ("a", &a), Relation::Greater, ("b", &b)).verdict,
            Verdict::Differs
        );
        assert_eq!(
            order("x", "a<c", ("a", &a), Relation::Less, ("c", &c)).verdict,
            Verdict::Undecided
        );
    }

    #[test]
    fn trend_is_decided_by_its_ends_and_its_steps() {
        let up = [
            (1.0, est(1.0, 0.1)),
            (2.0, est(1.5, 0.1)),
            (3.0, est(3.0, 0.1)),
        ];
        assert_eq!(
            trend("x", "up", &up, Direction::Increasing).verdict,
            Verdict::Reproduces
        );
        assert_eq!(
            trend("x", "down", &up, Direction::Decreasing).verdict,
            Verdict::Differs
        );
        // Up overall, but a step decidedly down in between.
        let dip = [
            (1.0, est(1.0, 0.1)),
            (2.0, est(5.0, 0.1)),
            (3.0, est(3.0, 0.1)),
        ];
        assert_eq!(
            trend("x", "up", &dip, Direction::Increasing).verdict,
            Verdict::Differs
        );
        let flat = [(1.0, est(1.0, 0.5)), (2.0, est(1.2, 0.5))];
        assert_eq!(
            trend("x", "up", &flat, Direction::Increasing).verdict,
            Verdict::Undecided
        );
        assert_eq!(
            trend("x", "up", &flat[..1], Direction::Increasing).verdict,
            Verdict::NotApplicable
        );
    }

    #[test]
    fn or_shape_falls_back_to_the_shape() {
        let values = value("x", 1.0, &est(2.0, 0.1), 0.1);
        let shape = order(
            "x",
            "a<b",
            ("a", &est(1.0, 0.1)),
            Relation::Less,
            ("b", &est(2.0, 0.1)),
        );
        assert_eq!(values.clone().or_shape(shape).verdict, Verdict::Shape);
        let bad = order(
            "x",
            "a<b",
            ("a", &est(3.0, 0.1)),
            Relation::Less,
            ("b", &est(2.0, 0.1)),
        );
        assert_eq!(values.or_shape(bad).verdict, Verdict::Differs);
    }

    #[test]
    fn the_table_counts_and_renders_every_check() {
        let mut v = Verdicts::new();
        v.push(value("a", 1.0, &est(1.0, 0.1), 0.1));
        v.push(value("b", 1.0, &est(3.0, 0.1), 0.1));
        v.push(Check::not_applicable("c", "JIT", "no JIT in Rust"));
        assert_eq!(v.summary(), "1 reproduces, 1 differs, 1 not applicable");
        assert_eq!(v.verdict("b"), Some(Verdict::Differs));
        let md = v.table().markdown();
        assert!(
            md.contains("| differs |") && md.contains("no JIT in Rust"),
            "{md}"
        );
        let csv = v.table().csv();
        assert_eq!(csv.lines().count(), 4, "{csv}");
    }
}
