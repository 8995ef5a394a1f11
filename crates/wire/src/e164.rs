//! SMDS addresses: E.164 numbers in the 8-octet address fields of the SMDS Level 3 PDU
//! (Bellcore TR-TSV-000772 §2; the same layout as the IEEE 802.6 60-bit publicly
//! administered address).
//!
//! ```text
//!  octet 0: address type (4) | digit 1 (4)
//!  octet 1: digit 2 (4)      | digit 3 (4)
//!  ...
//!  octet 7: digit 14 (4)     | digit 15 (4)
//! ```
//!
//! The address type is `1100` (0xC) for an individual address and `1110` (0xE) for a
//! group address. The number follows as up to 15 BCD digits, most significant first;
//! digit positions after the last digit hold the fill `1111` (0xF). A North American
//! number is 11 digits (`1` + area code + number), so an individual address looks like
//! `C1 55 51 23 45 67 FF FF`.
//!
//! Text form (this crate's choice, not the standard's): `I:15551234567` for an individual
//! address, `G:15551234567` for a group address, and `X:…` (X the type as one hex digit)
//! for any other type. [`FromStr`] reads that form back, a bare digit
//! string as an individual address, and Cisco's dotted hex form `C155.5123.4567.FFFF`.
//! The alternate form `{:#}` prints the dotted hex form.
//!
//! Panic contract: nothing here panics or allocates; bad input is a [`WireError`].

use core::fmt;
use core::str::FromStr;

use crate::WireError;

/// Octets in an SMDS address field.
pub const ADDRESS_LEN: usize = 8;
/// The most digits an address holds (60 bits of BCD).
pub const MAX_DIGITS: usize = 15;

/// The BCD nibble that fills unused digit positions.
const FILL: u8 = 0xf;
const WHAT: &str = "E.164 address";

const fn malformed(reason: &'static str) -> WireError {
    WireError::Malformed { what: WHAT, reason }
}

/// The 4-bit address type code points (TR-TSV-000772).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressType {
    /// `1100`: the address of one subscriber network interface.
    Individual,
    /// `1110`: a group address, which the network expands to its member addresses.
    Group,
    /// Any other value (carried so that a decoder can report it, never valid in SMDS).
    Unknown(u8),
}

impl AddressType {
    /// Decodes the 4-bit field (higher bits ignored).
    pub const fn from_bits(b: u8) -> AddressType {
        match b & 0xf {
            0xc => AddressType::Individual,
            0xe => AddressType::Group,
            u => AddressType::Unknown(u),
        }
    }

    /// The 4-bit field (an `Unknown` value is masked to 4 bits).
    pub const fn to_bits(self) -> u8 {
        match self {
            AddressType::Individual => 0xc,
            AddressType::Group => 0xe,
            AddressType::Unknown(u) => u & 0xf,
        }
    }
}

/// A validated SMDS address: a known-length BCD number plus its address type.
///
/// It keeps the 8 octets as they go on the wire, so emitting one is a copy; every
/// constructor checks the digits, so a value of this type always re-parses to itself.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct E164Address {
    bytes: [u8; ADDRESS_LEN],
}

impl E164Address {
    /// Parses the first 8 octets of `bytes` (more are ignored, as the views here do).
    ///
    /// The digits must be BCD `0`-`9` and there must be at least one; after the first
    /// fill nibble (0xF) only fill may follow. Any address type is accepted here (an
    /// unknown one as [`AddressType::Unknown`]); the SMDS PDU decoder decides which types
    /// it allows where.
    pub fn parse(bytes: &[u8]) -> Result<E164Address, WireError> {
        let Some(b) = bytes.first_chunk::<ADDRESS_LEN>() else {
            return Err(WireError::Truncated {
                what: WHAT,
                need: ADDRESS_LEN,
                got: bytes.len(),
            });
        };
        Self::from_bytes(*b)
    }

    /// Validates 8 octets as [`E164Address::parse`] does.
    pub fn from_bytes(bytes: [u8; ADDRESS_LEN]) -> Result<E164Address, WireError> {
        let a = E164Address { bytes };
        let mut filled = false;
        for i in 0..MAX_DIGITS {
            match a.nibble(i) {
                FILL => filled = true,
                d if d > 9 => return Err(malformed("digit nibble is not BCD 0-9 or fill 0xF")),
                _ if filled => return Err(malformed("digit after the fill nibbles")),
                _ => {}
            }
        }
        if a.nibble(0) == FILL {
            return Err(malformed("no digits"));
        }
        Ok(a)
    }

    /// Builds an address from a type and decimal digits (ASCII `'0'..='9'`, 1 to 15).
    pub fn new(address_type: AddressType, digits: &str) -> Result<E164Address, WireError> {
        Self::from_digits(address_type, digits.as_bytes())
    }

    /// Builds an address from a type and ASCII decimal digits (1 to 15 of them).
    pub fn from_digits(address_type: AddressType, digits: &[u8]) -> Result<E164Address, WireError> {
        if digits.is_empty() {
            return Err(malformed("no digits"));
        }
        if digits.len() > MAX_DIGITS {
            return Err(malformed("more than 15 digits"));
        }
        // Start with every digit position filled, then write the digits over the fill.
        let mut bytes = [0xff; ADDRESS_LEN];
        bytes[0] = (address_type.to_bits() << 4) | FILL;
        for (i, &c) in digits.iter().enumerate() {
            if !c.is_ascii_digit() {
                return Err(malformed("not a decimal digit"));
            }
            set_nibble(&mut bytes, i, c - b'0');
        }
        Ok(E164Address { bytes })
    }

    /// An individual address with the given digits.
    pub fn individual(digits: &str) -> Result<E164Address, WireError> {
        Self::new(AddressType::Individual, digits)
    }

    /// A group address with the given digits.
    pub fn group(digits: &str) -> Result<E164Address, WireError> {
        Self::new(AddressType::Group, digits)
    }

    /// Digit position `i` (0 = first digit) as a raw nibble.
    const fn nibble(&self, i: usize) -> u8 {
        // Digit i sits in nibble i + 1 of the field, the type being nibble 0.
        let n = i + 1;
        let b = self.bytes[n / 2];
        if n.is_multiple_of(2) { b >> 4 } else { b & 0xf }
    }

    /// The address type.
    pub const fn address_type(&self) -> AddressType {
        AddressType::from_bits(self.bytes[0] >> 4)
    }

    /// True for an individual address.
    pub const fn is_individual(&self) -> bool {
        matches!(self.address_type(), AddressType::Individual)
    }

    /// True for a group address.
    pub const fn is_group(&self) -> bool {
        matches!(self.address_type(), AddressType::Group)
    }

    /// How many digits the number has (1 to 15).
    pub fn digit_count(&self) -> usize {
        (0..MAX_DIGITS)
            .take_while(|&i| self.nibble(i) != FILL)
            .count()
    }

    /// The digits as values 0-9, most significant first.
    pub fn digits(&self) -> impl Iterator<Item = u8> + '_ {
        (0..MAX_DIGITS)
            .map(|i| self.nibble(i))
            .take_while(|&d| d != FILL)
    }

    /// The 8 octets as they go on the wire.
    pub const fn to_bytes(&self) -> [u8; ADDRESS_LEN] {
        self.bytes
    }

    /// Writes the 8 octets into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let got = buf.len();
        match buf.first_chunk_mut::<ADDRESS_LEN>() {
            Some(out) => {
                *out = self.bytes;
                Ok(())
            }
            None => Err(WireError::BufferTooSmall {
                what: WHAT,
                need: ADDRESS_LEN,
                got,
            }),
        }
    }
}

fn set_nibble(bytes: &mut [u8; ADDRESS_LEN], i: usize, v: u8) {
    let n = i + 1;
    let b = &mut bytes[n / 2];
    *b = if n.is_multiple_of(2) {
        (*b & 0x0f) | (v << 4)
    } else {
        (*b & 0xf0) | (v & 0xf)
    };
}

impl fmt::Display for E164Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            // Cisco's notation: the 16 nibbles in hex, grouped by four.
            let b = self.bytes;
            return write!(
                f,
                "{:02X}{:02X}.{:02X}{:02X}.{:02X}{:02X}.{:02X}{:02X}",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
            );
        }
        match self.address_type() {
            AddressType::Individual => f.write_str("I:")?,
            AddressType::Group => f.write_str("G:")?,
            AddressType::Unknown(t) => write!(f, "{t:X}:")?,
        }
        for d in self.digits() {
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for E164Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The readable form is more useful in test failures than the raw octets.
        write!(f, "E164Address({self})")
    }
}

impl FromStr for E164Address {
    type Err = WireError;

    /// Reads `I:digits`, `G:digits`, `X:digits` (X one hex digit: the raw type, so `C:`
    /// and `E:` also work), a bare digit string (individual), or the dotted hex form
    /// `C155.5123.4567.FFFF`.
    fn from_str(s: &str) -> Result<E164Address, WireError> {
        if let Some((prefix, digits)) = s.split_once(':') {
            let address_type = match prefix.as_bytes() {
                [b'I' | b'i'] => AddressType::Individual,
                [b'G' | b'g'] => AddressType::Group,
                [h] => match (*h as char).to_digit(16) {
                    Some(t) => AddressType::from_bits(t as u8),
                    None => return Err(malformed("unknown address type prefix")),
                },
                _ => return Err(malformed("unknown address type prefix")),
            };
            return Self::new(address_type, digits);
        }
        if s.contains('.') {
            return parse_dotted(s);
        }
        Self::individual(s)
    }
}

/// The dotted hex form: 16 hex nibbles, dots anywhere between them (Cisco groups by 4).
fn parse_dotted(s: &str) -> Result<E164Address, WireError> {
    let mut bytes = [0u8; ADDRESS_LEN];
    let mut n = 0usize;
    for c in s.chars().filter(|&c| c != '.') {
        let Some(v) = c.to_digit(16) else {
            return Err(malformed("not a hex digit in the dotted form"));
        };
        if n >= 2 * ADDRESS_LEN {
            return Err(malformed("dotted form longer than 16 hex digits"));
        }
        bytes[n / 2] |= (v as u8) << if n.is_multiple_of(2) { 4 } else { 0 };
        n += 1;
    }
    if n != 2 * ADDRESS_LEN {
        return Err(malformed("dotted form shorter than 16 hex digits"));
    }
    E164Address::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn individual_layout() {
        let a = E164Address::individual("15551234567").unwrap();
        assert_eq!(
            a.to_bytes(),
            [0xc1, 0x55, 0x51, 0x23, 0x45, 0x67, 0xff, 0xff]
        );
        assert_eq!(a.address_type(), AddressType::Individual);
        assert!(a.is_individual() && !a.is_group());
        assert_eq!(a.digit_count(), 11);
        assert_eq!(
            a.digits().collect::<Vec<_>>(),
            [1, 5, 5, 5, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(a.to_string(), "I:15551234567");
        assert_eq!(format!("{a:#}"), "C155.5123.4567.FFFF");
        assert_eq!(format!("{a:?}"), "E164Address(I:15551234567)");
    }

    #[test]
    fn group_and_full_length() {
        let g = E164Address::group("123456789012345").unwrap();
        assert_eq!(
            g.to_bytes(),
            [0xe1, 0x23, 0x45, 0x67, 0x89, 0x01, 0x23, 0x45]
        );
        assert!(g.is_group());
        assert_eq!(g.digit_count(), 15);
        assert_eq!(g.to_string(), "G:123456789012345");
        let one = E164Address::individual("7").unwrap();
        assert_eq!(
            one.to_bytes(),
            [0xc7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        // An even digit count ends mid-octet.
        let even = E164Address::individual("12").unwrap();
        assert_eq!(even.to_bytes()[..2], [0xc1, 0x2f]);
    }

    #[test]
    fn parse_round_trips() {
        let raw = [0xc1, 0x55, 0x51, 0x23, 0x45, 0x67, 0xff, 0xff];
        let a = E164Address::parse(&raw).unwrap();
        assert_eq!(a.to_bytes(), raw);
        // Trailing octets are ignored.
        let mut longer = raw.to_vec();
        longer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(E164Address::parse(&longer).unwrap(), a);
        let mut buf = [0xa5u8; 10];
        a.emit(&mut buf).unwrap();
        assert_eq!(buf[..8], raw);
        assert_eq!(buf[8..], [0xa5, 0xa5]);
        assert_eq!(
            a.emit(&mut [0u8; 7]),
            Err(WireError::BufferTooSmall {
                what: WHAT,
                need: 8,
                got: 7
            })
        );
    }

    #[test]
    fn unknown_types_parse_and_print() {
        let raw = [0xa1, 0x2f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let a = E164Address::parse(&raw).unwrap();
        assert_eq!(a.address_type(), AddressType::Unknown(0xa));
        assert_eq!(a.to_string(), "A:12");
        assert_eq!("A:12".parse::<E164Address>().unwrap(), a);
        for t in 0..16u8 {
            assert_eq!(AddressType::from_bits(t).to_bits(), t);
        }
    }

    #[test]
    fn parse_errors() {
        let short = E164Address::parse(&[0xc1; 7]);
        assert_eq!(
            short,
            Err(WireError::Truncated {
                what: WHAT,
                need: 8,
                got: 7
            })
        );
        let cases: [([u8; 8], &str); 4] = [
            (
                [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                "no digits",
            ),
            (
                [0xc1, 0xf2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                "digit after the fill nibbles",
            ),
            (
                [0xc1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf1],
                "digit after the fill nibbles",
            ),
            (
                [0xc1, 0x2a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                "digit nibble is not BCD 0-9 or fill 0xF",
            ),
        ];
        for (raw, reason) in cases {
            assert_eq!(
                E164Address::parse(&raw),
                Err(malformed(reason)),
                "{raw:02x?}"
            );
        }
    }

    #[test]
    fn from_str_forms() {
        let a = E164Address::individual("15551234567").unwrap();
        for s in [
            "I:15551234567",
            "i:15551234567",
            "C:15551234567",
            "15551234567",
            "C155.5123.4567.FFFF",
            "c15551234567ffff.",
        ] {
            assert_eq!(s.parse::<E164Address>(), Ok(a), "{s}");
        }
        let g = E164Address::group("15551230000").unwrap();
        assert_eq!("G:15551230000".parse::<E164Address>(), Ok(g));
        assert_eq!("E:15551230000".parse::<E164Address>(), Ok(g));
        assert_eq!(g.to_string().parse::<E164Address>(), Ok(g));
        assert_eq!(format!("{g:#}").parse::<E164Address>(), Ok(g));
    }

    #[test]
    fn from_str_errors() {
        let cases = [
            ("", "no digits"),
            ("I:", "no digits"),
            ("I:1234567890123456", "more than 15 digits"),
            ("I:555-1234", "not a decimal digit"),
            ("Q:5551234", "unknown address type prefix"),
            ("IG:5551234", "unknown address type prefix"),
            (
                "C155.5123.4567.FFF",
                "dotted form shorter than 16 hex digits",
            ),
            (
                "C155.5123.4567.FFFFF",
                "dotted form longer than 16 hex digits",
            ),
            ("C155.5123.4567.FFFG", "not a hex digit in the dotted form"),
            ("C1F5.5123.4567.FFFF", "digit after the fill nibbles"),
        ];
        for (s, reason) in cases {
            assert_eq!(s.parse::<E164Address>(), Err(malformed(reason)), "{s:?}");
        }
    }

    #[test]
    fn every_valid_address_round_trips_through_text() {
        // Exhaustive over lengths and types, with a digit pattern exercising every digit.
        for len in 1..=MAX_DIGITS {
            let digits: String = (0..len)
                .map(|i| char::from(b'0' + ((i * 7 + len) % 10) as u8))
                .collect();
            for t in [
                AddressType::Individual,
                AddressType::Group,
                AddressType::Unknown(3),
            ] {
                let a = E164Address::new(t, &digits).unwrap();
                assert_eq!(a.digit_count(), len);
                assert_eq!(E164Address::from_bytes(a.to_bytes()), Ok(a));
                assert_eq!(a.to_string().parse::<E164Address>(), Ok(a));
                assert_eq!(format!("{a:#}").parse::<E164Address>(), Ok(a));
            }
        }
    }

    #[test]
    fn random_octets_never_panic() {
        // A cheap deterministic sweep; the smds proptests cover random addresses too.
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if let Ok(a) = E164Address::from_bytes(x.to_be_bytes()) {
                assert_eq!(a.to_bytes(), x.to_be_bytes());
                assert_eq!(a.to_string().parse::<E164Address>(), Ok(a));
            }
        }
    }
}
