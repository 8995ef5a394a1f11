//! The audit's live shell: reading switch servers and connection managers over gRPC for
//! the pure [`super::audit`] (`atmlab audit`, the tests that kill processes).

use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;

use super::{AuditOptions, AuditReport, SwitchSnapshot, audit};
use crate::ControlError;
use crate::cm::core::CallView;

/// Reads every switch.
pub async fn snapshot(
    switches: &[(String, GrpcSwitch)],
) -> Result<Vec<SwitchSnapshot>, ControlError> {
    let mut v = Vec::with_capacity(switches.len());
    for (name, c) in switches {
        v.push(SwitchSnapshot {
            name: name.clone(),
            description: c.describe().await?,
            connections: c.connections().await?,
            reservations: c.reservations().await?,
        });
    }
    Ok(v)
}

/// Audits `switches` against `calls` until the report is clean or `within` has passed,
/// polling every 20 ms, and returns the last report. A network that has just been
/// through faults settles for a while (give-backs are re-sent every half second, late
/// answers arrive), and the audit that counts is the one after it has settled; one that
/// never comes clean returns its findings at the deadline.
pub async fn audit_settled(
    calls: &[CallView],
    switches: &[(String, GrpcSwitch)],
    opts: AuditOptions,
    within: std::time::Duration,
) -> Result<AuditReport, ControlError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let report = audit(calls, &snapshot(switches).await?, opts);
        if report.is_clean() || tokio::time::Instant::now() >= deadline {
            return Ok(report);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A connection manager's call as its ListConnections reports it (the hops are what the
/// audit needs; the traffic is left at its default).
pub fn call_from_pb(i: &atmlab_rpc::v1::ConnectionInfo) -> Result<CallView, ControlError> {
    use atmlab_fabric::live::convert as cv;
    let bad = |what: &str| ControlError::Serve {
        what: "the audit",
        reason: format!("connection {} of a manager: {what}", i.id),
    };
    let vc = |v: Option<&atmlab_rpc::v1::VcId>, what: &str| {
        cv::vc_id(v).map_err(|e| bad(&format!("{what}: {e}")))
    };
    let port = |p: u32, what: &str| u16::try_from(p).map_err(|_| bad(&format!("{what} {p}")));
    let mut hops = Vec::with_capacity(i.hops.len());
    for h in &i.hops {
        // One entry per branch where a point-to-multipoint tree forks.
        let mut outs = Vec::new();
        for b in &h.branches {
            outs.push((
                port(b.port, "branch port")?,
                vc(b.id.as_ref(), "branch identifier")?,
            ));
        }
        if outs.is_empty() {
            outs.push((
                port(h.out_port, "output port")?,
                vc(h.out_id.as_ref(), "output identifier")?,
            ));
        }
        for (out_port, out_id) in outs {
            hops.push((
                crate::cm::core::HopSpec {
                    switch: h.switch.as_str().into(),
                    in_port: port(h.in_port, "input port")?,
                    out_port,
                },
                h.connection,
                vc(h.in_id.as_ref(), "input identifier")?,
                out_id,
            ));
        }
    }
    Ok(CallView {
        id: i.id,
        // The audit checks entries one by one; the tree's shape is not needed.
        parents: vec![None; hops.len()],
        leaves: Vec::new(),
        hops,
        source_vc: vc(i.source_vc.as_ref(), "source VC")?,
        destination_vc: vc(i.destination_vcs.first(), "destination VC")?,
        setup: atmlab_core::time::Duration::from_micros(i.setup_us),
        // Not needed by the audit: a nominal contract.
        traffic: atmlab_core::traffic::TrafficDescriptor::cbr(atmlab_core::units::CellRate(1.0)),
        tag: i.tag.clone(),
        invocations: i.invocations,
    })
}

/// Audits the network a name service lists: every switch server it lists, and the
/// calls of every connection manager it lists. Returns the report and the names of the
/// managers read.
pub async fn audit_network(
    names_url: &str,
    tls: Option<&atmlab_rpc::tls::TlsIdentity>,
    opts: AuditOptions,
) -> Result<(AuditReport, Vec<String>), ControlError> {
    use crate::names::{NameClient, ObjectKind};
    let nc = NameClient::connect(names_url, tls).await?;
    let mut switches = Vec::new();
    for (obj, _) in nc.list(Some(ObjectKind::SwitchServer)).await? {
        let name = obj.name.trim_start_matches("switch/").to_string();
        let expect = atmlab_rpc::tls::Expect::object(atmlab_rpc::tls::Role::Switch, name.as_str());
        let ch = atmlab_rpc::channel_to(&obj.address, tls, expect).await?;
        switches.push((name, GrpcSwitch::new(ch)));
    }
    let mut calls = Vec::new();
    let mut managers = Vec::new();
    for (obj, _) in nc.list(Some(ObjectKind::ConnectionManager)).await? {
        // A manager's certificate names its owner, not its registered name.
        let ch = atmlab_rpc::channel_to(
            &obj.address,
            tls,
            atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Cm),
        )
        .await?;
        let mut c = atmlab_rpc::v1::connection_manager_client::ConnectionManagerClient::new(ch);
        let list = c
            .list_connections(atmlab_rpc::v1::ListCmConnectionsRequest {})
            .await
            .map_err(|e| ControlError::Serve {
                what: "the audit",
                reason: format!("listing {}'s connections: {}", obj.name, e.message()),
            })?
            .into_inner();
        for i in &list.connections {
            calls.push(call_from_pb(i)?);
        }
        managers.push(obj.name);
    }
    let snaps = snapshot(&switches).await?;
    Ok((audit(&calls, &snaps, opts), managers))
}
