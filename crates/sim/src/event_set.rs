//! The event set: pending events ordered by (time, insertion sequence).
//!
//! Ordering guarantee: events pop in increasing time; events with equal times pop in the
//! order they were scheduled (FIFO). Nothing else (not the event's content, not a hash,
//! not a thread) affects the order, so a run is a pure function of its inputs.
//!
//! Speed: a binary heap costs O(log n) per event. Much of a cell-level model is FIFO by
//! nature: the cells on a link, the departures of a FIFO server, the ticks of a cell-slot
//! clock are each scheduled in non-decreasing time order. Such events go into a *lane*
//! ([`EventSet::schedule_in_lane`]): a plain queue of which only the head sits in the heap.
//! With lanes the heap holds one entry per busy lane instead of one per event, and most
//! operations are O(1) queue pushes. Lanes change no ordering: a lane's events carry the
//! same (time, sequence) keys as heap events and merge with them by the same rule, which a
//! property test checks against a pure heap.
//!
//! Storage: an event scheduled on the heap lives in a slot (recycled through a free list),
//! which its heap key names. An event scheduled in a lane lives in the lane itself: the
//! lane's head (the event whose key is in the heap) in a field of its own, the events
//! behind it in a queue. A lane that holds one event at a time, the common case (a source's
//! next arrival, a single server's departure), so never touches its queue, and no event in
//! a lane costs a slot, a free-list pop and push, or a ring buffer's index arithmetic. A
//! payload type with a niche (the engine's envelopes have one) also makes the head's
//! `Option` free of a tag word. Models whose events all go through lanes (the M/M/1
//! queue) save that work on every event; docs/performance.md has the measurements.
//!
//! Cancellation: [`EventSet::cancel`] frees a heap event's slot at once; its key stays in the
//! heap and is skipped when it surfaces (lazy deletion), so cancelling is O(1). A lane event
//! is found by binary search in its lane (a lane's events are in sequence order), noted as
//! cancelled, and dropped (payload and all) when it reaches the lane's head: O(log n) plus
//! a scan of the lane's cancelled events that are still pending, which models keep few
//! (they cancel timers, which go on the heap). The note is only consulted while it is
//! non-empty, so lanes that never see a cancellation pay one test per event.
//!
//! Branch hints: the rare outcomes of the pop's tests (an empty set, the end of a run, a
//! cancelled event) are marked with [`std::hint::cold_path`], so that the compiler lays
//! the common path out as straight-line code. Without a profile it guesses, and in the
//! M/M/1 benchmark it had made nearly every common outcome a taken jump.

use std::collections::VecDeque;
use std::hint::cold_path;

use atmlab_core::time::Instant;

use crate::SimError;

/// Identifies a scheduled event, for cancelling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId {
    /// The slot of a heap event (unused for a lane event).
    slot: u32,
    /// The lane of a lane event, `NO_LANE` for a heap event.
    lane: u32,
    seq: u64,
}

/// A FIFO lane of the event set (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaneId(u32);

const NO_LANE: u32 = u32::MAX;

/// The ordering key of one pending event.
///
/// The slot and the lane share one `u64` (`slot | lane << 32`): written as two `u32`s,
/// they would be read back as one 8-byte word by the heap's sift and defeat the CPU's
/// store-to-load forwarding, a stall that `perf annotate` showed on the heap's hottest
/// path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    time: u64,
    seq: u64,
    tag: u64,
}

impl Key {
    #[inline]
    fn new(time: u64, seq: u64, slot: u32, lane: u32) -> Key {
        Key {
            time,
            seq,
            tag: u64::from(slot) | (u64::from(lane) << 32),
        }
    }
    #[inline]
    fn slot(&self) -> u32 {
        self.tag as u32
    }
    #[inline]
    fn lane(&self) -> u32 {
        (self.tag >> 32) as u32
    }
}

impl Key {
    /// Whether this key pops before `other`: earlier time, then earlier sequence number
    /// (unique, so two keys are never equal and every correct heap pops the same order).
    #[inline(always)]
    fn before(&self, other: &Key) -> bool {
        // As one 128-bit comparison (compare and subtract-with-borrow): the same order as
        // the tuple's, without the branch a lexicographic comparison compiles to.
        (u128::from(self.time) << 64 | u128::from(self.seq))
            < (u128::from(other.time) << 64 | u128::from(other.seq))
    }
}

/// Levels a newly scheduled key is sifted top-down before the bottom-up sift (see
/// [`KeyHeap::sift_down_near`]).
const NEAR_LEVELS: usize = 3;

/// A binary min-heap of keys whose top can be removed lazily.
///
/// A simulation pops the earliest event and, while handling it, usually schedules
/// another. [`KeyHeap::take_top`] therefore only marks the root vacant; the next
/// [`KeyHeap::push`] fills the hole and sifts down once (a "replace"), where a pop
/// followed by a push would sift twice. Any other access first completes the removal.
/// With two or three pending heads (a single queue) a replace is one comparison.
#[derive(Debug, Default)]
struct KeyHeap {
    keys: Vec<Key>,
    /// `keys[0]` was taken and is logically absent.
    vacant: bool,
}

impl KeyHeap {
    #[inline(always)]
    fn len(&self) -> usize {
        self.keys.len() - usize::from(self.vacant)
    }

    /// Completes a lazy removal of the top.
    #[inline(always)]
    fn settle(&mut self) {
        if self.vacant {
            self.vacant = false;
            self.remove_top();
        }
    }

    fn remove_top(&mut self) {
        if let Some(last) = self.keys.pop()
            && !self.keys.is_empty()
        {
            self.sift_down(0, last);
        }
    }

    /// The earliest key.
    #[inline(always)]
    fn peek(&mut self) -> Option<Key> {
        self.settle();
        self.keys.first().copied()
    }

    #[inline(always)]
    fn push(&mut self, k: Key) {
        if self.vacant {
            self.vacant = false;
            self.sift_down_near(k);
        } else {
            let i = self.keys.len();
            self.keys.push(k);
            self.sift_up(i, k);
        }
    }

    /// Removes the top (just returned by [`KeyHeap::peek`]), lazily.
    #[inline(always)]
    fn take_top(&mut self) {
        debug_assert!(!self.vacant && !self.keys.is_empty());
        self.vacant = true;
    }

    /// Replaces the top (just returned by [`KeyHeap::peek`]) with `k`.
    #[inline(always)]
    fn replace_top(&mut self, k: Key) {
        debug_assert!(!self.vacant && !self.keys.is_empty());
        self.sift_down(0, k);
    }

    // Everything on the hot path is inlined: a key (24 bytes) passed to a function out of
    // line goes through memory, and the callee's 16-byte load of the three 8-byte words
    // the caller stored stalls store-to-load forwarding.
    //
    // The sifts take the moving key by value and store it once, at its final place: storing
    // it first and loading it back would make the CPU read 16 bytes that three 8-byte stores
    // just wrote, a store-to-load forwarding stall (`perf annotate` put most of the sift on
    // that load).

    /// Places `k` at `i` (a hole) or above it.
    #[inline(always)]
    fn sift_up(&mut self, mut i: usize, k: Key) {
        // On a local slice: its length stays in a register, where the `Vec`'s would be
        // reloaded after every store into the buffer (the compiler cannot tell them apart).
        let keys = self.keys.as_mut_slice();
        while i > 0 {
            let p = (i - 1) / 2;
            let pk = keys[p];
            if !k.before(&pk) {
                break;
            }
            keys[i] = pk;
            i = p;
        }
        keys[i] = k;
    }

    /// Places `k`, an event just scheduled, in the root's hole: first [`NEAR_LEVELS`]
    /// levels top-down, then [`KeyHeap::sift_down`] below. A model whose heap holds many
    /// far-off events (the control plane's hang-ups, a thousand at a time) and whose next
    /// steps are due within microseconds puts most new keys near the top: bottom-up, each
    /// would sink the hole to a leaf and rise all the way back. A key due late pays at
    /// most [`NEAR_LEVELS`] comparisons more.
    #[inline(always)]
    fn sift_down_near(&mut self, k: Key) {
        let n = self.keys.len();
        let mut i = 0;
        if n > 3 {
            let keys = self.keys.as_mut_slice();
            for _ in 0..NEAR_LEVELS {
                let c = 2 * i + 1;
                if c + 1 >= n {
                    break;
                }
                let c = c + usize::from(keys[c + 1].before(&keys[c]));
                let ck = keys[c];
                if k.before(&ck) {
                    keys[i] = k;
                    return;
                }
                keys[i] = ck;
                i = c;
            }
        }
        self.sift_down(i, k);
    }

    /// Places `k` at `i` (a hole) or below it.
    ///
    /// Bottom-up, as `std`'s `BinaryHeap::pop` does: the hole first sinks to a leaf along
    /// the smaller children (one comparison per level), then `k` rises from there to its
    /// place. A key put at the root is usually among the latest (the event just scheduled,
    /// or the last key of the array), so it rises little, and this costs about half the
    /// comparisons of a top-down sift (two per level).
    ///
    /// With at most three keys (a root and its children: one queue's arrival and departure)
    /// the plain top-down step is cheaper: one or two comparisons and no moves.
    #[inline(always)]
    fn sift_down(&mut self, mut i: usize, k: Key) {
        let keys = self.keys.as_mut_slice();
        let n = keys.len();
        if n == 2 && i == 0 {
            // A root and one child (a single queue's arrival and departure), tested first:
            // the most common heap of all, and one comparison.
            let ck = keys[1];
            if ck.before(&k) {
                keys[0] = ck;
                keys[1] = k;
            } else {
                keys[0] = k;
            }
            return;
        }
        if n <= 3 {
            let mut c = 2 * i + 1;
            if c < n {
                if c + 1 < n && keys[c + 1].before(&keys[c]) {
                    c += 1;
                }
                let ck = keys[c];
                if ck.before(&k) {
                    keys[i] = ck;
                    i = c;
                }
            }
            keys[i] = k;
            return;
        }
        let start = i;
        // While both children exist.
        let mut c = 2 * i + 1;
        while c + 1 < n {
            // The smaller child without a branch: which one it is, is random, so a branch
            // would be mispredicted about once per level.
            c += usize::from(keys[c + 1].before(&keys[c]));
            keys[i] = keys[c];
            i = c;
            c = 2 * i + 1;
        }
        if c + 1 == n {
            // A last, lone child.
            keys[i] = keys[c];
            i = c;
        }
        while i > start {
            let p = (i - 1) / 2;
            let pk = keys[p];
            if !k.before(&pk) {
                break;
            }
            keys[i] = pk;
            i = p;
        }
        keys[i] = k;
    }
}

struct Slot<E> {
    /// The sequence number of the event living here; a heap key whose seq differs is stale.
    seq: u64,
    event: Option<E>,
}

/// A lane's head: its earliest pending event, whose key (with the time) is in the heap.
struct LaneHead<E> {
    seq: u64,
    event: E,
}

/// A pending event of a lane behind its head.
struct LaneEntry<E> {
    time: u64,
    seq: u64,
    event: E,
}

struct Lane<E> {
    /// The head; `None` exactly when the lane is idle (holds no event, has no key in the
    /// heap).
    head: Option<LaneHead<E>>,
    /// The events behind the head, in time (and so sequence) order.
    queue: VecDeque<LaneEntry<E>>,
    /// Time of the last event scheduled in the lane: the next may not be earlier.
    last: u64,
    /// Sequence numbers of cancelled events still in `queue` (see the module doc).
    cancelled: Vec<u64>,
}

impl<E> Lane<E> {
    /// Whether the event numbered `seq` (in this lane) was cancelled; forgets it if so, as
    /// it is being removed.
    #[cold]
    #[inline(never)]
    fn take_cancelled(&mut self, seq: u64) -> bool {
        match self.cancelled.iter().position(|&c| c == seq) {
            Some(i) => {
                self.cancelled.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

/// Pending events of one simulation.
pub struct EventSet<E> {
    heap: KeyHeap,
    lanes: Vec<Lane<E>>,
    slots: Vec<Slot<E>>,
    free: Vec<u32>,
    next_seq: u64,
    // No count of pending events: it is `slots.len() - free.len()` (a slot is either
    // holding a pending event or on the free list). Kept as a field, its update sat next
    // to `next_seq`'s and the compiler merged the two into one 16-byte load and store,
    // which the previous pop's 8-byte decrement made stall (store-to-load forwarding).
}

impl<E> Default for EventSet<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> core::fmt::Debug for EventSet<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EventSet")
            .field("pending", &self.len())
            .field("heap", &self.heap.len())
            .field("lanes", &self.lanes.len())
            .finish()
    }
}

impl<E> EventSet<E> {
    /// An empty event set.
    pub fn new() -> Self {
        EventSet {
            heap: KeyHeap::default(),
            lanes: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
        }
    }

    /// Pending (not cancelled) events. O(number of lanes).
    pub fn len(&self) -> usize {
        let in_lanes: usize = self
            .lanes
            .iter()
            .map(|l| usize::from(l.head.is_some()) + l.queue.len() - l.cancelled.len())
            .sum();
        self.slots.len() - self.free.len() + in_lanes
    }

    /// True when no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new FIFO lane.
    pub fn new_lane(&mut self) -> LaneId {
        self.lanes.push(Lane {
            head: None,
            queue: VecDeque::new(),
            last: 0,
            cancelled: Vec::new(),
        });
        LaneId(self.lanes.len() as u32 - 1)
    }

    #[inline(always)]
    fn store(&mut self, event: E) -> (u32, u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                let sl = &mut self.slots[s as usize];
                sl.seq = seq;
                sl.event = Some(event);
                s
            }
            None => {
                self.slots.push(Slot {
                    seq,
                    event: Some(event),
                });
                self.slots.len() as u32 - 1
            }
        };
        (slot, seq)
    }

    /// Schedules `event` at `at`.
    pub fn schedule(&mut self, at: Instant, event: E) -> EventId {
        let (slot, seq) = self.store(event);
        self.heap.push(Key::new(at.as_picos(), seq, slot, NO_LANE));
        EventId {
            slot,
            lane: NO_LANE,
            seq,
        }
    }

    /// Schedules `event` at `at` in `lane`, whose events must come in non-decreasing time.
    // Always inlined: called out of line, the event travels through memory and its copy
    // into the slot reads 16 bytes the caller just wrote as two 8-byte stores (a
    // store-to-load forwarding stall, which `perf annotate` showed in this function).
    #[inline(always)]
    pub fn schedule_in_lane(
        &mut self,
        lane: LaneId,
        at: Instant,
        event: E,
    ) -> Result<EventId, SimError> {
        let t = at.as_picos();
        let Some(l) = self.lanes.get_mut(lane.0 as usize) else {
            return Err(no_such_lane(lane));
        };
        if t < l.last {
            return Err(lane_order(lane, l.last, at));
        }
        l.last = t;
        let seq = self.next_seq;
        self.next_seq += 1;
        if l.head.is_none() {
            // The lane was idle: its new head joins the heap.
            l.head = Some(LaneHead { seq, event });
            self.heap.push(Key::new(t, seq, 0, lane.0));
        } else {
            l.queue.push_back(LaneEntry {
                time: t,
                seq,
                event,
            });
        }
        Ok(EventId {
            slot: 0,
            lane: lane.0,
            seq,
        })
    }

    /// Cancels a pending event; false if it already ran or was cancelled.
    pub fn cancel(&mut self, id: EventId) -> bool {
        if id.lane != NO_LANE {
            let Some(l) = self.lanes.get_mut(id.lane as usize) else {
                return false;
            };
            let pending = l.head.as_ref().is_some_and(|h| h.seq == id.seq)
                || l.queue.binary_search_by_key(&id.seq, |e| e.seq).is_ok();
            if !pending || l.cancelled.contains(&id.seq) {
                return false;
            }
            l.cancelled.push(id.seq);
            return true;
        }
        match self.slots.get_mut(id.slot as usize) {
            Some(s) if s.seq == id.seq && s.event.is_some() => {
                s.event = None;
                self.free.push(id.slot);
                true
            }
            _ => false,
        }
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&mut self) -> Option<Instant> {
        self.skip_stale();
        self.heap.peek().map(|k| Instant::from_picos(k.time))
    }

    /// The time and sequence number of the earliest pending event: where an event held
    /// outside the set (numbered by [`EventSet::take_seq`]) falls among the set's.
    pub fn peek_key(&mut self) -> Option<(Instant, u64)> {
        self.skip_stale();
        self.heap
            .peek()
            .map(|k| (Instant::from_picos(k.time), k.seq))
    }

    /// The sequence number an event scheduled now would get, for an event the caller
    /// holds outside the set: ordered against the set's events by (time, this number),
    /// it pops where [`EventSet::schedule`] would have put it. A model's one timer,
    /// re-armed on most steps, is best kept so: cancelled and scheduled again each time,
    /// it would leave a stale key in the heap per re-arming, and a timer far ahead (a
    /// command's time-out) keeps thousands of them there, deepening every sift.
    pub fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Drops cancelled events from the top of the heap.
    fn skip_stale(&mut self) {
        while let Some(k) = self.heap.peek() {
            if k.lane() != NO_LANE {
                let l = &self.lanes[k.lane() as usize];
                if l.cancelled.is_empty() || !l.cancelled.contains(&k.seq) {
                    return;
                }
                // A cancelled head: `pop_lane` forgets it and promotes the next.
                let _ = self.pop_lane(k);
            } else {
                let s = &self.slots[k.slot() as usize];
                if s.seq == k.seq && s.event.is_some() {
                    return;
                }
                self.heap.take_top();
            }
        }
    }

    /// Removes the head of `k`'s lane (`k` is the heap top) and puts the lane's next key in
    /// its place; the head's event, unless it was cancelled.
    #[inline(always)]
    fn pop_lane(&mut self, k: Key) -> Option<E> {
        let lane = k.lane();
        let l = &mut self.lanes[lane as usize];
        let head = l.head.take();
        match l.queue.pop_front() {
            Some(n) => {
                // Replace the top in place: one sift-down instead of a pop and a push.
                self.heap.replace_top(Key::new(n.time, n.seq, 0, lane));
                l.head = Some(LaneHead {
                    seq: n.seq,
                    event: n.event,
                });
            }
            None => self.heap.take_top(),
        }
        // Always `Some`: a lane's key is in the heap only while the lane has a head.
        let Some(head) = head else {
            cold_path();
            return None;
        };
        if !l.cancelled.is_empty() {
            cold_path();
            if l.take_cancelled(head.seq) {
                return None;
            }
        }
        Some(head.event)
    }

    /// Removes and returns the earliest pending event.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        self.pop_until(Instant::MAX)
    }

    /// Removes and returns the earliest pending event if it is due no later than `end`:
    /// one pass over the heap top where `peek_time` then `pop` would make two.
    #[inline]
    pub fn pop_until(&mut self, end: Instant) -> Option<(Instant, E)> {
        let end = end.as_picos();
        self.pop_if(|k| k.time <= end)
    }

    /// Removes and returns the earliest pending event if its key (time, sequence number)
    /// is before `bound`: where the caller holds events outside the set (numbered by
    /// [`EventSet::take_seq`]), the set's next event pops only if it comes before the
    /// earliest of them, in one pass over the heap top where `peek_key` then `pop` would
    /// make two. `None` when the set is empty or its earliest event is not before `bound`.
    #[inline]
    pub fn pop_before(&mut self, bound: (Instant, u64)) -> Option<(Instant, E)> {
        let bound = Key {
            time: bound.0.as_picos(),
            seq: bound.1,
            tag: 0,
        };
        self.pop_if(|k| k.before(&bound))
    }

    /// Removes and returns the earliest pending event if `due` says so of its key.
    #[inline(always)]
    fn pop_if(&mut self, due: impl Fn(&Key) -> bool) -> Option<(Instant, E)> {
        loop {
            let Some(k) = self.heap.peek() else {
                cold_path();
                return None;
            };
            if !due(&k) {
                // Once per call of the run loop at most, or per event held outside the
                // set (`pop_before`).
                cold_path();
                // A stale key not due may hide nothing earlier: the heap is ordered.
                return None;
            }
            if k.lane() != NO_LANE {
                match self.pop_lane(k) {
                    Some(e) => return Some((Instant::from_picos(k.time), e)),
                    None => continue,
                }
            }
            self.heap.take_top();
            let s = &mut self.slots[k.slot() as usize];
            if s.seq != k.seq {
                // A cancelled event's stale key.
                cold_path();
                continue;
            }
            if let Some(e) = s.event.take() {
                self.free.push(k.slot());
                return Some((Instant::from_picos(k.time), e));
            }
        }
    }
}

/// The error of a lane that does not exist (out of line: the fast path never builds it).
#[cold]
#[inline(never)]
fn no_such_lane(lane: LaneId) -> SimError {
    SimError::NoSuchLane(lane.0)
}

/// The error of a lane event earlier than its predecessor (out of line, as above).
#[cold]
#[inline(never)]
fn lane_order(lane: LaneId, last: u64, at: Instant) -> SimError {
    SimError::LaneOrder {
        lane: lane.0,
        last: Instant::from_picos(last),
        at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ps: u64) -> Instant {
        Instant::from_picos(ps)
    }

    #[test]
    fn an_event_held_outside_orders_by_its_taken_number() {
        let mut s = EventSet::new();
        s.schedule(t(5), "a");
        let outside = (t(5), s.take_seq());
        let c = s.schedule(t(5), "c");
        s.schedule(t(3), "x");
        s.cancel(c);
        s.schedule(t(5), "d");
        assert_eq!(s.peek_key().map(|k| k.0), Some(t(3)));
        s.pop();
        // "a" was scheduled before the outside event's number was taken, "d" after.
        assert!(s.peek_key().is_some_and(|k| k < outside));
        assert_eq!(s.pop().map(|e| e.1), Some("a"));
        assert!(
            s.peek_key().is_some_and(|k| k > outside),
            "c skipped, d after"
        );
    }

    #[test]
    fn pop_before_pops_only_what_comes_before_the_bound() {
        let mut s = EventSet::new();
        s.schedule(t(5), "a");
        let outside = (t(5), s.take_seq());
        s.schedule(t(5), "b");
        s.schedule(t(2), "x");
        assert_eq!(s.pop_before(outside), Some((t(2), "x")));
        // "a" was scheduled before the outside event's number was taken, "b" after.
        assert_eq!(s.pop_before(outside), Some((t(5), "a")));
        assert_eq!(s.pop_before(outside), None);
        // A refusal takes nothing away.
        assert_eq!(s.pop_until(t(4)), None);
        assert_eq!(s.pop_until(t(5)), Some((t(5), "b")));
        assert_eq!(s.pop_before((t(9), 0)), None);
    }

    #[test]
    fn time_then_fifo_order() {
        let mut s = EventSet::new();
        s.schedule(t(5), "c");
        s.schedule(t(1), "a");
        s.schedule(t(5), "d");
        s.schedule(t(1), "b");
        let order: Vec<_> = std::iter::from_fn(|| s.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }

    #[test]
    fn cancel_skips_and_frees() {
        let mut s = EventSet::new();
        let a = s.schedule(t(1), 1);
        let b = s.schedule(t(2), 2);
        assert!(s.cancel(a));
        assert!(!s.cancel(a));
        assert_eq!(s.len(), 1);
        assert_eq!(s.peek_time(), Some(t(2)));
        assert_eq!(s.pop(), Some((t(2), 2)));
        assert!(!s.cancel(b));
        assert!(s.pop().is_none());
        // A recycled slot does not resurrect an old id.
        let c = s.schedule(t(3), 3);
        assert!(!s.cancel(a));
        assert!(s.cancel(c));
        assert!(s.is_empty());
    }

    #[test]
    fn lanes_merge_with_heap_and_enforce_order() {
        let mut s = EventSet::new();
        let l = s.new_lane();
        s.schedule_in_lane(l, t(2), "lane2").unwrap();
        s.schedule(t(2), "heap2");
        s.schedule_in_lane(l, t(2), "lane2b").unwrap();
        s.schedule_in_lane(l, t(7), "lane7").unwrap();
        s.schedule(t(1), "heap1");
        assert!(matches!(
            s.schedule_in_lane(l, t(6), "late"),
            Err(SimError::LaneOrder { .. })
        ));
        let order: Vec<_> = std::iter::from_fn(|| s.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["heap1", "lane2", "heap2", "lane2b", "lane7"]);
        assert!(s.schedule_in_lane(LaneId(9), t(1), "x").is_err());
    }

    #[test]
    fn cancelled_lane_head_is_skipped() {
        let mut s = EventSet::new();
        let l = s.new_lane();
        let a = s.schedule_in_lane(l, t(1), 'a').unwrap();
        s.schedule_in_lane(l, t(2), 'b').unwrap();
        s.cancel(a);
        assert_eq!(s.pop(), Some((t(2), 'b')));
        assert_eq!(s.pop(), None);
    }

    #[test]
    fn lane_events_cancel_at_head_and_behind_it() {
        let mut s = EventSet::new();
        let l = s.new_lane();
        let a = s.schedule_in_lane(l, t(1), 'a').unwrap();
        let b = s.schedule_in_lane(l, t(2), 'b').unwrap();
        let c = s.schedule_in_lane(l, t(3), 'c').unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.cancel(b));
        assert!(!s.cancel(b));
        assert_eq!(s.len(), 2);
        assert!(s.cancel(a));
        assert_eq!(s.len(), 1);
        assert_eq!(s.peek_time(), Some(t(3)));
        assert_eq!(s.pop(), Some((t(3), 'c')));
        assert!(!s.cancel(c));
        assert!(s.is_empty());
        // The lane is idle again and takes new events.
        let d = s.schedule_in_lane(l, t(4), 'd').unwrap();
        assert!(!s.cancel(a));
        assert_eq!(s.pop(), Some((t(4), 'd')));
        assert!(!s.cancel(d));
        assert!(s.pop().is_none());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        #[derive(Debug, Clone)]
        enum Op {
            /// Schedule on the heap, `dt` after the current time.
            Heap(u64),
            /// Schedule in lane `l`, `dt` after that lane's last time.
            Lane(usize, u64),
            /// Cancel the `i`-th id handed out (if still pending).
            Cancel(usize),
            /// Pop one event.
            Pop,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (0u64..5).prop_map(Op::Heap),
                (0usize..3, 0u64..5).prop_map(|(l, d)| Op::Lane(l, d)),
                any::<usize>().prop_map(Op::Cancel),
                Just(Op::Pop),
                Just(Op::Pop),
            ]
        }

        proptest! {
            /// Lanes and lazy cancellation change nothing: the pop order equals that of a
            /// reference ordered map keyed by (time, insertion number).
            #[test]
            fn same_order_as_a_reference_queue(ops in proptest::collection::vec(op(), 1..300)) {
                let mut s = EventSet::new();
                let lanes = [s.new_lane(), s.new_lane(), s.new_lane()];
                let mut lane_last = [0u64; 3];
                let mut reference: BTreeMap<(u64, u64), u64> = BTreeMap::new();
                let mut ids: Vec<(EventId, (u64, u64))> = Vec::new();
                let mut now = 0u64;
                let mut n = 0u64;
                for o in ops {
                    match o {
                        Op::Heap(dt) => {
                            let t = now + dt;
                            let id = s.schedule(Instant::from_picos(t), n);
                            reference.insert((t, n), n);
                            ids.push((id, (t, n)));
                            n += 1;
                        }
                        Op::Lane(l, dt) => {
                            let t = lane_last[l].max(now) + dt;
                            lane_last[l] = t;
                            let id = s.schedule_in_lane(lanes[l], Instant::from_picos(t), n).unwrap();
                            reference.insert((t, n), n);
                            ids.push((id, (t, n)));
                            n += 1;
                        }
                        Op::Cancel(i) => {
                            if !ids.is_empty() {
                                let (id, key) = ids[i % ids.len()];
                                prop_assert_eq!(s.cancel(id), reference.remove(&key).is_some());
                            }
                        }
                        Op::Pop => {
                            let want = reference.pop_first();
                            let got = s.pop();
                            prop_assert_eq!(got.map(|(t, e)| (t.as_picos(), e)), want.map(|((t, _), e)| (t, e)));
                            if let Some(((t, _), _)) = want {
                                now = t;
                            }
                        }
                    }
                    prop_assert_eq!(s.len(), reference.len());
                }
                while let Some(((t, _), e)) = reference.pop_first() {
                    prop_assert_eq!(s.pop(), Some((Instant::from_picos(t), e)));
                }
                prop_assert!(s.pop().is_none());
            }
        }
    }
}
