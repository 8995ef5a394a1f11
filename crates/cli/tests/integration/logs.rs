//! Logs a machine can read (issue 25, item 3): `--log-format json` writes one JSON object
//! per line on stderr, each with its level, target and fields, and nothing else; a set
//! `RUST_LOG` decides the level over `-v`/`-q`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `atmlab net up --insecure ARGS line3.toml` until it has written its addresses,
/// stops it with SIGTERM (an orderly stop, which logs too) and returns its stderr.
fn net_up_briefly(args: &[&str], rust_log: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_atmlab"));
    cmd.args(["net", "up", "--insecure", "--data"])
        .arg(&data)
        .args(args)
        .arg(&topo)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(f) = rust_log {
        cmd.env("RUST_LOG", f);
    }
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !data.join("net.json").exists() {
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", &child.id().to_string()])
                .status();
            panic!("net up never wrote net.json");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "net up: {err}");
    err
}

/// Every line of `stderr` as a JSON object with level, target and fields (and a message
/// among the fields); panics naming the first line that is not.
fn json_lines(stderr: &str) -> Vec<serde_json::Value> {
    assert!(!stderr.is_empty(), "nothing logged");
    stderr
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
            for key in ["level", "target", "fields", "timestamp"] {
                assert!(v.get(key).is_some(), "no {key} in {line}");
            }
            assert!(v["fields"]["message"].is_string(), "no message in {line}");
            v
        })
        .collect()
}

#[test]
fn log_format_json_writes_only_json_lines_and_rust_log_wins_over_quiet() {
    // At the default level (info): the servers' start and stop.
    let lines = json_lines(&net_up_briefly(&["--log-format", "json"], None));
    let levels: Vec<&str> = lines.iter().filter_map(|v| v["level"].as_str()).collect();
    assert!(levels.contains(&"INFO"), "{levels:?}");
    assert!(
        lines.iter().any(|v| v["target"] == "atmlab_rpc::server"
            && v["fields"]["message"] == "listening"
            && v["fields"]["server"].is_string()),
        "a server's start, with its fields: {lines:?}"
    );

    // -q: errors only, so an orderly run logs nothing ...
    let quiet = net_up_briefly(&["--log-format", "json", "-q"], None);
    assert_eq!(quiet, "", "-q logged");
    // ... unless RUST_LOG says otherwise: it decides over -q (and -v).
    let lines = json_lines(&net_up_briefly(
        &["--log-format", "json", "-q"],
        Some("atmlab_rpc=info"),
    ));
    assert!(
        lines
            .iter()
            .all(|v| v["target"].as_str().unwrap().starts_with("atmlab_rpc")),
        "RUST_LOG's filter, not -q's: {lines:?}"
    );
    assert!(lines.iter().any(|v| v["level"] == "INFO"), "{lines:?}");
}
