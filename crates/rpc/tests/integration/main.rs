//! Mutual TLS end to end on loopback sockets: a gRPC server behind `grpc_incoming` and a
//! raw-TCP server behind `accept`/`incoming`, each facing a client with a valid
//! certificate, one with none, one from another CA, and (for gRPC) one without TLS.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use atmlab_rpc::tls::{self, PeerInfo, TlsFiles, TlsIdentity};
use atmlab_rpc::v1::name_service_client::NameServiceClient;
use atmlab_rpc::v1::name_service_server::{NameService, NameServiceServer};
use atmlab_rpc::v1::{
    ListReply, ListRequest, ObjectRef, RegisterReply, RegisterRequest, RenewReply, RenewRequest,
    ResolveRequest, UnregisterReply, UnregisterRequest,
};
use atmlab_rpc::{RpcError, client_channel};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};

/// A stalled server keeps its connection.
mod overload;

/// The accept loop out of file descriptors.
mod emfile;

/// Silent connections against the accept loop (issue 24, "Ports that hold").
mod idle;

/// Reflection and health, for operators' tools (issue 25).
mod operators;

/// Held by the tests that load the machine or depend on its timing (the stall of
/// `overload.rs` must see thousands of calls pile up within 400 ms; `idle.rs` opens
/// 2,000 connections), so that they do not run beside each other.
fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Generous: only reached when something is broken.
const DEADLINE: Duration = Duration::from_secs(20);

/// The lab (a CA, a server and a client certificate) and a rogue lab with its own CA.
struct Labs {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    server: TlsIdentity,
    client: TlsIdentity,
    /// A certificate from the other CA, trusting our CA (so only the server can object).
    rogue: TlsIdentity,
    /// A client of the other lab entirely: trusts only the other CA.
    foreign: TlsIdentity,
    ca_pem: Vec<u8>,
}

fn subjects(specs: &[&str]) -> Vec<tls::Subject> {
    tls::Subject::list(specs).unwrap()
}

/// What the clients expect of the server: the name service.
fn names() -> tls::Expect {
    tls::Expect::Role(tls::Role::Names)
}

fn labs() -> Labs {
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    tls::init_certs(
        ours.path(),
        &subjects(&["names:names", "admin:client"]),
        false,
    )
    .unwrap();
    tls::init_certs(theirs.path(), &subjects(&["admin:client"]), false).unwrap();
    let load = |dir: &Path, name| TlsFiles::in_dir(dir, name).load().unwrap();
    let rogue = TlsFiles {
        ca: ours.path().join(tls::CA_CERT),
        ..TlsFiles::in_dir(theirs.path(), "client")
    }
    .load()
    .unwrap()
    .expecting(names());
    Labs {
        server: load(ours.path(), "names"),
        client: load(ours.path(), "client").expecting(names()),
        foreign: load(theirs.path(), "client").expecting(names()),
        rogue,
        ca_pem: std::fs::read(ours.path().join(tls::CA_CERT)).unwrap(),
        _dirs: (ours, theirs),
    }
}

/// A name service that knows one name and tells the caller what it saw of it.
///
/// With `stall_first`, the first `resolve` blocks its runtime's thread for 400 ms, as an
/// overloaded server's handlers fall behind (`overload.rs`).
#[derive(Default)]
struct Echo {
    stall_first: bool,
    stalled: std::sync::atomic::AtomicBool,
}

#[tonic::async_trait]
impl NameService for Echo {
    async fn register(
        &self,
        _: Request<RegisterRequest>,
    ) -> Result<Response<RegisterReply>, Status> {
        Err(Status::unimplemented("test"))
    }
    async fn renew(&self, _: Request<RenewRequest>) -> Result<Response<RenewReply>, Status> {
        Err(Status::unimplemented("test"))
    }
    async fn unregister(
        &self,
        _: Request<UnregisterRequest>,
    ) -> Result<Response<UnregisterReply>, Status> {
        Err(Status::unimplemented("test"))
    }
    async fn resolve(
        &self,
        request: Request<ResolveRequest>,
    ) -> Result<Response<ObjectRef>, Status> {
        if self.stall_first && !self.stalled.swap(true, std::sync::atomic::Ordering::SeqCst) {
            // On purpose: the whole (one-thread) server stops, as a starved one does.
            std::thread::sleep(Duration::from_millis(400));
        }
        let peer = request
            .extensions()
            .get::<PeerInfo>()
            .cloned()
            .ok_or_else(|| Status::internal("no PeerInfo"))?;
        let caller = atmlab_rpc::tls::Caller::of(&request).to_string();
        let certs = peer.certificates.map_or(0, |c| c.len());
        Ok(Response::new(ObjectRef {
            name: request.into_inner().name,
            attributes: [
                ("peer_certs".to_owned(), certs.to_string()),
                ("caller".to_owned(), caller),
            ]
            .into(),
            ..Default::default()
        }))
    }
    async fn list(&self, _: Request<ListRequest>) -> Result<Response<ListReply>, Status> {
        Err(Status::unimplemented("test"))
    }
}

async fn grpc_server(identity: Option<&TlsIdentity>) -> (SocketAddr, tls::IncomingStats) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let incoming = tls::grpc_incoming(listener, identity).unwrap();
    let (addr, stats) = (incoming.local_addr(), incoming.stats());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(NameServiceServer::new(Echo::default()))
            .serve_with_incoming(incoming),
    );
    (addr, stats)
}

/// Resolves "x" over `endpoint`; any failure (connect or call) as text.
async fn resolve(endpoint: Result<Endpoint, String>) -> Result<ObjectRef, String> {
    let channel = endpoint?
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let reply = NameServiceClient::new(channel)
        .resolve(ResolveRequest { name: "x".into() })
        .await
        .map_err(|e| format!("call: {e}"))?;
    Ok(reply.into_inner())
}

fn with_tls(addr: SocketAddr, identity: &TlsIdentity) -> Result<Endpoint, String> {
    atmlab_rpc::endpoint(&addr.to_string(), Some(identity)).map_err(|e| e.to_string())
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn grpc_admits_only_the_labs_certificates() {
    let labs = labs();
    let (addr, stats) = grpc_server(Some(&labs.server)).await;

    // A valid client gets through, and the service sees its certificate.
    let reply = resolve(with_tls(addr, &labs.client)).await.unwrap();
    assert_eq!(reply.name, "x");
    assert_eq!(reply.attributes["peer_certs"], "1");
    assert_eq!(reply.attributes["caller"], "admin \"client\"");
    // client_channel is the short way to the same.
    let channel = client_channel(&format!("https://{addr}"), Some(&labs.client))
        .await
        .unwrap();
    NameServiceClient::new(channel)
        .resolve(ResolveRequest { name: "y".into() })
        .await
        .unwrap();

    // TLS, but no client certificate.
    let no_cert = Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&labs.ca_pem))
                .domain_name("names.atmlab"),
        )
        .map_err(|e| e.to_string());
    let e = resolve(no_cert).await.unwrap_err();
    eprintln!("no certificate: {e}");
    // A certificate from another CA.
    let e = resolve(with_tls(addr, &labs.rogue)).await.unwrap_err();
    eprintln!("other CA: {e}");
    // No TLS at all.
    let plain = Endpoint::from_shared(format!("http://{addr}"))
        .map(|e| e.connect_timeout(DEADLINE))
        .map_err(|e| e.to_string());
    let e = resolve(plain).await.unwrap_err();
    eprintln!("plain: {e}");

    wait_for("three refusals", || stats.refused() >= 3).await;
    // The server goes on serving after the refusals.
    resolve(with_tls(addr, &labs.client)).await.unwrap();
    assert!(stats.accepted() >= 2);
}

#[tokio::test]
async fn grpc_clients_refuse_a_server_of_another_lab() {
    let labs = labs();
    let (addr, stats) = grpc_server(Some(&labs.server)).await;
    // The foreign client trusts only its own CA, so it rejects our server's certificate.
    let e = resolve(with_tls(addr, &labs.foreign)).await.unwrap_err();
    assert!(e.contains("connect"), "{e}");
    wait_for("the refusal", || stats.refused() >= 1).await;
}

#[tokio::test]
async fn insecure_grpc_has_no_peer_certificates() {
    let (addr, _) = grpc_server(None).await;
    let channel = client_channel(&addr.to_string(), None).await.unwrap();
    let reply = NameServiceClient::new(channel)
        .resolve(ResolveRequest { name: "x".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.attributes["peer_certs"], "0");
}

/// A rustls client with the lab's CA as trust but no certificate of its own.
fn no_cert_connector(ca_pem: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    )
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

#[tokio::test]
async fn raw_accept_refuses_with_the_reason() {
    let labs = labs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = labs.server.acceptor().unwrap();
    let (tx, mut results) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            match tls::accept(&acceptor, tcp).await {
                Ok(mut stream) => {
                    let mut buf = [0u8; 4];
                    stream.read_exact(&mut buf).await.unwrap();
                    assert_eq!(&buf, b"ping");
                    stream.write_all(b"pong").await.unwrap();
                    stream.shutdown().await.unwrap();
                    tx.send(Ok(())).unwrap();
                }
                Err(e) => tx.send(Err(e)).unwrap(),
            }
        }
    });

    // Valid: a round trip.
    let mut stream = tls::connect(&labs.client.connector().unwrap(), addr, &names())
        .await
        .unwrap();
    stream.write_all(b"ping").await.unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    assert_eq!(buf, b"pong");
    results.recv().await.unwrap().unwrap();

    // No client certificate, then one from another CA: the server names the reason.
    let no_cert = no_cert_connector(&labs.ca_pem);
    let rogue = labs.rogue.connector().unwrap();
    for (connector, reason) in [(no_cert, "no certificates"), (rogue, "UnknownIssuer")] {
        // Under TLS 1.3 the client may finish its side before the server refuses; the
        // refusal then shows at its first read.
        if let Ok(mut stream) = tls::connect(&connector, addr, &names()).await {
            let _ = stream.write_all(b"ping").await;
            let mut buf = Vec::new();
            assert!(
                stream.read_to_end(&mut buf).await.is_err() || buf.is_empty(),
                "a refused client read {buf:?}"
            );
        }
        let e = results.recv().await.unwrap().unwrap_err();
        assert!(matches!(e, RpcError::Handshake { .. }), "{e}");
        assert!(e.to_string().contains(reason), "{e}");
    }
}

#[tokio::test]
async fn raw_incoming_skips_refused_and_stalled_handshakes() {
    let labs = labs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut incoming = tls::incoming(listener, Some(labs.server.acceptor().unwrap()));
    let addr = incoming.local_addr();
    let stats = incoming.stats();

    // A client that connects and never says a word holds its handshake open...
    let _silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    // ...and one that fails its handshake...
    let rogue = labs.rogue.connector().unwrap();
    if let Ok(mut s) = tls::connect(&rogue, addr, &names()).await {
        let _ = s.read_to_end(&mut Vec::new()).await;
    }
    // ...neither of which keeps a valid client waiting: it is served while the silent
    // handshake is still pending (not refused by its timeout).
    let client = tokio::spawn({
        let connector = labs.client.connector().unwrap();
        async move {
            let mut s = tls::connect(&connector, addr, &names()).await.unwrap();
            s.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            buf
        }
    });
    let mut stream = tokio::time::timeout(DEADLINE, incoming.next())
        .await
        .expect("no connection came through")
        .unwrap()
        .unwrap();
    assert_eq!(stream.peer_certificates().map(<[_]>::len), Some(1));
    let mut buf = [0u8; 4];
    stream.read_exact(&mut buf).await.unwrap();
    stream.write_all(b"pong").await.unwrap();
    assert_eq!(&client.await.unwrap(), b"pong");
    wait_for("the rogue's refusal", || stats.refused() == 1).await;
    assert_eq!(
        stats.refused(),
        1,
        "the silent client was refused: handshakes serialized?"
    );
    assert_eq!(stats.accepted(), 1);
}

#[test]
fn loading_names_the_file_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    tls::init_certs(dir.path(), &subjects(&["host:a", "host:b"]), false).unwrap();
    // The key of b with the certificate of a.
    let mixed = TlsFiles {
        key: dir.path().join("b.key"),
        ..TlsFiles::in_dir(dir.path(), "a")
    };
    let e = mixed.load().unwrap_err().to_string();
    assert!(e.contains("a.pem") && e.contains("b.key"), "{e}");

    let missing = TlsFiles::in_dir(dir.path(), "nobody");
    let e = missing.load().unwrap_err().to_string();
    assert!(e.contains("nobody.pem"), "{e}");

    std::fs::write(dir.path().join("ca.pem"), "not a certificate").unwrap();
    let e = TlsFiles::in_dir(dir.path(), "a")
        .load()
        .unwrap_err()
        .to_string();
    assert!(e.contains("ca.pem") && e.contains("no certificate"), "{e}");
}

/// Records WARN events as text ("message peer=... error=...").
#[derive(Clone, Default)]
struct WarnLog(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl tracing::Subscriber for WarnLog {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        let mut text = Text(String::new());
        event.record(&mut text);
        self.0.lock().unwrap().push(text.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The process-wide WARN log. Global, not `set_default`: a thread-local subscriber misses
/// events whose callsite another test thread registered first (tracing caches interest
/// per callsite), so it would pass alone and fail beside the other tests.
fn warn_log() -> &'static WarnLog {
    static LOG: std::sync::OnceLock<WarnLog> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let log = WarnLog::default();
        tracing::subscriber::set_global_default(log.clone()).unwrap();
        log
    })
}

#[tokio::test]
async fn refusals_are_summarized_at_warn_with_address_and_last_reason() {
    let log = warn_log();
    let labs = labs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let limits = tls::AcceptLimits {
        summary_interval: Duration::from_secs(1),
        ..Default::default()
    };
    let incoming = tls::grpc_incoming_with(listener, Some(&labs.server), &limits).unwrap();
    let (addr, stats) = (incoming.local_addr(), incoming.stats());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(NameServiceServer::new(Echo::default()))
            .serve_with_incoming(incoming),
    );
    for _ in 0..3 {
        resolve(with_tls(addr, &labs.rogue)).await.unwrap_err();
    }
    wait_for("the refusals", || stats.refused() == 3).await;
    assert_eq!(stats.count(tls::Refusal::HandshakeFailed), 3);
    // Other tests log refusals too; this server's lines carry its address.
    let ours = format!("local={addr}");
    let lines = || -> Vec<String> {
        log.0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(&ours))
            .cloned()
            .collect()
    };
    let summarized = |lines: &[String]| -> u64 {
        lines
            .iter()
            .filter_map(|l| {
                l.split("refused ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    };
    wait_for("the summary lines", || summarized(&lines()) == 3).await;
    let lines = lines();
    // One line per interval, not one per refusal: the three came within a second.
    assert!(lines.len() < 3, "{lines:?}");
    assert!(lines[0].contains("failed handshakes"), "{lines:?}");
    // The last refusal's peer and reason.
    assert!(
        lines[0].contains("TLS handshake with 127.0.0.1:"),
        "{lines:?}"
    );
    assert!(lines[0].contains("UnknownIssuer"), "{lines:?}");
}

/// Issue 24: "every certificate has SAN localhost and clients verify localhost, so any
/// certificate can pose as any server". A client that expects one object (or a role)
/// refuses a server holding another's certificate, though the lab CA signed both.
#[tokio::test]
async fn a_server_with_another_objects_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    tls::init_certs(
        dir.path(),
        &subjects(&["switch:s2", "switch:s3", "host:h", "admin:admin"]),
        false,
    )
    .unwrap();
    let load = |name| TlsFiles::in_dir(dir.path(), name).load().unwrap();
    // The server is s3.
    let (addr, _) = grpc_server(Some(&load("s3"))).await;
    let admin = load("admin");
    let expect = |e: tls::Expect| with_tls(addr, &admin.expecting(e));
    // Expecting s3, or any switch: served.
    resolve(expect(tls::Expect::object(tls::Role::Switch, "s3")))
        .await
        .unwrap();
    resolve(expect(tls::Expect::Role(tls::Role::Switch)))
        .await
        .unwrap();
    // Expecting s2 (the name the client resolved), or a name service: refused.
    for e in [
        tls::Expect::object(tls::Role::Switch, "s2"),
        tls::Expect::object(tls::Role::Host, "s3"),
        tls::Expect::Role(tls::Role::Names),
    ] {
        let err = resolve(expect(e.clone())).await.unwrap_err();
        assert!(
            err.contains("NotValidForName") || err.contains("not valid for"),
            "{e}: {err}"
        );
    }
    // An identity that says nothing of what it expects does not connect at all.
    let e = atmlab_rpc::endpoint(&addr.to_string(), Some(&admin)).unwrap_err();
    assert!(matches!(e, RpcError::NoExpectation { .. }), "{e}");
}
