//! `atmlab demo`, the README's main job, end to end (short loads so the debug build
//! finishes in seconds): the connection carries frames, every manager runs, every audit
//! is clean, and the reports exist.

use crate::common::atmlab;

#[test]
#[ignore = "heavy tier (scripts/test.sh): the live lab under load"]
fn the_demo_runs_every_manager_and_writes_its_reports() {
    let _cpu = crate::common::measuring_alone();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let reports = dir.path().join("reports");
    let o = atmlab(
        &[
            "demo",
            "--loads",
            "50,500",
            "--seconds",
            "0.3",
            "--data",
            data.to_str().unwrap(),
            "--reports",
            reports.to_str().unwrap(),
        ],
        b"",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("received 200 intact"), "{out}");
    for m in [
        "sequential",
        "xbind T=1",
        "xbind T=4",
        "xbind T=10",
        "xbind adaptive",
    ] {
        assert!(out.contains(m), "{m} missing:\n{out}");
    }
    assert!(out.contains("every switch audited clean"));
    assert!(data.join("certs/ca.pem").exists(), "mutual TLS by default");
    let csv = std::fs::read_to_string(reports.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 5 * 2);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("results.json")).unwrap())
            .unwrap();
    for row in json.as_array().unwrap() {
        for key in [
            "offered_per_s",
            "setups_per_s",
            "mean_setup_ms",
            "p99_setup_ms",
            "blocked",
            "failed",
        ] {
            assert!(row.get(key).is_some(), "{key} missing in {row}");
        }
        assert_eq!(row["failed"], 0);
    }
    assert!(reports.join("throughput_delay.png").exists());
    assert!(reports.join("throughput_delay.svg").exists());
}

/// Issue 10's soak, short form (the documented long form is in docs/performance.md):
/// a sustained load with faults on the manager's links, then the audit: no leaks.
#[test]
#[ignore = "heavy tier (scripts/test.sh): the live lab under load"]
fn a_short_soak_with_faults_ends_with_no_leaks() {
    let _cpu = crate::common::measuring_alone();
    let dir = tempfile::tempdir().unwrap();
    let o = atmlab(
        &[
            "soak",
            "--rate",
            "500",
            "--seconds",
            "3",
            "--window",
            "1",
            "--faults",
            "drop=0.01,duplicate=0.01,reorder=0.01,delay=0.01,seed=3",
            "--insecure",
            "--journal",
            dir.path().join("cm.sqlite").to_str().unwrap(),
            "--data",
            dir.path().join("data").to_str().unwrap(),
        ],
        b"",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("leaks: 0"), "{out}");
    assert!(
        out.contains("audit: 4 switches, 0 connections, 0 calls, 0 reservations: clean"),
        "{out}"
    );
}

/// `soak --json`: the summary as one JSON object on stdout, the windows on stderr.
#[test]
#[ignore = "heavy tier (scripts/test.sh): the live lab under load"]
fn soak_json_prints_the_summary_as_one_object() {
    let _cpu = crate::common::measuring_alone();
    let dir = tempfile::tempdir().unwrap();
    let o = atmlab(
        &[
            "--data",
            dir.path().join("data").to_str().unwrap(),
            "soak",
            "--rate",
            "100",
            "--seconds",
            "2",
            "--window",
            "1",
            "--insecure",
            "--json",
        ],
        b"",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON object");
    assert_eq!(v["leaks"], 0, "{v}");
    assert!(v["established"].as_u64().is_some_and(|n| n > 0), "{v}");
}
