//! `atmlab soak`: the control plane under a high sustained load for a long time (issue
//! 10), ending with the audit that proves nothing leaked. The demo's network (`Lab`), one
//! xbind manager (optionally with injected faults and a journal), Poisson calls in
//! windows of a few seconds so the rate held can be watched; at the end the manager
//! stops, gives its caches back, and every switch is audited as quiescent.

use std::path::PathBuf;
use std::time::Duration as StdDuration;

use crate::LabError;
use crate::callgen::{self, Load};
use atmlab_control::audit::{AuditOptions, AuditReport, audit, snapshot};

use crate::launch::{Lab, ROUTE_CACHE_TTL, route_ports};
use atmlab_control::cm::faults::FaultPlan;
use atmlab_control::cm::live::{self, LiveOptions};
use atmlab_control::cm::routes::CachedRouter;

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Certificates and state.
    pub data_dir: PathBuf,
    /// Plain text instead of mutual TLS.
    pub insecure: bool,
    /// Offered calls per second.
    pub rate: f64,
    /// How long.
    pub seconds: f64,
    /// Length of each measurement window.
    pub window: f64,
    /// Mean holding time.
    pub holding: StdDuration,
    /// Faults on the manager's switch links.
    pub faults: Option<FaultPlan>,
    /// Journal the manager's connections here (a SQLite file or a PostgreSQL database).
    pub journal: Option<atmlab_control::cm::journal::JournalAt>,
}

impl Default for SoakOptions {
    fn default() -> Self {
        SoakOptions {
            data_dir: PathBuf::from("atmlab-data"),
            insecure: false,
            rate: 10_000.0,
            seconds: 600.0,
            window: 10.0,
            holding: StdDuration::from_millis(5),
            faults: None,
            journal: None,
        }
    }
}

/// One window of the soak.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakWindow {
    /// Seconds since the start, at the window's end.
    pub at: f64,
    /// Calls offered, set up, blocked, failed.
    pub offered: u64,
    /// Set up.
    pub established: u64,
    /// Blocked.
    pub blocked: u64,
    /// Failed.
    pub failed: u64,
    /// Setups per second over the window.
    pub setups_per_s: f64,
    /// Mean and p99 setup latency, ms.
    pub mean_ms: f64,
    /// p99.
    pub p99_ms: f64,
}

/// What the soak measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakReport {
    /// The windows, in order.
    pub windows: Vec<SoakWindow>,
    /// The audit after the manager stopped.
    pub audit: AuditReport,
    /// Re-sends the manager made.
    pub retries: u64,
}

impl SoakReport {
    /// Calls offered in all.
    pub fn offered(&self) -> u64 {
        self.windows.iter().map(|w| w.offered).sum()
    }
    /// Calls set up in all.
    pub fn established(&self) -> u64 {
        self.windows.iter().map(|w| w.established).sum()
    }
    /// Calls failed (not blocked) in all.
    pub fn failed(&self) -> u64 {
        self.windows.iter().map(|w| w.failed).sum()
    }
    /// Calls blocked in all.
    pub fn blocked(&self) -> u64 {
        self.windows.iter().map(|w| w.blocked).sum()
    }
    /// The lowest window's setup rate: the rate held throughout.
    pub fn rate_held(&self) -> f64 {
        self.windows
            .iter()
            .map(|w| w.setups_per_s)
            .fold(f64::INFINITY, f64::min)
    }
    /// Leaks: the audit's findings.
    pub fn leaks(&self) -> usize {
        self.audit.findings.len()
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::run("the soak", format!("{what}: {e}"))
}

/// Runs the soak; `say` hears a line per window.
pub async fn run(opts: &SoakOptions, mut say: impl FnMut(&str)) -> Result<SoakReport, LabError> {
    if !(opts.rate > 0.0 && opts.seconds > 0.0 && opts.window > 0.0) {
        return Err(err(
            "options",
            "the rate, the duration and the window must be positive",
        ));
    }
    let lab = Lab::up(&opts.data_dir, opts.insecure, &mut say).await?;
    lab.within(async |lab| run_on(opts, lab, &mut say).await)
        .await
}

async fn run_on(
    opts: &SoakOptions,
    lab: &Lab,
    say: &mut impl FnMut(&str),
) -> Result<SoakReport, LabError> {
    let config = crate::launch::xbind_adaptive_config();
    let (cm, recovery) = live::start_with(
        config,
        lab.clients.clone(),
        Box::new(CachedRouter::new(lab.route.clone(), ROUTE_CACHE_TTL)),
        LiveOptions {
            faults: opts.faults,
            journal: opts.journal.clone(),
            ..LiveOptions::default()
        },
    )
    .await
    .map_err(|e| err("starting the manager", e.message))?;
    for line in &recovery {
        say(&format!("start-up audit: {line}"));
    }
    cm.prefill(route_ports(&lab.route, "a", "b"))
        .await
        .map_err(|e| err("warming the caches", e.message))?;
    let started = std::time::Instant::now();
    let mut windows = Vec::new();
    let mut seed = 1;
    while started.elapsed().as_secs_f64() < opts.seconds {
        let left = opts.seconds - started.elapsed().as_secs_f64();
        let load = Load {
            holding: opts.holding,
            seed,
            ..Load::poisson(
                opts.rate,
                StdDuration::from_secs_f64(opts.window.min(left).max(0.05)),
                "a",
                "b",
            )
        };
        seed += 1;
        let r = callgen::run(cm.clone(), &load).await;
        let w = SoakWindow {
            at: started.elapsed().as_secs_f64(),
            offered: r.offered,
            established: r.established,
            blocked: r.blocked,
            failed: r.failed,
            setups_per_s: r.setups_per_s,
            mean_ms: r.mean_setup_ms,
            p99_ms: r.p99_setup_ms,
        };
        say(&format!(
            "{:>7.1} s: {:>9.0} setups/s, mean {:>7.3} ms, p99 {:>7.3} ms, {} blocked, {} failed",
            w.at, w.setups_per_s, w.mean_ms, w.p99_ms, w.blocked, w.failed
        ));
        windows.push(w);
    }
    // Give-backs a faulty link left unanswered are re-sent every half second.
    tokio::time::sleep(StdDuration::from_millis(1_500)).await;
    let retries = cm.status().await.map(|s| s.stats.retries).unwrap_or(0);
    cm.shutdown().await;
    let audit = audit(
        &[],
        &snapshot(&lab.clients).await?,
        AuditOptions { quiescent: true },
    );
    Ok(SoakReport {
        windows,
        audit,
        retries,
    })
}
