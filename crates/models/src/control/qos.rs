//! The QoS mapper in the simulated control plane (paper 000 §II-B, step 2 of a setup:
//! the user's QoS mapped to the cell-level contract before a route is sought). A
//! scenario may state each call's QoS as the application does (`qos = { class,
//! frame_rate, frame_size, ... }`) instead of a cell rate (`pcr`); the real
//! [`QosMapper`] core of `atmlab_control::qos` then maps it at every setup, in the
//! manager's step that pays `qos_work`, and the call asks the route object and the
//! switches for the contract it gives. No mapping logic lives here: only the reading of
//! the scenario's table.

use atmlab_control::qos::{QosMapper, UserQos};
use atmlab_core::time::Duration;
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;
use atmlab_sim::SimError;
use atmlab_sim::scenario::Params;

/// What a call asks for: a cell rate given outright, or a user's QoS that the QoS mapper
/// maps at each setup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Contract {
    /// `pcr = "100 /s"`: a CBR contract, no mapping.
    Cbr(f64),
    /// `qos = { ... }`: mapped by the QoS mapper core.
    Mapped(QosMapper, UserQos),
}

impl Contract {
    /// The cell-level contract of one call: the mapper's answer for `Mapped` (the real
    /// core, run now), or the CBR rate. An error is the mapper's refusal, named.
    pub fn traffic(&self) -> Result<(TrafficDescriptor, f64), String> {
        match self {
            Contract::Cbr(pcr) => Ok((TrafficDescriptor::cbr(CellRate(*pcr)), 0.0)),
            Contract::Mapped(mapper, q) => mapper
                .map(q)
                .map(|c| (c.traffic, c.clr))
                .map_err(|e| e.to_string()),
        }
    }

    /// The peak cell rate a call's route must have room for.
    pub fn pcr(&self) -> Result<f64, String> {
        self.traffic().map(|(t, _)| t.pcr.per_sec())
    }

    /// From a scenario: exactly one of `pcr` and `qos`. The QoS is mapped once here, so
    /// that a contract no network could carry is refused before the run, naming the
    /// field the mapper found at fault.
    pub fn from_params(p: &Params<'_>) -> Result<Contract, SimError> {
        match (p.has("pcr"), p.has("qos")) {
            (true, true) => Err(p.error("qos", "give either `pcr` or `qos`, not both")),
            (false, false) => Err(p.error(
                "pcr",
                "missing: each call's CBR peak cell rate (`pcr = \"100 /s\"`) or its QoS (`qos = { class, frame_rate, frame_size, ... }`)",
            )),
            (true, false) => Ok(Contract::Cbr(p.positive_rate("pcr")?)),
            (false, true) => {
                let q = p.table("qos")?;
                let class = match q.string("class")? {
                    "cbr" => ServiceClass::Cbr,
                    "rt-vbr" => ServiceClass::RtVbr,
                    "nrt-vbr" => ServiceClass::NrtVbr,
                    "ubr" => ServiceClass::Ubr,
                    other => {
                        return Err(q.error(
                            "class",
                            format!("{other:?}: expected \"cbr\", \"rt-vbr\", \"nrt-vbr\" or \"ubr\""),
                        ));
                    }
                };
                let octets = |key: &str, x: f64| -> Result<u32, SimError> {
                    if x.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&x) {
                        return Err(q.error(key, format!("{x}: a whole number of octets")));
                    }
                    Ok(x as u32)
                };
                let user = UserQos {
                    class,
                    frame_rate: q.positive_rate("frame_rate")?,
                    frame_size: octets("frame_size", q.number("frame_size")?)?,
                    peak_frame_size: octets(
                        "peak_frame_size",
                        q.number_or("peak_frame_size", 0.0)?,
                    )?,
                    peak_frame_rate: if q.has("peak_frame_rate") {
                        q.positive_rate("peak_frame_rate")?
                    } else {
                        0.0
                    },
                    frame_loss: q.number_or("frame_loss", 0.0)?,
                    delay: if q.has("delay") {
                        q.duration("delay")?
                    } else {
                        Duration::ZERO
                    },
                };
                q.finish()?;
                let mapper = QosMapper::default();
                let c = Contract::Mapped(mapper, user);
                c.traffic()
                    .map_err(|e| p.error("qos", format!("the QoS mapper refuses it: {e}")))?;
                Ok(c)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Contract, SimError> {
        let table: toml::Table = toml::from_str(text).unwrap();
        Contract::from_params(&Params::new("t.toml", &table))
    }

    #[test]
    fn a_user_qos_is_mapped_by_the_real_mapper() {
        let c = parse(
            r#"qos = { class = "cbr", frame_rate = "25 /s", frame_size = 4000, delay = "100 ms" }"#,
        )
        .unwrap();
        let (t, _) = c.traffic().unwrap();
        // AAL5: 4,000 octets + 8 of trailer in 48-octet cells = 84 cells a frame.
        assert_eq!(t.pcr.per_sec(), 25.0 * 84.0);
        assert_eq!(t.class, ServiceClass::Cbr);
    }

    #[test]
    fn a_bad_contract_is_refused_naming_its_field() {
        let e = parse(
            r#"qos = { class = "abr", frame_rate = "25 /s", frame_size = 4000, delay = "100 ms" }"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("class"), "{e}");
        let e = parse(
            r#"pcr = "10 /s"
qos = { class = "cbr", frame_rate = "25 /s", frame_size = 4000, delay = "100 ms" }"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not both"), "{e}");
        let e = parse(r#"qos = { class = "cbr", frame_rate = "25 /s", frame_size = 4000, delay = "100 ms", frame_loss = 2.0 }"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("frame_loss"), "{e}");
    }
}
