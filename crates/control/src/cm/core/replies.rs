//! Switch answers and time-outs (paper 000 §II-C: xbind's oneway calls "do not
//! guarantee delivery"): [`CmCore::handle_reply`] and what an answer leads to (the call
//! advanced, failed, rolled back once every answer is in, or, for an answer nobody waits
//! for, what it created undone), and [`CmCore::handle_timeout`], which flushes the
//! aggregators, re-sends unanswered commands with the same request id and gives up on
//! them after `max_retries`.

use atmlab_core::ids::PortId;
use atmlab_core::time::Instant;
use atmlab_fabric::error::{ErrorKind, FabricError};
use atmlab_fabric::switch::{Command, Release, Reply, Unreserve};

use super::{CallError, CmCore, CmKind, LINGER_PERIOD, Phase, Purpose, nv_done};

impl CmCore {
    fn rollback(&mut self, now: Instant, id: u64) {
        self.stats.rollbacks += 1;
        self.calls.get_mut(&id).expect("call").phase = Phase::RollingBack;
        self.return_free_ids(now, id);
        self.release_hops(now, id);
        self.finish_if_idle(now, id);
    }

    /// A switch's answer to request `request`. Answers to unknown ids (a duplicate after
    /// a retry) are ignored.
    pub fn handle_reply(&mut self, now: Instant, request: u64, result: Result<Reply, FabricError>) {
        let Some(out) = self.outstanding.remove(&request) else {
            // A commit given up for lost, answered after all: undo it, keeping the
            // identifier reserved (the rolled-back call returned it to the cache).
            if let Some((sw, port, _)) = self.orphans.remove(&request) {
                self.undo_late(now, sw, port, result);
            }
            return;
        };
        if let Some(sent) = out.sent {
            self.stats.round_trip_ps += now.saturating_duration_since(sent).as_picos();
            self.stats.answered += 1;
        }
        let (sw, port) = (out.switch, out.port);
        let Some(id) = out.call else {
            // A fill or a give-back with no call waiting.
            match (out.purpose, result) {
                (Purpose::Fill, Ok(Reply::Reserved(ids))) => {
                    let c = self.caches.entry((sw, port)).or_default();
                    c.put(ids);
                    c.filling = false;
                }
                (Purpose::Fill, _) => self.caches.entry((sw, port)).or_default().filling = false,
                (_, Err(e)) if e.kind() == ErrorKind::Unavailable => {
                    // Not answered: the switch may be down. Try again later rather than
                    // leave the identifiers or the cross-connect behind.
                    tracing::warn!(switch = %self.switches[sw], port, error = %e, "a give-back went unanswered; it will be re-sent");
                    self.lingering.push((sw, port, out.command));
                    self.linger_at
                        .get_or_insert(now.saturating_add(LINGER_PERIOD));
                }
                (_, Err(e)) => {
                    tracing::warn!(switch = %self.switches[sw], port, error = %e, command = ?out.command, "a give-back failed");
                }
                _ => {}
            }
            return;
        };
        let Some(call) = self.calls.get_mut(&id) else {
            // The call is gone (failed and rolled back): whatever this answer created
            // belongs to nobody now, so undo it.
            self.undo_late(now, sw, port, result);
            return;
        };
        call.waiting = call.waiting.saturating_sub(1);
        if let Purpose::Commit(hop) = out.purpose {
            // The commit carrying the hop's output slots is answered, either way: their
            // identifiers are no longer "in use" in the paper's sense (§IV-A).
            for k in 0..call.tree.hop(hop).outs.len() {
                let j = call.tree.hop(hop).outs[k];
                let key = (call.slot_sw[j], call.tree.slot(j).port);
                nv_done(&mut self.caches, call, j, key, now);
            }
        }
        match (out.purpose, result) {
            (Purpose::Slot(j), Ok(Reply::Reserved(mut ids))) => {
                if ids.is_empty() {
                    self.fail(now, id, FabricError::Invalid("an empty reservation"));
                    return;
                }
                let first = ids.remove(0);
                call.ids[j] = Some(first);
                if self.config.kind == CmKind::Xbind {
                    let c = self.caches.entry((sw, port)).or_default();
                    c.put(ids);
                    c.filling = false;
                }
                self.advance(now, id);
            }
            (
                Purpose::Commit(hop),
                Ok(Reply::Committed {
                    connection,
                    replenished,
                }),
            ) => {
                call.conns[hop] = Some(connection);
                for &j in &call.tree.hop(hop).outs {
                    call.on_switch[j] = true;
                }
                if self.config.kind == CmKind::Xbind && !replenished.is_empty() {
                    let c = self.caches.entry((sw, port)).or_default();
                    c.put(replenished);
                    c.filling = false;
                } else if self.config.kind == CmKind::Xbind {
                    // A commit that asked for a replenishment and got none (the port
                    // ran out) ends the fill too.
                    if let Command::Commit(c) = &out.command
                        && c.replenish > 0
                    {
                        self.caches.entry((sw, port)).or_default().filling = false;
                    }
                }
                self.advance(now, id);
            }
            (Purpose::Release(hop), Ok(_)) => {
                call.conns[hop] = None;
                let xbind = self.config.kind == CmKind::Xbind;
                // Every output identifier the hop carried: xbind released with
                // keep_reserved, so they are ours again (back to the cache); sequential
                // released them to the pool.
                let mut back: super::PerCall<(usize, u16, atmlab_core::ids::VcId)> =
                    super::PerCall::new();
                for j in call.hop_slots(hop) {
                    call.on_switch[j] = false;
                    if let Some(vc) = call.ids[j].take()
                        && xbind
                    {
                        back.push((call.slot_sw[j], call.tree.slot(j).port, vc));
                    }
                }
                for (s, p, vc) in back {
                    self.return_id(now, s, p, vc);
                }
                if self.config.kind == CmKind::Sequential {
                    self.release_hops(now, id);
                }
                if self.calls[&id].waiting == 0 {
                    self.return_free_ids(now, id);
                }
                self.finish_if_idle(now, id);
            }
            (Purpose::Release(hop), Err(e)) => {
                if e.kind() == ErrorKind::Unavailable
                    && let Some(conn) = call.conns[hop]
                {
                    // Unanswered: the switch may be down and come back with the hop
                    // (from its journal). The call ends for its caller; the release
                    // lingers until a switch answers it.
                    self.lingering.push((
                        sw,
                        port,
                        Command::Release(Release {
                            connection: conn,
                            keep_reserved: false,
                        }),
                    ));
                    if self.config.kind == CmKind::Xbind {
                        // The unanswered release may have been done after all, keeping
                        // the hop's output identifiers reserved for us (an answer lost,
                        // or one that comes after we gave up): give those back too,
                        // after the release (which frees them if it was not done).
                        for j in call.hop_slots(hop) {
                            if let Some(vc) = call.ids[j] {
                                let p = call.tree.slot(j).port;
                                self.lingering.push((
                                    sw,
                                    p,
                                    Command::Unreserve(Unreserve {
                                        port: PortId(p),
                                        ids: vec![vc],
                                        owner: self.owner.clone(),
                                    }),
                                ));
                            }
                        }
                    }
                    self.linger_at
                        .get_or_insert(now.saturating_add(LINGER_PERIOD));
                }
                // Otherwise the switch no longer has it (restarted without a journal, or
                // an audit removed it): nothing to return for this hop.
                tracing::warn!(call = id, hop, error = %e, "release failed; the hop is gone");
                call.conns[hop] = None;
                for j in call.hop_slots(hop) {
                    call.on_switch[j] = false;
                    call.ids[j] = None;
                }
                if self.config.kind == CmKind::Sequential {
                    self.release_hops(now, id);
                }
                if self.calls[&id].waiting == 0 {
                    self.return_free_ids(now, id);
                }
                self.finish_if_idle(now, id);
            }
            (Purpose::Change(hop), result) => {
                self.change_answer(now, id, hop, &out.command, result);
            }
            (_, Err(e)) => self.fail(now, id, e),
            (_, Ok(_)) => self.fail(now, id, FabricError::Invalid("an unexpected reply")),
        }
    }

    fn fail(&mut self, now: Instant, id: u64, e: FabricError) {
        let call = self.calls.get_mut(&id).expect("call");
        if call.error.is_none() {
            call.error = Some(CallError {
                kind: e.kind(),
                message: e.to_string(),
            });
        }
        if call.phase == Phase::Established {
            // A change's step failed: the change ends (undone) once every answer is in.
            if call.waiting == 0 {
                self.change_step(now, id);
            }
            return;
        }
        if call.phase == Phase::RollingBack {
            // Another failure of a call already rolling back: when it was the last
            // answer awaited, the rollback proper (identifiers back, committed hops
            // released) happens now.
            if call.waiting == 0 {
                self.rollback_after_answers(now, id);
            }
            return;
        }
        match self.config.kind {
            // xbind: wait for the other hops' answers, then roll back everything.
            CmKind::Xbind if call.waiting > 0 => call.phase = Phase::RollingBack,
            _ => self.rollback(now, id),
        }
    }

    /// Moves a call on after an answer.
    fn advance(&mut self, now: Instant, id: u64) {
        let call = &self.calls[&id];
        match (self.config.kind, call.phase) {
            (_, Phase::RollingBack) if call.waiting == 0 => self.rollback_after_answers(now, id),
            (_, Phase::RollingBack) => {}
            (_, Phase::Established) if call.waiting == 0 => self.change_step(now, id),
            (CmKind::Xbind, Phase::Setup) if call.waiting == 0 => self.xbind_commit(now, id),
            (CmKind::Xbind, Phase::Committing) if call.waiting == 0 => self.establish(now, id),
            (CmKind::Sequential, Phase::Setup) => self.seq_step(now, id),
            _ => {}
        }
    }

    fn rollback_after_answers(&mut self, now: Instant, id: u64) {
        self.stats.rollbacks += 1;
        self.return_free_ids(now, id);
        self.release_hops(now, id);
        self.finish_if_idle(now, id);
    }

    /// Undoes what an answer nobody waits for created, so that nothing leaks: reserved
    /// identifiers go to the cache (xbind) or back to the switch (sequential); a
    /// connection is released, its identifier kept reserved where the cache has it.
    pub(super) fn undo_late(
        &mut self,
        now: Instant,
        sw: usize,
        port: u16,
        result: Result<Reply, FabricError>,
    ) {
        match result {
            Ok(Reply::Reserved(ids)) if !ids.is_empty() => match self.config.kind {
                CmKind::Xbind => {
                    for id in ids {
                        self.return_id(now, sw, port, id);
                    }
                }
                CmKind::Sequential => {
                    let cmd = Command::Unreserve(Unreserve {
                        port: PortId(port),
                        ids,
                        owner: self.owner.clone(),
                    });
                    self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                }
            },
            Ok(Reply::Committed {
                connection,
                replenished,
            }) => {
                for id in replenished {
                    self.return_id(now, sw, port, id);
                }
                let cmd = Command::Release(Release {
                    connection,
                    keep_reserved: self.config.kind == CmKind::Xbind,
                });
                self.send(now, None, Purpose::Unreserve, sw, port, cmd);
            }
            _ => {}
        }
    }

    /// Flushes aggregators whose time-out expired and re-sends (or fails) commands not
    /// answered in time. Drain [`CmCore::poll_transmit`] afterwards.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.lingering.is_empty() {
            match self.linger_at {
                None => self.linger_at = now.checked_add(LINGER_PERIOD),
                Some(t) if t <= now => {
                    self.linger_at = now.checked_add(LINGER_PERIOD);
                    for (sw, port, cmd) in std::mem::take(&mut self.lingering) {
                        self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                    }
                }
                Some(_) => {}
            }
        }
        if self.estimator.as_mut().is_some_and(|e| e.advance(now)) {
            self.adapt();
        }
        for sw in self.flushes_due(now) {
            self.ready.push_back(sw);
        }
        // The deadlines passed, earliest first and by request id among equal ones.
        let due = self.timeouts.partition_point(|&(d, _)| d <= now);
        let mut passed: Vec<(Instant, u64)> = self.timeouts.drain(..due).collect();
        passed.sort_unstable();
        let expired: Vec<u64> = passed
            .into_iter()
            .filter(|&(d, req)| {
                self.outstanding
                    .get(&req)
                    .is_some_and(|o| o.deadline == Some(d))
            })
            .map(|(_, req)| req)
            .collect();
        for req in expired {
            let o = self.outstanding.get_mut(&req).expect("listed");
            if o.retries < self.config.max_retries {
                o.retries += 1;
                o.deadline = None;
                let (sw, cmd) = (o.switch, o.command.clone());
                self.stats.retries += 1;
                o.queued = now;
                // The same request id: the switch answers a repeat once.
                let was_empty = self.aggregators[sw].is_empty();
                self.aggregators[sw].push(now, req, cmd);
                if was_empty {
                    self.note_flush(sw);
                }
                self.ready.push_back(sw);
            } else {
                let sw = o.switch;
                // Its outcome is unknown: if the switch answers after all, the answer is
                // undone (a late reservation returns, a late commit is released); if
                // every answer is lost, a sweep finds the commit's connection.
                self.orphans.insert(req, (sw, o.port, o.command.clone()));
                self.handle_reply(
                    now,
                    req,
                    Err(FabricError::Unavailable(format!(
                        "switch {} did not answer request {req} after {} tries",
                        self.switches[sw],
                        self.config.max_retries + 1
                    ))),
                );
            }
        }
    }
}
