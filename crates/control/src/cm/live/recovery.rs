//! The start-up audit of a restarted manager (issue 10, on paper 000 §II-C's manager):
//! [`recover`] reconciles the journal with what the switches hold, takes back the
//! connections that survived whole, rolls back the others, and gives back what no
//! journaled connection explains.

use std::collections::HashMap;

use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::Command;

use atmlab_core::ids::VcId;
use atmlab_core::time::Duration;
use atmlab_fabric::switch::Connection;

use crate::cm::core::{CallError, CallView, CmCore, HopSpec};
use crate::cm::journal::{CmJournal, JournaledCall, QosBounds};
use crate::route::NetworkView;
use atmlab_core::clock::LiveClock;

fn unavailable(what: String) -> CallError {
    CallError {
        kind: ErrorKind::Unavailable,
        message: what,
    }
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

/// The start-up audit of a restarted manager: every journaled connection whose hops all
/// exist on their switches, as recorded, is taken back into `core`; one with a hop
/// missing is rolled back (its other hops released) and forgotten; cross-connects of
/// this manager's owner that no journaled connection explains (half-made setups) are
/// released; identifiers it had reserved (its caches, lost with the process) are given
/// back, except each taken-back connection's source identifier. Returns what it found
/// and did, one line each.
///
/// A journal with no connections while the switches hold cross-connects of this owner
/// is refused, naming them, unless `strays` says to release them or to adopt them: a
/// fresh, emptied or mistyped journal would otherwise release every connection of a
/// running network (issue 24).
pub async fn recover(
    core: &mut CmCore,
    journal: CmJournal,
    switches: &[(String, GrpcSwitch)],
    strays: &Strays,
) -> Result<Recovered, CallError> {
    let owner = core.config().owner.clone();
    let now = LiveClock::start().now();
    let mut take_back = |c: &JournaledCall| core.adopt(now, &c.view).map_err(str::to_string);
    audit(&owner, journal, switches, strays, &mut take_back).await
}

/// [`recover`] for any manager: `take_back` hands it one connection to hold again (a
/// journaled one, or one adopted from the switches), or says why it cannot.
pub async fn audit(
    owner: &str,
    mut journal: CmJournal,
    switches: &[(String, GrpcSwitch)],
    strays: &Strays,
    take_back: &mut dyn FnMut(&JournaledCall) -> Result<(), String>,
) -> Result<Recovered, CallError> {
    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::switch::{Atomicity, Release, Unreserve};
    let owner = owner.to_string();
    let calls = journal.load().map_err(|e| unavailable(e.to_string()))?;
    let mut held = HashMap::new();
    for (name, c) in switches {
        let conns = c
            .connections()
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot read {name}: {e}")))?;
        let res = c
            .reservations()
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot read {name}: {e}")))?;
        held.insert(name.clone(), (conns, res));
    }
    let mut findings = Vec::new();
    let mut kept: std::collections::HashSet<(String, u64)> = Default::default();
    let mut sources: std::collections::HashSet<(String, u16, atmlab_core::ids::VcId)> =
        Default::default();
    let mut to_release: HashMap<String, Vec<u64>> = HashMap::new();
    let mut forget = Vec::new();
    let mut hosts = Vec::new();
    for jc in &calls {
        let v = &jc.view;
        let present: Vec<bool> = v
            .hops
            .iter()
            .map(|(h, conn, i, o)| {
                held.get(&*h.switch).is_some_and(|(conns, _)| {
                    conns.iter().any(|x| {
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
                findings.push(format!("connection {}: not taken back: {e}", v.id));
                forget.push(v.id);
                continue;
            }
            for (h, conn, ..) in &v.hops {
                kept.insert((h.switch.to_string(), *conn));
            }
            hosts.push((v.id, jc.source.clone(), jc.destination.clone()));
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
            findings.push(format!(
                "connection {} ({} -> {}): hops missing on {}; rolled back",
                v.id,
                jc.source,
                jc.destination,
                missing.join(", ")
            ));
            forget.push(v.id);
            // Its surviving hops are released below, as cross-connects nobody explains.
        }
    }
    for (name, (conns, _)) in &held {
        for x in conns {
            if x.owner == owner && !kept.contains(&(name.clone(), x.id)) {
                to_release.entry(name.clone()).or_default().push(x.id);
            }
        }
    }
    // --adopt: the whole connections among the strays are taken back and journaled;
    // only the fragments stay to be released.
    let mut adopted = Vec::new();
    if let Some(net) = &strays.adopt {
        let loose: Vec<(String, Connection)> = held
            .iter()
            .flat_map(|(name, (conns, _))| {
                conns
                    .iter()
                    .filter(|x| x.owner == owner && !kept.contains(&(name.clone(), x.id)))
                    .map(move |x| (name.clone(), x.clone()))
            })
            .collect();
        let mut next = calls.iter().map(|c| c.view.id).max().unwrap_or(0) + 1;
        for mut c in whole_connections(&loose, net) {
            c.view.id = next;
            if let Err(e) = take_back(&c) {
                findings.push(format!(
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
            hosts.push((v.id, c.source.clone(), c.destination.clone()));
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
        findings.push(format!(
            "adopted {} connections ({cross} cross-connects of {owner}) from the switches",
            adopted.len()
        ));
        for c in &adopted {
            let mut on: Vec<&str> = c.view.hops.iter().map(|(h, ..)| &*h.switch).collect();
            on.dedup();
            findings.push(format!(
                "connection {} ({} -> {}): adopted from {}",
                c.view.id,
                c.source,
                c.view.leaf_names().join(", "),
                on.join(", ")
            ));
        }
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
    for (name, c) in switches {
        let (_, res) = &held[name];
        let cmds: Vec<Command> = to_release
            .get(name)
            .into_iter()
            .flatten()
            .map(|&id| {
                Command::Release(Release {
                    connection: id,
                    keep_reserved: false,
                })
            })
            .collect();
        let released = cmds.len();
        let mut give_back: std::collections::BTreeMap<u16, Vec<atmlab_core::ids::VcId>> =
            Default::default();
        for r in res {
            if r.owner == owner && !sources.contains(&(name.clone(), r.port.0, r.id)) {
                give_back.entry(r.port.0).or_default().push(r.id);
            }
        }
        let mut all = cmds;
        let returned: usize = give_back.values().map(Vec::len).sum();
        for (port, ids) in give_back {
            all.push(Command::Unreserve(Unreserve {
                port: atmlab_core::ids::PortId(port),
                ids,
                owner: owner.as_str().into(),
            }));
        }
        if all.is_empty() {
            continue;
        }
        let results = c
            .execute(all, Atomicity::ContinueOnError)
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot repair {name}: {e}")))?;
        let failed = results.iter().filter(|r| r.is_err()).count();
        if released > 0 {
            findings.push(format!(
                "{name}: {released} cross-connects of {owner} not in the journal released"
            ));
        }
        if returned > 0 {
            findings.push(format!(
                "{name}: {returned} identifiers reserved by {owner} given back"
            ));
        }
        if failed > 0 {
            findings.push(format!("{name}: {failed} of those repairs failed"));
        }
    }
    journal
        .apply(&adopted, &forget)
        .map_err(|e| unavailable(e.to_string()))?;
    let taken = calls.len() - forget.len();
    if findings.is_empty() {
        tracing::info!(
            connections = taken,
            "start-up audit: the journal and the switches agree"
        );
    }
    for f in &findings {
        tracing::warn!("start-up audit: {f}");
    }
    findings.insert(
        0,
        format!(
            "journal: {} connections, {taken} taken back, {} rolled back",
            calls.len(),
            forget.len()
        ),
    );
    Ok(Recovered {
        journal,
        findings,
        hosts,
    })
}

/// What [`recover`] leaves: the journal, its findings, and the end points of each
/// connection taken back.
#[derive(Debug)]
pub struct Recovered {
    /// The journal, reconciled.
    pub journal: CmJournal,
    /// One line per finding; the first sums up.
    pub findings: Vec<String>,
    /// (call id, source, destination) of each connection taken back.
    pub hosts: Vec<(u64, String, String)>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::ids::PortId;
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use atmlab_fabric::switch::{Branch, ConnectionKind};

    fn xc(sw: &str, id: u64, in_port: u16, vci: u16, outs: &[(u16, u16)]) -> (String, Connection) {
        (
            sw.to_string(),
            Connection {
                id,
                kind: ConnectionKind::Vc,
                in_port: PortId(in_port),
                in_id: VcId::new(0, vci),
                branches: outs
                    .iter()
                    .map(|&(p, v)| Branch {
                        port: PortId(p),
                        id: VcId::new(0, v),
                    })
                    .collect(),
                traffic: TrafficDescriptor::cbr(CellRate(10.0)),
                clr: 1e-6,
                admitted: 10.0,
                buffer_cells: 0,
                owner: "cm".into(),
                tag: "t".into(),
                cells: 0,
                cells_discarded: 0,
            },
        )
    }

    /// tree4: a behind s1:0; s1:1 -- s2:0, s1:2 -- s3:0; b at s2:1, d at s3:1.
    fn tree4() -> NetworkView {
        use crate::route::PortState;
        let ports = |peers: &[(u16, Option<(&str, u16)>)]| -> Vec<PortState> {
            peers
                .iter()
                .map(|&(port, peer)| PortState {
                    port,
                    capacity: 1e5,
                    allocated: 0.0,
                    peer: peer.map(|(s, p)| (s.to_string(), p)),
                })
                .collect()
        };
        NetworkView {
            switches: vec![
                (
                    "s1".into(),
                    ports(&[(0, None), (1, Some(("s2", 0))), (2, Some(("s3", 0)))]),
                ),
                ("s2".into(), ports(&[(0, Some(("s1", 1))), (1, None)])),
                ("s3".into(), ports(&[(0, Some(("s1", 2))), (1, None)])),
            ],
            hosts: vec![
                ("a".into(), "s1".into(), 0),
                ("b".into(), "s2".into(), 1),
                ("d".into(), "s3".into(), 1),
            ],
        }
    }

    /// A tree is followed over the links, branch by branch, into one connection with its
    /// fork; a chain that ends at a link with nothing on the far side is a fragment; the
    /// hops of a connection are no other connection's.
    #[test]
    fn whole_connections_follow_links_and_leave_fragments() {
        let loose = vec![
            xc("s1", 7, 0, 40, &[(1, 41), (2, 42)]),
            xc("s2", 3, 0, 41, &[(1, 43)]),
            xc("s3", 9, 0, 42, &[(1, 44)]),
            // a -> s1 -> s2 on VC 51, which s2 does not carry on: a fragment.
            xc("s1", 8, 0, 50, &[(1, 51)]),
            // Entering s2 from s1 on a VC nothing upstream uses: no root, a fragment.
            xc("s2", 4, 0, 60, &[(1, 61)]),
        ];
        let got = whole_connections(&loose, &tree4());
        assert_eq!(got.len(), 1, "{got:?}");
        let c = &got[0];
        assert_eq!((c.source.as_str(), c.destination.as_str()), ("a", "b"));
        assert_eq!(c.view.leaf_names(), vec!["b", "d"]);
        let on: Vec<(&str, u64, u16)> = c
            .view
            .hops
            .iter()
            .map(|(h, conn, ..)| (&*h.switch, *conn, h.out_port))
            .collect();
        assert_eq!(
            on,
            vec![("s1", 7, 1), ("s1", 7, 2), ("s2", 3, 1), ("s3", 9, 1)]
        );
        assert_eq!(c.view.parents, vec![None, None, Some(0), Some(1)]);
        assert_eq!(c.view.source_vc, VcId::new(0, 40));
        assert_eq!(c.view.destination_vc, VcId::new(0, 43));
        assert_eq!(c.bounds.clr, 1e-6);
        // Its chains rebuild the tree the managers adopt.
        let chains = c.view.chains().unwrap();
        assert_eq!(chains[1], ("d".to_string(), vec![1, 3]));
        // Without the link s1:2 -- s3:0 the tree is not whole: nothing is adopted.
        let mut cut = tree4();
        cut.switches[0].1[2].peer = None;
        cut.switches[2].1[0].peer = None;
        assert!(whole_connections(&loose, &cut).is_empty());
    }
}
