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
    members: Members,
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
                self.members.remove(id);
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
        self.members.contains(id)
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
            self.members.remove(*id);
        }
        out
    }
}

/// A set of identifiers: a bitmap per VPI for the VCIs a port's identifier space holds
/// (below 4,096: 512 bytes a VPI), a hash set for the rest. Every take and return of an
/// identifier tests it, so it is a bit operation, not a hash.
#[derive(Debug, Clone, Default)]
struct Members {
    /// Per VPI seen, its VCIs below [`Members::BITS`].
    low: Vec<(u16, Box<[u64; Members::BITS / 64]>)>,
    /// Any other.
    rest: FxHashSet<VcId>,
}

impl Members {
    const BITS: usize = 4096;

    fn bit(&self, id: VcId) -> Option<(usize, usize)> {
        let v = usize::from(id.vci.0);
        if v >= Self::BITS {
            return None;
        }
        let i = self.low.iter().position(|(p, _)| *p == id.vpi.0)?;
        Some((i, v))
    }

    /// Adds `id`; false if it was there.
    fn insert(&mut self, id: VcId) -> bool {
        let v = usize::from(id.vci.0);
        if v >= Self::BITS {
            return self.rest.insert(id);
        }
        let i = match self.low.iter().position(|(p, _)| *p == id.vpi.0) {
            Some(i) => i,
            None => {
                self.low.push((id.vpi.0, Box::new([0; Self::BITS / 64])));
                self.low.len() - 1
            }
        };
        let (w, b) = (v / 64, 1u64 << (v % 64));
        let word = &mut self.low[i].1[w];
        let new = *word & b == 0;
        *word |= b;
        new
    }

    fn remove(&mut self, id: VcId) {
        match self.bit(id) {
            Some((i, v)) => self.low[i].1[v / 64] &= !(1u64 << (v % 64)),
            None => {
                self.rest.remove(&id);
            }
        }
    }

    fn contains(&self, id: VcId) -> bool {
        match self.bit(id) {
            Some((i, v)) => self.low[i].1[v / 64] & (1u64 << (v % 64)) != 0,
            None => usize::from(id.vci.0) >= Self::BITS && self.rest.contains(&id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::ids::{Vci, Vpi};

    fn id(vpi: u16, vci: u16) -> VcId {
        VcId {
            vpi: Vpi(vpi),
            vci: Vci(vci),
        }
    }

    #[test]
    fn an_identifier_is_cached_once_on_either_side_of_the_bitmap() {
        let mut c = VciCache::default();
        let ids = [id(0, 32), id(0, 4095), id(0, 4096), id(7, 32), id(0, 65535)];
        c.put(ids);
        c.put(ids);
        assert_eq!(c.len(), ids.len(), "a second copy is refused");
        for i in ids {
            assert!(c.contains(i));
        }
        assert!(!c.contains(id(1, 32)) && !c.contains(id(0, 33)));
        assert_eq!(c.take(), Some(id(0, 32)));
        assert!(!c.contains(id(0, 32)));
        assert_eq!(c.trim(2), vec![id(7, 32), id(0, 65535)]);
        assert!(!c.contains(id(7, 32)) && !c.contains(id(0, 65535)));
        assert!(c.contains(id(0, 4096)));
        c.put([id(0, 32)]);
        assert_eq!(c.len(), 3, "a taken identifier may come back");
    }
}
