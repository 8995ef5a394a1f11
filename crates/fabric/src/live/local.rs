//! The switch a server runs: the sans-IO [`Switch`] behind a lock, shared by every front
//! end (gRPC, raw TCP, the UDP data plane), with its journal and its event feed.
//!
//! Paper 000 §II-B: the switch server is the only writer of the switch's tables, and
//! every controller sees the same state through it. One `std::sync::Mutex` serialises
//! commands and cells: each critical section is a handful of table operations (no
//! `.await` inside), so a plain lock is cheaper than a channel to an owner task.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;

use crate::error::FabricError;
use crate::live::backend::{BatchResult, Description, SwitchBackend};
use crate::live::journal::Journal;
use crate::switch::{
    Atomicity, BranchChange, Command, Connection, Modify, Reply, Reservation, Switch, UndoLog,
};
use atmlab_core::ids::PortId;

/// Something that happened to the switch's tables, for Watch.
#[derive(Debug, Clone, PartialEq)]
pub enum SwitchEvent {
    /// A connection was installed.
    Committed(Connection),
    /// A connection was removed.
    Released(u64),
    /// Identifiers were reserved.
    Reserved(Vec<Reservation>),
    /// Reservations were returned.
    Unreserved(Vec<Reservation>),
    /// A branch was added or dropped; the connection as it is now.
    BranchesChanged(Connection),
}

/// What the data plane refused on one port: datagrams from an address that is not the
/// port's peer, and the whole cells they carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Datagrams refused.
    pub datagrams: u64,
    /// Cells in them.
    pub cells: u64,
}

/// An event with its sequence number on this switch.
#[derive(Debug, Clone, PartialEq)]
pub struct SequencedEvent {
    /// Monotonic per switch, from 1.
    pub sequence: u64,
    /// The event.
    pub event: SwitchEvent,
}

enum Record {
    Connection(Connection),
    Release(u64),
}

/// What the control path needs of the data plane running a switch's ports: binding a
/// host port to its host (AttachHost). A trait here, implemented by
/// [`crate::live::dataplane::DataPlane`], so that the switch does not depend on the data
/// plane that depends on it.
pub trait HostPorts: Send + Sync {
    /// Binds host port `port` to `host`; false if `port` is a trunk to a neighbour.
    fn attach_host(&self, port: PortId, host: std::net::SocketAddr, switch: &LocalSwitch) -> bool;
}

struct State {
    switch: Switch,
    journal: Option<Journal>,
    sequence: u64,
}

struct Shared {
    state: Mutex<State>,
    name: String,
    /// The switch's ports, in order (fixed for its life).
    port_ids: Vec<PortId>,
    peers: Mutex<Vec<String>>,
    /// Per port: datagrams and cells the data plane refused (counted outside the switch
    /// lock, so a flood of refused datagrams does not contend with the traffic).
    refused: Vec<(AtomicU64, AtomicU64)>,
    /// The data plane running on this switch, for the control path's AttachHost.
    data_plane: Mutex<Option<Arc<dyn HostPorts>>>,
    events: broadcast::Sender<SequencedEvent>,
}

/// A switch shared by the live front ends. Cheap to clone.
#[derive(Clone)]
pub struct LocalSwitch {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSwitch").finish_non_exhaustive()
    }
}

impl LocalSwitch {
    /// Wraps a switch; with a journal, every committed change is written to it before the
    /// caller hears of it.
    pub fn new(switch: Switch, journal: Option<Journal>) -> Self {
        let n = switch.port_ids().count();
        let name = switch.name().to_string();
        let port_ids: Vec<PortId> = switch.port_ids().collect();
        let (events, _) = broadcast::channel(4096);
        LocalSwitch {
            shared: Arc::new(Shared {
                name,
                port_ids,
                data_plane: Mutex::new(None),
                refused: (0..n)
                    .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                    .collect(),
                state: Mutex::new(State {
                    switch,
                    journal,
                    sequence: 0,
                }),
                peers: Mutex::new(vec![String::new(); n]),
                events,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would leave a half-applied command; the core
        // never panics on requests (every input is validated), so poisoning means a bug:
        // keep serving rather than take the switch down.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the switch (the data plane's per-datagram critical section).
    pub fn with_switch<R>(&self, f: impl FnOnce(&mut Switch) -> R) -> R {
        f(&mut self.lock().switch)
    }

    /// Records where a port's cells go, for Describe.
    pub fn set_peer(&self, port: PortId, peer: String) {
        let idx = self.port_index(port);
        if let Some(i) = idx {
            let mut peers = self.shared.peers.lock().unwrap_or_else(|e| e.into_inner());
            peers[i] = peer;
        }
    }

    /// The switch's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    fn port_index(&self, port: PortId) -> Option<usize> {
        // Port ids are dense from 0 in every configuration seen; search otherwise.
        let ids = &self.shared.port_ids;
        let i = usize::from(port.0);
        if ids.get(i) == Some(&port) {
            Some(i)
        } else {
            ids.iter().position(|&p| p == port)
        }
    }

    /// Counts one datagram of `cells` cells refused on `port` (the data plane's call;
    /// no switch lock taken).
    pub fn count_refused(&self, port: PortId, cells: u64) {
        if let Some((d, c)) = self
            .port_index(port)
            .and_then(|i| self.shared.refused.get(i))
        {
            d.fetch_add(1, Relaxed);
            c.fetch_add(cells, Relaxed);
        }
    }

    /// Tells the switch which data plane runs its ports ([`crate::live::dataplane::DataPlane::spawn`]
    /// does).
    pub fn set_data_plane(&self, dp: Arc<dyn HostPorts>) {
        *self
            .shared
            .data_plane
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(dp);
    }

    /// Forgets the data plane (a stopped server: its sockets close with the data plane's
    /// last handle, not with the last handle of the switch).
    pub fn clear_data_plane(&self) {
        self.shared
            .data_plane
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Binds host port `port` to the host at `host`: the explicit attach, through the
    /// control path (the AttachHost RPC). Refused for a trunk port, an unknown port, or a
    /// switch without a data plane.
    pub fn attach_host(&self, port: PortId, host: std::net::SocketAddr) -> Result<(), FabricError> {
        let dp = self
            .shared
            .data_plane
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| FabricError::Unavailable("this switch runs no data plane".into()))?;
        if self.port_index(port).is_none() {
            return Err(FabricError::UnknownPort(port));
        }
        if dp.attach_host(port, host, self) {
            Ok(())
        } else {
            Err(FabricError::Invalid(
                "the port is a trunk to a neighbour switch, not a host port",
            ))
        }
    }

    /// What the data plane refused on `port` so far.
    pub fn refusals(&self, port: PortId) -> Refusals {
        self.port_index(port)
            .and_then(|i| self.shared.refused.get(i))
            .map(|(d, c)| Refusals {
                datagrams: d.load(Relaxed),
                cells: c.load(Relaxed),
            })
            .unwrap_or_default()
    }

    /// Subscribes to table events (a bounded feed: a slow reader is told how many it
    /// missed).
    pub fn subscribe(&self) -> broadcast::Receiver<SequencedEvent> {
        self.shared.events.subscribe()
    }

    /// Runs a batch, journals what it changed, then publishes the events. The journal is
    /// written (to the kernel) before this returns, so an acknowledged commit survives a
    /// crash of the server process.
    pub fn execute_now(
        &self,
        commands: &[Command],
        atomicity: Atomicity,
    ) -> Result<BatchResult, FabricError> {
        let watching = self.shared.events.receiver_count() > 0;
        let mut st = self.lock();
        let st = &mut *st;
        let journaling = st.journal.is_some();
        // What the batch did, observed command by command (a batch may commit and
        // release the same connection), kept only if the batch stands.
        let mut records: Vec<Record> = Vec::new();
        let mut events: Vec<SwitchEvent> = Vec::new();
        let observe = |sw: &Switch, cmd: &Command, reply: &Reply| {
            if !journaling && !watching {
                return;
            }
            match (cmd, reply) {
                (
                    Command::Commit(_),
                    Reply::Committed {
                        connection,
                        replenished,
                    },
                ) => {
                    let conn = sw.connection(*connection).expect("just committed");
                    if watching {
                        events.push(SwitchEvent::Committed(conn.clone()));
                        if !replenished.is_empty() {
                            events.push(SwitchEvent::Reserved(reservations_of(cmd, replenished)));
                        }
                    }
                    records.push(Record::Connection(conn));
                }
                (Command::Release(r), Reply::Released) => {
                    records.push(Record::Release(r.connection));
                    if watching {
                        events.push(SwitchEvent::Released(r.connection));
                    }
                }
                (Command::AddBranch(BranchChange { connection, .. }), _)
                | (Command::DropBranch(BranchChange { connection, .. }), _)
                | (Command::Modify(Modify { connection, .. }), _) => {
                    let conn = sw.connection(*connection).expect("just changed");
                    if watching {
                        events.push(SwitchEvent::BranchesChanged(conn.clone()));
                    }
                    records.push(Record::Connection(conn));
                }
                (Command::Reserve(_), Reply::Reserved(ids)) if watching => {
                    events.push(SwitchEvent::Reserved(reservations_of(cmd, ids)));
                }
                (Command::Unreserve(u), Reply::Unreserved) if watching => {
                    events.push(SwitchEvent::Unreserved(
                        u.ids
                            .iter()
                            .map(|&id| Reservation {
                                port: u.port,
                                id,
                                owner: u.owner.to_string(),
                            })
                            .collect(),
                    ));
                }
                _ => {}
            }
        };
        // With a journal, the batch is kept undoable until it is written: a batch the
        // journal cannot hold is taken back, so the table never holds a command its
        // client was told had failed (a full disk).
        let (results, undo) = if journaling {
            st.switch.execute_undoable(commands, atomicity, observe)
        } else {
            (
                st.switch.execute_observed(commands, atomicity, observe),
                UndoLog::default(),
            )
        };
        if atomicity == Atomicity::AllOrNothing && results.iter().any(|r| r.is_err()) {
            // Undone: nothing happened.
            return Ok(results);
        }
        if let Some(j) = st.journal.as_mut() {
            for r in &records {
                match r {
                    Record::Connection(c) => j.record(c),
                    Record::Release(id) => j.record_release(*id),
                }
            }
            if let Err(e) = j.flush() {
                st.switch.roll_back(undo);
                return Err(FabricError::Unavailable(format!(
                    "journal write failed, nothing done: {e}"
                )));
            }
        }
        for event in events {
            st.sequence += 1;
            // No receiver is not an error: nobody is watching.
            let _ = self.shared.events.send(SequencedEvent {
                sequence: st.sequence,
                event,
            });
        }
        Ok(results)
    }

    /// Describe, now.
    pub fn describe_now(&self) -> Description {
        let (name, mut ports, connections) =
            self.with_switch(|s| (s.name().to_string(), s.ports(), s.connection_count() as u32));
        for (p, (d, c)) in ports.iter_mut().zip(&self.shared.refused) {
            p.counters.datagrams_refused = d.load(Relaxed);
            p.counters.cells_refused = c.load(Relaxed);
        }
        let peers = self
            .shared
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Description {
            name,
            ports,
            peers,
            connections,
        }
    }
}

fn reservations_of(cmd: &Command, ids: &[atmlab_core::ids::VcId]) -> Vec<Reservation> {
    let (port, owner) = match cmd {
        Command::Reserve(r) => (r.port, r.owner.clone()),
        Command::Commit(c) => (c.branches[0].port, c.owner.clone()),
        _ => return Vec::new(),
    };
    ids.iter()
        .map(|&id| Reservation {
            port,
            id,
            owner: owner.to_string(),
        })
        .collect()
}

impl SwitchBackend for LocalSwitch {
    async fn execute(
        &self,
        commands: Vec<Command>,
        atomicity: Atomicity,
    ) -> Result<BatchResult, FabricError> {
        self.execute_now(&commands, atomicity)
    }

    async fn describe(&self) -> Result<Description, FabricError> {
        Ok(self.describe_now())
    }

    async fn connections(&self) -> Result<Vec<Connection>, FabricError> {
        Ok(self.with_switch(|s| s.connections()))
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, FabricError> {
        Ok(self.with_switch(|s| s.reservations()))
    }

    async fn owners(&self, ids: Vec<u64>) -> Result<Vec<Option<String>>, FabricError> {
        Ok(self.with_switch(|s| {
            ids.iter()
                .map(|id| s.connection_owner(*id).map(str::to_owned))
                .collect()
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::path::Path;

    use atmlab_core::ids::VcId;
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::{BitRate, CellRate};

    use super::*;
    use crate::config::SwitchConfig;
    use crate::switch::{Branch, Commit, ConnectionKind, Release, Reserve};

    /// What a batch may change: connections, reservations, and per port the bandwidth
    /// admitted and the identifiers reserved and committed.
    type State = (Vec<Connection>, Vec<Reservation>, Vec<(f64, u32, u32)>);

    fn state(local: &LocalSwitch) -> State {
        local.with_switch(|s| {
            let ports = (0..3)
                .map(|p| {
                    let st = s.port_status(PortId(p)).unwrap();
                    (st.allocated, st.reserved, st.committed)
                })
                .collect();
            (s.connections(), s.reservations(), ports)
        })
    }

    /// A full disk (`/dev/full`: every write fails with ENOSPC) under the journal: a
    /// commit of reserved identifiers, a release and a mixed batch are each refused to
    /// the client, and the switch is exactly as before each of them: no connection
    /// installed, none removed, the reservations and the admitted bandwidth as they were
    /// (issue 24, item 6: before, the commit was refused but stayed in the table).
    #[test]
    fn a_full_disk_leaves_the_switch_unchanged() {
        let cfg = SwitchConfig::uniform("s1", 3, BitRate(155.52e6));
        let full = OpenOptions::new().append(true).open("/dev/full").unwrap();
        let journal = Journal::over(Path::new("/dev/full"), full, false, 0);
        let local = LocalSwitch::new(Switch::new(&cfg).unwrap(), Some(journal));
        // Reservations are not journalled: this batch writes nothing and stands.
        let r = local
            .execute_now(
                &[Command::Reserve(Reserve {
                    port: PortId(1),
                    count: 4,
                    owner: "cm".into(),
                    ..Default::default()
                })],
                Atomicity::AllOrNothing,
            )
            .unwrap();
        let Ok(Reply::Reserved(ids)) = &r[0] else {
            panic!("{r:?}")
        };
        let commit = |in_vci: u16, out: VcId| {
            Command::Commit(Commit {
                kind: ConnectionKind::Vc,
                in_port: PortId(0),
                in_id: VcId::new(0, in_vci),
                branches: vec![Branch {
                    port: PortId(1),
                    id: out,
                }],
                traffic: TrafficDescriptor::cbr(CellRate(10_000.0)),
                clr: 0.0,
                buffer_cells: 0,
                owner: "cm".into(),
                replenish: 2,
                tag: String::new(),
            })
        };
        let before = state(&local);
        for atomicity in [Atomicity::AllOrNothing, Atomicity::ContinueOnError] {
            let e = local
                .execute_now(&[commit(40, ids[0]), commit(41, ids[1])], atomicity)
                .unwrap_err()
                .to_string();
            assert!(e.contains("journal") && e.contains("/dev/full"), "{e}");
            assert_eq!(state(&local), before, "{atomicity:?}");
        }
        // A connection installed without the journal (restored, as after a restart)
        // cannot be released while the journal cannot say so.
        local.with_switch(|s| {
            s.restore(&Connection {
                id: 7,
                kind: ConnectionKind::Vc,
                in_port: PortId(0),
                in_id: VcId::new(0, 50),
                branches: vec![Branch {
                    port: PortId(2),
                    id: VcId::new(0, 50),
                }],
                traffic: TrafficDescriptor::cbr(CellRate(1_000.0)),
                clr: 0.0,
                admitted: 0.0,
                buffer_cells: 0,
                owner: "cm".into(),
                tag: String::new(),
                cells: 0,
                cells_discarded: 0,
            })
            .unwrap()
        });
        let before = state(&local);
        let release = Command::Release(Release {
            connection: 7,
            keep_reserved: false,
        });
        assert!(
            local
                .execute_now(std::slice::from_ref(&release), Atomicity::ContinueOnError)
                .is_err()
        );
        assert_eq!(state(&local), before);
        assert_eq!(state(&local).0.len(), 1);
    }
}
