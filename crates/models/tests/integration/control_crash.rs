//! The `control` model's crash metrics through the engine (issue 23 item 3): a point
//! reports them only when its plane has crashes (`ModelKind::conditional_metrics`), so
//! the results of a scenario without crashes are as they were before crashes existed;
//! with crashes they follow the other metrics, in `CRASH_METRICS`' order.

use atmlab_models::control::crash::CRASH_METRICS;
use atmlab_sim::runner::{self, RunOptions, RunReport};
use atmlab_sim::scenario::Scenario;

/// A short run of the line of three switches with `faults`; `run_extra` sets the
/// replications or batches.
fn run(faults: &str, run_extra: &str) -> Result<RunReport, String> {
    let text = format!(
        r#"
model = "control"
[run]
duration = "8 s"
warmup = "0 s"
seed = 5
{run_extra}
[params]
topology = "{}/../../topologies/line3.toml"
manager = {{ kind = "xbind", threshold = 4, flush = "10 ms" }}
arrival = {{ kind = "poisson", rate = "50 /s" }}
holding = {{ kind = "exponential", mean = "1 s" }}
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
{faults}
"#,
        env!("CARGO_MANIFEST_DIR")
    );
    let scn = Scenario::parse("test.toml", &text, &[]).map_err(|e| e.to_string())?;
    let kind = atmlab_models::model_kind(&scn.model).unwrap();
    runner::run(
        &scn,
        kind,
        &RunOptions {
            threads: 1,
            progress: None,
        },
    )
    .map_err(|e| e.to_string())
}

fn names(r: &RunReport) -> Vec<String> {
    r.points[0].metrics.iter().map(|(n, _)| n.clone()).collect()
}

#[test]
fn crash_metrics_appear_only_with_crashes() {
    let kind = atmlab_models::model_kind("control").unwrap();
    let all = kind.metrics();
    let plain = run("faults = { loss = 0.01 }", "replications = 2").unwrap();
    assert_eq!(names(&plain), all[..all.len() - CRASH_METRICS.len()]);
    let crashed = run(
        r#"faults = { crashes = [{ node = "s2", at = "3 s", down = "100 ms" }] }"#,
        "replications = 2",
    )
    .unwrap();
    assert_eq!(names(&crashed), all);
    let crashes = crashed.points[0]
        .metrics
        .iter()
        .find(|(n, _)| n == "crashes")
        .unwrap()
        .1;
    assert_eq!((crashes.mean, crashes.n), (1.0, 2));
    // Batch means would give one crash count per batch: refused.
    let err = run(
        r#"faults = { crashes = [{ node = "s2", at = "3 s", down = "100 ms" }] }"#,
        "replications = 1\nbatches = 4",
    )
    .unwrap_err();
    assert!(err.contains("not batches"), "{err}");
}
