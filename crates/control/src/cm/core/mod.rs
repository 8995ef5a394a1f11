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
//!
//! The machine is one struct, [`CmCore`], with one `impl` block per concern:
//!
//! - this module: the public types, the call and command records, the constructor,
//!   accessors and tuning, the aggregators' sending, and the `poll_*` outputs;
//! - `setup`: [`CmCore::add`], the sequential steps, xbind's start and commits, taking
//!   identifiers from the caches, establishment;
//! - `replies`: [`CmCore::handle_reply`] and what an answer leads to (failure,
//!   advancing, rollback, undoing a late answer), and [`CmCore::handle_timeout`]'s
//!   re-sends;
//! - `release`: [`CmCore::delete`], releasing hops, returning identifiers, ending a
//!   call once nothing is awaited;
//! - `change`: AddLeaf, DropLeaf and Modify on an established call;
//! - `recovery`: reconciling with a switch that came back, sweeps for strays, taking
//!   calls back from a journal, views, and filling and draining the caches.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::{Duration, Instant};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::switch::{Branch, BranchChange, Command};
use rustc_hash::FxHashMap;

use super::adaptive::{ArrivalEstimator, Regions};
use super::aggregator::MessageAggregator;
use super::cache::VciCache;
use super::dimension::NvProbe;
pub use super::tree::HopSpec;
use super::tree::{Graft, Tree};

pub mod audit;
mod change;
mod recovery;
mod release;
mod replies;
mod setup;

/// A call's per-hop or per-slot state: inline up to a path of eight hops, so that the
/// common call allocates none of it (a call's five such lists were five allocations and
/// five frees per setup).
type PerCall<T> = smallvec::SmallVec<[T; 8]>;

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
    /// The default keeps that queue short: a much larger bound lets an overloaded
    /// manager hold a queue so long that its throughput collapses (measured in
    /// docs/performance.md, call setup).
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
    /// The setup-age guard (issue 28): a setup that waited longer than this before the
    /// core took it (in the shell's queue, behind a backlog) is refused at once (blocked,
    /// "overloaded") instead of costing switch commands for a caller that has likely
    /// given up; past the knee the work then goes to setups still worth doing. `None`:
    /// no guard (the reproductions' managers, whose queue the paper does not bound).
    pub max_setup_age: Option<Duration>,
    /// Overload control (issue 28): the bound on calls being set up adapts, between 32
    /// and `max_setups`, to keep setups within this latency
    /// ([`SetupLimit`](crate::cm::overload::SetupLimit)); `None`: the bound is
    /// `max_setups`, fixed (the simulated managers, whose costs the paper fixes).
    pub setup_target: Option<Duration>,
    /// Releases ride (xbind): they count not toward T, and leave in their switch's next
    /// message or at the flush time-out. `false` (the default) is §II-C4's rule, "the
    /// message threshold parameter takes into account both add and delete requests";
    /// `true` is the reading that §IV-A's Table I fits (docs/reproductions/xbind.md).
    pub releases_ride: bool,
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
            max_setup_age: None,
            setup_target: None,
            releases_ride: false,
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
    /// The switch's name (shared with the manager's own list: a message's name is a
    /// count, not an allocation).
    pub switch: std::sync::Arc<str>,
    /// The switch's index among the switches this manager knows, in the order it met
    /// them (a shell that numbers the switches can map it once instead of looking the
    /// name up per message).
    pub switch_index: usize,
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
    /// The view of call `id` with contract `traffic` whose tree is `tree`, with each
    /// hop's switch connection (`conn`, by hop index) and each slot's identifier (`ids`):
    /// what every manager's view derives alike (xbind's and TINA's LNC keep the same
    /// trees). Setup, label and invocations are left zero for the caller to fill.
    pub(crate) fn of_tree(
        id: u64,
        tree: &Tree,
        conn: impl Fn(usize) -> u64,
        ids: &[Option<VcId>],
        traffic: TrafficDescriptor,
    ) -> CallView {
        let entries = tree.entries();
        let entry_of = |slot: usize| entries.iter().position(|e| e.3 == slot);
        let leaves: Vec<(String, usize)> = tree
            .leaves()
            .into_iter()
            .filter_map(|(l, s)| Some((l.to_string(), entry_of(s)?)))
            .collect();
        let id_at = |slot: usize| ids.get(slot).copied().flatten().unwrap_or_default();
        let hops: Vec<(HopSpec, u64, VcId, VcId)> = entries
            .iter()
            .map(|(spec, h, i, o)| (spec.clone(), conn(*h), id_at(*i), id_at(*o)))
            .collect();
        CallView {
            id,
            parents: entries
                .iter()
                .map(|e| if e.2 == 0 { None } else { entry_of(e.2) })
                .collect(),
            destination_vc: leaves.first().map_or(VcId::default(), |l| hops[l.1].3),
            leaves,
            hops,
            source_vc: id_at(0),
            setup: Duration::ZERO,
            traffic,
            tag: String::new(),
            invocations: 0,
        }
    }

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
    /// Where a command's time goes (paper 000 Fig. 7, the trade of T; counting only,
    /// nothing reads these): picoseconds the commands that left in a message had waited
    /// in their aggregator (for T commands or the flush time-out), summed.
    pub queue_wait_ps: u64,
    /// Picoseconds from a message's leaving to the handling of each command's answer
    /// (the remote invocation's round trip as the manager sees it, the switch server's
    /// work and the wait in the manager's inbox included), summed over answered
    /// commands.
    pub round_trip_ps: u64,
    /// Commands whose answer was handled (the count of `round_trip_ps`).
    pub answered: u64,
    /// Picoseconds the live manager's task spent handling inputs (its turns: requests,
    /// answers, time-outs, and sending what they made), summed; 0 in a core driven by
    /// hand.
    pub busy_ps: u64,
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
    hop_sw: PerCall<usize>,
    /// Per slot: its switch's index (the cache key is (switch, port)).
    slot_sw: PerCall<usize>,
    traffic: TrafficDescriptor,
    clr: f64,
    buffer: u32,
    tag: String,
    /// Per slot.
    ids: PerCall<Option<VcId>>,
    /// Per slot: the identifier is part of a switch connection (committed, or added as
    /// a branch), so a release, not a give-back, returns it.
    on_switch: PerCall<bool>,
    /// Per hop.
    conns: PerCall<Option<u64>>,
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
    fn hop_slots(&self, hop: usize) -> PerCall<usize> {
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
    /// When it entered its aggregator (for [`CmStats::queue_wait_ps`]).
    queued: Instant,
    /// When its message left (for [`CmStats::round_trip_ps`]).
    sent: Option<Instant>,
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
    /// `config.owner`, shared by every command that carries it.
    owner: std::sync::Arc<str>,
    switch_index: FxHashMap<String, usize>,
    switches: Vec<std::sync::Arc<str>>,
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
    /// Command deadlines with their request ids, in time order; stale entries
    /// (answered, or re-armed) are skipped lazily. A deadline is its message's leaving
    /// plus the command time-out, so they come in time order and a queue holds them
    /// (one that comes earlier than the last is put in its place); a heap would pay a
    /// sift through tens of thousands of entries per command.
    timeouts: VecDeque<(Instant, u64)>,
    /// The aggregators' flush deadlines, earliest first, with their switch; an entry is
    /// pushed whenever an aggregator's deadline changes and skipped lazily once it is no
    /// longer that aggregator's deadline, so the next flush is found without a scan of
    /// every switch's aggregator.
    flushes: BinaryHeap<Reverse<(Instant, usize)>>,
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
    /// The adaptive bound on `setting_up` (`CmConfig::setup_target`).
    setup_limit: Option<crate::cm::overload::SetupLimit>,
    /// Give-backs (releases, unreserves) no switch answered: re-sent every
    /// `LINGER_PERIOD` until one does, so a switch that comes back is cleaned up.
    lingering: Vec<(usize, u16, Command)>,
    linger_at: Option<Instant>,
}

/// The fewest calls the adaptive bound lets be set up at once: the pipeline a light
/// load needs (32 calls in setup carry 32,000 setups/s at 1 ms each).
const SETUP_FLOOR: usize = 32;

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
            owner: config.owner.as_str().into(),
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
            timeouts: VecDeque::new(),
            flushes: BinaryHeap::new(),
            orphans: FxHashMap::default(),
            suspects: Vec::new(),
            suspect_ids: Vec::new(),
            seq_busy: None,
            seq_queue: VecDeque::new(),
            setting_up: 0,
            setup_limit: None,
            lingering: Vec::new(),
            linger_at: None,
        };
        if let Some(r) = core.config.adaptive.clone() {
            core.set_threshold(r.thresholds[0]);
        }
        core.setup_limit = core
            .config
            .setup_target
            .map(|t| crate::cm::overload::SetupLimit::new(t, SETUP_FLOOR, core.config.max_setups));
        Ok(core)
    }

    /// Its configuration (T as currently tuned).
    pub fn config(&self) -> &CmConfig {
        &self.config
    }

    /// Calls between their `add` and their establishment or failure.
    pub fn setting_up(&self) -> usize {
        self.setting_up
    }

    /// Calls that may be in setup at once now: `max_setups`, or less where the adaptive
    /// bound has cut it.
    pub fn setup_bound(&self) -> usize {
        self.setup_limit
            .as_ref()
            .map_or(self.config.max_setups, |l| {
                l.limit().min(self.config.max_setups)
            })
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
            .map(|(&(s, p), c)| (self.switches[s].to_string(), p, c.len()))
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
            .map(|(&(s, p), c)| (self.switches[s].to_string(), p, c.nv.clone()))
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
        Self::switch_in(
            &mut self.switch_index,
            &mut self.switches,
            &mut self.aggregators,
            &self.config,
            name,
        )
    }

    /// [`CmCore::switch`] on the fields it needs, so a caller may hold a call meanwhile.
    fn switch_in(
        switch_index: &mut FxHashMap<String, usize>,
        switches: &mut Vec<std::sync::Arc<str>>,
        aggregators: &mut Vec<MessageAggregator>,
        config: &CmConfig,
        name: &str,
    ) -> usize {
        if let Some(&i) = switch_index.get(name) {
            return i;
        }
        let i = switches.len();
        switches.push(name.into());
        switch_index.insert(name.to_string(), i);
        let mut a = MessageAggregator::new(config.threshold, config.flush_timeout);
        a.set_rides(config.releases_ride);
        aggregators.push(a);
        i
    }

    fn set_threshold(&mut self, t: u32) {
        self.config.threshold = t.max(1);
        for a in &mut self.aggregators {
            a.tune(self.config.threshold, self.config.flush_timeout);
        }
        // The flush time-out may have changed every deadline.
        self.flushes = self
            .aggregators
            .iter()
            .enumerate()
            .filter_map(|(sw, a)| a.deadline().map(|d| Reverse((d, sw))))
            .collect();
    }

    /// Notes aggregator `sw`'s deadline after a change to its queue.
    pub(super) fn note_flush(&mut self, sw: usize) {
        if let Some(d) = self.aggregators[sw].deadline() {
            self.flushes.push(Reverse((d, sw)));
        }
    }

    /// Whether the entry `(d, sw)` of the flush heap is still its aggregator's deadline.
    fn flush_valid(&self, d: Instant, sw: usize) -> bool {
        self.aggregators[sw].deadline() == Some(d)
    }

    /// The switches whose aggregator's flush time-out has expired by `now`, in index
    /// order (as a scan of every aggregator would find them).
    pub(super) fn flushes_due(&mut self, now: Instant) -> Vec<usize> {
        let mut due = Vec::new();
        while let Some(Reverse((d, sw))) = self.flushes.peek().copied() {
            if d > now {
                break;
            }
            self.flushes.pop();
            if self.flush_valid(d, sw) {
                due.push(sw);
            }
        }
        due.sort_unstable();
        due.dedup();
        // Still their deadlines until their batches are taken.
        for &sw in &due {
            self.note_flush(sw);
        }
        due
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
        // Names resolved in place: no copy of a name per hop and slot.
        let (index, switches, aggregators, config) = (
            &mut self.switch_index,
            &mut self.switches,
            &mut self.aggregators,
            &self.config,
        );
        for h in call.hop_sw.len()..nh {
            let sw = Self::switch_in(
                index,
                switches,
                aggregators,
                config,
                &call.tree.hop(h).switch,
            );
            call.hop_sw.push(sw);
        }
        for j in call.slot_sw.len()..ns {
            // A branch's slot is on its hop's switch (the tree builds it so): no second
            // look-up of the name.
            let slot = call.tree.slot(j);
            let sw = match slot.hop {
                Some(h) if call.tree.hop(h).switch == slot.switch => call.hop_sw[h],
                _ => Self::switch_in(index, switches, aggregators, config, &slot.switch),
            };
            call.slot_sw.push(sw);
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
        if let Some(c) = call.and_then(|c| self.calls.get_mut(&c)) {
            c.sent += 1;
        }
        if matches!(
            purpose,
            Purpose::Slot(_) | Purpose::Fill | Purpose::Unreserve
        ) {
            self.stats.identifier_commands += 1;
        }
        let was_empty = self.aggregators[switch].is_empty();
        self.aggregators[switch].push(now, req, command.clone());
        if was_empty {
            self.note_flush(switch);
        }
        if self.aggregators[switch].ready() {
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
                queued: now,
                sent: None,
            },
        );
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
        self.note_flush(sw);
        if self.aggregators[sw].ready() {
            // More full messages wait for this switch.
            self.ready.push_back(sw);
        }
        let deadline = now.checked_add(self.config.command_timeout);
        for (req, _) in &batch {
            if let Some(o) = self.outstanding.get_mut(req) {
                self.stats.queue_wait_ps += now.saturating_duration_since(o.queued).as_picos();
                o.sent = Some(now);
                o.deadline = deadline;
                if let Some(d) = deadline {
                    match self.timeouts.back() {
                        Some(&(last, _)) if last > d => {
                            let at = self.timeouts.partition_point(|&(t, _)| t <= d);
                            self.timeouts.insert(at, (d, *req));
                        }
                        _ => self.timeouts.push_back((d, *req)),
                    }
                }
            }
        }
        self.stats.messages += 1;
        self.stats.commands += batch.len() as u64;
        Some(Transmit {
            switch: self.switches[sw].clone(),
            switch_index: sw,
            commands: batch,
        })
    }

    /// The next call of [`CmCore::handle_timeout`] is due at this time.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        while let Some(Reverse((d, sw))) = self.flushes.peek().copied() {
            if self.flush_valid(d, sw) {
                break;
            }
            self.flushes.pop();
        }
        let flush = self.flushes.peek().map(|Reverse((d, _))| *d);
        // Drop stale heads: answered commands, or ones re-armed with a later deadline.
        while let Some(&(d, req)) = self.timeouts.front() {
            match self.outstanding.get(&req) {
                Some(o) if o.deadline == Some(d) => break,
                _ => {
                    self.timeouts.pop_front();
                }
            }
        }
        let cmd = self.timeouts.front().map(|&(d, _)| d);
        let linger = if self.lingering.is_empty() {
            None
        } else {
            self.linger_at
        };
        [flush, cmd, linger].into_iter().flatten().min()
    }

    /// The outcome of calls, in order.
    pub fn poll_event(&mut self) -> Option<CallEvent> {
        self.events.pop_front()
    }

    /// Give-backs waiting to be re-sent because no switch answered them.
    pub fn lingering(&self) -> usize {
        self.lingering.len()
    }

    /// Adds a turn of the live task's to [`CmStats::busy_ps`] (counting only).
    pub fn note_busy(&mut self, turn: Duration) {
        self.stats.busy_ps += turn.as_picos();
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
