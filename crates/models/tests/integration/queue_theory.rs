//! The `queue` model against theory, inside its 95% confidence interval, and against an
//! exact Lindley recursion.

use atmlab_core::time::{Duration, Instant};
use atmlab_models::queue::{
    ArrivalSpec, QueueConfig, STREAM_ARRIVAL, STREAM_SERVICE, Service, run_station,
};
use atmlab_models::source::{Poisson, TrafficSource};
use atmlab_sim::model::{ModelKind, Replication};
use atmlab_sim::rng::RngFactory;
use atmlab_sim::runner::{self, RunOptions, RunReport};
use atmlab_sim::scenario::{RunLength, Scenario, Warmup};
use atmlab_sim::stats::Estimate;

fn run(text: &str, threads: usize) -> RunReport {
    let scn = Scenario::parse("test.toml", text, &[]).unwrap();
    let kind = atmlab_models::model_kind(&scn.model).unwrap();
    runner::run(
        &scn,
        kind,
        &RunOptions {
            threads,
            progress: None,
        },
    )
    .unwrap()
}

fn metric(r: &RunReport, point: usize, name: &str) -> Estimate {
    r.points[point]
        .metrics
        .iter()
        .find(|(n, _)| n == name)
        .unwrap()
        .1
}

/// The primary check of each test: theory inside the 95% interval.
fn assert_covers(e: Estimate, theory: f64, what: &str) {
    assert_within(e, theory, 1.0, what);
}

/// Secondary checks of metrics from the same runs: several checks on one run raise the
/// chance that one misses by luck, so (Bonferroni) these use the 99.9% interval, which is
/// t(0.9995, 19) / t(0.975, 19) = 3.883 / 2.093 = 1.855 times the 95% half-width for 20
/// replications.
fn assert_covers_999(e: Estimate, theory: f64, what: &str) {
    assert_eq!(e.n, 20);
    assert_within(e, theory, 1.855, what);
}

fn assert_within(e: Estimate, theory: f64, widen: f64, what: &str) {
    assert!(
        (e.mean - theory).abs() <= widen * e.ci95,
        "{what}: theory {theory} outside {} ± {} (n = {})",
        e.mean,
        e.ci95,
        e.n
    );
    // The interval must also be informative, or the check means little.
    assert!(
        e.ci95 < 0.1 * theory.abs().max(1e-3),
        "{what}: interval too wide ({})",
        e.ci95
    );
}

fn scenario(arrival: &str, service: &str, capacity: &str, duration: &str) -> String {
    format!(
        "model = \"queue\"\n[run]\nduration = \"{duration}\"\nwarmup = \"1000 s\"\nreplications = 20\nseed = 1\n[params]\narrival = {arrival}\nservice = {service}\ncapacity = {capacity}\n"
    )
}

#[test]
fn mm1_mean_wait_and_queue_length() {
    // lambda 0.5, mu 1: Wq = rho / (mu - lambda) = 1; Lq = lambda Wq = 0.5; W = 2; U = 0.5.
    let r = run(
        &scenario(
            "{ kind = \"poisson\", rate = \"0.5 /s\" }",
            "{ kind = \"exponential\", mean = \"1 s\" }",
            "\"inf\"",
            "41000 s",
        ),
        0,
    );
    assert_covers(metric(&r, 0, "mean_wait"), 1.0, "M/M/1 Wq");
    assert_covers_999(metric(&r, 0, "mean_system_time"), 2.0, "M/M/1 W");
    assert_covers_999(metric(&r, 0, "mean_queue_length"), 0.5, "M/M/1 Lq");
    assert_covers_999(metric(&r, 0, "utilization"), 0.5, "M/M/1 U");
    // The wait distribution: P(Wq <= t) = 1 - rho e^{-(mu - lambda) t}; its median is
    // ln(2 rho) / (mu - lambda) = 0 for rho = 0.5, and p99 = ln(100 rho)/(mu - lambda).
    assert_covers_999(
        metric(&r, 0, "wait_p99"),
        (100.0f64 * 0.5).ln() / 0.5,
        "M/M/1 Wq p99",
    );
    assert_eq!(metric(&r, 0, "loss_probability").mean, 0.0);
}

#[test]
fn md1_pollaczek_khinchine() {
    // M/D/1, lambda 0.5, D 1 s: Wq = lambda D^2 / (2 (1 - rho)) = 0.5.
    let r = run(
        &scenario(
            "{ kind = \"poisson\", rate = \"0.5 /s\" }",
            "{ kind = \"deterministic\", mean = \"1 s\" }",
            "\"inf\"",
            "41000 s",
        ),
        0,
    );
    assert_covers(metric(&r, 0, "mean_wait"), 0.5, "M/D/1 Wq");
    assert_covers_999(metric(&r, 0, "utilization"), 0.5, "M/D/1 U");
}

#[test]
fn mm1k_loss_probability() {
    // M/M/1/K, lambda 0.9, mu 1, K 5: P_K = (1 - rho) rho^K / (1 - rho^(K+1)).
    let rho: f64 = 0.9;
    let k = 5;
    let pk = (1.0 - rho) * rho.powi(k) / (1.0 - rho.powi(k + 1));
    let r = run(
        &scenario(
            "{ kind = \"poisson\", rate = \"0.9 /s\" }",
            "{ kind = \"exponential\", mean = \"1 s\" }",
            "5",
            "21000 s",
        ),
        0,
    );
    assert_covers(metric(&r, 0, "loss_probability"), pk, "M/M/1/5 loss");
}

/// M/M/1 at rho = 0.9 (lambda 0.9 /s, mean service 1 s): the exact cross-checks' queue.
fn mm1_09() -> QueueConfig {
    QueueConfig {
        arrival: ArrivalSpec::Poisson { rate: 0.9 },
        service: Service::Exponential(Duration::from_secs(1)),
        capacity: None,
    }
}

#[test]
fn lindley_recursion_matches_exactly() {
    let cfg = mm1_09();
    let rep = Replication {
        seed: 7,
        replication: 3,
        length: RunLength::Count(20_000),
        warmup: Warmup::Time(Duration::ZERO),
        batches: 1,
    };
    let (_, waits) = run_station(&cfg, &rep, true).unwrap();
    assert!(waits.len() >= 20_000);
    // The same streams, drawn outside the engine: W(n+1) = max(0, W(n) + S(n) - A(n+1)).
    let rngs = RngFactory::new(7, 3);
    let mut ra = rngs.stream(STREAM_ARRIVAL);
    let mut rs = rngs.stream(STREAM_SERVICE);
    let mut src = Poisson::new(0.9, Instant::ZERO).unwrap();
    let mut t_prev = src.next_arrival(&mut ra).unwrap().at;
    let mut w: i128 = 0;
    let mut worst = 0f64;
    for (n, got) in waits.iter().enumerate() {
        if n > 0 {
            let t = src.next_arrival(&mut ra).unwrap().at;
            let gap = i128::from((t - t_prev).as_picos());
            t_prev = t;
            w = (w - gap).max(0);
        }
        assert_eq!(i128::from(got.as_picos()), w, "customer {n}");
        worst = worst.max((got.as_secs_f64() - w as f64 * 1e-12).abs());
        w += i128::from(cfg.service.sample(&mut rs).as_picos());
    }
    assert!(worst <= 1e-9);
}

/// The two time averages (queue length and utilisation) after a warm-up, in one run and
/// in each of four batches, against the same streams replayed outside the engine: every
/// customer's arrival `a`, service start `s` and service time `S` from the recursion
/// `s(n) = max(a(n), s(n-1) + S(n-1))`, and the integrals over each measured period summed
/// customer by customer, exactly in integer picoseconds: the number waiting integrates to
/// the sum of `[a, s)` clipped to the period, the server's busy time to the sum of
/// `[s, s + S)` clipped the same way. Customers waiting at the warm-up's end and at each
/// batch boundary are the cases the station's bookkeeping must get right.
#[test]
fn time_averages_match_the_replayed_customers_exactly() {
    let cfg = mm1_09();
    let (w, t) = (Duration::from_secs(300), Duration::from_secs(20_000));
    // The customers: (arrival, service start, service end), in picoseconds.
    let rngs = RngFactory::new(11, 2);
    let mut ra = rngs.stream(STREAM_ARRIVAL);
    let mut rs = rngs.stream(STREAM_SERVICE);
    let mut src = Poisson::new(0.9, Instant::ZERO).unwrap();
    let mut customers = Vec::new();
    let mut free_at = 0u64;
    loop {
        let a = src.next_arrival(&mut ra).unwrap().at.as_picos();
        if a > t.as_picos() {
            break;
        }
        let start = a.max(free_at);
        free_at = start + cfg.service.sample(&mut rs).as_picos();
        customers.push((a, start, free_at));
    }
    // The two time averages over [from, to].
    let averages = |from: u64, to: u64| {
        let clip = |x: u64, y: u64| u128::from(y.min(to).saturating_sub(x.max(from)));
        let waiting: u128 = customers.iter().map(|&(a, s, _)| clip(a, s)).sum();
        let busy: u128 = customers.iter().map(|&(_, s, e)| clip(s, e)).sum();
        let span = (to - from) as f64;
        (waiting as f64 / span, busy as f64 / span)
    };
    let metric = |m: &[(&str, f64)], name: &str| m.iter().find(|(n, _)| *n == name).unwrap().1;
    for batches in [1u32, 4] {
        let rep = Replication {
            seed: 11,
            replication: 2,
            length: RunLength::Duration(t),
            warmup: Warmup::Time(w),
            batches,
        };
        let (r, _) = run_station(&cfg, &rep, false).unwrap();
        let (w, t) = (w.as_picos(), t.as_picos());
        if batches == 1 {
            let (q, u) = averages(w, t);
            assert_eq!(metric(&r.metrics, "mean_queue_length"), q);
            assert_eq!(metric(&r.metrics, "utilization"), u);
            continue;
        }
        assert_eq!(r.batch_metrics.len(), 4);
        let names = atmlab_models::queue::QueueKind.metrics();
        for (b, values) in r.batch_metrics.iter().enumerate() {
            let edge = |k: u64| w + (t - w) / 4 * k;
            let (q, u) = averages(edge(b as u64), edge(b as u64 + 1));
            let m: Vec<(&str, f64)> = names.iter().copied().zip(values.iter().copied()).collect();
            assert_eq!(metric(&m, "mean_queue_length"), q, "batch {b}");
            assert_eq!(metric(&m, "utilization"), u, "batch {b}");
        }
    }
}

#[test]
fn results_do_not_depend_on_threads() {
    let text = "model = \"queue\"\n[run]\nduration = \"3000 s\"\nwarmup = \"100 s\"\nreplications = 6\nseed = 4\n[params]\narrival = { kind = \"poisson\", rate = \"0.8 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }\n[sweep]\n\"arrival.rate\" = [\"0.3 /s\", \"0.6 /s\", \"0.8 /s\"]\n";
    let one = run(text, 1);
    let two = run(text, 2);
    let four = run(text, 4);
    for r in [&two, &four] {
        for (a, b) in one.points.iter().zip(&r.points) {
            assert_eq!(a.replications, b.replications);
        }
    }
    assert_eq!(one.points.len(), 3);
}

#[test]
fn auto_warmup_runs_a_pilot_and_truncates() {
    let text = "model = \"queue\"\n[run]\ncount = 20000\nwarmup = \"auto\"\nreplications = 4\nseed = 2\n[params]\narrival = { kind = \"poisson\", rate = \"0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }\n";
    let r = run(text, 0);
    for rep in &r.points[0].replications {
        assert!(rep.truncation.is_some());
    }
    let e = metric(&r, 0, "mean_wait");
    assert!((e.mean - 1.0).abs() <= e.ci95, "{e:?}");
}

#[test]
fn unstable_queue_warns() {
    let scn = Scenario::parse(
        "u.toml",
        "model = \"queue\"\n[run]\nduration = \"10 s\"\n[params]\narrival = { kind = \"poisson\", rate = \"1.2 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }\ncapacity = \"inf\"\n",
        &[],
    )
    .unwrap();
    let (_, warnings) = runner::prepare(&scn, atmlab_models::model_kind("queue").unwrap()).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("rho") && warnings[0].contains("1.2"),
        "{}",
        warnings[0]
    );
}

#[test]
fn bad_parameters_name_the_key() {
    let kind = atmlab_models::model_kind("queue").unwrap();
    let check = |params: &str, want: &[&str]| {
        let text = format!("model = \"queue\"\n[run]\nduration = \"10 s\"\n[params]\n{params}\n");
        let scn = Scenario::parse("bad.toml", &text, &[]).unwrap();
        let e = runner::prepare(&scn, kind)
            .err()
            .expect("an error")
            .to_string();
        assert!(e.starts_with("bad.toml: "), "{e}");
        for w in want {
            assert!(e.contains(w), "{e} lacks {w}");
        }
    };
    check(
        "arrival = { kind = \"poisson\", rate = \"-0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }",
        &["params.arrival.rate", "negative"],
    );
    check(
        "arrival = { kind = \"poisson\", rate = \"0.5 furlongs\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }",
        &["params.arrival.rate", "unit"],
    );
    check(
        "arrival = { kind = \"poisson\", rate = \"0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }\ncapacty = 4",
        &["params.capacty", "unknown key"],
    );
    check(
        "arrival = { kind = \"poison\", rate = \"0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }",
        &["params.arrival.kind", "poisson"],
    );
    check(
        "arrival = { kind = \"poisson\", rate = \"0.5 /s\", burst = 3 }\nservice = { kind = \"exponential\", mean = \"1 s\" }",
        &["params.arrival.burst", "unknown key"],
    );
    check(
        "arrival = { kind = \"poisson\", rate = \"0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"0 s\" }",
        &["params.service.mean", "zero"],
    );
    check(
        "arrival = { kind = \"poisson\", rate = \"0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }\ncapacity = 0",
        &["params.capacity", "at least 1"],
    );
    check(
        "arrival = { kind = \"onoff\", peak = \"10 /s\", mean = \"20 /s\", burst = 5 }\nservice = { kind = \"exponential\", mean = \"1 s\" }",
        &["params.arrival", "mean_rate"],
    );
}

#[test]
fn a_thousand_point_sweep_runs_and_keeps_one_value_per_metric() {
    // 1,000 points: the runner keeps per replication one number per metric, never the
    // samples (waits are folded into tallies and a fixed-size histogram as they come).
    let rates: Vec<String> = (0..1000)
        .map(|i| format!("\"{} /s\"", 0.1 + 0.0008 * f64::from(i)))
        .collect();
    let text = format!(
        "model = \"queue\"\n[run]\ncount = 50\nreplications = 1\nseed = 9\n[params]\narrival = {{ kind = \"poisson\", rate = \"0.5 /s\" }}\nservice = {{ kind = \"exponential\", mean = \"1 s\" }}\n[sweep]\n\"arrival.rate\" = [{}]\n",
        rates.join(", ")
    );
    let r = run(&text, 0);
    assert_eq!(r.points.len(), 1000);
    for p in &r.points {
        assert_eq!(p.replications.len(), 1);
        assert_eq!(p.replications[0].metrics.len(), 7);
    }
}

#[test]
fn batch_means_cover_the_mm1_wait() {
    // One long replication cut into 20 batches instead of 20 replications.
    let text = "model = \"queue\"\n[run]\nduration = \"401000 s\"\nwarmup = \"1000 s\"\nreplications = 1\nbatches = 20\nseed = 3\n[params]\narrival = { kind = \"poisson\", rate = \"0.5 /s\" }\nservice = { kind = \"exponential\", mean = \"1 s\" }\n";
    let r = run(text, 0);
    let e = metric(&r, 0, "mean_wait");
    assert_eq!(e.n, 20);
    assert_covers(e, 1.0, "M/M/1 Wq by batch means");
    assert_eq!(r.points[0].replications[0].batch_metrics.len(), 20);
}

/// The relative half-width of `name` over the first `n` replications of a point.
fn relative_half_width(r: &RunReport, point: usize, name: &str, n: usize) -> f64 {
    let values: Vec<f64> = r.points[point].replications[..n]
        .iter()
        .map(|rep| rep.metrics.iter().find(|(m, _)| *m == name).unwrap().1)
        .collect();
    Estimate::from_samples(&values).relative_half_width()
}

fn sequential(precision: &str, rest: &str) -> String {
    format!(
        "model = \"queue\"\n[run]\nduration = \"600 s\"\nwarmup = \"50 s\"\nreplications = 10\nseed = 3\nprecision = {precision}\n{rest}[params]\narrival = {{ kind = \"poisson\", rate = \"0.7 /s\" }}\nservice = {{ kind = \"exponential\", mean = \"1 s\" }}\n[sweep]\n\"arrival.rate\" = [\"0.5 /s\", \"0.7 /s\"]\n"
    )
}

/// Law & Kelton's sequential procedure: each point stops at the first count from n0 on at
/// which its interval is within γ' = γ/(1+γ) of its mean, and not before; the counts and
/// every value are the same with one thread and with several.
#[test]
fn sequential_replications_stop_at_the_first_precise_count() {
    let text = sequential("0.1", "precision_metrics = [\"mean_wait\"]\n");
    let one = run(&text, 1);
    // Eight threads on two points run rounds of four replications a point, and discard
    // those past a point's stopping count: the results must not show it.
    let eight = run(&text, 8);
    let kept_events: u64 = eight
        .points
        .iter()
        .flat_map(|p| &p.replications)
        .map(|r| r.events)
        .sum();
    assert!(
        eight.events > kept_events,
        "no replication was discarded: the test would not see a wrong stopping count"
    );
    assert_eq!(one.events, kept_events, "one thread discards nothing");
    let target = 0.1 / 1.1;
    let mut stopped_late = 0;
    for (p, (a, b)) in one.points.iter().zip(&eight.points).enumerate() {
        assert_eq!(a.replications, b.replications, "point {p}");
        let n = a.replications.len();
        assert!((10..=1000).contains(&n), "point {p}: n = {n}");
        assert_eq!(metric(&one, p, "mean_wait").n, n as u64);
        assert!(relative_half_width(&one, p, "mean_wait", n) <= target);
        if n > 10 {
            stopped_late += 1;
            for m in 10..n {
                assert!(
                    relative_half_width(&one, p, "mean_wait", m) > target,
                    "point {p}: precise at {m} already, stopped at {n}"
                );
            }
        }
    }
    // The test means something only if the procedure had to add replications.
    assert!(stopped_late > 0, "both points were precise at n0");
    // Results say how they were made.
    let json = atmlab_sim::report::results_json(&one);
    assert_eq!(
        json["scenario"]["method"]["sequential_replications"]["precision"],
        0.1
    );
    // A cap equal to the largest stopping count: that point is precise exactly at the cap,
    // which is a success, not a warning.
    let most = one
        .points
        .iter()
        .map(|p| p.replications.len())
        .max()
        .unwrap();
    let capped = run(
        &sequential(
            "0.1",
            &format!("precision_metrics = [\"mean_wait\"]\nmax_replications = {most}\n"),
        ),
        2,
    );
    assert!(capped.warnings.is_empty(), "{:?}", capped.warnings);
    for (a, b) in one.points.iter().zip(&capped.points) {
        assert_eq!(a.replications, b.replications);
    }
}

/// A precision out of reach stops every point at max_replications, with a warning that
/// names the metric and the precision it got; a metric that is zero throughout (the loss
/// of an infinite queue) counts as precise.
#[test]
fn sequential_replications_stop_at_the_cap_and_warn() {
    let text = sequential("0.001", "max_replications = 12\n");
    let r = run(&text, 0);
    for p in &r.points {
        assert_eq!(p.replications.len(), 12);
    }
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    for w in &r.warnings {
        assert!(
            w.contains("not reached")
                && w.contains("12 replications")
                && w.contains("relative half-width"),
            "{w}"
        );
        assert!(!w.contains("loss_probability"), "{w}");
    }
    // A wide target is met at n0, zero loss included.
    let easy = run(
        &sequential(
            "0.5",
            "precision_metrics = [\"mean_wait\", \"loss_probability\"]\n",
        ),
        0,
    );
    assert!(easy.warnings.is_empty(), "{:?}", easy.warnings);
    for p in &easy.points {
        assert_eq!(p.replications.len(), 10);
    }
}

#[test]
fn sequential_replications_refuse_unknown_metrics() {
    let scn = Scenario::parse(
        "seq.toml",
        &sequential("0.05", "precision_metrics = [\"mean_wiat\"]\n"),
        &[],
    )
    .unwrap();
    let e = runner::prepare(&scn, atmlab_models::model_kind("queue").unwrap())
        .err()
        .expect("an error")
        .to_string();
    assert!(
        e.contains("seq.toml") && e.contains("run.precision_metrics") && e.contains("mean_wiat"),
        "{e}"
    );
}
