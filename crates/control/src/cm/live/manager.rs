//! The manager's task (paper 000 §II-C; the sans-IO shell of DESIGN.md §2): the shell
//! that owns the [`CmCore`], turns callers' requests, switch answers, listings and the
//! clock into the core's inputs, sends its batches to the links and its events to the
//! callers; and the journal's writer thread, which writes each turn's changes (group
//! commit) before the callers they concern are answered.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use atmlab_core::time::Instant;
use atmlab_fabric::error::{ErrorKind, FabricError};
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::{Command, Reply};
use tokio::sync::{mpsc, oneshot};

use super::handle::{ChangeWaiter, Request};
use super::link::{Listing, SwitchListing, list_connections};
use super::recovery::Recovered;
use super::{CallInfo, CmStatus, Router, gone};
use crate::cm::core::{CallError, CallEvent, CmCore, SetupRequest};
use crate::cm::journal::{CmJournal, JournaledCall};
use atmlab_core::clock::LiveClock;

/// A caller waiting for a setup, with the call's source and destination.
type AddWaiter = (oneshot::Sender<Result<CallInfo, CallError>>, String, String);

struct Shell {
    core: CmCore,
    router: Box<dyn Router>,
    clock: LiveClock,
    links: HashMap<String, mpsc::UnboundedSender<Vec<(u64, Command)>>>,
    // Keyed by call id, which the manager issues: Fx, not SipHash (a few lookups a call).
    add_waiters: FxHashMap<u64, AddWaiter>,
    delete_waiters: FxHashMap<u64, oneshot::Sender<Result<(), CallError>>>,
    change_waiters: FxHashMap<u64, ChangeWaiter>,
    hosts: FxHashMap<u64, (String, String)>,
    journal: Option<std::sync::mpsc::Sender<JournalJob>>,
    /// Transactions the journal's writer committed (counted by its thread).
    journal_writes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    recovery: Vec<String>,
}

/// A caller's answer, held until the journal has the change.
enum Ack {
    Added(oneshot::Sender<Result<CallInfo, CallError>>, Box<CallInfo>),
    /// A change (AddLeaf, DropLeaf, Modify) done: answered once the journal holds it.
    Changed(ChangeWaiter, Box<CallInfo>),
    Deleted(oneshot::Sender<Result<(), CallError>>),
}

/// One turn's changes for the journal, and the answers they hold back.
#[derive(Default)]
struct JournalJob {
    up: Vec<JournaledCall>,
    gone: Vec<u64>,
    acks: Vec<Ack>,
}

/// What the journal's writer could not do.
enum JournalFailure {
    /// These calls could not be written: the manager takes them down.
    Calls(Vec<u64>),
    /// A newer leader has taken the journal ([`CmJournal::fence`]): this manager was
    /// deposed and must stop at once, commanding no switch (taking its unwritten calls
    /// down could release a call the new leader holds: one changed here).
    Deposed(String),
}

/// The journal's writer thread: takes every job waiting, writes them in one transaction
/// (group commit), then answers their callers. Calls it could not write are reported to
/// `failed`, for the manager to take down; their callers hear UNAVAILABLE.
fn journal_writer(
    journal: CmJournal,
    failed: mpsc::UnboundedSender<JournalFailure>,
    writes: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> std::sync::mpsc::Sender<JournalJob> {
    crate::cm::journal::group_commit(
        journal,
        |j: &mut JournalJob| (std::mem::take(&mut j.up), std::mem::take(&mut j.gone)),
        move |jobs, up, result| {
            if let Err(e) = &result {
                let _ = failed.send(if e.contains(crate::cm::journal::DEPOSED) {
                    JournalFailure::Deposed(e.clone())
                } else {
                    JournalFailure::Calls(up.iter().map(|c| c.view.id).collect())
                });
            } else {
                writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            for j in jobs {
                for a in j.acks {
                    match (a, &result) {
                        (Ack::Added(w, info) | Ack::Changed(w, info), Ok(())) => {
                            let _ = w.send(Ok(*info));
                        }
                        // The call is taken down (`failed`): its caller hears why.
                        (Ack::Added(w, _) | Ack::Changed(w, _), Err(e)) => {
                            let _ = w.send(Err(CallError {
                                kind: ErrorKind::Unavailable,
                                message: format!("the journal could not be written: {e}"),
                            }));
                        }
                        // A release the journal could not forget is still released; a
                        // restarted manager finds its hops gone and drops the entry.
                        (Ack::Deleted(w), _) => {
                            let _ = w.send(Ok(()));
                        }
                    }
                }
            }
        },
    )
}

impl Shell {
    fn info(&self, id: u64) -> Option<CallInfo> {
        let view = self.core.view(id)?;
        let (s, d) = self.hosts.get(&id)?.clone();
        let destination = view.leaves.first().map_or(d, |l| l.0.clone());
        Some(CallInfo {
            view,
            source: s,
            destination,
        })
    }

    fn status(&self) -> CmStatus {
        let c = self.core.config();
        CmStatus {
            kind: c.kind.name(),
            stats: self.core.stats(),
            active: self.core.active() as u64,
            cache: self.core.cache_counts(),
            threshold: c.threshold,
            flush_timeout: c.flush_timeout,
            adaptive: c.adaptive.is_some(),
            load: self.core.load(),
            nv: self.core.nv_probes(),
            recovery: self.recovery.clone(),
            partition: c.partition,
            journal_writes: self
                .journal_writes
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    fn request(&mut self, now: Instant, r: Request) -> Option<oneshot::Sender<()>> {
        match r {
            Request::Add {
                source,
                destinations,
                traffic,
                clr,
                tag,
                made,
                reply,
            } => {
                if destinations.is_empty() {
                    let _ = reply.send(Err(CallError {
                        kind: ErrorKind::InvalidArgument,
                        message: "no destination".into(),
                    }));
                    return None;
                }
                let mut routes = Vec::with_capacity(destinations.len());
                for d in &destinations {
                    match self.router.route(now, &source, d, traffic.pcr.per_sec()) {
                        Ok(h) => routes.push((d.clone(), h)),
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            return None;
                        }
                    }
                }
                let destination = destinations[0].clone();
                let id = self.core.add_waited(
                    now,
                    SetupRequest {
                        routes,
                        traffic,
                        clr,
                        buffer_cells: 0,
                        tag,
                    },
                    atmlab_core::time::Duration::from(made.elapsed()),
                );
                self.hosts.insert(id, (source.clone(), destination.clone()));
                self.add_waiters.insert(id, (reply, source, destination));
            }
            Request::Delete { id, reply } => {
                if self.core.delete(now, id) {
                    self.delete_waiters.insert(id, reply);
                } else {
                    let _ = reply.send(Err(CallError {
                        kind: ErrorKind::NotFound,
                        message: format!("no connection {id}"),
                    }));
                }
            }
            Request::AddLeaf { id, leaf, reply } => {
                let result = match self.hosts.get(&id) {
                    None => Err(CallError {
                        kind: ErrorKind::NotFound,
                        message: format!("no connection {id}"),
                    }),
                    Some((source, _)) => {
                        let bw = self.core.view(id).map_or(0.0, |v| v.traffic.pcr.per_sec());
                        let source = source.clone();
                        self.router
                            .route(now, &source, &leaf, bw)
                            .and_then(|route| self.core.add_leaf(now, id, &leaf, &route))
                    }
                };
                self.change_started(id, result, reply);
            }
            Request::DropLeaf { id, leaf, reply } => {
                let result = self.core.drop_leaf(now, id, &leaf);
                self.change_started(id, result, reply);
            }
            Request::Modify {
                id,
                traffic,
                clr,
                reply,
            } => {
                let result = self.core.modify(now, id, traffic, clr);
                self.change_started(id, result, reply);
            }
            Request::Get { id, reply } => {
                let _ = reply.send(self.info(id));
            }
            Request::List { reply } => {
                let v = self
                    .core
                    .views()
                    .into_iter()
                    .filter_map(|v| self.info(v.id))
                    .collect();
                let _ = reply.send(v);
            }
            Request::Status { reply } => {
                let _ = reply.send(self.status());
            }
            Request::Tune {
                threshold,
                flush_timeout,
                adaptive,
                reply,
            } => {
                self.core.tune(threshold, flush_timeout, adaptive);
                let _ = reply.send(self.status());
            }
            Request::Prefill { ports, reply } => {
                for (s, p) in ports {
                    self.core.prefill(now, &s, p);
                }
                // The fills leave at the next flush; the caller waits for the answers
                // by watching the cache (status) if it must.
                let _ = reply.send(());
            }
            Request::Shutdown { reply } => {
                self.core.drain_caches(now);
                return Some(reply);
            }
        }
        None
    }

    /// A change was started (its answer waits for [`CallEvent::Changed`]) or refused.
    fn change_started(&mut self, id: u64, result: Result<(), CallError>, reply: ChangeWaiter) {
        match result {
            Ok(()) => {
                self.change_waiters.insert(id, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    fn events(&mut self) {
        let mut job = JournalJob::default();
        while let Some(ev) = self.core.poll_event() {
            match ev {
                CallEvent::Changed { call, result } => {
                    let info = self.info(call);
                    if result.is_ok()
                        && self.journal.is_some()
                        && let Some(i) = &info
                    {
                        // The journal holds the call as changed (the row is replaced).
                        job.up.push(JournaledCall {
                            view: i.view.clone(),
                            source: i.source.clone(),
                            destination: i.destination.clone(),
                            bounds: Default::default(),
                        });
                    }
                    if let Some(w) = self.change_waiters.remove(&call) {
                        match (result.and_then(|()| info.ok_or_else(gone)), &self.journal) {
                            // Like a setup, a change is answered once the journal has it,
                            // so a restarted manager never forgets a change it confirmed.
                            (Ok(i), Some(_)) => job.acks.push(Ack::Changed(w, Box::new(i))),
                            (answer, _) => {
                                let _ = w.send(answer);
                            }
                        }
                    }
                }
                CallEvent::Established { call, .. } => {
                    let view = self.core.view(call);
                    if self.journal.is_some()
                        && let (Some(view), Some((s, d))) = (&view, self.hosts.get(&call))
                    {
                        job.up.push(JournaledCall {
                            view: view.clone(),
                            source: s.clone(),
                            destination: d.clone(),
                            bounds: Default::default(),
                        });
                    }
                    if let Some((w, s, d)) = self.add_waiters.remove(&call)
                        && let Some(view) = view
                    {
                        // A caller that went away leaves the call up; it can be listed
                        // and deleted.
                        let info = CallInfo {
                            view,
                            source: s,
                            destination: d,
                        };
                        match self.journal {
                            Some(_) => job.acks.push(Ack::Added(w, Box::new(info))),
                            None => {
                                let _ = w.send(Ok(info));
                            }
                        }
                    }
                }
                CallEvent::Failed { call, error } => {
                    self.hosts.remove(&call);
                    if let Some((w, source, destination)) = self.add_waiters.remove(&call) {
                        if error.blocked() {
                            // The route the cache gave may be the stale one.
                            self.router.refused(&source, &destination);
                        }
                        let _ = w.send(Err(error.clone()));
                    }
                    if let Some(w) = self.delete_waiters.remove(&call) {
                        let _ = w.send(Err(error));
                    }
                }
                CallEvent::Released { call } => {
                    self.hosts.remove(&call);
                    if self.journal.is_some() {
                        job.gone.push(call);
                    }
                    if let Some(w) = self.delete_waiters.remove(&call) {
                        match self.journal {
                            Some(_) => job.acks.push(Ack::Deleted(w)),
                            None => {
                                let _ = w.send(Ok(()));
                            }
                        }
                    }
                }
            }
        }
        // The journal first: a caller hears of a connection only once it is written,
        // and of a release once it is forgotten. The writer thread does the writing (a
        // checkpoint can be slow) and answers the callers; this task goes on with other
        // calls meanwhile.
        if let Some(j) = &self.journal
            && !(job.up.is_empty() && job.gone.is_empty() && job.acks.is_empty())
        {
            let _ = j.send(job);
        }
    }

    fn transmit(&mut self, now: Instant) {
        while let Some(t) = self.core.poll_transmit(now) {
            match self.links.get(&*t.switch) {
                Some(link) => {
                    let _ = link.send(t.commands);
                }
                None => {
                    // A route through a switch we have no link to: answer every command
                    // as unavailable so the call rolls back.
                    for (req, _) in t.commands {
                        self.core.handle_reply(
                            now,
                            req,
                            Err(FabricError::Unavailable(format!(
                                "no link to switch {}",
                                t.switch
                            ))),
                        );
                    }
                }
            }
        }
    }
}

/// What the manager's task listens to.
pub(super) struct Channels {
    pub(super) api: mpsc::Receiver<Request>,
    pub(super) inbox: mpsc::UnboundedReceiver<(u64, Result<Reply, FabricError>)>,
    pub(super) reconcile: mpsc::UnboundedReceiver<SwitchListing>,
    /// Where sweeps send their listings (the same channel).
    pub(super) listings: mpsc::UnboundedSender<SwitchListing>,
    /// The switches, to list for sweeps.
    pub(super) switches: Vec<(String, GrpcSwitch)>,
}

/// The next tick of the sweep, or never.
async fn tick(t: &mut Option<tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

pub(super) async fn run_manager(
    core: CmCore,
    router: Box<dyn Router>,
    gate: std::sync::Arc<super::handle::Gate>,
    channels: Channels,
    links: HashMap<String, mpsc::UnboundedSender<Vec<(u64, Command)>>>,
    recovered: Option<Recovered>,
) {
    let Channels {
        mut api,
        mut inbox,
        mut reconcile,
        listings,
        switches,
    } = channels;
    let list_all = |why: Listing| {
        for (name, client) in &switches {
            list_connections(name.clone(), client.clone(), why, listings.clone());
        }
    };
    let mut sweep_tick = core.config().sweep_interval.map(|d| {
        let d = std::time::Duration::from(d);
        tokio::time::interval_at(tokio::time::Instant::now() + d, d)
    });
    // The last sweep's listings still to come (`None` until the manager stops).
    let mut final_left: Option<usize> = None;
    let (failed_tx, mut failed) = mpsc::unbounded_channel::<JournalFailure>();
    let journal_writes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (journal, recovery, hosts) = match recovered {
        Some(r) => (
            Some(journal_writer(r.journal, failed_tx, journal_writes.clone())),
            r.findings,
            r.hosts.into_iter().map(|(id, s, d)| (id, (s, d))).collect(),
        ),
        None => (None, Vec::new(), FxHashMap::default()),
    };
    let mut sh = Shell {
        core,
        router,
        clock: LiveClock::start(),
        links,
        add_waiters: FxHashMap::default(),
        delete_waiters: FxHashMap::default(),
        change_waiters: FxHashMap::default(),
        hosts,
        journal,
        journal_writes,
        recovery,
    };
    let mut stopping: Option<oneshot::Sender<()>> = None;
    loop {
        let now = sh.clock.now();
        // When this turn's input was taken (set in every arm below).
        let woke;
        let wake = sh.core.poll_timeout().map(|t| {
            let d = t.saturating_duration_since(now);
            tokio::time::Instant::now() + std::time::Duration::from(d)
        });
        tokio::select! {
            biased;
            r = inbox.recv() => {
                let Some((req, res)) = r else { return };
                let now = sh.clock.now();
                woke = now;
                sh.core.handle_reply(now, req, res);
                // Take whatever else has arrived before sending anything: replies come in
                // bursts, and one pass over them lets the aggregators fill.
                for _ in 0..4096 {
                    match inbox.try_recv() {
                        Ok((req, res)) => sh.core.handle_reply(now, req, res),
                        Err(_) => break,
                    }
                }
            }
            r = api.recv(), if stopping.is_none() => {
                let Some(r) = r else { return };
                let now = sh.clock.now();
                woke = now;
                stopping = sh.request(now, r);
                for _ in 0..4096 {
                    if stopping.is_some() { break; }
                    match api.try_recv() {
                        Ok(r) => stopping = sh.request(now, r),
                        Err(_) => break,
                    }
                }
            }
            Some(f) = failed.recv() => {
                let ids = match f {
                    JournalFailure::Calls(ids) => ids,
                    JournalFailure::Deposed(e) => {
                        // Stop here: the links end with their senders, the waiting
                        // callers hear that the manager stopped, and nothing more
                        // reaches a switch from this manager.
                        tracing::error!(error = %e, "deposed: another manager leads this owner now; stopping without touching the switches");
                        return;
                    }
                };
                // Calls the journal could not hold were refused to their callers: take
                // them down.
                let now = sh.clock.now();
                woke = now;
                for id in ids {
                    sh.core.delete(now, id);
                }
            }
            Some((switch, conns, reservations, why)) = reconcile.recv() => {
                let now = sh.clock.now();
                woke = now;
                match why {
                    Listing::Reopened => {
                        let (completed, released) = sh.core.reconcile(now, &switch, &conns);
                        if completed + released > 0 {
                            tracing::warn!(%switch, completed, released, "reconciled with a switch that came back");
                        }
                    }
                    Listing::Sweep | Listing::Final => {
                        let last = why == Listing::Final;
                        let released = sh.core.sweep(now, &switch, &conns, !last);
                        let given = sh.core.sweep_reservations(now, &switch, &reservations, !last);
                        if released + given > 0 {
                            tracing::warn!(%switch, released, given, "swept connections and reservations of ours that nothing explains");
                        }
                        if last {
                            final_left = final_left.map(|n| n.saturating_sub(1));
                        }
                    }
                }
            }
            _ = tick(&mut sweep_tick), if stopping.is_none() => {
                woke = sh.clock.now();
                list_all(Listing::Sweep);
            }
            _ = sleep_until(wake) => {
                woke = sh.clock.now();
                sh.core.handle_timeout(woke);
            }
        }
        let now = sh.clock.now();
        sh.transmit(now);
        sh.events();
        gate.shut.store(
            sh.core.setting_up() >= sh.core.setup_bound(),
            std::sync::atomic::Ordering::Relaxed,
        );
        // Counting only: the turn's length, for where a call's time goes (paper 000
        // Fig. 7; the reproduction's profile).
        let done = sh.clock.now();
        sh.core.note_busy(done.saturating_duration_since(woke));
        if stopping.is_some() && sh.core.in_flight() == 0 {
            // Nothing in flight: one last sweep of every switch (a commit given up whose
            // answers were all lost left a connection nothing else would release), and
            // the answers to what it releases; then stop.
            if final_left.is_none() {
                final_left = Some(switches.len());
                list_all(Listing::Final);
            }
            if final_left != Some(0) {
                continue;
            }
            if let Some(s) = stopping.take() {
                let _ = s.send(());
            }
            return;
        }
    }
}

async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
