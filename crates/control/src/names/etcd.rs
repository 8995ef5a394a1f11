//! The name service kept in etcd: the registry that survives a host (issue 26, item 2).
//!
//! The papers' objects find each other through one naming service (paper 000 §II,
//! paper 001 §3); atmlab's in-process name service is that, on one machine. Given
//! `etcd://HOST:PORT,...` instead of a name service's URL, a [`NameClient`] keeps the
//! directory in an etcd cluster, so that any process finds the others through any
//! member, and the directory outlives any one host:
//!
//! - an entry is the key `/atmlab/names/NAME` (the prefix is `/PREFIX/names/` with
//!   `etcd://HOST:PORT,.../PREFIX`), whose value is the object as JSON (`name`, `kind`,
//!   `address`, `attributes`: readable with `etcdctl get --prefix /atmlab/names/`);
//! - each registration has an etcd lease of its own (the lease asked for, in whole
//!   seconds, at least etcd's minimum) kept alive by the registering process
//!   ([`NameClient::register_and_renew`]); when that process dies the lease lapses and
//!   etcd deletes the entry, as the name service's sweeper does;
//! - resolve is a get, list a range over the prefix, with the time left on each lease
//!   (one `LeaseTimeToLive` per entry, asked concurrently; etcd counts it in whole
//!   seconds, rounded down);
//! - a claim ([`NameClient::claim`]) is a transaction: the key is created only if
//!   absent; if it is there at another address the claim is refused as the name
//!   service refuses it (ALREADY_EXISTS, naming the holder).
//!
//! `etcd://` reaches the cluster in plain HTTP/2; `etcds://` over mutual TLS with the
//! lab's certificates (each member holding a `names` certificate), which keeps
//! strangers out.
//!
//! What the name service checks that etcd does not: names and objects are validated
//! here, before writing, as the directory validates them; but the role rules of
//! `docs/security.md` (an identity holds only its own names) are the name service's,
//! and in etcd mode atmlab does not enforce them: whoever can write to the cluster (with
//! `etcds://`, any lab certificate) can write any entry. etcd's own users and roles are
//! not wired in.
//!
//! [`NameClient`]: super::NameClient
//! [`NameClient::register_and_renew`]: super::NameClient::register_and_renew
//! [`NameClient::claim`]: super::NameClient::claim

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::ObjectInfo;
use super::ObjectKind;
use super::directory::{validate_name, validate_object};
use crate::ControlError;
use crate::etcd::{EtcdClient, KeyValue, Lease, Watcher};

/// The lease of a registration that asks for none (the name service's default).
const DEFAULT_LEASE: Duration = Duration::from_secs(10);
/// The longest lease granted (the name service's bound): a dead object lingers at most
/// this long.
const MAX_LEASE: Duration = Duration::from_secs(3_600);
/// The pause between attempts to register again after a lease was lost.
const RETRY: Duration = Duration::from_millis(200);
/// How long a stopping registration tries to revoke its lease.
const UNREGISTER_TIMEOUT: Duration = Duration::from_secs(2);

/// The directory in an etcd cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct EtcdNames {
    client: EtcdClient,
    /// Every key starts with it: `/atmlab/names/`.
    prefix: String,
}

/// Whether `url` names an etcd cluster rather than a name service.
pub(super) fn is_etcd(url: &str) -> bool {
    crate::etcd::is_cluster(url)
}

impl EtcdNames {
    /// The registry at `url`, `etcd://HOST:PORT,...[/PREFIX]` (or `etcds://`, over
    /// mutual TLS with `tls`), once a member answers.
    pub(super) async fn connect(
        url: &str,
        tls: Option<&atmlab_rpc::tls::TlsIdentity>,
    ) -> Result<Self, ControlError> {
        let scheme = if url.starts_with(crate::etcd::SCHEME_TLS) {
            crate::etcd::SCHEME_TLS
        } else {
            crate::etcd::SCHEME
        };
        let rest = url.strip_prefix(scheme).unwrap_or(url);
        let (members, prefix) = match rest.split_once('/') {
            Some((members, p)) if !p.trim_matches('/').is_empty() => (members, p.trim_matches('/')),
            Some((members, _)) => (members, "atmlab"),
            None => (rest, "atmlab"),
        };
        let client = EtcdClient::connect_with(&format!("{scheme}{members}"), tls).await?;
        Ok(EtcdNames {
            client,
            prefix: format!("/{prefix}/names/"),
        })
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Registers (or, `exclusive`, claims) `object` with a lease of its own; returns the
    /// TTL granted and the lease, kept alive until it is dropped.
    pub(super) async fn register_as(
        &self,
        object: &ObjectInfo,
        lease: Option<Duration>,
        exclusive: bool,
        keep_alives: Arc<AtomicU64>,
    ) -> Result<(Duration, Lease), ControlError> {
        validate_name(&object.name)?;
        validate_object(object)?;
        let ttl = lease.unwrap_or(DEFAULT_LEASE).min(MAX_LEASE);
        let lease = Lease::grant_counting(&self.client, ttl, keep_alives).await?;
        let key = self.key(&object.name);
        let value = encode(object);
        let written = if exclusive {
            match self
                .client
                .create(&key, value.clone(), Some(lease.id()))
                .await?
            {
                None => Ok(()),
                Some(existing) => match decode(&existing) {
                    // Ours already (a restart within the old lease): take it over.
                    Some(held) if held.address == object.address => self
                        .client
                        .put(&key, value, Some(lease.id()))
                        .await
                        .map(|_| ()),
                    Some(held) => Err(held_by(&object.name, held.address)),
                    None => Err(held_by(&object.name, "an entry atmlab cannot read".into())),
                },
            }
        } else {
            self.client
                .put(&key, value, Some(lease.id()))
                .await
                .map(|_| ())
        };
        match written {
            Ok(()) => Ok((lease.ttl(), lease)),
            Err(e) => {
                // Nothing hangs on the lease: let it go now rather than at its TTL.
                let _ = lease.revoke().await;
                Err(e)
            }
        }
    }

    /// Every change to the directory from now on (a registration, or an entry gone).
    pub(super) async fn watch(&self) -> Result<Watcher, ControlError> {
        self.client.watch_prefix(&self.prefix, 0).await
    }

    /// The entry `name` and its lease, or `NotRegistered`.
    async fn entry(&self, name: &str) -> Result<KeyValue, ControlError> {
        validate_name(name)?;
        self.client
            .get(&self.key(name))
            .await?
            .ok_or_else(|| ControlError::NotRegistered { name: name.into() })
    }

    /// One keep-alive of `name`'s lease; returns the lease's TTL.
    pub(super) async fn renew(&self, name: &str) -> Result<Duration, ControlError> {
        let kv = self.entry(name).await?;
        self.client
            .keep_alive(kv.lease)
            .await?
            .ok_or_else(|| ControlError::NotRegistered { name: name.into() })
    }

    /// Removes `name`: revokes its lease (which removes the entry) or, for an entry on
    /// no lease, deletes it.
    pub(super) async fn unregister(&self, name: &str) -> Result<(), ControlError> {
        let kv = self.entry(name).await?;
        if kv.lease != 0 {
            self.client.revoke(kv.lease).await?;
        }
        self.client.delete(&kv.key).await?;
        Ok(())
    }

    pub(super) async fn resolve(&self, name: &str) -> Result<(ObjectInfo, Duration), ControlError> {
        let kv = self.entry(name).await?;
        let object = decode(&kv).ok_or_else(|| unreadable(&kv))?;
        // A lease that lapsed since the get: gone already.
        let left = self
            .time_left(kv.lease)
            .await?
            .ok_or_else(|| ControlError::NotRegistered { name: name.into() })?;
        Ok((object, left))
    }

    pub(super) async fn list(
        &self,
        kind: Option<ObjectKind>,
    ) -> Result<Vec<(ObjectInfo, Duration)>, ControlError> {
        let (kvs, _) = self.client.get_prefix(&self.prefix).await?;
        let mut objects = Vec::with_capacity(kvs.len());
        for kv in &kvs {
            match decode(kv) {
                Some(o) if kind.is_none_or(|k| k == o.kind) => objects.push((o, kv.lease)),
                Some(_) => {}
                None => tracing::warn!(key = %kv.key, "{}", unreadable(kv)),
            }
        }
        // The time left on each lease, asked concurrently.
        let mut asks = tokio::task::JoinSet::new();
        for (i, (_, lease)) in objects.iter().enumerate() {
            let names = self.clone();
            let lease = *lease;
            asks.spawn(async move { (i, names.time_left(lease).await) });
        }
        let mut left = vec![None; objects.len()];
        while let Some(done) = asks.join_next().await {
            if let Ok((i, ttl)) = done {
                left[i] = ttl?;
            }
        }
        // A lease that lapsed between the range and its TTL: gone already.
        let mut out: Vec<(ObjectInfo, Duration)> = objects
            .into_iter()
            .zip(left)
            .filter_map(|((o, _), left)| Some((o, left?)))
            .collect();
        out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        Ok(out)
    }

    /// The time left on `lease` (whole seconds), `None` if it is gone.
    async fn time_left(&self, lease: i64) -> Result<Option<Duration>, ControlError> {
        if lease == 0 {
            // Put by hand, on no lease: it stays until deleted.
            return Ok(Some(MAX_LEASE));
        }
        self.client.time_to_live(lease).await
    }
}

/// A refused claim, as the name service's client reports it (ALREADY_EXISTS, the
/// message naming the holder), so that callers need not know which registry refused.
fn held_by(name: &str, holder: String) -> ControlError {
    let held = ControlError::Held {
        name: name.to_owned(),
        holder,
    };
    ControlError::Call {
        call: "NameService.Register (a claim)",
        kind: held.kind(),
        message: held.to_string(),
    }
}

fn unreadable(kv: &KeyValue) -> ControlError {
    ControlError::InvalidRegistration {
        name: kv.key.clone(),
        reason: "the etcd entry is not an atmlab object (JSON with name, kind, address)".into(),
    }
}

/// The kinds as `atmlab names list --kind` spells them.
fn kind_name(kind: ObjectKind) -> String {
    match kind {
        ObjectKind::SwitchServer => "switch".into(),
        ObjectKind::ConnectionManager => "cm".into(),
        ObjectKind::RouteObject => "route".into(),
        ObjectKind::QosMapper => "qos".into(),
        ObjectKind::Host => "host".into(),
        ObjectKind::NameService => "names".into(),
        ObjectKind::OwnerClaim => "owner".into(),
        ObjectKind::Unknown(code) => code.to_string(),
    }
}

fn kind_from_name(name: &str) -> ObjectKind {
    match name {
        "switch" => ObjectKind::SwitchServer,
        "cm" => ObjectKind::ConnectionManager,
        "route" => ObjectKind::RouteObject,
        "qos" => ObjectKind::QosMapper,
        "host" => ObjectKind::Host,
        "names" => ObjectKind::NameService,
        "owner" => ObjectKind::OwnerClaim,
        other => ObjectKind::Unknown(other.parse().unwrap_or(0)),
    }
}

fn encode(object: &ObjectInfo) -> Vec<u8> {
    serde_json::json!({
        "name": object.name,
        "kind": kind_name(object.kind),
        "address": object.address,
        "attributes": object.attributes,
    })
    .to_string()
    .into_bytes()
}

/// The object an entry holds, if it is one (anything else in the prefix is skipped).
fn decode(kv: &KeyValue) -> Option<ObjectInfo> {
    let v: serde_json::Value = serde_json::from_slice(&kv.value).ok()?;
    let attributes: BTreeMap<String, String> = match v.get("attributes") {
        Some(serde_json::Value::Object(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect(),
        _ => BTreeMap::new(),
    };
    Some(ObjectInfo {
        name: v.get("name")?.as_str()?.to_owned(),
        kind: kind_from_name(v.get("kind")?.as_str()?),
        address: v.get("address")?.as_str()?.to_owned(),
        attributes,
    })
}

/// How a registration kept in etcd stops ([`super::client`]'s `Stop`).
pub(super) enum Ending {
    /// Revoke the lease: the entry goes at once.
    Unregister,
    /// Stop the keep-alives: the entry goes when the lease lapses.
    Abandon,
}

/// Keeps a registration in etcd: the lease's own task keeps it alive; when the lease is
/// lost anyway (the cluster was out of reach for longer than the TTL), registers again
/// (as a claim if it was one), until told to stop.
pub(super) async fn keep(
    names: EtcdNames,
    object: ObjectInfo,
    (ttl, exclusive): (Duration, bool),
    mut lease: Lease,
    (keep_alives, reregistrations): (Arc<AtomicU64>, Arc<AtomicU64>),
    mut stopped: oneshot::Receiver<Ending>,
) {
    let name = object.name.clone();
    loop {
        tokio::select! {
            biased;
            how = &mut stopped => {
                match how.unwrap_or(Ending::Unregister) {
                    Ending::Abandon => lease.abandon(),
                    Ending::Unregister => {
                        match tokio::time::timeout(UNREGISTER_TIMEOUT, lease.revoke()).await {
                            Ok(Ok(())) => tracing::debug!(%name, "unregistered (lease revoked)"),
                            Ok(Err(error)) => tracing::debug!(%name, %error, "revoke failed; the lease will lapse"),
                            Err(_) => tracing::debug!(%name, "revoke timed out; the lease will lapse"),
                        }
                    }
                }
                return;
            }
            () = lease.lost() => {}
        }
        tracing::warn!(%name, "the registration's etcd lease was lost; registering again");
        loop {
            let again = names.register_as(&object, Some(ttl), exclusive, keep_alives.clone());
            tokio::select! {
                biased;
                // Nothing registered: nothing to undo.
                _ = &mut stopped => return,
                r = again => match r {
                    Ok((_, new)) => {
                        lease = new;
                        reregistrations.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(%name, "registered again");
                        break;
                    }
                    Err(error) => tracing::warn!(%name, %error, "re-registration failed; retrying"),
                },
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_survives_its_json() {
        let o = ObjectInfo::new("switch/s1", ObjectKind::SwitchServer, "https://h:1")
            .with_attribute("raw", "h:2");
        let kv = KeyValue {
            key: "/atmlab/names/switch/s1".into(),
            value: encode(&o),
            create_revision: 1,
            mod_revision: 1,
            lease: 7,
        };
        assert_eq!(decode(&kv), Some(o));
        for kind in [
            ObjectKind::SwitchServer,
            ObjectKind::ConnectionManager,
            ObjectKind::RouteObject,
            ObjectKind::QosMapper,
            ObjectKind::Host,
            ObjectKind::NameService,
            ObjectKind::OwnerClaim,
            ObjectKind::Unknown(42),
        ] {
            assert_eq!(kind_from_name(&kind_name(kind)), kind);
        }
        let junk = KeyValue {
            value: b"not json".to_vec(),
            ..kv
        };
        assert_eq!(decode(&junk), None);
    }
}
