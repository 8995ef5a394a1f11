//! The ATM network of paper 004's model (§3, Fig. 8, "Traffic Model"): one bursty
//! source per active connection feeding an infinite FIFO served at the ATM link rate.
//!
//! Each source numbers its cells and sets the F bit on the last cell of every segment of
//! `segment_cells`; the FIFO's departures go to the [`super::Gateway`] block as
//! [`GwMsg::Cell`]. The block measures the cells it sent (the offered load) and their
//! delay in the FIFO.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::component::{Component, ComponentId, Ctx, InPort};
use atmlab_sim::event_set::LaneId;
use atmlab_sim::rng::SimRng;
use atmlab_sim::stats::Tally;

use super::{GatewayConfig, GwMsg};
use crate::gateway::spp::SppCell;
use crate::source::{Bursty, TrafficSource};

/// The ATM network: bursty sources into an infinite FIFO at the link rate.
pub struct AtmNetwork {
    pub(super) sources: Vec<Bursty>,
    pub(super) rngs: Vec<SimRng>,
    pub(super) lanes: Vec<LaneId>,
    pub(super) out_lane: LaneId,
    pub(super) gateway: ComponentId,
    pub(super) cell_time: Duration,
    pub(super) segment_cells: u32,
    pub(super) next_seq: Vec<u32>,
    pub(super) last_departure: Instant,
    pub(super) observe_from: Instant,
    pub(super) cells: u64,
    pub(super) fifo_delay: Tally,
    pub(super) fault: Option<String>,
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
