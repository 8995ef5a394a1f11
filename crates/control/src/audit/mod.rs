//! The network audit (issue 10; DESIGN.md §5 "Faults are survived ... an audit finds no
//! leaked VPI/VCI, bandwidth or cross-connect"): what the connection managers believe
//! against what the switches hold.
//!
//! [`audit`] is a pure check over snapshots, so it is testable without a network; the
//! shell (`network`, feature `live`) [`snapshot`] reads each switch server (Describe, ListConnections,
//! ListReservations) and `atmlab audit` adds each manager's ListConnections. It finds:
//! a hop a manager holds that its switch does not have (or has differently); a
//! cross-connect no manager knows (an orphan); port accounting that does not add up
//! (bandwidth admitted, buffer set aside, identifiers committed against the connections
//! listed); and, when the network is quiescent (no manager running), any identifier
//! still reserved.
//!
//! The three reads of a switch are not one atomic snapshot: on a network under load a
//! call can land between them. Audit a quiet network, or audit twice.

use std::collections::{BTreeMap, HashMap, HashSet};

use atmlab_fabric::ops::Description;
use atmlab_fabric::switch::{Connection, Reservation};

use crate::cm::core::CallView;

#[cfg(feature = "live")]
mod network;
#[cfg(feature = "live")]
pub use network::{audit_network, audit_settled, call_from_pb, snapshot};

/// One switch as read for the audit.
#[derive(Debug, Clone)]
pub struct SwitchSnapshot {
    /// Its name.
    pub name: String,
    /// Ports and their accounting.
    pub description: Description,
    /// Its connections.
    pub connections: Vec<Connection>,
    /// Identifiers reserved (phase 1) and by whom.
    pub reservations: Vec<Reservation>,
}

/// What the audit may assume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// No manager is running: every reservation is a leak (a running manager's caches
    /// hold reservations legitimately).
    pub quiescent: bool,
}

/// Something that does not add up.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// A manager's call has a hop its switch does not hold.
    Missing {
        /// The manager's call id.
        call: u64,
        /// The switch.
        switch: String,
        /// The switch connection id the manager recorded.
        connection: u64,
    },
    /// The switch holds the connection, but not as the manager recorded it.
    Mismatch {
        /// The manager's call id.
        call: u64,
        /// The switch.
        switch: String,
        /// The connection.
        connection: u64,
        /// What differs.
        what: String,
    },
    /// A cross-connect no manager knows.
    Orphan {
        /// The switch.
        switch: String,
        /// The connection.
        connection: u64,
        /// Its owner and tag, to find who made it.
        owner: String,
        /// The tag.
        tag: String,
    },
    /// A port's accounting does not match its connections.
    Accounting {
        /// The switch.
        switch: String,
        /// The port.
        port: u16,
        /// What differs, with both numbers.
        what: String,
    },
    /// Identifiers still reserved on a quiescent network.
    Reserved {
        /// The switch.
        switch: String,
        /// The port.
        port: u16,
        /// The owner.
        owner: String,
        /// How many.
        count: usize,
    },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Missing {
                call,
                switch,
                connection,
            } => write!(
                f,
                "call {call}: connection {connection} missing on {switch}"
            ),
            Finding::Mismatch {
                call,
                switch,
                connection,
                what,
            } => write!(
                f,
                "call {call}: connection {connection} on {switch} differs: {what}"
            ),
            Finding::Orphan {
                switch,
                connection,
                owner,
                tag,
            } => write!(
                f,
                "orphan: connection {connection} on {switch} (owner {owner:?}, tag {tag:?}) belongs to no manager's call"
            ),
            Finding::Accounting { switch, port, what } => {
                write!(f, "{switch} port {port}: {what}")
            }
            Finding::Reserved {
                switch,
                port,
                owner,
                count,
            } => write!(
                f,
                "{switch} port {port}: {count} identifiers still reserved by {owner:?} with no manager running"
            ),
        }
    }
}

/// The audit's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditReport {
    /// Switches read.
    pub switches: usize,
    /// Connections on them.
    pub connections: usize,
    /// Calls the managers hold.
    pub calls: usize,
    /// Reservations on them.
    pub reservations: usize,
    /// What does not add up (empty: clean).
    pub findings: Vec<Finding>,
}

impl AuditReport {
    /// Nothing found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

impl std::fmt::Display for AuditReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} switches, {} connections, {} calls, {} reservations: ",
            self.switches, self.connections, self.calls, self.reservations
        )?;
        if self.is_clean() {
            return write!(f, "clean");
        }
        write!(f, "{} findings", self.findings.len())?;
        for x in &self.findings {
            write!(f, "\n  {x}")?;
        }
        Ok(())
    }
}

/// Relative tolerance of bandwidth sums (floating-point admission arithmetic).
const TOLERANCE: f64 = 1e-6;

/// Checks the managers' calls against the switches.
pub fn audit(calls: &[CallView], switches: &[SwitchSnapshot], opts: AuditOptions) -> AuditReport {
    let mut r = AuditReport {
        switches: switches.len(),
        connections: switches.iter().map(|s| s.connections.len()).sum(),
        calls: calls.len(),
        reservations: switches.iter().map(|s| s.reservations.len()).sum(),
        findings: Vec::new(),
    };
    let by_name: HashMap<&str, &SwitchSnapshot> =
        switches.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut known: HashSet<(&str, u64)> = HashSet::new();
    for c in calls {
        for (hop, conn, in_id, out_id) in &c.hops {
            known.insert((&*hop.switch, *conn));
            let Some(sw) = by_name.get(&*hop.switch) else {
                r.findings.push(Finding::Missing {
                    call: c.id,
                    switch: hop.switch.to_string(),
                    connection: *conn,
                });
                continue;
            };
            let Some(x) = sw.connections.iter().find(|x| x.id == *conn) else {
                r.findings.push(Finding::Missing {
                    call: c.id,
                    switch: hop.switch.to_string(),
                    connection: *conn,
                });
                continue;
            };
            let mut what = Vec::new();
            if x.in_port.0 != hop.in_port || x.in_id != *in_id {
                what.push(format!(
                    "input {}:{} on the switch, {}:{} in the manager",
                    x.in_port.0, x.in_id, hop.in_port, in_id
                ));
            }
            if !x
                .branches
                .iter()
                .any(|b| b.port.0 == hop.out_port && b.id == *out_id)
            {
                what.push(format!(
                    "no branch {}:{} (the switch has {:?})",
                    hop.out_port,
                    out_id,
                    x.branches
                        .iter()
                        .map(|b| format!("{}:{}", b.port.0, b.id))
                        .collect::<Vec<_>>()
                ));
            }
            if !what.is_empty() {
                r.findings.push(Finding::Mismatch {
                    call: c.id,
                    switch: hop.switch.to_string(),
                    connection: *conn,
                    what: what.join("; "),
                });
            }
        }
    }
    for sw in switches {
        for x in &sw.connections {
            if !known.contains(&(sw.name.as_str(), x.id)) {
                r.findings.push(Finding::Orphan {
                    switch: sw.name.clone(),
                    connection: x.id,
                    owner: x.owner.clone(),
                    tag: x.tag.clone(),
                });
            }
        }
        // Port accounting: what each port says it has given out against the sum over
        // the connections with a branch on it.
        for (i, p) in sw.description.ports.iter().enumerate() {
            let port = i as u16;
            let (mut bw, mut buf, mut ids) = (0.0f64, 0u64, 0u32);
            for x in &sw.connections {
                let n = x.branches.iter().filter(|b| b.port.0 == port).count();
                if n > 0 {
                    bw += x.admitted;
                    buf += x.buffer_cells as u64;
                    ids += n as u32;
                }
            }
            if (p.allocated - bw).abs() > TOLERANCE * p.allocated.abs().max(1.0) {
                r.findings.push(Finding::Accounting {
                    switch: sw.name.clone(),
                    port,
                    what: format!(
                        "{} cells/s admitted, but its connections sum to {bw}",
                        p.allocated
                    ),
                });
            }
            if p.buffer_allocated as u64 != buf {
                r.findings.push(Finding::Accounting {
                    switch: sw.name.clone(),
                    port,
                    what: format!(
                        "{} buffer cells set aside, but its connections sum to {buf}",
                        p.buffer_allocated
                    ),
                });
            }
            if p.committed != ids {
                r.findings.push(Finding::Accounting {
                    switch: sw.name.clone(),
                    port,
                    what: format!(
                        "{} identifiers committed, but its connections have {ids} branches on it",
                        p.committed
                    ),
                });
            }
            let reserved = sw.reservations.iter().filter(|x| x.port.0 == port).count();
            if p.reserved as usize != reserved {
                r.findings.push(Finding::Accounting {
                    switch: sw.name.clone(),
                    port,
                    what: format!(
                        "{} identifiers reserved by count, {reserved} listed",
                        p.reserved
                    ),
                });
            }
        }
        if opts.quiescent {
            let mut held: BTreeMap<(u16, &str), usize> = BTreeMap::new();
            for x in &sw.reservations {
                *held.entry((x.port.0, x.owner.as_str())).or_default() += 1;
            }
            for ((port, owner), count) in held {
                r.findings.push(Finding::Reserved {
                    switch: sw.name.clone(),
                    port,
                    owner: owner.to_string(),
                    count,
                });
            }
        }
    }
    r
}
