//! The start-up audit of a restarted manager (issue 10, on paper 000 §II-C's manager):
//! [`recover`] reconciles the journal with what the switches hold, takes back the
//! connections that survived whole, rolls back the others, and gives back what no
//! journaled connection explains.

use std::collections::HashMap;

use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::Command;

use crate::cm::core::{CallError, CmCore};
use crate::cm::journal::{CmJournal, JournaledCall};
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
/// is refused, naming them, unless `strays` says to release them: a
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
    let stray_count: usize = to_release.values().map(Vec::len).sum();
    if calls.is_empty() && stray_count > 0 && !strays.release {
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
                 that recorded them, give this manager its own --owner, or pass \
                 --release-strays to release them",
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
        .apply(&[], &forget)
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
