//! The start-up audit's decisions, sans IO (issue 10, on paper 000 §II-C's manager; issue
//! 23: one core, two shells). A restarted manager reads its journal and what every
//! switch holds; [`plan`] decides, from those alone, which journaled connections are
//! taken back (every hop present as recorded), which are rolled back, which of the
//! owner's cross-connects are released, which identifiers are given back, and, with
//! `--adopt`, which whole connections among the strays are taken back
//! ([`whole_connections`]). The live shell (`cm::live::recovery`) reads the journal and
//! the switches over gRPC and carries the plan out; the simulated shell
//! (`atmlab_models::control`) reads them from its simulated journal and switch cores and
//! carries it out in virtual time. Neither decides anything itself.

use std::collections::{BTreeMap, HashMap, HashSet};

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::Duration;
use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::switch::{Command, Connection, Release, Reservation, Unreserve};

use super::{CallError, CallView, HopSpec};
use crate::route::NetworkView;

/// A journaled connection: the manager's view and its end points.
#[derive(Debug, Clone, PartialEq)]
pub struct JournaledCall {
    /// The call, as established.
    pub view: CallView,
    /// Source host.
    pub source: String,
    /// Destination host.
    pub destination: String,
    /// What its contract carries besides the descriptor (TINA echoes it in every answer,
    /// so a restarted LNC must know it; zero for the other managers).
    pub bounds: QosBounds,
}

/// A contract's target cell loss ratio and delay bounds (cm.proto's CellQos besides the
/// traffic descriptor), journaled beside the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QosBounds {
    /// Target cell loss ratio (0: the switch's default).
    pub clr: f64,
    /// Cell transfer delay bound, microseconds.
    pub ctd_us: u64,
    /// Cell delay variation bound, microseconds.
    pub cdv_us: u64,
    /// Burst tolerance, microseconds.
    pub burst_tolerance_us: u64,
}

/// What the start-up audit does with cross-connects of this manager's owner that no
/// journaled connection explains.
#[derive(Debug, Clone, Default)]
pub struct Strays {
    /// Release them even when the journal holds no connections (`--release-strays`).
    pub release: bool,
    /// Take back every whole connection among them (`--adopt`), followed over this
    /// network's links from a host's port to hosts' ports; release only the fragments.
    pub adopt: Option<NetworkView>,
}

/// What one switch holds, as the audit reads it.
#[derive(Debug, Clone, Default)]
pub struct Held {
    /// The switch's name.
    pub switch: String,
    /// Its connections, every owner's.
    pub connections: Vec<Connection>,
    /// Its reservations, every owner's.
    pub reservations: Vec<Reservation>,
}

/// The repairs of one switch: its commands (releases first, then give-backs, to run with
/// `ContinueOnError`), and how many of each.
#[derive(Debug, Clone)]
pub struct Repair {
    /// The switch's name.
    pub switch: String,
    /// The commands to run there.
    pub commands: Vec<Command>,
    /// Cross-connects released (the first `released` commands).
    pub released: usize,
    /// Identifiers given back.
    pub returned: usize,
}

impl Repair {
    /// The findings of this repair once run, `failed` of its commands having failed.
    pub fn findings(&self, owner: &str, failed: usize) -> Vec<String> {
        let name = &self.switch;
        let mut out = Vec::new();
        if self.released > 0 {
            out.push(format!(
                "{name}: {} cross-connects of {owner} not in the journal released",
                self.released
            ));
        }
        if self.returned > 0 {
            out.push(format!(
                "{name}: {} identifiers reserved by {owner} given back",
                self.returned
            ));
        }
        if failed > 0 {
            out.push(format!("{name}: {failed} of those repairs failed"));
        }
        out
    }
}

/// The audit's decisions ([`plan`]).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// One line per finding so far (the repairs' own come when they have run).
    pub findings: Vec<String>,
    /// What to run at each switch, in the order the switches were given; switches with
    /// nothing to repair are left out.
    pub repairs: Vec<Repair>,
    /// Connections adopted from the switches (`--adopt`), to journal.
    pub adopted: Vec<JournaledCall>,
    /// Journaled connections to forget (rolled back, or not taken back).
    pub forget: Vec<u64>,
    /// (call id, source, destination) of each connection taken back.
    pub hosts: Vec<(u64, String, String)>,
    /// Journaled connections taken back.
    pub taken: usize,
}

impl Plan {
    /// The first finding, summing the journal up.
    pub fn summary(&self, journaled: usize) -> String {
        format!(
            "journal: {journaled} connections, {} taken back, {} rolled back",
            self.taken,
            self.forget.len()
        )
    }
}

/// The start-up audit's decisions: every journaled connection (`calls`) whose hops all
/// exist on their switches (`held`), as recorded, is handed to `take_back`; one with a
/// hop missing is rolled back (its other hops released) and forgotten; cross-connects of
/// `owner` that no journaled connection explains (half-made setups) are released;
/// identifiers it had reserved (its caches, lost with the process) are given back,
/// except each taken-back connection's source identifier.
///
/// A journal with no connections while the switches hold cross-connects of this owner
/// is refused, naming them, unless `strays` says to release them or to adopt them: a
/// fresh, emptied or mistyped journal would otherwise release every connection of a
/// running network (issue 24).
pub fn plan(
    owner: &str,
    calls: &[JournaledCall],
    held: &[Held],
    strays: &Strays,
    take_back: &mut dyn FnMut(&JournaledCall) -> Result<(), String>,
) -> Result<Plan, CallError> {
    let by_name: HashMap<&str, &Held> = held.iter().map(|h| (h.switch.as_str(), h)).collect();
    let mut out = Plan::default();
    let mut kept: HashSet<(String, u64)> = Default::default();
    let mut sources: HashSet<(String, u16, VcId)> = Default::default();
    let mut to_release: HashMap<String, Vec<u64>> = HashMap::new();
    for jc in calls {
        let v = &jc.view;
        let present: Vec<bool> = v
            .hops
            .iter()
            .map(|(h, conn, i, o)| {
                by_name.get(&*h.switch).is_some_and(|held| {
                    held.connections.iter().any(|x| {
                        x.id == *conn
                            && x.in_port.0 == h.in_port
                            && x.in_id == *i
                            && x.branches
                                .iter()
                                .any(|b| b.port.0 == h.out_port && b.id == *o)
                    })
                })
            })
            .collect();
        if present.iter().all(|p| *p) {
            if let Err(e) = take_back(jc) {
                out.findings
                    .push(format!("connection {}: not taken back: {e}", v.id));
                out.forget.push(v.id);
                continue;
            }
            for (h, conn, ..) in &v.hops {
                kept.insert((h.switch.to_string(), *conn));
            }
            out.hosts
                .push((v.id, jc.source.clone(), jc.destination.clone()));
            sources.insert((
                v.hops[0].0.switch.to_string(),
                v.hops[0].0.in_port,
                v.source_vc,
            ));
        } else {
            let missing: Vec<&str> = v
                .hops
                .iter()
                .zip(&present)
                .filter(|(_, p)| !**p)
                .map(|((h, ..), _)| &*h.switch)
                .collect();
            out.findings.push(format!(
                "connection {} ({} -> {}): hops missing on {}; rolled back",
                v.id,
                jc.source,
                jc.destination,
                missing.join(", ")
            ));
            out.forget.push(v.id);
            // Its surviving hops are released below, as cross-connects nobody explains.
        }
    }
    for h in held {
        for x in &h.connections {
            if x.owner == owner && !kept.contains(&(h.switch.clone(), x.id)) {
                to_release.entry(h.switch.clone()).or_default().push(x.id);
            }
        }
    }
    // --adopt: the whole connections among the strays are taken back and journaled;
    // only the fragments stay to be released.
    if let Some(net) = &strays.adopt {
        let loose: Vec<(String, Connection)> = held
            .iter()
            .flat_map(|h| {
                let kept = &kept;
                h.connections
                    .iter()
                    .filter(move |x| x.owner == owner && !kept.contains(&(h.switch.clone(), x.id)))
                    .map(move |x| (h.switch.clone(), x.clone()))
            })
            .collect();
        let mut next = calls.iter().map(|c| c.view.id).max().unwrap_or(0) + 1;
        let mut adopted = Vec::new();
        for mut c in whole_connections(&loose, net) {
            c.view.id = next;
            if let Err(e) = take_back(&c) {
                out.findings.push(format!(
                    "{} -> {} ({} hops): not adopted: {e}",
                    c.source,
                    c.destination,
                    c.view.hops.len()
                ));
                continue;
            }
            next += 1;
            let v = &c.view;
            for (h, conn, ..) in &v.hops {
                kept.insert((h.switch.to_string(), *conn));
                if let Some(ids) = to_release.get_mut(&*h.switch) {
                    ids.retain(|id| id != conn);
                }
            }
            out.hosts
                .push((v.id, c.source.clone(), c.destination.clone()));
            sources.insert((
                v.hops[0].0.switch.to_string(),
                v.hops[0].0.in_port,
                v.source_vc,
            ));
            adopted.push(c);
        }
        to_release.retain(|_, ids| !ids.is_empty());
        let cross: usize = adopted
            .iter()
            .map(|c| {
                let mut conns: Vec<(&str, u64)> = c
                    .view
                    .hops
                    .iter()
                    .map(|(h, conn, ..)| (&*h.switch, *conn))
                    .collect();
                conns.dedup();
                conns.len()
            })
            .sum();
        out.findings.push(format!(
            "adopted {} connections ({cross} cross-connects of {owner}) from the switches",
            adopted.len()
        ));
        for c in &adopted {
            let mut on: Vec<&str> = c.view.hops.iter().map(|(h, ..)| &*h.switch).collect();
            on.dedup();
            out.findings.push(format!(
                "connection {} ({} -> {}): adopted from {}",
                c.view.id,
                c.source,
                c.view.leaf_names().join(", "),
                on.join(", ")
            ));
        }
        out.adopted = adopted;
    }
    let stray_count: usize = to_release.values().map(Vec::len).sum();
    if calls.is_empty() && stray_count > 0 && !strays.release && strays.adopt.is_none() {
        let mut per: Vec<String> = to_release
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.len()))
            .collect();
        per.sort();
        return Err(CallError {
            kind: ErrorKind::Aborted,
            message: format!(
                "the journal holds no connections, but the switches hold {stray_count} \
                 cross-connects of owner {owner:?} ({}); on a fresh, emptied or mistyped \
                 journal the start-up audit would release them all. Start on the journal \
                 that recorded them, give this manager its own --owner, pass --adopt to \
                 take back the whole connections among them, or pass --release-strays to \
                 release them",
                per.join(", ")
            ),
        });
    }
    for h in held {
        let mut commands: Vec<Command> = to_release
            .get(&h.switch)
            .into_iter()
            .flatten()
            .map(|&id| {
                Command::Release(Release {
                    connection: id,
                    keep_reserved: false,
                })
            })
            .collect();
        let released = commands.len();
        let mut give_back: BTreeMap<u16, Vec<VcId>> = Default::default();
        for r in &h.reservations {
            if r.owner == owner && !sources.contains(&(h.switch.clone(), r.port.0, r.id)) {
                give_back.entry(r.port.0).or_default().push(r.id);
            }
        }
        let returned: usize = give_back.values().map(Vec::len).sum();
        for (port, ids) in give_back {
            commands.push(Command::Unreserve(Unreserve {
                port: PortId(port),
                ids,
                owner: owner.into(),
            }));
        }
        if commands.is_empty() {
            continue;
        }
        out.repairs.push(Repair {
            switch: h.switch.clone(),
            commands,
            released,
            returned,
        });
    }
    out.taken = calls.len() - out.forget.len();
    Ok(out)
}

/// The whole connections among `loose` (cross-connects of one owner, by switch): a
/// connection is a tree of cross-connects entering at a host's port, each branch leaving
/// on a host's port or over a link into the next cross-connect on the link's far port
/// and the branch's identifier. A tree with a branch that leads nowhere is not whole.
/// Returned with id 0, leaves in the order found, upstream entries first; the order is
/// the switches' (by name) and their connection ids'.
pub fn whole_connections(loose: &[(String, Connection)], net: &NetworkView) -> Vec<JournaledCall> {
    let mut peer: HashMap<(&str, u16), (&str, u16)> = HashMap::new();
    let links = net.links();
    for ((a, pa), (b, pb)) in &links {
        peer.insert((a.as_str(), *pa), (b.as_str(), *pb));
        peer.insert((b.as_str(), *pb), (a.as_str(), *pa));
    }
    let host: HashMap<(&str, u16), &str> = net
        .hosts
        .iter()
        .map(|(h, s, p)| ((s.as_str(), *p), h.as_str()))
        .collect();
    let mut order: Vec<usize> = (0..loose.len()).collect();
    order.sort_by(|&i, &j| (&loose[i].0, loose[i].1.id).cmp(&(&loose[j].0, loose[j].1.id)));
    let by_in: HashMap<(&str, u16, VcId), usize> = loose
        .iter()
        .enumerate()
        .map(|(i, (s, c))| ((s.as_str(), c.in_port.0, c.in_id), i))
        .collect();
    let mut used = vec![false; loose.len()];
    let mut out = Vec::new();
    for &root in &order {
        let (sw, c) = &loose[root];
        let Some(source) = host.get(&(sw.as_str(), c.in_port.0)) else {
            continue;
        };
        if used[root] {
            continue;
        }
        let mut seen = vec![false; loose.len()];
        seen[root] = true;
        let mut hops: Vec<(HopSpec, u64, VcId, VcId)> = Vec::new();
        let mut parents = Vec::new();
        let mut leaves = Vec::new();
        let mut whole = true;
        // Depth first, each cross-connect's branches in order.
        let mut stack = vec![(root, None::<usize>)];
        while let Some((i, parent)) = stack.pop() {
            let (sw, c) = &loose[i];
            let mut next = Vec::new();
            for b in &c.branches {
                let e = hops.len();
                hops.push((
                    HopSpec {
                        switch: sw.as_str().into(),
                        in_port: c.in_port.0,
                        out_port: b.port.0,
                    },
                    c.id,
                    c.in_id,
                    b.id,
                ));
                parents.push(parent);
                if let Some(h) = host.get(&(sw.as_str(), b.port.0)) {
                    leaves.push((h.to_string(), e));
                    continue;
                }
                let down = peer
                    .get(&(sw.as_str(), b.port.0))
                    .and_then(|(s, p)| by_in.get(&(*s, *p, b.id)))
                    .copied()
                    .filter(|&j| !seen[j] && !used[j]);
                match down {
                    Some(j) => {
                        seen[j] = true;
                        next.push((j, Some(e)));
                    }
                    None => whole = false,
                }
            }
            stack.extend(next.into_iter().rev());
        }
        if !whole || leaves.is_empty() {
            continue;
        }
        for (i, s) in seen.iter().enumerate() {
            if *s {
                used[i] = true;
            }
        }
        let destination = leaves[0].0.clone();
        let view = CallView {
            id: 0,
            source_vc: c.in_id,
            destination_vc: hops[leaves[0].1].3,
            hops,
            parents,
            leaves,
            setup: Duration::ZERO,
            traffic: c.traffic,
            tag: c.tag.clone(),
            invocations: 0,
        };
        out.push(JournaledCall {
            view,
            source: source.to_string(),
            destination,
            bounds: QosBounds {
                clr: c.clr,
                ..QosBounds::default()
            },
        });
    }
    out
}
