//! Issue 13, hostile inputs: an event over the shared size limits is refused
//! by every backend before anything is written, and a zstd bomb in a JSONL
//! root is a corrupt session, found without inflating past the bound.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use turnwal::backend::jsonl::zstd::{
    compress_frame, decompress_frame_within, decompress_prefix_within,
};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::limits::{MAX_DATA_LEN, MAX_FRAME_LEN};
use turnwal::{Error, Event, LogState, SessionHeader, Store, StoreOptions};

/// The four store kinds, opened in `dir`.
fn stores(dir: &Path) -> Vec<(&'static str, Store)> {
    let jsonl = |name: &str, c| {
        let backend = JsonlBackend::open(dir.join(name), c).unwrap();
        Store::with_backend(Arc::new(backend), StoreOptions::default())
    };
    vec![
        ("wal", Store::open(dir.join("w")).unwrap()),
        (
            "sqlite",
            Store::open_sqlite(
                dir.join("s.sqlite"),
                SqliteOptions::default(),
                StoreOptions::default(),
            )
            .unwrap(),
        ),
        ("jsonl", jsonl("raw", Compression::None)),
        ("jsonl+zstd", jsonl("zstd", Compression::Zstd)),
    ]
}

fn turn_start(seq: u64) -> Event {
    Event::new("turn/start", seq, 1, r#"{"turn":1}"#).unwrap()
}

/// A `user/message` whose `data` is exactly `len` bytes.
fn message(seq: u64, len: usize) -> Event {
    let (head, tail) = (r#"{"id":"big","text":""#, r#""}"#);
    let mut data = String::with_capacity(len);
    data.push_str(head);
    data.extend(std::iter::repeat_n('a', len - head.len() - tail.len()));
    data.push_str(tail);
    assert_eq!(data.len(), len);
    Event::new("user/message", seq, 1, &data).unwrap()
}

/// The session holds exactly its first `turn/start`, from a fresh store too.
fn holds_one_event(store: &Store, kind: &str) {
    let events = store.read_from("s", 0).unwrap();
    assert_eq!(events, vec![turn_start(0)], "{kind}");
    let listed = store.list().unwrap();
    assert_eq!(
        (listed.len(), listed[0].events, listed[0].state),
        (1, 1, LogState::OpenTurn),
        "{kind}: {listed:?}"
    );
}

fn refused(store: &Store, kind: &str, event: Event, field: &str, limit: usize) {
    let seq = event.seq();
    match store.append("s", &[event]) {
        Err(Error::Event(e)) => {
            assert_eq!(
                (e.seq, e.event_type.as_deref()),
                (Some(seq), Some("user/message")),
                "{kind}: {e}"
            );
            assert!(
                e.reason.starts_with(field) && e.reason.contains(&format!("{limit}-byte limit")),
                "{kind}: {e}"
            );
        }
        other => panic!("{kind}: an over-limit event was not refused: {other:?}"),
    }
}

#[test]
fn an_event_over_the_shared_limits_is_refused_by_every_store_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let over_data = message(1, MAX_DATA_LEN + 1);
    for (kind, store) in stores(dir.path()) {
        store.create(SessionHeader::new("s", 1)).unwrap();
        store.append("s", &[turn_start(0)]).unwrap();
        refused(&store, kind, over_data.clone(), "data", MAX_DATA_LEN);
        holds_one_event(&store, kind);
        // The session still takes the next event at seq 1.
        store.append("s", &[message(1, 50)]).unwrap();
    }
    for (kind, store) in stores(dir.path()) {
        let events = store.read_from("s", 0).unwrap();
        assert_eq!(events, vec![turn_start(0), message(1, 50)], "{kind}");
    }
}

#[test]
fn an_event_exactly_at_the_data_limit_is_stored_and_read_back_by_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let at = message(1, MAX_DATA_LEN);
    for (_, store) in stores(dir.path()) {
        store.create(SessionHeader::new("s", 1)).unwrap();
        store.append("s", &[turn_start(0), at.clone()]).unwrap();
    }
    for (kind, store) in stores(dir.path()) {
        let events = store.read_from("s", 1).unwrap();
        assert!(events.len() == 1 && events[0] == at, "{kind}");
    }
}

/// A zstd frame (with its checksum) of `line_head`, `len` bytes of `a` and
/// `"}}\n`, built in 1 MiB pieces: tens of KiB on disk.
fn bomb(line_head: &str, len: usize) -> Vec<u8> {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    encoder.include_checksum(true).unwrap();
    encoder.write_all(line_head.as_bytes()).unwrap();
    let piece = vec![b'a'; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(piece.len());
        encoder.write_all(&piece[..n]).unwrap();
        left -= n;
    }
    encoder.write_all(b"\"}}\n").unwrap();
    encoder.finish().unwrap()
}

#[test]
fn a_zstd_bomb_is_refused_after_inflating_at_most_one_byte_past_the_bound() {
    let frame = bomb("", 1 << 30);
    assert!(frame.len() < 64 << 10, "{}", frame.len());
    let started = std::time::Instant::now();
    assert_eq!(
        decompress_frame_within(&frame, 1 << 20).unwrap_err(),
        "the frame decompresses past the 1048576-byte bound"
    );
    assert!(decompress_prefix_within(&frame, 1 << 20).is_empty());
    // A GiB inflated would take far longer than the bound's MiB.
    assert!(started.elapsed().as_secs() < 5);
    // At the bound exactly, the frame decompresses.
    let exact = compress_frame(&vec![b'x'; 1000]);
    assert_eq!(decompress_frame_within(&exact, 1000).unwrap().len(), 1000);
    assert!(decompress_frame_within(&exact, 999).is_err());
    assert_eq!(decompress_prefix_within(&exact, 1000).len(), 1000);
}

#[test]
fn a_zstd_bomb_in_a_jsonl_root_lists_as_corrupt_and_the_listing_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(JsonlBackend::open(dir.path(), Compression::Zstd).unwrap());
    let store = Store::with_backend(backend.clone(), StoreOptions::default());
    for id in ["a", "s", "z"] {
        store.create(SessionHeader::new(id, 1)).unwrap();
        store.append(id, &[turn_start(0)]).unwrap();
    }
    drop(store);
    let path = turnwal::backend::jsonl::layout::log_path(dir.path(), None, "s", Compression::Zstd)
        .unwrap();
    let frame = bomb(
        r#"{"type":"user/message","seq":1,"time":1,"data":{"id":"b","t":""#,
        MAX_FRAME_LEN + (1 << 20),
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&frame)
        .unwrap();
    let store = Store::with_backend(backend, StoreOptions::default());
    let listed = store.list().unwrap();
    let mut listed = listed;
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    let ids: Vec<_> = listed.iter().map(|s| (s.id.as_str(), s.state)).collect();
    assert_eq!(
        ids,
        [
            ("a", LogState::OpenTurn),
            ("s", LogState::Corrupt),
            ("z", LogState::OpenTurn)
        ]
    );
    let problem = listed[1].problem.as_deref().unwrap();
    assert!(
        problem.contains(&format!("past the {MAX_FRAME_LEN}-byte bound")),
        "{problem}"
    );
    let err = store.read_from("s", 0).unwrap_err().to_string();
    assert!(
        err.contains(&path.display().to_string()) && err.contains(&MAX_FRAME_LEN.to_string()),
        "{err}"
    );
}

/// A refusal quotes a bounded excerpt of what it refuses, never the whole
/// value: an error that repeats a megabyte reaches every log line and
/// error report of the harness.
#[test]
fn refusals_quote_a_bounded_excerpt_of_the_value() {
    let big = "x".repeat(1 << 20);
    let bad_lines = [
        format!(r#"{{"type":"{big}","seq":0,"time":1,"data":{{}}}}"#),
        format!(
            r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1}},"surfaceOp":"{big}"}}"#
        ),
        format!(
            r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1}},"surfaceOp":{{"op":"{big}"}}}}"#
        ),
        format!(
            r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1}},"sourceEventSeqs":["{big}"]}}"#
        ),
        format!(r#"{{"type":"turn/start","seq":"{big}","time":1,"data":{{"turn":1}}}}"#),
        format!(r#"{{"type":"turn/start","seq":0,"time":"{big}","data":{{"turn":1}}}}"#),
        format!(r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1}},"{big}":1}}"#),
        format!(r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1,"x":"{big}}}}}"#),
        format!(
            r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1}},"ignorable":"{big}"}}"#
        ),
    ];
    // Bounded, and where the value is quoted, cut where it shows (`…`;
    // the one refusal that quotes nothing is a JSON parse error).
    let excerpted = |error: &str, what: &str| {
        assert!(
            error.len() < 2_000,
            "{what}: {} bytes: {}",
            error.len(),
            &error[..300]
        );
        let quotes = error.contains(&"x".repeat(50));
        if quotes {
            assert!(
                error.contains("x…"),
                "{what}: quoted without showing the cut: {}",
                &error[..300.min(error.len())]
            );
        }
        quotes
    };
    let quoting = bad_lines
        .iter()
        .enumerate()
        .filter(|(i, line)| {
            let error = Event::from_json(line.as_bytes()).unwrap_err().to_string();
            excerpted(&error, &format!("envelope #{i}"))
        })
        .count();
    assert_eq!(
        quoting,
        bad_lines.len() - 1,
        "every refusal but the parse error quotes"
    );
    let dir = tempfile::tempdir().unwrap();
    for (kind, store) in stores(dir.path()) {
        let refused_events = [
            vec![Event::new("turn/start", 0, 1, &format!(r#"{{"turn":"{big}"}}"#)).unwrap()],
            vec![
                turn_start(0),
                Event::new(
                    "turn/end",
                    1,
                    1,
                    &format!(r#"{{"turn":"{big}","reason":{{"kind":"completed"}}}}"#),
                )
                .unwrap(),
            ],
            vec![
                turn_start(0),
                Event::new("step/start", 1, 1, r#"{"turn":1,"step":1}"#).unwrap(),
                Event::new(
                    "tool/result",
                    2,
                    1,
                    &format!(r#"{{"turn":1,"step":1,"message":{{"id":"{big}","role":"user","source":{{"kind":"tool","callId":"{big}"}},"content":[]}}}}"#),
                )
                .unwrap(),
            ],
            vec![Event::new("turn/start", 5, 1, r#"{"turn":1}"#).unwrap()],
        ];
        for (i, events) in refused_events.iter().enumerate() {
            let id = format!("s{i}");
            store
                .create_with_policy(SessionHeader::new(&id, 1), turnwal::Policy::Strict)
                .unwrap();
            let error = match store.append(&id, events) {
                Err(e) => e.to_string(),
                Ok(r) => panic!("{kind} #{i}: accepted {r:?}"),
            };
            // The unmatched tool result quotes its call id; the others
            // name a rule or a seq only.
            assert_eq!(
                excerpted(&error, &format!("{kind} #{i}")),
                i == 2,
                "{kind} #{i}: {error:.300}"
            );
        }
    }
}
