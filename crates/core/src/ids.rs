//! Connection identifiers of an ATM port: VPI, VCI and port numbers (ITU-T I.361 §2.2).
//!
//! A VPI is 8 bits at the UNI and 12 bits at the NNI; a VCI is 16 bits. The newtypes keep
//! a VPI from being passed where a VCI is meant; range checks against the interface type
//! happen where the interface is known (the wire codecs, the switch fabric).

use core::fmt;

use crate::CoreError;

/// Virtual path identifier: 8 bits at the UNI, 12 at the NNI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Vpi(pub u16);

/// Virtual channel identifier (16 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Vci(pub u16);

/// A switch port number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u16);

impl Vpi {
    /// Largest VPI at the user-network interface (8 bits).
    pub const MAX_UNI: u16 = 0xff;
    /// Largest VPI at the network-node interface (12 bits).
    pub const MAX_NNI: u16 = 0xfff;
}

/// A virtual channel: the (VPI, VCI) pair, written `vpi/vci` as in switch consoles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VcId {
    /// The virtual path.
    pub vpi: Vpi,
    /// The channel within it.
    pub vci: Vci,
}

impl VcId {
    /// The pair `vpi/vci`.
    pub const fn new(vpi: u16, vci: u16) -> Self {
        VcId {
            vpi: Vpi(vpi),
            vci: Vci(vci),
        }
    }
}

impl fmt::Display for Vpi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Display for Vci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Display for VcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.vpi.0, self.vci.0)
    }
}

impl core::str::FromStr for VcId {
    type Err = CoreError;
    /// Parses `"0/100"`; the VPI is checked against the NNI range (12 bits).
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let err = || CoreError::Parse {
            text: s.to_owned(),
            expected: "a virtual channel written VPI/VCI, e.g. \"0/100\"",
        };
        let (a, b) = s.trim().split_once('/').ok_or_else(err)?;
        let vpi: u16 = a.trim().parse().map_err(|_| err())?;
        let vci: u16 = b.trim().parse().map_err(|_| err())?;
        if vpi > Vpi::MAX_NNI {
            return Err(CoreError::OutOfRange {
                what: "VPI",
                value: vpi.into(),
                min: 0,
                max: Vpi::MAX_NNI.into(),
            });
        }
        Ok(VcId::new(vpi, vci))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vc_round_trip() {
        let vc: VcId = "1/100".parse().unwrap();
        assert_eq!(vc, VcId::new(1, 100));
        assert_eq!(vc.to_string(), "1/100");
        assert!("4096/1".parse::<VcId>().is_err());
        assert!("1-100".parse::<VcId>().is_err());
        assert!("1/65536".parse::<VcId>().is_err());
    }
}
