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

fn config(params: &str) -> ControlConfig {
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

fn metric(m: &[(&'static str, f64)], name: &str) -> f64 {
    m.iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| *v)
        .expect(name)
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

/// One call at a time through the paper's testbed (three switch servers), the
/// synchronous sequential manager under `paper-000` takes the paper's 23.4 ms on average
/// (§III-B), the figure the profile was calibrated from.
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
    assert!((mean_ms - 23.4).abs() < 0.05 * 23.4, "{mean_ms} ms");
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
    let text = format!(
        "topology = {:?}\nmanager = {{ kind = \"xbind\" }}\narrival = {{ kind = \"poisson\", rate = \"1 /s\" }}\nholding = {{ kind = \"exponential\", mean = \"1 s\" }}\npcr = \"1 /s\"\npairs = [\"a:zz\"]\nprofile = \"fast\"\n",
        line3()
    );
    let table: toml::Table = toml::from_str(&text).unwrap();
    let e = ControlConfig::from_params(&Params::new("t.toml", &table)).unwrap_err();
    assert!(
        e.to_string().contains("params.pairs") && e.to_string().contains("zz"),
        "{e}"
    );
}

/// §IV-A: the identifiers in use at a cache (taken at a call's arrival, back when its
/// commit is answered) form an M/G/∞ queue under Poisson calls, so their number is
/// Poisson: its variance equals its mean. Queueing at the manager (`paper-000`, 60 calls/s)
/// makes the replacement latencies vary; the law holds all the same.
#[test]
fn identifiers_in_use_are_poisson() {
    let c = config(
        r#"
manager = { kind = "xbind", threshold = 1, flush = "10 ms" }
arrival = { kind = "poisson", rate = "60 /s" }
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
    // The mean is λ x the replacement latency: a few identifiers at once, not none.
    assert!(mean.mean > 0.1, "N_v mean {mean:?}");
    assert!(
        (dispersion.mean - 1.0).abs() <= dispersion.ci95.max(0.05),
        "index of dispersion {dispersion:?} (Poisson: 1)"
    );
}

/// 5% of the messages between the manager and the switches lost, and up to 5 ms of extra
/// delay on each: the core re-sends what was lost (the switches answer a repeated
/// request once), every call is set up or refused cleanly, and once the calls end no
/// connection and no bandwidth is left on any switch.
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
    let setup = |cpus: u32| {
        let c = config(&format!(
            r#"
manager = {{ kind = "xbind", threshold = 1, flush = "10 ms", cache_fill = 64, cache_low = 1 }}
arrival = {{ kind = "poisson", rate = "1 /s" }}
holding = {{ kind = "deterministic", mean = "10 ms" }}
pcr = "100 /s"
pairs = ["a:b"]
profile = {{ base = "fast", latency = "0 s", per_message = "100 us", per_command = "0 s", switch_per_command = "0 s", manager_step = "0 s", route_work = "0 s", qos_work = "0 s", colocated = true, links = true, cpus = {cpus} }}
"#
        ));
        let m = run(&c, 60, 5, 0);
        metric(&m, "mean_setup_latency") * 1e3
    };
    let (own, one) = (setup(0), setup(1));
    assert!((own - 0.4).abs() < 0.004, "{own} ms with a processor per server");
    assert!((one - 1.2).abs() < 0.012, "{one} ms on one shared processor");
}
