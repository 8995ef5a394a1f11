//! The Poisson source: independent exponential gaps.
//!
//! The reference load of queueing theory (M/·/· queues), and the within-burst process of
//! paper 004's bursty source and of the MMPP states of paper 003.

use atmlab_core::time::Instant;
use atmlab_sim::rng::{SimRng, exp1};
use rand_distr::Exp;

use super::{Arrival, TrafficSource, after_picos, check_rate};
use crate::ModelsError;

/// Poisson arrivals at `rate` units per second, one unit each.
///
/// The first arrival comes an exponential gap after the start instant: by
/// memorylessness, that is the stationary process seen from an arbitrary instant.
#[derive(Debug, Clone)]
pub struct Poisson {
    rate: f64,
    /// The mean gap in picoseconds, `10^12 / rate`: a gap is `exp1 · mean_gap_ps`
    /// picoseconds, rounded to the nearest. That is `Exp::new(rate)`'s draw (the same
    /// exponential variate, inlined: see [`atmlab_sim::rng::exp1`]) scaled straight to
    /// picoseconds, one multiplication fewer than scaling it to seconds and converting
    /// those; the two can differ by a picosecond in the rounding.
    mean_gap_ps: f64,
    /// The previous arrival (the start instant before the first).
    last: Instant,
    /// The source has ended: a gap reached past the end of time.
    ended: bool,
}

impl Poisson {
    /// A Poisson source of `rate` units per second (finite, `0 < rate <= 1e12`),
    /// starting at `start`.
    pub fn new(rate: f64, start: Instant) -> Result<Self, ModelsError> {
        let rate = check_rate("Poisson", "rate", rate)?;
        Exp::new(rate).map_err(|e| super::invalid("Poisson", "rate", e.to_string()))?;
        Ok(Poisson {
            rate,
            mean_gap_ps: 1e12 / rate,
            last: start,
            ended: false,
        })
    }
}

impl TrafficSource for Poisson {
    // Inlined into `queue`'s station, which calls it directly (see `StationSource` there).
    #[inline]
    fn next_arrival(&mut self, rng: &mut SimRng) -> Option<Arrival> {
        // The same as `after_picos(self.last, ...)` with the end kept in a flag of its own:
        // an `Option<Instant>` field was rebuilt (tag and value) and stored on every
        // arrival.
        if self.ended {
            return None;
        }
        match after_picos(self.last, exp1(rng) * self.mean_gap_ps) {
            Some(at) => {
                self.last = at;
                Some(Arrival { at, units: 1 })
            }
            None => {
                self.ended = true;
                None
            }
        }
    }

    fn mean_rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::testutil::{REPS, assert_ci, rng, run_until};
    use atmlab_core::time::Duration;

    #[test]
    fn rate_matches_within_ci() {
        // 20 replications of ~5,000 arrivals: the CI half-width is about
        // 2.09 · √(5000) / 5000 / √20 ≈ 0.66 % of the rate.
        let horizon = Instant::ZERO + Duration::from_secs(5);
        let rates: Vec<f64> = (0..REPS)
            .map(|rep| {
                let mut src = Poisson::new(1000.0, Instant::ZERO).unwrap();
                let (n, _) = run_until(&mut src, &mut rng(11, rep), horizon, false);
                n as f64 / 5.0
            })
            .collect();
        assert_ci("Poisson rate (1/s)", &rates, 1000.0);
    }

    #[test]
    fn gaps_have_unit_cv() {
        // The squared coefficient of variation of exponential gaps is 1; each replication
        // estimates it from 2,000 gaps.
        let cvs: Vec<f64> = (0..REPS)
            .map(|rep| {
                let mut src = Poisson::new(50_000.0, Instant::ZERO).unwrap();
                let mut r = rng(12, rep);
                let mut prev = Instant::ZERO;
                let gaps: Vec<f64> = (0..2000)
                    .map(|_| {
                        let a = src.next_arrival(&mut r).unwrap();
                        let g = (a.at - prev).as_secs_f64();
                        prev = a.at;
                        g
                    })
                    .collect();
                let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
                let v = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64;
                v / (m * m)
            })
            .collect();
        assert_ci("Poisson squared CV of gaps", &cvs, 1.0);
    }

    #[test]
    fn rejects_bad_rates() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 2e12] {
            let e = Poisson::new(bad, Instant::ZERO).unwrap_err();
            assert!(e.to_string().contains("rate"), "{e}");
        }
    }

    #[test]
    fn ends_past_the_end_of_time() {
        let mut src = Poisson::new(1.0, Instant::MAX).unwrap();
        let mut r = rng(1, 0);
        // A gap that rounds to zero picoseconds is possible but has probability ~1e-12.
        assert_eq!(src.next_arrival(&mut r), None);
        assert_eq!(src.next_arrival(&mut r), None);
    }
}
