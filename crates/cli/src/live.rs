//! Shared plumbing of the live subcommands: the tokio runtime, logging, and the TLS
//! identity every control connection uses (mutual TLS unless `--insecure`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use atmlab_rpc::tls::{TlsFiles, TlsIdentity};
use clap::Args;

/// Where certificates live and who we are.
#[derive(Debug, Clone, Args)]
pub struct Security {
    /// Directory of the lab CA and certificates (made by `atmlab certs init`).
    #[arg(long, default_value = "atmlab-certs", global = true)]
    pub certs: PathBuf,
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
        load_identity(&self.certs, name).map(Some)
    }
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

/// Logs to stderr at `default` (moved by `-v`/`-q`) unless `RUST_LOG` says otherwise.
pub fn init_logging_at(default: &str) {
    let default = level(
        default,
        VERBOSITY.load(std::sync::atomic::Ordering::Relaxed),
    );
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_on_stderr())
        .try_init();
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

/// Waits for Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
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
