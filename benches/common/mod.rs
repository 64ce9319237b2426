//! The realistic workload every bench shares, deterministic from a seed.
//!
//! Per turn: 20 to 200 events, about 70% `assistant/chunk` events carrying
//! 40–200 bytes of text, 20% `tool/call` + `tool/result` pairs whose payloads
//! are 1–4 KiB of JSON with escapes and non-ASCII text, and 10% turn and step
//! boundaries, user and assistant messages.

#![allow(dead_code)]

use turnwal::Event;

/// A tiny xorshift generator: deterministic, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "reads",
    "file",
    "and",
    "writes",
    "a",
    "patch",
    "für",
    "naïve",
    "日本語",
    "tests",
    "pass",
    "\\\"quoted\\\"",
    "line\\nbreak",
    "émoji🙂",
    "tab\\tstop",
    "cargo",
    "build",
];

fn text(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS[rng.next() as usize % WORDS.len()]);
    }
    s
}

/// One session's turns, each a batch of events with contiguous seqs.
pub fn session(seed: u64, turns: usize) -> Vec<Vec<Event>> {
    let mut rng = Rng::new(seed);
    let mut seq = 0u64;
    let mut time = 1_700_000_000_000i64;
    let mut out = Vec::with_capacity(turns);
    for turn in 1..=turns as u64 {
        let mut batch = Vec::new();
        let mut push = |batch: &mut Vec<Event>, t: &str, data: String| {
            time += 1 + (seq % 7) as i64;
            batch.push(Event::new(t, seq, time, &data).expect("generated events are valid"));
            seq += 1;
        };
        let n = rng.range(20, 200);
        let chunks = n * 7 / 10;
        let pairs = (n / 10).max(1);
        let steps = ((n / 10).saturating_sub(3) / 3).max(1);
        push(&mut batch, "turn/start", format!(r#"{{"turn":{turn}}}"#));
        push(
            &mut batch,
            "user/message",
            format!(
                r#"{{"id":"u-{turn}","role":"user","content":[{{"type":"text","text":"{}"}}],"source":{{"kind":"user"}}}}"#,
                text(&mut rng, 120)
            ),
        );
        for step in 1..=steps {
            push(
                &mut batch,
                "step/start",
                format!(r#"{{"turn":{turn},"step":{step}}}"#),
            );
            for i in 0..chunks / steps {
                let len = rng.range(40, 200) as usize;
                push(
                    &mut batch,
                    "assistant/chunk",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":{},"text":"{}"}}}}"#,
                        i % 3,
                        text(&mut rng, len)
                    ),
                );
            }
            let calls: Vec<String> = (0..pairs / steps)
                .map(|i| format!("call-{turn}-{step}-{i}"))
                .collect();
            let blocks: Vec<String> = calls
                .iter()
                .map(|id| format!(r#"{{"type":"tool-call","id":"{id}","name":"read_file","arguments":"{{}}"}}"#))
                .collect();
            push(
                &mut batch,
                "assistant/message",
                format!(
                    r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":"{}"}}{}{}]}}}}"#,
                    text(&mut rng, 80),
                    if blocks.is_empty() { "" } else { "," },
                    blocks.join(",")
                ),
            );
            for id in &calls {
                let len = rng.range(1024, 4096) as usize;
                let args = text(&mut rng, len);
                push(
                    &mut batch,
                    "tool/call",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"read_file","arguments":"{args}"}}"#
                    ),
                );
                let len = rng.range(1024, 4096) as usize;
                let body = text(&mut rng, len);
                push(
                    &mut batch,
                    "tool/result",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{body}"}}]}}]}}}}"#
                    ),
                );
            }
            push(
                &mut batch,
                "step/end",
                format!(r#"{{"turn":{turn},"step":{step}}}"#),
            );
        }
        push(
            &mut batch,
            "turn/end",
            format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        );
        out.push(batch);
    }
    out
}

/// Total bytes of the events' JSON lines (the logical volume).
pub fn json_bytes(turns: &[Vec<Event>]) -> u64 {
    turns
        .iter()
        .flatten()
        .map(|e| e.to_json().len() as u64 + 1)
        .sum()
}
