//! `atmlab cm connect | add-leaf | drop-leaf | modify | release | list | status`: a
//! command-line client of a running connection manager (cm.proto's
//! `atmlab.v1.ConnectionManager`, any kind: sequential, xbind or tina), so a user can set
//! up, grow, prune, change and release connections by hand, point-to-point or
//! point-to-multipoint (papers 000 §II-C and 001 §4), and see what each one holds on
//! every switch.

use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use atmlab_core::ids::VcId;
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::CellRate;
use atmlab_fabric::live::convert as cv;
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::connection_manager_client::ConnectionManagerClient;
use clap::Args;
use tonic::transport::Channel;

use crate::live::{self as shell, Security};

/// Which manager to talk to, as whom.
#[derive(Debug, Args)]
pub struct Target {
    /// The connection manager's gRPC address (`atmlab up` writes it to net.json).
    #[arg(long)]
    cm: String,
    /// Our certificate name.
    #[arg(long = "as", default_value = "admin")]
    who: String,
    /// Print the answer as JSON (a connection as one object, `list` one per line).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    security: Security,
}

/// The client operations.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Set up a connection from a host to one host or several (point-to-multipoint), CBR
    /// at the given peak cell rate; prints it.
    Connect {
        #[command(flatten)]
        target: Target,
        /// The source host.
        #[arg(long)]
        from: String,
        /// The destination host(s), comma-separated: several make a multipoint tree.
        #[arg(long, value_delimiter = ',', required = true)]
        to: Vec<String>,
        /// Peak cell rate, cells/s.
        #[arg(long, default_value_t = 1000.0)]
        pcr: f64,
        /// A label kept with the connection.
        #[arg(long, default_value = "cli")]
        tag: String,
    },
    /// Add a leaf (a host) to connection ID while it carries cells; prints it.
    AddLeaf {
        #[command(flatten)]
        target: Target,
        /// The connection.
        id: u64,
        /// The new leaf's host.
        host: String,
    },
    /// Drop leaf HOST of connection ID (not its last); prints what remains.
    DropLeaf {
        #[command(flatten)]
        target: Target,
        /// The connection.
        id: u64,
        /// The leaf's host.
        host: String,
    },
    /// Change connection ID's peak cell rate in place (admission control on every hop;
    /// refused, nothing changes); prints it.
    Modify {
        #[command(flatten)]
        target: Target,
        /// The connection.
        id: u64,
        /// The new peak cell rate, cells/s.
        #[arg(long)]
        pcr: f64,
    },
    /// Release connection ID.
    Release {
        #[command(flatten)]
        target: Target,
        /// The connection.
        id: u64,
    },
    /// List the manager's connections.
    List {
        #[command(flatten)]
        target: Target,
    },
    /// The manager's kind and counters.
    Status {
        #[command(flatten)]
        target: Target,
    },
}

fn cell(pcr: f64) -> Result<pb::CellQos> {
    if !pcr.is_finite() || pcr <= 0.0 {
        bail!("--pcr {pcr}: a peak cell rate is a positive number of cells/s");
    }
    Ok(pb::CellQos {
        traffic: Some(cv::pb_traffic(&TrafficDescriptor::cbr(CellRate(pcr)), 0.0)),
        ..Default::default()
    })
}

fn vc(v: Option<&pb::VcId>) -> String {
    cv::vc_id(v).map_or_else(|_| "-".into(), |v: VcId| v.to_string())
}

/// A connection as one JSON object: what [`describe`] prints, field by field.
fn describe_json(i: &pb::ConnectionInfo) -> serde_json::Value {
    let pcr = cv::traffic(i.cell_qos.and_then(|c| c.traffic).as_ref())
        .ok()
        .map(|(t, _)| t.pcr.per_sec());
    let hops: Vec<serde_json::Value> = i
        .hops
        .iter()
        .map(atmlab_lab::dashboard::collect::hop_json)
        .collect();
    let leaves: Vec<serde_json::Value> = i
        .destinations
        .iter()
        .zip(&i.destination_vcs)
        .map(|(d, v)| serde_json::json!({"host": d, "vc": vc(Some(v))}))
        .collect();
    serde_json::json!({
        "id": i.id,
        "source": i.source,
        "destinations": i.destinations,
        "pcr_cells_per_s": pcr,
        "tag": i.tag,
        "setup_ms": i.setup_us as f64 / 1000.0,
        "invocations": i.invocations,
        "source_vc": vc(i.source_vc.as_ref()),
        "hops": hops,
        "leaves": leaves,
    })
}

/// Prints a connection as [`describe`] or, with `--json`, as one JSON object.
fn show(i: &pb::ConnectionInfo, json: bool) {
    if json {
        println!("{}", describe_json(i));
    } else {
        print!("{}", describe(i));
    }
}

/// A connection as a tree: one line per switch connection, its branches, the leaves.
pub fn describe(i: &pb::ConnectionInfo) -> String {
    let pcr = cv::traffic(i.cell_qos.and_then(|c| c.traffic).as_ref())
        .map(|(t, _)| format!("{:.0} cells/s", t.pcr.per_sec()))
        .unwrap_or_else(|_| "-".into());
    let mut s = format!(
        "connection {}: {} -> {} ({pcr}, tag {:?}, set up in {:.3} ms, {} invocations)\n",
        i.id,
        i.source,
        i.destinations.join(", "),
        i.tag,
        i.setup_us as f64 / 1000.0,
        i.invocations
    );
    s += &format!("  source VC {}\n", vc(i.source_vc.as_ref()));
    for h in &i.hops {
        let outs = atmlab_lab::dashboard::collect::hop_outs(h);
        s += &format!(
            "  {} connection {}: in {}:{} -> out {}\n",
            h.switch,
            h.connection,
            h.in_port,
            vc(h.in_id.as_ref()),
            outs.join(", ")
        );
    }
    for (d, v) in i.destinations.iter().zip(&i.destination_vcs) {
        s += &format!("  leaf {d} on VC {}\n", vc(Some(v)));
    }
    s
}

async fn client(t: &Target) -> Result<ConnectionManagerClient<Channel>> {
    t.security.peer(&t.cm);
    let id = t.security.identity(&t.who)?;
    let a_manager = atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Cm);
    let ch = atmlab_rpc::channel_to(&t.cm, id.as_ref(), a_manager)
        .await
        .with_context(|| format!("connecting to the connection manager at {}", t.cm))?;
    Ok(ConnectionManagerClient::new(ch))
}

fn refused(what: &str, e: tonic::Status) -> anyhow::Error {
    if e.code() == tonic::Code::Unimplemented && e.message().is_empty() {
        return anyhow!("{what}: wrong service: the server at --cm is not a connection manager");
    }
    anyhow!("{what} refused ({:?}): {}", e.code(), e.message())
}

/// Runs one client command.
pub fn run(cmd: ClientCommand) -> Result<ExitCode> {
    shell::init_logging_at("warn");
    shell::runtime()?.block_on(async move {
        match cmd {
            ClientCommand::Connect {
                target,
                from,
                to,
                pcr,
                tag,
            } => {
                let cell_qos = Some(cell(pcr)?);
                let i = client(&target)
                    .await?
                    .add_connection(pb::AddConnectionRequest {
                        source: from,
                        destinations: to,
                        cell_qos,
                        tag,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| refused("AddConnection", e))?
                    .into_inner();
                show(&i, target.json);
            }
            ClientCommand::AddLeaf { target, id, host } => {
                let i = client(&target)
                    .await?
                    .add_leaf(pb::AddLeafRequest {
                        id,
                        destination: host,
                    })
                    .await
                    .map_err(|e| refused("AddLeaf", e))?
                    .into_inner();
                show(&i, target.json);
            }
            ClientCommand::DropLeaf { target, id, host } => {
                let i = client(&target)
                    .await?
                    .drop_leaf(pb::DropLeafRequest {
                        id,
                        destination: host,
                    })
                    .await
                    .map_err(|e| refused("DropLeaf", e))?
                    .into_inner();
                show(&i, target.json);
            }
            ClientCommand::Modify { target, id, pcr } => {
                let cell_qos = Some(cell(pcr)?);
                let i = client(&target)
                    .await?
                    .modify_connection(pb::ModifyConnectionRequest {
                        id,
                        cell_qos,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| refused("ModifyConnection", e))?
                    .into_inner();
                show(&i, target.json);
            }
            ClientCommand::Release { target, id } => {
                client(&target)
                    .await?
                    .delete_connection(pb::DeleteConnectionRequest { id })
                    .await
                    .map_err(|e| refused("DeleteConnection", e))?;
                if target.json {
                    println!("{}", serde_json::json!({ "released": id }));
                } else {
                    println!("connection {id} released");
                }
            }
            ClientCommand::List { target } => {
                let l = client(&target)
                    .await?
                    .list_connections(pb::ListCmConnectionsRequest {})
                    .await
                    .map_err(|e| refused("ListConnections", e))?
                    .into_inner();
                if l.connections.is_empty() && !target.json {
                    println!("no connections");
                }
                for i in &l.connections {
                    show(i, target.json);
                }
            }
            ClientCommand::Status { target } => {
                let s = client(&target)
                    .await?
                    .get_status(pb::GetStatusRequest {})
                    .await
                    .map_err(|e| refused("GetStatus", e))?
                    .into_inner();
                if target.json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "kind": s.kind,
                            "active": s.active,
                            "established": s.established,
                            "released": s.released,
                            "blocked": s.blocked,
                            "failed": s.failed,
                            "rollbacks": s.rollbacks,
                            "invocations": s.invocations,
                            "recovery": s.recovery,
                        })
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                println!(
                    "kind {}: {} active, {} established, {} released, {} blocked, {} failed, {} rollbacks",
                    s.kind, s.active, s.established, s.released, s.blocked, s.failed, s.rollbacks
                );
                for (iface, n) in &s.invocations {
                    println!("  {n} invocations on {iface}");
                }
                for line in &s.recovery {
                    println!("  {line}");
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
