//! # atmlab-wire: the byte formats of ATM networks
//!
//! Exact, fast and panic-free codecs for everything atmlab puts on a wire or in a file:
//!
//! | module | format | standard |
//! | --- | --- | --- |
//! | [`cell`] | the 53-octet cell, UNI and NNI headers, PTI, HEC receiver | ITU-T I.361, I.432.1 |
//! | [`crc`] | HEC CRC-8, AAL5 CRC-32, AAL3/4 CRC-10 | I.432.1, I.363.5, I.363.3 |
//! | [`aal5`] | CPCS-PDU trailer, `Segmenter`, per-VC `Reassembler` | I.363.5 |
//! | [`aal34`] | SAR-PDU, CPCS-PDU, MID-multiplexed reassembly | I.363.3 |
//! | [`smds`] | the SMDS Level 3 PDU | Bellcore TR-TSV-000772 |
//! | [`e164`] | E.164 individual and group addresses | TR-TSV-000772 §2 |
//! | [`pcap`] | capture files, LINKTYPE_SUNATM | libpcap, Wireshark |
//! | [`stream`] | cell streams: HEC receiver and AAL5 reassembly over raw cells, the round trip | I.432.1, I.363.5 |
//!
//! Style (after smoltcp): a zero-copy view over bytes (`Cell<T: AsRef<[u8]>>`) with
//! `new_checked` for untrusted input and accessor pairs, plus an owned `Repr` type with
//! `parse`, `buffer_len` and `emit`. Reassemblers are sans-IO: the caller passes the time
//! in; they never read a clock.
//!
//! What it is not: no I/O (the pcap writer and the cell-stream functions write to any
//! `std::io::Write` the caller gives them), no clock, no threads, no random numbers, no
//! allocation while parsing a cell, no `unsafe`.
//! Every decoder returns a [`WireError`] on bad bytes and never panics: this is
//! property-tested over random bytes and fuzzed (`fuzz/`).
//!
//! `examples/segment_reassemble.rs` walks through the API: a frame segmented into AAL5
//! cells, a cell header decoded, and the frame reassembled.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aal34;
pub mod aal5;
pub mod cell;
pub mod crc;
pub mod e164;
pub mod pcap;
pub mod smds;
pub mod stream;

mod envelope;
mod error;
pub use error::WireError;

pub use cell::{Cell, CellHeader, HeaderFormat, HecReceiver, Pti};
pub use e164::{AddressType, E164Address};
pub use smds::{L3Pdu, L3PduRepr};
