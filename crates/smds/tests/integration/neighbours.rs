//! Security (issue 24, item 4), on the sans-IO control core: an ISSI's control frames are
//! taken only when their `from` is the interface's neighbour (configured, or the server
//! whose Hello first arrived on it). A forged CMP Throttle naming another server is
//! refused and counted, and cuts nothing.

use atmlab_core::time::{Duration, Instant};
use atmlab_smds::IfaceId;
use atmlab_smds::fib::{InterfaceConfig, LocalConfig, SniConfig};
use atmlab_smds::ids::ServerId;
use atmlab_smds::msg::{CmpKind, IssiFrame};
use atmlab_smds::server::{Control, ServerConfig};

fn server() -> ServerConfig {
    ServerConfig::new(LocalConfig {
        id: ServerId(1),
        interfaces: vec![
            InterfaceConfig::Sni(SniConfig {
                addresses: vec!["I:15550101".parse().unwrap()],
                ..SniConfig::default()
            }),
            InterfaceConfig::Issi { cost: 1 },
            InterfaceConfig::Issi { cost: 1 },
        ],
        groups: Vec::new(),
    })
}

fn hello(from: u32) -> Vec<u8> {
    IssiFrame::Hello {
        from: ServerId(from),
        hello_ms: 1000,
        dead_ms: 4000,
        seen: vec![ServerId(1)],
    }
    .emit()
}

fn throttle(from: u32) -> Vec<u8> {
    IssiFrame::Cmp {
        from: ServerId(from),
        kind: CmpKind::Throttle(900),
    }
    .emit()
}

#[test]
fn a_throttle_naming_another_server_than_the_neighbour_cuts_nothing() {
    let t0 = Instant::ZERO;
    let mut c = Control::new(server(), t0).unwrap();
    // Server 2 says hello on ISSI 1, server 3 on ISSI 2.
    c.handle_control(t0, IfaceId(1), &hello(2));
    c.handle_control(t0, IfaceId(2), &hello(3));
    // A Throttle on ISSI 1 that says it comes from 3 (or from 7, or from us).
    let t1 = t0.saturating_add(Duration::from_millis(1));
    for from in [3, 7, 1] {
        c.handle_control(t1, IfaceId(1), &throttle(from));
    }
    assert_eq!(
        c.cmp().cuts(),
        vec![0, 0, 0],
        "a forged throttle cut traffic"
    );
    // A Hello on ISSI 1 from someone else does not replace its neighbour.
    c.handle_control(t1, IfaceId(1), &hello(9));
    let nbrs = c.link_state().neighbours();
    assert!(
        nbrs.iter()
            .all(|&(i, n, _)| (i, n) == (IfaceId(1), ServerId(2))
                || (i, n) == (IfaceId(2), ServerId(3))),
        "{nbrs:?}"
    );
    // The real neighbour's throttle is obeyed.
    c.handle_control(t1, IfaceId(1), &throttle(2));
    assert_eq!(c.cmp().cuts(), vec![0, 900, 0]);
}
