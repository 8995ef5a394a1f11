//! Errors that name their cause (issue 27): a client speaking plain text to a TLS
//! server, or TLS to a plain-text one, is told so in one line with what to pass (it used
//! to read "operation was canceled" or "transport error"), and an OS error is printed
//! once.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::Proc as Running;

/// `atmlab up` (with `extra`) on the data directory `data`; its net.json once written.
fn up(data: &Path, extra: &[&str]) -> (Running, serde_json::Value) {
    let child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .arg("--data")
        .arg(data)
        .arg("up")
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(t) = std::fs::read_to_string(data.join("net.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && v["cm"].is_string()
        {
            return (running, v);
        }
        assert!(Instant::now() < deadline, "up did not write net.json");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .arg("--data")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn host_port(url: &serde_json::Value) -> String {
    let s = url.as_str().unwrap();
    s.split("://").last().unwrap().to_string()
}

/// The last line of stderr that is not a log line.
fn error_line(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    err.lines()
        .rfind(|l| !l.contains(" WARN ") && !l.contains(" INFO "))
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_plain_text_tls_mismatch_is_named_with_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (tls_dir, plain_dir) = (dir.path().join("tls"), dir.path().join("plain"));
    let (_tls, tls) = up(&tls_dir, &[]);
    let (_plain, plain) = up(&plain_dir, &["--insecure"]);
    let names_tls = tls["names"].as_str().unwrap().to_string();
    let names_plain = plain["names"].as_str().unwrap().to_string();
    let switch_tls = host_port(&tls["switches"][0]["grpc"]);
    let switch_plain = host_port(&plain["switches"][0]["grpc"]);
    let cm_tls = host_port(&tls["cm"]);
    let commit = ["--in", "0:0/100", "--out", "1:0/40"];

    let plain_to_tls: Vec<Vec<&str>> = vec![
        vec!["audit", "--insecure", "--names", &names_tls],
        [
            &["switch", "commit", "--insecure", "--addr", &switch_tls][..],
            &commit[..],
        ]
        .concat(),
        vec!["cm", "list", "--insecure", "--cm", &cm_tls],
        vec!["names", "list", "--insecure", "--addr", &names_tls],
    ];
    for args in &plain_to_tls {
        let o = run(&plain_dir, args);
        assert!(!o.status.success(), "{args:?}");
        let line = error_line(&o);
        assert!(
            line.contains("speaks TLS and we spoke plain text: drop --insecure"),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!line.contains("canceled"), "{line}");
    }
    // callgen names it as the cause of the calls' failure.
    let o = run(
        &plain_dir,
        &[
            "callgen",
            "--insecure",
            "--cm",
            &cm_tls,
            "--rate",
            "20",
            "--seconds",
            "0.2",
        ],
    );
    assert!(!o.status.success());
    assert!(
        error_line(&o).contains("speaks TLS and we spoke plain text"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let tls_to_plain: Vec<Vec<&str>> = vec![
        vec!["audit", "--names", &names_plain],
        vec!["switch", "describe", "--addr", &switch_plain],
    ];
    for args in &tls_to_plain {
        // The TLS side's certificates are in its own data directory.
        let o = run(&tls_dir, args);
        assert!(!o.status.success(), "{args:?}");
        let line = error_line(&o);
        assert!(
            line.contains("speaks plain text (a server started with --insecure) and we spoke TLS: pass --insecure"),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// An OS error quoted by a context is not repeated by the chain after it.
#[test]
fn an_os_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let m = missing.to_str().unwrap();
    for args in [
        &["smds", "serve", "--config", m][..],
        &["net", "check", m][..],
        &["switch", "serve", "--insecure", "--config", m][..],
        &["sim", "run", m][..],
    ] {
        let o = run(dir.path(), args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.matches("os error 2").count(), 1, "{args:?}: {err}");
    }
}

/// A port already in use is named as such, with the address, not called an "invalid
/// switch configuration" (the file is valid; the machine cannot give the port).
#[test]
fn a_port_in_use_is_named_not_called_an_invalid_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (t, u) = (tcp.local_addr().unwrap(), udp.local_addr().unwrap());
    for (name, text, names) in [
        (
            "grpc.toml",
            format!("name = \"s1\"\ngrpc = \"{t}\"\n[[ports]]\nid = 0\n"),
            format!("gRPC listen on {t}: Address already in use"),
        ),
        (
            "udp.toml",
            format!("name = \"s1\"\n[[ports]]\nid = 0\nudp = \"{u}\"\n"),
            format!("port 0 on {u}: Address already in use"),
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let o = run(
            dir.path(),
            &[
                "switch",
                "serve",
                "--insecure",
                "--config",
                file.to_str().unwrap(),
            ],
        );
        assert!(!o.status.success(), "{name}");
        let line = error_line(&o);
        assert!(line.contains(&names), "{name}: {line}");
        assert!(
            !line.contains("invalid switch configuration"),
            "{name}: {line}"
        );
    }
}
