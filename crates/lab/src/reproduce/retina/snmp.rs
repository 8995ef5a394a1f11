//! The SNMP-like interface of §3.6 as we model it: a manager sets a cross-connect row's
//! attributes one request at a time, as SNMP SETs of the ATM-MIB's
//! `atmVcCrossConnectTable` columns (low and high interface, VPI, VCI, the traffic
//! descriptor, admin status, and last the row status `createAndGo`), each a UDP
//! request/response to an agent on the switch; the agent commits the row when its status
//! arrives. Deleting is one SET (`destroy`). No security (SNMPv1/v2c community strings
//! gave none), no BER encoding (text datagrams), no MIB walk for a free index (the
//! manager picks the row index): a lower bound of SNMP's cost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::switch::{Atomicity, Command, Commit, Release, Reply};
use tokio::net::UdpSocket;

use super::err;
use crate::LabError;

/// SETs to create a row.
pub const CREATE_SETS: u32 = 9;

pub struct Agent {
    socket: UdpSocket,
    task: tokio::task::JoinHandle<()>,
    next_row: AtomicU64,
}

impl Agent {
    pub async fn start(switch: LocalSwitch) -> Result<Agent, LabError> {
        let server = UdpSocket::bind("127.0.0.1:0")
            .await
            .map_err(|e| err("the SNMP-like agent", e))?;
        let addr = server
            .local_addr()
            .map_err(|e| err("the SNMP-like agent", e))?;
        let task = tokio::spawn(serve(server, switch));
        let socket = UdpSocket::bind("127.0.0.1:0")
            .await
            .map_err(|e| err("the SNMP-like manager", e))?;
        socket
            .connect(addr)
            .await
            .map_err(|e| err("the SNMP-like manager", e))?;
        Ok(Agent {
            socket,
            task,
            next_row: AtomicU64::new(1),
        })
    }

    pub fn stop(self) {
        self.task.abort();
    }

    async fn set(&self, row: u64, attr: &str, value: &str) -> Result<(), LabError> {
        let req = format!("SET {row} {attr} {value}");
        self.socket
            .send(req.as_bytes())
            .await
            .map_err(|e| err("SNMP-like SET", e))?;
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            self.socket.recv(&mut buf),
        )
        .await
        .map_err(|_| err("SNMP-like SET", "no response in 5 s"))?
        .map_err(|e| err("SNMP-like SET", e))?;
        let resp = String::from_utf8_lossy(&buf[..n]);
        if resp == "OK" {
            Ok(())
        } else {
            Err(err(&format!("SNMP-like SET {attr}"), resp))
        }
    }

    /// Creates the cross-connect of `c` attribute by attribute; returns the row.
    pub async fn create(&self, c: &Commit) -> Result<u64, LabError> {
        let row = self.next_row.fetch_add(1, Ordering::Relaxed);
        let b = c.branches[0];
        let sets: [(&str, String); CREATE_SETS as usize] = [
            ("lowIf", c.in_port.0.to_string()),
            ("lowVpi", c.in_id.vpi.0.to_string()),
            ("lowVci", c.in_id.vci.0.to_string()),
            ("highIf", b.port.0.to_string()),
            ("highVpi", b.id.vpi.0.to_string()),
            ("highVci", b.id.vci.0.to_string()),
            ("pcr", c.traffic.pcr.per_sec().to_string()),
            ("adminStatus", "up".into()),
            ("rowStatus", "createAndGo".into()),
        ];
        for (a, v) in sets {
            self.set(row, a, &v).await?;
        }
        Ok(row)
    }

    /// Deletes a row: one SET.
    pub async fn destroy(&self, row: u64) -> Result<(), LabError> {
        self.set(row, "rowStatus", "destroy").await
    }
}

#[derive(Default)]
struct Row {
    attrs: HashMap<String, String>,
    connection: Option<u64>,
}

async fn serve(socket: UdpSocket, switch: LocalSwitch) {
    let mut rows: HashMap<u64, Row> = HashMap::new();
    let mut buf = [0u8; 512];
    loop {
        let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
            return;
        };
        let req = String::from_utf8_lossy(&buf[..n]).to_string();
        let resp = match handle(&mut rows, &switch, &req).await {
            Ok(()) => "OK".to_string(),
            Err(e) => format!("ERR {e}"),
        };
        let _ = socket.send_to(resp.as_bytes(), peer).await;
    }
}

async fn handle(
    rows: &mut HashMap<u64, Row>,
    switch: &LocalSwitch,
    req: &str,
) -> Result<(), String> {
    let mut it = req.split(' ');
    let (Some("SET"), Some(row), Some(attr), Some(value)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return Err(format!("malformed request {req:?}"));
    };
    let row: u64 = row.parse().map_err(|_| "bad row index".to_string())?;
    match (attr, value) {
        ("rowStatus", "createAndGo") => {
            let r = rows.entry(row).or_default();
            let num = |k: &str| -> Result<u32, String> {
                r.attrs
                    .get(k)
                    .ok_or_else(|| format!("{k} not set"))?
                    .parse()
                    .map_err(|_| format!("{k} not a number"))
            };
            let pcr: f64 = r
                .attrs
                .get("pcr")
                .ok_or("pcr not set")?
                .parse()
                .map_err(|_| "pcr not a number")?;
            let c = super::probe_commit();
            let commit = Commit {
                in_port: atmlab_core::ids::PortId(num("lowIf")? as u16),
                in_id: atmlab_core::ids::VcId::new(num("lowVpi")? as u16, num("lowVci")? as u16),
                branches: vec![atmlab_fabric::switch::Branch {
                    port: atmlab_core::ids::PortId(num("highIf")? as u16),
                    id: atmlab_core::ids::VcId::new(num("highVpi")? as u16, num("highVci")? as u16),
                }],
                traffic: atmlab_core::traffic::TrafficDescriptor::cbr(
                    atmlab_core::units::CellRate(pcr),
                ),
                ..c
            };
            let res = switch
                .execute(vec![Command::Commit(commit)], Atomicity::AllOrNothing)
                .await
                .map_err(|e| e.to_string())?;
            match res.into_iter().next() {
                Some(Ok(Reply::Committed { connection, .. })) => {
                    r.connection = Some(connection);
                    Ok(())
                }
                Some(Err(e)) => Err(e.to_string()),
                _ => Err("no result".into()),
            }
        }
        ("rowStatus", "destroy") => {
            let r = rows.remove(&row).ok_or("no such row")?;
            let connection = r.connection.ok_or("row not active")?;
            let res = switch
                .execute(
                    vec![Command::Release(Release {
                        connection,
                        keep_reserved: false,
                    })],
                    Atomicity::AllOrNothing,
                )
                .await
                .map_err(|e| e.to_string())?;
            match res.into_iter().next() {
                Some(Ok(_)) => Ok(()),
                Some(Err(e)) => Err(e.to_string()),
                None => Err("no result".into()),
            }
        }
        _ => {
            rows.entry(row)
                .or_default()
                .attrs
                .insert(attr.to_string(), value.to_string());
            Ok(())
        }
    }
}
