//! Realistic sessions: the events an agent harness actually writes, as the
//! upstream harness's loop emits them (docs/PERFORMANCE.md, "Workloads"),
//! deterministic from a seed. The bench's older workload
//! ([`turnwal_cli::bench::workload`], "synthetic") never forms a chunk run; real
//! logs are mostly runs.
//!
//! A turn is a `turn/start`, the user's prompt (`user/message`, with its
//! `surfaceOp`), then one to four steps, and a `turn/end`. A step is a
//! `step/start` (the session's first with a `request/header`), then the
//! streamed answer as `assistant/chunk` events:
//!
//! - per content block a `block-start`, its deltas, and a `block-end`
//!   carrying the whole block: a reasoning block in about half the steps,
//!   a text block, and a tool-call block per call (`tool-call-delta`s with
//!   the call's id and name);
//! - deltas are the block's text cut at arbitrary character boundaries,
//!   3 to 16 characters each, so one block's deltas form a run of the same
//!   content index (what upstream packs: `text-chunks`,
//!   `reasoning-chunks`, `tool-call-chunks`);
//! - then a `usage` and a `finish` chunk;
//!
//! then the assembled `assistant/message` (its content blocks, `usage`,
//! `sourceEventSeqs` naming the block ends, `surfaceOp`), each requested
//! call's `tool/call` and `tool/result` (`sourceEventSeqs` naming its call),
//! and `step/end`. A turn has one to four steps; every step but the last
//! calls 1 to 4 tools.
//!
//! About nine events in ten are chunks (the unit tests check 85–95%). Text
//! comes from a vocabulary of words, identifiers, paths, numbers, quotes,
//! newlines and a little non-ASCII, so it escapes and compresses as real
//! logs do, not as a repeated string.
//!
//! ```
//! use turnwal_testkit::workload::realistic::Realistic;
//! use turnwal::{Policy, Tracker};
//!
//! let mut session = Realistic::new(7);
//! let turn = session.next_turn();
//! Tracker::new(Policy::Strict).accept_batch(&turn).unwrap();
//! assert_eq!(turn.first().unwrap().event_type(), "turn/start");
//! assert_eq!(turn.last().unwrap().event_type(), "turn/end");
//! ```

use crate::workload::TurnState;
use turnwal::event::Event;
use turnwal::rng::Rng;

/// Words of prose, code and paths the text is drawn from.
const VOCABULARY: &[&str] = &[
    "the",
    "function",
    "returns",
    "a",
    "value",
    "when",
    "it",
    "reads",
    "file",
    "and",
    "then",
    "writes",
    "patch",
    "to",
    "test",
    "fails",
    "because",
    "of",
    "this",
    "we",
    "should",
    "check",
    "error",
    "path",
    "first",
    "let",
    "me",
    "look",
    "at",
    "I",
    "will",
    "run",
    "cargo",
    "build",
    "now",
    "passes",
    "with",
    "config",
    "for",
    "in",
    "is",
    "not",
    "that",
    "on",
    "which",
    "so",
    "src/backend/wal/mod.rs",
    "src/store.rs",
    "tests/store/recovery.rs",
    "Cargo.toml",
    "README.md",
    "./target/release/turnwal",
    "/home/dev/project",
    "fn",
    "impl",
    "struct",
    "pub",
    "use",
    "Result<()>",
    "Vec<Event>",
    "Option<u64>",
    "self.len()",
    "read_to_string",
    "HashMap",
    "parse_head",
    "scan_log",
    "turn_end",
    "TOOL_NOT_STARTED",
    "0",
    "1",
    "42",
    "128",
    "4096",
    "2026-12-06",
    "v2.3.1",
    "0x1f",
    "3.14",
    "==",
    "->",
    "=>",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ";",
    ":",
    ",",
    ".",
    "\"quoted\"",
    "`code`",
    "naïve",
    "café",
    "über",
    "日本語",
    "✓",
    "line\nbreak",
    "\n\n",
    "\t",
    "- item",
    "1.",
    "**bold**",
    "#",
    "TODO:",
];

/// The tools a model calls, with argument shapes.
const TOOLS: &[&str] = &[
    "read_file",
    "run_command",
    "edit_file",
    "search",
    "list_dir",
];

/// Text of about `len` characters drawn from the vocabulary.
fn prose(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    // Characters counted as they are pushed: counting the string at every
    // word made a long text quadratic (a tenth of `bench --concurrent`'s
    // time went to generating its input).
    let mut chars = 0;
    while chars < len {
        if !s.is_empty() && !s.ends_with('\n') {
            s.push(' ');
            chars += 1;
        }
        let word = VOCABULARY[rng.below(VOCABULARY.len() as u64) as usize];
        s.push_str(word);
        chars += word.chars().count();
    }
    s
}

/// `text` as a JSON string literal, escaped as JavaScript's
/// `JSON.stringify` escapes it (what upstream writes, and what packs).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// `text` cut at character boundaries into pieces of 3 to 16 characters.
fn deltas(rng: &mut Rng, text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let n = (rng.range(3, 16) as usize).min(chars.len() - at);
        out.push(chars[at..at + n].iter().collect());
        at += n;
    }
    out
}

/// One content block of an assistant message, as streamed.
enum Block {
    Reasoning(String),
    Text(String),
    ToolCall {
        id: String,
        name: &'static str,
        arguments: String,
    },
}

impl Block {
    fn kind(&self) -> &'static str {
        match self {
            Block::Reasoning(_) => "reasoning",
            Block::Text(_) => "text",
            Block::ToolCall { .. } => "tool-call",
        }
    }

    /// The block as a content block of the assembled message.
    fn content(&self) -> String {
        match self {
            Block::Reasoning(text) => {
                format!(r#"{{"type":"reasoning","text":{}}}"#, json_string(text))
            }
            Block::Text(text) => format!(r#"{{"type":"text","text":{}}}"#, json_string(text)),
            Block::ToolCall {
                id,
                name,
                arguments,
            } => format!(
                r#"{{"type":"tool-call","id":"{id}","name":"{name}","arguments":{}}}"#,
                json_string(arguments)
            ),
        }
    }
}

/// A realistic session, generated one turn at a time.
#[derive(Debug, Clone)]
pub struct Realistic {
    rng: Rng,
    state: TurnState,
    headed: bool,
}

impl Realistic {
    /// A session whose events follow from `seed`, its clock at 2026-12-01.
    pub fn new(seed: u64) -> Realistic {
        Realistic {
            rng: Rng::new(seed ^ 0x7265_616c_6973_7469),
            state: TurnState::new(1_796_083_200_000),
            headed: false,
        }
    }

    /// The session from `state` on (a log recovery balanced, read back):
    /// its next turn continues that log's seqs, turns and clock. `state`
    /// must be between turns.
    pub fn continuing(mut self, state: TurnState) -> Realistic {
        debug_assert!(!state.in_turn(), "a realistic turn starts between turns");
        self.state = state;
        self.headed = true;
        self
    }

    /// Where the session stands.
    pub fn state(&self) -> &TurnState {
        &self.state
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.state.seq()
    }

    /// Appends an event `ms` milliseconds after the previous one.
    fn push(&mut self, out: &mut Vec<Event>, event_type: &str, data: String, ms: u64) {
        let time = self.state.time() + ms as i64;
        self.state.set_time(time);
        out.push(self.state.event(event_type, &data));
    }

    /// Appends an event with `sourceEventSeqs` and `surfaceOp: "append"`.
    fn push_surface(
        &mut self,
        out: &mut Vec<Event>,
        event_type: &str,
        data: String,
        sources: &[u64],
        ms: u64,
    ) {
        self.push(out, event_type, data, ms);
        let mut event = out.pop().expect("just pushed");
        if !sources.is_empty() {
            event = event
                .with_source_event_seqs(sources)
                .expect("earlier, unique seqs");
        }
        out.push(event.with_surface_op("\"append\"").expect("a surface type"));
    }

    fn chunk(&mut self, out: &mut Vec<Event>, turn: u64, step: u64, chunk: String, ms: u64) {
        let data = format!(r#"{{"turn":{turn},"step":{step},"chunk":{chunk}}}"#);
        self.push(out, "assistant/chunk", data, ms);
    }

    /// Streams `block` at content index `index`: its start, its deltas,
    /// its end. Returns the seq of the end.
    fn stream(
        &mut self,
        out: &mut Vec<Event>,
        turn: u64,
        step: u64,
        index: usize,
        block: &Block,
    ) -> u64 {
        let start = format!(
            r#"{{"type":"block-start","index":{index},"blockType":"{}"}}"#,
            block.kind()
        );
        self.chunk(out, turn, step, start, 40);
        let (text, kind) = match block {
            Block::Reasoning(text) => (text.as_str(), "reasoning-delta"),
            Block::Text(text) => (text.as_str(), "text-delta"),
            Block::ToolCall { arguments, .. } => (arguments.as_str(), "tool-call-delta"),
        };
        for piece in deltas(&mut self.rng, text) {
            let chunk = match block {
                Block::ToolCall { id, name, .. } => format!(
                    r#"{{"type":"{kind}","index":{index},"id":"{id}","name":"{name}","argumentsDelta":{}}}"#,
                    json_string(&piece)
                ),
                _ => format!(
                    r#"{{"type":"{kind}","index":{index},"text":{}}}"#,
                    json_string(&piece)
                ),
            };
            let ms = self.rng.range(8, 60);
            self.chunk(out, turn, step, chunk, ms);
        }
        let end = format!(
            r#"{{"type":"block-end","index":{index},"block":{}}}"#,
            block.content()
        );
        let seq = self.state.seq();
        self.chunk(out, turn, step, end, 5);
        seq
    }

    /// The next complete turn.
    pub fn next_turn(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        let turn = self.state.start_turn();
        let pause = self.rng.range(2_000, 90_000);
        self.push(
            &mut out,
            "turn/start",
            format!(r#"{{"turn":{turn}}}"#),
            pause,
        );
        let len = self.rng.range(20, 400) as usize;
        let prompt = prose(&mut self.rng, len);
        let user = format!(
            r#"{{"id":"u-{turn}","role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
            json_string(&prompt)
        );
        self.push_surface(&mut out, "user/message", user, &[], 3);
        let steps = match self.rng.below(20) {
            0..6 => 1,
            6..12 => 2,
            12..17 => 3,
            _ => 4,
        };
        for n in 1..=steps {
            self.step(&mut out, turn, n == steps);
        }
        self.state.end_turn();
        self.push(
            &mut out,
            "turn/end",
            format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            2,
        );
        out
    }

    fn step(&mut self, out: &mut Vec<Event>, turn: u64, last: bool) {
        let step = self.state.start_step();
        self.push(
            out,
            "step/start",
            format!(r#"{{"turn":{turn},"step":{step}}}"#),
            2,
        );
        if !self.headed {
            self.headed = true;
            self.push(
                out,
                "request/header",
                r#"{"header":{"config":{"provider":"deepseek","model":"deepseek-v4","reasoningEffort":"high","maxTokens":32768}},"reason":"initial"}"#.to_owned(),
                1,
            );
        }
        let mut blocks = Vec::new();
        if self.rng.coin() {
            let len = self.rng.range(60, 500) as usize;
            blocks.push(Block::Reasoning(prose(&mut self.rng, len)));
        }
        let len = self.rng.range(40, 700) as usize;
        blocks.push(Block::Text(prose(&mut self.rng, len)));
        let calls = if last { 0 } else { self.rng.range(1, 4) };
        for k in 0..calls {
            let name = TOOLS[self.rng.below(TOOLS.len() as u64) as usize];
            let len = self.rng.range(10, 160) as usize;
            let arg = prose(&mut self.rng, len);
            blocks.push(Block::ToolCall {
                id: format!("call_{turn}_{step}_{k}_{:06x}", self.rng.below(1 << 24)),
                name,
                arguments: serde_json::json!({ "path": "src/lib.rs", "query": arg }).to_string(),
            });
        }
        let mut ends = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            ends.push(self.stream(out, turn, step, index, block));
        }
        let (input, output) = (self.rng.range(2_000, 60_000), self.rng.range(50, 4_000));
        let usage = format!(
            r#"{{"inputTokens":{input},"outputTokens":{output},"cacheReadTokens":{}}}"#,
            input / 2
        );
        self.chunk(
            out,
            turn,
            step,
            format!(r#"{{"type":"usage","usage":{usage}}}"#),
            3,
        );
        let reason = if calls > 0 { "tool-calls" } else { "stop" };
        self.chunk(
            out,
            turn,
            step,
            format!(r#"{{"type":"finish","reason":"{reason}"}}"#),
            1,
        );
        let content: Vec<String> = blocks.iter().map(Block::content).collect();
        let message = format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"a-{turn}-{step}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"deepseek","model":"deepseek-v4"}}}},"usage":{usage}}}"#,
            content.join(",")
        );
        self.push_surface(out, "assistant/message", message, &ends, 2);
        let requested: Vec<(String, &'static str, String)> = blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), *name, arguments.clone())),
                _ => None,
            })
            .collect();
        self.state
            .request(requested.iter().map(|(id, ..)| id.clone()).collect());
        for (id, name, arguments) in requested {
            let called = self.state.call().expect("requested above");
            debug_assert_eq!(called, id);
            let call_seq = self.state.seq();
            self.push(
                out,
                "tool/call",
                format!(
                    r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"{name}","arguments":{}}}"#,
                    json_string(&arguments)
                ),
                4,
            );
            let len = self.rng.range(80, 3_000) as usize;
            let output = prose(&mut self.rng, len);
            let result = format!(
                r#"{{"turn":{turn},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","isError":false,"content":[{{"type":"text","text":{}}}]}}]}}}}"#,
                json_string(&output)
            );
            let ms = self.rng.range(50, 8_000);
            self.push_surface(out, "tool/result", result, &[call_seq], ms);
            self.state.answer();
        }
        self.state.end_step();
        self.push(
            out,
            "step/end",
            format!(r#"{{"turn":{turn},"step":{step}}}"#),
            1,
        );
    }
}

/// A realistic session's turns until its raw JSONL form (one line per
/// event) reaches `bytes`, generated one turn at a time.
pub fn turns_of_size(seed: u64, bytes: u64) -> impl Iterator<Item = Vec<Event>> {
    let mut session = Realistic::new(seed);
    let mut written = 0u64;
    std::iter::from_fn(move || {
        (written < bytes).then(|| {
            let turn = session.next_turn();
            written += turn
                .iter()
                .map(|e| e.to_json().len() as u64 + 1)
                .sum::<u64>();
            turn
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::contract::{Policy, Tracker};
    use turnwal::event::EventKind;

    #[test]
    fn turns_obey_the_contract_and_are_mostly_chunk_runs() {
        let mut session = Realistic::new(1);
        let mut tracker = Tracker::new(Policy::Strict);
        let (mut events, mut chunks, mut deltas) = (0usize, 0usize, 0usize);
        let mut seq = 0;
        for _ in 0..60 {
            let turn = session.next_turn();
            tracker.accept_batch(&turn).unwrap();
            for e in &turn {
                assert_eq!(e.seq(), seq);
                seq += 1;
                events += 1;
                if e.kind() == EventKind::AssistantChunk {
                    chunks += 1;
                    if e.data().get().contains("-delta\"") {
                        deltas += 1;
                    }
                }
                // Every event round-trips through its JSON form.
                assert_eq!(&Event::from_json(e.to_json().as_bytes()).unwrap(), e);
            }
        }
        let share = chunks as f64 / events as f64;
        assert!(
            (0.85..=0.95).contains(&share),
            "{chunks} chunks of {events}"
        );
        // The deltas pack as upstream packs them: runs of one index.
        let turn: Vec<Event> = Realistic::new(2).next_turn();
        let planned = turnwal::upstream::chunks::plan_batch(turn.iter().map(Into::into));
        let packed: usize = planned
            .iter()
            .map(|p| match p {
                turnwal::upstream::chunks::Piece::Run { deltas, .. } => deltas.len(),
                turnwal::upstream::chunks::Piece::One(_) => 0,
            })
            .sum();
        let turn_deltas = turn
            .iter()
            .filter(|e| e.data().get().contains("-delta\""))
            .count();
        assert!(
            packed * 10 >= turn_deltas * 9,
            "{packed} of {turn_deltas} deltas packed"
        );
        assert!(deltas > 0);
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_sizes_are_met() {
        let a: Vec<Vec<Event>> = turns_of_size(9, 200_000).collect();
        let b: Vec<Vec<Event>> = turns_of_size(9, 200_000).collect();
        assert_eq!(a, b);
        let bytes: u64 = a
            .iter()
            .flatten()
            .map(|e| e.to_json().len() as u64 + 1)
            .sum();
        assert!((200_000..300_000).contains(&bytes), "{bytes}");
    }
}
