//! Unit tests of the rdma reproduction: its verdicts and its report.

use super::*;

fn est(mean: f64, ci95: f64) -> Estimate {
    Estimate { mean, ci95, n: 10 }
}

/// Results shaped like the paper's: its own table values as our means with narrow
/// intervals, and backbone curves that follow its figures' claims.
fn paper_like() -> RdmaResults {
    let table = |paper: &[PaperRow], ours: &[OurRow]| -> Vec<Metrics> {
        ours.iter()
            .map(|r| {
                let p = &paper[r.paper].values;
                let mut m = Metrics::default();
                for (i, col) in COLUMNS.iter().enumerate() {
                    m.set(col.paper_def.0, est(p[i], p[i] * 0.01));
                    if let Some((o, _)) = col.other_def {
                        m.set(o, est(p[i] * 2.0, p[i] * 0.01));
                    }
                }
                m.set("loss_probability", est(0.0, 0.0));
                m
            })
            .collect()
    };
    let mut t2 = table(&PAPER_TABLE2, &T2_ROWS);
    for (i, c) in [(1, 1.15), (3, 1.4)] {
        t2[i].set("max_jitter", est(1.0 / (c * 10_156.0), 1e-9));
    }
    for i in [4, 5] {
        t2[i].set("max_abs_jitter", est(0.033, 1e-5));
    }
    let loads = [0.1, 0.3, 0.5, 0.7, 0.9];
    // (periphery loss, C3 occupancy, C3 loss, C3 lost/s, delay) by curve and load.
    let curve = |c: usize| -> Curve {
        let points = loads
            .iter()
            .map(|&l| {
                let over = (l - 0.5_f64).max(0.0);
                let (pl, occ, c3, c3s, d) = match c {
                    RDMA1 => (
                        over,
                        if l >= 0.3 { 19_900.0 } else { 100.0 },
                        if l >= 0.3 { 0.3 } else { 0.0 },
                        1e4,
                        4e-5 + over * 0.5e-3,
                    ),
                    RDMA2 => (over, 0.01, 0.0, 0.0, 4e-5 + over * 0.5e-3),
                    LB => (
                        over * 0.5,
                        if l >= 0.5 { 500.0 } else { 0.0 },
                        0.0,
                        0.0,
                        1e-6 + over * 1e-3,
                    ),
                    VC01 => (0.0, 3.0, over, over * 1e5, 1e-6 + over * 1e-3),
                    _ => (0.0, 3.0, over, over * 1e5, 1e-6 + over * 1e-4),
                };
                let mut m = Metrics::default();
                m.set("periphery_loss", est(pl, pl * 0.01));
                m.set("internal_occupancy", est(occ, occ * 0.01));
                m.set("internal_loss", est(c3, c3 * 0.01));
                m.set("internal_lost_per_s", est(c3s, c3s * 0.01));
                m.set("periphery_delay", est(d, d * 0.01));
                m.set("delivered_delay", est(d, d * 0.01));
                (l, m)
            })
            .collect();
        Curve {
            label: CURVES[c].to_owned(),
            points,
        }
    };
    let curves: Vec<Curve> = (0..5).map(curve).collect();
    RdmaResults {
        table1: table(&PAPER_TABLE1, &T1_ROWS),
        table2: t2.clone(),
        table2_frames: t2,
        backbone: curves.clone(),
        buffer: 20_000.0,
        readings: vec![Reading {
            buffer: 20_000.0,
            periphery_buffer: 100.0,
            curves,
        }],
    }
}

#[test]
fn the_papers_own_numbers_reproduce_and_a_changed_number_differs() {
    let mut r = paper_like();
    let v = verdicts(&r);
    // The one claim the paper's own table contradicts (RDMA 0.00787 s < LB C=1.4
    // 0.0166 s) differs on its own numbers too.
    let own = "Table 2: RDMA's video delay exceeds only L. Bucket C=1.4 and V. Clock C=1.2";
    assert_eq!(v.verdict(own), Some(Verdict::Differs));
    let bad: Vec<_> = v
        .checks()
        .iter()
        .filter(|c| c.item != own)
        .filter(|c| !matches!(c.verdict, Verdict::Reproduces | Verdict::NotApplicable))
        .map(|c| format!("{}: {} — {}", c.item, c.verdict, c.why))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    let item = "Table 1 [RDMA] Mean Delay (s)";
    assert_eq!(v.verdict(item), Some(Verdict::Reproduces));
    // Change one number: the verdict follows.
    r.table1[0].set("mean_delay", est(0.00015, 1e-7));
    assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Differs));
    // The fitted bound's max jitter is never a test.
    assert_eq!(
        v.verdict("Table 1 [V. Clock B = 650 ms (fitted)] Max Jitter (s)"),
        Some(Verdict::NotApplicable)
    );
}

#[test]
fn figure_claims_follow_the_curves() {
    let mut r = paper_like();
    let vc = "Fig. 8: Virtual Clock practically suffers no periphery loss even in overload";
    assert_eq!(verdicts(&r).verdict(vc), Some(Verdict::Reproduces));
    // A Virtual Clock that drops at the periphery (the old reading) fails the claim.
    let last = r.backbone[VC01].points.len() - 1;
    r.backbone[VC01].points[last]
        .1
        .set("periphery_loss", est(0.44, 0.005));
    assert_eq!(verdicts(&r).verdict(vc), Some(Verdict::Differs));
    // And one whose C3 loses nothing in overload fails Fig. 10's.
    let grow = "Fig. 10: Virtual Clock's discards at C3 grow after 50%";
    assert_eq!(verdicts(&r).verdict(grow), Some(Verdict::Reproduces));
    for p in &mut r.backbone[VC01].points {
        p.1.set("internal_loss", est(0.0, 0.0));
        p.1.set("internal_lost_per_s", est(0.0, 0.0));
    }
    assert_ne!(verdicts(&r).verdict(grow), Some(Verdict::Reproduces));
    // Fig. 11's crossover: RDMA's delay above the Leaky Bucket's at high load.
    let cross = "Fig. 11: at high load Leaky Bucket C=1.4's delay surpasses RDMA's";
    assert!(
        verdicts(&r).checks().iter().all(|c| !c.item.contains(',')),
        "items go unquoted into verdicts.csv"
    );
    assert!(
        verdicts(&r)
            .checks()
            .iter()
            .all(|c| !format!("{}{}{}", c.paper, c.ours, c.why).contains('"')),
        "fields are quoted without escaping"
    );
    assert_eq!(verdicts(&r).verdict(cross), Some(Verdict::Reproduces));
    r.backbone[RDMA1].points[last]
        .1
        .set("periphery_delay", est(0.1, 1e-4));
    assert_eq!(verdicts(&r).verdict(cross), Some(Verdict::Differs));
    // LB filling C3's memory contradicts "does not grow indefinitely".
    let lb = "Fig. 9: Leaky Bucket occupancy at C3 does not grow to the memory";
    assert_eq!(verdicts(&r).verdict(lb), Some(Verdict::Reproduces));
    r.backbone[LB].points[last]
        .1
        .set("internal_occupancy", est(19_950.0, 50.0));
    assert_eq!(verdicts(&r).verdict(lb), Some(Verdict::Differs));
}

#[test]
fn orderings_need_separated_intervals() {
    let mut r = paper_like();
    let item = "Table 1: RDMA has the smallest voice delay";
    assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Reproduces));
    // RDMA's delay overlapping the Virtual Clock C=1.2's: undecided, not "holds".
    r.table1[0].set("mean_delay", est(0.19, 0.01));
    assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Undecided));
    r.table1[0].set("mean_delay", est(2.0, 0.01));
    assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Differs));
}

#[test]
fn a_reading_fits_only_with_both_magnitude_and_crossover() {
    let mut r = paper_like();
    let item = "Fig. 11: a reading of buffers and delay with both the magnitude and the crossover";
    assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Reproduces));
    // Delays of 0.1 s at high load: no reading is within the paper's axis.
    for c in &mut r.readings[0].curves {
        for p in &mut c.points {
            if p.0 > 0.8 {
                p.1.set("periphery_delay", est(0.1, 1e-4));
                p.1.set("delivered_delay", est(0.1, 1e-4));
            }
        }
    }
    assert_eq!(verdicts(&r).verdict(item), Some(Verdict::Differs));
}
