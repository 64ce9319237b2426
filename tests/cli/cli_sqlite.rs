//! Every `turnwal` command run as a real binary against an SQLite store (a
//! `.sqlite` or `.db` file): the same outputs and exit statuses as on a
//! native WAL store, and the SQLite options.

use crate::support;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use serde_json::value::RawValue;
use support::{T0, acks, append, cat, command, ev, lines, on, turn};

/// The bytes an SQLite store reports for scalar rows: the sum of their
/// `data` lengths.
fn data_bytes(events: &[String]) -> usize {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        data: &'a RawValue,
    }
    events
        .iter()
        .map(|e| {
            serde_json::from_str::<Line<'_>>(e)
                .unwrap()
                .data
                .get()
                .len()
        })
        .sum()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn sql_count(db: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Turns 1 and 2 of session `s`, created with cwd `/w`.
fn two_turns(db: &Path) -> Vec<String> {
    let mut events = turn(1, 0, T0);
    events.extend(turn(2, 6, T0 + 100));
    let out = on(
        db,
        &["append", "s", "--create", "--cwd", "/w"],
        &lines(&events),
    );
    assert_eq!(
        (out.status, out.stdout, out.stderr),
        (0, acks(0..12), String::new())
    );
    events
}

#[test]
fn append_cat_tail_ls_stats_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.sqlite");

    // Reading a database that does not exist is refused, names it and
    // creates nothing: a typo in --store is not an empty store.
    let out = on(&db, &["ls"], "");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (
            4,
            "",
            format!(
                "turnwal: no store at {}: the path does not exist (the store is named by \
                 --store, else $TURNWAL_STORE, else ./.turnwal)\n",
                db.display()
            )
            .as_str()
        )
    );
    for args in [
        &["cat", "s"][..],
        &["verify"],
        &["tail", "s"],
        &["stats", "s"],
        &["recover", "s"],
        &["recover", "s", "--dry-run"],
        &["fork", "s", "child"],
        &["rm", "s"],
    ] {
        let out = on(&db, args, "");
        assert_eq!(
            (out.status, out.stdout.as_str()),
            (4, ""),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.starts_with("turnwal: no store at "),
            "{args:?}: {}",
            out.stderr
        );
    }
    // Appending to a session of a missing store without --create: the
    // session is missing (and nothing is created).
    let out = on(&db, &["append", "s"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (4, "turnwal: session \"s\" not found\n")
    );
    assert!(!db.exists());

    let events = two_turns(&db);
    assert!(db.is_file());
    assert_eq!(cat(&db, "s", false), lines(&events));
    assert_eq!(cat(&db, "s", true), lines(&events));
    let out = on(&db, &["cat", "s", "--from", "10"], "");
    assert_eq!(out.stdout, lines(&events[10..]));
    let out = on(&db, &["tail", "s", "-n", "2"], "");
    assert_eq!((out.status, out.stdout), (0, lines(&events[10..])));

    let bytes = data_bytes(&events);
    let out = on(&db, &["ls", "--json"], "");
    let mut listed = json(&out.stdout);
    assert!(listed["createdAt"].take().as_u64().is_some());
    assert_eq!(
        listed,
        json(&format!(
            r#"{{"id":"s","events":12,"turns":2,"bytes":{bytes},"lastActivity":{},"state":"clean","checked":"full","problem":null,
            "createdAt":null,"cwd":"/w","parentSession":null,"seedLength":null,"origin":null,
            "delegationDepth":null,"agentPreset":null,"title":"hi 1"}}"#,
            T0 + 105
        ))
    );
    let out = on(&db, &["ls"], "");
    let header = out.stdout.lines().next().unwrap();
    assert_eq!(
        header,
        "ID  STATE  EVENTS  TURNS   SIZE  LAST ACTIVITY     CREATED           CWD  TITLE  CHECKED"
    );
    let row: Vec<&str> = out
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        (
            row[0],
            row[1],
            row[2],
            row[3],
            row[4].trim(),
            row[7],
            row[8],
            row[9]
        ),
        (
            "s",
            "clean",
            "12",
            "2",
            format!("{bytes} B").as_str(),
            "/w",
            "hi 1",
            "full"
        )
    );
    let out = on(&db, &["stats", "s", "--json"], "");
    let mut stats = json(&out.stdout);
    assert!(stats["createdAt"].take().as_u64().is_some());
    assert_eq!(
        stats,
        json(&format!(
            r#"{{"id":"s","state":"clean","events":12,"turns":2,"bytes":{bytes},"closers":0,
            "firstTime":{T0},"lastTime":{},"types":{{"assistant/chunk":2,"step/end":2,
            "step/start":2,"turn/end":2,"turn/start":2,"user/message":2}},
            "createdAt":null,"cwd":"/w","parentSession":null,"durationMs":105,
            "interruptedTurns":0,"outcomes":{{"completed":2}},
            "tokens":{{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,
            "cacheWriteTokens":0,"reasoningTokens":0}},"models":{{}},"tools":{{}}}}"#,
            T0 + 105
        ))
    );
    let out = on(&db, &["verify", "s"], "");
    assert_eq!(
        (out.status, out.stdout),
        (0, format!("s: clean, 12 events, 2 turns, {bytes} bytes\n"))
    );

    // Appends continue; the same refusals as on a WAL store.
    let third = turn(3, 12, T0 + 200);
    let out = on(&db, &["append", "s"], &lines(&third));
    assert_eq!((out.status, out.stdout), (0, acks(12..18)));
    let out = on(&db, &["append", "s", "--create"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            4,
            "turnwal: session \"s\" already exists and has a persisted log on disk; load it \
             instead of creating it\n"
        )
    );
    let out = on(
        &db,
        &["append", "s"],
        &lines(&[ev("turn/start", 3, T0, "{}")]),
    );
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            3,
            "turnwal: line 1: seq mismatch: the session's next seq is 18, but the line has \
             seq 3\n"
        )
    );
    let out = on(
        &db,
        &["append", "s"],
        &lines(&[ev("user/message", 18, T0, r#"{"id":"x"}"#)]),
    );
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            3,
            "turnwal: line 1: turn contract violation at seq 18 (user/message): rule \
             enclosure: no turn is open (strict policy)\n"
        )
    );
    let mut all = events;
    all.extend(third);
    assert_eq!(cat(&db, "s", true), lines(&all));
}

#[test]
fn an_open_turn_is_shown_verified_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut events = turn(1, 0, T0);
    events.push(ev("turn/start", 6, T0 + 10, r#"{"turn":2}"#));
    events.push(ev("step/start", 7, T0 + 11, r#"{"turn":2,"step":1}"#));
    events.push(ev(
        "assistant/chunk",
        8,
        T0 + 12,
        r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"wor"}}"#,
    ));
    // A turn left open at end of input stays open: a crashed writer.
    append(&db, &["append", "s", "--create"], &events);
    let closers = [
        ev("step/end", 9, T0 + 12, r#"{"turn":2,"step":1}"#),
        ev(
            "turn/end",
            10,
            T0 + 12,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
        ),
    ];
    let mut view = events.clone();
    view.extend(closers.clone());

    assert_eq!(cat(&db, "s", false), lines(&view));
    assert_eq!(cat(&db, "s", true), lines(&events));
    let out = on(&db, &["verify", "s", "--json"], "");
    assert_eq!(out.status, 1);
    let report = json(&out.stdout);
    assert_eq!(
        (&report["state"], &report["events"], &report["closers"]),
        (&Value::from("open-turn"), &Value::from(9), &Value::from(2))
    );
    let out = on(&db, &["ls", "--json"], "");
    assert_eq!(json(&out.stdout)["state"], "open-turn");

    let report = |written: &str| {
        format!(
            "session s: open-turn before recovery\nkept: 9 stored events\ncut: nothing\n\
             closers: 2\n{}written: {written}\n",
            lines(&closers)
        )
    };
    let out = on(&db, &["recover", "s", "--dry-run"], "");
    assert_eq!((out.status, out.stdout), (0, report("no (dry run)")));
    let rows = "SELECT count(*) FROM events";
    assert_eq!(sql_count(&db, rows), 9);
    let out = on(&db, &["recover", "s"], "");
    assert_eq!((out.status, out.stdout), (0, report("yes")));
    assert_eq!(sql_count(&db, rows), 11);
    assert_eq!(on(&db, &["verify", "s"], "").status, 0);
    assert_eq!(cat(&db, "s", true), lines(&view));
    let out = on(&db, &["append", "s"], &lines(&turn(3, 11, T0 + 50)));
    assert_eq!((out.status, out.stdout), (0, acks(11..17)));
}

#[test]
fn a_corrupt_committed_row_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    two_turns(&db);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE events SET data = '{\"id\":' WHERE session_id = 's' AND seq = 1",
        [],
    )
    .unwrap();
    drop(conn);
    for args in [
        &["verify", "s"][..],
        &["verify"],
        &["cat", "s"],
        &["stats", "s"],
        &["recover", "s"],
    ] {
        let out = on(&db, args, "");
        assert_eq!(out.status, 2, "{args:?}: {} {}", out.stdout, out.stderr);
        let text = out.stdout + &out.stderr;
        assert!(text.contains("seq 1"), "{args:?}: {text}");
    }
    let out = on(&db, &["verify", "s", "--json"], "");
    assert_eq!(json(&out.stdout)["state"], "corrupt");
}

#[test]
fn fork_copies_history_into_the_same_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    let events = two_turns(&db);
    let out = on(&db, &["fork", "s", "child", "--at", "5"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let header = json(&out.stdout);
    assert_eq!(
        (
            &header["id"],
            &header["cwd"],
            &header["parentSession"],
            &header["seedLength"]
        ),
        (
            &Value::from("child"),
            &Value::from("/w"),
            &Value::from("s"),
            &Value::from(6)
        )
    );
    let child = cat(&db, "child", true);
    let child: Vec<&str> = child.lines().collect();
    assert_eq!(
        child[..6],
        events[..6].iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(child.len(), 7);
    assert!(
        child[6].starts_with(r#"{"type":"session/end-seed","seq":6,"time":"#),
        "{}",
        child[6]
    );
    let out = on(&db, &["fork", "s", "mid", "--at", "3"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            4,
            "turnwal: session \"s\": fork boundary seq 3 is inside turn 1, started at seq 0; a fork ends at a seq after which no turn is open (a turn's closing turn/end): the nearest is 5 (2 in all)\n"
        )
    );
    let out = on(&db, &["ls", "--json"], "");
    assert_eq!(out.stdout.lines().count(), 2);
}

#[test]
fn tail_follow_prints_events_another_process_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    let first = two_turns(&db);
    let mut tail = command(&[
        "--store",
        db.to_str().unwrap(),
        "tail",
        "s",
        "-n",
        "1",
        "--follow",
    ])
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut seen = BufReader::new(tail.stdout.take().unwrap()).lines();
    assert_eq!(seen.next().unwrap().unwrap(), first[11]);
    let next = turn(3, 12, T0 + 1000);
    append(&db, &["append", "s"], &next);
    for event in &next {
        assert_eq!(&seen.next().unwrap().unwrap(), event);
    }
    tail.kill().unwrap();
    tail.wait().unwrap();
}

#[test]
fn a_writer_holding_a_session_locks_out_a_second_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    two_turns(&db);
    let mut writer = command(&["--store", db.to_str().unwrap(), "append", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    let mut acked = BufReader::new(writer.stdout.take().unwrap()).lines();
    let next = turn(3, 12, T0 + 1000);
    stdin.write_all(lines(&next).as_bytes()).unwrap();
    stdin.flush().unwrap();
    for seq in 12..18 {
        assert_eq!(acked.next().unwrap().unwrap(), format!("ack {seq}"));
    }
    let out = on(&db, &["append", "s"], "");
    assert_eq!(out.status, 4);
    // The lock is a byte of the database (an OFD lock, which records no
    // pid); nothing but SQLite's files is beside it.
    assert_eq!(
        out.stderr,
        format!(
            "turnwal: session \"s\" is locked by another writer (pid unknown); lock file {}\n",
            db.display()
        )
    );
    let mut names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["s.sqlite", "s.sqlite-shm", "s.sqlite-wal"]);
    // Readers take no lock.
    let out = on(&db, &["tail", "s", "-n", "1"], "");
    assert_eq!(out.stdout, format!("{}\n", next[5]));
    drop(stdin);
    assert!(writer.wait().unwrap().success());
    assert_eq!(on(&db, &["append", "s"], "").status, 0);
}

#[test]
fn busy_timeout_journal_mode_and_synchronous() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.sqlite");
    two_turns(&db);
    let store = db.to_str().unwrap();

    // Another connection holds the write lock: an append waits
    // --busy-timeout, then fails.
    let mut conn = rusqlite::Connection::open(&db).unwrap();
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let started = Instant::now();
    let out = support::turnwal(
        &["--store", store, "--busy-timeout", "300", "append", "s"],
        &lines(&turn(3, 12, T0)),
    );
    let waited = started.elapsed();
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!("turnwal: begin immediate {store}: database is locked\n")
        )
    );
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    tx.rollback().unwrap();
    drop(conn);
    let out = support::turnwal(
        &["--store", store, "--busy-timeout", "300", "append", "s"],
        &lines(&turn(3, 12, T0)),
    );
    assert_eq!((out.status, out.stdout), (0, acks(12..18)));

    let journal = || -> String {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(journal(), "wal");
    let out = on(&db, &["--journal-mode", "truncate", "ls", "--json"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Only wal is kept in the file; a rollback journal mode is set per
    // connection, so a new connection sees the file out of wal mode.
    assert_eq!(journal(), "delete");
    let out = on(
        &db,
        &[
            "--synchronous",
            "normal",
            "--journal-mode",
            "wal",
            "append",
            "s",
        ],
        &lines(&turn(4, 18, T0)),
    );
    assert_eq!((out.status, out.stdout), (0, acks(18..24)));
    assert_eq!(journal(), "wal");

    for (args, message) in [
        (
            &["--journal-mode", "memory", "ls"][..],
            "invalid value 'memory' for '--journal-mode <MODE>': unknown journal mode \
             \"memory\" (expected wal, delete, truncate or persist)",
        ),
        (
            &["--synchronous", "off", "ls"],
            "invalid value 'off' for '--synchronous <MODE>': unknown synchronous mode \"off\" \
             (expected full or normal)",
        ),
        (
            &["--busy-timeout", "5s", "ls"],
            "invalid value '5s' for '--busy-timeout <MS>': invalid digit found in string",
        ),
    ] {
        let out = on(&db, args, "");
        assert_eq!(out.status, 64, "{args:?}");
        assert!(out.stderr.contains(message), "{args:?}: {}", out.stderr);
    }
    // On a WAL store they would mean nothing: refused.
    let wal = dir.path().join("wal");
    let out = on(&wal, &["--busy-timeout", "10", "ls"], "");
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (
            64,
            "turnwal: --busy-timeout applies to SQLite stores (.sqlite or .db files) only, and \
             this command opens none\n"
        )
    );
    let help = support::turnwal(&["--help"], "").stdout;
    for flag in [
        "--journal-mode <MODE>",
        "--synchronous <MODE>",
        "--busy-timeout <MS>",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
}

#[test]
fn a_foreign_database_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('keep me');")
        .unwrap();
    // Private, as the backend requires of any database it opens.
    fs::set_permissions(&db, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let before = fs::read(&db).unwrap();
    for args in [&["ls"][..], &["append", "s", "--create"], &["verify"]] {
        let out = on(&db, args, "");
        assert_eq!(out.status, 4, "{args:?}");
        assert!(
            out.stderr
                .starts_with(&format!("turnwal: {}: ", db.display()))
                && out.stderr.contains("unversioned schema"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert_eq!(fs::read(&db).unwrap(), before);
}
