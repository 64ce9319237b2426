//! The native WAL's format version 2 (docs/FORMAT.md, "Version 2: the
//! compact format"): chunk-run records (kinds 15–17). Every event reads
//! back byte for byte through every reader (load, read_raw, read_from, the
//! in-place view, listing); the records on disk are exactly the runs
//! upstream's packer makes; a torn run is cut whole; version-1 logs are
//! still read and appended to in version 1.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use turnwal::backend::wal::format::{self, RecordHead};
use turnwal::backend::wal::{WalBackend, record, scan};
use turnwal::{Event, LogState, SessionHeader, Store, StoreOptions};

const ID: &str = "s-v2";
const T0: i64 = 1_700_000_000_000;

/// A store creating new sessions in version 2 (what this file tests; the
/// default is version 3, tests/store/wal_v3.rs).
fn backend(dir: &Path) -> WalBackend {
    WalBackend::open(dir)
        .unwrap()
        .creating_version(format::FORMAT_V2)
}

fn store(dir: &Path) -> Store {
    Store::with_backend(Arc::new(backend(dir)), StoreOptions::default())
}

/// A store creating new sessions in version 1 (the old writer path).
fn v1_store(dir: &Path) -> Store {
    let backend = WalBackend::open(dir)
        .unwrap()
        .creating_version(format::FORMAT_V1);
    Store::with_backend(Arc::new(backend), StoreOptions::default())
}

fn log_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(WalBackend::open(dir).unwrap().log_path(ID)).unwrap()
}

/// Every record head of the log, with its offset.
fn heads(bytes: &[u8]) -> Vec<(u64, RecordHead)> {
    let c = scan::scan_log(bytes, Path::new("x.twal")).unwrap();
    record::heads(bytes, c.frames.file.records_start, c.frames.valid_end).collect()
}

fn version(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[8], bytes[9]])
}

/// Builds events with contiguous seqs.
struct Script {
    seq: u64,
    time: i64,
    events: Vec<Event>,
}

impl Script {
    fn new() -> Script {
        Script {
            seq: 0,
            time: T0,
            events: Vec::new(),
        }
    }

    fn at(&mut self, dt: i64, event_type: &str, data: &str) -> &mut Script {
        self.time += dt;
        self.events
            .push(Event::new(event_type, self.seq, self.time, data).unwrap());
        self.seq += 1;
        self
    }

    fn e(&mut self, event_type: &str, data: &str) -> &mut Script {
        self.at(3, event_type, data)
    }

    fn text(&mut self, turn: u32, step: u32, kind: &str, text: &str) -> &mut Script {
        let data = format!(
            r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"{kind}","index":0,"text":{}}}}}"#,
            serde_json::to_string(text).unwrap()
        );
        self.e("assistant/chunk", &data)
    }
}

/// One turn: start, a step with 5 text deltas, 4 reasoning deltas, 3
/// tool-call deltas and a message, the step's end and the turn's end.
fn packable_turn(s: &mut Script, turn: u32) {
    s.e("turn/start", &format!(r#"{{"turn":{turn}}}"#))
        .e("user/message", r#"{"id":"u","text":"hi"}"#)
        .e("step/start", &format!(r#"{{"turn":{turn},"step":1}}"#));
    for t in ["Hel", "lo", ", wo", "rld", "!"] {
        s.text(turn, 1, "text-delta", t);
    }
    for t in ["I ", "think", "\n", "é"] {
        s.text(turn, 1, "reasoning-delta", t);
    }
    for a in [r#"{"p"#, r#"ath":"#, r#""src"}"#].iter() {
        let name = r#","name":"ls""#;
        let data = format!(
            r#"{{"turn":{turn},"step":1,"chunk":{{"type":"tool-call-delta","index":1,"id":"c1"{name},"argumentsDelta":{}}}}}"#,
            serde_json::to_string(a).unwrap()
        );
        s.at(-1, "assistant/chunk", &data);
    }
    s.e(
        "assistant/message",
        &format!(
            r#"{{"turn":{turn},"step":1,"message":{{"id":"a","role":"assistant","content":[{{"type":"text","text":"Hello, world!"}}]}}}}"#
        ),
    )
    .e("step/end", &format!(r#"{{"turn":{turn},"step":1}}"#))
    .e(
        "turn/end",
        &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
    );
}

#[test]
fn runs_are_one_record_each_and_read_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    let events = s.events.clone();
    {
        let store = store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &events).unwrap();
        // No close: a clean close would seal the closed turn.
        store.flush(ID).unwrap();
    }
    let bytes = log_bytes(dir.path());
    assert_eq!(version(&bytes), 2, "new sessions are version 2");
    let heads = heads(&bytes);
    let kinds: Vec<(u8, u64, u64)> = heads
        .iter()
        .map(|(_, h)| (h.kind, h.seq, h.count()))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, 0, 1),
            (5, 1, 1),
            (3, 2, 1),
            (15, 3, 5),
            (16, 8, 4),
            (17, 12, 3),
            (7, 15, 1),
            (4, 16, 1),
            (2, 17, 1)
        ]
    );
    // The text run's record, field by field.
    let (at, head) = heads[3];
    let record = &bytes[at as usize..(at + head.record_len()) as usize];
    let data =
        r#"{"turn":1,"step":1,"index":0,"dt":[3,3,3,3],"texts":["Hel","lo",", wo","rld","!"]}"#;
    assert_eq!(record.len(), 52 + data.len() + 4);
    assert_eq!(record[4], 15, "kind");
    assert_eq!(record[5], 1 << 2, "flags: a turn is open");
    assert_eq!(&record[6..8], 5u16.to_le_bytes(), "member count");
    assert_eq!(&record[8..12], (data.len() as u32).to_le_bytes());
    assert_eq!(&record[12..20], [0; 8], "no sources, no surfaceOp");
    assert_eq!(&record[20..24], 1u32.to_le_bytes(), "turn");
    assert_eq!(&record[24..32], 3u64.to_le_bytes(), "first seq");
    assert_eq!(
        &record[32..40],
        events[3].time().to_le_bytes(),
        "first time"
    );
    assert_eq!(
        &record[40..48],
        (bytes.len() as u64).to_le_bytes(),
        "materialized: published whole, every record states the file's length"
    );
    assert_eq!(&record[48..52], 1u32.to_le_bytes(), "step");
    assert_eq!(&record[52..52 + data.len()], data.as_bytes());
    assert_eq!(
        &record[record.len() - 4..],
        (record.len() as u32).to_le_bytes()
    );
    let mut crc = crc32fast::Hasher::new();
    let salt: [u8; 4] = bytes[12..16].try_into().unwrap();
    crc.update(&salt);
    crc.update(&record[4..]);
    assert_eq!(&record[..4], crc.finalize().to_le_bytes());
    // The tool-call run: negative dt, id and name.
    let (at, head) = heads[5];
    let record = &bytes[at as usize..(at + head.record_len()) as usize];
    let data = r#"{"turn":1,"step":1,"index":1,"dt":[-1,-1],"id":"c1","name":"ls","args":["{\"p","ath\":","\"src\"}"]}"#;
    assert_eq!(&record[52..record.len() - 4], data.as_bytes());

    let store = store(dir.path());
    assert_eq!(store.load(ID).unwrap().events, events);
    assert_eq!(store.read_raw(ID, 0).unwrap(), events);
    for from in 0..=events.len() as u64 + 1 {
        assert_eq!(
            store.read_from(ID, from).unwrap(),
            events[(from as usize).min(events.len())..],
            "read_from({from})"
        );
    }
    let view = store.view(ID).unwrap();
    let viewed: Vec<Event> = view.iter().map(|e| e.to_event()).collect();
    assert_eq!(viewed, events);
    let listed = &store.list().unwrap()[0];
    assert_eq!(listed.events, events.len() as u64);
    assert_eq!(listed.last_activity, Some(events.last().unwrap().time()));
}

#[test]
fn a_run_at_the_end_gives_listing_its_last_member() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    s.e("turn/start", r#"{"turn":1}"#)
        .e("user/message", r#"{"id":"u","text":"hi"}"#)
        .e("step/start", r#"{"turn":1,"step":1}"#);
    for t in ["a", "b", "c", "d"] {
        s.text(1, 1, "text-delta", t);
    }
    let events = s.events.clone();
    let store = store(dir.path());
    store.create(SessionHeader::new(ID, 1)).unwrap();
    store.append(ID, &events).unwrap();
    store.flush(ID).unwrap();
    let listed = &store.list().unwrap()[0];
    assert_eq!(listed.events, events.len() as u64);
    assert_eq!(listed.last_activity, Some(events.last().unwrap().time()));
    assert_eq!(store.read_raw(ID, 5).unwrap(), events[5..]);
    let kinds: Vec<u8> = heads(&log_bytes(dir.path()))
        .iter()
        .map(|(_, h)| h.kind)
        .collect();
    assert_eq!(kinds, [1, 5, 3, 15]);
}

/// A run torn anywhere inside its record is cut whole: none of its members
/// is returned, and recovery closes the turn from the events before it.
#[test]
fn a_run_torn_mid_record_is_cut_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    let committed = s.events.len();
    s.e("turn/start", r#"{"turn":2}"#)
        .e("user/message", r#"{"id":"u2","text":"more"}"#)
        .e("step/start", r#"{"turn":2,"step":1}"#);
    let before_run = s.events.len();
    for t in ["x", "y", "z", "w", "v", "u"] {
        s.text(2, 1, "text-delta", t);
    }
    let events = s.events.clone();
    {
        // Appended, not sealed at the close: a seal publishes the run in a
        // rewritten file, where no torn write can reach it.
        let backend = backend(dir.path()).sealing_by_itself(false);
        let store = Store::with_backend(Arc::new(backend), StoreOptions::default());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &events[..committed]).unwrap();
        store.append(ID, &events[committed..]).unwrap();
        store.close(ID).unwrap();
    }
    let path = WalBackend::open(dir.path()).unwrap().log_path(ID);
    let full = std::fs::read(&path).unwrap();
    let (run_at, run) = *heads(&full).last().unwrap();
    assert_eq!((run.kind, run.count()), (15, 6));
    let proof = dir.path().join(format!("sessions/.{ID}.durable"));
    for cut in [
        run_at + 1,
        run_at + 51,
        run_at + 52,
        run_at + run.record_len() / 2,
        run_at + run.record_len() - 1,
    ] {
        std::fs::write(&path, &full[..cut as usize]).unwrap();
        // A power loss took the proof's last update too.
        let _ = std::fs::remove_file(&proof);
        let store = store(dir.path());
        let view = store.load(ID).unwrap();
        assert_eq!(
            view.events[..before_run],
            events[..before_run],
            "cut at {cut}"
        );
        let closers: Vec<&str> = view.events[before_run..]
            .iter()
            .map(|e| e.event_type())
            .collect();
        assert_eq!(closers, ["step/end", "turn/end"], "cut at {cut}");
        let after = std::fs::read(&path).unwrap();
        assert_eq!(
            &after[..run_at as usize],
            &full[..run_at as usize],
            "the run is cut from its first byte"
        );
        let kinds: Vec<u8> = heads(&after)[heads(&full).len() - 1..]
            .iter()
            .map(|(_, h)| h.kind)
            .collect();
        assert_eq!(kinds, [4, 2], "closers follow the kept events");
        drop(store);
    }
}

#[test]
fn version_1_logs_are_read_and_appended_to_in_version_1() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    let first = s.events.len();
    packable_turn(&mut s, 2);
    let events = s.events.clone();
    {
        let store = v1_store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &events[..first]).unwrap();
        store.close(ID).unwrap();
    }
    {
        // The default store (creating version 2) appends to it in version 1.
        let store = store(dir.path());
        store.append(ID, &events[first..]).unwrap();
        store.close(ID).unwrap();
    }
    let bytes = log_bytes(dir.path());
    assert_eq!(version(&bytes), 1);
    let heads = heads(&bytes);
    assert_eq!(heads.len(), events.len(), "one record per event");
    assert!(heads.iter().all(|(_, h)| h.kind < 15));
    let store = store(dir.path());
    assert_eq!(store.load(ID).unwrap().events, events);
    assert_eq!(store.read_from(ID, 20).unwrap(), events[20..]);
    assert_eq!(store.list().unwrap()[0].state, LogState::Clean);
}

/// A chunk-run kind in a version-1 file is invalid: never a record there.
#[test]
fn a_run_record_in_a_version_1_file_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    {
        let store = store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &s.events).unwrap();
        store.close(ID).unwrap();
    }
    let mut bytes = log_bytes(dir.path());
    // Relabel the file as version 1 (the header CRC covers the version).
    bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
    let json_len = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[..20]);
    crc.update(&bytes[24..24 + json_len]);
    let crc = crc.finalize().to_le_bytes();
    bytes[20..24].copy_from_slice(&crc);
    let c = scan::scan_log(&bytes, Path::new("x.twal"));
    let err = match c {
        Err(e) => e.to_string(),
        Ok(c) => format!("{:?}", c.frames.invalid),
    };
    assert!(err.contains("version-2 record"), "{err}");
}

// ---------------------------------------------------------------------------
// Sealed units and compaction
// ---------------------------------------------------------------------------

/// Decompresses a unit record's frame.
/// Recomputes the outer CRC of the record `head` at `at` (salted with the
/// file's salt), so that only what is inside can tell it was altered.
fn reseal(bytes: &mut [u8], at: usize, head: &RecordHead) {
    let salt: [u8; 4] = bytes[12..16].try_into().unwrap();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&salt);
    crc.update(&bytes[at + 4..at + head.record_len() as usize]);
    let crc = crc.finalize().to_le_bytes();
    bytes[at..at + 4].copy_from_slice(&crc);
}

fn unit_plain(record: &[u8], head: &RecordHead) -> Vec<u8> {
    let frame = &record[52..52 + head.data_len as usize];
    zstd::bulk::decompress(frame, head.plain_len() as usize).unwrap()
}

#[test]
fn compaction_seals_closed_turns_and_every_event_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    packable_turn(&mut s, 2);
    let split = s.events.len();
    packable_turn(&mut s, 3);
    let closed = s.events.len();
    s.e("turn/start", r#"{"turn":4}"#)
        .e("user/message", r#"{"id":"u4","text":"open"}"#)
        .e("step/start", r#"{"turn":4,"step":1}"#);
    for t in ["p", "q", "r"] {
        s.text(4, 1, "text-delta", t);
    }
    let events = s.events.clone();
    let store = store(dir.path());
    store.create(SessionHeader::new(ID, 1)).unwrap();
    // Runs across batches: turn 1 in one batch, turn 2's chunks split.
    store.append(ID, &events[..split - 8]).unwrap();
    store.append(ID, &events[split - 8..split]).unwrap();
    store.append(ID, &events[split..]).unwrap();
    let before = log_bytes(dir.path());
    let done = store.compact(ID).unwrap().unwrap();
    let after = log_bytes(dir.path());
    assert_eq!(
        (done.before, done.after),
        (before.len() as u64, after.len() as u64)
    );
    assert_eq!(version(&after), 2);
    assert_ne!(&after[12..16], &before[12..16], "a fresh salt");
    let heads = heads(&after);
    let shape: Vec<(u8, u64, u64)> = heads
        .iter()
        .map(|(_, h)| (h.kind, h.seq, h.count()))
        .collect();
    let open = closed as u64;
    assert_eq!(
        shape,
        [
            (18, 0, open),
            (1, open, 1),
            (5, open + 1, 1),
            (3, open + 2, 1),
            (15, open + 3, 3)
        ]
    );
    // Published whole: every record states the new file's length.
    assert!(heads.iter().all(|(_, h)| h.watermark == after.len() as u64));
    let (at, unit) = heads[0];
    assert_eq!(
        (unit.flags, unit.type_len, unit.step, unit.turn),
        (0, 0, 0, 3)
    );
    assert_eq!(unit.time, events[closed - 1].time());
    let record = &after[at as usize..(at + unit.record_len()) as usize];
    // The frame: content size present, no zstd checksum.
    let frame = &record[52..52 + unit.data_len as usize];
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(frame).unwrap(),
        Some(u64::from(unit.plain_len()))
    );
    assert_eq!(frame[4] & 0b100, 0, "no content checksum flag");
    // Inside: plain records with salt 0 and watermark 0; turn 2's run,
    // split across two batches, joined.
    let plain = unit_plain(record, &unit);
    let inner = scan_plain(&plain);
    let inner_kinds: Vec<u8> = inner.iter().map(|h| h.kind).collect();
    assert_eq!(
        inner_kinds,
        [1, 5, 3, 15, 16, 17, 7, 4, 2].repeat(3),
        "every turn packed whole"
    );
    assert!(inner.iter().all(|h| h.watermark == 0));
    // Every reader, live and reopened.
    assert_eq!(store.read_raw(ID, 0).unwrap(), events);
    for from in 0..=events.len() {
        assert_eq!(store.read_from(ID, from as u64).unwrap(), events[from..]);
    }
    // The writer goes on appending to the new file.
    let mut more = Script {
        seq: s.seq,
        time: s.time,
        events: Vec::new(),
    };
    more.e("step/end", r#"{"turn":4,"step":1}"#)
        .e("turn/end", r#"{"turn":4,"reason":{"kind":"completed"}}"#);
    store.append(ID, &more.events).unwrap();
    store.close(ID).unwrap();
    drop(store);
    let all: Vec<Event> = events.iter().chain(&more.events).cloned().collect();
    let store = self::store(dir.path());
    assert_eq!(store.load(ID).unwrap().events, all);
    let view = store.view(ID).unwrap();
    assert_eq!(view.iter().map(|e| e.to_event()).collect::<Vec<_>>(), all);
    let listed = &store.list().unwrap()[0];
    assert_eq!(
        (listed.events, listed.state, listed.last_activity),
        (
            all.len() as u64,
            LogState::Clean,
            Some(all.last().unwrap().time())
        )
    );
    // The clean close sealed the last turn after the first unit, which
    // it copied as it is (only its outer checksum changes with the salt).
    let again = log_bytes(dir.path());
    let kinds: Vec<u8> = self::heads(&again).iter().map(|(_, h)| h.kind).collect();
    assert_eq!(kinds, [18, 18]);
    assert_eq!(
        &again[at as usize + 4..at as usize + 40],
        &record[4..40],
        "the first unit, copied"
    );
    assert_eq!(store.read_raw(ID, 0).unwrap(), all);
    assert_eq!(store.read_from(ID, 30).unwrap(), all[30..]);
    // Nothing left to seal: the file is not rewritten.
    let done = store.compact(ID).unwrap().unwrap();
    assert_eq!(done.before, done.after);
    assert_eq!(log_bytes(dir.path()), again);
}

/// By default a writer never seals in the append path, only at a clean
/// close; asked to (`sealing_after_batches`), it also seals after a batch
/// that leaves at least 1 MiB of plain closed-turn records that are at
/// least a quarter of the file. A version-1 log is never sealed by a writer,
/// not even at close.
#[test]
fn writers_seal_by_themselves_at_close_and_if_asked_after_a_megabyte() {
    let big = "x".repeat(300 << 10);
    let turn = |s: &mut Script, turn: u32| {
        s.e("turn/start", &format!(r#"{{"turn":{turn}}}"#))
            .e("user/message", &format!(r#"{{"id":"u","text":"{big}"}}"#))
            .e(
                "turn/end",
                &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            );
    };
    for (v1, after_batches) in [(false, false), (false, true), (true, true)] {
        let dir = tempfile::tempdir().unwrap();
        let backend = backend(dir.path()).sealing_after_batches(after_batches);
        let backend = if v1 {
            backend.creating_version(format::FORMAT_V1)
        } else {
            backend
        };
        let store = Store::with_backend(Arc::new(backend), StoreOptions::default());
        store
            .create_with_policy(SessionHeader::new(ID, 1), turnwal::Policy::Lenient)
            .unwrap();
        let mut s = Script::new();
        let mut kinds_after = Vec::new();
        for t in 1..=4 {
            let from = s.events.len();
            turn(&mut s, t);
            store.append(ID, &s.events[from..]).unwrap();
            let kinds: Vec<u8> = heads(&log_bytes(dir.path()))
                .iter()
                .map(|(_, h)| h.kind)
                .collect();
            kinds_after.push(kinds);
        }
        if v1 || !after_batches {
            assert!(kinds_after.iter().flatten().all(|&k| k != 18));
            assert_eq!(kinds_after[3], [1, 5, 2].repeat(4));
        } else {
            // 3 turns (900 KiB) stay plain; the fourth passes 1 MiB.
            assert_eq!(kinds_after[2], [1, 5, 2].repeat(3));
            assert_eq!(kinds_after[3], [18]);
        }
        store.close(ID).unwrap();
        let kinds: Vec<u8> = heads(&log_bytes(dir.path()))
            .iter()
            .map(|(_, h)| h.kind)
            .collect();
        assert_eq!(kinds.contains(&18), !v1, "v1 {v1}");
        let store = self::store(dir.path());
        assert_eq!(store.read_raw(ID, 0).unwrap(), s.events);
    }
}

/// The heads of plain records laid end to end (a unit's inside, salt 0).
fn scan_plain(plain: &[u8]) -> Vec<RecordHead> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < plain.len() as u64 {
        let head = record::check_at(plain, at, None, 0).unwrap();
        at += head.record_len();
        out.push(head);
    }
    out
}

#[test]
fn compaction_turns_a_version_1_log_into_version_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    packable_turn(&mut s, 2);
    let events = s.events.clone();
    {
        let store = v1_store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &events[..10]).unwrap();
        store.append(ID, &events[10..]).unwrap();
        store.close(ID).unwrap();
    }
    assert_eq!(version(&log_bytes(dir.path())), 1);
    // Through the backend, with no store holding the session.
    let backend = WalBackend::open(dir.path()).unwrap();
    let done = turnwal::backend::Backend::compact(&backend, ID)
        .unwrap()
        .unwrap();
    assert!(done.after < done.before);
    let bytes = log_bytes(dir.path());
    assert_eq!(version(&bytes), 2);
    let kinds: Vec<u8> = heads(&bytes).iter().map(|(_, h)| h.kind).collect();
    assert_eq!(kinds, [18]);
    let store = store(dir.path());
    assert_eq!(store.load(ID).unwrap().events, events);
    assert_eq!(store.read_from(ID, 7).unwrap(), events[7..]);
}

/// A unit whose frame decompresses to another length than its head's
/// `plain_len` is refused (`sealed-unit-length`), though its CRC holds.
#[test]
fn a_unit_of_the_wrong_plain_length_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    {
        let store = store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &s.events).unwrap();
        store.compact(ID).unwrap();
        store.close(ID).unwrap();
    }
    let path = WalBackend::open(dir.path()).unwrap().log_path(ID);
    let mut bytes = std::fs::read(&path).unwrap();
    let (at, unit) = heads(&bytes)[0];
    assert_eq!(unit.kind, 18);
    for delta in [1i64, -1] {
        let mut bad = bytes.clone();
        let at = at as usize;
        let plain = (i64::from(unit.plain_len()) + delta) as u32;
        bad[at + 12..at + 16].copy_from_slice(&plain.to_le_bytes());
        reseal(&mut bad, at, &unit);
        std::fs::write(&path, &bad).unwrap();
        let err = store(dir.path()).load(ID).unwrap_err().to_string();
        assert!(err.contains("sealed-unit-length"), "{err}");
    }
    bytes.truncate(bytes.len());
}

/// `verify` decompresses every unit and checks its records: a compacted
/// log verifies clean with every event counted; a unit whose frame was
/// altered (its outer checksum recomputed, so only the inside can tell) is
/// corrupt, never a torn tail, and `load` refuses it.
#[test]
fn verify_checks_every_unit_inside() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    packable_turn(&mut s, 2);
    {
        let store = store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &s.events).unwrap();
        store.compact(ID).unwrap();
        store.close(ID).unwrap();
    }
    let report = store(dir.path()).verify(ID).unwrap();
    assert_eq!(
        (report.state, report.events, report.turns),
        (LogState::Clean, s.events.len() as u64, 2)
    );
    let path = WalBackend::open(dir.path()).unwrap().log_path(ID);
    let bytes = std::fs::read(&path).unwrap();
    let (at, unit) = heads(&bytes)[0];
    assert_eq!(unit.kind, 18);
    let at = at as usize;
    let frame_at = at + 52;
    let mut refused = 0;
    // Every byte of the frame after its 4-byte magic, flipped in turn.
    for i in 4..unit.data_len as usize {
        let mut bad = bytes.clone();
        bad[frame_at + i] ^= 0x10;
        reseal(&mut bad, at, &unit);
        std::fs::write(&path, &bad).unwrap();
        let store = store(dir.path());
        let report = store.verify(ID).unwrap();
        match report.state {
            LogState::Corrupt => {
                refused += 1;
                assert!(store.load(ID).is_err(), "byte {i}");
            }
            // A flip zstd and every inner check cannot see would have to
            // leave the same events.
            _ => assert_eq!(store.load(ID).unwrap().events, s.events, "byte {i}"),
        }
    }
    assert!(
        refused as u32 > unit.data_len / 2,
        "{refused} of {}",
        unit.data_len
    );
}

/// A sealed unit whose checksum holds but whose frame does not decompress
/// loses its own events only: the salvage read returns every event after
/// it, and names the unit as a damaged gap with the seqs it held.
#[test]
fn salvage_reads_past_a_unit_that_does_not_decompress() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    let first_turn = s.events.len();
    {
        let store = store(dir.path());
        store.create(SessionHeader::new(ID, 1)).unwrap();
        store.append(ID, &s.events).unwrap();
        store.compact(ID).unwrap();
        store.close(ID).unwrap();
    }
    packable_turn(&mut s, 2);
    {
        // The second turn stays plain records after the unit.
        let backend = backend(dir.path()).sealing_by_itself(false);
        let store = Store::with_backend(Arc::new(backend), StoreOptions::default());
        store.append(ID, &s.events[first_turn..]).unwrap();
        store.close(ID).unwrap();
    }
    let path = WalBackend::open(dir.path()).unwrap().log_path(ID);
    let mut bytes = std::fs::read(&path).unwrap();
    let (at, unit) = heads(&bytes)[0];
    assert_eq!(
        (unit.kind, unit.seq, unit.next_seq()),
        (18, 0, first_turn as u64)
    );
    let at = at as usize;
    // The frame's header after its magic, garbled; the outer checksum
    // recomputed, so only decompression can tell.
    bytes[at + 52 + 4..at + 52 + 12].fill(0xff);
    reseal(&mut bytes, at, &unit);
    std::fs::write(&path, &bytes).unwrap();

    let store = store(dir.path());
    assert!(matches!(store.load(ID), Err(turnwal::Error::Corrupt(_))));
    let salvage = store.salvage(ID).unwrap();
    assert_eq!(salvage.events, s.events[first_turn..]);
    assert_eq!(salvage.gaps.len(), 1, "{:?}", salvage.gaps);
    let gap = &salvage.gaps[0];
    assert_eq!(
        (
            gap.offset,
            gap.len,
            gap.first_seq,
            gap.next_seq,
            gap.damaged
        ),
        (
            at as u64,
            unit.record_len(),
            0,
            Some(first_turn as u64),
            true
        )
    );
    assert!(
        gap.reason.contains("sealed") || gap.reason.contains("unit"),
        "{}",
        gap.reason
    );
}

// ---------------------------------------------------------------------------
// The round-trip property
// ---------------------------------------------------------------------------

/// One chunk of a generated step.
#[derive(Debug, Clone)]
enum Chunk {
    /// A canonical delta of kind 0 (text), 1 (reasoning) or 2 (tool call),
    /// at chunk index `index`, with this text and time step.
    Canonical {
        kind: u8,
        index: u8,
        text: String,
        dt: i8,
    },
    /// A text delta with an escape upstream would not write (`\u0041`).
    Escaped,
    /// A text delta with its keys in another order.
    Reordered,
    /// A canonical text delta marked ignorable.
    Ignorable,
    /// A chunk of another shape (`{"delta":…}`).
    Other,
}

fn chunk_strategy() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        6 => (0u8..3, 0u8..2, "[a-z\"\\\\\n é😀]{0,6}", -3i8..5).prop_map(|(kind, index, text, dt)| {
            Chunk::Canonical { kind, index, text, dt }
        }),
        1 => Just(Chunk::Escaped),
        1 => Just(Chunk::Reordered),
        1 => Just(Chunk::Ignorable),
        1 => Just(Chunk::Other),
    ]
}

/// Sessions of turns, each a list of steps, each a list of chunks; and
/// batch boundaries (as event indexes).
fn session_strategy() -> impl Strategy<Value = (Vec<Vec<Vec<Chunk>>>, Vec<usize>, bool)> {
    (
        prop::collection::vec(
            prop::collection::vec(prop::collection::vec(chunk_strategy(), 0..40), 1..3),
            1..4,
        ),
        prop::collection::vec(0usize..200, 0..6),
        any::<bool>(),
    )
}

fn build(turns: &[Vec<Vec<Chunk>>], open_last: bool) -> Vec<Event> {
    let mut s = Script::new();
    for (t, steps) in turns.iter().enumerate() {
        let turn = t as u32 + 1;
        s.e("turn/start", &format!(r#"{{"turn":{turn}}}"#))
            .e("user/message", r#"{"id":"u","text":"go"}"#);
        for (k, chunks) in steps.iter().enumerate() {
            let step = k as u32 + 1;
            s.e("step/start", &format!(r#"{{"turn":{turn},"step":{step}}}"#));
            for chunk in chunks {
                match chunk {
                    Chunk::Canonical {
                        kind,
                        index,
                        text,
                        dt,
                    } => {
                        let text = serde_json::to_string(text).unwrap();
                        let data = match kind {
                            0 | 1 => format!(
                                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"{}","index":{index},"text":{text}}}}}"#,
                                if *kind == 0 {
                                    "text-delta"
                                } else {
                                    "reasoning-delta"
                                }
                            ),
                            _ => format!(
                                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"tool-call-delta","index":{index},"id":"c{index}","name":"n","argumentsDelta":{text}}}}}"#
                            ),
                        };
                        s.at(i64::from(*dt), "assistant/chunk", &data);
                    }
                    Chunk::Escaped => {
                        s.e(
                            "assistant/chunk",
                            &format!(
                                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"\u0041"}}}}"#
                            ),
                        );
                    }
                    Chunk::Reordered => {
                        s.e(
                            "assistant/chunk",
                            &format!(
                                r#"{{"step":{step},"turn":{turn},"chunk":{{"type":"text-delta","index":0,"text":"r"}}}}"#
                            ),
                        );
                    }
                    Chunk::Ignorable => {
                        s.text(turn, step, "text-delta", "i");
                        let last = s.events.pop().unwrap();
                        s.events.push(last.with_ignorable());
                    }
                    Chunk::Other => {
                        s.e(
                            "assistant/chunk",
                            &format!(r#"{{"turn":{turn},"step":{step},"delta":"d"}}"#),
                        );
                    }
                }
            }
            if open_last && t + 1 == turns.len() && k + 1 == steps.len() {
                return s.events;
            }
            s.e("step/end", &format!(r#"{{"turn":{turn},"step":{step}}}"#));
        }
        s.e(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        );
    }
    s.events
}

fn batches(events: &[Event], cuts: &[usize]) -> Vec<Vec<Event>> {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|c| c % (events.len() + 1))
        .filter(|&c| c > 0)
        .collect();
    cuts.push(events.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut from = 0;
    for c in cuts {
        if c > from {
            out.push(events[from..c].to_vec());
            from = c;
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every event appended reads back byte for byte from a version-2 log
    /// (and from a version-1 log written by the old path), through load,
    /// read_raw, read_from at every seq and the in-place view.
    #[test]
    fn every_event_reads_back_byte_for_byte(
        (turns, cuts, open_last) in session_strategy(),
        created in 1u16..=3,
        compact in 0u8..3,
    ) {
        let events = build(&turns, open_last);
        let dir = tempfile::tempdir().unwrap();
        let v1 = created == format::FORMAT_V1;
        {
            let backend = WalBackend::open(dir.path()).unwrap().creating_version(created);
            let store = Store::with_backend(Arc::new(backend), StoreOptions::default());
            store.create(SessionHeader::new(ID, 1)).unwrap();
            let batches = batches(&events, &cuts);
            for (i, batch) in batches.iter().enumerate() {
                store.append(ID, batch).unwrap();
                // Compact midway (1) or at the end (2).
                if (compact == 1 && i == batches.len() / 2) || (compact == 2 && i + 1 == batches.len()) {
                    store.compact(ID).unwrap();
                }
            }
            store.flush(ID).unwrap();
            // Read while the writer is live, too.
            prop_assert_eq!(&store.read_raw(ID, 0).unwrap(), &events);
        }
        let bytes = log_bytes(dir.path());
        // A version-1 log becomes version 2 when compacted; the others keep
        // their version.
        prop_assert_eq!(version(&bytes), if v1 && compact > 0 { 2 } else { created });
        let heads = heads(&bytes);
        if v1 && compact == 0 {
            prop_assert!(heads.iter().all(|(_, h)| h.kind < 15 && h.count() == 1));
        }
        let store = store(dir.path());
        prop_assert_eq!(&store.read_raw(ID, 0).unwrap(), &events);
        for from in (0..=events.len()).step_by(3) {
            prop_assert_eq!(&store.read_from(ID, from as u64).unwrap(), &events[from..]);
        }
        let view = store.view(ID).unwrap();
        let stored: Vec<Event> = view.iter().take(events.len()).map(|e| e.to_event()).collect();
        prop_assert_eq!(&stored, &events);
        let listed = &store.list().unwrap()[0];
        prop_assert_eq!(listed.events, events.len() as u64);
        prop_assert_eq!(listed.last_activity, Some(events.last().unwrap().time()));
        let loaded = store.load(ID).unwrap();
        prop_assert_eq!(&loaded.events[..events.len()], &events[..]);
        let listed = &store.list().unwrap()[0];
        prop_assert_eq!(listed.events, loaded.events.len() as u64);
        prop_assert_eq!(listed.last_activity, Some(loaded.events.last().unwrap().time()));
    }
}

#[test]
fn a_forged_record_that_decodes_to_no_event_is_corrupt_in_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Script::new();
    packable_turn(&mut s, 1);
    packable_turn(&mut s, 2);
    let writer = v1_store(dir.path());
    writer.create(SessionHeader::new(ID, 1)).unwrap();
    writer.append(ID, &s.events).unwrap();
    drop(writer);
    let path = WalBackend::open(dir.path()).unwrap().log_path(ID);
    let mut bytes = log_bytes(dir.path());
    // Record seq 1 gets a time past 2^53 - 1, with a checksum that agrees:
    // only decoding can tell.
    let (at, head) = heads(&bytes)[1];
    assert_eq!(head.seq, 1);
    let field = at as usize + format::REC_TIME_FIELD.at;
    bytes[field..field + 8].copy_from_slice(&(1i64 << 53).to_le_bytes());
    reseal(&mut bytes, at as usize, &head);
    std::fs::write(&path, &bytes).unwrap();

    let store = store(dir.path());
    let expect_corrupt = |what: &str, result: Result<(), turnwal::Error>| match result {
        Err(turnwal::Error::Corrupt(c)) => {
            assert_eq!(c.offset, at, "{what}: {c}");
            assert!(
                c.to_string().contains("is not a safe integer"),
                "{what}: {c}"
            );
        }
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    };
    expect_corrupt("view", store.view(ID).map(drop));
    expect_corrupt("inspect_view", store.inspect_view(ID).map(drop));
    expect_corrupt("inspect", store.inspect(ID).map(drop));
    let report = store.verify(ID).unwrap();
    assert_eq!(report.state, LogState::Corrupt);
    assert!(
        report
            .problem
            .as_deref()
            .unwrap()
            .contains("is not a safe integer"),
        "{report:?}"
    );
    assert_eq!(log_bytes(dir.path()), bytes, "reads write nothing");
}
