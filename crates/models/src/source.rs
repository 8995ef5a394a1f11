//! Traffic sources as sans-IO cores: each yields the instants and sizes of its arrivals,
//! drawing randomness from a stream the caller passes in. The simulator schedules them in
//! virtual time; a live host will pace real cells with the same cores.
//!
//! (Skeleton: the trait is fixed; the sources are being written.)

use atmlab_core::time::Instant;
use atmlab_sim::rng::SimRng;

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
