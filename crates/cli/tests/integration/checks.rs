//! Checks before work (issue 27): `net check` refuses what `net up` refuses, before
//! anything is made, naming the file and the key as the user wrote it; every TOML file
//! the command line reads reports a syntax error with its line and column.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .current_dir(cwd)
        .args(args)
        .env_remove("ATMLAB_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("run atmlab")
}

fn refused(o: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{what} was accepted: {err}");
    err
}

const BAD_RATE: &str = r#"name = "bad"
[defaults]
link_rate = "155.52 Mb"
[[switch]]
name = "s1"
ports = 2
"#;

const BAD_PORT_RATE: &str = r#"name = "bad"
[[switch]]
name = "s1"
ports = 2
[switch.port]
capacity = "lots"
"#;

/// The same refusal from `net check` and `net up`, naming the file and
/// `defaults.link_rate` (not a generated `ports.0.link_rate`), and `net up` makes no
/// directory, CA or key first.
#[test]
fn net_check_refuses_what_net_up_refuses_naming_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), BAD_RATE).unwrap();
    std::fs::write(dir.path().join("port.toml"), BAD_PORT_RATE).unwrap();
    for (file, key) in [
        ("bad.toml", "defaults.link_rate"),
        ("port.toml", "switch s1: port.capacity"),
    ] {
        let check = refused(&run(dir.path(), &["net", "check", file]), "net check");
        let up = refused(&run(dir.path(), &["net", "up", file]), "net up");
        for err in [&check, &up] {
            assert!(
                err.contains(&format!("{file}: {key}: cannot parse")),
                "{file}: {err}"
            );
            assert!(!err.contains("ports.0"), "{err}");
        }
        let made: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(made.len(), 2, "net up made {made:?}");
    }
}

/// A syntax error in any TOML file the command line reads gives its line and column.
#[test]
fn toml_syntax_errors_give_line_and_column_in_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let broken = "name = \"x\"\n\n[[switch]\nname = \"s1\"\n";
    std::fs::write(dir.path().join("broken.toml"), broken).unwrap();
    let scenario = "model = \"queue\"\n[run\nduration = \"10 s\"\n";
    std::fs::write(dir.path().join("scenario.toml"), scenario).unwrap();
    for (args, at) in [
        (&["net", "check", "broken.toml"][..], "line 3, column"),
        (
            &["switch", "serve", "--insecure", "--config", "broken.toml"][..],
            "line 3, column",
        ),
        (&["smds", "net", "up", "broken.toml"][..], "line 3, column"),
        (&["sim", "check", "scenario.toml"][..], "line 2, column"),
        (&["sim", "run", "scenario.toml"][..], "line 2, column"),
    ] {
        let err = refused(&run(dir.path(), args), &format!("{args:?}"));
        assert!(err.contains(at), "{args:?}: {err}");
    }
}

/// A value in [params] that the sweep replaces must still be valid: `sim check` used to
/// pass a negative base rate when the rate was swept (issue 27).
#[test]
fn sim_check_refuses_an_invalid_base_value_of_a_swept_key() {
    let dir = tempfile::tempdir().unwrap();
    let mm1 = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/examples/mm1.toml"),
    )
    .unwrap();
    assert!(mm1.contains("rate = \"0.9 /s\"") && mm1.contains("\"arrival.rate\" = ["));
    let negative = mm1.replace("rate = \"0.9 /s\"", "rate = \"-0.9 /s\"");
    std::fs::write(dir.path().join("neg.toml"), negative).unwrap();
    for verb in ["check", "run"] {
        let err = refused(&run(dir.path(), &["sim", verb, "neg.toml"]), verb);
        assert!(
            err.contains("neg.toml: params.arrival.rate:") && err.contains("must be valid too"),
            "{verb}: {err}"
        );
    }
}

/// An output directory that cannot be written is refused before the work, not after
/// it: the live reproductions used to measure for minutes first (issue 27, "work lost
/// to late checks").
#[test]
fn an_unwritable_output_directory_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"").unwrap();
    let out = blocker.join("reports");
    let out = out.to_str().unwrap();
    let mm1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/examples/mm1.toml");
    for args in [
        &["reproduce", "xbind", "--quick", "--insecure", "--out", out][..],
        &["reproduce", "retina", "--quick", "--insecure", "--out", out][..],
        &["reproduce", "smds", "--quick", "--out", out][..],
        &["sim", "run", mm1.to_str().unwrap(), "--out", out][..],
        &["sim", "twin", "--quick", "--insecure", "--out", out][..],
    ] {
        let err = refused(&run(dir.path(), args), &format!("{args:?}"));
        assert!(
            err.contains(&format!("--out {out}: cannot write there")),
            "{args:?}: {err}"
        );
        // Refused before the lab starts: no data directory was made.
        assert!(!dir.path().join("atmlab-data").exists(), "{args:?}");
    }
}

/// An output file that cannot be written is refused before the work, naming the flag and
/// the path: `sim calibrate --out` after a fit of minutes, `sim measure-costs --out`
/// after the measurement, `smds serve --status` and `smds recv --out` once the server
/// ran or the PDUs came (each wrote only at the end, or failed late, before).
#[test]
fn an_unwritable_output_file_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"").unwrap();
    let out = blocker.join("x.toml");
    let out = out.to_str().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let line3 = root.join("topologies/line3.toml");
    let server = root.join("topologies/smds-server.toml");
    for args in [
        &[
            "sim",
            "calibrate",
            "--topology",
            line3.to_str().unwrap(),
            "--out",
            out,
        ][..],
        &["sim", "measure-costs", "--insecure", "--out", out][..],
        &[
            "smds",
            "serve",
            "--config",
            server.to_str().unwrap(),
            "--status",
            out,
        ][..],
        &["smds", "recv", "--sni", "127.0.0.1:9", "--out", out][..],
    ] {
        let flag = args[args.len() - 2];
        let err = refused(&run(dir.path(), args), &format!("{args:?}"));
        assert!(
            err.contains(&format!("{flag} {out}: cannot write there")),
            "{args:?}: {err}"
        );
        assert!(!dir.path().join("atmlab-data").exists(), "{args:?}");
    }
    // A directory where a file is wanted says so.
    let err = refused(
        &run(
            dir.path(),
            &["smds", "recv", "--sni", "127.0.0.1:9", "--out", "."],
        ),
        "--out .",
    );
    assert!(err.contains("--out .: is a directory"), "{err}");
}
