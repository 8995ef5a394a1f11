//! The validated SMDS L3_PDU (TR-TSV-000772): [`L3PduRepr`] with `parse`, `check`,
//! `buffer_len` and `emit`. The rules it enforces are the readings listed in the
//! documentation of [`crate::smds`].

use super::{
    CRC32_LEN, HE_LEN, HeElements, L3Pdu, MAX_INFO, MIN_LEN, SMDS_HEL, UNCOUNTED_LEN, WHAT, field,
    he_version, malformed, pad_len,
};
use crate::WireError;
use crate::e164::{AddressType, E164Address};
use crate::envelope;

/// A validated L3_PDU. BAsize, Length, PAD length and HEL are derived, not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L3PduRepr<'a> {
    /// The BEtag of header and trailer.
    pub betag: u8,
    /// Destination: individual or group.
    pub destination: E164Address,
    /// Source: individual.
    pub source: E164Address,
    /// Higher layer protocol identifier (0-63; [`HLPI_LLC`](super::HLPI_LLC) for LLC).
    pub hlpi: u8,
    /// QoS (0-15), carried unchanged.
    pub qos: u8,
    /// Whether a CRC32 is carried (the CIB bit).
    pub crc32: bool,
    /// Bridging, carried unchanged.
    pub bridging: u16,
    /// The 12 header extension octets, raw (see [`HeElements`]).
    pub header_extension: [u8; HE_LEN],
    /// The Info field (at most [`MAX_INFO`] octets).
    pub info: &'a [u8],
}

impl<'a> L3PduRepr<'a> {
    /// Parses a whole L3_PDU. The checks, in order: the length covers header and trailer;
    /// HEL is 3; the two BEtags agree; Length and BAsize both equal the octets present
    /// from the Destination Address on; Info + PAD is a multiple of 4 and holds the PAD;
    /// Info is at most 9188 octets; the CRC32 matches when CIB is set; the addresses are
    /// valid, the destination individual or group and the source individual.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(pdu: &L3Pdu<&'a T>) -> Result<L3PduRepr<'a>, WireError> {
        let bytes = pdu.data_a();
        let v = L3Pdu::new_checked(bytes)?;
        if v.hel() != SMDS_HEL {
            return Err(malformed(
                "HEL is not 3 (SMDS carries a 12-octet header extension)",
            ));
        }
        envelope::check_tags(WHAT, bytes)?;
        let actual = bytes.len() - UNCOUNTED_LEN;
        if usize::from(v.length()) != actual {
            return Err(WireError::Length {
                what: WHAT,
                field: v.length().into(),
                actual,
            });
        }
        if usize::from(v.basize()) != actual {
            return Err(WireError::Length {
                what: "SMDS L3_PDU BAsize",
                field: v.basize().into(),
                actual,
            });
        }
        // Info + PAD + CRC32: what follows the 36-octet header.
        let body = bytes.len() - MIN_LEN;
        let crc_len = if v.cib() { CRC32_LEN } else { 0 };
        let Some(info_pad) = body.checked_sub(crc_len) else {
            return Err(malformed("CIB set but no room for the CRC32"));
        };
        if info_pad % 4 != 0 {
            return Err(malformed("Info + PAD is not a multiple of 4 octets"));
        }
        let Some(info_len) = info_pad.checked_sub(usize::from(v.pad_len())) else {
            return Err(malformed("PAD length exceeds Info + PAD"));
        };
        if info_len > MAX_INFO {
            return Err(WireError::FieldRange {
                field: "SMDS Info length",
                value: info_len as u64,
                max: MAX_INFO as u64,
            });
        }
        if let Some(received) = v.crc32() {
            let computed = v.computed_crc32();
            if received != computed {
                return Err(WireError::Crc {
                    what: WHAT,
                    received,
                    computed,
                });
            }
        }
        let destination = E164Address::from_bytes(v.destination())?;
        if let AddressType::Unknown(_) = destination.address_type() {
            return Err(malformed(
                "destination address type is neither individual nor group",
            ));
        }
        let source = E164Address::from_bytes(v.source())?;
        if !source.is_individual() {
            return Err(malformed("source address is not an individual address"));
        }
        let mut header_extension = [0u8; HE_LEN];
        header_extension.copy_from_slice(v.header_extension());
        Ok(L3PduRepr {
            betag: v.betag(),
            destination,
            source,
            hlpi: v.hlpi(),
            qos: v.qos(),
            crc32: v.cib(),
            bridging: v.bridging(),
            header_extension,
            info: &bytes[field::INFO..field::INFO + info_len],
        })
    }

    /// The header extension elements.
    pub fn he_elements(&self) -> HeElements<'_> {
        HeElements::new(&self.header_extension)
    }

    /// The SMDS version the header extension announces (see [`he_version`]).
    pub fn version(&self) -> Option<u8> {
        he_version(&self.header_extension)
    }

    /// Checks every field fits its bits and the address and size rules hold.
    pub fn check(&self) -> Result<(), WireError> {
        if self.info.len() > MAX_INFO {
            return Err(WireError::FieldRange {
                field: "SMDS Info length",
                value: self.info.len() as u64,
                max: MAX_INFO as u64,
            });
        }
        if self.hlpi > 0x3f {
            return Err(WireError::FieldRange {
                field: "SMDS HLPI",
                value: self.hlpi.into(),
                max: 0x3f,
            });
        }
        if self.qos > 0x0f {
            return Err(WireError::FieldRange {
                field: "SMDS QoS",
                value: self.qos.into(),
                max: 0x0f,
            });
        }
        if let AddressType::Unknown(_) = self.destination.address_type() {
            return Err(malformed(
                "destination address type is neither individual nor group",
            ));
        }
        if !self.source.is_individual() {
            return Err(malformed("source address is not an individual address"));
        }
        Ok(())
    }

    /// The value of BAsize and Length: octets from the Destination Address through the
    /// CRC32.
    pub const fn basize(&self) -> usize {
        self.buffer_len() - UNCOUNTED_LEN
    }

    /// Octets [`L3PduRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        let crc_len = if self.crc32 { CRC32_LEN } else { 0 };
        MIN_LEN + self.info.len() + pad_len(self.info.len()) + crc_len
    }

    /// Writes the PDU into the first [`L3PduRepr::buffer_len`] octets of `buf`, after
    /// checking the fields: reserved octets and PAD zero, PAD length, HEL 3, BAsize,
    /// Length and (with `crc32`) the CRC32 computed. Returns the octets written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let need = self.buffer_len();
        let out = WireError::room(WHAT, need, buf)?;
        let n = self.info.len();
        let pad = pad_len(n);
        // Checked above: Info is at most 9188 octets, so BAsize fits 16 bits.
        let basize = self.basize() as u16;
        // Header and trailer carry the same word: SMDS sets Length equal to BAsize.
        let word = envelope::word(self.betag, basize);
        out[..envelope::WORD_LEN].copy_from_slice(&word);
        out[need - envelope::WORD_LEN..].copy_from_slice(&word);
        let mut v = L3Pdu::new_unchecked(out);
        v.set_destination(self.destination.to_bytes());
        v.set_source(self.source.to_bytes());
        v.bm()[field::HLPI_PL] = (self.hlpi << 2) | pad as u8;
        v.bm()[field::QOS_CIB_HEL] = (self.qos << 4) | (u8::from(self.crc32) << 3) | SMDS_HEL;
        v.set_bridging(self.bridging);
        v.header_extension_mut()
            .copy_from_slice(&self.header_extension);
        v.info_mut().copy_from_slice(self.info);
        v.pad_mut().fill(0);
        if self.crc32 {
            v.fill_crc32();
        }
        Ok(need)
    }
}
