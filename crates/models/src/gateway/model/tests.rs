//! Tests of the `gateway` model kind against paper 004's expectations (§6): carried
//! load at light load, overload losses, the NPE's cap, the reverse path, parameter errors,
//! and independence from the number of threads.

use super::*;
use atmlab_sim::runner::{RunOptions, run};

/// Table 2 and 3's point with `extra` overrides, shortened for a debug build.
fn scenario(extra: &str) -> Scenario {
    let text = r#"
model = "gateway"
[run]
duration = "0.3 s"
warmup = "0.05 s"
replications = 2
seed = 7
[params]
connections = 8
offered_load = "60 Mb/s"
peak_to_average = 2
burst_factor = 250
segment_cells = 85
atm_link = "150 Mb/s"
clock_cycle = "25 ns"
npe_rate = "100 /ms"
reassembly_queues = 2
max_fddi_frame = 4096
full_frame = 3853
transmit_buffer = 16
receive_buffer = 16
fddi = { rate = "100 Mb/s", stations = 4, ttrt = "50 ms", hop_latency = "2.5 us", priority = 7, sync_allocation = "0 s" }
background = { load = "1 Mb/s", frame = 1000 }
reverse = { load = "0 Mb/s", peak_to_average = 8, burst_factor = 100, frame = 3853 }
"#;
    let overrides: Vec<String> = extra
        .split(';')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().to_string())
        .collect();
    Scenario::parse("test.toml", text, &overrides).unwrap()
}

use atmlab_sim::scenario::Scenario;

fn metric(r: &atmlab_sim::runner::RunReport, point: usize, name: &str) -> f64 {
    r.points[point]
        .metrics
        .iter()
        .find(|(m, _)| m == name)
        .unwrap()
        .1
        .mean
}

#[test]
fn light_load_loses_nothing_and_carries_45_of_53() {
    let s = scenario("params.burst_factor=20");
    let r = run(&s, &GatewayKind, &RunOptions::default()).unwrap();
    assert_eq!(metric(&r, 0, "cell_loss_probability"), 0.0);
    assert_eq!(metric(&r, 0, "frame_loss_probability"), 0.0);
    let ratio = metric(&r, 0, "throughput_mbps") / metric(&r, 0, "offered_load_mbps");
    // 45/53 = 0.849, less the frames still inside the gateway when the run ends.
    assert!((0.80..0.86).contains(&ratio), "{ratio}");
    let lat = metric(&r, 0, "latency_mean");
    // At least the reassembly of 85 cells at the 15 Mb/s peak of a source (2.4 ms),
    // at most tens of milliseconds.
    assert!((2.4e-3..0.05).contains(&lat), "{lat}");
    assert_eq!(metric(&r, 0, "token_violations"), 0.0);
    assert!(metric(&r, 0, "token_rotation_max") <= 0.1);
}

#[test]
fn results_do_not_depend_on_threads_and_replications_differ() {
    let s = scenario("sweep.offered_load=[\"40 Mb/s\", \"120 Mb/s\"]");
    let one = run(
        &s,
        &GatewayKind,
        &RunOptions {
            threads: 1,
            progress: None,
        },
    )
    .unwrap();
    let two = run(
        &s,
        &GatewayKind,
        &RunOptions {
            threads: 2,
            progress: None,
        },
    )
    .unwrap();
    // Compared as text: NaN (no reverse traffic) is not equal to itself.
    for (a, b) in one.points.iter().zip(&two.points) {
        assert_eq!(
            format!("{:?}", a.replications),
            format!("{:?}", b.replications)
        );
    }
    let reps = &one.points[1].replications;
    assert_ne!(reps[0].metrics, reps[1].metrics);
    // Overload: the gateway must lose cells at 120 Mb/s offered (102 Mb/s of data).
    assert!(metric(&one, 1, "cell_loss_probability") > 0.0);
    assert!(metric(&one, 1, "throughput_mbps") < 100.0);
}

#[test]
fn a_slow_npe_caps_the_throughput_at_its_rate() {
    // R = 25 /ms, 8-cell segments: at most 25,000 x 360 x 8 = 72 Mb/s of data, and
    // with the copy (2.25 us per 360 octets) one frame per 42.25 us: 68.2 Mb/s.
    let s = scenario(
        "params.segment_cells=8; params.burst_factor=4; params.npe_rate=\"25 /ms\"; params.offered_load=\"120 Mb/s\"",
    );
    let r = run(&s, &GatewayKind, &RunOptions::default()).unwrap();
    let tp = metric(&r, 0, "throughput_mbps");
    assert!((55.0..=68.2).contains(&tp), "{tp}");
    let u = metric(&r, 0, "npe_utilization");
    assert!((0.85..=40.0 / 42.25 + 1e-3).contains(&u), "{u}");
    assert!(metric(&r, 0, "cell_loss_probability") > 0.1);
}

#[test]
fn reverse_path_carries_the_ring_load() {
    let s = scenario(
        "params.offered_load=\"0 Mb/s\"; params.reverse.load=\"80 Mb/s\"; params.receive_buffer=2",
    );
    let r = run(&s, &GatewayKind, &RunOptions::default()).unwrap();
    let offered = metric(&r, 0, "reverse_offered_mbps");
    let carried = metric(&r, 0, "reverse_throughput_mbps");
    assert!(offered > 10.0, "{offered}");
    assert!(
        carried > 0.5 * offered && carried <= 100.0,
        "{carried} of {offered}"
    );
    assert!(metric(&r, 0, "receive_buffer_max") <= 2.0);
    assert_eq!(metric(&r, 0, "throughput_mbps"), 0.0);
}

#[test]
fn bad_parameters_name_the_key() {
    let bad = [
        ("params.offered_load=\"150 Mb/s\"", "offered_load"),
        ("params.segment_cells=100", "segment_cells"),
        ("params.peak_to_average=1", "peak_to_average"),
        ("params.fddi.stations=1", "stations"),
        ("params.fddi.priority=9", "priority"),
        ("params.colour=3", "colour"),
        ("params.npe_rate=\"0 /s\"", "npe_rate"),
    ];
    for (o, key) in bad {
        let s = scenario(o);
        let e = atmlab_sim::runner::prepare(&s, &GatewayKind)
            .err()
            .unwrap_or_else(|| panic!("{o} accepted"));
        assert!(e.to_string().contains(key), "{o}: {e}");
    }
    let s = scenario("run.warmup=\"auto\"");
    assert!(run(&s, &GatewayKind, &RunOptions::default()).is_err());
}
