//! One replication of paper 004's model (§3, §5 Figs. 6-9, §6): builds the three
//! blocks ([`super::AtmNetwork`], [`super::Gateway`], [`super::Ring`]) from a
//! [`GatewayConfig`], runs them through the warm-up and the measured period, and turns
//! what they counted into the metrics of [`super::METRICS`], in that order.
//!
//! Every source draws from its own RNG stream and its own event lane, so that a
//! replication is reproducible from its (seed, replication) alone.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, Ctx, InPort, Simulation};
use atmlab_sim::model::{RepResult, Replication};
use atmlab_sim::rng::RngFactory;
use atmlab_sim::scenario::{RunLength, Warmup};
use atmlab_sim::stats::{Histogram, Tally, TimeWeighted};

use super::atm_network::AtmNetwork;
use super::gateway::Gateway;
use super::ring::{Ring, StationSource};
use super::{
    GATEWAY_STATION, GatewayConfig, GwMsg, STREAM_BACKGROUND, STREAM_REVERSE, STREAM_SOURCE,
};
use crate::gateway::fddi::TimedTokenRing;
use crate::gateway::mpp::{Mpp, MppReverse};
use crate::gateway::sar::CELL_OCTETS;
use crate::gateway::spp::Spp;
use crate::source::{Bursty, Poisson};

fn model_err(m: impl Into<String>) -> SimError {
    SimError::Model {
        model: "gateway".into(),
        message: m.into(),
    }
}

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
