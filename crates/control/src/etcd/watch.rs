//! A watch on the keys under a prefix, resumed on another member when one fails.
//!
//! The name service's clients poll today (a manager re-lists the switches when a call
//! fails); with etcd, a registry can be told instead. etcd numbers every change with a
//! revision, so a watch that breaks (its member died) is opened again on the next
//! member from the revision after the last event seen, and misses nothing, unless the
//! store was compacted past it meanwhile, which the watcher reports as an error.
//!
//! Limit: a member that hangs without closing its connection leaves the stream silent;
//! the watch notices only when the member's connection breaks.

use std::time::Duration;

use atmlab_rpc::etcd::etcdserverpb as pb;
use atmlab_rpc::etcd::etcdserverpb::watch_client::WatchClient;
use atmlab_rpc::etcd::mvccpb;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::codec::Streaming;

use super::{EtcdClient, KeyValue, REQUEST_TIMEOUT, retryable, status_error};
use crate::{ControlError, ErrorKind};

/// The pause before a broken watch is opened again.
const REOPEN_PAUSE: Duration = Duration::from_millis(100);
/// Events buffered for a slow reader before the watch waits for it.
const BUFFER: usize = 256;

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    /// Created or changed.
    Put,
    /// Deleted, or gone with its lease.
    Delete,
}

/// One change to a watched key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// Put or delete.
    pub kind: WatchKind,
    /// The key after the change (a deleted key has its key and `mod_revision` only).
    pub kv: KeyValue,
}

/// The changes under a prefix, in revision order. Dropping it ends the watch.
#[derive(Debug)]
pub struct Watcher {
    events: mpsc::Receiver<Result<WatchEvent, ControlError>>,
    task: JoinHandle<()>,
}

impl Watcher {
    /// Opens the watch (on the first member that answers) before returning, so that no
    /// change after this call is missed.
    pub(super) async fn start(
        client: &EtcdClient,
        key: Vec<u8>,
        range_end: Vec<u8>,
        from: i64,
    ) -> Result<Watcher, ControlError> {
        let (stream, created) = open(client, &key, &range_end, from).await?;
        let next = if from > 0 { from } else { created + 1 };
        let (tx, rx) = mpsc::channel(BUFFER);
        let task = tokio::spawn(run(client.clone(), key, range_end, next, stream, tx));
        Ok(Watcher { events: rx, task })
    }

    /// The next change; `None` once the watch has ended after reporting an error.
    pub async fn next(&mut self) -> Option<Result<WatchEvent, ControlError>> {
        self.events.recv().await
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An open watch stream, with its request sender (closing that would end the watch).
struct Open {
    _requests: mpsc::Sender<pb::WatchRequest>,
    stream: Streaming<pb::WatchResponse>,
}

/// Opens a watch stream and waits for etcd to confirm it; returns the store's revision
/// at creation.
async fn open(
    client: &EtcdClient,
    key: &[u8],
    range_end: &[u8],
    from: i64,
) -> Result<(Open, i64), ControlError> {
    let create = pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
            pb::WatchCreateRequest {
                key: key.to_vec(),
                range_end: range_end.to_vec(),
                start_revision: from,
                ..Default::default()
            },
        )),
    };
    client
        .call("etcd Watch.Watch", Some(REQUEST_TIMEOUT), |c| {
            let create = create.clone();
            async move {
                let (tx, rx) = mpsc::channel(1);
                tx.send(create)
                    .await
                    .map_err(|_| tonic::Status::internal("request channel closed"))?;
                let mut stream = WatchClient::new(c)
                    .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await?
                    .into_inner();
                match stream.message().await? {
                    Some(r) if r.created && !r.canceled => {
                        let rev = r.header.map_or(0, |h| h.revision);
                        let open = Open {
                            _requests: tx,
                            stream,
                        };
                        Ok(tonic::Response::new((open, rev)))
                    }
                    Some(r) => Err(tonic::Status::failed_precondition(format!(
                        "watch not created: {}",
                        r.cancel_reason
                    ))),
                    None => Err(tonic::Status::unavailable("watch stream closed")),
                }
            }
        })
        .await
}

/// The watch task: forwards events, reopens the stream from the next revision when it
/// breaks, ends on an error it cannot get past or when the [`Watcher`] is dropped.
async fn run(
    client: EtcdClient,
    key: Vec<u8>,
    range_end: Vec<u8>,
    mut next: i64,
    mut open_stream: Open,
    events: mpsc::Sender<Result<WatchEvent, ControlError>>,
) {
    loop {
        match open_stream.stream.message().await {
            Ok(Some(r)) => {
                if r.canceled {
                    let message = if r.compact_revision > 0 {
                        format!(
                            "the store was compacted to revision {} past the watch's {next}",
                            r.compact_revision
                        )
                    } else {
                        format!("etcd cancelled the watch: {}", r.cancel_reason)
                    };
                    let _ = events
                        .send(Err(ControlError::Call {
                            call: "etcd Watch.Watch",
                            kind: ErrorKind::Other(11),
                            message,
                        }))
                        .await;
                    return;
                }
                for e in r.events {
                    let Some(kv) = e.kv else { continue };
                    next = kv.mod_revision + 1;
                    let kind = if e.r#type == mvccpb::event::EventType::Delete as i32 {
                        WatchKind::Delete
                    } else {
                        WatchKind::Put
                    };
                    let event = WatchEvent {
                        kind,
                        kv: KeyValue::from_pb(kv),
                    };
                    if events.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
            }
            Ok(None) => {
                tracing::debug!("etcd watch stream ended; reopening");
            }
            Err(s) if retryable(&s) => {
                tracing::debug!(status = %s.message(), "etcd watch broke; reopening");
            }
            Err(s) => {
                let _ = events.send(Err(status_error("etcd Watch.Watch", &s))).await;
                return;
            }
        }
        // Broken: the next member, from the revision after the last event.
        client.skip_member();
        loop {
            if events.is_closed() {
                return;
            }
            tokio::time::sleep(REOPEN_PAUSE).await;
            match open(&client, &key, &range_end, next).await {
                Ok((reopened, _)) => {
                    open_stream = reopened;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    tracing::warn!(error = %e, "etcd watch cannot reopen yet");
                }
                Err(e) => {
                    let _ = events.send(Err(e)).await;
                    return;
                }
            }
        }
    }
}
