//! Tests of the SQLite backend's own rules: schema ownership, recovery
//! classification of rows, stale writers and repairs, seeking reads, the
//! policy kept in the incarnation, and the writer lock. Real database files
//! in temporary directories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use super::*;
use crate::contract::Tracker;
use crate::scan::{CutReason, LogState};
use crate::store::{Store, StoreOptions};

fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("s.db")
}

fn store(path: &Path) -> Store {
    Store::open_sqlite(path, SqliteOptions::default(), StoreOptions::default()).unwrap()
}

fn ev(kind: &str, seq: u64, data: &str) -> Event {
    Event::new(kind, seq, seq as i64 + 1, data).unwrap()
}

fn text_chunk(seq: u64, turn: u64, text: &str) -> Event {
    ev(
        "assistant/chunk",
        seq,
        &format!(
            r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
        ),
    )
}

/// Turn `turn` starting at `seq`: start, step, `chunks` text chunks, step
/// end, turn end.
fn turn(seq: u64, turn: u64, chunks: u64, end: bool) -> Vec<Event> {
    let mut out = vec![
        ev("turn/start", seq, &format!(r#"{{"turn":{turn}}}"#)),
        ev(
            "step/start",
            seq + 1,
            &format!(r#"{{"turn":{turn},"step":1}}"#),
        ),
    ];
    for i in 0..chunks {
        out.push(text_chunk(seq + 2 + i, turn, &format!("c{i}")));
    }
    if end {
        let s = seq + 2 + chunks;
        out.push(ev("step/end", s, &format!(r#"{{"turn":{turn},"step":1}}"#)));
        out.push(ev(
            "turn/end",
            s + 1,
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        ));
    }
    out
}

/// A SQLite store in a fresh temporary directory holding session `a`,
/// appended batch by batch (the directory lives as long as the guard).
fn with_session(batches: &[Vec<Event>]) -> (tempfile::TempDir, PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let s = store(&path);
    s.create(SessionHeader::new("a", 1)).unwrap();
    for batch in batches {
        s.append("a", batch).unwrap();
    }
    (dir, path, s)
}

fn file_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

fn physical(path: &Path, id: &str) -> Vec<(i64, i64, String, Option<i64>)> {
    let conn = open_0600(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT rowid, seq, type, ignorable FROM events WHERE session_id = ?1 ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn raw_insert(path: &Path, id: &str, seq: i64, kind: &str, data: &str, ignorable: Option<i64>) {
    open_0600(path)
        .unwrap()
        .execute(
            "INSERT INTO events (session_id, seq, type, time, data, ignorable) \
             VALUES (?1, ?2, ?3, ?2, ?4, ?5)",
            rusqlite::params![id, seq, kind, data, ignorable],
        )
        .unwrap();
}

// -- schema and identity -------------------------------------------------------

#[test]
fn a_pristine_file_gets_schema_and_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let backend = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    let conn = open_0600(&path).unwrap();
    let int = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(int("PRAGMA application_id"), 0x4453_4850);
    assert_eq!(int("PRAGMA user_version"), 17);
    let store_id: String = conn
        .query_row("SELECT store_id FROM persistence_state", [], |r| r.get(0))
        .unwrap();
    assert!(schema::is_uuid(&store_id), "{store_id}");
    assert!(backend.identity().ends_with(&format!(":store:{store_id}")));
    assert!(backend.identity().starts_with("file:"));
    #[cfg(unix)]
    {
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }
    // Reopening keeps the identity.
    drop(backend);
    let again = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    assert!(again.identity().ends_with(&format!(":store:{store_id}")));
}

#[test]
fn every_journal_mode_opens_and_memory_reports_memory() {
    for mode in JournalMode::ALL {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            journal_mode: mode,
            ..SqliteOptions::default()
        };
        let path = db(&dir);
        let s = Store::open_sqlite(&path, options.clone(), StoreOptions::default()).unwrap();
        s.create(SessionHeader::new("a", 1)).unwrap();
        s.append("a", &turn(0, 1, 1, true)).unwrap();
        drop(s);
        // Only WAL is a property of the file; the rollback modes are the
        // connection's, and a fresh connection reports the default.
        let got: String = open_0600(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        let expected = if mode == JournalMode::Wal {
            "wal"
        } else {
            "delete"
        };
        assert_eq!(got, expected);
        let again = Store::open_sqlite(&path, options, StoreOptions::default()).unwrap();
        assert_eq!(again.load("a").unwrap().events, turn(0, 1, 1, true));
    }
    let memory = Store::open_sqlite(
        ":memory:",
        SqliteOptions::default(),
        StoreOptions::default(),
    )
    .unwrap();
    memory.create(SessionHeader::new("m", 1)).unwrap();
    memory.append("m", &turn(0, 1, 0, false)).unwrap();
    assert!(
        memory
            .backend()
            .revision("m")
            .unwrap()
            .unwrap()
            .starts_with("memory:store:")
    );
    assert!(matches!(
        memory.backend().open("m"),
        Err(Error::Locked { .. })
    ));
}

/// Every refused database is left byte for byte as it was.
#[test]
fn foreign_databases_are_refused_before_anything_changes() {
    type Build = Box<dyn Fn(&Connection)>;
    let cases: Vec<(&str, Build, &str)> = vec![
        (
            "unversioned",
            Box::new(|c| c.execute_batch("CREATE TABLE notes (x)").unwrap()),
            "unversioned schema or application identity",
        ),
        (
            "app id only",
            Box::new(|c| c.execute_batch("PRAGMA application_id = 7").unwrap()),
            "unversioned schema or application identity",
        ),
        (
            "user_version 16",
            Box::new(|c| {
                c.execute_batch(schema::SCHEMA_SQL).unwrap();
                c.execute_batch("PRAGMA application_id = 1146308688; PRAGMA user_version = 16")
                    .unwrap();
            }),
            "schema version 16, incompatible with this build (17)",
        ),
        (
            "foreign app id",
            Box::new(|c| {
                c.execute_batch(schema::SCHEMA_SQL).unwrap();
                c.execute_batch("PRAGMA application_id = 42; PRAGMA user_version = 17")
                    .unwrap();
            }),
            "application id 42, expected 1146308688",
        ),
        (
            "extra column",
            Box::new(|c| {
                c.execute_batch(&schema::SCHEMA_SQL.replace(
                    "agent_preset     TEXT,",
                    "agent_preset     TEXT,\n  runtime_profile  TEXT,",
                ))
                .unwrap();
                c.execute_batch("PRAGMA application_id = 1146308688; PRAGMA user_version = 17")
                    .unwrap();
            }),
            "unexpected: [table sessions: CREATE TABLE sessions ( id TEXT PRIMARY KEY",
        ),
        (
            "not STRICT",
            Box::new(|c| {
                let sql = schema::SCHEMA_SQL.replacen(") STRICT;", ");", 2);
                c.execute_batch(&sql).unwrap();
                c.execute_batch("PRAGMA application_id = 1146308688; PRAGMA user_version = 17")
                    .unwrap();
            }),
            "does not contain the required schema objects",
        ),
        (
            "extra object",
            Box::new(|c| {
                c.execute_batch(schema::SCHEMA_SQL).unwrap();
                c.execute_batch(
                    "CREATE INDEX events_by_type ON events(type); \
                     PRAGMA application_id = 1146308688; PRAGMA user_version = 17",
                )
                .unwrap();
            }),
            "unexpected: [index events_by_type: CREATE INDEX events_by_type ON events(type)]; missing: []",
        ),
    ];
    for (name, build, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = db(&dir);
        build(&open_0600(&path).unwrap());
        let before = file_bytes(&path);
        let err = SqliteBackend::open(&path, SqliteOptions::default()).unwrap_err();
        let Error::Unsupported { path: at, detail } = &err else {
            panic!("{name}: expected Unsupported, got {err:?}")
        };
        assert_eq!(at, &path, "{name}");
        assert!(detail.contains(expected), "{name}: {detail}");
        assert_eq!(file_bytes(&path), before, "{name}: the file changed");
    }
    // Not a database at all.
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    #[cfg(unix)]
    chmod(&path, 0o600);
    let err = SqliteBackend::open(&path, SqliteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("not an SQLite database"), "{err}");
    assert_eq!(file_bytes(&path), vec![b'x'; 8192]);
    // A directory.
    let err = SqliteBackend::open(dir.path(), SqliteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("must be a file"), "{err}");
}

#[test]
fn ownership_is_checked_again_at_every_mutation() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true)]);
    let other = open_0600(&path).unwrap();
    other.execute_batch("PRAGMA user_version = 18").unwrap();
    let err = s.append("a", &turn(4, 2, 0, true)).unwrap_err();
    assert!(
        err.to_string()
            .contains("schema changed before mutation (expected 17, got 18)"),
        "{err}"
    );
    other
        .execute_batch("PRAGMA user_version = 17; PRAGMA application_id = 5")
        .unwrap();
    let err = s.append("a", &turn(4, 2, 0, true)).unwrap_err();
    assert!(
        err.to_string()
            .contains("application id changed before mutation"),
        "{err}"
    );
    other
        .execute_batch("PRAGMA application_id = 1146308688; ALTER TABLE sessions ADD COLUMN x TEXT")
        .unwrap();
    let err = s.append("a", &turn(4, 2, 0, true)).unwrap_err();
    assert!(err.to_string().contains("required schema objects"), "{err}");
    assert_eq!(physical(&path, "a").len(), 4);
}

// -- rows and recovery ---------------------------------------------------------------

#[test]
fn chunk_runs_pack_per_batch_and_earlier_rows_never_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let s = store(&path);
    s.create(SessionHeader::new("a", 1)).unwrap();
    let log = turn(0, 1, 100, true);
    for part in [&log[..3], &log[3..4], &log[4..]] {
        let before = physical(&path, "a");
        s.append("a", part).unwrap();
        let after = physical(&path, "a");
        assert_eq!(&after[..before.len()], before);
    }
    let rows = physical(&path, "a");
    // start, step, [chunk], [chunk], one packed row of 98, step end, turn end.
    assert_eq!(rows.len(), 7);
    assert_eq!(
        rows.iter()
            .filter(|r| r.3 == Some(0))
            .map(|r| (r.1, r.2.as_str()))
            .collect::<Vec<_>>(),
        [(4, "text-chunks")]
    );
    drop(s);
    let s = store(&path);
    assert_eq!(s.inspect("a").unwrap().events, log);
    for from in [0, 2, 25, 101, 103, 104, 105] {
        assert_eq!(
            s.read_from("a", from).unwrap(),
            log[(from as usize).min(104)..],
            "{from}"
        );
    }
}

#[test]
fn a_bad_row_before_the_last_turn_end_is_corruption() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true), turn(4, 2, 0, true)]);
    drop(s);
    open_0600(&path)
        .unwrap()
        .execute(
            "UPDATE events SET data = '{\"turn\":1' WHERE session_id = 'a' AND seq = 2",
            [],
        )
        .unwrap();
    let s = store(&path);
    let err = s.inspect("a").unwrap_err();
    let c = err.corruption().expect("corruption");
    assert_eq!(
        (c.path.as_path(), c.offset, c.seq),
        (path.as_path(), 2, Some(2))
    );
    assert!(
        c.reason.contains("invalid committed row (its seq column is 2) at seq 2: data is not valid JSON: unexpected end of input at byte 9 [incomplete-record]; a later row holds a turn/end"),
        "{}",
        c.reason
    );
    assert!(s.load("a").unwrap_err().corruption().is_some());
    // Opening a writer reads the whole session: a cold append is refused too.
    assert!(
        s.append("a", &turn(8, 3, 0, true))
            .unwrap_err()
            .corruption()
            .is_some()
    );
    assert_eq!(physical(&path, "a").len(), 8);
    assert!(s.read_from("a", 0).unwrap_err().corruption().is_some());
    // A seek past the damage reads only rows it can vouch for.
    assert_eq!(s.read_from("a", 4).unwrap(), turn(4, 2, 0, true));
    let list = s.list().unwrap();
    assert_eq!(
        list[0].state,
        LogState::Clean,
        "a listing reads from the commit row on"
    );
    assert_eq!(s.verify("a").unwrap().state, LogState::Corrupt);

    // A gap before the last turn/end is corruption too.
    open_0600(&path)
        .unwrap()
        .execute("DELETE FROM events WHERE session_id = 'a' AND seq = 2", [])
        .unwrap();
    let err = s.inspect("a").unwrap_err();
    let c = err.corruption().unwrap();
    assert_eq!((c.offset, c.seq), (2, Some(2)));
    assert!(
        c.reason
            .contains("row holds seq 3, expected 2 [invalid-record]"),
        "{}",
        c.reason
    );
}

#[test]
fn bad_rows_after_the_last_turn_end_are_a_torn_tail_that_repair_deletes() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true), turn(4, 2, 1, false)]);
    drop(s);
    // A valid-looking row after a gap, then garbage: all of it is torn.
    raw_insert(&path, "a", 8, "user/message", "{}", None);
    raw_insert(&path, "a", 9, "assistant/chunk", "{not valid json", None);
    let s = store(&path);
    let rev = s.revision("a").unwrap();
    let view = s.inspect("a").unwrap();
    assert_eq!(view.state, LogState::Torn);
    let cut = view.cut.clone().unwrap();
    assert_eq!(
        (cut.offset, cut.seq, cut.len, cut.reason),
        (7, 7, 2, CutReason::Invalid)
    );
    assert!(
        cut.detail.contains("row holds seq 8, expected 7"),
        "{}",
        cut.detail
    );
    assert_eq!(view.stored, 7);
    assert_eq!(
        view.events[7..]
            .iter()
            .map(Event::event_type)
            .collect::<Vec<_>>(),
        ["step/end", "turn/end"]
    );
    let summary = &s.list().unwrap()[0];
    assert_eq!((summary.state, summary.events), (LogState::Torn, 7));
    assert_eq!(s.revision("a").unwrap(), rev, "reads write nothing");
    let loaded = s.load("a").unwrap();
    assert_eq!(loaded.events, view.events);
    assert_ne!(s.revision("a").unwrap(), rev);
    assert_eq!(
        physical(&path, "a").iter().map(|r| r.1).collect::<Vec<_>>(),
        (0..9).collect::<Vec<_>>()
    );
    drop(s);
    let s = store(&path);
    assert_eq!(s.verify("a").unwrap().state, LogState::Clean);
    assert_eq!(s.append("a", &turn(9, 3, 0, true)).unwrap().next_seq, 13);
}

#[test]
fn a_malformed_packed_tail_is_one_removable_row() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true), turn(4, 2, 5, false)]);
    drop(s);
    open_0600(&path)
        .unwrap()
        .execute(
            "UPDATE events SET data = '{\"turn\":2}' WHERE session_id = 'a' AND ignorable = 0",
            [],
        )
        .unwrap();
    let s = store(&path);
    let view = s.inspect("a").unwrap();
    let cut = view.cut.clone().unwrap();
    assert_eq!((cut.seq, cut.len, cut.reason), (6, 1, CutReason::Invalid));
    assert!(
        cut.detail.starts_with("malformed text-chunks storage row"),
        "{}",
        cut.detail
    );
    // The seek read fails closed: a malformed predecessor that may cover
    // the seq hides what follows it.
    assert_eq!(s.read_from("a", 8).unwrap(), []);
    assert_eq!(s.read_from("a", 4).unwrap(), turn(4, 2, 0, false));
    s.load("a").unwrap();
    assert_eq!(
        s.read_from("a", 4)
            .unwrap()
            .iter()
            .map(Event::event_type)
            .collect::<Vec<_>>(),
        ["turn/start", "step/start", "step/end", "turn/end"]
    );
}

#[test]
fn debris_after_the_commit_point_is_cut_under_strict() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true)]);
    drop(s);
    // A plugin event between turns, written around the contract check.
    raw_insert(&path, "a", 4, "plan/mode", "{}", None);
    let s = store(&path);
    let view = s.inspect("a").unwrap();
    let cut = view.cut.unwrap();
    assert_eq!(
        (cut.offset, cut.seq, cut.len, cut.reason),
        (4, 4, 1, CutReason::Debris)
    );
    assert_eq!(s.read_from("a", 0).unwrap(), turn(0, 1, 0, true));
    s.load("a").unwrap();
    assert_eq!(physical(&path, "a").len(), 4);
}

#[test]
fn the_policy_is_kept_in_the_incarnation() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let s = store(&path);
    s.create(SessionHeader::new("strict", 1)).unwrap();
    s.create_with_policy(
        SessionHeader::new("lenient", 1),
        crate::contract::Policy::Lenient,
    )
    .unwrap();
    s.append("strict", &turn(0, 1, 0, true)).unwrap();
    s.append("lenient", &turn(0, 1, 0, true)).unwrap();
    let conn = open_0600(&path).unwrap();
    let incarnation = |id: &str| -> String {
        conn.query_row(
            "SELECT incarnation FROM sessions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
    };
    let (strict, lenient) = (incarnation("strict"), incarnation("lenient"));
    assert!(schema::is_uuid(&strict) && schema::is_uuid(&lenient));
    assert_eq!((&strict[14..15], &lenient[14..15]), ("8", "4"));
    let backend = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(
        backend.scan("strict").unwrap().unwrap().policy,
        crate::contract::Policy::Strict
    );
    assert_eq!(
        backend.scan("lenient").unwrap().unwrap().policy,
        crate::contract::Policy::Lenient
    );
    // The revision names the store, the incarnation and the count.
    assert_eq!(
        backend.revision("strict").unwrap().unwrap(),
        format!("{}:incarnation:{strict}:revision:1", backend.identity())
    );
}

// -- writers ----------------------------------------------------------------------------

#[test]
fn a_stale_writer_is_refused_and_the_winner_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let backend = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    let first = turn(0, 1, 0, true);
    let placements = Tracker::new(crate::contract::Policy::Strict)
        .accept_batch(&first)
        .unwrap();
    let mut writer = backend
        .create(
            &SessionHeader::new("a", 1),
            crate::contract::Policy::Strict,
            &first,
            &placements,
        )
        .unwrap();
    // Another process (ignoring the lock) appends turn 2.
    raw_insert(&path, "a", 4, "turn/start", r#"{"turn":2}"#, None);
    raw_insert(
        &path,
        "a",
        5,
        "turn/end",
        r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        None,
    );
    let winner = physical(&path, "a");
    let rev = backend.revision("a").unwrap();
    let err = writer
        .append(&turn(4, 2, 0, true), &[], crate::SyncMode::Turn)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "session \"a\": stored next seq is 6, but the batch starts at seq 4"
    );
    assert_eq!(physical(&path, "a"), winner);
    assert_eq!(backend.revision("a").unwrap(), rev);
}

#[test]
fn a_stale_repair_is_refused_and_the_winner_untouched() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true), turn(4, 2, 0, false)]);
    drop(s);
    raw_insert(&path, "a", 6, "assistant/chunk", "{", None);
    let backend = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    let stale = backend.scan("a").unwrap().unwrap();
    assert_eq!((stale.stored_len(), stale.closers.len()), (6, 2));
    // The winner repairs and appends.
    let s = store(&path);
    s.load("a").unwrap();
    s.append("a", &turn(8, 3, 0, true)).unwrap();
    drop(s);
    let winner = physical(&path, "a");
    let mut writer = backend.open("a").unwrap().unwrap();
    let err = writer.repair(&stale).unwrap_err();
    assert_eq!(
        err.to_string(),
        "session \"a\": repair is stale: the stored tail changed since it was scanned (stored \
         next seq is 12; the repair's closers start at seq 6)"
    );
    assert!(matches!(err, Error::StaleRepair { .. }));
    assert_eq!(physical(&path, "a"), winner);
}

#[test]
fn an_append_waits_for_a_writer_holding_begin_immediate() {
    let (_dir, path, s) = with_session(&[turn(0, 1, 0, true)]);
    let holder = {
        let path = path.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let conn = open_0600(&path).unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(150));
            conn.execute_batch("COMMIT").unwrap();
        });
        rx.recv().unwrap();
        handle
    };
    let started = std::time::Instant::now();
    assert_eq!(s.append("a", &turn(4, 2, 0, true)).unwrap().next_seq, 8);
    assert!(started.elapsed() >= Duration::from_millis(100));
    holder.join().unwrap();

    // With a short timeout the append fails, and writes nothing.
    let quick = Store::open_sqlite(
        &path,
        SqliteOptions {
            busy_timeout: Duration::from_millis(20),
            ..SqliteOptions::default()
        },
        StoreOptions::default(),
    )
    .unwrap();
    drop(s);
    let conn = open_0600(&path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = quick.append("a", &turn(8, 3, 0, true)).unwrap_err();
    assert!(err.to_string().contains("database is locked"), "{err}");
    conn.execute_batch("COMMIT").unwrap();
    assert_eq!(physical(&path, "a").len(), 8);
    assert_eq!(
        quick.append("a", &turn(8, 3, 0, true)).unwrap().next_seq,
        12
    );
}

#[test]
fn one_writer_per_session_across_backends() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let one = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    let two = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    let first = turn(0, 1, 0, true);
    let placements = Tracker::new(crate::contract::Policy::Strict)
        .accept_batch(&first)
        .unwrap();
    let writer = one
        .create(
            &SessionHeader::new("a", 1),
            crate::contract::Policy::Strict,
            &first,
            &placements,
        )
        .unwrap();
    // The lock is a byte of the database itself: nothing is created for it.
    let lock = one.lock_path("a");
    assert_eq!(lock, path);
    assert_eq!(dir_entries(&dir), ["s.db", "s.db-shm", "s.db-wal"]);
    // The holder is this process, for its own backend (the in-process
    // registry) and for another one (the OFD lock refuses it; the
    // process-wide list of held bytes names the holder).
    for backend in [&one, &two] {
        match backend.open("a") {
            Err(Error::Locked { id, path, holder }) => {
                assert_eq!(
                    (id.as_str(), path, holder),
                    ("a", lock.clone(), Some(std::process::id()))
                )
            }
            Err(other) => panic!("expected Locked, got {other:?}"),
            Ok(_) => panic!("expected Locked, got a writer"),
        }
    }
    // Another session of the same database is not blocked.
    let other = turn(0, 1, 0, true);
    let b = two
        .create(
            &SessionHeader::new("b", 1),
            crate::contract::Policy::Strict,
            &other,
            &placements,
        )
        .unwrap();
    drop(b);
    drop(writer);
    let writer = two.open("a").unwrap().unwrap();
    assert!(matches!(
        one.open("a"),
        Err(Error::Locked { holder: Some(pid), .. }) if pid == std::process::id()
    ));
    drop(writer);
    assert!(two.delete("a").unwrap());
    assert!(!two.exists("a").unwrap());
    drop((one, two));
    // SQLite checkpoints and removes its -wal and -shm when the last
    // connection closes: only the database is left.
    assert_eq!(dir_entries(&dir), ["s.db"]);
}

/// The names in `dir`, sorted.
fn dir_entries(dir: &tempfile::TempDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Whatever turnwal does to a database — create, append, hold a writer,
/// recover, delete — the directory holds exactly what upstream's SQLite
/// store would: the database, and in `wal` mode SQLite's `-wal` and `-shm`
/// while a connection is open (SQLite removes them when the last one
/// closes); in `delete` mode the database alone (its journal lives only
/// inside a transaction). Writer locks create nothing.
#[test]
fn a_store_holds_exactly_sqlites_files() {
    for (mode, open) in [
        (JournalMode::Wal, &["s.db", "s.db-shm", "s.db-wal"][..]),
        (JournalMode::Delete, &["s.db"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = db(&dir);
        let options = SqliteOptions {
            journal_mode: mode,
            ..SqliteOptions::default()
        };
        let open_store =
            || Store::open_sqlite(&path, options.clone(), StoreOptions::default()).unwrap();
        let closed = ["s.db"];

        let s = open_store();
        assert_eq!(dir_entries(&dir), open, "{mode:?}: opened");
        s.create(SessionHeader::new("a", 1)).unwrap();
        s.append("a", &turn(0, 1, 2, true)).unwrap();
        // Its writer holds "a" now (the store keeps it), and "b" too.
        s.create(SessionHeader::new("b", 1)).unwrap();
        s.append("b", &turn(0, 1, 0, true)).unwrap();
        s.append("a", &turn(6, 2, 1, false)).unwrap();
        assert_eq!(dir_entries(&dir), open, "{mode:?}: writers held");
        drop(s);
        assert_eq!(dir_entries(&dir), closed, "{mode:?}: closed");

        // Turn 2 is open: recovery closes it.
        let s = open_store();
        let report = s.recover("a", false).unwrap();
        assert!(report.committed && !report.closers.is_empty(), "{report:?}");
        assert_eq!(report.quarantine, None);
        assert_eq!(dir_entries(&dir), open, "{mode:?}: recovered");
        s.delete("a").unwrap();
        s.delete("b").unwrap();
        assert!(s.list().unwrap().is_empty());
        assert_eq!(dir_entries(&dir), open, "{mode:?}: deleted");
        drop(s);
        assert_eq!(dir_entries(&dir), closed, "{mode:?}: closed at the end");
    }
}

/// An in-memory database takes no file lock; its sessions still have one
/// writer each.
#[test]
fn an_in_memory_database_takes_no_file_lock() {
    let backend = SqliteBackend::open(":memory:", SqliteOptions::default()).unwrap();
    assert!(backend.shared.lock_file.is_none());
    assert_eq!(backend.lock_path("a"), PathBuf::from(":memory:#a"));
    let first = turn(0, 1, 0, true);
    let placements = Tracker::new(crate::contract::Policy::Strict)
        .accept_batch(&first)
        .unwrap();
    let create = |id: &str| {
        backend.create(
            &SessionHeader::new(id, 1),
            crate::contract::Policy::Strict,
            &first,
            &placements,
        )
    };
    let a = create("a").unwrap();
    let b = create("b").unwrap();
    match backend.open("a") {
        Err(Error::Locked { id, path, holder }) => assert_eq!(
            (id.as_str(), path, holder),
            ("a", PathBuf::from(":memory:#a"), Some(std::process::id()))
        ),
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
    drop((a, b));
    assert!(backend.open("a").unwrap().is_some());
}

#[test]
fn lock_offsets_are_fnv1a64_in_the_region() {
    // FNV-1a 64 reference values (the offset must not change between builds).
    assert_eq!(super::lock::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(super::lock::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(super::lock::fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    for id in ["", "a", "s", "session-\u{e9}", &"x".repeat(1000)] {
        let at = SqliteBackend::lock_offset(id);
        assert!(at > 1 << 62 && at < (1 << 63) - 1, "{id:?}: {at:#x}");
        assert_eq!(
            at,
            (1 << 62) + 1 + super::lock::fnv1a64(id.as_bytes()) % ((1 << 62) - 2)
        );
    }
    assert_eq!(SqliteBackend::lock_offset("a"), 0x6f63_dc4c_8601_ec91);
}

/// A database this process cannot write takes no writer lock (it would need
/// a descriptor open for writing); its writes fail as read-only.
#[cfg(unix)]
#[test]
fn a_read_only_database_takes_no_file_lock() {
    use std::os::unix::fs::PermissionsExt;
    if unsafe { libc::geteuid() } == 0 {
        return; // root writes a 0400 file anyway
    }
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let s = store(&path);
    s.create(SessionHeader::new("a", 1)).unwrap();
    drop(s);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
    let backend = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
    assert!(backend.shared.lock_file.is_none());
    let writer = backend.open("a").unwrap().unwrap();
    drop(writer);
    assert_eq!(dir_entries(&dir), ["s.db"]);
}

/// The example of docs/SQLITE.md, "Recovery".
#[test]
fn the_documented_example() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let s = store(&path);
    s.create(SessionHeader::new("s", 1)).unwrap();
    let mut turn1 = vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("user/message", 1, r#"{"id":"u1","text":"hi"}"#),
        ev("step/start", 2, r#"{"turn":1,"step":1}"#),
    ];
    for (i, text) in ["Hel", "lo", "!"].iter().enumerate() {
        turn1.push(text_chunk(3 + i as u64, 1, text));
    }
    turn1.push(ev("step/end", 6, r#"{"turn":1,"step":1}"#));
    turn1.push(ev(
        "turn/end",
        7,
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ));
    s.append("s", &turn1).unwrap();
    s.append("s", &turn(8, 2, 0, false)).unwrap();
    drop(s);
    raw_insert(
        &path,
        "s",
        10,
        "assistant/chunk",
        r#"{"turn":2,"step":1,"chunk":{"type":"text-de"#,
        None,
    );
    let conn = open_0600(&path).unwrap();
    let packed: String = conn
        .query_row(
            "SELECT data FROM events WHERE seq = 3 AND ignorable = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        packed,
        r#"{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["Hel","lo","!"]}"#
    );
    let s = store(&path);
    let view = s.inspect("s").unwrap();
    let cut = view.cut.clone().unwrap();
    assert_eq!(
        (cut.offset, cut.seq, cut.len, cut.reason),
        (8, 10, 1, CutReason::Incomplete)
    );
    assert_eq!(
        view.events[10..]
            .iter()
            .map(Event::to_json)
            .collect::<Vec<_>>(),
        [
            r#"{"type":"step/end","seq":10,"time":10,"data":{"turn":2,"step":1}}"#,
            r#"{"type":"turn/end","seq":11,"time":10,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#
        ]
    );
    s.load("s").unwrap();
    assert_eq!(
        physical(&path, "s").iter().map(|r| r.1).collect::<Vec<_>>(),
        [0, 1, 2, 3, 6, 7, 8, 9, 10, 11]
    );
    // The same bad row before the commit row: corruption at row 1, seq 1.
    drop(s);
    conn.execute("UPDATE events SET data = '{\"id\":' WHERE seq = 1", [])
        .unwrap();
    let err = store(&path).inspect("s").unwrap_err();
    let c = err.corruption().unwrap();
    assert_eq!((c.offset, c.seq), (1, Some(1)));
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

// POSIX owners and modes: Windows has ACLs instead (docs/PLATFORMS.md).
#[cfg(unix)]
#[test]
fn files_another_user_could_tamper_with_are_refused_as_upstream_does() {
    // A database with group or other permission bits.
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    drop(SqliteBackend::open(&path, SqliteOptions::default()).unwrap());
    chmod(&path, 0o644);
    let before = file_bytes(&path);
    let err = SqliteBackend::open(&path, SqliteOptions::default()).unwrap_err();
    let Error::Unsupported { path: at, detail } = &err else {
        panic!("expected Unsupported, got {err:?}")
    };
    assert_eq!(at, &path);
    assert!(detail.contains("(mode 644); chmod 600 it"), "{detail}");
    assert_eq!(file_bytes(&path), before);
    chmod(&path, 0o600);
    drop(SqliteBackend::open(&path, SqliteOptions::default()).unwrap());

    // A symlink to a database.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let err = SqliteBackend::open(&link, SqliteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("not a symlink"), "{err}");

    // A directory others can write to: nothing is created in it.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o777);
    let inside = shared.join("s.db");
    let err = SqliteBackend::open(&inside, SqliteOptions::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("writable by group or others (mode 777)"),
        "{err}"
    );
    assert!(!inside.exists());

    // A missing directory is created 0700.
    let fresh = dir.path().join("a/b/s.db");
    drop(SqliteBackend::open(&fresh, SqliteOptions::default()).unwrap());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fresh.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// Opens (creating it 0600 if absent, as upstream creates its databases) a
/// plain rusqlite connection to `path`.
fn open_0600(path: impl AsRef<std::path::Path>) -> rusqlite::Result<rusqlite::Connection> {
    let path = path.as_ref();
    let _ = crate::storage::private_file(std::fs::OpenOptions::new().write(true).create_new(true))
        .open(path);
    rusqlite::Connection::open(path)
}
