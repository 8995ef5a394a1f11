//! The QoS mapper's sans-IO core (paper 000 §II-B step 2): the mapping of user QoS to
//! the cell-level contract and back, as the module doc of [`crate::qos`] states it.

use atmlab_core::time::Duration;
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;

use crate::ControlError;

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

pub(super) fn invalid(field: &'static str, reason: String) -> ControlError {
    ControlError::InvalidQos { field, reason }
}

pub(super) fn is_vbr(class: ServiceClass) -> bool {
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
