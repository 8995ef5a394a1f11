//! `atmlab sim` as users run it: the example scenario, result files, reproducibility
//! across thread counts, and errors that name the file, the key and what was expected.

use std::path::{Path, PathBuf};

use crate::common::atmlab;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The README's example, shortened so the test stays quick.
fn run_mm1(out: &Path, threads: &str) -> std::process::Output {
    run_example(
        out,
        threads,
        &["--set", "run.duration=\"20000 s\"", "--replications", "4"],
    )
}

/// `atmlab sim run` on the README's example with `--out`, `--threads` and `extra`.
fn run_example(out: &Path, threads: &str, extra: &[&str]) -> std::process::Output {
    let file = repo().join("scenarios/examples/mm1.toml");
    let mut args = vec![
        "sim",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--threads",
        threads,
    ];
    args.extend_from_slice(extra);
    atmlab(&args, b"")
}

#[test]
fn example_runs_and_writes_every_result_file() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_mm1(dir.path(), "2");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("mean_wait") && out.contains("events/s") && out.contains("simulated-s/s"),
        "{out}"
    );
    for f in [
        "results.json",
        "results.csv",
        "replications.csv",
        "run.json",
        "mean_wait.svg",
        "mean_wait.png",
    ] {
        assert!(dir.path().join(f).exists(), "{f} missing");
    }
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
    let keys: Vec<&String> = j.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["points", "scenario"]);
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 5);
    let p = &points[4];
    assert_eq!(p["params"]["arrival"]["rate"], "0.9 /s");
    let w = &p["metrics"]["mean_wait"];
    assert_eq!(w["n"], 4);
    assert!(
        w["mean"].as_f64().unwrap() > 5.0 && w["ci95"].as_f64().unwrap() > 0.0,
        "{w}"
    );
    for m in [
        "mean_wait",
        "mean_system_time",
        "mean_queue_length",
        "utilization",
        "loss_probability",
        "wait_p50",
        "wait_p99",
    ] {
        assert!(p["metrics"].get(m).is_some(), "{m}");
    }
    let csv = std::fs::read_to_string(dir.path().join("replications.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 5 * 4);
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert!(run["events"].as_u64().unwrap() > 100_000);
}

#[test]
fn results_are_identical_for_any_thread_count() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    assert!(run_mm1(a.path(), "1").status.success());
    assert!(run_mm1(b.path(), "3").status.success());
    for f in [
        "results.json",
        "results.csv",
        "replications.csv",
        "mean_wait.svg",
    ] {
        assert_eq!(
            std::fs::read(a.path().join(f)).unwrap(),
            std::fs::read(b.path().join(f)).unwrap(),
            "{f} differs between 1 and 3 threads"
        );
    }
}

fn check(body: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, body).unwrap();
    let o = atmlab(&["sim", "check", f.to_str().unwrap()], b"");
    let (out, err) = text(&o);
    (o.status.success(), format!("{out}{err}"))
}

const GOOD_RUN: &str = "model = \"queue\"\n[run]\nduration = \"100 s\"\n";

#[test]
fn bad_scenarios_name_file_key_and_expectation() {
    let svc = "service = { kind = \"exponential\", mean = \"1 s\" }\n";
    let cases = [
        (
            format!(
                "{GOOD_RUN}[params]\narrival = {{ kind = \"poisson\", rate = \"0.5 /s\" }}\n{svc}colour = 3\n"
            ),
            "params.colour",
            "unknown key",
        ),
        (
            format!(
                "{GOOD_RUN}[params]\narrival = {{ kind = \"poisson\", rate = \"0.5 litres\" }}\n{svc}"
            ),
            "params.arrival.rate",
            "unit",
        ),
        (
            format!(
                "{GOOD_RUN}[params]\narrival = {{ kind = \"poisson\", rate = \"-2 /s\" }}\n{svc}"
            ),
            "params.arrival.rate",
            "negative",
        ),
        (
            "model = \"queue\"\n[run]\nduration = \"100 parsecs\"\n".to_owned(),
            "run.duration",
            "duration such as",
        ),
        (
            "model = \"qeueu\"\n[run]\nduration = \"100 s\"\n".to_owned(),
            "model",
            "known kinds: queue",
        ),
    ];
    for (body, key, what) in cases {
        let (ok, msg) = check(&body);
        assert!(!ok, "accepted:\n{body}");
        assert!(
            msg.contains("bad.toml") && msg.contains(key) && msg.contains(what),
            "{msg}"
        );
    }
}

#[test]
fn unstable_queue_warns_but_runs() {
    let (ok, msg) = check(&format!(
        "{GOOD_RUN}[params]\narrival = {{ kind = \"poisson\", rate = \"1.5 /s\" }}\nservice = {{ kind = \"exponential\", mean = \"1 s\" }}\n"
    ));
    assert!(ok, "{msg}");
    assert!(msg.contains("warning") && msg.contains("unstable"), "{msg}");
}

#[test]
fn list_shows_models_and_metrics() {
    let o = atmlab(&["sim", "list"], b"");
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(
        out.starts_with("queue:") && out.contains("mean_wait") && out.contains("arrival.kind"),
        "{out}"
    );
}

/// Sequential replications (`[run] precision`) from the command line: the header says
/// so, each point reports its own count, and the files are the same for any thread count.
#[test]
fn precision_adds_replications_the_same_for_any_thread_count() {
    let run = |out: &Path, threads: &str| {
        run_example(
            out,
            threads,
            &[
                "--set",
                "run.duration=\"3000 s\"",
                "--set",
                "run.warmup=\"100 s\"",
                "--set",
                "run.precision=0.1",
                "--set",
                "run.precision_metrics=[\"mean_wait\"]",
                "--replications",
                "10",
            ],
        )
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = run(a.path(), "1");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("10.. replications until each mean's relative error is at most 10%"),
        "{out}"
    );
    assert!(run(b.path(), "3").status.success());
    for f in ["results.json", "results.csv", "replications.csv"] {
        assert_eq!(
            std::fs::read(a.path().join(f)).unwrap(),
            std::fs::read(b.path().join(f)).unwrap(),
            "{f} differs between 1 and 3 threads"
        );
    }
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(
        j["scenario"]["method"]["sequential_replications"]["metrics"][0],
        "mean_wait"
    );
    let counts: Vec<u64> = j["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metrics"]["mean_wait"]["n"].as_u64().unwrap())
        .collect();
    assert!(counts.iter().all(|&n| n >= 10), "{counts:?}");
    // The heavier point (rho 0.9) needs more replications than n0.
    assert!(counts.iter().any(|&n| n > 10), "{counts:?}");
}

/// Every scenario the repository ships (examples, the papers' control, gateway and
/// RDMA studies) stays valid.
#[test]
fn every_shipped_scenario_checks() {
    let mut n = 0;
    for sub in ["examples", "control", "gateway", "rdma"] {
        let dir = repo().join("scenarios").join(sub);
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                let o = atmlab(&["sim", "check", path.to_str().unwrap()], b"");
                let (out, err) = text(&o);
                assert!(o.status.success(), "{}: {out}{err}", path.display());
                n += 1;
            }
        }
    }
    assert!(n >= 10, "only {n} scenarios found");
}

/// Issue 26, item 4: the shards of a sweep, merged, are the unsharded run, byte for
/// byte (results.json, results.csv, replications.csv), with independent replications
/// (jobs dealt one by one) and with a precision target (points dealt whole); a merge of
/// shards that are not the N shards of one run is refused, naming what is wrong.
#[test]
fn shards_merged_are_the_unsharded_run_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = ["--set", "run.duration=\"20000 s\"", "--replications", "3"];
    for (name, extra) in [("mm1", &set[..]), ("mm1-precision", &[][..])] {
        let file = repo().join(format!("scenarios/examples/{name}.toml"));
        let file = file.to_str().unwrap();
        let full = d.join(format!("{name}-full"));
        let mut args = vec!["sim", "run", file, "--out", full.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = atmlab(&args, b"");
        assert!(o.status.success(), "{}", text(&o).1);
        let mut shards = Vec::new();
        for i in 1..=4 {
            let out = d.join(format!("{name}-shard{i}"));
            let shard = format!("{i}/4");
            let mut args = vec![
                "sim",
                "run",
                file,
                "--out",
                out.to_str().unwrap(),
                "--shard",
                &shard,
            ];
            args.extend_from_slice(extra);
            let o = atmlab(&args, b"");
            assert!(o.status.success(), "{}", text(&o).1);
            assert!(
                !out.join("results.json").exists(),
                "a shard writes only shard.json"
            );
            shards.push(out.to_str().unwrap().to_owned());
        }
        let merged = d.join(format!("{name}-merged"));
        let mut args = vec!["sim", "merge", "--out", merged.to_str().unwrap()];
        // In any order.
        args.extend(shards.iter().rev().map(String::as_str));
        let o = atmlab(&args, b"");
        assert!(o.status.success(), "{}", text(&o).1);
        for f in ["results.json", "results.csv", "replications.csv"] {
            assert_eq!(
                std::fs::read(full.join(f)).unwrap(),
                std::fs::read(merged.join(f)).unwrap(),
                "{name}: {f} differs"
            );
        }
        // Three of four shards, or one twice: refused, naming the shard.
        let three = [
            "sim", "merge", "--out", "x", &shards[0], &shards[1], &shards[2],
        ];
        let (_, err) = text(&atmlab(&three, b""));
        assert!(err.contains("shard 4/4 is missing"), "{err}");
        let twice = [
            "sim", "merge", "--out", "x", &shards[0], &shards[0], &shards[2], &shards[3],
        ];
        let (_, err) = text(&atmlab(&twice, b""));
        assert!(err.contains("given twice"), "{err}");
    }
    let o = atmlab(&["sim", "run", "x.toml", "--shard", "5/4"], b"");
    assert!(text(&o).1.contains("1 <= I <= N"), "{}", text(&o).1);
}

/// docs/cluster.md's GNU parallel recipe, as written there: four shards run by
/// `parallel`, merged, equal to the unsharded run. The README's test command installs
/// GNU parallel when it is missing; here a missing one is a failure.
#[test]
fn gnu_parallel_runs_the_shards_of_docs_cluster_md() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let scenario = repo().join("scenarios/examples/mm1.toml");
    let scenario = scenario.to_str().unwrap();
    // The recipe's two commands, with the binary under test and a shorter run.
    let bin = env!("CARGO_BIN_EXE_atmlab");
    let status = std::process::Command::new("parallel")
        .current_dir(d)
        .args([
            "--halt",
            "now,fail=1",
            &format!("{bin} sim run {scenario} --set 'run.duration=\"20000 s\"' --shard {{}}/4 --out shards/{{}}"),
            ":::",
            "1",
            "2",
            "3",
            "4",
        ])
        .status()
        .expect("GNU parallel is not installed: run the README's test command, which installs it");
    assert!(status.success());
    let o = std::process::Command::new(bin)
        .current_dir(d)
        .args([
            "sim", "merge", "--out", "merged", "shards/1", "shards/2", "shards/3", "shards/4",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    let o = std::process::Command::new(bin)
        .current_dir(d)
        .args([
            "sim",
            "run",
            scenario,
            "--set",
            "run.duration=\"20000 s\"",
            "--out",
            "full",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(
        std::fs::read(d.join("full/results.json")).unwrap(),
        std::fs::read(d.join("merged/results.json")).unwrap()
    );
}

/// `sim calibrate --json`: the fit as one JSON object in base units, and the profile it
/// writes reads back with the same numbers (a short fit: few setups per evaluation).
#[test]
fn calibrate_prints_its_fit_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fit.toml");
    let line3 = repo().join("topologies/line3.toml");
    let o = atmlab(
        &[
            "sim",
            "calibrate",
            "--json",
            "--calls",
            "200",
            "--topology",
            line3.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let latency = v["latency_s"].as_f64().expect("latency_s");
    let p = v["stall_probability"].as_f64().expect("stall_probability");
    assert!(latency > 0.0 && latency < 0.02, "{v}");
    assert!((0.0..1.0).contains(&p), "{v}");
    assert_eq!(v["out"], out.to_str().unwrap());
    let back = atmlab_models::control::CostProfile::from_file(&out).unwrap();
    assert!(
        (back.latency.as_secs_f64() - latency).abs() < 1e-9,
        "{back:?}"
    );
}

/// `sim measure-costs --json`: the measured profile as one JSON object on stdout (the
/// progress on stderr), the same as the file it writes.
#[test]
#[ignore = "heavy tier (scripts/test.sh): a live lab measured one operation at a time"]
fn measure_costs_prints_the_profile_as_json() {
    let _cpu = crate::common::measuring_alone();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.toml");
    let o = atmlab(
        &[
            "--data",
            dir.path().join("data").to_str().unwrap(),
            "sim",
            "measure-costs",
            "--insecure",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["name"], "measured", "{v}");
    assert_eq!(v["out"], out.to_str().unwrap());
    let file: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        v["per_command"].as_str(),
        file["per_command"].as_str(),
        "{v}"
    );
}

/// Issue 23, items 1 and 3: the crash-restart scenario (a switch server and then the
/// manager crash and restart) gives the same results, byte for byte, on 1 and 2
/// threads; with recovery the leak audit after the run finds nothing, without it the
/// crashed manager's connections and reservations stay at the switches.
#[test]
fn crash_restart_recovers_alike_on_any_thread_count() {
    let file = repo().join("scenarios/control/crash-restart.toml");
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (dir, threads) in dirs.iter().zip(["1", "2"]) {
        let o = atmlab(
            &[
                "sim",
                "run",
                file.to_str().unwrap(),
                "--out",
                dir.path().to_str().unwrap(),
                "--threads",
                threads,
                "--set",
                "run.duration=\"45 s\"",
                "--replications",
                "2",
            ],
            b"",
        );
        assert!(o.status.success(), "{}", text(&o).1);
    }
    let read = |d: &tempfile::TempDir| std::fs::read(d.path().join("results.json")).unwrap();
    assert_eq!(
        read(&dirs[0]),
        read(&dirs[1]),
        "results.json differs between 1 and 2 threads"
    );
    let results: serde_json::Value = serde_json::from_slice(&read(&dirs[0])).unwrap();
    let mean = |p: usize, m: &str| {
        results["points"][p]["metrics"][m]["mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("point {p} has no {m}: {results}"))
    };
    // Point 0: recovery = true; point 1: the ablation.
    assert_eq!(mean(0, "crashes"), 2.0);
    assert!(mean(0, "crash_calls_recovered") > 50.0);
    for m in ["leaked_calls", "leaked_connections", "leaked_reservations"] {
        assert_eq!(mean(0, m), 0.0, "{m} with recovery");
    }
    assert!(mean(1, "leaked_connections") > 50.0);
    assert!(mean(1, "leaked_reservations") > 0.0);
}
