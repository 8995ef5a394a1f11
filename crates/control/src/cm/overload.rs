//! Overload control of call setup (issue 28; paper 000 §IV leaves the manager's queue
//! unbounded): the bound on calls being set up at once adapts so that setups finish
//! within a target latency. A fixed bound is right for one machine speed only: sized
//! for a fast state (2,000 calls in setup at 80,000 setups/s is 25 ms of queue), it lets
//! a slow state hold 300 ms of queue, where the work per call grows and the carried
//! load falls to a quarter of its peak past the knee. The rule is additive increase,
//! multiplicative decrease (Jacobson's congestion window, 1988; the concurrency limits
//! of Netflix's `concurrency-limits`): a setup slower than the target cuts the bound by a
//! tenth, at most once per target interval (the setups already in flight answer for the
//! same queue); any other setup raises it by one over the bound, one call per round of
//! setups. Calls refused at the bound are blocked at once, costing no switch command.
//! Sans-IO: time comes from the caller.

use atmlab_core::time::{Duration, Instant};

/// The adaptive bound on calls being set up.
#[derive(Debug, Clone)]
pub struct SetupLimit {
    target: Duration,
    limit: f64,
    floor: f64,
    ceiling: f64,
    last_cut: Option<Instant>,
}

/// The share of the bound a slow setup cuts.
const CUT: f64 = 0.9;

impl SetupLimit {
    /// A bound that starts at `ceiling` and keeps setups within `target`, never below
    /// `floor` calls (the pipeline a light load needs) nor above `ceiling`.
    pub fn new(target: Duration, floor: usize, ceiling: usize) -> Self {
        let ceiling = ceiling.max(1) as f64;
        SetupLimit {
            target,
            limit: ceiling,
            floor: (floor.max(1) as f64).min(ceiling),
            ceiling,
            last_cut: None,
        }
    }

    /// Calls that may be in setup now.
    pub fn limit(&self) -> usize {
        self.limit as usize
    }

    /// The target latency.
    pub fn target(&self) -> Duration {
        self.target
    }

    /// A setup finished at `now`, `latency` after its request.
    pub fn on_setup(&mut self, now: Instant, latency: Duration) {
        if latency > self.target {
            let due = self
                .last_cut
                .is_none_or(|t| now.saturating_duration_since(t) >= self.target);
            if due {
                self.limit = (self.limit * CUT).max(self.floor);
                self.last_cut = Some(now);
            }
        } else {
            self.limit = (self.limit + 1.0 / self.limit).min(self.ceiling);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn slow_setups_cut_the_bound_once_per_target_interval_down_to_the_floor() {
        let mut l = SetupLimit::new(Duration::from_millis(10), 32, 2000);
        assert_eq!(l.limit(), 2000);
        // A burst of slow setups within one interval cuts once.
        for i in 0..100 {
            l.on_setup(
                at(1000) + Duration::from_micros(i),
                Duration::from_millis(50),
            );
        }
        assert_eq!(l.limit(), 1800);
        // One cut per interval after that, down to the floor and no lower.
        for k in 1..200 {
            l.on_setup(at(1000 + 10 * k), Duration::from_millis(50));
        }
        assert_eq!(l.limit(), 32);
    }

    #[test]
    fn fast_setups_raise_the_bound_by_one_per_round_up_to_the_ceiling() {
        let mut l = SetupLimit::new(Duration::from_millis(10), 32, 2000);
        for k in 0..100 {
            l.on_setup(at(10 * k), Duration::from_millis(50));
        }
        assert_eq!(l.limit(), 32);
        // A round of fast setups (a bound's worth, and a few more): one more call.
        for _ in 0..40 {
            l.on_setup(at(5000), Duration::from_millis(1));
        }
        assert_eq!(l.limit(), 33, "one round of setups, one more call");
        for _ in 0..3_000_000 {
            l.on_setup(at(6000), Duration::from_millis(1));
        }
        assert_eq!(l.limit(), 2000);
    }
}
