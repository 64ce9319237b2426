//! The SQLite store's writer lock, across real processes: an open-file-
//! description `fcntl` write lock (`F_OFD_SETLK`) on one byte of the
//! database file itself (`SqliteBackend::lock_offset`), so a store holds
//! exactly the files upstream's SQLite store holds (the database, and
//! SQLite's own `-wal`/`-shm`/journal files) after any `turnwal` command.
//!
//! What is held is read from the kernel, through each process's descriptors
//! (`support::fd_locks`): OFD locks and SQLite's traditional POSIX locks.

use crate::support;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;

use support::fd_locks::{locks, ofd_locks};
use support::{T0, acks, append, command, lines, on, turn};
use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions};
use turnwal::{Event, Store, StoreOptions};

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The POSIX locks (SQLite's) process `pid` holds on `db`, without the
/// descriptors they were found through (SQLite takes them through its own
/// descriptor, whichever of its descriptors of the file that is).
fn posix_locks(pid: u32, db: &Path) -> Vec<(String, String, String)> {
    locks(pid, db)
        .into_iter()
        .filter(|l| l.class == "POSIX")
        .map(|l| (l.kind, l.start, l.end))
        .collect()
}

/// This process's descriptors open on `db`: all of them, and turnwal's
/// lock descriptors among them (opened `O_NONBLOCK`, which SQLite never
/// uses; fdinfo's `flags` are octal).
fn descriptors_on(db: &Path) -> (usize, usize) {
    let target = fs::canonicalize(db).unwrap();
    let mut found = (0, 0);
    for fd in fs::read_dir("/proc/self/fd").unwrap() {
        let fd = fd.unwrap();
        if !fs::read_link(fd.path()).is_ok_and(|t| t == target) {
            continue;
        }
        found.0 += 1;
        let info = fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            fd.file_name().to_str().unwrap()
        ))
        .unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        if flags & libc::O_NONBLOCK as u32 != 0 {
            found.1 += 1;
        }
    }
    found
}

fn events(lines: &[String]) -> Vec<Event> {
    lines
        .iter()
        .map(|l| Event::from_json(l.as_bytes()).unwrap())
        .collect()
}

/// The refusal of a second writer of session `id`: exit status 4, no ack,
/// and the database named as the lock file (an OFD lock records no pid).
fn assert_refused(db: &Path, id: &str, batch: &[String]) {
    let out = on(db, &["append", id], &lines(batch));
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr),
        (
            4,
            "",
            format!(
                "turnwal: session \"{id}\" is locked by another writer (pid unknown); lock file {}\n",
                db.display()
            )
        )
    );
}

/// Every command that writes, run as a separate process: the directory holds
/// the database alone once each has exited (SQLite checkpoints and removes
/// its `-wal` and `-shm` when its last connection closes), and nothing else
/// at any point.
#[test]
fn every_command_leaves_only_sqlites_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    let only_db = ["s.sqlite"];

    // create
    append(&db, &["append", "s", "--create"], &turn(1, 0, T0));
    assert_eq!(entries(dir.path()), only_db);
    // append (turn 2 left open: the writer ends with its stdin)
    let mut open = turn(2, 6, T0 + 100);
    open.truncate(3);
    append(&db, &["append", "s"], &open);
    assert_eq!(entries(dir.path()), only_db);
    // recover (closes turn 2; nothing is cut, so nothing is quarantined)
    let out = on(&db, &["recover", "s"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    assert_eq!(entries(dir.path()), only_db);
    let out = on(&db, &["verify", "s"], "");
    assert_eq!(out.status, 0, "{}", out.stdout);
    // convert into the database, from a native store
    let wal = tempfile::tempdir().unwrap();
    let store = wal.path().join("store");
    append(&store, &["append", "w", "--create"], &turn(1, 0, T0));
    let out = support::convert(&store, &db, &[]);
    assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    assert_eq!(entries(dir.path()), only_db);
    // convert into a new database
    let copy = dir.path().join("copy.db");
    let out = support::convert(&db, &copy, &[]);
    assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    assert_eq!(entries(dir.path()), ["copy.db", "s.sqlite"]);
    // delete
    for (store, id) in [(&db, "s"), (&db, "w"), (&copy, "s"), (&copy, "w")] {
        let out = on(store, &["rm", id], "");
        assert_eq!((out.status, out.stderr.as_str()), (0, ""), "rm {id}");
    }
    assert_eq!(entries(dir.path()), ["copy.db", "s.sqlite"]);
    let out = on(&db, &["ls"], "");
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
}

/// A `turnwal append` holding session "s" locks "s" alone, for as long as
/// it lives: a second writer of "s" in another process is refused, one of
/// "t" is not, and once the holder is SIGKILLed the kernel has released the
/// lock and "s" can be appended to.
#[test]
fn a_writer_process_locks_its_session_until_it_dies() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    append(&db, &["append", "s", "--create"], &turn(1, 0, T0));

    let mut holder = command(&["--store", db.to_str().unwrap(), "append", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    let mut acked = BufReader::new(holder.stdout.take().unwrap()).lines();
    stdin
        .write_all(lines(&turn(2, 6, T0 + 100)).as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    for seq in 6..12 {
        assert_eq!(acked.next().unwrap().unwrap(), format!("ack {seq}"));
    }
    // Acknowledged, so its writer holds "s": one byte of the database.
    assert_eq!(
        ofd_locks(holder.id(), &db),
        [SqliteBackend::lock_offset("s")]
    );
    assert_refused(&db, "s", &turn(3, 12, T0 + 200));
    // Another session is not blocked.
    append(&db, &["append", "t", "--create"], &turn(1, 0, T0));
    assert_eq!(
        entries(dir.path()),
        ["s.sqlite", "s.sqlite-shm", "s.sqlite-wal"]
    );

    holder.kill().unwrap();
    assert_eq!(holder.wait().unwrap().signal(), Some(libc::SIGKILL));
    drop(stdin);
    // Reaped: its descriptors, and the lock, are gone.
    let out = on(&db, &["append", "s"], &lines(&turn(3, 12, T0 + 200)));
    assert_eq!(
        (out.status, out.stdout, out.stderr.as_str()),
        (0, acks(12..18), "")
    );
    assert_eq!(entries(dir.path()), ["s.sqlite"]);
}

/// Closing a descriptor of a file drops every POSIX lock this process holds
/// on it, SQLite's included. The lock descriptor is therefore one per file
/// in a process, shared by its backends and closed only when the last one
/// is gone: opening and dropping a second backend (and many more) while a
/// first one holds a writer leaves the first one's SQLite locks and OFD lock
/// in place, and no descriptor behind. Were SQLite's shared lock dropped,
/// another process closing its connection would take the database for
/// unused and delete the `-wal` file under the first backend.
#[test]
fn dropping_a_backend_keeps_another_backends_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    append(&db, &["append", "s", "--create"], &turn(1, 0, T0));
    let pid = std::process::id();
    let offset = SqliteBackend::lock_offset("s");
    let open = || Store::open_sqlite(&db, SqliteOptions::default(), StoreOptions::default());

    let first = open().unwrap();
    first.append("s", &events(&turn(2, 6, T0 + 100))).unwrap();
    assert_eq!(ofd_locks(pid, &db), [offset]);
    // In wal mode SQLite holds a shared lock as long as its connection is
    // open.
    let sqlite = posix_locks(pid, &db);
    assert!(!sqlite.is_empty(), "SQLite holds no lock");
    let (_, lock_descriptors) = descriptors_on(&db);
    assert_eq!(lock_descriptors, 1);

    // A second backend comes and goes, after writing a session of its own
    // and failing to take "s".
    let second = open().unwrap();
    second.create(turnwal::SessionHeader::new("u", 1)).unwrap();
    second.append("u", &events(&turn(1, 0, T0))).unwrap();
    let mut both = [offset, SqliteBackend::lock_offset("u")];
    both.sort();
    assert_eq!(ofd_locks(pid, &db), both);
    // The two backends share the process's one lock descriptor; a writer of
    // the second is refused the first one's session by this process's own
    // list of held bytes, which names this process.
    assert_eq!(descriptors_on(&db).1, 1);
    match second.append("s", &events(&turn(3, 12, T0 + 200))) {
        Err(turnwal::Error::Locked { id, path, holder }) => {
            assert_eq!((id.as_str(), path, holder), ("s", db.clone(), Some(pid)))
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(second);
    assert_eq!(posix_locks(pid, &db), sqlite, "SQLite's locks");
    assert_eq!(ofd_locks(pid, &db), [offset]);
    // Backends that come and go leave no descriptor of theirs behind.
    let before = descriptors_on(&db);
    for _ in 0..50 {
        let other = open().unwrap();
        assert_eq!(other.list().unwrap().len(), 2);
    }
    assert_eq!(descriptors_on(&db), before);
    assert_eq!(before.1, 1);
    assert_eq!(posix_locks(pid, &db), sqlite, "SQLite's locks");

    // Another process is still refused "s", and writes "t" and exits: it
    // must not find the database unused (the -wal stays).
    assert_refused(&db, "s", &turn(3, 12, T0 + 200));
    append(&db, &["append", "t", "--create"], &turn(1, 0, T0));
    assert_eq!(
        entries(dir.path()),
        ["s.sqlite", "s.sqlite-shm", "s.sqlite-wal"]
    );
    // The first backend goes on, and another process reads what it wrote.
    first.append("s", &events(&turn(3, 12, T0 + 200))).unwrap();
    let out = on(&db, &["cat", "s"], "");
    let mut all = turn(1, 0, T0);
    all.extend(turn(2, 6, T0 + 100));
    all.extend(turn(3, 12, T0 + 200));
    assert_eq!((out.status, out.stdout), (0, lines(&all)));

    // The last backend gone, every descriptor is closed and no lock is left.
    drop(first);
    assert_eq!(descriptors_on(&db), (0, 0));
    assert!(ofd_locks(pid, &db).is_empty());
    assert!(posix_locks(pid, &db).is_empty());
    assert_eq!(entries(dir.path()), ["s.sqlite"]);
    append(&db, &["append", "s"], &turn(4, 18, T0 + 300));

    // For contrast, what the kept descriptors prevent: closing any other
    // descriptor of the database drops SQLite's locks.
    let third = open().unwrap();
    third.append("s", &events(&turn(5, 24, T0 + 400))).unwrap();
    assert!(!posix_locks(pid, &db).is_empty());
    drop(fs::File::open(&db).unwrap());
    assert!(posix_locks(pid, &db).is_empty());
    assert_eq!(ofd_locks(pid, &db), [offset], "an OFD lock is not dropped");
}
