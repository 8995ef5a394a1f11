//! The bursty source of paper 004 (ATM-FDDI gateway), §5 "Simulation Overview",
//! Figure 8 "Traffic Model".
//!
//! The model, its parameters and how the paper's text was read are documented on
//! [`Bursty`].

use atmlab_core::time::Instant;
use atmlab_sim::rng::SimRng;

use super::{Arrival, Mmpp2, PhaseStats, TrafficSource, check_positive, check_rate, invalid};
use crate::ModelsError;

/// Paper 004's ⟨Λp, Λa, B⟩ bursty source: exponential active and idle periods, Poisson
/// cells at the peak rate while active.
///
/// "A two state Markov chain is used to statistically describe each source. The sources
/// alternate between an active state and an idle state, with the time in each state being
/// exponentially distributed. During the active state, sources generate Poisson traffic,
/// and during the idle state, no traffic is generated." A source is the triple
/// ⟨Λp, Λa, B⟩: peak bandwidth, average bandwidth, and a burst factor B, "a measure of the
/// amount by which the average bandwidth is exceeded during an active period" (§5), or
/// again "how much extra traffic the source generates over and above its average
/// bandwidth when it goes into the active state" (§6.1).
///
/// # Reading of the burst factor
///
/// We read B literally as that excess, counted in cells: over a mean active period the
/// source emits Λp·E(A) cells where the average rate would have sent Λa·E(A), so
///
/// B = (Λp − Λa)·E(A),  hence  E(A) = B/(Λp − Λa),  E(I) = B/Λa,
/// mean burst = Λp·E(A) = B·Λp/(Λp − Λa) cells,
///
/// with the idle mean E(I) fixed by the average, Λa = Λp·E(A)/(E(A) + E(I)). Both periods
/// grow in proportion to B, as §6.1 says they should. The paper gives no unit for B; cells
/// make it self-consistent: §6.3 uses B = 4 and B = 43 with a peak-to-average ratio of 2,
/// i.e. mean bursts of 8 cells (exactly the 8-cell segment size of that experiment) and
/// 86 cells (about the 85-cell frame of Table 3), while reading B as the mean burst itself
/// would give 4- and 43-cell bursts that match nothing in the paper. At the ratio of 2
/// used in most of its experiments the excess also equals the average traffic of an
/// active period, Λa·E(A), so the two natural phrasings agree there.
///
/// The paper's bandwidths are in Mb/s on a 150 Mb/s (Table 2) ATM link; this source takes
/// cells per second (convert with [`atmlab_core::units::BitRate::to_cell_rate`]).
///
/// It is the MMPP-2 with rates (0, Λp) in (idle, active) and switching rates 1/E(I),
/// 1/E(A); it starts in the stationary regime (active with probability Λa/Λp).
#[derive(Debug, Clone)]
pub struct Bursty {
    peak: f64,
    average: f64,
    burst_factor: f64,
    inner: Mmpp2,
}

impl Bursty {
    /// A bursty source starting at `start`.
    ///
    /// * `peak`: Λp, cells per second while active (finite, `0 < peak <= 1e12`).
    /// * `average`: Λa, long-run cells per second (`0 < average < peak`: with no excess
    ///   over the average there is no burst).
    /// * `burst_factor`: B, the mean excess cells of an active period over what the
    ///   average rate would send in it (finite, `> 0`).
    ///
    /// Paper 004's Table 3 sources (ratio 2, B = 1000) at 10 Mb/s average are
    /// `Bursty::new(2.0 * r, r, 1000.0, start)` with `r = 10e6 / 424.0` cells/s.
    pub fn new(
        peak: f64,
        average: f64,
        burst_factor: f64,
        start: Instant,
    ) -> Result<Self, ModelsError> {
        const M: &str = "Bursty";
        let peak = check_rate(M, "peak", peak)?;
        let average = check_rate(M, "average", average)?;
        if average >= peak {
            return Err(invalid(
                M,
                "average",
                format!("must be below peak ({peak}/s) so that bursts exceed it, got {average}/s"),
            ));
        }
        let burst_factor = check_positive(M, "burst_factor", burst_factor)?;
        let mean_active = burst_factor / (peak - average);
        let mean_idle = burst_factor / average;
        let inner = Mmpp2::new(0.0, peak, 1.0 / mean_idle, 1.0 / mean_active, start)
            .map_err(|e| invalid(M, "burst_factor", format!("implies an invalid chain: {e}")))?;
        Ok(Bursty {
            peak,
            average,
            burst_factor,
            inner,
        })
    }

    /// Λp, cells per second.
    pub fn peak(&self) -> f64 {
        self.peak
    }

    /// B, the burst factor in cells.
    pub fn burst_factor(&self) -> f64 {
        self.burst_factor
    }

    /// Mean active period in seconds: B/(Λp − Λa).
    pub fn mean_active_secs(&self) -> f64 {
        self.burst_factor / (self.peak - self.average)
    }

    /// Mean idle period in seconds: B/Λa.
    pub fn mean_idle_secs(&self) -> f64 {
        self.burst_factor / self.average
    }

    /// Mean cells per active period (including the rare empty ones): B·Λp/(Λp − Λa).
    pub fn mean_burst_cells(&self) -> f64 {
        self.peak * self.mean_active_secs()
    }

    /// The periods realised so far (phase 0 = idle, 1 = active).
    pub fn stats(&self) -> &PhaseStats {
        self.inner.stats()
    }
}

impl TrafficSource for Bursty {
    fn next_arrival(&mut self, rng: &mut SimRng) -> Option<Arrival> {
        self.inner.next_arrival(rng)
    }

    fn mean_rate(&self) -> f64 {
        self.average
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::testutil::{assert_ci, two_phase_samples};

    #[test]
    fn paper_section_6_3_bursts() {
        let r = 10e6 / 424.0;
        let small = Bursty::new(2.0 * r, r, 4.0, Instant::ZERO).unwrap();
        assert!((small.mean_burst_cells() - 8.0).abs() < 1e-9);
        let moderate = Bursty::new(2.0 * r, r, 43.0, Instant::ZERO).unwrap();
        assert!((moderate.mean_burst_cells() - 86.0).abs() < 1e-9);
        // §6.1: a higher burst factor lengthens both periods.
        let big = Bursty::new(2.0 * r, r, 1000.0, Instant::ZERO).unwrap();
        assert!(big.mean_active_secs() > moderate.mean_active_secs());
        assert!(big.mean_idle_secs() > moderate.mean_idle_secs());
    }

    #[test]
    fn rate_bursts_and_periods_match() {
        // Peak-to-average 4 (so the excess and the average readings differ), B = 43:
        // E[A] = 43/(40,000 − 10,000) s = 1.43 ms, E[I] = 4.3 ms, mean burst 57.3 cells.
        // 20 replications of 8 s: ~80,000 cells and ~1,400 cycles each.
        let mk = || Bursty::new(40_000.0, 10_000.0, 43.0, Instant::ZERO).unwrap();
        let x = two_phase_samples(mk, Bursty::stats, 41, 8);
        let b = mk();
        assert!((b.mean_burst_cells() - 43.0 * 4.0 / 3.0).abs() < 1e-9);
        assert_ci("Bursty rate (cells/s)", &x.rate, b.mean_rate());
        assert_ci("Bursty mean burst (cells)", &x.burst, b.mean_burst_cells());
        assert_ci("Bursty mean active (s)", &x.on, b.mean_active_secs());
        assert_ci("Bursty mean idle (s)", &x.off, b.mean_idle_secs());
    }

    #[test]
    fn rejects_bad_parameters() {
        let cases: [(f64, f64, f64, &str); 7] = [
            (0.0, 1.0, 10.0, "peak"),
            (f64::NAN, 1.0, 10.0, "peak"),
            (10.0, -1.0, 10.0, "average"),
            (10.0, 10.0, 10.0, "average"),
            (10.0, 20.0, 10.0, "average"),
            (10.0, 5.0, 0.0, "burst_factor"),
            (10.0, 5.0, f64::NAN, "burst_factor"),
        ];
        for (p, a, b, param) in cases {
            let e = Bursty::new(p, a, b, Instant::ZERO).unwrap_err();
            assert!(
                e.to_string().contains(&format!("Bursty: invalid {param}")),
                "{e}"
            );
        }
    }
}
