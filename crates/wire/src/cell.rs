//! The ATM cell: a 5-octet header and a 48-octet payload (ITU-T I.361 §2; HEC per
//! I.432.1 §4.3).
//!
//! ```text
//!  UNI header                          NNI header
//!  octet 0: GFC(4) | VPI[7:4]          VPI[11:4]
//!  octet 1: VPI[3:0] | VCI[15:12]      VPI[3:0] | VCI[15:12]
//!  octet 2: VCI[11:4]                  VCI[11:4]
//!  octet 3: VCI[3:0] | PT(3) | CLP     VCI[3:0] | PT(3) | CLP
//!  octet 4: HEC                        HEC
//! ```
//!
//! [`Cell`] is a zero-copy view over any `AsRef<[u8]>` (smoltcp style); [`CellHeader`] is
//! the owned, validated representation with `parse` / `emit`; [`HecReceiver`] is the
//! receiver's correction/detection state machine of I.432.1 Figure 3.
//!
//! Panic contract: [`Cell::new_checked`] rejects a buffer shorter than [`CELL_LEN`], after
//! which no accessor panics. [`Cell::new_unchecked`] skips the check; its accessors then
//! panic on a short buffer, as slice indexing does. Nothing here allocates.

use crate::WireError;
use crate::crc::{self, single_bit_error};

/// Octets in a cell.
pub const CELL_LEN: usize = 53;
/// Octets in the cell header, HEC included.
pub const HEADER_LEN: usize = 5;
/// Octets of payload.
pub const PAYLOAD_LEN: usize = 48;

/// Field offsets (octet ranges) within a cell.
pub mod field {
    use core::ops::{Range, RangeFrom};
    /// The four octets the HEC covers.
    pub const HEADER: Range<usize> = 0..4;
    /// The HEC octet.
    pub const HEC: usize = 4;
    /// The 48-octet payload.
    pub const PAYLOAD: Range<usize> = 5..53;
    /// Everything after the header (for views over longer buffers).
    pub const REST: RangeFrom<usize> = 5..;
}

/// Which interface the header belongs to: it decides whether octet 0 holds a GFC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HeaderFormat {
    /// User-network interface: 4-bit GFC, 8-bit VPI.
    #[default]
    Uni,
    /// Network-node interface: no GFC, 12-bit VPI.
    Nni,
}

impl HeaderFormat {
    /// The largest VPI this format can carry.
    pub const fn max_vpi(self) -> u16 {
        match self {
            HeaderFormat::Uni => 0xff,
            HeaderFormat::Nni => 0xfff,
        }
    }
}

/// The payload type code points (I.361 §2.2.4, Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pti {
    /// User data cell (PT 0xx).
    UserData {
        /// Explicit forward congestion indication (PT bit 2).
        congestion: bool,
        /// The ATM-user-to-ATM-user indication, the "SDU-type" bit (PT bit 1); AAL5 sets
        /// it on the last cell of a CPCS-PDU.
        sdu_type: bool,
    },
    /// F5 OAM segment cell (PT 100).
    OamF5Segment,
    /// F5 OAM end-to-end cell (PT 101).
    OamF5EndToEnd,
    /// Resource management cell (PT 110).
    ResourceManagement,
    /// Reserved for future functions (PT 111).
    Reserved,
}

impl Pti {
    /// Decodes the 3-bit PT field (higher bits ignored).
    pub const fn from_bits(b: u8) -> Pti {
        match b & 0x7 {
            0b100 => Pti::OamF5Segment,
            0b101 => Pti::OamF5EndToEnd,
            0b110 => Pti::ResourceManagement,
            0b111 => Pti::Reserved,
            u => Pti::UserData {
                congestion: u & 0b010 != 0,
                sdu_type: u & 0b001 != 0,
            },
        }
    }
    /// The 3-bit PT field.
    pub const fn to_bits(self) -> u8 {
        match self {
            Pti::UserData {
                congestion,
                sdu_type,
            } => ((congestion as u8) << 1) | sdu_type as u8,
            Pti::OamF5Segment => 0b100,
            Pti::OamF5EndToEnd => 0b101,
            Pti::ResourceManagement => 0b110,
            Pti::Reserved => 0b111,
        }
    }
    /// A user data cell that ends an AAL5 CPCS-PDU (SDU-type 1).
    pub const fn is_end_of_frame(self) -> bool {
        matches!(self, Pti::UserData { sdu_type: true, .. })
    }
    /// A plain user data cell with the given SDU-type bit and no congestion.
    pub const fn user(sdu_type: bool) -> Pti {
        Pti::UserData {
            congestion: false,
            sdu_type,
        }
    }
    /// A short name for listings: `user`, with `,efci` for congestion and `,end` for the
    /// SDU-type bit; `oam-f5-segment`, `oam-f5-end-to-end`, `rm` or `reserved`.
    pub const fn name(self) -> &'static str {
        match self {
            Pti::UserData {
                congestion: false,
                sdu_type: false,
            } => "user",
            Pti::UserData {
                congestion: false,
                sdu_type: true,
            } => "user,end",
            Pti::UserData {
                congestion: true,
                sdu_type: false,
            } => "user,efci",
            Pti::UserData {
                congestion: true,
                sdu_type: true,
            } => "user,efci,end",
            Pti::OamF5Segment => "oam-f5-segment",
            Pti::OamF5EndToEnd => "oam-f5-end-to-end",
            Pti::ResourceManagement => "rm",
            Pti::Reserved => "reserved",
        }
    }
}

/// The pre-assigned VCIs (I.361 §2.2.3 Table 1; ATM Forum UNI 4.0, LANE, PNNI). VCIs 0-31
/// of every VPI are reserved for these functions; user connections start at 32.
pub mod vci {
    /// Unassigned / idle cells (with VPI 0).
    pub const UNASSIGNED: u16 = 0;
    /// Meta-signalling.
    pub const META_SIGNALLING: u16 = 1;
    /// General broadcast signalling.
    pub const BROADCAST_SIGNALLING: u16 = 2;
    /// Segment F4 OAM flow.
    pub const F4_OAM_SEGMENT: u16 = 3;
    /// End-to-end F4 OAM flow.
    pub const F4_OAM_END_TO_END: u16 = 4;
    /// Point-to-point signalling (Q.2931).
    pub const SIGNALLING: u16 = 5;
    /// VP resource management.
    pub const VP_RM: u16 = 6;
    /// ILMI (Integrated Local Management Interface).
    pub const ILMI: u16 = 16;
    /// LANE configuration direct (LECS).
    pub const LANE: u16 = 17;
    /// PNNI routing control channel.
    pub const PNNI: u16 = 18;
    /// First VCI free for user connections.
    pub const FIRST_USER: u16 = 32;

    /// The name of a pre-assigned VCI, or `None` for a user VCI.
    pub const fn name(vci: u16) -> Option<&'static str> {
        Some(match vci {
            UNASSIGNED => "unassigned",
            META_SIGNALLING => "meta-signalling",
            BROADCAST_SIGNALLING => "broadcast signalling",
            F4_OAM_SEGMENT => "F4 OAM segment",
            F4_OAM_END_TO_END => "F4 OAM end-to-end",
            SIGNALLING => "signalling",
            VP_RM => "VP resource management",
            ILMI => "ILMI",
            LANE => "LANE",
            PNNI => "PNNI",
            7..=31 => "reserved",
            _ => return None,
        })
    }
    /// True for VCIs 0-31, which carry no user traffic.
    pub const fn is_reserved(vci: u16) -> bool {
        vci < FIRST_USER
    }
}

/// A zero-copy view of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Cell<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Cell<T> {
        Cell { buffer }
    }

    /// Wraps a buffer, checking it holds a whole cell (octets past 53 are ignored).
    pub fn new_checked(buffer: T) -> Result<Cell<T>, WireError> {
        WireError::check_len("ATM cell", CELL_LEN, buffer.as_ref().len())?;
        Ok(Cell { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The four header octets the HEC covers.
    #[inline]
    pub fn header_bytes(&self) -> [u8; 4] {
        let b = self.b();
        [b[0], b[1], b[2], b[3]]
    }

    /// Generic flow control (UNI only; meaningless at the NNI).
    #[inline]
    pub fn gfc(&self) -> u8 {
        self.b()[0] >> 4
    }

    /// The VPI as `format` lays it out.
    #[inline]
    pub fn vpi(&self, format: HeaderFormat) -> u16 {
        let b = self.b();
        match format {
            HeaderFormat::Uni => (u16::from(b[0] & 0x0f) << 4) | u16::from(b[1] >> 4),
            HeaderFormat::Nni => (u16::from(b[0]) << 4) | u16::from(b[1] >> 4),
        }
    }

    /// The VCI.
    #[inline]
    pub fn vci(&self) -> u16 {
        let b = self.b();
        (u16::from(b[1] & 0x0f) << 12) | (u16::from(b[2]) << 4) | u16::from(b[3] >> 4)
    }

    /// The payload type.
    #[inline]
    pub fn pti(&self) -> Pti {
        Pti::from_bits(self.b()[3] >> 1)
    }

    /// Cell loss priority: true for the lower priority (discard first).
    #[inline]
    pub fn clp(&self) -> bool {
        self.b()[3] & 1 != 0
    }

    /// The HEC octet as carried.
    #[inline]
    pub fn hec(&self) -> u8 {
        self.b()[field::HEC]
    }

    /// True when the carried HEC matches the header.
    #[inline]
    pub fn verify_hec(&self) -> bool {
        crc::hec(self.header_bytes()) == self.hec()
    }

    /// The 48-octet payload.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cell<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the GFC (UNI). Only the low 4 bits are used.
    #[inline]
    pub fn set_gfc(&mut self, gfc: u8) {
        let b = self.bm();
        b[0] = (b[0] & 0x0f) | (gfc << 4);
    }

    /// Sets the VPI in `format`'s layout; bits beyond the field are dropped.
    #[inline]
    pub fn set_vpi(&mut self, format: HeaderFormat, vpi: u16) {
        let b = self.bm();
        match format {
            HeaderFormat::Uni => b[0] = (b[0] & 0xf0) | ((vpi >> 4) as u8 & 0x0f),
            HeaderFormat::Nni => b[0] = (vpi >> 4) as u8,
        }
        b[1] = (b[1] & 0x0f) | ((vpi as u8) << 4);
    }

    /// Sets the VCI.
    #[inline]
    pub fn set_vci(&mut self, vci: u16) {
        let b = self.bm();
        b[1] = (b[1] & 0xf0) | (vci >> 12) as u8;
        b[2] = (vci >> 4) as u8;
        b[3] = (b[3] & 0x0f) | ((vci as u8) << 4);
    }

    /// Sets the payload type.
    #[inline]
    pub fn set_pti(&mut self, pti: Pti) {
        let b = self.bm();
        b[3] = (b[3] & 0xf1) | (pti.to_bits() << 1);
    }

    /// Sets the cell loss priority.
    #[inline]
    pub fn set_clp(&mut self, clp: bool) {
        let b = self.bm();
        b[3] = (b[3] & 0xfe) | clp as u8;
    }

    /// Sets the HEC octet as given (see [`Cell::fill_hec`] to compute it).
    #[inline]
    pub fn set_hec(&mut self, hec: u8) {
        self.bm()[field::HEC] = hec;
    }

    /// Computes and writes the HEC for the current header.
    #[inline]
    pub fn fill_hec(&mut self) {
        let h = crc::hec(self.header_bytes());
        self.set_hec(h);
    }

    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PAYLOAD]
    }
}

/// The owned, validated cell header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CellHeader {
    /// UNI or NNI layout.
    pub format: HeaderFormat,
    /// Generic flow control (UNI; must be 0 at the NNI).
    pub gfc: u8,
    /// Virtual path identifier.
    pub vpi: u16,
    /// Virtual channel identifier.
    pub vci: u16,
    /// Payload type.
    pub pti: Pti,
    /// Cell loss priority.
    pub clp: bool,
}

impl CellHeader {
    /// A UNI user-data header for `vpi/vci`.
    pub const fn uni(vpi: u16, vci: u16, pti: Pti) -> Self {
        CellHeader {
            format: HeaderFormat::Uni,
            gfc: 0,
            vpi,
            vci,
            pti,
            clp: false,
        }
    }

    /// Parses the header of `cell` in `format`, rejecting a wrong HEC. (A receiver that
    /// corrects single-bit errors runs [`HecReceiver`] first.)
    pub fn parse<T: AsRef<[u8]>>(cell: &Cell<T>, format: HeaderFormat) -> Result<Self, WireError> {
        let computed = crc::hec(cell.header_bytes());
        if computed != cell.hec() {
            return Err(WireError::Hec {
                received: cell.hec(),
                computed,
            });
        }
        Ok(Self::parse_unchecked(cell, format))
    }

    /// The header fields of `cell` in `format` as they are, without checking the HEC: for
    /// a listing that shows damaged cells too. Anything that acts on a cell uses
    /// [`CellHeader::parse`].
    pub fn parse_unchecked<T: AsRef<[u8]>>(cell: &Cell<T>, format: HeaderFormat) -> Self {
        CellHeader {
            format,
            gfc: match format {
                HeaderFormat::Uni => cell.gfc(),
                HeaderFormat::Nni => 0,
            },
            vpi: cell.vpi(format),
            vci: cell.vci(),
            pti: cell.pti(),
            clp: cell.clp(),
        }
    }

    /// Checks every field fits its bits.
    pub fn check(&self) -> Result<(), WireError> {
        if self.gfc > 0xf || (self.format == HeaderFormat::Nni && self.gfc != 0) {
            return Err(WireError::FieldRange {
                field: "GFC",
                value: self.gfc.into(),
                max: if self.format == HeaderFormat::Nni {
                    0
                } else {
                    0xf
                },
            });
        }
        let max = self.format.max_vpi();
        if self.vpi > max {
            return Err(WireError::FieldRange {
                field: match self.format {
                    HeaderFormat::Uni => "VPI (UNI, 8 bits)",
                    HeaderFormat::Nni => "VPI (NNI, 12 bits)",
                },
                value: self.vpi.into(),
                max: max.into(),
            });
        }
        Ok(())
    }

    /// Octets [`CellHeader::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// The five header octets, HEC included (fields assumed checked).
    #[inline]
    pub fn to_bytes(&self) -> [u8; 5] {
        let mut b = [0u8; 5];
        let first = match self.format {
            HeaderFormat::Uni => (self.gfc << 4) | ((self.vpi >> 4) as u8 & 0x0f),
            HeaderFormat::Nni => (self.vpi >> 4) as u8,
        };
        b[0] = first;
        b[1] = ((self.vpi as u8) << 4) | (self.vci >> 12) as u8;
        b[2] = (self.vci >> 4) as u8;
        b[3] = ((self.vci as u8) << 4) | (self.pti.to_bits() << 1) | self.clp as u8;
        b[4] = crc::hec([b[0], b[1], b[2], b[3]]);
        b
    }

    /// Writes the header and its HEC into the first five octets of `cell`, after
    /// checking the fields.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, cell: &mut Cell<T>) -> Result<(), WireError> {
        self.check()?;
        let out = WireError::room("ATM cell header", HEADER_LEN, cell.buffer.as_mut())?;
        out.copy_from_slice(&self.to_bytes());
        Ok(())
    }
}

/// The two modes of the I.432.1 receiver (§4.3.2.2, Figure 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HecMode {
    /// The default: single-bit errors are corrected.
    #[default]
    Correction,
    /// Entered after any error: every errored cell is discarded until a good one arrives.
    Detection,
}

/// What the HEC receiver did with one header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HecOutcome {
    /// The header was error-free.
    Valid,
    /// A single-bit error was corrected in place; the bit position (0 = MSB of octet 0).
    Corrected(u8),
    /// The cell must be discarded: a multi-bit error, or any error in detection mode.
    Discard,
}

/// The receiver HEC state machine of I.432.1 Figure 3.
///
/// In correction mode an error-free header keeps the mode; a single-bit error is corrected
/// and the receiver moves to detection mode; a multi-bit error discards the cell and moves
/// to detection mode. In detection mode every errored header is discarded, and the first
/// error-free header returns the receiver to correction mode. This guards against
/// miscorrecting the burst errors that follow a first error on real links.
#[derive(Debug, Clone, Default)]
pub struct HecReceiver {
    mode: HecMode,
    /// Cells that passed unchanged.
    pub valid: u64,
    /// Cells whose header was corrected.
    pub corrected: u64,
    /// Cells discarded.
    pub discarded: u64,
}

impl HecReceiver {
    /// A receiver in correction mode.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current mode.
    pub fn mode(&self) -> HecMode {
        self.mode
    }

    /// Checks the first five octets of `cell`, correcting a single-bit error in place
    /// when allowed. `cell` must hold at least 5 octets; a shorter one is discarded.
    pub fn check(&mut self, cell: &mut [u8]) -> HecOutcome {
        let Some(h) = cell.get_mut(..HEADER_LEN) else {
            self.discarded += 1;
            return HecOutcome::Discard;
        };
        let syndrome = crc::hec_syndrome([h[0], h[1], h[2], h[3], h[4]]);
        let outcome = match (self.mode, syndrome) {
            (_, 0) => {
                self.mode = HecMode::Correction;
                HecOutcome::Valid
            }
            (HecMode::Correction, s) => {
                self.mode = HecMode::Detection;
                match single_bit_error(s) {
                    Some(bit) => {
                        h[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
                        HecOutcome::Corrected(bit)
                    }
                    None => HecOutcome::Discard,
                }
            }
            (HecMode::Detection, _) => HecOutcome::Discard,
        };
        match outcome {
            HecOutcome::Valid => self.valid += 1,
            HecOutcome::Corrected(_) => self.corrected += 1,
            HecOutcome::Discard => self.discarded += 1,
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirty() -> [u8; CELL_LEN] {
        [0xa5; CELL_LEN]
    }

    #[test]
    fn uni_accessors_round_trip_in_dirty_buffer() {
        let mut c = Cell::new_checked(dirty()).unwrap();
        c.set_gfc(0x3);
        c.set_vpi(HeaderFormat::Uni, 0xab);
        c.set_vci(0x1234);
        c.set_pti(Pti::UserData {
            congestion: true,
            sdu_type: false,
        });
        c.set_clp(true);
        c.fill_hec();
        assert_eq!(c.gfc(), 0x3);
        assert_eq!(c.vpi(HeaderFormat::Uni), 0xab);
        assert_eq!(c.vci(), 0x1234);
        assert_eq!(
            c.pti(),
            Pti::UserData {
                congestion: true,
                sdu_type: false
            }
        );
        assert!(c.clp());
        assert!(c.verify_hec());
        assert_eq!(c.payload(), &[0xa5; 48][..]);
        // Exact bytes: GFC 3, VPI ab, VCI 1234, PT 010, CLP 1.
        assert_eq!(&c.into_inner()[..4], &[0x3a, 0xb1, 0x23, 0x45]);
    }

    #[test]
    fn nni_accessors_round_trip_in_dirty_buffer() {
        let mut c = Cell::new_checked(dirty()).unwrap();
        c.set_vpi(HeaderFormat::Nni, 0xfed);
        c.set_vci(0xbeef);
        c.set_pti(Pti::OamF5EndToEnd);
        c.set_clp(false);
        c.fill_hec();
        assert_eq!(c.vpi(HeaderFormat::Nni), 0xfed);
        assert_eq!(c.vci(), 0xbeef);
        assert_eq!(c.pti(), Pti::OamF5EndToEnd);
        assert!(!c.clp());
        assert_eq!(&c.into_inner()[..4], &[0xfe, 0xdb, 0xee, 0xfa]);
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut c = Cell::new_unchecked([0u8; CELL_LEN]);
        c.set_clp(true);
        assert_eq!(&c.into_inner()[..4], &[0, 0, 0, 1]);
        let mut c = Cell::new_unchecked([0xffu8; CELL_LEN]);
        c.set_vci(0);
        assert_eq!(&c.into_inner()[..4], &[0xff, 0xf0, 0x00, 0x0f]);
        let mut c = Cell::new_unchecked([0xffu8; CELL_LEN]);
        c.set_gfc(0);
        assert_eq!(c.into_inner()[0], 0x0f);
    }

    #[test]
    fn pti_code_points() {
        for b in 0..8u8 {
            assert_eq!(Pti::from_bits(b).to_bits(), b);
        }
        assert!(Pti::from_bits(0b001).is_end_of_frame());
        assert!(Pti::from_bits(0b011).is_end_of_frame());
        assert!(!Pti::from_bits(0b101).is_end_of_frame());
        assert_eq!(Pti::from_bits(0b110), Pti::ResourceManagement);
        assert_eq!(Pti::from_bits(0b111), Pti::Reserved);
        assert_eq!(Pti::from_bits(0b100), Pti::OamF5Segment);
    }

    #[test]
    fn reserved_vcis() {
        assert_eq!(vci::name(5), Some("signalling"));
        assert_eq!(vci::name(16), Some("ILMI"));
        assert_eq!(vci::name(3), Some("F4 OAM segment"));
        assert_eq!(vci::name(20), Some("reserved"));
        assert_eq!(vci::name(32), None);
        assert!(vci::is_reserved(31) && !vci::is_reserved(32));
    }

    #[test]
    fn header_repr_parse_emit() {
        let h = CellHeader {
            format: HeaderFormat::Uni,
            gfc: 0,
            vpi: 0,
            vci: 1,
            pti: Pti::user(false),
            clp: false,
        };
        // The idle/unassigned-style header 00 00 00 10 .. and the HEC of 00 00 00 01.
        let mut c = Cell::new_unchecked(dirty());
        h.emit(&mut c).unwrap();
        assert_eq!(
            &c.into_inner()[..5],
            &[0x00, 0x00, 0x00, 0x10, crc::hec([0, 0, 0, 0x10])]
        );
        assert_eq!(CellHeader::parse(&c, HeaderFormat::Uni).unwrap(), h);
        let mut raw = c.into_inner();
        raw[4] ^= 1;
        assert!(matches!(
            CellHeader::parse(&Cell::new_unchecked(raw), HeaderFormat::Uni),
            Err(WireError::Hec { .. })
        ));
        let bad = CellHeader { vpi: 256, ..h };
        assert!(matches!(
            bad.check(),
            Err(WireError::FieldRange { max: 255, .. })
        ));
        let nni = CellHeader {
            format: HeaderFormat::Nni,
            vpi: 4095,
            ..h
        };
        assert!(nni.check().is_ok());
        assert!(CellHeader { gfc: 1, ..nni }.check().is_err());
    }

    #[test]
    fn short_buffer_rejected() {
        assert_eq!(
            Cell::new_checked(&[0u8; 52][..]),
            Err(WireError::Truncated {
                what: "ATM cell",
                need: 53,
                got: 52
            })
        );
    }

    #[test]
    fn hec_receiver_state_machine() {
        let good = CellHeader::uni(1, 100, Pti::user(false)).to_bytes();
        let mut rx = HecReceiver::new();
        let mut c = good;
        assert_eq!(rx.check(&mut c), HecOutcome::Valid);
        // Single-bit error in correction mode: corrected, then detection mode.
        c[2] ^= 0x04;
        assert_eq!(rx.check(&mut c), HecOutcome::Corrected(21));
        assert_eq!(c, good);
        assert_eq!(rx.mode(), HecMode::Detection);
        // A single-bit error in detection mode is discarded, not corrected.
        let mut c = good;
        c[0] ^= 0x80;
        assert_eq!(rx.check(&mut c), HecOutcome::Discard);
        assert_eq!(rx.mode(), HecMode::Detection);
        // A good header returns to correction mode.
        let mut c = good;
        assert_eq!(rx.check(&mut c), HecOutcome::Valid);
        assert_eq!(rx.mode(), HecMode::Correction);
        // A double-bit error in correction mode: discarded, detection mode.
        let mut c = good;
        c[0] ^= 0x81;
        assert_eq!(rx.check(&mut c), HecOutcome::Discard);
        assert_eq!(rx.mode(), HecMode::Detection);
        assert_eq!((rx.valid, rx.corrected, rx.discarded), (2, 1, 2));
        assert_eq!(rx.check(&mut [0u8; 3]), HecOutcome::Discard);
    }
}
