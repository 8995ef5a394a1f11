//! `atmlab reproduce retina`: paper 001's setup time against path length for TINA
//! (sequential and parallel sub-connection setup) and xbind, the remote invocations per
//! call, and the §3 switch-interface table, measured on a live chain of switch servers;
//! the work is in `atmlab_lab::reproduce::retina`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use atmlab_lab::reproduce::retina::{self, RetinaOptions};

use super::ReproduceArgs;
use crate::live as shell;

/// Runs the ReTINA reproduction.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    let opts = RetinaOptions {
        out: out.to_path_buf(),
        data_dir: crate::live::data_dir(),
        insecure: args.insecure,
        quick: args.quick,
    };
    shell::init_logging_at("warn");
    let r = shell::runtime()?.block_on(retina::run(&opts, |line| println!("{line}")))?;
    for m in ["tina sequential", "tina parallel", "xbind T=1"] {
        println!(
            "slope of the median setup time, {m}: {:+.4} ms per switch",
            r.slope_of(m)
        );
    }
    println!(
        "\nreport: {} (README.md, CSVs, PNG and SVG plots, results.json), {:.0} s",
        out.display(),
        r.seconds
    );
    Ok(ExitCode::SUCCESS)
}
