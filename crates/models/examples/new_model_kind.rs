//! How to write a new model kind for the simulator: a worked example.
//!
//! The model: a Poisson stream of ATM cells offered to a usage-parameter-control policer,
//! the continuous-state leaky bucket of ITU-T I.371 (the GCRA in its bucket form). The
//! bucket drains at the contract's rate; a cell that finds room for one more unit
//! conforms and fills it by one, a cell that does not is non-conforming (tagged or
//! dropped) and leaves the bucket as it was. The model counts the conforming cells.
//!
//! A model kind has four parts, each shown below:
//!
//! 1. the **components** (blocks) and the **message** type they exchange, as in any model
//!    built on [`atmlab_sim::component`];
//! 2. a **configuration** read from the scenario's `[params]` through
//!    [`atmlab_sim::scenario::Params`] (every key the model does not read is an error, so a
//!    typo never falls back to a default);
//! 3. [`atmlab_sim::model::Prepared`]: builds one replication from its seed and number,
//!    runs it and returns its metrics;
//! 4. [`atmlab_sim::model::ModelKind`]: the name used in scenario files, the documented
//!    parameters and metrics, and `prepare`, which validates the parameters of one point.
//!
//! [`atmlab_sim::runner::run`] then does the rest: sweeps, replications in parallel,
//! confidence intervals. To make the kind available to `atmlab sim run`, add it to
//! `atmlab_models::registry`; here it is run directly.
//!
//! Run it: `cargo run -p atmlab-models --example new_model_kind`.

use atmlab_core::time::{Duration, Instant};
use atmlab_sim::SimError;
use atmlab_sim::component::{Component, ComponentId, Ctx, InPort, Simulation};
use atmlab_sim::model::{ModelKind, ParamDoc, Prepared, RepResult, Replication};
use atmlab_sim::rng::{RngFactory, SimRng, exp1};
use atmlab_sim::runner::{RunOptions, run};
use atmlab_sim::scenario::{Params, RunConfig, RunLength, Scenario, Warmup};
use atmlab_sim::stats::Tally;

/// The scenario, as a user would write it in a file. `duration` includes the warm-up;
/// the sweep runs every value of `bucket` as its own point, each with 4 replications.
/// Short enough for a debug build.
const SCENARIO: &str = r#"
model = "policer"

[run]
duration = "10 s"
warmup = "1 s"
replications = 4
seed = 1

[params]
rate = "1000 /s"          # offered cells, Poisson
contract_rate = "1100 /s" # the rate the bucket drains at (the contract's sustainable rate)
bucket = 4                # the bucket's depth, in cells (the burst tolerance)

[sweep]
bucket = [1, 4, 16]
"#;

// ---------------------------------------------------------------------------------------
// 1. Messages and components
// ---------------------------------------------------------------------------------------

/// Everything the blocks say to each other. One type per model: here two messages.
#[derive(Debug, Clone, Copy)]
enum Msg {
    /// The source's own timer: time to emit the next cell.
    Emit,
    /// A cell, from the source to the policer.
    Cell,
}

/// The policer's one input port.
const CELLS_IN: InPort = InPort(0);
/// The source's timer port (a component's timers arrive on one of its own ports).
const TIMER: InPort = InPort(0);

/// A Poisson cell source: exponential gaps of mean `1/rate`.
struct Source {
    rate: f64,
    /// Its own RNG stream, so that its draws depend on nothing else in the model.
    rng: SimRng,
    /// Where its cells go.
    policer: ComponentId,
}

impl Source {
    fn arm(&mut self, ctx: &mut Ctx<'_, Msg>) {
        let gap = Duration::from_secs_f64(exp1(&mut self.rng) / self.rate);
        ctx.timer(gap, TIMER, Msg::Emit);
    }
}

impl Component<Msg> for Source {
    // Called once before the first event: schedule the first cell.
    fn init(&mut self, ctx: &mut Ctx<'_, Msg>) {
        self.arm(ctx);
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Msg>, _port: InPort, _msg: Msg) {
        // Send the cell now (it reaches the policer at this same instant), then draw the
        // next gap.
        ctx.send(self.policer.port(CELLS_IN.0), Msg::Cell);
        self.arm(ctx);
    }
}

/// The leaky-bucket policer, and what it measures.
struct Policer {
    /// Drain rate, cells per second.
    contract_rate: f64,
    /// Depth, cells.
    bucket: f64,
    /// The fill when the last cell was seen, and when that was.
    fill: f64,
    last: Instant,
    /// Statistics: cleared at the end of the warm-up by `reset_stats`.
    observed_from: Instant,
    cells: u64,
    conforming: u64,
    /// The fill each cell found (after draining), for its mean.
    fill_seen: Tally,
}

impl Component<Msg> for Policer {
    fn handle(&mut self, ctx: &mut Ctx<'_, Msg>, _port: InPort, _msg: Msg) {
        let now = ctx.now();
        // Drain since the last cell, then test for room for one cell.
        let drained = (now - self.last).as_secs_f64() * self.contract_rate;
        self.fill = (self.fill - drained).max(0.0);
        self.last = now;
        self.fill_seen.record(self.fill);
        self.cells += 1;
        if self.fill + 1.0 <= self.bucket {
            self.fill += 1.0;
            self.conforming += 1;
        }
    }

    // The warm-up is over: forget the statistics, keep the state (the bucket's fill).
    fn reset_stats(&mut self, now: Instant) {
        self.observed_from = now;
        self.cells = 0;
        self.conforming = 0;
        self.fill_seen.reset();
    }
}

// ---------------------------------------------------------------------------------------
// 2. The configuration, read from `[params]`
// ---------------------------------------------------------------------------------------

/// One point's parameters, validated.
#[derive(Debug, Clone)]
struct PolicerConfig {
    rate: f64,
    contract_rate: f64,
    bucket: f64,
}

fn parse_config(p: &Params<'_>) -> Result<PolicerConfig, SimError> {
    // `positive_rate` reads "1000 /s", "60 cells/s" or a bare number, and names the key
    // in its error.
    let rate = p.positive_rate("rate")?;
    let contract_rate = p.positive_rate("contract_rate")?;
    let bucket = p.number("bucket")?;
    if bucket < 1.0 {
        return Err(p.error(
            "bucket",
            format!("must hold at least one cell, got {bucket}"),
        ));
    }
    Ok(PolicerConfig {
        rate,
        contract_rate,
        bucket,
    })
}

// ---------------------------------------------------------------------------------------
// 3. One replication
// ---------------------------------------------------------------------------------------

/// The metrics, in the order every replication reports them.
const METRICS: &[&str] = &["offered_rate", "conforming_fraction", "mean_fill_seen"];

fn model_error(message: &str) -> SimError {
    SimError::Model {
        model: "policer".into(),
        message: message.into(),
    }
}

impl Prepared for PolicerConfig {
    // Shown before the run: a contract below the offered rate must reject cells.
    fn warnings(&self) -> Vec<String> {
        if self.contract_rate < self.rate {
            vec!["the contract rate is below the offered rate: cells must be rejected".into()]
        } else {
            Vec::new()
        }
    }

    // Called from worker threads, once per (point, replication). Everything random comes
    // from streams keyed by (seed, replication, stream), so the results do not depend on
    // the number of threads or the order the jobs run in.
    fn run(&self, rep: &Replication) -> Result<RepResult, SimError> {
        let RunLength::Duration(length) = rep.length else {
            return Err(model_error("this model runs by time: set [run] duration"));
        };
        let Warmup::Time(warmup) = rep.warmup else {
            return Err(model_error("give the warm-up as a time, e.g. \"1 s\""));
        };
        if rep.batches > 1 {
            return Err(model_error("batch means are not supported"));
        }
        let rngs = RngFactory::new(rep.seed, rep.replication);

        // Build the block diagram: the policer first, so that the source can be wired to
        // its id.
        let mut sim: Simulation<Msg> = Simulation::new();
        let policer = sim.add(Policer {
            contract_rate: self.contract_rate,
            bucket: self.bucket,
            fill: 0.0,
            last: Instant::ZERO,
            observed_from: Instant::ZERO,
            cells: 0,
            conforming: 0,
            fill_seen: Tally::new(),
        });
        sim.add(Source {
            rate: self.rate,
            rng: rngs.stream(0),
            policer,
        });

        // Warm-up, statistics reset, measured period.
        sim.run_until(Instant::ZERO + warmup, None)?;
        sim.reset_stats();
        let end = Instant::ZERO + length;
        sim.run_until(end, None)?;

        // Read the policer back and turn its counts into the metrics.
        let p = sim
            .component::<Policer>(policer)
            .ok_or_else(|| model_error("the policer is missing"))?;
        let measured = (end - p.observed_from).as_secs_f64();
        Ok(RepResult {
            metrics: vec![
                ("offered_rate", p.cells as f64 / measured),
                (
                    "conforming_fraction",
                    p.conforming as f64 / p.cells.max(1) as f64,
                ),
                ("mean_fill_seen", p.fill_seen.mean()),
            ],
            events: sim.events_processed(),
            simulated: length,
            truncation: None,
            batch_metrics: Vec::new(),
        })
    }
}

// ---------------------------------------------------------------------------------------
// 4. The model kind
// ---------------------------------------------------------------------------------------

struct PolicerKind;

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "rate",
        doc: "offered cell rate, Poisson, e.g. \"1000 /s\"",
    },
    ParamDoc {
        key: "contract_rate",
        doc: "the bucket's drain rate (the contract's sustainable rate), e.g. \"1100 /s\"",
    },
    ParamDoc {
        key: "bucket",
        doc: "the bucket's depth in cells (at least 1)",
    },
];

impl ModelKind for PolicerKind {
    fn name(&self) -> &'static str {
        "policer"
    }
    fn summary(&self) -> &'static str {
        "a Poisson cell stream through a leaky-bucket policer (example)"
    }
    fn parameters(&self) -> &'static [ParamDoc] {
        PARAMS
    }
    fn metrics(&self) -> &'static [&'static str] {
        METRICS
    }
    // Validate one point's parameters. The runner calls this for every sweep point before
    // anything runs, so a bad point fails at once; it then checks that no key was left
    // unread.
    fn prepare(
        &self,
        params: &Params<'_>,
        _run: &RunConfig,
    ) -> Result<Box<dyn Prepared>, SimError> {
        Ok(Box::new(parse_config(params)?))
    }
}

// ---------------------------------------------------------------------------------------
// Running it
// ---------------------------------------------------------------------------------------

fn main() -> Result<(), SimError> {
    // Parse the scenario (the last argument takes `--set key=value` overrides).
    let scenario = Scenario::parse("policer.toml", SCENARIO, &[])?;
    let report = run(
        &scenario,
        &PolicerKind,
        &RunOptions {
            threads: 2,
            progress: None,
        },
    )?;
    for w in &report.warnings {
        println!("warning: {w}");
    }
    // One block per sweep point: the swept values, then each metric as its mean over the
    // replications with the half-width of its 95 % confidence interval.
    for point in &report.points {
        let at: Vec<String> = point
            .swept
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        println!(
            "{} ({} replications)",
            at.join(", "),
            point.replications.len()
        );
        for (name, e) in &point.metrics {
            println!("  {name:<20} {:>10.4} ± {:.4}", e.mean, e.ci95);
        }
    }
    // A check against theory: with a one-cell bucket, a cell conforms exactly when it comes
    // at least T = 1/contract_rate after the last conforming cell. After each conforming
    // cell the Poisson stream waits T, then the next cell conforms, so conforming cells
    // come at 1/(T + 1/rate) per second: a fraction 1/(1 + rate·T) of the offered ones.
    println!(
        "theory for bucket = 1: conforming_fraction {:.4}",
        1.0 / (1.0 + 1000.0 / 1100.0)
    );
    println!(
        "{} events over {} jobs on {} threads",
        report.events, report.jobs_run, report.threads
    );
    Ok(())
}
