//! Logs written by the real upstream code: tests/fixtures/upstream holds
//! JSONL roots (raw and zstd) that `generate.mjs` wrote with the published
//! `@deepseek-ai/dsh-session-persistence-jsonl` 0.1.0-rc.8 on Node 22, some
//! cut the way a crash cuts them, with what upstream's `inspect`, `readFrom`,
//! `readRaw` and `load` returned for each (`expected.json`), and the roots
//! after upstream's own `load` repaired them (`after/`).
//!
//! turnwal must return the same: the same header, the same events byte for
//! byte (chunk rows expanded, legacy shapes normalized, closers derived),
//! the same suffixes, the same decoded text; and its repair must leave the
//! same file (raw: byte-identical; zstd: the same frames' text).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use turnwal::backend::jsonl::records::decode_line;
use turnwal::backend::jsonl::zstd::{decompress_frame, scan_frames};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{Event, LogState, Policy, SessionHeader, Store, StoreOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn header_of(meta: &Value) -> SessionHeader {
    let s = |k: &str| meta.get(k).map(|v| v.as_str().unwrap().to_owned());
    let n = |k: &str| meta.get(k).map(|v| v.as_u64().unwrap());
    SessionHeader {
        version: meta["version"].as_i64().unwrap(),
        id: s("id").unwrap(),
        created_at: n("createdAt").unwrap(),
        cwd: s("cwd"),
        parent_session: s("parentSession"),
        seed_length: n("seedLength"),
        origin: s("origin"),
        delegation_depth: n("delegationDepth"),
        agent_preset: s("agentPreset"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn jsons(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

fn store(root: &Path, compression: Compression) -> Store {
    Store::with_backend(
        Arc::new(JsonlBackend::open(root, compression).unwrap()),
        StoreOptions {
            require_known_types: true,
            ..StoreOptions::default()
        },
    )
}

/// The decoded text of every complete frame.
fn plaintext(bytes: &[u8]) -> String {
    let scan = scan_frames(bytes, usize::MAX).unwrap();
    let mut out = Vec::new();
    for f in scan.frames {
        out.extend(decompress_frame(&bytes[f]).unwrap());
    }
    String::from_utf8(out).unwrap()
}

fn check(compression: Compression) {
    let dir = fixtures().join(compression.config_name());
    let expected: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let sessions = expected["sessions"].as_object().unwrap();
    assert_eq!(
        sessions.len(),
        if compression == Compression::None {
            5
        } else {
            4
        }
    );
    let tmp = tempfile::tempdir().unwrap();
    let before = tmp.path().join("before");
    copy_dir(&dir.join("before"), &before);
    let reader = store(&before, compression);
    let mut listed: Vec<String> = reader.list().unwrap().into_iter().map(|s| s.id).collect();
    listed.sort();
    let mut ids: Vec<String> = sessions.keys().cloned().collect();
    ids.sort();
    assert_eq!(listed, ids);

    for (id, want) in sessions {
        // inspect: the balanced view, closers in memory only.
        let view = reader.inspect(id).unwrap();
        assert_eq!(view.header, header_of(&want["inspect"]["meta"]), "{id}");
        assert_eq!(
            jsons(&view.events),
            strings(&want["inspect"]["events"]),
            "{id}"
        );
        // readFrom: the stored suffix, no closers.
        for (k, events) in want["readFrom"].as_object().unwrap() {
            let k: u64 = k.parse().unwrap();
            assert_eq!(
                jsons(&reader.read_from(id, k).unwrap()),
                strings(events),
                "{id} from {k}"
            );
        }
        // readRaw: the stored text (a torn zstd frame left out).
        let path = JsonlBackend::open(&before, compression)
            .unwrap()
            .find_log(id)
            .unwrap()
            .unwrap();
        let bytes = fs::read(&path).unwrap();
        let text = match compression {
            Compression::None => String::from_utf8(bytes).unwrap(),
            Compression::Zstd => plaintext(&bytes),
        };
        assert_eq!(text, want["readRaw"].as_str().unwrap(), "{id}");
    }
    drop(reader);

    // load: the same events, and the same repaired files.
    let writer = store(&before, compression);
    for (id, want) in sessions {
        let loaded = writer.load(id).unwrap();
        assert_eq!(loaded.header, header_of(&want["load"]["meta"]), "{id}");
        assert_eq!(
            jsons(&loaded.events),
            strings(&want["load"]["events"]),
            "{id}"
        );
    }
    drop(writer);
    let ours = files(&before);
    let theirs = files(&dir.join("after"));
    let rel = |p: &PathBuf, base: &Path| p.strip_prefix(base).unwrap().to_owned();
    let ours_logs: Vec<PathBuf> = ours
        .iter()
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".turnwal")
        })
        .map(|p| rel(p, &before))
        .collect();
    assert_eq!(
        ours_logs,
        theirs
            .iter()
            .map(|p| rel(p, &dir.join("after")))
            .collect::<Vec<_>>()
    );
    for log in &ours_logs {
        let (a, b) = (
            fs::read(before.join(log)).unwrap(),
            fs::read(dir.join("after").join(log)).unwrap(),
        );
        match compression {
            Compression::None => assert_eq!(
                String::from_utf8(a).unwrap(),
                String::from_utf8(b).unwrap(),
                "{}",
                log.display()
            ),
            Compression::Zstd => {
                assert_eq!(plaintext(&a), plaintext(&b), "{}", log.display());
                assert_eq!(
                    scan_frames(&a, usize::MAX).unwrap().frames.len(),
                    scan_frames(&b, usize::MAX).unwrap().frames.len()
                );
            }
        }
    }

    // Upstream's repaired roots read clean in turnwal.
    let after = tmp.path().join("after");
    copy_dir(&dir.join("after"), &after);
    let s = store(&after, compression);
    for (id, want) in sessions {
        let view = s.inspect(id).unwrap();
        assert_eq!(view.state, LogState::Clean, "{id}");
        assert_eq!(
            jsons(&view.events),
            strings(&want["load"]["events"]),
            "{id}"
        );
    }
}

#[test]
fn upstream_raw_root() {
    check(Compression::None);
}

#[test]
fn upstream_zstd_root() {
    check(Compression::Zstd);
}

/// Events read from an upstream-written file and appended in the same
/// batches (its frames) to a new root give the same text.
#[test]
fn upstream_zstd_frames_round_trip() {
    let dir = fixtures().join("zstd/before");
    let src = JsonlBackend::open(&dir, Compression::Zstd).unwrap();
    let id = "rich ~id/../ü";
    let path = src.find_log(id).unwrap().unwrap();
    let bytes = fs::read(&path).unwrap();
    let frames = scan_frames(&bytes, usize::MAX).unwrap().frames;
    let events = Store::with_backend(Arc::new(src), StoreOptions::default())
        .read_raw(id, 0)
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dst = store(tmp.path(), Compression::Zstd);
    let header = Store::with_backend(
        Arc::new(JsonlBackend::open(&dir, Compression::Zstd).unwrap()),
        StoreOptions::default(),
    )
    .inspect(id)
    .unwrap()
    .header;
    dst.create_with_policy(header.clone(), Policy::Lenient)
        .unwrap();
    let mut at = 0;
    for f in &frames[1..] {
        let n = String::from_utf8(decompress_frame(&bytes[f.clone()]).unwrap())
            .unwrap()
            .lines()
            .map(|l| decode_line(l.as_bytes()).unwrap().len())
            .sum::<usize>();
        dst.append(id, &events[at..at + n]).unwrap();
        at += n;
    }
    assert_eq!(at, events.len());
    let ours = fs::read(
        JsonlBackend::open(tmp.path(), Compression::Zstd)
            .unwrap()
            .find_log(id)
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plaintext(&ours), plaintext(&bytes));
    assert_eq!(
        scan_frames(&ours, usize::MAX).unwrap().frames.len(),
        frames.len()
    );
}

/// An upstream-written JSONL log copied JSONL → WAL → SQLite → JSONL keeps
/// every event byte for byte: the last copy, appended in the batches
/// upstream wrote, is the same file.
#[test]
fn jsonl_wal_sqlite_jsonl_chain() {
    let id = "rich ~id/../ü";
    let src_root = fixtures().join("none/before");
    let src = store(&src_root, Compression::None);
    let header = src.inspect(id).unwrap().header;
    let events = src.read_raw(id, 0).unwrap();
    assert_eq!(events.len(), 31);
    let tmp = tempfile::tempdir().unwrap();
    let wal = Store::open(tmp.path().join("wal")).unwrap();
    let sqlite = Store::open_sqlite(
        tmp.path().join("s.db"),
        turnwal::backend::sqlite::SqliteOptions::default(),
        StoreOptions::default(),
    )
    .unwrap();
    let mut carried = events.clone();
    for hop in [&wal, &sqlite] {
        hop.create_with_policy(header.clone(), Policy::Lenient)
            .unwrap();
        hop.append(id, &carried).unwrap();
        carried = hop.read_raw(id, 0).unwrap();
        assert_eq!(jsons(&carried), jsons(&events));
        assert_eq!(hop.inspect(id).unwrap().header, header);
    }
    let dst_root = tmp.path().join("jsonl");
    let dst = store(&dst_root, Compression::None);
    dst.create_with_policy(header, Policy::Lenient).unwrap();
    // upstream's batches (generate.mjs, richBatches).
    for range in [0..7, 7..20, 20..22, 22..31] {
        dst.append(id, &carried[range]).unwrap();
    }
    let find = |root: &Path| {
        JsonlBackend::open(root, Compression::None)
            .unwrap()
            .find_log(id)
            .unwrap()
            .unwrap()
    };
    assert_eq!(
        fs::read(find(&dst_root)).unwrap(),
        fs::read(find(&src_root)).unwrap()
    );
}
