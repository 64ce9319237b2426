//! `turnwal sync`, run as a real binary (issue 34): a WAL store mirrored to
//! PostgreSQL session by session and back; a second run changes nothing;
//! an incremental run copies only the new turns; another history and a
//! destination held by a live writer are refused with exit 4 and left as
//! they are; `--watch` copies as the source grows. (A sync killed with
//! SIGKILL: tests/faults/sync_kill.rs, where a large session's memory
//! does not weigh on the bounded-memory tests' children.)

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::stores::open;
use support::{T0, append, command, run_cmd, turn, turn_saying};

/// `turnwal sync ARGS`.
fn sync(args: &[&str]) -> support::Output {
    let mut all = vec!["sync"];
    all.extend_from_slice(args);
    support::turnwal(&all, "")
}

/// `cat --raw` of session `id` in the store `spec` names.
fn raw(spec: &str, id: &str) -> String {
    let out = run_cmd(&mut command(&["--store", spec, "cat", id, "--raw"]), "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (0, ""),
        "cat {id} of {spec}"
    );
    out.stdout
}

/// A session of `turns` turns appended to WAL store `store`.
fn session(store: &Path, id: &str, turns: u64) -> Vec<String> {
    let mut events = Vec::new();
    for n in 1..=turns {
        events.extend(turn(n, events.len() as u64, T0 + 100 * n as i64));
    }
    append(store, &["append", id, "--create", "--cwd", "/w"], &events);
    events
}

#[test]
fn sync_all_mirrors_a_wal_store_to_postgres_and_back_and_a_second_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    session(&wal, "a", 3);
    session(&wal, "b", 1);
    // "c": a crashed writer: one turn and half of another stored, then
    // torn bytes. Synced as stored: the open turn open, no torn bytes.
    let mut c = turn(1, 0, T0);
    c.extend(turn(2, 6, T0 + 50).into_iter().take(3));
    append(&wal, &["append", "c", "--create"], &c);
    let log = support::wal_log(&wal, "c");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"\x13\x00\x00\x00torn")
        .unwrap();
    let pg = support::pg::shared().fresh_store_url();
    let w = wal.to_str().unwrap();
    let out = sync(&[w, &pg, "--all"]);
    assert_eq!(
        (out.status, out.stderr.as_str(), out.stdout.as_str()),
        (
            0,
            "",
            "a: copied 18 events (0 -> 18, new)\nb: copied 6 events (0 -> 6, new)\n\
             c: copied 9 events (0 -> 9, new)\n3 of 3 sessions in step; 33 events copied\n"
        )
    );
    for id in ["a", "b", "c"] {
        assert_eq!(raw(&pg, id), raw(w, id), "{id}");
    }
    let dst = open(&pg);
    assert_eq!(dst.inspect("c").unwrap().state, turnwal::LogState::OpenTurn);
    let revisions: Vec<_> = ["a", "b", "c"].map(|id| dst.revision(id).unwrap()).into();

    // Again: nothing copied, nothing written.
    let out = sync(&[w, &pg, "--all"]);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (
            0,
            "a: in step (18 events)\nb: in step (6 events)\nc: in step (9 events)\n\
             3 of 3 sessions in step; 0 events copied\n"
        )
    );
    let now: Vec<_> = ["a", "b", "c"].map(|id| dst.revision(id).unwrap()).into();
    assert_eq!(now, revisions);

    // More turns: only they are copied.
    append(&wal, &["append", "b"], &turn(2, 6, T0 + 500));
    let out = sync(&[w, &pg, "--all", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let b_line = out.stdout.lines().nth(1).unwrap();
    assert_eq!(
        b_line,
        r#"{"id":"b","synced":true,"created":false,"before":6,"copied":6,"after":12,"error":null}"#
    );
    assert_eq!(raw(&pg, "b"), raw(w, "b"));

    // And back: PostgreSQL to a new WAL store, equal session by session.
    let back = dir.path().join("back");
    let out = sync(&[&pg, back.to_str().unwrap(), "--all"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    for id in ["a", "b", "c"] {
        assert_eq!(raw(back.to_str().unwrap(), id), raw(w, id), "{id}");
    }
}

#[test]
fn another_history_or_a_live_writer_in_the_destination_is_refused_with_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    session(&src, "a", 1);
    // "b": a turn and the start of another, its writer gone (turn open).
    let b = [turn(1, 0, T0), turn(2, 6, T0 + 100)].concat();
    append(&src, &["append", "b", "--create", "--cwd", "/w"], &b[..8]);
    session(&src, "c", 1);
    // Both in DST as SRC holds them now.
    let out = sync(&[src.to_str().unwrap(), dst.to_str().unwrap(), "a", "b"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    // "a": each store another second turn.
    append(&src, &["append", "a"], &turn(2, 6, T0 + 200));
    append(
        &dst,
        &["append", "a"],
        &turn_saying(2, 6, T0 + 999, "hi 2", "ANOTHER"),
    );
    // "b": SRC's goes on; DST's is held by a live writer (its stdin open).
    append(&src, &["append", "b", "--continue"], &b[8..]);
    let mut writer = command(&[
        "--store",
        dst.to_str().unwrap(),
        "append",
        "b",
        "--continue",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let stdin = writer.stdin.take().unwrap();
    // Held once it has opened the session (it waits for its input).
    let started = Instant::now();
    let probe = open(dst.to_str().unwrap());
    while probe.holders(&["b".to_owned()]).unwrap()[0].is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the writer never held b"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(probe);
    let before_a = raw(dst.to_str().unwrap(), "a");
    let before_b = raw(dst.to_str().unwrap(), "b");

    let out = sync(&[src.to_str().unwrap(), dst.to_str().unwrap(), "--all"]);
    assert_eq!(out.status, 4);
    assert_eq!(
        out.stdout,
        "c: copied 6 events (0 -> 6, new)\n1 of 3 sessions in step; 6 events copied\n"
    );
    let lines_err: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines_err.len(), 2, "{}", out.stderr);
    assert!(
        lines_err[0].starts_with(
            "turnwal: a: not synced: session \"a\": the destination holds another history than \
             the source (another event at seq 11); source "
        ),
        "{}",
        lines_err[0]
    );
    assert!(
        lines_err[0].contains("seq 11: {\"type\":\"turn/end\""),
        "{}",
        lines_err[0]
    );
    assert!(
        lines_err[1]
            .starts_with("turnwal: b: not synced: session \"b\" is locked by another writer"),
        "{}",
        lines_err[1]
    );
    assert_eq!(raw(dst.to_str().unwrap(), "a"), before_a);
    assert_eq!(raw(dst.to_str().unwrap(), "b"), before_b);
    drop(stdin);
    writer.wait().unwrap();
}

#[test]
fn sync_watch_copies_as_the_source_grows_and_new_sessions_appear() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst.db");
    session(&src, "a", 1);
    let mut watcher = command(&[
        "sync",
        src.to_str().unwrap(),
        dst.to_str().unwrap(),
        "--all",
        "--watch",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut seen = BufReader::new(watcher.stdout.take().unwrap()).lines();
    assert_eq!(
        seen.next().unwrap().unwrap(),
        "a: copied 6 events (0 -> 6, new)"
    );
    let started = Instant::now();
    append(&src, &["append", "a"], &turn(2, 6, T0 + 500));
    assert_eq!(
        seen.next().unwrap().unwrap(),
        "a: copied 6 events (6 -> 12)"
    );
    // Copied within a pass or two (each within the watch's 1 s recheck
    // at worst; the notification's latency is a bench figure, not this).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    session(&src, "b", 2);
    assert_eq!(
        seen.next().unwrap().unwrap(),
        "b: copied 12 events (0 -> 12, new)"
    );
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    for id in ["a", "b"] {
        assert_eq!(
            raw(dst.to_str().unwrap(), id),
            raw(src.to_str().unwrap(), id)
        );
    }
}
