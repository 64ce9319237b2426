//! The single-writer guarantee does not rest on a file anyone can delete:
//! with a live writer's lock file removed, a second writer is still refused,
//! on the WAL and on JSONL roots, and only the first writer's events are
//! stored. A JSONL root has no lock file at all (its writers hold the
//! transcript itself, an OFD lock); what a hostile user can delete there —
//! every file in the session directory but the transcript, an older
//! turnwal's `.turnwal-lock` included — lets no second writer in either.
//!
//! An SQLite store has no lock file at all (its writers lock a byte
//! of the database itself, docs/SQLITE.md "Locking"): a `.turnwal-locks/`
//! directory an older turnwal left beside it, however hostile, is neither
//! followed nor needed, and a database path that is not a regular file is
//! refused before any lock is taken on it.
//!
//! (No test here runs a child process: a child forked while a test has a
//! locked file open shares its open file description, and so its lock,
//! until it execs, and a writer here that opens and locks the file again in
//! that moment is refused as if another writer held it.)

use std::path::{Path, PathBuf};

use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::SqliteOptions;
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

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn sqlite(db: &Path) -> Store {
    Store::open_sqlite(db, SqliteOptions::default(), StoreOptions::default()).unwrap()
}

/// A `<database>.turnwal-locks/` directory as an older turnwal left it, and
/// worse: `s.lock` `flock`ed (as an old writer of "s" would hold it) with a
/// foreign pid in it, `t.lock` a symlink to a file outside, `u.lock` a FIFO.
/// Writers of "s", "t" and "u" neither wait for it nor touch it (an old
/// turnwal's writer and a new one do not see each other's locks: the
/// stored-next-seq check stops the stale one), and a second writer is still
/// refused by the lock on the database.
#[test]
fn a_legacy_sqlite_lock_directory_is_ignored() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let legacy = dir.path().join("s.db.turnwal-locks");
    std::fs::create_dir(&legacy).unwrap();
    std::fs::write(legacy.join("s.lock"), "999999\n").unwrap();
    let old_writer = std::fs::File::open(legacy.join("s.lock")).unwrap();
    // SAFETY: a valid descriptor for the call's duration.
    assert_eq!(
        unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&old_writer),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        },
        0
    );
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious");
    std::fs::write(&target, "untouched").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    symlink(&target, legacy.join("t.lock")).unwrap();
    let fifo = std::ffi::CString::new(legacy.join("u.lock").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let planted = entries(&legacy);

    let first = sqlite(&db);
    for id in ["s", "t", "u"] {
        first
            .create(SessionHeader::new(id, 1).with_cwd("/w"))
            .unwrap();
        first.append(id, &turn(1, 0, "first")).unwrap();
    }
    let second = sqlite(&db);
    for id in ["s", "t", "u"] {
        match second.append(id, &turn(2, 3, "second")) {
            Err(Error::Locked {
                id: got,
                path,
                holder,
            }) => assert_eq!(
                (got.as_str(), path, holder),
                (id, db.clone(), Some(std::process::id()))
            ),
            other => panic!("{id}: a second writer got {other:?}"),
        }
    }
    drop((first, second));
    let s = sqlite(&db);
    s.append("s", &turn(2, 3, "again")).unwrap();
    s.delete("t").unwrap();
    drop(s);

    assert_eq!(entries(dir.path()), ["s.db", "s.db.turnwal-locks"]);
    assert_eq!(entries(&legacy), planted);
    assert_eq!(
        std::fs::read_to_string(legacy.join("s.lock")).unwrap(),
        "999999\n"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    drop(old_writer);
}

/// A database path that is a symlink (to a real database), a FIFO or a
/// directory is refused before a lock is taken: no wait on the FIFO, no
/// lock on the symlink's target, nothing of turnwal's created beside it.
#[test]
fn a_database_path_that_is_no_regular_file_is_refused() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.db");
    let s = sqlite(&real);
    s.create(SessionHeader::new("s", 1).with_cwd("/w")).unwrap();
    s.append("s", &turn(1, 0, "real")).unwrap();
    drop(s);
    let link = dir.path().join("link.db");
    symlink(&real, &link).unwrap();
    let fifo = dir.path().join("fifo.db");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let subdir = dir.path().join("dir.db");
    std::fs::create_dir(&subdir).unwrap();
    let before = entries(dir.path());

    let refused = [
        (
            &link,
            "a SQLite store must be a regular file, not a symlink or a device",
        ),
        (
            &fifo,
            "a SQLite store must be a regular file, not a symlink or a device",
        ),
        (&subdir, "a SQLite store must be a file, not a directory"),
    ];
    for (path, detail) in &refused {
        match Store::open_sqlite(path, SqliteOptions::default(), StoreOptions::default()) {
            Err(Error::Unsupported {
                path: got,
                detail: why,
            }) => {
                assert_eq!((&got, why.as_str()), (*path, *detail))
            }
            other => panic!("{}: {:?}", path.display(), other.map(drop)),
        }
    }
    // The read-only probe of the file's schema version (`open_any`, before
    // the refusal; SQLite follows the symlink) leaves the target's -wal and
    // -shm, as any read-only connection to a database in wal mode does when
    // it is the last: SQLite's files, not turnwal's.
    let mut after = before.clone();
    after.extend(["real.db-shm".to_owned(), "real.db-wal".to_owned()]);
    after.sort();
    assert_eq!(entries(dir.path()), after);
    // The symlink's target was never locked: its session is free.
    let s = sqlite(&real);
    s.append("s", &turn(2, 3, "real")).unwrap();
}
