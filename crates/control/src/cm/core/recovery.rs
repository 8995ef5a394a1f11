//! Recovery and inspection (paper 000 §II-C; issue 10): reconciling with a switch that
//! came back, periodic sweeps for this owner's stray connections and reservations (the
//! results of commits given up, give-backs that never got through), taking calls back
//! from a journal after a restart ([`CmCore::adopt`]), views of established calls, and
//! filling and draining the VCI caches (warm-up, clean shutdown).

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::Instant;
use atmlab_fabric::switch::{Command, Release, Reply, Unreserve};
use rustc_hash::FxHashMap;

use super::{Call, CallView, Candidates, CmCore, CmKind, HopSpec, PerCall, Phase, Purpose, Stray};
use crate::cm::tree::Tree;

impl CmCore {
    /// The path of an established call.
    pub fn view(&self, id: u64) -> Option<CallView> {
        let c = self.calls.get(&id)?;
        if c.phase != Phase::Established {
            return None;
        }
        let conn = |h: usize| c.conns.get(h).copied().flatten().unwrap_or(0);
        Some(CallView {
            setup: c.setup,
            tag: c.tag.clone(),
            invocations: c.sent,
            ..CallView::of_tree(id, &c.tree, conn, &c.ids, c.traffic)
        })
    }

    /// Reconciles this manager with what `switch` holds after it came back (a switch
    /// server that restarted from its journal may hold commits whose answers were lost
    /// with it, and a re-sent commit then finds its input identifier taken). For each
    /// connection of this manager's owner that no call holds: if a commit sent to that
    /// switch is still unanswered and has the same input, the connection is that
    /// commit's result and completes it; otherwise it is released. Returns (commits
    /// completed, connections released).
    pub fn reconcile(
        &mut self,
        now: Instant,
        switch: &str,
        connections: &[atmlab_fabric::switch::Connection],
    ) -> (usize, usize) {
        let Some(&sw) = self.switch_index.get(switch) else {
            return (0, 0);
        };
        let (mut completed, mut released) = (0, 0);
        for (x, found) in self.strays(sw, connections) {
            match found {
                Stray::Pending(req) => {
                    completed += 1;
                    self.handle_reply(
                        now,
                        req,
                        Ok(Reply::Committed {
                            connection: x.id,
                            replenished: Vec::new(),
                        }),
                    );
                }
                stray => {
                    released += 1;
                    self.release_found(now, sw, x, stray);
                }
            }
        }
        (completed, released)
    }

    /// Sweeps `switch`'s connections (as listed by the switch) for this owner's strays:
    /// the connection of a commit given up after its retries whose answers were all
    /// lost (released as its late answer would have been), and connections no call
    /// explains. With `confirm`, a running manager's periodic sweep, an unexplained
    /// connection is released only if the previous sweep found it unexplained too (a
    /// command in flight is answered long before), and a commit still in flight is
    /// left alone; without, the last sweep of a stopping manager with nothing in flight,
    /// every stray goes at once. Calls' connections are never touched. Returns the
    /// connections released.
    pub fn sweep(
        &mut self,
        now: Instant,
        switch: &str,
        connections: &[atmlab_fabric::switch::Connection],
        confirm: bool,
    ) -> usize {
        let Some(&sw) = self.switch_index.get(switch) else {
            return 0;
        };
        if self.suspects.len() <= sw {
            self.suspects.resize_with(sw + 1, Default::default);
        }
        let before = std::mem::take(&mut self.suspects[sw]);
        let mut released = 0;
        for (x, found) in self.strays(sw, connections) {
            match found {
                Stray::Pending(_) => {}
                Stray::Unexplained if confirm && !before.contains(&x.id) => {
                    self.suspects[sw].insert(x.id);
                }
                stray => {
                    released += 1;
                    self.release_found(now, sw, x, stray);
                }
            }
        }
        released
    }

    /// Sweeps `switch`'s reservations (as listed) for this owner's strays: identifiers
    /// reserved for this owner that no cache, no call and no give-back in flight holds
    /// (a fill given up whose every answer was lost, a give-back that never got
    /// through). Given back as [`CmCore::sweep`] releases connections: with `confirm`,
    /// only when the previous sweep found them too (a Reserve in flight is answered long
    /// before); without, at once. Returns the identifiers given back.
    pub fn sweep_reservations(
        &mut self,
        now: Instant,
        switch: &str,
        reservations: &[atmlab_fabric::switch::Reservation],
        confirm: bool,
    ) -> usize {
        let Some(&sw) = self.switch_index.get(switch) else {
            return 0;
        };
        let mut held: rustc_hash::FxHashSet<(u16, VcId)> = Default::default();
        for c in self.calls.values() {
            for (j, id) in c.ids.iter().enumerate() {
                if let Some(id) = id
                    && c.slot_sw.get(j) == Some(&sw)
                {
                    held.insert((c.tree.slot(j).port, *id));
                }
            }
        }
        let giving_back = self
            .outstanding
            .values()
            .filter(|o| o.switch == sw)
            .map(|o| &o.command)
            .chain(self.lingering.iter().filter(|l| l.0 == sw).map(|l| &l.2));
        for cmd in giving_back {
            if let Command::Unreserve(u) = cmd {
                held.extend(u.ids.iter().map(|&id| (u.port.0, id)));
            }
        }
        if self.suspect_ids.len() <= sw {
            self.suspect_ids.resize_with(sw + 1, Default::default);
        }
        let before = std::mem::take(&mut self.suspect_ids[sw]);
        let mut given = 0;
        for r in reservations {
            let key = (r.port.0, r.id);
            if r.owner != self.config.owner
                || held.contains(&key)
                || self
                    .caches
                    .get(&(sw, r.port.0))
                    .is_some_and(|c| c.contains(r.id))
            {
                continue;
            }
            if confirm && !before.contains(&key) {
                self.suspect_ids[sw].insert(key);
                continue;
            }
            given += 1;
            let cmd = Command::Unreserve(Unreserve {
                port: r.port,
                ids: vec![r.id],
                owner: self.owner.clone(),
            });
            self.send(now, None, Purpose::Unreserve, sw, r.port.0, cmd);
        }
        given
    }

    /// This owner's connections on switch `sw` that no call holds, and what each is.
    fn strays<'a>(
        &self,
        sw: usize,
        connections: &'a [atmlab_fabric::switch::Connection],
    ) -> Vec<(&'a atmlab_fabric::switch::Connection, Stray)> {
        let mut known: rustc_hash::FxHashSet<u64> = Default::default();
        for c in self.calls.values() {
            for (i, s) in c.hop_sw.iter().enumerate() {
                if *s == sw
                    && let Some(conn) = c.conns[i]
                {
                    known.insert(conn);
                }
            }
        }
        // The commits that could have made a connection on this switch, by input: in
        // flight first, then given up. One pass over each, so a sweep of n connections
        // with m commands out costs n + m, not n x m, on the manager's task.
        let mut commits: FxHashMap<(PortId, VcId), Candidates<'_>> = FxHashMap::default();
        let pending = self
            .outstanding
            .iter()
            .filter(|(_, o)| o.switch == sw)
            .map(|(&req, o)| (&o.command, Stray::Pending(req)));
        let given_up = self
            .orphans
            .iter()
            .filter(|(_, (s, _, _))| *s == sw)
            .map(|(&req, (_, _, cmd))| (cmd, Stray::Orphan(req)));
        for (cmd, what) in pending.chain(given_up) {
            if let Command::Commit(c) = cmd {
                commits
                    .entry((c.in_port, c.in_id))
                    .or_default()
                    .push((&c.branches, what));
            }
        }
        connections
            .iter()
            .filter(|x| x.owner == self.config.owner && !known.contains(&x.id))
            .map(|x| {
                // The same input *and* the same branches: a stray that merely holds the
                // input (a connection whose release went unanswered, restored by the
                // switch's journal, its input identifier since reused) is not this
                // commit's result. Taking it for one left the commit's real connection,
                // made when its retry got through, to nobody.
                let found = commits
                    .get(&(x.in_port, x.in_id))
                    .and_then(|v| v.iter().find(|(b, _)| *b == x.branches.as_slice()))
                    .map_or(Stray::Unexplained, |&(_, what)| what);
                (x, found)
            })
            .collect()
    }

    /// Releases a stray that is no commit in flight (reconcile and sweep alike): a
    /// given-up commit's connection as its late answer would have been, an unexplained
    /// one outright.
    fn release_found(
        &mut self,
        now: Instant,
        sw: usize,
        x: &atmlab_fabric::switch::Connection,
        stray: Stray,
    ) {
        match stray {
            Stray::Orphan(req) => self.late_commit(now, req, x.id),
            Stray::Unexplained => self.release_stray(now, sw, x),
            Stray::Pending(_) => {}
        }
    }

    /// A commit given up for lost turned out to have made `connection`: undone as its
    /// late answer would have been.
    fn late_commit(&mut self, now: Instant, req: u64, connection: u64) {
        if let Some((sw, port, _)) = self.orphans.remove(&req) {
            self.undo_late(
                now,
                sw,
                port,
                Ok(Reply::Committed {
                    connection,
                    replenished: Vec::new(),
                }),
            );
        }
    }

    fn release_stray(&mut self, now: Instant, sw: usize, x: &atmlab_fabric::switch::Connection) {
        let port = x.branches.first().map_or(x.in_port.0, |b| b.port.0);
        let cmd = Command::Release(Release {
            connection: x.id,
            keep_reserved: false,
        });
        self.send(now, None, Purpose::Unreserve, sw, port, cmd);
    }

    /// New calls get ids from `next` up, at least (a restarted manager: the ids a journal
    /// ever held, released calls' included, are not handed out again).
    pub fn skip_ids_below(&mut self, next: u64) {
        self.next_call = self.next_call.max(next);
    }

    /// Takes back an established call from a journal (a restarted manager): the call is
    /// held as if this manager had set it up, under the same id, and can be listed and
    /// deleted. Later calls get larger ids. Refused if the id is taken or the view has
    /// no hops.
    pub fn adopt(&mut self, now: Instant, view: &CallView) -> Result<(), &'static str> {
        if view.hops.is_empty() {
            return Err("a call needs at least one hop");
        }
        if self.calls.contains_key(&view.id) {
            return Err("the call id is already in use");
        }
        let chains = view.chains().ok_or("the view's tree is malformed")?;
        let routes: Vec<(String, Vec<HopSpec>)> = chains
            .iter()
            .map(|(l, c)| {
                (
                    l.clone(),
                    c.iter().map(|&e| view.hops[e].0.clone()).collect(),
                )
            })
            .collect();
        let tree =
            Tree::from_routes(&routes).map_err(|_| "the view's routes do not form a tree")?;
        let mut ids = vec![None; tree.slots().len()];
        let mut on_switch = vec![false; tree.slots().len()];
        let mut conns = vec![None; tree.hops().len()];
        ids[0] = Some(view.hops[chains[0].1[0]].2);
        for ((_, chain), (_, route)) in chains.iter().zip(&routes) {
            let walk = tree.walk(route).ok_or("a route left the tree")?;
            for (&e, (h, s)) in chain.iter().zip(walk) {
                conns[h] = Some(view.hops[e].1);
                ids[s] = Some(view.hops[e].3);
                on_switch[s] = true;
            }
        }
        let call = Call {
            tree,
            hop_sw: PerCall::new(),
            slot_sw: PerCall::new(),
            traffic: view.traffic,
            clr: 0.0,
            buffer: 0,
            tag: view.tag.clone(),
            ids: PerCall::from_vec(ids),
            on_switch: PerCall::from_vec(on_switch),
            conns: PerCall::from_vec(conns),
            waiting: 0,
            phase: Phase::Established,
            change: None,
            started: now,
            setup: view.setup,
            error: None,
            delete_pending: false,
            in_use: 0,
            sent: 0,
        };
        self.calls.insert(view.id, call);
        self.fit(view.id);
        self.next_call = self.next_call.max(view.id + 1);
        Ok(())
    }

    /// Every established call.
    pub fn views(&self) -> Vec<CallView> {
        let mut v: Vec<CallView> = self.calls.keys().filter_map(|&id| self.view(id)).collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// Fills the cache of (switch, port) ahead of calls (xbind: warm-up).
    pub fn prefill(&mut self, now: Instant, switch: &str, port: u16) {
        if self.config.kind != CmKind::Xbind {
            return;
        }
        let sw = self.switch(switch);
        let cache = self.caches.entry((sw, port)).or_default();
        if cache.filling {
            return;
        }
        cache.filling = true;
        let cmd = self.reserve_cmd(port, self.config.cache_fill, 0);
        self.send(now, None, Purpose::Fill, sw, port, cmd);
    }

    /// Gives every cached identifier back to its switch (a clean shutdown), and sends
    /// whatever waits in the aggregators at once (T drops to 1).
    pub fn drain_caches(&mut self, now: Instant) {
        let keys: Vec<(usize, u16)> = self.caches.keys().copied().collect();
        for (sw, port) in keys {
            // One identifier per command: a give-back is all-or-nothing, and one
            // identifier the switch no longer holds for us must not keep the rest.
            for id in self.caches.get_mut(&(sw, port)).expect("key").trim(0) {
                let cmd = Command::Unreserve(Unreserve {
                    port: PortId(port),
                    ids: vec![id],
                    owner: self.owner.clone(),
                });
                self.send(now, None, Purpose::Unreserve, sw, port, cmd);
            }
        }
        // Send everything now, whatever T is.
        for sw in 0..self.aggregators.len() {
            if !self.aggregators[sw].is_empty() {
                self.ready.push_back(sw);
                self.aggregators[sw].tune(1, self.config.flush_timeout);
                self.aggregators[sw].set_rides(false);
            }
        }
    }
}
