//! The connection manager's journal (issue 10): every established connection is written
//! to SQLite before its caller hears that it is up, and removed when it is released, so a
//! manager killed at any moment can be restarted and know every connection it
//! acknowledged. The start-up audit (`cm::live`) then reconciles the journal with the
//! switches: connections whose hops all exist are taken back, the others rolled back,
//! and cross-connects and reservations the journal does not explain are released.
//!
//! Writes are grouped: the live shell applies one transaction per turn of its loop
//! (every call established or released in that turn), in WAL mode with
//! `synchronous = NORMAL`, which survives the death of the process (what `kill -9`
//! tests) though not of the machine's power; `synchronous = FULL` would add an fsync to
//! each turn.

use std::path::Path;

use atmlab_core::ids::VcId;
use atmlab_core::time::Duration;
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;
use rusqlite::{Connection, params};

use crate::ControlError;
use crate::cm::core::{CallView, HopSpec};

/// A journaled connection: the manager's view and its end points.
#[derive(Debug, Clone, PartialEq)]
pub struct JournaledCall {
    /// The call, as established.
    pub view: CallView,
    /// Source host.
    pub source: String,
    /// Destination host.
    pub destination: String,
    /// What its contract carries besides the descriptor (TINA echoes it in every answer,
    /// so a restarted LNC must know it; zero for the other managers).
    pub bounds: QosBounds,
}

/// A contract's target cell loss ratio and delay bounds (cm.proto's CellQos besides the
/// traffic descriptor), journaled beside the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QosBounds {
    /// Target cell loss ratio (0: the switch's default).
    pub clr: f64,
    /// Cell transfer delay bound, microseconds.
    pub ctd_us: u64,
    /// Cell delay variation bound, microseconds.
    pub cdv_us: u64,
    /// Burst tolerance, microseconds.
    pub burst_tolerance_us: u64,
}

impl QosBounds {
    fn to_json(self) -> String {
        serde_json::json!([self.clr, self.ctd_us, self.cdv_us, self.burst_tolerance_us]).to_string()
    }

    fn from_json(text: &str) -> Option<QosBounds> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let a = v.as_array()?;
        Some(QosBounds {
            clr: a.first()?.as_f64()?,
            ctd_us: a.get(1)?.as_u64()?,
            cdv_us: a.get(2)?.as_u64()?,
            burst_tolerance_us: a.get(3)?.as_u64()?,
        })
    }
}

/// The journal: one SQLite file.
#[derive(Debug)]
pub struct CmJournal {
    db: Connection,
    /// The file, for the errors (issue 24, item 7: "file is not a database" must say
    /// which file).
    path: String,
}

/// `e` with the journal's file named first.
fn named(path: &str, e: ControlError) -> ControlError {
    match e {
        ControlError::Serve { what, reason } if !reason.starts_with(path) => ControlError::Serve {
            what,
            reason: format!("{path}: {reason}"),
        },
        e => e,
    }
}

fn jerr(what: &str, e: impl std::fmt::Display) -> ControlError {
    ControlError::Serve {
        what: "the journal",
        reason: format!("{what}: {e}"),
    }
}

fn class_code(c: ServiceClass) -> i64 {
    match c {
        ServiceClass::Cbr => 1,
        ServiceClass::RtVbr => 2,
        ServiceClass::NrtVbr => 3,
        ServiceClass::Ubr => 4,
    }
}

fn class_of(code: i64) -> Option<ServiceClass> {
    Some(match code {
        1 => ServiceClass::Cbr,
        2 => ServiceClass::RtVbr,
        3 => ServiceClass::NrtVbr,
        4 => ServiceClass::Ubr,
        _ => return None,
    })
}

/// A view's tree as JSON: `{"entries": [[switch, in_port, out_port, connection, in
/// VPI, in VCI, out VPI, out VCI, parent entry or null], ...], "leaves": [[name,
/// entry], ...]}`. (Journals written before multipoint hold a bare array of 8-element
/// entries: a path, whose one leaf is the destination column.)
fn hops_json(v: &CallView) -> String {
    let entries: Vec<serde_json::Value> = v
        .hops
        .iter()
        .zip(&v.parents)
        .map(|((h, conn, i, o), p)| {
            serde_json::json!([
                &*h.switch, h.in_port, h.out_port, conn, i.vpi.0, i.vci.0, o.vpi.0, o.vci.0, p
            ])
        })
        .collect();
    serde_json::json!({ "entries": entries, "leaves": v.leaves }).to_string()
}

/// The tree of a journaled view: entries, parents and leaves.
type JournaledTree = (
    Vec<(HopSpec, u64, VcId, VcId)>,
    Vec<Option<usize>>,
    Vec<(String, usize)>,
);

fn tree_of(text: &str, destination: &str) -> Option<JournaledTree> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let (entries, leaves) = match &v {
        serde_json::Value::Array(a) => (a, None),
        serde_json::Value::Object(o) => (o.get("entries")?.as_array()?, Some(o.get("leaves")?)),
        _ => return None,
    };
    let hops = hops_of(entries)?;
    let (parents, leaves) = match leaves {
        None => CallView::path_tree(hops.len(), destination),
        Some(l) => {
            let parents = entries
                .iter()
                .map(|e| match e.as_array()?.get(8)? {
                    serde_json::Value::Null => Some(None),
                    p => Some(Some(usize::try_from(p.as_u64()?).ok()?)),
                })
                .collect::<Option<Vec<_>>>()?;
            let leaves = l
                .as_array()?
                .iter()
                .map(|x| {
                    let a = x.as_array()?;
                    Some((
                        a.first()?.as_str()?.to_string(),
                        usize::try_from(a.get(1)?.as_u64()?).ok()?,
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            (parents, leaves)
        }
    };
    Some((hops, parents, leaves))
}

fn hops_of(entries: &[serde_json::Value]) -> Option<Vec<(HopSpec, u64, VcId, VcId)>> {
    let mut out = Vec::new();
    for h in entries {
        let a = h.as_array()?;
        let n = |i: usize| a.get(i).and_then(|x| x.as_u64());
        let u16_at = |i: usize| n(i).and_then(|x| u16::try_from(x).ok());
        out.push((
            HopSpec {
                switch: a.first()?.as_str()?.into(),
                in_port: u16_at(1)?,
                out_port: u16_at(2)?,
            },
            n(3)?,
            VcId::new(u16_at(4)?, u16_at(5)?),
            VcId::new(u16_at(6)?, u16_at(7)?),
        ));
    }
    Some(out)
}

impl CmJournal {
    /// Opens (creating the file if needed) the journal at `path`. Its directory must
    /// exist: a mistyped directory is an error, not a fresh, empty journal.
    pub fn open(path: &Path) -> Result<Self, ControlError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(jerr(
                &path.display().to_string(),
                format!("its directory {} does not exist", dir.display()),
            ));
        }
        let shown = path.display().to_string();
        let db = Connection::open(path).map_err(|e| jerr(&shown, e))?;
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS calls (
                 id INTEGER PRIMARY KEY,
                 source TEXT NOT NULL,
                 destination TEXT NOT NULL,
                 hops TEXT NOT NULL,
                 class INTEGER NOT NULL,
                 pcr REAL NOT NULL,
                 scr REAL NOT NULL,
                 mbs INTEGER NOT NULL,
                 cdvt_ps INTEGER NOT NULL,
                 setup_ps INTEGER NOT NULL,
                 tag TEXT NOT NULL,
                 bounds TEXT
             );",
        )
        .map_err(|e| named(&shown, jerr("creating its table", e)))?;
        // Journals written before the bounds were kept get the column (empty: zero).
        let has_bounds = db.prepare("SELECT bounds FROM calls LIMIT 0").is_ok();
        if !has_bounds {
            db.execute_batch("ALTER TABLE calls ADD COLUMN bounds TEXT")
                .map_err(|e| named(&shown, jerr("adding the bounds column", e)))?;
        }
        Ok(CmJournal { db, path: shown })
    }

    /// Every journaled connection, by id. A row that cannot be read back is an error
    /// naming it (the journal is ours; a damaged one must not be half-believed).
    pub fn load(&self) -> Result<Vec<JournaledCall>, ControlError> {
        self.load_rows().map_err(|e| named(&self.path, e))
    }

    fn load_rows(&self) -> Result<Vec<JournaledCall>, ControlError> {
        let mut st = self
            .db
            .prepare(
                "SELECT id, source, destination, hops, class, pcr, scr, mbs, cdvt_ps, setup_ps, tag,
                 bounds FROM calls ORDER BY id",
            )
            .map_err(|e| jerr("reading", e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, f64>(5)?,
                    r.get::<_, f64>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
                    r.get::<_, i64>(9)?,
                    r.get::<_, String>(10)?,
                    r.get::<_, Option<String>>(11)?,
                ))
            })
            .map_err(|e| jerr("reading", e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, source, destination, hops, class, pcr, scr, mbs, cdvt, setup, tag, bounds) =
                row.map_err(|e| jerr("reading a row", e))?;
            let bad = |what: &str| jerr(&format!("connection {id}"), what);
            let (hops, parents, leaves) =
                tree_of(&hops, &destination).ok_or_else(|| bad("its hops do not parse"))?;
            if hops.is_empty() || leaves.iter().any(|l| l.1 >= hops.len()) {
                return Err(bad("it has no hops, or a leaf beyond them"));
            }
            let traffic = TrafficDescriptor {
                class: class_of(class).ok_or_else(|| bad("unknown service class"))?,
                pcr: CellRate(pcr),
                scr: CellRate(scr),
                mbs: u32::try_from(mbs).map_err(|_| bad("bad MBS"))?,
                cdvt_ps: u64::try_from(cdvt).map_err(|_| bad("bad CDVT"))?,
            };
            let view = CallView {
                id: u64::try_from(id).map_err(|_| bad("negative id"))?,
                source_vc: hops[0].2,
                destination_vc: leaves
                    .first()
                    .map_or(hops[hops.len() - 1].3, |l| hops[l.1].3),
                hops,
                parents,
                leaves,
                setup: Duration::from_picos(u64::try_from(setup).unwrap_or(0)),
                traffic,
                tag,
                // Not journaled: a count of the process that set the call up.
                invocations: 0,
            };
            let bounds = match bounds {
                None => QosBounds::default(),
                Some(b) => {
                    QosBounds::from_json(&b).ok_or_else(|| bad("its bounds do not parse"))?
                }
            };
            out.push(JournaledCall {
                view,
                source,
                destination,
                bounds,
            });
        }
        Ok(out)
    }

    /// Records `established` and forgets `released`, in one transaction.
    pub fn apply(
        &mut self,
        established: &[JournaledCall],
        released: &[u64],
    ) -> Result<(), ControlError> {
        let path = self.path.clone();
        self.write(established, released)
            .map_err(|e| named(&path, e))
    }

    fn write(
        &mut self,
        established: &[JournaledCall],
        released: &[u64],
    ) -> Result<(), ControlError> {
        if established.is_empty() && released.is_empty() {
            return Ok(());
        }
        let tx = self
            .db
            .transaction()
            .map_err(|e| jerr("a transaction", e))?;
        {
            let mut ins = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO calls
                     (id, source, destination, hops, class, pcr, scr, mbs, cdvt_ps, setup_ps, tag,
                      bounds)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                )
                .map_err(|e| jerr("writing", e))?;
            for c in established {
                let v = &c.view;
                ins.execute(params![
                    v.id as i64,
                    c.source,
                    c.destination,
                    hops_json(v),
                    class_code(v.traffic.class),
                    v.traffic.pcr.per_sec(),
                    v.traffic.scr.per_sec(),
                    v.traffic.mbs as i64,
                    v.traffic.cdvt_ps.min(i64::MAX as u64) as i64,
                    v.setup.as_picos().min(i64::MAX as u64) as i64,
                    v.tag,
                    c.bounds.to_json(),
                ])
                .map_err(|e| jerr("writing a connection", e))?;
            }
            let mut del = tx
                .prepare_cached("DELETE FROM calls WHERE id = ?1")
                .map_err(|e| jerr("writing", e))?;
            for id in released {
                del.execute(params![*id as i64])
                    .map_err(|e| jerr("forgetting a connection", e))?;
            }
        }
        tx.commit().map_err(|e| jerr("committing", e))
    }
}

/// What a [`JournalWriter`] answers: written, or why not.
pub type JournalAck = tokio::sync::oneshot::Receiver<Result<(), String>>;

type WriterJob = (
    Vec<JournaledCall>,
    Vec<u64>,
    tokio::sync::oneshot::Sender<Result<(), String>>,
);

/// A journal written from a thread of its own (TINA's LNC: its callers wait for the
/// write, the performers do not). Jobs are written in the order submitted, every job
/// waiting taken into one transaction (group commit); each submitter hears whether its
/// job was written.
#[derive(Debug, Clone)]
pub struct JournalWriter {
    tx: std::sync::mpsc::Sender<WriterJob>,
}

/// A journal's writer thread, the one group commit of every manager: it takes every
/// job waiting, merges what they write (`split` takes a job's calls to write and ids to
/// forget), writes them in one transaction, then hands the jobs, the calls written and
/// the outcome to `done` (which answers the jobs' callers). Returns where to send jobs;
/// the thread ends when every sender is gone.
pub(crate) fn group_commit<J: Send + 'static>(
    mut journal: CmJournal,
    mut split: impl FnMut(&mut J) -> (Vec<JournaledCall>, Vec<u64>) + Send + 'static,
    mut done: impl FnMut(Vec<J>, &[JournaledCall], Result<(), String>) + Send + 'static,
) -> std::sync::mpsc::Sender<J> {
    let (tx, rx) = std::sync::mpsc::channel::<J>();
    std::thread::spawn(move || {
        while let Ok(first) = rx.recv() {
            let mut jobs = vec![first];
            while let Ok(more) = rx.try_recv() {
                jobs.push(more);
            }
            let mut up = Vec::new();
            let mut gone = Vec::new();
            for j in &mut jobs {
                let (u, g) = split(j);
                // A call written and forgotten in one group ends forgotten; one
                // forgotten and then written (an id reused) ends written.
                for c in u {
                    gone.retain(|id| *id != c.view.id);
                    up.retain(|x: &JournaledCall| x.view.id != c.view.id);
                    up.push(c);
                }
                for id in g {
                    up.retain(|x: &JournaledCall| x.view.id != id);
                    gone.push(id);
                }
            }
            let r = journal.apply(&up, &gone).map_err(|e| e.to_string());
            if let Err(e) = &r {
                tracing::error!(error = %e, "the journal could not be written");
            }
            done(jobs, &up, r);
        }
    });
    tx
}

impl JournalWriter {
    /// Starts the writer thread over `journal`.
    pub fn spawn(journal: CmJournal) -> Self {
        let tx = group_commit(
            journal,
            |j: &mut WriterJob| (std::mem::take(&mut j.0), std::mem::take(&mut j.1)),
            |jobs, _, r| {
                for (_, _, ack) in jobs {
                    let _ = ack.send(r.clone());
                }
            },
        );
        JournalWriter { tx }
    }

    /// Writes `up` and forgets `gone` after every job submitted before.
    pub fn submit(&self, up: Vec<JournaledCall>, gone: Vec<u64>) -> JournalAck {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Err(std::sync::mpsc::SendError((_, _, tx))) = self.tx.send((up, gone, tx)) {
            let _ = tx.send(Err("the journal's writer stopped".into()));
        }
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: u64) -> JournaledCall {
        let hops = vec![
            (
                HopSpec {
                    switch: "s1".into(),
                    in_port: 0,
                    out_port: 1,
                },
                11,
                VcId::new(0, 40),
                VcId::new(0, 41),
            ),
            (
                HopSpec {
                    switch: "s2".into(),
                    in_port: 1,
                    out_port: 2,
                },
                12,
                VcId::new(0, 41),
                VcId::new(1, 42),
            ),
        ];
        JournaledCall {
            view: CallView {
                id,
                source_vc: VcId::new(0, 40),
                destination_vc: VcId::new(1, 42),
                hops,
                parents: vec![None, Some(0)],
                leaves: vec![("b".into(), 1)],
                setup: Duration::from_micros(250),
                traffic: TrafficDescriptor::cbr(CellRate(1000.0)),
                tag: format!("t{id}"),
                invocations: 0,
            },
            source: "a".into(),
            destination: "b".into(),
            bounds: QosBounds {
                clr: 1e-6,
                ctd_us: 500,
                cdv_us: 0,
                burst_tolerance_us: 7,
            },
        }
    }

    #[test]
    fn what_is_written_is_read_back_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j/cm.sqlite");
        // A mistyped directory is an error naming it, not a new, empty journal.
        let e = CmJournal::open(&path).unwrap_err().to_string();
        assert!(e.contains("does not exist") && e.contains("/j"), "{e}");
        std::fs::create_dir(dir.path().join("j")).unwrap();
        {
            let mut j = CmJournal::open(&path).unwrap();
            j.apply(&[call(1), call(2), call(3)], &[]).unwrap();
            j.apply(&[], &[2]).unwrap();
        }
        let j = CmJournal::open(&path).unwrap();
        let back = j.load().unwrap();
        assert_eq!(back, vec![call(1), call(3)]);
    }

    /// A journal written before the contract's bounds were kept (no `bounds` column)
    /// opens, gains the column, and reads back with zero bounds; what is written then
    /// keeps its bounds.
    #[test]
    fn a_journal_from_before_the_bounds_opens_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        {
            let j = CmJournal::open(&path).unwrap();
            j.db.execute_batch(
                "DROP TABLE calls;
                 CREATE TABLE calls (
                     id INTEGER PRIMARY KEY, source TEXT NOT NULL, destination TEXT NOT NULL,
                     hops TEXT NOT NULL, class INTEGER NOT NULL, pcr REAL NOT NULL,
                     scr REAL NOT NULL, mbs INTEGER NOT NULL, cdvt_ps INTEGER NOT NULL,
                     setup_ps INTEGER NOT NULL, tag TEXT NOT NULL);
                 INSERT INTO calls VALUES (4, 'a', 'b',
                     '[[\"s1\", 0, 1, 11, 0, 40, 0, 41]]', 1, 10.0, 10.0, 1, 0, 0, 'old');",
            )
            .unwrap();
        }
        let mut j = CmJournal::open(&path).unwrap();
        let back = j.load().unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].bounds, QosBounds::default());
        assert_eq!(back[0].view.tag, "old");
        j.apply(&[call(5)], &[]).unwrap();
        let back = CmJournal::open(&path).unwrap().load().unwrap();
        assert_eq!(back[1], call(5));
    }

    /// A file that is not a journal (here, text) is an error naming the file, not
    /// SQLite's bare "file is not a database" (issue 24, item 7).
    #[test]
    fn a_file_that_is_not_a_journal_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(
            &path,
            "these are not the calls you are looking for\n".repeat(100),
        )
        .unwrap();
        let e = CmJournal::open(&path).unwrap_err().to_string();
        assert!(
            e.contains("notes.txt") && e.contains("not a database"),
            "{e}"
        );
    }

    #[test]
    fn a_damaged_row_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cm.sqlite");
        let mut j = CmJournal::open(&path).unwrap();
        j.apply(&[call(5)], &[]).unwrap();
        j.db.execute("UPDATE calls SET hops = '[[\"s1\", 0]]' WHERE id = 5", [])
            .unwrap();
        let e = j.load().unwrap_err().to_string();
        assert!(e.contains("connection 5") && e.contains("hops"), "{e}");
    }
}
