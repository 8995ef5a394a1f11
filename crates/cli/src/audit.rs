//! `atmlab audit`: check a running network (issue 10): every connection a connection
//! manager holds exists on each of its switches and nothing else does, and every port's
//! books add up. The work is `atmlab_control::audit`.

use std::process::ExitCode;

use anyhow::Result;
use atmlab_control::audit::{AuditOptions, audit_network};
use clap::Args;

use crate::live::{self as shell, Security};

/// `atmlab audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The registry that lists the switch servers and managers: the name service's URL,
    /// or an etcd cluster, etcd://HOST:PORT,HOST:PORT,... (etcds:// over mutual TLS).
    #[arg(long, visible_alias = "registry", value_name = "URL")]
    names: String,
    /// No manager is running: any identifier still reserved is a leak.
    #[arg(long)]
    quiescent: bool,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    /// Our certificate name.
    #[arg(long = "as", default_value = "admin")]
    who: String,
    #[command(flatten)]
    security: Security,
}

/// Runs `atmlab audit`: exit status 0 when clean, 1 with findings.
pub fn run(args: AuditArgs) -> Result<ExitCode> {
    shell::init_logging_at("warn");
    args.security.peer(&args.names);
    let id = args.security.identity(&args.who)?;
    let opts = AuditOptions {
        quiescent: args.quiescent,
    };
    let (report, managers) =
        shell::runtime()?.block_on(audit_network(&args.names, id.as_ref(), opts))?;
    if args.json {
        let findings: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
        println!(
            "{}",
            serde_json::json!({
                "clean": report.is_clean(),
                "switches": report.switches,
                "managers": managers,
                "connections": report.connections,
                "calls": report.calls,
                "reservations": report.reservations,
                "findings": findings,
            })
        );
    } else {
        println!("managers: {}", managers.join(", "));
        println!("{report}");
    }
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
