//! `atmlab wire`: the wire formats of atmlab-wire on the command line.
//!
//! The interfaces of `hec`, `segment`, `reassemble` and `pcap` are fixed (tools outside the
//! repository call them): cells are raw 53-octet records on stdin/stdout, frames are raw
//! bytes, diagnostics go to stderr. Cells read from a stream carry no timestamps; they are
//! timed as if back to back on a 155.52 Mb/s link (one cell every 2.726 us), which is what
//! the capture files show.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use atmlab_core::ids::VcId;
use atmlab_core::time::{Duration, Instant};
use atmlab_wire::aal5::{self, ReassemblerConfig, VcReassembler};
use atmlab_wire::cell::{CELL_LEN, HecOutcome, vci};
use atmlab_wire::pcap::{Direction, LinkType, PcapWriter, SunAtmRecord};
use atmlab_wire::{Cell, CellHeader, HeaderFormat, HecReceiver, Pti, WireError};
use clap::{Args, Subcommand};
use rand::{Rng, SeedableRng};

/// Arguments of `atmlab wire`.
#[derive(Debug, Args)]
pub struct WireArgs {
    #[command(subcommand)]
    cmd: WireCmd,
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
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
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

/// Cells from a stream are timed as if back to back on an OC-3 link.
const CELL_TIME: Duration = Duration::from_picos(2_726_337);

fn read_stdin() -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut buf)
        .context("reading stdin")?;
    Ok(buf)
}

/// Runs one `atmlab wire` command.
pub fn run(args: WireArgs) -> Result<ExitCode> {
    match args.cmd {
        WireCmd::Hec { header } => {
            let h = parse_header_hex(&header)?;
            println!("{:02x}", atmlab_wire::crc::hec(h));
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
            let mut write_err = None;
            let report = process_cells(&cells, format_of(nni), cfg, |ev| {
                if let Event::Frame { sdu, .. } = ev
                    && write_err.is_none()
                {
                    write_err = out.write_all(sdu).err();
                }
            });
            out.flush()?;
            if let Some(e) = write_err {
                return Err(e).context("writing frames to stdout");
            }
            report.print_diagnostics();
            Ok(report.exit_code())
        }
        WireCmd::Pcap { out, nni, linktype } => {
            let cells = read_stdin()?;
            let file = std::fs::File::create(&out)
                .with_context(|| format!("creating {}", out.display()))?;
            let mut w = PcapWriter::with_link_type(std::io::BufWriter::new(file), linktype.into())?;
            let mut problems = Vec::new();
            let report =
                process_cells(&cells, format_of(nni), ReassemblerConfig::default(), |ev| {
                    let (vc, time, pdu) = match ev {
                        Event::Frame { vc, time, pdu, .. } => (vc, time, pdu),
                        Event::Bad {
                            vc: Some(vc),
                            time,
                            pdu,
                            ..
                        } if !pdu.is_empty() => (vc, time, pdu),
                        Event::Bad { .. } => return,
                    };
                    let rec = SunAtmRecord {
                        time,
                        direction: Direction::Received,
                        vpi: vc.vpi.0,
                        vci: vc.vci.0,
                        pdu,
                    };
                    if let Err(e) = w.write(&rec) {
                        problems.push(format!("VC {vc}: frame not captured: {e}"));
                    }
                });
            let n = w.records();
            w.finish()
                .with_context(|| format!("writing {}", out.display()))?;
            report.print_diagnostics();
            for p in &problems {
                eprintln!("atmlab wire pcap: {p}");
            }
            eprintln!("atmlab wire pcap: wrote {n} frame(s) to {}", out.display());
            Ok(if problems.is_empty() {
                report.exit_code()
            } else {
                ExitCode::from(1)
            })
        }
        WireCmd::Decode { nni } => decode(&read_stdin()?, format_of(nni)),
        WireCmd::Roundtrip {
            file,
            vpi,
            vci,
            mtu,
            corrupt,
            seed,
            pcap,
            linktype,
            json,
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

/// What the cell-stream processor reports to its caller, one event per finished frame.
enum Event<'a> {
    /// A good frame: its SDU and the whole CPCS-PDU it came in.
    Frame {
        vc: VcId,
        time: Instant,
        sdu: &'a [u8],
        pdu: &'a [u8],
    },
    /// A bad frame or cell; `pdu` holds the PDU as received when there is one.
    Bad {
        vc: Option<VcId>,
        time: Instant,
        pdu: &'a [u8],
    },
}

/// Counts and diagnostics of one cell stream.
#[derive(Default)]
struct Report {
    cells: u64,
    frames: u64,
    octets: u64,
    corrected_headers: u64,
    errors: Vec<String>,
}

impl Report {
    fn print_diagnostics(&self) {
        for e in &self.errors {
            eprintln!("atmlab wire: {e}");
        }
        if self.corrected_headers > 0 {
            eprintln!(
                "atmlab wire: note: {} cell header(s) had a single-bit error, corrected by the HEC",
                self.corrected_headers
            );
        }
    }
    fn exit_code(&self) -> ExitCode {
        if self.errors.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

/// Runs a stream of cells through the I.432.1 HEC receiver and per-VC AAL5 reassembly.
fn process_cells(
    data: &[u8],
    format: HeaderFormat,
    cfg: ReassemblerConfig,
    mut sink: impl FnMut(Event<'_>),
) -> Report {
    let mut rep = Report::default();
    let mut hec = HecReceiver::new();
    let mut d = VcReassembler::new(format, cfg);
    let mut frame_no: BTreeMap<VcId, u64> = BTreeMap::new();
    for (i, chunk) in data.chunks(CELL_LEN).enumerate() {
        let time = Instant::ZERO + CELL_TIME.saturating_mul(i as u64);
        let Ok(cell) = <[u8; CELL_LEN]>::try_from(chunk) else {
            rep.errors.push(format!(
                "input ends with {} octet(s) that do not make a whole 53-octet cell",
                chunk.len()
            ));
            break;
        };
        rep.cells += 1;
        let mut cell = cell;
        match hec.check(&mut cell) {
            HecOutcome::Valid => {}
            HecOutcome::Corrected(_) => rep.corrected_headers += 1,
            HecOutcome::Discard => {
                rep.errors.push(format!(
                    "cell {i}: header error the HEC cannot correct; cell discarded"
                ));
                sink(Event::Bad {
                    vc: None,
                    time,
                    pdu: &[],
                });
                continue;
            }
        }
        let outcome = match d.handle_cell(time, &cell) {
            None => continue,
            Some((vc, Ok(f))) => (vc, Ok(f.sdu.len())),
            Some((vc, Err(e))) => (vc, Err(e)),
        };
        let (vc, result) = outcome;
        let Some(vc) = vc else {
            if let Err(e) = result {
                rep.errors.push(format!("cell {i}: {e}"));
            }
            continue;
        };
        let n = frame_no.entry(vc).or_default();
        *n += 1;
        let pdu = d.vc(vc).map(|r| r.last_pdu()).unwrap_or_default();
        match result {
            Ok(len) => {
                rep.frames += 1;
                rep.octets += len as u64;
                sink(Event::Frame {
                    vc,
                    time,
                    sdu: &pdu[..len.min(pdu.len())],
                    pdu,
                });
            }
            Err(e) => {
                rep.errors
                    .push(format!("VC {vc} frame {n} (ending at cell {i}): {e}"));
                sink(Event::Bad {
                    vc: Some(vc),
                    time,
                    pdu,
                });
            }
        }
    }
    for (vc, r) in d.vcs() {
        if r.pending() > 0 {
            rep.errors.push(format!(
                "VC {vc}: input ends inside a frame ({} octets received, no end-of-frame cell)",
                r.pending()
            ));
        }
    }
    rep
}

fn pti_name(p: Pti) -> &'static str {
    match p {
        Pti::UserData {
            congestion: false,
            sdu_type: false,
        } => "user",
        Pti::UserData {
            congestion: false,
            sdu_type: true,
        } => "user,end",
        Pti::UserData {
            congestion: true,
            sdu_type: false,
        } => "user,efci",
        Pti::UserData {
            congestion: true,
            sdu_type: true,
        } => "user,efci,end",
        Pti::OamF5Segment => "oam-f5-segment",
        Pti::OamF5EndToEnd => "oam-f5-end-to-end",
        Pti::ResourceManagement => "rm",
        Pti::Reserved => "reserved",
    }
}

fn decode(data: &[u8], format: HeaderFormat) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let mut bad = false;
    for (i, chunk) in data.chunks(CELL_LEN).enumerate() {
        let Ok(c) = Cell::new_checked(chunk) else {
            eprintln!(
                "atmlab wire decode: input ends with {} octet(s) that do not make a whole cell",
                chunk.len()
            );
            bad = true;
            break;
        };
        let hec_ok = c.verify_hec();
        bad |= !hec_ok;
        let vpi = c.vpi(format);
        let v = c.vci();
        let gfc = match format {
            HeaderFormat::Uni => format!(" gfc={}", c.gfc()),
            HeaderFormat::Nni => String::new(),
        };
        let note = vci::name(v).map(|n| format!(" ({n})")).unwrap_or_default();
        writeln!(
            out,
            "{i:>6} {vpi}/{v}{note}{gfc} pt={} clp={} hec={:02x} {}",
            pti_name(c.pti()),
            u8::from(c.clp()),
            c.hec(),
            if hec_ok { "ok" } else { "BAD" },
        )?;
    }
    Ok(if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
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
    let mut cells = Vec::new();
    let mut frames_sent = 0u64;
    for frame in data.chunks(a.mtu) {
        aal5::Segmenter::new(header, frame, 0, 0)
            .map_err(|e: WireError| anyhow::anyhow!(e))
            .context("segmenting")?
            .write_all(&mut cells);
        frames_sent += 1;
    }
    let n_cells = cells.len() / CELL_LEN;
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let mut hit = std::collections::BTreeSet::new();
    while hit.len() < a.corrupt.min(n_cells) {
        hit.insert(rng.random_range(0..n_cells));
    }
    for &c in &hit {
        let bit = rng.random_range(0..48 * 8);
        cells[c * CELL_LEN + 5 + bit / 8] ^= 0x80 >> (bit % 8);
    }
    let mut received = Vec::with_capacity(data.len());
    let mut writer = match &a.pcap {
        Some(p) => Some(PcapWriter::with_link_type(
            std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            ),
            a.linktype,
        )?),
        None => None,
    };
    let mut pcap_err = None;
    let report = process_cells(
        &cells,
        HeaderFormat::Uni,
        ReassemblerConfig::default(),
        |ev| {
            let (vc, time, pdu) = match ev {
                Event::Frame { vc, time, sdu, pdu } => {
                    received.extend_from_slice(sdu);
                    (vc, time, pdu)
                }
                Event::Bad {
                    vc: Some(vc),
                    time,
                    pdu,
                } => (vc, time, pdu),
                Event::Bad { .. } => return,
            };
            if let Some(w) = writer.as_mut()
                && pcap_err.is_none()
            {
                pcap_err = w
                    .write(&SunAtmRecord {
                        time,
                        direction: Direction::Received,
                        vpi: vc.vpi.0,
                        vci: vc.vci.0,
                        pdu,
                    })
                    .err();
            }
        },
    );
    if let Some(e) = pcap_err {
        return Err(e).context("writing the capture");
    }
    if let Some(w) = writer {
        w.finish().context("writing the capture")?;
    }
    let bad_frames = report.errors.len() as u64;
    // Every frame with a corrupted cell must be reported bad, and every other frame must
    // come back intact and in order: the CRC-32 must miss nothing and spoil nothing.
    let mut expected = Vec::with_capacity(data.len());
    let mut frames_hit = 0u64;
    let mut first_cell = 0;
    for frame in data.chunks(a.mtu) {
        let n = aal5::cells_for(frame.len());
        if hit.range(first_cell..first_cell + n).next().is_some() {
            frames_hit += 1;
        } else {
            expected.extend_from_slice(frame);
        }
        first_cell += n;
    }
    let intact = received == expected && bad_frames == frames_hit;
    let summary = serde_json::json!({
        "file": a.file.display().to_string(),
        "vc": a.vc.to_string(),
        "octets": data.len(),
        "frames_sent": frames_sent,
        "cells": n_cells,
        "cells_corrupted": hit.len(),
        "frames_delivered": report.frames,
        "frames_bad": bad_frames,
        "octets_delivered": received.len(),
        "identical": received == data,
        "frames_hit": frames_hit,
        "check_passed": intact,
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
        if !hit.is_empty() {
            println!(
                "corrupted one payload bit in each of {} cell(s) (seed {})",
                hit.len(),
                a.seed
            );
        }
        println!(
            "reassembled {} good frame(s), {} octets; {} bad frame(s) detected",
            report.frames,
            received.len(),
            bad_frames
        );
        for e in &report.errors {
            println!("  {e}");
        }
        if received == data {
            println!("the file came back byte for byte");
        } else if intact {
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
    Ok(if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
