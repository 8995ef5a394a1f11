//! What the managers' plane reads from the connection manager core's own probes at each
//! period mark, for paper 000's §IV: `N_v`, the identifiers of one output port's cache
//! in use (§IV-A, Fig. 9 and Table I), and the messages sent to the switch servers
//! (§IV-B, Fig. 10). Nothing here counts by itself: the numbers are
//! `CmCore::nv_probes()` (the core's `NvProbe`, the same one the live manager reports)
//! and `CmCore::stats()`, differenced between two marks.
//!
//! `N_v` is read two ways, as the live probe keeps it: over time (its mean and index of
//! dispersion, `nv_mean` and `nv_dispersion`) and as the calls arriving at the cache
//! found it (`nv_arrival_mean`, `nv_cdf_0` .. `nv_cdf_31`, `nv_poisson_gap`), which is
//! what decides a cache hit and what the paper's Fig. 9 plots: P{N_v <= x} at arrivals,
//! beside the Poisson law with the same mean (the M/G/∞ estimate, "using the average
//! value of N_v measured"). A cache of X identifiers serves an arriving call when fewer
//! than X are in use, so its hit frequency is `nv_cdf_{X-1}`, as the live reproduction's
//! Table I reads `NvProbe::hit_ratio`. The port is the first whose cache served a call,
//! in (switch, port) order: on the paper's testbed (`topologies/line3.toml`, calls
//! a -> b) the first switch's output port, the one the live reproduction measures.

use atmlab_control::cm::core::CmCore;
use atmlab_control::cm::dimension::{counts_cdf, counts_mean, poisson_cdf};

/// How many points of the distribution at arrivals are reported: `nv_cdf_0` ..
/// `nv_cdf_31`, P{N_v <= x} for x below this (cache sizes 1 to 32, the paper's Table I
/// going up to 20 and its storage example to 32).
pub const CDF_POINTS: usize = 32;

/// The probes' cumulative counts at a period mark.
#[derive(Debug, Clone, Default)]
pub(super) struct Mark {
    /// Picoseconds the port spent with each number of identifiers in use.
    time_at: Vec<u64>,
    /// Arrivals at the port that found each number in use.
    at_arrival: Vec<u64>,
    /// Messages sent to switch servers (every one: re-sends included).
    messages: u64,
}

impl Mark {
    /// The core's counts now.
    pub(super) fn of(core: &CmCore) -> Mark {
        let (time_at, at_arrival) = core
            .nv_probes()
            .into_iter()
            .next()
            .map(|(_, _, p)| (p.time_at, p.at_arrival))
            .unwrap_or_default();
        Mark {
            time_at,
            at_arrival,
            messages: core.stats().messages,
        }
    }

    /// This mark's counts and `other`'s together (a restarted manager's core counts from
    /// zero: its dead predecessors' counts are added to its own).
    pub(super) fn plus(&self, other: &Mark) -> Mark {
        let add = |a: &[u64], b: &[u64]| -> Vec<u64> {
            (0..a.len().max(b.len()))
                .map(|k| a.get(k).copied().unwrap_or(0) + b.get(k).copied().unwrap_or(0))
                .collect()
        };
        Mark {
            time_at: add(&self.time_at, &other.time_at),
            at_arrival: add(&self.at_arrival, &other.at_arrival),
            messages: self.messages + other.messages,
        }
    }

    /// What happened between `then` and this mark.
    pub(super) fn since(&self, then: &Mark) -> Period {
        let minus = |now: &[u64], then: &[u64]| -> Vec<u64> {
            now.iter()
                .enumerate()
                .map(|(k, &x)| x.saturating_sub(then.get(k).copied().unwrap_or(0)))
                .collect()
        };
        Period {
            time_at: minus(&self.time_at, &then.time_at),
            at_arrival: minus(&self.at_arrival, &then.at_arrival),
            messages: self.messages.saturating_sub(then.messages),
        }
    }
}

/// The probes' counts over one measured period.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Period {
    time_at: Vec<u64>,
    at_arrival: Vec<u64>,
    messages: u64,
}

impl Period {
    /// The time-average mean of `N_v` and its index of dispersion (variance over mean):
    /// M/G/∞ makes `N_v` Poisson, so the index is 1. NaN without time observed.
    pub(super) fn moments(&self) -> (f64, f64) {
        let d: Vec<f64> = self.time_at.iter().map(|&t| t as f64).collect();
        let total: f64 = d.iter().sum();
        if total <= 0.0 {
            return (f64::NAN, f64::NAN);
        }
        let mean = d.iter().enumerate().map(|(k, t)| k as f64 * t).sum::<f64>() / total;
        let var = d
            .iter()
            .enumerate()
            .map(|(k, t)| (k as f64 - mean).powi(2) * t)
            .sum::<f64>()
            / total;
        (mean, if mean > 0.0 { var / mean } else { f64::NAN })
    }

    /// The mean of `N_v` as arrivals found it (NaN without arrivals).
    pub(super) fn arrival_mean(&self) -> f64 {
        counts_mean(&self.at_arrival).unwrap_or(f64::NAN)
    }

    /// P{N_v <= x} as arrivals found it (NaN without arrivals).
    pub(super) fn cdf(&self, x: usize) -> f64 {
        counts_cdf(&self.at_arrival, x).unwrap_or(f64::NAN)
    }

    /// Fig. 9's comparison: the largest |measured − Poisson| P{N_v <= x} over the x
    /// where the Poisson estimate (with the measured mean at arrivals) exceeds 0.9, the
    /// paper's "region of interest"; 0 when there is no such x, NaN without arrivals.
    pub(super) fn poisson_gap(&self) -> f64 {
        let m = self.arrival_mean();
        if m.is_nan() {
            return f64::NAN;
        }
        // Past the last count the measured CDF is 1 and the Poisson one only closes in.
        (0..=self.at_arrival.len() + 1)
            .filter(|&x| poisson_cdf(m, x) > 0.9)
            .map(|x| (self.cdf(x) - poisson_cdf(m, x)).abs())
            .fold(0.0, f64::max)
    }

    /// The metrics after `nv_dispersion`, in [`super::METRICS`]' order, for a period in
    /// which `attempts` calls arrived: messages to switch servers per call, the mean at
    /// arrivals, the gap to Poisson, and `nv_cdf_0` .. `nv_cdf_31`.
    pub(super) fn metrics(&self, attempts: u64) -> impl Iterator<Item = f64> + '_ {
        [
            if attempts > 0 {
                self.messages as f64 / attempts as f64
            } else {
                f64::NAN
            },
            self.arrival_mean(),
            self.poisson_gap(),
        ]
        .into_iter()
        .chain((0..CDF_POINTS).map(|x| self.cdf(x)))
    }
}

/// The metrics a plane without a connection manager's caches (TINA's) reports as NaN:
/// everything from `nv_mean` on.
pub(super) fn none() -> impl Iterator<Item = f64> {
    std::iter::repeat_n(f64::NAN, 5 + CDF_POINTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(at_arrival: Vec<u64>) -> Period {
        Period {
            time_at: Vec::new(),
            at_arrival,
            messages: 0,
        }
    }

    /// The counts at arrivals of a Poisson law with mean 2 (to the nearest of 100,000):
    /// the gap to Poisson is the rounding; move a tenth of the arrivals from 0 to 6 in
    /// use and it is about a tenth.
    #[test]
    fn the_gap_follows_the_counts() {
        let counts: Vec<u64> = (0..12)
            .map(|k| {
                let p = poisson_cdf(2.0, k) - if k > 0 { poisson_cdf(2.0, k - 1) } else { 0.0 };
                (p * 100_000.0).round() as u64
            })
            .collect();
        let p = period(counts.clone());
        assert!(
            (p.arrival_mean() - 2.0).abs() < 1e-3,
            "{}",
            p.arrival_mean()
        );
        assert!(p.poisson_gap() < 1e-3, "{}", p.poisson_gap());
        let mut skewed = counts;
        skewed[0] -= 10_000;
        skewed[6] += 10_000;
        let g = period(skewed).poisson_gap();
        assert!(g > 0.05, "{g}");
        // Hit frequency of a cache of 3: arrivals that found at most 2 in use.
        let p = period(vec![5, 3, 2, 0, 10]);
        assert_eq!(p.cdf(2), 0.5);
        assert!(period(Vec::new()).cdf(0).is_nan());
    }

    /// The names in `METRICS` and the values here line up: the probes' metrics are the
    /// list's tail from `nv_mean` (before the crash metrics), the CDF last, in order.
    #[test]
    fn the_metrics_list_names_every_probe() {
        let all = super::super::METRICS;
        let crash = super::super::crash::CRASH_METRICS;
        assert_eq!(all[all.len() - crash.len()..], *crash);
        let m = &all[..all.len() - crash.len()];
        let at = m.iter().position(|k| *k == "nv_mean").expect("nv_mean");
        assert_eq!(m.len() - at, none().count());
        assert_eq!(Period::default().metrics(0).count() + 2, none().count());
        for x in 0..CDF_POINTS {
            assert_eq!(m[m.len() - CDF_POINTS + x], format!("nv_cdf_{x}"));
        }
        assert_eq!(
            m[at + 2..at + 5],
            [
                "switch_messages_per_call",
                "nv_arrival_mean",
                "nv_poisson_gap"
            ]
        );
    }

    #[test]
    fn a_period_is_the_difference_of_its_marks() {
        let then = Mark {
            time_at: vec![10, 5],
            at_arrival: vec![1],
            messages: 3,
        };
        let now = Mark {
            time_at: vec![30, 5, 20],
            at_arrival: vec![4, 2],
            messages: 10,
        };
        let p = now.since(&then);
        assert_eq!(p.time_at, vec![20, 0, 20]);
        assert_eq!(p.at_arrival, vec![3, 2]);
        assert_eq!(p.metrics(7).next(), Some(1.0));
        // Time at 0 and at 2 alike: mean 1, variance 1.
        assert_eq!(p.moments(), (1.0, 1.0));
    }
}
