//! The conversions between tina.proto and cm.proto messages and the performer cores'
//! plain types (paper 001 §1.2.1: the SNC interface; DESIGN.md: the cores derive no
//! protobuf, so the IDL and the cores evolve apart), all in one place: what the shells
//! receive, what they answer, and what they send to their children and switches.
//!
//! A value from the wire that a core cannot hold (an unknown service class, a port or a
//! VPI past 16 bits) is refused here with INVALID_ARGUMENT and the message the switch
//! server would have given for it. Errors cross unchanged: a core's error class maps to
//! the gRPC code of the same name, and a callee's status code comes back as the same
//! class ([`ErrorKind::Other`] for the codes the cores never produce).

use std::collections::HashMap;

use atmlab_core::ids::{PortId, VcId};
use atmlab_fabric::error::FabricError;
use atmlab_fabric::live::convert as cv;
use atmlab_rpc::v1 as pb;
use tonic::{Code, Status};

use super::Counts;
use super::core::lnc::{CallInfo, Contract};
use super::core::{
    BranchAt, BranchInfo, ErrorKind, HopInfo, HopSpec, LinkEnd, SetupSnc, SncError, SncReply,
    SncRequest, SncResult, SncSetUp, Traffic,
};

/// A core error as the status a gRPC caller sees.
pub fn status(e: &SncError) -> Status {
    let code = match e.kind {
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::FailedPrecondition => Code::FailedPrecondition,
        ErrorKind::ResourceExhausted => Code::ResourceExhausted,
        ErrorKind::Aborted => Code::Aborted,
        ErrorKind::OutOfRange => Code::OutOfRange,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Internal => Code::Internal,
        ErrorKind::Other(n) => Code::from_i32(n),
    };
    Status::new(code, e.message.clone())
}

/// A callee's status as a core error (its code kept).
pub fn error(s: &Status) -> SncError {
    let kind = match s.code() {
        Code::InvalidArgument => ErrorKind::InvalidArgument,
        Code::NotFound => ErrorKind::NotFound,
        Code::AlreadyExists => ErrorKind::AlreadyExists,
        Code::FailedPrecondition => ErrorKind::FailedPrecondition,
        Code::ResourceExhausted => ErrorKind::ResourceExhausted,
        Code::Aborted => ErrorKind::Aborted,
        Code::OutOfRange => ErrorKind::OutOfRange,
        Code::Unavailable => ErrorKind::Unavailable,
        Code::Internal => ErrorKind::Internal,
        other => ErrorKind::Other(other as i32),
    };
    SncError::new(kind, s.message())
}

impl From<Status> for SncError {
    fn from(s: Status) -> Self {
        error(&s)
    }
}

/// A value the wire carried that a core cannot hold.
fn refused(e: FabricError) -> SncError {
    SncError::new(SncError::of_fabric(e.kind()), e.to_string())
}

fn port(v: u32) -> Result<PortId, SncError> {
    cv::port(v).map_err(refused)
}

fn vc(v: Option<&pb::VcId>) -> Result<Option<VcId>, SncError> {
    v.map(|v| cv::vc_id(Some(v)).map_err(refused)).transpose()
}

fn pb_vc(v: Option<VcId>) -> Option<pb::VcId> {
    v.map(cv::pb_vc_id)
}

/// A traffic descriptor from the wire (`None` stays `None`: the core refuses it).
pub fn traffic(t: Option<&pb::TrafficDescriptor>) -> Result<Option<Traffic>, SncError> {
    t.map(|t| checked_traffic(t).map_err(refused)).transpose()
}

/// A descriptor the switch server would accept, kept as given.
fn checked_traffic(t: &pb::TrafficDescriptor) -> Result<Traffic, FabricError> {
    let (d, _) = cv::traffic(Some(t))?;
    Ok(Traffic {
        class: d.class,
        pcr: t.pcr,
        scr: t.scr,
        mbs: t.mbs,
        clr: t.clr,
    })
}

/// A traffic descriptor to the wire, as it was given.
pub fn pb_traffic(t: &Traffic) -> pb::TrafficDescriptor {
    pb::TrafficDescriptor {
        service_class: cv::pb_service_class(t.class),
        pcr: t.pcr,
        scr: t.scr,
        mbs: t.mbs,
        clr: t.clr,
    }
}

/// A call's contract from the wire; refused as the LNC refuses a bad descriptor.
pub fn contract(c: &pb::CellQos) -> Result<Contract, Status> {
    let traffic = c
        .traffic
        .as_ref()
        .ok_or(FabricError::Invalid("the traffic descriptor is missing"))
        .and_then(checked_traffic)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok(Contract {
        traffic,
        ctd_us: c.ctd_us,
        cdv_us: c.cdv_us,
        burst_tolerance_us: c.burst_tolerance_us,
    })
}

fn pb_contract(c: &Contract) -> pb::CellQos {
    pb::CellQos {
        traffic: Some(pb_traffic(&c.traffic)),
        ctd_us: c.ctd_us,
        cdv_us: c.cdv_us,
        burst_tolerance_us: c.burst_tolerance_us,
    }
}

fn counts(m: &HashMap<String, u64>) -> Counts {
    m.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

fn pb_counts(c: Counts) -> HashMap<String, u64> {
    c.into_iter().collect()
}

fn pb_hop_info(h: &HopInfo) -> pb::HopInfo {
    pb::HopInfo {
        switch: h.switch.clone(),
        connection: h.connection,
        in_port: u32::from(h.in_port.0),
        in_id: pb_vc(h.in_id),
        out_port: u32::from(h.out_port.0),
        out_id: pb_vc(h.out_id),
        branches: h
            .branches
            .iter()
            .map(|b| pb::Branch {
                port: u32::from(b.port.0),
                id: pb_vc(b.id),
            })
            .collect(),
    }
}

fn hop_info(h: &pb::HopInfo) -> Result<HopInfo, SncError> {
    Ok(HopInfo {
        switch: h.switch.clone(),
        connection: h.connection,
        in_port: port(h.in_port)?,
        in_id: vc(h.in_id.as_ref())?,
        out_port: port(h.out_port)?,
        out_id: vc(h.out_id.as_ref())?,
        branches: h
            .branches
            .iter()
            .map(|b| {
                Ok(BranchInfo {
                    port: port(b.port)?,
                    id: vc(b.id.as_ref())?,
                })
            })
            .collect::<Result<_, SncError>>()?,
    })
}

/// A call as cm.proto's ConnectionInfo.
pub fn pb_info(i: &CallInfo) -> pb::ConnectionInfo {
    pb::ConnectionInfo {
        id: i.id,
        source: i.source.clone(),
        destinations: i.destinations.clone(),
        source_vc: pb_vc(i.source_vc),
        destination_vcs: i
            .destination_vcs
            .iter()
            .map(|v| pb_vc(*v).unwrap_or_default())
            .collect(),
        hops: i.hops.iter().map(pb_hop_info).collect(),
        cell_qos: Some(pb_contract(&i.contract)),
        setup_us: i.setup_us,
        tag: i.tag.clone(),
        invocations: i.invocations,
    }
}

/// SetupSnc as a parent sends it.
pub fn pb_setup(s: &SetupSnc) -> pb::SetupSncRequest {
    pb::SetupSncRequest {
        hops: s
            .hops
            .iter()
            .map(|h| pb::SncHop {
                switch: h.switch.to_string(),
                in_port: u32::from(h.in_port),
                out_port: u32::from(h.out_port),
            })
            .collect(),
        in_id: pb_vc(s.in_id),
        out_id: pb_vc(s.out_id),
        traffic: s.traffic.as_ref().map(pb_traffic),
        buffer_cells: s.buffer_cells,
        tag: s.tag.clone(),
    }
}

/// ModifySnc as a parent sends it.
pub fn pb_modify(snc: u64, traffic: Option<Traffic>) -> pb::ModifySncRequest {
    let traffic = traffic.as_ref().map(pb_traffic);
    pb::ModifySncRequest { snc, traffic }
}

/// ReserveLink as a parent sends it.
pub fn pb_reserve_link(l: LinkEnd) -> pb::ReserveLinkRequest {
    let port = u32::from(l.port.0);
    pb::ReserveLinkRequest {
        switch: l.switch,
        port,
    }
}

/// UnreserveLink as a parent sends it.
pub fn pb_unreserve_link(l: LinkEnd, id: Option<VcId>) -> pb::UnreserveLinkRequest {
    let (port, id) = (u32::from(l.port.0), pb_vc(id));
    pb::UnreserveLinkRequest {
        switch: l.switch,
        port,
        id,
    }
}

/// AddBranch as the LNC sends it.
pub fn pb_add_branch(b: BranchAt) -> pb::AddSncBranchRequest {
    let port = u32::from(b.port.0);
    let (switch, connection) = (b.switch, b.connection);
    pb::AddSncBranchRequest {
        switch,
        connection,
        port,
    }
}

/// DropBranch as the LNC sends it.
pub fn pb_drop_branch(b: BranchAt, id: Option<VcId>) -> pb::DropSncBranchRequest {
    let (port, id) = (u32::from(b.port.0), pb_vc(id));
    let (switch, connection) = (b.switch, b.connection);
    pb::DropSncBranchRequest {
        switch,
        connection,
        port,
        id,
    }
}

fn link_end(switch: String, p: u32) -> Result<LinkEnd, SncError> {
    Ok(LinkEnd {
        switch,
        port: port(p)?,
    })
}

fn branch_at(switch: String, connection: u64, p: u32) -> Result<BranchAt, SncError> {
    Ok(BranchAt {
        switch,
        connection,
        port: port(p)?,
    })
}

/// A ConnectionPerformer request as the core's operation; one impl per operation of
/// the service.
pub trait Wire: Sized {
    /// The reply message.
    type Reply: WireReply;
    /// The operation.
    fn into_core(self) -> Result<SncRequest, SncError>;
}

/// A ConnectionPerformer reply, both ways.
pub trait WireReply: Sized {
    /// From the core's answer (of the matching kind).
    fn from_core(r: SncReply) -> Option<Self>;
    /// To the core's answer, from a child.
    fn into_core(self) -> SncResult;
}

impl Wire for pb::SetupSncRequest {
    type Reply = pb::SetupSncReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        let hops = self
            .hops
            .iter()
            .map(|h| {
                Ok(HopSpec {
                    switch: h.switch.as_str().into(),
                    in_port: port(h.in_port)?.0,
                    out_port: port(h.out_port)?.0,
                })
            })
            .collect::<Result<_, SncError>>()?;
        Ok(SncRequest::Setup(SetupSnc {
            hops,
            in_id: vc(self.in_id.as_ref())?,
            out_id: vc(self.out_id.as_ref())?,
            traffic: traffic(self.traffic.as_ref())?,
            buffer_cells: self.buffer_cells,
            tag: self.tag,
        }))
    }
}

impl WireReply for pb::SetupSncReply {
    fn from_core(r: SncReply) -> Option<Self> {
        let SncReply::SetUp(s) = r else { return None };
        Some(pb::SetupSncReply {
            snc: s.snc,
            in_id: pb_vc(s.in_id),
            out_id: pb_vc(s.out_id),
            hops: s.hops.iter().map(pb_hop_info).collect(),
            invocations: pb_counts(s.invocations),
        })
    }
    fn into_core(self) -> SncResult {
        Ok(SncReply::SetUp(SncSetUp {
            snc: self.snc,
            in_id: vc(self.in_id.as_ref())?,
            out_id: vc(self.out_id.as_ref())?,
            hops: self.hops.iter().map(hop_info).collect::<Result<_, _>>()?,
            invocations: counts(&self.invocations),
        }))
    }
}

impl Wire for pb::ReleaseSncRequest {
    type Reply = pb::ReleaseSncReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        Ok(SncRequest::Release { snc: self.snc })
    }
}

impl Wire for pb::ModifySncRequest {
    type Reply = pb::ModifySncReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        let traffic = traffic(self.traffic.as_ref())?;
        Ok(SncRequest::Modify {
            snc: self.snc,
            traffic,
        })
    }
}

impl Wire for pb::ReserveLinkRequest {
    type Reply = pb::ReserveLinkReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        Ok(SncRequest::ReserveLink(link_end(self.switch, self.port)?))
    }
}

impl Wire for pb::UnreserveLinkRequest {
    type Reply = pb::UnreserveLinkReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        let id = vc(self.id.as_ref())?;
        Ok(SncRequest::UnreserveLink(
            link_end(self.switch, self.port)?,
            id,
        ))
    }
}

impl WireReply for pb::UnreserveLinkReply {
    fn from_core(r: SncReply) -> Option<Self> {
        matches!(r, SncReply::LinkUnreserved).then_some(pb::UnreserveLinkReply {})
    }
    fn into_core(self) -> SncResult {
        Ok(SncReply::LinkUnreserved)
    }
}

impl Wire for pb::AddSncBranchRequest {
    type Reply = pb::AddSncBranchReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        let at = branch_at(self.switch, self.connection, self.port)?;
        Ok(SncRequest::AddBranch(at))
    }
}

impl Wire for pb::DropSncBranchRequest {
    type Reply = pb::DropSncBranchReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        let id = vc(self.id.as_ref())?;
        let at = branch_at(self.switch, self.connection, self.port)?;
        Ok(SncRequest::DropBranch(at, id))
    }
}

impl Wire for pb::TrimSncRequest {
    type Reply = pb::TrimSncReply;
    fn into_core(self) -> Result<SncRequest, SncError> {
        Ok(SncRequest::Trim {
            snc: self.snc,
            keep: self.keep,
        })
    }
}

/// The replies that carry an identifier and the invocations.
macro_rules! id_replies {
    ($($msg:ident: $variant:ident;)*) => {$(
        impl WireReply for pb::$msg {
            fn from_core(r: SncReply) -> Option<Self> {
                let SncReply::$variant { id, invocations } = r else {
                    return None;
                };
                let invocations = pb_counts(invocations);
                Some(pb::$msg { id: pb_vc(id), invocations })
            }
            fn into_core(self) -> SncResult {
                let id = vc(self.id.as_ref())?;
                let invocations = counts(&self.invocations);
                Ok(SncReply::$variant { id, invocations })
            }
        }
    )*};
}

id_replies! {
    ReserveLinkReply: LinkReserved;
    AddSncBranchReply: BranchAdded;
}

/// The replies that carry only the invocations.
macro_rules! count_replies {
    ($($msg:ident: $variant:ident;)*) => {$(
        impl WireReply for pb::$msg {
            fn from_core(r: SncReply) -> Option<Self> {
                let SncReply::$variant { invocations } = r else {
                    return None;
                };
                let invocations = pb_counts(invocations);
                Some(pb::$msg { invocations })
            }
            fn into_core(self) -> SncResult {
                let invocations = counts(&self.invocations);
                Ok(SncReply::$variant { invocations })
            }
        }
    )*};
}

count_replies! {
    ReleaseSncReply: Released;
    ModifySncReply: Modified;
    DropSncBranchReply: BranchDropped;
    TrimSncReply: Trimmed;
}
