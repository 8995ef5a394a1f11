//! The live shells' clock (DESIGN.md §2): the OS monotonic clock mapped onto
//! [`Instant`], so that live shells hand cores the same kind of time the simulator does.
//!
//! Only with the `clock` feature, which only the live shells enable (the `live` features
//! of atmlab-fabric, atmlab-control and atmlab-smds): a core that reached for the OS
//! clock would fail to compile in CI's `--no-default-features` checks.

use crate::time::{Duration, Instant};

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

    /// The time since the epoch. Saturates after 213 days, the span of [`Instant`]; a
    /// server that runs that long sees time stand still at the end rather than wrap.
    pub fn now(&self) -> Instant {
        Instant::ZERO.saturating_add(self.origin.elapsed().into())
    }

    /// A core instant as an OS instant, for a timer (`tokio::time::Instant::from_std`).
    /// At most an hour ahead of now: a deadline of "never" ([`Instant::MAX`]) becomes a
    /// timer that fires in an hour and finds nothing to do, not an overflow.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        let horizon = self.now().saturating_add(Duration::from_secs(3_600));
        let since = t.min(horizon).saturating_duration_since(Instant::ZERO);
        self.origin + std::time::Duration::from(since)
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

    #[test]
    fn never_maps_to_an_hour_ahead() {
        let clock = LiveClock::start();
        let far = clock.to_std(Instant::MAX);
        let soon = clock.to_std(clock.now());
        assert!(far > soon);
        assert!(far.duration_since(soon) <= std::time::Duration::from_secs(3_601));
    }
}
