//! The WAL, SQLite and JSONL backends must be indistinguishable through the
//! `Store` (issue 5, "a differential property test"). Every case runs one
//! history against a native WAL store, a SQLite store and the JSONL stores
//! its `Config` names (raw `session.jsonl`, zstd `session.jsonl.zstd`)
//! side by side (`turnwal_testkit::crashlab::differential`, which the
//! `differential` fuzz target shares) and requires, after every operation,
//! the same answer from each, within the JSONL rules the module docs of
//! `crashlab::differential` list (no event named like a packed tag, the
//! header's stored `delegationDepth: 0`, the default key order of a lone
//! `surfaceOp`, torn tails as upstream's writer leaves them):
//!
//! - appends, flushes, closes, recoveries (dry and committed), loads,
//!   deletes, refused batches: the same result or error, and each
//!   session's revision moving in lockstep (on every append and repair,
//!   never on a refused batch, never for another session);
//! - at every check (each reopen, each torn tail, the end): `inspect`,
//!   `view` (which must also equal `inspect`), `list` (every field but the
//!   byte size; of a torn session's `problem`, the reason code), and
//!   `read_from` at every seq from 0 to length+1, none of which may move a
//!   revision.
//!
//! Events are compared whole: type, seq, time, the exact `data` bytes,
//! `ignorable`, `sourceEventSeqs`, `surfaceOp` and their key order.
//!
//! The logs are random and valid: `assistant/chunk` runs of every packed
//! kind (text, reasoning, tool-call deltas) and length (1, 2, 3, up to 115,
//! and in `long_runs_and_huge_members` 1,024 to 2,123 and members over the
//! 1 MiB row bound), deltas that must stay scalar rows, run breaks, tool
//! calls and results (some in the closers' own shape), ignorable and plain
//! events named `text-chunks`/`reasoning-chunks`/`tool-call-chunks`,
//! decreasing times and jumps past the safe integers, `surfaceOp` and
//! `sourceEventSeqs` in both key orders, open final turns; split into
//! random batches (a run split across batches packs separately in SQLite),
//! over 1 to 3 sessions, Strict and Lenient.
//!
//! Crashes are fresh `Store`s over the same storage; torn tails are written
//! into each backend's own storage (a partial next record / row, the last
//! event cut short, the last events of a batch never written).
//!
//! `fixed_seed_history` runs both JSONL compressions, the random cases one
//! in three each (none, raw, zstd, by seed), `long_runs_and_huge_members`
//! none, `long_runs_and_huge_members_through_jsonl` and
//! `torn_tails_through_jsonl` both.
//!
//! `TURNWAL_DIFF_CASES=N` runs N random cases instead of 16 (the seeds are
//! random per run; proptest prints a failing case's ops and seed).

use crate::support;

use proptest::prelude::*;
use support::pg;
use turnwal::Policy;
use turnwal::backend::jsonl::Compression;
use turnwal_testkit::crashlab::differential::{
    Config, DiffOp, DiffStats, Differential, Shapes, Sweep, TornTail,
};

fn run(config: &Config, ops: &[DiffOp]) -> DiffStats {
    let mut d = Differential::new(config);
    for op in ops {
        d.apply(op);
    }
    d.finish()
}

fn app(session: usize, events: usize) -> DiffOp {
    DiffOp::Append { session, events }
}

/// A fixed history over three sessions (Strict, Lenient, Strict) that
/// takes every operation, with the durable settings (WAL fsync per batch,
/// SQLite `synchronous = FULL`).
#[test]
fn fixed_seed_history() {
    use DiffOp::*;
    let config = Config {
        seed: 19,
        policies: vec![Policy::Strict, Policy::Lenient, Policy::Strict],
        shapes: Shapes::default(),
        durable: true,
        sweep: Sweep::Every,
        scratch: None,
        jsonl: vec![Compression::None, Compression::Zstd],
        postgres: Some(pg::shared().fresh_database()),
    };
    let ops = [
        // Partitions of 1, 2, 3 and more, interleaved across sessions.
        app(0, 1),
        app(0, 2),
        app(0, 3),
        app(1, 40),
        app(0, 37),
        app(2, 5),
        app(1, 1),
        app(2, 64),
        Check,
        Flush { session: 0 },
        Close { session: 1 },
        app(1, 9),
        ReadFrom { session: 0, seq: 0 },
        ReadFrom {
            session: 0,
            seq: 43,
        },
        ReadFrom {
            session: 0,
            seq: 10_000,
        },
        // A crash with turns open, then more appends (repairing first).
        Reopen,
        app(0, 21),
        app(1, 2),
        Recover {
            session: 2,
            dry_run: true,
        },
        Recover {
            session: 2,
            dry_run: false,
        },
        app(2, 30),
        // Every torn tail, each recovered a different way.
        Tear {
            session: 0,
            how: TornTail::PartialNext,
        },
        Recover {
            session: 0,
            dry_run: true,
        },
        Load { session: 0 },
        Tear {
            session: 1,
            how: TornTail::CutLast(129),
        },
        app(1, 12),
        Tear {
            session: 2,
            how: TornTail::DropLast(7),
        },
        Flush { session: 2 },
        app(2, 18),
        // Refused batches change nothing; an empty one reports.
        Reject { session: 0, how: 0 },
        Reject { session: 1, how: 1 },
        Reject { session: 2, how: 2 },
        app(2, 0),
        // Deleted and created again (a new incarnation).
        Delete { session: 1 },
        Check,
        app(1, 25),
        app(0, 50),
        app(1, 3),
    ];
    let stats = run(&config, &ops);
    eprintln!("fixed_seed_history: {stats:?}");

    // The history is fixed: these are its counts (finish adds 8 ops and
    // 4 checks; each torn tail is a crash).
    assert_eq!(stats.ops, ops.len() as u64 + 8, "{stats:?}");
    assert_eq!(
        (stats.reopens, stats.tears, stats.checks),
        (6, 3, 10),
        "{stats:?}"
    );
    // The history reached what it is for.
    let g = &stats.generated;
    for (kind, runs) in ["text", "reasoning", "tool-call"].iter().zip(&g.runs) {
        assert!(runs[..4].iter().all(|&n| n > 0), "{kind} runs {runs:?}");
    }
    assert!(stats.packed_rows.iter().all(|&n| n > 0), "{stats:?}");
    assert!(g.both_orders.iter().all(|&n| n > 0), "{g:?}");
    assert!(g.unpackable > 0, "{g:?}");
    assert!(stats.jsonl_packed_rows.iter().all(|&n| n > 0), "{stats:?}");
    assert!(g.closer_shaped > 0 && g.decreasing_times > 0, "{g:?}");
    assert!(stats.repairs > 0 && stats.closers > 0, "{stats:?}");
}

/// Compaction in lockstep (issue 16): the WAL store's sessions are sealed
/// into units now and then while SQLite and JSONL keep their rows and
/// lines, and every answer stays the same — reads at every seq, listing,
/// verify, torn tails after a unit (a crash never drops part of a unit: it
/// is published whole), repairs, and appends after it.
#[test]
fn compacted_wal_sessions_answer_as_the_others() {
    use DiffOp::*;
    let config = Config {
        seed: 23,
        policies: vec![Policy::Strict, Policy::Lenient],
        shapes: Shapes::default(),
        durable: false,
        sweep: Sweep::Every,
        scratch: None,
        jsonl: vec![Compression::Zstd],
        postgres: None,
    };
    let ops = [
        app(0, 40),
        app(1, 30),
        app(0, 25),
        Compact { session: 0 },
        app(0, 12),
        Compact { session: 1 },
        // Torn after a unit, and torn so that a drop would reach into one.
        Tear {
            session: 0,
            how: TornTail::CutLast(3),
        },
        Tear {
            session: 1,
            how: TornTail::DropLast(63),
        },
        Load { session: 0 },
        Recover {
            session: 1,
            dry_run: false,
        },
        app(0, 30),
        app(1, 20),
        Compact { session: 0 },
        Compact { session: 0 },
        Reopen,
        app(0, 8),
        Compact { session: 1 },
        Delete { session: 1 },
        app(1, 10),
        Compact { session: 1 },
    ];
    let stats = run(&config, &ops);
    eprintln!("compacted_wal_sessions_answer_as_the_others: {stats:?}");
    assert!(stats.compactions >= 4, "{stats:?}");
    assert_eq!(stats.tears, 2, "{stats:?}");
}

/// Runs of 1,024 members and more in one batch (rows of at most 1,024
/// members, a remainder of one or two stored as scalar rows) and members of
/// 250 to 450 KiB (rows cut at 1 MiB, members that fit in no row of three
/// stored alone), crashed and torn. Reading a log of 1,200 events at every
/// seq costs seconds, so `read_from` runs at every seq once, after the
/// first crash; the other checks read at 96 seqs spread over the log plus
/// every seq next to where a packed row starts or ends.
#[test]
fn long_runs_and_huge_members() {
    use DiffOp::*;
    let config = Config {
        seed: 0x10_2410,
        policies: vec![Policy::Strict, Policy::Lenient],
        shapes: Shapes {
            long_runs: 35,
            huge_runs: 8,
            lean: false,
            realistic: false,
        },
        durable: false,
        sweep: Sweep::AtMost(96),
        scratch: None,
        jsonl: Vec::new(),
        postgres: Some(pg::shared().fresh_database()),
    };
    let mut d = Differential::new(&config);
    for op in [app(0, 30), app(1, 30), app(0, 1_200), app(1, 40)] {
        d.apply(&op);
    }
    d.set_sweep(Sweep::Every);
    d.apply(&Reopen);
    d.set_sweep(Sweep::AtMost(96));
    d.apply(&Tear {
        session: 0,
        how: TornTail::DropLast(5),
    });
    d.apply(&app(0, 40));
    let stats = d.finish();
    eprintln!("long_runs_and_huge_members: {stats:?}");
    let g = &stats.generated;
    assert!(g.runs.iter().any(|r| r[4] > 0), "{g:?}");
    assert!(g.huge_runs > 0, "{g:?}");
    assert_eq!(stats.largest_row, 1_024, "{stats:?}");
}

/// Realistic sessions (whole turns of streamed deltas, as harness sessions
/// are) on every store, the WAL sealing them as it goes and PostgreSQL
/// beside: appends in batches that split runs and turns at random places,
/// crashes with turns open, every kind of torn tail, deletes; every check
/// reading at 64 seqs spread over each log plus every seq next to a packed
/// row's edge.
#[test]
fn realistic_sessions_answer_alike() {
    use DiffOp::*;
    let config = Config {
        seed: 27,
        policies: vec![Policy::Strict, Policy::Permissive],
        shapes: Shapes {
            realistic: true,
            ..Shapes::default()
        },
        durable: false,
        sweep: Sweep::AtMost(64),
        scratch: None,
        jsonl: vec![Compression::None, Compression::Zstd],
        postgres: Some(pg::shared().fresh_database()),
    };
    let ops = [
        app(0, 1),
        app(0, 250),
        app(1, 90),
        app(0, 7),
        app(1, 400),
        Check,
        Reopen,
        app(0, 333),
        Tear {
            session: 1,
            how: TornTail::CutLast(77),
        },
        app(1, 120),
        Tear {
            session: 0,
            how: TornTail::PartialNext,
        },
        Load { session: 0 },
        app(0, 500),
        Tear {
            session: 1,
            how: TornTail::DropLast(3),
        },
        app(1, 60),
        Delete { session: 1 },
        app(1, 300),
        Close { session: 0 },
        app(0, 45),
    ];
    let stats = run(&config, &ops);
    eprintln!("realistic_sessions_answer_alike: {stats:?}");
    assert!(stats.packed_rows.iter().any(|&n| n > 0), "{stats:?}");
    assert!(stats.jsonl_packed_rows.iter().any(|&n| n > 0), "{stats:?}");
    assert_eq!(stats.tears, 3, "{stats:?}");
}

/// Long runs through the JSONL stores (raw and zstd) beside the WAL and
/// SQLite: JSONL packs a run of any length into one line (SQLite cuts rows
/// at 1,024 members), so a 2,000-member run is one line. Members of 250 to
/// 450 KiB are left out: a JSONL `read_from` parses the whole transcript,
/// and reading a multi-MiB transcript at every check's seqs costs 10 s in a
/// debug build. Two sessions, every check reading at 48 seqs spread over
/// the log plus every seq next to a packed row's edge (of SQLite's rows and
/// of JSONL's lines).
#[test]
fn long_runs_and_huge_members_through_jsonl() {
    use DiffOp::*;
    let config = Config {
        seed: 0x10_2411,
        policies: vec![Policy::Strict, Policy::Lenient],
        shapes: Shapes {
            long_runs: 35,
            huge_runs: 0,
            lean: true,
            realistic: false,
        },
        durable: false,
        sweep: Sweep::AtMost(48),
        scratch: None,
        jsonl: vec![Compression::None, Compression::Zstd],
        postgres: None,
    };
    let mut d = Differential::new(&config);
    for op in [app(0, 30), app(1, 30), app(0, 1_200), app(1, 40)] {
        d.apply(&op);
    }
    d.apply(&Reopen);
    d.apply(&Tear {
        session: 0,
        how: TornTail::DropLast(5),
    });
    d.apply(&app(0, 40));
    let stats = d.finish();
    eprintln!("long_runs_and_huge_members_through_jsonl: {stats:?}");
    let g = &stats.generated;
    assert!(g.runs.iter().any(|r| r[4] > 0), "{g:?}");
    assert_eq!(stats.largest_row, 1_024, "{stats:?}");
    assert!(stats.jsonl_largest_row > 1_024, "{stats:?}");
}

/// Torn tails through both JSONL compressions, more of them than random
/// cases give: each kind at cut points from the first byte to the last,
/// after batches of many sizes (a zstd `CutLast` tears the last batch's
/// frame after its other lines, which recovery keeps; a `PartialNext`
/// alternately tears the whole last frame, every line kept, or adds a torn
/// frame of nothing; a `DropLast` cuts packed lines and frames).
#[test]
fn torn_tails_through_jsonl() {
    use DiffOp::*;
    let mut tears = 0;
    for seed in 0..6u64 {
        let config = Config {
            seed: 0x7ea5 + seed,
            policies: vec![Policy::Strict, Policy::Lenient],
            shapes: Shapes {
                lean: true,
                ..Shapes::default()
            },
            durable: seed % 2 == 0,
            sweep: Sweep::Every,
            scratch: None,
            jsonl: vec![Compression::None, Compression::Zstd],
            postgres: None,
        };
        let k = (seed * 51) as u8;
        let ops = [
            app(0, 20 + seed as usize * 7),
            app(1, 1 + seed as usize * 5),
            Tear {
                session: 0,
                how: TornTail::CutLast(k),
            },
            app(0, 9),
            Tear {
                session: 1,
                how: TornTail::PartialNext,
            },
            Load { session: 1 },
            app(1, 2 + seed as usize),
            Tear {
                session: 0,
                how: TornTail::DropLast(seed as u8 * 3 + 1),
            },
            app(0, 30),
            Tear {
                session: 1,
                how: TornTail::CutLast(255 - k),
            },
            Recover {
                session: 1,
                dry_run: false,
            },
            Tear {
                session: 0,
                how: TornTail::PartialNext,
            },
        ];
        let stats = run(&config, &ops);
        tears += stats.tears;
    }
    assert!(tears >= 30, "{tears} torn tails");
}

fn op(sessions: usize) -> impl Strategy<Value = DiffOp> {
    let s = 0..sessions;
    prop_oneof![
        14 => (s.clone(), 0..40usize).prop_map(|(session, events)| DiffOp::Append { session, events }),
        1 => s.clone().prop_map(|session| DiffOp::Flush { session }),
        1 => s.clone().prop_map(|session| DiffOp::Close { session }),
        1 => Just(DiffOp::Reopen),
        1 => (s.clone(), 0..3u8, any::<u8>()).prop_map(|(session, kind, n)| DiffOp::Tear {
            session,
            how: match kind {
                0 => TornTail::CutLast(n),
                1 => TornTail::PartialNext,
                _ => TornTail::DropLast(n % 40),
            },
        }),
        1 => (s.clone(), any::<bool>()).prop_map(|(session, dry_run)| DiffOp::Recover { session, dry_run }),
        1 => s.clone().prop_map(|session| DiffOp::Load { session }),
        1 => s.clone().prop_map(|session| DiffOp::Delete { session }),
        1 => (s.clone(), any::<u8>()).prop_map(|(session, how)| DiffOp::Reject { session, how }),
        1 => s.clone().prop_map(|session| DiffOp::Compact { session }),
        1 => (s, 0..300u64).prop_map(|(session, seq)| DiffOp::ReadFrom { session, seq }),
    ]
}

fn case() -> impl Strategy<Value = (Config, Vec<DiffOp>)> {
    (any::<u64>(), prop::collection::vec(any::<bool>(), 1..=3)).prop_flat_map(|(seed, lenient)| {
        let policies: Vec<Policy> = lenient
            .iter()
            .map(|&l| if l { Policy::Lenient } else { Policy::Strict })
            .collect();
        let n = policies.len();
        let config = Config {
            seed,
            policies,
            shapes: Shapes::default(),
            durable: false,
            sweep: Sweep::Every,
            scratch: None,
            // One case in three without JSONL: the generator then also
            // names events like packed row tags.
            jsonl: match seed % 3 {
                0 => Vec::new(),
                1 => vec![Compression::None],
                _ => vec![Compression::Zstd],
            },
            // Set by the test: a database of its own per case.
            postgres: None,
        };
        (Just(config), prop::collection::vec(op(n), 4..24))
    })
}

fn cases() -> u32 {
    std::env::var("TURNWAL_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Random seeds, sessions, policies and operation sequences.
    #[test]
    fn random_histories((mut config, ops) in case()) {
        // Every other case with a PostgreSQL store in lockstep.
        if config.seed % 2 == 0 {
            config.postgres = Some(pg::shared().fresh_database());
        }
        let stats = run(&config, &ops);
        eprintln!("random_histories: {} sessions, jsonl {:?}, {} ops: {stats:?}", config.policies.len(), config.jsonl, ops.len());
        prop_assert!(stats.checks >= 4);
    }
}

/// The same torn last event in both backends — WAL: its record cut in the
/// middle, as an interrupted write leaves it; SQLite: its row's JSON text
/// cut short — reads as the same torn tail (`incomplete-record` at its seq)
/// wherever the text ends: inside a string, a `true`/`false`/`null`
/// literal or a `\u` escape. Both recover to the same log.
#[test]
fn a_text_cut_inside_a_literal_or_escape_is_torn_alike() {
    use turnwal::backend::sqlite::SqliteOptions;
    use turnwal::backend::wal::WalBackend;
    use turnwal::{CutReason, Event, LogState, SessionHeader, Store, StoreOptions};

    let cases = [
        (r#"{"id":"u1","text":"abc"}"#, r#"{"id":"u1","text":"ab"#),
        (r#"{"id":"u1","ok":true}"#, r#"{"id":"u1","ok":tr"#),
        (r#"{"id":"u1","ok":false}"#, r#"{"id":"u1","ok":f"#),
        (r#"{"id":"u1","v":null}"#, r#"{"id":"u1","v":nul"#),
        (
            r#"{"id":"u1","text":"\u00e9"}"#,
            r#"{"id":"u1","text":"\u00"#,
        ),
        (r#"{"id":"u1","text":"\u00e9"}"#, r#"{"id":"u1","text":"\u"#),
    ];
    for (data, prefix) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (wal_dir, db) = (dir.path().join("wal"), dir.path().join("s.db"));
        let open = || {
            (
                Store::open(&wal_dir).unwrap(),
                Store::open_sqlite(&db, SqliteOptions::default(), StoreOptions::default()).unwrap(),
            )
        };
        let events = [
            Event::new("turn/start", 0, 10, r#"{"turn":1}"#).unwrap(),
            Event::new("user/message", 1, 11, data).unwrap(),
        ];
        let (wal, sqlite) = open();
        for store in [&wal, &sqlite] {
            store.create(SessionHeader::new("s", 1)).unwrap();
            // The message in a batch of its own: the first batch is
            // published with the file, and no crash tears it.
            store.append("s", &events[..1]).unwrap();
            store.append("s", &events[1..]).unwrap();
        }
        drop((wal, sqlite));

        let log = WalBackend::open(&wal_dir).unwrap().log_path("s");
        let mut bytes = std::fs::read(&log).unwrap();
        let n = bytes.len();
        let last = u32::from_le_bytes(bytes[n - 4..].try_into().unwrap()) as usize;
        bytes.truncate(n - last / 2);
        std::fs::write(&log, bytes).unwrap();
        // A tear of acknowledged bytes: the power-loss window, whose proof
        // never reached the disk (docs/RECOVERY.md).
        std::fs::remove_file(turnwal::backend::wal::proof::path_of(&log)).unwrap();
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute(
                "UPDATE events SET data = ?1 WHERE session_id = 's' AND seq = 1",
                [prefix],
            )
            .unwrap();

        let (wal, sqlite) = open();
        let closer = r#"{"type":"turn/end","seq":1,"time":10,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#;
        for (name, store) in [("wal", &wal), ("sqlite", &sqlite)] {
            let view = store.inspect("s").unwrap();
            let cut = view.cut.as_ref().map(|c| (c.seq, c.reason));
            let shown: Vec<String> = view.events.iter().map(Event::to_json).collect();
            assert_eq!(
                (view.state, view.stored, cut),
                (LogState::Torn, 1, Some((1, CutReason::Incomplete))),
                "{name}, {prefix}"
            );
            assert_eq!(
                shown,
                [events[0].to_json(), closer.to_owned()],
                "{name}, {prefix}"
            );
            let loaded: Vec<String> = store
                .load("s")
                .unwrap()
                .events
                .iter()
                .map(Event::to_json)
                .collect();
            assert_eq!(loaded, shown, "{name}, {prefix}");
        }
    }
}

/// `sourceEventSeqs` written with whitespace (`[ 0, 1 ]`; `Event::from_json`
/// and `turnwal append` accept it) reads back as `[0,1]` from every backend:
/// events parsed from JSON carry its canonical spelling (SQLite's column
/// holds the seqs as varints, not their text, so the WAL used to keep the
/// text as given where SQLite gave `[0,1]` back; this was an ignored
/// reproduction until the parse canonicalized it).
#[test]
fn source_event_seqs_spelling_is_the_same_in_every_backend() {
    use std::sync::Arc;
    use turnwal::backend::jsonl::JsonlBackend;
    use turnwal::backend::sqlite::SqliteOptions;
    use turnwal::{Event, SessionHeader, Store, StoreOptions};

    let dir = tempfile::tempdir().unwrap();
    let jsonl = |c: Compression, name: &str| {
        let backend = JsonlBackend::open(dir.path().join(name), c).unwrap();
        Store::with_backend(Arc::new(backend), StoreOptions::default())
    };
    let stores = [
        ("wal", Store::open(dir.path().join("wal")).unwrap()),
        (
            "sqlite",
            Store::open_sqlite(
                dir.path().join("s.db"),
                SqliteOptions::default(),
                StoreOptions::default(),
            )
            .unwrap(),
        ),
        ("jsonl", jsonl(Compression::None, "raw")),
        ("jsonl+zstd", jsonl(Compression::Zstd, "zstd")),
    ];
    let line = r#"{"type":"user/message","seq":2,"time":12,"data":{"id":"u2"},"sourceEventSeqs":[ 0, 1 ]}"#;
    let canonical =
        r#"{"type":"user/message","seq":2,"time":12,"data":{"id":"u2"},"sourceEventSeqs":[0,1]}"#;
    let events = [
        Event::new("turn/start", 0, 10, r#"{"turn":1}"#).unwrap(),
        Event::new("user/message", 1, 11, r#"{"id":"u1"}"#).unwrap(),
        Event::from_json(line.as_bytes()).unwrap(),
    ];
    for (name, store) in &stores {
        store
            .create(SessionHeader::new("s", 1).with_cwd("/w"))
            .unwrap();
        store.append("s", &events).unwrap();
        let back = store.read_from("s", 2).unwrap();
        assert_eq!(back[0].to_json(), canonical, "{name}");
    }
    drop(stores);
}

/// A JSONL session created without `delegationDepth` stores
/// `"delegationDepth":0` (docs/JSONL.md, "The header line"); the session
/// shows that 0 while it is live in the creating `Store` too, as a reader
/// of the file (or the same store after a crash) finds it. Found by the
/// differential test, where the live header was the one given to `create`.
#[test]
fn jsonl_header_depth_is_the_same_live_and_reopened() {
    use std::sync::Arc;
    use turnwal::backend::jsonl::JsonlBackend;
    use turnwal::{Event, SessionHeader, Store, StoreOptions};

    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let backend = JsonlBackend::open(dir.path(), Compression::None).unwrap();
        Store::with_backend(Arc::new(backend), StoreOptions::default())
    };
    let store = open();
    store
        .create(SessionHeader::new("s", 1).with_cwd("/w"))
        .unwrap();
    store
        .append(
            "s",
            &[Event::new("turn/start", 0, 10, r#"{"turn":1}"#).unwrap()],
        )
        .unwrap();
    let live = store.inspect("s").unwrap().header;
    let other = open().inspect("s").unwrap().header;
    assert_eq!(
        (live.delegation_depth, other.delegation_depth),
        (Some(0), Some(0)),
        "live: {}, read by another store: {}",
        live.to_json(),
        other.to_json()
    );
}

/// An event whose type is a packed-row tag (`text-chunks`,
/// `reasoning-chunks`, `tool-call-chunks`; a plugin may name one so, and the
/// WAL and SQLite store it) cannot be held by JSONL: upstream's reader takes
/// its line for a malformed packed row. A JSONL store refuses the batch,
/// naming the seq and the type, with nothing written — at the first append
/// and at a later one. Found by the differential test, where the store
/// acknowledged the batch and then refused the whole log as corrupt.
#[test]
fn jsonl_refuses_an_event_named_like_a_packed_tag() {
    use std::sync::Arc;
    use turnwal::backend::jsonl::JsonlBackend;
    use turnwal::{Error, Event, SessionHeader, Store, StoreOptions};

    let end = |seq| {
        Event::new(
            "turn/end",
            seq,
            12,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        )
        .unwrap()
    };
    for compression in [Compression::None, Compression::Zstd] {
        for tag in ["text-chunks", "reasoning-chunks", "tool-call-chunks"] {
            let dir = tempfile::tempdir().unwrap();
            let open = || {
                let backend = JsonlBackend::open(dir.path(), compression).unwrap();
                Store::with_backend(Arc::new(backend), StoreOptions::default())
            };
            let store = open();
            store.create(SessionHeader::new("s", 1)).unwrap();
            let start = Event::new("turn/start", 0, 10, r#"{"turn":1}"#).unwrap();
            let tagged = |seq: u64| {
                Event::from_json(
                    format!(
                        r#"{{"type":"{tag}","seq":{seq},"time":11,"data":{{"plugin":true}},"ignorable":true}}"#
                    )
                    .as_bytes(),
                )
                .unwrap()
            };
            let refused = |err: Error, seq: u64| {
                let text = err.to_string();
                assert!(matches!(err, Error::Event(_)), "{text}");
                assert!(
                    text.contains(&format!("seq {seq}"))
                        && text.contains(&format!("cannot hold an event of type \"{tag}\"")),
                    "{text}"
                );
            };
            // The first batch: nothing is materialized.
            let err = store
                .append("s", &[start.clone(), tagged(1), end(2)])
                .unwrap_err();
            refused(err, 1);
            assert!(open().list().unwrap().is_empty());
            // A later batch: the log keeps what it had, and goes on.
            store.append("s", std::slice::from_ref(&start)).unwrap();
            let err = store.append("s", &[tagged(1), end(2)]).unwrap_err();
            refused(err, 1);
            store.append("s", &[end(1)]).unwrap();
            drop(store);
            let back = open().read_from("s", 0).unwrap();
            assert_eq!(back, vec![start, end(1)], "{compression:?} {tag}");
        }
    }
}
