//! Helpers the control plane's integration tests share: networks on loopback, a blocker
//! that fills a port, the IDL's CBR contract, and polls against a deadline (never a fixed
//! sleep).

use std::future::Future;
use std::path::Path;
use std::time::Duration;

/// Only reached when something is broken.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The line of three switches (`topologies/line3.toml`) on loopback in plain text, and
/// a gRPC client of each switch server, by name.
pub async fn line3() -> (
    atmlab_control::net::Network,
    Vec<(String, atmlab_fabric::live::grpc::GrpcSwitch)>,
) {
    network("line3.toml").await
}

/// Someone else (owner "someone") takes all but `leave` cells/s of `switch`'s port 1,
/// with a connection from port 0 on VC 0/4000, so that a call through that port is
/// refused by the switch's admission control; returns the connection's id.
pub async fn block_port(switch: &atmlab_fabric::live::grpc::GrpcSwitch, leave: f64) -> u64 {
    use atmlab_core::ids::{PortId, VcId};
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::switch::{Atomicity, Branch, Command, Commit, ConnectionKind, Reply};
    let cap = switch.describe().await.unwrap().ports[1]
        .config
        .capacity
        .per_sec();
    let r = switch
        .execute(
            vec![Command::Commit(Commit {
                kind: ConnectionKind::Vc,
                in_port: PortId(0),
                in_id: VcId::new(0, 4_000),
                branches: vec![Branch {
                    port: PortId(1),
                    id: VcId::new(0, 4_000),
                }],
                traffic: TrafficDescriptor::cbr(CellRate(cap - leave)),
                clr: 0.0,
                buffer_cells: 0,
                owner: "someone".into(),
                replenish: 0,
                tag: "blocker".into(),
            })],
            Atomicity::AllOrNothing,
        )
        .await
        .unwrap();
    match &r[0] {
        Ok(Reply::Committed { connection, .. }) => *connection,
        other => panic!("{other:?}"),
    }
}

/// A CBR contract of `pcr` cells/s, as cm.proto and tina.proto carry it.
pub fn cbr_cell(pcr: f64) -> atmlab_rpc::v1::CellQos {
    atmlab_rpc::v1::CellQos {
        traffic: Some(atmlab_fabric::live::convert::pb_traffic(
            &atmlab_core::traffic::TrafficDescriptor::cbr(atmlab_core::units::CellRate(pcr)),
            0.0,
        )),
        ..Default::default()
    }
}

/// A network of `topologies/FILE` on loopback in plain text, and a gRPC client of each
/// switch server, by name, in the file's order.
pub async fn network(
    file: &str,
) -> (
    atmlab_control::net::Network,
    Vec<(String, atmlab_fabric::live::grpc::GrpcSwitch)>,
) {
    use atmlab_control::net::{NetSecurity, Network, Topology};
    let topo = Topology::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../topologies")
            .join(file),
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
        clients.push((
            s.switch.describe_now().name,
            atmlab_fabric::live::grpc::GrpcSwitch::new(ch),
        ));
    }
    (net, clients)
}

/// Polls `check` until it holds, failing after [`DEADLINE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The route a -> b through the line of three (`topologies/line3.toml`): in on port 0,
/// out on port 1 at each switch.
pub fn line_route() -> Vec<atmlab_control::cm::core::HopSpec> {
    atmlab_control::cm::core::HopSpec::through(&["s1", "s2", "s3"], 0, 1)
}
