//! Leader election through etcd's own election service (`v3electionpb.Election`).
//!
//! An active and a standby connection manager for one owner (issue 26, beyond the
//! papers: xbind's manager of paper 000 §II-C is one process) must agree on which of
//! them acts. etcd's election service does it server-side: each campaigner puts a key
//! `NAME/LEASE` attached to its lease; the one with the oldest key is the leader, and
//! the others' `Campaign` calls block until every older key is gone, deleted by a
//! resignation or with a lapsed lease. So leadership is exactly "my key is the oldest
//! and my lease lives": a leader whose process dies loses it when its lease lapses.
//!
//! [`Leader::lost`] fires when the leader's [`Lease`] is lost, which the lease task
//! reports no later than etcd lets the lease go (see `lease.rs`), so a leader that
//! stops acting then does not overlap a successor elected by the lapse. It also fires
//! when the leader's key is deleted or replaced, which is learnt by a watch, after the
//! fact: fence writes elsewhere with [`Leader::revision`].

use std::future::Future;
use std::time::Duration;

use atmlab_rpc::etcd::v3electionpb as pb;
use atmlab_rpc::etcd::v3electionpb::election_client::ElectionClient;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::{
    EtcdClient, KeyValue, Lease, LeaseWatch, REQUEST_TIMEOUT, ROUND_PAUSE, ROUNDS, WatchKind,
    Watcher, retryable, status_error,
};
use crate::{ControlError, ErrorKind};

/// The pause before a broken observation is opened again.
const REOPEN_PAUSE: Duration = Duration::from_millis(100);

/// The election service of a cluster ([`EtcdClient::election`]).
#[derive(Debug, Clone)]
pub struct Election {
    client: EtcdClient,
}

/// Leadership of an election, won by [`Election::campaign`].
#[derive(Debug)]
pub struct Leader {
    client: EtcdClient,
    key: pb::LeaderKey,
    /// Set (once) when the lease is lost or the leader's key is gone.
    lost: watch::Receiver<bool>,
    /// Watches the lease and the key; ends with the leadership.
    guard: JoinHandle<()>,
}

impl Election {
    pub(super) fn new(client: EtcdClient) -> Self {
        Election { client }
    }

    /// Campaigns for `name` with `lease`, proclaiming `value` once elected; resolves
    /// when this campaigner is the leader.
    ///
    /// Waits as long as another leader holds the election. Fails with NOT_FOUND if
    /// the lease is lost meanwhile. Dropping the future cancels the campaign: etcd
    /// withdraws its key when the member hears of it (a member that cannot be reached
    /// keeps it until the lease lapses, so drop or revoke the lease too).
    ///
    /// When the member campaigned through fails, the campaign moves to the next one
    /// with the same lease, after deleting the key this attempt may have left: etcd
    /// withdraws a cancelled campaign's key when it notices the cancellation, possibly
    /// much later (a member that hung and came back), and the key of the next attempt
    /// must not be the one it withdraws. Once elected, the key is read back and must be
    /// this campaign's.
    pub async fn campaign(
        &self,
        name: &str,
        value: impl Into<Vec<u8>>,
        lease: &Lease,
    ) -> Result<Leader, ControlError> {
        // The key etcd's election service gives a campaign: NAME/LEASE in hex.
        let key = format!("{name}/{:x}", lease.id());
        let request = pb::CampaignRequest {
            name: name.as_bytes().to_vec(),
            lease: lease.id(),
            value: value.into(),
        };
        let attempts = ROUNDS * self.client.members().len();
        let mut failures = 0;
        loop {
            let (member, channel) = self.client.current_channel();
            let mut election = ElectionClient::new(channel);
            let campaign = election.campaign(request.clone());
            let reply = tokio::select! {
                reply = campaign => reply,
                () = lease.lost() => return Err(lease_lost(lease.id())),
            };
            let leader = match reply {
                Ok(r) => r.into_inner().leader,
                Err(s) if retryable(&s) && failures + 1 < attempts => {
                    failures += 1;
                    tracing::debug!(%key, status = %s.message(), "campaign failed on a member; moving on");
                    self.client.member_failed(member);
                    self.client.delete(&key).await?;
                    tokio::time::sleep(ROUND_PAUSE).await;
                    continue;
                }
                Err(s) => return Err(status_error("etcd Election.Campaign", &s)),
            };
            let leader = leader.ok_or(ControlError::Call {
                call: "etcd Election.Campaign",
                kind: ErrorKind::Other(13),
                message: "elected without a leader key".into(),
            })?;
            // Watch the key from its creation on, then check it is still ours: a delete
            // between the election and now is in the watch.
            let watcher = self
                .client
                .watch_key(&key, leader.rev.saturating_add(1))
                .await?;
            match self.client.get(&key).await? {
                Some(kv) if kv.create_revision == leader.rev && kv.lease == lease.id() => {
                    return Ok(Leader::new(
                        self.client.clone(),
                        leader,
                        lease.watch(),
                        watcher,
                    ));
                }
                _ => {
                    tracing::warn!(%key, "elected, but the key is gone (a cancelled attempt withdrew it); campaigning again");
                    self.client.delete(&key).await?;
                }
            }
        }
    }

    /// The current leader's key and proclaimed value, if the election has one.
    pub async fn leader(&self, name: &str) -> Result<Option<KeyValue>, ControlError> {
        let request = pb::LeaderRequest {
            name: name.as_bytes().to_vec(),
        };
        let reply = self
            .client
            .call("etcd Election.Leader", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { ElectionClient::new(c).leader(request).await }
            })
            .await;
        match reply {
            Ok(r) => Ok(r.kv.map(KeyValue::from_pb)),
            // etcd says so as an UNKNOWN status with this message.
            Err(ControlError::Call { message, .. }) if message.contains("no leader") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The leaders of `name` as they come: first the current one (once there is one),
    /// then each new leader or proclamation.
    pub async fn observe(&self, name: &str) -> Result<Observer, ControlError> {
        let (tx, rx) = mpsc::channel(16);
        let task = tokio::spawn(observe(self.client.clone(), name.as_bytes().to_vec(), tx));
        Ok(Observer { values: rx, task })
    }
}

/// The error of a campaign whose lease was lost.
fn lease_lost(id: i64) -> ControlError {
    ControlError::Call {
        call: "etcd Election.Campaign",
        kind: ErrorKind::NotFound,
        message: format!("lease {id:x} was lost while campaigning"),
    }
}

impl Leader {
    /// The election's name.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.key.name).into_owned()
    }

    /// The leader's key in etcd (`NAME/LEASE`): a transaction may compare its
    /// creation revision with [`Leader::revision`] to act only while still leader.
    pub fn key(&self) -> String {
        String::from_utf8_lossy(&self.key.key).into_owned()
    }

    /// The revision at which the leader's key was created.
    pub fn revision(&self) -> i64 {
        self.key.rev
    }

    /// The lease that holds the leadership.
    pub fn lease_id(&self) -> i64 {
        self.key.lease
    }

    /// Whether leadership is lost.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves when leadership is lost: the lease lapsed, was revoked, or no keep-alive
    /// confirmed it within its TTL; or the leader's key was deleted or replaced (by
    /// hand, or by a stale clean-up). From then on another campaigner may be leader.
    ///
    /// A lost lease is reported no later than etcd lets it go; a deleted key is
    /// reported when the watch delivers the deletion, which is after etcd made it, so
    /// a successor may already be elected then: fence what a leader writes elsewhere
    /// with [`Leader::revision`] (it grows with each new leader).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.lost.clone();
        async move {
            let _ = rx.wait_for(|lost| *lost).await;
        }
    }

    fn new(client: EtcdClient, key: pb::LeaderKey, lease: LeaseWatch, watcher: Watcher) -> Leader {
        let (tx, rx) = watch::channel(false);
        let guard = tokio::spawn(guard(
            String::from_utf8_lossy(&key.key).into_owned(),
            key.rev,
            lease,
            watcher,
            tx,
        ));
        Leader {
            client,
            key,
            lost: rx,
            guard,
        }
    }

    /// Proclaims a new value (observers see it).
    pub async fn proclaim(&self, value: impl Into<Vec<u8>>) -> Result<(), ControlError> {
        let request = pb::ProclaimRequest {
            leader: Some(self.key.clone()),
            value: value.into(),
        };
        self.client
            .call("etcd Election.Proclaim", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { ElectionClient::new(c).proclaim(request).await }
            })
            .await?;
        Ok(())
    }

    /// Gives leadership up: the next campaigner is elected at once. The lease is kept
    /// (its owner revokes it or campaigns again with it).
    pub async fn resign(self) -> Result<(), ControlError> {
        self.guard.abort();
        let request = pb::ResignRequest {
            leader: Some(self.key.clone()),
        };
        self.client
            .call("etcd Election.Resign", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { ElectionClient::new(c).resign(request).await }
            })
            .await?;
        Ok(())
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.guard.abort();
    }
}

/// Reports (once) that leadership is lost: the lease is, or the key `key` created at
/// `rev` was deleted or replaced, or the watch on it failed (then, not knowing, it says
/// lost: a leader must not act on a leadership it cannot see).
async fn guard(
    key: String,
    rev: i64,
    lease: LeaseWatch,
    mut watcher: Watcher,
    lost: watch::Sender<bool>,
) {
    let lease_lost = lease.lost();
    tokio::pin!(lease_lost);
    let why = loop {
        tokio::select! {
            () = &mut lease_lost => break "its lease was lost",
            event = watcher.next() => match event {
                Some(Ok(e)) if e.kind == WatchKind::Delete => break "its key was deleted",
                Some(Ok(e)) if e.kv.create_revision != rev => break "its key was replaced",
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break "the watch on its key failed",
            },
        }
    };
    tracing::warn!(%key, why, "etcd leadership lost");
    lost.send_replace(true);
}

/// The leaders of an election, as [`Election::observe`] reports them. Dropping it ends
/// the observation.
#[derive(Debug)]
pub struct Observer {
    values: mpsc::Receiver<Result<KeyValue, ControlError>>,
    task: JoinHandle<()>,
}

impl Observer {
    /// The next leader (its key and value); `None` once the observation has ended after
    /// an error.
    pub async fn next(&mut self) -> Option<Result<KeyValue, ControlError>> {
        self.values.recv().await
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The observation task: reopens the stream on another member when it breaks, and
/// reports a leader once even if the new stream repeats it.
async fn observe(
    client: EtcdClient,
    name: Vec<u8>,
    values: mpsc::Sender<Result<KeyValue, ControlError>>,
) {
    let mut last: Option<(String, i64)> = None;
    loop {
        let request = pb::LeaderRequest { name: name.clone() };
        let opened = client
            // No timeout: etcd answers (headers included) only once there is a leader.
            .call("etcd Election.Observe", None, |c| {
                let request = request.clone();
                async move { ElectionClient::new(c).observe(request).await }
            })
            .await;
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                tracing::warn!(error = %e, "etcd observation cannot open yet");
                tokio::time::sleep(REOPEN_PAUSE).await;
                continue;
            }
            Err(e) => {
                let _ = values.send(Err(e)).await;
                return;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(r)) => {
                    let Some(kv) = r.kv.map(KeyValue::from_pb) else {
                        continue;
                    };
                    let id = (kv.key.clone(), kv.mod_revision);
                    if last.as_ref() == Some(&id) {
                        continue;
                    }
                    last = Some(id);
                    if values.send(Ok(kv)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(s) if retryable(&s) => break,
                Err(s) => {
                    let _ = values
                        .send(Err(status_error("etcd Election.Observe", &s)))
                        .await;
                    return;
                }
            }
        }
        if values.is_closed() {
            return;
        }
        client.skip_member();
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}
