//! The manager's links to its switch servers (paper 000 §II-C: the remote invocations of
//! the switch servers, oneway in xbind, whose delivery is not guaranteed): one task per
//! switch carries the core's batches over the SwitchServer command stream, re-opened when
//! it breaks; answers come back to the manager's inbox. Faults (`cm::faults`) are
//! applied here in both directions; a switch's connections are listed for the manager
//! when its stream re-opens (reconcile) and for sweeps.

use atmlab_core::time::Duration;
use atmlab_fabric::error::FabricError;
use atmlab_fabric::live::convert as cv;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::{Command, Reply};
use atmlab_rpc::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::cm::faults::{Delivery, FaultPlan, FaultyChannel, stream_id};

pub(super) type Inbox = mpsc::UnboundedSender<(u64, Result<Reply, FabricError>)>;

/// One switch server's link: its command stream, re-opened when it breaks, and the
/// faults injected on it, if any.
pub(super) struct Link {
    pub(super) name: String,
    pub(super) client: GrpcSwitch,
    pub(super) client_id: String,
    pub(super) inbox: Inbox,
    pub(super) stream_tx: Option<mpsc::Sender<pb::StreamRequest>>,
    pub(super) faults: Option<FaultPlan>,
    /// A stream was open once: opening another means the switch came back.
    pub(super) was_open: bool,
    /// Where the switch's connections go after it came back, for the manager to
    /// reconcile.
    pub(super) reconcile: mpsc::UnboundedSender<SwitchListing>,
}

/// Why a switch's connections were listed for the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    /// The switch came back: reconcile
    /// ([`CmCore::reconcile`](crate::cm::core::CmCore::reconcile)).
    Reopened,
    /// The periodic sweep
    /// ([`CmConfig::sweep_interval`](crate::cm::core::CmConfig::sweep_interval)).
    Sweep,
    /// The last sweep of a stopping manager.
    Final,
}

/// A switch's connections and reservations as listed (the reservations only for
/// sweeps), and why.
pub(super) type SwitchListing = (
    String,
    Vec<atmlab_fabric::switch::Connection>,
    Vec<atmlab_fabric::switch::Reservation>,
    Listing,
);

/// Lists `switch`'s connections and reservations in the background for the manager; a
/// switch that does not answer within two seconds counts as holding nothing (the next
/// sweep, or its stream's re-opening, looks again).
pub(super) fn list_connections(
    name: String,
    client: GrpcSwitch,
    why: Listing,
    to: mpsc::UnboundedSender<SwitchListing>,
) {
    use atmlab_fabric::live::backend::SwitchBackend;
    tokio::spawn(async move {
        let listed = tokio::time::timeout(std::time::Duration::from_secs(2), async {
            Ok::<_, atmlab_fabric::FabricError>((
                client.connections().await?,
                client.reservations().await?,
            ))
        })
        .await;
        let (conns, res) = match listed {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                tracing::warn!(switch = %name, error = %e, "cannot list a switch to sweep");
                Default::default()
            }
            Err(_) => {
                tracing::warn!(switch = %name, "listing a switch to sweep timed out");
                Default::default()
            }
        };
        let _ = to.send((name, conns, res, why));
    });
}

impl Link {
    /// The open stream, opening it if needed; `None` if the switch is unreachable.
    async fn stream(&mut self) -> Option<mpsc::Sender<pb::StreamRequest>> {
        if self.stream_tx.as_ref().is_none_or(|t| t.is_closed()) {
            self.stream_tx =
                open_stream(&self.name, &self.client, self.inbox.clone(), self.faults).await;
            if self.stream_tx.is_some() {
                if self.was_open {
                    // The switch server came back (perhaps restarted from its journal):
                    // what it holds now goes to the manager to reconcile.
                    use atmlab_fabric::live::backend::SwitchBackend;
                    match self.client.connections().await {
                        Ok(conns) => {
                            let _ = self.reconcile.send((
                                self.name.clone(),
                                conns,
                                Vec::new(),
                                Listing::Reopened,
                            ));
                        }
                        Err(e) => {
                            tracing::warn!(switch = %self.name, error = %e, "cannot list connections to reconcile");
                        }
                    }
                }
                self.was_open = true;
            }
        }
        self.stream_tx.clone()
    }

    /// A batch as one stream request (one gRPC message and one answer for the batch).
    fn request(&self, batch: &[(u64, Command)]) -> Option<pb::StreamRequest> {
        cv::stream_request(&self.client_id, batch)
    }

    async fn send(&mut self, batch: Vec<(u64, Command)>) {
        let Some(tx) = self.stream().await else {
            // The switch is unreachable: the commands are lost; the core re-sends them
            // after its command time-out, and we try to reconnect then.
            return;
        };
        if let Some(r) = self.request(&batch)
            && tx.send(r).await.is_err()
        {
            self.stream_tx = None;
        }
    }

    /// Sends `batch` on the stream open now, once `d` has passed (later batches may
    /// overtake it); lost if the switch is unreachable.
    async fn send_after(&mut self, d: Duration, batch: Vec<(u64, Command)>) {
        if let Some(tx) = self.stream().await
            && let Some(r) = self.request(&batch)
        {
            tokio::spawn(async move {
                delay(d).await;
                let _ = tx.send(r).await;
            });
        }
    }
}

/// The most commands a link merges from batches waiting into one stream message.
const MERGED_COMMANDS: usize = 256;

/// A link's task: each batch the manager sends goes out as its faults decide.
pub(super) async fn run_link(
    mut link: Link,
    mut batches: mpsc::UnboundedReceiver<Vec<(u64, Command)>>,
) {
    let mut faults = FaultyChannel::new(link.faults, stream_id(&link.name, true));
    while let Some(batch) = batches.recv().await {
        // The batches the manager has sent meanwhile go out with this one, as one
        // message: under load the stream carries fewer, larger messages by itself.
        let mut now: Vec<(u64, Command)> = Vec::new();
        let mut next = Some(batch);
        while let Some(batch) = next {
            for delivery in faults.apply(batch) {
                match delivery {
                    Delivery::Now(mut b) => {
                        if now.is_empty() {
                            now = b;
                        } else {
                            now.append(&mut b);
                        }
                    }
                    Delivery::After(d, b) => link.send_after(d, b).await,
                }
            }
            next = if now.len() < MERGED_COMMANDS {
                batches.try_recv().ok()
            } else {
                None
            };
        }
        if !now.is_empty() {
            link.send(now).await;
        }
    }
}

/// Waits `d` (a delayed message's delay).
async fn delay(d: Duration) {
    tokio::time::sleep(d.into()).await;
}

async fn open_stream(
    name: &str,
    client: &GrpcSwitch,
    inbox: Inbox,
    faults: Option<FaultPlan>,
) -> Option<mpsc::Sender<pb::StreamRequest>> {
    let (tx, rx) = mpsc::channel::<pb::StreamRequest>(4096);
    let replies = client
        .raw()
        .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await;
    let mut replies = match replies {
        Ok(r) => r.into_inner(),
        Err(e) => {
            tracing::warn!(switch = name, error = %e, "cannot open the command stream");
            return None;
        }
    };
    let mut faults = FaultyChannel::new(faults, stream_id(name, false));
    let name = name.to_string();
    tokio::spawn(async move {
        while let Some(r) = replies.next().await {
            match r {
                Ok(r) => {
                    // Each answer meets the faults on its own, as it would alone.
                    for delivery in cv::stream_answers(&r).flat_map(|a| faults.apply(a)) {
                        match delivery {
                            Delivery::Now(answer) => {
                                // The manager stopped: nobody listens any more.
                                if inbox.send(answer).is_err() {
                                    return;
                                }
                            }
                            Delivery::After(d, answer) => {
                                let inbox = inbox.clone();
                                tokio::spawn(async move {
                                    delay(d).await;
                                    let _ = inbox.send(answer);
                                });
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(switch = %name, error = %e, "command stream broke");
                    break;
                }
            }
        }
        if let Some(h) = faults.take_held() {
            let _ = inbox.send(h);
        }
    });
    Some(tx)
}
