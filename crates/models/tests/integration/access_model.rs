//! The `access` model kind (paper 003, Figure 5): sanity against cases with known answers.

use atmlab_sim::runner::{self, RunOptions, RunReport};
use atmlab_sim::scenario::Scenario;

fn run(params: &str, run: &str) -> RunReport {
    let text = format!("model = \"access\"\n[run]\n{run}\n[params]\n{params}\n");
    let scn = Scenario::parse("access.toml", &text, &[]).unwrap();
    runner::run(
        &scn,
        atmlab_models::model_kind("access").unwrap(),
        &RunOptions::default(),
    )
    .unwrap()
}

fn m(r: &RunReport, name: &str) -> f64 {
    r.points[0]
        .metrics
        .iter()
        .find(|(n, _)| n == name)
        .unwrap()
        .1
        .mean
}

const RUN: &str = "duration = \"2000 s\"\nwarmup = \"100 s\"\nreplications = 4\nseed = 5";

#[test]
fn cbr_at_the_credit_rate_passes_undelayed() {
    let r = run(
        "source = { kind = \"cbr\", rate = \"60 /s\" }\nmechanism = { kind = \"leaky_bucket\", rate = \"60 /s\", pool = 1 }",
        RUN,
    );
    // Not exactly zero: the source's period (from its origin) and the bucket's credit
    // interval (added credit by credit) are each rounded to the picosecond, so over the
    // 120,000 credits of a run they drift apart by a fraction of a picosecond per credit,
    // and a cell now and then arrives a few picoseconds before its credit.
    assert!(m(&r, "mean_delay") < 1e-7, "{}", m(&r, "mean_delay"));
    assert!(m(&r, "max_jitter") < 1e-6, "{}", m(&r, "max_jitter"));
    assert!(m(&r, "mean_occupancy") < 1e-5);
    assert_eq!(m(&r, "loss_probability"), 0.0);
}

#[test]
fn no_mechanism_only_the_link_delays() {
    // Poisson at 1000 cells/s on a 150 Mb/s link (2.83 us per cell): waits are rare and
    // shorter than a few cell times.
    let r = run(
        "source = { kind = \"poisson\", rate = \"1000 /s\" }\nmechanism = { kind = \"none\" }",
        RUN,
    );
    assert!(m(&r, "mean_delay") < 1e-8, "{}", m(&r, "mean_delay"));
    assert!(m(&r, "delay_p99") < 3e-6);
}

#[test]
fn leaky_bucket_obeys_littles_law() {
    // Voice through a Leaky Bucket at C = 1.4: every cell leaves, so the mean number
    // waiting must equal the throughput (60 cells/s) times the mean wait (L = lambda W).
    let r = run(
        "source = { kind = \"onoff\", peak = \"167 /s\", mean = \"60 /s\", burst = 60 }\nmechanism = { kind = \"leaky_bucket\", rate = \"60 /s\", pool = 60, c = 1.4 }",
        "duration = \"20100 s\"\nwarmup = \"100 s\"\nreplications = 8\nseed = 2",
    );
    let (l, w) = (m(&r, "mean_occupancy"), m(&r, "mean_delay"));
    assert!(w > 0.05, "voice bursts must wait for credits, got {w}");
    assert!(
        (l - 60.0 * w).abs() < 0.05 * l,
        "L = {l}, lambda W = {}",
        60.0 * w
    );
    assert_eq!(m(&r, "loss_probability"), 0.0);
}

#[test]
fn virtual_clock_drops_an_overrunning_source() {
    let r = run(
        "source = { kind = \"cbr\", rate = \"120 /s\" }\nmechanism = { kind = \"virtual_clock\", rate = \"60 /s\", interval = \"100 ms\", penalty = \"drop\" }",
        RUN,
    );
    let loss = m(&r, "loss_probability");
    assert!(
        (0.4..0.6).contains(&loss),
        "a source at twice AR loses about half, got {loss}"
    );
}

#[test]
fn unbuilt_and_bad_choices_are_refused() {
    let kind = atmlab_models::model_kind("access").unwrap();
    let check = |params: &str, run: &str, want: &str| {
        let text = format!("model = \"access\"\n[run]\n{run}\n[params]\n{params}\n");
        let scn = Scenario::parse("a.toml", &text, &[]).unwrap();
        let e = runner::prepare(&scn, kind)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains(want), "{e}");
    };
    let src = "source = { kind = \"cbr\", rate = \"60 /s\" }";
    check(
        &format!("{src}\nmechanism = {{ kind = \"rdma\" }}"),
        RUN,
        "not built yet",
    );
    check(
        &format!("{src}\nmechanism = {{ kind = \"none\" }}"),
        "count = 10",
        "run.count",
    );
    check(
        &format!("{src}\nmechanism = {{ kind = \"leaky_bucket\", rate = \"60 /s\", pool = 0 }}"),
        RUN,
        "params.mechanism.pool",
    );
    check(
        &format!(
            "{src}\nmechanism = {{ kind = \"leaky_bucket\", rate = \"60 /s\", pool = 5, c = 0.5 }}"
        ),
        RUN,
        "params.mechanism.c",
    );
}
