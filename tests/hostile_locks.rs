//! The single-writer guarantee does not rest on a file anyone can delete:
//! with a live writer's lock file removed, a second writer is still refused,
//! on the WAL and on JSONL roots, and only the first writer's events are
//! stored. A JSONL root has no lock file at all (its writers hold the
//! transcript itself, an OFD lock); what a hostile user can delete there —
//! every file in the session directory but the transcript, an older
//! turnwal's `.turnwal-lock` included — lets no second writer in either.

use std::path::{Path, PathBuf};

use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{Error, Event, SessionHeader, Store, StoreOptions};

fn turn(n: u64, seq: u64, text: &str) -> Vec<Event> {
    vec![
        Event::new("turn/start", seq, 1, &format!(r#"{{"turn":{n}}}"#)).unwrap(),
        Event::new(
            "user/message",
            seq + 1,
            2,
            &format!(r#"{{"id":"u{n}","text":"{text}"}}"#),
        )
        .unwrap(),
        Event::new(
            "turn/end",
            seq + 2,
            3,
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        )
        .unwrap(),
    ]
}

/// One store kind: how to open a store on `dir`, the file an `Error::Locked`
/// for session "s" names, and the files a hostile user deletes (or
/// plants, for JSONL: an older turnwal's lock file, which is then deleted)
/// to let a second writer in.
struct Kind {
    name: &'static str,
    open: fn(&Path) -> Store,
    lock: fn(&Path) -> PathBuf,
    deleted: fn(&Path) -> Vec<PathBuf>,
}

fn kinds() -> [Kind; 2] {
    [
        Kind {
            name: "wal",
            open: |dir| Store::open(dir).unwrap(),
            lock: |dir| dir.join("sessions/s.lock"),
            deleted: |dir| vec![dir.join("sessions/s.lock")],
        },
        Kind {
            name: "jsonl",
            open: |dir| {
                Store::with_backend(
                    std::sync::Arc::new(JsonlBackend::open(dir, Compression::None).unwrap()),
                    StoreOptions::default(),
                )
            },
            lock: |dir| dir.join("--w--/s/session.jsonl"),
            deleted: |dir| {
                let old = dir.join("--w--/s/.turnwal-lock");
                std::fs::write(&old, "        42\n").unwrap();
                vec![old]
            },
        },
    ]
}

#[test]
fn a_deleted_lock_file_lets_no_second_writer_in() {
    for kind in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let first = (kind.open)(dir.path());
        first
            .create(SessionHeader::new("s", 1).with_cwd("/w"))
            .unwrap();
        first.append("s", &turn(1, 0, "first")).unwrap();
        first.append("s", &turn(2, 3, "first")).unwrap();

        for file in (kind.deleted)(dir.path()) {
            std::fs::remove_file(&file).unwrap_or_else(|e| panic!("{}: {e}", kind.name));
        }
        let second = (kind.open)(dir.path());
        match second.append("s", &turn(3, 6, "second")) {
            Err(Error::Locked { id, holder, path }) => {
                assert_eq!(
                    (id.as_str(), holder, path),
                    ("s", None, (kind.lock)(dir.path())),
                    "{}",
                    kind.name
                )
            }
            other => panic!("{}: a second writer got {other:?}", kind.name),
        }
        // The first writer goes on; only its events are stored.
        first.append("s", &turn(3, 6, "first")).unwrap();
        drop((first, second));
        let events = (kind.open)(dir.path()).load("s").unwrap().events;
        let texts: Vec<&str> = events
            .iter()
            .filter(|e| e.event_type() == "user/message")
            .map(|e| e.data().get())
            .collect();
        assert_eq!(
            texts,
            [
                r#"{"id":"u1","text":"first"}"#,
                r#"{"id":"u2","text":"first"}"#,
                r#"{"id":"u3","text":"first"}"#
            ],
            "{}",
            kind.name
        );
    }
}
