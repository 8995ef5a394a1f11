//! Helpers the CLI's tests share: running the binary, the CPU lock between heavy tests,
//! test bytes, a switch server or a network started as a process (and the name service
//! address it wrote), and the reproductions' quick runs.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Runs `atmlab ARGS` with `stdin` on its standard input.
pub fn atmlab(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start atmlab");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // Write from another thread so a large output cannot deadlock against the input.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("run atmlab");
    writer.join().unwrap();
    out
}

/// The CPU, shared between tests that are heavy. A test that measures the live
/// laboratory and checks the numbers (the xbind, retina and SMDS reproductions, the demo,
/// the soak) takes it exclusively: on a 2-core machine two of them at once, or one beside
/// a simulation, starve each other until the measured numbers are the machine's, not the
/// code's. Heavy simulations (deterministic, no timing in their checks) share it with each
/// other. Other tests are light and take nothing.
static CPU: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs the caller alone among the heavy tests (see [`CPU`]).
pub fn measuring_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    CPU.write().unwrap_or_else(|e| e.into_inner())
}

/// Runs the caller beside other heavy simulations but not beside a measurement.
pub fn heavy_simulation() -> std::sync::RwLockReadGuard<'static, ()> {
    CPU.read().unwrap_or_else(|e| e.into_inner())
}

/// What `atmlab reproduce PAPER --quick` wrote, in a scratch directory kept for the
/// test's life.
pub struct Reproduced {
    _dir: tempfile::TempDir,
    /// The report directory.
    pub out: std::path::PathBuf,
    /// What the command printed.
    pub stdout: String,
    /// What it logged.
    pub stderr: String,
}

/// Runs `atmlab reproduce PAPER --quick` into a scratch directory (state in its `data`,
/// two simulation threads) and asserts it succeeded.
pub fn reproduce_quick(paper: &str) -> Reproduced {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(paper);
    let data = dir.path().join("data");
    let o = atmlab(
        &[
            "reproduce",
            paper,
            "--quick",
            "--data",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--threads",
            "2",
        ],
        b"",
    );
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "reproduce {paper}: {stdout}\n{stderr}");
    Reproduced {
        _dir: dir,
        out,
        stdout,
        stderr,
    }
}

/// A reproduction's stderr (not a terminal) names each of its `total` experiments as it
/// starts, "experiment N/TOTAL: ...", in order, and carries no escape codes (issue 25,
/// item 5).
pub fn assert_names_its_experiments(stderr: &str, total: usize) {
    assert!(!stderr.contains('\x1b'), "escape codes: {stderr:?}");
    let numbers: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.split("experiment ").nth(1))
        .filter_map(|rest| rest.split_once(':').map(|(n, _)| n.to_string()))
        .collect();
    let expected: Vec<String> = (1..=total).map(|i| format!("{i}/{total}")).collect();
    assert_eq!(numbers, expected, "{stderr}");
}

/// Every file of `files` is in `dir` and not empty.
pub fn assert_written(dir: &Path, files: &[&str]) {
    for f in files {
        let p = dir.join(f);
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 0),
            "{f} missing or empty in {}",
            dir.display()
        );
    }
}

/// Deterministic test bytes.
pub fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Starts `atmlab switch serve` and returns the child and its gRPC address (`host:port`).
pub fn serve_switch(config: &Path, certs: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(["switch", "serve", "--config"])
        .arg(config)
        .arg("--certs")
        .arg(certs)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start atmlab switch serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("server printed its address").unwrap();
        if let Some(rest) = line.split("gRPC https://").nth(1) {
            break rest.trim().to_string();
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

/// The line of three switches, the topology the process tests run.
pub fn line3() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/line3.toml")
}

/// The name service's address a `net up --state STATE` wrote in `STATE/net.json`,
/// waited for (up to a minute: the machine may be busy).
pub fn names_of_net(state: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(t) = std::fs::read_to_string(state.join("net.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && let Some(n) = v["names"].as_str()
        {
            return n.to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "net up never wrote {}",
            state.join("net.json").display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// One HTTP/1.1 exchange with `addr`: `method` on `path` with a JSON `body` when
/// given; the status code and the body (by its Content-Length, de-chunked, or to the
/// end), or `None` when nobody answers. Enough for the JSON APIs the tests talk to
/// (Prometheus, WebDriver, the dashboard), which is why a test needs no HTTP client
/// crate. The body is read by its length because a server may keep the connection open
/// whatever the request says (chromedriver does).
pub fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Option<(u16, String)> {
    use std::io::Read as _;
    let mut s =
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).ok()?;
    let code: u16 = status.split_whitespace().nth(1)?.parse().ok()?;
    let (mut length, mut chunked) = (None, false);
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':')?;
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = v.trim().parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            out.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length {
        out.resize(n, 0);
        r.read_exact(&mut out).ok()?;
    } else {
        r.read_to_end(&mut out).ok()?;
    }
    Some((code, String::from_utf8_lossy(&out).into_owned()))
}

/// A process the test started, killed (and reaped) when the test lets go of it, also
/// when an assertion fails first.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server the test starts on a free loopback port: `start(port)` spawns it, and it is
/// up once `http` answers `GET path` on that port with 200. A port is probed free (bound
/// and released) and another process may take it before the server binds it, which
/// then exits: it is started again on another port, up to five times. Panics, naming
/// `what`, when it neither comes up nor exits within `deadline`.
pub fn serve_on_free_port(
    what: &str,
    path: &str,
    deadline: std::time::Duration,
    mut start: impl FnMut(u16) -> Child,
) -> (Proc, std::net::SocketAddr) {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let mut server = Proc(start(port));
        let until = std::time::Instant::now() + deadline;
        loop {
            if let Some((200, _)) = http(addr, "GET", path, None) {
                return (server, addr);
            }
            if let Ok(Some(_)) = server.0.try_wait() {
                break;
            }
            assert!(
                std::time::Instant::now() < until,
                "{what} did not answer GET {path} on {addr} within {deadline:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    panic!("{what} exited at once on five free ports in turn");
}
