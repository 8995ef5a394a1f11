//! What the simulated control plane's steps cost (the model kind `control`): paper 000
//! §III-A and paper 001 §3.3 measured a call's cost as remote invocations over an ORB, a
//! switch server's work per command, and the manager's own work; this is that cost as
//! parameters, so that the real cores run in virtual time at the papers' speed (or this
//! machine's, or any other).
//!
//! A message costs its sender and its receiver each `per_message` plus `per_command` for
//! every command it carries (marshalling and unmarshalling, on the CPU of the server that
//! sends or receives it, so it queues behind that server's other work), and `latency` on
//! the wire. Aggregation's saving is explicit: T commands in one message pay `per_message`
//! once. A switch server also works `switch_per_command` per command; the manager works
//! `manager_step` per input it handles (a request, a reply message, a timer). The route
//! object and the QoS mapper answer after `route_work` and `qos_work` (they are queried
//! synchronously, a round trip each: the paper's steps 2 and 3).
//!
//! Named profiles (`profile = "NAME"` in a scenario), each calibrated from one-at-a-time
//! measurements only, so that every curve under load is a prediction:
//!
//! - `paper-000`: the xbind testbed (§III-A: Orbix 1.3, HP and Sun workstations on a
//!   10 Mb/s Ethernet, a path of three switch servers, which is `topologies/line3.toml`),
//!   fitted to the paper's one-at-a-time figures. Its sequential manager makes 9
//!   synchronous round trips per setup on that path (the client's call, QoS mapping,
//!   route selection, then a reserve and a commit at each of the three switches) in
//!   23.4 ms on average, 5% of setups under 20.5 ms and 5% over 31.0 ms (§III-B);
//!   xbind's manager, with its caches warm and T = 1, sets a call up in 11.0 ms at 1
//!   call/s (§IV, the abstract). We split a round trip as 2 x `latency` on the wire
//!   and, at each of the two ends, 0.25 ms per message and 0.05 ms per command of
//!   marshalling, plus 0.4 ms of the server's work, the manager's own steps 0.1 ms
//!   each. Four numbers are fitted to the four figures by `atmlab sim calibrate`
//!   ([`super::calibrate`]): the stalls (7.24% of work periods, 2.43 ms on average:
//!   the testbed's time-shared workstations), which give the sequential setup its
//!   spread; the wire's latency (0.172 ms), which puts its mean at 23.4 ms; then
//!   `oneway` (0.423 ms), what an asynchronous invocation costs each end beyond a
//!   synchronous call's share (the paper's "a single synchronous call is slightly
//!   more efficient than two asynchronous calls", §IV), so that xbind's is 11.0 ms.
//!   The rest of the split is ours (the paper gives only totals); it decides how much
//!   aggregation saves.
//! - `paper-001`: ReTINA's Table 3.3 only (§3.3): one connection-server operation at a
//!   time over JORB, client and server on one PC, 418 per second (row 9): 2.39 ms per
//!   round trip, the one calibration quantity. The split (0.19 ms of it the server's
//!   work, the rest wire and marshalling), the performers' step and the route object's
//!   work are ours: the paper gives no split for row 9 (its "90% in the ORB" is of the
//!   Alcin setup, inferred from the 28 ms that `reproduce retina` compares the model
//!   with, so it is not used). Row 15 (OrbixWeb, 600 per second, 1.67 ms) is the other
//!   reading: Alcin ran on Orbix, but in C++ on another machine, which no row measured.
//! - `fast`: round numbers of the order of a loopback RPC (tens of microseconds per
//!   message), for studies at scale.
//! - `measured`: this machine's live control plane, measured one operation at a time by
//!   `atmlab sim measure-costs` (`atmlab_lab::twin::measure`) and read from
//!   [`MEASURED_FILE`]. Its structure is the live lab's, not a testbed's: the client, the
//!   route object and the QoS mapper are in the manager's process (`colocated`), each
//!   link to a switch marshals on its own task (`links`), and every server shares this
//!   machine's processors (`cpus`). Its work is measured per command and per step, in
//!   process and in trains of commands, and per message where a lone exchange pays it;
//!   what a lone setup takes beyond that work is the time its parked threads take to be
//!   scheduled (`wakeup`, the one number fitted, to the live lone setup).
//!
//! What a busy machine saves is charged two ways, which one call at a time cannot tell
//! apart (it is never busy): `coalesce` (a message that finds its server idle, and a
//! processor of the pool idle, pays `per_message` as work; one that finds either busy
//! does not) and `wakeup` (a server that was idle starts its work that much later,
//! holding no processor). The twin check (`atmlab_lab::twin`) tests the prediction they make
//! together.

use std::path::Path;

use atmlab_core::time::Duration;
use atmlab_sim::SimError;
use atmlab_sim::rng::{SimRng, exp1};
use atmlab_sim::scenario::Params;
use rand::Rng;

/// Where `profile = "measured"` is read from: beside the scenario, else from the
/// working directory.
pub const MEASURED_FILE: &str = "profiles/measured.toml";

/// The costs of the simulated control plane's steps.
#[derive(Debug, Clone, PartialEq)]
pub struct CostProfile {
    /// Its name in reports.
    pub name: String,
    /// One-way time on the wire of any message.
    pub latency: Duration,
    /// Marshalling or unmarshalling of one message, at each end.
    pub per_message: Duration,
    /// Marshalling or unmarshalling of one command in a message, at each end.
    pub per_command: Duration,
    /// A switch server's work per command (its table update and admission control).
    pub switch_per_command: Duration,
    /// The manager's own work per input.
    pub manager_step: Duration,
    /// The route object's work per route query.
    pub route_work: Duration,
    /// The QoS mapper's work per query.
    pub qos_work: Duration,
    /// Threads of a switch server.
    pub switch_threads: u32,
    /// The client, the QoS mapper and the route object live in the manager's process
    /// (atmlab's live lab, where the call generator drives the manager in process): a
    /// user's request and its answer cross no wire, and a query costs the manager's
    /// thread `qos_work` or `route_work` and nothing else. With a shared pool (`cpus`),
    /// the caller's task takes its answer up on a processor of the pool: a setup ends
    /// when one is left free by the servers' work. False for the papers' testbeds,
    /// where each is a remote object.
    pub colocated: bool,
    /// Each of the manager's links to a switch marshals and unmarshals on its own thread
    /// (the live manager's link tasks), not on the manager's: `per_message` and
    /// `per_command` of the manager's end are the link's work. False for the papers'
    /// single-threaded ORBs, where the caller marshals.
    pub links: bool,
    /// Processors shared by every server (the manager, its links, the switch servers),
    /// as on one machine; 0 when each server has its own (the papers' testbeds, one
    /// workstation per server).
    pub cpus: u32,
    /// `per_message` is a wakeup: charged for a message that finds its server (a switch
    /// server, a link) idle, not for one that arrives while it works, which is read with
    /// the others already in hand (an event-driven server drains its socket in one
    /// system call; HTTP/2 frames share segments). With a shared pool of `cpus`, a
    /// message that arrives while every processor works is not charged either: one
    /// runtime's workers serve every server, and a worker already awake reads it. One at
    /// a time every message pays it, so the one-at-a-time calibration does not see the
    /// difference; under load it is what a busy machine saves. False for the papers'
    /// testbeds (every message paid).
    pub coalesce: bool,
    /// With `coalesce`, what a message costs that finds its own server idle while every
    /// processor of the shared pool works: its server's thread need not be woken (a
    /// worker already awake takes it up), but its reading is its own, not shared with
    /// others in hand (the socket read and the frame decoded for it alone). The
    /// `measured` profile sets it to `per_message` less the processor time of waking a
    /// parked thread, measured one wake at a time; zero (the message costs nothing, as
    /// one already in hand) in a profile that does not give it.
    pub awake_message: Duration,
    /// The call generator's own work per call on the shared processors (`cpus` > 0):
    /// atmlab's live lab drives its managers from a generator in the same process, on
    /// the same cores, whose work per call (drawing the arrival, waking to it, starting
    /// the call's task, taking its answers, its hang-up and release) the servers lose.
    /// Zero for the papers' testbeds, whose users had workstations of their own. The
    /// twin check measures it against a target that answers at once, at each rate.
    pub client_work: Duration,
    /// How long a server that is idle when work reaches it (the manager, a link, a
    /// switch server) takes to start it, holding no processor meanwhile: a parked
    /// thread being scheduled. Work that reaches a server already working or waking
    /// waits for nothing more. Zero for the papers' testbeds.
    pub wakeup: Duration,
    /// What a wake-up adds when the whole machine has been quiet (`cpus` > 0: no
    /// processor of the shared pool working for a server) for a while: points (quiet
    /// time, extra delay), increasing in quiet time, joined by straight lines from (0, 0)
    /// and flat past the last. A processor that has slept longer takes longer to start
    /// (deeper idle states; a virtual machine's processor handed back to its host), so
    /// a lone call after a long quiet is slower than one back to back. Charged, on top
    /// of `wakeup`, to a server woken while the pool is quiet, by how long it has been;
    /// the servers an exchange wakes as another's processor is released find a quiet of
    /// zero (with no wire latency, all but the first of a lone exchange). Empty (nothing
    /// added) for every profile but `measured`, which measures it one call at a time
    /// after quiet gaps.
    pub idle_wake: Vec<(Duration, Duration)>,
    /// What an asynchronous (oneway) invocation costs each end beyond its marshalling:
    /// a synchronous call is one invocation for its request and its reply, an
    /// asynchronous exchange two (paper 000 §IV: "a single synchronous call is slightly
    /// more efficient than two asynchronous calls"). Charged on the messages between an
    /// asynchronous manager (xbind) and the switch servers, on the CPU of the server (or
    /// link) that sends or receives them; a synchronous manager's calls pay none.
    pub oneway: Duration,
    /// The chance that a server's work period (a manager's step, a switch server's
    /// message, a link's marshalling) stalls: its process descheduled or its ORB slow, as
    /// on the papers' time-shared workstations. One call at a time this is the spread of
    /// the setup times; under load it makes service times vary.
    pub stall_probability: f64,
    /// The mean of a stall, exponentially distributed; the server does nothing else
    /// meanwhile.
    pub stall_mean: Duration,
}

/// How a message reached its server, which decides what taking it up costs
/// ([`CostProfile::message_cost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Its server was idle and no processor of a shared pool was free of work to take
    /// it up at once: a parked thread is woken for it (`per_message`).
    Cold,
    /// Its server was idle but every processor of the shared pool was working: a
    /// worker already awake takes it up (`awake_message`).
    Awake,
    /// Its server was working: it is read with the others already in hand (nothing).
    InHand,
}

impl Reading {
    /// The reading of a message that finds its server `idle` (or not) while the shared
    /// pool is `pool_awake` (every processor working) or not.
    pub fn of(idle: bool, pool_awake: bool) -> Reading {
        match (idle, pool_awake) {
            (false, _) => Reading::InHand,
            (true, true) => Reading::Awake,
            (true, false) => Reading::Cold,
        }
    }
}

impl CostProfile {
    /// The named profile, if there is one.
    pub fn named(name: &str) -> Option<CostProfile> {
        let ms = |x: f64| Duration::from_secs_f64(x * 1e-3);
        let us = |x: f64| Duration::from_secs_f64(x * 1e-6);
        let p = match name {
            // A synchronous round trip: 2 x (latency + 2 x 0.25 per message + 2 x 0.05 per
            // command) + 0.4 work. `latency`, `oneway` and the stalls are `atmlab sim
            // calibrate`'s fit of the paper's figures (checked by the tests
            // `paper_000_gives_the_papers_one_at_a_time_setups` and
            // `paper_000_is_the_fit_of_the_papers_one_at_a_time_setups`).
            "paper-000" => CostProfile {
                name: name.into(),
                latency: us(172.2),
                per_message: ms(0.25),
                per_command: ms(0.05),
                switch_per_command: ms(0.4),
                manager_step: ms(0.1),
                route_work: ms(0.4),
                qos_work: ms(0.4),
                switch_threads: 1,
                colocated: false,
                links: false,
                cpus: 0,
                coalesce: false,
                awake_message: Duration::ZERO,
                client_work: Duration::ZERO,
                wakeup: Duration::ZERO,
                idle_wake: Vec::new(),
                oneway: us(423.1),
                stall_probability: 0.0724,
                stall_mean: us(2431.0),
            },
            // 2.39 ms per round trip (418 operations/s over JORB, Table 3.3 row 9): 2 x
            // (0.2 + 2 x 0.4 + 2 x 0.05) + 0.19; the split is ours.
            "paper-001" => CostProfile {
                name: name.into(),
                latency: ms(0.2),
                per_message: ms(0.4),
                per_command: ms(0.05),
                switch_per_command: ms(0.19),
                manager_step: ms(0.1),
                route_work: ms(0.2),
                qos_work: ms(0.2),
                switch_threads: 1,
                colocated: false,
                links: false,
                cpus: 0,
                coalesce: false,
                awake_message: Duration::ZERO,
                client_work: Duration::ZERO,
                wakeup: Duration::ZERO,
                idle_wake: Vec::new(),
                oneway: Duration::ZERO,
                stall_probability: 0.0,
                stall_mean: Duration::ZERO,
            },
            "fast" => CostProfile {
                name: name.into(),
                latency: us(20.0),
                per_message: us(8.0),
                per_command: us(1.0),
                switch_per_command: us(2.0),
                manager_step: us(2.0),
                route_work: us(5.0),
                qos_work: us(2.0),
                switch_threads: 1,
                colocated: false,
                links: false,
                cpus: 0,
                coalesce: false,
                awake_message: Duration::ZERO,
                client_work: Duration::ZERO,
                wakeup: Duration::ZERO,
                idle_wake: Vec::new(),
                oneway: Duration::ZERO,
                stall_probability: 0.0,
                stall_mean: Duration::ZERO,
            },
            _ => return None,
        };
        Some(p)
    }

    /// A work period's stall, drawn from `rng` (nothing is drawn when the profile has
    /// no stalls, so that such a profile's other draws are as they were).
    /// Inlined as a test: most profiles have none, and every work period asks.
    #[inline]
    pub fn stall(&self, rng: &mut SimRng) -> Duration {
        if self.stall_probability > 0.0 {
            self.draw_stall(rng)
        } else {
            Duration::ZERO
        }
    }

    fn draw_stall(&self, rng: &mut SimRng) -> Duration {
        if rng.random::<f64>() < self.stall_probability {
            Duration::from_secs_f64(exp1(rng) * self.stall_mean.as_secs_f64())
        } else {
            Duration::ZERO
        }
    }

    /// What taking up one message costs its server (a switch server, or a link at the
    /// manager's end), by how it reached it (`coalesce`).
    #[inline]
    pub fn message_cost(&self, reading: Reading) -> Duration {
        match reading {
            _ if !self.coalesce => self.per_message,
            Reading::Cold => self.per_message,
            Reading::Awake => self.awake_message,
            Reading::InHand => Duration::ZERO,
        }
    }

    /// What a wake-up adds after the shared pool has been quiet for `quiet`
    /// ([`CostProfile::idle_wake`]): zero for a profile without points.
    pub fn idle_wake_at(&self, quiet: Duration) -> Duration {
        let mut prev = (Duration::ZERO, Duration::ZERO);
        for &(at, extra) in &self.idle_wake {
            if quiet <= at {
                let span = (at - prev.0).as_secs_f64();
                if span <= 0.0 {
                    return extra;
                }
                let f = (quiet - prev.0).as_secs_f64() / span;
                let (a, b) = (prev.1.as_secs_f64(), extra.as_secs_f64());
                return Duration::from_secs_f64(a + f * (b - a));
            }
            prev = (at, extra);
        }
        prev.1
    }

    /// One synchronous round trip carrying one command between two idle servers: the
    /// calibration quantity of the named profiles.
    pub fn round_trip(&self, work: Duration) -> Duration {
        let one_way = self.latency
            + self.per_message
            + self.per_message
            + self.per_command
            + self.per_command;
        one_way + one_way + work
    }

    /// The one-way time of a user's request or answer: none when the client is in the
    /// manager's process.
    pub fn client_latency(&self) -> Duration {
        if self.colocated {
            Duration::ZERO
        } else {
            self.latency
        }
    }

    /// A profile from a scenario's `profile`: a name; `"measured"`, read from
    /// [`MEASURED_FILE`] (beside the scenario, else from the working directory); a table
    /// `{ file = PATH }` naming a profile file; or an inline table of costs starting from
    /// `base` (default `paper-000`), e.g. `{ base = "fast", latency = "1 ms" }`.
    pub fn from_params(p: &Params<'_>) -> Result<CostProfile, SimError> {
        const NAMES: &str = "\"paper-000\", \"paper-001\", \"fast\", \"measured\"";
        match p.raw("profile") {
            None => Err(p.error(
                "profile",
                format!("missing: a profile name ({NAMES}) or a table of costs"),
            )),
            Some(toml::Value::String(name)) if name == "measured" => {
                CostProfile::from_file(&super::resolve(p.file(), MEASURED_FILE)).map_err(|e| {
                    p.error(
                        "profile",
                        format!("\"measured\": {e} (write it with `atmlab sim measure-costs`)"),
                    )
                })
            }
            Some(toml::Value::String(name)) => CostProfile::named(name).ok_or_else(|| {
                p.error(
                    "profile",
                    format!("no profile {name:?}: expected one of {NAMES}"),
                )
            }),
            Some(toml::Value::Table(_)) => {
                let t = p.table("profile")?;
                if t.has("file") {
                    let file = super::resolve(p.file(), t.string("file")?);
                    t.finish()?;
                    return CostProfile::from_file(&file).map_err(|e| t.error("file", e));
                }
                let mut c = CostProfile::from_table(&t)?;
                if !t.has("name") {
                    c.name = format!("{}, changed", c.name);
                }
                t.finish()?;
                Ok(c)
            }
            Some(_) => Err(p.error("profile", "expected a profile name or a table of costs")),
        }
    }

    /// A profile file (as `atmlab sim measure-costs` writes): the keys of an inline
    /// profile table at the top level.
    pub fn from_file(file: &Path) -> Result<CostProfile, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let name = file.display().to_string();
        let t = Params::new(&name, &table);
        let c = CostProfile::from_table(&t).map_err(|e| e.to_string())?;
        t.finish().map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// The costs in a table: `base` (default `paper-000`) changed by the keys given.
    fn from_table(t: &Params<'_>) -> Result<CostProfile, SimError> {
        let base = if t.has("base") {
            t.string("base")?
        } else {
            "paper-000"
        };
        let mut c = CostProfile::named(base)
            .ok_or_else(|| t.error("base", format!("no profile {base:?}")))?;
        if t.has("name") {
            c.name = t.string("name")?.to_string();
        }
        let set = |key: &str, to: &mut Duration| -> Result<(), SimError> {
            if t.has(key) {
                *to = t.duration(key)?;
            }
            Ok(())
        };
        set("latency", &mut c.latency)?;
        set("per_message", &mut c.per_message)?;
        set("per_command", &mut c.per_command)?;
        set("switch_per_command", &mut c.switch_per_command)?;
        set("manager_step", &mut c.manager_step)?;
        set("route_work", &mut c.route_work)?;
        set("qos_work", &mut c.qos_work)?;
        set("wakeup", &mut c.wakeup)?;
        set("awake_message", &mut c.awake_message)?;
        set("client_work", &mut c.client_work)?;
        set("oneway", &mut c.oneway)?;
        set("stall_mean", &mut c.stall_mean)?;
        if t.has("idle_wake") {
            c.idle_wake = idle_wake(&t.table("idle_wake")?)?;
        }
        if t.has("stall_probability") {
            let p = t.number("stall_probability")?;
            if !(0.0..=1.0).contains(&p) {
                return Err(t.error("stall_probability", "expected a probability from 0 to 1"));
            }
            c.stall_probability = p;
        }
        if t.has("switch_threads") {
            let n = t.number("switch_threads")?;
            if !(n >= 1.0 && n.fract() == 0.0 && n <= 1024.0) {
                return Err(t.error("switch_threads", "expected a whole number from 1 to 1024"));
            }
            c.switch_threads = n as u32;
        }
        c.colocated = t.bool_or("colocated", c.colocated)?;
        c.links = t.bool_or("links", c.links)?;
        c.coalesce = t.bool_or("coalesce", c.coalesce)?;
        if t.has("cpus") {
            let n = t.number("cpus")?;
            if !(n >= 0.0 && n.fract() == 0.0 && n <= 4096.0) {
                return Err(t.error("cpus", "expected a whole number from 0 (unshared) to 4096"));
            }
            c.cpus = n as u32;
        }
        if !c.idle_wake.is_empty() && c.cpus == 0 {
            return Err(t.error(
                "idle_wake",
                "needs a shared pool of processors (`cpus` above 0): it is the pool's quiet",
            ));
        }
        Ok(c)
    }

    /// The profile as a file [`CostProfile::from_file`] reads, after `comment` (lines
    /// written as TOML comments).
    pub fn to_toml(&self, comment: &str) -> String {
        let us = |d: Duration| format!("\"{:.3} us\"", d.as_secs_f64() * 1e6);
        let mut out = String::new();
        for line in comment.lines() {
            out.push_str(&format!("# {line}\n"));
        }
        out.push_str(&format!("name = {:?}\n", self.name));
        for (key, d) in [
            ("latency", self.latency),
            ("per_message", self.per_message),
            ("per_command", self.per_command),
            ("switch_per_command", self.switch_per_command),
            ("manager_step", self.manager_step),
            ("route_work", self.route_work),
            ("qos_work", self.qos_work),
            ("wakeup", self.wakeup),
            ("awake_message", self.awake_message),
            ("client_work", self.client_work),
            ("oneway", self.oneway),
            ("stall_mean", self.stall_mean),
        ] {
            out.push_str(&format!("{key} = {}\n", us(d)));
        }
        if !self.idle_wake.is_empty() {
            let list = |f: fn(&(Duration, Duration)) -> Duration| {
                let v: Vec<String> = self.idle_wake.iter().map(|p| us(f(p))).collect();
                v.join(", ")
            };
            out.push_str(&format!(
                "idle_wake = {{ quiet = [{}], extra = [{}] }}\n",
                list(|p| p.0),
                list(|p| p.1)
            ));
        }
        out.push_str(&format!("stall_probability = {}\n", self.stall_probability));
        out.push_str(&format!("switch_threads = {}\n", self.switch_threads));
        out.push_str(&format!("colocated = {}\n", self.colocated));
        out.push_str(&format!("links = {}\n", self.links));
        out.push_str(&format!("coalesce = {}\n", self.coalesce));
        out.push_str(&format!("cpus = {}\n", self.cpus));
        out
    }
}

/// `idle_wake = { quiet = [...], extra = [...] }`: the points of
/// [`CostProfile::idle_wake`], checked.
fn idle_wake(t: &Params<'_>) -> Result<Vec<(Duration, Duration)>, SimError> {
    let quiet = t.durations("quiet")?;
    let extra = t.durations("extra")?;
    t.finish()?;
    if quiet.len() != extra.len() {
        return Err(t.error(
            "extra",
            format!(
                "expected one extra delay per quiet time: {} quiet times, {} extras",
                quiet.len(),
                extra.len()
            ),
        ));
    }
    if quiet.first() == Some(&Duration::ZERO) {
        return Err(t.error(
            "quiet",
            "the first quiet time must be above zero (the extra starts from none at zero)",
        ));
    }
    if let Some(w) = quiet.windows(2).find(|w| w[1] <= w[0]) {
        return Err(t.error(
            "quiet",
            format!("the quiet times must increase: {} then {}", w[0], w[1]),
        ));
    }
    Ok(quiet.into_iter().zip(extra).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `paper-001` is calibrated to its paper's one-at-a-time round trip (`paper-000`'s
    /// fit is run by the control model's tests).
    #[test]
    fn named_profiles_have_their_papers_round_trip() {
        let p = CostProfile::named("paper-001").unwrap();
        let rt = p.round_trip(p.switch_per_command).as_secs_f64() * 1e3;
        assert!((rt - 1e3 / 418.0).abs() < 0.01, "{rt}");
        assert!(CostProfile::named("nope").is_none());
    }

    /// What taking up a message costs by how it reached its server: in full when the
    /// profile does not coalesce; with `coalesce`, in full when a thread must be woken,
    /// `awake_message` when a worker already awake takes it, nothing when it is read
    /// with others in hand.
    #[test]
    fn a_message_costs_by_how_it_reached_its_server() {
        let mut p = CostProfile::named("fast").unwrap();
        p.awake_message = Duration::from_micros(3);
        for r in [Reading::Cold, Reading::Awake, Reading::InHand] {
            assert_eq!(p.message_cost(r), p.per_message, "{r:?}");
        }
        p.coalesce = true;
        assert_eq!(p.message_cost(Reading::Cold), p.per_message);
        assert_eq!(p.message_cost(Reading::Awake), Duration::from_micros(3));
        assert_eq!(p.message_cost(Reading::InHand), Duration::ZERO);
        assert_eq!(Reading::of(false, false), Reading::InHand);
        assert_eq!(Reading::of(false, true), Reading::InHand);
        assert_eq!(Reading::of(true, true), Reading::Awake);
        assert_eq!(Reading::of(true, false), Reading::Cold);
    }

    /// A profile written to a file reads back as itself (to the file's nanosecond
    /// precision), and a bad value or key is named.
    #[test]
    fn a_profile_file_reads_back() {
        let mut p = CostProfile::named("fast").unwrap();
        p.name = "measured".into();
        p.colocated = true;
        p.links = true;
        p.coalesce = true;
        p.cpus = 2;
        p.wakeup = Duration::from_secs_f64(30.5e-6);
        p.awake_message = Duration::from_secs_f64(12.25e-6);
        p.client_work = Duration::from_secs_f64(7.5e-6);
        p.manager_step = Duration::from_secs_f64(3.25e-6);
        p.idle_wake = vec![
            (Duration::from_micros(50), Duration::from_secs_f64(20.5e-6)),
            (Duration::from_millis(5), Duration::from_micros(250)),
        ];
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.toml");
        std::fs::write(&file, p.to_toml("measured here\nby a test")).unwrap();
        assert_eq!(CostProfile::from_file(&file).unwrap(), p);
        std::fs::write(&file, "latency = \"fast\"\n").unwrap();
        let e = CostProfile::from_file(&file).unwrap_err();
        assert!(e.contains("latency"), "{e}");
        std::fs::write(&file, "lantency = \"1 ms\"\n").unwrap();
        let e = CostProfile::from_file(&file).unwrap_err();
        assert!(e.contains("lantency"), "{e}");
        for (bad, named) in [
            (
                "idle_wake = { quiet = [\"1 ms\"], extra = [] }",
                "one extra delay per quiet time",
            ),
            (
                "idle_wake = { quiet = [\"2 ms\", \"1 ms\"], extra = [\"1 us\", \"2 us\"] }",
                "must increase",
            ),
            (
                "idle_wake = { quiet = [\"1 ms\"], extra = [\"-1 us\"] }",
                "expected a duration",
            ),
            (
                "idle_wake = { quiet = [\"1 ms\"], extra = [\"1 us\"], x = 1 }",
                "x",
            ),
        ] {
            std::fs::write(&file, format!("{bad}\n")).unwrap();
            let e = CostProfile::from_file(&file).unwrap_err();
            assert!(e.contains("idle_wake") && e.contains(named), "{bad}: {e}");
        }
    }

    /// The extra delay after a quiet time: straight lines from (0, 0) through the
    /// points, flat past the last; nothing without points.
    #[test]
    fn the_idle_wake_is_interpolated_between_its_points() {
        let us = Duration::from_micros;
        let mut p = CostProfile::named("fast").unwrap();
        assert_eq!(p.idle_wake_at(Duration::from_secs(1)), Duration::ZERO);
        p.idle_wake = vec![(us(100), us(40)), (us(1_100), us(240))];
        let at = |q: u64| p.idle_wake_at(us(q)).as_secs_f64() * 1e6;
        for (q, want) in [
            (0, 0.0),
            (50, 20.0),
            (100, 40.0),
            (600, 140.0),
            (1_100, 240.0),
        ] {
            assert!(
                (at(q) - want).abs() < 1e-6,
                "{q} us: {} against {want}",
                at(q)
            );
        }
        assert!((at(50_000) - 240.0).abs() < 1e-6);
    }
}
