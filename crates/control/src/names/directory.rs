//! The name service's sans-IO core: a directory of leased registrations.
//!
//! Method kinds, quinn-proto style: requests (`register`, `renew`, `unregister`,
//! `resolve`, `list`) take `now` and answer at once; `poll_timeout` gives the next
//! instant a lease lapses, and `expire(now)` removes the lapsed entries and returns
//! them. A shell may call `expire` whenever it likes (or never): lapsed entries are
//! already invisible to every request.
//!
//! Lease rules: a request's lease (or the default when it asks for none) is clamped to
//! `[min_lease, max_lease]`, and the granted lease is returned, so a client learns what it
//! got rather than being refused. A lease runs from the time of the last register or
//! renew; an entry whose expiry equals `now` has lapsed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use atmlab_core::time::{Duration, Instant};

use crate::ControlError;

/// The kinds of object in the control plane (the papers' vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// A switch's control interface (xbind's `SwitchServer`).
    SwitchServer,
    /// A connection manager.
    ConnectionManager,
    /// The route object.
    RouteObject,
    /// The QoS mapper.
    QosMapper,
    /// An end host.
    Host,
    /// A name service (for federation).
    NameService,
    /// An owner name claimed by the connection manager at its address (one manager
    /// per owner), not a service to call.
    OwnerClaim,
    /// A kind this build does not know, by its IDL number (from a newer peer). Listed
    /// and resolved as is, but never accepted in a registration.
    Unknown(i32),
}

/// What an object registers: its name, kind and addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Unique name, e.g. `"switch/s1"`.
    pub name: String,
    /// What the object is.
    pub kind: ObjectKind,
    /// Its gRPC address, e.g. `"https://127.0.0.1:50051"`.
    pub address: String,
    /// Other addresses by purpose, e.g. `{"raw": "127.0.0.1:6001"}`.
    pub attributes: BTreeMap<String, String>,
}

impl ObjectInfo {
    /// An object with no attributes.
    pub fn new(name: impl Into<String>, kind: ObjectKind, address: impl Into<String>) -> Self {
        ObjectInfo {
            name: name.into(),
            kind,
            address: address.into(),
            attributes: BTreeMap::new(),
        }
    }

    /// The same object with one more attribute.
    pub fn with_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }
}

/// One live entry of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The registered object.
    pub object: ObjectInfo,
    /// The lease granted, renewed in full by each renew.
    pub lease: Duration,
    /// When the lease lapses unless renewed.
    pub expires: Instant,
    /// Who registered it, when the service knows (a certificate's role and name, as
    /// text): while the lease lives, only that holder (or an operator) may replace,
    /// renew or remove it (issue 24: a host re-registered `switch/s2` at a false address).
    /// `None` for a registration made in plain text or by an operator.
    pub holder: Option<String>,
}

impl Registration {
    /// Time left on the lease at `now` (zero once lapsed).
    pub fn remaining(&self, now: Instant) -> Duration {
        self.expires.saturating_duration_since(now)
    }
}

/// Lease bounds and capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectoryConfig {
    /// The lease of a registration that asks for none (the IDL says 10 s).
    pub default_lease: Duration,
    /// The shortest lease granted: shorter requests get this, so a client cannot make
    /// the service spend its time on renewals.
    pub min_lease: Duration,
    /// The longest lease granted: a dead object lingers at most this long.
    pub max_lease: Duration,
    /// Registrations held at most; past it, new names are refused (re-registering or
    /// renewing an existing name still works).
    pub max_entries: usize,
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        DirectoryConfig {
            default_lease: Duration::from_secs(10),
            min_lease: Duration::from_millis(100),
            max_lease: Duration::from_secs(3_600),
            max_entries: 100_000,
        }
    }
}

/// Longest name and address accepted, in bytes: generous for `"switch/s1"` or a URI,
/// small enough that a directory entry stays small.
const MAX_NAME_LEN: usize = 255;
const MAX_ADDRESS_LEN: usize = 1_024;
const MAX_ATTRIBUTES: usize = 64;

/// What a directory has done since it was made (the metrics read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectoryStats {
    /// Registrations accepted (claims included; a re-registration counts again).
    pub registrations: u64,
    /// Leases renewed.
    pub renewals: u64,
    /// Registrations removed by [`Directory::expire`] because their lease lapsed.
    pub expiries: u64,
}

/// The directory: registrations by name, with their expiry times in order.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    config: DirectoryConfig,
    entries: HashMap<String, Registration>,
    /// (expiry, name) of every entry, so `expire` and `poll_timeout` need not scan.
    deadlines: BTreeSet<(Instant, String)>,
    stats: DirectoryStats,
}

impl Directory {
    /// An empty directory.
    pub fn new(config: DirectoryConfig) -> Self {
        Directory {
            config,
            entries: HashMap::new(),
            deadlines: BTreeSet::new(),
            stats: DirectoryStats::default(),
        }
    }

    /// Registrations, renewals and expiries so far.
    pub fn stats(&self) -> DirectoryStats {
        self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &DirectoryConfig {
        &self.config
    }

    /// Registers `object` (replacing any registration of the same name) for `lease`, or the
    /// default lease when `None`, clamped to the configured bounds; returns the lease
    /// granted.
    pub fn register(
        &mut self,
        now: Instant,
        object: ObjectInfo,
        lease: Option<Duration>,
    ) -> Result<Duration, ControlError> {
        self.register_held(now, object, lease, None)
    }

    /// [`Directory::register`] on behalf of `holder` (see [`Registration::holder`]): a
    /// live registration of the name by another holder is not replaced
    /// ([`ControlError::Held`]). A `None` holder (an operator) replaces any.
    pub fn register_held(
        &mut self,
        now: Instant,
        object: ObjectInfo,
        lease: Option<Duration>,
        holder: Option<String>,
    ) -> Result<Duration, ControlError> {
        validate_name(&object.name)?;
        if let (Some(me), Some(e)) = (&holder, self.entries.get(&object.name))
            && e.expires > now
            && let Some(theirs) = &e.holder
            && theirs != me
        {
            return Err(ControlError::Held {
                name: object.name,
                holder: theirs.clone(),
            });
        }
        validate_object(&object)?;
        if !self.is_live(now, &object.name) && self.entries.len() >= self.config.max_entries {
            // Lapsed entries may be holding the places; free them before refusing.
            self.expire(now);
            if self.entries.len() >= self.config.max_entries {
                return Err(ControlError::DirectoryFull {
                    name: object.name,
                    limit: self.config.max_entries,
                });
            }
        }
        let lease = lease
            .unwrap_or(self.config.default_lease)
            .clamp(self.config.min_lease, self.config.max_lease);
        let expires = now.saturating_add(lease);
        let name = object.name.clone();
        if let Some(old) = self.entries.insert(
            name.clone(),
            Registration {
                object,
                lease,
                expires,
                holder,
            },
        ) {
            self.deadlines.remove(&(old.expires, name.clone()));
        }
        self.deadlines.insert((expires, name));
        self.stats.registrations += 1;
        Ok(lease)
    }

    /// Extends `name`'s lease to `now` + its granted lease; returns that lease.
    /// `NotRegistered` if absent or lapsed (the owner must register again).
    pub fn renew(&mut self, now: Instant, name: &str) -> Result<Duration, ControlError> {
        validate_name(name)?;
        if !self.is_live(now, name) {
            return Err(not_registered(name));
        }
        let Some(entry) = self.entries.get_mut(name) else {
            return Err(not_registered(name));
        };
        let old = entry.expires;
        entry.expires = now.saturating_add(entry.lease);
        let (lease, expires) = (entry.lease, entry.expires);
        self.deadlines.remove(&(old, name.to_owned()));
        self.deadlines.insert((expires, name.to_owned()));
        self.stats.renewals += 1;
        Ok(lease)
    }

    /// Removes `name`; `NotRegistered` if absent or already lapsed.
    pub fn unregister(&mut self, now: Instant, name: &str) -> Result<Registration, ControlError> {
        validate_name(name)?;
        let live = self.is_live(now, name);
        match self.entries.remove(name) {
            Some(entry) => {
                self.deadlines.remove(&(entry.expires, name.to_owned()));
                if live {
                    Ok(entry)
                } else {
                    Err(not_registered(name))
                }
            }
            None => Err(not_registered(name)),
        }
    }

    /// The live registration of `name`.
    pub fn resolve(&self, now: Instant, name: &str) -> Result<&Registration, ControlError> {
        validate_name(name)?;
        self.entries
            .get(name)
            .filter(|e| e.expires > now)
            .ok_or_else(|| not_registered(name))
    }

    /// Every live registration, of `kind` only if given, ordered by name.
    pub fn list(&self, now: Instant, kind: Option<ObjectKind>) -> Vec<&Registration> {
        let mut out: Vec<&Registration> = self
            .entries
            .values()
            .filter(|e| e.expires > now && kind.is_none_or(|k| e.object.kind == k))
            .collect();
        out.sort_unstable_by(|a, b| a.object.name.cmp(&b.object.name));
        out
    }

    /// Removes every registration that has lapsed by `now` and returns them, earliest
    /// expiry first.
    pub fn expire(&mut self, now: Instant) -> Vec<Registration> {
        let mut lapsed = Vec::new();
        while let Some((expires, _)) = self.deadlines.first() {
            if *expires > now {
                break;
            }
            let Some((_, name)) = self.deadlines.pop_first() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&name) {
                lapsed.push(entry);
            }
        }
        self.stats.expiries += lapsed.len() as u64;
        lapsed
    }

    /// When the next lease lapses, if any registration is held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    /// Registrations held, lapsed ones not yet expired included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No registration held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Registers `object` as [`Directory::register`] does, unless its name is registered,
    /// live, at another address: then `Held`, naming that address. A holder renewing
    /// or claiming again at its own address is granted its lease.
    pub fn claim(
        &mut self,
        now: Instant,
        object: ObjectInfo,
        lease: Option<Duration>,
    ) -> Result<Duration, ControlError> {
        self.claim_held(now, object, lease, None)
    }

    /// [`Directory::claim`] on behalf of `holder` (see [`Directory::register_held`]).
    pub fn claim_held(
        &mut self,
        now: Instant,
        object: ObjectInfo,
        lease: Option<Duration>,
        holder: Option<String>,
    ) -> Result<Duration, ControlError> {
        if let Some(e) = self.entries.get(&object.name)
            && e.expires > now
            && e.object.address != object.address
        {
            return Err(ControlError::Held {
                name: object.name,
                holder: e.object.address.clone(),
            });
        }
        self.register_held(now, object, lease, holder)
    }

    fn is_live(&self, now: Instant, name: &str) -> bool {
        self.entries.get(name).is_some_and(|e| e.expires > now)
    }
}

fn not_registered(name: &str) -> ControlError {
    ControlError::NotRegistered {
        name: name.to_owned(),
    }
}

pub(super) fn validate_name(name: &str) -> Result<(), ControlError> {
    let invalid = |reason| {
        Err(ControlError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return invalid("longer than 255 bytes");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid("contains whitespace or control characters");
    }
    Ok(())
}

pub(super) fn validate_object(object: &ObjectInfo) -> Result<(), ControlError> {
    let invalid = |reason: String| {
        Err(ControlError::InvalidRegistration {
            name: object.name.clone(),
            reason,
        })
    };
    if let ObjectKind::Unknown(code) = object.kind {
        return invalid(format!("unknown object kind {code}"));
    }
    if object.address.is_empty() {
        return invalid("empty address".into());
    }
    if object.address.len() > MAX_ADDRESS_LEN {
        return invalid(format!("address longer than {MAX_ADDRESS_LEN} bytes"));
    }
    if object
        .address
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return invalid("address contains whitespace or control characters".into());
    }
    if object.attributes.len() > MAX_ATTRIBUTES {
        return invalid(format!("more than {MAX_ATTRIBUTES} attributes"));
    }
    if let Some((key, value)) = object
        .attributes
        .iter()
        .find(|(k, v)| k.is_empty() || k.len() > MAX_NAME_LEN || v.len() > MAX_ADDRESS_LEN)
    {
        return invalid(format!(
            "attribute {key:?} = {value:?}: keys must be 1-{MAX_NAME_LEN} bytes, \
             values at most {MAX_ADDRESS_LEN}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn at(n: u64) -> Instant {
        Instant::ZERO + ms(n)
    }
    fn switch(name: &str) -> ObjectInfo {
        ObjectInfo::new(name, ObjectKind::SwitchServer, "https://127.0.0.1:1")
    }
    fn is_not_registered(r: Result<impl std::fmt::Debug, ControlError>) -> bool {
        matches!(r, Err(ControlError::NotRegistered { .. }))
    }

    /// What the metrics read: registrations, renewals and expiries are counted when
    /// they happen, and refusals count nothing.
    #[test]
    fn stats_count_registrations_renewals_and_expiries() {
        let mut dir = Directory::default();
        dir.register(at(0), switch("switch/s1"), Some(ms(500)))
            .unwrap();
        dir.register(at(0), switch("switch/s2"), Some(ms(1_000)))
            .unwrap();
        dir.renew(at(100), "switch/s1").unwrap();
        assert!(is_not_registered(dir.renew(at(100), "switch/none")));
        assert_eq!(
            dir.stats(),
            DirectoryStats {
                registrations: 2,
                renewals: 1,
                expiries: 0
            }
        );
        // s1 lapses at 600 ms, s2 at 1 s.
        assert_eq!(dir.expire(at(700)).len(), 1);
        assert_eq!(dir.stats().expiries, 1);
        assert_eq!(dir.expire(at(2_000)).len(), 1);
        assert_eq!(dir.stats().expiries, 2);
        assert_eq!(dir.stats().registrations, 2);
    }

    /// A claim (one manager per owner): refused while the name is live at another
    /// address, naming it; granted to its holder again, and to anyone once it lapsed. A
    /// plain registration is not refused (it is not a claim).
    #[test]
    fn a_claim_is_refused_while_another_address_holds_the_name() {
        let mut dir = Directory::default();
        let cm =
            |addr: &str| ObjectInfo::new("owner/cm-xbind", ObjectKind::ConnectionManager, addr);
        dir.claim(at(0), cm("http://127.0.0.1:1"), Some(ms(500)))
            .unwrap();
        let e = dir
            .claim(at(100), cm("http://127.0.0.1:2"), Some(ms(500)))
            .unwrap_err();
        assert!(
            matches!(&e, ControlError::Held { holder, .. } if holder == "http://127.0.0.1:1"),
            "{e:?}"
        );
        assert_eq!(e.kind().code(), 6, "ALREADY_EXISTS");
        assert_eq!(
            dir.resolve(at(100), "owner/cm-xbind")
                .unwrap()
                .object
                .address,
            "http://127.0.0.1:1"
        );
        dir.claim(at(200), cm("http://127.0.0.1:1"), Some(ms(500)))
            .unwrap();
        // Lapsed at 700: the other address may claim it.
        dir.claim(at(700), cm("http://127.0.0.1:2"), Some(ms(500)))
            .unwrap();
        assert_eq!(
            dir.resolve(at(700), "owner/cm-xbind")
                .unwrap()
                .object
                .address,
            "http://127.0.0.1:2"
        );
    }

    #[test]
    fn register_resolve_and_lapse() {
        let mut dir = Directory::default();
        assert_eq!(
            dir.register(at(0), switch("s1"), Some(ms(500))).unwrap(),
            ms(500)
        );
        let entry = dir.resolve(at(100), "s1").unwrap();
        assert_eq!(entry.object, switch("s1"));
        assert_eq!(entry.remaining(at(100)), ms(400));
        assert_eq!(dir.poll_timeout(), Some(at(500)));
        // Live until just before its expiry, gone at it, before any expire() call.
        assert!(dir.resolve(at(499), "s1").is_ok());
        assert!(is_not_registered(dir.resolve(at(500), "s1")));
        assert!(dir.list(at(500), None).is_empty());
        assert!(is_not_registered(dir.renew(at(500), "s1")));
        assert_eq!(dir.len(), 1, "held until expired");
        let lapsed = dir.expire(at(500));
        assert_eq!(lapsed.len(), 1);
        assert_eq!(lapsed[0].object.name, "s1");
        assert!(dir.is_empty());
        assert_eq!(dir.poll_timeout(), None);
    }

    #[test]
    fn renew_extends_by_the_granted_lease() {
        let mut dir = Directory::default();
        dir.register(at(0), switch("s1"), Some(ms(300))).unwrap();
        assert_eq!(dir.renew(at(200), "s1").unwrap(), ms(300));
        assert_eq!(dir.resolve(at(400), "s1").unwrap().expires, at(500));
        assert_eq!(dir.poll_timeout(), Some(at(500)));
        assert!(dir.expire(at(499)).is_empty());
        assert!(is_not_registered(dir.renew(at(0), "nobody")));
    }

    #[test]
    fn leases_are_clamped_and_defaulted() {
        let config = DirectoryConfig::default();
        let mut dir = Directory::new(config);
        let granted = |dir: &mut Directory, lease| dir.register(at(0), switch("s"), lease).unwrap();
        assert_eq!(granted(&mut dir, None), config.default_lease);
        assert_eq!(granted(&mut dir, Some(ms(1))), config.min_lease);
        assert_eq!(granted(&mut dir, Some(Duration::MAX)), config.max_lease);
        assert_eq!(granted(&mut dir, Some(ms(200))), ms(200));
        // Re-registering replaced the entry each time; one deadline is left.
        assert_eq!(dir.len(), 1);
        assert_eq!(dir.poll_timeout(), Some(at(200)));
    }

    #[test]
    fn reregistering_replaces() {
        let mut dir = Directory::default();
        dir.register(at(0), switch("s1"), Some(ms(1_000))).unwrap();
        let moved = ObjectInfo::new("s1", ObjectKind::SwitchServer, "https://127.0.0.1:2")
            .with_attribute("raw", "127.0.0.1:6001");
        dir.register(at(10), moved.clone(), Some(ms(100))).unwrap();
        let entry = dir.resolve(at(20), "s1").unwrap();
        assert_eq!(entry.object, moved);
        assert_eq!(entry.expires, at(110));
        assert_eq!(
            dir.expire(at(200)).len(),
            1,
            "the old deadline went with the old entry"
        );
        assert!(dir.is_empty());
    }

    #[test]
    fn list_filters_by_kind_and_sorts_by_name() {
        let mut dir = Directory::default();
        dir.register(at(0), switch("s2"), None).unwrap();
        dir.register(at(0), switch("s1"), None).unwrap();
        let cm = ObjectInfo::new("cm", ObjectKind::ConnectionManager, "https://127.0.0.1:3");
        dir.register(at(0), cm, None).unwrap();
        dir.register(at(0), switch("short"), Some(ms(100))).unwrap();
        let names = |v: Vec<&Registration>| -> Vec<String> {
            v.iter().map(|e| e.object.name.clone()).collect()
        };
        assert_eq!(names(dir.list(at(0), None)), ["cm", "s1", "s2", "short"]);
        assert_eq!(
            names(dir.list(at(100), Some(ObjectKind::SwitchServer))),
            ["s1", "s2"]
        );
        assert_eq!(
            names(dir.list(at(0), Some(ObjectKind::Host))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn unregister() {
        let mut dir = Directory::default();
        dir.register(at(0), switch("s1"), Some(ms(100))).unwrap();
        assert_eq!(dir.unregister(at(50), "s1").unwrap().object.name, "s1");
        assert!(is_not_registered(dir.unregister(at(50), "s1")));
        assert_eq!(dir.poll_timeout(), None);
        // A lapsed entry is removed, but reported as not registered.
        dir.register(at(0), switch("s1"), Some(ms(100))).unwrap();
        assert!(is_not_registered(dir.unregister(at(100), "s1")));
        assert!(dir.is_empty());
    }

    #[test]
    fn invalid_requests_change_nothing() {
        let mut dir = Directory::default();
        let bad = [
            switch(""),
            switch("has space"),
            switch(&"x".repeat(256)),
            ObjectInfo::new("s", ObjectKind::Unknown(99), "a"),
            ObjectInfo::new("s", ObjectKind::Host, ""),
            ObjectInfo::new("s", ObjectKind::Host, "a\nb").with_attribute("", "x"),
            switch("s").with_attribute("", "x"),
        ];
        for object in bad {
            let e = dir.register(at(0), object.clone(), None).unwrap_err();
            assert_eq!(
                e.kind(),
                crate::ErrorKind::InvalidArgument,
                "{object:?}: {e}"
            );
        }
        assert!(dir.is_empty());
        let e = dir.resolve(at(0), "").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    }

    #[test]
    fn capacity_counts_live_entries_only() {
        let mut dir = Directory::new(DirectoryConfig {
            max_entries: 2,
            ..DirectoryConfig::default()
        });
        dir.register(at(0), switch("a"), Some(ms(100))).unwrap();
        dir.register(at(0), switch("b"), Some(ms(1_000))).unwrap();
        let e = dir.register(at(50), switch("c"), None).unwrap_err();
        assert!(
            matches!(e, ControlError::DirectoryFull { limit: 2, .. }),
            "{e}"
        );
        // An existing name may still re-register when full.
        dir.register(at(50), switch("b"), Some(ms(1_000))).unwrap();
        // Once "a" has lapsed its place is free.
        dir.register(at(100), switch("c"), None).unwrap();
        assert_eq!(dir.len(), 2);
    }
}
