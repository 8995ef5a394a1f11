//! The connection manager's journal (issue 10): every established connection is written
//! to the journal before its caller hears that it is up, and removed when it is
//! released, so a manager killed at any moment can be restarted and know every
//! connection it acknowledged. The start-up audit (`cm::live`) then reconciles the
//! journal with the switches: connections whose hops all exist are taken back, the
//! others rolled back, and cross-connects and reservations the journal does not explain
//! are released.
//!
//! Two stores under the same rules ([`JournalAt`]): a SQLite file, the embedded default,
//! and a PostgreSQL database (issue 26, item 3), which an active and a standby manager on
//! different hosts both reach, so the standby that takes over knows every connection the
//! active one acknowledged. What a row holds, how it is read back and when a write is
//! made are the same for both; only the statements differ. A PostgreSQL journal can be
//! fenced ([`CmJournal::fence`]): once a newer leader has taken it, a deposed one's
//! writes fail, so it can confirm nothing more. A lost database connection is made
//! again, and the operation that found it lost is run once more (each can be run twice
//! to the same effect).
//!
//! Writes are grouped: the live shell applies one transaction per turn of its loop
//! (every call established or released in that turn). SQLite runs in WAL mode with
//! `synchronous = NORMAL`, which survives the death of the process (what `kill -9`
//! tests) though not of the machine's power; `synchronous = FULL` would add an fsync to
//! each turn. PostgreSQL commits as its server is configured (by default, durably).

use std::path::Path;

use atmlab_core::ids::VcId;
use atmlab_core::time::Duration;
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};
use atmlab_core::units::CellRate;
use rusqlite::{Connection, OptionalExtension, params};

use crate::ControlError;
use crate::cm::core::{CallView, HopSpec};

// What a row holds is the start-up audit's input, so it is defined beside the audit's
// decisions (sans IO, used by the simulated shell too).
pub use crate::cm::core::audit::{JournaledCall, QosBounds};

impl QosBounds {
    fn to_json(self) -> String {
        // Serialized from a tuple, not built as a `serde_json::Value`: the same text
        // without a tree of allocations per call journaled.
        serde_json::to_string(&(self.clr, self.ctd_us, self.cdv_us, self.burst_tolerance_us))
            .unwrap_or_default()
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

/// Where a manager's journal lives: a SQLite file (the embedded default) or a
/// PostgreSQL database that an active and a standby manager on different hosts can both
/// reach (issue 26, item 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalAt {
    /// A SQLite file; its directory must exist.
    File(std::path::PathBuf),
    /// A PostgreSQL database, by its URL (`postgres://USER[:PASSWORD]@HOST:PORT/DB`, any
    /// libpq-style URL the `postgres` crate reads). One database (or schema, with
    /// `?options=-csearch_path%3DNAME`) per owner: the table is `calls`.
    Postgres(String),
}

impl JournalAt {
    /// `postgres://...` or `postgresql://...` is a database; anything else a file path.
    pub fn parse(s: &str) -> JournalAt {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            JournalAt::Postgres(s.to_string())
        } else {
            JournalAt::File(s.into())
        }
    }

    /// Whether two managers on different hosts can share it (a database can; a file
    /// cannot, safely).
    pub fn is_shared(&self) -> bool {
        matches!(self, JournalAt::Postgres(_))
    }
}

impl std::str::FromStr for JournalAt {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(JournalAt::parse(s))
    }
}

impl From<std::path::PathBuf> for JournalAt {
    fn from(p: std::path::PathBuf) -> Self {
        JournalAt::File(p)
    }
}

impl From<&Path> for JournalAt {
    fn from(p: &Path) -> Self {
        JournalAt::File(p.to_path_buf())
    }
}

impl std::fmt::Display for JournalAt {
    /// The path, or the URL with its password hidden (it goes into errors and logs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalAt::File(p) => write!(f, "{}", p.display()),
            JournalAt::Postgres(url) => f.write_str(&hide_password(url)),
        }
    }
}

/// `scheme://user:secret@host/...` as `scheme://user:***@host/...`.
fn hide_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest[..auth_end].rfind('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The journal: one SQLite file, or one PostgreSQL database. What a row holds and how it
/// is read back is the same for both (one row format); only the statements differ.
#[derive(Debug)]
pub struct CmJournal {
    store: Store,
    /// The file or database, for the errors (issue 24, item 7: "file is not a database"
    /// must say which file).
    path: String,
}

#[derive(Debug)]
enum Store {
    Sqlite(Connection),
    Postgres(pg::PgStore),
}

/// One journaled connection as stored: the columns of table `calls`.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    id: i64,
    source: String,
    destination: String,
    hops: String,
    class: i64,
    pcr: f64,
    scr: f64,
    mbs: i64,
    cdvt_ps: i64,
    setup_ps: i64,
    tag: String,
    bounds: Option<String>,
}

impl Row {
    fn of(c: &JournaledCall) -> Row {
        let v = &c.view;
        Row {
            id: v.id as i64,
            source: c.source.clone(),
            destination: c.destination.clone(),
            hops: hops_json(v),
            class: class_code(v.traffic.class),
            pcr: v.traffic.pcr.per_sec(),
            scr: v.traffic.scr.per_sec(),
            mbs: v.traffic.mbs as i64,
            cdvt_ps: v.traffic.cdvt_ps.min(i64::MAX as u64) as i64,
            setup_ps: v.setup.as_picos().min(i64::MAX as u64) as i64,
            tag: v.tag.clone(),
            bounds: Some(c.bounds.to_json()),
        }
    }

    /// The connection a row holds, or why it cannot be believed.
    fn call(self) -> Result<JournaledCall, ControlError> {
        let Row {
            id,
            source,
            destination,
            hops,
            class,
            pcr,
            scr,
            mbs,
            cdvt_ps,
            setup_ps,
            tag,
            bounds,
        } = self;
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
            cdvt_ps: u64::try_from(cdvt_ps).map_err(|_| bad("bad CDVT"))?,
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
            setup: Duration::from_picos(u64::try_from(setup_ps).unwrap_or(0)),
            traffic,
            tag,
            // Not journaled: a count of the process that set the call up.
            invocations: 0,
        };
        let bounds = match bounds {
            None => QosBounds::default(),
            Some(b) => QosBounds::from_json(&b).ok_or_else(|| bad("its bounds do not parse"))?,
        };
        Ok(JournaledCall {
            view,
            source,
            destination,
            bounds,
        })
    }
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
    // Serialized from borrowed tuples, not built as a `serde_json::Value` (whose
    // allocations showed in a loaded manager's profile): the same text, key order
    // included (a `Value` object's keys are sorted, and "entries" < "leaves").
    /// switch, in port, out port, connection, in VPI, in VCI, out VPI, out VCI, parent.
    type Entry<'a> = (&'a str, u16, u16, u64, u16, u16, u16, u16, Option<usize>);
    #[derive(serde::Serialize)]
    struct Tree<'a> {
        entries: Vec<Entry<'a>>,
        leaves: &'a [(String, usize)],
    }
    let tree = Tree {
        entries: v
            .hops
            .iter()
            .zip(&v.parents)
            .map(|((h, conn, i, o), p)| {
                (
                    &*h.switch, h.in_port, h.out_port, *conn, i.vpi.0, i.vci.0, o.vpi.0, o.vci.0,
                    *p,
                )
            })
            .collect(),
        leaves: &v.leaves,
    };
    serde_json::to_string(&tree).unwrap_or_default()
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

/// What a write of a deposed leader's fails with ([`CmJournal::fence`]), for its
/// manager to tell a lost leadership from a failed write.
pub const DEPOSED: &str = "this manager was deposed";

const SELECT_ALL: &str = "SELECT id, source, destination, hops, class, pcr, scr, mbs, cdvt_ps,
     setup_ps, tag, bounds FROM calls ORDER BY id";

impl CmJournal {
    /// Opens (creating the file if needed) the SQLite journal at `path`. Its directory
    /// must exist: a mistyped directory is an error, not a fresh, empty journal.
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
             );
             CREATE TABLE IF NOT EXISTS issued (
                 one INTEGER PRIMARY KEY CHECK (one = 1),
                 next INTEGER NOT NULL
             );",
        )
        .map_err(|e| named(&shown, jerr("creating its table", e)))?;
        // Journals written before the bounds were kept get the column (empty: zero).
        let has_bounds = db.prepare("SELECT bounds FROM calls LIMIT 0").is_ok();
        if !has_bounds {
            db.execute_batch("ALTER TABLE calls ADD COLUMN bounds TEXT")
                .map_err(|e| named(&shown, jerr("adding the bounds column", e)))?;
        }
        Ok(CmJournal {
            store: Store::Sqlite(db),
            path: shown,
        })
    }

    /// Opens the journal at `at`: a SQLite file ([`CmJournal::open`]) or a PostgreSQL
    /// database (connected to, its table created if needed).
    pub fn open_at(at: &JournalAt) -> Result<Self, ControlError> {
        match at {
            JournalAt::File(p) => CmJournal::open(p),
            JournalAt::Postgres(url) => {
                let shown = at.to_string();
                let store = pg::PgStore::connect(url).map_err(|e| jerr(&shown, e))?;
                Ok(CmJournal {
                    store: Store::Postgres(store),
                    path: shown,
                })
            }
        }
    }

    /// Every journaled connection, by id. A row that cannot be read back is an error
    /// naming it (the journal is ours; a damaged one must not be half-believed).
    pub fn load(&self) -> Result<Vec<JournaledCall>, ControlError> {
        self.load_rows()
            .and_then(|rows| rows.into_iter().map(Row::call).collect())
            .map_err(|e| named(&self.path, e))
    }

    /// The least call id above every id this journal ever held (0 for a fresh one). A
    /// restarted manager hands out ids from there: an id of a call released before the
    /// restart, given to a new call, would let a DeleteConnection retried across the
    /// restart (its answer lost with the old process) release someone else's call.
    pub fn next_id(&self) -> Result<u64, ControlError> {
        let next = match &self.store {
            Store::Sqlite(db) => db
                .query_row("SELECT next FROM issued WHERE one = 1", [], |r| {
                    r.get::<_, i64>(0)
                })
                .optional()
                .map_err(|e| jerr("reading the ids issued", e)),
            Store::Postgres(pg) => pg.next_id().map_err(|e| jerr("reading the ids issued", e)),
        };
        next.map(|n| n.map_or(0, |n| n.max(0) as u64))
            .map_err(|e| named(&self.path, e))
    }

    fn load_rows(&self) -> Result<Vec<Row>, ControlError> {
        match &self.store {
            Store::Sqlite(db) => {
                let mut st = db.prepare(SELECT_ALL).map_err(|e| jerr("reading", e))?;
                let rows = st
                    .query_map([], |r| {
                        Ok(Row {
                            id: r.get(0)?,
                            source: r.get(1)?,
                            destination: r.get(2)?,
                            hops: r.get(3)?,
                            class: r.get(4)?,
                            pcr: r.get(5)?,
                            scr: r.get(6)?,
                            mbs: r.get(7)?,
                            cdvt_ps: r.get(8)?,
                            setup_ps: r.get(9)?,
                            tag: r.get(10)?,
                            bounds: r.get(11)?,
                        })
                    })
                    .map_err(|e| jerr("reading", e))?;
                rows.map(|r| r.map_err(|e| jerr("reading a row", e)))
                    .collect()
            }
            Store::Postgres(pg) => pg.load().map_err(|e| jerr("reading", e)),
        }
    }

    /// Records `established` and forgets `released`, in one transaction.
    pub fn apply(
        &mut self,
        established: &[JournaledCall],
        released: &[u64],
    ) -> Result<(), ControlError> {
        if established.is_empty() && released.is_empty() {
            return Ok(());
        }
        let rows: Vec<Row> = established.iter().map(Row::of).collect();
        let gone: Vec<i64> = released.iter().map(|id| *id as i64).collect();
        let r = match &mut self.store {
            Store::Sqlite(db) => sqlite_write(db, &rows, &gone),
            Store::Postgres(pg) => pg.write(rows, gone).map_err(|e| jerr("writing", e)),
        };
        r.map_err(|e| named(&self.path, e))
    }

    /// Takes the journal for the leader whose fencing token is `token` (issue 26, item
    /// 3: active and standby managers): from now on, a write succeeds only while no
    /// leader with a greater token has taken the journal, so a deposed leader that still
    /// runs cannot confirm a call (its callers hear UNAVAILABLE). Refused when a greater
    /// token holds it already. A SQLite journal is one host's and is not fenced.
    pub fn fence(&mut self, token: u64) -> Result<(), ControlError> {
        let r = match &mut self.store {
            Store::Sqlite(_) => Ok(()),
            Store::Postgres(pg) => pg.fence(token as i64),
        };
        r.map_err(|e| named(&self.path, jerr("taking it for this leader", e)))
    }

    /// The file or database (password hidden), as errors name it.
    pub fn name(&self) -> &str {
        &self.path
    }
}

fn sqlite_write(db: &mut Connection, rows: &[Row], gone: &[i64]) -> Result<(), ControlError> {
    // BEGIN and COMMIT as cached statements: `Connection::transaction` parses both from
    // text on every turn, which a loaded manager's profile showed (4% of `atmlab up`).
    db.prepare_cached("BEGIN")
        .and_then(|mut st| st.execute([]))
        .map_err(|e| jerr("a transaction", e))?;
    let r = sqlite_write_in(db, rows, gone).and_then(|()| {
        db.prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]))
            .map(drop)
            .map_err(|e| jerr("committing", e))
    });
    if r.is_err() && !db.is_autocommit() {
        // Nothing of a failed turn stays.
        let _ = db.execute_batch("ROLLBACK");
    }
    r
}

/// The statements of [`sqlite_write`], inside its transaction.
fn sqlite_write_in(db: &Connection, rows: &[Row], gone: &[i64]) -> Result<(), ControlError> {
    let mut ins = db
        .prepare_cached(
            "INSERT OR REPLACE INTO calls
             (id, source, destination, hops, class, pcr, scr, mbs, cdvt_ps, setup_ps, tag,
              bounds)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )
        .map_err(|e| jerr("writing", e))?;
    for r in rows {
        ins.execute(params![
            r.id,
            r.source,
            r.destination,
            r.hops,
            r.class,
            r.pcr,
            r.scr,
            r.mbs,
            r.cdvt_ps,
            r.setup_ps,
            r.tag,
            r.bounds,
        ])
        .map_err(|e| jerr("writing a connection", e))?;
    }
    let mut del = db
        .prepare_cached("DELETE FROM calls WHERE id = ?1")
        .map_err(|e| jerr("writing", e))?;
    for id in gone {
        del.execute(params![*id])
            .map_err(|e| jerr("forgetting a connection", e))?;
    }
    if let Some(hi) = rows.iter().map(|r| r.id).max() {
        db.prepare_cached(
            "INSERT INTO issued (one, next) VALUES (1, ?1)
             ON CONFLICT (one) DO UPDATE SET next = max(next, excluded.next)",
        )
        .and_then(|mut st| st.execute(params![hi.saturating_add(1)]))
        .map_err(|e| jerr("writing the ids issued", e))?;
    }
    Ok(())
}

/// The PostgreSQL store. The `postgres` client drives a runtime of its own and must not
/// be used (or dropped) on a thread inside tokio's, as the manager's start-up audit is:
/// so it lives on a thread of its own, and each operation is sent to it and waited for,
/// as a SQLite call blocks its caller.
mod pg {
    use super::Row;

    type Job = Box<dyn FnOnce(&mut Conn) + Send>;

    /// The client and what it was made from, to make it again.
    struct Conn {
        client: postgres::Client,
        config: postgres::Config,
    }

    impl Conn {
        /// Runs `f`; if it fails because the connection was lost (the server
        /// restarted, or the connection was cut), connects again and runs it once more.
        /// Every operation here can be run twice: a write is an upsert and a delete by
        /// id, and taking the journal keeps the greater token, so a transaction that did
        /// commit before its answer was lost commits the same again.
        fn run<R>(
            &mut self,
            f: impl Fn(&mut postgres::Client) -> Result<R, postgres::Error>,
        ) -> Result<R, postgres::Error> {
            match f(&mut self.client) {
                Err(e) if self.client.is_closed() => {
                    tracing::warn!(error = %full(&e), "the journal's database connection was lost; connecting again");
                    self.client = self.config.connect(postgres::NoTls)?;
                    f(&mut self.client)
                }
                r => r,
            }
        }
    }

    /// The client's thread; it ends (closing the connection) when this is dropped.
    #[derive(Debug)]
    pub(super) struct PgStore {
        jobs: std::sync::mpsc::Sender<Job>,
        /// The fencing token this journal was taken with (0: not fenced).
        token: i64,
    }

    const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS calls (
             id BIGINT PRIMARY KEY,
             source TEXT NOT NULL,
             destination TEXT NOT NULL,
             hops TEXT NOT NULL,
             class BIGINT NOT NULL,
             pcr DOUBLE PRECISION NOT NULL,
             scr DOUBLE PRECISION NOT NULL,
             mbs BIGINT NOT NULL,
             cdvt_ps BIGINT NOT NULL,
             setup_ps BIGINT NOT NULL,
             tag TEXT NOT NULL,
             bounds TEXT
         );
         CREATE TABLE IF NOT EXISTS leader (
             one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
             token BIGINT NOT NULL
         );
         CREATE TABLE IF NOT EXISTS issued (
             one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
             next BIGINT NOT NULL
         );";

    impl PgStore {
        /// Connects (within 5 s unless the URL says `connect_timeout`) and creates the
        /// tables if needed.
        pub(super) fn connect(url: &str) -> Result<PgStore, String> {
            let mut config: postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
            if config.get_connect_timeout().is_none() {
                config.connect_timeout(std::time::Duration::from_secs(5));
            }
            let (jobs, rx) = std::sync::mpsc::channel::<Job>();
            let (ready_tx, ready) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("journal-pg".into())
                .spawn(move || {
                    let client = match config
                        .connect(postgres::NoTls)
                        .and_then(|mut c| c.batch_execute(SCHEMA).map(|()| c))
                    {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            c
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(full(&e)));
                            return;
                        }
                    };
                    let mut conn = Conn { client, config };
                    while let Ok(job) = rx.recv() {
                        job(&mut conn);
                    }
                })
                .map_err(|e| e.to_string())?;
            ready
                .recv()
                .map_err(|_| "the journal's connection thread died".to_string())??;
            Ok(PgStore { jobs, token: 0 })
        }

        fn run<R: Send + 'static>(
            &self,
            f: impl Fn(&mut postgres::Client) -> Result<R, postgres::Error> + Send + 'static,
        ) -> Result<R, String> {
            let (tx, rx) = std::sync::mpsc::channel();
            self.jobs
                .send(Box::new(move |c: &mut Conn| {
                    let _ = tx.send(c.run(f).map_err(|e| full(&e)));
                }))
                .map_err(|_| "the journal's connection thread stopped".to_string())?;
            rx.recv()
                .map_err(|_| "the journal's connection thread stopped".to_string())?
        }

        pub(super) fn next_id(&self) -> Result<Option<i64>, String> {
            self.run(|c| {
                Ok(c.query_opt("SELECT next FROM issued WHERE one", &[])?
                    .map(|r| r.get(0)))
            })
        }

        pub(super) fn load(&self) -> Result<Vec<Row>, String> {
            self.run(|c| {
                c.query(super::SELECT_ALL, &[])?
                    .iter()
                    .map(|r| {
                        Ok(Row {
                            id: r.try_get(0)?,
                            source: r.try_get(1)?,
                            destination: r.try_get(2)?,
                            hops: r.try_get(3)?,
                            class: r.try_get(4)?,
                            pcr: r.try_get(5)?,
                            scr: r.try_get(6)?,
                            mbs: r.try_get(7)?,
                            cdvt_ps: r.try_get(8)?,
                            setup_ps: r.try_get(9)?,
                            tag: r.try_get(10)?,
                            bounds: r.try_get(11)?,
                        })
                    })
                    .collect()
            })
        }

        /// Writes in one transaction. Fenced (`token` > 0), the transaction first reads
        /// the leader's token with a share lock (a newer leader's [`PgStore::fence`]
        /// waits for it to end) and gives up when a newer leader holds the journal.
        pub(super) fn write(&mut self, rows: Vec<Row>, gone: Vec<i64>) -> Result<(), String> {
            let token = self.token;
            self.run(move |c| {
                let mut tx = c.transaction()?;
                if token > 0 {
                    let held: Option<i64> = tx
                        .query_opt("SELECT token FROM leader WHERE one FOR SHARE", &[])?
                        .map(|r| r.get(0));
                    if held != Some(token) {
                        return Ok(Err(format!(
                            "a newer leader holds the journal (its token {}, ours {token}): \
                             {}",
                            held.unwrap_or(0),
                            super::DEPOSED
                        )));
                    }
                }
                let ins = tx.prepare(
                    "INSERT INTO calls
                     (id, source, destination, hops, class, pcr, scr, mbs, cdvt_ps, setup_ps,
                      tag, bounds)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                     ON CONFLICT (id) DO UPDATE SET
                     source = EXCLUDED.source, destination = EXCLUDED.destination,
                     hops = EXCLUDED.hops, class = EXCLUDED.class, pcr = EXCLUDED.pcr,
                     scr = EXCLUDED.scr, mbs = EXCLUDED.mbs, cdvt_ps = EXCLUDED.cdvt_ps,
                     setup_ps = EXCLUDED.setup_ps, tag = EXCLUDED.tag,
                     bounds = EXCLUDED.bounds",
                )?;
                for r in &rows {
                    tx.execute(
                        &ins,
                        &[
                            &r.id,
                            &r.source,
                            &r.destination,
                            &r.hops,
                            &r.class,
                            &r.pcr,
                            &r.scr,
                            &r.mbs,
                            &r.cdvt_ps,
                            &r.setup_ps,
                            &r.tag,
                            &r.bounds,
                        ],
                    )?;
                }
                if !gone.is_empty() {
                    tx.execute("DELETE FROM calls WHERE id = ANY($1)", &[&gone])?;
                }
                if let Some(hi) = rows.iter().map(|r| r.id).max() {
                    tx.execute(
                        "INSERT INTO issued (one, next) VALUES (TRUE, $1)
                         ON CONFLICT (one) DO UPDATE SET
                         next = GREATEST(issued.next, EXCLUDED.next)",
                        &[&hi.saturating_add(1)],
                    )?;
                }
                tx.commit()?;
                Ok(Ok(()))
            })?
        }

        /// Takes the journal for the leader with `token`: refused if a greater token
        /// holds it; waits for a write of an older leader in progress to end.
        pub(super) fn fence(&mut self, token: i64) -> Result<(), String> {
            let taken = self.run(move |c| {
                c.execute(
                    "INSERT INTO leader (one, token) VALUES (TRUE, $1)
                     ON CONFLICT (one) DO UPDATE SET token = EXCLUDED.token
                     WHERE leader.token <= EXCLUDED.token",
                    &[&token],
                )
            })?;
            if taken != 1 {
                return Err(format!(
                    "a leader with a token greater than ours ({token}) holds it"
                ));
            }
            self.token = token;
            Ok(())
        }
    }

    /// A PostgreSQL error with the server's message (the bare Display says only "db
    /// error").
    fn full(e: &postgres::Error) -> String {
        match e.as_db_error() {
            Some(db) => format!("{}: {}", db.severity(), db.message()),
            None => match std::error::Error::source(e) {
                Some(s) => format!("{e}: {s}"),
                None => e.to_string(),
            },
        }
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

/// What a group of jobs leaves to write, each job's calls to write and ids to forget
/// taken in order: a call's last word wins. A call written and forgotten in one group
/// ends forgotten; one forgotten and then written (an id reused) ends written. Each id
/// is in one list at most (the order within a list does not change what the journal
/// holds). Linear in the group's size: a writer that fell behind (a slow disk) takes a
/// large group, and a merge that rescanned the lists per call would grow it further.
fn merge(
    jobs: impl Iterator<Item = (Vec<JournaledCall>, Vec<u64>)>,
) -> (Vec<JournaledCall>, Vec<u64>) {
    // Each id's last word: a call to write, or None to forget it; in first-seen order.
    let mut last: rustc_hash::FxHashMap<u64, Option<JournaledCall>> = Default::default();
    let mut order = Vec::new();
    for (u, g) in jobs {
        for c in u {
            let id = c.view.id;
            if last.insert(id, Some(c)).is_none() {
                order.push(id);
            }
        }
        for id in g {
            if last.insert(id, None).is_none() {
                order.push(id);
            }
        }
    }
    let (mut up, mut gone) = (Vec::new(), Vec::new());
    for id in order {
        match last.remove(&id) {
            Some(Some(c)) => up.push(c),
            Some(None) => gone.push(id),
            None => {}
        }
    }
    (up, gone)
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
            let (up, gone) = merge(jobs.iter_mut().map(&mut split));
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

    /// The merge of a group against its plain reading: every job in order, a write
    /// replacing the id's earlier words, a forget replacing its write.
    #[test]
    fn a_group_keeps_each_calls_last_word() {
        fn reference(jobs: &[(Vec<u64>, Vec<u64>)]) -> (Vec<u64>, Vec<u64>) {
            let (mut up, mut gone): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
            for (u, g) in jobs {
                for &c in u {
                    gone.retain(|id| *id != c);
                    up.retain(|x| *x != c);
                    up.push(c);
                }
                for &id in g {
                    up.retain(|x| *x != id);
                    gone.push(id);
                }
            }
            gone.sort_unstable();
            gone.dedup();
            up.sort_unstable();
            (up, gone)
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for _ in 0..200 {
            let jobs: Vec<(Vec<u64>, Vec<u64>)> = (0..next(5))
                .map(|_| {
                    let u = (0..next(4)).map(|_| next(8)).collect();
                    let g = (0..next(4)).map(|_| next(8)).collect();
                    (u, g)
                })
                .collect();
            let (up, mut gone) = merge(
                jobs.iter()
                    .map(|(u, g)| (u.iter().map(|&id| call(id)).collect(), g.clone())),
            );
            let mut up: Vec<u64> = up.iter().map(|c| c.view.id).collect();
            up.sort_unstable();
            gone.sort_unstable();
            assert_eq!((up, gone), reference(&jobs), "{jobs:?}");
        }
    }

    impl CmJournal {
        fn db(&self) -> &Connection {
            match &self.store {
                Store::Sqlite(db) => db,
                Store::Postgres(_) => panic!("not a SQLite journal"),
            }
        }
    }

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

    /// A row's JSON columns are the text the journal wrote when it built them as
    /// `serde_json::Value`s (journals written before are read by the same parser), and
    /// they read back.
    #[test]
    fn a_rows_json_is_the_text_written_before_and_reads_back() {
        let mut c = call(7);
        c.view.hops[0].0.switch = "s\"1\\x".into();
        c.view.leaves = vec![("b\"".into(), 1), ("c".into(), 0)];
        c.bounds.clr = f64::NAN;
        let v = &c.view;
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
        let before = serde_json::json!({ "entries": entries, "leaves": v.leaves }).to_string();
        assert_eq!(hops_json(v), before);
        let b = c.bounds;
        let before =
            serde_json::json!([b.clr, b.ctd_us, b.cdv_us, b.burst_tolerance_us]).to_string();
        assert_eq!(b.to_json(), before);
        let (hops, parents, leaves) = tree_of(&hops_json(v), &c.destination).unwrap();
        assert_eq!(
            (hops, parents, leaves),
            (v.hops.clone(), v.parents.clone(), v.leaves.clone())
        );
    }

    /// A postgres:// or postgresql:// URL is a database, anything else a file; the
    /// password of a URL is never shown (errors and logs name the journal).
    #[test]
    fn a_journal_is_a_file_or_a_database_url_shown_without_its_password() {
        assert_eq!(
            JournalAt::parse("journals/cm.sqlite"),
            JournalAt::File("journals/cm.sqlite".into())
        );
        assert!(!JournalAt::parse("postgres.sqlite").is_shared());
        for url in [
            "postgres://cm:s3cret@db.lab:5432/cm",
            "postgresql://cm:s3cret@db.lab/cm?connect_timeout=2",
        ] {
            let at = JournalAt::parse(url);
            assert!(at.is_shared(), "{url}");
            let shown = at.to_string();
            assert!(
                !shown.contains("s3cret") && shown.contains("cm:***@db.lab"),
                "{shown}"
            );
        }
        assert_eq!(
            JournalAt::parse("postgres://cm@db.lab/cm").to_string(),
            "postgres://cm@db.lab/cm"
        );
        // An @ in the path or query is not a password's end.
        assert_eq!(
            JournalAt::parse("postgres://db.lab/cm?user=a@b").to_string(),
            "postgres://db.lab/cm?user=a@b"
        );
    }

    /// A mistyped directory is an error naming it, not a new, empty journal. (What
    /// is written is read back after reopening, in either store: the integration
    /// tests' `journal` module.)
    #[test]
    fn a_journal_in_a_missing_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j/cm.sqlite");
        let e = CmJournal::open(&path).unwrap_err().to_string();
        assert!(e.contains("does not exist") && e.contains("/j"), "{e}");
        assert!(!dir.path().join("j").exists());
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
            j.db()
                .execute_batch(
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
}
