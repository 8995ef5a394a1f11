//! Capture files that Wireshark and tshark open: libpcap format, one record per reassembled
//! AAL5 CPCS-PDU, with one of two link types:
//!
//! - [`LinkType::SunAtm`] (LINKTYPE_SUNATM = 123), the classic ATM capture format: a
//!   4-octet pseudo-header with the VPI and VCI, then the PDU.
//! - [`LinkType::Erf`] (LINKTYPE_ERF = 197), Endace's Extensible Record Format with record
//!   type 4 (AAL5): a 16-octet ERF header, the 4-octet cell header, then the PDU.
//!
//! Why two: Wireshark (checked with 4.0) hands SunATM records to its "truncated ATM PDU"
//! dissector, which shows the VPI and VCI but never looks for an AAL5 trailer; ERF AAL5
//! records go to the "untruncated" dissector, which decodes the trailer (UU, CPI, Length)
//! and verifies the CRC-32, marking it "(correct)" or "(incorrect)". Use ERF when you want
//! Wireshark to check the frames; `tshark -o erf.aal5_type:unspecified` stops it from
//! guessing a LANE or LLC payload inside them.
//!
//! Each record is a 4-octet SunATM pseudo-header followed by the whole CPCS-PDU as received
//! (SDU, pad and trailer), so that Wireshark's ATM dissector decodes the VPI, the VCI and
//! the AAL5 trailer and verifies its CRC-32 itself: a frame that arrived corrupted is
//! written as it arrived, and the dissector flags it.
//!
//! ```text
//!  SunATM pseudo-header: flags(1) | VPI(1) | VCI(2, big-endian)
//!  flags: bit 7 = direction (1 = sent by us), bits 3..0 = traffic type (0 = raw)
//! ```
//!
//! The SunATM pseudo-header has one octet for the VPI: NNI cells with a VPI above 255
//! cannot be recorded in it, and the encoder says so rather than truncating the VPI.
//!
//! The module is sans-IO at its core ([`file_header`], [`SunAtmRecord::emit`] build
//! bytes); [`PcapWriter`] is a thin convenience over any `std::io::Write`.

use std::io::{self, Write};

use atmlab_core::time::Instant;

use crate::WireError;

/// The libpcap link type of SunATM captures.
pub const LINKTYPE_SUNATM: u32 = 123;
/// The libpcap link type of ERF records.
pub const LINKTYPE_ERF: u32 = 197;
/// ERF record type: AAL5 PDU with its 4-octet cell header.
pub const ERF_TYPE_AAL5: u8 = 4;
/// Octets of the ERF record header.
pub const ERF_HEADER_LEN: usize = 16;

/// The capture formats atmlab writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkType {
    /// LINKTYPE_SUNATM: VPI/VCI pseudo-header.
    #[default]
    SunAtm,
    /// LINKTYPE_ERF with AAL5 records: Wireshark verifies the AAL5 trailer.
    Erf,
}

impl LinkType {
    /// The libpcap link type number.
    pub const fn number(self) -> u32 {
        match self {
            LinkType::SunAtm => LINKTYPE_SUNATM,
            LinkType::Erf => LINKTYPE_ERF,
        }
    }
}
/// The libpcap magic number (microsecond timestamps).
pub const MAGIC: u32 = 0xa1b2_c3d4;
/// Octets of the SunATM pseudo-header.
pub const SUNATM_HEADER_LEN: usize = 4;
/// The snapshot length written to the file header: the largest AAL5 PDU (65,568 octets)
/// plus the pseudo-header fits.
pub const SNAPLEN: u32 = 262_144;

/// The 24-octet libpcap global header for `linktype`.
pub fn file_header(linktype: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone and sigfigs: 0.
    h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
    h[20..24].copy_from_slice(&linktype.to_le_bytes());
    h
}

/// Which way a recorded PDU travelled, as the SunATM flags octet says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Received from the network.
    #[default]
    Received,
    /// Sent by the capturing host.
    Sent,
}

/// One SunATM record: a PDU on a VC at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SunAtmRecord<'a> {
    /// When the PDU was complete.
    pub time: Instant,
    /// Which way it went.
    pub direction: Direction,
    /// The VPI (must fit in 8 bits).
    pub vpi: u16,
    /// The VCI.
    pub vci: u16,
    /// The CPCS-PDU (SDU, pad and trailer), as received.
    pub pdu: &'a [u8],
}

const PS_PER_S: u64 = 1_000_000_000_000;

impl SunAtmRecord<'_> {
    /// Octets [`SunAtmRecord::emit_as`] appends for `link`: the 16-octet pcap record
    /// header, the link's own header, and the PDU.
    pub fn buffer_len(&self, link: LinkType) -> usize {
        16 + self.link_header_len(link) + self.pdu.len()
    }

    fn link_header_len(&self, link: LinkType) -> usize {
        match link {
            LinkType::SunAtm => SUNATM_HEADER_LEN,
            LinkType::Erf => ERF_HEADER_LEN + 4,
        }
    }

    /// Appends the record to `out` as a SunATM record.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        self.emit_as(LinkType::SunAtm, out)
    }

    /// Appends the record to `out` in `link`'s format. On error nothing is appended.
    pub fn emit_as(&self, link: LinkType, out: &mut Vec<u8>) -> Result<(), WireError> {
        if self.vpi > 0xff {
            // Both formats carry the UNI layout: 8 bits of VPI.
            return Err(WireError::FieldRange {
                field: "VPI in a SunATM or ERF capture (8 bits)",
                value: self.vpi.into(),
                max: 0xff,
            });
        }
        let caplen = self.link_header_len(link) + self.pdu.len();
        let max = match link {
            LinkType::SunAtm => SNAPLEN as usize,
            // ERF's record and wire lengths are 16-bit fields.
            LinkType::Erf => usize::from(u16::MAX) - ERF_HEADER_LEN,
        };
        if caplen > max {
            return Err(WireError::FieldRange {
                field: "captured PDU length",
                value: caplen as u64,
                max: max as u64,
            });
        }
        let ps = self.time.as_picos();
        let secs = ps / PS_PER_S;
        let usecs = (ps % PS_PER_S) / 1_000_000;
        // pcap's seconds field is 32 bits; wrap rather than fail (times are relative).
        out.extend_from_slice(&(secs as u32).to_le_bytes());
        out.extend_from_slice(&(usecs as u32).to_le_bytes());
        out.extend_from_slice(&(caplen as u32).to_le_bytes());
        out.extend_from_slice(&(caplen as u32).to_le_bytes());
        match link {
            LinkType::SunAtm => {
                let flags = match self.direction {
                    Direction::Sent => 0x80,
                    Direction::Received => 0x00,
                };
                out.push(flags);
                out.push(self.vpi as u8);
                out.extend_from_slice(&self.vci.to_be_bytes());
            }
            LinkType::Erf => {
                // ERF time: seconds in the high 32 bits, binary fraction in the low 32.
                let frac = ((u128::from(ps % PS_PER_S)) << 32) / u128::from(PS_PER_S);
                let ts = ((secs & 0xffff_ffff) << 32) | frac as u64;
                out.extend_from_slice(&ts.to_le_bytes());
                out.push(ERF_TYPE_AAL5);
                // Flags: capture interface 0 (received) or 1 (sent); varying length.
                let iface = match self.direction {
                    Direction::Received => 0,
                    Direction::Sent => 1,
                };
                out.push(0x04 | iface);
                let rlen = caplen as u16; // the ERF header counts itself
                out.extend_from_slice(&rlen.to_be_bytes());
                out.extend_from_slice(&0u16.to_be_bytes()); // loss counter
                // Wire length counts the cell header and PDU, which Wireshark dissects.
                out.extend_from_slice(&((caplen - ERF_HEADER_LEN) as u16).to_be_bytes());
                let hdr: u32 = (u32::from(self.vpi) << 20) | (u32::from(self.vci) << 4);
                out.extend_from_slice(&hdr.to_be_bytes());
            }
        }
        out.extend_from_slice(self.pdu);
        Ok(())
    }
}

/// Writes a capture of AAL5 PDUs to any `Write`.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    link: LinkType,
    scratch: Vec<u8>,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes a SunATM file header and returns the writer.
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_link_type(out, LinkType::SunAtm)
    }

    /// Writes the file header for `link` and returns the writer.
    pub fn with_link_type(mut out: W, link: LinkType) -> io::Result<Self> {
        out.write_all(&file_header(link.number()))?;
        Ok(PcapWriter {
            out,
            link,
            scratch: Vec::new(),
            records: 0,
        })
    }

    /// Appends one record. A record that cannot be encoded (VPI above 255) is an
    /// `InvalidInput` error carrying the [`WireError`]; nothing is written for it.
    pub fn write(&mut self, rec: &SunAtmRecord<'_>) -> io::Result<()> {
        self.scratch.clear();
        rec.emit_as(self.link, &mut self.scratch)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.out.write_all(&self.scratch)?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout() {
        let h = file_header(LINKTYPE_SUNATM);
        assert_eq!(&h[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&h[4..8], &[2, 0, 4, 0]);
        assert_eq!(&h[20..], &[123, 0, 0, 0]);
    }

    #[test]
    fn record_layout() {
        let pdu = [0xa5u8; 48];
        let rec = SunAtmRecord {
            time: Instant::from_picos(2_500_000_000_000 + 7_000_000),
            direction: Direction::Sent,
            vpi: 1,
            vci: 0x0102,
            pdu: &pdu,
        };
        let mut out = Vec::new();
        rec.emit(&mut out).unwrap();
        assert_eq!(out.len(), rec.buffer_len(LinkType::SunAtm));
        assert_eq!(&out[..4], &2u32.to_le_bytes());
        assert_eq!(&out[4..8], &500_007u32.to_le_bytes());
        assert_eq!(&out[8..12], &52u32.to_le_bytes());
        assert_eq!(&out[16..20], &[0x80, 1, 0x01, 0x02]);
        let too_big = SunAtmRecord { vpi: 256, ..rec };
        let mut out2 = Vec::new();
        assert!(too_big.emit(&mut out2).is_err());
        assert!(out2.is_empty());
    }

    #[test]
    fn erf_record_layout() {
        let pdu = [0x5au8; 48];
        let rec = SunAtmRecord {
            time: Instant::from_picos(3 * PS_PER_S + PS_PER_S / 2),
            direction: Direction::Received,
            vpi: 1,
            vci: 100,
            pdu: &pdu,
        };
        let mut out = Vec::new();
        rec.emit_as(LinkType::Erf, &mut out).unwrap();
        assert_eq!(out.len(), rec.buffer_len(LinkType::Erf));
        let erf = &out[16..];
        // Timestamp 3.5 s: seconds 3 in the high word, 0x8000_0000 fraction.
        assert_eq!(&erf[..8], &((3u64 << 32) | 0x8000_0000).to_le_bytes());
        assert_eq!(erf[8], ERF_TYPE_AAL5);
        assert_eq!(erf[9], 0x04);
        assert_eq!(&erf[10..12], &(16u16 + 4 + 48).to_be_bytes());
        assert_eq!(&erf[12..14], &[0, 0]);
        assert_eq!(&erf[14..16], &(4u16 + 48).to_be_bytes());
        assert_eq!(&erf[16..20], &[0x00, 0x10, 0x06, 0x40]);
        assert_eq!(&erf[20..], &pdu[..]);
        let huge = vec![0u8; 65_520];
        let mut out = Vec::new();
        assert!(
            SunAtmRecord { pdu: &huge, ..rec }
                .emit_as(LinkType::Erf, &mut out)
                .is_err()
        );
        assert!(out.is_empty());
    }

    #[test]
    fn writer_counts_and_refuses_cleanly() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let pdu = [0u8; 48];
        let rec = SunAtmRecord {
            time: Instant::ZERO,
            direction: Direction::Received,
            vpi: 0,
            vci: 32,
            pdu: &pdu,
        };
        w.write(&rec).unwrap();
        assert!(w.write(&SunAtmRecord { vpi: 999, ..rec }).is_err());
        assert_eq!(w.records(), 1);
        assert_eq!(w.finish().unwrap().len(), 24 + 16 + 4 + 48);
    }
}
