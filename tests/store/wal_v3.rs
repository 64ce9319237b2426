//! Format version 3 (issue 31, docs/FORMAT.md "Version 3"): a session's
//! sealed turns in an append-only archive beside a live file that starts
//! with an archive reference, so a seal costs what it seals. Every reader
//! sees the archive's events, then the live file's, byte for byte as
//! appended; a seal never rewrites what is archived; the states a crash
//! can leave between a seal's steps read as the old session or the new.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use support::{jsons, wal_log};
use turnwal::backend::wal::WalBackend;
use turnwal::backend::wal::archive::path_of as archive_of;
use turnwal::backend::wal::format::{FORMAT_V3, decode_file_header};
use turnwal::{Error, Event, SessionHeader, Store, StoreOptions};
use turnwal_testkit::workload::realistic::Realistic;

fn v3_store(root: &Path) -> Store {
    let backend = WalBackend::open(root).unwrap().creating_version(FORMAT_V3);
    Store::with_backend(Arc::new(backend), StoreOptions::default())
}

fn archive(root: &Path, id: &str) -> PathBuf {
    archive_of(&wal_log(root, id))
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// A version-3 session `id` of `turns` realistic turns (seed `seed`) in
/// the store at `root`, sealed by `compact` and closed.
fn sealed_session(root: &Path, id: &str, seed: u64, turns: usize) {
    let store = v3_store(root);
    store.create(SessionHeader::new(id, 1)).unwrap();
    let mut session = Realistic::new(seed);
    for _ in 0..turns {
        store.append(id, &session.next_turn()).unwrap();
    }
    store.compact(id).unwrap();
    store.close(id).unwrap();
}

/// Whether the live file of `id` starts with an archive reference.
fn references_archive(root: &Path, id: &str) -> bool {
    let live = std::fs::read(wal_log(root, id)).unwrap();
    decode_file_header(&live).unwrap().archive.is_some()
}

/// Every way to read a session, compared with what was appended.
fn reads_back(root: &Path, id: &str, all: &[Event]) {
    let store = Store::open(root).unwrap();
    let expected = jsons(all);
    assert_eq!(
        jsons(&store.inspect(id).unwrap().events),
        expected,
        "inspect"
    );
    let mut reader = store.read(id).unwrap();
    let mut lent = Vec::new();
    reader
        .for_each_stored(|e| -> turnwal::Result<()> {
            lent.push(e.to_event().to_json());
            Ok(())
        })
        .unwrap();
    assert_eq!(lent, expected, "the cursor");
    for from in [
        0,
        1,
        all.len() as u64 / 3,
        all.len() as u64 - 1,
        all.len() as u64,
    ] {
        assert_eq!(
            jsons(&store.read_from(id, from).unwrap()),
            expected[from as usize..],
            "read_from {from}"
        );
    }
    assert_eq!(
        jsons(&store.read_first(id, 7).unwrap()),
        expected[..7.min(expected.len())],
        "read_first"
    );
    assert_eq!(store.verify(id).unwrap().exit_code(), 0, "verify");
    let listed = store.list().unwrap();
    let summary = listed.iter().find(|s| s.id == id).unwrap();
    assert_eq!(summary.events, all.len() as u64, "listing");
}

#[test]
fn a_version_3_session_seals_into_its_archive_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    let store = v3_store(&root);
    store.create(SessionHeader::new("s", 1)).unwrap();
    let mut session = Realistic::new(3);
    let mut all: Vec<Event> = Vec::new();
    let mut seals = Vec::new();
    for _ in 0..80 {
        let turn = session.next_turn();
        store.append("s", &turn).unwrap();
        all.extend(turn);
        if store.seal_due("s").unwrap() {
            seals.push((len(&archive(&root, "s")), len(&wal_log(&root, "s"))));
        }
    }
    assert!(seals.len() >= 3, "sealed {} times", seals.len());
    // The archive only grows; the live file after a seal holds no more than
    // the open turn (none here): header and reference.
    for pair in seals.windows(2) {
        assert!(pair[1].0 > pair[0].0, "{seals:?}");
    }
    let live = std::fs::read(wal_log(&root, "s")).unwrap();
    let meta = decode_file_header(&live).unwrap();
    assert_eq!(meta.version, FORMAT_V3);
    let reference = meta.archive.expect("an archive reference");
    assert_eq!(reference.len, len(&archive(&root, "s")));
    store.close("s").unwrap();
    reads_back(&root, "s", &all);
    // It goes on: more turns, an open one, a reopen, another seal.
    let store = Store::open(&root).unwrap();
    for _ in 0..30 {
        let turn = session.next_turn();
        store.append("s", &turn).unwrap();
        all.extend(turn);
    }
    let open = session.next_turn();
    store.append("s", &open[..open.len() / 2]).unwrap();
    all.extend_from_slice(&open[..open.len() / 2]);
    let before = len(&archive(&root, "s"));
    store.compact("s").unwrap();
    assert!(len(&archive(&root, "s")) > before);
    let inspected = Store::open(&root).unwrap().inspect("s").unwrap();
    assert_eq!(
        jsons(&inspected.events[..inspected.stored as usize]),
        jsons(&all)
    );
    store.close("s").unwrap();
}

#[test]
fn a_seal_that_stopped_between_its_steps_reads_as_the_old_session() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    let store = v3_store(&root);
    store.create(SessionHeader::new("s", 1)).unwrap();
    let mut session = Realistic::new(4);
    let mut all: Vec<Event> = Vec::new();
    for _ in 0..40 {
        let turn = session.next_turn();
        store.append("s", &turn).unwrap();
        all.extend(turn);
    }
    store.compact("s").unwrap();
    let archived = std::fs::read(archive(&root, "s")).unwrap();
    for _ in 0..20 {
        let turn = session.next_turn();
        store.append("s", &turn).unwrap();
        all.extend(turn);
    }
    store.close("s").unwrap();
    // A second seal appended its units and stopped before publishing the
    // live file: the archive is longer than the live file's reference says.
    let live = std::fs::read(wal_log(&root, "s")).unwrap();
    let copy = dir.path().join("copy");
    support::copy_tree(&root, &copy);
    let store = Store::open(&copy).unwrap();
    store.compact("s").unwrap();
    store.close("s").unwrap();
    std::fs::write(wal_log(&copy, "s"), &live).unwrap();
    assert!(len(&archive(&copy, "s")) > archived.len() as u64);
    reads_back(&copy, "s", &all);
    // The next seal cuts what the stopped one left and seals again.
    let store = Store::open(&copy).unwrap();
    store.compact("s").unwrap();
    store.close("s").unwrap();
    reads_back(&copy, "s", &all);
    // A first seal that stopped after publishing its archive: an orphan
    // archive beside a live file with no reference, never read, replaced by
    // the next first seal.
    let orphan = dir.path().join("orphan");
    let backend = WalBackend::open(&orphan)
        .unwrap()
        .creating_version(FORMAT_V3)
        .sealing_by_itself(false);
    let store = Store::with_backend(Arc::new(backend), StoreOptions::default());
    store.create(SessionHeader::new("o", 1)).unwrap();
    let mut first: Vec<Event> = Vec::new();
    let mut other = Realistic::new(40);
    for _ in 0..10 {
        let turn = other.next_turn();
        store.append("o", &turn).unwrap();
        first.extend(turn);
    }
    store.close("o").unwrap();
    std::fs::write(archive(&orphan, "o"), b"not an archive at all").unwrap();
    reads_back(&orphan, "o", &first);
    let store = Store::open(&orphan).unwrap();
    store.compact("o").unwrap();
    store.close("o").unwrap();
    assert!(references_archive(&orphan, "o"));
    reads_back(&orphan, "o", &first);
}

#[test]
fn a_damaged_or_missing_archive_is_corrupt_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    sealed_session(&root, "s", 5, 40);
    let path = archive(&root, "s");
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    let at = good.len() - 40;
    flipped[at] ^= 0x40;
    // The version field (bytes 8-9) flipped to a version no build writes:
    // damage to the archive, not a file for a newer turnwal.
    let mut versioned = good.clone();
    versioned[9] ^= 0x02;
    for (what, bytes) in [
        ("flipped", Some(flipped)),
        ("another version", Some(versioned)),
        ("short", Some(good[..good.len() - 1].to_vec())),
        ("missing", None),
    ] {
        match &bytes {
            Some(b) => std::fs::write(&path, b).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        let store = Store::open(&root).unwrap();
        match store.inspect("s") {
            Err(Error::Corrupt(c)) => {
                assert_eq!(c.path, path, "{what}: names the archive");
                if what == "another version" {
                    assert_eq!((c.offset, c.seq), (0, None));
                    assert!(
                        c.reason.starts_with(
                            "archive-mismatch: its file header states a format version other than 3"
                        ),
                        "{}",
                        c.reason
                    );
                }
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(store.verify("s").unwrap().exit_code(), 2, "{what}");
    }
    std::fs::write(&path, &good).unwrap();
    assert_eq!(
        Store::open(&root).unwrap().verify("s").unwrap().exit_code(),
        0
    );
    // Deleting the session removes its archive too.
    let store = Store::open(&root).unwrap();
    store.delete("s").unwrap();
    assert!(!path.exists() && !wal_log(&root, "s").exists());
}

/// A listing reads a file's first 4 KiB for its header: a version-3 live
/// file whose header ends within an archive reference's length of that
/// boundary still lists from its two small reads, clean, with every event.
#[test]
fn a_header_near_the_listing_read_lists_with_its_archive_reference() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    let store = v3_store(&root);
    // A header whose file header ends 10 bytes before 4096: the archive
    // reference after it crosses the boundary.
    let probe = SessionHeader::new("h", 1).with_cwd("/");
    let json_len = probe.to_json().len();
    let cwd = format!("/{}", "w".repeat(4096 - 10 - 24 - json_len));
    let header = SessionHeader::new("h", 1).with_cwd(cwd);
    assert_eq!(24 + header.to_json().len(), 4086);
    store.create(header).unwrap();
    let mut session = Realistic::new(6);
    let mut all = Vec::new();
    for _ in 0..20 {
        let turn = session.next_turn();
        store.append("h", &turn).unwrap();
        all.extend(turn);
    }
    store.compact("h").unwrap();
    store.close("h").unwrap();
    assert!(references_archive(&root, "h"));
    let listed = Store::open(&root).unwrap().list().unwrap();
    let summary = listed.iter().find(|s| s.id == "h").unwrap();
    assert_eq!(
        (summary.events, summary.state, summary.problem.as_deref()),
        (all.len() as u64, turnwal::LogState::Clean, None)
    );
    reads_back(&root, "h", &all);
}

/// A unit of the archive whose checksum holds but whose frame does not
/// decode (its record re-checksummed after a byte of the frame changed):
/// the archive's framing checks, so the listing's quick look passes, but
/// every read that decodes the unit refuses it as corrupt at its offset in
/// the archive, and `verify` says corrupt.
#[test]
fn a_unit_of_the_archive_that_checks_but_does_not_decode_is_refused_by_every_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wal");
    sealed_session(&root, "s", 11, 30);
    let path = archive(&root, "s");
    let mut bytes = std::fs::read(&path).unwrap();
    let salt = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    let json_len = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let unit = 24 + json_len;
    assert_eq!(bytes[unit + 4], 18, "a sealed unit");
    let data_len = u32::from_le_bytes(bytes[unit + 8..unit + 12].try_into().unwrap()) as usize;
    let record_len = 52 + data_len + 4;
    bytes[unit + 52 + data_len / 2] ^= 0x5a;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&salt.to_le_bytes());
    crc.update(&bytes[unit + 4..unit + record_len]);
    let sum = crc.finalize().to_le_bytes();
    bytes[unit..unit + 4].copy_from_slice(&sum);
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(&root).unwrap();
    for (what, result) in [
        ("inspect", store.inspect("s").map(drop)),
        ("load", store.load("s").map(drop)),
        ("read_from 0", store.read_from("s", 0).map(drop)),
    ] {
        match result {
            Err(Error::Corrupt(c)) => {
                assert_eq!(
                    (c.path.as_path(), c.offset),
                    (path.as_path(), unit as u64),
                    "{what}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    assert_eq!(store.verify("s").unwrap().exit_code(), 2);
}
