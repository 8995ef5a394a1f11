//! The simulated control plane against theory and against its calibration: blocking on a
//! trunk is Erlang-B's; one call at a time, the paper-000 profile gives the paper's
//! sequential setup time; a run is a function of its seed.

use atmlab_core::time::Duration;
use atmlab_sim::model::Replication;
use atmlab_sim::scenario::{Params, RunLength, Warmup};

use atmlab_control::cm::dimension::erlang_b;

use super::ControlConfig;

fn line3() -> String {
    format!("{}/../../topologies/line3.toml", env!("CARGO_MANIFEST_DIR"))
}

pub(super) fn config(params: &str) -> ControlConfig {
    let text = format!("topology = {:?}\n{params}", line3());
    let table: toml::Table = toml::from_str(&text).expect("test parameters parse");
    let p = Params::new("test.toml", &table);
    let c = ControlConfig::from_params(&p).expect("valid parameters");
    p.finish().expect("every key read");
    c
}

fn run(c: &ControlConfig, seconds: u64, warmup: u64, replication: u32) -> Vec<(&'static str, f64)> {
    c.run_replication(&Replication {
        seed: 7,
        replication,
        length: RunLength::Duration(Duration::from_secs(seconds)),
        warmup: Warmup::Time(Duration::from_secs(warmup)),
        batches: 1,
    })
    .expect("the run completes")
    .metrics
}

/// The metric `name` of a replication's metrics (shared with the crash tests).
pub(super) fn metric(m: &[(&'static str, f64)], name: &str) -> f64 {
    m.iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no {name} in {m:?}"))
}

/// The switches admit 12 calls per port (1,250 cells/s of 100 cells/s calls), every call
/// crosses the same three ports, so the path is a trunk of 12 circuits: blocking is
/// Erlang-B's at the offered load (arrival rate x holding time, the setup being tiny with
/// the `fast` costs). Admission control at the switches decides, not the route object.
#[test]
fn blocking_on_a_trunk_is_erlang_b() {
    let c = config(
        r#"
capacity = "1250 cells/s"
manager = { kind = "xbind" }
arrival = { kind = "poisson", rate = "112.5 /s" }
holding = { kind = "exponential", mean = "80 ms" }
pcr = "100 /s"
pairs = ["a:b"]
profile = "fast"
"#,
    );
    let samples: Vec<f64> = (0..5)
        .map(|r| metric(&run(&c, 200, 5, r), "blocking_probability"))
        .collect();
    let e = atmlab_sim::stats::Estimate::from_samples(&samples);
    let theory = erlang_b(112.5 * 0.080, 12);
    assert!(
        (e.mean - theory).abs() <= e.ci95.max(0.004),
        "blocking {} ± {} against Erlang-B {theory}",
        e.mean,
        e.ci95
    );
}

/// `paper-000` at its four one-at-a-time figures (the profile's fitted numbers are what
/// `atmlab sim calibrate` gives for them): the sequential manager's setup, 23.4 ms mean,
/// 5% 20.5 ms, 95% 31.0 ms (§III-B), and xbind's 11.0 ms at 1 call/s (§IV).
#[test]
fn paper_000_gives_the_papers_one_at_a_time_setups() {
    use super::calibrate::{Fit, one_at_a_time};
    let p = super::CostProfile::named("paper-000").unwrap();
    let fit = Fit {
        latency: p.latency,
        oneway: p.oneway,
        stall_probability: p.stall_probability,
        stall_mean: p.stall_mean,
    };
    let topology = std::path::PathBuf::from(line3());
    let seq = one_at_a_time(&topology, "paper-000", false, &fit, 5000).unwrap();
    let ms = |x: f64| x * 1e3;
    assert!((ms(seq.mean) - 23.4).abs() < 0.01 * 23.4, "{seq:?}");
    assert!((ms(seq.p5) - 20.5).abs() < 0.3, "{seq:?}");
    assert!((ms(seq.p95) - 31.0).abs() < 0.5, "{seq:?}");
    let xbind = one_at_a_time(&topology, "paper-000", true, &fit, 5000).unwrap();
    assert!((ms(xbind.mean) - 11.0).abs() < 0.02 * 11.0, "{xbind:?}");
}

// That the profile's constants are the fit of those four figures (`atmlab sim calibrate`'s
// defaults) is checked by the README walk (crates/cli/tests/integration/readme.rs), which
// runs the README's calibrate example and compares what it writes with `paper-000`.

/// One call at a time through the paper's testbed (three switch servers), the
/// synchronous sequential manager under `paper-000` takes the paper's 23.4 ms on average
/// (§III-B), the figure the profile was fitted to, and counts the invocations it makes.
#[test]
fn paper_000_one_at_a_time_is_the_papers_sequential_setup() {
    let c = config(
        r#"
manager = { kind = "sequential" }
arrival = { kind = "poisson", rate = "0.2 /s" }
holding = { kind = "deterministic", mean = "10 ms" }
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
"#,
    );
    let m = run(&c, 1000, 1, 0);
    let mean_ms = metric(&m, "mean_setup_latency") * 1e3;
    assert!((mean_ms - 23.4).abs() < 0.01 * 23.4, "{mean_ms} ms");
    assert_eq!(metric(&m, "blocking_probability"), 0.0);
    // Counted, not assumed: 10 exchanges per setup (the user's call, QoS, route, the
    // source's identifier, a reserve and a commit per switch) and 5 for the release
    // (the user's call and the core's four release commands, one a message).
    let inv = metric(&m, "invocations_per_call");
    assert!((inv - 15.0).abs() < 0.05, "{inv} invocations per call");
}

/// The same seed gives the same numbers; another replication gives others.
#[test]
fn a_run_is_a_function_of_its_seed() {
    let c = config(
        r#"
manager = { kind = "xbind", threshold = 4, flush = "10 ms" }
arrival = { kind = "poisson", rate = "100 /s" }
holding = { kind = "exponential", mean = "80 ms" }
pcr = "100 /s"
pairs = ["a:b", "b:a"]
profile = "paper-000"
"#,
    );
    let a = run(&c, 20, 1, 0);
    assert_eq!(a, run(&c, 20, 1, 0));
    assert_ne!(a, run(&c, 20, 1, 1));
    assert!(metric(&a, "setups_per_s") > 50.0, "{a:?}");
    assert!(metric(&a, "cache_hit_ratio") > 0.5, "{a:?}");
}

/// Bad parameters name the key.
#[test]
fn bad_parameters_name_their_key() {
    let e = refused(r#"{ kind = "xbind" }"#, "a:zz", "fast");
    assert!(e.contains("params.pairs") && e.contains("zz"), "{e}");
}

/// The error of a scenario on the line with these manager, pairs and profile, which
/// must be refused.
fn refused(manager: &str, pair: &str, profile: &str) -> String {
    let text = format!(
        "topology = {:?}\nmanager = {manager}\narrival = {{ kind = \"poisson\", rate = \"1 /s\" }}\nholding = {{ kind = \"exponential\", mean = \"1 s\" }}\npcr = \"1 /s\"\npairs = [{pair:?}]\nprofile = {profile:?}\n",
        line3()
    );
    let table: toml::Table = toml::from_str(&text).unwrap();
    ControlConfig::from_params(&Params::new("t.toml", &table))
        .unwrap_err()
        .to_string()
}

/// §IV-A: the identifiers in use at a cache (taken at a call's arrival, back when its
/// commit is answered) form an M/G/∞ queue under Poisson calls, so their number is
/// Poisson: its variance equals its mean. The stalls and the queueing at the manager
/// (`paper-000`, 10 calls/s, the paper's low load) make the replacement latencies vary;
/// the law holds while they are nearly independent. With more load, calls that arrive
/// together wait together and N_v is over-dispersed (1.06 at 20 calls/s, about 1.4 at
/// 60): the high-load rows of the simulated Fig. 9.
#[test]
fn identifiers_in_use_are_poisson() {
    let c = config(
        r#"
manager = { kind = "xbind", threshold = 1, flush = "10 ms" }
arrival = { kind = "poisson", rate = "10 /s" }
holding = { kind = "exponential", mean = "500 ms" }
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
"#,
    );
    let runs: Vec<_> = (0..4).map(|r| run(&c, 60, 2, r)).collect();
    let dispersion = atmlab_sim::stats::Estimate::from_samples(
        &runs
            .iter()
            .map(|m| metric(m, "nv_dispersion"))
            .collect::<Vec<_>>(),
    );
    let mean = atmlab_sim::stats::Estimate::from_samples(
        &runs
            .iter()
            .map(|m| metric(m, "nv_mean"))
            .collect::<Vec<_>>(),
    );
    // The mean is λ x the replacement latency (about 7 ms): not none.
    assert!(mean.mean > 0.03, "N_v mean {mean:?}");
    assert!(
        (dispersion.mean - 1.0).abs() <= dispersion.ci95.max(0.05),
        "index of dispersion {dispersion:?} (Poisson: 1)"
    );
}

/// §IV-A, Fig. 9: not only the variance, the whole law. At a light load (`paper-000`,
/// 40 calls/s, T = 5, one replication of 120 s, about 4,800 arrivals), P{N_v <= x} as
/// the arriving calls found it lies within 0.01 of the Poisson law with the same mean
/// where that law exceeds 0.9 (the paper's region of interest), and within 0.03
/// everywhere (batches of T leave together, which makes N_v a little less spread than
/// Poisson at its low values). The gap is computed here from the CDF metrics and
/// checked against the model's own `nv_poisson_gap`.
#[test]
fn identifiers_in_use_follow_the_poisson_law() {
    let c = config(
        r#"
manager = { kind = "xbind", threshold = 5, flush = "1 s", cache_fill = 256, cache_low = 64, cache_max = 2048 }
arrival = { kind = "poisson", rate = "40 /s" }
holding = { kind = "exponential", mean = "500 ms" }
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
"#,
    );
    let m = run(&c, 120, 2, 0);
    let mean = metric(&m, "nv_arrival_mean");
    // A few tenths of an identifier at once: the law's shape is tested, not a point mass.
    assert!(mean > 0.2 && mean < 2.0, "N_v mean at arrivals {mean}");
    let cdf: Vec<f64> = (0..super::CDF_POINTS)
        .map(|x| metric(&m, &format!("nv_cdf_{x}")))
        .collect();
    assert!(cdf.windows(2).all(|w| w[0] <= w[1]), "{cdf:?}");
    let (mut gap, mut region_gap) = (0.0f64, 0.0f64);
    for (x, &p) in cdf.iter().enumerate() {
        let poisson = atmlab_control::cm::dimension::poisson_cdf(mean, x);
        gap = gap.max((p - poisson).abs());
        if poisson > 0.9 {
            region_gap = region_gap.max((p - poisson).abs());
        }
    }
    assert!(
        gap < 0.03,
        "largest gap {gap}: {cdf:?} against Poisson({mean})"
    );
    assert!(region_gap < 0.01, "gap where P > 0.9: {region_gap}");
    let model_gap = metric(&m, "nv_poisson_gap");
    assert!(
        (model_gap - region_gap).abs() < 1e-12,
        "{model_gap} against {region_gap}"
    );
    // Every call hits a cache this large: the hit ratio is 1. Each call sends its three
    // switch servers a commit and a release apiece, T = 5 commands to a message (a
    // switch's batch fills in about 60 ms, well inside the 1 s flush): about 6/5
    // messages a call, Fig. 10's k/T per operation.
    assert_eq!(metric(&m, "cache_hit_ratio"), 1.0);
    let messages = metric(&m, "switch_messages_per_call");
    assert!(
        (messages - 1.2).abs() < 0.05,
        "{messages} messages per call"
    );
}

/// 5% of the messages between the manager and the switches lost, and up to 5 ms of extra
/// delay on each: the core re-sends what was lost (the switches answer a repeated
/// request once), every call is set up or refused cleanly, and once the calls end no
/// connection and no bandwidth is left on any switch.
/// §IV-A's second reading: releases that ride count not toward T, so setups alone fill
/// the batches. At T = 5 the three switch servers then get about 3/5 messages a call
/// (against 6/5 when releases count), and each commit waits for more setups, so N_v
/// (λ times the wait) grows. A rule that is neither "count" nor "ride" is refused by name.
#[test]
fn releases_that_ride_leave_setups_to_fill_the_batches() {
    let scenario = |releases: &str| {
        config(&format!(
            r#"
manager = {{ kind = "xbind", threshold = 5, flush = "1 s", cache_fill = 256, cache_low = 64, cache_max = 2048, releases = "{releases}" }}
arrival = {{ kind = "poisson", rate = "40 /s" }}
holding = {{ kind = "exponential", mean = "500 ms" }}
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
"#
        ))
    };
    let count = run(&scenario("count"), 60, 2, 0);
    let ride = run(&scenario("ride"), 60, 2, 0);
    let messages = |m: &[(&'static str, f64)]| metric(m, "switch_messages_per_call");
    assert!(
        (messages(&count) - 1.2).abs() < 0.05,
        "{}",
        messages(&count)
    );
    assert!((messages(&ride) - 0.6).abs() < 0.03, "{}", messages(&ride));
    let nv = |m: &[(&'static str, f64)]| metric(m, "nv_arrival_mean");
    assert!(
        nv(&ride) > 1.3 * nv(&count),
        "{} against {}",
        nv(&ride),
        nv(&count)
    );
    // Every call set up was released: riding delays a release, it never loses one.
    assert_eq!(metric(&ride, "failure_probability"), 0.0);

    let e = refused(
        r#"{ kind = "xbind", releases = "later" }"#,
        "a:b",
        "paper-000",
    );
    assert!(e.contains("releases") && e.contains("later"), "{e}");
}

#[test]
fn lost_messages_are_recovered_and_nothing_leaks() {
    let c = config(
        r#"
manager = { kind = "xbind", threshold = 4, flush = "10 ms" }
arrival = { kind = "poisson", rate = "100 /s" }
holding = { kind = "exponential", mean = "200 ms" }
pcr = "100 /s"
pairs = ["a:b", "b:a"]
profile = "paper-000"
faults = { loss = 0.05, delay = "5 ms" }
"#,
    );
    assert!((c.faults.loss - 0.05).abs() < 1e-12);
    let ((calls, connections, allocated), r) = c.run_and_drain(30, 0).unwrap();
    let m = &r.metrics;
    assert!(metric(m, "setups_per_s") > 80.0, "{m:?}");
    // Lost commands cost a re-send after the command time-out (2 s): some setups wait.
    assert!(metric(m, "p99_setup_latency") > 1.0, "{m:?}");
    assert_eq!((calls, connections), (0, 0), "calls or connections left");
    assert!(allocated.abs() < 1e-9, "{allocated} cells/s left allocated");
    // The same run without faults leaves nothing either, and never waits a time-out.
    let mut clean = c.clone();
    clean.faults = super::Faults::default();
    let ((calls, connections, allocated), r) = clean.run_and_drain(30, 0).unwrap();
    assert_eq!((calls, connections), (0, 0));
    assert!(allocated.abs() < 1e-9);
    assert!(
        metric(&r.metrics, "p99_setup_latency") < 0.5,
        "{:?}",
        r.metrics
    );
}

/// The live machine's structure (`colocated`, `links`, `cpus`): one call at a time, with
/// only `per_message` costing anything (m), a setup is the manager's link marshalling
/// the commit (m), the switch unmarshalling it and marshalling its answer (2m), and the
/// link unmarshalling that (m): 4m when the three switches' work runs side by side on
/// processors of their own, 12m when one processor does it all in turn.
#[test]
fn shared_processors_serialise_the_switches_work() {
    let setup = |cpus: u32| lone_messages(cpus, "");
    let (own, one) = (setup(0), setup(1));
    assert!(
        (own - 0.4).abs() < 0.004,
        "{own} ms with a processor per server"
    );
    assert!(
        (one - 1.2).abs() < 0.012,
        "{one} ms on one shared processor"
    );
}

// ----- TINA's performers (paper 001) ---------------------------------------------------

fn chain3() -> String {
    format!(
        "{}/../../topologies/chain3.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn tina_config(manager: &str, pairs: &str, profile: &str, extra: &str) -> ControlConfig {
    let text = format!(
        "topology = {:?}\nmanager = {manager}\narrival = {{ kind = \"poisson\", rate = \"0.5 /s\" }}\nholding = {{ kind = \"deterministic\", mean = \"10 ms\" }}\npcr = \"100 /s\"\npairs = [{pairs:?}]\nprofile = {profile:?}\n{extra}",
        chain3()
    );
    let table: toml::Table = toml::from_str(&text).expect("test parameters parse");
    let p = Params::new("test.toml", &table);
    let c = ControlConfig::from_params(&p).expect("valid parameters");
    p.finish().expect("every key read");
    c
}

/// The setup time of one TINA call alone in the network, sequential, one NML-CP level
/// (Alcin's shape), from the profile and a count of the steps, made here from the
/// performers' protocol and not from the model: the user's AddConnection, the route
/// object's query, LNC -> NML, one NML -> EML per switch, and per switch a Commit after
/// a Reserve of each identifier not given (the first switch reserves the source's VC
/// and its output, each later one only its output, the previous one's being its input).
/// Each remote invocation is a request and an answer on the wire, marshalled and
/// unmarshalled at both ends; every input a performer handles costs it one step.
fn sequential_setup_by_hand(p: &super::CostProfile, switches: u64) -> f64 {
    let s = |d: Duration| d.as_secs_f64();
    let m = s(p.per_message) + s(p.per_command);
    let wire = 2.0 * s(p.latency);
    // The user's call: on the wire both ways, (un)marshalled by the LNC only.
    let user = wire + 2.0 * m;
    let invocation = wire + 4.0 * m;
    let route = invocation + s(p.route_work);
    let performer_calls = 1 + switches;
    let switch_commands = 2 * switches + 1;
    let command = invocation + s(p.switch_per_command);
    // Steps: the LNC's three (the request, the route, the root's answer); the NML-CP's
    // request and each child's answer; each EML-CP's request and each command's answer.
    let steps = 3 + (1 + switches) + switches + switch_commands;
    user + route
        + performer_calls as f64 * invocation
        + switch_commands as f64 * command
        + steps as f64 * s(p.manager_step)
}

/// One call at a time, the simulated TINA setup is exactly the sum of its steps' costs
/// under the profile, over one switch and over three; and the invocations per call are
/// the protocol's: the setup's above plus the release's (the user's delete, LNC -> NML,
/// one NML -> EML and one Release per switch, and the source's VC given back).
#[test]
fn tina_one_at_a_time_is_the_sum_of_its_steps() {
    for profile in ["paper-001", "fast"] {
        let p = super::CostProfile::named(profile).unwrap();
        for (dest, l) in [("a:h1", 1u64), ("a:h3", 3)] {
            let c = tina_config(
                "{ kind = \"tina\", mode = \"sequential\", depth = 1 }",
                dest,
                profile,
                "",
            );
            let m = run(&c, 400, 1, 0);
            let want = sequential_setup_by_hand(&p, l);
            // No setup is faster than its steps; the mean is a little slower only by
            // the rare call that arrives while another's release is still running.
            let got = metric(&m, "mean_setup_latency");
            assert!(
                got >= want - 1e-12 && got <= want * 1.002,
                "{profile}, {l} switch(es): {got} s against {want} s by hand"
            );
            let p99 = metric(&m, "p99_setup_latency");
            assert!(p99 >= want * 0.999, "{p99} against {want}");
            assert_eq!(metric(&m, "blocking_probability"), 0.0);
            let setup = 3 * l + 4;
            let release = 2 * l + 3;
            let inv = metric(&m, "invocations_per_call");
            assert!(
                (inv - (setup + release) as f64).abs() < 0.05,
                "{profile}, {l}: {inv} invocations per call"
            );
        }
    }
}

/// Parallel setup over one switch is sequential setup (one run: nothing to overlap);
/// over three it reserves the two inner links' identifiers at once and then sets every
/// switch up at once, so it takes less than sequential setup but more than the one
/// switch (the extra round of link reservations); and it makes two invocations more per
/// setup (a ReserveLink and its Reserve per inner link, less the Reserves the EML-CPs no
/// longer make). A co-located EML-CP saves its NML -> EML round trip and counts none.
#[test]
fn tina_parallel_and_colocated_setups_order_as_the_paper_argues() {
    let latency = |manager: &str, pair: &str| {
        let m = run(&tina_config(manager, pair, "paper-001", ""), 200, 1, 0);
        (
            metric(&m, "mean_setup_latency"),
            metric(&m, "invocations_per_call"),
        )
    };
    let seq = "{ kind = \"tina\", mode = \"sequential\", depth = 1 }";
    let par = "{ kind = \"tina\", mode = \"parallel\", depth = 1 }";
    let (s1, si1) = latency(seq, "a:h1");
    let (p1, pi1) = latency(par, "a:h1");
    let (s3, si3) = latency(seq, "a:h3");
    let (p3, pi3) = latency(par, "a:h3");
    assert_eq!((s1, si1), (p1, pi1));
    assert!(p1 < p3 && p3 < s3, "{p1} {p3} {s3}");
    assert!((pi3 - si3 - 2.0).abs() < 0.05, "{pi3} against {si3}");
    let (c1, ci1) = latency(
        "{ kind = \"tina\", mode = \"sequential\", depth = 1, colocate = true }",
        "a:h1",
    );
    assert!(c1 < s1, "{c1} against {s1}");
    // One NML -> EML for the setup and one for the release no longer remote.
    assert!((si1 - ci1 - 2.0).abs() < 0.05, "{ci1} against {si1}");
}

/// The same seed gives the same numbers with any number of worker threads (the runner
/// runs replications in parallel); another replication gives others.
#[test]
fn tina_runs_are_a_function_of_their_seed_whatever_the_threads() {
    let text = format!(
        r#"model = "control"
[run]
duration = "20 s"
warmup = "1 s"
replications = 3
seed = 5
[params]
topology = {:?}
manager = {{ kind = "tina", mode = "parallel", depth = 2 }}
arrival = {{ kind = "poisson", rate = "40 /s" }}
holding = {{ kind = "exponential", mean = "100 ms" }}
pcr = "100 /s"
pairs = ["a:h1", "a:h3", "a:h2"]
profile = "paper-001"
"#,
        chain3()
    );
    let scn = atmlab_sim::scenario::Scenario::parse("tina.toml", &text, &[]).unwrap();
    let kind = crate::model_kind("control").unwrap();
    let run = |threads| {
        let r = atmlab_sim::runner::run(
            &scn,
            kind,
            &atmlab_sim::runner::RunOptions {
                threads,
                progress: None,
            },
        )
        .unwrap();
        r.points
            .iter()
            .map(|p| format!("{:?}", p.replications))
            .collect::<Vec<_>>()
    };
    let one = run(1);
    assert_eq!(one, run(3));
    let c = tina_config(
        "{ kind = \"tina\", mode = \"parallel\", depth = 2 }",
        "a:h3",
        "paper-001",
        "",
    );
    // Debug strings: the metrics without a cache are NaN, which equals nothing.
    let a = format!("{:?}", run_rep(&c, 0));
    assert_eq!(a, format!("{:?}", run_rep(&c, 0)));
    assert_ne!(a, format!("{:?}", run_rep(&c, 1)));
}

fn run_rep(c: &ControlConfig, replication: u32) -> Vec<(&'static str, f64)> {
    let mut c = c.clone();
    c.arrival_rate = 40.0;
    c.holding = super::Holding::Exponential(Duration::from_millis(100));
    run(&c, 20, 1, replication)
}

/// TINA's calls on a trunk of 12 circuits (chain3's ports admitting 1,250 cells/s, calls
/// of 100 cells/s, every call crossing the same ports): blocking is Erlang-B's, and it is
/// the switches' admission control that refuses (the route object's view is never
/// updated), each refusal rolled back through the performers without leaking.
#[test]
fn tina_blocking_on_a_trunk_is_erlang_b() {
    let text = format!(
        "topology = {:?}\ncapacity = \"1250 cells/s\"\nmanager = {{ kind = \"tina\", mode = \"parallel\", depth = 2 }}\narrival = {{ kind = \"poisson\", rate = \"112.5 /s\" }}\nholding = {{ kind = \"exponential\", mean = \"80 ms\" }}\npcr = \"100 /s\"\npairs = [\"a:h3\"]\nprofile = \"fast\"\n",
        chain3()
    );
    let table: toml::Table = toml::from_str(&text).unwrap();
    let c = ControlConfig::from_params(&Params::new("t.toml", &table)).unwrap();
    let samples: Vec<f64> = (0..5)
        .map(|r| metric(&run(&c, 200, 5, r), "blocking_probability"))
        .collect();
    let e = atmlab_sim::stats::Estimate::from_samples(&samples);
    let theory = erlang_b(112.5 * 0.080, 12);
    assert!(
        (e.mean - theory).abs() <= e.ci95.max(0.004),
        "blocking {} ± {} against Erlang-B {theory}",
        e.mean,
        e.ci95
    );
}

/// Blocked calls are rolled back through the performers (sequential and parallel,
/// one NML-CP level and two): once the calls end, no call is held, and no connection
/// and no bandwidth is left on any switch.
#[test]
fn tina_refusals_leave_nothing_behind() {
    for manager in [
        "{ kind = \"tina\", mode = \"parallel\", depth = 2 }",
        "{ kind = \"tina\", mode = \"sequential\", depth = 1 }",
    ] {
        let text = format!(
            "topology = {:?}\ncapacity = \"1250 cells/s\"\nmanager = {manager}\narrival = {{ kind = \"poisson\", rate = \"150 /s\" }}\nholding = {{ kind = \"exponential\", mean = \"80 ms\" }}\npcr = \"100 /s\"\npairs = [\"a:h3\", \"a:h2\", \"h1:h3\"]\nprofile = \"fast\"\n",
            chain3()
        );
        let table: toml::Table = toml::from_str(&text).unwrap();
        let c = ControlConfig::from_params(&Params::new("t.toml", &table)).unwrap();
        let (held, connections, allocated, blocking) = c.tina_run_and_drain(20).unwrap();
        assert!(
            blocking > 0.02,
            "{manager}: blocking {blocking}: the test needs refusals"
        );
        assert_eq!((held, connections), (0, 0), "{manager}");
        assert!(
            allocated.abs() < 1e-9,
            "{manager}: {allocated} cells/s left"
        );
    }
}

/// TINA takes no faults (its shell injects none) and names the key.
#[test]
fn tina_refuses_faults_and_bad_modes() {
    let base = format!(
        "topology = {:?}\narrival = {{ kind = \"poisson\", rate = \"1 /s\" }}\nholding = {{ kind = \"exponential\", mean = \"1 s\" }}\npcr = \"1 /s\"\npairs = [\"a:h1\"]\nprofile = \"fast\"\n",
        chain3()
    );
    for (extra, key) in [
        (
            "manager = { kind = \"tina\" }\nfaults = { loss = 0.1 }\n",
            "params.faults",
        ),
        (
            "manager = { kind = \"tina\", mode = \"both\" }\n",
            "params.manager.mode",
        ),
    ] {
        let table: toml::Table = toml::from_str(&format!("{base}{extra}")).unwrap();
        let e = ControlConfig::from_params(&Params::new("t.toml", &table)).unwrap_err();
        assert!(e.to_string().contains(key), "{e}");
    }
}

/// §IV-B's adaptive T at the paper's regions and costs: at 20 calls/s (T = 1's region) it
/// sets calls up as T = 1 does, at 150 calls/s (T = 10's region) it carries the load as T = 10
/// does; and bad regions name the key.
#[test]
fn adaptive_t_follows_the_arrival_rate() {
    let mean = |manager: &str, rate: f64| {
        let c = config(&format!(
            r#"
manager = {manager}
arrival = {{ kind = "poisson", rate = "{rate} /s" }}
holding = {{ kind = "exponential", mean = "500 ms" }}
pcr = "100 /s"
pairs = ["a:b"]
profile = "paper-000"
"#
        ));
        metric(&run(&c, 120, 10, 0), "mean_setup_latency")
    };
    for (rate, fixed) in [(20.0, 1), (150.0, 10)] {
        let a = mean(
            r#"{ kind = "xbind", flush = "1 s", adaptive = "paper" }"#,
            rate,
        );
        let f = mean(
            &format!(r#"{{ kind = "xbind", flush = "1 s", threshold = {fixed} }}"#),
            rate,
        );
        let other = mean(
            &format!(
                r#"{{ kind = "xbind", flush = "1 s", threshold = {} }}"#,
                if fixed == 1 { 10 } else { 1 }
            ),
            rate,
        );
        if fixed == 1 {
            // Light load: T = 1's latency; T = 10 waits for its flush.
            assert!(
                (a - f).abs() <= 0.1 * f,
                "at {rate}/s: adaptive {a} s, T = 1 {f} s"
            );
            assert!(
                other > 3.0 * a,
                "at {rate}/s: adaptive {a} s, T = 10 {other} s"
            );
        } else {
            // Past T = 1's saturation at these costs (about 100 calls/s; the manager
            // saturates near 200 calls/s with any T): adaptive carries the load as
            // T = 10 does (one replication's mean varies by tens of percent
            // here, so the bound is loose), where T = 1's backlog grows without end.
            assert!(a <= 1.5 * f, "at {rate}/s: adaptive {a} s, T = 10 {f} s");
            assert!(
                other > 3.0 * a,
                "at {rate}/s: adaptive {a} s, T = 1 {other} s"
            );
        }
    }
    let text = format!(
        "topology = {:?}\nmanager = {{ kind = \"xbind\", adaptive = {{ bounds = [100, 50], thresholds = [1, 4, 10] }} }}\narrival = {{ kind = \"poisson\", rate = \"1 /s\" }}\nholding = {{ kind = \"exponential\", mean = \"1 s\" }}\npcr = \"1 /s\"\npairs = [\"a:b\"]\nprofile = \"fast\"\n",
        line3()
    );
    let table: toml::Table = toml::from_str(&text).unwrap();
    let e = ControlConfig::from_params(&Params::new("t.toml", &table)).unwrap_err();
    assert!(e.to_string().contains("adaptive"), "{e}");
}

/// A call's QoS given as an application states it goes through the QoS mapper core at
/// each setup: a CBR QoS that maps to 100 cells/s runs exactly as `pcr = "100 /s"` (same
/// seed, same numbers), and one that maps to twice the cells admits half the calls on
/// the 12-circuit trunk, so it blocks more.
#[test]
fn a_users_qos_is_mapped_at_each_setup() {
    let with = |contract: &str| {
        config(&format!(
            r#"
capacity = "1250 cells/s"
manager = {{ kind = "xbind" }}
arrival = {{ kind = "poisson", rate = "112.5 /s" }}
holding = {{ kind = "exponential", mean = "80 ms" }}
{contract}
pairs = ["a:b"]
profile = "fast"
"#
        ))
    };
    let pcr = run(&with(r#"pcr = "100 /s""#), 30, 2, 0);
    // AAL5: 4,792 octets and the 8-octet trailer fill 100 cells exactly.
    let same = run(
        &with(r#"qos = { class = "cbr", frame_rate = "1 /s", frame_size = 4792, delay = "2 s" }"#),
        30,
        2,
        0,
    );
    assert_eq!(pcr, same);
    let double = run(
        &with(r#"qos = { class = "cbr", frame_rate = "1 /s", frame_size = 9592, delay = "2 s" }"#),
        30,
        2,
        0,
    );
    let (b1, b2) = (
        metric(&pcr, "blocking_probability"),
        metric(&double, "blocking_probability"),
    );
    assert!(
        b2 > 2.0 * b1 && b2 > 0.2,
        "200 cells/s calls block {b2}, 100 cells/s calls {b1}"
    );
}

/// A wake-up is a delay of the server that was idle, not work: one call at a time, with
/// every other cost zero, an xbind setup whose identifiers all come from the caches is
/// one round, and wakes five servers in turn (the manager for the request, the link out,
/// the switch server, the link back, the manager for the answers: the three switches'
/// chains run side by side), so it takes exactly five wake-ups; and the processors are
/// never held by it (a wake-up under a pool of one processor costs the same).
#[test]
fn a_wakeup_delays_an_idle_server_and_holds_no_processor() {
    for cpus in [1, 2] {
        let m = run(&lone_wakes(cpus, ""), 20, 1, 0);
        assert_eq!(metric(&m, "cache_hit_ratio"), 1.0);
        let mean = metric(&m, "mean_setup_latency");
        assert!((mean - 50e-6).abs() < 1e-12, "cpus {cpus}: {mean}");
        assert!((metric(&m, "p99_setup_latency") - 50e-6).abs() < 1e-12);
    }
}

/// Lone xbind calls (20 a second, each held 1 ms) whose only cost is a wake-up of 10 us,
/// on a pool of `cpus`, the profile's table ending with `more`.
fn lone_wakes(cpus: u32, more: &str) -> ControlConfig {
    config(&format!(
        r#"
manager = {{ kind = "xbind", threshold = 1, flush = "10 ms" }}
arrival = {{ kind = "poisson", rate = "20 /s" }}
holding = {{ kind = "deterministic", mean = "1 ms" }}
pcr = "10 /s"
pairs = ["a:b"]
profile = {{ base = "fast", latency = "0 us", per_message = "0 us", per_command = "0 us", switch_per_command = "0 us", manager_step = "0 us", route_work = "0 us", qos_work = "0 us", wakeup = "10 us", colocated = true, links = true, cpus = {cpus}{more} }}
"#
    ))
}

/// `idle_wake` is charged once per exchange that finds the machine quiet: lone calls
/// 50 ms apart on average (each after at least 1 ms of quiet but the 4% that come
/// within 2 ms of the last), the same five wake-ups as above plus the extra 30 us of the first only (the
/// manager's: the servers woken after it find the pool warm), and the call generator's
/// own work at the arrival does not make the pool warm.
#[test]
fn an_idle_wake_is_charged_to_the_first_wake_after_a_quiet() {
    for (cpus, client) in [(1, "0 us"), (2, "0 us"), (2, "5 us")] {
        let more = format!(
            r#", client_work = "{client}", idle_wake = {{ quiet = ["100 us", "1 ms"], extra = ["3 us", "30 us"] }}"#
        );
        let m = run(&lone_wakes(cpus, &more), 20, 1, 0);
        let mean = metric(&m, "mean_setup_latency");
        assert!(
            (metric(&m, "p99_setup_latency") - 80e-6).abs() < 1e-12,
            "cpus {cpus}"
        );
        assert!(
            mean > 79e-6 && mean <= 80e-6 + 1e-12,
            "cpus {cpus}, {client}: {mean}"
        );
    }
}

/// Several managers on disjoint partitions (paper 000 §II-C1): two xbind managers share
/// the switches, each reserving only from its half of every port's VCI range, the calls
/// dealt to them in turn. Every call is carried, nothing is refused for a clash of
/// identifiers (the partitions keep them apart), blocking on the 12-circuit trunk is
/// still Erlang-B's (the switches' admission control is shared), and when every call
/// has ended nothing is left on any switch.
#[test]
fn managers_on_partitions_share_the_switches() {
    let c = config(
        r#"
capacity = "1250 cells/s"
manager = { kind = "xbind", managers = 2 }
arrival = { kind = "poisson", rate = "112.5 /s" }
holding = { kind = "exponential", mean = "80 ms" }
pcr = "100 /s"
pairs = ["a:b"]
profile = "fast"
"#,
    );
    assert_eq!(c.manager.managers, 2);
    let samples: Vec<f64> = (0..4)
        .map(|r| {
            let m = run(&c, 150, 5, r);
            assert_eq!(metric(&m, "failure_probability"), 0.0);
            metric(&m, "blocking_probability")
        })
        .collect();
    let e = atmlab_sim::stats::Estimate::from_samples(&samples);
    let theory = erlang_b(112.5 * 0.080, 12);
    assert!(
        (e.mean - theory).abs() <= e.ci95.max(0.006),
        "blocking {} ± {} against Erlang-B {theory}",
        e.mean,
        e.ci95
    );
    let ((left, connections, allocated), r) = c.run_and_drain(20, 0).unwrap();
    assert_eq!(metric(&r.metrics, "failure_probability"), 0.0);
    assert_eq!((left, connections), (0, 0));
    assert!(allocated.abs() < 1e-9, "{allocated} cells/s left");
    // Each manager's part of the VCIs every port has (32-4095 on this topology).
    assert_eq!(
        super::shell::partitions(&c, 2).unwrap(),
        vec![Some((32, 2063)), Some((2064, 4095))]
    );
    assert_eq!(super::shell::partitions(&c, 1).unwrap(), vec![None]);
}

/// `coalesce`'s three readings of a message (`Reading`): on one shared processor under
/// load, charging `awake_message` (a message to an idle server while the processor
/// works) lengthens the setups over waiving it, and giving up `coalesce` altogether
/// (the messages in hand pay too) lengthens them more; with a processor per server the
/// pool is never busy, so `awake_message` changes nothing at all.
#[test]
fn a_message_to_an_idle_server_on_a_busy_processor_pays_awake_message() {
    let setup = |cpus: u32, coalesce: bool, awake: &str| {
        let c = config(&format!(
            r#"
manager = {{ kind = "xbind", threshold = 1, flush = "10 ms" }}
arrival = {{ kind = "poisson", rate = "300 /s" }}
holding = {{ kind = "exponential", mean = "10 ms" }}
pcr = "10 /s"
pairs = ["a:b"]
profile = {{ base = "fast", latency = "0 us", per_message = "100 us", per_command = "5 us", switch_per_command = "5 us", manager_step = "5 us", route_work = "0 us", qos_work = "0 us", colocated = true, links = true, cpus = {cpus}, coalesce = {coalesce}, awake_message = "{awake}" }}
"#
        ));
        let m = run(&c, 20, 2, 0);
        metric(&m, "mean_setup_latency")
    };
    let waived = setup(1, true, "0 us");
    let charged = setup(1, true, "100 us");
    let every = setup(1, false, "0 us");
    assert!(
        waived < charged && charged < every,
        "waived {waived}, charged {charged}, every message {every}"
    );
    assert_eq!(setup(0, true, "0 us"), setup(0, true, "100 us"));
}

/// The mean setup (ms) of lone xbind calls (one a second, each held 10 ms, identifiers
/// from warm caches) whose only cost is 100 us of `per_message`, on `cpus` shared
/// processors (0: one per server), the profile's table ending with `more`.
fn lone_messages(cpus: u32, more: &str) -> f64 {
    metric(&lone_metrics(cpus, more), "mean_setup_latency") * 1e3
}

/// The metrics of [`lone_messages`]' run.
fn lone_metrics(cpus: u32, more: &str) -> Vec<(&'static str, f64)> {
    let c = config(&format!(
        r#"
manager = {{ kind = "xbind", threshold = 1, flush = "10 ms", cache_fill = 64, cache_low = 1 }}
arrival = {{ kind = "poisson", rate = "1 /s" }}
holding = {{ kind = "deterministic", mean = "10 ms" }}
pcr = "100 /s"
pairs = ["a:b"]
profile = {{ base = "fast", latency = "0 s", per_message = "100 us", per_command = "0 s", switch_per_command = "0 s", manager_step = "0 s", route_work = "0 s", qos_work = "0 s", colocated = true, links = true, cpus = {cpus}{more} }}
"#
    ));
    run(&c, 60, 5, 0)
}

/// The call generator's work (`client_work`) takes a processor of the shared pool at
/// each arrival: one call at a time on one processor, the manager waits for it, so each
/// setup is longer by exactly that work; with a processor per server (no shared pool)
/// the generator has its own and the setup is as without it.
#[test]
fn the_generators_work_takes_a_shared_processor() {
    let setup =
        |cpus: u32, client: &str| lone_messages(cpus, &format!(", client_work = \"{client}\""));
    let (free, busy) = (setup(1, "0 us"), setup(1, "50 us"));
    assert!(
        (busy - free - 0.05).abs() < 1e-9,
        "one processor: {free} ms without the generator's work, {busy} ms with it"
    );
    assert_eq!(setup(0, "50 us"), setup(0, "0 us"));
}

/// `processor_utilisation` is the shared pool's time worked: one call at a time, a
/// call's work is the same on one processor or two (the setup's 12 messages and the
/// release's 12, at 100 us each), the generator's `client_work` adds its own to it, and
/// with a processor per server there is no pool to report (0).
#[test]
fn the_pools_utilisation_is_its_work() {
    let per_call = |cpus: u32, more: &str| {
        let m = lone_metrics(cpus, more);
        metric(&m, "processor_utilisation") * f64::from(cpus) / metric(&m, "offered_per_s") * 1e6
    };
    for cpus in [1, 2] {
        let work = per_call(cpus, "");
        assert!(
            (work - 2400.0).abs() < 1e-6,
            "cpus {cpus}: {work} us a call"
        );
        let with = per_call(cpus, ", client_work = \"50 us\"");
        assert!(
            (with - work - 50.0).abs() < 1e-6,
            "cpus {cpus}: {with} us a call"
        );
    }
    assert_eq!(metric(&lone_metrics(0, ""), "processor_utilisation"), 0.0);
}
