//! SetupSnc in the NML-CP's state machine (paper 001 §4.3): the two ways the NML-CP
//! sets up the runs of a route inside its children.
//!
//! - Sequential (Alcin's way): one child after another, each child's output identifier
//!   the next one's input.
//! - Parallel (the paper's "parallelizing the establishment of sub-connections"): the
//!   identifiers on the links between consecutive runs are reserved first, all at once,
//!   each by the child holding the link's output port; then every child is set up at
//!   once, its end identifiers known.
//!
//! Refused anywhere, what was set up is released and the link identifiers still only
//! reserved are given back before the refusal goes up.

use std::ops::Range;

use atmlab_core::ids::{PortId, VcId};

use super::super::super::{Counts, SetupMode};
use super::super::{
    LinkEnd, OpId, SetupSnc, SncError, SncReply, SncRequest, SncResult, SncSetUp, Traffic, absorb,
    set_up,
};
use super::NmlCore;
use super::types::{NmlSnc, Parallel, Part, Run, Sequential, Step, Then};

/// Run `k`'s SetupSnc between `in_id` and `out_id`.
fn run_request(
    req: &SetupSnc,
    traffic: Traffic,
    range: Range<usize>,
    ids: [Option<VcId>; 2],
) -> SncRequest {
    SncRequest::Setup(SetupSnc {
        hops: req.hops[range].to_vec(),
        in_id: ids[0],
        out_id: ids[1],
        traffic: Some(traffic),
        buffer_cells: req.buffer_cells,
        tag: req.tag.clone(),
    })
}

impl NmlCore {
    /// SetupSnc: the route split into the runs inside each child, every child connected.
    pub(super) fn setup(&mut self, op: OpId, req: SetupSnc) -> Result<(), SncError> {
        if req.hops.is_empty() {
            return Err(SncError::invalid("a subnetwork connection of no hops"));
        }
        let traffic = req
            .traffic
            .ok_or_else(|| SncError::invalid("no traffic descriptor"))?;
        let route: Vec<&str> = req.hops.iter().map(|h| &*h.switch).collect();
        let runs = self.subnetwork.runs(&route).map_err(SncError::invalid)?;
        for (c, _) in &runs {
            self.iface(*c)?;
        }
        match (self.mode, runs.len()) {
            // One run: nothing to do in parallel.
            (SetupMode::Sequential, _) | (_, 1) => {
                let s = Sequential {
                    in_id: req.in_id,
                    req,
                    traffic,
                    runs,
                    done: Vec::new(),
                };
                self.sequential_next(op, Counts::new(), s);
            }
            (SetupMode::Parallel, _) => self.reserve_links(op, req, traffic, runs),
        }
        Ok(())
    }

    fn sequential_next(&mut self, op: OpId, t: Counts, s: Sequential) {
        let k = s.done.len();
        let Some((c, range)) = s.runs.get(k).cloned() else {
            return self.assemble(op, t, s.traffic, s.done);
        };
        let out_id = if k == s.runs.len() - 1 {
            s.req.out_id
        } else {
            None
        };
        let request = run_request(&s.req, s.traffic, range, [s.in_id, out_id]);
        self.park(op, Step::Sequential(s), t, vec![(c, request)]);
    }

    pub(super) fn sequential_answered(
        &mut self,
        op: OpId,
        t: Counts,
        mut s: Sequential,
        answers: Vec<SncResult>,
    ) {
        let answer = answers
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(SncError::internal("SetupSnc unanswered")));
        match set_up(answer) {
            Ok(rep) => {
                s.in_id = rep.out_id;
                let c = s.runs[s.done.len()].0;
                s.done.push((c, rep));
                self.sequential_next(op, t, s);
            }
            Err(error) => {
                // Roll back what the children before this one set up, last first.
                let parts: Vec<Part> = s.done.iter().rev().map(|(c, r)| (*c, r.snc)).collect();
                let links = Vec::new();
                self.sweep(op, t, parts, Then::Rollback { error, links });
            }
        }
    }

    /// Parallel, first: the identifiers on the links between consecutive runs, all at
    /// once, each reserved on the output port of the run's last hop by the child holding
    /// it.
    fn reserve_links(&mut self, op: OpId, req: SetupSnc, traffic: Traffic, runs: Vec<Run>) {
        let links: Vec<(usize, String, PortId)> = runs[..runs.len() - 1]
            .iter()
            .map(|(c, range)| {
                let h = &req.hops[range.end - 1];
                (*c, h.switch.to_string(), PortId(h.out_port))
            })
            .collect();
        let calls = links
            .iter()
            .map(|(c, switch, port)| {
                let (switch, port) = (switch.clone(), *port);
                (*c, SncRequest::ReserveLink(LinkEnd { switch, port }))
            })
            .collect();
        let p = Parallel {
            ids: vec![None; links.len()],
            req,
            traffic,
            runs,
            links,
        };
        self.park(op, Step::ReserveLinks(p), Counts::new(), calls);
    }

    pub(super) fn links_answered(
        &mut self,
        op: OpId,
        mut t: Counts,
        mut p: Parallel,
        answers: Vec<SncResult>,
    ) {
        let mut first_err = None;
        for (k, a) in answers.into_iter().enumerate() {
            match a {
                Ok(rep) => {
                    absorb(&mut t, &rep);
                    if let SncReply::LinkReserved { id, .. } = rep {
                        p.ids[k] = id;
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if p.ids.iter().any(Option::is_none) {
            let held = p.held(0..p.links.len());
            let error = first_err.unwrap_or_else(|| {
                SncError::internal("ReserveLink answered without an identifier")
            });
            return self.give_back_links(op, t, held, error);
        }
        // Then every child at once, its end identifiers known.
        let last = p.runs.len() - 1;
        let calls = p
            .runs
            .iter()
            .enumerate()
            .map(|(k, (c, range))| {
                let in_id = if k == 0 { p.req.in_id } else { p.ids[k - 1] };
                let out_id = if k == last { p.req.out_id } else { p.ids[k] };
                let request = run_request(&p.req, p.traffic, range.clone(), [in_id, out_id]);
                (*c, request)
            })
            .collect();
        self.park(op, Step::SetupRuns(p), t, calls);
    }

    pub(super) fn runs_answered(
        &mut self,
        op: OpId,
        mut t: Counts,
        p: Parallel,
        answers: Vec<SncResult>,
    ) {
        let mut done = Vec::new();
        let mut failed = Vec::new();
        let mut first_err = None;
        for (k, a) in answers.into_iter().enumerate() {
            match set_up(a) {
                Ok(rep) => done.push((p.runs[k].0, rep)),
                Err(e) => {
                    failed.push(k);
                    first_err.get_or_insert(e);
                }
            }
        }
        let Some(error) = first_err else {
            return self.assemble(op, t, p.traffic, done);
        };
        let parts: Vec<Part> = done.iter().map(|(c, r)| (*c, r.snc)).collect();
        for (_, r) in &done {
            super::super::add(&mut t, &r.invocations);
        }
        // A link identifier is carried (and freed on release) by the run ending at it;
        // where that run failed, it is still only reserved: give it back.
        let links = p.held(failed.into_iter());
        self.sweep(op, t, parts, Then::Rollback { error, links });
    }

    /// The reply of a setup whose children all answered, in route order.
    fn assemble(
        &mut self,
        op: OpId,
        mut t: Counts,
        traffic: Traffic,
        parts: Vec<(usize, SncSetUp)>,
    ) {
        let in_id = parts.first().and_then(|p| p.1.in_id);
        let out_id = parts.last().and_then(|p| p.1.out_id);
        let mut hops = Vec::new();
        let mut record = Vec::new();
        let mut lens = Vec::new();
        for (c, r) in parts {
            super::super::add(&mut t, &r.invocations);
            lens.push(u32::try_from(r.hops.len()).unwrap_or(u32::MAX));
            hops.extend(r.hops);
            record.push((c, r.snc));
        }
        let snc = self.next_snc;
        self.next_snc += 1;
        self.sncs.insert(
            snc,
            NmlSnc {
                parts: record,
                lens,
                traffic,
            },
        );
        let reply = SncSetUp {
            snc,
            in_id,
            out_id,
            hops,
            invocations: t,
        };
        self.reply(op, Ok(SncReply::SetUp(reply)));
    }
}
