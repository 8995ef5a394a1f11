//! The model kind `backbone`: paper 003, section 3, "Congestion Control and Delay for
//! MMPP Traffic" (Figures 6-11).
//!
//! Two peripheral networks, LAN1 and LAN2, each offer the aggregate of many ON-OFF
//! sources, modelled as a two-state MMPP (the paper's \[1\]). Each enters the backbone
//! through a peripheral node that applies the access-control mechanism (Leaky Bucket,
//! Virtual Clock or RDMA) and sends on a 150 Mb/s link to the internal node C3, where
//! both flows contend for the one output link towards C4 ("Both flows contend for the
//! same output link at C3 node"). Every node has a 20,000-cell buffer.
//!
//! * **One routing tree** (Figure 6): both LANs send to LAN4; their RDMA bands coincide
//!   and C3's band for the tree is the same half cycle ("the internal RDMA node
//!   continues with only 50% of the total available cycle for this band").
//! * **Two routing trees** (Figure 7): LAN1 sends to LAN3 and LAN2 to LAN4, and their
//!   bands "do not overlap in time"; C3 opens each tree's band when the periphery does.
//! * Leaky Bucket and Virtual Clock sit at the periphery only; C3 is then a plain FIFO
//!   with the whole link ("all capacity of output links at internal nodes is available"),
//!   so the number of trees does not change them.
//!
//! Band synchronization: the paper makes every link delay a whole number of cycles, so a
//! cell sent at cycle phase t reaches the next node at phase t. Here a cell that starts
//! at the periphery at t arrives at C3 at t + one cycle, for every mechanism.
//!
//! Dimensioning (section 3): the mechanisms are configured for a load of 50% of the link
//! (`dimension_load`) whatever the offered load: the RDMA band is that share of the cycle
//! rounded down to whole cell times (22 cells of 2.83 µs, 62.2 µs, of the 125 µs cycle;
//! see [`crate::access::Rdma`] for why a band admits the cells that start in it),
//! the Leaky Bucket's credit rate is C = 1.4 times that mean rate with a pool of one mean
//! burst (100 cells), the Virtual Clock's AR is that mean rate with AI = 0.1 ms and a
//! penalty of at most 0.1 ms (5 ms in one curve of Figure 11): a penalized cell is held
//! until it would pass the check, for at most that bound, and never dropped by the
//! mechanism (the paper's reading, see [`crate::access::VirtualClock`]); it can still be
//! lost when the peripheral buffer is full.
//!
//! # The MMPP of an aggregate
//!
//! The paper gives the sources (peak 10 Mb/s, mean 1 Mb/s, mean burst 100 cells) but not
//! the fitted MMPP. We fit a two-state MMPP to the superposition of N = load·link/mean
//! independent ON-OFF sources by matching the mean, variance, third central moment and
//! decay rate of the aggregate *rate* process (a binomial number of active sources,
//! with autocorrelation e^−(α+β)τ, α and β the OFF→ON and ON→OFF rates of one source):
//! the two-point distribution {λ0, λ1} with P(λ1) = q takes q from the binomial's
//! skewness, (1 − 2q)/√(q(1 − q)) = (1 − 2p)/√(N p (1 − p)) with p = mean/peak, and
//! λ1 − λ0 from its variance; the chain switches with r01 = q(α + β), r10 = (1 − q)(α +
//! β). This is in the spirit of Baiocchi et al.'s fit (which matches the same
//! statistics of the active-source count) and keeps λ0 ≥ 0 for the loads used.
//!
//! Metrics, per periphery node (the two are statistically alike; both are pooled) and
//! for C3:
//! - `periphery_loss`, `internal_loss`: cells lost over cells offered to the node;
//! - `periphery_lost_per_s`, `internal_lost_per_s`: cells lost per second at a node (the
//!   paper plots "the average number of rejected cells");
//! - `periphery_occupancy`, `internal_occupancy`: mean number of cells waiting (by
//!   Little's law, summed waits over the period);
//! - `periphery_delay`: mean access delay at the periphery, generation to transmission
//!   start (Figure 11), over the cells the periphery sent;
//! - `internal_delay`: mean wait at C3 of the cells C3 sent on;
//! - `delivered_delay`: mean queueing delay, periphery wait plus C3 wait, of the cells C3
//!   sent on (the fixed link delays left out): a reading of Figure 11 that counts the
//!   whole path of a delivered cell;
//! - `carried_load`: cells leaving C3 per second over the link's cell rate.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, Ctx, InPort, Simulation};
use atmlab_sim::event_set::{EventId, LaneId};
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication};
use atmlab_sim::rng::{RngFactory, SimRng};
use atmlab_sim::scenario::{Params, RunConfig};
use atmlab_sim::stats::Tally;

use crate::ModelsError;
use crate::access::{
    Band, BandKind, Decision, LeakyBucket, LeakyBucketMode, Rdma, RdmaConfig, RdmaMode,
    VirtualClock, VirtualClockPenalty,
};
use crate::source::{Mmpp2, TrafficSource};

/// Bits in a cell (53 octets).
const CELL_BITS: f64 = 424.0;

/// The parameters of an MMPP-2 (rates per second).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MmppFit {
    /// Arrival rate in state 0 (the low state), cells/s.
    pub rate0: f64,
    /// Arrival rate in state 1 (the high state), cells/s.
    pub rate1: f64,
    /// Switching rate 0→1.
    pub r01: f64,
    /// Switching rate 1→0.
    pub r10: f64,
}

impl MmppFit {
    /// The fit described in the module doc for `n` ON-OFF sources of `peak` and `mean`
    /// cells/s and a mean burst of `burst` cells. `n` may be fractional (a load that is
    /// not a whole number of sources).
    pub fn on_off_aggregate(n: f64, peak: f64, mean: f64, burst: f64) -> Result<Self, ModelsError> {
        let bad = |param, reason: String| ModelsError::InvalidParameter {
            model: "MmppFit",
            param,
            reason,
        };
        if !(n.is_finite() && n > 0.0) {
            return Err(bad(
                "sources",
                format!("need a positive number of sources, got {n}"),
            ));
        }
        if !(peak.is_finite() && mean.is_finite() && mean > 0.0 && mean < peak) {
            return Err(bad("mean", format!("need 0 < mean {mean} < peak {peak}")));
        }
        if !(burst.is_finite() && burst >= 1.0) {
            return Err(bad(
                "burst",
                format!("need a mean burst of at least one cell, got {burst}"),
            ));
        }
        let p = mean / peak;
        let beta = peak / burst; // ON -> OFF: mean ON time burst/peak
        let alpha = beta * p / (1.0 - p); // OFF -> ON, so that the ON fraction is p
        let var = n * peak * peak * p * (1.0 - p);
        let skew = (1.0 - 2.0 * p) / (n * p * (1.0 - p)).sqrt();
        // (1 - 2q)^2 = s^2 q (1 - q), the root below 1/2 for s > 0.
        let s2 = skew * skew;
        let q = if skew.abs() < 1e-12 {
            0.5
        } else {
            let (a, b) = (4.0 + s2, -(4.0 + s2));
            let disc = (b * b - 4.0 * a).max(0.0);
            let lo = (-b - disc.sqrt()) / (2.0 * a);
            if skew > 0.0 { lo } else { 1.0 - lo }
        };
        let spread = (var / (q * (1.0 - q))).sqrt();
        let m = n * mean;
        let rate0 = (m - q * spread).max(0.0);
        let rate1 = rate0 + spread;
        let sum = alpha + beta;
        Ok(MmppFit {
            rate0,
            rate1,
            r01: q * sum,
            r10: (1.0 - q) * sum,
        })
    }

    /// The mean rate π0·λ0 + π1·λ1.
    pub fn mean_rate(&self) -> f64 {
        let s = self.r01 + self.r10;
        (self.r10 * self.rate0 + self.r01 * self.rate1) / s
    }
}

/// The mechanism at the periphery.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BackboneMechanism {
    /// RDMA at the periphery and at C3, with `trees` routing trees (1 or 2).
    Rdma {
        /// 1: both LANs to one destination; 2: one tree each, bands not overlapping.
        trees: u8,
        /// The collision mode at every node.
        mode: RdmaMode,
    },
    /// Leaky Bucket shapers at the periphery.
    LeakyBucket {
        /// The overdimensioning factor C.
        c: f64,
        /// The credit pool B.
        pool: u32,
    },
    /// Virtual Clock at the periphery.
    VirtualClock {
        /// The overdimensioning factor C applied to AR.
        c: f64,
        /// AI.
        interval: Duration,
        /// The longest penalty delay.
        max_delay: Duration,
    },
}

/// The model's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackboneConfig {
    /// The MMPP each LAN offers.
    pub mmpp: MmppFit,
    /// The mechanism.
    pub mechanism: BackboneMechanism,
    /// The mean rate (cells/s) the mechanisms are dimensioned for.
    pub dimension_rate: f64,
    /// The share of the link that rate is (the RDMA band's share of the cycle).
    pub dimension_share: f64,
    /// The RDMA cycle (also the synchronized link delay).
    pub cycle: Duration,
    /// The cell time on every link.
    pub cell_time: Duration,
    /// Cells C3 may hold waiting.
    pub buffer: usize,
    /// Cells each peripheral node may hold waiting (the paper: the same as C3).
    pub periphery_buffer: usize,
}

/// Messages of the model (to itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackboneMsg {
    /// LAN `0` generates `1` cells.
    Generate(u8, u32),
    /// The periphery mechanism of LAN `0` asked to be woken.
    Wake(u8),
    /// A cell of LAN `0`, generated at picosecond `1`, reaches C3.
    AtC3(u8, u64),
}

const PORT: InPort = InPort(0);

enum PeriMech {
    Lb(LeakyBucket),
    Vc(VirtualClock),
    Rdma(Box<Rdma>),
}

/// One peripheral node: its LAN's MMPP, the mechanism, the link to C3.
struct Periphery {
    source: Mmpp2,
    rng: SimRng,
    arrivals: LaneId,
    to_c3: LaneId,
    mech: PeriMech,
    /// LB and VC: when the link to C3 is next free (RDMA models its link itself).
    link_free: Instant,
    wake: Option<(Instant, EventId)>,
}

/// Per-node statistics of the current batch.
#[derive(Debug, Clone, Default)]
struct NodeStats {
    offered: u64,
    lost: u64,
    waiting_secs: f64,
    delay: Tally,
}

impl NodeStats {
    fn reset(&mut self) {
        *self = NodeStats::default();
    }
}

enum Internal {
    Fifo { free: Instant },
    Rdma(Box<Rdma>),
}

/// The whole backbone as one component: two peripheries and C3.
pub struct Backbone {
    peri: [Periphery; 2],
    c3: Internal,
    cell_time: Duration,
    cycle: Duration,
    buffer: usize,
    periphery_buffer: usize,
    /// Cells waiting in C3's RDMA core: (periphery wait + arrival at C3) by identifier,
    /// so that a release gives the cell's whole queueing delay.
    c3_waiting: std::collections::HashMap<u64, (u64, u64)>,
    c3_next_id: u64,
    observe_from: Instant,
    batch_from: Instant,
    peri_stats: NodeStats,
    c3_stats: NodeStats,
    c3_sent: u64,
    /// Periphery wait plus C3 wait of each cell C3 sent on (the fixed link delays left
    /// out): the queueing delay of a delivered cell.
    delivered_delay: Tally,
}

impl Backbone {
    fn new(
        cfg: &BackboneConfig,
        rngs: &RngFactory,
        lanes: [LaneId; 4],
    ) -> Result<Self, ModelsError> {
        let half = |lan: u8| -> Result<Band, ModelsError> {
            let trees = match cfg.mechanism {
                BackboneMechanism::Rdma { trees, .. } => trees,
                _ => 1,
            };
            // The band is the dimensioned share of the cycle rounded down to whole cell
            // times (at least one): a band admits the cells that start in it, so a band
            // of 62.5 us with 2.83 us cells would admit 23 cells taking 65 us, and the
            // two trees' bands, which tile the cycle, would collide at C3.
            let share = (cfg.cycle.as_picos() as f64) * cfg.dimension_share;
            let cells = (share / cfg.cell_time.as_picos() as f64).floor().max(1.0) as u64;
            let len =
                Duration::from_picos((cells * cfg.cell_time.as_picos()).min(cfg.cycle.as_picos()));
            // Two trees: LAN2's band follows LAN1's, so they do not overlap.
            let (tree, start) = if trees == 2 && lan == 1 {
                (1, len)
            } else {
                (0, Duration::ZERO)
            };
            Ok(Band {
                tree,
                start,
                len,
                kind: BandKind::Contention,
            })
        };
        let mk = |lan: u8| -> Result<Periphery, ModelsError> {
            let mech = match cfg.mechanism {
                BackboneMechanism::LeakyBucket { c, pool } => {
                    PeriMech::Lb(LeakyBucket::with_overdimensioning(
                        cfg.dimension_rate,
                        c,
                        pool,
                        LeakyBucketMode::Shaper {
                            buffer: Some(cfg.periphery_buffer),
                        },
                    )?)
                }
                BackboneMechanism::VirtualClock {
                    c,
                    interval,
                    max_delay,
                } => PeriMech::Vc(VirtualClock::with_overdimensioning(
                    cfg.dimension_rate,
                    c,
                    interval,
                    VirtualClockPenalty::Delay { max: max_delay },
                )?),
                BackboneMechanism::Rdma { mode, .. } => {
                    PeriMech::Rdma(Box::new(Rdma::new(RdmaConfig {
                        cycle: cfg.cycle,
                        bands: vec![half(lan)?],
                        mode,
                        cell_time: cfg.cell_time,
                        buffer: Some(cfg.periphery_buffer),
                    })?))
                }
            };
            Ok(Periphery {
                source: Mmpp2::new(
                    cfg.mmpp.rate0,
                    cfg.mmpp.rate1,
                    cfg.mmpp.r01,
                    cfg.mmpp.r10,
                    Instant::ZERO,
                )?,
                rng: rngs.stream(u64::from(lan)),
                arrivals: lanes[usize::from(lan)],
                to_c3: lanes[2 + usize::from(lan)],
                mech,
                link_free: Instant::ZERO,
                wake: None,
            })
        };
        let c3 = match cfg.mechanism {
            BackboneMechanism::Rdma { mode, trees } => {
                let mut bands = vec![half(0)?];
                if trees == 2 {
                    bands.push(half(1)?);
                }
                Internal::Rdma(Box::new(Rdma::new(RdmaConfig {
                    cycle: cfg.cycle,
                    bands,
                    mode,
                    cell_time: cfg.cell_time,
                    buffer: Some(cfg.buffer),
                })?))
            }
            _ => Internal::Fifo {
                free: Instant::ZERO,
            },
        };
        Ok(Backbone {
            peri: [mk(0)?, mk(1)?],
            c3,
            cell_time: cfg.cell_time,
            cycle: cfg.cycle,
            buffer: cfg.buffer,
            periphery_buffer: cfg.periphery_buffer,
            c3_waiting: std::collections::HashMap::new(),
            c3_next_id: 0,
            observe_from: Instant::ZERO,
            batch_from: Instant::ZERO,
            peri_stats: NodeStats::default(),
            c3_stats: NodeStats::default(),
            c3_sent: 0,
            delivered_delay: Tally::new(),
        })
    }

    fn schedule_next(&mut self, ctx: &mut Ctx<'_, BackboneMsg>, lan: u8) {
        let p = &mut self.peri[usize::from(lan)];
        if let Some(a) = p.source.next_arrival(&mut p.rng) {
            let me = ctx.me().port(PORT.0);
            let _ = ctx.send_in_lane(
                p.arrivals,
                a.at.max(ctx.now()),
                me,
                BackboneMsg::Generate(lan, a.units.max(1)),
            );
        }
    }

    /// A cell generated at `generated` starts on the periphery link at `start`.
    fn periphery_sent(
        &mut self,
        ctx: &mut Ctx<'_, BackboneMsg>,
        lan: u8,
        generated: Instant,
        start: Instant,
    ) {
        if generated >= self.observe_from {
            let w = start.saturating_duration_since(generated).as_secs_f64();
            self.peri_stats.delay.record(w);
            self.peri_stats.waiting_secs += w;
        }
        let p = &self.peri[usize::from(lan)];
        let me = ctx.me().port(PORT.0);
        // Synchronized bands: the next node sees the cell at the same cycle phase.
        let at = start.saturating_add(self.cycle).max(ctx.now());
        let _ = ctx.send_in_lane(
            p.to_c3,
            at,
            me,
            BackboneMsg::AtC3(lan, generated.as_picos()),
        );
    }

    /// Cells the mechanism released: onto the link (LB, VC) or already on it (RDMA).
    fn drain(&mut self, ctx: &mut Ctx<'_, BackboneMsg>, lan: u8) {
        let cell_time = self.cell_time;
        loop {
            let p = &mut self.peri[usize::from(lan)];
            let (id, ready) = match &mut p.mech {
                PeriMech::Lb(m) => m.poll_transmit(),
                PeriMech::Vc(m) => m.poll_transmit(),
                PeriMech::Rdma(m) => m.poll_transmit(),
            }
            .map_or((u64::MAX, Instant::ZERO), |x| x);
            if id == u64::MAX {
                break;
            }
            let start = match p.mech {
                PeriMech::Rdma(_) => ready,
                _ => {
                    let s = ready.max(p.link_free);
                    p.link_free = s + cell_time;
                    s
                }
            };
            self.periphery_sent(ctx, lan, Instant::from_picos(id), start);
        }
        let p = &mut self.peri[usize::from(lan)];
        let want = match &p.mech {
            PeriMech::Lb(m) => m.poll_timeout(),
            PeriMech::Vc(m) => m.poll_timeout(),
            PeriMech::Rdma(m) => m.poll_timeout(),
        };
        if p.wake.map(|(t, _)| t) != want {
            if let Some((_, id)) = p.wake.take() {
                ctx.cancel(id);
            }
            if let Some(t) = want
                && let Ok(id) = ctx.send_at(
                    t.max(ctx.now()),
                    ctx.me().port(PORT.0),
                    BackboneMsg::Wake(lan),
                )
            {
                p.wake = Some((t, id));
            }
        }
    }

    fn generate(&mut self, ctx: &mut Ctx<'_, BackboneMsg>, lan: u8, units: u32) {
        let now = ctx.now();
        let observed = now >= self.observe_from;
        for _ in 0..units {
            let p = &mut self.peri[usize::from(lan)];
            // The node's buffer holds the mechanism's waiting cells and, for LB and VC,
            // the cells queued for the link.
            let link_backlog =
                p.link_free.saturating_duration_since(now).as_picos() / self.cell_time.as_picos();
            let held = match &p.mech {
                PeriMech::Lb(m) => m.occupancy(),
                PeriMech::Vc(m) => m.occupancy(),
                PeriMech::Rdma(m) => m.occupancy(),
            } as u64;
            let decision = if held + link_backlog >= self.periphery_buffer as u64 {
                Decision::Dropped
            } else {
                let id = now.as_picos();
                match &mut p.mech {
                    PeriMech::Lb(m) => m.handle_cell(now, id),
                    PeriMech::Vc(m) => m.handle_cell(now, id),
                    PeriMech::Rdma(m) => {
                        let tree = m.config().bands[0].tree;
                        m.handle_cell(now, id, tree, u32::from(lan))
                    }
                }
            };
            if observed {
                self.peri_stats.offered += 1;
            }
            match decision {
                Decision::PassNow | Decision::Tagged => {
                    let start = match p.mech {
                        PeriMech::Rdma(_) => now,
                        _ => {
                            let s = now.max(p.link_free);
                            p.link_free = s + self.cell_time;
                            s
                        }
                    };
                    self.periphery_sent(ctx, lan, now, start);
                }
                Decision::Queued => {}
                Decision::Dropped => {
                    if observed {
                        self.peri_stats.lost += 1;
                    }
                }
            }
            // Cells released by this arrival's catch-up go out in order.
            self.drain(ctx, lan);
        }
    }

    fn at_c3(&mut self, now: Instant, lan: u8, generated: u64) {
        let observed = Instant::from_picos(generated) >= self.observe_from;
        // The cell left its periphery one cycle ago (synchronized links).
        let peri_wait = now
            .as_picos()
            .saturating_sub(self.cycle.as_picos())
            .saturating_sub(generated);
        if observed {
            self.c3_stats.offered += 1;
        }
        let cell_time = self.cell_time;
        match &mut self.c3 {
            Internal::Fifo { free } => {
                let backlog = free.saturating_duration_since(now).as_picos() / cell_time.as_picos();
                if backlog >= self.buffer as u64 {
                    if observed {
                        self.c3_stats.lost += 1;
                    }
                    return;
                }
                let start = now.max(*free);
                *free = start + cell_time;
                if observed {
                    let w = (start - now).as_secs_f64();
                    self.c3_stats.waiting_secs += w;
                    self.c3_stats.delay.record(w);
                    self.delivered_delay
                        .record(w + Duration::from_picos(peri_wait).as_secs_f64());
                    self.c3_sent += 1;
                }
            }
            Internal::Rdma(r) => {
                let tree = match r.config().bands.len() {
                    1 => 0,
                    _ => u16::from(lan),
                };
                let id = self.c3_next_id;
                self.c3_next_id += 1;
                match r.handle_cell(now, id, tree, u32::from(lan)) {
                    Decision::PassNow | Decision::Tagged => {
                        if observed {
                            self.c3_stats.delay.record(0.0);
                            self.delivered_delay
                                .record(Duration::from_picos(peri_wait).as_secs_f64());
                            self.c3_sent += 1;
                        }
                    }
                    Decision::Queued => {
                        if observed {
                            self.c3_waiting.insert(id, (peri_wait, now.as_picos()));
                        }
                    }
                    Decision::Dropped => {
                        if observed {
                            self.c3_stats.lost += 1;
                        }
                    }
                }
                self.collect_c3();
            }
        }
    }

    /// C3's RDMA releases, computed lazily: nothing downstream needs them on time.
    fn collect_c3(&mut self) {
        if let Internal::Rdma(r) = &mut self.c3 {
            while let Some((id, start)) = r.poll_transmit() {
                // Only observed cells are in the map.
                if let Some((peri_wait, arrived)) = self.c3_waiting.remove(&id) {
                    let w = start
                        .saturating_duration_since(Instant::from_picos(arrived))
                        .as_secs_f64();
                    self.c3_stats.waiting_secs += w;
                    self.c3_stats.delay.record(w);
                    self.delivered_delay
                        .record(w + Duration::from_picos(peri_wait).as_secs_f64());
                    self.c3_sent += 1;
                }
            }
            while let Some((id, _)) = r.poll_discard() {
                if self.c3_waiting.remove(&id).is_some() {
                    self.c3_stats.lost += 1;
                }
            }
        }
    }

    fn metrics(&mut self, now: Instant) -> Vec<(&'static str, f64)> {
        if let Internal::Rdma(r) = &mut self.c3 {
            r.handle_timeout(now);
        }
        self.collect_c3();
        let secs = now.saturating_duration_since(self.batch_from).as_secs_f64();
        let ratio = |lost: u64, offered: u64| {
            if offered == 0 {
                f64::NAN
            } else {
                lost as f64 / offered as f64
            }
        };
        let per_s = |x: f64| if secs > 0.0 { x / secs } else { f64::NAN };
        let link_cells = 1.0 / self.cell_time.as_secs_f64();
        vec![
            (
                "periphery_loss",
                ratio(self.peri_stats.lost, self.peri_stats.offered),
            ),
            (
                "periphery_lost_per_s",
                per_s(self.peri_stats.lost as f64 / 2.0),
            ),
            (
                "periphery_occupancy",
                per_s(self.peri_stats.waiting_secs / 2.0),
            ),
            ("periphery_delay", self.peri_stats.delay.mean()),
            (
                "internal_loss",
                ratio(self.c3_stats.lost, self.c3_stats.offered),
            ),
            ("internal_lost_per_s", per_s(self.c3_stats.lost as f64)),
            ("internal_occupancy", per_s(self.c3_stats.waiting_secs)),
            ("internal_delay", self.c3_stats.delay.mean()),
            ("delivered_delay", self.delivered_delay.mean()),
            ("carried_load", per_s(self.c3_sent as f64) / link_cells),
        ]
    }

    fn start_batch(&mut self, now: Instant) {
        self.batch_from = now;
        self.peri_stats.reset();
        self.c3_stats.reset();
        self.c3_sent = 0;
        self.delivered_delay.reset();
    }
}

impl Component<BackboneMsg> for Backbone {
    fn init(&mut self, ctx: &mut Ctx<'_, BackboneMsg>) {
        self.schedule_next(ctx, 0);
        self.schedule_next(ctx, 1);
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, BackboneMsg>, _port: InPort, msg: BackboneMsg) {
        match msg {
            BackboneMsg::Generate(lan, units) => {
                self.generate(ctx, lan, units);
                self.schedule_next(ctx, lan);
            }
            BackboneMsg::Wake(lan) => {
                let now = ctx.now();
                let p = &mut self.peri[usize::from(lan)];
                p.wake = None;
                match &mut p.mech {
                    PeriMech::Lb(m) => m.handle_timeout(now),
                    PeriMech::Vc(m) => m.handle_timeout(now),
                    PeriMech::Rdma(m) => m.handle_timeout(now),
                }
                self.drain(ctx, lan);
            }
            BackboneMsg::AtC3(lan, generated) => self.at_c3(ctx.now(), lan, generated),
        }
    }

    fn reset_stats(&mut self, now: Instant) {
        // Cells generated before the warm-up's end are not observed anywhere.
        self.observe_from = now;
        self.start_batch(now);
    }
}

impl Prepared for BackboneConfig {
    fn warnings(&self) -> Vec<String> {
        let offered = self.mmpp.mean_rate() * self.cell_time.as_secs_f64();
        if offered > 1.0 {
            vec![format!(
                "each LAN offers {offered:.2} of its link: the periphery is overloaded whatever the mechanism"
            )]
        } else {
            Vec::new()
        }
    }

    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        let model_err = |e: ModelsError| SimError::Model {
            model: "backbone".into(),
            message: e.to_string(),
        };
        let rngs = RngFactory::new(rep.seed, rep.replication);
        // The model's only block: held by value, its handler is inlined into the run loop
        // (see `atmlab_sim::component`, "Components known at build time").
        let mut sim: Simulation<_, Backbone> = Simulation::typed();
        let lanes = [
            sim.new_lane(),
            sim.new_lane(),
            sim.new_lane(),
            sim.new_lane(),
        ];
        let id = sim.add_typed(Backbone::new(self, &rngs, lanes).map_err(model_err)?);
        crate::batched::run_by_duration::<_, _, Backbone>(&mut sim, id, rep, "backbone")
    }
}

/// The `backbone` model kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct BackboneKind;

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "load",
        doc: "offered load of each LAN, as a share of the link (e.g. 0.5)",
    },
    ParamDoc {
        key: "source",
        doc: "the ON-OFF sources aggregated into each LAN's MMPP: {peak = \"10 Mb/s\", mean = \"1 Mb/s\", burst = 100} (the defaults)",
    },
    ParamDoc {
        key: "mechanism.kind",
        doc: "rdma {trees = 1 | 2, mode = \"++\"} | leaky_bucket {c = 1.4, pool = 100} | virtual_clock {interval = \"0.1 ms\", max_delay = \"0.1 ms\", c = 1}",
    },
    ParamDoc {
        key: "dimension_load",
        doc: "the load the mechanisms are configured for, share of the link, default 0.5",
    },
    ParamDoc {
        key: "link",
        doc: "every link's rate, default \"150 Mb/s\"",
    },
    ParamDoc {
        key: "cycle",
        doc: "RDMA cycle and synchronized link delay, default \"125 us\"",
    },
    ParamDoc {
        key: "buffer",
        doc: "cells each node holds waiting, default 20000",
    },
    ParamDoc {
        key: "periphery_buffer",
        doc: "cells each peripheral node holds waiting, default the same as buffer (the paper gives one size for all nodes)",
    },
];

const METRICS: &[&str] = &[
    "periphery_loss",
    "periphery_lost_per_s",
    "periphery_occupancy",
    "periphery_delay",
    "internal_loss",
    "internal_lost_per_s",
    "internal_occupancy",
    "internal_delay",
    "delivered_delay",
    "carried_load",
];

fn share(p: &Params<'_>, key: &str, default: f64) -> Result<f64, SimError> {
    let x = p.number_or(key, default)?;
    if !(x.is_finite() && x > 0.0 && x <= 1.0) {
        return Err(p.error(
            key,
            format!("expected a share of the link in (0, 1], got {x}"),
        ));
    }
    Ok(x)
}

fn parse_mechanism(p: &Params<'_>) -> Result<BackboneMechanism, SimError> {
    let m = p.table("mechanism")?;
    let kind = m.string("kind")?;
    let c = m.number_or("c", if kind == "leaky_bucket" { 1.4 } else { 1.0 })?;
    if !(c.is_finite() && c >= 1.0) {
        return Err(m.error(
            "c",
            format!("the overdimensioning factor must be at least 1, got {c}"),
        ));
    }
    let mech = match kind {
        "rdma" => {
            if m.has("c") {
                return Err(m.error("c", "RDMA is dimensioned by its band, not by C"));
            }
            let trees = m.number_or("trees", 1.0)?;
            if trees != 1.0 && trees != 2.0 {
                return Err(m.error(
                    "trees",
                    format!("expected 1 or 2 routing trees, got {trees}"),
                ));
            }
            let mode = crate::access_link::rdma_mode(&m)?;
            BackboneMechanism::Rdma {
                trees: trees as u8,
                mode,
            }
        }
        "leaky_bucket" => {
            let pool = m.number_or("pool", 100.0)?;
            if !(pool >= 1.0 && pool <= f64::from(u32::MAX) && pool.fract() == 0.0) {
                return Err(m.error(
                    "pool",
                    format!("expected a whole number of credits, at least 1, got {pool}"),
                ));
            }
            BackboneMechanism::LeakyBucket {
                c,
                pool: pool as u32,
            }
        }
        "virtual_clock" => {
            let dur = |key: &str| -> Result<Duration, SimError> {
                if m.has(key) {
                    m.duration(key)
                } else {
                    Ok(Duration::from_picos(100_000_000))
                }
            };
            BackboneMechanism::VirtualClock {
                c,
                interval: dur("interval")?,
                max_delay: dur("max_delay")?,
            }
        }
        other => {
            return Err(m.error(
                "kind",
                format!(
                    "unknown mechanism {other:?}; expected rdma, leaky_bucket or virtual_clock"
                ),
            ));
        }
    };
    m.finish()?;
    Ok(mech)
}

/// The unit of each metric (`sim run`'s table and plot axes; `*` ends a prefix).
const METRIC_UNITS: &[(&str, &str)] = &[
    ("periphery_loss", "ratio"),
    ("periphery_lost_per_s", "cells/s"),
    ("periphery_occupancy", "cells"),
    ("periphery_delay", "s"),
    ("internal_loss", "ratio"),
    ("internal_lost_per_s", "cells/s"),
    ("internal_occupancy", "cells"),
    ("internal_delay", "s"),
    ("delivered_delay", "s"),
    ("carried_load", "ratio"),
];

impl ModelKind for BackboneKind {
    fn name(&self) -> &'static str {
        "backbone"
    }
    fn summary(&self) -> &'static str {
        "two MMPP LANs, access control at the periphery, contention at an internal node (paper 003, Figures 6-11)"
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
    fn prepare(&self, params: &Params<'_>, run: &RunConfig) -> Result<Box<dyn Prepared>, SimError> {
        crate::batched::check_run(params, run, "backbone")?;
        let link = crate::batched::link_rate(params)?;
        let load = params.number("load")?;
        if !(load.is_finite() && load > 0.0 && load <= 2.0) {
            return Err(params.error(
                "load",
                format!("expected a share of the link in (0, 2], got {load}"),
            ));
        }
        let dim = share(params, "dimension_load", 0.5)?;
        let (peak, mean, burst) = match params.raw("source") {
            None => (10e6, 1e6, 100.0),
            Some(_) => {
                let s = params.table("source")?;
                let peak = if s.has("peak") {
                    s.bit_rate("peak")?
                } else {
                    10e6
                };
                let mean = if s.has("mean") {
                    s.bit_rate("mean")?
                } else {
                    1e6
                };
                let burst = s.number_or("burst", 100.0)?;
                s.finish()?;
                (peak, mean, burst)
            }
        };
        let n = load * link / mean;
        let mmpp = MmppFit::on_off_aggregate(n, peak / CELL_BITS, mean / CELL_BITS, burst)
            .map_err(|e| params.error("source", e.to_string()))?;
        let cycle = if params.has("cycle") {
            params.duration("cycle")?
        } else {
            Duration::from_picos(125_000_000)
        };
        let buffer = params.number_or("buffer", 20_000.0)?;
        if !(buffer >= 1.0 && buffer.fract() == 0.0 && buffer < 1e9) {
            return Err(params.error(
                "buffer",
                format!("expected a whole number of cells, got {buffer}"),
            ));
        }
        let periphery_buffer = params.number_or("periphery_buffer", buffer)?;
        if !(periphery_buffer >= 1.0 && periphery_buffer.fract() == 0.0 && periphery_buffer < 1e9) {
            return Err(params.error(
                "periphery_buffer",
                format!("expected a whole number of cells, got {periphery_buffer}"),
            ));
        }
        let cfg = BackboneConfig {
            mmpp,
            mechanism: parse_mechanism(params)?,
            dimension_rate: dim * link / CELL_BITS,
            dimension_share: dim,
            cycle,
            cell_time: Duration::from_secs_f64(CELL_BITS / link),
            buffer: buffer as usize,
            periphery_buffer: periphery_buffer as usize,
        };
        // Build once so that a bad combination fails now, naming the parameters.
        let mut scratch = Simulation::<BackboneMsg>::new();
        let lanes = [(); 4].map(|_| scratch.new_lane());
        Backbone::new(&cfg, &RngFactory::new(0, 0), lanes)
            .map_err(|e| params.error("mechanism", e.to_string()))?;
        Ok(Box::new(cfg))
    }
}

impl crate::batched::Measured for Backbone {
    fn measure(&mut self, now: Instant) -> Vec<(&'static str, f64)> {
        self.metrics(now)
    }

    fn new_batch(&mut self, now: Instant) {
        self.start_batch(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmpp_fit_matches_mean_and_variance() {
        // 75 sources of 10 Mb/s peak, 1 Mb/s mean, bursts of 100 cells.
        let (peak, mean) = (10e6 / CELL_BITS, 1e6 / CELL_BITS);
        let f = MmppFit::on_off_aggregate(75.0, peak, mean, 100.0).unwrap();
        assert!((f.mean_rate() - 75.0 * mean).abs() < 1e-6 * 75.0 * mean);
        let pi1 = f.r01 / (f.r01 + f.r10);
        let var = pi1 * (1.0 - pi1) * (f.rate1 - f.rate0).powi(2);
        let want = 75.0 * peak * peak * 0.1 * 0.9;
        assert!((var - want).abs() < 1e-6 * want, "{var} {want}");
        // The decay rate of one source: 1/E[ON] + 1/E[OFF].
        let on = 100.0 / peak;
        let off = on * 9.0;
        assert!((f.r01 + f.r10 - (1.0 / on + 1.0 / off)).abs() < 1e-9);
        assert!(f.rate0 > 0.0 && pi1 < 0.5, "skewed to the right: {f:?}");
        assert!(MmppFit::on_off_aggregate(0.0, peak, mean, 100.0).is_err());
        assert!(MmppFit::on_off_aggregate(5.0, mean, peak, 100.0).is_err());
    }
}
