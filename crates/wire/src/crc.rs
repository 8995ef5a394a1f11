//! The check sequences of the ATM layer and its adaptation layers.
//!
//! - HEC: ITU-T I.432.1 §4.3.2: CRC-8, generator x^8 + x^2 + x + 1, initial value 0, the
//!   remainder XORed with the coset 0x55 (01010101). Header `00 00 00 00` gives `0x55`.
//! - AAL5 CRC-32: ITU-T I.363.5 §10.1 (the IEEE 802.3 generator 0x04C11DB7, initial value
//!   all ones, bits taken MSB first, result complemented). `"123456789"` gives `0xFC891918`.
//!   This is the catalogue's CRC-32/BZIP2; the SMDS L3_PDU CRC32 (TR-TSV-000772) is the same.
//! - AAL3/4 CRC-10: ITU-T I.363.3 §2.4.2.2, generator x^10 + x^9 + x^5 + x^4 + x + 1
//!   (0x233), initial value 0 (CRC-10/ATM).
//!
//! The CRC-32 and CRC-10 use the `crc` crate (slice-by-16 tables for the CRC-32, the hot
//! path of AAL5 reassembly). The HEC is written out here because the receiver also needs
//! the syndrome-to-bit table for single-bit correction; it runs on every cell, so it
//! slices by four: four table look-ups that do not depend on one another, rather than a
//! chain of four where each waits for the last.

use crc::{Crc, Table};

/// The AAL5 / SMDS CRC-32 engine (CRC-32/BZIP2), slice-by-16.
pub static CRC32_AAL5: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&crc::CRC_32_BZIP2);

/// The AAL3/4 SAR CRC-10 engine (CRC-10/ATM), slice-by-16: it runs twice per SAR-PDU.
pub static CRC10_AAL34: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&crc::CRC_10_ATM);

/// The coset added to the HEC remainder (I.432.1: "01010101").
pub const HEC_COSET: u8 = 0x55;

const fn crc8_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u8;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x80 != 0 {
                (c << 1) ^ 0x07
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// `SLICE[k][b]` is the CRC-8 of byte `b` followed by `k` zero octets. The CRC of a 4-octet
/// header is then `SLICE[3][h0] ^ SLICE[2][h1] ^ SLICE[1][h2] ^ SLICE[0][h3]`: four
/// independent look-ups rather than a chain of four dependent ones.
const SLICE: [[u8; 256]; 4] = {
    let t0 = crc8_table();
    let mut s = [[0u8; 256]; 4];
    s[0] = t0;
    let mut k = 1;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            // Appending one zero octet to a message with remainder r gives T[r].
            s[k][b] = t0[s[k - 1][b] as usize];
            b += 1;
        }
        k += 1;
    }
    s
};

/// The plain CRC-8 (no coset) of the four header octets.
#[inline]
pub const fn crc8_header(h: [u8; 4]) -> u8 {
    SLICE[3][h[0] as usize]
        ^ SLICE[2][h[1] as usize]
        ^ SLICE[1][h[2] as usize]
        ^ SLICE[0][h[3] as usize]
}

/// The HEC octet for a 4-octet cell header (CRC-8 remainder XOR 0x55).
#[inline]
pub const fn hec(h: [u8; 4]) -> u8 {
    crc8_header(h) ^ HEC_COSET
}

/// The syndrome of a received 5-octet header: zero when the HEC matches. The syndrome is
/// linear in the error pattern, so each single-bit error has its own non-zero syndrome.
#[inline]
pub const fn hec_syndrome(h: [u8; 5]) -> u8 {
    hec([h[0], h[1], h[2], h[3]]) ^ h[4]
}

/// For each syndrome, the header bit (0 = MSB of octet 0, 39 = LSB of the HEC octet) whose
/// flip produces it, or `NO_BIT` if no single-bit error does.
const SYNDROME_BIT: [u8; 256] = {
    let mut t = [NO_BIT; 256];
    let mut bit = 0;
    while bit < 40 {
        let mut e = [0u8; 5];
        e[bit / 8] = 0x80 >> (bit % 8);
        // Linear part only: the coset cancels between sent and received.
        let s = crc8_header([e[0], e[1], e[2], e[3]]) ^ e[4];
        t[s as usize] = bit as u8;
        bit += 1;
    }
    t
};
const NO_BIT: u8 = 0xff;

/// The header bit position (0..40, MSB of octet 0 first) of the single-bit error that
/// explains `syndrome`, if one does.
#[inline]
pub const fn single_bit_error(syndrome: u8) -> Option<u8> {
    match SYNDROME_BIT[syndrome as usize] {
        NO_BIT => None,
        b => Some(b),
    }
}

/// CRC-32 of `data` as AAL5 computes it.
pub fn crc32(data: &[u8]) -> u32 {
    CRC32_AAL5.checksum(data)
}

/// CRC-10 of `data` as the AAL3/4 SAR computes it (the CRC field itself zeroed).
pub fn crc10(data: &[u8]) -> u16 {
    CRC10_AAL34.checksum(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hec_known_answers() {
        // I.432.1 examples quoted by the issue, and idle/unassigned cell headers.
        assert_eq!(hec([0, 0, 0, 0]), 0x55);
        assert_eq!(hec([0, 0, 0, 1]), 0x52);
        // The idle cell header 00 00 00 01 with HEC 0x52 (I.432.1 Table 4).
        assert_eq!(hec_syndrome([0, 0, 0, 1, 0x52]), 0);
        // Cross-check the sliced tables against a bitwise reference.
        fn reference(h: [u8; 4]) -> u8 {
            let mut c = 0u8;
            for b in h {
                c ^= b;
                for _ in 0..8 {
                    c = if c & 0x80 != 0 {
                        (c << 1) ^ 0x07
                    } else {
                        c << 1
                    };
                }
            }
            c ^ 0x55
        }
        for h in [
            [1, 2, 3, 4],
            [0xff; 4],
            [0x12, 0x34, 0x56, 0x78],
            [0, 0x10, 0x0a, 0x40],
        ] {
            assert_eq!(hec(h), reference(h), "{h:02x?}");
        }
    }

    #[test]
    fn every_single_bit_error_has_a_distinct_syndrome() {
        let mut seen = std::collections::HashSet::new();
        for bit in 0..40u8 {
            let mut h = [0x0a, 0x1b, 0x2c, 0x3d, 0];
            h[4] = hec([h[0], h[1], h[2], h[3]]);
            h[(bit / 8) as usize] ^= 0x80 >> (bit % 8);
            let s = hec_syndrome(h);
            assert_ne!(s, 0);
            assert_eq!(single_bit_error(s), Some(bit));
            assert!(seen.insert(s));
        }
    }

    #[test]
    fn crc32_known_answers() {
        assert_eq!(crc32(b"123456789"), 0xFC89_1918);
        // Incremental use, as the reassembler does it, agrees with one-shot.
        let mut d = CRC32_AAL5.digest();
        d.update(b"1234");
        d.update(b"56789");
        assert_eq!(d.finalize(), 0xFC89_1918);
    }

    #[test]
    fn crc10_known_answer() {
        // CRC-10/ATM check value from the CRC catalogue.
        assert_eq!(crc10(b"123456789"), 0x199);
    }
}
