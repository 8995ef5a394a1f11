//! Point-to-multipoint connection trees (paper 001 §2 and §4, "multipoint connections";
//! paper 000 §II-C, whose connection manager sets up one VC per route hop). A connection
//! is a tree rooted at the source host's port: at each switch it crosses, one switch
//! connection with one input and one or more outputs (branches); where routes to two
//! leaves part, the switch connection forks and the switch copies each cell to every
//! branch (the switches' point-to-multipoint entries, `SwitchServer.AddBranch`).
//!
//! Identifier *slots* name the VCs of a tree: slot 0 is the source's VC at the root
//! switch's input port; every branch has its own slot, its output VC, which is also the
//! input VC of the hop downstream of it (the same value on both ends of a link). A hop
//! is known by its input slot. Slots and hops are never renumbered: a pruned hop or
//! slot is marked gone, so a manager can keep per-slot and per-hop state in plain
//! vectors while leaves come and go.
//!
//! A point-to-point connection is a tree with one leaf: hop `h` has input slot `h` and
//! one branch, slot `h + 1`.
//!
//! This module is pure: building a tree from routes, grafting a leaf ([`Tree::graft`],
//! AddLeaf: where its route leaves the tree, a new branch on an existing hop, then new
//! hops) and pruning one ([`Tree::prune`], DropLeaf: its branch back to the fork, where
//! the switch connection loses one branch; the hops below carried only that leaf and are
//! released). The managers turn the results into switch commands.

use std::sync::Arc;

/// One hop of a call's route: the pure vocabulary routes and trees are built from (it
/// lives here, below the manager's core, so the core depends on trees and not back).
///
/// Names are shared (`Arc<str>`): a route is copied per call from the route cache into
/// the call's tree, and a copy of a shared name is a count, not an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopSpec {
    /// The switch's name.
    pub switch: Arc<str>,
    /// Where the cells enter.
    pub in_port: u16,
    /// Where they leave.
    pub out_port: u16,
}

impl HopSpec {
    /// The route through `switches` in order, entering each on `in_port` and leaving on
    /// `out_port` (a line of switches wired port `out_port` to the next one's `in_port`).
    pub fn through(switches: &[&str], in_port: u16, out_port: u16) -> Vec<HopSpec> {
        switches
            .iter()
            .map(|s| HopSpec {
                switch: Arc::from(*s),
                in_port,
                out_port,
            })
            .collect()
    }
}

/// One switch connection of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeHop {
    /// The switch.
    pub switch: Arc<str>,
    /// Where cells enter.
    pub in_port: u16,
    /// The slot of its input VC.
    pub in_slot: usize,
    /// Its branches' slots (each slot knows its output port): inline up to four, so a
    /// hop of a point-to-point call (one branch) allocates nothing.
    pub outs: smallvec::SmallVec<[usize; 4]>,
    /// Still part of the tree (false once pruned).
    pub live: bool,
}

/// One identifier slot: a VC on one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSlot {
    /// The switch whose port the VC is on (for slot 0, the root switch's input port; for
    /// a branch, its hop's output port).
    pub switch: Arc<str>,
    /// The port.
    pub port: u16,
    /// The hop it is a branch of (`None` for slot 0).
    pub hop: Option<usize>,
    /// The leaf it ends at, when it ends at one.
    pub leaf: Option<String>,
    /// Still part of the tree.
    pub live: bool,
}

/// Why a tree operation was refused (the tree is unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// A route with no hops.
    #[error("the route to {0:?} has no hops")]
    EmptyRoute(String),
    /// A route that does not start at the source's port.
    #[error("the route to {leaf:?} starts at {switch} port {port}, not at the source's port")]
    WrongRoot {
        /// The leaf.
        leaf: String,
        /// Where the route starts.
        switch: String,
        /// Its port.
        port: u16,
    },
    /// The leaf is in the tree already.
    #[error("{0:?} is already a leaf of this connection")]
    AlreadyLeaf(String),
    /// Two leaves on one port, or a leaf where the tree goes on.
    #[error("the route to {0:?} ends where the tree already goes on or ends")]
    Overlap(String),
    /// Not a leaf.
    #[error("{0:?} is not a leaf of this connection")]
    NotLeaf(String),
    /// The only leaf cannot be dropped.
    #[error("{0:?} is the connection's last leaf; delete the connection instead")]
    LastLeaf(String),
}

/// What [`Tree::graft`] added, for the switch commands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Graft {
    /// The leaf's slot.
    pub leaf_slot: usize,
    /// A branch added to a hop that was already set up: (hop, its new slot).
    pub new_branch: Option<(usize, usize)>,
    /// New hops, upstream first.
    pub new_hops: Vec<usize>,
    /// Every new slot (needs an identifier).
    pub new_slots: Vec<usize>,
}

/// What [`Tree::prune`] removed, for the switch commands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prune {
    /// The branch dropped at the fork: (hop, slot).
    pub dropped_branch: Option<(usize, usize)>,
    /// Hops that carried only the leaf, leaf side first: released.
    pub released_hops: Vec<usize>,
    /// Every slot that left the tree.
    pub gone_slots: Vec<usize>,
}

/// A point-to-multipoint (or point-to-point) connection tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    hops: Vec<TreeHop>,
    slots: Vec<TreeSlot>,
}

impl Tree {
    /// A tree with one leaf, along `route` (source switch first).
    pub fn path(leaf: &str, route: &[HopSpec]) -> Result<Tree, TreeError> {
        let first = route
            .first()
            .ok_or_else(|| TreeError::EmptyRoute(leaf.to_string()))?;
        let mut slots = Vec::with_capacity(route.len() + 1);
        slots.push(TreeSlot {
            switch: first.switch.clone(),
            port: first.in_port,
            hop: None,
            leaf: None,
            live: true,
        });
        let mut t = Tree {
            hops: Vec::with_capacity(route.len()),
            slots,
        };
        // A new tree's graft is all of it: no record of what was added.
        t.graft_into(leaf, route, None)?;
        Ok(t)
    }

    /// A tree with a leaf per route; every route starts at the source's port.
    pub fn from_routes(routes: &[(String, Vec<HopSpec>)]) -> Result<Tree, TreeError> {
        let ((leaf, route), rest) = routes
            .split_first()
            .ok_or_else(|| TreeError::EmptyRoute(String::new()))?;
        let mut t = Tree::path(leaf, route)?;
        for (leaf, route) in rest {
            t.graft_into(leaf, route, None)?;
        }
        Ok(t)
    }

    /// Every hop, pruned ones included (check [`TreeHop::live`]); indices are stable.
    pub fn hops(&self) -> &[TreeHop] {
        &self.hops
    }

    /// Every slot, pruned ones included; indices are stable.
    pub fn slots(&self) -> &[TreeSlot] {
        &self.slots
    }

    /// Hop `h`.
    pub fn hop(&self, h: usize) -> &TreeHop {
        &self.hops[h]
    }

    /// Slot `s`.
    pub fn slot(&self, s: usize) -> &TreeSlot {
        &self.slots[s]
    }

    /// The live hops' indices, upstream before downstream.
    pub fn live_hops(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.hops.len()).filter(|&h| self.hops[h].live)
    }

    /// The live slots' indices.
    pub fn live_slots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(|&s| self.slots[s].live)
    }

    /// The leaves and their slots, in the order they joined.
    pub fn leaves(&self) -> Vec<(&str, usize)> {
        let mut v: Vec<(&str, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .filter_map(|(i, s)| s.leaf.as_deref().map(|l| (l, i)))
            .collect();
        v.sort_by_key(|&(_, i)| i);
        v
    }

    /// The hop fed by slot `s`, if any.
    pub fn child(&self, s: usize) -> Option<usize> {
        self.hops.iter().position(|h| h.live && h.in_slot == s)
    }

    /// Adds `leaf` along `route` (which starts at the source's port). Where the route
    /// leaves the tree, the hop there gets a new branch; the rest is new hops. The tree
    /// is unchanged on error.
    pub fn graft(&mut self, leaf: &str, route: &[HopSpec]) -> Result<Graft, TreeError> {
        let mut g = Graft::default();
        self.graft_into(leaf, route, Some(&mut g))?;
        Ok(g)
    }

    /// [`Tree::graft`], noting what it added in `record` if given (building a tree needs
    /// no record, and its lists would be two allocations per call).
    fn graft_into(
        &mut self,
        leaf: &str,
        route: &[HopSpec],
        mut record: Option<&mut Graft>,
    ) -> Result<(), TreeError> {
        let first = route
            .first()
            .ok_or_else(|| TreeError::EmptyRoute(leaf.to_string()))?;
        if first.switch != self.slots[0].switch || first.in_port != self.slots[0].port {
            return Err(TreeError::WrongRoot {
                leaf: leaf.to_string(),
                switch: first.switch.to_string(),
                port: first.in_port,
            });
        }
        if self
            .slots
            .iter()
            .any(|s| s.live && s.leaf.as_deref() == Some(leaf))
        {
            return Err(TreeError::AlreadyLeaf(leaf.to_string()));
        }
        // Follow the tree as far as the route agrees with it.
        let mut at = 0usize;
        let mut i = 0usize;
        while i < route.len() {
            let Some(h) = self.child(at) else { break };
            let hop = &self.hops[h];
            if hop.switch != route[i].switch || hop.in_port != route[i].in_port {
                // The slot feeds a different switch than the route says: the topology
                // and the tree disagree.
                return Err(TreeError::Overlap(leaf.to_string()));
            }
            match hop
                .outs
                .iter()
                .copied()
                .find(|&s| self.slots[s].port == route[i].out_port)
            {
                Some(s) => {
                    at = s;
                    i += 1;
                }
                None => break,
            }
        }
        if i == route.len() || self.slots[at].leaf.is_some() {
            // The whole route is in the tree already: it ends on a port the tree uses.
            return Err(TreeError::Overlap(leaf.to_string()));
        }
        let (hops_before, slots_before) = (self.hops.len(), self.slots.len());
        if let Some(h) = self.child(at) {
            // The route leaves the tree at hop h: a new branch there.
            let s = self.new_slot(h, route[i].out_port);
            if let Some(g) = record.as_deref_mut() {
                g.new_branch = Some((h, s));
                g.new_slots.push(s);
            }
            at = s;
            i += 1;
        }
        for spec in &route[i..] {
            let h = self.hops.len();
            self.hops.push(TreeHop {
                switch: spec.switch.clone(),
                in_port: spec.in_port,
                in_slot: at,
                outs: smallvec::SmallVec::new(),
                live: true,
            });
            at = self.new_slot(h, spec.out_port);
            if let Some(g) = record.as_deref_mut() {
                g.new_hops.push(h);
                g.new_slots.push(at);
            }
        }
        debug_assert!(self.hops.len() >= hops_before && self.slots.len() > slots_before);
        self.slots[at].leaf = Some(leaf.to_string());
        if let Some(g) = record {
            g.leaf_slot = at;
        }
        Ok(())
    }

    fn new_slot(&mut self, hop: usize, port: u16) -> usize {
        let s = self.slots.len();
        self.slots.push(TreeSlot {
            switch: self.hops[hop].switch.clone(),
            port,
            hop: Some(hop),
            leaf: None,
            live: true,
        });
        self.hops[hop].outs.push(s);
        s
    }

    /// Undoes the last graft exactly (a refused AddLeaf).
    pub fn ungraft(&mut self, g: &Graft) {
        for &s in g.new_slots.iter().rev() {
            if let Some(h) = self.slots[s].hop {
                self.hops[h].outs.retain(|x| *x != s);
            }
        }
        let min_slot = g
            .new_slots
            .iter()
            .copied()
            .min()
            .unwrap_or(self.slots.len());
        self.slots.truncate(min_slot);
        let min_hop = g.new_hops.iter().copied().min().unwrap_or(self.hops.len());
        self.hops.truncate(min_hop);
    }

    /// Removes `leaf`: its branch back to the fork. Refused for the last leaf.
    pub fn prune(&mut self, leaf: &str) -> Result<Prune, TreeError> {
        let leaves = self.leaves();
        let &(_, mut s) = leaves
            .iter()
            .find(|(l, _)| *l == leaf)
            .ok_or_else(|| TreeError::NotLeaf(leaf.to_string()))?;
        if leaves.len() == 1 {
            return Err(TreeError::LastLeaf(leaf.to_string()));
        }
        let mut p = Prune::default();
        loop {
            let h = self.slots[s].hop.expect("a leaf's slot is a branch");
            self.slots[s].live = false;
            self.slots[s].leaf = None;
            p.gone_slots.push(s);
            self.hops[h].outs.retain(|x| *x != s);
            if !self.hops[h].outs.is_empty() {
                p.dropped_branch = Some((h, s));
                break;
            }
            // The hop carried only this leaf: it goes, and its input slot with it.
            self.hops[h].live = false;
            p.released_hops.push(h);
            s = self.hops[h].in_slot;
            if s == 0 {
                unreachable!("another leaf keeps the root hop");
            }
        }
        Ok(p)
    }

    /// Follows `route` through the tree: for each of its hops, the tree hop and the
    /// output slot the route takes; `None` if the route leaves the tree.
    pub fn walk(&self, route: &[HopSpec]) -> Option<Vec<(usize, usize)>> {
        let mut at = 0;
        let mut v = Vec::with_capacity(route.len());
        for spec in route {
            let h = self.child(at)?;
            let hop = &self.hops[h];
            if hop.switch != spec.switch || hop.in_port != spec.in_port {
                return None;
            }
            at = hop
                .outs
                .iter()
                .copied()
                .find(|&s| self.slots[s].port == spec.out_port)?;
            v.push((h, at));
        }
        Some(v)
    }

    /// The tree as entries, one per (hop, branch), upstream first: (hop spec with this
    /// branch's output port, hop index, input slot, output slot).
    pub fn entries(&self) -> Vec<(HopSpec, usize, usize, usize)> {
        let mut v = Vec::new();
        for h in self.live_hops() {
            let hop = &self.hops[h];
            for &s in &hop.outs {
                v.push((
                    HopSpec {
                        switch: hop.switch.clone(),
                        in_port: hop.in_port,
                        out_port: self.slots[s].port,
                    },
                    h,
                    hop.in_slot,
                    s,
                ));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(s: &str, i: u16, o: u16) -> HopSpec {
        HopSpec {
            switch: s.into(),
            in_port: i,
            out_port: o,
        }
    }

    /// s1 -> s2 -> {s3 -> a, s4 -> b}, and s1 -> c directly.
    fn routes() -> Vec<(String, Vec<HopSpec>)> {
        vec![
            (
                "a".into(),
                vec![hop("s1", 0, 1), hop("s2", 0, 1), hop("s3", 0, 9)],
            ),
            (
                "b".into(),
                vec![hop("s1", 0, 1), hop("s2", 0, 2), hop("s4", 0, 9)],
            ),
            ("c".into(), vec![hop("s1", 0, 3)]),
        ]
    }

    #[test]
    fn a_path_is_a_chain_of_slots() {
        let t = Tree::path("b", &[hop("s1", 0, 1), hop("s2", 0, 2)]).unwrap();
        assert_eq!(t.hops().len(), 2);
        assert_eq!(t.hop(0).in_slot, 0);
        assert_eq!(t.hop(0).outs.as_slice(), [1]);
        assert_eq!(t.hop(1).in_slot, 1);
        assert_eq!(t.hop(1).outs.as_slice(), [2]);
        assert_eq!(t.leaves(), vec![("b", 2)]);
        assert_eq!(t.slot(0).port, 0);
        assert_eq!(&*t.slot(2).switch, "s2");
    }

    #[test]
    fn routes_merge_into_a_tree_that_forks_where_they_part() {
        let t = Tree::from_routes(&routes()).unwrap();
        // s1 (one hop, two branches: to s2 and to c), s2 (two branches), s3, s4.
        assert_eq!(t.live_hops().count(), 4);
        assert_eq!(t.hop(0).outs.len(), 2);
        assert_eq!(t.hop(1).outs.len(), 2);
        let leaves: Vec<&str> = t.leaves().iter().map(|l| l.0).collect();
        assert_eq!(leaves, vec!["a", "b", "c"]);
        assert_eq!(t.entries().len(), 6);
    }

    #[test]
    fn graft_reports_the_new_branch_and_hops() {
        let r = routes();
        let mut t = Tree::path(&r[0].0, &r[0].1).unwrap();
        let g = t.graft(&r[1].0, &r[1].1).unwrap();
        assert_eq!(g.new_branch.map(|b| b.0), Some(1)); // at s2
        assert_eq!(g.new_hops, vec![3]); // s4
        assert_eq!(g.new_slots.len(), 2);
        let before = t.clone();
        let g = t.graft(&r[2].0, &r[2].1).unwrap();
        assert_eq!(g.new_branch.map(|b| b.0), Some(0));
        assert!(g.new_hops.is_empty());
        t.ungraft(&g);
        assert_eq!(t, before);
        // Refusals leave the tree as it was.
        assert_eq!(
            t.graft("b", &r[1].1).unwrap_err(),
            TreeError::AlreadyLeaf("b".into())
        );
        assert_eq!(
            t.graft("x", &r[1].1).unwrap_err(),
            TreeError::Overlap("x".into())
        );
        assert!(matches!(
            t.graft("x", &[hop("s9", 0, 1)]).unwrap_err(),
            TreeError::WrongRoot { .. }
        ));
        assert_eq!(t, before);
    }

    #[test]
    fn prune_goes_back_to_the_fork_only() {
        let mut t = Tree::from_routes(&routes()).unwrap();
        let p = t.prune("b").unwrap();
        // s4's hop goes; s2 loses its branch to s4.
        assert_eq!(p.released_hops, vec![3]);
        assert_eq!(p.dropped_branch.map(|b| b.0), Some(1));
        let p = t.prune("a").unwrap();
        // s3 and s2 go; s1 loses its branch to s2.
        assert_eq!(p.released_hops, vec![2, 1]);
        assert_eq!(p.dropped_branch.map(|b| b.0), Some(0));
        assert_eq!(t.live_hops().collect::<Vec<_>>(), vec![0]);
        assert_eq!(t.prune("c").unwrap_err(), TreeError::LastLeaf("c".into()));
        assert_eq!(t.prune("a").unwrap_err(), TreeError::NotLeaf("a".into()));
        // A leaf can come back on the pruned route.
        let g = t.graft("a", &routes()[0].1).unwrap();
        assert_eq!(g.new_hops.len(), 2);
    }
}
