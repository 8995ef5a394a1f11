//! Helpers shared by the integration tests: the switch, the commands and the clients that
//! several test files set up the same way, and the one way to wait for something that
//! happens on another task (poll against a deadline, never a fixed sleep).

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::*;

/// An OC-3 link: 155.52 Mb/s.
pub fn oc3() -> BitRate {
    BitRate(155.52e6)
}

/// Switch "s1" with three OC-3 ports: 0 and 1 are UNIs with the defaults, 2 is an NNI
/// trunk with the whole 12-bit VPI range (for VP cross-connects).
pub fn config3() -> SwitchConfig {
    let mut cfg = SwitchConfig::uniform("s1", 3, oc3());
    cfg.ports[2] = cfg.ports[2].clone().nni();
    cfg.ports[2].vpi_range = (0, 4095);
    cfg
}

/// A point-to-point VC cross-connect `in_port in_id -> out_port out_id` with a CBR
/// contract of `rate` cells/s, owned by "cm", and nothing else (no buffer set aside, no
/// replenishment, no tag); tests change what they need with struct update syntax.
pub fn commit(in_port: u16, in_id: VcId, out_port: u16, out_id: VcId, rate: f64) -> Commit {
    Commit {
        kind: ConnectionKind::Vc,
        in_port: PortId(in_port),
        in_id,
        branches: vec![Branch {
            port: PortId(out_port),
            id: out_id,
        }],
        traffic: TrafficDescriptor::cbr(CellRate(rate)),
        clr: 0.0,
        buffer_cells: 0,
        owner: "cm".into(),
        replenish: 0,
        tag: String::new(),
    }
}

/// Phase 1: `count` VCIs in VPI 0 of `port`, for owner "cm".
pub fn reserve(port: u16, count: u32) -> Reserve {
    Reserve {
        port: PortId(port),
        count,
        owner: "cm".into(),
        ..Default::default()
    }
}

#[cfg(feature = "live")]
pub use live::*;

/// The helpers of the tests of the live shells.
#[cfg(feature = "live")]
mod live {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use atmlab_core::ids::VcId;
    use atmlab_fabric::live::backend::SwitchBackend;
    use atmlab_fabric::live::grpc::GrpcSwitch;
    use atmlab_fabric::{Atomicity, Command, Reply};
    use atmlab_rpc::tls::TlsIdentity;

    /// A bound that only a hang reaches; no assertion depends on how fast anything is.
    pub const HANG: Duration = Duration::from_secs(10);

    /// Any free port on loopback.
    pub fn any_addr() -> SocketAddr {
        "127.0.0.1:0".parse().expect("literal")
    }

    /// A gRPC client of the switch server at `addr`, with `tls` as its lab identity
    /// (expecting any switch).
    pub async fn grpc_client(addr: SocketAddr, tls: Option<&TlsIdentity>) -> GrpcSwitch {
        let tls =
            tls.map(|t| t.expecting(atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch)));
        GrpcSwitch::new(
            atmlab_rpc::client_channel(&addr.to_string(), tls.as_ref())
                .await
                .unwrap(),
        )
    }

    /// Phase 1 through any backend: a batch of one Reserve of `count` identifiers on
    /// `port` for owner "cm"; the identifiers reserved.
    pub async fn reserve_via<B: SwitchBackend>(
        backend: &B,
        port: u16,
        count: u32,
        atomicity: Atomicity,
    ) -> Vec<VcId> {
        let r = backend
            .execute(
                vec![Command::Reserve(super::reserve(port, count))],
                atomicity,
            )
            .await
            .unwrap();
        let Ok(Reply::Reserved(ids)) = &r[0] else {
            panic!("{r:?}")
        };
        ids.clone()
    }

    /// Polls `cond` until it holds; fails the test, naming `what`, if it does not within
    /// [`HANG`].
    pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + HANG;
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
