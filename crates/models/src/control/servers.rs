//! The servers of the simulated control plane (paper 000 §III-A's testbed: a manager,
//! its links to the switch servers, each switch server, each a FIFO queue served by one
//! or more threads) and what each holds, for the shell ([`super::shell`]) that runs them
//! in virtual time.

use std::collections::VecDeque;

use atmlab_core::time::{Duration, Instant};
use atmlab_fabric::FabricError;
use atmlab_fabric::switch::{Command, Reply, Switch};
use rustc_hash::FxHashMap;

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

/// A switch's answers to one message.
pub(super) type Answers = Vec<(u64, Result<Reply, FabricError>)>;

/// A switch server: its core, its threads and the answers it already gave (a repeated
/// request id is answered again, not applied twice, as the live servers do).
///
/// The live server keeps each answer [`ANSWER_KEEP`] and forgets it at the first message
/// it serves after that. Here an answer is forgotten sooner where nothing can ask for it
/// again (see the shell's `Plane::answers_kept`), which changes no answer given, only the memory and
/// the time it takes: kept, the answers of a busy plane would make a map of millions of
/// entries, each request looked up in it.
pub(super) struct SwitchServer {
    pub(super) core: Switch,
    /// Messages queued, each with the number of the manager that sent it.
    pub(super) server: Server<(usize, Vec<(u64, Command)>)>,
    /// Per thread, the answers it is giving and to which manager.
    pub(super) replies: Vec<Option<(usize, Answers)>>,
    /// The answers given, by request key (the manager's number and its request id),
    /// with when they were given.
    pub(super) answered: FxHashMap<u64, (Instant, Result<Reply, FabricError>)>,
    /// When each answer was given, oldest first, to forget it [`ANSWER_KEEP`] later;
    /// filled only once answers are kept (a repeated request may come).
    pub(super) answered_order: VecDeque<(Instant, u64)>,
    /// Per queued message: whether it found the server idle (see `Link`).
    pub(super) cold: VecDeque<bool>,
    /// When the server last finished a message (and forgot the answers older than
    /// [`ANSWER_KEEP`] then).
    pub(super) pruned_at: Option<Instant>,
}

/// How long a switch server keeps an answer for a repeated request (as long as the
/// manager may re-send it: its retries).
pub(super) const ANSWER_KEEP: Duration = Duration::from_secs(60);

impl SwitchServer {
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
    pub(super) queue: VecDeque<(LinkJob, bool)>,
    pub(super) job: Option<LinkJob>,
    /// Idle when a job came: it starts once awake (`wakeup` profiles).
    pub(super) waking: bool,
}
