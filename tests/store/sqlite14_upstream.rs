//! The published harness's older SQLite store (schema 14), as its own code
//! wrote it: tests/fixtures/upstream/sqlite14 holds a database written by
//! `@deepseek-ai/dsh-session-persistence-sqlite` 0.0.1-rc.1 on Node 22
//! (`generate.mjs`), one session with a damaged last row, and what that
//! build's `inspect` and `readFrom` returned. turnwal opens it read-only and
//! must return the same, leave every byte as it is, and refuse writes.
//! `random.db` holds 30 random sessions written by the same build (seed
//! 0x7475727c, some damaged row by row) and `expected-random.json` what its
//! `inspect` and `readFrom` returned; turnwal must not differ on any. They
//! found two differences in `readFrom`, both fixed: upstream reads the rows
//! from `fromSeq` on and checks them alone (a bad row or gap before them is
//! not seen), and its `readFrom` takes any cwd (only `inspect` and `load`
//! refuse a relative one).

use crate::support;

use std::fs;
use std::path::Path;

use serde_json::Value;
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::backend::sqlite::v14::Schema14Backend;
use turnwal::{Error, Event, LogState, Store, StoreOptions};

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/sqlite14")
}

use support::jsons;

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn schema_14_reads_as_upstream_does() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("sessions.db");
    fs::copy(fixture().join("sessions.db"), &db).unwrap();
    let before = fs::read(&db).unwrap();
    let expected: Value =
        serde_json::from_str(&fs::read_to_string(fixture().join("expected.json")).unwrap())
            .unwrap();
    let store = Store::open_sqlite(&db, SqliteOptions::default(), StoreOptions::default()).unwrap();
    let mut ids: Vec<(String, u64, LogState)> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|s| (s.id, s.events, s.state))
        .collect();
    ids.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ids,
        [
            ("open-turn".into(), 10, LogState::OpenTurn),
            ("rich".into(), 31, LogState::Clean),
            ("torn".into(), 8, LogState::Torn),
        ]
    );
    for (id, want) in expected["sessions"].as_object().unwrap() {
        let view = store.inspect(id).unwrap();
        assert_eq!(
            jsons(&view.events),
            strings(&want["inspect"]["events"]),
            "{id}"
        );
        let meta = &want["inspect"]["meta"];
        assert_eq!(view.header.id, meta["id"].as_str().unwrap());
        assert_eq!(view.header.cwd.as_deref(), meta["cwd"].as_str());
        assert_eq!(
            view.header.delegation_depth,
            meta["delegationDepth"].as_u64()
        );
        assert_eq!(
            view.header.agent_preset.as_deref(),
            meta["agentPreset"].as_str()
        );
        for (k, events) in want["readFrom"].as_object().unwrap() {
            let k: u64 = k.parse().unwrap();
            assert_eq!(
                jsons(&store.read_from(id, k).unwrap()),
                strings(events),
                "{id} {k}"
            );
        }
        assert_eq!(store.verify(id).unwrap().state, view.state);
    }
    let torn = store.inspect("torn").unwrap();
    let cut = torn.cut.unwrap();
    assert_eq!((cut.seq, cut.offset, cut.len), (8, 8, 1));
    assert!(
        cut.detail
            .starts_with("corrupt session log: unparsable committed event at seq 8 ("),
        "{}",
        cut.detail
    );
    // Writes are refused, naming the way out; nothing changes.
    let refusal = |r: turnwal::Result<turnwal::SessionView>| match r {
        Err(Error::Unsupported { path, detail }) => {
            assert_eq!(path, db);
            assert!(detail.contains("schema-14"), "{detail}");
        }
        other => panic!("{other:?}"),
    };
    refusal(store.load("rich"));
    refusal(store.load("torn"));
    store.create(turnwal::SessionHeader::new("new", 1)).unwrap();
    assert!(matches!(
        store.append(
            "new",
            &[Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap()]
        ),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        store.delete("rich"),
        Err(Error::Unsupported { .. })
    ));
    drop(store);
    assert_eq!(
        fs::read(&db).unwrap(),
        before,
        "read-only: not a byte changed"
    );
    assert!(Schema14Backend::open(&db).is_ok());
}

/// Converting a schema-14 store: every event's bytes, the header with its
/// lineage, into a schema-17 database and a JSONL root.
#[test]
fn schema_14_converts_losslessly() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("old.db");
    fs::copy(fixture().join("sessions.db"), &db).unwrap();
    let src = Store::open_sqlite(&db, SqliteOptions::default(), StoreOptions::default()).unwrap();
    let view = src.inspect("rich").unwrap();
    for dst in [
        Store::open_sqlite(
            tmp.path().join("new.db"),
            SqliteOptions::default(),
            StoreOptions::default(),
        )
        .unwrap(),
        Store::with_backend(
            std::sync::Arc::new(
                turnwal::backend::jsonl::JsonlBackend::open(
                    tmp.path().join("jsonl"),
                    turnwal::backend::jsonl::Compression::Zstd,
                )
                .unwrap(),
            ),
            StoreOptions::default(),
        ),
    ] {
        dst.create_with_policy(view.header.clone(), turnwal::Policy::Lenient)
            .unwrap();
        dst.append("rich", &view.events).unwrap();
        let copy = dst.inspect("rich").unwrap();
        assert_eq!(jsons(&copy.events), jsons(&view.events));
        assert_eq!(copy.header, view.header);
    }
}

/// A recorded event list, or a slice of another (`{"slice", "start", "end"}`,
/// see `compactRecord` in generate.mjs) expanded back.
fn unslice(list: &Value, record: &Value) -> Vec<String> {
    let Some(name) = list.get("slice") else {
        return strings(list);
    };
    let base = match name.as_str().unwrap() {
        "inspect" => strings(&record["inspect"]["events"]),
        "readFrom/0" => unslice(&record["readFrom"]["0"], record),
        other => panic!("slice of {other}"),
    };
    let at = |k: &str| list[k].as_u64().unwrap() as usize;
    base[at("start")..at("end")].to_vec()
}

/// Upstream's random schema-14 sessions (generate.mjs, "Random schema-14
/// sessions"): written through `@deepseek-ai/dsh-session-persistence-sqlite`
/// 0.0.1-rc.1, some damaged row by row; turnwal must give upstream's header,
/// inspect events byte for byte and readFrom suffixes, and refuse where
/// upstream throws.
#[test]
fn schema_14_random_sessions_read_as_upstream_does() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("random.db");
    fs::copy(fixture().join("random.db"), &db).unwrap();
    let before = fs::read(&db).unwrap();
    let all: Value =
        serde_json::from_str(&fs::read_to_string(fixture().join("expected-random.json")).unwrap())
            .unwrap();
    let sessions = all["sessions"].as_object().unwrap();
    assert_eq!(sessions.len() as u64, all["count"].as_u64().unwrap());
    // The data still holds what it is for: damaged sessions, and sessions
    // upstream refuses.
    assert!(sessions.values().filter(|r| !r["damage"].is_null()).count() >= 8);
    assert!(
        sessions
            .values()
            .filter(|r| r.get("error").is_some())
            .count()
            >= 4
    );

    let store = Store::open_sqlite(&db, SqliteOptions::default(), StoreOptions::default()).unwrap();
    let mut listed: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    listed.sort();
    let mut ids: Vec<String> = sessions.keys().cloned().collect();
    ids.sort();
    assert_eq!(listed, ids);

    let mut found: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (id, want) in sessions {
        let mut differ = |what: String| found.entry(id.clone()).or_default().push(what);
        match (store.inspect(id), want.get("error")) {
            (Ok(view), None) => {
                let meta = &want["inspect"]["meta"];
                let header = turnwal::SessionHeader::from_json(&meta.to_string()).unwrap();
                if view.header != header {
                    differ(format!(
                        "header: upstream {meta}, turnwal {:?}",
                        view.header
                    ));
                }
                let theirs = strings(&want["inspect"]["events"]);
                let ours = jsons(&view.events);
                if ours != theirs {
                    let at = ours.iter().zip(&theirs).position(|(a, b)| a != b);
                    differ(format!(
                        "inspect: upstream {} events, turnwal {}; first difference at {at:?}",
                        theirs.len(),
                        ours.len()
                    ));
                }
            }
            (Err(_), Some(_)) => {}
            (Ok(view), Some(msg)) => differ(format!(
                "inspect: upstream throws {msg}, turnwal reads {} events",
                view.events.len()
            )),
            (Err(e), None) => differ(format!("inspect: upstream reads, turnwal refuses: {e}")),
        }
        let suffixes = want.get("readFrom").and_then(Value::as_object);
        for (k, list) in suffixes.into_iter().flatten() {
            let theirs = unslice(list, want);
            match store.read_from(id, k.parse().unwrap()) {
                Ok(events) if jsons(&events) == theirs => {}
                Ok(events) => differ(format!(
                    "readFrom({k}): upstream {} events, turnwal {}",
                    theirs.len(),
                    events.len()
                )),
                Err(e) => differ(format!(
                    "readFrom({k}): upstream {} events, turnwal refuses: {e}",
                    theirs.len()
                )),
            }
        }
        let errors = want.get("readFromError").and_then(Value::as_object);
        for (k, msg) in errors.into_iter().flatten() {
            if let Ok(events) = store.read_from(id, k.parse().unwrap()) {
                differ(format!(
                    "readFrom({k}): upstream throws {msg}, turnwal reads {} events",
                    events.len()
                ));
            }
        }
    }
    drop(store);
    assert_eq!(fs::read(&db).unwrap(), before, "read-only");
    for (id, what) in &found {
        for w in what {
            println!("{id}: {w}");
        }
    }
    let diverging: Vec<&str> = found.keys().map(String::as_str).collect();
    assert!(
        diverging.is_empty(),
        "turnwal and upstream differ on these sessions (printed above): {diverging:?}"
    );
}
