//! The lab CA and the objects' certificates, made with rcgen.
//!
//! One CA per lab (a directory, `certs/` by convention); one leaf certificate per object
//! name, valid both as a server and as a client certificate (extended key usages
//! serverAuth and clientAuth), because every control object is both: a connection
//! manager serves the call generator and calls the switch servers. Each leaf carries its
//! [`Subject`] (role and name) as the DNS names `NAME.ROLE.atmlab` and `ROLE.atmlab`
//! (see [`roles`](super::roles)), and nothing else: no `localhost`, so that no certificate
//! can pose as another object, and a client says which object or role it expects.
//!
//! Keys are ECDSA P-256 (rcgen's default: small, fast to make and to verify); key files
//! are written with mode 0600 on Unix.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::{Subject, TlsFiles, provider};
use crate::error::RpcError;

/// The CA certificate's file name in a certificate directory.
pub const CA_CERT: &str = "ca.pem";
/// The CA key's file name in a certificate directory.
pub const CA_KEY: &str = "ca.key";

/// The CA's subject is this, then a fingerprint of the CA's public key: distinct labs get
/// distinct CA names (so a certificate from another lab fails as "unknown issuer", not
/// as a bad signature from a namesake), and [`issue_cert`] can rebuild the issuer from
/// the CA key alone. Never change it: a leaf's issuer name must equal its CA's subject.
const CA_COMMON_NAME: &str = "atmlab lab CA";
const ORGANIZATION: &str = "atmlab";

const DAY_SECS: u64 = 86_400;
/// Leaves last ten years and the CA twenty: a lab is not a bank, and an expired
/// certificate in the middle of an experiment costs more than it protects.
const LEAF_DAYS: u64 = 3_650;
const CA_DAYS: u64 = 7_300;

/// Makes a CA in `dir` (`ca.pem`, `ca.key`) and, for each of `subjects`, a certificate it
/// signs (`NAME.pem`, `NAME.key`); returns the files of each, in order.
///
/// `dir` is created if missing. An existing CA is an error unless `force` is set, because
/// replacing it invalidates every certificate the old one signed, including ones other
/// machines hold. Names must be usable as file and DNS names: letters, digits, `-`
/// and `.`, not starting or ending with `-` or `.`, and not `ca`.
pub fn init_certs(
    dir: &Path,
    subjects: &[Subject],
    force: bool,
) -> Result<Vec<TlsFiles>, RpcError> {
    for s in subjects {
        check_name(&s.name)?;
    }
    let ca_path = dir.join(CA_CERT);
    if !force && (ca_path.exists() || dir.join(CA_KEY).exists()) {
        return Err(RpcError::CaExists { path: ca_path });
    }
    std::fs::create_dir_all(dir).map_err(|source| RpcError::Write {
        path: dir.to_owned(),
        source,
    })?;

    let ca_key = KeyPair::generate().map_err(|source| RpcError::CertGen {
        what: "the CA key".into(),
        source,
    })?;
    let ca_cert = ca_params(&ca_key)
        .self_signed(&ca_key)
        .map_err(|source| RpcError::CertGen {
            what: "the CA certificate".into(),
            source,
        })?;
    // Key first: a directory with a certificate but no key could not issue anything.
    write_file(&dir.join(CA_KEY), &ca_key.serialize_pem(), true)?;
    write_file(&ca_path, &ca_cert.pem(), false)?;

    let issuer = Issuer::new(ca_params(&ca_key), ca_key);
    subjects
        .iter()
        .map(|s| write_leaf(dir, s, &issuer))
        .collect()
}

/// Issues (or re-issues) the certificate of `subject` with the CA already in `dir`, and
/// returns its files. A certificate issued before under the same name stays valid.
///
/// The new certificate is verified against `ca.pem` before this returns, so a `ca.key`
/// that does not belong to `ca.pem` is reported here, not at the first handshake.
pub fn issue_cert(dir: &Path, subject: &Subject) -> Result<TlsFiles, RpcError> {
    check_name(&subject.name)?;
    let key_path = dir.join(CA_KEY);
    let key_pem = std::fs::read_to_string(&key_path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => RpcError::NoCa {
            path: key_path.clone(),
        },
        _ => RpcError::Read {
            path: key_path.clone(),
            source,
        },
    })?;
    let ca_key = KeyPair::from_pem(&key_pem).map_err(|e| RpcError::Pem {
        path: key_path.clone(),
        what: format!("not a usable CA key ({e})"),
    })?;
    let files = write_leaf(dir, subject, &Issuer::new(ca_params(&ca_key), ca_key))?;
    verify_leaf(&files)?;
    Ok(files)
}

/// What [`ensure_certs`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ensured {
    /// The CA was made (it was missing).
    pub made_ca: bool,
    /// Certificates issued (their names were missing, or held another subject or none,
    /// as certificates made before roles do).
    pub issued: usize,
}

/// Makes the lab's certificates on first use: the CA in `dir` if it has none (with a
/// certificate for each of `subjects`), else a certificate for each of `subjects` missing
/// from `dir` or present for another subject (or for none, as before roles), signed by
/// the CA already there. Certificates already present for their subject are kept.
///
/// Every command that starts lab objects calls this, so "the CA is made if missing" is
/// one rule in one place.
///
/// A directory with half a CA (a certificate without its key, or a key without its
/// certificate) is refused before anything is written when a certificate is missing,
/// since nothing could be issued; with every certificate present it is left as it is (an
/// operator may keep `ca.key` elsewhere once everything is issued).
pub fn ensure_certs(dir: &Path, subjects: &[Subject]) -> Result<Ensured, RpcError> {
    let (ca_cert, ca_key) = (dir.join(CA_CERT), dir.join(CA_KEY));
    if !ca_cert.exists() && !ca_key.exists() {
        init_certs(dir, subjects, false)?;
        return Ok(Ensured {
            made_ca: true,
            issued: subjects.len(),
        });
    }
    let missing: Vec<&Subject> = subjects
        .iter()
        .filter(|s| subject_in(&dir.join(format!("{}.pem", s.name))).as_ref() != Some(*s))
        .collect();
    if !missing.is_empty() {
        for path in [&ca_cert, &ca_key] {
            if !path.exists() {
                return Err(RpcError::NoCa { path: path.clone() });
            }
        }
    }
    for s in &missing {
        issue_cert(dir, s)?;
    }
    Ok(Ensured {
        made_ca: false,
        issued: missing.len(),
    })
}

/// The subject of the certificate in `path`, if it is readable and has one.
fn subject_in(path: &Path) -> Option<Subject> {
    let cert = CertificateDer::from_pem_file(path).ok()?;
    super::identity_of(&cert)
}

/// Checks that the leaf in `files` chains to the CA in `files.ca`, as a server would.
fn verify_leaf(files: &TlsFiles) -> Result<(), RpcError> {
    let ca_pem = std::fs::read(&files.ca).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => RpcError::NoCa {
            path: files.ca.clone(),
        },
        _ => RpcError::Read {
            path: files.ca.clone(),
            source,
        },
    })?;
    let ca = super::certificates(&files.ca, &ca_pem)?;
    let leaf = CertificateDer::from_pem_file(&files.cert).map_err(|e| RpcError::Pem {
        path: files.cert.clone(),
        what: format!("cannot read back the new certificate ({e})"),
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in ca {
        roots.add(cert).map_err(|source| RpcError::Tls {
            context: files.ca.display().to_string(),
            source,
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|source| RpcError::Verifier {
            context: files.ca.display().to_string(),
            source,
        })?;
    verifier
        .verify_client_cert(&leaf, &[], UnixTime::now())
        .map_err(|source| RpcError::Tls {
            context: format!(
                "{} does not verify against {} (does {} belong to it?)",
                files.cert.display(),
                files.ca.display(),
                CA_KEY
            ),
            source,
        })?;
    Ok(())
}

fn check_name(name: &str) -> Result<(), RpcError> {
    let invalid = |reason| {
        Err(RpcError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("empty");
    }
    if name.len() > 63 {
        return invalid("longer than 63 characters (a DNS label)");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        return invalid("only letters, digits, '-' and '.' are allowed");
    }
    if name.starts_with(['-', '.']) || name.ends_with(['-', '.']) || name.contains("..") {
        return invalid("must not start or end with '-' or '.', nor contain \"..\"");
    }
    if name.eq_ignore_ascii_case("ca") {
        return invalid("\"ca\" is the CA's own file name");
    }
    Ok(())
}

fn ca_params(key: &KeyPair) -> CertificateParams {
    let mut params = CertificateParams::default();
    let fingerprint: String = params
        .key_identifier(key)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("{CA_COMMON_NAME} {fingerprint}"),
    );
    dn.push(DnType::OrganizationName, ORGANIZATION);
    params.distinguished_name = dn;
    // No intermediates: the lab CA signs leaves only.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, CA_DAYS);
    params
}

fn leaf_params(subject: &Subject) -> Result<CertificateParams, RpcError> {
    // The object's own name first: `identity_of` reads the first `NAME.ROLE.atmlab`.
    let sans = vec![subject.dns_name(), subject.role.dns_name()];
    let mut params = CertificateParams::new(sans).map_err(|source| RpcError::CertGen {
        what: format!("the subject names of {subject}"),
        source,
    })?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, subject.name.as_str());
    dn.push(DnType::OrganizationalUnitName, subject.role.as_str());
    dn.push(DnType::OrganizationName, ORGANIZATION);
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, LEAF_DAYS);
    Ok(params)
}

fn write_leaf(
    dir: &Path,
    subject: &Subject,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<TlsFiles, RpcError> {
    let name = subject.name.as_str();
    let files = TlsFiles::in_dir(dir, name);
    let key = KeyPair::generate().map_err(|source| RpcError::CertGen {
        what: format!("the key of {name}"),
        source,
    })?;
    let cert = leaf_params(subject)?
        .signed_by(&key, issuer)
        .map_err(|source| RpcError::CertGen {
            what: format!("the certificate of {name}"),
            source,
        })?;
    write_file(&files.key, &key.serialize_pem(), true)?;
    write_file(&files.cert, &cert.pem(), false)?;
    Ok(files)
}

/// Writes `contents` to `path`, replacing it; a `secret` file is made readable by its
/// owner only (set on the open handle before any byte is written, so the key is never
/// readable by others, even for a moment, even when the file existed with looser bits).
fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), RpcError> {
    let err = |source| RpcError::Write {
        path: path.to_owned(),
        source,
    };
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file: File = options.open(path).map_err(err)?;
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(err)?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    file.write_all(contents.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)
}

/// Valid from yesterday to yesterday + `days`, at midnight UTC. A day of slack before now
/// lets a machine whose clock is a little behind accept a certificate made on another.
fn set_validity(params: &mut CertificateParams, days: u64) {
    let today = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / DAY_SECS);
    let start = today.saturating_sub(1);
    let at = |day: u64| {
        let (y, m, d) = civil_from_days(day);
        rcgen::date_time_ymd(y, m, d)
    };
    params.not_before = at(start);
    params.not_after = at(start + days);
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's
/// `civil_from_days`), so that certificate dates need no date crate of our own.
fn civil_from_days(days: u64) -> (i32, u8, u8) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month as u8, day as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(specs: &[&str]) -> Vec<Subject> {
        Subject::list(specs).unwrap()
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(10_957 + 365), (2000, 12, 31));
    }

    #[test]
    fn names() {
        for good in ["s1", "switch-1", "cm.a", "names"] {
            check_name(good).unwrap();
        }
        for bad in ["", "switch/s1", "-a", "a.", "a..b", "ca", "CA", "a b", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ensure_makes_what_is_missing_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let made = ensure_certs(d, &subs(&["switch:s1", "admin:admin"])).unwrap();
        assert_eq!(
            made,
            Ensured {
                made_ca: true,
                issued: 2
            }
        );
        let ca = std::fs::read(d.join(CA_CERT)).unwrap();
        let s1 = std::fs::read(d.join("s1.pem")).unwrap();
        // A second run with one more name issues that one, from the same CA.
        let made = ensure_certs(d, &subs(&["switch:s1", "admin:admin", "switch:s2"])).unwrap();
        assert_eq!(
            made,
            Ensured {
                made_ca: false,
                issued: 1
            }
        );
        assert_eq!(std::fs::read(d.join(CA_CERT)).unwrap(), ca);
        assert_eq!(std::fs::read(d.join("s1.pem")).unwrap(), s1);
        TlsFiles::in_dir(d, "s2").load().unwrap();
        // The CA key kept elsewhere: fine while nothing is missing...
        std::fs::remove_file(d.join(CA_KEY)).unwrap();
        assert_eq!(
            ensure_certs(d, &subs(&["switch:s1", "switch:s2"]))
                .unwrap()
                .issued,
            0
        );
        // ...and refused, writing nothing, when something would have to be issued.
        let e = ensure_certs(d, &subs(&["switch:s3"])).unwrap_err();
        assert!(matches!(e, RpcError::NoCa { .. }), "{e}");
        assert!(!d.join("s3.pem").exists() && !d.join("s3.key").exists());
    }

    #[test]
    fn a_certificate_carries_its_role_and_name_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        ensure_certs(d, &subs(&["switch:s1"])).unwrap();
        let id = TlsFiles::in_dir(d, "s1").load().unwrap();
        assert_eq!(
            id.subject(),
            Some(Subject::new(super::super::Role::Switch, "s1"))
        );
        let leaf = id.certificate_chain()[0].clone();
        let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref()).unwrap();
        let san = parsed.subject_alternative_name().unwrap().unwrap();
        let names: Vec<String> = san
            .value
            .general_names
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(
            names,
            ["DNSName(s1.switch.atmlab)", "DNSName(switch.atmlab)"],
            "no localhost, no address: a certificate names one object"
        );
        // The same name under another role is re-issued (as is one made before roles);
        // the CA is kept.
        let ca = std::fs::read(d.join(CA_CERT)).unwrap();
        let made = ensure_certs(d, &subs(&["host:s1"])).unwrap();
        assert_eq!(made.issued, 1);
        let id = TlsFiles::in_dir(d, "s1").load().unwrap();
        assert_eq!(
            id.subject(),
            Some(Subject::new(super::super::Role::Host, "s1"))
        );
        assert_eq!(std::fs::read(d.join(CA_CERT)).unwrap(), ca);
        assert_eq!(ensure_certs(d, &subs(&["host:s1"])).unwrap().issued, 0);
    }

    #[test]
    fn init_refuses_to_replace_a_ca_without_force() {
        let dir = tempfile::tempdir().unwrap();
        init_certs(dir.path(), &subs(&["switch:a"]), false).unwrap();
        let before = std::fs::read(dir.path().join(CA_CERT)).unwrap();
        let e = init_certs(dir.path(), &subs(&["switch:b"]), false).unwrap_err();
        assert!(matches!(e, RpcError::CaExists { .. }), "{e}");
        assert!(
            !dir.path().join("b.pem").exists(),
            "a refused init wrote a leaf"
        );
        assert_eq!(std::fs::read(dir.path().join(CA_CERT)).unwrap(), before);
        init_certs(dir.path(), &subs(&["switch:b"]), true).unwrap();
        assert_ne!(std::fs::read(dir.path().join(CA_CERT)).unwrap(), before);
    }

    #[cfg(unix)]
    #[test]
    fn keys_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let files = init_certs(dir.path(), &subs(&["switch:a"]), false).unwrap();
        for key in [dir.path().join(CA_KEY), files[0].key.clone()] {
            let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", key.display());
        }
        let mode = std::fs::metadata(&files[0].cert)
            .unwrap()
            .permissions()
            .mode()
            & 0o077;
        assert_ne!(mode, 0, "certificates are public");
    }

    #[test]
    fn issued_certificates_load_and_chain() {
        let dir = tempfile::tempdir().unwrap();
        let files = init_certs(dir.path(), &subs(&["switch:s1", "cm:cm"]), false).unwrap();
        assert_eq!(files[1], TlsFiles::in_dir(dir.path(), "cm"));
        for f in &files {
            verify_leaf(f).unwrap();
            f.load().unwrap();
        }
        let extra =
            issue_cert(dir.path(), &Subject::new(super::super::Role::Switch, "s2")).unwrap();
        extra.load().unwrap();
    }

    #[test]
    fn issue_without_ca_or_with_a_foreign_key_fails_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let e =
            issue_cert(dir.path(), &Subject::new(super::super::Role::Switch, "s1")).unwrap_err();
        assert!(matches!(e, RpcError::NoCa { .. }), "{e}");

        // A ca.key from another lab beside this lab's ca.pem: caught at issue time.
        let other = tempfile::tempdir().unwrap();
        init_certs(dir.path(), &subs(&[]), false).unwrap();
        init_certs(other.path(), &subs(&[]), false).unwrap();
        std::fs::copy(other.path().join(CA_KEY), dir.path().join(CA_KEY)).unwrap();
        let e =
            issue_cert(dir.path(), &Subject::new(super::super::Role::Switch, "s1")).unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
    }
}
