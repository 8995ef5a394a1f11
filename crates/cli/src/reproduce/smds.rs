//! `atmlab reproduce smds`: paper 002's Table 1, Figs. 3, 5 and 6, route recomputation
//! against network size, §3.3.2's two subnets and the CMP. The work is
//! `atmlab_lab::reproduce::smds`; this only reports.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use atmlab_lab::reproduce::smds::{Options, run as reproduce};

use super::ReproduceArgs;

/// Runs the SMDS reproduction into `out`.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    // SMDS runs over plain UDP (no TLS, no certificates), and its measurements choose
    // their own threads and processes: these flags of `reproduce` mean nothing here, so
    // they are refused rather than ignored.
    if args.insecure {
        bail!("reproduce smds: --insecure does not apply (SMDS servers speak plain UDP)");
    }
    if args.threads != 0 {
        bail!("reproduce smds: --threads does not apply (the measurements set their own)");
    }
    crate::live::writable_dir("--out", out)?;
    // Each step is logged as it starts ("experiment 2/9: ...").
    crate::live::init_logging_for_reproduction();
    let opts = Options {
        quick: args.quick,
        // Figs. 5 and 6 run their nodes as `atmlab smds serve` processes of this binary.
        server_exe: Some(
            std::env::current_exe().context("finding the atmlab binary for smds serve")?,
        ),
        progress: None,
    };
    let o = reproduce(out, &opts)
        .with_context(|| format!("reproducing paper 002 into {}", out.display()))?;
    let fields = serde_json::json!({
        "report": o.report,
        "seconds": o.seconds,
    });
    super::summary(args, out, fields, || {
        say!("smds: done in {:.1} s", o.seconds);
        say!("report: {}", o.report.display());
    })?;
    Ok(ExitCode::SUCCESS)
}
