//! `turnwal convert` between every pair of backends: WAL, SQLite (schema 14
//! read-only as a source, schema 17), JSONL raw and JSONL zstd. The source
//! sessions are the upstream schema-14 fixture (a rich session with packed
//! runs, a lone surrogate escape and a lineage header; a crashed open turn;
//! a torn tail), copied into each kind of store first. Every copy must keep
//! the ids, the headers (lineage included) and every event's bytes of the
//! source's inspect view (committed log plus closers).

use crate::support;

use std::path::{Path, PathBuf};

use std::sync::Arc;

use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::{SessionHeader, Store, StoreOptions};

const IDS: [&str; 3] = ["open-turn", "rich", "torn"];

fn turnwal(args: &[&str]) -> (i32, String, String) {
    let out = crate::support::native(env!("CARGO_BIN_EXE_turnwal"))
        .args(args)
        .env_remove("TURNWAL_STORE")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A store location: the `--store` text and how the library opens it.
#[derive(Clone)]
struct Loc {
    spec: String,
    kind: &'static str,
    path: PathBuf,
}

impl Loc {
    fn new(dir: &Path, kind: &'static str, name: &str) -> Loc {
        let path = dir.join(name);
        let spec = match kind {
            "jsonl-none" => format!("jsonl+none:{}", path.display()),
            "jsonl-zstd" => format!("jsonl+zstd:{}", path.display()),
            _ => path.display().to_string(),
        };
        Loc { spec, kind, path }
    }

    fn open(&self) -> Store {
        let options = StoreOptions::default();
        match self.kind {
            "wal" => Store::open_with_options(&self.path, options).unwrap(),
            "sqlite14" | "sqlite17" => {
                Store::open_sqlite(&self.path, SqliteOptions::default(), options).unwrap()
            }
            "jsonl-none" => Store::with_backend(
                Arc::new(JsonlBackend::open(&self.path, Compression::None).unwrap()),
                options,
            ),
            "jsonl-zstd" => Store::with_backend(
                Arc::new(JsonlBackend::open(&self.path, Compression::Zstd).unwrap()),
                options,
            ),
            other => unreachable!("{other}"),
        }
    }
}

fn convert(from: &Loc, to: &Loc) -> String {
    let (code, out, err) = turnwal(&["convert", "--from", &from.spec, "--to", &to.spec]);
    assert_eq!(code, 0, "{} -> {}: {out}{err}", from.kind, to.kind);
    out + &err
}

/// A header as every backend can hold it: JSONL always stores
/// `delegationDepth`, so an absent one reads back as 0 there.
fn comparable(mut h: SessionHeader) -> SessionHeader {
    h.delegation_depth.get_or_insert(0);
    h
}

use support::jsons;

#[test]
fn every_pair_keeps_ids_headers_and_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/sqlite14/sessions.db");
    let src14 = Loc::new(tmp.path(), "sqlite14", "src14.db");
    std::fs::copy(&fixture, &src14.path).unwrap();
    let reference: Vec<(SessionHeader, Vec<String>)> = {
        let s = src14.open();
        IDS.iter()
            .map(|id| {
                let v = s.inspect(id).unwrap();
                (comparable(v.header), jsons(&v.events))
            })
            .collect()
    };
    assert_eq!(reference[1].0.parent_session.as_deref(), Some("parent-1"));
    assert_eq!(reference[0].1.len(), 14, "open turn: 10 stored + 4 closers");
    assert_eq!(reference[2].1.len(), 10, "torn: 8 kept + 2 closers");

    // The first hop says what it added and what it left behind.
    let kinds = ["wal", "sqlite17", "jsonl-none", "jsonl-zstd"];
    let mut sources = vec![src14.clone()];
    for kind in kinds {
        let loc = Loc::new(
            tmp.path(),
            kind,
            &format!("src-{kind}{}", if kind == "sqlite17" { ".db" } else { "" }),
        );
        let said = convert(&src14, &loc);
        assert!(
            said.contains(
                "open-turn: copied 14 events (source open-turn: 10 stored + 4 closers added"
            ),
            "{said}"
        );
        assert!(
            said.contains("torn: copied 10 events (source torn: 8 stored + 2 closers added"),
            "{said}"
        );
        assert!(
            said.contains("not copied: 1 byte at byte 8 (seq 8)"),
            "{said}"
        );
        sources.push(loc);
    }
    for from in &sources {
        for kind in kinds {
            let to = Loc::new(
                tmp.path(),
                kind,
                &format!(
                    "{}-to-{kind}{}",
                    from.kind,
                    if kind == "sqlite17" { ".db" } else { "" }
                ),
            );
            convert(from, &to);
            let store = to.open();
            for (id, (header, events)) in IDS.iter().zip(&reference) {
                let view = store.inspect(id).unwrap();
                assert_eq!(
                    &comparable(view.header),
                    header,
                    "{} -> {kind}: {id}",
                    from.kind
                );
                assert_eq!(
                    &jsons(&view.events),
                    events,
                    "{} -> {kind}: {id}",
                    from.kind
                );
                assert_eq!(
                    view.stored as usize,
                    events.len(),
                    "stored whole, closers included"
                );
            }
        }
    }
}
