//! Driving a switch server, as a connection manager does (paper 000 §II-B: xbind's
//! switch server; paper 001 §3: ReTINA's ConnectionServer, with gRPC as the ORB).
//!
//! The program builds a two-port switch from a [`SwitchConfig`], serves it over gRPC on
//! 127.0.0.1 (any free port, plain text: no TLS), connects a [`GrpcSwitch`] client, and
//! walks through one connection's life: reserve an output identifier (phase 1), commit a
//! VC cross-connect on it (phase 2), describe the switch, list its connections, release
//! the connection. Each step prints what the switch answered.
//!
//! ```text
//! cargo run -p atmlab-fabric --example drive_switch
//! ```

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::TrafficDescriptor;
use atmlab_core::units::{BitRate, CellRate};
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::{self, GrpcSwitch, SwitchService};
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::{
    Atomicity, Branch, Command, Commit, ConnectionKind, Reply, Reserve, Switch, SwitchConfig,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The switch: two ports at 155.52 Mb/s with the defaults (UNI, VPI 0-15, VCI
    // 32-4095, 1,024 cells of buffer). The core is plain data and needs no runtime.
    let config = SwitchConfig::uniform("s1", 2, BitRate(155.52e6));
    let switch = Switch::new(&config)?;

    // The switch server: the core behind a lock (no journal), served over gRPC. The same
    // `LocalSwitch` also feeds Watch, hence the second argument.
    let local = LocalSwitch::new(switch, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(grpc::serve(
        listener,
        None,
        SwitchService::new(local.clone(), Some(local)),
        async {
            let _ = stopped.await;
        },
    ));
    println!("switch server s1 listening on {addr} (gRPC, plain text)");

    // The client, as a connection manager elsewhere would hold it.
    let channel = atmlab_rpc::client_channel(&addr.to_string(), None).await?;
    let client = GrpcSwitch::new(channel);

    // Phase 1: set aside an output identifier on port 1 for owner "cm" (a connection
    // manager fills its VCI cache this way, ahead of the calls that will use it).
    let results = client
        .execute(
            vec![Command::Reserve(Reserve {
                port: PortId(1),
                count: 1,
                owner: "cm".into(),
                ..Default::default()
            })],
            Atomicity::AllOrNothing,
        )
        .await?;
    let reserved = match results.into_iter().next() {
        Some(Ok(Reply::Reserved(ids))) => ids,
        other => return Err(format!("reserve: unexpected answer {other:?}").into()),
    };
    let shown: Vec<String> = reserved.iter().map(ToString::to_string).collect();
    println!("reserved on port 1 for cm: {}", shown.join(", "));

    // Phase 2: the cross-connect port 0 VPI/VCI 0/100 -> port 1 on the reserved
    // identifier, with a CBR contract of 1,000 cells/s that admission control charges on
    // port 1.
    let out = reserved[0];
    let commit = Commit {
        kind: ConnectionKind::Vc,
        in_port: PortId(0),
        in_id: VcId::new(0, 100),
        branches: vec![Branch {
            port: PortId(1),
            id: out,
        }],
        traffic: TrafficDescriptor::cbr(CellRate(1_000.0)),
        clr: 0.0,
        buffer_cells: 16,
        owner: "cm".into(),
        replenish: 0,
        tag: "example".into(),
    };
    let (connection, _) = client.commit(&commit).await?;
    println!("committed connection {connection}: port 0 0/100 -> port 1 {out}");

    // Describe: the switch's ports with what is admitted, reserved and committed.
    let description = client.describe().await?;
    println!(
        "describe: switch {} with {} connection(s)",
        description.name, description.connections
    );
    for p in &description.ports {
        println!(
            "  port {}: {:.0} cells/s admitted, {} buffer cells set aside, {} reserved, {} committed",
            p.config.id, p.allocated, p.buffer_allocated, p.reserved, p.committed
        );
    }

    // List the connections, as an audit would.
    for c in client.connections().await? {
        let outputs: Vec<String> = c
            .branches
            .iter()
            .map(|b| format!("port {} {}", b.port, b.id))
            .collect();
        println!(
            "connection {} ({}, owner {}): port {} {} -> {}, {:.0} cells/s",
            c.id,
            c.tag,
            c.owner,
            c.in_port,
            c.in_id,
            outputs.join(", "),
            c.admitted
        );
    }

    // Release: the output identifier goes back to the pool (with `keep_reserved` it would
    // return to the owner's reservations instead).
    client.release(connection, false).await?;
    let left = client.connections().await?.len();
    println!("released connection {connection}; {left} connection(s) left");

    // A second release is refused with the reason, as every refusal is.
    match client.release(connection, false).await {
        Err(e) => println!("releasing again is refused: {e}"),
        Ok(()) => println!("releasing again succeeded (unexpected)"),
    }

    // Stop the server and wait for it to finish.
    let _ = stop.send(());
    server.await??;
    println!("switch server stopped");
    Ok(())
}
