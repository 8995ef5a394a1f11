//! A caller's handle on a running connection manager (paper 000 §II-C, Fig. 4: the
//! manager's operations as its callers see them): [`CmHandle`], cheap to clone, and the
//! requests it sends to the manager's task, each with the channel its answer comes back
//! on.

use atmlab_core::time::Duration;
use atmlab_core::traffic::TrafficDescriptor;
use tokio::sync::{mpsc, oneshot};

use super::{CallInfo, CmStatus, gone};
use crate::cm::adaptive::Regions;
use crate::cm::core::CallError;

pub(super) enum Request {
    Add {
        source: String,
        destinations: Vec<String>,
        traffic: TrafficDescriptor,
        clr: f64,
        tag: String,
        /// When the request was made: its age when the manager takes it.
        made: std::time::Instant,
        reply: oneshot::Sender<Result<CallInfo, CallError>>,
    },
    Delete {
        id: u64,
        reply: oneshot::Sender<Result<(), CallError>>,
    },
    AddLeaf {
        id: u64,
        leaf: String,
        reply: ChangeWaiter,
    },
    DropLeaf {
        id: u64,
        leaf: String,
        reply: ChangeWaiter,
    },
    Modify {
        id: u64,
        traffic: TrafficDescriptor,
        clr: f64,
        reply: ChangeWaiter,
    },
    Get {
        id: u64,
        reply: oneshot::Sender<Option<CallInfo>>,
    },
    List {
        reply: oneshot::Sender<Vec<CallInfo>>,
    },
    Status {
        reply: oneshot::Sender<CmStatus>,
    },
    Tune {
        threshold: u32,
        flush_timeout: Duration,
        adaptive: Option<Regions>,
        reply: oneshot::Sender<CmStatus>,
    },
    Prefill {
        ports: Vec<(String, u16)>,
        reply: oneshot::Sender<()>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

/// A caller's handle on a running connection manager. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CmHandle {
    pub(super) tx: mpsc::Sender<Request>,
    pub(super) gate: std::sync::Arc<Gate>,
    pub(super) busy: std::sync::Arc<Busy>,
}

/// The time the manager's task and its links' tasks have spent in their polls, in
/// nanoseconds: what each worked, as the simulated shell counts a server's busy time
/// (the twin check reads the live manager's beside the simulated one). Two clock reads
/// a poll.
#[derive(Debug, Default)]
pub(super) struct Busy {
    pub(super) manager: std::sync::atomic::AtomicU64,
    pub(super) links: std::sync::atomic::AtomicU64,
}

/// A task's future whose polls are timed into a counter of [`Busy`].
pub(super) struct Timed<F> {
    pub(super) task: std::pin::Pin<Box<F>>,
    pub(super) busy: std::sync::Arc<Busy>,
    /// The links' counter, else the manager's.
    pub(super) link: bool,
}

impl<F: std::future::Future> std::future::Future for Timed<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let start = std::time::Instant::now();
        let r = self.task.as_mut().poll(cx);
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let counter = if self.link {
            &self.busy.links
        } else {
            &self.busy.manager
        };
        counter.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        r
    }
}

/// Overload control at the door (issue 28): while the manager is at its bound of calls
/// in setup, a setup is refused in its caller's task, before it is queued to the
/// manager's. Past the knee most arrivals are refused, and each refusal that went
/// through the manager's one task took time from the setups it was carrying. The
/// manager sets the gate after each turn, so it is a turn late at most; the core's own
/// bound still has the last word.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// Set while the calls in setup are at the bound.
    pub(super) shut: std::sync::atomic::AtomicBool,
    /// Setups refused at the door (counted with the manager's blocked calls).
    pub(super) refused: std::sync::atomic::AtomicU64,
}

impl CmHandle {
    /// The time the manager's task and its links' tasks have worked so far (the wall
    /// time in their polls), in that order.
    pub fn busy(&self) -> (std::time::Duration, std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            std::time::Duration::from_nanos(self.busy.manager.load(Relaxed)),
            std::time::Duration::from_nanos(self.busy.links.load(Relaxed)),
        )
    }

    /// Whether a setup is refused now without being queued, the manager being at its
    /// bound of calls in setup (then counted with its blocked calls; the refusal is
    /// [`CmHandle::door_refusal`]). A caller that offers many calls (a call generator)
    /// can ask before it starts a call's work; one that retries at once must give the
    /// runtime a turn between tries.
    pub fn refused_at_the_door(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.gate.shut.load(Relaxed) {
            return false;
        }
        self.gate.refused.fetch_add(1, Relaxed);
        true
    }

    /// The error of a setup refused at the door: built only when someone reads it, so
    /// that counting refusals allocates nothing.
    pub fn door_refusal() -> CallError {
        CallError {
            kind: atmlab_fabric::error::ErrorKind::ResourceExhausted,
            message: "the connection manager is overloaded (at its bound of calls being set \
                      up; refused before it was queued)"
                .into(),
        }
    }

    /// Sets up a call from `source` to `destination` (host names).
    pub async fn add(
        &self,
        source: &str,
        destination: &str,
        traffic: TrafficDescriptor,
        clr: f64,
        tag: &str,
    ) -> Result<CallInfo, CallError> {
        self.add_multipoint(source, &[destination.to_string()], traffic, clr, tag)
            .await
    }

    /// Sets up a point-to-multipoint call from `source` to every host of
    /// `destinations` (one: point-to-point).
    pub async fn add_multipoint(
        &self,
        source: &str,
        destinations: &[String],
        traffic: TrafficDescriptor,
        clr: f64,
        tag: &str,
    ) -> Result<CallInfo, CallError> {
        if self.refused_at_the_door() {
            // A refusal that needed no await would let a caller retrying at once spin
            // on a runtime thread and starve the manager's task, which alone opens the
            // gate: give way first.
            tokio::task::yield_now().await;
            return Err(Self::door_refusal());
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Add {
                source: source.into(),
                destinations: destinations.to_vec(),
                traffic,
                clr,
                tag: tag.into(),
                made: std::time::Instant::now(),
                reply,
            })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Releases a call.
    pub async fn delete(&self, id: u64) -> Result<(), CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Delete { id, reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Adds host `leaf` to call `id` (AddLeaf); returns the call as changed.
    pub async fn add_leaf(&self, id: u64, leaf: &str) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        let leaf = leaf.to_string();
        self.ask(Request::AddLeaf { id, leaf, reply }, rx).await
    }

    /// Drops host `leaf` from call `id` (DropLeaf); returns the call as changed.
    pub async fn drop_leaf(&self, id: u64, leaf: &str) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        let leaf = leaf.to_string();
        self.ask(Request::DropLeaf { id, leaf, reply }, rx).await
    }

    /// Changes call `id`'s contract in place (ModifyConnection); returns the call as
    /// changed. On a refusal the call keeps its old contract.
    pub async fn modify(
        &self,
        id: u64,
        traffic: TrafficDescriptor,
        clr: f64,
    ) -> Result<CallInfo, CallError> {
        let (reply, rx) = oneshot::channel();
        self.ask(
            Request::Modify {
                id,
                traffic,
                clr,
                reply,
            },
            rx,
        )
        .await
    }

    async fn ask(
        &self,
        r: Request,
        rx: oneshot::Receiver<Result<CallInfo, CallError>>,
    ) -> Result<CallInfo, CallError> {
        self.tx.send(r).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// One call.
    pub async fn get(&self, id: u64) -> Option<CallInfo> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Request::Get { id, reply }).await.ok()?;
        rx.await.ok().flatten()
    }

    /// Every established call.
    pub async fn list(&self) -> Vec<CallInfo> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Request::List { reply }).await.is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Counters and tuning.
    pub async fn status(&self) -> Result<CmStatus, CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Status { reply })
            .await
            .map_err(|_| gone())?;
        let mut status = rx.await.map_err(|_| gone())?;
        // Refused at the door: blocked calls like those the core refused.
        status.stats.blocked += self.gate.refused.load(std::sync::atomic::Ordering::Relaxed);
        Ok(status)
    }

    /// Changes T and the flush time-out; `adaptive` lets T follow the arrival rate.
    pub async fn tune(
        &self,
        threshold: u32,
        flush_timeout: Duration,
        adaptive: Option<Regions>,
    ) -> Result<CmStatus, CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Tune {
                threshold,
                flush_timeout,
                adaptive,
                reply,
            })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Fills the VCI caches of these (switch, port)s ahead of calls, and waits until the
    /// fills are sent.
    pub async fn prefill(&self, ports: Vec<(String, u16)>) -> Result<(), CallError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Prefill { ports, reply })
            .await
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Returns every cached identifier to its switch and stops the manager.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Request::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// A caller waiting for a change (AddLeaf, DropLeaf, Modify) to end.
pub(super) type ChangeWaiter = oneshot::Sender<Result<CallInfo, CallError>>;
