//! The crate's one error type.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong making certificates, loading them, building TLS
/// configurations, or connecting.
///
/// Each variant names the file, address or peer it concerns, so the message alone tells
/// an operator what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file or directory could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A PEM file held no usable certificate or key.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was missing or malformed.
        what: String,
    },
    /// `init_certs` found a CA already in place and was not told to replace it.
    #[error(
        "a CA already exists at {}; pass force to replace it (every certificate it signed \
         stops being accepted)",
        path.display()
    )]
    CaExists {
        /// The existing `ca.pem`.
        path: PathBuf,
    },
    /// No CA in the directory to sign a certificate with.
    #[error("no CA at {} (create one with init_certs first)", path.display())]
    NoCa {
        /// The missing `ca.pem` or `ca.key`.
        path: PathBuf,
    },
    /// A role that is not one of `admin`, `cm`, `switch`, `host`, `names`, `observer`
    /// (or a subject without `ROLE:`).
    #[error(
        "{role:?} is not a role (expected one of admin, cm, switch, host, names, observer, \
         as ROLE or ROLE:NAME)"
    )]
    InvalidRole {
        /// What was given (at most 32 characters of it).
        role: String,
    },
    /// A TLS client that was not told which server it expects.
    #[error(
        "the TLS identity {} does not say which server it expects (TlsIdentity::expecting)",
        cert.display()
    )]
    NoExpectation {
        /// The identity's certificate.
        cert: std::path::PathBuf,
    },
    /// A certificate name that cannot be a file name and a DNS name.
    #[error("invalid certificate name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// rcgen failed to make a key or a certificate.
    #[error("generating {what}: {source}")]
    CertGen {
        /// The certificate or key being made.
        what: String,
        /// Why.
        source: rcgen::Error,
    },
    /// The certificate, key and CA do not fit together (rustls refused them).
    #[error("TLS configuration from {context}: {source}")]
    Tls {
        /// Which files or which configuration.
        context: String,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The CA certificates could not make a client verifier.
    #[error("client certificate verifier from {context}: {source}")]
    Verifier {
        /// Which CA file.
        context: String,
        /// rustls's reason.
        source: rustls::server::VerifierBuilderError,
    },
    /// A TLS handshake with a peer failed: a missing or untrusted certificate, a protocol
    /// error, or the peer hung up.
    #[error("TLS handshake with {peer} failed: {source}")]
    Handshake {
        /// The peer's address.
        peer: SocketAddr,
        /// The reason (a rustls error inside an `io::Error`).
        source: io::Error,
    },
    /// A peer did not finish its TLS handshake in time.
    #[error("TLS handshake with {peer} timed out after {after:?}")]
    HandshakeTimeout {
        /// The peer's address.
        peer: SocketAddr,
        /// The limit.
        after: Duration,
    },
    /// A socket operation failed (connect, peer address, ...).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and to which address.
        context: String,
        /// Why.
        source: io::Error,
    },
    /// An address that cannot be used.
    #[error("invalid address {addr:?}: {reason}")]
    InvalidAddress {
        /// The address given.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A gRPC server's transport failed while serving.
    #[error("serving gRPC on {addr}: {reason}")]
    Serve {
        /// The address the server listened on.
        addr: SocketAddr,
        /// tonic's error with its chain of causes.
        reason: String,
    },
    /// The reflection service could not be built from the compiled IDL (a descriptor set
    /// that does not decode: a build fault, not an operator's).
    #[error("building gRPC reflection from the IDL: {0}")]
    Reflection(String),
    /// tonic could not connect a channel.
    #[error("cannot connect to {addr}: {reason}")]
    Channel {
        /// The address.
        addr: String,
        /// tonic's error with its chain of causes.
        reason: String,
    },
}

/// The whole chain of causes of `e`, joined by ": ", because some errors (tonic's
/// transport error) print only their kind and keep the useful part in `source()`.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        // Some layers repeat their cause's text; print it once.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}
