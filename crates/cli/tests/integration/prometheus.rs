//! A real Prometheus scrapes a running network (issue 25, acceptance 1): `atmlab up
//! --metrics`, calls from `atmlab callgen`, frames from `atmlab host send` to `host
//! recv` through a connection, and Debian's `prometheus` (installed by scripts/test.sh)
//! scraping every second; its query API must show the setups callgen reports and the
//! cells host recv counted.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{atmlab, bytes, serve_on_free_port};

/// Kills and reaps the process when dropped, so a failed assertion leaves nothing.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// GET `path` from `addr`: the body, or `None` when the server is not answering yet.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    match crate::common::http(addr, "GET", path, None)? {
        (200, body) => Some(body),
        _ => None,
    }
}

/// The value of an instant query's single series, if it has one.
fn query(prom: SocketAddr, q: &str) -> Option<f64> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = http_get(prom, &format!("/api/v1/query?query={enc}"))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let r = v["data"]["result"].as_array()?;
    if r.len() != 1 {
        return None;
    }
    r[0]["value"][1].as_str()?.parse().ok()
}

/// Polls `q` until it equals `want`, or fails at the deadline naming what it saw.
fn wait_for_value(prom: SocketAddr, q: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = None;
    while Instant::now() < deadline {
        last = query(prom, q);
        if last == Some(want) {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("Prometheus: {q} = {last:?}, expected {want}");
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): runs Debian's prometheus against atmlab up"]
fn prometheus_scrapes_setups_and_cells_that_match_callgen_and_host_recv() {
    let prometheus = std::env::var("ATMLAB_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
    let version = Command::new(&prometheus).arg("--version").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "no `{prometheus}` binary: scripts/test.sh installs Debian's prometheus package \
         (apt-get install prometheus) before the heavy tier"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _up = Killed(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args(["up", "--insecure", "--metrics", "127.0.0.1:0", "--data"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let net: serde_json::Value = loop {
        if let Ok(t) = std::fs::read_to_string(data.join("net.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && v["cm"].is_string()
            && v["metrics"].is_string()
        {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "atmlab up never wrote its addresses"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let cm = net["cm"].as_str().unwrap().trim_start_matches("http://");
    let metrics_url = net["metrics"].as_str().unwrap();
    let target = metrics_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();

    // Prometheus, scraping every second, from a scratch directory.
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: atmlab\n    metrics_path: /metrics\n    \
             static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let (_prom, prom) =
        serve_on_free_port("prometheus", "/-/ready", Duration::from_secs(60), |port| {
            // Its own storage and log per port tried.
            let tsdb = dir.path().join(format!("tsdb-{port}"));
            let log =
                std::fs::File::create(dir.path().join(format!("prometheus-{port}.log"))).unwrap();
            Command::new(&prometheus)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", tsdb.display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap()
        });

    // A connection a -> b, and frames through it.
    let conn: serde_json::Value = serde_json::from_str(&ok(atmlab(
        &[
            "cm",
            "connect",
            "--insecure",
            "--json",
            "--cm",
            cm,
            "--from",
            "a",
            "--to",
            "b",
            "--pcr",
            "50000",
        ],
        b"",
    )))
    .unwrap();
    let src_vc = conn["source_vc"].as_str().unwrap().to_string();
    let dst_vc = conn["leaves"][0]["vc"].as_str().unwrap().to_string();
    let host = |name: &str| {
        net["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("host {name} in {net}"))
            .clone()
    };
    let (a, b) = (host("a"), host("b"));
    let s = |v: &serde_json::Value| v.as_str().unwrap().to_string();
    let n = |v: &serde_json::Value| v.as_u64().unwrap().to_string();
    let payload = bytes(200_000, 3);
    let file = dir.path().join("payload.bin");
    std::fs::write(&file, &payload).unwrap();
    let frames = payload.len().div_ceil(4000);
    let recv = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["host", "recv", "--insecure", "--json", "--idle", "20 s"])
        .args(["--switch", &s(&b["attach"]), "--vc", &dst_vc])
        .args(["--control", &s(&b["control"]), "--port", &n(&b["port"])])
        .args(["--frames", &frames.to_string(), "--out"])
        .arg(dir.path().join("received.bin"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The receiver is bound once b's port names it as its peer.
    let b_switch = s(&b["switch"]);
    let b_grpc = net["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == b_switch.as_str())
        .map(|x| s(&x["grpc"]))
        .unwrap();
    let b_grpc = b_grpc.trim_start_matches("http://").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d: serde_json::Value = serde_json::from_str(&ok(atmlab(
            &[
                "switch",
                "describe",
                "--json",
                "--insecure",
                "--addr",
                &b_grpc,
            ],
            b"",
        )))
        .unwrap();
        let port = b["port"].as_u64().unwrap() as usize;
        if !d["ports"][port]["peer"]
            .as_str()
            .unwrap_or("learn")
            .contains("learn")
        {
            break;
        }
        assert!(Instant::now() < deadline, "the receiver never attached");
        std::thread::sleep(Duration::from_millis(50));
    }
    ok(atmlab(
        &[
            "host",
            "send",
            "--insecure",
            "--switch",
            &s(&a["attach"]),
            "--vc",
            &src_vc,
            "--rate",
            "20 Mb/s",
            "--frame-size",
            "4000",
            "--control",
            &s(&a["control"]),
            "--port",
            &n(&a["port"]),
            file.to_str().unwrap(),
        ],
        b"",
    ));
    let got = recv.wait_with_output().unwrap();
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let got: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&got.stdout).trim()).unwrap();
    assert_eq!(got["frames"].as_u64(), Some(frames as u64), "{got}");
    let cells = got["cells"].as_u64().unwrap();

    // A fixed load of calls (a seeded Poisson stream).
    let report: serde_json::Value = serde_json::from_str(
        ok(atmlab(
            &[
                "callgen",
                "--insecure",
                "--cm",
                cm,
                "--rate",
                "100",
                "--seconds",
                "1",
                "--seed",
                "7",
                "--json",
            ],
            b"",
        ))
        .trim(),
    )
    .unwrap();
    let established = report["established"].as_u64().unwrap();
    assert!(established > 50, "{report}");

    // What Prometheus stored: the manager's setups (callgen's and the connection
    // above), and the cells b's switch sent out of b's port.
    wait_for_value(
        prom,
        "atmlab_cm_setups_total{manager=\"xbind\"}",
        (established + 1) as f64,
    );
    wait_for_value(
        prom,
        &format!(
            "atmlab_switch_cells_out_total{{switch=\"{b_switch}\",port=\"{}\"}}",
            n(&b["port"])
        ),
        cells as f64,
    );
    // The setup latency histogram counted the same setups.
    wait_for_value(
        prom,
        "atmlab_cm_setup_duration_seconds_count{manager=\"xbind\"}",
        (established + 1) as f64,
    );
    assert!(dir.path().join(format!("tsdb-{}", prom.port())).exists());
}
