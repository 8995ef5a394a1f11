//! A connection manager's metrics (paper 000 §II-C and §IV): the counters GetStatus
//! answers (calls set up, released, blocked, failed; messages and commands; the VCI
//! cache; T and the arrival-rate estimate of §IV-B; the start-up audit's actions),
//! asked of the manager's task once per scrape, and the setup latency, timed by its
//! gRPC service from a request's arrival to its answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use atmlab_control::cm::live::{CmHandle, CmStatus};
use atmlab_control::cm::server::ManagerServer;
use atmlab_control::tina::lnc::Lnc;

use super::{Families, LatencyHistogram, Metrics, Refresh, Source, labels};

/// How long a scrape waits for a manager's status: a manager past its knee answers
/// late, and a scrape that hangs tells the operator less than one without it.
const STATUS_WAIT: Duration = Duration::from_secs(2);

/// One sequential or xbind manager.
pub struct CmSource {
    name: String,
    handle: CmHandle,
    latency: Option<Arc<LatencyHistogram>>,
    status: Mutex<Option<CmStatus>>,
}

impl CmSource {
    /// The manager `handle`, labelled `manager = name`, without a latency histogram
    /// (a manager driven in process, as the demo's).
    pub fn new(name: impl Into<String>, handle: CmHandle) -> Self {
        CmSource {
            name: name.into(),
            handle,
            latency: None,
            status: Mutex::new(None),
        }
    }

    /// The manager server `server` (labelled `manager = name`), its setup latency and
    /// its accept loop (`cm/NAME`) added to `metrics`; a TINA manager as a
    /// [`TinaSource`].
    pub fn add(metrics: &Metrics, name: &str, server: &mut ManagerServer) {
        metrics.add(super::tls::TlsSource::new(
            format!("cm/{name}"),
            server.tls_stats(),
        ));
        let latency = Arc::new(LatencyHistogram::default());
        let observed = latency.clone();
        server.observe_setups(Arc::new(move |d| observed.observe(d)));
        if let Some(lnc) = server.lnc() {
            metrics.add(TinaSource {
                name: name.to_string(),
                lnc,
                latency,
            });
        } else if let Some(handle) = server.handle() {
            metrics.add(CmSource {
                latency: Some(latency),
                ..CmSource::new(name, handle)
            });
        }
    }
}

/// TINA's LNC (paper 001 §3): the counters its GetStatus answers (calls, rollbacks,
/// remote invocations by interface, Table 3.3's), read from the LNC at scrape time,
/// and the setup latency its service times.
pub struct TinaSource {
    name: String,
    lnc: Arc<Lnc>,
    latency: Arc<LatencyHistogram>,
}

impl Source for TinaSource {
    fn collect(&self, out: &mut Families) {
        let m = self.name.as_str();
        let l = || labels([("manager", m)]);
        let (sum, count, buckets) = self.latency.snapshot();
        out.histogram(SETUP_DURATION.0, SETUP_DURATION.1, l(), sum, count, buckets);
        let s = self.lnc.status();
        calls(
            out,
            m,
            &Calls {
                established: s.established,
                released: s.released,
                blocked: s.blocked,
                failed: s.failed,
                rollbacks: s.rollbacks,
                messages: s.messages,
                commands: s.commands,
                active: s.active,
            },
        );
        for (interface, n) in &s.invocations {
            out.counter(
                "atmlab_cm_invocations",
                "Remote invocations by interface (TINA's LNC, NML-CP and EML-CP, paper 001 Table 3.3).",
                labels([("manager", m), ("interface", interface.as_str())]),
                *n,
            );
        }
    }
}

/// The setup-latency family, shared by every kind of manager.
const SETUP_DURATION: (&str, &str) = (
    "atmlab_cm_setup_duration_seconds",
    "Time from a setup request's arrival at the manager to its answer, setups that succeeded.",
);

/// What every kind of manager counts.
struct Calls {
    established: u64,
    released: u64,
    blocked: u64,
    failed: u64,
    rollbacks: u64,
    messages: u64,
    commands: u64,
    active: u64,
}

/// The families every kind of manager exports, labelled `manager = m`.
fn calls(out: &mut Families, m: &str, st: &Calls) {
    let l = || labels([("manager", m)]);
    out.counter(
        "atmlab_cm_setups",
        "Calls set up (established).",
        l(),
        st.established,
    );
    out.counter("atmlab_cm_releases", "Calls released.", l(), st.released);
    out.counter(
        "atmlab_cm_blocked",
        "Calls refused for lack of resources.",
        l(),
        st.blocked,
    );
    out.counter(
        "atmlab_cm_failed",
        "Calls failed for another reason.",
        l(),
        st.failed,
    );
    out.counter(
        "atmlab_cm_rollbacks",
        "Calls rolled back.",
        l(),
        st.rollbacks,
    );
    out.counter(
        "atmlab_cm_messages",
        "Remote invocations (batches of commands) sent to switch servers.",
        l(),
        st.messages,
    );
    out.counter(
        "atmlab_cm_commands",
        "Commands sent to switch servers, re-sends included.",
        l(),
        st.commands,
    );
    // Paper 000's Fig. 10 counts invocations per call; the ratio of the two
    // counters since start (0 before the first call).
    let per_call = |x: u64| {
        if st.established == 0 {
            0.0
        } else {
            x as f64 / st.established as f64
        }
    };
    out.gauge(
        "atmlab_cm_messages_per_call",
        "Messages to switch servers per call set up, since start.",
        l(),
        per_call(st.messages),
    );
    out.gauge(
        "atmlab_cm_commands_per_call",
        "Commands to switch servers per call set up, since start.",
        l(),
        per_call(st.commands),
    );
    out.gauge(
        "atmlab_cm_active_calls",
        "Calls held.",
        l(),
        st.active as f64,
    );
}

impl Source for CmSource {
    fn refresh(&self) -> Refresh<'_> {
        Box::pin(async move {
            let s = tokio::time::timeout(STATUS_WAIT, self.handle.status()).await;
            // A manager that did not answer is left out of this scrape (its series
            // go stale) rather than shown with old numbers.
            *self.status.lock().unwrap_or_else(|e| e.into_inner()) = match s {
                Ok(Ok(s)) => Some(s),
                _ => None,
            };
        })
    }

    fn collect(&self, out: &mut Families) {
        let m = self.name.as_str();
        let l = || labels([("manager", m)]);
        if let Some(h) = &self.latency {
            let (sum, count, buckets) = h.snapshot();
            out.histogram(SETUP_DURATION.0, SETUP_DURATION.1, l(), sum, count, buckets);
        }
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = status.as_ref() else {
            return;
        };
        let st = &s.stats;
        calls(
            out,
            m,
            &Calls {
                established: st.established,
                released: st.released,
                blocked: st.blocked,
                failed: st.failed,
                rollbacks: st.rollbacks,
                messages: st.messages,
                commands: st.commands,
                active: s.active,
            },
        );
        out.counter(
            "atmlab_cm_retries",
            "Commands re-sent after a time-out.",
            l(),
            st.retries,
        );
        out.counter("atmlab_cm_cache_hits", "VCI cache hits.", l(), s.cache.0);
        out.counter(
            "atmlab_cm_cache_misses",
            "VCI cache misses.",
            l(),
            s.cache.1,
        );
        out.gauge(
            "atmlab_cm_threshold",
            "The aggregation threshold T: commands per message.",
            l(),
            f64::from(s.threshold),
        );
        out.gauge(
            "atmlab_cm_arrival_rate_per_second",
            "The manager's estimate of the call arrival rate (calls per second).",
            l(),
            s.load.0,
        );
        out.gauge(
            "atmlab_cm_load_region",
            "The load region the arrival rate falls in (adaptive T).",
            l(),
            s.load.1 as f64,
        );
        out.counter(
            "atmlab_cm_recovery_actions",
            "Findings and repairs of the start-up audit against the journal.",
            l(),
            s.recovery.len() as u64,
        );
        out.counter(
            "atmlab_cm_journal_writes",
            "Transactions the manager's journal committed (group commits).",
            l(),
            s.journal_writes,
        );
    }
}
