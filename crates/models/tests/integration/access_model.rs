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
fn rdma_voice_waits_at_most_one_cycle() {
    // The paper's voice band (1.9e-2 us of 125 us): every cell waits for the next band
    // opening, so its delay lies in [0, 125 us) and averages about half a cycle; the
    // largest delay increase is nearly a whole cycle (a cell just after the band,
    // following one that went at once).
    let r = run(
        "source = { kind = \"onoff\", peak = \"167 /s\", mean = \"60 /s\", burst = 60 }\nmechanism = { kind = \"rdma\", band = \"0.0192 us\" }",
        RUN,
    );
    let d = m(&r, "mean_delay");
    assert!((50e-6..75e-6).contains(&d), "{d}");
    assert!(m(&r, "delay_p99") < 125e-6);
    let j = m(&r, "max_jitter");
    assert!((100e-6..125e-6).contains(&j), "{j}");
    assert_eq!(m(&r, "loss_probability"), 0.0);
}

#[test]
fn leaky_bucket_max_jitter_is_bounded_by_the_credit_interval() {
    // The paper: "the maximal jitter for Leaky Bucket corresponds to the inter-credit
    // arrival time". A delay grows by at most one credit interval less the gap to the
    // previous cell, and our talkspurts space cells 1/167 s apart: at most
    // 1/72 - 1/167 s, which the long run reaches.
    let r = run(
        "source = { kind = \"onoff\", peak = \"167 /s\", mean = \"60 /s\", burst = 60 }\nmechanism = { kind = \"leaky_bucket\", rate = \"60 /s\", pool = 60, c = 1.2 }",
        RUN,
    );
    let j = m(&r, "max_jitter");
    let bound = 1.0 / 72.0 - 1.0 / 167.0;
    assert!(j <= bound + 1e-9 && j > 0.95 * bound, "{j}");
    assert!(
        m(&r, "max_abs_jitter") > 0.1,
        "silences make large decreases"
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
        "params.mechanism.band",
    );
    check(
        &format!("{src}\nmechanism = {{ kind = \"rdma\", band = \"1 us\", mode = \"+-\" }}"),
        RUN,
        "params.mechanism.mode",
    );
    check(
        &format!("{src}\nmechanism = {{ kind = \"rdma\", band = \"1 us\", c = 1.2 }}"),
        RUN,
        "params.mechanism.c",
    );
    check(
        &format!("{src}\nmechanism = {{ kind = \"rdma\", band = \"200 us\" }}"),
        RUN,
        "ends after the cycle",
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

/// Issue 22's acceptance for paper 003: with the Virtual Clock at a bound B (the paper's
/// reading: a penalized cell is held until it would pass the check, for at most B, and
/// never dropped) the `access` model loses no cell, and its largest delay change between
/// consecutive cells is B within 2% (the paper: Virtual Clock's maximal jitter "is due to
/// the maximal penalty delay"), for the voice and the video source and C = 1, 1.1, 1.2.
///
/// Voice reaches B as a fall: a cell held the full B followed, after a silence, by one
/// that passes at once (the increase stays below B: a check fails at most N cells after
/// the flow was within AI of its rate). Video reaches B when each frame's cells come
/// together (`spread = false`): a frame's burst puts the clock B + AI ahead within one
/// check. With the cells spread evenly over the frame the flow's lead grows slowly and
/// the largest change stays well below B; that case is checked for no loss and the
/// bound only.
#[test]
fn virtual_clock_at_its_bound_loses_nothing_and_its_max_jitter_is_the_bound() {
    let voice = "source = { kind = \"onoff\", peak = \"167 /s\", mean = \"60 /s\", burst = 60 }";
    let voice_vc = "rate = \"60 /s\", interval = \"360 ms\"";
    let video_vc = "rate = \"10156 /s\", interval = \"33 ms\"";
    let voice_run = "duration = \"10100 s\"\nwarmup = \"100 s\"\nreplications = 1\nseed = 3";
    let video_run = "duration = \"61 s\"\nwarmup = \"1 s\"\nreplications = 1\nseed = 3";
    let cases = [
        (voice, voice_vc, 0.65, voice_run, true),
        (
            "source = { kind = \"video\", spread = false }",
            video_vc,
            0.033,
            video_run,
            true,
        ),
        (
            "source = { kind = \"video\" }",
            video_vc,
            0.033,
            video_run,
            false,
        ),
    ];
    for (source, vc, b, run_cfg, reaches) in cases {
        for c in [1.0, 1.1, 1.2] {
            let r = run(
                &format!(
                    "{source}\nmechanism = {{ kind = \"virtual_clock\", {vc}, max_delay = \"{b} s\", c = {c} }}"
                ),
                run_cfg,
            );
            assert_eq!(m(&r, "loss_probability"), 0.0, "{source} C={c}");
            let j = m(&r, "max_abs_jitter");
            // The link adds at most a cell time or two to a held cell's delay.
            assert!(
                j <= 1.02 * b,
                "{source} C={c}: max jitter {j} s, bound {b} s"
            );
            if reaches {
                assert!(
                    j >= 0.98 * b,
                    "{source} C={c}: max jitter {j} s, bound {b} s"
                );
            } else {
                assert!(j < 0.6 * b, "{source} C={c}: spread cells reach {j} s");
            }
            assert!(m(&r, "max_jitter") < b, "{source} C={c}");
        }
    }
}

/// The penalty options parse to what they say: `"hold"` (the default with `max_delay`)
/// loses nothing, `"drop_beyond"` (the former reading) drops a source twice its rate.
#[test]
fn virtual_clock_penalty_options() {
    let src = "source = { kind = \"cbr\", rate = \"120 /s\" }";
    let vc =
        "kind = \"virtual_clock\", rate = \"60 /s\", interval = \"100 ms\", max_delay = \"200 ms\"";
    let loss = |penalty: &str| {
        m(
            &run(&format!("{src}\nmechanism = {{ {vc}{penalty} }}"), RUN),
            "loss_probability",
        )
    };
    assert_eq!(loss(""), 0.0);
    assert_eq!(loss(", penalty = \"hold\""), 0.0);
    let dropped = loss(", penalty = \"drop_beyond\"");
    assert!((0.4..0.6).contains(&dropped), "{dropped}");
}
