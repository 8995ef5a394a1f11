//! Conversions between the `atmlab.v1` messages and the switch core's types, written by
//! hand at the boundary (DESIGN.md §6: the core derives no protobuf, so the IDL and the
//! core evolve apart). Every conversion from the wire validates: a field that cannot be
//! represented (a VPI past 16 bits, an unspecified service class) is an
//! `INVALID_ARGUMENT` naming the field, before the switch sees the request.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::{BitRate, CellRate};
use atmlab_rpc::v1 as pb;

use crate::config::Interface;
use crate::error::{ErrorKind, FabricError};
use crate::live::backend::Description;
use crate::switch::*;

type R<T> = Result<T, FabricError>;

fn u16_of(v: u32, what: &'static str) -> R<u16> {
    u16::try_from(v).map_err(|_| FabricError::Invalid(what))
}

/// A port number from the wire.
pub fn port(v: u32) -> R<PortId> {
    u16_of(v, "a port number does not fit in 16 bits").map(PortId)
}

/// A VPI/VCI pair from the wire.
pub fn vc_id(v: Option<&pb::VcId>) -> R<VcId> {
    let v = v.ok_or(FabricError::Invalid("an identifier (VcId) is missing"))?;
    Ok(VcId::new(
        u16_of(v.vpi, "a VPI does not fit in 16 bits")?,
        u16_of(v.vci, "a VCI does not fit in 16 bits")?,
    ))
}

/// A VPI/VCI pair to the wire.
pub fn pb_vc_id(v: VcId) -> pb::VcId {
    pb::VcId {
        vpi: u32::from(v.vpi.0),
        vci: u32::from(v.vci.0),
    }
}

fn branch(b: &pb::Branch) -> R<Branch> {
    Ok(Branch {
        port: port(b.port)?,
        id: vc_id(b.id.as_ref())?,
    })
}

fn pb_branch(b: &Branch) -> pb::Branch {
    pb::Branch {
        port: u32::from(b.port.0),
        id: Some(pb_vc_id(b.id)),
    }
}

/// A service class from the wire; `None` for UNSPECIFIED or a number the IDL does not
/// know. Every conversion of the IDL's service class goes through this pair.
pub fn service_class(v: i32) -> Option<ServiceClass> {
    match pb::ServiceClass::try_from(v) {
        Ok(pb::ServiceClass::Cbr) => Some(ServiceClass::Cbr),
        Ok(pb::ServiceClass::RtVbr) => Some(ServiceClass::RtVbr),
        Ok(pb::ServiceClass::NrtVbr) => Some(ServiceClass::NrtVbr),
        Ok(pb::ServiceClass::Ubr) => Some(ServiceClass::Ubr),
        _ => None,
    }
}

/// A service class to the wire.
pub fn pb_service_class(class: ServiceClass) -> i32 {
    (match class {
        ServiceClass::Cbr => pb::ServiceClass::Cbr,
        ServiceClass::RtVbr => pb::ServiceClass::RtVbr,
        ServiceClass::NrtVbr => pb::ServiceClass::NrtVbr,
        ServiceClass::Ubr => pb::ServiceClass::Ubr,
    }) as i32
}

/// A traffic descriptor (and the target CLR) from the wire.
pub fn traffic(t: Option<&pb::TrafficDescriptor>) -> R<(TrafficDescriptor, f64)> {
    let t = t.ok_or(FabricError::Invalid("the traffic descriptor is missing"))?;
    let class = service_class(t.service_class).ok_or(FabricError::Invalid(
        "traffic.service_class is unspecified or unknown",
    ))?;
    let vbr = matches!(class, ServiceClass::RtVbr | ServiceClass::NrtVbr);
    Ok((
        TrafficDescriptor {
            class,
            pcr: CellRate(t.pcr),
            scr: CellRate(if vbr { t.scr } else { t.pcr }),
            mbs: if vbr { t.mbs } else { 1 },
            cdvt_ps: 0,
        },
        t.clr,
    ))
}

/// A traffic descriptor to the wire.
pub fn pb_traffic(t: &TrafficDescriptor, clr: f64) -> pb::TrafficDescriptor {
    pb::TrafficDescriptor {
        service_class: pb_service_class(t.class),
        pcr: t.pcr.per_sec(),
        scr: t.scr.per_sec(),
        mbs: t.mbs,
        clr,
    }
}

fn kind(k: i32) -> R<ConnectionKind> {
    match pb::ConnectionKind::try_from(k) {
        Ok(pb::ConnectionKind::Vc) | Ok(pb::ConnectionKind::Unspecified) => Ok(ConnectionKind::Vc),
        Ok(pb::ConnectionKind::Vp) => Ok(ConnectionKind::Vp),
        Err(_) => Err(FabricError::Invalid("unknown connection kind")),
    }
}

fn pb_kind(k: ConnectionKind) -> i32 {
    match k {
        ConnectionKind::Vc => pb::ConnectionKind::Vc as i32,
        ConnectionKind::Vp => pb::ConnectionKind::Vp as i32,
    }
}

/// Reserve from the wire.
pub fn reserve(r: &pb::ReserveRequest) -> R<Reserve> {
    Ok(Reserve {
        port: port(r.port)?,
        count: r.count,
        vpi: u16_of(r.vpi, "a VPI does not fit in 16 bits")?,
        vp: r.vp,
        within: r
            .within
            .as_ref()
            .map(|w| {
                Ok::<_, FabricError>((
                    u16_of(w.min, "within.min does not fit in 16 bits")?,
                    u16_of(w.max, "within.max does not fit in 16 bits")?,
                ))
            })
            .transpose()?,
        owner: r.owner.as_str().into(),
    })
}

/// Unreserve from the wire.
pub fn unreserve(r: &pb::UnreserveRequest) -> R<Unreserve> {
    Ok(Unreserve {
        port: port(r.port)?,
        ids: r.ids.iter().map(|i| vc_id(Some(i))).collect::<R<_>>()?,
        owner: r.owner.as_str().into(),
    })
}

/// Commit from the wire.
pub fn commit(c: &pb::CommitRequest) -> R<Commit> {
    let (traffic, clr) = traffic(c.traffic.as_ref())?;
    Ok(Commit {
        kind: kind(c.kind)?,
        in_port: port(c.in_port)?,
        in_id: vc_id(c.in_id.as_ref())?,
        branches: c.branches.iter().map(branch).collect::<R<_>>()?,
        traffic,
        clr,
        buffer_cells: c.buffer_cells,
        owner: c.owner.as_str().into(),
        replenish: c.replenish,
        tag: c.tag.clone(),
    })
}

/// Commit to the wire.
pub fn pb_commit(c: &Commit) -> pb::CommitRequest {
    pb::CommitRequest {
        kind: pb_kind(c.kind),
        in_port: u32::from(c.in_port.0),
        in_id: Some(pb_vc_id(c.in_id)),
        branches: c.branches.iter().map(pb_branch).collect(),
        traffic: Some(pb_traffic(&c.traffic, c.clr)),
        buffer_cells: c.buffer_cells,
        owner: c.owner.to_string(),
        replenish: c.replenish,
        tag: c.tag.clone(),
    }
}

fn branch_change(connection: u64, b: Option<&pb::Branch>) -> R<BranchChange> {
    Ok(BranchChange {
        connection,
        branch: branch(b.ok_or(FabricError::Invalid("the branch is missing"))?)?,
    })
}

/// A command from the wire.
pub fn command(c: &pb::Command) -> R<Command> {
    use pb::command::Op;
    match c
        .op
        .as_ref()
        .ok_or(FabricError::Invalid("a command has no operation"))?
    {
        Op::Reserve(r) => Ok(Command::Reserve(reserve(r)?)),
        Op::Unreserve(r) => Ok(Command::Unreserve(unreserve(r)?)),
        Op::Commit(r) => Ok(Command::Commit(commit(r)?)),
        Op::Release(r) => Ok(Command::Release(Release {
            connection: r.connection,
            keep_reserved: r.keep_reserved,
        })),
        Op::AddBranch(r) => Ok(Command::AddBranch(branch_change(
            r.connection,
            r.branch.as_ref(),
        )?)),
        Op::DropBranch(r) => Ok(Command::DropBranch(branch_change(
            r.connection,
            r.branch.as_ref(),
        )?)),
        Op::Modify(r) => {
            let (traffic, clr) = traffic(r.traffic.as_ref())?;
            Ok(Command::Modify(Modify {
                connection: r.connection,
                traffic,
                clr,
            }))
        }
    }
}

/// A command to the wire.
pub fn pb_command(c: &Command) -> pb::Command {
    use pb::command::Op;
    let op = match c {
        Command::Reserve(r) => Op::Reserve(pb::ReserveRequest {
            port: u32::from(r.port.0),
            count: r.count,
            vpi: u32::from(r.vpi),
            vp: r.vp,
            within: r.within.map(|(a, b)| pb::Range {
                min: u32::from(a),
                max: u32::from(b),
            }),
            owner: r.owner.to_string(),
        }),
        Command::Unreserve(u) => Op::Unreserve(pb::UnreserveRequest {
            port: u32::from(u.port.0),
            ids: u.ids.iter().map(|&i| pb_vc_id(i)).collect(),
            owner: u.owner.to_string(),
        }),
        Command::Commit(c) => Op::Commit(pb_commit(c)),
        Command::Release(r) => Op::Release(pb::ReleaseRequest {
            connection: r.connection,
            keep_reserved: r.keep_reserved,
        }),
        Command::AddBranch(b) => Op::AddBranch(pb::AddBranchRequest {
            connection: b.connection,
            branch: Some(pb_branch(&b.branch)),
        }),
        Command::DropBranch(b) => Op::DropBranch(pb::DropBranchRequest {
            connection: b.connection,
            branch: Some(pb_branch(&b.branch)),
        }),
        Command::Modify(m) => Op::Modify(pb::ModifyRequest {
            connection: m.connection,
            traffic: Some(pb_traffic(&m.traffic, m.clr)),
        }),
    };
    pb::Command { op: Some(op) }
}

/// Commands with their request ids as one Stream request from `client_id`: the first
/// in the request's own fields, the rest in `more`, so that they travel as one gRPC
/// message and are answered in one reply. None for no command.
pub fn stream_request(client_id: &str, commands: &[(u64, Command)]) -> Option<pb::StreamRequest> {
    let ((id, first), rest) = commands.split_first()?;
    Some(pb::StreamRequest {
        client_id: client_id.to_string(),
        request_id: *id,
        command: Some(pb_command(first)),
        more: rest
            .iter()
            .map(|(id, c)| pb::StreamCommand {
                request_id: *id,
                command: Some(pb_command(c)),
            })
            .collect(),
    })
}

/// A Stream reply's answers in order, each with its request id: the reply's own, then
/// its `more`.
pub fn stream_answers(
    r: &pb::StreamReply,
) -> impl Iterator<Item = (u64, Result<Reply, FabricError>)> + '_ {
    let answer = |x: Option<&pb::CommandResult>| match x {
        Some(x) => result(x),
        None => Err(FabricError::Invalid("a stream reply without a result")),
    };
    std::iter::once((r.request_id, answer(r.result.as_ref()))).chain(
        r.more
            .iter()
            .map(move |m| (m.request_id, answer(m.result.as_ref()))),
    )
}

/// A command's result to the wire.
pub fn pb_result(r: &Result<Reply, FabricError>) -> pb::CommandResult {
    use pb::command_result::Reply as PR;
    match r {
        Err(e) => pb::CommandResult {
            code: e.kind().code(),
            message: e.to_string(),
            reply: None,
        },
        Ok(reply) => pb::CommandResult {
            code: 0,
            message: String::new(),
            reply: Some(match reply {
                Reply::Reserved(ids) => PR::Reserve(pb::ReserveReply {
                    ids: ids.iter().map(|&i| pb_vc_id(i)).collect(),
                }),
                Reply::Unreserved => PR::Unreserve(pb::UnreserveReply {}),
                Reply::Committed {
                    connection,
                    replenished,
                } => PR::Commit(pb::CommitReply {
                    connection: *connection,
                    replenished: replenished.iter().map(|&i| pb_vc_id(i)).collect(),
                }),
                Reply::Released => PR::Release(pb::ReleaseReply {}),
                Reply::BranchAdded => PR::AddBranch(pb::AddBranchReply {}),
                Reply::BranchDropped => PR::DropBranch(pb::DropBranchReply {}),
                Reply::Modified => PR::Modify(pb::ModifyReply {}),
            }),
        },
    }
}

/// A command's result from the wire.
pub fn result(r: &pb::CommandResult) -> Result<Reply, FabricError> {
    use pb::command_result::Reply as PR;
    if r.code != 0 {
        return Err(FabricError::Remote {
            kind: ErrorKind::from_code(r.code),
            message: r.message.clone(),
        });
    }
    let ids = |v: &[pb::VcId]| v.iter().map(|i| vc_id(Some(i))).collect::<R<Vec<_>>>();
    match r
        .reply
        .as_ref()
        .ok_or(FabricError::Invalid("a successful result has no reply"))?
    {
        PR::Reserve(x) => Ok(Reply::Reserved(ids(&x.ids)?)),
        PR::Unreserve(_) => Ok(Reply::Unreserved),
        PR::Commit(x) => Ok(Reply::Committed {
            connection: x.connection,
            replenished: ids(&x.replenished)?,
        }),
        PR::Release(_) => Ok(Reply::Released),
        PR::AddBranch(_) => Ok(Reply::BranchAdded),
        PR::DropBranch(_) => Ok(Reply::BranchDropped),
        PR::Modify(_) => Ok(Reply::Modified),
    }
}

/// A connection to the wire.
pub fn pb_connection(c: &Connection) -> pb::Connection {
    pb::Connection {
        connection: c.id,
        kind: pb_kind(c.kind),
        in_port: u32::from(c.in_port.0),
        in_id: Some(pb_vc_id(c.in_id)),
        branches: c.branches.iter().map(pb_branch).collect(),
        traffic: Some(pb_traffic(&c.traffic, c.clr)),
        admitted: c.admitted,
        buffer_cells: c.buffer_cells,
        owner: c.owner.clone(),
        tag: c.tag.clone(),
    }
}

/// A connection from the wire (counters are not carried by ListConnections).
pub fn connection(c: &pb::Connection) -> R<Connection> {
    let (traffic, clr) = traffic(c.traffic.as_ref())?;
    Ok(Connection {
        id: c.connection,
        kind: kind(c.kind)?,
        in_port: port(c.in_port)?,
        in_id: vc_id(c.in_id.as_ref())?,
        branches: c.branches.iter().map(branch).collect::<R<_>>()?,
        traffic,
        clr,
        admitted: c.admitted,
        buffer_cells: c.buffer_cells,
        owner: c.owner.clone(),
        tag: c.tag.clone(),
        cells: 0,
        cells_discarded: 0,
    })
}

/// A reservation to the wire.
pub fn pb_reservation(r: &Reservation) -> pb::Reservation {
    pb::Reservation {
        port: u32::from(r.port.0),
        id: Some(pb_vc_id(r.id)),
        owner: r.owner.clone(),
    }
}

/// A reservation from the wire.
pub fn reservation(r: &pb::Reservation) -> R<Reservation> {
    Ok(Reservation {
        port: port(r.port)?,
        id: vc_id(r.id.as_ref())?,
        owner: r.owner.clone(),
    })
}

/// Describe to the wire.
pub fn pb_description(d: &Description) -> pb::SwitchDescription {
    pb::SwitchDescription {
        name: d.name.clone(),
        ports: d
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| pb::PortDescription {
                port: u32::from(p.config.id.0),
                interface: match p.config.interface {
                    Interface::Uni => pb::Interface::Uni,
                    Interface::Nni => pb::Interface::Nni,
                } as i32,
                link_rate_bps: p.config.link_rate.bps(),
                link_cell_rate: p.config.link_rate.to_cell_rate().per_sec(),
                capacity: p.config.capacity.per_sec(),
                allocated: p.allocated,
                buffer_cells: p.config.buffer_cells,
                buffer_allocated: p.buffer_allocated,
                vpi_range: Some(pb::Range {
                    min: u32::from(p.config.vpi_range.0),
                    max: u32::from(p.config.vpi_range.1),
                }),
                vci_range: Some(pb::Range {
                    min: u32::from(p.config.vci_range.0),
                    max: u32::from(p.config.vci_range.1),
                }),
                reserved: p.reserved,
                committed: p.committed,
                peer: d.peers.get(i).cloned().unwrap_or_default(),
            })
            .collect(),
        connections: d.connections,
    }
}

/// Describe from the wire (counters are not carried by Describe).
pub fn description(d: &pb::SwitchDescription) -> R<Description> {
    let mut ports = Vec::with_capacity(d.ports.len());
    let mut peers = Vec::with_capacity(d.ports.len());
    for p in &d.ports {
        let range = |r: &Option<pb::Range>| -> R<(u16, u16)> {
            let r = r
                .as_ref()
                .ok_or(FabricError::Invalid("a port range is missing"))?;
            Ok((
                u16_of(r.min, "a range bound does not fit in 16 bits")?,
                u16_of(r.max, "a range bound does not fit in 16 bits")?,
            ))
        };
        ports.push(PortStatus {
            config: crate::config::PortConfig {
                id: port(p.port)?,
                interface: if p.interface == pb::Interface::Nni as i32 {
                    Interface::Nni
                } else {
                    Interface::Uni
                },
                link_rate: BitRate(p.link_rate_bps),
                capacity: CellRate(p.capacity),
                buffer_cells: p.buffer_cells,
                clp_threshold: p.buffer_cells,
                vpi_range: range(&p.vpi_range)?,
                vci_range: range(&p.vci_range)?,
            },
            allocated: p.allocated,
            buffer_allocated: p.buffer_allocated,
            reserved: p.reserved,
            committed: p.committed,
            counters: PortCounters::default(),
            queue_cells: 0,
        });
        peers.push(p.peer.clone());
    }
    Ok(Description {
        name: d.name.clone(),
        ports,
        peers,
        connections: d.connections,
    })
}

/// The gRPC status code of an error class (every service of the IDL uses this mapping).
pub fn grpc_code(kind: ErrorKind) -> tonic::Code {
    match kind {
        ErrorKind::NotFound => tonic::Code::NotFound,
        ErrorKind::OutOfRange => tonic::Code::OutOfRange,
        ErrorKind::AlreadyExists => tonic::Code::AlreadyExists,
        ErrorKind::ResourceExhausted => tonic::Code::ResourceExhausted,
        ErrorKind::InvalidArgument => tonic::Code::InvalidArgument,
        ErrorKind::Aborted => tonic::Code::Aborted,
        ErrorKind::Unavailable => tonic::Code::Unavailable,
        ErrorKind::PermissionDenied => tonic::Code::PermissionDenied,
    }
}

/// A core error as a gRPC status.
pub fn status(e: &FabricError) -> tonic::Status {
    tonic::Status::new(grpc_code(e.kind()), e.to_string())
}

/// A gRPC status as a core error.
pub fn from_status(s: &tonic::Status) -> FabricError {
    match s.code() {
        tonic::Code::Unavailable
        | tonic::Code::Cancelled
        | tonic::Code::DeadlineExceeded
        | tonic::Code::Unknown
        | tonic::Code::Internal => {
            // A server's own Unavailable already reads "switch server unavailable: ...";
            // wrapped again it would say so twice.
            let m = s.message();
            let m = m.strip_prefix("switch server unavailable: ").unwrap_or(m);
            FabricError::Unavailable(m.to_string())
        }
        code => FabricError::Remote {
            kind: ErrorKind::from_code(code as i32),
            message: s.message().to_string(),
        },
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;

    /// An Unavailable error crossing gRPC reads as it did on the server, its prefix once.
    #[test]
    fn unavailable_crosses_grpc_with_its_prefix_once() {
        let e = FabricError::Unavailable("journal write failed: disk full".into());
        let back = from_status(&status(&e));
        assert_eq!(back.to_string(), e.to_string());
    }
}
