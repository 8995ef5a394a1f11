//! TINA connection management as ReTINA measured it (paper 001 §1.2.1, §4.2, §4.3): a
//! Layer Network Coordinator (LNC) takes a connection request, gets its route, and hands
//! it to a hierarchy of Network Management Layer Connection Performers (NML-CPs), one per
//! subnetwork, recursively, down to one Element Management Layer Connection Performer
//! (EML-CP) per switch, which drives its switch server.
//!
//! The paper found the Alcin implementation controlled the EML-CPs one after another, so
//! that setup time grew with the switches crossed, most of it spent in the ORB, and
//! asked for fewer invocations, concurrent requests and parallel sub-connection setup
//! (§4.3). Both are here, by configuration ([`SetupMode`]): `sequential` passes each
//! child's output identifier to the next child; `parallel` reserves the identifiers on
//! the links between subnetworks first, then invokes every child at once.
//!
//! Every invocation between performers is a real remote invocation: each NML-CP and
//! EML-CP serves the `atmlab.v1.ConnectionPerformer` gRPC service (tina.proto) on its
//! own loopback endpoint, over mutual TLS like every control interface, so LNC -> NML,
//! NML -> NML and NML -> EML calls cross gRPC just as EML -> switch calls do. They are
//! counted per interface ([`Invocations`]), per call and in total.
//!
//! - [`core`]: the three performers as sans-IO state machines (operations and answers
//!   in, invocations and replies out), where every protocol decision lives: sequential
//!   or parallel batches, rollback, what a failed release keeps, the invocation tallies,
//!   the multipoint segments. A simulator can drive them as the shells here do.
//! - [`shell`]: the one driver every shell runs its core with; [`convert`]: protobuf to
//!   the cores' types and back.
//! - [`partition`]: the subnetwork hierarchy over the switches (depth, fan-out) and the
//!   split of a route into the runs inside each child subnetwork (pure).
//! - [`performer`]: the EML-CP and NML-CP shells, both behind the one ConnectionPerformer
//!   service (TINA: the EML-CP specializes the NML-CP's subnetwork connection interface).
//! - [`lnc`]: the LNC's shell and [`lnc::start`], which brings the whole hierarchy up.
//!   The LNC also builds point-to-multipoint connections (paper 001 §1 asks for
//!   connections beyond point-to-point): a tree of route segments, one subnetwork
//!   connection each, grown at a fork with AddBranch and cut back with DropBranch and
//!   TrimSnc.
//! - [`service`]: [`service::TinaService`], the `atmlab.v1.ConnectionManager` service
//!   over the LNC, the same trait every connection manager kind serves.

#[cfg(feature = "live")]
pub mod convert;
pub mod core;
#[cfg(feature = "live")]
pub mod lnc;
pub mod partition;
#[cfg(feature = "live")]
pub mod performer;
#[cfg(feature = "live")]
pub mod service;
#[cfg(feature = "live")]
pub mod shell;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The interface names invocations are counted under.
pub mod iface {
    /// The LNC invoking the root NML-CP.
    pub const LNC_NML: &str = "lnc->nml";
    /// An NML-CP invoking a child NML-CP.
    pub const NML_NML: &str = "nml->nml";
    /// An NML-CP invoking an EML-CP.
    pub const NML_EML: &str = "nml->eml";
    /// An NML-CP invoking an EML-CP in its own address space
    /// ([`super::TinaConfig::colocate_eml`]): a local call, not a remote invocation.
    pub const NML_EML_LOCAL: &str = "nml->eml (co-located)";
    /// An EML-CP invoking its switch server.
    pub const EML_SWITCH: &str = "eml->switch";
}

/// How an NML-CP sets up the subnetwork connections of its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetupMode {
    /// One child after another, each child's output identifier the next one's input
    /// (Alcin, paper 001 §4.3).
    #[default]
    Sequential,
    /// The identifiers on the links between children reserved first (concurrently),
    /// then every child set up at once (the paper's "parallel sub-connection setup").
    Parallel,
}

impl SetupMode {
    /// "sequential" or "parallel".
    pub fn name(self) -> &'static str {
        match self {
            SetupMode::Sequential => "sequential",
            SetupMode::Parallel => "parallel",
        }
    }
}

impl std::str::FromStr for SetupMode {
    type Err = crate::ControlError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sequential" => Ok(SetupMode::Sequential),
            "parallel" => Ok(SetupMode::Parallel),
            other => Err(crate::ControlError::InvalidRouteRequest {
                reason: format!("tina mode {other:?}: expected sequential or parallel"),
            }),
        }
    }
}

/// How the hierarchy is built and run.
#[derive(Debug, Clone, PartialEq)]
pub struct TinaConfig {
    /// Sequential or parallel sub-connection setup (every NML-CP the same).
    pub mode: SetupMode,
    /// Levels of NML-CPs: 1 is one NML-CP over every EML-CP (Alcin's shape); each
    /// further level splits every subnetwork of more than one switch into `fanout`
    /// contiguous parts.
    pub depth: u32,
    /// Children per NML-CP above the lowest level.
    pub fanout: u32,
    /// The owner name the EML-CPs reserve and commit under on the switches (audits look
    /// for it).
    pub owner: String,
    /// An emulated network round trip added to every remote invocation (zero: none).
    /// In a real network the performers and switches run on different machines, a LAN
    /// or more apart, and an invocation is mostly waiting; here they share one machine's
    /// cores, where an invocation is mostly CPU and concurrency cannot overlap it. The
    /// delay restores the waiting that sequential setup accumulates and parallel setup
    /// overlaps (`reproduce retina` measures with and without it).
    pub invocation_delay: std::time::Duration,
    /// Each lowest-level NML-CP holds its EML-CPs in its own address space and calls
    /// them directly, with no transport (paper 001 §4.2: "the Alcin package and the
    /// EML-CP co-located in the same address space"); they count under
    /// [`iface::NML_EML_LOCAL`], not as remote invocations, and pay no emulated round
    /// trip. Their calls to the switch servers stay remote.
    pub colocate_eml: bool,
    /// Messages between each EML-CP and its switch server lost on purpose (tests, and
    /// `cm serve --faults`): the plan's `drop` fraction of the commands never reaches
    /// the switch, and as many answers never come back (the command ran); the caller
    /// sees the switch unavailable either way. Unary calls are not duplicated, delayed
    /// or reordered, so the plan's other fractions are not used.
    pub faults: Option<crate::cm::faults::FaultPlan>,
    /// How often the deployment sweeps the switches for cross-connects and reservations
    /// of its owner that no call explains (what a lost answer left: a commit or a
    /// reservation nobody heard of), releasing what two sweeps in a row find (`None`:
    /// only when asked, `Tina::sweep`).
    pub sweep_interval: Option<std::time::Duration>,
}

impl Default for TinaConfig {
    fn default() -> Self {
        TinaConfig {
            mode: SetupMode::Sequential,
            depth: 2,
            fanout: 2,
            owner: "tina".into(),
            invocation_delay: std::time::Duration::ZERO,
            colocate_eml: false,
            faults: None,
            sweep_interval: None,
        }
    }
}

/// Remote invocations by interface ([`iface`]).
pub type Counts = BTreeMap<String, u64>;

/// Adds `b` into `a`.
pub fn merge(a: &mut Counts, b: &std::collections::HashMap<String, u64>) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// The hierarchy's running totals of remote invocations by interface, shared by every
/// performer of one deployment (each counts its own outgoing calls, failed ones too).
#[derive(Debug, Clone, Default)]
pub struct Invocations(Arc<Mutex<Counts>>);

impl Invocations {
    /// One more invocation on `iface`.
    pub fn count(&self, iface: &str) {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(iface.to_string())
            .or_default() += 1;
    }

    /// The totals so far.
    pub fn snapshot(&self) -> Counts {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
