//! The published harness's older SQLite store, schema 14, opened read-only:
//! the same three STRICT tables as schema 17, but `events.data` is JSON TEXT,
//! `source_event_seqs` a JSON array as TEXT, and there is no `ignorable`
//! column, no packing and no compression (`user_version` 14, the same
//! application id). `ls`, `cat`, `verify` and `convert --from` work on it;
//! anything that would write is refused (convert the store to schema 17, or
//! to any other backend, first).
//!
//! Reading follows that build's `scanRows`: every row is parsed; the last
//! parseable `turn/end` row is the commit point; a row that does not parse,
//! or a seq gap, at or before it is corruption, after it the start of a torn
//! tail. Events come back as that build rebuilt them: `sourceEventSeqs`
//! before `surfaceOp`, never `ignorable`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::Resource;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::schema::{APPLICATION_ID, policy_of, schema_objects};
use crate::backend::{Backend, LogWriter, Stored};
use crate::contract::{Placement, Policy};
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, MAX_SAFE_INTEGER, RawJson};
use crate::header::{SESSION_FORMAT_VERSION, SessionHeader};
use crate::scan::{
    Cut, CutReason, Evidence, OnDamage, Outcome, Proof, Scan, SessionSummary, TailRule, decide,
    split_log,
};

/// `PRAGMA user_version` of the older schema.
pub const USER_VERSION_14: i64 = 14;

/// The schema-14 tables, as the published build creates them.
pub const SCHEMA_14_SQL: &str = "
CREATE TABLE IF NOT EXISTS persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset    TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT NOT NULL,
  source_event_seqs TEXT,
  surface_op        TEXT,
  PRIMARY KEY (session_id, seq)
) STRICT
";

/// A schema-14 session database, read-only.
#[derive(Debug, Clone)]
pub struct Schema14Backend {
    path: PathBuf,
    identity: String,
    conn: Arc<Resource<Connection>>,
}

fn refused(path: &Path, detail: impl Into<String>) -> Error {
    Error::Unsupported {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

fn sql(op: &'static str, path: &Path, e: rusqlite::Error) -> Error {
    Error::io(op, path, std::io::Error::other(e.to_string()))
}

/// The `user_version` of an SQLite file, read without changing it; `None`
/// when it cannot be read.
pub fn user_version(path: &Path) -> Option<i64> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    conn.query_row("PRAGMA user_version", [], |r| r.get(0)).ok()
}

/// One session's rows, as that build read them.
struct Row {
    seq: i64,
    event_type: String,
    time: i64,
    data: String,
    sources: Option<String>,
    surface_op: Option<String>,
}

struct SessionRow {
    header: SessionHeader,
    incarnation: String,
    revision: i64,
}

impl Schema14Backend {
    /// Opens a schema-14 database without writing to it: `user_version` 14,
    /// the upstream application id, and exactly the schema-14 objects.
    pub fn open(path: impl AsRef<Path>) -> Result<Schema14Backend> {
        let path = path.as_ref().to_owned();
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql("open", &path, e))?;
        let pragma = |name: &str| -> Result<i64> {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .map_err(|e| sql("read pragma", &path, e))
        };
        let version = pragma("user_version")?;
        if version != USER_VERSION_14 {
            return Err(refused(
                &path,
                format!("session database has schema version {version}, not 14"),
            ));
        }
        let app = pragma("application_id")?;
        if app != APPLICATION_ID {
            return Err(refused(
                &path,
                format!("session database has application id {app}, expected {APPLICATION_ID}"),
            ));
        }
        let reference = Connection::open_in_memory()
            .and_then(|c| c.execute_batch(SCHEMA_14_SQL).map(|()| c))
            .and_then(|c| schema_objects(&c))
            .map_err(|e| sql("build reference schema", &path, e))?;
        let found = schema_objects(&conn).map_err(|e| sql("read schema", &path, e))?;
        if found != reference {
            return Err(refused(
                &path,
                "session database has user_version 14 but not the schema-14 tables",
            ));
        }
        let store_id: String = conn
            .query_row(
                "SELECT store_id FROM persistence_state WHERE singleton = 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| sql("read store id", &path, e))?
            .filter(|s: &String| !s.is_empty())
            .ok_or_else(|| refused(&path, "session database has no store identity"))?;
        let identity = super::file_identity(&path, &store_id)?;
        Ok(Schema14Backend {
            path,
            identity,
            conn: Arc::new(Resource::new(conn, "SQLite connection")),
        })
    }

    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        self.conn.lock(&self.path.display().to_string())
    }

    fn read_only(&self) -> Error {
        refused(
            &self.path,
            "this is the published harness's schema-14 session database, which turnwal opens \
             read-only; convert it (turnwal convert --from it) to write",
        )
    }

    fn corrupt(&self, seq: Option<u64>, offset: u64, reason: String) -> Error {
        Error::from(Corruption {
            path: self.path.clone(),
            offset,
            unit: crate::error::Unit::Row,
            seq,
            reason,
        })
    }

    fn session(&self, conn: &Connection, id: &str) -> Result<Option<SessionRow>> {
        let row = conn
            .query_row(
                "SELECT id, version, created_at, cwd, parent_session, seed_length, origin, \
                 delegation_depth, agent_preset, incarnation, revision FROM sessions WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, Option<i64>>(5)?,
                        r.get::<_, Option<String>>(6)?,
                        r.get::<_, Option<i64>>(7)?,
                        r.get::<_, Option<String>>(8)?,
                        r.get::<_, String>(9)?,
                        r.get::<_, i64>(10)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| sql("read session", &self.path, e))?;
        let Some((id, version, created, cwd, parent, seed, origin, depth, preset, inc, rev)) = row
        else {
            return Ok(None);
        };
        let bad = |what: &str| {
            self.corrupt(
                None,
                0,
                format!("invalid stored session metadata of session {id:?}: {what}"),
            )
        };
        let uint = |v: Option<i64>, name: &str| match v {
            None => Ok(None),
            Some(n) if n >= 0 && n as u64 <= MAX_SAFE_INTEGER => Ok(Some(n as u64)),
            Some(_) => Err(bad(&format!("{name} must be a non-negative safe integer"))),
        };
        let header = SessionHeader {
            version,
            id: id.clone(),
            created_at: uint(Some(created), "createdAt")?.unwrap_or(0),
            cwd,
            parent_session: parent,
            seed_length: uint(seed, "seedLength")?,
            origin,
            delegation_depth: uint(depth, "delegationDepth")?,
            agent_preset: preset,
        };
        // The cwd is checked by the reads that need a valid session
        // (`stored`), not here: upstream's `readFrom` takes any cwd.
        if version == SESSION_FORMAT_VERSION {
            header.validate_stored().map_err(|e| bad(&e.0))?;
        }
        Ok(Some(SessionRow {
            header,
            incarnation: inc,
            revision: rev,
        }))
    }

    /// The rows of `id` from seq `from` on.
    fn rows(&self, conn: &Connection, id: &str, from: u64) -> Result<Vec<Row>> {
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events \
                 WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq",
            )
            .map_err(|e| sql("read events", &self.path, e))?;
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(rusqlite::params![id, from], |r| {
                Ok(Row {
                    seq: r.get(0)?,
                    event_type: r.get(1)?,
                    time: r.get(2)?,
                    data: r.get(3)?,
                    sources: r.get(4)?,
                    surface_op: r.get(5)?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql("read events", &self.path, e))?;
        Ok(rows)
    }

    /// `rowToEvent`: the event a row holds, or why it does not parse.
    fn event(row: &Row) -> std::result::Result<Event, String> {
        let seq = u64::try_from(row.seq)
            .ok()
            .filter(|s| *s <= MAX_SAFE_INTEGER)
            .ok_or_else(|| format!("seq {} is not a non-negative safe integer", row.seq))?;
        let mut event =
            Event::new(&row.event_type, seq, row.time, &row.data).map_err(|e| e.reason)?;
        let sources = match &row.sources {
            None => None,
            Some(text) => Some(
                RawJson::parse(text).map_err(|e| format!("source_event_seqs is not JSON: {e}"))?,
            ),
        };
        let surface = match &row.surface_op {
            None => None,
            Some(text) => {
                let checked = Event::from_parts("x", 0, 0, RawJson::trusted("null"))
                    .map_err(|e| e.reason)?
                    .with_surface_op(text)
                    .map_err(|e| e.reason)?;
                checked.surface_op().cloned()
            }
        };
        if let Some(raw) = &sources {
            let seqs: Vec<u64> = serde_json::from_str(raw.get())
                .map_err(|_| "sourceEventSeqs must be an array of seqs".to_owned())?;
            event = event.with_source_event_seqs(&seqs).map_err(|e| e.reason)?;
        }
        event.set_extras(false, sources, surface, false);
        Ok(event)
    }

    /// `scanRows` of the schema-14 build over rows that start at seq
    /// `first`: a row that does not parse, or a seq that does not follow,
    /// is corruption when a later row holds a `turn/end` and a torn tail
    /// (cut there) when none does.
    fn decode_rows(&self, rows: &[Row], first: u64) -> Result<(Vec<Event>, Option<Cut>)> {
        let parsed: Vec<std::result::Result<Event, String>> =
            rows.iter().map(Self::event).collect();
        let last_end = parsed
            .iter()
            .zip(rows)
            .rposition(|(p, r)| p.is_ok() && r.event_type == "turn/end");
        let mut events = Vec::with_capacity(rows.len());
        for (i, (p, row)) in parsed.into_iter().zip(rows).enumerate() {
            let expected = first + i as u64;
            let problem = match p {
                Err(why) => Some(format!(
                    "corrupt session log: unparsable committed event at seq {} ({why})",
                    row.seq
                )),
                Ok(e) if e.seq() != expected => Some(format!(
                    "corrupt session log: seq gap in committed region (expected {expected}, got {})",
                    row.seq
                )),
                Ok(e) => {
                    events.push(e);
                    None
                }
            };
            if let Some(reason) = problem {
                let evidence = Evidence {
                    invalid: Some(CutReason::Invalid),
                    proof: last_end
                        .is_some_and(|end| i <= end)
                        .then_some(Proof::LaterCommit),
                    ..Evidence::default()
                };
                if let Outcome::RefuseCorrupt(_) = decide(&evidence, OnDamage::Refuse) {
                    return Err(self.corrupt(Some(expected), expected, reason));
                }
                let cut = Cut {
                    offset: expected,
                    seq: expected,
                    len: (rows.len() - i) as u64,
                    reason: CutReason::Invalid,
                    detail: reason,
                };
                return Ok((events, Some(cut)));
            }
        }
        Ok((events, None))
    }

    /// A whole log read as the schema-14 build's `inspect` reads it: its
    /// rows decoded from seq 0, the tail kept as upstream keeps it.
    fn classify(&self, session: &SessionRow, rows: &[Row]) -> Result<(Scan, Vec<Event>)> {
        let (events, cut) = self.decode_rows(rows, 0)?;
        let policy: Policy = policy_of(&session.incarnation);
        let split = split_log(policy, &events, TailRule::KeepAll);
        let outcome = decide(
            &Evidence {
                invalid: cut.as_ref().map(|c| c.reason),
                open_turn: !split.verdict.closers.is_empty(),
                ..Evidence::default()
            },
            OnDamage::Refuse,
        );
        let bytes = rows.iter().map(|r| r.data.len() as u64).sum();
        let scan = Scan::of_split(
            session.header.clone(),
            policy,
            &events,
            split,
            bytes,
            outcome,
            cut,
        );
        Ok((scan, events))
    }

    fn stored(&self, id: &str) -> Result<Option<(Scan, Vec<Event>)>> {
        let conn = self.conn()?;
        let Some(session) = self.session(&conn, id)? else {
            return Ok(None);
        };
        session.header.validate_cwd().map_err(|e| {
            self.corrupt(
                None,
                0,
                format!("invalid stored session metadata of session {id:?}: {}", e.0),
            )
        })?;
        let rows = self.rows(&conn, id, 0)?;
        self.classify(&session, &rows).map(Some)
    }
}

impl Backend for Schema14Backend {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        let ids: Vec<String> = {
            let conn = self.conn()?;
            let mut stmt = conn
                .prepare("SELECT id FROM sessions ORDER BY id")
                .map_err(|e| sql("read sessions", &self.path, e))?;
            stmt.query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
                .map_err(|e| sql("read sessions", &self.path, e))?
        };
        Ok(ids
            .into_iter()
            .map(|id| match self.stored(&id) {
                Ok(Some((scan, _))) => SessionSummary::scanned(
                    id,
                    &scan,
                    scan.stored_len(),
                    scan.bytes,
                    scan.cut.as_ref().map(|c| c.detail.clone()),
                ),
                Ok(None) | Err(_) => {
                    let problem = self.stored(&id).err().map(|e| e.to_string());
                    SessionSummary::corrupt(id, 0, problem)
                }
            })
            .collect())
    }

    fn exists(&self, id: &str) -> Result<bool> {
        let conn = self.conn()?;
        Ok(self.session(&conn, id)?.is_some())
    }

    fn revision(&self, id: &str) -> Result<Option<String>> {
        let conn = self.conn()?;
        Ok(self.session(&conn, id)?.map(|s| {
            format!(
                "{}:incarnation:{}:revision:{}",
                self.identity, s.incarnation, s.revision
            )
        }))
    }

    fn scan(&self, id: &str) -> Result<Option<Scan>> {
        Ok(self.stored(id)?.map(|(scan, _)| scan))
    }

    fn load(&self, id: &str) -> Result<Option<Stored>> {
        Ok(self
            .stored(id)?
            .map(|(scan, events)| Stored { scan, events }))
    }

    /// As the schema-14 build's `readFrom`: the rows from `from_seq` on,
    /// checked alone (a bad row before them is not seen), any cwd.
    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        let conn = self.conn()?;
        let Some(session) = self.session(&conn, id)? else {
            return Ok(None);
        };
        session
            .header
            .check_version()
            .map_err(|detail| refused(&self.path, detail.to_string()))?;
        let rows = self.rows(&conn, id, from_seq)?;
        Ok(Some(self.decode_rows(&rows, from_seq)?.0))
    }

    fn create(
        &self,
        _: &SessionHeader,
        _: Policy,
        _: &[Event],
        _: &[Placement],
    ) -> Result<Box<dyn LogWriter>> {
        Err(self.read_only())
    }

    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        if !self.exists(id)? {
            return Ok(None);
        }
        Err(self.read_only())
    }

    fn delete_if(
        &self,
        id: &str,
        _check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<crate::backend::Deletion> {
        if !self.exists(id)? {
            return Ok(crate::backend::Deletion::NotFound);
        }
        Err(self.read_only())
    }
}
