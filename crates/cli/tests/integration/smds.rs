//! `atmlab smds` as a user drives it: a five-server network up on loopback, a file sent
//! from a subscriber of one server to a subscriber of another with `smds send` and
//! `smds recv`, a group address, and `smds serve` counting a spoofed source.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Proc, atmlab, bytes};

fn wait_json(path: &Path, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && ok(&v)
        {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{} never satisfied",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `atmlab smds recv` and returns once it has attached.
fn recv(sni: &str, count: u32, out: &Path) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["smds", "recv", "--sni", sni, "--idle", "20", "--count"])
        .arg(count.to_string())
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("attached"), "{first}");
    std::thread::spawn(move || for _ in lines {});
    // The attach datagram is on its way; the callers send until what they sent arrives,
    // so a first PDU that overtakes it costs a retry, not a failure.
    Proc(child)
}

fn sni_of(net: &serde_json::Value, address: &str) -> String {
    for s in net["servers"].as_array().unwrap() {
        for i in s["interfaces"].as_array().unwrap() {
            if i["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == address)
            {
                return i["addr"].as_str().unwrap().to_string();
            }
        }
    }
    panic!("no SNI for {address}");
}

#[test]
fn a_file_crosses_the_five_server_network_and_a_group_reaches_its_members() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("smds");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/smds5.toml");
    let _up = Proc(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args(["smds", "net", "up", "--state"])
            .arg(&state)
            .arg(&topo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let net = wait_json(&state.join("net.json"), |_| true);
    // Routing needs a few hellos (200 ms each); wait for it by retrying the first send.
    let data = bytes(25_000, 9); // three PDUs: 9188 + 9188 + 6624 octets of Info
    let file = dir.path().join("data");
    std::fs::write(&file, &data).unwrap();
    let src = sni_of(&net, "I:15550101");
    let dst = sni_of(&net, "I:15550302");
    let mut received = Vec::new();
    for attempt in 0..20 {
        let out = dir.path().join(format!("out{attempt}"));
        let r = recv(&dst, 3, &out);
        let o = atmlab(
            &[
                "smds",
                "send",
                "--sni",
                &src,
                "--from",
                "I:15550101",
                "--to",
                "I:15550302",
                file.to_str().unwrap(),
            ],
            b"",
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut r = r;
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if r.0.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        received = std::fs::read(&out).unwrap_or_default();
        if received.len() == data.len() {
            break;
        }
    }
    assert_eq!(received, data);

    // The group G:15559999: members behind s1 (SNI 2), s3 and s4; sent from s2.
    let members = ["I:15550102", "I:15550301", "I:15550402"];
    let outs: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let out = dir.path().join(format!("group{i}"));
            (recv(&sni_of(&net, m), 1, &out), out)
        })
        .collect();
    // One group PDU at a time until every member has received one (a member whose
    // attach the server had not read yet missed the earlier ones).
    let mut waiting: Vec<_> = outs;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !waiting.is_empty() {
        assert!(Instant::now() < deadline, "a member did not receive");
        let o = atmlab(
            &[
                "smds",
                "send",
                "--sni",
                &sni_of(&net, "I:15550201"),
                "--from",
                "I:15550201",
                "--to",
                "G:15559999",
                "--count",
                "1",
                "--size",
                "100",
            ],
            b"",
        );
        assert!(o.status.success());
        let round = Instant::now() + Duration::from_millis(500);
        while Instant::now() < round && !waiting.is_empty() {
            let mut still = Vec::new();
            for (mut p, out) in waiting {
                if p.0.try_wait().unwrap().is_some() {
                    assert_eq!(std::fs::read(&out).unwrap().len(), 100);
                } else {
                    still.push((p, out));
                }
            }
            waiting = still;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn serve_counts_a_spoofed_source_and_refuses_a_bad_config() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "id = 1\n[[interface]]\nkind = \"sni\"\nbind = \"127.0.0.1:0\"\naddresses = [\"I:12x\"]\n",
    )
    .unwrap();
    let o = atmlab(&["smds", "serve", "--config", bad.to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("interface 1"),
        "{err}"
    );

    let cfg = dir.path().join("s.toml");
    std::fs::write(
        &cfg,
        r#"
id = 1
[[interface]]
kind = "sni"
bind = "127.0.0.1:0"
addresses = ["I:15550001"]
[[interface]]
kind = "sni"
bind = "127.0.0.1:0"
addresses = ["I:15550002"]
source_screen = { deny = ["I:15550001"] }
"#,
    )
    .unwrap();
    let status = dir.path().join("status.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["smds", "serve", "--config"])
        .arg(&cfg)
        .arg("--status")
        .arg(&status)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut addrs = Vec::new();
    while addrs.len() < 2 {
        let l = lines.next().unwrap().unwrap();
        if let Some(a) = l.split("udp ").nth(1) {
            addrs.push(a.trim().to_string());
        }
    }
    let _serve = Proc(child);
    // From SNI 1: one spoofed (claims SNI 2's address), one refused by SNI 2's source
    // screen. Both from one subscriber address: the SNI is held by the first address
    // that attaches to it (a second process on another port would be refused).
    let me = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let me_addr = me.local_addr().unwrap().to_string();
    drop(me);
    for from in ["I:15550002", "I:15550001"] {
        let o = atmlab(
            &[
                "smds",
                "send",
                "--bind",
                &me_addr,
                "--sni",
                &addrs[0],
                "--from",
                from,
                "--to",
                "I:15550002",
                "--count",
                "1",
                "--size",
                "10",
            ],
            b"",
        );
        assert!(o.status.success());
    }
    let v = wait_json(&status, |v| {
        v["counters"]["spoofed"] == 1 && v["counters"]["source_screened"] == 1
    });
    assert_eq!(v["counters"]["delivered"], 0);
    // A third send from another address is refused by SNI 1, and counted there.
    let o = atmlab(
        &[
            "smds",
            "send",
            "--sni",
            &addrs[0],
            "--from",
            "I:15550001",
            "--to",
            "I:15550002",
            "--count",
            "1",
            "--size",
            "10",
        ],
        b"",
    );
    assert!(o.status.success());
    let v = wait_json(&status, |v| v["refused_source"][0] == 2);
    assert_eq!(
        v["counters"]["source_screened"], 1,
        "the PDU was never read"
    );
}

/// `--json` on the SMDS commands that print results (issue 27): `serve` prints its
/// interfaces as one JSON object at start and its counters as one at the end; `send`
/// prints what it sent and `recv` what it received, one object each (recv's on stdout
/// when `--out` takes the Info).
#[test]
fn smds_serve_send_and_recv_print_json() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/smds-server.toml");
    // Held at once, so that a failed assertion below still stops the server.
    let mut serve = Proc(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args(["smds", "serve", "--json", "--config"])
            .arg(&cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(serve.0.stdout.take().unwrap()).lines();
    let start: serde_json::Value =
        serde_json::from_str(&lines.next().unwrap().unwrap()).expect("one JSON object");
    assert_eq!(start["server"], 1, "{start}");
    let sni: Vec<String> = start["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["kind"], "sni", "{i}");
            i["addr"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(sni.len(), 2, "{start}");

    let got = dir.path().join("got");
    let mut receiver = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["smds", "recv", "--json", "--count", "1", "--idle", "20"])
        .args(["--sni", &sni[1], "--out"])
        .arg(&got)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(receiver.stderr.take().unwrap()).lines();
    assert!(err.next().unwrap().unwrap().contains("attached"));
    std::thread::spawn(move || for _ in err {});
    // Send until the receiver has its PDU: the first may overtake its attach.
    let me = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let me_addr = me.local_addr().unwrap().to_string();
    drop(me);
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "recv never got its PDU");
        let o = atmlab(
            &[
                "smds",
                "send",
                "--json",
                "--bind",
                &me_addr,
                "--sni",
                &sni[0],
                "--from",
                "I:15550001",
                "--to",
                "I:15550002",
                "--count",
                "1",
                "--size",
                "100",
            ],
            b"",
        );
        assert!(o.status.success());
        let sent: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
        assert_eq!(sent["pdus"], 1, "{sent}");
        assert_eq!(sent["octets"], 100, "{sent}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = receiver.wait_with_output().unwrap();
    assert!(o.status.success());
    let recv: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(recv["pdus"], 1, "{recv}");
    assert_eq!(recv["octets"], 100, "{recv}");
    assert_eq!(recv["bad"], 0, "{recv}");
    assert_eq!(std::fs::read(&got).unwrap().len(), 100);

    // Stopped as Ctrl-C would: the counters, as one JSON object on one line.
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(serve.0.id().to_string())
        .status();
    let last = lines.map_while(Result::ok).last().expect("a last line");
    let end: serde_json::Value = serde_json::from_str(&last).expect("the counters as JSON");
    assert!(
        end.is_object() && !end.as_object().unwrap().is_empty(),
        "{end}"
    );
    assert!(serve.0.wait().unwrap().success());
}
