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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

use atmlab_control::cm::core::{CallEvent, CmConfig, CmCore, SetupRequest};
use atmlab_control::cm::routes::{CachedRouter, Router};
use atmlab_control::route::RouteObject;
use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_fabric::switch::{Command, Switch};
use atmlab_sim::SimError;
use atmlab_sim::event_set::EventSet;
use atmlab_sim::model::{RepResult, Replication};
use atmlab_sim::rng::{RngFactory, SimRng, exp1};
#[cfg(test)]
use atmlab_sim::scenario::{RunLength, Warmup};
use atmlab_sim::stats::Histogram;
use rand::Rng;
use rustc_hash::FxHashMap;

use super::costs::Reading;
use super::driver::{Calls, Driven, draw_hold, draw_pair, drive, lengths, model_err, times};
use super::servers::{Answer, Answers, Given, Link, LinkJob, Server, SwitchServer};
use super::{ControlConfig, METRICS, probes};

mod links;
mod pool;
mod recovery;
mod switches;
mod users;

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
    /// The remote QoS mapper or route object answered for call `u` (that many answers;
    /// boxed, so that the events that do not carry a route stay small).
    Resolved(usize, u64, Box<Result<Route, String>>),
    /// A user's DeleteConnection for core call `id`.
    Delete(u64),
    /// Switch `s`'s answer message.
    Replies(usize, Answers),
    /// The core's timer fired.
    Timeout,
    /// Switch `s`'s listing, for a reconcile or a sweep (see [`recovery`]); boxed, as
    /// the route is, so that the common work (and every event) stays small.
    Listed(usize, Box<recovery::Listing>),
}

/// What leaves when a manager thread finishes.
#[derive(Debug)]
enum Output {
    Transmit(usize, Vec<(u64, Command)>),
    Resolve(usize, u64, Duration, Box<Result<Route, String>>),
    Event(CallEvent),
}

/// A server that was idle when work reached it.
#[derive(Debug, Clone, Copy)]
enum Sleeper {
    Manager(usize),
    Link(usize, usize),
    Switch(usize),
}

#[derive(Debug)]
enum Ev {
    /// A server is awake after its `wakeup`.
    Woken(Sleeper),
    Arrival,
    /// Work reaches manager `m`.
    AtManager(usize, Work),
    /// Manager `m`'s thread `t` finished.
    ManagerDone(usize, usize),
    /// A message of manager `m` reaches switch `s`: `(s, m, commands)`.
    AtSwitch(usize, usize, Vec<(u64, Command)>),
    SwitchDone(usize, usize),
    /// Switch `s`'s answers reach manager `m`'s link to it (`links` profiles).
    AtLink(usize, usize, Answers),
    LinkDone(usize, usize),
    /// A call's work at the call generator (`client_work`) is done.
    GeneratorDone,
    /// Manager `m`'s user hangs up core call `id`.
    Hangup(usize, u64),
    /// Manager `m`'s core's timer.
    Timer(usize),
    /// A crash, a restart, a listing (see [`recovery`]).
    Fault(recovery::FaultEv),
    Mark,
}

/// One user call.
#[derive(Debug, Clone, Copy)]
struct UserCall {
    /// Source and destination, indices into the hosts.
    pair: (usize, usize),
    arrived: Instant,
}

/// A user's hang-up, held outside the event set: due at `at`, in its place among the
/// events due then (`seq`, from [`EventSet::take_seq`]), for core call `call` of the
/// manager's client `client`. Ordered by `(at, seq)` alone (the numbers are unique) as
/// one 128-bit number: the heap of the established calls' hang-ups (a thousand and
/// more) compares them at each of its levels.
#[derive(Debug, Clone, Copy)]
struct Hangup {
    key: u128,
    client: usize,
    call: u64,
}

impl Hangup {
    fn new(at: Instant, seq: u64, client: usize, call: u64) -> Self {
        Hangup {
            key: u128::from(at.as_picos()) << 64 | u128::from(seq),
            client,
            call,
        }
    }

    /// When it is due and its place among the events due then.
    fn when(&self) -> (Instant, u64) {
        (
            Instant::from_picos((self.key >> 64) as u64),
            self.key as u64,
        )
    }
}

impl PartialEq for Hangup {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Hangup {}

impl PartialOrd for Hangup {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
    fn lt(&self, other: &Self) -> bool {
        self.key < other.key
    }
    fn le(&self, other: &Self) -> bool {
        self.key <= other.key
    }
    fn gt(&self, other: &Self) -> bool {
        self.key > other.key
    }
    fn ge(&self, other: &Self) -> bool {
        self.key >= other.key
    }
}

impl Ord for Hangup {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

/// The counters of one measured period.
#[derive(Debug, Clone, Default)]
struct Stats {
    calls: Calls,
    manager_busy: Duration,
    switch_busy: Vec<Duration>,
    /// The shared pool's processor time worked (`cpus` > 0), generator included.
    pool_busy: Duration,
    cache: (u64, u64),
}

/// One connection manager and what is its own: its core, its route cache, its
/// thread(s), its links to the switches, its timer.
struct Mgr {
    core: CmCore,
    router: CachedRouter,
    server: Server<Work, Vec<Output>>,
    /// Emptied output lists of finished steps, for the next steps to fill (a step
    /// otherwise allocates one and its end frees it).
    spare: Vec<Vec<Output>>,
    /// Its links, one per switch, when the profile has `links`.
    links: Vec<Link>,
    /// The core's switch numbers (`Transmit::switch_index`) to ours, learnt once each.
    core_index: Vec<Option<usize>>,
    /// Its core's call ids to the user calls.
    by_core: FxHashMap<u64, usize>,
    /// Operations in progress and waiting for a thread (blocking managers only).
    in_progress: usize,
    waiting_ops: VecDeque<Work>,
    /// The core's timer: the time it asked for, when it fires, and its place among the
    /// events due then (kept out of the event set, see [`EventSet::take_seq`]).
    timer: Option<(Instant, Instant, u64)>,
    timeout_queued: bool,
}

/// A request's key at a switch server: the managers number their requests apart, so
/// the manager's number goes with it (request ids stay far below 2^48).
fn request_key(m: usize, req: u64) -> u64 {
    ((m as u64) << 48) | req
}

/// The whole simulated control plane of one replication.
struct Plane<'a> {
    cfg: &'a ControlConfig,
    events: EventSet<Ev>,
    now: Instant,
    rng: SimRng,
    /// The managers, one or more (each on its own partition of the identifiers).
    mgrs: Vec<Mgr>,
    switches: Vec<SwitchServer>,
    /// Processors free when the profile shares `cpus` among every server; `None` when
    /// each server has its own.
    cpu_free: Option<usize>,
    /// The call generator's work waiting for a processor (`client_work`), in calls.
    generator: u64,
    /// Processors of the pool working for the generator.
    generating: usize,
    /// When a processor of the pool was last released (`idle_wake`).
    quiet_since: Instant,
    /// Answers of set-up calls waiting for their callers' tasks to take them up on the
    /// pool: (manager, user call, the core's call).
    answers: Vec<(usize, usize, u64)>,
    /// The pool's processor time worked up to `pool_since` (see [`Plane::pool_tick`]).
    pool_busy: Duration,
    pool_since: Instant,
    index: FxHashMap<String, usize>,
    calls: users::InProgress,
    next_call: usize,
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
    /// Draws the profile's stalls (a stream of its own, so that a profile without them
    /// leaves every other draw as it was).
    stall_rng: SimRng,
    /// No more calls arrive (draining at the end of a leak check).
    arrivals_stopped: bool,
    /// Emptied lists of a switch's answers, for the switches' next answers (each
    /// message's would otherwise be allocated by its switch and freed by its manager).
    spare_answers: Vec<Answers>,
    /// The earliest of the managers' timers (by when it fires, then by when it was
    /// armed) and its manager, noted whenever a timer changes ([`Plane::set_timer`]):
    /// the next event is found on every event, a timer changes once a step at most.
    first_timer: Option<((Instant, u64), usize)>,
    /// The users' hang-ups, earliest first, each with its place among the events due
    /// then ([`EventSet::take_seq`]) and its manager's client (the manager and, with
    /// crashes, its incarnation) and core call: held outside the event set, whose heap
    /// then holds only the next steps (tens of events) instead of every established
    /// call's hang-up, and sifts through fewer levels per event.
    hangups: BinaryHeap<Reverse<Hangup>>,
    /// The crash faults' state, when the scenario has any (see [`recovery`]).
    crash: Option<Box<recovery::CrashState>>,
}

impl ControlConfig {
    /// Runs one replication of the managers' plane.
    pub(super) fn run_managers(&self, rep: &Replication) -> Result<RepResult, SimError> {
        let (d, warmup) = lengths(rep)?;
        if !self.crashes.crashes.is_empty() && rep.batches > 1 {
            return Err(model_err(
                "crash faults are counted per replication: use replications, not batches",
            ));
        }
        let mut plane = Plane::new(self, rep)?;
        let mut result = drive(&mut plane, rep, d, warmup)?;
        if plane.crash.is_some() {
            result.metrics.extend(plane.crash_metrics());
        }
        Ok(result)
    }
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
    fn advance_to_mark(&mut self, end: Instant) -> (u64, bool) {
        let mut n = 0;
        while let Some((t, ev)) = self.next_event(end) {
            self.now = t;
            n += 1;
            if let Ev::Mark = ev {
                return (n, true);
            }
            self.handle(ev);
        }
        (n, false)
    }
    fn new_period(&mut self) {
        self.start_period();
    }
    fn measure(&self, span: Duration) -> Vec<(&'static str, f64)> {
        self.metrics(span)
    }
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
        core_cfg.releases_ride = cfg.manager.releases_ride;
        let route = RouteObject::new(cfg.view.clone()).map_err(|e| model_err(e.to_string()))?;
        let route = Arc::new(Mutex::new(route));
        let count = cfg.manager.managers.max(1) as usize;
        let partitions = partitions(cfg, count)?;
        let n = cfg.switches.len();
        let mut mgrs = Vec::with_capacity(count);
        for partition in partitions {
            let mut c = core_cfg.clone();
            c.partition = partition;
            if count > 1 {
                c.owner = format!("{}-{}", c.owner, mgrs.len());
            }
            mgrs.push(Mgr {
                core: CmCore::new(c).map_err(model_err)?,
                router: CachedRouter::new(Arc::clone(&route), cfg.manager.route_ttl),
                server: Server::new(cfg.manager.threads as usize),
                spare: Vec::new(),
                links: (0..n).map(|_| Link::default()).collect(),
                core_index: Vec::new(),
                by_core: FxHashMap::default(),
                in_progress: 0,
                waiting_ops: VecDeque::new(),
                timer: None,
                timeout_queued: false,
            });
        }
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
                given: Given::default(),
                answered: FxHashMap::default(),
                answered_order: VecDeque::new(),
                readings: VecDeque::new(),
                pruned_at: None,
            });
            index.insert(sc.name.clone(), i);
        }
        let mut plane = Plane {
            cfg,
            events: EventSet::new(),
            now: Instant::ZERO,
            rng: rngs.stream(0),
            mgrs,
            cpu_free: (cfg.costs.cpus > 0).then_some(cfg.costs.cpus as usize),
            generator: 0,
            generating: 0,
            quiet_since: Instant::ZERO,
            answers: Vec::new(),
            pool_busy: Duration::ZERO,
            pool_since: Instant::ZERO,
            switches,
            index,
            calls: users::InProgress::default(),
            next_call: 0,
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
            stall_rng: rngs.stream(2),
            arrivals_stopped: false,
            spare_answers: Vec::new(),
            first_timer: None,
            hangups: BinaryHeap::new(),
            crash: None,
        };
        plane.arm_crashes(&rngs, &route);
        Ok(plane)
    }

    /// A new measured period: counters to zero, busy times and cache counts noted.
    fn start_period(&mut self) {
        let n = self.switches.len();
        self.marked = Stats {
            manager_busy: self.managers_busy(),
            switch_busy: self.switches.iter().map(|s| s.server.busy).collect(),
            pool_busy: self.pool_worked(),
            cache: self.cache_counts(),
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
        let mark = probes::Mark::of(&self.mgrs[0].core);
        match &self.crash {
            None => mark,
            Some(st) => mark.plus(st.retired_probes()),
        }
    }

    /// Every manager's busy time, summed.
    fn managers_busy(&self) -> Duration {
        self.mgrs
            .iter()
            .fold(Duration::ZERO, |sum, g| sum + g.server.busy)
    }

    /// Every manager's VCI cache hits and misses, summed.
    fn cache_counts(&self) -> (u64, u64) {
        let retired = self.crash.as_ref().map_or((0, 0), |st| st.retired_cache());
        self.mgrs.iter().fold(retired, |(h, m), g| {
            let (a, b) = g.core.cache_counts();
            (h + a, m + b)
        })
    }

    /// The metrics of the period that lasted `span`, in [`METRICS`]' order.
    fn metrics(&self, span: Duration) -> Vec<(&'static str, f64)> {
        let secs = span.as_secs_f64().max(f64::MIN_POSITIVE);
        let (h, m) = self.cache_counts();
        let (hits, misses) = (h - self.marked.cache.0, m - self.marked.cache.1);
        let manager_busy = self.managers_busy() - self.marked.manager_busy;
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
                manager_busy.as_secs_f64()
                    / secs
                    / threads(self.mgrs.len() * self.cfg.manager.threads as usize),
                switch_busy / secs / threads(self.cfg.costs.switch_threads as usize),
                match self.cpu_free {
                    Some(_) => {
                        (self.pool_worked() - self.marked.pool_busy).as_secs_f64()
                            / secs
                            / self.cfg.costs.cpus as f64
                    }
                    None => 0.0,
                },
                nv_mean,
                nv_dispersion,
            ])
            .chain(probed.metrics(self.stats.calls.attempts));
        METRICS.iter().copied().zip(values).collect()
    }

    fn handle(&mut self, ev: Ev) {
        let ev = if self.crash.is_some() {
            match self.fence(ev) {
                Some(ev) => ev,
                None => return,
            }
        } else {
            ev
        };
        match ev {
            Ev::Arrival if self.arrivals_stopped => {}
            Ev::Arrival => self.arrival(),
            Ev::AtManager(m, w) => self.reach_manager(m, w),
            Ev::ManagerDone(m, t) => self.manager_done(m, t),
            Ev::AtSwitch(s, m, msg) => {
                let sw = &mut self.switches[s];
                let idle = sw.server.idle();
                let wake = idle && !sw.server.waking;
                let awake = self.pool_awake();
                let sw = &mut self.switches[s];
                sw.readings.push_back(Reading::of(idle, awake));
                sw.server.queue.push_back((m, msg));
                if wake && self.wake(Sleeper::Switch(s)) {
                    self.switches[s].server.waking = true;
                } else {
                    self.serve_switch(s);
                }
            }
            Ev::SwitchDone(s, t) => self.switch_done(s, t),
            Ev::AtLink(m, s, answers) => self.push_link(m, s, LinkJob::In(answers)),
            Ev::LinkDone(m, s) => self.link_done(m, s),
            Ev::GeneratorDone => self.generator_done(),
            Ev::Hangup(m, id) => {
                // The user's DeleteConnection reaches the manager.
                let at = self.now + self.cfg.costs.client_latency();
                let to = self.client(m);
                self.events
                    .schedule(at, Ev::AtManager(to, Work::Delete(id)));
            }
            Ev::Timer(m) => {
                if !self.mgrs[m].timeout_queued {
                    self.mgrs[m].timeout_queued = true;
                    self.give_manager(m, Work::Timeout);
                }
            }
            Ev::Woken(who) => self.woken(who),
            Ev::Fault(f) => self.fault(f),
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
        self.generate();
        // The AddConnection crosses the wire to its manager (dealt in turn).
        let at = self.now + cfg.costs.client_latency();
        let m = self.client(u % self.mgrs.len());
        self.events.schedule(at, Ev::AtManager(m, Work::Setup(u)));
        let gap = exp1(&mut self.rng) / cfg.arrival_rate;
        let next = self.now + Duration::from_secs_f64(gap);
        self.events.schedule(next, Ev::Arrival);
    }

    /// An operation reaches the manager: a blocking manager admits it only with a thread
    /// free for its whole length.
    fn reach_manager(&mut self, m: usize, w: Work) {
        let op = matches!(w, Work::Setup(_) | Work::Delete(_));
        if op && self.cfg.manager.blocking {
            let g = &mut self.mgrs[m];
            if g.in_progress >= g.server.threads.len() {
                g.waiting_ops.push_back(w);
                return;
            }
            g.in_progress += 1;
        }
        self.give_manager(m, w);
    }

    /// A blocking manager's operation ended: the next waiting one starts.
    fn op_ended(&mut self, m: usize) {
        if !self.cfg.manager.blocking {
            return;
        }
        let g = &mut self.mgrs[m];
        g.in_progress = g.in_progress.saturating_sub(1);
        if let Some(w) = g.waiting_ops.pop_front() {
            g.in_progress += 1;
            self.give_manager(m, w);
        }
    }

    /// Work for the manager: it starts at once, or after `wakeup` if the manager was
    /// idle.
    #[inline]
    fn give_manager(&mut self, m: usize, w: Work) {
        let server = &mut self.mgrs[m].server;
        let wake = server.idle() && !server.waking;
        server.queue.push_back(w);
        if wake && self.wake(Sleeper::Manager(m)) {
            self.mgrs[m].server.waking = true;
            return;
        }
        self.serve_manager(m);
    }

    /// Schedules `who`'s wakeup if the profile has one (`wakeup`, and `idle_wake` when
    /// the pool is quiet); false if it has none.
    fn wake(&mut self, who: Sleeper) -> bool {
        let w = self.cfg.costs.wakeup + self.idle_wake();
        if w == Duration::ZERO {
            return false;
        }
        self.events.schedule(self.now + w, Ev::Woken(who));
        true
    }

    /// `who` is awake: it starts its queued work.
    fn woken(&mut self, who: Sleeper) {
        match who {
            Sleeper::Manager(m) => {
                self.mgrs[m].server.waking = false;
                self.serve_manager(m);
            }
            Sleeper::Link(m, s) => {
                self.mgrs[m].links[s].waking = false;
                self.serve_link(m, s);
            }
            Sleeper::Switch(s) => {
                self.switches[s].server.waking = false;
                self.serve_switch(s);
            }
        }
    }

    /// Manager `m` starts its queued work on its idle threads. Inlined, so that the
    /// common case after a step (nothing queued) costs a test rather than a call.
    #[inline]
    fn serve_manager(&mut self, m: usize) {
        let server = &self.mgrs[m].server;
        if server.waking || server.queue.is_empty() {
            return;
        }
        self.serve_manager_queue(m);
    }

    fn serve_manager_queue(&mut self, m: usize) {
        while let Some(t) = self.mgrs[m].server.idle_thread() {
            if self.mgrs[m].server.queue.is_empty() || !self.take_cpu() {
                return;
            }
            let Some(w) = self.mgrs[m].server.queue.pop_front() else {
                return;
            };
            let (work, outputs) = self.manager_step(m, w);
            let work = work + self.stall();
            let server = &mut self.mgrs[m].server;
            server.threads[t] = Some(outputs);
            server.busy += work;
            self.events.schedule(self.now + work, Ev::ManagerDone(m, t));
        }
    }

    /// Applies one input to the core; returns the thread's work and what leaves after it.
    fn manager_step(&mut self, m: usize, w: Work) -> (Duration, Vec<Output>) {
        let cfg = self.cfg;
        let c = &cfg.costs;
        let now = self.now;
        let mut work = c.manager_step;
        let mut out = self.mgrs[m].spare.pop().unwrap_or_default();
        let unmarshal = |commands: usize| c.per_message + times(c.per_command, commands as u64);
        match w {
            Work::Setup(u) => {
                if !c.colocated {
                    work += unmarshal(1) + self.oneway();
                }
                let (a, b) = self.calls.get(&u).map_or((0, 0), |c| c.pair);
                let (src, dst) = (&self.cfg.hosts[a], &self.cfg.hosts[b]);
                // Step 2, the QoS mapper core (the user's QoS to a cell-level contract),
                // then step 3, a route with room for its peak rate.
                let contract = self.cfg.contract.traffic();
                let router = &mut self.mgrs[m].router;
                let before = router.misses;
                let route = contract.and_then(|(t, clr)| {
                    router
                        .route(now, src, dst, t.pcr.per_sec())
                        .map(|hops| (hops, t, clr))
                        .map_err(|e| e.message)
                });
                let miss = router.misses > before;
                // Where the QoS mapper and the route object are objects in the manager's
                // process (atmlab's live lab, `colocated`), their work is the manager's,
                // in this step, and nothing crosses a wire. xbind's manager has its QoS
                // mapper in its own address space on the papers' testbeds too (paper 000
                // §II-C1: Orbix's "collocated" feature), and its route cache answers
                // locally on a hit; the sequential manager asks both remotely (§III-B:
                // steps 1-6, each a synchronous call).
                let qos_local = c.colocated || !cfg.manager.blocking;
                let qos_remote = !qos_local;
                let route_remote = miss && !c.colocated;
                if qos_local {
                    work += c.qos_work;
                }
                if miss && c.colocated {
                    work += c.route_work;
                }
                let queries = u64::from(qos_remote) + u64::from(route_remote);
                if queries == 0 {
                    self.start_setup(m, u, b, route, now);
                } else {
                    // The remote queries' round trips: the manager marshals each request
                    // (and unmarshals each answer, when it comes back).
                    self.stats.calls.invocations += queries;
                    let end = c.per_message + c.per_command + self.oneway();
                    work += times(end, queries);
                    let one_way = c.latency + end + end;
                    let mut wait = Duration::ZERO;
                    if qos_remote {
                        wait += one_way + one_way + c.qos_work;
                    }
                    if route_remote {
                        wait += one_way + one_way + c.route_work;
                    }
                    out.push(Output::Resolve(u, queries, wait, Box::new(route)));
                }
            }
            Work::Resolved(u, answers, route) => {
                work += times(c.per_message + c.per_command + self.oneway(), answers);
                let b = self.calls.get(&u).map_or(0, |c| c.pair.1);
                self.start_setup(m, u, b, *route, now);
            }
            Work::Delete(id) => {
                if !c.colocated {
                    work += unmarshal(1) + self.oneway();
                }
                self.mgrs[m].core.delete(now, id);
            }
            Work::Replies(s, mut replies) => {
                if !c.links {
                    work += unmarshal(replies.len()) + self.oneway();
                }
                for (req, i) in replies.drain(..) {
                    if !self.answers_kept && self.mgrs[m].core.stats().retries > 0 {
                        // The first request sent twice: this answer and those after it
                        // are still the switch's records when answers start to be kept.
                        self.keep_answers();
                    }
                    // Taken, it is no longer the switch's record: until a request is
                    // sent twice, nothing will ask the switch for it again.
                    let Some(a) = self.switches[s].given.take(i) else {
                        continue;
                    };
                    let retries = self.mgrs[m].core.stats().retries;
                    self.mgrs[m].core.handle_reply(now, req, a.reply);
                    // Requests are sent again only on a time-out, so the look before
                    // each answer is as good as one after the last (as it was).
                    debug_assert_eq!(retries, self.mgrs[m].core.stats().retries);
                }
                self.spare_answers.push(replies);
            }
            Work::Timeout => {
                self.mgrs[m].timeout_queued = false;
                self.mgrs[m].core.handle_timeout(now);
            }
            Work::Listed(s, listing) => {
                work += unmarshal(listing.len());
                self.listed(m, s, &listing);
            }
        }
        while let Some(t) = self.mgrs[m].core.poll_transmit(now) {
            let Some(s) = self.switch_of(m, t.switch_index, &t.switch) else {
                continue;
            };
            if !c.links {
                work +=
                    c.per_message + times(c.per_command, t.commands.len() as u64) + self.oneway();
            }
            self.stats.calls.invocations += 1;
            out.push(Output::Transmit(s, t.commands));
        }
        while let Some(e) = self.mgrs[m].core.poll_event() {
            // The user's AddConnection or DeleteConnection is answered: the manager
            // marshals the answer (none crosses a wire from a co-located client).
            let answer = matches!(
                e,
                CallEvent::Established { .. }
                    | CallEvent::Failed { .. }
                    | CallEvent::Released { .. }
            );
            if answer && !c.colocated {
                work += c.per_message + c.per_command + self.oneway();
            }
            out.push(Output::Event(e));
        }
        self.arm_timer(m);
        (work, out)
    }

    /// Our number of the core's switch `core` (named `name`).
    fn switch_of(&mut self, m: usize, core: usize, name: &str) -> Option<usize> {
        let known = &mut self.mgrs[m].core_index;
        if let Some(&Some(s)) = known.get(core) {
            return Some(s);
        }
        let s = *self.index.get(name)?;
        if known.len() <= core {
            known.resize(core + 1, None);
        }
        known[core] = Some(s);
        Some(s)
    }

    /// The route to host `b` is known: the core starts the setup, or the call is refused
    /// before any switch is asked.
    fn start_setup(
        &mut self,
        m: usize,
        u: usize,
        b: usize,
        route: Result<Route, String>,
        now: Instant,
    ) {
        match route {
            Ok((hops, traffic, clr)) => {
                let dst = &self.cfg.hosts[b];
                let req = SetupRequest {
                    routes: vec![(dst.clone(), hops)],
                    traffic,
                    clr,
                    buffer_cells: 0,
                    tag: String::new(),
                };
                let g = &mut self.mgrs[m];
                let id = g.core.add(now, req);
                g.by_core.insert(id, u);
            }
            Err(_) => {
                self.decided(u, Outcome::Blocked);
                self.op_ended(m);
            }
        }
    }

    fn arm_timer(&mut self, m: usize) {
        let want = self.mgrs[m].core.poll_timeout();
        match (want, self.mgrs[m].timer) {
            (Some(t), Some((armed, _, _))) if t == armed => {}
            (want, _) => {
                // Re-armed: as if the old timer event were cancelled and a new one
                // scheduled now.
                let timer = want.map(|t| (t, t.max(self.now), self.events.take_seq()));
                self.set_timer(m, timer);
            }
        }
    }

    /// Sets manager `m`'s timer and notes which timer is now the earliest.
    pub(super) fn set_timer(&mut self, m: usize, timer: Option<(Instant, Instant, u64)>) {
        self.mgrs[m].timer = timer;
        self.first_timer = self
            .mgrs
            .iter()
            .enumerate()
            .filter_map(|(m, g)| g.timer.map(|(_, at, seq)| ((at, seq), m)))
            .min();
    }

    /// The next event due by `end`: the event set's earliest, or a core's timer or a
    /// hang-up when it comes first (by time, then by when it was armed or scheduled).
    #[inline]
    fn next_event(&mut self, end: Instant) -> Option<(Instant, Ev)> {
        // The earliest event held outside the set: a manager's timer (by time, then by
        // when it was armed) or a hang-up, whichever comes first (`None` for a hang-up).
        let mut outside = self.first_timer.map(|(key, m)| (key, Some(m)));
        if let Some(Reverse(h)) = self.hangups.peek()
            && outside.is_none_or(|(k, _)| h.when() < k)
        {
            outside = Some((h.when(), None));
        }
        // The set's next event, if it comes first and is due by `end`, in one look at its
        // heap's top: before the outside one when that is due by `end` (and so everything
        // before it is), else by `end` (nothing outside is due).
        let bound = match outside {
            Some((key, _)) if key.0 <= end => key,
            _ => (end, u64::MAX),
        };
        if let Some(next) = self.events.pop_before(bound) {
            return Some(next);
        }
        let ((at, _), which) = outside?;
        if at > end {
            return None;
        }
        match which {
            Some(m) => {
                self.set_timer(m, None);
                Some((at, Ev::Timer(m)))
            }
            None => {
                let Reverse(h) = self.hangups.pop()?;
                Some((at, Ev::Hangup(h.client, h.call)))
            }
        }
    }

    fn manager_done(&mut self, m: usize, t: usize) {
        let mut outputs = self.mgrs[m].server.threads[t].take().unwrap_or_default();
        self.release_cpu();
        let c = &self.cfg.costs;
        let to = self.client(m);
        for o in outputs.drain(..) {
            match o {
                Output::Transmit(s, commands) if c.links => {
                    self.push_link(m, s, LinkJob::Out(commands));
                }
                Output::Transmit(s, commands) => {
                    if let Some(at) = self.wire(c.latency) {
                        self.events.schedule(at, Ev::AtSwitch(s, to, commands));
                    }
                }
                Output::Resolve(u, answers, wait, route) => {
                    let at = self.now + wait;
                    self.events
                        .schedule(at, Ev::AtManager(to, Work::Resolved(u, answers, route)));
                }
                Output::Event(e) => self.call_event(m, e),
            }
        }
        self.mgrs[m].spare.push(outputs);
        self.serve_manager(m);
        self.serve_others();
    }

    fn call_event(&mut self, m: usize, e: CallEvent) {
        if self.crash.is_some() {
            self.journal(m, &e);
        }
        let c = &self.cfg.costs;
        match e {
            CallEvent::Established { call, .. } => {
                let Some(&u) = self.mgrs[m].by_core.get(&call) else {
                    return;
                };
                if c.colocated && self.cpu_free.is_some() {
                    // The caller's task takes its answer up on a processor of the pool
                    // (`pool::hear_answers`).
                    if !self.calls.contains_key(&u) {
                        return;
                    }
                    self.answers.push((m, u, call));
                } else {
                    // The answer crosses the wire to the user.
                    let heard = self.now + c.client_latency();
                    if !self.heard(m, u, call, heard) {
                        return;
                    }
                }
                self.op_ended(m);
            }
            CallEvent::Failed { call, error } => {
                if let Some(u) = self.mgrs[m].by_core.remove(&call) {
                    let outcome = if error.blocked() {
                        Outcome::Blocked
                    } else {
                        Outcome::Failed
                    };
                    self.decided(u, outcome);
                }
                self.op_ended(m);
            }
            CallEvent::Released { call } => {
                self.mgrs[m].by_core.remove(&call);
                self.op_ended(m);
            }
            CallEvent::Changed { .. } => {}
        }
    }

    /// User call `u` (the core's `call`, of manager `m`) hears that it is set up at
    /// `heard`: its latency is recorded and its hang-up drawn. False when the call has
    /// gone.
    fn heard(&mut self, m: usize, u: usize, call: u64, heard: Instant) -> bool {
        let Some(user) = self.calls.remove(&u) else {
            return false;
        };
        let latency = (heard - user.arrived).as_secs_f64();
        self.stats.calls.latency_sum += latency;
        self.latency.record(latency);
        // Already removed from the calls in progress.
        self.count(Outcome::Established);
        let hold = draw_hold(self.cfg, &mut self.rng);
        self.stats.calls.invocations += 1;
        let by = self.client(m);
        let seq = self.events.take_seq();
        self.hangups
            .push(Reverse(Hangup::new(heard + hold, seq, by, call)));
        true
    }

    fn decided(&mut self, u: usize, outcome: Outcome) {
        self.calls.remove(&u);
        self.count(outcome);
    }

    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Established => self.stats.calls.established += 1,
            Outcome::Blocked => self.stats.calls.blocked += 1,
            Outcome::Failed => self.stats.calls.failed += 1,
        }
    }

    /// A work period's stall, if the profile has them.
    fn stall(&mut self) -> Duration {
        self.cfg.costs.stall(&mut self.stall_rng)
    }

    /// What each end of a message between the manager and a switch server pays for it
    /// being an asynchronous invocation: the profile's `oneway` for xbind's manager, none
    /// for a synchronous one (sequential, threaded), whose call and answer are one
    /// invocation.
    fn oneway(&self) -> Duration {
        if self.cfg.manager.blocking {
            Duration::ZERO
        } else {
            self.cfg.costs.oneway
        }
    }

    /// When a message between the manager and a switch arrives, `None` if it is lost
    /// (the faults of the scenario: the core's re-sends and the switches' answers to
    /// repeated requests recover, as they do live).
    #[inline]
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
            let idle = self
                .mgrs
                .iter()
                .all(|g| g.core.active() == 0 && g.server.queue.is_empty());
            if idle && self.calls.is_empty() {
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
        let active = self.mgrs.iter().map(|g| g.core.active()).sum();
        (active, connections, allocated)
    }
}

/// Each of `count` managers' partition of every port's VCI range (paper 000 §II-C1):
/// the range all ports share, cut in equal parts; the whole range (`None`) for one.
pub(super) fn partitions(
    cfg: &ControlConfig,
    count: usize,
) -> Result<Vec<Option<(u16, u16)>>, SimError> {
    if count <= 1 {
        return Ok(vec![None]);
    }
    let ports = cfg.switches.iter().flat_map(|s| &s.ports);
    let lo = ports.clone().map(|p| p.vci_range.0).max().unwrap_or(0);
    let hi = ports.map(|p| p.vci_range.1).min().unwrap_or(0);
    let width = (u32::from(hi) + 1).saturating_sub(u32::from(lo)) / count as u32;
    if width == 0 {
        return Err(model_err(format!(
            "{count} managers cannot share the VCIs {lo}-{hi} every port has"
        )));
    }
    Ok((0..count as u32)
        .map(|i| {
            let a = u32::from(lo) + i * width;
            let b = if i + 1 == count as u32 {
                u32::from(hi)
            } else {
                a + width - 1
            };
            Some((a as u16, b as u16))
        })
        .collect())
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Established,
    Blocked,
    Failed,
}
