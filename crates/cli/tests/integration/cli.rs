//! The command line as users and outside tools see it.

use crate::common::{atmlab, bytes};

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every subcommand (all built).
const BUILT: &[&str] = &[
    "wire",
    "sim",
    "switch",
    "host",
    "certs",
    "names",
    "net",
    "cm",
    "callgen",
    "demo",
    "up",
    "reproduce",
    "audit",
    "smds",
];

#[test]
fn hec_prints_the_known_answers() {
    let o = atmlab(&["wire", "hec", "00000001"], b"");
    assert!(o.status.success());
    assert_eq!(stdout(&o), "52\n");
    assert_eq!(stdout(&atmlab(&["wire", "hec", "00000000"], b"")), "55\n");
    let bad = atmlab(&["wire", "hec", "0001"], b"");
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("8 hex digits"), "{}", stderr(&bad));
}

#[test]
fn version_and_help_show_the_whole_tree() {
    let v = atmlab(&["--version"], b"");
    assert!(stdout(&v).starts_with("atmlab "));
    let h = stdout(&atmlab(&["--help"], b""));
    for sub in BUILT {
        assert!(h.contains(&format!("  {sub} ")), "--help lacks {sub}:\n{h}");
    }
}

#[test]
fn an_unknown_paper_is_refused_and_the_five_are_listed() {
    let bad = atmlab(&["reproduce", "nosuchpaper"], b"");
    assert_eq!(bad.status.code(), Some(2), "clap refuses an unknown paper");
    for paper in ["xbind", "retina", "smds", "rdma", "gateway"] {
        assert!(
            stderr(&bad).contains(paper),
            "{paper} not listed: {}",
            stderr(&bad)
        );
    }
}

#[test]
fn segment_then_reassemble_is_identity() {
    for (n, args) in [
        (1, vec!["--vpi", "0", "--vci", "32"]),
        (1500, vec!["--vpi", "1", "--vci", "100", "--uu", "9"]),
        (
            65_535,
            vec!["--vpi", "4095", "--vci", "65535", "--nni", "--cpi", "0"],
        ),
    ] {
        let frame = bytes(n, 3);
        let mut seg = vec!["wire", "segment"];
        seg.extend(&args);
        let cells = atmlab(&seg, &frame);
        assert!(cells.status.success(), "{}", stderr(&cells));
        assert_eq!(cells.stdout.len() % 53, 0);
        assert_eq!(cells.stdout.len() / 53, (n + 8).div_ceil(48));
        let nni = args.contains(&"--nni");
        let re = atmlab(
            if nni {
                &["wire", "reassemble", "--nni"]
            } else {
                &["wire", "reassemble"]
            },
            &cells.stdout,
        );
        assert!(re.status.success(), "{}", stderr(&re));
        assert_eq!(re.stdout, frame);
    }
}

#[test]
fn segment_refuses_bad_input_clearly() {
    let o = atmlab(&["wire", "segment", "--vpi", "256", "--vci", "1"], b"x");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("VPI (UNI, 8 bits)"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let o = atmlab(&["wire", "segment", "--vpi", "0", "--vci", "100"], b"");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("empty SDU"), "{}", stderr(&o));
}

#[test]
fn reassemble_reports_every_error_and_keeps_good_frames() {
    let a = bytes(100, 1);
    let b = bytes(200, 2);
    let c = bytes(50, 3);
    let mut stream = Vec::new();
    for f in [&a, &b, &c] {
        stream.extend(atmlab(&["wire", "segment", "--vpi", "0", "--vci", "100"], f).stdout);
    }
    // Corrupt a payload octet of frame b (its first cell is cell 3).
    stream[3 * 53 + 30] ^= 0x40;
    // And leave a partial cell at the end.
    stream.extend_from_slice(&[0u8; 7]);
    let o = atmlab(&["wire", "reassemble"], &stream);
    assert_eq!(o.status.code(), Some(1));
    let mut want = a.clone();
    want.extend(&c);
    assert_eq!(o.stdout, want);
    let err = stderr(&o);
    assert!(err.contains("CRC mismatch"), "{err}");
    assert!(err.contains("7 octet(s)"), "{err}");
}

#[test]
fn reassemble_corrects_a_single_bit_header_error() {
    let frame = bytes(100, 5);
    let mut cells = atmlab(&["wire", "segment", "--vpi", "0", "--vci", "100"], &frame).stdout;
    cells[2] ^= 0x08; // one bit of the VCI of the first cell
    let o = atmlab(&["wire", "reassemble"], &cells);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, frame);
    assert!(stderr(&o).contains("corrected"));
}

#[test]
fn decode_lists_cells() {
    let cells = atmlab(
        &["wire", "segment", "--vpi", "0", "--vci", "5"],
        &bytes(60, 0),
    )
    .stdout;
    let o = atmlab(&["wire", "decode"], &cells);
    let text = stdout(&o);
    assert!(o.status.success());
    assert_eq!(text.lines().count(), 2);
    assert!(text.contains("0/5 (signalling)"), "{text}");
    assert!(
        text.lines().nth(1).unwrap().contains("pt=user,end"),
        "{text}"
    );
}

#[test]
fn roundtrip_detects_exactly_the_corrupted_frames() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, bytes(20_000, 9)).unwrap();
    let f = file.to_str().unwrap();
    let o = atmlab(&["wire", "roundtrip", f, "--json"], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["identical"], true);
    let o = atmlab(
        &[
            "wire",
            "roundtrip",
            f,
            "--mtu",
            "1000",
            "--corrupt",
            "5",
            "--seed",
            "7",
            "--json",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["check_passed"], true);
    assert_eq!(j["frames_bad"], j["frames_hit"]);
    assert!(j["frames_bad"].as_u64().unwrap() >= 1);
    assert_eq!(
        j["frames_delivered"].as_u64().unwrap() + j["frames_bad"].as_u64().unwrap(),
        20
    );
}

/// A server whose standard output nobody reads (the pipe closed before its first line)
/// keeps serving: printing its address must not take it down.
#[test]
fn a_server_keeps_serving_when_its_standard_output_is_closed() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["names", "serve", "--insecure", "--listen", &addr])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let listed = loop {
        let o = atmlab(
            &[
                "names",
                "list",
                "--insecure",
                "--addr",
                &format!("http://{addr}"),
            ],
            b"",
        );
        if o.status.success() || std::time::Instant::now() > deadline {
            break o;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the server died when it printed to a closed pipe"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(alive);
}

/// A run's output directory is proved writable before the run (issue 27, item 4: `demo
/// --reports DIR` found DIR unwritable only after its whole run, and lost the results).
#[test]
fn an_unwritable_output_directory_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let bad = file.join("reports");
    let data = dir.path().join("data");
    for args in [
        vec![
            "demo",
            "--insecure",
            "--data",
            data.to_str().unwrap(),
            "--reports",
            bad.to_str().unwrap(),
        ],
        vec![
            "callgen",
            "--insecure",
            "--cm",
            "127.0.0.1:9",
            "--rate",
            "10",
            "--out",
            bad.to_str().unwrap(),
        ],
    ] {
        let o = crate::common::atmlab(&args, b"");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            err.contains("cannot write there") && err.contains("a-file/reports"),
            "{args:?}: {err}"
        );
    }
    // Refused before anything was made: the demo's state directory is not there.
    assert!(!data.exists());
}

/// A negative rate is a bad value, named as such, not taken for an unknown option.
#[test]
fn a_negative_rate_is_a_bad_value_not_an_option() {
    let o = crate::common::atmlab(&["callgen", "--cm", "127.0.0.1:9", "--rate", "-5"], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("--rate must be positive"), "{err}");
}

/// Issue 24, item 7, and issue 27, item 6: an error names the address it concerns, once,
/// in the right words (a port clash is not an "invalid switch configuration"), and
/// quotes at most a bounded prefix of a bad input (a megabyte came back whole).
#[test]
fn errors_name_the_address_once_and_quote_a_bounded_prefix() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("s1.toml");
    std::fs::write(
        &config,
        format!("name = \"s1\"\ngrpc = \"{addr}\"\n[[ports]]\nid = 0\n"),
    )
    .unwrap();
    let o = atmlab(
        &[
            "switch",
            "serve",
            "--insecure",
            "--config",
            config.to_str().unwrap(),
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(!o.status.success(), "{err}");
    assert!(last.contains(&addr) && last.contains("in use"), "{last}");
    assert!(!last.contains("invalid switch configuration"), "{last}");
    assert_eq!(last.matches("switch s1").count(), 1, "{last}");
    assert_eq!(last.matches("os error").count(), 1, "{last}");

    // 100 kB: a single argument may not exceed 128 KiB (MAX_ARG_STRLEN).
    let big = "x".repeat(100_000);
    let o = atmlab(
        &[
            "switch",
            "commit",
            "--insecure",
            "--addr",
            "127.0.0.1:1",
            "--in",
            &big,
            "--out",
            "1:0/32",
        ],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.len() < 1_000, "{} bytes of error", err.len());
    assert!(
        err.contains("more bytes") && err.contains("port:vpi/vci"),
        "{err}"
    );
}

/// Issue 27, item 6 ("--json wherever a command prints results"): `sim list`, `sim
/// check`, `certs init|issue`, `host send` and `host recv` print one JSON document.
#[test]
fn more_commands_print_json() {
    let json = |o: &std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
    };
    let kinds = json(&atmlab(&["sim", "list", "--json"], b""));
    let queue = kinds
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "queue")
        .expect("the queue model");
    assert!(
        queue["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "mean_wait")
    );

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mm1 = root.join("scenarios/examples/mm1.toml");
    let check = json(&atmlab(
        &["sim", "check", "--json", mm1.to_str().unwrap()],
        b"",
    ));
    assert_eq!(check["ok"], true);
    assert_eq!(check["model"], "queue");
    assert_eq!(check["points"], 5);

    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let c = certs.to_str().unwrap();
    let made = json(&atmlab(
        &["certs", "init", "--json", "--dir", c, "switch:s1"],
        b"",
    ));
    assert!(made["ca"].as_str().unwrap().ends_with("ca.pem"));
    let roles: Vec<&str> = made["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["switch", "admin"]);
    let issued = json(&atmlab(
        &[
            "certs", "issue", "--json", "--dir", c, "--role", "host", "a",
        ],
        b"",
    ));
    assert_eq!(issued["certificates"][0]["name"], "a");
    assert!(issued["ca"].is_null());

    // A host sends to a plain UDP socket (standing in for a switch port) and receives
    // nothing within its idle time.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = port.local_addr().unwrap().to_string();
    let file = dir.path().join("f.bin");
    std::fs::write(&file, vec![7u8; 20_000]).unwrap();
    let sent = json(&atmlab(
        &[
            "host",
            "send",
            "--json",
            "--switch",
            &to,
            "--vc",
            "0/100",
            file.to_str().unwrap(),
        ],
        b"",
    ));
    assert_eq!(sent["frames"], 3, "{sent}");
    assert_eq!(sent["octets"], 20_000);
    let got = json(&atmlab(
        &[
            "host",
            "recv",
            "--json",
            "--switch",
            &to,
            "--vc",
            "0/100",
            "--idle",
            "100 ms",
            "--out",
            dir.path().join("out.bin").to_str().unwrap(),
        ],
        b"",
    ));
    assert_eq!(got["frames"], 0, "{got}");
    assert!(got["cells_per_s"].is_null());
}
