//! The switch's table journal: what a switch keeps across a restart of its server.
//!
//! A hardware switch keeps its translation table in the fabric when its control software
//! restarts; the xbind switch server then reads the table back rather than tearing every
//! call down (paper 000 §II-B; ReTINA's ConnectionServer likewise fronts a switch whose
//! state outlives it). Our switch and its server are one process, so the "fabric memory"
//! is this file: every installed connection (with its branches, traffic contract, owner
//! and tag) is written before the server acknowledges the command that made it, and every
//! release likewise. On start the server replays the file into a fresh switch and
//! rewrites it compacted.
//!
//! What is *not* kept, and why:
//! - phase-1 reservations: soft state of a connection manager's VCI cache; the CM
//!   refills its cache (and its recovery protocol re-reserves) when the switch returns,
//!   and keeping them would leak identifiers held by a CM that died meanwhile;
//! - counters and queued cells: measurements and cells in flight, lost as a real switch
//!   loses them on a line-card reset.
//!
//! Durability: records reach the kernel (a `write`) before the acknowledgement, so they
//! survive the server process being killed (the kill test); `fsync` per batch (survive a
//! machine crash) is the `sync` option, off by default because it costs a disk flush per
//! batch.
//!
//! Format: text, one record per line, so an operator can read it:
//! `C id kind in_port vpi/vci class pcr scr mbs cdvt_ps clr buffer owner_hex tag_hex port:vpi/vci,...`
//! and `R id`. Floats are written with Rust's shortest round-trip formatting.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;

use crate::error::FabricError;
use crate::switch::{Branch, Connection, ConnectionKind};

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    out: BufWriter<File>,
    sync: bool,
    /// The file's length after the last batch that was written whole: a batch whose
    /// write fails is cut back to it, so the file never holds a command its client was
    /// told had failed.
    written: u64,
    /// Bytes buffered since.
    pending: u64,
    /// The record being written (kept to reuse its allocation).
    scratch: String,
    /// A failed batch could not be cut back out of the file: nothing more is written
    /// (every later batch fails) until the server restarts and replays what is there.
    broken: bool,
}

/// `s`'s bytes in lower-case hex onto `out`, or `-` for nothing.
fn hex_into(s: &str, out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    if s.is_empty() {
        out.push('-');
        return;
    }
    out.reserve(2 * s.len());
    for b in s.bytes() {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
}

fn unhex(s: &str) -> Option<String> {
    if s == "-" {
        return Some(String::new());
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn class_name(c: ServiceClass) -> &'static str {
    match c {
        ServiceClass::Cbr => "cbr",
        ServiceClass::RtVbr => "rt-vbr",
        ServiceClass::NrtVbr => "nrt-vbr",
        ServiceClass::Ubr => "ubr",
    }
}

fn parse_id(s: &str) -> Option<VcId> {
    let (a, b) = s.split_once('/')?;
    Some(VcId::new(a.parse().ok()?, b.parse().ok()?))
}

/// One connection as a journal line (without the newline).
pub fn encode(c: &Connection) -> String {
    let mut out = String::with_capacity(128);
    encode_into(c, &mut out);
    out
}

/// [`encode`] onto the end of `out`. Written piece by piece into one buffer, not
/// through `format!`: the switch server journals every commit and release before it
/// answers, and the formatted version's allocations were 6% of a loaded `atmlab up`'s
/// samples.
pub fn encode_into(c: &Connection, out: &mut String) {
    use std::fmt::Write as _;
    let t = &c.traffic;
    let kind = if c.kind == ConnectionKind::Vp {
        "vp"
    } else {
        "vc"
    };
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        "C {} {kind} {} {}/{} {} {:?} {:?} {} {} {:?} {} ",
        c.id,
        c.in_port.0,
        c.in_id.vpi.0,
        c.in_id.vci.0,
        class_name(t.class),
        t.pcr.per_sec(),
        t.scr.per_sec(),
        t.mbs,
        t.cdvt_ps,
        c.clr,
        c.buffer_cells,
    );
    hex_into(&c.owner, out);
    out.push(' ');
    hex_into(&c.tag, out);
    out.push(' ');
    for (i, b) in c.branches.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}:{}/{}", b.port.0, b.id.vpi.0, b.id.vci.0);
    }
}

/// A rate or ratio as the journal writes it: finite and not negative (a NaN would make
/// a table unequal to itself, and no commit admits one).
fn rate(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0)
}

/// Parses a `C` line back (counters start at zero).
pub fn decode(line: &str) -> Option<Connection> {
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() != 15 || f[0] != "C" {
        return None;
    }
    let class = match f[5] {
        "cbr" => ServiceClass::Cbr,
        "rt-vbr" => ServiceClass::RtVbr,
        "nrt-vbr" => ServiceClass::NrtVbr,
        "ubr" => ServiceClass::Ubr,
        _ => return None,
    };
    let branches: Option<Vec<Branch>> = f[14]
        .split(',')
        .map(|b| {
            let (p, id) = b.split_once(':')?;
            Some(Branch {
                port: PortId(p.parse().ok()?),
                id: parse_id(id)?,
            })
        })
        .collect();
    Some(Connection {
        id: f[1].parse().ok()?,
        kind: match f[2] {
            "vc" => ConnectionKind::Vc,
            "vp" => ConnectionKind::Vp,
            _ => return None,
        },
        in_port: PortId(f[3].parse().ok()?),
        in_id: parse_id(f[4])?,
        branches: branches?,
        traffic: TrafficDescriptor {
            class,
            pcr: CellRate(rate(f[6])?),
            scr: CellRate(rate(f[7])?),
            mbs: f[8].parse().ok()?,
            cdvt_ps: f[9].parse().ok()?,
        },
        clr: rate(f[10])?,
        admitted: 0.0,
        buffer_cells: f[11].parse().ok()?,
        owner: unhex(f[12])?,
        tag: unhex(f[13])?,
        cells: 0,
        cells_discarded: 0,
    })
}

impl Journal {
    /// Opens (or creates) the journal at `path`, returns it with the connections it
    /// holds, and rewrites it compacted. A line that cannot be read is an error naming
    /// the file and line: a switch must not start on a table it only half understands.
    /// The one exception is a torn last record (the file does not end with a newline:
    /// the process died while writing it): that record was never complete, so its
    /// command was never answered, and it is dropped with a warning naming the file.
    pub fn open(path: &Path, sync: bool) -> Result<(Journal, Vec<Connection>), FabricError> {
        let err = |what: String| FabricError::Setup(format!("journal {}: {what}", path.display()));
        let mut live: BTreeMap<u64, Connection> = BTreeMap::new();
        if path.exists() {
            let mut text = String::new();
            File::open(path)
                .and_then(|mut f| std::io::Read::read_to_string(&mut f, &mut text))
                .map_err(|e| err(e.to_string()))?;
            let torn = !text.is_empty() && !text.ends_with('\n');
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                if torn && n + 1 == lines.len() {
                    tracing::warn!(
                        journal = %path.display(),
                        line = n + 1,
                        "dropping a torn last record (written in part when the switch stopped)"
                    );
                    break;
                }
                if line.is_empty() {
                    continue;
                }
                if let Some(id) = line.strip_prefix("R ") {
                    let id: u64 = id
                        .parse()
                        .map_err(|_| err(format!("line {}: bad release record", n + 1)))?;
                    live.remove(&id);
                } else {
                    let c = decode(line)
                        .ok_or_else(|| err(format!("line {}: bad connection record", n + 1)))?;
                    live.insert(c.id, c);
                }
            }
        }
        // Compact: write the live set to a new file and rename it over the old one, so a
        // crash during compaction leaves one complete file or the other.
        let tmp = path.with_extension("compacting");
        {
            let mut w = BufWriter::new(File::create(&tmp).map_err(|e| err(e.to_string()))?);
            for c in live.values() {
                writeln!(w, "{}", encode(c)).map_err(|e| err(e.to_string()))?;
            }
            w.flush().map_err(|e| err(e.to_string()))?;
            w.get_ref().sync_all().map_err(|e| err(e.to_string()))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| err(e.to_string()))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| err(e.to_string()))?;
        let written = file.metadata().map_err(|e| err(e.to_string()))?.len();
        Ok((
            Journal::over(path, file, sync, written),
            live.into_values().collect(),
        ))
    }

    /// A journal appending to `file` (opened for appending at `path`), `written` bytes
    /// long.
    pub(crate) fn over(path: &Path, file: File, sync: bool, written: u64) -> Journal {
        Journal {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(64 * 1024, file),
            sync,
            written,
            pending: 0,
            scratch: String::with_capacity(256),
            broken: false,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Buffers a connection record (a commit or a branch change).
    pub fn record(&mut self, c: &Connection) {
        let mut line = std::mem::take(&mut self.scratch);
        line.clear();
        encode_into(c, &mut line);
        self.line(&mut line);
        self.scratch = line;
    }

    /// Buffers a release record.
    pub fn record_release(&mut self, id: u64) {
        use std::fmt::Write as _;
        let mut line = std::mem::take(&mut self.scratch);
        line.clear();
        let _ = write!(line, "R {id}");
        self.line(&mut line);
        self.scratch = line;
    }

    /// Buffers `line` and its newline (which it appends).
    fn line(&mut self, line: &mut String) {
        line.push('\n');
        // Errors surface at flush(), which every batch calls.
        let _ = self.out.write_all(line.as_bytes());
        self.pending += line.len() as u64;
    }

    /// Writes the buffered records (one batch's) to the kernel, and to the disk with
    /// `sync`. If they cannot all be written (a full disk, an I/O error), none of them
    /// stays: the file is cut back to its length before the batch and the buffer
    /// dropped, and the error names the file; the caller must then take the batch back.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.broken {
            self.drop_buffer();
            return Err(std::io::Error::other(format!(
                "journal {}: a failed write could not be cut back out of it; restart the switch server",
                self.path.display()
            )));
        }
        let r = self.out.flush().and_then(|()| {
            if self.sync {
                self.out.get_ref().sync_data()
            } else {
                Ok(())
            }
        });
        match r {
            Ok(()) => {
                self.written += self.pending;
                self.pending = 0;
                Ok(())
            }
            Err(e) => {
                self.drop_buffer();
                let what = match self.out.get_ref().set_len(self.written) {
                    Ok(()) => "the batch was not kept".to_string(),
                    Err(cut) => {
                        self.broken = true;
                        format!("and it could not be cut back to its last whole batch: {cut}")
                    }
                };
                Err(std::io::Error::new(
                    e.kind(),
                    format!("journal {}: {e} ({what})", self.path.display()),
                ))
            }
        }
    }

    /// Forgets the records buffered and not yet written.
    fn drop_buffer(&mut self) {
        self.pending = 0;
        if self.out.buffer().is_empty() {
            return;
        }
        match self.out.get_ref().try_clone() {
            Ok(f) => {
                let old = std::mem::replace(&mut self.out, BufWriter::with_capacity(64 * 1024, f));
                // Its buffer goes with it, unwritten.
                let _ = old.into_parts();
            }
            Err(_) => self.broken = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The line as the journal wrote it before `encode_into` (with `format!`): the
    /// reference the faster writer must match byte for byte, since journals written by
    /// either are read by both.
    fn reference(c: &Connection) -> String {
        fn hex(s: &str) -> String {
            if s.is_empty() {
                return "-".into();
            }
            s.bytes().map(|b| format!("{b:02x}")).collect()
        }
        let t = &c.traffic;
        let branches: Vec<String> = c
            .branches
            .iter()
            .map(|b| format!("{}:{}/{}", b.port.0, b.id.vpi.0, b.id.vci.0))
            .collect();
        format!(
            "C {} {} {} {}/{} {} {:?} {:?} {} {} {:?} {} {} {} {}",
            c.id,
            if c.kind == ConnectionKind::Vp {
                "vp"
            } else {
                "vc"
            },
            c.in_port.0,
            c.in_id.vpi.0,
            c.in_id.vci.0,
            class_name(t.class),
            t.pcr.per_sec(),
            t.scr.per_sec(),
            t.mbs,
            t.cdvt_ps,
            c.clr,
            c.buffer_cells,
            hex(&c.owner),
            hex(&c.tag),
            branches.join(","),
        )
    }

    proptest! {
        #[test]
        fn a_line_is_the_formatted_one_and_reads_back(
            id in any::<u64>(),
            vp in any::<bool>(),
            in_port in any::<u16>(),
            vpi in 0u16..4096,
            vci in any::<u16>(),
            class in 0usize..4,
            pcr in 0.0f64..1e9,
            scr in 0.0f64..1e9,
            mbs in any::<u32>(),
            cdvt_ps in any::<u64>(),
            clr in 0.0f64..1.0,
            buffer_cells in any::<u32>(),
            owner in ".{0,12}",
            tag in ".{0,12}",
            branches in proptest::collection::vec((any::<u16>(), 0u16..4096, any::<u16>()), 1..4),
        ) {
            let class = [ServiceClass::Cbr, ServiceClass::RtVbr, ServiceClass::NrtVbr, ServiceClass::Ubr][class];
            let c = Connection {
                id,
                kind: if vp { ConnectionKind::Vp } else { ConnectionKind::Vc },
                in_port: PortId(in_port),
                in_id: VcId::new(vpi, vci),
                branches: branches
                    .iter()
                    .map(|&(p, a, b)| Branch { port: PortId(p), id: VcId::new(a, b) })
                    .collect(),
                traffic: TrafficDescriptor {
                    class,
                    pcr: CellRate(pcr),
                    scr: CellRate(scr),
                    mbs,
                    cdvt_ps,
                },
                clr,
                admitted: 0.0,
                buffer_cells,
                owner,
                tag,
                cells: 0,
                cells_discarded: 0,
            };
            let line = encode(&c);
            prop_assert_eq!(&line, &reference(&c));
            prop_assert_eq!(decode(&line), Some(c));
        }
    }
}
