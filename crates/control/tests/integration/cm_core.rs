//! The connection manager core, mechanism by mechanism, against real switch cores in a
//! deterministic harness (virtual time, delivery in rounds, losses on demand): cache hits
//! take one round and misses two; the aggregator sends at T and at the time-out; lost
//! requests and lost replies are recovered; a failed hop rolls the call back and leaks
//! nothing; T follows the arrival rate between regions. Recovery and inspection (audit,
//! reconcile, lingering releases, sweeps) are in [`recovery`], multipoint trees and their
//! changes in [`trees`].

use std::collections::{HashMap, HashSet};

use atmlab_control::cm::adaptive::Regions;
use atmlab_control::cm::core::{CallEvent, CmConfig, CmCore, CmKind, HopSpec, SetupRequest};
use atmlab_core::ids::PortId;
use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::switch::{Reply, Switch};
use atmlab_fabric::{FabricError, SwitchConfig};

use crate::common::line_route;

mod recovery;
mod trees;

/// Three switches in a line, each with ports 0 (in) and 1 (out).
struct Net {
    switches: HashMap<String, Switch>,
    now: Instant,
    /// Request ids whose command is lost on the way (the switch never sees it).
    lose_request: HashSet<u64>,
    /// Request ids whose reply is lost on the way back (the switch applied it).
    lose_reply: HashSet<u64>,
    /// The switch server's duplicate suppression (as the live stream does).
    answered: HashMap<u64, Result<Reply, FabricError>>,
    /// Switches that receive nothing (a dead server).
    dead: HashSet<String>,
    /// Switches whose every answer is lost (the command still runs).
    mute: HashSet<String>,
    /// Messages delivered per switch.
    messages: HashMap<String, u64>,
    events: Vec<CallEvent>,
}

impl Net {
    fn new(capacity_s2: Option<f64>) -> Self {
        Self::with_ports(2, capacity_s2)
    }

    /// Three switches of `ports` ports each; `capacity_s2` limits s2's port 1.
    fn with_ports(ports: u16, capacity_s2: Option<f64>) -> Self {
        let mut switches = HashMap::new();
        for name in ["s1", "s2", "s3"] {
            let mut cfg = SwitchConfig::uniform(name, ports, BitRate(155.52e6));
            if name == "s2"
                && let Some(c) = capacity_s2
            {
                cfg.ports[1].capacity = CellRate(c);
            }
            switches.insert(name.to_string(), Switch::new(&cfg).unwrap());
        }
        Net {
            switches,
            now: Instant::from_picos(0),
            lose_request: HashSet::new(),
            lose_reply: HashSet::new(),
            answered: HashMap::new(),
            dead: HashSet::new(),
            mute: HashSet::new(),
            messages: HashMap::new(),
            events: Vec::new(),
        }
    }

    /// One round: every batch the core has ready goes out, every switch answers, every
    /// answer comes back. Returns how many batches went out.
    fn round(&mut self, core: &mut CmCore) -> usize {
        let mut replies = Vec::new();
        let mut sent = 0;
        while let Some(t) = core.poll_transmit(self.now) {
            sent += 1;
            *self.messages.entry(t.switch.to_string()).or_default() += 1;
            if self.dead.contains(&*t.switch) {
                continue;
            }
            let sw = self.switches.get_mut(&*t.switch).unwrap();
            for (req, cmd) in t.commands {
                if self.lose_request.remove(&req) {
                    continue;
                }
                let r = self
                    .answered
                    .entry(req)
                    .or_insert_with(|| sw.apply(&cmd))
                    .clone();
                if self.lose_reply.remove(&req) || self.mute.contains(&*t.switch) {
                    continue;
                }
                replies.push((req, r));
            }
        }
        for (req, r) in replies {
            core.handle_reply(self.now, req, r);
        }
        while let Some(e) = core.poll_event() {
            self.events.push(e);
        }
        sent
    }

    /// Rounds until nothing moves; returns the number of rounds that sent something.
    fn settle(&mut self, core: &mut CmCore) -> usize {
        let mut rounds = 0;
        while self.round(core) > 0 {
            rounds += 1;
        }
        rounds
    }

    fn advance(&mut self, core: &mut CmCore, by: Duration) {
        self.now = self.now.saturating_add(by);
        core.handle_timeout(self.now);
    }

    fn empty(&self) -> bool {
        self.switches.values().all(|s| {
            s.connections().is_empty()
                && s.ports()
                    .iter()
                    .all(|p| p.allocated == 0.0 && p.committed == 0 && p.buffer_allocated == 0)
        })
    }

    fn reservations(&self) -> usize {
        self.switches.values().map(|s| s.reservations().len()).sum()
    }
}

fn call(pcr: f64) -> SetupRequest {
    SetupRequest {
        routes: vec![("b".into(), line_route())],
        traffic: TrafficDescriptor::cbr(CellRate(pcr)),
        clr: 0.0,
        buffer_cells: 0,
        tag: "t".into(),
    }
}

fn xbind() -> CmConfig {
    CmConfig {
        cache_fill: 8,
        cache_low: 2,
        cache_max: 32,
        ..CmConfig::new(CmKind::Xbind)
    }
}

fn established(net: &Net, id: u64) -> bool {
    net.events
        .iter()
        .any(|e| matches!(e, CallEvent::Established { call, .. } if *call == id))
}

#[test]
fn xbind_cache_hits_take_one_round_and_misses_two() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(xbind()).unwrap();
    let a = core.add(net.now, call(100.0));
    assert_eq!(
        net.settle(&mut core),
        2,
        "cold caches: reserve, then commit"
    );
    assert!(established(&net, a));
    let cold = core.stats();
    assert!(
        cold.identifier_commands > 0 && cold.identifier_commands < cold.commands,
        "misses cost identifier commands beside the 3 commits: {cold:?}"
    );
    let b = core.add(net.now, call(100.0));
    assert_eq!(net.settle(&mut core), 1, "warm caches: commit only");
    assert!(established(&net, b));
    let warm = core.stats();
    assert_eq!(
        (
            warm.commands - cold.commands,
            warm.identifier_commands - cold.identifier_commands
        ),
        (3, 0),
        "a hit costs the 3 commits and no identifier command"
    );
    let (hits, misses) = core.cache_counts();
    assert_eq!((hits, misses), (4, 4), "4 identifier slots per 3-hop call");
    // Delete both: the switches' tables empty, the identifiers back in the caches.
    core.delete(net.now, a);
    core.delete(net.now, b);
    net.settle(&mut core);
    assert_eq!(
        net.events
            .iter()
            .filter(|e| matches!(e, CallEvent::Released { .. }))
            .count(),
        2
    );
    assert!(net.empty());
    let released = core.stats();
    assert_eq!(
        released.identifier_commands, warm.identifier_commands,
        "releases are call commands"
    );
    core.drain_caches(net.now);
    net.settle(&mut core);
    assert_eq!(net.reservations(), 0, "every reservation returned");
    let drained = core.stats();
    assert_eq!(
        drained.commands - released.commands,
        drained.identifier_commands - released.identifier_commands,
        "returning the caches' identifiers is identifier commands only"
    );
    assert!(drained.identifier_commands > released.identifier_commands);
}

#[test]
fn sequential_takes_two_rounds_per_hop_plus_one() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(CmConfig::new(CmKind::Sequential)).unwrap();
    let a = core.add(net.now, call(100.0));
    assert_eq!(
        net.settle(&mut core),
        7,
        "reserve slot 0, then reserve + commit per hop"
    );
    assert!(established(&net, a));
    core.delete(net.now, a);
    assert_eq!(
        net.settle(&mut core),
        4,
        "release per hop, then slot 0 returned"
    );
    assert!(net.empty());
    assert_eq!(net.reservations(), 0);
    assert_eq!(
        core.stats().messages,
        core.stats().commands,
        "one command per message"
    );
}

#[test]
fn the_aggregator_sends_at_t_and_at_the_time_out() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(CmConfig {
        threshold: 4,
        flush_timeout: Duration::from_millis(1),
        ..xbind()
    })
    .unwrap();
    // Warm the caches (their fills go at the time-out: one command per switch).
    for (s, p) in [("s1", 0), ("s1", 1), ("s2", 1), ("s3", 1)] {
        core.prefill(net.now, s, p);
    }
    assert_eq!(
        net.round(&mut core),
        0,
        "below T, before the time-out: nothing sent"
    );
    net.advance(&mut core, Duration::from_millis(1));
    assert_eq!(
        net.round(&mut core),
        3,
        "the time-out flushes each switch's queue"
    );
    net.messages.clear();
    // Three calls: each puts one commit on each switch: below T = 4.
    let ids: Vec<u64> = (0..3).map(|_| core.add(net.now, call(10.0))).collect();
    assert_eq!(net.round(&mut core), 0);
    // The fourth reaches T on every switch: one message each carrying 4 commits.
    let d = core.add(net.now, call(10.0));
    assert_eq!(net.round(&mut core), 3);
    assert!(ids.iter().chain([&d]).all(|&i| established(&net, i)));
    assert_eq!(net.messages.values().sum::<u64>(), 3);
    // One more call waits for the time-out.
    let e = core.add(net.now, call(10.0));
    assert_eq!(net.round(&mut core), 0);
    assert!(core.poll_timeout().is_some());
    net.advance(&mut core, Duration::from_millis(1));
    net.settle(&mut core);
    assert!(established(&net, e));
}

#[test]
fn lost_requests_and_lost_replies_are_recovered() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(CmConfig {
        command_timeout: Duration::from_millis(10),
        ..xbind()
    })
    .unwrap();
    let a = core.add(net.now, call(10.0));
    net.settle(&mut core);
    assert!(established(&net, a));
    // The next call's commits get request ids after the ones used so far; lose one
    // request and one reply among them.
    let next = core.stats().commands + 1;
    net.lose_request.insert(next + 1);
    net.lose_reply.insert(next + 2);
    let b = core.add(net.now, call(10.0));
    net.settle(&mut core);
    assert!(!established(&net, b), "two hops unanswered");
    net.advance(&mut core, Duration::from_millis(10));
    net.settle(&mut core);
    assert!(
        established(&net, b),
        "re-sent with the same ids and answered"
    );
    assert_eq!(core.stats().retries, 2);
    // Exactly one connection per hop per call: the lost reply's retry ran once.
    assert!(net.switches.values().all(|s| s.connections().len() == 2));
}

#[test]
fn a_failed_hop_rolls_the_call_back_and_leaks_nothing() {
    for kind in [CmKind::Xbind, CmKind::Sequential] {
        // s2's output port admits 50 cells/s: a call asking 100 is refused there.
        let mut net = Net::new(Some(50.0));
        let mut core = CmCore::new(CmConfig { kind, ..xbind() }).unwrap();
        let a = core.add(net.now, call(100.0));
        net.settle(&mut core);
        let failed = net.events.iter().find_map(|e| match e {
            CallEvent::Failed { call, error } if *call == a => Some(error.clone()),
            _ => None,
        });
        let error =
            failed.unwrap_or_else(|| panic!("{kind:?}: the call did not fail: {:?}", net.events));
        assert!(error.blocked(), "{kind:?}: {error:?}");
        assert!(error.message.contains("cells/s"), "{}", error.message);
        assert!(net.empty(), "{kind:?}: a committed hop was left behind");
        assert_eq!(core.active(), 0);
        assert_eq!(core.stats().blocked, 1);
        core.drain_caches(net.now);
        net.settle(&mut core);
        assert_eq!(net.reservations(), 0, "{kind:?}: identifiers leaked");
    }
}

#[test]
fn a_switch_that_never_answers_fails_the_call_after_the_retries() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(CmConfig {
        command_timeout: Duration::from_millis(10),
        max_retries: 2,
        ..xbind()
    })
    .unwrap();
    let a = core.add(net.now, call(10.0));
    net.settle(&mut core);
    assert!(established(&net, a));
    // s2 dies: the next call's commit there is never answered.
    net.dead.insert("s2".into());
    let b = core.add(net.now, call(10.0));
    net.settle(&mut core);
    for _ in 0..3 {
        net.advance(&mut core, Duration::from_millis(10));
        net.settle(&mut core);
    }
    let error = net.events.iter().find_map(|e| match e {
        CallEvent::Failed { call, error } if *call == b => Some(error.clone()),
        _ => None,
    });
    let error = error.unwrap_or_else(|| panic!("no failure: {:?}", net.events));
    assert!(
        error.message.contains("did not answer"),
        "{}",
        error.message
    );
    assert!(!error.blocked());
    // s1's and s3's hops of the failed call were rolled back; call a is untouched.
    assert_eq!(net.switches["s1"].connections().len(), 1);
    assert_eq!(net.switches["s3"].connections().len(), 1);
    assert_eq!(core.stats().failed, 1);
    assert!(core.stats().retries >= 2);
}

#[test]
fn adaptive_t_follows_the_arrival_rate_between_regions() {
    let regions = Regions {
        bounds: vec![1_000.0, 10_000.0],
        thresholds: vec![1, 4, 10],
        window: Duration::from_millis(10),
    };
    let mut core = CmCore::new(CmConfig {
        adaptive: Some(regions),
        ..xbind()
    })
    .unwrap();
    let mut now = Instant::from_picos(0);
    let mut offer = |core: &mut CmCore, rate: f64, secs: f64| {
        let gap = Duration::from_picos((1e12 / rate) as u64);
        let n = (rate * secs) as u64;
        for _ in 0..n {
            now = now.saturating_add(gap);
            let id = core.add(now, call(1.0));
            core.delete(now, id);
            while core.poll_transmit(now).is_some() {}
        }
        core.handle_timeout(now);
    };
    offer(&mut core, 500.0, 0.2);
    assert_eq!(core.load().1, 0);
    assert_eq!(core.config().threshold, 1);
    offer(&mut core, 5_000.0, 0.1);
    assert_eq!(core.load().1, 1, "rate {}", core.load().0);
    assert_eq!(core.config().threshold, 4);
    offer(&mut core, 50_000.0, 0.05);
    assert_eq!(core.load().1, 2, "rate {}", core.load().0);
    assert_eq!(core.config().threshold, 10);
    offer(&mut core, 200.0, 0.5);
    assert_eq!(core.load().1, 0, "rate {}", core.load().0);
    assert_eq!(core.config().threshold, 1);
}

#[test]
fn ports_of_the_route_are_what_commits_use() {
    // A guard on the identifier-slot convention: slot 0 lives on the first switch's input
    // port, and each hop's output identifier is the next hop's input identifier.
    let mut net = Net::new(None);
    let mut core = CmCore::new(xbind()).unwrap();
    let a = core.add(net.now, call(10.0));
    net.settle(&mut core);
    let v = core.view(a).unwrap();
    assert_eq!(v.hops.len(), 3);
    for w in v.hops.windows(2) {
        assert_eq!(w[0].3, w[1].2, "out id of a hop is the in id of the next");
    }
    assert_eq!(v.source_vc, v.hops[0].2);
    assert_eq!(v.destination_vc, v.hops[2].3);
    let s1 = &net.switches["s1"];
    let c = &s1.connections()[0];
    assert_eq!((c.in_port, c.in_id), (PortId(0), v.source_vc));
}

#[test]
fn a_burst_that_exhausts_identifiers_blocks_calls_and_leaks_nothing() {
    let mut net = Net::new(None);
    for s in net.switches.values_mut() {
        let mut cfg = SwitchConfig::uniform("x", 2, BitRate(155.52e6));
        cfg.name = s.name().to_string();
        for p in &mut cfg.ports {
            p.vci_range = (32, 200);
        }
        *s = Switch::new(&cfg).unwrap();
    }
    let mut core = CmCore::new(CmConfig {
        cache_fill: 64,
        cache_low: 16,
        cache_max: 100,
        ..xbind()
    })
    .unwrap();
    // 60 calls at once: each cold slot misses and asks for a fill of 64 out of 169.
    let ids: Vec<u64> = (0..60).map(|_| core.add(net.now, call(10.0))).collect();
    net.settle(&mut core);
    let up: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|&i| established(&net, i))
        .collect();
    let blocked = core.stats().blocked;
    assert!(blocked > 0, "identifiers ran out: some calls are blocked");
    assert_eq!(up.len() as u64 + blocked + core.stats().failed, 60);
    for &i in &up {
        core.delete(net.now, i);
    }
    net.settle(&mut core);
    assert!(net.empty());
    core.drain_caches(net.now);
    net.settle(&mut core);
    let left: Vec<_> = net
        .switches
        .values()
        .flat_map(|s| s.reservations())
        .collect();
    assert!(
        left.is_empty(),
        "{} reservations leaked: {:?}",
        left.len(),
        &left[..left.len().min(5)]
    );
}

#[test]
fn a_rollback_whose_last_answer_is_another_failure_still_returns_everything() {
    // s2 and s3 both refuse: the last answer the rolling-back call awaits is an error.
    let mut net = Net::new(Some(50.0));
    let mut cfg = SwitchConfig::uniform("s3", 2, BitRate(155.52e6));
    cfg.ports[1].capacity = CellRate(50.0);
    net.switches.insert("s3".into(), Switch::new(&cfg).unwrap());
    let mut core = CmCore::new(xbind()).unwrap();
    core.add(net.now, call(100.0));
    net.settle(&mut core);
    assert_eq!(core.stats().blocked, 1);
    assert!(net.empty(), "s1's committed hop was released");
    core.drain_caches(net.now);
    net.settle(&mut core);
    assert_eq!(net.reservations(), 0);
}

#[test]
fn the_route_cache_serves_a_pair_until_its_time_out() {
    use atmlab_control::cm::live::Router;
    use atmlab_control::cm::routes::CachedRouter;
    use atmlab_control::route::{NetworkView, PortState, RouteObject};
    use std::sync::{Arc, Mutex};
    let port = |p: u16, peer: Option<(&str, u16)>| PortState {
        port: p,
        capacity: 1e6,
        allocated: 0.0,
        peer: peer.map(|(s, q)| (s.to_string(), q)),
    };
    let view = NetworkView {
        switches: vec![
            ("s1".into(), vec![port(0, None), port(1, Some(("s2", 0)))]),
            ("s2".into(), vec![port(0, Some(("s1", 1))), port(1, None)]),
        ],
        hosts: vec![("a".into(), "s1".into(), 0), ("b".into(), "s2".into(), 1)],
    };
    let route = Arc::new(Mutex::new(RouteObject::new(view).unwrap()));
    let mut r = CachedRouter::new(route, Duration::from_secs(5));
    let t0 = Instant::from_picos(0);
    let hops = r.route(t0, "a", "b", 10.0).unwrap();
    assert_eq!(hops.len(), 2);
    assert_eq!(
        (
            hops[0].in_port,
            hops[0].out_port,
            hops[1].in_port,
            hops[1].out_port
        ),
        (0, 1, 0, 1)
    );
    assert_eq!(
        r.route(t0.saturating_add(Duration::from_secs(4)), "a", "b", 10.0)
            .unwrap(),
        hops
    );
    assert_eq!((r.hits, r.misses), (1, 1));
    r.route(t0.saturating_add(Duration::from_secs(5)), "a", "b", 10.0)
        .unwrap();
    assert_eq!((r.hits, r.misses), (1, 2), "timed out: routed afresh");
    let e = r.route(t0, "a", "nowhere", 10.0).unwrap_err();
    assert_eq!(e.kind, atmlab_fabric::ErrorKind::InvalidArgument);
}

#[test]
fn nv_counts_identifiers_taken_and_not_yet_committed() {
    // Paper 000 §IV-A: N_v rises by one when a call takes an identifier from a port's
    // cache and falls when the commit carrying it is answered.
    let mut net = Net::new(None);
    let mut core = CmCore::new(CmConfig {
        cache_fill: 16,
        cache_low: 1,
        ..xbind()
    })
    .unwrap();
    for (sw, port) in [("s1", 0), ("s1", 1), ("s2", 1), ("s3", 1)] {
        core.prefill(net.now, sw, port);
    }
    net.settle(&mut core);
    // Three calls arrive before any commit is answered: they see 0, 1 and 2 in use.
    let ids: Vec<u64> = (0..3).map(|_| core.add(net.now, call(100.0))).collect();
    net.advance(&mut core, Duration::from_micros(250));
    net.settle(&mut core);
    assert!(ids.iter().all(|&id| established(&net, id)));
    let probes = core.nv_probes();
    let ports: Vec<(String, u16)> = probes.iter().map(|(s, p, _)| (s.clone(), *p)).collect();
    assert_eq!(
        ports,
        vec![("s1".into(), 1), ("s2".into(), 1), ("s3".into(), 1)],
        "output ports only"
    );
    for (_, _, p) in &probes {
        assert_eq!(p.at_arrival, vec![1, 1, 1]);
        assert_eq!(p.in_use, 0, "every commit answered");
        assert_eq!(p.latencies, 3);
        assert_eq!(p.mean_latency(), Duration::from_micros(250));
        assert_eq!(
            p.hit_ratio(2),
            2.0 / 3.0,
            "a cache of 2 would have missed once"
        );
    }
    // A call refused at s2 still ends its use of every identifier it took.
    let mut net = Net::new(Some(50.0));
    let mut core = CmCore::new(xbind()).unwrap();
    for (sw, port) in [("s1", 0), ("s1", 1), ("s2", 1), ("s3", 1)] {
        core.prefill(net.now, sw, port);
    }
    net.settle(&mut core);
    core.add(net.now, call(100.0));
    net.settle(&mut core);
    assert_eq!(core.stats().blocked, 1);
    for (_, _, p) in core.nv_probes() {
        assert_eq!(p.in_use, 0);
        assert_eq!(p.latencies, 1);
    }
}

/// One replication of a loss system: Poisson calls at `rate`, exponential holding of
/// mean 1 s, through a bottleneck that admits `n` calls, set up and released by the
/// xbind manager against real switch cores (answers in zero time). Returns the fraction
/// of calls blocked after a warm-up of `warm` calls.
fn loss_run(n: u32, rate: f64, calls: usize, warm: usize, seed: u64) -> f64 {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let pcr = 1_000.0;
    // s2's output admits n calls of `pcr` cells/s (CBR: effective bandwidth = PCR).
    let mut net = Net::new(Some(n as f64 * pcr + pcr / 2.0));
    let mut core = CmCore::new(CmConfig {
        cache_fill: 64,
        cache_low: 16,
        cache_max: 256,
        ..xbind()
    })
    .unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let gaps = Exp::new(rate).unwrap();
    let holds = Exp::new(1.0).unwrap();
    let mut departures: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let (mut t, mut offered, mut blocked) = (0.0f64, 0usize, 0usize);
    for i in 0..calls {
        t += gaps.sample(&mut rng);
        let at = (t * 1e12) as u64;
        // Releases due before this arrival go first.
        while let Some(Reverse((d, id))) = departures.peek().copied() {
            if d > at {
                break;
            }
            departures.pop();
            net.now = Instant::from_picos(d);
            core.delete(net.now, id);
            net.settle(&mut core);
        }
        net.now = Instant::from_picos(at);
        let before = net.events.len();
        let id = core.add(net.now, call(pcr));
        net.settle(&mut core);
        let outcome = net.events[before..].iter().find_map(|e| match e {
            CallEvent::Established { call, .. } if *call == id => Some(true),
            CallEvent::Failed { call, error } if *call == id => {
                assert!(error.blocked(), "only blocking may refuse: {error:?}");
                Some(false)
            }
            _ => None,
        });
        let ok = outcome.expect("zero-time answers decide every call at once");
        if ok {
            let hold = holds.sample(&mut rng);
            departures.push(Reverse((at + (hold * 1e12) as u64, id)));
        }
        if i >= warm {
            offered += 1;
            if !ok {
                blocked += 1;
            }
        }
    }
    // Drain: everything released, nothing leaked.
    while let Some(Reverse((d, id))) = departures.pop() {
        net.now = Instant::from_picos(d);
        core.delete(net.now, id);
        net.settle(&mut core);
    }
    assert!(net.empty(), "a connection or bandwidth leaked");
    core.drain_caches(net.now);
    net.settle(&mut core);
    assert_eq!(net.reservations(), 0, "identifiers leaked");
    blocked as f64 / offered as f64
}

#[test]
fn blocking_agrees_with_erlang_b() {
    // Issue 10's Erlang check: N = 10 circuits, offered 7 and 10 erlangs; 10 independent
    // replications each; the 95% Student-t interval of the measured blocking must hold
    // Erlang-B.
    for (n, a) in [(10u32, 7.0f64), (10, 10.0)] {
        let reps: Vec<f64> = (0..10)
            .map(|r| loss_run(n, a, 6_000, 500, 1_000 + r))
            .collect();
        let k = reps.len() as f64;
        let mean = reps.iter().sum::<f64>() / k;
        let var = reps.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1.0);
        let half = 2.262 * (var / k).sqrt(); // t(0.975, 9)
        let b = atmlab_control::cm::dimension::erlang_b(a, n);
        eprintln!("N = {n}, A = {a}: blocking {mean:.4} +- {half:.4}, Erlang-B {b:.4}");
        assert!(
            (mean - b).abs() <= half,
            "N = {n}, A = {a}: measured {mean:.4} +- {half:.4}, Erlang-B {b:.4}"
        );
        assert!(
            half < 0.25 * b,
            "the interval is tight enough to mean something"
        );
    }
}

/// Issue 28 item 3: the setup-age guard. A setup that waited past the configured age
/// before the core took it is refused at once as overloaded, sending no command; one
/// within the age, and any setup without a guard, goes through.
#[test]
fn a_setup_older_than_the_age_guard_is_refused_at_once_without_commands() {
    let mut net = Net::new(None);
    let mut core = CmCore::new(CmConfig {
        max_setup_age: Some(Duration::from_millis(50)),
        ..xbind()
    })
    .unwrap();
    let old = core.add_waited(net.now, call(100.0), Duration::from_millis(51));
    assert_eq!(net.settle(&mut core), 0, "nothing sent for a stale setup");
    let refused = net.events.iter().find_map(|e| match e {
        CallEvent::Failed { call, error } if *call == old => Some(error.clone()),
        _ => None,
    });
    let refused = refused.expect("refused at once");
    assert!(refused.blocked(), "{refused:?}");
    assert!(refused.message.contains("overloaded"), "{refused:?}");
    let s = core.stats();
    assert_eq!(
        (s.blocked, s.commands),
        (1, 0),
        "counted, and no command: {s:?}"
    );
    // Within the age: set up.
    let young = core.add_waited(net.now, call(100.0), Duration::from_millis(49));
    net.settle(&mut core);
    assert!(established(&net, young));
    // No guard: however long it waited.
    let mut unguarded = CmCore::new(xbind()).unwrap();
    let mut net2 = Net::new(None);
    let late = unguarded.add_waited(net2.now, call(100.0), Duration::from_secs(60));
    net2.settle(&mut unguarded);
    assert!(established(&net2, late));
}

/// Issue 28: overload control. With a setup target, setups slower than it cut the bound
/// on calls in setup (once per target interval, down to its floor of 32), and a call past
/// the bound is refused at once as overloaded, costing no command; fast setups raise the
/// bound again. Without a target the bound stays at `max_setups`.
#[test]
fn slow_setups_cut_the_bound_on_calls_in_setup_and_fast_ones_raise_it() {
    let run = |target: Option<Duration>| {
        let mut net = Net::new(None);
        let mut core = CmCore::new(CmConfig {
            max_setups: 64,
            setup_target: target,
            ..xbind()
        })
        .unwrap();
        // Ten setups each answered 20 ms late.
        for _ in 0..10 {
            let id = core.add(net.now, call(1.0));
            net.now = net.now.saturating_add(Duration::from_millis(20));
            net.settle(&mut core);
            assert!(established(&net, id));
        }
        let bound = core.setup_bound();
        // Forty calls at once.
        let ids: Vec<u64> = (0..40).map(|_| core.add(net.now, call(1.0))).collect();
        let refused: Vec<String> = net
            .events
            .iter()
            .chain(
                std::iter::from_fn(|| core.poll_event())
                    .collect::<Vec<_>>()
                    .iter(),
            )
            .filter_map(|e| match e {
                CallEvent::Failed { call, error } if ids.contains(call) => {
                    assert!(error.blocked(), "{error:?}");
                    Some(error.message.clone())
                }
                _ => None,
            })
            .collect();
        net.settle(&mut core);
        let set_up = ids.iter().filter(|&&id| established(&net, id)).count();
        // Eight more fast setups: a round (the bound's worth) and then some.
        for _ in 0..8 {
            core.add(net.now, call(1.0));
        }
        net.settle(&mut core);
        (bound, refused, set_up, core.setup_bound())
    };
    let (bound, refused, set_up, after) = run(Some(Duration::from_millis(10)));
    assert_eq!(bound, 32, "cut to the floor: 64 x 0.9^10 is below it");
    assert_eq!((refused.len(), set_up), (8, 32), "{refused:?}");
    assert!(refused[0].contains("overloaded"), "{}", refused[0]);
    assert_eq!(after, 33, "40 fast setups, a round and more: one more call");
    let (bound, refused, set_up, after) = run(None);
    assert_eq!((bound, refused.len(), set_up, after), (64, 0, 40, 64));
}
