//! `turnwal sync` killed with SIGKILL anywhere in a large session (issue
//! 34): whatever each kill leaves in the destination is a prefix of the
//! source's stored events, and the rerun completes it; on SQLite and
//! PostgreSQL destinations.

use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use support::stores::open;
use support::{T0, command, lines, on};

/// `turnwal sync ARGS`.
fn sync(args: &[&str]) -> support::Output {
    let mut all = vec!["sync"];
    all.extend_from_slice(args);
    support::turnwal(&all, "")
}

/// A session of `turns` turns of `deltas` streamed chunks each, appended
/// to WAL store `store` in one run.
fn large_session(store: &Path, id: &str, turns: u64, deltas: u64) -> u64 {
    let mut text = String::new();
    let mut seq = 0;
    for n in 1..=turns {
        let mut events = vec![
            support::ev("turn/start", seq, T0, &format!(r#"{{"turn":{n}}}"#)),
            support::ev(
                "user/message",
                seq + 1,
                T0,
                &format!(r#"{{"id":"u{n}","text":"go"}}"#),
            ),
            support::ev(
                "step/start",
                seq + 2,
                T0,
                &format!(r#"{{"turn":{n},"step":1}}"#),
            ),
        ];
        seq += 3;
        for i in 0..deltas {
            let chunk = format!(
                r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"w{i} "}}}}"#
            );
            events.push(support::ev("assistant/chunk", seq, T0, &chunk));
            seq += 1;
        }
        events.push(support::ev(
            "step/end",
            seq,
            T0,
            &format!(r#"{{"turn":{n},"step":1}}"#),
        ));
        events.push(support::ev(
            "turn/end",
            seq + 1,
            T0,
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        ));
        seq += 2;
        text.push_str(&lines(&events));
    }
    let out = on(store, &["append", id, "--create"], &text);
    assert_eq!(out.status, 0, "{}", out.stderr);
    seq
}

/// DST's copy of `id` holds a prefix of SRC's stored events (none at all
/// is a prefix too).
fn assert_prefix(src: &str, dst: &str, id: &str, context: &str) -> usize {
    let theirs = open(dst).read_raw(id, 0);
    let theirs = match theirs {
        Ok(events) => events,
        Err(turnwal::Error::NotFound { .. }) => return 0,
        Err(e) => panic!("{context}: {e}"),
    };
    let ours = open(src).read_raw(id, 0).unwrap();
    assert!(theirs.len() <= ours.len(), "{context}");
    assert_eq!(theirs, ours[..theirs.len()], "{context}");
    theirs.len()
}

#[test]
fn a_sync_killed_anywhere_leaves_a_prefix_and_the_rerun_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    // 60 turns of 300 deltas: 18,300 events, several batches.
    let events = large_session(&wal, "big", 60, 300);
    let w = wal.to_str().unwrap();
    for (to, name) in [
        (
            dir.path().join("dst.db").to_str().unwrap().to_owned(),
            "sqlite",
        ),
        (support::pg::shared().fresh_store_url(), "postgres"),
    ] {
        // The hook: killed right after the second batch is acknowledged.
        // A killed sync's PostgreSQL lease must run out before another
        // writer may take the session (docs/POSTGRES.md): a short one.
        let lease = [("TURNWAL_LEASE", "1s")];
        let status = command(&["sync", w, &to, "big"])
            .envs(lease)
            .env("TURNWAL_TEST_SYNC_ABORT_AFTER", "2")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), None, "{name}: ended by its signal");
        let held = assert_prefix(w, &to, "big", name);
        assert!(held > 0 && held < events as usize, "{name}: {held}");
        // Real SIGKILLs at times spread over the copy, each rerun going
        // further; whatever each leaves is a prefix.
        for delay_ms in [5u64, 40, 120, 300] {
            let mut child = command(&["sync", w, &to, "big"])
                .envs(lease)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(delay_ms));
            let _ = child.kill();
            child.wait().unwrap();
            assert_prefix(w, &to, "big", &format!("{name} killed after {delay_ms} ms"));
        }
        if name == "postgres" {
            std::thread::sleep(Duration::from_millis(1100));
        }
        let out = sync(&[w, &to, "big"]);
        assert_eq!(out.status, 0, "{name}: {}", out.stderr);
        assert_eq!(
            assert_prefix(w, &to, "big", name),
            events as usize,
            "{name}"
        );
        let out = sync(&[w, &to, "big"]);
        assert_eq!(
            out.stdout,
            format!("big: in step ({events} events)\n1 of 1 session in step; 0 events copied\n")
        );
    }
}
