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
//! A call is a [`Tree`] (point-to-point is a tree with one leaf). Its identifier slots:
//! slot 0 is the source host's VC at the first switch's input port (reserved in that
//! port's identifier space, as the network assigns a calling host's VC), and every
//! branch of every hop has its own slot, its output identifier, which is also the input
//! identifier of the hop downstream (the same value on both ends of a link). Where the
//! tree forks, one switch connection has several branches.
//!
//! Changes to an established call (paper 001 §4, multipoint and QoS changes): AddLeaf
//! grafts the route to a new leaf onto the tree (identifiers for its new slots as at
//! setup, then one AddBranch where it leaves the tree and commits for the new hops; a
//! refusal undoes exactly what was done); DropLeaf prunes the leaf's branch back to the
//! fork; Modify changes the contract on every hop in place, the switches admitting the
//! new bandwidth before it takes effect, and changes back the hops already changed if
//! one refuses. One change at a time per call; each ends in a [`CallEvent::Changed`].
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
    Branch, BranchChange, Command, Commit, ConnectionKind, Modify, Release, Reply, Reserve,
    Unreserve,
};
use rustc_hash::FxHashMap;

use super::adaptive::{ArrivalEstimator, Regions};
use super::aggregator::MessageAggregator;
use super::cache::VciCache;
use super::dimension::NvProbe;
pub use super::tree::HopSpec;
use super::tree::{Graft, Tree, TreeError};

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
    /// The partition of every port's VCI range this manager reserves from (xbind
    /// §II-C1: several managers on disjoint partitions of the identifier space, so none
    /// ever hands out another's identifier); `None` means the whole range.
    pub partition: Option<(u16, u16)>,
    /// How often the live shell lists every switch's connections to sweep this owner's
    /// strays ([`CmCore::sweep`]); `None`: never (only when a switch comes back, and a
    /// last time when the manager stops). A connection is released only when two
    /// sweeps in a row find it unexplained, so nothing in flight is ever taken for a
    /// stray. The owner name must be this manager's alone: a sweep takes another
    /// manager's connections under the same owner for strays.
    pub sweep_interval: Option<Duration>,
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
            partition: None,
            sweep_interval: Some(Duration::from_secs(10)),
        }
    }
}

/// A call to set up.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupRequest {
    /// The route to each leaf (a destination host's name and its hops, source switch
    /// first); one for point-to-point. Every route starts at the source's port.
    pub routes: Vec<(String, Vec<HopSpec>)>,
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
    /// A change (AddLeaf, DropLeaf, Modify) ended; on error the call is as it was.
    Changed {
        /// The call.
        call: u64,
        /// The outcome.
        result: Result<(), CallError>,
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

/// An established call's tree, for GetConnection.
#[derive(Debug, Clone, PartialEq)]
pub struct CallView {
    /// The call.
    pub id: u64,
    /// One entry per (hop, branch), upstream first, with the switch connection id and
    /// the input and output identifiers; a hop where the tree forks has one entry per
    /// branch, all with the same connection id. A point-to-point call's entries are its
    /// hops in order.
    pub hops: Vec<(HopSpec, u64, VcId, VcId)>,
    /// For each entry, the entry whose output feeds its input (`None` at the root).
    pub parents: Vec<Option<usize>>,
    /// Each leaf's name and the entry that ends at it, in the order they joined.
    pub leaves: Vec<(String, usize)>,
    /// The source's VC.
    pub source_vc: VcId,
    /// The first leaf's VC (every leaf's: `hops[leaves[k].1].3`).
    pub destination_vc: VcId,
    /// Setup latency.
    pub setup: Duration,
    /// The contract.
    pub traffic: TrafficDescriptor,
    /// Label.
    pub tag: String,
    /// Commands sent to switch servers for the call so far (its remote invocations).
    pub invocations: u32,
}

impl CallView {
    /// Each leaf's chain of entries from the root down to it; `None` if `parents` or
    /// `leaves` do not describe a tree over `hops`.
    pub fn chains(&self) -> Option<Vec<(String, Vec<usize>)>> {
        if self.parents.len() != self.hops.len() {
            return None;
        }
        self.leaves
            .iter()
            .map(|(leaf, e)| {
                let mut chain = vec![*e];
                let mut at = *e;
                while let Some(p) = *self.parents.get(at)? {
                    if chain.len() > self.hops.len() {
                        return None; // a cycle
                    }
                    chain.push(p);
                    at = p;
                }
                chain.reverse();
                Some((leaf.clone(), chain))
            })
            .collect()
    }

    /// The leaves' names.
    pub fn leaf_names(&self) -> Vec<String> {
        self.leaves.iter().map(|(l, _)| l.clone()).collect()
    }

    /// A point-to-point view's tree fields, from its hops in order (for callers that
    /// build views of paths, e.g. an old journal).
    pub fn path_tree(hops: usize, leaf: &str) -> (Vec<Option<usize>>, Vec<(String, usize)>) {
        (
            (0..hops).map(|i| i.checked_sub(1)).collect(),
            vec![(leaf.to_string(), hops.saturating_sub(1))],
        )
    }
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
    /// Commands, first sends only, that move identifiers between a switch and the
    /// manager rather than set up or tear down a call's channel: reserves for a miss
    /// or a cache fill (a sequential manager's phase 1), unreserves of a trimmed cache.
    /// The paper's N = 4λ(1 + k/T) counts none: it assumes every call hits the cache.
    pub identifier_commands: u64,
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

/// A change to an established call in progress.
#[derive(Debug)]
enum Change {
    /// AddLeaf: identifiers for the new slots first, then the switch commands.
    Grow {
        leaf: String,
        graft: Graft,
        commands_sent: bool,
    },
    /// DropLeaf: the fork's DropBranch and the releases below it.
    Prune,
    /// Modify: every hop changed to `new`; on a refusal, the changed ones back to the
    /// call's contract.
    Modify {
        new: TrafficDescriptor,
        clr: f64,
        changed: Vec<usize>,
    },
}

#[derive(Debug)]
struct Call {
    tree: Tree,
    /// Per hop: its switch's index.
    hop_sw: Vec<usize>,
    /// Per slot: its switch's index (the cache key is (switch, port)).
    slot_sw: Vec<usize>,
    traffic: TrafficDescriptor,
    clr: f64,
    buffer: u32,
    tag: String,
    /// Per slot.
    ids: Vec<Option<VcId>>,
    /// Per slot: the identifier is part of a switch connection (committed, or added as
    /// a branch), so a release, not a give-back, returns it.
    on_switch: Vec<bool>,
    /// Per hop.
    conns: Vec<Option<u64>>,
    waiting: u32,
    phase: Phase,
    /// A change in progress (established calls only).
    change: Option<Change>,
    started: Instant,
    setup: Duration,
    error: Option<CallError>,
    /// A delete arrived while the setup was in flight.
    delete_pending: bool,
    /// Identifier slots (bit j) taken from a cache whose commit is not yet answered:
    /// the call's share of `N_v` (§IV-A).
    in_use: u64,
    /// Commands sent for this call (re-sends included): its remote invocations.
    sent: u32,
}

impl Call {
    /// The slots switch connection `hop` carries now: its output identifiers.
    fn hop_slots(&self, hop: usize) -> Vec<usize> {
        (0..self.ids.len())
            .filter(|&j| self.tree.slot(j).hop == Some(hop) && self.on_switch[j])
            .collect()
    }

    /// Branch `s` of hop `h` as a switch's AddBranch/DropBranch argument, once the hop
    /// is committed and the slot has its identifier.
    fn branch_change(&self, h: usize, s: usize) -> Option<BranchChange> {
        Some(BranchChange {
            connection: self.conns[h]?,
            branch: Branch {
                port: PortId(self.tree.slot(s).port),
                id: self.ids[s]?,
            },
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Reserve for a call's identifier slot (a miss, or a sequential phase 1).
    Slot(usize),
    /// A cache fill with no call waiting.
    Fill,
    Commit(usize),
    Release(usize),
    /// A change's command on hop `h` (AddBranch, DropBranch, Modify).
    Change(usize),
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

/// The commits in flight or given up with one input, each with its branches.
type Candidates<'a> = Vec<(&'a [Branch], Stray)>;

/// What a sweep or a reconcile makes of a connection no call holds.
#[derive(Debug, Clone, Copy)]
enum Stray {
    /// The result of a commit still waiting for its answer.
    Pending(u64),
    /// The result of a commit given up for lost.
    Orphan(u64),
    /// Nothing explains it.
    Unexplained,
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
    orphans: FxHashMap<u64, (usize, u16, Command)>,
    /// Per switch: this owner's connections the last sweep found unexplained (released
    /// if the next sweep finds them still so).
    suspects: Vec<rustc_hash::FxHashSet<u64>>,
    /// Per switch: this owner's reservations the last sweep found unexplained.
    suspect_ids: Vec<rustc_hash::FxHashSet<(u16, VcId)>>,
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
            suspects: Vec::new(),
            suspect_ids: Vec::new(),
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
        (call.slot_sw[j], call.tree.slot(j).port)
    }

    /// Sizes a call's per-slot and per-hop state to its tree (after a graft or an
    /// ungraft), resolving switch names to indices.
    fn fit(&mut self, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        let (nh, ns) = (call.tree.hops().len(), call.tree.slots().len());
        call.ids.resize(ns, None);
        call.on_switch.resize(ns, false);
        call.conns.resize(nh, None);
        call.hop_sw.truncate(nh);
        call.slot_sw.truncate(ns);
        let need_h: Vec<String> = call.tree.hops()[call.hop_sw.len()..]
            .iter()
            .map(|h| h.switch.clone())
            .collect();
        let need_s: Vec<String> = call.tree.slots()[call.slot_sw.len()..]
            .iter()
            .map(|s| s.switch.clone())
            .collect();
        let hs: Vec<usize> = need_h.iter().map(|n| self.switch(n)).collect();
        let ss: Vec<usize> = need_s.iter().map(|n| self.switch(n)).collect();
        let call = self.calls.get_mut(&id).expect("call");
        call.hop_sw.extend(hs);
        call.slot_sw.extend(ss);
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
        if let Some(c) = call.and_then(|c| self.calls.get_mut(&c)) {
            c.sent += 1;
        }
        if matches!(
            purpose,
            Purpose::Slot(_) | Purpose::Fill | Purpose::Unreserve
        ) {
            self.stats.identifier_commands += 1;
        }
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
            within: self.config.partition,
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
        let tree = match Tree::from_routes(&req.routes) {
            Ok(t) => t,
            Err(e) => {
                self.events.push_back(CallEvent::Failed {
                    call: id,
                    error: CallError {
                        kind: ErrorKind::InvalidArgument,
                        message: e.to_string(),
                    },
                });
                self.stats.failed += 1;
                self.setting_up -= 1;
                return id;
            }
        };
        let call = Call {
            tree,
            hop_sw: Vec::new(),
            slot_sw: Vec::new(),
            traffic: req.traffic,
            clr: req.clr,
            buffer: req.buffer_cells,
            tag: req.tag,
            ids: Vec::new(),
            on_switch: Vec::new(),
            conns: Vec::new(),
            waiting: 0,
            phase: Phase::Setup,
            change: None,
            started: now,
            setup: Duration::ZERO,
            error: None,
            delete_pending: false,
            in_use: 0,
            sent: 0,
        };
        self.calls.insert(id, call);
        self.fit(id);
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
        let slots: Vec<usize> = self.calls[&id].tree.live_slots().collect();
        self.take_ids(now, id, &slots, true);
        if self.calls[&id].waiting == 0 {
            self.xbind_commit(now, id);
        }
    }

    /// Identifiers for `slots` of a call: from the caches (xbind; a miss reserves a
    /// whole fill) or one reservation each (sequential). `probe`: count the takes in
    /// `N_v` (a setup's, §IV-A).
    fn take_ids(&mut self, now: Instant, id: u64, slots: &[usize], probe: bool) {
        if self.config.kind == CmKind::Sequential {
            for &j in slots {
                let (sw, port) = Self::slot_port(&self.calls[&id], j);
                let cmd = self.reserve_cmd(port, 1, 0);
                self.send(now, Some(id), Purpose::Slot(j), sw, port, cmd);
                self.calls.get_mut(&id).expect("call").waiting += 1;
            }
            return;
        }
        for &j in slots {
            let (sw, port) = Self::slot_port(&self.calls[&id], j);
            let cache = self.caches.entry((sw, port)).or_default();
            let got = cache.take();
            match got {
                Some(vc) => {
                    let call = self.calls.get_mut(&id).expect("call");
                    call.ids[j] = Some(vc);
                    // Slot 0 (the first switch's input) is never committed on its own
                    // port, so N_v is kept for the output ports, as in the paper.
                    if probe && (1..64).contains(&j) {
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
    }

    fn commit_cmd(&self, call: &Call, hop: usize, replenish: u32) -> Command {
        let h = call.tree.hop(hop);
        Command::Commit(Commit {
            kind: ConnectionKind::Vc,
            in_port: PortId(h.in_port),
            in_id: call.ids[h.in_slot].expect("identifiers known"),
            branches: h
                .outs
                .iter()
                .map(|&s| Branch {
                    port: PortId(call.tree.slot(s).port),
                    id: call.ids[s].expect("identifiers known"),
                })
                .collect(),
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
        let hops: Vec<usize> = call.tree.live_hops().collect();
        self.commit_hops(now, id, &hops);
    }

    /// Sends the commits of `hops` at once (xbind's parallel setup; AddLeaf's new hops).
    fn commit_hops(&mut self, now: Instant, id: u64, hops: &[usize]) {
        for &hop in hops {
            let first = self.calls[&id].tree.hop(hop).outs[0];
            let (sw, port) = Self::slot_port(&self.calls[&id], first);
            // Piggyback the replenishment of a low cache on this commit (xbind; the
            // sequential manager keeps no cache).
            let xbind = self.config.kind == CmKind::Xbind;
            let cache = self.caches.entry((sw, port)).or_default();
            let replenish =
                if xbind && !cache.filling && (cache.len() as u32) < self.config.cache_low {
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

    /// Returns a call's identifiers that are merely reserved (not carried by a switch
    /// connection) to the cache, or, sequential, to the switch.
    fn return_free_ids(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        let give_back: Vec<usize> = (0..call.ids.len())
            .filter(|&j| !call.on_switch[j] && call.ids[j].is_some())
            .collect();
        self.return_slots(now, id, &give_back);
    }

    /// Returns these slots' identifiers (reserved, not on a switch connection).
    fn return_slots(&mut self, now: Instant, id: u64, slots: &[usize]) {
        for &j in slots {
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
        let n = self.calls[&id].conns.len();
        for hop in 0..n {
            let Some(conn) = self.calls[&id].conns[hop] else {
                continue;
            };
            let (sw, port) = (
                self.calls[&id].hop_sw[hop],
                self.calls[&id].tree.hop(hop).in_port,
            );
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
                for j in 1..call.ids.len().min(64) {
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

    /// Sequential: the next step, one remote invocation at a time (Fig. 2): reserve
    /// slot 0; then, hop by hop from the root, reserve each of its output identifiers and
    /// commit it. When nothing is left, the call is established.
    fn seq_step(&mut self, now: Instant, id: u64) {
        let call = &self.calls[&id];
        let next_slot = |j: usize| call.ids[j].is_none().then_some(j);
        let mut todo = next_slot(0).map(|j| (Purpose::Slot(j), j));
        if todo.is_none() {
            for h in call.tree.live_hops() {
                let hop = call.tree.hop(h);
                if let Some(j) = hop.outs.iter().find_map(|&j| next_slot(j)) {
                    todo = Some((Purpose::Slot(j), j));
                    break;
                }
                if call.conns[h].is_none() {
                    todo = Some((Purpose::Commit(h), hop.outs[0]));
                    break;
                }
            }
        }
        let Some((purpose, j)) = todo else {
            self.establish(now, id);
            return;
        };
        let (sw, port) = Self::slot_port(call, j);
        let cmd = match purpose {
            Purpose::Commit(h) => self.commit_cmd(call, h, 0),
            _ => self.reserve_cmd(port, 1, 0),
        };
        self.send(now, Some(id), purpose, sw, port, cmd);
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
            if let Some((sw, port, _)) = self.orphans.remove(&request) {
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
            // The commit carrying the hop's output slots is answered, either way: their
            // identifiers are no longer "in use" in the paper's sense (§IV-A).
            let outs = call.tree.hop(hop).outs.clone();
            for j in outs {
                let key = (call.slot_sw[j], call.tree.slot(j).port);
                nv_done(&mut self.caches, call, j, key, now);
            }
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
                for j in call.tree.hop(hop).outs.clone() {
                    call.on_switch[j] = true;
                }
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
                let xbind = self.config.kind == CmKind::Xbind;
                // Every output identifier the hop carried: xbind released with
                // keep_reserved, so they are ours again (back to the cache); sequential
                // released them to the pool.
                let mut back = Vec::new();
                for j in call.hop_slots(hop) {
                    call.on_switch[j] = false;
                    if let Some(vc) = call.ids[j].take()
                        && xbind
                    {
                        back.push((call.slot_sw[j], call.tree.slot(j).port, vc));
                    }
                }
                for (s, p, vc) in back {
                    self.return_id(now, s, p, vc);
                }
                if self.config.kind == CmKind::Sequential {
                    self.release_hops(now, id);
                }
                if self.calls[&id].waiting == 0 {
                    self.return_free_ids(now, id);
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
                    if self.config.kind == CmKind::Xbind {
                        // The unanswered release may have been done after all, keeping
                        // the hop's output identifiers reserved for us (an answer lost,
                        // or one that comes after we gave up): give those back too,
                        // after the release (which frees them if it was not done).
                        for j in call.hop_slots(hop) {
                            if let Some(vc) = call.ids[j] {
                                let p = call.tree.slot(j).port;
                                self.lingering.push((
                                    sw,
                                    p,
                                    Command::Unreserve(Unreserve {
                                        port: PortId(p),
                                        ids: vec![vc],
                                        owner: self.config.owner.clone(),
                                    }),
                                ));
                            }
                        }
                    }
                    self.linger_at
                        .get_or_insert(now.saturating_add(LINGER_PERIOD));
                }
                // Otherwise the switch no longer has it (restarted without a journal, or
                // an audit removed it): nothing to return for this hop.
                tracing::warn!(call = id, hop, error = %e, "release failed; the hop is gone");
                call.conns[hop] = None;
                for j in call.hop_slots(hop) {
                    call.on_switch[j] = false;
                    call.ids[j] = None;
                }
                if self.config.kind == CmKind::Sequential {
                    self.release_hops(now, id);
                }
                if self.calls[&id].waiting == 0 {
                    self.return_free_ids(now, id);
                }
                self.finish_if_idle(now, id);
            }
            (Purpose::Change(hop), result) => {
                self.change_answer(now, id, hop, &out.command, result);
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
        if call.phase == Phase::Established {
            // A change's step failed: the change ends (undone) once every answer is in.
            if call.waiting == 0 {
                self.change_step(now, id);
            }
            return;
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
            (_, Phase::Established) if call.waiting == 0 => self.change_step(now, id),
            (CmKind::Xbind, Phase::Setup) if call.waiting == 0 => self.xbind_commit(now, id),
            (CmKind::Xbind, Phase::Committing) if call.waiting == 0 => self.establish(now, id),
            (CmKind::Sequential, Phase::Setup) => self.seq_step(now, id),
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
            Phase::Established if call.change.is_some() => call.delete_pending = true,
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

    // ----- changes: AddLeaf, DropLeaf, Modify ---------------------------------------------

    /// Whether call `id` can take a change now.
    fn changeable(&self, id: u64) -> Result<(), CallError> {
        let err = |kind, message: String| Err(CallError { kind, message });
        match self.calls.get(&id) {
            None => err(ErrorKind::NotFound, format!("no connection {id}")),
            Some(c) if c.phase != Phase::Established || c.delete_pending => err(
                ErrorKind::Aborted,
                format!("connection {id} is not established (being set up or released)"),
            ),
            Some(c) if c.change.is_some() => err(
                ErrorKind::Aborted,
                format!("connection {id} is already being changed; try again"),
            ),
            Some(_) => Ok(()),
        }
    }

    pub(crate) fn tree_error(e: TreeError) -> CallError {
        let kind = match e {
            TreeError::AlreadyLeaf(_) => ErrorKind::AlreadyExists,
            TreeError::NotLeaf(_) => ErrorKind::NotFound,
            _ => ErrorKind::InvalidArgument,
        };
        CallError {
            kind,
            message: e.to_string(),
        }
    }

    /// Adds `leaf`, reached by `route` (from the source's port), to established call
    /// `id`. The outcome comes as [`CallEvent::Changed`]; refused at once (the call
    /// unchanged) if the call cannot be changed now or the route does not fit the tree.
    pub fn add_leaf(
        &mut self,
        now: Instant,
        id: u64,
        leaf: &str,
        route: &[HopSpec],
    ) -> Result<(), CallError> {
        self.changeable(id)?;
        let call = self.calls.get_mut(&id).expect("checked");
        let graft = call.tree.graft(leaf, route).map_err(Self::tree_error)?;
        call.error = None;
        let slots = graft.new_slots.clone();
        call.change = Some(Change::Grow {
            leaf: leaf.to_string(),
            graft,
            commands_sent: false,
        });
        self.fit(id);
        self.take_ids(now, id, &slots, false);
        if self.calls[&id].waiting == 0 {
            self.change_step(now, id);
        }
        Ok(())
    }

    /// Drops `leaf` from call `id`: its branch is pruned back to the fork (a DropBranch
    /// there, releases below). The outcome comes as [`CallEvent::Changed`].
    pub fn drop_leaf(&mut self, now: Instant, id: u64, leaf: &str) -> Result<(), CallError> {
        self.changeable(id)?;
        let call = self.calls.get_mut(&id).expect("checked");
        let prune = call.tree.prune(leaf).map_err(Self::tree_error)?;
        call.error = None;
        call.change = Some(Change::Prune);
        let mut sends = Vec::new();
        if let Some((h, s)) = prune.dropped_branch
            && let Some(ch) = call.branch_change(h, s)
        {
            sends.push((h, Command::DropBranch(ch)));
        }
        for &h in &prune.released_hops {
            if let Some(conn) = call.conns[h] {
                sends.push((
                    h,
                    Command::Release(Release {
                        connection: conn,
                        keep_reserved: false,
                    }),
                ));
            }
        }
        // The pruned slots' identifiers go back to the switches' pools with their
        // branches and hops; the manager forgets them now.
        for &s in &prune.gone_slots {
            call.ids[s] = None;
            call.on_switch[s] = false;
        }
        for &h in &prune.released_hops {
            call.conns[h] = None;
        }
        self.send_change(now, id, sends);
        Ok(())
    }

    /// Changes call `id`'s contract to `traffic` (with `clr`, 0 for the switch's
    /// default) on every hop, in place. The outcome comes as [`CallEvent::Changed`].
    pub fn modify(
        &mut self,
        now: Instant,
        id: u64,
        traffic: TrafficDescriptor,
        clr: f64,
    ) -> Result<(), CallError> {
        self.changeable(id)?;
        let call = self.calls.get_mut(&id).expect("checked");
        call.error = None;
        call.change = Some(Change::Modify {
            new: traffic,
            clr,
            changed: Vec::new(),
        });
        let sends: Vec<(usize, Command)> = call
            .tree
            .live_hops()
            .filter_map(|h| {
                Some((
                    h,
                    Command::Modify(Modify {
                        connection: call.conns[h]?,
                        traffic,
                        clr,
                    }),
                ))
            })
            .collect();
        self.send_change(now, id, sends);
        Ok(())
    }

    /// Sends a change's commands, one per hop, all at once.
    fn send_change(&mut self, now: Instant, id: u64, sends: Vec<(usize, Command)>) {
        for (h, cmd) in sends {
            let call = &self.calls[&id];
            let (sw, port) = (call.hop_sw[h], call.tree.hop(h).in_port);
            self.send(now, Some(id), Purpose::Change(h), sw, port, cmd);
            self.calls.get_mut(&id).expect("call").waiting += 1;
        }
        if self.calls[&id].waiting == 0 {
            self.change_step(now, id);
        }
    }

    /// The answer to a change's command on hop `h`.
    fn change_answer(
        &mut self,
        now: Instant,
        id: u64,
        h: usize,
        command: &Command,
        result: Result<Reply, FabricError>,
    ) {
        let call = self.calls.get_mut(&id).expect("call");
        match (command, result) {
            (Command::AddBranch(ch), Ok(_)) => {
                if let Some(j) = (0..call.ids.len()).find(|&j| {
                    call.tree.slot(j).hop == Some(h) && call.ids[j] == Some(ch.branch.id)
                }) {
                    call.on_switch[j] = true;
                }
            }
            (Command::Modify(_), Ok(_)) => {
                if let Some(Change::Modify { changed, .. }) = call.change.as_mut() {
                    changed.push(h);
                }
            }
            (Command::DropBranch(_) | Command::Release(_), Err(e))
                if e.kind() == ErrorKind::Unavailable =>
            {
                // The switch may come back holding it: the give-back lingers.
                self.lingering.push((call.hop_sw[h], 0, command.clone()));
                self.linger_at
                    .get_or_insert(now.saturating_add(LINGER_PERIOD));
            }
            (Command::DropBranch(_) | Command::Release(_), Err(e)) => {
                tracing::warn!(call = id, hop = h, error = %e, "a prune step failed; the branch is gone");
            }
            (_, Err(e)) => {
                if call.error.is_none() {
                    call.error = Some(CallError {
                        kind: e.kind(),
                        message: e.to_string(),
                    });
                }
            }
            (_, Ok(_)) => {}
        }
        if self.calls[&id].waiting == 0 {
            self.change_step(now, id);
        }
    }

    /// Moves a change on once every answer it waits for is in.
    fn change_step(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        let Some(change) = call.change.take() else {
            return;
        };
        let failed = call.error.take();
        match change {
            Change::Grow {
                leaf,
                graft,
                commands_sent: false,
            } if failed.is_none() => {
                // Every new slot has its identifier: the branch where the route leaves
                // the tree, and the new hops, at once.
                let mut sends = Vec::new();
                if let Some((h, s)) = graft.new_branch
                    && let Some(ch) = call.branch_change(h, s)
                {
                    sends.push((h, Command::AddBranch(ch)));
                }
                let hops = graft.new_hops.clone();
                call.change = Some(Change::Grow {
                    leaf,
                    graft,
                    commands_sent: true,
                });
                self.commit_hops(now, id, &hops);
                self.send_change(now, id, sends);
            }
            Change::Grow { graft, .. } => match failed {
                None => self.end_change(now, id, Ok(())),
                Some(e) => {
                    // Undo exactly what was done: the added branch dropped, the new hops
                    // released, their identifiers back; the tree as it was.
                    let call = self.calls.get_mut(&id).expect("call");
                    let mut undo = Vec::new();
                    if let Some((h, s)) = graft.new_branch
                        && call.on_switch[s]
                        && let Some(ch) = call.branch_change(h, s)
                    {
                        undo.push((call.hop_sw[h], Command::DropBranch(ch)));
                        call.ids[s] = None;
                        call.on_switch[s] = false;
                    }
                    for &h in &graft.new_hops {
                        if let Some(conn) = call.conns[h].take() {
                            undo.push((
                                call.hop_sw[h],
                                Command::Release(Release {
                                    connection: conn,
                                    keep_reserved: false,
                                }),
                            ));
                            for j in call.tree.hop(h).outs.clone() {
                                call.ids[j] = None;
                                call.on_switch[j] = false;
                            }
                        }
                    }
                    let back: Vec<usize> = graft
                        .new_slots
                        .iter()
                        .copied()
                        .filter(|&j| call.ids[j].is_some() && !call.on_switch[j])
                        .collect();
                    for (sw, cmd) in undo {
                        self.send(now, None, Purpose::Unreserve, sw, 0, cmd);
                    }
                    self.return_slots(now, id, &back);
                    let call = self.calls.get_mut(&id).expect("call");
                    call.tree.ungraft(&graft);
                    self.fit(id);
                    self.end_change(now, id, Err(e));
                }
            },
            Change::Prune => self.end_change(now, id, Ok(())),
            Change::Modify { new, clr, changed } => match failed {
                None => {
                    call.traffic = new;
                    if clr > 0.0 {
                        call.clr = clr;
                    }
                    self.end_change(now, id, Ok(()))
                }
                Some(e) => {
                    // Back to the old contract where it changed. Going back frees
                    // bandwidth if the change was an increase (the only kind a switch
                    // refuses), so it cannot be refused in turn.
                    let (old, old_clr) = (call.traffic, call.clr);
                    let undo: Vec<(usize, Command)> = changed
                        .iter()
                        .filter_map(|&h| {
                            Some((
                                call.hop_sw[h],
                                Command::Modify(Modify {
                                    connection: call.conns[h]?,
                                    traffic: old,
                                    clr: old_clr,
                                }),
                            ))
                        })
                        .collect();
                    for (sw, cmd) in undo {
                        self.send(now, None, Purpose::Unreserve, sw, 0, cmd);
                    }
                    self.end_change(now, id, Err(e));
                }
            },
        }
    }

    fn end_change(&mut self, now: Instant, id: u64, result: Result<(), CallError>) {
        self.events
            .push_back(CallEvent::Changed { call: id, result });
        let call = self.calls.get_mut(&id).expect("call");
        if call.delete_pending {
            call.delete_pending = false;
            self.delete(now, id);
        }
    }

    /// The path of an established call.
    pub fn view(&self, id: u64) -> Option<CallView> {
        let c = self.calls.get(&id)?;
        if c.phase != Phase::Established {
            return None;
        }
        let entries = c.tree.entries();
        let entry_of = |slot: usize| entries.iter().position(|e| e.3 == slot);
        let leaves: Vec<(String, usize)> = c
            .tree
            .leaves()
            .into_iter()
            .filter_map(|(l, s)| Some((l.to_string(), entry_of(s)?)))
            .collect();
        let hops: Vec<(HopSpec, u64, VcId, VcId)> = entries
            .iter()
            .map(|(spec, h, i, o)| {
                (
                    spec.clone(),
                    c.conns[*h].unwrap_or(0),
                    c.ids[*i].unwrap_or_default(),
                    c.ids[*o].unwrap_or_default(),
                )
            })
            .collect();
        let destination_vc = leaves.first().map_or(VcId::default(), |l| hops[l.1].3);
        Some(CallView {
            id,
            parents: entries
                .iter()
                .map(|e| if e.2 == 0 { None } else { entry_of(e.2) })
                .collect(),
            leaves,
            hops,
            source_vc: c.ids[0].unwrap_or_default(),
            destination_vc,
            setup: c.setup,
            traffic: c.traffic,
            tag: c.tag.clone(),
            invocations: c.sent,
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
        let (mut completed, mut released) = (0, 0);
        for (x, found) in self.strays(sw, connections) {
            match found {
                Stray::Pending(req) => {
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
                Stray::Orphan(req) => {
                    released += 1;
                    self.late_commit(now, req, x.id);
                }
                Stray::Unexplained => {
                    released += 1;
                    self.release_stray(now, sw, x);
                }
            }
        }
        (completed, released)
    }

    /// Sweeps `switch`'s connections (as listed by the switch) for this owner's strays:
    /// the connection of a commit given up after its retries whose answers were all
    /// lost (released as its late answer would have been), and connections no call
    /// explains. With `confirm`, a running manager's periodic sweep, an unexplained
    /// connection is released only if the previous sweep found it unexplained too (a
    /// command in flight is answered long before), and a commit still in flight is
    /// left alone; without, the last sweep of a stopping manager with nothing in flight,
    /// every stray goes at once. Calls' connections are never touched. Returns the
    /// connections released.
    pub fn sweep(
        &mut self,
        now: Instant,
        switch: &str,
        connections: &[atmlab_fabric::switch::Connection],
        confirm: bool,
    ) -> usize {
        let Some(&sw) = self.switch_index.get(switch) else {
            return 0;
        };
        if self.suspects.len() <= sw {
            self.suspects.resize_with(sw + 1, Default::default);
        }
        let before = std::mem::take(&mut self.suspects[sw]);
        let mut released = 0;
        for (x, found) in self.strays(sw, connections) {
            match found {
                Stray::Pending(_) => {}
                Stray::Orphan(req) => {
                    released += 1;
                    self.late_commit(now, req, x.id);
                }
                Stray::Unexplained if confirm && !before.contains(&x.id) => {
                    self.suspects[sw].insert(x.id);
                }
                Stray::Unexplained => {
                    released += 1;
                    self.release_stray(now, sw, x);
                }
            }
        }
        released
    }

    /// Sweeps `switch`'s reservations (as listed) for this owner's strays: identifiers
    /// reserved for this owner that no cache, no call and no give-back in flight holds
    /// (a fill given up whose every answer was lost, a give-back that never got
    /// through). Given back as [`CmCore::sweep`] releases connections: with `confirm`,
    /// only when the previous sweep found them too (a Reserve in flight is answered long
    /// before); without, at once. Returns the identifiers given back.
    pub fn sweep_reservations(
        &mut self,
        now: Instant,
        switch: &str,
        reservations: &[atmlab_fabric::switch::Reservation],
        confirm: bool,
    ) -> usize {
        let Some(&sw) = self.switch_index.get(switch) else {
            return 0;
        };
        let mut held: rustc_hash::FxHashSet<(u16, VcId)> = Default::default();
        for c in self.calls.values() {
            for (j, id) in c.ids.iter().enumerate() {
                if let Some(id) = id
                    && c.slot_sw.get(j) == Some(&sw)
                {
                    held.insert((c.tree.slot(j).port, *id));
                }
            }
        }
        let giving_back = self
            .outstanding
            .values()
            .filter(|o| o.switch == sw)
            .map(|o| &o.command)
            .chain(self.lingering.iter().filter(|l| l.0 == sw).map(|l| &l.2));
        for cmd in giving_back {
            if let Command::Unreserve(u) = cmd {
                held.extend(u.ids.iter().map(|&id| (u.port.0, id)));
            }
        }
        if self.suspect_ids.len() <= sw {
            self.suspect_ids.resize_with(sw + 1, Default::default);
        }
        let before = std::mem::take(&mut self.suspect_ids[sw]);
        let mut given = 0;
        for r in reservations {
            let key = (r.port.0, r.id);
            if r.owner != self.config.owner
                || held.contains(&key)
                || self
                    .caches
                    .get(&(sw, r.port.0))
                    .is_some_and(|c| c.contains(r.id))
            {
                continue;
            }
            if confirm && !before.contains(&key) {
                self.suspect_ids[sw].insert(key);
                continue;
            }
            given += 1;
            let cmd = Command::Unreserve(Unreserve {
                port: r.port,
                ids: vec![r.id],
                owner: self.config.owner.clone(),
            });
            self.send(now, None, Purpose::Unreserve, sw, r.port.0, cmd);
        }
        given
    }

    /// This owner's connections on switch `sw` that no call holds, and what each is.
    fn strays<'a>(
        &self,
        sw: usize,
        connections: &'a [atmlab_fabric::switch::Connection],
    ) -> Vec<(&'a atmlab_fabric::switch::Connection, Stray)> {
        let mut known: rustc_hash::FxHashSet<u64> = Default::default();
        for c in self.calls.values() {
            for (i, s) in c.hop_sw.iter().enumerate() {
                if *s == sw
                    && let Some(conn) = c.conns[i]
                {
                    known.insert(conn);
                }
            }
        }
        // The commits that could have made a connection on this switch, by input: in
        // flight first, then given up. One pass over each, so a sweep of n connections
        // with m commands out costs n + m, not n x m, on the manager's task.
        let mut commits: FxHashMap<(PortId, VcId), Candidates<'_>> = FxHashMap::default();
        let pending = self
            .outstanding
            .iter()
            .filter(|(_, o)| o.switch == sw)
            .map(|(&req, o)| (&o.command, Stray::Pending(req)));
        let given_up = self
            .orphans
            .iter()
            .filter(|(_, (s, _, _))| *s == sw)
            .map(|(&req, (_, _, cmd))| (cmd, Stray::Orphan(req)));
        for (cmd, what) in pending.chain(given_up) {
            if let Command::Commit(c) = cmd {
                commits
                    .entry((c.in_port, c.in_id))
                    .or_default()
                    .push((&c.branches, what));
            }
        }
        connections
            .iter()
            .filter(|x| x.owner == self.config.owner && !known.contains(&x.id))
            .map(|x| {
                // The same input *and* the same branches: a stray that merely holds the
                // input (a connection whose release went unanswered, restored by the
                // switch's journal, its input identifier since reused) is not this
                // commit's result. Taking it for one left the commit's real connection,
                // made when its retry got through, to nobody.
                let found = commits
                    .get(&(x.in_port, x.in_id))
                    .and_then(|v| v.iter().find(|(b, _)| *b == x.branches.as_slice()))
                    .map_or(Stray::Unexplained, |&(_, what)| what);
                (x, found)
            })
            .collect()
    }

    /// A commit given up for lost turned out to have made `connection`: undone as its
    /// late answer would have been.
    fn late_commit(&mut self, now: Instant, req: u64, connection: u64) {
        if let Some((sw, port, _)) = self.orphans.remove(&req) {
            self.undo_late(
                now,
                sw,
                port,
                Ok(Reply::Committed {
                    connection,
                    replenished: Vec::new(),
                }),
            );
        }
    }

    fn release_stray(&mut self, now: Instant, sw: usize, x: &atmlab_fabric::switch::Connection) {
        let port = x.branches.first().map_or(x.in_port.0, |b| b.port.0);
        let cmd = Command::Release(Release {
            connection: x.id,
            keep_reserved: false,
        });
        self.send(now, None, Purpose::Unreserve, sw, port, cmd);
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
        let chains = view.chains().ok_or("the view's tree is malformed")?;
        let routes: Vec<(String, Vec<HopSpec>)> = chains
            .iter()
            .map(|(l, c)| {
                (
                    l.clone(),
                    c.iter().map(|&e| view.hops[e].0.clone()).collect(),
                )
            })
            .collect();
        let tree =
            Tree::from_routes(&routes).map_err(|_| "the view's routes do not form a tree")?;
        let mut ids = vec![None; tree.slots().len()];
        let mut on_switch = vec![false; tree.slots().len()];
        let mut conns = vec![None; tree.hops().len()];
        ids[0] = Some(view.hops[chains[0].1[0]].2);
        for ((_, chain), (_, route)) in chains.iter().zip(&routes) {
            let walk = tree.walk(route).ok_or("a route left the tree")?;
            for (&e, (h, s)) in chain.iter().zip(walk) {
                conns[h] = Some(view.hops[e].1);
                ids[s] = Some(view.hops[e].3);
                on_switch[s] = true;
            }
        }
        let call = Call {
            tree,
            hop_sw: Vec::new(),
            slot_sw: Vec::new(),
            traffic: view.traffic,
            clr: 0.0,
            buffer: 0,
            tag: view.tag.clone(),
            ids,
            on_switch,
            conns,
            waiting: 0,
            phase: Phase::Established,
            change: None,
            started: now,
            setup: view.setup,
            error: None,
            delete_pending: false,
            in_use: 0,
            sent: 0,
        };
        self.calls.insert(view.id, call);
        self.fit(view.id);
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
                // undone (a late reservation returns, a late commit is released); if
                // every answer is lost, a sweep finds the commit's connection.
                self.orphans.insert(req, (sw, o.port, o.command.clone()));
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
