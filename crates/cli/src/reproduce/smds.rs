//! `atmlab reproduce smds`: paper 002's Table 1, Figs. 3, 5 and 6, route recomputation
//! against network size, §3.3.2's two subnets and the CMP. The work is
//! `atmlab_lab::reproduce::smds`; this only reports.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use atmlab_lab::reproduce::smds::{Options, run as reproduce};

use super::ReproduceArgs;

/// Runs the SMDS reproduction into `out`.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    let terminal = std::io::stderr().is_terminal();
    let progress = |name: &str| {
        if terminal {
            eprintln!("smds: {name}");
        }
    };
    let opts = Options {
        quick: args.quick,
        progress: Some(&progress),
    };
    let o = reproduce(out, &opts)
        .with_context(|| format!("reproducing paper 002 into {}", out.display()))?;
    println!("smds: done in {:.1} s", o.seconds);
    println!("report: {}", o.report.display());
    Ok(ExitCode::SUCCESS)
}
