//! The QoS mapper: user-level QoS (frames) to the cell-level contract and back (paper 000
//! §II-B, step 2 of Fig. 2: "QOSmapper translates the QOS specification specified in
//! frame to QOS specifications specified in ATM cells and vice versa"), in process
//! ("collocated", §II-C-1) or remote over gRPC (`atmlab.v1.QosMapper`).
//!
//! [`QosMapper`] is the sans-IO core; [`QosMapperService`] serves it, [`RemoteQosMapper`]
//! calls it, and [`MapQos`] (implemented by both and by [`Mapper`]) lets a connection
//! manager use either without caring which.
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
//! [`TrafficDescriptor::cbr`] does. Their MBS is not a TM 4.0 parameter either (switches
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

use std::future::Future;

use atmlab_core::time::Duration;
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;
use atmlab_rpc::tls::{TlsIdentity, grpc_incoming};
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::qos_mapper_client::QosMapperClient;
use atmlab_rpc::v1::qos_mapper_server::{QosMapper as QosMapperRpc, QosMapperServer};
use tokio::net::TcpListener;
use tonic::transport::Channel;

use crate::ControlError;
use crate::error::chain;

/// QoS as an application states it: frames, their rate, loss and delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserQos {
    /// The service class asked for.
    pub class: ServiceClass,
    /// Mean frames per second.
    pub frame_rate: f64,
    /// Mean frame size, octets.
    pub frame_size: u32,
    /// Largest frame, octets; 0 means `frame_size`.
    pub peak_frame_size: u32,
    /// Peak frames per second; 0 means `frame_rate`.
    pub peak_frame_rate: f64,
    /// Acceptable fraction of frames lost, in [0, 1).
    pub frame_loss: f64,
    /// Acceptable end-to-end frame delay; zero means none (nrt-VBR and UBR only).
    pub delay: Duration,
}

/// The cell-level contract a [`UserQos`] maps to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellQos {
    /// Class, PCR, SCR and MBS (`cdvt_ps` is left to the network: 0).
    pub traffic: TrafficDescriptor,
    /// Cell loss ratio objective.
    pub clr: f64,
    /// Maximum cell transfer delay; zero means no bound.
    pub ctd: Duration,
    /// Peak-to-peak cell delay variation; zero means no bound.
    pub cdv: Duration,
    /// GCRA tolerance of the SCR test, `(MBS - 1)(1/SCR - 1/PCR)`; zero for CBR and UBR.
    pub burst_tolerance: Duration,
}

impl CellQos {
    /// Checks that the contract makes sense (what [`QosMapper::unmap`] assumes): a
    /// positive, finite PCR; for VBR an SCR in (0, PCR]; an MBS of at least one cell; a
    /// CLR in [0, 1). Errors name the field as the IDL does.
    pub fn validate(&self) -> Result<(), ControlError> {
        let t = &self.traffic;
        let pcr = t.pcr.per_sec();
        if !(pcr.is_finite() && pcr > 0.0) {
            return Err(invalid(
                "traffic.pcr",
                format!("must be a positive, finite number of cells/s, not {pcr}"),
            ));
        }
        if is_vbr(t.class) {
            let scr = t.scr.per_sec();
            if !(scr.is_finite() && scr > 0.0 && scr <= pcr) {
                return Err(invalid(
                    "traffic.scr",
                    format!("must be in (0, PCR = {pcr}] cells/s, not {scr}"),
                ));
            }
        }
        if t.mbs == 0 {
            return Err(invalid("traffic.mbs", "must be at least one cell".into()));
        }
        if !(self.clr >= 0.0 && self.clr < 1.0) {
            return Err(invalid(
                "traffic.clr",
                format!("must be in [0, 1), not {}", self.clr),
            ));
        }
        Ok(())
    }
}

/// How an AAL wraps a frame into cells: `ceil((octets + per_frame) / payload)` cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AalOverhead {
    /// Octets the AAL adds to every frame (header, trailer, worst-case padding).
    pub per_frame: u32,
    /// Octets of a frame each cell carries.
    pub payload: u32,
}

impl AalOverhead {
    /// AAL5: the 8-octet CPCS trailer, 48 octets of frame per cell (its padding is what
    /// rounds up to whole cells).
    pub const AAL5: AalOverhead = AalOverhead {
        per_frame: 8,
        payload: 48,
    };
    /// AAL3/4: CPCS header and trailer (8 octets) plus the worst-case pad to a 4-octet
    /// boundary (3), 44 octets per cell (the SAR header and trailer take 4 of the 48).
    /// Counting the worst pad may charge one cell too many, never one too few.
    pub const AAL34: AalOverhead = AalOverhead {
        per_frame: 11,
        payload: 44,
    };

    /// Cells a frame of `octets` takes (saturating at `u32::MAX`).
    pub fn cells(&self, octets: u32) -> u32 {
        let total = u64::from(octets) + u64::from(self.per_frame);
        u32::try_from(total.div_ceil(u64::from(self.payload.max(1)))).unwrap_or(u32::MAX)
    }

    /// The largest frame that fits in `cells` cells (saturating at `u32::MAX`; 0 if even
    /// the overhead does not fit).
    pub fn max_octets(&self, cells: u32) -> u32 {
        let total = u64::from(cells) * u64::from(self.payload);
        u32::try_from(total.saturating_sub(u64::from(self.per_frame))).unwrap_or(u32::MAX)
    }
}

impl Default for AalOverhead {
    fn default() -> Self {
        AalOverhead::AAL5
    }
}

/// The mapper's policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QosMapperConfig {
    /// How frames become cells.
    pub aal: AalOverhead,
    /// The share of the cell delay budget (the frame delay less its serialisation) allowed
    /// as peak-to-peak CDV, in [0, 1]; the rest is fixed delay.
    pub cdv_fraction: f64,
}

impl Default for QosMapperConfig {
    fn default() -> Self {
        QosMapperConfig {
            aal: AalOverhead::AAL5,
            cdv_fraction: 0.25,
        }
    }
}

/// The QoS mapper core: pure functions of its configuration, no I/O (see the module doc
/// for the mapping).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QosMapper {
    config: QosMapperConfig,
}

fn invalid(field: &'static str, reason: String) -> ControlError {
    ControlError::InvalidQos { field, reason }
}

fn is_vbr(class: ServiceClass) -> bool {
    matches!(class, ServiceClass::RtVbr | ServiceClass::NrtVbr)
}

fn class_name(class: ServiceClass) -> &'static str {
    match class {
        ServiceClass::Cbr => "CBR",
        ServiceClass::RtVbr => "rt-VBR",
        ServiceClass::NrtVbr => "nrt-VBR",
        ServiceClass::Ubr => "UBR",
    }
}

/// `d * fraction`, rounded to the picosecond.
fn scale(d: Duration, fraction: f64) -> Duration {
    Duration::from_picos((d.as_picos() as f64 * fraction).round() as u64)
}

impl QosMapper {
    /// A mapper with `config`; refuses an AAL whose cell carries no frame octet once the
    /// overhead is paid, or a CDV fraction outside [0, 1].
    pub fn new(config: QosMapperConfig) -> Result<Self, ControlError> {
        if config.aal.payload == 0 || config.aal.per_frame >= config.aal.payload {
            return Err(invalid(
                "aal",
                format!(
                    "a cell of {} octets of payload cannot carry a frame with {} octets of overhead",
                    config.aal.payload, config.aal.per_frame
                ),
            ));
        }
        if !(0.0..=1.0).contains(&config.cdv_fraction) {
            return Err(invalid(
                "cdv_fraction",
                format!("must be in [0, 1], not {}", config.cdv_fraction),
            ));
        }
        Ok(QosMapper { config })
    }

    /// The configuration.
    pub fn config(&self) -> &QosMapperConfig {
        &self.config
    }

    /// User-level QoS to the cell-level contract. Errors name the field at fault.
    pub fn map(&self, q: &UserQos) -> Result<CellQos, ControlError> {
        let aal = self.config.aal;
        if !(q.frame_rate.is_finite() && q.frame_rate > 0.0) {
            return Err(invalid(
                "frame_rate",
                format!(
                    "must be a positive, finite number of frames/s, not {}",
                    q.frame_rate
                ),
            ));
        }
        if q.frame_size == 0 {
            return Err(invalid("frame_size", "must be at least one octet".into()));
        }
        let peak_size = if q.peak_frame_size == 0 {
            q.frame_size
        } else {
            q.peak_frame_size
        };
        if peak_size < q.frame_size {
            return Err(invalid(
                "peak_frame_size",
                format!(
                    "{peak_size} octets is below the mean frame size, {}",
                    q.frame_size
                ),
            ));
        }
        let peak_rate = if q.peak_frame_rate == 0.0 {
            q.frame_rate
        } else {
            q.peak_frame_rate
        };
        if !(peak_rate.is_finite() && peak_rate >= q.frame_rate) {
            return Err(invalid(
                "peak_frame_rate",
                format!(
                    "must be finite and at least the mean frame rate, {} frames/s, not {peak_rate}",
                    q.frame_rate
                ),
            ));
        }
        if !(q.frame_loss >= 0.0 && q.frame_loss < 1.0) {
            return Err(invalid(
                "frame_loss",
                format!("must be in [0, 1), not {}", q.frame_loss),
            ));
        }

        let k_peak = aal.cells(peak_size);
        let k_mean = aal.cells(q.frame_size);
        let pcr = peak_rate * f64::from(k_peak);
        if !pcr.is_finite() {
            return Err(invalid(
                "peak_frame_rate",
                format!("{peak_rate} frames/s of {k_peak} cells overflows the cell rate"),
            ));
        }
        let (scr, burst_tolerance) = if is_vbr(q.class) {
            let scr = q.frame_rate * f64::from(k_mean);
            // TM 4.0 §4.4.1: the SCR test tolerates a burst of MBS cells at the PCR.
            let tau = f64::from(k_peak - 1) * (1.0 / scr - 1.0 / pcr);
            (scr, Duration::from_secs_f64(tau.max(0.0)))
        } else {
            (pcr, Duration::ZERO)
        };

        // Exact under independent cell losses; frame_loss / k for small losses.
        let clr = -((-q.frame_loss).ln_1p() / f64::from(k_peak)).exp_m1();

        let (ctd, cdv) = if q.delay == Duration::ZERO {
            if matches!(q.class, ServiceClass::Cbr | ServiceClass::RtVbr) {
                return Err(invalid(
                    "delay",
                    format!("{} needs a delay bound", class_name(q.class)),
                ));
            }
            (Duration::ZERO, Duration::ZERO)
        } else {
            let serialisation = Duration::from_secs_f64(f64::from(k_peak - 1) / pcr);
            if serialisation >= q.delay {
                return Err(invalid(
                    "delay",
                    format!(
                        "{} leaves no time for the cells: a peak frame of {k_peak} cells \
                         takes {serialisation} to send at the peak cell rate",
                        q.delay
                    ),
                ));
            }
            let ctd = q.delay - serialisation;
            (ctd, scale(ctd, self.config.cdv_fraction))
        };

        Ok(CellQos {
            traffic: TrafficDescriptor {
                class: q.class,
                pcr: CellRate(pcr),
                scr: CellRate(scr),
                mbs: k_peak,
                cdvt_ps: 0,
            },
            clr,
            ctd,
            cdv,
            burst_tolerance,
        })
    }

    /// A cell-level contract back to user terms (see the module doc for what can and
    /// cannot be recovered). Expects a contract that [`CellQos::validate`] accepts;
    /// anything else gives a meaningless (but panic-free) answer.
    pub fn unmap(&self, c: &CellQos) -> UserQos {
        let aal = self.config.aal;
        let t = &c.traffic;
        let k_peak = t.mbs.max(1);
        let pcr = t.pcr.per_sec();
        let peak_rate = pcr / f64::from(k_peak);
        let peak_size = aal.max_octets(k_peak).max(1);
        let frame_size = if is_vbr(t.class) {
            // Mean cells per frame at the (constant) peak frame rate, rounded up to whole
            // cells (the tolerance absorbs the rounding of SCR = f * k), given back as the
            // largest frame of that many cells, as for the peak.
            let cells = t.scr.per_sec().min(pcr) / peak_rate;
            let cells = (cells - 1e-9).ceil().clamp(1.0, f64::from(k_peak)) as u32;
            aal.max_octets(cells).max(1)
        } else {
            peak_size
        };
        let frame_loss = -(f64::from(k_peak) * (-c.clr).ln_1p()).exp_m1();
        let delay = if c.ctd == Duration::ZERO {
            Duration::ZERO
        } else {
            c.ctd + Duration::from_secs_f64(f64::from(k_peak - 1) / pcr)
        };
        UserQos {
            class: t.class,
            frame_rate: peak_rate,
            frame_size,
            peak_frame_size: peak_size,
            peak_frame_rate: peak_rate,
            frame_loss,
            delay,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The IDL boundary.

fn class_from_pb(v: i32, field: &'static str) -> Result<ServiceClass, ControlError> {
    match pb::ServiceClass::try_from(v) {
        Ok(pb::ServiceClass::Cbr) => Ok(ServiceClass::Cbr),
        Ok(pb::ServiceClass::RtVbr) => Ok(ServiceClass::RtVbr),
        Ok(pb::ServiceClass::NrtVbr) => Ok(ServiceClass::NrtVbr),
        Ok(pb::ServiceClass::Ubr) => Ok(ServiceClass::Ubr),
        _ => Err(invalid(
            field,
            format!("{v} is unspecified or unknown (use CBR, RT_VBR, NRT_VBR or UBR)"),
        )),
    }
}

fn pb_class(class: ServiceClass) -> i32 {
    (match class {
        ServiceClass::Cbr => pb::ServiceClass::Cbr,
        ServiceClass::RtVbr => pb::ServiceClass::RtVbr,
        ServiceClass::NrtVbr => pb::ServiceClass::NrtVbr,
        ServiceClass::Ubr => pb::ServiceClass::Ubr,
    }) as i32
}

/// A duration in whole microseconds (the IDL's unit), to the nearest, but never rounded
/// down to zero: zero means "no bound" on the wire.
fn micros(d: Duration) -> u64 {
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
        service_class: pb_class(q.class),
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

// ---------------------------------------------------------------------------------------
// Collocated or remote.

/// A QoS mapper as a connection manager sees it: in its own address space or across the
/// network (paper 000 §II-C-1: "collocated" makes the mapping a local invocation "with
/// almost no change to the rest of the code"). Cheap to clone.
pub trait MapQos: Clone + Send + Sync + 'static {
    /// User-level QoS to the cell-level contract.
    fn map(&self, q: &UserQos) -> impl Future<Output = Result<CellQos, ControlError>> + Send;
    /// A cell-level contract back to user terms.
    fn unmap(&self, c: &CellQos) -> impl Future<Output = Result<UserQos, ControlError>> + Send;
}

impl MapQos for QosMapper {
    fn map(&self, q: &UserQos) -> impl Future<Output = Result<CellQos, ControlError>> + Send {
        std::future::ready(QosMapper::map(self, q))
    }
    fn unmap(&self, c: &CellQos) -> impl Future<Output = Result<UserQos, ControlError>> + Send {
        std::future::ready(Ok(QosMapper::unmap(self, c)))
    }
}

/// A client of a remote `atmlab.v1.QosMapper`. Cheap to clone (clones share the channel).
#[derive(Debug, Clone)]
pub struct RemoteQosMapper {
    client: QosMapperClient<Channel>,
}

impl RemoteQosMapper {
    /// Connects to the mapper at `addr` (`host:port` or a URI), with mutual TLS when
    /// `tls` is given.
    pub async fn connect(addr: &str, tls: Option<&TlsIdentity>) -> Result<Self, ControlError> {
        Ok(RemoteQosMapper::new(
            atmlab_rpc::client_channel(addr, tls).await?,
        ))
    }

    /// A client over an existing channel.
    pub fn new(channel: Channel) -> Self {
        RemoteQosMapper {
            client: QosMapperClient::new(channel),
        }
    }

    /// `QosMapper.Map`. A refusal keeps the service's code (INVALID_ARGUMENT) and message
    /// (which names the field) in [`ControlError::Call`].
    pub async fn map(&self, q: &UserQos) -> Result<CellQos, ControlError> {
        let reply = self
            .client
            .clone()
            .map(pb_user_qos(q))
            .await
            .map_err(|s| call_error("QosMapper.Map", &s))?;
        cell_qos_from_pb(&reply.into_inner())
    }

    /// `QosMapper.Unmap`.
    pub async fn unmap(&self, c: &CellQos) -> Result<UserQos, ControlError> {
        let reply = self
            .client
            .clone()
            .unmap(pb_cell_qos(c))
            .await
            .map_err(|s| call_error("QosMapper.Unmap", &s))?;
        user_qos_from_pb(&reply.into_inner())
    }
}

fn call_error(call: &'static str, s: &tonic::Status) -> ControlError {
    ControlError::Call {
        call,
        code: s.code(),
        message: s.message().to_string(),
    }
}

impl MapQos for RemoteQosMapper {
    fn map(&self, q: &UserQos) -> impl Future<Output = Result<CellQos, ControlError>> + Send {
        RemoteQosMapper::map(self, q)
    }
    fn unmap(&self, c: &CellQos) -> impl Future<Output = Result<UserQos, ControlError>> + Send {
        RemoteQosMapper::unmap(self, c)
    }
}

/// Either kind of mapper, chosen at run time (a configuration issue, §II-C-1).
#[derive(Debug, Clone)]
pub enum Mapper {
    /// In the caller's address space: a function call.
    Collocated(QosMapper),
    /// Across the network: a gRPC call.
    Remote(RemoteQosMapper),
}

impl MapQos for Mapper {
    async fn map(&self, q: &UserQos) -> Result<CellQos, ControlError> {
        match self {
            Mapper::Collocated(m) => QosMapper::map(m, q),
            Mapper::Remote(m) => m.map(q).await,
        }
    }
    async fn unmap(&self, c: &CellQos) -> Result<UserQos, ControlError> {
        match self {
            Mapper::Collocated(m) => Ok(QosMapper::unmap(m, c)),
            Mapper::Remote(m) => m.unmap(c).await,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The service.

/// `atmlab.v1.QosMapper` over a [`QosMapper`]. Requests are validated on the way in;
/// refusals are INVALID_ARGUMENT naming the field.
#[derive(Debug, Clone, Default)]
pub struct QosMapperService {
    mapper: QosMapper,
}

impl QosMapperService {
    /// The service over `mapper`.
    pub fn new(mapper: QosMapper) -> Self {
        QosMapperService { mapper }
    }

    /// The tonic service, for `Server::builder().add_service(..)`.
    pub fn server(&self) -> QosMapperServer<Self> {
        QosMapperServer::new(self.clone())
    }

    /// Serves on `listener` (mutual TLS with `tls`, plain HTTP/2 without) until
    /// `shutdown` completes.
    pub async fn serve(
        self,
        listener: TcpListener,
        tls: Option<TlsIdentity>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ControlError> {
        let incoming = grpc_incoming(listener, tls.as_ref())?;
        tracing::info!(
            addr = %incoming.local_addr(),
            tls = tls.is_some(),
            "QoS mapper listening"
        );
        let result = atmlab_rpc::server()
            .add_service(self.server())
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await;
        tracing::info!("QoS mapper stopped");
        result.map_err(|e| ControlError::Serve {
            what: "the QoS mapper",
            reason: chain(&e),
        })
    }
}

#[tonic::async_trait]
impl QosMapperRpc for QosMapperService {
    async fn map(
        &self,
        request: tonic::Request<pb::UserQos>,
    ) -> Result<tonic::Response<pb::CellQos>, tonic::Status> {
        let q = user_qos_from_pb(request.get_ref())?;
        let c = self.mapper.map(&q)?;
        Ok(tonic::Response::new(pb_cell_qos(&c)))
    }

    async fn unmap(
        &self,
        request: tonic::Request<pb::CellQos>,
    ) -> Result<tonic::Response<pb::UserQos>, tonic::Status> {
        let c = cell_qos_from_pb(request.get_ref())?;
        Ok(tonic::Response::new(pb_user_qos(&self.mapper.unmap(&c))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn qos(class: ServiceClass) -> UserQos {
        UserQos {
            class,
            frame_rate: 30.0,
            frame_size: 4000,
            peak_frame_size: 0,
            peak_frame_rate: 0.0,
            frame_loss: 1e-4,
            delay: Duration::from_millis(100),
        }
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
    }

    #[test]
    fn aal5_cells_are_the_trailer_rounded_up_to_whole_cells() {
        let a = AalOverhead::AAL5;
        assert_eq!(a.cells(1), 1);
        assert_eq!(a.cells(40), 1); // 40 + 8 = 48: exactly one cell
        assert_eq!(a.cells(41), 2);
        assert_eq!(a.cells(9180), 192); // the classical IP over ATM MTU
        assert_eq!(a.cells(u32::MAX), 89_478_486);
        assert_eq!(a.max_octets(1), 40);
        assert_eq!(a.max_octets(192), 9208);
        assert_eq!(a.cells(a.max_octets(192)), 192);
        assert_eq!(AalOverhead::AAL34.cells(33), 1);
        assert_eq!(AalOverhead::AAL34.cells(34), 2);
    }

    #[test]
    fn cbr_reserves_the_peak() {
        let m = QosMapper::default();
        // 30 frames/s of 4000 octets: 84 cells each (4008 / 48 = 83.5).
        let c = m.map(&qos(ServiceClass::Cbr)).unwrap();
        assert_eq!(c.traffic.class, ServiceClass::Cbr);
        assert_eq!(c.traffic.pcr, CellRate(30.0 * 84.0));
        assert_eq!(c.traffic.scr, c.traffic.pcr);
        assert_eq!(c.traffic.mbs, 84);
        assert_eq!(c.burst_tolerance, Duration::ZERO);
        // With a peak: PCR follows the peak rate and the peak size.
        let c = m
            .map(&UserQos {
                peak_frame_rate: 60.0,
                peak_frame_size: 9180,
                ..qos(ServiceClass::Cbr)
            })
            .unwrap();
        assert_eq!(c.traffic.pcr, CellRate(60.0 * 192.0));
    }

    #[test]
    fn vbr_has_a_sustainable_rate_and_a_burst_tolerance() {
        let m = QosMapper::default();
        let q = UserQos {
            peak_frame_size: 9180,
            ..qos(ServiceClass::RtVbr)
        };
        let c = m.map(&q).unwrap();
        let (pcr, scr) = (30.0 * 192.0, 30.0 * 84.0);
        assert_eq!(c.traffic.pcr, CellRate(pcr));
        assert_eq!(c.traffic.scr, CellRate(scr));
        assert_eq!(c.traffic.mbs, 192);
        let tau = 191.0 * (1.0 / scr - 1.0 / pcr);
        assert_eq!(c.burst_tolerance, Duration::from_secs_f64(tau));
        // A constant stream has no burst tolerance.
        let c = m.map(&qos(ServiceClass::NrtVbr)).unwrap();
        assert_eq!(c.traffic.scr, c.traffic.pcr);
        assert_eq!(c.burst_tolerance, Duration::ZERO);
    }

    #[test]
    fn ubr_has_a_peak_only() {
        let c = QosMapper::default()
            .map(&UserQos {
                delay: Duration::ZERO,
                ..qos(ServiceClass::Ubr)
            })
            .unwrap();
        assert_eq!(c.traffic.pcr, CellRate(30.0 * 84.0));
        assert_eq!(c.traffic.scr, c.traffic.pcr);
        assert_eq!((c.ctd, c.cdv), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn loss_is_shared_among_the_cells_of_a_frame() {
        let c = QosMapper::default().map(&qos(ServiceClass::Cbr)).unwrap();
        // 1e-4 over 84 cells: about 1e-4 / 84.
        assert!(close(c.clr, 1e-4 / 84.0, 1e-4), "{}", c.clr);
        // Exactly: 84 cells surviving is one frame surviving.
        assert!(close((1.0 - c.clr).powi(84), 1.0 - 1e-4, 1e-12));
        let lossless = QosMapper::default()
            .map(&UserQos {
                frame_loss: 0.0,
                ..qos(ServiceClass::Cbr)
            })
            .unwrap();
        assert_eq!(lossless.clr, 0.0);
    }

    #[test]
    fn delay_is_serialisation_then_transfer_then_variation() {
        let c = QosMapper::default().map(&qos(ServiceClass::Cbr)).unwrap();
        // 84 cells at 2520 cells/s: the last leaves 83/2520 s after the first.
        let serialisation = Duration::from_secs_f64(83.0 / 2520.0);
        assert_eq!(c.ctd, Duration::from_millis(100) - serialisation);
        assert_eq!(c.cdv, Duration::from_picos((c.ctd.as_picos() + 2) / 4));
        // A budget the frame cannot even be sent in.
        let e = QosMapper::default()
            .map(&UserQos {
                delay: Duration::from_millis(30),
                ..qos(ServiceClass::Cbr)
            })
            .unwrap_err();
        assert!(
            matches!(e, ControlError::InvalidQos { field: "delay", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("leaves no time"), "{e}");
    }

    #[test]
    fn invalid_user_qos_names_the_field() {
        let m = QosMapper::default();
        let field = |q: UserQos| match m.map(&q) {
            Err(ControlError::InvalidQos { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let q = qos(ServiceClass::RtVbr);
        assert_eq!(
            field(UserQos {
                frame_rate: 0.0,
                ..q
            }),
            "frame_rate"
        );
        assert_eq!(
            field(UserQos {
                frame_rate: -1.0,
                ..q
            }),
            "frame_rate"
        );
        assert_eq!(
            field(UserQos {
                frame_rate: f64::NAN,
                ..q
            }),
            "frame_rate"
        );
        assert_eq!(
            field(UserQos {
                frame_rate: f64::INFINITY,
                ..q
            }),
            "frame_rate"
        );
        assert_eq!(field(UserQos { frame_size: 0, ..q }), "frame_size");
        assert_eq!(
            field(UserQos {
                peak_frame_size: 100,
                ..q
            }),
            "peak_frame_size"
        );
        assert_eq!(
            field(UserQos {
                peak_frame_rate: 10.0,
                ..q
            }),
            "peak_frame_rate"
        );
        assert_eq!(
            field(UserQos {
                peak_frame_rate: 1e307,
                ..q
            }),
            "peak_frame_rate"
        );
        assert_eq!(
            field(UserQos {
                frame_loss: 1.0,
                ..q
            }),
            "frame_loss"
        );
        assert_eq!(
            field(UserQos {
                frame_loss: -0.1,
                ..q
            }),
            "frame_loss"
        );
        assert_eq!(
            field(UserQos {
                frame_loss: f64::NAN,
                ..q
            }),
            "frame_loss"
        );
        assert_eq!(
            field(UserQos {
                delay: Duration::ZERO,
                ..q
            }),
            "delay"
        );
        let e = m
            .map(&UserQos {
                delay: Duration::ZERO,
                ..qos(ServiceClass::Cbr)
            })
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(e.to_string(), "invalid QoS: delay: CBR needs a delay bound");
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let bad = |config| QosMapper::new(config).unwrap_err().to_string();
        assert!(
            bad(QosMapperConfig {
                aal: AalOverhead {
                    per_frame: 48,
                    payload: 48
                },
                ..Default::default()
            })
            .contains("aal")
        );
        assert!(
            bad(QosMapperConfig {
                cdv_fraction: 1.5,
                ..Default::default()
            })
            .contains("cdv_fraction")
        );
        let m = QosMapper::new(QosMapperConfig {
            aal: AalOverhead::AAL34,
            cdv_fraction: 0.5,
        })
        .unwrap();
        // 4000 + 11 octets in 44-octet payloads: 92 cells.
        assert_eq!(m.map(&qos(ServiceClass::Cbr)).unwrap().traffic.mbs, 92);
    }

    #[test]
    fn invalid_cell_qos_from_the_wire_names_the_field() {
        let good = pb_cell_qos(&QosMapper::default().map(&qos(ServiceClass::RtVbr)).unwrap());
        let field = |c: pb::CellQos| match cell_qos_from_pb(&c) {
            Err(ControlError::InvalidQos { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let with = |f: &dyn Fn(&mut pb::TrafficDescriptor)| {
            let mut c = good;
            f(c.traffic.as_mut().unwrap());
            c
        };
        assert_eq!(
            field(pb::CellQos {
                traffic: None,
                ..good
            }),
            "traffic"
        );
        assert_eq!(
            field(with(&|t| t.service_class = 0)),
            "traffic.service_class"
        );
        assert_eq!(field(with(&|t| t.pcr = 0.0)), "traffic.pcr");
        assert_eq!(field(with(&|t| t.scr = t.pcr * 2.0)), "traffic.scr");
        assert_eq!(field(with(&|t| t.mbs = 0)), "traffic.mbs");
        assert_eq!(field(with(&|t| t.clr = 1.0)), "traffic.clr");
        // CBR: the SCR on the wire is ignored, an MBS of 0 is one cell.
        let cbr = cell_qos_from_pb(&with(&|t| {
            t.service_class = pb::ServiceClass::Cbr as i32;
            t.scr = 0.0;
            t.mbs = 0;
        }))
        .unwrap();
        assert_eq!(cbr.traffic.scr, cbr.traffic.pcr);
        assert_eq!(cbr.traffic.mbs, 1);
        let e = user_qos_from_pb(&pb::UserQos::default()).unwrap_err();
        assert!(e.to_string().contains("service_class"), "{e}");
    }

    #[test]
    fn microseconds_on_the_wire_never_round_a_bound_away() {
        assert_eq!(micros(Duration::ZERO), 0);
        assert_eq!(micros(Duration::from_nanos(1)), 1);
        assert_eq!(micros(Duration::from_nanos(1499)), 1);
        assert_eq!(micros(Duration::from_nanos(1500)), 2);
        assert_eq!(micros(Duration::MAX), u64::MAX / 1_000_000);
    }

    #[tokio::test]
    async fn collocated_and_enum_mappers_agree_with_the_core() {
        let core = QosMapper::default();
        let q = qos(ServiceClass::RtVbr);
        let direct = core.map(&q).unwrap();
        assert_eq!(MapQos::map(&core, &q).await.unwrap(), direct);
        let m = Mapper::Collocated(core);
        assert_eq!(m.map(&q).await.unwrap(), direct);
        assert_eq!(m.unmap(&direct).await.unwrap(), core.unmap(&direct));
    }

    fn classes() -> impl Strategy<Value = ServiceClass> {
        prop_oneof![
            Just(ServiceClass::Cbr),
            Just(ServiceClass::RtVbr),
            Just(ServiceClass::NrtVbr),
            Just(ServiceClass::Ubr),
        ]
    }

    /// Valid user QoS; `constant_rate` keeps the peak frame rate at the mean.
    fn user_qos(constant_rate: bool) -> impl Strategy<Value = UserQos> {
        (
            classes(),
            0.1f64..10_000.0,
            1u32..100_000,
            0u32..50_000,
            0.0f64..3.0,
            0.0f64..0.5,
            0u64..1_000_000,
        )
            .prop_map(
                move |(class, frame_rate, frame_size, extra, burst, frame_loss, slack_us)| {
                    let peak_frame_rate = if constant_rate {
                        frame_rate
                    } else {
                        frame_rate * (1.0 + burst)
                    };
                    UserQos {
                        class,
                        frame_rate,
                        frame_size,
                        peak_frame_size: frame_size + extra,
                        peak_frame_rate,
                        frame_loss,
                        // Longer than a frame interval, so a frame can always be sent.
                        delay: Duration::from_secs_f64(1.0 / peak_frame_rate)
                            + Duration::from_micros(slack_us),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn unmap_recovers_rates_and_sizes_to_within_a_cell(q in user_qos(true)) {
            let m = QosMapper::default();
            let payload = m.config().aal.payload;
            let c = m.map(&q).unwrap();
            c.validate().unwrap();
            let u = m.unmap(&c);
            prop_assert_eq!(u.class, q.class);
            prop_assert!(close(u.peak_frame_rate, q.peak_frame_rate, 1e-12));
            prop_assert!(u.peak_frame_size >= q.peak_frame_size);
            prop_assert!(u.peak_frame_size < q.peak_frame_size + payload);
            if is_vbr(q.class) {
                prop_assert!(close(u.frame_rate, q.frame_rate, 1e-12));
                prop_assert!(u.frame_size >= q.frame_size);
                prop_assert!(u.frame_size < q.frame_size + payload);
            } else {
                // CBR and UBR reserve the peak: a constant stream of peak frames.
                prop_assert_eq!(u.frame_size, u.peak_frame_size);
                prop_assert!(close(u.frame_rate, u.peak_frame_rate, 0.0));
            }
            prop_assert!(close(u.frame_loss, q.frame_loss, 1e-9) || (u.frame_loss - q.frame_loss).abs() < 1e-15);
            let dd = u.delay.as_picos().abs_diff(q.delay.as_picos());
            prop_assert!(dd <= 1, "delay {} vs {}", u.delay, q.delay);
            // And the unmapped QoS maps to the same contract.
            let again = m.map(&u).unwrap().traffic;
            prop_assert_eq!((again.class, again.mbs), (c.traffic.class, c.traffic.mbs));
            prop_assert!(close(again.pcr.0, c.traffic.pcr.0, 1e-12));
            prop_assert!(close(again.scr.0, c.traffic.scr.0, 1e-12));
        }

        #[test]
        fn map_unmap_map_keeps_the_contract(q in user_qos(false)) {
            let m = QosMapper::default();
            let c = m.map(&q).unwrap();
            let again = m.map(&m.unmap(&c)).unwrap();
            prop_assert_eq!(again.traffic.class, c.traffic.class);
            prop_assert!(close(again.traffic.pcr.0, c.traffic.pcr.0, 1e-12));
            prop_assert_eq!(again.traffic.mbs, c.traffic.mbs);
            // SCR comes back to within one cell per frame (at the peak frame rate).
            let per_frame = c.traffic.pcr.0 / f64::from(c.traffic.mbs);
            prop_assert!(again.traffic.scr.0 >= c.traffic.scr.0 * (1.0 - 1e-12));
            prop_assert!(again.traffic.scr.0 <= c.traffic.scr.0 + per_frame * (1.0 + 1e-9));
            prop_assert!(close(again.clr, c.clr, 1e-9) || (again.clr - c.clr).abs() < 1e-15);
        }

        #[test]
        fn the_wire_keeps_a_contract_to_the_microsecond(q in user_qos(false)) {
            let m = QosMapper::default();
            let c = m.map(&q).unwrap();
            let back = cell_qos_from_pb(&pb_cell_qos(&c)).unwrap();
            prop_assert_eq!(back.traffic, c.traffic);
            prop_assert_eq!(back.clr, c.clr);
            for (a, b) in [(back.ctd, c.ctd), (back.cdv, c.cdv), (back.burst_tolerance, c.burst_tolerance)] {
                prop_assert!(a.as_picos().abs_diff(b.as_picos()) <= 1_000_000, "{} vs {}", a, b);
            }
            let u = user_qos_from_pb(&pb_user_qos(&q)).unwrap();
            prop_assert_eq!(UserQos { delay: q.delay, ..u }, q);
        }
    }
}
