//! Byte-level recovery tests of the native WAL, on real files.
//!
//! These guard against the failures a storage engine must never have after a
//! crash or a damaged disk: losing or altering an acknowledged event, silently
//! shortening a log whose committed bytes are damaged, returning torn, zeroed,
//! garbage, stale or foreign bytes as events, leaving a log that the next
//! recovery reads differently (repair must be idempotent and converge even when
//! it is itself interrupted), and letting two writers share one session. Every
//! case asserts the exact recovered events (written events plus the exact
//! closers of `interrupted_turn_closers`), the exact bytes on disk, and the
//! exact error kind, offset and seq.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use turnwal::backend::wal::format::{self, MIN_RECORD_LEN, RECORD_HEADER_LEN, RecordHead};
use turnwal::backend::wal::{WalBackend, record, scan};
use turnwal::{
    CutReason, Error, Event, EventKind, LogState, Policy, SessionHeader, Store, Tracker,
    interrupted_turn_closers,
};

const ID: &str = "s-recovery";
const T0: i64 = 1_700_000_000_000;

/// Between `fork` and `exec`, a spawned child holds a copy of every open file
/// descriptor of this process (close-on-exec only closes them at `exec`). A
/// writer lock released by one test inside that window would stay held until
/// the child execs, and a test that re-takes it at once would see `Locked`.
/// So the one test that spawns a process runs alone; every other test holds
/// this shared.
static SPAWN: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn no_spawn() -> std::sync::RwLockReadGuard<'static, ()> {
    SPAWN.read().unwrap_or_else(|e| e.into_inner())
}

fn header() -> SessionHeader {
    SessionHeader::new(ID, T0 as u64).with_cwd("/work/app")
}

fn log_path(dir: &Path) -> PathBuf {
    WalBackend::open(dir).unwrap().log_path(ID)
}

/// Builds batches of events with contiguous seqs and increasing times.
struct Script {
    seq: u64,
    time: i64,
    batches: Vec<Vec<Event>>,
}

impl Script {
    fn new() -> Script {
        Script {
            seq: 0,
            time: T0,
            batches: vec![Vec::new()],
        }
    }

    fn e(&mut self, event_type: &str, data: &str) -> &mut Script {
        self.time += 7;
        let event = Event::new(event_type, self.seq, self.time, data).unwrap();
        self.seq += 1;
        self.batches.last_mut().unwrap().push(event);
        self
    }

    /// Rewrites the last event (to add envelope fields).
    fn with(&mut self, f: impl FnOnce(Event) -> Event) -> &mut Script {
        let last = self.batches.last_mut().unwrap().pop().unwrap();
        self.batches.last_mut().unwrap().push(f(last));
        self
    }

    /// Ends the current append batch.
    fn batch(&mut self) -> &mut Script {
        self.batches.push(Vec::new());
        self
    }

    fn done(mut self) -> Vec<Vec<Event>> {
        self.batches.retain(|b| !b.is_empty());
        self.batches
    }
}

/// Three committed turns (the first one batch, the second split across two
/// batches, the third one batch with a plugin event), then an open fourth turn
/// written in two batches: its step has an assistant message with two
/// tool-call blocks, one recorded as started by a `tool/call` and never
/// answered, one never started. `extra_tail` adds batches of chunks to the
/// open turn (the torn-sector test needs a tail longer than a sector).
fn main_script(extra_tail: usize) -> Vec<Vec<Event>> {
    let mut s = Script::new();
    // Turn 1: one batch (the materializing one).
    s.e("turn/start", r#"{"turn":1}"#)
        .e("user/message", r#"{"id":"u1","text":"What is in src/?"}"#)
        .e("step/start", r#"{"turn":1,"step":1}"#)
        .e("assistant/chunk", r#"{"turn":1,"step":1,"delta":"Let me "}"#)
        .e("assistant/chunk", r#"{"turn":1,"step":1,"delta":"look."}"#)
        .e(
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool-call","id":"call-1","name":"ls","input":{"path":"src"}}]}}"#,
        )
        .e(
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"call-1","name":"ls","arguments":{"path":"src"}}"#,
        )
        .e(
            "tool/result",
            r#"{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"lib.rs main.rs"}]}]}}"#,
        )
        .with(|e| {
            e.with_surface_op("\"append\"")
                .unwrap()
                .with_source_event_seqs(&[6])
                .unwrap()
        })
        .e("step/end", r#"{"turn":1,"step":1}"#)
        .e("step/start", r#"{"turn":1,"step":2}"#)
        .e(
            "assistant/message",
            r#"{"turn":1,"step":2,"message":{"id":"a2","role":"assistant","content":[{"type":"text","text":"Two files."}]}}"#,
        )
        .e("step/end", r#"{"turn":1,"step":2}"#)
        .e("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#)
        .batch();
    // Turn 2: split across two batches; lossless JSON spellings in data.
    s.e("turn/start", r#"{"turn":2}"#)
        .e(
            "user/message",
            r#"{"id":"u2","text":"show lib.rs","n":1e+21,"s":"\ud800"}"#,
        )
        .e("step/start", r#"{"turn":2,"step":1}"#)
        .e("assistant/chunk", r#"{"turn":2,"step":1,"delta":"Reading"}"#)
        .e(
            "assistant/message",
            r#"{"turn":2,"step":1,"message":{"id":"a3","role":"assistant","content":[{"type":"tool-call","id":"call-2","name":"read","input":{"path":"src/lib.rs"}}]}}"#,
        )
        .batch()
        .e(
            "tool/call",
            r#"{"turn":2,"step":1,"callId":"call-2","name":"read","arguments":{"path":"src/lib.rs"}}"#,
        )
        .e(
            "tool/result",
            r#"{"turn":2,"step":1,"message":{"id":"r2","role":"user","source":{"kind":"tool","callId":"call-2"},"content":[{"type":"tool-result","toolCallId":"call-2","content":[{"type":"text","text":"pub mod x;"}]}]}}"#,
        )
        .e("step/end", r#"{"turn":2,"step":1}"#)
        .e("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#)
        .batch();
    // Turn 3: one batch, with an ignorable plugin event (a kind-14 record).
    s.e("turn/start", r#"{"turn":3}"#)
        .e("user/message", r#"{"id":"u3","text":"thanks"}"#)
        .e("plugin/telemetry", r#"{"tokens":42}"#)
        .with(Event::with_ignorable)
        .e("step/start", r#"{"turn":3,"step":1}"#)
        .e(
            "assistant/message",
            r#"{"turn":3,"step":1,"message":{"id":"a4","role":"assistant","content":[{"type":"text","text":"You're welcome."}]}}"#,
        )
        .e("step/end", r#"{"turn":3,"step":1}"#)
        .e("turn/end", r#"{"turn":3,"reason":{"kind":"completed"}}"#)
        .batch();
    // Turn 4: left open by the "crash", in two batches.
    s.e("turn/start", r#"{"turn":4}"#)
        .e("user/message", r#"{"id":"u4","text":"now run the tests"}"#)
        .e("step/start", r#"{"turn":4,"step":1}"#)
        .e("assistant/chunk", r#"{"turn":4,"step":1,"delta":"Running"}"#)
        .batch()
        .e(
            "assistant/message",
            r#"{"turn":4,"step":1,"message":{"id":"a5","role":"assistant","content":[{"type":"tool-call","id":"call-4a","name":"test","input":{}},{"type":"tool-call","id":"call-4b","name":"lint","input":{}}]}}"#,
        )
        .e(
            "tool/call",
            r#"{"turn":4,"step":1,"callId":"call-4a","name":"test","arguments":{}}"#,
        );
    for i in 0..extra_tail {
        s.batch();
        for j in 0..8 {
            s.e(
                "assistant/chunk",
                &format!(
                    r#"{{"turn":4,"step":1,"delta":"test output line {i}.{j}: ok, all green so far"}}"#
                ),
            );
        }
    }
    s.done()
}

/// A session file written through the public API, with every record located.
#[derive(Clone)]
struct Log {
    policy: Policy,
    batches: Vec<Vec<Event>>,
    events: Vec<Event>,
    bytes: Vec<u8>,
    salt: u32,
    records_start: u64,
    starts: Vec<u64>,
    ends: Vec<u64>,
    heads: Vec<RecordHead>,
    /// Events through the last `turn/end`.
    committed: usize,
}

impl Log {
    /// End of the first `n` records.
    fn end_of(&self, n: usize) -> u64 {
        if n == 0 {
            self.records_start
        } else {
            self.ends[n - 1]
        }
    }

    fn commit_end(&self) -> u64 {
        self.end_of(self.committed)
    }

    /// How many records end at or before byte `k`.
    fn kept_at(&self, k: u64) -> usize {
        self.ends.iter().take_while(|&&e| e <= k).count()
    }

    /// The record holding byte `at`.
    fn record_at(&self, at: u64) -> usize {
        self.ends.iter().position(|&e| e > at).unwrap()
    }

    fn record(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i] as usize..self.ends[i] as usize]
    }

    /// The event index where each batch starts.
    fn batch_starts(&self) -> Vec<usize> {
        let mut at = 0;
        self.batches
            .iter()
            .map(|b| {
                let start = at;
                at += b.len();
                start
            })
            .collect()
    }
}

/// Appends the encoded records of `events` to `out`, with the placements the
/// tracker gives them after `before`, as a writer of this file would.
fn encode_after(
    out: &mut Vec<u8>,
    policy: Policy,
    before: &[Event],
    events: &[Event],
    watermark: u64,
    salt: u32,
) {
    let mut tracker = Tracker::new(policy);
    tracker.accept_batch(before).unwrap();
    for (event, placement) in events.iter().zip(tracker.accept_batch(events).unwrap()) {
        format::encode_record(out, event, placement, watermark, salt);
    }
}

/// Writes `batches` through a `Store` (default durability: fdatasync at every
/// batch holding a `turn/end`), then checks the file byte for byte against an
/// independent encoding and records where each record starts and ends.
fn write_log(dir: &Path, batches: &[Vec<Event>], policy: Policy) -> Log {
    let store = Store::open(dir).unwrap();
    store.create_with_policy(header(), policy).unwrap();
    let mut written = 0u64;
    let mut durable = 0u64;
    for (i, batch) in batches.iter().enumerate() {
        let receipt = store.append(ID, batch).unwrap();
        written += batch.len() as u64;
        // The first batch is materialized durably; later ones are acknowledged
        // when their batch holds a turn/end.
        if i == 0 || batch.iter().any(|e| e.kind() == EventKind::TurnEnd) {
            durable = written;
        }
        assert_eq!((receipt.next_seq, receipt.durable), (written, durable));
    }
    drop(store); // a crash: no close, no flush of the open turn
    let bytes = fs::read(log_path(dir)).unwrap();
    let file = format::decode_file_header(&bytes).unwrap();
    assert_eq!((file.header.clone(), file.policy), (header(), policy));

    // Every byte, re-encoded: each record's watermark is the length that was
    // fdatasync'ed before its batch was written; the first batch's records,
    // published with the file, state the file's length as it was published
    // (FORMAT.md, "Published files"; a record's length does not depend on
    // its watermark, so one encoding finds it).
    let mut expect = Vec::new();
    format::encode_file_header(&mut expect, &header(), policy, file.salt);
    let mut events: Vec<Event> = Vec::new();
    let mut probe = expect.clone();
    encode_after(&mut probe, policy, &[], &batches[0], 0, file.salt);
    let mut synced = probe.len() as u64;
    for (i, batch) in batches.iter().enumerate() {
        encode_after(&mut expect, policy, &events, batch, synced, file.salt);
        events.extend(batch.iter().cloned());
        if i == 0 || batch.iter().any(|e| e.kind() == EventKind::TurnEnd) {
            synced = expect.len() as u64;
        }
    }
    assert_bytes(
        &bytes,
        &expect,
        "the file is exactly the specified encoding",
    );

    let found: Vec<(u64, RecordHead)> =
        record::heads(&bytes, file.records_start, bytes.len() as u64).collect();
    assert_eq!(found.len(), events.len());
    let committed = events
        .iter()
        .rposition(|e| e.kind() == EventKind::TurnEnd)
        .map_or(0, |i| i + 1);
    Log {
        policy,
        batches: batches.to_vec(),
        events,
        salt: file.salt,
        records_start: file.records_start,
        starts: found.iter().map(|(at, _)| *at).collect(),
        ends: found.iter().map(|(at, h)| at + h.record_len()).collect(),
        heads: found.iter().map(|(_, h)| *h).collect(),
        bytes,
        committed,
    }
}

/// How FORMAT.md classifies the bytes `rest` that follow the last valid
/// record, when they are not a valid record themselves.
fn expected_reason(rest: &[u8]) -> CutReason {
    if rest.iter().all(|&b| b == 0) {
        return CutReason::ZeroFill;
    }
    if rest.len() < MIN_RECORD_LEN {
        return CutReason::Incomplete;
    }
    match format::parse_head(&rest[..RECORD_HEADER_LEN]) {
        Ok(head) if head.record_len() > rest.len() as u64 => CutReason::Incomplete,
        _ => CutReason::Invalid,
    }
}

/// The bytes a single clean repair leaves when the first `n` records of `log`
/// are kept: those records, then the closers, flagged synthetic, whose
/// watermark is the kept length (cut and fdatasync'ed before they are
/// written; FORMAT.md, "Repair").
fn repaired_bytes(log: &Log, n: usize, closers: &[Event]) -> Vec<u8> {
    let mut out = log.bytes[..log.end_of(n) as usize].to_vec();
    let mut tracker = Tracker::new(log.policy);
    tracker.accept_batch(&log.events[..n]).unwrap();
    for (event, placement) in closers.iter().zip(tracker.accept_batch(closers).unwrap()) {
        format::encode_synthetic_record(&mut out, event, placement, log.end_of(n), log.salt);
    }
    out
}

/// Byte images are too long for `assert_eq!`'s dump: name the first
/// difference instead.
#[track_caller]
fn assert_bytes(actual: &[u8], expected: &[u8], ctx: &str) {
    if actual != expected {
        let at = actual
            .iter()
            .zip(expected)
            .position(|(a, b)| a != b)
            .unwrap_or(actual.len().min(expected.len()));
        panic!(
            "{ctx}: bytes differ at offset {at} (actual {} bytes, expected {})",
            actual.len(),
            expected.len()
        );
    }
}

type CutTuple = (u64, u64, u64, CutReason);

fn cut_tuple(cut: &Option<turnwal::Cut>) -> Option<CutTuple> {
    cut.as_ref().map(|c| (c.offset, c.seq, c.len, c.reason))
}

fn state_of(cut: bool, closers: bool) -> LogState {
    match (cut, closers) {
        (true, _) => LogState::Torn,
        (false, true) => LogState::OpenTurn,
        (false, false) => LogState::Clean,
    }
}

/// Installs `image` as the session file of store `dir`.
/// Installs `image` as the log, without a durability proof: the images
/// stand for what a disk holds after a power loss in the window where the
/// proof had not reached it (docs/RECOVERY.md), so these tests judge them
/// by the watermarks and the record frames alone. What the proof adds is
/// tested in `durability_proof_makes_every_acknowledged_byte_corrupt`.
fn install(dir: &Path, image: &[u8]) -> PathBuf {
    let path = log_path(dir);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, image).unwrap();
    let _ = fs::remove_file(turnwal::backend::wal::proof::path_of(&path));
    path
}

/// The recovery oracle. `image` holds the first `n` records of `log` intact,
/// followed by bytes that recovery must cut for `reason` (or nothing). Checks:
/// `inspect` gives the kept events plus the exact closers and writes nothing;
/// `load` commits exactly those bytes; a rescan finds a clean log; a second
/// recovery changes nothing; the next turn appends and loads back.
fn check_recovers(dir: &Path, log: &Log, image: &[u8], n: usize, reason: CutReason) {
    let end_n = log.end_of(n);
    assert_eq!(&image[..end_n as usize], &log.bytes[..end_n as usize]);
    let kept = &log.events[..n];
    let closers = interrupted_turn_closers(kept);
    let expected: Vec<Event> = kept.iter().chain(&closers).cloned().collect();
    let tail_len = image.len() as u64 - end_n;
    let cut = (tail_len > 0).then_some((end_n, n as u64, tail_len, reason));
    let state = state_of(cut.is_some(), !closers.is_empty());
    let ctx = || format!("image of {} bytes keeping {n} records", image.len());
    let path = install(dir, image);

    let store = Store::open(dir).unwrap();
    let view = store
        .inspect(ID)
        .unwrap_or_else(|e| panic!("{}: {e}", ctx()));
    assert_eq!(view.events, expected, "{}", ctx());
    assert_eq!(
        (view.stored, view.state, cut_tuple(&view.cut)),
        (n as u64, state, cut),
        "{}",
        ctx()
    );
    // read_from serves the kept events as stored: no closers, no repair.
    assert_eq!(store.read_from(ID, 0).unwrap(), kept, "{}", ctx());
    assert_eq!(store.read_from(ID, n as u64 / 2).unwrap(), kept[n / 2..]);
    // read_last seeks from the log's end, and whatever the tail holds serves
    // exactly the kept events' last ones.
    for k in [0, 1, 3, n / 2, n, n + 7] {
        let last = store.read_last(ID, k as u64).unwrap();
        assert_eq!(
            last,
            kept[n.saturating_sub(k)..],
            "read_last {k}: {}",
            ctx()
        );
        let first = store.read_first(ID, k).unwrap();
        assert_eq!(first, kept[..k.min(n)], "read_first {k}: {}", ctx());
        // The inspect view from seq k: read from the end, closers included.
        let from = store.inspect_from(ID, k as u64).unwrap();
        assert_eq!(
            from,
            expected[k.min(expected.len())..],
            "inspect_from {k}: {}",
            ctx()
        );
    }
    assert_bytes(&fs::read(&path).unwrap(), image, "inspect wrote nothing");
    drop(store);

    let store = Store::open(dir).unwrap();
    let view = store.load(ID).unwrap_or_else(|e| panic!("{}: {e}", ctx()));
    assert_eq!(view.events, expected, "{}", ctx());
    assert_eq!(
        (view.stored, view.state, cut_tuple(&view.cut)),
        (expected.len() as u64, state, cut),
        "{}",
        ctx()
    );
    let repaired = fs::read(&path).unwrap();
    assert_bytes(&repaired, &repaired_bytes(log, n, &closers), &ctx());
    // The repaired file ends at a record boundary and needs nothing more.
    let rescan = scan::scan_log(&repaired, &path).unwrap();
    assert!(rescan.scan.cut.is_none() && rescan.scan.closers.is_empty());
    assert_eq!(rescan.frames.valid_end, repaired.len() as u64);
    let report = store.verify(ID).unwrap();
    assert_eq!(
        (report.state, report.events, report.problem),
        (LogState::Clean, expected.len() as u64, None)
    );
    drop(store);

    // Recovery is idempotent.
    let store = Store::open(dir).unwrap();
    let view = store.load(ID).unwrap();
    assert_eq!(view.events, expected);
    assert_eq!((view.state, view.cut), (LogState::Clean, None));
    assert_bytes(&fs::read(&path).unwrap(), &repaired, "second recovery");

    // Appends continue the seq chain with the next turn number.
    let mut tracker = Tracker::new(log.policy);
    tracker.accept_batch(&expected).unwrap();
    let next = next_turn(
        expected.len() as u64,
        u64::from(tracker.placement().turn) + 1,
    );
    let receipt = store.append(ID, &next).unwrap();
    let total = (expected.len() + next.len()) as u64;
    assert_eq!((receipt.next_seq, receipt.durable), (total, total));
    drop(store);
    let store = Store::open(dir).unwrap();
    let view = store.load(ID).unwrap();
    let all: Vec<Event> = expected.iter().chain(&next).cloned().collect();
    assert_eq!(view.events, all);
    let mut bytes = repaired.clone();
    encode_after(
        &mut bytes,
        log.policy,
        &expected,
        &next,
        repaired.len() as u64,
        log.salt,
    );
    assert_bytes(&fs::read(&path).unwrap(), &bytes, "appended turn");
}

/// A one-shot turn starting at `seq`.
fn next_turn(seq: u64, turn: u64) -> Vec<Event> {
    let time = T0 + 1_000_000;
    vec![
        Event::new("turn/start", seq, time, &format!(r#"{{"turn":{turn}}}"#)).unwrap(),
        Event::new(
            "user/message",
            seq + 1,
            time + 1,
            r#"{"id":"next","text":"continue"}"#,
        )
        .unwrap(),
        Event::new(
            "turn/end",
            seq + 2,
            time + 2,
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        )
        .unwrap(),
    ]
}

/// Runs `f` over `items` on several threads, each with its own store
/// directory. The exhaustive loops mostly wait on fdatasync (every `load`
/// opens a writer, which syncs), so more threads than cores overlap those
/// waits (the file system commits concurrent syncs together).
fn parallel<T: Sync>(items: &[T], f: impl Fn(&Path, &T) + Sync) {
    let threads = 8;
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for part in items.chunks(chunk) {
            let f = &f;
            s.spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                for item in part {
                    f(dir.path(), item);
                }
            });
        }
    });
}

fn main_log(dir: &Path) -> Log {
    let log = write_log(dir, &main_script(0), Policy::Strict);
    assert!(log.batches.len() >= 5 && log.committed < log.events.len());
    log
}

fn expect_corrupt(result: Result<turnwal::SessionView, Error>) -> Box<turnwal::Corruption> {
    match result {
        Err(Error::Corrupt(c)) => c,
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(view) => panic!(
            "expected corruption, got {} events ({})",
            view.events.len(),
            view.state
        ),
    }
}

/// The proof RECOVERY.md's rules name, in their order, for damage first
/// at record `r` and ending before byte `damage_end`, with no durability
/// proof: the first record is never torn (`first-record`); an intact
/// earlier record of the published first batch states the file's length
/// past it (`inside-published-copy`, named by the first record stating the
/// largest watermark); else the first intact later record whose watermark
/// lies past it (`below-later-watermark`).
fn proof_text(log: &Log, r: usize, damage_end: u64) -> String {
    let offset = log.starts[r];
    if r == 0 {
        return "this is the log's first record, written with the file".to_owned();
    }
    let stated = (0..r).max_by_key(|&j| (log.heads[j].watermark, std::cmp::Reverse(j)));
    if let Some(j) = stated.filter(|&j| log.heads[j].watermark > offset) {
        return format!(
            "the record at byte {} (seq {j}) was published in a file durable through byte {}, \
             so this record had been acknowledged [rule: inside-published-copy]",
            log.starts[j], log.heads[j].watermark
        );
    }
    let j = (r + 1..log.events.len())
        .find(|&j| log.starts[j] >= damage_end && log.heads[j].watermark > offset)
        .expect("a later record proves the hole acknowledged");
    format!(
        "the record at byte {} (seq {j}) shows the log was durable through byte {}",
        log.starts[j], log.heads[j].watermark
    )
}

/// Checks that `image` (installed in `dir`, without a durability proof)
/// cut short inside the published first batch, keeping its first `n`
/// records intact, is refused as corrupt at the first missing or damaged
/// byte and left as it was: the first batch is published whole (FORMAT.md,
/// "Published files"), so no crash can shorten it.
fn check_refused_inside_first_batch(dir: &Path, log: &Log, image: &[u8], n: usize) {
    let path = install(dir, image);
    let end_n = log.end_of(n);
    let store = Store::open(dir).unwrap();
    for result in [store.inspect(ID), store.load(ID)] {
        let c = expect_corrupt(result);
        let ctx = format!("image of {} bytes keeping {n} records", image.len());
        assert_eq!(c.offset, end_n, "{ctx}: {}", c.reason);
        let rule = match () {
            _ if image.len() as u64 == end_n && n > 0 => "shorter-than-proven",
            _ if n == 0 => "first-record",
            _ => "inside-published-copy",
        };
        assert!(
            c.reason.contains(&format!("[rule: {rule}]")),
            "{ctx}: expected {rule}: {}",
            c.reason
        );
    }
    assert_bytes(&fs::read(&path).unwrap(), image, "a refusal wrote nothing");
}

#[test]
fn truncation_at_every_byte_offset() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let len = log.bytes.len() as u64;

    // Inside the file header: materialization publishes only whole files, so
    // a short header is corruption, never a torn tail.
    let header_cuts: Vec<u64> = (0..log.records_start).collect();
    parallel(&header_cuts, |dir, &k| {
        let path = install(dir, &log.bytes[..k as usize]);
        let store = Store::open(dir).unwrap();
        let c = expect_corrupt(store.inspect(ID));
        assert_eq!((c.offset, c.seq, &c.path), (0, None, &path), "cut at {k}");
        let c = expect_corrupt(store.load(ID));
        assert_eq!((c.offset, c.seq), (0, None), "cut at {k}");
        assert_bytes(
            &fs::read(&path).unwrap(),
            &log.bytes[..k as usize],
            "header cut",
        );
    });

    // Inside the first batch: published whole with the file, never torn.
    let first_batch_end = log.end_of(log.batches[0].len());
    let cuts: Vec<u64> = (log.records_start..=len).collect();
    parallel(&cuts, |dir, &k| {
        let n = log.kept_at(k);
        if k < first_batch_end {
            check_refused_inside_first_batch(dir, &log, &log.bytes[..k as usize], n);
            return;
        }
        let rest = &log.bytes[log.end_of(n) as usize..k as usize];
        check_recovers(
            dir,
            &log,
            &log.bytes[..k as usize],
            n,
            expected_reason(rest),
        );
    });
    eprintln!(
        "truncation: {} header cuts, {} record-region cuts",
        header_cuts.len(),
        cuts.len()
    );
}

/// A tiny seeded generator (xorshift64*), so garbage is reproducible.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn crash_during_repair_converges() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let n = log.events.len();
    let base = log.bytes.len() as u64;
    // The crash tore the write of a large tool/result: 2,500 of its bytes
    // reached the file.
    let big = Event::new(
        "tool/result",
        n as u64,
        T0 + 999,
        &format!(
            r#"{{"turn":4,"step":1,"message":{{"id":"r4","role":"user","source":{{"kind":"tool","callId":"call-4a"}},"content":[{{"type":"tool-result","toolCallId":"call-4a","content":[{{"type":"text","text":"{}"}}]}}]}}}}"#,
            "test output ".repeat(250)
        ),
    )
    .unwrap();
    let mut torn = Vec::new();
    encode_after(
        &mut torn,
        log.policy,
        &log.events,
        std::slice::from_ref(&big),
        log.commit_end(),
        log.salt,
    );
    torn.truncate(2500);
    let crashed: Vec<u8> = log.bytes.iter().chain(&torn).copied().collect();

    // One clean repair.
    let closers = interrupted_turn_closers(&log.events);
    assert_eq!(closers.len(), 4, "two tool results, step/end, turn/end");
    let expected: Vec<Event> = log.events.iter().chain(&closers).cloned().collect();
    let path = install(dir.path(), &crashed);
    let view = Store::open(dir.path()).unwrap().load(ID).unwrap();
    assert_eq!(view.events, expected);
    assert_eq!(
        cut_tuple(&view.cut),
        Some((base, n as u64, 2500, CutReason::Incomplete))
    );
    let clean = fs::read(&path).unwrap();
    assert_bytes(&clean, &repaired_bytes(&log, n, &closers), "clean repair");
    let closer_bytes = &clean[base as usize..];
    let first_closer = log.end_of(n) as usize..;
    let first_len = format::parse_head(&clean[first_closer][..RECORD_HEADER_LEN])
        .unwrap()
        .record_len() as usize;
    assert!(
        torn.len() > closer_bytes.len(),
        "old bytes outlast the closers"
    );

    // Every state an interrupted repair can leave, with the cut the next scan
    // must report: the untouched crash; the torn bytes cut but no closers
    // yet; the cut plus any prefix of the closer bytes; and (for a repair that
    // would write before it truncates) any prefix of the closers written over
    // the old tail, up to all of them with old bytes still after them.
    let mut images: Vec<(Vec<u8>, Option<CutTuple>)> = Vec::new();
    let reason_at = |image: &[u8], at: usize| expected_reason(&image[at..]);
    for j in 0..=closer_bytes.len() {
        for over_old in [false, true] {
            let mut image = log.bytes.clone();
            image.extend_from_slice(&closer_bytes[..j]);
            if over_old {
                image.extend_from_slice(&torn[j.min(torn.len())..]);
            }
            let len = image.len() as u64;
            let cut = if j == closer_bytes.len() {
                // The synthetic turn/end is complete: the repair committed;
                // only the old bytes after it (if any) are cut.
                let end = base + j as u64;
                let seq = expected.len() as u64;
                (len > end).then(|| (end, seq, len - end, reason_at(&image, end as usize)))
            } else if j >= first_len {
                // Some synthetic closers without their turn/end.
                Some((base, n as u64, len - base, CutReason::InterruptedRepair))
            } else {
                (len > base).then(|| (base, n as u64, len - base, reason_at(&image, base as usize)))
            };
            images.push((image, cut));
        }
    }
    // A power loss before the closers' fdatasync may keep later closer
    // records and lose an earlier one (zeros where it was). The synthetic
    // records after the hole carry the kept length as their watermark, so
    // nothing proves the hole acknowledged: everything from the first closer
    // is cut and the repair redone.
    let len = clean.len() as u64;
    for (at, head) in record::heads(&clean, base, len) {
        let mut image = clean.clone();
        image[at as usize..(at + head.record_len()) as usize].fill(0);
        let reason = if at == base {
            CutReason::Invalid
        } else {
            CutReason::InterruptedRepair
        };
        images.push((image, Some((base, n as u64, len - base, reason))));
    }
    parallel(&images, |dir, (image, cut)| {
        let ctx = format!("a {}-byte image", image.len());
        let path = install(dir, image);
        let state = match cut {
            Some(_) => LogState::Torn,
            None if image.len() == clean.len() => LogState::Clean,
            None => LogState::OpenTurn,
        };
        let store = Store::open(dir).unwrap();
        let view = store.inspect(ID).unwrap();
        assert_eq!(view.events, expected, "inspect of {ctx}");
        assert_eq!((view.state, cut_tuple(&view.cut)), (state, *cut), "{ctx}");
        assert_bytes(&fs::read(&path).unwrap(), image, "inspect wrote nothing");
        drop(store);
        let view = Store::open(dir).unwrap().load(ID).unwrap();
        assert_eq!(view.events, expected, "load of {ctx}");
        assert_eq!((view.state, cut_tuple(&view.cut)), (state, *cut), "{ctx}");
        assert_bytes(&fs::read(&path).unwrap(), &clean, &ctx);
        let view = Store::open(dir).unwrap().load(ID).unwrap();
        assert_eq!(
            (view.events, view.state),
            (expected.clone(), LogState::Clean)
        );
        assert_bytes(&fs::read(&path).unwrap(), &clean, &ctx);
    });
    eprintln!("crash during repair: {} intermediate images", images.len());
}

/// The file image with one bit of byte `at` flipped.
fn flipped(image: &[u8], at: usize, bit: u32) -> Vec<u8> {
    let mut out = image.to_vec();
    out[at] ^= 1 << bit;
    out
}

/// Flips bits of the installed log in place (cheap: one byte written).
fn flip_in_place(path: &Path, image: &[u8], at: usize, bit: Option<u32>) {
    use std::io::{Seek, SeekFrom};
    let mut file = fs::OpenOptions::new().write(true).open(path).unwrap();
    let byte = image[at] ^ bit.map_or(0, |b| 1 << b);
    file.seek(SeekFrom::Start(at as u64)).unwrap();
    file.write_all(&[byte]).unwrap();
}

/// Installs `image` in `dir` unless it is already there.
fn ensure_installed(dir: &Path, image: &[u8]) -> PathBuf {
    let path = log_path(dir);
    if fs::read(&path).ok().as_deref() != Some(image) {
        install(dir, image);
    }
    path
}

/// RECOVERY.md's `damaged-in-place` rule, for an image whose only damage
/// lies inside record `r`: its frame is intact (the head's lengths and seq,
/// and the trailer, as written), the record after it is there, and no
/// 512-byte sector could have been torn without breaking that frame (none
/// lies wholly within `[start + 32, end - 4)`, no boundary falls within
/// `(start, start + 32]`). Its checksum then necessarily fails.
fn damaged_in_place(image: &[u8], log: &Log, r: usize) -> bool {
    let (start, end) = (log.starts[r] as usize, log.ends[r] as usize);
    if r + 1 >= log.events.len() || log.ends[r + 1] as usize > image.len() {
        return false;
    }
    let frame_intact = format::parse_head(&image[start..start + RECORD_HEADER_LEN])
        .is_ok_and(|head| head.seq == r as u64 && head.record_len() == (end - start) as u64)
        && image[end - 4..end] == log.bytes[end - 4..end];
    let boundary_in_head = (start + 1).next_multiple_of(512) <= start + 32;
    let interior = (start + 32).next_multiple_of(512) + 512 <= end - 4;
    frame_intact && !boundary_in_head && !interior
}

/// What `inspect` must show for `image`, whose record `r` is damaged and not
/// proven acknowledged: the records before it, the closers, a torn state —
/// unless the damage is `damaged-in-place`, which no tear produces: then
/// the session is refused at that record by that rule.
fn check_cut_at_damaged_record(dir: &Path, log: &Log, image: &[u8], r: usize, ctx: &str) {
    if damaged_in_place(image, log, r) {
        let c = expect_corrupt(Store::open(dir).unwrap().inspect(ID));
        assert_eq!((c.offset, c.seq), (log.starts[r], Some(r as u64)), "{ctx}");
        assert!(
            c.reason.contains("[rule: damaged-in-place]"),
            "{ctx}: {}",
            c.reason
        );
        return;
    }
    let start = log.starts[r];
    let kept = &log.events[..r];
    let expected: Vec<Event> = kept
        .iter()
        .cloned()
        .chain(interrupted_turn_closers(kept))
        .collect();
    let cut = (
        start,
        r as u64,
        image.len() as u64 - start,
        expected_reason(&image[start as usize..]),
    );
    let view = Store::open(dir)
        .unwrap()
        .inspect(ID)
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    assert_eq!(view.events, expected, "{ctx}");
    assert_eq!(
        (view.stored, view.state, cut_tuple(&view.cut)),
        (r as u64, LogState::Torn, Some(cut)),
        "{ctx}"
    );
    assert!(matches!(cut.3, CutReason::Invalid | CutReason::Incomplete));
}

#[test]
fn single_bit_flips() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let commit_end = log.commit_end() as usize;
    let records_start = log.records_start as usize;
    let len = log.bytes.len();
    // Two append batches of the open turn follow the committed records.
    let tail_batches = log
        .batch_starts()
        .iter()
        .filter(|&&s| s >= log.committed)
        .count();
    assert_eq!(tail_batches, 2);

    // Every bit of every committed record: a record of a later batch carries
    // a watermark (the length fdatasync'ed before it was written) past the
    // damaged record, proving it acknowledged, so both inspect and load
    // refuse the session with the record's offset and seq and name that
    // proof; never a shortened or altered log.
    let committed: Vec<usize> = (records_start..commit_end).collect();
    parallel(&committed, |dir, &at| {
        let path = ensure_installed(dir, &log.bytes);
        let r = log.record_at(at as u64);
        let proof = proof_text(&log, r, at as u64 + 1);
        for bit in 0..8 {
            flip_in_place(&path, &log.bytes, at, Some(bit));
            let store = Store::open(dir).unwrap();
            for result in [store.inspect(ID), store.load(ID)] {
                let c = expect_corrupt(result);
                let ctx = format!("bit {bit} of byte {at} (record {r})");
                assert_eq!(
                    (c.offset, c.seq, &c.path),
                    (log.starts[r], Some(r as u64), &path),
                    "{ctx}"
                );
                assert!(c.reason.contains(&proof), "{ctx}: {}", c.reason);
            }
            flip_in_place(&path, &log.bytes, at, None);
        }
        assert_bytes(
            &fs::read(&path).unwrap(),
            &log.bytes,
            "a refused load wrote",
        );
    });

    // The file header: corruption at offset 0. A flipped version field reads
    // as another format version (FORMAT.md checks the version before the
    // header checksum, since another version may lay the header out
    // differently), so it is refused as unsupported, never opened — unless
    // the flip makes another version this build reads (3 → 2 or 1), whose header
    // checksum then fails: corrupt at offset 0.
    let header: Vec<usize> = (0..records_start).collect();
    parallel(&header, |dir, &at| {
        let path = ensure_installed(dir, &log.bytes);
        for bit in 0..8 {
            flip_in_place(&path, &log.bytes, at, Some(bit));
            let flipped = fs::read(&path).unwrap();
            let readable_version = (8..10).contains(&at)
                && (1..=3).contains(&u16::from_le_bytes([flipped[8], flipped[9]]));
            let store = Store::open(dir).unwrap();
            for result in [store.inspect(ID), store.load(ID)] {
                match result {
                    Err(Error::Corrupt(c)) if !(8..10).contains(&at) || readable_version => {
                        assert_eq!((c.offset, c.seq, &c.path), (0, None, &path));
                        if readable_version {
                            assert!(c.reason.contains("header checksum"), "{}", c.reason);
                        }
                    }
                    Err(Error::Unsupported { path: p, detail }) if (8..10).contains(&at) => {
                        assert_eq!(p, path);
                        assert!(detail.contains("session file format v"), "{detail}");
                    }
                    Err(e) => panic!("bit {bit} of header byte {at}: {e}"),
                    Ok(_) => panic!("bit {bit} of header byte {at}: opened"),
                }
            }
            flip_in_place(&path, &log.bytes, at, None);
        }
        assert_bytes(
            &fs::read(&path).unwrap(),
            &log.bytes,
            "a refused load wrote",
        );
    });

    // The open tail was never acknowledged: a flip there cuts the damaged
    // record and everything after it, and the prefix gets its closers.
    // inspect for every bit; the full load-and-repair oracle for one bit of
    // every byte.
    let tail: Vec<usize> = (commit_end..len).collect();
    parallel(&tail, |dir, &at| {
        let r = log.record_at(at as u64);
        let path = install(dir, &log.bytes);
        for bit in 0..8 {
            flip_in_place(&path, &log.bytes, at, Some(bit));
            let image = flipped(&log.bytes, at, bit);
            check_cut_at_damaged_record(dir, &log, &image, r, &format!("tail bit {bit} of {at}"));
        }
        let image = flipped(&log.bytes, at, at as u32 % 8);
        if !damaged_in_place(&image, &log, r) {
            let reason = expected_reason(&image[log.starts[r] as usize..]);
            check_recovers(dir, &log, &image, r, reason);
        }
    });

    // The known limit (FORMAT.md's watermark rule, RECOVERY.md "Known
    // limit"): when nothing was written after the last committed batch, no
    // later record proves that batch acknowledged, so damage inside it looks
    // exactly like a torn write. The engine cuts at the damaged record and
    // closes the turn, and reports the log as torn (so `verify` shows it);
    // earlier batches stay proven by the last batch's watermark.
    let image = log.bytes[..commit_end].to_vec();
    let last_batch = log.starts[*log
        .batch_starts()
        .iter()
        .rfind(|&&s| s < log.committed)
        .unwrap()];
    let bytes: Vec<usize> = (records_start..commit_end).collect();
    parallel(&bytes, |dir, &at| {
        let r = log.record_at(at as u64);
        let path = ensure_installed(dir, &image);
        if (at as u64) < last_batch {
            let proof = proof_text(&log, r, at as u64 + 1);
            flip_in_place(&path, &image, at, Some(at as u32 % 8));
            let c = expect_corrupt(Store::open(dir).unwrap().inspect(ID));
            assert_eq!((c.offset, c.seq), (log.starts[r], Some(r as u64)));
            assert!(c.reason.contains(&proof), "{}", c.reason);
            flip_in_place(&path, &image, at, None);
            return;
        }
        for bit in 0..8 {
            flip_in_place(&path, &image, at, Some(bit));
            let flipped = flipped(&image, at, bit);
            let ctx = format!("last batch bit {bit} of {at}");
            check_cut_at_damaged_record(dir, &log, &flipped, r, &ctx);
        }
        flip_in_place(&path, &image, at, None);
        // The full repair oracle, and verify's verdict, for one byte in eight.
        if at % 8 == 0 {
            let flipped = flipped(&image, at, at as u32 / 8 % 8);
            install(dir, &flipped);
            let report = Store::open(dir).unwrap().verify(ID).unwrap();
            if damaged_in_place(&flipped, &log, r) {
                assert_eq!(report.state, LogState::Corrupt);
            } else {
                assert_eq!((report.state, report.events), (LogState::Torn, r as u64));
                let reason = expected_reason(&flipped[log.starts[r] as usize..]);
                check_recovers(dir, &log, &flipped, r, reason);
            }
        }
    });
    eprintln!(
        "bit flips: {} committed bits (inspect + load), {} header bits, {} tail bits, {} last-batch bytes",
        committed.len() * 8,
        header.len() * 8,
        tail.len() * 8,
        commit_end - last_batch as usize
    );
}

/// The record boundaries the tail tests append after: the commit point, a
/// mid-turn boundary (between the open turn's batches), and the end of the
/// open turn with a step open and two calls unanswered.
fn tail_boundaries(log: &Log) -> Vec<usize> {
    let mid = *log.batch_starts().last().unwrap();
    assert!(mid > log.committed);
    vec![log.committed, mid, log.events.len()]
}

#[test]
fn zero_and_garbage_tails_are_cut() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let mut cases: Vec<(usize, Vec<u8>, CutReason)> = Vec::new();
    for n in tail_boundaries(&log) {
        let prefix = &log.bytes[..log.end_of(n) as usize];
        for z in [
            1, 2, 3, 4, 8, 51, 52, 55, 56, 57, 100, 511, 512, 513, 4095, 4096, 4097, 65536,
        ] {
            let image = prefix.iter().copied().chain(std::iter::repeat_n(0, z));
            cases.push((n, image.collect(), CutReason::ZeroFill));
        }
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ n as u64);
        let mut sizes = vec![1, 55, 56, 57, 200];
        sizes.extend((0..35).map(|_| 1 + rng.next() as usize % 4096));
        for size in sizes {
            let garbage = rng.bytes(size);
            assert!(garbage.iter().any(|&b| b != 0));
            let reason = expected_reason(&garbage);
            assert!(matches!(reason, CutReason::Invalid | CutReason::Incomplete));
            let image = prefix.iter().chain(&garbage).copied().collect();
            cases.push((n, image, reason));
        }
    }
    parallel(&cases, |dir, (n, image, reason)| {
        check_recovers(dir, &log, image, *n, *reason);
    });
    eprintln!("zero and garbage tails: {} images", cases.len());
}

#[test]
fn stale_copied_records_are_never_returned() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    // The same session written again (another salt), one batch longer, so it
    // has a record for every seq this log could continue with.
    let other = write_log(other_dir.path(), &main_script(1), Policy::Strict);
    assert_ne!(other.salt, log.salt);
    let mut cases: Vec<(usize, Vec<u8>)> = Vec::new();
    for n in [0, 1, log.committed, log.committed + 2, log.events.len()] {
        let prefix = &log.bytes[..log.end_of(n) as usize];
        // A byte-exact copy of another valid record of this file: its seq
        // breaks the chain.
        for j in (0..log.events.len()).filter(|&j| j != n) {
            cases.push((n, prefix.iter().chain(log.record(j)).copied().collect()));
        }
        // The record with exactly the next seq, from another file: equal
        // fields and payload, but another salt in its checksum.
        let foreign = other.record(n);
        assert_eq!(other.heads[n].seq, n as u64);
        if n < log.events.len() {
            assert_eq!(
                (other.events[n].clone(), other.heads[n]),
                (log.events[n].clone(), log.heads[n])
            );
        }
        cases.push((n, prefix.iter().chain(foreign).copied().collect()));
    }
    let first_batch = log.batches[0].len();
    parallel(&cases, |dir, (n, image)| {
        if *n < first_batch {
            check_refused_inside_first_batch(dir, &log, image, *n);
        } else {
            check_recovers(dir, &log, image, *n, CutReason::Invalid);
        }
    });
    eprintln!("stale and foreign records: {} images", cases.len());
}

#[test]
fn torn_sector_in_the_unacknowledged_tail() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    // A longer open turn (three more batches of chunks), so whole sectors
    // fall inside it with valid records after them.
    let log = write_log(dir.path(), &main_script(3), Policy::Strict);
    let len = log.bytes.len() as u64;
    let commit_end = log.commit_end();
    let sectors: Vec<u64> = (commit_end.next_multiple_of(512)..len)
        .step_by(512)
        .filter(|&z| z + 512 <= log.starts[log.events.len() - 1])
        .collect();
    assert!(sectors.len() >= 3, "{} sectors in the tail", sectors.len());
    parallel(&sectors, |dir, &z| {
        let mut image = log.bytes.clone();
        image[z as usize..z as usize + 512].fill(0);
        let r = log.record_at(z);
        // Valid-looking records follow the hole; they are debris.
        let after = log.record_at(z + 512) + 1;
        assert!(after < log.events.len());
        let rescan = scan::scan_log(&image, &log_path(dir)).unwrap();
        assert_eq!(rescan.frames.records, r as u64);
        assert_eq!(
            expected_reason(&image[log.starts[r] as usize..]),
            CutReason::Invalid
        );
        check_recovers(dir, &log, &image, r, CutReason::Invalid);
    });
    eprintln!("torn sectors: {} sectors", sectors.len());
}

#[test]
fn acknowledged_hole_is_corruption() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    // The first three batches: turn 1 and both batches of turn 2; turn 3 and
    // the open turn were written after them.
    let early_end = log.starts[log.batch_starts()[3]];
    // Each damage: the damaged byte range and the damaged image.
    let mut damages: Vec<(std::ops::Range<usize>, Vec<u8>)> = Vec::new();
    let mut damage = |range: std::ops::Range<usize>, f: fn(&mut u8)| {
        let mut image = log.bytes.clone();
        image[range.clone()].iter_mut().for_each(f);
        assert_ne!(image[range.clone()], log.bytes[range.clone()]);
        damages.push((range, image));
    };
    // Zeroed 512-byte sectors.
    for z in (512..early_end as usize).step_by(512) {
        damage(z..z + 512, |b| *b = 0);
    }
    // A zeroed `time` field, and a whole inverted payload, in every early
    // record.
    for r in (0..log.events.len()).filter(|&r| log.ends[r] <= early_end) {
        let (start, end) = (log.starts[r] as usize, log.ends[r] as usize);
        damage(start + 32..start + 40, |b| *b = 0);
        damage(start + RECORD_HEADER_LEN..end - 4, |b| *b = !*b);
    }
    parallel(&damages, |dir, (range, image)| {
        let path = install(dir, image);
        let r = log.record_at(range.start as u64);
        let proof = proof_text(&log, r, range.end as u64);
        let at = range.start;
        let store = Store::open(dir).unwrap();
        if let Ok(events) = store.read_from(ID, 0) {
            panic!(
                "damage at {at} (record {r}): read_from gave {} events",
                events.len()
            );
        }
        for result in [store.inspect(ID), store.load(ID)] {
            let c = expect_corrupt(result);
            assert_eq!(
                (c.offset, c.seq),
                (log.starts[r], Some(r as u64)),
                "damage at {at}"
            );
            assert!(c.reason.contains(&proof), "{}", c.reason);
            assert!(
                c.to_string()
                    .contains(&format!("corrupt at byte {} (seq {r})", log.starts[r]))
            );
        }
        let report = store.verify(ID).unwrap();
        assert_eq!(report.state, LogState::Corrupt);
        assert!(report.problem.unwrap().contains(&proof));
        assert_bytes(&fs::read(&path).unwrap(), image, "nothing is cut");
    });
    eprintln!("acknowledged holes: {} damaged images", damages.len());
}

#[test]
fn debris_after_the_commit_point() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let committed = log.committed as u64;
    let commit_end = log.commit_end();
    // A CRC-valid plugin event between turns, with the tracker state a
    // writer would store after it, sealed with this file's salt.
    let salt = format::decode_file_header(&log.bytes).unwrap().salt;
    let loose = Event::new(
        "plugin/loose",
        committed,
        T0 + 500,
        r#"{"note":"between turns"}"#,
    )
    .unwrap();
    let between = turnwal::Placement {
        turn: 3,
        step: 0,
        in_turn: false,
    };
    let craft = |salt: u32| {
        let mut out = Vec::new();
        format::encode_record(&mut out, &loose, between, commit_end, salt);
        out
    };
    let mut image = log.bytes[..commit_end as usize].to_vec();
    image.extend(craft(salt));
    let d = tempfile::tempdir().unwrap();
    install(d.path(), &image);
    let cut = Store::open(d.path())
        .unwrap()
        .inspect(ID)
        .unwrap()
        .cut
        .unwrap();
    assert!(cut.detail.contains("rule enclosure"), "{}", cut.detail);
    check_recovers(d.path(), &log, &image, log.committed, CutReason::Debris);

    // Debris followed by a record that would have continued the chain: both go.
    let mut next = image.clone();
    let resumed = Event::new("turn/start", committed + 1, T0 + 501, r#"{"turn":4}"#).unwrap();
    let open = turnwal::Placement {
        turn: 4,
        step: 0,
        in_turn: true,
    };
    format::encode_record(&mut next, &resumed, open, commit_end, salt);
    check_recovers(d.path(), &log, &next, log.committed, CutReason::Debris);

    // Debris inside the open turn: a result for a call nobody made. The real
    // events before it are kept and closed.
    let mut inside = log.bytes.clone();
    let n = log.events.len() as u64;
    let bogus = Event::new(
        "tool/result",
        n,
        T0 + 502,
        r#"{"turn":4,"step":1,"message":{"source":{"kind":"tool","callId":"nobody"}}}"#,
    )
    .unwrap();
    let step = turnwal::Placement {
        turn: 4,
        step: 1,
        in_turn: true,
    };
    format::encode_record(&mut inside, &bogus, step, commit_end, salt);
    check_recovers(d.path(), &log, &inside, log.events.len(), CutReason::Debris);

    // A stray turn/end (turn 3 ending a second time) is debris as well: its
    // kind alone must not make it the commit point, or inspect and load
    // would call the log clean and serve it while verify calls it corrupt.
    let mut stray = log.bytes[..commit_end as usize].to_vec();
    let again = Event::new(
        "turn/end",
        committed,
        T0 + 503,
        r#"{"turn":3,"reason":{"kind":"completed"}}"#,
    )
    .unwrap();
    format::encode_record(&mut stray, &again, between, commit_end, salt);
    check_recovers(d.path(), &log, &stray, log.committed, CutReason::Debris);
    // And a turn/end that would close the open turn while its step is open.
    let mut early = log.bytes.clone();
    let end4 = Event::new(
        "turn/end",
        n,
        T0 + 504,
        r#"{"turn":4,"reason":{"kind":"completed"}}"#,
    )
    .unwrap();
    let closed = turnwal::Placement {
        turn: 4,
        step: 0,
        in_turn: false,
    };
    format::encode_record(&mut early, &end4, closed, commit_end, salt);
    install(d.path(), &early);
    let cut = Store::open(d.path())
        .unwrap()
        .inspect(ID)
        .unwrap()
        .cut
        .unwrap();
    assert!(
        cut.detail.contains("rule turn-end-open-step"),
        "{}",
        cut.detail
    );
    check_recovers(d.path(), &log, &early, log.events.len(), CutReason::Debris);

    // The same loose event in a Lenient log is legitimate: a Lenient writer
    // writes exactly the record crafted above, and recovery keeps it.
    let lenient_dir = tempfile::tempdir().unwrap();
    let mut batches = main_script(0);
    batches.truncate(4);
    batches.push(vec![loose.clone()]);
    let lenient = write_log(lenient_dir.path(), &batches, Policy::Lenient);
    assert_eq!(lenient.commit_end(), commit_end);
    assert_bytes(
        lenient.record(log.committed),
        &craft(lenient.salt),
        "the Lenient writer's record",
    );
    check_recovers(
        lenient_dir.path(),
        &lenient,
        &lenient.bytes,
        lenient.events.len(),
        CutReason::Debris,
    );
    eprintln!("debris: 5 Strict images, 1 Lenient image");
}

fn lock_path(dir: &Path) -> PathBuf {
    log_path(dir).with_extension("lock")
}

#[test]
fn a_second_writer_in_the_same_process_is_locked_out() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let first = Store::open(dir.path()).unwrap();
    let held = first.load(ID).unwrap().events;
    let repaired = fs::read(log_path(dir.path())).unwrap();
    assert_eq!(held.len(), log.events.len() + 4);

    let second = Store::open(dir.path()).unwrap();
    let next = next_turn(held.len() as u64, 5);
    let pid = std::process::id();
    for result in [
        second.append(ID, &next).map(|_| ()),
        second.load(ID).map(|_| ()),
    ] {
        match result {
            Err(Error::Locked { id, path, holder }) => {
                assert_eq!(
                    (id.as_str(), path, holder),
                    (ID, lock_path(dir.path()), Some(pid))
                );
            }
            other => panic!("expected Locked, got {other:?}"),
        }
    }
    // Readers need no lock.
    assert_eq!(second.read_from(ID, 0).unwrap(), held);
    assert_bytes(
        &fs::read(log_path(dir.path())).unwrap(),
        &repaired,
        "refused writer",
    );

    // Releasing the first writer lets the second one in.
    first.close(ID).unwrap();
    drop(first);
    let receipt = second.append(ID, &next).unwrap();
    assert_eq!(receipt.durable, (held.len() + next.len()) as u64);
    let all: Vec<Event> = held.into_iter().chain(next).collect();
    assert_eq!(
        Store::open(dir.path()).unwrap().inspect(ID).unwrap().events,
        all
    );
}

/// Reads `ack` lines from a child's stdout on a thread, so a child that
/// never answers fails the test instead of hanging it.
fn ack_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn a_writer_process_holds_the_lock_until_it_dies() {
    let _alone = SPAWN.write().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.create(header()).unwrap();
    let first = next_turn(0, 1);
    store.append(ID, &first).unwrap();
    drop(store);

    let mut child = crate::support::native(env!("CARGO_BIN_EXE_turnwal"))
        .arg("--store")
        .arg(dir.path())
        .args(["append", ID])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let acks = ack_lines(child.stdout.take().unwrap());
    // One complete turn, a line at a time (seq given, time left to the CLI).
    let lines = [
        r#"{"type":"turn/start","seq":3,"data":{"turn":2}}"#,
        r#"{"type":"user/message","seq":4,"data":{"id":"c1","text":"from the child"}}"#,
        r#"{"type":"turn/end","seq":5,"data":{"turn":2,"reason":{"kind":"completed"}}}"#,
    ];
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }
    for seq in 3..6 {
        let Ok(line) = acks.recv_timeout(Duration::from_secs(20)) else {
            let _ = child.kill();
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            panic!("no ack for seq {seq}; child stderr: {err}");
        };
        assert_eq!(line, format!("ack {seq}"));
    }

    // The child is alive, stdin open, holding the writer.
    let next = next_turn(6, 3);
    let store = Store::open(dir.path()).unwrap();
    match store.append(ID, &next) {
        Err(Error::Locked { id, path, holder }) => {
            assert_eq!(
                (id.as_str(), path, holder),
                (ID, lock_path(dir.path()), Some(child.id()))
            );
        }
        other => panic!("expected Locked by pid {}, got {other:?}", child.id()),
    }
    // Its acknowledged turn is on disk and readable without the lock.
    let stored = store.read_from(ID, 0).unwrap();
    assert_eq!(stored.len(), 6);
    assert_eq!(stored[..3], first[..]);
    let types: Vec<&str> = stored[3..].iter().map(Event::event_type).collect();
    assert_eq!(types, ["turn/start", "user/message", "turn/end"]);
    assert_eq!(
        stored[4].data().get(),
        r#"{"id":"c1","text":"from the child"}"#
    );

    // SIGKILL: the kernel drops the flock with the process.
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    let receipt = store.append(ID, &next).unwrap();
    assert_eq!((receipt.next_seq, receipt.durable), (9, 9));
    drop(store);
    let view = Store::open(dir.path()).unwrap().load(ID).unwrap();
    let all: Vec<Event> = stored.into_iter().chain(next).collect();
    assert_eq!((view.events, view.state), (all, LogState::Clean));
}

#[test]
fn readers_see_a_growing_valid_prefix_during_appends() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    // 40 turns, each written as two batches (the first one leaves the turn
    // open, so readers also catch open turns and partial batches).
    let mut s = Script::new();
    for turn in 1..=40 {
        s.e("turn/start", &format!(r#"{{"turn":{turn}}}"#))
            .e("user/message", &format!(r#"{{"id":"u{turn}","text":"question {turn}"}}"#))
            .e("step/start", &format!(r#"{{"turn":{turn},"step":1}}"#))
            .e("assistant/chunk", &format!(r#"{{"turn":{turn},"step":1,"delta":"{}"}}"#, "x".repeat(turn * 17)))
            .batch()
            .e(
                "assistant/message",
                &format!(r#"{{"turn":{turn},"step":1,"message":{{"id":"a{turn}","content":[{{"type":"text","text":"answer {turn}"}}]}}}}"#),
            )
            .e("step/end", &format!(r#"{{"turn":{turn},"step":1}}"#))
            .e("turn/end", &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#))
            .batch();
    }
    let batches = s.done();
    let all: Vec<Event> = batches.concat();
    let writer = Store::open(dir.path()).unwrap();
    writer.create(header()).unwrap();
    writer.append(ID, &batches[0]).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for batch in &batches[1..] {
                writer.append(ID, batch).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        for _ in 0..2 {
            scope.spawn(|| {
                let reader = Store::open(dir.path()).unwrap();
                let (mut seen, mut observations) = (0, 0);
                let mut prefixes = std::collections::BTreeSet::new();
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    let events = reader.read_from(ID, 0).unwrap();
                    assert!(
                        events.len() >= seen,
                        "the prefix shrank: {} < {seen}",
                        events.len()
                    );
                    assert_eq!(events[..], all[..events.len()]);
                    seen = events.len();
                    let view = reader.inspect(ID).unwrap();
                    let stored = view.stored as usize;
                    assert!(stored >= seen, "the prefix shrank: {stored} < {seen}");
                    assert_eq!(view.events[..stored], all[..stored]);
                    assert_eq!(
                        view.events[stored..],
                        interrupted_turn_closers(&all[..stored])[..]
                    );
                    seen = stored;
                    prefixes.insert(seen);
                    let suffix = reader.read_from(ID, seen as u64 / 2).unwrap();
                    assert!(suffix.len() >= seen - seen / 2);
                    assert_eq!(suffix[..], all[seen / 2..seen / 2 + suffix.len()]);
                    observations += 1;
                    if finished {
                        break;
                    }
                }
                assert_eq!(seen, all.len(), "after {observations} observations");
                eprintln!(
                    "reader: {observations} observations, {} distinct prefixes",
                    prefixes.len()
                );
            });
        }
    });
}

#[test]
fn readers_during_a_repair_see_the_same_view() {
    let _shared = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let log = main_log(dir.path());
    let closers = interrupted_turn_closers(&log.events);
    let view: Vec<Event> = log.events.iter().chain(&closers).cloned().collect();
    let repaired = repaired_bytes(&log, log.events.len(), &closers);
    // A crash left 256 KiB of garbage after the open turn: the repair cuts
    // whole pages that readers have mapped, which would raise SIGBUS in a
    // reader if the truncate did not wait for them.
    let mut rng = XorShift(0x5eed);
    let crashed: Vec<u8> = log
        .bytes
        .iter()
        .copied()
        .chain(rng.bytes(256 << 10))
        .collect();
    for round in 0..5 {
        let path = install(dir.path(), &crashed);
        let done = AtomicBool::new(false);
        // Readers give up after this, so a starved repair fails the test
        // below instead of hanging it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    let reader = Store::open(dir.path()).unwrap();
                    loop {
                        let finished = done.load(Ordering::SeqCst);
                        // Before the repair: the kept events plus closers in
                        // memory; after it: the same events, all stored.
                        let seen = reader.inspect(ID).unwrap();
                        assert_eq!(seen.events, view, "round {round}");
                        let stored = reader.read_from(ID, 0).unwrap();
                        assert!(
                            stored[..] == log.events[..] || stored[..] == view[..],
                            "round {round}: read_from gave {} events",
                            stored.len()
                        );
                        if finished || std::time::Instant::now() > deadline {
                            break;
                        }
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(5));
            let writer = Store::open(dir.path()).unwrap();
            let started = std::time::Instant::now();
            assert_eq!(writer.load(ID).unwrap().events, view);
            // The repair waits only for the reads already in progress: a
            // stream of overlapping readers must not starve it (flock alone
            // has no writer preference; this took up to a minute before the
            // turnstile).
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "round {round}: repair took {took:?}"
            );
            done.store(true, Ordering::SeqCst);
        });
        assert_bytes(
            &fs::read(&path).unwrap(),
            &repaired,
            "repaired under readers",
        );
    }
}
