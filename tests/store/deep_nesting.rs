//! Event data nested far deeper than any recursion limit (issue 29: a hook
//! dumping a parsed AST) is stored as upstream stores it — nesting bounded
//! by the size limit, not by a parser's stack — and read back byte for
//! byte on every store, through every read, under every policy.

use turnwal::contract::Policy;
use turnwal::{Event, SessionHeader, Store, StoreOptions};

/// A tool result whose payload nests `depth` levels of arrays and objects.
fn deep_result(seq: u64, depth: usize) -> Event {
    let mut ast = String::new();
    for _ in 0..depth / 2 {
        ast.push_str(r#"[{"k":"#);
    }
    ast.push_str("null");
    for _ in 0..depth / 2 {
        ast.push_str("}]");
    }
    let data = format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"result-c1","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","isError":false,"content":[{{"type":"json","value":{ast}}}]}}]}}}}"#
    );
    Event::new("tool/result", seq, 10 + seq as i64, &data).unwrap()
}

fn session(depth: usize) -> Vec<Event> {
    let ev = |t: &str, seq: u64, d: &str| Event::new(t, seq, 10 + seq as i64, d).unwrap();
    vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("user/message", 1, r#"{"id":"u1","content":"parse it"}"#),
        ev("step/start", 2, r#"{"turn":1,"step":1}"#),
        ev(
            "tool/call",
            3,
            r#"{"turn":1,"step":1,"callId":"c1","name":"ast"}"#,
        ),
        deep_result(4, depth),
        ev("step/end", 5, r#"{"turn":1,"step":1}"#),
        ev("turn/end", 6, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

fn stores(dir: &std::path::Path, policy: Policy) -> Vec<(&'static str, Store)> {
    let options = StoreOptions {
        policy,
        ..StoreOptions::default()
    };
    vec![
        (
            "wal",
            Store::open_with_options(dir.join("wal"), options).unwrap(),
        ),
        (
            "sqlite",
            Store::open_sqlite(dir.join("s.sqlite"), Default::default(), options).unwrap(),
        ),
        (
            "jsonl",
            turnwal::location::Location::parse(&format!("jsonl+zstd:{}", dir.join("j").display()))
                .unwrap()
                .open(
                    &turnwal::location::Opening::new(options)
                        .if_missing(turnwal::location::IfMissing::Create),
                )
                .unwrap(),
        ),
    ]
}

#[test]
fn deeply_nested_data_is_stored_and_read_back_byte_for_byte() {
    let events = session(100_000);
    for policy in [Policy::Strict, Policy::Permissive] {
        let dir = tempfile::tempdir().unwrap();
        for (name, store) in stores(dir.path(), policy) {
            let mut header = SessionHeader::new("deep", 1);
            header.cwd = Some("/w".into());
            store.create(header).unwrap();
            store
                .append("deep", &events)
                .unwrap_or_else(|e| panic!("{name} {policy:?}: append: {e}"));
            store.close("deep").unwrap();
            let texts = |got: Vec<Event>| got.iter().map(Event::to_json).collect::<Vec<_>>();
            let want = texts(events.clone());
            let mut reader = store.read("deep").unwrap();
            let mut read = Vec::new();
            while let Some(e) = reader
                .next_event()
                .unwrap_or_else(|e| panic!("{name} {policy:?}: read: {e}"))
            {
                read.push(e.to_event());
            }
            assert_eq!(texts(read), want, "{name} {policy:?}: read");
            let inspected = store
                .inspect("deep")
                .unwrap_or_else(|e| panic!("{name} {policy:?}: inspect: {e}"));
            assert_eq!(texts(inspected.events), want, "{name} {policy:?}: inspect");
            let from = store.read_from("deep", 4).unwrap();
            assert_eq!(texts(from), want[4..], "{name} {policy:?}: read_from");
            let report = store.verify("deep").unwrap();
            assert_eq!(report.state, turnwal::LogState::Clean, "{name} {policy:?}");
            let loaded = store
                .load("deep")
                .unwrap_or_else(|e| panic!("{name} {policy:?}: load: {e}"));
            assert_eq!(texts(loaded.events), want, "{name} {policy:?}: load");
        }
    }
}
