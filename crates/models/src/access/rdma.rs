//! RDMA, Route Division Multiple Access: the band scheduler of Isochronets (paper 003,
//! section 2, "Isochronets and Route Division Multiple Access (RDMA)", Figures 1-4, after
//! Florissi's thesis [3]).
//!
//! A node's output link is open to a routing tree (all routes to one destination) only
//! during that tree's *green band*, a fixed slice of a periodic cycle (125 µs in the
//! paper). One [`Rdma`] core is one such output: the access point of a source or
//! peripheral node, or an internal switch port. Bands are synchronized network-wide by
//! making every link delay a whole number of cycles (the paper's delay devices), so a
//! cell sent at cycle phase t reaches the next node still at phase t; a shell models that
//! by delaying cells between nodes by whole cycles, and every core then uses the same
//! cycle origin (`Instant::ZERO`).
//!
//! What the paper fixes, and our reading where it does not:
//!
//! * **A band admits the cells that *start* inside it.** The paper's voice band is
//!   1.9·10⁻² µs (section 3), far shorter than one cell time at 150 Mb/s (2.83 µs), yet
//!   "RDMA services at least one voice sample per cycle"; so a cell may begin its
//!   transmission at any instant the band is open and finishes at link speed, possibly
//!   after the band closes. Cells of one output go back to back. A band of length `len`
//!   therefore carries ⌈len / cell time⌉ cells per cycle at most.
//! * **Contention bands** ([`BandKind::Contention`]) are shared by every flow of their
//!   tree ("band that may be shared by all sources simultaneously"); when several cells
//!   want the link at once, they *collide* and the mode decides.
//! * **Priority bands** ([`BandKind::Priority`]) give one flow of the tree the right of
//!   way, but "priority sources do not own their bands": the tree's other flows use the
//!   band whenever the owner has no cell waiting. The owner may also use its tree's
//!   contention bands.
//! * **Collision modes** ([`RdmaMode`]; the OCR lost the minus sign of "RDMA−"):
//!   - `Discard` (RDMA−): a bufferless Isochronets switch. A cell that cannot start the
//!     instant it arrives (its band is closed, or another cell holds the link) is
//!     discarded: "only one of the colliding frames proceeds, while the others are
//!     discarded".
//!   - `BufferToBandEnd` (RDMA+): a cell arriving in an open band that finds the link
//!     busy waits, "but only up to the band duration": if it has not started when the
//!     band (with any band of its tree adjoining it) ends, it is discarded at that
//!     instant. A cell arriving outside every usable band is discarded at once.
//!   - `CarryOver` (RDMA++): cells wait across band ends and go in the next band; only a
//!     full buffer loses cells. This is also what a source or peripheral node that holds
//!     its own cells until its band does ("traffic sources or network peripheral
//!     elements are responsible for the use of a large quantity of memory"), so the
//!     access experiments of section 3 use it.
//! * Among waiting cells that may start at the same instant, an owner in its open
//!   priority band goes first; otherwise the cell that arrived first (FIFO across the
//!   node), so no flow overtakes an older cell of the same tree.
//! * Bands of one tree may not overlap each other (a priority band "will not overlap
//!   with the contention band"); bands of different trees may, and then contend for the
//!   link like any two cells.
//!
//! Sans-IO, in the style of the other access cores; see [`Rdma`] for the call order.

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use super::{AccessCounters, Decision};
use crate::ModelsError;

const MODEL: &str = "Rdma";

/// A routing tree: the routes of every node to one destination.
pub type TreeId = u16;

/// A flow (a source, or a peripheral network's aggregate) within a tree.
pub type FlowId = u32;

/// What happens to cells that cannot start the moment they arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmaMode {
    /// RDMA−: discard them.
    Discard,
    /// RDMA+: buffer them until their band ends, then discard those not yet started.
    BufferToBandEnd,
    /// RDMA++: buffer them until they are sent, carrying them over to later bands.
    CarryOver,
}

impl RdmaMode {
    /// The paper's sign: `"-"`, `"+"` or `"++"`.
    pub fn sign(self) -> &'static str {
        match self {
            RdmaMode::Discard => "-",
            RdmaMode::BufferToBandEnd => "+",
            RdmaMode::CarryOver => "++",
        }
    }

    /// Parses the paper's sign (`"-"`, `"+"`, `"++"`).
    pub fn from_sign(s: &str) -> Option<RdmaMode> {
        match s {
            "-" => Some(RdmaMode::Discard),
            "+" => Some(RdmaMode::BufferToBandEnd),
            "++" => Some(RdmaMode::CarryOver),
            _ => None,
        }
    }
}

/// Who may use a band.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BandKind {
    /// Every flow of the tree, contending.
    Contention,
    /// `owner` has the right of way; the tree's other flows may use it when `owner` has
    /// nothing waiting.
    Priority {
        /// The priority flow.
        owner: FlowId,
    },
}

/// One green band: `[start, start + len)` of every cycle, for `tree`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Band {
    /// The tree the band routes to.
    pub tree: TreeId,
    /// Offset of the band's opening from the cycle start.
    pub start: Duration,
    /// Band length (positive; `start + len` at most the cycle).
    pub len: Duration,
    /// Contention or priority.
    pub kind: BandKind,
}

/// The configuration of one RDMA output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaConfig {
    /// The cycle length (125 µs in the paper).
    pub cycle: Duration,
    /// The bands of the cycle.
    pub bands: Vec<Band>,
    /// The collision mode.
    pub mode: RdmaMode,
    /// The time one cell occupies the output link (53 octets at the link rate).
    pub cell_time: Duration,
    /// Cells that may wait (not counting the one being sent); `None`: unlimited.
    pub buffer: Option<usize>,
}

impl RdmaConfig {
    /// The paper's dimensioning (section 2, "RDMA dimensioning"): one contention band
    /// for `tree`, opening at `start`, whose share of the cycle is the share of the link
    /// the flow needs, `mean_rate_bps / link_bps` of the cycle (e.g. 75 of 150 Mb/s: half
    /// of 125 µs, 62.5 µs).
    pub fn band_for_rate(
        cycle: Duration,
        tree: TreeId,
        start: Duration,
        mean_rate_bps: f64,
        link_bps: f64,
    ) -> Result<Band, ModelsError> {
        let share = mean_rate_bps / link_bps;
        if !share.is_finite() || share <= 0.0 || share > 1.0 {
            return Err(invalid(
                "band",
                format!("rate share {mean_rate_bps} / {link_bps} b/s must lie in (0, 1]"),
            ));
        }
        let len = Duration::from_picos(((cycle.as_picos() as f64) * share).round().max(1.0) as u64);
        Ok(Band {
            tree,
            start,
            len,
            kind: BandKind::Contention,
        })
    }
}

fn invalid(param: &'static str, reason: String) -> ModelsError {
    ModelsError::InvalidParameter {
        model: MODEL,
        param,
        reason,
    }
}

/// A cell waiting for its band.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    id: u64,
    /// Arrival order across the node (FIFO tie-break between queues).
    seq: u64,
    arrived: Instant,
    /// RDMA+ only: the end of the band window it arrived in.
    deadline: Instant,
}

/// The cells of one tree that share the same rights: the tree's contention flows, or one
/// priority owner.
#[derive(Debug, Clone)]
struct Queue {
    tree: TreeId,
    owner: Option<FlowId>,
    /// Bands this queue may use unconditionally.
    own: Vec<usize>,
    /// Priority bands of other owners of the tree, usable only while that owner's queue
    /// is empty: (band, owner's queue).
    borrowed: Vec<(usize, usize)>,
    cells: VecDeque<Waiting>,
}

/// The next thing the core will do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Start sending the head of queue `q` at the instant.
    Start(Instant, usize),
    /// Discard the head of queue `q` at the instant (RDMA+ band end).
    Expire(Instant, usize),
}

impl Action {
    fn at(self) -> Instant {
        match self {
            Action::Start(t, _) | Action::Expire(t, _) => t,
        }
    }
}

/// One RDMA output (sans-IO core).
///
/// Call order for a shell:
///
/// 1. for each arriving cell, [`Rdma::handle_cell`]`(now, id, tree, flow)`; a
///    [`Decision::PassNow`] cell starts its transmission at `now`;
/// 2. when the timer armed at [`Rdma::poll_timeout`] fires, [`Rdma::handle_timeout`]`(now)`;
/// 3. after every `handle_*` call, drain [`Rdma::poll_transmit`] (cells that started,
///    with their exact start instant) and [`Rdma::poll_discard`] (waiting cells discarded
///    at a band end, RDMA+ only, with the instant) until `None`;
/// 4. re-read [`Rdma::poll_timeout`] and re-arm (or cancel) the timer.
///
/// `now` must be non-decreasing; an earlier `now` is treated as the latest seen. The core
/// models the output link itself (one cell per `cell_time`), so the start instants it
/// returns never overlap.
#[derive(Debug, Clone)]
pub struct Rdma {
    cfg: RdmaConfig,
    queues: Vec<Queue>,
    /// Arrival counter for FIFO order.
    seq: u64,
    waiting: usize,
    /// When the cell being sent finishes.
    link_free: Instant,
    last: Instant,
    released: VecDeque<(u64, Instant)>,
    discarded: VecDeque<(u64, Instant)>,
    counters: AccessCounters,
}

impl Rdma {
    /// A core for `cfg`, validated: positive cycle and cell time, at least one band,
    /// every band inside the cycle and of positive length, and no two bands of one tree
    /// overlapping.
    pub fn new(cfg: RdmaConfig) -> Result<Self, ModelsError> {
        if cfg.cycle == Duration::ZERO {
            return Err(invalid("cycle", "must be longer than zero".into()));
        }
        if cfg.cell_time == Duration::ZERO {
            return Err(invalid("cell_time", "must be longer than zero".into()));
        }
        if cfg.bands.is_empty() {
            return Err(invalid("bands", "a cycle needs at least one band".into()));
        }
        for (i, b) in cfg.bands.iter().enumerate() {
            if b.len == Duration::ZERO {
                return Err(invalid("bands", format!("band {i} has zero length")));
            }
            if b.start.as_picos().saturating_add(b.len.as_picos()) > cfg.cycle.as_picos() {
                return Err(invalid(
                    "bands",
                    format!(
                        "band {i} [{}, {} + {}) ends after the cycle of {}",
                        b.start, b.start, b.len, cfg.cycle
                    ),
                ));
            }
            for (j, c) in cfg.bands.iter().enumerate().take(i) {
                let overlap = b.start < c.start + c.len && c.start < b.start + b.len;
                if b.tree == c.tree && overlap {
                    return Err(invalid(
                        "bands",
                        format!("bands {j} and {i} of tree {} overlap", b.tree),
                    ));
                }
            }
        }
        // One contention queue per tree, one queue per priority owner.
        let mut queues: Vec<Queue> = Vec::new();
        let queue_of = |tree: TreeId, owner: Option<FlowId>, queues: &mut Vec<Queue>| {
            if let Some(i) = queues
                .iter()
                .position(|q| q.tree == tree && q.owner == owner)
            {
                return i;
            }
            queues.push(Queue {
                tree,
                owner,
                own: Vec::new(),
                borrowed: Vec::new(),
                cells: VecDeque::new(),
            });
            queues.len() - 1
        };
        for b in &cfg.bands {
            queue_of(b.tree, None, &mut queues);
            if let BandKind::Priority { owner } = b.kind {
                queue_of(b.tree, Some(owner), &mut queues);
            }
        }
        for qi in 0..queues.len() {
            let (tree, owner) = (queues[qi].tree, queues[qi].owner);
            for (bi, b) in cfg.bands.iter().enumerate() {
                if b.tree != tree {
                    continue;
                }
                match b.kind {
                    BandKind::Contention => queues[qi].own.push(bi),
                    BandKind::Priority { owner: o } if Some(o) == owner => queues[qi].own.push(bi),
                    BandKind::Priority { owner: o } => {
                        let oq = queue_of(tree, Some(o), &mut queues);
                        queues[qi].borrowed.push((bi, oq));
                    }
                }
            }
        }
        Ok(Rdma {
            cfg,
            queues,
            seq: 0,
            waiting: 0,
            link_free: Instant::ZERO,
            last: Instant::ZERO,
            released: VecDeque::new(),
            discarded: VecDeque::new(),
            counters: AccessCounters::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RdmaConfig {
        &self.cfg
    }

    /// Cells waiting (not counting released cells not yet polled).
    pub fn occupancy(&self) -> usize {
        self.waiting
    }

    /// What the core has done so far.
    pub fn counters(&self) -> AccessCounters {
        self.counters
    }

    /// Whether band `b` is open at `t` (start included, end excluded).
    pub fn band_open(&self, b: usize, t: Instant) -> bool {
        self.cfg
            .bands
            .get(b)
            .is_some_and(|band| self.open_until(band, t).is_some())
    }

    /// Whether a cell of `tree` from `flow` could start at `t` as far as the bands go
    /// (ignoring the link and other cells): a contention band of the tree, or a priority
    /// band of the tree, is open.
    pub fn any_band_open(&self, tree: TreeId, t: Instant) -> bool {
        self.cfg
            .bands
            .iter()
            .any(|b| b.tree == tree && self.open_until(b, t).is_some())
    }

    /// A cell `cell_id` of routing tree `tree`, from `flow`, arrives at `now`.
    ///
    /// A cell for a tree that has no band here can never be sent: it is dropped.
    pub fn handle_cell(
        &mut self,
        now: Instant,
        cell_id: u64,
        tree: TreeId,
        flow: FlowId,
    ) -> Decision {
        let now = self.clock(now);
        // Everything due strictly before this arrival happens first; at `now` itself the
        // cells already waiting go before the newcomer (FIFO).
        self.advance(now, false);
        let q = self
            .queues
            .iter()
            .position(|q| q.tree == tree && q.owner == Some(flow))
            .or_else(|| {
                self.queues
                    .iter()
                    .position(|q| q.tree == tree && q.owner.is_none())
            });
        let Some(q) = q else {
            self.counters.dropped += 1;
            return Decision::Dropped;
        };
        let deadline = match self.cfg.mode {
            RdmaMode::Discard => {
                let free = self.link_free <= now && self.waiting == 0;
                if free && self.usable_until(q, now).is_some() {
                    self.link_free = now.saturating_add(self.cfg.cell_time);
                    self.counters.passed += 1;
                    return Decision::PassNow;
                }
                self.counters.dropped += 1;
                return Decision::Dropped;
            }
            RdmaMode::BufferToBandEnd => match self.usable_until(q, now) {
                Some(end) => end,
                None => {
                    self.counters.dropped += 1;
                    return Decision::Dropped;
                }
            },
            RdmaMode::CarryOver => Instant::MAX,
        };
        if self.cfg.buffer.is_some_and(|k| self.waiting >= k) {
            self.counters.dropped += 1;
            return Decision::Dropped;
        }
        let seq = self.seq;
        self.queues[q].cells.push_back(Waiting {
            id: cell_id,
            seq,
            arrived: now,
            deadline,
        });
        self.seq += 1;
        self.waiting += 1;
        self.advance(now, true);
        if self.queues[q].cells.back().is_some_and(|c| c.seq == seq) {
            return Decision::Queued;
        }
        // Started at once: it leaves now, not through poll_transmit.
        if let Some(pos) = self.released.iter().rposition(|&r| r == (cell_id, now)) {
            let _ = self.released.remove(pos);
        }
        self.counters.delayed -= 1;
        self.counters.passed += 1;
        Decision::PassNow
    }

    /// When the core next needs [`Rdma::handle_timeout`]: the next start or band-end
    /// discard of a waiting cell; `None` if nothing waits.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // An action at the end of time is a queue that cannot be served until another
        // input changes the state: no timer for it.
        self.next_action()
            .map(Action::at)
            .filter(|&t| t != Instant::MAX)
    }

    /// The timer fired: start and discard what is due by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        self.advance(now, true);
    }

    /// The next cell that started from the buffer: its identifier and start instant.
    pub fn poll_transmit(&mut self) -> Option<(u64, Instant)> {
        self.released.pop_front()
    }

    /// The next waiting cell discarded at the end of its band (RDMA+), with the instant.
    pub fn poll_discard(&mut self) -> Option<(u64, Instant)> {
        self.discarded.pop_front()
    }

    fn clock(&mut self, now: Instant) -> Instant {
        let now = now.max(self.last);
        self.last = now;
        now
    }

    /// If `band` is open at `t`, the instant it closes.
    fn open_until(&self, band: &Band, t: Instant) -> Option<Instant> {
        let phase = t.as_picos() % self.cfg.cycle.as_picos();
        let (s, e) = (
            band.start.as_picos(),
            band.start.as_picos() + band.len.as_picos(),
        );
        (s <= phase && phase < e).then(|| t.saturating_add(Duration::from_picos(e - phase)))
    }

    /// The first instant at or after `t` at which `band` is open.
    fn next_open(&self, band: &Band, t: Instant) -> Instant {
        let cycle = self.cfg.cycle.as_picos();
        let phase = t.as_picos() % cycle;
        let (s, e) = (
            band.start.as_picos(),
            band.start.as_picos() + band.len.as_picos(),
        );
        let wait = if phase < s {
            s - phase
        } else if phase < e {
            0
        } else {
            cycle - phase + s
        };
        t.saturating_add(Duration::from_picos(wait))
    }

    /// If queue `q` may start a cell at `t` as far as the bands go, until when (the end
    /// of the usable window, adjoining usable bands merged).
    fn usable_until(&self, q: usize, t: Instant) -> Option<Instant> {
        let mut end = self.window_end(q, t)?;
        // Adjoining bands (a contention band followed by a priority band, say) form one
        // window; a cycle has finitely many bands, so this stops.
        for _ in 0..self.cfg.bands.len() {
            match self.window_end(q, end) {
                Some(e) if e > end => end = e,
                _ => break,
            }
        }
        Some(end)
    }

    fn window_end(&self, q: usize, t: Instant) -> Option<Instant> {
        let queue = &self.queues[q];
        let own = queue
            .own
            .iter()
            .filter_map(|&b| self.open_until(&self.cfg.bands[b], t));
        let borrowed = queue.borrowed.iter().filter_map(|&(b, oq)| {
            if self.queues[oq].cells.is_empty() {
                self.open_until(&self.cfg.bands[b], t)
            } else {
                None
            }
        });
        own.chain(borrowed).max()
    }

    /// The first instant at or after `t` at which queue `q` may start a cell, given the
    /// other queues' current contents.
    fn next_usable(&self, q: usize, t: Instant) -> Instant {
        let queue = &self.queues[q];
        let own = queue
            .own
            .iter()
            .map(|&b| self.next_open(&self.cfg.bands[b], t));
        let borrowed = queue
            .borrowed
            .iter()
            .filter(|&&(_, oq)| self.queues[oq].cells.is_empty())
            .map(|&(b, _)| self.next_open(&self.cfg.bands[b], t));
        own.chain(borrowed).min().unwrap_or(Instant::MAX)
    }

    /// Whether queue `q` is a priority owner whose own priority band is open at `t`.
    fn has_right_of_way(&self, q: usize, t: Instant) -> bool {
        let queue = &self.queues[q];
        queue.owner.is_some()
            && queue.own.iter().any(|&b| {
                matches!(self.cfg.bands[b].kind, BandKind::Priority { .. })
                    && self.open_until(&self.cfg.bands[b], t).is_some()
            })
    }

    /// The next start or discard, under the current state.
    fn next_action(&self) -> Option<Action> {
        let mut best: Option<(Action, u64)> = None;
        for (qi, q) in self.queues.iter().enumerate() {
            let Some(head) = q.cells.front() else {
                continue;
            };
            let from = self.link_free.max(head.arrived);
            let start = self.next_usable(qi, from);
            let action = if start >= head.deadline {
                Action::Expire(head.deadline, qi)
            } else {
                Action::Start(start, qi)
            };
            // Order: earliest instant; at one instant discards (the band has ended)
            // before starts, then the priority owner, then the oldest cell.
            let key = |a: Action| match a {
                Action::Expire(t, _) => (t, 0u8),
                Action::Start(t, q) => (t, if self.has_right_of_way(q, t) { 1 } else { 2 }),
            };
            let better = match best {
                None => true,
                Some((b, bseq)) => {
                    let (ka, kb) = (key(action), key(b));
                    ka < kb || (ka == kb && head.seq < bseq)
                }
            };
            if better {
                best = Some((action, head.seq));
            }
        }
        best.map(|b| b.0)
    }

    /// Performs every action due before `until` (or at it, if `inclusive`).
    fn advance(&mut self, until: Instant, inclusive: bool) {
        while let Some(action) = self.next_action() {
            let t = action.at();
            if t > until || (!inclusive && t == until) {
                break;
            }
            match action {
                Action::Start(t, q) => {
                    if let Some(c) = self.queues[q].cells.pop_front() {
                        self.waiting -= 1;
                        self.link_free = t.saturating_add(self.cfg.cell_time);
                        self.released.push_back((c.id, t));
                        self.counters.delayed += 1;
                    }
                }
                Action::Expire(t, q) => {
                    if let Some(c) = self.queues[q].cells.pop_front() {
                        self.waiting -= 1;
                        self.discarded.push_back((c.id, t));
                        self.counters.dropped += 1;
                    }
                }
            }
            if t == Instant::MAX {
                // Nothing can ever happen after the end of time.
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn us(n: u64) -> Instant {
        Instant::from_picos(n * 1_000_000)
    }
    fn d_us(n: u64) -> Duration {
        Duration::from_picos(n * 1_000_000)
    }

    fn band(tree: TreeId, start: u64, len: u64) -> Band {
        Band {
            tree,
            start: d_us(start),
            len: d_us(len),
            kind: BandKind::Contention,
        }
    }

    fn core(bands: Vec<Band>, mode: RdmaMode, cell: u64, buffer: Option<usize>) -> Rdma {
        Rdma::new(RdmaConfig {
            cycle: d_us(100),
            bands,
            mode,
            cell_time: d_us(cell),
            buffer,
        })
        .unwrap()
    }

    /// What happened to one cell.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Fate {
        Sent(Instant),
        Lost(Instant),
    }

    /// Drives `r` over `arrivals` (time in ps, tree, flow), serving timers on time;
    /// returns each cell's fate (`None`: still waiting at the end) and the decisions.
    fn drive(
        r: &mut Rdma,
        arrivals: &[(u64, TreeId, FlowId)],
    ) -> (Vec<Option<Fate>>, Vec<Decision>) {
        let mut fate = vec![None; arrivals.len()];
        let mut decisions = Vec::new();
        let collect = |r: &mut Rdma, fate: &mut Vec<Option<Fate>>| {
            while let Some((id, t)) = r.poll_transmit() {
                fate[id as usize] = Some(Fate::Sent(t));
            }
            while let Some((id, t)) = r.poll_discard() {
                fate[id as usize] = Some(Fate::Lost(t));
            }
        };
        let fire_until = |r: &mut Rdma, t: Instant, fate: &mut Vec<Option<Fate>>| {
            while let Some(w) = r.poll_timeout().filter(|w| *w <= t) {
                r.handle_timeout(w);
                collect(r, fate);
            }
        };
        for (id, &(a, tree, flow)) in arrivals.iter().enumerate() {
            let t = Instant::from_picos(a);
            fire_until(r, t, &mut fate);
            let d = r.handle_cell(t, id as u64, tree, flow);
            collect(r, &mut fate);
            match d {
                Decision::PassNow => fate[id] = Some(Fate::Sent(t)),
                Decision::Dropped => fate[id] = Some(Fate::Lost(t)),
                Decision::Queued | Decision::Tagged => {}
            }
            decisions.push(d);
        }
        fire_until(r, Instant::from_picos(u64::MAX / 2), &mut fate);
        (fate, decisions)
    }

    #[test]
    fn voice_band_shorter_than_a_cell_admits_one_cell_per_cycle() {
        // The paper's voice band: 0.0192 µs of a 125 µs cycle, cells of 2.83 µs.
        let cfg = RdmaConfig {
            cycle: Duration::from_picos(125_000_000),
            bands: vec![Band {
                tree: 0,
                start: Duration::ZERO,
                len: Duration::from_picos(19_200),
                kind: BandKind::Contention,
            }],
            mode: RdmaMode::CarryOver,
            cell_time: Duration::from_picos(2_826_667),
            buffer: None,
        };
        let mut r = Rdma::new(cfg).unwrap();
        // Three cells in mid-cycle: one per cycle, at each band opening.
        for id in 0..3 {
            assert_eq!(r.handle_cell(us(10), id, 0, 0), Decision::Queued);
        }
        let mut starts = Vec::new();
        while let Some(t) = r.poll_timeout() {
            r.handle_timeout(t);
            starts.extend(std::iter::from_fn(|| r.poll_transmit()));
        }
        assert_eq!(starts, vec![(0, us(125)), (1, us(250)), (2, us(375))]);
        // A cell arriving inside the band starts at once.
        assert_eq!(r.handle_cell(us(500), 9, 0, 0), Decision::PassNow);
    }

    #[test]
    fn modes_differ_on_a_collision() {
        // Band [0, 10) µs, cells of 4 µs: three cells at t = 1 µs.
        let arrivals = [(1_000_000, 0, 0), (1_000_000, 0, 1), (1_000_000, 0, 2)];
        let run = |mode| {
            let mut r = core(vec![band(0, 0, 10)], mode, 4, None);
            drive(&mut r, &arrivals).0
        };
        // RDMA-: one proceeds, the others are discarded.
        assert_eq!(
            run(RdmaMode::Discard),
            vec![
                Some(Fate::Sent(us(1))),
                Some(Fate::Lost(us(1))),
                Some(Fate::Lost(us(1)))
            ]
        );
        // RDMA+: buffered up to the band end: starts at 5 and 9 µs are inside [0, 10).
        assert_eq!(
            run(RdmaMode::BufferToBandEnd),
            vec![
                Some(Fate::Sent(us(1))),
                Some(Fate::Sent(us(5))),
                Some(Fate::Sent(us(9)))
            ]
        );
        // Four cells: the fourth would start at 13 µs, after the band: discarded at 10.
        let mut r = core(vec![band(0, 0, 10)], RdmaMode::BufferToBandEnd, 4, None);
        let mut a = arrivals.to_vec();
        a.push((1_000_000, 0, 3));
        assert_eq!(drive(&mut r, &a).0[3], Some(Fate::Lost(us(10))));
        // RDMA++: carried over to the next band at 100 µs.
        let mut r = core(vec![band(0, 0, 10)], RdmaMode::CarryOver, 4, None);
        assert_eq!(drive(&mut r, &a).0[3], Some(Fate::Sent(us(100))));
    }

    #[test]
    fn outside_the_band_minus_and_plus_discard_plus_plus_waits() {
        for (mode, want) in [
            (RdmaMode::Discard, Some(Fate::Lost(us(50)))),
            (RdmaMode::BufferToBandEnd, Some(Fate::Lost(us(50)))),
            (RdmaMode::CarryOver, Some(Fate::Sent(us(100)))),
        ] {
            let mut r = core(vec![band(0, 0, 10)], mode, 4, None);
            assert_eq!(drive(&mut r, &[(50_000_000, 0, 0)]).0[0], want, "{mode:?}");
        }
    }

    #[test]
    fn two_trees_use_their_own_bands_only() {
        let mut r = core(
            vec![band(0, 0, 10), band(1, 50, 10)],
            RdmaMode::CarryOver,
            4,
            None,
        );
        let (fate, _) = drive(
            &mut r,
            &[(20_000_000, 0, 0), (20_000_000, 1, 0), (20_000_000, 7, 0)],
        );
        assert_eq!(fate[0], Some(Fate::Sent(us(100))));
        assert_eq!(fate[1], Some(Fate::Sent(us(50))));
        // Tree 7 has no band here: dropped, not held forever.
        assert_eq!(fate[2], Some(Fate::Lost(us(20))));
    }

    #[test]
    fn priority_band_right_of_way_and_borrowing() {
        // Tree 0: contention [0, 10), priority for flow 9 at [50, 60). Cells of 4 µs.
        let bands = vec![
            band(0, 0, 10),
            Band {
                kind: BandKind::Priority { owner: 9 },
                ..band(0, 50, 10)
            },
        ];
        // The owner idle: a contention cell at 40 µs borrows the priority band at 50.
        let mut r = core(bands.clone(), RdmaMode::CarryOver, 4, None);
        assert_eq!(
            drive(&mut r, &[(40_000_000, 0, 1)]).0[0],
            Some(Fate::Sent(us(50)))
        );
        // Both waiting: the owner goes first though it came later, then the other.
        let mut r = core(bands.clone(), RdmaMode::CarryOver, 4, None);
        let (fate, _) = drive(&mut r, &[(40_000_000, 0, 1), (45_000_000, 0, 9)]);
        assert_eq!(
            fate,
            vec![Some(Fate::Sent(us(54))), Some(Fate::Sent(us(50)))]
        );
        // In a contention band the owner is just one more flow: FIFO.
        let mut r = core(bands, RdmaMode::CarryOver, 4, None);
        let (fate, _) = drive(&mut r, &[(90_000_000, 0, 1), (95_000_000, 0, 9)]);
        assert_eq!(
            fate,
            vec![Some(Fate::Sent(us(100))), Some(Fate::Sent(us(104)))]
        );
    }

    #[test]
    fn buffer_limit_drops() {
        let mut r = core(vec![band(0, 0, 10)], RdmaMode::CarryOver, 4, Some(2));
        let d: Vec<_> = (0..4).map(|id| r.handle_cell(us(20), id, 0, 0)).collect();
        assert_eq!(
            d,
            [
                Decision::Queued,
                Decision::Queued,
                Decision::Dropped,
                Decision::Dropped
            ]
        );
        assert_eq!(r.occupancy(), 2);
    }

    #[test]
    fn band_for_rate_follows_the_paper() {
        let cycle = Duration::from_picos(125_000_000);
        let b = RdmaConfig::band_for_rate(cycle, 0, Duration::ZERO, 75e6, 150e6).unwrap();
        assert_eq!(b.len, Duration::from_picos(62_500_000));
        for bad in [0.0, -1.0, 200e6, f64::NAN] {
            assert!(RdmaConfig::band_for_rate(cycle, 0, Duration::ZERO, bad, 150e6).is_err());
        }
    }

    #[test]
    fn constructor_validates() {
        let ok = RdmaConfig {
            cycle: d_us(100),
            bands: vec![band(0, 0, 10)],
            mode: RdmaMode::CarryOver,
            cell_time: d_us(1),
            buffer: None,
        };
        assert!(Rdma::new(ok.clone()).is_ok());
        let bad = [
            RdmaConfig {
                cycle: Duration::ZERO,
                ..ok.clone()
            },
            RdmaConfig {
                cell_time: Duration::ZERO,
                ..ok.clone()
            },
            RdmaConfig {
                bands: vec![],
                ..ok.clone()
            },
            RdmaConfig {
                bands: vec![band(0, 95, 10)],
                ..ok.clone()
            },
            RdmaConfig {
                bands: vec![band(0, 5, 0)],
                ..ok.clone()
            },
            RdmaConfig {
                bands: vec![band(0, 0, 10), band(0, 5, 10)],
                ..ok.clone()
            },
        ];
        for cfg in bad {
            assert!(Rdma::new(cfg.clone()).is_err(), "{cfg:?}");
        }
        // Overlapping bands of different trees are allowed.
        assert!(
            Rdma::new(RdmaConfig {
                bands: vec![band(0, 0, 10), band(1, 5, 10)],
                ..ok
            })
            .is_ok()
        );
    }

    #[test]
    fn earlier_time_and_extremes_do_not_panic() {
        let mut r = core(vec![band(0, 0, 10)], RdmaMode::CarryOver, 4, None);
        r.handle_cell(us(50), 0, 0, 0);
        r.handle_cell(us(1), 1, 0, 0);
        r.handle_timeout(us(0));
        r.handle_cell(Instant::MAX, 2, 0, 0);
        r.handle_timeout(Instant::MAX);
        while r.poll_transmit().is_some() {}
        let _ = r.poll_timeout();
    }

    /// The end of the window of bands of `tree` open at `t` (adjoining bands merged), by
    /// brute force over the configuration; `None` if none is open.
    fn window_end(cfg: &RdmaConfig, tree: TreeId, t: Instant) -> Option<Instant> {
        let cycle = cfg.cycle.as_picos();
        let open_at = |x: u64| {
            let p = x % cycle;
            cfg.bands.iter().any(|b| {
                b.tree == tree
                    && b.start.as_picos() <= p
                    && p < b.start.as_picos() + b.len.as_picos()
            })
        };
        if !open_at(t.as_picos()) {
            return None;
        }
        // Step to each band boundary after t until the tree has no open band.
        let mut x = t.as_picos();
        loop {
            let p = x % cycle;
            let next = cfg
                .bands
                .iter()
                .flat_map(|b| [b.start.as_picos(), b.start.as_picos() + b.len.as_picos()])
                .map(|e| if e > p { e - p } else { cycle - p + e })
                .min()
                .unwrap_or(cycle);
            x += next;
            if !open_at(x) {
                return Some(Instant::from_picos(x));
            }
        }
    }

    fn arb_config() -> impl Strategy<Value = (RdmaConfig, usize)> {
        // Up to three trees, each with one or two bands, one of them maybe a priority
        // band of flow 0; cycle of 100 units of 1 µs, cells of 1..8 µs.
        let tree_bands = (0u64..50, 1u64..20, 0u64..30, 0u64..15, any::<bool>());
        (
            proptest::collection::vec(tree_bands, 1..4),
            1u64..8,
            prop_oneof![
                Just(RdmaMode::Discard),
                Just(RdmaMode::BufferToBandEnd),
                Just(RdmaMode::CarryOver)
            ],
        )
            .prop_map(|(trees, cell, mode)| {
                let mut bands = Vec::new();
                for (i, (s1, l1, gap, l2, prio)) in trees.into_iter().enumerate() {
                    let tree = i as TreeId;
                    bands.push(band(tree, s1, l1));
                    let s2 = s1 + l1 + gap;
                    if l2 > 0 && s2 + l2 <= 100 {
                        let mut b = band(tree, s2, l2);
                        if prio {
                            b.kind = BandKind::Priority { owner: 0 };
                        }
                        bands.push(b);
                    }
                }
                let trees = bands.iter().map(|b| b.tree).max().unwrap_or(0) as usize + 1;
                (
                    RdmaConfig {
                        cycle: d_us(100),
                        bands,
                        mode,
                        cell_time: d_us(cell),
                        buffer: None,
                    },
                    trees,
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// The acceptance properties, on random bands, modes and arrivals:
        /// RDMA never sends outside an open band for its tree, and never two cells at
        /// once; RDMA- discards instead of buffering; RDMA+ never holds a cell past the
        /// end of the band it arrived in; RDMA++ loses nothing; every cell is accounted.
        #[test]
        fn bands_and_modes_hold(
            (cfg, trees) in arb_config(),
            cells in proptest::collection::vec((0u64..60, 0usize..3, 0u32..3), 1..200),
        ) {
            let mut r = Rdma::new(cfg.clone()).unwrap();
            let mut t = 0u64;
            let arrivals: Vec<(u64, TreeId, FlowId)> = cells
                .iter()
                .map(|&(gap, tree, flow)| {
                    t += gap * 250_000;
                    (t, (tree % trees) as TreeId, flow)
                })
                .collect();
            let (fate, decisions) = drive(&mut r, &arrivals);
            let mut starts = Vec::new();
            for (i, &(a, tree, _)) in arrivals.iter().enumerate() {
                let a = Instant::from_picos(a);
                let f = fate[i];
                prop_assert!(f.is_some(), "cell {} never left", i);
                match f {
                    Some(Fate::Sent(s)) => {
                        prop_assert!(s >= a);
                        prop_assert!(r.any_band_open(tree, s), "cell {} sent at {} outside its bands", i, s);
                        starts.push(s);
                    }
                    Some(Fate::Lost(at)) => prop_assert!(at >= a),
                    None => {}
                }
                match cfg.mode {
                    RdmaMode::Discard => {
                        prop_assert!(decisions[i] != Decision::Queued, "RDMA- buffered cell {}", i);
                        if let Some(Fate::Sent(s)) = f {
                            prop_assert_eq!(s, a);
                        }
                    }
                    RdmaMode::BufferToBandEnd => {
                        if decisions[i] == Decision::Queued {
                            let end = window_end(&cfg, tree, a);
                            prop_assert!(end.is_some(), "RDMA+ buffered cell {} outside a band", i);
                            let end = end.unwrap();
                            match f {
                                Some(Fate::Sent(s)) => prop_assert!(s < end, "cell {} started at {} after its band end {}", i, s, end),
                                Some(Fate::Lost(at)) => prop_assert!(at <= end, "cell {} held past {}", i, end),
                                None => {}
                            }
                        }
                    }
                    RdmaMode::CarryOver => {
                        prop_assert!(matches!(f, Some(Fate::Sent(_))), "RDMA++ lost cell {}", i);
                    }
                }
            }
            starts.sort_unstable();
            for w in starts.windows(2) {
                prop_assert!(w[1] >= w[0] + cfg.cell_time, "two cells on the link at once: {:?}", w);
            }
            let c = r.counters();
            prop_assert_eq!(c.passed + c.delayed + c.dropped, arrivals.len() as u64);
            prop_assert_eq!(r.occupancy(), 0);
        }
    }
}
