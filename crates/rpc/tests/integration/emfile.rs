//! Out of file descriptors (issue 24, "Why" 3: a raw port at its limit logged "accept
//! failed: Too many open files" every 100 ms, two lines each): the accept loop backs off
//! (10 ms doubling to 1 s), counts each failure, writes no line per failure, and accepts
//! again once descriptors are back.
//!
//! The test lowers the process's limit on open files, which would starve the other tests
//! of this binary running beside it, so it runs itself again in a child process alone.

use std::time::{Duration, Instant};

use atmlab_rpc::tls::{self, Refusal};
use rlimit::Resource;
use tokio::net::{TcpListener, TcpSocket};
use tokio_stream::StreamExt as _;

use crate::{DEADLINE, wait_for, warn_log};

/// Set in the child process.
const CHILD: &str = "ATMLAB_EMFILE_CHILD";

/// Connections waiting to be accepted when the descriptors run out.
const CLIENTS: usize = 50;

/// How long the loop stays out of descriptors.
const STARVED: Duration = Duration::from_secs(2);

#[test]
fn accept_errors_back_off_are_counted_and_write_no_line_each() {
    if std::env::var_os(CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "emfile::accept_errors_back_off_are_counted_and_write_no_line_each",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the child failed:\n{text}");
        assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
        return;
    }
    let log = warn_log();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut incoming = tls::incoming(listener, None);
        let (addr, stats) = (incoming.local_addr(), incoming.stats());
        let ours = format!("{addr}");
        // The client sockets exist before the limit drops; connecting needs no more.
        let sockets: Vec<TcpSocket> = (0..CLIENTS).map(|_| TcpSocket::new_v4().unwrap()).collect();
        let (soft, hard) = Resource::NOFILE.get().unwrap();
        let highest = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
            .max()
            .unwrap();
        // No room left: the limit just above the highest descriptor, and the gaps below it
        // filled.
        Resource::NOFILE.set(highest + 1, hard).unwrap();
        let mut fillers = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            fillers.push(f);
        }
        let mut clients = Vec::new();
        for s in sockets {
            clients.push(s.connect(addr).await.unwrap());
        }
        let mut served = Vec::new();
        let t = Instant::now();
        while t.elapsed() < STARVED {
            if let Ok(Some(Ok(s))) =
                tokio::time::timeout(Duration::from_millis(50), incoming.next()).await
            {
                served.push(s);
            }
        }
        let failed = stats.count(Refusal::AcceptError);
        eprintln!(
            "{failed} failed accepts in {STARVED:?}; {} served",
            served.len()
        );
        assert!(failed > 0, "the descriptors never ran out");
        // Backing off 10 ms doubling to 1 s: a handful in 2 s, not a spin.
        assert!(
            failed <= 12,
            "{failed} failed accepts in {STARVED:?}: a spin"
        );
        // No line per failure (the summary comes once per 10 s interval).
        let lines = log
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(&ours) || l.contains("accept"))
            .count();
        assert!(lines <= 1, "{lines} WARN lines for {failed} failed accepts");

        // Descriptors back: every waiting client is accepted.
        drop(fillers);
        Resource::NOFILE.set(soft, hard).unwrap();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while served.len() < CLIENTS {
            let s = tokio::time::timeout_at(deadline, incoming.next())
                .await
                .expect("the loop accepts again once descriptors are back");
            served.push(s.unwrap().unwrap());
        }
        wait_for("the count", || stats.accepted() == CLIENTS as u64).await;
    });
}
