//! `atmlab reproduce gateway --quick` as CI runs it: every figure of paper 004 written, and
//! the numbers that must hold whatever the noise of a short run.

fn csv(path: &std::path::Path) -> Vec<(String, f64, f64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("series,x_mbps,mean,ci95"));
    lines
        .map(|l| {
            let (label, rest) = l.rsplit_once("\",").unwrap();
            let mut f = rest.split(',');
            let x: f64 = f.next().unwrap().parse().unwrap();
            let m: f64 = f.next().unwrap().parse().unwrap();
            (label.trim_start_matches('"').to_string(), x, m)
        })
        .collect()
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole reproduction"]
fn quick_reproduction_writes_every_figure_with_sane_numbers() {
    let _cpu = crate::common::heavy_simulation();
    let r = crate::common::reproduce_quick("gateway");
    crate::common::assert_names_its_experiments(&r.stderr, 5);
    let (out, stdout) = (&r.out, &r.stdout);
    assert!(
        stdout.contains("events") && stdout.contains("README.md"),
        "{stdout}"
    );
    let figures = [
        "fig13-throughput",
        "fig14-cell-loss",
        "fig15-frame-loss",
        "fig16-latency",
        "fig17-throughput",
        "fig18-cell-loss",
        "fig19-throughput",
        "fig20-cell-loss",
        "fig21-throughput",
        "fig22-cell-loss",
        "fig23-latency",
        "figr1-reverse-throughput",
        "figr2-reverse-loss",
    ];
    for f in figures {
        for ext in ["png", "svg", "csv"] {
            let p = out.join(format!("{f}.{ext}"));
            assert!(p.metadata().map(|m| m.len() > 0).unwrap_or(false), "{p:?}");
        }
    }
    for e in [
        "6.1-burst-factor",
        "6.2-peak-to-average",
        "6.3-npe-rate",
        "6.4-transmit-buffer",
        "6.5-reverse-path",
    ] {
        let j: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(e).join("results.json")).unwrap(),
        )
        .unwrap();
        assert!(!j["points"].as_array().unwrap().is_empty(), "{e}");
    }
    let report = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        report.contains("Figure 23") && report.contains("**Paper:**"),
        "{report}"
    );
    // The report opens with the verdict table, the one written to verdicts.csv, with a
    // row for every figure of §6 and for the reverse path.
    let top = &report[..report.find("## Figure 13").unwrap()];
    assert!(top.contains("Verdicts: "), "{top}");
    let verdicts = std::fs::read_to_string(out.join("verdicts.csv")).unwrap();
    for fig in 13..=23 {
        assert!(
            verdicts.contains(&format!("Fig. {fig}")),
            "Fig. {fig}: {verdicts}"
        );
        assert!(top.contains(&format!("Fig. {fig}")), "Fig. {fig}");
    }
    assert!(verdicts.contains("§6.5"), "{verdicts}");

    // Throughput never exceeds the FDDI rate, nor the data the cells carried.
    for f in [
        "fig13-throughput",
        "fig17-throughput",
        "fig19-throughput",
        "fig21-throughput",
    ] {
        for (_, x, m) in csv(&out.join(format!("{f}.csv"))) {
            assert!(m > 0.0 && m < 100.0, "{f}: {m} at {x}");
        }
    }
    // No cell is lost at 40 Mb/s with Table 3's buffers.
    for (s, x, m) in csv(&out.join("fig14-cell-loss.csv")) {
        if x == 40.0 {
            assert_eq!(m, 0.0, "{s}");
        }
    }
    // §6.3: the slow NPE caps the throughput below what it can serve (68.2 Mb/s with the
    // copy), while the fast one carries more at the highest load.
    let f19 = csv(&out.join("fig19-throughput.csv"));
    let at = |label: &str| {
        f19.iter()
            .filter(|(s, x, _)| s.contains(label) && *x == 130.0)
            .map(|p| p.2)
            .next()
            .unwrap()
    };
    assert!(at("R = 25 /ms") <= 68.2, "{f19:?}");
    assert!(at("R = 100 /ms") > at("R = 25 /ms"), "{f19:?}");
    // §6.5: 16 frames of receive buffer lose nothing.
    for (s, _, m) in csv(&out.join("figr2-reverse-loss.csv")) {
        if s.contains("= 16") {
            assert_eq!(m, 0.0, "{s}");
        }
    }
}
