//! The live shell of the name service: `atmlab.v1.NameService` over a [`Directory`].
//!
//! One `std::sync::Mutex` guards the directory: every operation is a few map lookups and
//! never awaits while holding it, so a lock is cheaper than a channel to an actor task.
//! Time is a [`LiveClock`] started with the service. Requests are validated by the core;
//! its errors become statuses (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED) whose
//! messages name the object and what was wrong. A sweeper task removes lapsed
//! registrations as their leases run out and logs each, so an operator sees a switch
//! server drop out.
//!
//! Who may register what (issue 24: a host's certificate re-registered `switch/s2` at a
//! false address and unregistered `switch/s3`): each identity only its own names
//! ([`may_hold`]): a switch `switch/NAME` and the hosts at its own ports (`host/H` whose
//! `switch` attribute is NAME: the switch's file is where a host's attachment is
//! configured), a host `host/NAME`, a manager the managers',
//! route objects' and QoS mappers' names and its own `owner/NAME` claim, a name service
//! its federation entries; an admin anything; an observer nothing. A live registration
//! is replaced, renewed or removed only by the identity that made it (or an admin).
//! Anyone in the lab may resolve and list.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use atmlab_core::time::Duration;
use atmlab_rpc::tls::{Caller, PeerInfo, Role, TlsIdentity};
use atmlab_rpc::v1;
use atmlab_rpc::v1::name_service_server::{NameService, NameServiceServer};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use super::{Directory, DirectoryConfig, ObjectInfo, ObjectKind, Registration};
use crate::ControlError;
use atmlab_core::clock::LiveClock;

/// The name service: a [`Directory`] behind the generated tonic trait.
///
/// Cheap to clone (clones share the directory). Serve it with [`NameServiceImpl::serve`],
/// or add [`NameServiceImpl::server`] to a tonic router of your own and run
/// [`NameServiceImpl::sweep`] beside it.
#[derive(Debug, Clone)]
pub struct NameServiceImpl {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    directory: Mutex<Directory>,
    clock: LiveClock,
    /// Wakes the sweeper when a registration may have brought the next expiry forward.
    registered: Notify,
    /// The accept loop's counters, once [`NameServiceImpl::serve`] has made it.
    incoming: std::sync::OnceLock<atmlab_rpc::tls::IncomingStats>,
}

/// Serves a name service with the default [`DirectoryConfig`] on `listener` until
/// `shutdown` completes; with `tls`, every caller must present a certificate from the lab
/// CA (refusals are logged at `warn`). See [`NameServiceImpl::serve`].
pub async fn serve_names(
    listener: TcpListener,
    tls: Option<TlsIdentity>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ControlError> {
    NameServiceImpl::new(DirectoryConfig::default())
        .serve(listener, tls, shutdown)
        .await
}

impl NameServiceImpl {
    /// A name service with an empty directory; its clock starts now.
    pub fn new(config: DirectoryConfig) -> Self {
        NameServiceImpl {
            shared: Arc::new(Shared {
                directory: Mutex::new(Directory::new(config)),
                clock: LiveClock::start(),
                registered: Notify::new(),
                incoming: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The tonic service, for `Server::builder().add_service(..)`.
    pub fn server(&self) -> NameServiceServer<Self> {
        NameServiceServer::new(self.clone())
    }

    /// Serves on `listener` (mutual TLS with `tls`, plain HTTP/2 without) until
    /// `shutdown` completes, with the sweeper running beside it.
    pub async fn serve(
        self,
        listener: TcpListener,
        tls: Option<TlsIdentity>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ControlError> {
        let sweeper = tokio::spawn({
            let service = self.clone();
            async move { service.sweep().await }
        });
        let routes = atmlab_rpc::Services::new(self.server());
        let result = match atmlab_rpc::tls::grpc_incoming(listener, tls.as_ref()) {
            Ok(incoming) => {
                let _ = self.shared.incoming.set(incoming.stats());
                atmlab_rpc::serve_incoming("name service", incoming, routes, shutdown).await
            }
            Err(e) => Err(e),
        };
        sweeper.abort();
        Ok(result?)
    }

    /// Entries held now (lapsed ones not yet swept included) and what the directory has
    /// done so far (the metrics).
    pub fn stats(&self) -> (usize, crate::names::DirectoryStats) {
        let d = self.directory();
        (d.len(), d.stats())
    }

    /// The counters of the accept loop, once serving.
    pub fn tls_stats(&self) -> Option<atmlab_rpc::tls::IncomingStats> {
        self.shared.incoming.get().cloned()
    }

    /// Removes registrations as their leases lapse, logging each; never returns. Optional
    /// for correctness (a lapsed entry is invisible at once), needed for the log and to
    /// free the memory.
    pub async fn sweep(&self) {
        loop {
            let next = self.directory().poll_timeout();
            let wait = next.map(|t| t.saturating_duration_since(self.shared.clock.now()));
            match wait {
                Some(wait) => {
                    let wait = std::time::Duration::from(wait);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.shared.registered.notified() => {}
                    }
                }
                // `notify_one` stores a permit, so a registration between the check
                // above and this wait is not missed.
                None => self.shared.registered.notified().await,
            }
            let now = self.shared.clock.now();
            for lapsed in self.directory().expire(now) {
                tracing::info!(
                    name = %lapsed.object.name,
                    kind = ?lapsed.object.kind,
                    address = %lapsed.object.address,
                    "registration lapsed (not renewed)"
                );
            }
        }
    }

    /// Live registrations now, of `kind` only if given, ordered by name (for status
    /// pages and tests).
    pub fn registrations(&self, kind: Option<ObjectKind>) -> Vec<Registration> {
        let now = self.shared.clock.now();
        self.directory()
            .list(now, kind)
            .into_iter()
            .cloned()
            .collect()
    }

    fn directory(&self) -> MutexGuard<'_, Directory> {
        // No operation panics halfway through an update, so a poisoned lock still guards a
        // consistent directory.
        self.shared
            .directory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Who made a request, for the log.
fn peer<T>(request: &Request<T>) -> String {
    request
        .extensions()
        .get::<PeerInfo>()
        .and_then(|p| p.remote_addr)
        .map_or_else(|| "?".to_owned(), |a| a.to_string())
}

/// Whether the identity `id` may hold (register, renew, remove) `object`; see the module
/// doc. Admins are not asked.
pub fn may_hold(id: &atmlab_rpc::tls::PeerIdentity, object: &ObjectInfo) -> bool {
    let (kind, name) = (object.kind, object.name.as_str());
    let own = |prefix: &str| name.strip_prefix(prefix) == Some(id.name.as_str());
    match id.role {
        Role::Admin => true,
        Role::Switch => match kind {
            ObjectKind::SwitchServer => own("switch/"),
            // A host at one of its own ports: the switch serves that port, so the
            // claim is about itself (a switch run apart registers its hosts).
            ObjectKind::Host => {
                name.starts_with("host/") && object.attributes.get("switch") == Some(&id.name)
            }
            _ => false,
        },
        Role::Host => kind == ObjectKind::Host && own("host/"),
        Role::Cm => match kind {
            ObjectKind::ConnectionManager | ObjectKind::RouteObject | ObjectKind::QosMapper => true,
            ObjectKind::OwnerClaim => own("owner/"),
            _ => false,
        },
        Role::Names => kind == ObjectKind::NameService,
        Role::Observer => false,
    }
}

/// `Ok` if `caller` may hold `object`, else `PermissionDenied` naming both.
fn check_hold(caller: &Caller, object: &ObjectInfo, what: &str) -> Result<(), Status> {
    let (kind, name) = (object.kind, &object.name);
    let allowed = match caller {
        Caller::Insecure => true,
        Caller::Known(id) => may_hold(id, object),
        Caller::Unknown => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "{caller} may not {what} {:?} ({kind:?}): an identity holds only its own names",
            name.chars().take(128).collect::<String>()
        )))
    }
}

/// The holder a registration by `caller` records: its identity, except an admin's or a
/// plain-text caller's (which any rightful holder may replace).
fn holder_of(caller: &Caller) -> Option<String> {
    caller
        .identity()
        .filter(|id| id.role != Role::Admin)
        .map(|id| id.to_string())
}

/// `Ok` if `caller` may renew or remove the live registration `reg`: its holder, an
/// admin, or (for one an admin made) an identity that may hold the name.
fn check_holder(caller: &Caller, reg: &Registration, what: &str) -> Result<(), Status> {
    // `is(&[])`: an admin, or plain text.
    if caller.is(&[]) {
        return Ok(());
    }
    match (&reg.holder, holder_of(caller)) {
        (Some(theirs), Some(me)) if *theirs == me => Ok(()),
        (Some(theirs), _) => Err(Status::permission_denied(format!(
            "{caller} may not {what} {:?}: it is held by {theirs}",
            reg.object.name
        ))),
        (None, _) => check_hold(caller, &reg.object, what),
    }
}

#[tonic::async_trait]
impl NameService for NameServiceImpl {
    async fn register(
        &self,
        request: Request<v1::RegisterRequest>,
    ) -> Result<Response<v1::RegisterReply>, Status> {
        let peer = peer(&request);
        let caller = Caller::of(&request);
        let v1::RegisterRequest {
            object,
            lease_ms,
            exclusive,
        } = request.into_inner();
        let object = object.ok_or_else(|| Status::invalid_argument("Register needs an object"))?;
        let Some(kind) = kind_from_code(object.kind) else {
            return Err(Status::invalid_argument(format!(
                "invalid registration of {:?}: kind is OBJECT_KIND_UNSPECIFIED; say what the \
                 object is (SWITCH_SERVER, CONNECTION_MANAGER, ...)",
                object.name
            )));
        };
        let object = object_from_proto(object, kind);
        check_hold(&caller, &object, "register")?;
        let holder = holder_of(&caller);
        let lease = (lease_ms != 0).then(|| Duration::from_millis(lease_ms));
        let now = self.shared.clock.now();
        let granted = if exclusive {
            self.directory()
                .claim_held(now, object.clone(), lease, holder)?
        } else {
            self.directory()
                .register_held(now, object.clone(), lease, holder)?
        };
        self.shared.registered.notify_one();
        tracing::info!(
            name = %object.name,
            kind = ?object.kind,
            address = %object.address,
            lease = %granted,
            %peer,
            "registered"
        );
        Ok(Response::new(v1::RegisterReply {
            lease_ms: millis_ceil(granted),
        }))
    }

    async fn renew(
        &self,
        request: Request<v1::RenewRequest>,
    ) -> Result<Response<v1::RenewReply>, Status> {
        let caller = Caller::of(&request);
        let name = request.into_inner().name;
        let now = self.shared.clock.now();
        let granted = {
            let mut d = self.directory();
            check_holder(&caller, d.resolve(now, &name)?, "renew")?;
            d.renew(now, &name)?
        };
        // Renewals come every few seconds from every object: debug, not info.
        tracing::debug!(%name, "renewed");
        Ok(Response::new(v1::RenewReply {
            lease_ms: millis_ceil(granted),
        }))
    }

    async fn unregister(
        &self,
        request: Request<v1::UnregisterRequest>,
    ) -> Result<Response<v1::UnregisterReply>, Status> {
        let peer = peer(&request);
        let caller = Caller::of(&request);
        let name = request.into_inner().name;
        let now = self.shared.clock.now();
        {
            let mut d = self.directory();
            check_holder(&caller, d.resolve(now, &name)?, "unregister")?;
            d.unregister(now, &name)?;
        }
        tracing::info!(%name, %peer, "unregistered");
        Ok(Response::new(v1::UnregisterReply {}))
    }

    async fn resolve(
        &self,
        request: Request<v1::ResolveRequest>,
    ) -> Result<Response<v1::ObjectRef>, Status> {
        Caller::of(&request).require(&Role::ALL, "resolve names")?;
        let name = request.into_inner().name;
        let now = self.shared.clock.now();
        let reply = object_to_proto(self.directory().resolve(now, &name)?, now);
        Ok(Response::new(reply))
    }

    async fn list(
        &self,
        request: Request<v1::ListRequest>,
    ) -> Result<Response<v1::ListReply>, Status> {
        Caller::of(&request).require(&Role::ALL, "list names")?;
        let code = request.into_inner().kind;
        let kind = match kind_from_code(code) {
            None => None,
            Some(ObjectKind::Unknown(_)) => {
                return Err(Status::invalid_argument(format!(
                    "List: unknown object kind {code}"
                )));
            }
            Some(kind) => Some(kind),
        };
        let now = self.shared.clock.now();
        let objects = self
            .directory()
            .list(now, kind)
            .into_iter()
            .map(|r| object_to_proto(r, now))
            .collect();
        Ok(Response::new(v1::ListReply { objects }))
    }
}

/// `None` for OBJECT_KIND_UNSPECIFIED; numbers this build does not know become
/// [`ObjectKind::Unknown`].
pub(super) fn kind_from_code(code: i32) -> Option<ObjectKind> {
    use v1::ObjectKind as P;
    Some(match P::try_from(code) {
        Ok(P::Unspecified) => return None,
        Ok(P::SwitchServer) => ObjectKind::SwitchServer,
        Ok(P::ConnectionManager) => ObjectKind::ConnectionManager,
        Ok(P::RouteObject) => ObjectKind::RouteObject,
        Ok(P::QosMapper) => ObjectKind::QosMapper,
        Ok(P::Host) => ObjectKind::Host,
        Ok(P::NameService) => ObjectKind::NameService,
        Ok(P::OwnerClaim) => ObjectKind::OwnerClaim,
        Err(_) => ObjectKind::Unknown(code),
    })
}

pub(super) fn kind_to_code(kind: ObjectKind) -> i32 {
    use v1::ObjectKind as P;
    match kind {
        ObjectKind::SwitchServer => P::SwitchServer as i32,
        ObjectKind::ConnectionManager => P::ConnectionManager as i32,
        ObjectKind::RouteObject => P::RouteObject as i32,
        ObjectKind::QosMapper => P::QosMapper as i32,
        ObjectKind::Host => P::Host as i32,
        ObjectKind::NameService => P::NameService as i32,
        ObjectKind::OwnerClaim => P::OwnerClaim as i32,
        ObjectKind::Unknown(code) => code,
    }
}

pub(super) fn object_from_proto(object: v1::ObjectRef, kind: ObjectKind) -> ObjectInfo {
    ObjectInfo {
        name: object.name,
        kind,
        address: object.address,
        attributes: object.attributes.into_iter().collect(),
    }
}

pub(super) fn object_to_proto(r: &Registration, now: atmlab_core::time::Instant) -> v1::ObjectRef {
    v1::ObjectRef {
        name: r.object.name.clone(),
        kind: kind_to_code(r.object.kind),
        address: r.object.address.clone(),
        attributes: r
            .object
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        lease_remaining_ms: millis_ceil(r.remaining(now)),
    }
}

/// Milliseconds, rounded up: a live registration never reports 0 ms left.
fn millis_ceil(d: Duration) -> u64 {
    d.as_picos().div_ceil(1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_the_idl_numbers() {
        for kind in [
            ObjectKind::SwitchServer,
            ObjectKind::ConnectionManager,
            ObjectKind::RouteObject,
            ObjectKind::QosMapper,
            ObjectKind::Host,
            ObjectKind::NameService,
            ObjectKind::OwnerClaim,
            ObjectKind::Unknown(77),
        ] {
            assert_eq!(kind_from_code(kind_to_code(kind)), Some(kind));
        }
        assert_eq!(kind_from_code(0), None);
    }

    #[test]
    fn millis_round_up() {
        assert_eq!(millis_ceil(Duration::ZERO), 0);
        assert_eq!(millis_ceil(Duration::from_picos(1)), 1);
        assert_eq!(millis_ceil(Duration::from_millis(200)), 200);
        assert_eq!(millis_ceil(Duration::MAX), u64::MAX / 1_000_000_000 + 1);
    }
}
