//! Frames on an ISSI (Inter-Switching System Interface, paper 002 §2.2, Fig. 1).
//!
//! An ISSI carries user data (L3_PDUs between servers) and the servers' own protocols:
//! the link-state routing of §3.3.2 (hellos, link state advertisements, acknowledgements)
//! and the Congestion Management Protocol of §5.2. Bellcore's ISSI protocol stack was not
//! at hand, so this is atmlab's own encoding, compact and checked; every integer is big
//! endian. The first octet says what a frame is:
//!
//! ```text
//!  0xD1 Data    type | hops | 0 | 0 | target server (4) | L3_PDU ...
//!  0xC1 Hello   type | 0 | count (2) | from (4) | hello ms (4) | dead ms (4) | seen (4 each)
//!  0xC2 LSU     type | flags | count (2) | from (4) | LSAs
//!                 LSA: origin (4) | seq (4) | age s (2) | links (2) | addresses (2) |
//!                      prefixes (2) | (neighbour (4), cost (4)) ... | address (8) ... |
//!                      prefix (8) ...
//!  0xC3 LSAck   type | 0 | count (2) | from (4) | (origin (4), seq (4)) ...
//!  0xC4 CMP     type | kind (1 throttle, 2 resume) | cut per mille (2) | from (4)
//! ```
//!
//! The Data envelope is 8 octets in front of the unchanged L3_PDU, so a transit server
//! forwards the subscriber's octets as they came. `target` 0 means "route by the
//! Destination Address"; a non-zero target is the server a group copy is for (§ group
//! addresses in [`crate::fib`]): transit servers forward it by server, not by address, so
//! each member is reached once. `hops` counts servers crossed; a frame is dropped at
//! [`MAX_HOPS`] so a transient routing loop cannot keep it alive.
//!
//! LSU flag bit 0 marks a database-synchronisation batch (sent when an adjacency forms).
//!
//! Panic contract: [`IssiFrame::parse`] never panics, whatever the octets; every count is
//! checked against the octets left before anything is read.

use atmlab_wire::E164Address;

use crate::SmdsError;
use crate::ids::ServerId;

/// Octets of the Data envelope in front of an L3_PDU.
pub const ENVELOPE_LEN: usize = 8;
/// Frame type octets.
pub mod kind {
    /// User data: envelope + L3_PDU.
    pub const DATA: u8 = 0xd1;
    /// Hello.
    pub const HELLO: u8 = 0xc1;
    /// Link state update.
    pub const LSU: u8 = 0xc2;
    /// Link state acknowledgement.
    pub const LSACK: u8 = 0xc3;
    /// Congestion Management Protocol.
    pub const CMP: u8 = 0xc4;
}
/// A Data frame crossing this many servers is dropped (a loop during reconvergence).
pub const MAX_HOPS: u8 = 32;
/// LSU flag: the LSAs are a database synchronisation, not a flood.
pub const LSU_SYNC: u8 = 0x01;

/// The Data envelope for `target` after `hops` servers.
#[inline]
pub fn envelope(target: ServerId, hops: u8) -> [u8; ENVELOPE_LEN] {
    let t = target.0.to_be_bytes();
    [kind::DATA, hops, 0, 0, t[0], t[1], t[2], t[3]]
}

/// Reads a Data envelope: (target, hops, the L3_PDU), or `None` if `frame` is not Data.
#[inline]
pub fn open_envelope(frame: &[u8]) -> Option<(ServerId, u8, &[u8])> {
    let (h, pdu) = frame.split_first_chunk::<ENVELOPE_LEN>()?;
    if h[0] != kind::DATA {
        return None;
    }
    Some((
        ServerId(u32::from_be_bytes([h[4], h[5], h[6], h[7]])),
        h[1],
        pdu,
    ))
}

/// An L3_PDU from `source` to `destination` carrying `info` (no CRC32, SMDS version-1
/// header extension), as a subscriber sends it.
pub fn l3_pdu(
    source: E164Address,
    destination: E164Address,
    info: &[u8],
    betag: u8,
) -> Result<Vec<u8>, SmdsError> {
    let r = atmlab_wire::smds::L3PduRepr {
        betag,
        destination,
        source,
        hlpi: atmlab_wire::smds::HLPI_LLC,
        qos: 0,
        crc32: false,
        bridging: 0,
        header_extension: atmlab_wire::smds::HE_VERSION_1,
        info,
    };
    let mut v = vec![0u8; r.buffer_len()];
    r.emit(&mut v)?;
    Ok(v)
}

/// A link state advertisement: what one server says about itself (§3.3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lsa {
    /// The server that originated it.
    pub origin: ServerId,
    /// Its sequence number; a higher one replaces a lower one.
    pub seq: u32,
    /// Age in seconds when it was sent (it reaches MaxAge and is flushed).
    pub age: u16,
    /// The origin's adjacencies: (neighbour, cost).
    pub links: Vec<(ServerId, u32)>,
    /// Addresses the origin delivers: its subscribers' individual addresses, and the
    /// group addresses it has members of.
    pub addresses: Vec<E164Address>,
    /// Address prefixes the origin reaches through an ICI (another carrier).
    pub prefixes: Vec<E164Address>,
}

/// What a Congestion Management Protocol message asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpKind {
    /// Cut this many per mille of the user data sent to me.
    Throttle(u16),
    /// The congestion is over: send everything again.
    Resume,
}

/// A control frame on an ISSI (Data frames are read with [`open_envelope`], without
/// allocating).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssiFrame {
    /// A hello: I am `from`, these are the neighbours I hear on this link.
    Hello {
        /// The sender.
        from: ServerId,
        /// Its hello interval, ms.
        hello_ms: u32,
        /// Its dead interval, ms.
        dead_ms: u32,
        /// The servers it has heard on this link.
        seen: Vec<ServerId>,
    },
    /// Link state update: LSAs flooded, or a database synchronisation batch.
    Lsu {
        /// The sender.
        from: ServerId,
        /// Whether this is a database synchronisation ([`LSU_SYNC`]).
        sync: bool,
        /// The advertisements.
        lsas: Vec<Lsa>,
    },
    /// Acknowledgements of LSAs received.
    LsAck {
        /// The sender.
        from: ServerId,
        /// (origin, seq) of each LSA acknowledged.
        acks: Vec<(ServerId, u32)>,
    },
    /// A Congestion Management Protocol message.
    Cmp {
        /// The congested (or recovered) server.
        from: ServerId,
        /// What it asks.
        kind: CmpKind,
    },
}

struct Reader<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SmdsError> {
        if self.b.len() < n {
            return Err(SmdsError::Truncated {
                what: self.what,
                need: n,
                got: self.b.len(),
            });
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, SmdsError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, SmdsError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, SmdsError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn addr(&mut self) -> Result<E164Address, SmdsError> {
        Ok(E164Address::parse(self.take(8)?)?)
    }
    /// Checks `count` items of `size` octets can be present before allocating for them.
    fn room(&self, count: usize, size: usize) -> Result<(), SmdsError> {
        let need = count.saturating_mul(size);
        if self.b.len() < need {
            return Err(SmdsError::Truncated {
                what: self.what,
                need,
                got: self.b.len(),
            });
        }
        Ok(())
    }
}

/// Fixed octets of an LSA before its lists.
const LSA_FIXED: usize = 18;

impl IssiFrame {
    /// Decodes a control frame. Data frames are an error here (see [`open_envelope`]).
    pub fn parse(b: &[u8]) -> Result<IssiFrame, SmdsError> {
        let mut r = Reader {
            b,
            what: "ISSI frame header",
        };
        let t = r.u8()?;
        let sub = r.u8()?;
        match t {
            kind::HELLO => {
                r.what = "Hello";
                reserved_zero(sub)?;
                let count = usize::from(r.u16()?);
                let from = ServerId(r.u32()?);
                let hello_ms = r.u32()?;
                let dead_ms = r.u32()?;
                r.room(count, 4)?;
                let seen = (0..count)
                    .map(|_| r.u32().map(ServerId))
                    .collect::<Result<_, _>>()?;
                done(&r)?;
                Ok(IssiFrame::Hello {
                    from,
                    hello_ms,
                    dead_ms,
                    seen,
                })
            }
            kind::LSU => {
                r.what = "LSU";
                if sub & !LSU_SYNC != 0 {
                    return Err(SmdsError::Malformed("unknown LSU flags"));
                }
                let count = usize::from(r.u16()?);
                let from = ServerId(r.u32()?);
                r.room(count, LSA_FIXED)?;
                let mut lsas = Vec::with_capacity(count);
                for _ in 0..count {
                    let origin = ServerId(r.u32()?);
                    let seq = r.u32()?;
                    let age = r.u16()?;
                    let nl = usize::from(r.u16()?);
                    let na = usize::from(r.u16()?);
                    let np = usize::from(r.u16()?);
                    r.room(nl, 8)?;
                    let links = (0..nl)
                        .map(|_| Ok((ServerId(r.u32()?), r.u32()?)))
                        .collect::<Result<_, SmdsError>>()?;
                    r.room(na + np, 8)?;
                    let addresses = (0..na).map(|_| r.addr()).collect::<Result<_, _>>()?;
                    let prefixes = (0..np).map(|_| r.addr()).collect::<Result<_, _>>()?;
                    lsas.push(Lsa {
                        origin,
                        seq,
                        age,
                        links,
                        addresses,
                        prefixes,
                    });
                }
                done(&r)?;
                Ok(IssiFrame::Lsu {
                    from,
                    sync: sub & LSU_SYNC != 0,
                    lsas,
                })
            }
            kind::LSACK => {
                r.what = "LSAck";
                reserved_zero(sub)?;
                let count = usize::from(r.u16()?);
                let from = ServerId(r.u32()?);
                r.room(count, 8)?;
                let acks = (0..count)
                    .map(|_| Ok((ServerId(r.u32()?), r.u32()?)))
                    .collect::<Result<_, SmdsError>>()?;
                done(&r)?;
                Ok(IssiFrame::LsAck { from, acks })
            }
            kind::CMP => {
                r.what = "CMP";
                let cut = r.u16()?;
                let from = ServerId(r.u32()?);
                done(&r)?;
                let kind = match sub {
                    1 if cut <= 1000 => CmpKind::Throttle(cut),
                    1 => return Err(SmdsError::Malformed("CMP cut above 1000 per mille")),
                    2 if cut == 0 => CmpKind::Resume,
                    2 => return Err(SmdsError::Malformed("CMP resume with a cut")),
                    _ => return Err(SmdsError::Malformed("unknown CMP kind")),
                };
                Ok(IssiFrame::Cmp { from, kind })
            }
            kind::DATA => Err(SmdsError::Malformed(
                "a Data frame is not a control frame (read it with open_envelope)",
            )),
            _ => Err(SmdsError::Malformed("unknown frame type")),
        }
    }

    /// Encodes the frame.
    pub fn emit(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64);
        match self {
            IssiFrame::Hello {
                from,
                hello_ms,
                dead_ms,
                seen,
            } => {
                v.extend([kind::HELLO, 0]);
                v.extend((seen.len().min(u16::MAX as usize) as u16).to_be_bytes());
                v.extend(from.0.to_be_bytes());
                v.extend(hello_ms.to_be_bytes());
                v.extend(dead_ms.to_be_bytes());
                for s in seen.iter().take(u16::MAX as usize) {
                    v.extend(s.0.to_be_bytes());
                }
            }
            IssiFrame::Lsu { from, sync, lsas } => {
                v.extend([kind::LSU, if *sync { LSU_SYNC } else { 0 }]);
                v.extend((lsas.len().min(u16::MAX as usize) as u16).to_be_bytes());
                v.extend(from.0.to_be_bytes());
                for l in lsas.iter().take(u16::MAX as usize) {
                    emit_lsa(&mut v, l);
                }
            }
            IssiFrame::LsAck { from, acks } => {
                v.extend([kind::LSACK, 0]);
                v.extend((acks.len().min(u16::MAX as usize) as u16).to_be_bytes());
                v.extend(from.0.to_be_bytes());
                for (o, s) in acks.iter().take(u16::MAX as usize) {
                    v.extend(o.0.to_be_bytes());
                    v.extend(s.to_be_bytes());
                }
            }
            IssiFrame::Cmp { from, kind: k } => {
                let (sub, cut) = match k {
                    CmpKind::Throttle(c) => (1, (*c).min(1000)),
                    CmpKind::Resume => (2, 0),
                };
                v.extend([kind::CMP, sub]);
                v.extend(cut.to_be_bytes());
                v.extend(from.0.to_be_bytes());
            }
        }
        v
    }
}

/// Octets an LSA takes on the wire (to batch LSAs under a datagram size).
pub fn lsa_len(l: &Lsa) -> usize {
    LSA_FIXED + 8 * (l.links.len() + l.addresses.len() + l.prefixes.len())
}

fn emit_lsa(v: &mut Vec<u8>, l: &Lsa) {
    let cap = |n: usize| n.min(u16::MAX as usize);
    v.extend(l.origin.0.to_be_bytes());
    v.extend(l.seq.to_be_bytes());
    v.extend(l.age.to_be_bytes());
    v.extend((cap(l.links.len()) as u16).to_be_bytes());
    v.extend((cap(l.addresses.len()) as u16).to_be_bytes());
    v.extend((cap(l.prefixes.len()) as u16).to_be_bytes());
    for (n, c) in l.links.iter().take(cap(l.links.len())) {
        v.extend(n.0.to_be_bytes());
        v.extend(c.to_be_bytes());
    }
    for a in l.addresses.iter().take(cap(l.addresses.len())) {
        v.extend(a.to_bytes());
    }
    for a in l.prefixes.iter().take(cap(l.prefixes.len())) {
        v.extend(a.to_bytes());
    }
}

fn reserved_zero(b: u8) -> Result<(), SmdsError> {
    if b == 0 {
        Ok(())
    } else {
        Err(SmdsError::Malformed("reserved octet is not zero"))
    }
}

fn done(r: &Reader<'_>) -> Result<(), SmdsError> {
    if r.b.is_empty() {
        Ok(())
    } else {
        Err(SmdsError::Malformed("octets after the end of the frame"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn a(s: &str) -> E164Address {
        s.parse().unwrap()
    }

    #[test]
    fn every_control_frame_round_trips() {
        let frames = [
            IssiFrame::Hello {
                from: ServerId(7),
                hello_ms: 100,
                dead_ms: 400,
                seen: vec![ServerId(1), ServerId(9)],
            },
            IssiFrame::Lsu {
                from: ServerId(3),
                sync: true,
                lsas: vec![Lsa {
                    origin: ServerId(3),
                    seq: 0x8000_0001,
                    age: 12,
                    links: vec![(ServerId(4), 10)],
                    addresses: vec![a("I:15550001"), a("G:15559999")],
                    prefixes: vec![a("I:33")],
                }],
            },
            IssiFrame::LsAck {
                from: ServerId(2),
                acks: vec![(ServerId(3), 5)],
            },
            IssiFrame::Cmp {
                from: ServerId(1),
                kind: CmpKind::Throttle(500),
            },
            IssiFrame::Cmp {
                from: ServerId(1),
                kind: CmpKind::Resume,
            },
        ];
        for f in frames {
            assert_eq!(IssiFrame::parse(&f.emit()).unwrap(), f);
        }
    }

    #[test]
    fn envelope_round_trips_and_refuses_other_frames() {
        let mut f = envelope(ServerId(0x01020304), 5).to_vec();
        f.extend([9, 9]);
        assert_eq!(
            open_envelope(&f),
            Some((ServerId(0x01020304), 5, &[9u8, 9][..]))
        );
        assert_eq!(open_envelope(&[kind::HELLO; 12]), None);
        assert_eq!(open_envelope(&[kind::DATA; 7]), None);
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let mut f = vec![kind::LSU, 0, 0xff, 0xff, 0, 0, 0, 1];
        f.extend([0u8; 20]);
        assert!(matches!(
            IssiFrame::parse(&f),
            Err(SmdsError::Truncated { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The decoder is total: random octets give a frame or an error, never a panic,
        /// and whatever decodes re-encodes to the same octets.
        #[test]
        fn random_octets_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(f) = IssiFrame::parse(&b) {
                prop_assert_eq!(f.emit(), b);
            }
        }

        /// Valid-looking frames with one octet corrupted still never panic.
        #[test]
        fn corrupted_lsus_never_panic(i in 0usize..60, x in any::<u8>(), seq in any::<u32>()) {
            let f = IssiFrame::Lsu {
                from: ServerId(3),
                sync: false,
                lsas: vec![Lsa {
                    origin: ServerId(3),
                    seq,
                    age: 1,
                    links: vec![(ServerId(4), 10)],
                    addresses: vec![a("I:15550001")],
                    prefixes: vec![],
                }],
            };
            let mut b = f.emit();
            let n = b.len();
            b[i % n] ^= x;
            let _ = IssiFrame::parse(&b);
        }
    }
}
