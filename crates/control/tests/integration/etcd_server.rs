//! A real etcd (Debian's `etcd-server`, installed by `scripts/test.sh`) for the heavy
//! tier: one member or a cluster of several on loopback, each on free ports with its
//! data in a temporary directory, polled until the cluster is healthy and killed when
//! the test lets go of it (also when an assertion fails first).
//!
//! Also compiled into the CLI's tests (`#[path]`), which run the registry across
//! processes; it uses only the standard library and `tempfile`.

#![allow(
    dead_code,
    reason = "shared by two test binaries, each using part of it"
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster may take to elect a leader and answer.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// The etcd binary: `ATMLAB_ETCD`, or `etcd` on the PATH.
fn binary() -> String {
    std::env::var("ATMLAB_ETCD").unwrap_or_else(|_| "etcd".into())
}

/// One member: its ports and its process (None once killed).
struct Member {
    name: String,
    client: u16,
    peer: u16,
    /// Plain HTTP `/health` (and `/metrics`), whatever the client port speaks.
    health: u16,
    process: Option<Child>,
    log: PathBuf,
}

/// An etcd cluster on loopback, killed on drop.
pub struct EtcdCluster {
    members: Vec<Member>,
    dir: tempfile::TempDir,
    initial_cluster: String,
    /// The certificate directory, when clients must use mutual TLS (`etcds://`).
    tls: Option<PathBuf>,
}

/// How a member serves its clients.
#[derive(Clone, Copy)]
enum Clients<'a> {
    Plain,
    /// Mutual TLS: the lab CA and certificate directory, and each member's certificate
    /// name (`NAME.pem`, `NAME.key`), by member.
    Tls(&'a std::path::Path, &'a [&'a str]),
}

/// `n` distinct free loopback ports, each held until all are chosen, then released:
/// etcd binds them a moment later, and in that moment another process may take one (an
/// outgoing connection's port, another test's server). [`EtcdCluster::start`] starts
/// the cluster again on new ports when that happens.
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("a bound port").port())
        .collect()
}

/// How many times a cluster is started on new ports when a member lost one.
const PORT_ATTEMPTS: usize = 5;

impl EtcdCluster {
    /// A cluster of `n` members, healthy (with a leader) when this returns.
    ///
    /// Heartbeat 50 ms and election timeout 500 ms: etcd's shortest lease is 1.5
    /// election timeouts, so a 1 s lease is honoured as asked (with etcd's defaults,
    /// 100 ms and 1 s, it would be raised to 2 s), and a member's death is noticed
    /// within half a second.
    pub fn start(n: usize) -> EtcdCluster {
        EtcdCluster::start_as(n, Clients::Plain)
    }

    /// A cluster whose clients must use mutual TLS with the lab CA in `certs`: member
    /// `i` shows the certificate `names[i]` (a `names` certificate; `etcds://`).
    pub fn start_tls(certs: &std::path::Path, names: &[&str]) -> EtcdCluster {
        EtcdCluster::start_as(names.len(), Clients::Tls(certs, names))
    }

    fn start_as(n: usize, clients: Clients<'_>) -> EtcdCluster {
        for attempt in 1..=PORT_ATTEMPTS {
            let mut cluster = EtcdCluster::spawn_all(n, clients);
            match cluster.healthy_or_exited() {
                Ok(()) => return cluster,
                // Dropped: its members are killed, its directory removed.
                Err(_) if attempt < PORT_ATTEMPTS && cluster.lost_a_port() => continue,
                Err(e) => panic!("{e}; the logs:\n{}", cluster.logs()),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// `n` members started on fresh ports, not yet waited for.
    fn spawn_all(n: usize, clients: Clients<'_>) -> EtcdCluster {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut ports = free_ports(3 * n).into_iter();
        let mut port = || ports.next().expect("three ports a member");
        let mut members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client: port(),
                peer: port(),
                health: port(),
                process: None,
                log: dir.path().join(format!("m{i}.log")),
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        for (i, m) in members.iter_mut().enumerate() {
            m.process = Some(spawn(m, i, dir.path(), &initial_cluster, clients));
        }
        EtcdCluster {
            members,
            dir,
            initial_cluster,
            tls: match clients {
                Clients::Plain => None,
                Clients::Tls(certs, _) => Some(certs.to_path_buf()),
            },
        }
    }

    /// Polls every member's `/health` until each says the cluster is healthy; an error
    /// as soon as a member has exited, or at the deadline.
    fn healthy_or_exited(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        for m in &mut self.members {
            let Some(p) = m.process.as_mut() else {
                continue;
            };
            while !health(m.health) {
                if let Ok(Some(status)) = p.try_wait() {
                    return Err(format!("etcd member {} exited ({status})", m.name));
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "etcd member {} is not healthy after {START_DEADLINE:?}",
                        m.name
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// Whether a member could not bind one of its ports.
    fn lost_a_port(&self) -> bool {
        self.members.iter().any(|m| {
            std::fs::read_to_string(&m.log).is_ok_and(|l| l.contains("address already in use"))
        })
    }

    /// Every member, `etcd://127.0.0.1:P,...` (as `--registry` takes it; `etcds://`
    /// for a cluster started with TLS).
    pub fn endpoints(&self) -> String {
        let list: Vec<String> = (0..self.members.len()).map(|i| self.member(i)).collect();
        let scheme = if self.tls.is_some() { "etcds" } else { "etcd" };
        format!("{scheme}://{}", list.join(","))
    }

    /// Member `i`'s client address, `127.0.0.1:P`.
    pub fn member(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client)
    }

    /// Kills member `i` (SIGKILL: a host that dies) and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.members[i].process.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    /// Freezes member `i` (SIGSTOP): a host that hangs, its connections open and silent.
    /// [`EtcdCluster::resume`] thaws it; dropping the cluster kills it either way.
    pub fn pause(&self, i: usize) {
        self.signal(i, "-STOP");
    }

    /// Thaws member `i` (SIGCONT).
    pub fn resume(&self, i: usize) {
        self.signal(i, "-CONT");
    }

    fn signal(&self, i: usize, signal: &str) {
        let p = self.members[i].process.as_ref().expect("a live member");
        let ok = Command::new("kill")
            .args([signal, &p.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {signal} {} failed", p.id());
    }

    /// Polls every live member's `/health` until each says the cluster is healthy.
    pub fn wait_healthy(&self) {
        let deadline = Instant::now() + START_DEADLINE;
        for m in self.members.iter().filter(|m| m.process.is_some()) {
            loop {
                if health(m.health) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "etcd member {} is not healthy after {START_DEADLINE:?}; the logs:\n{}",
                    m.name,
                    self.logs()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The members' logs, for a failure message.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                format!(
                    "--- {}:\n{}",
                    m.name,
                    std::fs::read_to_string(&m.log).unwrap_or_default()
                )
            })
            .collect()
    }

    /// The directory the members keep their data and logs in.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The `--initial-cluster` the members were started with.
    pub fn initial_cluster(&self) -> &str {
        &self.initial_cluster
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

fn spawn(
    m: &Member,
    i: usize,
    dir: &std::path::Path,
    initial_cluster: &str,
    clients: Clients<'_>,
) -> Child {
    let scheme = match clients {
        Clients::Plain => "http",
        Clients::Tls(..) => "https",
    };
    let client = format!("{scheme}://127.0.0.1:{}", m.client);
    let peer = format!("http://127.0.0.1:{}", m.peer);
    let health = format!("http://127.0.0.1:{}", m.health);
    let log = std::fs::File::create(&m.log).expect("the member's log file");
    let mut command = Command::new(binary());
    if let Clients::Tls(certs, names) = clients {
        let file = |f: String| certs.join(f).display().to_string();
        command
            .args(["--cert-file", &file(format!("{}.pem", names[i]))])
            .args(["--key-file", &file(format!("{}.key", names[i]))])
            .args(["--trusted-ca-file", &file("ca.pem".into())])
            .arg("--client-cert-auth");
    }
    command
        .arg("--name")
        .arg(&m.name)
        .arg("--data-dir")
        .arg(dir.join(&m.name))
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", &peer])
        .args(["--listen-metrics-urls", &health])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", initial_cluster])
        .args(["--initial-cluster-state", "new"])
        // The same for every member (the cluster's id derives from it), unique to the
        // cluster so that members of two tests' clusters never join each other.
        .args(["--initial-cluster-token", &token(initial_cluster)])
        .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {} ({e}); install Debian's etcd-server (scripts/test.sh does) \
                 or set ATMLAB_ETCD",
                binary()
            )
        })
}

/// The cluster's token: its members' peer addresses, which no other live cluster shares.
fn token(initial_cluster: &str) -> String {
    let ports: Vec<&str> = initial_cluster
        .split(',')
        .filter_map(|m| m.rsplit(':').next())
        .collect();
    format!("atmlab-{}", ports.join("-"))
}

/// Whether the member on `port` answers `/health` with `"health":"true"`.
fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply.contains("\"health\":\"true\"")
}
