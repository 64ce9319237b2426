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
//!
//! The random section (`upstream_random_roots`): `<enc>/random/before/` holds
//! 40 sessions per encoding that generate.mjs drew from a fixed-seed PRNG
//! (random batches splitting chunk runs, text/reasoning/tool-call delta runs
//! of 1..40 with run breaks, tool calls with and without `tool/call` and
//! results, ignorable plugin events, unicode and lone surrogates in texts,
//! open final turns, optional cwd/lineage fields), many cut inside their
//! last batch or frame and some with garbage appended; `<enc>/random/after/`
//! is that root after upstream's load, and `<enc>/expected-random.json`
//! what upstream returned, each operation apart: where upstream threw
//! (`error` for inspect, `readFromError`, `readRawError`, `loadError`)
//! turnwal must refuse too. The same comparison (`compare`) runs over both,
//! and no session may differ. It found three differences, all fixed: an
//! open turn's `tool/result` without a logged `tool/call` (upstream keeps
//! every decoded event of a tail; turnwal cut it as debris), a Windows cwd
//! (upstream on POSIX refuses it), and a relative cwd (upstream's `readFrom`
//! reads such a log; only `inspect` and `load` refuse it).

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use support::copy_tree;
use turnwal::backend::jsonl::records::decode_line;
use turnwal::backend::jsonl::zstd::{decompress_frame, scan_frames};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{LogState, Policy, SessionHeader, Store, StoreOptions, jsstr};

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

use support::jsons;

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
    String::from_utf8(zstd_text(bytes).unwrap().into_bytes()).unwrap()
}

/// What upstream's `readRaw` reads from a zstd log: every complete frame
/// decoded (a torn final frame left out), as UTF-8 decoded lossily like
/// Node's `Buffer.toString`; or why the frames do not read.
fn zstd_text(bytes: &[u8]) -> Result<String, String> {
    let scan = scan_frames(bytes, usize::MAX).map_err(|e| format!("{e:?}"))?;
    if scan.frames.is_empty() {
        return Err("no complete frame".into());
    }
    let mut out = Vec::new();
    for f in scan.frames {
        out.extend(decompress_frame(&bytes[f])?);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The stored text of a log as upstream's `readRaw` returns it: raw, the
/// bytes decoded lossily (Node's `Buffer.toString`); zstd, [`zstd_text`].
fn raw_text(bytes: &[u8], compression: Compression) -> Result<String, String> {
    match compression {
        Compression::None => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Compression::Zstd => zstd_text(bytes),
    }
}

/// One fixture root as upstream left it: `before` (as written, some logs
/// damaged), `after` (the same after upstream's `load` repaired it), and
/// what upstream returned for each session.
struct Recorded {
    compression: Compression,
    before: PathBuf,
    after: PathBuf,
    /// (id, record): `inspect`, `readFrom`, `readRaw`, `load`; where upstream
    /// threw, `error` (inspect), `readFromError`, `readRawError`, `loadError`.
    sessions: Vec<(String, Value)>,
}

/// Where two event lists first differ, or `None` when they are equal.
fn list_diff(ours: &[String], theirs: &[String]) -> Option<String> {
    if ours == theirs {
        return None;
    }
    let at = ours.iter().zip(theirs).take_while(|(a, b)| a == b).count();
    Some(format!(
        "{} events vs upstream's {}; first difference at index {at}: turnwal {:?}, upstream {:?}",
        ours.len(),
        theirs.len(),
        ours.get(at),
        theirs.get(at)
    ))
}

/// The differences found for each session: what turnwal does that upstream
/// does not, one line each.
type Differences = std::collections::BTreeMap<String, Vec<String>>;

/// turnwal over a copy of `fixture.before` returns what upstream returned,
/// refuses what upstream refused, and its repair leaves the files upstream's
/// left (raw: byte-identical; zstd: the same frames' text; refused: both
/// untouched); upstream's repaired root then reads clean. Returns every
/// difference, by session.
fn compare(fixture: &Recorded) -> Differences {
    let Recorded {
        compression,
        before: src_before,
        after: src_after,
        sessions,
    } = fixture;
    let compression = *compression;
    let mut found = Differences::new();
    let mut differ = |id: &str, what: String| found.entry(id.to_owned()).or_default().push(what);
    let tmp = tempfile::tempdir().unwrap();
    let before = tmp.path().join("before");
    copy_tree(src_before, &before);
    let reader = store(&before, compression);
    let mut listed: Vec<String> = reader.list().unwrap().into_iter().map(|s| s.id).collect();
    listed.sort();
    let mut ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    ids.sort();
    assert_eq!(listed, ids);

    // Each session's log, relative to its root.
    let logs_of: Vec<PathBuf> = sessions
        .iter()
        .map(|(id, _)| {
            let path = JsonlBackend::open(&before, compression)
                .unwrap()
                .find_log(id)
                .unwrap()
                .unwrap();
            path.strip_prefix(&before).unwrap().to_owned()
        })
        .collect();
    let refused = |want: &Value| want.get("load").is_none();
    for ((id, want), log) in sessions.iter().zip(&logs_of) {
        // inspect: the balanced view, closers in memory only.
        match (want.get("inspect"), reader.inspect(id)) {
            (Some(inspect), Ok(view)) => {
                if view.header != header_of(&inspect["meta"]) {
                    differ(id, format!("inspect header {:?}", view.header));
                }
                if let Some(d) = list_diff(&jsons(&view.events), &strings(&inspect["events"])) {
                    differ(id, format!("inspect: {d}"));
                }
            }
            (Some(_), Err(e)) => differ(id, format!("inspect refuses: {e}")),
            (None, Ok(_)) => differ(
                id,
                format!("inspect reads what upstream refuses: {}", want["error"]),
            ),
            (None, Err(_)) => {}
        }
        // readFrom: the stored suffix, no closers.
        match want.get("readFrom") {
            Some(suffixes) => {
                for (k, events) in suffixes.as_object().unwrap() {
                    let k: u64 = k.parse().unwrap();
                    match reader.read_from(id, k) {
                        Ok(ours) => {
                            if let Some(d) = list_diff(&jsons(&ours), &strings(events)) {
                                differ(id, format!("readFrom {k}: {d}"));
                            }
                        }
                        Err(e) => differ(id, format!("readFrom {k} refuses: {e}")),
                    }
                }
            }
            None => {
                if reader.read_from(id, 0).is_ok() {
                    differ(
                        id,
                        format!(
                            "readFrom reads what upstream refuses: {}",
                            want["readFromError"]
                        ),
                    );
                }
            }
        }
        // readRaw: the stored text (a torn zstd frame left out).
        let path = before.join(log);
        let text = raw_text(&fs::read(&path).unwrap(), compression);
        match (want.get("readRaw"), text) {
            (Some(raw), Ok(text)) => {
                if text != raw.as_str().unwrap() {
                    differ(id, "readRaw: another text".into());
                }
            }
            (Some(_), Err(e)) => differ(id, format!("readRaw refuses: {e}")),
            (None, Ok(_)) => differ(
                id,
                format!(
                    "readRaw reads what upstream refuses: {}",
                    want["readRawError"]
                ),
            ),
            (None, Err(_)) => {}
        }
        if let Some(rel) = want.get("path") {
            // Upstream's own path: `~D800` for a lone surrogate.
            assert_eq!(log, Path::new(rel.as_str().unwrap()));
        }
    }
    drop(reader);

    // load: the same events, and the same repaired files.
    let writer = store(&before, compression);
    for (id, want) in sessions {
        match (want.get("load"), writer.load(id)) {
            (Some(load), Ok(loaded)) => {
                if loaded.header != header_of(&load["meta"]) {
                    differ(id, format!("load header {:?}", loaded.header));
                }
                if let Some(d) = list_diff(&jsons(&loaded.events), &strings(&load["events"])) {
                    differ(id, format!("load: {d}"));
                }
            }
            (Some(_), Err(e)) => differ(id, format!("load refuses: {e}")),
            (None, Ok(_)) => differ(
                id,
                format!("load reads what upstream refuses: {}", want["loadError"]),
            ),
            (None, Err(_)) => {}
        }
    }
    drop(writer);
    let logs = |root: &Path| -> Vec<PathBuf> {
        files(root)
            .iter()
            .filter(|p| {
                // turnwal's locks, and the quarantine of what repairs cut
                // (a directory upstream never enters).
                !p.components()
                    .any(|c| c.as_os_str().to_string_lossy().starts_with(".turnwal"))
            })
            .map(|p| p.strip_prefix(root).unwrap().to_owned())
            .collect()
    };
    let mut expected_logs = logs_of.clone();
    expected_logs.sort();
    assert_eq!(logs(&before), expected_logs);
    assert_eq!(logs(src_after), expected_logs);
    for ((id, want), log) in sessions.iter().zip(&logs_of) {
        let (a, b) = (
            fs::read(before.join(log)).unwrap(),
            fs::read(src_after.join(log)).unwrap(),
        );
        let same = if refused(want) {
            // Refused by both: neither repaired it.
            a == b
        } else {
            match compression {
                Compression::None => a == b,
                Compression::Zstd => match (zstd_text(&a), zstd_text(&b)) {
                    (Ok(x), Ok(y)) => {
                        let frames = |bytes: &[u8]| {
                            scan_frames(bytes, usize::MAX).map(|s| s.frames.len()).ok()
                        };
                        x == y && frames(&a) == frames(&b)
                    }
                    _ => false,
                },
            }
        };
        if !same {
            differ(
                id,
                format!(
                    "repaired file {}: {} bytes vs upstream's {}",
                    log.display(),
                    a.len(),
                    b.len()
                ),
            );
        }
    }

    // Upstream's repaired roots read clean in turnwal.
    let after = tmp.path().join("after");
    copy_tree(src_after, &after);
    let s = store(&after, compression);
    for (id, want) in sessions {
        match (want.get("load"), s.inspect(id)) {
            (Some(load), Ok(view)) => {
                if view.state != LogState::Clean {
                    differ(
                        id,
                        format!("upstream's repaired log reads {:?}", view.state),
                    );
                }
                if let Some(d) = list_diff(&jsons(&view.events), &strings(&load["events"])) {
                    differ(id, format!("upstream's repaired log: {d}"));
                }
            }
            (Some(_), Err(e)) => differ(id, format!("upstream's repaired log refused: {e}")),
            (None, Ok(_)) => differ(id, "upstream's unrepaired log reads".into()),
            (None, Err(_)) => {}
        }
    }
    found
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
    let found = compare(&Recorded {
        compression,
        before: dir.join("before"),
        after: dir.join("after"),
        sessions,
    });
    assert!(found.is_empty(), "{found:#?}");
}

/// The random sessions of `expected-random.json`, each event list written
/// as a slice of another (`{"slice", "start", "end"}`) expanded back.
fn recorded_random(dir: &Path) -> Vec<(String, Value)> {
    let all: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("expected-random.json")).unwrap())
            .unwrap();
    fn unslice(list: &Value, record: &Value) -> Value {
        let Some(name) = list.get("slice") else {
            return list.clone();
        };
        let base = match name.as_str().unwrap() {
            "inspect" => record["inspect"]["events"].clone(),
            "readFrom/0" => unslice(&record["readFrom"]["0"], record),
            other => panic!("slice of {other}"),
        };
        let at = |k: &str| list[k].as_u64().unwrap() as usize;
        Value::Array(base.as_array().unwrap()[at("start")..at("end")].to_vec())
    }
    let sessions = all["sessions"].as_object().unwrap();
    assert_eq!(sessions.len() as u64, all["count"].as_u64().unwrap());
    sessions
        .iter()
        .map(|(id, record)| {
            let mut out = record.clone();
            if let Some(suffixes) = record.get("readFrom") {
                for (k, list) in suffixes.as_object().unwrap() {
                    out["readFrom"][k] = unslice(list, record);
                }
            }
            if let Some(load) = record.get("load") {
                out["load"]["events"] = unslice(&load["events"], record);
            }
            (id.clone(), out)
        })
        .collect()
}

/// Upstream's random sessions (generate.mjs, "Random sessions"): the same
/// comparison as `check`, over `<enc>/random/`.
#[test]
fn upstream_random_roots() {
    let mut all = Differences::new();
    for compression in [Compression::None, Compression::Zstd] {
        let dir = fixtures().join(compression.config_name());
        let sessions = recorded_random(&dir);
        // The data still holds what it is for: damaged logs, and logs
        // upstream refuses.
        let damaged = sessions.iter().filter(|(_, r)| !r["damage"].is_null());
        assert!(damaged.count() >= 10);
        let refused = sessions.iter().filter(|(_, r)| r.get("load").is_none());
        assert!(refused.count() >= 2);
        let random = dir.join("random");
        let found = compare(&Recorded {
            compression,
            before: random.join("before"),
            after: random.join("after"),
            sessions,
        });
        for (id, what) in found {
            all.insert(format!("{} {id}", compression.config_name()), what);
        }
    }
    for (id, what) in &all {
        for w in what {
            println!("{id}: {w}");
        }
    }
    let diverging: Vec<&str> = all.keys().map(String::as_str).collect();
    assert!(
        diverging.is_empty(),
        "turnwal and upstream differ on these sessions (printed above): {diverging:?}"
    );
}

/// Every random session upstream loads migrates: copied into a native WAL
/// store (its header and policy, its stored events in one batch) and read
/// back, it gives upstream's loaded events byte for byte; the sessions
/// upstream refuses are refused by turnwal's reader before anything is
/// copied.
#[test]
fn upstream_random_sessions_migrate_to_the_wal() {
    let mut copied = 0;
    for compression in [Compression::None, Compression::Zstd] {
        let dir = fixtures().join(compression.config_name());
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("after");
        copy_tree(&dir.join("random/after"), &root);
        let src = store(&root, compression);
        let wal = Store::open(tmp.path().join("wal")).unwrap();
        for (id, want) in recorded_random(&dir) {
            let Some(load) = want.get("load") else {
                assert!(src.inspect(&id).is_err(), "{compression:?} {id}");
                continue;
            };
            let scan = src.backend().scan(&id).unwrap().unwrap();
            wal.create_with_policy(scan.header.clone(), scan.policy)
                .unwrap();
            let stored = src.read_raw(&id, 0).unwrap();
            if stored.is_empty() {
                // A header alone: nothing to materialize (lazily, as upstream).
                assert!(strings(&load["events"]).is_empty(), "{id}");
                continue;
            }
            wal.append(&id, &stored).unwrap();
            assert_eq!(
                jsons(&wal.read_raw(&id, 0).unwrap()),
                jsons(&stored),
                "{id}"
            );
            let back = Store::open(tmp.path().join("wal")).unwrap();
            assert_eq!(back.header(&id).unwrap(), header_of(&load["meta"]), "{id}");
            assert_eq!(
                jsons(&back.inspect(&id).unwrap().events),
                strings(&load["events"]),
                "{compression:?} {id}"
            );
            copied += 1;
        }
    }
    // Of the 38 raw and 31 zstd sessions upstream loads, two are a header
    // alone.
    assert_eq!(copied, 67);
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
