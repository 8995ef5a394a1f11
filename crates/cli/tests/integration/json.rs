//! `--json` wherever a command prints results (issue 27, item 6): the whole command tree
//! is walked through `--help`, every leaf command takes `--json` except the few that
//! print no results (named here, with why), and the commands added for it print one
//! JSON object as they say: the wire tools and the servers' start-up.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::atmlab;

/// The leaf commands that print no results, so have no `--json`: each with why.
const NO_RESULTS: [(&str, &str); 4] = [
    (
        "wire segment",
        "writes cells, the data, on stdout; nothing else",
    ),
    ("completions", "prints a shell script"),
    ("man", "writes man pages"),
    ("help", "clap's help"),
];

/// The subcommands a `--help` text lists.
fn subcommands(path: &[String]) -> Vec<String> {
    let o = atmlab(
        &[path, &["--help".to_string()]]
            .concat()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        b"",
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let Some(at) = text.find("Commands:") else {
        return Vec::new();
    };
    text[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// Every leaf of the command tree, as words.
fn leaves(path: Vec<String>, out: &mut Vec<Vec<String>>) {
    let subs = subcommands(&path);
    if subs.is_empty() {
        out.push(path);
        return;
    }
    for s in subs {
        let mut p = path.clone();
        p.push(s);
        leaves(p, out);
    }
}

#[test]
fn every_command_that_prints_results_takes_json() {
    let mut all = Vec::new();
    leaves(Vec::new(), &mut all);
    assert!(all.len() > 40, "only {} leaf commands found", all.len());
    let mut missing = Vec::new();
    for leaf in &all {
        let name = leaf.join(" ");
        if NO_RESULTS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let args: Vec<&str> = leaf.iter().map(String::as_str).chain(["--help"]).collect();
        let help = String::from_utf8_lossy(&atmlab(&args, b"").stdout).into_owned();
        if !help.contains("--json") {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "no --json on: {missing:?}");
}

/// The wire tools' results as JSON: `hec` one object, `decode` one per cell, `pcap` its
/// summary on stdout, `reassemble` its summary on stderr (stdout carries the frames).
#[test]
fn the_wire_tools_print_json() {
    let o = atmlab(&["wire", "hec", "--json", "00000001"], b"");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, serde_json::json!({"header": "00000001", "hec": "52"}));

    let frame = vec![7u8; 100];
    let cells = atmlab(&["wire", "segment", "--vpi", "1", "--vci", "100"], &frame).stdout;
    assert_eq!(cells.len(), 3 * 53);
    let o = atmlab(&["wire", "decode", "--json"], &cells);
    assert!(o.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["vci"], 100);
    assert_eq!(lines[2]["hec_ok"], true);
    assert_eq!(lines[2]["index"], 2);

    let o = atmlab(&["wire", "reassemble", "--json"], &cells);
    assert!(o.status.success());
    assert_eq!(o.stdout, frame, "the frame on stdout");
    let v: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(
        (v["cells"].as_u64(), v["frames"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(v["octets"], 100);

    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("x.pcap");
    let o = atmlab(
        &["wire", "pcap", "--json", "--out", pcap.to_str().unwrap()],
        &cells,
    );
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"], 1, "{v}");
    assert!(pcap.exists());
}

/// Starts `atmlab ARGS` and returns its first line of stdout as JSON, then stops it.
fn first_json_line(args: &[&str]) -> serde_json::Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .expect("a line")
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{args:?}: {e}: {line}"))
}

/// The servers say where they serve as one JSON object: the name service, a switch.
#[test]
fn servers_print_their_addresses_as_json() {
    let v = first_json_line(&[
        "names",
        "serve",
        "--insecure",
        "--listen",
        "127.0.0.1:0",
        "--json",
    ]);
    assert!(
        v["names"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:")),
        "{v}"
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("s1.toml");
    std::fs::write(
        &cfg,
        "name = \"s1\"\n[[ports]]\nid = 0\n[[ports]]\nid = 1\n",
    )
    .unwrap();
    let v = first_json_line(&[
        "switch",
        "serve",
        "--insecure",
        "--json",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(v["switch"], "s1", "{v}");
    assert!(
        v["grpc"].as_str().is_some_and(|u| u.starts_with("http://")),
        "{v}"
    );
    assert_eq!(v["ports"].as_array().map(Vec::len), Some(2), "{v}");
}
