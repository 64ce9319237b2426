//! Idle seals (issue 31): `Store::seal_due`, the work a harness (or
//! `turnwal append` at end of input, or turnwal-dsh after an acknowledged
//! append) gives the store when nothing waits on it. A native WAL session
//! held open seals its closed turns once enough are plain (docs/FORMAT.md,
//! "When a writer seals"), so a live log stays near its sealed size; every
//! event reads back byte for byte; other stores and sessions not held open
//! are left alone.

use crate::support;

use std::path::Path;

use support::{copy_tree, jsons, wal_bytes, wal_log};
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::backend::wal::{AUTO_SEAL_FILE_FRACTION, IDLE_SEAL_MIN_BYTES};
use turnwal::{Event, SessionHeader, Store, StoreOptions};
use turnwal_testkit::workload::realistic::Realistic;

fn size(store: &Path, id: &str) -> u64 {
    wal_bytes(store, id)
}

#[test]
fn idle_seals_keep_a_live_session_near_its_sealed_size() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    let store = Store::open(&root).unwrap();
    store.create(SessionHeader::new("s", 1)).unwrap();
    let mut session = Realistic::new(7);
    let mut all: Vec<Event> = Vec::new();
    let mut sealed = 0;
    for _ in 0..120 {
        let turn = session.next_turn();
        // Mid-turn, nothing new is closed: an idle moment seals nothing.
        let (head, rest) = turn.split_at(turn.len() / 2);
        store.append("s", head).unwrap();
        assert!(!store.seal_due("s").unwrap(), "a seal with the turn open");
        store.append("s", rest).unwrap();
        all.extend_from_slice(&turn);
        let before = size(&root, "s");
        if store.seal_due("s").unwrap() {
            sealed += 1;
            assert!(size(&root, "s") < before, "a seal shrinks the log");
        }
        assert_eq!(
            jsons(&store.inspect("s").unwrap().events),
            jsons(&all),
            "every event reads back byte for byte"
        );
    }
    assert!(sealed >= 3, "sealed {sealed} times");
    let live = size(&root, "s");
    // The same session sealed whole, as `turnwal compact` leaves it.
    store.close("s").unwrap();
    let copy = dir.path().join("copy");
    copy_tree(&root, &copy);
    Store::open(&copy).unwrap().compact("s").unwrap();
    let compact = size(&copy, "s");
    // Plain closed turns are under 1/FRACTION of the file (or the floor):
    // the live log is at most FRACTION/(FRACTION-1) of its sealed part.
    let bound =
        compact * AUTO_SEAL_FILE_FRACTION / (AUTO_SEAL_FILE_FRACTION - 1) + IDLE_SEAL_MIN_BYTES;
    assert!(live <= bound, "live {live} bytes, sealed whole {compact}");
    let reopened = Store::open(&root).unwrap();
    assert_eq!(jsons(&reopened.inspect("s").unwrap().events), jsons(&all));
    assert_eq!(reopened.verify("s").unwrap().exit_code(), 0);
}

#[test]
fn idle_work_leaves_what_it_does_not_hold_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    let writer = Store::open(&root).unwrap();
    writer.create(SessionHeader::new("s", 1)).unwrap();
    let mut session = Realistic::new(8);
    for _ in 0..40 {
        writer.append("s", &session.next_turn()).unwrap();
    }
    let before = std::fs::read(wal_log(&root, "s")).unwrap();
    // Another store over the same directory does not hold the session.
    let other = Store::open(&root).unwrap();
    assert!(!other.seal_due("s").unwrap());
    assert!(!other.seal_due("nobody").unwrap());
    assert_eq!(std::fs::read(wal_log(&root, "s")).unwrap(), before);
    // A store with nothing of the kind (SQLite) has no idle work.
    let sqlite = Store::open_sqlite(
        dir.path().join("s.sqlite"),
        SqliteOptions::default(),
        StoreOptions::default(),
    )
    .unwrap();
    sqlite.create(SessionHeader::new("q", 1)).unwrap();
    sqlite.append("q", &Realistic::new(9).next_turn()).unwrap();
    assert!(!sqlite.seal_due("q").unwrap());
    // The holder seals (40 realistic turns are well over the floor).
    assert!(writer.seal_due("s").unwrap());
    assert!(std::fs::metadata(wal_log(&root, "s")).unwrap().len() < before.len() as u64);
}
