//! A restarted LNC takes its calls back (issue 24, item 8: the TINA manager journals its
//! connections and recovers them as the sequential and xbind managers do; paper 001
//! §1.2.1's LNC holds the connections of its layer network). A call is journaled as the
//! other managers journal theirs ([`CallView`]: the tree, one entry per hop and branch,
//! with switch connections and identifiers); taken back, its tree is rebuilt the way its
//! setup grew it (the first leaf's route as one segment, each further leaf grafted), and
//! each segment is handed to the hierarchy below as an [`AdoptSnc`], which the NML-CPs
//! split into runs and the EML-CPs record, so that a later release, change or DropLeaf
//! invokes the performers exactly as for a call this LNC set up.

use atmlab_core::ids::PortId;
use atmlab_core::time::Duration;
use atmlab_core::traffic::TrafficDescriptor;

use super::super::{AdoptSnc, BranchInfo, HopInfo, HopSpec, SncError};
use super::LncCore;
use super::types::{Call, Contract, Segment};
use crate::cm::core::CallView;
use crate::cm::tree::Tree;

impl LncCore {
    /// Call `id` as the journal keeps it: its tree with switch connections and
    /// identifiers, its contract's descriptor (the rates as the caller gave them) and
    /// label (`None` while a change has it, or if there is no such call).
    pub fn view(&self, id: u64) -> Option<CallView> {
        let c = self.calls.get(&id)?.call.as_ref()?;
        let tr = c.contract.traffic;
        let conn = |h: usize| c.conns.get(h).copied().unwrap_or(0);
        let traffic = TrafficDescriptor {
            class: tr.class,
            pcr: atmlab_core::units::CellRate(tr.pcr),
            scr: atmlab_core::units::CellRate(tr.scr),
            mbs: tr.mbs,
            cdvt_ps: 0,
        };
        Some(CallView {
            setup: Duration::from_micros(c.setup_us),
            tag: c.tag.clone(),
            invocations: u32::try_from(c.invocations).unwrap_or(u32::MAX),
            ..CallView::of_tree(id, &c.tree, conn, &c.ids, traffic)
        })
    }

    /// New calls get ids from `next` up, at least (a restarted manager: the ids its
    /// journal ever held are not handed out again).
    pub fn skip_ids_below(&mut self, next: u64) {
        self.next_call = self.next_call.max(next);
    }

    /// Takes back call `view.id` from `source` with `contract`, as the switches hold it:
    /// its tree rebuilt as its setup grew it, each segment taken back below by `root`
    /// (which answers the root NML-CP's SNC id). Refused, nothing is kept here (what
    /// `root` recorded below for the segments before is the caller's to forget).
    pub fn adopt(
        &mut self,
        view: &CallView,
        source: &str,
        contract: Contract,
        root: &mut dyn FnMut(AdoptSnc) -> Result<u64, SncError>,
    ) -> Result<(), SncError> {
        if self.calls.contains_key(&view.id) {
            return Err(SncError::invalid(format!(
                "connection {} is held already",
                view.id
            )));
        }
        let bad = |what: &str| SncError::invalid(format!("connection {}: {what}", view.id));
        let chains = view.chains().ok_or_else(|| bad("its tree is malformed"))?;
        let routes: Vec<(String, Vec<HopSpec>)> = chains
            .iter()
            .map(|(l, c)| {
                (
                    l.clone(),
                    c.iter().map(|&e| view.hops[e].0.clone()).collect(),
                )
            })
            .collect();
        let ((first, route), rest) = routes.split_first().ok_or_else(|| bad("no leaf"))?;
        // The tree grown as the setup grew it: each graft's new hops are one segment.
        let mut tree = Tree::path(first, route).map_err(|e| bad(&e.to_string()))?;
        let mut segments: Vec<Vec<usize>> = vec![(0..tree.hops().len()).collect()];
        for (leaf, route) in rest {
            let g = tree.graft(leaf, route).map_err(|e| bad(&e.to_string()))?;
            if !g.new_hops.is_empty() {
                segments.push(g.new_hops);
            }
        }
        let mut ids = vec![None; tree.slots().len()];
        let mut conns = vec![0; tree.hops().len()];
        for ((_, chain), (_, route)) in chains.iter().zip(&routes) {
            let walk = tree
                .walk(route)
                .ok_or_else(|| bad("a route left the tree"))?;
            for (&e, (h, s)) in chain.iter().zip(walk) {
                let (_, conn, in_id, out_id) = &view.hops[e];
                conns[h] = *conn;
                ids[tree.hop(h).in_slot] = Some(*in_id);
                ids[s] = Some(*out_id);
            }
        }
        let mut held = Vec::with_capacity(segments.len());
        for (k, hops) in segments.into_iter().enumerate() {
            let infos = hops
                .iter()
                .map(|&h| {
                    let hop = tree.hop(h);
                    let out = hop.outs[0];
                    let (port, id) = (PortId(tree.slot(out).port), ids[out]);
                    HopInfo {
                        switch: hop.switch.to_string(),
                        connection: conns[h],
                        in_port: PortId(hop.in_port),
                        in_id: ids[hop.in_slot],
                        out_port: port,
                        out_id: id,
                        branches: vec![BranchInfo { port, id }],
                    }
                })
                .collect();
            let snc = root(AdoptSnc {
                hops: infos,
                holds_source: k == 0,
                traffic: contract.traffic,
            })?;
            held.push(Segment { snc, hops });
        }
        let call = Call {
            id: view.id,
            source: source.to_string(),
            tree,
            ids,
            conns,
            segments: held,
            contract,
            tag: view.tag.clone(),
            setup_us: view.setup.as_nanos() / 1_000,
            invocations: u64::from(view.invocations),
        };
        self.put(call);
        self.next_call = self.next_call.max(view.id + 1);
        Ok(())
    }
}
