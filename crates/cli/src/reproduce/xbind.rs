//! `atmlab reproduce xbind`: paper 000's baseline, throughput-delay curves (Figs. 6, 7,
//! 11), VPI/VCI cache dimensioning (Fig. 9, Table I) and remote invocations per call
//! (Fig. 10), measured on the live laboratory; the work is in
//! `atmlab_lab::reproduce::xbind`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use atmlab_lab::reproduce::xbind::{self, XbindOptions};

use super::ReproduceArgs;
use crate::live as shell;

/// Runs the xbind reproduction.
pub fn run(args: &ReproduceArgs, out: &Path) -> Result<ExitCode> {
    let opts = XbindOptions {
        out: out.to_path_buf(),
        data_dir: crate::live::data_dir(),
        insecure: args.insecure,
        quick: args.quick,
    };
    // The lab it measures is a network in the data directory, which it holds alone.
    let _lock = shell::lock_data_dir(&opts.data_dir)?;
    shell::init_logging_for_reproduction();
    let r = shell::runtime()?.block_on(xbind::run(&opts, |line| {
        if args.json {
            eprintln!("{line}");
        } else {
            say!("{line}");
        }
    }))?;
    let fields = serde_json::json!({
        "report": out.join("README.md"),
        "seconds": r.seconds,
    });
    super::summary(args, out, fields, || {
        say!(
            "\nreport: {} (README.md, CSVs, PNG and SVG plots, results.json), {:.0} s",
            out.display(),
            r.seconds
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
