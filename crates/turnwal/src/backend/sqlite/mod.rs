//! The SQLite backend: every session of a store in one SQLite database, in
//! the upstream harness's schema 17, so a database written by either side
//! opens in the other. docs/SQLITE.md specifies the schema, the row
//! encoding, the pragmas, locking, sync modes and the recovery rules.
//!
//! It has the same semantics as the WAL backend behind the same
//! [`Backend`] and [`LogWriter`] traits: one `BEGIN IMMEDIATE` transaction
//! per append batch that re-checks schema ownership and the stored tail
//! (a batch must start at the stored next seq), the last row holding a
//! `turn/end` as the commit point, a torn tail after it that repair deletes
//! (closers inserted in the same transaction), and one writer per session.
//!
//! ```
//! use turnwal::backend::sqlite::SqliteOptions;
//! use turnwal::{Event, SessionHeader, Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("sessions.db");
//! let store = Store::open_sqlite(&path, SqliteOptions::default(), StoreOptions::default())?;
//! store.create(SessionHeader::new("s1", 1_700_000_000_000).with_cwd("/work"))?;
//! store.append("s1", &[
//!     Event::new("turn/start", 0, 1, r#"{"turn":1}"#)?,
//!     Event::new("user/message", 1, 2, r#"{"id":"u1","text":"hi"}"#)?,
//! ])?;
//! drop(store); // a crash: turn 1 never ended
//!
//! let store = Store::open_sqlite(&path, SqliteOptions::default(), StoreOptions::default())?;
//! let view = store.load("s1")?; // deletes nothing, inserts the closer
//! assert_eq!(view.events[2].to_json(), r#"{"type":"turn/end","seq":2,"time":2,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The row encoding, shared with the PostgreSQL store
/// ([`crate::backend::rows::codec`]).
pub use super::rows::codec;
use super::rows::scan;
mod lock;
mod rows;
pub mod schema;
pub mod v14;
mod writer;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, MutexGuard};

use crate::sync::{Resource, Table};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use self::codec::{Col, RowOut};
use self::lock::{LockFile, WriterLock};
use self::schema::{policy_of, sql_error};
use self::writer::SqliteWriter;
use super::{Backend, LogWriter, Stored};
use crate::contract::{Placement, Policy};
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, EventError, MAX_SAFE_INTEGER};
use crate::header::{SESSION_FORMAT_VERSION, SessionHeader};
use crate::scan::{Scan, SessionSummary};

/// `PRAGMA journal_mode` of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JournalMode {
    /// Write-ahead log (the default): readers never block the writer.
    #[default]
    Wal,
    /// Rollback journal, deleted at each commit.
    Delete,
    /// Rollback journal, truncated at each commit.
    Truncate,
    /// Rollback journal, its header zeroed at each commit.
    Persist,
}

impl fmt::Display for JournalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JournalMode::Wal => "wal",
            JournalMode::Delete => "delete",
            JournalMode::Truncate => "truncate",
            JournalMode::Persist => "persist",
        })
    }
}

impl FromStr for JournalMode {
    type Err = String;

    /// Parses the lowercase names `Display` gives.
    ///
    /// ```
    /// use turnwal::backend::sqlite::JournalMode;
    /// assert_eq!("truncate".parse::<JournalMode>(), Ok(JournalMode::Truncate));
    /// assert_eq!(JournalMode::Wal.to_string(), "wal");
    /// assert!("memory".parse::<JournalMode>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<JournalMode, String> {
        match s {
            "wal" => Ok(JournalMode::Wal),
            "delete" => Ok(JournalMode::Delete),
            "truncate" => Ok(JournalMode::Truncate),
            "persist" => Ok(JournalMode::Persist),
            other => Err(format!(
                "unknown journal mode {other:?} (expected wal, delete, truncate or persist)"
            )),
        }
    }
}

/// `PRAGMA synchronous` of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Synchronous {
    /// Every commit is fsynced before it returns (the default): an
    /// acknowledged append survives a power loss.
    #[default]
    Full,
    /// Fewer fsyncs. In WAL journal mode a commit is not fsynced, so a power
    /// loss can lose the last acknowledged commits (never the database's
    /// consistency). Use it only when that is acceptable.
    Normal,
}

impl fmt::Display for Synchronous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Synchronous::Full => "full",
            Synchronous::Normal => "normal",
        })
    }
}

impl FromStr for Synchronous {
    type Err = String;

    /// Parses the lowercase names `Display` gives.
    ///
    /// ```
    /// use turnwal::backend::sqlite::Synchronous;
    /// assert_eq!("normal".parse::<Synchronous>(), Ok(Synchronous::Normal));
    /// assert_eq!(Synchronous::Full.to_string(), "full");
    /// ```
    fn from_str(s: &str) -> Result<Synchronous, String> {
        match s {
            "full" => Ok(Synchronous::Full),
            "normal" => Ok(Synchronous::Normal),
            other => Err(format!(
                "unknown synchronous mode {other:?} (expected full or normal)"
            )),
        }
    }
}

/// How a SQLite store opens its database.
///
/// ```
/// use std::time::Duration;
/// use turnwal::backend::sqlite::{JournalMode, SqliteOptions, Synchronous};
/// let o = SqliteOptions::default();
/// assert_eq!((o.journal_mode, o.synchronous, o.busy_timeout), (JournalMode::Wal, Synchronous::Full, Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// `PRAGMA journal_mode`. Default: [`JournalMode::Wal`].
    pub journal_mode: JournalMode,
    /// `PRAGMA synchronous`. Default: [`Synchronous::Full`].
    pub synchronous: Synchronous,
    /// How long an operation waits for another connection's lock (and a
    /// journal-mode switch retries while the database is busy) before it
    /// fails. Default: 5 s.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> SqliteOptions {
        SqliteOptions {
            journal_mode: JournalMode::Wal,
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// A store of sessions in one SQLite database file.
///
/// Cloning is cheap; clones share one connection. Every operation locks it
/// for its whole transaction.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    shared: Arc<Shared>,
}

/// What the backend and its writers share.
pub(crate) struct Shared {
    path: PathBuf,
    memory: bool,
    /// `file:<dev>:<ino>:<birthtimeNs>:store:<uuid>` (or `memory:store:<uuid>`).
    identity: String,
    conn: Resource<Conn>,
    /// Sessions a writer of this backend holds.
    held: Table<HashSet<String>>,
    /// Its share of the process's descriptor of the database file, which
    /// its writers' locks are taken on (`None` for an in-memory or
    /// read-only database). Declared after `conn`, so it is dropped after
    /// the connection is closed (`lock`'s comment says why).
    lock_file: Option<LockFile>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("path", &self.path)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// The connection, with the `PRAGMA schema_version` whose schema objects
/// were last checked.
pub(crate) struct Conn {
    conn: Connection,
    checked_schema: i64,
}

/// One `sessions` row.
#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    header: SessionHeader,
    incarnation: String,
    revision: i64,
}

impl SessionRow {
    fn policy(&self) -> Policy {
        policy_of(&self.incarnation)
    }

    /// The session's rows read through `conn`.
    fn rows<'a>(&'a self, conn: &'a Connection, path: &'a Path) -> rows::SqliteRows<'a> {
        rows::SqliteRows {
            conn,
            path,
            header: &self.header,
            policy: self.policy(),
        }
    }
}

const SESSION_COLUMNS: &str = "id, version, created_at, cwd, parent_session, seed_length, origin, \
                               delegation_depth, agent_preset, incarnation, revision";

impl SqliteBackend {
    /// Opens (creating if absent, with mode 0600) the database at `path`:
    /// applies the pragmas, and checks the schema and identity, or writes
    /// them to a pristine file in one transaction. A database that is not
    /// an empty file and not a schema-17 session database (another
    /// `user_version`, a foreign `application_id`, a differing schema) is
    /// refused with [`Error::Unsupported`] before anything is changed, as is
    /// a file or directory another user could tamper with (upstream's POSIX
    /// checks, docs/SQLITE.md). `":memory:"` opens a private in-memory database.
    ///
    /// ```
    /// use turnwal::backend::Backend;
    /// use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let backend = SqliteBackend::open(dir.path().join("s.db"), SqliteOptions::default()).unwrap();
    /// assert!(backend.list().unwrap().is_empty());
    /// // Not a session database: refused, untouched.
    /// let other = dir.path().join("other.db");
    /// rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t(x)").unwrap();
    /// // (Files others may read are refused first, as upstream refuses them.)
    /// use std::os::unix::fs::PermissionsExt;
    /// std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    /// let err = SqliteBackend::open(&other, SqliteOptions::default()).unwrap_err();
    /// assert!(err.to_string().contains("unversioned schema"), "{err}");
    /// ```
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteBackend> {
        let path = path.as_ref();
        let opened = schema::open(path, &options)?;
        let memory = path == Path::new(":memory:");
        let identity = if memory {
            format!("memory:store:{}", opened.store_id)
        } else {
            file_identity(path, &opened.store_id)?
        };
        let read_only = opened.conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false);
        let lock_file = if memory || read_only {
            None
        } else {
            Some(LockFile::open(path)?)
        };
        Ok(SqliteBackend {
            shared: Arc::new(Shared {
                path: path.to_owned(),
                memory,
                identity,
                conn: Resource::new(
                    Conn {
                        conn: opened.conn,
                        checked_schema: opened.schema_version,
                    },
                    "SQLite connection",
                ),
                held: Table::new(HashSet::new()),
                lock_file,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The store identity revisions start with:
    /// `file:<dev>:<ino>:<birthtimeNs>:store:<uuid>`.
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// Where repairs keep the rows they delete:
    /// `<database>.turnwal-quarantine/`, beside the database file (`None`
    /// for `:memory:`).
    pub fn quarantine_dir(&self) -> Option<PathBuf> {
        self.shared.quarantine_dir()
    }

    /// The file a writer of session `id` holds its lock on: the database
    /// itself (one byte of it, [`SqliteBackend::lock_offset`]); nothing is
    /// created for it. `:memory:#<id>` for an in-memory database.
    pub fn lock_path(&self, id: &str) -> PathBuf {
        self.shared.lock_path(id)
    }

    /// The byte of the database file a writer of session `id` holds an OFD
    /// write lock on: `2^62 + 1 + fnv1a64(id) mod (2^62 - 2)`, the same in
    /// every build (docs/SQLITE.md, "Locking").
    ///
    /// ```
    /// use turnwal::backend::sqlite::SqliteBackend;
    /// assert_eq!(SqliteBackend::lock_offset(""), (1 << 62) + 1 + 0xcbf2_9ce4_8422_2325 % ((1 << 62) - 2));
    /// assert!((SqliteBackend::lock_offset("s") >> 62) == 1);
    /// ```
    pub fn lock_offset(id: &str) -> u64 {
        lock::lock_offset(id)
    }
}

/// `file:<dev>:<ino>:<birth ns>:store:<store id>`. On Windows the volume
/// serial number and file index stand for device and inode, and the birth
/// is 0: NTFS gives a file created under a name deleted moments before the
/// old file's creation time (file system tunneling), so it tells nothing
/// apart there, and the store id does.
pub(super) fn file_identity(path: &Path, store_id: &str) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
    let (dev, ino) = crate::storage::identity(path).map_err(|e| Error::io("stat", path, e))?;
    let birth = meta
        .created()
        .ok()
        .filter(|_| cfg!(unix))
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(format!("file:{dev}:{ino}:{birth}:store:{store_id}"))
}

impl Shared {
    pub(crate) fn conn(&self) -> Result<MutexGuard<'_, Conn>> {
        self.conn.lock(&self.path.display().to_string())
    }

    pub(crate) fn lock_path(&self, id: &str) -> PathBuf {
        if self.memory {
            return PathBuf::from(format!(":memory:#{id}"));
        }
        self.path.clone()
    }

    /// `<database>.turnwal-quarantine/`, where repairs keep the rows they
    /// delete; `None` for an in-memory database.
    pub(crate) fn quarantine_dir(&self) -> Option<PathBuf> {
        if self.memory {
            return None;
        }
        let mut dir = self.path.as_os_str().to_owned();
        dir.push(".turnwal-quarantine");
        Some(PathBuf::from(dir))
    }

    pub(crate) fn revision_of(&self, row: &SessionRow) -> String {
        format!(
            "{}:incarnation:{}:revision:{}",
            self.identity, row.incarnation, row.revision
        )
    }
}

impl Conn {
    /// Runs `f` in a read transaction (one consistent snapshot).
    fn read<T>(&mut self, path: &Path, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(|e| sql_error("begin", path, e))?;
        let value = f(&tx)?;
        tx.commit().map_err(|e| sql_error("commit", path, e))?;
        Ok(value)
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction after re-checking schema
    /// ownership; commits when it succeeds, rolls back when it fails.
    fn write<T>(&mut self, path: &Path, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if self.conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            return Err(Error::io(
                "write",
                path,
                std::io::Error::new(
                    std::io::ErrorKind::ReadOnlyFilesystem,
                    "the database (or its file system) is read-only: reads work, writes cannot",
                ),
            ));
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error("begin immediate", path, e))?;
        schema::check_ownership(&tx, path, &mut self.checked_schema)?;
        let value = f(&tx)?;
        tx.commit().map_err(|e| sql_error("commit", path, e))?;
        Ok(value)
    }
}

fn stored_metadata(path: &Path, id: &str, detail: impl fmt::Display) -> Error {
    Error::from(Corruption {
        path: path.to_owned(),
        offset: 0,
        unit: crate::error::Unit::Row,
        seq: None,
        reason: format!("invalid stored session metadata of session {id:?}: {detail}"),
    })
}

/// Reads and checks one `sessions` row.
pub(crate) fn read_session(conn: &Connection, path: &Path, id: &str) -> Result<Option<SessionRow>> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
        ))
        .and_then(|mut stmt| stmt.query_row([id], session_values).optional())
        .map_err(|e| sql_error("read session", path, e))?;
    row.map(|values| decode_session(path, values)).transpose()
}

/// Every `sessions` row, by id (with the id as stored, for a row that does
/// not decode).
fn read_sessions(conn: &Connection, path: &Path) -> Result<Vec<(String, Result<SessionRow>)>> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions ORDER BY id"
        ))
        .map_err(|e| sql_error("read sessions", path, e))?;
    let rows = stmt
        .query_map([], session_values)
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(|e| sql_error("read sessions", path, e))?;
    Ok(rows
        .into_iter()
        .map(|values| {
            let id = match &values[0] {
                Col::Text(t) => String::from_utf8_lossy(t).into_owned(),
                _ => String::new(),
            };
            (id, decode_session(path, values))
        })
        .collect())
}

type SessionValues = Vec<Col>;

fn session_values(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionValues> {
    (0..11).map(|i| row.get(i)).collect()
}

fn decode_session(path: &Path, v: SessionValues) -> Result<SessionRow> {
    let id = match &v[0] {
        Col::Text(t) if !t.is_empty() => String::from_utf8(t.clone())
            .map_err(|_| stored_metadata(path, "?", "id must be valid UTF-8"))?,
        _ => return Err(stored_metadata(path, "?", "id must be a non-empty string")),
    };
    let bad = |what: &str| stored_metadata(path, &id, what);
    let text = |i: usize, name: &str| match &v[i] {
        Col::Null => Ok(None),
        Col::Text(t) => String::from_utf8(t.clone())
            .map(Some)
            .map_err(|_| bad(&format!("{name} must be valid UTF-8"))),
        _ => Err(bad(&format!("{name} must be a string or null"))),
    };
    let uint = |i: usize, name: &str| match &v[i] {
        Col::Null => Ok(None),
        Col::Integer(n) if *n >= 0 && *n as u64 <= MAX_SAFE_INTEGER => Ok(Some(*n as u64)),
        _ => Err(bad(&format!(
            "{name} must be a non-negative safe integer or null"
        ))),
    };
    let version = match &v[1] {
        Col::Integer(n) => *n,
        _ => return Err(bad("version must be an integer")),
    };
    let created_at = uint(2, "created_at")?.ok_or_else(|| bad("created_at must not be null"))?;
    let header = SessionHeader {
        version,
        id: id.clone(),
        created_at,
        cwd: text(3, "cwd")?,
        parent_session: text(4, "parent_session")?,
        seed_length: uint(5, "seed_length")?,
        origin: text(6, "origin")?,
        delegation_depth: uint(7, "delegation_depth")?,
        agent_preset: text(8, "agent_preset")?,
    };
    let incarnation = text(9, "incarnation")?.unwrap_or_default();
    if !schema::is_uuid(&incarnation) {
        return Err(bad("incarnation must be a UUID"));
    }
    let revision = match &v[10] {
        Col::Integer(n) if *n >= 0 => *n,
        _ => return Err(bad("revision must be a non-negative integer")),
    };
    // A foreign version is the Store's to refuse (naming which side to
    // upgrade); only our own version's fields are checked here.
    if version == SESSION_FORMAT_VERSION {
        header.validate().map_err(|e| bad(&e.0))?;
    }
    Ok(SessionRow {
        header,
        incarnation,
        revision,
    })
}

/// Inserts rows of session `id`.
pub(crate) fn insert_rows(conn: &Connection, path: &Path, id: &str, rows: &[RowOut]) -> Result<()> {
    use rusqlite::types::Value;
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, \
             surface_op, ignorable) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(|e| sql_error("insert events", path, e))?;
    for row in rows {
        let data = rusqlite::types::ToSqlOutput::Borrowed(match &row.data {
            codec::Data::Text(t) => rusqlite::types::ValueRef::Text(t.as_bytes()),
            codec::Data::Blob(b) => rusqlite::types::ValueRef::Blob(b),
        });
        let sources = row
            .source_event_seqs
            .as_deref()
            .map_or(Value::Null, |b| Value::Blob(b.to_vec()));
        stmt.execute(params![
            id,
            row.seq as i64,
            row.event_type,
            row.time,
            data,
            sources,
            row.surface_op,
            row.ignorable
        ])
        .map_err(|e| sql_error("insert events", path, e))?;
    }
    Ok(())
}

/// `revision = revision + 1` of session `id`.
pub(crate) fn bump_revision(conn: &Connection, path: &Path, id: &str) -> Result<()> {
    let changed = conn
        .prepare_cached("UPDATE sessions SET revision = revision + 1 WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute([id]))
        .map_err(|e| sql_error("update revision", path, e))?;
    if changed != 1 {
        return Err(Error::NotFound { id: id.to_owned() });
    }
    Ok(())
}

/// Deletes session `id` and its rows.
pub(crate) fn delete_session(conn: &Connection, path: &Path, id: &str) -> Result<bool> {
    conn.execute("DELETE FROM events WHERE session_id = ?1", [id])
        .map_err(|e| sql_error("delete events", path, e))?;
    let n = conn
        .execute("DELETE FROM sessions WHERE id = ?1", [id])
        .map_err(|e| sql_error("delete session", path, e))?;
    Ok(n > 0)
}

/// The rows of a batch, its events checked against the row limits.
pub(crate) fn encode(batch: &[Event]) -> Result<Vec<RowOut>> {
    codec::encode_batch(batch).map_err(|e: EventError| Error::Event(e))
}

impl SqliteBackend {
    /// Reads some of a session's events with `read` in one read transaction;
    /// `None` when the session does not exist. A foreign header version is
    /// refused first: these reads have no header for `Store` to check, so
    /// the backend refuses it, as the file backends do.
    fn read_events(
        &self,
        id: &str,
        read: impl FnOnce(&rusqlite::Connection, &std::path::PathBuf, &SessionRow) -> Result<Vec<Event>>,
    ) -> Result<Option<Vec<Event>>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let Some(row) = read_session(conn, path, id)? else {
                return Ok(None);
            };
            row.header
                .check_version()
                .map_err(|detail| Error::Unsupported {
                    path: path.clone(),
                    detail: detail.to_string(),
                })?;
            read(conn, path, &row).map(Some)
        })
    }
}

impl Backend for SqliteBackend {
    fn location(&self) -> String {
        self.shared.path.display().to_string()
    }

    /// The database file and its journals (`-wal`, `-journal`): every
    /// session's commit writes there.
    fn watch(&self, _id: Option<&str>) -> Result<Box<dyn crate::storage::watch::Watch>> {
        Ok(crate::storage::watch::of_file(&self.shared.path))
    }

    /// The session row's incarnation, drawn when it is created.
    fn incarnation(&self, revision: &str) -> Option<String> {
        crate::backend::rows::incarnation_of(revision)
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            Ok(read_sessions(conn, path)?
                .into_iter()
                .map(|(id, row)| match row {
                    Ok(row) => scan::summarize(&row.rows(conn, path)),
                    Err(e) => SessionSummary::corrupt(id, 0, e.to_string()),
                })
                .collect())
        })
    }

    fn summary(&self, id: &str) -> Result<Option<SessionSummary>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            Ok(read_session(conn, path, id)?.map(|row| scan::summarize(&row.rows(conn, path))))
        })
    }

    fn end_hint(&self, id: &str) -> Result<Option<u64>> {
        // The last row by the primary key. A packed row's seq is its first
        // member's, so this can fall short of the end by a run: the reader
        // then reads a few more events than it keeps.
        let path = &self.shared.path;
        let last: Option<i64> = self
            .shared
            .conn()?
            .conn
            .prepare_cached("SELECT max(seq) FROM events WHERE session_id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |r| r.get(0)))
            .map_err(|e| sql_error("read events", path, e))?;
        Ok(last
            .and_then(|seq| u64::try_from(seq).ok())
            .map(|seq| seq + 1))
    }

    fn exists(&self, id: &str) -> Result<bool> {
        let path = &self.shared.path;
        let conn = self.shared.conn()?;
        conn.conn
            .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
            .and_then(|mut stmt| stmt.exists([id]))
            .map_err(|e| sql_error("read session", path, e))
    }

    fn revision(&self, id: &str) -> Result<Option<String>> {
        let path = &self.shared.path;
        let row = self
            .shared
            .conn()?
            .read(path, |conn| read_session(conn, path, id))?;
        Ok(row.map(|row| self.shared.revision_of(&row)))
    }

    fn scan(&self, id: &str) -> Result<Option<Scan>> {
        Ok(self.load(id)?.map(|stored| stored.scan))
    }

    fn read(&self, id: &str) -> Result<Option<crate::view::LogReader>> {
        let path = &self.shared.path;
        let shared = self.shared.clone();
        let session = id.to_owned();
        // Each page of rows in a read transaction of its own: the shared
        // connection is not held between pages.
        let fetch: crate::backend::rows::cursor::Fetch = Box::new(move |lo, hi, limit| {
            let path = &shared.path;
            shared.conn()?.read(path, |conn| {
                let row = read_session(conn, path, &session)?.ok_or_else(|| Error::NotFound {
                    id: session.clone(),
                })?;
                crate::backend::rows::scan::Rows::page(&row.rows(conn, path), lo, hi, limit)
            })
        });
        self.shared.conn()?.read(path, |conn| {
            let Some(row) = read_session(conn, path, id)? else {
                return Ok(None);
            };
            crate::backend::rows::cursor::reader(&row.rows(conn, path), fetch).map(Some)
        })
    }

    fn load(&self, id: &str) -> Result<Option<Stored>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let Some(row) = read_session(conn, path, id)? else {
                return Ok(None);
            };
            let c = scan::full_scan(&row.rows(conn, path))?;
            Ok(Some(Stored {
                scan: c.scan,
                events: c.events,
            }))
        })
    }

    /// Every row that decodes, past damage; bad rows and missing seqs are
    /// gaps (in rows).
    fn salvage(&self, id: &str) -> Result<Option<crate::scan::Salvage>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let Some(row) = read_session(conn, path, id)? else {
                return Ok(None);
            };
            scan::salvage(&row.rows(conn, path)).map(Some)
        })
    }

    /// The files in `<database>.turnwal-quarantine/`.
    fn deep_check(&self) -> Result<Vec<String>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let mut stmt = conn
                .prepare("PRAGMA integrity_check")
                .map_err(|e| sql_error("integrity_check", path, e))?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(|e| sql_error("integrity_check", path, e))?;
            let mut problems = Vec::new();
            for row in rows {
                let row = row.map_err(|e| sql_error("integrity_check", path, e))?;
                if row != "ok" {
                    // One line a problem: SQLite starts some with a line
                    // naming the schema.
                    let row = row.replace('\n', "; ");
                    problems.push(format!("{}: PRAGMA integrity_check: {row}", path.display()));
                }
            }
            Ok(problems)
        })
    }

    fn quarantined(&self) -> Result<Vec<PathBuf>> {
        let Some(dir) = self.shared.quarantine_dir() else {
            return Ok(Vec::new());
        };
        crate::quarantine::list_files(&dir).map_err(|e| Error::io("list", &dir, e))
    }

    fn header(&self, id: &str) -> Result<Option<SessionHeader>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            Ok(read_session(conn, path, id)?.map(|row| row.header))
        })
    }

    fn policy(&self, id: &str) -> Result<Option<crate::contract::Policy>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            Ok(read_session(conn, path, id)?.map(|row| row.policy()))
        })
    }

    fn read_first(&self, id: &str, n: usize) -> Result<Option<Vec<Event>>> {
        self.read_events(id, |conn, path, row| {
            scan::read_first(&row.rows(conn, path), n)
        })
    }

    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        self.read_events(id, |conn, path, row| {
            scan::read_from(&row.rows(conn, path), from_seq)
        })
    }

    fn admit_header(&self, header: SessionHeader) -> Result<SessionHeader> {
        refuse_lone_surrogates(&self.shared.path, &header)?;
        Ok(header)
    }

    fn create(
        &self,
        header: &SessionHeader,
        policy: Policy,
        batch: &[Event],
        _placements: &[Placement],
    ) -> Result<Box<dyn LogWriter>> {
        refuse_lone_surrogates(&self.shared.path, header)?;
        let id = &header.id;
        // A collision with a session another writer holds is a collision,
        // not a lock conflict.
        if self.exists(id)? {
            return Err(Error::AlreadyExists {
                id: id.clone(),
                on_disk: true,
            });
        }
        let lock = WriterLock::acquire(&self.shared, id)?;
        let rows = encode(batch)?;
        let path = &self.shared.path;
        let incarnation = schema::incarnation_for(policy);
        self.shared.conn()?.write(path, |conn| {
            if read_session(conn, path, id)?.is_some() {
                return Err(Error::AlreadyExists {
                    id: id.clone(),
                    on_disk: true,
                });
            }
            let next = scan::stored_next_seq(&rows::SqliteRows {
                conn,
                path,
                header,
                policy,
            })?;
            let first = batch.first().map_or(0, Event::seq);
            if first != next {
                return Err(Error::SeqMismatch {
                    id: id.clone(),
                    expected: next,
                    got: first,
                });
            }
            conn.prepare_cached(
                "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, \
                 origin, delegation_depth, agent_preset, incarnation, revision) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    id,
                    header.version,
                    header.created_at as i64,
                    header.cwd,
                    header.parent_session,
                    header.seed_length.map(|n| n as i64),
                    header.origin,
                    header.delegation_depth.map(|n| n as i64),
                    header.agent_preset,
                    incarnation,
                ])
            })
            .map_err(|e| sql_error("insert session", path, e))?;
            insert_rows(conn, path, id, &rows)?;
            bump_revision(conn, path, id)
        })?;
        Ok(Box::new(SqliteWriter::new(
            self.shared.clone(),
            lock,
            header.clone(),
            incarnation,
            batch.last().map_or(0, |e| e.seq() + 1),
        )))
    }

    /// The session's byte, asked (never taken); a read-only store has no
    /// writers to find.
    fn holder(&self, id: &str) -> Result<Option<crate::backend::Holder>> {
        Ok(lock::holder(&self.shared, id)?.map(crate::backend::Holder::of_pid))
    }

    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        if !self.exists(id)? {
            return Ok(None);
        }
        let lock = WriterLock::acquire(&self.shared, id)?;
        let path = &self.shared.path;
        let Some(row) = self
            .shared
            .conn()?
            .read(path, |conn| read_session(conn, path, id))?
        else {
            return Ok(None);
        };
        Ok(Some(Box::new(SqliteWriter::new(
            self.shared.clone(),
            lock,
            row.header,
            row.incarnation,
            0,
        ))))
    }

    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<super::Deletion> {
        use super::Deletion;
        if !self.exists(id)? {
            return Ok(Deletion::NotFound);
        }
        let lock = WriterLock::acquire(&self.shared, id)?;
        let path = &self.shared.path;
        // Read and deleted in one write transaction, under the writer lock.
        let done = self.shared.conn()?.write(path, |conn| {
            let Some(row) = read_session(conn, path, id)? else {
                return Ok(Deletion::NotFound);
            };
            let summary = scan::summarize(&row.rows(conn, path));
            if !check(&summary) {
                return Ok(Deletion::Kept(summary));
            }
            Ok(if delete_session(conn, path, id)? {
                Deletion::Deleted(summary)
            } else {
                Deletion::NotFound
            })
        })?;
        drop(lock);
        Ok(done)
    }

    fn stored_records(
        &self,
        id: &str,
    ) -> Option<Result<Option<Box<dyn crate::backend::StoredLog>>>> {
        Some(
            SqliteBackend::stored_records(self, id)
                .map(|s| s.map(|s| Box::new(s) as Box<dyn crate::backend::StoredLog>)),
        )
    }
}

pub use super::rows::StoredRows;

impl SqliteBackend {
    /// The stored prefix of session `id` as storage records, with what
    /// [`Backend::view`] and [`Backend::revision`] tell of it, in one read
    /// transaction; `None` when the session does not exist. Rows are
    /// validated and the log classified exactly as [`Backend::load`] does
    /// (the same committed prefix, kept tail, cut and closers, the same
    /// refusal of a corrupt session); only the packed rows before the last
    /// `turn/end` are not decoded: each is checked to be in the spelling
    /// upstream writes, and to decode, and handed over as stored (one that
    /// is not is decoded).
    pub fn stored_records(&self, id: &str) -> Result<Option<StoredRows>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let Some(row) = read_session(conn, path, id)? else {
                return Ok(None);
            };
            let (c, items) = scan::full_scan_items(&row.rows(conn, path))?;
            Ok(Some(StoredRows::of(
                c,
                items,
                self.shared.revision_of(&row),
            )))
        })
    }
}

/// The backend for the SQLite database at `path`: the published harness's
/// schema-14 store (read-only, [`v14`]) when the file holds one, else a
/// schema-17 store ([`SqliteBackend::open`]).
pub fn open_any(path: &Path, options: SqliteOptions) -> Result<std::sync::Arc<dyn Backend>> {
    if path.is_file() && v14::user_version(path) == Some(v14::USER_VERSION_14) {
        return Ok(std::sync::Arc::new(v14::Schema14Backend::open(path)?));
    }
    Ok(std::sync::Arc::new(SqliteBackend::open(path, options)?))
}

#[cfg(test)]
mod tests;

/// SQLite's TEXT is UTF-8, which has no spelling for a lone UTF-16
/// surrogate; upstream's SQLite store silently writes U+FFFD instead. turnwal
/// refuses, so that a session never changes its id or cwd by being stored.
fn refuse_lone_surrogates(path: &Path, header: &SessionHeader) -> Result<()> {
    match header
        .strings()
        .find(|(_, value)| crate::upstream::jsstr::has_lone_surrogate(value))
    {
        None => Ok(()),
        Some((key, value)) => Err(Error::Unsupported {
            path: path.to_owned(),
            detail: format!(
                "session header field {key} {} holds a lone UTF-16 surrogate, which an SQLite \
                 store cannot hold (its TEXT is UTF-8; upstream's SQLite store would replace it \
                 with U+FFFD): keep this session in a WAL or JSONL store",
                crate::upstream::jsstr::to_json(value)
            ),
        }),
    }
}
