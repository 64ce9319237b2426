//! Live logs stay small (issue 31): a realistic session appended the way a
//! harness's pipeline appends it — one `turnwal append --sync turn`
//! process per ten turns, never closed by `Store::close`, never compacted
//! by hand — is sealed by each process at its idle moment (end of input,
//! everything acknowledged: `Store::seal_due`), so the log a user has stays
//! near its sealed size. Sizes are deterministic (seeded workload, fixed
//! zstd levels), so they are asserted, not timed.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use support::{cat, lines, on, wal_bytes};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::wal::IDLE_SEAL_MIN_BYTES;
use turnwal::{Event, SessionHeader, Store, StoreOptions, SyncMode};
use turnwal_testkit::workload::realistic::Realistic;

const TURNS: usize = 200;
const PER_PROCESS: usize = 10;

/// The same turns in an upstream zstd JSONL root, one frame per turn: the
/// file's size after each `PER_PROCESS` turns.
fn zstd_sizes(root: &Path, turns: &[Vec<Event>]) -> Vec<u64> {
    let backend = JsonlBackend::open(root, Compression::Zstd).unwrap();
    let options = StoreOptions {
        sync: SyncMode::Never,
        ..StoreOptions::default()
    };
    let store = Store::with_backend(Arc::new(backend), options);
    store
        .create(SessionHeader::new("live", 1).with_cwd("/work/app"))
        .unwrap();
    let path = turnwal::backend::jsonl::layout::log_path(
        root,
        Some("/work/app"),
        "live",
        Compression::Zstd,
    )
    .unwrap();
    turns
        .chunks(PER_PROCESS)
        .map(|chunk| {
            for turn in chunk {
                store.append("live", turn).unwrap();
            }
            store.flush("live").unwrap();
            std::fs::metadata(&path).unwrap().len()
        })
        .collect()
}

#[test]
fn a_session_appended_process_by_process_stays_near_its_sealed_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Realistic::new(31);
    let turns: Vec<Vec<Event>> = (0..TURNS).map(|_| session.next_turn()).collect();
    let zstd = zstd_sizes(&dir.path().join("jsonl"), &turns);
    let store = dir.path().join("wal");
    let mut sizes = Vec::new();
    for (i, chunk) in turns.chunks(PER_PROCESS).enumerate() {
        let mut args = vec!["append", "--quiet", "--sync", "turn"];
        if i == 0 {
            args.extend(["--create", "--cwd", "/work/app"]);
        }
        args.push("live");
        let input: Vec<String> = chunk.iter().flatten().map(Event::to_json).collect();
        let out = on(&store, &args, &lines(&input));
        assert_eq!((out.status, out.stderr.as_str()), (0, ""), "process {i}");
        sizes.push(wal_bytes(&store, "live"));
    }
    // After every process: at most 1.2× upstream's zstd of the same turns,
    // or, while the session is small, plain bytes under the idle seal's
    // floor on top of that.
    for (k, (&wal, &zstd)) in sizes.iter().zip(&zstd).enumerate() {
        let bound = zstd * 6 / 5 + IDLE_SEAL_MIN_BYTES;
        assert!(
            wal <= bound,
            "after process {k}: {wal} WAL bytes, {zstd} zstd JSONL bytes"
        );
    }
    let (wal, zstd) = (*sizes.last().unwrap(), *zstd.last().unwrap());
    assert!(
        wal * 5 <= zstd * 6,
        "the live session: {wal} WAL bytes, over 1.2× upstream's {zstd} zstd JSONL bytes"
    );
    // It was sealed along the way (the plain log of these turns is over
    // four times upstream's zstd), and sealing changed no event.
    let plain: u64 = turns
        .iter()
        .flatten()
        .map(|e| e.to_json().len() as u64)
        .sum();
    assert!(
        wal * 3 < plain,
        "{wal} WAL bytes for {plain} bytes of events"
    );
    let expected: String = turns.iter().flatten().map(|e| e.to_json() + "\n").collect();
    assert_eq!(cat(&store, "live", false), expected);
    let out = on(&store, &["verify", "live"], "");
    assert_eq!(out.status, 0, "verify: {}{}", out.stdout, out.stderr);
}
