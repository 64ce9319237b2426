//! A writer terminated mid-turn, on every platform: `Child::kill` is
//! SIGKILL on Unix and `TerminateProcess` on Windows, where this is the
//! kill test the emulated run has (`kill.rs` reads Unix signal statuses
//! and `/proc`). A real `turnwal append` process writes two turns and half
//! of a third, is killed, and the store recovers every acknowledged event
//! and closes the open turn.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{Event, Store, StoreOptions, interrupted_turn_closers};

use crate::support::{BIN, T0, native, open, turn};

/// Runs `append --sync turn` on `spec`, kills it once turn 2 is
/// acknowledged and half of turn 3 has been handed over, and returns what
/// was sent and the last seq acknowledged.
fn write_and_kill(spec: &str, id: &str) -> (Vec<String>, u64) {
    let mut sent = turn(1, 0, T0);
    sent.extend(turn(2, 6, T0 + 10));
    sent.extend(turn(3, 12, T0 + 20).into_iter().take(3));
    let mut child = native(BIN)
        .args(["--store", spec, "append", id, "--sync", "turn", "--create"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (acks, acked) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let seq: u64 = line
                .strip_prefix("ack ")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("unexpected output {line:?}"));
            let _ = acks.send(seq);
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    for line in &sent {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut last = None;
    while last != Some(11) {
        let seq = acked
            .recv_timeout(Duration::from_secs(60))
            .expect("turn 2 is acknowledged");
        assert!(
            seq <= 11,
            "an event of the open turn was acknowledged: {seq}"
        );
        last = Some(seq);
    }
    // The open turn's events are read and written by now, or some of them.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the writer ended on its own: {status}");
    drop(stdin);
    reader.join().unwrap();
    (sent, last.unwrap())
}

/// Recovery keeps every acknowledged event byte for byte, then a prefix of
/// the open turn, closed by the interrupted turn's closers.
fn check(store: &Store, id: &str, sent: &[String], acked: u64) {
    let view = store.load(id).unwrap();
    let got: Vec<String> = view.events.iter().map(Event::to_json).collect();
    let durable = acked as usize + 1;
    assert_eq!(got[..durable], sent[..durable]);
    let kept = got[durable..]
        .iter()
        .zip(&sent[durable..])
        .take_while(|(g, s)| g == s)
        .count();
    let stored = &view.events[..durable + kept];
    let closers: Vec<String> = interrupted_turn_closers(stored)
        .iter()
        .map(Event::to_json)
        .collect();
    assert_eq!(
        got[durable + kept..],
        closers[..],
        "kept {kept} of the open turn"
    );
    println!(
        "{id}: {} acknowledged, {kept} of the open turn kept, {} closers",
        durable,
        closers.len()
    );
    if kept > 0 {
        let last = view.events.last().unwrap();
        assert_eq!(last.kind(), turnwal::EventKind::TurnEnd);
        assert_eq!(
            last.data().get(),
            r#"{"turn":3,"reason":{"kind":"interrupted"}}"#
        );
    }
    // Recovery is durable: a second load finds the same log.
    let again: Vec<String> = store
        .load(id)
        .unwrap()
        .events
        .iter()
        .map(Event::to_json)
        .collect();
    assert_eq!(again, got);
}

fn spec(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_terminated_wal_writer_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("wal");
    let (sent, acked) = write_and_kill(&spec(&store), "s");
    check(&open(&store), "s", &sent, acked);
}

#[test]
fn a_terminated_sqlite_writer_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions.db");
    let (sent, acked) = write_and_kill(&spec(&store), "s");
    check(&open(&store), "s", &sent, acked);
}

#[test]
fn a_terminated_jsonl_writer_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("jsonl");
    let (sent, acked) = write_and_kill(&format!("jsonl+none:{}", spec(&root)), "s");
    let backend = JsonlBackend::open(&root, Compression::None).unwrap();
    let store = Store::with_backend(std::sync::Arc::new(backend), StoreOptions::default());
    check(&store, "s", &sent, acked);
}
