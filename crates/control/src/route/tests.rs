//! The route object's tests: routes on lines and rings, bandwidth constraints, Yen's
//! alternates, views that do not hang together.

use std::collections::{BTreeMap, BTreeSet};

use super::object::*;
use crate::ControlError;

fn port(port: u16, capacity: f64, peer: Option<(&str, u16)>) -> PortState {
    PortState {
        port,
        capacity,
        allocated: 0.0,
        peer: peer.map(|(s, p)| (s.to_string(), p)),
    }
}

/// Switches with `ports` ports each, `links` "s1:1"-"s2:0" and hosts at "s:p".
fn view(switches: &[(&str, u16)], links: &[(&str, &str)], hosts: &[(&str, &str)]) -> NetworkView {
    let split = |s: &str| {
        let (a, b) = s.split_once(':').unwrap();
        (a.to_string(), b.parse::<u16>().unwrap())
    };
    let mut peers: BTreeMap<(String, u16), (String, u16)> = BTreeMap::new();
    for (a, b) in links {
        peers.insert(split(a), split(b));
        peers.insert(split(b), split(a));
    }
    NetworkView {
        switches: switches
            .iter()
            .map(|&(name, n)| {
                let ports = (0..n)
                    .map(|p| PortState {
                        peer: peers.get(&(name.to_string(), p)).cloned(),
                        ..port(p, 1000.0, None)
                    })
                    .collect();
                (name.to_string(), ports)
            })
            .collect(),
        hosts: hosts
            .iter()
            .map(|(h, at)| {
                let (s, p) = split(at);
                (h.to_string(), s, p)
            })
            .collect(),
    }
}

fn hops(r: &Route) -> Vec<(&str, u16, u16)> {
    r.hops
        .iter()
        .map(|h| (h.switch.as_str(), h.in_port, h.out_port))
        .collect()
}

fn line3() -> RouteObject {
    RouteObject::new(view(
        &[("s1", 2), ("s2", 2), ("s3", 2)],
        &[("s1:1", "s2:0"), ("s2:1", "s3:0")],
        &[("a", "s1:0"), ("b", "s3:1")],
    ))
    .unwrap()
}

/// A ring s1-s2-s3-s4-s1 (port 1 clockwise, port 2 anticlockwise), a host on port 0 of
/// each, and a chord s1:3-s3:3.
fn ring(chord: bool) -> RouteObject {
    let mut links = vec![
        ("s1:1", "s2:2"),
        ("s2:1", "s3:2"),
        ("s3:1", "s4:2"),
        ("s4:1", "s1:2"),
    ];
    if chord {
        links.push(("s1:3", "s3:3"));
    }
    RouteObject::new(view(
        &[("s1", 4), ("s2", 4), ("s3", 4), ("s4", 4)],
        &links,
        &[
            ("h1", "s1:0"),
            ("h2", "s2:0"),
            ("h3", "s3:0"),
            ("h4", "s4:0"),
        ],
    ))
    .unwrap()
}

#[test]
fn a_line_gives_the_one_path() {
    let r = line3();
    assert_eq!(r.host("a"), Some(("s1", 0)));
    assert_eq!(r.host("c"), None);
    let route = r.route("a", "b", 500.0).unwrap();
    assert_eq!(hops(&route), [("s1", 0, 1), ("s2", 0, 1), ("s3", 0, 1)]);
    let back = r.route("b", "a", 500.0).unwrap();
    assert_eq!(hops(&back), [("s3", 1, 0), ("s2", 1, 0), ("s1", 1, 0)]);
    assert_eq!(r.k_routes("a", "b", 500.0, 5), [route]);
    assert_eq!(r.view().links().len(), 2);
}

#[test]
fn hosts_on_one_switch_get_one_hop() {
    let r = RouteObject::new(view(&[("s1", 3)], &[], &[("a", "s1:0"), ("b", "s1:2")])).unwrap();
    let route = r.route("a", "b", 10.0).unwrap();
    assert_eq!(hops(&route), [("s1", 0, 2)]);
    assert_eq!(r.k_routes("a", "b", 10.0, 3), [route]);
    let e = r.route("a", "a", 10.0).unwrap_err();
    assert!(matches!(e, ControlError::InvalidRouteRequest { .. }), "{e}");
}

#[test]
fn unknown_hosts_are_named() {
    let r = line3();
    for (src, dst) in [("x", "b"), ("a", "x")] {
        let e = r.route(src, dst, 1.0).unwrap_err();
        assert!(
            matches!(&e, ControlError::UnknownHost { host } if host == "x"),
            "{e}"
        );
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("\"x\""), "{e}");
        assert!(r.k_routes(src, dst, 1.0, 3).is_empty());
    }
    let e = r.route("a", "b", -1.0).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
    let e = r.route("a", "b", f64::NAN).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn a_call_without_bandwidth_is_blocked() {
    let mut r = line3();
    // A middle link short of bandwidth.
    r.set_allocated("s2", 1, 800.0);
    let e = r.route("a", "b", 500.0).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("every path from s1 to s3"), "{e}");
    assert!(r.k_routes("a", "b", 500.0, 3).is_empty());
    // What is left still fits.
    assert!(r.route("a", "b", 200.0).is_ok());
    assert!(r.route("a", "b", 200.5).is_err());
    // The destination host's own port.
    r.set_allocated("s2", 1, 0.0);
    r.set_allocated("s3", 1, 1000.0);
    let e = r.route("a", "b", 1.0).unwrap_err();
    assert!(matches!(e, ControlError::NoRoute { .. }), "{e}");
    assert!(e.to_string().contains("s3:1"), "{e}");
    // Not connected at all.
    let r = RouteObject::new(view(
        &[("s1", 1), ("s2", 1)],
        &[],
        &[("a", "s1:0"), ("b", "s2:0")],
    ))
    .unwrap();
    let e = r.route("a", "b", 0.0).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::ResourceExhausted);
    assert!(e.to_string().contains("not connected"), "{e}");
}

#[test]
fn a_ring_has_alternates_fewest_hops_first() {
    let r = ring(false);
    // h1 to h2: one hop clockwise or three anticlockwise.
    let routes = r.k_routes("h1", "h2", 100.0, 5);
    assert_eq!(routes.len(), 2);
    assert_eq!(hops(&routes[0]), [("s1", 0, 1), ("s2", 2, 0)]);
    assert_eq!(
        hops(&routes[1]),
        [("s1", 0, 2), ("s4", 1, 2), ("s3", 1, 2), ("s2", 1, 0)]
    );
    assert_eq!(r.route("h1", "h2", 100.0).unwrap(), routes[0]);
    assert_eq!(r.k_routes("h1", "h2", 100.0, 1), routes[..1]);
    assert!(r.k_routes("h1", "h2", 100.0, 0).is_empty());
}

#[test]
fn equal_hops_go_the_wider_way_then_by_name() {
    let mut r = ring(false);
    // h1 to h3: two hops either way; equal free bandwidth, so by name: via s2.
    let via = |r: &RouteObject| r.route("h1", "h3", 100.0).unwrap().hops[1].switch.clone();
    assert_eq!(via(&r), "s2");
    // Load the s2 way a little: the wider s4 way wins.
    r.set_allocated("s2", 1, 300.0);
    assert_eq!(via(&r), "s4");
    let routes = r.k_routes("h1", "h3", 100.0, 3);
    assert_eq!(routes.len(), 2);
    assert_eq!(routes[0].hops[1].switch, "s4");
    assert_eq!(routes[1].hops[1].switch, "s2");
    // Deterministic: the same view gives the same answer.
    assert_eq!(r.clone().k_routes("h1", "h3", 100.0, 3), routes);
}

#[test]
fn bandwidth_constraints_reroute_around_a_full_link() {
    let mut r = ring(true);
    // h1 to h3 over the chord: one hop.
    assert_eq!(
        hops(&r.route("h1", "h3", 100.0).unwrap()),
        [("s1", 0, 3), ("s3", 3, 0)]
    );
    let all = r.k_routes("h1", "h3", 100.0, 10);
    assert_eq!(all.len(), 3, "{all:?}"); // chord, via s2, via s4
    assert_eq!(all[0].hops.len(), 2);
    assert_eq!(all[1].hops.len(), 3);
    assert_eq!(all[2].hops.len(), 3);
    // Fill the chord: around the ring instead.
    r.set_allocated("s1", 3, 950.0);
    let route = r.route("h1", "h3", 100.0).unwrap();
    assert_eq!(hops(&route), [("s1", 0, 1), ("s2", 2, 1), ("s3", 2, 0)]);
    assert_eq!(r.k_routes("h1", "h3", 100.0, 10).len(), 2);
    // A small call still takes the chord.
    assert_eq!(r.route("h1", "h3", 50.0).unwrap().hops.len(), 2);
    // The reverse direction's ports are other ports: unaffected.
    assert_eq!(r.route("h3", "h1", 100.0).unwrap().hops.len(), 2);
}

#[test]
fn k_routes_are_loop_free_and_distinct() {
    // A 3x3 grid: many alternates.
    let mut switches = Vec::new();
    let mut links = Vec::new();
    let name = |x: u16, y: u16| format!("g{x}{y}");
    let names: Vec<String> = (0..3)
        .flat_map(|x| (0..3).map(move |y| name(x, y)))
        .collect();
    for n in &names {
        switches.push((n.as_str(), 5));
    }
    let mut link_names = Vec::new();
    for x in 0..3 {
        for y in 0..3 {
            if x < 2 {
                link_names.push((format!("{}:1", name(x, y)), format!("{}:2", name(x + 1, y))));
            }
            if y < 2 {
                link_names.push((format!("{}:3", name(x, y)), format!("{}:4", name(x, y + 1))));
            }
        }
    }
    for (a, b) in &link_names {
        links.push((a.as_str(), b.as_str()));
    }
    let r = RouteObject::new(view(&switches, &links, &[("a", "g00:0"), ("b", "g22:0")])).unwrap();
    // Corner to corner of a 3x3 grid there are exactly 12 self-avoiding paths.
    let routes = r.k_routes("a", "b", 1.0, 20);
    assert_eq!(routes.len(), 12);
    // The six shortest (4 links, 5 switches) come first.
    assert!(routes[..6].iter().all(|r| r.hops.len() == 5));
    assert!(
        routes
            .windows(2)
            .all(|w| w[0].hops.len() <= w[1].hops.len())
    );
    let distinct: BTreeSet<Vec<(String, u16, u16)>> = routes
        .iter()
        .map(|r| {
            r.hops
                .iter()
                .map(|h| (h.switch.clone(), h.in_port, h.out_port))
                .collect()
        })
        .collect();
    assert_eq!(distinct.len(), 12);
    for route in &routes {
        let switches: BTreeSet<&str> = route.hops.iter().map(|h| h.switch.as_str()).collect();
        assert_eq!(switches.len(), route.hops.len(), "a loop: {route:?}");
        assert_eq!(route.hops.first().unwrap().switch, "g00");
        assert_eq!(route.hops.last().unwrap().switch, "g22");
    }
}

#[test]
fn parallel_links_are_alternates_too() {
    let r = RouteObject::new(view(
        &[("s1", 3), ("s2", 3)],
        &[("s1:1", "s2:1"), ("s1:2", "s2:2")],
        &[("a", "s1:0"), ("b", "s2:0")],
    ))
    .unwrap();
    let routes = r.k_routes("a", "b", 1.0, 5);
    assert_eq!(routes.len(), 2);
    assert_eq!(hops(&routes[0]), [("s1", 0, 1), ("s2", 1, 0)]);
    assert_eq!(hops(&routes[1]), [("s1", 0, 2), ("s2", 2, 0)]);
}

#[test]
fn a_view_that_does_not_hang_together_is_refused_then_tolerated() {
    let mut v = view(
        &[("s1", 2), ("s2", 2)],
        &[("s1:1", "s2:0")],
        &[("a", "s1:0"), ("b", "s2:1"), ("c", "s9:0"), ("d", "s1:1")],
    );
    v.switches[0].1[0].peer = Some(("s9".into(), 3));
    let e = RouteObject::new(v.clone()).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    let text = e.to_string();
    for needle in [
        "s1:0's peer s9:3",
        "host c",
        "host d is at s1:1, which is a link",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    // As a refresh, what hangs together is used.
    let mut r = line3();
    r.update(v);
    assert_eq!(
        hops(&r.route("a", "b", 1.0).unwrap()),
        [("s1", 0, 1), ("s2", 0, 1)]
    );
    let e = r.route("a", "c", 1.0).unwrap_err();
    assert!(
        e.to_string()
            .contains("switch s9 is not in the network view"),
        "{e}"
    );
    // A one-way link is kept in its direction.
    let mut v = view(
        &[("s1", 2), ("s2", 2)],
        &[("s1:1", "s2:0")],
        &[("a", "s1:0"), ("b", "s2:1")],
    );
    v.switches[1].1[0].peer = None;
    assert!(
        RouteObject::new(v.clone())
            .unwrap_err()
            .to_string()
            .contains("one-way")
    );
    r.update(v);
    assert!(r.route("a", "b", 1.0).is_ok());
    assert!(r.route("b", "a", 1.0).is_err());
    assert!(r.view().links().is_empty());
}

#[test]
fn update_replaces_the_view() {
    let mut r = line3();
    r.set_allocated("s1", 1, 900.0);
    assert_eq!(r.port("s1", 1).unwrap().free(), 100.0);
    assert!(r.route("a", "b", 500.0).is_err());
    // A refresh brings the switches' truth back.
    r.update(line3().view());
    assert!(r.route("a", "b", 500.0).is_ok());
    assert_eq!(r.view(), line3().view());
    // Unknown ports are ignored.
    r.set_allocated("s9", 1, 1.0);
    r.set_allocated("s1", 9, 1.0);
    assert_eq!(r.view(), line3().view());
}

/// The breadth-first search by labels finds the very paths the search by copies found
/// (ties of width broken by the same keys), on random meshes whose ports have a few
/// levels of free bandwidth (so that ties are common), with switches and edges banned
/// as Yen's alternates ban them.
#[test]
fn the_search_by_labels_finds_the_paths_the_search_by_copies_found() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    let mut found = 0;
    for round in 0..40 {
        let n = rng.random_range(2..9usize);
        let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        // Up to 6 ports a switch; random links between free ports, parallel ones too.
        let ports = 6u16;
        let mut peer: BTreeMap<(usize, u16), (usize, u16)> = BTreeMap::new();
        for _ in 0..rng.random_range(1..3 * n) {
            let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
            let (pa, pb) = (rng.random_range(0..ports), rng.random_range(0..ports));
            if a == b || peer.contains_key(&(a, pa)) || peer.contains_key(&(b, pb)) {
                continue;
            }
            peer.insert((a, pa), (b, pb));
            peer.insert((b, pb), (a, pa));
        }
        let view = NetworkView {
            switches: (0..n)
                .map(|i| {
                    let ps = (0..ports)
                        .map(|p| PortState {
                            port: p,
                            capacity: 1000.0,
                            allocated: [0.0, 500.0, 900.0, 1000.0][rng.random_range(0..4)],
                            peer: peer.get(&(i, p)).map(|&(s, q)| (names[s].clone(), q)),
                        })
                        .collect();
                    (names[i].clone(), ps)
                })
                .collect(),
            hosts: Vec::new(),
        };
        let r = RouteObject::new(view).unwrap();
        for bw in [0.0, 100.0, 600.0, f64::NEG_INFINITY] {
            found += r.check_best_paths(bw, 2 + round % 3);
        }
    }
    assert!(
        found > 1_000,
        "only {found} paths found: the meshes are too sparse"
    );
}
