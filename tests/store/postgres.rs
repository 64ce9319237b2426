//! The PostgreSQL store against a real server (docs/POSTGRES.md): each test
//! starts a throwaway cluster of Debian's PostgreSQL in a temporary
//! directory, listening only on a Unix socket there, as a non-root user,
//! and stops it when done.

use crate::support;

use std::process::Stdio;

use support::pg::Cluster;

/// The lease the low-level tests' writers take (they steal: these tests
/// are of the epoch's fencing, the lease's are further down).
const LEASE: std::time::Duration = std::time::Duration::from_secs(30);

use turnwal::Error;
use turnwal::backend::postgres::epoch::{self, Lease, Row};
use turnwal::backend::postgres::{SCHEMA_VERSION, connect, location_of};

fn unsupported(result: turnwal::Result<postgres::Client>) -> String {
    match result {
        Err(Error::Unsupported { detail, .. }) => detail,
        Err(other) => panic!("expected Unsupported, got {other}"),
        Ok(_) => panic!("expected Unsupported, got a connection"),
    }
}

/// Every turnwal table and column, as the database lists them.
fn tables(cluster: &Cluster, db: &str) -> Vec<(String, String)> {
    let mut client = postgres::Client::connect(&cluster.url(db), postgres::NoTls).unwrap();
    client
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_name LIKE 'turnwal%' ORDER BY 1, 2",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn the_schema_is_created_once_and_checked_on_every_open() {
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    let mut client = connect(&url).unwrap();
    let (version, store_id): (i32, String) = {
        let row = client
            .query_one("SELECT version, store_id FROM turnwal_schema", &[])
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((version, store_id.len()), (SCHEMA_VERSION, 32));
    let created = tables(&cluster, "postgres");
    assert_eq!(created.len(), 29, "{created:?}");
    let mut names: Vec<&str> = created.iter().map(|(t, _)| t.as_str()).collect();
    names.dedup();
    assert_eq!(
        names,
        [
            "turnwal_events",
            "turnwal_quarantine",
            "turnwal_schema",
            "turnwal_sessions"
        ]
    );
    drop(client);
    // A second open finds it and changes nothing.
    let mut again = connect(&url).unwrap();
    let id: String = again
        .query_one("SELECT store_id FROM turnwal_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(id, store_id);
    assert_eq!(tables(&cluster, "postgres"), created);
}

#[test]
fn a_version_1_schema_is_upgraded_in_place_and_its_sessions_are_free() {
    let cluster = Cluster::start();
    cluster.sql("postgres", "CREATE DATABASE old");
    let url = cluster.url("old");
    let location = location_of(&url);
    let mut client = connect(&url).unwrap();
    epoch::create(
        &mut client,
        &location,
        "s",
        "{}",
        "lenient",
        "host-a",
        LEASE,
        &[row(0, "turn/start", r#"{"turn":1}"#)],
    )
    .unwrap();
    drop(client);
    // What a turnwal before leases created: version 1, no lease column.
    cluster.sql(
        "old",
        "ALTER TABLE turnwal_sessions DROP COLUMN writer_lease_until; \
         UPDATE turnwal_schema SET version = 1",
    );
    let mut client = connect(&url).unwrap();
    let version: i32 = client
        .query_one("SELECT version FROM turnwal_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, 2);
    assert_eq!(tables(&cluster, "old").len(), 29);
    // The session kept every row and has no lease: free to take.
    let rows: i64 = client
        .query_one(
            "SELECT count(*) FROM turnwal_events WHERE session_id = 's'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
    let hold = epoch::take(&mut client, &location, "s", "host-b", Lease::of(LEASE))
        .unwrap()
        .unwrap();
    assert_eq!((hold.epoch, hold.next_seq), (2, 1));
    // Now leased: a third host waits.
    assert!(matches!(
        epoch::take(&mut client, &location, "s", "host-c", Lease::of(LEASE)),
        Err(Error::Leased { epoch: 2, .. })
    ));
}

#[test]
fn a_newer_or_foreign_schema_or_a_non_utf8_database_is_refused_untouched() {
    let cluster = Cluster::start();
    // Newer.
    cluster.sql("postgres", "CREATE DATABASE newer");
    connect(&cluster.url("newer")).unwrap();
    cluster.sql("newer", "UPDATE turnwal_schema SET version = 3");
    let detail = unsupported(connect(&cluster.url("newer")));
    assert_eq!(
        detail,
        "the database holds turnwal schema version 3, newer than the 2 this turnwal reads: \
         upgrade turnwal"
    );
    // Foreign: a table named like turnwal's with other columns.
    cluster.sql("postgres", "CREATE DATABASE foreign_db");
    cluster.sql("foreign_db", "CREATE TABLE turnwal_events (id integer)");
    let before = tables(&cluster, "foreign_db");
    let detail = unsupported(connect(&cluster.url("foreign_db")));
    assert!(
        detail.starts_with("tables named turnwal_* that are not turnwal's schema version 2"),
        "{detail}"
    );
    assert!(detail.contains("turnwal_events.id (integer"), "{detail}");
    assert_eq!(tables(&cluster, "foreign_db"), before, "nothing changed");
    // A column turnwal's schema lacks.
    cluster.sql("postgres", "CREATE DATABASE altered");
    connect(&cluster.url("altered")).unwrap();
    cluster.sql(
        "altered",
        "ALTER TABLE turnwal_events ALTER COLUMN data TYPE jsonb USING data::jsonb",
    );
    let detail = unsupported(connect(&cluster.url("altered")));
    assert!(detail.contains("turnwal_events.data (jsonb"), "{detail}");
    // Not UTF-8.
    cluster.sql(
        "postgres",
        "CREATE DATABASE latin TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'",
    );
    let detail = unsupported(connect(&cluster.url("latin")));
    assert!(
        detail.starts_with("the database's encoding is LATIN1"),
        "{detail}"
    );
    assert!(tables(&cluster, "latin").is_empty(), "nothing created");
}

#[test]
fn messages_name_the_store_without_its_password() {
    assert_eq!(
        location_of("postgresql://turnwal:s3cret@10.0.0.7/sessions?sslmode=require"),
        "postgresql://turnwal@10.0.0.7/sessions?sslmode=require"
    );
    let cluster = Cluster::start();
    let url = format!("{} password=s3cret", cluster.url("no_such_db"));
    match connect(&url) {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("no_such_db"), "{text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
        Ok(_) => panic!("connected to a database that does not exist"),
    }
}

fn row(seq: i64, event_type: &str, data: &str) -> Row {
    Row {
        seq,
        members: 1,
        event_type: event_type.to_owned(),
        time: 1_700_000_000_000 + seq,
        data: data.to_owned(),
        source_event_seqs: None,
        surface_op: None,
        ignorable: None,
    }
}

/// The rows of `id`, as stored: `(seq, type, data)`.
fn stored(cluster: &Cluster, id: &str) -> Vec<(i64, String, String)> {
    let mut client = postgres::Client::connect(&cluster.url("postgres"), postgres::NoTls).unwrap();
    client
        .query(
            "SELECT seq, type, data FROM turnwal_events WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[test]
fn a_writer_whose_session_was_taken_over_can_never_append_again() {
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    // Two "hosts", each with its own connection and identity.
    let (mut a, mut b) = (connect(&url).unwrap(), connect(&url).unwrap());
    let location = location_of(&url);
    let header = r#"{"version":0,"id":"s","createdAt":1,"cwd":"/w"}"#;
    let mut held_a = epoch::create(
        &mut a,
        &location,
        "s",
        header,
        "strict",
        "host-a pid 1",
        LEASE,
        &[],
    )
    .unwrap();
    assert_eq!((held_a.epoch, held_a.next_seq, held_a.revision), (1, 0, 1));
    assert_eq!(held_a.incarnation.len(), 32, "{held_a:?}");
    // Exact bytes: a number spelling and key order jsonb would rewrite.
    let turn1 = [
        row(0, "turn/start", r#"{"turn":1}"#),
        row(
            1,
            "user/message",
            r#"{"id":"u1","n":1e+21,"z":0,"a":"\ud800"}"#,
        ),
    ];
    epoch::append(&mut a, &location, "s", &mut held_a, &turn1).unwrap();
    assert_eq!((held_a.next_seq, held_a.revision), (2, 2));
    // A second host takes the session (host A paused, or cut off).
    let mut held_b = epoch::take(
        &mut b,
        &location,
        "s",
        "host-b pid 2",
        Lease::stealing(LEASE),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        held_b,
        epoch::Hold {
            incarnation: held_a.incarnation.clone(),
            epoch: 2,
            next_seq: 2,
            revision: 2,
            lease: LEASE,
        }
    );
    // A comes back: refused, naming B; nothing of it is written.
    let late = [row(
        2,
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    )];
    match epoch::append(&mut a, &location, "s", &mut held_a, &late) {
        Err(e @ Error::Superseded { .. }) => assert_eq!(
            e.to_string(),
            "session \"s\" was taken over by another writer (host-b pid 2, writer epoch 2); \
             this writer (epoch 1) may no longer append: open the session again"
        ),
        other => panic!("expected Superseded, got {other:?}"),
    }
    assert_eq!(held_a.next_seq, 2, "a refused batch moves nothing");
    // B's batch at the same seq goes in; the log holds one writer's events per seq.
    let by_b = [row(
        2,
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"interrupted"}}"#,
    )];
    epoch::append(&mut b, &location, "s", &mut held_b, &by_b).unwrap();
    let rows = stored(&cluster, "s");
    assert_eq!(
        rows,
        [
            (0, "turn/start".to_owned(), r#"{"turn":1}"#.to_owned()),
            (
                1,
                "user/message".to_owned(),
                r#"{"id":"u1","n":1e+21,"z":0,"a":"\ud800"}"#.to_owned()
            ),
            (
                2,
                "turn/end".to_owned(),
                r#"{"turn":1,"reason":{"kind":"interrupted"}}"#.to_owned()
            ),
        ]
    );
    // A batch that does not start at the stored next seq is refused too.
    let mut wrong = held_b;
    wrong.next_seq = 1;
    match epoch::append(&mut b, &location, "s", &mut wrong, &late) {
        Err(Error::SeqMismatch {
            expected: 3,
            got: 1,
            ..
        }) => {}
        other => panic!("expected SeqMismatch, got {other:?}"),
    }
    // Creating an existing session, or taking a missing one.
    assert!(matches!(
        epoch::create(
            &mut b,
            &location,
            "s",
            header,
            "strict",
            "host-b",
            LEASE,
            &[]
        ),
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(
        epoch::take(
            &mut b,
            &location,
            "absent",
            "host-b",
            Lease::stealing(LEASE)
        )
        .unwrap(),
        None
    );
    assert_eq!(stored(&cluster, "s").len(), 3);
}

#[test]
fn racing_hosts_leave_exactly_one_writers_events_per_seq() {
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    let location = location_of(&url);
    let mut setup = connect(&url).unwrap();
    epoch::create(
        &mut setup,
        &location,
        "race",
        "{}",
        "lenient",
        "setup",
        LEASE,
        &[],
    )
    .unwrap();
    // Four hosts, each taking the session and appending as long as it
    // holds it; every acknowledged batch is remembered.
    let acked: Vec<Vec<(i64, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|h| {
                let (url, location) = (url.clone(), location.clone());
                scope.spawn(move || {
                    let mut client = connect(&url).unwrap();
                    let mut acked = Vec::new();
                    for round in 0..25 {
                        let holder = format!("host-{h}");
                        let Some(mut hold) = epoch::take(
                            &mut client,
                            &location,
                            "race",
                            &holder,
                            Lease::stealing(LEASE),
                        )
                        .unwrap() else {
                            continue;
                        };
                        for i in 0..3 {
                            let data = format!(r#"{{"host":{h},"round":{round},"i":{i}}}"#);
                            let batch = [row(hold.next_seq, "plugin/x", &data)];
                            match epoch::append(&mut client, &location, "race", &mut hold, &batch) {
                                Ok(()) => acked.push((hold.next_seq - 1, data)),
                                Err(Error::Superseded { .. }) => break,
                                Err(e) => panic!("host {h}: {e}"),
                            }
                        }
                    }
                    acked
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rows = stored(&cluster, "race");
    // Seqs contiguous from 0, each row an acknowledged batch of one host,
    // and every acknowledged batch stored at its seq.
    assert!(!rows.is_empty());
    for (i, (seq, _, _)) in rows.iter().enumerate() {
        assert_eq!(*seq, i as i64);
    }
    let all: std::collections::BTreeMap<i64, String> = acked.into_iter().flatten().collect();
    assert_eq!(all.len(), rows.len(), "acknowledged exactly what is stored");
    for (seq, _, data) in &rows {
        assert_eq!(all.get(seq), Some(data), "seq {seq}");
    }
}

/// Connects, retrying while the server is down or recovering (up to 60 s).
fn reconnect(url: &str) -> postgres::Client {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match connect(url) {
            Ok(client) => return client,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("the server did not come back: {e}"),
        }
    }
}

/// A writer appending `batches` batches of 3 rows, finding out after every
/// lost connection whether its last batch committed (the stored next seq
/// is past it) or not (still at its start) and going on accordingly:
/// returns every batch it acknowledged, by first seq.
fn resilient_writer(url: &str, id: &str, batches: i64) -> Vec<(i64, String)> {
    let location = location_of(url);
    let mut client = reconnect(url);
    let mut hold = loop {
        match epoch::take(&mut client, &location, id, "writer", Lease::stealing(LEASE)) {
            Ok(hold) => break hold.unwrap(),
            Err(Error::Io { .. }) => client = reconnect(url),
            Err(e) => panic!("take: {e}"),
        }
    };
    let mut acked = Vec::new();
    let mut b = 0;
    while b < batches {
        let start = hold.next_seq;
        let rows: Vec<Row> = (0..3)
            .map(|i| {
                row(
                    start + i,
                    "plugin/x",
                    &format!(r#"{{"batch":{b},"i":{i}}}"#),
                )
            })
            .collect();
        let mut attempt = hold.clone();
        match epoch::append(&mut client, &location, id, &mut attempt, &rows) {
            Ok(()) => {
                hold = attempt;
                acked.extend(rows.iter().map(|r| (r.seq, r.data.clone())));
                b += 1;
            }
            Err(Error::Io { .. }) => {
                // Reconnect and read where the session ends; a connection
                // killed again meanwhile is simply retried.
                let now = loop {
                    client = reconnect(url);
                    match epoch::current(&mut client, &location, id) {
                        Ok(now) => break now.unwrap(),
                        Err(Error::Io { .. }) => continue,
                        Err(e) => panic!("batch {b}: {e}"),
                    }
                };
                assert_eq!(now.epoch, hold.epoch, "no other writer took the session");
                if now.next_seq == start + 3 {
                    // It committed before the connection went: acknowledge.
                    hold = now;
                    acked.extend(rows.iter().map(|r| (r.seq, r.data.clone())));
                    b += 1;
                } else {
                    // It did not: send it again.
                    assert_eq!(now.next_seq, start, "the batch half-committed");
                }
            }
            Err(e) => panic!("batch {b}: {e}"),
        }
    }
    acked
}

#[test]
fn a_server_killed_mid_append_loses_nothing_acknowledged_and_duplicates_nothing() {
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    let mut setup = connect(&url).unwrap();
    let location = location_of(&url);
    epoch::create(
        &mut setup,
        &location,
        "s",
        "{}",
        "lenient",
        "setup",
        LEASE,
        &[],
    )
    .unwrap();
    drop(setup);
    let acked = std::thread::scope(|scope| {
        let writer = scope.spawn(|| resilient_writer(&url, "s", 150));
        // Power cuts while it writes.
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(150));
            cluster.crash_and_restart();
        }
        writer.join().unwrap()
    });
    let rows = stored(&cluster, "s");
    assert_eq!(rows.len(), 450, "every batch stored once");
    let stored_data: Vec<(i64, String)> = rows.into_iter().map(|(s, _, d)| (s, d)).collect();
    assert_eq!(
        stored_data, acked,
        "exactly the acknowledged rows, in order"
    );
}

#[test]
fn connections_killed_mid_transaction_lose_nothing_acknowledged() {
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    let mut admin = connect(&url).unwrap();
    let location = location_of(&url);
    epoch::create(
        &mut admin,
        &location,
        "s",
        "{}",
        "lenient",
        "setup",
        LEASE,
        &[],
    )
    .unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (acked, killed) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let acked = resilient_writer(&url, "s", 300);
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            acked
        });
        // pg_terminate_backend of every other connection, at uneven moments.
        let mut killed = 0u64;
        let mut wait = 1u64;
        // Until the writer is done, or gone (a failed writer's panic is
        // what the join below reports).
        while !done.load(std::sync::atomic::Ordering::SeqCst) && !writer.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(wait));
            wait = wait * 7 % 23 + 1;
            let n: i64 = admin
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid() \
                     AND backend_type = 'client backend'",
                    &[],
                )
                .unwrap()
                .get(0);
            killed += n as u64;
        }
        (writer.join().unwrap(), killed)
    });
    assert!(killed > 0, "no connection was killed");
    let rows = stored(&cluster, "s");
    assert_eq!(rows.len(), 900);
    let stored_data: Vec<(i64, String)> = rows.into_iter().map(|(s, _, d)| (s, d)).collect();
    assert_eq!(stored_data, acked);
}

/// Set in a child process of this test binary: the child is a writer
/// "host" (see `writer_host`), not a test.
const HOST_ENV: &str = "TURNWAL_PG_TEST_HOST";

/// A writer host in its own process: takes session `s` as `$HOST_ENV`
/// names it, then appends one-row batches, printing `acked SEQ DATA` after
/// each commit, until it has appended `$TURNWAL_PG_TEST_BATCHES` or is
/// refused (`refused: MESSAGE`). Does nothing when run as a test.
#[test]
fn writer_host() {
    let Ok(host) = std::env::var(HOST_ENV) else {
        return;
    };
    use std::io::Write as _;
    let url = std::env::var("TURNWAL_PG_TEST_URL").unwrap();
    let batches: i64 = std::env::var("TURNWAL_PG_TEST_BATCHES")
        .unwrap()
        .parse()
        .unwrap();
    let location = location_of(&url);
    let mut client =
        turnwal::backend::postgres::connect_with(&url, std::time::Duration::from_millis(500))
            .unwrap();
    let mut hold = epoch::take(&mut client, &location, "s", &host, Lease::stealing(LEASE))
        .unwrap()
        .unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "taken {}", hold.epoch).unwrap();
    out.flush().unwrap();
    for b in 0..batches {
        let data = format!(r#"{{"host":"{host}","b":{b}}}"#);
        let seq = hold.next_seq;
        match epoch::append(
            &mut client,
            &location,
            "s",
            &mut hold,
            &[row(seq, "plugin/x", &data)],
        ) {
            Ok(()) => writeln!(out, "acked {seq} {data}").unwrap(),
            Err(e) => {
                // The kind first: an I/O error here is the server having
                // ended a transaction this host was paused inside.
                let kind = match e {
                    Error::Superseded { .. } => "superseded",
                    Error::Io { .. } => "io",
                    _ => "other",
                };
                writeln!(out, "refused: {kind}: {e}").unwrap();
                break;
            }
        }
        out.flush().unwrap();
    }
}

/// Starts a writer host process.
fn spawn_host(url: &str, host: &str, batches: u32) -> std::process::Child {
    crate::support::native(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "postgres::writer_host",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(HOST_ENV, host)
        .env("TURNWAL_PG_TEST_URL", url)
        .env("TURNWAL_PG_TEST_BATCHES", batches.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_paused_writer_resumed_after_another_host_took_over_is_refused() {
    use std::io::BufRead as _;
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    let location = location_of(&url);
    epoch::create(
        &mut connect(&url).unwrap(),
        &location,
        "s",
        "{}",
        "lenient",
        "setup",
        LEASE,
        &[],
    )
    .unwrap();
    // Host A writes until it has 20 batches acknowledged, then is paused
    // (SIGSTOP), wherever it is: maybe inside a transaction.
    let mut a = spawn_host(&url, "proc-a", 1_000_000);
    let mut a_out = std::io::BufReader::new(a.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    for line in a_out.by_ref() {
        let line = line.unwrap();
        if let Some(ack) = line.strip_prefix("acked ") {
            acked.push(ack.to_owned());
            if acked.len() == 20 {
                break;
            }
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(a.id() as i32, libc::SIGSTOP) };
    // Host B takes over (waiting at most for the server to end A's idle
    // transaction) and writes 20 batches.
    let b = spawn_host(&url, "proc-b", 20);
    let b_out = b.wait_with_output().unwrap();
    let b_lines: Vec<String> = String::from_utf8(b_out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    // (libtest's own `test writer_host ...` shares the first line.)
    assert!(
        b_lines.iter().any(|l| l.ends_with("taken 3")),
        "{b_lines:?}"
    );
    let b_acked: Vec<String> = b_lines
        .iter()
        .filter_map(|l| l.strip_prefix("acked ").map(str::to_owned))
        .collect();
    assert_eq!(b_acked.len(), 20, "{b_lines:?}");
    // A resumes: whatever it was doing, its next batch is refused, naming B.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(a.id() as i32, libc::SIGCONT) };
    let mut refusal = None;
    for line in a_out {
        let line = line.unwrap();
        if let Some(ack) = line.strip_prefix("acked ") {
            acked.push(ack.to_owned());
        } else if let Some(why) = line.strip_prefix("refused: ") {
            refusal = Some(why.to_owned());
        }
    }
    assert!(a.wait().unwrap().success());
    let refusal = refusal.expect("host A was refused");
    // Refused by its epoch; or, if the pause caught it inside a transaction,
    // by the server, which ended that transaction (rolled back) after the
    // idle-in-transaction timeout so that B could take over.
    match refusal.split_once(": ") {
        Some(("superseded", why)) => assert!(
            why.contains(
                "was taken over by another writer (proc-b, writer epoch 3); this writer (epoch \
                 2) may no longer append"
            ),
            "{why}"
        ),
        Some(("io", _)) => {}
        _ => panic!("host A: {refusal}"),
    }
    // The log: every acknowledged batch of A (taken before B), then B's;
    // one writer's row per seq, contiguous.
    let rows = stored(&cluster, "s");
    let expected: Vec<String> = acked.iter().chain(&b_acked).cloned().collect();
    let got: Vec<String> = rows
        .iter()
        .map(|(seq, _, data)| format!("{seq} {data}"))
        .collect();
    assert_eq!(got, expected);
}

/// `turnwal ARGS` on the store at `url`.
fn cli(url: &str, args: &[&str], stdin: &str) -> support::Output {
    let mut all = vec!["--store", url];
    all.extend_from_slice(args);
    support::turnwal(&all, stdin)
}

/// The operator's commands on a PostgreSQL store (`--store
/// postgresql://…`): append, ls, cat, tail, verify, recover, and convert
/// both ways with a WAL store, every event byte for byte.
#[test]
fn the_command_line_works_on_a_postgres_store() {
    use support::{acks, lines, turn};
    let cluster = support::pg::shared();
    let db = {
        let url = cluster.fresh_database();
        url.rsplit("dbname=").next().unwrap().to_owned()
    };
    let url = cluster.store_url(&db);
    let mut events = turn(1, 0, 1_000);
    events.extend(turn(2, 6, 2_000));
    let out = cli(
        &url,
        &["append", "s1", "--create", "--cwd", "/w"],
        &lines(&events),
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    assert_eq!(out.stdout, acks(0..12));
    // An open turn left by a crash: turn 3 started, never ended.
    let open = &turn(3, 12, 3_000)[..3];
    let out = cli(&url, &["append", "s1"], &lines(open));
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, acks(12..15).as_str())
    );

    let out = cli(&url, &["ls", "--json"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains(r#""id":"s1""#), "{}", out.stdout);
    assert!(out.stdout.contains(r#""cwd":"/w""#), "{}", out.stdout);
    let out = cli(&url, &["cat", "s1", "--raw"], "");
    assert_eq!(out.stdout, lines(&[events.clone(), open.to_vec()].concat()));
    let out = cli(&url, &["tail", "-n", "2", "s1"], "");
    assert_eq!(out.stdout, lines(&open[1..]));
    // verify names the open turn (exit 1: recoverable), recover closes it.
    let out = cli(&url, &["verify", "s1"], "");
    assert_eq!(out.status, 1, "{}{}", out.stdout, out.stderr);
    let out = cli(&url, &["recover", "s1"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = cli(&url, &["verify", "s1"], "");
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    let recovered = cli(&url, &["cat", "s1"], "").stdout;
    assert!(
        recovered.ends_with(
            "{\"type\":\"step/end\",\"seq\":15,\"time\":3002,\"data\":{\"turn\":3,\"step\":1}}\n\
             {\"type\":\"turn/end\",\"seq\":16,\"time\":3002,\"data\":{\"turn\":3,\"reason\":{\"kind\":\"interrupted\"}}}\n"
        ),
        "{recovered}"
    );

    // Out to a WAL store and back into another database: byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("wal");
    let out = support::convert(std::path::Path::new(&url), &wal, &[]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(support::on(&wal, &["cat", "s1"], "").stdout, recovered);
    let db2 = {
        let url = cluster.fresh_database();
        url.rsplit("dbname=").next().unwrap().to_owned()
    };
    let url2 = cluster.store_url(&db2);
    let out = support::convert(&wal, std::path::Path::new(&url2), &[]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(cli(&url2, &["cat", "s1"], "").stdout, recovered);
    // A wrong database is named without its password.
    let bad = format!(
        "postgresql://{}:s3cret@/no_such_db?host={}",
        cluster.user,
        cluster.dir.path().display()
    );
    let out = cli(&bad, &["ls"], "");
    assert_ne!(out.status, 0);
    assert!(out.stderr.contains("no_such_db"), "{}", out.stderr);
    assert!(!out.stderr.contains("s3cret"), "{}", out.stderr);
}

/// Starts `turnwal ARGS` (an `append`) and feeds it `lines` a turn (six
/// lines) at a time, `pace_us` microseconds apart, from a thread that
/// stops when the process stops reading; the process, that thread and the
/// process's stdout.
fn paced_append(
    args: &[&str],
    lines: &[String],
    pace_us: u64,
) -> (
    std::process::Child,
    std::thread::JoinHandle<()>,
    std::process::ChildStdout,
) {
    use std::io::Write;
    let mut child = support::command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let feed = lines.to_vec();
    let writer = std::thread::spawn(move || {
        for turn in feed.chunks(6) {
            if writeln!(stdin, "{}", turn.join("\n"))
                .and_then(|()| stdin.flush())
                .is_err()
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(pace_us));
        }
    });
    (child, writer, stdout)
}

/// The seqs an `append` process acknowledged (`ack N` lines), in order.
fn acks_of(stdout: std::process::ChildStdout) -> Vec<u64> {
    use std::io::{BufRead, BufReader};
    BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("ack ").and_then(|n| n.parse().ok()))
        .collect()
}

/// `turnwal append` writer processes on a PostgreSQL store, each killed
/// with SIGKILL at a random moment while it writes; the next round
/// resumes the session (its open turn closed by recovery) with a new
/// process. Every event a killed writer acknowledged is stored, byte for
/// byte, at its seq; the log always verifies clean after recovery.
/// `TURNWAL_PG_KILL_ROUNDS` sets the rounds (default 8).
#[test]
fn writer_processes_sigkilled_lose_nothing_acknowledged() {
    use turnwal::{LogState, Store, StoreOptions};
    let rounds: u64 = std::env::var("TURNWAL_PG_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let cluster = support::pg::shared();
    let db = {
        let url = cluster.fresh_database();
        url.rsplit("dbname=").next().unwrap().to_owned()
    };
    let url = cluster.store_url(&db);
    let mut rng = turnwal::rng::Rng::new(0x9e_1851);
    // Every event any writer acknowledged, by seq.
    let mut acked: Vec<String> = Vec::new();
    let mut killed_mid_stream = 0;
    for round in 0..rounds {
        let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
        // The last round's writer was SIGKILLed inside its lease: this
        // process knows it is dead and takes the session at once.
        store.steal_lease("soak");
        let stored: Vec<String> = if round == 0 {
            Vec::new()
        } else {
            store
                .load("soak")
                .unwrap()
                .events
                .iter()
                .map(|e| e.to_json())
                .collect()
        };
        // Nothing acknowledged is missing or changed.
        assert!(stored.len() >= acked.len(), "round {round}");
        assert_eq!(stored[..acked.len()], acked[..], "round {round}");
        if round > 0 {
            assert_eq!(store.verify("soak").unwrap().state, LogState::Clean);
        }
        acked = stored;
        drop(store);
        let seq0 = acked.len() as u64;
        let first_turn = acked
            .iter()
            .filter(|e| e.contains(r#""type":"turn/start""#))
            .count() as u64
            + 1;
        let mut lines = Vec::new();
        for n in first_turn..first_turn + 4_000 {
            let seq = seq0 + lines.len() as u64;
            lines.extend(support::turn(n, seq, 1_000 + seq as i64));
        }
        let mut args = vec!["--store", url.as_str(), "append", "soak"];
        if round == 0 {
            args.push("--create");
        }
        // A turn at a time, paced: many batches, each its own transaction,
        // so a kill lands between and inside commits.
        let (mut child, writer, stdout) = paced_append(&args, &lines, 300);
        let reader = std::thread::spawn(move || acks_of(stdout));
        std::thread::sleep(std::time::Duration::from_millis(30 + rng.below(250)));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().unwrap();
        writer.join().unwrap();
        let acks = reader.join().unwrap();
        eprintln!("round {round}: {} acked, {status:?}", acks.len());
        if std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGKILL) {
            killed_mid_stream += 1;
        }
        // The acks name consecutive seqs from seq0.
        for (i, &seq) in acks.iter().enumerate() {
            assert_eq!(seq, seq0 + i as u64, "round {round}");
        }
        for line in &lines[..acks.len()] {
            let event = turnwal::Event::from_json(line.as_bytes()).unwrap();
            acked.push(event.to_json());
        }
    }
    assert!(
        killed_mid_stream >= rounds / 2,
        "{killed_mid_stream} of {rounds} kills landed mid-stream"
    );
    assert!(
        acked.len() as u64 >= 6 * rounds,
        "{} events acknowledged",
        acked.len()
    );
    let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
    store.steal_lease("soak");
    let last: Vec<String> = store
        .load("soak")
        .unwrap()
        .events
        .iter()
        .map(|e| e.to_json())
        .collect();
    assert_eq!(last[..acked.len()], acked[..]);
    eprintln!(
        "writer soak: {rounds} rounds, {killed_mid_stream} killed mid-stream, {} events acknowledged",
        acked.len()
    );
}

/// Failover: a primary committing synchronously to a streaming standby on
/// this machine (`synchronous_standby_names`) is killed while a writer
/// appends turns through the store; the standby is promoted and the
/// session resumed on it: every event the writer was acknowledged is
/// there, byte for byte, and the session goes on.
#[test]
fn failover_to_a_synchronous_standby_keeps_every_acknowledged_event() {
    use turnwal::{LogState, Store, StoreOptions};
    let primary = Cluster::start_with("-c synchronous_standby_names=standby1");
    let standby = Cluster::standby_of(&primary, "standby1");
    // Wait until the standby streams and is the synchronous one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let mut client =
            postgres::Client::connect(&primary.url("postgres"), postgres::NoTls).unwrap();
        let sync: Vec<String> = client
            .query("SELECT sync_state FROM pg_stat_replication", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if sync == ["sync"] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the standby never became synchronous: {sync:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = primary.store_url("postgres");
    let acked = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
            store
                .create(turnwal::SessionHeader::new("moving", 1_700_000_000_000).with_cwd("/w"))
                .unwrap();
            let mut acked: Vec<String> = Vec::new();
            for n in 1.. {
                let seq0 = acked.len() as u64;
                let turn: Vec<turnwal::Event> = support::turn(n, seq0, 1_000 + seq0 as i64)
                    .iter()
                    .map(|l| turnwal::Event::from_json(l.as_bytes()).unwrap())
                    .collect();
                match store.append("moving", &turn) {
                    Ok(_) => acked.extend(turn.iter().map(|e| e.to_json())),
                    Err(_) => break, // the primary is gone
                }
            }
            acked
        });
        std::thread::sleep(std::time::Duration::from_millis(400));
        primary.kill();
        writer.join().unwrap()
    });
    assert!(
        acked.len() >= 60,
        "{} events acknowledged before the kill",
        acked.len()
    );
    standby.promote();
    let store =
        Store::open_postgres(&standby.store_url("postgres"), StoreOptions::default()).unwrap();
    // The writer died with the primary; its lease came over with the rows.
    store.steal_lease("moving");
    let resumed = store.load("moving").unwrap();
    let stored: Vec<String> = resumed.events.iter().map(|e| e.to_json()).collect();
    assert!(
        stored.len() >= acked.len(),
        "{} of {} acknowledged events",
        stored.len(),
        acked.len()
    );
    assert_eq!(stored[..acked.len()], acked[..]);
    // The session goes on on the new primary.
    let n = 1 + stored
        .iter()
        .filter(|e| e.contains(r#""type":"turn/start""#))
        .count() as u64;
    let seq0 = stored.len() as u64;
    let next: Vec<turnwal::Event> = support::turn(n, seq0, 1_000 + seq0 as i64)
        .iter()
        .map(|l| turnwal::Event::from_json(l.as_bytes()).unwrap())
        .collect();
    store.append("moving", &next).unwrap();
    drop(store);
    let store =
        Store::open_postgres(&standby.store_url("postgres"), StoreOptions::default()).unwrap();
    assert_eq!(store.verify("moving").unwrap().state, LogState::Clean);
    assert_eq!(store.load("moving").unwrap().events.len() as u64, seq0 + 6);
    eprintln!(
        "failover: {} events acknowledged by the primary, {} on the promoted standby",
        acked.len(),
        stored.len()
    );
}

/// A batch of many rows (a bulk `convert`, a large first batch) goes in
/// through `COPY`: read back byte for byte, with packed runs and extras.
#[test]
fn a_large_batch_is_copied_in_exactly() {
    use turnwal::{Event, SessionHeader, Store, StoreOptions};
    let cluster = support::pg::shared();
    let url = cluster.fresh_database();
    let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
    let mut lines = Vec::new();
    for n in 1..=600u64 {
        let seq = lines.len() as u64;
        let text = if n % 7 == 0 {
            "lone \\ud800 é 😀 \\\"q\\\""
        } else {
            "x"
        };
        lines.extend(support::turn_saying(n, seq, 1_000 + seq as i64, text, text));
    }
    let events: Vec<Event> = lines
        .iter()
        .map(|l| Event::from_json(l.as_bytes()).unwrap())
        .collect();
    store
        .create(SessionHeader::new("bulk", 1_700_000_000_000))
        .unwrap();
    store.append("bulk", &events).unwrap();
    drop(store);
    let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
    let back = store.load("bulk").unwrap().events;
    assert_eq!(back.len(), events.len());
    for (a, b) in back.iter().zip(&events) {
        assert_eq!(a.to_json(), b.to_json());
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows: i64 = client
        .query_one(
            "SELECT count(*) FROM turnwal_events WHERE session_id = 'bulk'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        rows as usize,
        events.len(),
        "one row per event (no run of three deltas)"
    );
    // The session row counts its rows' bytes, through COPY, a small
    // append (one statement) and a repair alike.
    let counted = |client: &mut postgres::Client| -> (i64, i64) {
        let r = client
            .query_one(
                "SELECT data_bytes, (SELECT sum(octet_length(data))::bigint FROM turnwal_events \
                 WHERE session_id = 'bulk') FROM turnwal_sessions WHERE session_id = 'bulk'",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    let (kept, summed) = counted(&mut client);
    assert_eq!(kept, summed);
    // Each write stamps the holder's heartbeat (what an operator reads).
    let heartbeat = |client: &mut postgres::Client| -> String {
        client
            .query_one(
                "SELECT writer_heartbeat::text FROM turnwal_sessions WHERE session_id = 'bulk'",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let before = heartbeat(&mut client);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let seq = events.len() as u64;
    let open: Vec<Event> = support::turn(601, seq, 9_000)[..3]
        .iter()
        .map(|l| Event::from_json(l.as_bytes()).unwrap())
        .collect();
    store.append("bulk", &open).unwrap();
    let (kept, summed) = counted(&mut client);
    assert_eq!(kept, summed);
    assert!(
        heartbeat(&mut client) > before,
        "the append stamped the heartbeat"
    );
    drop(store);
    let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
    assert_eq!(store.load("bulk").unwrap().events.len(), events.len() + 5);
    let (kept, summed) = counted(&mut client);
    assert_eq!(kept, summed, "after the repair's closers");
    assert_eq!(
        store.list().unwrap()[0].bytes,
        summed as u64,
        "list reports the session row's count"
    );
}

/// Hosts opening an empty database at once: every open succeeds, the
/// schema is created once (one store id for all).
#[test]
fn hosts_opening_an_empty_database_at_once_create_the_schema_once() {
    let cluster = support::pg::shared();
    let url = cluster.fresh_database();
    let barrier = std::sync::Barrier::new(8);
    let ids: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                    barrier.wait();
                    turnwal::backend::postgres::ensure_schema(&mut client, "test").unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        ids.iter().all(|id| id == &ids[0] && id.len() == 32),
        "{ids:?}"
    );
}

/// One `Store` used from many threads: each operation gets a connection of
/// its own (sessions written at once, every event stored); after the
/// server restarts, one operation fails at most, not one per idle
/// connection, and the store goes on.
#[test]
fn a_store_lends_connections_and_recovers_from_a_server_restart() {
    use turnwal::{Event, SessionHeader, Store, StoreOptions};
    let cluster = Cluster::start();
    let url = cluster.url("postgres");
    let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
    let turn_of = |n: u64, seq: u64| -> Vec<Event> {
        support::turn(n, seq, 1_000 + seq as i64)
            .iter()
            .map(|l| Event::from_json(l.as_bytes()).unwrap())
            .collect()
    };
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (store, turn_of) = (&store, &turn_of);
            scope.spawn(move || {
                let id = format!("s{t}");
                store
                    .create(SessionHeader::new(id.clone(), 1_700_000_000_000))
                    .unwrap();
                for n in 1..=20u64 {
                    store.append(&id, &turn_of(n, (n - 1) * 6)).unwrap();
                }
            });
        }
    });
    for t in 0..4 {
        assert_eq!(store.read_from(&format!("s{t}"), 0).unwrap().len(), 120);
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let connections: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' \
             AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(connections >= 2, "{connections} connections kept idle");
    drop(client);
    cluster.crash_and_restart();
    let failures = (0..3).filter(|_| store.list().is_err()).count();
    assert!(
        failures <= 1,
        "{failures} of 3 listings failed after the restart"
    );
    assert_eq!(store.list().unwrap().len(), 4);
    store.append("s0", &turn_of(21, 120)).unwrap();
    assert_eq!(store.read_from("s0", 0).unwrap().len(), 126);
}

/// Four `turnwal append` processes (four identities: each names itself by
/// host, pid and a random token) racing on one session through the whole
/// store, each offering its own turns at the same seqs. Each takes the
/// session when it opens it; a process whose session was taken is refused
/// (`Superseded`), one that finds the log moved is refused (the seq was
/// written). Whatever the interleaving, every acknowledged event is stored
/// at its seq, no seq was acknowledged to two processes, and the log
/// verifies clean (run with --nocapture to see who won each round).
#[test]
fn processes_racing_on_one_session_leave_one_writers_events_per_seq() {
    use std::collections::BTreeMap;
    use turnwal::{Store, StoreOptions};
    let cluster = support::pg::shared();
    let db = {
        let url = cluster.fresh_database();
        url.rsplit("dbname=").next().unwrap().to_owned()
    };
    let url = cluster.store_url(&db);
    let first = support::turn(1, 0, 1_000);
    let out = cli(
        &url,
        &["append", "race", "--create"],
        &support::lines(&first),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    for round in 0..3 {
        let start = Store::open_postgres(&url, StoreOptions::default())
            .unwrap()
            .read_from("race", 0)
            .unwrap()
            .len() as u64;
        // Each process offers turns from where the log ends, its text its own.
        let offers: Vec<Vec<String>> = (0..4)
            .map(|p| {
                let mut lines = Vec::new();
                for k in 0..30u64 {
                    let seq = start + lines.len() as u64;
                    let n = seq / 6 + 1;
                    let text = format!("p{p} r{round} k{k}");
                    lines.extend(support::turn_saying(
                        n,
                        seq,
                        1_000 + seq as i64,
                        &text,
                        &text,
                    ));
                }
                lines
            })
            .collect();
        let acked: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = offers
                .iter()
                .map(|lines| {
                    let url = &url;
                    scope.spawn(move || {
                        let (mut child, writer, stdout) =
                            paced_append(&["--store", url, "append", "race"], lines, 500);
                        let acks = acks_of(stdout);
                        child.wait().unwrap();
                        writer.join().unwrap();
                        acks
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let store = Store::open_postgres(&url, StoreOptions::default()).unwrap();
        let stored: Vec<String> = store
            .read_from("race", 0)
            .unwrap()
            .iter()
            .map(|e| e.to_json())
            .collect();
        let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
        for (p, seqs) in acked.iter().enumerate() {
            for &seq in seqs {
                assert!(
                    owner.insert(seq, p).is_none(),
                    "round {round}: seq {seq} acknowledged to two processes"
                );
                let line = &offers[p][(seq - start) as usize];
                let sent = turnwal::Event::from_json(line.as_bytes())
                    .unwrap()
                    .to_json();
                assert_eq!(stored[seq as usize], sent, "round {round}: seq {seq}");
            }
        }
        assert!(!owner.is_empty(), "round {round}: nobody wrote");
        eprintln!(
            "race round {round}: acknowledged per process {:?}",
            acked.iter().map(Vec::len).collect::<Vec<_>>()
        );
        assert_eq!(
            store.verify("race").unwrap().state,
            turnwal::LogState::Clean,
            "round {round}"
        );
    }
}
