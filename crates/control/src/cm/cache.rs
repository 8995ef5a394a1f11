//! xbind's VPI/VCI cache (paper 000 §II-C1): identifiers reserved ahead (phase 1) on each
//! (switch, output port), so that a call finds its identifiers locally and needs only
//! phase 2 (commit) remotely. A miss falls back to two-phase; each commit may piggyback a
//! replenishment, so the cache refills without extra invocations.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use atmlab_core::ids::VcId;

use super::dimension::NvProbe;

/// The identifiers cached for one (switch, output port).
#[derive(Debug, Clone, Default)]
pub struct VciCache {
    ids: VecDeque<VcId>,
    /// The same identifiers, to refuse a second copy: an identifier cached twice would
    /// be handed to two calls, and a give-back listing it twice is refused whole.
    members: FxHashSet<VcId>,
    /// A replenishment (piggybacked or a reserve) is in flight.
    pub filling: bool,
    /// Hits and misses.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
    /// `N_v`, the identifiers taken and not yet committed, as arrivals see it (§IV-A).
    pub nv: NvProbe,
}

impl VciCache {
    /// Takes an identifier, counting the hit or the miss.
    pub fn take(&mut self) -> Option<VcId> {
        match self.ids.pop_front() {
            Some(id) => {
                self.members.remove(&id);
                self.hits += 1;
                Some(id)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Adds identifiers (a fill, a replenishment, or a released call's).
    pub fn put(&mut self, ids: impl IntoIterator<Item = VcId>) {
        for id in ids {
            if self.members.insert(id) {
                self.ids.push_back(id);
            }
        }
    }

    /// Whether `id` is cached now.
    pub fn contains(&self, id: VcId) -> bool {
        self.members.contains(&id)
    }

    /// Identifiers cached now.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Removes and returns identifiers beyond `keep` (to give back to the switch).
    pub fn trim(&mut self, keep: usize) -> Vec<VcId> {
        if self.ids.len() <= keep {
            return Vec::new();
        }
        let out: Vec<VcId> = self.ids.drain(keep..).collect();
        for id in &out {
            self.members.remove(id);
        }
        out
    }
}
