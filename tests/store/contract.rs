//! The backend contract suite: one set of cases, generic over the backend,
//! run against every backend through a [`Fixture`], plus a differential test
//! that runs one scripted history against two backends and requires identical
//! logical results. A new backend (SQLite, JSONL) joins by implementing
//! `Fixture` and adding one `backend_suite!` line.
//!
//! Upstream cases (reference/upstream-persistence.md §8) and where they live:
//!
//! §8.1 `runPersistenceContract`
//! - 1 round trip: `round_trip` (also every optional header field).
//! - 2 fractional `createdAt`, id not reserved: `header_validation`.
//! - 3 crash with an open step: `crash_with_open_step`.
//! - 4 unstarted tool request: `crash_with_unstarted_tool_request`.
//! - 5 recorded `tool/call`, no result: `crash_after_recorded_tool_call`.
//! - 6 unmaterialized sessions are not listed: `lazy_materialization`.
//! - 7 pre-aborted `AbortSignal`s: NOT MAPPED. The Rust API is synchronous and
//!   takes no cancellation token, so there is nothing to abort.
//! - 8 `readFrom` edges: `read_from_edges`. `-1` and `1.5` cannot be passed
//!   as a `u64`; the representable invalid input is a seq above 2^53 - 1.
//! - 9 revisions: `revisions` (also across repair and from a fresh store).
//! - 10 re-sent first turn: `resent_seq_is_rejected`.
//! - 11 gap inside a batch: `gap_inside_batch`.
//! - 12 non-JSON data: `non_json_data` for the values JSON text can carry
//!   (`NaN`, `Infinity`, trailing garbage, `undefined`). `1n`, functions,
//!   Symbols, `Map`s and cyclic objects are JavaScript values with no JSON
//!   text form; the Rust API takes JSON text, so they cannot be expressed.
//!
//! §8.2 `runCoordinatorContract`
//! - 1, 5, 6, 38 (header fields survive): `round_trip`.
//! - 2 load while the live turn is open: `load_while_live_turn_open`.
//! - 4, 21, 32 (unmaterialized: not found, id freed, `append([])`):
//!   `lazy_materialization`.
//! - 11 (only the ignorable unknown type `plugin/test` with null data):
//!   `unknown_types`.
//! - 13 fork seed persisted once: `fork_boundary`.
//! - 14, 31 resume across instances: `resume_in_fresh_store`.
//! - 20 id collision at first append: `create_collision_across_stores`.
//! - 22, 34 duplicate create: `duplicate_create`.
//! - 33 missing ids: `missing_sessions`.
//! - 35, 36 foreign format versions: `foreign_format_version`.
//! - 37 unknown type with and without `ignorable`: `unknown_types`.
//! - 40 torn tail: `torn_tail` (backends that cannot tear skip it, as the
//!   upstream memory fixture does).
//! - NOT MAPPED: 3 (a queued async load racing a live session: the API is
//!   synchronous and serializes each id behind one lock); 7, 8, 12 (frozen
//!   events and append snapshots: `&[Event]` and owned return values make
//!   them hold by construction); 9, 10 and the rest of 11 (legacy read
//!   migrations and surface-message body validation: turnwal stores payloads
//!   as lossless opaque JSON and checks only the turn contract's fields);
//!   15-19, 23-30, 39 (hot reload and adoption of a live in-process
//!   `Session`: this API has no live session object to adopt).

use crate::support;

#[cfg(unix)]
use support::pg;

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use support::log::Log;
use tempfile::TempDir;
use turnwal::backend::Backend;
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::memory::MemoryBackend;
use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions};
use turnwal::backend::wal::{WalBackend, encode_file_name};
use turnwal::{
    CutReason, Error, Event, HeaderError, LogState, Policy, Receipt, RepairBasis, Result, Rule,
    SessionHeader, SessionSummary, SessionView, Store, StoreOptions, Tracker, Violation,
};

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// One backend under test. Every `store` call returns a fresh `Store` over
/// the same storage: to the storage, a restarted process.
trait Fixture {
    fn name() -> &'static str;
    fn new() -> Self;
    fn store(&self, options: StoreOptions) -> Store;

    fn open(&self) -> Store {
        self.store(StoreOptions::default())
    }

    /// The stored form of a session, to prove that reads write nothing.
    fn image(&self, id: &str) -> Option<Vec<u8>>;

    /// Every storage artifact the backend holds for `id` (files, entries),
    /// to prove that lazy creates and deletes leave nothing behind.
    fn artifacts(&self, id: &str) -> Vec<String>;

    /// The path an `Error::Locked` for `id` names.
    fn lock_path(&self, id: &str) -> PathBuf;

    /// Whether `Error::Locked` names the holder's pid: a JSONL writer's
    /// lock is an OFD lock on the transcript, which records no pid.
    fn names_holder() -> bool {
        true
    }

    /// Whether a session's policy is stored with it: a JSONL root records
    /// none, and a store appends under its own (`StoreOptions::policy`).
    fn keeps_policy() -> bool {
        true
    }

    /// Whether a second writer takes the session over (its first append or
    /// repair bumps the session's writer epoch, and the first writer's next
    /// append is refused as `Superseded`) instead of being refused as
    /// `Locked`: the PostgreSQL store, whose writers on many hosts hold
    /// leases instead (`Leased`, and taken over when a lease runs out or
    /// is stolen; docs/POSTGRES.md).
    fn takes_over() -> bool {
        false
    }

    /// Leaves a torn record at the end of the session's log, as a crash in
    /// the middle of a write would. `false` for a backend that cannot tear.
    fn tear_tail(&self, id: &str) -> bool;

    /// The header a read returns for a session created with `header`: the
    /// JSONL format stores `delegationDepth` always (0 for a top-level
    /// session), so its reads return it, as upstream's do.
    fn stored_header(header: SessionHeader) -> SessionHeader {
        header
    }
}

/// The reference backend. Every store shares one `MemoryBackend` through its
/// clones.
struct MemoryFixture {
    backend: MemoryBackend,
}

impl Fixture for MemoryFixture {
    fn name() -> &'static str {
        "memory"
    }

    fn new() -> Self {
        MemoryFixture {
            backend: MemoryBackend::new(),
        }
    }

    fn store(&self, options: StoreOptions) -> Store {
        Store::with_backend(Arc::new(self.backend.clone()), options)
    }

    fn image(&self, id: &str) -> Option<Vec<u8>> {
        // Its stored form is the event list itself.
        let events = self.backend.read_from(id, 0).unwrap()?;
        Some(
            events
                .iter()
                .flat_map(|e| format!("{}\n", e.to_json()).into_bytes())
                .collect(),
        )
    }

    fn artifacts(&self, id: &str) -> Vec<String> {
        if self.backend.exists(id).unwrap() {
            vec![format!("memory:{id}")]
        } else {
            Vec::new()
        }
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        PathBuf::from(format!("memory:{id}"))
    }

    fn tear_tail(&self, _id: &str) -> bool {
        false
    }
}

/// The native WAL in a temporary directory.
struct WalFixture {
    dir: TempDir,
}

impl WalFixture {
    fn log_path(&self, id: &str) -> PathBuf {
        WalBackend::open(self.dir.path()).unwrap().log_path(id)
    }
}

impl Fixture for WalFixture {
    fn name() -> &'static str {
        "wal"
    }

    fn new() -> Self {
        WalFixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self, options: StoreOptions) -> Store {
        Store::open_with_options(self.dir.path(), options).unwrap()
    }

    fn image(&self, id: &str) -> Option<Vec<u8>> {
        fs::read(self.log_path(id)).ok()
    }

    fn artifacts(&self, id: &str) -> Vec<String> {
        let name = encode_file_name(id);
        let Ok(entries) = fs::read_dir(self.dir.path().join("sessions")) else {
            return Vec::new();
        };
        // The log, its lock file, and hidden temp files of a materialization.
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| {
                n.trim_start_matches('.')
                    .strip_prefix(&name)
                    .is_some_and(|rest| rest.starts_with('.'))
            })
            .collect();
        names.sort();
        names
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.log_path(id).with_extension("lock")
    }

    fn tear_tail(&self, id: &str) -> bool {
        // Half of a copy of the last record: its header promises more bytes
        // than the file holds, which is what an interrupted write leaves.
        let path = self.log_path(id);
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        let last_len = u32::from_le_bytes(bytes[n - 4..].try_into().unwrap()) as usize;
        let half = bytes[n - last_len..n - last_len / 2].to_vec();
        bytes.extend_from_slice(&half);
        fs::write(&path, bytes).unwrap();
        true
    }
}

/// The SQLite backend: one database file in a temporary directory.
struct SqliteFixture {
    dir: TempDir,
}

impl SqliteFixture {
    fn db(&self) -> PathBuf {
        self.dir.path().join("sessions.db")
    }

    fn backend(&self) -> SqliteBackend {
        SqliteBackend::open(self.db(), SqliteOptions::default()).unwrap()
    }

    fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.db()).unwrap()
    }

    /// Every column of the session's `sessions` row and `events` rows (with
    /// their rowids), as text.
    fn rows(&self, id: &str) -> Vec<String> {
        let conn = self.conn();
        let dump = |sql: &str| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            stmt.query_map([id], |r| {
                (0..n)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(|cols| cols.join("|"))
            })
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
        };
        let mut rows = dump("SELECT * FROM sessions WHERE id = ?1");
        if rows.is_empty() {
            return rows;
        }
        rows.extend(dump(
            "SELECT rowid, * FROM events WHERE session_id = ?1 ORDER BY seq",
        ));
        rows
    }
}

impl Fixture for SqliteFixture {
    fn name() -> &'static str {
        "sqlite"
    }

    fn new() -> Self {
        SqliteFixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self, options: StoreOptions) -> Store {
        Store::open_sqlite(self.db(), SqliteOptions::default(), options).unwrap()
    }

    fn image(&self, id: &str) -> Option<Vec<u8>> {
        let rows = self.rows(id);
        (!rows.is_empty()).then(|| rows.join("\n").into_bytes())
    }

    fn artifacts(&self, id: &str) -> Vec<String> {
        // The session's rows, and anything beside the database but SQLite's
        // own files (a writer's lock is a byte of the database: it creates
        // nothing).
        let mut found = Vec::new();
        let conn = self.conn();
        let count = |sql: &str| -> i64 { conn.query_row(sql, [id], |r| r.get(0)).unwrap() };
        if count("SELECT count(*) FROM sessions WHERE id = ?1") > 0 {
            found.push(format!("sessions row {id}"));
        }
        let events = count("SELECT count(*) FROM events WHERE session_id = ?1");
        if events > 0 {
            found.push(format!("{events} events rows of {id}"));
        }
        let sqlites = [
            "sessions.db",
            "sessions.db-wal",
            "sessions.db-shm",
            "sessions.db-journal",
        ];
        for entry in fs::read_dir(self.dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if !sqlites
                .iter()
                .any(|name| path.file_name() == Some(name.as_ref()))
            {
                found.push(path.display().to_string());
            }
        }
        found
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.backend().lock_path(id)
    }

    fn tear_tail(&self, id: &str) -> bool {
        // The row a cut write would leave: the next seq, its JSON text
        // ending mid-value (SQLite itself never commits half a row; a
        // foreign or damaged writer can).
        let conn = self.conn();
        let next: i64 = conn
            .query_row(
                "SELECT max(seq) + 1 FROM events WHERE session_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        conn.execute(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES (?1, ?2, 'assistant/chunk', ?2, ?3)",
            rusqlite::params![id, next, r#"{"turn":2,"step":1,"chunk":{"type":"text-de"#],
        )
        .unwrap();
        true
    }
}

/// The PostgreSQL store: a database of its own in the cluster every test
/// of this binary shares (started with Debian's server: Unix only).
#[cfg(unix)]
struct PostgresFixture {
    url: String,
}

#[cfg(unix)]
impl PostgresFixture {
    fn client(&self) -> ::postgres::Client {
        ::postgres::Client::connect(&self.url, ::postgres::NoTls).unwrap()
    }

    /// The session's row (without the writer's epoch, holder and heartbeat:
    /// who holds the session is not its log) and its event rows, as text.
    fn rows(&self, id: &str) -> Vec<String> {
        let mut client = self.client();
        let mut out: Vec<String> = client
            .query(
                "SELECT concat_ws('|', session_id, header, policy, incarnation, next_seq, revision) \
                 FROM turnwal_sessions WHERE session_id = $1",
                &[&id],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if out.is_empty() {
            return out;
        }
        out.extend(
            client
                .query(
                    "SELECT concat_ws('|', seq, members, type, time, data, \
                     encode(source_event_seqs, 'hex'), surface_op, ignorable) \
                     FROM turnwal_events WHERE session_id = $1 ORDER BY seq",
                    &[&id],
                )
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0)),
        );
        out
    }
}

#[cfg(unix)]
impl Fixture for PostgresFixture {
    fn name() -> &'static str {
        "postgres"
    }

    fn new() -> Self {
        let cluster = pg::shared();
        let db = cluster.fresh_database();
        PostgresFixture { url: db }
    }

    fn store(&self, options: StoreOptions) -> Store {
        Store::open_postgres(&self.url, options).unwrap()
    }

    fn image(&self, id: &str) -> Option<Vec<u8>> {
        let rows = self.rows(id);
        (!rows.is_empty()).then(|| rows.join("\n").into_bytes())
    }

    fn artifacts(&self, id: &str) -> Vec<String> {
        let mut client = self.client();
        let mut found = Vec::new();
        for (table, what) in [
            ("turnwal_sessions", "sessions row"),
            ("turnwal_events", "events rows"),
        ] {
            let n: i64 = client
                .query_one(
                    &format!("SELECT count(*) FROM {table} WHERE session_id = $1"),
                    &[&id],
                )
                .unwrap()
                .get(0);
            if n > 0 {
                found.push(format!("{n} {what} of {id}"));
            }
        }
        found
    }

    fn lock_path(&self, _id: &str) -> PathBuf {
        unreachable!("a PostgreSQL store takes sessions over: it never answers Locked")
    }

    fn takes_over() -> bool {
        true
    }

    fn tear_tail(&self, id: &str) -> bool {
        // The row a damaged writer could leave (turnwal's transactions never
        // commit half a batch): the next seq, its JSON text ending mid-value.
        let mut client = self.client();
        client
            .execute(
                "INSERT INTO turnwal_events (session_id, seq, members, type, time, data) \
                 SELECT $1, max(seq) + 1, 1, 'assistant/chunk', max(seq) + 1, $2 \
                 FROM turnwal_events WHERE session_id = $1",
                &[&id, &r#"{"turn":2,"step":1,"chunk":{"type":"text-de"#],
            )
            .unwrap();
        true
    }
}

/// The JSONL backend in a temporary root, raw (`session.jsonl`) or zstd.
struct JsonlFixtureOf<const ZSTD: bool> {
    dir: TempDir,
    /// The durability proofs' state directory, outside the root.
    state: TempDir,
}

type JsonlFixture = JsonlFixtureOf<false>;
type JsonlZstdFixture = JsonlFixtureOf<true>;

impl<const ZSTD: bool> JsonlFixtureOf<ZSTD> {
    fn compression() -> Compression {
        if ZSTD {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    fn backend(&self) -> JsonlBackend {
        JsonlBackend::open(self.dir.path(), Self::compression())
            .unwrap()
            .with_state_dir(self.state.path())
            .unwrap()
    }

    fn log_path(&self, id: &str) -> Option<PathBuf> {
        self.backend().find_log(id).unwrap()
    }
}

impl<const ZSTD: bool> Fixture for JsonlFixtureOf<ZSTD> {
    fn name() -> &'static str {
        if ZSTD { "jsonl-zstd" } else { "jsonl" }
    }

    fn new() -> Self {
        JsonlFixtureOf {
            dir: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn names_holder() -> bool {
        false
    }

    fn keeps_policy() -> bool {
        false
    }

    fn store(&self, options: StoreOptions) -> Store {
        Store::with_backend(Arc::new(self.backend()), options)
    }

    fn image(&self, id: &str) -> Option<Vec<u8>> {
        fs::read(self.log_path(id)?).ok()
    }

    fn artifacts(&self, id: &str) -> Vec<String> {
        // Everything in any session directory named for the id.
        let segment = turnwal::backend::jsonl::layout::encode_segment(id).unwrap();
        let mut found = Vec::new();
        for project in fs::read_dir(self.dir.path()).into_iter().flatten() {
            let dir = project.unwrap().path().join(&segment);
            for entry in fs::read_dir(&dir).into_iter().flatten() {
                found.push(entry.unwrap().path().display().to_string());
            }
            if dir.exists() && found.is_empty() {
                found.push(dir.display().to_string());
            }
        }
        found.sort();
        found
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.backend().lock_path(id).unwrap().unwrap()
    }

    fn tear_tail(&self, id: &str) -> bool {
        // Upstream's fixtures: a raw log gets a cut line, a zstd log a cut
        // frame of a line no decoder can finish (nothing is recovered).
        let path = self.log_path(id).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        if ZSTD {
            let noise: String = (0..3000u32)
                .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
                .collect();
            let frame = turnwal::backend::jsonl::zstd::compress_frame(
                format!("{{\"type\":\"assistant/chunk\",\"seq\":8,\"noise\":\"{noise}\"}}\n")
                    .as_bytes(),
            );
            bytes.extend_from_slice(&frame[..frame.len() / 2]);
        } else {
            bytes.extend_from_slice(br#"{"type":"assistant/chunk","seq":8,"ti"#);
        }
        fs::write(&path, bytes).unwrap();
        true
    }

    fn stored_header(mut header: SessionHeader) -> SessionHeader {
        header.delegation_depth.get_or_insert(0);
        header
    }
}

// ---------------------------------------------------------------------------
// Building realistic logs
// ---------------------------------------------------------------------------

fn meta(id: &str, cwd: Option<&str>) -> SessionHeader {
    let header = SessionHeader::new(id, 1000);
    match cwd {
        Some(cwd) => header.with_cwd(cwd),
        None => header,
    }
}

/// The upstream fixture `oneTurnLog()`: seqs 0-5 at times 1-6.
fn one_turn_log() -> Vec<Event> {
    let mut log = Log::new();
    log.simple_turn("one-turn-user", "hi", "hello");
    log.batch()
}

fn types(events: &[Event]) -> Vec<&str> {
    events.iter().map(Event::event_type).collect()
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(Event::seq).collect()
}

use support::jsons;

/// A listing row without `bytes`, which is each backend's own measure:
/// `(id, header, events, turns, last_activity, state)`.
type SummaryKey = (
    String,
    Option<SessionHeader>,
    u64,
    u64,
    Option<i64>,
    LogState,
);

fn summary_key(s: &SessionSummary) -> SummaryKey {
    assert_eq!(s.problem, None, "{s:?}");
    (
        s.id.clone(),
        s.header.clone(),
        s.events,
        s.turns,
        s.last_activity,
        s.state,
    )
}

fn listing(store: &Store) -> Vec<SummaryKey> {
    let mut keys: Vec<_> = store.list().unwrap().iter().map(summary_key).collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys
}

fn ids(store: &Store) -> Vec<String> {
    listing(store).into_iter().map(|k| k.0).collect()
}

fn revision(store: &Store, id: &str) -> String {
    store
        .revision(id)
        .unwrap()
        .expect("session is materialized")
}

#[track_caller]
fn assert_not_found<T: std::fmt::Debug>(result: Result<T>, id: &str) {
    match result {
        Err(Error::NotFound { id: got }) => assert_eq!(got, id),
        other => panic!("expected NotFound for {id:?}, got {other:?}"),
    }
}

#[track_caller]
fn violation<T: std::fmt::Debug>(result: Result<T>) -> Violation {
    match result {
        Err(Error::Contract(v)) => v,
        other => panic!("expected a contract violation, got {other:?}"),
    }
}

#[track_caller]
fn unsupported_detail<T: std::fmt::Debug>(result: Result<T>) -> String {
    match result {
        Err(Error::Unsupported { detail, .. }) => detail,
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

const NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

fn round_trip<F: Fixture>() {
    let fx = F::new();
    let id = "round-trip";
    let header = SessionHeader {
        version: 0,
        id: id.into(),
        created_at: 1000,
        cwd: Some("/work/app".into()),
        parent_session: Some("parent-session".into()),
        seed_length: Some(6),
        origin: Some("subagent".into()),
        delegation_depth: Some(2),
        agent_preset: Some("coder".into()),
    };
    // A seed inherited from the parent, its end marker, then live turns
    // written in several batches (one of them ending mid-turn).
    let mut log = Log::new();
    log.simple_turn("seed-user", "inherited", "inherited answer");
    log.push("session/end-seed", "{}");
    let seed = log.batch();
    log.tool_turn("call-1");
    let turn2 = log.batch();
    let (turn2_head, turn2_rest) = turn2.split_at(7);
    log.simple_turn("u3", "and then?", "done");
    let turn3 = log.batch();

    let store = fx.open();
    store.create(header.clone()).unwrap();
    let r = store.append(id, &seed).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 7,
            durable: 7
        }
    );
    assert_eq!(store.append(id, turn2_head).unwrap().next_seq, 14);
    let r = store.append(id, turn2_rest).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 21,
            durable: 21
        }
    );
    let r = store.append(id, &turn3).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 27,
            durable: 27
        }
    );
    drop(store);

    let store = fx.open();
    let view = store.load(id).unwrap();
    assert_eq!(view.header, F::stored_header(header.clone()));
    assert_eq!(view.events, log.all());
    assert_eq!(jsons(&view.events), jsons(log.all()));
    assert_eq!(seqs(&view.events), (0..27).collect::<Vec<_>>());
    assert_eq!(
        (view.stored, view.state, view.cut, view.live),
        (27, LogState::Clean, None, false)
    );
    // Surface metadata survives as written.
    assert_eq!(
        view.events[14].to_json(),
        r#"{"type":"tool/result","seq":14,"time":15,"data":{"turn":2,"step":1,"message":{"id":"result-call-1","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":false,"content":[{"type":"text","text":"hello from a.txt"}]}]}},"sourceEventSeqs":[13],"surfaceOp":"append"}"#
    );
    assert_eq!(
        listing(&store),
        [(
            id.into(),
            Some(F::stored_header(header.clone())),
            27,
            3,
            Some(27),
            LogState::Clean
        )]
    );
    let other = fx.open();
    let view = other.inspect(id).unwrap();
    assert_eq!(
        (view.header, view.events),
        (F::stored_header(header), log.all().to_vec())
    );
}

fn header_validation<F: Fixture>() {
    let fx = F::new();
    let err = SessionHeader::from_json(r#"{"version":0,"id":"h","createdAt":1.5}"#).unwrap_err();
    assert_eq!(
        err.0,
        "session metadata createdAt must be a non-negative safe integer"
    );

    let store = fx.open();
    let rejected = [
        (
            // The struct cannot hold 1.5; 2^53 breaks the same rule.
            SessionHeader::new("h", 1 << 53),
            "session metadata createdAt must be a non-negative safe integer",
        ),
        (
            meta("h", Some("relative/dir")),
            r#"session metadata cwd must be an absolute path, got "relative/dir""#,
        ),
        (
            SessionHeader {
                origin: Some("worker".into()),
                ..meta("h", None)
            },
            r#"session metadata origin must be "subagent", got "worker""#,
        ),
        (
            SessionHeader {
                version: 99,
                ..meta("h", None)
            },
            "session metadata version must be 0, got 99",
        ),
        (
            meta("", Some("/w")),
            "session metadata id must be a non-empty string",
        ),
    ];
    for (header, message) in rejected {
        match store.create(header) {
            Err(e @ Error::Header(_)) => {
                assert!(
                    matches!(&e, Error::Header(HeaderError(m)) if m == message),
                    "{e:?}"
                );
                assert_eq!(e.to_string(), format!("invalid session header: {message}"));
            }
            other => panic!("expected a header error, got {other:?}"),
        }
    }
    // A failed create reserves nothing.
    assert!(ids(&store).is_empty());
    assert!(fx.artifacts("h").is_empty());
    assert_not_found(store.inspect("h"), "h");
    store.create(meta("h", Some("/w"))).unwrap();
    store.append("h", &one_turn_log()).unwrap();
    drop(store);
    let view = fx.open().load("h").unwrap();
    assert_eq!(view.header, F::stored_header(meta("h", Some("/w"))));
    assert_eq!(view.events, one_turn_log());
}

/// Appends turn 1 and then the start of turn 2 (`extend` adds to it), and
/// drops the store with turn 2 open: a crash.
fn crash_in_turn_two<F: Fixture>(fx: &F, id: &str, extend: impl FnOnce(&mut Log)) -> Vec<Event> {
    let store = fx.open();
    store.create(meta(id, Some("/work"))).unwrap();
    store.append(id, &one_turn_log()).unwrap();
    let mut log = Log::after(&one_turn_log());
    log.turn_start().step_start();
    extend(&mut log);
    store.append(id, &log.batch()).unwrap();
    log.all().to_vec()
}

fn crash_with_open_step<F: Fixture>() {
    let fx = F::new();
    let id = "crash-open-step";
    let written = crash_in_turn_two(&fx, id, |_| {});
    assert_eq!(written.len(), 8);

    let store = fx.open();
    let rev = revision(&store, id);
    let image = fx.image(id);
    let view = store.inspect(id).unwrap();
    assert_eq!(
        types(&view.events),
        [
            "turn/start",
            "user/message",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
            "turn/start",
            "step/start",
            "step/end",
            "turn/end"
        ]
    );
    assert_eq!(&view.events[..8], written);
    assert_eq!(
        (view.stored, view.state, view.cut.clone(), view.live),
        (8, LogState::OpenTurn, None, false)
    );
    // inspect wrote nothing.
    assert_eq!(revision(&store, id), rev);
    assert_eq!(fx.image(id), image);

    let loaded = store.load(id).unwrap();
    assert_eq!(seqs(&loaded.events), (0..10).collect::<Vec<_>>());
    assert_eq!(&loaded.events[..8], written);
    assert_eq!(
        loaded.events[8].to_json(),
        r#"{"type":"step/end","seq":8,"time":8,"data":{"turn":2,"step":1}}"#
    );
    assert_eq!(
        loaded.events[9].to_json(),
        r#"{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#
    );
    // What inspect previewed is what load committed.
    assert_eq!(loaded.events, view.events);
    assert_eq!(
        (loaded.stored, loaded.state, loaded.live),
        (10, LogState::OpenTurn, false)
    );
    assert_ne!(revision(&store, id), rev);
    assert_ne!(fx.image(id), image);

    let mut log = Log::after(&loaded.events);
    log.turn_start().turn_end();
    let r = store.append(id, &log.batch()).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 12,
            durable: 12
        }
    );
    drop(store);
    let store = fx.open();
    let reloaded = store.load(id).unwrap();
    assert_eq!(seqs(&reloaded.events), (0..12).collect::<Vec<_>>());
    assert_eq!(reloaded.events, log.all());
    assert_eq!(reloaded.state, LogState::Clean);
}

fn crash_with_unstarted_tool_request<F: Fixture>() {
    let fx = F::new();
    let id = "crash-unstarted";
    let written = crash_in_turn_two(&fx, id, |log| {
        log.assistant("", &[("call-x", "run", r#"{"cmd":"ls"}"#)]);
    });
    assert_eq!(written.len(), 9);
    let store = fx.open();
    let preview = store.inspect(id).unwrap();
    let view = store.load(id).unwrap();
    assert_eq!(view.events, preview.events);
    assert_eq!(&view.events[..9], written);
    assert_eq!(
        types(&view.events[8..]),
        ["assistant/message", "tool/result", "step/end", "turn/end"]
    );
    let result = &view.events[9];
    assert_eq!(
        result.to_json(),
        format!(
            r#"{{"type":"tool/result","seq":9,"time":9,"data":{{"turn":2,"step":1,"message":{{"id":"interrupted-tool-result-call-x-9","role":"user","source":{{"kind":"tool","callId":"call-x"}},"content":[{{"type":"tool-result","toolCallId":"call-x","isError":true,"content":[{{"type":"text","text":"{NOT_STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        )
    );
    assert_eq!(result.source_event_seqs(), None);
    assert_eq!(
        jsons(&view.events[10..]),
        [
            r#"{"type":"step/end","seq":10,"time":9,"data":{"turn":2,"step":1}}"#,
            r#"{"type":"turn/end","seq":11,"time":9,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#
        ]
    );
    drop(store);
    // The closers are stored as shown, and the log continues after them.
    let store = fx.open();
    assert_eq!(store.inspect(id).unwrap().events, view.events);
    let mut log = Log::after(&view.events);
    log.simple_turn("u3", "again", "ok");
    assert_eq!(store.append(id, &log.batch()).unwrap().next_seq, 18);
}

fn crash_after_recorded_tool_call<F: Fixture>() {
    let fx = F::new();
    let id = "crash-risk";
    let mut call_seq = 0;
    crash_in_turn_two(&fx, id, |log| {
        log.assistant("deleting", &[("call-risk", "rm", r#"{"path":"/tmp/x"}"#)]);
        call_seq = log.tool_call("call-risk", "rm", r#"{"path":"/tmp/x"}"#);
    });
    assert_eq!(call_seq, 9);
    let store = fx.open();
    let view = store.load(id).unwrap();
    assert_eq!(
        types(&view.events[8..]),
        [
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end"
        ]
    );
    let json = view.events[10].to_json();
    assert_eq!(
        json,
        format!(
            r#"{{"type":"tool/result","seq":10,"time":10,"data":{{"turn":2,"step":1,"message":{{"id":"interrupted-tool-result-call-risk-10","role":"user","source":{{"kind":"tool","callId":"call-risk"}},"content":[{{"type":"tool-result","toolCallId":"call-risk","isError":true,"content":[{{"type":"text","text":"{OUTCOME_UNKNOWN_TEXT}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[9]}}"#
        )
    );
    assert!(json.contains("Its outcome is unknown."));
    assert!(json.contains("Do not retry blindly."));
    assert!(json.find("\"surfaceOp\"").unwrap() < json.find("\"sourceEventSeqs\"").unwrap());
    assert_eq!(view.events[10].source_event_seqs().unwrap().get(), "[9]");
    drop(store);
    // The key order is stored, not recomputed.
    let store = fx.open();
    assert_eq!(store.read_from(id, 10).unwrap()[0].to_json(), json);
    let mut log = Log::after(&view.events);
    log.simple_turn("u3", "did it work?", "unknown");
    store.append(id, &log.batch()).unwrap();
    assert_eq!(store.load(id).unwrap().events, log.all());
}

fn lazy_materialization<F: Fixture>() {
    let fx = F::new();
    let id = "lazy";
    let store = fx.open();
    store.create(meta(id, Some("/w"))).unwrap();
    let untouched = |store: &Store| {
        assert!(ids(store).is_empty());
        assert!(fx.artifacts(id).is_empty(), "{:?}", fx.artifacts(id));
        assert_eq!(store.revision(id).unwrap(), None);
    };
    untouched(&store);
    assert_not_found(store.inspect(id), id);
    assert_not_found(store.load(id), id);
    assert_not_found(store.read_from(id, 0), id);
    let r = store.append(id, &[]).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 0,
            durable: 0
        }
    );
    untouched(&store);

    // Another process sees nothing, and an abandoned lazy create frees the id.
    drop(store);
    let store = fx.open();
    untouched(&store);
    assert_not_found(store.inspect(id), id);
    store.create(meta(id, Some("/w"))).unwrap();
    let mut log = Log::new();
    log.turn_start().user("u1", "hello").turn_end();
    let r = store.append(id, &log.batch()).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 3,
            durable: 3
        }
    );
    assert_eq!(
        listing(&store),
        [(
            id.into(),
            Some(F::stored_header(meta(id, Some("/w")))),
            3,
            1,
            Some(3),
            LogState::Clean
        )]
    );
    assert!(!fx.artifacts(id).is_empty());
    assert_eq!(
        store.append(id, &[]).unwrap(),
        Receipt {
            next_seq: 3,
            durable: 3
        }
    );
    assert_eq!(fx.open().read_from(id, 0).unwrap(), log.all());
}

fn list_summaries<F: Fixture>() {
    let fx = F::new();
    let store = fx.open();
    store.create(meta("a", Some("/a"))).unwrap();
    store.append("a", &one_turn_log()).unwrap();

    store.create(meta("b", None)).unwrap();
    let mut b = Log::new();
    b.simple_turn("u1", "hi", "hello").tool_turn("call-b");
    store.append("b", &b.batch()).unwrap();

    store.create(meta("c", Some("/c"))).unwrap();
    let mut c = Log::new();
    c.simple_turn("u1", "hi", "hello").turn_start().step_start();
    store.append("c", &c.batch()).unwrap();

    let expected = vec![
        (
            "a".to_owned(),
            Some(F::stored_header(meta("a", Some("/a")))),
            6,
            1,
            Some(6),
            LogState::Clean,
        ),
        (
            "b".to_owned(),
            Some(F::stored_header(meta("b", None))),
            20,
            2,
            Some(20),
            LogState::Clean,
        ),
        (
            "c".to_owned(),
            Some(F::stored_header(meta("c", Some("/c")))),
            8,
            2,
            Some(8),
            LogState::OpenTurn,
        ),
    ];
    assert_eq!(listing(&store), expected);
    drop(store);
    let store = fx.open();
    assert_eq!(listing(&store), expected);
    store.load("c").unwrap();
    assert_eq!(
        listing(&store)[2],
        (
            "c".to_owned(),
            Some(F::stored_header(meta("c", Some("/c")))),
            10,
            2,
            Some(8),
            LogState::Clean
        )
    );
}

fn read_from_edges<F: Fixture>() {
    let fx = F::new();
    let id = "read-from";
    let writer = fx.open();
    writer.create(meta(id, Some("/w"))).unwrap();
    let mut log = Log::after(&one_turn_log());
    writer.append(id, &one_turn_log()).unwrap();
    log.turn_start().step_start().chunk("partial");
    writer.append(id, &log.batch()).unwrap();
    let all = log.all().to_vec();
    assert_eq!(all.len(), 9);

    // The live writer's store and a cold reader give the same answers.
    let reader = fx.open();
    let rev = revision(&reader, id);
    let image = fx.image(id);
    for store in [&writer, &reader] {
        assert_eq!(store.read_from(id, 0).unwrap(), all);
        assert_eq!(store.read_from(id, 3).unwrap(), all[3..]);
        // An open turn is served as stored: no closers.
        assert_eq!(store.read_from(id, 8).unwrap(), all[8..]);
        assert_eq!(store.read_from(id, 9).unwrap(), []);
        assert_eq!(store.read_from(id, 109).unwrap(), []);
        assert_eq!(store.read_from(id, (1 << 53) - 1).unwrap(), []);
        // The last events, read from the end.
        assert_eq!(store.read_last(id, 0).unwrap(), []);
        assert_eq!(store.read_last(id, 1).unwrap(), all[8..]);
        assert_eq!(store.read_last(id, 6).unwrap(), all[3..]);
        assert_eq!(store.read_last(id, 9).unwrap(), all);
        assert_eq!(store.read_last(id, 1000).unwrap(), all);
        assert_not_found(store.read_last("absent", 2), "absent");
        // The inspect view from a seq on: the open turn is live in the
        // writer's store (no closers) and crashed for the cold reader.
        let view = store.inspect(id).unwrap().events;
        for from in [0, 3, 8, 9, 12] {
            let tail: Vec<Event> = view.iter().filter(|e| e.seq() >= from).cloned().collect();
            assert_eq!(
                store.inspect_from(id, from).unwrap(),
                tail,
                "inspect_from {from}"
            );
        }
        assert_not_found(store.inspect_from("absent", 0), "absent");
        // The first events, read from the start.
        assert_eq!(store.read_first(id, 0).unwrap(), []);
        assert_eq!(store.read_first(id, 3).unwrap(), all[..3]);
        assert_eq!(store.read_first(id, 1000).unwrap(), all);
        assert_not_found(store.read_first("absent", 2), "absent");
        let summary = store.summary(id).unwrap();
        let listed = store
            .list()
            .unwrap()
            .into_iter()
            .find(|s| s.id == id)
            .unwrap();
        assert_eq!(
            (summary.header, summary.events, summary.turns, summary.state),
            (listed.header, listed.events, listed.turns, listed.state)
        );
        assert_eq!((summary.events, summary.bytes), (9, listed.bytes));
        assert_not_found(store.summary("absent"), "absent");
        for bad in [1 << 53, u64::MAX] {
            match store.read_from(id, bad) {
                Err(e @ Error::InvalidArgument(_)) => assert_eq!(
                    e.to_string(),
                    format!(
                        "invalid argument: from_seq must be a non-negative safe integer (at most 2^53 - 1), got {bad}"
                    )
                ),
                other => panic!("expected InvalidArgument, got {other:?}"),
            }
        }
        assert_not_found(store.read_from("absent", 0), "absent");
    }
    // Reads repair nothing.
    assert_eq!(revision(&reader, id), rev);
    assert_eq!(fx.image(id), image);
    assert_eq!(reader.inspect(id).unwrap().stored, 9);
}

fn revisions<F: Fixture>() {
    let fx = F::new();
    let id = "rev";
    let reads = |store: &Store, expected: &str| {
        for _ in 0..2 {
            assert_eq!(revision(store, id), expected);
            store.inspect(id).unwrap();
            store.read_from(id, 0).unwrap();
            store.read_from(id, 3).unwrap();
            store.list().unwrap();
            store.verify(id).unwrap();
            assert_eq!(revision(store, id), expected);
        }
    };
    let store = fx.open();
    store.create(meta(id, Some("/w"))).unwrap();
    store.append(id, &one_turn_log()).unwrap();
    let r1 = revision(&store, id);
    reads(&store, &r1);
    drop(store);

    let store = fx.open();
    reads(&store, &r1);
    // A load with nothing to repair is a read.
    store.load(id).unwrap();
    reads(&store, &r1);
    assert_eq!(store.verify(id).unwrap().state, LogState::Clean);
    let mut log = Log::after(&one_turn_log());
    log.turn_start().step_start();
    store.append(id, &log.batch()).unwrap();
    let r2 = revision(&store, id);
    assert_ne!(r2, r1);
    reads(&store, &r2);
    drop(store);

    let store = fx.open();
    reads(&store, &r2);
    assert_eq!(store.verify(id).unwrap().state, LogState::OpenTurn);
    store.load(id).unwrap(); // commits the repair
    let r3 = revision(&store, id);
    assert_ne!(r3, r2);
    assert_ne!(r3, r1);
    reads(&store, &r3);
    assert_eq!(store.verify(id).unwrap().state, LogState::Clean);
}

fn resent_seq_is_rejected<F: Fixture>() {
    let fx = F::new();
    let id = "resend";
    let store = fx.open();
    store.create(meta(id, None)).unwrap();
    store.append(id, &one_turn_log()).unwrap();
    let rev = revision(&store, id);
    let check = |store: &Store, batch: &[Event], got: u64| {
        match store.append(id, batch) {
            Err(e @ Error::SeqMismatch { .. }) => {
                assert!(
                    matches!(&e, Error::SeqMismatch { id: i, expected: 6, got: g } if i == id && *g == got),
                    "{e:?}"
                );
                assert_eq!(
                    e.to_string(),
                    format!(
                        "session \"resend\": stored next seq is 6, but the batch starts at seq {got}"
                    )
                );
            }
            other => panic!("expected SeqMismatch, got {other:?}"),
        }
        assert_eq!(store.read_from(id, 0).unwrap(), one_turn_log());
        assert_eq!(revision(store, id), rev);
    };
    check(&store, &one_turn_log(), 0);
    check(&store, &one_turn_log()[5..], 5);
    let ahead = Event::new("turn/start", 7, 8, r#"{"turn":2}"#).unwrap();
    check(&store, &[ahead], 7);
    drop(store);
    // The same from a store that adopts the stored log.
    let store = fx.open();
    check(&store, &one_turn_log(), 0);
    let mut log = Log::after(&one_turn_log());
    log.simple_turn("u2", "next", "ok");
    assert_eq!(store.append(id, &log.batch()).unwrap().next_seq, 12);
}

fn gap_inside_batch<F: Fixture>() {
    let fx = F::new();
    let id = "gap";
    let store = fx.open();
    store.create(meta(id, None)).unwrap();
    let batch = [
        Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
        Event::new("user/message", 2, 3, r#"{"id":"u"}"#).unwrap(),
    ];
    let v = violation(store.append(id, &batch));
    assert_eq!(
        v,
        Violation {
            seq: 2,
            event_type: "user/message".into(),
            rule: Rule::SeqContiguous,
            detail: "expected seq 1, got 2".into(),
        }
    );
    assert_eq!(
        v.to_string(),
        "turn contract violation at seq 2 (user/message): rule seq-contiguous: expected seq 1, got 2"
    );
    // Nothing was written and the create still stands.
    assert!(ids(&store).is_empty());
    assert!(fx.artifacts(id).is_empty());
    store.append(id, &one_turn_log()).unwrap();

    let rev = revision(&store, id);
    let batch = [
        Event::new("turn/start", 6, 7, r#"{"turn":2}"#).unwrap(),
        Event::new("step/start", 8, 9, r#"{"turn":2,"step":1}"#).unwrap(),
    ];
    let v = violation(store.append(id, &batch));
    assert_eq!(
        (v.seq, v.rule, v.detail.as_str()),
        (8, Rule::SeqContiguous, "expected seq 7, got 8")
    );
    assert_eq!(store.read_from(id, 0).unwrap(), one_turn_log());
    assert_eq!(revision(&store, id), rev);
}

fn contract_violations_reject_whole_batch<F: Fixture>() {
    let fx = F::new();
    let id = "contract";
    let store = fx.open();
    store.create(meta(id, None)).unwrap();
    store.append(id, &one_turn_log()).unwrap();
    let rev = revision(&store, id);
    let ev = |t: &str, seq: u64, data: &str| Event::new(t, seq, seq as i64 + 1, data).unwrap();
    let unmatched = ev(
        "tool/result",
        9,
        r#"{"turn":2,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"call-ghost"},"content":[]}}"#,
    )
    .with_surface_op("\"append\"")
    .unwrap();
    let cases: Vec<(Vec<Event>, u64, &str, Rule, &str)> = vec![
        (
            vec![ev("step/start", 6, r#"{"turn":2,"step":1}"#)],
            6,
            "step/start",
            Rule::StepOutsideTurn,
            "names turn 2, but no turn is open",
        ),
        (
            vec![
                ev("turn/start", 6, r#"{"turn":2}"#),
                ev("user/message", 7, r#"{"id":"u2"}"#),
                ev("step/start", 8, r#"{"turn":2,"step":1}"#),
                unmatched,
            ],
            9,
            "tool/result",
            Rule::ToolResultUnmatched,
            r#"no tool/call "call-ghost" of the open step is waiting for a result"#,
        ),
        (
            vec![
                ev("turn/start", 6, r#"{"turn":3}"#),
                ev("turn/end", 7, r#"{"turn":3,"reason":{"kind":"completed"}}"#),
            ],
            6,
            "turn/start",
            Rule::TurnNumber,
            "expected turn 2, got 3",
        ),
        (
            vec![
                ev("turn/start", 6, r#"{"turn":2}"#),
                ev("turn/end", 7, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
                ev("plan/mode", 8, r#"{"active":true}"#),
            ],
            8,
            "plan/mode",
            Rule::Enclosure,
            "no turn is open (strict policy)",
        ),
        (
            vec![
                ev("turn/start", 6, r#"{"turn":2}"#),
                ev(
                    "tool/call",
                    7,
                    r#"{"turn":2,"step":1,"callId":"c","name":"t","arguments":"{}"}"#,
                ),
            ],
            7,
            "tool/call",
            Rule::OutsideStep,
            "names turn 2 step 1, but turn 2 has no open step",
        ),
        (
            vec![
                ev("turn/start", 6, r#"{"turn":2}"#),
                ev("step/start", 7, r#"{"turn":2,"step":1}"#),
                ev("turn/end", 8, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
            ],
            8,
            "turn/end",
            Rule::TurnEndOpenStep,
            "step 1 is still open",
        ),
    ];
    for (batch, seq, event_type, rule, detail) in cases {
        let v = violation(store.append(id, &batch));
        assert_eq!(
            v,
            Violation {
                seq,
                event_type: event_type.into(),
                rule,
                detail: detail.into()
            }
        );
        assert_eq!(
            Error::Contract(v).to_string(),
            format!(
                "turn contract violation at seq {seq} ({event_type}): rule {}: {detail}",
                rule.code()
            )
        );
        assert_eq!(store.read_from(id, 0).unwrap(), one_turn_log());
        assert_eq!(revision(&store, id), rev);
    }
    // The rejected batches left the writer where it was.
    let mut log = Log::after(&one_turn_log());
    log.simple_turn("u2", "fine", "ok");
    assert_eq!(store.append(id, &log.batch()).unwrap().next_seq, 12);
    drop(store);
    assert_eq!(fx.open().load(id).unwrap().events, log.all());
}

fn lenient_policy<F: Fixture>() {
    let fx = F::new();
    let id = "lenient";
    let store = fx.open();
    store
        .create_with_policy(meta(id, None), Policy::Lenient)
        .unwrap();
    store.append(id, &one_turn_log()).unwrap();
    let mut log = Log::after(&one_turn_log());
    log.push("plan/mode", r#"{"active":true}"#);
    store.append(id, &log.batch()).unwrap();
    assert_eq!(listing(&store)[0].5, LogState::Clean);
    // Lenient relaxes only plugin enclosure; the core rules still hold.
    let todo = Event::new("todo/write", 7, 8, r#"{"todos":[]}"#).unwrap();
    let v = violation(store.append(id, &[todo]));
    assert_eq!(
        (v.seq, v.rule, v.detail.as_str()),
        (7, Rule::Enclosure, "no turn is open (lenient policy)")
    );
    let step = Event::new("step/start", 7, 8, r#"{"turn":2,"step":1}"#).unwrap();
    assert_eq!(
        violation(store.append(id, &[step])).rule,
        Rule::StepOutsideTurn
    );
    drop(store);

    // The policy is stored with the session: a default (Strict) store
    // honours it after a restart, and the loose plugin event is kept. A
    // backend that stores no policy (JSONL) keeps the event too, but a
    // Strict store appends under its own policy and refuses another; a
    // Lenient store takes it.
    let store = fx.open();
    let view = store.load(id).unwrap();
    assert_eq!(
        (view.events.as_slice(), view.state),
        (log.all(), LogState::Clean)
    );
    log.push("sandbox/mode", r#"{"mode":"read-only"}"#);
    log.simple_turn("u2", "go", "done");
    let batch = log.batch();
    let store = if F::keeps_policy() {
        store
    } else {
        let v = violation(store.append(id, &batch));
        assert_eq!((v.seq, v.rule), (7, Rule::Enclosure));
        drop(store);
        fx.store(StoreOptions {
            policy: Policy::Lenient,
            ..StoreOptions::default()
        })
    };
    store.append(id, &batch).unwrap();
    drop(store);
    assert_eq!(fx.open().inspect(id).unwrap().events, log.all());

    // The same plugin event between turns is refused by a Strict session.
    let store = fx.open();
    store.create(meta("strict", None)).unwrap();
    let mut strict = Log::new();
    strict
        .simple_turn("u", "x", "y")
        .push("plan/mode", r#"{"active":true}"#);
    let v = violation(store.append("strict", &strict.batch()));
    assert_eq!((v.seq, v.rule), (6, Rule::Enclosure));
}

fn non_json_data<F: Fixture>() {
    let fx = F::new();
    let cases = [
        ("NaN", "expected a value at byte 0"),
        ("Infinity", "expected a value at byte 0"),
        (r#"{"a":-Infinity}"#, "invalid number at byte 6"),
        (r#"{"a":1} x"#, "trailing characters at byte 8"),
        (r#"{"a":undefined}"#, "expected a value at byte 5"),
        (r#"{"a":1,}"#, "expected a string key at byte 7"),
        ("", "unexpected end of input at byte 0"),
    ];
    for (data, reason) in cases {
        let err = Event::new("user/message", 7, 1, data).unwrap_err();
        assert_eq!(
            (err.seq, err.event_type.as_deref(), err.line),
            (Some(7), Some("user/message"), None),
            "{data}"
        );
        assert_eq!(
            err.reason,
            format!("data is not valid JSON: {reason}"),
            "{data}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "invalid event at seq 7, type \"user/message\": data is not valid JSON: {reason}"
            )
        );
    }
    // The envelope is checked the same way.
    let err = Event::from_json(br#"{"type":"user/message","seq":7,"time":1,"data":{},"extra":1}"#)
        .unwrap_err();
    assert!(err.reason.contains("unknown field `extra`"), "{err}");
    let err =
        Event::from_json(br#"{"type":"user/message","seq":7,"time":1,"data":NaN}"#).unwrap_err();
    assert!(err.reason.starts_with("invalid event JSON: "), "{err}");
    let err =
        Event::from_json(b"{\"type\":\"user/message\",\"seq\":7,\"time\":1,\"data\":\"\xff\"}")
            .unwrap_err();
    assert_eq!(err.reason, "invalid UTF-8 at byte 48");

    // Valid but unusual JSON in an extra field of a user message is accepted.
    let store = fx.open();
    store.create(meta("json", None)).unwrap();
    let mut log = Log::new();
    log.turn_start();
    log.push_surface(
        "user/message",
        r#"{"id":"u","role":"user","content":[],"source":{"kind":"user"},"extra":[1e400,-0,"\u0000"]}"#,
        None,
    );
    log.turn_end();
    store.append("json", &log.batch()).unwrap();
    assert_eq!(fx.open().read_from("json", 0).unwrap(), log.all());
}

fn duplicate_create<F: Fixture>() {
    let fx = F::new();
    let id = "dup";
    let again = || SessionHeader::new(id, 2000).with_cwd("/elsewhere");
    let store = fx.open();
    store.create(meta(id, Some("/w"))).unwrap();
    match store.create(again()) {
        Err(e @ Error::AlreadyExists { on_disk: false, .. }) => assert_eq!(
            e.to_string(),
            "session \"dup\" already exists in this store (created, not yet appended)"
        ),
        other => panic!("expected AlreadyExists in memory, got {other:?}"),
    }
    store.append(id, &one_turn_log()).unwrap();
    let on_disk = |store: &Store| match store.create(again()) {
        Err(e @ Error::AlreadyExists { on_disk: true, .. }) => assert_eq!(
            e.to_string(),
            "session \"dup\" already exists and has a persisted log on disk; load it instead of creating it"
        ),
        other => panic!("expected AlreadyExists on disk, got {other:?}"),
    };
    on_disk(&store);
    // Closing drains and releases; the id is still taken (8.2 #22).
    store.close(id).unwrap();
    on_disk(&store);
    drop(store);
    let store = fx.open();
    on_disk(&store);
    let view = store.load(id).unwrap();
    assert_eq!(view.header, F::stored_header(meta(id, Some("/w"))));
    assert_eq!(view.events, one_turn_log());
}

fn create_collision_across_stores<F: Fixture>() {
    let fx = F::new();
    let id = "race";
    let first = fx.open();
    let second = fx.open();
    // Nothing is on disk yet, so both creates succeed; the first append wins.
    first.create(meta(id, Some("/first"))).unwrap();
    second
        .create(SessionHeader::new(id, 2000).with_cwd("/second"))
        .unwrap();
    first.append(id, &one_turn_log()).unwrap();
    let collide = |store: &Store| match store.append(id, &one_turn_log()) {
        Err(Error::AlreadyExists {
            id: got,
            on_disk: true,
        }) => assert_eq!(got, id),
        other => panic!("expected AlreadyExists on disk, got {other:?}"),
    };
    // Whether or not the winner still holds the session open.
    collide(&second);
    drop(first);
    collide(&second);
    let view = fx.open().load(id).unwrap();
    assert_eq!(view.header, F::stored_header(meta(id, Some("/first"))));
    assert_eq!(view.events, one_turn_log());
}

fn unknown_types<F: Fixture>() {
    let fx = F::new();
    let known_only = StoreOptions {
        require_known_types: true,
        ..StoreOptions::default()
    };
    let store = fx.store(known_only);
    store.create(meta("vocab", None)).unwrap();
    let batch = |ignorable: bool| {
        let mark = |e: Event| if ignorable { e.with_ignorable() } else { e };
        vec![
            Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
            mark(Event::new("future/event", 1, 2, r#"{"x":1}"#).unwrap()),
            mark(Event::new("plugin/test", 2, 3, "null").unwrap()),
            Event::new(
                "turn/end",
                3,
                4,
                r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            )
            .unwrap(),
        ]
    };
    let v = violation(store.append("vocab", &batch(false)));
    assert_eq!(
        v,
        Violation {
            seq: 1,
            event_type: "future/event".into(),
            rule: Rule::UnknownType,
            detail: r#"type "future/event" is not a known session event type and is not marked ignorable"#.into(),
        }
    );
    assert!(fx.artifacts("vocab").is_empty());
    store.append("vocab", &batch(true)).unwrap();
    drop(store);
    let view = fx.store(known_only).load("vocab").unwrap();
    assert_eq!(view.events, batch(true));
    assert_eq!(
        jsons(&view.events[1..3]),
        [
            r#"{"type":"future/event","seq":1,"time":2,"data":{"x":1},"ignorable":true}"#,
            r#"{"type":"plugin/test","seq":2,"time":3,"data":null,"ignorable":true}"#
        ]
    );

    // A log written by a store that does not require known types.
    let id = "open-vocab";
    let store = fx.open();
    store.create(meta(id, None)).unwrap();
    store.append(id, &batch(false)).unwrap();
    drop(store);
    let strict = fx.store(known_only);
    let refusal = r#"session "open-vocab": event seq 1 has type "future/event", which is not a known session event type and is not marked ignorable"#;
    assert_eq!(unsupported_detail(strict.inspect(id)), refusal);
    assert_eq!(unsupported_detail(strict.load(id)), refusal);
    assert_eq!(unsupported_detail(strict.read_from(id, 0)), refusal);
    // A read through the cursor refuses at the event, with the same words.
    let read = strict.read(id).and_then(|mut reader| {
        while reader.next_event()?.is_some() {}
        Ok(())
    });
    assert_eq!(unsupported_detail(read), refusal);
    let mut more = Log::after(&batch(false));
    more.simple_turn("u2", "x", "y");
    assert_eq!(
        unsupported_detail(strict.append(id, &more.batch())),
        refusal
    );
    // The refusals wrote nothing and held no lock.
    assert_eq!(fx.open().load(id).unwrap().events, batch(false));
}

fn foreign_format_version<F: Fixture>() {
    let fx = F::new();
    let store = fx.open();
    let cases = [
        (
            "v99",
            99,
            "session \"v99\" uses log format v99, but this harness reads only v0: the log was written by a newer harness \u{2014} upgrade the harness to open it",
        ),
        (
            "v-1",
            -1,
            "session \"v-1\" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it",
        ),
    ];
    for (id, version, refusal) in cases {
        let header = SessionHeader {
            version,
            ..meta(id, Some("/w"))
        };
        assert!(matches!(
            store.create(header.clone()),
            Err(Error::Header(_))
        ));
        // Written below the Store, as another harness version would have.
        let events = one_turn_log();
        let placements = Tracker::new(Policy::Strict).accept_batch(&events).unwrap();
        drop(
            store
                .backend()
                .create(&header, Policy::Strict, &events, &placements)
                .unwrap(),
        );
        assert_eq!(unsupported_detail(store.inspect(id)), refusal);
        assert_eq!(unsupported_detail(store.load(id)), refusal);
        assert_eq!(unsupported_detail(store.read_from(id, 0)), refusal);
        let mut more = Log::after(&events);
        more.simple_turn("u2", "x", "y");
        assert_eq!(unsupported_detail(store.append(id, &more.batch())), refusal);
        assert!(matches!(
            store.create(meta(id, None)),
            Err(Error::AlreadyExists { on_disk: true, .. })
        ));
    }
}

fn fork_boundary<F: Fixture>() {
    let fx = F::new();
    let store = fx.open();
    let started = turnwal::now_ms();
    store.create(meta("parent", Some("/work/p"))).unwrap();
    let mut log = Log::new();
    log.simple_turn("u1", "hi", "hello").tool_turn("call-f");
    store.append("parent", &log.batch()).unwrap();
    let parent = log.all().to_vec();
    let n = parent.len() as u64;
    assert_eq!(n, 20);

    let child = store.fork("parent", None, "child").unwrap();
    assert!(child.created_at >= started);
    assert_eq!(
        child,
        SessionHeader {
            version: 0,
            id: "child".into(),
            created_at: child.created_at,
            cwd: Some("/work/p".into()),
            parent_session: Some("parent".into()),
            seed_length: Some(n),
            origin: None,
            delegation_depth: None,
            agent_preset: None,
        }
    );
    let reader = fx.open();
    let view = reader.inspect("child").unwrap();
    assert_eq!(view.header, F::stored_header(child.clone()));
    assert_eq!(jsons(&view.events[..n as usize]), jsons(&parent));
    let seed_end = &view.events[n as usize];
    assert_eq!(
        (
            seed_end.event_type(),
            seed_end.seq(),
            seed_end.data().get(),
            seed_end.ignorable()
        ),
        ("session/end-seed", n, "{}", false)
    );
    assert_eq!(
        (view.events.len() as u64, view.state),
        (n + 1, LogState::Clean)
    );
    // The seed is written once: flushing writes nothing more (8.2 #13).
    let rev = revision(&store, "child");
    assert_eq!(store.flush("child").unwrap(), n + 1);
    assert_eq!(revision(&store, "child"), rev);

    // At the end of turn 1.
    let at5 = store.fork("parent", Some(5), "child-at-5").unwrap();
    assert_eq!(at5.seed_length, Some(6));
    let events = reader.read_from("child-at-5", 0).unwrap();
    assert_eq!(jsons(&events[..6]), jsons(&parent[..6]));
    assert_eq!(types(&events[6..]), ["session/end-seed"]);

    // A seed that already ends with its marker gets no second one.
    let grandchild = store.fork("child", None, "grandchild").unwrap();
    assert_eq!(grandchild.seed_length, Some(n + 1));
    assert_eq!(reader.read_from("grandchild", 0).unwrap(), view.events);

    // Refusals create nothing.
    match store.fork("parent", Some(3), "inside") {
        Err(Error::OpenTurn { id, reason }) => {
            assert_eq!(
                (id.as_str(), reason.as_str()),
                (
                    "parent",
                    "fork boundary seq 3 is inside turn 1, started at seq 0; a fork ends at a seq after which no turn is open (a turn's closing turn/end): the nearest is 5 (2 in all)"
                )
            );
        }
        other => panic!("expected OpenTurn, got {other:?}"),
    }
    assert!(fx.artifacts("inside").is_empty());
    match store.fork("parent", None, "child") {
        Err(Error::AlreadyExists { id, on_disk: true }) => assert_eq!(id, "child"),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    store.create(meta("pending-child", None)).unwrap();
    match store.fork("parent", None, "pending-child") {
        Err(Error::AlreadyExists { id, on_disk: false }) => assert_eq!(id, "pending-child"),
        other => panic!("expected AlreadyExists (not on disk), got {other:?}"),
    }
    match store.fork("parent", Some(n + 5), "past") {
        Err(e @ Error::InvalidArgument(_)) => assert_eq!(
            e.to_string(),
            "invalid argument: fork boundary seq 25 is past the end of session \"parent\" (last seq 19)"
        ),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_not_found(store.fork("absent", None, "orphan"), "absent");
    assert!(fx.artifacts("orphan").is_empty());

    // A live open turn is not a boundary.
    log.turn_start().user("u3", "more");
    store.append("parent", &log.batch()).unwrap();
    match store.fork("parent", None, "mid-turn") {
        Err(Error::OpenTurn { reason, .. }) => {
            assert_eq!(
                reason,
                "fork boundary seq 21 is inside turn 3, started at seq 20; a fork ends at a seq \
                 after which no turn is open (a turn's closing turn/end): the nearest is 19 (2 in all)"
            );
        }
        other => panic!("expected OpenTurn, got {other:?}"),
    }
    assert_eq!(
        ids(&reader),
        ["child", "child-at-5", "grandchild", "parent"]
    );
}

fn load_while_live_turn_open<F: Fixture>() {
    let fx = F::new();
    let id = "live";
    let store = fx.open();
    store.create(meta(id, Some("/w"))).unwrap();
    let mut log = Log::new();
    log.turn_start().user("u1", "hi").step_start();
    store.append(id, &log.batch()).unwrap();
    let rev = revision(&store, id);
    match store.load(id) {
        Err(e @ Error::OpenTurn { .. }) => assert_eq!(
            e.to_string(),
            "session \"live\": cannot load session while its live turn is open"
        ),
        other => panic!("expected OpenTurn, got {other:?}"),
    }
    // The live turn is live, not interrupted: inspect shows it as it is.
    let view = store.inspect(id).unwrap();
    assert_eq!(view.events, log.all());
    assert_eq!(
        (view.stored, view.state, view.live),
        (3, LogState::OpenTurn, true)
    );
    assert_eq!(revision(&store, id), rev);

    log.assistant("hello", &[]).step_end().turn_end();
    store.append(id, &log.batch()).unwrap();
    let view = store.load(id).unwrap();
    assert_eq!(view.events, log.all());
    assert_eq!(
        view.events[5].data().get(),
        r#"{"turn":1,"reason":{"kind":"completed"}}"#
    );
    assert_eq!((view.state, view.live), (LogState::Clean, false));
}

fn delete<F: Fixture>() {
    let fx = F::new();
    let store = fx.open();
    store.create(meta("gone", None)).unwrap();
    store.append("gone", &one_turn_log()).unwrap();
    store.delete("gone").unwrap();
    assert!(ids(&store).is_empty());
    assert!(
        fx.artifacts("gone").is_empty(),
        "{:?}",
        fx.artifacts("gone")
    );
    assert_eq!(store.revision("gone").unwrap(), None);
    assert_not_found(store.inspect("gone"), "gone");
    assert_not_found(store.load("gone"), "gone");
    assert_not_found(store.read_from("gone", 0), "gone");
    assert_not_found(store.delete("gone"), "gone");
    assert_not_found(fx.open().inspect("gone"), "gone");
    // The id is free again.
    store.create(meta("gone", Some("/again"))).unwrap();
    store.append("gone", &one_turn_log()).unwrap();
    assert_eq!(
        fx.open().inspect("gone").unwrap().header,
        F::stored_header(meta("gone", Some("/again")))
    );

    // Deleting a pending create just forgets it.
    store.create(meta("pending", None)).unwrap();
    store.delete("pending").unwrap();
    assert_not_found(store.inspect("pending"), "pending");
    store.create(meta("pending", None)).unwrap();
    assert!(fx.artifacts("pending").is_empty());

    assert_not_found(store.delete("absent"), "absent");

    // A session this store never opened.
    drop(store);
    let store = fx.open();
    store.delete("gone").unwrap();
    assert!(fx.artifacts("gone").is_empty());
    assert!(ids(&store).is_empty());
}

fn second_writer<F: Fixture>() {
    let fx = F::new();
    let id = "shared";
    let first = fx.open();
    first.create(meta(id, None)).unwrap();
    first.append(id, &one_turn_log()).unwrap();

    let second = fx.open();
    let mut log = Log::after(&one_turn_log());
    log.simple_turn("u2", "two", "ok");
    let turn2 = log.batch();
    if F::takes_over() {
        // The first writer's lease is live: the second is refused, naming
        // the holder and the time its lease has left.
        match second.append(id, &turn2) {
            Err(Error::Leased {
                id: got,
                holder,
                expires_in,
                ..
            }) => {
                assert_eq!(got, id);
                let pid = format!("pid {}", std::process::id());
                assert!(holder.contains(&pid), "{holder}");
                assert!(
                    expires_in > std::time::Duration::ZERO
                        && expires_in <= turnwal::backend::postgres::DEFAULT_LEASE,
                    "{expires_in:?}"
                );
            }
            other => panic!("expected Leased, got {other:?}"),
        }
        assert_eq!(second.inspect(id).unwrap().events, one_turn_log());
        // Taken on purpose: the first is refused from then on, naming who
        // holds it, and nothing of its batch is kept.
        second.steal_lease(id);
        assert_eq!(
            second.append(id, &turn2).unwrap().next_seq,
            log.all().len() as u64
        );
        // The first writer's next batch, from where it left the log.
        let mut late = Log::after(&one_turn_log());
        late.simple_turn("u3", "late", "ok");
        match first.append(id, &late.batch()) {
            Err(Error::Superseded {
                id: got,
                holder,
                epoch,
                stale,
            }) => {
                assert_eq!(got, id);
                assert!(epoch > stale, "epoch {epoch}, stale {stale}");
                let pid = format!("pid {}", std::process::id());
                assert!(holder.contains(&pid), "{holder}");
            }
            other => panic!("expected Superseded, got {other:?}"),
        }
        // Reads need no writer, and see only the holder's events.
        assert_eq!(first.inspect(id).unwrap().events, log.all());
        assert_eq!(second.load(id).unwrap().events, log.all());
        return;
    }
    let pid = std::process::id();
    let locked = |result: Result<()>| match result {
        Err(e @ Error::Locked { .. }) => {
            let Error::Locked {
                id: got,
                path,
                holder,
            } = &e
            else {
                unreachable!()
            };
            let named = F::names_holder().then_some(pid);
            assert_eq!(
                (got.as_str(), path, *holder),
                (id, &fx.lock_path(id), named)
            );
            let text = named.map_or("(pid unknown)".to_owned(), |pid| format!("(pid {pid})"));
            assert!(e.to_string().contains(&text), "{e}");
        }
        other => panic!("expected Locked, got {other:?}"),
    };
    locked(second.append(id, &turn2).map(drop));
    locked(second.load(id).map(drop));
    locked(second.delete(id));
    // Readers need no lock.
    assert_eq!(second.inspect(id).unwrap().events, one_turn_log());
    assert_eq!(second.read_from(id, 4).unwrap(), one_turn_log()[4..]);
    // The holder is undisturbed.
    first.append(id, &turn2).unwrap();
    drop(first);

    log.simple_turn("u3", "three", "ok");
    assert_eq!(second.append(id, &log.batch()).unwrap().next_seq, 18);
    assert_eq!(second.load(id).unwrap().events, log.all());
}

fn lossless_data<F: Fixture>() {
    let fx = F::new();
    let id = "lossless";
    let payloads = [
        r#"{"n":1e+21,"z":-0.0,"big":123456789012345678901234567890,"s":"\ud800\udc00x\ud800"}"#,
        r#"{"b":1,"a":2,"nested":{"z":[3,2,1],"y":null}}"#,
        r#"{"e":"\u0041\n\/\"\\","raw":"😀","escaped":"\ud83d\ude00","lone":"\udfff"}"#,
        r#"{ "spaced" : [ 1 , 2.50 ] ,"t":true }"#,
        r#"[1.0,1E5,-1e-7,0.10,-0]"#,
        r#""just a string""#,
        "null",
        "12.50",
    ];
    let mut log = Log::new();
    log.turn_start();
    let user = format!(
        r#"{{"id":"u","role":"user","content":[],"source":{{"kind":"user"}},"extra":{}}}"#,
        payloads[0]
    );
    log.push_surface("user/message", &user, None);
    for p in payloads {
        log.push("x/lossless", p);
    }
    log.turn_end();
    let store = fx.open();
    store.create(meta(id, None)).unwrap();
    store.append(id, &log.batch()).unwrap();
    drop(store);

    let store = fx.open();
    let view = store.load(id).unwrap();
    assert_eq!(view.events[1].data().get(), user);
    for (e, p) in view.events[2..].iter().zip(payloads) {
        assert_eq!(e.data().get(), p);
    }
    assert_eq!(jsons(&view.events), jsons(log.all()));
    assert_eq!(
        view.events[2].to_json(),
        r#"{"type":"x/lossless","seq":2,"time":3,"data":{"n":1e+21,"z":-0.0,"big":123456789012345678901234567890,"s":"\ud800\udc00x\ud800"}}"#
    );
    assert_eq!(
        jsons(&store.read_from(id, 2).unwrap()),
        jsons(&log.all()[2..])
    );
}

/// `Store::view` (events borrowed in place) shows exactly what `inspect`
/// shows, byte for byte, for a crashed log (closers included) and after its
/// repair, and writes nothing.
fn view_matches_inspect<F: Fixture>() {
    let fx = F::new();
    let id = "view";
    crash_in_turn_two(&fx, id, |log| {
        log.assistant("", &[("call-v", "run", r#"{"cmd":"ls"}"#)]);
    });
    let store = fx.open();
    let before = fx.image(id);
    let inspect = store.inspect(id).unwrap();
    let view = store.view(id).unwrap();
    let lines: Vec<String> = view
        .iter()
        .map(|e| {
            let mut out = Vec::new();
            e.write_json(&mut out);
            String::from_utf8(out).unwrap()
        })
        .collect();
    assert_eq!(lines, jsons(&inspect.events));
    assert_eq!(
        (view.stored(), view.len(), view.state()),
        (9, 12, LogState::OpenTurn)
    );
    let owned: Vec<Event> = view.iter().map(|e| e.to_event()).collect();
    assert_eq!(owned, inspect.events);
    assert_eq!(fx.image(id), before, "view writes nothing");
    let loaded = store.load(id).unwrap();
    drop(store);
    let store = fx.open();
    let view = store.view(id).unwrap();
    assert_eq!(
        (view.stored(), view.len(), view.state()),
        (12, 12, LogState::Clean)
    );
    assert_eq!(
        view.iter().map(|e| e.to_event()).collect::<Vec<_>>(),
        loaded.events
    );
    assert!(view.get(12).is_none());
    assert!(matches!(store.view("nope"), Err(Error::NotFound { .. })));
}

/// Every event [`Store::read`] lends equals [`Store::inspect`]'s, byte for
/// byte: a realistic session (mostly chunk runs, appended in batches of
/// every size, long enough to span many pages of rows), a crashed one with
/// an open turn, one with a torn tail where the backend can tear, and the
/// same after `load` repaired it. Reading writes nothing.
fn read_matches_inspect<F: Fixture>() {
    use turnwal_testkit::workload::realistic;
    let fx = F::new();
    let lines = |reader: &mut turnwal::LogReader| {
        let mut out = Vec::new();
        while let Some(e) = reader.next_event().unwrap() {
            let mut line = Vec::new();
            e.write_json(&mut line);
            out.push(String::from_utf8(line).unwrap());
        }
        out
    };
    let store = fx.open();
    store.create(meta("real", Some("/w"))).unwrap();
    let mut sizes = [1usize, 7, 300, 2, 45].into_iter().cycle();
    for turn in realistic::turns_of_size(5, 1_500_000) {
        let mut rest = &turn[..];
        while !rest.is_empty() {
            let n = sizes.next().unwrap().min(rest.len());
            store.append("real", &rest[..n]).unwrap();
            rest = &rest[n..];
        }
    }
    store.flush("real").unwrap();
    drop(store);
    crash_in_turn_two(&fx, "open", |log| {
        log.assistant("", &[("call-r", "run", r#"{"cmd":"ls"}"#)]);
    });
    crash_in_turn_two(&fx, "torn", |_| {});
    let torn = fx.tear_tail("torn");
    let store = fx.open();
    for id in ["real", "open", "torn"] {
        let before = fx.image(id);
        let inspect = store.inspect(id).unwrap();
        let mut reader = store.read(id).unwrap();
        assert_eq!(
            (reader.stored(), reader.len(), reader.state()),
            (inspect.stored, inspect.events.len() as u64, inspect.state),
            "{id}"
        );
        assert_eq!(lines(&mut reader), jsons(&inspect.events), "{id}");
        assert!(reader.next_event().unwrap().is_none());
        assert_eq!(fx.image(id), before, "{id}: a read writes nothing");
    }
    assert!(store.inspect("real").unwrap().events.len() > 4_000);
    if torn {
        assert_eq!(store.read("torn").unwrap().state(), LogState::Torn);
    }
    for id in ["open", "torn"] {
        let loaded = store.load(id).unwrap();
        drop(store.close(id));
        let mut reader = fx.open().read(id).unwrap();
        assert_eq!(reader.state(), LogState::Clean, "{id}");
        assert_eq!(lines(&mut reader), jsons(&loaded.events), "{id}");
    }
    assert!(matches!(store.read("nope"), Err(Error::NotFound { .. })));
}

fn resume_in_fresh_store<F: Fixture>() {
    let fx = F::new();
    let id = "resume";
    let store = fx.open();
    store.create(meta(id, Some("/w"))).unwrap();
    store.append(id, &one_turn_log()).unwrap();
    drop(store);
    // A fresh store appends without loading first (8.2 #31).
    let store = fx.open();
    let mut log = Log::after(&one_turn_log());
    log.turn_start().user("u2", "again").turn_end();
    let r = store.append(id, &log.batch()).unwrap();
    assert_eq!(
        r,
        Receipt {
            next_seq: 9,
            durable: 9
        }
    );
    drop(store);
    let view = fx.open().load(id).unwrap();
    assert_eq!(seqs(&view.events), (0..9).collect::<Vec<_>>());
    assert_eq!(view.events, log.all());
    assert_eq!(view.header, F::stored_header(meta(id, Some("/w"))));
}

fn torn_tail<F: Fixture>() {
    let fx = F::new();
    let id = "torn";
    let written = crash_in_turn_two(&fx, id, |_| {});
    if !fx.tear_tail(id) {
        return; // this backend never tears (the upstream memory fixture)
    }
    let store = fx.open();
    let view = store.inspect(id).unwrap();
    assert_eq!(view.state, LogState::Torn);
    let cut = view.cut.clone().expect("a torn tail is cut");
    assert_eq!((cut.seq, cut.reason), (8, CutReason::Incomplete));
    let loaded = store.load(id).unwrap();
    assert_eq!(loaded.events, view.events);
    assert_eq!(&loaded.events[..8], written);
    assert_eq!(seqs(&loaded.events), (0..10).collect::<Vec<_>>());
    assert_eq!(
        loaded.events[9].data().get(),
        r#"{"turn":2,"reason":{"kind":"interrupted"}}"#
    );
    let mut log = Log::after(&loaded.events);
    log.turn_start().turn_end();
    store.append(id, &log.batch()).unwrap();
    drop(store);
    let store = fx.open();
    assert_eq!(store.verify(id).unwrap().state, LogState::Clean);
    assert_eq!(store.load(id).unwrap().events, log.all());
}

/// `Store::adopt`: a harness that runs recovery itself opens a crashed log
/// as it is; nothing is written, and its appends continue the open turn.
fn adopt_keeps_open_turn<F: Fixture>() {
    let fx = F::new();
    let id = "adopt";
    let written = crash_in_turn_two(&fx, id, |_| {});
    let store = fx.open();
    let rev = revision(&store, id);
    let image = fx.image(id);
    assert_eq!(
        store.adopt(id).unwrap(),
        Receipt {
            next_seq: 8,
            durable: 8
        }
    );
    assert_eq!(revision(&store, id), rev, "adopting writes nothing");
    assert_eq!(fx.image(id), image);
    let mut log = Log::after(&written);
    log.step = 1; // crash_in_turn_two left step 1 of turn 2 open
    log.step_end().turn_end();
    store.append(id, &log.batch()).unwrap();
    drop(store);
    let store = fx.open();
    let view = store.inspect(id).unwrap();
    assert_eq!(view.state, LogState::Clean);
    assert_eq!(view.events, log.all());
    assert_eq!(
        view.events[9].data().get(),
        r#"{"turn":2,"reason":{"kind":"completed"}}"#
    );

    // A log with a tail to cut is refused, and left as it is.
    let id = "adopt-torn";
    crash_in_turn_two(&fx, id, |_| {});
    if fx.tear_tail(id) {
        let store = fx.open();
        let image = fx.image(id);
        assert!(matches!(store.adopt(id), Err(Error::StaleRepair { .. })));
        assert_eq!(fx.image(id), image);
    }
}

/// `Store::commit_repair`: the repair a caller decided from a read, committed
/// once; a stale read and foreign closers are refused with nothing changed;
/// an empty closer list cuts only and leaves the open turn to its writer.
fn commit_repair_from_read<F: Fixture>() {
    let fx = F::new();
    let id = "commit";
    let written = crash_in_turn_two(&fx, id, |log| {
        log.assistant("", &[("call-1", "ls", "{}")]);
        log.tool_call("call-1", "ls", "{}");
    });
    let torn = fx.tear_tail(id);
    let store = fx.open();
    let view = store.inspect(id).unwrap();
    let basis = RepairBasis::of(&view);
    assert_eq!(basis.stored, written.len() as u64);
    assert_eq!(basis.cut_offset.is_some(), torn);
    let closers = view.events[view.stored as usize..].to_vec();
    assert_eq!(
        types(&closers),
        ["tool/result", "step/end", "turn/end"],
        "TOOL_OUTCOME_UNKNOWN, then the step and the turn"
    );

    // Closers that are not the derived ones are refused; nothing changes.
    let rev = revision(&store, id);
    let image = fx.image(id);
    let mut wrong = closers.clone();
    wrong.swap(0, 1);
    assert!(matches!(
        store.commit_repair(id, &basis, &wrong),
        Err(Error::InvalidArgument(_))
    ));
    let stale = RepairBasis {
        stored: basis.stored - 1,
        ..basis
    };
    assert!(matches!(
        store.commit_repair(id, &stale, &closers),
        Err(Error::StaleRepair { .. })
    ));
    assert_eq!((revision(&store, id), fx.image(id)), (rev.clone(), image));

    let r = store.commit_repair(id, &basis, &closers).unwrap();
    assert_eq!(r.next_seq, written.len() as u64 + 3);
    assert_ne!(revision(&store, id), rev, "a repair changes the revision");
    assert!(matches!(
        store.commit_repair(id, &basis, &closers),
        Err(Error::StaleRepair { .. })
    ));
    let mut log = Log::after(&view.events);
    log.turn_start().turn_end();
    store.append(id, &log.batch()).unwrap();
    drop(store);
    let store = fx.open();
    let loaded = store.load(id).unwrap();
    assert_eq!(loaded.state, LogState::Clean);
    assert_eq!(loaded.events, log.all());

    // A cut alone: the open turn stays open for the writer that continues it.
    let id = "commit-cut";
    let written = crash_in_turn_two(&fx, id, |_| {});
    if fx.tear_tail(id) {
        let store = fx.open();
        let view = store.inspect(id).unwrap();
        let r = store
            .commit_repair(id, &RepairBasis::of(&view), &[])
            .unwrap();
        assert_eq!(r.next_seq, 8);
        let mut log = Log::after(&written);
        log.step = 1;
        log.step_end().turn_end();
        store.append(id, &log.batch()).unwrap();
        drop(store);
        let view = fx.open().inspect(id).unwrap();
        assert_eq!(view.state, LogState::Clean);
        assert_eq!(view.events, log.all());
    }
}

fn missing_sessions<F: Fixture>() {
    let fx = F::new();
    let store = fx.open();
    let id = "absent";
    assert_not_found(store.inspect(id), id);
    assert_not_found(store.load(id), id);
    assert_not_found(store.read_from(id, 0), id);
    assert_not_found(store.delete(id), id);
    assert_not_found(store.verify(id), id);
    assert_not_found(store.recover(id, true), id);
    assert_not_found(store.fork(id, None, "x"), id);
    assert_not_found(store.append(id, &one_turn_log()), id);
    assert_eq!(store.revision(id).unwrap(), None);
    assert_eq!(
        Error::NotFound { id: id.into() }.to_string(),
        "session \"absent\" not found"
    );
    assert!(store.list().unwrap().is_empty());
    assert!(fx.artifacts(id).is_empty());
}

/// Instantiates every case for one backend, as `<module>::<case>`. A new
/// backend joins with one more `backend_suite!` line.
macro_rules! backend_suite {
    ($module:ident, $fixture:ident) => {
        mod $module {
            use super::$fixture;
            backend_cases!(
                $fixture: round_trip,
                header_validation,
                crash_with_open_step,
                crash_with_unstarted_tool_request,
                crash_after_recorded_tool_call,
                lazy_materialization,
                list_summaries,
                read_from_edges,
                revisions,
                resent_seq_is_rejected,
                gap_inside_batch,
                contract_violations_reject_whole_batch,
                lenient_policy,
                non_json_data,
                duplicate_create,
                create_collision_across_stores,
                unknown_types,
                foreign_format_version,
                fork_boundary,
                load_while_live_turn_open,
                delete,
                second_writer,
                lossless_data,
                view_matches_inspect,
                read_matches_inspect,
                resume_in_fresh_store,
                torn_tail,
                missing_sessions,
                adopt_keeps_open_turn,
                commit_repair_from_read,
            );
        }
    };
}

macro_rules! backend_cases {
    ($fixture:ident: $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                super::$case::<$fixture>();
            }
        )*
    };
}

backend_suite!(memory, MemoryFixture);
backend_suite!(wal, WalFixture);
backend_suite!(sqlite, SqliteFixture);
backend_suite!(jsonl, JsonlFixture);
backend_suite!(jsonl_zstd, JsonlZstdFixture);
#[cfg(unix)]
backend_suite!(postgres, PostgresFixture);

// ---------------------------------------------------------------------------
// Differential: one scripted history, identical logical results everywhere
// ---------------------------------------------------------------------------

/// What one backend answered to the script, normalized to what every backend
/// must agree on: byte sizes, byte offsets and paths are the backend's own;
/// the wall-clock stamps a fork takes (`createdAt`, the end-seed's time) are
/// masked.
struct Transcript {
    started: u64,
    lines: Vec<String>,
}

impl Transcript {
    fn note(&mut self, label: &str, outcome: String) {
        self.lines.push(format!("{label}: {outcome}"));
    }

    fn result<T>(&mut self, label: &str, result: Result<T>, show: impl FnOnce(&Self, T) -> String) {
        let outcome = match result {
            Ok(value) => show(self, value),
            Err(e) => format!("error {}", error_key(&e)),
        };
        self.note(label, outcome);
    }

    fn header(&self, h: &SessionHeader) -> String {
        let mut h = h.clone();
        if h.created_at >= self.started {
            h.created_at = 0;
        }
        h.to_json()
    }

    fn time(&self, time: i64) -> String {
        if time as u64 >= self.started {
            "<now>".into()
        } else {
            time.to_string()
        }
    }

    fn events(&self, events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let json = e.to_json();
                if e.time() as u64 >= self.started {
                    json.replacen(&format!("\"time\":{}", e.time()), "\"time\":\"<now>\"", 1)
                } else {
                    json
                }
            })
            .collect()
    }

    fn view(&self, v: SessionView) -> String {
        format!(
            "header={} stored={} state={} cut={:?} live={} events={:?}",
            self.header(&v.header),
            v.stored,
            v.state,
            v.cut.map(|c| (c.seq, c.reason)),
            v.live,
            self.events(&v.events)
        )
    }

    fn list(&self, mut summaries: Vec<SessionSummary>) -> String {
        summaries.sort_by(|a, b| a.id.cmp(&b.id));
        let rows: Vec<String> = summaries
            .iter()
            .map(|s| {
                format!(
                    "{} header={:?} events={} turns={} last={:?} state={} problem={:?}",
                    s.id,
                    s.header.as_ref().map(|h| self.header(h)),
                    s.events,
                    s.turns,
                    s.last_activity.map(|t| self.time(t)),
                    s.state,
                    s.problem
                )
            })
            .collect();
        format!("{rows:#?}")
    }
}

fn error_key(e: &Error) -> String {
    match e {
        Error::Unsupported { detail, .. } => format!("Unsupported({detail})"),
        Error::Locked { id, holder, .. } => format!("Locked({id}, {holder:?})"),
        Error::Corrupt(c) => format!("Corrupt(seq {:?}: {})", c.seq, c.reason),
        Error::Io { op, source, .. } => format!("Io({op}, {:?})", source.kind()),
        other => format!("{other:?}"),
    }
}

fn script<F: Fixture>() -> Vec<String> {
    let fx = F::new();
    let mut t = Transcript {
        started: turnwal::now_ms(),
        lines: Vec::new(),
    };
    let full = SessionHeader {
        version: 0,
        id: "b".into(),
        created_at: 1000,
        cwd: Some("/w/b".into()),
        parent_session: Some("root".into()),
        seed_length: Some(0),
        origin: Some("subagent".into()),
        delegation_depth: Some(1),
        agent_preset: Some("reviewer".into()),
    };

    let s1 = fx.open();
    t.result("create a", s1.create(meta("a", Some("/w/a"))), |_, ()| {
        "ok".into()
    });
    t.result("create b", s1.create(full), |_, ()| "ok".into());
    t.result("create c", s1.create(meta("c", None)), |_, ()| "ok".into());
    t.result("create a again", s1.create(meta("a", None)), |_, ()| {
        "ok".into()
    });

    let mut a = Log::new();
    a.simple_turn("a1", "hi", "hello");
    let receipt = |_: &Transcript, r: Receipt| format!("next {}", r.next_seq);
    t.result("append a turn 1", s1.append("a", &a.batch()), receipt);
    a.tool_turn("call-a2");
    let turn2 = a.batch();
    t.result("append a turn 2 head", s1.append("a", &turn2[..9]), receipt);
    t.result("append a turn 2 rest", s1.append("a", &turn2[9..]), receipt);
    t.result("append b", s1.append("b", &one_turn_log()), receipt);
    let gap = [
        Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
        Event::new(
            "turn/end",
            2,
            2,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        )
        .unwrap(),
    ];
    t.result("append c with a gap", s1.append("c", &gap), receipt);
    t.result("append a resent", s1.append("a", &one_turn_log()), receipt);
    let stray = Event::new("step/start", a.next_seq(), 1, r#"{"turn":3,"step":1}"#).unwrap();
    t.result("append a stray step", s1.append("a", &[stray]), receipt);
    t.result("load c pending", s1.load("c"), |t, v| t.view(v));
    t.result("list", s1.list(), |t, l| t.list(l));
    t.result("inspect a live", s1.inspect("a"), |t, v| t.view(v));

    // Turn 3 is cut short by a crash after a started tool call.
    a.turn_start()
        .user("a3", "run it")
        .step_start()
        .chunk("running");
    a.assistant(
        "running",
        &[("call-a3", "sh", "make"), ("call-a3b", "sh", "ls")],
    );
    a.tool_call("call-a3", "sh", "make");
    t.result("append a turn 3 open", s1.append("a", &a.batch()), receipt);
    t.result("load a with live open turn", s1.load("a"), |t, v| t.view(v));
    drop(s1);

    let s2 = fx.open();
    t.result("list after crash", s2.list(), |t, l| t.list(l));
    let rev = s2.revision("a").unwrap();
    t.result("inspect a", s2.inspect("a"), |t, v| t.view(v));
    let stored = a.next_seq();
    for seq in 0..=stored + 1 {
        t.result(
            &format!("read_from a {seq}"),
            s2.read_from("a", seq),
            |t, e| format!("{:?}", t.events(&e)),
        );
    }
    t.result("verify a", s2.verify("a"), |_, r| {
        format!(
            "state={} events={} turns={} closers={} cut={:?} problem={:?}",
            r.state, r.events, r.turns, r.closers, r.cut, r.problem
        )
    });
    t.result("recover a dry run", s2.recover("a", true), |t, r| {
        format!(
            "state={} kept={} committed={} closers={:?}",
            r.state,
            r.kept,
            r.committed,
            t.events(&r.closers)
        )
    });
    t.note(
        "reads kept the revision",
        format!("{}", s2.revision("a").unwrap() == rev),
    );
    let header = |t: &Transcript, h: SessionHeader| t.header(&h);
    t.result(
        "fork a from the crashed view",
        s2.fork("a", None, "a-fork"),
        header,
    );
    t.result("inspect a-fork", s2.inspect("a-fork"), |t, v| t.view(v));
    t.result(
        "fork a inside turn 2",
        s2.fork("a", Some(10), "bad"),
        header,
    );
    t.result("load a", s2.load("a"), |t, v| t.view(v));
    t.note(
        "load changed the revision",
        format!("{}", s2.revision("a").unwrap() != rev),
    );
    let mut more = Log::after(&s2.read_from("a", 0).unwrap());
    more.simple_turn("a4", "again", "done");
    t.result("append a turn 4", s2.append("a", &more.batch()), receipt);
    t.result(
        "fork a at turn 2",
        s2.fork("a", Some(19), "a-fork-2"),
        header,
    );
    t.result("fork a onto a-fork", s2.fork("a", None, "a-fork"), header);
    for seq in 0..=22 {
        t.result(
            &format!("read_from a-fork-2 {seq}"),
            s2.read_from("a-fork-2", seq),
            |t, e| format!("{:?}", t.events(&e)),
        );
    }
    t.result("delete b", s2.delete("b"), |_, ()| "ok".into());
    t.result("delete b again", s2.delete("b"), |_, ()| "ok".into());
    t.result("load c abandoned", s2.load("c"), |t, v| t.view(v));
    t.result("list", s2.list(), |t, l| t.list(l));
    drop(s2);

    let s3 = fx.open();
    for id in ["a", "a-fork", "a-fork-2", "b", "c"] {
        t.result(&format!("final load {id}"), s3.load(id), |t, v| t.view(v));
    }
    t.result("final list", s3.list(), |t, l| t.list(l));
    t.lines
}

fn differential<A: Fixture, B: Fixture>() {
    let (a, b) = (script::<A>(), script::<B>());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "step {i}: {} vs {}", A::name(), B::name());
    }
    assert_eq!(a.len(), b.len());
    // The script ran to its end rather than failing early everywhere.
    assert_eq!(a.len(), 90, "{a:#?}");
    assert!(a.last().unwrap().starts_with("final list: ["), "{a:#?}");
}

mod differential {
    use super::{MemoryFixture, SqliteFixture, WalFixture};

    #[test]
    fn wal_matches_memory() {
        super::differential::<MemoryFixture, WalFixture>();
    }

    #[test]
    fn sqlite_matches_memory() {
        super::differential::<MemoryFixture, SqliteFixture>();
    }
}
