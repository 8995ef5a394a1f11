//! Crashes and recovery in the simulated shell (issue 23 items 1 and 3; issue 10's
//! recovery, as the live shell does it): a switch server or a manager of the plane
//! crashes and restarts as the scenario's `faults.crashes` say
//! ([`crate::control::crash`]), and comes back as the live ones do, through the same
//! cores:
//!
//! - a **switch server** keeps what its journal keeps (`atmlab_fabric::live::journal`:
//!   every connection; not the reservations, not the answers it gave): at the crash its
//!   core is rebuilt from its connections (`Switch::restore`), its queue, the answers in
//!   progress and the answers it kept for repeated requests are lost; while it is down,
//!   what reaches it is lost. When it is back, each manager's link finds it open again,
//!   lists its connections, and the manager reconciles with them
//!   ([`CmCore::reconcile`]), as the live link does (`cm::live::link`);
//! - a **manager** loses everything but its journal (written when a call is established,
//!   before its user hears, and when it is released, as `cm::journal`): its core, its
//!   route cache, its queue, the outputs of its threads, its timer, its links' queues. The calls it was
//!   setting up are lost to their users (their AddConnection fails), and so is every
//!   operation sent to it while it is down; a user whose DeleteConnection was lost asks
//!   again when it is back. Events of the dead process are fenced: each incarnation
//!   talks to the switches as a client of its own (`client`: the manager's number and
//!   its epoch, as a restarted live manager's stream has a client id of its own), so
//!   its answers, its queued messages and its work in flight are dropped, never handed
//!   to the next incarnation's core. At the restart a new core takes its calls back
//!   from the journal ([`CmCore::adopt`]) and the start-up audit's decisions
//!   ([`atmlab_control::cm::core::audit::plan`], the live audit's own) say which
//!   switch connections to keep and which to release, which identifiers to give back;
//!   they are carried out at once, before the manager serves (the audit's own time is
//!   part of the down-time). A switch down at that moment delays the restart until it
//!   is back, as the live audit cannot read it.
//!
//! With `recovery = false` neither happens: no reconcile, and a manager restarted
//! without its journal (the ablation, to see what recovery buys).
//!
//! The metrics ([`crate::control::crash::CRASH_METRICS`]) end with an audit after the
//! run: arrivals stop, every call ends, each manager gives its cached identifiers back,
//! and what is left at the switches is counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use atmlab_control::cm::core::audit::{Held, JournaledCall, Strays, plan};
use atmlab_control::cm::core::{CallEvent, CmCore};
use atmlab_control::cm::routes::CachedRouter;
use atmlab_control::route::RouteObject;
use atmlab_core::time::{Duration, Instant};
use atmlab_fabric::switch::{Atomicity, Connection, Reservation, Switch};
use atmlab_sim::rng::{RngFactory, SimRng, exp1};
use rustc_hash::{FxHashMap, FxHashSet};

use super::{Ev, LinkJob, Outcome, Plane, Sleeper, Work, probes};
use crate::control::crash::{Crash, Node, When};

/// How long a manager whose restart found a switch down waits before trying again.
const RETRY_RESTART: Duration = Duration::from_millis(100);

/// A crash fault's event.
#[derive(Debug)]
pub(super) enum FaultEv {
    /// The scenario's crash `i` happens.
    Crash(usize),
    /// The node of crash `i` restarts.
    Restart(usize),
    /// Manager `m` lists switch `s`, which came back (`true`) or for its periodic sweep
    /// (the listing reaches the switch now; its answer goes back to the manager).
    List(usize, usize, bool),
    /// Manager `m`'s periodic sweep of every switch (`CmConfig::sweep_interval`).
    Sweep(usize),
}

/// A switch's listing as a manager reads it.
#[derive(Debug)]
pub(super) struct Listing {
    /// The switch came back (reconcile), else a periodic sweep.
    reopened: bool,
    connections: Vec<Connection>,
    reservations: Vec<Reservation>,
}

impl Listing {
    /// Its entries (what unmarshalling it costs).
    pub(super) fn len(&self) -> usize {
        self.connections.len() + self.reservations.len()
    }
}

/// What the plane keeps of its crash faults.
pub(super) struct CrashState {
    /// Per switch: down.
    switch_down: Vec<bool>,
    /// Per manager: down, and its incarnation.
    mgr_down: Vec<bool>,
    epoch: Vec<usize>,
    /// Per manager, its journal: the established calls, by id.
    journal: Vec<BTreeMap<u64, JournaledCall>>,
    /// Calls whose user hung up and that are not yet released, by manager: their
    /// DeleteConnection is asked again after a crash.
    hung: Vec<FxHashSet<u64>>,
    /// Deletes to ask again at each manager's restart.
    retry_deletes: Vec<FxHashSet<u64>>,
    /// Per manager, the incarnation each established call was set up by: a user's
    /// hang-up (scheduled by that incarnation) counts only while the call it was for
    /// holds its id (a restarted core may give the id of a call it did not take back
    /// to a new one).
    born: Vec<FxHashMap<u64, usize>>,
    /// Draws the Poisson crashes' up-times (a stream of its own).
    rng: SimRng,
    /// The route object, for a restarted manager's new route cache.
    route: Arc<Mutex<RouteObject>>,
    /// No more crashes (the final drain).
    stopped: bool,
    /// The dead cores' counts (a restarted manager's core counts from zero): the
    /// managers' cache hits and misses, and the first manager's probes.
    retired_cache: (u64, u64),
    retired_probes: probes::Mark,
    /// How often each manager sweeps every switch for strays, as the live manager does
    /// (`faults.sweep`), with recovery.
    sweep: Option<Duration>,
    crashes: u64,
    lost: u64,
    recovered: u64,
    released: u64,
}

impl CrashState {
    /// The dead cores' cache hits and misses.
    pub(super) fn retired_cache(&self) -> (u64, u64) {
        self.retired_cache
    }

    /// The first manager's dead cores' probes.
    pub(super) fn retired_probes(&self) -> &probes::Mark {
        &self.retired_probes
    }

    /// Manager `m`'s number and whether `client` is its current incarnation.
    fn who(&self, client: usize) -> (usize, bool) {
        let n = self.epoch.len();
        let m = client % n;
        (m, client / n == self.epoch[m])
    }
}

impl Plane<'_> {
    /// Sets the crash faults up, if the scenario has any: their state, and the first
    /// crash of each.
    pub(super) fn arm_crashes(&mut self, rngs: &RngFactory, route: &Arc<Mutex<RouteObject>>) {
        if self.cfg.crashes.crashes.is_empty() {
            return;
        }
        let n = self.mgrs.len();
        let mut st = CrashState {
            switch_down: vec![false; self.switches.len()],
            mgr_down: vec![false; n],
            epoch: vec![0; n],
            journal: vec![BTreeMap::new(); n],
            hung: vec![FxHashSet::default(); n],
            retry_deletes: vec![FxHashSet::default(); n],
            born: vec![FxHashMap::default(); n],
            rng: rngs.stream(3),
            route: Arc::clone(route),
            stopped: false,
            retired_cache: (0, 0),
            retired_probes: probes::Mark::default(),
            sweep: self.cfg.crashes.sweep.filter(|_| self.cfg.crashes.recovery),
            crashes: 0,
            lost: 0,
            recovered: 0,
            released: 0,
        };
        for (i, c) in self.cfg.crashes.crashes.iter().enumerate() {
            let at = match c.when {
                When::At(at) => Instant::ZERO + at,
                When::Poisson(mtbf) => Instant::ZERO + up_time(&mut st.rng, mtbf),
            };
            self.events.schedule(at, Ev::Fault(FaultEv::Crash(i)));
        }
        if let Some(every) = st.sweep {
            for m in 0..n {
                self.events
                    .schedule(Instant::ZERO + every, Ev::Fault(FaultEv::Sweep(m)));
            }
        }
        self.crash = Some(Box::new(st));
    }

    /// The number manager `m`'s current incarnation goes by (its own number when
    /// nothing crashes).
    pub(super) fn client(&self, m: usize) -> usize {
        match &self.crash {
            None => m,
            Some(st) => m + self.mgrs.len() * st.epoch[m],
        }
    }

    /// Drops what a crash made moot (messages to a switch that is down or from a dead
    /// manager; answers, work and link jobs of a dead manager) and turns a live client's
    /// number back into its manager's; `None` when the event is spent.
    pub(super) fn fence(&mut self, ev: Ev) -> Option<Ev> {
        let st = self.crash.as_deref_mut()?;
        match ev {
            Ev::AtSwitch(s, client, msg) => {
                let (m, current) = st.who(client);
                (current && !st.switch_down[s] && !st.mgr_down[m])
                    .then_some(Ev::AtSwitch(s, client, msg))
            }
            Ev::AtManager(client, w) => {
                let (m, current) = st.who(client);
                if current && !st.mgr_down[m] {
                    return Some(Ev::AtManager(m, w));
                }
                match w {
                    // A setup sent to a dead manager fails; its user is told.
                    Work::Setup(u) if self.calls.contains_key(&u) => {
                        st.lost += 1;
                        self.decided(u, Outcome::Failed);
                    }
                    // A delete lost with the manager is asked again when it is back
                    // (one sent before the crash was noted then).
                    Work::Delete(id) if current => {
                        st.retry_deletes[m].insert(id);
                    }
                    Work::Replies(s, answers) => self.switches[s].lost(&answers),
                    _ => {}
                }
                None
            }
            Ev::AtLink(client, s, answers) => {
                let (m, current) = st.who(client);
                if current && !st.mgr_down[m] {
                    return Some(Ev::AtLink(m, s, answers));
                }
                self.switches[s].lost(&answers);
                None
            }
            Ev::LinkDone(client, s) => {
                let (m, current) = st.who(client);
                if current {
                    return Some(Ev::LinkDone(m, s));
                }
                // The dead process's link job: its processor is free, its output lost.
                if let Some(LinkJob::In(answers)) = self.mgrs[m].links[s].job.take() {
                    self.switches[s].lost(&answers);
                }
                self.release_cpu();
                if !self.crash.as_ref().is_some_and(|st| st.mgr_down[m]) {
                    self.serve_link(m, s);
                }
                self.serve_others();
                None
            }
            Ev::Hangup(client, id) => {
                let n = st.epoch.len();
                let (m, epoch) = (client % n, client / n);
                if st.born[m].get(&id) != Some(&epoch) {
                    return None;
                }
                st.hung[m].insert(id);
                Some(Ev::Hangup(m, id))
            }
            Ev::Woken(Sleeper::Manager(m)) if st.mgr_down[m] => {
                self.mgrs[m].server.waking = false;
                None
            }
            ev => Some(ev),
        }
    }

    /// Keeps manager `m`'s journal as the live one (an established call written before
    /// its user hears, a released one removed) and its users' hang-ups.
    pub(super) fn journal(&mut self, m: usize, e: &CallEvent) {
        let Some(st) = self.crash.as_deref_mut() else {
            return;
        };
        match e {
            CallEvent::Established { call, .. } => {
                st.born[m].insert(*call, st.epoch[m]);
                if !self.cfg.crashes.managers_crash() {
                    return;
                }
                let Some(view) = self.mgrs[m].core.view(*call) else {
                    return;
                };
                let (a, b) = self.mgrs[m]
                    .by_core
                    .get(call)
                    .and_then(|u| self.calls.get(u))
                    .map_or((0, 0), |c| c.pair);
                st.journal[m].insert(
                    *call,
                    JournaledCall {
                        view,
                        source: self.cfg.hosts[a].clone(),
                        destination: self.cfg.hosts[b].clone(),
                        bounds: Default::default(),
                    },
                );
            }
            CallEvent::Released { call } => {
                st.journal[m].remove(call);
                st.hung[m].remove(call);
                st.born[m].remove(call);
            }
            _ => {}
        }
    }

    /// A crash fault's event.
    pub(super) fn fault(&mut self, f: FaultEv) {
        match f {
            FaultEv::Crash(i) => {
                let c = self.cfg.crashes.crashes[i];
                let Some(st) = self.crash.as_deref_mut() else {
                    return;
                };
                let down = match c.node {
                    Node::Switch(s) => st.switch_down[s],
                    Node::Manager(m) => st.mgr_down[m],
                };
                if st.stopped || down {
                    return;
                }
                st.crashes += 1;
                match c.node {
                    Node::Switch(s) => self.crash_switch(s),
                    Node::Manager(m) => self.crash_manager(m),
                }
                self.events
                    .schedule(self.now + c.down, Ev::Fault(FaultEv::Restart(i)));
            }
            FaultEv::Restart(i) => {
                let c = self.cfg.crashes.crashes[i];
                let restarted = match c.node {
                    Node::Switch(s) => {
                        self.restart_switch(s);
                        true
                    }
                    Node::Manager(m) => self.restart_manager(m),
                };
                if !restarted {
                    self.events
                        .schedule(self.now + RETRY_RESTART, Ev::Fault(FaultEv::Restart(i)));
                    return;
                }
                self.next_crash(&c, i);
            }
            FaultEv::List(m, s, reopened) => {
                let down = self.crash.as_deref().is_some_and(|st| st.switch_down[s]);
                let core = &self.switches[s].core;
                // A switch that is down does not answer: the sweep finds nothing there
                // (as the live one counts an unanswered listing as empty).
                let listing = Listing {
                    reopened,
                    connections: if down { Vec::new() } else { core.connections() },
                    reservations: if down || reopened {
                        Vec::new()
                    } else {
                        core.reservations()
                    },
                };
                let at = self.now + self.cfg.costs.latency;
                let to = self.client(m);
                self.events
                    .schedule(at, Ev::AtManager(to, Work::Listed(s, Box::new(listing))));
            }
            FaultEv::Sweep(m) => {
                let Some(st) = self.crash.as_deref_mut() else {
                    return;
                };
                let Some(every) = st.sweep else {
                    return;
                };
                self.events
                    .schedule(self.now + every, Ev::Fault(FaultEv::Sweep(m)));
                if st.mgr_down[m] {
                    return;
                }
                let at = self.now + self.cfg.costs.latency;
                for s in 0..self.switches.len() {
                    self.events
                        .schedule(at, Ev::Fault(FaultEv::List(m, s, false)));
                }
            }
        }
    }

    /// A Poisson crash's next one, an up-time after its restart.
    fn next_crash(&mut self, c: &Crash, i: usize) {
        let Some(st) = self.crash.as_deref_mut() else {
            return;
        };
        if let When::Poisson(mtbf) = c.when {
            let at = self.now + up_time(&mut st.rng, mtbf);
            self.events.schedule(at, Ev::Fault(FaultEv::Crash(i)));
        }
    }

    /// Switch server `s` dies: its journal keeps its connections, nothing else.
    fn crash_switch(&mut self, s: usize) {
        if let Some(st) = self.crash.as_deref_mut() {
            st.switch_down[s] = true;
        }
        let sw = &mut self.switches[s];
        let mut core = Switch::new(&self.cfg.switches[s]).expect("a validated switch");
        for c in sw.core.connections() {
            // Restored as the live server replays its journal (a valid table replays).
            let _ = core.restore(&c);
        }
        sw.core = core;
        sw.server.queue.clear();
        sw.readings.clear();
        // The answers being given die with it; its threads free when their work ends.
        sw.crashed();
    }

    /// Switch server `s` is back: each manager's link finds it open again and lists its
    /// connections for the manager to reconcile with.
    fn restart_switch(&mut self, s: usize) {
        let Some(st) = self.crash.as_deref_mut() else {
            return;
        };
        st.switch_down[s] = false;
        if !self.cfg.crashes.recovery {
            return;
        }
        let up: Vec<usize> = (0..self.mgrs.len()).filter(|&m| !st.mgr_down[m]).collect();
        let at = self.now + self.cfg.costs.latency;
        for m in up {
            self.events
                .schedule(at, Ev::Fault(FaultEv::List(m, s, true)));
        }
    }

    /// The manager reconciles with switch `s`'s listing, or sweeps it (in a thread's
    /// step), as the live manager does with its links' listings.
    pub(super) fn listed(&mut self, m: usize, s: usize, l: &Listing) {
        let name = self.cfg.switches[s].name.clone();
        let core = &mut self.mgrs[m].core;
        let (completed, released) = if l.reopened {
            core.reconcile(self.now, &name, &l.connections)
        } else {
            let released = core.sweep(self.now, &name, &l.connections, true);
            core.sweep_reservations(self.now, &name, &l.reservations, true);
            (0, released)
        };
        if let Some(st) = self.crash.as_deref_mut() {
            st.recovered += completed as u64;
            st.released += released as u64;
        }
    }

    /// Manager `m` dies: everything but its journal is lost.
    fn crash_manager(&mut self, m: usize) {
        let n = self.mgrs.len();
        let Some(st) = self.crash.as_deref_mut() else {
            return;
        };
        st.mgr_down[m] = true;
        let old = m + n * st.epoch[m];
        st.epoch[m] += 1;
        // Its users' deletes not yet done are asked again when it is back.
        let hung: Vec<u64> = st.hung[m].iter().copied().collect();
        st.retry_deletes[m].extend(hung);
        // Calls set up whose answers wait for their callers (`pool::hear_answers`) were
        // never heard: they fail with those being set up, and leave its journal, so that
        // each counts once, as lost (the restart's audit releases their connections as
        // strays, where taking them back would hold them for nobody).
        let (waiting, kept) = std::mem::take(&mut self.answers)
            .into_iter()
            .partition::<Vec<_>, _>(|a| a.0 == m);
        self.answers = kept;
        for (_, _, call) in waiting {
            st.journal[m].remove(&call);
            st.born[m].remove(&call);
        }
        // The calls it was setting up fail (their users' AddConnection breaks off).
        let mut setting_up: Vec<usize> = self.calls.keys().filter(|u| u % n == m).collect();
        setting_up.sort_unstable();
        st.lost += setting_up.len() as u64;
        for u in setting_up {
            self.decided(u, Outcome::Failed);
        }
        let g = &mut self.mgrs[m];
        for w in g.server.queue.drain(..) {
            if let Work::Replies(s, answers) = w {
                self.switches[s].lost(&answers);
            }
        }
        for t in g.server.threads.iter_mut().flatten() {
            // Its processor is held until the step's end; what it would emit is lost.
            t.clear();
        }
        for (s, link) in g.links.iter_mut().enumerate() {
            // A job in progress ends (fenced) and frees its processor.
            for (job, _) in link.queue.drain(..) {
                if let LinkJob::In(answers) = job {
                    self.switches[s].lost(&answers);
                }
            }
        }
        g.by_core.clear();
        g.in_progress = 0;
        g.waiting_ops.clear();
        g.timeout_queued = false;
        self.set_timer(m, None);
        // What it had queued at the switches dies with its connections to them.
        for sw in &mut self.switches {
            let mut kept = std::collections::VecDeque::new();
            let mut readings = std::collections::VecDeque::new();
            for (job, r) in sw.server.queue.drain(..).zip(sw.readings.drain(..)) {
                if job.0 != old {
                    kept.push_back(job);
                    readings.push_back(r);
                }
            }
            sw.server.queue = kept;
            sw.readings = readings;
        }
    }

    /// Manager `m` restarts: a new core, its calls taken back from the journal and the
    /// start-up audit carried out. False if a switch is down (tried again later).
    fn restart_manager(&mut self, m: usize) -> bool {
        let recovery = self.cfg.crashes.recovery;
        let Some(st) = self.crash.as_deref_mut() else {
            return true;
        };
        if st.switch_down.iter().any(|d| *d) {
            return false;
        }
        let config = self.mgrs[m].core.config().clone();
        let owner = config.owner.clone();
        let mut core = CmCore::new(config).expect("the running manager's configuration");
        let now = self.now;
        let calls: Vec<JournaledCall> = if recovery {
            st.journal[m].values().cloned().collect()
        } else {
            Vec::new()
        };
        let retry = std::mem::take(&mut st.retry_deletes[m]);
        let mut adopted = Vec::new();
        if recovery {
            let held: Vec<Held> = self
                .switches
                .iter()
                .zip(&self.cfg.switches)
                .map(|(sw, c)| Held {
                    switch: c.name.clone(),
                    connections: sw.core.connections(),
                    reservations: sw.core.reservations(),
                })
                .collect();
            // The simulated journal is the one that recorded this owner's connections:
            // strays are released, as `--release-strays` says (never a fresh journal).
            let strays = Strays {
                release: true,
                adopt: None,
            };
            let mut take_back =
                |c: &JournaledCall| core.adopt(now, &c.view).map_err(str::to_string);
            let decided = plan(&owner, &calls, &held, &strays, &mut take_back)
                .expect("releasing strays is never refused");
            for repair in &decided.repairs {
                if let Some(s) = self.index.get(&repair.switch) {
                    let _ = self.switches[*s]
                        .core
                        .execute(&repair.commands, Atomicity::ContinueOnError);
                }
                st.released += repair.released as u64;
            }
            st.recovered += decided.taken as u64;
            for id in &decided.forget {
                st.journal[m].remove(id);
                st.born[m].remove(id);
                if !st.hung[m].remove(id) {
                    // Established and not hung up: its user loses the call.
                    st.lost += 1;
                }
            }
            adopted = decided.hosts.iter().map(|h| h.0).collect();
        } else {
            // No journal: every call it held is lost to its user.
            let held: Vec<u64> = std::mem::take(&mut st.journal[m]).into_keys().collect();
            for id in held {
                st.born[m].remove(&id);
                if !st.hung[m].remove(&id) {
                    st.lost += 1;
                }
            }
        }
        st.mgr_down[m] = false;
        let mut again: Vec<u64> = retry
            .into_iter()
            .filter(|id| adopted.contains(id))
            .collect();
        again.sort_unstable();
        let g = &mut self.mgrs[m];
        let (h, x) = g.core.cache_counts();
        st.retired_cache = (st.retired_cache.0 + h, st.retired_cache.1 + x);
        if m == 0 {
            st.retired_probes = st.retired_probes.plus(&probes::Mark::of(&g.core));
        }
        g.core = core;
        g.router = CachedRouter::new(Arc::clone(&st.route), self.cfg.manager.route_ttl);
        g.core_index.clear();
        let at = now + self.cfg.costs.client_latency();
        let to = self.client(m);
        for id in again {
            self.events
                .schedule(at, Ev::AtManager(to, Work::Delete(id)));
        }
        self.arm_timer(m);
        true
    }

    /// The crash metrics ([`crate::control::crash::CRASH_METRICS`]): the counts of the
    /// run, then the audit after it drains.
    pub(super) fn crash_metrics(&mut self) -> Vec<(&'static str, f64)> {
        let until = self.now + Duration::from_secs(600);
        let (calls, connections, reservations) = self.drain_audit(until);
        let st = self.crash.as_deref().expect("a plane with crashes");
        let values = [
            st.crashes as f64,
            st.lost as f64,
            st.recovered as f64,
            st.released as f64,
            calls as f64,
            connections as f64,
            reservations as f64,
        ];
        crate::control::crash::CRASH_METRICS
            .iter()
            .copied()
            .zip(values)
            .collect()
    }

    /// Stops the arrivals and the crashes, lets every call end and every node come back,
    /// has each manager give its cached identifiers back, lets two of its periodic sweeps
    /// pass (a stray is released when two sweeps in a row find it), and counts what is
    /// left: the calls the managers hold, and at the switches the connections no call
    /// holds and the identifiers reserved.
    pub(super) fn drain_audit(&mut self, until: Instant) -> (usize, usize, usize) {
        self.arrivals_stopped = true;
        if let Some(st) = self.crash.as_deref_mut() {
            st.stopped = true;
        }
        // Once the caches are given back: when the sweeps have had their two turns.
        let mut given_back: Option<Instant> = None;
        let sweeps = self
            .crash
            .as_deref()
            .and_then(|st| st.sweep)
            .map_or(Duration::ZERO, |every| {
                every + every + Duration::from_secs(1)
            });
        while let Some((t, ev)) = self.next_event(until) {
            self.now = t;
            if !matches!(ev, Ev::Mark) {
                self.handle(ev);
            }
            let up = self
                .crash
                .as_deref()
                .is_none_or(|st| !st.mgr_down.iter().chain(&st.switch_down).any(|d| *d));
            let quiet =
                up && self.calls.is_empty()
                    && self.mgrs.iter().all(|g| {
                        g.core.active() == 0 && g.core.in_flight() == 0 && g.server.idle()
                    })
                    && self.switches.iter().all(|s| s.server.idle());
            if quiet && given_back.is_none() {
                // A clean shutdown's give-back (`CmCore::drain_caches`), sent by a step.
                given_back = Some(self.now + sweeps);
                for m in 0..self.mgrs.len() {
                    self.mgrs[m].core.drain_caches(self.now);
                    self.give_manager(m, Work::Timeout);
                }
            } else if quiet
                && given_back.is_some_and(|at| self.now >= at)
                && self
                    .mgrs
                    .iter()
                    .all(|g| g.links.iter().all(|l| l.job.is_none()))
            {
                break;
            }
        }
        let held: FxHashSet<(String, u64)> = self
            .mgrs
            .iter()
            .flat_map(|g| g.core.views())
            .flat_map(|v| {
                v.hops
                    .iter()
                    .map(|(h, conn, ..)| (h.switch.to_string(), *conn))
                    .collect::<Vec<_>>()
            })
            .collect();
        let connections = self
            .switches
            .iter()
            .zip(&self.cfg.switches)
            .map(|(s, c)| {
                s.core
                    .connections()
                    .iter()
                    .filter(|x| !held.contains(&(c.name.clone(), x.id)))
                    .count()
            })
            .sum();
        let reservations = self
            .switches
            .iter()
            .map(|s| s.core.reservations().len())
            .sum();
        let calls = self.mgrs.iter().map(|g| g.core.active()).sum();
        (calls, connections, reservations)
    }
}

/// An up-time drawn for a Poisson crash of mean time between failures `mtbf`.
fn up_time(rng: &mut SimRng, mtbf: Duration) -> Duration {
    Duration::from_secs_f64(exp1(rng) * mtbf.as_secs_f64())
}
