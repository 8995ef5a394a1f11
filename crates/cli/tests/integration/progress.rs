//! Progress for a person watching (issue 25, item 5): `atmlab sim run` draws a bar with
//! the time left on stderr when stderr is a terminal, even with its results redirected
//! to a file, and never when stderr is not a terminal (no escape codes in a redirected
//! log). The reproductions' experiment lines are checked in their own tests
//! (`common::assert_names_its_experiments`).

use std::path::Path;
use std::process::Command;

/// A short run of the M/M/1 example: 5 points x 2 replications.
fn sim_run_args(out: &Path) -> Vec<String> {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/examples/mm1.toml");
    vec![
        "sim".into(),
        "run".into(),
        scenario.display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--replications".into(),
        "2".into(),
        "--set".into(),
        "run.duration=\"20000 s\"".into(),
    ]
}

/// Single quotes for `sh -c`.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[test]
fn sim_run_shows_progress_on_a_terminal_stderr_and_never_in_a_redirected_one() {
    let dir = tempfile::tempdir().unwrap();

    // Redirected stderr (a pipe): the run's warnings at most, no bar, no escape codes.
    let o = crate::common::atmlab(
        &sim_run_args(&dir.path().join("piped"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        !err.contains('\x1b'),
        "escape codes in a redirected stderr: {err:?}"
    );
    assert!(
        !err.contains("jobs"),
        "a progress bar in a redirected stderr: {err:?}"
    );

    // stderr on a terminal (a pseudo-terminal from util-linux's `script`), the results
    // redirected to a file, as `atmlab sim run x.toml > table.txt` at a prompt: the bar
    // is drawn on the terminal, with the jobs done and the time left.
    let table = dir.path().join("table.txt");
    let typescript = dir.path().join("typescript");
    let mut line: Vec<String> = vec![quoted(env!("CARGO_BIN_EXE_atmlab"))];
    line.extend(
        sim_run_args(&dir.path().join("tty"))
            .iter()
            .map(|a| quoted(a)),
    );
    line.push(format!("> {}", quoted(&table.display().to_string())));
    let o = Command::new("script")
        .args(["--quiet", "--return", "--command", &line.join(" ")])
        .arg(&typescript)
        .env_remove("NO_COLOR")
        .output()
        .expect("util-linux's script (bsdutils, in every Debian)");
    let screen = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert!(
        o.status.success(),
        "{screen}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        screen.contains("jobs") && screen.contains("left"),
        "no progress on the terminal: {screen:?}"
    );
    let results = std::fs::read_to_string(&table).unwrap();
    assert!(results.contains("results:"), "{results}");
    assert!(
        !results.contains('\x1b') && !results.contains("jobs"),
        "the bar went into the redirected results: {results:?}"
    );
}
