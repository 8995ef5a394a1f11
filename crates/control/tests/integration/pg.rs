//! A PostgreSQL server of the test's own (issue 26, item 3: the manager's journal in
//! PostgreSQL): Debian's `initdb` and `postgres` (package `postgresql`, which
//! scripts/test.sh installs) on a free loopback port, in a scratch directory, polled
//! until it accepts connections and stopped when the test lets go of it. Shared with the
//! CLI's tests (crates/cli/tests/integration/main.rs includes this file, `#[path]`).
//!
//! PostgreSQL refuses to run as root: as root (CI), the server runs as the `postgres`
//! user the package creates, through `setpriv` (which executes it in place, so the
//! process the test holds is the server itself and stopping it stops the server).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running PostgreSQL server; stopped (immediate shutdown) on drop.
pub struct Postgres {
    child: Child,
    _dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    bin: PathBuf,
}

/// Where Debian's server binaries are (`/usr/lib/postgresql/VERSION/bin`, the newest),
/// or `ATMLAB_PG_BIN`.
fn bin_dir() -> PathBuf {
    if let Ok(d) = std::env::var("ATMLAB_PG_BIN") {
        return d.into();
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b).expect(
        "PostgreSQL's server (initdb, postgres) is not installed: scripts/test.sh installs \
         Debian's postgresql, or set ATMLAB_PG_BIN to its bin directory",
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` as the `postgres` user when this is root, else as is.
fn as_server_user(program: PathBuf) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--clear-groups",
            "--",
        ])
        .arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Postgres {
    /// Makes a cluster (user `atmlab`, trusted on loopback) and starts its server.
    pub fn start() -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            // The server's user must reach and own its directory.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&data)
                .status()
                .unwrap();
            assert!(ok.success(), "chown of the cluster's directory");
        }
        let out = as_server_user(bin.join("initdb"))
            .args([
                "--auth=trust",
                "--username=atmlab",
                "--encoding=UTF8",
                "--no-sync",
            ])
            .arg("-D")
            .arg(&data)
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // A port taken between the probe and the server's bind: try another.
        for _ in 0..5 {
            let port = free_port();
            let mut child = as_server_user(bin.join("postgres"))
                .arg("-D")
                .arg(&data)
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
                .arg(&data)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start postgres");
            if wait_ready(&mut child, &bin, port) {
                return Postgres {
                    child,
                    _dir: dir,
                    port,
                    bin,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("postgres did not start");
    }

    /// A new, empty database `name` and its URL.
    pub fn database(&self, name: &str) -> String {
        let out = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "atmlab",
            ])
            .arg(name)
            .output()
            .expect("run createdb");
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://atmlab@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs `sql` on database `name` (psql), returning what it printed (unaligned,
    /// tuples only).
    pub fn psql(&self, name: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "atmlab",
            ])
            .args(["-d", name, "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Polls until the server accepts connections (false if it exited or 30 s passed).
fn wait_ready(child: &mut Child, bin: &std::path::Path, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGQUIT: immediate shutdown, the server's children with it.
        let _ = Command::new("kill")
            .args(["-QUIT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
