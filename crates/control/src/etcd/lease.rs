//! An etcd lease, kept alive from a background task, that says when it is lost.
//!
//! The name service's leases (paper 000 §II's naming service, with atmlab's leases) and
//! a manager's leadership both rest on one promise: while the holder lives, its lease
//! lives; when the holder dies, its lease lapses and what hangs on it goes. The task
//! sends a keep-alive every third of the TTL, so two may fail in a row (a member dying,
//! the client moving to the next) before the lease is in danger.
//!
//! The holder learns that the lease is lost from [`Lease::lost`] no later than etcd
//! lets it go: the task counts the TTL from the moment it *sent* the last keep-alive
//! that etcd confirmed, which is never later than when etcd counted it from. So a leader
//! that stops acting when `lost` fires never overlaps its successor because of a late
//! notice (clock drift between hosts aside: etcd counts on its own clock).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use atmlab_rpc::etcd::etcdserverpb as pb;
use atmlab_rpc::etcd::etcdserverpb::lease_client::LeaseClient;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{EtcdClient, REQUEST_TIMEOUT};
use crate::{ControlError, ErrorKind};

/// The pause before a failed keep-alive is tried again (on the next member).
const RETRY: Duration = Duration::from_millis(50);

/// A lease granted by etcd and kept alive until it is revoked, abandoned or dropped.
///
/// Dropping it (or [`Lease::abandon`]) stops the keep-alives: the lease lapses after its
/// TTL, and [`Lease::lost`] fires then. [`Lease::revoke`] ends it at once.
#[derive(Debug)]
pub struct Lease {
    client: EtcdClient,
    id: i64,
    ttl: Duration,
    watch: LeaseWatch,
    /// Tells the task to stop sending keep-alives (it still fires `lost` at the end).
    pause: Option<mpsc::Sender<()>>,
    /// The task's report, shared so that a revocation reports at once.
    lost: Arc<watch::Sender<bool>>,
    /// Keep-alives etcd confirmed.
    keep_alives: Arc<AtomicU64>,
}

/// Whether a lease is lost, for whoever depends on it (a [`Leader`](super::Leader), a
/// registration). Cheap to clone.
#[derive(Debug, Clone)]
pub struct LeaseWatch {
    id: i64,
    lost: watch::Receiver<bool>,
}

impl LeaseWatch {
    /// The lease's id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Whether the lease is lost.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves when the lease is lost: revoked, found gone by a keep-alive, or not
    /// confirmed by one before its TTL ran out. Resolves at once if it already is.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.lost.clone();
        async move {
            // An error means the task is gone, which only happens once it has reported.
            let _ = rx.wait_for(|lost| *lost).await;
        }
    }
}

impl Lease {
    pub(super) async fn grant(client: &EtcdClient, ttl: Duration) -> Result<Lease, ControlError> {
        Lease::grant_counting(client, ttl, Arc::default()).await
    }

    /// [`EtcdClient::grant`], counting the confirmed keep-alives into `keep_alives`.
    pub(crate) async fn grant_counting(
        client: &EtcdClient,
        ttl: Duration,
        keep_alives: Arc<AtomicU64>,
    ) -> Result<Lease, ControlError> {
        let asked = i64::try_from(ttl.as_secs_f64().ceil() as u64)
            .unwrap_or(i64::MAX)
            .max(1);
        let sent = Instant::now();
        let reply = client
            .call(
                "etcd Lease.LeaseGrant",
                Some(REQUEST_TIMEOUT),
                |c| async move {
                    LeaseClient::new(c)
                        .lease_grant(pb::LeaseGrantRequest { ttl: asked, id: 0 })
                        .await
                },
            )
            .await?;
        if !reply.error.is_empty() {
            return Err(ControlError::Call {
                call: "etcd Lease.LeaseGrant",
                kind: ErrorKind::Other(13),
                message: reply.error,
            });
        }
        let granted = Duration::from_secs(u64::try_from(reply.ttl).unwrap_or(1));
        let (tx, rx) = watch::channel(false);
        let tx = Arc::new(tx);
        let (pause_tx, pause_rx) = mpsc::channel(1);
        tokio::spawn(keep_alive(
            client.clone(),
            reply.id,
            granted,
            sent + granted,
            Arc::clone(&tx),
            pause_rx,
            Arc::clone(&keep_alives),
        ));
        Ok(Lease {
            client: client.clone(),
            id: reply.id,
            ttl: granted,
            watch: LeaseWatch {
                id: reply.id,
                lost: rx,
            },
            pause: Some(pause_tx),
            lost: tx,
            keep_alives,
        })
    }

    /// The lease's id, to attach keys to ([`EtcdClient::put`]).
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The TTL etcd granted (whole seconds, at least its minimum).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Keep-alives etcd has confirmed so far.
    pub fn keep_alives(&self) -> u64 {
        self.keep_alives.load(Ordering::Relaxed)
    }

    /// A handle that tells whether the lease is lost, for those that depend on it.
    pub fn watch(&self) -> LeaseWatch {
        self.watch.clone()
    }

    /// Whether the lease is lost.
    pub fn is_lost(&self) -> bool {
        self.watch.is_lost()
    }

    /// Resolves when the lease is lost (see [`LeaseWatch::lost`]).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.watch.lost()
    }

    /// Stops the keep-alives without revoking: the lease lapses after its TTL, as if
    /// this process had died (what a test of fail-over needs). [`Lease::lost`] still
    /// fires when the TTL has run out.
    pub fn abandon(mut self) {
        self.stop_keep_alive();
    }

    fn stop_keep_alive(&mut self) {
        if let Some(pause) = self.pause.take() {
            let _ = pause.try_send(());
        }
    }

    /// Revokes the lease: every key attached to it goes at once.
    pub async fn revoke(mut self) -> Result<(), ControlError> {
        self.stop_keep_alive();
        self.client.revoke(self.id).await?;
        self.lost.send_replace(true);
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop_keep_alive();
    }
}

impl EtcdClient {
    /// The time left on lease `id` (etcd counts it in whole seconds, rounded down: a
    /// lease in its last second shows zero), or `None` if it is gone.
    pub async fn time_to_live(&self, id: i64) -> Result<Option<Duration>, ControlError> {
        let reply = self
            .call(
                "etcd Lease.LeaseTimeToLive",
                Some(REQUEST_TIMEOUT),
                |c| async move {
                    LeaseClient::new(c)
                        .lease_time_to_live(pb::LeaseTimeToLiveRequest { id, keys: false })
                        .await
                },
            )
            .await?;
        // -1: no such lease.
        Ok(u64::try_from(reply.ttl).ok().map(Duration::from_secs))
    }

    /// One keep-alive of lease `id` (whoever holds it): the TTL it now has, or `None`
    /// if the lease is gone.
    pub async fn keep_alive(&self, id: i64) -> Result<Option<Duration>, ControlError> {
        let left = keep_alive_once(self, id, REQUEST_TIMEOUT).await?;
        Ok(u64::try_from(left)
            .ok()
            .filter(|&s| s > 0)
            .map(Duration::from_secs))
    }

    /// Revokes lease `id`, whoever holds it (its holder's [`Lease::lost`] fires at its
    /// next keep-alive); a lease already gone is not an error.
    pub async fn revoke(&self, id: i64) -> Result<(), ControlError> {
        let result = self
            .call(
                "etcd Lease.LeaseRevoke",
                Some(REQUEST_TIMEOUT),
                |c| async move {
                    LeaseClient::new(c)
                        .lease_revoke(pb::LeaseRevokeRequest { id })
                        .await
                },
            )
            .await;
        match result {
            Ok(_) => Ok(()),
            // Gone already is what revoking wanted.
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// One keep-alive: the TTL left (0 or less: the lease is gone). Each member gets
/// `per_member` to answer before the next is tried.
async fn keep_alive_once(
    client: &EtcdClient,
    id: i64,
    per_member: Duration,
) -> Result<i64, ControlError> {
    let reply = client
        .call(
            "etcd Lease.LeaseKeepAlive",
            Some(per_member),
            |c| async move {
                let mut stream = LeaseClient::new(c)
                    .lease_keep_alive(tokio_stream::once(pb::LeaseKeepAliveRequest { id }))
                    .await?
                    .into_inner();
                match stream.message().await? {
                    Some(reply) => Ok(tonic::Response::new(reply)),
                    None => Err(tonic::Status::unavailable(
                        "the keep-alive stream closed without an answer",
                    )),
                }
            },
        )
        .await?;
    Ok(reply.ttl)
}

/// The keep-alive task: keeps `id` alive until told to pause, and reports (once) when
/// it is lost, then ends.
async fn keep_alive(
    client: EtcdClient,
    id: i64,
    ttl: Duration,
    mut deadline: Instant,
    lost: Arc<watch::Sender<bool>>,
    mut pause: mpsc::Receiver<()>,
    keep_alives: Arc<AtomicU64>,
) {
    let mut next = Instant::now() + ttl / 3;
    let mut paused = false;
    let why = loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                break "no keep-alive confirmed it within its TTL";
            }
            // A closed channel (the Lease dropped) is a pause too.
            _ = pause.recv(), if !paused => paused = true,
            () = tokio::time::sleep_until(next), if !paused => {
                let sent = Instant::now();
                // A member that hangs gets a third of the TTL, then the next one is
                // asked: the lease must not lapse waiting on one member.
                let per_member = (ttl / 3).min(REQUEST_TIMEOUT);
                let once = keep_alive_once(&client, id, per_member);
                let answer = tokio::time::timeout_at(deadline, once);
                tokio::select! {
                    _ = pause.recv() => paused = true,
                    answer = answer => match answer {
                        Ok(Ok(left)) if left > 0 => {
                            let left = Duration::from_secs(u64::try_from(left).unwrap_or(1));
                            deadline = sent + left;
                            next = sent + left / 3;
                            keep_alives.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Ok(_)) => break "etcd no longer has it (lapsed or revoked)",
                        Ok(Err(e)) => {
                            tracing::warn!(lease = id, error = %e, "etcd keep-alive failed; retrying");
                            next = Instant::now() + RETRY;
                        }
                        // The deadline branch reports it.
                        Err(_) => {}
                    },
                }
            }
        }
    };
    if paused {
        tracing::debug!(lease = id, why, "etcd lease lost (keep-alives stopped)");
    } else {
        tracing::warn!(lease = id, why, "etcd lease lost");
    }
    lost.send_replace(true);
}
