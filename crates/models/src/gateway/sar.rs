//! The gateway's SAR cell format, paper 004 §2 (Fig. 3, "Packet Translations in SPP") and
//! §6.1: "An ATM cell which has an overall size of 53 bytes, contains 8 bytes of overhead
//! information and 45 bytes of data."
//!
//! The paper uses the SAR protocol of Escobar and Partridge (1991) and names its fields in
//! the cell data structure of Table 1 (VCI, SAR sequence number, SAR F bit, SAR C bit),
//! but it does not give their layout. Our layout keeps the paper's sizes exactly: the
//! 5-octet ATM header (UNI, with its HEC) plus a 3-octet SAR header, then 45 data octets:
//!
//! ```text
//! octet 5   : F (bit 7) | C (bit 6) | LEN (bits 5-0, data octets used, 1..=45)
//! octets 6-7: SN, the 16-bit SAR sequence number of the connection (big-endian)
//! octets 8..53: data (45 octets; the unused tail of a short last cell is zero)
//! ```
//!
//! F, the framing bit, marks the last cell of an MCHIP segment (it is what the SPP's
//! Start Sequence Number table stands in for when that cell is lost, §5). C marks a
//! control segment, which the MPP hands to the NPE instead of the FDDI side (§2, MPP);
//! the model carries no control traffic (§5: "no control path traffic has been
//! modeled"), so C is always clear in the simulations but is encoded and decoded. LEN is
//! our addition inside the paper's 3 octets: a frame whose length is not a multiple of 45
//! needs its last cell's fill, and 6 bits hold 0..=45.
//!
//! Panic contract: [`SarCell::parse`] never panics on any input; [`SarCell::emit`] writes
//! into a 53-octet buffer it is given and refuses anything else.

use atmlab_wire::cell::{Cell, CellHeader, HeaderFormat, Pti};

use crate::ModelsError;

/// Octets of a cell on the ATM link.
pub const CELL_OCTETS: u32 = 53;
/// Octets of overhead per cell (ATM header 5 + SAR header 3), as the paper has it.
pub const OVERHEAD_OCTETS: u32 = 8;
/// Data octets per cell.
pub const DATA_OCTETS: u32 = 45;
/// Octets of the SAR header.
pub const SAR_HEADER_OCTETS: usize = 3;

/// One SAR cell, owned and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SarCell {
    /// The connection's VCI (VPI is 0 on the gateway's link).
    pub vci: u16,
    /// The SAR sequence number.
    pub seq: u16,
    /// F: last cell of a segment.
    pub framing: bool,
    /// C: the segment is control traffic (for the NPE).
    pub control: bool,
    /// The data octets (1..=45).
    pub data: Vec<u8>,
}

fn malformed(reason: impl Into<String>) -> ModelsError {
    ModelsError::Malformed {
        what: "SAR cell",
        reason: reason.into(),
    }
}

impl SarCell {
    /// Number of cells a segment of `octets` data octets takes (at least one).
    pub const fn cells_for(octets: u32) -> u32 {
        if octets == 0 {
            1
        } else {
            octets.div_ceil(DATA_OCTETS)
        }
    }

    /// Writes the cell into `buf` (exactly 53 octets).
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), ModelsError> {
        if buf.len() != CELL_OCTETS as usize {
            return Err(malformed(format!(
                "a cell buffer is 53 octets, got {}",
                buf.len()
            )));
        }
        if self.data.is_empty() || self.data.len() > DATA_OCTETS as usize {
            return Err(malformed(format!(
                "a cell carries 1..=45 data octets, got {}",
                self.data.len()
            )));
        }
        let mut cell = Cell::new_unchecked(&mut *buf);
        CellHeader::uni(0, self.vci, Pti::user(false))
            .emit(&mut cell)
            .map_err(|e| malformed(e.to_string()))?;
        buf[5] = (u8::from(self.framing) << 7)
            | (u8::from(self.control) << 6)
            | (self.data.len() as u8 & 0x3f);
        buf[6..8].copy_from_slice(&self.seq.to_be_bytes());
        let d = &mut buf[8..];
        d.fill(0);
        d[..self.data.len()].copy_from_slice(&self.data);
        Ok(())
    }

    /// Parses a 53-octet cell, checking the HEC and the LEN field.
    pub fn parse(buf: &[u8]) -> Result<Self, ModelsError> {
        let cell = Cell::new_checked(buf).map_err(|e| malformed(e.to_string()))?;
        let header =
            CellHeader::parse(&cell, HeaderFormat::Uni).map_err(|e| malformed(e.to_string()))?;
        let len = usize::from(buf[5] & 0x3f);
        if len == 0 || len > DATA_OCTETS as usize {
            return Err(malformed(format!("LEN {len} outside 1..=45")));
        }
        Ok(SarCell {
            vci: header.vci,
            seq: u16::from_be_bytes([buf[6], buf[7]]),
            framing: buf[5] & 0x80 != 0,
            control: buf[5] & 0x40 != 0,
            data: buf[8..8 + len].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_the_papers() {
        assert_eq!(OVERHEAD_OCTETS + DATA_OCTETS, CELL_OCTETS);
        assert_eq!(5 + SAR_HEADER_OCTETS as u32, OVERHEAD_OCTETS);
        // Table 3's 85-cell frame carries 3825 octets.
        assert_eq!(SarCell::cells_for(85 * 45), 85);
        assert_eq!(SarCell::cells_for(85 * 45 + 1), 86);
        assert_eq!(SarCell::cells_for(0), 1);
    }

    #[test]
    fn round_trip_into_a_dirty_buffer() {
        let c = SarCell {
            vci: 0x1234,
            seq: 0xbeef,
            framing: true,
            control: false,
            data: (0..17).collect(),
        };
        let mut buf = vec![0xa5; 53];
        c.emit(&mut buf).unwrap();
        assert_eq!(buf[5], 0x80 | 17);
        assert_eq!(&buf[6..8], &[0xbe, 0xef]);
        assert!(buf[8 + 17..].iter().all(|b| *b == 0));
        assert_eq!(SarCell::parse(&buf).unwrap(), c);
    }

    #[test]
    fn bad_cells_are_errors_not_panics() {
        assert!(SarCell::parse(&[0u8; 10]).is_err());
        let c = SarCell {
            vci: 40,
            seq: 1,
            framing: false,
            control: true,
            data: vec![1; 45],
        };
        let mut buf = vec![0; 53];
        c.emit(&mut buf).unwrap();
        let mut bad = buf.clone();
        bad[4] ^= 0xff; // HEC
        assert!(SarCell::parse(&bad).is_err());
        let mut bad = buf.clone();
        bad[5] &= 0xc0; // LEN 0
        assert!(SarCell::parse(&bad).is_err());
        assert!(c.emit(&mut [0u8; 52]).is_err());
        let empty = SarCell { data: vec![], ..c };
        assert!(empty.emit(&mut buf).is_err());
        for n in 0..=60usize {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37) as u8).collect();
            let _ = SarCell::parse(&junk);
        }
    }
}
