//! A SQLite store on a read-only file system: every read works, a write says
//! the file system is read-only. The read-only mount is real: `unshare -rm`
//! (an unprivileged user and mount namespace) bind-mounts the store's
//! directory read-only for the commands it runs, so it holds for root too.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::{BIN, T0, lines, on, turn};

/// The summary a store-wide `verify` of one clean session ends with.
const SUMMARY: &str = "1 session: 1 clean, 0 open-turn, 0 torn, 0 corrupt\n";

/// Runs `script` (sh) with `dir` bind-mounted read-only over itself.
fn read_only(dir: &Path, script: &str) -> (i32, String, String) {
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c"])
        .arg(format!(
            "mount --bind -o ro {d} {d} && {script}",
            d = dir.display()
        ))
        .output()
        .expect("unshare runs (util-linux)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_read_only_sqlite_store_reads_and_refuses_writes_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    let events = turn(1, 0, T0);
    let out = on(&db, &["append", "s", "--create"], &lines(&events));
    assert_eq!(out.status, 0, "{}", out.stderr);
    let before = std::fs::read(&db).unwrap();

    let run = |args: &str| format!("{BIN} --store {} {args}", db.display());
    let (status, stdout, stderr) = read_only(dir.path(), &run("cat s"));
    assert_eq!((status, stdout, stderr.as_str()), (0, lines(&events), ""));
    let (status, stdout, _) = read_only(dir.path(), &run("verify"));
    assert_eq!(
        (status, stdout),
        (
            0,
            format!(
                "s: clean, 6 events, 1 turn, {} bytes\n{SUMMARY}",
                data_bytes(&events)
            )
        )
    );
    let (status, stdout, _) = read_only(dir.path(), &run("ls --json"));
    assert_eq!(status, 0);
    assert!(stdout.contains(r#""id":"s","events":6"#), "{stdout}");

    let (status, stdout, stderr) = read_only(
        dir.path(),
        &format!(
            "echo '{{\"type\":\"turn/start\",\"data\":{{\"turn\":2}}}}' | {}",
            run("append s")
        ),
    );
    // The writer takes no file lock on a database it cannot write (and
    // creates nothing for one): the write itself is refused, by name.
    assert_eq!(
        (status, stdout.as_str(), stderr),
        (
            4,
            "",
            format!(
                "turnwal: write {}: the database (or its file system) is read-only: reads \
                 work, writes cannot\n",
                db.display()
            )
        )
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "nothing was written");
}

/// The `data` bytes a SQLite store counts for `events` (`ls`/`verify` size).
fn data_bytes(events: &[String]) -> usize {
    events
        .iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e).unwrap();
            serde_json::to_string(&v["data"]).unwrap().len()
        })
        .sum()
}

#[test]
fn verify_deep_finds_what_reading_every_log_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    let events = turn(1, 0, T0);
    let out = on(&db, &["append", "s", "--create"], &lines(&events));
    assert_eq!(out.status, 0, "{}", out.stderr);
    // A freelist page count the file does not have: every row still reads,
    // so only SQLite's own page check can tell.
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[36..40].copy_from_slice(&3u32.to_be_bytes());
    std::fs::write(&db, &bytes).unwrap();

    let session = format!(
        "s: clean, 6 events, 1 turn, {} bytes\n",
        data_bytes(&events)
    );
    let out = on(&db, &["verify"], "");
    assert_eq!((out.status, out.stdout), (0, format!("{session}{SUMMARY}")));
    let out = on(&db, &["verify", "--deep"], "");
    assert_eq!(
        (out.status, out.stdout),
        (
            2,
            format!(
                "{session}deep: {}: PRAGMA integrity_check: *** in database main ***; Freelist: \
                 size is 0 but should be 3\n{SUMMARY}",
                db.display()
            )
        )
    );
}
