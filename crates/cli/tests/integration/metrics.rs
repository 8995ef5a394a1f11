//! `--metrics ADDR` on the commands that start networks (issue 25, item 1): `net up` and
//! `smds net up` serve `/metrics`, print the address and write it into their net.json;
//! what they serve holds their parts' families, and the values move with the network.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Proc;

/// Waits for `path` to hold JSON with a "metrics" URL; returns the JSON.
fn wait_net(path: &Path) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && v["metrics"].is_string()
        {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{} never named its metrics",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The body of GET `url` (an `http://ADDR/metrics` URL).
fn get(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (addr, path) = rest.split_once('/').expect("a path");
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    body.to_string()
}

/// The sum of every sample of `name` whose labels contain `having`.
fn sum(body: &str, name: &str, having: &str) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(having))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}

#[test]
fn smds_net_up_serves_metrics_whose_routes_converge() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("smds");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/smds5.toml");
    let _up = Proc(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args(["smds", "net", "up", "--metrics", "127.0.0.1:0", "--state"])
            .arg(&state)
            .arg(&topo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let net = wait_net(&state.join("net.json"));
    let url = net["metrics"].as_str().unwrap();
    let body = get(url);
    for f in [
        "# TYPE atmlab_smds_pdus_forwarded counter",
        "# TYPE atmlab_smds_pdus_discarded counter",
        "# TYPE atmlab_smds_pdus_screened counter",
        "# TYPE atmlab_smds_group_copies counter",
        "# TYPE atmlab_smds_cmp_congested gauge",
        "# TYPE atmlab_smds_cmp_messages counter",
        "# TYPE atmlab_smds_route_recomputations counter",
        "# TYPE atmlab_smds_route_recomputation_seconds histogram",
    ] {
        assert!(body.contains(f), "{f} missing:\n{body}");
    }
    // Every server of the file, each discard cause labelled.
    for s in net["servers"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        assert!(
            body.contains(&format!(
                "atmlab_smds_pdus_discarded_total{{server=\"{name}\",cause=\"no_route\"}}"
            )),
            "{name}:\n{body}"
        );
    }
    // The link-state routing runs as the servers meet: every server recomputes its
    // routes, and each learns the others' addresses.
    let deadline = Instant::now() + Duration::from_secs(30);
    let servers = net["servers"].as_array().unwrap().len() as f64;
    loop {
        let body = get(url);
        let runs: Vec<f64> = net["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let name = s["name"].as_str().unwrap();
                sum(
                    &body,
                    "atmlab_smds_route_recomputations_total",
                    &format!("server=\"{name}\""),
                )
            })
            .collect();
        if runs.iter().all(|r| *r > 0.0) {
            assert_eq!(runs.len() as f64, servers);
            // Each recomputation was timed (its step took some time), in the same
            // scrape: as many timed as counted, unless one ran before the loop began.
            for (s, r) in net["servers"].as_array().unwrap().iter().zip(&runs) {
                let name = s["name"].as_str().unwrap();
                let l = format!("server=\"{name}\"");
                let timed = sum(&body, "atmlab_smds_route_recomputation_seconds_count", &l);
                let took = sum(&body, "atmlab_smds_route_recomputation_seconds_sum", &l);
                assert!(
                    timed >= 1.0 && timed <= *r && took > 0.0,
                    "{name}: {timed} {r} {took}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no route recomputation: {runs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn net_up_serves_metrics_of_every_switch_and_the_name_service() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("net");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml");
    let _up = Proc(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args([
                "net",
                "up",
                "--insecure",
                "--metrics",
                "127.0.0.1:0",
                "--state",
            ])
            .arg(&state)
            .arg(&topo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let net = wait_net(&state.join("net.json"));
    let body = get(net["metrics"].as_str().unwrap());
    for sw in ["s1", "s2", "s3"] {
        for port in ["0", "1"] {
            assert!(
                body.contains(&format!(
                    "atmlab_switch_cells_in_total{{switch=\"{sw}\",port=\"{port}\"}} 0"
                )),
                "{sw}:{port}\n{body}"
            );
        }
        assert!(
            body.contains(&format!(
                "atmlab_tls_refusals_total{{server=\"switch/{sw} grpc\",kind=\"handshake_timeout\"}} 0"
            )),
            "{body}"
        );
    }
    // Three switches and two hosts registered, each renewing its lease.
    assert!(sum(&body, "atmlab_names_entries", "") >= 5.0, "{body}");
    assert!(
        sum(&body, "atmlab_names_registrations_total", "") >= 5.0,
        "{body}"
    );
}
