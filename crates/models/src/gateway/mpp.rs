//! The MCHIP Protocol Processor (MPP) and its handshake with the Node Processing Element
//! (NPE), paper 004 §2 and §5 (Fig. 11, "MPP Model"), as sans-IO cores.
//!
//! # Forward pipeline ([`Mpp`])
//!
//! The SPP's read requests queue in the MPP in completion order. Per request, Fig. 11's
//! blocks: *Drop Frame?* discards a segment whose Frame Status is `InError` (the status
//! comes with the request, §5, so a frame known to be bad is dropped before it costs the
//! NPE a request or the transmit buffer any room); *Node Processor* and *MPP Handshake*:
//! the MPP asks the NPE for access to the transmit buffer, and the NPE serves requests
//! at rate R (§6.3: "requests were processed at a rate R"), one at a time; the grant is
//! held while the transmit buffer has no room for the frame (§6.4: "The MPP will place a
//! hold on acknowledgments sent to the SPP until space is created in the transmit
//! buffer"); then the frame is copied from the reassembly buffer into the transmit
//! buffer (the Node Processor block "models both the NPE and the delay incurred in
//! copying the frame": we take one 32-bit word per clock cycle, Table 2's 25 ns), and
//! only then is the SPP acknowledged and its queue freed. *ICXT Lookup* maps the
//! connection (VCI, standing for its MCHIP ICN) to the destination FDDI station; *FDDI
//! Frame Fields* and *Header Build* add the FDDI frame's overhead octets.
//!
//! The pipeline is one server: a request held for room blocks every request behind it,
//! whatever its connection. That is the paper's "service mechanism \[that\] depends on the
//! state of the transmit buffer ... and thus is not work conserving" (§2, Fig. 4).
//!
//! Order of calls: [`Mpp::handle_request`] (from the SPP), [`Mpp::handle_transmitted`]
//! (room freed by the FDDI MAC), [`Mpp::handle_timeout`] at [`Mpp::poll_timeout`]; after
//! each, drain [`Mpp::poll_event`].
//!
//! # Reverse pipeline ([`MppReverse`])
//!
//! FDDI frames addressed to the gateway land in the receive buffer (refused when it has
//! no room for them); the MPP reads them in order, looks the ICN up (*ICXT Table Lookup*:
//! it yields the ATM header), copies the frame into the SPP FIFO, and the SPP fragments
//! it into cells that the AIC sends at the ATM link rate. The FIFO between MPP and SPP
//! holds one frame, so the receive buffer drains at the pace of the fragmentation: a
//! frame's room is freed when its last cell has left.

use std::collections::{BTreeMap, VecDeque};

use atmlab_core::time::{Duration, Instant};

use super::spp::{FrameStatus, QueueId, ReadRequest};
use crate::ModelsError;

/// Octets the FDDI MAC adds to a frame's data: preamble 8, SD 1, FC 1, DA 6, SA 6,
/// FCS 4, ED and FS 2 (ANSI X3.139).
pub const FDDI_OVERHEAD_OCTETS: u32 = 28;

/// Data octets per cell (the SAR format's 45).
const CELL_DATA: u32 = super::sar::DATA_OCTETS;

/// The time to copy `octets` over a `bus_octets`-wide path at one word per `cycle`.
pub fn copy_time(octets: u32, bus_octets: u32, cycle: Duration) -> Duration {
    cycle.saturating_mul(u64::from(octets.div_ceil(bus_octets.max(1))))
}

/// The forward MPP's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct MppConfig {
    /// R, NPE requests served per second.
    pub npe_rate: f64,
    /// The hardware clock cycle (Table 2: 25 ns).
    pub clock_cycle: Duration,
    /// Octets moved per clock cycle when copying a frame (32-bit path: 4).
    pub bus_octets: u32,
    /// The transmit buffer, in octets.
    pub transmit_buffer_octets: u64,
    /// The largest FDDI frame, in octets (Table 2: 4096).
    pub max_frame_octets: u32,
    /// The ICN table: VCI to destination FDDI station.
    pub icn_table: BTreeMap<u16, u16>,
}

/// A frame ready for the FDDI MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutFrame {
    /// Destination station on the ring.
    pub dest: u16,
    /// Octets on the ring (data plus [`FDDI_OVERHEAD_OCTETS`]).
    pub octets: u32,
    /// Data octets (the MCHIP segment: cells times 45).
    pub data_octets: u32,
    /// When its first cell reached the gateway.
    pub first_arrival: Instant,
    /// Its connection.
    pub vci: u16,
}

/// What the forward MPP did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MppEvent {
    /// The frame in `queue` was dropped (*Drop Frame?*: in error, or no route); the SPP's
    /// queue is free.
    Dropped {
        /// The SPP queue to acknowledge.
        queue: QueueId,
        /// Whether it was dropped for its Frame Status (else: no ICN entry).
        in_error: bool,
    },
    /// The frame in `queue` is in the transmit buffer; the SPP's queue is free.
    Written {
        /// The SPP queue to acknowledge.
        queue: QueueId,
        /// The frame, for the FDDI MAC.
        frame: OutFrame,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Idle,
    /// The NPE is processing the request until the given time.
    Npe(ReadRequest, OutFrame, Instant),
    /// Granted by the NPE, waiting for room in the transmit buffer.
    Held(ReadRequest, OutFrame),
    /// Copying into the transmit buffer until the given time.
    Copy(ReadRequest, OutFrame, Instant),
}

/// Counters of the forward MPP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MppCounters {
    /// Frames written to the transmit buffer.
    pub frames_written: u64,
    /// Frames dropped for their Frame Status.
    pub frames_dropped_in_error: u64,
    /// Frames dropped for want of an ICN entry.
    pub frames_dropped_no_route: u64,
    /// Requests the NPE served.
    pub npe_requests: u64,
}

/// The forward MPP with the NPE handshake (sans-IO).
#[derive(Debug, Clone)]
pub struct Mpp {
    cfg: MppConfig,
    npe_service: Duration,
    requests: VecDeque<ReadRequest>,
    stage: Stage,
    tx_occupancy: u64,
    events: VecDeque<MppEvent>,
    counters: MppCounters,
    /// Time the NPE spent serving requests since the last reset (for its utilisation).
    npe_busy: Duration,
}

impl Mpp {
    /// A forward MPP with an empty transmit buffer.
    pub fn new(cfg: MppConfig) -> Result<Self, ModelsError> {
        let bad = |param, reason: String| ModelsError::InvalidParameter {
            model: "Mpp",
            param,
            reason,
        };
        if !(cfg.npe_rate.is_finite() && cfg.npe_rate > 0.0 && cfg.npe_rate <= 1e12) {
            return Err(bad(
                "npe_rate",
                format!("must be a positive rate, got {}/s", cfg.npe_rate),
            ));
        }
        if cfg.bus_octets == 0 {
            return Err(bad("bus_octets", "must be at least 1".into()));
        }
        if cfg.transmit_buffer_octets < u64::from(cfg.max_frame_octets) {
            return Err(bad(
                "transmit_buffer",
                format!(
                    "{} octets cannot hold one maximum-size frame of {} octets",
                    cfg.transmit_buffer_octets, cfg.max_frame_octets
                ),
            ));
        }
        Ok(Mpp {
            npe_service: Duration::from_secs_f64(1.0 / cfg.npe_rate),
            cfg,
            requests: VecDeque::new(),
            stage: Stage::Idle,
            tx_occupancy: 0,
            events: VecDeque::new(),
            counters: MppCounters::default(),
            npe_busy: Duration::ZERO,
        })
    }

    /// Octets in the transmit buffer now.
    pub fn transmit_occupancy(&self) -> u64 {
        self.tx_occupancy
    }

    /// Requests waiting (not counting the one in service).
    pub fn pending_requests(&self) -> usize {
        self.requests.len()
    }

    /// True while a granted frame waits for room in the transmit buffer.
    pub fn is_held(&self) -> bool {
        matches!(self.stage, Stage::Held(..))
    }

    /// The counters.
    pub fn counters(&self) -> MppCounters {
        self.counters
    }

    /// Time the NPE spent on requests since the last reset.
    pub fn npe_busy(&self) -> Duration {
        self.npe_busy
    }

    /// Zeroes the counters (end of warm-up).
    pub fn reset_counters(&mut self) {
        self.counters = MppCounters::default();
        self.npe_busy = Duration::ZERO;
    }

    /// A read request from the SPP.
    pub fn handle_request(&mut self, now: Instant, req: ReadRequest) {
        self.requests.push_back(req);
        self.advance(now);
    }

    /// The FDDI MAC has sent `octets` from the transmit buffer.
    pub fn handle_transmitted(&mut self, now: Instant, octets: u32) {
        self.tx_occupancy = self.tx_occupancy.saturating_sub(u64::from(octets));
        self.advance(now);
    }

    /// Time has reached (at least) [`Mpp::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// When the MPP next needs [`Mpp::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.stage {
            Stage::Npe(_, _, t) | Stage::Copy(_, _, t) => Some(t),
            Stage::Idle | Stage::Held(..) => None,
        }
    }

    /// The next thing the MPP did.
    pub fn poll_event(&mut self) -> Option<MppEvent> {
        self.events.pop_front()
    }

    fn advance(&mut self, now: Instant) {
        loop {
            match self.stage {
                Stage::Idle => {
                    let Some(req) = self.requests.pop_front() else {
                        return;
                    };
                    if req.status == FrameStatus::InError {
                        self.counters.frames_dropped_in_error += 1;
                        self.events.push_back(MppEvent::Dropped {
                            queue: req.queue,
                            in_error: true,
                        });
                        continue;
                    }
                    let Some(&dest) = self.cfg.icn_table.get(&req.vci) else {
                        self.counters.frames_dropped_no_route += 1;
                        self.events.push_back(MppEvent::Dropped {
                            queue: req.queue,
                            in_error: false,
                        });
                        continue;
                    };
                    let data_octets = req.cells * CELL_DATA;
                    let frame = OutFrame {
                        dest,
                        octets: data_octets + FDDI_OVERHEAD_OCTETS,
                        data_octets,
                        first_arrival: req.first_arrival,
                        vci: req.vci,
                    };
                    self.counters.npe_requests += 1;
                    self.npe_busy += self.npe_service;
                    self.stage = Stage::Npe(req, frame, now + self.npe_service);
                }
                Stage::Npe(req, frame, t) => {
                    if now < t {
                        return;
                    }
                    self.stage = Stage::Held(req, frame);
                }
                Stage::Held(req, frame) => {
                    if self.tx_occupancy + u64::from(frame.octets) > self.cfg.transmit_buffer_octets
                    {
                        return;
                    }
                    // The NPE allocates the room as it grants the copy.
                    self.tx_occupancy += u64::from(frame.octets);
                    let d = copy_time(frame.data_octets, self.cfg.bus_octets, self.cfg.clock_cycle);
                    self.stage = Stage::Copy(req, frame, now + d);
                }
                Stage::Copy(req, frame, t) => {
                    if now < t {
                        return;
                    }
                    self.counters.frames_written += 1;
                    self.events.push_back(MppEvent::Written {
                        queue: req.queue,
                        frame,
                    });
                    self.stage = Stage::Idle;
                }
            }
        }
    }
}

/// A frame waiting in (or being served from) the receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFrame {
    /// Octets on the ring (what it occupies in the receive buffer).
    pub octets: u32,
    /// Its ICN, mapped to a VCI by the ICXT look-up.
    pub icn: u16,
    /// When it was received.
    pub received: Instant,
}

/// What the reverse MPP and SPP did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReverseEvent {
    /// A frame's last cell left on the ATM link.
    Sent {
        /// The frame.
        frame: InFrame,
        /// Its VCI.
        vci: u16,
        /// Cells it took.
        cells: u32,
    },
    /// A frame was dropped for want of an ICXT entry.
    NoRoute(InFrame),
}

/// The reverse pipeline's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ReverseConfig {
    /// The receive buffer, in octets.
    pub receive_buffer_octets: u64,
    /// The clock cycle.
    pub clock_cycle: Duration,
    /// Octets per cycle when copying.
    pub bus_octets: u32,
    /// One cell time on the ATM link.
    pub cell_time: Duration,
    /// The ICXT table: ICN to VCI.
    pub icxt: BTreeMap<u16, u16>,
}

/// Counters of the reverse path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReverseCounters {
    /// Frames addressed to the gateway.
    pub frames_in: u64,
    /// Frames refused by a full receive buffer.
    pub frames_refused: u64,
    /// Frames sent on as cells.
    pub frames_sent: u64,
    /// Cells sent.
    pub cells_sent: u64,
}

/// The reverse MPP with its receive buffer, and the SPP's fragmentation timing (sans-IO).
#[derive(Debug, Clone)]
pub struct MppReverse {
    cfg: ReverseConfig,
    buffer: VecDeque<InFrame>,
    occupancy: u64,
    /// The frame being copied and fragmented, and when its last cell leaves.
    serving: Option<(InFrame, u16, u32, Instant)>,
    fragmenter: super::spp::Fragmenter,
    events: VecDeque<ReverseEvent>,
    counters: ReverseCounters,
}

impl MppReverse {
    /// An empty reverse path.
    pub fn new(cfg: ReverseConfig) -> Result<Self, ModelsError> {
        if cfg.bus_octets == 0 || cfg.cell_time == Duration::ZERO {
            return Err(ModelsError::InvalidParameter {
                model: "MppReverse",
                param: "bus_octets",
                reason: "the copy width and the cell time must be positive".into(),
            });
        }
        Ok(MppReverse {
            cfg,
            buffer: VecDeque::new(),
            occupancy: 0,
            serving: None,
            fragmenter: super::spp::Fragmenter::new(),
            events: VecDeque::new(),
            counters: ReverseCounters::default(),
        })
    }

    /// Octets in the receive buffer now (including the frame being served).
    pub fn occupancy(&self) -> u64 {
        self.occupancy
    }

    /// The counters.
    pub fn counters(&self) -> ReverseCounters {
        self.counters
    }

    /// Zeroes the counters.
    pub fn reset_counters(&mut self) {
        self.counters = ReverseCounters::default();
    }

    /// A frame from the ring; returns false when the receive buffer had no room.
    pub fn handle_frame(&mut self, now: Instant, frame: InFrame) -> bool {
        self.counters.frames_in += 1;
        if self.occupancy + u64::from(frame.octets) > self.cfg.receive_buffer_octets {
            self.counters.frames_refused += 1;
            return false;
        }
        self.occupancy += u64::from(frame.octets);
        self.buffer.push_back(frame);
        self.advance(now);
        true
    }

    /// Time has reached [`MppReverse::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// When the current frame's last cell leaves.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.serving.map(|s| s.3)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ReverseEvent> {
        self.events.pop_front()
    }

    fn advance(&mut self, now: Instant) {
        loop {
            if let Some((f, vci, cells, t)) = self.serving {
                if now < t {
                    return;
                }
                self.occupancy -= u64::from(f.octets);
                self.counters.frames_sent += 1;
                self.counters.cells_sent += u64::from(cells);
                self.events.push_back(ReverseEvent::Sent {
                    frame: f,
                    vci,
                    cells,
                });
                self.serving = None;
            }
            let Some(f) = self.buffer.pop_front() else {
                return;
            };
            let Some(&vci) = self.cfg.icxt.get(&f.icn) else {
                self.occupancy -= u64::from(f.octets);
                self.events.push_back(ReverseEvent::NoRoute(f));
                continue;
            };
            let data = f.octets.saturating_sub(FDDI_OVERHEAD_OCTETS);
            let frags = self.fragmenter.fragment(vci, data);
            let done = now
                + copy_time(data, self.cfg.bus_octets, self.cfg.clock_cycle)
                + self.cfg.cell_time.saturating_mul(u64::from(frags.cells));
            self.serving = Some((f, vci, frags.cells, done));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    fn req(q: u16, status: FrameStatus, cells: u32) -> ReadRequest {
        ReadRequest {
            queue: QueueId(q),
            vci: 40,
            status,
            cells,
            first_arrival: t(0),
        }
    }

    /// R = 25 per ms (40 us a request), 25 ns cycles, room for exactly two 85-cell frames.
    fn mpp() -> Mpp {
        let frame = 85 * 45 + FDDI_OVERHEAD_OCTETS;
        Mpp::new(MppConfig {
            npe_rate: 25e3,
            clock_cycle: Duration::from_nanos(25),
            bus_octets: 4,
            transmit_buffer_octets: 2 * u64::from(frame),
            max_frame_octets: frame,
            icn_table: [(40u16, 2u16)].into_iter().collect(),
        })
        .unwrap()
    }

    fn drain(m: &mut Mpp) -> Vec<MppEvent> {
        std::iter::from_fn(|| m.poll_event()).collect()
    }

    /// Fires the core's timer until it wants none; returns the instant of the last (t(0)
    /// if none fired).
    fn run_clock(m: &mut Mpp) -> Instant {
        let mut now = t(0);
        while let Some(at) = m.poll_timeout() {
            now = at;
            m.handle_timeout(now);
        }
        now
    }

    #[test]
    fn frame_goes_through_npe_then_copy() {
        let mut m = mpp();
        m.handle_request(t(0), req(0, FrameStatus::NoError, 85));
        assert_eq!(m.poll_timeout(), Some(t(40)));
        m.handle_timeout(t(40));
        // Copy: 3825 octets = 957 words of 25 ns = 23.925 us.
        let copy = copy_time(3825, 4, Duration::from_nanos(25));
        assert_eq!(copy, Duration::from_nanos(23_925));
        assert_eq!(m.poll_timeout(), Some(t(40) + copy));
        assert!(drain(&mut m).is_empty());
        m.handle_timeout(t(40) + copy);
        let ev = drain(&mut m);
        assert_eq!(ev.len(), 1);
        let MppEvent::Written { queue, frame } = ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(queue, QueueId(0));
        assert_eq!(
            (frame.dest, frame.data_octets, frame.octets),
            (2, 3825, 3853)
        );
        assert_eq!(m.transmit_occupancy(), 3853);
    }

    #[test]
    fn in_error_frames_are_dropped_without_the_npe() {
        let mut m = mpp();
        m.handle_request(t(0), req(3, FrameStatus::InError, 10));
        assert_eq!(
            drain(&mut m),
            vec![MppEvent::Dropped {
                queue: QueueId(3),
                in_error: true
            }]
        );
        assert_eq!(m.counters().npe_requests, 0);
        let mut r = req(4, FrameStatus::NoError, 10);
        r.vci = 99;
        m.handle_request(t(0), r);
        assert_eq!(
            drain(&mut m),
            vec![MppEvent::Dropped {
                queue: QueueId(4),
                in_error: false
            }]
        );
    }

    #[test]
    fn transmit_buffer_full_holds_the_acknowledgement() {
        let mut m = mpp();
        for q in 0..4 {
            m.handle_request(t(0), req(q, FrameStatus::NoError, 85));
        }
        // Run the clock: two frames fit, the third is granted by the NPE and held.
        let now = run_clock(&mut m);
        let written = drain(&mut m);
        assert_eq!(written.len(), 2);
        assert!(m.is_held());
        assert_eq!(m.pending_requests(), 1);
        // The request behind the held one waits too (one pipeline), whatever its status.
        m.handle_request(now, req(9, FrameStatus::InError, 1));
        assert!(drain(&mut m).is_empty());
        // The MAC sends one frame: the held one is copied, then the rest flows.
        m.handle_transmitted(now, 3853);
        assert!(!m.is_held());
        let at = m.poll_timeout().unwrap();
        m.handle_timeout(at);
        let ev = drain(&mut m);
        assert!(matches!(
            ev[0],
            MppEvent::Written {
                queue: QueueId(2),
                ..
            }
        ));
        assert_eq!(m.transmit_occupancy(), 2 * 3853);
    }

    #[test]
    fn npe_rate_bounds_the_request_rate() {
        let mut m = mpp();
        m.cfg.transmit_buffer_octets = u64::MAX;
        for q in 0..100 {
            m.handle_request(t(0), req(q, FrameStatus::NoError, 8));
        }
        let now = run_clock(&mut m);
        assert_eq!(drain(&mut m).len(), 100);
        // 100 requests at 40 us plus 100 copies of 360 octets (2.25 us each).
        assert_eq!(now, t(100 * 40) + Duration::from_nanos(100 * 2250));
        assert_eq!(m.npe_busy(), Duration::from_micros(4000));
    }

    #[test]
    fn bad_configuration_is_an_error() {
        let mut c = mpp().cfg;
        c.npe_rate = 0.0;
        assert!(Mpp::new(c.clone()).is_err());
        c.npe_rate = 1.0;
        c.transmit_buffer_octets = 10;
        assert!(Mpp::new(c).is_err());
    }

    #[test]
    fn reverse_path_refuses_frames_when_the_receive_buffer_is_full() {
        let cell_time = Duration::from_picos(2_826_667);
        let mut r = MppReverse::new(ReverseConfig {
            receive_buffer_octets: 2 * 3853,
            clock_cycle: Duration::from_nanos(25),
            bus_octets: 4,
            cell_time,
            icxt: [(7u16, 40u16)].into_iter().collect(),
        })
        .unwrap();
        let f = InFrame {
            octets: 3853,
            icn: 7,
            received: t(0),
        };
        assert!(r.handle_frame(t(0), f));
        assert!(r.handle_frame(t(0), f));
        assert!(!r.handle_frame(t(0), f));
        assert_eq!(r.counters().frames_refused, 1);
        let done = r.poll_timeout().unwrap();
        assert_eq!(
            done,
            t(0) + Duration::from_nanos(23_925) + cell_time.saturating_mul(85)
        );
        r.handle_timeout(done);
        let Some(ReverseEvent::Sent { vci, cells, .. }) = r.poll_event() else {
            panic!()
        };
        assert_eq!((vci, cells), (40, 85));
        assert_eq!(r.occupancy(), 3853);
        assert!(r.handle_frame(done, f));
    }
}
