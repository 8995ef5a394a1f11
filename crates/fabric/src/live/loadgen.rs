//! A load generator for switch servers: connection add + delete operations per second by
//! each interface (the modern version of ReTINA's Table 3.3, paper 001 §3.5, which set
//! CORBA against raw sockets and the Java server against the C one).
//!
//! One *operation* is one add (a commit) or one delete (a release); a run alternates them
//! so the switch's table stays small. Modes:
//!
//! - `Unary`: Commit and Release RPCs, one at a time per worker;
//! - `Execute(b)`: `b` commits in one Execute, then their `b` releases in another;
//! - `Stream(w)`: the bidirectional command stream with up to `w` requests in flight;
//!   each commit's answer triggers its release;
//! - `Backend(b)`: batches of `b` through any [`SwitchBackend`] (the raw-TCP client,
//!   or a gRPC client of a proxy).
//!
//! Each worker uses its own slice of the VCI space, so workers never collide.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_rpc::v1 as pb;
use tokio_stream::StreamExt;

use crate::error::FabricError;
use crate::live::backend::SwitchBackend;
use crate::live::convert as cv;
use crate::live::grpc::GrpcSwitch;
use crate::switch::{Atomicity, Branch, Command, Commit, ConnectionKind, Release, Reply};

/// How the load is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Unary Commit / Release RPCs.
    Unary,
    /// Execute batches of this many commands.
    Execute(usize),
    /// The command stream with this many requests in flight.
    Stream(usize),
    /// Batches of this many through a generic backend (raw TCP, proxy).
    Backend(usize),
}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadResult {
    /// Operations (adds + deletes) completed.
    pub operations: u64,
    /// Operations refused by the switch (should be zero).
    pub refused: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl LoadResult {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.operations as f64 / self.seconds
    }
}

/// VCIs per worker: workers use disjoint ranges of the input and output VCI space.
const SLICE: u16 = 1024;

fn commit(worker: usize, j: usize) -> Commit {
    let vci = 32 + (worker as u16) * SLICE + (j as u16 % SLICE);
    Commit {
        kind: ConnectionKind::Vc,
        in_port: PortId(0),
        in_id: VcId::new(0, vci),
        branches: vec![Branch {
            port: PortId(1),
            id: VcId::new(0, vci),
        }],
        traffic: TrafficDescriptor::cbr(CellRate(1.0)),
        clr: 0.0,
        buffer_cells: 0,
        owner: "loadgen".into(),
        replenish: 0,
        tag: String::new(),
    }
}

/// The VCI range a run of `workers` workers needs on ports 0 and 1 of the switch.
pub fn vci_span(workers: usize) -> (u16, u16) {
    (32, 32 + (workers as u16) * SLICE - 1)
}

fn release(id: u64) -> Command {
    Command::Release(Release {
        connection: id,
        keep_reserved: false,
    })
}

struct Counters {
    ops: AtomicU64,
    refused: AtomicU64,
}

/// Runs `workers` concurrent workers for `duration` against a gRPC switch server (or,
/// in `Backend` mode, against `backend`).
pub async fn run<B: SwitchBackend>(
    grpc: Option<GrpcSwitch>,
    backend: Option<B>,
    mode: Mode,
    workers: usize,
    duration: Duration,
) -> Result<LoadResult, FabricError> {
    let counters = Arc::new(Counters {
        ops: AtomicU64::new(0),
        refused: AtomicU64::new(0),
    });
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let c = counters.clone();
        let grpc = grpc.clone();
        let backend = backend.clone();
        tasks.spawn(async move {
            match mode {
                Mode::Unary => unary(grpc.expect("gRPC client"), w, deadline, &c).await,
                Mode::Execute(b) => batches(grpc.expect("gRPC client"), w, b, deadline, &c).await,
                Mode::Backend(b) => batches(backend.expect("backend"), w, b, deadline, &c).await,
                Mode::Stream(win) => stream(grpc.expect("gRPC client"), w, win, deadline, &c).await,
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| FabricError::Unavailable(format!("load worker: {e}")))??;
    }
    Ok(LoadResult {
        operations: counters.ops.load(Ordering::Relaxed),
        refused: counters.refused.load(Ordering::Relaxed),
        seconds: start.elapsed().as_secs_f64(),
    })
}

async fn unary(
    c: GrpcSwitch,
    w: usize,
    deadline: Instant,
    n: &Counters,
) -> Result<(), FabricError> {
    let mut j = 0;
    while Instant::now() < deadline {
        let (id, _) = c.commit(&commit(w, j)).await?;
        c.release(id, false).await?;
        n.ops.fetch_add(2, Ordering::Relaxed);
        j += 1;
    }
    Ok(())
}

async fn batches<B: SwitchBackend>(
    c: B,
    w: usize,
    b: usize,
    deadline: Instant,
    n: &Counters,
) -> Result<(), FabricError> {
    let b = b.clamp(1, usize::from(SLICE));
    let mut j = 0;
    while Instant::now() < deadline {
        let adds: Vec<Command> = (0..b).map(|k| Command::Commit(commit(w, j + k))).collect();
        let r = c.execute(adds, Atomicity::ContinueOnError).await?;
        let mut ids = Vec::with_capacity(b);
        for x in &r {
            match x {
                Ok(Reply::Committed { connection, .. }) => ids.push(*connection),
                _ => {
                    n.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let dels: Vec<Command> = ids.iter().map(|&id| release(id)).collect();
        let r = c.execute(dels, Atomicity::ContinueOnError).await?;
        let ok = r.iter().filter(|x| x.is_ok()).count();
        n.refused
            .fetch_add((r.len() - ok) as u64, Ordering::Relaxed);
        n.ops.fetch_add((ids.len() + ok) as u64, Ordering::Relaxed);
        j += b;
    }
    Ok(())
}

async fn stream(
    c: GrpcSwitch,
    w: usize,
    window: usize,
    deadline: Instant,
    n: &Counters,
) -> Result<(), FabricError> {
    let window = window.clamp(1, usize::from(SLICE) / 2);
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::StreamRequest>(2 * window + 16);
    let mut replies = c
        .raw()
        .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .map_err(|s| cv::from_status(&s))?
        .into_inner();
    let client_id = format!("loadgen-{w}");
    let mut next_req = 0u64;
    let mut j = 0usize;
    // Request ids of commits in flight (even ids) versus releases (odd ids).
    let send = |tx: &tokio::sync::mpsc::Sender<pb::StreamRequest>, id: u64, cmd: Command| {
        let req = pb::StreamRequest {
            client_id: client_id.clone(),
            request_id: id,
            command: Some(cv::pb_command(&cmd)),
            more: Vec::new(),
        };
        let tx = tx.clone();
        async move {
            tx.send(req)
                .await
                .map_err(|_| FabricError::Unavailable("stream closed".into()))
        }
    };
    let mut in_flight = 0usize;
    while in_flight < window {
        send(&tx, next_req * 2, Command::Commit(commit(w, j))).await?;
        next_req += 1;
        j += 1;
        in_flight += 1;
    }
    let mut stopping = false;
    while in_flight > 0 {
        let r = match replies.next().await {
            Some(Ok(r)) => r,
            Some(Err(s)) => return Err(cv::from_status(&s)),
            None => return Err(FabricError::Unavailable("stream ended".into())),
        };
        in_flight -= 1;
        let result = r.result.as_ref().map(cv::result);
        match result {
            Some(Ok(Reply::Committed { connection, .. })) => {
                n.ops.fetch_add(1, Ordering::Relaxed);
                send(&tx, next_req * 2 + 1, release(connection)).await?;
                next_req += 1;
                in_flight += 1;
            }
            Some(Ok(_)) => {
                n.ops.fetch_add(1, Ordering::Relaxed);
                if !stopping && Instant::now() >= deadline {
                    stopping = true;
                }
                if !stopping {
                    send(&tx, next_req * 2, Command::Commit(commit(w, j))).await?;
                    next_req += 1;
                    j += 1;
                    in_flight += 1;
                }
            }
            _ => {
                n.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}
