//! A connection manager's metrics (paper 000 §II-C and §IV): the counters GetStatus
//! answers (calls set up, released, blocked, failed; messages and commands; the VCI
//! cache; T and the arrival-rate estimate of §IV-B; the start-up audit's actions),
//! asked of the manager's task once per scrape, and the setup latency, timed by its
//! gRPC service from a request's arrival to its answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use atmlab_control::cm::live::{CmHandle, CmStatus};
use atmlab_control::cm::server::ManagerServer;

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
    /// its accept loop (`cm/NAME`) added to `metrics`; TINA's managers export their
    /// accept loop only.
    pub fn add(metrics: &Metrics, name: &str, server: &mut ManagerServer) {
        metrics.add(super::tls::TlsSource::new(
            format!("cm/{name}"),
            server.tls_stats(),
        ));
        let Some(handle) = server.handle() else {
            return;
        };
        let latency = Arc::new(LatencyHistogram::default());
        let observed = latency.clone();
        server.observe_setups(Arc::new(move |d| observed.observe(d)));
        metrics.add(CmSource {
            latency: Some(latency),
            ..CmSource::new(name, handle)
        });
    }
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
            out.histogram(
                "atmlab_cm_setup_duration_seconds",
                "Time from a setup request's arrival at the manager to its answer, setups that succeeded.",
                l(),
                sum,
                count,
                buckets,
            );
        }
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = status.as_ref() else {
            return;
        };
        let st = &s.stats;
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
        out.counter(
            "atmlab_cm_retries",
            "Commands re-sent after a time-out.",
            l(),
            st.retries,
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
        out.gauge(
            "atmlab_cm_active_calls",
            "Calls held.",
            l(),
            s.active as f64,
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
