//! The users' calls in progress in the simulated shell: each call from its arrival until
//! it is decided (established, blocked or failed), by its number.

use std::collections::VecDeque;

use super::UserCall;

/// The calls in progress, by number. Numbers are given in turn, and a call is decided
/// within its setup (its manager answers or refuses it, or dies with it), so the calls
/// in progress are a window of numbers that moves on: a ring of slots from the oldest
/// call in progress, each look-up an index where a hash map hashed (five look-ups per
/// call).
#[derive(Debug, Default)]
pub(super) struct InProgress {
    /// From call `first` on; `None` for a call decided while an older one is not.
    slots: VecDeque<Option<UserCall>>,
    first: usize,
    live: usize,
}

impl InProgress {
    /// Call `u` arrived (numbers come in turn).
    pub(super) fn insert(&mut self, u: usize, call: UserCall) {
        if self.slots.is_empty() {
            self.first = u;
        }
        debug_assert!(u >= self.first + self.slots.len(), "numbers come in turn");
        while self.first + self.slots.len() < u {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(call));
        self.live += 1;
    }

    pub(super) fn get(&self, u: &usize) -> Option<&UserCall> {
        let i = u.checked_sub(self.first)?;
        self.slots.get(i)?.as_ref()
    }

    pub(super) fn contains_key(&self, u: &usize) -> bool {
        self.get(u).is_some()
    }

    /// Call `u` is decided: it leaves (and the window moves past the calls decided).
    pub(super) fn remove(&mut self, u: &usize) -> Option<UserCall> {
        let i = u.checked_sub(self.first)?;
        let call = self.slots.get_mut(i)?.take()?;
        self.live -= 1;
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.first += 1;
        }
        Some(call)
    }

    /// The numbers of the calls in progress, in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|_| self.first + i))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::time::Instant;

    fn call(a: usize) -> UserCall {
        UserCall {
            pair: (a, a + 1),
            arrived: Instant::ZERO,
        }
    }

    #[test]
    fn the_window_moves_past_the_calls_decided() {
        let mut c = InProgress::default();
        for u in 0..4 {
            c.insert(u, call(u));
        }
        assert_eq!(c.remove(&1).map(|x| x.pair.0), Some(1));
        assert!(c.remove(&1).is_none(), "decided once");
        assert!(!c.contains_key(&1) && c.contains_key(&2));
        assert_eq!(c.keys().collect::<Vec<_>>(), [0, 2, 3]);
        c.remove(&0);
        assert_eq!(c.slots.len(), 2, "0 and 1 are behind the window");
        c.remove(&2);
        c.remove(&3);
        assert!(c.is_empty() && c.slots.is_empty());
        c.insert(7, call(7));
        assert_eq!(c.get(&7).map(|x| x.pair.1), Some(8));
        assert!(c.get(&6).is_none() && c.get(&8).is_none());
    }
}
