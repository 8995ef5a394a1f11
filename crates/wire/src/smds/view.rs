//! The zero-copy view of an SMDS L3_PDU (TR-TSV-000772; the IEEE 802.6 initial MAC PDU):
//! accessors and setters for every field of the layout in the documentation of
//! [`crate::smds`], with the Info, PAD and CRC32 positions clamped to the buffer so that
//! no accessor panics once [`L3Pdu::new_checked`] has passed.

use super::{CRC32_LEN, MIN_LEN, TRAILER_LEN, WHAT, field};
use crate::WireError;
use crate::crc;
use crate::e164::ADDRESS_LEN;
use crate::envelope;

/// A zero-copy view of an L3_PDU. The buffer must end where the PDU ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L3Pdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> L3Pdu<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> L3Pdu<T> {
        L3Pdu { buffer }
    }

    /// Wraps a buffer, checking it holds at least a header and a trailer.
    pub fn new_checked(buffer: T) -> Result<L3Pdu<T>, WireError> {
        WireError::check_len(WHAT, MIN_LEN, buffer.as_ref().len())?;
        Ok(L3Pdu { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub(super) fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn at_end(&self, n: usize) -> usize {
        envelope::at_end(self.b(), n)
    }

    /// The reserved octet of the common header.
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.b()[field::RESERVED]
    }

    /// The header BEtag.
    #[inline]
    pub fn betag(&self) -> u8 {
        envelope::tag(self.b())
    }

    /// BAsize.
    #[inline]
    pub fn basize(&self) -> u16 {
        envelope::basize(self.b())
    }

    /// The Destination Address octets.
    #[inline]
    pub fn destination(&self) -> [u8; ADDRESS_LEN] {
        let mut a = [0u8; ADDRESS_LEN];
        a.copy_from_slice(&self.b()[field::DA]);
        a
    }

    /// The Source Address octets.
    #[inline]
    pub fn source(&self) -> [u8; ADDRESS_LEN] {
        let mut a = [0u8; ADDRESS_LEN];
        a.copy_from_slice(&self.b()[field::SA]);
        a
    }

    /// The higher layer protocol identifier (6 bits).
    #[inline]
    pub fn hlpi(&self) -> u8 {
        self.b()[field::HLPI_PL] >> 2
    }

    /// The PAD length (0-3).
    #[inline]
    pub fn pad_len(&self) -> u8 {
        self.b()[field::HLPI_PL] & 0x03
    }

    /// The QoS field (4 bits).
    #[inline]
    pub fn qos(&self) -> u8 {
        self.b()[field::QOS_CIB_HEL] >> 4
    }

    /// The CRC32 indicator bit: true when a CRC32 follows the PAD.
    #[inline]
    pub fn cib(&self) -> bool {
        self.b()[field::QOS_CIB_HEL] & 0x08 != 0
    }

    /// The header extension length in 32-bit words (3 bits).
    #[inline]
    pub fn hel(&self) -> u8 {
        self.b()[field::QOS_CIB_HEL] & 0x07
    }

    /// The Bridging field.
    #[inline]
    pub fn bridging(&self) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[22], b[23]])
    }

    /// The 12 header extension octets.
    #[inline]
    pub fn header_extension(&self) -> &[u8] {
        &self.b()[field::HE]
    }

    /// Where the body (Info, PAD, CRC32) ends: the start of the trailer.
    fn body_end(&self) -> usize {
        self.at_end(TRAILER_LEN)
    }

    /// Where the CRC32 would start (the trailer start when CIB is clear), clamped.
    fn crc_start(&self) -> usize {
        let crc_len = if self.cib() { CRC32_LEN } else { 0 };
        self.body_end().saturating_sub(crc_len).max(field::INFO)
    }

    /// Where Info ends, as PAD length and CIB place it, clamped to the buffer.
    fn info_end(&self) -> usize {
        self.crc_start()
            .saturating_sub(usize::from(self.pad_len()))
            .max(field::INFO)
    }

    /// The Info field as PAD length and CIB delimit it (empty if they overrun the body).
    #[inline]
    pub fn info(&self) -> &[u8] {
        &self.b()[field::INFO..self.info_end()]
    }

    /// The PAD octets.
    #[inline]
    pub fn pad(&self) -> &[u8] {
        &self.b()[self.info_end()..self.crc_start()]
    }

    /// The CRC32 field, when CIB says there is one and the body can hold it.
    #[inline]
    pub fn crc32(&self) -> Option<u32> {
        if !self.cib() {
            return None;
        }
        let b = self.b().get(field::INFO..self.body_end())?;
        let c = b.last_chunk::<CRC32_LEN>()?;
        Some(u32::from_be_bytes(*c))
    }

    /// The CRC32 of the Destination Address through the end of the PAD.
    #[inline]
    pub fn computed_crc32(&self) -> u32 {
        crc::crc32(&self.b()[field::CRC_START..self.crc_start()])
    }

    /// The reserved octet of the trailer.
    #[inline]
    pub fn trailer_reserved(&self) -> u8 {
        self.b()[self.at_end(field::TRAILER_RESERVED_FROM_END)]
    }

    /// The trailer BEtag.
    #[inline]
    pub fn trailer_betag(&self) -> u8 {
        envelope::end_tag(self.b())
    }

    /// The Length field.
    #[inline]
    pub fn length(&self) -> u16 {
        envelope::length(self.b())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> L3Pdu<&'a T> {
    /// The buffer with the lifetime of the borrow it was made from, so that a
    /// representation parsed from this view may outlive the view.
    pub(super) fn data_a(&self) -> &'a [u8] {
        let b: &'a T = self.buffer;
        b.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> L3Pdu<T> {
    pub(super) fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the reserved octet of the common header.
    #[inline]
    pub fn set_reserved(&mut self, v: u8) {
        self.bm()[field::RESERVED] = v;
    }

    /// Sets the header BEtag.
    #[inline]
    pub fn set_betag(&mut self, v: u8) {
        envelope::set_tag(self.bm(), v);
    }

    /// Sets BAsize.
    #[inline]
    pub fn set_basize(&mut self, v: u16) {
        envelope::set_basize(self.bm(), v);
    }

    /// Sets the Destination Address octets (e.g. [`E164Address::to_bytes`](crate::E164Address::to_bytes)).
    #[inline]
    pub fn set_destination(&mut self, a: [u8; ADDRESS_LEN]) {
        self.bm()[field::DA].copy_from_slice(&a);
    }

    /// Sets the Source Address octets.
    #[inline]
    pub fn set_source(&mut self, a: [u8; ADDRESS_LEN]) {
        self.bm()[field::SA].copy_from_slice(&a);
    }

    /// Sets the HLPI; only the low 6 bits are used.
    #[inline]
    pub fn set_hlpi(&mut self, v: u8) {
        let b = self.bm();
        b[field::HLPI_PL] = (b[field::HLPI_PL] & 0x03) | (v << 2);
    }

    /// Sets the PAD length; only the low 2 bits are used.
    #[inline]
    pub fn set_pad_len(&mut self, v: u8) {
        let b = self.bm();
        b[field::HLPI_PL] = (b[field::HLPI_PL] & 0xfc) | (v & 0x03);
    }

    /// Sets the QoS field; only the low 4 bits are used.
    #[inline]
    pub fn set_qos(&mut self, v: u8) {
        let b = self.bm();
        b[field::QOS_CIB_HEL] = (b[field::QOS_CIB_HEL] & 0x0f) | (v << 4);
    }

    /// Sets the CRC32 indicator bit.
    #[inline]
    pub fn set_cib(&mut self, v: bool) {
        let b = self.bm();
        b[field::QOS_CIB_HEL] = (b[field::QOS_CIB_HEL] & !0x08) | (u8::from(v) << 3);
    }

    /// Sets the header extension length; only the low 3 bits are used.
    #[inline]
    pub fn set_hel(&mut self, v: u8) {
        let b = self.bm();
        b[field::QOS_CIB_HEL] = (b[field::QOS_CIB_HEL] & 0xf8) | (v & 0x07);
    }

    /// Sets the Bridging field.
    #[inline]
    pub fn set_bridging(&mut self, v: u16) {
        self.bm()[field::BRIDGING].copy_from_slice(&v.to_be_bytes());
    }

    /// The 12 header extension octets, writable.
    #[inline]
    pub fn header_extension_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::HE]
    }

    /// The Info field as the current PAD length and CIB delimit it, writable (set those
    /// first).
    #[inline]
    pub fn info_mut(&mut self) -> &mut [u8] {
        let end = self.info_end();
        &mut self.bm()[field::INFO..end]
    }

    /// The PAD octets, writable.
    #[inline]
    pub fn pad_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.info_end(), self.crc_start());
        &mut self.bm()[start..end]
    }

    /// Writes `v` into the four octets before the trailer, where the CRC32 goes when CIB
    /// is set (does nothing if the body is shorter than four octets).
    #[inline]
    pub fn set_crc32(&mut self, v: u32) {
        let end = self.body_end();
        if let Some(c) = self
            .bm()
            .get_mut(field::INFO..end)
            .and_then(|b| b.last_chunk_mut::<CRC32_LEN>())
        {
            *c = v.to_be_bytes();
        }
    }

    /// Computes the CRC32 over the Destination Address through the PAD and writes it
    /// (meaningful only with CIB set).
    #[inline]
    pub fn fill_crc32(&mut self) {
        let c = self.computed_crc32();
        self.set_crc32(c);
    }

    /// Sets the reserved octet of the trailer.
    #[inline]
    pub fn set_trailer_reserved(&mut self, v: u8) {
        let i = self.at_end(field::TRAILER_RESERVED_FROM_END);
        self.bm()[i] = v;
    }

    /// Sets the trailer BEtag.
    #[inline]
    pub fn set_trailer_betag(&mut self, v: u8) {
        envelope::set_end_tag(self.bm(), v);
    }

    /// Sets the Length field.
    #[inline]
    pub fn set_length(&mut self, v: u16) {
        envelope::set_length(self.bm(), v);
    }
}
