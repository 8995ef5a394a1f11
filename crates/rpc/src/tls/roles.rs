//! Roles: who a certificate speaks for, and what it may do (issue 24, "any certificate is
//! root"; DESIGN.md §5; the table is in `docs/security.md`).
//!
//! xbind's CORBA objects trusted each other on a closed testbed. atmlab's listen on real
//! sockets, and a lab CA alone says only "one of ours": a host's certificate could commit
//! cross-connects, release a manager's calls and re-register a switch at a false address.
//! So every leaf certificate carries a [`Role`] and a name ([`Subject`]), written into its
//! subject alternative names as two DNS names:
//!
//! - `NAME.ROLE.atmlab`: this object, for a client that resolved a name (a manager that
//!   looked up `switch/s2` expects `s2.switch.atmlab`, and a switch certificate issued to
//!   `s3` cannot answer for it);
//! - `ROLE.atmlab`: any object of the role, for a client that was given an address by
//!   hand (`atmlab switch commit --addr`), which knows what kind of server it meant.
//!
//! DNS names rather than a private extension because every TLS stack checks them:
//! tonic's client verifies them without a custom verifier. There is no `localhost` any
//! more: a client must say what it expects ([`Expect`]).
//!
//! A server reads the caller's [`PeerIdentity`] from the certificate its handshake
//! verified ([`PeerInfo::identity`](super::PeerInfo)), and each service decides per RPC
//! with [`Caller`]: [`Caller::require`] for a role, [`Caller::owner`] for the owner a
//! command may act for (a manager's owner is its certificate's name, never a request
//! field). Plain text (`--insecure`) has no identities: [`Caller::Insecure`] may do
//! anything, which is what `--insecure` says.

use std::fmt;
use std::str::FromStr;

use rustls_pki_types::CertificateDer;

use super::incoming::PeerInfo;
use crate::error::RpcError;

/// The DNS suffix of every role name in a lab certificate.
pub const DOMAIN: &str = "atmlab";

/// What a certificate's holder is, and so what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// An operator: every command on every object, any owner.
    Admin,
    /// A connection manager (xbind, sequential or TINA's LNC): switch commands for its
    /// own owner (its name), its own names in the name service.
    Cm,
    /// A switch server: registers `switch/NAME`, reads.
    Switch,
    /// An end host: registers `host/NAME`, reads; cannot commit or set up calls.
    Host,
    /// A name service: serves names, registers itself for federation.
    Names,
    /// Reads only (dashboards, audits run by someone who must not change anything).
    Observer,
}

impl Role {
    /// Every role, in the order of the table in `docs/security.md`.
    pub const ALL: [Role; 6] = [
        Role::Admin,
        Role::Cm,
        Role::Switch,
        Role::Host,
        Role::Names,
        Role::Observer,
    ];

    /// The role's name, as in `atmlab certs issue --role` and in certificates.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Cm => "cm",
            Role::Switch => "switch",
            Role::Host => "host",
            Role::Names => "names",
            Role::Observer => "observer",
        }
    }

    /// The DNS name any certificate of this role carries: `ROLE.atmlab`.
    pub fn dns_name(self) -> String {
        format!("{}.{DOMAIN}", self.as_str())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = RpcError;

    fn from_str(s: &str) -> Result<Role, RpcError> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| RpcError::InvalidRole {
                role: s.chars().take(32).collect(),
            })
    }
}

/// A certificate's holder: a role and a name (also the file stem, `NAME.pem`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subject {
    /// What it is.
    pub role: Role,
    /// Which one: a switch's name, a manager's owner, a host's name, `admin`.
    pub name: String,
}

impl Subject {
    /// `role` `name`.
    pub fn new(role: Role, name: impl Into<String>) -> Subject {
        Subject {
            role,
            name: name.into(),
        }
    }

    /// Parses each of `specs` (`ROLE:NAME`).
    pub fn list(specs: &[&str]) -> Result<Vec<Subject>, RpcError> {
        specs.iter().map(|s| s.parse()).collect()
    }

    /// The DNS name of this one object: `NAME.ROLE.atmlab`.
    pub fn dns_name(&self) -> String {
        format!("{}.{}", self.name, self.role.dns_name())
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.role, self.name)
    }
}

/// `ROLE:NAME`, as `atmlab certs init` takes them.
impl FromStr for Subject {
    type Err = RpcError;

    fn from_str(s: &str) -> Result<Subject, RpcError> {
        match s.split_once(':') {
            Some((role, name)) => Ok(Subject::new(role.parse()?, name)),
            None => Err(RpcError::InvalidRole {
                role: s.chars().take(32).collect(),
            }),
        }
    }
}

/// The identity a verified certificate proves: its role and name.
pub type PeerIdentity = Subject;

/// What a client expects of the server it reaches: one named object, or any object of a
/// role (an address given by hand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// This object (a name resolved in the name service, or configured).
    Object(Subject),
    /// Any object of this role.
    Role(Role),
}

impl Expect {
    /// `name` of `role`.
    pub fn object(role: Role, name: impl Into<String>) -> Expect {
        Expect::Object(Subject::new(role, name))
    }

    /// The DNS name the server's certificate must carry.
    pub fn dns_name(&self) -> String {
        match self {
            Expect::Object(s) => s.dns_name(),
            Expect::Role(r) => r.dns_name(),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Object(s) => write!(f, "{s}"),
            Expect::Role(r) => write!(f, "any {r}"),
        }
    }
}

/// The role and name a lab certificate carries (its `NAME.ROLE.atmlab` DNS name), or
/// `None` for a certificate without one (made before roles, or by another tool).
///
/// Only call this on a certificate the handshake has verified: the names are whatever
/// the issuer wrote.
pub fn identity_of(cert: &CertificateDer<'_>) -> Option<PeerIdentity> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let san = parsed.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|n| match n {
        x509_parser::extensions::GeneralName::DNSName(dns) => parse_dns(dns),
        _ => None,
    })
}

/// `NAME.ROLE.atmlab` -> the subject; `ROLE.atmlab` and anything else -> `None`.
fn parse_dns(dns: &str) -> Option<Subject> {
    let rest = dns.strip_suffix(DOMAIN)?.strip_suffix('.')?;
    let (name, role) = rest.rsplit_once('.')?;
    let role = role.parse().ok()?;
    (!name.is_empty()).then(|| Subject::new(role, name))
}

/// Who is calling, as a server sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Plain text (`--insecure`): no identity, and no restriction.
    Insecure,
    /// A verified certificate with a role.
    Known(PeerIdentity),
    /// A verified certificate without a role (issued before roles): refused everything.
    Unknown,
}

impl Caller {
    /// The caller of a tonic request served from [`incoming`](super::incoming) (its
    /// [`PeerInfo`]); a request without one came over a server this crate did not set up,
    /// which only tests and `--insecure` do.
    pub fn of<T>(request: &tonic::Request<T>) -> Caller {
        match request.extensions().get::<PeerInfo>() {
            Some(info) => Caller::from_peer(info),
            None => Caller::Insecure,
        }
    }

    /// The caller on a connection whose [`PeerInfo`] is `info`.
    pub fn from_peer(info: &PeerInfo) -> Caller {
        match (&info.certificates, &info.identity) {
            (None, _) => Caller::Insecure,
            (Some(_), Some(id)) => Caller::Known(id.clone()),
            (Some(_), None) => Caller::Unknown,
        }
    }

    /// The caller's identity, if it has one.
    pub fn identity(&self) -> Option<&PeerIdentity> {
        match self {
            Caller::Known(id) => Some(id),
            _ => None,
        }
    }

    /// Whether the caller may act as any of `roles` (admin always may; plain text may
    /// do anything).
    pub fn is(&self, roles: &[Role]) -> bool {
        match self {
            Caller::Insecure => true,
            Caller::Known(id) => id.role == Role::Admin || roles.contains(&id.role),
            Caller::Unknown => false,
        }
    }

    /// `Ok` if the caller [`is`](Caller::is) one of `roles`, else `PermissionDenied`
    /// naming the caller, what it tried (`what`) and who may.
    pub fn require(&self, roles: &[Role], what: &str) -> Result<(), tonic::Status> {
        if self.is(roles) {
            return Ok(());
        }
        let may: Vec<&str> = std::iter::once(Role::Admin)
            .chain(roles.iter().copied())
            .map(Role::as_str)
            .collect();
        Err(tonic::Status::permission_denied(format!(
            "{} may not {what} (only {})",
            self,
            may.join(", ")
        )))
    }

    /// The owner a command from this caller acts for: a manager's certificate name,
    /// whatever the request says (a different `requested` owner is refused); an
    /// admin's or a plain-text caller's `requested` owner.
    pub fn owner(&self, requested: &str) -> Result<String, tonic::Status> {
        match self {
            Caller::Insecure => Ok(requested.to_owned()),
            Caller::Known(id) if id.role == Role::Admin => Ok(requested.to_owned()),
            Caller::Known(id) if id.role == Role::Cm => {
                if requested.is_empty() || requested == id.name {
                    Ok(id.name.clone())
                } else {
                    Err(tonic::Status::permission_denied(format!(
                        "{self} may act only for its own owner {:?}, not {:?}",
                        id.name,
                        requested.chars().take(64).collect::<String>()
                    )))
                }
            }
            _ => Err(tonic::Status::permission_denied(format!(
                "{self} may not act for an owner (only admin, cm)"
            ))),
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Insecure => f.write_str("a plain-text caller"),
            Caller::Known(id) => write!(f, "{id}"),
            Caller::Unknown => f.write_str("a certificate without a role (re-issue it)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_round_trip() {
        let s = Subject::new(Role::Switch, "s1.east");
        assert_eq!(s.dns_name(), "s1.east.switch.atmlab");
        assert_eq!(parse_dns(&s.dns_name()), Some(s));
        assert_eq!(parse_dns("switch.atmlab"), None);
        assert_eq!(parse_dns("s1.root.atmlab"), None);
        assert_eq!(parse_dns("localhost"), None);
        assert_eq!(parse_dns(".cm.atmlab"), None);
    }

    #[test]
    fn roles_parse() {
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
        }
        assert!("root".parse::<Role>().is_err());
        let s: Subject = "cm:cm-xbind".parse().unwrap();
        assert_eq!(s, Subject::new(Role::Cm, "cm-xbind"));
        assert!("cm-xbind".parse::<Subject>().is_err());
    }

    #[test]
    fn owners_come_from_the_certificate() {
        let cm = Caller::Known(Subject::new(Role::Cm, "cm-xbind"));
        assert_eq!(cm.owner("cm-xbind").unwrap(), "cm-xbind");
        assert_eq!(cm.owner("").unwrap(), "cm-xbind");
        let e = cm.owner("cm-seq").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        let admin = Caller::Known(Subject::new(Role::Admin, "admin"));
        assert_eq!(admin.owner("cm-seq").unwrap(), "cm-seq");
        let host = Caller::Known(Subject::new(Role::Host, "a"));
        assert!(host.owner("a").is_err());
        assert!(host.require(&[Role::Cm], "commit").is_err());
        assert!(admin.require(&[Role::Cm], "commit").is_ok());
        assert!(Caller::Unknown.require(&Role::ALL, "read").is_err());
        assert!(Caller::Insecure.require(&[], "anything").is_ok());
    }
}
