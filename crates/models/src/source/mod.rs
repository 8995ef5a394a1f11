//! Traffic sources as sans-IO cores: each yields the instants and sizes of its arrivals,
//! drawing randomness from a stream the caller passes in. The simulator schedules them in
//! virtual time; a live host will pace real cells with the same cores.
//!
//! | source | model | from |
//! | --- | --- | --- |
//! | [`Poisson`] | exponential gaps | the classic reference load |
//! | [`Cbr`] | deterministic gaps | circuit emulation; the CBR class |
//! | [`OnOff`] | exponential talkspurts and silences, cells at the peak rate while on | paper 003 (RDMA/Isochronets), §3 "Voice Source", after Brady (1969) |
//! | [`Ar1Video`] | first-order autoregressive bits per frame | paper 003, §3 "Video Source", after Maglaris et al. (1988) |
//! | [`Mmpp2`] | two-state Markov-modulated Poisson process | paper 003, §3 "Congestion Control and Delay for MMPP Traffic", after Baiocchi et al. (1991) |
//! | [`Bursty`] | active (Poisson at the peak) / idle, exponential sojourns, ⟨Λp, Λa, B⟩ | paper 004 (ATM-FDDI gateway), §5, Figure 8 "Traffic Model" |
//!
//! Units: rates are in cells (or customers) per second as `f64`, because that is what
//! [`TrafficSource::mean_rate`] reports; convert link bandwidths with
//! [`atmlab_core::units::BitRate::to_cell_rate`] (53-octet cells) or by the payload size
//! a paper uses (paper 003 counts 48-octet payloads). Times are [`Instant`]s in integer
//! picoseconds; every source is built with the instant it starts at.
//!
//! Every source starts in its stationary regime (the modulating chain in its stationary
//! state, the video process at its stationary distribution), so a run needs no warm-up
//! to remove a start-up transient of the source itself.
//!
//! Sources whose arrivals are modulated by an ON/OFF or two-state chain ([`OnOff`],
//! [`Mmpp2`], [`Bursty`]) keep [`PhaseStats`]: the realised periods, their durations and
//! the units emitted in each, so that a scenario can report (and a test can check) the
//! burst structure it actually offered.
//!
//! A source ends (returns `None`, and keeps returning it) only when its next arrival
//! would fall after [`Instant::MAX`], about 213 days of virtual time.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::rng::SimRng;

use crate::ModelsError;

mod bursty;
mod cbr;
mod mmpp;
mod on_off;
mod poisson;
mod video;

#[cfg(test)]
mod testutil;

pub use bursty::Bursty;
pub use cbr::Cbr;
pub use mmpp::Mmpp2;
pub use on_off::OnOff;
pub use poisson::Poisson;
pub use video::{Ar1Video, Ar1VideoParams};

/// One emission of a source: `units` arrive together at `at` (cells for cell sources,
/// customers for the `queue` model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// When.
    pub at: Instant,
    /// How many units arrive at once (at least 1).
    pub units: u32,
}

/// A traffic source: a generator of arrivals, sans-IO.
pub trait TrafficSource {
    /// The next arrival, never earlier than the previous one; `None` once the source has
    /// ended. All randomness comes from `rng`, the caller's stream for this source.
    fn next_arrival(&mut self, rng: &mut SimRng) -> Option<Arrival>;
    /// The long-run mean rate, in units per second, that the parameters imply.
    fn mean_rate(&self) -> f64;
}

/// What a two-phase source has realised so far, over its *completed* periods.
///
/// Index 0 is the OFF / idle / state-0 phase, index 1 the ON / active / state-1 phase;
/// the methods panic on any other index.
/// Only completed periods are counted, so that each ratio below is an average over whole
/// periods (an unfinished period would bias the mean duration downwards). The first
/// period is a residual one; since the sojourns are memoryless it has the same law as
/// the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseStats {
    /// Completed periods in each phase.
    pub periods: [u64; 2],
    /// Total time spent in the completed periods of each phase.
    pub time: [Duration; 2],
    /// Units emitted during the completed periods of each phase.
    pub units: [u64; 2],
}

impl PhaseStats {
    /// Mean duration, in seconds, of the completed periods of `phase` (0 or 1); `None`
    /// before the first one completes.
    pub fn mean_duration_secs(&self, phase: usize) -> Option<f64> {
        (self.periods[phase] > 0)
            .then(|| self.time[phase].as_secs_f64() / self.periods[phase] as f64)
    }

    /// Mean number of units per completed period of `phase` (0 or 1): for phase 1 of an
    /// ON/OFF source, the mean burst length in cells.
    pub fn mean_units(&self, phase: usize) -> Option<f64> {
        (self.periods[phase] > 0).then(|| self.units[phase] as f64 / self.periods[phase] as f64)
    }

    /// Fraction of the completed periods' time spent in `phase` (0 or 1).
    pub fn time_fraction(&self, phase: usize) -> Option<f64> {
        let total = self.time[0].as_secs_f64() + self.time[1].as_secs_f64();
        (total > 0.0).then(|| self.time[phase].as_secs_f64() / total)
    }

    /// Records a completed period of `phase` lasting from `from` to `to` with `units`.
    fn complete(&mut self, phase: usize, from: Instant, to: Instant, units: u64) {
        self.periods[phase] += 1;
        self.time[phase] += to.saturating_duration_since(from);
        self.units[phase] += units;
    }
}

/// The largest rate any source accepts, in units per second: one per picosecond. Above
/// it gaps would round to zero on the picosecond time base and the realised rate would
/// no longer be the one asked for.
pub const MAX_RATE: f64 = 1e12;

/// Picoseconds per second, as a float for period arithmetic.
const PS_PER_S: f64 = 1e12;

/// Builds the error for `param` of `model`.
fn invalid(model: &'static str, param: &'static str, reason: String) -> ModelsError {
    ModelsError::InvalidParameter {
        model,
        param,
        reason,
    }
}

/// Checks that a rate is finite, positive and at most [`MAX_RATE`].
fn check_rate(model: &'static str, param: &'static str, v: f64) -> Result<f64, ModelsError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(invalid(
            model,
            param,
            format!("must be a finite positive rate (per second), got {v}"),
        ));
    }
    if v > MAX_RATE {
        return Err(invalid(
            model,
            param,
            format!("must not exceed {MAX_RATE:e}/s (one per picosecond), got {v}"),
        ));
    }
    Ok(v)
}

/// Checks that `v` is finite and strictly positive.
fn check_positive(model: &'static str, param: &'static str, v: f64) -> Result<f64, ModelsError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(invalid(
            model,
            param,
            format!("must be finite and positive, got {v}"),
        ));
    }
    Ok(v)
}

/// `origin + round(k * period_ps)` picoseconds, or `None` past [`Instant::MAX`].
///
/// Periodic instants are computed from an origin rather than by adding a rounded period
/// again and again, so that the rounding to whole picoseconds never accumulates: the
/// long-run rate is exact. The product is monotone in `k`, so the instants never go
/// backwards.
fn at_multiple(origin: Instant, k: u64, period_ps: f64) -> Option<Instant> {
    let off = (k as f64 * period_ps).round();
    // `u64::MAX as f64` is 2^64, so anything below it fits in a u64.
    if off.is_nan() || off >= u64::MAX as f64 {
        return None;
    }
    origin.checked_add(Duration::from_picos(off as u64))
}

/// `t` plus `secs` seconds rounded to the picosecond, or `None` past [`Instant::MAX`].
fn after_secs(t: Instant, secs: f64) -> Option<Instant> {
    after(t, Duration::from_secs_f64(secs))
}

/// `t` plus `ps` picoseconds rounded to the nearest, or `None` past [`Instant::MAX`].
#[inline]
fn after_picos(t: Instant, ps: f64) -> Option<Instant> {
    after(t, Duration::from_picos_f64(ps))
}

#[inline]
fn after(t: Instant, d: Duration) -> Option<Instant> {
    if d == Duration::MAX {
        return None;
    }
    t.checked_add(d)
}
