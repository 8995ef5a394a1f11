//! Scenario files (DESIGN.md §4): which model, its parameters, how long, how many
//! replications, which seed, and optional sweeps.
//!
//! ```toml
//! model = "queue"
//! [run]
//! duration = "200000 s"        # or: count = 1000000 (model-defined unit, e.g. customers)
//! warmup = "1000 s"            # or "auto" (MSER-5), or "0 s"
//! replications = 8              # independent replications (the default method), or:
//! # batches = 20                # batch means over one replication (replications = 1)
//! seed = 1
//! # precision = 0.05            # optional: add replications until each mean's relative
//! # max_replications = 1000     # error is at most 5% (Law & Kelton's sequential procedure),
//! # precision_metrics = ["mean_wait"]   # starting from `replications`; see [`Precision`]
//! [params]
//! arrival = { kind = "poisson", rate = "0.9 /s" }
//! service = { kind = "exponential", mean = "1 s" }
//! capacity = "inf"
//! [sweep]
//! "arrival.rate" = ["0.5 /s", "0.9 /s"]
//! ```
//!
//! Quantities carry their units as strings (`"155.52 Mb/s"`, `"125 us"`, `"60 cells/s"`,
//! `"0.9 /s"`); a bare number is in SI base units (seconds, per second, bits per second).
//! The run length `duration` includes the warm-up, as OMNeT++'s `sim-time-limit` includes
//! its `warmup-period`. Sweeps are crossed: every combination of the listed values is one
//! point, in the order the keys appear in the file.
//!
//! Every error names the file, the dotted key and what was expected. Keys a model does not
//! read are errors too (a typo must not silently fall back to a default): the model reads
//! its parameters through [`Params`], which records what was read, and [`Params::finish`]
//! reports the rest.

use std::cell::RefCell;
use std::collections::BTreeSet;

use atmlab_core::time::Duration;
use atmlab_core::units::{BitRate, split_quantity};
use toml::{Table, Value};

use crate::SimError;

/// How long each replication runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunLength {
    /// Simulated time, warm-up included.
    Duration(Duration),
    /// A count of the model's unit (customers served, cells delivered...) after warm-up.
    Count(u64),
}

/// How the initial transient is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    /// Statistics are reset at this time.
    Time(Duration),
    /// MSER-5 picks the truncation point from a pilot pass of each replication.
    Auto,
    /// Statistics are reset after this many observations of the model's primary series
    /// (what an `Auto` warm-up resolves to).
    Observations(u64),
}

/// A relative precision to reach by adding replications: the sequential procedure of Law
/// and Kelton (*Simulation Modeling and Analysis*, 3rd ed., §9.4.1).
///
/// Each point starts with `[run] replications` (n0, 10 when not given) and gains one
/// replication at a time;
/// it stops at the first n ≥ n0 at which, for every metric in `metrics` (all of the
/// model's when empty), the 95% Student-t half-width over the n replications is at most
/// γ' = γ / (1 + γ) times the absolute mean, γ being `relative`: that makes the actual
/// relative error of the mean at most γ with about 95% confidence. A metric whose n values
/// are all equal (the zero loss probability of a lossless point) has an interval of width
/// zero and is met. One near zero that varies (a median wait that is often 0) may never
/// be: name the metrics that matter in `metrics`.
/// A point that reaches `max_replications` first stops there, and the run warns with the
/// precision it got.
///
/// The stopping n depends only on the replications' values, which depend only on (seed,
/// replication): so, like every result, it does not depend on the thread count (extra
/// replications run in parallel past the stopping point are discarded). Law and Kelton
/// advise n0 ≥ 10: with fewer, a lucky small spread can stop the sequence too early.
#[derive(Debug, Clone, PartialEq)]
pub struct Precision {
    /// γ, the relative error to reach (0 < γ < 1).
    pub relative: f64,
    /// The most replications a point may take.
    pub max_replications: u32,
    /// The metrics the rule applies to; empty for all of them.
    pub metrics: Vec<String>,
}

impl Precision {
    /// The relative half-width to reach, Law & Kelton's γ' = γ / (1 + γ): a half-width
    /// within γ' of the estimate keeps the error within γ of the true mean.
    pub fn half_width_target(&self) -> f64 {
        self.relative / (1.0 + self.relative)
    }

    /// γ as a percentage for messages: `0.07` is "7%", not "7.000000000000001%".
    pub fn percent(&self) -> String {
        format!("{}%", (self.relative * 100.0 * 1e6).round() / 1e6)
    }
}

/// The default cap on replications with a precision target.
pub const DEFAULT_MAX_REPLICATIONS: u32 = 1000;

/// The largest cap accepted: every kept replication's results stay in memory.
pub const LIMIT_MAX_REPLICATIONS: u32 = 1_000_000;

/// The `[run]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Run length.
    pub length: RunLength,
    /// Warm-up.
    pub warmup: Warmup,
    /// Independent replications per point.
    pub replications: u32,
    /// The scenario seed.
    pub seed: u64,
    /// Batch means instead of replications: the measured period of the one replication
    /// is cut into this many consecutive batches, each giving one value per metric, and
    /// the confidence interval is computed over the batch means (Law & Kelton §9.5.3).
    pub batches: Option<u32>,
    /// Replications added until a relative precision is reached (`replications` is then
    /// the first count tried).
    pub precision: Option<Precision>,
}

/// A parsed scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The file it came from (for messages and results).
    pub file: String,
    /// The model kind.
    pub model: String,
    /// The `[run]` table.
    pub run: RunConfig,
    /// The `[params]` table, before sweeps.
    pub params: Table,
    /// The sweep: dotted parameter keys and their values, in file order.
    pub sweep: Vec<(String, Vec<Value>)>,
}

fn err(file: &str, key: &str, message: impl Into<String>) -> SimError {
    SimError::Scenario {
        file: file.to_owned(),
        key: key.to_owned(),
        message: message.into(),
    }
}

/// A short human rendering of a TOML value for messages.
pub fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// Parses a rate in events (cells, customers, frames) per second.
pub fn parse_rate(v: &Value) -> Result<f64, String> {
    let x = match v {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        Value::String(s) => {
            let (x, unit) = split_quantity(s).ok_or_else(|| {
                format!(
                    "expected a rate such as \"0.9 /s\" or \"60 cells/s\", got {}",
                    show(v)
                )
            })?;
            let mult = match unit {
                "" | "/s" | "per s" | "cells/s" | "cell/s" | "customers/s" | "frames/s"
                | "packets/s" | "Hz" => 1.0,
                "/ms" => 1e3,
                "/us" => 1e6,
                "/min" => 1.0 / 60.0,
                "/h" => 1.0 / 3600.0,
                "kcells/s" => 1e3,
                "Mcells/s" => 1e6,
                _ => {
                    return Err(format!(
                        "unknown rate unit {unit:?} in {}: use /s, /ms, /us, /min, /h or cells/s",
                        show(v)
                    ));
                }
            };
            x * mult
        }
        _ => {
            return Err(format!(
                "expected a rate such as \"0.9 /s\", got {}",
                show(v)
            ));
        }
    };
    finite_non_negative(x, "a rate", v)
}

/// Parses a duration: `"125 us"`, or a bare number of seconds.
pub fn parse_duration(v: &Value) -> Result<Duration, String> {
    let secs = match v {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        Value::String(s) => return s.parse::<Duration>().map_err(|_| format!("expected a duration such as \"125 us\" (units ps, ns, us, ms, s, min, h), got {}", show(v))).and_then(|d| {
            if s.trim_start().starts_with('-') { Err(format!("a duration cannot be negative, got {}", show(v))) } else { Ok(d) }
        }),
        _ => return Err(format!("expected a duration such as \"125 us\", got {}", show(v))),
    };
    finite_non_negative(secs, "a duration", v).map(Duration::from_secs_f64)
}

/// Parses a bit rate: `"155.52 Mb/s"`, or a bare number of bits per second.
pub fn parse_bit_rate(v: &Value) -> Result<f64, String> {
    let x = match v {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        Value::String(s) => s.parse::<BitRate>().map_err(|e| e.to_string())?.bps(),
        _ => {
            return Err(format!(
                "expected a bit rate such as \"155.52 Mb/s\", got {}",
                show(v)
            ));
        }
    };
    finite_non_negative(x, "a bit rate", v)
}

/// `x`, read from `v`, if it is finite and not negative; else the error for `what`.
fn finite_non_negative(x: f64, what: &str, v: &Value) -> Result<f64, String> {
    if !x.is_finite() || x < 0.0 {
        return Err(format!(
            "{what} must be finite and not negative, got {}",
            show(v)
        ));
    }
    Ok(x)
}

/// Parses a plain number (integer or float, or a string holding one).
pub fn parse_number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Float(f) if f.is_finite() => Ok(*f),
        Value::String(s) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("expected a number, got {}", show(v))),
        _ => Err(format!("expected a number, got {}", show(v))),
    }
}

const TOP_KEYS: [&str; 4] = ["model", "run", "params", "sweep"];

impl Scenario {
    /// Reads and parses a scenario file, applying `--set key=value` overrides first.
    pub fn load(path: &std::path::Path, overrides: &[String]) -> Result<Scenario, SimError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(&file, "-", format!("cannot read the file: {e}")))?;
        Scenario::parse(&file, &text, overrides)
    }

    /// Parses scenario text; `file` names it in messages.
    pub fn parse(file: &str, text: &str, overrides: &[String]) -> Result<Scenario, SimError> {
        let mut doc: Table = text.parse::<Table>().map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            err(
                file,
                &line_column(text, at),
                format!("not valid TOML: {}", e.message()),
            )
        })?;
        for o in overrides {
            apply_override(&mut doc, o)?;
        }
        // A parameter the sweep also sets would be overwritten by every point of the
        // sweep: the override would be silently ignored.
        for o in overrides {
            let key = o.split_once('=').map_or(o.as_str(), |(k, _)| k).trim();
            if let Some(param) = key.strip_prefix("params.")
                && let Some(Value::Table(sweep)) = doc.get("sweep")
                && sweep.contains_key(param)
            {
                return Err(err(
                    "<--set>",
                    o,
                    format!(
                        "params.{param} is swept ([sweep] \"{param}\"), so every point would \
                         overwrite it; set the sweep instead, e.g. --set 'sweep.{param}=[...]'"
                    ),
                ));
            }
        }
        for k in doc.keys() {
            if !TOP_KEYS.contains(&k.as_str()) {
                return Err(err(
                    file,
                    k,
                    format!("unknown key; a scenario has {}", TOP_KEYS.join(", ")),
                ));
            }
        }
        let model = match doc.get("model") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                return Err(err(
                    file,
                    "model",
                    format!("expected the model kind as a string, got {}", show(v)),
                ));
            }
            None => {
                return Err(err(
                    file,
                    "model",
                    "missing: name the model kind, e.g. model = \"queue\" (see `atmlab sim list`)",
                ));
            }
        };
        let run = parse_run(file, doc.get("run"))?;
        let params = match doc.get("params") {
            Some(Value::Table(t)) => t.clone(),
            Some(v) => {
                return Err(err(
                    file,
                    "params",
                    format!("expected a table, got {}", show(v)),
                ));
            }
            None => Table::new(),
        };
        let mut sweep = Vec::new();
        match doc.get("sweep") {
            None => {}
            Some(Value::Table(t)) => {
                for (k, v) in t {
                    let key = format!("sweep.{k}");
                    match v {
                        Value::Array(a) if !a.is_empty() => sweep.push((k.clone(), a.clone())),
                        Value::Array(_) => {
                            return Err(err(file, &key, "an empty list: give at least one value"));
                        }
                        other => {
                            return Err(err(
                                file,
                                &key,
                                format!("expected a list of values, got {}", show(other)),
                            ));
                        }
                    }
                }
            }
            Some(v) => {
                return Err(err(
                    file,
                    "sweep",
                    format!("expected a table, got {}", show(v)),
                ));
            }
        }
        Ok(Scenario {
            file: file.to_owned(),
            model,
            run,
            params,
            sweep,
        })
    }

    /// The sweep points: for each, the swept (key, value) pairs, crossed in file order
    /// (the last key varies fastest). A scenario without a sweep has one empty point.
    pub fn points(&self) -> Vec<Vec<(String, Value)>> {
        let mut points = vec![Vec::new()];
        for (k, values) in &self.sweep {
            let mut next = Vec::with_capacity(points.len() * values.len());
            for p in &points {
                for v in values {
                    let mut q = p.clone();
                    q.push((k.clone(), v.clone()));
                    next.push(q);
                }
            }
            points = next;
        }
        points
    }

    /// The parameter table of one point: `[params]` with the point's swept values set.
    pub fn params_at(&self, point: &[(String, Value)]) -> Result<Table, SimError> {
        let mut t = self.params.clone();
        for (k, v) in point {
            set_dotted(&mut t, k, v.clone())
                .map_err(|m| err(&self.file, &format!("sweep.{k}"), m))?;
        }
        Ok(t)
    }
}

/// "line L, column C" (from 1, columns in characters) of the byte offset `at` of `text`:
/// where a TOML syntax error is, as an editor counts.
fn line_column(text: &str, at: usize) -> String {
    let before = text.get(..at.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[start..].chars().count() + 1;
    format!("line {line}, column {column}")
}

fn parse_run(file: &str, v: Option<&Value>) -> Result<RunConfig, SimError> {
    let t = match v {
        Some(Value::Table(t)) => t,
        Some(v) => {
            return Err(err(
                file,
                "run",
                format!("expected a table, got {}", show(v)),
            ));
        }
        None => {
            return Err(err(
                file,
                "run",
                "missing: a [run] table with duration (or count), warmup, replications and seed",
            ));
        }
    };
    const RUN_KEYS: [&str; 9] = [
        "duration",
        "count",
        "warmup",
        "replications",
        "seed",
        "batches",
        "precision",
        "max_replications",
        "precision_metrics",
    ];
    for k in t.keys() {
        if !RUN_KEYS.contains(&k.as_str()) {
            return Err(err(
                file,
                &format!("run.{k}"),
                format!("unknown key; [run] has {}", RUN_KEYS.join(", ")),
            ));
        }
    }
    let length = match (t.get("duration"), t.get("count")) {
        (Some(_), Some(_)) => {
            return Err(err(file, "run", "give either duration or count, not both"));
        }
        (Some(d), None) => {
            let d = parse_duration(d).map_err(|m| err(file, "run.duration", m))?;
            if d == Duration::ZERO {
                return Err(err(file, "run.duration", "must be longer than zero"));
            }
            RunLength::Duration(d)
        }
        (None, Some(c)) => match c {
            Value::Integer(n) if *n > 0 => RunLength::Count(*n as u64),
            other => {
                return Err(err(
                    file,
                    "run.count",
                    format!("expected a positive integer, got {}", show(other)),
                ));
            }
        },
        (None, None) => {
            return Err(err(
                file,
                "run",
                "missing the run length: duration = \"1000 s\" or count = 100000",
            ));
        }
    };
    let warmup = match t.get("warmup") {
        None => Warmup::Time(Duration::ZERO),
        Some(Value::String(s)) if s.trim() == "auto" => Warmup::Auto,
        Some(v) => Warmup::Time(
            parse_duration(v)
                .map_err(|m| err(file, "run.warmup", format!("{m}, or \"auto\" for MSER-5")))?,
        ),
    };
    if let (RunLength::Duration(d), Warmup::Time(w)) = (length, warmup)
        && w >= d
    {
        return Err(err(
            file,
            "run.warmup",
            format!("the warm-up ({w}) must be shorter than the duration ({d}), which includes it"),
        ));
    }
    let replications = match t.get("replications") {
        // With a precision target, the start Law & Kelton advise.
        None if t.contains_key("precision") && !t.contains_key("batches") => 10,
        None => 1,
        Some(Value::Integer(n)) if *n >= 1 && *n <= i64::from(u32::MAX) => *n as u32,
        Some(v) => {
            return Err(err(
                file,
                "run.replications",
                format!("expected a positive integer, got {}", show(v)),
            ));
        }
    };
    let seed = match t.get("seed") {
        None => 1,
        Some(Value::Integer(n)) if *n >= 0 => *n as u64,
        Some(v) => {
            return Err(err(
                file,
                "run.seed",
                format!("expected a non-negative integer, got {}", show(v)),
            ));
        }
    };
    let batches = match t.get("batches") {
        None => None,
        Some(Value::Integer(n)) if *n >= 2 && *n <= 100_000 => Some(*n as u32),
        Some(v) => {
            return Err(err(
                file,
                "run.batches",
                format!(
                    "expected an integer from 2 to 100000 (batch means), got {}",
                    show(v)
                ),
            ));
        }
    };
    if batches.is_some() && replications != 1 {
        return Err(err(
            file,
            "run.batches",
            "batch means cut one long replication into batches: set replications = 1 (or drop batches to use independent replications)",
        ));
    }
    if let (Some(b), RunLength::Count(n)) = (batches, length)
        && n < u64::from(b)
    {
        return Err(err(
            file,
            "run.batches",
            format!("{b} batches need a count of at least {b}, got {n}"),
        ));
    }
    let precision = parse_precision(file, t, replications, batches)?;
    Ok(RunConfig {
        length,
        warmup,
        replications,
        seed,
        batches,
        precision,
    })
}

/// `precision`, `max_replications` and `precision_metrics` of `[run]` (see [`Precision`]).
fn parse_precision(
    file: &str,
    t: &Table,
    replications: u32,
    batches: Option<u32>,
) -> Result<Option<Precision>, SimError> {
    let relative = match t.get("precision") {
        None => None,
        Some(v) => {
            let x = match v {
                Value::Float(x) => *x,
                Value::Integer(n) => *n as f64,
                // Anything else (a string, a table) is refused below with its value.
                _ => f64::NAN,
            };
            if !(x > 0.0 && x < 1.0) {
                return Err(err(
                    file,
                    "run.precision",
                    format!(
                        "expected a relative error between 0 and 1 (0.05: each mean within 5%, with 95% confidence), got {}",
                        show(v)
                    ),
                ));
            }
            Some(x)
        }
    };
    let Some(relative) = relative else {
        for k in ["max_replications", "precision_metrics"] {
            if t.contains_key(k) {
                return Err(err(
                    file,
                    &format!("run.{k}"),
                    "only meaningful with run.precision (the relative error to reach)",
                ));
            }
        }
        return Ok(None);
    };
    if batches.is_some() {
        return Err(err(
            file,
            "run.precision",
            "adds independent replications, which batch means do not use: drop run.batches or run.precision",
        ));
    }
    if replications < 2 {
        return Err(err(
            file,
            "run.replications",
            "with run.precision, the replications to start from must be at least 2 (an interval needs two; Law & Kelton advise 10)",
        ));
    }
    let max_replications = match t.get("max_replications") {
        None => DEFAULT_MAX_REPLICATIONS.max(replications),
        Some(Value::Integer(n))
            if *n >= i64::from(replications) && *n <= i64::from(LIMIT_MAX_REPLICATIONS) =>
        {
            *n as u32
        }
        Some(v) => {
            return Err(err(
                file,
                "run.max_replications",
                format!(
                    "expected an integer from run.replications ({replications}) to {LIMIT_MAX_REPLICATIONS}, got {}",
                    show(v)
                ),
            ));
        }
    };
    let metrics = match t.get("precision_metrics") {
        None => Vec::new(),
        Some(Value::Array(a)) if !a.is_empty() => {
            let mut names = Vec::new();
            for v in a {
                match v {
                    Value::String(name) if names.contains(name) => {
                        return Err(err(
                            file,
                            "run.precision_metrics",
                            format!("{name:?} is listed twice"),
                        ));
                    }
                    Value::String(name) => names.push(name.clone()),
                    other => {
                        return Err(err(
                            file,
                            "run.precision_metrics",
                            format!("expected metric names (strings), got {}", show(other)),
                        ));
                    }
                }
            }
            names
        }
        Some(v) => {
            return Err(err(
                file,
                "run.precision_metrics",
                format!("expected a non-empty list of metric names, got {}", show(v)),
            ));
        }
    };
    Ok(Some(Precision {
        relative,
        max_replications,
        metrics,
    }))
}

/// Sets `a.b.c` in a table, creating intermediate tables.
fn set_dotted(t: &mut Table, key: &str, v: Value) -> Result<(), String> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts
        .pop()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{key:?} is not a dotted key"))?;
    let mut cur = t;
    for p in parts {
        let entry = cur
            .entry(p.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        cur = match entry {
            Value::Table(t) => t,
            other => return Err(format!("{p:?} in {key:?} is {}, not a table", show(other))),
        };
    }
    cur.insert(last.to_owned(), v);
    Ok(())
}

/// Applies one `--set key=value` to the whole document (`params.arrival.rate="0.5 /s"`,
/// `run.replications=4`). The value is read as TOML, or as a string if it is not TOML.
fn apply_override(doc: &mut Table, o: &str) -> Result<(), SimError> {
    let bad = |m: String| err("<--set>", o, m);
    let (k, v) = o
        .split_once('=')
        .ok_or_else(|| bad("expected key=value, e.g. params.arrival.rate=\"0.5 /s\"".into()))?;
    let k = k.trim();
    let v = v.trim();
    let value = format!("x = {v}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("x"))
        .unwrap_or_else(|| Value::String(v.to_owned()));
    // A sweep's keys are parameter paths themselves (`sweep."arrival.rate"`): all that
    // follows `sweep.` is one key, quoted or not.
    if let Some(param) = k.strip_prefix("sweep.") {
        let param = param.trim_matches('"');
        if param.is_empty() {
            return Err(bad("expected sweep.PARAMETER=[values]".into()));
        }
        let sweep = doc
            .entry("sweep")
            .or_insert_with(|| Value::Table(Table::new()));
        let Value::Table(sweep) = sweep else {
            return Err(bad("the scenario's sweep is not a table".into()));
        };
        sweep.insert(param.to_owned(), value);
        return Ok(());
    }
    set_dotted(doc, k, value).map_err(bad)
}

/// A model's view of its parameters: typed getters that name the key in every error, and
/// a record of the keys read, so that unknown keys can be reported.
#[derive(Debug)]
pub struct Params<'a> {
    file: &'a str,
    prefix: String,
    table: &'a Table,
    used: RefCell<BTreeSet<String>>,
}

impl<'a> Params<'a> {
    /// A view of `table` (a point's `[params]`) from `file`.
    pub fn new(file: &'a str, table: &'a Table) -> Self {
        Params {
            file,
            prefix: "params".into(),
            table,
            used: RefCell::new(BTreeSet::new()),
        }
    }

    fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.prefix)
    }

    /// The scenario file these parameters came from (to resolve the paths they name).
    pub fn file(&self) -> &'a str {
        self.file
    }

    /// An error about `key`.
    pub fn error(&self, key: &str, message: impl Into<String>) -> SimError {
        err(self.file, &self.path(key), message)
    }

    /// An error about a key outside `[params]`, named in full (e.g. `run.duration`).
    pub fn error_at(&self, full_key: &str, message: impl Into<String>) -> SimError {
        err(self.file, full_key, message)
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.used.borrow_mut().insert(key.to_owned());
        self.table.get(key)
    }

    /// True when `key` is present (and marks it read).
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    fn required(&self, key: &str, what: &str) -> Result<&'a Value, SimError> {
        self.get(key)
            .ok_or_else(|| self.error(key, format!("missing: expected {what}")))
    }

    /// A rate in events per second.
    pub fn rate(&self, key: &str) -> Result<f64, SimError> {
        parse_rate(self.required(key, "a rate such as \"0.9 /s\"")?).map_err(|m| self.error(key, m))
    }

    /// A rate that must be strictly positive.
    pub fn positive_rate(&self, key: &str) -> Result<f64, SimError> {
        let r = self.rate(key)?;
        if r <= 0.0 {
            return Err(self.error(key, "must be greater than zero"));
        }
        Ok(r)
    }

    /// A duration.
    pub fn duration(&self, key: &str) -> Result<Duration, SimError> {
        parse_duration(self.required(key, "a duration such as \"1 s\"")?)
            .map_err(|m| self.error(key, m))
    }

    /// A list of durations.
    pub fn durations(&self, key: &str) -> Result<Vec<Duration>, SimError> {
        match self.required(key, "a list of durations such as [\"1 ms\", \"2 ms\"]")? {
            Value::Array(a) => a
                .iter()
                .map(|v| parse_duration(v).map_err(|m| self.error(key, m)))
                .collect(),
            v => Err(self.error(
                key,
                format!("expected a list of durations, got {}", show(v)),
            )),
        }
    }

    /// A bit rate in bits per second.
    pub fn bit_rate(&self, key: &str) -> Result<f64, SimError> {
        parse_bit_rate(self.required(key, "a bit rate such as \"155.52 Mb/s\"")?)
            .map_err(|m| self.error(key, m))
    }

    /// A plain number.
    pub fn number(&self, key: &str) -> Result<f64, SimError> {
        parse_number(self.required(key, "a number")?).map_err(|m| self.error(key, m))
    }

    /// A plain number, or `default` when absent.
    pub fn number_or(&self, key: &str, default: f64) -> Result<f64, SimError> {
        if self.has(key) {
            self.number(key)
        } else {
            Ok(default)
        }
    }

    /// A string.
    pub fn string(&self, key: &str) -> Result<&'a str, SimError> {
        match self.required(key, "a string")? {
            Value::String(s) => Ok(s),
            v => Err(self.error(key, format!("expected a string, got {}", show(v)))),
        }
    }

    /// A boolean, or `default` when absent.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, SimError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Boolean(b)) => Ok(*b),
            Some(v) => Err(self.error(key, format!("expected true or false, got {}", show(v)))),
        }
    }

    /// A list of plain numbers.
    pub fn numbers(&self, key: &str) -> Result<Vec<f64>, SimError> {
        match self.required(key, "a list of numbers")? {
            Value::Array(a) => a
                .iter()
                .map(|v| parse_number(v).map_err(|m| self.error(key, m)))
                .collect(),
            v => Err(self.error(key, format!("expected a list of numbers, got {}", show(v)))),
        }
    }

    /// The raw value of `key`, if present.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.get(key)
    }

    /// The sub-table `key`, as parameters of their own. Check it with [`Params::finish`].
    pub fn table(&self, key: &str) -> Result<Params<'a>, SimError> {
        match self.required(key, "a table, e.g. { kind = \"poisson\", rate = \"1 /s\" }")? {
            Value::Table(t) => Ok(Params {
                file: self.file,
                prefix: self.path(key),
                table: t,
                used: RefCell::new(BTreeSet::new()),
            }),
            v => Err(self.error(key, format!("expected a table, got {}", show(v)))),
        }
    }

    /// Reports the first key that was never read: a misspelt or unknown parameter.
    pub fn finish(&self) -> Result<(), SimError> {
        let used = self.used.borrow();
        let known: Vec<&str> = used.iter().map(String::as_str).collect();
        for k in self.table.keys() {
            if !used.contains(k) {
                return Err(self.error(
                    k,
                    if known.is_empty() {
                        "unknown key".to_owned()
                    } else {
                        format!("unknown key; expected one of: {}", known.join(", "))
                    },
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MM1: &str = r#"
model = "queue"
[run]
duration = "200000 s"
warmup = "1000 s"
replications = 8
seed = 1
[params]
arrival = { kind = "poisson", rate = "0.9 /s" }
service = { kind = "exponential", mean = "1 s" }   # or kind = "deterministic"
capacity = "inf"
[sweep]
"arrival.rate" = ["0.5 /s", "0.9 /s"]
"#;

    #[test]
    fn parses_the_reference_file() {
        let s = Scenario::parse("mm1.toml", MM1, &[]).unwrap();
        assert_eq!(s.model, "queue");
        assert_eq!(
            s.run.length,
            RunLength::Duration(Duration::from_secs(200_000))
        );
        assert_eq!(s.run.warmup, Warmup::Time(Duration::from_secs(1000)));
        assert_eq!((s.run.replications, s.run.seed), (8, 1));
        let pts = s.points();
        assert_eq!(pts.len(), 2);
        let t = s.params_at(&pts[1]).unwrap();
        let p = Params::new("mm1.toml", &t);
        let a = p.table("arrival").unwrap();
        assert_eq!(a.rate("rate").unwrap(), 0.9);
        assert_eq!(a.string("kind").unwrap(), "poisson");
        a.finish().unwrap();
    }

    #[test]
    fn batch_means_need_one_replication() {
        let ok =
            Scenario::parse("f", "model='q'\n[run]\nduration='100 s'\nbatches=10\n", &[]).unwrap();
        assert_eq!(ok.run.batches, Some(10));
        let m = msg("model='q'\n[run]\nduration='100 s'\nbatches=10\nreplications=4\n");
        assert!(
            m.contains("run.batches") && m.contains("replications = 1"),
            "{m}"
        );
        let m = msg("model='q'\n[run]\nduration='100 s'\nbatches=1\n");
        assert!(
            m.contains("run.batches") && m.contains("2 to 100000"),
            "{m}"
        );
    }

    #[test]
    fn sweeps_cross_in_file_order() {
        let text = "model='m'\n[run]\ncount=5\n[sweep]\na=[1,2]\nb=['x','y','z']\n";
        let s = Scenario::parse("f", text, &[]).unwrap();
        let pts = s.points();
        assert_eq!(pts.len(), 6);
        assert_eq!(
            pts[1],
            vec![
                ("a".into(), Value::Integer(1)),
                ("b".into(), Value::String("y".into()))
            ]
        );
    }

    #[test]
    fn overrides_apply_before_parsing() {
        let s = Scenario::parse(
            "f",
            MM1,
            &[
                "run.replications=3".into(),
                "params.service.mean=\"2 s\"".into(),
            ],
        )
        .unwrap();
        assert_eq!(s.run.replications, 3);
        let p = Params::new("f", &s.params);
        assert_eq!(
            p.table("service").unwrap().duration("mean").unwrap(),
            Duration::from_secs(2)
        );
        let e = Scenario::parse("f", MM1, &["norun".into()]).unwrap_err();
        assert!(e.to_string().contains("key=value"), "{e}");
    }

    /// A swept parameter cannot be overridden as a parameter (every point of the sweep
    /// would overwrite it, silently): the error says to set the sweep, and setting the
    /// sweep, quoted or not, works.
    #[test]
    fn a_swept_parameter_is_overridden_through_its_sweep() {
        let swept = MM1;
        let e = Scenario::parse("f", swept, &["params.arrival.rate=\"0.7 /s\"".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is swept") && e.contains("sweep.arrival.rate"),
            "{e}"
        );
        for key in ["sweep.arrival.rate", "sweep.\"arrival.rate\""] {
            let s = Scenario::parse(
                "f",
                swept,
                &[format!("{key}=[\"0.1 /s\", \"0.2 /s\", \"0.4 /s\"]")],
            )
            .unwrap();
            assert_eq!(s.points().len(), 3, "{key}");
        }
    }

    fn msg(text: &str) -> String {
        Scenario::parse("bad.toml", text, &[])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_file_key_and_expectation() {
        let m = msg("model='queue'\n[run]\nduration='10 s'\nwarmup='20 s'\n");
        assert!(m.starts_with("bad.toml: run.warmup:"), "{m}");
        let m = msg("model='queue'\n[run]\nduraton='10 s'\n");
        assert!(
            m.contains("run.duraton") && m.contains("unknown key"),
            "{m}"
        );
        let m = msg("model='queue'\n[run]\nduration='10 fortnights'\n");
        assert!(
            m.contains("run.duration") && m.contains("duration such as"),
            "{m}"
        );
        let m = msg("model='queue'\n[run]\ncount=-4\n");
        assert!(
            m.contains("run.count") && m.contains("positive integer"),
            "{m}"
        );
        let m = msg("modle='queue'\n");
        assert!(m.contains("modle"), "{m}");
        let m = msg("model='queue'\n[run]\ncount=4\n[sweep]\nx=3\n");
        assert!(m.contains("sweep.x") && m.contains("list"), "{m}");
        let m = msg("this is = not toml");
        assert!(m.contains("not valid TOML"), "{m}");
    }

    #[test]
    fn precision_parses_and_errors_name_the_key() {
        let base = "model='q'\n[run]\nduration='100 s'\nreplications=10\n";
        let ok = Scenario::parse(
            "f",
            &format!("{base}precision=0.05\nmax_replications=200\nprecision_metrics=['a','b']\n"),
            &[],
        )
        .unwrap();
        assert_eq!(
            ok.run.precision,
            Some(Precision {
                relative: 0.05,
                max_replications: 200,
                metrics: vec!["a".into(), "b".into()],
            })
        );
        let dflt = Scenario::parse("f", &format!("{base}precision=0.1\n"), &[]).unwrap();
        assert_eq!(
            dflt.run
                .precision
                .map(|p| (p.max_replications, p.metrics.len())),
            Some((DEFAULT_MAX_REPLICATIONS, 0))
        );
        // Without replications, a precision target starts from Law & Kelton's 10.
        let start = Scenario::parse(
            "f",
            "model='q'\n[run]\nduration='100 s'\nprecision=0.1\n",
            &[],
        )
        .unwrap();
        assert_eq!(start.run.replications, 10);
        for (extra, key, want) in [
            ("precision=1.5\n", "run.precision", "between 0 and 1"),
            ("precision='5%'\n", "run.precision", "between 0 and 1"),
            ("precision=0\n", "run.precision", "between 0 and 1"),
            (
                "max_replications=50\n",
                "run.max_replications",
                "only meaningful",
            ),
            (
                "precision_metrics=['a']\n",
                "run.precision_metrics",
                "only meaningful",
            ),
            (
                "precision=0.1\nmax_replications=5\n",
                "run.max_replications",
                "from run.replications (10) to 1000000",
            ),
            (
                "precision=0.1\nprecision_metrics=[]\n",
                "run.precision_metrics",
                "non-empty",
            ),
            (
                "precision=0.1\nprecision_metrics=[3]\n",
                "run.precision_metrics",
                "strings",
            ),
            (
                "precision=0.1\nprecision_metrics=['a','a']\n",
                "run.precision_metrics",
                "listed twice",
            ),
            (
                "precision=0.1\nmax_replications=2000000\n",
                "run.max_replications",
                "to 1000000",
            ),
        ] {
            let m = msg(&format!("{base}{extra}"));
            assert!(
                m.starts_with("bad.toml: ") && m.contains(key) && m.contains(want),
                "{extra}: {m}"
            );
        }
        let m = msg("model='q'\n[run]\nduration='100 s'\nreplications=1\nprecision=0.1\n");
        assert!(
            m.contains("run.replications") && m.contains("at least 2"),
            "{m}"
        );
        let m = msg("model='q'\n[run]\nduration='100 s'\nbatches=10\nprecision=0.1\n");
        assert!(
            m.contains("run.precision") && m.contains("batch means"),
            "{m}"
        );
    }

    #[test]
    fn params_errors() {
        let t: Table = "a = { kind = 'poisson', rate = '-1 /s', rte = 3 }\nd = '5 parsecs'\n"
            .parse()
            .unwrap();
        let p = Params::new("f.toml", &t);
        let a = p.table("a").unwrap();
        let e = a.rate("rate").unwrap_err().to_string();
        assert!(
            e.starts_with("f.toml: params.a.rate:") && e.contains("negative"),
            "{e}"
        );
        a.string("kind").unwrap();
        let e = a.finish().unwrap_err().to_string();
        assert!(
            e.contains("params.a.rte") && e.contains("unknown key"),
            "{e}"
        );
        let e = p.duration("d").unwrap_err().to_string();
        assert!(e.contains("params.d"), "{e}");
        let e = p.rate("missing").unwrap_err().to_string();
        assert!(e.contains("params.missing: missing"), "{e}");
        assert_eq!(
            parse_rate(&Value::String("60 cells/s".into())).unwrap(),
            60.0
        );
        assert_eq!(parse_rate(&Value::Float(2.5)).unwrap(), 2.5);
        assert!(parse_rate(&Value::String("3 furlongs".into())).is_err());
        assert_eq!(
            parse_duration(&Value::String("125 us".into())).unwrap(),
            Duration::from_micros(125)
        );
        assert_eq!(
            parse_duration(&Value::Integer(2)).unwrap(),
            Duration::from_secs(2)
        );
        assert!(parse_duration(&Value::String("-1 s".into())).is_err());
        assert_eq!(
            parse_bit_rate(&Value::String("155.52 Mb/s".into())).unwrap(),
            155.52e6
        );
    }
}
