//! Helpers the lab's tests share: a topology of `topologies/` started with the launcher
//! in plain text, and the audit that every switch is empty.

use std::path::Path;

use atmlab_control::net::Topology;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_lab::launch::{Lab, LabSpec};

/// `topologies/FILE` on loopback in plain text, through the launcher, with its state in
/// `dir`.
pub async fn lab(file: &str, dir: &Path) -> Lab {
    let topology = Topology::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../topologies")
            .join(file),
    )
    .unwrap();
    Lab::start(
        LabSpec {
            topology,
            certs: None,
            identity: atmlab_rpc::tls::Subject::new(atmlab_rpc::tls::Role::Admin, "admin"),
            data_dir: dir.to_owned(),
            journals: None,
        },
        &mut |_| {},
    )
    .await
    .unwrap()
}

/// The route a -> b through the line of three: in on port 0, out on port 1.
pub fn line_route() -> Vec<atmlab_control::cm::core::HopSpec> {
    atmlab_control::cm::core::HopSpec::through(&["s1", "s2", "s3"], 0, 1)
}

/// Every switch holds no connection, no bandwidth and no committed identifier.
pub async fn assert_empty(clients: &[(String, GrpcSwitch)], what: &str) {
    for (name, c) in clients {
        assert!(
            c.connections().await.unwrap().is_empty(),
            "{what}: {name} still holds a connection"
        );
        let d = c.describe().await.unwrap();
        assert!(
            d.ports
                .iter()
                .all(|p| p.allocated == 0.0 && p.committed == 0),
            "{what}: {name} has bandwidth or identifiers left"
        );
    }
}
