//! `list`'s summary of a JSONL log read from its two ends, as the WAL's
//! listing reads its file header and last record: the header line, and the
//! records from the last `turn/end` to the end of the file, which settle the
//! event count, the turn, the last time and the state.
//!
//! Whatever the tail does not settle — a final line without a newline, a
//! line that does not decode, a seq that does not follow, an incomplete
//! zstd frame, a contract break, no `turn/end` within [`TAIL_BOUND`] bytes
//! — gives `None`, and the caller scans the whole log (which reports the
//! damage). Like the WAL's listing, this does not look for damage before the
//! last `turn/end`: `verify` reads every byte.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;

use super::header::parse_header_line;
use super::layout::Compression;
use super::normalize::normalize;
use super::records::decode_line;
use super::scan::zstd_header;
use super::source::{FileSource, FrameWalk, Source, Step};
use super::zstd::decompress_frame_within;
use crate::contract::Policy;
use crate::event::{Event, EventKind};
use crate::header::SessionHeader;
use crate::scan::{SessionSummary, classify_tail};
use crate::storage::{OpenMode, Storage};

/// The most bytes of records (decompressed, in zstd mode) read back from
/// the end of a log in search of its last `turn/end`.
const TAIL_BOUND: usize = 1 << 20;

/// The longest header line read from the front of a raw log.
const HEAD_BOUND: u64 = 64 << 10;

/// A log's header and its last records: from the last `turn/end` on, or
/// every record when the log holds no `turn/end`.
pub(super) struct Tail {
    pub header: SessionHeader,
    /// As stored.
    pub events: Vec<Event>,
    pub file_len: u64,
    /// Where the records start: after the header line (raw) or frame (zstd).
    pub records_start: u64,
}

/// The summary of the log at `path` from its ends; `None` when they do not
/// settle it.
pub(super) fn summary(
    storage: &dyn Storage,
    path: &Path,
    compression: Compression,
    policy: Policy,
) -> Option<SessionSummary> {
    let file = storage.open(path, OpenMode::Read).ok()?;
    let src = FileSource::new(file, path).ok()?;
    let tail = ends(&src, path, compression)?;
    let base = tail.events.first().map_or(0, Event::seq);
    let follows = tail
        .events
        .iter()
        .enumerate()
        .all(|(i, e)| e.seq() == base + i as u64);
    if !follows {
        return None;
    }
    let events = normalize(&tail.events, &tail.header.id).ok()?;
    let (committed, committed_turn, rest) = match events.first() {
        Some(end) if end.kind() == EventKind::TurnEnd => {
            (end.seq() + 1, end.facts().ok()?.turn.get()?, &events[1..])
        }
        _ if base == 0 => (0, 0, &events[..]),
        _ => return None,
    };
    let verdict = classify_tail(policy, committed, committed_turn, rest);
    if verdict.debris.is_some() {
        return None;
    }
    Some(SessionSummary::from_tail(
        tail.header,
        tail.file_len,
        committed + rest.len() as u64,
        verdict.last_turn,
        events.last().map(Event::time),
        !verdict.closers.is_empty(),
    ))
}

/// The header and last records of the log `src` holds, when its end is
/// whole: a final line with its newline (raw), complete frames (zstd), and
/// a `turn/end` within [`TAIL_BOUND`] bytes of the end (or none at all).
pub(super) fn ends(src: &dyn Source, path: &Path, compression: Compression) -> Option<Tail> {
    match compression {
        Compression::None => raw_tail(src),
        Compression::Zstd => zstd_tail(src, path),
    }
}

fn raw_tail(src: &dyn Source) -> Option<Tail> {
    let file_len = src.len();
    let read = |at: u64, len: u64| -> Option<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        src.read_exact_at(at, &mut buf).ok()?;
        Some(buf)
    };
    // A log that fits the bound is read once; a longer one at its two ends.
    let small = file_len <= TAIL_BOUND as u64;
    let head_len = if small {
        file_len
    } else {
        file_len.min(HEAD_BOUND)
    };
    let head = read(0, head_len)?;
    let nl = head.iter().position(|&b| b == b'\n')?;
    let header = parse_header_line(&head[..nl]).ok()?;
    let records_start = nl as u64 + 1;
    let window_start = records_start.max(file_len.saturating_sub(TAIL_BOUND as u64));
    let far;
    let window: &[u8] = if small {
        &head[records_start as usize..]
    } else {
        far = read(window_start, file_len - window_start)?;
        &far
    };
    let whole_lines = if window_start > records_start {
        // The window starts inside some line: from the next one on.
        let first = window.iter().position(|&b| b == b'\n')?;
        &window[first + 1..]
    } else {
        window
    };
    let mut back = Vec::new();
    let found = walk_back(whole_lines, &mut back)?;
    if !found && window_start > records_start {
        return None;
    }
    Some(Tail {
        header,
        events: back.into_iter().rev().flatten().collect(),
        file_len,
        records_start,
    })
}

fn zstd_tail(src: &dyn Source, path: &Path) -> Option<Tail> {
    // The framing of the whole file, keeping the last frames that fit the
    // bound (compressed: their content is bounded as it is inflated).
    let mut walk = FrameWalk::new(0);
    let mut first = None;
    let mut last: VecDeque<Range<u64>> = VecDeque::new();
    let mut held = 0u64;
    loop {
        match walk.next_step(src).ok()? {
            Step::Frame(frame) => {
                if first.is_none() {
                    first = Some(frame);
                    continue;
                }
                held += frame.end - frame.start;
                last.push_back(frame);
                while held > TAIL_BOUND as u64 && last.len() > 1 {
                    let dropped = last.pop_front().expect("more than one");
                    held -= dropped.end - dropped.start;
                }
            }
            Step::End => break,
            Step::Torn(_) | Step::Broken(_) => return None,
        }
    }
    let first = first?;
    let mut head = vec![0; (first.end - first.start) as usize];
    src.read_exact_at(first.start, &mut head).ok()?;
    let header = zstd_header(&head, path).ok()?;
    let mut back = Vec::new();
    let mut budget = TAIL_BOUND;
    let mut found = false;
    // Every frame walked without a `turn/end`: the events from seq 0,
    // unless frames were left out.
    let all_held = last.front().is_none_or(|f| f.start == first.end);
    for frame in last.iter().rev() {
        let mut bytes = vec![0; (frame.end - frame.start) as usize];
        src.read_exact_at(frame.start, &mut bytes).ok()?;
        // Inflating no more than the budget left: a frame past it (a bomb
        // included) leaves the summary to the full read, which reports it.
        let plain = decompress_frame_within(&bytes, budget).ok()?;
        budget -= plain.len();
        if walk_back(&plain, &mut back)? {
            found = true;
            break;
        }
    }
    if !found && !all_held {
        return None;
    }
    Some(Tail {
        header,
        events: back.into_iter().rev().flatten().collect(),
        file_len: src.len(),
        records_start: first.end,
    })
}

/// Decodes the newline-terminated lines of `block` from the last one back,
/// pushing each line's events onto `out`, until a line holds a `turn/end`:
/// `Some(true)` then, `Some(false)` when the block runs out first, `None`
/// when a line does not decode or the block does not end with a newline.
fn walk_back(block: &[u8], out: &mut Vec<Vec<Event>>) -> Option<bool> {
    let Some((&last, body)) = block.split_last() else {
        return Some(false);
    };
    if last != b'\n' {
        return None;
    }
    let mut end = body.len();
    loop {
        let start = body[..end]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let decoded = decode_line(&body[start..end]).ok()?;
        let holds_end = decoded.iter().any(|e| e.kind() == EventKind::TurnEnd);
        out.push(decoded);
        if holds_end {
            return Some(true);
        }
        if start == 0 {
            return Some(false);
        }
        end = start - 1;
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::backend::jsonl::JsonlBackend;
    use crate::scan::LogState;
    use crate::store::{Store, StoreOptions};

    fn ev(event_type: &str, seq: u64, data: &str) -> Event {
        Event::new(event_type, seq, 1_000 + seq as i64, data).unwrap()
    }

    /// Turn `n` from `seq`: a step streaming `chunks` text deltas (a packed
    /// row when 3 or more), closed or left open.
    fn turn(n: u64, seq: u64, chunks: u64, text: &str, close: bool) -> Vec<Event> {
        let mut out = vec![
            ev("turn/start", seq, &format!(r#"{{"turn":{n}}}"#)),
            ev(
                "step/start",
                seq + 1,
                &format!(r#"{{"turn":{n},"step":1}}"#),
            ),
        ];
        for i in 0..chunks {
            out.push(ev(
                "assistant/chunk",
                seq + 2 + i,
                &format!(
                    r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}{i}"}}}}"#
                ),
            ));
        }
        if close {
            let next = seq + 2 + chunks;
            out.push(ev("step/end", next, &format!(r#"{{"turn":{n},"step":1}}"#)));
            out.push(ev(
                "turn/end",
                next + 1,
                &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
            ));
        }
        out
    }

    /// The quick summary and the full scan's, side by side.
    fn both(backend: &JsonlBackend, path: &Path) -> (Option<String>, String) {
        let policy = JsonlBackend::READ_POLICY;
        let quick = summary(backend.storage(), path, backend.compression, policy).map(|s| {
            assert_eq!(s.checked, crate::scan::Checked::Tail);
            format!("{s:?}")
        });
        let mut full = backend.full_summary(path).unwrap().unwrap();
        assert_eq!(full.checked, crate::scan::Checked::Full);
        // Alike in everything but how much was read.
        full.checked = crate::scan::Checked::Tail;
        (quick, format!("{full:?}"))
    }

    struct Root {
        _dir: tempfile::TempDir,
        backend: Arc<JsonlBackend>,
        store: Store,
    }

    fn root(compression: Compression) -> Root {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(
            JsonlBackend::open(dir.path().join("root"), compression)
                .unwrap()
                .with_state_dir(dir.path().join("state"))
                .unwrap(),
        );
        let store = Store::with_backend(backend.clone(), StoreOptions::default());
        Root {
            _dir: dir,
            backend,
            store,
        }
    }

    impl Root {
        fn session(&self, id: &str, policy: Policy, batches: &[Vec<Event>]) -> PathBuf {
            self.store
                .create_with_policy(SessionHeader::new(id, 1), policy)
                .unwrap();
            for batch in batches {
                self.store.append(id, batch).unwrap();
            }
            self.store.close(id).unwrap();
            self.backend.find_log(id).unwrap().unwrap()
        }
    }

    #[test]
    fn the_ends_give_what_a_full_scan_gives() {
        for compression in [Compression::None, Compression::Zstd] {
            let r = root(compression);
            let mut turns = Vec::new();
            let mut seq = 0;
            for n in 1..=3 {
                turns.push(turn(n, seq, 5, "w", true));
                seq += 9;
            }
            let clean = r.session("clean", Policy::Strict, &turns);
            // An open turn ending in a packed row.
            turns.push(turn(4, seq, 6, "o", false));
            let open = r.session("open", Policy::Strict, &turns);
            // No turn/end at all.
            let first = r.session("first", Policy::Strict, &[turn(1, 0, 4, "f", false)]);
            // An ignorable plugin event after the last turn/end.
            let plugin = Event::from_json(
                br#"{"type":"plugin/note","seq":18,"time":7,"data":{"k":1},"ignorable":true}"#,
            )
            .unwrap();
            let lenient = r.session(
                "lenient",
                Policy::Lenient,
                &[turns[0].clone(), turns[1].clone(), vec![plugin]],
            );
            let expect = [
                (&clean, 27, 3, LogState::Clean, 1_026),
                (&open, 35, 4, LogState::OpenTurn, 1_034),
                (&first, 6, 1, LogState::OpenTurn, 1_005),
                (&lenient, 19, 2, LogState::Clean, 7),
            ];
            for (path, events, turns, state, time) in expect {
                let (quick, full) = both(&r.backend, path);
                assert_eq!(quick.as_deref(), Some(full.as_str()), "{compression:?}");
                let s = summary(
                    r.backend.storage(),
                    path,
                    compression,
                    JsonlBackend::READ_POLICY,
                )
                .unwrap();
                assert_eq!(
                    (s.events, s.turns, s.state, s.last_activity),
                    (events, turns, state, Some(time)),
                    "{}",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn what_the_ends_do_not_settle_is_left_to_the_full_scan() {
        // A torn raw line.
        let r = root(Compression::None);
        let path = r.session("torn", Policy::Strict, &[turn(1, 0, 2, "t", true)]);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, br#"{"type":"turn/st"#).unwrap();
        let (quick, full) = both(&r.backend, &path);
        assert_eq!(quick, None);
        assert!(full.contains("state: Torn"), "{full}");

        // An open turn longer than the bound: its turn/end is out of reach.
        for compression in [Compression::None, Compression::Zstd] {
            let r = root(compression);
            let big = "x".repeat(4_000);
            let mut long = turn(2, 6, 400, &big, false);
            // Text deltas differing in index do not pack: one line each.
            for (i, e) in long.iter_mut().enumerate().skip(2) {
                *e = ev(
                    "assistant/chunk",
                    e.seq(),
                    &format!(
                        r#"{{"turn":2,"step":1,"chunk":{{"type":"text-delta","index":{i},"text":"{big}"}}}}"#
                    ),
                );
            }
            let path = r.session("long", Policy::Strict, &[turn(1, 0, 2, "a", true), long]);
            let (quick, full) = both(&r.backend, &path);
            assert_eq!(quick, None, "{compression:?}");
            assert!(full.contains("state: OpenTurn"), "{full}");
            assert!(full.contains("events: 408"), "{full}");
        }
    }

    /// Every log upstream wrote (tests/fixtures/upstream), damaged or not:
    /// where the ends settle the summary it is the full scan's, and they
    /// settle it for every undamaged one.
    #[test]
    fn upstream_logs_summarize_alike() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/upstream");
        let mut settled = 0;
        for (compression, name) in [(Compression::None, "none"), (Compression::Zstd, "zstd")] {
            for side in ["before", "after"] {
                let backend =
                    JsonlBackend::open(fixtures.join(name).join(side), compression).unwrap();
                for project in backend.project_dirs().unwrap() {
                    for dir in backend.session_dirs(&project).unwrap() {
                        let path = dir.join(compression.log_name());
                        let (quick, full) = both(&backend, &path);
                        if let Some(quick) = quick {
                            assert_eq!(quick, full, "{}", path.display());
                            settled += 1;
                        } else {
                            assert!(
                                side == "before"
                                    && (dir.ends_with("torn") || dir.ends_with("torn-head")),
                                "{}: {full}",
                                path.display()
                            );
                        }
                    }
                }
            }
        }
        // 6 raw + 5 zstd sessions on each side, less the torn ones before repair.
        assert_eq!(settled, 22 - 4);
    }
}
