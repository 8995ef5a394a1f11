//! Quantities written out with their units, as scenario files and the CLI spell them
//! (DESIGN.md §4): `"155.52 Mb/s"`, `"125 us"`, `"60 cells/s"`.
//!
//! Rates are kept in bits per second as `f64`: link rates such as 155.52 Mb/s and cell
//! rates such as 353,207.5 cells/s are not integers in any common unit.

use core::fmt;
use core::str::FromStr;

use crate::CoreError;
use crate::time::Duration;

/// Octets in an ATM cell.
pub const CELL_OCTETS: u32 = 53;

/// A bit rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct BitRate(pub f64);

/// A cell rate in cells per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct CellRate(pub f64);

impl BitRate {
    /// Bits per second.
    pub const fn bps(self) -> f64 {
        self.0
    }
    /// The cell rate this bit rate carries in 53-octet cells.
    pub fn to_cell_rate(self) -> CellRate {
        CellRate(self.0 / f64::from(CELL_OCTETS * 8))
    }
    /// Time to send one cell at this rate (the cell slot).
    pub fn cell_time(self) -> Duration {
        Duration::from_secs_f64(f64::from(CELL_OCTETS * 8) / self.0)
    }
}

impl CellRate {
    /// Cells per second.
    pub const fn per_sec(self) -> f64 {
        self.0
    }
    /// The bit rate of this many cells per second.
    pub fn to_bit_rate(self) -> BitRate {
        BitRate(self.0 * f64::from(CELL_OCTETS * 8))
    }
}

/// Splits a quantity such as `"155.52 Mb/s"` into its number and its unit,
/// `(155.52, "Mb/s")`. The number may be negative or use an exponent (`"5e-3 s"`); the
/// caller judges its range, so that its message can say what was wrong.
pub fn split_quantity(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let v: f64 = num.trim().parse().ok()?;
    Some((v, unit.trim()))
}

/// [`split_quantity`] for the parsers here: finite and not negative, or nothing.
fn split_number(s: &str) -> Option<(f64, &str)> {
    split_quantity(s).filter(|(v, _)| v.is_finite() && *v >= 0.0)
}

impl FromStr for BitRate {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let err = || CoreError::Parse {
            text: s.to_owned(),
            expected: "a bit rate such as \"155.52 Mb/s\" (units b/s, kb/s, Mb/s, Gb/s)",
        };
        let (v, unit) = split_number(s).ok_or_else(err)?;
        let mult = match unit {
            "b/s" | "bps" => 1.0,
            "kb/s" | "kbps" => 1e3,
            "Mb/s" | "Mbps" => 1e6,
            "Gb/s" | "Gbps" => 1e9,
            _ => return Err(err()),
        };
        Ok(BitRate(v * mult))
    }
}

impl FromStr for CellRate {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let err = || CoreError::Parse {
            text: s.to_owned(),
            expected: "a cell rate such as \"60 cells/s\"",
        };
        let (v, unit) = split_number(s).ok_or_else(err)?;
        match unit {
            "cells/s" | "cell/s" => Ok(CellRate(v)),
            _ => Err(err()),
        }
    }
}

impl FromStr for Duration {
    type Err = CoreError;
    /// Parses `"125 us"`, `"2.5 ms"`, `"1 s"`, `"100 ns"`, `"7 ps"` (`µs` accepted).
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let err = || CoreError::Parse {
            text: s.to_owned(),
            expected: "a duration such as \"125 us\" (units ps, ns, us, ms, s, min, h)",
        };
        let (v, unit) = split_number(s).ok_or_else(err)?;
        let secs = match unit {
            "ps" => 1e-12,
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "min" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        Ok(Duration::from_secs_f64(v * secs))
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v >= 1e9 {
            write!(f, "{} Gb/s", v / 1e9)
        } else if v >= 1e6 {
            write!(f, "{} Mb/s", v / 1e6)
        } else if v >= 1e3 {
            write!(f, "{} kb/s", v / 1e3)
        } else {
            write!(f, "{v} b/s")
        }
    }
}
impl fmt::Display for CellRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cells/s", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rates() {
        let r: BitRate = "155.52 Mb/s".parse().unwrap();
        assert!((r.bps() - 155.52e6).abs() < 1e-3);
        assert_eq!(r.to_string(), "155.52 Mb/s");
        assert!((r.to_cell_rate().per_sec() - 366_792.452_8).abs() < 1e-3);
        assert_eq!("60 cells/s".parse::<CellRate>().unwrap(), CellRate(60.0));
        assert!("155 furlongs".parse::<BitRate>().is_err());
        assert!("-1 Mb/s".parse::<BitRate>().is_err());
        assert!("".parse::<BitRate>().is_err());
    }

    #[test]
    fn parse_durations() {
        assert_eq!(
            "125 us".parse::<Duration>().unwrap(),
            Duration::from_micros(125)
        );
        assert_eq!(
            "2.5ms".parse::<Duration>().unwrap(),
            Duration::from_micros(2500)
        );
        assert_eq!("1 s".parse::<Duration>().unwrap(), Duration::from_secs(1));
        let e = "3 fortnights".parse::<Duration>().unwrap_err();
        assert!(e.to_string().contains("3 fortnights"));
    }

    #[test]
    fn cell_time_of_oc3() {
        let r: BitRate = "155.52 Mb/s".parse().unwrap();
        // 424 bits / 155.52e6 b/s = 2.726337... us
        assert_eq!(r.cell_time().as_nanos(), 2726);
    }
}
