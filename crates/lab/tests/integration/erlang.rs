//! The live control plane against Erlang's loss formula (issue 23, item 4, "Theory"; the
//! simulated control plane passes the same check in `atmlab_models::control`): on the line
//! of three switches with ports admitting 12 calls (1,250 cells/s, CBR calls of 100
//! cells/s), every call a -> b needs one circuit on each of the same three output ports,
//! a trunk of 12 circuits, so the share of calls refused is Erlang-B's at the offered
//! load, whatever the holding-time law.
//!
//! The offered load is the arrival rate times the mean time a call holds a circuit at
//! the switch, measured, not assumed: a circuit is held from the commit that admits its
//! bandwidth to the release that returns it, which is the 80 ms the caller holds the call
//! plus the rest of the setup after the commit and the whole release path. Each switch
//! server's own event feed (`LocalSwitch::subscribe`: a Committed event per connection
//! installed, a Released event per connection removed, published as the table changes)
//! is read by an OS thread that stamps each event as it arrives; the mean of release
//! minus commit over every connection is the mean hold at that switch.
//!
//! The route object's view is a snapshot (refreshed every second), so admission control
//! at the switches must decide: the test also counts the calls the route cache refused
//! without asking the switches ("blocked: no route ..."), which must be none, and those
//! the manager refused for its own limit, none too.
//!
//! The blocking's 95% interval is by batch means (20 batches of offer time, Student's t):
//! refusals come in runs while the trunk is full, so a binomial interval over calls
//! would be too narrow. The first second (the trunk filling from empty) is left out of
//! every estimate.
//!
//! Measured (debug build, this 2-core machine under other work, 54 s of arrivals per
//! manager, about 6,000 calls), blocking with its interval against Erlang-B at
//! A = measured rate x measured mean hold at s1:
//!
//! | run | manager | blocking (95%) | hold at s1 | A | Erlang-B |
//! | --- | --- | --- | --- | --- | --- |
//! | 1 | xbind T = 1 | 0.0881 (0.0707-0.1036) | 82.3 ms | 9.06 | 0.0852 |
//! | 1 | sequential | 0.1319 (0.1010-0.1601) | 89.5 ms | 10.07 | 0.1224 |
//! | 2 | xbind T = 1 | 0.0913 (0.0741-0.1066) | 83.3 ms | 9.17 | 0.0890 |
//! | 2 | sequential | 0.1045 (0.0904-0.1165) | 84.9 ms | 9.55 | 0.1029 |
//! | 3 | xbind T = 1 | 0.0928 (0.0724-0.1113) | 83.3 ms | 9.17 | 0.0890 |
//! | 3 | sequential | 0.1208 (0.0948-0.1440) | 87.6 ms | 9.86 | 0.1143 |
//!
//! (Run 3 beside the lab's other heavy tests, as `scripts/test.sh` runs them.)
//!
//! The hold is the caller's 80 ms plus 2-10 ms of setup after the commit and of release
//! (more for the sequential manager, which releases hop by hop and serialises its
//! operations); it is nearly the same at the three switches (run 2, xbind: 83.3 ms at
//! each). The sequential manager's blocking sits about 0.01 above the share of time s1
//! was full (run 2: 0.1045 against 0.0950): hop by hop, a call s1 admits can still find
//! s2 or s3 full, since each holds its circuit over a slightly shifted interval. So it
//! blocks a little above Erlang-B in every run (by 0.002-0.010), inside the interval;
//! the test cannot resolve an excess that small.
//!
//! Before the call generator drew holds and arrivals from separate streams, each hold
//! was nine times the gap before its call (one seeded stream read by the pacer thread
//! and by the loop): the same network then blocked 0.098 against Erlang-B's 0.116 at the
//! measured load, outside the interval, and this test failed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atmlab_control::cm::core::{CallError, CmConfig, CmKind};
use atmlab_control::cm::dimension::erlang_b;
use atmlab_control::cm::live::CmHandle;
use atmlab_control::net::Topology;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_fabric::live::local::{LocalSwitch, SwitchEvent};
use atmlab_lab::callgen::{self, CallTarget, Load};
use atmlab_lab::launch::{Lab, LabSpec, xbind_config};
use tokio::sync::broadcast::error::RecvError;

/// The circuits of a port: 1,250 cells/s over calls of 100 cells/s.
const CIRCUITS: u32 = 12;

/// What became of one call, by when it was offered.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Established,
    /// Refused by a switch's admission control.
    BlockedAtSwitch,
    /// Refused by the route cache without asking the switches (a stale view).
    BlockedByView,
    /// Refused by the manager itself (too many setups in progress).
    BlockedByManager,
    Failed,
}

/// A manager whose calls are recorded with the instant each was offered.
#[derive(Clone)]
struct Recorded {
    cm: CmHandle,
    calls: Arc<Mutex<Vec<(Instant, Outcome)>>>,
}

impl CallTarget for Recorded {
    async fn setup(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
    ) -> Result<u64, CallError> {
        let at = Instant::now();
        let r = self.cm.setup(source, destination, traffic).await;
        let outcome = match &r {
            Ok(_) => Outcome::Established,
            Err(e) if e.blocked() && e.message.contains("no route") => Outcome::BlockedByView,
            Err(e) if e.blocked() && e.message.contains("overloaded") => Outcome::BlockedByManager,
            Err(e) if e.blocked() => Outcome::BlockedAtSwitch,
            Err(_) => Outcome::Failed,
        };
        self.calls.lock().unwrap().push((at, outcome));
        r
    }

    async fn release(&self, id: u64) -> Result<(), CallError> {
        self.cm.release(id).await
    }
}

/// Each connection's (commit instant, hold) on one switch, stamped by an OS thread as
/// the switch publishes its events (a thread, so the stamps do not wait on the test's
/// runtime). `pending` counts connections committed and not yet released.
#[derive(Default)]
struct Holds {
    done: Vec<(Instant, Duration)>,
    /// Every change of the connections in place: (instant, +1 or -1).
    changes: Vec<(Instant, i32)>,
    pending: usize,
    lagged: u64,
}

fn watch_holds(switch: &LocalSwitch) -> Arc<Mutex<Holds>> {
    let holds = Arc::new(Mutex::new(Holds::default()));
    let mut rx = switch.subscribe();
    let out = holds.clone();
    std::thread::spawn(move || {
        let mut open: HashMap<u64, Instant> = HashMap::new();
        loop {
            let ev = rx.blocking_recv();
            let now = Instant::now();
            let mut h = out.lock().unwrap();
            match ev {
                Ok(e) => match e.event {
                    SwitchEvent::Committed(c) => {
                        open.insert(c.id, now);
                        h.changes.push((now, 1));
                    }
                    SwitchEvent::Released(id) => {
                        if let Some(t) = open.remove(&id) {
                            h.done.push((t, now - t));
                            h.changes.push((now, -1));
                        }
                    }
                    _ => {}
                },
                Err(RecvError::Lagged(n)) => h.lagged += n,
                Err(RecvError::Closed) => return,
            }
            h.pending = open.len();
        }
    });
    holds
}

/// A switch's connections over [from, until): the share of time all the circuits were in
/// use, the mean number in use, and the commits per second.
fn occupancy(w: &Holds, from: Instant, until: Instant) -> (f64, f64, f64) {
    let (mut n, mut last, mut full, mut area, mut commits) = (0i32, from, 0.0, 0.0, 0usize);
    let close = |n: i32, to: Instant, last: Instant, full: &mut f64, area: &mut f64| {
        let dt = (to - last).as_secs_f64();
        *area += f64::from(n) * dt;
        if n >= CIRCUITS as i32 {
            *full += dt;
        }
    };
    for &(t, d) in &w.changes {
        if t >= until {
            break;
        }
        if t > from {
            close(n, t, last, &mut full, &mut area);
            last = t;
            commits += usize::from(d > 0);
        }
        n += d;
    }
    close(n, until, last, &mut full, &mut area);
    let window = (until - from).as_secs_f64();
    (full / window, area / window, commits as f64 / window)
}

/// What one manager's run measured.
#[derive(Debug)]
struct Measured {
    calls: usize,
    blocking: f64,
    /// The 95% batch-means interval of `blocking`.
    interval: (f64, f64),
    /// Mean hold at s1, s2, s3, seconds.
    holds: [f64; 3],
    arrival_rate: f64,
    offered: f64,
    erlang_b: f64,
    by_view: usize,
    by_manager: usize,
    /// The share of time all 12 circuits were in use at s1, s2, s3.
    time_congestion: [f64; 3],
    /// At s1: the mean circuits in use, and the connections committed per second.
    in_use: f64,
    commits_per_s: f64,
    mean_setup_ms: f64,
}

/// Two-sided 97.5% quantile of Student's t with 19 degrees of freedom (20 batches).
const T_19: f64 = 2.093;
const BATCHES: usize = 20;
/// Seconds of arrivals per manager: the first is left out, the rest make 20 batches of
/// 2.7 s (about 300 calls, 33 mean holds each).
const SECONDS: u64 = 55;

async fn run(lab: &Lab, config: CmConfig, seconds: u64, seed: u64) -> Measured {
    let watchers: Vec<_> = lab
        .net
        .switches
        .iter()
        .map(|s| watch_holds(&s.switch))
        .collect();
    let cm = lab.manager(config).await.unwrap();
    let target = Recorded {
        cm: cm.clone(),
        calls: Arc::default(),
    };
    let load = Load {
        rate: 112.5,
        duration: Duration::from_secs(seconds),
        holding: Duration::from_millis(80),
        fixed_holding: false,
        pairs: vec![("a".into(), "b".into())],
        traffic: TrafficDescriptor::cbr(CellRate(100.0)),
        seed,
        precise: true,
    };
    let start = Instant::now();
    let report = callgen::run(target.clone(), &load).await;
    assert_eq!(report.failed, 0, "{report:?}");
    // Every call has been released (the generator waits for them); the watchers may
    // still be reading the last events.
    let deadline = Instant::now() + Duration::from_secs(30);
    while watchers.iter().any(|w| w.lock().unwrap().pending > 0) {
        assert!(
            Instant::now() < deadline,
            "the switches' releases never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cm.shutdown().await;
    // The first second is the system filling from empty: left out of every estimate.
    let from = start + Duration::from_secs(1);
    let until = start + load.duration;
    let window = (until - from).as_secs_f64();
    let calls = target.calls.lock().unwrap().clone();
    let counted: Vec<_> = calls
        .iter()
        .filter(|(t, _)| *t >= from && *t < until)
        .collect();
    let refused = |o: &Outcome| {
        matches!(
            o,
            Outcome::BlockedAtSwitch | Outcome::BlockedByView | Outcome::BlockedByManager
        )
    };
    assert!(counted.iter().all(|(_, o)| *o != Outcome::Failed));
    let blocking = counted.iter().filter(|(_, o)| refused(o)).count() as f64 / counted.len() as f64;
    // Batch means over 20 equal spans of offer time: blocked calls come in runs (a full
    // trunk refuses every arrival until a release), so the calls are not independent
    // trials, but batches of ~2.5 s (30 holds) nearly are.
    let span = window / BATCHES as f64;
    let mut per = vec![(0usize, 0usize); BATCHES];
    for (t, o) in &counted {
        let b = (((*t - from).as_secs_f64() / span) as usize).min(BATCHES - 1);
        per[b].0 += usize::from(refused(o));
        per[b].1 += 1;
    }
    let means: Vec<f64> = per.iter().map(|&(b, n)| b as f64 / n as f64).collect();
    let m = means.iter().sum::<f64>() / BATCHES as f64;
    let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (BATCHES - 1) as f64;
    let half = T_19 * (var / BATCHES as f64).sqrt();
    let holds: Vec<f64> = watchers
        .iter()
        .map(|w| {
            let w = w.lock().unwrap();
            assert_eq!(w.lagged, 0, "the event feed overflowed");
            let inside: Vec<f64> = w
                .done
                .iter()
                .filter(|(t, _)| *t >= from && *t < until)
                .map(|(_, d)| d.as_secs_f64())
                .collect();
            inside.iter().sum::<f64>() / inside.len() as f64
        })
        .collect();
    let occupancy: Vec<(f64, f64, f64)> = watchers
        .iter()
        .map(|w| occupancy(&w.lock().unwrap(), from, until))
        .collect();
    let (_, in_use, commits_per_s) = occupancy[0];
    let arrival_rate = counted.len() as f64 / window;
    let offered = arrival_rate * holds[0];
    Measured {
        calls: counted.len(),
        blocking,
        interval: (m - half, m + half),
        holds: [holds[0], holds[1], holds[2]],
        arrival_rate,
        offered,
        erlang_b: erlang_b(offered, CIRCUITS),
        by_view: counted
            .iter()
            .filter(|(_, o)| *o == Outcome::BlockedByView)
            .count(),
        by_manager: counted
            .iter()
            .filter(|(_, o)| *o == Outcome::BlockedByManager)
            .count(),
        time_congestion: [occupancy[0].0, occupancy[1].0, occupancy[2].0],
        in_use,
        commits_per_s,
        mean_setup_ms: report.mean_setup_ms,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy tier (scripts/test.sh): a minute of calls against live managers"]
async fn live_blocking_on_a_trunk_of_12_circuits_is_erlang_b() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml"),
    )
    .unwrap()
    .replace(
        "buffer_cells = 1024",
        "buffer_cells = 1024\ncapacity = \"1250 cells/s\"",
    );
    let topology = Topology::parse(&text, "line3, ports admitting 12 calls").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lab = Lab::start(
        LabSpec {
            topology,
            certs: None,
            identity: atmlab_rpc::tls::Subject::new(atmlab_rpc::tls::Role::Admin, "admin"),
            data_dir: dir.path().to_owned(),
            journals: None,
        },
        &mut |_| {},
    )
    .await
    .unwrap();
    let mut results = Vec::new();
    for (name, config, seed) in [
        ("xbind", xbind_config(1), 3),
        ("sequential", CmConfig::new(CmKind::Sequential), 4),
    ] {
        let m = run(&lab, config, SECONDS, seed).await;
        lab.audit(name).await.unwrap();
        eprintln!(
            "{name}: {} calls at {:.2}/s, blocking {:.4} (95% {:.4}-{:.4}); held {:.1}/{:.1}/{:.1} ms \
             at s1/s2/s3, A = {:.3}, Erlang-B {:.4}; full {:.4}/{:.4}/{:.4} of the time; at s1 \
             {:.2} circuits in use, {:.1} commits/s; setup {:.2} ms",
            m.calls,
            m.arrival_rate,
            m.blocking,
            m.interval.0,
            m.interval.1,
            m.holds[0] * 1e3,
            m.holds[1] * 1e3,
            m.holds[2] * 1e3,
            m.offered,
            m.erlang_b,
            m.time_congestion[0],
            m.time_congestion[1],
            m.time_congestion[2],
            m.in_use,
            m.commits_per_s,
            m.mean_setup_ms
        );
        results.push((name, m));
    }
    lab.down().await;
    for (name, m) in &results {
        assert_eq!(m.by_view, 0, "{name}: the route cache refused calls: {m:?}");
        // Refusals by the manager's own limit would be blocking the trunk did not cause.
        assert_eq!(m.by_manager, 0, "{name}: the manager refused calls: {m:?}");
        assert!(
            m.interval.0 <= m.erlang_b && m.erlang_b <= m.interval.1,
            "{name}: blocking {:.4} (95% interval {:.4}-{:.4}, {} calls) against Erlang-B {:.4} at A = {:.3} ({:.2}/s x {:.1} ms held at s1); {m:?}",
            m.blocking,
            m.interval.0,
            m.interval.1,
            m.calls,
            m.erlang_b,
            m.offered,
            m.arrival_rate,
            m.holds[0] * 1e3
        );
    }
}
