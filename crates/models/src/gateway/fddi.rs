//! The FDDI ring with the timed-token MAC (ANSI X3.139), paper 004 §5 (Fig. 12, "FDDI
//! MAC") and Table 2, as a sans-IO core: [`TimedTokenRing`].
//!
//! The paper used the FDDI block of BONeS' LAN library, a set of stations each with a
//! traffic generator (synchronous, and asynchronous with priorities) and the MAC, with
//! the gateway as one station whose transmit queue is the gateway's transmit buffer.
//! This core is that ring: `stations` stations in token order, the gateway being whichever
//! station the shell feeds from its transmit buffer.
//!
//! # The timed-token protocol, as modelled
//!
//! Each station keeps its token rotation timer (TRT) as the instant it was last reset.
//! When the token arrives at a station:
//!
//! - **early** (TRT not expired, Late_Ct = 0): the token holding time THT is what was
//!   left of TRT (TTRT minus the time since the reset), and TRT restarts;
//! - **late** (TRT expired since its last reset): TRT was reset on expiry (Late_Ct set),
//!   keeps running, and the station may send no asynchronous traffic this visit. A second
//!   expiry before the token comes back would start the claim process; we count it as a
//!   protocol violation ([`RingStats::violations`]) rather than model ring recovery.
//!
//! Then the station sends synchronous frames while they fit in its synchronous
//! allocation, and asynchronous frames, highest priority first, while THT (which runs
//! only during asynchronous transmission) stays below the priority's threshold T_Pri
//! (T_Pri(7) = TTRT: priority 7, Table 2's value for every station, may send whenever
//! THT has not expired). A frame once started is finished (asynchronous overrun). Then
//! the token goes on to the next station, one hop latency later. Frames reach their
//! destination one hop latency per station downstream after their last bit is sent; the
//! transmitter strips them.
//!
//! Guarantee (Johnson, Sevcik): with the sum of the synchronous allocations plus the ring
//! latency plus one maximum frame time within TTRT, no rotation exceeds 2 x TTRT and
//! every station gets its synchronous allocation on every visit; the tests check both.
//!
//! The ring is simulated hop by hop even when idle (an event per hop): exact, and cheap
//! next to the ATM side's event per cell.
//!
//! Order of calls: [`TimedTokenRing::enqueue`] at any time; [`TimedTokenRing::handle_timeout`]
//! at [`TimedTokenRing::poll_timeout`], which always has a value (the token never stops);
//! then drain [`TimedTokenRing::poll_event`].

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use crate::ModelsError;

/// Traffic classes of the timed-token MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameClass {
    /// Synchronous: guaranteed its allocation on every visit.
    Synchronous,
    /// Asynchronous with a priority 0..=7 (7 highest).
    Asynchronous(u8),
}

/// A frame on the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingFrame {
    /// Octets on the ring, preamble to frame status.
    pub octets: u32,
    /// Its class.
    pub class: FrameClass,
    /// The sending station (set by [`TimedTokenRing::enqueue`]).
    pub src: u16,
    /// The destination station.
    pub dest: u16,
    /// The shell's tag (e.g. the first cell's arrival time).
    pub tag: u64,
    /// When it was queued at its station.
    pub queued: Instant,
}

/// What happened on the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingEvent {
    /// `frame`'s last bit left its station at `end` (its room in the station's transmit
    /// buffer is free).
    Transmitted {
        /// The frame.
        frame: RingFrame,
        /// When its first bit was sent.
        start: Instant,
        /// When its last bit was sent (now).
        end: Instant,
    },
    /// `frame` will have reached its destination entirely at `at` (in the future).
    Delivered {
        /// The frame.
        frame: RingFrame,
        /// When.
        at: Instant,
    },
}

/// The ring's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RingConfig {
    /// Stations in token order.
    pub stations: usize,
    /// The target token rotation time.
    pub ttrt: Duration,
    /// The ring's bit rate (100 Mb/s).
    pub bit_rate: f64,
    /// Latency from one station to the next (station delay plus fibre).
    pub hop_latency: Duration,
    /// Each station's synchronous allocation per visit (empty = none anywhere).
    pub sync_allocation: Vec<Duration>,
    /// T_Pri for priorities 0..=7 (each at most TTRT).
    pub t_pri: [Duration; 8],
}

impl RingConfig {
    /// A ring of `stations` at `bit_rate` with every threshold at TTRT (every priority
    /// behaves as 7) and no synchronous allocations.
    pub fn new(stations: usize, ttrt: Duration, bit_rate: f64, hop_latency: Duration) -> Self {
        RingConfig {
            stations,
            ttrt,
            bit_rate,
            hop_latency,
            sync_allocation: Vec::new(),
            t_pri: [ttrt; 8],
        }
    }
}

/// Token rotation statistics since the last reset.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RingStats {
    /// Token arrivals observed with a previous arrival to measure from.
    pub rotations: u64,
    /// Sum of the rotation times, seconds.
    pub rotation_sum: f64,
    /// The longest rotation.
    pub max_rotation: Duration,
    /// Late token arrivals.
    pub late: u64,
    /// TRT expired twice without the token (rotation beyond 2 x TTRT: claim).
    pub violations: u64,
    /// Time the medium carried frames.
    pub busy: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Visit {
    sync_used: Duration,
    /// THT at arrival: the asynchronous budget.
    budget: Duration,
    async_used: Duration,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// The token reaches `station` at `at`.
    Token { station: usize, at: Instant },
    /// `station` holds the token and sends `frame` until `until`.
    Sending {
        station: usize,
        start: Instant,
        until: Instant,
        frame: RingFrame,
        visit: Visit,
    },
}

#[derive(Debug, Clone, Default)]
struct Station {
    sync_q: VecDeque<RingFrame>,
    async_q: [VecDeque<RingFrame>; 8],
    trt_start: Instant,
    last_arrival: Option<Instant>,
    queued_octets: u64,
}

/// The timed-token ring (sans-IO).
#[derive(Debug, Clone)]
pub struct TimedTokenRing {
    cfg: RingConfig,
    /// Picoseconds per octet on the medium.
    octet_ps: f64,
    stations: Vec<Station>,
    phase: Phase,
    events: VecDeque<RingEvent>,
    stats: RingStats,
}

impl TimedTokenRing {
    /// A ring whose token starts at station 0 at `start`, every TRT reset then.
    pub fn new(cfg: RingConfig, start: Instant) -> Result<Self, ModelsError> {
        let bad = |param, reason: String| ModelsError::InvalidParameter {
            model: "TimedTokenRing",
            param,
            reason,
        };
        if cfg.stations < 2 || cfg.stations > usize::from(u16::MAX) {
            return Err(bad("stations", format!("need 2.., got {}", cfg.stations)));
        }
        if cfg.ttrt == Duration::ZERO {
            return Err(bad("ttrt", "must be positive".into()));
        }
        if !(cfg.bit_rate.is_finite() && cfg.bit_rate >= 1e3) {
            return Err(bad(
                "bit_rate",
                format!("must be at least 1 kb/s, got {}", cfg.bit_rate),
            ));
        }
        if !cfg.sync_allocation.is_empty() && cfg.sync_allocation.len() != cfg.stations {
            return Err(bad(
                "sync_allocation",
                format!(
                    "one per station ({}), got {}",
                    cfg.stations,
                    cfg.sync_allocation.len()
                ),
            ));
        }
        if cfg.t_pri.iter().any(|t| *t > cfg.ttrt) {
            return Err(bad("t_pri", "every T_Pri must be at most TTRT".into()));
        }
        let stations = (0..cfg.stations)
            .map(|_| Station {
                trt_start: start,
                ..Station::default()
            })
            .collect();
        Ok(TimedTokenRing {
            octet_ps: 8e12 / cfg.bit_rate,
            cfg,
            stations,
            phase: Phase::Token {
                station: 0,
                at: start,
            },
            events: VecDeque::new(),
            stats: RingStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }

    /// Time to send `octets` on the medium.
    pub fn frame_time(&self, octets: u32) -> Duration {
        Duration::from_picos((f64::from(octets) * self.octet_ps).round() as u64)
    }

    /// Queues `frame` at `station` (`frame.src` is set to it).
    pub fn enqueue(
        &mut self,
        now: Instant,
        station: usize,
        mut frame: RingFrame,
    ) -> Result<(), ModelsError> {
        let n = self.cfg.stations;
        if station >= n || usize::from(frame.dest) >= n {
            return Err(ModelsError::InvalidParameter {
                model: "TimedTokenRing",
                param: "station",
                reason: format!("stations are 0..{n}, got {station} -> {}", frame.dest),
            });
        }
        frame.src = station as u16;
        frame.queued = now;
        let st = &mut self.stations[station];
        st.queued_octets += u64::from(frame.octets);
        match frame.class {
            FrameClass::Synchronous => st.sync_q.push_back(frame),
            FrameClass::Asynchronous(p) => st.async_q[usize::from(p.min(7))].push_back(frame),
        }
        Ok(())
    }

    /// Octets queued at `station` (the transmit buffer, for the gateway), including the
    /// frame being sent.
    pub fn queued_octets(&self, station: usize) -> u64 {
        self.stations.get(station).map_or(0, |s| s.queued_octets)
    }

    /// Rotation statistics.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Zeroes the statistics (end of warm-up).
    pub fn reset_stats(&mut self) {
        self.stats = RingStats::default();
    }

    /// When the ring next needs [`TimedTokenRing::handle_timeout`].
    pub fn poll_timeout(&self) -> Instant {
        match self.phase {
            Phase::Token { at, .. } => at,
            Phase::Sending { until, .. } => until,
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<RingEvent> {
        self.events.pop_front()
    }

    /// Advances the ring to `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while self.poll_timeout() <= now {
            match self.phase {
                Phase::Token { station, at } => {
                    let visit = self.token_arrives(station, at);
                    self.send_next(station, at, visit);
                }
                Phase::Sending {
                    station,
                    start,
                    until,
                    frame,
                    visit,
                } => {
                    self.stats.busy += until - start;
                    let st = &mut self.stations[station];
                    st.queued_octets -= u64::from(frame.octets);
                    self.events.push_back(RingEvent::Transmitted {
                        frame,
                        start,
                        end: until,
                    });
                    let n = self.cfg.stations;
                    let hops = (usize::from(frame.dest) + n - station) % n;
                    let hops = if hops == 0 { n } else { hops };
                    self.events.push_back(RingEvent::Delivered {
                        frame,
                        at: until + self.cfg.hop_latency.saturating_mul(hops as u64),
                    });
                    self.send_next(station, until, visit);
                }
            }
        }
    }

    /// The timed-token rules at a token arrival; returns the visit's budgets.
    fn token_arrives(&mut self, station: usize, t: Instant) -> Visit {
        let ttrt = self.cfg.ttrt;
        let st = &mut self.stations[station];
        if let Some(prev) = st.last_arrival {
            let r = t - prev;
            self.stats.rotations += 1;
            self.stats.rotation_sum += r.as_secs_f64();
            self.stats.max_rotation = self.stats.max_rotation.max(r);
        }
        st.last_arrival = Some(t);
        let mut expiries = 0;
        while t.saturating_duration_since(st.trt_start) >= ttrt {
            // TRT expired: it is reset (Late_Ct set) and keeps running.
            st.trt_start += ttrt;
            expiries += 1;
        }
        let budget = if expiries == 0 {
            let left = ttrt - (t - st.trt_start);
            st.trt_start = t;
            left
        } else {
            self.stats.late += 1;
            if expiries > 1 {
                self.stats.violations += 1;
            }
            Duration::ZERO
        };
        Visit {
            sync_used: Duration::ZERO,
            budget,
            async_used: Duration::ZERO,
        }
    }

    /// Starts the station's next frame, or passes the token on.
    fn send_next(&mut self, station: usize, t: Instant, mut visit: Visit) {
        let alloc = self
            .cfg
            .sync_allocation
            .get(station)
            .copied()
            .unwrap_or(Duration::ZERO);
        let ttrt = self.cfg.ttrt;
        let mut pick: Option<RingFrame> = None;
        if let Some(f) = self.stations[station].sync_q.front().copied() {
            let ft = self.frame_time(f.octets);
            if visit.sync_used + ft <= alloc {
                visit.sync_used += ft;
                pick = self.stations[station].sync_q.pop_front();
            }
        }
        if pick.is_none() {
            for p in (0..8).rev() {
                if self.stations[station].async_q[p].is_empty() {
                    continue;
                }
                // THT runs from TTRT - budget upwards; priority p may start a frame while
                // it is below T_Pri(p).
                let tht = (ttrt - visit.budget) + visit.async_used;
                if visit.budget > Duration::ZERO && tht < self.cfg.t_pri[p] {
                    pick = self.stations[station].async_q[p].pop_front();
                    if let Some(f) = pick {
                        visit.async_used += self.frame_time(f.octets);
                    }
                    break;
                }
            }
        }
        self.phase = match pick {
            Some(frame) => Phase::Sending {
                station,
                start: t,
                until: t + self.frame_time(frame.octets),
                frame,
                visit,
            },
            None => Phase::Token {
                station: (station + 1) % self.cfg.stations,
                at: t + self.cfg.hop_latency,
            },
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn frame(octets: u32, class: FrameClass, dest: u16) -> RingFrame {
        RingFrame {
            octets,
            class,
            src: 0,
            dest,
            tag: 0,
            queued: Instant::ZERO,
        }
    }

    /// Runs the ring to `end`, refilling every station's queues so that it is saturated,
    /// and returns the synchronous time each station sent per visit (min over visits
    /// after the first rotation), and the ring.
    fn saturated(cfg: RingConfig, end: Instant) -> (TimedTokenRing, Vec<Duration>, Vec<u64>) {
        let n = cfg.stations;
        let alloc = cfg.sync_allocation.clone();
        let mut ring = TimedTokenRing::new(cfg, Instant::ZERO).unwrap();
        let mut sync_sent = vec![0u64; n];
        let mut async_sent = vec![0u64; n];
        let top_up = |ring: &mut TimedTokenRing, now: Instant| {
            for s in 0..n {
                let st = &ring.stations[s];
                let (sq, aq) = (
                    st.sync_q.len(),
                    st.async_q.iter().map(VecDeque::len).sum::<usize>(),
                );
                let dest = ((s + 1) % n) as u16;
                for _ in sq..4 {
                    if !alloc.is_empty() && alloc[s] > Duration::ZERO {
                        ring.enqueue(now, s, frame(500, FrameClass::Synchronous, dest))
                            .unwrap();
                    }
                }
                for k in aq..8 {
                    let p = if k % 2 == 0 { 7 } else { 3 };
                    ring.enqueue(now, s, frame(4500, FrameClass::Asynchronous(p), dest))
                        .unwrap();
                }
            }
        };
        top_up(&mut ring, Instant::ZERO);
        // Synchronous time per visit. A visit is a run of back-to-back frames from one
        // station (the token leaves between visits, so there is always a gap).
        let mut per_visit = vec![Duration::ZERO; n];
        let mut min_visit = vec![Duration::MAX; n];
        let mut last_end: Vec<Option<Instant>> = vec![None; n];
        while ring.poll_timeout() <= end {
            let now = ring.poll_timeout();
            ring.handle_timeout(now);
            while let Some(e) = ring.poll_event() {
                if let RingEvent::Transmitted { frame, start, end } = e {
                    let s = usize::from(frame.src);
                    if last_end[s] != Some(start) {
                        if last_end[s].is_some() && start > Instant::ZERO + ms(100) {
                            min_visit[s] = min_visit[s].min(per_visit[s]);
                        }
                        per_visit[s] = Duration::ZERO;
                    }
                    last_end[s] = Some(end);
                    match frame.class {
                        FrameClass::Synchronous => {
                            per_visit[s] += end - start;
                            sync_sent[s] += 1;
                        }
                        FrameClass::Asynchronous(_) => async_sent[s] += 1,
                    }
                }
            }
            top_up(&mut ring, now);
        }
        let _ = sync_sent;
        (ring, min_visit, async_sent)
    }

    #[test]
    fn saturated_ring_keeps_rotations_within_two_ttrt_and_honours_sync() {
        // TTRT 8 ms; 4 stations, three with synchronous allocations of 1 ms (25 frames of
        // 500 octets, 40 us each). Sum of allocations 3 ms + latency 40 us + the largest
        // frame (4500 octets, 360 us) < 8 ms, as the standard requires.
        let mut cfg = RingConfig::new(4, ms(8), 100e6, Duration::from_micros(10));
        cfg.sync_allocation = vec![Duration::ZERO, ms(1), ms(1), ms(1)];
        let (ring, min_visit, async_sent) = saturated(cfg, Instant::ZERO + Duration::from_secs(5));
        let s = ring.stats();
        assert!(s.rotations > 1000, "{s:?}");
        assert!(
            s.max_rotation <= ms(16),
            "max rotation {:?}",
            s.max_rotation
        );
        assert_eq!(s.violations, 0);
        // Mean rotation stays at or below TTRT (Sevcik and Johnson).
        assert!(s.rotation_sum / s.rotations as f64 <= 0.008 + 1e-9);
        // Stations 1-3 sent their whole 1 ms of synchronous frames on every visit, late
        // token or not (their queues are topped up after every event, so never run dry).
        for (st, v) in min_visit.iter().enumerate().skip(1) {
            assert_eq!(*v, ms(1), "station {st}");
        }
        // Asynchronous traffic still flows for everyone, and the ring was nearly full.
        assert!(async_sent.iter().all(|n| *n > 10), "{async_sent:?}");
        assert!(s.busy.as_secs_f64() > 0.9 * 5.0, "{:?}", s.busy);
    }

    #[test]
    fn synchronous_allocation_is_sent_even_on_a_late_token() {
        // Station 1 has 10 sync frames of 40 us queued, allocation 200 us; every other
        // station saturates with async. The sync station sends exactly 5 per visit.
        let mut cfg = RingConfig::new(3, ms(2), 100e6, Duration::from_micros(5));
        cfg.sync_allocation = vec![Duration::ZERO, Duration::from_micros(200), Duration::ZERO];
        let mut ring = TimedTokenRing::new(cfg, Instant::ZERO).unwrap();
        for _ in 0..1000 {
            ring.enqueue(
                Instant::ZERO,
                0,
                frame(4500, FrameClass::Asynchronous(7), 2),
            )
            .unwrap();
            ring.enqueue(
                Instant::ZERO,
                2,
                frame(4500, FrameClass::Asynchronous(7), 0),
            )
            .unwrap();
        }
        for _ in 0..50 {
            ring.enqueue(Instant::ZERO, 1, frame(500, FrameClass::Synchronous, 0))
                .unwrap();
        }
        let mut visits: Vec<u32> = Vec::new();
        let mut last_end = None;
        let end = Instant::ZERO + ms(200);
        while ring.poll_timeout() <= end {
            let now = ring.poll_timeout();
            ring.handle_timeout(now);
            while let Some(e) = ring.poll_event() {
                if let RingEvent::Transmitted { frame, start, end } = e
                    && frame.src == 1
                {
                    if last_end != Some(start) {
                        visits.push(0);
                    }
                    *visits.last_mut().unwrap() += 1;
                    last_end = Some(end);
                }
            }
        }
        assert_eq!(visits, vec![5; 10], "sync frames per visit");
        let s = ring.stats();
        assert!(s.late > 0, "async saturation makes tokens late: {s:?}");
        assert!(s.max_rotation <= ms(4));
    }

    #[test]
    fn idle_ring_rotates_at_the_ring_latency_and_delivers_downstream() {
        let cfg = RingConfig::new(4, ms(50), 100e6, Duration::from_micros(2));
        let mut ring = TimedTokenRing::new(cfg, Instant::ZERO).unwrap();
        // A 1000-octet frame (80 us) from station 2 to station 1: three hops downstream.
        ring.enqueue(
            Instant::ZERO,
            2,
            frame(1000, FrameClass::Asynchronous(7), 1),
        )
        .unwrap();
        let mut got = Vec::new();
        let end = Instant::ZERO + ms(1);
        while ring.poll_timeout() <= end {
            let now = ring.poll_timeout();
            ring.handle_timeout(now);
            got.extend(std::iter::from_fn(|| ring.poll_event()));
        }
        // Token reaches station 2 at 4 us; sends 4..84 us; delivered 3 hops later.
        let t = |us| Instant::ZERO + Duration::from_micros(us);
        assert!(
            matches!(got[0], RingEvent::Transmitted { start, end, .. } if start == t(4) && end == t(84))
        );
        assert!(matches!(got[1], RingEvent::Delivered { at, .. } if at == t(90)));
        assert_eq!(ring.queued_octets(2), 0);
        let s = ring.stats();
        assert_eq!(s.max_rotation, Duration::from_micros(88));
        assert_eq!(s.late, 0);
    }

    #[test]
    fn priority_thresholds_hold_back_low_priorities() {
        // T_Pri(0) = 0: priority 0 may never send; priority 7 may.
        let mut cfg = RingConfig::new(2, ms(8), 100e6, Duration::from_micros(1));
        cfg.t_pri[0] = Duration::ZERO;
        let mut ring = TimedTokenRing::new(cfg, Instant::ZERO).unwrap();
        ring.enqueue(Instant::ZERO, 0, frame(100, FrameClass::Asynchronous(0), 1))
            .unwrap();
        ring.enqueue(Instant::ZERO, 0, frame(100, FrameClass::Asynchronous(7), 1))
            .unwrap();
        let end = Instant::ZERO + ms(10);
        let mut sent = Vec::new();
        while ring.poll_timeout() <= end {
            let now = ring.poll_timeout();
            ring.handle_timeout(now);
            while let Some(e) = ring.poll_event() {
                if let RingEvent::Transmitted { frame, .. } = e {
                    sent.push(frame.class);
                }
            }
        }
        assert_eq!(sent, vec![FrameClass::Asynchronous(7)]);
        assert_eq!(ring.queued_octets(0), 100);
    }

    #[test]
    fn bad_configuration_is_an_error() {
        let ok = RingConfig::new(4, ms(8), 100e6, Duration::from_micros(1));
        let bad = [
            RingConfig {
                stations: 1,
                ..ok.clone()
            },
            RingConfig {
                ttrt: Duration::ZERO,
                ..ok.clone()
            },
            RingConfig {
                sync_allocation: vec![ms(1)],
                ..ok.clone()
            },
        ];
        for cfg in bad {
            assert!(
                TimedTokenRing::new(cfg.clone(), Instant::ZERO).is_err(),
                "{cfg:?}"
            );
        }
        let mut ring = TimedTokenRing::new(ok, Instant::ZERO).unwrap();
        assert!(
            ring.enqueue(Instant::ZERO, 9, frame(10, FrameClass::Synchronous, 0))
                .is_err()
        );
    }
}
