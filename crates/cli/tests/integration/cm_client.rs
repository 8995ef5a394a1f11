//! `atmlab cm connect | add-leaf | drop-leaf | modify | release | list | status` against
//! a running network: the xbind manager of `atmlab up topologies/tree4.toml`, and a TINA
//! manager (`atmlab cm serve --kind tina`) over the same switches, each through the same
//! client commands: a multipoint tree grown, pruned, changed and released; refusals are
//! clear errors; the audit finds the switches clean afterwards.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::atmlab;

/// Runs `atmlab cm OP --insecure --cm CM ARGS`; (success, stdout, stderr).
fn cm(op: &str, at: &str, args: &[&str]) -> (bool, String, String) {
    let mut a = vec!["cm", op, "--insecure", "--cm", at];
    a.extend_from_slice(args);
    let o = atmlab(&a, b"");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn ok(op: &str, at: &str, args: &[&str]) -> String {
    let (good, out, err) = cm(op, at, args);
    assert!(good, "cm {op} {args:?}: {err}");
    out
}

/// The connection id of a `connect` answer's first line ("connection N: ...").
fn id_of(out: &str) -> String {
    out.split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .to_string()
}

/// Grows, prunes, changes and releases a tree through the manager at `at`.
fn exercise(at: &str, kind: &str) {
    let out = ok(
        "connect",
        at,
        &[
            "--from", "a", "--to", "b,c,d", "--pcr", "2000", "--tag", kind,
        ],
    );
    assert!(out.contains("a -> b, c, d"), "{kind}: {out}");
    // One switch connection per switch: s1 and s2 fork.
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" connection ")).collect();
    assert_eq!(lines.len(), 3, "{kind}: {out}");
    assert!(
        lines
            .iter()
            .filter(|l| l.matches(", ").count() == 1)
            .count()
            == 2,
        "{kind}: two forks in {out}"
    );
    assert_eq!(out.matches("  leaf ").count(), 3, "{kind}: {out}");
    let id = id_of(&out);

    let out = ok("add-leaf", at, &[&id, "e"]);
    assert!(out.contains("a -> b, c, d, e"), "{kind}: {out}");
    let out = ok("drop-leaf", at, &[&id, "c"]);
    assert!(out.contains("a -> b, d, e"), "{kind}: {out}");
    let out = ok("modify", at, &[&id, "--pcr", "3000"]);
    assert!(out.contains("(3000 cells/s"), "{kind}: {out}");
    let out = ok("list", at, &[]);
    assert!(out.contains(&format!("connection {id}:")), "{kind}: {out}");

    // Refusals: clear, and nothing changes.
    let (good, _, err) = cm("drop-leaf", at, &[&id, "zz"]);
    assert!(
        !good && err.contains("DropLeaf refused (NotFound)"),
        "{kind}: {err}"
    );
    let (good, _, err) = cm("modify", at, &[&id, "--pcr=-1"]);
    assert!(!good && err.contains("--pcr -1"), "{kind}: {err}");
    let (good, _, err) = cm("modify", at, &[&id, "--pcr", "1e12"]);
    assert!(!good && err.contains("ResourceExhausted"), "{kind}: {err}");
    let out = ok("list", at, &[]);
    assert!(out.contains("a -> b, d, e (3000 cells/s"), "{kind}: {out}");

    let out = ok("release", at, &[&id]);
    assert_eq!(out.trim(), format!("connection {id} released"));
    assert_eq!(ok("list", at, &[]).trim(), "no connections", "{kind}");
    let (good, _, err) = cm("release", at, &[&id]);
    assert!(!good && err.contains("NotFound"), "{kind}: {err}");
    let out = ok("status", at, &[]);
    assert!(
        out.starts_with(&format!("kind {kind}: 0 active, 1 established, 1 released")),
        "{out}"
    );
}

/// Kills its process when dropped, so a failing assertion leaves nothing running.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_cm_client_grows_prunes_changes_and_releases_a_tree_on_xbind_and_tina() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/tree4.toml");
    let _up = Killed(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .arg("up")
            .arg(&topo)
            .args(["--insecure", "--data"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let net = data.join("net.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let v = loop {
        if let Ok(t) = std::fs::read_to_string(&net)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && v["cm"].as_str().is_some()
        {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "atmlab up never wrote its addresses"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let xbind = v["cm"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    let names = v["names"].as_str().unwrap().to_string();
    exercise(&xbind, "xbind");

    // A TINA manager over the same switches, beside the xbind one.
    let mut tina = Killed(
        Command::new(env!("CARGO_BIN_EXE_atmlab"))
            .args([
                "cm",
                "serve",
                "--kind",
                "tina",
                "--insecure",
                "--as",
                "tina",
                "--metrics",
                "127.0.0.1:0",
                "--names",
            ])
            .arg(&names)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(tina.0.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    // Its metrics' address, among the lines it prints after its own; then keep
    // reading: a closed pipe would make its printing fail.
    let metrics = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "no metrics line");
        if let Some(url) = line.trim().strip_prefix("metrics: ") {
            break url.to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let at = first
        .rsplit("://")
        .next()
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .trim()
        .to_string();
    exercise(&at, "tina");
    // TINA's manager exports what the others do: its calls, its setups' times, and its
    // remote invocations by interface (Table 3.3's).
    let addr = metrics
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    let (code, body) =
        crate::common::http(addr.parse().unwrap(), "GET", "/metrics", None).expect("a scrape");
    assert_eq!(code, 200, "{body}");
    let value = |name: &str| -> f64 {
        body.lines()
            .find(|l| l.starts_with(&format!("{name}{{manager=\"tina\"")))
            .unwrap_or_else(|| panic!("{name} missing:\n{body}"))
            .rsplit_once(' ')
            .unwrap()
            .1
            .parse()
            .unwrap()
    };
    assert!(value("atmlab_cm_setups_total") >= 1.0, "{body}");
    assert_eq!(
        value("atmlab_cm_setup_duration_seconds_count"),
        value("atmlab_cm_setups_total"),
        "every setup timed:\n{body}"
    );
    assert!(value("atmlab_cm_releases_total") >= 1.0, "{body}");
    assert!(
        body.contains("atmlab_cm_invocations_total{manager=\"tina\",interface=\"eml->switch\"}"),
        "{body}"
    );

    let audit = atmlab(&["audit", "--insecure", "--names", &names, "--json"], b"");
    drop(tina);
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&audit.stderr)));
    assert_eq!(report["clean"], true, "{report}");
}
