//! `atmlab reproduce xbind`: paper 000's throughput-delay curves, VPI/VCI cache
//! dimensioning (Fig. 9, Table I) and remote invocations per call (Fig. 10).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use super::ReproduceArgs;

/// Runs the xbind reproduction.
pub fn run(_args: &ReproduceArgs, _out: &Path) -> Result<ExitCode> {
    Ok(crate::not_yet("reproduce xbind", "issue 5, in progress"))
}
