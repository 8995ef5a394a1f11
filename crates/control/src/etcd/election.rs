//! Leader election on etcd's election keys: etcd's election service
//! (`v3electionpb.Election`) for `leader`, `observe`, `proclaim` and `resign`; the
//! campaign in the client, as etcd's own client library runs it.
//!
//! An active and a standby connection manager for one owner (issue 26, beyond the
//! papers: xbind's manager of paper 000 §II-C is one process) must agree on which of
//! them acts. etcd's election: each campaigner puts a key `NAME/LEASE` attached to its
//! lease; the one with the oldest key is the leader, and the others wait until every
//! older key is gone, deleted by a resignation or with a lapsed lease. So leadership is exactly "my key is the oldest
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
    EtcdClient, KeyValue, Lease, LeaseWatch, REQUEST_TIMEOUT, WatchKind, Watcher, retryable,
    status_error,
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
    /// Waits as long as an older campaigner holds its key. Fails with NOT_FOUND if the
    /// lease is lost meanwhile. Dropping the future stops waiting, but the campaign's
    /// key stays in the queue with the lease: revoke the lease (or let it lapse), or a
    /// campaigner nobody listens to may be elected.
    ///
    /// The campaign runs here, in the client, as etcd's own client library runs it
    /// (`concurrency.Election`), on the keys etcd's election service uses (so `leader`,
    /// `observe`, `proclaim` and `resign` go through the service): put `NAME/LEASE` if
    /// absent, then wait until no key under `NAME/` is older. Not through the service's
    /// `Campaign`: a cancelled `Campaign` (its member hung, and the campaign moved to
    /// another) withdraws the key when the member gets round to it, possibly after the
    /// same lease's next attempt was elected with that very key. A failed step here is
    /// retried on the next member, and nothing withdraws a key behind the caller's back.
    pub async fn campaign(
        &self,
        name: &str,
        value: impl Into<Vec<u8>>,
        lease: &Lease,
    ) -> Result<Leader, ControlError> {
        let value = value.into();
        let run = async {
            let prefix = format!("{name}/");
            // The key etcd's election service gives a campaign: NAME/LEASE in hex.
            let key = format!("{prefix}{:x}", lease.id());
            let rev = match self
                .client
                .create(&key, value.clone(), Some(lease.id()))
                .await?
            {
                None => self.client.get(&key).await?.map(|kv| kv.create_revision),
                Some(existing) => {
                    // Ours from an earlier attempt: proclaim this value on it.
                    if existing.value != value {
                        self.client
                            .put(&key, value.clone(), Some(lease.id()))
                            .await?;
                    }
                    Some(existing.create_revision)
                }
            };
            let rev = rev.ok_or_else(|| lease_lost(lease.id()))?;
            self.wait_older_gone(&prefix, rev).await?;
            // Watch the key from its creation on, then check it is still ours: a delete
            // between the election and now is in the watch.
            let watcher = self.client.watch_key(&key, rev.saturating_add(1)).await?;
            match self.client.get(&key).await? {
                Some(kv) if kv.create_revision == rev && kv.lease == lease.id() => {
                    let leader = pb::LeaderKey {
                        name: name.as_bytes().to_vec(),
                        key: key.into_bytes(),
                        rev,
                        lease: lease.id(),
                    };
                    Ok(Leader::new(
                        self.client.clone(),
                        leader,
                        lease.watch(),
                        watcher,
                    ))
                }
                _ => Err(lease_lost(lease.id())),
            }
        };
        tokio::select! {
            leader = run => leader,
            () = lease.lost() => Err(lease_lost(lease.id())),
        }
    }

    /// Waits until no key under `prefix` was created before `rev` (etcd's
    /// `waitDeletes`): each time, the youngest older one is watched until deleted.
    async fn wait_older_gone(&self, prefix: &str, rev: i64) -> Result<(), ControlError> {
        use atmlab_rpc::etcd::etcdserverpb as kvpb;
        use kvpb::kv_client::KvClient;
        loop {
            let request = kvpb::RangeRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: super::prefix_end(prefix.as_bytes()),
                limit: 1,
                sort_order: kvpb::range_request::SortOrder::Descend as i32,
                sort_target: kvpb::range_request::SortTarget::Create as i32,
                max_create_revision: rev - 1,
                ..Default::default()
            };
            let reply = self
                .client
                .call("etcd KV.Range", Some(REQUEST_TIMEOUT), |c| {
                    let request = request.clone();
                    async move { KvClient::new(c).range(request).await }
                })
                .await?;
            let Some(older) = reply.kvs.into_iter().next() else {
                return Ok(());
            };
            let at = reply.header.map_or(0, |h| h.revision);
            let older = String::from_utf8_lossy(&older.key).into_owned();
            let mut watch = self.client.watch_key(&older, at).await?;
            loop {
                match watch.next().await {
                    Some(Ok(e)) if e.kind == WatchKind::Delete => break,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => {
                        return Err(ControlError::Call {
                            call: "etcd Watch.Watch",
                            kind: ErrorKind::Unavailable,
                            message: "the watch on an older campaigner ended".into(),
                        });
                    }
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
