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
//! reports no later than etcd lets the lease go (see `lease.rs`); a leader that stops
//! acting then does not overlap its successor.

use std::future::Future;
use std::time::Duration;

use atmlab_rpc::etcd::v3electionpb as pb;
use atmlab_rpc::etcd::v3electionpb::election_client::ElectionClient;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{EtcdClient, KeyValue, Lease, LeaseWatch, REQUEST_TIMEOUT, retryable, status_error};
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
    lease: LeaseWatch,
}

impl Election {
    pub(super) fn new(client: EtcdClient) -> Self {
        Election { client }
    }

    /// Campaigns for `name` with `lease`, proclaiming `value` once elected; resolves
    /// when this campaigner is the leader.
    ///
    /// Waits as long as another leader holds the election. Fails with NOT_FOUND if
    /// the lease is lost meanwhile. Dropping the future stops waiting here, but the
    /// campaign's key stays in etcd with the lease: revoke or drop the lease too, or the
    /// key may be elected with nobody behind it (until the lease lapses).
    pub async fn campaign(
        &self,
        name: &str,
        value: impl Into<Vec<u8>>,
        lease: &Lease,
    ) -> Result<Leader, ControlError> {
        let request = pb::CampaignRequest {
            name: name.as_bytes().to_vec(),
            lease: lease.id(),
            value: value.into(),
        };
        // Retrying on another member is safe: a campaign with a lease that already has
        // its key in the election carries on with that key.
        let campaign = self.client.call("etcd Election.Campaign", None, |c| {
            let request = request.clone();
            async move { ElectionClient::new(c).campaign(request).await }
        });
        let reply = tokio::select! {
            reply = campaign => reply?,
            () = lease.lost() => return Err(lease_lost(lease.id())),
        };
        let key = reply.leader.ok_or(ControlError::Call {
            call: "etcd Election.Campaign",
            kind: ErrorKind::Other(13),
            message: "elected without a leader key".into(),
        })?;
        Ok(Leader {
            client: self.client.clone(),
            key,
            lease: lease.watch(),
        })
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

    /// Whether leadership is lost (its lease is).
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Resolves when leadership is lost: the lease lapsed, was revoked, or no keep-alive
    /// confirmed it within its TTL. From then on another campaigner may be leader.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.lease.lost()
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
