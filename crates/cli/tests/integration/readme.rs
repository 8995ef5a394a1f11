//! The README walked as a new user would (issue 27): every command it shows, in its
//! `sh` blocks and in its prose, is a command line the binary takes (the fast tier asks
//! each for `--help` after its arguments, so a renamed flag or subcommand fails here),
//! and the heavy tier runs them as written, after the install line, with the binary
//! from this build on the PATH, in a scratch directory holding the README, the
//! scenarios and the topologies.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The README's commands: each line of its `sh` blocks (continuations joined, comments
/// cut), and each inline code span of its prose that is an `atmlab` command.
fn readme_commands() -> Vec<String> {
    readme_commands_where()
        .into_iter()
        .map(|(c, _)| c)
        .collect()
}

/// The commands of the README's `sh` blocks: what it gives a user to type.
fn block_commands() -> Vec<String> {
    readme_commands_where()
        .into_iter()
        .filter_map(|(c, block)| block.then_some(c))
        .collect()
}

/// [`readme_commands`], each with whether it is a line of an `sh` block.
fn readme_commands_where() -> Vec<(String, bool)> {
    let text = readme();
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if in_sh {
            let code = match line.find(" # ") {
                Some(i) => &line[..i],
                None => line,
            };
            let code = code.trim();
            if let Some(head) = code.strip_suffix('\\') {
                pending.push_str(head.trim());
                pending.push(' ');
                continue;
            }
            pending.push_str(code);
            if !pending.trim().is_empty() {
                out.push((pending.trim().to_string(), true));
            }
            pending.clear();
            continue;
        }
        // Inline spans: `atmlab ...` or `cargo run --release -p atmlab -- ...`.
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1
                && (span.starts_with("atmlab ")
                    || span.starts_with("cargo run --release -p atmlab -- "))
                && span.split_whitespace().count() > 1
            {
                out.push((span.to_string(), false));
            }
        }
    }
    out
}

/// A shell-like split: whitespace separates, quotes group.
fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in cmd.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The arguments after `atmlab` (or after `cargo run --release -p atmlab --`).
fn atmlab_args(cmd: &str) -> Option<Vec<String>> {
    let w = words(cmd);
    if w.first().map(String::as_str) == Some("atmlab") {
        return Some(w[1..].to_vec());
    }
    let cargo_run = ["cargo", "run", "--release", "-p", "atmlab", "--"];
    (w.len() > cargo_run.len() && w[..cargo_run.len()] == cargo_run)
        .then(|| w[cargo_run.len()..].to_vec())
}

/// `args` with the README's placeholders filled and its shell syntax (redirections,
/// `[optional]` brackets, `...`) taken out: what clap is asked to parse.
fn fill(args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "<" || a == ">" {
            skip = true;
            continue;
        }
        let a = a.trim_start_matches('[').trim_end_matches(']');
        let v = match a {
            "..." => continue,
            "URL" => "http://127.0.0.1:1".to_string(),
            "ADDR" => "127.0.0.1:1".to_string(),
            "ADDR1,ADDR2" => "127.0.0.1:1,127.0.0.1:2".to_string(),
            "ID" => "1".to_string(),
            "DIR" => "out".to_string(),
            "FILE" => "scenarios/examples/mm1.toml".to_string(),
            a if a.contains(":PORT") => {
                let (host, _) = a.split_once(":PORT").unwrap();
                format!("{host}:1")
            }
            a => a.to_string(),
        };
        out.push(v);
    }
    out
}

/// Every command of the README is one the binary takes: `atmlab ARGS --help` succeeds
/// for each (an unknown subcommand, flag or malformed value fails), and each other
/// command names a script, bench, example or directory that exists.
#[test]
fn every_readme_command_parses() {
    let cmds = readme_commands();
    assert!(cmds.len() > 40, "only {} commands found", cmds.len());
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for cmd in &cmds {
        if let Some(args) = atmlab_args(cmd) {
            let args = fill(&args);
            let o = Command::new(env!("CARGO_BIN_EXE_atmlab"))
                .current_dir(dir.path())
                .args(&args)
                .arg("--help")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                o.status.success() && !o.stdout.is_empty(),
                "the README's `{cmd}` does not parse ({args:?}): {}",
                String::from_utf8_lossy(&o.stderr)
            );
            checked += 1;
            continue;
        }
        let w = words(cmd);
        let w: Vec<&str> = w.iter().map(String::as_str).collect();
        let exists = |p: &str| root().join(p).exists();
        let named = |kind: &str, name: &str| {
            std::fs::read_dir(root().join("crates"))
                .unwrap()
                .flatten()
                .any(|c| c.path().join(kind).join(format!("{name}.rs")).exists())
        };
        let ok = match w.as_slice() {
            ["bash", script, ..] => exists(script),
            ["cargo", "install", "--path", p] => exists(&format!("{p}/Cargo.toml")),
            ["cargo", "bench", "-p", _, "--bench", b] => named("benches", b),
            ["cargo", "run", "-p", _, "--example", e] => named("examples", e),
            [
                "cd",
                "fuzz",
                "&&",
                "cargo",
                "+nightly",
                "fuzz",
                "run",
                t,
                ..,
            ] => exists(&format!("fuzz/fuzz_targets/{t}.rs")),
            _ => panic!("the README's `{cmd}` is neither an atmlab command nor a known tool"),
        };
        assert!(
            ok,
            "the README's `{cmd}` names something that does not exist"
        );
    }
    assert!(checked > 30, "{checked}");
}

// ---- the heavy tier: the commands run as written ----

/// The README's commands the walk does not run, each with why: the test command is what
/// runs this test (CI runs it, so it ran), and the install line builds the release
/// binary that the walk replaces with this build's (the commands "after the install
/// line").
const NOT_WALKED: [&str; 2] = ["bash scripts/test.sh", "cargo install --path crates/cli"];

/// A scratch directory laid out as a clone is (README.md, scenarios/, topologies/,
/// profiles/), with `atmlab` on the PATH and HOME inside it; it records which of the
/// README's commands ran.
struct Walk {
    dir: tempfile::TempDir,
    path: std::ffi::OsString,
    ran: std::cell::RefCell<Vec<String>>,
}

impl Walk {
    fn new() -> Walk {
        let dir = tempfile::tempdir().unwrap();
        for f in ["README.md", "scenarios", "topologies"] {
            let from = root().join(f).canonicalize().unwrap();
            std::os::unix::fs::symlink(from, dir.path().join(f)).unwrap();
        }
        // A copy: `sim measure-costs` writes profiles/measured.toml.
        let profiles = dir.path().join("profiles");
        std::fs::create_dir(&profiles).unwrap();
        for f in std::fs::read_dir(root().join("profiles")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, profiles.join(f.file_name().unwrap())).unwrap();
        }
        let bin = Path::new(env!("CARGO_BIN_EXE_atmlab")).parent().unwrap();
        let mut path = bin.as_os_str().to_owned();
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        Walk {
            dir,
            path,
            ran: Default::default(),
        }
    }

    fn sh(&self, cmd: &str) -> Command {
        // After the install line, `cargo run --release -p atmlab --` is `atmlab`.
        let cmd = cmd.replace("cargo run --release -p atmlab -- ", "atmlab ");
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(cmd)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("HOME", self.dir.path())
            .env_remove("ATMLAB_DATA")
            .stdin(Stdio::null());
        c
    }

    /// Runs the README's `cmd` as written, to its end; it must exit 0.
    fn run(&self, cmd: &str) -> Output {
        self.run_filled(cmd, cmd)
    }

    /// Runs the README's `readme` as `cmd`: the same with its placeholders (an address
    /// a server printed, a connection's id) filled in. It must exit 0.
    fn run_filled(&self, readme: &str, cmd: &str) -> Output {
        self.ran.borrow_mut().push(readme.to_string());
        let o = self.sh(cmd).output().unwrap();
        assert!(
            o.status.success(),
            "the README's `{cmd}` failed: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// Starts a server `cmd` and waits for `ready`, a JSON file it writes, to hold `key`
    /// (`up` writes net.json twice: the network's, then with its manager, "cm").
    fn start(&self, cmd: &str, ready: &str, key: &str) -> Server {
        self.ran.borrow_mut().push(cmd.to_string());
        // An earlier run's file (the demo leaves its net.json) is not this one's.
        let _ = std::fs::remove_file(self.dir.path().join(ready));
        let mut c = self.sh(&format!("exec {cmd}"));
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let child = c.spawn().unwrap();
        let path = self.dir.path().join(ready);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !std::fs::read_to_string(&path).is_ok_and(|t| {
            serde_json::from_str::<serde_json::Value>(&t).is_ok_and(|v| v.get(key).is_some())
        }) {
            assert!(Instant::now() < deadline, "`{cmd}` never wrote {ready}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        Server {
            child,
            cmd: cmd.to_string(),
            json,
            path: Some(path),
        }
    }

    /// Starts the README's `readme` as `cmd` and waits for a line of its standard output
    /// that starts with `prefix`; returns the server and the rest of that line.
    fn start_until(&self, readme: &str, cmd: &str, prefix: &str) -> (Server, String) {
        self.ran.borrow_mut().push(readme.to_string());
        let mut c = self.sh(&format!("exec {cmd}"));
        c.stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let rest = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix(prefix).map(|r| r.trim().to_string()))
            .unwrap_or_else(|| panic!("`{cmd}` never printed `{prefix}`"));
        std::thread::spawn(move || for _ in lines {});
        let server = Server {
            child,
            cmd: cmd.to_string(),
            json: serde_json::Value::Null,
            path: None,
        };
        (server, rest)
    }

    /// Every command of the README's `sh` blocks ran (or is one of [`NOT_WALKED`]).
    fn check_all_ran(&self) {
        let ran = self.ran.borrow();
        let missed: Vec<String> = block_commands()
            .into_iter()
            .filter(|c| !ran.contains(c) && !NOT_WALKED.contains(&c.as_str()))
            .collect();
        assert!(
            missed.is_empty(),
            "the walk did not run these README commands: {missed:#?}"
        );
    }
}

struct Server {
    child: Child,
    cmd: String,
    json: serde_json::Value,
    path: Option<PathBuf>,
}

impl Server {
    /// Stops the server as Ctrl-C would (SIGTERM); it must exit 0.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                assert!(s.success(), "`{}` exited {s} when stopped", self.cmd);
                break;
            }
            assert!(Instant::now() < deadline, "`{}` did not stop", self.cmd);
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README's command that starts with `prefix` (the first).
fn command(prefix: &str) -> String {
    let found: Vec<String> = readme_commands()
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    assert!(
        !found.is_empty(),
        "the README no longer shows `{prefix}...`"
    );
    found[0].clone()
}

/// The README's `sh` block commands that start with `prefix`.
fn block_commands_of(prefix: &str) -> Vec<String> {
    block_commands()
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect()
}

/// The README walked as a new user would: every command of its `sh` blocks runs as
/// written in a fresh directory (placeholders filled with what the servers print) and
/// exits 0, in the README's order of sections: the set-up, simulation (with the cost
/// tools, the README's `calibrate` example checked to give `paper-000`), the live
/// network, the SMDS network and a lone server, faults, the journal, the audit and the
/// soak, several managers on partitions, multipoint by hand, the wire tools, the
/// reproductions, the library's examples; and some of the prose's commands beside them.
/// The walk ends by checking that no `sh` command was left out, so a command added to
/// the README is walked or this fails. Not walked: [`NOT_WALKED`].
#[test]
#[ignore = "heavy tier (scripts/test.sh): the README walked, the demo included"]
fn the_readme_walked_as_written() {
    let _cpu = crate::common::measuring_alone();
    let w = Walk::new();
    // Set up and run.
    w.run("cargo run --release -p atmlab -- demo");
    let completions = command("atmlab completions bash > ~/.local");
    w.run_filled(
        &completions,
        &completions.replace(
            "atmlab completions",
            "mkdir -p ~/.local/share/bash-completion/completions && atmlab completions",
        ),
    );
    let man = command("atmlab man --out DIR");
    w.run_filled(&man, &man.replace("DIR", "man"));
    w.run(&command(
        "cargo run --release -p atmlab -- wire roundtrip README.md",
    ));
    // Simulating.
    w.run("cargo run --release -p atmlab -- sim run scenarios/examples/mm1.toml");
    w.run("atmlab sim list");
    let check = command("atmlab sim check FILE");
    w.run_filled(
        &check,
        &check.replace("FILE", "scenarios/examples/mm1.toml"),
    );
    w.run(&command("atmlab reproduce rdma --quick"));
    // This machine's costs, the twin beside the live manager, and a testbed's fit from
    // its figures: the README says the figures it shows are paper 000's, whose fit is
    // `paper-000`, so the fit it writes must be that profile's constants.
    w.run(&command("atmlab sim measure-costs"));
    w.run(&command("atmlab sim twin --quick"));
    let calibrate = command("atmlab sim calibrate");
    w.run(&calibrate);
    let fit = atmlab_models::control::CostProfile::from_file(&w.dir.path().join("my.toml"))
        .expect("calibrate wrote my.toml");
    let paper = atmlab_models::control::CostProfile::named("paper-000").unwrap();
    let us = |d: atmlab_core::time::Duration| d.as_secs_f64() * 1e6;
    assert!(
        (us(paper.latency) - us(fit.latency)).abs() < 2.0
            && (us(paper.oneway) - us(fit.oneway)).abs() < 2.0
            && (paper.stall_probability - fit.stall_probability).abs() < 1e-3
            && (us(paper.stall_mean) - us(fit.stall_mean)).abs() < 20.0,
        "the README's calibrate example is not paper-000's fit: {fit:?} against {paper:?}"
    );
    // A live network.
    let net = w.start(
        "cargo run --release -p atmlab -- net up topologies/line3.toml",
        "atmlab-data/net.json",
        "names",
    );
    net.stop();
    // SMDS: the network, a receiver and the two senders.
    let smds = w.start(
        "cargo run --release -p atmlab -- smds net up topologies/smds5.toml",
        "atmlab-data/smds/net.json",
        "servers",
    );
    // PORT_OF_N: the port of the SNI that holds subscriber address N.
    let fill_ports = |cmd: &str| -> String {
        let mut cmd = cmd.to_string();
        while let Some(at) = cmd.find("PORT_OF_") {
            let digits: String = cmd[at + 8..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let port = smds.json["servers"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s["interfaces"].as_array().unwrap())
                .find(|i| {
                    i["addresses"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|a| a.as_str().is_some_and(|a| a.ends_with(&digits)))
                })
                .and_then(|i| i["addr"].as_str())
                .and_then(|a| a.rsplit(':').next())
                .unwrap_or_else(|| panic!("no SNI holds {digits}: {}", smds.json))
                .to_string();
            cmd.replace_range(at..at + 8 + digits.len(), &port);
        }
        cmd
    };
    let recv = command("atmlab smds recv");
    w.ran.borrow_mut().push(recv.clone());
    let mut receiver = w
        .sh(&fill_ports(&recv))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Send once the receiver holds its SNI (it says so on stderr).
    let mut lines =
        std::io::BufRead::lines(std::io::BufReader::new(receiver.stderr.take().unwrap()));
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("attached to")),
        "smds recv never attached"
    );
    std::thread::spawn(move || for _ in lines {});
    for send in block_commands_of("atmlab smds send") {
        w.run_filled(&send, &fill_ports(&send));
    }
    assert!(receiver.wait().unwrap().success(), "smds recv");
    smds.stop();
    // One SMDS server from its own file: up, its status written, stopped.
    let serve = command("atmlab smds serve --config");
    let status = serve
        .split_whitespace()
        .skip_while(|a| *a != "--status")
        .nth(1)
        .expect("the README's smds serve writes a --status file")
        .to_string();
    w.start(&serve, &status, "counters").stop();
    // Faults, the journal and the audit.
    let up = w.start(&command("atmlab up --faults"), "atmlab-data/net.json", "cm");
    let names = up.json["names"].as_str().unwrap().to_string();
    let audit = command("atmlab audit --names");
    w.run_filled(&audit, &audit.replace("https://127.0.0.1:PORT", &names));
    up.stop();
    w.run(&command("atmlab soak --seconds"));
    // Several managers on partitions of one network, and callgen spread over both.
    let net = w.start(
        &block_commands_of("atmlab net up topologies/line3.toml")[0],
        "atmlab-data/net.json",
        "names",
    );
    let names = net.json["names"].as_str().unwrap().to_string();
    w.run(&command("atmlab certs issue --role cm"));
    let managers: Vec<(Server, String)> = block_commands_of("atmlab cm serve --names URL")
        .iter()
        .map(|c| w.start_until(c, &c.replace("URL", &names), "connection manager:"))
        .collect();
    assert_eq!(managers.len(), 2, "the README shows two managers");
    let addr = |url: &str| url.split("://").nth(1).unwrap().to_string();
    let callgen = command("atmlab callgen --cm ADDR1,ADDR2");
    w.run_filled(
        &callgen,
        &callgen
            .replace("ADDR1", &addr(&managers[0].1))
            .replace("ADDR2", &addr(&managers[1].1)),
    );
    for (m, _) in managers {
        m.stop();
    }
    net.stop();
    // Multipoint by hand, on the tree, through its manager.
    let tree = w.start(
        "atmlab up topologies/tree4.toml --insecure",
        "atmlab-data/net.json",
        "cm",
    );
    let cm = addr(tree.json["cm"].as_str().unwrap());
    let connect = command("atmlab cm connect");
    let out = w.run_filled(&connect, &connect.replace("ADDR", &cm));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // "connection ID: a -> b, c, d (...)"
    let id = text
        .split_whitespace()
        .nth(1)
        .map(|w| w.trim_end_matches(':').to_string())
        .unwrap_or_else(|| panic!("no connection id in {text}"));
    for verb in [
        "add-leaf",
        "drop-leaf",
        "modify",
        "list",
        "release",
        "status",
    ] {
        let c = command(&format!("atmlab cm {verb}"));
        w.run_filled(
            &c,
            &c.replace("ADDR", &cm).replace(" ID", &format!(" {id}")),
        );
    }
    tree.stop();
    // The wire tools, on a frame of the README.
    w.run("head -c 3000 README.md > frame");
    for c in block_commands_of("atmlab wire ") {
        w.run(&c);
    }
    // The reproductions, and the cache's dimensioning.
    for c in block_commands_of("atmlab reproduce ") {
        w.run(&c);
    }
    w.run(&command("atmlab cm dimension"));
    // The library's examples: `cargo run --example` builds and runs the example; the
    // build is this test's (cargo test builds every example), so the walk runs it.
    let examples = Path::new(env!("CARGO_BIN_EXE_atmlab"))
        .parent()
        .unwrap()
        .join("examples");
    for c in block_commands_of("cargo run -p ") {
        let name = c
            .split_whitespace()
            .skip_while(|a| *a != "--example")
            .nth(1)
            .unwrap();
        w.run_filled(&c, &examples.join(name).display().to_string());
    }
    w.check_all_ran();
}
