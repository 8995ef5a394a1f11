//! `atmlab reproduce smds --quick` as CI runs it: every file written, and the numbers
//! that must hold whatever the machine (never its speed).

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole reproduction"]
fn quick_reproduction_writes_every_table_and_figure() {
    let _cpu = crate::common::measuring_alone();
    let r = crate::common::reproduce_quick("smds");
    let out = &r.out;
    assert!(r.stdout.contains("README.md"));
    crate::common::assert_written(
        out,
        &[
            "table1.csv",
            "fig3_flow_rate.csv",
            "fig3_flow_rate.png",
            "fig3_flow_rate.svg",
            "fig5_densities.csv",
            "fig5_densities.png",
            "fig6_aggregate.csv",
            "fig6_aggregate.png",
            "routing.csv",
            "routing.png",
            "adjacency.csv",
            "cmp.csv",
            "README.md",
        ],
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(j["table1"].as_array().unwrap().len(), 3);
    for p in j["table1"].as_array().unwrap() {
        assert!(p["per_s"].as_f64().unwrap() > 0.0);
    }
    // Every size crossed the two servers.
    for p in j["fig3"].as_array().unwrap() {
        assert!(p["pdus_per_s"].as_f64().unwrap() > 0.0, "{p}");
    }
    // §3.3.2: prompt with atmlab's synchronisation; the paper's behaviour waits for the
    // refresh (minutes of simulated time).
    let adj = j["adjacency"].as_array().unwrap();
    assert!(adj[0]["seconds"].as_f64().unwrap() < 10.0, "{adj:?}");
    assert!(adj[1]["seconds"].as_f64().unwrap() > 60.0, "{adj:?}");
    // The CMP moves the excess to the neighbours.
    let cmp = j["cmp"].as_array().unwrap();
    assert_eq!(cmp[0]["cut"], 0);
    assert!(cmp[1]["cut"].as_u64().unwrap() > 0);
    // Fig. 5's model: heavy traffic is discarded by one worker, carried by more.
    let fig5 = j["fig5"].as_array().unwrap();
    let at = |d: f64, w: u64| {
        fig5.iter()
            .find(|p| p["density"].as_f64() == Some(d) && p["workers"].as_u64() == Some(w))
            .unwrap()["carried"]
            .as_f64()
            .unwrap()
    };
    assert!(at(6.0, 4) > at(6.0, 1));
    let report = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        report.contains("Table 1") && report.contains("5025"),
        "{report}"
    );
}
