//! The `gateway` model kind: paper 004's system (Figs. 6, 7 and 9) as three blocks of the
//! engine, wired through ports.
//!
//! - [`AtmNetwork`] (Fig. 8, "Traffic Model"): N bursty sources, one per active
//!   connection, feeding an infinite FIFO served at the ATM link rate. Each source numbers
//!   its cells and sets the F bit on the last cell of every segment of `segment_cells`.
//! - [`Gateway`] (Fig. 9): the AIC, the SPP ([`super::spp::Spp`]), the MPP and NPE
//!   ([`super::mpp::Mpp`]) and the transmit buffer in the forward direction; the receive
//!   buffer, reverse MPP and SPP fragmentation ([`super::mpp::MppReverse`]) in the
//!   reverse direction.
//! - [`Ring`] (Fig. 12): the FDDI ring ([`super::fddi::TimedTokenRing`]) with the gateway
//!   as station 0, and the other stations' traffic generators: Poisson background frames
//!   between themselves (1 Mb/s each in §6.1) and, for §6.5, bursty frames addressed to
//!   the gateway (ATM hosts).
//!
//! Metrics (names in [`METRICS`]), measured after the warm-up:
//! `offered_load_mbps` (the ATM sources' cells, 53 octets each), `throughput_mbps` (the
//! carried load: data octets of the gateway's frames sent on the ring; below the
//! threshold it is 45/53 of the offered load, the paper's "15 percent difference"),
//! `cell_loss_probability` (cells the SPP dropped over cells it received),
//! `frame_loss_probability` (segments lost over segments decided: dropped by the MPP as
//! `InError`, or never reaching it because no cell found a queue), `latency_mean` and
//! `latency_p99` (§3: from the arrival of the first cell of a frame that is reassembled
//! without error until the frame's last bit leaves on the ring), buffer occupancies
//! (time averages; transmit and receive buffers in full-size frames), `npe_utilization`,
//! token rotation mean and maximum, rotations beyond 2 x TTRT, and the reverse path's
//! offered load, throughput, frame loss (receive buffer full), receive buffer occupancy
//! (mean and maximum) and latency.

use std::collections::BTreeMap;

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, ComponentId, Ctx, InPort, Simulation};
use atmlab_sim::event_set::{EventId, LaneId};
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication};
use atmlab_sim::rng::{RngFactory, SimRng};
use atmlab_sim::scenario::{Params, RunConfig, RunLength, Warmup};
use atmlab_sim::stats::{Histogram, Tally, TimeWeighted};

use super::fddi::{FrameClass, RingConfig, RingEvent, RingFrame, TimedTokenRing};
use super::mpp::{
    FDDI_OVERHEAD_OCTETS, InFrame, Mpp, MppConfig, MppEvent, MppReverse, ReverseConfig,
    ReverseEvent,
};
use super::sar::{CELL_OCTETS, DATA_OCTETS};
use super::spp::{Spp, SppCell, SppConfig};
use crate::source::{Bursty, Poisson, TrafficSource};

/// The VCI of connection 0 (the others follow).
pub const FIRST_VCI: u16 = 32;
/// The gateway's station number on the ring.
pub const GATEWAY_STATION: u16 = 0;

const STREAM_SOURCE: u64 = 100;
const STREAM_BACKGROUND: u64 = 200;
const STREAM_REVERSE: u64 = 300;

/// Everything the model's parameters say.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// Active connections (Table 2: 8).
    pub connections: u16,
    /// Total average ATM bandwidth offered, bits/s of 53-octet cells (0: none).
    pub offered_load: f64,
    /// Λp/Λa of every source.
    pub peak_to_average: f64,
    /// B, in cells (see [`crate::source::Bursty`]).
    pub burst_factor: f64,
    /// Cells per segment (Table 3's "Frame Size Assembled").
    pub segment_cells: u32,
    /// The ATM link rate, bits/s.
    pub atm_link: f64,
    /// The hardware clock cycle.
    pub clock_cycle: Duration,
    /// R, NPE requests per second.
    pub npe_rate: f64,
    /// Reassembly queues per connection.
    pub reassembly_queues: u16,
    /// The largest FDDI frame, octets (Table 2: 4096).
    pub max_fddi_frame: u32,
    /// The "maximum size FDDI frame" in which the transmit and receive buffers are
    /// counted, octets.
    pub full_frame: u32,
    /// Transmit buffer, in full frames.
    pub transmit_buffer: f64,
    /// Receive buffer, in full frames.
    pub receive_buffer: f64,
    /// The ring.
    pub ring: RingConfig,
    /// The asynchronous priority of the gateway's frames.
    pub priority: u8,
    /// Background load per other station, bits/s.
    pub background_load: f64,
    /// Background frame size, octets.
    pub background_frame: u32,
    /// Total load the other stations send to the gateway, bits/s (0: none).
    pub reverse_load: f64,
    /// Their peak-to-average ratio.
    pub reverse_peak_to_average: f64,
    /// Their burst factor, in frames.
    pub reverse_burst_factor: f64,
    /// Their frame size, octets on the ring.
    pub reverse_frame: u32,
}

impl GatewayConfig {
    fn cell_time(&self) -> Duration {
        Duration::from_secs_f64(f64::from(CELL_OCTETS * 8) / self.atm_link)
    }

    fn vci(i: u16) -> u16 {
        FIRST_VCI + i
    }

    /// Destination station of connection `i` (the ICN table): spread over the others.
    fn dest(&self, i: u16) -> u16 {
        let others = (self.ring.stations - 1) as u16;
        1 + i % others
    }

    fn spp_config(&self) -> SppConfig {
        SppConfig {
            vcis: (0..self.connections).map(Self::vci).collect(),
            queues_per_connection: self.reassembly_queues,
            queue_cells: (self.max_fddi_frame - FDDI_OVERHEAD_OCTETS) / DATA_OCTETS,
            segment_cells: self.segment_cells,
        }
    }

    fn mpp_config(&self) -> MppConfig {
        MppConfig {
            npe_rate: self.npe_rate,
            clock_cycle: self.clock_cycle,
            bus_octets: 4,
            transmit_buffer_octets: (self.transmit_buffer * f64::from(self.full_frame)) as u64,
            max_frame_octets: self.segment_cells * DATA_OCTETS + FDDI_OVERHEAD_OCTETS,
            icn_table: (0..self.connections)
                .map(|i| (Self::vci(i), self.dest(i)))
                .collect(),
        }
    }

    fn reverse_config(&self) -> ReverseConfig {
        ReverseConfig {
            receive_buffer_octets: (self.receive_buffer * f64::from(self.full_frame)) as u64,
            clock_cycle: self.clock_cycle,
            bus_octets: 4,
            cell_time: self.cell_time(),
            icxt: (1..self.ring.stations as u16)
                .map(|s| (s, FIRST_VCI + 1000 + s))
                .collect(),
        }
    }

    /// Checks everything the blocks' constructors do not.
    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 || self.connections > 1000 {
            return Err(format!(
                "connections must be 1..=1000, got {}",
                self.connections
            ));
        }
        if self.offered_load > 0.0 && self.peak_to_average <= 1.0 {
            return Err(format!(
                "peak_to_average must exceed 1 (a burst exceeds the average), got {}",
                self.peak_to_average
            ));
        }
        if self.offered_load >= self.atm_link {
            return Err(format!(
                "offered_load {} b/s must stay below the ATM link's {} b/s: the network FIFO is infinite and would grow without bound",
                self.offered_load, self.atm_link
            ));
        }
        if self.max_fddi_frame < FDDI_OVERHEAD_OCTETS + DATA_OCTETS || self.max_fddi_frame > 4500 {
            return Err(format!(
                "max_fddi_frame must be {}..=4500 octets, got {}",
                FDDI_OVERHEAD_OCTETS + DATA_OCTETS,
                self.max_fddi_frame
            ));
        }
        let seg = u64::from(self.segment_cells) * u64::from(DATA_OCTETS)
            + u64::from(FDDI_OVERHEAD_OCTETS);
        if self.segment_cells == 0 || seg > u64::from(self.max_fddi_frame) {
            return Err(format!(
                "segment_cells {} makes a {seg}-octet FDDI frame, above max_fddi_frame {}",
                self.segment_cells, self.max_fddi_frame
            ));
        }
        if !(self.transmit_buffer.is_finite()
            && self.transmit_buffer * f64::from(self.full_frame) >= seg as f64)
        {
            return Err("transmit_buffer must hold at least one segment's frame".into());
        }
        if self.reverse_load > 0.0 {
            if self.reverse_peak_to_average <= 1.0 {
                return Err("reverse.peak_to_average must exceed 1".into());
            }
            if !(self.receive_buffer.is_finite()
                && self.receive_buffer * f64::from(self.full_frame)
                    >= f64::from(self.reverse_frame))
            {
                return Err("receive_buffer must hold at least one reverse frame".into());
            }
            if self.reverse_frame <= FDDI_OVERHEAD_OCTETS
                || self.reverse_frame > self.max_fddi_frame
            {
                return Err(format!(
                    "reverse.frame must be {}..={} octets",
                    FDDI_OVERHEAD_OCTETS + 1,
                    self.max_fddi_frame
                ));
            }
        }
        if self.background_load > 0.0
            && (self.background_frame == 0 || self.background_frame > 4500)
        {
            return Err("background.frame must be 1..=4500 octets".into());
        }
        if self.priority > 7 {
            return Err(format!(
                "fddi.priority must be 0..=7, got {}",
                self.priority
            ));
        }
        Ok(())
    }
}

/// The messages of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GwMsg {
    /// To [`AtmNetwork`]: source `0` emits.
    SourceArrival(u16),
    /// To [`Gateway`]: a cell leaves the ATM FIFO and reaches the AIC.
    Cell(SppCell),
    /// To [`Gateway`]: the MPP's timer.
    MppTimer,
    /// To [`Gateway`]: the reverse path's timer.
    ReverseTimer,
    /// To [`Gateway`]: a frame of `octets` left the transmit buffer; its first cell
    /// arrived at `first` (picoseconds).
    Transmitted {
        /// Octets on the ring.
        octets: u32,
        /// First cell's arrival, picoseconds.
        first: u64,
    },
    /// To [`Gateway`]: a frame from station `icn` arrived.
    ReverseFrame {
        /// Octets on the ring.
        octets: u32,
        /// Its ICN (the sending station, for the ICXT look-up).
        icn: u16,
    },
    /// To [`Ring`]: the gateway writes a frame into its transmit buffer.
    Enqueue {
        /// Octets on the ring.
        octets: u32,
        /// Destination station.
        dest: u16,
        /// First cell's arrival, picoseconds.
        first: u64,
    },
    /// To [`Ring`]: the ring's timer.
    RingTimer,
    /// To [`Ring`]: station `0`'s background generator emits.
    Background(u16),
    /// To [`Ring`]: station `0`'s generator of traffic for the gateway emits.
    Reverse(u16),
}

/// The ATM network: bursty sources into an infinite FIFO at the link rate.
pub struct AtmNetwork {
    sources: Vec<Bursty>,
    rngs: Vec<SimRng>,
    lanes: Vec<LaneId>,
    out_lane: LaneId,
    gateway: ComponentId,
    cell_time: Duration,
    segment_cells: u32,
    next_seq: Vec<u32>,
    last_departure: Instant,
    observe_from: Instant,
    cells: u64,
    fifo_delay: Tally,
    fault: Option<String>,
}

impl AtmNetwork {
    fn schedule(&mut self, ctx: &mut Ctx<'_, GwMsg>, i: usize) {
        if let Some(a) = self.sources[i].next_arrival(&mut self.rngs[i]) {
            let me = ctx.me().port(0);
            if let Err(e) = ctx.send_in_lane(
                self.lanes[i],
                a.at.max(ctx.now()),
                me,
                GwMsg::SourceArrival(i as u16),
            ) {
                self.fail(ctx, e.to_string());
            }
        }
    }

    fn fail(&mut self, ctx: &mut Ctx<'_, GwMsg>, m: String) {
        self.fault.get_or_insert(m);
        ctx.stop();
    }
}

impl Component<GwMsg> for AtmNetwork {
    fn init(&mut self, ctx: &mut Ctx<'_, GwMsg>) {
        for i in 0..self.sources.len() {
            self.schedule(ctx, i);
        }
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, GwMsg>, _port: InPort, msg: GwMsg) {
        let GwMsg::SourceArrival(i) = msg else {
            return;
        };
        let i = usize::from(i);
        let now = ctx.now();
        // Bursty sources emit one cell at a time (Poisson while active).
        let dep = now.max(self.last_departure) + self.cell_time;
        self.last_departure = dep;
        let seq = self.next_seq[i];
        self.next_seq[i] = seq.wrapping_add(1);
        let cell = SppCell {
            vci: GatewayConfig::vci(i as u16),
            seq: seq as u16,
            framing: seq.wrapping_add(1).is_multiple_of(self.segment_cells),
        };
        if now >= self.observe_from {
            self.cells += 1;
            self.fifo_delay.record((dep - now).as_secs_f64());
        }
        let to = self.gateway.port(0);
        if let Err(e) = ctx.send_in_lane(self.out_lane, dep, to, GwMsg::Cell(cell)) {
            self.fail(ctx, e.to_string());
            return;
        }
        self.schedule(ctx, i);
    }

    fn reset_stats(&mut self, now: Instant) {
        self.observe_from = now;
        self.cells = 0;
        self.fifo_delay.reset();
    }
}

/// The gateway: AIC, SPP, MPP with the NPE, transmit buffer; the reverse path.
pub struct Gateway {
    spp: Spp,
    mpp: Mpp,
    reverse: MppReverse,
    ring: ComponentId,
    full_frame: f64,
    mpp_timer: Option<(Instant, EventId)>,
    reverse_timer: Option<(Instant, EventId)>,
    observe_from: Instant,
    latency: Tally,
    latency_hist: Histogram,
    data_octets_sent: u64,
    reassembly: TimeWeighted,
    transmit: TimeWeighted,
    receive: TimeWeighted,
    reverse_latency: Tally,
    reverse_data_octets: u64,
    fault: Option<String>,
}

impl Gateway {
    fn drain(&mut self, ctx: &mut Ctx<'_, GwMsg>) {
        let now = ctx.now();
        loop {
            if let Some(r) = self.spp.poll_request() {
                self.mpp.handle_request(now, r);
                continue;
            }
            let Some(ev) = self.mpp.poll_event() else {
                break;
            };
            let queue = match ev {
                MppEvent::Dropped { queue, .. } => queue,
                MppEvent::Written { queue, frame } => {
                    let to = self.ring.port(0);
                    ctx.send(
                        to,
                        GwMsg::Enqueue {
                            octets: frame.octets,
                            dest: frame.dest,
                            first: frame.first_arrival.as_picos(),
                        },
                    );
                    queue
                }
            };
            if let Err(e) = self.spp.handle_ack(queue) {
                self.fault.get_or_insert(e.to_string());
                ctx.stop();
            }
        }
        self.reassembly.set(now, self.spp.occupied_cells() as f64);
        self.transmit
            .set(now, self.mpp.transmit_occupancy() as f64 / self.full_frame);
        let want = self.mpp.poll_timeout();
        if want != self.mpp_timer.map(|t| t.0) {
            if let Some((_, id)) = self.mpp_timer.take() {
                ctx.cancel(id);
            }
            if let Some(at) = want {
                let id = ctx.timer(at - now, InPort(1), GwMsg::MppTimer);
                self.mpp_timer = Some((at, id));
            }
        }
    }

    fn drain_reverse(&mut self, ctx: &mut Ctx<'_, GwMsg>) {
        let now = ctx.now();
        while let Some(ev) = self.reverse.poll_event() {
            if let ReverseEvent::Sent { frame, .. } = ev
                && frame.received >= self.observe_from
            {
                self.reverse_latency
                    .record((now - frame.received).as_secs_f64());
                self.reverse_data_octets +=
                    u64::from(frame.octets.saturating_sub(FDDI_OVERHEAD_OCTETS));
            }
        }
        self.receive
            .set(now, self.reverse.occupancy() as f64 / self.full_frame);
        let want = self.reverse.poll_timeout();
        if want != self.reverse_timer.map(|t| t.0) {
            if let Some((_, id)) = self.reverse_timer.take() {
                ctx.cancel(id);
            }
            if let Some(at) = want {
                let id = ctx.timer(at - now, InPort(2), GwMsg::ReverseTimer);
                self.reverse_timer = Some((at, id));
            }
        }
    }
}

impl Component<GwMsg> for Gateway {
    fn handle(&mut self, ctx: &mut Ctx<'_, GwMsg>, _port: InPort, msg: GwMsg) {
        let now = ctx.now();
        match msg {
            GwMsg::Cell(cell) => {
                // AIC -> SPP: Strip Headers, Sequence Checker, Write Cell?, ...
                // A cell can complete a frame (even a dropped framing cell closes one),
                // so the SPP's requests are drained after every cell.
                self.spp.handle_cell(now, cell);
                self.drain(ctx);
            }
            GwMsg::MppTimer => {
                self.mpp_timer = None;
                self.mpp.handle_timeout(now);
                self.drain(ctx);
            }
            GwMsg::Transmitted { octets, first } => {
                let first = Instant::from_picos(first);
                if first >= self.observe_from {
                    let l = now - first;
                    self.latency.record(l.as_secs_f64());
                    self.latency_hist.record_duration(l);
                }
                if now >= self.observe_from {
                    self.data_octets_sent += u64::from(octets - FDDI_OVERHEAD_OCTETS);
                }
                self.mpp.handle_transmitted(now, octets);
                self.drain(ctx);
            }
            GwMsg::ReverseFrame { octets, icn } => {
                self.reverse.handle_frame(
                    now,
                    InFrame {
                        octets,
                        icn,
                        received: now,
                    },
                );
                self.drain_reverse(ctx);
            }
            GwMsg::ReverseTimer => {
                self.reverse_timer = None;
                self.reverse.handle_timeout(now);
                self.drain_reverse(ctx);
            }
            _ => {}
        }
    }

    fn reset_stats(&mut self, now: Instant) {
        self.observe_from = now;
        self.spp.reset_counters();
        self.mpp.reset_counters();
        self.reverse.reset_counters();
        self.latency.reset();
        self.latency_hist.reset();
        self.data_octets_sent = 0;
        self.reassembly.reset(now);
        self.transmit.reset(now);
        self.receive.reset(now);
        self.reverse_latency.reset();
        self.reverse_data_octets = 0;
    }
}

/// A frame generator of a ring station.
struct StationSource {
    station: u16,
    source: Box<dyn TrafficSource + Send>,
    rng: SimRng,
    lane: LaneId,
    octets: u32,
    dest: u16,
}

/// The FDDI ring with its other stations' traffic.
pub struct Ring {
    ring: TimedTokenRing,
    gateway: ComponentId,
    priority: u8,
    background: Vec<StationSource>,
    reverse: Vec<StationSource>,
    observe_from: Instant,
    reverse_offered_octets: u64,
    fault: Option<String>,
}

impl Ring {
    fn schedule(&mut self, ctx: &mut Ctx<'_, GwMsg>, reverse: bool, k: usize) {
        let list = if reverse {
            &mut self.reverse
        } else {
            &mut self.background
        };
        let s = &mut list[k];
        if let Some(a) = s.source.next_arrival(&mut s.rng) {
            let msg = if reverse {
                GwMsg::Reverse(k as u16)
            } else {
                GwMsg::Background(k as u16)
            };
            let me = ctx.me().port(0);
            if let Err(e) = ctx.send_in_lane(s.lane, a.at.max(ctx.now()), me, msg) {
                self.fault.get_or_insert(e.to_string());
                ctx.stop();
            }
        }
    }

    fn arm(&mut self, ctx: &mut Ctx<'_, GwMsg>) {
        let at = self.ring.poll_timeout();
        let now = ctx.now();
        ctx.timer(
            at.saturating_duration_since(now),
            InPort(1),
            GwMsg::RingTimer,
        );
    }

    fn enqueue(&mut self, ctx: &mut Ctx<'_, GwMsg>, station: usize, frame: RingFrame) {
        if let Err(e) = self.ring.enqueue(ctx.now(), station, frame) {
            self.fault.get_or_insert(e.to_string());
            ctx.stop();
        }
    }
}

impl Component<GwMsg> for Ring {
    fn init(&mut self, ctx: &mut Ctx<'_, GwMsg>) {
        for k in 0..self.background.len() {
            self.schedule(ctx, false, k);
        }
        for k in 0..self.reverse.len() {
            self.schedule(ctx, true, k);
        }
        self.arm(ctx);
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, GwMsg>, _port: InPort, msg: GwMsg) {
        let now = ctx.now();
        match msg {
            GwMsg::Enqueue {
                octets,
                dest,
                first,
            } => {
                let f = RingFrame {
                    octets,
                    class: FrameClass::Asynchronous(self.priority),
                    src: GATEWAY_STATION,
                    dest,
                    tag: first,
                    queued: now,
                };
                self.enqueue(ctx, usize::from(GATEWAY_STATION), f);
            }
            GwMsg::RingTimer => {
                self.ring.handle_timeout(now);
                while let Some(ev) = self.ring.poll_event() {
                    match ev {
                        RingEvent::Transmitted { frame, .. } if frame.src == GATEWAY_STATION => {
                            ctx.send(
                                self.gateway.port(0),
                                GwMsg::Transmitted {
                                    octets: frame.octets,
                                    first: frame.tag,
                                },
                            );
                        }
                        RingEvent::Delivered { frame, at }
                            if frame.dest == GATEWAY_STATION && frame.src != GATEWAY_STATION =>
                        {
                            let msg = GwMsg::ReverseFrame {
                                octets: frame.octets,
                                icn: frame.src,
                            };
                            let to = self.gateway.port(0);
                            if let Err(e) = ctx.send_at(at, to, msg) {
                                self.fault.get_or_insert(e.to_string());
                                ctx.stop();
                            }
                        }
                        _ => {}
                    }
                }
                self.arm(ctx);
            }
            GwMsg::Background(k) | GwMsg::Reverse(k) => {
                let reverse = matches!(msg, GwMsg::Reverse(_));
                let k = usize::from(k);
                let s = if reverse {
                    &self.reverse[k]
                } else {
                    &self.background[k]
                };
                let (station, octets, dest) = (usize::from(s.station), s.octets, s.dest);
                if reverse && now >= self.observe_from {
                    self.reverse_offered_octets +=
                        u64::from(octets.saturating_sub(FDDI_OVERHEAD_OCTETS));
                }
                let f = RingFrame {
                    octets,
                    class: FrameClass::Asynchronous(7),
                    src: station as u16,
                    dest,
                    tag: 0,
                    queued: now,
                };
                self.enqueue(ctx, station, f);
                self.schedule(ctx, reverse, k);
            }
            _ => {}
        }
    }

    fn reset_stats(&mut self, now: Instant) {
        self.observe_from = now;
        self.ring.reset_stats();
        self.reverse_offered_octets = 0;
    }
}

fn model_err(m: impl Into<String>) -> SimError {
    SimError::Model {
        model: "gateway".into(),
        message: m.into(),
    }
}

/// The metrics, in order.
pub const METRICS: &[&str] = &[
    "offered_load_mbps",
    "throughput_mbps",
    "cell_loss_probability",
    "frame_loss_probability",
    "latency_mean",
    "latency_p99",
    "reassembly_occupancy",
    "transmit_buffer_occupancy",
    "atm_fifo_delay",
    "npe_utilization",
    "token_rotation_mean",
    "token_rotation_max",
    "token_violations",
    "reverse_offered_mbps",
    "reverse_throughput_mbps",
    "reverse_frame_loss_probability",
    "receive_buffer_occupancy",
    "receive_buffer_max",
    "reverse_latency_mean",
];

/// The model's three blocks as one type, so that the simulation holds them by value and
/// calls their handlers without a `dyn` call (see `atmlab_sim::component`, "Components
/// known at build time").
// One of each per simulation: the size of the largest costs nothing, and boxing it would
// add a pointer to follow on every message to the gateway.
#[allow(clippy::large_enum_variant)]
enum Block {
    Atm(AtmNetwork),
    Gateway(Gateway),
    Ring(Ring),
}

impl Component<GwMsg> for Block {
    fn init(&mut self, ctx: &mut Ctx<'_, GwMsg>) {
        match self {
            Block::Atm(b) => b.init(ctx),
            Block::Gateway(b) => b.init(ctx),
            Block::Ring(b) => b.init(ctx),
        }
    }

    #[inline]
    fn handle(&mut self, ctx: &mut Ctx<'_, GwMsg>, port: InPort, msg: GwMsg) {
        match self {
            Block::Atm(b) => b.handle(ctx, port, msg),
            Block::Gateway(b) => b.handle(ctx, port, msg),
            Block::Ring(b) => b.handle(ctx, port, msg),
        }
    }

    fn reset_stats(&mut self, now: Instant) {
        match self {
            Block::Atm(b) => b.reset_stats(now),
            Block::Gateway(b) => b.reset_stats(now),
            Block::Ring(b) => b.reset_stats(now),
        }
    }
}

/// Builds and runs one replication; returns its metrics and the events processed.
pub fn run_replication(cfg: &GatewayConfig, rep: &Replication) -> Result<RepResult, SimError> {
    let end = match rep.length {
        RunLength::Duration(d) => Instant::ZERO + d,
        RunLength::Count(_) => {
            return Err(model_err(
                "runs are measured in simulated time: use [run] duration, not count",
            ));
        }
    };
    let warmup = match rep.warmup {
        Warmup::Time(w) => w,
        Warmup::Auto | Warmup::Observations(_) => {
            return Err(model_err(
                "give the warm-up as a time (e.g. warmup = \"0.5 s\"); \"auto\" is not supported by this model",
            ));
        }
    };
    if rep.batches > 1 {
        return Err(model_err(
            "batch means are not supported: use independent replications",
        ));
    }
    let rngs = RngFactory::new(rep.seed, rep.replication);
    let mut sim: Simulation<GwMsg, Block> = Simulation::typed();
    let atm_id = sim.reserve();
    let gw_id = sim.reserve();
    let ring_id = sim.reserve();
    let e = |x: crate::ModelsError| model_err(x.to_string());

    // The ATM network.
    let n = cfg.connections;
    let mut sources = Vec::new();
    let mut src_rngs = Vec::new();
    let mut lanes = Vec::new();
    if cfg.offered_load > 0.0 {
        let avg = cfg.offered_load / f64::from(n) / f64::from(CELL_OCTETS * 8);
        for i in 0..n {
            sources.push(
                Bursty::new(
                    cfg.peak_to_average * avg,
                    avg,
                    cfg.burst_factor,
                    Instant::ZERO,
                )
                .map_err(e)?,
            );
            src_rngs.push(rngs.stream(STREAM_SOURCE + u64::from(i)));
            lanes.push(sim.new_lane());
        }
    }
    let atm = AtmNetwork {
        next_seq: vec![0; sources.len()],
        sources,
        rngs: src_rngs,
        lanes,
        out_lane: sim.new_lane(),
        gateway: gw_id,
        cell_time: cfg.cell_time(),
        segment_cells: cfg.segment_cells,
        last_departure: Instant::ZERO,
        observe_from: Instant::ZERO,
        cells: 0,
        fifo_delay: Tally::new(),
        fault: None,
    };
    sim.install_typed(atm_id, Block::Atm(atm))?;

    let gw = Gateway {
        spp: Spp::new(cfg.spp_config()).map_err(e)?,
        mpp: Mpp::new(cfg.mpp_config()).map_err(e)?,
        reverse: MppReverse::new(cfg.reverse_config()).map_err(e)?,
        ring: ring_id,
        full_frame: f64::from(cfg.full_frame),
        mpp_timer: None,
        reverse_timer: None,
        observe_from: Instant::ZERO,
        latency: Tally::new(),
        latency_hist: Histogram::new(),
        data_octets_sent: 0,
        reassembly: TimeWeighted::new(Instant::ZERO, 0.0),
        transmit: TimeWeighted::new(Instant::ZERO, 0.0),
        receive: TimeWeighted::new(Instant::ZERO, 0.0),
        reverse_latency: Tally::new(),
        reverse_data_octets: 0,
        fault: None,
    };
    sim.install_typed(gw_id, Block::Gateway(gw))?;

    // The ring and its stations' generators.
    let stations = cfg.ring.stations as u16;
    let mut background = Vec::new();
    let mut reverse = Vec::new();
    for s in 1..stations {
        if cfg.background_load > 0.0 {
            let rate = cfg.background_load / f64::from(cfg.background_frame * 8);
            // Background traffic goes to the next station that is not the gateway.
            let dest = if s + 1 < stations { s + 1 } else { 1 };
            background.push(StationSource {
                station: s,
                source: Box::new(Poisson::new(rate, Instant::ZERO).map_err(e)?),
                rng: rngs.stream(STREAM_BACKGROUND + u64::from(s)),
                lane: sim.new_lane(),
                octets: cfg.background_frame,
                dest,
            });
        }
        if cfg.reverse_load > 0.0 {
            let avg = cfg.reverse_load / f64::from(stations - 1) / f64::from(cfg.reverse_frame * 8);
            reverse.push(StationSource {
                station: s,
                source: Box::new(
                    Bursty::new(
                        cfg.reverse_peak_to_average * avg,
                        avg,
                        cfg.reverse_burst_factor,
                        Instant::ZERO,
                    )
                    .map_err(e)?,
                ),
                rng: rngs.stream(STREAM_REVERSE + u64::from(s)),
                lane: sim.new_lane(),
                octets: cfg.reverse_frame,
                dest: GATEWAY_STATION,
            });
        }
    }
    let ring = Ring {
        ring: TimedTokenRing::new(cfg.ring.clone(), Instant::ZERO).map_err(e)?,
        gateway: gw_id,
        priority: cfg.priority,
        background,
        reverse,
        observe_from: Instant::ZERO,
        reverse_offered_octets: 0,
        fault: None,
    };
    sim.install_typed(ring_id, Block::Ring(ring))?;

    if warmup > Duration::ZERO {
        sim.run_until(Instant::ZERO + warmup, None)?;
        sim.reset_stats();
    }
    sim.run_until(end, None)?;
    let now = sim.now();
    let missing = || model_err("a block is missing");
    let block = |id| sim.component::<Block>(id).ok_or_else(missing);
    let (Block::Atm(atm), Block::Gateway(gw), Block::Ring(ring)) =
        (block(atm_id)?, block(gw_id)?, block(ring_id)?)
    else {
        return Err(missing());
    };
    if let Some(f) = atm
        .fault
        .as_ref()
        .or(gw.fault.as_ref())
        .or(ring.fault.as_ref())
    {
        return Err(model_err(f.clone()));
    }
    let t = (now - gw.observe_from).as_secs_f64();
    let mbps = |octets: u64| octets as f64 * 8.0 / t / 1e6;
    let spp = gw.spp.counters();
    let mpp = gw.mpp.counters();
    let rev = gw.reverse.counters();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let lost = mpp.frames_dropped_in_error + spp.segments_lost;
    let rs = ring.ring.stats();
    let metrics = vec![
        (
            "offered_load_mbps",
            mbps(atm.cells * u64::from(CELL_OCTETS)),
        ),
        ("throughput_mbps", mbps(gw.data_octets_sent)),
        (
            "cell_loss_probability",
            ratio(spp.cells_dropped, spp.cells_in),
        ),
        (
            "frame_loss_probability",
            ratio(lost, lost + mpp.frames_written),
        ),
        ("latency_mean", gw.latency.mean()),
        ("latency_p99", gw.latency_hist.quantile(0.99)),
        ("reassembly_occupancy", gw.reassembly.mean(now)),
        ("transmit_buffer_occupancy", gw.transmit.mean(now)),
        ("atm_fifo_delay", atm.fifo_delay.mean()),
        ("npe_utilization", gw.mpp.npe_busy().as_secs_f64() / t),
        (
            "token_rotation_mean",
            if rs.rotations == 0 {
                f64::NAN
            } else {
                rs.rotation_sum / rs.rotations as f64
            },
        ),
        ("token_rotation_max", rs.max_rotation.as_secs_f64()),
        ("token_violations", rs.violations as f64),
        ("reverse_offered_mbps", mbps(ring.reverse_offered_octets)),
        ("reverse_throughput_mbps", mbps(gw.reverse_data_octets)),
        (
            "reverse_frame_loss_probability",
            ratio(rev.frames_refused, rev.frames_in),
        ),
        ("receive_buffer_occupancy", gw.receive.mean(now)),
        ("receive_buffer_max", gw.receive.max()),
        ("reverse_latency_mean", gw.reverse_latency.mean()),
    ];
    Ok(RepResult {
        metrics,
        events: sim.events_processed(),
        simulated: now - Instant::ZERO,
        truncation: None,
        batch_metrics: Vec::new(),
    })
}

impl Prepared for GatewayConfig {
    fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let carried = self.offered_load * f64::from(DATA_OCTETS) / f64::from(CELL_OCTETS);
        if carried > self.ring.bit_rate {
            w.push(format!(
                "the offered data rate {:.1} Mb/s exceeds the FDDI ring's {:.0} Mb/s: the gateway must lose cells",
                carried / 1e6,
                self.ring.bit_rate / 1e6
            ));
        }
        w
    }

    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        run_replication(self, rep)
    }
}

/// The `gateway` model kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatewayKind;

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "connections",
        doc: "active ATM connections, one bursty source each (Table 2: 8)",
    },
    ParamDoc {
        key: "offered_load",
        doc: "total average ATM bandwidth, e.g. \"80 Mb/s\" (53-octet cells; 0 for none)",
    },
    ParamDoc {
        key: "peak_to_average",
        doc: "each source's peak over average bandwidth (> 1)",
    },
    ParamDoc {
        key: "burst_factor",
        doc: "B, the mean excess cells of an active period (see source::Bursty)",
    },
    ParamDoc {
        key: "segment_cells",
        doc: "cells per MCHIP segment (Table 3: 85)",
    },
    ParamDoc {
        key: "atm_link",
        doc: "ATM link rate (Table 2: \"150 Mb/s\")",
    },
    ParamDoc {
        key: "clock_cycle",
        doc: "hardware clock (Table 2: \"25 ns\"); copies move 4 octets per cycle",
    },
    ParamDoc {
        key: "npe_rate",
        doc: "R, NPE requests served per second, e.g. \"100 /ms\"",
    },
    ParamDoc {
        key: "reassembly_queues",
        doc: "reassembly queues (maximum-size frames) per connection (2)",
    },
    ParamDoc {
        key: "max_fddi_frame",
        doc: "largest FDDI frame in octets (Table 2: 4096); a queue holds (max - 28)/45 cells",
    },
    ParamDoc {
        key: "full_frame",
        doc: "octets of the \"maximum size FDDI frame\" that buffer sizes count (3853: an 85-cell segment plus 28)",
    },
    ParamDoc {
        key: "transmit_buffer",
        doc: "transmit buffer, in full frames (Table 3: 16)",
    },
    ParamDoc {
        key: "receive_buffer",
        doc: "receive buffer, in full frames (§6.5: 16)",
    },
    ParamDoc {
        key: "fddi",
        doc: "{ rate = \"100 Mb/s\", stations = 4, ttrt = \"50 ms\", hop_latency = \"2.5 us\", priority = 7, sync_allocation = \"0 s\" }",
    },
    ParamDoc {
        key: "background",
        doc: "{ load = \"1 Mb/s\" per other station (Poisson frames), frame = octets }",
    },
    ParamDoc {
        key: "reverse",
        doc: "{ load = total to the gateway, peak_to_average, burst_factor (frames), frame = octets }",
    },
];

fn integer(p: &Params<'_>, key: &str, lo: f64, hi: f64) -> Result<f64, SimError> {
    let x = p.number(key)?;
    if x.fract() != 0.0 || x < lo || x > hi {
        return Err(p.error(key, format!("expected an integer in {lo}..={hi}, got {x}")));
    }
    Ok(x)
}

fn positive(p: &Params<'_>, key: &str) -> Result<f64, SimError> {
    let x = p.number(key)?;
    if x <= 0.0 {
        return Err(p.error(key, format!("must be greater than zero, got {x}")));
    }
    Ok(x)
}

/// Reads a [`GatewayConfig`] from a scenario's parameters.
pub fn parse_config(p: &Params<'_>) -> Result<GatewayConfig, SimError> {
    let connections = integer(p, "connections", 1.0, 1000.0)? as u16;
    let offered_load = p.bit_rate("offered_load")?;
    let peak_to_average = positive(p, "peak_to_average")?;
    let burst_factor = positive(p, "burst_factor")?;
    let segment_cells = integer(p, "segment_cells", 1.0, 16384.0)? as u32;
    let atm_link = p.bit_rate("atm_link")?;
    if atm_link <= 0.0 {
        return Err(p.error("atm_link", "must be greater than zero"));
    }
    let clock_cycle = p.duration("clock_cycle")?;
    if clock_cycle == Duration::ZERO {
        return Err(p.error("clock_cycle", "must be longer than zero"));
    }
    let npe_rate = p.positive_rate("npe_rate")?;
    let reassembly_queues = integer(p, "reassembly_queues", 1.0, 64.0)? as u16;
    let max_fddi_frame = integer(p, "max_fddi_frame", 1.0, 4500.0)? as u32;
    let full_frame = integer(p, "full_frame", 1.0, 4500.0)? as u32;
    let transmit_buffer = positive(p, "transmit_buffer")?;
    let receive_buffer = positive(p, "receive_buffer")?;

    let f = p.table("fddi")?;
    let bit_rate = f.bit_rate("rate")?;
    let stations = integer(&f, "stations", 2.0, 1000.0)? as usize;
    let ttrt = f.duration("ttrt")?;
    let hop_latency = f.duration("hop_latency")?;
    let priority = integer(&f, "priority", 0.0, 7.0)? as u8;
    let sync = f.duration("sync_allocation")?;
    f.finish()?;
    let mut ring = RingConfig::new(stations, ttrt, bit_rate, hop_latency);
    if sync > Duration::ZERO {
        // The gateway's frames are asynchronous (the paper: "all the traffic is
        // asynchronous"); an allocation given here goes to the other stations.
        ring.sync_allocation = (0..stations)
            .map(|s| if s == 0 { Duration::ZERO } else { sync })
            .collect();
    }
    TimedTokenRing::new(ring.clone(), Instant::ZERO).map_err(|e| p.error("fddi", e.to_string()))?;

    let b = p.table("background")?;
    let background_load = b.bit_rate("load")?;
    let background_frame = integer(&b, "frame", 1.0, 4500.0)? as u32;
    b.finish()?;

    let r = p.table("reverse")?;
    let reverse_load = r.bit_rate("load")?;
    let reverse_peak_to_average = positive(&r, "peak_to_average")?;
    let reverse_burst_factor = positive(&r, "burst_factor")?;
    let reverse_frame = integer(&r, "frame", 1.0, 4500.0)? as u32;
    r.finish()?;

    let cfg = GatewayConfig {
        connections,
        offered_load,
        peak_to_average,
        burst_factor,
        segment_cells,
        atm_link,
        clock_cycle,
        npe_rate,
        reassembly_queues,
        max_fddi_frame,
        full_frame,
        transmit_buffer,
        receive_buffer,
        ring,
        priority,
        background_load,
        background_frame,
        reverse_load,
        reverse_peak_to_average,
        reverse_burst_factor,
        reverse_frame,
    };
    cfg.validate().map_err(|m| p.error("-", m))?;
    // The blocks' own checks, so that a bad point fails when the scenario is loaded.
    Spp::new(cfg.spp_config()).map_err(|x| p.error("segment_cells", x.to_string()))?;
    Mpp::new(cfg.mpp_config()).map_err(|x| p.error("transmit_buffer", x.to_string()))?;
    Ok(cfg)
}

impl ModelKind for GatewayKind {
    fn name(&self) -> &'static str {
        "gateway"
    }
    fn summary(&self) -> &'static str {
        "paper 004's ATM-FDDI gateway: bursty ATM sources, SPP reassembly, MPP/NPE, transmit buffer, timed-token FDDI ring, reverse path"
    }
    fn parameters(&self) -> &'static [ParamDoc] {
        PARAMS
    }
    fn metrics(&self) -> &'static [&'static str] {
        METRICS
    }
    fn prepare(
        &self,
        params: &Params<'_>,
        _run: &RunConfig,
    ) -> Result<Box<dyn Prepared>, SimError> {
        Ok(Box::new(parse_config(params)?))
    }
}

/// The ICN table of a configuration, VCI to destination station (for tests and docs).
pub fn icn_table(cfg: &GatewayConfig) -> BTreeMap<u16, u16> {
    cfg.mpp_config().icn_table
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_sim::runner::{RunOptions, run};

    /// Table 2 and 3's point with `extra` overrides, shortened for a debug build.
    fn scenario(extra: &str) -> Scenario {
        let text = r#"
model = "gateway"
[run]
duration = "0.3 s"
warmup = "0.05 s"
replications = 2
seed = 7
[params]
connections = 8
offered_load = "60 Mb/s"
peak_to_average = 2
burst_factor = 250
segment_cells = 85
atm_link = "150 Mb/s"
clock_cycle = "25 ns"
npe_rate = "100 /ms"
reassembly_queues = 2
max_fddi_frame = 4096
full_frame = 3853
transmit_buffer = 16
receive_buffer = 16
fddi = { rate = "100 Mb/s", stations = 4, ttrt = "50 ms", hop_latency = "2.5 us", priority = 7, sync_allocation = "0 s" }
background = { load = "1 Mb/s", frame = 1000 }
reverse = { load = "0 Mb/s", peak_to_average = 8, burst_factor = 100, frame = 3853 }
"#;
        let overrides: Vec<String> = extra
            .split(';')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().to_string())
            .collect();
        Scenario::parse("test.toml", text, &overrides).unwrap()
    }

    use atmlab_sim::scenario::Scenario;

    fn metric(r: &atmlab_sim::runner::RunReport, point: usize, name: &str) -> f64 {
        r.points[point]
            .metrics
            .iter()
            .find(|(m, _)| m == name)
            .unwrap()
            .1
            .mean
    }

    #[test]
    fn light_load_loses_nothing_and_carries_45_of_53() {
        let s = scenario("params.burst_factor=20");
        let r = run(&s, &GatewayKind, &RunOptions::default()).unwrap();
        assert_eq!(metric(&r, 0, "cell_loss_probability"), 0.0);
        assert_eq!(metric(&r, 0, "frame_loss_probability"), 0.0);
        let ratio = metric(&r, 0, "throughput_mbps") / metric(&r, 0, "offered_load_mbps");
        // 45/53 = 0.849, less the frames still inside the gateway when the run ends.
        assert!((0.80..0.86).contains(&ratio), "{ratio}");
        let lat = metric(&r, 0, "latency_mean");
        // At least the reassembly of 85 cells at the 15 Mb/s peak of a source (2.4 ms),
        // at most tens of milliseconds.
        assert!((2.4e-3..0.05).contains(&lat), "{lat}");
        assert_eq!(metric(&r, 0, "token_violations"), 0.0);
        assert!(metric(&r, 0, "token_rotation_max") <= 0.1);
    }

    #[test]
    fn results_do_not_depend_on_threads_and_replications_differ() {
        let s = scenario("sweep.offered_load=[\"40 Mb/s\", \"120 Mb/s\"]");
        let one = run(
            &s,
            &GatewayKind,
            &RunOptions {
                threads: 1,
                progress: None,
            },
        )
        .unwrap();
        let two = run(
            &s,
            &GatewayKind,
            &RunOptions {
                threads: 2,
                progress: None,
            },
        )
        .unwrap();
        // Compared as text: NaN (no reverse traffic) is not equal to itself.
        for (a, b) in one.points.iter().zip(&two.points) {
            assert_eq!(
                format!("{:?}", a.replications),
                format!("{:?}", b.replications)
            );
        }
        let reps = &one.points[1].replications;
        assert_ne!(reps[0].metrics, reps[1].metrics);
        // Overload: the gateway must lose cells at 120 Mb/s offered (102 Mb/s of data).
        assert!(metric(&one, 1, "cell_loss_probability") > 0.0);
        assert!(metric(&one, 1, "throughput_mbps") < 100.0);
    }

    #[test]
    fn a_slow_npe_caps_the_throughput_at_its_rate() {
        // R = 25 /ms, 8-cell segments: at most 25,000 x 360 x 8 = 72 Mb/s of data, and
        // with the copy (2.25 us per 360 octets) one frame per 42.25 us: 68.2 Mb/s.
        let s = scenario(
            "params.segment_cells=8; params.burst_factor=4; params.npe_rate=\"25 /ms\"; params.offered_load=\"120 Mb/s\"",
        );
        let r = run(&s, &GatewayKind, &RunOptions::default()).unwrap();
        let tp = metric(&r, 0, "throughput_mbps");
        assert!((55.0..=68.2).contains(&tp), "{tp}");
        let u = metric(&r, 0, "npe_utilization");
        assert!((0.85..=40.0 / 42.25 + 1e-3).contains(&u), "{u}");
        assert!(metric(&r, 0, "cell_loss_probability") > 0.1);
    }

    #[test]
    fn reverse_path_carries_the_ring_load() {
        let s = scenario(
            "params.offered_load=\"0 Mb/s\"; params.reverse.load=\"80 Mb/s\"; params.receive_buffer=2",
        );
        let r = run(&s, &GatewayKind, &RunOptions::default()).unwrap();
        let offered = metric(&r, 0, "reverse_offered_mbps");
        let carried = metric(&r, 0, "reverse_throughput_mbps");
        assert!(offered > 10.0, "{offered}");
        assert!(
            carried > 0.5 * offered && carried <= 100.0,
            "{carried} of {offered}"
        );
        assert!(metric(&r, 0, "receive_buffer_max") <= 2.0);
        assert_eq!(metric(&r, 0, "throughput_mbps"), 0.0);
    }

    #[test]
    fn bad_parameters_name_the_key() {
        let bad = [
            ("params.offered_load=\"150 Mb/s\"", "offered_load"),
            ("params.segment_cells=100", "segment_cells"),
            ("params.peak_to_average=1", "peak_to_average"),
            ("params.fddi.stations=1", "stations"),
            ("params.fddi.priority=9", "priority"),
            ("params.colour=3", "colour"),
            ("params.npe_rate=\"0 /s\"", "npe_rate"),
        ];
        for (o, key) in bad {
            let s = scenario(o);
            let e = atmlab_sim::runner::prepare(&s, &GatewayKind)
                .err()
                .unwrap_or_else(|| panic!("{o} accepted"));
            assert!(e.to_string().contains(key), "{o}: {e}");
        }
        let s = scenario("run.warmup=\"auto\"");
        assert!(run(&s, &GatewayKind, &RunOptions::default()).is_err());
    }
}
