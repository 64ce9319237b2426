//! Bytes at rest of the compact format (WAL format version 2, issue 16; its
//! archive in version 3, issue 31) on
//! sessions the real upstream harness wrote: the `after/` roots of
//! tests/fixtures/upstream (upstream's own load repaired them, so every turn
//! is closed), raw and zstd, fixed and random (see tests/store/jsonl_upstream.rs
//! for how they were written).
//!
//! Each root's sessions (those its reader accepts: a few random zstd ones
//! end in garbage upstream refuses too) are copied into WAL stores as
//! `turnwal convert` copies them — one batch per session — in format
//! version 1, in version 2 with sealing off (chunk runs packed at append:
//! the size before compaction), in version 3 with sealing off, and through
//! the real `turnwal convert` (whose writer seals at close); the unsealed
//! version-3 store is then compacted with `turnwal compact --all`, and a
//! session's bytes are its log's and its archive's. Every event of every copy must read back byte for byte as the
//! source has it, and the sizes are deterministic (a sealed unit's inner
//! records carry salt 0 and watermark 0, and zstd's level is fixed), so
//! they are asserted, not timed:
//!
//! - compact < version-2 unsealed < version 1, in total;
//! - version 3 compacted is exactly version 2 compacted plus, per session,
//!   its archive's file header and its live file's archive reference (the
//!   same units in a second file): about 200 bytes a session, which on
//!   these 15-event sessions is a fifth of their compact bytes (1.08×
//!   upstream's zstd on `zstd/after`), and noise on a realistic session;
//! - the compact units (version 2) are at most upstream's zstd transcripts of the same
//!   sessions (zstd roots: the files upstream wrote, one frame per append
//!   batch) and at most half upstream's raw transcripts (raw roots: the
//!   files; zstd roots: their frames' text, which is what upstream's raw
//!   writer writes for the same batches). Both targets of the issue hold
//!   here even for these tiny sessions (docs/PERFORMANCE.md, "Bytes at
//!   rest (format version 2)").

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use support::{copy_tree, turnwal};
use turnwal::backend::jsonl::zstd::decompress_prefix;
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::wal::WalBackend;
use turnwal::backend::wal::format::{self, FORMAT_V1, FORMAT_V2, FORMAT_VERSION};
use turnwal::{Event, Store, StoreOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream")
}

fn json_lines(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// A WAL store at `dir` creating sessions in `version`, sealing or not.
fn wal_store(dir: &Path, version: u16, seal: bool) -> Store {
    let backend = WalBackend::open(dir)
        .unwrap()
        .creating_version(version)
        .sealing_by_itself(seal);
    Store::with_backend(Arc::new(backend), StoreOptions::default())
}

/// Copies `id` from `src` into `dst` as `turnwal convert` does: the header
/// and policy, then every event of the inspect view as one batch.
fn copy(src: &Store, dst: &Store, id: &str) {
    let scan = src.backend().scan(id).unwrap().unwrap();
    let view = src.view(id).unwrap();
    dst.create_with_policy(view.header().clone(), scan.policy)
        .unwrap();
    let events: Vec<Event> = view.iter().map(|e| e.to_event()).collect();
    dst.append(id, &events).unwrap();
    dst.close(id).unwrap();
}

/// The bytes session `id` occupies in the WAL store at `dir` (its log and,
/// in version 3, its archive).
fn log_len(dir: &Path, id: &str) -> u64 {
    WalBackend::open(dir).unwrap().session_bytes(id).unwrap()
}

/// The byte totals of one root's sessions in every form.
#[derive(Debug, Default)]
struct Totals {
    sessions: usize,
    events: u64,
    v1: u64,
    v2_plain: u64,
    /// Version 2 compacted (one file).
    compact_v2: u64,
    /// Version 3 compacted (the live file and the archive).
    compact: u64,
    /// What version 3 adds to version 2 by construction: per session, the
    /// archive's file header and the live file's 72-byte reference.
    archive_overhead: u64,
    converted: u64,
    /// Upstream's transcripts as written (raw or zstd, the root's encoding).
    upstream: u64,
    /// Upstream's raw transcripts of the same batches (a zstd root's frames'
    /// text).
    upstream_raw: u64,
}

fn measure(root: &str, compression: Compression) -> Totals {
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("src");
    copy_tree(&fixtures().join(root), &src_dir);
    let backend = Arc::new(JsonlBackend::open(&src_dir, compression).unwrap());
    let src = Store::with_backend(backend.clone(), StoreOptions::default());
    let (v1_dir, v2_dir, v3_dir, cli_dir) = (
        tmp.path().join("v1"),
        tmp.path().join("v2"),
        tmp.path().join("v3"),
        tmp.path().join("cli"),
    );
    let (v1, v2, v3) = (
        wal_store(&v1_dir, FORMAT_V1, false),
        wal_store(&v2_dir, FORMAT_V2, false),
        wal_store(&v3_dir, FORMAT_VERSION, false),
    );
    let mut t = Totals::default();
    let mut ids = Vec::new();
    let mut sources = Vec::new();
    let mut empty = Vec::new();
    for summary in src.list().unwrap() {
        let id = summary.id;
        // A session upstream's reader refuses too (garbage after a frame,
        // a Windows cwd) is not copied by convert either.
        let Ok(view) = src.view(&id) else { continue };
        if view.is_empty() {
            // A header and no event: nothing to compare.
            empty.push(id);
            continue;
        }
        sources.push((id.clone(), json_lines(&src.inspect(&id).unwrap().events)));
        assert_eq!(view.len(), view.stored(), "{root} {id}: every turn closed");
        copy(&src, &v1, &id);
        copy(&src, &v2, &id);
        copy(&src, &v3, &id);
        let path = backend.find_log(&id).unwrap().unwrap();
        let bytes = fs::read(&path).unwrap();
        t.upstream += bytes.len() as u64;
        t.upstream_raw += match compression {
            Compression::None => bytes.len(),
            Compression::Zstd => decompress_prefix(&bytes).len(),
        } as u64;
        t.events += view.len() as u64;
        t.v1 += log_len(&v1_dir, &id);
        t.v2_plain += log_len(&v2_dir, &id);
        t.archive_overhead += (format::FILE_HEADER_LEN
            + view.header().to_json().len()
            + format::ARCHIVE_REF_LEN) as u64;
        ids.push(id);
    }
    t.sessions = ids.len();
    assert!(t.sessions >= 5, "{root}: {} sessions", t.sessions);

    // The real convert (its writer seals at close) copies the same sessions.
    let from = format!("jsonl+{}:{}", compression.config_name(), src_dir.display());
    let to = cli_dir.to_str().unwrap();
    let out = turnwal(&["convert", "--from", &from, "--to", to], "");
    assert!(
        out.status == 0 || out.status == 2,
        "{root}: convert: {out:?}"
    );
    let cli = Store::open(&cli_dir).unwrap();
    let mut copied: Vec<String> = cli
        .list()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .filter(|id| !empty.contains(id))
        .collect();
    copied.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(
        copied, expected,
        "{root}: convert copies what the reader accepts"
    );

    // Compaction of the unsealed stores (version 2, and version 3, the
    // default), by the CLI, every session.
    drop((v2, v3));
    for dir in [&v2_dir, &v3_dir] {
        let out = turnwal(&["compact", "--all", "--store", dir.to_str().unwrap()], "");
        assert_eq!(out.status, 0, "{root}: compact: {out:?}");
    }

    let compact = Store::open(&v3_dir).unwrap();
    for (id, source) in &sources {
        for (what, store) in [("v1", &v1), ("compact", &compact), ("convert", &cli)] {
            assert_eq!(
                &json_lines(&store.read_raw(id, 0).unwrap()),
                source,
                "{root} {id}: {what} reads back the source's bytes"
            );
            assert_eq!(
                &json_lines(&store.load(id).unwrap().events),
                source,
                "{root} {id}: {what} loads the source's events"
            );
        }
        let (sealed, converted) = (log_len(&v3_dir, id), log_len(&cli_dir, id));
        // The writer's own seal at close and compaction give the same file
        // (but for the salt).
        assert_eq!(sealed, converted, "{root} {id}");
        t.compact += sealed;
        t.compact_v2 += log_len(&v2_dir, id);
        t.converted += converted;
    }
    let r = compact.verify_all_ok();
    assert!(r, "{root}: the compacted store verifies");
    t
}

/// `turnwal verify` of a whole store exits 0.
trait VerifyAll {
    fn verify_all_ok(&self) -> bool;
}

impl VerifyAll for Store {
    fn verify_all_ok(&self) -> bool {
        self.list()
            .unwrap()
            .iter()
            .all(|s| self.verify(&s.id).unwrap().exit_code() == 0)
    }
}

fn report(root: &str, t: &Totals) {
    let per = |b: u64| b as f64 / t.events as f64;
    println!(
        "{root}: {} sessions, {} events: compact v3 {} B ({:.1} B/event), compact v2 {} B ({:.1}), \
         v2 unsealed {} B ({:.1}), v1 {} B ({:.1}); upstream as written {} B ({:.1}), upstream \
         raw {} B ({:.1}); compact v3 / upstream raw {:.3}×, compact v2 / upstream raw {:.3}×, \
         compact v3 / upstream as written {:.3}×",
        t.sessions,
        t.events,
        t.compact,
        per(t.compact),
        t.compact_v2,
        per(t.compact_v2),
        t.v2_plain,
        per(t.v2_plain),
        t.v1,
        per(t.v1),
        t.upstream,
        per(t.upstream),
        t.upstream_raw,
        per(t.upstream_raw),
        t.compact as f64 / t.upstream_raw as f64,
        t.compact_v2 as f64 / t.upstream_raw as f64,
        t.compact as f64 / t.upstream as f64,
    );
}

#[test]
fn compact_upstream_sessions_read_back_and_beat_upstream_bytes() {
    let mut raw_all = (0u64, 0u64);
    let mut zstd_all = (0u64, 0u64);
    for (root, compression) in [
        ("none/after", Compression::None),
        ("none/random/after", Compression::None),
        ("zstd/after", Compression::Zstd),
        ("zstd/random/after", Compression::Zstd),
    ] {
        let t = measure(root, compression);
        report(root, &t);
        assert!(
            t.compact_v2 < t.v2_plain && t.v2_plain < t.v1,
            "{root}: compact {} < v2 unsealed {} < v1 {}",
            t.compact_v2,
            t.v2_plain,
            t.v1
        );
        assert_eq!(t.converted, t.compact, "{root}");
        // Version 3 holds the same units as version 2 (the same turns
        // sealed the same way), in a second file: exactly the archive's
        // header and the reference more per session. On these tiny
        // sessions (15 events each) that is a tenth of their bytes; on a
        // realistic session it is noise (docs/PERFORMANCE.md).
        assert_eq!(t.compact, t.compact_v2 + t.archive_overhead, "{root}");
        // Issue 16's targets, root by root, for the compact units: ≤ 0.5×
        // upstream's raw transcripts; ≤ upstream's zstd transcripts where
        // upstream wrote zstd.
        assert!(
            2 * t.compact_v2 <= t.upstream_raw,
            "{root}: compact {} > half of upstream raw {}",
            t.compact_v2,
            t.upstream_raw
        );
        raw_all.0 += t.compact_v2;
        raw_all.1 += t.upstream_raw;
        if compression == Compression::Zstd {
            assert!(
                t.compact_v2 <= t.upstream,
                "{root}: compact {} > upstream zstd {}",
                t.compact_v2,
                t.upstream
            );
            zstd_all.0 += t.compact_v2;
            zstd_all.1 += t.upstream;
        }
    }
    println!(
        "all roots: compact units (version 2) / upstream raw {:.3}× ({} / {} B); zstd roots: / upstream zstd {:.3}× ({} / {} B)",
        raw_all.0 as f64 / raw_all.1 as f64,
        raw_all.0,
        raw_all.1,
        zstd_all.0 as f64 / zstd_all.1 as f64,
        zstd_all.0,
        zstd_all.1,
    );
}
