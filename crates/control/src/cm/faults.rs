//! Fault injection between a connection manager and its switch servers (issue 10; paper
//! 000 §II-C: xbind's oneway calls "do not guarantee delivery", so its recovery protocol
//! must be exercised, not assumed).
//!
//! [`FaultPlan`] says what fraction of messages to drop, duplicate, delay or reorder, in
//! each direction; [`FaultInjector`] is the seeded, sans-IO decision for each message,
//! and [`FaultyChannel`] applies it to one direction of a link: it turns each message
//! into the [`Delivery`]s to make (now, or after a delay) and holds a reordered message
//! back. The live shell (`cm::live`) runs one channel per direction of every switch link
//! (a batch of commands going out, every answer coming back) and only performs the
//! deliveries. The manager's recovery (time-outs, re-sends with the same request id,
//! which the switch answers once, rollback) must turn every call into a clean success or
//! failure whatever the plan.

use std::str::FromStr;

use atmlab_core::time::Duration;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// What happens to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Delivered as sent.
    Deliver,
    /// Lost.
    Drop,
    /// Delivered twice.
    Duplicate,
    /// Delivered after this long (later messages may overtake it).
    Delay(Duration),
    /// Held back until the next message has gone (or a short time has passed).
    Reorder,
}

/// Fractions of messages (each in [0, 1], together at most 1) and the delay applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultPlan {
    /// Lost.
    pub drop: f64,
    /// Delivered twice.
    pub duplicate: f64,
    /// Delivered late by up to `delay`.
    pub delay: f64,
    /// Swapped with the next message.
    pub reorder: f64,
    /// The longest delay (each delayed message waits a uniform time up to it).
    pub max_delay: Duration,
    /// Seed of the decisions.
    pub seed: u64,
}

impl Default for FaultPlan {
    fn default() -> Self {
        FaultPlan {
            drop: 0.0,
            duplicate: 0.0,
            delay: 0.0,
            reorder: 0.0,
            max_delay: Duration::from_millis(5),
            seed: 1,
        }
    }
}

impl FaultPlan {
    /// The same fraction of each of the four faults.
    pub fn uniform(fraction: f64, seed: u64) -> Self {
        FaultPlan {
            drop: fraction,
            duplicate: fraction,
            delay: fraction,
            reorder: fraction,
            seed,
            ..FaultPlan::default()
        }
    }

    /// Whether the plan does anything.
    pub fn is_active(&self) -> bool {
        self.drop + self.duplicate + self.delay + self.reorder > 0.0
    }

    /// Checks the fractions.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("drop", self.drop),
            ("duplicate", self.duplicate),
            ("delay", self.delay),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("fault fraction {name} = {v} is not within [0, 1]"));
            }
        }
        let sum = self.drop + self.duplicate + self.delay + self.reorder;
        if sum > 1.0 + 1e-12 {
            return Err(format!("fault fractions add up to {sum}, more than 1"));
        }
        Ok(())
    }
}

/// Parses `drop=0.05,duplicate=0.05,delay=0.05,reorder=0.05,max_delay=2 ms,seed=7`, or a
/// bare fraction (`0.05`) for all four.
impl FromStr for FaultPlan {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if let Ok(f) = s.parse::<f64>() {
            let p = FaultPlan::uniform(f, 1);
            p.validate()?;
            return Ok(p);
        }
        let mut p = FaultPlan::default();
        for part in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            let frac = || {
                v.parse::<f64>()
                    .map_err(|_| format!("{k}: {v:?} is not a number"))
            };
            match k {
                "drop" => p.drop = frac()?,
                "duplicate" | "dup" => p.duplicate = frac()?,
                "delay" => p.delay = frac()?,
                "reorder" => p.reorder = frac()?,
                "max_delay" => {
                    p.max_delay = v
                        .parse::<Duration>()
                        .map_err(|e| format!("max_delay: {e}"))?
                }
                "seed" => {
                    p.seed = v
                        .parse::<u64>()
                        .map_err(|_| format!("seed: {v:?} is not an integer"))?
                }
                other => {
                    return Err(format!(
                        "unknown fault {other:?}; known: drop, duplicate, delay, reorder, max_delay, seed"
                    ));
                }
            }
        }
        p.validate()?;
        Ok(p)
    }
}

/// The seeded decision for each message of one link direction.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    plan: FaultPlan,
    rng: Xoshiro256PlusPlus,
    /// Decisions so far, by fate: deliver, drop, duplicate, delay, reorder.
    pub counts: [u64; 5],
}

impl FaultInjector {
    /// An injector for one link direction; `stream` separates the links' decisions
    /// (e.g. a hash of the switch name and the direction).
    pub fn new(plan: FaultPlan, stream: u64) -> Self {
        FaultInjector {
            plan,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                plan.seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            counts: [0; 5],
        }
    }

    /// The fate of the next message.
    pub fn decide(&mut self) -> Fate {
        let p = &self.plan;
        let u: f64 = self.rng.random();
        let (fate, i) = if u < p.drop {
            (Fate::Drop, 1)
        } else if u < p.drop + p.duplicate {
            (Fate::Duplicate, 2)
        } else if u < p.drop + p.duplicate + p.delay {
            let f: f64 = self.rng.random();
            (
                Fate::Delay(Duration::from_picos(
                    (p.max_delay.as_picos() as f64 * f) as u64,
                )),
                3,
            )
        } else if u < p.drop + p.duplicate + p.delay + p.reorder {
            (Fate::Reorder, 4)
        } else {
            (Fate::Deliver, 0)
        };
        self.counts[i] += 1;
        fate
    }
}

/// What to do with a message: deliver it now, or after a delay (later messages may
/// overtake it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery<T> {
    /// Send it now.
    Now(T),
    /// Send it once this long has passed.
    After(Duration, T),
}

/// One direction of a link with faults: each message's fate decided by a seeded
/// [`FaultInjector`] (none: every message delivered as sent), and the message held back
/// to be reordered.
#[derive(Debug, Clone)]
pub struct FaultyChannel<T> {
    injector: Option<FaultInjector>,
    /// A message held back to be reordered: it goes after the next message (a re-send,
    /// at the latest, comes when the manager's time-out expires).
    held: Option<T>,
}

impl<T: Clone> FaultyChannel<T> {
    /// A channel for one link direction; `stream` separates the links' decisions (see
    /// [`stream_id`]). Without a plan, nothing is decided (no random draws) and every
    /// message is delivered as sent.
    pub fn new(plan: Option<FaultPlan>, stream: u64) -> Self {
        FaultyChannel {
            injector: plan.map(|p| FaultInjector::new(p, stream)),
            held: None,
        }
    }

    /// The deliveries to make for `item`, in order: one fate drawn (with a plan), then
    /// the message held back for reordering, if any, after whatever `item` becomes,
    /// unless `item` itself is held (then nothing goes).
    pub fn apply(&mut self, item: T) -> Deliveries<T> {
        let fate = self
            .injector
            .as_mut()
            .map_or(Fate::Deliver, FaultInjector::decide);
        self.apply_fate(fate, item)
    }

    /// [`FaultyChannel::apply`] with the fate given.
    fn apply_fate(&mut self, fate: Fate, item: T) -> Deliveries<T> {
        // At most three deliveries (a duplicate and the held message): a fixed array, so
        // the manager's path allocates nothing per message.
        let mut out: [Option<Delivery<T>>; 3] = [None, None, None];
        match fate {
            Fate::Deliver => out[0] = Some(Delivery::Now(item)),
            Fate::Drop => {}
            Fate::Duplicate => {
                out[0] = Some(Delivery::Now(item.clone()));
                out[1] = Some(Delivery::Now(item));
            }
            Fate::Delay(d) => out[0] = Some(Delivery::After(d, item)),
            Fate::Reorder if self.held.is_none() => {
                self.held = Some(item);
                return out.into_iter().flatten();
            }
            // One message is held at a time: a second one to reorder goes now, before
            // the first.
            Fate::Reorder => out[0] = Some(Delivery::Now(item)),
        }
        out[2] = self.held.take().map(Delivery::Now);
        out.into_iter().flatten()
    }

    /// The message held back, if any (at the end of the stream).
    pub fn take_held(&mut self) -> Option<T> {
        self.held.take()
    }

    /// The decisions so far, by fate (see [`FaultInjector::counts`]); `None` without a
    /// plan.
    pub fn counts(&self) -> Option<[u64; 5]> {
        self.injector.as_ref().map(|i| i.counts)
    }
}

/// The deliveries [`FaultyChannel::apply`] asks for, in order.
pub type Deliveries<T> = std::iter::Flatten<std::array::IntoIter<Option<Delivery<T>>, 3>>;

/// A stable 64-bit stream id for a link direction (FNV-1a of the name and direction).
pub fn stream_id(switch: &str, outbound: bool) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in switch.bytes().chain([outbound as u8]) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_kept_and_decisions_are_seeded() {
        let plan = FaultPlan::uniform(0.05, 42);
        let mut a = FaultInjector::new(plan, stream_id("s1", true));
        let mut b = FaultInjector::new(plan, stream_id("s1", true));
        let fates: Vec<Fate> = (0..100_000).map(|_| a.decide()).collect();
        let again: Vec<Fate> = (0..100_000).map(|_| b.decide()).collect();
        assert_eq!(fates, again, "same seed and stream, same decisions");
        for (i, c) in a.counts.iter().enumerate().skip(1) {
            let f = *c as f64 / 100_000.0;
            assert!((f - 0.05).abs() < 0.005, "fate {i}: {f}");
        }
        let mut other = FaultInjector::new(plan, stream_id("s2", true));
        let theirs: Vec<Fate> = (0..1000).map(|_| other.decide()).collect();
        assert_ne!(&fates[..1000], &theirs[..], "links decide independently");
        assert!(fates.iter().all(|f| match f {
            Fate::Delay(d) => *d <= plan.max_delay,
            _ => true,
        }));
    }

    use Delivery::{After, Now};

    fn channel<T: Clone>() -> FaultyChannel<T> {
        FaultyChannel::new(None, 0)
    }

    #[test]
    fn without_a_plan_everything_goes_now_in_order() {
        let mut c = FaultyChannel::new(None, stream_id("s1", true));
        for i in 0..100u32 {
            assert_eq!(c.apply(i).collect::<Vec<_>>(), vec![Now(i)]);
        }
        assert_eq!(c.take_held(), None);
        assert_eq!(c.counts(), None);
    }

    #[test]
    fn each_fate_makes_its_deliveries() {
        let d = Duration::from_millis(3);
        let mut c = channel();
        assert_eq!(
            c.apply_fate(Fate::Deliver, "a").collect::<Vec<_>>(),
            vec![Now("a")]
        );
        assert_eq!(c.apply_fate(Fate::Drop, "b").collect::<Vec<_>>(), vec![]);
        assert_eq!(
            c.apply_fate(Fate::Duplicate, "c").collect::<Vec<_>>(),
            vec![Now("c"), Now("c")]
        );
        assert_eq!(
            c.apply_fate(Fate::Delay(d), "d").collect::<Vec<_>>(),
            vec![After(d, "d")]
        );
        assert_eq!(c.take_held(), None);
    }

    #[test]
    fn a_reordered_message_goes_after_the_next_whatever_its_fate() {
        let d = Duration::from_millis(1);
        let mut c = channel();
        // Held, then released after the next message delivered.
        assert_eq!(c.apply_fate(Fate::Reorder, "a").collect::<Vec<_>>(), vec![]);
        assert_eq!(
            c.apply_fate(Fate::Deliver, "b").collect::<Vec<_>>(),
            vec![Now("b"), Now("a")]
        );
        // A drop of the next one releases it too.
        assert_eq!(c.apply_fate(Fate::Reorder, "c").collect::<Vec<_>>(), vec![]);
        assert_eq!(
            c.apply_fate(Fate::Drop, "d").collect::<Vec<_>>(),
            vec![Now("c")]
        );
        // After both copies of a duplicate.
        assert_eq!(c.apply_fate(Fate::Reorder, "e").collect::<Vec<_>>(), vec![]);
        assert_eq!(
            c.apply_fate(Fate::Duplicate, "f").collect::<Vec<_>>(),
            vec![Now("f"), Now("f"), Now("e")]
        );
        // A delayed next one: the held one goes now, the delayed one later.
        assert_eq!(c.apply_fate(Fate::Reorder, "g").collect::<Vec<_>>(), vec![]);
        assert_eq!(
            c.apply_fate(Fate::Delay(d), "h").collect::<Vec<_>>(),
            vec![After(d, "h"), Now("g")]
        );
        // A second reorder while one is held: the new one goes now, then the held one.
        assert_eq!(c.apply_fate(Fate::Reorder, "i").collect::<Vec<_>>(), vec![]);
        assert_eq!(
            c.apply_fate(Fate::Reorder, "j").collect::<Vec<_>>(),
            vec![Now("j"), Now("i")]
        );
        // Held at the end of the stream: taken by the shell.
        assert_eq!(c.apply_fate(Fate::Reorder, "k").collect::<Vec<_>>(), vec![]);
        assert_eq!(c.take_held(), Some("k"));
        assert_eq!(c.take_held(), None);
        assert_eq!(
            c.apply_fate(Fate::Deliver, "l").collect::<Vec<_>>(),
            vec![Now("l")]
        );
    }

    #[test]
    fn duplicates_are_clones() {
        let mut c = channel();
        let item = (7u64, vec![1u8, 2, 3]);
        let out = c
            .apply_fate(Fate::Duplicate, item.clone())
            .collect::<Vec<_>>();
        assert_eq!(out, vec![Now(item.clone()), Now(item)]);
    }

    #[test]
    fn a_seeded_channel_draws_one_decision_per_message() {
        // The channel's fates are the injector's, drawn in the same order, one per
        // message: a seeded run makes the same choices as the injector alone.
        let plan = FaultPlan::uniform(0.1, 5);
        let stream = stream_id("s1", false);
        let mut c = FaultyChannel::new(Some(plan), stream);
        let mut alone = FaultInjector::new(plan, stream);
        let mut replay = channel();
        for i in 0..10_000u32 {
            let fate = alone.decide();
            assert_eq!(
                c.apply(i).collect::<Vec<_>>(),
                replay.apply_fate(fate, i).collect::<Vec<_>>(),
                "message {i}"
            );
        }
        assert_eq!(c.counts(), Some(alone.counts));
        assert_eq!(c.take_held(), replay.take_held());
    }

    #[test]
    fn plans_parse_and_bad_ones_are_named() {
        let p: FaultPlan = "drop=0.1, dup=0.02, max_delay=2 ms, seed=9"
            .parse()
            .unwrap();
        assert_eq!(
            (p.drop, p.duplicate, p.delay, p.max_delay, p.seed),
            (0.1, 0.02, 0.0, Duration::from_millis(2), 9)
        );
        let u: FaultPlan = "0.05".parse().unwrap();
        assert_eq!(u, FaultPlan::uniform(0.05, 1));
        assert!(!FaultPlan::default().is_active());
        for (bad, what) in [
            ("drop=2", "drop = 2"),
            ("lose=0.1", "unknown fault \"lose\""),
            ("drop", "key=value"),
            ("drop=x", "not a number"),
            ("drop=0.6,delay=0.6", "more than 1"),
            ("max_delay=soon", "max_delay"),
        ] {
            let e = bad.parse::<FaultPlan>().unwrap_err();
            assert!(e.contains(what), "{bad}: {e}");
        }
    }
}
