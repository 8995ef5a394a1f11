//! Running commands (paper 000 §II-B: the switch server's interface; xbind aggregates
//! several commands in one message): one command, a batch all-or-nothing or
//! continue-on-error, a batch observed command by command (for a journal or an event
//! feed), restoring a journalled connection after a restart, and the views an audit or
//! Describe reads (port status, connections, reservations).

use atmlab_core::ids::{PortId, VcId};

use super::undo::{Undo, UndoLog};
use super::{
    Atomicity, Command, Commit, Connection, IdState, PortCounters, PortStatus, Reply, Reservation,
    Switch,
};
use crate::error::FabricError;

impl Switch {
    /// The state of a port.
    pub fn port_status(&self, port: PortId) -> Result<PortStatus, FabricError> {
        let p = &self.ports[self.port_idx(port)?];
        Ok(PortStatus {
            config: p.config.clone(),
            allocated: p.allocated,
            buffer_allocated: p.buffer_allocated,
            reserved: p.reserved,
            committed: p.committed,
            counters: PortCounters {
                cells_hec_corrected: p.hec.corrected,
                ..p.counters
            },
            queue_cells: p.queue.len() as u32,
        })
    }

    /// The state of every port.
    pub fn ports(&self) -> Vec<PortStatus> {
        self.port_ids()
            .map(|id| self.port_status(id).expect("listed port exists"))
            .collect()
    }

    fn entry_view(&self, slot: usize) -> Connection {
        let e = self.slots[slot].as_ref().expect("a live slot");
        let hot = &self.hot[slot];
        Connection {
            id: e.id,
            kind: e.kind,
            in_port: e.in_port,
            in_id: e.in_id,
            branches: e.branches.to_vec(),
            traffic: e.traffic,
            clr: e.clr,
            admitted: e.admitted,
            buffer_cells: e.buffer_cells,
            owner: self.owners[e.owner as usize].clone(),
            tag: e.tag.clone(),
            cells: hot.cells,
            cells_discarded: hot.discarded,
        }
    }

    /// One connection.
    pub fn connection(&self, id: u64) -> Result<Connection, FabricError> {
        let slot = *self
            .by_id
            .get(&id)
            .ok_or(FabricError::UnknownConnection(id))?;
        Ok(self.entry_view(slot as usize))
    }

    /// The owner of connection `id`, without building its whole view (the switch
    /// server checks it on every release of a caller with the role `cm`).
    pub fn connection_owner(&self, id: u64) -> Option<&str> {
        let slot = *self.by_id.get(&id)?;
        Some(&self.owners[self.slots[slot as usize].as_ref()?.owner as usize])
    }

    /// Every connection, by id.
    pub fn connections(&self) -> Vec<Connection> {
        let mut v: Vec<Connection> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .map(|(i, _)| self.entry_view(i))
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// Every outstanding reservation, by port and identifier.
    pub fn reservations(&self) -> Vec<Reservation> {
        let mut v = Vec::new();
        for p in &self.ports {
            for (vpi, vci, st) in p.vc_ids.iter() {
                if let IdState::Reserved(o) = st {
                    v.push(Reservation {
                        port: p.config.id,
                        id: VcId::new(vpi, vci),
                        owner: self.owners[o as usize].clone(),
                    });
                }
            }
            for (&vpi, st) in &p.vp_ids {
                if let IdState::Reserved(o) = st {
                    v.push(Reservation {
                        port: p.config.id,
                        id: VcId::new(vpi, 0),
                        owner: self.owners[*o as usize].clone(),
                    });
                }
            }
        }
        v.sort_by_key(|r| (r.port, r.id));
        v
    }

    // ----- batches ----------------------------------------------------------------------

    /// Runs one command.
    pub fn apply(&mut self, cmd: &Command) -> Result<Reply, FabricError> {
        self.apply_logged(cmd, None)
    }

    fn apply_logged(
        &mut self,
        cmd: &Command,
        log: Option<&mut Vec<Undo>>,
    ) -> Result<Reply, FabricError> {
        match cmd {
            Command::Reserve(r) => {
                let ids = self.reserve(r)?;
                if let Some(log) = log {
                    log.push(Undo::Unreserve(
                        self.index(r.port).expect("ok"),
                        ids.clone(),
                    ));
                }
                Ok(Reply::Reserved(ids))
            }
            Command::Unreserve(u) => {
                self.unreserve(u)?;
                if let Some(log) = log {
                    let owner = self.existing_owner(&u.owner).expect("it held reservations");
                    log.push(Undo::Rereserve(
                        self.index(u.port).expect("ok"),
                        u.ids.clone(),
                        owner,
                    ));
                }
                Ok(Reply::Unreserved)
            }
            Command::Commit(c) => {
                let (id, prior) = self.commit_inner(c, log.is_some())?;
                let replenished = self.replenish(c);
                if let Some(log) = log {
                    log.push(Undo::Uncommit(id, prior));
                    if !replenished.is_empty() {
                        let pi = self.index(c.branches[0].port).expect("ok");
                        log.push(Undo::Unreserve(pi, replenished.clone()));
                    }
                }
                Ok(Reply::Committed {
                    connection: id,
                    replenished,
                })
            }
            Command::Release(r) => {
                let e = self.release_inner(r)?;
                if let Some(log) = log {
                    log.push(Undo::Recommit(Box::new(e)));
                }
                Ok(Reply::Released)
            }
            Command::AddBranch(ch) => {
                let prior = self.add_branch_inner(ch)?;
                if let Some(log) = log {
                    log.push(Undo::UnaddBranch(ch.connection, ch.branch, prior));
                }
                Ok(Reply::BranchAdded)
            }
            Command::DropBranch(ch) => {
                let at = self.drop_branch_inner(ch)?;
                if let Some(log) = log {
                    log.push(Undo::UndropBranch(ch.connection, ch.branch, at));
                }
                Ok(Reply::BranchDropped)
            }
            Command::Modify(m) => {
                let (t, clr, admitted) = self.modify_inner(m)?;
                if let Some(log) = log {
                    log.push(Undo::Unmodify(m.connection, t, clr, admitted));
                }
                Ok(Reply::Modified)
            }
        }
    }

    /// Runs a batch (xbind's message aggregation; P4Runtime's Write). With
    /// [`Atomicity::AllOrNothing`], the first failure undoes every earlier command of the
    /// batch exactly and the later ones report [`FabricError::Aborted`]; the switch is
    /// then as it was before the batch.
    pub fn execute(
        &mut self,
        cmds: &[Command],
        atomicity: Atomicity,
    ) -> Vec<Result<Reply, FabricError>> {
        self.execute_observed(cmds, atomicity, |_, _, _| {})
    }

    /// [`Switch::execute`], calling `observe(switch, command, reply)` right after each
    /// command succeeds, with the switch as that command left it (a journal or an event
    /// feed needs the state between commands: a batch may commit and release the same
    /// connection). Under [`Atomicity::AllOrNothing`] a batch that fails has been
    /// observed up to its failure and then undone: the caller must drop what it observed
    /// when any result is an error.
    pub fn execute_observed(
        &mut self,
        cmds: &[Command],
        atomicity: Atomicity,
        observe: impl FnMut(&Switch, &Command, &Reply),
    ) -> Vec<Result<Reply, FabricError>> {
        self.run_batch(cmds, atomicity, observe, false).0
    }

    /// [`Switch::execute_observed`], keeping how to take back every command that
    /// succeeded: a server whose journal write fails after the batch ran hands the log
    /// to [`Switch::roll_back`], and the switch is as it was before the batch, so that a
    /// command refused to its client never stays in the table.
    pub fn execute_undoable(
        &mut self,
        cmds: &[Command],
        atomicity: Atomicity,
        observe: impl FnMut(&Switch, &Command, &Reply),
    ) -> (Vec<Result<Reply, FabricError>>, UndoLog) {
        let (results, log) = self.run_batch(cmds, atomicity, observe, true);
        (results, UndoLog(log))
    }

    /// Takes back every change of a batch run by [`Switch::execute_undoable`], the last
    /// first.
    pub fn roll_back(&mut self, log: UndoLog) {
        for u in log.0.into_iter().rev() {
            self.undo(u);
        }
    }

    /// Runs a batch; with `keep`, returns the undo log of what stands.
    fn run_batch(
        &mut self,
        cmds: &[Command],
        atomicity: Atomicity,
        mut observe: impl FnMut(&Switch, &Command, &Reply),
        keep: bool,
    ) -> (Vec<Result<Reply, FabricError>>, Vec<Undo>) {
        let mut log = Vec::new();
        match atomicity {
            Atomicity::ContinueOnError => {
                let results = cmds
                    .iter()
                    .map(|c| {
                        let r = if keep {
                            self.apply_logged(c, Some(&mut log))
                        } else {
                            self.apply(c)
                        };
                        if let Ok(reply) = &r {
                            observe(self, c, reply);
                        }
                        r
                    })
                    .collect();
                (results, log)
            }
            Atomicity::AllOrNothing => {
                let mut out: Vec<Result<Reply, FabricError>> = Vec::with_capacity(cmds.len());
                for (i, c) in cmds.iter().enumerate() {
                    match self.apply_logged(c, Some(&mut log)) {
                        Ok(r) => {
                            observe(self, c, &r);
                            out.push(Ok(r));
                        }
                        Err(e) => {
                            while let Some(u) = log.pop() {
                                self.undo(u);
                            }
                            for r in out.iter_mut() {
                                *r = Err(FabricError::Aborted);
                            }
                            out.push(Err(e));
                            out.extend((i + 1..cmds.len()).map(|_| Err(FabricError::Aborted)));
                            return (out, Vec::new());
                        }
                    }
                }
                if !keep {
                    log.clear();
                }
                (out, log)
            }
        }
    }

    /// Reinstalls a connection listed before (a switch server restoring its table after
    /// a restart). Validated like a commit; the id is kept, and later ids follow it.
    pub fn restore(&mut self, c: &Connection) -> Result<(), FabricError> {
        if self.by_id.contains_key(&c.id) {
            return Err(FabricError::Invalid("a connection with this id exists"));
        }
        let commit = Commit {
            kind: c.kind,
            in_port: c.in_port,
            in_id: c.in_id,
            branches: c.branches.clone(),
            traffic: c.traffic,
            clr: c.clr,
            buffer_cells: c.buffer_cells,
            owner: c.owner.as_str().into(),
            replenish: 0,
            tag: c.tag.clone(),
        };
        let saved = self.next_id;
        self.next_id = c.id;
        let r = self.commit_inner(&commit, false);
        self.next_id = saved.max(c.id + 1);
        r.map(|_| ())
    }
}
