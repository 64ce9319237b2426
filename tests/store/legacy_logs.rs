//! What upstream's backends store and only its reader judges (issue 15):
//! logs written by older harnesses, pre-react-loop vocabulary, malformed
//! events and foreign format versions. A `Permissive` session (what the
//! Node binding creates) stores each of them byte for byte on the WAL,
//! SQLite and JSONL stores, finds the commit point and closers of such a
//! log after a crash as upstream's `interruptedTurnClosers` does after its
//! read migrations, and refuses a foreign format version when the session
//! is read; `Strict` and `Lenient` sessions still refuse them at append.

use std::path::Path;
use std::sync::Arc;

use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::{Error, Event, LogState, Policy, SessionHeader, Store, StoreOptions};

/// One store kind, opened fresh over the same files each time (a restart).
#[derive(Clone, Copy, Debug)]
enum Kind {
    Wal,
    Sqlite,
    Jsonl,
}

const KINDS: [Kind; 3] = [Kind::Wal, Kind::Sqlite, Kind::Jsonl];

fn open(kind: Kind, dir: &Path, policy: Policy) -> Store {
    let options = StoreOptions {
        policy,
        ..StoreOptions::default()
    };
    match kind {
        Kind::Wal => Store::open_with_options(dir.join("wal"), options).unwrap(),
        Kind::Sqlite => {
            Store::open_sqlite(dir.join("s.db"), SqliteOptions::default(), options).unwrap()
        }
        Kind::Jsonl => {
            let backend = JsonlBackend::open(dir.join("jsonl"), Compression::None).unwrap();
            Store::with_backend(Arc::new(backend), options)
        }
    }
}

fn header(id: &str) -> SessionHeader {
    let mut header = SessionHeader::new(id, 1_000);
    header.cwd = Some("/w".into());
    header
}

/// Envelopes as a producer hands them over, one JSON text each.
fn events(lines: &[&str]) -> Vec<Event> {
    lines
        .iter()
        .map(|line| Event::from_json(line.as_bytes()).unwrap())
        .collect()
}

fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// A log from before messages had ids and wrappers: a flat user message,
/// an assistant message whose tool-call blocks sit in `data.content`, and
/// tool results `{callId, content, isError}` (an append and a replace).
const PRE_IDENTITY: &[&str] = &[
    r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#,
    r#"{"type":"user/message","seq":1,"time":11,"data":{"content":[{"type":"text","text":"list the files"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    r#"{"type":"step/start","seq":2,"time":12,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"assistant/message","seq":3,"time":13,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"ls-1","name":"ls","arguments":"{\"dir\":\".\"}"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}"#,
    r#"{"type":"tool/call","seq":4,"time":14,"data":{"turn":1,"step":1,"callId":"ls-1","name":"ls","arguments":"{\"dir\":\".\"}"}}"#,
    r#"{"type":"tool/result","seq":5,"time":15,"data":{"turn":1,"step":1,"callId":"ls-1","content":[{"type":"text","text":"a b c"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":"append"}"#,
    r#"{"type":"tool/result","seq":6,"time":16,"data":{"turn":1,"step":1,"callId":"ls-1","content":[{"type":"text","text":"(pruned)"}],"isError":false},"sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}"#,
    r#"{"type":"step/end","seq":7,"time":17,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"turn/end","seq":8,"time":18,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
];

/// The react-loop refactor's predecessor: triggers on `turn/start`,
/// `steering/message` (with `surfaceOp`, on a type that is no longer a
/// surface type), and the old `turn/end` reasons.
const PRE_REACT_LOOP: &[&str] = &[
    r#"{"type":"turn/start","seq":0,"time":20,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
    r#"{"type":"step/start","seq":1,"time":21,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"steering/message","seq":2,"time":22,"data":{"turn":1,"content":[{"type":"text","text":"stop, use tabs"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    r#"{"type":"step/end","seq":3,"time":23,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"turn/end","seq":4,"time":24,"data":{"turn":1,"reason":{"kind":"error","step":1,"failure":{"message":"overloaded","code":"SERVER"}}}}"#,
    r#"{"type":"turn/start","seq":5,"time":25,"data":{"turn":2,"trigger":{"kind":"retry"}}}"#,
    r#"{"type":"turn/end","seq":6,"time":26,"data":{"turn":2,"reason":{"kind":"aborted"}}}"#,
];

/// Events upstream's reader refuses, each stored as handed over.
const MALFORMED: &[&str] = &[
    r#"{"type":"turn/start","seq":0,"time":30,"data":{"turn":1}}"#,
    r#"{"type":"user/message","seq":1,"time":31,"data":{"id":"u1","role":"assistant","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    r#"{"type":"step/start","seq":2,"time":32,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"assistant/message","seq":3,"time":33,"data":{},"surfaceOp":"append"}"#,
    r#"{"type":"tool/result","seq":4,"time":34,"data":{"turn":1,"step":1,"message":null},"surfaceOp":"append"}"#,
    r#"{"type":"request/header-delta","seq":5,"time":35,"data":{"delta":{}}}"#,
    r#"{"type":"step/end","seq":6,"time":36,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"turn/end","seq":7,"time":37,"data":{"turn":1,"step":1,"reason":null}}"#,
    r#"{"type":"plugin/test","seq":8,"time":38,"data":null,"ignorable":true}"#,
];

/// A malformed `turn/end` early and retired forms later: upstream looks for
/// the retired forms over the whole log before it migrates anything, and
/// among them for a `request/header-delta` before a `mode/set`, so a
/// reader that lends events as it goes still names the last of these.
const RETIRED_LATE: &[&str] = &[
    r#"{"type":"turn/start","seq":0,"time":40,"data":{"turn":1}}"#,
    r#"{"type":"turn/end","seq":1,"time":41,"data":{"turn":1,"reason":{"kind":"completed","why":1}}}"#,
    r#"{"type":"turn/start","seq":2,"time":42,"data":{"turn":2}}"#,
    r#"{"type":"mode/set","seq":3,"time":43,"data":{"mode":"plan"}}"#,
    r#"{"type":"request/header-delta","seq":4,"time":44,"data":{"delta":{}}}"#,
    r#"{"type":"turn/end","seq":5,"time":45,"data":{"turn":2,"reason":{"kind":"completed"}}}"#,
];

/// Only a malformed `turn/end`, after everything else: a read fails there,
/// having lent what came before it.
const MALFORMED_LATE: &[&str] = &[
    r#"{"type":"turn/start","seq":0,"time":50,"data":{"turn":1}}"#,
    r#"{"type":"turn/end","seq":1,"time":51,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    r#"{"type":"turn/start","seq":2,"time":52,"data":{"turn":2}}"#,
    r#"{"type":"turn/end","seq":3,"time":53,"data":{"turn":2,"reason":{"kind":"completed","why":1}}}"#,
];

/// Stored, and refused by every read with upstream's text: the first
/// event its reader refuses.
const REFUSED_ON_READ: &[(&str, u64, &str)] = &[
    (
        "malformed",
        5,
        "session \"malformed\" contains unsupported legacy request/header-delta event at seq 5",
    ),
    (
        "retired-late",
        4,
        "session \"retired-late\" contains unsupported legacy request/header-delta event at seq 4",
    ),
    (
        "malformed-late",
        3,
        "session \"malformed-late\" contains malformed pre-react-loop turn/end at seq 3",
    ),
];

/// Every event `store.read` lends, as JSON texts.
fn read_texts(store: &Store, id: &str) -> Result<Vec<String>, Error> {
    let mut reader = store.read(id)?;
    let mut out = Vec::new();
    while let Some(event) = reader.next_event()? {
        out.push(event.to_event().to_json());
    }
    Ok(out)
}

#[test]
fn permissive_sessions_store_legacy_and_malformed_logs_byte_for_byte() {
    for kind in KINDS {
        for (id, log) in [
            ("pre-identity", PRE_IDENTITY),
            ("pre-react-loop", PRE_REACT_LOOP),
            ("malformed", MALFORMED),
            ("retired-late", RETIRED_LATE),
            ("malformed-late", MALFORMED_LATE),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let log = events(log);
            {
                let store = open(kind, dir.path(), Policy::Permissive);
                store
                    .create_with_policy(header(id), Policy::Permissive)
                    .unwrap();
                store.append(id, &log[..3]).unwrap();
                store.append(id, &log[3..]).unwrap();
            }
            // A cold append (another store reads the session back first).
            let n = log.len() as u64;
            let next = events(&[
                &format!(r#"{{"type":"turn/start","seq":{n},"time":90,"data":{{"turn":9}}}}"#),
                &format!(
                    r#"{{"type":"turn/end","seq":{},"time":91,"data":{{"turn":9,"reason":{{"kind":"completed"}}}}}}"#,
                    n + 1
                ),
            ]);
            let appended = open(kind, dir.path(), Policy::Permissive).append(id, &next);
            let refused = REFUSED_ON_READ.iter().find(|(name, _, _)| *name == id);
            let all: Vec<Event> = match (refused, kind, appended) {
                (_, _, Ok(_)) => log.iter().chain(&next).cloned().collect(),
                // The JSONL store opens a writer as upstream's reader reads
                // the log: it refuses to append to a log that reader
                // refuses (the WAL and SQLite writers open from the tail).
                (Some(_), Kind::Jsonl, Err(Error::Corrupt(_))) => log.clone(),
                (_, _, Err(e)) => panic!("{kind:?} {id}: {e}"),
            };
            let store = open(kind, dir.path(), Policy::Permissive);
            assert_eq!(
                texts(&store.read_raw(id, 0).unwrap()),
                texts(&all),
                "{kind:?} {id}: stored byte for byte"
            );
            let report = store.verify(id).unwrap();
            match refused {
                None => {
                    assert_eq!(
                        (report.state, report.events, report.problem),
                        (LogState::Clean, all.len() as u64, None),
                        "{kind:?} {id}"
                    );
                    // The cursor's migrations, one event at a time, are
                    // the whole log's, cold and live.
                    let cold = read_texts(&store, id).unwrap();
                    assert_eq!(
                        cold,
                        texts(&store.inspect(id).unwrap().events),
                        "{kind:?} {id}"
                    );
                    let loaded = store.load(id).unwrap();
                    assert_eq!(cold, texts(&loaded.events), "{kind:?} {id}");
                    assert_eq!(cold, read_texts(&store, id).unwrap(), "{kind:?} {id}");
                    assert_eq!(
                        cold,
                        texts(&store.inspect(id).unwrap().events),
                        "{kind:?} {id}: live"
                    );
                }
                Some((_, seq, reason)) => {
                    let problem = report.problem.unwrap();
                    assert_eq!(report.state, LogState::Corrupt, "{kind:?} {id}");
                    let text =
                        format!("(seq {seq}): stored session {id:?} failed validation: {reason}");
                    assert!(problem.ends_with(&text), "{kind:?}: {problem}");
                    for result in [
                        store.inspect(id).map(drop),
                        store.load(id).map(drop),
                        store.read_from(id, 1).map(drop),
                        read_texts(&store, id).map(drop),
                    ] {
                        match result {
                            Err(Error::Corrupt(c)) => {
                                assert_eq!(c.seq, Some(*seq), "{kind:?}");
                                assert!(c.to_string().ends_with(&text), "{kind:?}: {c}");
                            }
                            other => panic!("{kind:?} {id}: {other:?}"),
                        }
                    }
                }
            }
        }
    }
}

/// A retired form and a malformed legacy event early, then turns in the
/// current shapes.
const RETIRED_EARLY: &[&str] = &[
    r#"{"type":"turn/start","seq":0,"time":60,"data":{"turn":1}}"#,
    r#"{"type":"mode/set","seq":1,"time":61,"data":{"mode":"plan"}}"#,
    r#"{"type":"turn/end","seq":2,"time":62,"data":{"turn":1,"reason":{"kind":"completed","why":1}}}"#,
    r#"{"type":"turn/start","seq":3,"time":63,"data":{"turn":2}}"#,
    r#"{"type":"user/message","seq":4,"time":64,"data":{"id":"u4","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    r#"{"type":"turn/end","seq":5,"time":65,"data":{"turn":2,"reason":{"kind":"completed"}}}"#,
];

/// A seeking read of a `Permissive` session (`read_from`) runs upstream's
/// migrations as its coordinator runs them over a seek-capable backend:
/// over the suffix alone, unless an event of the suffix needs the prefix
/// (a steering message, a pre-identity message), when the whole log is
/// migrated and the suffix taken from it. The JSONL store is sequential,
/// as upstream's is: every read judges the whole file. Cold and live alike.
#[test]
fn seeking_reads_migrate_the_suffix_unless_it_needs_the_prefix() {
    let inspected_from =
        |store: &Store, id: &str, from: usize| texts(&store.inspect(id).unwrap().events[from..]);
    for kind in KINDS {
        for live in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let store = open(kind, dir.path(), Policy::Permissive);
            for (id, log) in [
                ("pre-identity", PRE_IDENTITY),
                ("pre-react-loop", PRE_REACT_LOOP),
                ("retired-early", RETIRED_EARLY),
            ] {
                store
                    .create_with_policy(header(id), Policy::Permissive)
                    .unwrap();
                store.append(id, &events(log)).unwrap();
            }
            let store = if live {
                store
            } else {
                drop(store);
                open(kind, dir.path(), Policy::Permissive)
            };
            let what = format!("{kind:?}, live {live}");

            // The replacing tool result inherits its target's id (seq 5,
            // before the suffix): the whole log is migrated.
            let from6 = texts(&store.read_from("pre-identity", 6).unwrap());
            assert_eq!(from6, inspected_from(&store, "pre-identity", 6), "{what}");
            assert!(
                from6[0].contains(r#""id":"legacy-message:pre-identity:5""#),
                "{what}: {}",
                from6[0]
            );
            // A suffix of current shapes and non-message events: migrated
            // alone (seq 7 on needs nothing from before it).
            assert_eq!(
                texts(&store.read_from("pre-identity", 7).unwrap()),
                inspected_from(&store, "pre-identity", 7),
                "{what}"
            );
            // The steering message becomes a user message with its id.
            let from2 = texts(&store.read_from("pre-react-loop", 2).unwrap());
            assert_eq!(from2, inspected_from(&store, "pre-react-loop", 2), "{what}");
            assert!(
                from2[0].starts_with(r#"{"type":"user/message","seq":2"#),
                "{what}"
            );
            // The legacy turn/end after it is migrated within the suffix.
            assert_eq!(
                texts(&store.read_from("pre-react-loop", 5).unwrap()),
                inspected_from(&store, "pre-react-loop", 5),
                "{what}"
            );

            // A retired form and a malformed turn/end before the suffix:
            // a seek never looks at them; a sequential store refuses.
            let refused =
                "session \"retired-early\" contains unsupported legacy mode/set event at seq 1";
            let from3 = store.read_from("retired-early", 3);
            match kind {
                Kind::Wal | Kind::Sqlite => assert_eq!(
                    texts(&from3.unwrap()),
                    texts(&events(&RETIRED_EARLY[3..])),
                    "{what}"
                ),
                Kind::Jsonl => match from3 {
                    Err(Error::Corrupt(c)) => {
                        assert_eq!(c.seq, Some(1), "{what}");
                        assert!(c.to_string().ends_with(refused), "{what}: {c}");
                    }
                    other => panic!("{what}: {other:?}"),
                },
            }
            // From the retired form on, every store refuses.
            for from in [0, 1] {
                match store.read_from("retired-early", from) {
                    Err(Error::Corrupt(c)) => {
                        assert_eq!(c.seq, Some(1), "{what}");
                        assert!(c.to_string().ends_with(refused), "{what}: {c}");
                    }
                    other => panic!("{what}: {other:?}"),
                }
            }
            // Only the malformed turn/end in the suffix: refused there.
            match store.read_from("retired-early", 2) {
                Err(Error::Corrupt(c)) if !matches!(kind, Kind::Jsonl) => {
                    assert_eq!(c.seq, Some(2), "{what}");
                    assert!(
                        c.to_string().ends_with(
                            "session \"retired-early\" contains malformed pre-react-loop turn/end at seq 2"
                        ),
                        "{what}: {c}"
                    );
                }
                Err(Error::Corrupt(c)) => assert_eq!(c.seq, Some(1), "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }
}

#[test]
fn strict_and_lenient_sessions_still_refuse_them_at_append() {
    let cases: [(&[&str], usize, &str); 3] = [
        (PRE_IDENTITY, 5, "shape"),
        (PRE_REACT_LOOP, 2, "surface-fields"),
        (MALFORMED, 3, "shape"),
    ];
    for kind in KINDS {
        for policy in [Policy::Strict, Policy::Lenient] {
            for (log, seq, rule) in cases {
                let dir = tempfile::tempdir().unwrap();
                let store = open(kind, dir.path(), policy);
                store.create_with_policy(header("s"), policy).unwrap();
                let log = events(log);
                match store.append("s", &log) {
                    Err(Error::Contract(v)) => {
                        assert_eq!((v.seq, v.rule.code()), (seq as u64, rule), "{kind:?}")
                    }
                    other => panic!("{kind:?} {policy}: {other:?}"),
                }
            }
        }
    }
}

/// A crash inside a legacy turn (and the same with a torn record after
/// it): the closers are those upstream computes
/// once its reader has migrated the log — the legacy result answered
/// `ls-1`, the call `cat-1` was logged and never answered, `rm-1` never
/// started.
#[test]
fn an_open_legacy_turn_gets_upstreams_closers() {
    let log = events(&[
        PRE_IDENTITY[0],
        PRE_IDENTITY[1],
        PRE_IDENTITY[2],
        r#"{"type":"assistant/message","seq":3,"time":13,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"ls-1","name":"ls","arguments":"{}"},{"type":"tool-call","id":"cat-1","name":"cat","arguments":"{}"},{"type":"tool-call","id":"rm-1","name":"rm","arguments":"{}"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}"#,
        r#"{"type":"tool/call","seq":4,"time":14,"data":{"turn":1,"step":1,"callId":"ls-1","name":"ls","arguments":"{}"}}"#,
        r#"{"type":"tool/call","seq":5,"time":15,"data":{"turn":1,"step":1,"callId":"cat-1","name":"cat","arguments":"{}"}}"#,
        r#"{"type":"tool/result","seq":6,"time":16,"data":{"turn":1,"step":1,"callId":"ls-1","content":[{"type":"text","text":"a"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":"append"}"#,
    ]);
    let unknown = turnwal::contract::OUTCOME_UNKNOWN_TEXT;
    let not_started = turnwal::contract::NOT_STARTED_TEXT;
    let expected_closers = [
        format!(
            r#"{{"type":"tool/result","seq":7,"time":16,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-cat-1-7","role":"user","source":{{"kind":"tool","callId":"cat-1"}},"content":[{{"type":"tool-result","toolCallId":"cat-1","isError":true,"content":[{{"type":"text","text":"{unknown}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[5]}}"#
        ),
        format!(
            r#"{{"type":"tool/result","seq":8,"time":16,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-rm-1-8","role":"user","source":{{"kind":"tool","callId":"rm-1"}},"content":[{{"type":"tool-result","toolCallId":"rm-1","isError":true,"content":[{{"type":"text","text":"{not_started}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        ),
        r#"{"type":"step/end","seq":9,"time":16,"data":{"turn":1,"step":1}}"#.to_owned(),
        r#"{"type":"turn/end","seq":10,"time":16,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
            .to_owned(),
    ];
    for (kind, torn) in KINDS
        .into_iter()
        .flat_map(|kind| [(kind, false), (kind, true)])
    {
        if torn && matches!(kind, Kind::Sqlite) {
            continue; // a torn SQLite row is upstream's test (the binding's suite)
        }
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(kind, dir.path(), Policy::Permissive);
            store
                .create_with_policy(header("open"), Policy::Permissive)
                .unwrap();
            store.append("open", &log).unwrap();
        } // the writer goes without closing its turn: a crash
        if torn {
            // Half of a next record, as a power cut leaves it.
            let file = find_log(dir.path());
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&file)
                .unwrap();
            std::io::Write::write_all(&mut f, br#"{"type":"assistant/chunk","seq":7,"ti"#).unwrap();
        }
        let store = open(kind, dir.path(), Policy::Permissive);
        let inspected = store.inspect("open").unwrap();
        // Read as upstream's reader reads it: migrated, stored as it was.
        let migrated = turnwal::upstream::normalize::normalize(&log, "open").unwrap();
        assert_eq!(texts(&inspected.events[..7]), texts(&migrated), "{kind:?}");
        assert!(
            inspected.events[6]
                .to_json()
                .contains(r#""message":{"id":"legacy-message:open:6","role":"user""#),
            "{kind:?}"
        );
        assert_eq!(texts(&store.read_raw("open", 0).unwrap()[..7]), texts(&log));
        assert_eq!(texts(&inspected.events[7..]), expected_closers, "{kind:?}");
        // The repair is committed once; the next turn continues after it.
        assert_eq!(
            inspected.state,
            if torn {
                LogState::Torn
            } else {
                LogState::OpenTurn
            },
            "{kind:?}"
        );
        let loaded = store.load("open").unwrap();
        assert_eq!(texts(&loaded.events), texts(&inspected.events), "{kind:?}");
        let next = events(&[
            r#"{"type":"turn/start","seq":11,"time":40,"data":{"turn":2}}"#,
            r#"{"type":"turn/end","seq":12,"time":41,"data":{"turn":2,"reason":{"kind":"completed"}}}"#,
        ]);
        store.append("open", &next).unwrap();
        drop(store);
        let events = open(kind, dir.path(), Policy::Permissive)
            .load("open")
            .unwrap()
            .events;
        assert_eq!(events.len(), 13, "{kind:?}");
        assert_eq!(texts(&events[11..]), texts(&next), "{kind:?}");
    }
}

/// The one log file under `dir` (a WAL log or a JSONL transcript).
fn find_log(dir: &Path) -> std::path::PathBuf {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".twal") || name == "session.jsonl" {
                found.push(path);
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

/// Upstream's backends take a header of another format version at create
/// and append; its reader refuses the session with a text naming the side
/// to upgrade. A `Permissive` session does the same; the others refuse the
/// header at create.
#[test]
fn a_foreign_format_version_is_stored_and_refused_when_read() {
    let turn = events(&[
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ]);
    for kind in KINDS {
        for (version, text) in [
            (
                99,
                "session \"v\" uses log format v99, but this harness reads only v0: the log was \
                 written by a newer harness \u{2014} upgrade the harness to open it",
            ),
            (
                -1,
                "session \"v\" uses log format v-1, older than the supported v0, and this build \
                 ships no upgrade path for it",
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut foreign = header("v");
            foreign.version = version;
            {
                let store = open(kind, dir.path(), Policy::Permissive);
                store
                    .create_with_policy(foreign.clone(), Policy::Permissive)
                    .unwrap();
                store.append("v", &turn).unwrap();
            }
            let store = open(kind, dir.path(), Policy::Permissive);
            let reads: [(&str, Result<(), Error>); 3] = [
                ("inspect", store.inspect("v").map(drop)),
                ("load", store.load("v").map(drop)),
                ("read_from", store.read_from("v", 0).map(drop)),
            ];
            for (op, result) in reads {
                match result {
                    Err(Error::Unsupported { detail, .. }) => {
                        assert_eq!(detail, text, "{kind:?} {op} v{version}")
                    }
                    other => panic!("{kind:?} {op} v{version}: {other:?}"),
                }
            }
            for policy in [Policy::Strict, Policy::Lenient] {
                let dir = tempfile::tempdir().unwrap();
                let store = open(kind, dir.path(), policy);
                match store.create_with_policy(foreign.clone(), policy) {
                    Err(Error::Header(e)) => assert_eq!(
                        e.0,
                        format!("session metadata version must be 0, got {version}")
                    ),
                    other => panic!("{kind:?} {policy} v{version}: {other:?}"),
                }
            }
        }
    }
}
