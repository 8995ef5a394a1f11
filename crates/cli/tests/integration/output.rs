//! Output a person reads (issue 27, item 5): plain logs when redirected, units and the
//! interval named in the simulation table, no NaN, one report file name for every paper.

use crate::common::atmlab;

/// A log redirected to a pipe (as here) carries no ANSI escape codes: `audit --insecure`
/// logs its warning at once, then fails to connect to a port nobody listens on.
#[test]
fn log_lines_have_no_colour_codes_when_redirected() {
    let o = atmlab(&["audit", "--insecure", "--names", "127.0.0.1:1"], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WARN"), "no log line to check: {err}");
    assert!(
        !err.contains("\x1b["),
        "colour codes in a redirected log: {err:?}"
    );
}

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The metric rows of `sim run`'s table (two spaces, then a name).
fn metric_rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(" n="))
        .collect()
}

/// `sim run` on trunk-erlang with the sequential manager: the N_v metrics have no
/// samples (that manager keeps no identifier caches); the table says so instead of NaN,
/// names the interval, gives each metric its unit, and the longest name
/// (`switch_messages_per_call`) does not push its row out of line.
#[test]
fn sim_table_has_units_the_interval_and_no_nan() {
    let dir = tempfile::tempdir().unwrap();
    let file = repo().join("scenarios/control/trunk-erlang.toml");
    let o = atmlab(
        &[
            "sim",
            "run",
            file.to_str().unwrap(),
            "--set",
            "params.manager={kind=\"sequential\"}",
            "--set",
            "run.duration=\"20 s\"",
            "--set",
            "run.warmup=\"1 s\"",
            "--replications",
            "3",
            "--out",
            dir.path().to_str().unwrap(),
        ],
        b"",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains("NaN"), "NaN in the table:\n{out}");
    assert!(out.contains("95% confidence interval"), "{out}");
    let rows = metric_rows(&out);
    assert!(rows.len() > 20, "{out}");
    let row = |m: &str| {
        *rows
            .iter()
            .find(|r| r.split_whitespace().next() == Some(m))
            .unwrap_or_else(|| panic!("no row {m}:\n{out}"))
    };
    assert!(row("nv_mean").contains("no samples"), "{out}");
    let unit = |m: &str| row(m).split_whitespace().nth(1).unwrap().to_owned();
    assert_eq!(unit("mean_setup_latency"), "s");
    assert_eq!(unit("blocking_probability"), "ratio");
    assert_eq!(unit("setups_per_s"), "/s");
    // Aligned: every row's "n=" in the same column, the longest name included.
    let col = |r: &str| r[..r.find(" n=").unwrap()].chars().count();
    let c = col(row("switch_messages_per_call"));
    assert!(rows.iter().all(|r| col(r) == c), "ragged columns:\n{out}");
}

/// The plots' axes carry units: the swept rate's and the metric's.
#[test]
fn plot_axes_have_units() {
    let dir = tempfile::tempdir().unwrap();
    let file = repo().join("scenarios/examples/mm1.toml");
    let o = atmlab(
        &[
            "sim",
            "run",
            file.to_str().unwrap(),
            "--set",
            "run.duration=\"2000 s\"",
            "--replications",
            "2",
            "--out",
            dir.path().to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(dir.path().join("mean_wait.svg")).unwrap();
    assert!(svg.contains("mean_wait (s)"), "y axis without its unit");
    assert!(svg.contains("arrival.rate (/s)"), "x axis without its unit");
}

/// §6.1's sweep runs past the FDDI ring's rate on purpose (Figures 13-16 go to
/// 140 Mb/s): `sim check` says so once, naming the points, instead of nine times.
#[test]
fn a_warning_raised_at_many_points_is_one_line() {
    let file = repo().join("scenarios/gateway/6.1-burst-factor.toml");
    let o = atmlab(&["sim", "check", file.to_str().unwrap()], b"");
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("FDDI ring") && lines[0].contains("9 of 30 points"),
        "{err}"
    );
    assert!(lines[0].contains("\"140 Mb/s\""), "{err}");
}

/// Every paper's committed report is `README.md` (it renders in a directory listing);
/// none is called `report.md`. The reproductions' own CLI tests (heavy tier) check that
/// `reproduce` writes that name.
#[test]
fn every_committed_report_is_readme_md() {
    let root = repo().join("docs/reproductions");
    let mut dirs = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let p = e.unwrap().path();
        if !p.is_dir() {
            continue;
        }
        dirs += 1;
        assert!(!p.join("report.md").exists(), "{}/report.md", p.display());
        // rdma's report is the page docs/reproductions/rdma.md (its figure links rewritten).
        if !p.ends_with("rdma") {
            assert!(
                p.join("README.md").is_file(),
                "{}: no README.md",
                p.display()
            );
        }
    }
    assert!(dirs >= 5, "{dirs} report directories");
}

/// `demo --json`: stdout is one JSON document (progress on stderr), and each row says
/// both the target rate and what was offered in the measured window, the latter being
/// the calls offered over that window (not the target, which a short Poisson run misses).
#[test]
fn demo_json_names_the_target_and_the_offered_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (data, reports) = (dir.path().join("data"), dir.path().join("reports"));
    let o = atmlab(
        &[
            "demo",
            "--loads",
            "100",
            "--seconds",
            "0.5",
            "--managers",
            "sequential",
            "--data",
            data.to_str().unwrap(),
            "--reports",
            reports.to_str().unwrap(),
            "--json",
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    });
    let row = &j["rows"][0];
    assert_eq!(row["manager"], "sequential");
    let c = &row["callgen"];
    assert_eq!(c["offered_per_s"], 100.0);
    let arrived = c["arrived_per_s"].as_f64().expect("arrived_per_s");
    let offered = c["offered"].as_f64().unwrap();
    let setups = c["setups_per_s"].as_f64().unwrap();
    let established = c["established"].as_f64().unwrap();
    // Same window as setups/s: offered/arrived = established/setups.
    assert!(established > 0.0, "{c}");
    assert!(
        ((offered / arrived) - (established / setups)).abs() < 1e-9,
        "{c}"
    );
    assert!(err.contains("target") && err.contains("offered"), "{err}");
}
