//! Malformed input: counted and dropped, never a panic (the decoders are fuzzed here
//! with proptest; `IssiFrame::parse` has its own properties in `msg`).

use std::sync::Arc;

use atmlab_core::time::Instant;
use atmlab_smds::IfaceId;
use atmlab_smds::fib::{Fib, Forwarder, Routes};
use atmlab_smds::harness::{Topology, address};
use atmlab_smds::msg::{envelope, l3_pdu};
use atmlab_smds::server::Server;
use atmlab_smds::{ServerId, linkstate::LinkStateConfig};
use proptest::prelude::*;

fn forwarder() -> Forwarder {
    let cfg = &Topology::line(2, 2).configs(LinkStateConfig::default(), Default::default())[0];
    let mut routes = Routes::default();
    routes.next_hop.insert(ServerId(2), IfaceId(2));
    routes.owners.push((address(2, 0), ServerId(2)));
    Forwarder::new(Arc::new(Fib::build(&cfg.local, &routes, &[])))
}

#[test]
fn malformed_pdus_are_counted_and_dropped() {
    let mut f = forwarder();
    let good = l3_pdu(address(1, 0), address(2, 0), b"hello", 1).unwrap();
    f.handle_datagram(IfaceId(0), &good);
    assert_eq!(f.clear_transmits(), 1);
    let mut bad = good.clone();
    bad[1] ^= 1; // BEtag mismatch
    f.handle_datagram(IfaceId(0), &bad);
    f.handle_datagram(IfaceId(0), &good[..20]);
    f.handle_datagram(IfaceId(2), &good); // no envelope on an ISSI
    f.handle_datagram(IfaceId(9), &good); // no such interface
    assert_eq!(f.clear_transmits(), 0);
    assert_eq!(f.counters().malformed, 4);
}

#[test]
fn malformed_control_frames_are_counted() {
    let cfg = Topology::line(2, 1).configs(LinkStateConfig::default(), Default::default());
    let mut s = Server::new(cfg[0].clone(), Instant::ZERO).unwrap();
    s.handle_datagram(Instant::ZERO, IfaceId(1), &[0xc2, 0, 0, 9]);
    s.handle_datagram(Instant::ZERO, IfaceId(1), &[0x77]);
    assert_eq!(s.control().malformed(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_octets_on_any_interface_never_panic(
        iface in 0u16..4,
        b in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut f = forwarder();
        f.handle_datagram(IfaceId(iface), &b);
        let _ = f.clear_transmits();
        prop_assert_eq!(f.counters().received, 1);
    }

    #[test]
    fn corrupted_pdus_never_panic_and_are_dropped_or_delivered(
        i in 0usize..60,
        x in 1u8..=255,
        on_issi in any::<bool>(),
    ) {
        let mut f = forwarder();
        let pdu = l3_pdu(address(2, 1), address(1, 1), b"some info", 3).unwrap();
        let mut frame = if on_issi { envelope(ServerId(0), 1).to_vec() } else { Vec::new() };
        frame.extend(&pdu);
        let n = frame.len();
        frame[i % n] ^= x;
        f.handle_datagram(IfaceId(if on_issi { 2 } else { 1 }), &frame);
        let sent = f.clear_transmits() as u64;
        let c = *f.counters();
        prop_assert_eq!(sent + c.dropped(), 1);
    }
}

/// Replays the seed corpus of the `smds_server` fuzz target (and any crash inputs
/// committed beside it).
#[test]
fn fuzz_corpus_replay() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/smds_server");
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("missing seed corpus {}: {e}", dir.display()));
    let mut n = 0;
    for e in entries {
        let data = std::fs::read(e.unwrap().path()).unwrap();
        crate::fuzz_harness::smds_server(&data);
        n += 1;
    }
    assert!(n > 0, "the seed corpus is empty");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The fuzz harness on random input, so CI exercises it without nightly.
    #[test]
    fn the_fuzz_harness_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        crate::fuzz_harness::smds_server(&b);
    }
}
