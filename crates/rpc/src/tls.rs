//! Mutual TLS for every control interface (DESIGN.md §5, "Nobody gets in uninvited").
//!
//! xbind and ReTINA ran their CORBA objects on a closed testbed; atmlab's control
//! interfaces listen on real sockets, so each side proves who it is. The lab has one CA;
//! every object (switch server, connection manager, name service, the CLI as a client)
//! holds a certificate that CA signed, usable both as server and as client. A server
//! accepts only callers whose certificate chains to the CA, and a client accepts only
//! servers whose certificate does.
//!
//! - Certificates: [`init_certs`] makes the CA and the objects' certificates in a
//!   directory; [`issue_cert`] adds one more with the existing CA; [`ensure_certs`]
//!   makes whichever of the two is missing (what every command that starts objects
//!   calls).
//! - Loading: [`TlsFiles`] (three paths) loads into a [`TlsIdentity`], whose errors name
//!   the file at fault.
//! - Configurations: [`TlsIdentity::tonic_server_config`] and
//!   [`TlsIdentity::tonic_client_config`] for tonic; [`TlsIdentity::server_config`] and
//!   [`TlsIdentity::client_config`] (rustls) with [`TlsIdentity::acceptor`] and
//!   [`TlsIdentity::connector`] for a raw-TCP protocol.
//! - Serving: [`incoming`] accepts TCP connections, runs each TLS handshake in its own
//!   task with a time-out, bounds the handshakes pending per source address and in all
//!   ([`AcceptLimits`]), counts each refusal ([`IncomingStats`], by [`Refusal`]) and logs
//!   them as one `tracing::warn!` summary per interval (the listener's address, the last
//!   peer and reason), and yields only the authenticated streams; hand it to tonic's
//!   `serve_with_incoming`. One client that fails its handshake, or never finishes it,
//!   never stops or stalls the server, and nor do thousands from one address.
//!   ([`grpc_incoming`] picks the acceptor for gRPC.)
//!
//! Why do the handshake here rather than with tonic's `Server::tls_config`? Tonic logs a
//! failed handshake at `debug` only, without the peer address, and holds no caps; a
//! refused caller is something an operator must see. With [`incoming`], do **not** also set
//! `Server::tls_config` (that would wrap TLS in TLS).
//!
//! TLS 1.3 note: the client finishes its side of the handshake before the server checks
//! the client certificate, so a refused client may see `connect` succeed and its first
//! read or RPC fail. The server side ([`accept`], [`incoming`]) always knows at once.

mod certs;
mod incoming;
mod roles;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio_rustls::{client, server};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::error::RpcError;

pub use certs::{CA_CERT, CA_KEY, Ensured, ensure_certs, init_certs, issue_cert};
/// The acceptor and connector types of [`TlsIdentity::acceptor`] and
/// [`TlsIdentity::connector`], for crates that hold them without depending on tokio-rustls.
pub use tokio_rustls::{TlsAcceptor, TlsConnector};

pub use roles::{Caller, DOMAIN, Expect, PeerIdentity, Role, Subject, identity_of};

pub use incoming::{
    AcceptLimits, Incoming, IncomingStats, LISTEN_BACKLOG, PeerInfo, Refusal, ServerStream,
    grpc_incoming, grpc_incoming_with, incoming, incoming_with, source_key,
};

/// How long a client waits for a server to finish its TLS handshake ([`connect`],
/// [`TlsIdentity::tonic_client_config`]): long enough for a loaded machine.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a server waits for a peer to finish its TLS handshake unless told otherwise
/// ([`AcceptLimits::handshake_timeout`], [`accept`]): a handshake on loopback or a LAN
/// takes milliseconds, and a silent peer holds a descriptor and a slot until then, so
/// a few seconds (issue 24: a 10 s wait let 260 silent connections stall a server).
pub const SERVER_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

/// The ALPN protocol of gRPC (HTTP/2); tonic's client refuses a server that does not
/// negotiate it.
pub const ALPN_H2: &[u8] = b"h2";

/// The three files of one object's TLS identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The lab CA's certificate (PEM): the only issuer this object trusts.
    pub ca: PathBuf,
    /// This object's certificate (PEM), possibly followed by intermediates.
    pub cert: PathBuf,
    /// This object's private key (PEM, PKCS#8, SEC1 or PKCS#1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// The files [`init_certs`] writes for `name` in `dir`: `ca.pem`, `NAME.pem`,
    /// `NAME.key`.
    pub fn in_dir(dir: &Path, name: &str) -> Self {
        TlsFiles {
            ca: dir.join(CA_CERT),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        }
    }

    /// Reads and checks the three files: each must hold what it should, and the key must
    /// belong to the certificate. Errors name the file at fault.
    pub fn load(&self) -> Result<TlsIdentity, RpcError> {
        let ca_pem = read(&self.ca)?;
        let cert_pem = read(&self.cert)?;
        let key_pem = read(&self.key)?;
        let ca = certificates(&self.ca, &ca_pem)?;
        let chain = certificates(&self.cert, &cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| RpcError::Pem {
            path: self.key.clone(),
            what: format!("no usable private key ({e})"),
        })?;
        let identity = TlsIdentity {
            files: self.clone(),
            ca_pem,
            cert_pem,
            key_pem,
            ca,
            chain,
            key: Arc::new(key),
            expect: None,
        };
        // Building both configurations checks now, with the file names at hand, what
        // would otherwise fail at the first connection: a key that does not match the
        // certificate, or a CA file that is not a CA.
        identity.server_config(&[])?;
        identity.client_config(&[])?;
        Ok(identity)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, RpcError> {
    std::fs::read(path).map_err(|source| RpcError::Read {
        path: path.to_owned(),
        source,
    })
}

fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, RpcError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| RpcError::Pem {
            path: path.to_owned(),
            what: format!("malformed certificate ({e})"),
        })?;
    if certs.is_empty() {
        return Err(RpcError::Pem {
            path: path.to_owned(),
            what: "no certificate found (expected a -----BEGIN CERTIFICATE----- block)".into(),
        });
    }
    Ok(certs)
}

/// One object's loaded TLS identity: the lab CA, its certificate chain and its key, and
/// the server it expects when it is a client ([`TlsIdentity::expecting`]).
///
/// Cheap to clone (the key is shared). Its `Debug` shows the file names, never the key.
#[derive(Clone)]
pub struct TlsIdentity {
    files: TlsFiles,
    ca_pem: Vec<u8>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    ca: Vec<CertificateDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    expect: Option<Expect>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("files", &self.files)
            .field("expect", &self.expect)
            .finish_non_exhaustive()
    }
}

/// The one crypto provider: ring (no aws-lc build, no process-wide default to install).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsIdentity {
    /// The files this identity was loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// The role and name this identity's own certificate carries (`None` for a
    /// certificate made before roles).
    pub fn subject(&self) -> Option<Subject> {
        self.chain.first().and_then(identity_of)
    }

    /// What this identity expects of a server when it is a client, if it was told.
    pub fn expected(&self) -> Option<&Expect> {
        self.expect.as_ref()
    }

    /// The DNS name a server's certificate must carry for this client: that of
    /// [`TlsIdentity::expecting`]. An identity that was not told refuses to connect
    /// ([`RpcError::NoExpectation`]): there is no server name every object carries.
    pub fn server_name(&self) -> Result<String, RpcError> {
        self.expect
            .as_ref()
            .map(Expect::dns_name)
            .ok_or_else(|| RpcError::NoExpectation {
                cert: self.files.cert.clone(),
            })
    }

    /// The same identity, as a client expecting `expect`: one object (a name it
    /// resolved), or any object of a role (an address it was given).
    pub fn expecting(&self, expect: Expect) -> Self {
        let mut id = self.clone();
        id.expect = Some(expect);
        id
    }

    /// The CA certificates this identity trusts.
    pub fn ca_certificates(&self) -> &[CertificateDer<'static>] {
        &self.ca
    }

    /// This identity's certificate chain (its own certificate first).
    pub fn certificate_chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// tonic's server TLS: this identity's certificate, and a client certificate signed
    /// by the lab CA required of every caller.
    ///
    /// For `Server::builder().tls_config(..)`. Prefer [`grpc_incoming`], which logs
    /// refused handshakes at `warn` with the peer's address; tonic logs them at `debug`.
    pub fn tonic_server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .client_ca_root(Certificate::from_pem(&self.ca_pem))
            // Mandatory client authentication is tonic's default; said here because it is
            // the point of the whole module.
            .client_auth_optional(false)
            .timeout(SERVER_HANDSHAKE_TIMEOUT)
    }

    /// tonic's client TLS: trust the lab CA only, present this identity's certificate,
    /// and expect [`TlsIdentity::server_name`] in the server's certificate.
    pub fn tonic_client_config(&self) -> Result<ClientTlsConfig, RpcError> {
        Ok(ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .domain_name(self.server_name()?)
            .timeout(HANDSHAKE_TIMEOUT))
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, RpcError> {
        let mut roots = RootCertStore::empty();
        for cert in &self.ca {
            roots.add(cert.clone()).map_err(|source| RpcError::Tls {
                context: self.files.ca.display().to_string(),
                source,
            })?;
        }
        Ok(Arc::new(roots))
    }

    /// A rustls server configuration that requires a client certificate from the lab CA,
    /// offering the ALPN protocols `alpn` (empty for none; [`ALPN_H2`] for gRPC).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<rustls::ServerConfig>, RpcError> {
        let provider = provider();
        // Client authentication is mandatory: the builder's default, which
        // `allow_unauthenticated` would relax. Never call it here.
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots()?, provider.clone())
            .build()
            .map_err(|source| RpcError::Verifier {
                context: self.files.ca.display().to_string(),
                source,
            })?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_client_cert_verifier(verifier)
                    .with_single_cert(self.chain.clone(), self.key.clone_key())
            })
            .map_err(|source| self.pair_error(source))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// A rustls client configuration that trusts the lab CA only and presents this
    /// identity's certificate, offering the ALPN protocols `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Result<Arc<rustls::ClientConfig>, RpcError> {
        let roots = self.roots()?;
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_root_certificates(roots)
                    .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            })
            .map_err(|source| self.pair_error(source))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    fn pair_error(&self, source: rustls::Error) -> RpcError {
        RpcError::Tls {
            context: format!(
                "{} and {}",
                self.files.cert.display(),
                self.files.key.display()
            ),
            source,
        }
    }

    /// A server-side acceptor for a raw-TCP protocol (no ALPN), requiring client
    /// certificates from the lab CA. Use it with [`accept`] or [`incoming`].
    pub fn acceptor(&self) -> Result<TlsAcceptor, RpcError> {
        Ok(TlsAcceptor::from(self.server_config(&[])?))
    }

    /// A server-side acceptor for gRPC (ALPN `h2`), for [`incoming`].
    pub fn grpc_acceptor(&self) -> Result<TlsAcceptor, RpcError> {
        Ok(TlsAcceptor::from(self.server_config(&[ALPN_H2])?))
    }

    /// A client-side connector for a raw-TCP protocol (no ALPN). Use it with [`connect`].
    pub fn connector(&self) -> Result<TlsConnector, RpcError> {
        Ok(TlsConnector::from(self.client_config(&[])?))
    }
}

/// Runs the server side of a TLS handshake on an accepted connection, within
/// [`SERVER_HANDSHAKE_TIMEOUT`].
///
/// The error names the peer and the reason (no certificate, unknown issuer, ...); the
/// caller logs it (`tracing::warn!(%error, "refused")`) and goes on serving. [`incoming`]
/// does all of this for a whole listener.
pub async fn accept(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
) -> Result<server::TlsStream<TcpStream>, RpcError> {
    let peer = tcp.peer_addr().map_err(|source| RpcError::Io {
        context: "peer address of an accepted connection".into(),
        source,
    })?;
    handshake(acceptor, tcp, peer, SERVER_HANDSHAKE_TIMEOUT).await
}

/// The server side of a TLS handshake with `peer` within `limit`; the error names the
/// peer.
pub async fn handshake(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    limit: Duration,
) -> Result<server::TlsStream<TcpStream>, RpcError> {
    match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(source)) => Err(RpcError::Handshake { peer, source }),
        Err(_) => Err(RpcError::HandshakeTimeout { peer, after: limit }),
    }
}

/// Connects to `addr` over TCP (`TCP_NODELAY` on) and runs the client side of a TLS
/// handshake, expecting `expect` of the server's certificate, within
/// [`HANDSHAKE_TIMEOUT`].
///
/// Under TLS 1.3 a server that refuses this client's certificate is noticed at the first
/// read, not here (see the module doc).
pub async fn connect(
    connector: &TlsConnector,
    addr: impl ToSocketAddrs,
    expect: &Expect,
) -> Result<client::TlsStream<TcpStream>, RpcError> {
    let server_name = &expect.dns_name();
    let name =
        ServerName::try_from(server_name.to_owned()).map_err(|e| RpcError::InvalidAddress {
            addr: server_name.to_owned(),
            reason: format!("not a server name: {e}"),
        })?;
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|source| RpcError::Io {
            context: format!("connecting to {server_name}"),
            source,
        })?;
    let peer = tcp.peer_addr().map_err(|source| RpcError::Io {
        context: "peer address of a new connection".into(),
        source,
    })?;
    // Control messages are small and latency-bound; Nagle would hold them back.
    tcp.set_nodelay(true).map_err(|source| RpcError::Io {
        context: format!("TCP_NODELAY on the connection to {peer}"),
        source,
    })?;
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, tcp)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(source)) => Err(RpcError::Handshake { peer, source }),
        Err(_) => Err(RpcError::HandshakeTimeout {
            peer,
            after: HANDSHAKE_TIMEOUT,
        }),
    }
}
