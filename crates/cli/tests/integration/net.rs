//! The live network as a user drives it from the command line: `atmlab net up` a
//! topology, commit a path with `atmlab switch commit` on each switch, receive with
//! `atmlab host recv`, send a file with `atmlab host send`, compare, release.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{atmlab, bytes};

struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(path: &Path) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(v) = serde_json::from_str(&text)
        {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "net up did not write {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn net_up_then_a_file_crosses_three_switches_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("net");
    let certs = dir.path().join("certs");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml");
    let certs_s = certs.to_str().unwrap();
    let up = Up(Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["net", "up", "--certs", certs_s, "--state"])
        .arg(&state)
        .arg(&topo)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let net = wait_for(&state.join("net.json"));
    let grpc = |i: usize| {
        net["switches"][i]["grpc"]
            .as_str()
            .unwrap()
            .trim_start_matches("https://")
            .to_string()
    };
    // The path a -> s1 (0:0/100 -> 1:0/40) -> s2 (0:0/40 -> 1:0/41) -> s3 (0:0/41 -> 1:0/200) -> b.
    let hops = [
        ("0:0/100", "1:0/40"),
        ("0:0/40", "1:0/41"),
        ("0:0/41", "1:0/200"),
    ];
    let mut conns = Vec::new();
    for (i, (inp, out)) in hops.iter().enumerate() {
        let id = ok(atmlab(
            &[
                "switch",
                "commit",
                "--certs",
                certs_s,
                "--addr",
                &grpc(i),
                "--in",
                inp,
                "--out",
                out,
                "--pcr",
                "50000",
            ],
            b"",
        ));
        conns.push(id.trim().to_string());
    }
    let a = net["hosts"][0]["attach"].as_str().unwrap().to_string();
    let b = net["hosts"][1]["attach"].as_str().unwrap().to_string();
    // The receiver attaches through s3's control path (the AttachHost RPC).
    let b_control = net["hosts"][1]["control"].as_str().unwrap().to_string();
    assert_eq!(b_control, grpc(2));
    let b_port = net["hosts"][1]["port"].as_u64().unwrap().to_string();
    let b_name = net["hosts"][1]["name"].as_str().unwrap().to_string();
    // So does the sender: host ports take no host by a first datagram (issue 24). Each
    // host binds its own port with its own certificate (`net up` issued them).
    let a_control = net["hosts"][0]["control"].as_str().unwrap().to_string();
    let a_port = net["hosts"][0]["port"].as_u64().unwrap().to_string();
    let a_name = net["hosts"][0]["name"].as_str().unwrap().to_string();
    let received = dir.path().join("received.bin");
    let data = bytes(300_000, 9);
    let sent = dir.path().join("sent.bin");
    std::fs::write(&sent, &data).unwrap();
    let frames = data.len().div_ceil(9180);
    let recv = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args([
            "host", "recv", "--switch", &b, "--vc", "0/200", "--idle", "20 s", "--frames",
        ])
        .arg(frames.to_string())
        .args([
            "--control",
            &b_control,
            "--port",
            &b_port,
            "--as",
            &b_name,
            "--certs",
            certs_s,
        ])
        .arg("--out")
        .arg(&received)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until s3's host port has learned the receiver.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d: serde_json::Value = serde_json::from_str(&ok(atmlab(
            &[
                "switch",
                "describe",
                "--json",
                "--certs",
                certs_s,
                "--addr",
                &grpc(2),
            ],
            b"",
        )))
        .unwrap();
        if !d["ports"][1]["peer"].as_str().unwrap().contains("learn") {
            break;
        }
        assert!(Instant::now() < deadline, "the receiver never attached");
        std::thread::sleep(Duration::from_millis(50));
    }
    ok(atmlab(
        &[
            "host",
            "send",
            "--switch",
            &a,
            "--vc",
            "0/100",
            "--rate",
            "50 Mb/s",
            "--control",
            &a_control,
            "--port",
            &a_port,
            "--as",
            &a_name,
            "--certs",
            certs_s,
            sent.to_str().unwrap(),
        ],
        b"",
    ));
    let out = recv.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&received).unwrap(),
        data,
        "the file arrived byte-identical"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 reassembly errors"));
    // The receive rate, when there is one, is never above the receiver's link (155.52
    // Mb/s by default; the sender paced 50 Mb/s).
    let rate = err
        .lines()
        .find(|l| l.starts_with("rate:"))
        .expect("a rate line");
    if let Some(mbps) = rate
        .split(" Mb/s of AAL5")
        .next()
        .filter(|_| !rate.contains("not measured"))
    {
        let mbps: f64 = mbps.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(mbps <= 155.52, "{rate}");
    }
    // Each switch counted the same cells in and out (the file arrived whole, so none
    // was lost or discarded on the way), and lists the hop by its id.
    let mut carried = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        let stats: serde_json::Value = serde_json::from_str(&ok(atmlab(
            &[
                "switch",
                "stats",
                "--json",
                "--certs",
                certs_s,
                "--addr",
                &grpc(i),
            ],
            b"",
        )))
        .unwrap();
        let sum = |k: &str| -> u64 {
            stats["ports"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[k].as_u64().unwrap())
                .sum()
        };
        assert_eq!(sum("cells_in"), sum("cells_out"), "switch {i}: {stats}");
        carried.push(sum("cells_out"));
        let listed: serde_json::Value = serde_json::from_str(&ok(atmlab(
            &[
                "switch",
                "connections",
                "--json",
                "--certs",
                certs_s,
                "--addr",
                &grpc(i),
            ],
            b"",
        )))
        .unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1, "switch {i}: {listed}");
        assert_eq!(
            listed[0]["id"].to_string(),
            c.trim(),
            "switch {i}: {listed}"
        );
    }
    assert!(
        carried[0] > 0 && carried.iter().all(|&n| n == carried[0]),
        "{carried:?}"
    );
    for (i, c) in conns.iter().enumerate() {
        ok(atmlab(
            &[
                "switch",
                "release",
                "--certs",
                certs_s,
                "--addr",
                &grpc(i),
                c,
            ],
            b"",
        ));
        let listed = ok(atmlab(
            &[
                "switch",
                "connections",
                "--certs",
                certs_s,
                "--addr",
                &grpc(i),
            ],
            b"",
        ));
        assert!(listed.trim().is_empty(), "switch {i} still holds {listed}");
    }
    // Everything registered in the name service.
    let names_addr = net["names"]
        .as_str()
        .unwrap()
        .trim_start_matches("https://")
        .to_string();
    let listed = ok(atmlab(
        &["names", "list", "--certs", certs_s, "--addr", &names_addr],
        b"",
    ));
    for n in ["switch/s1", "switch/s2", "switch/s3", "host/a", "host/b"] {
        assert!(listed.contains(n), "{n} missing from\n{listed}");
    }
    drop(up);
}
