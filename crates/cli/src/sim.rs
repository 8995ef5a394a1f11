//! `atmlab sim`: run, check and list simulation scenarios.
//!
//! Output follows OMNeT++'s Cmdenv: the metrics of each point with their confidence
//! intervals, then the cost of the run in events per second and simulated seconds per
//! second. A progress bar is drawn on stderr only when stdout is a terminal, so logs and
//! CI output stay clean.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use atmlab_sim::report;
use atmlab_sim::runner::{self, RunOptions, RunReport};
use atmlab_sim::scenario::{Scenario, show};
use clap::{Args, Subcommand};

/// Arguments of `atmlab sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    cmd: SimCmd,
}

#[derive(Debug, Subcommand)]
enum SimCmd {
    /// Run a scenario: every sweep point times every replication, in parallel.
    Run {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Where to write results.json, results.csv, replications.csv, run.json and plots
        /// (default: results/<file name without .toml>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a value of the file, e.g. --set params.service.mean="2 s", or a swept
        /// parameter's values, --set 'sweep.arrival.rate=["0.3 /s", "0.5 /s"]'.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Override run.replications.
        #[arg(long)]
        replications: Option<u32>,
        /// Override run.seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Worker threads (default: one per core). Results do not depend on it.
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Print results.json to stdout instead of the table.
        #[arg(long)]
        json: bool,
        /// Run only shard I of N (its share of the jobs, e.g. one task of a Slurm array)
        /// and write OUT/shard.json; `atmlab sim merge` puts the N shards together into
        /// the results an unsharded run writes. See docs/cluster.md.
        #[arg(long, value_name = "I/N")]
        shard: Option<atmlab_sim::runner::Shard>,
    },
    /// Put the shards of a run (`sim run --shard I/N`) together: the results.json,
    /// results.csv, replications.csv, run.json and plots the unsharded run writes.
    Merge {
        /// Where to write the merged results.
        #[arg(long)]
        out: PathBuf,
        /// The shards' output directories (each holding shard.json), all N of them.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Print results.json to stdout instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Validate a scenario file without running it.
    Check {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Override a value of the file.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Print the verdict as one JSON object (file, model, points, replications,
        /// warnings).
        #[arg(long)]
        json: bool,
    },
    /// List the model kinds, their parameters and metrics.
    List {
        /// Print them as JSON (name, summary, parameters with their docs, metrics).
        #[arg(long)]
        json: bool,
    },
    /// Measure this machine's live control plane one operation at a time and write the
    /// `measured` cost profile of the model kind `control` (`profile = "measured"`).
    MeasureCosts {
        /// Where to write the profile (a scenario's `profile = "measured"` reads
        /// profiles/measured.toml beside it, else from the working directory).
        #[arg(long, default_value = "profiles/measured.toml")]
        out: PathBuf,
        /// Plain text instead of mutual TLS.
        #[arg(long)]
        insecure: bool,
        /// Print the measured costs as one JSON object on stdout (progress on stderr).
        #[arg(long)]
        json: bool,
    },
    /// Fit a testbed's cost profile to its one-at-a-time setup figures (the sequential
    /// manager's mean, 5% and 95% quantiles, xbind's mean at 1 call/s): the wire's
    /// latency, the asynchronous invocation's extra cost and the stalls. The defaults are
    /// paper 000's figures, whose fit is the `paper-000` profile.
    Calibrate {
        /// The testbed's topology (paper 000's: the line of three switch servers).
        #[arg(long, default_value = "topologies/line3.toml")]
        topology: PathBuf,
        /// The profile whose other costs (the split the fit does not choose) are kept.
        #[arg(long, default_value = "paper-000")]
        base: String,
        /// The sequential manager's mean setup, one call at a time.
        #[arg(long, default_value = "23.4 ms")]
        sequential_mean: String,
        /// Its 5% quantile.
        #[arg(long, default_value = "20.5 ms")]
        sequential_p5: String,
        /// Its 95% quantile.
        #[arg(long, default_value = "31.0 ms")]
        sequential_p95: String,
        /// xbind's mean setup (T = 1) at 1 call/s.
        #[arg(long, default_value = "11.0 ms")]
        xbind_mean: String,
        /// Setups simulated for each evaluation of the fit.
        #[arg(long, default_value_t = 5000)]
        calls: u64,
        /// Write the fitted profile here (a file `profile = { file = PATH }` reads).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the fit as one JSON object (seconds and a probability).
        #[arg(long)]
        json: bool,
    },
    /// The twin check: the simulated control plane at the measured profile against the
    /// live one, xbind T = 1 and T = 4 on the line of three switches, in one run.
    Twin {
        /// Where to write the report.
        #[arg(long, default_value = "reports/twin")]
        out: PathBuf,
        /// Plain text instead of mutual TLS.
        #[arg(long)]
        insecure: bool,
        /// A short run (under a minute): fewer, shorter points.
        #[arg(long)]
        quick: bool,
        /// Print the verdicts as one JSON object on stdout (progress on stderr).
        #[arg(long)]
        json: bool,
    },
}

/// A cost profile's TOML as JSON (durations stay the strings the file holds).
fn toml_to_json(text: &str) -> Result<serde_json::Value> {
    let v: toml::Value = toml::from_str(text).context("reading back the profile")?;
    Ok(serde_json::to_value(v)?)
}

fn load(
    file: &std::path::Path,
    set: &[String],
) -> Result<(Scenario, &'static dyn atmlab_sim::model::ModelKind)> {
    let scn = Scenario::load(file, set)?;
    let Some(kind) = atmlab_models::model_kind(&scn.model) else {
        let known: Vec<&str> = atmlab_models::registry().iter().map(|k| k.name()).collect();
        bail!(
            "{}: model: unknown model kind {:?}; known kinds: {} (see `atmlab sim list`)",
            scn.file,
            scn.model,
            known.join(", ")
        );
    };
    Ok((scn, kind))
}

/// Runs one `atmlab sim` command.
pub fn run(args: SimArgs) -> Result<ExitCode> {
    match args.cmd {
        SimCmd::MeasureCosts {
            out,
            insecure,
            json,
        } => {
            let data = crate::live::data_dir();
            crate::live::writable_file("--out", &out)?;
            let _lock = crate::live::lock_data_dir(&data)?;
            let progress = |l: &str| {
                if json {
                    eprintln!("{l}");
                } else {
                    say!("{l}");
                }
            };
            use atmlab_lab::launch::Lab;
            use atmlab_lab::twin::{LINE3, measure};
            let m = crate::live::runtime()?.block_on(async {
                let topology =
                    atmlab_control::net::Topology::parse(LINE3, "topologies/line3.toml")?;
                let lab = Lab::up_with(topology, &data, insecure, &mut |l| progress(l)).await?;
                lab.within(async |lab| {
                    measure::measure(lab, std::time::Duration::from_secs(1), 500, &mut |l| {
                        progress(l)
                    })
                    .await
                })
                .await
            })?;
            let text = m.profile.to_toml(&m.provenance());
            std::fs::write(&out, &text).with_context(|| format!("writing {}", out.display()))?;
            if json {
                let mut v = toml_to_json(&text)?;
                v["out"] = out.display().to_string().into();
                say!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                say!("wrote {}", out.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        SimCmd::Twin {
            out,
            insecure,
            quick,
            json,
        } => {
            let data = crate::live::data_dir();
            crate::live::writable_dir("--out", &out)?;
            let _lock = crate::live::lock_data_dir(&data)?;
            let opts = atmlab_lab::twin::TwinOptions {
                data_dir: data,
                insecure,
                ..atmlab_lab::twin::TwinOptions::new(out.clone(), quick)
            };
            let r = crate::live::runtime()?.block_on(atmlab_lab::twin::run(&opts, &mut |l| {
                if json {
                    eprintln!("{l}");
                } else {
                    say!("{l}");
                }
            }))?;
            let v = atmlab_lab::twin::verdicts(&r);
            if json {
                let checks: Vec<serde_json::Value> = v
                    .checks()
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "item": c.item, "paper": c.paper, "ours": c.ours,
                            "verdict": c.verdict.to_string(), "why": c.why,
                        })
                    })
                    .collect();
                let doc = serde_json::json!({
                    "summary": v.summary(),
                    "verdicts": checks,
                    "report": out.join("README.md"),
                });
                say!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                say!("{}", v.summary());
                say!("wrote {}", out.join("README.md").display());
            }
            Ok(ExitCode::SUCCESS)
        }
        SimCmd::Calibrate {
            topology,
            base,
            sequential_mean,
            sequential_p5,
            sequential_p95,
            xbind_mean,
            calls,
            out,
            json,
        } => {
            use atmlab_models::control::calibrate::{self, Targets};
            use atmlab_models::control::costs::CostProfile;
            let secs = |flag: &str, v: &str| -> Result<f64> {
                let d = atmlab_sim::scenario::parse_duration(&toml::Value::String(v.into()))
                    .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
                Ok(d.as_secs_f64())
            };
            let targets = Targets {
                sequential_mean: secs("sequential-mean", &sequential_mean)?,
                sequential_p5: secs("sequential-p5", &sequential_p5)?,
                sequential_p95: secs("sequential-p95", &sequential_p95)?,
                xbind_mean: secs("xbind-mean", &xbind_mean)?,
            };
            if !(targets.sequential_p5 < targets.sequential_mean
                && targets.sequential_mean < targets.sequential_p95)
            {
                bail!(
                    "the sequential setup's figures must rise: --sequential-p5 < --sequential-mean < --sequential-p95"
                );
            }
            if calls < 100 {
                bail!("--calls {calls}: at least 100 setups are needed for a 5% quantile");
            }
            let mut profile = CostProfile::named(&base)
                .with_context(|| format!("--base {base:?}: no such profile"))?;
            if !topology.is_file() {
                bail!(
                    "--topology {}: no such file (run from the repository, or name the testbed's topology file)",
                    topology.display()
                );
            }
            let topology = std::fs::canonicalize(&topology)
                .with_context(|| format!("--topology {}", topology.display()))?;
            if let Some(out) = &out {
                crate::live::writable_file("--out", out)?;
            }
            let fit = calibrate::fit(&topology, &base, &targets, calls)?;
            let us = |d: atmlab_core::time::Duration| d.as_secs_f64() * 1e6;
            if json {
                let v = serde_json::json!({
                    "base": base,
                    "latency_s": fit.latency.as_secs_f64(),
                    "oneway_s": fit.oneway.as_secs_f64(),
                    "stall_probability": fit.stall_probability,
                    "stall_mean_s": fit.stall_mean.as_secs_f64(),
                    "out": out.as_ref().map(|o| o.display().to_string()),
                });
                say!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                say!("latency            {:.1} us", us(fit.latency));
                say!("oneway             {:.1} us", us(fit.oneway));
                say!("stall_probability  {:.4}", fit.stall_probability);
                say!("stall_mean         {:.1} us", us(fit.stall_mean));
            }
            if let Some(out) = out {
                profile.name = format!("{base}, fitted");
                profile.latency = fit.latency;
                profile.oneway = fit.oneway;
                profile.stall_probability = fit.stall_probability;
                profile.stall_mean = fit.stall_mean;
                let provenance = format!(
                    "atmlab sim calibrate: {base} fitted to a sequential setup of {sequential_mean} (5% {sequential_p5}, 95% {sequential_p95}) and xbind's {xbind_mean}, {calls} setups per evaluation"
                );
                std::fs::write(&out, profile.to_toml(&provenance))
                    .with_context(|| format!("writing {}", out.display()))?;
                if !json {
                    say!("wrote {}", out.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SimCmd::List { json: true } => {
            let kinds: Vec<serde_json::Value> = atmlab_models::registry()
                .iter()
                .map(|k| {
                    serde_json::json!({
                        "name": k.name(),
                        "summary": k.summary(),
                        "parameters": k.parameters().iter().map(|p| serde_json::json!({
                            "key": p.key, "doc": p.doc,
                        })).collect::<Vec<_>>(),
                        "metrics": k.metrics(),
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&kinds)?);
            Ok(ExitCode::SUCCESS)
        }
        SimCmd::List { json: false } => {
            for k in atmlab_models::registry() {
                println!("{}: {}", k.name(), k.summary());
                println!("  parameters:");
                for p in k.parameters() {
                    println!("    {:<16} {}", p.key, p.doc);
                }
                println!("  metrics: {}", k.metrics().join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        SimCmd::Check { file, set, json } => {
            let (scn, kind) = load(&file, &set)?;
            let (_, warnings) = runner::prepare(&scn, kind)?;
            if json {
                let v = serde_json::json!({
                    "file": scn.file,
                    "ok": true,
                    "model": scn.model,
                    "points": scn.points().len(),
                    "replications": scn.run.replications,
                    "max_replications": scn.run.precision.as_ref().map(|p| p.max_replications),
                    "warnings": warnings,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(ExitCode::SUCCESS);
            }
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            let until = scn.run.precision.as_ref().map_or(String::new(), |p| {
                format!(
                    ", more until each mean's relative error is at most {} (at most {})",
                    p.percent(),
                    p.max_replications
                )
            });
            println!(
                "{}: ok (model {}, {} point(s) x {} replication(s){until})",
                scn.file,
                scn.model,
                scn.points().len(),
                scn.run.replications
            );
            Ok(ExitCode::SUCCESS)
        }
        SimCmd::Run {
            file,
            out,
            mut set,
            replications,
            seed,
            threads,
            json,
            shard,
        } => {
            if let Some(r) = replications {
                set.push(format!("run.replications={r}"));
            }
            if let Some(s) = seed {
                set.push(format!("run.seed={s}"));
            }
            let (scn, kind) = load(&file, &set)?;
            let (_, warnings) = runner::prepare(&scn, kind)?;
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            // The output directory is checked before the run, not after it.
            let dir = out.unwrap_or_else(|| {
                let stem = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "run".into());
                PathBuf::from("results").join(stem)
            });
            crate::live::writable_dir("--out", &dir)?;
            let total = scn.points().len() as u64 * u64::from(scn.run.replications);
            // Progress, with the time left, for a person watching stderr: the bar is drawn
            // there, so stderr decides (stdout may be a file of results while the person
            // watches), and a redirected stderr gets no bar and no escape codes.
            let bar = std::io::stderr().is_terminal().then(|| {
                let b = indicatif::ProgressBar::with_draw_target(
                    Some(total),
                    indicatif::ProgressDrawTarget::stderr(),
                );
                b.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{bar:40} {pos}/{len} jobs, {elapsed} elapsed, about {eta} left",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                b
            });
            // With a precision target the jobs in all grow round by round.
            let progress = |done: u64, total: u64| {
                if let Some(b) = &bar {
                    b.set_length(total);
                    b.set_position(done);
                }
            };
            let opts = RunOptions {
                threads,
                progress: Some(&progress),
            };
            if let Some(shard) = shard {
                // The scenario as given travels with the shard, so that the merge needs
                // no copy of the file.
                let source = atmlab_sim::shard::ScenarioSource::read(&file, &set)?;
                let raw = runner::run_raw(&scn, kind, &opts, Some(shard))?;
                if let Some(b) = &bar {
                    b.finish_and_clear();
                }
                atmlab_sim::shard::write_shard(&dir, &source, shard, &raw)?;
                let jobs: usize = raw.points.iter().map(Vec::len).sum();
                println!(
                    "shard {shard}: {jobs} job(s); {}/{}",
                    dir.display(),
                    atmlab_sim::shard::SHARD_FILE
                );
                return Ok(ExitCode::SUCCESS);
            }
            let r = runner::run(&scn, kind, &opts)?;
            if let Some(b) = &bar {
                b.finish_and_clear();
            }
            // What the run itself found (a precision not reached), after the model's.
            for w in r.warnings.iter().filter(|w| !warnings.contains(w)) {
                eprintln!("warning: {w}");
            }
            write_all(&dir, &r, kind, json)
        }
        SimCmd::Merge { out, shards, json } => {
            let files = shards
                .iter()
                .map(|d| atmlab_sim::shard::ShardFile::read(d))
                .collect::<Result<Vec<_>, _>>()?;
            let model = files[0].source.scenario()?.model;
            let Some(kind) = atmlab_models::model_kind(&model) else {
                bail!("{}: unknown model kind {model:?}", files[0].path);
            };
            let r = atmlab_sim::shard::merge(&files, kind)?;
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            write_all(&out, &r, kind, json)
        }
    }
}

/// Writes a run's result files and plots into `dir` and prints the table (or
/// results.json with `json`).
fn write_all(
    dir: &std::path::Path,
    r: &RunReport,
    kind: &dyn atmlab_sim::model::ModelKind,
    json: bool,
) -> Result<ExitCode> {
    report::write_results(dir, r)
        .with_context(|| format!("writing results to {}", dir.display()))?;
    let plots = report::write_plots(dir, r, kind)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::results_json(r))?
        );
    } else {
        print_table(r, kind);
        println!(
            "results: {}/results.json, results.csv, replications.csv, run.json",
            dir.display()
        );
        if plots > 0 {
            println!(
                "plots:   {plots} metric(s) against the swept value in {}/ (SVG and PNG)",
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn si(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} k", x / 1e3)
    } else {
        format!("{x:.2} ")
    }
}

/// The table `sim run` prints: each metric with its unit, mean, the 95% confidence
/// half-width and the replications behind it. The name column is as wide as the longest
/// name (gateway's run to 30 characters); a metric no replication could measure (no
/// samples: a reverse path with no load, an N_v the sequential manager does not have)
/// says so instead of printing NaN.
fn print_table(r: &RunReport, kind: &dyn atmlab_sim::model::ModelKind) {
    let s = &r.scenario;
    let reps = match &s.run.precision {
        Some(p) => format!(
            "{}.. replications until each mean's relative error is at most {} (n below)",
            s.run.replications,
            p.percent()
        ),
        None => format!("{} replication(s)", s.run.replications),
    };
    println!(
        "{}: model {}, {} point(s) x {reps}, seed {}",
        s.file,
        s.model,
        r.points.len(),
        s.run.seed
    );
    println!(
        "each metric: mean ± the half-width of its 95% confidence interval, over n replications"
    );
    let name_w = r
        .points
        .iter()
        .flat_map(|p| p.metrics.iter().map(|(n, _)| n.len()))
        .max()
        .unwrap_or(0);
    let unit_w = kind
        .metrics()
        .iter()
        .filter_map(|m| kind.metric_unit(m))
        .map(str::len)
        .max()
        .unwrap_or(0);
    for (i, p) in r.points.iter().enumerate() {
        if !p.swept.is_empty() {
            let kv: Vec<String> = p
                .swept
                .iter()
                .map(|(k, v)| format!("{k} = {}", show(v)))
                .collect();
            println!("[{}/{}] {}", i + 1, r.points.len(), kv.join(", "));
        }
        for (name, e) in &p.metrics {
            println!(
                "  {}",
                table_row(name, kind.metric_unit(name), e, name_w, unit_w)
            );
        }
    }
    let eps = r.events as f64 / r.wall_seconds.max(1e-9);
    let sps = r.simulated_seconds / r.wall_seconds.max(1e-9);
    println!(
        "run: {} events in {:.3} s wall on {} thread(s): {}events/s, {}simulated-s/s",
        r.events,
        r.wall_seconds,
        r.threads,
        si(eps),
        si(sps)
    );
}

/// One metric's row of the table (see [`print_table`]).
fn table_row(
    name: &str,
    unit: Option<&str>,
    e: &atmlab_sim::stats::Estimate,
    name_w: usize,
    unit_w: usize,
) -> String {
    let unit = unit.unwrap_or("");
    let value = if !e.mean.is_finite() {
        // Every replication's value was NaN: nothing was observed to average.
        format!("{:>14} {:<14}", "no samples", "")
    } else if e.ci95.is_finite() {
        format!("{:>14.6} ± {:<12.6}", e.mean, e.ci95)
    } else {
        format!("{:>14.6} {:<14}", e.mean, "(no CI)")
    };
    format!("{name:<name_w$} {unit:<unit_w$} {value} n={}", e.n)
}
