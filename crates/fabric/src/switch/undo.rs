//! The undo log of an all-or-nothing batch (P4Runtime's and xbind's atomic message):
//! each command of the batch records how to take itself back, and the first failure
//! replays the log backwards, so the switch ends exactly as it was before the batch
//! (identifier states, reservations, admitted bandwidth and buffers, connection ids).

use smallvec::SmallVec;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;

use super::{Branch, ConnectionKind, Entry, IdState, Switch};

/// How to take back a batch that stood (`Switch::execute_undoable`): kept by a server
/// until the batch is journalled, handed to `Switch::roll_back` if it cannot be.
#[derive(Debug, Default)]
pub struct UndoLog(pub(super) Vec<Undo>);

impl UndoLog {
    /// Whether the batch changed nothing that needs taking back.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One step of an undo log.
#[derive(Debug)]
pub(super) enum Undo {
    /// Remove reservations made.
    Unreserve(usize, Vec<VcId>),
    /// Restore reservations removed.
    Rereserve(usize, Vec<VcId>, u32),
    /// Remove a connection made; restore each branch's identifier to its prior state.
    Uncommit(u64, Vec<Option<IdState>>),
    /// Restore a connection removed (with its branch identifiers' post-release states).
    Recommit(Box<Entry>),
    /// Remove a branch added (its identifier's prior state).
    UnaddBranch(u64, Branch, Option<IdState>),
    /// Restore a branch dropped, at its index.
    UndropBranch(u64, Branch, usize),
    /// Restore a connection's contract (traffic, clr, admitted) before a Modify.
    Unmodify(u64, TrafficDescriptor, f64, f64),
}

impl Switch {
    pub(super) fn undo(&mut self, u: Undo) {
        match u {
            Undo::Unreserve(pi, ids) => {
                for id in ids {
                    let kind = ConnectionKind::of_id(id);
                    self.set_out(pi, kind, id, None);
                }
            }
            Undo::Rereserve(pi, ids, owner) => {
                for id in ids {
                    let kind = ConnectionKind::of_id(id);
                    self.set_out(pi, kind, id, Some(IdState::Reserved(owner)));
                }
            }
            Undo::Uncommit(id, prior) => {
                let e = self.uninstall(id).expect("undoing a commit of this batch");
                for (b, st) in e.branches.iter().zip(prior) {
                    let pi = self.index(b.port).expect("installed");
                    self.set_out(pi, e.kind, b.id, st);
                }
                if self.next_id == id + 1 {
                    self.next_id = id;
                }
            }
            Undo::Recommit(e) => {
                // Its identifiers are free or reserved by its owner now; install()
                // marks them committed again.
                self.install(*e);
            }
            Undo::UnaddBranch(conn, b, prior) => {
                let slot = self.by_id[&conn];
                let e = self.slots[slot as usize].as_ref().expect("live");
                let at = e
                    .branches
                    .iter()
                    .position(|x| *x == b)
                    .expect("the branch this batch added");
                self.detach_branch(slot, at, prior);
            }
            Undo::UndropBranch(conn, b, at) => {
                let slot = self.by_id[&conn];
                self.attach_branch(slot, b, Some(at));
            }
            Undo::Unmodify(conn, t, clr, admitted) => self.unmodify(conn, t, clr, admitted),
        }
    }

    fn unmodify(&mut self, conn: u64, traffic: TrafficDescriptor, clr: f64, admitted: f64) {
        let slot = self.by_id[&conn];
        let e = self.slots[slot as usize].as_mut().expect("live");
        let delta = admitted - e.admitted;
        e.traffic = traffic;
        e.clr = clr;
        e.admitted = admitted;
        let ports: SmallVec<[PortId; 4]> = e.branches.iter().map(|b| b.port).collect();
        for port in ports {
            let pi = self.index(port).expect("installed");
            let p = &mut self.ports[pi];
            p.allocated = (p.allocated + delta).max(0.0);
        }
    }
}
