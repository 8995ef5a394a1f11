//! Changes to an established call (paper 001 §4, multipoint and QoS changes, on paper
//! 000 §II-C's manager): AddLeaf grafts a leaf's route onto the tree, DropLeaf prunes a
//! leaf's branch back to the fork, Modify changes the contract on every hop in place;
//! a refused change is undone exactly, and each ends in a [`super::CallEvent::Changed`].

use atmlab_core::time::Instant;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_fabric::error::{ErrorKind, FabricError};
use atmlab_fabric::switch::{Command, Modify, Release, Reply};

use super::{CallError, CallEvent, Change, CmCore, HopSpec, LINGER_PERIOD, Phase, Purpose};
use crate::cm::tree::TreeError;

impl CmCore {
    /// Whether call `id` can take a change now.
    fn changeable(&self, id: u64) -> Result<(), CallError> {
        let err = |kind, message: String| Err(CallError { kind, message });
        match self.calls.get(&id) {
            None => err(ErrorKind::NotFound, format!("no connection {id}")),
            Some(c) if c.phase != Phase::Established || c.delete_pending => err(
                ErrorKind::Aborted,
                format!("connection {id} is not established (being set up or released)"),
            ),
            Some(c) if c.change.is_some() => err(
                ErrorKind::Aborted,
                format!("connection {id} is already being changed; try again"),
            ),
            Some(_) => Ok(()),
        }
    }

    pub(crate) fn tree_error(e: TreeError) -> CallError {
        let kind = match e {
            TreeError::AlreadyLeaf(_) => ErrorKind::AlreadyExists,
            TreeError::NotLeaf(_) => ErrorKind::NotFound,
            _ => ErrorKind::InvalidArgument,
        };
        CallError {
            kind,
            message: e.to_string(),
        }
    }

    /// Adds `leaf`, reached by `route` (from the source's port), to established call
    /// `id`. The outcome comes as [`CallEvent::Changed`]; refused at once (the call
    /// unchanged) if the call cannot be changed now or the route does not fit the tree.
    pub fn add_leaf(
        &mut self,
        now: Instant,
        id: u64,
        leaf: &str,
        route: &[HopSpec],
    ) -> Result<(), CallError> {
        self.changeable(id)?;
        let call = self.calls.get_mut(&id).expect("checked");
        let graft = call.tree.graft(leaf, route).map_err(Self::tree_error)?;
        call.error = None;
        let slots = graft.new_slots.clone();
        call.change = Some(Change::Grow {
            leaf: leaf.to_string(),
            graft,
            commands_sent: false,
        });
        self.fit(id);
        self.take_ids(now, id, &slots, false);
        if self.calls[&id].waiting == 0 {
            self.change_step(now, id);
        }
        Ok(())
    }

    /// Drops `leaf` from call `id`: its branch is pruned back to the fork (a DropBranch
    /// there, releases below). The outcome comes as [`CallEvent::Changed`].
    pub fn drop_leaf(&mut self, now: Instant, id: u64, leaf: &str) -> Result<(), CallError> {
        self.changeable(id)?;
        let call = self.calls.get_mut(&id).expect("checked");
        let prune = call.tree.prune(leaf).map_err(Self::tree_error)?;
        call.error = None;
        call.change = Some(Change::Prune);
        let mut sends = Vec::new();
        if let Some((h, s)) = prune.dropped_branch
            && let Some(ch) = call.branch_change(h, s)
        {
            sends.push((h, Command::DropBranch(ch)));
        }
        for &h in &prune.released_hops {
            if let Some(conn) = call.conns[h] {
                sends.push((
                    h,
                    Command::Release(Release {
                        connection: conn,
                        keep_reserved: false,
                    }),
                ));
            }
        }
        // The pruned slots' identifiers go back to the switches' pools with their
        // branches and hops; the manager forgets them now.
        for &s in &prune.gone_slots {
            call.ids[s] = None;
            call.on_switch[s] = false;
        }
        for &h in &prune.released_hops {
            call.conns[h] = None;
        }
        self.send_change(now, id, sends);
        Ok(())
    }

    /// Changes call `id`'s contract to `traffic` (with `clr`, 0 for the switch's
    /// default) on every hop, in place. The outcome comes as [`CallEvent::Changed`].
    pub fn modify(
        &mut self,
        now: Instant,
        id: u64,
        traffic: TrafficDescriptor,
        clr: f64,
    ) -> Result<(), CallError> {
        self.changeable(id)?;
        let call = self.calls.get_mut(&id).expect("checked");
        call.error = None;
        call.change = Some(Change::Modify {
            new: traffic,
            clr,
            changed: Vec::new(),
        });
        let sends: Vec<(usize, Command)> = call
            .tree
            .live_hops()
            .filter_map(|h| {
                Some((
                    h,
                    Command::Modify(Modify {
                        connection: call.conns[h]?,
                        traffic,
                        clr,
                    }),
                ))
            })
            .collect();
        self.send_change(now, id, sends);
        Ok(())
    }

    /// Sends a change's commands, one per hop, all at once.
    fn send_change(&mut self, now: Instant, id: u64, sends: Vec<(usize, Command)>) {
        for (h, cmd) in sends {
            let call = &self.calls[&id];
            let (sw, port) = (call.hop_sw[h], call.tree.hop(h).in_port);
            self.send(now, Some(id), Purpose::Change(h), sw, port, cmd);
            self.calls.get_mut(&id).expect("call").waiting += 1;
        }
        if self.calls[&id].waiting == 0 {
            self.change_step(now, id);
        }
    }

    /// The answer to a change's command on hop `h`.
    pub(super) fn change_answer(
        &mut self,
        now: Instant,
        id: u64,
        h: usize,
        command: &Command,
        result: Result<Reply, FabricError>,
    ) {
        let call = self.calls.get_mut(&id).expect("call");
        match (command, result) {
            (Command::AddBranch(ch), Ok(_)) => {
                if let Some(j) = (0..call.ids.len()).find(|&j| {
                    call.tree.slot(j).hop == Some(h) && call.ids[j] == Some(ch.branch.id)
                }) {
                    call.on_switch[j] = true;
                }
            }
            (Command::Modify(_), Ok(_)) => {
                if let Some(Change::Modify { changed, .. }) = call.change.as_mut() {
                    changed.push(h);
                }
            }
            (Command::DropBranch(_) | Command::Release(_), Err(e))
                if e.kind() == ErrorKind::Unavailable =>
            {
                // The switch may come back holding it: the give-back lingers.
                self.lingering.push((call.hop_sw[h], 0, command.clone()));
                self.linger_at
                    .get_or_insert(now.saturating_add(LINGER_PERIOD));
            }
            (Command::DropBranch(_) | Command::Release(_), Err(e)) => {
                tracing::warn!(call = id, hop = h, error = %e, "a prune step failed; the branch is gone");
            }
            (_, Err(e)) => {
                if call.error.is_none() {
                    call.error = Some(CallError {
                        kind: e.kind(),
                        message: e.to_string(),
                    });
                }
            }
            (_, Ok(_)) => {}
        }
        if self.calls[&id].waiting == 0 {
            self.change_step(now, id);
        }
    }

    /// Moves a change on once every answer it waits for is in.
    pub(super) fn change_step(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        let Some(change) = call.change.take() else {
            return;
        };
        let failed = call.error.take();
        match change {
            Change::Grow {
                leaf,
                graft,
                commands_sent: false,
            } if failed.is_none() => {
                // Every new slot has its identifier: the branch where the route leaves
                // the tree, and the new hops, at once.
                let mut sends = Vec::new();
                if let Some((h, s)) = graft.new_branch
                    && let Some(ch) = call.branch_change(h, s)
                {
                    sends.push((h, Command::AddBranch(ch)));
                }
                let hops = graft.new_hops.clone();
                call.change = Some(Change::Grow {
                    leaf,
                    graft,
                    commands_sent: true,
                });
                self.commit_hops(now, id, &hops);
                self.send_change(now, id, sends);
            }
            Change::Grow { graft, .. } => match failed {
                None => self.end_change(now, id, Ok(())),
                Some(e) => {
                    // Undo exactly what was done: the added branch dropped, the new hops
                    // released, their identifiers back; the tree as it was.
                    let call = self.calls.get_mut(&id).expect("call");
                    let mut undo = Vec::new();
                    if let Some((h, s)) = graft.new_branch
                        && call.on_switch[s]
                        && let Some(ch) = call.branch_change(h, s)
                    {
                        undo.push((call.hop_sw[h], Command::DropBranch(ch)));
                        call.ids[s] = None;
                        call.on_switch[s] = false;
                    }
                    for &h in &graft.new_hops {
                        if let Some(conn) = call.conns[h].take() {
                            undo.push((
                                call.hop_sw[h],
                                Command::Release(Release {
                                    connection: conn,
                                    keep_reserved: false,
                                }),
                            ));
                            for j in call.tree.hop(h).outs.clone() {
                                call.ids[j] = None;
                                call.on_switch[j] = false;
                            }
                        }
                    }
                    let back: Vec<usize> = graft
                        .new_slots
                        .iter()
                        .copied()
                        .filter(|&j| call.ids[j].is_some() && !call.on_switch[j])
                        .collect();
                    for (sw, cmd) in undo {
                        self.send(now, None, Purpose::Unreserve, sw, 0, cmd);
                    }
                    self.return_slots(now, id, &back);
                    let call = self.calls.get_mut(&id).expect("call");
                    call.tree.ungraft(&graft);
                    self.fit(id);
                    self.end_change(now, id, Err(e));
                }
            },
            Change::Prune => self.end_change(now, id, Ok(())),
            Change::Modify { new, clr, changed } => match failed {
                None => {
                    call.traffic = new;
                    if clr > 0.0 {
                        call.clr = clr;
                    }
                    self.end_change(now, id, Ok(()))
                }
                Some(e) => {
                    // Back to the old contract where it changed. Going back frees
                    // bandwidth if the change was an increase (the only kind a switch
                    // refuses), so it cannot be refused in turn.
                    let (old, old_clr) = (call.traffic, call.clr);
                    let undo: Vec<(usize, Command)> = changed
                        .iter()
                        .filter_map(|&h| {
                            Some((
                                call.hop_sw[h],
                                Command::Modify(Modify {
                                    connection: call.conns[h]?,
                                    traffic: old,
                                    clr: old_clr,
                                }),
                            ))
                        })
                        .collect();
                    for (sw, cmd) in undo {
                        self.send(now, None, Purpose::Unreserve, sw, 0, cmd);
                    }
                    self.end_change(now, id, Err(e));
                }
            },
        }
    }

    fn end_change(&mut self, now: Instant, id: u64, result: Result<(), CallError>) {
        self.events
            .push_back(CallEvent::Changed { call: id, result });
        let call = self.calls.get_mut(&id).expect("call");
        if call.delete_pending {
            call.delete_pending = false;
            self.delete(now, id);
        }
    }
}
