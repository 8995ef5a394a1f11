//! The validation model `queue`: one FIFO server fed by any traffic source.
//!
//! Textbook queueing theory gives its answers exactly (M/M/1, M/D/1 by
//! Pollaczek-Khinchine, M/M/1/K), so it checks the engine, the RNG streams and the
//! statistics before any paper's model is trusted; it is also the M/M/1 benchmark against
//! SimPy (`bench/mm1/`).
//!
//! Block diagram: a [`QueueStation`] component holding a traffic source core (the
//! generator block) in front of a FIFO queue and one server. The generator lives inside
//! the station because the station draws the next arrival at the instant of each arrival,
//! as a BONeS source block feeding a queue does: one event per arrival and one per
//! departure, each in a FIFO lane of the event set (arrival instants rise, and so do the
//! departures of a single FIFO server).
//!
//! Metrics: `mean_wait` (time in queue before service), `mean_system_time` (wait plus
//! service), `mean_queue_length` (time-average number waiting, not counting the one in
//! service), `utilization` (time-average of the server busy), `loss_probability`
//! (customers refused by a full system over customers offered), `wait_p50`, `wait_p99`
//! (quantiles of the wait, 3 significant digits). Waits and system times are recorded
//! when a customer starts service and departs; all statistics restart at the warm-up, and
//! only customers arriving after it are observed (see `observe_from`). A run of `count`
//! customers ends when that many customers who arrived after the warm-up have departed.

use std::collections::VecDeque;
use std::hint::cold_path;

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, Ctx, InPort, Simulation};
use atmlab_sim::event_set::LaneId;
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication, grand_means};
use atmlab_sim::rng::{RngFactory, SimRng, exp1};
use atmlab_sim::scenario::{Params, RunConfig, RunLength, Warmup};
use atmlab_sim::stats::{DurationMean, Histogram, Mser5, Ratio, TimeWeightedCount, duration_secs};
use rand::Rng;

use crate::source::{
    Ar1Video, Ar1VideoParams, Arrival, Bursty, Cbr, Mmpp2, OnOff, Poisson, TrafficSource,
};

/// RNG stream of the arrival process.
pub const STREAM_ARRIVAL: u64 = 0;
/// RNG stream of the service times.
pub const STREAM_SERVICE: u64 = 1;

/// Service time distributions.
#[derive(Debug, Clone, PartialEq)]
pub enum Service {
    /// Exponential with this mean.
    Exponential(Duration),
    /// Always this long.
    Deterministic(Duration),
    /// One of `values`, drawn with probabilities proportional to `weights`.
    Empirical {
        /// The service times.
        values: Vec<Duration>,
        /// Cumulative weights, normalised to end at 1.
        cumulative: Vec<f64>,
    },
}

impl Service {
    /// The mean service time in seconds.
    pub fn mean_secs(&self) -> f64 {
        match self {
            Service::Exponential(m) | Service::Deterministic(m) => m.as_secs_f64(),
            Service::Empirical { values, cumulative } => {
                let mut prev = 0.0;
                values
                    .iter()
                    .zip(cumulative)
                    .map(|(v, c)| {
                        let p = c - prev;
                        prev = *c;
                        p * v.as_secs_f64()
                    })
                    .sum()
            }
        }
    }

    /// Draws one service time.
    #[inline]
    pub fn sample(&self, rng: &mut SimRng) -> Duration {
        match self {
            // `exp1` draws what `Exp::new(1.0)` draws (Exp(1) times 1/1.0), scaled
            // straight to picoseconds (see `Duration::from_picos_f64`).
            Service::Exponential(m) => Duration::from_picos_f64(exp1(rng) * m.as_picos_f64()),
            Service::Deterministic(d) => *d,
            Service::Empirical { values, cumulative } => {
                let u: f64 = rng.random();
                let i = cumulative
                    .partition_point(|c| *c <= u)
                    .min(values.len() - 1);
                values[i]
            }
        }
    }
}

/// The station's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The arrival process.
    pub arrival: ArrivalSpec,
    /// The service time distribution.
    pub service: Service,
    /// Customers the system holds (waiting plus in service); `None` is unlimited.
    pub capacity: Option<u64>,
}

/// Which traffic source feeds the queue (each unit of an arrival is one customer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArrivalSpec {
    /// Poisson at `rate` per second.
    Poisson {
        /// Arrivals per second.
        rate: f64,
    },
    /// Periodic at `rate` per second.
    Cbr {
        /// Arrivals per second.
        rate: f64,
    },
    /// The ON-OFF source of paper 003.
    OnOff {
        /// Rate while ON.
        peak: f64,
        /// Long-run rate.
        mean: f64,
        /// Mean arrivals per ON period.
        burst: f64,
    },
    /// Two-state MMPP.
    Mmpp2 {
        /// Rate in state 0.
        rate0: f64,
        /// Rate in state 1.
        rate1: f64,
        /// Switching rate 0 to 1.
        r01: f64,
        /// Switching rate 1 to 0.
        r10: f64,
    },
    /// The bursty source of paper 004.
    Bursty {
        /// Peak rate.
        peak: f64,
        /// Average rate.
        average: f64,
        /// Burst factor B.
        burst_factor: f64,
    },
    /// The AR(1) video source of paper 003 (Maglaris et al.).
    Video(Ar1VideoParams),
}

impl ArrivalSpec {
    /// Builds the source core, starting at time zero.
    pub fn build(&self) -> Result<Box<dyn TrafficSource + Send>, crate::ModelsError> {
        let t0 = Instant::ZERO;
        Ok(match *self {
            ArrivalSpec::Poisson { rate } => Box::new(Poisson::new(rate, t0)?),
            ArrivalSpec::Cbr { rate } => Box::new(Cbr::new(rate, t0)?),
            ArrivalSpec::OnOff { peak, mean, burst } => {
                Box::new(OnOff::new(peak, mean, burst, t0)?)
            }
            ArrivalSpec::Mmpp2 {
                rate0,
                rate1,
                r01,
                r10,
            } => Box::new(Mmpp2::new(rate0, rate1, r01, r10, t0)?),
            ArrivalSpec::Bursty {
                peak,
                average,
                burst_factor,
            } => Box::new(Bursty::new(peak, average, burst_factor, t0)?),
            ArrivalSpec::Video(p) => Box::new(Ar1Video::new(p, t0)?),
        })
    }
}

/// Messages of the station (to itself, through its two lanes).
///
/// Two machine words rather than an enum: a pair of integers is moved in registers, while
/// a tagged enum of this size goes through a stack copy that the profile showed stalling
/// on store-to-load forwarding on every event. [`QueueMsg::event`] gives the enum view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueMsg {
    kind: u64,
    value: u64,
}

/// What a [`QueueMsg`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueEvent {
    /// `units` customers arrive.
    Arrive(u32),
    /// The customer in service, which arrived at the given time, leaves.
    Depart(Instant),
}

impl QueueMsg {
    const ARRIVE: u64 = 0;
    const DEPART: u64 = 1;
    /// `units` customers arrive.
    pub const fn arrive(units: u32) -> Self {
        QueueMsg {
            kind: Self::ARRIVE,
            value: units as u64,
        }
    }
    /// The customer that arrived at `arrived` leaves.
    pub const fn depart(arrived: Instant) -> Self {
        QueueMsg {
            kind: Self::DEPART,
            value: arrived.as_picos(),
        }
    }
    /// The message as an enum.
    #[inline]
    pub const fn event(self) -> QueueEvent {
        if self.kind == Self::ARRIVE {
            QueueEvent::Arrive(self.value as u32)
        } else {
            QueueEvent::Depart(Instant::from_picos(self.value))
        }
    }
}

const ARRIVALS: InPort = InPort(0);
const DEPARTURES: InPort = InPort(1);

/// The station's traffic source.
///
/// Poisson arrivals, the reference load of the queueing formulas this model checks, are held
/// by value and called directly; any other source goes through the trait object. Behind the
/// `dyn` call the Poisson draw paid a call, six register saves and restores and an
/// `Option<Arrival>` returned through memory on every arrival. The draws and their order
/// are the same either way.
enum StationSource {
    Poisson(Poisson),
    Other(Box<dyn TrafficSource + Send>),
}

impl StationSource {
    fn new(spec: &ArrivalSpec) -> Result<Self, crate::ModelsError> {
        Ok(match *spec {
            ArrivalSpec::Poisson { rate } => {
                StationSource::Poisson(Poisson::new(rate, Instant::ZERO)?)
            }
            _ => StationSource::Other(spec.build()?),
        })
    }

    /// The next arrival, not before `now`. A Poisson source's never is: its next arrival
    /// follows the previous one, which is now.
    #[inline(always)]
    fn next_arrival(&mut self, rng: &mut SimRng, now: Instant) -> Option<Arrival> {
        match self {
            StationSource::Poisson(p) => p.next_arrival(rng),
            StationSource::Other(s) => s.next_arrival(rng).map(|a| Arrival {
                at: a.at.max(now),
                units: a.units,
            }),
        }
    }
}

/// The FIFO queue and its server, with the source that feeds them.
pub struct QueueStation {
    source: StationSource,
    service: Service,
    /// For exponential service, its mean in picoseconds as a float, converted once:
    /// [`Service::sample`] converts it on every draw.
    exp_mean_ps: Option<f64>,
    capacity: Option<u64>,
    rng_arrival: SimRng,
    rng_service: SimRng,
    arrival_lane: LaneId,
    departure_lane: LaneId,
    /// Arrival instants of the customers waiting (not the one in service).
    waiting: VecDeque<Instant>,
    busy: bool,
    /// Departures to count before stopping the run, counted from the last reset.
    stop_after: Option<u64>,
    /// Reset the statistics after this many wait observations (resolved MSER-5 warm-up).
    reset_after_waits: Option<u64>,
    waits_seen: u64,
    /// Whether any of MSER-5, the trace or `reset_after_waits` is on (set at `init`).
    extras: bool,
    /// When statistics were last reset: only customers arriving from then on are observed.
    /// Those present at the reset are a length-biased sample (the inspection paradox:
    /// long sojourns are more likely to straddle any instant), and counting their waits
    /// biases the means upwards.
    observe_from: Instant,
    /// Statistics. The means are kept exactly in integer picoseconds (`DurationMean`,
    /// `TimeWeightedCount`): the metrics need no variance or extremes, and the float
    /// `Tally` and `TimeWeighted` that kept those too were a large share of the M/M/1
    /// benchmark's time (docs/performance.md).
    wait: DurationMean,
    system: DurationMean,
    wait_hist: Histogram,
    /// The mean queue length is the time integral of the number waiting since
    /// `area_from`, over the time since. It is not kept as a time average updated at every
    /// change of the count (two per customer, each a multiplication and an addition into
    /// the integral), but per customer: each contributes the part of its wait after
    /// `area_from`, and those still waiting are added when it is read. For the customers
    /// that arrived after the last reset, that part is their whole wait, already summed
    /// in `wait`; `area_more` and `area_less` correct for those waiting at the reset
    /// (`area_more`: the time since the reset of those `wait` does not observe; `area_less`:
    /// the time before it of those it does). The integral comes out exactly that of the
    /// time average, and the customer's path gains nothing but one comparison.
    area_more: u128,
    area_less: u128,
    /// When the statistics were last reset (warm-up or batch): where the integral starts.
    area_from: Instant,
    busy_tw: TimeWeightedCount,
    loss: Ratio,
    departed: u64,
    mser: Option<Mser5>,
    /// Every wait in order, when asked for (tests).
    trace: Option<Vec<Duration>>,
}

impl QueueStation {
    /// A station fed by `cfg.arrival`, drawing from the streams of `rngs`.
    pub fn new(
        cfg: &QueueConfig,
        rngs: &RngFactory,
        arrival_lane: LaneId,
        departure_lane: LaneId,
    ) -> Result<Self, SimError> {
        let source = StationSource::new(&cfg.arrival).map_err(|e| SimError::Model {
            model: "queue".into(),
            message: e.to_string(),
        })?;
        Ok(QueueStation {
            source,
            service: cfg.service.clone(),
            exp_mean_ps: match cfg.service {
                Service::Exponential(m) => Some(m.as_picos_f64()),
                _ => None,
            },
            capacity: cfg.capacity,
            rng_arrival: rngs.stream(STREAM_ARRIVAL),
            rng_service: rngs.stream(STREAM_SERVICE),
            arrival_lane,
            departure_lane,
            waiting: VecDeque::new(),
            busy: false,
            stop_after: None,
            reset_after_waits: None,
            waits_seen: 0,
            extras: false,
            observe_from: Instant::ZERO,
            wait: DurationMean::new(),
            system: DurationMean::new(),
            wait_hist: Histogram::new(),
            area_more: 0,
            area_less: 0,
            area_from: Instant::ZERO,
            busy_tw: TimeWeightedCount::new(Instant::ZERO, 0),
            loss: Ratio::new(),
            departed: 0,
            mser: None,
            trace: None,
        })
    }

    /// Keep every wait, in order of service start (for exact cross-checks).
    pub fn with_trace(mut self) -> Self {
        self.trace = Some(Vec::new());
        self
    }

    /// The waits kept by [`QueueStation::with_trace`].
    pub fn trace(&self) -> &[Duration] {
        self.trace.as_deref().unwrap_or(&[])
    }

    // The three functions on every customer's path are always inlined: called out of line,
    // each paid a call and the saving and restoring of six registers on every customer
    // (cachegrind showed it, with the RNG's calls; docs/performance.md).
    #[inline(always)]
    fn schedule_next_arrival(&mut self, ctx: &mut Ctx<'_, QueueMsg>) {
        if let Some(a) = self.source.next_arrival(&mut self.rng_arrival, ctx.now()) {
            let me = ctx.me().port(ARRIVALS.0);
            // Arrivals rise in time: the FIFO lane keeps them out of the heap.
            let _ = ctx.send_in_lane(
                self.arrival_lane,
                a.at,
                me,
                QueueMsg::arrive(a.units.max(1)),
            );
        }
    }

    #[inline(always)]
    fn start_service(&mut self, ctx: &mut Ctx<'_, QueueMsg>, arrived: Instant) {
        let now = ctx.now();
        // A customer starts service after it arrived (causality): a plain difference.
        let w = now - arrived;
        self.record_wait(now, arrived, w);
        let s = match self.exp_mean_ps {
            // The same draw and arithmetic as `Service::sample`, so the same service times.
            Some(mean) => Duration::from_picos_f64(exp1(&mut self.rng_service) * mean),
            None => self.service.sample(&mut self.rng_service),
        };
        let me = ctx.me().port(DEPARTURES.0);
        // One FIFO server: departures leave in the order they are scheduled.
        let _ = ctx.send_in_lane(self.departure_lane, now + s, me, QueueMsg::depart(arrived));
    }

    #[inline(always)]
    fn record_wait(&mut self, now: Instant, arrived: Instant, w: Duration) {
        if arrived < self.area_from {
            // A customer waiting at the last reset (see `area_more`).
            cold_path();
            if arrived < self.observe_from {
                // Present at the warm-up's end: not observed, but its wait since the
                // reset is part of the queue's integral.
                self.area_more += u128::from((now - self.area_from).as_picos());
                return;
            }
            // Observed (a batch boundary): its wait before the reset is not.
            self.area_less += u128::from((self.area_from - arrived).as_picos());
        }
        self.wait.record(w);
        self.wait_hist.record_duration(w);
        // MSER-5, traces and an observation-count warm-up are off in most runs: one test.
        if self.extras {
            cold_path();
            if let Some(m) = self.mser.as_mut() {
                // By multiplication (see `duration_secs`): no division.
                m.record(duration_secs(w));
            }
            if let Some(t) = self.trace.as_mut() {
                t.push(w);
            }
            self.waits_seen += 1;
            if self.reset_after_waits == Some(self.waits_seen) {
                self.reset_stats(now);
            }
        }
    }

    /// The metrics at `now`, in the order of [`QueueKind::metrics`].
    pub fn metrics(&self, now: Instant) -> Vec<(&'static str, f64)> {
        vec![
            ("mean_wait", self.wait.mean_secs()),
            ("mean_system_time", self.system.mean_secs()),
            ("mean_queue_length", self.mean_queue_length(now)),
            ("utilization", self.busy_tw.mean(now)),
            ("loss_probability", self.loss.value()),
            ("wait_p50", self.wait_hist.quantile(0.5)),
            ("wait_p99", self.wait_hist.quantile(0.99)),
        ]
    }

    /// The time-average number waiting from the last reset to `now` (see `area_more`).
    fn mean_queue_length(&self, now: Instant) -> f64 {
        let span = now.saturating_duration_since(self.area_from).as_picos();
        if span == 0 {
            return self.queue_length() as f64;
        }
        // Those still waiting have waited since they arrived (or since the reset).
        let pending: u128 = self
            .waiting
            .iter()
            .map(|a| {
                u128::from(
                    now.saturating_duration_since((*a).max(self.area_from))
                        .as_picos(),
                )
            })
            .sum();
        // Never negative: each customer in `area_less` has at least as much in `wait`.
        let area = self.wait.sum_picos() + self.area_more + pending - self.area_less;
        area as f64 / span as f64
    }

    /// Starts the next batch of a batch-means run: the statistics restart, but unlike the
    /// warm-up reset every customer stays observed (batches are consecutive pieces of one
    /// run, so a customer straddling a boundary belongs to the batch its observation
    /// falls in).
    pub fn start_batch(&mut self, now: Instant) {
        let keep = self.observe_from;
        self.reset_stats(now);
        self.observe_from = keep;
    }

    /// One customer arrives at `now`.
    #[inline(always)]
    fn arrive_one(&mut self, ctx: &mut Ctx<'_, QueueMsg>, now: Instant) {
        let full = self.capacity.is_some_and(|c| self.in_system() >= c);
        self.loss.record(full);
        if full {
            return;
        }
        if self.busy {
            self.waiting.push_back(now);
        } else {
            self.busy = true;
            self.busy_tw.set(now, 1);
            self.start_service(ctx, now);
        }
    }

    /// Customers waiting.
    #[inline(always)]
    fn queue_length(&self) -> u64 {
        self.waiting.len() as u64
    }

    fn in_system(&self) -> u64 {
        self.waiting.len() as u64 + u64::from(self.busy)
    }
}

impl Component<QueueMsg> for QueueStation {
    fn init(&mut self, ctx: &mut Ctx<'_, QueueMsg>) {
        self.extras =
            self.mser.is_some() || self.trace.is_some() || self.reset_after_waits.is_some();
        self.schedule_next_arrival(ctx);
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, QueueMsg>, _port: InPort, msg: QueueMsg) {
        let now = ctx.now();
        match msg.event() {
            QueueEvent::Arrive(units) => {
                if units == 1 {
                    self.arrive_one(ctx, now);
                } else {
                    cold_path();
                    for _ in 0..units {
                        self.arrive_one(ctx, now);
                    }
                }
                self.schedule_next_arrival(ctx);
            }
            QueueEvent::Depart(arrived) => {
                // Departs after it arrived (causality): a plain difference.
                self.system.record(now - arrived);
                self.departed += 1;
                if let Some(next) = self.waiting.pop_front() {
                    self.start_service(ctx, next);
                } else {
                    self.busy = false;
                    self.busy_tw.set(now, 0);
                }
                if self.stop_after.is_some_and(|n| self.departed >= n) {
                    cold_path();
                    ctx.stop();
                }
            }
        }
    }

    fn reset_stats(&mut self, now: Instant) {
        self.observe_from = now;
        self.wait.reset();
        self.system.reset();
        self.wait_hist.reset();
        self.area_more = 0;
        self.area_less = 0;
        self.area_from = now;
        self.busy_tw.reset(now);
        self.loss.reset();
        self.departed = 0;
    }
}

/// Runs one replication of the station, as [`Prepared::run`] does.
pub fn run_station(
    cfg: &QueueConfig,
    rep: &Replication,
    trace: bool,
) -> Result<(RepResult, Vec<Duration>), SimError> {
    let rngs = RngFactory::new(rep.seed, rep.replication);
    // The station is the model's only block: held by value, its handler is inlined into
    // the run loop (see `atmlab_sim::component`, "Components known at build time").
    let mut sim: Simulation<QueueMsg, QueueStation> = Simulation::typed();
    let (la, ld) = (sim.new_lane(), sim.new_lane());
    let mut st = QueueStation::new(cfg, &rngs, la, ld)?;
    if trace {
        st = st.with_trace();
    }
    match rep.warmup {
        Warmup::Auto => st.mser = Some(Mser5::new()),
        Warmup::Observations(n) if n > 0 => st.reset_after_waits = Some(n),
        _ => {}
    }
    let batches = u64::from(rep.batches.max(1));
    if let RunLength::Count(n) = rep.length {
        st.stop_after = Some(n / batches);
    }
    let id = sim.add_typed(st);
    if let Warmup::Time(w) = rep.warmup
        && w > Duration::ZERO
    {
        sim.run_until(Instant::ZERO + w, None)?;
        sim.reset_stats();
    }
    let missing = || SimError::Model {
        model: "queue".into(),
        message: "station missing".into(),
    };
    let end = match rep.length {
        RunLength::Duration(d) => Instant::ZERO + d,
        // Each batch (or the one run) ends when the station stops it at its count.
        RunLength::Count(_) => Instant::MAX,
    };
    let mut batch_metrics: Vec<Vec<f64>> = Vec::new();
    let now = sim.run_in_batches(end, batches, |sim, t, last| {
        if batches > 1 {
            let st = sim.component_mut::<QueueStation>(id).ok_or_else(missing)?;
            batch_metrics.push(st.metrics(t).into_iter().map(|(_, v)| v).collect());
            if !last {
                st.start_batch(t);
            }
        }
        Ok(())
    })?;
    let st = sim.component::<QueueStation>(id).ok_or_else(missing)?;
    let truncation = st.mser.as_ref().map(|m| m.truncation() as u64);
    let mut metrics = st.metrics(now);
    grand_means(&mut metrics, &batch_metrics);
    Ok((
        RepResult {
            metrics,
            events: sim.events_processed(),
            simulated: now - Instant::ZERO,
            truncation,
            batch_metrics,
        },
        st.trace().to_vec(),
    ))
}

/// The `queue` model kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueKind;

impl Prepared for QueueConfig {
    fn warnings(&self) -> Vec<String> {
        let lambda = self
            .arrival
            .build()
            .map(|s| s.mean_rate())
            .unwrap_or(f64::NAN);
        let rho = lambda * self.service.mean_secs();
        if self.capacity.is_none() && rho >= 1.0 {
            vec![format!(
                "offered load rho = lambda * E[S] = {rho:.4} >= 1 with infinite capacity: the queue is unstable and grows without bound, so its metrics depend on the run length"
            )]
        } else {
            Vec::new()
        }
    }

    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        run_station(self, rep, false).map(|(r, _)| r)
    }
}

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "arrival.kind",
        doc: "poisson {rate} | cbr {rate} | onoff {peak, mean, burst} | mmpp2 {rate0, rate1, r01, r10} | bursty {peak, average, burst_factor} | video {a, b, eta, pixels_per_frame, frame_rate, spread: defaults are paper 003's}; rates like \"0.9 /s\", burst in customers",
    },
    ParamDoc {
        key: "service.kind",
        doc: "exponential {mean} | deterministic {mean} | empirical {values = [durations], weights = [numbers] (optional, default equal)}",
    },
    ParamDoc {
        key: "capacity",
        doc: "\"inf\" (default) or an integer >= 1: customers in the system, waiting plus in service; arrivals finding it full are lost",
    },
];

const METRICS: &[&str] = &[
    "mean_wait",
    "mean_system_time",
    "mean_queue_length",
    "utilization",
    "loss_probability",
    "wait_p50",
    "wait_p99",
];

fn parse_arrival(p: &Params<'_>) -> Result<ArrivalSpec, SimError> {
    parse_source(p, "arrival")
}

/// Reads a traffic source from the table `key` of `p` (shared by the model kinds).
pub fn parse_source(p: &Params<'_>, key: &str) -> Result<ArrivalSpec, SimError> {
    let a = p.table(key)?;
    let kind = a.string("kind")?;
    let spec =
        match kind {
            "poisson" => ArrivalSpec::Poisson {
                rate: a.positive_rate("rate")?,
            },
            "cbr" => ArrivalSpec::Cbr {
                rate: a.positive_rate("rate")?,
            },
            "onoff" => ArrivalSpec::OnOff {
                peak: a.positive_rate("peak")?,
                mean: a.positive_rate("mean")?,
                burst: a.number("burst")?,
            },
            "mmpp2" => ArrivalSpec::Mmpp2 {
                rate0: a.rate("rate0")?,
                rate1: a.rate("rate1")?,
                r01: a.positive_rate("r01")?,
                r10: a.positive_rate("r10")?,
            },
            "bursty" => ArrivalSpec::Bursty {
                peak: a.positive_rate("peak")?,
                average: a.positive_rate("average")?,
                burst_factor: a.number("burst_factor")?,
            },
            "video" => {
                // Defaults: paper 003's videophone (Maglaris et al.'s fitted AR(1) model).
                let d = Ar1VideoParams::default();
                ArrivalSpec::Video(Ar1VideoParams {
                    a: a.number_or("a", d.a)?,
                    b: a.number_or("b", d.b)?,
                    eta: a.number_or("eta", d.eta)?,
                    pixels_per_frame: a.number_or("pixels_per_frame", f64::from(d.pixels_per_frame))? as u32,
                    frame_rate: if a.has("frame_rate") { a.positive_rate("frame_rate")? } else { d.frame_rate },
                    cell_payload_bits: d.cell_payload_bits,
                    spread: a.bool_or("spread", d.spread)?,
                })
            }
            other => return Err(a.error(
                "kind",
                format!(
                    "unknown source kind {other:?}; expected poisson, cbr, onoff, mmpp2, bursty or video"
                ),
            )),
        };
    a.finish()?;
    // The source constructors hold the detailed checks (mean above peak, ...).
    spec.build().map_err(|e| p.error(key, e.to_string()))?;
    Ok(spec)
}

fn parse_service(p: &Params<'_>) -> Result<Service, SimError> {
    let s = p.table("service")?;
    let kind = s.string("kind")?;
    let positive = |key: &str| -> Result<Duration, SimError> {
        let d = s.duration(key)?;
        if d == Duration::ZERO {
            return Err(s.error(key, "must be longer than zero"));
        }
        Ok(d)
    };
    let svc = match kind {
        "exponential" => Service::Exponential(positive("mean")?),
        "deterministic" => Service::Deterministic(positive("mean")?),
        "empirical" => {
            let values: Vec<Duration> = match s.raw("values") {
                Some(toml::Value::Array(vs)) if !vs.is_empty() => vs
                    .iter()
                    .map(|v| {
                        atmlab_sim::scenario::parse_duration(v).map_err(|m| s.error("values", m))
                    })
                    .collect::<Result<_, _>>()?,
                _ => {
                    return Err(s.error(
                        "values",
                        "expected a non-empty list of durations, e.g. [\"1 s\", \"2 s\"]",
                    ));
                }
            };
            let weights = if s.has("weights") {
                s.numbers("weights")?
            } else {
                vec![1.0; values.len()]
            };
            if weights.len() != values.len() {
                return Err(s.error(
                    "weights",
                    format!(
                        "has {} entries but values has {}",
                        weights.len(),
                        values.len()
                    ),
                ));
            }
            if weights.iter().any(|w| !w.is_finite() || *w < 0.0)
                || weights.iter().sum::<f64>() <= 0.0
            {
                return Err(s.error(
                    "weights",
                    "must be non-negative numbers with a positive sum",
                ));
            }
            let total: f64 = weights.iter().sum();
            let mut acc = 0.0;
            let cumulative = weights
                .iter()
                .map(|w| {
                    acc += w / total;
                    acc
                })
                .collect();
            Service::Empirical { values, cumulative }
        }
        other => return Err(s.error(
            "kind",
            format!(
                "unknown service kind {other:?}; expected exponential, deterministic or empirical"
            ),
        )),
    };
    s.finish()?;
    Ok(svc)
}

fn parse_capacity(p: &Params<'_>) -> Result<Option<u64>, SimError> {
    match p.raw("capacity") {
        None => Ok(None),
        Some(toml::Value::String(s)) if s.trim() == "inf" => Ok(None),
        Some(toml::Value::Integer(n)) if *n >= 1 => Ok(Some(*n as u64)),
        Some(v) => Err(p.error(
            "capacity",
            format!(
                "expected \"inf\" or an integer of at least 1, got {}",
                atmlab_sim::scenario::show(v)
            ),
        )),
    }
}

/// The unit of each metric (`sim run`'s table and plot axes; `*` ends a prefix).
const METRIC_UNITS: &[(&str, &str)] = &[
    ("mean_wait", "s"),
    ("mean_system_time", "s"),
    ("mean_queue_length", "customers"),
    ("utilization", "ratio"),
    ("loss_probability", "ratio"),
    ("wait_p50", "s"),
    ("wait_p99", "s"),
];

impl ModelKind for QueueKind {
    fn name(&self) -> &'static str {
        "queue"
    }
    fn summary(&self) -> &'static str {
        "one FIFO server fed by any traffic source (validation: M/M/1, M/D/1, M/M/1/K)"
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
    fn prepare(
        &self,
        params: &Params<'_>,
        _run: &RunConfig,
    ) -> Result<Box<dyn Prepared>, SimError> {
        let cfg = QueueConfig {
            arrival: parse_arrival(params)?,
            service: parse_service(params)?,
            capacity: parse_capacity(params)?,
        };
        Ok(Box::new(cfg))
    }
}
