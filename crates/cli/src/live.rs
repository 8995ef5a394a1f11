//! Shared plumbing of the live subcommands: the tokio runtime, logging, the TLS
//! identity every control connection uses (mutual TLS unless `--insecure`), and the one
//! data directory that holds the laboratory's state (certificates, journals, `net.json`,
//! SMDS state) with the lock that keeps two networks out of one directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use atmlab_rpc::tls::{TlsFiles, TlsIdentity};
use clap::Args;

/// Where certificates live and who we are.
#[derive(Debug, Clone, Args)]
pub struct Security {
    /// Directory of the lab CA and certificates (made by `atmlab certs init`; default:
    /// DATA/certs, under the global --data directory).
    #[arg(long, global = true)]
    pub certs: Option<PathBuf>,
    /// Plain text, no authentication: for experiments on a trusted machine only.
    #[arg(long, global = true)]
    pub insecure: bool,
}

impl Security {
    /// The identity `name` (its certificate and key in the certs directory), or `None`
    /// with `--insecure`.
    pub fn identity(&self, name: &str) -> Result<Option<TlsIdentity>> {
        if self.insecure {
            tracing::warn!("--insecure: control traffic is plain text and unauthenticated");
            return Ok(None);
        }
        load_identity(&self.certs_dir(), name).map(Some)
    }

    /// [`Security::identity`] for a reader this command runs beside its own network (the
    /// dashboard's): no warning, since the network's start already says it is plain text.
    pub fn own_identity(&self, name: &str) -> Result<Option<TlsIdentity>> {
        if self.insecure {
            return Ok(None);
        }
        load_identity(&self.certs_dir(), name).map(Some)
    }

    /// Records that this command talks to the server at `addr` (a failure against it is
    /// then checked for a plain-text/TLS mismatch, see [`tls_mismatch`]).
    pub fn peer(&self, addr: &str) {
        // An etcd registry's scheme says whether it is TLS, whatever --insecure says.
        if atmlab_control::etcd::is_cluster(addr) {
            return;
        }
        note_peer(addr, !self.insecure);
    }

    /// The certificate directory: `--certs`, or `certs/` in the data directory.
    pub fn certs_dir(&self) -> PathBuf {
        self.certs.clone().unwrap_or_else(certs_dir)
    }
}

/// The global `--data` directory (`ATMLAB_DATA`, default `./atmlab-data`), set once by
/// main before any command runs.
static DATA: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Records the global `--data` (main, before any command runs).
pub fn set_data_dir(dir: PathBuf) {
    let _ = DATA.set(dir);
}

/// The data directory every command keeps its state in.
pub fn data_dir() -> PathBuf {
    DATA.get()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("atmlab-data"))
}

/// The lab's certificates: `certs/` in the data directory.
pub fn certs_dir() -> PathBuf {
    data_dir().join("certs")
}

/// An exclusive hold on a data directory for the life of a network: the OS releases it
/// when the process ends, however it ends (kill -9 included), so a stale lock file never
/// keeps a directory shut.
#[derive(Debug)]
pub struct DataLock {
    _file: std::fs::File,
}

/// Takes `dir` (made if missing) for a running network, or refuses, naming the directory
/// and the pid of the process that holds it: two networks in one directory would share
/// journals (the second restoring the first's connections) and overwrite each other's
/// `net.json`. Call it only once the options are valid: it is the first thing written.
pub fn lock_data_dir(dir: &Path) -> Result<DataLock> {
    use std::io::{Read as _, Seek as _, Write as _};
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("creating the data directory {}: {e}", dir.display()))?;
    let path = dir.join("lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "another process".to_string(),
                pid => format!("pid {pid}"),
            };
            bail!(
                "the data directory {} is in use by another network ({holder}); stop it, or \
                 give this one its own directory with --data DIR (or ATMLAB_DATA)",
                dir.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            bail!("locking {}: {e}", path.display())
        }
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    Ok(DataLock { _file: file })
}

/// Loads `name`'s identity from `dir`, with an error that says how to make one.
pub fn load_identity(dir: &Path, name: &str) -> Result<TlsIdentity> {
    let files = TlsFiles::in_dir(dir, name);
    if !files.cert.exists() {
        bail!(
            "no certificate for {name:?} in {} (issue one with `atmlab certs issue --dir {} \
             --role ROLE {name}`, ROLE one of admin, cm (a manager, named for its owner), \
             switch, host, names, observer; or pass --insecure to run without \
             authentication)",
            dir.display(),
            dir.display()
        );
    }
    files
        .load()
        .with_context(|| format!("loading the TLS identity {name:?} from {}", dir.display()))
}

/// Logs to stderr; `RUST_LOG` overrides the level (info by default).
pub fn init_logging() {
    init_logging_at("info");
}

/// The global `-v`/`-q` count: each `-v` one level more logging, each `-q` one less.
static VERBOSITY: std::sync::atomic::AtomicI16 = std::sync::atomic::AtomicI16::new(0);

/// Records the global `-v`/`-q` (main, before any command runs).
pub fn set_verbosity(v: i16) {
    VERBOSITY.store(v, std::sync::atomic::Ordering::Relaxed);
}

/// The level a command logs at: its own default moved by `-v`/`-q`.
fn level(default: &str, verbosity: i16) -> &'static str {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let at = LEVELS.iter().position(|l| *l == default).unwrap_or(3) as i16;
    LEVELS[(at + verbosity).clamp(0, LEVELS.len() as i16 - 1) as usize]
}

/// How log lines are written (the global `--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, coloured on a terminal only.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`, and the spans),
    /// for log collectors and `jq`; never coloured.
    Json,
}

/// The global `--log-format`, set once by main before any command runs.
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Records the global `--log-format` (main, before any command runs).
pub fn set_log_format(format: LogFormat) {
    let _ = LOG_FORMAT.set(format);
}

/// The filter of a command logging at `default`, and `targets` each at its own level,
/// all moved by `verbosity` (`-v`/`-q`); a set `RUST_LOG` wins over both (a person who
/// wrote a filter meant it).
fn filter(
    default: &str,
    targets: &[(&str, &str)],
    verbosity: i16,
    rust_log: Option<&str>,
) -> tracing_subscriber::EnvFilter {
    rust_log
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| {
            let mut directives = level(default, verbosity).to_string();
            for (target, at) in targets {
                directives.push_str(&format!(",{target}={}", level(at, verbosity)));
            }
            tracing_subscriber::EnvFilter::new(directives)
        })
}

/// Logs to stderr at `default` (moved by `-v`/`-q`) unless `RUST_LOG` says otherwise, as
/// text or JSON lines (`--log-format`).
pub fn init_logging_at(default: &str) {
    init_logging_with(default, &[]);
}

/// A reproduction's logging: warnings, and which experiment it is on ("experiment 3/7:
/// ...", at info), so a person watching a long run knows where it is.
pub fn init_logging_for_reproduction() {
    init_logging_with(
        "warn",
        &[(atmlab_lab::reproduce::EXPERIMENT_TARGET, "info")],
    );
}

/// [`init_logging_at`] with `targets` at their own levels.
fn init_logging_with(default: &str, targets: &[(&str, &str)]) {
    let rust_log = std::env::var("RUST_LOG").ok().filter(|f| !f.is_empty());
    let filter = filter(
        default,
        targets,
        VERBOSITY.load(std::sync::atomic::Ordering::Relaxed),
        rust_log.as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match LOG_FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => builder.with_ansi(colour_on_stderr()).try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

/// Colour codes only for a person at a terminal: a log redirected to a file or a pipe
/// stays plain text (tracing-subscriber colours unconditionally otherwise), and a
/// non-empty `NO_COLOR` (no-color.org) turns them off everywhere.
pub fn colour_on_stderr() -> bool {
    use std::io::IsTerminal as _;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// A multi-threaded tokio runtime for one command.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Waits for Ctrl-C or SIGTERM. SIGTERM is caught from the call on, not from the first
/// poll: a network calls this before it writes `net.json`, so that a supervisor that
/// stops it as soon as the file appears gets an orderly stop (exit 0), not a kill.
/// Call it inside the runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Makes `dir` (given by `flag`) and proves it writable before any work is done, so that a
/// long run never loses its results to a directory it could not write at the end.
pub fn writable_dir(flag: &str, dir: &Path) -> Result<()> {
    let fail =
        |e: std::io::Error| anyhow::anyhow!("{flag} {}: cannot write there: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(format!(".atmlab-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)?;
    Ok(())
}

/// Checks, before any work, that the output file `path` given by `flag` can be written:
/// its directory is made if missing, an existing file is opened for writing (not cut),
/// and a new one is made and taken away again. So a mistyped or read-only path fails in
/// the first second, naming the flag and the path, not after a run whose result it loses.
pub fn writable_file(flag: &str, path: &Path) -> Result<()> {
    let fail =
        |e: std::io::Error| anyhow::anyhow!("{flag} {}: cannot write there: {e}", path.display());
    if path.is_dir() {
        bail!("{flag} {}: is a directory, not a file", path.display());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(fail)?;
    } else {
        std::fs::File::create(path).map_err(fail)?;
        std::fs::remove_file(path).map_err(fail)?;
    }
    Ok(())
}

/// The servers this command talks to, each with whether we speak TLS to it.
static PEERS: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());

/// Records a server this command talks to and whether we speak TLS to it.
pub fn note_peer(addr: &str, tls: bool) {
    PEERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((addr.to_string(), tls));
}

/// Whether the server at `addr` speaks TLS, asked with an HTTP/2 connection preface: a
/// TLS server answers it with an alert record (content type 21, version 3.x), a
/// plain-text gRPC server with its SETTINGS frame (frame type 4). `None`: no answer
/// that tells (nothing listening, another protocol).
fn speaks_tls(addr: &str) -> Option<bool> {
    use std::io::{Read as _, Write as _};
    use std::net::ToSocketAddrs as _;
    use std::time::Duration;
    let hostport = addr
        .split("://")
        .last()
        .unwrap_or(addr)
        .trim_end_matches('/');
    let to = hostport.to_socket_addrs().ok()?.next()?;
    let mut s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .ok()?;
    let mut b = [0u8; 5];
    let mut n = 0;
    while n < b.len() {
        match s.read(&mut b[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    match b[..n] {
        [0x15, 0x03, ..] => Some(true),
        [_, _, _, 0x04, ..] => Some(false),
        _ => None,
    }
}

/// After a failure: the first server this command talked to in the other mode (plain
/// text to a TLS server, TLS to a plain-text one), as a one-line error saying what to
/// pass. A mismatch otherwise surfaces as "operation was canceled", "transport error"
/// or a corrupt TLS record.
pub fn tls_mismatch() -> Option<String> {
    let peers = PEERS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    peers.iter().find_map(|(addr, tls)| match speaks_tls(addr) {
        Some(true) if !tls => Some(format!(
            "{addr} speaks TLS and we spoke plain text: drop --insecure (the lab's \
             certificates are found in DATA/certs, or give --certs DIR)"
        )),
        Some(false) if *tls => Some(format!(
            "{addr} speaks plain text (a server started with --insecure) and we spoke \
             TLS: pass --insecure"
        )),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::LevelFilter;

    use super::filter;

    const EXPERIMENT: &str = atmlab_lab::reproduce::EXPERIMENT_TARGET;

    #[test]
    fn rust_log_decides_over_verbose_and_quiet() {
        let most = |default, targets: &[(&str, &str)], v, rust_log| {
            filter(default, targets, v, rust_log).max_level_hint()
        };
        assert_eq!(most("info", &[], 0, None), Some(LevelFilter::INFO));
        assert_eq!(most("info", &[], -1, None), Some(LevelFilter::WARN));
        assert_eq!(most("info", &[], 2, None), Some(LevelFilter::TRACE));
        assert_eq!(
            most("info", &[], -2, Some("debug")),
            Some(LevelFilter::DEBUG)
        );
        assert_eq!(
            most("info", &[], 2, Some("error")),
            Some(LevelFilter::ERROR)
        );
        // A filter that does not parse is no filter: the command's own level holds.
        assert_eq!(most("info", &[], 0, Some("=[")), Some(LevelFilter::INFO));
        // A reproduction: warnings, and its experiment lines at info, both moved by -q.
        let targets = [(EXPERIMENT, "info")];
        assert_eq!(most("warn", &targets, 0, None), Some(LevelFilter::INFO));
        assert_eq!(most("warn", &targets, -1, None), Some(LevelFilter::WARN));
    }
}
