//! The gateway block of paper 004's model (§2, §5 Fig. 9): the AIC, the SPP
//! ([`crate::gateway::spp::Spp`]), the MPP with the NPE and the transmit buffer
//! ([`crate::gateway::mpp::Mpp`]) in the forward direction; the receive buffer, reverse
//! MPP and SPP fragmentation ([`crate::gateway::mpp::MppReverse`]) in the reverse
//! direction.
//!
//! It wires the sans-IO cores to the engine: cells and frames arrive as messages, the
//! cores' timers become engine timers (re-armed only when the wanted deadline changes),
//! and written frames go to the [`super::Ring`] block. It measures the latency (§3), the
//! carried load and the buffer occupancies.

use atmlab_core::time::Instant;
use atmlab_sim::component::{Component, ComponentId, Ctx, InPort};
use atmlab_sim::event_set::EventId;
use atmlab_sim::stats::{Histogram, Tally, TimeWeighted};

use super::GwMsg;
use crate::gateway::mpp::{FDDI_OVERHEAD_OCTETS, InFrame, Mpp, MppEvent, MppReverse, ReverseEvent};
use crate::gateway::spp::Spp;

/// The gateway: AIC, SPP, MPP with the NPE, transmit buffer; the reverse path.
pub struct Gateway {
    pub(super) spp: Spp,
    pub(super) mpp: Mpp,
    pub(super) reverse: MppReverse,
    pub(super) ring: ComponentId,
    pub(super) full_frame: f64,
    pub(super) mpp_timer: Option<(Instant, EventId)>,
    pub(super) reverse_timer: Option<(Instant, EventId)>,
    pub(super) observe_from: Instant,
    pub(super) latency: Tally,
    pub(super) latency_hist: Histogram,
    pub(super) data_octets_sent: u64,
    pub(super) reassembly: TimeWeighted,
    pub(super) transmit: TimeWeighted,
    pub(super) receive: TimeWeighted,
    pub(super) reverse_latency: Tally,
    pub(super) reverse_data_octets: u64,
    pub(super) fault: Option<String>,
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
        rearm(ctx, &mut self.mpp_timer, want, InPort(1), GwMsg::MppTimer);
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
        rearm(
            ctx,
            &mut self.reverse_timer,
            want,
            InPort(2),
            GwMsg::ReverseTimer,
        );
    }
}

/// Keeps the engine timer `armed` (its deadline and event) on the deadline a core wants:
/// the armed timer is cancelled and a new one set only when the deadline changed, so a
/// core polled after every input costs no events while its deadline stands.
fn rearm(
    ctx: &mut Ctx<'_, GwMsg>,
    armed: &mut Option<(Instant, EventId)>,
    want: Option<Instant>,
    port: InPort,
    msg: GwMsg,
) {
    if want != armed.map(|t| t.0) {
        if let Some((_, id)) = armed.take() {
            ctx.cancel(id);
        }
        if let Some(at) = want {
            let id = ctx.timer(at - ctx.now(), port, msg);
            *armed = Some((at, id));
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
