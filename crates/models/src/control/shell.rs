//! The simulated shell of the control plane (paper 000 §II-C and §III; DESIGN.md §2: one
//! core, two shells): the real connection manager core ([`CmCore`]), the real switch
//! cores ([`Switch`]), the real route object behind the real route cache
//! ([`CachedRouter`]), driven in virtual time by the engine's event set instead of tokio
//! and gRPC. Nothing here decides what a manager or a switch does; it decides only when
//! things happen, by the [`CostProfile`].
//!
//! Servers: the manager and each switch server are FIFO servers with a number of
//! threads; an input is applied to its core when a thread takes it, and what the core
//! emitted leaves when the thread finishes (after the step's work and the marshalling of
//! what it read and wrote). A synchronous manager (paper 000's sequential and threaded
//! managers, `blocking`) also holds a thread for each operation from its start to its end,
//! so at most `threads` calls are in progress; xbind's asynchronous manager holds none.
//!
//! Counting: an invocation is one request and its answer (a synchronous call, or a
//! oneway message and the oneway message that answers it): the user's AddConnection and
//! DeleteConnection, the QoS mapper's and the route object's queries (the latter only on
//! a route-cache miss), and each message to a switch with its answer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use atmlab_control::cm::core::{CallEvent, CmConfig, CmCore, SetupRequest};
use atmlab_control::cm::routes::{CachedRouter, Router};
use atmlab_control::route::RouteObject;
use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_fabric::FabricError;
use atmlab_fabric::switch::{Command, Reply, Switch};
use atmlab_sim::SimError;
use atmlab_sim::event_set::EventSet;
use atmlab_sim::model::{RepResult, Replication};
use atmlab_sim::rng::{RngFactory, SimRng, exp1};
use atmlab_sim::scenario::{RunLength, Warmup};
use atmlab_sim::stats::Histogram;
use rand::Rng;
use rustc_hash::FxHashMap;

use super::servers::{Answers, Link, LinkJob, Server, SwitchServer};
use super::{ControlConfig, Holding, METRICS, Pairs, probes};

/// A call's route and the contract the QoS mapper gave it (traffic, cell loss ratio).
type Route = (
    Vec<atmlab_control::cm::core::HopSpec>,
    TrafficDescriptor,
    f64,
);

/// What a manager thread works on.
#[derive(Debug)]
enum Work {
    /// A user's AddConnection for call `u` arrived.
    Setup(usize),
    /// The QoS mapper and the route object answered for call `u`.
    Resolved(usize, Result<Route, String>),
    /// A user's DeleteConnection for core call `id`.
    Delete(u64),
    /// Switch `s`'s answer message.
    Replies(usize, Vec<(u64, Result<Reply, FabricError>)>),
    /// The core's timer fired.
    Timeout,
}

/// What leaves when a manager thread finishes.
#[derive(Debug)]
enum Output {
    Transmit(usize, Vec<(u64, Command)>),
    Resolve(usize, Duration, Result<Route, String>),
    Event(CallEvent),
}

/// A server that was idle when work reached it.
#[derive(Debug, Clone, Copy)]
enum Sleeper {
    Manager,
    Link(usize),
    Switch(usize),
}

#[derive(Debug)]
enum Ev {
    /// A server is awake after its `wakeup`.
    Woken(Sleeper),
    Arrival,
    AtManager(Work),
    ManagerDone(usize),
    AtSwitch(usize, Vec<(u64, Command)>),
    SwitchDone(usize, usize),
    /// A switch's answers reach the manager's link to it (`links` profiles).
    AtLink(usize, Answers),
    LinkDone(usize),
    Hangup(u64),
    Timer,
    Mark,
}

/// One user call.
#[derive(Debug, Clone, Copy)]
struct UserCall {
    /// Source and destination, indices into the hosts.
    pair: (usize, usize),
    arrived: Instant,
}

/// The counters of one measured period.
#[derive(Debug, Clone, Default)]
struct Stats {
    calls: Calls,
    manager_busy: Duration,
    switch_busy: Vec<Duration>,
    cache: (u64, u64),
}

/// What every plane counts of its calls in a measured period (the managers' and
/// TINA's).
#[derive(Debug, Clone, Default)]
pub(super) struct Calls {
    pub(super) attempts: u64,
    pub(super) established: u64,
    pub(super) blocked: u64,
    pub(super) failed: u64,
    pub(super) invocations: u64,
    pub(super) latency_sum: f64,
}

impl Calls {
    /// The first seven of [`METRICS`], the ones every plane has: blocking and failure
    /// probability, mean and 99th-percentile setup latency (`latency` holds the
    /// period's setups), setups and offered calls per second, invocations per call.
    pub(super) fn metrics(&self, latency: &Histogram, secs: f64) -> [f64; 7] {
        let decided = (self.established + self.blocked + self.failed) as f64;
        let ratio = |x: u64| {
            if decided > 0.0 {
                x as f64 / decided
            } else {
                0.0
            }
        };
        [
            ratio(self.blocked),
            ratio(self.failed),
            if self.established > 0 {
                self.latency_sum / self.established as f64
            } else {
                f64::NAN
            },
            if latency.count() > 0 {
                latency.quantile(0.99)
            } else {
                f64::NAN
            },
            self.established as f64 / secs,
            self.attempts as f64 / secs,
            if self.attempts > 0 {
                self.invocations as f64 / self.attempts as f64
            } else {
                0.0
            },
        ]
    }
}

/// The whole simulated control plane of one replication.
struct Plane<'a> {
    cfg: &'a ControlConfig,
    events: EventSet<Ev>,
    now: Instant,
    rng: SimRng,
    core: CmCore,
    router: CachedRouter,
    manager: Server<Work, Vec<Output>>,
    switches: Vec<SwitchServer>,
    /// The manager's links, one per switch, when the profile has `links`.
    links: Vec<Link>,
    /// Processors free when the profile shares `cpus` among every server; `None` when
    /// each server has its own.
    cpu_free: Option<usize>,
    index: FxHashMap<String, usize>,
    /// The core's switch numbers (`Transmit::switch_index`) to ours, learnt once each.
    core_index: Vec<Option<usize>>,
    calls: FxHashMap<usize, UserCall>,
    next_call: usize,
    by_core: FxHashMap<u64, usize>,
    /// Operations in progress and waiting for a thread (blocking managers only).
    in_progress: usize,
    waiting_ops: VecDeque<Work>,
    /// The core's timer: the time it asked for, when it fires, and its place among the
    /// events due then (kept out of the event set, see [`EventSet::take_seq`]).
    timer: Option<(Instant, Instant, u64)>,
    timeout_queued: bool,
    /// Whether the switches keep every answer [`ANSWER_KEEP`](super::servers::ANSWER_KEEP) (once the manager has
    /// re-sent a request), or forget it as soon as the manager has it: until a request
    /// is sent twice, each request reaches its switch at most once, and once the manager
    /// has its answer it never sends it again, so nothing can ask for that answer.
    answers_kept: bool,
    stats: Stats,
    latency: Histogram,
    /// Cumulative busy times at the last mark.
    marked: Stats,
    /// The core's probes at the last mark (§IV-A's `N_v`, §IV-B's messages).
    nv_marked: probes::Mark,
    /// The faults' own stream, apart from the calls' (a fault-free run draws nothing
    /// from it, so faults do not move the arrivals).
    fault_rng: SimRng,
    /// No more calls arrive (draining at the end of a leak check).
    arrivals_stopped: bool,
}

impl ControlConfig {
    /// Runs one replication of the managers' plane.
    pub(super) fn run_managers(&self, rep: &Replication) -> Result<RepResult, SimError> {
        let (d, warmup) = lengths(rep)?;
        drive(&mut Plane::new(self, rep)?, rep, d, warmup)
    }
}

/// The run's measured length and warm-up, both durations.
pub(super) fn lengths(rep: &Replication) -> Result<(Duration, Duration), SimError> {
    let d = match rep.length {
        RunLength::Duration(d) => d,
        RunLength::Count(_) => {
            return Err(model_err(
                "runs by duration: set run.duration, not run.count",
            ));
        }
    };
    let warmup = match rep.warmup {
        Warmup::Time(w) => w,
        Warmup::Observations(0) => Duration::ZERO,
        _ => {
            return Err(model_err(
                "the warm-up is a duration (run.warmup = \"30 s\"), not auto",
            ));
        }
    };
    Ok((d, warmup))
}

/// What the replication loop needs of a simulated control plane (the managers' here,
/// TINA's performers' in `tina`): the one loop of marks, batches and metrics for both.
pub(super) trait Driven {
    /// Schedules a period mark at `at`.
    fn schedule_mark(&mut self, at: Instant);
    /// Schedules the first call's arrival, at zero.
    fn begin(&mut self);
    /// Applies the next event due by `end`: `None` when there is none, `Some(true)` when
    /// it was a period mark.
    fn advance(&mut self, end: Instant) -> Option<bool>;
    /// A new measured period: counters to zero, busy times noted.
    fn new_period(&mut self);
    /// The metrics of the period that lasted `span`, in [`METRICS`]' order.
    fn measure(&self, span: Duration) -> Vec<(&'static str, f64)>;
}

/// Runs `plane` for the warm-up and `d` in `rep.batches` batches.
pub(super) fn drive(
    plane: &mut dyn Driven,
    rep: &Replication,
    d: Duration,
    warmup: Duration,
) -> Result<RepResult, SimError> {
    let batches = rep.batches.max(1);
    let start = Instant::ZERO + warmup;
    let mut marks = vec![start];
    for b in 1..=batches {
        marks.push(start + Duration::from_picos(d.as_picos() / u64::from(batches) * u64::from(b)));
    }
    let end = *marks.last().unwrap_or(&start);
    for &m in &marks {
        plane.schedule_mark(m);
    }
    plane.begin();
    let mut batch_metrics = Vec::new();
    let mut mark = 0usize;
    let mut processed = 0u64;
    while let Some(is_mark) = plane.advance(end) {
        processed += 1;
        if is_mark {
            if mark > 0 {
                let m = plane.measure(marks[mark] - marks[mark - 1]);
                batch_metrics.push(m.into_iter().map(|(_, v)| v).collect::<Vec<f64>>());
            }
            plane.new_period();
            mark += 1;
            if mark == marks.len() {
                break;
            }
        }
    }
    let metrics: Vec<(&'static str, f64)> = if batches == 1 {
        METRICS
            .iter()
            .copied()
            .zip(batch_metrics.pop().unwrap_or_default())
            .collect()
    } else {
        let mut m: Vec<(&'static str, f64)> = METRICS.iter().map(|k| (*k, 0.0)).collect();
        atmlab_sim::model::grand_means(&mut m, &batch_metrics);
        m
    };
    Ok(RepResult {
        metrics,
        events: processed,
        simulated: end - Instant::ZERO,
        truncation: None,
        batch_metrics: if batches > 1 {
            batch_metrics
        } else {
            Vec::new()
        },
    })
}

impl Driven for Plane<'_> {
    fn schedule_mark(&mut self, at: Instant) {
        self.events.schedule(at, Ev::Mark);
    }
    fn begin(&mut self) {
        self.events.schedule(Instant::ZERO, Ev::Arrival);
    }
    fn advance(&mut self, end: Instant) -> Option<bool> {
        let (t, ev) = self.next_event(end)?;
        self.now = t;
        if let Ev::Mark = ev {
            return Some(true);
        }
        self.handle(ev);
        Some(false)
    }
    fn new_period(&mut self) {
        self.start_period();
    }
    fn measure(&self, span: Duration) -> Vec<(&'static str, f64)> {
        self.metrics(span)
    }
}

/// A call's host pair, drawn as the scenario says.
pub(super) fn draw_pair(cfg: &ControlConfig, rng: &mut SimRng) -> (usize, usize) {
    match &cfg.pairs {
        Pairs::List(list) if list.len() == 1 => list[0],
        Pairs::List(list) => list[rng.random_range(0..list.len())],
        Pairs::Any => {
            let n = cfg.hosts.len();
            let a = rng.random_range(0..n);
            let b = (a + 1 + rng.random_range(0..n - 1)) % n;
            (a, b)
        }
    }
}

/// A call's holding time, drawn as the scenario says.
pub(super) fn draw_hold(cfg: &ControlConfig, rng: &mut SimRng) -> Duration {
    match cfg.holding {
        Holding::Exponential(mean) => Duration::from_secs_f64(exp1(rng) * mean.as_secs_f64()),
        Holding::Deterministic(d) => d,
    }
}

/// `d` taken `n` times.
pub(super) fn times(d: Duration, n: u64) -> Duration {
    Duration::from_picos(d.as_picos().saturating_mul(n))
}

impl ControlConfig {
    /// Runs `seconds` of calls, then stops the arrivals and lets every call end: the
    /// calls, connections and bandwidth left (all zero when nothing leaked), and the
    /// metrics of the run. For the fault tests.
    #[cfg(test)]
    pub(super) fn run_and_drain(
        &self,
        seconds: u64,
        replication: u32,
    ) -> Result<((usize, usize, f64), atmlab_sim::model::RepResult), SimError> {
        let rep = Replication {
            seed: 11,
            replication,
            length: RunLength::Duration(Duration::from_secs(seconds)),
            warmup: Warmup::Time(Duration::ZERO),
            batches: 1,
        };
        let mut plane = Plane::new(self, &rep)?;
        let end = Instant::ZERO + Duration::from_secs(seconds);
        plane.events.schedule(Instant::ZERO, Ev::Arrival);
        plane.start_period();
        while let Some((t, ev)) = plane.next_event(end) {
            plane.now = t;
            plane.handle(ev);
        }
        let metrics = plane.metrics(end - Instant::ZERO);
        let left = plane.drain(end + Duration::from_secs(600));
        Ok((
            left,
            RepResult {
                metrics,
                events: 0,
                simulated: end - Instant::ZERO,
                truncation: None,
                batch_metrics: Vec::new(),
            },
        ))
    }
}

pub(super) fn model_err(message: impl Into<String>) -> SimError {
    SimError::Model {
        model: "control".into(),
        message: message.into(),
    }
}

impl<'a> Plane<'a> {
    fn new(cfg: &'a ControlConfig, rep: &Replication) -> Result<Self, SimError> {
        let rngs = RngFactory::new(rep.seed, rep.replication);
        let mut core_cfg = CmConfig::new(cfg.manager.kind);
        core_cfg.threshold = cfg.manager.threshold;
        core_cfg.flush_timeout = cfg.manager.flush;
        core_cfg.adaptive = cfg.manager.adaptive.clone();
        core_cfg.sweep_interval = None;
        (core_cfg.cache_fill, core_cfg.cache_low, core_cfg.cache_max) = cfg.manager.cache;
        core_cfg.max_setups = usize::MAX / 2;
        let core = CmCore::new(core_cfg).map_err(model_err)?;
        let route = RouteObject::new(cfg.view.clone()).map_err(|e| model_err(e.to_string()))?;
        let router = CachedRouter::new(Arc::new(Mutex::new(route)), cfg.manager.route_ttl);
        let mut switches = Vec::new();
        let mut index = FxHashMap::default();
        for (i, sc) in cfg.switches.iter().enumerate() {
            let core =
                Switch::new(sc).map_err(|e| model_err(format!("switch {}: {e}", sc.name)))?;
            let threads = cfg.costs.switch_threads as usize;
            switches.push(SwitchServer {
                core,
                server: Server::new(threads),
                replies: (0..threads).map(|_| None).collect(),
                answered: FxHashMap::default(),
                answered_order: VecDeque::new(),
                cold: VecDeque::new(),
                pruned_at: None,
            });
            index.insert(sc.name.clone(), i);
        }
        let n = switches.len();
        Ok(Plane {
            cfg,
            events: EventSet::new(),
            now: Instant::ZERO,
            rng: rngs.stream(0),
            core,
            router,
            manager: Server::new(cfg.manager.threads as usize),
            links: (0..n).map(|_| Link::default()).collect(),
            cpu_free: (cfg.costs.cpus > 0).then_some(cfg.costs.cpus as usize),
            switches,
            index,
            core_index: Vec::new(),
            calls: FxHashMap::default(),
            next_call: 0,
            by_core: FxHashMap::default(),
            in_progress: 0,
            waiting_ops: VecDeque::new(),
            timer: None,
            timeout_queued: false,
            answers_kept: false,
            stats: Stats {
                switch_busy: vec![Duration::ZERO; n],
                ..Stats::default()
            },
            latency: Histogram::new(),
            marked: Stats {
                switch_busy: vec![Duration::ZERO; n],
                ..Stats::default()
            },
            nv_marked: probes::Mark::default(),
            fault_rng: rngs.stream(1),
            arrivals_stopped: false,
        })
    }

    /// A new measured period: counters to zero, busy times and cache counts noted.
    fn start_period(&mut self) {
        let n = self.switches.len();
        self.marked = Stats {
            manager_busy: self.manager.busy,
            switch_busy: self.switches.iter().map(|s| s.server.busy).collect(),
            cache: self.core.cache_counts(),
            ..Stats::default()
        };
        self.stats = Stats {
            switch_busy: vec![Duration::ZERO; n],
            ..Stats::default()
        };
        self.latency.reset();
        self.nv_marked = self.nv_time();
    }

    /// The core's probes now: the first cache's `N_v` (the source switch's output port,
    /// in name order) and the messages sent (see [`probes`]).
    fn nv_time(&self) -> probes::Mark {
        probes::Mark::of(&self.core)
    }

    /// The metrics of the period that lasted `span`, in [`METRICS`]' order.
    fn metrics(&self, span: Duration) -> Vec<(&'static str, f64)> {
        let secs = span.as_secs_f64().max(f64::MIN_POSITIVE);
        let (h, m) = self.core.cache_counts();
        let (hits, misses) = (h - self.marked.cache.0, m - self.marked.cache.1);
        let manager_busy = self.manager.busy - self.marked.manager_busy;
        let switch_busy = self
            .switches
            .iter()
            .zip(&self.marked.switch_busy)
            .map(|(sw, b)| (sw.server.busy - *b).as_secs_f64())
            .fold(0.0, f64::max);
        let threads = |n: usize| n.max(1) as f64;
        let probed = self.nv_time().since(&self.nv_marked);
        let (nv_mean, nv_dispersion) = probed.moments();
        let values = self
            .stats
            .calls
            .metrics(&self.latency, secs)
            .into_iter()
            .chain([
                if hits + misses > 0 {
                    hits as f64 / (hits + misses) as f64
                } else {
                    f64::NAN
                },
                manager_busy.as_secs_f64() / secs / threads(self.manager.threads.len()),
                switch_busy / secs / threads(self.cfg.costs.switch_threads as usize),
                nv_mean,
                nv_dispersion,
            ])
            .chain(probed.metrics(self.stats.calls.attempts));
        METRICS.iter().copied().zip(values).collect()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrival if self.arrivals_stopped => {}
            Ev::Arrival => self.arrival(),
            Ev::AtManager(w) => self.reach_manager(w),
            Ev::ManagerDone(t) => self.manager_done(t),
            Ev::AtSwitch(s, msg) => {
                let sw = &mut self.switches[s];
                let idle = sw.server.idle();
                let wake = idle && !sw.server.waking;
                sw.cold.push_back(idle);
                sw.server.queue.push_back(msg);
                if wake && self.wake(Sleeper::Switch(s)) {
                    self.switches[s].server.waking = true;
                } else {
                    self.serve_switch(s);
                }
            }
            Ev::SwitchDone(s, t) => self.switch_done(s, t),
            Ev::AtLink(s, answers) => self.push_link(s, LinkJob::In(answers)),
            Ev::LinkDone(s) => self.link_done(s),
            Ev::Hangup(id) => {
                // The user's DeleteConnection reaches the manager.
                let at = self.now + self.cfg.costs.client_latency();
                self.events.schedule(at, Ev::AtManager(Work::Delete(id)));
            }
            Ev::Timer => {
                if !self.timeout_queued {
                    self.timeout_queued = true;
                    self.give_manager(Work::Timeout);
                }
            }
            Ev::Woken(who) => self.woken(who),
            Ev::Mark => {}
        }
    }

    fn arrival(&mut self) {
        let cfg = self.cfg;
        let pair = draw_pair(cfg, &mut self.rng);
        let u = self.next_call;
        self.next_call += 1;
        self.calls.insert(
            u,
            UserCall {
                pair,
                arrived: self.now,
            },
        );
        self.stats.calls.attempts += 1;
        self.stats.calls.invocations += 1;
        // The AddConnection crosses the wire to the manager.
        let at = self.now + cfg.costs.client_latency();
        self.events.schedule(at, Ev::AtManager(Work::Setup(u)));
        let gap = exp1(&mut self.rng) / cfg.arrival_rate;
        let next = self.now + Duration::from_secs_f64(gap);
        self.events.schedule(next, Ev::Arrival);
    }

    /// An operation reaches the manager: a blocking manager admits it only with a thread
    /// free for its whole length.
    fn reach_manager(&mut self, w: Work) {
        let op = matches!(w, Work::Setup(_) | Work::Delete(_));
        if op && self.cfg.manager.blocking {
            if self.in_progress >= self.manager.threads.len() {
                self.waiting_ops.push_back(w);
                return;
            }
            self.in_progress += 1;
        }
        self.give_manager(w);
    }

    /// A blocking manager's operation ended: the next waiting one starts.
    fn op_ended(&mut self) {
        if !self.cfg.manager.blocking {
            return;
        }
        self.in_progress = self.in_progress.saturating_sub(1);
        if let Some(w) = self.waiting_ops.pop_front() {
            self.in_progress += 1;
            self.give_manager(w);
        }
    }

    /// Work for the manager: it starts at once, or after `wakeup` if the manager was
    /// idle.
    fn give_manager(&mut self, w: Work) {
        let wake = self.manager.idle() && !self.manager.waking;
        self.manager.queue.push_back(w);
        if wake && self.wake(Sleeper::Manager) {
            self.manager.waking = true;
            return;
        }
        self.serve_manager();
    }

    /// Schedules `who`'s wakeup if the profile has one; false if it has none.
    fn wake(&mut self, who: Sleeper) -> bool {
        let w = self.cfg.costs.wakeup;
        if w == Duration::ZERO {
            return false;
        }
        self.events.schedule(self.now + w, Ev::Woken(who));
        true
    }

    /// `who` is awake: it starts its queued work.
    fn woken(&mut self, who: Sleeper) {
        match who {
            Sleeper::Manager => {
                self.manager.waking = false;
                self.serve_manager();
            }
            Sleeper::Link(s) => {
                self.links[s].waking = false;
                self.serve_link(s);
            }
            Sleeper::Switch(s) => {
                self.switches[s].server.waking = false;
                self.serve_switch(s);
            }
        }
    }

    fn serve_manager(&mut self) {
        if self.manager.waking {
            return;
        }
        while let Some(t) = self.manager.idle_thread() {
            if self.manager.queue.is_empty() || !self.take_cpu() {
                return;
            }
            let Some(w) = self.manager.queue.pop_front() else {
                return;
            };
            let (work, outputs) = self.manager_step(w);
            self.manager.threads[t] = Some(outputs);
            self.manager.busy += work;
            self.events.schedule(self.now + work, Ev::ManagerDone(t));
        }
    }

    /// Applies one input to the core; returns the thread's work and what leaves after it.
    fn manager_step(&mut self, w: Work) -> (Duration, Vec<Output>) {
        let cfg = self.cfg;
        let c = &cfg.costs;
        let now = self.now;
        let mut work = c.manager_step;
        let mut out = Vec::new();
        let unmarshal = |commands: usize| c.per_message + times(c.per_command, commands as u64);
        match w {
            Work::Setup(u) => {
                if !c.colocated {
                    work += unmarshal(1);
                }
                let (a, b) = self.calls.get(&u).map_or((0, 0), |c| c.pair);
                let (src, dst) = (&self.cfg.hosts[a], &self.cfg.hosts[b]);
                // Step 2, the QoS mapper core (the user's QoS to a cell-level contract),
                // then step 3, a route with room for its peak rate.
                let contract = self.cfg.contract.traffic();
                let before = self.router.misses;
                let route = contract.and_then(|(t, clr)| {
                    self.router
                        .route(now, src, dst, t.pcr.per_sec())
                        .map(|hops| (hops, t, clr))
                        .map_err(|e| e.message)
                });
                let miss = self.router.misses > before;
                if c.colocated {
                    // The QoS mapper and the route object are objects in the manager's
                    // process (atmlab's live lab): their work is the manager's, in this
                    // step, and nothing crosses a wire.
                    work += c.qos_work;
                    if miss {
                        work += c.route_work;
                    }
                    self.start_setup(u, route, now);
                } else {
                    // The QoS mapper's round trip, and the route object's on a miss: the
                    // manager marshals each request and unmarshals each answer.
                    let queries = 1 + u64::from(miss);
                    self.stats.calls.invocations += queries;
                    work += times(c.per_message + c.per_command, queries);
                    let one_way = c.latency + c.per_message + c.per_command;
                    let mut wait = one_way + one_way + c.qos_work;
                    if miss {
                        wait += one_way + one_way + c.route_work;
                    }
                    out.push(Output::Resolve(u, wait, route));
                }
            }
            Work::Resolved(u, route) => {
                work += times(c.per_message + c.per_command, 2);
                self.start_setup(u, route, now);
            }
            Work::Delete(id) => {
                if !c.colocated {
                    work += unmarshal(1);
                }
                self.core.delete(now, id);
            }
            Work::Replies(s, replies) => {
                if !c.links {
                    work += unmarshal(replies.len());
                }
                for (req, r) in replies {
                    self.core.handle_reply(now, req, r);
                    if !self.answers_kept {
                        if self.core.stats().retries == 0 {
                            // Answered, and no request was ever sent twice: nothing will
                            // ask the switch for this answer again.
                            self.switches[s].answered.remove(&req);
                        } else {
                            self.keep_answers();
                        }
                    }
                }
            }
            Work::Timeout => {
                self.timeout_queued = false;
                self.core.handle_timeout(now);
            }
        }
        while let Some(t) = self.core.poll_transmit(now) {
            let Some(s) = self.switch_of(t.switch_index, &t.switch) else {
                continue;
            };
            if !c.links {
                work += c.per_message + times(c.per_command, t.commands.len() as u64);
            }
            self.stats.calls.invocations += 1;
            out.push(Output::Transmit(s, t.commands));
        }
        while let Some(e) = self.core.poll_event() {
            out.push(Output::Event(e));
        }
        self.arm_timer();
        (work, out)
    }

    /// Our number of the core's switch `core` (named `name`).
    fn switch_of(&mut self, core: usize, name: &str) -> Option<usize> {
        if let Some(&Some(s)) = self.core_index.get(core) {
            return Some(s);
        }
        let s = *self.index.get(name)?;
        if self.core_index.len() <= core {
            self.core_index.resize(core + 1, None);
        }
        self.core_index[core] = Some(s);
        Some(s)
    }

    /// The route is known: the core starts the setup, or the call is refused before any
    /// switch is asked.
    fn start_setup(&mut self, u: usize, route: Result<Route, String>, now: Instant) {
        match route {
            Ok((hops, traffic, clr)) => {
                let b = self.calls.get(&u).map_or(0, |c| c.pair.1);
                let dst = &self.cfg.hosts[b];
                let req = SetupRequest {
                    routes: vec![(dst.clone(), hops)],
                    traffic,
                    clr,
                    buffer_cells: 0,
                    tag: String::new(),
                };
                let id = self.core.add(now, req);
                self.by_core.insert(id, u);
            }
            Err(_) => {
                self.decided(u, Outcome::Blocked);
                self.op_ended();
            }
        }
    }

    fn arm_timer(&mut self) {
        let want = self.core.poll_timeout();
        match (want, self.timer) {
            (Some(t), Some((armed, _, _))) if t == armed => {}
            (want, _) => {
                // Re-armed: as if the old timer event were cancelled and a new one
                // scheduled now.
                self.timer = want.map(|t| (t, t.max(self.now), self.events.take_seq()));
            }
        }
    }

    /// The next event due by `end`: the event set's earliest, or the core's timer when
    /// it comes first (by time, then by when it was armed).
    fn next_event(&mut self, end: Instant) -> Option<(Instant, Ev)> {
        if let Some((_, at, seq)) = self.timer
            && at <= end
            && self.events.peek_key().is_none_or(|k| (at, seq) < k)
        {
            self.timer = None;
            return Some((at, Ev::Timer));
        }
        self.events.pop_until(end)
    }

    fn manager_done(&mut self, t: usize) {
        let outputs = self.manager.threads[t].take().unwrap_or_default();
        self.release_cpu();
        let c = &self.cfg.costs;
        for o in outputs {
            match o {
                Output::Transmit(s, commands) if c.links => {
                    self.push_link(s, LinkJob::Out(commands));
                }
                Output::Transmit(s, commands) => {
                    if let Some(at) = self.wire(c.latency) {
                        self.events.schedule(at, Ev::AtSwitch(s, commands));
                    }
                }
                Output::Resolve(u, wait, route) => {
                    let at = self.now + wait;
                    self.events
                        .schedule(at, Ev::AtManager(Work::Resolved(u, route)));
                }
                Output::Event(e) => self.call_event(e),
            }
        }
        self.serve_manager();
        self.serve_others();
    }

    fn call_event(&mut self, e: CallEvent) {
        let c = &self.cfg.costs;
        match e {
            CallEvent::Established { call, .. } => {
                let Some(&u) = self.by_core.get(&call) else {
                    return;
                };
                // The answer crosses the wire to the user.
                let heard = self.now + c.client_latency();
                let Some(user) = self.calls.remove(&u) else {
                    return;
                };
                let latency = (heard - user.arrived).as_secs_f64();
                self.stats.calls.latency_sum += latency;
                self.latency.record(latency);
                self.decided(u, Outcome::Established);
                let hold = draw_hold(self.cfg, &mut self.rng);
                self.stats.calls.invocations += 1;
                self.events.schedule(heard + hold, Ev::Hangup(call));
                self.op_ended();
            }
            CallEvent::Failed { call, error } => {
                if let Some(u) = self.by_core.remove(&call) {
                    let outcome = if error.blocked() {
                        Outcome::Blocked
                    } else {
                        Outcome::Failed
                    };
                    self.decided(u, outcome);
                }
                self.op_ended();
            }
            CallEvent::Released { call } => {
                self.by_core.remove(&call);
                self.op_ended();
            }
            CallEvent::Changed { .. } => {}
        }
    }

    fn decided(&mut self, u: usize, outcome: Outcome) {
        self.calls.remove(&u);
        match outcome {
            Outcome::Established => self.stats.calls.established += 1,
            Outcome::Blocked => self.stats.calls.blocked += 1,
            Outcome::Failed => self.stats.calls.failed += 1,
        }
    }

    fn serve_switch(&mut self, s: usize) {
        if self.switches[s].server.waking {
            return;
        }
        let cfg = self.cfg;
        let c = &cfg.costs;
        let now = self.now;
        while let Some(t) = self.switches[s].server.idle_thread() {
            if self.switches[s].server.queue.is_empty() || !self.take_cpu() {
                return;
            }
            if !self.answers_kept && self.core.stats().retries > 0 {
                self.keep_answers();
            }
            let kept = self.answers_kept;
            let sw = &mut self.switches[s];
            let Some(msg) = sw.server.queue.pop_front() else {
                return;
            };
            let cold = sw.cold.pop_front().unwrap_or(true);
            let k = msg.len() as u64;
            let mut replies = Vec::with_capacity(msg.len());
            for (req, cmd) in &msg {
                let r = match sw.answered.get(req) {
                    Some((_, r)) => r.clone(),
                    None => {
                        let r = sw.core.apply(cmd);
                        sw.answered.insert(*req, (now, r.clone()));
                        if kept {
                            sw.answered_order.push_back((now, *req));
                        }
                        r
                    }
                };
                replies.push((*req, r));
            }
            // Answers are kept as long as the manager may re-send (its retries).
            sw.forget_answers(now);
            // Receiving the message and sending the answers; a server that was busy
            // when the message came reads it with others, no wakeup of its own.
            let per_message = if cold || !c.coalesce {
                c.per_message
            } else {
                Duration::ZERO
            };
            let work =
                times(per_message + times(c.per_command, k), 2) + times(c.switch_per_command, k);
            sw.server.threads[t] = Some(());
            sw.replies[t] = Some(replies);
            sw.server.busy += work;
            self.events.schedule(now + work, Ev::SwitchDone(s, t));
        }
    }

    fn switch_done(&mut self, s: usize, t: usize) {
        let sw = &mut self.switches[s];
        sw.server.threads[t] = None;
        self.release_cpu();
        if let Some(replies) = self.switches[s].replies[t].take()
            && let Some(at) = self.wire(self.cfg.costs.latency)
        {
            let ev = if self.cfg.costs.links {
                Ev::AtLink(s, replies)
            } else {
                Ev::AtManager(Work::Replies(s, replies))
            };
            self.events.schedule(at, ev);
        }
        self.serve_switch(s);
        self.serve_others();
    }

    /// The manager re-sent a request for the first time: from now on a switch may be
    /// asked again for any answer it gave, so each is kept [`ANSWER_KEEP`](super::servers::ANSWER_KEEP), as the live
    /// server keeps it. The answers still held (those the manager has not yet had) are
    /// put in the order they were given, and those the live server would have forgotten
    /// by now are forgotten.
    fn keep_answers(&mut self) {
        self.answers_kept = true;
        for sw in &mut self.switches {
            let mut order: Vec<(Instant, u64)> = sw
                .answered
                .iter()
                .map(|(&req, &(at, _))| (at, req))
                .collect();
            order.sort_unstable();
            sw.answered_order = order.into();
            if let Some(at) = sw.pruned_at {
                sw.forget_answers(at);
            }
        }
    }

    /// The manager's link to switch `s` takes its next job: marshalling a message out or
    /// unmarshalling an answer in, `per_message` plus `per_command` for each command.
    fn serve_link(&mut self, s: usize) {
        if self.links[s].waking
            || self.links[s].job.is_some()
            || self.links[s].queue.is_empty()
            || !self.take_cpu()
        {
            return;
        }
        let Some((job, cold)) = self.links[s].queue.pop_front() else {
            return;
        };
        let c = &self.cfg.costs;
        let k = match &job {
            LinkJob::Out(cmds) => cmds.len(),
            LinkJob::In(answers) => answers.len(),
        };
        // The link's own thread: not the manager's utilisation.
        let per_message = if cold || !c.coalesce {
            c.per_message
        } else {
            Duration::ZERO
        };
        let work = per_message + times(c.per_command, k as u64);
        self.links[s].job = Some(job);
        self.events.schedule(self.now + work, Ev::LinkDone(s));
    }

    /// A job for the link to switch `s`, noting whether it found the link idle.
    fn push_link(&mut self, s: usize, job: LinkJob) {
        let link = &mut self.links[s];
        let idle = link.job.is_none() && link.queue.is_empty();
        let wake = idle && !link.waking;
        link.queue.push_back((job, idle));
        if wake && self.wake(Sleeper::Link(s)) {
            self.links[s].waking = true;
        } else {
            self.serve_link(s);
        }
    }

    fn link_done(&mut self, s: usize) {
        self.release_cpu();
        match self.links[s].job.take() {
            Some(LinkJob::Out(commands)) => {
                if let Some(at) = self.wire(self.cfg.costs.latency) {
                    self.events.schedule(at, Ev::AtSwitch(s, commands));
                }
            }
            Some(LinkJob::In(answers)) => {
                self.give_manager(Work::Replies(s, answers));
            }
            None => {}
        }
        self.serve_link(s);
        self.serve_others();
    }

    /// A processor of the shared pool for the server about to work (always, when each
    /// server has its own).
    fn take_cpu(&mut self) -> bool {
        match &mut self.cpu_free {
            None => true,
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }

    fn release_cpu(&mut self) {
        if let Some(n) = &mut self.cpu_free {
            *n += 1;
        }
    }

    /// With a shared pool, a processor just freed may start any server's waiting work:
    /// the manager first, then the links and the switches in order (deterministic).
    fn serve_others(&mut self) {
        if self.cpu_free.is_none_or(|n| n == 0) {
            return;
        }
        self.serve_manager();
        for s in 0..self.links.len() {
            self.serve_link(s);
        }
        for s in 0..self.switches.len() {
            self.serve_switch(s);
        }
    }

    /// When a message between the manager and a switch arrives, `None` if it is lost
    /// (the faults of the scenario: the core's re-sends and the switches' answers to
    /// repeated requests recover, as they do live).
    fn wire(&mut self, latency: Duration) -> Option<Instant> {
        let f = self.cfg.faults;
        if f.loss > 0.0 && self.fault_rng.random::<f64>() < f.loss {
            return None;
        }
        let mut at = self.now + latency;
        if f.max_delay > Duration::ZERO {
            let extra = self.fault_rng.random::<f64>() * f.max_delay.as_secs_f64();
            at += Duration::from_secs_f64(extra);
        }
        Some(at)
    }

    /// Stops the arrivals and runs until every call has ended (or `until`); returns the
    /// calls the manager still holds and, over every switch, the connections and the
    /// bandwidth left (cells/s): zeros when nothing leaked.
    #[cfg(test)]
    fn drain(&mut self, until: Instant) -> (usize, usize, f64) {
        self.arrivals_stopped = true;
        while let Some((t, ev)) = self.next_event(until) {
            self.now = t;
            if !matches!(ev, Ev::Mark) {
                self.handle(ev);
            }
            if self.core.active() == 0 && self.calls.is_empty() && self.manager.queue.is_empty() {
                break;
            }
        }
        let connections = self
            .switches
            .iter()
            .map(|s| s.core.connections().len())
            .sum();
        let allocated = self
            .switches
            .iter()
            .flat_map(|s| s.core.ports())
            .map(|p| p.allocated)
            .sum();
        (self.core.active(), connections, allocated)
    }
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Established,
    Blocked,
    Failed,
}
