//! `atmlab reproduce rdma`: paper 003's Tables 1 and 2 and Figures 8-11 (the logic is
//! `atmlab_lab::reproduce::rdma`).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use atmlab_lab::reproduce::rdma::{RdmaOptions, run as reproduce};

use super::ReproduceArgs;

/// Runs the RDMA reproduction and says where the report went.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    // Each experiment is logged as it starts ("experiment 2/5: ...").
    crate::live::init_logging_for_reproduction();
    let report = reproduce(
        out,
        &RdmaOptions {
            quick: args.quick,
            threads: args.threads,
            progress: None,
        },
    )
    .with_context(|| format!("reproducing paper 003 into {}", out.display()))?;
    let experiments: Vec<serde_json::Value> = report
        .experiments
        .iter()
        .map(|e| serde_json::json!({"name": e.name, "events": e.events, "seconds": e.wall_seconds}))
        .collect();
    let fields = serde_json::json!({
        "report": report.report,
        "files": report.files,
        "experiments": experiments,
    });
    super::summary(args, out, fields, || {
        for e in &report.experiments {
            say!("{}: {} events in {:.1} s", e.name, e.events, e.wall_seconds);
        }
        say!("report: {}", report.report.display());
        say!("{} files in {}", report.files.len(), out.display());
    })?;
    Ok(ExitCode::SUCCESS)
}
