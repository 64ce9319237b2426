//! Storage records of a JSONL log (reference §3): each line after the
//! header is either one event, written verbatim, or a packed row holding a
//! run of `assistant/chunk` deltas (`text-chunks`, `reasoning-chunks`,
//! `tool-call-chunks`). Reading is layout-blind; writing packs runs of at
//! least [`MIN_RUN`] deltas per append batch, with no maximum run length.
//!
//! What can pack, what ends a run and the packed `data` text come from the
//! SQLite backend's codec (the same upstream rules); decoding here follows
//! upstream's JSONL decoder (`decodeStorageRecord`) and its messages.

pub use crate::upstream::normalize::js_safe_integer;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::event::{Event, MAX_SAFE_INTEGER, RawJson};
use crate::upstream::chunks::{self as codec, Delta, DeltaKind};
use crate::upstream::strings::canonical_string;
use crate::view::EventRef;

/// Fewest deltas a packed row holds when written.
pub const MIN_RUN: usize = 3;

/// Whether `tag` is one of the three packed-row tags.
pub fn is_row_tag(tag: &str) -> bool {
    DeltaKind::of_tag(tag).is_some()
}

/// The refusal of the first event of `events` whose type is a packed-row
/// tag: a JSONL line of it would read back as a malformed packed row, so
/// no JSONL log can hold it (a JSONL store refuses to write it, and a
/// session holding it has no upstream JSONL text).
pub fn row_tag_refusal(events: &[Event]) -> Option<crate::event::EventError> {
    let e = events.iter().find(|e| is_row_tag(e.event_type()))?;
    Some(
        crate::event::EventError::new(format!(
            "a JSONL store cannot hold an event of type {:?}: that is a packed-row tag, \
             and its line would read back as a malformed packed row",
            e.event_type()
        ))
        .at_seq(e.seq())
        .of_type(e.event_type()),
    )
}

// ---------------------------------------------------------------------------
// JavaScript number semantics
// ---------------------------------------------------------------------------

/// Whether a JSON number is `-0` (JavaScript's `Object.is(value, -0)`).
pub fn negative_zero(raw: &RawValue) -> bool {
    let text = raw.get();
    text.starts_with('-')
        && serde_json::from_str::<serde_json::Number>(text)
            .ok()
            .and_then(|n| n.as_f64())
            == Some(0.0)
}

/// A number as JavaScript's `String(n)` writes it, for integers and the
/// usual decimals.
pub fn js_number_text(number: &serde_json::Number) -> String {
    if let Some(n) = number.as_i64() {
        return n.to_string();
    }
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
        Some(f) => f.to_string(),
        None => number.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// Decodes one complete line (without its newline) into the events it
/// stores: one for a plain event, the members of a packed row. Any defect
/// gives the reason; the caller treats the line as unparsable, as
/// upstream's scanner does.
pub fn decode_line(line: &[u8]) -> Result<Vec<Event>, String> {
    // Judged by its length before anything is built from it: no line a
    // store writes is longer than one record at its largest.
    if line.len() > crate::limits::MAX_RECORD_LEN {
        return Err(format!(
            "a line of {} bytes, longer than any record ({} bytes at most)",
            line.len(),
            crate::limits::MAX_RECORD_LEN
        ));
    }
    if memchr_chunks(line) {
        let text = std::str::from_utf8(line)
            .map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to()))?;
        if let Ok(map) = serde_json::from_str::<BTreeMap<String, &RawValue>>(text)
            && let Some(tag) = map
                .get("type")
                .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
            && let Some(kind) = DeltaKind::of_tag(&tag)
        {
            return decode_row(&map, &tag, kind);
        }
    }
    let mut event = Event::from_json(line).map_err(|e| e.reason)?;
    // The key order of `surfaceOp` and `sourceEventSeqs` is in the text when
    // both are there; with `surfaceOp` alone, take the order the event would
    // have been built with (surfaceOp first for recovery's closers), as the
    // SQLite backend does.
    if event.surface_op().is_some()
        && event.source_event_seqs().is_none()
        && codec::surface_first_by_default(event.event_type(), event.data().get())
    {
        event = event.with_surface_op_first();
    }
    if is_row_tag(event.event_type()) {
        return Err(format!(
            "malformed {} storage row: envelope must be exactly {{type, seq0, time0, data}}",
            event.event_type()
        ));
    }
    Ok(vec![event])
}

/// Whether a line can be a packed row at all (its tag names `chunks`).
fn memchr_chunks(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"chunks").is_some()
}

fn malformed(tag: &str, why: impl std::fmt::Display) -> String {
    format!("malformed {tag} storage row: {why}")
}

fn exact_keys(map: &BTreeMap<String, &RawValue>, keys: &[&str]) -> bool {
    map.len() == keys.len() && keys.iter().all(|k| map.contains_key(*k))
}

fn is_number(raw: &RawValue) -> bool {
    serde_json::from_str::<serde_json::Number>(raw.get()).is_ok()
}

/// `validateRow` + `expandRow` of upstream's chunk-row decoder.
fn decode_row(
    map: &BTreeMap<String, &RawValue>,
    tag: &str,
    kind: DeltaKind,
) -> Result<Vec<Event>, String> {
    if !exact_keys(map, &["type", "seq0", "time0", "data"]) {
        return Err(malformed(
            tag,
            "envelope must be exactly {type, seq0, time0, data}",
        ));
    }
    let seq0 = js_safe_integer(map["seq0"])
        .filter(|n| *n >= 0)
        .ok_or_else(|| malformed(tag, "seq0 must be a non-negative safe integer"))?;
    let time0 = js_safe_integer(map["time0"])
        .ok_or_else(|| malformed(tag, "time0 must be a safe integer"))?;
    let data: BTreeMap<String, &RawValue> = serde_json::from_str(map["data"].get())
        .map_err(|_| malformed(tag, "data must be an object"))?;
    let (payload_key, id, name) = if kind == DeltaKind::ToolCall {
        let with_name = exact_keys(
            &data,
            &["turn", "step", "index", "id", "name", "dt", "args"],
        );
        if !with_name && !exact_keys(&data, &["turn", "step", "index", "id", "dt", "args"]) {
            return Err(malformed(
                tag,
                "data must be exactly {turn, step, index, id, name?, dt, args}",
            ));
        }
        let strings = || malformed(tag, "id (and name when present) must be strings");
        let id = canonical_string(data["id"].get()).ok_or_else(strings)?;
        let name = match data.get("name") {
            Some(raw) => Some(canonical_string(raw.get()).ok_or_else(strings)?),
            None => None,
        };
        ("args", Some(id), name)
    } else {
        if !exact_keys(&data, &["turn", "step", "index", "dt", "texts"]) {
            return Err(malformed(
                tag,
                "data must be exactly {turn, step, index, dt, texts}",
            ));
        }
        ("texts", None, None)
    };
    if !["turn", "step", "index"]
        .iter()
        .all(|k| is_number(data[*k]))
    {
        return Err(malformed(tag, "turn/step/index must be numbers"));
    }
    let payload: Vec<String> = serde_json::from_str::<Vec<&RawValue>>(data[payload_key].get())
        .ok()
        .filter(|v| !v.is_empty())
        .and_then(|v| v.iter().map(|raw| canonical_string(raw.get())).collect())
        .ok_or_else(|| {
            malformed(
                tag,
                format!("{payload_key} must be a non-empty string array"),
            )
        })?;
    let dt: Vec<i64> = serde_json::from_str::<Vec<&RawValue>>(data["dt"].get())
        .ok()
        .and_then(|v| v.iter().map(|raw| js_safe_integer(raw)).collect())
        .ok_or_else(|| malformed(tag, "dt must be an array of safe integers"))?;
    if dt.len() != payload.len() - 1 {
        return Err(malformed(
            tag,
            format!(
                "dt length {} does not match {} members",
                dt.len(),
                payload.len()
            ),
        ));
    }
    if seq0 as u64 + payload.len() as u64 - 1 > MAX_SAFE_INTEGER {
        return Err(malformed(tag, "member seqs must stay safe integers"));
    }
    // turnwal writes member data as exact text, so the numbers it repeats
    // must be integers (a fractional turn breaks the turn contract anyway).
    let [turn, step, index] = ["turn", "step", "index"].map(|k| js_safe_integer(data[k]));
    let (Some(turn), Some(step), Some(index)) = (turn, step, index) else {
        return Err(malformed(tag, "turn/step/index must be safe integers"));
    };
    let text = crate::upstream::chunks::MemberText::new(
        kind,
        turn,
        step,
        index,
        id.as_deref(),
        name.as_deref(),
    );
    let mut events = Vec::with_capacity(payload.len());
    let mut time = time0;
    for (k, member) in payload.iter().enumerate() {
        if k > 0 {
            time = time
                .checked_add(dt[k - 1])
                .filter(|t| t.unsigned_abs() <= MAX_SAFE_INTEGER)
                .ok_or_else(|| malformed(tag, "member times must stay safe integers"))?;
        }
        let data = text.data(member);
        let event = Event::from_parts(
            "assistant/chunk",
            seq0 as u64 + k as u64,
            time,
            RawJson::trusted(data),
        )
        .map_err(|e| malformed(tag, e.reason))?;
        events.push(event);
    }
    Ok(events)
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

/// The JSONL text of one append batch, every line ending in `\n`: with
/// `pack`, each run of at least [`MIN_RUN`] packable deltas becomes one
/// packed row (a delta packs only when its `data` is byte for byte what the
/// row decodes back to); every other event is its envelope verbatim.
///
/// ```
/// use turnwal::Event;
/// use turnwal::backend::jsonl::records::encode_batch;
/// let chunk = |seq: u64, t: i64, text: &str| Event::new("assistant/chunk", seq, t, &format!(
///     r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#)).unwrap();
/// let text = encode_batch(&[chunk(2, 10, "a"), chunk(3, 15, "b"), chunk(4, 12, "c")], true);
/// assert_eq!(String::from_utf8(text).unwrap(),
///     "{\"type\":\"text-chunks\",\"seq0\":2,\"time0\":10,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[5,-3],\"texts\":[\"a\",\"b\",\"c\"]}}\n");
/// ```
pub fn encode_batch(events: &[Event], pack: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(events.iter().map(|e| e.data().get().len() + 64).sum());
    encode_records(events.iter().map(EventRef::from), pack, b'\n', &mut out);
    if !events.is_empty() {
        out.push(b'\n');
    }
    out
}

/// The storage records of `events` (read in place) appended to `out`, as
/// [`encode_batch`] writes them but separated by `separator` (no separator
/// after the last): with `pack`, each run of at least [`MIN_RUN`] packable
/// deltas is one packed row, which upstream's `decodeStorageRecord` expands
/// back into exactly these events; every other event is its envelope
/// verbatim. Returns how many records were written.
///
/// ```
/// use turnwal::Event;
/// use turnwal::backend::jsonl::records::encode_records;
/// use turnwal::view::EventRef;
/// let chunk = |seq: u64, text: &str| Event::new("assistant/chunk", seq, 10, &format!(
///     r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#)).unwrap();
/// let start = Event::new("step/start", 0, 9, r#"{"turn":1,"step":1}"#).unwrap();
/// let events = [start, chunk(1, "a"), chunk(2, "b"), chunk(3, "c")];
/// let mut out = b"[".to_vec();
/// assert_eq!(encode_records(events.iter().map(EventRef::from), true, b',', &mut out), 2);
/// out.push(b']');
/// assert_eq!(String::from_utf8(out).unwrap(), concat!(
///     r#"[{"type":"step/start","seq":0,"time":9,"data":{"turn":1,"step":1}},"#,
///     r#"{"type":"text-chunks","seq0":1,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}]"#));
/// ```
pub fn encode_records<'a>(
    events: impl IntoIterator<Item = EventRef<'a>>,
    pack: bool,
    separator: u8,
    out: &mut Vec<u8>,
) -> usize {
    let mut records = 0;
    let mut run: Vec<(EventRef<'a>, Delta)> = Vec::new();
    let mut next = |out: &mut Vec<u8>| {
        if records > 0 {
            out.push(separator);
        }
        records += 1;
    };
    let flush = |out: &mut Vec<u8>,
                 run: &mut Vec<(EventRef<'a>, Delta)>,
                 next: &mut dyn FnMut(&mut Vec<u8>)| {
        if run.len() >= MIN_RUN {
            let deltas: Vec<Delta> = run.drain(..).map(|(_, d)| d).collect();
            let first = &deltas[0];
            next(out);
            out.extend_from_slice(
                format!(
                    "{{\"type\":\"{}\",\"seq0\":{},\"time0\":{},\"data\":",
                    first.kind.tag(),
                    first.seq,
                    first.time
                )
                .as_bytes(),
            );
            out.extend_from_slice(codec::packed_json(&deltas).as_bytes());
            out.push(b'}');
        } else {
            for (event, _) in run.drain(..) {
                next(out);
                event.write_json(out);
            }
        }
    };
    for event in events {
        match pack.then(|| codec::classify_ref(event)).flatten() {
            None => {
                flush(out, &mut run, &mut next);
                next(out);
                event.write_json(out);
            }
            Some(delta) => {
                if !run
                    .last()
                    .is_some_and(|(_, last)| codec::continues(last, &delta))
                {
                    flush(out, &mut run, &mut next);
                }
                run.push((event, delta));
            }
        }
    }
    flush(out, &mut run, &mut next);
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line longer than any record is refused by its length, before a
    /// byte of it is parsed or copied (issue 26, item 9).
    #[test]
    fn a_line_longer_than_any_record_is_refused_by_its_length() {
        let limit = crate::limits::MAX_RECORD_LEN;
        let mut line = br#"{"type":"user/message","seq":0,"time":1,"data":{"text":""#.to_vec();
        let tail = br#""}}"#;
        line.resize(limit + 1 - tail.len(), b'a');
        line.extend_from_slice(tail);
        assert_eq!(line.len(), limit + 1);
        let err = decode_line(&line).unwrap_err();
        assert_eq!(
            err,
            format!(
                "a line of {} bytes, longer than any record ({limit} bytes at most)",
                limit + 1
            )
        );
        // One byte shorter it is an event like any other.
        line.remove(60);
        let envelope = br#"{"type":"user/message","seq":0,"time":1,"data":}"#.len();
        assert_eq!(
            decode_line(&line).unwrap()[0].data().get().len(),
            limit - envelope
        );
    }

    fn chunk(seq: u64, time: i64, text: &str) -> Event {
        Event::new(
            "assistant/chunk",
            seq,
            time,
            &format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":{}}}}}"#,
                serde_json::to_string(text).unwrap()
            ),
        )
        .unwrap()
    }

    #[test]
    fn rows_round_trip() {
        let events: Vec<Event> = (0..5).map(|i| chunk(i, 100 - i as i64, "x")).collect();
        let text = encode_batch(&events, true);
        let line = &text[..text.len() - 1];
        assert_eq!(decode_line(line).unwrap(), events);
        // Two deltas stay verbatim.
        let text = encode_batch(&events[..2], true);
        assert_eq!(
            String::from_utf8(text).unwrap(),
            format!("{}\n{}\n", events[0].to_json(), events[1].to_json())
        );
        assert_eq!(
            String::from_utf8(encode_batch(&events, false)).unwrap(),
            events
                .iter()
                .map(|e| e.to_json() + "\n")
                .collect::<String>()
        );
    }

    #[test]
    fn malformed_rows_are_named() {
        let cases = [
            (
                r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{},"x":1}"#,
                "malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}",
            ),
            (
                r#"{"type":"text-chunks","seq0":-1,"time0":1,"data":{}}"#,
                "malformed text-chunks storage row: seq0 must be a non-negative safe integer",
            ),
            (
                r#"{"type":"text-chunks","seq0":1,"time0":1.5,"data":{}}"#,
                "malformed text-chunks storage row: time0 must be a safe integer",
            ),
            (
                r#"{"type":"text-chunks","seq0":1,"time0":1,"data":[]}"#,
                "malformed text-chunks storage row: data must be an object",
            ),
            (
                r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}"#,
                "malformed text-chunks storage row: texts must be a non-empty string array",
            ),
            (
                r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a"]}}"#,
                "malformed text-chunks storage row: dt length 1 does not match 1 members",
            ),
            (
                r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0.5],"texts":["a","b"]}}"#,
                "malformed text-chunks storage row: dt must be an array of safe integers",
            ),
            (
                r#"{"type":"text-chunks","seq0":1,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
                "malformed text-chunks storage row: member times must stay safe integers",
            ),
            (
                r#"{"type":"text-chunks","seq0":9007199254740991,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
                "malformed text-chunks storage row: member seqs must stay safe integers",
            ),
            (
                r#"{"type":"tool-call-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}"#,
                "malformed tool-call-chunks storage row: data must be exactly {turn, step, index, id, name?, dt, args}",
            ),
            (
                r#"{"type":"tool-call-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"id":5,"dt":[],"args":["a"]}}"#,
                "malformed tool-call-chunks storage row: id (and name when present) must be strings",
            ),
            (
                r#"{"type":"reasoning-chunks","seq0":1,"time0":1,"data":{"turn":"1","step":1,"index":0,"dt":[],"texts":["a"]}}"#,
                "malformed reasoning-chunks storage row: turn/step/index must be numbers",
            ),
            (
                r#"{"type":"text-chunks","seq":1,"time":1,"data":{}}"#,
                "malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}",
            ),
        ];
        for (line, message) in cases {
            assert_eq!(decode_line(line.as_bytes()).unwrap_err(), message, "{line}");
        }
        // One member and negative deltas decode; member strings are kept exact.
        let events = decode_line(
            br#"{"data":{"texts":["a","\ud800"],"dt":[-5],"index":0,"step":2,"turn":1},"time0":10,"seq0":4,"type":"text-chunks"}"#,
        )
        .unwrap();
        assert_eq!(
            events.iter().map(Event::to_json).collect::<Vec<_>>(),
            [
                r#"{"type":"assistant/chunk","seq":4,"time":10,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"a"}}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":5,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"\ud800"}}}"#,
            ]
        );
    }

    #[test]
    fn js_numbers() {
        let raw = |s: &str| serde_json::from_str::<&RawValue>(s).unwrap().to_owned();
        assert_eq!(js_safe_integer(&raw("1.0")), Some(1));
        assert_eq!(js_safe_integer(&raw("1e2")), Some(100));
        assert_eq!(js_safe_integer(&raw("1.5")), None);
        assert_eq!(js_safe_integer(&raw("9007199254740992")), None);
        assert_eq!(
            js_safe_integer(&raw("-9007199254740991")),
            Some(-9007199254740991)
        );
        assert!(negative_zero(&raw("-0")) && negative_zero(&raw("-0.0")));
        assert!(!negative_zero(&raw("0")));
    }
}
