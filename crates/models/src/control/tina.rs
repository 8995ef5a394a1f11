//! The simulated shell of TINA's connection performers (paper 001 §1.2.1: the LNC over
//! a hierarchy of NML-CPs over one EML-CP per switch; §4.3: Alcin's sequential
//! sub-connection setup and the parallel setup the paper asks for; DESIGN.md §2: one
//! core, two shells). The real cores of `atmlab_control::tina::core` ([`LncCore`],
//! [`NmlCore`], [`EmlCore`]), the real switch cores and the real route object, driven in
//! virtual time as the managers' shell (`shell`) drives its core: this file decides only
//! when things happen, by the [`CostProfile`](super::CostProfile), never what a
//! performer does.
//!
//! Each performer is a FIFO server with `threads` threads (the manager's `threads`), as
//! each switch server is with the profile's `switch_threads`. An input (a user's request,
//! an invocation from the parent, an answer from a child, a switch or the route object)
//! is applied to the core when a thread takes it; what the core emitted leaves when the
//! thread finishes, after `manager_step` and the marshalling of what it read and wrote
//! (`per_message` + `per_command` for each message, an SNC operation or a switch command
//! being one command). A remote invocation is a request and its answer, each `latency`
//! on the wire; the core emits several invocations at once only where they may run
//! concurrently (parallel setup), and the shell sends whatever it was given at once, as
//! the live driver (`atmlab_control::tina::shell`) does.
//!
//! Counted per call (`invocations_per_call`): the user's AddConnection and
//! DeleteConnection, the route object's query (on a route-cache miss; with the default
//! `route_ttl` of zero, every setup), and every invocation a core emits (LNC -> NML,
//! NML -> NML, NML -> EML, EML -> switch), failed ones and releases included. A
//! co-located EML-CP (`colocate`) is called in its NML-CP's address space: not on the
//! wire, not marshalled, not counted (it keeps a thread of its own).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use atmlab_control::cm::core::CallError;
use atmlab_control::cm::routes::{CachedRouter, Router};
use atmlab_control::route::RouteObject;
use atmlab_control::tina::core::eml::EmlCore;
use atmlab_control::tina::core::lnc::{Contract, LncCore, LncReply, LncRequest};
use atmlab_control::tina::core::nml::NmlCore;
use atmlab_control::tina::core::{
    ErrorKind, HopSpec, InvocationId, OpId, SncCore, SncError, SncRequest, SncResult, Traffic,
};
use atmlab_control::tina::iface;
use atmlab_control::tina::partition::hierarchy;
use atmlab_core::time::{Duration, Instant};
use atmlab_core::units::CellRate;
use atmlab_fabric::switch::{Command, Reply, Switch};
use atmlab_sim::SimError;
use atmlab_sim::event_set::EventSet;
use atmlab_sim::model::Replication;
use atmlab_sim::rng::{RngFactory, SimRng, exp1};
use atmlab_sim::stats::Histogram;

use super::driver::{Driven, draw_hold, draw_pair, model_err};
use super::{ControlConfig, METRICS, TinaSpec};

/// An input to a performer.
#[derive(Debug)]
enum Input {
    /// A user's AddConnection for user call `u` (the LNC).
    Add(usize),
    /// A user's DeleteConnection of the LNC's call.
    Delete(u64),
    /// An invocation from the parent, under the parent's invocation id.
    Request(InvocationId, SncRequest),
    /// A child's answer to invocation `id`.
    Answer(InvocationId, SncResult),
    /// A switch's answer to command `id` (an EML-CP).
    Switch(InvocationId, Result<Reply, SncError>),
    /// The route object's answer to route request `id` (the LNC).
    Route(InvocationId, Result<Vec<HopSpec>, CallError>),
}

/// What leaves when a performer's thread finishes.
#[derive(Debug)]
enum Out {
    /// An input for performer `to`, arriving `delay` later; `wired`: unmarshalled there.
    Send {
        to: usize,
        input: Input,
        delay: Duration,
        wired: bool,
    },
    /// A command for switch `switch` from EML-CP node `from`.
    Command {
        switch: usize,
        from: usize,
        id: InvocationId,
        command: Command,
    },
    /// The LNC's answer to user call `u`'s AddConnection.
    Heard(usize, Result<LncReply, SncError>),
}

#[derive(Debug)]
enum Ev {
    Arrival,
    /// An input reaches performer `.0`; `.2`: it came over the wire.
    At(usize, Input, bool),
    Done(usize, usize),
    AtSwitch(usize, usize, InvocationId, Command),
    SwitchDone(usize, usize),
    Hangup(u64),
    Mark,
}

/// One performer's core.
enum Core {
    Lnc(LncCore),
    /// An NML-CP and the node of each of its children.
    Nml(NmlCore, Vec<usize>),
    /// An EML-CP and its switch.
    Eml(EmlCore, usize),
}

/// A performer: its core, its server, and who it answers.
struct Node {
    core: Core,
    queue: VecDeque<(Input, bool)>,
    threads: Vec<Option<Vec<Out>>>,
    busy: Duration,
    /// The parent's node (none for the LNC).
    parent: usize,
    /// In its parent's address space (a co-located EML-CP).
    local: bool,
    /// Each operation's invocation id at the parent.
    callers: HashMap<OpId, InvocationId>,
    next_op: OpId,
}

/// A switch's answer on its way back: the EML-CP's node, its command id, the answer.
type Answered = (usize, InvocationId, Result<Reply, SncError>);

/// A switch server: its core and its threads.
struct SwitchNode {
    core: Switch,
    queue: VecDeque<(usize, InvocationId, Command)>,
    threads: Vec<Option<Answered>>,
    busy: Duration,
}

/// What a user operation at the LNC is.
#[derive(Debug, Clone, Copy)]
enum UserOp {
    Add(usize),
    Delete,
}

/// The counters of one measured period.
type Stats = super::driver::Calls;

/// TINA's whole simulated deployment in one replication.
pub(super) struct TinaPlane<'a> {
    cfg: &'a ControlConfig,
    events: EventSet<Ev>,
    now: Instant,
    rng: SimRng,
    /// Draws the profile's stalls (its own stream, as in the managers' shell).
    stall_rng: SimRng,
    router: CachedRouter,
    /// The LNC (node 0), the NML-CPs, the EML-CPs.
    nodes: Vec<Node>,
    root: usize,
    switches: Vec<SwitchNode>,
    /// User calls waiting for their answer: when each arrived.
    calls: HashMap<usize, (usize, usize, Instant)>,
    next_call: usize,
    lnc_ops: HashMap<OpId, UserOp>,
    stats: Stats,
    latency: Histogram,
    /// Busy times at the last mark: performers, switches.
    marked: (Vec<Duration>, Vec<Duration>),
    /// No more calls arrive (draining at the end of a leak check).
    arrivals_stopped: bool,
}

const LNC: usize = 0;

impl<'a> TinaPlane<'a> {
    /// The deployment of `spec` over the scenario's switches (partitioned in the
    /// topology's order, as `atmlab_control::tina::lnc::start` partitions the live
    /// network's).
    pub(super) fn new(
        cfg: &'a ControlConfig,
        spec: &TinaSpec,
        rep: &Replication,
    ) -> Result<Self, SimError> {
        let rngs = RngFactory::new(rep.seed, rep.replication);
        let route = RouteObject::new(cfg.view.clone()).map_err(|e| model_err(e.to_string()))?;
        let router = CachedRouter::new(Arc::new(Mutex::new(route)), cfg.manager.route_ttl);
        let names: Vec<String> = cfg.switches.iter().map(|s| s.name.clone()).collect();
        let tree =
            hierarchy(&names, spec.depth, spec.fanout).map_err(|e| model_err(e.to_string()))?;
        let threads = cfg.manager.threads as usize;
        let node = |core: Core, parent: usize, local: bool| Node {
            core,
            queue: VecDeque::new(),
            threads: (0..threads).map(|_| None).collect(),
            busy: Duration::ZERO,
            parent,
            local,
            callers: HashMap::new(),
            next_op: 1,
        };
        let mut nodes = vec![node(Core::Lnc(LncCore::new()), LNC, false)];
        // The NML-CPs in pre-order (a parent before its children), then one EML-CP per
        // switch in the topology's order.
        let subs = tree.all();
        let nml_base = nodes.len();
        let eml_base = nml_base + subs.len();
        let sub_node: HashMap<&str, usize> = subs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), nml_base + i))
            .collect();
        let mut eml_parent = vec![LNC; names.len()];
        for (i, sub) in subs.iter().enumerate() {
            let me = nml_base + i;
            let (children, ifaces): (Vec<usize>, Vec<&'static str>) = if sub.children.is_empty() {
                sub.switches
                    .iter()
                    .map(|sw| {
                        let k = names.iter().position(|n| n == sw).unwrap_or(0);
                        eml_parent[k] = me;
                        let iface = if spec.colocate {
                            iface::NML_EML_LOCAL
                        } else {
                            iface::NML_EML
                        };
                        (eml_base + k, iface)
                    })
                    .unzip()
            } else {
                sub.children
                    .iter()
                    .map(|c| (sub_node[c.name.as_str()], iface::NML_NML))
                    .unzip()
            };
            let parent = subs
                .iter()
                .position(|p| p.children.iter().any(|c| c.name == sub.name))
                .map_or(LNC, |p| nml_base + p);
            let core = NmlCore::new((*sub).clone(), ifaces, spec.mode);
            nodes.push(node(Core::Nml(core, children), parent, false));
        }
        for (k, name) in names.iter().enumerate() {
            let core = EmlCore::new(name.clone(), "tina");
            nodes.push(node(Core::Eml(core, k), eml_parent[k], spec.colocate));
        }
        let mut switches = Vec::new();
        for sc in &cfg.switches {
            let core =
                Switch::new(sc).map_err(|e| model_err(format!("switch {}: {e}", sc.name)))?;
            let n = cfg.costs.switch_threads as usize;
            switches.push(SwitchNode {
                core,
                queue: VecDeque::new(),
                threads: (0..n).map(|_| None).collect(),
                busy: Duration::ZERO,
            });
        }
        Ok(TinaPlane {
            cfg,
            events: EventSet::new(),
            now: Instant::ZERO,
            rng: rngs.stream(0),
            stall_rng: rngs.stream(2),
            router,
            nodes,
            root: nml_base,
            switches,
            calls: HashMap::new(),
            next_call: 0,
            lnc_ops: HashMap::new(),
            stats: Stats::default(),
            latency: Histogram::new(),
            marked: (Vec::new(), Vec::new()),
            arrivals_stopped: false,
        })
    }

    /// Marshalling or unmarshalling one message of one operation.
    fn message(&self) -> Duration {
        self.cfg.costs.per_message + self.cfg.costs.per_command
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrival if self.arrivals_stopped => {}
            Ev::Arrival => self.arrival(),
            Ev::At(n, input, wired) => {
                self.nodes[n].queue.push_back((input, wired));
                self.serve(n);
            }
            Ev::Done(n, t) => self.done(n, t),
            Ev::AtSwitch(s, from, id, command) => {
                self.switches[s].queue.push_back((from, id, command));
                self.serve_switch(s);
            }
            Ev::SwitchDone(s, t) => {
                if let Some((from, id, r)) = self.switches[s].threads[t].take() {
                    let at = self.now + self.cfg.costs.latency;
                    self.events
                        .schedule(at, Ev::At(from, Input::Switch(id, r), true));
                }
                self.serve_switch(s);
            }
            Ev::Hangup(id) => {
                // The user's DeleteConnection crosses the wire to the LNC.
                let at = self.now + self.cfg.costs.latency;
                self.events
                    .schedule(at, Ev::At(LNC, Input::Delete(id), true));
            }
            Ev::Mark => {}
        }
    }

    fn arrival(&mut self) {
        let (a, b) = draw_pair(self.cfg, &mut self.rng);
        let u = self.next_call;
        self.next_call += 1;
        self.calls.insert(u, (a, b, self.now));
        self.stats.attempts += 1;
        self.stats.invocations += 1;
        let at = self.now + self.cfg.costs.latency;
        self.events.schedule(at, Ev::At(LNC, Input::Add(u), true));
        let gap = exp1(&mut self.rng) / self.cfg.arrival_rate;
        let next = self.now + Duration::from_secs_f64(gap);
        self.events.schedule(next, Ev::Arrival);
    }

    fn serve(&mut self, n: usize) {
        loop {
            let Some(t) = self.nodes[n].threads.iter().position(Option::is_none) else {
                return;
            };
            let Some((input, wired)) = self.nodes[n].queue.pop_front() else {
                return;
            };
            let (work, outputs) = self.step(n, input, wired);
            let work = work + self.cfg.costs.stall(&mut self.stall_rng);
            let node = &mut self.nodes[n];
            node.threads[t] = Some(outputs);
            node.busy += work;
            self.events.schedule(self.now + work, Ev::Done(n, t));
        }
    }

    /// Applies one input to performer `n`'s core and drains it: the thread's work and
    /// what leaves after it.
    fn step(&mut self, n: usize, input: Input, wired: bool) -> (Duration, Vec<Out>) {
        let now = self.now;
        let m = self.message();
        let mut work = self.cfg.costs.manager_step;
        if wired {
            work += m;
        }
        let cfg = self.cfg;
        let node = &mut self.nodes[n];
        let op = node.next_op;
        match (&mut node.core, input) {
            (Core::Lnc(core), Input::Add(u)) => {
                node.next_op += 1;
                self.lnc_ops.insert(op, UserOp::Add(u));
                let (a, b, _) = self.calls.get(&u).copied().unwrap_or((0, 0, now));
                // The contract the scenario gives, mapped by the QoS mapper core when
                // it is a user's QoS (validated when the scenario was read).
                let (td, clr) = cfg.contract.traffic().unwrap_or((
                    atmlab_core::traffic::TrafficDescriptor::cbr(CellRate(cfg.pcr)),
                    0.0,
                ));
                let traffic = Traffic {
                    class: td.class,
                    pcr: td.pcr.per_sec(),
                    scr: td.scr.per_sec(),
                    mbs: td.mbs,
                    clr,
                };
                let request = LncRequest::Add {
                    source: cfg.hosts[a].clone(),
                    destinations: vec![cfg.hosts[b].clone()],
                    contract: Contract {
                        traffic,
                        ctd_us: 0,
                        cdv_us: 0,
                        burst_tolerance_us: 0,
                    },
                    tag: String::new(),
                };
                core.handle_request(now, op, request);
            }
            (Core::Lnc(core), Input::Delete(id)) => {
                node.next_op += 1;
                self.lnc_ops.insert(op, UserOp::Delete);
                core.handle_request(now, op, LncRequest::Delete { id });
            }
            (Core::Lnc(core), Input::Answer(id, a)) => core.handle_answer(now, id, a),
            (Core::Lnc(core), Input::Route(id, r)) => core.handle_route(now, id, r),
            (Core::Nml(core, _), Input::Request(id, r)) => {
                node.next_op += 1;
                node.callers.insert(op, id);
                core.handle_request(op, r);
            }
            (Core::Nml(core, _), Input::Answer(id, a)) => core.handle_answer(id, a),
            (Core::Eml(core, _), Input::Request(id, r)) => {
                node.next_op += 1;
                node.callers.insert(op, id);
                core.handle_request(op, r);
            }
            (Core::Eml(core, _), Input::Switch(id, a)) => core.handle_answer(id, a),
            (_, input) => {
                debug_assert!(false, "performer {n} got {input:?}");
            }
        }
        let mut out = Vec::new();
        work += self.drain(n, &mut out);
        (work, out)
    }

    /// Takes what performer `n`'s core emitted into `out`; returns the marshalling.
    fn drain(&mut self, n: usize, out: &mut Vec<Out>) -> Duration {
        let now = self.now;
        let cfg = self.cfg;
        let c = &cfg.costs;
        let m = self.message();
        let latency = c.latency;
        let mut work = Duration::ZERO;
        let root = self.root;
        let (parent, local) = (self.nodes[n].parent, self.nodes[n].local);
        // Whether each child of an NML-CP is in its address space.
        let locals: Vec<bool> = match &self.nodes[n].core {
            Core::Nml(_, children) => children.iter().map(|&k| self.nodes[k].local).collect(),
            _ => Vec::new(),
        };
        let node = &mut self.nodes[n];
        let mut replies: Vec<(OpId, SncResult)> = Vec::new();
        match &mut node.core {
            Core::Lnc(core) => {
                while let Some(t) = core.poll_transmit() {
                    work += m;
                    self.stats.invocations += 1;
                    let input = Input::Request(t.id, t.call);
                    out.push(Out::Send {
                        to: root,
                        input,
                        delay: latency,
                        wired: true,
                    });
                }
                while let Some(r) = core.poll_route() {
                    let before = self.router.misses;
                    let route = self
                        .router
                        .route(now, &r.source, &r.destination, r.bandwidth);
                    let miss = self.router.misses > before;
                    // A miss is the route object's round trip (the LNC marshals the
                    // query and unmarshals the answer); a hit is the LNC's own table.
                    let delay = if miss {
                        work += m;
                        self.stats.invocations += 1;
                        let one_way = latency + m;
                        one_way + one_way + c.route_work
                    } else {
                        Duration::ZERO
                    };
                    out.push(Out::Send {
                        to: LNC,
                        input: Input::Route(r.id, route),
                        delay,
                        wired: miss,
                    });
                }
                while let Some((op, r)) = core.poll_reply() {
                    work += m;
                    if let Some(UserOp::Add(u)) = self.lnc_ops.remove(&op) {
                        out.push(Out::Heard(u, r));
                    }
                }
            }
            Core::Nml(core, children) => {
                while let Some(t) = core.poll_transmit() {
                    let to = children[t.call.child];
                    let here = locals[t.call.child];
                    if !here {
                        work += m;
                        self.stats.invocations += 1;
                    }
                    out.push(Out::Send {
                        to,
                        input: Input::Request(t.id, t.call.request),
                        delay: if here { Duration::ZERO } else { latency },
                        wired: !here,
                    });
                }
                while let Some(r) = SncCore::poll_reply(core) {
                    replies.push(r);
                }
            }
            Core::Eml(core, switch) => {
                while let Some(t) = core.poll_transmit() {
                    work += m;
                    self.stats.invocations += 1;
                    out.push(Out::Command {
                        switch: *switch,
                        from: n,
                        id: t.id,
                        command: t.call,
                    });
                }
                while let Some(r) = SncCore::poll_reply(core) {
                    replies.push(r);
                }
            }
        }
        for (op, r) in replies {
            let Some(id) = node.callers.remove(&op) else {
                continue;
            };
            if !local {
                work += m;
            }
            out.push(Out::Send {
                to: parent,
                input: Input::Answer(id, r),
                delay: if local { Duration::ZERO } else { latency },
                wired: !local,
            });
        }
        work
    }

    fn done(&mut self, n: usize, t: usize) {
        let outputs = self.nodes[n].threads[t].take().unwrap_or_default();
        let latency = self.cfg.costs.latency;
        for o in outputs {
            match o {
                Out::Send {
                    to,
                    input,
                    delay,
                    wired,
                } => {
                    self.events
                        .schedule(self.now + delay, Ev::At(to, input, wired));
                }
                Out::Command {
                    switch,
                    from,
                    id,
                    command,
                } => {
                    self.events
                        .schedule(self.now + latency, Ev::AtSwitch(switch, from, id, command));
                }
                Out::Heard(u, r) => self.heard(u, r),
            }
        }
        self.serve(n);
    }

    /// The LNC's answer to user call `u` reaches the user.
    fn heard(&mut self, u: usize, r: Result<LncReply, SncError>) {
        let Some((_, _, arrived)) = self.calls.remove(&u) else {
            return;
        };
        match r {
            Ok(LncReply::Connection(info)) => {
                let heard = self.now + self.cfg.costs.latency;
                let latency = (heard - arrived).as_secs_f64();
                self.stats.latency_sum += latency;
                self.latency.record(latency);
                self.stats.established += 1;
                // The user's DeleteConnection, made when the call ends.
                self.stats.invocations += 1;
                let hold = draw_hold(self.cfg, &mut self.rng);
                self.events.schedule(heard + hold, Ev::Hangup(info.id));
            }
            Ok(LncReply::Deleted) => self.stats.failed += 1,
            Err(e) if e.kind == ErrorKind::ResourceExhausted => self.stats.blocked += 1,
            Err(_) => self.stats.failed += 1,
        }
    }

    fn serve_switch(&mut self, s: usize) {
        let cfg = self.cfg;
        let c = &cfg.costs;
        let work = self.message() + self.message() + c.switch_per_command;
        let sw = &mut self.switches[s];
        loop {
            let Some(t) = sw.threads.iter().position(Option::is_none) else {
                return;
            };
            let Some((from, id, command)) = sw.queue.pop_front() else {
                return;
            };
            let stall = c.stall(&mut self.stall_rng);
            let r = sw
                .core
                .apply(&command)
                .map_err(|e| SncError::new(SncError::of_fabric(e.kind()), e.to_string()));
            sw.threads[t] = Some((from, id, r));
            sw.busy += work + stall;
            self.events
                .schedule(self.now + work + stall, Ev::SwitchDone(s, t));
        }
    }
}

#[cfg(test)]
impl ControlConfig {
    /// Runs `seconds` of TINA's calls, then stops the arrivals and lets every call end:
    /// the calls the LNC still holds and, over every switch, the connections and the
    /// bandwidth left (cells/s): zeros when nothing leaked; and the blocking probability
    /// of the run. For the leak test.
    pub(super) fn tina_run_and_drain(
        &self,
        seconds: u64,
    ) -> Result<(usize, usize, f64, f64), SimError> {
        let spec = self
            .manager
            .tina
            .ok_or_else(|| model_err("not a TINA scenario"))?;
        let rep = Replication {
            seed: 3,
            replication: 0,
            length: atmlab_sim::scenario::RunLength::Duration(Duration::from_secs(seconds)),
            warmup: atmlab_sim::scenario::Warmup::Time(Duration::ZERO),
            batches: 1,
        };
        let mut plane = TinaPlane::new(self, &spec, &rep)?;
        let end = Instant::ZERO + Duration::from_secs(seconds);
        plane.begin();
        plane.new_period();
        while plane.advance(end).is_some() {}
        let blocking = plane.measure(end - Instant::ZERO)[0].1;
        plane.arrivals_stopped = true;
        let until = end + Duration::from_secs(600);
        while plane.advance(until).is_some() {}
        let held = match &plane.nodes[LNC].core {
            Core::Lnc(core) => core.active(),
            _ => 0,
        };
        let connections = plane
            .switches
            .iter()
            .map(|s| s.core.connections().len())
            .sum();
        let allocated = plane
            .switches
            .iter()
            .flat_map(|s| s.core.ports())
            .map(|p| p.allocated)
            .sum();
        Ok((held, connections, allocated, blocking))
    }
}

impl Driven for TinaPlane<'_> {
    fn schedule_mark(&mut self, at: Instant) {
        self.events.schedule(at, Ev::Mark);
    }
    fn begin(&mut self) {
        self.events.schedule(Instant::ZERO, Ev::Arrival);
    }
    fn advance(&mut self, end: Instant) -> Option<bool> {
        let (t, ev) = self.events.pop_until(end)?;
        self.now = t;
        if let Ev::Mark = ev {
            return Some(true);
        }
        self.handle(ev);
        Some(false)
    }
    fn new_period(&mut self) {
        self.stats = Stats::default();
        self.latency.reset();
        self.marked = (
            self.nodes.iter().map(|n| n.busy).collect(),
            self.switches.iter().map(|s| s.busy).collect(),
        );
    }
    /// As the managers' plane measures, with the busiest performer as the manager and
    /// no identifier cache (its metrics NaN).
    fn measure(&self, span: Duration) -> Vec<(&'static str, f64)> {
        let secs = span.as_secs_f64().max(f64::MIN_POSITIVE);
        let busiest = |now: Vec<Duration>, then: &[Duration], threads: usize| {
            now.iter()
                .enumerate()
                .map(|(i, b)| (*b - then.get(i).copied().unwrap_or(Duration::ZERO)).as_secs_f64())
                .fold(0.0, f64::max)
                / secs
                / threads.max(1) as f64
        };
        let performers = busiest(
            self.nodes.iter().map(|n| n.busy).collect(),
            &self.marked.0,
            self.cfg.manager.threads as usize,
        );
        let switches = busiest(
            self.switches.iter().map(|s| s.busy).collect(),
            &self.marked.1,
            self.cfg.costs.switch_threads as usize,
        );
        let values = self
            .stats
            .metrics(&self.latency, secs)
            .into_iter()
            // TINA's shell rejects a shared pool (`cpus`): no processor utilisation.
            .chain([f64::NAN, performers, switches, 0.0])
            // No connection manager, so no identifier caches and no N_v.
            .chain(super::probes::none());
        METRICS.iter().copied().zip(values).collect()
    }
}
