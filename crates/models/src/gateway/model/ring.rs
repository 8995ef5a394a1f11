//! The ring block of paper 004's model (§5 Fig. 12): the FDDI ring
//! ([`crate::gateway::fddi::TimedTokenRing`]) with the gateway as station 0, and the
//! other stations' traffic generators: Poisson background frames between themselves
//! (1 Mb/s each in §6.1) and, for §6.5, bursty frames addressed to the gateway (ATM
//! hosts).
//!
//! The gateway's frames arrive as [`GwMsg::Enqueue`]; the ring reports each one it
//! transmitted, and each frame delivered to station 0, back to the [`super::Gateway`]
//! block.

use atmlab_core::time::Instant;
use atmlab_sim::component::{Component, ComponentId, Ctx, InPort};
use atmlab_sim::event_set::LaneId;
use atmlab_sim::rng::SimRng;

use super::{GATEWAY_STATION, GwMsg};
use crate::gateway::fddi::{FrameClass, RingEvent, RingFrame, TimedTokenRing};
use crate::gateway::mpp::FDDI_OVERHEAD_OCTETS;
use crate::source::TrafficSource;

/// A frame generator of a ring station.
pub(super) struct StationSource {
    pub(super) station: u16,
    pub(super) source: Box<dyn TrafficSource + Send>,
    pub(super) rng: SimRng,
    pub(super) lane: LaneId,
    pub(super) octets: u32,
    pub(super) dest: u16,
}

/// The FDDI ring with its other stations' traffic.
pub struct Ring {
    pub(super) ring: TimedTokenRing,
    pub(super) gateway: ComponentId,
    pub(super) priority: u8,
    pub(super) background: Vec<StationSource>,
    pub(super) reverse: Vec<StationSource>,
    pub(super) observe_from: Instant,
    pub(super) reverse_offered_octets: u64,
    pub(super) fault: Option<String>,
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
