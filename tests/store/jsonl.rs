//! The JSONL backend against the upstream JSONL cases (reference §8.4) that
//! apply to turnwal: the path scheme, header validation, lazy
//! materialization, the hand-written crash tail, a torn zstd frame cut at
//! every byte of the last frame, packed rows (round trips, malformed rows,
//! `packChunks: false`, mixed layouts), one encoding per root, ids kept
//! inside the root, read-time normalization; plus the round trips of
//! whole files and the repair's crash states (every state a crash can
//! leave recovers to the same bytes).

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use turnwal::backend::Backend;
use turnwal::backend::jsonl::layout::{encode_segment, log_path, project_key};
use turnwal::backend::jsonl::zstd::{compress_frame, decompress_frame, scan_frames};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{CutReason, Error, Event, LogState, SessionHeader, Store, StoreOptions};

fn ev(t: &str, seq: u64, time: i64, data: &str) -> Event {
    Event::new(t, seq, time, data).unwrap()
}

fn chunk(seq: u64, time: i64, text: &str) -> Event {
    ev(
        "assistant/chunk",
        seq,
        time,
        &format!(
            r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":{}}}}}"#,
            serde_json::to_string(text).unwrap()
        ),
    )
}

/// Upstream's `oneTurnLog()` shape: seqs 0-5 at times 1-6.
fn one_turn() -> Vec<Event> {
    vec![
        ev("turn/start", 0, 1, r#"{"turn":1}"#),
        ev(
            "user/message",
            1,
            2,
            r#"{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#,
        )
        .with_surface_op("\"append\"")
        .unwrap(),
        ev("step/start", 2, 3, r#"{"turn":1,"step":1}"#),
        ev(
            "assistant/message",
            3,
            4,
            r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model"}}}"#,
        )
        .with_surface_op("\"append\"")
        .unwrap(),
        ev("step/end", 4, 5, r#"{"turn":1,"step":1}"#),
        ev(
            "turn/end",
            5,
            6,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
    ]
}

/// A turn with streamed chunks: `turn/start, step/start, 5 chunks,
/// assistant/message, step/end, turn/end`.
fn chunk_turn() -> Vec<Event> {
    let mut events = vec![
        ev("turn/start", 0, 100, r#"{"turn":1}"#),
        ev("step/start", 1, 101, r#"{"turn":1,"step":1}"#),
    ];
    for (i, (t, text)) in [
        (105, "Hel"),
        (103, "lo"),
        (110, ", "),
        (110, "wor"),
        (120, "ld"),
    ]
    .iter()
    .enumerate()
    {
        events.push(chunk(2 + i as u64, *t, text));
    }
    events.push(
        ev(
            "assistant/message",
            7,
            121,
            r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"Hello, world"}],"source":{"kind":"model"}}}"#,
        )
        .with_surface_op("\"append\"")
        .unwrap(),
    );
    events.push(ev("step/end", 8, 122, r#"{"turn":1,"step":1}"#));
    events.push(ev(
        "turn/end",
        9,
        123,
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ));
    events
}

fn header(id: &str, cwd: Option<&str>) -> SessionHeader {
    let h = SessionHeader::new(id, 1000);
    match cwd {
        Some(cwd) => h.with_cwd(cwd),
        None => h,
    }
}

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

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn backend(&self) -> JsonlBackend {
        JsonlBackend::open(self.path(), self.compression).unwrap()
    }

    fn store(&self) -> Store {
        Store::with_backend(Arc::new(self.backend()), StoreOptions::default())
    }

    fn log(&self, id: &str, cwd: Option<&str>) -> PathBuf {
        log_path(self.path(), cwd, id, self.compression).unwrap()
    }

    /// Writes a session in the given batches.
    fn write(&self, h: &SessionHeader, batches: &[&[Event]]) -> PathBuf {
        let store = self.store();
        store.create(h.clone()).unwrap();
        for batch in batches {
            store.append(&h.id, batch).unwrap();
        }
        self.log(&h.id, h.cwd.as_deref())
    }
}

/// The plaintext of a zstd file (complete frames only).
fn plaintext(bytes: &[u8]) -> Vec<u8> {
    let scan = scan_frames(bytes, usize::MAX).unwrap();
    scan.frames
        .iter()
        .flat_map(|f| decompress_frame(&bytes[f.clone()]).unwrap())
        .collect()
}

fn lines(text: &[u8]) -> Vec<String> {
    String::from_utf8(text.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

use support::jsons;

#[track_caller]
fn corruption<T: std::fmt::Debug>(r: turnwal::Result<T>) -> turnwal::Corruption {
    match r {
        Err(Error::Corrupt(c)) => *c,
        other => panic!("expected corruption, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------

#[test]
fn path_scheme_examples() {
    assert_eq!(encode_segment("a~b").unwrap(), "a~007Eb");
    assert_eq!(encode_segment(".").unwrap(), "~002E");
    assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
    assert_ne!(
        encode_segment("~002F").unwrap(),
        encode_segment("/").unwrap()
    );
    let empty = encode_segment("").unwrap_err();
    assert_eq!(
        empty,
        turnwal::backend::jsonl::layout::LayoutError::EmptySegment
    );
    assert_eq!(empty.to_string(), "cannot encode an empty path segment");
    assert_eq!(
        project_key("/Users/qyj/work/deepseek-harness").unwrap(),
        "--Users-qyj-work-deepseek-harness--"
    );
    assert_eq!(project_key("C:\\work\\agent").unwrap(), "--C-work-agent--");
    assert_eq!(project_key("/").unwrap(), "--root--");
    assert_eq!(
        project_key("/开发/~agent").unwrap(),
        "--~5F00~53D1-~007Eagent--"
    );
    assert_eq!(
        project_key(&format!("/{}", "x".repeat(999))).unwrap().len(),
        255
    );
    // Lossy on purpose: ids still separate the sessions.
    assert_eq!(
        project_key("/a/b-c").unwrap(),
        project_key("/a-b/c").unwrap()
    );

    // A relative root is resolved to an absolute one before any path is formed.
    let cwd = std::env::current_dir().unwrap();
    let backend = JsonlBackend::open("relative-jsonl-root", Compression::None).unwrap();
    assert_eq!(backend.root(), cwd.join("relative-jsonl-root"));
    assert!(
        !cwd.join("relative-jsonl-root").exists(),
        "open creates nothing"
    );
    let p = backend.log_path(&header("s", Some("/w"))).unwrap();
    assert_eq!(p, cwd.join("relative-jsonl-root/--w--/s/session.jsonl"));
}

#[test]
fn traversal_ids_stay_inside_the_root() {
    let root = Root::new(Compression::None);
    let id = "../../etc/pwn";
    let path = root.write(&header(id, None), &[&one_turn()]);
    assert_eq!(
        path,
        root.path()
            .join("_no-cwd/..~002F..~002Fetc~002Fpwn/session.jsonl")
    );
    assert!(path.is_file());
    let mut all = Vec::new();
    for entry in walk(root.path()) {
        all.push(
            entry
                .strip_prefix(root.path())
                .unwrap()
                .display()
                .to_string(),
        );
    }
    all.sort();
    assert_eq!(all, ["_no-cwd/..~002F..~002Fetc~002Fpwn/session.jsonl"]);
    let store = root.store();
    assert_eq!(store.load(id).unwrap().events, one_turn());
    assert_eq!(store.list().unwrap()[0].id, id);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Durability and the header
// ---------------------------------------------------------------------------

#[test]
fn lazy_materialization_and_exact_bytes() {
    for compression in [Compression::None, Compression::Zstd] {
        let root = Root::new(compression);
        let store = root.store();
        let h = header("lazy", Some("/work/app"));
        store.create(h.clone()).unwrap();
        store.append("lazy", &[]).unwrap();
        assert_eq!(
            fs::read_dir(root.path()).unwrap().count(),
            0,
            "nothing on disk yet"
        );
        assert!(store.list().unwrap().is_empty());
        store.append("lazy", &one_turn()).unwrap();
        let path = root.log("lazy", Some("/work/app"));
        assert!(path.is_absolute());
        let bytes = fs::read(&path).unwrap();
        let header_line = r#"{"type":"session","version":0,"id":"lazy","createdAt":1000,"cwd":"/work/app","delegationDepth":0}"#;
        let mut expected = format!("{header_line}\n");
        for e in one_turn() {
            expected.push_str(&e.to_json());
            expected.push('\n');
        }
        match compression {
            Compression::None => assert_eq!(String::from_utf8(bytes).unwrap(), expected),
            Compression::Zstd => {
                // Two frames: the header alone, then the batch.
                let scan = scan_frames(&bytes, usize::MAX).unwrap();
                assert_eq!((scan.frames.len(), scan.torn_start), (2, None));
                assert_eq!(
                    decompress_frame(&bytes[scan.frames[0].clone()]).unwrap(),
                    format!("{header_line}\n").into_bytes()
                );
                assert_eq!(String::from_utf8(plaintext(&bytes)).unwrap(), expected);
                // Each append adds exactly one frame; earlier bytes stay.
                let more = [
                    ev("turn/start", 6, 7, r#"{"turn":2}"#),
                    ev(
                        "turn/end",
                        7,
                        8,
                        r#"{"turn":2,"reason":{"kind":"completed"}}"#,
                    ),
                ];
                store.append("lazy", &more).unwrap();
                let after = fs::read(&path).unwrap();
                assert_eq!(&after[..bytes.len()], &bytes[..]);
                assert_eq!(scan_frames(&after, usize::MAX).unwrap().frames.len(), 3);
            }
        }
        // The raw view is the file's text, header excluded.
        assert_eq!(store.read_raw("lazy", 0).unwrap()[..6], one_turn()[..]);
        drop(store);
        let loaded = root.store().load("lazy").unwrap();
        assert_eq!(loaded.header.delegation_depth, Some(0));
    }
}

fn write_raw(root: &Path, rel: &str, text: &str) -> PathBuf {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn header_validation_on_disk() {
    let root = Root::new(Compression::None);
    let ok = r#""type":"session","version":0,"id":"h","createdAt":1"#;
    let cases = [
        ("", "empty or header-less session log"),
        ("{\"type\":\"session\"", "empty or header-less session log"),
        (
            "42\n",
            "corrupt session log: first line is not a session header",
        ),
        ("{\n", "corrupt session log: header line is not valid JSON"),
        (
            &format!("{{{ok}}}\n"),
            "corrupt session log: first line is not a session header (delegationDepth must be a non-negative safe integer)",
        ),
        (
            &format!("{{{ok},\"delegationDepth\":-0}}\n"),
            "corrupt session log: first line is not a session header (delegationDepth must be a non-negative safe integer)",
        ),
        (
            &format!("{{{ok},\"delegationDepth\":\"1\"}}\n"),
            "corrupt session log: first line is not a session header (delegationDepth must be a non-negative safe integer)",
        ),
        (
            &format!("{{{ok},\"delegationDepth\":0,\"agentPreset\":7}}\n"),
            "corrupt session log: first line is not a session header (agentPreset must be a string)",
        ),
        (
            &format!("{{{ok},\"delegationDepth\":0,\"approvalPolicy\":\"x\"}}\n"),
            "session header uses retired policy baseline fields",
        ),
        (
            r#"{"type":"session","version":0,"id":"h","createdAt":1.5,"delegationDepth":0}
"#,
            "corrupt session log: first line is not a session header (createdAt must be a non-negative safe integer)",
        ),
    ];
    let path = root.path().join("_no-cwd/h/session.jsonl");
    for (text, reason) in cases {
        write_raw(root.path(), "_no-cwd/h/session.jsonl", text);
        let c = corruption(root.store().inspect("h"));
        assert_eq!(
            (c.path.clone(), c.offset, c.seq),
            (path.clone(), 0, None),
            "{text}"
        );
        assert_eq!(c.reason, reason, "{text}");
        let listed = root.store().list().unwrap();
        assert_eq!(
            (
                listed[0].id.as_str(),
                listed[0].state,
                listed[0].header.is_none()
            ),
            ("h", LogState::Corrupt, true)
        );
    }
    // A relative (or Windows) cwd, in its own project directory: upstream's
    // persistence reads the log (`readFrom`, `readRaw`), its session store
    // refuses `inspect` and `load` (Node's path.isAbsolute on POSIX).
    fs::remove_dir_all(root.path().join("_no-cwd")).unwrap();
    for cwd in ["rel", "C:\\work\\agent"] {
        let header = format!(
            r#"{{"type":"session","version":0,"id":"h","createdAt":1,"cwd":{},"delegationDepth":0}}"#,
            serde_json::to_string(cwd).unwrap()
        );
        let line = ev("turn/start", 0, 1, r#"{"turn":1}"#).to_json();
        let rel = log_path(Path::new(""), Some(cwd), "h", Compression::None).unwrap();
        let path = write_raw(
            root.path(),
            rel.to_str().unwrap(),
            &format!("{header}\n{line}\n"),
        );
        let store = root.store();
        let c = corruption(store.inspect("h"));
        assert_eq!((c.path.clone(), c.offset, c.seq), (path.clone(), 0, None));
        assert_eq!(
            c.reason,
            format!(
                "invalid session header: session metadata cwd must be an absolute path, got {cwd:?}"
            )
        );
        assert!(store.load("h").is_err());
        assert_eq!(
            store.read_from("h", 0).unwrap(),
            vec![ev("turn/start", 0, 1, r#"{"turn":1}"#)]
        );
        assert_eq!(store.read_raw("h", 0).unwrap().len(), 1);
        let listed = store.list().unwrap();
        assert_eq!(
            (listed[0].state, listed[0].header.is_none()),
            (LogState::Corrupt, true)
        );
        drop(store);
        fs::remove_file(&path).unwrap();
    }
    // A foreign future header with an alien shape is unsupported, not corrupt,
    // and names the raw log; a non-string id is named as JavaScript would.
    write_raw(
        root.path(),
        "_no-cwd/h/session.jsonl",
        "{\"version\":42,\"id\":123,\"shape\":\"alien\"}\n",
    );
    match root.store().inspect("h") {
        Err(e @ Error::Unsupported { .. }) => {
            let Error::Unsupported { path: p, detail } = &e else {
                unreachable!()
            };
            assert_eq!(p, &path);
            assert_eq!(
                detail,
                "session \"123\" uses log format v42, but this harness reads only v0: the log was written by a newer harness \u{2014} upgrade the harness to open it"
            );
            assert!(e.to_string().starts_with(&path.display().to_string()));
        }
        other => panic!("{other:?}"),
    }
    // The header must name the session and its own path.
    write_raw(
        root.path(),
        "_no-cwd/h/session.jsonl",
        r#"{"type":"session","version":0,"id":"other","createdAt":1,"delegationDepth":0}
"#,
    );
    assert_eq!(
        corruption(root.store().inspect("h")).reason,
        format!(
            "corrupt session log {:?}: requested id \"h\" does not match header id \"other\"",
            path.display().to_string()
        )
    );
    write_raw(
        root.path(),
        "_no-cwd/h/session.jsonl",
        r#"{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0,"cwd":"/elsewhere"}
"#,
    );
    assert_eq!(
        corruption(root.store().inspect("h")).reason,
        format!(
            "corrupt session log {:?}: header id \"h\" and cwd identify {:?}",
            path.display().to_string(),
            root.path()
                .join("--elsewhere--/h/session.jsonl")
                .display()
                .to_string()
        )
    );
}

// ---------------------------------------------------------------------------
// Crash tails
// ---------------------------------------------------------------------------

#[test]
fn hand_written_raw_crash_tail() {
    let root = Root::new(Compression::None);
    let turn2 = [
        ev("turn/start", 6, 7, r#"{"turn":2}"#),
        ev("step/start", 7, 8, r#"{"turn":2,"step":1}"#),
    ];
    let path = root.write(&header("crash", None), &[&one_turn(), &turn2]);
    let committed = fs::read(&path).unwrap();
    let mut torn = committed.clone();
    torn.extend_from_slice(br#"{"type":"assistant/chunk","seq":8,"ti"#);
    fs::write(&path, &torn).unwrap();

    let store = root.store();
    let view = store.inspect("crash").unwrap();
    assert_eq!(view.state, LogState::Torn);
    let cut = view.cut.clone().unwrap();
    assert_eq!(
        (cut.offset, cut.seq, cut.len, cut.reason),
        (committed.len() as u64, 8, 37, CutReason::Incomplete)
    );
    assert_eq!(
        cut.detail,
        "incomplete final line: 37 bytes without a newline"
    );
    let closers = [
        r#"{"type":"step/end","seq":8,"time":8,"data":{"turn":2,"step":1}}"#,
        r#"{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#,
    ];
    assert_eq!(jsons(&view.events[8..]), closers);
    assert_eq!(fs::read(&path).unwrap(), torn, "inspect writes nothing");

    let loaded = store.load("crash").unwrap();
    assert_eq!(loaded.events, view.events);
    let mut expected = committed.clone();
    for c in closers {
        expected.extend_from_slice(c.as_bytes());
        expected.push(b'\n');
    }
    assert_eq!(
        fs::read(&path).unwrap(),
        expected,
        "prefix kept, closers appended"
    );
    // The next append continues at 10 and keeps every byte before it.
    let turn3 = [
        ev("turn/start", 10, 11, r#"{"turn":3}"#),
        ev(
            "turn/end",
            11,
            12,
            r#"{"turn":3,"reason":{"kind":"completed"}}"#,
        ),
    ];
    assert_eq!(store.append("crash", &turn3).unwrap().next_seq, 12);
    assert!(fs::read(&path).unwrap().starts_with(&expected));
}

#[test]
fn scanner_rules_for_bad_lines() {
    let root = Root::new(Compression::None);
    let path = root.write(&header("s", None), &[&one_turn()]);
    let good = fs::read_to_string(&path).unwrap();
    let bad_line_at = good.len() as u64;
    let t2 = |seq: u64| ev("turn/start", seq, 7, r#"{"turn":2}"#).to_json();
    let end2 = |seq: u64| {
        ev(
            "turn/end",
            seq,
            8,
            r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        )
        .to_json()
    };

    // A corrupt line after the last turn/end bounds the kept prefix.
    fs::write(&path, format!("{good}{{oops\n{}\n", t2(7))).unwrap();
    let view = root.store().inspect("s").unwrap();
    let cut = view.cut.unwrap();
    assert_eq!(
        (view.stored, cut.offset, cut.seq, cut.reason),
        (6, bad_line_at, 6, CutReason::Invalid)
    );
    assert!(
        cut.detail
            .starts_with("corrupt session log: unparsable committed event at line 7 ("),
        "{}",
        cut.detail
    );

    // ... but a later turn/end puts it in the committed region.
    fs::write(&path, format!("{good}{{oops\n{}\n{}\n", t2(7), end2(8))).unwrap();
    let c = corruption(root.store().inspect("s"));
    assert_eq!(
        (c.path.clone(), c.offset, c.seq),
        (path.clone(), bad_line_at, Some(6))
    );
    assert!(
        c.reason
            .starts_with("corrupt session log: unparsable committed event at line 7 ("),
        "{}",
        c.reason
    );

    // A seq gap after the last turn/end is tolerated (cut); before a later
    // turn/end it is corruption.
    fs::write(&path, format!("{good}{}\n", t2(7))).unwrap();
    let view = root.store().inspect("s").unwrap();
    assert_eq!(
        (view.stored, view.cut.unwrap().detail.as_str()),
        (
            6,
            "corrupt session log: seq gap in committed region at line 7 (expected 6, got 7)"
        )
    );
    fs::write(&path, format!("{good}{}\n{}\n", t2(7), end2(8))).unwrap();
    let c = corruption(root.store().inspect("s"));
    assert_eq!(
        (c.offset, c.seq, c.reason.as_str()),
        (
            bad_line_at,
            Some(6),
            "corrupt session log: seq gap in committed region at line 7 (expected 6, got 7)"
        )
    );
    // A header-only file keeps nothing.
    let header_only = good.lines().next().unwrap().to_owned() + "\n";
    fs::write(&path, &header_only).unwrap();
    let view = root.store().inspect("s").unwrap();
    assert_eq!(
        (view.stored, view.state, view.events.len()),
        (0, LogState::Clean, 0)
    );
}

/// After the commit point upstream's reader keeps every decoded event, the
/// turn contract notwithstanding: a `tool/result` whose `tool/call` was never
/// logged stays (the harness's invariants would have refused it; a writer
/// without them can leave it), and the open turn's closers are those of
/// what is there — the answered call gets no closer. A WAL store under the
/// upstream harness's policy (Lenient) holds it the same way; under Strict it
/// refuses the batch.
#[test]
fn a_tail_that_breaks_the_contract_is_kept_as_upstream_keeps_it() {
    let root = Root::new(Compression::None);
    let turn2 = [
        ev("turn/start", 6, 7, r#"{"turn":2}"#),
        ev("step/start", 7, 8, r#"{"turn":2,"step":1}"#),
        ev(
            "assistant/message",
            8,
            9,
            r#"{"turn":2,"step":1,"message":{"id":"a8","role":"assistant","content":[{"type":"tool-call","id":"call-x","name":"ls","arguments":"{}"}]}}"#,
        ),
        Event::from_json(
            br#"{"type":"tool/result","seq":9,"time":10,"data":{"turn":2,"step":1,"message":{"id":"r9","role":"user","source":{"kind":"tool","callId":"call-x"},"content":[{"type":"tool-result","toolCallId":"call-x","content":[]}]}},"surfaceOp":"append"}"#,
        )
        .unwrap(),
    ];
    let mut text =
        r#"{"type":"session","version":0,"id":"k","createdAt":1,"delegationDepth":0}"#.to_owned();
    for e in one_turn().iter().chain(&turn2) {
        text.push('\n');
        text.push_str(&e.to_json());
    }
    text.push('\n');
    let path = write_raw(root.path(), "_no-cwd/k/session.jsonl", &text);
    let store = root.store();
    let view = store.inspect("k").unwrap();
    assert_eq!(
        (view.state, view.stored, view.cut.is_none()),
        (LogState::OpenTurn, 10, true)
    );
    let closers: Vec<String> = view.events[10..].iter().map(Event::to_json).collect();
    assert_eq!(
        closers,
        [
            r#"{"type":"step/end","seq":10,"time":10,"data":{"turn":2,"step":1}}"#,
            r#"{"type":"turn/end","seq":11,"time":10,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#,
        ]
    );
    assert_eq!(store.read_from("k", 9).unwrap(), vec![turn2[3].clone()]);
    // load repairs in place: the file gains the two closers and nothing else.
    store.load("k").unwrap();
    let after = fs::read_to_string(&path).unwrap();
    assert_eq!(after, format!("{text}{}\n{}\n", closers[0], closers[1]));
    // The next turn appends.
    let next = [
        ev("turn/start", 12, 11, r#"{"turn":3}"#),
        ev(
            "turn/end",
            13,
            12,
            r#"{"turn":3,"reason":{"kind":"completed"}}"#,
        ),
    ];
    store.append("k", &next).unwrap();

    // The native WAL holds it too under the upstream harness's policy (so
    // `convert` copies such a log), and refuses it under Strict.
    let wal_dir = tempfile::tempdir().unwrap();
    let wal = Store::open(wal_dir.path()).unwrap();
    for (id, policy) in [
        ("lenient", turnwal::Policy::Lenient),
        ("strict", turnwal::Policy::Strict),
        ("permissive", turnwal::Policy::Permissive),
    ] {
        wal.create_with_policy(SessionHeader::new(id, 1), policy)
            .unwrap();
        wal.append(id, &one_turn()).unwrap();
        wal.append(id, &turn2[..3]).unwrap();
        let appended = wal.append(id, &turn2[3..]);
        match policy {
            turnwal::Policy::Lenient | turnwal::Policy::Permissive => {
                appended.unwrap();
                // As found after a crash (a fresh store): the same closers.
                let view = Store::open(wal_dir.path()).unwrap().inspect(id).unwrap();
                assert_eq!(
                    view.events[10..]
                        .iter()
                        .map(Event::to_json)
                        .collect::<Vec<_>>(),
                    closers
                );
            }
            turnwal::Policy::Strict => {
                let err = appended.unwrap_err();
                assert!(err.to_string().contains("tool-result-unmatched"), "{err}");
            }
        }
    }
}

/// Cuts the last frame of a zstd log at every byte: a frame cut inside its
/// header or its block is dropped (nothing of a compressed block decodes), a
/// frame missing only checksum bytes gives back all its events; repair then
/// writes exactly the kept events plus closers, and the result scans clean.
#[test]
fn torn_zstd_frame_at_every_byte() {
    let root = Root::new(Compression::Zstd);
    let turn2 = [
        ev("turn/start", 6, 7, r#"{"turn":2}"#),
        ev("step/start", 7, 8, r#"{"turn":2,"step":1}"#),
    ];
    let tail: Vec<Event> = (8..12).map(|s| chunk_in(2, s, 9, "same text")).collect();
    let path = root.write(&header("z", None), &[&one_turn(), &turn2, &tail]);
    let full = fs::read(&path).unwrap();
    let frames = scan_frames(&full, usize::MAX).unwrap().frames;
    let last = frames.last().unwrap().clone();
    // One compressed block: header 4 + 1 + 1 (window) + FCS, block type 2.
    let plain = decompress_frame(&full[last.clone()]).unwrap();
    assert_eq!(lines(&plain).len(), 1, "the four deltas are one packed row");
    for cut in last.start + 1..last.end {
        let dir = tempfile::tempdir().unwrap();
        let r = Root {
            dir,
            compression: Compression::Zstd,
        };
        let p = r.log("z", None);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, &full[..cut]).unwrap();
        let store = r.store();
        let view = store.inspect("z").unwrap();
        let in_checksum = cut >= last.end - 4;
        let kept = if in_checksum { 12 } else { 8 };
        assert_eq!(view.stored, kept, "cut {cut}");
        let c = view.cut.clone().unwrap();
        assert_eq!(
            (c.offset, c.seq, c.len, c.reason),
            (
                last.start as u64,
                kept,
                (cut - last.start) as u64,
                CutReason::Incomplete
            ),
            "cut {cut}"
        );
        let loaded = store.load("z").unwrap();
        assert_eq!(loaded.events, view.events);
        let after = fs::read(&p).unwrap();
        assert_eq!(
            &after[..last.start],
            &full[..last.start],
            "cut {cut}: prefix kept"
        );
        let scan = scan_frames(&after, usize::MAX).unwrap();
        assert_eq!((scan.frames.len(), scan.torn_start), (frames.len(), None));
        // The repair frame: recovered events and closers, in one batch.
        let repair = decompress_frame(&after[scan.frames.last().unwrap().clone()]).unwrap();
        let mut batch: Vec<Event> = if in_checksum {
            tail.clone()
        } else {
            Vec::new()
        };
        batch.extend(loaded.events[kept as usize..].iter().cloned());
        assert_eq!(
            repair,
            turnwal::backend::jsonl::records::encode_batch(&batch, true)
        );
        let again = r.store().inspect("z").unwrap();
        assert_eq!(
            (again.state, again.events),
            (LogState::Clean, loaded.events.clone())
        );
        let closers: Vec<&str> = loaded.events[kept as usize..]
            .iter()
            .map(Event::event_type)
            .collect();
        assert_eq!(closers, ["step/end", "turn/end"], "cut {cut}");
    }
}

fn chunk_in(turn: u64, seq: u64, time: i64, text: &str) -> Event {
    ev(
        "assistant/chunk",
        seq,
        time,
        &format!(
            r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":{}}}}}"#,
            serde_json::to_string(text).unwrap()
        ),
    )
}

/// Upstream's zstd fixture: a cut frame of a 300,000-character noise line.
/// Its raw blocks decode partially, but no line completes: nothing is
/// recovered, and the frame is dropped.
#[test]
fn torn_noise_frame_recovers_nothing() {
    let root = Root::new(Compression::Zstd);
    let path = root.write(&header("n", None), &[&one_turn()]);
    let committed = fs::read(&path).unwrap();
    let mut rng = turnwal::rng::Rng::new(0x1234_5678);
    let noise: String = (0..300_000)
        .map(|_| char::from(b'!' + rng.below(90) as u8))
        .collect::<String>()
        .replace(['"', '\\'], "x");
    let frame = compress_frame(format!("{{\"noise\":\"{noise}\"}}\n").as_bytes());
    for cut in [5, 1000, 150_000, frame.len() - 5, frame.len() - 1] {
        let mut bytes = committed.clone();
        bytes.extend_from_slice(&frame[..cut]);
        fs::write(&path, &bytes).unwrap();
        let view = root.store().inspect("n").unwrap();
        let c = view.cut.unwrap();
        assert_eq!(
            (view.stored, c.offset, c.len, c.reason),
            (6, committed.len() as u64, cut as u64, CutReason::Incomplete)
        );
    }
    root.store().load("n").unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        committed,
        "the torn frame is dropped"
    );
}

#[test]
fn zstd_corruption_versus_torn() {
    let root = Root::new(Compression::Zstd);
    let path = root.write(&header("c", None), &[&one_turn()]);
    let good = fs::read(&path).unwrap();
    let frames = scan_frames(&good, usize::MAX).unwrap().frames;
    // A flipped byte in a complete frame: validation fails.
    let mut bad = good.clone();
    bad[frames[1].end - 2] ^= 0x55;
    fs::write(&path, &bad).unwrap();
    let c = corruption(root.store().inspect("c"));
    let at = frames[1].start;
    // Named by the seq its first event would have had.
    assert_eq!((c.offset, c.seq), (at as u64, Some(0)));
    assert!(
        c.reason.starts_with(&format!(
            "corrupt Zstandard session log: frame at byte {at} failed validation ("
        )),
        "{}",
        c.reason
    );
    // Garbage after the last frame: invalid magic is corruption, not a tear.
    let mut bad = good.clone();
    bad.extend_from_slice(&[0, 0, 0, 0]);
    fs::write(&path, &bad).unwrap();
    let c = corruption(root.store().inspect("c"));
    assert_eq!(
        (c.offset, c.reason.as_str()),
        (
            good.len() as u64,
            format!(
                "corrupt Zstandard session log: invalid frame magic at byte {}",
                good.len()
            )
            .as_str()
        )
    );
    // A complete frame holding a cut line.
    let mut bad = good.clone();
    bad.extend_from_slice(&compress_frame(b"{\"type\":\"turn/start\""));
    fs::write(&path, &bad).unwrap();
    let c = corruption(root.store().inspect("c"));
    assert_eq!(
        c.reason,
        "corrupt Zstandard session log: complete frame contains a torn JSONL record (a line without a newline)"
    );
    // Magic only: header-less. An empty header frame: not exactly one line.
    fs::write(&path, [0x28, 0xb5, 0x2f, 0xfd]).unwrap();
    assert_eq!(
        corruption(root.store().inspect("c")).reason,
        "empty or header-less Zstandard session log"
    );
    fs::write(&path, compress_frame(b"")).unwrap();
    assert_eq!(
        corruption(root.store().inspect("c")).reason,
        "corrupt Zstandard session log: first frame is not exactly one header line"
    );
    let two = compress_frame(b"{\"type\":\"session\"}\n{}\n");
    fs::write(&path, two).unwrap();
    assert_eq!(
        corruption(root.store().inspect("c")).reason,
        "corrupt Zstandard session log: first frame is not exactly one header line"
    );
}

// ---------------------------------------------------------------------------
// Packed rows
// ---------------------------------------------------------------------------

fn types_of_lines(text: &[u8]) -> Vec<String> {
    lines(text)
        .iter()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn packed_rows_layouts_and_round_trips() {
    let root = Root::new(Compression::None);
    let path = root.write(&header("p", None), &[&chunk_turn()]);
    let text = fs::read(&path).unwrap();
    assert_eq!(
        types_of_lines(&text),
        [
            "turn/start",
            "step/start",
            "text-chunks",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    assert_eq!(
        lines(&text)[3],
        r#"{"type":"text-chunks","seq0":2,"time0":105,"data":{"turn":1,"step":1,"index":0,"dt":[-2,7,0,10],"texts":["Hel","lo",", ","wor","ld"]}}"#
    );
    let store = root.store();
    assert_eq!(store.load("p").unwrap().events, chunk_turn());
    assert_eq!(store.read_raw("p", 3).unwrap(), chunk_turn()[3..]);

    // packChunks: false writes one line per event; a mixed root loads.
    let unpacked = JsonlBackend::open(root.path(), Compression::None)
        .unwrap()
        .without_packing();
    let s2 = Store::with_backend(Arc::new(unpacked), StoreOptions::default());
    s2.create(header("u", None)).unwrap();
    s2.append("u", &chunk_turn()).unwrap();
    let text = fs::read(root.log("u", None)).unwrap();
    assert_eq!(
        types_of_lines(&text),
        [
            "turn/start",
            "step/start",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    drop(s2);
    assert_eq!(root.store().load("u").unwrap().events, chunk_turn());

    // A mixed file: a packed row and loose deltas of the same run.
    let mixed = root.path().join("_no-cwd/m/session.jsonl");
    let events = chunk_turn();
    let mut text = String::from(
        r#"{"type":"session","version":0,"id":"m","createdAt":1,"delegationDepth":0}"#,
    );
    text.push('\n');
    for e in &events[..3] {
        text.push_str(&(e.to_json() + "\n"));
    }
    text.push_str(r#"{"type":"text-chunks","seq0":3,"time0":103,"data":{"turn":1,"step":1,"index":0,"dt":[7,0],"texts":["lo",", ","wor"]}}"#);
    text.push('\n');
    for e in &events[6..] {
        text.push_str(&(e.to_json() + "\n"));
    }
    fs::create_dir_all(mixed.parent().unwrap()).unwrap();
    fs::write(&mixed, &text).unwrap();
    assert_eq!(root.store().load("m").unwrap().events, events);
}

#[test]
fn malformed_packed_rows() {
    let root = Root::new(Compression::None);
    let path = root.write(&header("bad", None), &[&one_turn()]);
    let good = fs::read_to_string(&path).unwrap();
    let row_at = good.len() as u64;
    let t2 = ev("turn/start", 6, 7, r#"{"turn":2}"#).to_json();
    let s2 = ev("step/start", 7, 8, r#"{"turn":2,"step":1}"#).to_json();
    let end = |seq: u64| {
        ev(
            "turn/end",
            seq,
            9,
            r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        )
        .to_json()
    };
    let row = |seq0: u64, dt: &str, texts: &str| {
        format!(
            r#"{{"type":"text-chunks","seq0":{seq0},"time0":9,"data":{{"turn":2,"step":1,"index":0,"dt":{dt},"texts":{texts}}}}}"#
        )
    };
    // A malformed row before a later turn/end is corruption.
    fs::write(
        &path,
        format!(
            "{good}{t2}\n{s2}\n{}\n{}\n",
            row(8, "[1]", r#"["a","b","c"]"#),
            end(11)
        ),
    )
    .unwrap();
    let c = corruption(root.store().inspect("bad"));
    let row_line = row_at + t2.len() as u64 + s2.len() as u64 + 2;
    assert_eq!((c.offset, c.seq), (row_line, Some(8)));
    assert_eq!(
        c.reason,
        "corrupt session log: unparsable committed event at line 9 (malformed text-chunks storage row: dt length 1 does not match 3 members)"
    );
    // A row whose members skip a seq, in the tail: dropped whole, and the
    // kept prefix ends at the line before it.
    fs::write(
        &path,
        format!(
            "{good}{t2}\n{s2}\n{}\n",
            row(9, "[1,1]", r#"["a","b","c"]"#)
        ),
    )
    .unwrap();
    let view = root.store().inspect("bad").unwrap();
    let cut = view.cut.unwrap();
    assert_eq!((view.stored, cut.offset, cut.seq), (8, row_line, 8));
    assert_eq!(
        cut.detail,
        "corrupt session log: seq gap in committed region at line 9 (expected 8, got 9)"
    );
    // A good row advances the seq by its run length.
    fs::write(
        &path,
        format!(
            "{good}{t2}\n{s2}\n{}\n",
            row(8, "[1,-1]", r#"["a","b","c"]"#)
        ),
    )
    .unwrap();
    let view = root.store().inspect("bad").unwrap();
    assert_eq!((view.stored, view.state), (11, LogState::OpenTurn));
    assert_eq!(view.events[10].time(), 9);
}

// ---------------------------------------------------------------------------
// One encoding per root, and the flat layout
// ---------------------------------------------------------------------------

#[test]
fn root_encoding_mixing_refused() {
    let root = Root::new(Compression::None);
    root.write(&header("raw", None), &[&one_turn()]);
    assert_eq!(
        JsonlBackend::detect(root.path()).unwrap(),
        Some(Compression::None)
    );
    let refused = |e: Error, artifact: &Path, suffix: &str, mode: &str| match e {
        Error::Unsupported { path, detail } => {
            assert_eq!(path, artifact);
            assert_eq!(
                detail,
                format!(
                    "session artifact {:?} uses {suffix}, but this backend is configured for compression \"{mode}\"; use a separate root or select the matching compression mode",
                    artifact.display().to_string()
                )
            );
        }
        other => panic!("{other:?}"),
    };
    let raw_log = root.log("raw", None);
    refused(
        JsonlBackend::open(root.path(), Compression::Zstd).unwrap_err(),
        &raw_log,
        ".jsonl",
        "zstd",
    );
    // The check is repeated when an artifact of the other encoding appears.
    let backend = root.backend();
    let store = Store::with_backend(Arc::new(backend.clone()), StoreOptions::default());
    store.create(header("late", None)).unwrap();
    let stray = write_raw(root.path(), "--w--/z/session.jsonl.zstd", "x");
    refused(store.list().unwrap_err(), &stray, ".jsonl.zstd", "none");
    refused(
        store.append("late", &one_turn()).unwrap_err(),
        &stray,
        ".jsonl.zstd",
        "none",
    );
    assert!(!root.log("late", None).exists(), "materialization refused");
    assert!(JsonlBackend::detect(root.path()).is_err());
    fs::remove_file(&stray).unwrap();
    // The flat layout is refused, by an open store and at open.
    let flat = write_raw(root.path(), "_no-cwd/raw.jsonl", "x");
    assert!(matches!(
        JsonlBackend::open(root.path(), Compression::None),
        Err(Error::Unsupported { .. })
    ));
    match store.inspect("raw") {
        Err(Error::Unsupported { path, detail }) => {
            assert_eq!(path, flat);
            assert_eq!(
                detail,
                format!(
                    "session artifact {:?} uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading",
                    flat.display().to_string()
                )
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn listing_across_projects() {
    let root = Root::new(Compression::Zstd);
    root.write(&header("a", Some("/p/one")), &[&one_turn()]);
    root.write(&header("b", Some("/p/two")), &[&one_turn()]);
    root.write(&header("c", None), &[&one_turn()[..2]]);
    let mut listed: Vec<(String, u64, LogState)> = root
        .store()
        .list()
        .unwrap()
        .into_iter()
        .map(|s| (s.id, s.events, s.state))
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        listed,
        [
            ("a".into(), 6, LogState::Clean),
            ("b".into(), 6, LogState::Clean),
            ("c".into(), 2, LogState::OpenTurn)
        ]
    );
    // An empty or missing root lists nothing.
    assert!(
        JsonlBackend::open(root.path().join("none"), Compression::Zstd)
            .unwrap()
            .list()
            .unwrap()
            .is_empty()
    );
    // The same id in two project directories is refused.
    let a = root.log("a", Some("/p/one"));
    let copy = root.log("a", Some("/p/three"));
    fs::create_dir_all(copy.parent().unwrap()).unwrap();
    fs::copy(&a, &copy).unwrap();
    match root.store().inspect("a") {
        Err(Error::Corrupt(c)) => assert_eq!(
            c.reason,
            "duplicate JSONL session id \"a\" appears in multiple project directories"
        ),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

/// Events read from a JSONL file and written to a new root in the same
/// batches give a byte-identical raw file, and a zstd file whose
/// decompressed text is byte-identical.
#[test]
fn round_trips_are_byte_identical() {
    let batches: Vec<Vec<Event>> = vec![
        one_turn(),
        chunk_turn()
            .into_iter()
            .map(|e| {
                let mut e = e;
                e.set_seq(e.seq() + 6);
                retime(e)
            })
            .collect(),
    ];
    for compression in [Compression::None, Compression::Zstd] {
        let h = SessionHeader {
            parent_session: Some("p".into()),
            seed_length: Some(6),
            origin: Some("subagent".into()),
            delegation_depth: Some(1),
            agent_preset: Some("coder".into()),
            ..header("rt", Some("/w/x"))
        };
        let src = Root::new(compression);
        let refs: Vec<&[Event]> = batches.iter().map(Vec::as_slice).collect();
        let src_path = src.write(&h, &refs);
        let events = src.store().read_raw("rt", 0).unwrap();
        let read_header = src.store().inspect("rt").unwrap().header;
        assert_eq!(read_header, h);
        let dst = Root::new(compression);
        let store = dst.store();
        store.create(read_header).unwrap();
        store.append("rt", &events[..6]).unwrap();
        store.append("rt", &events[6..]).unwrap();
        let (a, b) = (
            fs::read(&src_path).unwrap(),
            fs::read(dst.log("rt", Some("/w/x"))).unwrap(),
        );
        match compression {
            Compression::None => assert_eq!(a, b),
            Compression::Zstd => assert_eq!(plaintext(&a), plaintext(&b)),
        }
    }
}

/// The chunk turn's events with the `turn` numbers of turn 2.
fn retime(e: Event) -> Event {
    let data = e.data().get().replace("\"turn\":1", "\"turn\":2");
    let mut out = Event::new(e.event_type(), e.seq(), e.time(), &data).unwrap();
    if let Some(op) = e.surface_op() {
        out = out.with_surface_op(op.get()).unwrap();
    }
    out
}

// ---------------------------------------------------------------------------
// Repair: every crash state recovers to the same bytes
// ---------------------------------------------------------------------------

/// The repair of a log whose kept events need no rewriting truncates and
/// appends in place: a crash after the truncation, or anywhere inside the
/// appended closers, leaves a log whose next load ends in the same bytes.
/// The repair of a torn zstd frame with complete records writes a temp file
/// and renames it: a crash before the rename leaves the old log (and a temp
/// file, removed later), which loads to the same bytes.
#[test]
fn repair_crash_states_converge() {
    for compression in [Compression::None, Compression::Zstd] {
        let root = Root::new(compression);
        let turn2 = [
            ev("turn/start", 6, 7, r#"{"turn":2}"#),
            ev("step/start", 7, 8, r#"{"turn":2,"step":1}"#),
        ];
        let tail: Vec<Event> = (8..11).map(|s| chunk_in(2, s, 9, "t")).collect();
        let path = root.write(&header("r", None), &[&one_turn(), &turn2]);
        let prefix = fs::read(&path).unwrap();
        // A torn last batch: its cut frame (zstd: only the checksum missing,
        // so its events are recovered) or a cut line (raw).
        let batch_bytes = match compression {
            Compression::None => turnwal::backend::jsonl::records::encode_batch(&tail, true),
            Compression::Zstd => {
                compress_frame(&turnwal::backend::jsonl::records::encode_batch(&tail, true))
            }
        };
        let mut crashed = prefix.clone();
        crashed.extend_from_slice(&batch_bytes[..batch_bytes.len() - 2]);
        fs::write(&path, &crashed).unwrap();
        root.store().load("r").unwrap();
        let repaired = fs::read(&path).unwrap();
        let final_events = root.store().inspect("r").unwrap().events;
        assert_eq!(
            final_events.len(),
            if compression == Compression::Zstd {
                13
            } else {
                10
            }
        );

        let mut states: Vec<(Vec<u8>, bool)> = Vec::new();
        match compression {
            Compression::None => {
                // In place: truncated, then any prefix of the closers.
                for k in 0..=repaired.len() - prefix.len() {
                    states.push((repaired[..prefix.len() + k].to_vec(), false));
                }
            }
            Compression::Zstd => {
                // Before the rename: the old file, with a temp file beside it.
                states.push((crashed.clone(), true));
                states.push((repaired.clone(), false));
            }
        }
        for (state, temp) in states {
            fs::write(&path, &state).unwrap();
            let tmp = PathBuf::from(format!("{}.0123456789ab.tmp", path.display()));
            if temp {
                fs::write(&tmp, &repaired[..repaired.len() / 2]).unwrap();
            }
            let store = root.store();
            store.load("r").unwrap();
            assert_eq!(
                fs::read(&path).unwrap(),
                repaired,
                "{compression} state of {} bytes",
                state.len()
            );
            assert_eq!(store.inspect("r").unwrap().events, final_events);
            drop(store);
            // The repair removed what an interrupted one left.
            assert!(!tmp.exists());
        }
    }
}

// ---------------------------------------------------------------------------
// Read-time normalization
// ---------------------------------------------------------------------------

#[test]
fn legacy_shapes_are_normalized_in_the_logical_view_only() {
    let root = Root::new(Compression::None);
    let stored = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message"}}}"#,
        r#"{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}}"#,
        r#"{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"}],"provenance":{"provider":"p","kind":"old","model":"m"}}}"#,
        r#"{"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}}"#,
        r#"{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"ok"}],"isError":false}}"#,
        r#"{"type":"step/end","seq":6,"time":7,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"steering/message","seq":7,"time":8,"data":{"turn":1,"content":[{"type":"text","text":"faster"}],"source":{"kind":"user"}}}"#,
        r#"{"type":"turn/end","seq":8,"time":9,"data":{"turn":1,"reason":{"kind":"aborted"}}}"#,
        r#"{"type":"turn/start","seq":9,"time":10,"data":{"turn":2}}"#,
        r#"{"type":"steering/message","seq":10,"time":11,"data":{"turn":2,"message":{"id":"m","role":"user","content":[],"source":{"kind":"user"}}}}"#,
        r#"{"type":"turn/end","seq":11,"time":12,"data":{"turn":2,"reason":{"kind":"error","step":0,"message":"boom"}}}"#,
        r#"{"type":"turn/start","seq":12,"time":13,"data":{"turn":3}}"#,
        r#"{"type":"turn/end","seq":13,"time":14,"data":{"reason":{"kind":"error","step":1,"failure":{"message":"m","code":"E","status":500}},"turn":3}}"#,
        r#"{"type":"turn/start","seq":14,"time":15,"data":{"turn":4}}"#,
        r#"{"type":"turn/end","seq":15,"time":16,"data":{"turn":4,"reason":{"kind":"disposed"}}}"#,
    ];
    let header = r#"{"type":"session","version":0,"id":"old","createdAt":1,"delegationDepth":0}"#;
    let text = format!("{header}\n{}\n", stored.join("\n"));
    let path = write_raw(root.path(), "_no-cwd/old/session.jsonl", &text);
    let store = root.store();
    let view = store.inspect("old").unwrap();
    assert_eq!(view.state, LogState::Clean);
    let expected = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:old:1","role":"user"}}"#,
        stored[2],
        r#"{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:old:3","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"}],"source":{"provider":"p","kind":"model","model":"m"}}}}"#,
        stored[4],
        r#"{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:old:5","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}}}"#,
        stored[6],
        r#"{"type":"user/message","seq":7,"time":8,"data":{"content":[{"type":"text","text":"faster"}],"source":{"kind":"user"},"id":"legacy-message:old:7","role":"user"}}"#,
        r#"{"type":"turn/end","seq":8,"time":9,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}}"#,
        stored[9],
        r#"{"type":"user/message","seq":10,"time":11,"data":{"id":"m","role":"user","content":[],"source":{"kind":"user"}}}"#,
        r#"{"type":"turn/end","seq":11,"time":12,"data":{"turn":2,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}}"#,
        stored[12],
        r#"{"type":"turn/end","seq":13,"time":14,"data":{"reason":{"kind":"error","error":{"message":"m","code":"E","status":500}},"turn":3}}"#,
        stored[14],
        r#"{"type":"turn/end","seq":15,"time":16,"data":{"turn":4,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}}"#,
    ];
    assert_eq!(jsons(&view.events), expected);
    assert_eq!(jsons(&store.read_from("old", 13).unwrap()), expected[13..]);
    // The stored log is served and kept as it is.
    assert_eq!(jsons(&store.read_raw("old", 0).unwrap()), stored);
    store.load("old").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn refused_and_malformed_legacy_forms() {
    let root = Root::new(Compression::None);
    let head = r#"{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0}"#;
    let start = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;
    let cases = [
        (
            r#"{"type":"request/header-delta","seq":1,"time":2,"data":{}}"#,
            "session \"x\" contains unsupported legacy request/header-delta event at seq 1",
        ),
        (
            r#"{"type":"mode/set","seq":1,"time":2,"data":{}}"#,
            "session \"x\" contains unsupported legacy mode/set event at seq 1",
        ),
        (
            r#"{"type":"request/header","seq":1,"time":2,"data":{"reason":"fallback"}}"#,
            "session \"x\" contains unsupported legacy request/header reason \"fallback\" at seq 1",
        ),
        (
            r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"step":1,"reason":{"kind":"completed"}}}"#,
            "session \"x\" contains malformed pre-react-loop turn/end at seq 1",
        ),
        (
            r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed","why":1}}}"#,
            "session \"x\" contains malformed pre-react-loop turn/end at seq 1",
        ),
        (
            r#"{"type":"steering/message","seq":1,"time":2,"data":{"turn":1,"text":"x"}}"#,
            "session \"x\" contains malformed pre-react-loop steering/message at seq 1",
        ),
    ];
    let path = root.path().join("_no-cwd/x/session.jsonl");
    for (line, reason) in cases {
        write_raw(
            root.path(),
            "_no-cwd/x/session.jsonl",
            &format!("{head}\n{start}\n{line}\n"),
        );
        let c = corruption(root.store().inspect("x"));
        assert_eq!(
            (c.path.clone(), c.offset, c.seq),
            (path.clone(), (head.len() + start.len() + 2) as u64, Some(1)),
            "{line}"
        );
        assert_eq!(
            c.reason,
            format!("stored session \"x\" failed validation: {reason}")
        );
        // The raw view still shows it.
        assert_eq!(root.store().read_raw("x", 1).unwrap()[0].to_json(), line);
    }
    // A turn/start trigger must be a non-empty kind.
    write_raw(
        root.path(),
        "_no-cwd/x/session.jsonl",
        &format!(
            "{head}\n{}\n",
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":""}}}"#
        ),
    );
    assert_eq!(
        corruption(root.store().inspect("x")).reason,
        "stored session \"x\" failed validation: session \"x\" contains malformed pre-react-loop turn/start at seq 0"
    );
}

// ---------------------------------------------------------------------------
// No panics on bad input
// ---------------------------------------------------------------------------

mod damaged {
    use super::*;
    use proptest::prelude::*;

    fn good_file(compression: Compression) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let root = Root::new(compression);
        let turn2 = [
            ev("turn/start", 10, 200, r#"{"turn":2}"#),
            ev("step/start", 11, 201, r#"{"turn":2,"step":1}"#),
            chunk_in(2, 12, 202, "a"),
            chunk_in(2, 13, 203, "b"),
            chunk_in(2, 14, 204, "c"),
        ];
        let path = root.write(&header("d", None), &[&chunk_turn(), &turn2]);
        let bytes = fs::read(&path).unwrap();
        (root.dir, path, bytes)
    }

    fn read_all(root: &Path, compression: Compression) {
        let backend = JsonlBackend::open(root, compression).unwrap();
        let store = Store::with_backend(Arc::new(backend.clone()), StoreOptions::default());
        let _ = store.inspect("d");
        let _ = store.read_from("d", 3);
        let _ = store.read_raw("d", 0);
        let _ = store.list();
        let _ = store.verify("d");
        // A repair of whatever is there must leave a log that reads clean
        // (or is refused as corrupt, as it was before).
        if store.load("d").is_ok() {
            let again = Store::with_backend(Arc::new(backend), StoreOptions::default());
            assert_eq!(again.inspect("d").unwrap().state, LogState::Clean);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn raw_flips_and_cuts(at in 0usize..2000, flip in 1u8..=255, cut in 0usize..2000) {
            let (dir, path, mut bytes) = good_file(Compression::None);
            let n = bytes.len();
            bytes[at % n] ^= flip;
            bytes.truncate(n - cut % n);
            fs::write(&path, &bytes).unwrap();
            read_all(dir.path(), Compression::None);
        }

        #[test]
        fn zstd_flips_and_cuts(at in 0usize..2000, flip in 1u8..=255, cut in 0usize..2000) {
            let (dir, path, mut bytes) = good_file(Compression::Zstd);
            let n = bytes.len();
            bytes[at % n] ^= flip;
            bytes.truncate(n - cut % n);
            fs::write(&path, &bytes).unwrap();
            read_all(dir.path(), Compression::Zstd);
        }

        #[test]
        fn arbitrary_lines(lines in proptest::collection::vec("[ -~]{0,40}", 0..6)) {
            let (dir, path, bytes) = good_file(Compression::None);
            let mut text = bytes;
            for l in &lines {
                text.extend_from_slice(l.as_bytes());
                text.push(b'\n');
            }
            fs::write(&path, &text).unwrap();
            read_all(dir.path(), Compression::None);
        }
    }
}
