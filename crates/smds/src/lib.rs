//! # atmlab-smds: the SMDS connectionless server
//!
//! Will hold (see the SMDS issue): the sans-IO server core switching Level 3 PDUs between
//! SNI, ISSI and ICI interfaces by E.164 address with screening, link-state routing among
//! servers, the congestion management protocol, and the live UDP shell (paper 002).
//! The byte formats (L3_PDU, E.164) are in `atmlab-wire`.
//!
//! Status: empty; `atmlab smds` says so.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
