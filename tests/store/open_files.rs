//! A store that writes many sessions holds the files of a few dozen
//! (issue 29): past `IDLE_WRITERS`, the least recently written sessions
//! whose turns are closed are let go and reopened on demand; a session
//! with a turn open is never let go. One test in this binary, so the
//! descriptor count is the store's alone.

use turnwal::store::IDLE_WRITERS;
use turnwal::{Event, SessionHeader, Store};

/// Descriptors of this process open on files under `dir`: what the store
/// in `dir` holds, whatever other tests of this crate hold meanwhile.
fn fds(dir: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

fn turn(n: u64, seq: u64) -> Vec<Event> {
    vec![
        Event::new("turn/start", seq, 1, &format!(r#"{{"turn":{n}}}"#)).unwrap(),
        Event::new(
            "turn/end",
            seq + 1,
            2,
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        )
        .unwrap(),
    ]
}

#[test]
fn a_store_writing_thousands_of_sessions_holds_a_few_dozen_open() {
    for (name, sqlite) in [("wal", false), ("sqlite", true)] {
        let dir = tempfile::tempdir().unwrap();
        let store = if sqlite {
            Store::open_sqlite(
                dir.path().join("s.sqlite"),
                Default::default(),
                Default::default(),
            )
            .unwrap()
        } else {
            Store::open(dir.path().join("wal")).unwrap()
        };
        let before = fds(dir.path());
        // Ten sessions left with a turn open: live, never let go.
        for i in 0..10 {
            let id = format!("open-{i}");
            store.create(SessionHeader::new(&id, 1)).unwrap();
            store
                .append(
                    &id,
                    &[Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap()],
                )
                .unwrap();
        }
        let mut most = 0;
        for i in 0..2_000 {
            let id = format!("s{i}");
            store.create(SessionHeader::new(&id, 1)).unwrap();
            store.append(&id, &turn(1, 0)).unwrap();
            most = most.max(fds(dir.path()) - before);
        }
        // WAL: a log and its lock per open session; SQLite: none per session.
        let bound = if sqlite {
            8
        } else {
            2 * (IDLE_WRITERS + 10) + 8
        };
        assert!(
            most <= bound,
            "{name}: {most} descriptors held at most (bound {bound})"
        );
        // Every session let go is reopened on demand and continues.
        for i in (0..2_000).step_by(97) {
            let id = format!("s{i}");
            assert_eq!(
                store.append(&id, &turn(2, 2)).unwrap().next_seq,
                4,
                "{name} {id}"
            );
        }
        // The open turns were never closed: they continue where they were.
        for i in 0..10 {
            let id = format!("open-{i}");
            let end = Event::new(
                "turn/end",
                1,
                3,
                r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            )
            .unwrap();
            assert_eq!(
                store.append(&id, &[end]).unwrap().next_seq,
                2,
                "{name} {id}"
            );
        }
        store.close_all().unwrap();
        drop(store);
        let reopened = if sqlite {
            Store::open_sqlite(
                dir.path().join("s.sqlite"),
                Default::default(),
                Default::default(),
            )
            .unwrap()
        } else {
            Store::open(dir.path().join("wal")).unwrap()
        };
        let listed = reopened.list().unwrap();
        assert_eq!(listed.len(), 2_010, "{name}");
        assert!(
            listed.iter().all(|s| s.state == turnwal::LogState::Clean),
            "{name}"
        );
        eprintln!("{name}: at most {most} descriptors held while writing 2,010 sessions");
    }
}
