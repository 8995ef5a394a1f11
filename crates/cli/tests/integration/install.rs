//! The command line installs like a tool (issue 27, item 6): shell completions and man
//! pages generated from its definition, and global `-v`/`-q`.

use crate::common::atmlab;

/// `completions bash` prints a bash completion function that knows the subcommands.
#[test]
fn completions_for_bash_and_zsh() {
    let o = atmlab(&["completions", "bash"], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("_atmlab()") && s.contains("complete -F _atmlab"),
        "{s}"
    );
    assert!(
        s.contains("callgen") && s.contains("reproduce"),
        "subcommands missing"
    );
    let o = atmlab(&["completions", "zsh"], b"");
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("#compdef atmlab"));
    let o = atmlab(&["completions", "tcsh"], b"");
    assert!(!o.status.success(), "an unknown shell is refused");
}

/// `man --out DIR` writes atmlab.1 and a page per subcommand, nested ones with dashes,
/// in roff that names the options.
#[test]
fn man_pages_for_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = atmlab(&["man", "--out", out.to_str().unwrap()], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let top = std::fs::read_to_string(out.join("atmlab.1")).unwrap();
    assert!(
        top.starts_with(".ie") || top.contains(".TH ATMLAB 1"),
        "{top}"
    );
    for page in [
        "atmlab-sim.1",
        "atmlab-sim-run.1",
        "atmlab-callgen.1",
        "atmlab-demo.1",
    ] {
        assert!(out.join(page).is_file(), "{page} missing");
    }
    let run = std::fs::read_to_string(out.join("atmlab-sim-run.1")).unwrap();
    assert!(run.contains("\\-\\-replications"), "{run}");
}

/// `-q` silences the warning `audit --insecure` logs; `-v` keeps it; both at once are
/// refused.
#[test]
fn verbose_and_quiet_move_the_log_level() {
    let args = ["audit", "--insecure", "--names", "127.0.0.1:1"];
    let run = |flag: &str| {
        let mut a = vec![flag];
        a.extend_from_slice(&args);
        let o = atmlab(&a, b"");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(!run("-q").contains("WARN"));
    assert!(run("-v").contains("WARN"));
    // Global: after the subcommand too.
    let mut a = args.to_vec();
    a.push("-q");
    let o = atmlab(&a, b"");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("WARN"));
    let o = atmlab(&["-v", "-q", "sim", "list"], b"");
    assert!(!o.status.success());
}
