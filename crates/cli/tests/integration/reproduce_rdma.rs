//! `atmlab reproduce rdma --quick`: the form CI runs. Checks what the short run can
//! decide: the verdict table is the computed one (its CSV and the report agree), the
//! Virtual Clock at its bound loses nothing and its largest delay change is the bound,
//! and the orderings the model must give whatever the run length.

/// The rows of a CSV as maps from header to field (no quoted commas in these files
/// except the verdict table's text fields, which are read by position from the left).
fn csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let head = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let rows = lines
        .map(|l| {
            let mut fields = Vec::new();
            let mut cur = String::new();
            let mut quoted = false;
            for ch in l.chars() {
                match ch {
                    '"' => quoted = !quoted,
                    ',' if !quoted => fields.push(std::mem::take(&mut cur)),
                    _ => cur.push(ch),
                }
            }
            fields.push(cur);
            fields
        })
        .collect();
    (head, rows)
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole reproduction"]
fn reproduce_rdma_quick_verdicts_and_properties() {
    let _cpu = crate::common::heavy_simulation();
    let r = crate::common::reproduce_quick("rdma");
    crate::common::assert_names_its_experiments(&r.stderr, 5);
    let out = &r.out;
    assert!(r.stdout.contains("README.md"));
    let md = std::fs::read_to_string(out.join("README.md")).unwrap();

    // The report opens with the computed verdicts: every row of verdicts.csv is in it,
    // with the same verdict.
    let (head, rows) = csv(&std::fs::read_to_string(out.join("verdicts.csv")).unwrap());
    let verdict_col = head.iter().position(|h| h == "verdict").unwrap();
    assert!(
        rows.len() > 100,
        "each table cell and claim: {}",
        rows.len()
    );
    let verdicts_at = md.find("## Verdicts").unwrap();
    assert!(verdicts_at < md.find("## Table 1").unwrap());
    let find = |item: &str| -> String {
        rows.iter()
            .find(|r| r[0] == item)
            .unwrap_or_else(|| panic!("no verdict row {item:?}"))[verdict_col]
            .clone()
    };
    for row in &rows {
        assert!(
            md.contains(&format!("| {} |", row[0])),
            "row {:?} missing from the report",
            row[0]
        );
    }
    // Properties a short run decides: the Virtual Clock holds, never drops, at the
    // periphery of the backbone and in front of the access link.
    assert_eq!(
        find("Fig. 8: Virtual Clock practically suffers no periphery loss even in overload"),
        "reproduces"
    );
    assert_eq!(
        find("Virtual Clock C=1 B = AI: no cell lost (paper's footnote)"),
        "reproduces"
    );
    assert_eq!(
        find("Table 2 (frame bursts): V. Clock C=1 max jitter is the 33 ms penalty bound"),
        "reproduces"
    );
    // Two trees keep C3 empty and below every other mechanism; the Virtual Clock,
    // passing its excess on, loses at C3 in overload (the paper's Fig. 10).
    assert_eq!(
        find("Fig. 9: RDMA with two trees keeps C3's occupancy nearly zero"),
        "reproduces"
    );
    assert_eq!(
        find("Fig. 9: RDMA with two trees has the lowest C3 occupancy"),
        "reproduces"
    );
    assert_eq!(
        find("Fig. 10: Virtual Clock's discards at C3 grow after 50%"),
        "reproduces"
    );
    // The fitted bound is never counted as a reproduction of the number it came from.
    assert_eq!(
        find("Table 1 [V. Clock B = 650 ms (fitted)] Max Jitter (s)"),
        "not applicable"
    );

    // The tables: RDMA's voice delay is about half a 125 us cycle, and the Virtual
    // Clock rows lose nothing.
    let (_, t1) = csv(&std::fs::read_to_string(out.join("table1.csv")).unwrap());
    let get = |rows: &[Vec<String>], mech: &str, metric: &str| -> f64 {
        rows.iter()
            .find(|r| r[0] == mech && r[1] == metric)
            .unwrap_or_else(|| panic!("{mech} {metric}"))[3]
            .parse()
            .unwrap()
    };
    let d = get(&t1, "RDMA", "mean_delay");
    assert!((50e-6..75e-6).contains(&d), "{d}");
    for mech in [
        "V. Clock B = AI = 360 ms",
        "V. Clock C=1.2 B = AI = 360 ms",
        "V. Clock B = 650 ms (fitted)",
    ] {
        assert_eq!(get(&t1, mech, "loss_probability"), 0.0, "{mech}");
    }
    // A larger C lets the Virtual Clock hold less.
    assert!(
        get(&t1, "V. Clock C=1.2 B = AI = 360 ms", "mean_delay")
            < get(&t1, "V. Clock B = AI = 360 ms", "mean_delay")
    );
    for f in [
        "fig08.png",
        "fig11.csv",
        "fig11-readings.csv",
        "table2-frames.csv",
        "fig11-readings/results.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
}
