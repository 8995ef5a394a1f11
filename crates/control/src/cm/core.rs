//! The connection manager's state machine, sans IO (paper 000 §II-C and Fig. 2; Fig. 4 for
//! the xbind design). It takes call requests, switch replies and the time, and produces
//! batches of switch commands and call events; the live shell (`cm::live`) moves them over
//! gRPC, a simulator could move them in virtual time.
//!
//! Two kinds, one machine:
//!
//! - **sequential** (Fig. 2, steps 1-10): for each hop in turn, reserve the output
//!   identifier (phase 1) and wait, then commit (phase 2) and wait; every command is its
//!   own remote invocation. Release walks the hops the same way. The baseline.
//! - **xbind** (§II-C): identifiers come from a [`VciCache`] per (switch, output port)
//!   (a hit needs no remote call; a miss reserves a fill, the two-phase fallback); every
//!   hop's commit is issued at once (parallel across the switches of a path, and across
//!   calls); commits piggyback the replenishment of a low cache; commands to a switch go
//!   through its [`MessageAggregator`] (T and the flush time-out, tunable, optionally
//!   adapted to the arrival rate, §IV-B).
//!
//! Recovery (xbind's oneway calls "do not guarantee delivery"): every command carries a
//! request id; one not answered within `command_timeout` is re-sent with the same id (the
//! switch server answers a repeated id once, so a retry is idempotent), up to
//! `max_retries`; then it counts as failed. A call with a failed hop is rolled back: its
//! committed hops are released and its identifiers return to the cache, so nothing leaks.
//!
//! Identifiers of a call over `n` hops: slot 0 is the source host's VC at the first
//! switch's input port (reserved in that port's identifier space, as the network assigns
//! a calling host's VC), and slot `j >= 1` is hop `j-1`'s output identifier, which is
//! also hop `j`'s input identifier (the same value on both ends of a link).
//!
//! Method kinds and the order a shell calls them: inputs `add`, `delete`,
//! `handle_reply`, `handle_timeout`, `tune`; outputs `poll_transmit` (drain after every
//! input), `poll_event`, `poll_timeout` (when to call `handle_timeout`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_fabric::error::{ErrorKind, FabricError};
use atmlab_fabric::switch::{
    Branch, Command, Commit, ConnectionKind, Release, Reply, Reserve, Unreserve,
};
use rustc_hash::FxHashMap;

use super::adaptive::{ArrivalEstimator, Regions};
use super::aggregator::MessageAggregator;
use super::cache::VciCache;
use super::dimension::NvProbe;

/// Which connection manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmKind {
    /// Fig. 2 with synchronous calls, one hop after another.
    Sequential,
    /// Caching, aggregation and parallelism.
    Xbind,
}

impl CmKind {
    /// Its name in configurations and reports.
    pub fn name(self) -> &'static str {
        match self {
            CmKind::Sequential => "sequential",
            CmKind::Xbind => "xbind",
        }
    }
}

/// Tuning of a connection manager.
#[derive(Debug, Clone, PartialEq)]
pub struct CmConfig {
    /// Which manager.
    pub kind: CmKind,
    /// The owner name of its reservations on the switches.
    pub owner: String,
    /// Identifiers reserved per cache fill (xbind).
    pub cache_fill: u32,
    /// Replenish a cache when it holds fewer than this (xbind).
    pub cache_low: u32,
    /// Give identifiers back to the switch beyond this many cached (xbind).
    pub cache_max: u32,
    /// The aggregation threshold T (xbind; sequential always sends at once).
    pub threshold: u32,
    /// The aggregators' flush time-out.
    pub flush_timeout: Duration,
    /// Let T follow the arrival rate (xbind).
    pub adaptive: Option<Regions>,
    /// Re-send a command not answered within this.
    pub command_timeout: Duration,
    /// Re-sends before a command counts as failed.
    pub max_retries: u32,
    /// Calls being set up at once, at most; beyond, new calls are refused at once
    /// (blocked, "overloaded") instead of queueing until every latency passes the
    /// command time-out: overload control, as a switch's call processor sheds load.
    /// The default, 2,000, is about 20 ms of work at the manager's best rate: with
    /// 10,000, an overloaded manager kept a queue so long that its throughput fell to
    /// under half of its capacity (docs/performance.md, call setup).
    pub max_setups: usize,
}

impl CmConfig {
    /// The defaults of a kind.
    pub fn new(kind: CmKind) -> Self {
        CmConfig {
            kind,
            owner: format!("cm-{}", kind.name()),
            cache_fill: 64,
            cache_low: 16,
            cache_max: 256,
            threshold: 1,
            flush_timeout: Duration::from_micros(200),
            adaptive: None,
            command_timeout: Duration::from_secs(2),
            max_retries: 3,
            max_setups: 2_000,
        }
    }
}

/// One hop of a call's route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopSpec {
    /// The switch's name.
    pub switch: String,
    /// Where the cells enter.
    pub in_port: u16,
    /// Where they leave.
    pub out_port: u16,
}

/// A call to set up.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupRequest {
    /// The route, source switch first.
    pub hops: Vec<HopSpec>,
    /// The cell-level contract.
    pub traffic: TrafficDescriptor,
    /// Target cell loss ratio (admission control).
    pub clr: f64,
    /// Buffer per hop, cells.
    pub buffer_cells: u32,
    /// The caller's label.
    pub tag: String,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// The class (RESOURCE_EXHAUSTED = blocked).
    pub kind: ErrorKind,
    /// What happened, naming the switch.
    pub message: String,
}

impl CallError {
    /// Whether the network refused the call for lack of resources (a blocked call, as
    /// opposed to a failure).
    pub fn blocked(&self) -> bool {
        self.kind == ErrorKind::ResourceExhausted
    }
}

/// What happened to a call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    /// Every hop committed.
    Established {
        /// The call.
        call: u64,
        /// From `add` to the last commit's answer.
        latency: Duration,
    },
    /// The call could not be set up; everything it held is returned.
    Failed {
        /// The call.
        call: u64,
        /// Why.
        error: CallError,
    },
    /// The call was released.
    Released {
        /// The call.
        call: u64,
    },
}

/// A batch of commands for one switch: one remote invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Transmit {
    /// The switch's name.
    pub switch: String,
    /// Request ids and commands.
    pub commands: Vec<(u64, Command)>,
}

/// An established call's path, for GetConnection.
#[derive(Debug, Clone, PartialEq)]
pub struct CallView {
    /// The call.
    pub id: u64,
    /// Hops with their switch connection ids and identifiers.
    pub hops: Vec<(HopSpec, u64, VcId, VcId)>,
    /// The source's VC.
    pub source_vc: VcId,
    /// The destination's VC.
    pub destination_vc: VcId,
    /// Setup latency.
    pub setup: Duration,
    /// The contract.
    pub traffic: TrafficDescriptor,
    /// Label.
    pub tag: String,
}

/// Counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmStats {
    /// Calls established.
    pub established: u64,
    /// Calls released.
    pub released: u64,
    /// Calls refused for lack of resources.
    pub blocked: u64,
    /// Calls failed otherwise.
    pub failed: u64,
    /// Remote invocations (batches) sent.
    pub messages: u64,
    /// Commands sent (in those batches, counting re-sends).
    pub commands: u64,
    /// Commands re-sent after a time-out.
    pub retries: u64,
    /// Calls rolled back.
    pub rollbacks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for identifiers (xbind misses) or, sequential, for hop `h`'s step.
    Setup,
    /// Commits in flight (xbind).
    Committing,
    Established,
    RollingBack,
    Releasing,
}

#[derive(Debug)]
struct Call {
    hops: Vec<(usize, HopSpec)>,
    traffic: TrafficDescriptor,
    clr: f64,
    buffer: u32,
    tag: String,
    ids: Vec<Option<VcId>>,
    conns: Vec<Option<u64>>,
    waiting: u32,
    phase: Phase,
    /// Sequential: the step reached (2 per hop after slot 0's reserve).
    step: usize,
    started: Instant,
    setup: Duration,
    error: Option<CallError>,
    /// A delete arrived while the setup was in flight.
    delete_pending: bool,
    /// Identifier slots (bit j) taken from a cache whose commit is not yet answered:
    /// the call's share of `N_v` (§IV-A).
    in_use: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Reserve for a call's identifier slot (a miss, or a sequential phase 1).
    Slot(usize),
    /// A cache fill with no call waiting.
    Fill,
    Commit(usize),
    Release(usize),
    /// Returning identifiers (a call's slot 0 in sequential, or a trimmed cache).
    Unreserve,
}

#[derive(Debug)]
struct Outstanding {
    call: Option<u64>,
    purpose: Purpose,
    switch: usize,
    port: u16,
    command: Command,
    deadline: Option<Instant>,
    retries: u32,
}

/// The connection manager core.
#[derive(Debug)]
pub struct CmCore {
    config: CmConfig,
    switch_index: FxHashMap<String, usize>,
    switches: Vec<String>,
    aggregators: Vec<MessageAggregator>,
    caches: FxHashMap<(usize, u16), VciCache>,
    calls: FxHashMap<u64, Call>,
    outstanding: FxHashMap<u64, Outstanding>,
    events: VecDeque<CallEvent>,
    ready: VecDeque<usize>,
    next_request: u64,
    next_call: u64,
    stats: CmStats,
    estimator: Option<ArrivalEstimator>,
    region: usize,
    /// Command deadlines, earliest first; stale entries (answered, or re-armed) are
    /// skipped lazily, so a deadline costs O(log n) instead of a scan of every command
    /// in flight.
    timeouts: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Commits that counted as failed after their retries: if one is answered after all,
    /// its connection is released at once, so a late answer leaks nothing.
    orphans: FxHashMap<u64, (usize, u16)>,
    /// Sequential: the call being worked on, and the operations waiting behind it.
    seq_busy: Option<u64>,
    seq_queue: VecDeque<(u64, bool)>,
    /// Calls between `add` and their establishment or failure.
    setting_up: usize,
    /// Give-backs (releases, unreserves) no switch answered: re-sent every
    /// `LINGER_PERIOD` until one does, so a switch that comes back is cleaned up.
    lingering: Vec<(usize, u16, Command)>,
    linger_at: Option<Instant>,
}

/// How often unanswered give-backs are re-sent.
const LINGER_PERIOD: Duration = Duration::from_millis(500);

impl CmCore {
    /// A manager with no switches known yet.
    pub fn new(config: CmConfig) -> Result<Self, &'static str> {
        if let Some(r) = &config.adaptive {
            r.validate()?;
        }
        if config.cache_fill == 0 {
            return Err("cache_fill must be at least 1");
        }
        let mut config = config;
        if config.kind == CmKind::Sequential {
            config.threshold = 1;
            config.adaptive = None;
        }
        let estimator = config
            .adaptive
            .as_ref()
            .map(|r| ArrivalEstimator::new(r.window));
        let region = 0;
        let mut core = CmCore {
            config,
            switch_index: FxHashMap::default(),
            switches: Vec::new(),
            aggregators: Vec::new(),
            caches: FxHashMap::default(),
            calls: FxHashMap::default(),
            outstanding: FxHashMap::default(),
            events: VecDeque::new(),
            ready: VecDeque::new(),
            next_request: 1,
            next_call: 1,
            stats: CmStats::default(),
            estimator,
            region,
            timeouts: BinaryHeap::new(),
            orphans: FxHashMap::default(),
            seq_busy: None,
            seq_queue: VecDeque::new(),
            setting_up: 0,
            lingering: Vec::new(),
            linger_at: None,
        };
        if let Some(r) = core.config.adaptive.clone() {
            core.set_threshold(r.thresholds[0]);
        }
        Ok(core)
    }

    /// Its configuration (T as currently tuned).
    pub fn config(&self) -> &CmConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> CmStats {
        self.stats
    }

    /// Cache hits and misses over every port.
    pub fn cache_counts(&self) -> (u64, u64) {
        self.caches
            .values()
            .fold((0, 0), |(h, m), c| (h + c.hits, m + c.misses))
    }

    /// Identifiers cached per (switch, port).
    pub fn cache_sizes(&self) -> Vec<(String, u16, usize)> {
        let mut v: Vec<(String, u16, usize)> = self
            .caches
            .iter()
            .map(|(&(s, p), c)| (self.switches[s].clone(), p, c.len()))
            .collect();
        v.sort();
        v
    }

    /// `N_v` as measured on each (switch, output port) whose cache served a call
    /// (§IV-A), sorted by switch and port.
    pub fn nv_probes(&self) -> Vec<(String, u16, NvProbe)> {
        let mut v: Vec<(String, u16, NvProbe)> = self
            .caches
            .iter()
            .filter(|(_, c)| c.nv.arrivals() > 0)
            .map(|(&(s, p), c)| (self.switches[s].clone(), p, c.nv.clone()))
            .collect();
        v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        v
    }

    /// The arrival-rate estimate (calls/s) and its region, when T adapts.
    pub fn load(&self) -> (f64, usize) {
        (
            self.estimator.as_ref().map_or(0.0, |e| e.rate()),
            self.region,
        )
    }

    /// Calls in progress or established.
    pub fn active(&self) -> usize {
        self.calls.len()
    }

    fn switch(&mut self, name: &str) -> usize {
        if let Some(&i) = self.switch_index.get(name) {
            return i;
        }
        let i = self.switches.len();
        self.switches.push(name.to_string());
        self.switch_index.insert(name.to_string(), i);
        self.aggregators.push(MessageAggregator::new(
            self.config.threshold,
            self.config.flush_timeout,
        ));
        i
    }

    fn set_threshold(&mut self, t: u32) {
        self.config.threshold = t.max(1);
        for a in &mut self.aggregators {
            a.tune(self.config.threshold, self.config.flush_timeout);
        }
    }

    /// Sets T and the flush time-out at run time; `adaptive` re-enables the regions
    /// (with `regions`, or the ones configured before).
    pub fn tune(&mut self, threshold: u32, flush_timeout: Duration, adaptive: Option<Regions>) {
        if self.config.kind == CmKind::Sequential {
            return;
        }
        self.config.flush_timeout = flush_timeout;
        match adaptive {
            Some(r) if r.validate().is_ok() => {
                self.estimator = Some(ArrivalEstimator::new(r.window));
                let t = r.thresholds[self.region.min(r.thresholds.len() - 1)];
                self.config.adaptive = Some(r);
                self.set_threshold(t);
            }
            _ => {
                self.config.adaptive = None;
                self.estimator = None;
                self.set_threshold(threshold);
            }
        }
    }

    /// The identifier slot's (switch, port).
    fn slot_port(call: &Call, j: usize) -> (usize, u16) {
        if j == 0 {
            (call.hops[0].0, call.hops[0].1.in_port)
        } else {
            (call.hops[j - 1].0, call.hops[j - 1].1.out_port)
        }
    }

    fn send(
        &mut self,
        now: Instant,
        call: Option<u64>,
        purpose: Purpose,
        switch: usize,
        port: u16,
        command: Command,
    ) {
        let req = self.next_request;
        self.next_request += 1;
        self.aggregators[switch].push(now, req, command.clone());
        if self.aggregators[switch].len() >= self.aggregators[switch].threshold() as usize {
            self.ready.push_back(switch);
        }
        self.outstanding.insert(
            req,
            Outstanding {
                call,
                purpose,
                switch,
                port,
                command,
                deadline: None,
                retries: 0,
            },
        );
    }

    fn reserve_cmd(&self, port: u16, count: u32, vpi: u16) -> Command {
        Command::Reserve(Reserve {
            port: PortId(port),
            count,
            vpi,
            vp: false,
            within: None,
            owner: self.config.owner.clone(),
        })
    }

    /// A new call. Returns its id; its outcome comes as a [`CallEvent`].
    pub fn add(&mut self, now: Instant, req: SetupRequest) -> u64 {
        let id = self.next_call;
        self.next_call += 1;
        self.note_arrival(now);
        if self.setting_up >= self.config.max_setups {
            self.stats.blocked += 1;
            self.events.push_back(CallEvent::Failed {
                call: id,
                error: CallError {
                    kind: ErrorKind::ResourceExhausted,
                    message: format!(
                        "the connection manager is overloaded ({} calls being set up)",
                        self.setting_up
                    ),
                },
            });
            return id;
        }
        self.setting_up += 1;
        if req.hops.is_empty() {
            self.events.push_back(CallEvent::Failed {
                call: id,
                error: CallError {
                    kind: ErrorKind::InvalidArgument,
                    message: "a route needs at least one hop".into(),
                },
            });
            self.stats.failed += 1;
            self.setting_up -= 1;
            return id;
        }
        let hops: Vec<(usize, HopSpec)> = req
            .hops
            .into_iter()
            .map(|h| (self.switch(&h.switch), h))
            .collect();
        let n = hops.len();
        let call = Call {
            hops,
            traffic: req.traffic,
            clr: req.clr,
            buffer: req.buffer_cells,
            tag: req.tag,
            ids: vec![None; n + 1],
            conns: vec![None; n],
            waiting: 0,
            phase: Phase::Setup,
            step: 0,
            started: now,
            setup: Duration::ZERO,
            error: None,
            delete_pending: false,
            in_use: 0,
        };
        self.calls.insert(id, call);
        match self.config.kind {
            CmKind::Xbind => self.xbind_start(now, id),
            CmKind::Sequential => self.seq_submit(now, id, false),
        }
        id
    }

    /// Sequential: one call operation at a time, as a single-threaded manager making
    /// synchronous calls does; the others wait in arrival order.
    fn seq_submit(&mut self, now: Instant, id: u64, release: bool) {
        if self.seq_busy.is_some() {
            self.seq_queue.push_back((id, release));
            return;
        }
        self.seq_busy = Some(id);
        if release {
            self.start_release(now, id);
        } else {
            self.seq_step(now, id);
        }
    }

    /// Sequential: the operation on `id` ended; start the next one.
    fn seq_done(&mut self, now: Instant, id: u64) {
        if self.config.kind != CmKind::Sequential || self.seq_busy != Some(id) {
            return;
        }
        self.seq_busy = None;
        while let Some((next, release)) = self.seq_queue.pop_front() {
            if !self.calls.contains_key(&next) {
                continue;
            }
            self.seq_submit(now, next, release);
            if self.seq_busy.is_some() {
                break;
            }
        }
    }

    fn note_arrival(&mut self, now: Instant) {
        let Some(est) = self.estimator.as_mut() else {
            return;
        };
        if est.arrival(now) {
            self.adapt();
        }
    }

    fn adapt(&mut self) {
        let (Some(est), Some(regions)) = (self.estimator.as_ref(), self.config.adaptive.as_ref())
        else {
            return;
        };
        let region = regions.region_of(est.rate());
        if region != self.region {
            let t = regions.thresholds[region];
            self.region = region;
            self.set_threshold(t);
        }
    }

    // ----- xbind -----------------------------------------------------------------------

    fn xbind_start(&mut self, now: Instant, id: u64) {
        let n = self.calls[&id].hops.len();
        for j in 0..=n {
            let (sw, port) = Self::slot_port(&self.calls[&id], j);
            let cache = self.caches.entry((sw, port)).or_default();
            let got = cache.take();
            match got {
                Some(vc) => {
                    let call = self.calls.get_mut(&id).expect("call");
                    call.ids[j] = Some(vc);
                    // Slot 0 (the first switch's input) is never committed on its own
                    // port, so N_v is kept for the output ports, as in the paper.
                    if (1..64).contains(&j) {
                        cache.nv.take(now);
                        call.in_use |= 1 << j;
                    }
                }
                None => {
                    // A miss: fall back to two-phase, reserving a whole fill so the
                    // next calls hit.
                    let cmd = self.reserve_cmd(port, self.config.cache_fill, 0);
                    self.caches.get_mut(&(sw, port)).expect("entry").filling = true;
                    self.send(now, Some(id), Purpose::Slot(j), sw, port, cmd);
                    self.calls.get_mut(&id).expect("call").waiting += 1;
                }
            }
        }
        if self.calls[&id].waiting == 0 {
            self.xbind_commit(now, id);
        }
    }

    fn commit_cmd(&self, call: &Call, hop: usize, replenish: u32) -> Command {
        let h = &call.hops[hop].1;
        Command::Commit(Commit {
            kind: ConnectionKind::Vc,
            in_port: PortId(h.in_port),
            in_id: call.ids[hop].expect("identifiers known"),
            branches: vec![Branch {
                port: PortId(h.out_port),
                id: call.ids[hop + 1].expect("identifiers known"),
            }],
            traffic: call.traffic,
            clr: call.clr,
            buffer_cells: call.buffer,
            owner: self.config.owner.clone(),
            replenish,
            tag: call.tag.clone(),
        })
    }

    fn xbind_commit(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        call.phase = Phase::Committing;
        let n = call.hops.len();
        for hop in 0..n {
            let (sw, port) = Self::slot_port(&self.calls[&id], hop + 1);
            // Piggyback the replenishment of a low cache on this commit.
            let cache = self.caches.entry((sw, port)).or_default();
            let replenish = if !cache.filling && (cache.len() as u32) < self.config.cache_low {
                cache.filling = true;
                self.config.cache_fill
            } else {
                0
            };
            let cmd = self.commit_cmd(&self.calls[&id], hop, replenish);
            self.send(now, Some(id), Purpose::Commit(hop), sw, port, cmd);
            self.calls.get_mut(&id).expect("call").waiting += 1;
        }
    }

    /// Returns a call's identifiers that are merely reserved (not carried by a committed
    /// hop) to the cache, or, sequential, to the switch.
    fn return_free_ids(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        let n = call.hops.len();
        let mut give_back: Vec<(usize, usize)> = Vec::new();
        for j in 0..=n {
            // Slot j >= 1 is carried by hop j-1 once committed; slot 0 never is.
            let carried = j >= 1 && call.conns[j - 1].is_some();
            if !carried && call.ids[j].is_some() {
                give_back.push((j, 0));
            }
        }
        for (j, _) in give_back {
            let (sw, port) = Self::slot_port(&self.calls[&id], j);
            let vc = self.calls.get_mut(&id).expect("call").ids[j]
                .take()
                .expect("some");
            self.return_id(now, sw, port, vc);
        }
    }

    fn return_id(&mut self, now: Instant, sw: usize, port: u16, vc: VcId) {
        match self.config.kind {
            CmKind::Xbind => {
                let max = self.config.cache_max as usize;
                let cache = self.caches.entry((sw, port)).or_default();
                cache.put([vc]);
                let extra = cache.trim(max);
                if !extra.is_empty() {
                    let cmd = Command::Unreserve(Unreserve {
                        port: PortId(port),
                        ids: extra,
                        owner: self.config.owner.clone(),
                    });
                    self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                }
            }
            CmKind::Sequential => {
                let cmd = Command::Unreserve(Unreserve {
                    port: PortId(port),
                    ids: vec![vc],
                    owner: self.config.owner.clone(),
                });
                self.send(now, None, Purpose::Unreserve, sw, port, cmd);
            }
        }
    }

    /// Releases a call's committed hops (rollback or delete).
    fn release_hops(&mut self, now: Instant, id: u64) {
        let keep = self.config.kind == CmKind::Xbind;
        let n = self.calls[&id].hops.len();
        for hop in 0..n {
            let Some(conn) = self.calls[&id].conns[hop] else {
                continue;
            };
            let (sw, port) = Self::slot_port(&self.calls[&id], hop + 1);
            let cmd = Command::Release(Release {
                connection: conn,
                keep_reserved: keep,
            });
            self.send(now, Some(id), Purpose::Release(hop), sw, port, cmd);
            self.calls.get_mut(&id).expect("call").waiting += 1;
            if self.config.kind == CmKind::Sequential {
                // One hop at a time: the next release goes when this one is answered.
                return;
            }
        }
    }

    fn rollback(&mut self, now: Instant, id: u64) {
        self.stats.rollbacks += 1;
        self.calls.get_mut(&id).expect("call").phase = Phase::RollingBack;
        self.return_free_ids(now, id);
        self.release_hops(now, id);
        self.finish_if_idle(now, id);
    }

    fn finish_if_idle(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        if call.waiting > 0 {
            return;
        }
        let phase = call.phase;
        match phase {
            Phase::RollingBack => {
                let mut call = self.calls.remove(&id).expect("call");
                // Identifiers taken from a cache and never committed end their use here.
                for j in 1..=call.hops.len().min(63) {
                    if call.in_use & (1 << j) != 0 {
                        let key = Self::slot_port(&call, j);
                        nv_done(&mut self.caches, &mut call, j, key, now);
                    }
                }
                // A rollback always ends a setup (an established call is released, not
                // rolled back).
                self.setting_up = self.setting_up.saturating_sub(1);
                let error = call.error.unwrap_or(CallError {
                    kind: ErrorKind::Aborted,
                    message: "rolled back".into(),
                });
                if error.blocked() {
                    self.stats.blocked += 1;
                } else {
                    self.stats.failed += 1;
                }
                self.events.push_back(CallEvent::Failed { call: id, error });
            }
            Phase::Releasing => {
                self.calls.remove(&id);
                self.stats.released += 1;
                self.events.push_back(CallEvent::Released { call: id });
            }
            _ => {}
        }
        if matches!(phase, Phase::RollingBack | Phase::Releasing) {
            self.seq_done(now, id);
        }
    }

    // ----- sequential ------------------------------------------------------------------

    /// Sequential steps: step 0 reserves slot 0; then per hop h, step 2h+1 reserves slot
    /// h+1 and step 2h+2 commits hop h.
    fn seq_step(&mut self, now: Instant, id: u64) {
        let call = &self.calls[&id];
        let n = call.hops.len();
        let step = call.step;
        if step == 2 * n + 1 {
            self.establish(now, id);
            return;
        }
        if step.is_multiple_of(2) && step > 0 {
            let hop = (step - 2) / 2;
            let (sw, port) = Self::slot_port(call, hop + 1);
            let cmd = self.commit_cmd(call, hop, 0);
            self.send(now, Some(id), Purpose::Commit(hop), sw, port, cmd);
        } else {
            let j = step.div_ceil(2);
            let (sw, port) = Self::slot_port(call, j);
            let cmd = self.reserve_cmd(port, 1, 0);
            self.send(now, Some(id), Purpose::Slot(j), sw, port, cmd);
        }
        self.calls.get_mut(&id).expect("call").waiting += 1;
    }

    fn establish(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        call.phase = Phase::Established;
        call.setup = now.saturating_duration_since(call.started);
        let latency = call.setup;
        let delete = call.delete_pending;
        self.stats.established += 1;
        self.setting_up = self.setting_up.saturating_sub(1);
        self.events
            .push_back(CallEvent::Established { call: id, latency });
        if self.config.kind == CmKind::Sequential {
            self.seq_done(now, id);
            if delete {
                self.seq_submit(now, id, true);
            }
        } else if delete {
            self.start_release(now, id);
        }
    }

    // ----- replies ----------------------------------------------------------------------

    /// A switch's answer to request `request`. Answers to unknown ids (a duplicate after
    /// a retry) are ignored.
    pub fn handle_reply(&mut self, now: Instant, request: u64, result: Result<Reply, FabricError>) {
        let Some(out) = self.outstanding.remove(&request) else {
            // A commit given up for lost, answered after all: undo it, keeping the
            // identifier reserved (the rolled-back call returned it to the cache).
            if let Some((sw, port)) = self.orphans.remove(&request) {
                self.undo_late(now, sw, port, result);
            }
            return;
        };
        let (sw, port) = (out.switch, out.port);
        let Some(id) = out.call else {
            // A fill or a give-back with no call waiting.
            match (out.purpose, result) {
                (Purpose::Fill, Ok(Reply::Reserved(ids))) => {
                    let c = self.caches.entry((sw, port)).or_default();
                    c.put(ids);
                    c.filling = false;
                }
                (Purpose::Fill, _) => self.caches.entry((sw, port)).or_default().filling = false,
                (_, Err(e)) if e.kind() == ErrorKind::Unavailable => {
                    // Not answered: the switch may be down. Try again later rather than
                    // leave the identifiers or the cross-connect behind.
                    tracing::warn!(switch = %self.switches[sw], port, error = %e, "a give-back went unanswered; it will be re-sent");
                    self.lingering.push((sw, port, out.command));
                    self.linger_at
                        .get_or_insert(now.saturating_add(LINGER_PERIOD));
                }
                (_, Err(e)) => {
                    tracing::warn!(switch = %self.switches[sw], port, error = %e, command = ?out.command, "a give-back failed");
                }
                _ => {}
            }
            return;
        };
        let Some(call) = self.calls.get_mut(&id) else {
            // The call is gone (failed and rolled back): whatever this answer created
            // belongs to nobody now, so undo it.
            self.undo_late(now, sw, port, result);
            return;
        };
        call.waiting = call.waiting.saturating_sub(1);
        if let Purpose::Commit(hop) = out.purpose {
            // The commit carrying slot hop+1 is answered, either way: its identifier is
            // no longer "in use" in the paper's sense (§IV-A).
            nv_done(&mut self.caches, call, hop + 1, (sw, port), now);
        }
        match (out.purpose, result) {
            (Purpose::Slot(j), Ok(Reply::Reserved(mut ids))) => {
                if ids.is_empty() {
                    self.fail(now, id, FabricError::Invalid("an empty reservation"));
                    return;
                }
                let first = ids.remove(0);
                call.ids[j] = Some(first);
                if self.config.kind == CmKind::Xbind {
                    let c = self.caches.entry((sw, port)).or_default();
                    c.put(ids);
                    c.filling = false;
                }
                self.advance(now, id);
            }
            (
                Purpose::Commit(hop),
                Ok(Reply::Committed {
                    connection,
                    replenished,
                }),
            ) => {
                call.conns[hop] = Some(connection);
                if self.config.kind == CmKind::Xbind && !replenished.is_empty() {
                    let c = self.caches.entry((sw, port)).or_default();
                    c.put(replenished);
                    c.filling = false;
                } else if self.config.kind == CmKind::Xbind {
                    // A commit that asked for a replenishment and got none (the port
                    // ran out) ends the fill too.
                    if let Command::Commit(c) = &out.command
                        && c.replenish > 0
                    {
                        self.caches.entry((sw, port)).or_default().filling = false;
                    }
                }
                self.advance(now, id);
            }
            (Purpose::Release(hop), Ok(_)) => {
                call.conns[hop] = None;
                if self.config.kind == CmKind::Xbind {
                    // keep_reserved: the output identifier is ours again.
                    if let Some(vc) = call.ids[hop + 1].take() {
                        self.return_id(now, sw, port, vc);
                    }
                } else if let Some(vc) = call.ids[hop + 1].take() {
                    // Released to the pool by the switch; nothing to give back.
                    let _ = vc;
                }
                match self.config.kind {
                    CmKind::Sequential => {
                        self.release_hops(now, id);
                        if self.calls[&id].waiting == 0 {
                            self.return_free_ids(now, id);
                        }
                    }
                    CmKind::Xbind => {
                        if self.calls[&id].waiting == 0 {
                            self.return_free_ids(now, id);
                        }
                    }
                }
                self.finish_if_idle(now, id);
            }
            (Purpose::Release(hop), Err(e)) => {
                if e.kind() == ErrorKind::Unavailable
                    && let Some(conn) = call.conns[hop]
                {
                    // Unanswered: the switch may be down and come back with the hop
                    // (from its journal). The call ends for its caller; the release
                    // lingers until a switch answers it.
                    self.lingering.push((
                        sw,
                        port,
                        Command::Release(Release {
                            connection: conn,
                            keep_reserved: false,
                        }),
                    ));
                    self.linger_at
                        .get_or_insert(now.saturating_add(LINGER_PERIOD));
                }
                // Otherwise the switch no longer has it (restarted without a journal, or
                // an audit removed it): nothing to return for this hop.
                tracing::warn!(call = id, hop, error = %e, "release failed; the hop is gone");
                call.conns[hop] = None;
                call.ids[hop + 1] = None;
                if self.config.kind == CmKind::Sequential {
                    self.release_hops(now, id);
                }
                if self.calls[&id].waiting == 0 {
                    self.return_free_ids(now, id);
                }
                self.finish_if_idle(now, id);
            }
            (_, Err(e)) => self.fail(now, id, e),
            (_, Ok(_)) => self.fail(now, id, FabricError::Invalid("an unexpected reply")),
        }
    }

    fn fail(&mut self, now: Instant, id: u64, e: FabricError) {
        let call = self.calls.get_mut(&id).expect("call");
        if call.error.is_none() {
            call.error = Some(CallError {
                kind: e.kind(),
                message: e.to_string(),
            });
        }
        if call.phase == Phase::RollingBack {
            // Another failure of a call already rolling back: when it was the last
            // answer awaited, the rollback proper (identifiers back, committed hops
            // released) happens now.
            if call.waiting == 0 {
                self.rollback_after_answers(now, id);
            }
            return;
        }
        match self.config.kind {
            // xbind: wait for the other hops' answers, then roll back everything.
            CmKind::Xbind if call.waiting > 0 => call.phase = Phase::RollingBack,
            _ => self.rollback(now, id),
        }
    }

    /// Moves a call on after an answer.
    fn advance(&mut self, now: Instant, id: u64) {
        let call = &self.calls[&id];
        match (self.config.kind, call.phase) {
            (_, Phase::RollingBack) if call.waiting == 0 => self.rollback_after_answers(now, id),
            (_, Phase::RollingBack) => {}
            (CmKind::Xbind, Phase::Setup) if call.waiting == 0 => self.xbind_commit(now, id),
            (CmKind::Xbind, Phase::Committing) if call.waiting == 0 => self.establish(now, id),
            (CmKind::Sequential, Phase::Setup) => {
                self.calls.get_mut(&id).expect("call").step += 1;
                self.seq_step(now, id);
            }
            _ => {}
        }
    }

    fn rollback_after_answers(&mut self, now: Instant, id: u64) {
        self.stats.rollbacks += 1;
        self.return_free_ids(now, id);
        self.release_hops(now, id);
        self.finish_if_idle(now, id);
    }

    // ----- delete -------------------------------------------------------------------------

    /// Undoes what an answer nobody waits for created, so that nothing leaks: reserved
    /// identifiers go to the cache (xbind) or back to the switch (sequential); a
    /// connection is released, its identifier kept reserved where the cache has it.
    fn undo_late(
        &mut self,
        now: Instant,
        sw: usize,
        port: u16,
        result: Result<Reply, FabricError>,
    ) {
        match result {
            Ok(Reply::Reserved(ids)) if !ids.is_empty() => match self.config.kind {
                CmKind::Xbind => {
                    for id in ids {
                        self.return_id(now, sw, port, id);
                    }
                }
                CmKind::Sequential => {
                    let cmd = Command::Unreserve(Unreserve {
                        port: PortId(port),
                        ids,
                        owner: self.config.owner.clone(),
                    });
                    self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                }
            },
            Ok(Reply::Committed {
                connection,
                replenished,
            }) => {
                for id in replenished {
                    self.return_id(now, sw, port, id);
                }
                let cmd = Command::Release(Release {
                    connection,
                    keep_reserved: self.config.kind == CmKind::Xbind,
                });
                self.send(now, None, Purpose::Unreserve, sw, port, cmd);
            }
            _ => {}
        }
    }

    /// Releases a call. Returns false if the call is unknown.
    pub fn delete(&mut self, now: Instant, id: u64) -> bool {
        let Some(call) = self.calls.get_mut(&id) else {
            return false;
        };
        match call.phase {
            Phase::Established if self.config.kind == CmKind::Sequential => {
                self.seq_submit(now, id, true)
            }
            Phase::Established => self.start_release(now, id),
            Phase::Setup | Phase::Committing => call.delete_pending = true,
            Phase::RollingBack | Phase::Releasing => {}
        }
        true
    }

    fn start_release(&mut self, now: Instant, id: u64) {
        self.calls.get_mut(&id).expect("call").phase = Phase::Releasing;
        if self.config.kind == CmKind::Xbind {
            // Slot 0 is not carried by any hop: back to the cache at once.
            let (sw, port) = Self::slot_port(&self.calls[&id], 0);
            if let Some(vc) = self.calls.get_mut(&id).expect("call").ids[0].take() {
                self.return_id(now, sw, port, vc);
            }
        }
        self.release_hops(now, id);
        self.finish_if_idle(now, id);
    }

    /// The path of an established call.
    pub fn view(&self, id: u64) -> Option<CallView> {
        let c = self.calls.get(&id)?;
        if c.phase != Phase::Established {
            return None;
        }
        Some(CallView {
            id,
            hops: c
                .hops
                .iter()
                .enumerate()
                .map(|(i, (_, h))| {
                    (
                        h.clone(),
                        c.conns[i].unwrap_or(0),
                        c.ids[i].unwrap_or_default(),
                        c.ids[i + 1].unwrap_or_default(),
                    )
                })
                .collect(),
            source_vc: c.ids[0].unwrap_or_default(),
            destination_vc: c.ids[c.hops.len()].unwrap_or_default(),
            setup: c.setup,
            traffic: c.traffic,
            tag: c.tag.clone(),
        })
    }

    /// Reconciles this manager with what `switch` holds after it came back (a switch
    /// server that restarted from its journal may hold commits whose answers were lost
    /// with it, and a re-sent commit then finds its input identifier taken). For each
    /// connection of this manager's owner that no call holds: if a commit sent to that
    /// switch is still unanswered and has the same input, the connection is that
    /// commit's result and completes it; otherwise it is released. Returns (commits
    /// completed, connections released).
    pub fn reconcile(
        &mut self,
        now: Instant,
        switch: &str,
        connections: &[atmlab_fabric::switch::Connection],
    ) -> (usize, usize) {
        let Some(&sw) = self.switch_index.get(switch) else {
            return (0, 0);
        };
        let mut known: rustc_hash::FxHashSet<u64> = Default::default();
        for c in self.calls.values() {
            for (i, (s, _)) in c.hops.iter().enumerate() {
                if *s == sw
                    && let Some(conn) = c.conns[i]
                {
                    known.insert(conn);
                }
            }
        }
        let (mut completed, mut released) = (0, 0);
        for x in connections {
            if x.owner != self.config.owner || known.contains(&x.id) {
                continue;
            }
            let pending = self
                .outstanding
                .iter()
                .find_map(|(&req, o)| match &o.command {
                    Command::Commit(c)
                        if o.switch == sw && c.in_port == x.in_port && c.in_id == x.in_id =>
                    {
                        Some(req)
                    }
                    _ => None,
                });
            match pending {
                Some(req) => {
                    completed += 1;
                    self.handle_reply(
                        now,
                        req,
                        Ok(Reply::Committed {
                            connection: x.id,
                            replenished: Vec::new(),
                        }),
                    );
                }
                None => {
                    released += 1;
                    let port = x.branches.first().map_or(x.in_port.0, |b| b.port.0);
                    let cmd = Command::Release(Release {
                        connection: x.id,
                        keep_reserved: false,
                    });
                    self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                }
            }
        }
        (completed, released)
    }

    /// Takes back an established call from a journal (a restarted manager): the call is
    /// held as if this manager had set it up, under the same id, and can be listed and
    /// deleted. Later calls get larger ids. Refused if the id is taken or the view has
    /// no hops.
    pub fn adopt(&mut self, now: Instant, view: &CallView) -> Result<(), &'static str> {
        if view.hops.is_empty() {
            return Err("a call needs at least one hop");
        }
        if self.calls.contains_key(&view.id) {
            return Err("the call id is already in use");
        }
        let hops: Vec<(usize, HopSpec)> = view
            .hops
            .iter()
            .map(|(h, ..)| (self.switch(&h.switch), h.clone()))
            .collect();
        let mut ids = Vec::with_capacity(hops.len() + 1);
        ids.push(Some(view.hops[0].2));
        ids.extend(view.hops.iter().map(|h| Some(h.3)));
        let call = Call {
            hops,
            traffic: view.traffic,
            clr: 0.0,
            buffer: 0,
            tag: view.tag.clone(),
            ids,
            conns: view.hops.iter().map(|h| Some(h.1)).collect(),
            waiting: 0,
            phase: Phase::Established,
            step: 0,
            started: now,
            setup: view.setup,
            error: None,
            delete_pending: false,
            in_use: 0,
        };
        self.calls.insert(view.id, call);
        self.next_call = self.next_call.max(view.id + 1);
        Ok(())
    }

    /// Every established call.
    pub fn views(&self) -> Vec<CallView> {
        let mut v: Vec<CallView> = self.calls.keys().filter_map(|&id| self.view(id)).collect();
        v.sort_by_key(|c| c.id);
        v
    }

    // ----- time -----------------------------------------------------------------------------

    /// The next batch to send, if any (drain after every input).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        while let Some(sw) = self.ready.pop_front() {
            if let Some(t) = self.take_batch(now, sw) {
                return Some(t);
            }
        }
        None
    }

    fn take_batch(&mut self, now: Instant, sw: usize) -> Option<Transmit> {
        let batch = self.aggregators[sw].poll(now)?;
        if self.aggregators[sw].ready() {
            // More full messages wait for this switch.
            self.ready.push_back(sw);
        }
        let deadline = now.checked_add(self.config.command_timeout);
        for (req, _) in &batch {
            if let Some(o) = self.outstanding.get_mut(req) {
                o.deadline = deadline;
                if let Some(d) = deadline {
                    self.timeouts.push(Reverse((d, *req)));
                }
            }
        }
        self.stats.messages += 1;
        self.stats.commands += batch.len() as u64;
        Some(Transmit {
            switch: self.switches[sw].clone(),
            commands: batch,
        })
    }

    /// The next call of [`CmCore::handle_timeout`] is due at this time.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let flush = self.aggregators.iter().filter_map(|a| a.deadline()).min();
        // Drop stale heads: answered commands, or ones re-armed with a later deadline.
        while let Some(Reverse((d, req))) = self.timeouts.peek().copied() {
            match self.outstanding.get(&req) {
                Some(o) if o.deadline == Some(d) => break,
                _ => {
                    self.timeouts.pop();
                }
            }
        }
        let cmd = self.timeouts.peek().map(|Reverse((d, _))| *d);
        let linger = if self.lingering.is_empty() {
            None
        } else {
            self.linger_at
        };
        [flush, cmd, linger].into_iter().flatten().min()
    }

    /// Flushes aggregators whose time-out expired and re-sends (or fails) commands not
    /// answered in time. Drain [`CmCore::poll_transmit`] afterwards.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.lingering.is_empty() {
            match self.linger_at {
                None => self.linger_at = now.checked_add(LINGER_PERIOD),
                Some(t) if t <= now => {
                    self.linger_at = now.checked_add(LINGER_PERIOD);
                    for (sw, port, cmd) in std::mem::take(&mut self.lingering) {
                        self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                    }
                }
                Some(_) => {}
            }
        }
        if self.estimator.as_mut().is_some_and(|e| e.advance(now)) {
            self.adapt();
        }
        for sw in 0..self.aggregators.len() {
            if self.aggregators[sw].deadline().is_some_and(|d| d <= now) {
                self.ready.push_back(sw);
            }
        }
        let mut expired = Vec::new();
        while let Some(Reverse((d, req))) = self.timeouts.peek().copied() {
            if d > now {
                break;
            }
            self.timeouts.pop();
            if self
                .outstanding
                .get(&req)
                .is_some_and(|o| o.deadline == Some(d))
            {
                expired.push(req);
            }
        }
        for req in expired {
            let o = self.outstanding.get_mut(&req).expect("listed");
            if o.retries < self.config.max_retries {
                o.retries += 1;
                o.deadline = None;
                let (sw, cmd) = (o.switch, o.command.clone());
                self.stats.retries += 1;
                // The same request id: the switch answers a repeat once.
                self.aggregators[sw].push(now, req, cmd);
                self.ready.push_back(sw);
            } else {
                let sw = o.switch;
                // Its outcome is unknown: if the switch answers after all, the answer is
                // undone (a late reservation returns, a late commit is released).
                self.orphans.insert(req, (sw, o.port));
                self.handle_reply(
                    now,
                    req,
                    Err(FabricError::Unavailable(format!(
                        "switch {} did not answer request {req} after {} tries",
                        self.switches[sw],
                        self.config.max_retries + 1
                    ))),
                );
            }
        }
    }

    /// The outcome of calls, in order.
    pub fn poll_event(&mut self) -> Option<CallEvent> {
        self.events.pop_front()
    }

    /// Fills the cache of (switch, port) ahead of calls (xbind: warm-up).
    pub fn prefill(&mut self, now: Instant, switch: &str, port: u16) {
        if self.config.kind != CmKind::Xbind {
            return;
        }
        let sw = self.switch(switch);
        let cache = self.caches.entry((sw, port)).or_default();
        if cache.filling {
            return;
        }
        cache.filling = true;
        let cmd = self.reserve_cmd(port, self.config.cache_fill, 0);
        self.send(now, None, Purpose::Fill, sw, port, cmd);
    }

    /// Gives every cached identifier back to its switch (a clean shutdown), and sends
    /// whatever waits in the aggregators at once (T drops to 1).
    pub fn drain_caches(&mut self, now: Instant) {
        let keys: Vec<(usize, u16)> = self.caches.keys().copied().collect();
        for (sw, port) in keys {
            // One identifier per command: a give-back is all-or-nothing, and one
            // identifier the switch no longer holds for us must not keep the rest.
            for id in self.caches.get_mut(&(sw, port)).expect("key").trim(0) {
                let cmd = Command::Unreserve(Unreserve {
                    port: PortId(port),
                    ids: vec![id],
                    owner: self.config.owner.clone(),
                });
                self.send(now, None, Purpose::Unreserve, sw, port, cmd);
            }
        }
        // Send everything now, whatever T is.
        for sw in 0..self.aggregators.len() {
            if !self.aggregators[sw].is_empty() {
                self.ready.push_back(sw);
                self.aggregators[sw].tune(1, self.config.flush_timeout);
            }
        }
    }

    /// Give-backs waiting to be re-sent because no switch answered them.
    pub fn lingering(&self) -> usize {
        self.lingering.len()
    }

    /// Commands sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.outstanding.len()
    }
}

/// Ends slot `j`'s use of its cache's identifier, if it took one (see [`NvProbe`]).
///
/// [`NvProbe`]: super::dimension::NvProbe
fn nv_done(
    caches: &mut FxHashMap<(usize, u16), VciCache>,
    call: &mut Call,
    j: usize,
    key: (usize, u16),
    now: Instant,
) {
    if j >= 64 || call.in_use & (1 << j) == 0 {
        return;
    }
    call.in_use &= !(1 << j);
    if let Some(c) = caches.get_mut(&key) {
        c.nv.done(now, now.saturating_duration_since(call.started));
    }
}
