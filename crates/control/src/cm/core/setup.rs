//! Setting a call up (paper 000 §II-C, Fig. 2 for the sequential manager, Fig. 4 and
//! §II-C1 for xbind): [`CmCore::add`]; the sequential manager's one step at a time
//! (reserve, then commit, hop by hop; one call operation at a time); xbind's start,
//! identifiers taken from the VCI caches (a miss reserves a whole fill), and every hop's
//! commit at once with a low cache's replenishment piggybacked; establishment.

use atmlab_core::ids::PortId;
use atmlab_core::time::{Duration, Instant};
use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::switch::{Branch, Command, Commit, ConnectionKind, Reserve};

use super::{Call, CallError, CallEvent, CmCore, CmKind, PerCall, Phase, Purpose, SetupRequest};
use crate::cm::tree::Tree;

impl CmCore {
    pub(super) fn reserve_cmd(&self, port: u16, count: u32, vpi: u16) -> Command {
        Command::Reserve(Reserve {
            port: PortId(port),
            count,
            vpi,
            vp: false,
            within: self.config.partition,
            owner: self.owner.clone(),
        })
    }

    /// A new call. Returns its id; its outcome comes as a [`CallEvent`].
    pub fn add(&mut self, now: Instant, req: SetupRequest) -> u64 {
        self.add_waited(now, req, Duration::ZERO)
    }

    /// [`CmCore::add`] of a request that `waited` before the core took it (in the
    /// shell's queue): refused at once past [`CmConfig::max_setup_age`](super::CmConfig).
    pub fn add_waited(&mut self, now: Instant, req: SetupRequest, waited: Duration) -> u64 {
        let id = self.next_call;
        self.next_call += 1;
        self.note_arrival(now);
        if let Some(age) = self.config.max_setup_age
            && waited > age
        {
            self.stats.blocked += 1;
            self.events.push_back(CallEvent::Failed {
                call: id,
                error: CallError {
                    kind: ErrorKind::ResourceExhausted,
                    message: format!(
                        "the connection manager is overloaded (the setup waited {waited} \
                         before it was taken, more than the {age} setup-age guard)"
                    ),
                },
            });
            return id;
        }
        if self.setting_up >= self.setup_bound() {
            self.stats.blocked += 1;
            let message = match &self.setup_limit {
                None => format!(
                    "the connection manager is overloaded ({} calls being set up)",
                    self.setting_up
                ),
                Some(l) => format!(
                    "the connection manager is overloaded ({} calls being set up, its bound \
                     while setups take longer than {})",
                    self.setting_up,
                    l.target()
                ),
            };
            self.events.push_back(CallEvent::Failed {
                call: id,
                error: CallError {
                    kind: ErrorKind::ResourceExhausted,
                    message,
                },
            });
            return id;
        }
        self.setting_up += 1;
        let tree = match Tree::from_routes(&req.routes) {
            Ok(t) => t,
            Err(e) => {
                self.events.push_back(CallEvent::Failed {
                    call: id,
                    error: CallError {
                        kind: ErrorKind::InvalidArgument,
                        message: e.to_string(),
                    },
                });
                self.stats.failed += 1;
                self.setting_up -= 1;
                return id;
            }
        };
        let call = Call {
            tree,
            hop_sw: PerCall::new(),
            slot_sw: PerCall::new(),
            traffic: req.traffic,
            clr: req.clr,
            buffer: req.buffer_cells,
            tag: req.tag,
            ids: PerCall::new(),
            on_switch: PerCall::new(),
            conns: PerCall::new(),
            waiting: 0,
            phase: Phase::Setup,
            change: None,
            started: now,
            setup: Duration::ZERO,
            error: None,
            delete_pending: false,
            in_use: 0,
            sent: 0,
        };
        self.calls.insert(id, call);
        self.fit(id);
        match self.config.kind {
            CmKind::Xbind => self.xbind_start(now, id),
            CmKind::Sequential => self.seq_submit(now, id, false),
        }
        id
    }

    /// Sequential: one call operation at a time, as a single-threaded manager making
    /// synchronous calls does; the others wait in arrival order.
    pub(super) fn seq_submit(&mut self, now: Instant, id: u64, release: bool) {
        if self.seq_busy.is_some() {
            self.seq_queue.push_back((id, release));
            return;
        }
        self.seq_busy = Some(id);
        if release {
            self.start_release(now, id);
        } else {
            self.seq_step(now, id);
        }
    }

    /// Sequential: the operation on `id` ended; start the next one.
    pub(super) fn seq_done(&mut self, now: Instant, id: u64) {
        if self.config.kind != CmKind::Sequential || self.seq_busy != Some(id) {
            return;
        }
        self.seq_busy = None;
        while let Some((next, release)) = self.seq_queue.pop_front() {
            if !self.calls.contains_key(&next) {
                continue;
            }
            self.seq_submit(now, next, release);
            if self.seq_busy.is_some() {
                break;
            }
        }
    }

    fn xbind_start(&mut self, now: Instant, id: u64) {
        let slots: PerCall<usize> = self.calls[&id].tree.live_slots().collect();
        self.take_ids(now, id, &slots, true);
        if self.calls[&id].waiting == 0 {
            self.xbind_commit(now, id);
        }
    }

    /// Identifiers for `slots` of a call: from the caches (xbind; a miss reserves a
    /// whole fill) or one reservation each (sequential). `probe`: count the takes in
    /// `N_v` (a setup's, §IV-A).
    pub(super) fn take_ids(&mut self, now: Instant, id: u64, slots: &[usize], probe: bool) {
        if self.config.kind == CmKind::Sequential {
            for &j in slots {
                let (sw, port) = Self::slot_port(&self.calls[&id], j);
                let cmd = self.reserve_cmd(port, 1, 0);
                self.send(now, Some(id), Purpose::Slot(j), sw, port, cmd);
                self.calls.get_mut(&id).expect("call").waiting += 1;
            }
            return;
        }
        for &j in slots {
            let (sw, port) = Self::slot_port(&self.calls[&id], j);
            let cache = self.caches.entry((sw, port)).or_default();
            let got = cache.take();
            match got {
                Some(vc) => {
                    let call = self.calls.get_mut(&id).expect("call");
                    call.ids[j] = Some(vc);
                    // Slot 0 (the first switch's input) is never committed on its own
                    // port, so N_v is kept for the output ports, as in the paper.
                    if probe && (1..64).contains(&j) {
                        cache.nv.take(now);
                        call.in_use |= 1 << j;
                    }
                }
                None => {
                    // A miss: fall back to two-phase, reserving a whole fill so the
                    // next calls hit.
                    let cmd = self.reserve_cmd(port, self.config.cache_fill, 0);
                    self.caches.get_mut(&(sw, port)).expect("entry").filling = true;
                    self.send(now, Some(id), Purpose::Slot(j), sw, port, cmd);
                    self.calls.get_mut(&id).expect("call").waiting += 1;
                }
            }
        }
    }

    fn commit_cmd(&self, call: &Call, hop: usize, replenish: u32) -> Command {
        let h = call.tree.hop(hop);
        Command::Commit(Commit {
            kind: ConnectionKind::Vc,
            in_port: PortId(h.in_port),
            in_id: call.ids[h.in_slot].expect("identifiers known"),
            branches: h
                .outs
                .iter()
                .map(|&s| Branch {
                    port: PortId(call.tree.slot(s).port),
                    id: call.ids[s].expect("identifiers known"),
                })
                .collect(),
            traffic: call.traffic,
            clr: call.clr,
            buffer_cells: call.buffer,
            owner: self.owner.clone(),
            replenish,
            tag: call.tag.clone(),
        })
    }

    pub(super) fn xbind_commit(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        call.phase = Phase::Committing;
        let hops: PerCall<usize> = call.tree.live_hops().collect();
        self.commit_hops(now, id, &hops);
    }

    /// Sends the commits of `hops` at once (xbind's parallel setup; AddLeaf's new hops).
    pub(super) fn commit_hops(&mut self, now: Instant, id: u64, hops: &[usize]) {
        for &hop in hops {
            let call = &self.calls[&id];
            let first = call.tree.hop(hop).outs[0];
            let (sw, port) = Self::slot_port(call, first);
            // Piggyback the replenishment of a low cache on this commit (xbind; the
            // sequential manager keeps no cache).
            let xbind = self.config.kind == CmKind::Xbind;
            let cache = self.caches.entry((sw, port)).or_default();
            let replenish =
                if xbind && !cache.filling && (cache.len() as u32) < self.config.cache_low {
                    cache.filling = true;
                    self.config.cache_fill
                } else {
                    0
                };
            let cmd = self.commit_cmd(call, hop, replenish);
            self.send(now, Some(id), Purpose::Commit(hop), sw, port, cmd);
            self.calls.get_mut(&id).expect("call").waiting += 1;
        }
    }

    /// Sequential: the next step, one remote invocation at a time (Fig. 2): reserve
    /// slot 0; then, hop by hop from the root, reserve each of its output identifiers and
    /// commit it. When nothing is left, the call is established.
    pub(super) fn seq_step(&mut self, now: Instant, id: u64) {
        let call = &self.calls[&id];
        let next_slot = |j: usize| call.ids[j].is_none().then_some(j);
        let mut todo = next_slot(0).map(|j| (Purpose::Slot(j), j));
        if todo.is_none() {
            for h in call.tree.live_hops() {
                let hop = call.tree.hop(h);
                if let Some(j) = hop.outs.iter().find_map(|&j| next_slot(j)) {
                    todo = Some((Purpose::Slot(j), j));
                    break;
                }
                if call.conns[h].is_none() {
                    todo = Some((Purpose::Commit(h), hop.outs[0]));
                    break;
                }
            }
        }
        let Some((purpose, j)) = todo else {
            self.establish(now, id);
            return;
        };
        let (sw, port) = Self::slot_port(call, j);
        let cmd = match purpose {
            Purpose::Commit(h) => self.commit_cmd(call, h, 0),
            _ => self.reserve_cmd(port, 1, 0),
        };
        self.send(now, Some(id), purpose, sw, port, cmd);
        self.calls.get_mut(&id).expect("call").waiting += 1;
    }

    pub(super) fn establish(&mut self, now: Instant, id: u64) {
        let call = self.calls.get_mut(&id).expect("call");
        call.phase = Phase::Established;
        call.setup = now.saturating_duration_since(call.started);
        let latency = call.setup;
        let delete = call.delete_pending;
        self.stats.established += 1;
        self.setting_up = self.setting_up.saturating_sub(1);
        if let Some(l) = &mut self.setup_limit {
            l.on_setup(now, latency);
        }
        self.events
            .push_back(CallEvent::Established { call: id, latency });
        if self.config.kind == CmKind::Sequential {
            self.seq_done(now, id);
            if delete {
                self.seq_submit(now, id, true);
            }
        } else if delete {
            self.start_release(now, id);
        }
    }
}
