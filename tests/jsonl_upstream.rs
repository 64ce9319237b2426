//! Logs written by the real upstream code: tests/fixtures/upstream holds
//! JSONL roots (raw and zstd) that `generate.mjs` wrote with the published
//! `@deepseek-ai/dsh-session-persistence-jsonl` 0.1.0-rc.8 on Node 22, some
//! cut the way a crash cuts them, with what upstream's `inspect`, `readFrom`,
//! `readRaw` and `load` returned for each (`expected.json`), and the roots
//! after upstream's own `load` repaired them (`after/`). One session holds
//! lone UTF-16 surrogates in its id, cwd, parent and preset; its record is
//! `expected-lone.json`, its strings kept as JSON text.
//!
//! turnwal must return the same: the same header, the same events byte for
//! byte (chunk rows expanded, legacy shapes normalized, closers derived),
//! the same suffixes, the same decoded text; and its repair must leave the
//! same file (raw: byte-identical; zstd: the same frames' text).

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use support::copy_tree;
use turnwal::backend::jsonl::records::decode_line;
use turnwal::backend::jsonl::zstd::{decompress_frame, scan_frames};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{Event, LogState, Policy, SessionHeader, Store, StoreOptions, jsstr};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream")
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

/// The header upstream returned: an object, or (for the lone-surrogate
/// session, which serde_json cannot hold as a value) its JSON text.
fn header_of(meta: &Value) -> SessionHeader {
    match meta {
        Value::String(text) => SessionHeader::from_json(text).unwrap(),
        object => SessionHeader::from_json(&object.to_string()).unwrap(),
    }
}

/// Every recorded session of an encoding's fixture: `expected.json`'s, and
/// the one of `expected-lone.json` (lone UTF-16 surrogates in its id, cwd,
/// parent and preset), whose id is recorded as its JSON text.
fn recorded(dir: &Path) -> Vec<(String, Value)> {
    let read = |name: &str| -> Value {
        serde_json::from_str(&fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    };
    let mut out: Vec<(String, Value)> = read("expected.json")["sessions"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, want)| (id.clone(), want.clone()))
        .collect();
    let lone = read("expected-lone.json");
    out.push((
        jsstr::from_json(lone["id"].as_str().unwrap()).unwrap(),
        lone,
    ));
    out
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
    let sessions = recorded(&dir);
    assert_eq!(
        sessions.len(),
        if compression == Compression::None {
            6
        } else {
            5
        }
    );
    let tmp = tempfile::tempdir().unwrap();
    let before = tmp.path().join("before");
    copy_tree(&dir.join("before"), &before);
    let reader = store(&before, compression);
    let mut listed: Vec<String> = reader.list().unwrap().into_iter().map(|s| s.id).collect();
    listed.sort();
    let mut ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    ids.sort();
    assert_eq!(listed, ids);

    for (id, want) in &sessions {
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
        if let Some(rel) = want.get("path") {
            // Upstream's own path: `~D800` for a lone surrogate.
            assert_eq!(
                path.strip_prefix(&before).unwrap(),
                Path::new(rel.as_str().unwrap())
            );
        }
    }
    drop(reader);

    // load: the same events, and the same repaired files.
    let writer = store(&before, compression);
    for (id, want) in &sessions {
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
    copy_tree(&dir.join("after"), &after);
    let s = store(&after, compression);
    for (id, want) in &sessions {
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

/// The upstream-written session whose id, cwd, parent and preset hold lone
/// UTF-16 surrogates keeps them exact through the WAL and back to JSONL,
/// where upstream's path (`~D800`) and header bytes come out again; SQLite,
/// whose TEXT cannot hold them, refuses the session and names the field.
#[test]
fn lone_surrogates_in_header_strings_survive_wal_and_jsonl() {
    for compression in [Compression::None, Compression::Zstd] {
        let fixture = fixtures().join(compression.config_name());
        let lone: Value =
            serde_json::from_str(&fs::read_to_string(fixture.join("expected-lone.json")).unwrap())
                .unwrap();
        let id = jsstr::from_json(lone["id"].as_str().unwrap()).unwrap();
        let units: Vec<u16> = "lone"
            .encode_utf16()
            .chain([0xD800])
            .chain("id".encode_utf16())
            .collect();
        assert_eq!(jsstr::to_utf16(&id), units);
        let src_root = fixture.join("after");
        let src = store(&src_root, compression);
        let header = src.inspect(&id).unwrap().header;
        assert_eq!(header, header_of(&lone["load"]["meta"]));
        assert_eq!(
            jsstr::display(header.cwd.as_deref().unwrap()),
            r"/work/\udc00dir"
        );
        let events = src.read_raw(&id, 0).unwrap();
        assert_eq!(events.len(), 14);

        let tmp = tempfile::tempdir().unwrap();
        let wal = Store::open(tmp.path().join("wal")).unwrap();
        wal.create(header.clone()).unwrap();
        wal.append(&id, &events).unwrap();
        drop(wal);
        // A fresh store: the header comes back from the WAL file.
        let wal = Store::open(tmp.path().join("wal")).unwrap();
        assert_eq!(wal.header(&id).unwrap(), header);
        assert_eq!(jsons(&wal.read_raw(&id, 0).unwrap()), jsons(&events));
        let listed = wal.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, id);
        assert!(
            tmp.path()
                .join("wal/sessions/lone~ED~A0~80id.twal")
                .exists()
        );

        let sqlite = Store::open_sqlite(
            tmp.path().join("s.db"),
            turnwal::backend::sqlite::SqliteOptions::default(),
            StoreOptions::default(),
        )
        .unwrap();
        let err = sqlite.create(header.clone()).unwrap_err();
        assert!(matches!(err, turnwal::Error::Unsupported { .. }), "{err:?}");
        assert!(
            err.to_string().contains(
                r#"session header field id "lone\ud800id" holds a lone UTF-16 surrogate"#
            ),
            "{err}"
        );
        assert!(sqlite.list().unwrap().is_empty());

        // Back to JSONL in upstream's batches (generate.mjs, openTurnBatches,
        // then upstream's repair): the same path and the same text.
        let dst_root = tmp.path().join("jsonl");
        let dst = store(&dst_root, compression);
        dst.create(header).unwrap();
        let carried = wal.read_raw(&id, 0).unwrap();
        for range in [0..6, 6..10, 10..14] {
            dst.append(&id, &carried[range]).unwrap();
        }
        let find = |root: &Path| {
            JsonlBackend::open(root, compression)
                .unwrap()
                .find_log(&id)
                .unwrap()
                .unwrap()
        };
        let (ours, theirs) = (find(&dst_root), find(&src_root));
        assert_eq!(
            ours.strip_prefix(&dst_root).unwrap(),
            theirs.strip_prefix(&src_root).unwrap()
        );
        let (ours, theirs) = (fs::read(ours).unwrap(), fs::read(theirs).unwrap());
        match compression {
            Compression::None => assert_eq!(ours, theirs),
            Compression::Zstd => assert_eq!(plaintext(&ours), plaintext(&theirs)),
        }
    }
}
