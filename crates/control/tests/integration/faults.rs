//! Issue 10, acceptance (2): with 5% of the messages between the manager and its switch
//! servers dropped, 5% duplicated, 5% delayed and 5% reordered, in both directions,
//! every call completes or fails cleanly, and after the manager's shutdown the audit of
//! every switch is clean.

use std::time::Duration as StdDuration;

use atmlab_control::audit::{AuditOptions, audit, snapshot};
use atmlab_control::callgen::{self, Load};
use atmlab_control::cm::core::{CmConfig, CmKind, HopSpec};
use atmlab_control::cm::faults::FaultPlan;
use atmlab_control::cm::live::{self, StaticRouter};
use atmlab_control::net::{NetSecurity, Network, Topology};
use atmlab_core::time::Duration;
use atmlab_fabric::live::grpc::GrpcSwitch;

fn line_route() -> Vec<HopSpec> {
    ["s1", "s2", "s3"]
        .iter()
        .map(|s| HopSpec {
            switch: s.to_string(),
            in_port: 0,
            out_port: 1,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_percent_faults_every_call_ends_cleanly_and_nothing_leaks() {
    let topo = Topology::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml"),
    )
    .unwrap();
    let net = Network::up(topo, &NetSecurity { certs: None }, None)
        .await
        .unwrap();
    let mut clients = Vec::new();
    for s in &net.switches {
        let ch = atmlab_rpc::client_channel(&s.grpc_addr.to_string(), None)
            .await
            .unwrap();
        clients.push((s.switch.describe_now().name, GrpcSwitch::new(ch)));
    }
    // The sequential manager waits out each lost message one call at a time: a lighter
    // load keeps the test short.
    for (kind, rate) in [(CmKind::Xbind, 400.0), (CmKind::Sequential, 100.0)] {
        let plan = FaultPlan {
            drop: 0.05,
            duplicate: 0.05,
            delay: 0.05,
            reorder: 0.05,
            max_delay: Duration::from_millis(3),
            seed: 7,
        };
        let config = CmConfig {
            // Loopback answers in well under a millisecond: a lost message is re-sent
            // after 50 ms rather than the default 2 s, so the test is short.
            command_timeout: Duration::from_millis(50),
            max_retries: 5,
            threshold: 2,
            ..CmConfig::new(kind)
        };
        let router = StaticRouter::new().with("a", "b", line_route());
        let cm =
            live::start_with_faults(config, clients.clone(), Box::new(router), Some(plan)).unwrap();
        let load = Load {
            holding: StdDuration::from_millis(5),
            ..Load::poisson(rate, StdDuration::from_secs(1), "a", "b")
        };
        let report = callgen::run(cm.clone(), &load).await;
        // Every call ended one way or the other, and its release was answered.
        assert_eq!(
            report.established + report.blocked + report.failed,
            report.offered,
            "{kind:?}: {report:?}"
        );
        assert!(
            report.established as f64 >= 0.95 * report.offered as f64,
            "{kind:?}: recovery should save nearly every call: {report:?}"
        );
        let status = cm.status().await.unwrap();
        assert!(
            status.stats.retries > 0,
            "{kind:?}: the faults must have cost re-sends"
        );
        assert_eq!(status.active, 0, "{kind:?}: every call released");
        cm.shutdown().await;
        // Late duplicates and delayed answers settle.
        tokio::time::sleep(StdDuration::from_millis(100)).await;
        let r = audit(
            &[],
            &snapshot(&clients).await.unwrap(),
            AuditOptions { quiescent: true },
        );
        assert!(r.is_clean(), "{kind:?}: {r}");
        eprintln!(
            "{kind:?}: {} calls offered, {} set up, {} failed, {} re-sends; audit {r}",
            report.offered, report.established, report.failed, status.stats.retries
        );
    }
    net.down().await;
}
