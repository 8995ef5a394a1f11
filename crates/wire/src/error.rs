//! The one error type of atmlab-wire.
//!
//! It is `Copy` and carries no heap data: decoders sit on the per-cell hot path, and an
//! error must cost no more than the cell it describes. Every variant names the format
//! (`what`) so that a message read out of context still says where it came from.

/// What was wrong with some bytes, or with a value that was to become bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the format does.
    #[error("{what}: truncated: need {need} octets, got {got}")]
    Truncated {
        /// The format being decoded.
        what: &'static str,
        /// Octets needed.
        need: usize,
        /// Octets present.
        got: usize,
    },
    /// A buffer to emit into is too small.
    #[error("{what}: output buffer too small: need {need} octets, got {got}")]
    BufferTooSmall {
        /// The format being emitted.
        what: &'static str,
        /// Octets needed.
        need: usize,
        /// Octets available.
        got: usize,
    },
    /// A field value does not fit its field or its legal range.
    #[error("{field} = {value} is out of range (maximum {max})")]
    FieldRange {
        /// The field, e.g. "VPI (UNI)".
        field: &'static str,
        /// The value given.
        value: u64,
        /// Its largest legal value.
        max: u64,
    },
    /// The bytes break a rule of the format.
    #[error("{what}: {reason}")]
    Malformed {
        /// The format being decoded.
        what: &'static str,
        /// The rule broken.
        reason: &'static str,
    },
    /// A cell header's HEC does not match and could not (or may not) be corrected.
    #[error("cell header HEC mismatch: received {received:#04x}, computed {computed:#04x}")]
    Hec {
        /// The HEC octet in the cell.
        received: u8,
        /// The HEC of the other four octets.
        computed: u8,
    },
    /// A CRC (AAL5 CRC-32, AAL3/4 CRC-10, SMDS CRC-32) does not match.
    #[error("{what}: CRC mismatch: received {received:#x}, computed {computed:#x}")]
    Crc {
        /// The format whose CRC failed.
        what: &'static str,
        /// The CRC carried in the data.
        received: u32,
        /// The CRC computed over the data.
        computed: u32,
    },
    /// A length field disagrees with the data received.
    #[error("{what}: length field says {field} octets but the data hold {actual}")]
    Length {
        /// The format being checked.
        what: &'static str,
        /// The value of the length field.
        field: usize,
        /// What the data allow.
        actual: usize,
    },
    /// A frame grew past the configured maximum SDU size.
    #[error("{what}: {size} octets exceeds the maximum of {max}")]
    Oversize {
        /// The format being reassembled.
        what: &'static str,
        /// Octets received so far (at least).
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A partial frame waited longer than the reassembly timer allows.
    #[error("{what}: reassembly timed out with {octets} octets pending")]
    Timeout {
        /// The format being reassembled.
        what: &'static str,
        /// Octets discarded.
        octets: usize,
    },
    /// A sequence number skipped (cells lost or misordered).
    #[error("{what}: sequence number {got}, expected {expected}")]
    Sequence {
        /// The format being reassembled.
        what: &'static str,
        /// The expected number.
        expected: u8,
        /// The number received.
        got: u8,
    },
    /// The beginning and end tags of a CPCS-PDU differ.
    #[error("{what}: Btag {btag} does not match Etag {etag}")]
    TagMismatch {
        /// The format being reassembled.
        what: &'static str,
        /// Beginning tag.
        btag: u8,
        /// End tag.
        etag: u8,
    },
}

impl WireError {
    /// `Ok` when `got` octets hold the `need` that format `what` needs, `Truncated`
    /// otherwise: the check every view's `new_checked` makes.
    pub(crate) const fn check_len(
        what: &'static str,
        need: usize,
        got: usize,
    ) -> Result<(), WireError> {
        if got < need {
            return Err(WireError::Truncated { what, need, got });
        }
        Ok(())
    }

    /// The first `need` octets of `buf`, for an `emit` of format `what` to write into, or
    /// `BufferTooSmall` when `buf` is shorter.
    pub(crate) fn room<'b>(
        what: &'static str,
        need: usize,
        buf: &'b mut [u8],
    ) -> Result<&'b mut [u8], WireError> {
        let got = buf.len();
        buf.get_mut(..need)
            .ok_or(WireError::BufferTooSmall { what, need, got })
    }
}
