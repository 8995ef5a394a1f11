//! Many servers in simulated time: delivery, groups, screening, spoofing, routing
//! convergence after failures, the two-subnet topology of §3.3.2, and the CMP.

use atmlab_core::time::{Duration, Instant};
use atmlab_smds::cmp::CmpConfig;
use atmlab_smds::fib::{GroupConfig, InterfaceConfig, ScreenList};
use atmlab_smds::harness::{SimNetwork, Topology, address};
use atmlab_smds::linkstate::LinkStateConfig;
use atmlab_smds::msg::l3_pdu;
use atmlab_smds::{IfaceId, ServerId};
use atmlab_wire::E164Address;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ls() -> LinkStateConfig {
    LinkStateConfig {
        hello_interval: ms(100),
        dead_interval: ms(400),
        rxmt_interval: ms(200),
        ..LinkStateConfig::default()
    }
}

/// Five servers: a ring 0-1-2-3-4-0 with a chord 1-3; two subscribers each.
fn five() -> Topology {
    Topology {
        servers: 5,
        links: vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3)],
        subscribers: 2,
        groups: Vec::new(),
    }
}

fn converge(net: &mut SimNetwork) -> Instant {
    let limit = net.now() + Duration::from_secs(10);
    net.run_until_true(ms(10), limit, |n| n.fully_adjacent() && n.all_reachable())
        .expect("the network converges")
}

/// The LSA of `origin` as server index `at` holds it.
fn lsa(net: &SimNetwork, at: usize, origin: ServerId) -> atmlab_smds::msg::Lsa {
    net.servers()[at]
        .control()
        .link_state()
        .lsas()
        .find(|l| l.origin == origin)
        .cloned()
        .unwrap()
}

fn send(net: &mut SimNetwork, from: (usize, u32), to: E164Address, info: &[u8]) {
    let pdu = l3_pdu(address(from.0 as u32 + 1, from.1), to, info, 7).unwrap();
    net.inject(from.0, IfaceId(from.1 as u16), pdu);
}

#[test]
fn delivery_across_a_five_server_network() {
    let mut net = SimNetwork::from_topology(&five(), ls(), CmpConfig::default(), ms(1)).unwrap();
    let t = converge(&mut net);
    assert!(
        t < Instant::ZERO + Duration::from_secs(1),
        "converged at {t}"
    );
    // Every subscriber to every other one.
    let mut sent = 0;
    for s in 0..5 {
        for k in 0..2 {
            for d in 0..5u32 {
                for j in 0..2u32 {
                    if (s as u32, k) == (d, j) {
                        continue;
                    }
                    let info = format!("{s}.{k}->{d}.{j}");
                    send(&mut net, (s, k), address(d + 1, j), info.as_bytes());
                    sent += 1;
                }
            }
        }
    }
    net.run_for(ms(50));
    let got = net.take_delivered();
    assert_eq!(got.len(), sent);
    for g in &got {
        let v = atmlab_wire::L3Pdu::new_checked(&g.bytes[..]).unwrap();
        let r = atmlab_wire::L3PduRepr::parse(&v).unwrap();
        // Delivered to the SNI that owns the destination, with the info intact.
        assert_eq!(
            r.destination,
            address(g.server as u32 + 1, u32::from(g.iface.0))
        );
        let text = std::str::from_utf8(r.info).unwrap();
        assert!(
            text.ends_with(&format!("->{}.{}", g.server, g.iface.0)),
            "{text}"
        );
    }
    // Paths: server 0 to server 2 crosses a transit server.
    let c: u64 = net
        .servers()
        .iter()
        .map(|s| s.counters().issi_to_issi)
        .sum();
    assert!(c > 0);
    let d: u64 = net.servers().iter().map(|s| s.counters().dropped()).sum();
    assert_eq!(d, 0);
}

#[test]
fn a_group_address_reaches_each_member_once() {
    let mut topo = five();
    let g = E164Address::group("15559999").unwrap();
    topo.groups = vec![GroupConfig {
        address: g,
        // Two members behind server 3 (different SNIs), one behind 2, one behind 4, and
        // the sender itself (not sent back to it).
        members: vec![
            address(3, 0),
            address(3, 1),
            address(2, 1),
            address(4, 0),
            address(1, 0),
        ],
    }];
    let mut net = SimNetwork::from_topology(&topo, ls(), CmpConfig::default(), ms(1)).unwrap();
    converge(&mut net);
    send(&mut net, (0, 0), g, b"to the group");
    net.run_for(ms(50));
    let mut got: Vec<(usize, u16)> = net
        .take_delivered()
        .iter()
        .map(|d| (d.server, d.iface.0))
        .collect();
    got.sort();
    assert_eq!(got, vec![(1, 1), (2, 0), (2, 1), (3, 0)]);
}

#[test]
fn screening_refuses_and_a_spoofed_source_is_dropped_and_counted() {
    let topo = Topology::line(2, 2);
    let mut configs = topo.configs(ls(), CmpConfig::default());
    // Server 1's SNI 0 may send only to address(2, 0); server 2's SNI 1 refuses
    // address(1, 1) as a source.
    if let InterfaceConfig::Sni(s) = &mut configs[0].local.interfaces[0] {
        s.destination_screen = ScreenList::Allow(vec![address(2, 0)]);
    }
    if let InterfaceConfig::Sni(s) = &mut configs[1].local.interfaces[1] {
        s.source_screen = ScreenList::Deny(vec![address(1, 1)]);
    }
    let mut net = SimNetwork::new(configs, topo.sim_links(ms(1))).unwrap();
    converge(&mut net);
    send(&mut net, (0, 0), address(2, 0), b"allowed");
    send(&mut net, (0, 0), address(2, 1), b"destination screened");
    send(&mut net, (0, 1), address(2, 1), b"source screened");
    send(&mut net, (0, 1), address(2, 0), b"allowed too");
    // A spoofed source: SNI 0 of server 1 claims server 1 SNI 1's address.
    let spoof = l3_pdu(address(1, 1), address(2, 0), b"spoofed", 1).unwrap();
    net.inject(0, IfaceId(0), spoof);
    // And one claiming another server's subscriber.
    let spoof = l3_pdu(address(2, 1), address(2, 0), b"spoofed", 1).unwrap();
    net.inject(0, IfaceId(0), spoof);
    net.run_for(ms(20));
    let got = net.take_delivered();
    assert_eq!(got.len(), 2, "{got:?}");
    let c0 = net.servers()[0].counters();
    let c1 = net.servers()[1].counters();
    assert_eq!(c0.destination_screened, 1);
    assert_eq!(c0.spoofed, 2);
    assert_eq!(c1.source_screened, 1);
}

#[test]
fn flooding_converges_after_a_link_fails_and_after_it_recovers() {
    let mut net = SimNetwork::from_topology(&five(), ls(), CmpConfig::default(), ms(1)).unwrap();
    converge(&mut net);
    // Link 1-2 (index 1) fails: 1 reaches 2 through 3 afterwards.
    net.set_link_up(1, false);
    let before = net.now();
    let limit = before + Duration::from_secs(5);
    let t = net
        .run_until_true(ms(10), limit, |n| {
            n.databases_agree()
                && n.servers()[1]
                    .control()
                    .link_state()
                    .neighbours()
                    .iter()
                    .all(|(_, id, _)| *id != ServerId(3))
        })
        .expect("the failure is flooded");
    // Within the dead interval plus a few flooding delays.
    assert!(t - before <= ms(600), "{}", t - before);
    assert!(net.all_reachable());
    send(&mut net, (1, 0), address(3, 0), b"around the failure");
    net.run_for(ms(20));
    assert_eq!(net.take_delivered().len(), 1);
    let s2 = lsa(&net, 4, ServerId(2));
    assert!(!s2.links.iter().any(|(n, _)| *n == ServerId(3)));

    net.set_link_up(1, true);
    let before = net.now();
    let t = converge(&mut net);
    assert!(t - before <= ms(400), "{}", t - before);
    let s2 = lsa(&net, 4, ServerId(2));
    assert!(s2.links.iter().any(|(n, _)| *n == ServerId(3)));
}

#[test]
fn two_subnets_joined_by_one_link_become_fully_adjacent_promptly() {
    let topo = Topology::two_subnets(4, 1);
    let join = topo.links.len() - 1;
    let mut net = SimNetwork::from_topology(&topo, ls(), CmpConfig::default(), ms(1)).unwrap();
    // The joining link starts down (the paper: "if A is down, which occurs when getting
    // started or after a failure"): each subnet converges on its own first.
    net.set_link_up(join, false);
    net.run_for(Duration::from_secs(2));
    assert!(!net.databases_agree());
    net.set_link_up(join, true);
    let before = net.now();
    let limit = before + Duration::from_secs(3600);
    let t = net
        .run_until_true(ms(10), limit, |n| n.fully_adjacent() && n.all_reachable())
        .unwrap();
    // A few hello intervals, not LSRefreshTime (30 min).
    assert!(t - before <= ms(500), "{}", t - before);
    // A subscriber of one subnet reaches one of the far side of the other.
    send(&mut net, (0, 0), address(8, 0), b"across");
    net.run_for(ms(20));
    assert_eq!(net.take_delivered().len(), 1);
}

#[test]
fn without_onward_flooding_of_the_sync_the_paper_waits_for_the_refresh() {
    // The §3.3.2 behaviour, restored with flood_sync = false: the far servers learn the
    // other subnet only when LSAs are refreshed (LSRefreshTime, 30 min).
    let topo = Topology::two_subnets(3, 1);
    let join = topo.links.len() - 1;
    let cfg = LinkStateConfig {
        flood_sync: false,
        ..ls()
    };
    let mut net = SimNetwork::from_topology(&topo, cfg, CmpConfig::default(), ms(1)).unwrap();
    net.set_link_up(join, false);
    net.run_for(Duration::from_secs(2));
    net.set_link_up(join, true);
    let before = net.now();
    net.run_for(Duration::from_secs(60));
    assert!(!net.databases_agree(), "still apart after a minute");
    let limit = before + Duration::from_secs(3 * 3600);
    let t = net
        .run_until_true(Duration::from_secs(10), limit, |n| n.databases_agree())
        .unwrap();
    let waited = (t - before).as_secs_f64();
    assert!((60.0..=1900.0).contains(&waited), "{waited}");
}

#[test]
fn cmp_throttles_the_neighbours_and_recovers() {
    // s1 and s3 both send to s2's subscriber through s2, which can serve one PDU per
    // 100 us: together they offer 2.5 times that.
    let topo = Topology {
        servers: 3,
        links: vec![(0, 1), (1, 2)],
        subscribers: 1,
        groups: Vec::new(),
    };
    let mut net = SimNetwork::from_topology(&topo, ls(), CmpConfig::default(), ms(1)).unwrap();
    converge(&mut net);
    net.set_capacity(1, Duration::from_micros(100), 200);
    let dst = address(2, 0);
    let info = [0u8; 100];
    let offer = |net: &mut SimNetwork, ms_: u64| {
        for _ in 0..ms_ * 8 {
            send(net, (0, 0), dst, &info);
            send(net, (2, 0), dst, &info);
            // 16 PDUs per ms offered in all (125 us between pairs).
            net.run_for(Duration::from_micros(125));
        }
    };
    offer(&mut net, 300);
    let s2 = &net.servers()[1];
    assert!(s2.control().cmp().episodes() >= 1, "s2 became congested");
    let cut: u64 = [0, 2]
        .iter()
        .map(|&i| net.servers()[i].counters().cmp_cut)
        .sum();
    assert!(cut > 0, "the neighbours cut their traffic toward s2");
    // The cut keeps s2's own discards low: most of the excess is cut at the neighbours.
    let overload = net.servers()[1].counters().overload;
    assert!(overload < cut, "overload {overload} cut {cut}");
    // The overload ends: s2 recovers and the neighbours stop cutting.
    net.run_for(ms(600));
    assert!(!net.servers()[1].control().cmp().congested());
    let before: u64 = [0, 2]
        .iter()
        .map(|&i| net.servers()[i].counters().cmp_cut)
        .sum();
    net.take_delivered();
    for _ in 0..100 {
        send(&mut net, (0, 0), dst, &info);
        net.run_for(ms(1));
    }
    net.run_for(ms(10));
    let after: u64 = [0, 2]
        .iter()
        .map(|&i| net.servers()[i].counters().cmp_cut)
        .sum();
    assert_eq!(before, after, "no cut after recovery");
    assert_eq!(net.take_delivered().len(), 100);
}
