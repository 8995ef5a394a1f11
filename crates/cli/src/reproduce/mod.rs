//! `atmlab reproduce PAPER [--quick]`: regenerate a paper's tables and figures into
//! `reports/PAPER/` (DESIGN.md §4, Reports), with the paper's published numbers beside
//! ours. Each paper's reproduction lives in `atmlab_lab::reproduce`; this module only
//! parses the arguments and says where the report went.

mod gateway;
mod rdma;
mod retina;
mod smds;
mod xbind;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};

/// The papers atmlab reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Paper {
    /// Chan & Lazar, xbind connection management (paper 000).
    Xbind,
    /// Oliver et al., ReTINA (paper 001).
    Retina,
    /// Jezequel & Guerber, the SMDS server (paper 002).
    Smds,
    /// Isochronets' RDMA against the Leaky Bucket and the Virtual Clock (paper 003).
    Rdma,
    /// Buddhikot et al., the ATM-FDDI gateway (paper 004).
    Gateway,
}

impl Paper {
    /// The name used on the command line and for `reports/NAME`.
    pub fn name(self) -> &'static str {
        match self {
            Paper::Xbind => "xbind",
            Paper::Retina => "retina",
            Paper::Smds => "smds",
            Paper::Rdma => "rdma",
            Paper::Gateway => "gateway",
        }
    }
}

/// Arguments of `atmlab reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// Which paper.
    #[arg(value_enum)]
    pub paper: Paper,
    /// A short form (fewer points, shorter runs, wider confidence intervals): what CI runs.
    #[arg(long)]
    pub quick: bool,
    /// Where the report goes (default: reports/PAPER).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker threads for simulation studies (default: one per core). Results do not
    /// depend on it.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Plain text instead of mutual TLS between the live parts (live papers only).
    #[arg(long)]
    pub insecure: bool,
    /// Print the summary as one JSON object on stdout (the paper, the report and its
    /// files, the run's figures); progress goes to stderr.
    #[arg(long)]
    pub json: bool,
}

/// Prints a reproduction's summary: `fields` as one JSON object (with the paper, the
/// report directory and, when written, its results.json) under `--json`, else `text`.
fn summary(
    args: &ReproduceArgs,
    out: &std::path::Path,
    mut fields: serde_json::Value,
    text: impl FnOnce(),
) -> Result<()> {
    if !args.json {
        text();
        return Ok(());
    }
    fields["paper"] = args.paper.name().into();
    fields["quick"] = args.quick.into();
    fields["out"] = out.display().to_string().into();
    let results = out.join("results.json");
    if results.exists() {
        fields["results"] = results.display().to_string().into();
    }
    say!("{}", serde_json::to_string_pretty(&fields)?);
    Ok(())
}

/// Runs `atmlab reproduce`.
pub fn run(args: ReproduceArgs) -> Result<ExitCode> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("reports").join(args.paper.name()));
    // A reproduction runs for minutes: a report directory it cannot write is refused
    // before the first measurement, not after the last (SMDS checks its flags first).
    if args.paper != Paper::Smds {
        crate::live::writable_dir("--out", &out)?;
    }
    match args.paper {
        Paper::Xbind => xbind::run(&args, &out),
        Paper::Retina => retina::run(&args, &out),
        Paper::Rdma => rdma::run(&args, &out),
        Paper::Gateway => gateway::run(&args, &out),
        Paper::Smds => smds::run(&args, &out),
    }
}
