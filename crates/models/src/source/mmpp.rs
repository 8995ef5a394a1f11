//! The two-state Markov-modulated Poisson process (MMPP-2).
//!
//! Paper 003 (RDMA/Isochronets), §3 "Congestion Control and Delay for MMPP Traffic",
//! models the aggregate traffic of each peripheral network as a two-state MMPP after
//! Baiocchi, Melazzi, Roveri and Winkler (INFOCOM '91, ref. [1]): a continuous-time
//! Markov chain on states {0, 1} switches 0→1 at rate `r01` and 1→0 at rate `r10`, and
//! while in state i arrivals are Poisson at rate λi. The paper describes the ON-OFF
//! sources being aggregated (peak 10 Mb/s, mean 1 Mb/s, mean burst 100 cells of 424
//! bits) but not the fitted MMPP's four numbers, so this source takes them directly.
//!
//! Theory: the chain spends a fraction π0 = r10/(r01 + r10) of the time in state 0 and
//! π1 = r01/(r01 + r10) in state 1; sojourns are exponential with means 1/r01 and 1/r10;
//! the mean rate is π0·λ0 + π1·λ1.

use atmlab_core::time::Instant;
use atmlab_sim::rng::SimRng;
use rand::Rng;
use rand_distr::{Distribution, Exp};

use super::{Arrival, MAX_RATE, PhaseStats, TrafficSource, after_secs, check_rate, invalid};
use crate::ModelsError;

/// Where the chain is.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Not yet started: the stationary state is drawn at the first call.
    Start(Instant),
    /// In `state` since `since`, until `until`; the last arrival (or the sojourn start)
    /// was at `now`; `units` arrived in this sojourn so far.
    In {
        state: usize,
        since: Instant,
        until: Instant,
        now: Instant,
        units: u64,
    },
    /// Past the end of time.
    Ended,
}

/// A two-state Markov-modulated Poisson process: Poisson at `rate0` or `rate1` units per
/// second, as a hidden chain switching 0→1 at `r01` and 1→0 at `r10` per second dictates.
///
/// Starts with the chain in its stationary distribution. Within a sojourn the next
/// arrival is drawn afresh after each arrival and after each switch, which memorylessness
/// makes exact.
#[derive(Debug, Clone)]
pub struct Mmpp2 {
    rates: [f64; 2],
    /// Switching rates out of state 0 (`r01`) and out of state 1 (`r10`).
    leave: [f64; 2],
    gap: [Option<Exp<f64>>; 2],
    sojourn: [Exp<f64>; 2],
    state: State,
    stats: PhaseStats,
}

impl Mmpp2 {
    /// An MMPP-2 starting at `start`.
    ///
    /// * `rate0`, `rate1`: Poisson rates in states 0 and 1, units per second (finite,
    ///   `>= 0`, at most 1e12, not both zero; a zero rate makes an interrupted Poisson
    ///   process).
    /// * `r01`, `r10`: switching rates 0→1 and 1→0, per second (finite, `> 0`); the
    ///   mean sojourns are `1/r01` in state 0 and `1/r10` in state 1.
    pub fn new(
        rate0: f64,
        rate1: f64,
        r01: f64,
        r10: f64,
        start: Instant,
    ) -> Result<Self, ModelsError> {
        const M: &str = "Mmpp2";
        let arrival_rate = |param, v: f64| {
            if !v.is_finite() || !(0.0..=MAX_RATE).contains(&v) {
                Err(invalid(
                    M,
                    param,
                    format!("must be a finite rate in [0, {MAX_RATE:e}] per second, got {v}"),
                ))
            } else {
                Ok(v)
            }
        };
        let rate0 = arrival_rate("rate0", rate0)?;
        let rate1 = arrival_rate("rate1", rate1)?;
        if rate0 == 0.0 && rate1 == 0.0 {
            return Err(invalid(
                M,
                "rate1",
                "rate0 and rate1 are both zero: the source would never emit".into(),
            ));
        }
        let r01 = check_rate(M, "r01", r01)?;
        let r10 = check_rate(M, "r10", r10)?;
        let exp = |param, v: f64| Exp::new(v).map_err(|e| invalid(M, param, e.to_string()));
        let gap = |param, v: f64| (v > 0.0).then(|| exp(param, v)).transpose();
        Ok(Mmpp2 {
            rates: [rate0, rate1],
            leave: [r01, r10],
            gap: [gap("rate0", rate0)?, gap("rate1", rate1)?],
            sojourn: [exp("r01", r01)?, exp("r10", r10)?],
            state: State::Start(start),
            stats: PhaseStats::default(),
        })
    }

    /// The stationary probability of state `i` (0 or 1; panics otherwise):
    /// π0 = r10/(r01 + r10), π1 = r01/(r01 + r10).
    pub fn stationary(&self, i: usize) -> f64 {
        // Time in state i is proportional to its mean sojourn 1/leave[i], i.e. to the
        // other state's leaving rate.
        self.leave[1 - i] / (self.leave[0] + self.leave[1])
    }

    /// Mean sojourn in state `i` (0 or 1; panics otherwise), in seconds.
    pub fn mean_sojourn_secs(&self, i: usize) -> f64 {
        1.0 / self.leave[i]
    }

    /// The sojourns realised so far (phase i = state i).
    pub fn stats(&self) -> &PhaseStats {
        &self.stats
    }

    /// Enters `state` at `t`, drawing how long it stays (up to the end of time, where
    /// the source ends).
    fn enter(&self, state: usize, t: Instant, rng: &mut SimRng) -> State {
        let until = after_secs(t, self.sojourn[state].sample(rng)).unwrap_or(Instant::MAX);
        State::In {
            state,
            since: t,
            until,
            now: t,
            units: 0,
        }
    }
}

impl TrafficSource for Mmpp2 {
    fn next_arrival(&mut self, rng: &mut SimRng) -> Option<Arrival> {
        loop {
            self.state = match self.state {
                State::Start(t) => {
                    let s = usize::from(rng.random::<f64>() < self.stationary(1));
                    self.enter(s, t, rng)
                }
                State::In {
                    state,
                    since,
                    until,
                    now,
                    units,
                } => {
                    // The next arrival if the chain stays put; `None` when this state is
                    // silent or the time overflows, both meaning "not in this sojourn".
                    let next = self.gap[state]
                        .as_ref()
                        .and_then(|g| after_secs(now, g.sample(rng)))
                        .filter(|&at| at < until);
                    if let Some(at) = next {
                        self.state = State::In {
                            state,
                            since,
                            until,
                            now: at,
                            units: units + 1,
                        };
                        return Some(Arrival { at, units: 1 });
                    }
                    if until == Instant::MAX {
                        State::Ended
                    } else {
                        self.stats.complete(state, since, until, units);
                        self.enter(1 - state, until, rng)
                    }
                }
                State::Ended => return None,
            };
        }
    }

    fn mean_rate(&self) -> f64 {
        self.stationary(0) * self.rates[0] + self.stationary(1) * self.rates[1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::testutil::{REPS, assert_ci, rng, run_until};
    use atmlab_core::time::Duration;

    #[test]
    fn rate_and_time_fractions_match() {
        // State 1 is a burst of 20,000/s lasting 5 ms on average, state 0 a trickle of
        // 1,000/s lasting 20 ms: π1 = 0.2, mean rate 0.8·1000 + 0.2·20000 = 4,800/s.
        // 20 replications of 20 s: ~96,000 arrivals and ~800 cycles each.
        let horizon = Instant::ZERO + Duration::from_secs(20);
        let mk = || Mmpp2::new(1000.0, 20_000.0, 50.0, 200.0, Instant::ZERO).unwrap();
        let mut rate = Vec::new();
        let mut frac1 = Vec::new();
        let mut soj0 = Vec::new();
        let mut per1 = Vec::new();
        for rep in 0..REPS {
            let mut src = mk();
            let (n, _) = run_until(&mut src, &mut rng(31, rep), horizon, false);
            rate.push(n as f64 / 20.0);
            let s = src.stats();
            frac1.push(s.time_fraction(1).unwrap());
            soj0.push(s.mean_duration_secs(0).unwrap());
            // Arrivals per state-1 sojourn: λ1/r10 = 100 on average.
            per1.push(s.mean_units(1).unwrap());
        }
        let m = mk();
        assert!((m.mean_rate() - 4800.0).abs() < 1e-9);
        assert_ci("Mmpp2 rate (1/s)", &rate, m.mean_rate());
        assert_ci("Mmpp2 time fraction in state 1", &frac1, m.stationary(1));
        assert_ci(
            "Mmpp2 mean sojourn in state 0 (s)",
            &soj0,
            m.mean_sojourn_secs(0),
        );
        assert_ci(
            "Mmpp2 arrivals per state-1 sojourn",
            &per1,
            20_000.0 / 200.0,
        );
    }

    #[test]
    fn silent_state_is_an_interrupted_poisson_process() {
        let mut src = Mmpp2::new(0.0, 5000.0, 100.0, 100.0, Instant::ZERO).unwrap();
        assert!((src.mean_rate() - 2500.0).abs() < 1e-9);
        let (n, _) = run_until(
            &mut src,
            &mut rng(32, 0),
            Instant::ZERO + Duration::from_secs(1),
            false,
        );
        assert!(n > 0);
        assert_eq!(src.stats().units[0], 0);
    }

    #[test]
    fn rejects_bad_parameters() {
        let cases: [(f64, f64, f64, f64, &str); 7] = [
            (-1.0, 1.0, 1.0, 1.0, "rate0"),
            (1.0, f64::NAN, 1.0, 1.0, "rate1"),
            (0.0, 0.0, 1.0, 1.0, "rate1"),
            (1.0, 1.0, 0.0, 1.0, "r01"),
            (1.0, 1.0, 1.0, -2.0, "r10"),
            (1.0, 1.0, f64::INFINITY, 1.0, "r01"),
            (1.0, 1.0, 1.0, f64::NAN, "r10"),
        ];
        for (a, b, c, d, param) in cases {
            let e = Mmpp2::new(a, b, c, d, Instant::ZERO).unwrap_err();
            assert!(
                e.to_string().contains(&format!("Mmpp2: invalid {param}")),
                "{e}"
            );
        }
    }
}
