//! An etcd v3 client: the replicated store that lets the name service and a manager's
//! leadership survive a host (issue 26).
//!
//! xbind (paper 000 §II) and ReTINA (paper 001 §3) find their objects through one CORBA
//! naming service on one machine; a lab that spreads over hosts needs the directory to
//! outlive any one of them. Rather than a home-made replicated store, atmlab keeps it in
//! etcd, a Raft-replicated key-value store whose leases, keep-alives, watches and
//! elections are exactly what a leased name service and an active/standby manager need.
//!
//! This is a thin client over the stubs generated from etcd's own `.proto` files
//! (`atmlab_rpc::etcd`, compiled without `protoc`):
//!
//! - [`EtcdClient`]: a cluster given as `etcd://HOST:PORT,HOST:PORT,...`. Every request
//!   goes to one member; when that member is unreachable (or answers UNAVAILABLE, as a
//!   member without a Raft leader does) the request is tried on the next one, and later
//!   requests stay there. KV: [`EtcdClient::put`], [`EtcdClient::get`],
//!   [`EtcdClient::get_prefix`], [`EtcdClient::delete`], [`EtcdClient::create`] (put if
//!   absent).
//! - [`Lease`] (`lease.rs`): a granted lease kept alive by a background task, which
//!   reports through [`Lease::lost`] when the lease is gone (revoked, lapsed, or no
//!   keep-alive confirmed before its TTL ran out).
//! - [`Watcher`] (`watch.rs`): the changes under a prefix, resumed on another member
//!   from the last revision seen when one fails.
//! - [`Election`] (`election.rs`): leader election on etcd's election keys, through its
//!   election service (`v3electionpb.Election`) except for the campaign itself, which
//!   runs in the client as etcd's own client library runs it (see `election.rs` for
//!   why): [`Election::campaign`] resolves when elected, to a
//!   [`Leader`] whose [`Leader::lost`] fires when its lease is lost or its key is gone.
//!
//! A member that hangs (connections open, nothing answered) costs a unary request
//! `REQUEST_TIMEOUT` and a keep-alive a third of its TTL before the next member is
//! asked; streams without a time-out (a waiting campaign, a watch, an observation) find
//! the dead connection by HTTP/2 pings, within `PING_INTERVAL` + `PING_TIMEOUT`.
//!
//! `etcd://` is plain HTTP/2; `etcds://` is mutual TLS with the lab's certificates (each
//! member holding a `names` certificate of the lab CA and requiring a client
//! certificate from it): strangers are refused, but etcd does not know atmlab's roles,
//! so any lab certificate may read and write any key.
//!
//! Errors are [`ControlError`]s: an address that is not one is `Rpc(InvalidAddress)`, a
//! refusal or a failure on every member is `Call` naming the RPC (`"etcd KV.Range"`), a
//! lost lease is `Call` with kind NOT_FOUND.

mod election;
mod lease;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use atmlab_rpc::RpcError;
use atmlab_rpc::etcd::etcdserverpb as pb;
use atmlab_rpc::etcd::etcdserverpb::kv_client::KvClient;
use atmlab_rpc::etcd::mvccpb;
use tonic::transport::Channel;

pub use election::{Election, Leader, Observer};
pub use lease::{Lease, LeaseWatch};
pub use watch::{WatchEvent, WatchKind, Watcher};

use crate::{ControlError, ErrorKind};

/// How long one unary request may take on one member before the next is tried. Long
/// enough for a Raft round through a loaded member; short enough that a member that hung
/// (a host that died without closing its connections) does not hold a registration up
/// for long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The pause after every member failed once, before trying them all again (a cluster
/// electing a leader answers UNAVAILABLE for a moment).
const ROUND_PAUSE: Duration = Duration::from_millis(100);
/// How many times every member is tried before a request fails.
const ROUNDS: usize = 3;
/// HTTP/2 pings on a connection with streams open: a member that hangs without closing
/// its connections (its host died, a partition) fails the streams that have no time-out
/// of their own (a campaign waiting, a watch, an observation), which then move to the
/// next member. Not more often: etcd closes a connection pinged more often than its
/// `--grpc-keepalive-min-time` (5 s by default).
const PING_INTERVAL: Duration = Duration::from_secs(10);
/// How long a ping may go unanswered before the connection counts as dead.
const PING_TIMEOUT: Duration = Duration::from_secs(3);

/// The scheme of a cluster reached in plain HTTP/2.
pub const SCHEME: &str = "etcd://";
/// The scheme of a cluster reached over mutual TLS with the lab's certificates: each
/// member holds a certificate of role `names` from the lab CA (`atmlab certs issue
/// --role names NAME`) and requires a client certificate from it
/// (`--client-cert-auth --trusted-ca-file ca.pem`).
pub const SCHEME_TLS: &str = "etcds://";

/// Whether `spec` names an etcd cluster (either scheme).
pub fn is_cluster(spec: &str) -> bool {
    spec.starts_with(SCHEME) || spec.starts_with(SCHEME_TLS)
}

/// A client of an etcd cluster. Cheap to clone (clones share the connections).
#[derive(Debug, Clone)]
pub struct EtcdClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The members as given, `host:port`.
    addrs: Vec<String>,
    /// A lazily connected channel to each member (tonic reconnects it when it breaks).
    channels: Vec<Channel>,
    /// The member requests go to first: the last one that answered.
    current: AtomicUsize,
}

/// A key and its value, as etcd stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key (etcd keys are bytes; ours are UTF-8, anything else is shown lossily).
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
    /// The revision of the key's creation.
    pub create_revision: i64,
    /// The revision of its last change.
    pub mod_revision: i64,
    /// The lease it is attached to (0: none).
    pub lease: i64,
}

impl KeyValue {
    fn from_pb(kv: mvccpb::KeyValue) -> Self {
        KeyValue {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            value: kv.value,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            lease: kv.lease,
        }
    }
}

/// The members of `spec`: `etcd://HOST:PORT,HOST:PORT,...` or `etcds://...` (the
/// scheme may be left out).
///
/// # Errors
/// `Rpc(InvalidAddress)` for an empty list, an empty member, or another scheme.
pub fn parse_endpoints(spec: &str) -> Result<Vec<String>, ControlError> {
    let invalid = |reason: &str| {
        ControlError::Rpc(RpcError::InvalidAddress {
            addr: spec.to_owned(),
            reason: reason.to_owned(),
        })
    };
    let list = spec
        .strip_prefix(SCHEME)
        .or_else(|| spec.strip_prefix(SCHEME_TLS))
        .unwrap_or(spec);
    if list.contains("://") {
        return Err(invalid(
            "an etcd cluster is etcd://HOST:PORT,HOST:PORT,... (plain HTTP/2) or \
             etcds://HOST:PORT,... (mutual TLS); no other scheme",
        ));
    }
    let members: Vec<String> = list.split(',').map(|m| m.trim().to_owned()).collect();
    if members.iter().any(|m| m.is_empty() || !m.contains(':')) {
        return Err(invalid("every member must be HOST:PORT"));
    }
    Ok(members)
}

/// The end of the range of every key starting with `prefix` (etcd's `range_end`): the
/// prefix with its last byte that is not 0xff incremented, or `\0` (every key) when
/// there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl EtcdClient {
    /// A client of the cluster `endpoints` (`etcd://HOST:PORT,...`, see
    /// [`parse_endpoints`]), after checking that one member answers.
    ///
    /// # Errors
    /// An invalid list, or no member answering (`Call` with UNAVAILABLE).
    pub async fn connect(endpoints: &str) -> Result<Self, ControlError> {
        EtcdClient::connect_with(endpoints, None).await
    }

    /// [`EtcdClient::connect`], over mutual TLS with `tls` for an `etcds://` cluster
    /// (the members must show a `names` certificate of the lab CA); `etcd://` is plain
    /// HTTP/2 and does not use `tls`.
    ///
    /// # Errors
    /// As [`EtcdClient::connect`]; an `etcds://` cluster without `tls`.
    pub async fn connect_with(
        endpoints: &str,
        tls: Option<&atmlab_rpc::tls::TlsIdentity>,
    ) -> Result<Self, ControlError> {
        let client = EtcdClient::lazy_with(endpoints, tls)?;
        client.status().await?;
        Ok(client)
    }

    /// A client of the cluster `endpoints` that connects on the first request.
    ///
    /// # Errors
    /// An invalid list.
    pub fn lazy(endpoints: &str) -> Result<Self, ControlError> {
        EtcdClient::lazy_with(endpoints, None)
    }

    /// [`EtcdClient::lazy`], with TLS as [`EtcdClient::connect_with`] says.
    ///
    /// # Errors
    /// An invalid list; an `etcds://` cluster without `tls`.
    pub fn lazy_with(
        endpoints: &str,
        tls: Option<&atmlab_rpc::tls::TlsIdentity>,
    ) -> Result<Self, ControlError> {
        use atmlab_rpc::tls::{Expect, Role};
        let addrs = parse_endpoints(endpoints)?;
        let tls = if endpoints.starts_with(SCHEME_TLS) {
            let Some(identity) = tls else {
                return Err(ControlError::Rpc(RpcError::InvalidAddress {
                    addr: endpoints.to_owned(),
                    reason: "an etcds:// cluster needs a TLS identity (certificate, key and \
                             CA); etcd:// is plain HTTP/2"
                        .to_owned(),
                }));
            };
            Some(identity.expecting(Expect::Role(Role::Names)))
        } else {
            None
        };
        let channels = addrs
            .iter()
            .map(|a| {
                Ok(atmlab_rpc::endpoint(a, tls.as_ref())?
                    .http2_keep_alive_interval(PING_INTERVAL)
                    .keep_alive_timeout(PING_TIMEOUT)
                    .keep_alive_while_idle(false)
                    .connect_lazy())
            })
            .collect::<Result<Vec<_>, RpcError>>()?;
        Ok(EtcdClient {
            inner: Arc::new(Inner {
                addrs,
                channels,
                current: AtomicUsize::new(0),
            }),
        })
    }

    /// The members, `host:port`, in the order given.
    pub fn members(&self) -> &[String] {
        &self.inner.addrs
    }

    /// The member requests go to now (the last one that answered).
    pub fn current_member(&self) -> &str {
        &self.inner.addrs[self.inner.current.load(Ordering::Relaxed) % self.inner.addrs.len()]
    }

    /// Sends later requests to the next member (a stream on the current one broke).
    pub(crate) fn skip_member(&self) {
        let n = self.inner.channels.len();
        let _ = self
            .inner
            .current
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some((c + 1) % n));
    }

    /// Runs `f` on a member's channel, moving on to the next member when it fails for
    /// want of the member (see [`retryable`]), for [`ROUNDS`] rounds; each attempt is cut
    /// at `timeout` when one is given (blocking calls, such as a campaign, have none).
    pub(crate) async fn call<T, F, Fut>(
        &self,
        call: &'static str,
        timeout: Option<Duration>,
        mut f: F,
    ) -> Result<T, ControlError>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let n = self.inner.channels.len();
        let start = self.inner.current.load(Ordering::Relaxed);
        let mut last = None;
        for attempt in 0..ROUNDS * n {
            if attempt > 0 && attempt % n == 0 {
                tokio::time::sleep(ROUND_PAUSE).await;
            }
            let member = (start + attempt) % n;
            let reply = f(self.inner.channels[member].clone());
            let reply = match timeout {
                Some(t) => match tokio::time::timeout(t, reply).await {
                    Ok(r) => r,
                    Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                        "no answer within {t:?}"
                    ))),
                },
                None => reply.await,
            };
            match reply {
                Ok(r) => {
                    self.inner.current.store(member, Ordering::Relaxed);
                    return Ok(r.into_inner());
                }
                Err(s) if retryable(&s) => {
                    tracing::debug!(
                        member = %self.inner.addrs[member],
                        call,
                        status = %s.message(),
                        "etcd member failed; trying the next"
                    );
                    // Later requests start from the next member.
                    self.inner
                        .current
                        .store((member + 1) % n, Ordering::Relaxed);
                    last = Some((member, s));
                }
                Err(s) => return Err(status_error(call, &s)),
            }
        }
        let (member, s) = last.expect("at least one member");
        Err(ControlError::Call {
            call,
            kind: ErrorKind::Unavailable,
            message: format!(
                "no etcd member answered ({} tried {ROUNDS} times; last, {}: {})",
                n,
                self.inner.addrs[member],
                s.message()
            ),
        })
    }

    /// The status of the member that answers (its version, its Raft leader and term).
    pub async fn status(&self) -> Result<pb::StatusResponse, ControlError> {
        use pb::maintenance_client::MaintenanceClient;
        self.call(
            "etcd Maintenance.Status",
            Some(REQUEST_TIMEOUT),
            |c| async move { MaintenanceClient::new(c).status(pb::StatusRequest {}).await },
        )
        .await
    }

    /// Sets `key` to `value`, attached to `lease` when given (the key goes when the lease
    /// does); returns the revision of the change.
    pub async fn put(
        &self,
        key: &str,
        value: impl Into<Vec<u8>>,
        lease: Option<i64>,
    ) -> Result<i64, ControlError> {
        let request = pb::PutRequest {
            key: key.as_bytes().to_vec(),
            value: value.into(),
            lease: lease.unwrap_or(0),
            ..Default::default()
        };
        let reply = self
            .call("etcd KV.Put", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { KvClient::new(c).put(request).await }
            })
            .await?;
        Ok(revision(reply.header.as_ref()))
    }

    /// Creates `key` with `value` (attached to `lease` when given) unless it exists;
    /// returns `Ok(None)` when created, or the key as it stands when it already existed.
    pub async fn create(
        &self,
        key: &str,
        value: impl Into<Vec<u8>>,
        lease: Option<i64>,
    ) -> Result<Option<KeyValue>, ControlError> {
        let key = key.as_bytes().to_vec();
        let request = pb::TxnRequest {
            compare: vec![pb::Compare {
                result: pb::compare::CompareResult::Equal as i32,
                target: pb::compare::CompareTarget::Create as i32,
                key: key.clone(),
                target_union: Some(pb::compare::TargetUnion::CreateRevision(0)),
                ..Default::default()
            }],
            success: vec![pb::RequestOp {
                request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                    key: key.clone(),
                    value: value.into(),
                    lease: lease.unwrap_or(0),
                    ..Default::default()
                })),
            }],
            failure: vec![pb::RequestOp {
                request: Some(pb::request_op::Request::RequestRange(pb::RangeRequest {
                    key,
                    ..Default::default()
                })),
            }],
        };
        let reply = self
            .call("etcd KV.Txn", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { KvClient::new(c).txn(request).await }
            })
            .await?;
        if reply.succeeded {
            return Ok(None);
        }
        let existing = reply.responses.into_iter().find_map(|r| match r.response {
            Some(pb::response_op::Response::ResponseRange(range)) => range.kvs.into_iter().next(),
            _ => None,
        });
        // Deleted between the compare and the read of the same transaction cannot happen;
        // an empty answer would be etcd's bug, reported as such.
        existing
            .map(KeyValue::from_pb)
            .map(Some)
            .ok_or(ControlError::Call {
                call: "etcd KV.Txn",
                kind: ErrorKind::Other(13),
                message: "a failed create-if-absent returned no key".into(),
            })
    }

    /// The key `key`, if it exists.
    pub async fn get(&self, key: &str) -> Result<Option<KeyValue>, ControlError> {
        let (kvs, _) = self.range(key.as_bytes().to_vec(), Vec::new()).await?;
        Ok(kvs.into_iter().next())
    }

    /// Every key starting with `prefix`, in key order, and the store's revision when read
    /// (a watch from the revision after it misses no change).
    pub async fn get_prefix(&self, prefix: &str) -> Result<(Vec<KeyValue>, i64), ControlError> {
        self.range(prefix.as_bytes().to_vec(), prefix_end(prefix.as_bytes()))
            .await
    }

    async fn range(
        &self,
        key: Vec<u8>,
        range_end: Vec<u8>,
    ) -> Result<(Vec<KeyValue>, i64), ControlError> {
        let request = pb::RangeRequest {
            key,
            range_end,
            ..Default::default()
        };
        let reply = self
            .call("etcd KV.Range", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { KvClient::new(c).range(request).await }
            })
            .await?;
        let rev = revision(reply.header.as_ref());
        Ok((reply.kvs.into_iter().map(KeyValue::from_pb).collect(), rev))
    }

    /// Deletes `key`; returns whether it existed.
    pub async fn delete(&self, key: &str) -> Result<bool, ControlError> {
        Ok(self
            .delete_range(key.as_bytes().to_vec(), Vec::new())
            .await?
            > 0)
    }

    /// Deletes every key starting with `prefix`; returns how many there were.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<i64, ControlError> {
        self.delete_range(prefix.as_bytes().to_vec(), prefix_end(prefix.as_bytes()))
            .await
    }

    async fn delete_range(&self, key: Vec<u8>, range_end: Vec<u8>) -> Result<i64, ControlError> {
        let request = pb::DeleteRangeRequest {
            key,
            range_end,
            ..Default::default()
        };
        let reply = self
            .call("etcd KV.DeleteRange", Some(REQUEST_TIMEOUT), |c| {
                let request = request.clone();
                async move { KvClient::new(c).delete_range(request).await }
            })
            .await?;
        Ok(reply.deleted)
    }

    /// Grants a lease of `ttl` (etcd may raise it to its minimum, about 1.5 election
    /// timeouts) and keeps it alive from a background task until the [`Lease`] is revoked,
    /// abandoned or dropped.
    pub async fn grant(&self, ttl: Duration) -> Result<Lease, ControlError> {
        Lease::grant(self, ttl).await
    }

    /// The changes to keys under `prefix` from revision `from` (0: from now on).
    pub async fn watch_prefix(&self, prefix: &str, from: i64) -> Result<Watcher, ControlError> {
        Watcher::start(
            self,
            prefix.as_bytes().to_vec(),
            prefix_end(prefix.as_bytes()),
            from,
        )
        .await
    }

    /// The changes to the key `key` from revision `from` (0: from now on).
    pub async fn watch_key(&self, key: &str, from: i64) -> Result<Watcher, ControlError> {
        Watcher::start(self, key.as_bytes().to_vec(), Vec::new(), from).await
    }

    /// The election service of this cluster.
    pub fn election(&self) -> Election {
        Election::new(self.clone())
    }
}

/// The revision a response header carries (0 without one).
fn revision(header: Option<&pb::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}

/// Whether a status means "this member cannot answer now" (try another), rather than a
/// refusal every member would give.
///
/// etcd answers UNAVAILABLE when a member has no Raft leader or lost it mid-request;
/// tonic reports a connection refused or reset as UNAVAILABLE, or as UNKNOWN or
/// CANCELLED with a transport error; [`EtcdClient::call`] reports its own timeout as
/// DEADLINE_EXCEEDED. etcd's own UNKNOWN refusals (such as the election service's
/// "election: no leader") carry no transport error and are not retried.
pub(crate) fn retryable(s: &tonic::Status) -> bool {
    match s.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => true,
        tonic::Code::Unknown | tonic::Code::Cancelled | tonic::Code::Internal => {
            let m = s.message();
            m.contains("transport")
                || m.contains("connection")
                || m.contains("h2 protocol")
                || m.contains("broken pipe")
                || s.code() == tonic::Code::Cancelled
        }
        _ => false,
    }
}

/// A refusal as a [`ControlError::Call`].
pub(crate) fn status_error(call: &'static str, s: &tonic::Status) -> ControlError {
    ControlError::Call {
        call,
        kind: ErrorKind::from_code(s.code() as i32),
        message: s.message().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_or_without_the_scheme() {
        assert_eq!(
            parse_endpoints("etcd://10.0.0.1:2379,h2:2379").unwrap(),
            ["10.0.0.1:2379", "h2:2379"]
        );
        assert_eq!(parse_endpoints("h:1").unwrap(), ["h:1"]);
        for bad in ["etcd://", "etcd://h:1,", "https://h:1", "etcd://h"] {
            let e = parse_endpoints(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn a_prefix_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"/atmlab/names/"), b"/atmlab/names0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn only_a_member_s_failure_is_retried() {
        assert!(retryable(&tonic::Status::unavailable(
            "etcdserver: no leader"
        )));
        assert!(retryable(&tonic::Status::unknown("transport error")));
        assert!(!retryable(&tonic::Status::unknown("election: no leader")));
        assert!(!retryable(&tonic::Status::not_found(
            "etcdserver: requested lease not found"
        )));
    }
}
