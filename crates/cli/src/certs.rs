//! `atmlab certs`: the lab's certificate authority (mutual TLS for every control
//! interface; DESIGN.md §5).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use atmlab_rpc::tls::{Role, Subject};
use clap::{Args, Subcommand};

/// `atmlab certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    #[command(subcommand)]
    command: CertsCommand,
    /// Print what was made as one JSON object (the CA's path, each certificate's role,
    /// name and files).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum CertsCommand {
    /// Make a CA and a certificate for each subject (switches, managers, clients).
    Init {
        /// Where to write ca.pem, ca.key and NAME.pem / NAME.key (default: DATA/certs,
        /// under the global --data directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Replace an existing CA (invalidates every certificate it signed).
        #[arg(long)]
        force: bool,
        /// The role of each NAME given without one.
        #[arg(long, value_parser = parse_role)]
        role: Option<Role>,
        /// Subjects to certify, `ROLE:NAME` or `NAME` with --role; `admin:admin` (the
        /// default client identity) is always added. Roles: admin, cm (a manager,
        /// named for its owner), switch, host, names, observer.
        names: Vec<String>,
    },
    /// Add certificates signed by an existing CA.
    Issue {
        /// The CA's directory (default: DATA/certs).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The role of each NAME given without one: admin (every command), cm (a
        /// connection manager: switch commands for the owner NAME), switch, host, names
        /// (read, register their own names), observer (read only).
        #[arg(long, value_parser = parse_role)]
        role: Option<Role>,
        /// Names to certify (`NAME` with --role, or `ROLE:NAME`).
        #[arg(required = true)]
        names: Vec<String>,
    },
}

fn parse_role(s: &str) -> Result<Role, String> {
    s.parse().map_err(|e: atmlab_rpc::RpcError| e.to_string())
}

/// Each of `names` as a subject: `ROLE:NAME`, or `NAME` with `role`.
fn subjects(names: &[String], role: Option<Role>) -> Result<Vec<Subject>> {
    names
        .iter()
        .map(|n| match (n.split_once(':'), role) {
            (Some(_), _) => n.parse::<Subject>().with_context(|| format!("{n:?}")),
            (None, Some(r)) => Ok(Subject::new(r, n.clone())),
            (None, None) => bail!(
                "{n:?} has no role: give --role (admin, cm, switch, host, names, observer) \
                 or write it as ROLE:NAME"
            ),
        })
        .collect()
}

/// Runs `atmlab certs`.
pub fn run(args: CertsArgs) -> Result<ExitCode> {
    let json = args.json;
    let (ca, made) = match args.command {
        CertsCommand::Init {
            dir,
            force,
            role,
            names,
        } => {
            let dir = dir.unwrap_or_else(crate::live::certs_dir);
            let mut all = subjects(&names, role)?;
            let admin = Subject::new(Role::Admin, "admin");
            if !all.iter().any(|s| s.name == admin.name) {
                all.push(admin);
            }
            let files = atmlab_rpc::tls::init_certs(&dir, &all, force)
                .with_context(|| format!("making the lab CA in {}", dir.display()))?;
            (
                Some(dir.join("ca.pem")),
                all.into_iter().zip(files).collect(),
            )
        }
        CertsCommand::Issue { dir, role, names } => {
            let dir = dir.unwrap_or_else(crate::live::certs_dir);
            let mut made = Vec::new();
            for s in subjects(&names, role)? {
                let f = atmlab_rpc::tls::issue_cert(&dir, &s)
                    .with_context(|| format!("issuing a certificate for {s}"))?;
                made.push((s, f));
            }
            (None, made)
        }
    };
    let made: Vec<(Subject, atmlab_rpc::tls::TlsFiles)> = made;
    if json {
        let certs: Vec<serde_json::Value> = made
            .iter()
            .map(|(s, f)| {
                serde_json::json!({
                    "role": s.role.as_str(),
                    "name": s.name,
                    "certificate": f.cert.display().to_string(),
                    "key": f.key.display().to_string(),
                })
            })
            .collect();
        let v = serde_json::json!({
            "ca": ca.map(|p| p.display().to_string()),
            "certificates": certs,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if let Some(ca) = ca {
            println!("CA: {}", ca.display());
        }
        for (s, f) in &made {
            println!("{s}: {} {}", f.cert.display(), f.key.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
