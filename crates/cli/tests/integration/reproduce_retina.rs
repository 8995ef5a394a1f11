//! `atmlab reproduce retina --quick` end to end on a live chain of switch servers: the
//! files are written, the invocation counts are what the hierarchy implies, and the
//! paper's argument holds (issue 9's acceptance): setup time grows with path length when
//! the NML-CP drives its children one after another, and does not when it drives them
//! in parallel. Compared within the one run, never against wall-clock thresholds.

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole reproduction"]
fn reproduce_retina_quick_shows_sequential_setup_growing_and_parallel_not() {
    let _cpu = crate::common::measuring_alone();
    let r = crate::common::reproduce_quick("retina");
    let (out, text) = (&r.out, &r.stdout);
    for f in [
        "README.md",
        "results.json",
        "setup_time.csv",
        "setup_time.png",
        "setup_time.svg",
        "setup_time_paper.png",
        "invocations.csv",
        "switch_interface.csv",
    ] {
        assert!(out.join(f).exists(), "{f} missing; stdout:\n{text}");
    }
    let md = std::fs::read_to_string(out.join("README.md")).unwrap();
    for s in [
        "§4.2",
        "| paper, Alcin (sequential) | 1 | | 28 |",
        "§3.3",
        "SNMP-like",
    ] {
        assert!(md.contains(s), "{s} missing:\n{md}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let setup = json["setup"].as_array().unwrap();
    let point = |m: &str, l: u64| {
        setup
            .iter()
            .find(|p| p["manager"] == m && p["switches"] == l)
            .unwrap_or_else(|| panic!("{m} at {l} missing"))
    };
    // Every manager measured over 1 to 8 switches (the short form skips some lengths).
    let lengths = [1u64, 2, 4, 6, 8];
    for m in ["tina sequential", "tina parallel", "xbind T=1"] {
        for l in lengths {
            assert!(point(m, l)["calls"].as_u64().unwrap() > 0);
        }
    }
    // Sequential: one NML -> EML invocation per switch, and per switch a reserve and a
    // commit (plus the source's identifier).
    for l in lengths {
        let p = point("tina sequential", l);
        let calls = p["calls"].as_u64().unwrap();
        assert_eq!(p["invocations"]["nml->eml"].as_u64().unwrap(), l * calls);
        assert_eq!(
            p["invocations"]["eml->switch"].as_u64().unwrap(),
            (2 * l + 1) * calls
        );
        assert_eq!(p["invocations"]["lnc->nml"].as_u64().unwrap(), calls);
    }
    // The acceptance: the slope of the median setup time over path length is clearly
    // positive for sequential setup and well above parallel's, which stays flat(ter).
    // Ratios within one run, so a slow or busy machine scales both alike.
    let slopes = &json["slopes_ms_per_switch"];
    let (seq, par) = (
        slopes["tina sequential"].as_f64().unwrap(),
        slopes["tina parallel"].as_f64().unwrap(),
    );
    let seq1 = point("tina sequential", 1)["p50_ms"].as_f64().unwrap();
    let seq8 = point("tina sequential", 8)["p50_ms"].as_f64().unwrap();
    let par8 = point("tina parallel", 8)["p50_ms"].as_f64().unwrap();
    assert!(seq > 0.0, "sequential slope {seq}\n{text}");
    assert!(
        seq8 > 2.0 * seq1,
        "sequential: {seq1} ms at 1 switch, {seq8} at 8\n{text}"
    );
    assert!(
        seq > 2.0 * par.max(0.0),
        "slopes: sequential {seq}, parallel {par}\n{text}"
    );
    assert!(
        par8 < seq8,
        "at 8 switches: parallel {par8} ms, sequential {seq8}\n{text}"
    );
    // The §3 table: four interfaces, the SNMP-like one with a round trip per attribute.
    let ifs = json["interfaces"].as_array().unwrap();
    assert_eq!(ifs.len(), 4);
    assert!(ifs.iter().all(|i| i["ops_per_s"].as_f64().unwrap() > 0.0));
    assert_eq!(ifs[3]["invocations_per_pair"], 10);
}
