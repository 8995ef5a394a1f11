//! The QoS mapper: user-level QoS (frames) to the cell-level contract and back (paper 000
//! §II-B, step 2 of Fig. 2: "QOSmapper translates the QOS specification specified in
//! frame to QOS specifications specified in ATM cells and vice versa"), in process
//! ("collocated", §II-C-1) or remote over gRPC (`atmlab.v1.QosMapper`).
//!
//! - `mapper`: [`QosMapper`], the sans-IO core (the mapping below), with its types
//!   [`UserQos`], [`CellQos`], [`AalOverhead`], [`QosMapperConfig`]; no I/O, no protobuf.
//! - `convert`: the IDL conversions ([`user_qos_from_pb`], [`pb_user_qos`],
//!   [`cell_qos_from_pb`], [`pb_cell_qos`]), validating on the way in (shell, feature
//!   `live`).
//! - `client`: [`RemoteQosMapper`] calls a remote mapper; [`MapQos`] (implemented by the
//!   core, the client and [`Mapper`]) lets a connection manager use either without caring
//!   which (shell).
//! - `service`: [`QosMapperService`], `atmlab.v1.QosMapper` over the core (shell).
//!
//! # The mapping (ATM Forum TM 4.0 §3 and §4; ITU-T I.356 for CTD and CDV)
//!
//! A frame of `n` octets takes `k(n) = ceil((n + h) / p)` cells, with the AAL's per-frame
//! overhead `h` and per-cell payload `p` ([`AalOverhead`]; AAL5: `h` = 8, the CPCS trailer,
//! `p` = 48). With mean frame rate `f`, peak frame rate `F`, mean frame size `s` and peak
//! frame size `S` (a peak of 0 means "equal to the mean", as in the IDL):
//!
//! | class | PCR | SCR | MBS | burst tolerance |
//! | --- | --- | --- | --- | --- |
//! | CBR | `F * k(S)` | = PCR | `k(S)` | 0 |
//! | rt-VBR, nrt-VBR | `F * k(S)` | `f * k(s)` | `k(S)` | `(MBS - 1)(1/SCR - 1/PCR)` |
//! | UBR | `F * k(S)` | = PCR | `k(S)` | 0 |
//!
//! CBR and UBR have no SCR in TM 4.0; their SCR is set to the PCR, as
//! [`TrafficDescriptor::cbr`](atmlab_core::traffic::TrafficDescriptor::cbr) does. Their MBS is not a TM 4.0 parameter either (switches
//! ignore it: admission control charges CBR its PCR and UBR nothing); it records the cells
//! per frame so that [`QosMapper::unmap`] can tell frame rate from frame size.
//!
//! **Loss.** A frame is lost if any of its cells is. With independent cell losses at
//! ratio `CLR`, a frame of `k` cells survives with probability `(1 - CLR)^k`, so
//! `CLR = 1 - (1 - frame_loss)^(1/k)`, which for small losses is `frame_loss / k`. The
//! mapper uses the exact form with `k` = cells of a *peak* frame (the strictest). Real
//! cell losses come in bursts (a full buffer drops neighbours), so fewer frames are lost
//! than the independent model predicts: the mapping errs on the safe side.
//!
//! **Delay.** A frame's delay runs from its first cell's departure to its last cell's
//! arrival. Sent at the PCR, a peak frame takes `(k - 1) / PCR` to leave (its
//! serialisation); what remains of the budget is the cell-level maximum CTD. Of that, a
//! fraction ([`QosMapperConfig::cdv_fraction`], a quarter by default) is allowed as
//! peak-to-peak CDV (queueing that varies); the rest is the fixed part (propagation,
//! processing). CBR and rt-VBR need a delay bound; for nrt-VBR and UBR a delay of zero
//! means none, and CTD and CDV are then zero too. For UBR the loss and delay are carried
//! as the user's objectives; the network commits to neither.
//!
//! **Back** ([`QosMapper::unmap`]): `F = PCR / MBS`, `S` = the largest frame that fits in
//! MBS cells. Three numbers (PCR, SCR, MBS) cannot give back four (f, F, s, S), so for VBR
//! the unmapped stream keeps a constant frame rate (`f = F`, frames of variable size, as
//! video is) and its mean frame size carries the SCR: the largest frame of
//! `ceil(SCR / F)` cells. So
//! `unmap(map(q))` gives back the rates exactly and the sizes rounded up to a whole
//! cell's payload, when `q` has `f = F` (the IDL's default); otherwise it gives back PCR,
//! MBS and (within a cell per frame) SCR, but with the frame rate at its peak.

#[cfg(feature = "live")]
mod client;
#[cfg(feature = "live")]
mod convert;
mod mapper;
#[cfg(feature = "live")]
mod service;
#[cfg(test)]
mod tests;

#[cfg(feature = "live")]
pub use client::{MapQos, Mapper, RemoteQosMapper};
#[cfg(feature = "live")]
pub use convert::{cell_qos_from_pb, pb_cell_qos, pb_user_qos, user_qos_from_pb};
pub use mapper::{AalOverhead, CellQos, QosMapper, QosMapperConfig, UserQos};
#[cfg(feature = "live")]
pub use service::QosMapperService;
