//! The live shells' clock (DESIGN.md §2): the OS monotonic clock, mapped onto
//! `atmlab_core::time::Instant` so that live shells hand cores the same kind of time the
//! simulator does.

use atmlab_core::time::Instant;

/// Picoseconds since the moment the clock was started (the process's epoch for cores).
///
/// Monotonic: it never goes back, whatever the wall clock does. `Copy`, so every task can
/// hold one; copies share the same epoch.
#[derive(Debug, Clone, Copy)]
pub struct LiveClock {
    origin: std::time::Instant,
}

impl LiveClock {
    /// A clock whose epoch is now.
    pub fn start() -> Self {
        LiveClock {
            origin: std::time::Instant::now(),
        }
    }

    /// The time since the epoch. Saturates after 213 days, the span of
    /// [`Instant`]; a name service that runs that long sees time stand still at the end
    /// rather than wrap.
    pub fn now(&self) -> Instant {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Instant::from_picos(nanos.saturating_mul(1_000))
    }
}

impl Default for LiveClock {
    fn default() -> Self {
        LiveClock::start()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_near_zero_and_never_goes_back() {
        let clock = LiveClock::start();
        let a = clock.now();
        let b = clock.now();
        assert!(b >= a);
        // Not a speed assertion: an hour is "near zero" on any machine.
        assert!(a < Instant::from_picos(3_600 * 1_000_000_000_000));
    }
}
