//! The `measured` cost profile: what a step of paper 000's control plane (§III-A: a
//! remote invocation, a switch server's work per command, the manager's own work) costs
//! on this machine's live system, measured one operation at a time, in the terms of
//! `atmlab_models::control::CostProfile`, so that the simulated control plane can run at
//! this machine's speed and be checked against the live one (the twin check, [`super`]).
//!
//! What is measured, and how each profile field comes from it:
//!
//! - **A switch server's work per command** (`switch_per_command`): a reserve or an
//!   unreserve run on a switch core in this process, no transport: the mean wall time
//!   per command.
//! - **The manager's own work per step** (`manager_step`): the xbind core (T = 1) setting
//!   up and releasing calls over switch cores in this process, no transport: the time
//!   spent in the core's own calls (a request, each answer message, a release) per input
//!   it handled.
//! - **A remote invocation**: round trips to a live switch server over the SwitchServer
//!   command stream the live manager's links use (each command one request on the
//!   stream, each answered), carrying k = 1 and k = 64 commands back to back (reserves,
//!   then the unreserves that return them), one exchange at a time. The process's CPU
//!   time (client and server are both in this process) grows with k by the marshalling
//!   of a command at both ends and the switch's work: its slope gives `per_command`,
//!   and what is left of a lone exchange's CPU, shared by its four ends, `per_message`:
//!   the work of taking up a message when its server was idle (`coalesce`: a message
//!   that finds its server busy, or every processor working, is read by a thread
//!   already awake, at no such cost).
//! - **What a message costs when the threads are awake** (`awake_message`): not
//!   measured; the profile waives it (zero), and the twin check also runs the
//!   simulation with it charged in full (`per_message`), so that the knee is given
//!   between the two. Three readings are taken beside it and reported, none fitted:
//!   a pipelined train of 64 one-command requests (each its own message, all sent
//!   before the first answer is awaited), whose CPU over the same 64 commands in one
//!   message is the cost of a message read with others in hand (`coalesce`'s waiver
//!   for a busy server); the threads that park in a lone exchange (voluntary context
//!   switches); and a thread's park and wake in isolation (two threads handing a
//!   turn). The last two would split `per_message` into its wakes and the rest, but on
//!   this machine their product exceeds a lone exchange's whole CPU (a futex hand-off
//!   is not what a wake from `epoll` on a packet costs), so the split stays open
//!   (docs/performance.md, the twin check).
//! - **The wake-up** (`wakeup`): the one number fitted. A lone exchange takes longer
//!   than its work: the threads that carry it are parked and must be scheduled, a delay
//!   that holds no processor. The live xbind manager (T = 1) sets up calls one at a
//!   time, back to back; the simulated one is run one at a time at the profile over
//!   values of `wakeup` (the delay before an idle server starts) that bracket it, and
//!   `wakeup` is chosen so that the two setups agree. Every curve under load is then a
//!   prediction.
//! - **The wake after a quiet** (`idle_wake`): the lone setup after the network has been
//!   quiet for a while is slower than back to back (0.3-0.5 ms after 5-10 ms of quiet
//!   against 0.13-0.16 ms back to back here: a processor that has slept longer takes
//!   longer to start, a virtual machine's most of all). It is measured one call at a
//!   time after each of [`QUIET_GAPS`] of quiet (from the release's answer to the next
//!   request), paced as the twin check paces its calls (an OS thread sleeps out the gap
//!   and hands the call to the runtime, which times it from there), in interleaved
//!   rounds so that the machine's drift falls on every gap alike; each gap's extra over
//!   the back-to-back setup, made non-decreasing in the gap (pooled where two readings
//!   cross), is a point of `idle_wake`. Measured, not fitted: the simulated shell
//!   charges it to a wake-up that finds the pool quiet, by how long it has been, and
//!   one call at a time only an exchange's first wake-up finds it so.
//! - **What is structure, not measured**: the client, the route object and the QoS
//!   mapper are in the manager's process (`colocated`); each link marshals on its own
//!   task (`links`); every server shares this machine's processors (`cpus`, its
//!   available parallelism). One at a time these make no difference; under load they
//!   are the prediction.
//! - **The route object and the QoS mapper**: in the live lab both are objects in the
//!   manager's process (`colocated`): a route query is timed on the route object; the
//!   manager maps no QoS (calls arrive with their cell-level contract), so `qos_work` is
//!   zero.
//!
//! The readings behind each number are returned with the profile, for the report.

use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use atmlab_core::ids::PortId;
use atmlab_core::time::Duration;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::switch::{Atomicity, Command, Reply, Reserve, Switch, Unreserve};
use atmlab_models::control::{ControlKind, CostProfile};
use atmlab_sim::model::{ModelKind, Replication};
use atmlab_sim::scenario::{Params, RunConfig, RunLength, Warmup};

use crate::LabError;
use crate::launch::Lab;
use atmlab_control::cm::live::CmHandle;

/// The owner of the probe's reservations.
const OWNER: &str = "cost-probe";
/// The quiet times before a lone setup at which `idle_wake` is measured: from a tenth of
/// a millisecond (threads parked, processors barely asleep) to 10 ms (twice the mean
/// gap of the twin check's lightest load, 200 calls/s).
pub const QUIET_GAPS: [StdDuration; 6] = [
    StdDuration::from_micros(100),
    StdDuration::from_micros(300),
    StdDuration::from_millis(1),
    StdDuration::from_millis(2),
    StdDuration::from_millis(5),
    StdDuration::from_millis(10),
];

/// The batch sizes of the round trips. `per_command` is the slope between them, a
/// difference of two CPU times that each move by 10-20% between runs: with 1 and 8
/// commands the fitted `per_command` ranged 0.65-2.5 us over six runs, and the simulated
/// knee with it (0.5 of the live one to past three times the sweep), so the noise of the
/// difference decided the prediction. Sixty-four (the live link merges up to 256)
/// spreads the two readings by some 60 commands' work; the slope is then the marginal
/// cost of a command in a train (about 0.35 us), which is far less than a command costs
/// the live system under load (docs/performance.md, the twin check).
const BATCHES: [u32; 2] = [1, 64];

/// The profile and the readings it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The profile (`name = "measured"`, `colocated`).
    pub profile: CostProfile,
    /// Per batch size k: (k, wall microseconds per round trip, process CPU
    /// microseconds per round trip).
    pub round_trips: Vec<(u32, f64, f64)>,
    /// Threads of the process that parked per lone exchange of one command.
    pub lone_parks: f64,
    /// A thread's park and wake, microseconds of CPU.
    pub wake_us: f64,
    /// A pipelined train: (k one-command requests, process CPU microseconds per train).
    pub train: (u32, f64),
    /// A switch core's work per command, microseconds.
    pub switch_command_us: f64,
    /// A route query on the route object, microseconds.
    pub route_us: f64,
    /// The xbind core's work per input it handles, microseconds.
    pub manager_step_us: f64,
    /// The live xbind T = 1 setup one call at a time, back to back (each call as soon as
    /// the last is released), mean, milliseconds: what `wakeup` is fitted to.
    pub live_setup_ms: f64,
    /// The live manager's task's and its links' tasks' time in their polls per call of
    /// those back-to-back setups (setup and release), microseconds ([`CmHandle::busy`]):
    /// reported, not used (the simulated manager's work is the core's `manager_step`).
    pub lone_tasks_us: (f64, f64),
    /// After each of [`QUIET_GAPS`] of quiet: (gap, mean setup), milliseconds; what
    /// `idle_wake` is measured from.
    pub quiet_setups: Vec<(f64, f64)>,
    /// The simulated one at the fitted profile, milliseconds.
    pub sim_setup_ms: f64,
    /// Calls the one-at-a-time figures averaged.
    pub calls: usize,
}

impl Measurement {
    /// The profile file's header: where the numbers came from.
    pub fn provenance(&self) -> String {
        let mut s = String::from(
            "The `measured` cost profile: this machine's live control plane, one operation at a\n\
             time (written by `atmlab sim measure-costs`; see `atmlab_lab::twin::measure`).\n",
        );
        for (k, wall, cpu) in &self.round_trips {
            s.push_str(&format!(
                "command-stream exchange, {k} command(s): {wall:.1} us wall, {cpu:.1} us of CPU\n"
            ));
        }
        s.push_str(&format!(
            "lone exchange: {:.2} threads parked; a park and wake: {:.2} us of CPU\n",
            self.lone_parks, self.wake_us
        ));
        s.push_str(&format!(
            "pipelined train of {} one-command requests: {:.1} us of CPU (not fitted)\n",
            self.train.0, self.train.1
        ));
        s.push_str(&format!(
            "switch core per command: {:.2} us; route query: {:.2} us; manager core per step: {:.2} us\n",
            self.switch_command_us, self.route_us, self.manager_step_us
        ));
        s.push_str(&format!(
            "xbind T=1 setup one at a time: live {:.3} ms, simulated {:.3} ms (the wake-up's fit, before idle_wake; {} calls)\n",
            self.live_setup_ms, self.sim_setup_ms, self.calls
        ));
        s.push_str(&format!(
            "xbind T=1 one at a time, back to back: the manager's task {:.1} us a call, its links' tasks {:.1} us (in their polls; not used)\n",
            self.lone_tasks_us.0, self.lone_tasks_us.1
        ));
        let after: Vec<String> = self
            .quiet_setups
            .iter()
            .map(|(gap, ms)| format!("{gap} ms {ms:.3}"))
            .collect();
        s.push_str(&format!(
            "xbind T=1 setup one at a time after a quiet (measured, not fitted): {} ms\n",
            after.join(", ")
        ));
        s
    }
}

/// The process's CPU time (user + system, all threads), seconds, from its CPU clock
/// (nanoseconds; `/proc/self/stat` counts ticks of 10 ms, too coarse for a generator's
/// probe at 200 calls/s).
fn process_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// What the process has used so far: its CPU and its threads' parks. The probes read
/// what a piece of work used as the difference of two ([`Usage::since`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Usage {
    /// CPU seconds.
    pub cpu: f64,
    /// Threads that parked.
    pub parks: u64,
}

impl Usage {
    /// The process's usage now.
    pub fn now() -> Result<Usage, LabError> {
        Ok(Usage {
            cpu: process_cpu(),
            parks: parks()?,
        })
    }

    /// What the process used since `self`.
    pub fn since(&self) -> Result<Usage, LabError> {
        let now = Usage::now()?;
        Ok(Usage {
            cpu: now.cpu - self.cpu,
            parks: now.parks.saturating_sub(self.parks),
        })
    }
}

/// The processor time of a thread's park and wake, microseconds: two threads hand a
/// turn to each other, each parked until the other unparks it (a futex wait and wake,
/// the switch of context each way), one at a time, over the parks counted
/// ([`parks`]). What a message taken up by a worker already awake does not pay
/// (`awake_message`).
fn wake_cpu() -> Result<f64, LabError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let turn = Arc::new(AtomicU64::new(0));
    let main = std::thread::current();
    let start = Usage::now()?;
    let other = {
        let turn = Arc::clone(&turn);
        std::thread::spawn(move || {
            // This thread takes the odd turns, the caller the even ones.
            for i in (1..WAKES).step_by(2) {
                while turn.load(Ordering::Acquire) != i {
                    std::thread::park();
                }
                turn.store(i + 1, Ordering::Release);
                main.unpark();
            }
        })
    };
    let thread = other.thread().clone();
    for i in (0..WAKES).step_by(2) {
        while turn.load(Ordering::Acquire) != i {
            std::thread::park();
        }
        turn.store(i + 1, Ordering::Release);
        thread.unpark();
    }
    other
        .join()
        .map_err(|_| LabError::run("the cost probe's wake-up", "a thread panicked"))?;
    let used = start.since()?;
    // Each turn not yet given when a thread looks parks it once; count them rather than
    // assume one a turn (a turn given before its thread looks costs no wake).
    Ok(used.cpu / used.parks.max(1) as f64 * 1e6)
}

/// Wakes [`wake_cpu`] times: about a second of them.
const WAKES: u64 = 200_000;

/// The voluntary context switches of every thread of the process so far: each is a
/// thread that parked (to be woken later), from `/proc/self/task/*/status`.
fn parks() -> Result<u64, LabError> {
    let err =
        |e: std::io::Error| LabError::run("reading /proc/self/task (the probe needs Linux)", e);
    let mut n = 0;
    for task in std::fs::read_dir("/proc/self/task").map_err(err)? {
        let status = match std::fs::read_to_string(task.map_err(err)?.path().join("status")) {
            Ok(s) => s,
            // A thread that ended since the listing.
            Err(_) => continue,
        };
        n += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(n)
}

fn reserves(k: u32) -> Vec<Command> {
    (0..k)
        .map(|_| {
            Command::Reserve(Reserve {
                port: PortId(1),
                count: 1,
                vpi: 0,
                vp: false,
                within: None,
                owner: OWNER.into(),
            })
        })
        .collect()
}

/// The unreserves returning what `replies` reserved, one command per identifier.
fn unreserves(replies: &[Result<Reply, atmlab_fabric::FabricError>]) -> Vec<Command> {
    replies
        .iter()
        .filter_map(|r| match r {
            Ok(Reply::Reserved(ids)) => Some(ids.clone()),
            _ => None,
        })
        .flatten()
        .map(|id| {
            Command::Unreserve(Unreserve {
                port: PortId(1),
                ids: vec![id],
                owner: OWNER.into(),
            })
        })
        .collect()
}

/// Reserve-unreserve cycles of `k` commands each on `backend` for about `span`: the
/// mean wall and process CPU seconds per message (each cycle is two messages).
async fn cycles<B: SwitchBackend>(
    backend: &B,
    k: u32,
    span: StdDuration,
) -> Result<Timed, LabError> {
    timed(k, span, async |commands| {
        backend
            .execute(commands, Atomicity::ContinueOnError)
            .await
            .map_err(|e| LabError::run("the cost probe", e))
    })
    .await
}

/// Reserve-unreserve cycles of `k` commands each through `exchange` (one message out,
/// its answers back) for about `span`, after 50 to warm the path: the mean wall and
/// process CPU seconds per message (each cycle is two messages).
async fn timed(
    k: u32,
    span: StdDuration,
    mut exchange: impl AsyncFnMut(Vec<Command>) -> Result<BatchAnswers, LabError>,
) -> Result<Timed, LabError> {
    for _ in 0..50 {
        let r = exchange(reserves(k)).await?;
        exchange(unreserves(&r)).await?;
    }
    let (t0, start) = (Instant::now(), Usage::now()?);
    let mut messages = 0u64;
    while t0.elapsed() < span {
        let r = exchange(reserves(k)).await?;
        let back = unreserves(&r);
        if back.len() != k as usize {
            return Err(LabError::run(
                "the cost probe",
                format!("{} of {k} reserves answered with an identifier", back.len()),
            ));
        }
        exchange(back).await?;
        messages += 2;
    }
    let (wall, used) = (t0.elapsed().as_secs_f64(), start.since()?);
    let m = messages as f64;
    Ok(Timed {
        wall: wall / m,
        cpu: used.cpu / m,
        parks: used.parks as f64 / m,
    })
}

/// What [`timed`] read, per message (each cycle is two).
#[derive(Debug, Clone, Copy)]
struct Timed {
    /// Wall seconds.
    wall: f64,
    /// Process CPU seconds.
    cpu: f64,
    /// Threads of the process that parked.
    parks: f64,
}

/// A SwitchServer command stream on `client`: its requests' sender (`depth` of them
/// queued at most) and its answers.
async fn open_stream(
    client: &atmlab_fabric::live::grpc::GrpcSwitch,
    depth: usize,
) -> Result<
    (
        tokio::sync::mpsc::Sender<atmlab_rpc::v1::StreamRequest>,
        tonic::Streaming<atmlab_rpc::v1::StreamReply>,
    ),
    String,
> {
    let (tx, rx) = tokio::sync::mpsc::channel(depth);
    let replies = client
        .raw()
        .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .map_err(|e| e.to_string())?
        .into_inner();
    Ok((tx, replies))
}

/// [`cycles`] over the SwitchServer command stream, as the live manager's links send:
/// the k commands of an exchange go out as one stream request (the first in its own
/// fields, the rest in `more`) and its one answer is awaited.
async fn stream_cycles(
    client: &atmlab_fabric::live::grpc::GrpcSwitch,
    k: u32,
    span: StdDuration,
) -> Result<Timed, LabError> {
    use atmlab_fabric::live::convert as cv;
    let probe = |e: String| LabError::run("the cost probe's command stream", e);
    let (tx, mut replies) = open_stream(client, 1024).await.map_err(probe)?;
    // The switch answers a repeated (client, request) pair from memory, across
    // streams: each stream its own client id.
    let client_id = format!("{OWNER}-{k}-{}", std::process::id());
    let mut next = 0u64;
    let exchange = async |commands: Vec<Command>| -> Result<BatchAnswers, LabError> {
        let n = commands.len();
        let batch: Vec<(u64, Command)> = commands
            .into_iter()
            .map(|c| {
                next += 1;
                (next, c)
            })
            .collect();
        let r = cv::stream_request(&client_id, &batch)
            .ok_or_else(|| probe("an exchange of no command".into()))?;
        tx.send(r).await.map_err(|e| probe(e.to_string()))?;
        let r = replies
            .message()
            .await
            .map_err(|e| probe(e.to_string()))?
            .ok_or_else(|| probe("the stream ended".into()))?;
        if r.result.is_none() || r.more.iter().any(|m| m.result.is_none()) {
            return Err(probe("an answer without a result".into()));
        }
        let out: BatchAnswers = cv::stream_answers(&r).map(|(_, a)| a).collect();
        if out.len() != n {
            return Err(probe(format!("{} answers to {n} commands", out.len())));
        }
        Ok(out)
    };
    timed(k, span, exchange).await
}

/// [`cycles`] over the SwitchServer command stream with each of the k commands its own
/// stream request, all k sent before the first answer is awaited (a pipelined train):
/// what a message costs when the threads that carry it are already awake.
async fn pipelined_cycles(
    client: &atmlab_fabric::live::grpc::GrpcSwitch,
    k: u32,
    span: StdDuration,
) -> Result<Timed, LabError> {
    use atmlab_fabric::live::convert as cv;
    let probe = |e: String| LabError::run("the cost probe's pipelined stream", e);
    let (tx, mut replies) = open_stream(client, 4096).await.map_err(probe)?;
    let client_id = format!("{OWNER}-train-{k}-{}", std::process::id());
    let mut next = 0u64;
    let exchange = async |commands: Vec<Command>| -> Result<BatchAnswers, LabError> {
        let n = commands.len();
        let mut ids = Vec::with_capacity(n);
        for c in commands {
            next += 1;
            ids.push(next);
            let r = cv::stream_request(&client_id, &[(next, c)])
                .ok_or_else(|| probe("an exchange of no command".into()))?;
            tx.send(r).await.map_err(|e| probe(e.to_string()))?;
        }
        let mut out: Vec<Option<Result<Reply, atmlab_fabric::FabricError>>> = vec![None; n];
        // The switch may answer several requests in one reply.
        let mut answered = 0;
        while answered < n {
            let r = replies
                .message()
                .await
                .map_err(|e| probe(e.to_string()))?
                .ok_or_else(|| probe("the stream ended".into()))?;
            for (id, a) in cv::stream_answers(&r) {
                let i = ids
                    .iter()
                    .position(|x| *x == id)
                    .ok_or_else(|| probe(format!("an answer to request {id}, not asked")))?;
                if out[i].replace(a).is_none() {
                    answered += 1;
                }
            }
        }
        out.into_iter()
            .map(|a| a.ok_or_else(|| probe("a request not answered".into())))
            .collect()
    };
    timed(k, span, exchange).await
}

type BatchAnswers = Vec<Result<Reply, atmlab_fabric::FabricError>>;

/// The simulated xbind T = 1 setup one call at a time (20 calls/s, each held 1 ms) at
/// `profile`, seconds.
fn simulated_setup(profile: &CostProfile) -> Result<f64, LabError> {
    let dir = std::env::temp_dir().join(format!("atmlab-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| LabError::run("a temporary directory", e))?;
    let file = dir.join("probe.toml");
    std::fs::write(&file, profile.to_toml(""))
        .map_err(|e| LabError::run("the probe's profile", e))?;
    let text = format!(
        r#"topology = "topologies/line3.toml"
manager = {}
arrival = {{ kind = "poisson", rate = "20 /s" }}
holding = {{ kind = "deterministic", mean = "1 ms" }}
pcr = "10 /s"
pairs = ["a:b"]
profile = {{ file = {:?} }}
"#,
        super::sim_manager(1),
        file.display().to_string()
    );
    let result = (|| {
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| LabError::run("the probe", e))?;
        let p = Params::new("the cost probe", &table);
        let run = RunConfig {
            length: RunLength::Duration(Duration::from_secs(30)),
            warmup: Warmup::Time(Duration::from_secs(1)),
            replications: 1,
            seed: 1,
            batches: None,
            precision: None,
        };
        let prepared = ControlKind.prepare(&p, &run)?;
        let r = prepared.run(&Replication {
            seed: 1,
            replication: 0,
            length: run.length,
            warmup: run.warmup,
            batches: 1,
        })?;
        r.metrics
            .iter()
            .find(|(k, _)| *k == "mean_setup_latency")
            .map(|(_, v)| *v)
            .ok_or_else(|| LabError::run("the probe", "no mean_setup_latency"))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Measures the profile on `lab` (a running network whose switch `s2` has a port 1,
/// and hosts `a` and `b`: `topologies/line3.toml`). Takes about `span` x 4 plus the
/// one-at-a-time calls.
pub async fn measure(
    lab: &Lab,
    span: StdDuration,
    calls: usize,
    say: &mut impl FnMut(&str),
) -> Result<Measurement, LabError> {
    let missing = |what: &str| LabError::run("the cost probe", format!("no {what} in the lab"));
    let (_, remote) = lab
        .clients
        .iter()
        .find(|(n, _)| n == "s2")
        .ok_or_else(|| missing("switch s2"))?;
    // A switch core like s2's, in this process.
    let cfg = lab
        .net
        .topology
        .switch_configs()
        .map_err(|e| LabError::run("the cost probe", e))?
        .into_iter()
        .find(|c| c.name == "s2")
        .ok_or_else(|| missing("switch s2"))?;
    let local = LocalSwitch::new(
        Switch::new(&cfg).map_err(|e| LabError::run("the cost probe", e))?,
        None,
    );
    let mut switch_command_us = 0.0;
    let mut round_trips = Vec::new();
    let mut lone_parks = 0.0;
    let mut train = (0, 0.0);
    for k in BATCHES {
        let t = cycles(&local, k, span / 4).await?;
        if k == BATCHES[1] {
            switch_command_us = t.wall / f64::from(k) * 1e6;
        }
        let t = stream_cycles(remote, k, span).await?;
        say(&format!(
            "command-stream exchange of {k} command(s): {:.1} us wall, {:.1} us of CPU, {:.2} parks",
            t.wall * 1e6,
            t.cpu * 1e6,
            t.parks
        ));
        if k == BATCHES[0] {
            lone_parks = t.parks;
        }
        round_trips.push((k, t.wall * 1e6, t.cpu * 1e6));
        if k > 1 {
            let p = pipelined_cycles(remote, k, span).await?;
            say(&format!(
                "pipelined train of {k} one-command requests: {:.1} us wall, {:.1} us of CPU ({:.2} us a request)",
                p.wall * 1e6,
                p.cpu * 1e6,
                p.cpu * 1e6 / f64::from(k)
            ));
            train = (k, p.cpu * 1e6);
        }
    }
    let route_us = {
        let route = Arc::clone(&lab.route);
        let t0 = Instant::now();
        let mut n = 0u32;
        while t0.elapsed() < span / 4 {
            let r = route
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .route("a", "b", 10.0);
            r.map_err(|e| LabError::run("the cost probe's route query", e))?;
            n += 1;
        }
        t0.elapsed().as_secs_f64() / f64::from(n.max(1)) * 1e6
    };
    say(&format!(
        "switch core per command: {switch_command_us:.2} us; route query: {route_us:.2} us"
    ));

    let wake_us = wake_cpu()?;
    say(&format!("a parked thread woken: {wake_us:.2} us of CPU"));

    let manager_step_us = manager_core_step(lab)?;
    say(&format!("manager core per step: {manager_step_us:.2} us"));

    // The split (see the module doc), in microseconds.
    let (k1, _, c1) = round_trips[0];
    let (k2, _, c2) = round_trips[1];
    let dk = f64::from(k2 - k1);
    let cpu_slope = ((c2 - c1) / dk).max(0.0);
    let per_command = ((cpu_slope - switch_command_us) / 2.0).max(0.0);
    let per_message = ((c1 - f64::from(k1) * cpu_slope) / 4.0).max(0.0);
    let us = |x: f64| Duration::from_secs_f64(x * 1e-6);
    let mut profile = CostProfile {
        name: "measured".into(),
        latency: Duration::ZERO,
        per_message: us(per_message),
        per_command: us(per_command),
        switch_per_command: us(switch_command_us),
        manager_step: us(manager_step_us),
        route_work: us(route_us),
        qos_work: Duration::ZERO,
        switch_threads: 1,
        colocated: true,
        links: true,
        coalesce: true,
        // Not measured (see the module doc): the twin check reports the knee both with
        // it waived (this) and charged in full.
        awake_message: Duration::ZERO,
        // The twin check measures the generator's work at each rate it simulates.
        client_work: Duration::ZERO,
        wakeup: Duration::ZERO,
        // Measured below, added after the wake-up's fit.
        idle_wake: Vec::new(),
        oneway: Duration::ZERO,
        stall_probability: 0.0,
        stall_mean: Duration::ZERO,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    };

    // The live one-at-a-time setup, back to back and after each quiet gap; the wake-up
    // is fitted to the first, `idle_wake` measured from the others.
    let cm = lab.manager(crate::launch::xbind_config(1)).await?;
    let setups = lone_setups(&cm, calls).await;
    cm.shutdown().await;
    let (live, lone_tasks_us, quiet) = setups?;
    say(&format!(
        "xbind T=1 one at a time: back to back {:.3} ms (the manager's task {:.1} us a call, its links' {:.1} us); after a quiet of {}",
        live * 1e3,
        lone_tasks_us.0,
        lone_tasks_us.1,
        quiet
            .iter()
            .map(|(gap, t)| format!("{} ms {:.3} ms", gap.as_secs_f64() * 1e3, t * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let extras = non_decreasing(
        &quiet
            .iter()
            .map(|&(_, t)| (t - live).max(0.0))
            .collect::<Vec<_>>(),
    );
    let idle_wake: Vec<(Duration, Duration)> = quiet
        .iter()
        .zip(&extras)
        .map(|(&(gap, _), &x)| (Duration::from_secs_f64(gap.as_secs_f64()), us(x * 1e6)))
        .collect();
    // The lone setup grows with the wake-up (a chain of servers woken in turn), but not
    // smoothly: where fewer of them wait once a processor is busy it stays nearly flat
    // over a few microseconds, and a secant step across such a stretch flew off to
    // 95 us. So the fit keeps a bracket [lo, hi] around the live setup and steps by
    // false position, never closer than a tenth of the bracket to either end, until the
    // simulated setup is within 1% of the live one.
    let mut sim_at = |w: f64| -> Result<f64, LabError> {
        profile.wakeup = us(w * 1e6);
        simulated_setup(&profile)
    };
    let mut lo = (0.0, sim_at(0.0)?);
    let mut hi = (20e-6, sim_at(20e-6)?);
    let per_wakeup = (hi.1 - lo.1) / hi.0;
    while hi.1 < live && hi.0 < 1e-3 {
        lo = hi;
        hi = (hi.0 * 2.0, sim_at(hi.0 * 2.0)?);
    }
    let (mut wakeup, mut fitted) = if lo.1 >= live { lo } else { hi };
    if lo.1 < live && hi.1 > live {
        for _ in 0..16 {
            if (fitted - live).abs() <= 0.01 * live {
                break;
            }
            let span = hi.0 - lo.0;
            let w = lo.0 + span * (live - lo.1) / (hi.1 - lo.1);
            wakeup = w.clamp(lo.0 + 0.1 * span, hi.0 - 0.1 * span);
            fitted = sim_at(wakeup)?;
            if fitted < live {
                lo = (wakeup, fitted);
            } else {
                hi = (wakeup, fitted);
            }
        }
        // The setup can step over the live one (a server more or less kept waiting):
        // then the nearer end of the bracket.
        if (fitted - live).abs() > 0.01 * live {
            (wakeup, fitted) = if live - lo.1 <= hi.1 - live { lo } else { hi };
        }
    }
    profile.wakeup = us(wakeup * 1e6);
    // Added after the fit: the fit's back-to-back setup finds no quiet, and its probe's
    // calls, 50 ms apart, would each find one.
    profile.idle_wake = idle_wake;
    say(&format!(
        "xbind T=1 one at a time: live {:.3} ms; simulated {:.3} ms with a wake-up of {:.2} us ({per_wakeup:.1} wake-ups a setup)",
        live * 1e3,
        fitted * 1e3,
        wakeup * 1e6
    ));
    Ok(Measurement {
        profile,
        round_trips,
        lone_parks,
        wake_us,
        train,
        switch_command_us,
        route_us,
        manager_step_us,
        live_setup_ms: live * 1e3,
        lone_tasks_us,
        quiet_setups: quiet
            .iter()
            .map(|&(gap, t)| (gap.as_secs_f64() * 1e3, t * 1e3))
            .collect(),
        sim_setup_ms: fitted * 1e3,
        calls,
    })
}

/// The live xbind T = 1 setup one call at a time, seconds: back to back (each call as
/// soon as the last is released), and after each of [`QUIET_GAPS`] of quiet, paced as
/// `callgen` paces with precise pacing (an OS thread sleeps out the gap, then hands the
/// call to the runtime, which times it from there). The gaps take turns in three
/// rounds, so that the machine's drift over the probe falls on each alike.
async fn lone_setups(
    cm: &CmHandle,
    calls: usize,
) -> Result<(f64, (f64, f64), Vec<(StdDuration, f64)>), LabError> {
    let one = async || -> Result<f64, LabError> {
        let t0 = Instant::now();
        let call = crate::launch::call_a_to_b(cm, 10.0, "probe")
            .await
            .map_err(|e| LabError::run("the probe's calls", e.message))?;
        let t = t0.elapsed().as_secs_f64();
        cm.delete(call.view.id)
            .await
            .map_err(|e| LabError::run("the probe's calls", e.message))?;
        Ok(t)
    };
    for _ in 0..20 {
        one().await?;
    }
    let mut sum = 0.0;
    let busy = cm.busy();
    for _ in 0..calls {
        sum += one().await?;
    }
    let (manager, links) = cm.busy();
    let n = calls.max(1) as f64;
    let back_to_back = sum / n;
    let tasks = (
        (manager - busy.0).as_secs_f64() / n * 1e6,
        (links - busy.1).as_secs_f64() / n * 1e6,
    );

    let (tick, mut ticks) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (go, gaps) = std::sync::mpsc::channel::<StdDuration>();
    // Ends when `go` is dropped (or the ticks' receiver is).
    std::thread::spawn(move || {
        while let Ok(gap) = gaps.recv() {
            std::thread::sleep(gap);
            if tick.send(()).is_err() {
                return;
            }
        }
    });
    const ROUNDS: usize = 3;
    let per_round = calls.div_ceil(ROUNDS).max(1);
    let mut sums = [0.0; QUIET_GAPS.len()];
    for _ in 0..ROUNDS {
        for (i, gap) in QUIET_GAPS.iter().enumerate() {
            for _ in 0..per_round {
                go.send(*gap)
                    .map_err(|e| LabError::run("the probe's pacer", e))?;
                ticks
                    .recv()
                    .await
                    .ok_or_else(|| LabError::run("the probe's pacer", "it stopped"))?;
                sums[i] += one().await?;
            }
        }
    }
    let n = (ROUNDS * per_round) as f64;
    let quiet = QUIET_GAPS
        .iter()
        .zip(sums)
        .map(|(g, s)| (*g, s / n))
        .collect();
    Ok((back_to_back, tasks, quiet))
}

/// The non-decreasing sequence nearest `y` in least squares (pool adjacent violators):
/// two readings that cross are replaced by their mean.
fn non_decreasing(y: &[f64]) -> Vec<f64> {
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for &v in y {
        blocks.push((v, 1));
        while let [.., (a, na), (b, nb)] = *blocks.as_slice()
            && a > b
        {
            blocks.truncate(blocks.len() - 2);
            let n = na + nb;
            blocks.push(((a * na as f64 + b * nb as f64) / n as f64, n));
        }
    }
    blocks
        .into_iter()
        .flat_map(|(m, n)| std::iter::repeat_n(m, n))
        .collect()
}

/// The xbind core's (T = 1, the live lab's configuration) work per input, microseconds:
/// calls set up and released one at a time over switch cores like `lab`'s, in this
/// process, the answers handed back at once; only the time inside the manager core's
/// own calls is counted (the request, each answer message with the transmissions and
/// events it leads to, the release), over the inputs it handled.
fn manager_core_step(lab: &Lab) -> Result<f64, LabError> {
    use atmlab_control::cm::core::{CallEvent, CmCore, SetupRequest};
    use atmlab_control::cm::routes::{CachedRouter, Router};
    use atmlab_core::time::Instant as At;
    use atmlab_core::traffic::TrafficDescriptor;
    use atmlab_core::units::CellRate;
    use std::collections::HashMap;

    let probe = |e: String| LabError::run("the cost probe's manager core", e);
    let mut switches: HashMap<String, Switch> = HashMap::new();
    for c in lab
        .net
        .topology
        .switch_configs()
        .map_err(|e| probe(e.to_string()))?
    {
        let sw = Switch::new(&c).map_err(|e| probe(e.to_string()))?;
        switches.insert(c.name.clone(), sw);
    }
    let mut router = CachedRouter::new(Arc::clone(&lab.route), Duration::from_secs(3600));
    let hops = router
        .route(At::ZERO, "a", "b", 10.0)
        .map_err(|e| probe(e.message))?;
    let mut core = CmCore::new(crate::launch::xbind_config(1)).map_err(|e| probe(e.into()))?;
    let mut now = At::ZERO;
    let (mut inside, mut inputs) = (StdDuration::ZERO, 0u64);
    // One input to the core, timed: `f`, then what it sends and what it tells.
    let step = |core: &mut CmCore,
                now: At,
                inside: &mut StdDuration,
                f: &mut dyn FnMut(&mut CmCore)|
     -> (Vec<atmlab_control::cm::core::Transmit>, Vec<CallEvent>) {
        let t0 = Instant::now();
        f(core);
        let mut out = Vec::new();
        while let Some(t) = core.poll_transmit(now) {
            out.push(t);
        }
        let mut events = Vec::new();
        while let Some(e) = core.poll_event() {
            events.push(e);
        }
        *inside += t0.elapsed();
        (out, events)
    };
    const WARM: u64 = 200;
    const CALLS: u64 = 2_000;
    for i in 0..WARM + CALLS {
        if i == WARM {
            (inside, inputs) = (StdDuration::ZERO, 0);
        }
        now = now.saturating_add(Duration::from_millis(1));
        let req = SetupRequest {
            routes: vec![("b".to_string(), hops.clone())],
            traffic: TrafficDescriptor::cbr(CellRate(10.0)),
            clr: 0.0,
            buffer_cells: 0,
            tag: String::new(),
        };
        let mut id = 0;
        let (mut out, mut events) = step(&mut core, now, &mut inside, &mut |c| {
            id = c.add(now, req.clone())
        });
        inputs += 1;
        for phase in 0..2 {
            // Every message answered at once, each answer message one input.
            while !out.is_empty() {
                let mut next = Vec::new();
                for t in std::mem::take(&mut out) {
                    let sw = switches
                        .get_mut(&*t.switch)
                        .ok_or_else(|| probe(format!("no switch {}", t.switch)))?;
                    let mut answers: Vec<_> =
                        t.commands.iter().map(|(r, c)| (*r, sw.apply(c))).collect();
                    let (o, e) = step(&mut core, now, &mut inside, &mut |c| {
                        for (r, a) in answers.drain(..) {
                            c.handle_reply(now, r, a);
                        }
                    });
                    inputs += 1;
                    next.extend(o);
                    events.extend(e);
                }
                out = next;
            }
            if phase == 0 {
                let up = events
                    .iter()
                    .any(|e| matches!(e, CallEvent::Established { call, .. } if *call == id));
                if !up {
                    return Err(probe(format!("call {i} was not set up: {events:?}")));
                }
                let (o, e) = step(&mut core, now, &mut inside, &mut |c| {
                    c.delete(now, id);
                });
                inputs += 1;
                (out, events) = (o, e);
            }
        }
    }
    Ok(inside.as_secs_f64() / inputs.max(1) as f64 * 1e6)
}

#[cfg(test)]
mod tests {
    use super::non_decreasing;

    /// Readings that cross are pooled into their mean; an increasing run is kept.
    #[test]
    fn crossing_readings_are_pooled() {
        assert_eq!(non_decreasing(&[1.0, 2.0, 3.0]), vec![1.0, 2.0, 3.0]);
        assert_eq!(
            non_decreasing(&[1.0, 3.0, 2.0, 4.0]),
            vec![1.0, 2.5, 2.5, 4.0]
        );
        assert_eq!(non_decreasing(&[3.0, 2.0, 1.0]), vec![2.0, 2.0, 2.0]);
        assert_eq!(non_decreasing(&[]), Vec::<f64>::new());
    }
}
