//! The `turnwal` command line, run as a real binary against temporary stores.
//! The outputs and exit statuses are a contract scripts rely on, so these
//! tests compare them exactly.

use crate::support;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use serde_json::Value;
use support::{BIN, Output, T0, command, ev, lines, on, run_cmd, turn_saying};

/// How long an ack that should arrive may take (slow, shared CI machines).
const ACK_WAIT: Duration = Duration::from_secs(20);
/// How long to watch for an ack that must not arrive.
const SILENCE: Duration = Duration::from_millis(300);

/// `turnwal --store STORE` without `$TURNWAL_STORE`, to add arguments to.
fn turnwal(store: &Path) -> Command {
    command(&["--store", store.to_str().unwrap()])
}

fn run(store: &Path, args: &[&str], stdin: &str) -> Output {
    on(store, args, stdin)
}

/// A complete turn of six events, seqs from `seq0`, times from `t0` (the
/// texts this file's exact outputs were written for).
fn turn(n: u64, seq0: u64, t0: i64) -> Vec<String> {
    turn_saying(n, seq0, t0, &format!("hello {n}"), "hi")
}

fn acks(seqs: std::ops::Range<u64>) -> String {
    seqs.map(|s| format!("ack {s}\n")).collect()
}

fn log_path(store: &Path, id: &str) -> PathBuf {
    support::wal_log(store, id)
}

/// Creates session `id` holding `turns` complete turns.
fn session_with_turns(store: &Path, id: &str, turns: u64) -> Vec<String> {
    let mut events = Vec::new();
    for n in 1..=turns {
        events.extend(turn(n, events.len() as u64, T0 + 100 * n as i64));
    }
    let out = run(
        store,
        &["append", id, "--create", "--cwd", "/w"],
        &lines(&events),
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert_eq!(out.stdout, acks(0..events.len() as u64));
    events
}

fn cat(store: &Path, id: &str) -> String {
    let out = run(store, &["cat", id], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""), "cat {id}");
    out.stdout
}

// ---------------------------------------------------------------- append

#[test]
fn append_acks_every_event_and_cat_gives_them_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let events = session_with_turns(dir.path(), "s", 2);
    assert_eq!(cat(dir.path(), "s"), lines(&events));
    let out = run(dir.path(), &["cat", "s", "--from", "10"], "");
    assert_eq!(out.stdout, lines(&events[10..]));
}

#[test]
fn append_assigns_seq_and_time_when_absent() {
    let dir = tempfile::tempdir().unwrap();
    let input = concat!(
        "{\"type\":\"turn/start\",\"time\":5,\"data\":{\"turn\":1}}\n",
        "\n",
        "   \n",
        "{\"type\":\"user/message\",\"data\":{\"id\":\"u\"}}\n",
        "{\"type\":\"turn/end\",\"seq\":2,\"time\":7,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}",
    );
    let before = now_ms();
    let out = run(dir.path(), &["append", "s", "--create"], input);
    let after = now_ms();
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "ack 0\nack 1\nack 2\n")
    );
    let printed = cat(dir.path(), "s");
    let got: Vec<&str> = printed.lines().collect();
    assert_eq!(got[0], ev("turn/start", 0, 5, r#"{"turn":1}"#));
    let user: Value = serde_json::from_str(got[1]).unwrap();
    assert_eq!(user["seq"], 1);
    let time = user["time"].as_i64().unwrap();
    assert!(
        (before..=after).contains(&time),
        "{before} <= {time} <= {after}"
    );
    assert_eq!(
        got[1],
        ev("user/message", 1, time, r#"{"id":"u"}"#),
        "time defaults to now"
    );
    assert_eq!(
        got[2],
        ev(
            "turn/end",
            2,
            7,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#
        )
    );
    assert_eq!(got.len(), 3);
}

#[test]
fn data_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let data = r#"{"n":1e+21,"z":-0.0,"s":"\ud800","b":1,"a":[1.50,"\u0041\/"]}"#;
    let events = [
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        ev("user/message", 1, T0, data),
        ev(
            "turn/end",
            2,
            T0,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
    ];
    let out = run(dir.path(), &["append", "s", "--create"], &lines(&events));
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(cat(dir.path(), "s"), lines(&events));
}

#[test]
fn extra_envelope_keys_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let events = [
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        r#"{"type":"plugin/x","seq":1,"time":2,"data":{},"ignorable":true}"#.to_owned(),
        r#"{"type":"user/message","seq":2,"time":3,"data":{"id":"u"},"surfaceOp":"append","sourceEventSeqs":[1]}"#.to_owned(),
        ev("turn/end", 3, T0, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ];
    let out = run(dir.path(), &["append", "s", "--create"], &lines(&events));
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(cat(dir.path(), "s"), lines(&events));
}

/// A running `turnwal append` fed line by line, its acks read as they come.
struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
    acks: Receiver<String>,
}

impl Writer {
    fn start(store: &Path, args: &[&str]) -> Writer {
        let mut child = turnwal(store)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, acks) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Writer { child, stdin, acks }
    }

    fn send(&mut self, events: &[String]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(lines(events).as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn expect_acks(&self, seqs: std::ops::Range<u64>) {
        for seq in seqs {
            let line = self.acks.recv_timeout(ACK_WAIT).expect("an ack line");
            assert_eq!(line, format!("ack {seq}"));
        }
    }

    fn expect_no_ack(&self) {
        match self.acks.recv_timeout(SILENCE) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected no ack yet, got {other:?}"),
        }
    }

    /// Closes stdin; returns the exit status and every line printed after.
    fn finish(mut self) -> (i32, Vec<String>, String) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap().code().unwrap();
        let rest = self.acks.iter().collect();
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status, rest, stderr)
    }
}

#[test]
fn sync_turn_acks_when_a_turn_end_is_fsynced() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let next = turn(2, 6, T0 + 1000);
    let mut w = Writer::start(dir.path(), &["append", "s"]);
    w.send(&next[..2]);
    w.expect_no_ack();
    w.send(&next[2..]);
    w.expect_acks(6..12);
    w.send(&turn(3, 12, T0 + 2000)[..1]);
    w.expect_no_ack();
    let (status, rest, stderr) = w.finish();
    assert_eq!(
        (status, rest, stderr.as_str()),
        (0, vec!["ack 12".to_owned()], "")
    );
}

#[test]
fn sync_batch_acks_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let next = turn(2, 6, T0 + 1000);
    let mut w = Writer::start(dir.path(), &["append", "s", "--sync", "batch"]);
    w.send(&next[..1]);
    w.expect_acks(6..7);
    w.send(&next[1..2]);
    w.expect_acks(7..8);
    let (status, rest, _) = w.finish();
    assert_eq!((status, rest.len()), (0, 0));
}

#[test]
fn sync_never_acks_once_written() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let next = turn(2, 6, T0 + 1000);
    let mut w = Writer::start(dir.path(), &["append", "s", "--sync", "never"]);
    w.send(&next[..2]);
    w.expect_acks(6..8);
    let (status, rest, _) = w.finish();
    assert_eq!((status, rest.len()), (0, 0));
    let mut all = turn(1, 0, T0 + 100);
    all.extend_from_slice(&next[..2]);
    // The turn left open at end of input gets its closer in the inspect view.
    all.push(ev(
        "turn/end",
        8,
        T0 + 1001,
        r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
    ));
    assert_eq!(cat(dir.path(), "s"), lines(&all));
}

/// Appends `good` then `bad` (and a line after it) to a new session and
/// checks: exit 3, stderr names `line`, the good events acked and intact.
fn assert_rejected(good: &[String], bad: &str, line: usize, reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut input = lines(good);
    input.push_str(bad);
    input.push('\n');
    input.push_str(&ev("turn/start", 99, T0, r#"{"turn":9}"#));
    let out = run(dir.path(), &["append", "s", "--create"], &input);
    assert_eq!(out.status, 3, "stderr: {}", out.stderr);
    assert_eq!(out.stderr, format!("turnwal: line {line}: {reason}\n"));
    assert_eq!(out.stdout, acks(0..good.len() as u64));
    assert_eq!(cat(dir.path(), "s"), lines(good));
}

#[test]
fn bad_json_line_is_rejected_after_storing_what_precedes_it() {
    let bad = r#"{"type":"turn/start","data":{"turn":2}"#;
    // The blank line before it counts: the bad line is line 8.
    assert_rejected(
        &turn(1, 0, T0),
        &format!("\n{bad}"),
        8,
        "invalid event: invalid event JSON: unexpected end of input at byte 38",
    );
}

#[test]
fn unknown_envelope_key_is_rejected() {
    assert_rejected(
        &turn(1, 0, T0),
        r#"{"type":"turn/start","data":{"turn":2},"extra":1}"#,
        7,
        "invalid event: unknown field `extra`, expected one of `type`, \
         `seq`, `time`, `data`, `ignorable`, `sourceEventSeqs`, `surfaceOp`",
    );
}

#[test]
fn seq_mismatch_is_rejected() {
    assert_rejected(
        &turn(1, 0, T0),
        &ev("turn/start", 9, T0, r#"{"turn":2}"#),
        7,
        "seq mismatch: the session's next seq is 6, but the line has seq 9",
    );
}

#[test]
fn contract_violation_is_rejected_at_its_line() {
    // All in one batch: the store refuses the batch, the CLI stores the
    // events before the violating one and reports that one's line.
    let mut good = turn(1, 0, T0);
    good.push(ev("turn/start", 6, T0 + 10, r#"{"turn":2}"#));
    good.push(ev("user/message", 7, T0 + 11, r#"{"id":"u"}"#));
    let bad = ev(
        "turn/end",
        8,
        T0 + 12,
        r#"{"turn":3,"reason":{"kind":"completed"}}"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let input = format!("{}{bad}\n", lines(&good));
    let out = run(dir.path(), &["append", "s", "--create"], &input);
    assert_eq!(out.status, 3);
    assert_eq!(
        out.stderr,
        "turnwal: line 9: turn contract violation at seq 8 (turn/end): rule turn-mismatch: \
         names turn 3, but turn 2 is open\n"
    );
    assert_eq!(out.stdout, acks(0..8));
    let mut view = good.clone();
    view.push(ev(
        "turn/end",
        8,
        T0 + 11,
        r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
    ));
    assert_eq!(cat(dir.path(), "s"), lines(&view));
}

#[test]
fn lenient_sessions_accept_plugin_events_between_turns() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = turn(1, 0, T0);
    events.push(ev("plugin/note", 6, T0 + 9, r#"{"k":1}"#));
    let input = lines(&events);
    let strict = run(dir.path(), &["append", "strict", "--create"], &input);
    assert_eq!(strict.status, 3);
    assert_eq!(
        strict.stderr,
        "turnwal: line 7: turn contract violation at seq 6 (plugin/note): rule enclosure: \
         no turn is open (strict policy)\n"
    );
    let lenient = run(
        dir.path(),
        &["append", "l", "--create", "--lenient"],
        &input,
    );
    assert_eq!((lenient.status, lenient.stdout), (0, acks(0..7)));
    assert_eq!(cat(dir.path(), "l"), input);
}

#[test]
fn append_refuses_missing_and_existing_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["append", "nope"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (4, "turnwal: session \"nope\" not found\n")
    );
    session_with_turns(dir.path(), "s", 1);
    let out = run(dir.path(), &["append", "s", "--create"], "");
    assert_eq!(out.status, 4);
    assert!(
        out.stderr
            .starts_with("turnwal: session \"s\" already exists"),
        "{}",
        out.stderr
    );
}

/// Session `s` holding one complete turn (seqs 0-5) and then turn 2 left
/// open by an `append` that exited normally (seqs 6-7); returns the log's
/// bytes.
fn session_with_open_turn(store: &Path) -> Vec<u8> {
    session_with_turns(store, "s", 1);
    let open = &turn(2, 6, T0 + 1000)[..2];
    let out = run(store, &["append", "s"], &lines(open));
    assert_eq!((out.status, out.stdout.as_str()), (0, "ack 6\nack 7\n"));
    fs::read(log_path(store, "s")).unwrap()
}

#[test]
fn a_rejected_append_after_an_open_turn_leaves_the_log_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let before = session_with_open_turn(dir.path());
    // A wrong seq: after the closer (seq 8) the next is 9.
    let msg = ev("user/message", 12, T0 + 2000, r#"{"id":"late"}"#);
    let out = run(dir.path(), &["append", "s"], &lines(&[msg]));
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (
            3,
            "",
            "turnwal: line 1: seq mismatch: the session's next seq is 9, but the line has seq 12; \
             nothing was written (turn 2 an earlier writer left open stays open: no closers \
             were appended)\n"
        )
    );
    assert_eq!(fs::read(log_path(dir.path(), "s")).unwrap(), before);
    // A contract violation: the repaired log has no turn open for a message.
    let msg = r#"{"type":"user/message","data":{"id":"late"}}"#;
    let out = run(dir.path(), &["append", "s"], &format!("{msg}\n"));
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (
            3,
            "",
            "turnwal: line 1: turn contract violation at seq 9 (user/message): rule enclosure: \
             no turn is open (strict policy); nothing was written (turn 2 an earlier writer \
             left open stays open: no closers were appended)\n"
        )
    );
    assert_eq!(fs::read(log_path(dir.path(), "s")).unwrap(), before);
    // A line that is not JSON at all.
    let out = run(dir.path(), &["append", "s"], "\nnot json\n");
    assert_eq!(out.status, 3);
    assert_eq!(
        out.stderr,
        "turnwal: line 2: invalid event: invalid event JSON: expected an object at byte 0; \
         nothing was written (turn 2 an earlier writer left open stays open: no closers were \
         appended)\n"
    );
    assert_eq!(fs::read(log_path(dir.path(), "s")).unwrap(), before);
}

/// Every file under `dir`, with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "lock") {
                // A WAL session's lock file holds the pid of the last writer
                // to take the lock, which `append` takes before it judges
                // its input: its presence counts, not its pid.
                files.push((path, Vec::new()));
            } else {
                let bytes = fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_rejected_append_after_an_open_turn_changes_no_byte_of_any_store_kind() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in [
        ("wal", dir.path().join("wal").display().to_string()),
        (
            "sqlite",
            dir.path().join("sqlite/s.sqlite").display().to_string(),
        ),
        (
            "jsonl",
            format!("jsonl:{}", dir.path().join("jsonl").display()),
        ),
    ] {
        fs::create_dir(dir.path().join(name)).unwrap();
        let store = Path::new(&store);
        let mut events = turn(1, 0, T0 + 100);
        events.extend_from_slice(&turn(2, 6, T0 + 1000)[..2]);
        let out = run(store, &["append", "s", "--create"], &lines(&events[..6]));
        assert_eq!(out.status, 0, "{name}: {}", out.stderr);
        let out = run(store, &["append", "s"], &lines(&events[6..]));
        assert_eq!(out.status, 0, "{name}: {}", out.stderr);
        let before = snapshot(&dir.path().join(name));
        let msg = r#"{"type":"user/message","data":{"id":"late"}}"#;
        let out = run(store, &["append", "s"], &format!("{msg}\n"));
        assert_eq!(
            (out.status, out.stdout.as_str(), out.stderr.as_str()),
            (
                3,
                "",
                "turnwal: line 1: turn contract violation at seq 9 (user/message): rule \
                 enclosure: no turn is open (strict policy); nothing was written (turn 2 an \
                 earlier writer left open stays open: no closers were appended)\n"
            ),
            "{name}"
        );
        assert!(snapshot(&dir.path().join(name)) == before, "{name}");
        let out = run(store, &["cat", "s", "--raw"], "");
        assert_eq!(out.stdout, lines(&events), "{name}");
    }
}

#[test]
fn an_accepted_append_after_an_open_turn_says_which_closers_it_stored() {
    let dir = tempfile::tempdir().unwrap();
    session_with_open_turn(dir.path());
    let next = turn(3, 9, T0 + 3000);
    let out = run(dir.path(), &["append", "s"], &lines(&next));
    let closer = ev(
        "turn/end",
        8,
        T0 + 1001,
        r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
    );
    assert_eq!(
        (out.status, out.stdout, out.stderr),
        (
            0,
            acks(9..15),
            format!(
                "turnwal: session \"s\": turn 2 was left open by an earlier writer; closed it \
                 as interrupted before appending (append --continue would continue it): 1 \
                 synthetic closer at seq 8: {closer}\n"
            )
        )
    );
    let mut expected = turn(1, 0, T0 + 100);
    expected.extend_from_slice(&turn(2, 6, T0 + 1000)[..2]);
    expected.push(closer);
    expected.extend(next);
    let out = run(dir.path(), &["cat", "s", "--raw"], "");
    assert_eq!((out.status, out.stdout), (0, lines(&expected)));
}

#[test]
fn append_continue_appends_into_the_open_turn_without_closers() {
    let dir = tempfile::tempdir().unwrap();
    session_with_open_turn(dir.path());
    let rest = &turn(2, 6, T0 + 1000)[2..];
    let out = run(dir.path(), &["append", "s", "--continue"], &lines(rest));
    assert_eq!(
        (out.status, out.stdout, out.stderr.as_str()),
        (0, acks(8..12), "")
    );
    let mut expected = turn(1, 0, T0 + 100);
    expected.extend(turn(2, 6, T0 + 1000));
    let out = run(dir.path(), &["cat", "s", "--raw"], "");
    assert_eq!((out.status, out.stdout), (0, lines(&expected)));
    let out = run(dir.path(), &["append", "s", "--continue", "--create"], "");
    assert_eq!(out.status, 64);
}

// ------------------------------------------------------- reading a crash

/// A session whose writer stopped inside a step: seqs 0-8 stored.
fn crashed_session(store: &Path) -> Vec<String> {
    let events = crashed_events();
    let out = run(
        store,
        &["append", "s", "--create", "--cwd", "/w"],
        &lines(&events),
    );
    assert_eq!((out.status, out.stdout), (0, acks(0..9)));
    events
}

fn crashed_events() -> Vec<String> {
    let mut events = turn(1, 0, T0);
    events.push(ev("turn/start", 6, T0 + 10, r#"{"turn":2}"#));
    events.push(ev("step/start", 7, T0 + 11, r#"{"turn":2,"step":1}"#));
    events.push(ev(
        "assistant/chunk",
        8,
        T0 + 12,
        r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"wor"}}"#,
    ));
    events
}

fn closers() -> Vec<String> {
    vec![
        ev("step/end", 9, T0 + 12, r#"{"turn":2,"step":1}"#),
        ev(
            "turn/end",
            10,
            T0 + 12,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
        ),
    ]
}

#[test]
fn cat_of_a_crashed_session_shows_closers_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = crashed_session(dir.path());
    let before = fs::read(log_path(dir.path(), "s")).unwrap();
    events.extend(closers());
    assert_eq!(cat(dir.path(), "s"), lines(&events));
    let out = run(dir.path(), &["cat", "s", "--from", "8"], "");
    assert_eq!(out.stdout, lines(&events[8..]));
    assert_eq!(fs::read(log_path(dir.path(), "s")).unwrap(), before);
}

#[test]
fn a_read_on_a_store_that_does_not_exist_exits_4_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-store");
    let jsonl = format!("jsonl:{}", dir.path().join("no-such-root").display());
    let commands: [&[&str]; 6] = [
        &["ls"],
        &["cat", "s"],
        &["tail", "s"],
        &["verify"],
        &["stats", "s"],
        &["rm", "s"],
    ];
    for (store, shown) in [
        (missing.to_str().unwrap(), missing.display().to_string()),
        (
            jsonl.as_str(),
            dir.path().join("no-such-root").display().to_string(),
        ),
    ] {
        for args in commands {
            let out = command(&["--store", store]).args(args).output().unwrap();
            assert_eq!(
                (
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout).as_ref(),
                    String::from_utf8_lossy(&out.stderr).as_ref()
                ),
                (
                    Some(4),
                    "",
                    format!(
                        "turnwal: no store at {shown}: the path does not exist (the store is \
                         named by --store, else $TURNWAL_STORE, else ./.turnwal)\n"
                    )
                    .as_str()
                ),
                "{store} {args:?}"
            );
        }
    }
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn tail_prints_the_last_stored_events() {
    let dir = tempfile::tempdir().unwrap();
    let events = crashed_session(dir.path());
    let out = run(dir.path(), &["tail", "s", "-n", "2"], "");
    assert_eq!((out.status, out.stdout), (0, lines(&events[7..])));
    let out = run(dir.path(), &["tail", "s"], "");
    assert_eq!(out.stdout, lines(&events), "10 by default; 9 are stored");
    let out = run(dir.path(), &["tail", "s", "-n", "0"], "");
    assert_eq!((out.status, out.stdout.as_str()), (0, ""));
}

#[test]
fn tail_follow_prints_events_another_process_appends() {
    let dir = tempfile::tempdir().unwrap();
    let first = session_with_turns(dir.path(), "s", 1);
    let mut tail = turnwal(dir.path())
        .args(["tail", "s", "-n", "1", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = BufReader::new(tail.stdout.take().unwrap()).lines();
    assert_eq!(seen.next().unwrap().unwrap(), first[5]);
    let next = turn(2, 6, T0 + 1000);
    let out = run(dir.path(), &["append", "s"], &lines(&next));
    assert_eq!(out.status, 0);
    for event in &next {
        assert_eq!(&seen.next().unwrap().unwrap(), event);
    }
    tail.kill().unwrap();
    tail.wait().unwrap();
}

/// The `createdAt` of a WAL session's header, read from its log file.
fn created_at(store: &Path, id: &str) -> u64 {
    let bytes = fs::read(log_path(store, id)).unwrap();
    let at = find(&bytes, b"\"createdAt\":") + 12;
    let digits: String = bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    digits.parse().unwrap()
}

/// `tail s -n 1 --follow` on `store`, once it has printed `first`.
fn follow(
    store: &Path,
    first: &str,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut tail = turnwal(store)
        .args(["tail", "s", "-n", "1", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = BufReader::new(tail.stdout.take().unwrap()).lines();
    assert_eq!(seen.next().unwrap().unwrap(), first);
    (tail, seen)
}

/// What a `tail --follow` that stopped by itself printed after its first
/// line, its stderr and exit status.
fn stopped(
    mut tail: Child,
    seen: std::io::Lines<BufReader<std::process::ChildStdout>>,
) -> (Vec<String>, String, i32) {
    let rest: Vec<String> = seen.map(|l| l.unwrap()).collect();
    let mut stderr = String::new();
    tail.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = tail.wait().unwrap().code().unwrap();
    (rest, stderr, status)
}

#[test]
fn tail_follow_stops_at_a_recreated_session_instead_of_splicing_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = session_with_turns(dir.path(), "s", 1);
    let old = created_at(dir.path(), "s");
    let (tail, seen) = follow(dir.path(), &first[5]);
    // The new incarnation (two turns: seqs 6-11 would continue the old
    // one's) is built elsewhere and swapped in between two polls.
    let other = tempfile::tempdir().unwrap();
    thread::sleep(Duration::from_millis(5));
    session_with_turns(other.path(), "s", 2);
    let new = created_at(other.path(), "s");
    assert_ne!(old, new);
    fs::rename(log_path(other.path(), "s"), log_path(dir.path(), "s")).unwrap();
    assert_eq!(
        stopped(tail, seen),
        (
            vec![],
            format!(
                "turnwal: session \"s\" was removed and recreated while following (header \
                 createdAt {old}, now {new}); stopped after seq 5, printing nothing of the new \
                 session\n"
            ),
            4
        )
    );
}

/// Copies session `s` of `from` into a new WAL store (same header, same
/// events) and returns it.
fn copy_of_s(from: &Path) -> tempfile::TempDir {
    let other = tempfile::tempdir().unwrap();
    let to = other.path().join("store");
    let out = run_cmd(
        &mut command(&[
            "convert",
            "--from",
            from.to_str().unwrap(),
            "--to",
            to.to_str().unwrap(),
        ]),
        "",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    other
}

#[test]
fn tail_follow_stops_at_a_recreated_session_with_the_same_header() {
    // A new incarnation with the old one's header (a copy), but shorter.
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let short = copy_of_s(dir.path());
    let second = turn(2, 6, T0 + 1000);
    assert_eq!(run(dir.path(), &["append", "s"], &lines(&second)).status, 0);
    let (tail, seen) = follow(dir.path(), &second[5]);
    let copy = short.path().join("store");
    fs::rename(log_path(&copy, "s"), log_path(dir.path(), "s")).unwrap();
    assert_eq!(
        stopped(tail, seen),
        (
            vec![],
            "turnwal: session \"s\" was removed and recreated while following (it holds \
             fewer events than the 12 read); stopped after seq 11, printing nothing of the new \
             session\n"
                .to_owned(),
            4
        )
    );

    // As long, but another event at the last seq read.
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let other = copy_of_s(dir.path());
    let copy = other.path().join("store");
    let theirs: Vec<String> = turn(2, 6, T0 + 2000)
        .into_iter()
        .chain(turn(3, 12, T0 + 3000))
        .collect();
    assert_eq!(run(&copy, &["append", "s"], &lines(&theirs)).status, 0);
    assert_eq!(run(dir.path(), &["append", "s"], &lines(&second)).status, 0);
    let (tail, seen) = follow(dir.path(), &second[5]);
    fs::rename(log_path(&copy, "s"), log_path(dir.path(), "s")).unwrap();
    assert_eq!(
        stopped(tail, seen),
        (
            vec![],
            "turnwal: session \"s\" was removed and recreated while following (its event at \
             seq 11 is not the one read); stopped after seq 11, printing nothing of the new \
             session\n"
                .to_owned(),
            4
        )
    );
}

#[test]
fn tail_follow_stops_when_the_session_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let first = session_with_turns(dir.path(), "s", 1);
    let (tail, seen) = follow(dir.path(), &first[5]);
    let out = run(dir.path(), &["rm", "s"], "");
    assert_eq!(out.status, 0);
    assert_eq!(
        stopped(tail, seen),
        (
            vec![],
            "turnwal: session \"s\" was removed while following; stopped after seq 5\n".to_owned(),
            4
        )
    );
}

#[test]
fn tail_follow_from_a_seq_with_json_shows_the_cursor_and_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let first = session_with_turns(dir.path(), "s", 1);
    // From seq 3 (the rest of the first turn), then what is appended.
    let mut tail = turnwal(dir.path())
        .args(["tail", "s", "--follow", "--from", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = BufReader::new(tail.stdout.take().unwrap()).lines();
    let line =
        |seq: u64, event: &str| format!(r#"{{"session":"s","next":{},"event":{event}}}"#, seq + 1);
    for (seq, event) in first.iter().enumerate().skip(3) {
        assert_eq!(seen.next().unwrap().unwrap(), line(seq as u64, event));
    }
    let next = turn(2, 6, T0 + 1000);
    assert_eq!(run(dir.path(), &["append", "s"], &lines(&next)).status, 0);
    for (i, event) in next.iter().enumerate() {
        assert_eq!(seen.next().unwrap().unwrap(), line(6 + i as u64, event));
    }
    // Removed: the last line says where it stopped, as the resume cursor.
    assert_eq!(run(dir.path(), &["rm", "s"], "").status, 0);
    let stop = "session \"s\" was removed while following; stopped after seq 11";
    assert_eq!(
        stopped(tail, seen),
        (
            vec![format!(
                r#"{{"session":"s","next":12,"stopped":{}}}"#,
                serde_json::to_string(stop).unwrap()
            )],
            format!("turnwal: {stop}\n"),
            4
        )
    );
}

#[test]
fn tail_from_a_seq_past_the_end_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let out = run(dir.path(), &["tail", "s", "--from", "4"], "");
    let first = cat(dir.path(), "s");
    let want: Vec<&str> = first.lines().skip(4).collect();
    assert_eq!(
        (out.status, out.stdout),
        (0, format!("{}\n", want.join("\n")))
    );
    // Following from seq 8 of a 6-event log: nothing until seq 8 is stored.
    let mut tail = turnwal(dir.path())
        .args(["tail", "s", "--follow", "--from", "8"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = BufReader::new(tail.stdout.take().unwrap()).lines();
    let next = turn(2, 6, T0 + 1000);
    assert_eq!(run(dir.path(), &["append", "s"], &lines(&next)).status, 0);
    for event in &next[2..] {
        assert_eq!(&seen.next().unwrap().unwrap(), event);
    }
    tail.kill().unwrap();
    tail.wait().unwrap();
    // -n and --from do not go together.
    let out = run(dir.path(), &["tail", "s", "-n", "2", "--from", "1"], "");
    assert_eq!(out.status, 64, "{}", out.stderr);
}

// ------------------------------------------------------ verify, recover

fn verify_json(store: &Path, id: &str) -> (i32, Value) {
    let out = run(store, &["verify", id, "--json"], "");
    (out.status, serde_json::from_str(&out.stdout).unwrap())
}

#[test]
fn verify_exit_codes_clean_recoverable_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    // Two appends, so the second batch's records prove the first durable.
    session_with_turns(store, "corrupt", 1);
    let out = run(store, &["append", "corrupt"], &lines(&turn(2, 6, T0 + 500)));
    assert_eq!(out.status, 0);
    session_with_turns(store, "clean", 2);
    session_with_turns(store, "torn", 1);

    let len = fs::metadata(log_path(store, "clean")).unwrap().len();
    let out = run(store, &["verify", "clean"], "");
    assert_eq!(
        (out.status, out.stdout),
        (
            0,
            format!("clean: clean, 12 events, 2 turns, {len} bytes\n")
        )
    );

    let path = log_path(store, "torn");
    let torn_at = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"garbage!")
        .unwrap();
    let (status, json) = verify_json(store, "torn");
    assert_eq!(status, 1);
    let expected = format!(
        r#"{{"id":"torn","state":"torn","events":6,"turns":1,"bytes":{},"cut":{{"offset":{torn_at},"seq":6,"len":8,"reason":"incomplete-record","detail":"8 bytes left, too few for a record"}},"closers":0,"problem":null}}"#,
        torn_at + 8
    );
    assert_eq!(json, serde_json::from_str::<Value>(&expected).unwrap());

    // Flip a byte inside seq 1's payload: its checksum fails, and the
    // second append's records carry a watermark past it.
    let path = log_path(store, "corrupt");
    let mut bytes = fs::read(&path).unwrap();
    let at = find(&bytes, b"hello 1");
    bytes[at] = b'j';
    fs::write(&path, &bytes).unwrap();
    let (status, json) = verify_json(store, "corrupt");
    assert_eq!(
        (status, &json["state"], &json["cut"]),
        (2, &Value::from("corrupt"), &Value::Null)
    );
    let problem = json["problem"].as_str().unwrap();
    assert!(problem.contains("corrupt at byte"), "{problem}");
    assert!(
        problem.contains("(seq 1): record checksum mismatch"),
        "{problem}"
    );

    // Every session at once: one line each, sorted, the worst status wins,
    // then a summary.
    let out = run(store, &["verify"], "");
    assert_eq!(out.status, 2);
    let ids: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(ids, ["clean", "corrupt", "torn", "3 sessions"]);
    assert_eq!(
        out.stdout.lines().last(),
        Some("3 sessions: 1 clean, 0 open-turn, 1 torn, 1 corrupt")
    );
    assert_eq!(out.stderr, "", "no progress output when stderr is piped");
    // Only the problems, still summed up; as JSON, the summary last.
    let out = run(store, &["verify", "--problems-only"], "");
    let ids: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        (out.status, ids),
        (2, vec!["corrupt", "torn", "3 sessions"])
    );
    let out = run(store, &["verify", "--json", "--problems-only"], "");
    let last: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        last,
        serde_json::json!({"summary": {"sessions": 3, "clean": 1, "openTurn": 0, "torn": 1,
                                        "corrupt": 1, "unreadable": 0}})
    );
    assert_eq!(out.stdout.lines().count(), 3);
    // A command that meets the corruption exits 2 as well.
    let out = run(store, &["cat", "corrupt"], "");
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("(seq 1): record checksum mismatch"),
        "{}",
        out.stderr
    );
    fs::remove_file(&path).unwrap();
    assert_eq!(run(store, &["verify"], "").status, 1);
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle in file")
}

#[test]
fn recover_dry_run_changes_nothing_then_recover_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    crashed_session(store);
    let path = log_path(store, "s");
    let before = fs::read(&path).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0; 40])
        .unwrap();
    let torn = fs::read(&path).unwrap();
    assert_eq!(run(store, &["verify", "s"], "").status, 1);

    let report = |written: &str| {
        format!(
            "session s: torn before recovery\n\
             kept: 9 stored events\n\
             cut: 40 bytes at byte {} (seq 9): zero-fill: 40 bytes left, too few for a record\n\
             closers: 2\n{}written: {written}\n",
            before.len(),
            lines(&closers())
        )
    };
    let out = run(store, &["recover", "s", "--dry-run"], "");
    assert_eq!(
        (out.status, out.stdout, out.stderr),
        (0, report("no (dry run)"), String::new())
    );
    assert_eq!(fs::read(&path).unwrap(), torn);

    let out = run(store, &["recover", "s"], "");
    // The cut bytes were kept, and the report says where.
    let quarantine = fs::read_dir(store.join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect::<Vec<_>>();
    assert_eq!(quarantine.len(), 1);
    let name = quarantine[0].file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with(&format!("s.at-{}.seq-9.", before.len())) && name.ends_with(".twal-cut"),
        "{name}"
    );
    assert_eq!(fs::read(&quarantine[0]).unwrap(), torn[before.len()..]);
    assert_eq!(
        (out.status, out.stdout),
        (
            0,
            format!("{}quarantine: {}\n", report("yes"), quarantine[0].display())
        )
    );
    assert_eq!(run(store, &["verify", "s"], "").status, 0);
    let mut events = crashed_events();
    events.extend(closers());
    assert_eq!(cat(store, "s"), lines(&events));

    let out = run(store, &["recover", "s"], "");
    assert_eq!(
        out.stdout,
        "session s: clean before recovery\nkept: 11 stored events\ncut: nothing\nclosers: 0\n\
         written: no (nothing to repair)\n"
    );
}

// ------------------------------------------------------ ls, stats, fork

/// `ms` as `date -u` prints it to the minute: what `ls` shows under TZ=UTC.
fn utc_minute(ms: u64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%d %H:%M"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `ls` says `clean` only of a log it checked whole; a log judged from its
/// end alone is `clean-end`, and damage further back is `verify`'s to find.
/// A corrupt session is listed with its size and, when the file header
/// still reads, its creation time and cwd (issue 26, low).
#[test]
fn ls_says_clean_only_after_a_whole_check_and_lists_corrupt_sessions_with_size_and_header() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    session_with_turns(store, "a", 1);
    let out = run(store, &["append", "a"], &lines(&turn(2, 6, T0 + 500)));
    assert_eq!(out.status, 0);
    // A bit flipped inside turn 1: the end is clean, the log is not.
    let path = log_path(store, "a");
    let mut bytes = fs::read(&path).unwrap();
    let at = find(&bytes, b"hello 1");
    bytes[at] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let row = |out: &str| -> Value { serde_json::from_str(out.trim()).unwrap() };
    let listed = row(&run(store, &["ls", "--json"], "").stdout);
    assert_eq!(
        (listed["state"].as_str(), listed["checked"].as_str()),
        (Some("clean-end"), Some("tail"))
    );
    assert_eq!(run(store, &["verify", "a"], "").status, 2);
    // A corrupt log the listing reads whole: its size and header shown.
    session_with_turns(store, "b", 1);
    let path = log_path(store, "b");
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0xff; // the last record's trailer: the tail cannot vouch
    fs::write(&path, &bytes).unwrap();
    let out = run(store, &["ls", "--json", "--state", "corrupt"], "");
    let listed = row(&out.stdout);
    assert_eq!(listed["id"], "b");
    assert_eq!(listed["bytes"], n as u64);
    assert_eq!(listed["cwd"], "/w");
    assert!(listed["createdAt"].is_u64(), "{listed}");
    assert_eq!(listed["checked"], "full");
}

#[test]
fn ls_lists_sessions_as_a_table_and_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    session_with_turns(store, "beta", 2);
    crashed_session(store);
    let (beta, s) = (
        fs::metadata(log_path(store, "beta")).unwrap().len(),
        fs::metadata(log_path(store, "s")).unwrap().len(),
    );
    let out = run(store, &["ls", "--json"], "");
    assert_eq!(out.status, 0);
    let mut lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let created: Vec<u64> = lines
        .iter_mut()
        .map(|l| l["createdAt"].take().as_u64().unwrap())
        .collect();
    let line = |id: &str, events: u64, bytes: u64, last: i64, state: &str, title: &str| {
        serde_json::json!({
            "id": id, "events": events, "turns": 2, "bytes": bytes, "lastActivity": last,
            "state": state, "checked": "tail", "problem": null, "createdAt": null,
            "cwd": "/w", "parentSession": null, "seedLength": null, "origin": null,
            "delegationDepth": null, "agentPreset": null, "title": title
        })
    };
    assert_eq!(
        lines,
        [
            // Judged from its end alone: `clean-end`, not `clean` (issue 26).
            line("beta", 12, beta, T0 + 205, "clean-end", "hello 1"),
            line("s", 9, s, T0 + 12, "open-turn", "hello 1"),
        ]
    );
    let out = run_cmd(
        crate::support::native(BIN).env("TZ", "UTC").args([
            "--store",
            store.to_str().unwrap(),
            "ls",
        ]),
        "",
    );
    let size = |n: u64| match n {
        0..1024 => format!("{n} B"),
        _ => format!("{:.1} KiB", n as f64 / 1024.0),
    };
    assert_eq!(
        out.stdout,
        format!(
            "ID    STATE      EVENTS  TURNS     SIZE  LAST ACTIVITY     CREATED           CWD  TITLE    CHECKED\n\
             beta  clean-end      12      2  {:>7}  2023-11-14 22:13  {}  /w   hello 1  tail\n\
             s     open-turn       9      2  {:>7}  2023-11-14 22:13  {}  /w   hello 1  tail\n",
            size(beta),
            utc_minute(created[0]),
            size(s),
            utc_minute(created[1]),
        )
    );
    // Filters, sorting and a limit.
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["ls", "--json"];
        all.extend_from_slice(args);
        run(store, &all, "")
            .stdout
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(ids(&["--state", "open-turn"]), ["s"]);
    assert_eq!(
        ids(&["--state", "clean-end", "--state", "open-turn"]),
        ["beta", "s"]
    );
    // `clean` means the whole log was checked: none was here.
    assert_eq!(ids(&["--state", "clean"]), Vec::<String>::new());
    assert_eq!(ids(&["--sort", "activity"]), ["beta", "s"]);
    assert_eq!(ids(&["--sort", "events", "--limit", "1"]), ["beta"]);
    assert_eq!(
        ids(&["--sort", "size"]),
        if beta >= s {
            ["beta", "s"]
        } else {
            ["s", "beta"]
        }
    );
    assert_eq!(ids(&["--cwd", "/w"]), ["beta", "s"]);
    assert_eq!(ids(&["--cwd", "/w/sub"]), Vec::<String>::new());
    assert_eq!(ids(&["--cwd", "/"]), ["beta", "s"]);
    assert_eq!(ids(&["--since", "2023-11-14T22:13:20.100Z"]), ["beta"]);
    assert_eq!(ids(&["--since", "1d"]), Vec::<String>::new());
    let out = run(store, &["ls", "--state", "fine"], "");
    assert_eq!(out.status, 64);
}

#[test]
fn head_prints_the_stored_header() {
    let dir = tempfile::tempdir().unwrap();
    crashed_session(dir.path());
    let out = run(dir.path(), &["head", "s", "--json"], "");
    assert_eq!(out.status, 0);
    let header: Value = serde_json::from_str(&out.stdout).unwrap();
    let created = header["createdAt"].as_u64().unwrap();
    assert_eq!(
        header,
        serde_json::json!({"version": 0, "id": "s", "createdAt": created, "cwd": "/w"})
    );
    let out = run_cmd(
        crate::support::native(BIN).env("TZ", "UTC").args([
            "--store",
            dir.path().to_str().unwrap(),
            "head",
            "s",
        ]),
        "",
    );
    let iso = {
        let out = Command::new("date")
            .args([
                "-u",
                "-d",
                &format!("@{}", created / 1000),
                "+%Y-%m-%dT%H:%M:%S",
            ])
            .output()
            .unwrap();
        format!(
            "{}.{:03}Z",
            String::from_utf8(out.stdout).unwrap().trim(),
            created % 1000
        )
    };
    assert_eq!(
        out.stdout,
        format!(
            "id                s\nversion           0\ncreated           {iso} ({})\ncwd               /w\n\
             parent            -\nseed length       -\norigin            -\ndelegation depth  -\n\
             agent preset      -\n",
            utc_minute(created)
        )
    );
    let out = run(dir.path(), &["head", "nope"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (4, "turnwal: session \"nope\" not found\n")
    );
}

#[test]
fn ls_of_an_empty_store_and_the_store_environment_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["ls", "--json"], "");
    assert_eq!((out.status, out.stdout.as_str()), (0, ""));
    session_with_turns(dir.path(), "e", 1);
    let out = run_cmd(
        crate::support::native(BIN)
            .env("TURNWAL_STORE", dir.path())
            .args(["verify"]),
        "",
    );
    assert_eq!(out.status, 0);
    assert!(
        out.stdout.starts_with("e: clean, 6 events, 1 turn, "),
        "{}",
        out.stdout
    );
}

#[test]
fn stats_counts_event_types() {
    let dir = tempfile::tempdir().unwrap();
    crashed_session(dir.path());
    let len = fs::metadata(log_path(dir.path(), "s")).unwrap().len();
    let out = run(dir.path(), &["stats", "s", "--json"], "");
    let mut stats: Value = serde_json::from_str(&out.stdout).unwrap();
    let created = stats["createdAt"].take();
    assert!(created.as_u64().is_some(), "{created}");
    assert_eq!(
        stats,
        serde_json::json!({
            "id": "s", "state": "open-turn", "events": 9, "turns": 2, "bytes": len,
            "closers": 2, "firstTime": T0, "lastTime": T0 + 12,
            "types": {"assistant/chunk": 2, "step/end": 1, "step/start": 2, "turn/end": 1,
                      "turn/start": 2, "user/message": 1},
            "createdAt": null, "cwd": "/w", "parentSession": null, "durationMs": 12,
            "interruptedTurns": 0, "outcomes": {"completed": 1},
            "tokens": {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0,
                       "cacheWriteTokens": 0, "reasoningTokens": 0},
            "models": {}, "tools": {}
        })
    );
}

/// A session with a model's tool calls, one of which fails, then a turn
/// left open.
fn tool_session(store: &Path, id: &str) {
    let t = |n: i64| T0 + n;
    let events = [
        ev("turn/start", 0, t(0), r#"{"turn":1}"#),
        ev(
            "user/message",
            1,
            t(1),
            r#"{"id":"u1","role":"user","content":[{"type":"text","text":"look at a.txt"}],"source":{"kind":"user"}}"#,
        ),
        ev("step/start", 2, t(2), r#"{"turn":1,"step":1}"#),
        ev(
            "assistant/message",
            3,
            t(3),
            r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"},{"type":"tool-call","id":"c2","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"ds","model":"v4"}},"usage":{"inputTokens":1200,"outputTokens":40,"cacheReadTokens":300}}"#,
        ),
        ev(
            "tool/call",
            4,
            t(4),
            r#"{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}"#,
        ),
        ev(
            "tool/call",
            5,
            t(5),
            r#"{"turn":1,"step":1,"callId":"c2","name":"bash","arguments":"{}"}"#,
        ),
        ev(
            "tool/result",
            6,
            t(6),
            r#"{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":false,"content":[{"type":"text","text":"hello"}]}]}}"#,
        ),
        ev(
            "tool/result",
            7,
            t(7),
            r#"{"turn":1,"step":1,"message":{"id":"r2","role":"user","source":{"kind":"tool","callId":"c2"},"content":[{"type":"tool-result","toolCallId":"c2","isError":true,"content":[{"type":"text","text":"exit 1"}]}]}}"#,
        ),
        ev("step/end", 8, t(8), r#"{"turn":1,"step":1}"#),
        ev(
            "turn/end",
            9,
            t(1500),
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
        ev("turn/start", 10, t(2000), r#"{"turn":2}"#),
        ev("step/start", 11, t(2001), r#"{"turn":2,"step":1}"#),
    ];
    let out = run(
        store,
        &["append", id, "--create", "--cwd", "/w", "-q"],
        &lines(&events),
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
}

#[test]
fn stats_reads_tokens_models_tools_and_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    tool_session(dir.path(), "tools");
    let len = fs::metadata(log_path(dir.path(), "tools")).unwrap().len();
    let out = run(dir.path(), &["stats", "tools"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with("created"))
        .collect();
    assert_eq!(
        text.join("\n"),
        format!(
            "session      tools\n\
             state        open-turn\n\
             cwd          /w\n\
             parent       -\n\
             events       12\n\
             turns        2\n\
             outcomes     completed 1\n\
             interrupted  0 (and the open turn, on resume)\n\
             bytes        {len}\n\
             closers      2\n\
             first time   2023-11-14T22:13:20.000Z\n\
             last time    2023-11-14T22:13:22.001Z\n\
             duration     2.0 s\n\
             tokens       1200 in, 40 out (cache read 300, cache write 0, reasoning 0)\n\
             models       ds/v4 1\n\
             tool calls   2 (1 failed)\n\
             tools        bash 1 (1 failed), read 1\n\
             types\n\
             \x20 assistant/message  1\n\
             \x20 step/end           1\n\
             \x20 step/start         2\n\
             \x20 tool/call          2\n\
             \x20 tool/result        2\n\
             \x20 turn/end           1\n\
             \x20 turn/start         2\n\
             \x20 user/message       1"
        )
    );

    // Store-wide: a line per session in natural order, then the total.
    crashed_session(dir.path());
    let out = run(dir.path(), &["stats"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let s_len = fs::metadata(log_path(dir.path(), "s")).unwrap().len();
    assert_eq!(
        out.stdout,
        format!(
            "SESSION             STATE      EVENTS  TURNS  INTERRUPTED  TOKENS IN  TOKENS OUT  TOOL CALLS  FAILED\n\
             s                   open-turn       9      2            0          0           0           0       0\n\
             tools               open-turn      12      2            0       1200          40           2       1\n\
             total (2 sessions)                 21      4            0       1200          40           2       1\n\
             bytes       {}\n\
             models      ds/v4 1\n\
             tools       bash 1 (1 failed), read 1\n",
            len + s_len
        )
    );
    let out = run(dir.path(), &["stats", "--json"], "");
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        (lines[0]["id"].as_str(), lines[1]["id"].as_str()),
        (Some("s"), Some("tools"))
    );
    let total = &lines[2]["total"];
    assert_eq!(
        (
            total["sessions"].as_u64(),
            total["events"].as_u64(),
            total["bytes"].as_u64(),
            total["tokens"]["inputTokens"].as_u64(),
            total["tools"]["bash"]["failures"].as_u64(),
        ),
        (Some(2), Some(21), Some(len + s_len), Some(1200), Some(1))
    );
}

#[test]
fn ls_orders_ids_as_a_person_counts() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["sess-10", "sess-2", "sess-1", "a"] {
        session_with_turns(dir.path(), id, 1);
    }
    let out = run(dir.path(), &["ls", "--json"], "");
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
    assert_eq!(ids, ["a", "sess-1", "sess-2", "sess-10"]);
}

#[test]
fn fork_copies_history_and_refuses_an_open_turn() {
    let dir = tempfile::tempdir().unwrap();
    let events = crashed_session(dir.path());
    let out = run(dir.path(), &["fork", "s", "child", "--at", "7"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            4,
            "turnwal: session \"s\": fork boundary seq 7 is inside turn 2, started at seq 6; a fork ends at a seq after which no turn is open (a turn's closing turn/end): the nearest are 5 and 10 (2 in all)\n"
        )
    );
    let out = run(dir.path(), &["fork", "s", "child", "--at", "5"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let header: Value = serde_json::from_str(&out.stdout).unwrap();
    let created = header["createdAt"].as_u64().unwrap();
    assert_eq!(
        out.stdout,
        format!(
            "{{\"version\":0,\"id\":\"child\",\"createdAt\":{created},\"cwd\":\"/w\",\
             \"parentSession\":\"s\",\"seedLength\":6}}\n"
        )
    );
    let copied = cat(dir.path(), "child");
    let copied: Vec<&str> = copied.lines().collect();
    assert_eq!(copied[..6], events[..6]);
    assert_eq!(copied.len(), 7);
    assert!(copied[6].starts_with(r#"{"type":"session/end-seed","seq":6,"#));
}

// ------------------------------------------------ errors, usage, pipes

#[test]
fn usage_errors_exit_64_and_help_documents_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [&[&str]; 6] = [
        &["bogus"],
        &["append"],
        &["append", "s", "--sync", "sometimes"],
        &["append", "s", "--cwd", "/w"],
        &["tail", "s", "-n", "x"],
        &[],
    ];
    for args in cases {
        let out = run(dir.path(), args, "");
        assert_eq!(out.status, 64, "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
    }
    let out = run(
        dir.path(),
        &["append", "s", "--create", "--cwd", "relative"],
        "",
    );
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            64,
            "turnwal: invalid session header: session metadata cwd must be an absolute path, got \"relative\"\n"
        )
    );
    let out = run(dir.path(), &["--help"], "");
    assert_eq!(out.status, 0);
    for line in [
        "  0   success",
        "  1   verify found only a recoverable tail",
        "  2   corrupt data",
        "  3   append rejected an input line",
        "  4   any other error",
        "  64  usage error",
    ] {
        assert!(out.stdout.contains(line), "--help lacks {line:?}");
    }
}

#[test]
fn other_errors_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["cat", "nope"], "");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (4, "", "turnwal: session \"nope\" not found\n")
    );
    let file = dir.path().join("notes.txt");
    fs::write(&file, b"hello").unwrap();
    let out = run_cmd(&mut command(&["--store", file.to_str().unwrap(), "ls"]), "");
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: {}: not a directory or an SQLite database, so not a store; \
                 supported: a directory (native WAL store), a .sqlite or .db file (SQLite \
                 store), jsonl:ROOT (the upstream harness's JSONL root; jsonl+zstd:ROOT or \
                 jsonl+none:ROOT to name the encoding), postgres://… or postgresql://… (a \
                 PostgreSQL database)\n",
                file.display()
            )
        )
    );
    let out = run_cmd(&mut command(&["--store", "jsonl:", "ls"]), "");
    assert_eq!(out.status, 64, "{}", out.stderr);
}

#[test]
fn a_writer_holding_the_session_locks_out_a_second_one() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "s", 1);
    let mut w = Writer::start(dir.path(), &["append", "s", "--sync", "batch"]);
    w.send(&turn(2, 6, T0 + 1000)[..1]);
    w.expect_acks(6..7);
    let out = run(dir.path(), &["append", "s"], "");
    assert_eq!(out.status, 4);
    assert!(
        out.stderr.contains("is locked by another writer (pid "),
        "{}",
        out.stderr
    );
    // Readers take no lock.
    let out = run(dir.path(), &["tail", "s", "-n", "1"], "");
    assert_eq!(out.stdout, format!("{}\n", turn(2, 6, T0 + 1000)[0]));
    assert_eq!(w.finish().0, 0);
}

#[test]
fn broken_pipe_exits_0_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Enough output to overflow the pipe buffer after the reader is gone.
    let mut events = vec![ev("turn/start", 0, T0, r#"{"turn":1}"#)];
    let pad = "x".repeat(200);
    for seq in 1..2000 {
        events.push(ev(
            "user/message",
            seq,
            T0,
            &format!(r#"{{"id":"u{seq}","pad":"{pad}"}}"#),
        ));
    }
    let out = run(dir.path(), &["append", "s", "--create"], &lines(&events));
    assert_eq!(out.status, 0);
    let mut child = turnwal(dir.path())
        .args(["cat", "s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, format!("{}\n", events[0]));
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        (out.status.code(), out.stderr.as_slice()),
        (Some(0), &b""[..])
    );
}

// ------------------------------------------------------------------ demo

#[test]
fn demo_crashes_a_writer_and_recovers_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("demo");
    let out = run_cmd(
        &mut command(&["--store", store.to_str().unwrap(), "demo"]),
        "",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    for text in [
        "Killed the writer with SIGKILL in the middle of that turn",
        "refactor-parser: open-turn, 8 events, 1 turn, ",
        "session refactor-parser: open-turn before recovery",
        "\"code\":\"TOOL_OUTCOME_UNKNOWN\"",
        r#"{"type":"turn/end","seq":10,"#,
        r#""data":{"turn":1,"reason":{"kind":"interrupted"}}}"#,
        "written: yes",
        "refactor-parser: clean, 11 events, 1 turn, ",
    ] {
        assert!(
            out.stdout.contains(text),
            "demo output lacks {text:?}:\n{}",
            out.stdout
        );
    }
    let out = run(&store, &["verify"], "");
    // Four sessions, then the summary.
    assert_eq!((out.status, out.stdout.lines().count()), (0, 5));
    assert_eq!(
        out.stdout.lines().last(),
        Some("4 sessions: 4 clean, 0 open-turn, 0 torn, 0 corrupt")
    );
    // A store that is not empty is left alone.
    let again = run_cmd(
        &mut command(&["--store", store.to_str().unwrap(), "demo"]),
        "",
    );
    assert_eq!(again.status, 0);
    assert!(
        again
            .stdout
            .contains("is not empty, so the demo uses a new temporary directory")
    );
    let temp = again
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("store: "))
        .and_then(|l| l.split(" (").next())
        .unwrap();
    assert_ne!(Path::new(temp), store);
    fs::remove_dir_all(temp).unwrap();
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `compact` seals each session's closed turns, one line per session with
/// its bytes before and after; every event reads back as before.
#[test]
fn compact_seals_sessions_and_reports_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    session_with_turns(store, "a", 3);
    session_with_turns(store, "b", 2);
    let (cat_a, cat_b) = (cat(store, "a"), cat(store, "b"));
    let size = |id: &str| fs::metadata(log_path(store, id)).unwrap().len();
    let before_a = size("a");
    let out = run(store, &["compact", "a"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let after_a = size("a");
    assert!(after_a < before_a);
    assert_eq!(out.stdout, format!("a {before_a} -> {after_a} bytes\n"));
    assert_eq!(cat(store, "a"), cat_a);
    // --all: "a" has nothing left to seal.
    let before_b = size("b");
    let out = run(store, &["compact", "--all"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let after_b = size("b");
    assert_eq!(
        out.stdout,
        format!("a {after_a} -> {after_a} bytes\nb {before_b} -> {after_b} bytes\n")
    );
    assert_eq!(cat(store, "b"), cat_b);
    let out = run(store, &["verify"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Usage: a session or --all, not both, not neither.
    assert_eq!(run(store, &["compact"], "").status, 64);
    assert_eq!(run(store, &["compact", "a", "--all"], "").status, 64);
    let out = run(store, &["compact", "nope"], "");
    assert_eq!(out.status, 4, "{}", out.stderr);
}

/// `compact` only seals (issue 26, item 8): a session whose turn is open
/// (a pipeline streaming it with `append --continue`) keeps it open, its
/// closed turns sealed, and the pipeline goes on; a torn tail is refused,
/// naming `recover`, with not a byte written, while `--all` still
/// compacts the other sessions.
#[test]
fn compact_seals_and_leaves_an_open_turn_open_and_a_torn_tail_to_recover() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let mut events = session_with_turns(store, "s", 2);
    let open = vec![
        ev("turn/start", 12, T0 + 900, r#"{"turn":3}"#),
        ev("user/message", 13, T0 + 901, r#"{"id":"u3","text":"go"}"#),
    ];
    let out = run(store, &["append", "s", "--continue", "-q"], &lines(&open));
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    events.extend(open);
    let before = fs::metadata(log_path(store, "s")).unwrap().len();
    let out = run(store, &["compact", "s"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let after = fs::metadata(log_path(store, "s")).unwrap().len();
    assert!(after < before, "{before} -> {after}");
    assert_eq!(out.stdout, format!("s {before} -> {after} bytes\n"));
    // Stored as it was: 14 events, the turn still open (cat adds the
    // closers recovery would write; --raw shows the stored events alone).
    let raw = run(store, &["cat", "s", "--raw"], "");
    assert_eq!(raw.stdout, lines(&events));
    let out = run(store, &["verify", "s"], "");
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stdout.starts_with("s: open-turn, 14 events"),
        "{}",
        out.stdout
    );
    // The pipeline finishes its turn.
    let end = ev(
        "turn/end",
        14,
        T0 + 950,
        r#"{"turn":3,"reason":{"kind":"completed"}}"#,
    );
    let out = run(
        store,
        &["append", "s", "--continue"],
        &lines(std::slice::from_ref(&end)),
    );
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "ack 14\n", "")
    );
    events.push(end);
    assert_eq!(run(store, &["cat", "s"], "").stdout, lines(&events));

    // A torn tail: refused, naming recover, nothing written; --all still
    // compacts the other session and exits with the refusal's status.
    session_with_turns(store, "t", 2);
    let mut torn = fs::read(log_path(store, "s")).unwrap();
    torn.extend_from_slice(b"torn bytes of a batch never acknowledged");
    fs::write(log_path(store, "s"), &torn).unwrap();
    let proof = fs::read(dir.path().join("sessions/.s.durable")).unwrap();
    let t_before = fs::metadata(log_path(store, "t")).unwrap().len();
    let out = run(store, &["compact", "--all"], "");
    assert_eq!(out.status, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "session \"s\" needs recovery before it can be compacted: incomplete-record at byte"
        ) && out.stderr.contains("`turnwal recover` repairs it"),
        "{}",
        out.stderr
    );
    let t_after = fs::metadata(log_path(store, "t")).unwrap().len();
    assert_eq!(out.stdout, format!("t {t_before} -> {t_after} bytes\n"));
    assert_eq!(fs::read(log_path(store, "s")).unwrap(), torn);
    assert_eq!(
        fs::read(dir.path().join("sessions/.s.durable")).unwrap(),
        proof
    );
    let out = run(store, &["verify", "s"], "");
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stdout.starts_with("s: torn, 15 events"),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------- help

#[test]
fn short_store_flag_and_quiet_append() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    let events: Vec<String> = turn(1, 0, T0);
    let out = command(&["-s", store, "append", "s", "--create", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(lines(&events).as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        (Some(0), "", "")
    );
    // Everything was stored all the same.
    assert_eq!(cat(dir.path(), "s"), lines(&events));
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "_turnwal()"),
        ("zsh", "#compdef turnwal"),
        ("fish", "complete -c turnwal"),
    ] {
        let out = run(dir.path(), &["completions", shell], "");
        assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{shell}");
        assert!(out.stdout.contains(marker), "{shell}: {marker}");
        for word in ["append", "verify", "compact", "--store", "--follow"] {
            assert!(out.stdout.contains(word), "{shell} completes {word}");
        }
    }
    let out = run(dir.path(), &["completions", "tcsh"], "");
    assert_eq!(out.status, 64);

    let out = run(dir.path(), &["man"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let man = out.stdout;
    assert!(man.contains(".TH turnwal 1"), "{man}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(man.contains(section), "{section}");
    }
    // The exit statuses and the store forms are in the page, as in --help.
    assert!(man.contains("64  usage error"), "{man}");
    assert!(man.contains("jsonl:ROOT"), "{man}");
    // SQLite options make no sense for these commands.
    let out = run(dir.path(), &["--busy-timeout", "5", "man"], "");
    assert_eq!(out.status, 64);
}

#[test]
fn short_help_is_short() {
    let dir = tempfile::tempdir().unwrap();
    // `-h` of a subcommand names the store once, briefly, and leaves the
    // SQLite options to `--help`.
    let out = run(dir.path(), &["ls", "-h"], "");
    assert_eq!(out.status, 0);
    assert_eq!(out.stdout.matches("--store").count(), 1, "{}", out.stdout);
    assert!(!out.stdout.contains("--journal-mode"), "{}", out.stdout);
    assert!(out.stdout.lines().all(|l| l.len() <= 130), "{}", out.stdout);
    let out = run(dir.path(), &["ls", "--help"], "");
    assert!(
        out.stdout.contains("--journal-mode <MODE>"),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------- show

#[test]
fn show_prints_the_transcript_as_text_and_markdown() {
    let dir = tempfile::tempdir().unwrap();
    tool_session(dir.path(), "tools");
    let out = run(dir.path(), &["show", "tools"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let (first, rest) = out.stdout.split_once('\n').unwrap();
    assert!(
        first.starts_with("session tools · cwd /w · created "),
        "{first}"
    );
    assert!(first.ends_with(" · open-turn"), "{first}");
    // Not a terminal: no colour codes.
    assert_eq!(
        rest,
        "\nTurn 1 · 2023-11-14T22:13:20.000Z · completed · 1.5 s\n\
         \x20 user:\n\
         \x20   look at a.txt\n\
         \x20 assistant: (step 1, ds/v4, 1200 in / 40 out tokens)\n\
         \x20 → call read (c1) {}\n\
         \x20 → call bash (c2) {}\n\
         \x20 ← result read (c1)\n\
         \x20   hello\n\
         \x20 ✗ failed bash (c2)\n\
         \x20   exit 1\n\
         \n\
         Turn 2 · 2023-11-14T22:13:22.000Z · open (a crash); recovery closes it as interrupted\n\
         \x20 [recovery] step/end\n\
         \x20 [recovery] turn/end, interrupted\n"
    );
    let out = run(
        dir.path(),
        &["show", "tools", "--turn", "2", "--format", "markdown"],
        "",
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let body = out.stdout.split_once("- state: open-turn\n").unwrap().1;
    assert_eq!(
        body,
        "\n## Turn 2 · 2023-11-14T22:13:22.000Z · open (a crash); recovery closes it as interrupted\n\n\
         *[recovery] step/end*\n\n\
         *[recovery] turn/end, interrupted*\n\n"
    );
    assert!(
        out.stdout
            .starts_with("# Session `tools`\n\n- cwd: `/w`\n- created: ")
    );
    let out = run(dir.path(), &["show", "tools", "--turn", "7"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (4, "turnwal: session \"tools\" has no turn 7\n")
    );
}

#[test]
fn show_joins_the_streamed_chunks_of_a_step_no_message_completed() {
    let dir = tempfile::tempdir().unwrap();
    let chunk = |seq, text: &str| {
        ev(
            "assistant/chunk",
            seq,
            T0 + seq as i64,
            &format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
            ),
        )
    };
    let events = [
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        ev("step/start", 1, T0 + 1, r#"{"turn":1,"step":1}"#),
        chunk(2, "Hel"),
        chunk(3, "lo ```"),
        chunk(4, " <b>"),
        ev("step/end", 5, T0 + 5, r#"{"turn":1,"step":1}"#),
        ev(
            "turn/end",
            6,
            T0 + 6,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
    ];
    let out = run(
        dir.path(),
        &["append", "c", "--create", "-q"],
        &lines(&events),
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let out = run(dir.path(), &["show", "c", "--format", "markdown"], "");
    let body = out.stdout.split_once("- state: clean\n").unwrap().1;
    assert_eq!(
        body,
        "\n## Turn 1 · 2023-11-14T22:13:20.000Z · completed · 6 ms\n\n\
         **Assistant** (step 1, streamed, never completed):\n\n\
         Hello ``` <b>\n\n"
    );
}

/// Renders `html` in headless Chromium (Debian's `chromium`; .ci/run
/// installs it) and returns the DOM after its scripts ran.
fn rendered(html: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    fs::write(&page, html).unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("Debian's chromium on PATH (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn show_html_is_one_self_contained_page_that_chromium_renders() {
    let dir = tempfile::tempdir().unwrap();
    tool_session(dir.path(), "tools");
    // A message that would be markup if it were not escaped.
    let hostile = [
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        ev(
            "user/message",
            1,
            T0 + 1,
            r#"{"id":"u1","role":"user","content":[{"type":"text","text":"<script>document.title='owned'</script></script><img src=x>"}],"source":{"kind":"user"}}"#,
        ),
        ev(
            "turn/end",
            2,
            T0 + 2,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
    ];
    let out = run(
        dir.path(),
        &["append", "h", "--create", "-q"],
        &lines(&hostile),
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));

    let out = run(dir.path(), &["show", "tools", "--format", "html"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let html = out.stdout;
    // Self-contained: nothing is fetched.
    for external in ["://", "src=", "<link", "@import", "url("] {
        assert!(!html.contains(external), "{external} in the page");
    }
    let dom = rendered(&html);
    // The page's script drew the timeline: one bar per turn, the failed
    // and the interrupted one marked.
    assert!(
        dom.contains(r#"<nav id="timeline" aria-label="turns" data-turns="2">"#),
        "{dom}"
    );
    assert!(dom.contains(r##"<a href="#turn-1" class="turn failed" title="turn 1: completed · 1.5 s" data-turn="1""##), "{dom}");
    assert!(
        dom.contains(r##"<a href="#turn-2" class="turn interrupted""##),
        "{dom}"
    );
    assert!(dom.contains("<title>turnwal: tools</title>"));
    assert!(dom.contains(r#"<div class="result failed"><span class="role">Failed</span> <code>bash (c2)</code><pre>exit 1</pre></div>"#), "{dom}");
    assert!(dom.contains(r#"<div class="recovery">[recovery] turn/end, interrupted</div>"#));

    let out = run(dir.path(), &["show", "h", "--format", "html"], "");
    let dom = rendered(&out.stdout);
    // The text is shown as text: its script never ran, no image appeared.
    assert!(dom.contains("<title>turnwal: h</title>"), "{dom}");
    assert!(
        dom.contains(
            "&lt;script&gt;document.title='owned'&lt;/script&gt;&lt;/script&gt;&lt;img src=x&gt;"
        ),
        "{dom}"
    );
    assert!(!dom.contains("<img"), "{dom}");
}

// ---------------------------------------------------------------- grep

#[test]
fn grep_searches_every_session_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    tool_session(dir.path(), "tools");
    crashed_session(dir.path());
    let out = run(dir.path(), &["grep", "a.txt"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.stdout,
        // 40 bytes of context before the match, 80 after.
        "tools:1: turn 1 user/message: …ontent\":[{\"type\":\"text\",\"text\":\"look at a.txt\"}],\"source\":{\"kind\":\"user\"}}\n"
    );
    // Every session, natural order; --type with a prefix; case folded.
    let out = run(
        dir.path(),
        &["grep", "-i", "TURN\":2", "--type", "step/*"],
        "",
    );
    assert_eq!(
        out.stdout,
        "s:7: turn 2 step/start: {\"turn\":2,\"step\":1}\n\
         tools:11: turn 2 step/start: {\"turn\":2,\"step\":1}\n"
    );
    // --errors needs no pattern; -F takes the pattern as text.
    let out = run(dir.path(), &["grep", "--errors", "--json"], "");
    let hits: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(hits.len(), 1, "{}", out.stdout);
    assert_eq!(
        (
            hits[0]["session"].as_str(),
            hits[0]["seq"].as_u64(),
            hits[0]["turn"].as_u64(),
            hits[0]["type"].as_str(),
            hits[0]["time"].as_i64()
        ),
        (
            Some("tools"),
            Some(7),
            Some(1),
            Some("tool/result"),
            Some(T0 + 7)
        )
    );
    assert!(hits[0]["snippet"].as_str().unwrap().contains("exit 1"));
    let out = run(
        dir.path(),
        &[
            "grep",
            "-F",
            "{}",
            "--session",
            "tools",
            "--type",
            "tool/call",
        ],
        "",
    );
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    // --since: nothing of these 2023 sessions is from the last week.
    let out = run(dir.path(), &["grep", ".", "--since", "7d"], "");
    assert_eq!((out.status, out.stdout.as_str()), (1, ""));
    let out = run(
        dir.path(),
        &["grep", "turn", "--since", "2023-11-14T22:13:22Z"],
        "",
    );
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    // Nothing found: exit 1, as grep. Bad input: usage errors.
    let out = run(dir.path(), &["grep", "no such text"], "");
    assert_eq!((out.status, out.stdout.as_str()), (1, ""));
    let out = run(dir.path(), &["grep"], "");
    assert_eq!(out.status, 64);
    let out = run(dir.path(), &["grep", "("], "");
    assert_eq!(out.status, 64);
    assert!(
        out.stderr.starts_with("turnwal: bad PATTERN: "),
        "{}",
        out.stderr
    );
    let out = run(dir.path(), &["grep", "x", "--since", "yesterday"], "");
    assert_eq!(out.status, 64);
}

#[test]
fn recover_all_repairs_every_session_that_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "beta", 2);
    crashed_session(dir.path());
    let before = fs::read(log_path(dir.path(), "s")).unwrap();
    let out = run(dir.path(), &["recover", "--all", "--dry-run"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert!(
        out.stdout
            .starts_with("session s: open-turn before recovery\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.ends_with(
            "written: no (dry run)\n2 sessions: 1 clean, 0 live (skipped), 1 to recover (dry run), \
             0 not recovered\n"
        ),
        "{}",
        out.stdout
    );
    assert_eq!(fs::read(log_path(dir.path(), "s")).unwrap(), before);
    let out = run(dir.path(), &["recover", "--all"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert!(
        out.stdout.ends_with(
            "written: yes\n2 sessions: 1 clean, 0 live (skipped), 1 recovered, 0 not recovered\n"
        ),
        "{}",
        out.stdout
    );
    let mut expected = crashed_events();
    expected.extend(closers());
    assert_eq!(cat(dir.path(), "s"), lines(&expected));
    let out = run(dir.path(), &["verify", "--problems-only"], "");
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "2 sessions: 2 clean, 0 open-turn, 0 torn, 0 corrupt\n")
    );
    // A session and --all are one or the other.
    assert_eq!(run(dir.path(), &["recover", "s", "--all"], "").status, 64);
    assert_eq!(run(dir.path(), &["recover"], "").status, 64);
}

// ------------------------------------------------------ du, prune, export

#[test]
fn du_sizes_sessions_largest_first() {
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(dir.path(), "small", 1);
    session_with_turns(dir.path(), "big", 3);
    let size = |id| fs::metadata(log_path(dir.path(), id)).unwrap().len();
    let (small, big) = (size("small"), size("big"));
    assert!(big > small);
    let out = run(dir.path(), &["du", "--json"], "");
    assert_eq!(
        out.stdout,
        format!(
            "{{\"id\":\"big\",\"bytes\":{big},\"events\":18}}\n\
             {{\"id\":\"small\",\"bytes\":{small},\"events\":6}}\n\
             {{\"total\":{{\"bytes\":{},\"sessions\":2}}}}\n",
            big + small
        )
    );
    let out = run(dir.path(), &["du"], "");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(
        lines[0].ends_with(&format!("  {big}  big")),
        "{}",
        out.stdout
    );
    assert!(
        lines[2].ends_with(&format!("  {}  total (2 sessions)", big + small)),
        "{}",
        out.stdout
    );
}

#[test]
fn prune_removes_old_sessions_and_dry_run_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Sessions whose events are from 2023: older than a week.
    session_with_turns(dir.path(), "old-1", 1);
    session_with_turns(dir.path(), "old-2", 2);
    let out = run(
        dir.path(),
        &["prune", "--older-than", "7d", "--dry-run"],
        "",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert!(
        lines[0].starts_with("would remove old-1 ("),
        "{}",
        out.stdout
    );
    assert!(
        lines[1].starts_with("would remove old-2 ("),
        "{}",
        out.stdout
    );
    assert!(
        lines[2].starts_with("would remove 2 sessions, "),
        "{}",
        out.stdout
    );
    assert!(log_path(dir.path(), "old-1").exists());
    // --keep 1 keeps the most recently active (old-2's last event is later).
    let out = run(dir.path(), &["prune", "--keep", "1"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert!(out.stdout.starts_with("removed old-1 ("), "{}", out.stdout);
    assert!(!log_path(dir.path(), "old-1").exists());
    assert!(log_path(dir.path(), "old-2").exists());
    // Nothing is newer than 100 weeks ago... in 2023 terms: all of it is older.
    let out = run(dir.path(), &["prune", "--older-than", "5200w"], "");
    assert_eq!(out.stdout, "removed 0 sessions, 0 B\n");
    for bad in [
        &["prune"][..],
        &["prune", "--keep", "1", "--older-than", "1d"],
        &["prune", "--older-than", "1y"],
    ] {
        assert_eq!(run(dir.path(), bad, "").status, 64, "{bad:?}");
    }
}

/// An export of a session with no event imports nothing, and says so
/// (a session is stored with its first event).
#[test]
fn importing_a_session_of_no_event_says_nothing_was_imported() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.export");
    fs::write(
        &file,
        "{\"turnwalExport\":1,\"header\":{\"version\":0,\"id\":\"e\",\"createdAt\":1},\"policy\":\"strict\",\"events\":0}\n{\"turnwalExportEnd\":0}\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let out = run(&store, &["import", file.to_str().unwrap()], "");
    assert_eq!(
        (out.status, out.stdout, out.stderr.as_str()),
        (
            0,
            format!(
                "nothing imported: {} holds session e with no event, and a session is stored \
                 only once it has one\n",
                file.display()
            ),
            ""
        )
    );
    assert!(!store.join("sessions").exists());
}

#[test]
fn export_and_import_move_a_session_between_stores() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, db) = (dir.path().join("wal"), dir.path().join("other.sqlite"));
    tool_session(&wal, "tools");
    let file = dir.path().join("tools.export");
    let out = run(&wal, &["export", "tools", "-o", file.to_str().unwrap()], "");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "", "")
    );
    let text = fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The opening line, 12 stored events and 2 closers, the closing line.
    assert_eq!(lines.len(), 16);
    let opening: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        (
            &opening["turnwalExport"],
            &opening["policy"],
            &opening["events"],
            &opening["header"]["id"],
            &opening["header"]["cwd"]
        ),
        (
            &Value::from(1),
            &Value::from("strict"),
            &Value::from(14),
            &Value::from("tools"),
            &Value::from("/w")
        )
    );
    assert_eq!(lines[15], "{\"turnwalExportEnd\":14}");
    // Stdout carries the same bytes.
    assert_eq!(run(&wal, &["export", "tools"], "").stdout, text);

    let out = on(&db, &["import", file.to_str().unwrap()], "");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (0, "imported tools (14 events)\n", "")
    );
    assert_eq!(cat(&db, "tools"), cat(&wal, "tools"));
    let header = |store: &Path| run(store, &["head", "tools", "--json"], "").stdout;
    assert_eq!(header(&db), header(&wal));
    // Never over an existing session; under another id it goes in.
    let out = on(&db, &["import", file.to_str().unwrap()], "");
    assert_eq!(out.status, 4, "{}", out.stderr);
    let out = on(&db, &["import", file.to_str().unwrap(), "--as", "copy"], "");
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "imported copy (14 events)\n")
    );
    // A truncated or altered file is refused, and nothing is created.
    let short = dir.path().join("short.export");
    fs::write(&short, lines[..10].join("\n") + "\n").unwrap();
    let out = on(
        &db,
        &["import", short.to_str().unwrap(), "--as", "short"],
        "",
    );
    assert_eq!(
        (out.status, out.stderr),
        (
            2,
            format!(
                "turnwal: {}: line 11: the file ends after 9 of its 14 events (truncated)\n",
                short.display()
            )
        )
    );
    let mut altered = lines.clone();
    altered[15] = "{\"turnwalExportEnd\":13}";
    fs::write(&short, altered.join("\n") + "\n").unwrap();
    let out = on(
        &db,
        &["import", short.to_str().unwrap(), "--as", "short"],
        "",
    );
    assert_eq!(out.status, 2, "{}", out.stderr);
    let mut newer = lines.clone();
    let bumped = lines[0].replace("\"turnwalExport\":1", "\"turnwalExport\":2");
    newer[0] = &bumped;
    fs::write(&short, newer.join("\n") + "\n").unwrap();
    let out = on(
        &db,
        &["import", short.to_str().unwrap(), "--as", "short"],
        "",
    );
    assert_eq!(out.status, 4, "{}", out.stderr);
    assert!(out.stderr.contains("export format 2"), "{}", out.stderr);
    assert_eq!(
        run(&db, &["cat", "short"], "").status,
        4,
        "nothing was created"
    );
}
