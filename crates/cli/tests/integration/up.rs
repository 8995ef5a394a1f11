//! `atmlab up` keeps a network and a connection manager running; `atmlab callgen` offers
//! it calls over gRPC and prints one JSON object per rate.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::atmlab;

#[test]
fn callgen_against_atmlab_up_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut up = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["up", "--insecure", "--data"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let net = data.join("net.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let cm = loop {
        if let Ok(t) = std::fs::read_to_string(&net)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && let Some(cm) = v["cm"].as_str()
        {
            break cm.trim_start_matches("http://").to_string();
        }
        assert!(
            Instant::now() < deadline,
            "atmlab up never wrote its addresses"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out_dir = dir.path().join("callgen");
    let o = atmlab(
        &[
            "callgen",
            "--insecure",
            "--cm",
            &cm,
            "--rate",
            "100,300",
            "--seconds",
            "0.5",
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
            "--label",
            "xbind T=1",
        ],
        b"",
    );
    let _ = up.kill();
    let _ = up.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    for (row, rate) in rows.iter().zip([100.0, 300.0]) {
        assert_eq!(row["offered_per_s"], rate);
        for key in [
            "setups_per_s",
            "mean_setup_ms",
            "p99_setup_ms",
            "blocked",
            "failed",
        ] {
            assert!(row.get(key).is_some(), "{key} missing in {row}");
        }
        assert!(row["setups_per_s"].as_f64().unwrap() > 0.0);
        assert_eq!(row["failed"], 0);
        assert_eq!(row["blocked"], 0);
    }
    let csv = std::fs::read_to_string(out_dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(csv.lines().nth(1).unwrap().starts_with("xbind T=1,100,"));
    assert!(out_dir.join("throughput_delay.png").exists());
}
