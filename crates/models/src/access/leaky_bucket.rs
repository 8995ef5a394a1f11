//! The Leaky Bucket of paper 003, section 2 ("Leaky Bucket", after Turner [12]), with the
//! overdimensioning factor C of section 3 (after [9]).
//!
//! The paper's description: "a token/credit generator, a pool of tokens/credits, and a
//! buffer (this buffer can be optional). Credits are generated every δ seconds and stored
//! in the pool of maximum size B credits. An arriving cell … uses one credit from the pool
//! and leaves the system immediately. An arriving cell that finds the credit pool empty
//! joins the queue if the buffer is not full. When the queue is not empty … and a credit
//! is generated, one cell takes the credit and leaves immediately." Section 3 sets the
//! credit rate 1/δ to C times the negotiated mean rate ("the Leaky Bucket credit rate is
//! equal to C times the negotiated mean traffic rate").
//!
//! Choices the paper leaves open, and why:
//!
//! * **The pool starts full** (B credits) at the first event the core sees. The paper does
//!   not say; full is the usual token-bucket convention and matches a source that has
//!   been silent for long, so a connection's first burst of up to B cells is not delayed.
//! * **Credits are deterministic**: with the start at s and spacing δ = 1/rate (rounded to
//!   the picosecond), credit k is generated at s + k·δ whether or not the pool has room
//!   (a credit finding the pool full is lost). The generator is a clock, not a timer
//!   re-armed by use, so the long-run credit rate is exactly 1/δ.
//! * **A credit and a cell at the same instant**: the credit is generated first, so a
//!   source at exactly the credit rate, in phase with the generator, is never delayed.
//! * The paper's mechanism is a shaper; [`LeakyBucketMode::Policer`] is the ATM UPC use
//!   of the same pool without a buffer (a cell finding no credit is dropped or tagged
//!   CLP = 1).

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};

use super::{AccessCounters, Decision, interval_of_rate, overdimension};
use crate::ModelsError;

const MODEL: &str = "LeakyBucket";

/// What the bucket does with a cell that finds the credit pool empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeakyBucketMode {
    /// The paper's mechanism: the cell waits for a credit in a FIFO buffer of at most
    /// `buffer` cells (`None`: unlimited); a cell finding the buffer full is dropped.
    /// `Some(0)` is allowed and behaves as a dropping policer.
    Shaper {
        /// Buffer capacity in cells, not counting cells that pass at once.
        buffer: Option<usize>,
    },
    /// UPC use: no buffer. The cell is dropped, or with `tag` passed with CLP = 1.
    Policer {
        /// Pass non-conforming cells tagged instead of dropping them.
        tag: bool,
    },
}

/// The credit-pool Leaky Bucket (sans-IO core).
///
/// Call order for a shell:
///
/// 1. for each arriving cell, [`LeakyBucket::handle_cell`]`(now, id)`; a
///    [`Decision::PassNow`] or [`Decision::Tagged`] cell leaves at `now`;
/// 2. when the timer armed at [`LeakyBucket::poll_timeout`] fires,
///    [`LeakyBucket::handle_timeout`]`(now)`;
/// 3. after every `handle_*` call, drain [`LeakyBucket::poll_transmit`] until `None`:
///    each item is a queued cell and the exact instant its credit was generated (its
///    departure time; it may be earlier than `now` if the shell woke late);
/// 4. then re-read [`LeakyBucket::poll_timeout`] and re-arm the timer (or cancel it on
///    `None`).
///
/// `now` must be non-decreasing; an earlier `now` is treated as the latest seen. Cells
/// queued in the core are released in FIFO order.
#[derive(Debug, Clone)]
pub struct LeakyBucket {
    interval: Duration,
    pool_max: u32,
    mode: LeakyBucketMode,
    credits: u32,
    /// When the next credit is generated; `None` until the first event starts the
    /// generator.
    next_credit: Option<Instant>,
    last: Instant,
    queue: VecDeque<u64>,
    released: VecDeque<(u64, Instant)>,
    counters: AccessCounters,
}

impl LeakyBucket {
    /// A bucket generating `credit_rate` credits per second into a pool of `pool` (B)
    /// credits. Requires a finite positive rate and B ≥ 1.
    pub fn new(credit_rate: f64, pool: u32, mode: LeakyBucketMode) -> Result<Self, ModelsError> {
        let interval = interval_of_rate(MODEL, "credit_rate", credit_rate)?;
        if pool == 0 {
            return Err(ModelsError::InvalidParameter {
                model: MODEL,
                param: "pool",
                reason: "the credit pool B must hold at least 1 credit, got 0".into(),
            });
        }
        Ok(LeakyBucket {
            interval,
            pool_max: pool,
            mode,
            credits: pool,
            next_credit: None,
            last: Instant::ZERO,
            queue: VecDeque::new(),
            released: VecDeque::new(),
            counters: AccessCounters::default(),
        })
    }

    /// A bucket dimensioned as in paper 003, section 3: credit rate = C × the negotiated
    /// mean rate `mean_rate`, with C ≥ 1 (the paper uses C = 1, 1.15, 1.2, 1.4).
    pub fn with_overdimensioning(
        mean_rate: f64,
        c: f64,
        pool: u32,
        mode: LeakyBucketMode,
    ) -> Result<Self, ModelsError> {
        LeakyBucket::new(overdimension(MODEL, mean_rate, c)?, pool, mode)
    }

    /// The spacing δ between credits, 1/credit_rate rounded to the picosecond.
    pub fn credit_interval(&self) -> Duration {
        self.interval
    }

    /// The pool size B.
    pub fn pool_size(&self) -> u32 {
        self.pool_max
    }

    /// Credits in the pool as of the latest `handle_*` call.
    pub fn credits(&self) -> u32 {
        self.credits
    }

    /// Cells waiting in the buffer (not counting released cells not yet polled).
    pub fn occupancy(&self) -> usize {
        self.queue.len()
    }

    /// What the bucket has done so far.
    pub fn counters(&self) -> AccessCounters {
        self.counters
    }

    /// A cell with identifier `cell_id` arrives at `now`.
    pub fn handle_cell(&mut self, now: Instant, cell_id: u64) -> Decision {
        let now = self.clock(now);
        self.advance(now);
        // Invariant: a non-empty queue means an empty pool, so a new cell can never
        // overtake queued ones.
        if self.credits > 0 {
            self.credits -= 1;
            self.counters.passed += 1;
            return Decision::PassNow;
        }
        match self.mode {
            LeakyBucketMode::Shaper { buffer } => {
                if buffer.is_none_or(|k| self.queue.len() < k) {
                    self.queue.push_back(cell_id);
                    Decision::Queued
                } else {
                    self.counters.dropped += 1;
                    Decision::Dropped
                }
            }
            LeakyBucketMode::Policer { tag: true } => {
                self.counters.tagged += 1;
                Decision::Tagged
            }
            LeakyBucketMode::Policer { tag: false } => {
                self.counters.dropped += 1;
                Decision::Dropped
            }
        }
    }

    /// When the core next needs [`LeakyBucket::handle_timeout`]: the next credit, if
    /// cells are waiting for one; `None` otherwise (credits accrue lazily, so an idle
    /// bucket needs no wake-ups).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.queue.is_empty() {
            None
        } else {
            self.next_credit
        }
    }

    /// The timer fired: generate the credits due by `now`, releasing queued cells.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        self.advance(now);
    }

    /// The next released cell: its identifier and its departure instant (the instant of
    /// the credit it took). FIFO.
    pub fn poll_transmit(&mut self) -> Option<(u64, Instant)> {
        self.released.pop_front()
    }

    /// Clamps `now` to be non-decreasing and starts the generator on the first event.
    fn clock(&mut self, now: Instant) -> Instant {
        let now = now.max(self.last);
        self.last = now;
        if self.next_credit.is_none() {
            // Credit 0 is the full pool at the start; credit 1 comes one interval later.
            self.next_credit = Some(now.saturating_add(self.interval));
        }
        now
    }

    /// Generates every credit due at or before `now`.
    fn advance(&mut self, now: Instant) {
        let Some(mut next) = self.next_credit else {
            return;
        };
        // Queued cells take credits one by one as they are generated, at the credit's
        // own instant: that is their departure time.
        while next <= now {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            self.released.push_back((id, next));
            self.counters.delayed += 1;
            next = next.saturating_add(self.interval);
        }
        if next <= now {
            // The queue is empty: the remaining credits due go to the pool in one step
            // (an idle bucket costs O(1) however long the gap), excess ones are lost.
            let due = (now - next).as_picos() / self.interval.as_picos() + 1;
            let credits = u64::from(self.credits).saturating_add(due);
            self.credits = credits.min(u64::from(self.pool_max)) as u32;
            next = next.saturating_add(self.interval.saturating_mul(due));
        }
        self.next_credit = Some(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn us(n: u64) -> Instant {
        Instant::from_picos(n * 1_000_000)
    }

    /// Runs a shell over `arrivals` (non-decreasing, in ps), returning every cell's
    /// departure (id, time) in departure order and the decisions.
    fn drive(lb: &mut LeakyBucket, arrivals: &[u64]) -> (Vec<(u64, Instant)>, Vec<Decision>) {
        let mut out = Vec::new();
        let mut decisions = Vec::new();
        let fire_until = |lb: &mut LeakyBucket, t: Instant, out: &mut Vec<(u64, Instant)>| {
            while let Some(w) = lb.poll_timeout().filter(|w| *w <= t) {
                lb.handle_timeout(w);
                while let Some(x) = lb.poll_transmit() {
                    assert_eq!(x.1, w, "released at the timer instant");
                    out.push(x);
                }
            }
        };
        for (id, &a) in arrivals.iter().enumerate() {
            let t = Instant::from_picos(a);
            fire_until(lb, t, &mut out);
            let d = lb.handle_cell(t, id as u64);
            assert!(lb.poll_transmit().is_none(), "timers were served on time");
            if matches!(d, Decision::PassNow | Decision::Tagged) {
                out.push((id as u64, t));
            }
            decisions.push(d);
        }
        fire_until(lb, Instant::MAX, &mut out);
        (out, decisions)
    }

    #[test]
    fn cbr_at_credit_rate_is_never_delayed() {
        for pool in [1, 5] {
            let mut lb =
                LeakyBucket::new(1e6, pool, LeakyBucketMode::Shaper { buffer: None }).unwrap();
            // Start at an arbitrary phase: the generator starts with the first cell.
            let arrivals: Vec<u64> = (0..1000).map(|k| 7_300_000 + k * 1_000_000).collect();
            let (_, decisions) = drive(&mut lb, &arrivals);
            assert!(decisions.iter().all(|d| *d == Decision::PassNow));
            assert_eq!(lb.counters().passed, 1000);
            assert_eq!(lb.poll_timeout(), None);
        }
    }

    #[test]
    fn shaper_burst_b_pass_rest_spaced_by_credit_interval() {
        // B = 4, a burst of 7 cells at t = 0: 4 pass, 3 wait for credits at 1, 2, 3 µs.
        let mut lb = LeakyBucket::new(1e6, 4, LeakyBucketMode::Shaper { buffer: None }).unwrap();
        let d: Vec<_> = (0..7).map(|id| lb.handle_cell(us(0), id)).collect();
        assert_eq!(&d[..4], &[Decision::PassNow; 4]);
        assert_eq!(&d[4..], &[Decision::Queued; 3]);
        assert_eq!(lb.occupancy(), 3);
        let mut released = Vec::new();
        while let Some(t) = lb.poll_timeout() {
            lb.handle_timeout(t);
            released.extend(std::iter::from_fn(|| lb.poll_transmit()));
        }
        assert_eq!(released, vec![(4, us(1)), (5, us(2)), (6, us(3))]);
        let c = lb.counters();
        assert_eq!((c.passed, c.delayed, c.dropped, c.tagged), (4, 3, 0, 0));
        assert_eq!(lb.credits(), 0);
    }

    #[test]
    fn late_shell_gets_exact_departure_times() {
        let mut lb = LeakyBucket::new(1e6, 1, LeakyBucketMode::Shaper { buffer: None }).unwrap();
        for id in 0..4 {
            lb.handle_cell(us(0), id);
        }
        // The shell sleeps through three credits, then wakes at 10 µs.
        lb.handle_timeout(us(10));
        let r: Vec<_> = std::iter::from_fn(|| lb.poll_transmit()).collect();
        assert_eq!(r, vec![(1, us(1)), (2, us(2)), (3, us(3))]);
        // Credits 4..=10 refill the pool to B = 1 (the rest are lost).
        assert_eq!(lb.credits(), 1);
        assert_eq!(lb.handle_cell(us(10), 9), Decision::PassNow);
        assert_eq!(lb.handle_cell(us(10), 10), Decision::Queued);
        assert_eq!(lb.poll_timeout(), Some(us(11)));
    }

    #[test]
    fn policer_drops_or_tags_excess() {
        for (tag, excess) in [(false, Decision::Dropped), (true, Decision::Tagged)] {
            let mut lb = LeakyBucket::new(1e6, 3, LeakyBucketMode::Policer { tag }).unwrap();
            let d: Vec<_> = (0..5).map(|id| lb.handle_cell(us(0), id)).collect();
            assert_eq!(&d[..3], &[Decision::PassNow; 3]);
            assert_eq!(&d[3..], &[excess; 2]);
            assert_eq!(lb.poll_timeout(), None);
            assert_eq!(lb.occupancy(), 0);
            let c = lb.counters();
            assert_eq!(c.dropped + c.tagged, 2);
            // One credit later, one more cell conforms.
            assert_eq!(lb.handle_cell(us(1), 5), Decision::PassNow);
            assert_eq!(lb.handle_cell(us(1), 6), excess);
        }
    }

    #[test]
    fn buffer_overflow_drops() {
        let mut lb = LeakyBucket::new(1e6, 2, LeakyBucketMode::Shaper { buffer: Some(2) }).unwrap();
        let d: Vec<_> = (0..7).map(|id| lb.handle_cell(us(0), id)).collect();
        assert_eq!(
            d,
            [
                Decision::PassNow,
                Decision::PassNow,
                Decision::Queued,
                Decision::Queued,
                Decision::Dropped,
                Decision::Dropped,
                Decision::Dropped,
            ]
        );
        assert_eq!(lb.occupancy(), 2);
        assert_eq!(lb.counters().dropped, 3);
    }

    #[test]
    fn earlier_time_is_treated_as_latest() {
        let mut lb = LeakyBucket::new(1e6, 1, LeakyBucketMode::Shaper { buffer: None }).unwrap();
        assert_eq!(lb.handle_cell(us(5), 0), Decision::PassNow);
        // "At 1 µs" is taken as 5 µs: no credit yet, and no panic.
        assert_eq!(lb.handle_cell(us(1), 1), Decision::Queued);
        assert_eq!(lb.poll_timeout(), Some(us(6)));
        lb.handle_timeout(us(0));
        assert!(lb.poll_transmit().is_none());
    }

    #[test]
    fn extreme_times_do_not_panic() {
        let mut lb = LeakyBucket::new(1.0, 1, LeakyBucketMode::Shaper { buffer: None }).unwrap();
        lb.handle_cell(Instant::MAX, 0);
        lb.handle_cell(Instant::MAX, 1);
        lb.handle_cell(Instant::MAX, 2);
        lb.handle_timeout(Instant::MAX);
        while lb.poll_transmit().is_some() {}
        lb.handle_cell(Instant::MAX, 3);
    }

    #[test]
    fn constructors_validate() {
        let shaper = LeakyBucketMode::Shaper { buffer: None };
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            let e = LeakyBucket::new(bad, 1, shaper).unwrap_err();
            assert!(matches!(
                e,
                ModelsError::InvalidParameter {
                    param: "credit_rate",
                    ..
                }
            ));
            let e = LeakyBucket::with_overdimensioning(bad, 1.2, 1, shaper).unwrap_err();
            assert!(matches!(
                e,
                ModelsError::InvalidParameter {
                    param: "mean_rate",
                    ..
                }
            ));
        }
        let e = LeakyBucket::new(60.0, 0, shaper).unwrap_err();
        assert!(matches!(
            e,
            ModelsError::InvalidParameter { param: "pool", .. }
        ));
        for bad in [0.5, 0.0, f64::NAN, f64::INFINITY] {
            let e = LeakyBucket::with_overdimensioning(60.0, bad, 60, shaper).unwrap_err();
            assert!(matches!(
                e,
                ModelsError::InvalidParameter {
                    param: "overdimensioning",
                    ..
                }
            ));
        }
        // The paper's video setting: 10 156 cells/s × C = 1.4, pool 918.
        let lb = LeakyBucket::with_overdimensioning(10_156.0, 1.4, 918, shaper).unwrap();
        let expect = Duration::from_secs_f64(1.0 / (10_156.0 * 1.4));
        assert_eq!(lb.credit_interval(), expect);
        assert_eq!(lb.pool_size(), 918);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// A CBR source at or below the credit rate, in any phase, is never delayed or
        /// dropped: each cell finds a credit (the pool starts full and a credit comes at
        /// least as often as a cell).
        #[test]
        fn cbr_below_shaping_rate_is_never_delayed(
            interval in 5u64..1000,
            slack in 0u64..1000,
            phase in 0u64..1_000_000,
            pool in 1u32..4,
            n in 1usize..300,
        ) {
            let mut lb = LeakyBucket::new(1e12 / interval as f64, pool, LeakyBucketMode::Shaper { buffer: Some(0) }).unwrap();
            let period = lb.credit_interval().as_picos() + slack;
            let arrivals: Vec<u64> = (0..n as u64).map(|k| phase + k * period).collect();
            let (out, decisions) = drive(&mut lb, &arrivals);
            prop_assert!(decisions.iter().all(|d| *d == Decision::PassNow));
            for (id, when) in out {
                prop_assert_eq!(when.as_picos(), arrivals[id as usize]);
            }
        }

        /// Any window [t, t + w] holds at most B + w·rate + 1 departures, whatever the
        /// arrivals; every cell leaves no earlier than it came, queued cells in FIFO order.
        #[test]
        fn output_never_exceeds_credit_rate(
            interval in 5u64..50,
            pool in 1u32..6,
            buffer in proptest::option::of(0usize..20),
            policer in any::<bool>(),
            gaps in proptest::collection::vec(0u64..40, 1..300),
            w in 0u64..400,
        ) {
            let mode = if policer {
                LeakyBucketMode::Policer { tag: false }
            } else {
                LeakyBucketMode::Shaper { buffer }
            };
            let mut lb = LeakyBucket::new(1e12 / interval as f64, pool, mode).unwrap();
            prop_assert_eq!(lb.credit_interval().as_picos(), interval);
            let mut t = 0;
            let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g; t }).collect();
            let (out, _) = drive(&mut lb, &arrivals);
            let mut times: Vec<u64> = out.iter().map(|x| x.1.as_picos()).collect();
            for (id, when) in &out {
                prop_assert!(when.as_picos() >= arrivals[*id as usize]);
            }
            let c = lb.counters();
            prop_assert_eq!(c.passed + c.delayed + c.dropped, arrivals.len() as u64);
            times.sort_unstable();
            let bound = u64::from(pool) + w / interval + 1;
            for (i, &start) in times.iter().enumerate() {
                let n = times[i..].iter().take_while(|&&d| d <= start + w).count() as u64;
                prop_assert!(n <= bound, "{} departures in [{}, {}]", n, start, start + w);
            }
            let delayed: Vec<u64> = out
                .iter()
                .filter(|(id, when)| when.as_picos() > arrivals[*id as usize])
                .map(|x| x.0)
                .collect();
            prop_assert!(delayed.windows(2).all(|p| p[0] < p[1]), "FIFO");
        }
    }
}
