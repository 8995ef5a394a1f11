//! `atmlab certs`: the lab's certificate authority (mutual TLS for every control
//! interface; DESIGN.md §5).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

/// `atmlab certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    #[command(subcommand)]
    command: CertsCommand,
}

#[derive(Debug, Subcommand)]
enum CertsCommand {
    /// Make a CA and a certificate for each name (switches, managers, clients).
    Init {
        /// Where to write ca.pem, ca.key and NAME.pem / NAME.key (default: DATA/certs,
        /// under the global --data directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Replace an existing CA (invalidates every certificate it signed).
        #[arg(long)]
        force: bool,
        /// Names to certify; "admin" (the default client identity) is always added.
        names: Vec<String>,
    },
    /// Add a certificate signed by an existing CA.
    Issue {
        /// The CA's directory (default: DATA/certs).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Names to certify.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Runs `atmlab certs`.
pub fn run(args: CertsArgs) -> Result<ExitCode> {
    match args.command {
        CertsCommand::Init { dir, force, names } => {
            let dir = dir.unwrap_or_else(crate::live::certs_dir);
            let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
            if !all.contains(&"admin") {
                all.push("admin");
            }
            let files = atmlab_rpc::tls::init_certs(&dir, &all, force)
                .with_context(|| format!("making the lab CA in {}", dir.display()))?;
            println!("CA: {}", dir.join("ca.pem").display());
            for (name, f) in all.iter().zip(files) {
                println!("{name}: {} {}", f.cert.display(), f.key.display());
            }
        }
        CertsCommand::Issue { dir, names } => {
            let dir = dir.unwrap_or_else(crate::live::certs_dir);
            for name in &names {
                let f = atmlab_rpc::tls::issue_cert(&dir, name)
                    .with_context(|| format!("issuing a certificate for {name:?}"))?;
                println!("{name}: {} {}", f.cert.display(), f.key.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
