//! The IDL conversions of the QoS types (`atmlab.v1.UserQos`, `CellQos`): hand-written
//! at the shell (DESIGN.md §7: the core derives no prost), validating on the way in so
//! that a bad field from the wire is named.

use atmlab_core::time::Duration;
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;
use atmlab_fabric::live::convert::{pb_service_class, service_class};
use atmlab_rpc::v1 as pb;

use super::mapper::{CellQos, UserQos, invalid, is_vbr};
use crate::ControlError;

fn class_from_pb(v: i32, field: &'static str) -> Result<ServiceClass, ControlError> {
    service_class(v).ok_or_else(|| {
        invalid(
            field,
            format!("{v} is unspecified or unknown (use CBR, RT_VBR, NRT_VBR or UBR)"),
        )
    })
}

/// A duration in whole microseconds (the IDL's unit), to the nearest, but never rounded
/// down to zero: zero means "no bound" on the wire.
pub(super) fn micros(d: Duration) -> u64 {
    let us = d.as_picos().saturating_add(500_000) / 1_000_000;
    if us == 0 && d > Duration::ZERO { 1 } else { us }
}

/// `UserQos` from the wire. Only the class is checked here (the mapper checks the rest
/// and names the field); zero peaks keep their IDL meaning, "equal to the mean".
pub fn user_qos_from_pb(q: &pb::UserQos) -> Result<UserQos, ControlError> {
    Ok(UserQos {
        class: class_from_pb(q.service_class, "service_class")?,
        frame_rate: q.frame_rate,
        frame_size: q.frame_size,
        peak_frame_size: q.peak_frame_size,
        peak_frame_rate: q.peak_frame_rate,
        frame_loss: q.frame_loss,
        delay: Duration::from_micros(q.delay_us),
    })
}

/// `UserQos` to the wire (the delay in whole microseconds).
pub fn pb_user_qos(q: &UserQos) -> pb::UserQos {
    pb::UserQos {
        service_class: pb_service_class(q.class),
        frame_rate: q.frame_rate,
        frame_size: q.frame_size,
        peak_frame_size: q.peak_frame_size,
        frame_loss: q.frame_loss,
        delay_us: micros(q.delay),
        peak_frame_rate: q.peak_frame_rate,
    }
}

/// `CellQos` from the wire, validated ([`CellQos::validate`]). The CLR travels in
/// `traffic.clr`. For CBR and UBR the SCR is the PCR whatever the wire says, and an MBS of
/// 0 (an old or foreign client) means one cell per frame.
pub fn cell_qos_from_pb(c: &pb::CellQos) -> Result<CellQos, ControlError> {
    let t = c
        .traffic
        .as_ref()
        .ok_or_else(|| invalid("traffic", "the traffic descriptor is missing".into()))?;
    let class = class_from_pb(t.service_class, "traffic.service_class")?;
    let vbr = is_vbr(class);
    let cell = CellQos {
        traffic: TrafficDescriptor {
            class,
            pcr: CellRate(t.pcr),
            scr: CellRate(if vbr { t.scr } else { t.pcr }),
            mbs: if vbr { t.mbs } else { t.mbs.max(1) },
            cdvt_ps: 0,
        },
        clr: t.clr,
        ctd: Duration::from_micros(c.ctd_us),
        cdv: Duration::from_micros(c.cdv_us),
        burst_tolerance: Duration::from_micros(c.burst_tolerance_us),
    };
    cell.validate()?;
    Ok(cell)
}

/// `CellQos` to the wire (durations in whole microseconds, the CLR in `traffic.clr`).
pub fn pb_cell_qos(c: &CellQos) -> pb::CellQos {
    pb::CellQos {
        traffic: Some(atmlab_fabric::live::convert::pb_traffic(&c.traffic, c.clr)),
        ctd_us: micros(c.ctd),
        cdv_us: micros(c.cdv),
        burst_tolerance_us: micros(c.burst_tolerance),
    }
}
