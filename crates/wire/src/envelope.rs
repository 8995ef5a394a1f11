//! The envelope that the AAL3/4 CPCS-PDU (ITU-T I.363.3) and the SMDS L3_PDU (Bellcore
//! TR-TSV-000772) share. Both descend from the IEEE 802.6 initial MAC PDU and put a
//! four-octet header and a four-octet trailer of the same shape around their body:
//!
//! ```text
//!  header:  CPI (AAL3/4) or Reserved (SMDS) (1) | Btag / BEtag (1) | BASize (2)
//!  trailer: AL (AAL3/4) or Reserved (SMDS) (1)  | Etag / BEtag (1) | Length (2)
//! ```
//!
//! What the two formats share is written here once: where the tag, BASize and Length sit,
//! how a header or trailer word is built, and the rule that the two tags agree (it catches
//! the loss of the end of one PDU together with the start of the next). What differs stays
//! with each format: the meaning of the first octets, and what BASize and Length count
//! (CPCS payload octets; SMDS the octets from the Destination Address through the CRC32).
//!
//! Every function takes the whole PDU, in a slice that ends where the PDU ends, and
//! indexes it directly: the views call them only after `new_checked` has made sure that
//! the slice holds a header and a trailer (twice [`WORD_LEN`] octets).

use crate::WireError;

/// Octets in the header, and in the trailer.
pub(crate) const WORD_LEN: usize = 4;

/// The header's tag (Btag, BEtag).
const TAG: usize = 1;
/// BASize, two octets, big-endian.
const BASIZE: usize = 2;
/// The trailer's tag (Etag, BEtag), counted back from the end.
const END_TAG_FROM_END: usize = 3;
/// Length, two octets, counted back from the end.
const LENGTH_FROM_END: usize = 2;

/// The index of the octet `from_end` octets before the end of `pdu`.
pub(crate) fn at_end(pdu: &[u8], from_end: usize) -> usize {
    pdu.len() - from_end
}

/// The header's tag.
pub(crate) fn tag(pdu: &[u8]) -> u8 {
    pdu[TAG]
}

/// BASize.
pub(crate) fn basize(pdu: &[u8]) -> u16 {
    u16::from_be_bytes([pdu[BASIZE], pdu[BASIZE + 1]])
}

/// The trailer's tag.
pub(crate) fn end_tag(pdu: &[u8]) -> u8 {
    pdu[at_end(pdu, END_TAG_FROM_END)]
}

/// The Length field.
pub(crate) fn length(pdu: &[u8]) -> u16 {
    let i = at_end(pdu, LENGTH_FROM_END);
    u16::from_be_bytes([pdu[i], pdu[i + 1]])
}

/// Sets the header's tag.
pub(crate) fn set_tag(pdu: &mut [u8], tag: u8) {
    pdu[TAG] = tag;
}

/// Sets BASize.
pub(crate) fn set_basize(pdu: &mut [u8], basize: u16) {
    pdu[BASIZE..BASIZE + 2].copy_from_slice(&basize.to_be_bytes());
}

/// Sets the trailer's tag.
pub(crate) fn set_end_tag(pdu: &mut [u8], tag: u8) {
    let i = at_end(pdu, END_TAG_FROM_END);
    pdu[i] = tag;
}

/// Sets the Length field.
pub(crate) fn set_length(pdu: &mut [u8], length: u16) {
    let i = at_end(pdu, LENGTH_FROM_END);
    pdu[i..i + 2].copy_from_slice(&length.to_be_bytes());
}

/// A header (tag, BASize) or trailer (tag, Length) as sent: the first octet zero (CPI 0,
/// AL 0, or Reserved), then the tag and the 16-bit count.
pub(crate) const fn word(tag: u8, count: u16) -> [u8; WORD_LEN] {
    let [h, l] = count.to_be_bytes();
    [0, tag, h, l]
}

/// Checks that the header's tag equals the trailer's.
pub(crate) fn check_tags(what: &'static str, pdu: &[u8]) -> Result<(), WireError> {
    let (btag, etag) = (tag(pdu), end_tag(pdu));
    if btag != etag {
        return Err(WireError::TagMismatch { what, btag, etag });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_at_both_ends() {
        let mut pdu = [0u8; 12];
        set_tag(&mut pdu, 7);
        set_basize(&mut pdu, 0x0102);
        set_end_tag(&mut pdu, 8);
        set_length(&mut pdu, 0x0304);
        assert_eq!(pdu, [0, 7, 1, 2, 0, 0, 0, 0, 0, 8, 3, 4]);
        assert_eq!((tag(&pdu), basize(&pdu)), (7, 0x0102));
        assert_eq!((end_tag(&pdu), length(&pdu)), (8, 0x0304));
        assert_eq!(
            check_tags("x", &pdu),
            Err(WireError::TagMismatch {
                what: "x",
                btag: 7,
                etag: 8
            })
        );
        set_end_tag(&mut pdu, 7);
        assert_eq!(check_tags("x", &pdu), Ok(()));
        assert_eq!(word(9, 0xabcd), [0, 9, 0xab, 0xcd]);
    }

    /// The public field offsets of both formats name the octets this module reads.
    #[test]
    fn formats_agree_on_the_layout() {
        use crate::{aal34, smds};
        assert_eq!((aal34::field::BTAG, smds::field::BETAG), (TAG, TAG));
        assert_eq!(aal34::field::BASIZE, BASIZE..BASIZE + 2);
        assert_eq!(smds::field::BASIZE, BASIZE..BASIZE + 2);
        assert_eq!(aal34::field::ETAG_FROM_END, END_TAG_FROM_END);
        assert_eq!(smds::field::TRAILER_BETAG_FROM_END, END_TAG_FROM_END);
        assert_eq!(aal34::field::LENGTH_FROM_END, LENGTH_FROM_END);
        assert_eq!(smds::field::LENGTH_FROM_END, LENGTH_FROM_END);
        assert_eq!(aal34::CPCS_HEADER_LEN, WORD_LEN);
        assert_eq!(aal34::CPCS_TRAILER_LEN, WORD_LEN);
        assert_eq!(smds::TRAILER_LEN, WORD_LEN);
    }
}
