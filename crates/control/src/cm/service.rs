//! The ConnectionManager gRPC service (`atmlab.v1.ConnectionManager`, cm.proto) over a
//! running manager's [`CmHandle`]: xbind's connection manager as a remote object (paper
//! 000 §II-C, Fig. 4).

use atmlab_core::time::Duration;
use atmlab_fabric::ErrorKind;
use atmlab_fabric::live::convert as cv;
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_manager_server::{ConnectionManager, ConnectionManagerServer};
use tonic::{Request, Response, Status};

use super::adaptive::Regions;
use super::core::CallError;
use super::live::{CallInfo, CmHandle, CmStatus};

/// Maps user-level QoS to a cell-level contract (the collocated or remote QoS mapper).
pub type QosFn =
    std::sync::Arc<dyn Fn(&pb::UserQos) -> Result<pb::CellQos, CallError> + Send + Sync>;

/// The collocated QoS mapper (xbind §II-C (c): mapping in the manager's own address
/// space, no remote call per setup).
pub fn collocated_mapper(mapper: crate::qos::QosMapper) -> QosFn {
    std::sync::Arc::new(move |q: &pb::UserQos| {
        let user = crate::qos::user_qos_from_pb(q).map_err(|e| CallError {
            kind: ErrorKind::InvalidArgument,
            message: e.to_string(),
        })?;
        let cell = mapper.map(&user).map_err(|e| CallError {
            kind: ErrorKind::InvalidArgument,
            message: e.to_string(),
        })?;
        Ok(crate::qos::pb_cell_qos(&cell))
    })
}

/// Told the time of each setup that succeeded, from the request's arrival to its answer
/// (a metrics histogram: the shell measures, whoever exports decides how).
pub type SetupObserver = std::sync::Arc<dyn Fn(std::time::Duration) + Send + Sync>;

/// Times a manager service's successful setups, from a request's arrival to its
/// answer: GetStatus's `setup_seconds_sum` and `setups_timed` (two relaxed atomics per
/// setup), and the observer's histogram when one is set. Shared by every kind's service.
#[derive(Default)]
pub struct SetupTimer {
    observer: Option<SetupObserver>,
    /// Times summed in nanoseconds, and their count.
    timed: (std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64),
}

impl SetupTimer {
    /// A timer handing each setup's time to `observer` too, when given.
    pub fn new(observer: Option<SetupObserver>) -> Self {
        SetupTimer {
            observer,
            timed: Default::default(),
        }
    }

    /// A setup that took `took` succeeded.
    pub fn record(&self, took: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let (sum, n) = &self.timed;
        sum.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        n.fetch_add(1, Relaxed);
        if let Some(observe) = &self.observer {
            observe(took);
        }
    }

    /// Writes the sum and count into a status.
    pub fn fill(&self, out: &mut pb::CmStatus) {
        use std::sync::atomic::Ordering::Relaxed;
        let (sum, n) = &self.timed;
        out.setup_seconds_sum = sum.load(Relaxed) as f64 * 1e-9;
        out.setups_timed = n.load(Relaxed);
    }
}

/// The service.
pub struct CmService {
    handle: CmHandle,
    mapper: Option<QosFn>,
    regions: Regions,
    /// Shared with the tasks of Calls streams.
    timer: std::sync::Arc<SetupTimer>,
}

impl CmService {
    /// A service over a manager; `mapper` turns `qos` into a contract when a caller gives
    /// no `cell_qos`; `regions` are those `Tune(adaptive = true)` switches to.
    pub fn new(handle: CmHandle, mapper: Option<QosFn>, regions: Regions) -> Self {
        CmService {
            handle,
            mapper,
            regions,
            timer: Default::default(),
        }
    }

    /// Hands each successful setup's time to `observer`, when given.
    pub fn with_setup_observer(mut self, observer: Option<SetupObserver>) -> Self {
        self.timer = std::sync::Arc::new(SetupTimer::new(observer));
        self
    }

    /// The tonic service.
    pub fn into_server(self) -> ConnectionManagerServer<Self> {
        ConnectionManagerServer::new(self)
    }
}

/// Requests a Calls stream may have in flight (read, not yet answered): past it the
/// service stops reading the stream, and HTTP/2 flow control holds the client back. A
/// thousand keeps a manager's batches full (xbind aggregates up to its threshold T of
/// commands per message) while bounding what one client can queue.
pub const STREAM_IN_FLIGHT: usize = 1024;

/// A Calls stream's replies.
pub type CallsStream = std::pin::Pin<
    Box<dyn tokio_stream::Stream<Item = Result<pb::CallReply, Status>> + Send + 'static>,
>;

/// A Calls reply saying request `id` failed with `s`.
pub fn error_reply(id: u64, s: &Status) -> pb::CallReply {
    pb::CallReply {
        id,
        result: Some(pb::call_reply::Result::Error(pb::CallStatus {
            code: s.code() as i32,
            message: s.message().to_string(),
        })),
    }
}

/// The replies of a Calls stream on their way out. Dropped when the stream is gone
/// (the client reset it, its connection died): the setups whose replies were still
/// queued here are released, and those still running find the queue closed and release
/// themselves. A reply already handed to HTTP/2 is the client's: it was sent.
struct Replies {
    rx: tokio::sync::mpsc::Receiver<Result<pb::CallReply, Status>>,
    handle: CmHandle,
}

impl tokio_stream::Stream for Replies {
    type Item = Result<pb::CallReply, Status>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Replies {
    fn drop(&mut self) {
        self.rx.close();
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        while let Ok(reply) = self.rx.try_recv() {
            if let Ok(pb::CallReply {
                result: Some(pb::call_reply::Result::Info(info)),
                ..
            }) = reply
            {
                let (handle, conn) = (self.handle.clone(), info.id);
                tracing::debug!(conn, "setup abandoned by its stream: releasing it");
                rt.spawn(async move {
                    if let Err(e) = handle.delete(conn).await {
                        tracing::warn!(conn, "releasing an abandoned setup: {e:?}");
                    }
                });
            }
        }
    }
}

/// The setup of a request, checked: its source, destinations and contract.
fn setup_args(
    r: &pb::AddConnectionRequest,
    mapper: Option<&QosFn>,
) -> Result<(pb::CellQos, atmlab_core::traffic::TrafficDescriptor, f64), Status> {
    if r.destinations.is_empty() {
        return Err(Status::invalid_argument("no destination"));
    }
    let cell = resolve_qos(r.cell_qos.as_ref(), r.qos.as_ref(), mapper)?;
    let (traffic, clr) =
        cv::traffic(cell.traffic.as_ref()).map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok((cell, traffic, clr))
}

/// One request of a Calls stream, run to its end and answered on `tx`. It runs in a task
/// of its own, so a stream that goes away does not cut a setup half-way; a setup whose
/// answer cannot be delivered (the stream is gone) is released, as `setup_detached` does
/// for a unary setup, so nothing is left up that nobody knows of.
async fn stream_request(
    req: pb::CallRequest,
    started: std::time::Instant,
    handle: CmHandle,
    mapper: Option<QosFn>,
    timer: std::sync::Arc<SetupTimer>,
    tx: tokio::sync::mpsc::Sender<Result<pb::CallReply, Status>>,
) {
    use pb::call_reply::Result as R;
    use pb::call_request::Op;
    let id = req.id;
    let reply = match req.op {
        Some(Op::Setup(r)) => match setup_args(&r, mapper.as_ref()) {
            Err(s) => error_reply(id, &s),
            Ok((cell, traffic, clr)) => {
                match handle
                    .add_multipoint(&r.source, &r.destinations, traffic, clr, &r.tag)
                    .await
                {
                    Err(e) => error_reply(id, &call_status(&e)),
                    Ok(info) => {
                        let took = started.elapsed();
                        let mut out = pb_info(&info);
                        out.cell_qos = Some(cell);
                        let reply = pb::CallReply {
                            id,
                            result: Some(R::Info(out)),
                        };
                        if tx.send(Ok(reply)).await.is_err() {
                            let conn = info.view.id;
                            tracing::debug!(conn, "setup abandoned by its stream: releasing it");
                            if let Err(e) = handle.delete(conn).await {
                                tracing::warn!(conn, "releasing an abandoned setup: {e:?}");
                            }
                        } else {
                            timer.record(took);
                        }
                        return;
                    }
                }
            }
        },
        Some(Op::Release(d)) => match handle.delete(d.id).await {
            Ok(()) => pb::CallReply {
                id,
                result: Some(R::Released(pb::DeleteConnectionReply {})),
            },
            Err(e) => error_reply(id, &call_status(&e)),
        },
        None => error_reply(id, &Status::invalid_argument("neither setup nor release")),
    };
    let _ = tx.send(Ok(reply)).await;
}

/// A call error as a gRPC status.
pub fn call_status(e: &CallError) -> Status {
    Status::new(cv::grpc_code(e.kind), e.message.clone())
}

/// The cell-level contract of a request: `cell_qos` if given, else `qos` through the
/// mapper. Shared by every connection manager kind's service.
pub fn resolve_qos(
    cell_qos: Option<&pb::CellQos>,
    qos: Option<&pb::UserQos>,
    mapper: Option<&QosFn>,
) -> Result<pb::CellQos, Status> {
    match (cell_qos, qos, mapper) {
        (Some(c), _, _) => Ok(*c),
        (None, Some(q), Some(map)) => map(q).map_err(|e| call_status(&e)),
        (None, Some(_), None) => Err(Status::invalid_argument(
            "user-level QoS given but no QoS mapper configured",
        )),
        (None, None, _) => Err(Status::invalid_argument("neither qos nor cell_qos given")),
    }
}

/// A call as cm.proto's ConnectionInfo: one HopInfo per switch connection, with every
/// branch where the tree forks; destinations in the order they joined.
pub fn pb_info(i: &CallInfo) -> pb::ConnectionInfo {
    let v = &i.view;
    let mut hops: Vec<pb::HopInfo> = Vec::new();
    for (h, conn, in_id, out_id) in &v.hops {
        let branch = pb::Branch {
            port: u32::from(h.out_port),
            id: Some(cv::pb_vc_id(*out_id)),
        };
        match hops
            .iter_mut()
            .find(|x| *x.switch == *h.switch && x.connection == *conn)
        {
            Some(x) => x.branches.push(branch),
            None => hops.push(pb::HopInfo {
                switch: h.switch.to_string(),
                connection: *conn,
                in_port: u32::from(h.in_port),
                in_id: Some(cv::pb_vc_id(*in_id)),
                out_port: u32::from(h.out_port),
                out_id: Some(cv::pb_vc_id(*out_id)),
                branches: vec![branch],
            }),
        }
    }
    let (destinations, destination_vcs) = if v.leaves.is_empty() {
        (
            vec![i.destination.clone()],
            vec![cv::pb_vc_id(v.destination_vc)],
        )
    } else {
        v.leaves
            .iter()
            .map(|(l, e)| (l.clone(), cv::pb_vc_id(v.hops[*e].3)))
            .unzip()
    };
    pb::ConnectionInfo {
        id: v.id,
        source: i.source.clone(),
        destinations,
        source_vc: Some(cv::pb_vc_id(v.source_vc)),
        destination_vcs,
        hops,
        cell_qos: Some(pb::CellQos {
            traffic: Some(cv::pb_traffic(&v.traffic, 0.0)),
            ..Default::default()
        }),
        setup_us: v.setup.as_picos() / 1_000_000,
        tag: v.tag.clone(),
        invocations: v.invocations,
    }
}

/// A manager's status as GetStatus answers it (without the service's setup timing).
pub fn pb_status(s: &CmStatus) -> pb::CmStatus {
    pb::CmStatus {
        kind: s.kind.to_string(),
        established: s.stats.established,
        released: s.stats.released,
        blocked: s.stats.blocked,
        failed: s.stats.failed,
        active: s.active,
        messages: s.stats.messages,
        commands: s.stats.commands,
        cache_hits: s.cache.0,
        cache_misses: s.cache.1,
        threshold: s.threshold,
        flush_timeout_us: s.flush_timeout.as_picos() / 1_000_000,
        adaptive: s.adaptive,
        arrival_rate: s.load.0,
        region: s.load.1 as u32,
        retries: s.stats.retries,
        rollbacks: s.stats.rollbacks,
        identifier_commands: s.stats.identifier_commands,
        recovery: s.recovery.clone(),
        invocations: [("cm->switch".to_string(), s.stats.messages)].into(),
        partition: s.partition.map(|(lo, hi)| pb::Range {
            min: u32::from(lo),
            max: u32::from(hi),
        }),
        // Filled by GetStatus from the service's own timing.
        setup_seconds_sum: 0.0,
        setups_timed: 0,
    }
}

/// Runs a setup in a task of its own, to its end, and undoes it if the caller has gone.
///
/// Tonic drops a handler whose client went away before the answer (it cancelled, its
/// deadline passed, its connection died). A setup dropped half-way would leave
/// reservations and hops behind, and one that finished would leave a connection up whose
/// id nobody learned, so nobody would release it. So the setup runs on its own; when it
/// succeeds after its caller is gone, `undo` releases the connection (`id` names it).
/// The error is `Status::internal` only if the task itself panicked.
pub(crate) async fn setup_detached<T, E, U, UF>(
    setup: impl Future<Output = Result<T, E>> + Send + 'static,
    id: fn(&T) -> u64,
    undo: U,
) -> Result<Result<T, E>, Status>
where
    T: Send + 'static,
    E: Send + 'static,
    U: FnOnce(u64) -> UF + Send + 'static,
    UF: Future<Output = ()> + Send,
{
    // `waiting` lives as long as the caller does; the task checks it when done.
    let (caller, waiting) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let r = setup.await;
        if let Ok(t) = &r
            && caller.is_closed()
        {
            let id = id(t);
            tracing::debug!(id, "setup abandoned by its client: releasing it");
            undo(id).await;
        }
        r
    });
    let r = task
        .await
        .map_err(|e| Status::internal(format!("the setup task: {e}")));
    drop(waiting);
    r
}

#[tonic::async_trait]
impl ConnectionManager for CmService {
    async fn add_connection(
        &self,
        r: Request<pb::AddConnectionRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "set up calls")?;
        let started = std::time::Instant::now();
        let r = r.into_inner();
        let (cell, traffic, clr) = setup_args(&r, self.mapper.as_ref())?;
        let handle = self.handle.clone();
        let undo = self.handle.clone();
        let info = setup_detached(
            async move {
                handle
                    .add_multipoint(&r.source, &r.destinations, traffic, clr, &r.tag)
                    .await
            },
            |info: &CallInfo| info.view.id,
            move |id| async move {
                if let Err(e) = undo.delete(id).await {
                    tracing::warn!(id, "releasing an abandoned setup: {e:?}");
                }
            },
        )
        .await?
        .map_err(|e| call_status(&e))?;
        self.timer.record(started.elapsed());
        let mut out = pb_info(&info);
        out.cell_qos = Some(cell);
        Ok(Response::new(out))
    }

    async fn delete_connection(
        &self,
        r: Request<pb::DeleteConnectionRequest>,
    ) -> Result<Response<pb::DeleteConnectionReply>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "release calls")?;
        self.handle
            .delete(r.into_inner().id)
            .await
            .map_err(|e| call_status(&e))?;
        Ok(Response::new(pb::DeleteConnectionReply {}))
    }

    type CallsStream = CallsStream;

    async fn calls(
        &self,
        r: Request<tonic::Streaming<pb::CallRequest>>,
    ) -> Result<Response<CallsStream>, Status> {
        // Setups and releases both: the same role AddConnection and DeleteConnection ask.
        atmlab_rpc::tls::Caller::of(&r).require(&[], "set up and release calls")?;
        let mut inbound = r.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_IN_FLIGHT);
        let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(STREAM_IN_FLIGHT));
        let (handle, mapper, timer) =
            (self.handle.clone(), self.mapper.clone(), self.timer.clone());
        tokio::spawn(async move {
            loop {
                // Back-pressure: no read while STREAM_IN_FLIGHT requests are unanswered
                // (a permit is held until its reply is queued).
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                let req = match inbound.message().await {
                    Ok(Some(req)) => req,
                    // The client closed its side: the requests in flight still answer.
                    Ok(None) => return,
                    Err(e) => {
                        tracing::debug!("a Calls stream ended: {e}");
                        return;
                    }
                };
                let started = std::time::Instant::now();
                let (handle, mapper, timer, tx) =
                    (handle.clone(), mapper.clone(), timer.clone(), tx.clone());
                tokio::spawn(async move {
                    stream_request(req, started, handle, mapper, timer, tx).await;
                    drop(permit);
                });
            }
        });
        let handle = self.handle.clone();
        Ok(Response::new(Box::pin(Replies { rx, handle })))
    }

    async fn get_connection(
        &self,
        r: Request<pb::GetConnectionRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&atmlab_rpc::tls::Role::ALL, "read calls")?;
        let id = r.into_inner().id;
        match self.handle.get(id).await {
            Some(i) => Ok(Response::new(pb_info(&i))),
            None => Err(Status::not_found(format!("no connection {id}"))),
        }
    }

    async fn list_connections(
        &self,
        r: Request<pb::ListCmConnectionsRequest>,
    ) -> Result<Response<pb::ListCmConnectionsReply>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&atmlab_rpc::tls::Role::ALL, "list calls")?;
        let v = self.handle.list().await;
        Ok(Response::new(pb::ListCmConnectionsReply {
            connections: v.iter().map(pb_info).collect(),
        }))
    }

    async fn get_status(
        &self,
        r: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::CmStatus>, Status> {
        atmlab_rpc::tls::Caller::of(&r)
            .require(&atmlab_rpc::tls::Role::ALL, "read a manager's status")?;
        let s = self.handle.status().await.map_err(|e| call_status(&e))?;
        let mut out = pb_status(&s);
        self.timer.fill(&mut out);
        Ok(Response::new(out))
    }

    async fn tune(&self, r: Request<pb::TuneRequest>) -> Result<Response<pb::CmStatus>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "tune a manager")?;
        let r = r.into_inner();
        if !r.adaptive && r.threshold == 0 {
            return Err(Status::invalid_argument("threshold must be at least 1"));
        }
        let flush = Duration::from_micros(if r.flush_timeout_us == 0 {
            200
        } else {
            r.flush_timeout_us
        });
        let adaptive = r.adaptive.then(|| self.regions.clone());
        let s = self
            .handle
            .tune(r.threshold, flush, adaptive)
            .await
            .map_err(|e| call_status(&e))?;
        Ok(Response::new(pb_status(&s)))
    }

    async fn add_leaf(
        &self,
        r: Request<pb::AddLeafRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "add leaves")?;
        let r = r.into_inner();
        let info = self
            .handle
            .add_leaf(r.id, &r.destination)
            .await
            .map_err(|e| call_status(&e))?;
        Ok(Response::new(pb_info(&info)))
    }

    async fn drop_leaf(
        &self,
        r: Request<pb::DropLeafRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "drop leaves")?;
        let r = r.into_inner();
        let info = self
            .handle
            .drop_leaf(r.id, &r.destination)
            .await
            .map_err(|e| call_status(&e))?;
        Ok(Response::new(pb_info(&info)))
    }

    async fn modify_connection(
        &self,
        r: Request<pb::ModifyConnectionRequest>,
    ) -> Result<Response<pb::ConnectionInfo>, Status> {
        atmlab_rpc::tls::Caller::of(&r).require(&[], "modify calls")?;
        let r = r.into_inner();
        let cell = resolve_qos(r.cell_qos.as_ref(), r.qos.as_ref(), self.mapper.as_ref())?;
        let (traffic, clr) = cv::traffic(cell.traffic.as_ref())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let info = self
            .handle
            .modify(r.id, traffic, clr)
            .await
            .map_err(|e| call_status(&e))?;
        let mut out = pb_info(&info);
        out.cell_qos = Some(cell);
        Ok(Response::new(out))
    }
}
