//! Dimensioning the switching-identifier cache and counting remote invocations (paper 000
//! §IV-A, Figs. 8-9 and Table I; §IV-B, Fig. 10).
//!
//! The paper models the VPI/VCI cache of one output port as an M/G/∞ queue: calls arrive
//! as a Poisson process at rate λ, each takes one identifier from the cache, and the
//! identifier is "in use" until the commit that carries it is acknowledged (when the
//! piggybacked replacement returns). `N_v`, the identifiers in use, is then Poisson with
//! mean λ/α, where 1/α is that mean replacement latency, and a cache of X identifiers
//! serves an arriving call in one phase when fewer than X are in use.
//!
//! [`NvProbe`] measures `N_v` on a running manager (sampled at each arrival, which by
//! PASTA is the time-stationary distribution, and the replacement latencies), and the
//! functions here turn a rate and a latency into the paper's estimates, so a user can
//! size a cache for a target hit ratio instead of guessing (the paper's Table I method).
//!
//! One detail the paper leaves implicit: its Table I reports the estimated hit frequency
//! of a cache of X identifiers as P{N_v <= X}. An arrival that finds N_v identifiers
//! already in use is served from the cache when N_v < X, i.e. with probability
//! P{N_v <= X - 1}; [`estimated_hit_ratio`] uses that, and the reproduction shows the
//! paper's reading beside it.

use atmlab_core::time::{Duration, Instant};

/// Measurement of `N_v` on one (switch, output port): identifiers taken from its cache
/// whose commit has not yet been answered.
///
/// Two distributions are kept: the one arrivals see (what decides a hit) and the
/// time-average one (what the M/G/∞ model describes). With Poisson arrivals they are the
/// same (PASTA); when they differ, the arrivals were not Poisson. The time-average mean
/// equals λ times the mean latency exactly (Little's law), a check on the measurement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NvProbe {
    /// Identifiers in use now.
    pub in_use: u32,
    /// `at_arrival[n]`: arrivals (cache hits) that found `n` identifiers already in use.
    pub at_arrival: Vec<u64>,
    /// `time_at[n]`: picoseconds spent with `n` identifiers in use, from the first take.
    pub time_at: Vec<u64>,
    /// When `in_use` last changed (the first take starts the clock).
    pub since: Option<Instant>,
    /// Sum of the replacement latencies measured (from the take to the commit's answer).
    pub latency_sum: Duration,
    /// Replacement latencies measured.
    pub latencies: u64,
    /// Gaps between arrivals, for their squared coefficient of variation: the sum of the
    /// gaps and of their squares, in seconds, and the last arrival.
    pub gaps: (f64, f64, u64),
    last_arrival: Option<Instant>,
}

impl NvProbe {
    fn advance(&mut self, now: Instant) {
        if let Some(t) = self.since {
            let n = self.in_use as usize;
            if self.time_at.len() <= n {
                self.time_at.resize(n + 1, 0);
            }
            self.time_at[n] += now.saturating_duration_since(t).as_picos();
        }
        self.since = Some(now);
    }

    /// An arrival takes an identifier at `now`.
    pub fn take(&mut self, now: Instant) {
        self.advance(now);
        if let Some(last) = self.last_arrival {
            let g = now.saturating_duration_since(last).as_secs_f64();
            self.gaps.0 += g;
            self.gaps.1 += g * g;
            self.gaps.2 += 1;
        }
        self.last_arrival = Some(now);
        let n = self.in_use as usize;
        if self.at_arrival.len() <= n {
            self.at_arrival.resize(n + 1, 0);
        }
        self.at_arrival[n] += 1;
        self.in_use += 1;
    }

    /// The commit carrying an identifier was answered at `now`, `latency` after the take.
    pub fn done(&mut self, now: Instant, latency: Duration) {
        self.advance(now);
        self.in_use = self.in_use.saturating_sub(1);
        self.latency_sum += latency;
        self.latencies += 1;
    }

    /// The squared coefficient of variation of the gaps between arrivals as the manager
    /// handled them: 1 for a Poisson process, more when arrivals come in clumps.
    pub fn gap_cv2(&self) -> f64 {
        let (s, sq, n) = self.gaps;
        if n < 2 || s == 0.0 {
            return f64::NAN;
        }
        let mean = s / n as f64;
        (sq / n as f64 - mean * mean) / (mean * mean)
    }

    /// Seconds observed (from the first take to the last change).
    pub fn observed(&self) -> f64 {
        self.time_at.iter().map(|&t| t as f64).sum::<f64>() / 1e12
    }

    /// The time-average mean of `N_v`.
    pub fn time_mean(&self) -> f64 {
        let total: f64 = self.time_at.iter().map(|&t| t as f64).sum();
        if total == 0.0 {
            return 0.0;
        }
        self.time_at
            .iter()
            .enumerate()
            .map(|(k, &t)| k as f64 * t as f64)
            .sum::<f64>()
            / total
    }

    /// The time-average P{N_v <= x}.
    pub fn time_cdf(&self, x: usize) -> f64 {
        let total: f64 = self.time_at.iter().map(|&t| t as f64).sum();
        if total == 0.0 {
            return 0.0;
        }
        self.time_at
            .iter()
            .take(x + 1)
            .map(|&t| t as f64)
            .sum::<f64>()
            / total
    }

    /// Arrivals sampled.
    pub fn arrivals(&self) -> u64 {
        self.at_arrival.iter().sum()
    }

    /// Mean of `N_v` seen by arrivals.
    pub fn mean(&self) -> f64 {
        counts_mean(&self.at_arrival).unwrap_or(0.0)
    }

    /// Mean replacement latency (1/α).
    pub fn mean_latency(&self) -> Duration {
        if self.latencies == 0 {
            return Duration::ZERO;
        }
        Duration::from_picos(self.latency_sum.as_picos() / self.latencies)
    }

    /// Measured P{N_v <= x}.
    pub fn cdf(&self, x: usize) -> f64 {
        counts_cdf(&self.at_arrival, x).unwrap_or(0.0)
    }

    /// The hit ratio a cache of `size` identifiers would have had: the fraction of
    /// arrivals that found fewer than `size` in use.
    pub fn hit_ratio(&self, size: usize) -> f64 {
        if size == 0 {
            return 0.0;
        }
        self.cdf(size - 1)
    }

    /// The smallest cache that would have served a fraction `target` of the arrivals
    /// measured (`None` before any arrival).
    pub fn size_for(&self, target: f64) -> Option<usize> {
        (1..=self.at_arrival.len() + 1).find(|&x| self.hit_ratio(x) >= target)
    }

    /// Adds another port's measurements (the report pools ports with the same load).
    pub fn merge(&mut self, other: &NvProbe) {
        if self.at_arrival.len() < other.at_arrival.len() {
            self.at_arrival.resize(other.at_arrival.len(), 0);
        }
        for (a, b) in self.at_arrival.iter_mut().zip(&other.at_arrival) {
            *a += b;
        }
        if self.time_at.len() < other.time_at.len() {
            self.time_at.resize(other.time_at.len(), 0);
        }
        for (a, b) in self.time_at.iter_mut().zip(&other.time_at) {
            *a += b;
        }
        self.in_use += other.in_use;
        self.gaps.0 += other.gaps.0;
        self.gaps.1 += other.gaps.1;
        self.gaps.2 += other.gaps.2;
        self.latency_sum += other.latency_sum;
        self.latencies += other.latencies;
    }
}

/// Erlang's loss formula B(A, N): the share of calls refused by a trunk of `circuits`
/// circuits offered `offered` erlangs of Poisson calls (any holding-time law), by the
/// stable recurrence B(0) = 1, B(n) = A B(n-1) / (n + A B(n-1)). The theory the
/// managers' blocking is checked against, live and simulated.
pub fn erlang_b(offered: f64, circuits: u32) -> f64 {
    (1..=circuits).fold(1.0, |b, k| offered * b / (f64::from(k) + offered * b))
}

/// P{N <= x} for N Poisson with mean `mean` (summed in log space's safe form: terms by
/// recurrence, which is exact enough for means up to several hundred).
pub fn poisson_cdf(mean: f64, x: usize) -> f64 {
    if mean.is_nan() || mean <= 0.0 {
        return 1.0;
    }
    // Start from the log of the first term to avoid underflow of e^-mean for large means.
    let mut log_term = -mean;
    let mut sum = 0.0;
    for k in 0..=x {
        if k > 0 {
            log_term += mean.ln() - (k as f64).ln();
        }
        sum += log_term.exp();
    }
    sum.min(1.0)
}

/// The M/G/∞ mean of `N_v`: λ times the mean replacement latency.
pub fn offered_identifiers(rate_per_s: f64, latency: Duration) -> f64 {
    rate_per_s * latency.as_secs_f64()
}

/// The estimated hit ratio of a cache of `size` identifiers when `N_v` is Poisson with
/// mean `mean` (an arrival is served from the cache when fewer than `size` are in use).
pub fn estimated_hit_ratio(mean: f64, size: usize) -> f64 {
    if size == 0 {
        return 0.0;
    }
    poisson_cdf(mean, size - 1)
}

/// The smallest cache whose estimated hit ratio reaches `target` (in (0, 1)), for `N_v`
/// Poisson with mean `mean`; `None` if `target` is not below 1.
pub fn cache_size_for(mean: f64, target: f64) -> Option<usize> {
    if target.is_nan() || target <= 0.0 || target >= 1.0 {
        return None;
    }
    // The Poisson tail beyond mean + 40 sqrt(mean) + 40 is far below any useful target.
    let limit = (mean + 40.0 * mean.sqrt() + 40.0) as usize;
    (1..=limit).find(|&x| estimated_hit_ratio(mean, x) >= target)
}

/// The paper's remote invocations per second (Fig. 10): N = 4 λ (1 + k/T) for a path of
/// `hops` switch servers and a message threshold T. The 4 per call are the setup and
/// delete requests and their answers; each switch server sees an add and a delete per
/// call, T to a message, each message and its answer one invocation apiece.
pub fn invocations_per_s(rate_per_s: f64, hops: u32, threshold: u32) -> f64 {
    4.0 * rate_per_s * (1.0 + hops as f64 / threshold.max(1) as f64)
}

/// The mean of a distribution given as counts per value (`counts[k]` observations of
/// k); `None` without observations.
pub fn counts_mean(counts: &[u64]) -> Option<f64> {
    let n: u64 = counts.iter().sum();
    (n > 0).then(|| {
        counts
            .iter()
            .enumerate()
            .map(|(k, &c)| k as f64 * c as f64)
            .sum::<f64>()
            / n as f64
    })
}

/// P{X <= x} of a distribution given as counts per value; `None` without observations.
pub fn counts_cdf(counts: &[u64], x: usize) -> Option<f64> {
    let n: u64 = counts.iter().sum();
    (n > 0).then(|| counts.iter().take(x + 1).sum::<u64>() as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_b_is_right() {
        assert!(
            (erlang_b(9.0, 12) - 0.0831).abs() < 1e-4,
            "{}",
            erlang_b(9.0, 12)
        );
        assert!((erlang_b(1.0, 1) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn poisson_cdf_known_values() {
        // e^-2 (1 + 2 + 2) = 0.676676...
        assert!((poisson_cdf(2.0, 2) - 0.676_676_416).abs() < 1e-8);
        assert!((poisson_cdf(2.0, 0) - (-2.0f64).exp()).abs() < 1e-12);
        assert!(poisson_cdf(500.0, 2_000) > 0.999_999);
        assert!(poisson_cdf(500.0, 400) < 0.001);
        assert_eq!(poisson_cdf(0.0, 0), 1.0);
    }

    #[test]
    fn the_papers_table_i_estimates_are_poisson_cdfs() {
        // Table I, medium load: estimated 0.9529 at X = 5, 0.9950 at 7, 0.9997 at 9.
        // Those are P{N_v <= X} for a mean near 2.6 (the paper used its measured mean).
        let m = 2.6;
        assert!((poisson_cdf(m, 5) - 0.9529).abs() < 0.003);
        assert!((poisson_cdf(m, 7) - 0.9950).abs() < 0.002);
        assert!((poisson_cdf(m, 9) - 0.9997).abs() < 0.0005);
    }

    #[test]
    fn cache_sizing_is_the_smallest_that_reaches_the_target() {
        let m = 5.0;
        let x = cache_size_for(m, 0.99).expect("size");
        assert!(estimated_hit_ratio(m, x) >= 0.99);
        assert!(estimated_hit_ratio(m, x - 1) < 0.99);
        assert_eq!(cache_size_for(m, 1.0), None);
        assert_eq!(cache_size_for(0.0, 0.99), Some(1));
    }

    #[test]
    fn invocations_follow_the_papers_formula() {
        // Fig. 10: k = 3; T = 1 gives 16 per call, T -> infinity gives 4.
        assert_eq!(invocations_per_s(1.0, 3, 1), 16.0);
        assert_eq!(invocations_per_s(10.0, 3, 3), 80.0);
        assert!((invocations_per_s(1.0, 3, u32::MAX) - 4.0).abs() < 1e-6);
    }

    #[test]
    fn the_probe_counts_what_arrivals_see() {
        let t = |us: u64| Instant::from_picos(us * 1_000_000);
        let mut p = NvProbe::default();
        p.take(t(0)); // saw 0
        p.take(t(100)); // saw 1
        p.done(t(200), Duration::from_micros(100));
        p.take(t(300)); // saw 1
        p.done(t(400), Duration::from_micros(300));
        p.done(t(600), Duration::from_micros(200));
        // 1 in use for 0-100, 2 for 100-200, 1 for 200-300, 2 for 300-400, 1 for 400-600.
        assert_eq!(p.time_at, vec![0, 400_000_000, 200_000_000]);
        assert!((p.time_mean() - 4.0 / 3.0).abs() < 1e-12);
        assert!((p.observed() - 600e-6).abs() < 1e-15);
        assert_eq!(p.time_cdf(1), 2.0 / 3.0);
        assert_eq!(p.at_arrival, vec![1, 2]);
        assert_eq!(p.in_use, 0);
        assert!((p.mean() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(p.mean_latency(), Duration::from_micros(200));
        assert_eq!(p.hit_ratio(1), 1.0 / 3.0);
        assert_eq!(p.hit_ratio(2), 1.0);
        assert_eq!(p.size_for(0.5), Some(2));
        assert_eq!(NvProbe::default().size_for(0.5), None);
        let mut q = NvProbe::default();
        q.take(t(0));
        q.merge(&p);
        assert_eq!(q.at_arrival, vec![2, 2]);
    }
}
