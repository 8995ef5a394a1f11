//! Virtual Clock as an access regulator: paper 003, section 2 ("Virtual Clock", after
//! Zhang [13], "Virtual Clock: A New Traffic Control Algorithm for Packet Switching
//! Networks", SIGCOMM '90), with the parameters of section 3.
//!
//! The paper's description: a flow reserves an average rate AR and an average interval
//! AI over which conformance is checked; "each data flow has a virtualclock which ticks
//! at every packet …; the tick step is equal to the mean inter-packet gap" (1/AR); "upon
//! transmitting each AR × AI packets, if a flow sends packets according to its specified
//! average rate, its virtualclock reading should be in the vicinity of the real time.
//! Otherwise, the flow will be penalized by delaying or discarding its packets."
//!
//! Our reading, and why:
//!
//! * **The clock.** Each accepted cell sets VC ← max(VC, now) + 1/AR (Zhang's auxVC; the
//!   `max` is Zhang's rule that a flow which has been slower than its rate may not bank
//!   the unused time as credit). Dropped cells do not advance VC: they did not use the
//!   reservation.
//! * **The check** is counted in cells, as the quoted text says: every N = round(AR × AI)
//!   accepted cells (at least 1). "In the vicinity" is read as VC − now ≤ AI, i.e. the
//!   flow is at most one check interval's worth of cells ahead of its rate. Between checks
//!   cells are not inspected — which is why the paper observes that Virtual Clock "does not
//!   limit the extra traffic … during periods where there is not flow check, all link
//!   capacity is available".
//! * **The penalty** applies to the flow, not to one cell: from a failed check until the
//!   flow is back in the vicinity (VC − now ≤ AI with nothing held), every cell is
//!   penalized. Otherwise a greedy flow would lose one cell per check and keep the rest
//!   of its excess.
//! * **Delay, the paper's reading** ([`VirtualClockPenalty::Delay`]): a penalized cell
//!   stamped VC is held until VC − AI, the instant at which that stamp is back within AI
//!   of real time (the earliest moment it would pass the check), but for at most the
//!   bound B = `max`; then it is released. No cell is ever dropped. Why: the paper's
//!   footnote says its "infinite buffer" is "sufficient to avoid losses due to the
//!   shaping effect caused by each one of the three simulated mechanisms"; for video it
//!   calls the 33 ms bound "a limit in the maximal time that a cell could be delayed"
//!   (not a limit past which cells are lost); section 3 limits "the maximum period that
//!   the flow should wait when penalized" (0.1 ms, 5 ms); and it says Virtual Clock's
//!   maximal jitter "is due to the maximal penalty delay", which holds when a cell held
//!   B is followed by one that passes at once. We hold until VC − AI rather than until
//!   VC because in the backbone experiment AI = B = 0.1 ms: holding until VC would hit
//!   the bound for every penalized cell (they are penalized precisely because
//!   VC − now > AI).
//!
//!   *A hold capped at B.* The cell leaves at now + B, earlier than its stamp allows.
//!   The flow's clock becomes VC ← (now + B) + AI, the stamp that release instant would
//!   have passed with: the clock says what the flow was actually allowed to send, so the
//!   capped excess is not charged again to the cells behind it, and in overload VC
//!   stays within B + AI + 1/AR of real time instead of running away (every cell is then
//!   held exactly B, the paper's "growing of wait queue during penalty time as load
//!   increases", bounded by B). FIFO holds without reordering: each held cell's release
//!   is min(stamp − AI, arrival + B); both terms grow from one held cell to the next
//!   (stamps by at least 1/AR, because a capped stamp is replaced by release + AI and
//!   the next stamp is at least that plus 1/AR; arrivals are non-decreasing), so no cell
//!   overtakes one held before it.
//! * **Delay or drop** ([`VirtualClockPenalty::DelayOrDrop`]): as above, but a cell whose
//!   hold would exceed B is dropped instead of released early (it does not advance VC).
//!   Not the paper's reading (it loses cells the paper's footnote says are not lost);
//!   kept for comparison.
//! * **Drop** ([`VirtualClockPenalty::Drop`]): every penalized cell is discarded.
//!
//! The paper's overdimensioning factor C also applies to AR ("We used the same idea for
//! Virtual Clock rate parameter, AR"): see [`VirtualClock::with_overdimensioning`].

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use super::{AccessCounters, Decision, interval_of_rate, overdimension};
use crate::ModelsError;

const MODEL: &str = "VirtualClock";

/// How a flow that failed its check is penalized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VirtualClockPenalty {
    /// Hold penalized cells until they would pass the check, for at most `max`, then
    /// release them: nothing is dropped (paper 003's reading; see the module doc).
    Delay {
        /// The longest a penalized cell is held (paper 003: 0.1 ms, 5 ms, 33 ms).
        max: Duration,
    },
    /// Hold penalized cells until they would pass the check, for at most `max`; a cell
    /// needing a longer hold is dropped. `max = 0` behaves as [`VirtualClockPenalty::Drop`].
    DelayOrDrop {
        /// The longest a penalized cell may be held.
        max: Duration,
    },
    /// Discard penalized cells.
    Drop,
}

/// Zhang's Virtual Clock regulating one flow (sans-IO core).
///
/// Call order for a shell:
///
/// 1. for each arriving cell, [`VirtualClock::handle_cell`]`(now, id)`; a
///    [`Decision::PassNow`] cell leaves at `now`;
/// 2. when the timer armed at [`VirtualClock::poll_timeout`] fires,
///    [`VirtualClock::handle_timeout`]`(now)`;
/// 3. after every `handle_*` call, drain [`VirtualClock::poll_transmit`] until `None`:
///    each item is a held cell and its exact release instant (earlier than `now` if the
///    shell woke late);
/// 4. then re-read [`VirtualClock::poll_timeout`] and re-arm (or cancel) the timer.
///
/// `now` must be non-decreasing; an earlier `now` is treated as the latest seen.
#[derive(Debug, Clone)]
pub struct VirtualClock {
    tick: Duration,
    ai: Duration,
    check_every: u64,
    penalty: VirtualClockPenalty,
    /// The flow's virtual clock; `None` before its first accepted cell.
    vc: Option<Instant>,
    /// Cells accepted since the last check, while not penalized.
    since_check: u64,
    penalized: bool,
    last: Instant,
    /// Held cells: (id, release instant), release instants increasing.
    held: VecDeque<(u64, Instant)>,
    released: VecDeque<(u64, Instant)>,
    counters: AccessCounters,
}

impl VirtualClock {
    /// A regulator for average rate `ar` (cells/s) checked every `ai` (AI). Requires a
    /// finite positive AR and AI ≥ 1/AR: a check interval shorter than one cell spacing
    /// would find even a perfectly paced flow more than AI ahead and penalize it forever.
    pub fn new(ar: f64, ai: Duration, penalty: VirtualClockPenalty) -> Result<Self, ModelsError> {
        let tick = interval_of_rate(MODEL, "average_rate", ar)?;
        if ai < tick {
            return Err(ModelsError::InvalidParameter {
                model: MODEL,
                param: "average_interval",
                reason: format!("AI = {ai} is shorter than one cell spacing 1/AR = {tick}"),
            });
        }
        // N = round(AR × AI) ≥ 1 here because AI ≥ 1/AR (up to rounding, hence the max);
        // `as` saturates for absurdly long intervals.
        let check_every = ((ar * ai.as_secs_f64()).round() as u64).max(1);
        Ok(VirtualClock {
            tick,
            ai,
            check_every,
            penalty,
            vc: None,
            since_check: 0,
            penalized: false,
            last: Instant::ZERO,
            held: VecDeque::new(),
            released: VecDeque::new(),
            counters: AccessCounters::default(),
        })
    }

    /// A regulator with AR = C × the negotiated `mean_rate`, C ≥ 1 (paper 003,
    /// section 3).
    pub fn with_overdimensioning(
        mean_rate: f64,
        c: f64,
        ai: Duration,
        penalty: VirtualClockPenalty,
    ) -> Result<Self, ModelsError> {
        VirtualClock::new(overdimension(MODEL, mean_rate, c)?, ai, penalty)
    }

    /// The virtual clock step 1/AR, rounded to the picosecond.
    pub fn tick(&self) -> Duration {
        self.tick
    }

    /// N = round(AR × AI): the number of accepted cells between checks.
    pub fn check_every(&self) -> u64 {
        self.check_every
    }

    /// The flow's virtual clock reading; `None` before its first accepted cell.
    pub fn virtual_clock(&self) -> Option<Instant> {
        self.vc
    }

    /// Whether the flow is being penalized (it failed a check and has not yet come back
    /// within AI of real time with nothing held).
    pub fn is_penalized(&self) -> bool {
        self.penalized
    }

    /// Cells held (not counting released cells not yet polled).
    pub fn occupancy(&self) -> usize {
        self.held.len()
    }

    /// What the regulator has done so far.
    pub fn counters(&self) -> AccessCounters {
        self.counters
    }

    /// A cell with identifier `cell_id` arrives at `now`.
    pub fn handle_cell(&mut self, now: Instant, cell_id: u64) -> Decision {
        let now = self.clock(now);
        self.release_due(now);
        let base = self.vc.map_or(now, |vc| vc.max(now));
        let stamp = base.saturating_add(self.tick);
        let ahead = stamp.saturating_duration_since(now);
        // Nothing held and the clock back in the vicinity: the penalty is over, and this
        // cell opens a fresh check period. (While cells are held, the newest stamp is
        // more than AI ahead, so the flow cannot leave the penalty with cells held and
        // a new cell can never overtake them.)
        if self.penalized && self.held.is_empty() && ahead <= self.ai {
            self.penalized = false;
            self.since_check = 0;
        }
        if !self.penalized {
            self.since_check += 1;
            let checked = self.since_check >= self.check_every;
            if checked {
                self.since_check = 0;
            }
            if !checked || ahead <= self.ai {
                self.vc = Some(stamp);
                self.counters.passed += 1;
                return Decision::PassNow;
            }
            self.penalized = true;
        }
        // ahead > AI here, so `due` lies strictly in the future.
        let due = Instant::from_picos(stamp.as_picos() - self.ai.as_picos());
        match self.penalty {
            VirtualClockPenalty::Drop => {}
            VirtualClockPenalty::DelayOrDrop { max } => {
                if due.saturating_duration_since(now) <= max {
                    self.vc = Some(stamp);
                    self.held.push_back((cell_id, due));
                    return Decision::Queued;
                }
            }
            VirtualClockPenalty::Delay { max } => {
                let cap = now.saturating_add(max);
                let release = if due <= cap {
                    self.vc = Some(stamp);
                    due
                } else {
                    // Capped: the cell leaves at now + B and the clock becomes the stamp
                    // that instant passes with (module doc, "A hold capped at B").
                    self.vc = Some(cap.saturating_add(self.ai));
                    cap
                };
                // Both terms of the release grow from one held cell to the next (module
                // doc), so this never reorders; the max only guards the invariant.
                let release = self.held.back().map_or(release, |b| b.1.max(release));
                self.held.push_back((cell_id, release));
                return Decision::Queued;
            }
        }
        self.counters.dropped += 1;
        Decision::Dropped
    }

    /// When the core next needs [`VirtualClock::handle_timeout`]: the release of the
    /// oldest held cell, `None` if none is held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.held.front().map(|h| h.1)
    }

    /// The timer fired: release the held cells due by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        self.release_due(now);
    }

    /// The next released cell: its identifier and release instant. FIFO.
    pub fn poll_transmit(&mut self) -> Option<(u64, Instant)> {
        self.released.pop_front()
    }

    fn clock(&mut self, now: Instant) -> Instant {
        let now = now.max(self.last);
        self.last = now;
        now
    }

    fn release_due(&mut self, now: Instant) {
        while let Some(&(id, release)) = self.held.front() {
            if release > now {
                break;
            }
            self.held.pop_front();
            self.released.push_back((id, release));
            self.counters.delayed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NS: u64 = 1_000;
    const US: u64 = 1_000_000;

    /// AR = 1e6 cells/s (tick 1 µs), AI = 10 µs, so N = 10.
    fn vc(penalty: VirtualClockPenalty) -> VirtualClock {
        VirtualClock::new(1e6, Duration::from_micros(10), penalty).unwrap()
    }

    /// Runs a shell over `arrivals` (ps, non-decreasing); returns each departed cell's
    /// (id, departure) in departure order, and the decisions.
    fn drive(v: &mut VirtualClock, arrivals: &[u64]) -> (Vec<(u64, Instant)>, Vec<Decision>) {
        let mut out = Vec::new();
        let mut decisions = Vec::new();
        let fire_until = |v: &mut VirtualClock, t: Instant, out: &mut Vec<(u64, Instant)>| {
            while let Some(w) = v.poll_timeout().filter(|w| *w <= t) {
                v.handle_timeout(w);
                out.extend(std::iter::from_fn(|| v.poll_transmit()));
            }
        };
        for (id, &a) in arrivals.iter().enumerate() {
            let t = Instant::from_picos(a);
            fire_until(v, t, &mut out);
            let d = v.handle_cell(t, id as u64);
            out.extend(std::iter::from_fn(|| v.poll_transmit()));
            if d == Decision::PassNow {
                out.push((id as u64, t));
            }
            decisions.push(d);
        }
        fire_until(v, Instant::MAX, &mut out);
        (out, decisions)
    }

    #[test]
    fn source_at_ar_is_never_penalized() {
        for penalty in [
            VirtualClockPenalty::Drop,
            VirtualClockPenalty::Delay {
                max: Duration::ZERO,
            },
        ] {
            let mut v = vc(penalty);
            assert_eq!(v.check_every(), 10);
            // Each cell finds VC = now exactly, so VC − now = 1 µs ≤ AI at every check.
            let arrivals: Vec<u64> = (0..5000).map(|k| 3 * NS + k * US).collect();
            let (_, d) = drive(&mut v, &arrivals);
            assert!(d.iter().all(|d| *d == Decision::PassNow));
            assert!(!v.is_penalized());
        }
    }

    #[test]
    fn double_rate_is_held_and_capped_never_dropped() {
        // Cells every 0.5 µs; N = 10, AI = 10 µs, B = 2 µs. By hand:
        //   i=19 t=9.5 : check, stamp 20, ahead 10.5 > 10     → penalized, due 10 (wait 0.5)
        //   i=20 t=10  : stamp 21, due 11 (wait 1)
        //   i=21 t=10.5: stamp 22, due 12 (wait 1.5)
        //   i=22 t=11  : stamp 23, due 13 (wait 2 = B)
        //   i=23 t=11.5: stamp 24, due 14 > 13.5 → capped: leaves 13.5, VC = 23.5
        //   i=24 t=12  : stamp 24.5, due 14.5 > 14 → capped at 14, VC = 24
        // and from there every cell is held exactly B: the flow stays twice its rate.
        let b = Duration::from_micros(2);
        let mut v = vc(VirtualClockPenalty::Delay { max: b });
        let arrivals: Vec<u64> = (0..4000).map(|i| i * 500 * NS).collect();
        let (out, d) = drive(&mut v, &arrivals);
        assert!(d[..19].iter().all(|d| *d == Decision::PassNow));
        assert!(d[19..].iter().all(|d| *d == Decision::Queued));
        let release = |id: u64| out.iter().find(|x| x.0 == id).unwrap().1;
        assert_eq!(release(19), Instant::from_picos(10 * US));
        assert_eq!(release(22), Instant::from_picos(13 * US));
        assert_eq!(release(23), Instant::from_picos(13 * US + 500 * NS));
        assert_eq!(release(24), Instant::from_picos(14 * US));
        assert_eq!(
            v.virtual_clock(),
            Some(Instant::from_picos(arrivals[3999] + 2 * US + 10 * US))
        );
        // Nothing lost, departures in arrival order, no wait above B.
        assert_eq!(out.len(), arrivals.len());
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        for (id, at) in &out {
            assert!(at.as_picos() - arrivals[*id as usize] <= b.as_picos());
        }
        assert_eq!(v.counters().dropped, 0);
    }

    #[test]
    fn capped_hold_then_silence_gives_jitter_b() {
        // A burst at 4 × AR long enough to reach the cap, then a silence: the last cell of
        // the burst waits B, the first after the silence passes at once. The delay falls
        // by exactly B: the paper's "maximal jitter … due to the maximal penalty delay".
        let b = Duration::from_micros(5);
        let mut v = vc(VirtualClockPenalty::Delay { max: b });
        let mut arrivals: Vec<u64> = (0..400).map(|i| i * 250 * NS).collect();
        arrivals.push(1_000 * US);
        let (out, d) = drive(&mut v, &arrivals);
        let wait =
            |id: usize| out.iter().find(|x| x.0 == id as u64).unwrap().1.as_picos() - arrivals[id];
        assert_eq!(wait(399), b.as_picos());
        assert_eq!(d[400], Decision::PassNow);
        assert_eq!(wait(400), 0);
    }

    #[test]
    fn double_rate_is_delayed_then_dropped_beyond_bound() {
        // Cells every 0.5 µs; VC after cell i is (i+1) µs. By hand (N = 10, AI = 10 µs,
        // max = 2 µs):
        //   i=9  t=4.5 : check, stamp 10, ahead 5.5 ≤ 10      → pass
        //   i=19 t=9.5 : check, stamp 20, ahead 10.5 > 10     → penalized, hold to 10
        //   i=20 t=10  : (19 leaves at 10) stamp 21, hold to 11 (wait 1)
        //   i=21 t=10.5: stamp 22, hold to 12 (wait 1.5)
        //   i=22 t=11  : stamp 23, hold to 13 (wait 2 ≤ 2)
        //   i=23 t=11.5: stamp 24, hold to 14 would wait 2.5  → dropped, VC stays 23
        //   i=24 t=12  : stamp 24, hold to 14 (wait 2)
        //   i=25 t=12.5: wait 2.5                             → dropped
        let mut v = vc(VirtualClockPenalty::DelayOrDrop {
            max: Duration::from_micros(2),
        });
        let arrivals: Vec<u64> = (0..4000).map(|i| i * 500 * NS).collect();
        let (out, d) = drive(&mut v, &arrivals);
        assert!(d[..19].iter().all(|d| *d == Decision::PassNow));
        assert_eq!(&d[19..23], &[Decision::Queued; 4]);
        assert_eq!(
            &d[23..26],
            &[Decision::Dropped, Decision::Queued, Decision::Dropped]
        );
        let release = |id: u64| out.iter().find(|x| x.0 == id).unwrap().1;
        assert_eq!(release(19), Instant::from_picos(10 * US));
        assert_eq!(release(24), Instant::from_picos(14 * US));
        // Every held cell waited at most the bound.
        for (id, at) in &out {
            let wait = at.as_picos() - arrivals[*id as usize];
            assert!(wait <= 2 * US, "cell {id} waited {wait} ps");
        }
        assert!(v.counters().delayed > 0 && v.counters().dropped > 0);
    }

    #[test]
    fn double_rate_with_drop_penalty() {
        // As above, but cell 19 is dropped (VC stays 19). At i=20, t=10: stamp 20, ahead
        // 10 ≤ AI → the penalty ends and cell 20 passes, opening a new check period.
        let mut v = vc(VirtualClockPenalty::Drop);
        let arrivals: Vec<u64> = (0..40).map(|i| i * 500 * NS).collect();
        let (_, d) = drive(&mut v, &arrivals);
        assert!(d[..19].iter().all(|d| *d == Decision::PassNow));
        assert_eq!(d[19], Decision::Dropped);
        // Next check at i=29 (t=14.5): stamp 29, ahead 14.5 → dropped, and the flow stays
        // penalized until ahead ≤ 10, i.e. t ≥ 19 (i = 38).
        assert!(d[20..29].iter().all(|d| *d == Decision::PassNow));
        assert!(d[29..38].iter().all(|d| *d == Decision::Dropped));
        assert_eq!(d[38], Decision::PassNow);
        assert_eq!(v.counters().delayed, 0);
    }

    /// Long-run pass rate of a greedy source (cells every 0.25 µs, 4 × AR).
    ///
    /// Tolerance, derived: for a greedy flow VC never lags real time, so accepted cells
    /// carry the consecutive stamps 1, 2, 3, … µs. Upper bound: a cell leaving at d
    /// passed a check or was between checks, so its stamp s ≤ d + AI + N·tick
    /// ≤ d + 2·AI + tick; hence departures by D ≤ (D + 2·AI + tick)·AR = D·AR + 21.
    /// Lower bound: VC(D) ≥ D − tick and every stamp up to min(VC(D), D + AI) has left by
    /// D (held cells leave at s − AI), so departures ≥ D·AR − 1. With D = 2000 µs the pass
    /// rate is AR within −0.05 % / +1.05 %.
    #[test]
    fn greedy_source_converges_to_ar() {
        for penalty in [
            VirtualClockPenalty::Drop,
            VirtualClockPenalty::DelayOrDrop {
                max: Duration::from_micros(5),
            },
            VirtualClockPenalty::DelayOrDrop {
                max: Duration::from_micros(100),
            },
        ] {
            let mut v = vc(penalty);
            let arrivals: Vec<u64> = (0..8000).map(|i| i * 250 * NS).collect();
            let (out, _) = drive(&mut v, &arrivals);
            let horizon = 2000 * US;
            let n = out.iter().filter(|x| x.1.as_picos() <= horizon).count() as u64;
            assert!(
                (1999..=2021).contains(&n),
                "{penalty:?}: {n} cells by 2000 µs"
            );
        }
    }

    #[test]
    fn earlier_time_and_extremes_do_not_panic() {
        let mut v = vc(VirtualClockPenalty::Delay {
            max: Duration::from_micros(3),
        });
        v.handle_cell(Instant::from_picos(50 * US), 0);
        v.handle_cell(Instant::from_picos(US), 1);
        v.handle_timeout(Instant::ZERO);
        for id in 2..40 {
            v.handle_cell(Instant::MAX, id);
            v.handle_timeout(Instant::MAX);
            while v.poll_transmit().is_some() {}
        }
        let mut v = vc(VirtualClockPenalty::DelayOrDrop {
            max: Duration::from_micros(3),
        });
        v.handle_cell(Instant::from_picos(50 * US), 0);
        v.handle_cell(Instant::from_picos(US), 1);
        v.handle_timeout(Instant::ZERO);
        for id in 2..40 {
            v.handle_cell(Instant::MAX, id);
            v.handle_timeout(Instant::MAX);
            while v.poll_transmit().is_some() {}
        }
    }

    #[test]
    fn constructors_validate() {
        let p = VirtualClockPenalty::Drop;
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = VirtualClock::new(bad, Duration::from_millis(1), p).unwrap_err();
            assert!(matches!(
                e,
                ModelsError::InvalidParameter {
                    param: "average_rate",
                    ..
                }
            ));
        }
        let e = VirtualClock::new(1e6, Duration::from_nanos(999), p).unwrap_err();
        assert!(matches!(
            e,
            ModelsError::InvalidParameter {
                param: "average_interval",
                ..
            }
        ));
        let e = VirtualClock::with_overdimensioning(60.0, 0.9, Duration::from_millis(360), p)
            .unwrap_err();
        assert!(matches!(
            e,
            ModelsError::InvalidParameter {
                param: "overdimensioning",
                ..
            }
        ));
        // The paper's voice setting: AR = 60 cells/s, AI = 360 ms → N = round(21.6) = 22.
        let v = VirtualClock::new(60.0, Duration::from_millis(360), p).unwrap();
        assert_eq!(v.check_every(), 22);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The paper's reading, whatever the arrivals: nothing is dropped, no cell waits
        /// longer than `max`, and cells leave in the order they came (held or passed).
        #[test]
        fn hold_never_drops_never_reorders(
            max_us in 0u64..20,
            gaps in proptest::collection::vec(0u64..3000, 1..400),
        ) {
            let max = Duration::from_micros(max_us);
            let mut v = vc(VirtualClockPenalty::Delay { max });
            let mut t = 0;
            let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g * NS; t }).collect();
            let (out, d) = drive(&mut v, &arrivals);
            prop_assert!(d.iter().all(|d| *d != Decision::Dropped));
            prop_assert_eq!(out.len(), arrivals.len());
            for w in out.windows(2) {
                prop_assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "FIFO: {:?}", w);
            }
            for (id, at) in &out {
                prop_assert!(at.as_picos() - arrivals[*id as usize] <= max.as_picos());
            }
            let c = v.counters();
            prop_assert_eq!(c.dropped, 0);
            prop_assert_eq!(c.passed + c.delayed, arrivals.len() as u64);
        }

        /// Delay-or-drop, whatever the arrivals: no held cell waits longer than `max`, held
        /// cells leave in FIFO order, and every cell is accounted for exactly once.
        #[test]
        fn delay_bound_fifo_and_conservation(
            max_us in 0u64..20,
            gaps in proptest::collection::vec(0u64..3000, 1..400),
        ) {
            let max = Duration::from_micros(max_us);
            let mut v = vc(VirtualClockPenalty::DelayOrDrop { max });
            let mut t = 0;
            let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g * NS; t }).collect();
            let (out, d) = drive(&mut v, &arrivals);
            let mut last_held = None;
            for (id, at) in &out {
                let wait = at.as_picos() - arrivals[*id as usize];
                prop_assert!(wait <= max.as_picos());
                if d[*id as usize] == Decision::Queued {
                    prop_assert!(last_held < Some(*id), "FIFO");
                    last_held = Some(*id);
                }
            }
            let c = v.counters();
            prop_assert_eq!(c.passed + c.delayed + c.dropped, arrivals.len() as u64);
            prop_assert_eq!(out.len() as u64, c.passed + c.delayed);
        }
    }
}
