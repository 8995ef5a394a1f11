//! The metrics of a running network (issue 25, item 1): `/metrics` over HTTP on the line
//! of three switches with a manager, parsed line by line as the exposition format
//! requires; the families the issue names are there, and they move with the network
//! (a call set up, frames through it, cells counted at every hop).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atmlab_core::units::BitRate;
use atmlab_fabric::live::host::HostPort;
use atmlab_lab::metrics::{self, Metrics, cm::CmSource, http::HttpServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::lab;

/// GET `http://addr/metrics`: (content type, body).
async fn scrape(addr: std::net::SocketAddr) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("chunked"),
        "a sized body: {head}"
    );
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    (ctype, body.to_string())
}

/// One parsed exposition: family name -> TYPE; sample (name with sorted labels) -> value.
#[derive(Debug, Default)]
struct Exposition {
    types: BTreeMap<String, String>,
    samples: BTreeMap<String, f64>,
}

impl Exposition {
    /// Parses OpenMetrics text strictly enough to catch a malformed line: comments are
    /// HELP, TYPE, UNIT or the final EOF; every sample is `name{k="v",...} value` of a
    /// family declared before it, with a number for value.
    fn parse(text: &str) -> Exposition {
        let mut e = Exposition::default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.last(), Some(&"# EOF"), "ends with # EOF");
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        };
        for l in &lines[..lines.len() - 1] {
            if let Some(c) = l.strip_prefix("# ") {
                let mut it = c.splitn(3, ' ');
                let (kw, name) = (it.next().unwrap(), it.next().unwrap_or(""));
                assert!(name_ok(name), "bad family name in {l:?}");
                match kw {
                    "TYPE" => {
                        let t = it.next().unwrap_or("");
                        assert!(
                            ["counter", "gauge", "histogram", "info", "unknown"].contains(&t),
                            "{l:?}"
                        );
                        assert!(
                            e.types.insert(name.to_string(), t.to_string()).is_none(),
                            "family {name} declared twice"
                        );
                    }
                    "HELP" | "UNIT" => {}
                    _ => panic!("unexpected comment {l:?}"),
                }
                continue;
            }
            let (series, value) = l.rsplit_once(' ').expect("name and value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {l:?}")),
            };
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => {
                    let inner = rest.strip_suffix('}').expect("labels close");
                    let mut pairs: Vec<String> = Vec::new();
                    if !inner.is_empty() {
                        for p in inner.split("\",") {
                            let (k, v) = p.split_once("=\"").expect("k=\"v\"");
                            assert!(name_ok(k), "bad label name in {l:?}");
                            pairs.push(format!("{k}={}", v.trim_end_matches('"')));
                        }
                    }
                    pairs.sort();
                    (n, pairs.join(","))
                }
                None => (series, String::new()),
            };
            let family = e
                .types
                .keys()
                .filter(|f| name.starts_with(f.as_str()))
                .max_by_key(|f| f.len())
                .unwrap_or_else(|| panic!("{name} has no TYPE before it"));
            let suffix = &name[family.len()..];
            let kind = &e.types[family];
            let allowed: &[&str] = match kind.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                _ => &[""],
            };
            assert!(
                allowed.contains(&suffix),
                "{name}: suffix {suffix:?} for a {kind}"
            );
            e.samples.insert(format!("{name}{{{labels}}}"), value);
        }
        e
    }

    fn get(&self, name: &str, labels: &str) -> f64 {
        *self
            .samples
            .get(&format!("{name}{{{labels}}}"))
            .unwrap_or_else(|| panic!("no sample {name}{{{labels}}}"))
    }

    fn families(&self) -> BTreeSet<&str> {
        self.types.keys().map(String::as_str).collect()
    }
}

async fn read(addr: std::net::SocketAddr) -> Exposition {
    let (ctype, body) = scrape(addr).await;
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    Exposition::parse(&body)
}

#[tokio::test]
async fn metrics_of_a_running_network_parse_and_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab("line3.toml", dir.path()).await;
    let m: Metrics = metrics::network(&lab.net);
    let cm = lab
        .manager(atmlab_control::cm::core::CmConfig::new(
            atmlab_control::cm::core::CmKind::Xbind,
        ))
        .await
        .unwrap();
    m.add(CmSource::new("xbind", cm.clone()));
    let server = HttpServer::metrics("127.0.0.1:0".parse().unwrap(), m)
        .await
        .unwrap();

    let before = read(server.addr).await;
    let fams = before.families();
    for f in [
        "atmlab_switch_cells_in",
        "atmlab_switch_cells_out",
        "atmlab_switch_hec_corrected",
        "atmlab_switch_hec_discarded",
        "atmlab_switch_unknown_vc",
        "atmlab_switch_clp_discards",
        "atmlab_switch_buffer_discards",
        "atmlab_switch_policing_actions",
        "atmlab_switch_queue_cells",
        "atmlab_switch_connections",
        "atmlab_switch_port_connections",
        "atmlab_switch_bandwidth_reserved_bits_per_second",
        "atmlab_switch_bandwidth_capacity_bits_per_second",
        "atmlab_cm_setups",
        "atmlab_cm_releases",
        "atmlab_cm_blocked",
        "atmlab_cm_failed",
        "atmlab_cm_cache_hits",
        "atmlab_cm_cache_misses",
        "atmlab_cm_threshold",
        "atmlab_cm_arrival_rate_per_second",
        "atmlab_cm_messages_per_call",
        "atmlab_cm_commands_per_call",
        "atmlab_cm_journal_writes",
        "atmlab_cm_recovery_actions",
        "atmlab_names_entries",
        "atmlab_names_registrations",
        "atmlab_names_renewals",
        "atmlab_names_expiries",
        "atmlab_tls_refusals",
        "atmlab_tls_handshake_timeouts",
    ] {
        assert!(fams.contains(f), "family {f} missing: {fams:?}");
    }
    assert_eq!(before.types["atmlab_switch_cells_in"], "counter");
    assert_eq!(before.types["atmlab_switch_queue_cells"], "gauge");
    // Every switch and port is there, with its capacity (at most the 155.52 Mb/s link).
    for sw in ["s1", "s2", "s3"] {
        for port in ["0", "1"] {
            let l = format!("port={port},switch={sw}");
            assert_eq!(before.get("atmlab_switch_cells_out_total", &l), 0.0);
            let cap = before.get("atmlab_switch_bandwidth_capacity_bits_per_second", &l);
            assert!(cap > 1e8 && cap <= 155.52e6 + 1.0, "{cap}");
        }
        assert_eq!(
            before.get("atmlab_switch_connections", &format!("switch={sw}")),
            0.0
        );
    }
    assert_eq!(before.get("atmlab_cm_setups_total", "manager=xbind"), 0.0);
    // Three switches registered themselves, the hosts were registered for them.
    assert!(before.get("atmlab_names_registrations_total", "service=names") >= 5.0);
    assert!(before.get("atmlab_names_entries", "service=names") >= 5.0);
    assert_eq!(
        before.get(
            "atmlab_tls_refusals_total",
            "kind=handshake_timeout,server=switch/s1 grpc"
        ),
        0.0
    );

    // A call a -> b, and frames through it.
    let call = atmlab_lab::launch::call_a_to_b(&cm, 100_000.0, "metrics")
        .await
        .unwrap();
    let port_addr = |sw: usize, port: u16| {
        lab.net.switches[sw]
            .ports
            .iter()
            .find(|(p, _)| p.0 == port)
            .unwrap()
            .1
    };
    let any = "127.0.0.1:0".parse().unwrap();
    let mut b = HostPort::attach(any, port_addr(2, 1), BitRate(155.52e6))
        .await
        .unwrap();
    let mut a = HostPort::attach(any, port_addr(0, 0), BitRate(155.52e6))
        .await
        .unwrap();
    lab.net.attach_host("b", b.local_addr().unwrap()).unwrap();
    lab.net.attach_host("a", a.local_addr().unwrap()).unwrap();
    let frames = 20;
    let mut cells = 0;
    for i in 0..frames {
        cells += a
            .send_frame(call.view.source_vc, &vec![i as u8; 1000 + 37 * i])
            .await
            .unwrap();
    }
    let mut got = 0;
    while got < frames {
        let r = b
            .recv_frame(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("every frame arrives on loopback");
        assert_eq!(r.vc, call.view.destination_vc);
        got += 1;
    }

    let after = read(server.addr).await;
    assert_eq!(after.get("atmlab_cm_setups_total", "manager=xbind"), 1.0);
    assert_eq!(after.get("atmlab_cm_active_calls", "manager=xbind"), 1.0);
    assert!(after.get("atmlab_cm_messages_total", "manager=xbind") > 0.0);
    // The cells sent leave every switch on its port toward b, and enter s1 at a's port.
    let cells = cells as f64;
    assert_eq!(
        after.get("atmlab_switch_cells_in_total", "port=0,switch=s1"),
        cells
    );
    for sw in ["s1", "s2", "s3"] {
        assert_eq!(
            after.get(
                "atmlab_switch_cells_out_total",
                &format!("port=1,switch={sw}")
            ),
            cells,
            "{sw}"
        );
        assert_eq!(
            after.get("atmlab_switch_connections", &format!("switch={sw}")),
            1.0
        );
        // The call's 100,000 cells/s, in bits/s, reserved on its output port.
        assert_eq!(
            after.get(
                "atmlab_switch_bandwidth_reserved_bits_per_second",
                &format!("port=1,switch={sw}")
            ),
            100_000.0 * 424.0
        );
    }
    cm.shutdown().await;
    server.stop().await;
    lab.down().await;
}

#[test]
fn latency_histogram_buckets_count_each_observation_once() {
    let h = metrics::LatencyHistogram::default();
    h.observe(Duration::from_micros(30)); // the first bucket (<= 50 us)
    h.observe(Duration::from_millis(3)); // <= 3.2 ms
    h.observe(Duration::from_secs(10)); // past the last bound: +Inf only
    let (sum, count, buckets) = h.snapshot();
    assert_eq!(count, 3);
    assert!((sum - 10.00303).abs() < 1e-9, "{sum}");
    assert_eq!(buckets.last(), Some(&(f64::MAX, 1)));
    assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 3);
    assert_eq!(buckets[0], (50e-6, 1));
    let i = buckets.iter().position(|b| b.0 >= 3e-3).unwrap();
    assert_eq!(buckets[i].1, 1);
    assert!((buckets[i].0 - 3.2e-3).abs() < 1e-12);
}
