//! A name service client, and the background renewal that keeps a registration alive.
//!
//! [`NameClient::register_and_renew`] registers, then renews every third of the granted
//! lease, so two renewals in a row may fail (a slow network, a name service restart)
//! before the registration lapses. If a renewal answers NOT_FOUND (the lease lapsed
//! anyway, or the name service restarted and forgot), the task registers again. Stopping
//! or dropping the [`RenewalHandle`] unregisters, best effort; if that fails too, the
//! lease lapses on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use atmlab_rpc::tls::TlsIdentity;
use atmlab_rpc::v1;
use atmlab_rpc::v1::name_service_client::NameServiceClient;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use super::ObjectInfo;
use super::ObjectKind;
use super::etcd::{Ending, EtcdNames, is_etcd, keep as keep_in_etcd};
use super::service::{kind_from_code, kind_to_code, object_from_proto};
use crate::ControlError;

/// The shortest pause between renewals, whatever the lease: a floor against a busy loop.
const MIN_RENEW_PERIOD: Duration = Duration::from_millis(10);
/// How long a stopping renewal task tries to unregister.
const UNREGISTER_TIMEOUT: Duration = Duration::from_secs(2);

/// A client of the registry: `atmlab.v1.NameService`, or the directory kept in an etcd
/// cluster (`names::etcd`). Cheap to clone (clones share the channel).
#[derive(Debug, Clone)]
pub struct NameClient {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    /// The name service.
    Grpc(NameServiceClient<Channel>),
    /// An etcd cluster.
    Etcd(EtcdNames),
}

impl NameClient {
    /// Connects to the registry at `addr`: a name service (`host:port` or a URI, with
    /// mutual TLS when `tls` is given), or an etcd cluster (`names::etcd`):
    /// `etcd://HOST:PORT,...` in plain HTTP/2, `etcds://HOST:PORT,...` over mutual TLS
    /// with `tls`.
    pub async fn connect(addr: &str, tls: Option<&TlsIdentity>) -> Result<Self, ControlError> {
        if is_etcd(addr) {
            if tls.is_some() && !addr.starts_with(crate::etcd::SCHEME_TLS) {
                warn_etcd_plain_text(addr);
            }
            return Ok(NameClient {
                backend: Backend::Etcd(EtcdNames::connect(addr, tls).await?),
            });
        }
        Ok(NameClient::new(
            atmlab_rpc::channel_to(
                addr,
                tls,
                atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Names),
            )
            .await?,
        ))
    }

    /// A client of the name service over an existing channel.
    pub fn new(channel: Channel) -> Self {
        NameClient {
            backend: Backend::Grpc(NameServiceClient::new(channel)),
        }
    }

    /// Whether the registry is an etcd cluster (not a name service).
    pub fn is_etcd(&self) -> bool {
        matches!(self.backend, Backend::Etcd(_))
    }

    /// Every change to the directory from now on, where the registry can tell: etcd's
    /// watch; `None` for the name service, whose readers poll.
    pub async fn watch(&self) -> Result<Option<crate::etcd::Watcher>, ControlError> {
        match &self.backend {
            Backend::Grpc(_) => Ok(None),
            Backend::Etcd(e) => e.watch().await.map(Some),
        }
    }

    /// The gRPC client, or the etcd directory.
    fn grpc(&self) -> Result<NameServiceClient<Channel>, &EtcdNames> {
        match &self.backend {
            Backend::Grpc(c) => Ok(c.clone()),
            Backend::Etcd(e) => Err(e),
        }
    }

    /// Registers (or re-registers) `object` for `lease` (the service's default when
    /// `None`); returns the lease granted, which the service may have clamped.
    pub async fn register(
        &self,
        object: &ObjectInfo,
        lease: Option<Duration>,
    ) -> Result<Duration, ControlError> {
        self.register_as(object, lease, false).await
    }

    /// Claims `object`'s name: registers it as [`NameClient::register`] does unless it
    /// is registered, live, at another address, which is refused with `Held` naming
    /// that address.
    pub async fn claim(
        &self,
        object: &ObjectInfo,
        lease: Option<Duration>,
    ) -> Result<Duration, ControlError> {
        self.register_as(object, lease, true).await
    }

    async fn register_as(
        &self,
        object: &ObjectInfo,
        lease: Option<Duration>,
        exclusive: bool,
    ) -> Result<Duration, ControlError> {
        let inner = match self.grpc() {
            Ok(inner) => inner,
            Err(etcd) => {
                // Nobody keeps this one alive: it lapses unless renewed by name.
                let (granted, lease) = etcd
                    .register_as(object, lease, exclusive, Arc::default())
                    .await?;
                lease.abandon();
                return Ok(granted);
            }
        };
        let lease_ms = lease.map_or(0, |l| {
            u64::try_from(l.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        let request = v1::RegisterRequest {
            object: Some(v1::ObjectRef {
                name: object.name.clone(),
                kind: kind_to_code(object.kind),
                address: object.address.clone(),
                attributes: object.attributes.clone().into_iter().collect(),
                lease_remaining_ms: 0,
            }),
            lease_ms,
            exclusive,
        };
        let reply = inner.clone().register(request).await.map_err(|s| {
            if exclusive && s.code() == tonic::Code::AlreadyExists {
                // The service's message names the holder.
                ControlError::Call {
                    call: "NameService.Register (a claim)",
                    kind: crate::ErrorKind::Other(6),
                    message: s.message().into(),
                }
            } else {
                from_status("NameService.Register", &object.name, s)
            }
        })?;
        Ok(Duration::from_millis(reply.into_inner().lease_ms))
    }

    /// Renews `name`'s lease; returns the lease. `NotRegistered` if it lapsed.
    pub async fn renew(&self, name: &str) -> Result<Duration, ControlError> {
        let inner = match self.grpc() {
            Ok(inner) => inner,
            Err(etcd) => return etcd.renew(name).await,
        };
        let reply = inner
            .clone()
            .renew(v1::RenewRequest { name: name.into() })
            .await
            .map_err(|s| from_status("NameService.Renew", name, s))?;
        Ok(Duration::from_millis(reply.into_inner().lease_ms))
    }

    /// Removes `name`. `NotRegistered` if it was not there.
    pub async fn unregister(&self, name: &str) -> Result<(), ControlError> {
        let inner = match self.grpc() {
            Ok(inner) => inner,
            Err(etcd) => return etcd.unregister(name).await,
        };
        inner
            .clone()
            .unregister(v1::UnregisterRequest { name: name.into() })
            .await
            .map_err(|s| from_status("NameService.Unregister", name, s))?;
        Ok(())
    }

    /// The object registered as `name`, and the time left on its lease.
    pub async fn resolve(&self, name: &str) -> Result<(ObjectInfo, Duration), ControlError> {
        let inner = match self.grpc() {
            Ok(inner) => inner,
            Err(etcd) => return etcd.resolve(name).await,
        };
        let reply = inner
            .clone()
            .resolve(v1::ResolveRequest { name: name.into() })
            .await
            .map_err(|s| from_status("NameService.Resolve", name, s))?;
        Ok(from_reply(reply.into_inner()))
    }

    /// Every live registration (of `kind` only, if given), ordered by name, with the time
    /// left on each lease.
    pub async fn list(
        &self,
        kind: Option<ObjectKind>,
    ) -> Result<Vec<(ObjectInfo, Duration)>, ControlError> {
        let inner = match self.grpc() {
            Ok(inner) => inner,
            Err(etcd) => return etcd.list(kind).await,
        };
        let reply = inner
            .clone()
            .list(v1::ListRequest {
                kind: kind.map_or(0, kind_to_code),
            })
            .await
            .map_err(|s| from_status("NameService.List", "", s))?;
        Ok(reply
            .into_inner()
            .objects
            .into_iter()
            .map(from_reply)
            .collect())
    }

    /// Registers `object` for `lease`, then keeps it registered from a background task
    /// (see the module doc) until the returned handle is stopped or dropped.
    ///
    /// The first registration happens before this returns, so its errors (an invalid
    /// object, no name service) are the caller's to handle.
    pub async fn register_and_renew(
        &self,
        object: ObjectInfo,
        lease: Duration,
    ) -> Result<RenewalHandle, ControlError> {
        self.keep(object, lease, false).await
    }

    /// [`NameClient::claim`], then keeps the claim as [`NameClient::register_and_renew`]
    /// keeps a registration; a claim that lapsed is made again as a claim, so that the
    /// name never passes to two holders at once.
    pub async fn claim_and_renew(
        &self,
        object: ObjectInfo,
        lease: Duration,
    ) -> Result<RenewalHandle, ControlError> {
        self.keep(object, lease, true).await
    }

    async fn keep(
        &self,
        object: ObjectInfo,
        lease: Duration,
        exclusive: bool,
    ) -> Result<RenewalHandle, ControlError> {
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = oneshot::channel();
        let name = object.name.clone();
        if let Backend::Etcd(etcd) = &self.backend {
            // etcd keeps the lease alive from the lease's own task; ours re-registers
            // if it is lost anyway.
            let (_, held) = etcd
                .register_as(&object, Some(lease), exclusive, counters.renewals.clone())
                .await?;
            let (etcd_stop, etcd_stopped) = oneshot::channel();
            let task = tokio::spawn({
                let counts = (counters.renewals.clone(), counters.reregistrations.clone());
                let etcd = etcd.clone();
                async move {
                    let forward = async move {
                        let how = stopped.await.unwrap_or(Stop::Unregister);
                        let _ = etcd_stop.send(match how {
                            Stop::Unregister => Ending::Unregister,
                            Stop::Abandon => Ending::Abandon,
                        });
                    };
                    let keeping =
                        keep_in_etcd(etcd, object, (lease, exclusive), held, counts, etcd_stopped);
                    tokio::join!(forward, keeping);
                }
            });
            return Ok(RenewalHandle {
                name,
                stop: Some(stop),
                task: Some(task),
                counters,
            });
        }
        let granted = self.register_as(&object, Some(lease), exclusive).await?;
        let task = tokio::spawn(renew_loop(
            self.clone(),
            object,
            (lease, exclusive),
            granted,
            counters.clone(),
            stopped,
        ));
        Ok(RenewalHandle {
            name,
            stop: Some(stop),
            task: Some(task),
            counters,
        })
    }
}

/// Warns, once per process, that a registry in etcd is reached in plain text although
/// this process has a TLS identity (etcd's TLS is not wired in; `docs/security.md`).
fn warn_etcd_plain_text(addr: &str) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            registry = addr,
            "the etcd registry is reached in plain HTTP/2, without TLS; anyone who can \
             reach its members can change the directory (etcds:// for TLS; \
             docs/security.md)"
        );
    });
}

/// Maps a status to an error: NOT_FOUND back to `NotRegistered`, so that callers (and the
/// renewal task) can tell "register again" from a failure.
fn from_status(call: &'static str, name: &str, status: tonic::Status) -> ControlError {
    match status.code() {
        tonic::Code::NotFound => ControlError::NotRegistered { name: name.into() },
        // A server without the NameService (a manager's or a switch's port given as the
        // name service's) answers UNIMPLEMENTED with no message: say what that means.
        tonic::Code::Unimplemented if status.message().is_empty() => ControlError::Call {
            call,
            kind: crate::ErrorKind::Other(12),
            message: "wrong service: the server there is not a name service".into(),
        },
        // The rest keep the service's code and message (INVALID_ARGUMENT's message
        // already says what was wrong with which name).
        code => ControlError::Call {
            call,
            kind: crate::ErrorKind::from_code(code as i32),
            message: status.message().into(),
        },
    }
}

fn from_reply(object: v1::ObjectRef) -> (ObjectInfo, Duration) {
    // A reply always carries a kind; an unspecified one (a broken server) shows as
    // Unknown(0) rather than failing the whole list.
    let kind = kind_from_code(object.kind).unwrap_or(ObjectKind::Unknown(object.kind));
    let remaining = Duration::from_millis(object.lease_remaining_ms);
    (object_from_proto(object, kind), remaining)
}

#[derive(Debug, Default)]
struct Counters {
    renewals: Arc<AtomicU64>,
    reregistrations: Arc<AtomicU64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Stop renewing and unregister.
    Unregister,
    /// Stop renewing and leave the registration to lapse.
    Abandon,
}

/// Keeps a registration alive (see [`NameClient::register_and_renew`]).
///
/// Dropping it stops the renewals and unregisters in the background (best effort: it
/// needs the tokio runtime to still be running); [`RenewalHandle::stop`] does the same
/// and waits for it.
#[derive(Debug)]
pub struct RenewalHandle {
    name: String,
    stop: Option<oneshot::Sender<Stop>>,
    task: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl RenewalHandle {
    /// The registered name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Successful renewals so far.
    pub fn renewals(&self) -> u64 {
        self.counters.renewals.load(Ordering::Relaxed)
    }

    /// Times the task had to register again after a renewal found the name gone.
    pub fn reregistrations(&self) -> u64 {
        self.counters.reregistrations.load(Ordering::Relaxed)
    }

    /// Stops renewing, unregisters (best effort), and waits for both.
    pub async fn stop(mut self) {
        self.finish(Stop::Unregister).await;
    }

    /// Stops renewing and leaves the registration to lapse when its lease runs out, as if
    /// the owner had crashed (for tests of failure handling, or a handover).
    pub async fn abandon(mut self) {
        self.finish(Stop::Abandon).await;
    }

    async fn finish(&mut self, how: Stop) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(how);
        }
        if let Some(task) = self.task.take() {
            // A panic in the task has already been reported by tokio; nothing to add.
            let _ = task.await;
        }
    }
}

impl Drop for RenewalHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Stop::Unregister);
        }
    }
}

async fn renew_loop(
    client: NameClient,
    object: ObjectInfo,
    (lease, exclusive): (Duration, bool),
    mut granted: Duration,
    counters: Arc<Counters>,
    mut stopped: oneshot::Receiver<Stop>,
) {
    let name = object.name.as_str();
    loop {
        let period = (granted / 3).max(MIN_RENEW_PERIOD);
        tokio::select! {
            biased;
            how = &mut stopped => {
                // A dropped sender without a message cannot happen (Drop sends), but
                // unregistering is the safe reading of it.
                if how.unwrap_or(Stop::Unregister) == Stop::Unregister {
                    match tokio::time::timeout(UNREGISTER_TIMEOUT, client.unregister(name)).await {
                        Ok(Ok(())) => tracing::debug!(%name, "unregistered"),
                        Ok(Err(error)) => tracing::debug!(%name, %error, "unregister failed; the lease will lapse"),
                        Err(_) => tracing::debug!(%name, "unregister timed out; the lease will lapse"),
                    }
                }
                return;
            }
            () = tokio::time::sleep(period) => {}
        }
        // A call that hangs must not outlive the next renewal's turn.
        match tokio::time::timeout(period, client.renew(name)).await {
            Ok(Ok(new)) => {
                granted = new;
                counters.renewals.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(ControlError::NotRegistered { .. })) => {
                let again = client.register_as(&object, Some(lease), exclusive);
                match tokio::time::timeout(period, again).await {
                    Ok(Ok(new)) => {
                        granted = new;
                        counters.reregistrations.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(%name, "registration had lapsed; registered again");
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%name, %error, "re-registration failed; retrying")
                    }
                    Err(_) => tracing::warn!(%name, "re-registration timed out; retrying"),
                }
            }
            Ok(Err(error)) => tracing::warn!(%name, %error, "renewal failed; retrying"),
            Err(_) => tracing::warn!(%name, "renewal timed out; retrying"),
        }
    }
}
