//! The servers of the simulated control plane (paper 000 §III-A's testbed: a manager,
//! its links to the switch servers, each switch server, each a FIFO queue served by one
//! or more threads) and what each holds, for the shell ([`super::shell`]) that runs them
//! in virtual time.

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};
use atmlab_fabric::FabricError;
use atmlab_fabric::switch::{Command, Reply, Switch};
use rustc_hash::FxHashMap;

use super::costs::Reading;

/// A FIFO server with threads.
pub(super) struct Server<W, O = ()> {
    pub(super) queue: VecDeque<W>,
    /// Per thread, what it is working on (its outputs, for the manager).
    pub(super) threads: Vec<Option<O>>,
    pub(super) busy: Duration,
    /// Idle when work came: it starts once awake (`wakeup` profiles).
    pub(super) waking: bool,
}

impl<W, O> Server<W, O> {
    pub(super) fn new(threads: usize) -> Self {
        Server {
            queue: VecDeque::new(),
            threads: (0..threads).map(|_| None).collect(),
            busy: Duration::ZERO,
            waking: false,
        }
    }
    pub(super) fn idle_thread(&self) -> Option<usize> {
        self.threads.iter().position(Option::is_none)
    }
    /// Nothing queued and no thread working.
    pub(super) fn idle(&self) -> bool {
        self.queue.is_empty() && self.threads.iter().all(Option::is_none)
    }
}

/// A switch's answers to one message: each request id with where its answer waits in
/// the switch's [`Given`] (the answer itself stays there until its manager takes it).
pub(super) type Answers = Vec<(u64, u32)>;

/// An answer a switch server gave, from when it gives it until its manager has it.
pub(super) struct Answer {
    /// When it was given.
    pub(super) at: Instant,
    /// Its request key (the manager's number and its request id).
    pub(super) key: u64,
    pub(super) reply: Result<Reply, FabricError>,
    /// It is also the switch's record of the answer, for a repeated request: from when
    /// it is given until answers are kept (see the shell's `Plane::answers_kept`; the
    /// records move to [`SwitchServer::answered`] then) or the switch crashes.
    pub(super) recorded: bool,
    /// On its way to the manager (false: lost, and held only as the record).
    pub(super) sent: bool,
}

/// The answers a switch server gave that their managers do not have yet, each in a
/// slot of its own (freed slots are reused), so that the messages carry only the slots'
/// numbers: giving an answer and taking it are an index each, no hash map, no copy.
#[derive(Default)]
pub(super) struct Given {
    slots: Vec<Option<Answer>>,
    free: Vec<u32>,
}

impl Given {
    /// Holds `a`; returns its slot.
    pub(super) fn put(&mut self, a: Answer) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(a);
                i
            }
            None => {
                self.slots.push(Some(a));
                self.slots.len() as u32 - 1
            }
        }
    }

    /// Takes the answer in slot `i` out (its manager has it, or it is lost).
    pub(super) fn take(&mut self, i: u32) -> Option<Answer> {
        let a = self.slots.get_mut(i as usize)?.take();
        if a.is_some() {
            self.free.push(i);
        }
        a
    }

    pub(super) fn get_mut(&mut self, i: u32) -> Option<&mut Answer> {
        self.slots.get_mut(i as usize)?.as_mut()
    }

    /// Every answer held, with its slot.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Answer)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, a)| Some((i as u32, a.as_mut()?)))
    }
}

/// A switch server: its core, its threads and the answers it already gave (a repeated
/// request id is answered again, not applied twice, as the live servers do).
///
/// The live server keeps each answer [`ANSWER_KEEP`] and forgets it at the first message
/// it serves after that. Here an answer is forgotten sooner where nothing can ask for it
/// again (see the shell's `Plane::answers_kept`), which changes no answer given, only the memory and
/// the time it takes: kept, the answers of a busy plane would make a map of millions of
/// entries, each request looked up in it. Until then the answers not yet with their
/// managers are the only records, and they are in [`Given`] anyway (on their way).
pub(super) struct SwitchServer {
    pub(super) core: Switch,
    /// Messages queued, each with the number of the manager that sent it.
    pub(super) server: Server<(usize, Vec<(u64, Command)>)>,
    /// Per thread, the answers it is giving and to which manager.
    pub(super) replies: Vec<Option<(usize, Answers)>>,
    /// The answers given that their managers do not have yet.
    pub(super) given: Given,
    /// Once answers are kept, the answers given, by request key (the manager's number
    /// and its request id), with when they were given.
    pub(super) answered: FxHashMap<u64, (Instant, Result<Reply, FabricError>)>,
    /// When each answer was given, oldest first, to forget it [`ANSWER_KEEP`] later;
    /// filled only once answers are kept (a repeated request may come).
    pub(super) answered_order: VecDeque<(Instant, u64)>,
    /// Per queued message: how it reached the server, which prices it (`Reading`).
    pub(super) readings: VecDeque<Reading>,
    /// When the server last finished a message (and forgot the answers older than
    /// [`ANSWER_KEEP`] then).
    pub(super) pruned_at: Option<Instant>,
}

/// How long a switch server keeps an answer for a repeated request (as long as the
/// manager may re-send it: its retries).
pub(super) const ANSWER_KEEP: Duration = Duration::from_secs(60);

impl SwitchServer {
    /// Answers are kept from now on: the records held in [`Given`] (the answers their
    /// managers do not have yet, on their way or lost) move to `answered`, in the order
    /// they were given, and those the live server would have forgotten by now are
    /// forgotten. A lost answer was held only as its record, and is let go.
    pub(super) fn keep_answers(&mut self) {
        let mut order: Vec<(Instant, u64, u32)> = self
            .given
            .iter_mut()
            .filter(|(_, a)| a.recorded)
            .map(|(i, a)| (a.at, a.key, i))
            .collect();
        order.sort_unstable();
        for &(at, key, i) in &order {
            let Some(a) = self.given.get_mut(i) else {
                continue;
            };
            a.recorded = false;
            self.answered.insert(key, (at, a.reply.clone()));
            if !a.sent {
                self.given.take(i);
            }
        }
        self.answered_order = order.into_iter().map(|(at, key, _)| (at, key)).collect();
        if let Some(at) = self.pruned_at {
            self.forget_answers(at);
        }
    }

    /// The answers in slots `answers` will never reach their manager (lost on the wire,
    /// or their manager died): held on as records while they are the records.
    pub(super) fn lost(&mut self, answers: &Answers) {
        for &(_, i) in answers {
            match self.given.get_mut(i) {
                Some(a) if a.recorded => a.sent = false,
                _ => {
                    self.given.take(i);
                }
            }
        }
    }

    /// The server crashed: the answers it was giving die with it, and so do its records
    /// of the answers it gave (those on their way still arrive).
    pub(super) fn crashed(&mut self) {
        for r in &mut self.replies {
            if let Some((_, answers)) = r.take() {
                for (_, i) in answers {
                    self.given.take(i);
                }
            }
        }
        let mut gone = Vec::new();
        for (i, a) in self.given.iter_mut() {
            a.recorded = false;
            if !a.sent {
                gone.push(i);
            }
        }
        for i in gone {
            self.given.take(i);
        }
        self.answered.clear();
        self.answered_order.clear();
        self.pruned_at = None;
    }

    /// The server finished a message at `now`: it forgets the answers older than
    /// [`ANSWER_KEEP`].
    pub(super) fn forget_answers(&mut self, now: Instant) {
        self.pruned_at = Some(now);
        while let Some(&(at, req)) = self.answered_order.front() {
            if now.saturating_duration_since(at) <= ANSWER_KEEP {
                break;
            }
            self.answered_order.pop_front();
            // An answer forgotten and given again since is the newer one's to forget.
            if self.answered.get(&req).is_some_and(|&(t, _)| t == at) {
                self.answered.remove(&req);
            }
        }
    }
}

/// What a manager's link to a switch marshals or unmarshals (`links` profiles: each
/// link its own thread, as the live manager's link tasks).
#[derive(Debug)]
pub(super) enum LinkJob {
    /// A message of commands to the switch.
    Out(Vec<(u64, Command)>),
    /// The switch's answers, for the manager.
    In(Answers),
}

/// A manager's link to one switch. Each queued job notes whether it found the link
/// idle (`coalesce` profiles charge `per_message` only then).
#[derive(Default)]
pub(super) struct Link {
    pub(super) queue: VecDeque<(LinkJob, Reading)>,
    pub(super) job: Option<LinkJob>,
    /// Idle when a job came: it starts once awake (`wakeup` profiles).
    pub(super) waking: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_fabric::switch::Reply;

    fn answer(key: u64) -> Answer {
        Answer {
            at: Instant::ZERO,
            key,
            reply: Ok(Reply::Released),
            recorded: true,
            sent: true,
        }
    }

    #[test]
    fn given_answers_are_taken_once_and_their_slots_reused() {
        let mut g = Given::default();
        let a = g.put(answer(1));
        let b = g.put(answer(2));
        assert_eq!(g.take(a).map(|x| x.key), Some(1));
        assert!(g.take(a).is_none(), "taken once");
        let c = g.put(answer(3));
        assert_eq!(c, a, "the freed slot is reused");
        let keys: Vec<u64> = g.iter_mut().map(|(_, x)| x.key).collect();
        assert_eq!(keys, [3, 2]);
        assert_eq!(g.take(b).map(|x| x.key), Some(2));
    }
}
