//! `atmlab host`: an end system on a switch port, sending or receiving AAL5 frames.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use atmlab_core::ids::{PortId, VcId};
use atmlab_core::units::BitRate;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::live::host::HostPort;
use clap::{Args, Subcommand};

use crate::live::{self, Security};

/// `atmlab host`.
#[derive(Debug, Args)]
pub struct HostArgs {
    #[command(subcommand)]
    command: HostCommand,
    #[command(flatten)]
    security: Security,
    /// Print the summary as one JSON object: on stdout, or on stderr when stdout carries
    /// the received data (`recv --out -`).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Args)]
struct Attach {
    /// The switch port's UDP address (printed by `atmlab switch serve` / `net up`).
    #[arg(long)]
    switch: SocketAddr,
    /// This host's UDP address.
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// The virtual channel, VPI/VCI.
    #[arg(long)]
    vc: String,
    /// The host's link rate, which paces sending.
    #[arg(long, default_value = "155.52 Mb/s")]
    rate: String,
    /// Attach through the switch server's control path: its gRPC address (host:port;
    /// `net.json` gives each host's `control` and `port`). The switch port is bound to
    /// this host's address by the AttachHost RPC: how a host port is bound by default
    /// (a port takes an attach datagram only with `attach = "first"`), and it moves a
    /// port bound to an earlier host. Needs --port.
    #[arg(long, requires = "port")]
    control: Option<String>,
    /// The switch port number, with --control.
    #[arg(long, requires = "control")]
    port: Option<u16>,
    /// Our identity (certificate name) for mutual TLS, with --control: the host's own
    /// (`net up` issues one per topology host, which may bind its own port) or admin.
    #[arg(long = "as", default_value = "admin")]
    who: String,
}

#[derive(Debug, Subcommand)]
enum HostCommand {
    /// Send a file as AAL5 frames on a VC.
    Send {
        #[command(flatten)]
        attach: Attach,
        /// Largest frame (octets); the file is cut into frames of this size.
        #[arg(long, default_value_t = 9180)]
        frame_size: usize,
        /// The file ("-" for standard input).
        file: PathBuf,
    },
    /// Receive AAL5 frames on a VC; write their contents, in order, to a file or stdout.
    Recv {
        #[command(flatten)]
        attach: Attach,
        /// Where to write ("-": standard output).
        #[arg(long, default_value = "-")]
        out: PathBuf,
        /// Stop after this many frames.
        #[arg(long)]
        frames: Option<u64>,
        /// Stop after this long without a frame.
        #[arg(long, default_value = "10 s")]
        idle: String,
    },
}

/// Runs `atmlab host`.
pub fn run(args: HostArgs) -> Result<ExitCode> {
    live::init_logging();
    let rt = live::runtime()?;
    rt.block_on(async move {
        match args.command {
            HostCommand::Send { attach, frame_size, file } => {
                if frame_size == 0 || frame_size > 65_535 {
                    bail!("--frame-size must be 1..=65535 (an AAL5 frame's limit), not {frame_size}");
                }
                let data = if file.as_os_str() == "-" {
                    let mut v = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)?;
                    v
                } else {
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?
                };
                let (mut host, vc) = open(&attach, &args.security).await?;
                let (mut frames, mut cells) = (0u64, 0usize);
                for chunk in data.chunks(frame_size) {
                    cells += host.send_frame(vc, chunk).await.map_err(|e| anyhow!("{e}"))?;
                    frames += 1;
                }
                if args.json {
                    let v = serde_json::json!({
                        "frames": frames, "octets": data.len(), "cells": cells,
                        "vc": vc.to_string(), "switch": attach.switch.to_string(),
                    });
                    println!("{v}");
                } else {
                    eprintln!("sent {frames} frames ({} octets, {cells} cells) on {vc} to {}", data.len(), attach.switch);
                }
                Ok(ExitCode::SUCCESS)
            }
            HostCommand::Recv { attach, out, frames, idle } => {
                let idle = atmlab_core::time::Duration::from_str(&idle).map_err(|e| anyhow!("--idle: {e}"))?;
                let idle = Duration::from(idle);
                let (mut host, vc) = open(&attach, &args.security).await?;
                eprintln!("host {} attached to {}, receiving on {vc}", host.local_addr().map_err(|e| anyhow!("{e}"))?, attach.switch);
                let mut sink: Box<dyn Write> = if out.as_os_str() == "-" {
                    Box::new(std::io::stdout().lock())
                } else {
                    Box::new(std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?)
                };
                let link = BitRate::from_str(&attach.rate).map_err(|e| anyhow!("--rate: {e}"))?;
                let (mut n, mut octets, mut other) = (0u64, 0usize, 0u64);
                // Every cell of the frames received on the VC (AAL5: the frame, its
                // 8-octet trailer, padded to 48-octet payloads), for comparing with
                // a switch's counters.
                let mut cells = 0u64;
                // What arrived after the first frame: the first frame's arrival starts the
                // clock, so counting its cells too would credit the interval with a frame
                // that arrived before it (two frames gave twice the rate they showed).
                let (mut cells_after, mut octets_after) = (0u64, 0usize);
                let (mut first, mut last) = (None, std::time::Instant::now());
                while frames.is_none_or(|f| n < f) {
                    let Some(r) = host.recv_frame(idle).await.map_err(|e| anyhow!("{e}"))? else { break };
                    last = std::time::Instant::now();
                    let started = first.is_some();
                    first.get_or_insert(last);
                    if r.vc != vc {
                        other += 1;
                        continue;
                    }
                    if started {
                        cells_after += (r.sdu.len() as u64 + 8).div_ceil(48);
                        octets_after += r.sdu.len();
                    }
                    sink.write_all(&r.sdu)?;
                    cells += (r.sdu.len() as u64 + 8).div_ceil(48);
                    n += 1;
                    octets += r.sdu.len();
                }
                sink.flush()?;
                let rate = first
                    .filter(|_| n > 1)
                    .map(|first| rate_line(n, cells_after, octets_after, (last - first).as_secs_f64(), link));
                if args.json {
                    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
                    let measured = rate.as_deref().is_some_and(|r| !r.starts_with("rate: not measured"));
                    let v = serde_json::json!({
                        "frames": n, "octets": octets, "cells": cells, "vc": vc.to_string(),
                        "reassembly_errors": host.errors, "other_vc_frames": other,
                        "cells_per_s": measured.then(|| cells_after as f64 / secs),
                        "payload_mb_per_s": measured.then(|| octets_after as f64 * 8.0 / secs / 1e6),
                    });
                    if out.as_os_str() == "-" {
                        eprintln!("{v}");
                    } else {
                        println!("{v}");
                    }
                    return Ok(ExitCode::SUCCESS);
                }
                eprintln!(
                    "received {n} frames ({octets} octets) on {vc}; {} reassembly errors, {other} frames on other VCs",
                    host.errors
                );
                if let Some(rate) = rate {
                    eprintln!("{rate}");
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

async fn open(a: &Attach, security: &Security) -> Result<(HostPort, VcId)> {
    let vc = VcId::from_str(&a.vc).map_err(|e| anyhow!("--vc: {e}"))?;
    let rate = BitRate::from_str(&a.rate).map_err(|e| anyhow!("--rate: {e}"))?;
    let host = HostPort::attach(a.bind, a.switch, rate)
        .await
        .map_err(|e| anyhow!("attaching to {}: {e}", a.switch))?;
    if let (Some(control), Some(port)) = (&a.control, a.port) {
        let me = host.local_addr().map_err(|e| anyhow!("{e}"))?;
        security.peer(control);
        let id = security.identity(&a.who)?;
        let a_switch = atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch);
        let ch = atmlab_rpc::channel_to(control, id.as_ref(), a_switch)
            .await
            .with_context(|| format!("connecting to the switch server at {control}"))?;
        GrpcSwitch::new(ch)
            .attach_host(PortId(port), me)
            .await
            .map_err(|e| anyhow!("attaching {me} to port {port} through {control}: {e}"))?;
    } else {
        eprintln!(
            "note: without --control the switch port is bound to this host only if it takes \
             attach datagrams (attach = \"first\"); pass --control ADDR --port N (net.json \
             gives both)"
        );
    }
    Ok((host, vc))
}

/// The receive rate from the first frame to the last, or why there is none: the frames
/// after the first, over the time from the first's arrival to the last's. An interval
/// shorter than the link needs to carry those cells (frames the loopback delivered in a
/// burst) measures the host's socket, not the link, and gives no rate, so a rate above
/// the link's never shows.
fn rate_line(
    frames: u64,
    cells_after: u64,
    octets_after: usize,
    secs: f64,
    link: BitRate,
) -> String {
    let on_link = cells_after as f64 * 424.0 / link.0;
    if secs < on_link || secs <= 0.0 {
        return format!(
            "rate: not measured: {frames} frames arrived within {:.1} us, less than the {:.1} us the link at {:.2} Mb/s needs to carry them",
            secs * 1e6,
            on_link * 1e6,
            link.0 / 1e6
        );
    }
    format!(
        "rate: {:.0} cells/s, {:.1} Mb/s of AAL5 payload, over the {} frames after the first ({:.3} ms from the first frame to the last)",
        cells_after as f64 / secs,
        octets_after as f64 * 8.0 / secs / 1e6,
        frames - 1,
        secs * 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two frames 11 cells apart in 2 us on a 155.52 Mb/s link (which needs 30 us for
    /// them): no rate, rather than one twenty times the link's.
    #[test]
    fn a_rate_above_the_link_is_never_shown() {
        let link = BitRate(155.52e6);
        let l = rate_line(2, 11, 500, 2e-6, link);
        assert!(l.contains("not measured"), "{l}");
        let l = rate_line(101, 1100, 50_000, 0.01, link);
        assert!(
            l.contains("110000 cells/s") && l.contains("40.0 Mb/s"),
            "{l}"
        );
    }
}
