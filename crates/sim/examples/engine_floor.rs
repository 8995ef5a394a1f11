//! The engine alone: what an event costs with (almost) no model around it.
//!
//! One typed component with two FIFO lanes, each holding one event at a time (the shape
//! of the M/M/1 station: an arrival lane and a departure lane); its handler draws a gap
//! from a 64-bit LCG and reschedules the event in its lane. Everything else the M/M/1
//! benchmark does (exponential draws, statistics, the waiting line) is absent, so the
//! difference between the two is the model's share (docs/performance.md).
//!
//! `cargo run --release -p atmlab-sim --example engine_floor -- [EVENTS] [RUNS]`

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::component::{Component, Ctx, InPort, Simulation};
use atmlab_sim::event_set::LaneId;

/// A message of the pair's two kinds, two words like the M/M/1 station's.
#[derive(Debug, Clone, Copy)]
struct Msg {
    lane: u64,
    count: u64,
}

struct TwoLanes {
    lanes: [LaneId; 2],
    lcg: u64,
    handled: u64,
    /// Reads every message's second word, as a model would.
    checksum: u64,
}

impl TwoLanes {
    /// The message of `lane` (0 or 1), at `at`. Each lane is written out in its own branch,
    /// as the M/M/1 station schedules arrivals and departures from different places.
    #[inline(always)]
    fn send(&mut self, ctx: &mut Ctx<'_, Msg>, lane: u64, at: Instant) {
        let msg = Msg {
            lane,
            count: self.handled,
        };
        // Lane times rise by construction; a refusal would show as a stalled run.
        if lane == 0 {
            let me = ctx.me().port(0);
            let _ = ctx.send_in_lane(self.lanes[0], at, me, msg);
        } else {
            let me = ctx.me().port(1);
            let _ = ctx.send_in_lane(self.lanes[1], at, me, msg);
        }
    }
}

impl Component<Msg> for TwoLanes {
    fn init(&mut self, ctx: &mut Ctx<'_, Msg>) {
        self.send(ctx, 0, ctx.now());
        self.send(ctx, 1, ctx.now());
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Msg>, _port: InPort, msg: Msg) {
        self.lcg = self
            .lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.handled += 1;
        self.checksum ^= msg.count;
        let gap = Duration::from_picos((self.lcg >> 40) + 1);
        self.send(ctx, msg.lane, ctx.now() + gap);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let events: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let runs: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    for _ in 0..runs {
        let mut sim: Simulation<Msg, TwoLanes> = Simulation::typed();
        let lanes = [sim.new_lane(), sim.new_lane()];
        let id = sim.add_typed(TwoLanes {
            lanes,
            lcg: 1,
            handled: 0,
            checksum: 0,
        });
        let t = std::time::Instant::now();
        let outcome = sim.run_until(Instant::MAX, Some(events)).expect("runs");
        assert_eq!(outcome, atmlab_sim::component::RunOutcome::Budget);
        let wall = t.elapsed().as_secs_f64();
        let checksum = sim.component::<TwoLanes>(id).map_or(0, |c| c.checksum);
        println!(
            "{:.1} M events/s  ({} events, {wall:.4} s, checksum {checksum:x})",
            sim.events_processed() as f64 / wall / 1e6,
            sim.events_processed()
        );
    }
}
