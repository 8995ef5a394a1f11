//! The constant-bit-rate source: deterministic gaps.
//!
//! The ATM CBR class (circuit emulation, uncompressed voice); with a random phase, many
//! CBR sources on one link do not start in lock-step, which would otherwise make their
//! cells collide in every slot.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::rng::SimRng;
use rand::Rng;

use super::{Arrival, PS_PER_S, TrafficSource, at_multiple, check_rate};
use crate::ModelsError;

/// One unit every `1/rate` seconds.
///
/// The k-th arrival is at `start + offset + phase + round(k / rate)` picoseconds, with the
/// rounding applied to the total rather than to each gap, so the long-run rate is exact
/// even when `1/rate` is not a whole number of picoseconds (167 cells/s is a period of
/// 5,988,023,952.1 ps).
#[derive(Debug, Clone)]
pub struct Cbr {
    rate: f64,
    period_ps: f64,
    start: Instant,
    offset: Duration,
    random_phase: bool,
    /// The instant of arrival 0, fixed at the first call (when the random phase is
    /// drawn); `None` before it.
    origin: Option<Instant>,
    /// The index of the next arrival.
    k: u64,
    ended: bool,
}

impl Cbr {
    /// A CBR source of `rate` units per second (finite, `0 < rate <= 1e12`) whose first
    /// unit arrives at `start`.
    pub fn new(rate: f64, start: Instant) -> Result<Self, ModelsError> {
        let rate = check_rate("Cbr", "rate", rate)?;
        Ok(Cbr {
            rate,
            period_ps: PS_PER_S / rate,
            start,
            offset: Duration::ZERO,
            random_phase: false,
            origin: None,
            k: 0,
            ended: false,
        })
    }

    /// Delays the first arrival by `offset` after the start instant.
    pub fn with_offset(mut self, offset: Duration) -> Self {
        self.offset = offset;
        self
    }

    /// Delays the first arrival further by a phase drawn uniformly from `[0, 1/rate)`
    /// (from the caller's stream, at the first call), so that independent CBR sources
    /// are not synchronised.
    pub fn with_random_phase(mut self) -> Self {
        self.random_phase = true;
        self
    }

    /// The period `1/rate`, rounded to the picosecond (the arrivals themselves do not
    /// accumulate this rounding).
    pub fn period(&self) -> Duration {
        Duration::from_picos(self.period_ps.round() as u64)
    }
}

impl TrafficSource for Cbr {
    fn next_arrival(&mut self, rng: &mut SimRng) -> Option<Arrival> {
        if self.ended {
            return None;
        }
        let origin = match self.origin {
            Some(o) => Some(o),
            None => {
                // floor keeps the phase strictly below one period.
                let phase = if self.random_phase {
                    Duration::from_picos((rng.random::<f64>() * self.period_ps).floor() as u64)
                } else {
                    Duration::ZERO
                };
                self.start
                    .checked_add(self.offset)
                    .and_then(|t| t.checked_add(phase))
            }
        };
        let at = origin.and_then(|o| at_multiple(o, self.k, self.period_ps));
        let Some(at) = at else {
            self.ended = true;
            return None;
        };
        self.origin = origin;
        self.k += 1;
        Some(Arrival { at, units: 1 })
    }

    fn mean_rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::testutil::{REPS, assert_ci, rng, run_until};

    #[test]
    fn count_is_exact() {
        // Deterministic: over a horizon H the count is H·rate to within one unit, so no
        // confidence interval is needed.
        for &rate in &[167.0, 10_156.25, 353_207.5, 1.0 / 3.0] {
            let h = 7.0;
            let horizon = Instant::ZERO + Duration::from_secs(7);
            let mut src = Cbr::new(rate, Instant::ZERO).unwrap();
            let (n, _) = run_until(&mut src, &mut rng(1, 0), horizon, false);
            assert!(
                (n as f64 - h * rate).abs() <= 1.0,
                "rate {rate}: {n} in {h} s"
            );
        }
    }

    #[test]
    fn gaps_are_the_period_to_a_picosecond() {
        let mut src = Cbr::new(167.0, Instant::ZERO)
            .unwrap()
            .with_offset(Duration::from_millis(3));
        let mut r = rng(1, 0);
        let first = src.next_arrival(&mut r).unwrap().at;
        assert_eq!(first, Instant::ZERO + Duration::from_millis(3));
        let mut prev = first;
        for _ in 0..1000 {
            let a = src.next_arrival(&mut r).unwrap();
            let gap = (a.at - prev).as_picos();
            assert!(gap.abs_diff(src.period().as_picos()) <= 1, "gap {gap}");
            prev = a.at;
        }
    }

    #[test]
    fn random_phase_is_uniform_and_keeps_the_rate() {
        // The first arrival of a random-phase source is uniform over one period: its mean
        // is half a period. 20 replications, each the mean of 200 sources.
        let period = 1.0 / 1000.0;
        let means: Vec<f64> = (0..REPS)
            .map(|rep| {
                let mut r = rng(5, rep);
                (0..200)
                    .map(|_| {
                        let mut s = Cbr::new(1000.0, Instant::ZERO).unwrap().with_random_phase();
                        let a = s.next_arrival(&mut r).unwrap().at;
                        assert!(a < Instant::ZERO + Duration::from_millis(1));
                        a.saturating_duration_since(Instant::ZERO).as_secs_f64()
                    })
                    .sum::<f64>()
                    / 200.0
            })
            .collect();
        assert_ci("Cbr random phase mean (s)", &means, period / 2.0);
        let mut s = Cbr::new(1000.0, Instant::ZERO).unwrap().with_random_phase();
        let (n, _) = run_until(
            &mut s,
            &mut rng(5, 99),
            Instant::ZERO + Duration::from_secs(3),
            false,
        );
        assert!(n.abs_diff(3000) <= 1);
    }

    #[test]
    fn rejects_bad_rates() {
        for bad in [0.0, -5.0, f64::NAN, f64::NEG_INFINITY] {
            let e = Cbr::new(bad, Instant::ZERO).unwrap_err();
            assert!(e.to_string().contains("Cbr: invalid rate"), "{e}");
        }
    }
}
