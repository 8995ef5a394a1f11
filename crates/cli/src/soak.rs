//! `atmlab soak`: a long run at a high sustained call rate that ends with the audit
//! (issue 10); the work is `atmlab_lab::soak`.

use std::process::ExitCode;

use anyhow::{Result, anyhow};
use atmlab_lab::soak::{self, SoakOptions};
use clap::Args;

use crate::live as shell;

/// `atmlab soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Offered calls per second (Poisson).
    #[arg(long, default_value_t = 10_000.0)]
    rate: f64,
    /// How long, in seconds.
    #[arg(long, default_value_t = 600.0)]
    seconds: f64,
    /// Seconds per measurement window.
    #[arg(long, default_value_t = 10.0)]
    window: f64,
    /// Mean holding time, e.g. "5 ms".
    #[arg(long, default_value = "5 ms")]
    holding: String,
    /// Faults on the manager's switch links (see `atmlab cm serve --faults`).
    #[arg(long)]
    faults: Option<String>,
    /// Journal the manager's connections in this SQLite file, or in the PostgreSQL
    /// database at a postgres://USER@HOST:PORT/DB URL.
    #[arg(long)]
    journal: Option<atmlab_control::cm::journal::JournalAt>,
    /// Plain text instead of mutual TLS.
    #[arg(long)]
    insecure: bool,
    /// Print the summary as one JSON object on stdout; the windows go to stderr.
    #[arg(long)]
    json: bool,
}

/// Runs `atmlab soak`: exit status 0 when the final audit is clean, 1 otherwise.
pub fn run(args: SoakArgs) -> Result<ExitCode> {
    let holding: atmlab_core::time::Duration = args
        .holding
        .parse()
        .map_err(|e| anyhow!("--holding: {e}"))?;
    let faults = args
        .faults
        .as_deref()
        .map(|f| f.parse().map_err(|e| anyhow!("--faults {f:?}: {e}")))
        .transpose()?;
    let opts = SoakOptions {
        data_dir: shell::data_dir(),
        insecure: args.insecure,
        rate: args.rate,
        seconds: args.seconds,
        window: args.window,
        holding: holding.into(),
        faults,
        journal: args.journal,
    };
    let _lock = shell::lock_data_dir(&opts.data_dir)?;
    shell::init_logging_at("warn");
    let json = args.json;
    let r = shell::runtime()?.block_on(soak::run(&opts, |l| {
        if json {
            eprintln!("{l}");
        } else {
            println!("{l}");
        }
    }))?;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "offered": r.offered(),
                "established": r.established(),
                "blocked": r.blocked(),
                "failed": r.failed(),
                "resends": r.retries,
                "rate_held_per_s": r.rate_held(),
                "leaks": r.leaks(),
                "audit": r.audit.to_string(),
            })
        );
    } else {
        println!(
            "\nsoak: {} calls offered, {} set up, {} blocked, {} failed, {} re-sends; rate held {:.0} setups/s; leaks: {}",
            r.offered(),
            r.established(),
            r.blocked(),
            r.failed(),
            r.retries,
            r.rate_held(),
            r.leaks()
        );
        println!("audit: {}", r.audit);
    }
    Ok(if r.leaks() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
