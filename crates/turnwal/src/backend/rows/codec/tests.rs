//! Unit tests of the row codec: varints, the data column, packing limits and
//! strict decoding.

use super::*;
use crate::upstream::chunks::packed_len;

fn chunk(seq: u64, time: i64, text: &str) -> Event {
    let data = format!(
        r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":{}}}}}"#,
        serde_json::to_string(text).unwrap()
    );
    Event::new("assistant/chunk", seq, time, &data).unwrap()
}

fn chunk_data(seq: u64, data: &str) -> Event {
    Event::new("assistant/chunk", seq, seq as i64, data).unwrap()
}

fn row_in(out: &RowOut) -> RowIn {
    RowIn {
        seq: Col::Integer(out.seq as i64),
        event_type: Col::Text(out.event_type.clone().into_bytes()),
        time: Col::Integer(out.time),
        data: match &out.data {
            Data::Text(t) => Col::Text(t.clone().into_bytes()),
            Data::Blob(b) => Col::Blob(b.clone()),
        },
        source_event_seqs: out.source_event_seqs.clone().map_or(Col::Null, Col::Blob),
        surface_op: out
            .surface_op
            .clone()
            .map_or(Col::Null, |s| Col::Text(s.into_bytes())),
        ignorable: out.ignorable.map_or(Col::Null, Col::Integer),
    }
}

/// Encodes a batch and decodes every row back.
fn round_trip(events: &[Event]) -> (Vec<RowOut>, Vec<Event>) {
    let rows = encode_batch(events).unwrap();
    let back = rows
        .iter()
        .flat_map(|r| decode_row(&row_in(r)).unwrap())
        .collect();
    (rows, back)
}

fn shape(rows: &[RowOut]) -> Vec<(String, usize)> {
    rows.iter()
        .map(|r| (r.event_type.clone(), r.members))
        .collect()
}

fn packed_row_in(tag: &str, seq: i64, time: i64, data: &str) -> RowIn {
    RowIn {
        seq: Col::Integer(seq),
        event_type: Col::Text(tag.as_bytes().to_vec()),
        time: Col::Integer(time),
        data: Col::Text(data.as_bytes().to_vec()),
        source_event_seqs: Col::Null,
        surface_op: Col::Null,
        ignorable: Col::Integer(0),
    }
}

fn err_of(row: &RowIn) -> RowError {
    decode_row(row).unwrap_err()
}

// -- varints -----------------------------------------------------------------

#[test]
fn varints_round_trip_every_shape() {
    let max = MAX_SAFE_INTEGER;
    for seqs in [
        vec![],
        vec![0],
        vec![127],
        vec![128],
        vec![5, 4, 3, 2, 1, 0],
        vec![0, max],
        vec![max, 0],
        vec![max, max - 1, 1, max],
        (0..2000).collect(),
    ] {
        let bytes = encode_source_seqs(&seqs);
        assert_eq!(decode_source_seqs(&bytes).unwrap(), seqs, "{seqs:?}");
    }
    assert_eq!(encode_source_seqs(&[]), Vec::<u8>::new());
    assert_eq!(encode_source_seqs(&[1, 3, 2]), [1, 4, 1]);
    assert_eq!(encode_source_seqs(&[128]), [0x80, 0x01]);
    // A 2000-entry list is far smaller than its JSON.
    let list: Vec<u64> = (1000..3000).collect();
    assert_eq!(encode_source_seqs(&list).len(), 2 + 1999);
}

#[test]
fn varints_reject_truncated_noncanonical_and_out_of_range() {
    let err = |bytes: &[u8]| decode_source_seqs(bytes).unwrap_err();
    assert_eq!(
        err(&[0x80]),
        "malformed source_event_seqs storage value: truncated varint"
    );
    assert_eq!(
        err(&[0x05, 0xff, 0xff]),
        "malformed source_event_seqs storage value: truncated varint"
    );
    assert_eq!(
        err(&[0x80, 0x00]),
        "malformed source_event_seqs storage value: non-canonical varint"
    );
    assert_eq!(
        err(&[0x01, 0x82, 0x80, 0x00]),
        "malformed source_event_seqs storage value: non-canonical varint"
    );
    // 2^53 as the first seq: one past the largest safe integer.
    let mut over = Vec::new();
    push_varint(&mut over, MAX_SAFE_INTEGER + 1);
    assert_eq!(
        err(&over),
        "malformed source_event_seqs storage value: varint is out of range"
    );
    // A delta past 2 * (2^53 - 1) in ZigZag.
    let mut delta = vec![0];
    push_varint(&mut delta, MAX_SAFE_INTEGER * 2 + 1);
    assert_eq!(
        err(&delta),
        "malformed source_event_seqs storage value: varint is out of range"
    );
    // More than 9 bytes of continuation.
    assert_eq!(
        err(&[0xff; 10]),
        "malformed source_event_seqs storage value: varint is out of range"
    );
    // 0 then -1: a seq below zero.
    assert_eq!(
        err(&[0x00, 0x01]),
        "malformed source_event_seqs storage value: decoded seq is out of range"
    );
    // MAX then +1.
    let mut up = Vec::new();
    push_varint(&mut up, MAX_SAFE_INTEGER);
    push_varint(&mut up, 2);
    assert_eq!(
        err(&up),
        "malformed source_event_seqs storage value: decoded seq is out of range"
    );
}

// -- the data column -----------------------------------------------------------

#[test]
fn zstd_only_from_4096_bytes_and_only_when_smaller() {
    let text = |n: usize| format!("\"{}\"", "a".repeat(n - 2));
    assert_eq!(encode_data(text(4095)), Data::Text(text(4095)));
    let Data::Blob(frame) = encode_data(text(4096)) else {
        panic!("4096 compressible bytes are a BLOB")
    };
    assert!(frame.len() < 4096);
    assert_eq!(
        decode_data(&Col::Blob(frame.clone()), 4096).unwrap(),
        text(4096)
    );
    assert_eq!(
        zstd::bulk::decompress(&frame, 4096).unwrap(),
        text(4096).as_bytes()
    );
    // A frame that is not smaller: the text stays TEXT.
    let same = |b: &[u8]| Ok(vec![0; b.len()]);
    assert_eq!(encode_data_with(text(5000), same), Data::Text(text(5000)));
    let one_less = |b: &[u8]| Ok(vec![0; b.len() - 1]);
    assert_eq!(
        encode_data_with(text(5000), one_less),
        Data::Blob(vec![0; 4999])
    );
    let failing = |_: &[u8]| Err(std::io::Error::other("no"));
    assert_eq!(
        encode_data_with(text(5000), failing),
        Data::Text(text(5000))
    );
}

#[test]
fn data_decoding_is_strict_and_bounded() {
    let bad = decode_data(&Col::Blob(vec![1, 2, 3, 4, 5]), 100).unwrap_err();
    assert!(
        bad.detail.starts_with("data BLOB does not decompress"),
        "{bad:?}"
    );
    let frame = zstd::bulk::compress(&[b'a'; 5000], 3).unwrap();
    let over = decode_data(&Col::Blob(frame.clone()), 4999).unwrap_err();
    assert_eq!(
        over.detail,
        "data BLOB decompresses past the 4999-byte bound"
    );
    let cut = decode_data(&Col::Blob(frame[..frame.len() - 3].to_vec()), 10_000).unwrap_err();
    assert_eq!(cut.reason, CutReason::Incomplete, "{cut:?}");
    let utf8 = zstd::bulk::compress(b"\"\xff\"", 3).unwrap();
    assert_eq!(
        decode_data(&Col::Blob(utf8), 100).unwrap_err().detail,
        "decompressed data is not valid UTF-8 at byte 1"
    );
    assert_eq!(
        decode_data(&Col::Text(b"\"\xc3\"".to_vec()), 100)
            .unwrap_err()
            .detail,
        "data is not valid UTF-8 at byte 1"
    );
    assert_eq!(
        decode_data(&Col::Integer(5), 100).unwrap_err().detail,
        "data must be TEXT or BLOB, got INTEGER"
    );
}

// -- canonical strings -----------------------------------------------------------

#[test]
fn canonical_strings_are_json_stringify() {
    for (raw, canonical) in [
        (r#""plain""#, r#""plain""#),
        (r#""\u0041\/\b\f\n\r\t""#, r#""A/\b\f\n\r\t""#),
        (r#""\u001F\u007f\u2028""#, "\"\\u001f\u{7f}\u{2028}\""),
        (r#""é😀""#, "\"é😀\""),
        (r#""\ud83d\ude00""#, "\"😀\""),
        (r#""\uD800x""#, r#""\ud800x""#),
        (r#""\udc00\ud800""#, r#""\udc00\ud800""#),
        (r#""\ud800\ud800\udc00""#, "\"\\ud800𐀀\""),
        (r#""\"\\""#, r#""\"\\""#),
    ] {
        assert_eq!(canonical_string(raw).as_deref(), Some(canonical), "{raw}");
    }
    for raw in [
        "",
        "\"",
        "x",
        "\"a",
        r#""\x""#,
        r#""\u12""#,
        r#""\u+123""#,
        "\"a\"b\"",
        "\"\t\"",
    ] {
        assert_eq!(canonical_string(raw), None, "{raw:?}");
    }
}

// -- scalar rows -------------------------------------------------------------------

#[test]
fn scalar_rows_round_trip_every_envelope_field() {
    let plain = Event::new(
        "user/message",
        0,
        -5,
        r#"{"n":1e+21,"s":"\ud800","k":[ 1 ]}"#,
    )
    .unwrap();
    let sources = Event::new("tool/result", 3, 7, r#"{"turn":1}"#)
        .unwrap()
        .with_source_event_seqs(&[2, 0, 1])
        .unwrap()
        .with_surface_op(r#"{"op":"replace","start":0,"end":1}"#)
        .unwrap();
    let first = Event::from_json(
        br#"{"type":"tool/result","seq":4,"time":8,"data":{},"surfaceOp":"append","sourceEventSeqs":[]}"#,
    )
    .unwrap();
    assert!(first.surface_op_first());
    let ignorable = Event::new("plugin/x", 5, 9, "null")
        .unwrap()
        .with_ignorable();
    let events = [plain, sources, first, ignorable];
    let (rows, back) = round_trip(&events);
    assert_eq!(back, events);
    assert_eq!(
        back.iter().map(Event::to_json).collect::<Vec<_>>(),
        events.iter().map(Event::to_json).collect::<Vec<_>>()
    );
    assert_eq!(
        rows[0].data,
        Data::Text(r#"{"n":1e+21,"s":"\ud800","k":[ 1 ]}"#.into())
    );
    assert_eq!(rows[0].ignorable, None);
    assert_eq!(rows[1].source_event_seqs.as_deref(), Some(&[2, 3, 2][..]));
    assert_eq!(
        rows[1].surface_op.as_deref(),
        Some(r#"{"op":"replace","start":0,"end":1}"#)
    );
    assert_eq!(rows[2].source_event_seqs.as_deref(), Some(&[][..]));
    assert_eq!(rows[2].surface_op.as_deref(), Some("\"append\" "));
    assert_eq!(rows[3].ignorable, Some(1));
    // Large data is a BLOB and comes back byte for byte.
    let big = format!(r#"{{"text":"{}"}}"#, "ab".repeat(4000));
    let event = Event::new("user/message", 0, 1, &big).unwrap();
    let (rows, back) = round_trip(std::slice::from_ref(&event));
    assert!(matches!(rows[0].data, Data::Blob(_)));
    assert_eq!(back, [event]);
}

#[test]
fn closer_rows_are_stored_as_upstream_stores_them() {
    let data = r#"{"turn":2,"step":1,"message":{"id":"interrupted-tool-result-c-5","role":"user"},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}"#;
    let line = |first: bool| {
        let (a, b) = (r#""surfaceOp":"append""#, r#""sourceEventSeqs":[3]"#);
        let (a, b) = if first { (a, b) } else { (b, a) };
        format!(r#"{{"type":"tool/result","seq":5,"time":4,"data":{data},{a},{b}}}"#)
    };
    // Recovery's closer (surfaceOp first): no mark, upstream's exact row.
    let closer = Event::from_json(line(true).as_bytes()).unwrap();
    let row = scalar_row(&closer).unwrap();
    assert_eq!(row.surface_op.as_deref(), Some("\"append\""));
    assert_eq!(
        decode_row(&row_in(&row)).unwrap(),
        std::slice::from_ref(&closer)
    );
    assert_eq!(decode_row(&row_in(&row)).unwrap()[0].to_json(), line(true));
    // The same event in the other order carries the mark.
    let other = Event::from_json(line(false).as_bytes()).unwrap();
    let row = scalar_row(&other).unwrap();
    assert_eq!(row.surface_op.as_deref(), Some("\"append\" "));
    assert_eq!(decode_row(&row_in(&row)).unwrap()[0].to_json(), line(false));
}

#[test]
fn scalar_rows_named_like_packed_tags_stay_scalar() {
    // An ignorable logical event named `text-chunks`: ignorable = 1, so it
    // is never read as a packed row (the discriminator is ignorable = 0).
    let events = [
        Event::new(
            TEXT_CHUNKS,
            0,
            1,
            r#"{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}"#,
        )
        .unwrap()
        .with_ignorable(),
        Event::new(REASONING_CHUNKS, 1, 2, "7").unwrap(),
        Event::new(TOOL_CALL_CHUNKS, 2, 3, "{}")
            .unwrap()
            .with_ignorable(),
    ];
    let (rows, back) = round_trip(&events);
    assert_eq!(
        rows.iter().map(|r| r.ignorable).collect::<Vec<_>>(),
        [Some(1), None, Some(1)]
    );
    assert_eq!(back, events);
    // The packed marker on a type that is not a tag is malformed.
    let mut row = row_in(&rows[1]);
    row.event_type = Col::Text(b"user/message".to_vec());
    row.ignorable = Col::Integer(0);
    assert_eq!(
        err_of(&row).detail,
        "malformed user/message storage row: packed discriminator requires a chunk tag"
    );
}

#[test]
fn scalar_rows_are_checked() {
    let good = row_in(&scalar_row(&Event::new("x", 3, 4, "{}").unwrap()).unwrap());
    let with = |f: &dyn Fn(&mut RowIn)| {
        let mut row = good.clone();
        f(&mut row);
        err_of(&row)
    };
    assert_eq!(
        with(&|r| r.data = Col::Text(br#"{"a":"#.to_vec())),
        RowError {
            reason: CutReason::Incomplete,
            detail: "data is not valid JSON: unexpected end of input at byte 5".into()
        }
    );
    assert_eq!(
        with(&|r| r.data = Col::Text(b"{not valid json".to_vec())).reason,
        CutReason::Invalid
    );
    assert_eq!(
        with(&|r| r.seq = Col::Integer(-1)).detail,
        "seq -1 is not a non-negative safe integer"
    );
    assert_eq!(
        with(&|r| r.time = Col::Integer(1 << 53)).detail,
        "time 9007199254740992 is not a safe integer"
    );
    assert_eq!(
        with(&|r| r.event_type = Col::Text(b"\xff".to_vec())).detail,
        "type is not valid UTF-8 at byte 0"
    );
    assert_eq!(
        with(&|r| r.ignorable = Col::Integer(2)).detail,
        "ignorable must be 0, 1 or NULL, got 2"
    );
    assert_eq!(
        with(&|r| r.source_event_seqs = Col::Blob(vec![0x80])).detail,
        "malformed source_event_seqs storage value: truncated varint"
    );
    assert_eq!(
        with(&|r| r.source_event_seqs = Col::Text(b"[1]".to_vec())).detail,
        "source_event_seqs must be a BLOB or NULL, got TEXT"
    );
    assert_eq!(
        with(&|r| r.source_event_seqs = Col::Blob(vec![3])).detail,
        "sourceEventSeqs entry 3 is not earlier than seq 3"
    );
    assert!(
        with(&|r| r.surface_op = Col::Text(b"\"prepend\"".to_vec()))
            .detail
            .starts_with("surfaceOp must be"),
    );
}

// -- packing -------------------------------------------------------------------------

#[test]
fn runs_pack_within_the_batch_and_decode_byte_for_byte() {
    let mut events: Vec<Event> = (0..5)
        .map(|i| chunk(i, 100 - i as i64 * 7, &format!("t{i}")))
        .collect();
    events.push(Event::new("step/end", 5, 100, r#"{"turn":1,"step":1}"#).unwrap());
    let (rows, back) = round_trip(&events);
    assert_eq!(
        shape(&rows),
        [("text-chunks".into(), 5), ("step/end".into(), 1)]
    );
    assert_eq!(
        rows[0].data,
        Data::Text(
            r#"{"turn":1,"step":1,"index":0,"dt":[-7,-7,-7,-7],"texts":["t0","t1","t2","t3","t4"]}"#
                .into()
        )
    );
    assert_eq!(
        (rows[0].seq, rows[0].time, rows[0].ignorable),
        (0, 100, Some(0))
    );
    assert_eq!(back, events);

    // Tool-call deltas keep their optional name; reasoning deltas pack too.
    let tool = |seq: u64, name: Option<&str>, args: &str| {
        let name = name
            .map(|n| format!(r#""name":"{n}","#))
            .unwrap_or_default();
        chunk_data(
            seq,
            &format!(
                r#"{{"turn":2,"step":3,"chunk":{{"type":"tool-call-delta","index":1,"id":"c1",{name}"argumentsDelta":"{args}"}}}}"#
            ),
        )
    };
    let reasoning = |seq: u64| {
        chunk_data(
            seq,
            &format!(
                r#"{{"turn":2,"step":3,"chunk":{{"type":"reasoning-delta","index":0,"text":"r\n{seq}"}}}}"#
            ),
        )
    };
    let events = vec![
        reasoning(0),
        reasoning(1),
        reasoning(2),
        tool(3, Some("run"), "{\\\"a"),
        tool(4, Some("run"), "\\\":1"),
        tool(5, Some("run"), "}"),
        tool(6, None, "x"),
        tool(7, None, "y"),
        tool(8, None, "z"),
        tool(9, Some("other"), "1"),
    ];
    let (rows, back) = round_trip(&events);
    assert_eq!(
        shape(&rows),
        [
            ("reasoning-chunks".into(), 3),
            ("tool-call-chunks".into(), 3),
            ("tool-call-chunks".into(), 3),
            ("assistant/chunk".into(), 1)
        ]
    );
    assert_eq!(
        rows[1].data,
        Data::Text(
            r#"{"turn":2,"step":3,"index":1,"dt":[1,1],"id":"c1","name":"run","args":["{\"a","\":1","}"]}"#
                .into()
        )
    );
    assert_eq!(back, events);
}

#[test]
fn runs_break_where_upstream_breaks_them() {
    let text = |seq: u64, turn: u64, step: u64, index: u64, time: i64| {
        Event::new(
            "assistant/chunk",
            seq,
            time,
            &format!(
                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":{index},"text":"x"}}}}"#
            ),
        )
        .unwrap()
    };
    let max = MAX_SAFE_INTEGER as i64;
    let events = vec![
        text(0, 1, 1, 0, 0),
        text(1, 1, 1, 0, 0),
        text(2, 1, 1, 0, 0),
        // index changes
        text(3, 1, 1, 1, 0),
        text(4, 1, 1, 1, 0),
        text(5, 1, 1, 1, max),
        // a time difference that is not a safe integer
        text(6, 1, 1, 1, -max),
        text(7, 1, 1, 1, -max),
        // step changes
        text(8, 1, 2, 1, 0),
        text(9, 1, 2, 1, 0),
        text(10, 1, 2, 1, 0),
    ];
    let (rows, back) = round_trip(&events);
    assert_eq!(
        shape(&rows),
        [
            ("text-chunks".into(), 3),
            ("text-chunks".into(), 3),
            ("assistant/chunk".into(), 1),
            ("assistant/chunk".into(), 1),
            ("text-chunks".into(), 3)
        ]
    );
    assert_eq!(back, events);
}

#[test]
fn only_byte_exact_deltas_pack() {
    // Each is a valid delta whose text a packed row would not give back:
    // they stay scalar rows, byte for byte.
    let variants = [
        r#"{"step":1,"turn":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"index":0,"type":"text-delta","text":"a"}}"#,
        r#"{"turn": 1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\u0061"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":1.0,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a","x":1}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":null}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c","name":null,"argumentsDelta":"a"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":9007199254740992,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"finish","index":0,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"extra":0,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#,
    ];
    for data in variants {
        let events: Vec<Event> = (0..3).map(|seq| chunk_data(seq, data)).collect();
        let (rows, back) = round_trip(&events);
        assert_eq!(rows.len(), 3, "{data}");
        assert!(rows.iter().all(|r| r.ignorable.is_none()), "{data}");
        assert_eq!(back, events, "{data}");
    }
    // An ignorable chunk is never packed.
    let events: Vec<Event> = (0..3)
        .map(|seq| chunk(seq, 0, "a").with_ignorable())
        .collect();
    assert_eq!(round_trip(&events).0.len(), 3);
    // Lone surrogates pack: JavaScript writes them as escapes.
    let events: Vec<Event> = (0..3)
        .map(|seq| {
            chunk_data(
                seq,
                r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\ud800"}}"#,
            )
        })
        .collect();
    let (rows, back) = round_trip(&events);
    assert_eq!(shape(&rows), [("text-chunks".into(), 3)]);
    assert_eq!(back, events);
}

#[test]
fn packing_splits_at_1024_members() {
    let events: Vec<Event> = (0..1027).map(|i| chunk(i, i as i64, "x")).collect();
    let (rows, back) = round_trip(&events);
    assert_eq!(
        shape(&rows),
        [("text-chunks".into(), 1024), ("text-chunks".into(), 3)]
    );
    assert_eq!(rows[1].seq, 1024);
    assert_eq!(back, events);
    let events: Vec<Event> = (0..1025).map(|i| chunk(i, i as i64, "x")).collect();
    let (rows, back) = round_trip(&events);
    assert_eq!(
        shape(&rows),
        [("text-chunks".into(), 1024), ("assistant/chunk".into(), 1)]
    );
    assert_eq!(back, events);
    let events: Vec<Event> = (0..100).map(|i| chunk(i, i as i64, "x")).collect();
    assert_eq!(shape(&round_trip(&events).0), [("text-chunks".into(), 100)]);
    let events: Vec<Event> = (0..2).map(|i| chunk(i, i as i64, "x")).collect();
    assert_eq!(round_trip(&events).0.len(), 2);
}

#[test]
fn packing_splits_at_1_mib() {
    let big = |n: usize, len: usize| -> Vec<Event> {
        (0..n as u64)
            .map(|i| chunk(i, i as i64, &"y".repeat(len)))
            .collect()
    };
    // 4 x 300 KB: three fit in one row, the fourth stays scalar.
    let (rows, back) = round_trip(&big(4, 300_000));
    assert_eq!(
        shape(&rows),
        [("text-chunks".into(), 3), ("assistant/chunk".into(), 1)]
    );
    assert_eq!(back, big(4, 300_000));
    // 3 x 400 KB: no row of 3 fits, so each stays scalar.
    let (rows, _) = round_trip(&big(3, 400_000));
    assert_eq!(shape(&rows), vec![("assistant/chunk".to_owned(), 1); 3]);
    // 10 x 150 KB: 6 fit (900 KB), then the last 4.
    let (rows, back) = round_trip(&big(10, 150_000));
    assert_eq!(
        shape(&rows),
        [("text-chunks".into(), 6), ("text-chunks".into(), 4)]
    );
    assert_eq!(back, big(10, 150_000));
    // The exact bound: the largest row is at most 1 MiB uncompressed.
    for row in &rows {
        let Data::Blob(frame) = &row.data else {
            panic!("large compressible rows are BLOBs")
        };
        let len = zstd::bulk::decompress(frame, MAX_PACKED_DATA_BYTES)
            .unwrap()
            .len();
        assert!(len <= MAX_PACKED_DATA_BYTES);
    }
    // A run whose first three members fill exactly 1 MiB packs.
    let fixed = packed_len(&[
        classify(&chunk(0, 0, "")).unwrap(),
        classify(&chunk(1, 0, "")).unwrap(),
        classify(&chunk(2, 0, "")).unwrap(),
    ]);
    let each = (MAX_PACKED_DATA_BYTES - fixed) / 3;
    let spare = MAX_PACKED_DATA_BYTES - fixed - 3 * each;
    let events: Vec<Event> = (0..3)
        .map(|i| chunk(i, 0, &"z".repeat(each + if i == 0 { spare } else { 0 })))
        .collect();
    let (rows, _) = round_trip(&events);
    assert_eq!(shape(&rows), [("text-chunks".into(), 3)]);
    let exact = decode_data(&row_in(&rows[0]).data, usize::MAX).unwrap();
    assert_eq!(exact.len(), MAX_PACKED_DATA_BYTES);
    // One byte more and it does not.
    let mut over = events.clone();
    over[1] = chunk(1, 0, &"z".repeat(each + 1));
    assert_eq!(round_trip(&over).0.len(), 3);
}

// -- decoding packed rows ------------------------------------------------------------

#[test]
fn packed_rows_are_checked() {
    let ok = r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}"#;
    let events = decode_row(&packed_row_in(TEXT_CHUNKS, 10, 100, ok)).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq(), e.time()))
            .collect::<Vec<_>>(),
        [(10, 100), (11, 101), (12, 103)]
    );
    assert_eq!(
        events[2].data().get(),
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}"#
    );
    // Keys in another order, as any JSON writer may give them, decode too.
    let reordered = r#"{"texts":["a","b","c"],"dt":[1,2],"index":0,"step":1,"turn":1}"#;
    assert_eq!(
        decode_row(&packed_row_in(TEXT_CHUNKS, 10, 100, reordered)).unwrap(),
        events
    );
    let detail = |tag: &str, data: &str| err_of(&packed_row_in(tag, 10, 100, data)).detail;
    let cases = [
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}"#,
            "texts must contain 3..1024 strings",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b","c"]}"#,
            "dt length must match the member count",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b",3]}"#,
            "texts must contain strings",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"],"x":1}"#,
            "unknown field `x`",
        ),
        (
            r#"{"turn":1.5,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}"#,
            "invalid type: floating point",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[9007199254740992,2],"texts":["a","b","c"]}"#,
            "dt must be an array of safe integers",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[9007199254740991,9007199254740991],"texts":["a","b","c"]}"#,
            "member times exceed safe integers",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"id":"c","texts":["a","b","c"]}"#,
            "invalid text data fields",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]"#,
            "EOF while parsing",
        ),
    ];
    for (data, expected) in cases {
        let got = detail(TEXT_CHUNKS, data);
        assert!(
            got.starts_with("malformed text-chunks storage row: "),
            "{got}"
        );
        assert!(got.contains(expected), "{data}: {got}");
    }
    let tool_cases = [
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"id":"c","name":null,"args":["a","b","c"]}"#,
            "id and optional name must be strings",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"args":["a","b","c"]}"#,
            "id and optional name must be strings",
        ),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[1,2],"id":"c","texts":["a","b","c"]}"#,
            "invalid tool-call data fields",
        ),
    ];
    for (data, expected) in tool_cases {
        let got = detail(TOOL_CALL_CHUNKS, data);
        assert!(got.contains(expected), "{data}: {got}");
    }
    let mut row = packed_row_in(TEXT_CHUNKS, 10, 100, ok);
    row.surface_op = Col::Text(b"\"append\"".to_vec());
    assert_eq!(
        err_of(&row).detail,
        "malformed text-chunks storage row: packed surface fields must be null"
    );
    let mut row = packed_row_in(TEXT_CHUNKS, MAX_SAFE_INTEGER as i64 - 1, 100, ok);
    row.seq = Col::Integer(MAX_SAFE_INTEGER as i64 - 1);
    assert_eq!(
        err_of(&row).detail,
        "malformed text-chunks storage row: member seqs exceed safe integers"
    );
}

#[test]
fn oversized_packed_rows_are_refused_before_parsing() {
    // Not even JSON: the size bound is what refuses it.
    let huge = "x".repeat(MAX_PACKED_DATA_BYTES + 1);
    assert_eq!(
        err_of(&packed_row_in(TEXT_CHUNKS, 0, 0, &huge)).detail,
        "malformed text-chunks storage row: data is 1048577 bytes, over the 1048576-byte bound"
    );
    let mut row = packed_row_in(TEXT_CHUNKS, 0, 0, "");
    row.data = Col::Blob(zstd::bulk::compress(huge.as_bytes(), 3).unwrap());
    assert_eq!(
        err_of(&row).detail,
        "malformed text-chunks storage row: data BLOB decompresses past the 1048576-byte bound"
    );
}

// -- packed rows read as stored ------------------------------------------------

/// The crate's one generator ([`crate::rng::Rng`]), with the draws these
/// tests make.
struct Rng(crate::rng::Rng);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

/// A packed row as the codec writes it (TEXT, or a zstd BLOB past 4 KiB),
/// then now and then damaged or respelled the ways a file or another
/// writer could: its data's characters, numbers and keys, its columns.
fn packed_row(r: &mut Rng) -> RowIn {
    let kind = r.below(3);
    let members = r.pick(&[1, 2, 3, 4, 5, 17, 1024, 1025]);
    let payload = if r.chance(10) {
        "x".repeat(300)
    } else {
        "y".into()
    };
    let time0: i64 = r.pick(&[0, 5, -5, 9_007_199_254_740_000]);
    let events: Vec<Event> = (0..members)
        .map(|k| {
            let text = serde_json::to_string(&format!("{payload}{k}\n\u{1}é")).unwrap();
            let data = match kind {
                2 => format!(
                    r#"{{"turn":3,"step":1,"chunk":{{"type":"tool-call-delta","index":2,"id":"c1"{},"argumentsDelta":{text}}}}}"#,
                    if r.chance(50) { r#","name":"f""# } else { "" }
                ),
                k => format!(
                    r#"{{"turn":3,"step":1,"chunk":{{"type":"{}","index":2,"text":{text}}}}}"#,
                    ["text-delta", "reasoning-delta"][k]
                ),
            };
            let time = time0 + (k as i64 % 7) - 2;
            Event::new("assistant/chunk", 10 + k as u64, time, &data).unwrap()
        })
        .collect();
    // Pack them all, whatever the limits (rows of 1, 2 or 1025 members are
    // what a damaged or foreign file may hold).
    let deltas: Vec<Delta> = events.iter().map(|e| classify(e).unwrap()).collect();
    let mut row = row_in(&packed_row_of(&deltas));
    if r.chance(40) {
        let mut text = match &row.data {
            Col::Text(t) => String::from_utf8(t.clone()).unwrap(),
            Col::Blob(b) => String::from_utf8(zstd::decode_all(&b[..]).unwrap()).unwrap(),
            _ => unreachable!(),
        };
        match r.below(8) {
            0 => {
                let chars: Vec<char> = text.chars().collect();
                let at = r.below(chars.len());
                let with: String = match r.below(3) {
                    0 => String::new(),
                    1 => format!("{0}{0}", chars[at]),
                    _ => r
                        .pick(&["\"", "\\", "{", "}", ",", ":", "0", "-", " ", "é", "]", "["])
                        .into(),
                };
                text = chars[..at].iter().collect::<String>()
                    + &with
                    + &chars[at + 1..].iter().collect::<String>();
            }
            1 => text = text.replacen(r#""turn":3"#, r#""turn":3.0"#, 1),
            2 => text = text.replacen(r#""dt":["#, r#""dt":[1e0,"#, 1),
            3 => {
                text = text.replacen(r#""step":1,"#, "", 1).replacen(
                    r#"{"turn":3"#,
                    r#"{"step":1,"turn":3"#,
                    1,
                )
            }
            4 => text = text.replacen("\\n", "\\u000a", 1),
            5 => text = text.replacen(",", ", ", 1),
            6 => text = text.replacen(r#""index":2"#, r#""index":9007199254740992"#, 1),
            _ => text = text.replacen(r#"]}"#, r#"],"x":1}"#, 1),
        }
        row.data = if r.chance(20) {
            Col::Blob(zstd::bulk::compress(text.as_bytes(), 3).unwrap())
        } else {
            Col::Text(text.into_bytes())
        };
    }
    if r.chance(15) {
        match r.below(9) {
            0 => {
                row.ignorable = r.pick(&[
                    Col::Null,
                    Col::Integer(1),
                    Col::Integer(2),
                    Col::Text(b"0".to_vec()),
                ])
            }
            1 => {
                row.event_type = Col::Text(
                    r.pick(&[
                        "text-chunks",
                        "tool-call-chunks",
                        "chunks",
                        "assistant/chunk",
                    ])
                    .as_bytes()
                    .to_vec(),
                )
            }
            2 => {
                row.seq = r.pick(&[
                    Col::Integer(-1),
                    Col::Integer(9_007_199_254_740_991),
                    Col::Real(10.0),
                    Col::Null,
                ])
            }
            3 => {
                row.time = r.pick(&[
                    Col::Integer(9_007_199_254_740_992),
                    Col::Integer(-9_007_199_254_740_991),
                    Col::Real(0.0),
                ])
            }
            4 => row.source_event_seqs = Col::Blob(vec![]),
            5 => row.surface_op = Col::Text(b"\"x\"".to_vec()),
            6 => {
                if let Col::Text(t) = &mut row.data {
                    t.push(0xff);
                }
            }
            7 => {
                if let Col::Blob(b) = &mut row.data {
                    b.truncate(b.len() / 2);
                } else {
                    row.data = Col::Blob(b"not zstd".to_vec());
                }
            }
            _ => row.data = Col::Integer(1),
        }
    }
    row
}

fn packed_row_of(run: &[Delta]) -> RowOut {
    super::packed_row(run, true)
}

/// A packed row is read as stored exactly when it decodes and is in the
/// canonical spelling, and then holds exactly the events decoding gives;
/// any other row comes back untouched, for the decoder.
#[test]
fn stored_runs_are_the_rows_that_decode_and_hold_their_events() {
    let mut r = Rng(crate::rng::Rng::new(0x1357_9bdf_2468_ace0));
    let (mut stored, mut decoded_only, mut refused) = (0, 0, 0);
    for _ in 0..6_000 {
        let row = packed_row(&mut r);
        let decoded = decode_row(&row);
        let mut back = row.clone();
        match stored_run(&mut back) {
            Some(run) => {
                stored += 1;
                assert_eq!(decoded.as_ref().ok(), Some(&run.events()), "{row:?}");
                assert_eq!(run.len(), run.events().len());
            }
            None => {
                assert_eq!(back, row);
                match decoded {
                    Ok(_) => decoded_only += 1,
                    Err(_) => refused += 1,
                }
            }
        }
    }
    assert!(
        stored > 1_000 && decoded_only > 100 && refused > 1_000,
        "{stored} {decoded_only} {refused}"
    );
}
