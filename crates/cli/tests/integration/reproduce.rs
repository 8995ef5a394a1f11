//! `atmlab reproduce xbind --quick` end to end on the live laboratory, and the cache
//! dimensioning command it is built on.

use crate::common::atmlab;

#[test]
#[ignore = "heavy tier (scripts/test.sh): a whole reproduction"]
fn reproduce_xbind_quick_writes_every_table_and_figure() {
    let _cpu = crate::common::measuring_alone();
    let r = crate::common::reproduce_quick("xbind");
    let out = &r.out;
    for f in [
        "README.md",
        "results.json",
        "baseline.csv",
        "throughput_delay.csv",
        "throughput_delay.png",
        "nv_summary.csv",
        "nv_bmediumload_t5.csv",
        "nv_bmediumload_t5.png",
        "nv_dhighload_t15.png",
        "table1.csv",
        "invocations.csv",
        "invocations.png",
    ] {
        assert!(out.join(f).exists(), "{f} missing; stdout:\n{}", r.stdout);
    }
    let md = std::fs::read_to_string(out.join("README.md")).unwrap();
    for heading in ["Baseline", "Throughput-delay", "N_v", "Table I", "Fig. 10"] {
        assert!(md.contains(heading), "{heading} missing:\n{md}");
    }
    // The paper's numbers stand beside ours.
    assert!(md.contains("| paper | 5 | | 0.9529 | 0.9859 |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    // Little's law holds on the measurement: the time-average N_v is λ x latency.
    for nv in json["nv"].as_array().unwrap() {
        let (t, d) = (
            nv["mean_nv_over_time"].as_f64().unwrap(),
            nv["direct_mean"].as_f64().unwrap(),
        );
        assert!(nv["arrivals"].as_u64().unwrap() > 100, "{nv}");
        assert!((t - d).abs() <= 1e-6 * d.max(1.0), "{t} vs {d}");
    }
    // With T = 1 every command is its own message: the calls' own commands cost 16
    // invocations per call over 3 hops, exactly when every call was set up. With T = 4
    // messages carry up to 4 commands, so fewer, never fewer than the paper's formula
    // allows. Identifier commands (cache misses, fills, trims) come on top; their number
    // follows the machine's latency (a slow CI minute raises N_v), so the assertions
    // hold them apart rather than assume a fast machine.
    let inv = json["invocations"].as_array().unwrap();
    let at = |t: u64| inv.iter().find(|i| i["threshold"] == t).unwrap();
    let f = |i: &serde_json::Value, k: &str| i[k].as_f64().unwrap_or_else(|| panic!("{k}: {i}"));
    let (t1, t4) = (at(1), at(4));
    assert_eq!(
        t1["commands"].as_u64().unwrap(),
        t1["messages"].as_u64().unwrap() + t1["retries"].as_u64().unwrap(),
        "T = 1 sends one command per message: {t1}"
    );
    assert!(f(t1, "call_invocations_per_call") >= 16.0 - 1e-9, "{t1}");
    if t1["not_established"] == 0 {
        assert!(
            (f(t1, "call_invocations_per_call") - 16.0).abs() < 1e-9,
            "{t1}"
        );
    }
    assert!(
        f(t1, "measured_per_call") >= f(t1, "call_invocations_per_call"),
        "{t1}"
    );
    let per_message = f(t4, "commands_per_message");
    assert!(per_message > 1.5 && per_message <= 4.0 + 1e-9, "{t4}");
    assert!(
        f(t4, "call_invocations_per_call") >= 7.0 - 1e-9
            && f(t4, "call_invocations_per_call") < f(t1, "call_invocations_per_call"),
        "T = 4: {t4}\nT = 1: {t1}"
    );
    for b in json["baseline"].as_array().unwrap() {
        assert!(b["calls"].as_u64().unwrap() > 0 && b["mean_ms"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn cm_dimension_sizes_the_cache_and_checks_its_input() {
    let o = atmlab(
        &[
            "cm",
            "dimension",
            "--rate",
            "50",
            "--latency",
            "52 ms",
            "--hit",
            "0.99",
        ],
        b"",
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    // λ/α = 2.6; P{N <= 6} = 0.9828 < 0.99 <= P{N <= 7} = 0.9950: a cache of 8.
    assert!(
        text.contains("mean λ x latency = 50 x 0.052000 s = 2.600"),
        "{text}"
    );
    assert!(text.contains("        0.99            8"), "{text}");
    assert!(text.contains("   1              800      16.00"), "{text}");
    let bad = atmlab(
        &["cm", "dimension", "--rate", "-1", "--latency", "1 ms"],
        b"",
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--rate"));
}
