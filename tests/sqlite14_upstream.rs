//! The published harness's older SQLite store (schema 14), as its own code
//! wrote it: tests/fixtures/upstream/sqlite14 holds a database written by
//! `@deepseek-ai/dsh-session-persistence-sqlite` 0.0.1-rc.1 on Node 22
//! (`generate.mjs`), one session with a damaged last row, and what that
//! build's `inspect` and `readFrom` returned. turnwal opens it read-only and
//! must return the same, leave every byte as it is, and refuse writes.

use std::fs;
use std::path::Path;

use serde_json::Value;
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::backend::sqlite::v14::Schema14Backend;
use turnwal::{Error, Event, LogState, Store, StoreOptions};

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/sqlite14")
}

fn jsons(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

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
