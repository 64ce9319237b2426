//! `loadStored`'s document from a SQLite store's rows as stored
//! (`Store::stored_records`) against the one its decoded events give
//! (`load_stored_view`, the path every other backend takes): byte for byte
//! the same, for packed runs, runs split across batches and rows, scalar
//! chunks, runs broken by ignorable, time, index, step, kind, id and name
//! changes, open turns, torn and debris tails, corrupt committed rows,
//! event types named like rows, and packed rows in another spelling.

use std::path::{Path, PathBuf};

use turnwal::backend::sqlite::{SqliteOptions, Synchronous};
use turnwal::upstream::chunks::Record;
use turnwal::{Error, Event, LogState, Policy, SessionHeader, Store, StoreOptions, SyncMode};

use super::{load_stored, stored_head, write_records};

/// The reference `loadStored` document: from the store's view, every event
/// decoded and packed again (what the binding once gave every store).
pub(crate) fn load_stored_view(store: &Store, id: &str) -> Result<Option<String>, Error> {
    let backend = store.backend();
    for _ in 0..16 {
        let Some(before) = store.revision(id)? else {
            return Ok(None);
        };
        let Some(view) = backend.view(id)? else {
            return Ok(None);
        };
        // Only a torn log needs the cut's position (for its marker).
        let cut = match view.state() {
            LogState::Torn => backend.scan(id)?.and_then(|scan| scan.cut),
            _ => None,
        };
        if store.revision(id)?.as_deref() != Some(before.as_str()) {
            continue; // written while read: read again
        }
        let stored = view.stored();
        let mut out = stored_head(
            &view.header().to_json(),
            &before,
            stored,
            cut.as_ref(),
            stored * 160,
        );
        write_records(&mut out, || view.iter().take(stored));
        return Ok(Some(
            String::from_utf8(out).expect("stored events are validated UTF-8"),
        ));
    }
    Err(Error::StaleRepair {
        id: id.to_owned(),
        detail: "the stored log kept changing while it was read (16 tries)".into(),
    })
}

/// turnwal's one generator ([`turnwal::rng::Rng`]), with the draws these
/// tests make.
struct Rng(turnwal::rng::Rng);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(turnwal::rng::Rng::new(seed))
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A store opened as the binding opens it, with `policy` for new sessions.
fn open(path: &Path, policy: Policy) -> Store {
    let sqlite = SqliteOptions {
        synchronous: Synchronous::Normal,
        ..SqliteOptions::default()
    };
    let options = StoreOptions {
        sync: SyncMode::Never,
        policy,
        require_known_types: false,
    };
    Store::open_sqlite(path, sqlite, options).unwrap()
}

/// Both documents of session `id`, which must be the same bytes (or the
/// same error); the number of packed rows the new path handed over as
/// stored.
fn same_document(store: &Store, id: &str) -> usize {
    let old = load_stored_view(store, id).map_err(|e| e.to_string());
    let new = load_stored(store, id).map_err(|e| e.to_string());
    assert_eq!(new, old, "session {id}");
    match store.stored_records(id) {
        Ok(Some(stored)) => stored
            .records()
            .filter(|r| matches!(r, Record::Packed(_)))
            .count(),
        _ => 0,
    }
}

/// A session being written: events with consecutive seqs and times that
/// mostly grow.
struct Log {
    events: Vec<Event>,
    time: i64,
}

impl Log {
    fn new() -> Log {
        Log {
            events: Vec::new(),
            time: 1_700_000_000_000,
        }
    }

    fn push(&mut self, kind: &str, data: &str) {
        let seq = self.events.len() as u64;
        self.time += 1;
        self.events
            .push(Event::new(kind, seq, self.time, data).unwrap());
    }

    fn turn_start(&mut self, turn: u64) {
        self.push("turn/start", &format!(r#"{{"turn":{turn}}}"#));
        self.push("step/start", &format!(r#"{{"turn":{turn},"step":1}}"#));
    }

    fn turn_end(&mut self, turn: u64) {
        self.push("step/end", &format!(r#"{{"turn":{turn},"step":1}}"#));
        self.push(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        );
    }

    fn text(&mut self, turn: u64, index: u64, kind: &str, text: &str) {
        let text = serde_json::to_string(text).unwrap();
        self.push(
            "assistant/chunk",
            &format!(
                r#"{{"turn":{turn},"step":1,"chunk":{{"type":"{kind}","index":{index},"text":{text}}}}}"#
            ),
        );
    }

    fn tool(&mut self, turn: u64, id: &str, name: Option<&str>, args: &str) {
        let name = name
            .map(|n| format!(r#","name":"{n}""#))
            .unwrap_or_default();
        let args = serde_json::to_string(args).unwrap();
        self.push(
            "assistant/chunk",
            &format!(
                r#"{{"turn":{turn},"step":1,"chunk":{{"type":"tool-call-delta","index":1,"id":"{id}"{name},"argumentsDelta":{args}}}}}"#
            ),
        );
    }

    /// Appends the events in batches of these sizes (the rest in one).
    fn store(self, store: &Store, id: &str, batches: &[usize]) {
        store
            .create(SessionHeader::new(id, 1_700_000_000_000).with_cwd("/w"))
            .unwrap();
        let mut at = 0usize;
        for &n in batches.iter().chain([&usize::MAX]) {
            let end = at.saturating_add(n).min(self.events.len());
            if end > at {
                store.append(id, &self.events[at..end]).unwrap();
            }
            at = end;
        }
    }
}

fn sql(path: &Path, statement: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(statement).unwrap();
}

fn db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    (dir, path)
}

#[test]
fn packed_runs_as_stored_give_the_same_document() {
    let (_dir, path) = db();
    let store = open(&path, Policy::Permissive);

    // Three turns of 17 chunks, a turn in a batch: one row a run.
    let mut log = Log::new();
    for turn in 1..=3 {
        log.turn_start(turn);
        for k in 0..17 {
            log.text(turn, 0, "text-delta", &format!("word {k} \n\"é\u{1}"));
        }
        log.push("assistant/message", r#"{"id":"m","text":"x"}"#);
        log.turn_end(turn);
    }
    log.store(&store, "packed", &[22, 22, 22]);
    assert_eq!(same_document(&store, "packed"), 3);

    // A run split across batches (a row of 5, 2 scalar rows, a row of 10,
    // 1 scalar row, a row of 30): one record.
    let mut log = Log::new();
    log.turn_start(1);
    for k in 0..48 {
        log.text(1, 0, "reasoning-delta", &format!("r{k}"));
    }
    log.turn_end(1);
    log.store(&store, "batches", &[7, 2, 10, 1, 30]);
    assert_eq!(same_document(&store, "batches"), 3);

    // 2,500 chunks in one batch: rows of 1024, 1024 and 452; one record.
    let mut log = Log::new();
    log.turn_start(1);
    for k in 0..2_500 {
        log.tool(1, "call-1", Some("read"), &format!("{{\"k\":{k}}}"));
    }
    log.turn_end(1);
    log.store(&store, "long", &[]);
    assert_eq!(same_document(&store, "long"), 3);

    // 30 chunks of 100 KB: rows split at 1 MiB, their data zstd BLOBs.
    let mut log = Log::new();
    log.turn_start(1);
    for k in 0..30 {
        log.text(1, 0, "text-delta", &format!("{k}{}", "abc ".repeat(25_000)));
    }
    log.turn_end(1);
    log.store(&store, "big", &[]);
    assert!(same_document(&store, "big") >= 3);
}

#[test]
fn broken_runs_scalar_chunks_and_other_spellings() {
    let (_dir, path) = db();
    let store = open(&path, Policy::Permissive);
    let mut log = Log::new();
    log.turn_start(1);
    // Runs of 1 and 2, then breaks of every kind between runs of 3+.
    log.text(1, 0, "text-delta", "a");
    log.push("tool/call", r#"{"id":"t"}"#);
    log.text(1, 0, "text-delta", "b");
    log.text(1, 0, "text-delta", "c");
    log.push("tool/call", r#"{"id":"t"}"#);
    for k in 0..4 {
        log.text(1, 0, "text-delta", &format!("d{k}"));
    }
    // Ignorable.
    let seq = log.events.len() as u64;
    log.events.push(
        Event::new(
            "assistant/chunk",
            seq,
            log.time,
            r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"i"}}"#,
        )
        .unwrap()
        .with_ignorable(),
    );
    for k in 0..4 {
        log.text(1, 0, "text-delta", &format!("e{k}"));
    }
    // Time jumps past 2^53 apart, and back.
    log.time = -8_000_000_000_000_000;
    for k in 0..4 {
        log.text(1, 0, "text-delta", &format!("f{k}"));
    }
    log.time = 8_000_000_000_000_000;
    for k in 0..4 {
        log.text(1, 0, "text-delta", &format!("g{k}"));
    }
    log.time = 1_700_000_000_000;
    // Index, kind, id and name changes.
    for k in 0..4 {
        log.text(1, 1, "text-delta", &format!("h{k}"));
    }
    for k in 0..4 {
        log.text(1, 1, "reasoning-delta", &format!("j{k}"));
    }
    for (id, name) in [
        ("c1", Some("f")),
        ("c1", None),
        ("c2", None),
        ("c2", Some("g")),
    ] {
        for k in 0..3 {
            log.tool(1, id, name, &format!("{k}"));
        }
    }
    // Chunks that do not pack byte for byte, amid a run.
    for k in 0..3 {
        log.text(1, 1, "text-delta", &format!("k{k}"));
    }
    log.push(
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"\u0041"}}"#,
    );
    log.push(
        "assistant/chunk",
        r#"{"turn":1, "step":1,"chunk":{"type":"text-delta","index":1,"text":"l"}}"#,
    );
    for k in 0..3 {
        log.text(1, 1, "text-delta", &format!("\u{d7ff}m{k}"));
    }
    log.push(
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"\ud800"}}"#,
    );
    log.push(
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"\udc00"}}"#,
    );
    log.push(
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"n"}}"#,
    );
    log.turn_end(1);
    let batches: Vec<usize> = vec![3, 5, 9, 2, 14, 6, 11];
    log.store(&store, "broken", &batches);
    assert!(same_document(&store, "broken") > 5);

    // Packed rows upstream spelled otherwise (key order, escapes, spaces)
    // are decoded; the document is the same.
    let mut log = Log::new();
    for turn in 1..=4 {
        log.turn_start(turn);
        for k in 0..5 {
            log.text(turn, 0, "text-delta", &format!("A{k}"));
        }
        log.turn_end(turn);
    }
    log.store(&store, "spelled", &[9, 9, 9, 9]);
    let packed = same_document(&store, "spelled");
    sql(
        &path,
        r#"UPDATE events SET data = replace(data, '"A1"', '"\u0041\u0031"') WHERE session_id = 'spelled' AND seq = 2;
           UPDATE events SET data = replace(data, '{"turn":2,"step":1,', '{"step":1,"turn":2,') WHERE session_id = 'spelled' AND seq = 11;
           UPDATE events SET data = replace(data, ',"dt":', ', "dt": ') WHERE session_id = 'spelled' AND seq = 20;"#,
    );
    assert_eq!(same_document(&store, "spelled"), packed - 3);

    // An event named like a row: nothing packs.
    let mut log = Log::new();
    log.turn_start(1);
    for k in 0..5 {
        log.text(1, 0, "text-delta", &format!("t{k}"));
    }
    log.push("text-chunks", r#"{"plugin":true}"#);
    log.turn_end(1);
    log.store(&store, "tagged", &[]);
    let doc = load_stored(&store, "tagged").unwrap().unwrap();
    assert!(doc.contains(r#""packed":false"#));
    assert_eq!(same_document(&store, "tagged"), 1);
}

#[test]
fn open_torn_debris_and_corrupt_sessions() {
    let (_dir, path) = db();
    let store = open(&path, Policy::Permissive);
    let chunks = |log: &mut Log, turn: u64, n: usize| {
        for k in 0..n {
            log.text(turn, 0, "text-delta", &format!("{turn}.{k}"));
        }
    };

    // An open final turn whose tail holds packed rows.
    let mut log = Log::new();
    log.turn_start(1);
    chunks(&mut log, 1, 6);
    log.turn_end(1);
    log.turn_start(2);
    chunks(&mut log, 2, 8);
    log.store(&store, "open", &[10, 4, 3]);
    assert_eq!(same_document(&store, "open"), 1);
    let records = store.stored_records("open").unwrap().unwrap();
    assert_eq!(records.state(), turnwal::LogState::OpenTurn);
    assert!(!records.closers().is_empty());

    // Nothing committed yet: the whole log is the open turn.
    let mut log = Log::new();
    log.turn_start(1);
    chunks(&mut log, 1, 9);
    log.store(&store, "uncommitted", &[]);
    assert_eq!(same_document(&store, "uncommitted"), 0);

    // A torn tail: a packed row after the last turn/end that does not
    // decode, a scalar row that does not, a missing row.
    for (id, damage, stored) in [
        (
            "torn-packed",
            "UPDATE events SET data = '{\"turn\":2' WHERE session_id = 'torn-packed' AND seq = 14",
            14,
        ),
        (
            "torn-scalar",
            "UPDATE events SET data = '{\"id\":' WHERE session_id = 'torn-scalar' AND seq = 19",
            19,
        ),
        (
            "torn-gap",
            "DELETE FROM events WHERE session_id = 'torn-gap' AND seq = 13",
            13,
        ),
    ] {
        let mut log = Log::new();
        log.turn_start(1);
        chunks(&mut log, 1, 8);
        log.turn_end(1);
        log.turn_start(2);
        chunks(&mut log, 2, 5);
        log.push("assistant/message", r#"{"id":"m"}"#);
        log.store(&store, id, &[12]);
        sql(&path, damage);
        // The rows after the last turn/end are decoded (the turn contract
        // reads them); the packed row before it is handed over as stored.
        assert_eq!(same_document(&store, id), 1, "{id}");
        let doc = load_stored(&store, id).unwrap().unwrap();
        let marker = format!(r#""torn":{{"stored":{stored},"#);
        assert!(doc.contains(&marker), "{id}: {doc}");
    }

    // A corrupt committed row (a packed one, then a scalar one): both
    // refuse, with the same words.
    for (id, damage) in [
        (
            "corrupt-packed",
            "UPDATE events SET data = '{\"turn\":1' WHERE session_id = 'corrupt-packed' AND ignorable = 0",
        ),
        (
            "corrupt-scalar",
            "UPDATE events SET data = '{' WHERE session_id = 'corrupt-scalar' AND seq = 0",
        ),
    ] {
        let mut log = Log::new();
        log.turn_start(1);
        chunks(&mut log, 1, 8);
        log.turn_end(1);
        log.store(&store, id, &[]);
        sql(&path, damage);
        same_document(&store, id);
        assert!(load_stored(&store, id).is_err());
    }

    // Debris after the commit point (a strict session): cut in the marker.
    drop(store);
    let strict = open(&path, Policy::Strict);
    let mut log = Log::new();
    log.turn_start(1);
    chunks(&mut log, 1, 8);
    log.turn_end(1);
    log.store(&strict, "debris", &[]);
    sql(
        &path,
        r#"INSERT INTO events (session_id, seq, type, time, data) VALUES ('debris', 12, 'user/message', 1, '{"id":"u"}');"#,
    );
    assert_eq!(same_document(&strict, "debris"), 1);
    let doc = load_stored(&strict, "debris").unwrap().unwrap();
    assert!(doc.contains(r#""reason":"debris""#), "{doc}");

    // An absent session: null both ways.
    assert_eq!(load_stored(&strict, "nobody").unwrap(), None);
    same_document(&strict, "nobody");
}

#[test]
fn random_sessions_give_the_same_document() {
    let (_dir, path) = db();
    let store = open(&path, Policy::Permissive);
    let mut r = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut packed = 0;
    for s in 0..60 {
        let mut log = Log::new();
        let turns = 1 + r.below(6);
        for turn in 1..=turns as u64 {
            log.turn_start(turn);
            for _ in 0..r.below(4) {
                let (kind, n) = (r.below(4), r.below(30));
                let index = r.below(2) as u64;
                for k in 0..n {
                    match kind {
                        0 => log.text(turn, index, "text-delta", &format!("{k}\n")),
                        1 => log.text(turn, index, "reasoning-delta", &format!("{k}")),
                        2 => log.tool(turn, "c", r.chance(50).then_some("f"), &format!("{k}")),
                        _ => log.push("tool/result", r#"{"id":"c","output":1}"#),
                    }
                    if r.chance(3) {
                        log.time -= 50;
                    }
                }
            }
            if turn < turns as u64 || r.chance(60) {
                log.turn_end(turn);
            }
        }
        let mut batches = Vec::new();
        let mut left = log.events.len();
        while left > 0 {
            let n = 1 + r.below(40);
            batches.push(n);
            left = left.saturating_sub(n);
        }
        let id = format!("random-{s}");
        log.store(&store, &id, &batches);
        packed += same_document(&store, &id);
    }
    assert!(packed > 50, "{packed}");
}

/// The native part of `loadStored` on the throughput test's workload (a
/// 100,000-event session, 4,000 turns of 25 events, appended in batches of
/// 100) for a WAL and a SQLite store: the median of 9 warm reads each.
/// `cargo test -p turnwal-node --release -- --ignored --nocapture native_load_stored`
#[test]
#[ignore = "a timing, not a check: run by hand"]
fn native_load_stored_timings() {
    use std::time::Instant;
    let mut events = Vec::with_capacity(100_000);
    let mut time = 1_700_000_000_000i64;
    let mut push = |events: &mut Vec<turnwal::Event>, kind: &str, data: String| {
        let seq = events.len() as u64;
        time += 1;
        events.push(turnwal::Event::new(kind, seq, time, &data).unwrap());
    };
    let mut n = 0;
    while events.len() < 100_000 {
        n += 1;
        push(&mut events, "turn/start", format!(r#"{{"turn":{n}}}"#));
        push(
            &mut events,
            "user/message",
            format!(
                r#"{{"id":"user-{n}","role":"user","content":[{{"type":"text","text":"Please look at file {n} and summarize what changed since the last review."}}]}}"#
            ),
        );
        push(
            &mut events,
            "step/start",
            format!(r#"{{"turn":{n},"step":1}}"#),
        );
        for i in 0..17 {
            push(
                &mut events,
                "assistant/chunk",
                format!(
                    r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"token{i} "}}}}"#
                ),
            );
        }
        push(
            &mut events,
            "assistant/message",
            format!(
                r#"{{"turn":{n},"step":1,"message":{{"id":"assistant-{n}","role":"assistant","content":[{{"type":"text","text":"Reading the file."}},{{"type":"tool-call","toolCallId":"call-{n}","toolName":"read","input":"{{\"path\":\"src/file{n}.rs\"}}"}}]}},"usage":{{"inputTokens":{},"outputTokens":40}}}}"#,
                1200 + n
            ),
        );
        push(
            &mut events,
            "tool/call",
            format!(
                r#"{{"turn":{n},"step":1,"callId":"call-{n}","name":"read","arguments":"{{\"path\":\"src/file{n}.rs\"}}"}}"#
            ),
        );
        push(
            &mut events,
            "tool/result",
            format!(
                r#"{{"turn":{n},"step":1,"message":{{"id":"result-{n}","role":"tool","content":[{{"type":"tool-result","toolCallId":"call-{n}","output":"fn main() {{\n    println!(\"file {n}\");\n}}\n"}}]}}}}"#
            ),
        );
        push(
            &mut events,
            "step/end",
            format!(r#"{{"turn":{n},"step":1}}"#),
        );
        push(
            &mut events,
            "turn/end",
            format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let options = turnwal::StoreOptions {
        sync: turnwal::SyncMode::Never,
        policy: turnwal::Policy::Permissive,
        require_known_types: false,
    };
    let sqlite_options = turnwal::backend::sqlite::SqliteOptions {
        synchronous: turnwal::backend::sqlite::Synchronous::Normal,
        ..Default::default()
    };
    let stores = [
        (
            "WAL",
            turnwal::Store::open_with_options(dir.path().join("wal"), options).unwrap(),
        ),
        (
            "SQLite",
            turnwal::Store::open_sqlite(dir.path().join("s.db"), sqlite_options, options).unwrap(),
        ),
    ];
    for (_, store) in &stores {
        store.create(turnwal::SessionHeader::new("s", 1)).unwrap();
        for batch in events.chunks(100) {
            store.append("s", batch).unwrap();
        }
    }
    for (name, store) in &stores {
        let mut times = Vec::new();
        let mut len = 0;
        for _ in 0..9 {
            let start = Instant::now();
            len = super::load_stored(store, "s").unwrap().unwrap().len();
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "native loadStored {name:6}: median {:6.1} ms (min {:6.1}, max {:6.1}; {len} bytes)",
            times[4], times[0], times[8]
        );
    }
}

// ---------------------------------------------------------------------------
// The WAL store: chunk-run records handed over as stored
// ---------------------------------------------------------------------------

mod wal {
    //! `loadStored`'s document from a WAL store's chunk-run records as
    //! stored (`Store::stored_records`) against the one its decoded events give
    //! (`load_stored_view`): byte for byte the same, for version-1 logs,
    //! version-2 logs unsealed (a run record per batch, joined across
    //! batches) and compacted (runs joined inside sealed units), open turns
    //! with closers, torn tails, corrupt logs and runs in another spelling.

    use std::path::Path;
    use std::sync::Arc;

    use turnwal::backend::wal::format::{self, KIND_SEALED};
    use turnwal::backend::wal::{WalBackend, record, scan};
    use turnwal::upstream::chunks::Record;
    use turnwal::{Event, LogState, Policy, Store, StoreOptions, SyncMode};

    use super::super::{close_store, load_stored};
    use super::load_stored_view;
    use super::{Log, Rng};

    /// How sessions are written.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Wal {
        /// Version 1 (no run records).
        V1,
        /// Version 2, never sealed: one run record per batch's run.
        V2,
        /// Version 2, compacted after writing (every closed turn sealed
        /// into units inside the log).
        Sealed,
        /// Version 3 (the default), never sealed: plain records, as
        /// version 1 writes them.
        V3,
        /// Version 3, compacted after writing (every closed turn sealed
        /// into the session's archive).
        Archived,
    }

    const ALL: [Wal; 5] = [Wal::V1, Wal::V2, Wal::Sealed, Wal::V3, Wal::Archived];

    impl Wal {
        /// Whether appends write chunk-run records.
        fn packs_at_append(self) -> bool {
            matches!(self, Wal::V2 | Wal::Sealed)
        }

        /// Whether `put` seals the log.
        fn sealed(self) -> bool {
            matches!(self, Wal::Sealed | Wal::Archived)
        }
    }

    fn open(dir: &Path, policy: Policy, wal: Wal) -> Store {
        let backend = WalBackend::open(dir).unwrap();
        let backend = match wal {
            Wal::V1 => backend.creating_version(format::FORMAT_V1),
            Wal::V2 => backend
                .creating_version(format::FORMAT_V2)
                .sealing_by_itself(false),
            Wal::Sealed => backend.creating_version(format::FORMAT_V2),
            Wal::V3 => backend.sealing_by_itself(false),
            Wal::Archived => backend,
        };
        let options = StoreOptions {
            sync: SyncMode::Never,
            policy,
            require_known_types: false,
        };
        Store::with_backend(Arc::new(backend), options)
    }

    /// Stores `log` as session `id` in batches, compacting it (and closing
    /// it) for [`Wal::Sealed`] and [`Wal::Archived`].
    fn put(store: &Store, wal: Wal, log: Log, id: &str, batches: &[usize]) {
        log.store(store, id, batches);
        if wal.sealed() {
            store.compact(id).unwrap();
        }
        store.close(id).unwrap();
    }

    /// Both documents of session `id`, which must be the same bytes (or the
    /// same error); the number of runs the new path handed over as stored.
    fn same_document(store: &Store, id: &str) -> usize {
        let old = load_stored_view(store, id).map_err(|e| e.to_string());
        let new = load_stored(store, id).map_err(|e| e.to_string());
        assert_eq!(new, old, "session {id}");
        match store.stored_records(id) {
            Ok(Some(stored)) => stored
                .records()
                .filter(|r| matches!(r, Record::Packed(_)))
                .count(),
            _ => 0,
        }
    }

    fn log_path(store: &Store, id: &str) -> std::path::PathBuf {
        WalBackend::open(Path::new(&store.backend().location()))
            .unwrap()
            .log_path(id)
    }

    /// The file that holds session `id`'s sealed units under `wal`: its
    /// archive for [`Wal::Archived`], its log otherwise.
    fn units_path(store: &Store, wal: Wal, id: &str) -> std::path::PathBuf {
        let backend = WalBackend::open(Path::new(&store.backend().location())).unwrap();
        match wal {
            Wal::Archived => backend.archive_path(id),
            _ => backend.log_path(id),
        }
    }

    /// Every record of a log: offset, head.
    fn heads(bytes: &[u8]) -> Vec<(u64, format::RecordHead)> {
        let c = scan::scan_log(bytes, Path::new("x.twal")).unwrap();
        record::heads(bytes, c.frames.file.records_start, c.frames.valid_end).collect()
    }

    /// CRC-32 (IEEE), bit by bit.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    /// Changes the first record `pick` chooses with `change` (its length
    /// kept) and seals it with a valid checksum again: damage only a
    /// record's reader sees.
    fn rewrite(
        path: &Path,
        pick: impl Fn(&format::RecordHead) -> bool,
        change: impl FnOnce(&mut [u8]),
    ) {
        let mut bytes = std::fs::read(path).unwrap();
        let salt = format::decode_file_header(&bytes).unwrap().salt;
        let (at, head) = heads(&bytes)
            .into_iter()
            .find(|(_, h)| pick(h))
            .expect("a record to rewrite");
        let record = &mut bytes[at as usize..(at + head.record_len()) as usize];
        change(record);
        let mut body = salt.to_le_bytes().to_vec();
        body.extend_from_slice(&record[4..]);
        record[..4].copy_from_slice(&crc32(&body).to_le_bytes());
        std::fs::write(path, bytes).unwrap();
    }

    fn replace_in(record: &mut [u8], from: &str, to: &str) {
        assert_eq!(from.len(), to.len());
        let at = record
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .unwrap_or_else(|| panic!("{from} in the record"));
        record[at..at + from.len()].copy_from_slice(to.as_bytes());
    }

    fn chunks(log: &mut Log, turn: u64, n: usize) {
        for k in 0..n {
            log.text(turn, 0, "text-delta", &format!("{turn}.{k}"));
        }
    }

    #[test]
    fn packed_and_split_runs_give_the_same_document() {
        for wal in ALL {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), Policy::Permissive, wal);
            let runs = |n: usize| {
                if wal.packs_at_append() || wal.sealed() {
                    n
                } else {
                    0
                }
            };

            // Three turns of 17 chunks, a turn in a batch: one run each.
            let mut log = Log::new();
            for turn in 1..=3 {
                log.turn_start(turn);
                for k in 0..17 {
                    log.text(turn, 0, "text-delta", &format!("word {k} \n\"é\u{1}"));
                }
                log.push("assistant/message", r#"{"id":"m","text":"x"}"#);
                log.turn_end(turn);
            }
            put(&store, wal, log, "packed", &[22, 22, 22]);
            assert_eq!(same_document(&store, "packed"), runs(3), "{wal:?}");

            // A run split across batches (runs of 5, 2 single records, 10,
            // 1, 30): one packed row in the document; one run once sealed.
            let mut log = Log::new();
            log.turn_start(1);
            for k in 0..48 {
                log.text(1, 0, "reasoning-delta", &format!("r{k}"));
            }
            log.turn_end(1);
            put(&store, wal, log, "batches", &[7, 2, 10, 1, 30]);
            let expected = match wal {
                Wal::V1 | Wal::V3 => 0,
                Wal::V2 => 3,
                Wal::Sealed | Wal::Archived => 1,
            };
            assert_eq!(same_document(&store, "batches"), expected, "{wal:?}");

            // 2,500 tool-call chunks in one batch: runs of 1024, 1024, 452.
            let mut log = Log::new();
            log.turn_start(1);
            for k in 0..2_500 {
                log.tool(1, "call-1", Some("read"), &format!("{{\"k\":{k}}}"));
            }
            log.turn_end(1);
            put(&store, wal, log, "long", &[]);
            assert_eq!(same_document(&store, "long"), runs(3), "{wal:?}");

            // 30 chunks of 100 KB: runs split at 1 MiB.
            let mut log = Log::new();
            log.turn_start(1);
            for k in 0..30 {
                log.text(1, 0, "text-delta", &format!("{k}{}", "abc ".repeat(25_000)));
            }
            log.turn_end(1);
            put(&store, wal, log, "big", &[]);
            assert!(same_document(&store, "big") >= runs(3), "{wal:?}");

            // Breaks of every kind, ignorable and non-packing chunks, and an
            // event named like a row (nothing packs).
            let mut log = Log::new();
            log.turn_start(1);
            chunks(&mut log, 1, 4);
            let seq = log.events.len() as u64;
            log.events.push(
                Event::new(
                    "assistant/chunk",
                    seq,
                    log.time,
                    r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"i"}}"#,
                )
                .unwrap()
                .with_ignorable(),
            );
            chunks(&mut log, 1, 4);
            log.time = -8_000_000_000_000_000;
            chunks(&mut log, 1, 4);
            log.time = 8_000_000_000_000_000;
            chunks(&mut log, 1, 4);
            log.time = 1_700_000_000_000;
            for k in 0..4 {
                log.text(1, 1, "reasoning-delta", &format!("j{k}"));
            }
            for (id, name) in [("c1", Some("f")), ("c1", None), ("c2", Some("g"))] {
                for k in 0..3 {
                    log.tool(1, id, name, &format!("{k}"));
                }
            }
            log.push(
                "assistant/chunk",
                r#"{"turn":1, "step":1,"chunk":{"type":"text-delta","index":1,"text":"l"}}"#,
            );
            log.push(
                "assistant/chunk",
                r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"\ud800"}}"#,
            );
            log.turn_end(1);
            put(&store, wal, log, "broken", &[3, 5, 9, 2, 14, 6, 11]);
            assert!(same_document(&store, "broken") >= runs(4), "{wal:?}");

            let mut log = Log::new();
            log.turn_start(1);
            chunks(&mut log, 1, 5);
            log.push("text-chunks", r#"{"plugin":true}"#);
            log.turn_end(1);
            put(&store, wal, log, "tagged", &[]);
            let doc = load_stored(&store, "tagged").unwrap().unwrap();
            assert!(doc.contains(r#""packed":false"#), "{wal:?}");
            same_document(&store, "tagged");

            // An absent session: null both ways.
            assert_eq!(load_stored(&store, "nobody").unwrap(), None);
            same_document(&store, "nobody");
        }
    }

    #[test]
    fn open_torn_and_corrupt_sessions() {
        for wal in ALL {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), Policy::Permissive, wal);

            // An open final turn after closed ones, its tail holding runs:
            // closers are computed, not among the records.
            let mut log = Log::new();
            log.turn_start(1);
            chunks(&mut log, 1, 6);
            log.turn_end(1);
            log.turn_start(2);
            chunks(&mut log, 2, 8);
            put(&store, wal, log, "open", &[10, 4, 3]);
            same_document(&store, "open");
            let records = store.stored_records("open").unwrap().unwrap();
            assert_eq!(records.state(), LogState::OpenTurn, "{wal:?}");
            assert!(!records.closers().is_empty());
            assert_eq!(records.stored(), 20);

            // Nothing committed: the whole log is the open turn.
            let mut log = Log::new();
            log.turn_start(1);
            chunks(&mut log, 1, 9);
            put(&store, wal, log, "uncommitted", &[]);
            same_document(&store, "uncommitted");

            // A torn tail after the last record (a run record in version 2,
            // a unit once sealed).
            for (id, cut) in [("torn", 7u64), ("torn-zeros", 0)] {
                let mut log = Log::new();
                log.turn_start(1);
                chunks(&mut log, 1, 8);
                log.turn_end(1);
                log.turn_start(2);
                chunks(&mut log, 2, 5);
                put(&store, wal, log, id, &[12]);
                let path = log_path(&store, id);
                let bytes = std::fs::read(&path).unwrap();
                // Past the durable length (the proof's): a torn append, a
                // copy of the last record cut short, or zeros.
                let (at, head) = *heads(&bytes).last().unwrap();
                let mut torn = bytes.clone();
                if cut == 0 {
                    torn.extend_from_slice(&[0; 64]);
                } else {
                    torn.extend_from_slice(
                        &bytes[at as usize..(at + head.record_len() - cut) as usize],
                    );
                }
                std::fs::write(&path, torn).unwrap();
                same_document(&store, id);
                let doc = load_stored(&store, id).unwrap().unwrap();
                assert!(doc.contains(r#""torn":{"stored":"#), "{wal:?} {id}: {doc}");
            }

            // Corrupt logs: a record's bytes flipped under a valid
            // successor (the scan refuses), and, under a valid checksum, a
            // first record that does not decode, a run that does not expand
            // and a sealed unit's frame that does not decompress (the
            // readers refuse): both ways refuse with the same words.
            let corrupt = |id: &str, damage: &dyn Fn(&Path)| {
                let mut log = Log::new();
                log.turn_start(1);
                chunks(&mut log, 1, 8);
                log.turn_end(1);
                log.turn_start(2);
                chunks(&mut log, 2, 4);
                log.turn_end(2);
                put(&store, wal, log, id, &[6]);
                damage(&units_path(&store, wal, id));
                same_document(&store, id);
                assert!(load_stored(&store, id).is_err(), "{wal:?} {id}");
            };
            corrupt("flipped", &|path| {
                let mut bytes = std::fs::read(path).unwrap();
                let records = heads(&bytes);
                let (at, head) = records[1.min(records.len() - 1)];
                bytes[(at + head.record_len() / 2) as usize] ^= 0x40;
                std::fs::write(path, bytes).unwrap();
            });
            if wal == Wal::V2 {
                corrupt("run-mismatch", &|path| {
                    rewrite(
                        path,
                        |h| h.is_run(),
                        |r| replace_in(r, r#""dt":["#, r#""dx":["#),
                    );
                });
            }
            if wal.sealed() {
                corrupt("unit", &|path| {
                    rewrite(
                        path,
                        |h| h.is_sealed(),
                        |r| {
                            let n = r.len();
                            r[n / 2] ^= 0x55;
                        },
                    );
                });
            }
        }
    }

    /// A run record in another spelling than upstream's (key order) is
    /// expanded, not handed over; the document is the same.
    #[test]
    fn runs_in_another_spelling_are_expanded() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), Policy::Permissive, Wal::V2);
        let mut log = Log::new();
        for turn in 1..=3 {
            log.turn_start(turn);
            chunks(&mut log, turn, 5);
            log.turn_end(turn);
        }
        put(&store, Wal::V2, log, "spelled", &[9, 9, 9]);
        assert_eq!(same_document(&store, "spelled"), 3);
        rewrite(
            &log_path(&store, "spelled"),
            |h| h.is_run() && h.turn == 2,
            |r| replace_in(r, r#"{"turn":2,"step":1,"#, r#"{"step":1,"turn":2,"#),
        );
        assert_eq!(same_document(&store, "spelled"), 2);
        let doc = load_stored(&store, "spelled").unwrap().unwrap();
        assert!(
            doc.contains(r#"{"turn":2,"step":1,"index":0,"dt":"#),
            "{doc}"
        );
    }

    #[test]
    fn random_sessions_give_the_same_document() {
        for wal in ALL {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), Policy::Permissive, wal);
            let mut r = Rng::new(0x9e37_79b9_7f4a_7c15);
            let mut packed = 0;
            for s in 0..40 {
                let mut log = Log::new();
                let turns = 1 + r.below(6);
                for turn in 1..=turns as u64 {
                    log.turn_start(turn);
                    for _ in 0..r.below(4) {
                        let (kind, n) = (r.below(4), r.below(30));
                        let index = r.below(2) as u64;
                        for k in 0..n {
                            match kind {
                                0 => log.text(turn, index, "text-delta", &format!("{k}\n")),
                                1 => log.text(turn, index, "reasoning-delta", &format!("{k}")),
                                2 => log.tool(
                                    turn,
                                    "c",
                                    r.chance(50).then_some("f"),
                                    &format!("{k}"),
                                ),
                                _ => log.push("tool/result", r#"{"id":"c","output":1}"#),
                            }
                            if r.chance(3) {
                                log.time -= 50;
                            }
                        }
                    }
                    if turn < turns as u64 || r.chance(60) {
                        log.turn_end(turn);
                    }
                }
                let mut batches = Vec::new();
                let mut left = log.events.len();
                while left > 0 {
                    let n = 1 + r.below(40);
                    batches.push(n);
                    left = left.saturating_sub(n);
                }
                let id = format!("random-{s}");
                put(&store, wal, log, &id, &batches);
                packed += same_document(&store, &id);
            }
            assert!(
                !(wal.packs_at_append() || wal.sealed()) || packed > 30,
                "{wal:?}: {packed}"
            );
        }
    }

    /// The binding's `close` closes every session before dropping the
    /// store: a version-3 log is sealed at rest, its closed turns in its
    /// archive and its live file left holding the archive's reference.
    #[test]
    fn close_seals_the_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with_options(
            dir.path(),
            StoreOptions {
                sync: SyncMode::Never,
                policy: Policy::Permissive,
                require_known_types: false,
            },
        )
        .unwrap();
        let mut log = Log::new();
        for turn in 1..=3 {
            log.turn_start(turn);
            chunks(&mut log, turn, 17);
            log.turn_end(turn);
        }
        log.store(&store, "s", &[10, 10, 10, 10, 10]);
        let path = log_path(&store, "s");
        let archive = units_path(&store, Wal::Archived, "s");
        let before = std::fs::read(&path).unwrap();
        assert_eq!(heads(&before).len(), 3 * 21, "plain records");
        assert!(!archive.exists());
        let doc = load_stored(&store, "s").unwrap().unwrap();
        close_store(Some(Arc::new(store))).unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(u16::from_le_bytes([after[8], after[9]]), 3);
        assert_eq!(heads(&after).len(), 0, "every record sealed");
        let meta = format::decode_file_header(&after).unwrap();
        assert_eq!(meta.archive.map(|r| r.count), Some(3 * 21));
        let sealed = heads(&std::fs::read(&archive).unwrap());
        assert_eq!(sealed.len(), 1, "one unit");
        assert_eq!(sealed[0].1.kind, KIND_SEALED);
        let store = open(dir.path(), Policy::Permissive, Wal::Archived);
        let again = load_stored(&store, "s").unwrap().unwrap();
        let events = |d: &str| d[d.find(r#","packed""#).unwrap()..].to_owned();
        assert_eq!(events(&again), events(&doc));
        same_document(&store, "s");
    }
}
