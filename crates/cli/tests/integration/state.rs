//! One home for state (issue 27): every command keeps its certificates, journals and
//! `net.json` in one data directory (`./atmlab-data`, moved by `--data` or
//! `ATMLAB_DATA`), two networks cannot share it, and a command refused for its options
//! writes nothing.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `atmlab ARGS` in `cwd`, without the caller's `ATMLAB_DATA`.
fn atmlab_in(cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_atmlab"));
    c.current_dir(cwd).args(args).env_remove("ATMLAB_DATA");
    c
}

fn run(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().expect("run atmlab")
}

use crate::common::Proc as Running;

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn topology(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            v.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    v.sort();
    v
}

/// `net up` with no flags keeps its certificates, journals and `net.json` in
/// `./atmlab-data` (not `atmlab-certs/` and `atmlab-net/`), and a second network in the
/// same directory is refused, naming the directory and the first one's pid.
#[test]
fn net_up_keeps_its_state_in_the_data_directory_and_holds_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let topo = topology("line3.toml");
    let mut first = atmlab_in(dir.path(), &["net", "up", &topo]);
    first.stdout(Stdio::null()).stderr(Stdio::null());
    let first = Running(first.spawn().unwrap());
    let data = dir.path().join("atmlab-data");
    wait_for(&data.join("net.json"));
    for f in ["certs/ca.pem", "certs/s1.pem", "journals/s1.table", "lock"] {
        assert!(data.join(f).exists(), "{f}: {:?}", tree(dir.path()));
    }
    let top: Vec<String> = tree(dir.path())
        .into_iter()
        .filter(|p| !p.contains('/'))
        .collect();
    assert_eq!(top, ["atmlab-data"], "state outside the data directory");

    for second in [
        vec!["net", "up", topo.as_str()],
        vec!["up", "--insecure"],
        vec!["demo", "--quick", "--insecure"],
        vec!["soak", "--seconds", "1", "--insecure"],
        vec!["reproduce", "xbind", "--quick", "--insecure", "--out", "x"],
        vec!["reproduce", "retina", "--quick", "--insecure", "--out", "r"],
        vec!["sim", "twin", "--quick", "--insecure", "--out", "t"],
        vec!["sim", "measure-costs", "--insecure", "--out", "m.toml"],
    ] {
        let o = run(atmlab_in(dir.path(), &second));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success(),
            "{second:?} shared the directory: {err}"
        );
        assert!(
            err.contains("data directory atmlab-data is in use")
                && err.contains(&format!("pid {}", first.0.id())),
            "{second:?}: {err}"
        );
    }
    // Another directory is another network.
    let elsewhere = dir.path().join("elsewhere");
    let mut other = atmlab_in(
        dir.path(),
        &[
            "net",
            "up",
            "--insecure",
            "--data",
            elsewhere.to_str().unwrap(),
            &topo,
        ],
    );
    other.stdout(Stdio::null()).stderr(Stdio::null());
    let _other = Running(other.spawn().unwrap());
    wait_for(&elsewhere.join("net.json"));
}

/// Two SMDS networks cannot share one state directory either.
#[test]
fn smds_net_up_holds_its_state_directory_alone() {
    let dir = tempfile::tempdir().unwrap();
    let topo = topology("smds5.toml");
    let mut first = atmlab_in(dir.path(), &["smds", "net", "up", &topo]);
    first.stdout(Stdio::null()).stderr(Stdio::null());
    let first = Running(first.spawn().unwrap());
    wait_for(&dir.path().join("atmlab-data/smds/net.json"));
    let o = run(atmlab_in(dir.path(), &["smds", "net", "up", &topo]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("atmlab-data/smds is in use")
            && err.contains(&format!("pid {}", first.0.id())),
        "{err}"
    );
}

/// The certificate authority's default home is the data directory, for `certs init`
/// and for every client (`--data` and `ATMLAB_DATA` move it).
#[test]
fn certificates_live_in_the_data_directory_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(atmlab_in(dir.path(), &["certs", "init", "switch:s1"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.path().join("atmlab-data/certs/ca.pem").exists());
    assert!(dir.path().join("atmlab-data/certs/s1.pem").exists());
    assert!(!dir.path().join("atmlab-certs").exists());

    let mut c = atmlab_in(dir.path(), &["certs", "init", "switch:s2"]);
    c.env("ATMLAB_DATA", "moved");
    assert!(run(c).status.success());
    assert!(dir.path().join("moved/certs/s2.pem").exists());

    // A client finds its identity there too; without one it says where it looked.
    let mut c = atmlab_in(
        dir.path(),
        &[
            "switch",
            "describe",
            "--addr",
            "127.0.0.1:9",
            "--as",
            "nobody",
        ],
    );
    c.env("ATMLAB_DATA", "moved");
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("no certificate for \"nobody\" in moved/certs"),
        "{err}"
    );
}

/// A command refused for its options writes nothing: no data directory, no CA, no key.
#[test]
fn rejected_options_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["up", "--kind", "foo"][..],
        &["up", "--faults", "2"][..],
        &["up", "--partition", "9-1"][..],
        &["demo", "--seconds", "-1"][..],
        &["soak", "--holding", "soon"][..],
    ] {
        let o = run(atmlab_in(dir.path(), args));
        assert!(!o.status.success(), "{args:?}");
        assert_eq!(tree(dir.path()), Vec::<String>::new(), "{args:?} wrote");
    }
}

/// `up` prints what the other commands need: the name service's address (for `audit
/// --names`) and the data directory it keeps its state in.
#[test]
fn up_prints_the_name_service_and_the_data_directory() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let mut c = atmlab_in(dir.path(), &["--data", "lab", "up", "--insecure"]);
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut up = Running(c.spawn().unwrap());
    let mut lines = std::io::BufReader::new(up.0.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line.contains("atmlab audit --names");
        printed.push(line);
        if done {
            break;
        }
    }
    let net: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("lab/net.json")).unwrap())
            .unwrap();
    let names = net["names"].as_str().unwrap();
    let text = printed.join("\n");
    assert!(text.contains(&format!("name service   {names}")), "{text}");
    assert!(text.contains("data           lab"), "{text}");
    assert!(
        text.contains(&format!("atmlab audit --names {names} --insecure")),
        "{text}"
    );
}
