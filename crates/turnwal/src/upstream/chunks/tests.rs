//! The scanned packability test against the serde parse it stands in for,
//! canonical strings against `canonical_string`, and storage records of
//! stored packed rows against the records of the events they hold.

use super::*;
use crate::event::EventKind;

/// xorshift64*: reproducible inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Pieces of string literals' insides: canonical and not, valid JSON and
/// not.
const CANONICAL_PIECES: &[&str] = &[
    "a", "Hello", " ", "é", "😀", "\u{2028}", "\u{7f}", "/", "\\\"", "\\\\", "\\b", "\\f", "\\n",
    "\\r", "\\t", "\\u0000", "\\u0001", "\\u000b", "\\u000e", "\\u001f", "\\ud800", "\\udbff",
    "\\udc00", "\\udfff", "\\ud83d", "\\ude00",
];
const OTHER_PIECES: &[&str] = &[
    "\\/",
    "\\u0008",
    "\\u0009",
    "\\u000a",
    "\\u000c",
    "\\u000d",
    "\\u001F",
    "\\u0020",
    "\\u0041",
    "\\u00e9",
    "\\u007f",
    "\\uD800",
    "\\uDC00",
    "\\ud83d\\ude00",
    "\\ud800\\udc00",
    "\\udbff\\udfff",
    "\\u12",
    "\\u",
    "\\x",
    "\\U0041",
    "\\",
    "\"",
    "\n",
    "\t",
    "\u{1}",
    "\u{1f}",
];

fn string_literal(r: &mut Rng, canonical: bool) -> String {
    let mut s = String::from("\"");
    for _ in 0..r.below(6) {
        if canonical || r.chance(70) {
            s.push_str(r.pick(CANONICAL_PIECES));
        } else {
            s.push_str(r.pick(OTHER_PIECES));
        }
    }
    s.push('"');
    s
}

const INTS: &[&str] = &[
    "0",
    "1",
    "7",
    "42",
    "-3",
    "9007199254740991",
    "-9007199254740991",
];
const OTHER_NUMBERS: &[&str] = &[
    "1.0",
    "1e2",
    "1E2",
    "01",
    "-0",
    "+1",
    "0.5",
    "9007199254740992",
    "-9007199254740992",
    "99999999999999999999",
    "\"1\"",
    "null",
    "true",
    "[]",
    "1 ",
];

fn number(r: &mut Rng, canonical: bool) -> String {
    if canonical || r.chance(70) {
        r.pick(INTS).to_owned()
    } else {
        r.pick(OTHER_NUMBERS).to_owned()
    }
}

fn object(r: &mut Rng, mut fields: Vec<(String, String)>, canonical: bool) -> String {
    if !canonical {
        if r.chance(15) {
            // Another key order.
            for i in (1..fields.len()).rev() {
                fields.swap(i, r.below(i + 1));
            }
        }
        if r.chance(8) && !fields.is_empty() {
            let dup = fields[r.below(fields.len())].clone();
            let at = r.below(fields.len() + 1);
            fields.insert(at, dup);
        }
        if r.chance(8) {
            let at = r.below(fields.len() + 1);
            fields.insert(at, ("x".into(), "1".into()));
        }
        if r.chance(8) && !fields.is_empty() {
            fields.remove(r.below(fields.len()));
        }
    }
    let (colon, comma) = if !canonical && r.chance(8) {
        (r.pick(&[":", " :", ": "]), r.pick(&[",", ", ", " ,"]))
    } else {
        (":", ",")
    };
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\"{colon}{v}"))
        .collect();
    let (open, close) = if !canonical && r.chance(4) {
        ("{ ", "}\n")
    } else {
        ("{", "}")
    };
    format!("{open}{}{close}", body.join(comma))
}

const TYPES: &[&str] = &[
    "\"text-delta\"",
    "\"reasoning-delta\"",
    "\"tool-call-delta\"",
];
const OTHER_TYPES: &[&str] = &[
    "\"text-start\"",
    "\"finish\"",
    "\"text\\u002ddelta\"",
    "\"Text-delta\"",
    "1",
    "null",
    "\"text-delta\" ",
];

/// A chunk event's `data`: canonical (what a packed row decodes to) or
/// near it.
fn member_text(r: &mut Rng) -> String {
    let canonical = r.chance(45);
    let string = |r: &mut Rng| {
        if !canonical && r.chance(5) {
            r.pick(&["null", "1", "[]"]).to_owned()
        } else {
            string_literal(r, canonical)
        }
    };
    let kind = if canonical || r.chance(80) {
        r.pick(TYPES)
    } else {
        r.pick(OTHER_TYPES)
    };
    let mut chunk = vec![
        ("type".to_owned(), kind.to_owned()),
        ("index".to_owned(), number(r, canonical)),
    ];
    let tool = kind == "\"tool-call-delta\"";
    // Now and then the other kind's fields.
    if tool != (!canonical && r.chance(10)) {
        chunk.push(("id".into(), string(r)));
        if r.chance(50) {
            chunk.push(("name".into(), string(r)));
        }
        chunk.push(("argumentsDelta".into(), string(r)));
    } else {
        chunk.push(("text".into(), string(r)));
    }
    let chunk = object(r, chunk, canonical);
    let top = vec![
        ("turn".to_owned(), number(r, canonical)),
        ("step".to_owned(), number(r, canonical)),
        ("chunk".to_owned(), chunk),
    ];
    let mut text = object(r, top, canonical);
    if !canonical && r.chance(20) {
        // A character dropped, doubled or replaced.
        let chars: Vec<char> = text.chars().collect();
        let at = r.below(chars.len());
        let mut mutated: String = chars[..at].iter().collect();
        match r.below(3) {
            0 => {}
            1 => {
                mutated.push(chars[at]);
                mutated.push(chars[at]);
            }
            _ => mutated.push(r.pick(&['"', '\\', '{', '}', ',', ':', '0', '-', ' ', 'é'])),
        }
        mutated.extend(&chars[at + 1..]);
        text = mutated;
    }
    text
}

fn chunk_ref(data: &str, seq: u64, time: i64) -> EventRef<'_> {
    EventRef {
        event_type: "assistant/chunk",
        kind: EventKind::AssistantChunk,
        seq,
        time,
        data,
        source_event_seqs: None,
        surface_op: None,
        ignorable: false,
        surface_op_first: false,
    }
}

#[test]
fn scanned_strings_are_exactly_the_canonical_ones() {
    let mut r = Rng(0x5eed_1234_5678_9abc);
    let mut canonical = 0;
    for _ in 0..200_000 {
        let only_canonical = r.chance(30);
        let raw = string_literal(&mut r, only_canonical);
        let scanned = Cursor::new(&raw).string();
        let whole = scanned == Some(raw.as_str());
        let fixed = canonical_string(&raw).as_deref() == Some(raw.as_str());
        assert_eq!(whole, fixed, "{raw:?}");
        canonical += usize::from(fixed);
    }
    assert!(canonical > 50_000, "{canonical}");
}

#[test]
fn scanned_integers_are_exactly_javascripts_safe_integers() {
    for text in INTS.iter().chain(OTHER_NUMBERS) {
        let mut c = Cursor::new(text);
        let scanned = c.int().filter(|_| c.done());
        let reference = serde_json::from_str::<i64>(text)
            .ok()
            .filter(|n| safe(*n) && n.to_string() == *text);
        assert_eq!(scanned, reference, "{text}");
    }
}

/// The scanner against the serde parse it stands in for, on canonical
/// member texts and every kind of near miss: non-canonical numbers (`1.0`,
/// `1e2`, `-0`, unsafe), escapes (`\/`, `\u0041`, uppercase hex, a
/// surrogate pair escaped, lone surrogates), whitespace, duplicate, missing
/// and extra keys, other key orders, other chunk types, broken JSON.
#[test]
fn the_scanned_packability_test_answers_as_the_serde_parse() {
    let mut r = Rng(0x0dd5_eed5_0fc0_ffee);
    let (mut member, mut not_delta, mut unsure, mut packs) = (0, 0, 0, 0);
    for i in 0..200_000u64 {
        let data = member_text(&mut r);
        let event = chunk_ref(&data, i, i as i64 * 3 - 7);
        let parsed = classify_parsed(event);
        assert_eq!(classify_ref(event), parsed, "{data}");
        match scan_member(&data) {
            Scanned::Member(m) => {
                member += 1;
                assert_eq!(Some(m.delta(i, event.time())), parsed, "{data}");
            }
            Scanned::NotDelta => {
                not_delta += 1;
                assert_eq!(parsed, None, "{data}");
            }
            Scanned::Unsure => {
                unsure += 1;
                // The scanner misses no packable text: the serde parse is
                // only ever asked about texts that do not pack.
                assert_eq!(parsed, None, "{data}");
            }
        }
        packs += usize::from(parsed.is_some());
    }
    assert!(member > 40_000 && not_delta > 1_000 && unsure > 40_000 && packs == member);
    // Envelope extras never pack, whatever the data.
    let data = r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#;
    let plain = chunk_ref(data, 1, 1);
    assert!(classify_ref(plain).is_some());
    for event in [
        EventRef {
            ignorable: true,
            ..plain
        },
        EventRef {
            surface_op: Some("1"),
            ..plain
        },
        EventRef {
            source_event_seqs: Some("[]"),
            ..plain
        },
        EventRef {
            kind: EventKind::TurnEnd,
            event_type: "turn/end",
            ..plain
        },
    ] {
        assert_eq!(classify_ref(event), None);
        assert_eq!(classify_parsed(event), None);
    }
}

#[test]
fn adversarial_member_texts() {
    let cases = [
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a\n\"b\\"}}"#,
            true,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\ud800"}}"#,
            true,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\udc00\ud800"}}"#,
            true,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\ud800\udc00"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\uD800"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\u0041"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\/"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\u000a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"\u001f"}}"#,
            true,
        ),
        (
            r#"{"turn":1.0,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":1e2,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":-0,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":9007199254740992,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":-9007199254740991,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            true,
        ),
        (
            r#"{"turn":1, "step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}} "#,
            false,
        ),
        (
            r#"{"step":2,"turn":1,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"index":3,"type":"text-delta","text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a","text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","type":"text-delta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"},"x":1}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":null}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":3,"text":""}}"#,
            true,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":3,"id":"c","argumentsDelta":"{"}}"#,
            true,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":3,"id":"c","name":"f","argumentsDelta":"{"}}"#,
            true,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":3,"name":"f","id":"c","argumentsDelta":"{"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":3,"id":"c","name":null,"argumentsDelta":"{"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":3,"argumentsDelta":"{"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":3,"id":"c","argumentsDelta":"{","text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"id":"c","text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text\u002ddelta","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-start","index":3,"text":"a"}}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a"}"#,
            false,
        ),
        (
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":3,"text":"a}}"#,
            false,
        ),
        ("", false),
    ];
    for (data, packs) in cases {
        let event = chunk_ref(data, 5, 9);
        let parsed = classify_parsed(event);
        assert_eq!(parsed.is_some(), packs, "{data}");
        assert_eq!(classify_ref(event), parsed, "{data}");
    }
}

// ---------------------------------------------------------------------------
// Storage records of stored packed rows
// ---------------------------------------------------------------------------

/// A session-like stream of events: runs of deltas of every kind, broken by
/// other events, ignorable or non-canonical deltas, time jumps past 2^53,
/// and index, step, id and name changes.
fn stream(r: &mut Rng, len: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(len);
    let mut time: i64 = 1_000;
    let (mut turn, mut step, mut index) = (1i64, 1i64, 0i64);
    let mut kind = 0;
    let mut id = "\"call-1\"".to_owned();
    let mut name: Option<String> = Some("\"read\"".into());
    for seq in 0..len as u64 {
        // A change now and then.
        match r.below(40) {
            0 => index += 1,
            1 => step += 1,
            2 => turn += 1,
            3 => kind = r.below(3),
            4 => id = string_literal(r, true),
            5 => name = r.chance(50).then(|| string_literal(r, true)),
            6 => {
                time = if time > 0 {
                    -8_000_000_000_000_000
                } else {
                    8_000_000_000_000_000
                }
            }
            _ => time += r.below(40) as i64 - 5,
        }
        let canonical = r.chance(97);
        let payload = string_literal(r, canonical);
        let data = match kind {
            2 => {
                let name = name
                    .as_ref()
                    .map(|n| format!(",\"name\":{n}"))
                    .unwrap_or_default();
                format!(
                    r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"tool-call-delta","index":{index},"id":{id}{name},"argumentsDelta":{payload}}}}}"#
                )
            }
            k => format!(
                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"{}","index":{index},"text":{payload}}}}}"#,
                ["text-delta", "reasoning-delta"][k]
            ),
        };
        let data = match r.below(30) {
            0 => None,
            1 => Some(data.replace(":", ": ")),
            _ => Some(data),
        };
        let event = data
            .and_then(|data| Event::new("assistant/chunk", seq, time, &data).ok())
            // A payload that is no JSON string: another event instead.
            .unwrap_or_else(|| {
                Event::new("step/start", seq, time, r#"{"turn":1,"step":1}"#).unwrap()
            });
        let event = if r.chance(2) {
            event.with_ignorable()
        } else {
            event
        };
        events.push(event);
    }
    events
}

/// `events` as records: now and then a run of packable deltas that
/// continue one another (3 or more) as one packed row, in the canonical
/// spelling, as a store would keep it.
fn as_records(r: &mut Rng, events: &[Event]) -> Vec<Result<PackedRun, usize>> {
    let deltas: Vec<Option<Delta>> = events.iter().map(classify).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let mut end = i;
        if deltas[i].is_some() {
            end = i + 1;
            while end < events.len()
                && deltas[end]
                    .as_ref()
                    .is_some_and(|d| continues(deltas[end - 1].as_ref().unwrap(), d))
            {
                end += 1;
            }
        }
        if end - i >= MIN_PACKED_MEMBERS && r.chance(70) {
            let len = MIN_PACKED_MEMBERS + r.below(end - i - MIN_PACKED_MEMBERS + 1);
            let run: Vec<Delta> = deltas[i..i + len].iter().flatten().cloned().collect();
            let packed = PackedRun::parse(run[0].kind, run[0].seq, run[0].time, packed_json(&run))
                .expect("packed_json writes the canonical spelling");
            assert_eq!(packed.events(), events[i..i + len]);
            out.push(Ok(packed));
            i += len;
        } else {
            out.push(Err(i));
            i += 1;
        }
    }
    out
}

#[cfg(feature = "jsonl")]
#[test]
fn stored_packed_rows_give_the_records_their_events_give() {
    use crate::backend::jsonl::records::encode_records;
    let mut r = Rng(0xfeed_beef_1234_4321);
    let mut joined = 0;
    for round in 0..3_000 {
        let len = 1 + r.below(60);
        let events = stream(&mut r, len);
        let records = as_records(&mut r, &events);
        let records: Vec<Record<'_>> = records
            .iter()
            .map(|x| match x {
                Ok(packed) => Record::Packed(packed),
                Err(i) => Record::Event((&events[*i]).into()),
            })
            .collect();
        joined += records
            .windows(2)
            .filter(|w| matches!(w, [Record::Packed(_), Record::Packed(_)]))
            .count();
        for pack in [true, false] {
            let mut expected = b"[".to_vec();
            let n = encode_records(events.iter().map(EventRef::from), pack, b',', &mut expected);
            let mut got = b"[".to_vec();
            let m = encode_stored_records(records.iter().copied(), pack, b',', &mut got);
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(expected).unwrap(),
                "round {round}, pack {pack}"
            );
            assert_eq!(m, n);
        }
    }
    assert!(joined > 500, "{joined}");
}

#[test]
fn packed_runs_parse_only_the_canonical_spelling() {
    let ok = r#"{"turn":1,"step":2,"index":0,"dt":[5,-3],"texts":["a","\n","\ud800"]}"#;
    let run = PackedRun::parse(DeltaKind::Text, 4, 10, ok.into()).unwrap();
    assert_eq!(
        (run.len(), run.seq0(), run.last_time, run.data()),
        (3, 4, 12, ok)
    );
    let tool =
        r#"{"turn":1,"step":2,"index":0,"dt":[0,0],"id":"c","name":"f","args":["{","}",""]}"#;
    assert!(PackedRun::parse(DeltaKind::ToolCall, 0, 0, tool.into()).is_ok());
    for (kind, data) in [
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[5],"texts":["a","b"]}"#,
        ),
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1],"texts":["a","b"]}"#,
        ),
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1.0],"texts":["a","b","c"]}"#,
        ),
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1],"texts":["a","\u0041","c"]}"#,
        ),
        (
            DeltaKind::Text,
            r#"{"step":2,"turn":1,"index":0,"dt":[5,1],"texts":["a","b","c"]}"#,
        ),
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1],"texts":["a","b","c"] }"#,
        ),
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1],"args":["a","b","c"]}"#,
        ),
        (
            DeltaKind::Text,
            r#"{"turn":1,"step":2,"index":0,"dt":[9007199254740991,1],"texts":["a","b","c"]}"#,
        ),
        (
            DeltaKind::ToolCall,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1],"texts":["a","b","c"]}"#,
        ),
        (
            DeltaKind::ToolCall,
            r#"{"turn":1,"step":2,"index":0,"dt":[5,1],"name":"f","id":"c","args":["a","b","c"]}"#,
        ),
    ] {
        assert!(
            PackedRun::parse(kind, 0, 10, data.into()).is_err(),
            "{data}"
        );
    }
    let long = format!(
        r#"{{"turn":1,"step":2,"index":0,"dt":[{}],"texts":[{}]}}"#,
        vec!["0"; 1024].join(","),
        vec!["\"a\""; 1025].join(",")
    );
    assert!(PackedRun::parse(DeltaKind::Text, 0, 10, long).is_err());
    assert!(PackedRun::parse(DeltaKind::Text, MAX_SAFE_INTEGER - 1, 10, ok.into()).is_err());
}

/// The planner as the packing rule states it, the slow way: every event
/// classified by the serde parse, continuing deltas grouped, each group cut
/// into the longest runs that fit.
fn reference_plan(events: &[Event]) -> Vec<Piece> {
    fn flush(out: &mut Vec<Piece>, group: &mut Vec<(usize, Delta)>) {
        let mut at = 0;
        while group.len() - at >= MIN_PACKED_MEMBERS {
            let deltas: Vec<Delta> = group[at..].iter().map(|(_, d)| d.clone()).collect();
            let k = fitting_prefix(&deltas);
            if k < MIN_PACKED_MEMBERS {
                out.push(Piece::One(group[at].0));
                at += 1;
            } else {
                out.push(Piece::Run {
                    start: group[at].0,
                    deltas: deltas[..k].to_vec(),
                });
                at += k;
            }
        }
        out.extend(group[at..].iter().map(|(i, _)| Piece::One(*i)));
        group.clear();
    }
    let mut out = Vec::new();
    let mut group: Vec<(usize, Delta)> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match classify_parsed(event.into()) {
            None => {
                flush(&mut out, &mut group);
                out.push(Piece::One(i));
            }
            Some(delta) => {
                if !group
                    .last()
                    .is_some_and(|(_, last)| continues(last, &delta))
                {
                    flush(&mut out, &mut group);
                }
                group.push((i, delta));
            }
        }
    }
    flush(&mut out, &mut group);
    out
}

#[test]
fn the_batch_planner_packs_exactly_the_runs_the_rule_gives() {
    let mut r = Rng(0x005e_ed0f_91a7);
    let mut runs = 0;
    for round in 0..4_000 {
        let len = 1 + r.below(80);
        let events = stream(&mut r, len);
        let got = plan_batch(events.iter().map(EventRef::from));
        let want = reference_plan(&events);
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "round {round}");
        runs += got
            .iter()
            .filter(|p| matches!(p, Piece::Run { .. }))
            .count();
    }
    assert!(runs > 1_000, "{runs}");
}
