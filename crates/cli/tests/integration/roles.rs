//! Roles from the command line (issue 24, "any certificate is root"), the probe as the
//! issue ran it: `atmlab certs issue hosta`, then that certificate against a running
//! `atmlab up`. Before, the host's certificate committed a cross-connect with
//! `owner = cm-xbind` and released the manager's connections. Now the host is refused,
//! the manager's call stands, and the network audits clean.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::atmlab;

#[test]
fn a_host_certificate_cannot_command_a_switch_or_release_a_managers_call() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let certs = dir.path().join("certs");
    let c = certs.to_str().unwrap();
    let mut up = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["up", "--certs", c, "--data"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let net = loop {
        if let Ok(t) = std::fs::read_to_string(data.join("net.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && v["cm"].is_string()
        {
            break v;
        }
        if Instant::now() >= deadline || up.try_wait().unwrap().is_some() {
            let _ = up.kill();
            panic!("atmlab up never wrote its addresses");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _up = Kill(up);
    let cm = net["cm"].as_str().unwrap();
    let names = net["names"].as_str().unwrap();
    let s1 = net["switches"][0]["grpc"]
        .as_str()
        .unwrap()
        .trim_start_matches("https://")
        .to_string();

    // The manager's call, as an operator sets it up.
    let o = atmlab(
        &[
            "cm", "connect", "--certs", c, "--cm", cm, "--from", "a", "--to", "b",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A host's certificate, issued by the same CA.
    let o = atmlab(
        &["certs", "issue", "--dir", c, "--role", "host", "hosta"],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // As the host: commit posing as the manager's owner, release its connections,
    // set up a call through the manager. Each refused, naming the host.
    let o = atmlab(
        &[
            "switch", "commit", "--certs", c, "--as", "hosta", "--addr", &s1, "--in", "3:0/900",
            "--out", "0:0/900", "--pcr", "300000", "--owner", "cm-xbind",
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("may not") && err.contains("hosta"),
        "{err}"
    );
    let conns = atmlab(
        &[
            "switch",
            "connections",
            "--certs",
            c,
            "--as",
            "hosta",
            "--addr",
            &s1,
        ],
        b"",
    );
    let listed = String::from_utf8_lossy(&conns.stdout);
    assert!(
        conns.status.success(),
        "a host reads: {}",
        String::from_utf8_lossy(&conns.stderr)
    );
    let line = listed
        .lines()
        .find(|l| l.contains("\"cm-xbind\""))
        .unwrap_or_else(|| panic!("the manager's hop on s1: {listed}"));
    let id = line.split_whitespace().next().unwrap().to_string();
    let o = atmlab(
        &[
            "switch", "release", "--certs", c, "--as", "hosta", "--addr", &s1, &id,
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("may not"), "{err}");
    let o = atmlab(
        &[
            "cm", "connect", "--certs", c, "--as", "hosta", "--cm", cm, "--from", "a", "--to", "b",
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("may not"), "{err}");

    // The manager's call stands, and nothing is out of place.
    let list = atmlab(&["cm", "list", "--certs", c, "--cm", cm], b"");
    assert!(String::from_utf8_lossy(&list.stdout).contains("a -> b"));
    let audit = atmlab(&["audit", "--certs", c, "--names", names, "--json"], b"");
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(report["clean"], true, "{report}");
}
