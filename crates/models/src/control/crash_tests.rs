//! Crashes and recovery of the simulated control plane (issue 23 items 1 and 3): a
//! switch server and a manager that crash and restart are recovered through the real
//! cores (`CmCore::reconcile`, `CmCore::adopt`, the start-up audit's `plan`), and after
//! the run drains nothing is left at the switches; without the recovery
//! (`recovery = false`, the ablation) the same crashes leave strays behind.

use atmlab_core::time::Duration;
use atmlab_sim::model::Replication;
use atmlab_sim::scenario::{Params, RunLength, Warmup};

use super::ControlConfig;
use super::crash::{Node, When};
use super::tests::metric;

fn config(params: &str) -> ControlConfig {
    let line3 = format!("{}/../../topologies/line3.toml", env!("CARGO_MANIFEST_DIR"));
    let text = format!("topology = {line3:?}\n{params}");
    let table: toml::Table = toml::from_str(&text).expect("test parameters parse");
    let p = Params::new("test.toml", &table);
    let c = ControlConfig::from_params(&p).expect("valid parameters");
    p.finish().expect("every key read");
    c
}

fn run(c: &ControlConfig, seconds: u64, replication: u32) -> Vec<(&'static str, f64)> {
    c.run_replication(&Replication {
        seed: 3,
        replication,
        length: RunLength::Duration(Duration::from_secs(seconds)),
        warmup: Warmup::Time(Duration::ZERO),
        batches: 1,
    })
    .expect("the run completes")
    .metrics
}

const PLANE: &str = r#"
manager = { kind = "xbind", threshold = 4, flush = "10 ms" }
arrival = { kind = "poisson", rate = "100 /s" }
holding = { kind = "exponential", mean = "2 s" }
pcr = "100 /s"
pairs = ["a:b", "b:a"]
profile = "paper-000"
"#;

/// The plane with `crashes`, recovered or not, without periodic sweeps: what reconcile
/// and the start-up audit do alone (a sweep would release the strays either leaves).
fn with_crashes(crashes: &str, recovery: bool) -> ControlConfig {
    config(&format!(
        "{PLANE}faults = {{ crashes = [{crashes}], recovery = {recovery}, sweep = \"0 s\" }}\n"
    ))
}

/// The crash faults are read as written: a switch once, the manager as a Poisson
/// process; unknown nodes and a crash with neither time are refused, naming the key.
#[test]
fn crashes_are_read_as_written() {
    let c = with_crashes(
        r#"{ node = "s2", at = "10 s", down = "200 ms" }, { node = "manager", mtbf = "60 s", down = "1 s" }"#,
        true,
    );
    let k = &c.crashes.crashes;
    assert_eq!(k[0].node, Node::Switch(1));
    assert_eq!(k[0].when, When::At(Duration::from_secs(10)));
    assert_eq!(k[1].node, Node::Manager(0));
    assert_eq!(k[1].when, When::Poisson(Duration::from_secs(60)));
    assert_eq!(k[1].down, Duration::from_secs(1));
    let bad = |crash: &str| {
        let text = format!(
            "topology = {:?}\n{PLANE}faults = {{ crashes = [{crash}] }}\n",
            format!("{}/../../topologies/line3.toml", env!("CARGO_MANIFEST_DIR"))
        );
        let table: toml::Table = toml::from_str(&text).unwrap();
        ControlConfig::from_params(&Params::new("t.toml", &table))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(bad(r#"{ node = "s9", at = "1 s", down = "1 s" }"#).contains("crashes[0].node"));
    assert!(bad(r#"{ node = "s1", down = "1 s" }"#).contains("crashes[0].at"));
    assert!(bad(r#"{ node = "manager:2", at = "1 s", down = "1 s" }"#).contains("managers"));
}

/// A switch server in the middle of every path crashes for 300 ms while commits are in
/// flight: with recovery, the manager reconciles with what its journal kept (commits
/// whose answers were lost complete the setups that sent them, strays are released) and
/// after the run nothing is left; without it, commits made before the crash whose
/// answers were lost are re-sent, refused (their input is taken), and their connections
/// stay behind, nobody's.
#[test]
fn a_switch_that_restarts_is_reconciled_and_nothing_leaks() {
    let crashes = r#"{ node = "s2", at = "5 s", down = "300 ms" }, { node = "s3", at = "9.0005 s", down = "300 ms" }"#;
    let m = run(&with_crashes(crashes, true), 15, 0);
    assert_eq!(metric(&m, "crashes"), 2.0);
    assert_eq!(metric(&m, "leaked_calls"), 0.0, "{m:?}");
    assert_eq!(metric(&m, "leaked_connections"), 0.0, "{m:?}");
    assert_eq!(metric(&m, "leaked_reservations"), 0.0, "{m:?}");
    assert!(metric(&m, "crash_calls_recovered") >= 1.0, "{m:?}");
    let without = run(&with_crashes(crashes, false), 15, 0);
    assert!(
        metric(&without, "leaked_connections") >= 1.0,
        "no reconcile, yet nothing leaked: {without:?}"
    );
}

/// The manager crashes for 500 ms with calls established and calls being set up: the
/// ones being set up are lost to their users, the established ones are taken back from
/// the journal by the restarted core, the start-up audit releases the half-made setups'
/// connections and gives back the identifiers its caches held, and after the run nothing
/// is left. Restarted without its journal, its established calls and caches stay at the
/// switches.
#[test]
fn a_manager_that_restarts_takes_its_calls_back_and_nothing_leaks() {
    let crashes = r#"{ node = "manager", at = "6 s", down = "500 ms" }"#;
    let m = run(&with_crashes(crashes, true), 12, 0);
    assert_eq!(metric(&m, "crashes"), 1.0);
    // About 200 calls are up (100 /s held 2 s); every one is taken back.
    assert!(metric(&m, "crash_calls_recovered") > 100.0, "{m:?}");
    // Setups in progress and those sent while it was down (about 50) are lost.
    assert!(metric(&m, "crash_calls_lost") >= 10.0, "{m:?}");
    assert_eq!(metric(&m, "leaked_calls"), 0.0, "{m:?}");
    assert_eq!(metric(&m, "leaked_connections"), 0.0, "{m:?}");
    assert_eq!(metric(&m, "leaked_reservations"), 0.0, "{m:?}");
    let without = run(&with_crashes(crashes, false), 12, 0);
    assert!(
        metric(&without, "leaked_connections") > 100.0,
        "{without:?}"
    );
    assert!(
        metric(&without, "leaked_reservations") >= 1.0,
        "{without:?}"
    );
}

/// Poisson crashes of switches and of one of two managers on partitions, with lost
/// messages and the periodic sweeps: the run is a function of its seed, and nothing
/// leaks.
#[test]
fn poisson_crashes_are_a_function_of_the_seed_and_leave_nothing() {
    let c = config(&format!(
        "{}faults = {{ loss = 0.01, crashes = [{}] }}\n",
        PLANE.replace("flush = \"10 ms\"", "flush = \"10 ms\", managers = 2"),
        r#"{ node = "s1", mtbf = "4 s", down = "200 ms" }, { node = "manager:1", mtbf = "5 s", down = "300 ms" }, { node = "s3", mtbf = "6 s", down = "100 ms" }"#
    ));
    let a = run(&c, 12, 1);
    assert!(metric(&a, "crashes") >= 2.0, "{a:?}");
    assert_eq!(metric(&a, "leaked_calls"), 0.0, "{a:?}");
    assert_eq!(metric(&a, "leaked_connections"), 0.0, "{a:?}");
    assert_eq!(metric(&a, "leaked_reservations"), 0.0, "{a:?}");
    let b = run(&c, 12, 1);
    let bits = |m: &[(&'static str, f64)]| m.iter().map(|(_, v)| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a), bits(&b));
}

/// A manager that restarts after the warm-up's mark: its new core counts from zero, and
/// the plane adds its dead predecessor's counts, so the period's cache hits and
/// messages to the switches are what the run did (as without the crash), not a
/// difference across two cores.
#[test]
fn a_restarted_managers_counts_carry_on() {
    let c = with_crashes(r#"{ node = "manager", at = "6 s", down = "50 ms" }"#, true);
    let rep = |c: &ControlConfig| {
        c.run_replication(&Replication {
            seed: 3,
            replication: 0,
            length: RunLength::Duration(Duration::from_secs(8)),
            warmup: Warmup::Time(Duration::from_secs(3)),
            batches: 1,
        })
        .expect("the run completes")
        .metrics
    };
    let crashed = rep(&c);
    let mut clean = c.clone();
    clean.crashes.crashes.clear();
    let clean = rep(&clean);
    // N_v's path moves more (the crash cuts calls off, the new route cache misses):
    // a wider margin, still far narrower than the counts of one core alone give.
    for (name, margin) in [
        ("cache_hit_ratio", 0.15),
        ("switch_messages_per_call", 0.15),
        ("nv_mean", 0.3),
    ] {
        let (a, b) = (metric(&crashed, name), metric(&clean, name));
        assert!(
            (a - b).abs() <= margin * b,
            "{name}: {a} with the crash, {b} without"
        );
    }
}

/// A plane without crashes reports none of their metrics (its results stay as they
/// were before crashes existed).
#[test]
fn without_crashes_no_crash_metrics() {
    let m = run(&config(PLANE), 2, 0);
    assert!(
        !m.iter()
            .any(|(k, _)| k.starts_with("crash") || k.starts_with("leaked"))
    );
}

/// The manager is down for only 2 ms while messages take up to 30 ms more to cross:
/// answers to the dead incarnation's requests reach the manager after it restarted.
/// They are fenced (its new core numbers its requests from the start again, so an old
/// answer would be taken for a new request's), and nothing leaks.
#[test]
fn a_dead_managers_late_answers_are_fenced() {
    let c = config(&format!(
        "{PLANE}faults = {{ delay = \"30 ms\", sweep = \"0 s\", crashes = [{}] }}\n",
        r#"{ node = "manager", at = "3 s", down = "2 ms" }, { node = "manager", at = "6 s", down = "2 ms" }"#
    ));
    for replication in 0..3 {
        let m = run(&c, 10, replication);
        assert_eq!(metric(&m, "crashes"), 2.0);
        assert!(metric(&m, "crash_calls_recovered") > 100.0, "{m:?}");
        assert_eq!(metric(&m, "leaked_calls"), 0.0, "{m:?}");
        assert_eq!(metric(&m, "leaked_connections"), 0.0, "{m:?}");
        assert_eq!(metric(&m, "leaked_reservations"), 0.0, "{m:?}");
    }
}

/// Long and repeated crashes with lost messages: reconcile (which reads connections only,
/// as the live link's does) and the start-up audit leave identifiers reserved that no
/// cache and no call holds (fills and give-backs whose every message or answer was
/// lost). The periodic sweeps find them and give them back; without sweeps they stay.
#[test]
fn the_periodic_sweeps_give_back_what_crashes_and_losses_left() {
    let crashes = r#"{ node = "s2", at = "4 s", down = "9 s" }, { node = "s1", mtbf = "7 s", down = "3 s" }, { node = "manager", mtbf = "9 s", down = "2.5 s" }"#;
    let plane = |sweep: &str| {
        config(&format!(
            "{PLANE}faults = {{ loss = 0.02, sweep = \"{sweep}\", crashes = [{crashes}] }}\n"
        ))
    };
    let swept = run(&plane("10 s"), 30, 0);
    assert!(metric(&swept, "crashes") >= 3.0, "{swept:?}");
    assert_eq!(metric(&swept, "leaked_calls"), 0.0, "{swept:?}");
    assert_eq!(metric(&swept, "leaked_connections"), 0.0, "{swept:?}");
    assert_eq!(metric(&swept, "leaked_reservations"), 0.0, "{swept:?}");
    let unswept = run(&plane("0 s"), 30, 0);
    assert!(
        metric(&unswept, "leaked_reservations") >= 1.0,
        "{unswept:?}"
    );
}

/// On the live machine's structure (`colocated`, a shared pool), a set-up call's answer
/// waits for a free processor before its caller hears it (`pool::hear_answers`); a
/// manager that dies meanwhile loses those calls with the ones it was setting up, and its
/// restart releases their connections: nothing leaks, however often it dies.
#[test]
fn a_manager_that_dies_with_answers_unheard_leaves_nothing() {
    let c = config(
        r#"
manager = { kind = "xbind", threshold = 1, flush = "10 ms" }
arrival = { kind = "poisson", rate = "9000 /s" }
holding = { kind = "exponential", mean = "50 ms" }
pcr = "10 /s"
pairs = ["a:b"]
profile = { base = "fast", latency = "0 s", per_message = "26 us", per_command = "0.5 us", switch_per_command = "0.1 us", manager_step = "0.3 us", route_work = "0.3 us", qos_work = "0 s", wakeup = "5 us", colocated = true, links = true, coalesce = true, cpus = 2 }
faults = { crashes = [{ node = "manager", mtbf = "50 ms", down = "5 ms" }] }
"#,
    );
    for replication in 0..4 {
        let m = run(&c, 2, replication);
        assert!(metric(&m, "crashes") >= 10.0, "{m:?}");
        assert_eq!(metric(&m, "leaked_calls"), 0.0, "{m:?}");
        assert_eq!(metric(&m, "leaked_connections"), 0.0, "{m:?}");
        assert_eq!(metric(&m, "leaked_reservations"), 0.0, "{m:?}");
    }
}
