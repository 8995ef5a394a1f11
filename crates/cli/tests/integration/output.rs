//! Output a person reads (issue 27, item 5): plain logs when redirected, units and the
//! interval named in the simulation table, no NaN, one report file name for every paper.

use crate::common::atmlab;

/// A log redirected to a pipe (as here) carries no ANSI escape codes: `audit --insecure`
/// logs its warning at once, then fails to connect to a port nobody listens on.
#[test]
fn log_lines_have_no_colour_codes_when_redirected() {
    let o = atmlab(&["audit", "--insecure", "--names", "127.0.0.1:1"], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WARN"), "no log line to check: {err}");
    assert!(
        !err.contains("\x1b["),
        "colour codes in a redirected log: {err:?}"
    );
}
