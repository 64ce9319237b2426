//! `turnwal convert`, run as a real binary between temporary stores: what
//! is copied (byte for byte), what is said about each session, what is
//! refused, and the exit statuses.

use crate::support;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{T0, append, cat, convert, copy_tree, ev, header, lines, on, turn, turnwal};

fn log_path(store: &Path, id: &str) -> PathBuf {
    support::wal_log(store, id)
}

/// Events whose payloads and envelopes a lossy copy would change: number
/// spellings, key order, escapes and a lone surrogate, `ignorable`,
/// `surfaceOp` before `sourceEventSeqs`, times that go backwards.
fn tricky_events() -> Vec<String> {
    vec![
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        ev(
            "user/message",
            1,
            T0 - 5_000,
            r#"{"n":1e+21,"z":-0.0,"s":"\ud800","b":1,"a":[1.50,"\u0041\/"]}"#,
        ),
        r#"{"type":"plugin/x","seq":2,"time":-7,"data":{ "spaced" : true },"ignorable":true}"#
            .to_owned(),
        r#"{"type":"user/message","seq":3,"time":3,"data":{"id":"u"},"surfaceOp":"append","sourceEventSeqs":[1]}"#
            .to_owned(),
        r#"{"type":"user/message","seq":4,"time":4,"data":{"id":"v"},"sourceEventSeqs":[1,3],"surfaceOp":{"op":"replace","start":0,"end":2}}"#
            .to_owned(),
        ev("turn/end", 5, T0 + 1, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

/// A source store: `chat` (tricky events, then two plain turns), `child`
/// (a fork of `chat`: lineage fields), `lenient` (a plugin event between
/// turns), `crashed` (an open turn inside a step, then torn bytes).
/// Returns each session's inspect view as `cat` prints it.
fn source_store(store: &Path) -> Vec<(&'static str, String)> {
    let mut chat = tricky_events();
    chat.extend(turn(2, 6, T0 + 100));
    chat.extend(turn(3, 12, T0 + 200));
    append(store, &["append", "chat", "--create", "--cwd", "/w"], &chat);

    let out = on(store, &["fork", "chat", "child", "--at", "5"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);

    let mut lenient = turn(1, 0, T0);
    lenient.push(ev("plugin/note", 6, T0 + 9, r#"{"k":1}"#));
    lenient.extend(turn(2, 7, T0 + 20));
    append(
        store,
        &["append", "lenient", "--create", "--lenient"],
        &lenient,
    );

    let mut crashed = turn(1, 0, T0);
    crashed.push(ev("turn/start", 6, T0 + 10, r#"{"turn":2}"#));
    crashed.push(ev("step/start", 7, T0 + 11, r#"{"turn":2,"step":1}"#));
    crashed.push(ev(
        "tool/call",
        8,
        T0 + 12,
        r#"{"turn":2,"step":1,"callId":"c1","name":"bash","arguments":"{}"}"#,
    ));
    append(store, &["append", "crashed", "--create"], &crashed);
    fs::OpenOptions::new()
        .append(true)
        .open(log_path(store, "crashed"))
        .unwrap()
        .write_all(b"torn!")
        .unwrap();

    ["chat", "child", "crashed", "lenient"]
        .into_iter()
        .map(|id| (id, cat(store, id, false)))
        .collect()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

/// The text lines `convert` prints for [`source_store`]'s sessions.
fn converted_lines(crashed_bytes: u64) -> String {
    format!(
        "chat: copied 18 events\n\
         child: copied 7 events\n\
         crashed: copied 11 events (source torn: 9 stored + 2 closers added: the source's \
         open final turn is closed as interrupted; not copied: 5 bytes at byte \
         {crashed_bytes} (seq 9): incomplete-record: 5 bytes left, too few for a record)\n\
         lenient: copied 13 events\n\
         converted 4 of 4 sessions\n"
    )
}

#[test]
fn every_session_is_copied_losslessly_into_a_fresh_store() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let views = source_store(&src);
    let before = snapshot(&src);
    let crashed_bytes = fs::metadata(log_path(&src, "crashed")).unwrap().len() - 5;

    let out = convert(&src, &dst, &[]);
    assert_eq!(out.stderr, "", "no progress when stderr is piped");
    assert_eq!(out.status, 0);
    assert_eq!(out.stdout, converted_lines(crashed_bytes));

    // The source is only read.
    assert_eq!(snapshot(&src), before);
    for (id, view) in &views {
        // The copy stores the source's inspect view: the same bytes with or
        // without --raw, since the closers are now stored.
        assert_eq!(&cat(&dst, id, false), view, "{id}");
        assert_eq!(&cat(&dst, id, true), view, "{id}");
        assert_eq!(header(&dst, id), header(&src, id), "{id}");
    }
    let child = header(&dst, "child");
    assert_eq!(
        (
            child.parent_session.as_deref(),
            child.seed_length,
            child.cwd
        ),
        (Some("chat"), Some(6), Some("/w".to_owned()))
    );
    // Every copy is clean; the crashed source is still torn.
    let out = on(&dst, &["verify"], "");
    assert_eq!(out.status, 0, "{}", out.stdout);
    assert_eq!(on(&src, &["verify", "crashed"], "").status, 1);

    // The lenient policy came along: a plugin event between turns is
    // accepted by the copy, refused by a strict session.
    let next = [ev("plugin/note", 13, T0 + 50, "{}")];
    append(&dst, &["append", "lenient"], &next);
    let out = on(
        &dst,
        &["append", "chat"],
        &lines(&[ev("plugin/note", 18, 1, "{}")]),
    );
    assert_eq!(out.status, 3, "{}", out.stderr);
}

#[test]
fn json_reports_one_object_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    source_store(&src);
    let at = fs::metadata(log_path(&src, "crashed")).unwrap().len() - 5;
    let out = convert(&src, &dst, &["--json", "crashed", "chat"]);
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let objects: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected = [
        format!(
            r#"{{"id":"crashed","copied":true,"state":"torn","events":11,"stored":9,"closers":2,
            "cut":{{"offset":{at},"seq":9,"len":5,"reason":"incomplete-record",
            "detail":"5 bytes left, too few for a record"}},"error":null}}"#
        ),
        r#"{"id":"chat","copied":true,"state":"clean","events":18,"stored":18,"closers":0,
            "cut":null,"error":null}"#
            .to_owned(),
    ];
    let expected: Vec<Value> = expected
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(objects, expected);
    // Only the named sessions were copied.
    let out = on(&dst, &["ls", "--json"], "");
    let ids: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["chat", "crashed"]);
}

#[test]
fn an_existing_session_is_never_overwritten_and_the_others_are_copied() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let views = source_store(&src);
    // The destination already holds a different `child`.
    append(&dst, &["append", "child", "--create"], &turn(1, 0, T0));
    let theirs = fs::read(log_path(&dst, "child")).unwrap();

    let out = convert(&src, &dst, &[]);
    assert_eq!(out.status, 4);
    assert_eq!(
        out.stderr,
        "turnwal: child: not copied: the destination already holds this session (never \
         overwritten)\n"
    );
    let stdout: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(stdout.len(), 4, "{}", out.stdout);
    assert_eq!(stdout[0], "chat: copied 18 events");
    assert!(
        stdout[1].starts_with("crashed: copied 11 events ("),
        "{}",
        stdout[1]
    );
    assert_eq!(
        stdout[2..],
        ["lenient: copied 13 events", "converted 3 of 4 sessions"]
    );
    assert_eq!(fs::read(log_path(&dst, "child")).unwrap(), theirs);
    for (id, view) in &views {
        if *id != "child" {
            assert_eq!(&cat(&dst, id, false), view, "{id}");
        }
    }

    // Run again: everything is there, nothing is touched, all refused.
    let before = snapshot(&dst);
    let out = convert(&src, &dst, &["--json"]);
    assert_eq!(out.status, 4);
    assert_eq!(out.stderr.lines().count(), 4, "{}", out.stderr);
    for line in out.stdout.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            (&v["copied"], &v["error"]),
            (
                &Value::Bool(false),
                &Value::from("the destination already holds this session (never overwritten)")
            )
        );
    }
    assert_eq!(snapshot(&dst), before);
}

#[test]
fn missing_and_corrupt_sessions_are_reported_and_the_others_copied() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    let mut events = turn(1, 0, T0);
    append(&src, &["append", "good", "--create"], &events);
    append(&src, &["append", "bad", "--create"], &events);
    // A second batch, whose records prove the first durable: a flipped
    // byte in the first is corruption, not a torn tail.
    events = turn(2, 6, T0 + 10);
    append(&src, &["append", "bad"], &events);
    let path = log_path(&src, "bad");
    let mut bytes = fs::read(&path).unwrap();
    let at = bytes.windows(4).position(|w| w == b"hi 1").unwrap();
    bytes[at] = b'j';
    fs::write(&path, &bytes).unwrap();

    // Named twice: copied once. Not found (4) outranks corrupt (2), as in
    // `verify`: the highest status wins.
    let out = convert(&src, &dst, &["nope", "good", "bad", "good"]);
    assert_eq!(out.status, 4, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "good: copied 6 events\nconverted 1 of 3 sessions\n"
    );
    let err: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(err.len(), 2, "{}", out.stderr);
    assert_eq!(
        err[0],
        "turnwal: nope: not copied: session \"nope\" not found"
    );
    assert!(
        err[1].starts_with("turnwal: bad: not copied: "),
        "{}",
        err[1]
    );
    assert!(
        err[1].contains("(seq 1): record checksum mismatch"),
        "{}",
        err[1]
    );
    let out = on(&dst, &["ls"], "");
    assert_eq!(
        out.stdout.lines().count(),
        2,
        "a header and good: {}",
        out.stdout
    );
    assert!(!log_path(&dst, "bad").exists());

    // Only a corrupt session: 2.
    let out = convert(&src, &dst, &["bad"]);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (2, "converted 0 of 1 session\n")
    );
}

#[test]
fn a_session_larger_than_a_batch_is_copied_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    // 1,500 turns of 6 events: 9,000 events, more than two batches of
    // 4,096, with payloads of about 1 KiB (4 MiB of them fill a batch too).
    let filler = "y".repeat(1000);
    let mut events = Vec::new();
    for n in 1..=1500u64 {
        let seq0 = events.len() as u64;
        let mut t = turn(n, seq0, T0 + n as i64);
        t[1] = ev(
            "user/message",
            seq0 + 1,
            T0 + n as i64,
            &format!(r#"{{"id":"u{n}","text":"{filler}"}}"#),
        );
        events.extend(t);
    }
    append(
        &src,
        &["append", "big", "--create", "--sync", "never"],
        &events,
    );
    let out = convert(&src, &dst, &[]);
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "big: copied 9000 events\nconverted 1 of 1 session\n", "")
    );
    assert_eq!(cat(&dst, "big", false), lines(&events));
}

#[test]
fn an_empty_source_copies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    fs::create_dir(&src).unwrap();
    let out = convert(&src, &dst, &[]);
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "converted 0 of 0 sessions\n", "")
    );
}

#[test]
fn bad_store_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    append(&src, &["append", "s", "--create"], &turn(1, 0, T0));

    let out = convert(&src, &src, &[]);
    assert_eq!(out.status, 64);
    assert_eq!(
        out.stderr,
        format!(
            "turnwal: --from {0} and --to {0} name the same store\n",
            src.display()
        )
    );
    // Another spelling of the same directory.
    let out = convert(&src, &src.join("sessions").join(".."), &[]);
    assert_eq!(out.status, 64, "{}", out.stderr);

    let missing = dir.path().join("missing");
    let out = convert(&missing, &dst, &[]);
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!("turnwal: --from {}: no such store\n", missing.display())
        )
    );
    assert!(!dst.exists());

    let out = turnwal(
        &[
            "--store",
            src.to_str().unwrap(),
            "convert",
            "--from",
            src.to_str().unwrap(),
            "--to",
            dst.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            64,
            "turnwal: convert names its stores with --from and --to; --store is not used\n"
        )
    );
    let out = turnwal(&["convert", "--from", src.to_str().unwrap()], "");
    assert_eq!(out.status, 64);
    assert!(out.stderr.contains("--to <STORE>"), "{}", out.stderr);

    // A destination that is a plain file is not a store.
    let file = dir.path().join("file");
    fs::write(&file, b"x").unwrap();
    let out = convert(&src, &file, &[]);
    assert_eq!(out.status, 4, "{}", out.stderr);
    assert!(out.stderr.contains("not a directory"), "{}", out.stderr);
}

#[test]
fn help_documents_the_refusal_and_exit_statuses() {
    let out = turnwal(&["convert", "--help"], "");
    assert_eq!(out.status, 0);
    for needle in [
        "--from <STORE>",
        "--to <STORE>",
        "[SESSION]...",
        "--json",
        "never overwritten",
        "the other sessions are still copied",
        "synthetic closers",
        "Exit status: 0 when every session was copied; otherwise the highest of 2",
    ] {
        assert!(out.stdout.contains(needle), "{needle:?} in {}", out.stdout);
    }
}

// ------------------------------------------------------------- SQLite

/// A streamed turn: runs of text, reasoning and tool-call deltas written
/// as the SQLite backend packs them (3 or more members, canonical text),
/// one run in a non-canonical spelling it must keep scalar, and times that
/// jump about.
fn streamed_turn(seq0: u64, t0: i64) -> Vec<String> {
    let mut events = vec![
        ev("turn/start", seq0, t0, r#"{"turn":1}"#),
        ev("step/start", seq0 + 1, t0, r#"{"turn":1,"step":1}"#),
    ];
    let mut push = |dt: i64, data: String| {
        let seq = seq0 + events.len() as u64;
        events.push(ev("assistant/chunk", seq, t0 + dt, &data));
    };
    for (i, text) in ["Hel", "lo", " 😀", "\\u0000!"].iter().enumerate() {
        push(
            [1, 1, 40, 3][i],
            format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
            ),
        );
    }
    for text in ["think", "ing", "…"] {
        push(
            -2,
            format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"reasoning-delta","index":1,"text":"{text}"}}}}"#
            ),
        );
    }
    for args in [r#"{\"cmd\""#, r#":\"ls\"}"#, ""] {
        push(
            50,
            format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"{args}"}}}}"#
            ),
        );
    }
    for text in ["a", "b", "c"] {
        // Keys in another order: stored as written, never packed.
        push(
            60,
            format!(
                r#"{{"step":1,"turn":1,"chunk":{{"index":3,"type":"text-delta","text":"{text}"}}}}"#
            ),
        );
    }
    let seq = seq0 + events.len() as u64;
    events.push(ev("step/end", seq, t0 + 70, r#"{"turn":1,"step":1}"#));
    events.push(ev(
        "turn/end",
        seq + 1,
        t0 + 71,
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ));
    events
}

#[test]
fn wal_to_sqlite_to_wal_keeps_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mut views = source_store(&src);
    let streamed = streamed_turn(0, T0);
    append(&src, &["append", "streamed", "--create"], &streamed);
    assert_eq!(cat(&src, "streamed", false), lines(&streamed));
    views.push(("streamed", lines(&streamed)));
    let crashed_bytes = fs::metadata(log_path(&src, "crashed")).unwrap().len() - 5;

    let db = dir.path().join("sessions.sqlite");
    let out = convert(&src, &db, &[]);
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.stdout,
        converted_lines(crashed_bytes).replace(
            "lenient: copied 13 events\nconverted 4 of 4 sessions\n",
            "lenient: copied 13 events\nstreamed: copied 17 events\nconverted 5 of 5 sessions\n"
        )
    );
    // The runs were packed: fewer rows than events.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE session_id = 'streamed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 17 - 4 - 3 - 3 + 3, "three packed rows");
    drop(conn);

    let back = dir.path().join("back");
    let out = convert(&db, &back, &[]);
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.stdout,
        "chat: copied 18 events\nchild: copied 7 events\ncrashed: copied 11 events\n\
         lenient: copied 13 events\nstreamed: copied 17 events\nconverted 5 of 5 sessions\n"
    );
    let db2 = dir.path().join("copy.db");
    let out = convert(&db, &db2, &["--json", "chat"]);
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let line: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (&line["copied"], &line["events"]),
        (&Value::Bool(true), &Value::from(18))
    );

    for (id, view) in &views {
        for store in [&db, &back] {
            assert_eq!(&cat(store, id, false), view, "{id} in {}", store.display());
            assert_eq!(&cat(store, id, true), view, "{id} in {}", store.display());
            assert_eq!(header(store, id), header(&src, id), "{id}");
        }
    }
    assert_eq!(cat(&db2, "chat", true), views[0].1);
    for store in [&db, &back, &db2] {
        let out = on(store, &["verify"], "");
        assert_eq!(out.status, 0, "{}", out.stdout);
    }
    // The lenient policy survived both hops.
    for store in [&db, &back] {
        append(
            store,
            &["append", "lenient"],
            &[ev("plugin/note", 13, T0, "{}")],
        );
        let out = on(
            store,
            &["append", "chat"],
            &lines(&[ev("plugin/note", 18, 1, "{}")]),
        );
        assert_eq!(out.status, 3, "{}", out.stderr);
    }
    // Same store, another spelling: refused.
    let out = convert(&db, &dir.path().join(".").join("sessions.sqlite"), &[]);
    assert_eq!(out.status, 64, "{}", out.stderr);
}

#[test]
fn sqlite_options_apply_to_a_converted_database() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    append(&src, &["append", "s", "--create"], &turn(1, 0, T0));
    let db = dir.path().join("out.db");
    let out = convert(
        &src,
        &db,
        &["--journal-mode", "delete", "--busy-timeout", "100"],
    );
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "s: copied 6 events\nconverted 1 of 1 session\n", "")
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    // Out of wal mode (a rollback journal mode is not kept in the file, so
    // a new connection reports the default, delete).
    assert_eq!(mode, "delete");
    // Between two WAL stores they mean nothing: refused.
    let out = convert(&src, &dir.path().join("wal"), &["--synchronous", "normal"]);
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            64,
            "turnwal: --synchronous applies to SQLite stores (.sqlite or .db files) only, and \
             this command opens none\n"
        )
    );
}

#[test]
fn a_partial_copy_left_by_a_crash_is_removed_with_rm_then_converted_again() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst.sqlite"));
    let mut events = turn(1, 0, T0);
    events.extend(turn(2, 6, T0 + 10));
    append(&src, &["append", "s", "--create"], &events);
    // What a convert killed mid-session leaves: a prefix, its turn open.
    append(&dst, &["append", "s", "--create"], &events[..8]);
    let out = convert(&src, &dst, &[]);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (4, "converted 0 of 1 session\n")
    );
    let out = on(&dst, &["rm", "s"], "");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "deleted s\n", "")
    );
    let out = on(&dst, &["rm", "s"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (4, "turnwal: session \"s\" not found\n")
    );
    let out = convert(&src, &dst, &["s"]);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "s: copied 12 events\nconverted 1 of 1 session\n")
    );
    assert_eq!(cat(&dst, "s", true), lines(&events));
    // On a WAL store rm removes the log file.
    let out = on(&src, &["rm", "s"], "");
    assert_eq!(out.status, 0);
    assert!(!log_path(&src, "s").exists());
    assert_eq!(on(&src, &["ls", "--json"], "").stdout, "");
}

// -------------------------------------------------------------- JSONL

#[test]
fn wal_to_jsonl_to_wal_keeps_what_the_upstream_format_can_hold() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let views = source_store(&src);
    let crashed_bytes = fs::metadata(log_path(&src, "crashed")).unwrap().len() - 5;
    let root = dir.path().join("root");
    let jsonl = format!("jsonl:{}", root.display());
    let out = turnwal(
        &["convert", "--from", src.to_str().unwrap(), "--to", &jsonl],
        "",
    );
    // Upstream's format refuses an unknown event type not marked
    // ignorable: the lenient session's plugin event between turns. Nothing
    // of it was written, so there is no partial copy to delete.
    assert_eq!(out.status, 4);
    assert_eq!(
        out.stderr,
        "turnwal: lenient: not copied: turn contract violation at seq 6 (plugin/note): rule \
         unknown-type: type \"plugin/note\" is not a known session event type and is not \
         marked ignorable\n"
    );
    assert_eq!(
        out.stdout,
        converted_lines(crashed_bytes).replace(
            "lenient: copied 13 events\nconverted 4 of 4 sessions\n",
            "converted 3 of 4 sessions\n"
        )
    );
    let back = dir.path().join("back");
    let out = turnwal(
        &["convert", "--from", &jsonl, "--to", back.to_str().unwrap()],
        "",
    );
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (
            0,
            "chat: copied 18 events\nchild: copied 7 events\ncrashed: copied 11 events\n\
             converted 3 of 3 sessions\n",
            ""
        )
    );
    for (id, view) in &views[..3] {
        assert_eq!(&cat(&back, id, true), view, "{id}");
        // The upstream format writes delegationDepth on every header: a
        // top-level session reads back with 0.
        let mut expected = header(&src, id);
        assert_eq!(expected.delegation_depth, None);
        expected.delegation_depth = Some(0);
        assert_eq!(header(&back, id), expected, "{id}");
    }
}

// ----------------------------------------------------------- progress

/// Runs `turnwal ARGS` with stderr on a pseudo-terminal; returns the exit
/// status, stdout, and the bytes written to the terminal.
fn with_terminal_stderr(args: &[&str]) -> (i32, String, String) {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the pointers given;
    // the name, termios and window size arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let child = support::command(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(slave)
        .spawn()
        .unwrap();
    // The parent's copy of the slave went into the Command and is closed
    // once the child is spawned, so reading the master ends (EIO) when the
    // child exits.
    let out = child.wait_with_output().unwrap();
    let mut terminal = Vec::new();
    let mut master = fs::File::from(master);
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => terminal.extend_from_slice(&buf[..n]),
        }
    }
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(terminal).unwrap(),
    )
}

#[test]
fn progress_is_drawn_on_a_terminal_and_erased() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    append(&src, &["append", "a", "--create"], &turn(1, 0, T0));
    let mut two = turn(1, 0, T0);
    two.extend(turn(2, 6, T0 + 10));
    append(&src, &["append", "b", "--create"], &two);
    let (status, stdout, terminal) = with_terminal_stderr(&[
        "convert",
        "--from",
        src.to_str().unwrap(),
        "--to",
        dst.to_str().unwrap(),
    ]);
    assert_eq!(
        (status, stdout.as_str()),
        (
            0,
            "a: copied 6 events\nb: copied 12 events\nconverted 2 of 2 sessions\n"
        )
    );
    assert_eq!(
        terminal,
        "\rconverting 1/2: a\x1b[K\rconverting 1/2: a 6/6 events\x1b[K\r\x1b[K\
         \rconverting 2/2: b\x1b[K\rconverting 2/2: b 12/12 events\x1b[K\r\x1b[K"
    );
    // verify of a whole store draws the same way (the shared progress line).
    let (status, _, terminal) = with_terminal_stderr(&["--store", dst.to_str().unwrap(), "verify"]);
    assert_eq!(status, 0);
    assert_eq!(
        terminal,
        "\rverifying 1/2: a\x1b[K\r\x1b[K\rverifying 2/2: b\x1b[K\r\x1b[K\r\x1b[K"
    );
}

/// A JSONL root written by upstream holds a session whose id and cwd carry
/// lone UTF-16 surrogates: `ls` prints the id as its JSON string, every id
/// argument takes that spelling back, `convert` copies it exactly into a WAL
/// store and refuses it, naming the field, for an SQLite one.
#[test]
fn lone_surrogate_ids_are_printed_taken_back_and_converted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/none/after"),
        &root,
    );
    let jsonl = format!("jsonl:{}", root.display());
    let ls = turnwal(&["--store", &jsonl, "ls"], "");
    assert_eq!(ls.status, 0, "{}", ls.stderr);
    assert!(
        ls.stdout.lines().any(|l| l.split_whitespace().take(6).eq([
            r#""lone\ud800id""#,
            "clean-end",
            "14",
            "2",
            "2.7",
            "KiB"
        ])),
        "{}",
        ls.stdout
    );
    let json = turnwal(&["--store", &jsonl, "ls", "--json"], "");
    assert!(
        json.stdout
            .lines()
            .any(|l| l.starts_with(r#"{"id":"lone\ud800id","events":14,"#)),
        "{}",
        json.stdout
    );
    let id_arg = r#""lone\ud800id""#;
    let from_jsonl = turnwal(&["--store", &jsonl, "cat", id_arg], "");
    assert_eq!(from_jsonl.status, 0, "{}", from_jsonl.stderr);
    assert_eq!(from_jsonl.stdout.lines().count(), 14);

    let wal = tmp.path().join("wal");
    let out = convert(Path::new(&jsonl), &wal, &[r#""lone\ud800id""#]);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (
            0,
            "\"lone\\ud800id\": copied 14 events\nconverted 1 of 1 session\n"
        ),
        "{}",
        out.stderr
    );
    assert!(wal.join("sessions/lone~ED~A0~80id.twal").exists());
    assert_eq!(cat(&wal, id_arg, false), from_jsonl.stdout);

    let db = tmp.path().join("s.sqlite");
    let out = convert(&wal, &db, &[]);
    assert_eq!(out.status, 4, "{}", out.stderr);
    assert_eq!(out.stdout, "converted 0 of 1 session\n");
    assert!(
        out.stderr
            .starts_with("turnwal: \"lone\\ud800id\": not copied: ")
            && out.stderr.contains(
                r#"session header field id "lone\ud800id" holds a lone UTF-16 surrogate"#
            ),
        "{}",
        out.stderr
    );

    // U+10FFFF outside a spelling is no id: refused before anything is read.
    let bad = turnwal(
        &["--store", wal.to_str().unwrap(), "cat", "a\u{10FFFF}"],
        "",
    );
    assert_eq!(bad.status, 64, "{}", bad.stderr);
    assert!(bad.stderr.contains("noncharacter"), "{}", bad.stderr);
}

// ------------------------------------------------- an interrupted convert

/// `turnwal convert --from SRC --to DST` with the hidden abort hook set: it
/// must end by SIGABRT (as a SIGKILL would: no cleanup), having printed the
/// lines of the sessions it copied.
fn convert_aborted(src: &Path, dst: &Path, abort_after: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let out = support::command(&[
        "convert",
        "--from",
        src.to_str().unwrap(),
        "--to",
        dst.to_str().unwrap(),
    ])
    .env("TURNWAL_TEST_CONVERT_ABORT_AFTER", abort_after)
    .output()
    .unwrap();
    assert_eq!(out.status.signal(), Some(6), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Sessions `a`, `b` and `c` of 1, 1,500 and 2 turns in a WAL store at
/// `src`; returns each one's `cat`.
fn three_sessions(src: &Path) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (id, turns) in [("a", 1u64), ("b", 1500), ("c", 2)] {
        let mut events = Vec::new();
        for n in 1..=turns {
            events.extend(turn(n, events.len() as u64, T0 + n as i64));
        }
        append(src, &["append", id, "--create", "--sync", "never"], &events);
        out.push((id, lines(&events)));
    }
    out
}

#[test]
fn a_killed_convert_leaves_no_partial_session_and_skip_existing_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let sessions = three_sessions(&src);
    for dst in [
        dir.path().join("dst"),
        dir.path().join("dst.sqlite"),
        PathBuf::from(format!("jsonl:{}", dir.path().join("root").display())),
    ] {
        // Killed once `a` is copied and 4,096 of `b`'s 9,000 events are read
        // (the old batches would have made that a balanced, clean prefix).
        let printed = convert_aborted(&src, &dst, "1:4096");
        assert_eq!(printed, "a: copied 6 events\n", "{dst:?}");
        let out = on(&dst, &["ls", "--json"], "");
        let listed: Vec<Value> = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(listed.len(), 1, "{dst:?}: {}", out.stdout);
        assert_eq!(listed[0]["id"], "a");
        let out = on(&dst, &["verify"], "");
        assert_eq!(out.status, 0, "{dst:?}: {}", out.stdout);

        // Killed between sessions: `b` is whole, `c` absent.
        let out = convert(&src, &dst, &["b"]);
        assert_eq!(out.status, 0, "{dst:?}: {}", out.stderr);

        // A plain re-run refuses what is there; --skip-existing skips it
        // and copies the rest exactly.
        let out = convert(&src, &dst, &["a"]);
        assert_eq!(
            (out.status, out.stderr.as_str()),
            (
                4,
                "turnwal: a: not copied: the destination already holds this session (never \
                 overwritten)\n"
            ),
            "{dst:?}"
        );
        let out = convert(&src, &dst, &["--skip-existing"]);
        assert_eq!(
            (out.status, out.stdout.as_str(), out.stderr.as_str()),
            (
                0,
                "a: skipped: the destination already holds it\nb: skipped: the destination \
                 already holds it\nc: copied 12 events\nconverted 1 of 3 sessions (2 skipped: \
                 already in the destination)\n",
                ""
            ),
            "{dst:?}"
        );
        for (id, events) in &sessions {
            assert_eq!(&cat(&dst, id, true), events, "{dst:?} {id}");
        }
        let out = convert(&src, &dst, &["--skip-existing", "--json", "a"]);
        assert_eq!(
            (out.status, out.stdout.as_str()),
            (
                0,
                "{\"id\":\"a\",\"copied\":false,\"state\":null,\"events\":0,\"stored\":0,\
                 \"closers\":0,\"cut\":null,\"error\":\"the destination already holds this \
                 session\",\"skipped\":true}\n"
            )
        );
    }
}

#[test]
fn a_sigkilled_convert_never_leaves_a_session_that_looks_complete() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let sessions = three_sessions(&src);
    for (round, delay_ms) in [0u64, 5, 10, 20, 40, 80].into_iter().enumerate() {
        for dst in [
            dir.path().join(format!("dst{round}")),
            dir.path().join(format!("dst{round}.sqlite")),
        ] {
            let mut child = support::command(&[
                "convert",
                "--from",
                src.to_str().unwrap(),
                "--to",
                dst.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            let _ = child.kill();
            child.wait().unwrap();
            if !dst.exists() {
                continue;
            }
            // Whatever is listed is whole.
            let out = on(&dst, &["ls", "--json"], "");
            for line in out.stdout.lines() {
                let s: Value = serde_json::from_str(line).unwrap();
                let id = s["id"].as_str().unwrap();
                let (_, events) = sessions.iter().find(|(i, _)| *i == id).unwrap();
                assert_eq!(&cat(&dst, id, true), events, "{dst:?} {id}");
            }
            let out = convert(&src, &dst, &["--skip-existing"]);
            assert_eq!(out.status, 0, "{dst:?}: {}", out.stderr);
            for (id, events) in &sessions {
                assert_eq!(&cat(&dst, id, true), events, "{dst:?} {id}");
            }
        }
    }
}

/// The operator's commands on a root the real upstream harness wrote (zstd,
/// every kind of session it leaves: torn, open, legacy-free, lone-surrogate
/// and rich ids): each answers, and their answers agree with `cat`, with
/// one another and with the files.
#[test]
fn operator_commands_read_an_upstream_written_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/zstd/after"),
        &root,
    );
    let store = PathBuf::from(format!("jsonl:{}", root.display()));
    // Ids as `ls --json` spells them (a lone surrogate as `\ud800`, which
    // serde_json's strict parser refuses); the other fields parse.
    let listing = on(&store, &["ls", "--json"], "").stdout;
    let ids: Vec<String> = listing
        .lines()
        .map(|l| {
            let rest = l.strip_prefix(r#"{"id":"#).unwrap();
            rest[..rest.find(r#","events":"#).unwrap()].to_owned()
        })
        .collect();
    let listed: Vec<Value> = listing
        .lines()
        .map(|l| {
            let rest = &l[l.find(r#","events":"#).unwrap() + 1..];
            serde_json::from_str(&format!("{{{rest}")).unwrap()
        })
        .collect();
    assert_eq!(
        ids,
        [
            r#""lone\ud800id""#,
            r#""open-turn""#,
            r#""rich ~id/../ü""#,
            r#""torn""#,
            r#""torn-head""#
        ],
        "natural order"
    );
    // `du` adds up to the transcripts' sizes.
    let du = on(&store, &["du", "--json"], "").stdout;
    let du: Vec<Value> = vec![serde_json::from_str(du.lines().last().unwrap()).unwrap()];
    let files: u64 = walk(&root)
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(du.last().unwrap()["total"]["bytes"].as_u64(), Some(files));
    let wal = tmp.path().join("moved");
    let db = tmp.path().join("moved.sqlite");
    for (id, line) in ids.iter().zip(&listed) {
        let id = id.as_str();
        let raw = cat(&store, id, true);
        let stored = raw.lines().count() as u64;
        // stats counts what `cat --raw` prints, and what ls listed.
        let stats: Value = without_id(&on(&store, &["stats", id, "--json"], "").stdout);
        let reference_stats = stats.clone();
        assert_eq!(stats["events"].as_u64(), Some(stored), "{id}");
        assert_eq!(stats["turns"], line["turns"], "{id}");
        let types: u64 = stats["types"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(types, stored, "{id}");
        // Every turn/start is found by grep, each in its session.
        let hits = on(
            &store,
            &[
                "grep",
                "--session",
                id,
                "--type",
                "turn/start",
                "--json",
                "turn",
            ],
            "",
        );
        assert_eq!(
            hits.stdout.lines().count() as u64,
            stats["types"]["turn/start"].as_u64().unwrap_or(0),
            "{id}"
        );
        // show prints every turn.
        let show = on(&store, &["show", id], "");
        assert_eq!(show.status, 0, "{id}: {}", show.stderr);
        for n in 1..=stats["turns"].as_u64().unwrap() {
            assert!(
                show.stdout.contains(&format!("\nTurn {n} · ")),
                "{id}: turn {n}\n{}",
                show.stdout
            );
        }
        // head is the header ls listed.
        let head = on(&store, &["head", id, "--json"], "").stdout;
        let created = format!(r#""createdAt":{},"#, line["createdAt"]);
        assert!(head.contains(&created), "{id}: {head}");
        // export, import into a WAL store: the same inspect view.
        let exported = on(&store, &["export", id], "");
        assert_eq!(exported.status, 0, "{id}: {}", exported.stderr);
        let file = tmp.path().join("session.export");
        fs::write(&file, &exported.stdout).unwrap();
        let imported = on(&wal, &["import", file.to_str().unwrap()], "");
        assert_eq!(imported.status, 0, "{id}: {}", imported.stderr);
        assert_eq!(cat(&wal, id, false), cat(&store, id, false), "{id}");
        // Into SQLite too (a lone-surrogate id has no place there): every
        // command answers alike on the three stores.
        let mut stores = vec![&wal];
        if !id.contains(r"\ud800") {
            let imported = on(&db, &["import", file.to_str().unwrap()], "");
            assert_eq!(imported.status, 0, "{id}: {}", imported.stderr);
            stores.push(&db);
        }
        for other in stores {
            for args in [
                &["show", id, "--format", "markdown"][..],
                &["grep", "--session", id, "--json", "."],
                &["cat", id],
                &["tail", id, "-n", "3"],
            ] {
                assert_eq!(
                    on(other, args, "").stdout,
                    on(&store, args, "").stdout,
                    "{id} {args:?} on {}",
                    other.display()
                );
            }
            let stats = without_id(&on(other, &["stats", id, "--json"], "").stdout);
            for key in [
                "events", "turns", "types", "tokens", "tools", "outcomes", "models",
            ] {
                assert_eq!(
                    stats[key],
                    reference_stats[key],
                    "{id} {key} on {}",
                    other.display()
                );
            }
        }
    }
}

/// A `stats --json` line parsed without its `id`, `cwd` and `parentSession`
/// (which may spell lone surrogates serde_json refuses).
fn without_id(line: &str) -> Value {
    let mut value = String::new();
    let mut rest = line.trim_end();
    for key in [r#""id":"#, r#""cwd":"#, r#""parentSession":"#] {
        if let Some(at) = rest.find(key) {
            value.push_str(&rest[..at]);
            let after = &rest[at + key.len()..];
            // The value runs to the next `,"` at this level: ids and cwds
            // are strings (their quotes escaped inside) or null.
            let end = if after.starts_with('"') {
                let mut i = 1;
                let b = after.as_bytes();
                while b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i + 1
            } else {
                after.find(',').unwrap()
            };
            value.push_str(&format!("{key}null"));
            rest = &after[end..];
        }
    }
    value.push_str(rest);
    serde_json::from_str(&value).unwrap()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A turn of streamed text: `turn/start`, a step of `deltas` text deltas
/// (a run upstream's JSONL writer packs into one row) and — when `close` —
/// `step/end` and `turn/end`; from `seq` on.
fn text_turn(n: u64, seq: u64, deltas: u64, close: bool) -> Vec<String> {
    let t = T0 + seq as i64 * 10;
    let mut out = vec![
        ev("turn/start", seq, t, &format!(r#"{{"turn":{n}}}"#)),
        ev(
            "step/start",
            seq + 1,
            t,
            &format!(r#"{{"turn":{n},"step":1}}"#),
        ),
    ];
    for i in 0..deltas {
        out.push(ev(
            "assistant/chunk",
            seq + 2 + i,
            t + i as i64,
            &format!(
                r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"w{i} "}}}}"#
            ),
        ));
    }
    if close {
        let s = seq + 2 + deltas;
        out.push(ev(
            "step/end",
            s,
            t + 50,
            &format!(r#"{{"turn":{n},"step":1}}"#),
        ));
        out.push(ev(
            "turn/end",
            s + 1,
            t + 51,
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        ));
    }
    out
}

#[test]
fn export_jsonl_is_the_text_convert_writes_into_a_plain_jsonl_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let jsonl = format!("jsonl+none:{}", root.display());
    let mut closed = text_turn(1, 0, 5, true);
    closed.extend(text_turn(2, 9, 4, true));
    // A crashed writer's session: its second turn open mid-stream.
    let mut open = text_turn(1, 0, 3, true);
    open.extend(text_turn(2, 7, 6, false));
    let mut texts = Vec::new();
    for store in [dir.path().join("wal"), dir.path().join("s.sqlite")] {
        append(
            &store,
            &["append", "closed", "--create", "--cwd", "/w"],
            &closed,
        );
        append(
            &store,
            &["append", "open", "--create", "--cwd", "/w"],
            &open,
        );
        let export = |id: &str| {
            let out = on(&store, &["export", "--jsonl", id], "");
            assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{id}");
            out.stdout
        };
        texts.push((export("closed"), export("open")));
    }
    // `append --create` stamps the creation time: the header lines differ there alone.
    let body = |text: &str| text.split_once('\n').unwrap().1.to_owned();
    assert_eq!(
        (body(&texts[0].0), body(&texts[0].1)),
        (body(&texts[1].0), body(&texts[1].1)),
        "the same records from a WAL and a SQLite store"
    );
    let (closed_text, open_text) = texts.swap_remove(0);
    let header = r#"{"type":"session","version":0,"id":"closed","createdAt":"#;
    assert!(closed_text.starts_with(header), "{closed_text}");
    let rows: Vec<&str> = closed_text.lines().collect();
    // Header, and per turn: turn/start, step/start, one packed row of
    // deltas, step/end, turn/end.
    assert_eq!(rows.len(), 1 + 2 * 5);
    assert_eq!(
        rows[3],
        format!(
            r#"{{"type":"text-chunks","seq0":2,"time0":{},"data":{{"turn":1,"step":1,"index":0,"dt":[1,1,1,1],"texts":["w0 ","w1 ","w2 ","w3 ","w4 "]}}}}"#,
            T0
        )
    );
    // The open turn as stored: its last line is its last delta's row, no closers.
    assert!(
        open_text
            .lines()
            .last()
            .unwrap()
            .contains(r#""texts":["w0 ","w1 ","w2 ","w3 ","w4 ","w5 "]"#)
    );

    // `convert` into a plain JSONL root writes the closed session's text
    // byte for byte; the open one's with the closers recovery adds after it.
    let wal = dir.path().join("wal");
    let out = turnwal(
        &["convert", "--from", wal.to_str().unwrap(), "--to", &jsonl],
        "",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let logs: Vec<(PathBuf, Vec<u8>)> = snapshot(&root)
        .into_iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n == "session.jsonl"))
        .collect();
    let text_of = |id: &str| {
        let needle = format!(r#""id":"{id}""#);
        let (_, bytes) = logs
            .iter()
            .find(|(_, b)| {
                String::from_utf8_lossy(b)
                    .lines()
                    .next()
                    .unwrap()
                    .contains(&needle)
            })
            .unwrap();
        String::from_utf8(bytes.clone()).unwrap()
    };
    assert_eq!(text_of("closed"), closed_text);
    let converted_open = text_of("open");
    let closers = converted_open.strip_prefix(open_text.as_str()).unwrap();
    let types: Vec<String> = closers
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(types, ["step/end", "turn/end"]);
    assert!(closers.contains(r#""reason":{"kind":"interrupted"}"#));
}

#[test]
fn export_jsonl_refuses_a_session_no_jsonl_log_can_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("wal");
    // A lenient session may hold an ignorable event whose type is a
    // packed-row tag; its JSONL line would read back as a malformed row.
    let events = vec![
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        r#"{"type":"text-chunks","seq":1,"time":1,"data":{},"ignorable":true}"#.to_owned(),
        ev(
            "turn/end",
            2,
            T0,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
    ];
    append(&store, &["append", "r", "--create", "--lenient"], &events);
    let out = on(&store, &["export", "--jsonl", "r"], "");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (
            4,
            "",
            "turnwal: invalid event at seq 1, type \"text-chunks\": a JSONL store cannot hold an \
             event of type \"text-chunks\": that is a packed-row tag, and its line would read back \
             as a malformed packed row\n"
        )
    );
}
