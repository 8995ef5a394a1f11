//! Releasing a call (paper 000 §II-C, Fig. 2's release walk for the sequential manager):
//! [`CmCore::delete`], the release of a call's committed hops (one at a time,
//! sequential; all at once, xbind, keeping the identifiers reserved for the cache), the
//! return of identifiers to the caches or the switches, and the end of a call once
//! nothing it sent is awaited.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::Instant;
use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::switch::{Command, Release, Unreserve};

use super::{CallError, CallEvent, CmCore, CmKind, Phase, Purpose, nv_done};

impl CmCore {
    /// Returns a call's identifiers that are merely reserved (not carried by a switch
    /// connection) to the cache, or, sequential, to the switch.
    pub(super) fn return_free_ids(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        let give_back: super::PerCall<usize> = (0..call.ids.len())
            .filter(|&j| !call.on_switch[j] && call.ids[j].is_some())
            .collect();
        self.return_slots(now, id, &give_back);
    }

    /// Returns these slots' identifiers (reserved, not on a switch connection).
    pub(super) fn return_slots(&mut self, now: Instant, id: u64, slots: &[usize]) {
        for &j in slots {
            let (sw, port) = Self::slot_port(&self.calls[&id], j);
            let vc = self.calls.get_mut(&id).expect("call").ids[j]
                .take()
                .expect("some");
            self.return_id(now, sw, port, vc);
        }
    }

    pub(super) fn return_id(&mut self, now: Instant, sw: usize, port: u16, vc: VcId) {
        match self.config.kind {
            CmKind::Xbind => {
                let max = self.config.cache_max as usize;
                let cache = self.caches.entry((sw, port)).or_default();
                cache.put([vc]);
                let extra = cache.trim(max);
                if !extra.is_empty() {
                    let cmd = Command::Unreserve(Unreserve {
                        port: PortId(port),
                        ids: extra,
                        owner: self.owner.clone(),
                    });
                    self.send(now, None, Purpose::Unreserve, sw, port, cmd);
                }
            }
            CmKind::Sequential => {
                let cmd = Command::Unreserve(Unreserve {
                    port: PortId(port),
                    ids: vec![vc],
                    owner: self.owner.clone(),
                });
                self.send(now, None, Purpose::Unreserve, sw, port, cmd);
            }
        }
    }

    /// Releases a call's committed hops (rollback or delete).
    pub(super) fn release_hops(&mut self, now: Instant, id: u64) {
        let keep = self.config.kind == CmKind::Xbind;
        let n = self.calls[&id].conns.len();
        for hop in 0..n {
            let Some(conn) = self.calls[&id].conns[hop] else {
                continue;
            };
            let (sw, port) = (
                self.calls[&id].hop_sw[hop],
                self.calls[&id].tree.hop(hop).in_port,
            );
            let cmd = Command::Release(Release {
                connection: conn,
                keep_reserved: keep,
            });
            self.send(now, Some(id), Purpose::Release(hop), sw, port, cmd);
            self.calls.get_mut(&id).expect("call").waiting += 1;
            if self.config.kind == CmKind::Sequential {
                // One hop at a time: the next release goes when this one is answered.
                return;
            }
        }
    }

    pub(super) fn finish_if_idle(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        if call.waiting > 0 {
            return;
        }
        let phase = call.phase;
        match phase {
            Phase::RollingBack => {
                let mut call = self.calls.remove(&id).expect("call");
                // Identifiers taken from a cache and never committed end their use here.
                for j in 1..call.ids.len().min(64) {
                    if call.in_use & (1 << j) != 0 {
                        let key = Self::slot_port(&call, j);
                        nv_done(&mut self.caches, &mut call, j, key, now);
                    }
                }
                // A rollback always ends a setup (an established call is released, not
                // rolled back).
                self.setting_up = self.setting_up.saturating_sub(1);
                let error = call.error.unwrap_or(CallError {
                    kind: ErrorKind::Aborted,
                    message: "rolled back".into(),
                });
                if error.blocked() {
                    self.stats.blocked += 1;
                } else {
                    self.stats.failed += 1;
                }
                self.events.push_back(CallEvent::Failed { call: id, error });
            }
            Phase::Releasing => {
                self.calls.remove(&id);
                self.stats.released += 1;
                self.events.push_back(CallEvent::Released { call: id });
            }
            _ => {}
        }
        if matches!(phase, Phase::RollingBack | Phase::Releasing) {
            self.seq_done(now, id);
        }
    }

    /// Releases a call. Returns false if the call is unknown.
    pub fn delete(&mut self, now: Instant, id: u64) -> bool {
        let Some(call) = self.calls.get_mut(&id) else {
            return false;
        };
        match call.phase {
            Phase::Established if call.change.is_some() => call.delete_pending = true,
            Phase::Established if self.config.kind == CmKind::Sequential => {
                self.seq_submit(now, id, true)
            }
            Phase::Established => self.start_release(now, id),
            Phase::Setup | Phase::Committing => call.delete_pending = true,
            Phase::RollingBack | Phase::Releasing => {}
        }
        true
    }

    pub(super) fn start_release(&mut self, now: Instant, id: u64) {
        self.calls.get_mut(&id).expect("call").phase = Phase::Releasing;
        if self.config.kind == CmKind::Xbind {
            // Slot 0 is not carried by any hop: back to the cache at once.
            let (sw, port) = Self::slot_port(&self.calls[&id], 0);
            if let Some(vc) = self.calls.get_mut(&id).expect("call").ids[0].take() {
                self.return_id(now, sw, port, vc);
            }
        }
        self.release_hops(now, id);
        self.finish_if_idle(now, id);
    }
}
