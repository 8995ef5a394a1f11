//! `atmlab wire`: the wire formats of atmlab-wire on the command line.
//!
//! The interfaces of `hec`, `segment`, `reassemble` and `pcap` are fixed (tools outside the
//! repository call them): cells are raw 53-octet records on stdin/stdout, frames are raw
//! bytes, diagnostics go to stderr. This module parses the arguments, reads and writes
//! the files and standard streams, and prints; the work is done by
//! `atmlab_wire::stream` (the cell-stream pipeline, captures, listings, the round trip).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use atmlab_core::ids::VcId;
use atmlab_wire::aal5::{self, ReassemblerConfig};
use atmlab_wire::pcap::{LinkType, PcapWriter};
use atmlab_wire::stream::{self, Report, Roundtrip};
use atmlab_wire::{CellHeader, HeaderFormat, Pti};
use clap::{Args, Subcommand};
use rand::{Rng, SeedableRng};

/// Arguments of `atmlab wire`.
#[derive(Debug, Args)]
pub struct WireArgs {
    #[command(subcommand)]
    cmd: WireCmd,
    /// Print results as JSON: `hec` one object; `decode` one object per cell; `pcap`
    /// and `roundtrip` their summary on stdout; `reassemble` its summary on stderr
    /// (stdout carries the frames). `segment` prints only cells.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum WireCmd {
    /// Print the HEC of a 4-octet cell header given in hex, e.g. `atmlab wire hec 00000001`.
    Hec {
        /// Four octets in hex (8 digits; spaces and colons allowed).
        header: String,
    },
    /// Read one frame from stdin and write its AAL5 cells (53 octets each) to stdout.
    Segment {
        /// Virtual path identifier (8 bits, or 12 with --nni).
        #[arg(long)]
        vpi: u16,
        /// Virtual channel identifier.
        #[arg(long)]
        vci: u16,
        /// Use NNI cell headers (12-bit VPI, no GFC).
        #[arg(long)]
        nni: bool,
        /// CPCS-UU octet of the trailer.
        #[arg(long, default_value_t = 0)]
        uu: u8,
        /// CPI octet of the trailer.
        #[arg(long, default_value_t = 0)]
        cpi: u8,
        /// Set the cell loss priority bit on every cell.
        #[arg(long)]
        clp: bool,
    },
    /// Read 53-octet cells from stdin; write every good frame's payload to stdout.
    ///
    /// Each error is reported on stderr; the exit status is 1 if there was any.
    Reassemble {
        /// Cells have NNI headers.
        #[arg(long)]
        nni: bool,
        /// The largest frame accepted, in octets.
        #[arg(long, default_value_t = aal5::MAX_SDU)]
        max_sdu: usize,
    },
    /// Read cells from stdin and write the reassembled frames (bad ones too, as received)
    /// to a LINKTYPE_SUNATM capture that Wireshark and tshark open.
    Pcap {
        /// The capture file to write.
        #[arg(long)]
        out: PathBuf,
        /// Cells have NNI headers.
        #[arg(long)]
        nni: bool,
        /// Capture format: `sunatm` (LINKTYPE_SUNATM), or `erf` (LINKTYPE_ERF AAL5
        /// records, whose AAL5 trailer and CRC Wireshark decodes and checks).
        #[arg(long, value_enum, default_value_t = Link::Sunatm)]
        linktype: Link,
    },
    /// Print one line per cell read from stdin: VPI/VCI, payload type, CLP and HEC.
    Decode {
        /// Cells have NNI headers.
        #[arg(long)]
        nni: bool,
    },
    /// Segment a file into AAL5 frames and cells, optionally corrupt some cells, reassemble
    /// them, check the result and write a capture: the wire formats end to end.
    Roundtrip {
        /// The file to send.
        file: PathBuf,
        /// VPI of the channel.
        #[arg(long, default_value_t = 0)]
        vpi: u16,
        /// VCI of the channel.
        #[arg(long, default_value_t = 100)]
        vci: u16,
        /// Largest frame: the file is cut into frames of this many octets.
        #[arg(long, default_value_t = 9180)]
        mtu: usize,
        /// Flip one random payload bit in this many random cells.
        #[arg(long, default_value_t = 0)]
        corrupt: usize,
        /// Seed for the corruption.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the reassembled frames to this capture file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Capture format for --pcap.
        #[arg(long, value_enum, default_value_t = Link::Sunatm)]
        linktype: Link,
    },
}

/// Capture formats, as the command line names them.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Link {
    /// LINKTYPE_SUNATM (123): VPI/VCI pseudo-header.
    Sunatm,
    /// LINKTYPE_ERF (197), AAL5 records: Wireshark checks the AAL5 CRC.
    Erf,
}

impl From<Link> for LinkType {
    fn from(l: Link) -> LinkType {
        match l {
            Link::Sunatm => LinkType::SunAtm,
            Link::Erf => LinkType::Erf,
        }
    }
}

fn format_of(nni: bool) -> HeaderFormat {
    if nni {
        HeaderFormat::Nni
    } else {
        HeaderFormat::Uni
    }
}

fn read_stdin() -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut buf)
        .context("reading stdin")?;
    Ok(buf)
}

/// A stream's report as one JSON object.
fn report_json(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "cells": r.cells,
        "frames": r.frames,
        "octets": r.octets,
        "corrected_headers": r.corrected_headers,
        "faults": r.faults.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
    })
}

/// Prints a stream's faults and notes on stderr.
fn print_diagnostics(report: &Report) {
    for line in report.diagnostics() {
        eprintln!("atmlab wire: {line}");
    }
}

fn exit_code(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs one `atmlab wire` command.
pub fn run(args: WireArgs) -> Result<ExitCode> {
    let json = args.json;
    match args.cmd {
        WireCmd::Hec { header } => {
            let h = parse_header_hex(&header)?;
            let hec = atmlab_wire::crc::hec(h);
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "header": h.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                        "hec": format!("{hec:02x}"),
                    })
                );
            } else {
                println!("{hec:02x}");
            }
            Ok(ExitCode::SUCCESS)
        }
        WireCmd::Segment {
            vpi,
            vci,
            nni,
            uu,
            cpi,
            clp,
        } => {
            let frame = read_stdin()?;
            let header = CellHeader {
                format: format_of(nni),
                gfc: 0,
                vpi,
                vci,
                pti: Pti::user(false),
                clp,
            };
            let cells = aal5::segment(header, &frame, uu, cpi)
                .context("cannot segment the frame read from stdin")?;
            let mut out = std::io::stdout().lock();
            out.write_all(&cells).context("writing cells to stdout")?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        WireCmd::Reassemble { nni, max_sdu } => {
            let cells = read_stdin()?;
            let mut out = std::io::stdout().lock();
            let cfg = ReassemblerConfig {
                max_sdu,
                timeout: None,
            };
            let written = stream::reassemble(&cells, format_of(nni), cfg, &mut out);
            out.flush()?;
            let report = written.context("writing frames to stdout")?;
            if json {
                eprintln!("{}", report_json(&report));
            } else {
                print_diagnostics(&report);
            }
            Ok(exit_code(report.is_clean()))
        }
        WireCmd::Pcap { out, nni, linktype } => {
            let cells = read_stdin()?;
            let file = std::fs::File::create(&out)
                .with_context(|| format!("creating {}", out.display()))?;
            let mut w = PcapWriter::with_link_type(std::io::BufWriter::new(file), linktype.into())?;
            let captured =
                stream::capture(&cells, format_of(nni), ReassemblerConfig::default(), &mut w);
            let n = w.records();
            w.finish()
                .with_context(|| format!("writing {}", out.display()))?;
            if json {
                let mut v = report_json(&captured.report);
                v["out"] = out.display().to_string().into();
                v["records"] = n.into();
                v["not_captured"] = captured
                    .not_captured
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .into();
                println!("{v}");
                return Ok(exit_code(captured.is_clean()));
            }
            print_diagnostics(&captured.report);
            for p in &captured.not_captured {
                eprintln!("atmlab wire pcap: {p}");
            }
            eprintln!("atmlab wire pcap: wrote {n} frame(s) to {}", out.display());
            Ok(exit_code(captured.is_clean()))
        }
        WireCmd::Decode { nni } if json => {
            let data = read_stdin()?;
            let mut out = std::io::stdout().lock();
            let mut bad = 0;
            let mut partial = None;
            for (i, chunk) in data.chunks(atmlab_wire::cell::CELL_LEN).enumerate() {
                let Ok(c) = atmlab_wire::Cell::new_checked(chunk) else {
                    partial = Some(chunk.len());
                    break;
                };
                let l = stream::CellLine::of(i, &c, format_of(nni));
                bad += usize::from(!l.hec_ok);
                let h = l.header;
                let mut v = serde_json::json!({
                    "index": l.index, "vpi": h.vpi, "vci": h.vci, "pt": h.pti.name(),
                    "clp": u8::from(h.clp), "hec": format!("{:02x}", l.hec), "hec_ok": l.hec_ok,
                });
                if h.format == HeaderFormat::Uni {
                    v["gfc"] = h.gfc.into();
                }
                writeln!(out, "{v}").context("writing to stdout")?;
            }
            if let Some(n) = partial {
                eprintln!(
                    "atmlab wire decode: input ends with {n} octet(s) that do not make a whole cell"
                );
            }
            Ok(exit_code(bad == 0 && partial.is_none()))
        }
        WireCmd::Decode { nni } => {
            let listing = stream::decode(
                &read_stdin()?,
                format_of(nni),
                &mut std::io::stdout().lock(),
            )?;
            if let Some(n) = listing.partial {
                eprintln!(
                    "atmlab wire decode: input ends with {n} octet(s) that do not make a whole cell"
                );
            }
            Ok(exit_code(listing.is_clean()))
        }
        WireCmd::Roundtrip {
            file,
            vpi,
            vci,
            mtu,
            corrupt,
            seed,
            pcap,
            linktype,
        } => roundtrip(RoundtripArgs {
            linktype: linktype.into(),
            file,
            vc: VcId::new(vpi, vci),
            mtu,
            corrupt,
            seed,
            pcap,
            json,
        }),
    }
}

/// The four header octets of `atmlab wire hec`, from hex digits (spaces, colons,
/// underscores and a leading `0x` allowed).
fn parse_header_hex(s: &str) -> Result<[u8; 4]> {
    let digits: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | ':' | '_'))
        .collect();
    let digits = digits.strip_prefix("0x").unwrap_or(&digits);
    let bytes = hex::decode(digits).with_context(|| format!("{s:?} is not hexadecimal"))?;
    let Ok(h) = <[u8; 4]>::try_from(bytes.as_slice()) else {
        bail!(
            "{s:?} is {} octet(s); a cell header without its HEC is 4 octets (8 hex digits)",
            bytes.len()
        );
    };
    Ok(h)
}

struct RoundtripArgs {
    file: PathBuf,
    vc: VcId,
    mtu: usize,
    corrupt: usize,
    seed: u64,
    pcap: Option<PathBuf>,
    linktype: LinkType,
    json: bool,
}

fn roundtrip(a: RoundtripArgs) -> Result<ExitCode> {
    let data = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    if a.mtu == 0 || a.mtu > aal5::MAX_SDU {
        bail!(
            "--mtu {} is out of range: a frame carries 1 to {} octets",
            a.mtu,
            aal5::MAX_SDU
        );
    }
    if data.is_empty() {
        bail!("{} is empty: there is nothing to send", a.file.display());
    }
    let header = CellHeader {
        format: HeaderFormat::Uni,
        gfc: 0,
        vpi: a.vc.vpi.0,
        vci: a.vc.vci.0,
        pti: Pti::user(false),
        clp: false,
    };
    let mut trip = Roundtrip::segment(&data, header, a.mtu).context("segmenting")?;
    // The seeded generator draws the damage here, so that a seed gives the same run.
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let flips = stream::pick_flips(trip.cell_count(), a.corrupt, |n| rng.random_range(0..n));
    trip.corrupt(&flips).context("corrupting")?;
    let mut writer = match &a.pcap {
        Some(p) => Some(PcapWriter::with_link_type(
            std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            ),
            a.linktype,
        )?),
        None => None,
    };
    let got = trip
        .receive(writer.as_mut())
        .context("writing the capture")?;
    if let Some(w) = writer {
        w.finish().context("writing the capture")?;
    }
    let (n_cells, frames_sent) = (trip.cell_count(), trip.frames_sent());
    let summary = serde_json::json!({
        "file": a.file.display().to_string(),
        "vc": a.vc.to_string(),
        "octets": data.len(),
        "frames_sent": frames_sent,
        "cells": n_cells,
        "cells_corrupted": trip.cells_corrupted(),
        "frames_delivered": got.report.frames,
        "frames_bad": got.frames_bad,
        "octets_delivered": got.octets.len(),
        "identical": got.identical,
        "frames_hit": got.frames_hit,
        "check_passed": got.check_passed,
        "capture": a.pcap.as_ref().map(|p| p.display().to_string()),
    });
    if a.json {
        println!("{summary:#}");
    } else {
        println!(
            "sent {} octets of {} as {frames_sent} AAL5 frame(s) in {n_cells} cells on VC {}",
            data.len(),
            a.file.display(),
            a.vc
        );
        if trip.cells_corrupted() > 0 {
            println!(
                "corrupted one payload bit in each of {} cell(s) (seed {})",
                trip.cells_corrupted(),
                a.seed
            );
        }
        println!(
            "reassembled {} good frame(s), {} octets; {} bad frame(s) detected",
            got.report.frames,
            got.octets.len(),
            got.frames_bad
        );
        for e in &got.report.faults {
            println!("  {e}");
        }
        if got.identical {
            println!("the file came back byte for byte");
        } else if got.check_passed {
            println!("every frame hit was detected; every other frame came back intact");
        } else {
            println!("MISMATCH: the frames delivered differ from the frames sent");
        }
        if let Some(p) = &a.pcap {
            println!(
                "capture written to {} (open it with wireshark or `tshark -V -r`)",
                p.display()
            );
        }
    }
    Ok(exit_code(got.check_passed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_hex_forms() {
        assert_eq!(parse_header_hex("00000001").unwrap(), [0, 0, 0, 1]);
        assert_eq!(
            parse_header_hex("00:10:0a:40").unwrap(),
            [0, 0x10, 0x0a, 0x40]
        );
        assert!(
            parse_header_hex("000001")
                .unwrap_err()
                .to_string()
                .contains("3 octet")
        );
        assert!(parse_header_hex("zz000001").is_err());
    }
}
