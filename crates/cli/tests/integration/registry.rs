//! The registry in etcd across processes (issue 26, item 2): a 3-member etcd cluster on
//! loopback; the switch servers of the line of three, each its own process, register
//! through different members (`switch serve --names etcd://...`), the manager through
//! another (`cm serve --registry`); `callgen` finds the manager in the registry and sets
//! calls up through it; the audit, reading the switches and the manager from the
//! registry, finds nothing leaked. Then one etcd member dies and everything carries on
//! through the others; a switch server is killed and its entries leave the registry
//! when their lease lapses; it comes back, registers again, and calls and the audit are
//! as before.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::Proc;
use crate::etcd_server::EtcdCluster;

/// Only reached when something is broken.
const DEADLINE: Duration = Duration::from_secs(60);

fn atmlab(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_atmlab"));
    c.args(args)
        .env_remove("ATMLAB_DATA")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    c
}

/// Starts `c` and waits for a line of its standard output containing `ready`.
fn start(mut c: Command, ready: &str) -> Proc {
    c.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut server = Proc(c.spawn().unwrap());
    let out = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = ready.to_string();
    std::thread::spawn(move || {
        let mut sent = false;
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if !sent && l.contains(&wanted) {
                let _ = tx.send(l);
                sent = true;
            }
        }
    });
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("never printed {ready:?}"));
    server
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

fn free_udp() -> String {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().to_string()
}

/// The line of three (topologies/line3.toml) as three switch files on loopback: host
/// `a` at s1's port 0, `b` at s3's port 1, trunks s1.1-s2.0 and s2.1-s3.0.
pub(crate) fn switch_files(dir: &Path) -> Vec<PathBuf> {
    let udp: Vec<[String; 2]> = (0..3).map(|_| [free_udp(), free_udp()]).collect();
    (0..3)
        .map(|i| {
            let port0 = if i == 0 {
                "host_name = \"a\"".to_string()
            } else {
                format!("peer = \"{}\"", udp[i - 1][1])
            };
            let port1 = if i == 2 {
                "host_name = \"b\"".to_string()
            } else {
                format!("peer = \"{}\"", udp[i + 1][0])
            };
            let n = i + 1;
            // A fixed gRPC port: the manager's link to a switch that comes back
            // reconnects to the address it had.
            let grpc = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap();
            let text = format!(
                "name = \"s{n}\"\ngrpc = \"{grpc}\"\njournal = \"{}\"\n\
                 [[ports]]\nid = 0\nudp = \"{}\"\n{port0}\n\
                 [[ports]]\nid = 1\nudp = \"{}\"\n{port1}\n",
                dir.join(format!("s{n}.table")).display(),
                udp[i][0],
                udp[i][1],
            );
            let f = dir.join(format!("s{n}.toml"));
            std::fs::write(&f, text).unwrap();
            f
        })
        .collect()
}

/// The cluster's members from `first` on, round: each process starts with its own.
fn from_member(etcd: &EtcdCluster, first: usize) -> String {
    let list: Vec<String> = (0..3).map(|k| etcd.member((first + k) % 3)).collect();
    format!("etcd://{}", list.join(","))
}

/// The names the registry lists.
fn listed(registry: &str, certs: &str) -> Vec<String> {
    let o = atmlab(&[
        "names",
        "list",
        "--registry",
        registry,
        "--json",
        "--certs",
        certs,
    ])
    .output()
    .unwrap();
    ok(&o, "names list")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["name"].as_str().unwrap().to_string()
        })
        .collect()
}

/// `callgen` with the manager found in `registry`; its JSON summary (it must succeed
/// unless `allow_failures`: then its summary whatever the outcome).
fn callgen(registry: &str, certs: &str, allow_failures: bool) -> serde_json::Value {
    let mut args = vec![
        "callgen",
        "--registry",
        registry,
        "--cm",
        "cm-xbind",
        "--rate",
        "100",
        "--seconds",
        "1",
        "--pair",
        "a:b",
        "--json",
        "--certs",
        certs,
    ];
    if allow_failures {
        args.push("--allow-failures");
    }
    let o = atmlab(&args).output().unwrap();
    let out = if allow_failures {
        String::from_utf8_lossy(&o.stdout).into_owned()
    } else {
        ok(&o, "callgen")
    };
    serde_json::from_str(out.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("callgen: {e}: {out}"))
}

fn audit_is_clean(registry: &str, certs: &str) {
    let o = atmlab(&["audit", "--registry", registry, "--certs", certs])
        .output()
        .unwrap();
    let out = ok(&o, "audit");
    assert!(out.contains("clean"), "{out}");
}

#[test]
#[ignore = "heavy tier (scripts/test.sh): the registry in a real etcd cluster (etcd-server)"]
fn the_registry_in_etcd_survives_a_member_and_forgets_a_dead_switch() {
    let mut etcd = EtcdCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let certs = d.join("certs");
    let certs = certs.to_str().unwrap();
    let o = atmlab(&[
        "certs",
        "init",
        "--dir",
        certs,
        "switch:s1",
        "switch:s2",
        "switch:s3",
        "cm:cm-xbind",
    ])
    .output()
    .unwrap();
    ok(&o, "certs init");

    // Each switch server registers through its own member (and fails over to the
    // others).
    let via: Vec<String> = (0..3).map(|i| from_member(&etcd, i)).collect();
    let files = switch_files(d);
    let serve_switch = |i: usize| {
        start(
            atmlab(&[
                "switch",
                "serve",
                "--config",
                files[i].to_str().unwrap(),
                "--names",
                &via[i],
                "--certs",
                certs,
            ]),
            "registered in",
        )
    };
    let _s1 = serve_switch(0);
    let _s2 = serve_switch(1);
    let s3 = serve_switch(2);
    // The manager registers through the second member, with --registry.
    let journal = d.join("cm.sqlite");
    let _cm = start(
        atmlab(&[
            "cm",
            "serve",
            "--registry",
            &via[1],
            "--journal",
            journal.to_str().unwrap(),
            "--certs",
            certs,
        ]),
        "connection manager:",
    );
    let everyone = [
        "cm/cm-xbind",
        "host/a",
        "host/b",
        "owner/cm-xbind",
        "switch/s1",
        "switch/s2",
        "switch/s3",
    ];
    // Any member lists everyone, whichever member they registered through.
    for m in 0..3 {
        let one = format!("etcd://{}", etcd.member(m));
        assert_eq!(listed(&one, certs), everyone, "through member {m}");
    }

    // callgen finds the manager in the registry (through the third member).
    let v = callgen(&via[2], certs, false);
    assert!(v["established"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    audit_is_clean(&via[0], certs);

    // The first member dies: whoever used it moves to another; no entry is lost, even
    // after a lease's time (10 s) has passed with keep-alives through the others.
    etcd.kill(0);
    let died = Instant::now();
    let v = callgen(&via[0], certs, false);
    assert_eq!(v["failed"], 0, "{v}");
    while died.elapsed() < Duration::from_secs(12) {
        // The thing under test is that time passes.
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(listed(&via[1], certs), everyone);

    // A switch server killed (SIGKILL): its entries go when their lease lapses, and
    // only them.
    drop(s3);
    let deadline = Instant::now() + DEADLINE;
    let rest = loop {
        let now = listed(&via[1], certs);
        if !now.iter().any(|n| n == "switch/s3") {
            break now;
        }
        assert!(Instant::now() < deadline, "switch/s3 never left: {now:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        rest,
        [
            "cm/cm-xbind",
            "host/a",
            "owner/cm-xbind",
            "switch/s1",
            "switch/s2"
        ]
    );

    // It comes back on its journal and registers again; calls go through once the
    // manager has reconnected, and nothing leaked.
    let _s3 = serve_switch(2);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let v = callgen(&via[2], certs, true);
        if v["failed"] == 0 && v["established"].as_u64().unwrap() > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the manager never set up calls through the restarted s3: {v}"
        );
    }
    assert_eq!(listed(&via[2], certs), everyone);
    audit_is_clean(&via[1], certs);
}
