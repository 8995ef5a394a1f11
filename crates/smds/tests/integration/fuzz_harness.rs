//! The SMDS server's input harness, shared by the robustness tests and the cargo-fuzz
//! target `smds_server` (`fuzz/fuzz_targets/smds_server.rs` includes this file): the
//! first octet picks the interface, the rest is a datagram handed to a whole server
//! (control frames and user data alike). It must never panic, and every datagram that
//! is not a control frame is counted exactly once as forwarded or dropped.

use atmlab_core::time::Instant;
use atmlab_smds::IfaceId;
use atmlab_smds::harness::Topology;
use atmlab_smds::linkstate::LinkStateConfig;
use atmlab_smds::server::Server;

/// Feeds `data` to a server with two SNIs and two ISSIs (interfaces 0-3).
pub fn smds_server(data: &[u8]) {
    let Some((&which, datagram)) = data.split_first() else {
        return;
    };
    let topo = Topology {
        servers: 3,
        links: vec![(0, 1), (0, 2)],
        subscribers: 2,
        groups: Vec::new(),
    };
    let cfg = topo.configs(LinkStateConfig::default(), Default::default());
    let mut s = Server::new(cfg[0].clone(), Instant::ZERO).expect("valid configuration");
    let before = s.counters().received;
    s.handle_datagram(Instant::ZERO, IfaceId(u16::from(which % 5)), datagram);
    while s.poll_transmit().is_some() {}
    s.handle_timeout(Instant::ZERO);
    while s.poll_transmit().is_some() {}
    let c = s.counters();
    assert!(c.received - before <= 1);
}
