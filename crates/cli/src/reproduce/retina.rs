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
    // The lab it measures is a network in the data directory, which it holds alone.
    let _lock = shell::lock_data_dir(&opts.data_dir)?;
    shell::init_logging_for_reproduction();
    let r = shell::runtime()?.block_on(retina::run(&opts, |line| {
        if args.json {
            eprintln!("{line}");
        } else {
            say!("{line}");
        }
    }))?;
    let managers = ["tina sequential", "tina parallel", "xbind T=1"];
    let slopes: serde_json::Map<String, serde_json::Value> = managers
        .iter()
        .map(|m| (m.to_string(), r.slope_of(m).into()))
        .collect();
    let fields = serde_json::json!({
        "report": out.join("README.md"),
        "seconds": r.seconds,
        "median_setup_slope_ms_per_switch": slopes,
    });
    super::summary(args, out, fields, || {
        for m in managers {
            say!(
                "slope of the median setup time, {m}: {:+.4} ms per switch",
                r.slope_of(m)
            );
        }
        say!(
            "\nreport: {} (README.md, CSVs, PNG and SVG plots, results.json), {:.0} s",
            out.display(),
            r.seconds
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
