//! The Generic Cell Rate Algorithm GCRA(T, τ) of ITU-T I.371 §4.4.4 / ATM Forum Traffic
//! Management 4.0 §4.4 (and its Annex C), the conformance test of ATM usage parameter
//! control (UPC).
//!
//! The standard gives two equivalent forms, the virtual scheduling algorithm and the
//! continuous-state leaky bucket. This core implements virtual scheduling, which keeps a
//! single number, the theoretical arrival time TAT of the next cell:
//!
//! * first cell at t_a: TAT ← t_a;
//! * a cell at t_a with TAT > t_a + τ is **non-conforming**, and TAT is left unchanged
//!   (a cell that is discarded or tagged must not use up the contract);
//! * otherwise it is **conforming** and TAT ← max(t_a, TAT) + T.
//!
//! The continuous-state leaky bucket (bucket content X, drained at rate 1, incremented by
//! T per conforming cell, limit T + τ) yields the same verdicts because X + LCT = TAT;
//! the tests check this on random arrival sequences.
//!
//! It lives in the core because two crates police with it: `atmlab-models` (the access
//! mechanisms of paper 003 and the UPC models) and `atmlab-fabric` (the live switch's
//! usage parameter control at ingress, issue 24).

use crate::error::CoreError;
use crate::time::{Duration, Instant};

/// The spacing 1/`rate` of a rate in cells per second, validated: finite, positive, and
/// not so high that the spacing rounds to zero picoseconds.
fn interval_of_rate(param: &'static str, rate: f64) -> Result<Duration, CoreError> {
    if !rate.is_finite() || rate <= 0.0 {
        return Err(CoreError::InvalidParameter {
            param,
            reason: format!("must be a finite positive rate in cells/s, got {rate}"),
        });
    }
    let interval = Duration::from_secs_f64(1.0 / rate);
    if interval == Duration::ZERO {
        return Err(CoreError::InvalidParameter {
            param,
            reason: format!("{rate} cells/s is above 1e12 cells/s (spacing under 1 ps)"),
        });
    }
    Ok(interval)
}

/// The verdict of [`Gcra::handle_cell`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conformance {
    /// The cell respects the traffic contract; it was counted against it.
    Conforming,
    /// The cell violates the contract; the UPC may discard or tag it. It was not counted.
    NonConforming,
}

/// GCRA(T, τ): a pure conformance test, it neither delays nor drops cells itself.
///
/// Call order: one [`Gcra::handle_cell`] per arriving cell, in arrival order, with
/// non-decreasing `now` (an earlier `now` is treated as the latest seen). The core has
/// no timer, so there is no `poll_timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gcra {
    increment: Duration,
    limit: Duration,
    /// `None` until the first cell: the standard sets TAT to the first arrival time, and
    /// an `Option` keeps that right whatever epoch the shell uses.
    tat: Option<Instant>,
    last: Instant,
}

impl Gcra {
    /// GCRA with increment `T` (the contracted cell spacing) and limit `τ` (the
    /// tolerance). `T` must be positive: a zero increment would accept any traffic.
    pub fn new(increment: Duration, limit: Duration) -> Result<Self, CoreError> {
        if increment == Duration::ZERO {
            return Err(CoreError::InvalidParameter {
                param: "increment",
                reason: "the increment T must be positive, got 0".into(),
            });
        }
        Ok(Gcra {
            increment,
            limit,
            tat: None,
            last: Instant::ZERO,
        })
    }

    /// The peak cell rate test GCRA(1/PCR, CDVT) of TM 4.0 §4.4.1 (T = 1/PCR rounded to
    /// the picosecond, τ = CDVT).
    pub fn for_pcr(pcr_cells_per_sec: f64, cdvt: Duration) -> Result<Self, CoreError> {
        let t = interval_of_rate("pcr", pcr_cells_per_sec)?;
        Gcra::new(t, cdvt)
    }

    /// The sustainable cell rate test GCRA(Ts, τs) of TM 4.0 §4.4.2, with
    ///
    /// Ts = 1/SCR and τs = BT + CDVT, where the burst tolerance BT = (MBS − 1)(Ts − T)
    /// and T = 1/PCR.
    ///
    /// BT is the slack that lets exactly MBS back-to-back cells at the peak rate through
    /// a GCRA with increment Ts: cells k = 0, 1, … arriving at k·T find TAT = k·Ts, so
    /// cell k conforms iff k·(Ts − T) ≤ τs, and cells 0..MBS−1 conform when
    /// τs = (MBS − 1)(Ts − T). The formula needs the PCR, so it is a parameter here.
    /// Requires SCR ≤ PCR and MBS ≥ 1.
    pub fn for_scr(
        scr_cells_per_sec: f64,
        pcr_cells_per_sec: f64,
        mbs: u32,
        cdvt: Duration,
    ) -> Result<Self, CoreError> {
        let ts = interval_of_rate("scr", scr_cells_per_sec)?;
        let t = interval_of_rate("pcr", pcr_cells_per_sec)?;
        if scr_cells_per_sec > pcr_cells_per_sec {
            return Err(CoreError::InvalidParameter {
                param: "scr",
                reason: format!(
                    "SCR {scr_cells_per_sec} cells/s exceeds PCR {pcr_cells_per_sec} cells/s"
                ),
            });
        }
        if mbs == 0 {
            return Err(CoreError::InvalidParameter {
                param: "mbs",
                reason: "the maximum burst size must be at least 1 cell, got 0".into(),
            });
        }
        // Saturating: SCR ≤ PCR makes Ts ≥ T, but rounding to picoseconds could in
        // principle flip equal rates by 1 ps; the tolerance must not underflow.
        let gap = ts.as_picos().saturating_sub(t.as_picos());
        let bt = Duration::from_picos(gap).saturating_mul(u64::from(mbs - 1));
        let tau = Duration::from_picos(bt.as_picos().saturating_add(cdvt.as_picos()));
        Gcra::new(ts, tau)
    }

    /// The increment T.
    pub fn increment(&self) -> Duration {
        self.increment
    }

    /// The limit τ.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// The theoretical arrival time of the next cell, `None` before the first cell.
    pub fn tat(&self) -> Option<Instant> {
        self.tat
    }

    /// Whether a cell arriving at `now` would conform, without counting it (the dual
    /// GCRA of a VBR contract counts a cell only if it conforms to both tests).
    pub fn conforms(&self, now: Instant) -> bool {
        let now = now.max(self.last);
        let tat = self.tat.unwrap_or(now);
        tat <= now.saturating_add(self.limit)
    }

    /// Tests the cell arriving at `now` and, if it conforms, counts it against the
    /// contract.
    pub fn handle_cell(&mut self, now: Instant) -> Conformance {
        let now = now.max(self.last);
        self.last = now;
        let tat = self.tat.unwrap_or(now);
        // Saturating: past 213 days of picoseconds the comparison simply stays correct
        // at the ceiling instead of panicking.
        if tat > now.saturating_add(self.limit) {
            return Conformance::NonConforming;
        }
        self.tat = Some(tat.max(now).saturating_add(self.increment));
        Conformance::Conforming
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn us(n: u64) -> Instant {
        Instant::from_picos(n * 1_000_000)
    }

    #[test]
    fn textbook_sequence_t10_tau2() {
        // T = 10, τ = 2 (units of 1 µs). By hand, with the rule "TAT > t + τ ⇒ NC":
        //   t=0 : first cell, TAT=0 ≤ 2      → C,  TAT = 0+10  = 10
        //   t=10: TAT=10 ≤ 12                → C,  TAT = 10+10 = 20
        //   t=18: TAT=20 ≤ 20                → C,  TAT = 20+10 = 30  (2 early: within τ)
        //   t=25: TAT=30 > 27                → NC, TAT stays 30
        //   t=28: TAT=30 ≤ 30                → C,  TAT = 40
        //   t=37: TAT=40 > 39                → NC, TAT stays 40
        //   t=38: TAT=40 ≤ 40                → C,  TAT = 50
        //   t=60: TAT=50 ≤ 62 (idle)         → C,  TAT = max(60,50)+10 = 70
        let mut g = Gcra::new(Duration::from_micros(10), Duration::from_micros(2)).unwrap();
        use Conformance::*;
        let expect = [
            (0, Conforming, 10),
            (10, Conforming, 20),
            (18, Conforming, 30),
            (25, NonConforming, 30),
            (28, Conforming, 40),
            (37, NonConforming, 40),
            (38, Conforming, 50),
            (60, Conforming, 70),
        ];
        for (t, verdict, tat) in expect {
            assert_eq!(g.handle_cell(us(t)), verdict, "cell at {t}");
            assert_eq!(g.tat(), Some(us(tat)), "TAT after cell at {t}");
        }
    }

    #[test]
    fn earlier_time_is_treated_as_latest() {
        let mut g = Gcra::new(Duration::from_micros(10), Duration::ZERO).unwrap();
        assert_eq!(g.handle_cell(us(100)), Conformance::Conforming);
        // A cell "at 50" is taken to arrive at 100: TAT = 110 > 100 → NC, no panic.
        assert_eq!(g.handle_cell(us(50)), Conformance::NonConforming);
        assert_eq!(g.tat(), Some(us(110)));
    }

    #[test]
    fn scr_lets_exactly_mbs_cells_through_at_pcr() {
        // PCR 1e6 cells/s (T = 1 µs), SCR 2.5e5 (Ts = 4 µs), MBS 5, CDVT 0:
        // τs = (5−1)(4−1) = 12 µs. Cells at the peak rate, t = 0,1,2,...: cell k has
        // TAT = 4k before it, conforming iff 4k ≤ k + 12, i.e. k ≤ 4: exactly 5 cells.
        let mut g = Gcra::for_scr(2.5e5, 1e6, 5, Duration::ZERO).unwrap();
        assert_eq!(g.limit(), Duration::from_micros(12));
        let verdicts: Vec<_> = (0..7).map(|k| g.handle_cell(us(k))).collect();
        let conforming = verdicts
            .iter()
            .take_while(|v| **v == Conformance::Conforming)
            .count();
        assert_eq!(conforming, 5);
        assert_eq!(verdicts[5], Conformance::NonConforming);
    }

    #[test]
    fn pcr_constructor_and_validation() {
        let g = Gcra::for_pcr(1e6, Duration::from_nanos(500)).unwrap();
        assert_eq!(g.increment(), Duration::from_micros(1));
        assert_eq!(g.limit(), Duration::from_nanos(500));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e13] {
            let e = Gcra::for_pcr(bad, Duration::ZERO).unwrap_err();
            assert!(matches!(
                e,
                CoreError::InvalidParameter { param: "pcr", .. }
            ));
        }
        let e = Gcra::new(Duration::ZERO, Duration::ZERO).unwrap_err();
        assert!(matches!(
            e,
            CoreError::InvalidParameter {
                param: "increment",
                ..
            }
        ));
        let e = Gcra::for_scr(2e6, 1e6, 5, Duration::ZERO).unwrap_err();
        assert!(matches!(
            e,
            CoreError::InvalidParameter { param: "scr", .. }
        ));
        let e = Gcra::for_scr(1e5, 1e6, 0, Duration::ZERO).unwrap_err();
        assert!(matches!(
            e,
            CoreError::InvalidParameter { param: "mbs", .. }
        ));
    }

    /// The continuous-state leaky bucket of I.371 / TM 4.0, written independently as the
    /// reference: X is the bucket content, LCT the last conformance time.
    struct ContinuousStateLb {
        t: u64,
        tau: u64,
        x: u64,
        lct: Option<u64>,
    }

    impl ContinuousStateLb {
        fn handle(&mut self, ta: u64) -> Conformance {
            let lct = self.lct.unwrap_or(ta);
            // X' = X − (ta − LCT), floored at 0.
            let x1 = self.x.saturating_sub(ta - lct);
            if x1 > self.tau {
                Conformance::NonConforming
            } else {
                self.x = x1 + self.t;
                self.lct = Some(ta);
                Conformance::Conforming
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn equivalent_to_continuous_state_leaky_bucket(
            t in 1u64..50,
            tau in 0u64..100,
            gaps in proptest::collection::vec(0u64..60, 1..200),
        ) {
            let mut vs = Gcra::new(Duration::from_picos(t), Duration::from_picos(tau)).unwrap();
            let mut lb = ContinuousStateLb { t, tau, x: 0, lct: None };
            let mut now = 0u64;
            for gap in gaps {
                now += gap;
                prop_assert_eq!(vs.handle_cell(Instant::from_picos(now)), lb.handle(now));
            }
        }
    }
}
