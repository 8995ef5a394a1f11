//! The live shell of the connection manager (paper 000 §II-C, Fig. 4: xbind's connection
//! manager as a remote object over switch servers): one task owns the [`CmCore`], one
//! link task per switch server carries its batches over the SwitchServer command stream
//! (request ids make re-sends idempotent), and a handle serves callers (the gRPC
//! ConnectionManager service, the in-process call generator).
//!
//! The core decides everything; this shell only moves messages and reads the clock
//! (DESIGN.md §2), so the same core runs in the simulator.
//!
//! - this module: the [`Router`] a manager resolves routes with (and [`StaticRouter`]),
//!   what the shell reports ([`CallInfo`], [`CmStatus`]), and starting a manager
//!   ([`start`], [`start_with`], [`start_with_faults`], [`LiveOptions`]);
//! - `handle`: [`CmHandle`], the callers' side, and the requests it sends;
//! - `link`: the per-switch link task, its command stream and the faults injected on
//!   it, and listing a switch's connections for reconciles and sweeps;
//! - `recovery`: [`recover`] and [`audit`], the start-up audit against the journal (and,
//!   with `--adopt`, [`whole_connections`], connections rebuilt from the switches);
//! - `manager`: the manager's task, which feeds the core and answers callers, and the
//!   journal's writer thread.

use std::collections::HashMap;

use atmlab_core::time::Duration;
use atmlab_fabric::error::ErrorKind;
use atmlab_fabric::live::grpc::GrpcSwitch;
use tokio::sync::mpsc;

use super::core::{CallError, CallView, CmConfig, CmCore, CmStats};
use super::dimension::NvProbe;
use super::faults::FaultPlan;
use super::journal::{CmJournal, JournalAt};

mod handle;
mod link;
mod manager;
mod recovery;

pub use handle::CmHandle;
use link::{Link, run_link};
use manager::{Channels, run_manager};
pub use recovery::{Recovered, Strays, audit, recover, whole_connections};

// Routers are pure; they are named here too, where the shell that uses them is.
pub use super::routes::{Router, StaticRouter};

/// A call as the shell reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    /// The tree and identifiers (its leaves are the destination hosts).
    pub view: CallView,
    /// Source host.
    pub source: String,
    /// The first destination host (every leaf: `view.leaves`).
    pub destination: String,
}

/// The manager's counters and tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct CmStatus {
    /// "sequential" or "xbind".
    pub kind: &'static str,
    /// Counters.
    pub stats: CmStats,
    /// Calls held.
    pub active: u64,
    /// VCI cache hits and misses.
    pub cache: (u64, u64),
    /// Current T and flush time-out, and whether T adapts.
    pub threshold: u32,
    /// The flush time-out.
    pub flush_timeout: Duration,
    /// Whether T adapts.
    pub adaptive: bool,
    /// Arrival-rate estimate and region.
    pub load: (f64, usize),
    /// `N_v` per (switch, output port), as arrivals saw it (paper 000 §IV-A).
    pub nv: Vec<(String, u16, NvProbe)>,
    /// What the start-up audit against the journal found and did (empty without a
    /// journal, or when everything matched).
    pub recovery: Vec<String>,
    /// The partition of the VCI space this manager reserves from.
    pub partition: Option<(u16, u16)>,
    /// Transactions the journal's writer committed (0 without a journal).
    pub journal_writes: u64,
}

fn gone() -> CallError {
    CallError {
        kind: ErrorKind::Unavailable,
        message: "the connection manager stopped".into(),
    }
}

/// Starts a connection manager over these switch servers. `client_id` names this
/// manager's stream requests (unique per run, so a restarted manager's ids never collide
/// with answers a switch remembers from before).
pub fn start(
    config: CmConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
) -> Result<CmHandle, CallError> {
    start_with_faults(config, switches, router, None)
}

/// [`start`], with `faults` injected on every switch link in both directions (see
/// [`super::faults`]).
pub fn start_with_faults(
    config: CmConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    faults: Option<FaultPlan>,
) -> Result<CmHandle, CallError> {
    let core = CmCore::new(config).map_err(|e| CallError {
        kind: ErrorKind::InvalidArgument,
        message: e.to_string(),
    })?;
    spawn(core, switches, router, faults, None)
}

/// How a manager runs besides its configuration.
#[derive(Debug, Clone, Default)]
pub struct LiveOptions {
    /// Faults injected on every switch link.
    pub faults: Option<FaultPlan>,
    /// The journal (a SQLite file or a PostgreSQL database): established connections
    /// are written to it before their callers hear of them, and a manager started on an
    /// existing journal audits it against the switches first (see [`recover`]).
    pub journal: Option<JournalAt>,
    /// On a journal with no connections, release the cross-connects of this owner the
    /// switches hold instead of refusing to start (see [`recover`]).
    pub release_strays: bool,
    /// Take back the whole connections among the cross-connects of this owner that the
    /// journal does not explain (`--adopt`: a lost or emptied journal), following them
    /// over the links of `network`; release only the fragments (see [`recover`]).
    pub adopt: bool,
    /// The network's links and hosts, which `adopt` follows (`ManagerServer` fills it
    /// from its route object).
    pub network: Option<crate::route::NetworkView>,
    /// This manager leads its owner by an election with this fencing token (issue 26,
    /// item 3: active and standby managers): the journal is taken for it
    /// ([`CmJournal::fence`]) before the start-up audit reads it, so a deposed leader's
    /// writes fail from then on; and the election, not the name service's owner claim,
    /// keeps a second manager of the owner out.
    pub fence: Option<u64>,
}

impl LiveOptions {
    /// What the start-up audit does with strays, as these options say; `adopt` without
    /// a network is an error.
    pub fn strays(&self) -> Result<Strays, CallError> {
        let adopt = match (self.adopt, &self.network) {
            (false, _) => None,
            (true, Some(n)) => Some(n.clone()),
            (true, None) => {
                return Err(CallError {
                    kind: ErrorKind::InvalidArgument,
                    message: "--adopt needs the network's links and hosts to follow \
                              connections over"
                        .into(),
                });
            }
        };
        Ok(Strays {
            release: self.release_strays,
            adopt,
        })
    }
}

/// Starts a manager with a journal and faults as `opts` says. With a journal, the
/// start-up audit runs first; its findings are logged, returned, and reported by
/// `status` (and the gRPC GetStatus).
pub async fn start_with(
    config: CmConfig,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    opts: LiveOptions,
) -> Result<(CmHandle, Vec<String>), CallError> {
    let mut core = CmCore::new(config).map_err(|e| CallError {
        kind: ErrorKind::InvalidArgument,
        message: e.to_string(),
    })?;
    let recovered = match &opts.journal {
        None => None,
        Some(path) => {
            let mut journal = CmJournal::open_at(path).map_err(|e| CallError {
                kind: ErrorKind::Unavailable,
                message: e.to_string(),
            })?;
            if let Some(token) = opts.fence {
                journal.fence(token).map_err(|e| CallError {
                    kind: ErrorKind::Aborted,
                    message: e.to_string(),
                })?;
            }
            let r = recover(&mut core, journal, &switches, &opts.strays()?).await;
            Some(r.map_err(|e| CallError {
                message: format!("journal {path}: {}", e.message),
                ..e
            })?)
        }
    };
    let findings = recovered
        .as_ref()
        .map(|r| r.findings.clone())
        .unwrap_or_default();
    let handle = spawn(core, switches, router, opts.faults, recovered)?;
    Ok((handle, findings))
}

fn spawn(
    core: CmCore,
    switches: Vec<(String, GrpcSwitch)>,
    router: Box<dyn Router>,
    faults: Option<FaultPlan>,
    recovered: Option<Recovered>,
) -> Result<CmHandle, CallError> {
    if let Some(f) = &faults {
        f.validate().map_err(|message| CallError {
            kind: ErrorKind::InvalidArgument,
            message,
        })?;
    }
    let (tx, rx) = mpsc::channel(65_536);
    let (inbox_tx, inbox_rx) = mpsc::unbounded_channel();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let client_id = format!("{}-{}-{nonce}", core.config().owner, std::process::id());
    let (reconcile_tx, reconcile_rx) = mpsc::unbounded_channel();
    let mut links = HashMap::new();
    let listed = switches.clone();
    let busy = std::sync::Arc::new(handle::Busy::default());
    for (name, client) in switches {
        let (btx, brx) = mpsc::unbounded_channel();
        tokio::spawn(handle::Timed {
            busy: busy.clone(),
            link: true,
            task: Box::pin(run_link(
                Link {
                    name: name.clone(),
                    client,
                    client_id: client_id.clone(),
                    inbox: inbox_tx.clone(),
                    stream_tx: None,
                    faults,
                    was_open: false,
                    reconcile: reconcile_tx.clone(),
                },
                brx,
            )),
        });
        links.insert(name, btx);
    }
    let gate = std::sync::Arc::new(handle::Gate::default());
    tokio::spawn(handle::Timed {
        busy: busy.clone(),
        link: false,
        task: Box::pin(run_manager(
            core,
            router,
            gate.clone(),
            Channels {
                api: rx,
                inbox: inbox_rx,
                reconcile: reconcile_rx,
                listings: reconcile_tx,
                switches: listed,
            },
            links,
            recovered,
        )),
    });
    Ok(CmHandle { tx, gate, busy })
}
