//! xbind's `MessageAggregator` (paper 000 §II-C2, §II-C4): one per target switch server.
//! Commands wait in the aggregator until `threshold` (the paper's T) of them are queued or
//! the oldest has waited `flush_timeout`, then leave together as one remote invocation.
//! T = 1 sends every command at once. Both settings change at run time.
//!
//! §II-C4 counts "both add and delete requests" toward T, the default here. §IV-A's Table I
//! fits batches filled by setups alone (docs/reproductions/xbind.md), so the aggregator can
//! also let releases ride: a release then waits without counting toward T and leaves in the
//! next message, or at the flush time-out.

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};
use atmlab_fabric::switch::Command;

/// The queue of one target switch server.
#[derive(Debug, Clone)]
pub struct MessageAggregator {
    queue: VecDeque<(u64, Command)>,
    oldest: Option<Instant>,
    threshold: u32,
    flush_timeout: Duration,
    /// Whether releases ride (count not toward T).
    rides: bool,
    /// Queued commands that count toward T.
    counted: usize,
}

impl MessageAggregator {
    /// An empty aggregator.
    pub fn new(threshold: u32, flush_timeout: Duration) -> Self {
        MessageAggregator {
            queue: VecDeque::new(),
            oldest: None,
            threshold: threshold.max(1),
            flush_timeout,
            rides: false,
            counted: 0,
        }
    }

    /// Lets releases ride (they count not toward T), or makes every command count again.
    pub fn set_rides(&mut self, rides: bool) {
        self.rides = rides;
        self.counted = self.queue.iter().filter(|(_, c)| self.counts(c)).count();
    }

    /// Whether `command` counts toward T.
    fn counts(&self, command: &Command) -> bool {
        !(self.rides && matches!(command, Command::Release(_)))
    }

    /// Changes T and the flush time-out (xbind §IV-B: "can be dynamically changed").
    pub fn tune(&mut self, threshold: u32, flush_timeout: Duration) {
        self.threshold = threshold.max(1);
        self.flush_timeout = flush_timeout;
    }

    /// The current T.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// Queues one command with its request id.
    pub fn push(&mut self, now: Instant, request: u64, command: Command) {
        if self.queue.is_empty() {
            self.oldest = Some(now);
        }
        self.counted += usize::from(self.counts(&command));
        self.queue.push_back((request, command));
    }

    /// Whether a full message (T commands that count) is waiting.
    pub fn ready(&self) -> bool {
        self.counted >= self.threshold as usize
    }

    /// Commands waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// When the oldest command's flush time-out expires.
    pub fn deadline(&self) -> Option<Instant> {
        self.oldest.and_then(|t| t.checked_add(self.flush_timeout))
    }

    /// The batch to send now, if T is reached or the time-out has expired.
    pub fn poll(&mut self, now: Instant) -> Option<Vec<(u64, Command)>> {
        let full = self.ready();
        let due = full || self.deadline().is_some_and(|d| d <= now);
        if !due || self.queue.is_empty() {
            return None;
        }
        // Exactly T commands per message when the threshold triggered (so T = 1 is one
        // command per remote invocation, as in the paper), with the releases queued
        // before the T-th when they ride; everything waiting when the time-out did (a
        // safety valve, paper §II-C4). The caller polls again while `ready()` holds.
        let t = self.threshold as usize;
        let n = if !full {
            self.queue.len()
        } else if !self.rides {
            t
        } else {
            let mut seen = 0;
            self.queue
                .iter()
                .position(|(_, c)| {
                    seen += usize::from(self.counts(c));
                    seen == t
                })
                .map_or(self.queue.len(), |i| i + 1)
        };
        self.counted -= if full { t } else { self.counted };
        let batch: Vec<(u64, Command)> = self.queue.drain(..n).collect();
        self.oldest = if self.queue.is_empty() {
            None
        } else {
            Some(now)
        };
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_fabric::switch::Release;

    fn cmd(i: u64) -> Command {
        Command::Release(Release {
            connection: i,
            keep_reserved: false,
        })
    }

    #[test]
    fn sends_at_the_threshold_and_at_the_time_out() {
        let t0 = Instant::from_picos(0);
        let mut a = MessageAggregator::new(3, Duration::from_millis(5));
        a.push(t0, 1, cmd(1));
        a.push(t0, 2, cmd(2));
        assert!(a.poll(t0).is_none(), "below T and before the time-out");
        a.push(t0, 3, cmd(3));
        let b = a.poll(t0).expect("T reached");
        assert_eq!(b.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        a.push(t0, 4, cmd(4));
        assert_eq!(a.deadline(), Some(Instant::from_picos(5_000_000_000)));
        assert!(a.poll(Instant::from_picos(4_999_999_999)).is_none());
        let b = a
            .poll(Instant::from_picos(5_000_000_000))
            .expect("time-out");
        assert_eq!(b.len(), 1);
        assert!(a.is_empty() && a.deadline().is_none());
        // T = 1 sends at once; changed at run time.
        a.tune(1, Duration::from_millis(5));
        a.push(t0, 5, cmd(5));
        assert_eq!(a.poll(t0).unwrap().len(), 1);
    }

    /// A command that is not a release (its content does not matter here).
    fn other() -> Command {
        Command::Unreserve(atmlab_fabric::switch::Unreserve {
            port: atmlab_core::ids::PortId(1),
            ids: Vec::new(),
            owner: "cm".into(),
        })
    }

    #[test]
    fn releases_that_ride_wait_for_the_next_message() {
        let t0 = Instant::from_picos(0);
        let mut a = MessageAggregator::new(2, Duration::from_millis(5));
        a.set_rides(true);
        a.push(t0, 1, cmd(1));
        a.push(t0, 2, other());
        a.push(t0, 3, cmd(3));
        assert!(
            !a.ready() && a.poll(t0).is_none(),
            "one command that counts"
        );
        a.push(t0, 4, other());
        a.push(t0, 5, cmd(5));
        assert!(a.ready());
        // T counted commands and the releases queued before the T-th.
        let b = a.poll(t0).expect("T reached");
        assert_eq!(b.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        assert!(!a.ready() && a.len() == 1);
        // A release alone leaves at the time-out.
        let b = a
            .poll(Instant::from_picos(5_000_000_000))
            .expect("time-out");
        assert_eq!(b.iter().map(|x| x.0).collect::<Vec<_>>(), vec![5]);
        // Every command counts again: two releases fill T = 2.
        a.push(t0, 6, cmd(6));
        a.set_rides(false);
        a.push(t0, 7, cmd(7));
        assert!(a.ready());
        assert_eq!(a.poll(t0).unwrap().len(), 2);
        assert!(a.is_empty() && !a.ready());
    }
}
