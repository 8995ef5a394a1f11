//! The Congestion Management Protocol (paper 002 §5.2: "When a server is undergoing a
//! congestion, its CMP entity tells the neighbor servers to slash a part of their traffic
//! directed to it").
//!
//! [`Cmp`] is a sans-IO core with two sides.
//!
//! - **The congested side.** The shell reports its input backlog with
//!   [`Cmp::handle_occupancy`]. Above the high mark (a fraction of the queue) the server
//!   is congested: it sends every ISSI neighbour a Throttle asking it to cut `first_cut`
//!   per mille of the user data it sends here. While congested it repeats the Throttle
//!   every `refresh`, raising the cut by `step` (up to `max_cut`) whenever the backlog is
//!   still above the high mark, so the cut finds the level the server can carry. Once
//!   the backlog falls to the low mark it sends Resume. The two marks are apart so the
//!   state does not flap.
//! - **The neighbour side.** [`Cmp::handle_message`] records a neighbour's cut, which
//!   [`Cmp::cuts`] gives the forwarding state ([`crate::fib::Fib`] drops that share of
//!   user data toward it). A cut lapses after `hold` without a refresh, so a lost Resume
//!   (or a neighbour that died congested) cannot throttle traffic forever.
//!
//! Only user data is cut; the routing protocol and CMP itself are never throttled.

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use crate::ids::{IfaceId, ServerId};
use crate::msg::{CmpKind, IssiFrame};

/// Thresholds and timers of the CMP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CmpConfig {
    /// Congested at or above this fraction of the input queue.
    pub high: f64,
    /// Recovered at or below this fraction.
    pub low: f64,
    /// The first cut asked, per mille.
    pub first_cut: u16,
    /// How much the cut rises per refresh while the backlog stays high, per mille.
    pub step: u16,
    /// The largest cut asked, per mille.
    pub max_cut: u16,
    /// How often a congested server repeats its Throttle.
    pub refresh: Duration,
    /// How long a neighbour's cut lasts without a refresh.
    pub hold: Duration,
}

impl Default for CmpConfig {
    fn default() -> Self {
        CmpConfig {
            high: 0.8,
            low: 0.25,
            first_cut: 500,
            step: 200,
            max_cut: 900,
            refresh: Duration::from_millis(100),
            hold: Duration::from_millis(350),
        }
    }
}

/// The CMP entity of one server (see the module doc).
#[derive(Debug, Clone)]
pub struct Cmp {
    me: ServerId,
    cfg: CmpConfig,
    ports: Vec<IfaceId>,
    congested: bool,
    cut_asked: u16,
    last_fraction: f64,
    next_refresh: Option<Instant>,
    /// Per interface index: the cut a neighbour asked and when it lapses.
    cuts: Vec<(u16, Instant)>,
    cuts_changed: bool,
    out: VecDeque<(IfaceId, IssiFrame)>,
    episodes: u64,
    /// CMP messages sent and received (the metrics).
    sent: u64,
    received: u64,
}

impl Cmp {
    /// The CMP of server `me` with ISSIs `ports`, among `interfaces` interfaces in all.
    pub fn new(me: ServerId, ports: Vec<IfaceId>, interfaces: usize, cfg: CmpConfig) -> Cmp {
        Cmp {
            me,
            cfg,
            ports,
            congested: false,
            cut_asked: 0,
            last_fraction: 0.0,
            next_refresh: None,
            cuts: vec![(0, Instant::ZERO); interfaces],
            cuts_changed: false,
            out: VecDeque::new(),
            episodes: 0,
            sent: 0,
            received: 0,
        }
    }

    /// CMP messages (Throttle, Resume) sent to neighbours and received from them.
    pub fn messages(&self) -> (u64, u64) {
        (self.sent, self.received)
    }

    /// Whether this server is congested now.
    pub fn congested(&self) -> bool {
        self.congested
    }

    /// The cut this server asks of its neighbours (0 when not congested).
    pub fn cut_asked(&self) -> u16 {
        if self.congested { self.cut_asked } else { 0 }
    }

    /// How many congestion episodes began.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }

    fn tell_all(&mut self, kind: CmpKind) {
        self.sent += self.ports.len() as u64;
        for &p in &self.ports {
            self.out.push_back((
                p,
                IssiFrame::Cmp {
                    from: self.me,
                    kind,
                },
            ));
        }
    }

    /// The input backlog is `occupancy` of `capacity` PDUs.
    pub fn handle_occupancy(&mut self, now: Instant, occupancy: usize, capacity: usize) {
        let f = occupancy as f64 / capacity.max(1) as f64;
        self.last_fraction = f;
        if !self.congested && f >= self.cfg.high {
            self.congested = true;
            self.episodes += 1;
            self.cut_asked = self.cfg.first_cut;
            self.tell_all(CmpKind::Throttle(self.cut_asked));
            self.next_refresh = Some(now + self.cfg.refresh);
        } else if self.congested && f <= self.cfg.low {
            self.congested = false;
            self.cut_asked = 0;
            self.next_refresh = None;
            self.tell_all(CmpKind::Resume);
        }
    }

    /// A CMP message from the neighbour on `iface`.
    pub fn handle_message(&mut self, now: Instant, iface: IfaceId, kind: CmpKind) {
        let Some(slot) = self.cuts.get_mut(iface.index()) else {
            return;
        };
        self.received += 1;
        let new = match kind {
            CmpKind::Throttle(c) => (c.min(1000), now + self.cfg.hold),
            CmpKind::Resume => (0, now),
        };
        self.cuts_changed |= slot.0 != new.0;
        *slot = new;
    }

    /// Repeats the Throttle while congested; lets lapsed cuts go.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(t) = self.next_refresh
            && t <= now
            && self.congested
        {
            if self.last_fraction >= self.cfg.high {
                self.cut_asked = (self.cut_asked + self.cfg.step).min(self.cfg.max_cut);
            }
            self.tell_all(CmpKind::Throttle(self.cut_asked));
            self.next_refresh = Some(now + self.cfg.refresh);
        }
        for c in &mut self.cuts {
            if c.0 > 0 && c.1 <= now {
                c.0 = 0;
                self.cuts_changed = true;
            }
        }
    }

    /// When [`Cmp::handle_timeout`] should next be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lapse = self.cuts.iter().filter(|c| c.0 > 0).map(|c| c.1).min();
        match (self.next_refresh, lapse) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next CMP frame to send.
    pub fn poll_frame(&mut self) -> Option<(IfaceId, IssiFrame)> {
        self.out.pop_front()
    }

    /// True (once) if a neighbour's cut changed: the forwarding state needs them again.
    pub fn take_cuts_changed(&mut self) -> bool {
        std::mem::take(&mut self.cuts_changed)
    }

    /// The cut per interface index that neighbours asked of us, per mille.
    pub fn cuts(&self) -> Vec<u16> {
        self.cuts.iter().map(|c| c.0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn congestion_throttles_escalates_and_resumes() {
        let mut c = Cmp::new(
            ServerId(1),
            vec![IfaceId(1), IfaceId(2)],
            3,
            CmpConfig::default(),
        );
        c.handle_occupancy(t(0), 10, 100);
        assert!(c.poll_frame().is_none());
        c.handle_occupancy(t(1), 85, 100);
        assert!(c.congested());
        let f: Vec<_> = std::iter::from_fn(|| c.poll_frame()).collect();
        assert_eq!(f.len(), 2);
        assert!(matches!(
            f[0].1,
            IssiFrame::Cmp {
                kind: CmpKind::Throttle(500),
                ..
            }
        ));
        c.handle_timeout(t(101));
        assert!(matches!(
            c.poll_frame().unwrap().1,
            IssiFrame::Cmp {
                kind: CmpKind::Throttle(700),
                ..
            }
        ));
        c.handle_occupancy(t(150), 50, 100);
        assert!(c.congested(), "between the marks nothing changes");
        c.handle_occupancy(t(160), 20, 100);
        assert!(!c.congested());
        let f: Vec<_> = std::iter::from_fn(|| c.poll_frame()).collect();
        assert!(f.iter().any(|(_, m)| matches!(
            m,
            IssiFrame::Cmp {
                kind: CmpKind::Resume,
                ..
            }
        )));
    }

    /// The metrics' message counts: every frame queued for a neighbour is counted sent,
    /// every message handled counted received.
    #[test]
    fn messages_are_counted_both_ways() {
        let mut c = Cmp::new(
            ServerId(1),
            vec![IfaceId(1), IfaceId(2)],
            3,
            CmpConfig::default(),
        );
        let mut polled = 0;
        c.handle_occupancy(t(1), 85, 100);
        c.handle_timeout(t(101));
        c.handle_occupancy(t(160), 20, 100);
        while c.poll_frame().is_some() {
            polled += 1;
        }
        assert!(
            polled >= 4,
            "a throttle and a resume to each of two: {polled}"
        );
        c.handle_message(t(200), IfaceId(1), CmpKind::Throttle(600));
        c.handle_message(t(201), IfaceId(1), CmpKind::Resume);
        assert_eq!(c.messages(), (polled, 2));
    }

    #[test]
    fn a_neighbours_cut_lapses_without_refresh() {
        let mut c = Cmp::new(ServerId(1), vec![IfaceId(0)], 1, CmpConfig::default());
        c.handle_message(t(0), IfaceId(0), CmpKind::Throttle(600));
        assert!(c.take_cuts_changed());
        assert_eq!(c.cuts(), vec![600]);
        c.handle_timeout(t(349));
        assert_eq!(c.cuts(), vec![600]);
        c.handle_timeout(t(350));
        assert_eq!(c.cuts(), vec![0]);
        assert!(c.take_cuts_changed());
    }
}
