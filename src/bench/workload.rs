//! The realistic workload every bench shares (criterion and `turnwal bench`),
//! deterministic from a seed.
//!
//! A session is a run of turns shaped like an agent harness's traffic. Each
//! turn holds 20 to 200 events:
//!
//! - about **70%** `assistant/chunk` events, each carrying 40–200 bytes of
//!   text (the raw JSON string, escapes included), the streamed deltas that
//!   dominate a real log by count;
//! - about **20%** `tool/call` and `tool/result` events in pairs, whose
//!   `data` is 1–4 KiB of JSON (exactly, in bytes) with escapes (`\"`, `\n`,
//!   `\t`) and non-ASCII text (`für`, `日本語`, an emoji), the payloads that
//!   dominate a real log by volume;
//! - about **10%** boundaries and messages: `turn/start`, `user/message`,
//!   then per step `step/start`, an `assistant/message` naming the step's
//!   tool calls, `step/end`, and a final `turn/end`.
//!
//! The unit tests below check these fractions and sizes, so this description
//! stays true. The same seed always gives the same bytes, so two runs (or
//! turnwal and a baseline in one run) see identical input.

use turnwal::event::{Event, EventKind};
use turnwal::rng::Rng;
use turnwal_testkit::workload::{TurnState, tool_call_blocks};

/// Words as they appear inside a JSON string: some carry escapes, some
/// non-ASCII text, so validation and UTF-8 checks do real work.
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

/// JSON string contents of exactly `len` bytes: whole words while they fit,
/// then `.` padding (never a cut escape or a cut UTF-8 sequence).
fn text(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len);
    loop {
        let word = WORDS[rng.next_u64() as usize % WORDS.len()];
        let sep = usize::from(!s.is_empty());
        if s.len() + sep + word.len() > len {
            break;
        }
        if sep == 1 {
            s.push(' ');
        }
        s.push_str(word);
    }
    while s.len() < len {
        s.push('.');
    }
    s
}

/// Fills `template`'s `{TEXT}` so that the whole string is `total` bytes
/// long (the tool payloads' sizes are exact, not approximate).
fn sized(rng: &mut Rng, template: &str, total: usize) -> String {
    let overhead = template.len() - "{TEXT}".len();
    template.replacen("{TEXT}", &text(rng, total.saturating_sub(overhead)), 1)
}

/// Generates one session's turns in order, one turn at a time, so fixtures
/// of a gigabyte never hold the whole session in memory.
#[derive(Debug, Clone)]
pub struct Workload {
    rng: Rng,
    state: TurnState,
}

impl Workload {
    /// A session generated from `seed`, starting at seq 0.
    pub fn new(seed: u64) -> Workload {
        Workload {
            // The bench's own seeding, so fixtures stay byte-identical.
            rng: Rng::from_state(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            state: TurnState::new(1_700_000_000_000),
        }
    }

    /// The seq the next generated event gets.
    pub fn next_seq(&self) -> u64 {
        self.state.seq()
    }

    fn push(&mut self, batch: &mut Vec<Event>, event_type: &str, data: String) {
        let time = self.state.time() + 1 + (self.state.seq() % 7) as i64;
        self.state.set_time(time);
        batch.push(self.state.event(event_type, &data));
    }

    /// The next complete turn, of 20 to 200 events.
    pub fn next_turn(&mut self) -> Vec<Event> {
        let n = self.rng.range(20, 200);
        self.turn_of(n, true)
    }

    /// A turn of about `n` events (`n >= 20`), with its closing `step/end`
    /// and `turn/end` when `complete`; otherwise it stops after the last
    /// step's final `tool/call`, whose result never comes (a crash mid-turn).
    pub fn turn_of(&mut self, n: u64, complete: bool) -> Vec<Event> {
        let turn = self.state.start_turn();
        let mut batch = Vec::with_capacity(n as usize + 4);
        let chunks = n * 7 / 10;
        let pairs = (n / 10).max(1);
        let steps = ((n / 10).saturating_sub(3) / 3).max(1);
        self.push(&mut batch, "turn/start", format!(r#"{{"turn":{turn}}}"#));
        let prompt = text(&mut self.rng, 120);
        self.push(
            &mut batch,
            "user/message",
            format!(
                r#"{{"id":"u-{turn}","role":"user","content":[{{"type":"text","text":"{prompt}"}}],"source":{{"kind":"user"}}}}"#
            ),
        );
        for _ in 0..steps {
            let step = self.state.start_step();
            let last_step = step == steps;
            self.push(
                &mut batch,
                "step/start",
                format!(r#"{{"turn":{turn},"step":{step}}}"#),
            );
            for i in 0..chunks / steps {
                let len = self.rng.range(40, 200) as usize;
                let delta = text(&mut self.rng, len);
                self.push(
                    &mut batch,
                    "assistant/chunk",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":{},"text":"{delta}"}}}}"#,
                        i % 3
                    ),
                );
            }
            let calls: Vec<String> = (0..pairs / steps)
                .map(|i| format!("call-{turn}-{step}-{i}"))
                .collect();
            let blocks = tool_call_blocks(&calls, "read_file");
            let said = text(&mut self.rng, 80);
            self.push(
                &mut batch,
                "assistant/message",
                format!(
                    r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":"{said}"}}{}{}]}}}}"#,
                    if blocks.is_empty() { "" } else { "," },
                    blocks
                ),
            );
            let count = calls.len();
            self.state.request(calls);
            for i in 0..count {
                let id = self.state.call().expect("the step requested its calls");
                let size = self.rng.range(1024, 4096) as usize;
                let call = sized(
                    &mut self.rng,
                    &format!(
                        r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"read_file","arguments":"{{TEXT}}"}}"#
                    ),
                    size,
                );
                self.push(&mut batch, "tool/call", call);
                if !complete && last_step && i + 1 == count {
                    // The crash: the call is recorded, its result never is.
                    return batch;
                }
                let size = self.rng.range(1024, 4096) as usize;
                let result = sized(
                    &mut self.rng,
                    &format!(
                        r#"{{"turn":{turn},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{{TEXT}}"}}]}}]}}}}"#
                    ),
                    size,
                );
                self.push(&mut batch, "tool/result", result);
                self.state.answer();
            }
            if !complete && last_step {
                return batch;
            }
            self.state.end_step();
            self.push(
                &mut batch,
                "step/end",
                format!(r#"{{"turn":{turn},"step":{step}}}"#),
            );
        }
        self.state.end_turn();
        self.push(
            &mut batch,
            "turn/end",
            format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        );
        batch
    }
}

/// One session's first `turns` turns, each a batch of events with
/// contiguous seqs.
pub fn session(seed: u64, turns: usize) -> Vec<Vec<Event>> {
    let mut workload = Workload::new(seed);
    (0..turns).map(|_| workload.next_turn()).collect()
}

/// Bytes of the events as one-event-per-line JSONL (newlines included): the
/// logical volume, and the size of the upstream harness's raw log.
pub fn jsonl_bytes<'a>(events: impl IntoIterator<Item = &'a Event>) -> u64 {
    events
        .into_iter()
        .map(|e| e.to_json().len() as u64 + 1)
        .sum()
}

/// How a generated stream splits by kind (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mix {
    /// Every event.
    pub events: u64,
    /// `assistant/chunk` events.
    pub chunks: u64,
    /// `tool/call` and `tool/result` events.
    pub tools: u64,
    /// Everything else: boundaries and messages.
    pub boundaries: u64,
}

impl Mix {
    /// The mix of `events`.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> Mix {
        let mut mix = Mix::default();
        for e in events {
            mix.events += 1;
            match e.kind() {
                EventKind::AssistantChunk => mix.chunks += 1,
                EventKind::ToolCall | EventKind::ToolResult => mix.tools += 1,
                _ => mix.boundaries += 1,
            }
        }
        mix
    }

    /// The fraction of `part` among all events.
    pub fn fraction(&self, part: u64) -> f64 {
        part as f64 / self.events.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::{Policy, Tracker};

    /// The raw JSON string text of a chunk's delta.
    fn chunk_text(data: &str) -> &str {
        let at = data.find(r#""text":""#).expect("a chunk has text") + 8;
        &data[at..data.len() - 3]
    }

    #[test]
    fn the_mix_is_as_documented() {
        let turns = session(7, 400);
        let mix = Mix::of(turns.iter().flatten());
        let (chunks, tools, rest) = (
            mix.fraction(mix.chunks),
            mix.fraction(mix.tools),
            mix.fraction(mix.boundaries),
        );
        // Shown with --nocapture; docs/PERFORMANCE.md quotes it.
        eprintln!(
            "mix of 400 turns: {} events, {chunks:.3} chunks, {tools:.3} tools, {rest:.3} other, {:.0} bytes of JSONL per event",
            mix.events,
            jsonl_bytes(turns.iter().flatten()) as f64 / mix.events as f64
        );
        assert!((0.65..=0.75).contains(&chunks), "chunks {chunks:.3}");
        assert!((0.17..=0.23).contains(&tools), "tools {tools:.3}");
        assert!((0.07..=0.13).contains(&rest), "boundaries {rest:.3}");
        for turn in &turns {
            assert!((20..=200).contains(&turn.len()), "{} events", turn.len());
            let m = Mix::of(turn);
            assert!(
                m.tools >= 2 && m.tools.is_multiple_of(2),
                "calls come in pairs"
            );
        }
    }

    #[test]
    fn payload_sizes_are_as_documented() {
        let turns = session(11, 200);
        let (mut escapes, mut non_ascii) = (0, 0);
        for e in turns.iter().flatten() {
            let data = e.data().get();
            match e.kind() {
                EventKind::AssistantChunk => {
                    let len = chunk_text(data).len();
                    assert!((40..=200).contains(&len), "chunk text of {len} bytes");
                }
                EventKind::ToolCall | EventKind::ToolResult => {
                    assert!(
                        (1024..=4096).contains(&data.len()),
                        "tool payload of {} bytes",
                        data.len()
                    );
                    escapes += usize::from(data.contains("\\\"") && data.contains("\\n"));
                    non_ascii += usize::from(!data.is_ascii());
                }
                _ => {}
            }
        }
        assert!(escapes > 100 && non_ascii > 100, "{escapes} {non_ascii}");
    }

    #[test]
    fn sessions_are_deterministic_and_follow_the_contract() {
        let a = session(3, 30);
        assert_eq!(a, session(3, 30));
        assert_ne!(a, session(4, 30));
        let mut tracker = Tracker::new(Policy::Strict);
        for (i, turn) in a.iter().enumerate() {
            tracker.accept_batch(turn).unwrap();
            assert!(!tracker.in_turn(), "turn {i} is complete");
        }
        let seqs: Vec<u64> = a.iter().flatten().map(Event::seq).collect();
        assert!(seqs.iter().enumerate().all(|(i, &s)| s == i as u64));

        // A cut turn leaves a turn open with an unanswered call.
        let mut w = Workload::new(3);
        let mut tracker = Tracker::new(Policy::Strict);
        tracker.accept_batch(&w.next_turn()).unwrap();
        let open = w.turn_of(60, false);
        assert_eq!(open.last().unwrap().kind(), EventKind::ToolCall);
        tracker.accept_batch(&open).unwrap();
        assert!(tracker.in_turn());
    }
}
