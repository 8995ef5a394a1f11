//! Operators' tools against a server started through `atmlab_rpc::serve` (issue 25,
//! item 4): server reflection lists the services it offers (and only those), describes
//! them from the compiled IDL, and the standard health service says SERVING while it
//! serves and NOT_SERVING once it begins to stop. The least of the
//! roles, an observer, may do all of it: these are reads.

use std::net::SocketAddr;

use atmlab_rpc::tls::{self, TlsFiles, TlsIdentity};
use atmlab_rpc::v1::name_service_server::NameServiceServer;
use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

use super::{DEADLINE, Echo};

/// A name service (the test's `Echo`) served through `atmlab_rpc::serve` with mutual
/// TLS; the sender stops it.
struct Running {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), atmlab_rpc::RpcError>>,
    observer: TlsIdentity,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    tls::init_certs(
        dir.path(),
        &tls::Subject::list(&["names:names", "observer:watcher"]).unwrap(),
        false,
    )
    .unwrap();
    let load = |name| TlsFiles::in_dir(dir.path(), name).load().unwrap();
    let server = load("names");
    let observer = load("watcher").expecting(tls::Expect::Role(tls::Role::Names));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let services = atmlab_rpc::Services::new(NameServiceServer::new(Echo::default()));
    let task = tokio::spawn(async move {
        atmlab_rpc::serve("name service", listener, Some(&server), services, async {
            let _ = stopped.await;
        })
        .await
    });
    Running {
        addr,
        stop,
        task,
        observer,
        _dir: dir,
    }
}

async fn channel(r: &Running) -> tonic::transport::Channel {
    atmlab_rpc::client_channel(&r.addr.to_string(), Some(&r.observer))
        .await
        .unwrap()
}

/// One reflection request, its one answer.
async fn reflect(
    channel: tonic::transport::Channel,
    request: MessageRequest,
) -> Result<MessageResponse, tonic::Status> {
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let mut answers = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await?
        .into_inner();
    let answer: ServerReflectionResponse = answers
        .next()
        .await
        .ok_or_else(|| tonic::Status::unknown("no answer"))??;
    answer
        .message_response
        .ok_or_else(|| tonic::Status::unknown("an empty answer"))
}

async fn listed(channel: tonic::transport::Channel) -> Vec<String> {
    match reflect(channel, MessageRequest::ListServices(String::new()))
        .await
        .expect("reflection answers an observer")
    {
        MessageResponse::ListServicesResponse(list) => {
            let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
            names.sort();
            names
        }
        other => panic!("expected a list of services, got {other:?}"),
    }
}

async fn check(
    channel: tonic::transport::Channel,
    service: &str,
) -> Result<HealthCheckResponse, tonic::Status> {
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn reflection_lists_the_services_a_server_offers() {
    let r = start().await;
    let names = listed(channel(&r).await).await;
    assert_eq!(
        names,
        [
            "atmlab.v1.NameService",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ],
        "the name service's server lists itself and the operators' services, not every \
         service of the IDL"
    );
    // `grpcurl describe`: the file that defines the service, from the compiled IDL.
    match reflect(
        channel(&r).await,
        MessageRequest::FileContainingSymbol("atmlab.v1.NameService".into()),
    )
    .await
    .unwrap()
    {
        MessageResponse::FileDescriptorResponse(files) => {
            assert!(!files.file_descriptor_proto.is_empty());
        }
        other => panic!("expected the file of atmlab.v1.NameService, got {other:?}"),
    }
    r.stop.send(()).unwrap();
    r.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn health_is_serving_then_not_once_the_server_stops() {
    let r = start().await;
    for service in ["", "atmlab.v1.NameService"] {
        let answer = check(channel(&r).await, service).await.unwrap();
        assert_eq!(
            answer.status(),
            ServingStatus::Serving,
            "{service:?} while the server serves"
        );
    }
    // A service the server does not offer is unknown to its health service.
    let other = check(channel(&r).await, "atmlab.v1.SwitchServer").await;
    assert_eq!(other.unwrap_err().code(), tonic::Code::NotFound);

    // A watcher on the open connection sees the stop begin: NOT_SERVING is sent before
    // the server stops taking connections (a graceful stop lets open streams finish).
    let mut watch = HealthClient::new(channel(&r).await)
        .watch(HealthCheckRequest {
            service: "atmlab.v1.NameService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.next().await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);
    r.stop.send(()).unwrap();
    let next = tokio::time::timeout(DEADLINE, watch.next())
        .await
        .expect("the watch hears of the stop within the deadline");
    match next {
        Some(Ok(answer)) => assert_eq!(answer.status(), ServingStatus::NotServing),
        other => panic!("expected NOT_SERVING on the watch, got {other:?}"),
    }
    drop(watch);
    tokio::time::timeout(DEADLINE, r.task)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}
