//! `atmlab reproduce gateway`: paper 004's Figures 13-23 and the reverse-path experiment
//! (§6.1-§6.5). The work is `atmlab_lab::reproduce::gateway`; this only reports.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use atmlab_lab::reproduce::gateway::{Options, run as reproduce};

use super::ReproduceArgs;

/// Runs the gateway reproduction into `out`.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    // Each experiment is logged as it starts ("experiment 2/10: ..."); on a terminal its
    // jobs are counted on the line below.
    crate::live::init_logging_for_reproduction();
    let terminal = std::io::stderr().is_terminal();
    let progress = |name: &str, done: u64, total: u64| {
        if terminal {
            eprint!("\r{name}: {done}/{total} jobs   ");
            if done == total {
                eprintln!();
            }
        }
    };
    let opts = Options {
        quick: args.quick,
        threads: args.threads,
        progress: Some(&progress),
    };
    let o = reproduce(out, &opts)
        .with_context(|| format!("reproducing paper 004 into {}", out.display()))?;
    let fields = serde_json::json!({
        "report": o.report,
        "files": o.files,
        "events": o.events,
        "seconds": o.wall_seconds,
        "threads": o.threads,
    });
    super::summary(args, out, fields, || {
        say!(
            "gateway: {} events in {:.1} s on {} thread(s) ({:.2} M events/s)",
            o.events,
            o.wall_seconds,
            o.threads,
            o.events as f64 / o.wall_seconds.max(1e-9) / 1e6
        );
        say!("report: {}", o.report.display());
    })?;
    Ok(ExitCode::SUCCESS)
}
