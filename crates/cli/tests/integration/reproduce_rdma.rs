//! `atmlab reproduce rdma --quick`: the form CI runs. Checks the report's files and that
//! its tables hold numbers, not placeholders.

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole reproduction"]
fn reproduce_rdma_quick_writes_the_report() {
    let _cpu = crate::common::heavy_simulation();
    let r = crate::common::reproduce_quick("rdma");
    let out = &r.out;
    assert!(r.stdout.contains("report.md"));
    crate::common::assert_written(
        out,
        &[
            "report.md",
            "table1.csv",
            "table2.csv",
            "fig08.png",
            "fig08.csv",
            "fig09.png",
            "fig09.csv",
            "fig10.png",
            "fig10.csv",
            "fig11.png",
            "fig11.csv",
            "table1-voice/results.json",
            "table2-video/results.csv",
            "fig08-11-backbone/results.json",
        ],
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Table 1: voice source") && md.contains("## Table 2: video source"));
    // Every table row: the paper's number then ours, mean ± CI, all numeric.
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| {
            l.starts_with("| RDMA |") || l.starts_with("| L. Bucket") || l.starts_with("| V. Clock")
        })
        .collect();
    assert_eq!(rows.len(), 11, "{md}");
    for row in rows {
        let cells: Vec<&str> = row
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        for c in &cells[1..] {
            let first = c.split(" ± ").next().unwrap();
            assert!(first.parse::<f64>().is_ok(), "not a number: {c:?} in {row}");
        }
    }
    // The table CSV: mechanism, metric, paper, mean, ci95 with numeric means.
    let csv = std::fs::read_to_string(out.join("table1.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "mechanism,metric,paper,mean,ci95");
    assert_eq!(lines.len(), 1 + 5 * 4);
    for l in &lines[1..] {
        let f: Vec<&str> = l.split(',').collect();
        assert!(f[3].parse::<f64>().is_ok_and(f64::is_finite), "{l}");
    }
}
