//! The model kind `access`: one traffic source, one access-control mechanism and one
//! access link, the model of paper 003's Figure 5 ("Source Model").
//!
//! A source generates cells; the mechanism (Leaky Bucket, Virtual Clock, RDMA, or none)
//! lets each pass, holds it, or drops it; passed cells queue for the access link
//! (150 Mb/s in the paper) and enter the network when their transmission starts. With
//! RDMA the source holds its cells until its green band (RDMA++ by default: "RDMA delay
//! is exclusively due to waiting time for the band to the destination"), and the core
//! models the link itself. The paper's metrics (§3, "Delay and Jitter at Network Access
//! for Real Time Traffic"):
//!
//! - `mean_delay`: access delay, "the difference between the time when the cell enters the
//!   network (source transmits cell) and the time when the cell was generated";
//! - `max_jitter`, `mean_jitter`: jitter, "the difference between the network access
//!   delay of two consecutive cells", read as the *increase* d(k) − d(k−1) of the delay
//!   from one delivered cell to the next, a decrease counting as zero jitter:
//!   `max_jitter` is the largest increase, `mean_jitter` the mean of max(0, d(k) −
//!   d(k−1)) over all consecutive pairs. Why this reading: the paper says "the maximal
//!   jitter for Leaky Bucket corresponds to the inter-credit arrival time" and reports
//!   0.0138 s and 0.0119 s, which are 1/(1.2·60) and 1/(1.4·60) s; a delay can grow by at
//!   most one credit interval from one cell to the next, whereas in absolute value the
//!   first cell of a talkspurt after a long silence differs from the last delayed one by
//!   up to seconds. Likewise RDMA's largest jitter is "when the second cell arrives right
//!   when the band closes and is forced to wait until the next active band": an increase;
//! - `max_abs_jitter`, `mean_abs_jitter`: the same differences in absolute value, for
//!   comparison;
//! - `mean_occupancy`: the time-average number of cells waiting in the buffer in front of
//!   the network (held by the mechanism or queued for the link), computed by Little's law
//!   as the summed waiting time of the observed cells over the observed period;
//! - `mean_occupancy_events`: the event average of the same buffer: its content just
//!   after each event that changes it (a cell entering it, counting itself; a cell
//!   leaving it for the network), averaged over those events. The paper does not say how
//!   it averaged its "mean occupation in the infinite buffer"; a simulator that samples
//!   its queue at its events measures this, and it is what the paper's RDMA voice 0.5
//!   cell is (a lone cell waiting for its band: 1 after it arrives, 0 after it leaves),
//!   where the time average is 60 cells/s × 62 µs ≈ 0.004. A cell that leaves the instant
//!   it arrives (passed and the link free) never is in the buffer and adds no event.
//!   Because each waiting cell adds an arrival and a departure, this is the mean number a
//!   waiting cell finds on arrival (itself excluded) plus one half; it weighs busy periods
//!   by their traffic;
//! - `loss_probability`: cells dropped by the mechanism over cells generated;
//! - `delay_p99`: the 99th percentile of the access delay.
//!
//! The link is a deterministic FIFO server, so it needs no events: a cell released at
//! time `r` starts at `max(r, link free)` and occupies the link one cell time. The model's
//! events are the source's arrivals (a FIFO lane) and the mechanism's wake-ups (one
//! cancellable timer, re-armed from `poll_timeout` after every input, the call order the
//! cores document).

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, Ctx, InPort, Simulation};
use atmlab_sim::event_set::{EventId, LaneId};
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication};
use atmlab_sim::rng::{RngFactory, SimRng};
use atmlab_sim::scenario::{Params, RunConfig, show};
use atmlab_sim::stats::{Histogram, Ratio, Tally};

use crate::access::{
    Band, BandKind, Decision, LeakyBucket, LeakyBucketMode, Rdma, RdmaConfig, RdmaMode,
    VirtualClock, VirtualClockPenalty,
};
use crate::queue::{ArrivalSpec, STREAM_ARRIVAL, parse_source};
use crate::source::TrafficSource;

/// Which mechanism regulates access.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MechanismSpec {
    /// No regulation: cells go straight to the link.
    None,
    /// The paper's Leaky Bucket as a shaper.
    LeakyBucket {
        /// Credits per second, overdimensioning already applied.
        rate: f64,
        /// Credit pool size B.
        pool: u32,
        /// Buffer in cells (`None`: infinite, as in the paper's Figure 5).
        buffer: Option<usize>,
    },
    /// Virtual Clock.
    VirtualClock {
        /// Average rate AR, overdimensioning already applied.
        rate: f64,
        /// Average interval AI.
        interval: Duration,
        /// Penalty.
        penalty: VirtualClockPenalty,
    },
    /// RDMA: one contention band per cycle for the source's tree.
    Rdma {
        /// The cycle length (125 µs in the paper).
        cycle: Duration,
        /// The band's opening within the cycle.
        start: Duration,
        /// The band length.
        band: Duration,
        /// The collision mode.
        mode: RdmaMode,
        /// Buffer in cells (`None`: infinite).
        buffer: Option<usize>,
    },
}

enum Mechanism {
    None,
    Lb(LeakyBucket),
    Vc(VirtualClock),
    Rdma(Box<Rdma>),
}

impl Mechanism {
    fn build(spec: &MechanismSpec, cell_time: Duration) -> Result<Self, crate::ModelsError> {
        Ok(match *spec {
            MechanismSpec::None => Mechanism::None,
            MechanismSpec::LeakyBucket { rate, pool, buffer } => Mechanism::Lb(LeakyBucket::new(
                rate,
                pool,
                LeakyBucketMode::Shaper { buffer },
            )?),
            MechanismSpec::VirtualClock {
                rate,
                interval,
                penalty,
            } => Mechanism::Vc(VirtualClock::new(rate, interval, penalty)?),
            MechanismSpec::Rdma {
                cycle,
                start,
                band,
                mode,
                buffer,
            } => Mechanism::Rdma(Box::new(Rdma::new(RdmaConfig {
                cycle,
                bands: vec![Band {
                    tree: 0,
                    start,
                    len: band,
                    kind: BandKind::Contention,
                }],
                mode,
                cell_time,
                buffer,
            })?)),
        })
    }
    fn handle_cell(&mut self, now: Instant, id: u64) -> Decision {
        match self {
            Mechanism::None => Decision::PassNow,
            Mechanism::Lb(m) => m.handle_cell(now, id),
            Mechanism::Vc(m) => m.handle_cell(now, id),
            Mechanism::Rdma(m) => m.handle_cell(now, id, 0, 0),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            Mechanism::None => {}
            Mechanism::Lb(m) => m.handle_timeout(now),
            Mechanism::Vc(m) => m.handle_timeout(now),
            Mechanism::Rdma(m) => m.handle_timeout(now),
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Mechanism::None => None,
            Mechanism::Lb(m) => m.poll_timeout(),
            Mechanism::Vc(m) => m.poll_timeout(),
            Mechanism::Rdma(m) => m.poll_timeout(),
        }
    }
    fn poll_transmit(&mut self) -> Option<(u64, Instant)> {
        match self {
            Mechanism::None => None,
            Mechanism::Lb(m) => m.poll_transmit(),
            Mechanism::Vc(m) => m.poll_transmit(),
            Mechanism::Rdma(m) => m.poll_transmit(),
        }
    }
    /// Held cells the mechanism discarded later (RDMA+ at a band end).
    fn poll_discard(&mut self) -> Option<(u64, Instant)> {
        match self {
            Mechanism::Rdma(m) => m.poll_discard(),
            _ => None,
        }
    }
}

/// The model's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccessConfig {
    /// The source.
    pub source: ArrivalSpec,
    /// The mechanism.
    pub mechanism: MechanismSpec,
    /// The access link's cell time (53 octets at the link rate).
    pub cell_time: Duration,
}

/// Messages of the station (to itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMsg {
    /// `units` cells are generated.
    Generate(u32),
    /// The mechanism asked to be woken.
    Wake,
}

const PORT: InPort = InPort(0);

/// Source, mechanism and link, with the paper's metrics.
pub struct AccessStation {
    source: Box<dyn TrafficSource + Send>,
    rng: SimRng,
    lane: LaneId,
    mechanism: Mechanism,
    cell_time: Duration,
    /// Generation times of the cells the mechanism holds, in order (both mechanisms
    /// release in FIFO order).
    held: VecDeque<(u64, Instant)>,
    next_id: u64,
    link_free: Instant,
    wake: Option<(Instant, EventId)>,
    observe_from: Instant,
    /// Start of the period the occupancy average covers (the warm-up end or batch start).
    batch_from: Instant,
    delay: Tally,
    delay_hist: Histogram,
    jitter: Tally,
    /// The largest delay increase d(k) − d(k−1) (may be negative).
    max_increase: f64,
    abs_jitter: Tally,
    last_delay: Option<f64>,
    waiting_secs: f64,
    loss: Ratio,
    /// Transmission starts of the cells released to the link that have not yet started,
    /// in order (the link is FIFO); they leave the buffer then.
    link_starts: VecDeque<Instant>,
    /// Cells in the buffer (held or waiting for the link) as of the last event applied.
    present: u64,
    /// The buffer's content just after each arrival into it and each departure from it.
    occupancy_events: Tally,
}

impl AccessStation {
    fn new(cfg: &AccessConfig, rngs: &RngFactory, lane: LaneId) -> Result<Self, SimError> {
        let model_err = |e: crate::ModelsError| SimError::Model {
            model: "access".into(),
            message: e.to_string(),
        };
        Ok(AccessStation {
            source: cfg.source.build().map_err(model_err)?,
            rng: rngs.stream(STREAM_ARRIVAL),
            lane,
            mechanism: Mechanism::build(&cfg.mechanism, cfg.cell_time).map_err(model_err)?,
            cell_time: cfg.cell_time,
            held: VecDeque::new(),
            next_id: 0,
            link_free: Instant::ZERO,
            wake: None,
            observe_from: Instant::ZERO,
            batch_from: Instant::ZERO,
            delay: Tally::new(),
            delay_hist: Histogram::new(),
            jitter: Tally::new(),
            max_increase: f64::NEG_INFINITY,
            abs_jitter: Tally::new(),
            last_delay: None,
            waiting_secs: 0.0,
            loss: Ratio::new(),
            link_starts: VecDeque::new(),
            present: 0,
            occupancy_events: Tally::new(),
        })
    }

    fn schedule_next(&mut self, ctx: &mut Ctx<'_, AccessMsg>) {
        if let Some(a) = self.source.next_arrival(&mut self.rng) {
            let me = ctx.me().port(PORT.0);
            let _ = ctx.send_in_lane(
                self.lane,
                a.at.max(ctx.now()),
                me,
                AccessMsg::Generate(a.units.max(1)),
            );
        }
    }

    /// A cell generated at `generated` is released by the mechanism at `ready`: it takes
    /// the link when the link is free.
    /// `in_buffer`: the cell entered the buffer (it leaves it at its start).
    fn send_to_link(&mut self, generated: Instant, ready: Instant, in_buffer: bool) {
        let start = ready.max(self.link_free).max(generated);
        self.link_free = start + self.cell_time;
        if in_buffer {
            self.link_starts.push_back(start);
        }
        if generated < self.observe_from {
            return;
        }
        let d = start.saturating_duration_since(generated);
        let secs = d.as_secs_f64();
        self.delay.record(secs);
        self.delay_hist.record_duration(d);
        self.waiting_secs += secs;
        if let Some(prev) = self.last_delay {
            // The increase of the delay (see the module doc); the jitter tally keeps the
            // signed difference only for its maximum, so record the two views apart.
            self.jitter.record((secs - prev).max(0.0));
            self.max_increase = self.max_increase.max(secs - prev);
            self.abs_jitter.record((secs - prev).abs());
        }
        self.last_delay = Some(secs);
    }

    /// Applies the departures (transmission starts) due by `now`, in order, recording the
    /// buffer's content after each; the arrivals before them have all been applied (the
    /// model's events come in time order and a start is never before its cell's arrival).
    fn depart_until(&mut self, now: Instant) {
        while let Some(&s) = self.link_starts.front() {
            if s > now {
                break;
            }
            self.link_starts.pop_front();
            self.present = self.present.saturating_sub(1);
            if s >= self.observe_from {
                self.occupancy_events.record(self.present as f64);
            }
        }
    }

    /// A cell entered the buffer at `now`.
    fn enter(&mut self, now: Instant) {
        self.present += 1;
        if now >= self.observe_from {
            self.occupancy_events.record(self.present as f64);
        }
    }

    /// The generation time of held cell `id` (the mechanisms release and discard in
    /// FIFO order, so it is the oldest held one), removing it.
    fn take_held(&mut self, id: u64) -> Option<Instant> {
        match self.held.front() {
            Some(&(hid, g)) if hid == id => {
                self.held.pop_front();
                Some(g)
            }
            _ => {
                let pos = self.held.iter().position(|h| h.0 == id)?;
                self.held.remove(pos).map(|h| h.1)
            }
        }
    }

    fn drain(&mut self, ctx: &mut Ctx<'_, AccessMsg>) {
        while let Some((id, ready)) = self.mechanism.poll_transmit() {
            let generated = self.take_held(id).unwrap_or(ready);
            if generated >= self.observe_from {
                self.loss.record(false);
            }
            self.send_to_link(generated, ready, true);
        }
        while let Some((id, _)) = self.mechanism.poll_discard() {
            let taken = self.take_held(id);
            if taken.is_some() {
                // Discarded from the buffer: it leaves, but not for the network.
                self.present = self.present.saturating_sub(1);
            }
            if taken.is_some_and(|g| g >= self.observe_from) {
                self.loss.record(true);
            }
        }
        // Re-arm the single wake-up timer where the mechanism wants it.
        let want = self.mechanism.poll_timeout();
        if self.wake.map(|(t, _)| t) != want {
            if let Some((_, id)) = self.wake.take() {
                ctx.cancel(id);
            }
            if let Some(t) = want {
                let at = t.max(ctx.now());
                if let Ok(id) = ctx.send_at(at, ctx.me().port(PORT.0), AccessMsg::Wake) {
                    self.wake = Some((t, id));
                }
            }
        }
    }

    /// Starts the next batch of a batch-means run: statistics restart at `now`, the period
    /// of the occupancy average too, but every cell stays observed.
    fn start_batch(&mut self, now: Instant) {
        let keep = self.observe_from;
        self.reset_stats(now);
        self.observe_from = keep;
    }

    fn metrics(&self, now: Instant) -> Vec<(&'static str, f64)> {
        let observed = now.saturating_duration_since(self.batch_from).as_secs_f64();
        vec![
            ("mean_delay", self.delay.mean()),
            (
                "max_jitter",
                if self.jitter.is_empty() {
                    f64::NAN
                } else {
                    self.max_increase
                },
            ),
            ("mean_jitter", self.jitter.mean()),
            (
                "max_abs_jitter",
                if self.abs_jitter.is_empty() {
                    f64::NAN
                } else {
                    self.abs_jitter.max()
                },
            ),
            ("mean_abs_jitter", self.abs_jitter.mean()),
            (
                "mean_occupancy",
                if observed > 0.0 {
                    self.waiting_secs / observed
                } else {
                    f64::NAN
                },
            ),
            ("mean_occupancy_events", self.occupancy_events.mean()),
            ("loss_probability", self.loss.value()),
            ("delay_p99", self.delay_hist.quantile(0.99)),
        ]
    }
}

impl Component<AccessMsg> for AccessStation {
    fn init(&mut self, ctx: &mut Ctx<'_, AccessMsg>) {
        self.schedule_next(ctx);
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, AccessMsg>, _port: InPort, msg: AccessMsg) {
        let now = ctx.now();
        self.depart_until(now);
        match msg {
            AccessMsg::Generate(units) => {
                for _ in 0..units {
                    let id = self.next_id;
                    self.next_id += 1;
                    let observed = now >= self.observe_from;
                    match self.mechanism.handle_cell(now, id) {
                        Decision::PassNow | Decision::Tagged => {
                            if observed {
                                self.loss.record(false);
                            }
                            // A cell that finds the link free leaves as it comes: it
                            // never is in the buffer.
                            let waits = self.link_free > now;
                            if waits {
                                self.enter(now);
                            }
                            self.send_to_link(now, now, waits);
                        }
                        Decision::Queued => {
                            // Counted when it leaves or is discarded.
                            self.enter(now);
                            self.held.push_back((id, now));
                        }
                        Decision::Dropped => {
                            if observed {
                                self.loss.record(true);
                            }
                        }
                    }
                }
                self.schedule_next(ctx);
            }
            AccessMsg::Wake => {
                self.wake = None;
                self.mechanism.handle_timeout(now);
            }
        }
        self.drain(ctx);
    }

    fn reset_stats(&mut self, now: Instant) {
        self.observe_from = now;
        self.batch_from = now;
        self.delay.reset();
        self.delay_hist.reset();
        self.jitter.reset();
        self.abs_jitter.reset();
        self.max_increase = f64::NEG_INFINITY;
        self.last_delay = None;
        self.waiting_secs = 0.0;
        self.loss.reset();
        self.occupancy_events.reset();
    }
}

impl Prepared for AccessConfig {
    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        let rngs = RngFactory::new(rep.seed, rep.replication);
        // The model's only block, held by value (see `atmlab_sim::component`, "Components
        // known at build time").
        let mut sim: Simulation<_, AccessStation> = Simulation::typed();
        let lane = sim.new_lane();
        let id = sim.add_typed(AccessStation::new(self, &rngs, lane)?);
        crate::batched::run_by_duration::<_, _, AccessStation>(&mut sim, id, rep, "access")
    }
}

/// The RDMA collision mode of a mechanism table (`mode = "-" | "+" | "++"`, RDMA++ when
/// absent), shared with the backbone model.
pub(crate) fn rdma_mode(m: &Params<'_>) -> Result<RdmaMode, SimError> {
    let expected = "expected \"-\", \"+\" or \"++\"";
    match m.raw("mode") {
        None => Ok(RdmaMode::CarryOver),
        Some(toml::Value::String(s)) => RdmaMode::from_sign(s.trim())
            .ok_or_else(|| m.error("mode", format!("{expected}, got {s:?}"))),
        Some(v) => Err(m.error("mode", format!("{expected}, got {}", show(v)))),
    }
}

/// The `access` model kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccessKind;

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "source.kind",
        doc: "as the queue model's arrival: poisson | cbr | onoff {peak, mean, burst} | mmpp2 | bursty | video (paper 003's AR(1) by default); units are cells",
    },
    ParamDoc {
        key: "mechanism.kind",
        doc: "none | leaky_bucket {rate, pool, c = 1, buffer = \"inf\"} | virtual_clock {rate, interval, c = 1, max_delay, penalty = \"hold\" (held at most max_delay, never dropped) | \"drop_beyond\" (dropped if the hold would pass max_delay) | \"drop\" (no max_delay)} | rdma {band, cycle = \"125 us\", start = \"0 s\", mode = \"++\" (or \"+\", \"-\"), buffer = \"inf\"}; c multiplies the rate (the paper's overdimensioning factor; LB and VC only)",
    },
    ParamDoc {
        key: "link",
        doc: "access link rate, default \"150 Mb/s\"",
    },
];

const METRICS: &[&str] = &[
    "mean_delay",
    "max_jitter",
    "mean_jitter",
    "max_abs_jitter",
    "mean_abs_jitter",
    "mean_occupancy",
    "mean_occupancy_events",
    "loss_probability",
    "delay_p99",
];

/// A buffer size: `"inf"` (the default) or a number of cells.
pub(crate) fn parse_buffer(m: &Params<'_>) -> Result<Option<usize>, SimError> {
    match m.raw("buffer") {
        None => Ok(None),
        Some(toml::Value::String(s)) if s.trim() == "inf" => Ok(None),
        Some(toml::Value::Integer(n)) if *n >= 0 => Ok(Some(*n as usize)),
        Some(v) => Err(m.error(
            "buffer",
            format!("expected \"inf\" or a number of cells, got {}", show(v)),
        )),
    }
}

fn parse_mechanism(p: &Params<'_>, cell_time: Duration) -> Result<MechanismSpec, SimError> {
    let m = p.table("mechanism")?;
    let kind = m.string("kind")?;
    let c = m.number_or("c", 1.0)?;
    if !(c.is_finite() && c >= 1.0) {
        return Err(m.error(
            "c",
            format!("the overdimensioning factor must be at least 1, got {c}"),
        ));
    }
    let spec = match kind {
        "none" => MechanismSpec::None,
        "leaky_bucket" => {
            let pool = m.number("pool")?;
            if !(pool >= 1.0 && pool <= f64::from(u32::MAX) && pool.fract() == 0.0) {
                return Err(m.error(
                    "pool",
                    format!("expected a whole number of credits, at least 1, got {pool}"),
                ));
            }
            let buffer = parse_buffer(&m)?;
            MechanismSpec::LeakyBucket {
                rate: c * m.positive_rate("rate")?,
                pool: pool as u32,
                buffer,
            }
        }
        "virtual_clock" => {
            let penalty = match (m.raw("penalty"), m.has("max_delay")) {
                (Some(toml::Value::String(s)), false) if s == "drop" => VirtualClockPenalty::Drop,
                (None, true) => VirtualClockPenalty::Delay {
                    max: m.duration("max_delay")?,
                },
                (Some(toml::Value::String(s)), true) if s == "hold" => {
                    VirtualClockPenalty::Delay {
                        max: m.duration("max_delay")?,
                    }
                }
                (Some(toml::Value::String(s)), true) if s == "drop_beyond" => {
                    VirtualClockPenalty::DelayOrDrop {
                        max: m.duration("max_delay")?,
                    }
                }
                _ => return Err(m.error(
                    "max_delay",
                    "give max_delay (the longest a penalized cell is held; penalty = \"hold\", the default, or \"drop_beyond\") or penalty = \"drop\"",
                )),
            };
            MechanismSpec::VirtualClock {
                rate: c * m.positive_rate("rate")?,
                interval: m.duration("interval")?,
                penalty,
            }
        }
        "rdma" => {
            if m.has("c") {
                return Err(m.error(
                    "c",
                    "the overdimensioning factor applies to leaky_bucket and virtual_clock; size the RDMA band instead",
                ));
            }
            let mode = rdma_mode(&m)?;
            MechanismSpec::Rdma {
                cycle: if m.has("cycle") {
                    m.duration("cycle")?
                } else {
                    Duration::from_picos(125_000_000)
                },
                start: if m.has("start") {
                    m.duration("start")?
                } else {
                    Duration::ZERO
                },
                band: m.duration("band")?,
                mode,
                buffer: parse_buffer(&m)?,
            }
        }
        other => {
            return Err(m.error(
                "kind",
                format!(
                    "unknown mechanism {other:?}; expected none, leaky_bucket, virtual_clock or rdma"
                ),
            ));
        }
    };
    m.finish()?;
    Mechanism::build(&spec, cell_time).map_err(|e| p.error("mechanism", e.to_string()))?;
    Ok(spec)
}

/// The unit of each metric (`sim run`'s table and plot axes; `*` ends a prefix).
const METRIC_UNITS: &[(&str, &str)] = &[
    ("mean_delay", "s"),
    ("max_jitter", "s"),
    ("mean_jitter", "s"),
    ("max_abs_jitter", "s"),
    ("mean_abs_jitter", "s"),
    ("mean_occupancy", "cells"),
    ("mean_occupancy_events", "cells"),
    ("loss_probability", "ratio"),
    ("delay_p99", "s"),
];

impl ModelKind for AccessKind {
    fn name(&self) -> &'static str {
        "access"
    }
    fn summary(&self) -> &'static str {
        "one source, one access-control mechanism, one access link (paper 003, Figure 5)"
    }
    fn parameters(&self) -> &'static [ParamDoc] {
        PARAMS
    }
    fn metrics(&self) -> &'static [&'static str] {
        METRICS
    }
    fn metric_unit(&self, name: &str) -> Option<&'static str> {
        atmlab_sim::model::unit_in(METRIC_UNITS, name)
    }
    fn prepare(&self, params: &Params<'_>, run: &RunConfig) -> Result<Box<dyn Prepared>, SimError> {
        crate::batched::check_run(params, run, "access")?;
        let link = crate::batched::link_rate(params)?;
        let cell_time = Duration::from_secs_f64(424.0 / link);
        let cfg = AccessConfig {
            source: parse_source(params, "source")?,
            mechanism: parse_mechanism(params, cell_time)?,
            cell_time,
        };
        Ok(Box::new(cfg))
    }
}

impl crate::batched::Measured for AccessStation {
    fn measure(&mut self, now: Instant) -> Vec<(&'static str, f64)> {
        self.metrics(now)
    }

    fn new_batch(&mut self, now: Instant) {
        self.start_batch(now);
    }
}
