//! Issue 12 for the upstream formats (SQLite, JSONL raw and zstd): a repair
//! quarantines exactly what it cuts (beside the store, where upstream never
//! looks) and leaves the log as upstream's own repair leaves it; a salvage
//! read returns every intact event past a damaged line, frame or row, with
//! the exact gaps; a salvage repair keeps the valid prefix, closes its open
//! turn and quarantines the rest.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use turnwal::backend::Backend;
use turnwal::backend::jsonl::layout::log_path;
use turnwal::backend::jsonl::records::{decode_line, encode_batch};
use turnwal::backend::jsonl::zstd::{compress_frame, decompress_frame, scan_frames};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions};
use turnwal::scan::Gap;
use turnwal::{Cut, CutReason, Event, LogState, SessionHeader, Store, StoreOptions};

fn ev(t: &str, seq: u64, data: &str) -> Event {
    Event::new(t, seq, seq as i64 + 1, data).unwrap()
}

/// Turn 1, balanced: seqs 0-3.
fn turn1() -> Vec<Event> {
    vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
        ev("step/end", 2, r#"{"turn":1,"step":1}"#),
        ev("turn/end", 3, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

/// Turn 2 opened: seqs 4-5 (step 1 open).
fn turn2_open() -> Vec<Event> {
    vec![
        ev("turn/start", 4, r#"{"turn":2}"#),
        ev("step/start", 5, r#"{"turn":2,"step":1}"#),
    ]
}

/// Seq 6, the event the corrupt cases damage.
fn message6() -> Vec<Event> {
    vec![ev(
        "assistant/chunk",
        6,
        r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hi"}}"#,
    )]
}

/// Turn 2 closed (seqs 7-8), then turn 3 (seqs 9-10).
fn turn2_end() -> Vec<Event> {
    vec![
        ev("step/end", 7, r#"{"turn":2,"step":1}"#),
        ev("turn/end", 8, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
    ]
}

fn turn3() -> Vec<Event> {
    vec![
        ev("turn/start", 9, r#"{"turn":3}"#),
        ev(
            "turn/end",
            10,
            r#"{"turn":3,"reason":{"kind":"completed"}}"#,
        ),
    ]
}

/// The closers of turn 2 open at step 1, after seq 5 (time 6).
fn closers_at_6() -> Vec<Event> {
    vec![
        Event::new("step/end", 6, 6, r#"{"turn":2,"step":1}"#).unwrap(),
        Event::new(
            "turn/end",
            7,
            6,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
        )
        .unwrap(),
    ]
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(Event::seq).collect()
}

fn all_events() -> Vec<Event> {
    [turn1(), turn2_open(), message6(), turn2_end(), turn3()].concat()
}

// ---------------------------------------------------------------------------
// JSONL
// ---------------------------------------------------------------------------

/// A JSONL root at `<tmp>/root`.
struct Root {
    dir: tempfile::TempDir,
    compression: Compression,
}

impl Root {
    fn new(compression: Compression) -> Root {
        Root {
            dir: tempfile::tempdir().unwrap(),
            compression,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Session `id`'s quarantine directory (in its session directory).
    fn quarantine(&self, id: &str) -> PathBuf {
        self.path()
            .join("--work--")
            .join(id)
            .join(".turnwal-quarantine")
    }

    fn backend(&self) -> JsonlBackend {
        JsonlBackend::open(self.path(), self.compression).unwrap()
    }

    fn store(&self) -> Store {
        Store::with_backend(Arc::new(self.backend()), StoreOptions::default())
    }

    /// Writes session `id` in the given batches (one zstd frame each).
    fn write(&self, id: &str, batches: &[Vec<Event>]) -> PathBuf {
        let store = self.store();
        store
            .create(SessionHeader::new(id, 1000).with_cwd("/work"))
            .unwrap();
        for batch in batches {
            store.append(id, batch).unwrap();
        }
        drop(store);
        log_path(&self.path(), Some("/work"), id, self.compression).unwrap()
    }
}

/// The one quarantine file, checked by name, and its bytes.
#[track_caller]
fn only_quarantine(files: &[PathBuf], dir: &Path, prefix: &str, ext: &str) -> Vec<u8> {
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(files[0].parent().unwrap(), dir);
    assert!(
        name.starts_with(prefix) && name.ends_with(ext),
        "{name} should be {prefix}<ms>{ext}"
    );
    let ms = &name[prefix.len()..name.len() - ext.len()];
    assert!(ms.chars().all(|c| c.is_ascii_digit()), "{name}");
    fs::read(&files[0]).unwrap()
}

fn lines_of(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        out.extend_from_slice(e.to_json().as_bytes());
        out.push(b'\n');
    }
    out
}

#[test]
fn jsonl_raw_torn_tail_is_quarantined_and_the_log_repaired_as_upstream() {
    let root = Root::new(Compression::None);
    let path = root.write("t", &[turn1(), turn2_open()]);
    let committed = fs::read(&path).unwrap();
    let torn_tail = br#"{"type":"assistant/chunk","seq":6,"ti"#;
    let mut torn = committed.clone();
    torn.extend_from_slice(torn_tail);
    fs::write(&path, &torn).unwrap();

    let store = root.store();
    let view = store.load("t").unwrap();
    assert_eq!(view.state, LogState::Torn);
    // Upstream's repair: the prefix, then the closers appended.
    let mut expected = committed.clone();
    expected.extend_from_slice(&lines_of(&closers_at_6()));
    assert_eq!(fs::read(&path).unwrap(), expected);
    let files = root.backend().quarantined().unwrap();
    let kept = only_quarantine(
        &files,
        &root.quarantine("t"),
        &format!("t.at-{}.seq-6.", committed.len()),
        ".jsonl-cut",
    );
    assert_eq!(kept, torn_tail);
    // turnwal's listing does not see it (nor does upstream, which reads
    // only the transcript's name in a session directory).
    let list = root.backend().list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].id.as_str(), list[0].state), ("t", LogState::Clean));
    // A clean log repairs nothing and quarantines nothing more.
    drop(store);
    assert_eq!(root.store().load("t").unwrap().state, LogState::Clean);
    assert_eq!(root.backend().quarantined().unwrap(), files);
    // Deleting the session keeps what was quarantined.
    root.store().delete("t").unwrap();
    assert!(root.backend().list().unwrap().is_empty());
    assert_eq!(root.backend().quarantined().unwrap(), files);
    assert_eq!(fs::read(&files[0]).unwrap(), torn_tail);
}

#[test]
fn jsonl_raw_damaged_line_salvage_and_salvage_repair() {
    let root = Root::new(Compression::None);
    let path = root.write(
        "c",
        &[turn1(), turn2_open(), message6(), turn2_end(), turn3()],
    );
    let mut bytes = fs::read(&path).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let line6 = message6()[0].to_json();
    let at = text.find(&line6).unwrap();
    bytes[at] = b'#';
    fs::write(&path, &bytes).unwrap();
    let bad = &bytes[at..at + line6.len()];

    let backend = root.backend();
    assert!(matches!(backend.load("c"), Err(turnwal::Error::Corrupt(_))));

    let salvage = backend.salvage("c").unwrap().unwrap();
    assert_eq!(salvage.header.id, "c");
    let mut intact = all_events();
    intact.remove(6);
    assert_eq!(salvage.events, intact);
    assert_eq!(
        salvage.gaps,
        [Gap {
            offset: at as u64,
            len: line6.len() as u64 + 1,
            first_seq: 6,
            next_seq: Some(7),
            reason: format!(
                "invalid-record: unparsable line at byte {at} ({})",
                decode_line(bad).unwrap_err()
            ),
            damaged: true,
        }]
    );

    let mut writer = backend.open("c").unwrap().unwrap();
    let scan = writer.salvage_scan().unwrap();
    assert_eq!(
        scan.cut,
        Some(Cut {
            offset: at as u64,
            seq: 6,
            len: (bytes.len() - at) as u64,
            reason: CutReason::Damaged,
            detail: format!(
                "damaged committed region, cut by a salvage repair: corrupt session log: \
                 unparsable committed event at line 7 ({})",
                decode_line(bad).unwrap_err()
            ),
        })
    );
    assert_eq!((scan.committed, scan.stored_len()), (4, 6));
    assert_eq!(scan.closers, closers_at_6());
    let file = writer.repair(&scan).unwrap().unwrap();
    assert_eq!(fs::read(&file).unwrap(), &bytes[at..]);
    let mut expected = bytes[..at].to_vec();
    expected.extend_from_slice(&lines_of(&closers_at_6()));
    assert_eq!(fs::read(&path).unwrap(), expected);
    drop(writer);
    assert_eq!(backend.quarantined().unwrap(), std::slice::from_ref(&file));
    assert_eq!(file.parent().unwrap(), root.quarantine("c"));
    assert!(
        file.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("c.at-{at}.seq-6."))
    );
    let stored = backend.load("c").unwrap().unwrap();
    assert_eq!(stored.scan.state(), LogState::Clean);
    assert_eq!(
        stored.events,
        [turn1(), turn2_open(), closers_at_6()].concat()
    );
}

#[test]
fn jsonl_raw_salvage_names_a_seq_gap_and_a_torn_end() {
    let root = Root::new(Compression::None);
    let path = root.write(
        "g",
        &[turn1(), turn2_open(), message6(), turn2_end(), turn3()],
    );
    let bytes = fs::read(&path).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    // Drop the line of seq 6 (a missing line), and tear the last one.
    let line6 = format!("{}\n", message6()[0].to_json());
    let at = text.find(&line6).unwrap();
    let mut damaged = text.replace(&line6, "").into_bytes();
    damaged.truncate(damaged.len() - 5);
    fs::write(&path, &damaged).unwrap();
    let last_line = turn3()[1].to_json();
    let last_at = damaged.len() - (last_line.len() - 4);

    let salvage = root.backend().salvage("g").unwrap().unwrap();
    assert_eq!(seqs(&salvage.events), [0, 1, 2, 3, 4, 5, 7, 8, 9]);
    assert_eq!(
        salvage.gaps,
        [
            Gap {
                offset: at as u64,
                len: 0,
                first_seq: 6,
                next_seq: Some(7),
                reason: format!("invalid-record: seq gap at byte {at} (expected 6, got 7)"),
                damaged: true,
            },
            Gap {
                offset: last_at as u64,
                len: (last_line.len() - 4) as u64,
                first_seq: 10,
                next_seq: None,
                reason: format!(
                    "incomplete-record: incomplete final line: {} bytes without a newline",
                    last_line.len() - 4
                ),
                damaged: true,
            }
        ]
    );
}

#[test]
fn jsonl_zstd_torn_frame_is_quarantined_and_the_log_repaired_as_upstream() {
    let root = Root::new(Compression::Zstd);
    let path = root.write("z", &[turn1(), turn2_open()]);
    let committed = fs::read(&path).unwrap();
    let frame = compress_frame(&lines_of(&message6()));
    let torn_frame = &frame[..frame.len() - 1]; // its checksum's last byte missing
    let mut torn = committed.clone();
    torn.extend_from_slice(torn_frame);
    fs::write(&path, &torn).unwrap();

    let view = root.store().load("z").unwrap();
    assert_eq!(view.state, LogState::Torn);
    // The recovered event and the closers, in one repair frame.
    let mut batch = message6();
    batch.extend([
        Event::new("step/end", 7, 7, r#"{"turn":2,"step":1}"#).unwrap(),
        Event::new(
            "turn/end",
            8,
            7,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
        )
        .unwrap(),
    ]);
    let mut expected = committed.clone();
    expected.extend_from_slice(&compress_frame(&encode_batch(&batch, true)));
    assert_eq!(fs::read(&path).unwrap(), expected);
    let files = root.backend().quarantined().unwrap();
    let kept = only_quarantine(
        &files,
        &root.quarantine("z"),
        &format!("z.at-{}.seq-7.", committed.len()),
        ".jsonl-cut",
    );
    assert_eq!(kept, torn_frame);

    // A torn frame that recovers nothing: cut in place.
    let path = root.write("n", &[turn1(), turn2_open()]);
    let committed = fs::read(&path).unwrap();
    let mut torn = committed.clone();
    torn.extend_from_slice(&frame[..6]);
    fs::write(&path, &torn).unwrap();
    root.store().load("n").unwrap();
    let mut expected = committed.clone();
    expected.extend_from_slice(&compress_frame(&encode_batch(&closers_at_6(), true)));
    assert_eq!(fs::read(&path).unwrap(), expected);
    let files = root.backend().quarantined().unwrap();
    assert_eq!(files.len(), 2);
    let n: Vec<_> = files
        .iter()
        .filter(|f| f.file_name().unwrap().to_string_lossy().starts_with("n."))
        .collect();
    assert_eq!(n.len(), 1);
    assert_eq!(fs::read(n[0]).unwrap(), &frame[..6]);
}

/// The zstd session `id` in five frames after the header, with frame 3
/// (seq 6) damaged by `damage`; returns the path, the bytes, and frame 3's
/// range.
fn zstd_damaged(
    root: &Root,
    id: &str,
    damage: impl Fn(&mut [u8]),
) -> (PathBuf, Vec<u8>, std::ops::Range<usize>) {
    let path = root.write(
        id,
        &[turn1(), turn2_open(), message6(), turn2_end(), turn3()],
    );
    let mut bytes = fs::read(&path).unwrap();
    let frames = scan_frames(&bytes, usize::MAX).unwrap().frames;
    assert_eq!(frames.len(), 6);
    let f3 = frames[3].clone();
    damage(&mut bytes[f3.clone()]);
    fs::write(&path, &bytes).unwrap();
    (path, bytes, f3)
}

#[test]
fn jsonl_zstd_damaged_frame_salvage_and_salvage_repair() {
    let root = Root::new(Compression::Zstd);
    let (path, bytes, f3) = zstd_damaged(&root, "d", |frame| {
        let n = frame.len();
        frame[n - 1] ^= 0xff; // its checksum
    });
    let backend = root.backend();
    assert!(matches!(backend.load("d"), Err(turnwal::Error::Corrupt(_))));
    let why = decompress_frame(&bytes[f3.clone()]).unwrap_err();

    let salvage = backend.salvage("d").unwrap().unwrap();
    let mut intact = all_events();
    intact.remove(6);
    assert_eq!(salvage.events, intact);
    assert_eq!(
        salvage.gaps,
        [Gap {
            offset: f3.start as u64,
            len: f3.len() as u64,
            first_seq: 6,
            next_seq: Some(7),
            reason: format!(
                "invalid-record: frame at byte {} failed validation ({why})",
                f3.start
            ),
            damaged: true,
        }]
    );

    let mut writer = backend.open("d").unwrap().unwrap();
    let scan = writer.salvage_scan().unwrap();
    assert_eq!(
        scan.cut,
        Some(Cut {
            offset: f3.start as u64,
            seq: 6,
            len: (bytes.len() - f3.start) as u64,
            reason: CutReason::Damaged,
            detail: format!(
                "damaged committed region, cut by a salvage repair: corrupt Zstandard session \
                 log: frame at byte {} failed validation ({why})",
                f3.start
            ),
        })
    );
    assert_eq!(scan.closers, closers_at_6());
    // The plain scan still refuses; the salvage scan's repair is accepted.
    assert!(writer.scan().is_err());
    let file = writer.repair(&scan).unwrap().unwrap();
    drop(writer);
    assert_eq!(fs::read(&file).unwrap(), &bytes[f3.start..]);
    let mut expected = bytes[..f3.start].to_vec();
    expected.extend_from_slice(&compress_frame(&encode_batch(&closers_at_6(), true)));
    assert_eq!(fs::read(&path).unwrap(), expected);
    assert_eq!(backend.quarantined().unwrap(), [file]);
    let stored = backend.load("d").unwrap().unwrap();
    assert_eq!(stored.scan.state(), LogState::Clean);
    assert_eq!(
        stored.events,
        [turn1(), turn2_open(), closers_at_6()].concat()
    );
}

#[test]
fn jsonl_zstd_broken_frame_structure_resyncs_at_the_next_frame() {
    let root = Root::new(Compression::Zstd);
    let (path, bytes, f3) = zstd_damaged(&root, "m", |frame| frame[..4].fill(0));
    let backend = root.backend();
    assert!(matches!(backend.load("m"), Err(turnwal::Error::Corrupt(_))));
    let salvage = backend.salvage("m").unwrap().unwrap();
    let mut intact = all_events();
    intact.remove(6);
    assert_eq!(salvage.events, intact);
    assert_eq!(
        salvage.gaps,
        [Gap {
            offset: f3.start as u64,
            len: f3.len() as u64,
            first_seq: 6,
            next_seq: Some(7),
            reason: format!(
                "invalid-record: corrupt Zstandard session log: invalid frame magic at byte {}",
                f3.start
            ),
            damaged: true,
        }]
    );
    let mut writer = backend.open("m").unwrap().unwrap();
    let scan = writer.salvage_scan().unwrap();
    let cut = scan.cut.clone().unwrap();
    assert_eq!(
        (cut.offset, cut.seq, cut.len, cut.reason),
        (
            f3.start as u64,
            6,
            (bytes.len() - f3.start) as u64,
            CutReason::Damaged
        )
    );
    let file = writer.repair(&scan).unwrap().unwrap();
    assert_eq!(fs::read(&file).unwrap(), &bytes[f3.start..]);
    let mut expected = bytes[..f3.start].to_vec();
    expected.extend_from_slice(&compress_frame(&encode_batch(&closers_at_6(), true)));
    assert_eq!(fs::read(&path).unwrap(), expected);
}

// ---------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
    backend: SqliteBackend,
}

impl Db {
    fn new(batches: &[Vec<Event>]) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let backend = SqliteBackend::open(&path, SqliteOptions::default()).unwrap();
        let db = Db {
            _dir: dir,
            path,
            backend,
        };
        let store = db.store();
        store
            .create(SessionHeader::new("s", 1000).with_cwd("/work"))
            .unwrap();
        for batch in batches {
            store.append("s", batch).unwrap();
        }
        db
    }

    fn store(&self) -> Store {
        Store::with_backend(Arc::new(self.backend.clone()), StoreOptions::default())
    }

    fn exec(&self, sql: &str) {
        rusqlite::Connection::open(&self.path)
            .unwrap()
            .execute(sql, [])
            .unwrap();
    }

    /// Every row of session `s`: (seq, type, time, data).
    fn rows(&self) -> Vec<(i64, String, i64, String)> {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq, type, time, data FROM events WHERE session_id = 's' ORDER BY seq")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    fn quarantine(&self) -> PathBuf {
        self.path.with_file_name("sessions.db.turnwal-quarantine")
    }
}

fn row_of(e: &Event) -> (i64, String, i64, String) {
    (
        e.seq() as i64,
        e.event_type().to_owned(),
        e.time(),
        e.data().get().to_owned(),
    )
}

/// A quarantined row line for a scalar row without surface op or sources.
fn row_line(seq: i64, kind: &str, time: i64, data: &str) -> String {
    format!(
        "{{\"session_id\":\"s\",\"seq\":{seq},\"type\":\"{kind}\",\"time\":{time},\"data\":{},\
         \"source_event_seqs\":null,\"surface_op\":null,\"ignorable\":null}}\n",
        serde_json::to_string(data).unwrap()
    )
}

#[test]
fn sqlite_torn_row_is_quarantined_and_the_session_repaired_as_upstream() {
    let db = Db::new(&[turn1(), turn2_open()]);
    let before = db.rows();
    db.exec(
        "INSERT INTO events (session_id, seq, type, time, data) \
         VALUES ('s', 6, 'assistant/chunk', 7, '{\"turn\":2')",
    );
    let view = db.store().load("s").unwrap();
    assert_eq!(view.state, LogState::Torn);
    let mut expected = before.clone();
    expected.extend(closers_at_6().iter().map(row_of));
    assert_eq!(db.rows(), expected);
    let files = db.backend.quarantined().unwrap();
    let kept = only_quarantine(&files, &db.quarantine(), "s.at-6.seq-6.", ".rows.jsonl");
    assert_eq!(
        String::from_utf8(kept).unwrap(),
        row_line(6, "assistant/chunk", 7, "{\"turn\":2")
    );
    // An open turn alone cuts nothing: no quarantine file.
    let db2 = Db::new(&[turn1(), turn2_open()]);
    assert_eq!(db2.store().load("s").unwrap().state, LogState::OpenTurn);
    assert_eq!(db2.backend.quarantined().unwrap(), Vec::<PathBuf>::new());
    assert!(!db2.quarantine().exists());
}

#[test]
fn sqlite_damaged_and_missing_rows_salvage_and_salvage_repair() {
    let db = Db::new(&[turn1(), turn2_open(), message6(), turn2_end(), turn3()]);
    db.exec("UPDATE events SET data = '{\"id\":' WHERE session_id = 's' AND seq = 6");
    db.exec("DELETE FROM events WHERE session_id = 's' AND seq = 9");
    assert!(db.backend.load("s").unwrap_err().corruption().is_some());

    let salvage = db.backend.salvage("s").unwrap().unwrap();
    assert_eq!(salvage.header.id, "s");
    let mut intact = all_events();
    intact.remove(9);
    intact.remove(6);
    assert_eq!(salvage.events, intact);
    let json_error = "data is not valid JSON: unexpected end of input at byte 6";
    assert_eq!(
        salvage.gaps,
        [
            Gap {
                offset: 6,
                len: 1,
                first_seq: 6,
                next_seq: Some(7),
                reason: format!("incomplete-record: row 6 (its seq column is 6): {json_error}"),
                damaged: true,
            },
            Gap {
                offset: 9,
                len: 0,
                first_seq: 9,
                next_seq: Some(10),
                reason: "invalid-record: missing rows before row 9 (expected seq 9, got 10)".into(),
                damaged: true,
            }
        ]
    );

    let mut writer = db.backend.open("s").unwrap().unwrap();
    assert!(writer.scan().is_err());
    let scan = writer.salvage_scan().unwrap();
    assert_eq!(
        scan.cut,
        Some(Cut {
            offset: 6,
            seq: 6,
            len: 4,
            reason: CutReason::Damaged,
            detail: format!(
                "damaged committed row 6 (its seq column is 6), cut by a salvage repair: \
                 {json_error} [incomplete-record]"
            ),
        })
    );
    assert_eq!((scan.committed, scan.stored_len()), (4, 6));
    assert_eq!(scan.closers, closers_at_6());
    let file = writer.repair(&scan).unwrap().unwrap();
    drop(writer);
    assert_eq!(file.parent().unwrap(), db.quarantine());
    assert!(
        file.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("s.at-6.seq-6.")
    );
    let expected_quarantine = [
        row_line(6, "assistant/chunk", 7, "{\"id\":"),
        row_line(7, "step/end", 8, r#"{"turn":2,"step":1}"#),
        row_line(
            8,
            "turn/end",
            9,
            r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        ),
        row_line(
            10,
            "turn/end",
            11,
            r#"{"turn":3,"reason":{"kind":"completed"}}"#,
        ),
    ]
    .concat();
    assert_eq!(
        String::from_utf8(fs::read(&file).unwrap()).unwrap(),
        expected_quarantine
    );
    let expected: Vec<_> = [turn1(), turn2_open(), closers_at_6()]
        .concat()
        .iter()
        .map(row_of)
        .collect();
    assert_eq!(db.rows(), expected);
    assert_eq!(db.backend.quarantined().unwrap(), [file]);
    let stored = db.backend.load("s").unwrap().unwrap();
    assert_eq!(stored.scan.state(), LogState::Clean);
    assert_eq!(
        stored.events,
        [turn1(), turn2_open(), closers_at_6()].concat()
    );
}
