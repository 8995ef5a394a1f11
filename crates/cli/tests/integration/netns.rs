//! The live system across hosts (issue 26, item 1): `scripts/netns.sh` builds an
//! internetwork of network namespaces (a management LAN and point-to-point fibres, in the
//! shape of topologies/line3.toml), and each part runs in its own namespace and process,
//! as on machines of their own: the name service and a connection manager in `ctl`, each
//! switch server in its own (registered by `switch serve --names` with its certificate),
//! hosts `a` and `b` in theirs. Calls from `callgen` and AAL5 frames from `a` to `b`
//! cross it. Then switch `s2`'s machine fails (every process in its namespace killed with
//! SIGKILL) and comes back with its journal: the connection set up before still carries
//! frames end to end, `callgen` sets up calls again, and the audit finds nothing leaked,
//! as on loopback.
//!
//! Needs root (network namespaces): CI runs the test command as root. Without it the
//! test fails saying so; it never passes without having run.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::Proc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The namespaces of one run: made on creation, every process in them killed and the
/// namespaces taken away on drop.
struct Internetwork {
    prefix: String,
}

impl Internetwork {
    fn up() -> Internetwork {
        let script = root().join("scripts/netns.sh");
        let check = Command::new("bash")
            .arg(&script)
            .arg("check")
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "network namespaces cannot be made here (this test needs root: run it through \
             `bash scripts/test.sh` as root, as CI does): {}",
            String::from_utf8_lossy(&check.stderr)
        );
        // Short (interface names are at most 15 bytes) and this run's own.
        let prefix = format!("at{}", std::process::id() % 100_000);
        let o = Command::new("bash")
            .arg(&script)
            .args(["up", &prefix])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "scripts/netns.sh up failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Internetwork { prefix }
    }

    fn ns(&self, machine: &str) -> String {
        format!("{}-{machine}", self.prefix)
    }

    /// `atmlab ARGS` on `machine`.
    fn atmlab(&self, machine: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(machine)])
            .arg(env!("CARGO_BIN_EXE_atmlab"))
            .args(args)
            .env_remove("ATMLAB_DATA")
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null());
        c
    }

    /// Runs `atmlab ARGS` on `machine` to its end.
    fn run(&self, machine: &str, args: &[&str]) -> Output {
        self.atmlab(machine, args).output().unwrap()
    }

    /// Kills every process on `machine` (SIGKILL): the machine fails.
    fn fail(&self, machine: &str) {
        let pids = Command::new("ip")
            .args(["netns", "pids", &self.ns(machine)])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
}

impl Drop for Internetwork {
    fn drop(&mut self) {
        for m in ["ctl", "s1", "s2", "s3", "a", "b"] {
            self.fail(m);
        }
        let _ = Command::new("bash")
            .arg(root().join("scripts/netns.sh"))
            .args(["down", &self.prefix])
            .status();
    }
}

/// Starts `c` and waits (against a deadline) for a line of its standard output that
/// contains `ready`; returns the process and that line.
fn start(mut c: Command, ready: &str) -> (Proc, String) {
    c.stdout(Stdio::piped()).stderr(Stdio::inherit());
    // Held at once: a server that never gets ready is still stopped.
    let mut server = Proc(c.spawn().unwrap());
    let out = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let ready = ready.to_string();
    std::thread::spawn(move || {
        let mut sent = false;
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if !sent && l.contains(&ready) {
                let _ = tx.send(l);
                sent = true;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server never said it was ready");
    (server, line)
}

fn ok(o: &Output, what: &str) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{what} failed: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Switch `n`'s file: its control plane on the LAN, its ports on the fibres.
fn switch_file(dir: &Path, n: u8) -> PathBuf {
    // (udp, peer or host) per port, from scripts/netns.sh's addresses.
    let (p0, p1) = match n {
        1 => (
            "udp = \"10.89.1.2:7000\"\nhost_name = \"a\"".to_string(),
            "udp = \"10.89.2.1:7000\"\npeer = \"10.89.2.2:7000\"".to_string(),
        ),
        2 => (
            "udp = \"10.89.2.2:7000\"\npeer = \"10.89.2.1:7000\"".to_string(),
            "udp = \"10.89.3.1:7000\"\npeer = \"10.89.3.2:7000\"".to_string(),
        ),
        _ => (
            "udp = \"10.89.3.2:7000\"\npeer = \"10.89.3.1:7000\"".to_string(),
            "udp = \"10.89.4.1:7000\"\nhost_name = \"b\"".to_string(),
        ),
    };
    let text = format!(
        "name = \"s{n}\"\ngrpc = \"10.89.0.1{n}:50051\"\njournal = \"{}\"\n\
         [[ports]]\nid = 0\n{p0}\n[[ports]]\nid = 1\n{p1}\n",
        dir.join(format!("s{n}.table")).display()
    );
    let f = dir.join(format!("s{n}.toml"));
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): the live system across network namespaces (root)"]
fn the_network_runs_across_namespaces_and_recovers_from_a_failed_host() {
    let _cpu = crate::common::measuring_alone();
    let net = Internetwork::up();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let certs = d.join("certs");
    let certs = certs.to_str().unwrap();
    // One lab CA; every machine reads its own certificate from the shared directory (on
    // real machines each would hold only its own).
    let o = net.run(
        "ctl",
        &[
            "certs",
            "init",
            "--dir",
            certs,
            "switch:s1",
            "switch:s2",
            "switch:s3",
            "names:names",
            "host:a",
            "host:b",
            "cm:cm-xbind",
        ],
    );
    ok(&o, "certs init");
    let names_url = "https://10.89.0.1:50050";
    let (_names, _) = start(
        net.atmlab(
            "ctl",
            &[
                "names",
                "serve",
                "--listen",
                "10.89.0.1:50050",
                "--certs",
                certs,
            ],
        ),
        "name service:",
    );
    // The switches, each on its machine, registering themselves and their hosts.
    let serve_switch = |n: u8| {
        let file = switch_file(d, n);
        start(
            net.atmlab(
                &format!("s{n}"),
                &[
                    "switch",
                    "serve",
                    "--config",
                    file.to_str().unwrap(),
                    "--certs",
                    certs,
                    "--names",
                    names_url,
                ],
            ),
            "registered in",
        )
        .0
    };
    let _s1 = serve_switch(1);
    let s2 = serve_switch(2);
    let _s3 = serve_switch(3);
    // The manager finds them through the name service, across the LAN.
    let journal = d.join("cm.sqlite");
    let (_cm, line) = start(
        net.atmlab(
            "ctl",
            &[
                "cm",
                "serve",
                "--names",
                names_url,
                "--listen",
                "10.89.0.1:50060",
                "--journal",
                journal.to_str().unwrap(),
                "--certs",
                certs,
            ],
        ),
        "connection manager:",
    );
    assert!(line.contains("10.89.0.1:50060"), "{line}");
    let cm = "10.89.0.1:50060";
    let callgen = |what: &str| {
        let o = net.run(
            "ctl",
            &[
                "callgen",
                "--cm",
                cm,
                "--rate",
                "200",
                "--seconds",
                "2",
                "--pair",
                "a:b",
                "--json",
                "--certs",
                certs,
            ],
        );
        let out = ok(&o, what);
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap())
            .unwrap_or_else(|e| panic!("{what}: {e}: {out}"));
        assert!(v["established"].as_u64().unwrap() > 100, "{what}: {v}");
        assert_eq!(v["failed"], 0, "{what}: {v}");
    };
    callgen("callgen across the namespaces");

    // A connection from a to b, and frames over it: a's cells cross three switches on
    // three machines, over the fibres only.
    let o = net.run(
        "ctl",
        &[
            "cm", "connect", "--cm", cm, "--from", "a", "--to", "b", "--pcr", "50000", "--json",
            "--certs", certs,
        ],
    );
    let conn: serde_json::Value = serde_json::from_str(&ok(&o, "cm connect")).unwrap();
    let (src_vc, dst_vc) = (
        conn["source_vc"].as_str().unwrap().to_string(),
        conn["leaves"][0]["vc"].as_str().unwrap().to_string(),
    );
    let file = d.join("frames.bin");
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let frames = |round: &str| {
        let copy = d.join(format!("copy-{round}.bin"));
        let mut recv = net.atmlab(
            "b",
            &[
                "host",
                "recv",
                "--switch",
                "10.89.4.1:7000",
                "--bind",
                "10.89.4.2:0",
                "--vc",
                &dst_vc,
                "--control",
                "https://10.89.0.13:50051",
                "--port",
                "1",
                "--as",
                "b",
                "--frames",
                "6",
                "--idle",
                "20 s",
                "--certs",
                certs,
                "--out",
                copy.to_str().unwrap(),
            ],
        );
        recv.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut recv = recv.spawn().unwrap();
        let mut lines = BufReader::new(recv.stderr.take().unwrap()).lines();
        assert!(
            lines
                .by_ref()
                .map_while(Result::ok)
                .any(|l| l.contains("attached")),
            "host recv never attached"
        );
        std::thread::spawn(move || for _ in lines {});
        let o = net.run(
            "a",
            &[
                "host",
                "send",
                "--switch",
                "10.89.1.2:7000",
                "--bind",
                "10.89.1.1:0",
                "--vc",
                &src_vc,
                "--control",
                "https://10.89.0.11:50051",
                "--port",
                "0",
                "--as",
                "a",
                "--frame-size",
                "9000",
                "--certs",
                certs,
                file.to_str().unwrap(),
            ],
        );
        ok(&o, "host send");
        let deadline = Instant::now() + Duration::from_secs(30);
        while recv.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "host recv never got its frames");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(recv.wait().unwrap().success(), "host recv ({round})");
        assert!(
            std::fs::read(&copy).unwrap() == data,
            "b did not get what a sent ({round})"
        );
    };
    frames("before");

    // s2's machine fails: every process on it is killed. Calls through it fail now.
    net.fail("s2");
    drop(s2);
    // It comes back with its journal, registers again, and the rest carry on: the
    // connection set up before carries frames again, new calls are set up, and the audit
    // finds every switch's table as the manager's calls explain it.
    let _s2 = serve_switch(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = net.run(
            "ctl",
            &[
                "callgen",
                "--cm",
                cm,
                "--rate",
                "50",
                "--seconds",
                "1",
                "--pair",
                "a:b",
                "--json",
                "--allow-failures",
                "--certs",
                certs,
            ],
        );
        let out = ok(&o, "callgen while s2 comes back");
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        if v["failed"] == 0 && v["established"].as_u64().unwrap() > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the manager never set up calls through the restarted s2: {v}"
        );
    }
    frames("after");
    callgen("callgen after s2's machine came back");
    let o = net.run("ctl", &["audit", "--names", names_url, "--certs", certs]);
    let out = ok(&o, "audit");
    assert!(out.contains("clean"), "{out}");
}
