//! The `gateway` model kind: paper 004's system (Figs. 6, 7 and 9) as three blocks of the
//! engine, wired through ports.
//!
//! - [`AtmNetwork`] (Fig. 8, "Traffic Model"): N bursty sources, one per active
//!   connection, feeding an infinite FIFO served at the ATM link rate. Each source numbers
//!   its cells and sets the F bit on the last cell of every segment of `segment_cells`.
//! - [`Gateway`] (Fig. 9): the AIC, the SPP ([`super::spp::Spp`]), the MPP and NPE
//!   ([`super::mpp::Mpp`]) and the transmit buffer in the forward direction; the receive
//!   buffer, reverse MPP and SPP fragmentation ([`super::mpp::MppReverse`]) in the
//!   reverse direction.
//! - [`Ring`] (Fig. 12): the FDDI ring ([`super::fddi::TimedTokenRing`]) with the gateway
//!   as station 0, and the other stations' traffic generators: Poisson background frames
//!   between themselves (1 Mb/s each in §6.1) and, for §6.5, bursty frames addressed to
//!   the gateway (ATM hosts).
//!
//! Metrics (names in [`METRICS`]), measured after the warm-up:
//! `offered_load_mbps` (the ATM sources' cells, 53 octets each), `throughput_mbps` (the
//! carried load: data octets of the gateway's frames sent on the ring; below the
//! threshold it is 45/53 of the offered load, the paper's "15 percent difference"),
//! `cell_loss_probability` (cells the SPP dropped over cells it received),
//! `frame_loss_probability` (segments lost over segments decided: dropped by the MPP as
//! `InError`, or never reaching it because no cell found a queue), `latency_mean` and
//! `latency_p99` (§3: from the arrival of the first cell of a frame that is reassembled
//! without error until the frame's last bit leaves on the ring), buffer occupancies
//! (time averages; transmit and receive buffers in full-size frames), `npe_utilization`,
//! token rotation mean and maximum, rotations beyond 2 x TTRT, and the reverse path's
//! offered load, throughput, frame loss (receive buffer full), receive buffer occupancy
//! (mean and maximum) and latency.
//!
//! This module holds the configuration, its parsing, the messages and the
//! [`GatewayKind`]; each block has its own file (`atm_network.rs`, `gateway.rs`,
//! `ring.rs`), and `run.rs` builds and runs one replication ([`run_replication`]).

use std::collections::BTreeMap;

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication};
use atmlab_sim::scenario::{Params, RunConfig};

use super::fddi::{RingConfig, TimedTokenRing};
use super::mpp::{FDDI_OVERHEAD_OCTETS, Mpp, MppConfig, ReverseConfig};
use super::sar::{CELL_OCTETS, DATA_OCTETS};
use super::spp::{Spp, SppCell, SppConfig};

mod atm_network;
mod gateway;
mod ring;
mod run;
#[cfg(test)]
mod tests;

pub use atm_network::AtmNetwork;
pub use gateway::Gateway;
pub use ring::Ring;
pub use run::run_replication;

/// The VCI of connection 0 (the others follow).
pub const FIRST_VCI: u16 = 32;
/// The gateway's station number on the ring.
pub const GATEWAY_STATION: u16 = 0;

const STREAM_SOURCE: u64 = 100;
const STREAM_BACKGROUND: u64 = 200;
const STREAM_REVERSE: u64 = 300;

/// Everything the model's parameters say.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// Active connections (Table 2: 8).
    pub connections: u16,
    /// Total average ATM bandwidth offered, bits/s of 53-octet cells (0: none).
    pub offered_load: f64,
    /// Λp/Λa of every source.
    pub peak_to_average: f64,
    /// B, in cells (see [`crate::source::Bursty`]).
    pub burst_factor: f64,
    /// Cells per segment (Table 3's "Frame Size Assembled").
    pub segment_cells: u32,
    /// The ATM link rate, bits/s.
    pub atm_link: f64,
    /// The hardware clock cycle.
    pub clock_cycle: Duration,
    /// R, NPE requests per second.
    pub npe_rate: f64,
    /// Reassembly queues per connection.
    pub reassembly_queues: u16,
    /// The largest FDDI frame, octets (Table 2: 4096).
    pub max_fddi_frame: u32,
    /// The "maximum size FDDI frame" in which the transmit and receive buffers are
    /// counted, octets.
    pub full_frame: u32,
    /// Transmit buffer, in full frames.
    pub transmit_buffer: f64,
    /// Receive buffer, in full frames.
    pub receive_buffer: f64,
    /// The ring.
    pub ring: RingConfig,
    /// The asynchronous priority of the gateway's frames.
    pub priority: u8,
    /// Background load per other station, bits/s.
    pub background_load: f64,
    /// Background frame size, octets.
    pub background_frame: u32,
    /// Total load the other stations send to the gateway, bits/s (0: none).
    pub reverse_load: f64,
    /// Their peak-to-average ratio.
    pub reverse_peak_to_average: f64,
    /// Their burst factor, in frames.
    pub reverse_burst_factor: f64,
    /// Their frame size, octets on the ring.
    pub reverse_frame: u32,
}

impl GatewayConfig {
    fn cell_time(&self) -> Duration {
        Duration::from_secs_f64(f64::from(CELL_OCTETS * 8) / self.atm_link)
    }

    fn vci(i: u16) -> u16 {
        FIRST_VCI + i
    }

    /// Destination station of connection `i` (the ICN table): spread over the others.
    fn dest(&self, i: u16) -> u16 {
        let others = (self.ring.stations - 1) as u16;
        1 + i % others
    }

    fn spp_config(&self) -> SppConfig {
        SppConfig {
            vcis: (0..self.connections).map(Self::vci).collect(),
            queues_per_connection: self.reassembly_queues,
            queue_cells: (self.max_fddi_frame - FDDI_OVERHEAD_OCTETS) / DATA_OCTETS,
            segment_cells: self.segment_cells,
        }
    }

    fn mpp_config(&self) -> MppConfig {
        MppConfig {
            npe_rate: self.npe_rate,
            clock_cycle: self.clock_cycle,
            bus_octets: 4,
            transmit_buffer_octets: (self.transmit_buffer * f64::from(self.full_frame)) as u64,
            max_frame_octets: self.segment_cells * DATA_OCTETS + FDDI_OVERHEAD_OCTETS,
            icn_table: (0..self.connections)
                .map(|i| (Self::vci(i), self.dest(i)))
                .collect(),
        }
    }

    fn reverse_config(&self) -> ReverseConfig {
        ReverseConfig {
            receive_buffer_octets: (self.receive_buffer * f64::from(self.full_frame)) as u64,
            clock_cycle: self.clock_cycle,
            bus_octets: 4,
            cell_time: self.cell_time(),
            icxt: (1..self.ring.stations as u16)
                .map(|s| (s, FIRST_VCI + 1000 + s))
                .collect(),
        }
    }

    /// Checks everything the blocks' constructors do not.
    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 || self.connections > 1000 {
            return Err(format!(
                "connections must be 1..=1000, got {}",
                self.connections
            ));
        }
        if self.offered_load > 0.0 && self.peak_to_average <= 1.0 {
            return Err(format!(
                "peak_to_average must exceed 1 (a burst exceeds the average), got {}",
                self.peak_to_average
            ));
        }
        if self.offered_load >= self.atm_link {
            return Err(format!(
                "offered_load {} b/s must stay below the ATM link's {} b/s: the network FIFO is infinite and would grow without bound",
                self.offered_load, self.atm_link
            ));
        }
        if self.max_fddi_frame < FDDI_OVERHEAD_OCTETS + DATA_OCTETS || self.max_fddi_frame > 4500 {
            return Err(format!(
                "max_fddi_frame must be {}..=4500 octets, got {}",
                FDDI_OVERHEAD_OCTETS + DATA_OCTETS,
                self.max_fddi_frame
            ));
        }
        let seg = u64::from(self.segment_cells) * u64::from(DATA_OCTETS)
            + u64::from(FDDI_OVERHEAD_OCTETS);
        if self.segment_cells == 0 || seg > u64::from(self.max_fddi_frame) {
            return Err(format!(
                "segment_cells {} makes a {seg}-octet FDDI frame, above max_fddi_frame {}",
                self.segment_cells, self.max_fddi_frame
            ));
        }
        if !(self.transmit_buffer.is_finite()
            && self.transmit_buffer * f64::from(self.full_frame) >= seg as f64)
        {
            return Err("transmit_buffer must hold at least one segment's frame".into());
        }
        if self.reverse_load > 0.0 {
            if self.reverse_peak_to_average <= 1.0 {
                return Err("reverse.peak_to_average must exceed 1".into());
            }
            if !(self.receive_buffer.is_finite()
                && self.receive_buffer * f64::from(self.full_frame)
                    >= f64::from(self.reverse_frame))
            {
                return Err("receive_buffer must hold at least one reverse frame".into());
            }
            if self.reverse_frame <= FDDI_OVERHEAD_OCTETS
                || self.reverse_frame > self.max_fddi_frame
            {
                return Err(format!(
                    "reverse.frame must be {}..={} octets",
                    FDDI_OVERHEAD_OCTETS + 1,
                    self.max_fddi_frame
                ));
            }
        }
        if self.background_load > 0.0
            && (self.background_frame == 0 || self.background_frame > 4500)
        {
            return Err("background.frame must be 1..=4500 octets".into());
        }
        if self.priority > 7 {
            return Err(format!(
                "fddi.priority must be 0..=7, got {}",
                self.priority
            ));
        }
        Ok(())
    }
}

/// The messages of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GwMsg {
    /// To [`AtmNetwork`]: source `0` emits.
    SourceArrival(u16),
    /// To [`Gateway`]: a cell leaves the ATM FIFO and reaches the AIC.
    Cell(SppCell),
    /// To [`Gateway`]: the MPP's timer.
    MppTimer,
    /// To [`Gateway`]: the reverse path's timer.
    ReverseTimer,
    /// To [`Gateway`]: a frame of `octets` left the transmit buffer; its first cell
    /// arrived at `first` (picoseconds).
    Transmitted {
        /// Octets on the ring.
        octets: u32,
        /// First cell's arrival, picoseconds.
        first: u64,
    },
    /// To [`Gateway`]: a frame from station `icn` arrived.
    ReverseFrame {
        /// Octets on the ring.
        octets: u32,
        /// Its ICN (the sending station, for the ICXT look-up).
        icn: u16,
    },
    /// To [`Ring`]: the gateway writes a frame into its transmit buffer.
    Enqueue {
        /// Octets on the ring.
        octets: u32,
        /// Destination station.
        dest: u16,
        /// First cell's arrival, picoseconds.
        first: u64,
    },
    /// To [`Ring`]: the ring's timer.
    RingTimer,
    /// To [`Ring`]: station `0`'s background generator emits.
    Background(u16),
    /// To [`Ring`]: station `0`'s generator of traffic for the gateway emits.
    Reverse(u16),
}

/// The metrics, in order.
pub const METRICS: &[&str] = &[
    "offered_load_mbps",
    "throughput_mbps",
    "cell_loss_probability",
    "frame_loss_probability",
    "latency_mean",
    "latency_p99",
    "reassembly_occupancy",
    "transmit_buffer_occupancy",
    "atm_fifo_delay",
    "npe_utilization",
    "token_rotation_mean",
    "token_rotation_max",
    "token_violations",
    "reverse_offered_mbps",
    "reverse_throughput_mbps",
    "reverse_frame_loss_probability",
    "receive_buffer_occupancy",
    "receive_buffer_max",
    "reverse_latency_mean",
];

impl Prepared for GatewayConfig {
    fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let carried = self.offered_load * f64::from(DATA_OCTETS) / f64::from(CELL_OCTETS);
        if carried > self.ring.bit_rate {
            // The same text at every such point, so that a sweep past the ring's rate
            // (§6.1's figures go to 140 Mb/s) gives one line (runner::prepare groups
            // them); the points' offered loads say by how much.
            w.push(format!(
                "the offered data rate (45/53 of the offered load) exceeds the FDDI ring's {:.0} Mb/s: the gateway must lose cells",
                self.ring.bit_rate / 1e6
            ));
        }
        w
    }

    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        run_replication(self, rep)
    }
}

/// The `gateway` model kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatewayKind;

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "connections",
        doc: "active ATM connections, one bursty source each (Table 2: 8)",
    },
    ParamDoc {
        key: "offered_load",
        doc: "total average ATM bandwidth, e.g. \"80 Mb/s\" (53-octet cells; 0 for none)",
    },
    ParamDoc {
        key: "peak_to_average",
        doc: "each source's peak over average bandwidth (> 1)",
    },
    ParamDoc {
        key: "burst_factor",
        doc: "B, the mean excess cells of an active period (see source::Bursty)",
    },
    ParamDoc {
        key: "segment_cells",
        doc: "cells per MCHIP segment (Table 3: 85)",
    },
    ParamDoc {
        key: "atm_link",
        doc: "ATM link rate (Table 2: \"150 Mb/s\")",
    },
    ParamDoc {
        key: "clock_cycle",
        doc: "hardware clock (Table 2: \"25 ns\"); copies move 4 octets per cycle",
    },
    ParamDoc {
        key: "npe_rate",
        doc: "R, NPE requests served per second, e.g. \"100 /ms\"",
    },
    ParamDoc {
        key: "reassembly_queues",
        doc: "reassembly queues (maximum-size frames) per connection (2)",
    },
    ParamDoc {
        key: "max_fddi_frame",
        doc: "largest FDDI frame in octets (Table 2: 4096); a queue holds (max - 28)/45 cells",
    },
    ParamDoc {
        key: "full_frame",
        doc: "octets of the \"maximum size FDDI frame\" that buffer sizes count (3853: an 85-cell segment plus 28)",
    },
    ParamDoc {
        key: "transmit_buffer",
        doc: "transmit buffer, in full frames (Table 3: 16)",
    },
    ParamDoc {
        key: "receive_buffer",
        doc: "receive buffer, in full frames (§6.5: 16)",
    },
    ParamDoc {
        key: "fddi",
        doc: "{ rate = \"100 Mb/s\", stations = 4, ttrt = \"50 ms\", hop_latency = \"2.5 us\", priority = 7, sync_allocation = \"0 s\" }",
    },
    ParamDoc {
        key: "background",
        doc: "{ load = \"1 Mb/s\" per other station (Poisson frames), frame = octets }",
    },
    ParamDoc {
        key: "reverse",
        doc: "{ load = total to the gateway, peak_to_average, burst_factor (frames), frame = octets }",
    },
];

fn integer(p: &Params<'_>, key: &str, lo: f64, hi: f64) -> Result<f64, SimError> {
    let x = p.number(key)?;
    if x.fract() != 0.0 || x < lo || x > hi {
        return Err(p.error(key, format!("expected an integer in {lo}..={hi}, got {x}")));
    }
    Ok(x)
}

fn positive(p: &Params<'_>, key: &str) -> Result<f64, SimError> {
    let x = p.number(key)?;
    if x <= 0.0 {
        return Err(p.error(key, format!("must be greater than zero, got {x}")));
    }
    Ok(x)
}

/// Reads a [`GatewayConfig`] from a scenario's parameters.
pub fn parse_config(p: &Params<'_>) -> Result<GatewayConfig, SimError> {
    let connections = integer(p, "connections", 1.0, 1000.0)? as u16;
    let offered_load = p.bit_rate("offered_load")?;
    let peak_to_average = positive(p, "peak_to_average")?;
    let burst_factor = positive(p, "burst_factor")?;
    let segment_cells = integer(p, "segment_cells", 1.0, 16384.0)? as u32;
    let atm_link = p.bit_rate("atm_link")?;
    if atm_link <= 0.0 {
        return Err(p.error("atm_link", "must be greater than zero"));
    }
    let clock_cycle = p.duration("clock_cycle")?;
    if clock_cycle == Duration::ZERO {
        return Err(p.error("clock_cycle", "must be longer than zero"));
    }
    let npe_rate = p.positive_rate("npe_rate")?;
    let reassembly_queues = integer(p, "reassembly_queues", 1.0, 64.0)? as u16;
    let max_fddi_frame = integer(p, "max_fddi_frame", 1.0, 4500.0)? as u32;
    let full_frame = integer(p, "full_frame", 1.0, 4500.0)? as u32;
    let transmit_buffer = positive(p, "transmit_buffer")?;
    let receive_buffer = positive(p, "receive_buffer")?;

    let f = p.table("fddi")?;
    let bit_rate = f.bit_rate("rate")?;
    let stations = integer(&f, "stations", 2.0, 1000.0)? as usize;
    let ttrt = f.duration("ttrt")?;
    let hop_latency = f.duration("hop_latency")?;
    let priority = integer(&f, "priority", 0.0, 7.0)? as u8;
    let sync = f.duration("sync_allocation")?;
    f.finish()?;
    let mut ring = RingConfig::new(stations, ttrt, bit_rate, hop_latency);
    if sync > Duration::ZERO {
        // The gateway's frames are asynchronous (the paper: "all the traffic is
        // asynchronous"); an allocation given here goes to the other stations.
        ring.sync_allocation = (0..stations)
            .map(|s| if s == 0 { Duration::ZERO } else { sync })
            .collect();
    }
    TimedTokenRing::new(ring.clone(), Instant::ZERO).map_err(|e| p.error("fddi", e.to_string()))?;

    let b = p.table("background")?;
    let background_load = b.bit_rate("load")?;
    let background_frame = integer(&b, "frame", 1.0, 4500.0)? as u32;
    b.finish()?;

    let r = p.table("reverse")?;
    let reverse_load = r.bit_rate("load")?;
    let reverse_peak_to_average = positive(&r, "peak_to_average")?;
    let reverse_burst_factor = positive(&r, "burst_factor")?;
    let reverse_frame = integer(&r, "frame", 1.0, 4500.0)? as u32;
    r.finish()?;

    let cfg = GatewayConfig {
        connections,
        offered_load,
        peak_to_average,
        burst_factor,
        segment_cells,
        atm_link,
        clock_cycle,
        npe_rate,
        reassembly_queues,
        max_fddi_frame,
        full_frame,
        transmit_buffer,
        receive_buffer,
        ring,
        priority,
        background_load,
        background_frame,
        reverse_load,
        reverse_peak_to_average,
        reverse_burst_factor,
        reverse_frame,
    };
    cfg.validate().map_err(|m| p.error("-", m))?;
    // The blocks' own checks, so that a bad point fails when the scenario is loaded.
    Spp::new(cfg.spp_config()).map_err(|x| p.error("segment_cells", x.to_string()))?;
    Mpp::new(cfg.mpp_config()).map_err(|x| p.error("transmit_buffer", x.to_string()))?;
    Ok(cfg)
}

/// The unit of each metric (`sim run`'s table and plot axes; `*` ends a prefix).
const METRIC_UNITS: &[(&str, &str)] = &[
    ("offered_load_mbps", "Mb/s"),
    ("throughput_mbps", "Mb/s"),
    ("cell_loss_probability", "ratio"),
    ("frame_loss_probability", "ratio"),
    ("latency_mean", "s"),
    ("latency_p99", "s"),
    ("reassembly_occupancy", "cells"),
    ("transmit_buffer_occupancy", "frames"),
    ("atm_fifo_delay", "s"),
    ("npe_utilization", "ratio"),
    ("token_rotation_mean", "s"),
    ("token_rotation_max", "s"),
    ("token_violations", "rotations"),
    ("reverse_offered_mbps", "Mb/s"),
    ("reverse_throughput_mbps", "Mb/s"),
    ("reverse_frame_loss_probability", "ratio"),
    ("receive_buffer_occupancy", "frames"),
    ("receive_buffer_max", "frames"),
    ("reverse_latency_mean", "s"),
];

impl ModelKind for GatewayKind {
    fn name(&self) -> &'static str {
        "gateway"
    }
    fn summary(&self) -> &'static str {
        "paper 004's ATM-FDDI gateway: bursty ATM sources, SPP reassembly, MPP/NPE, transmit buffer, timed-token FDDI ring, reverse path"
    }
    fn parameters(&self) -> &'static [ParamDoc] {
        PARAMS
    }
    fn metrics(&self) -> &'static [&'static str] {
        METRICS
    }
    fn metric_unit(&self, name: &str) -> Option<&'static str> {
        atmlab_sim::model::unit_in(METRIC_UNITS, name)
    }
    fn prepare(
        &self,
        params: &Params<'_>,
        _run: &RunConfig,
    ) -> Result<Box<dyn Prepared>, SimError> {
        Ok(Box::new(parse_config(params)?))
    }
}

/// The ICN table of a configuration, VCI to destination station (for tests and docs).
pub fn icn_table(cfg: &GatewayConfig) -> BTreeMap<u16, u16> {
    cfg.mpp_config().icn_table
}
