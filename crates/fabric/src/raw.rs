//! The raw switch protocol: ReTINA's "raw interface based on TCP/IP sockets" to the
//! connection server (paper 001 §3.2.3), offered beside the CORBA interface because
//! marshalling through the ORB dominated the cost of a call (§3.3, rows 9 and 10: JORB
//! against raw sockets on one machine; §3.5, row 17: the C server over raw sockets).
//! It carries the same
//! operations as the gRPC SwitchServer of `atmlab.v1` (`crates/rpc/proto/atmlab/v1/
//! switch.proto`): Execute (a batch, with its atomicity), Describe, ListConnections and
//! ListReservations, with the same error codes; single-command calls are batches of one.
//!
//! This module is the sans-IO codec: [`Frame`] (`parse` / `emit`) and the streaming
//! [`FrameDecoder`]. The tokio shell is `crate::live::raw`.
//!
//! # Frames
//!
//! ```text
//! offset  size  field
//! 0       4     length: the octets after this field (10 ..= 16 MiB), big endian
//! 4       1     version, 1
//! 5       1     message type (below)
//! 6       8     request id, big endian; a reply carries its request's id
//! 14      ..    body
//! ```
//!
//! | type | message | body |
//! | --- | --- | --- |
//! | 0x01 | ExecuteRequest | atomicity u8 (0 continue on error, 1 all or nothing), list of command |
//! | 0x81 | ExecuteReply | list of result, one per command, in order |
//! | 0x02 | DescribeRequest | empty |
//! | 0x82 | DescribeReply | name str, list of port, list of peer str, connections u32 |
//! | 0x03 | ListConnectionsRequest | empty |
//! | 0x83 | ListConnectionsReply | list of connection |
//! | 0x04 | ListReservationsRequest | empty |
//! | 0x84 | ListReservationsReply | list of reservation (port u16, vcid, owner str) |
//! | 0xff | Error | code u8, message str: a request that could not be decoded or served |
//!
//! Numbers are big endian; `f64`s travel as their IEEE 754 bits, so every value comes
//! back exactly (NaN payloads included); a bool is one octet, 0 or 1; a `str` is a u32
//! length and UTF-8; a list is a u32 count and its elements; an option is a 0/1 octet
//! and the value; a vcid is VPI u16, VCI u16; a branch is port u16, vcid.
//!
//! - command: op u8 (the proto's oneof numbers) and its fields in declaration order:
//!   1 Reserve (port u16, count u32, vpi u16, vp bool, within option of two u16, owner
//!   str), 2 Unreserve (port u16, list of vcid, owner str), 3 Commit (kind u8 (0 VC, 1
//!   VP), in_port u16, in_id vcid, list of branch, traffic, clr f64, buffer_cells u32,
//!   owner str, replenish u32, tag str), 4 Release (connection u64, keep_reserved bool),
//!   5 AddBranch and 6 DropBranch (connection u64, branch), 7 Modify (connection u64,
//!   traffic, clr f64).
//! - traffic: class u8 (1 CBR, 2 rt-VBR, 3 nrt-VBR, 4 UBR, as in the proto), pcr f64,
//!   scr f64, mbs u32, cdvt_ps u64.
//! - result: code u8 (google.rpc.Code, as [`ErrorKind::code`]); code 0 is followed by
//!   the reply (op u8 as the command's, then 1 the reserved list of vcid, 3 connection
//!   u64 and the replenished list of vcid; the others carry nothing), any other code by
//!   the error's message str.
//! - port: id u16, interface u8 (0 UNI, 1 NNI), link rate f64 (b/s), capacity f64
//!   (cells/s), buffer_cells u32, clp_threshold u32, VPI range u16 u16, VCI range u16
//!   u16, allocated f64, buffer_allocated u32, reserved u32, committed u32, the seven
//!   counters u64 (in, out, unknown, HEC errors, HEC corrected, CLP1 discards, full
//!   discards), queue_cells u32.
//! - connection: id u64, kind u8, in_port u16, in_id vcid, list of branch, traffic, clr
//!   f64, admitted f64, buffer_cells u32, owner str, tag str, cells u64,
//!   cells_discarded u64.
//!
//! Errors travel as (code, text): a refused command's `FabricError` comes back as
//! [`FabricError::Remote`] with the same [`ErrorKind`] and the same text. So
//! `decode(encode(m)) == m` holds exactly for messages whose errors are `Remote`; other
//! variants arrive as `Remote` of their kind. A code this side does not know reads as
//! invalid argument ([`ErrorKind::from_code`]).
//!
//! # Panic and allocation contract
//!
//! Decoding never panics on any input. Before anything is allocated, a frame's length is
//! checked against [`MAX_FRAME_LEN`] (a frame claiming 4 GiB is refused on its first
//! four octets), a string's length against the octets left, and a list's count times the
//! smallest encoding of one element against the octets left; batches and their results
//! are at most [`MAX_BATCH`] long. So what one frame can make the decoder allocate is a
//! small multiple of the frame's length. Errors are [`FabricError::Frame`], naming what
//! was wrong.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::{BitRate, CellRate};

use crate::config::{Interface, PortConfig};
use crate::error::{ErrorKind, FabricError};
use crate::ops::{BatchResult, Description};
use crate::switch::{
    Atomicity, Branch, BranchChange, Command, Commit, Connection, ConnectionKind, Modify,
    PortCounters, PortStatus, Release, Reply, Reservation, Reserve, Unreserve,
};

/// The protocol version this module speaks.
pub const VERSION: u8 = 1;
/// The most octets a frame may have after its length field (16 MiB): a reply listing
/// some 150,000 connections fits; anything claiming more is refused unread.
pub const MAX_FRAME_LEN: usize = 16 << 20;
/// The octets of the frame header: length, version, type, request id.
pub const HEADER_LEN: usize = 14;
/// The most commands in one batch (and results in one reply). xbind's aggregated
/// batches are a handful of commands; the bound keeps a frame of tiny commands from
/// decoding into a vector many times its size.
pub const MAX_BATCH: usize = 65_536;

/// Byte offsets of the frame header (smoltcp's `mod field`).
pub mod field {
    use core::ops::{Range, RangeFrom};

    /// The length of the rest of the frame, u32 big endian.
    pub const LENGTH: Range<usize> = 0..4;
    /// The protocol version.
    pub const VERSION: usize = 4;
    /// The message type.
    pub const TYPE: usize = 5;
    /// The request id, u64 big endian.
    pub const ID: Range<usize> = 6..14;
    /// The body.
    pub const BODY: RangeFrom<usize> = 14..;
}

/// The smallest value of the length field: version, type and id, with an empty body.
const MIN_LENGTH: usize = HEADER_LEN - 4;

/// The message type octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// A batch of commands.
    ExecuteRequest,
    /// The switch's name, ports and peers, asked.
    DescribeRequest,
    /// Every connection, asked.
    ListConnectionsRequest,
    /// Every reservation, asked.
    ListReservationsRequest,
    /// The results of a batch.
    ExecuteReply,
    /// The switch's description.
    DescribeReply,
    /// The connections.
    ListConnectionsReply,
    /// The reservations.
    ListReservationsReply,
    /// A request that could not be decoded or served.
    Error,
    /// A type this version does not know.
    Unknown(u8),
}

impl From<u8> for MessageType {
    fn from(v: u8) -> Self {
        match v {
            0x01 => MessageType::ExecuteRequest,
            0x02 => MessageType::DescribeRequest,
            0x03 => MessageType::ListConnectionsRequest,
            0x04 => MessageType::ListReservationsRequest,
            0x81 => MessageType::ExecuteReply,
            0x82 => MessageType::DescribeReply,
            0x83 => MessageType::ListConnectionsReply,
            0x84 => MessageType::ListReservationsReply,
            0xff => MessageType::Error,
            other => MessageType::Unknown(other),
        }
    }
}

impl From<MessageType> for u8 {
    fn from(t: MessageType) -> u8 {
        match t {
            MessageType::ExecuteRequest => 0x01,
            MessageType::DescribeRequest => 0x02,
            MessageType::ListConnectionsRequest => 0x03,
            MessageType::ListReservationsRequest => 0x04,
            MessageType::ExecuteReply => 0x81,
            MessageType::DescribeReply => 0x82,
            MessageType::ListConnectionsReply => 0x83,
            MessageType::ListReservationsReply => 0x84,
            MessageType::Error => 0xff,
            MessageType::Unknown(v) => v,
        }
    }
}

/// One message of the raw protocol, as owned data.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Run a batch of commands.
    ExecuteRequest {
        /// All or nothing, or each on its own.
        atomicity: Atomicity,
        /// The commands, at most [`MAX_BATCH`].
        commands: Vec<Command>,
    },
    /// One result per command, in order.
    ExecuteReply {
        /// The results; errors travel as [`FabricError::Remote`].
        results: BatchResult,
    },
    /// Ask for the switch's description.
    DescribeRequest,
    /// The switch's name, ports (with configuration, allocation and counters) and peers.
    DescribeReply(Description),
    /// Ask for every connection.
    ListConnectionsRequest,
    /// Every connection, with its counters.
    ListConnectionsReply(Vec<Connection>),
    /// Ask for every reservation.
    ListReservationsRequest,
    /// Every outstanding reservation.
    ListReservationsReply(Vec<Reservation>),
    /// The request with this id could not be decoded, or failed as a whole (the switch
    /// server unavailable behind a proxy); id 0 is about the connection itself.
    Error(FabricError),
}

impl Message {
    /// Its type octet.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::ExecuteRequest { .. } => MessageType::ExecuteRequest,
            Message::ExecuteReply { .. } => MessageType::ExecuteReply,
            Message::DescribeRequest => MessageType::DescribeRequest,
            Message::DescribeReply(_) => MessageType::DescribeReply,
            Message::ListConnectionsRequest => MessageType::ListConnectionsRequest,
            Message::ListConnectionsReply(_) => MessageType::ListConnectionsReply,
            Message::ListReservationsRequest => MessageType::ListReservationsRequest,
            Message::ListReservationsReply(_) => MessageType::ListReservationsReply,
            Message::Error(_) => MessageType::Error,
        }
    }

    /// Whether a client sends it (a server answers only these).
    pub fn is_request(&self) -> bool {
        matches!(
            self,
            Message::ExecuteRequest { .. }
                | Message::DescribeRequest
                | Message::ListConnectionsRequest
                | Message::ListReservationsRequest
        )
    }

    /// Appends the whole frame (length, header, body) for request `id` to `out` and
    /// returns its length. A message that would exceed [`MAX_FRAME_LEN`] (or a batch
    /// over [`MAX_BATCH`]) is refused and `out` is left as it was.
    pub fn emit(&self, id: u64, out: &mut Vec<u8>) -> Result<usize, FabricError> {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.push(VERSION);
        out.push(self.message_type().into());
        out.extend_from_slice(&id.to_be_bytes());
        let r = self.emit_body(out);
        let len = out.len() - start - 4;
        if let Err(e) = r {
            out.truncate(start);
            return Err(e);
        }
        if len > MAX_FRAME_LEN {
            out.truncate(start);
            return Err(FabricError::Frame(
                "the message is longer than the 16 MiB frame maximum",
            ));
        }
        out[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
        Ok(len + 4)
    }

    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), FabricError> {
        let w = &mut Writer(out);
        match self {
            Message::ExecuteRequest {
                atomicity,
                commands,
            } => {
                if commands.len() > MAX_BATCH {
                    return Err(FabricError::Frame("a batch of more than 65,536 commands"));
                }
                w.u8(match atomicity {
                    Atomicity::ContinueOnError => 0,
                    Atomicity::AllOrNothing => 1,
                });
                w.count(commands.len());
                for c in commands {
                    put_command(w, c);
                }
            }
            Message::ExecuteReply { results } => {
                if results.len() > MAX_BATCH {
                    return Err(FabricError::Frame("a reply of more than 65,536 results"));
                }
                w.count(results.len());
                for r in results {
                    match r {
                        Ok(reply) => {
                            w.u8(0);
                            put_reply(w, reply);
                        }
                        Err(e) => put_error(w, e),
                    }
                }
            }
            Message::DescribeRequest
            | Message::ListConnectionsRequest
            | Message::ListReservationsRequest => {}
            Message::DescribeReply(d) => {
                w.str(&d.name);
                w.count(d.ports.len());
                for p in &d.ports {
                    put_port(w, p);
                }
                w.count(d.peers.len());
                for p in &d.peers {
                    w.str(p);
                }
                w.u32(d.connections);
            }
            Message::ListConnectionsReply(cs) => {
                w.count(cs.len());
                for c in cs {
                    put_connection(w, c);
                }
            }
            Message::ListReservationsReply(rs) => {
                w.count(rs.len());
                for r in rs {
                    w.u16(r.port.0);
                    w.vcid(r.id);
                    w.str(&r.owner);
                }
            }
            Message::Error(e) => put_error(w, e),
        }
        Ok(())
    }
}

/// One whole frame: a request id and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The request id (a reply carries its request's).
    pub id: u64,
    /// The message.
    pub message: Message,
}

impl Frame {
    /// Decodes exactly one whole frame, length field included, from untrusted bytes.
    pub fn parse(bytes: &[u8]) -> Result<Frame, FabricError> {
        let Some(head) = bytes.get(field::LENGTH) else {
            return Err(FabricError::Frame("shorter than a length field"));
        };
        let len = check_length(head)?;
        if bytes.len() - 4 != len {
            return Err(FabricError::Frame(
                "the length field disagrees with the frame's size",
            ));
        }
        parse_rest(&bytes[4..]).map_err(|(_, e)| e)
    }

    /// Appends the frame to `out`; see [`Message::emit`].
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<usize, FabricError> {
        self.message.emit(self.id, out)
    }

    /// The frame as a new vector; see [`Message::emit`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, FabricError> {
        let mut v = Vec::new();
        self.emit(&mut v)?;
        Ok(v)
    }
}

/// Checks a length field: the frame it announces must hold a header and fit the maximum.
fn check_length(head: &[u8]) -> Result<usize, FabricError> {
    let mut b = [0u8; 4];
    b.copy_from_slice(head);
    let len = u32::from_be_bytes(b) as usize;
    if len > MAX_FRAME_LEN {
        return Err(FabricError::Frame(
            "the length field exceeds the 16 MiB frame maximum",
        ));
    }
    if len < MIN_LENGTH {
        return Err(FabricError::Frame(
            "the length field is shorter than a frame header",
        ));
    }
    Ok(len)
}

/// Decodes what follows the length field (at least [`MIN_LENGTH`] octets). The error
/// carries the request id, which a sound header always yields.
fn parse_rest(rest: &[u8]) -> Result<Frame, (u64, FabricError)> {
    let mut id = [0u8; 8];
    id.copy_from_slice(&rest[2..10]);
    let id = u64::from_be_bytes(id);
    if rest[0] != VERSION {
        return Err((id, FabricError::Frame("unsupported protocol version")));
    }
    let r = &mut Reader(&rest[10..]);
    let message = parse_body(MessageType::from(rest[1]), r).map_err(|e| (id, e))?;
    if !r.0.is_empty() {
        return Err((id, FabricError::Frame("trailing octets after the body")));
    }
    Ok(Frame { id, message })
}

fn parse_body(t: MessageType, r: &mut Reader<'_>) -> Result<Message, FabricError> {
    Ok(match t {
        MessageType::ExecuteRequest => {
            let atomicity = match r.u8()? {
                0 => Atomicity::ContinueOnError,
                1 => Atomicity::AllOrNothing,
                _ => return Err(FabricError::Frame("unknown atomicity")),
            };
            let n = r.count(MIN_COMMAND, "more commands than the frame can hold")?;
            if n > MAX_BATCH {
                return Err(FabricError::Frame("a batch of more than 65,536 commands"));
            }
            let mut commands = Vec::with_capacity(n);
            for _ in 0..n {
                commands.push(get_command(r)?);
            }
            Message::ExecuteRequest {
                atomicity,
                commands,
            }
        }
        MessageType::ExecuteReply => {
            let n = r.count(MIN_RESULT, "more results than the frame can hold")?;
            if n > MAX_BATCH {
                return Err(FabricError::Frame("a reply of more than 65,536 results"));
            }
            let mut results = Vec::with_capacity(n);
            for _ in 0..n {
                results.push(match r.u8()? {
                    0 => Ok(get_reply(r)?),
                    code => Err(get_error_text(r, code)?),
                });
            }
            Message::ExecuteReply { results }
        }
        MessageType::DescribeRequest => Message::DescribeRequest,
        MessageType::ListConnectionsRequest => Message::ListConnectionsRequest,
        MessageType::ListReservationsRequest => Message::ListReservationsRequest,
        MessageType::DescribeReply => {
            let name = r.str()?;
            let n = r.count(PORT_LEN, "more ports than the frame can hold")?;
            let mut ports = Vec::with_capacity(n);
            for _ in 0..n {
                ports.push(get_port(r)?);
            }
            let n = r.count(4, "more peers than the frame can hold")?;
            let mut peers = Vec::with_capacity(n);
            for _ in 0..n {
                peers.push(r.str()?);
            }
            let connections = r.u32()?;
            Message::DescribeReply(Description {
                name,
                ports,
                peers,
                connections,
            })
        }
        MessageType::ListConnectionsReply => {
            let n = r.count(MIN_CONNECTION, "more connections than the frame can hold")?;
            let mut cs = Vec::with_capacity(n);
            for _ in 0..n {
                cs.push(get_connection(r)?);
            }
            Message::ListConnectionsReply(cs)
        }
        MessageType::ListReservationsReply => {
            let n = r.count(MIN_RESERVATION, "more reservations than the frame can hold")?;
            let mut rs = Vec::with_capacity(n);
            for _ in 0..n {
                rs.push(Reservation {
                    port: PortId(r.u16()?),
                    id: r.vcid()?,
                    owner: r.str()?,
                });
            }
            Message::ListReservationsReply(rs)
        }
        MessageType::Error => {
            let code = r.u8()?;
            Message::Error(get_error_text(r, code)?)
        }
        MessageType::Unknown(_) => return Err(FabricError::Frame("unknown message type")),
    })
}

// ----- the streaming decoder ----------------------------------------------------------

/// What [`FrameDecoder::poll_frame`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A whole, well-formed frame.
    Frame(Frame),
    /// A frame whose header was sound but whose body was not. The stream stays in step
    /// (the length field delimits the frame), so a server answers request `id` with an
    /// Error frame and reads on.
    Malformed {
        /// The frame's request id.
        id: u64,
        /// What was wrong.
        error: FabricError,
    },
}

/// The streaming decoder: a sans-IO core that the shells feed with whatever octets a
/// socket gave and poll for frames.
///
/// Call [`handle_bytes`](Self::handle_bytes) with each chunk read, then
/// [`poll_frame`](Self::poll_frame) until it returns `Ok(None)` (more octets needed).
/// `Err` means the stream is out of step (a length field out of bounds): nothing after
/// it can be framed, every later poll returns the same error, and the shell should close
/// the connection. The decoder holds at most one partial frame plus the last chunk fed,
/// so with chunks of bounded size its memory is bounded by [`MAX_FRAME_LEN`].
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Start of the unconsumed octets in `buf`.
    start: usize,
    failed: Option<FabricError>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes octets from the stream.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        // Move the unconsumed tail to the front once it is at most half the buffer, so
        // each octet is moved a bounded number of times on average.
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next frame, if a whole one is buffered.
    pub fn poll_frame(&mut self) -> Result<Option<Decoded>, FabricError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let avail = &self.buf[self.start..];
        let Some(head) = avail.get(field::LENGTH) else {
            return Ok(None);
        };
        let len = match check_length(head) {
            Ok(len) => len,
            Err(e) => {
                // Give the buffer back: nothing more will be decoded from this stream.
                self.buf = Vec::new();
                self.start = 0;
                self.failed = Some(e.clone());
                return Err(e);
            }
        };
        let Some(rest) = avail.get(4..4 + len) else {
            return Ok(None);
        };
        let decoded = match parse_rest(rest) {
            Ok(f) => Decoded::Frame(f),
            Err((id, error)) => Decoded::Malformed { id, error },
        };
        self.start += 4 + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(decoded))
    }

    /// Octets buffered and not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }
}

// ----- element encodings --------------------------------------------------------------

/// The smallest encodings, which bound a list's count by the octets left.
/// Release: op, connection u64, keep_reserved.
const MIN_COMMAND: usize = 1 + 8 + 1;
/// Code 0 and a reply op without fields.
const MIN_RESULT: usize = 2;
/// A port's encoding has a fixed size.
const PORT_LEN: usize = 2 + 1 + 8 + 8 + 4 + 4 + 4 + 4 + 8 + 4 + 4 + 4 + 7 * 8 + 4;
/// A connection with no branches and empty strings.
const MIN_CONNECTION: usize = 8 + 1 + 2 + 4 + 4 + TRAFFIC_LEN + 8 + 8 + 4 + 4 + 4 + 8 + 8;
const TRAFFIC_LEN: usize = 1 + 8 + 8 + 4 + 8;
/// Port, VPI/VCI, an empty owner.
const MIN_RESERVATION: usize = 2 + 4 + 4;

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    /// A list's count. Lists longer than u32 cannot fit a 16 MiB frame, so the frame
    /// length check in `emit` refuses them; saturating keeps this from wrapping first.
    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    fn str(&mut self, s: &str) {
        self.count(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn vcid(&mut self, id: VcId) {
        self.u16(id.vpi.0);
        self.u16(id.vci.0);
    }
    fn branch(&mut self, b: &Branch) {
        self.u16(b.port.0);
        self.vcid(b.id);
    }
    fn vcids(&mut self, ids: &[VcId]) {
        self.count(ids.len());
        for &id in ids {
            self.vcid(id);
        }
    }
    fn branches(&mut self, bs: &[Branch]) {
        self.count(bs.len());
        for b in bs {
            self.branch(b);
        }
    }
    fn kind(&mut self, k: ConnectionKind) {
        self.u8(match k {
            ConnectionKind::Vc => 0,
            ConnectionKind::Vp => 1,
        });
    }
    fn traffic(&mut self, t: &TrafficDescriptor) {
        self.u8(match t.class {
            ServiceClass::Cbr => 1,
            ServiceClass::RtVbr => 2,
            ServiceClass::NrtVbr => 3,
            ServiceClass::Ubr => 4,
        });
        self.f64(t.pcr.0);
        self.f64(t.scr.0);
        self.u32(t.mbs);
        self.u64(t.cdvt_ps);
    }
}

fn put_command(w: &mut Writer<'_>, c: &Command) {
    match c {
        Command::Reserve(r) => {
            w.u8(1);
            w.u16(r.port.0);
            w.u32(r.count);
            w.u16(r.vpi);
            w.bool(r.vp);
            match r.within {
                None => w.u8(0),
                Some((lo, hi)) => {
                    w.u8(1);
                    w.u16(lo);
                    w.u16(hi);
                }
            }
            w.str(&r.owner);
        }
        Command::Unreserve(u) => {
            w.u8(2);
            w.u16(u.port.0);
            w.vcids(&u.ids);
            w.str(&u.owner);
        }
        Command::Commit(c) => {
            w.u8(3);
            w.kind(c.kind);
            w.u16(c.in_port.0);
            w.vcid(c.in_id);
            w.branches(&c.branches);
            w.traffic(&c.traffic);
            w.f64(c.clr);
            w.u32(c.buffer_cells);
            w.str(&c.owner);
            w.u32(c.replenish);
            w.str(&c.tag);
        }
        Command::Release(r) => {
            w.u8(4);
            w.u64(r.connection);
            w.bool(r.keep_reserved);
        }
        Command::AddBranch(ch) | Command::DropBranch(ch) => {
            w.u8(if matches!(c, Command::AddBranch(_)) {
                5
            } else {
                6
            });
            w.u64(ch.connection);
            w.branch(&ch.branch);
        }
        Command::Modify(m) => {
            w.u8(7);
            w.u64(m.connection);
            w.traffic(&m.traffic);
            w.f64(m.clr);
        }
    }
}

fn put_reply(w: &mut Writer<'_>, r: &Reply) {
    match r {
        Reply::Reserved(ids) => {
            w.u8(1);
            w.vcids(ids);
        }
        Reply::Unreserved => w.u8(2),
        Reply::Committed {
            connection,
            replenished,
        } => {
            w.u8(3);
            w.u64(*connection);
            w.vcids(replenished);
        }
        Reply::Released => w.u8(4),
        Reply::BranchAdded => w.u8(5),
        Reply::BranchDropped => w.u8(6),
        Reply::Modified => w.u8(7),
    }
}

/// An error as (code, text). Codes are 1..=16, so they fit an octet.
fn put_error(w: &mut Writer<'_>, e: &FabricError) {
    w.u8(e.kind().code() as u8);
    w.str(&e.to_string());
}

fn put_port(w: &mut Writer<'_>, p: &PortStatus) {
    let c = &p.config;
    w.u16(c.id.0);
    w.u8(match c.interface {
        Interface::Uni => 0,
        Interface::Nni => 1,
    });
    w.f64(c.link_rate.0);
    w.f64(c.capacity.0);
    w.u32(c.buffer_cells);
    w.u32(c.clp_threshold);
    w.u16(c.vpi_range.0);
    w.u16(c.vpi_range.1);
    w.u16(c.vci_range.0);
    w.u16(c.vci_range.1);
    w.f64(p.allocated);
    w.u32(p.buffer_allocated);
    w.u32(p.reserved);
    w.u32(p.committed);
    let k = &p.counters;
    for v in [
        k.cells_in,
        k.cells_out,
        k.cells_unknown,
        k.cells_hec_errors,
        k.cells_hec_corrected,
        k.cells_discarded_clp1,
        k.cells_discarded_full,
    ] {
        w.u64(v);
    }
    w.u32(p.queue_cells);
}

fn put_connection(w: &mut Writer<'_>, c: &Connection) {
    w.u64(c.id);
    w.kind(c.kind);
    w.u16(c.in_port.0);
    w.vcid(c.in_id);
    w.branches(&c.branches);
    w.traffic(&c.traffic);
    w.f64(c.clr);
    w.f64(c.admitted);
    w.u32(c.buffer_cells);
    w.str(&c.owner);
    w.str(&c.tag);
    w.u64(c.cells);
    w.u64(c.cells_discarded);
}

/// A cursor over untrusted octets: every read checks what is left first.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FabricError> {
        if self.0.len() < n {
            return Err(FabricError::Frame("the body ends inside a field"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], FabricError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, FabricError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, FabricError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, FabricError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, FabricError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    fn f64(&mut self) -> Result<f64, FabricError> {
        Ok(f64::from_bits(self.u64()?))
    }
    fn bool(&mut self) -> Result<bool, FabricError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(FabricError::Frame("a flag octet other than 0 or 1")),
        }
    }
    /// A list's count, refused unless `count * min_len` octets are left, so that no
    /// count can make the decoder allocate more than the frame justifies.
    fn count(&mut self, min_len: usize, too_many: &'static str) -> Result<usize, FabricError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_len) > self.0.len() {
            return Err(FabricError::Frame(too_many));
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<String, FabricError> {
        let n = self.u32()? as usize;
        if n > self.0.len() {
            return Err(FabricError::Frame("a string longer than the frame"));
        }
        let b = self.take(n)?;
        core::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| FabricError::Frame("a string that is not UTF-8"))
    }
    fn vcid(&mut self) -> Result<VcId, FabricError> {
        Ok(VcId::new(self.u16()?, self.u16()?))
    }
    fn branch(&mut self) -> Result<Branch, FabricError> {
        Ok(Branch {
            port: PortId(self.u16()?),
            id: self.vcid()?,
        })
    }
    fn vcids(&mut self) -> Result<Vec<VcId>, FabricError> {
        let n = self.count(4, "more identifiers than the frame can hold")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.vcid()?);
        }
        Ok(v)
    }
    fn branches(&mut self) -> Result<Vec<Branch>, FabricError> {
        let n = self.count(6, "more branches than the frame can hold")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.branch()?);
        }
        Ok(v)
    }
    fn kind(&mut self) -> Result<ConnectionKind, FabricError> {
        match self.u8()? {
            0 => Ok(ConnectionKind::Vc),
            1 => Ok(ConnectionKind::Vp),
            _ => Err(FabricError::Frame("unknown connection kind")),
        }
    }
    fn traffic(&mut self) -> Result<TrafficDescriptor, FabricError> {
        let class = match self.u8()? {
            1 => ServiceClass::Cbr,
            2 => ServiceClass::RtVbr,
            3 => ServiceClass::NrtVbr,
            4 => ServiceClass::Ubr,
            _ => return Err(FabricError::Frame("unknown service class")),
        };
        Ok(TrafficDescriptor {
            class,
            pcr: CellRate(self.f64()?),
            scr: CellRate(self.f64()?),
            mbs: self.u32()?,
            cdvt_ps: self.u64()?,
        })
    }
}

fn get_command(r: &mut Reader<'_>) -> Result<Command, FabricError> {
    Ok(match r.u8()? {
        1 => Command::Reserve(Reserve {
            port: PortId(r.u16()?),
            count: r.u32()?,
            vpi: r.u16()?,
            vp: r.bool()?,
            within: match r.u8()? {
                0 => None,
                1 => Some((r.u16()?, r.u16()?)),
                _ => return Err(FabricError::Frame("an option tag other than 0 or 1")),
            },
            owner: r.str()?.into(),
        }),
        2 => Command::Unreserve(Unreserve {
            port: PortId(r.u16()?),
            ids: r.vcids()?,
            owner: r.str()?.into(),
        }),
        3 => Command::Commit(Commit {
            kind: r.kind()?,
            in_port: PortId(r.u16()?),
            in_id: r.vcid()?,
            branches: r.branches()?,
            traffic: r.traffic()?,
            clr: r.f64()?,
            buffer_cells: r.u32()?,
            owner: r.str()?.into(),
            replenish: r.u32()?,
            tag: r.str()?,
        }),
        4 => Command::Release(Release {
            connection: r.u64()?,
            keep_reserved: r.bool()?,
        }),
        op @ (5 | 6) => {
            let ch = BranchChange {
                connection: r.u64()?,
                branch: r.branch()?,
            };
            if op == 5 {
                Command::AddBranch(ch)
            } else {
                Command::DropBranch(ch)
            }
        }
        7 => Command::Modify(Modify {
            connection: r.u64()?,
            traffic: r.traffic()?,
            clr: r.f64()?,
        }),
        _ => return Err(FabricError::Frame("unknown command")),
    })
}

fn get_reply(r: &mut Reader<'_>) -> Result<Reply, FabricError> {
    Ok(match r.u8()? {
        1 => Reply::Reserved(r.vcids()?),
        2 => Reply::Unreserved,
        3 => Reply::Committed {
            connection: r.u64()?,
            replenished: r.vcids()?,
        },
        4 => Reply::Released,
        5 => Reply::BranchAdded,
        6 => Reply::BranchDropped,
        7 => Reply::Modified,
        _ => return Err(FabricError::Frame("unknown reply")),
    })
}

fn get_error_text(r: &mut Reader<'_>, code: u8) -> Result<FabricError, FabricError> {
    Ok(FabricError::Remote {
        kind: ErrorKind::from_code(i32::from(code)),
        message: r.str()?,
    })
}

fn get_port(r: &mut Reader<'_>) -> Result<PortStatus, FabricError> {
    let config = PortConfig {
        id: PortId(r.u16()?),
        interface: match r.u8()? {
            0 => Interface::Uni,
            1 => Interface::Nni,
            _ => return Err(FabricError::Frame("unknown interface")),
        },
        link_rate: BitRate(r.f64()?),
        capacity: CellRate(r.f64()?),
        buffer_cells: r.u32()?,
        clp_threshold: r.u32()?,
        vpi_range: (r.u16()?, r.u16()?),
        vci_range: (r.u16()?, r.u16()?),
    };
    Ok(PortStatus {
        config,
        allocated: r.f64()?,
        buffer_allocated: r.u32()?,
        reserved: r.u32()?,
        committed: r.u32()?,
        counters: PortCounters {
            cells_in: r.u64()?,
            cells_out: r.u64()?,
            cells_unknown: r.u64()?,
            cells_hec_errors: r.u64()?,
            cells_hec_corrected: r.u64()?,
            cells_discarded_clp1: r.u64()?,
            cells_discarded_full: r.u64()?,
            // The data plane's refusal counters are not in protocol version 1: a raw
            // client (and the proxy in front of it) reads them as 0; gRPC's Statistics
            // and the live object carry them.
            ..PortCounters::default()
        },
        queue_cells: r.u32()?,
    })
}

fn get_connection(r: &mut Reader<'_>) -> Result<Connection, FabricError> {
    Ok(Connection {
        id: r.u64()?,
        kind: r.kind()?,
        in_port: PortId(r.u16()?),
        in_id: r.vcid()?,
        branches: r.branches()?,
        traffic: r.traffic()?,
        clr: r.f64()?,
        admitted: r.f64()?,
        buffer_cells: r.u32()?,
        owner: r.str()?,
        tag: r.str()?,
        cells: r.u64()?,
        cells_discarded: r.u64()?,
    })
}
