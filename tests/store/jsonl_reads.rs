//! Whole-session reads of JSONL logs (issue 27): a log whose ends settle it
//! is read once, its lines checked as they are lent; one whose ends do not
//! is classified first and read again. Either way the events are the ones
//! stored, byte for byte, on raw and zstd roots — across window and frame
//! boundaries, a frame larger than a read window, a line split across
//! frames — and whatever the lines hold that the ends did not show is
//! refused with the words `inspect` gives it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use turnwal::backend::Backend;
use turnwal::backend::jsonl::zstd::compress_frame;
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{Error, Event, LogState, Policy, SessionHeader, Store, StoreOptions};
use turnwal_testkit::workload::realistic;

struct Root {
    _dir: tempfile::TempDir,
    backend: Arc<JsonlBackend>,
    store: Store,
}

fn root(compression: Compression, policy: Policy) -> Root {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(
        JsonlBackend::open(dir.path().join("root"), compression)
            .unwrap()
            .with_state_dir(dir.path().join("state"))
            .unwrap(),
    );
    let options = StoreOptions {
        policy,
        ..StoreOptions::default()
    };
    let store = Store::with_backend(backend.clone(), options);
    Root {
        _dir: dir,
        backend,
        store,
    }
}

impl Root {
    /// A fresh store over the same root (no session held live).
    fn reopen(&self) -> Store {
        Store::with_backend(self.backend.clone(), StoreOptions::default())
    }

    fn path(&self, id: &str) -> PathBuf {
        self.backend.find_log(id).unwrap().unwrap()
    }
}

fn header(id: &str) -> SessionHeader {
    SessionHeader::new(id, 1_000).with_cwd("/work")
}

/// Every event a read through the store's cursor lends, as JSON text, or
/// the error it ends with.
fn read_all(store: &Store, id: &str) -> Result<Vec<String>, Error> {
    let mut reader = store.read(id)?;
    let mut out = Vec::new();
    while let Some(event) = reader.next_event()? {
        out.push(event.to_event().to_json());
    }
    Ok(out)
}

fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// A realistic session of about `bytes` bytes, in batches of varied
/// sizes, and one tool result of 2 MB of text that compresses poorly
/// (its zstd frame outgrows a read window; its raw line spans two).
fn write_session(store: &Store, id: &str, bytes: u64) -> Vec<Event> {
    store.create(header(id)).unwrap();
    let mut all = Vec::new();
    let mut sizes = [1usize, 5, 300, 2, 40].into_iter().cycle();
    for (n, turn) in realistic::turns_of_size(9, bytes).enumerate() {
        let turn = if n == 3 { with_big_result(turn) } else { turn };
        let mut rest = &turn[..];
        while !rest.is_empty() {
            let k = sizes.next().unwrap().min(rest.len());
            store.append(id, &rest[..k]).unwrap();
            rest = &rest[k..];
        }
        all.extend(turn);
    }
    store.flush(id).unwrap();
    all
}

/// `turn` with its first tool result's text replaced by 2 MB of
/// pseudo-random letters (1.2 MB compressed).
fn with_big_result(mut turn: Vec<Event>) -> Vec<Event> {
    let i = turn
        .iter()
        .position(|e| e.event_type() == "tool/result")
        .expect("a realistic turn calls a tool");
    let mut rng = turnwal::rng::Rng::from_state(0x2545_f491_4f6c_dd1d);
    let text: String = (0..2_000_000)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect();
    let mut envelope: serde_json::Value = serde_json::from_str(&turn[i].to_json()).unwrap();
    let block = &mut envelope["data"]["message"]["content"][0];
    if block.get("output").is_some() {
        block["output"] = serde_json::json!({"type": "text", "value": text});
    } else {
        block["text"] = serde_json::json!(text);
    }
    let event = Event::from_json(envelope.to_string().as_bytes()).unwrap();
    turn[i] = event;
    turn
}

#[test]
fn realistic_sessions_read_as_stored_on_raw_and_zstd_roots() {
    for compression in [Compression::None, Compression::Zstd] {
        let r = root(compression, Policy::Strict);
        let written = write_session(&r.store, "s", 3_000_000);
        r.store.close("s").unwrap();
        assert!(written.iter().any(|e| e.to_json().len() > 2_000_000));
        let len = fs::metadata(r.path("s")).unwrap().len();
        assert!(len > 1 << 20, "{compression:?}: the log spans read windows");
        let store = r.reopen();
        let expected = texts(&written);
        assert_eq!(read_all(&store, "s").unwrap(), expected, "{compression:?}");
        let reader = store.read("s").unwrap();
        assert_eq!(
            (reader.stored(), reader.state()),
            (written.len() as u64, LogState::Clean)
        );
        assert_eq!(texts(&store.read_raw("s", 0).unwrap()), expected);
        assert_eq!(
            texts(&store.read_from("s", 1234).unwrap()),
            expected[1234..]
        );
        assert_eq!(texts(&store.inspect("s").unwrap().events), expected);
        let report = store.verify("s").unwrap();
        assert_eq!(
            (report.state, report.events, report.problem),
            (LogState::Clean, written.len() as u64, None)
        );
        assert_eq!(texts(&store.load("s").unwrap().events), expected);

        // An open turn after a crash: its events, then the closers.
        let open = &written[..written.len() - 40];
        let r2 = root(compression, Policy::Strict);
        r2.store.create(header("o")).unwrap();
        r2.store.append("o", open).unwrap();
        r2.store.flush("o").unwrap();
        drop(r2.store);
        let store = Store::with_backend(r2.backend.clone(), StoreOptions::default());
        let inspected = store.inspect("o").unwrap();
        assert_eq!(inspected.state, LogState::OpenTurn);
        assert_eq!(read_all(&store, "o").unwrap(), texts(&inspected.events));
    }
}

/// A zstd log whose last frame lost its checksum's last bytes: the events
/// recovered from it are kept after the complete frames, once each.
#[test]
fn a_torn_zstd_frame_lends_its_recovered_events_once() {
    let r = root(Compression::Zstd, Policy::Strict);
    let written = write_session(&r.store, "t", 200_000);
    // One more batch in a frame of its own: a turn left open.
    let next = written.len() as u64;
    let turn = 1 + written
        .iter()
        .filter(|e| e.event_type() == "turn/start")
        .count();
    let batch = vec![
        Event::new("turn/start", next, 1, &format!(r#"{{"turn":{turn}}}"#)).unwrap(),
        Event::new(
            "step/start",
            next + 1,
            2,
            &format!(r#"{{"turn":{turn},"step":1}}"#),
        )
        .unwrap(),
    ];
    r.store.append("t", &batch).unwrap();
    r.store.close("t").unwrap();
    let path = r.path("t");
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 2)
        .unwrap();
    let store = r.reopen();
    let inspected = store.inspect("t").unwrap();
    assert_eq!(inspected.state, LogState::Torn);
    assert_eq!(
        inspected.stored,
        next + 2,
        "the torn frame's events recovered"
    );
    assert_eq!(read_all(&store, "t").unwrap(), texts(&inspected.events));
    let mut expected = texts(&written);
    expected.extend(texts(&batch));
    assert_eq!(texts(&store.read_raw("t", 0).unwrap()), expected);
}

/// A zstd log whose second line is split across two frames: valid, and
/// read the same by the scan and the cursor.
#[test]
fn a_line_split_across_zstd_frames() {
    let r = root(Compression::Zstd, Policy::Strict);
    let events = vec![
        Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
        Event::new("step/start", 1, 2, r#"{"turn":1,"step":1}"#).unwrap(),
        Event::new("step/end", 2, 3, r#"{"turn":1,"step":1}"#).unwrap(),
        Event::new(
            "turn/end",
            3,
            4,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        )
        .unwrap(),
    ];
    r.store.create(header("z")).unwrap();
    r.store.append("z", &events).unwrap();
    r.store.close("z").unwrap();
    let path = r.path("z");
    // The header frame as written, then the records in two frames that
    // split the second line.
    let bytes = fs::read(&path).unwrap();
    let scan = turnwal::backend::jsonl::zstd::scan_frames(&bytes, usize::MAX).unwrap();
    let mut file = bytes[scan.frames[0].clone()].to_vec();
    let mut plain = Vec::new();
    for e in &events {
        plain.extend_from_slice(e.to_json().as_bytes());
        plain.push(b'\n');
    }
    let cut = plain.iter().position(|&b| b == b'\n').unwrap() + 10;
    file.extend(compress_frame(&plain[..cut]));
    file.extend(compress_frame(&plain[cut..]));
    fs::write(&path, file).unwrap();
    let store = r.reopen();
    assert_eq!(read_all(&store, "z").unwrap(), texts(&events));
    assert_eq!(texts(&store.inspect("z").unwrap().events), texts(&events));
}

/// The raw log's lines, and where each starts.
fn lines(path: &Path) -> Vec<(usize, Vec<u8>)> {
    let bytes = fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        out.push((at, line.to_vec()));
        at += line.len();
    }
    out
}

fn error_text<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// Damage before the last `turn/end` of a log whose ends look whole: the
/// single-pass read lends the events before it and then refuses exactly as
/// the classifying scan (`inspect`) does.
#[test]
fn what_the_ends_do_not_show_is_refused_as_inspect_refuses_it() {
    type Damage = fn(&mut Vec<(usize, Vec<u8>)>, usize);
    let cases: [(&str, Damage); 4] = [
        ("unparsable line", |lines, i| lines[i].1[0] = b'X'),
        ("seq gap", |lines, i| {
            lines.remove(i);
        }),
        ("retired form", |lines, i| {
            let seq: serde_json::Value = serde_json::from_slice(&lines[i].1).unwrap();
            let seq = seq["seq"].as_u64().unwrap();
            lines[i].1 = format!(
                "{{\"type\":\"mode/set\",\"seq\":{seq},\"time\":1,\"data\":{{\"mode\":\"plan\"}}}}\n"
            )
            .into_bytes();
        }),
        ("malformed turn/end", |lines, i| {
            let e: serde_json::Value = serde_json::from_slice(&lines[i].1).unwrap();
            lines[i].1 = format!(
                "{{\"type\":\"turn/end\",\"seq\":{},\"time\":1,\"data\":{{\"turn\":1,\"reason\":{{\"kind\":\"completed\",\"x\":1}}}}}}\n",
                e["seq"]
            )
            .into_bytes();
        }),
    ];
    for (name, damage) in cases {
        let r = root(Compression::None, Policy::Permissive);
        write_session(&r.store, "d", 400_000);
        r.store.close("d").unwrap();
        let path = r.path("d");
        let mut all = lines(&path);
        // A line of one event (not a packed run) halfway through.
        let i = (all.len() / 2..all.len())
            .find(|&i| {
                let v: serde_json::Value = serde_json::from_slice(&all[i].1).unwrap();
                v.get("seq").is_some() && v["type"] == "tool/call"
            })
            .unwrap();
        damage(&mut all, i);
        fs::write(
            &path,
            all.iter().flat_map(|(_, l)| l.clone()).collect::<Vec<_>>(),
        )
        .unwrap();
        let store = r.reopen();
        let inspected = error_text(store.inspect("d"));
        assert_eq!(error_text(read_all(&store, "d")), inspected, "{name}");
        // A read that lends nothing first refuses the same.
        assert_eq!(
            error_text(store.load("d").map(|v| v.events.len())),
            inspected,
            "{name}"
        );
        assert!(!store.verify("d").unwrap().problem.unwrap().is_empty());
    }
}

/// A zstd frame that fails its checksum halfway through the log.
#[test]
fn a_damaged_zstd_frame_is_refused_as_inspect_refuses_it() {
    let r = root(Compression::Zstd, Policy::Strict);
    write_session(&r.store, "f", 400_000);
    r.store.close("f").unwrap();
    let path = r.path("f");
    let mut bytes = fs::read(&path).unwrap();
    let scan = turnwal::backend::jsonl::zstd::scan_frames(&bytes, usize::MAX).unwrap();
    let frame = scan.frames[scan.frames.len() / 2].clone();
    // The frame's checksum (its last 4 bytes).
    bytes[frame.end - 2] ^= 0x55;
    fs::write(&path, bytes).unwrap();
    let store = r.reopen();
    let inspected = error_text(store.inspect("f"));
    assert!(inspected.contains("failed validation"), "{inspected}");
    assert_eq!(error_text(read_all(&store, "f")), inspected);
}

/// Turns numbered other than by count (a Permissive log): the read from
/// the ends settles the count of turns the lines gave.
#[test]
fn turns_numbered_otherwise_are_counted() {
    for compression in [Compression::None, Compression::Zstd] {
        let r = root(compression, Policy::Permissive);
        r.store
            .create_with_policy(header("n"), Policy::Permissive)
            .unwrap();
        let mut events = Vec::new();
        for (k, turn) in [1, 2, 7].into_iter().enumerate() {
            let seq = 2 * k as u64;
            events
                .push(Event::new("turn/start", seq, 1, &format!(r#"{{"turn":{turn}}}"#)).unwrap());
            events.push(
                Event::new(
                    "turn/end",
                    seq + 1,
                    2,
                    &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
                )
                .unwrap(),
            );
        }
        r.store.append("n", &events).unwrap();
        r.store.close("n").unwrap();
        let store = r.reopen();
        assert_eq!(read_all(&store, "n").unwrap(), texts(&events));
        let classified = r.backend.scan("n").unwrap().unwrap();
        let report = store.verify("n").unwrap();
        assert_eq!(report.turns, classified.last_turn, "{compression:?}");
        let mut reader = store.read("n").unwrap();
        while reader.next_event().unwrap().is_some() {}
        assert_eq!(
            reader.scan().unwrap().committed_turn,
            classified.committed_turn
        );
    }
}

/// A file shortened under a read (by a writer that takes no turnwal lock)
/// ends the read with an error, on either path.
#[test]
fn a_log_shortened_under_a_read_is_an_error() {
    for torn in [false, true] {
        let r = root(Compression::None, Policy::Strict);
        write_session(&r.store, "t", 2_000_000);
        r.store.close("t").unwrap();
        let path = r.path("t");
        if torn {
            // The ends do not settle a torn log: it is classified first.
            let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(b"{\"type\":\"turn/sta").unwrap();
        }
        let store = r.reopen();
        let mut reader = store.read("t").unwrap();
        assert_eq!(
            reader.state(),
            if torn {
                LogState::Torn
            } else {
                LogState::Clean
            }
        );
        for _ in 0..10 {
            reader.next_event().unwrap();
        }
        let len = fs::metadata(&path).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        let result = (|| -> Result<(), Error> {
            while reader.next_event()?.is_some() {}
            Ok(())
        })();
        assert!(result.is_err(), "torn: {torn}");
    }
}

/// `ls` titles read the first events from the front of the file alone:
/// as stored, up to the first line that does not decode.
#[test]
fn the_first_events_are_read_from_the_front() {
    for compression in [Compression::None, Compression::Zstd] {
        let r = root(compression, Policy::Strict);
        let written = write_session(&r.store, "f", 300_000);
        r.store.close("f").unwrap();
        let store = r.reopen();
        assert_eq!(
            texts(&store.read_first("f", 64).unwrap()),
            texts(&written[..64]),
            "{compression:?}"
        );
        assert_eq!(store.read_first("f", 0).unwrap(), Vec::<Event>::new());
    }
    // A raw log whose fourth line does not decode: three lines' events.
    let r = root(Compression::None, Policy::Strict);
    write_session(&r.store, "g", 100_000);
    r.store.close("g").unwrap();
    let path = r.path("g");
    let mut all = lines(&path);
    let before: usize = all[1..4]
        .iter()
        .map(|(_, l)| {
            turnwal::backend::jsonl::records::decode_line(&l[..l.len() - 1])
                .unwrap()
                .len()
        })
        .sum();
    all[4].1[0] = b'X';
    fs::write(
        &path,
        all.iter().flat_map(|(_, l)| l.clone()).collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(r.reopen().read_first("g", 64).unwrap().len(), before);
}
