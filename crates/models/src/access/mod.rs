//! Access control at the network edge: sans-IO cores for the mechanisms of paper 003
//! (section 2, "Leaky Bucket" and "Virtual Clock"; section 3 for their parameters) and
//! the ATM usage parameter control test GCRA(T, τ) of ITU-T I.371 / ATM Forum TM 4.0
//! §4.4.
//!
//! * [`Gcra`] — the GCRA conformance test (virtual scheduling algorithm, in
//!   `atmlab_core::gcra`, re-exported); it only classifies cells, it never holds them.
//! * [`LeakyBucket`] — the paper's credit pool with an optional buffer, as a shaper or a
//!   policer.
//! * [`VirtualClock`] — Zhang's Virtual Clock (SIGCOMM '90) used as an access regulator,
//!   with a bounded penalty delay.
//! * [`Rdma`] — Isochronets' Route Division Multiple Access: green bands per routing
//!   tree, contention and priority bands, collision modes RDMA−, RDMA+ and RDMA++.
//!
//! Every core is sans-IO in the quinn-proto style: the shell passes the time in
//! (`handle_*(now, ..)`), reads what the core decided from the return value, drains the
//! cells the core releases later with `poll_transmit`, and arms one timer at
//! `poll_timeout`. No core reads a clock or does I/O.
//!
//! Time is expected non-decreasing across calls. A `now` earlier than the latest time a
//! core has seen is treated as that latest time: a shell bug must not make a core panic
//! or move its state backwards (which would, e.g., mint credits twice).

mod leaky_bucket;
mod rdma;
mod virtual_clock;

// The GCRA core lives in atmlab-core (the live switch polices with it too).
pub use atmlab_core::gcra::{Conformance, Gcra};
pub use leaky_bucket::{LeakyBucket, LeakyBucketMode};
pub use rdma::{Band, BandKind, FlowId, Rdma, RdmaConfig, RdmaMode, TreeId};
pub use virtual_clock::{VirtualClock, VirtualClockPenalty};

use atmlab_core::time::Duration;

use crate::ModelsError;

/// What an access regulator did with a cell when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The cell leaves at once, unchanged (CLP as it came).
    PassNow,
    /// The cell waits inside the regulator; it comes out later through `poll_transmit`.
    Queued,
    /// The cell is discarded.
    Dropped,
    /// The cell leaves at once with CLP set to 1 (a policer that tags instead of
    /// discarding).
    Tagged,
}

/// What an access regulator has done so far, cell by cell.
///
/// Every offered cell ends up in exactly one counter once it has left or been dropped;
/// a cell still waiting is in none (see the regulator's `occupancy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AccessCounters {
    /// Cells that left the moment they arrived, untagged.
    pub passed: u64,
    /// Cells that waited in the regulator and have since been released.
    pub delayed: u64,
    /// Cells discarded.
    pub dropped: u64,
    /// Cells that left at once with CLP = 1.
    pub tagged: u64,
}

/// The spacing 1/`rate` of a rate in cells per second, validated: finite, positive, and
/// not so high that the spacing rounds to zero picoseconds (a zero spacing would mean an
/// unlimited rate and make the cores' timing loops degenerate).
fn interval_of_rate(
    model: &'static str,
    param: &'static str,
    rate: f64,
) -> Result<Duration, ModelsError> {
    if !rate.is_finite() || rate <= 0.0 {
        return Err(ModelsError::InvalidParameter {
            model,
            param,
            reason: format!("must be a finite positive rate in cells/s, got {rate}"),
        });
    }
    let interval = Duration::from_secs_f64(1.0 / rate);
    if interval == Duration::ZERO {
        return Err(ModelsError::InvalidParameter {
            model,
            param,
            reason: format!("{rate} cells/s is above 1e12 cells/s (spacing under 1 ps)"),
        });
    }
    Ok(interval)
}

/// Multiplies a negotiated mean rate by the paper's overdimensioning factor C (section 3,
/// after [9]: "the Leaky Bucket credit rate is equal to C times the negotiated mean
/// traffic rate", and the same for Virtual Clock's AR), validating the rate and C ≥ 1.
fn overdimension(model: &'static str, rate: f64, c: f64) -> Result<f64, ModelsError> {
    interval_of_rate(model, "mean_rate", rate)?;
    // C < 1 would under-dimension the mechanism; the paper only uses C ≥ 1 (1, 1.15, 1.2,
    // 1.4), and a value below 1 is far more likely a typo than an experiment.
    if !c.is_finite() || c < 1.0 {
        return Err(ModelsError::InvalidParameter {
            model,
            param: "overdimensioning",
            reason: format!("the factor C must be finite and >= 1, got {c}"),
        });
    }
    Ok(rate * c)
}
