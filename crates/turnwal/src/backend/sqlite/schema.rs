//! Identity, pragmas and the schema check of the SQLite backend, exactly as
//! the upstream harness's schema-17 store applies them on every open
//! (docs/SQLITE.md, "Schema and identity").

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::{JournalMode, SqliteOptions, Synchronous};
use crate::contract::Policy;
use crate::error::{Corruption, Error, Result};

/// The upstream `resources/sql/schema.sql` of schema 17: three STRICT tables
/// and no other object. The schema check compares every database against a
/// reference in-memory database built from this text.
pub const SCHEMA_SQL: &str = "\
CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;

CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
";

/// `PRAGMA application_id` of a session database: ASCII "DSHP".
pub const APPLICATION_ID: i64 = 0x4453_4850;
/// `PRAGMA user_version` of schema 17.
pub const USER_VERSION: i64 = 17;

/// How often a busy journal-mode switch is retried.
const JOURNAL_RETRY: Duration = Duration::from_millis(10);

pub(super) fn sql_error(op: &'static str, path: &Path, e: rusqlite::Error) -> Error {
    if let rusqlite::Error::SqliteFailure(f, _) = &e
        && f.code == rusqlite::ErrorCode::NotADatabase
    {
        return Error::Unsupported {
            path: path.to_owned(),
            detail: format!("not an SQLite database ({e})"),
        };
    }
    Error::io(op, path, std::io::Error::other(e))
}

fn refused(path: &Path, detail: String) -> Error {
    Error::Unsupported {
        path: path.to_owned(),
        detail,
    }
}

/// A validated connection and what it learned.
pub(super) struct Opened {
    pub conn: Connection,
    pub store_id: String,
    pub schema_version: i64,
}

/// Whether this process may write the file at `path` (`access(2)`, which
/// also answers for a read-only file system, even to root).
#[cfg(unix)]
pub(super) fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Whether this process may write the file at `path`: on Windows, a file
/// without the read-only attribute (a directory's attribute means nothing
/// there, so a directory counts as writable; ACLs are not inspected:
/// docs/PLATFORMS.md).
#[cfg(windows)]
pub(super) fn writable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir() || !m.permissions().readonly())
}

/// Opens a database this process may not write. A WAL-mode database needs
/// its `-shm` file, which a read-only directory cannot get: there, when no
/// `-wal` file holds commits the database file lacks, it is opened
/// `immutable` (nothing can change it while the directory is read-only to
/// this process, and a writer would need that directory for its `-wal`).
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir_writable = writable(parent.unwrap_or(Path::new(".")));
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if dir_writable || Path::new(&wal).exists() {
        return Connection::open_with_flags(path, flags);
    }
    // Windows counts every directory writable (`writable`): never here.
    #[cfg(windows)]
    return Connection::open_with_flags(path, flags);
    #[cfg(unix)]
    Connection::open_with_flags(immutable_uri(path), flags | OpenFlags::SQLITE_OPEN_URI)
}

/// `file:<path, percent-encoded>?immutable=1`.
#[cfg(unix)]
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Creates an absent database file with mode 0600, as upstream does (on
/// Windows, with its directory's inherited ACL).
fn create_file(path: &Path) -> Result<()> {
    match crate::storage::private_file(std::fs::OpenOptions::new().write(true).create_new(true))
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io("create", path, e)),
    }
}

/// Upstream's POSIX checks of the directory a database lives in: a real
/// directory (created 0700 when absent), owned by this user, and writable by
/// nobody else — another user who can rename entries there could swap the
/// database or its `-wal` file under a writer.
fn check_parent(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(parent)
            .map_err(|e| Error::io("create directory", parent, e))?;
    }
    check_parent_owner(path, parent)
}

/// Windows: a real directory, not a reparse point; ownership and modes are
/// ACL questions there, not inspected (docs/PLATFORMS.md, "Windows").
#[cfg(windows)]
fn check_parent_owner(path: &Path, parent: &Path) -> Result<()> {
    crate::storage::check_private_dir(parent).map_err(|e| refused(path, e.to_string()))
}

#[cfg(unix)]
fn check_parent_owner(path: &Path, parent: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(parent).map_err(|e| Error::io("stat", parent, e))?;
    if !meta.is_dir() {
        return Err(refused(
            path,
            format!(
                "its directory {} is not a real directory (a symlink?)",
                parent.display()
            ),
        ));
    }
    if meta.uid() != current_uid() {
        return Err(refused(
            path,
            format!(
                "its directory {} is owned by uid {}, not by this user ({})",
                parent.display(),
                meta.uid(),
                current_uid()
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refused(
            path,
            format!(
                "its directory {} is writable by group or others (mode {:o}); chmod go-w it",
                parent.display(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Upstream's POSIX checks of the database file: a regular file (not a
/// symlink), owned by this user, with no group or other permission bits.
fn check_file(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io("stat", path, e))?;
    if !meta.file_type().is_file() {
        return Err(refused(
            path,
            "a SQLite store must be a regular file, not a symlink or a device".into(),
        ));
    }
    check_file_owner(path, &meta)
}

/// Windows: ACLs are not inspected (docs/PLATFORMS.md, "Windows").
#[cfg(windows)]
fn check_file_owner(_path: &Path, _meta: &std::fs::Metadata) -> Result<()> {
    Ok(())
}

#[cfg(unix)]
fn check_file_owner(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if meta.uid() != current_uid() {
        return Err(refused(
            path,
            format!(
                "the database is owned by uid {}, not by this user ({})",
                meta.uid(),
                current_uid()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refused(
            path,
            format!(
                "the database is readable or writable by group or others (mode {:o}); chmod 600 it",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

#[cfg(unix)]
fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn pragma_int(conn: &Connection, name: &str, path: &Path) -> Result<i64> {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .map_err(|e| sql_error("read pragma", path, e))
}

fn set_pragma(conn: &Connection, name: &str, value: &str, path: &Path) -> Result<()> {
    conn.execute_batch(&format!("PRAGMA {name} = {value}"))
        .map_err(|e| sql_error("set pragma", path, e))
}

/// Opens `path` (":memory:" for a private in-memory database), applies the
/// pragmas and checks (or, for a pristine file, writes) the schema and the
/// identity. A refused database is left exactly as it was.
pub(super) fn open(path: &Path, options: &SqliteOptions) -> Result<Opened> {
    let started = Instant::now();
    let memory = path == Path::new(":memory:");
    // A database this process may not write (a read-only file system or
    // file) is opened read-only: every read works, and a write says why it
    // cannot (`Conn::write`).
    let read_only = !memory && path.exists() && !writable(path);
    let conn = if memory {
        Connection::open_in_memory()
    } else {
        if path.is_dir() {
            return Err(refused(
                path,
                "a SQLite store must be a file, not a directory".into(),
            ));
        }
        check_parent(path)?;
        if !read_only {
            create_file(path)?;
        }
        check_file(path)?;
        if read_only {
            open_read_only(path)
        } else {
            Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        }
    }
    .map_err(|e| sql_error("open", path, e))?;
    // SQLite takes the timeout as an int of milliseconds (rusqlite panics
    // past it): refused, never wrapped to a shorter one.
    if options.busy_timeout.as_millis() > i32::MAX as u128 {
        return Err(Error::InvalidArgument(format!(
            "busy timeout of {} ms is over SQLite's limit of {} ms",
            options.busy_timeout.as_millis(),
            i32::MAX
        )));
    }
    conn.busy_timeout(options.busy_timeout)
        .map_err(|e| sql_error("set busy_timeout", path, e))?;

    // Connection security: the schema's SQL is never trusted to run
    // functions, and reads never map the file.
    set_pragma(&conn, "trusted_schema", "OFF", path)?;
    let trusted = pragma_int(&conn, "trusted_schema", path)?;
    if trusted != 0 {
        return Err(refused(
            path,
            format!("retained trusted_schema={trusted}, expected 0"),
        ));
    }
    set_pragma(&conn, "mmap_size", "0", path)?;
    if !memory {
        let mmap = pragma_int(&conn, "mmap_size", path)?;
        if mmap != 0 {
            return Err(refused(
                path,
                format!("retained mmap_size={mmap}, expected 0"),
            ));
        }
    }
    set_pragma(&conn, "foreign_keys", "ON", path)?;

    let schema_version = claim(&conn, path, read_only)?;
    if !read_only {
        select_journal_mode(&conn, path, options, memory, started)?;
    }
    let (value, code) = synchronous_pragma(options);
    set_pragma(&conn, "synchronous", value, path)?;
    let synchronous = pragma_int(&conn, "synchronous", path)?;
    if synchronous != code {
        return Err(refused(
            path,
            format!("retained synchronous={synchronous}, expected {value} ({code})"),
        ));
    }
    let store_id: Option<String> = conn
        .query_row(
            "SELECT store_id FROM persistence_state WHERE singleton = 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| sql_error("read store id", path, e))?;
    let store_id = store_id.filter(|id| is_uuid(id)).ok_or_else(|| {
        Error::from(Corruption {
            path: path.to_owned(),
            offset: 0,
            unit: crate::error::Unit::Row,
            seq: None,
            reason: "session database has no valid store identity (persistence_state.store_id \
                     must be a UUID)"
                .into(),
        })
    })?;
    Ok(Opened {
        conn,
        store_id,
        schema_version,
    })
}

/// The `PRAGMA synchronous` value (and the code it reads back as) that
/// gives `options.synchronous` its promise in `options.journal_mode`.
///
/// `Full` is SQLite's `FULL`, except in `delete` journal mode, where it is
/// `EXTRA`: there a commit ends by unlinking the rollback journal, and only
/// `EXTRA` syncs the directory after the unlink. Under `FULL` a power loss
/// soon after an acknowledged commit can bring the synced journal back, and
/// the next open then rolls the commit back as a hot journal
/// (tests/faults/crashlab/sqlite.rs finds exactly that). `truncate` and `persist`
/// sync the emptied journal under `FULL`, and `wal` never deletes it.
pub(super) fn synchronous_pragma(options: &SqliteOptions) -> (&'static str, i64) {
    match (options.synchronous, options.journal_mode) {
        (Synchronous::Full, JournalMode::Delete) => ("EXTRA", 3),
        (Synchronous::Full, _) => ("FULL", 2),
        (Synchronous::Normal, _) => ("NORMAL", 1),
    }
}

/// The ownership transaction of every open: a pristine database gets the
/// schema, a store id and the identity pragmas in one transaction; anything
/// else must already be ours, unchanged. Returns `PRAGMA schema_version`.
///
/// A read-only database is checked alike, in a read transaction, and one
/// that holds no session store is refused: it cannot be made one.
fn claim(conn: &Connection, path: &Path, read_only: bool) -> Result<i64> {
    let behavior = if read_only {
        TransactionBehavior::Deferred
    } else {
        TransactionBehavior::Immediate
    };
    let tx = rusqlite::Transaction::new_unchecked(conn, behavior)
        .map_err(|e| sql_error("begin immediate", path, e))?;
    let on_disk = pragma_int(&tx, "user_version", path)?;
    let application_id = pragma_int(&tx, "application_id", path)?;
    let objects: i64 = tx
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(|e| sql_error("read schema", path, e))?;
    if on_disk == 0 && (application_id != 0 || objects > 0) {
        return Err(refused(
            path,
            "session database has an unversioned schema or application identity (it is not \
             empty, and not a session database)"
                .into(),
        ));
    }
    if on_disk != 0 && on_disk != USER_VERSION {
        return Err(refused(
            path,
            format!(
                "session database has schema version {on_disk}, incompatible with this build \
                 ({USER_VERSION}); there is no migration"
            ),
        ));
    }
    if on_disk != 0 && application_id != APPLICATION_ID {
        return Err(refused(
            path,
            format!(
                "session database has application id {application_id}, expected \
                 {APPLICATION_ID} (0x44534850, \"DSHP\")"
            ),
        ));
    }
    if on_disk == 0 && read_only {
        return Err(refused(
            path,
            "the database is read-only and holds no session store yet".into(),
        ));
    }
    if on_disk == 0 {
        tx.execute_batch(SCHEMA_SQL)
            .map_err(|e| sql_error("create schema", path, e))?;
        tx.execute(
            "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?1)",
            [uuid(4)],
        )
        .map_err(|e| sql_error("write store id", path, e))?;
        tx.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {USER_VERSION};"
        ))
        .map_err(|e| sql_error("write identity", path, e))?;
    }
    check_objects(&tx, path)?;
    let schema_version = pragma_int(&tx, "schema_version", path)?;
    tx.commit().map_err(|e| sql_error("commit", path, e))?;
    Ok(schema_version)
}

/// Re-checks, inside the caller's `BEGIN IMMEDIATE`, that the database is
/// still ours: application id, schema objects (skipped while
/// `PRAGMA schema_version` is the one last checked) and version.
pub(super) fn check_ownership(conn: &Connection, path: &Path, checked: &mut i64) -> Result<()> {
    let application_id = pragma_int(conn, "application_id", path)?;
    if application_id != APPLICATION_ID {
        return Err(refused(
            path,
            format!(
                "session database application id changed before mutation (expected \
                 {APPLICATION_ID}, got {application_id})"
            ),
        ));
    }
    let schema_version = pragma_int(conn, "schema_version", path)?;
    if schema_version != *checked {
        check_objects(conn, path)?;
        *checked = schema_version;
    }
    let version = pragma_int(conn, "user_version", path)?;
    if version != USER_VERSION {
        return Err(refused(
            path,
            format!(
                "session database schema changed before mutation (expected {USER_VERSION}, got \
                 {version})"
            ),
        ));
    }
    Ok(())
}

/// One `sqlite_schema` row, its SQL whitespace-normalized.
pub(super) type SchemaObject = (String, String, String, String);

/// Collapses every run of whitespace to one space and trims.
pub fn normalize_sql(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The user objects of `sqlite_schema` (type, name, table, whitespace-
/// normalized SQL), sorted: what the schema checks compare.
pub(super) fn schema_objects(conn: &Connection) -> rusqlite::Result<Vec<SchemaObject>> {
    let mut stmt = conn.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema \
         WHERE substr(name, 1, 7) <> 'sqlite_' ORDER BY type, name",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            normalize_sql(&r.get::<_, Option<String>>(3)?.unwrap_or_default()),
        ))
    })?;
    rows.collect()
}

fn reference_objects() -> &'static Result<Vec<SchemaObject>, String> {
    static REFERENCE: OnceLock<Result<Vec<SchemaObject>, String>> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let conn = Connection::open_in_memory().map_err(|e| e.to_string())?;
        conn.execute_batch("PRAGMA foreign_keys = ON")
            .and_then(|()| conn.execute_batch(SCHEMA_SQL))
            .map_err(|e| e.to_string())?;
        schema_objects(&conn).map_err(|e| e.to_string())
    })
}

/// The schema objects must equal the reference's exactly: an extra column,
/// a non-STRICT table or an extra object is refused, naming the difference.
fn check_objects(conn: &Connection, path: &Path) -> Result<()> {
    let found = schema_objects(conn).map_err(|e| sql_error("read schema", path, e))?;
    let expected = reference_objects()
        .as_ref()
        .map_err(|e| refused(path, format!("cannot build the reference schema: {e}")))?;
    if &found == expected {
        return Ok(());
    }
    let differs = |a: &[SchemaObject], b: &[SchemaObject]| {
        a.iter()
            .filter(|o| !b.contains(o))
            .map(|o| format!("{} {}: {}", o.0, o.1, o.3))
            .collect::<Vec<_>>()
    };
    let unexpected = differs(&found, expected);
    let missing = differs(expected, &found);
    Err(refused(
        path,
        format!(
            "session database does not contain the required schema objects (unexpected: [{}]; \
             missing: [{}])",
            unexpected.join("; "),
            missing.join("; ")
        ),
    ))
}

fn select_journal_mode(
    conn: &Connection,
    path: &Path,
    options: &SqliteOptions,
    memory: bool,
    started: Instant,
) -> Result<()> {
    let deadline = started + options.busy_timeout;
    let sql = format!("PRAGMA journal_mode = {}", options.journal_mode);
    let selected = loop {
        match conn.query_row(&sql, [], |r| r.get::<_, String>(0)) {
            Ok(mode) => break mode.to_ascii_lowercase(),
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                let left = deadline.saturating_duration_since(Instant::now());
                std::thread::sleep(JOURNAL_RETRY.min(left));
            }
            Err(e) => return Err(sql_error("set journal_mode", path, e)),
        }
    };
    let expected = if memory {
        "memory".to_owned()
    } else {
        options.journal_mode.to_string()
    };
    if selected != expected {
        return Err(refused(
            path,
            format!("selected journal mode {selected}, expected {expected}"),
        ));
    }
    Ok(())
}

/// Whether SQLite reported `SQLITE_BUSY` (or `SQLITE_LOCKED`).
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl JournalMode {
    /// Every mode, in documentation order.
    pub const ALL: [JournalMode; 4] = [
        JournalMode::Wal,
        JournalMode::Delete,
        JournalMode::Truncate,
        JournalMode::Persist,
    ];
}

// ---------------------------------------------------------------------------
// UUIDs
// ---------------------------------------------------------------------------

/// 16 random bytes: from `/dev/urandom`, else from the standard library's
/// randomly seeded hasher (mixed with the time and pid).
fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok()
    {
        return bytes;
    }
    use std::hash::{BuildHasher, Hasher};
    for half in bytes.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(std::process::id());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes
}

/// A random RFC 9562 UUID of `version` (4; 7 or 8 for turnwal's
/// permissive and strict sessions), lowercase.
pub fn uuid(version: u8) -> String {
    let mut b = random_bytes();
    b[6] = (b[6] & 0x0f) | (version << 4);
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Whether `s` is a UUID as upstream checks it: 8-4-4-4-12 hex digits,
/// version 1 to 8, RFC variant.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
        && (b'1'..=b'8').contains(&b[14])
        && matches!(b[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B')
}

/// The incarnation UUID a new session gets: version 8 marks a `Strict`
/// session, version 7 a `Permissive` one; version 4 (what upstream writes)
/// a `Lenient` one.
pub fn incarnation_for(policy: Policy) -> String {
    uuid(match policy {
        Policy::Strict => 8,
        Policy::Permissive => 7,
        Policy::Lenient => 4,
    })
}

/// The policy an incarnation UUID records (see [`incarnation_for`]).
pub fn policy_of(incarnation: &str) -> Policy {
    match incarnation.as_bytes().get(14) {
        Some(b'8') => Policy::Strict,
        Some(b'7') => Policy::Permissive,
        _ => Policy::Lenient,
    }
}
