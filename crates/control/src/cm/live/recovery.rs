//! The start-up audit of a restarted manager (issue 10, on paper 000 §II-C's manager):
//! [`recover`] reads the journal and what the switches hold, and carries out what the
//! audit's sans-IO decisions ([`crate::cm::core::audit::plan`], shared with the
//! simulated shell) say: take back the connections that survived whole, roll back the
//! others, and give back what no journaled connection explains.

use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::live::grpc::GrpcSwitch;

use crate::cm::core::audit::{Held, plan};
pub use crate::cm::core::audit::{Strays, whole_connections};
use crate::cm::core::{CallError, CmCore};
use crate::cm::journal::{CmJournal, JournaledCall};
use atmlab_core::clock::LiveClock;

fn unavailable(what: String) -> CallError {
    CallError {
        kind: ErrorKind::Unavailable,
        message: what,
    }
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
    // New calls get ids above every id the journal held, not only above the calls it
    // still holds (`CmJournal::next_id`).
    let next = journal.next_id().map_err(|e| unavailable(e.to_string()))?;
    core.skip_ids_below(next);
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
    use atmlab_fabric::switch::Atomicity;
    let calls = journal.load().map_err(|e| unavailable(e.to_string()))?;
    let mut held = Vec::with_capacity(switches.len());
    for (name, c) in switches {
        let connections = c
            .connections()
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot read {name}: {e}")))?;
        let reservations = c
            .reservations()
            .await
            .map_err(|e| unavailable(format!("the start-up audit cannot read {name}: {e}")))?;
        held.push(Held {
            switch: name.clone(),
            connections,
            reservations,
        });
    }
    let decided = plan(owner, &calls, &held, strays, take_back)?;
    let mut findings = decided.findings.clone();
    for repair in &decided.repairs {
        let Some((_, c)) = switches.iter().find(|(n, _)| *n == repair.switch) else {
            continue;
        };
        let results = c
            .execute(repair.commands.clone(), Atomicity::ContinueOnError)
            .await
            .map_err(|e| {
                unavailable(format!(
                    "the start-up audit cannot repair {}: {e}",
                    repair.switch
                ))
            })?;
        let failed = results.iter().filter(|r| r.is_err()).count();
        findings.extend(repair.findings(owner, failed));
    }
    journal
        .apply(&decided.adopted, &decided.forget)
        .map_err(|e| unavailable(e.to_string()))?;
    if findings.is_empty() {
        tracing::info!(
            connections = decided.taken,
            "start-up audit: the journal and the switches agree"
        );
    }
    for f in &findings {
        tracing::warn!("start-up audit: {f}");
    }
    findings.insert(0, decided.summary(calls.len()));
    Ok(Recovered {
        journal,
        findings,
        hosts: decided.hosts,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::NetworkView;
    use atmlab_core::ids::{PortId, VcId};
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use atmlab_fabric::switch::Connection;
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
