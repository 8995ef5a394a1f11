//! `atmlab reproduce rdma`: paper 003's Tables 1 and 2 and Figures 8-11 (the logic is
//! `atmlab_lab::reproduce::rdma`).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use atmlab_lab::reproduce::rdma::{RdmaOptions, run as reproduce};

use super::ReproduceArgs;

/// Runs the RDMA reproduction and says where the report went.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    let progress = |line: &str| {
        if std::io::stderr().is_terminal() {
            eprintln!("{line}");
        }
    };
    let report = reproduce(
        out,
        &RdmaOptions {
            quick: args.quick,
            threads: args.threads,
            progress: Some(&progress),
        },
    )
    .with_context(|| format!("reproducing paper 003 into {}", out.display()))?;
    for e in &report.experiments {
        println!("{}: {} events in {:.1} s", e.name, e.events, e.wall_seconds);
    }
    println!("report: {}", report.report.display());
    println!("{} files in {}", report.files.len(), out.display());
    Ok(ExitCode::SUCCESS)
}
