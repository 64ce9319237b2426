//! The log generator: [`LogGen`] and the run shapes and coverage counts
//! it reports ([`Shapes`], [`RunStats`]).

use std::collections::VecDeque;

use crate::workload::{TurnState, tool_call_blocks};
use turnwal::contract::{NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT, Policy, Tracker};
use turnwal::event::{Event, MAX_SAFE_INTEGER};
use turnwal::rng::Rng;

// ---------------------------------------------------------------------------
// The log generator
// ---------------------------------------------------------------------------

/// How runs were generated, for coverage reports: `[kind][bucket]` where
/// kind is text, reasoning, tool-call and bucket is a run of 1, 2, 3,
/// 4..=1023, 1024 or more members (as generated; a break inside a run starts
/// a new one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Generated runs by kind and length bucket.
    pub runs: [[u64; 5]; 3],
    /// Deltas generated in a form that must stay a scalar row.
    pub unpackable: u64,
    /// Events named like a packed tag (`text-chunks`, …), ignorable or not.
    pub tag_named: u64,
    /// Events carrying both `surfaceOp` and `sourceEventSeqs`, by key order:
    /// `[sourceEventSeqs first, surfaceOp first]`.
    pub both_orders: [u64; 2],
    /// Tool results written by the producer in the closers' own shape.
    pub closer_shaped: u64,
    /// Runs of members so large that a packed row holds only a few.
    pub huge_runs: u64,
    /// Events whose time is below the one before.
    pub decreasing_times: u64,
}

impl RunStats {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &RunStats) {
        for (mine, theirs) in self.runs.iter_mut().zip(&other.runs) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        self.unpackable += other.unpackable;
        self.tag_named += other.tag_named;
        self.both_orders[0] += other.both_orders[0];
        self.both_orders[1] += other.both_orders[1];
        self.closer_shaped += other.closer_shaped;
        self.huge_runs += other.huge_runs;
        self.decreasing_times += other.decreasing_times;
    }
}

/// The costly run shapes a [`LogGen`] may produce, each as a percentage of
/// the chunk runs it generates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shapes {
    /// Runs of 1,024 to 2,123 members (tiny payloads, steady times: cheap
    /// to generate, costly to read back at every seq).
    pub long_runs: u64,
    /// Runs of 3 to 6 members of 250 to 450 KiB each, over the 1 MiB bound
    /// of a packed row.
    pub huge_runs: u64,
    /// Keep payloads short: at most 600 bytes instead of up to 6 KiB for a
    /// delta and 23 KiB for a message (messages still cross the 4096-byte
    /// compression threshold now and then). The fuzz target's setting:
    /// under its instrumentation every byte read back costs.
    pub lean: bool,
    /// Whole turns of a realistic session ([`crate::workload::realistic`]:
    /// nine events in ten streamed deltas that pack into chunk runs, as
    /// harness sessions are) instead of the synthetic actions, which cover
    /// every shape the contract allows; the other shapes then do not apply.
    pub realistic: bool,
}

/// Generates a valid log, one batch at a time. The generator runs ahead of
/// what was appended: an action (a whole chunk run, a tool round trip) is
/// generated at once and handed out across as many batches as the caller
/// asks for, so runs are split by batch boundaries at random places.
#[derive(Debug, Clone)]
pub struct LogGen {
    pub(super) rng: Rng,
    pub(super) policy: Policy,
    pub(super) shapes: Shapes,
    /// Where the generated log stands (turn, step, tool calls, seq, clock).
    pub(super) state: TurnState,
    pub(super) pending: VecDeque<Event>,
    pub(super) names: u64,
    /// Name the events [`LogGen`] would name like a packed tag
    /// `plugin/<tag>` instead: a JSONL store cannot hold an event whose
    /// type is `text-chunks`, `reasoning-chunks` or `tool-call-chunks`.
    pub(super) no_row_tags: bool,
    /// What was generated so far.
    pub stats: RunStats,
    /// The realistic session, when [`Shapes::realistic`].
    pub(super) realistic: Option<crate::workload::realistic::Realistic>,
}

/// Payload strings a packed row keeps as they are: each is what
/// `JSON.stringify` writes for its string.
const CANONICAL: &[&str] = &[
    r#""""#,
    r#""a""#,
    r#""Hello, world. ""#,
    r#""é""#,
    r#""😀""#,
    r#""\n""#,
    r#""\"quoted\"""#,
    r#""back\\slash""#,
    r#""\u0000""#,
    r#""\u001f""#,
    r#""\ud800""#,
    r#""\udfff""#,
    r#""x\ud800y""#,
    r#""\t\b\f\r""#,
    "\"\u{7f}\"",
    "\"\u{2028}\"",
    r#""{\"path\":\"src/main.rs\"}""#,
];

/// Payload strings that are valid JSON but not what `JSON.stringify` writes:
/// a delta holding one stays a scalar row.
const NON_CANONICAL: &[&str] = &[
    r#""\u0041""#,
    r#""a\/b""#,
    r#""\u00e9""#,
    r#""\ud83d\ude00""#,
    r#""\uD800""#,
    r#""\u007f""#,
];

pub(super) const TAGS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

fn safe_time(t: i128) -> i64 {
    t.clamp(-i128::from(MAX_SAFE_INTEGER), i128::from(MAX_SAFE_INTEGER)) as i64
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// The envelope extras of one generated event.
#[derive(Debug, Clone, Default)]
struct Extras {
    ignorable: bool,
    sources: Option<String>,
    surface: Option<String>,
    surface_first: bool,
}

impl LogGen {
    /// A generator for an empty session.
    pub fn new(seed: u64, policy: Policy, shapes: Shapes) -> LogGen {
        let mut rng = Rng::new(seed);
        let time = match rng.below(6) {
            0 => 0,
            1 => -5,
            2 => MAX_SAFE_INTEGER as i64 - 5_000,
            3 => -(MAX_SAFE_INTEGER as i64) + 5_000,
            _ => 1_700_000_000_000 + rng.below(1_000_000) as i64,
        };
        // A realistic session keeps to present-day clocks (its pauses
        // would carry a clock near the safe-integer bound past it).
        let time = if shapes.realistic {
            1_796_083_200_000
        } else {
            time
        };
        LogGen {
            realistic: shapes
                .realistic
                .then(|| crate::workload::realistic::Realistic::new(seed)),
            rng,
            policy,
            shapes,
            state: TurnState::new(time),
            pending: VecDeque::new(),
            names: 0,
            no_row_tags: false,
            stats: RunStats::default(),
        }
    }

    /// This generator, naming no event like a packed JSONL/SQLite row tag
    /// (`plugin/text-chunks` instead of `text-chunks`, …): what a run with
    /// a JSONL store generates, since a JSONL log cannot hold such an event
    /// (docs/JSONL.md, "Records").
    pub fn without_row_tags(mut self) -> LogGen {
        self.no_row_tags = true;
        self
    }

    /// A generator continuing `log`, which must be balanced (no turn open),
    /// as recovery leaves it. Keeps the coverage counts of `self`.
    pub fn resume(&self, seed: u64, log: &[Event]) -> LogGen {
        let mut tracker = Tracker::new(self.policy);
        tracker
            .accept_batch(log)
            .expect("a stored log obeys the turn contract");
        assert!(
            !tracker.in_turn(),
            "resuming a log whose turn {:?} is open",
            tracker.open_turn()
        );
        let mut g = LogGen::new(seed, self.policy, self.shapes);
        g.state = TurnState::resume(g.state.time(), log);
        debug_assert_eq!(g.state.turn(), u64::from(tracker.placement().turn));
        g.stats = self.stats;
        g.no_row_tags = self.no_row_tags;
        g.realistic = self.realistic.clone();
        g
    }

    /// The next `n` events (at least one).
    pub fn batch(&mut self, n: usize) -> Vec<Event> {
        let n = n.max(1);
        while self.pending.len() < n {
            match self.realistic.take() {
                Some(session) => {
                    let mut next = session.continuing(self.state.clone());
                    self.pending.extend(next.next_turn());
                    self.state = next.state().clone();
                    self.realistic = Some(next);
                }
                None => self.action(),
            }
        }
        self.pending.drain(..n).collect()
    }

    /// The seq of the next event [`LogGen::batch`] hands out.
    pub fn next_seq(&self) -> u64 {
        self.state.seq() - self.pending.len() as u64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.below(from.len() as u64) as usize]
    }

    fn advance_time(&mut self) {
        let before = self.state.time();
        let t = i128::from(before);
        self.state.set_time(safe_time(match self.rng.below(100) {
            0..=59 => t + self.rng.below(5) as i128,
            60..=74 => t,
            75..=91 => t - 1 - self.rng.below(50) as i128,
            92..=97 => {
                let jump = 1_000_000 + self.rng.below(1_000_000_000_000) as i128;
                if self.rng.below(2) == 0 {
                    t + jump
                } else {
                    t - jump
                }
            }
            // A jump between the extremes: the difference is not a safe
            // integer, which breaks a packed run.
            _ => {
                if t >= 0 {
                    -(MAX_SAFE_INTEGER as i128) + self.rng.below(3) as i128
                } else {
                    MAX_SAFE_INTEGER as i128 - self.rng.below(3) as i128
                }
            }
        }));
        if self.state.time() < before {
            self.stats.decreasing_times += 1;
        }
    }

    fn emit(&mut self, event_type: &str, data: &str, mut extras: Extras) {
        self.advance_time();
        // `ignorable: true` on any type now and then (on a delta it keeps
        // the delta out of a packed row).
        if self.chance(3) {
            extras.ignorable = true;
        }
        let mut line = format!(
            r#"{{"type":{},"seq":{},"time":{},"data":{data}"#,
            quote(event_type),
            self.state.seq(),
            self.state.time()
        );
        if extras.ignorable {
            line.push_str(r#","ignorable":true"#);
        }
        let sources = extras
            .sources
            .as_ref()
            .map(|s| format!(r#","sourceEventSeqs":{s}"#));
        let surface = extras
            .surface
            .as_ref()
            .map(|s| format!(r#","surfaceOp":{s}"#));
        if sources.is_some() && surface.is_some() {
            self.stats.both_orders[usize::from(extras.surface_first)] += 1;
        }
        let (a, b) = if extras.surface_first {
            (surface, sources)
        } else {
            (sources, surface)
        };
        line.push_str(&a.unwrap_or_default());
        line.push_str(&b.unwrap_or_default());
        line.push('}');
        let event = Event::from_json(line.as_bytes())
            .unwrap_or_else(|e| panic!("generated event {line} is invalid: {e}"));
        self.state.take_seq();
        self.pending.push_back(event);
    }

    /// Random `surfaceOp`/`sourceEventSeqs` for a surface event.
    fn surface_extras(&mut self) -> Extras {
        let mut extras = Extras::default();
        if self.state.seq() > 0 && self.chance(40) {
            let n = 1 + self.rng.below(3.min(self.state.seq()));
            let mut seqs: Vec<u64> = Vec::new();
            while (seqs.len() as u64) < n {
                let s = self.rng.below(self.state.seq());
                if !seqs.contains(&s) {
                    seqs.push(s);
                }
            }
            extras.sources = Some(if self.chance(10) {
                "[]".to_owned()
            } else {
                serde_json::to_string(&seqs).expect("seqs serialize")
            });
        }
        if self.chance(40) {
            extras.surface = Some(if self.state.seq() > 0 && self.chance(30) {
                let end = self.rng.below(self.state.seq());
                let start = self.rng.below(end + 1);
                if self.chance(20) {
                    // Kept as written, whitespace and all.
                    format!(r#"{{ "op": "replace", "start": {start}, "end": {end} }}"#)
                } else {
                    format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#)
                }
            } else {
                r#""append""#.to_owned()
            });
        }
        extras.surface_first = self.chance(50);
        extras
    }

    fn payload(&mut self) -> String {
        match self.rng.below(10) {
            0..=5 => self.pick(CANONICAL).to_owned(),
            6..=8 => {
                let len = self.rng.below(24) as usize;
                let s: String = (0..len)
                    .map(|_| (b'a' + self.rng.below(26) as u8) as char)
                    .collect();
                quote(&s)
            }
            _ if self.shapes.lean => quote(&"p".repeat(100 + self.rng.below(500) as usize)),
            _ => quote(&"p".repeat(100 + self.rng.below(6_000) as usize)),
        }
    }

    fn plain_text(&mut self) -> String {
        if self.chance(5) {
            // Over the 4096-byte compression threshold.
            let extra = if self.shapes.lean { 100 } else { 1_500 };
            quote(&"lorem ipsum ".repeat(400 + self.rng.below(extra) as usize))
        } else {
            self.payload()
        }
    }

    fn action(&mut self) {
        if !self.state.in_turn() {
            return self.between_turns();
        }
        match self.state.step() {
            None => self.in_turn_outside_step(),
            Some(step) => self.in_step(step),
        }
    }

    fn between_turns(&mut self) {
        if self.policy == Policy::Lenient && self.state.seq() > 0 && self.chance(25) {
            // Lenient keeps plugin events and user messages between turns.
            return self.loose_event();
        }
        let turn = self.state.start_turn();
        self.emit(
            "turn/start",
            &format!(r#"{{"turn":{turn}}}"#),
            Extras::default(),
        );
    }

    fn loose_event(&mut self) {
        match self.rng.below(4) {
            0 => self.user_message(),
            1 => self.tag_named(),
            _ => {
                let note = self.payload();
                let data = format!(r#"{{"n":{},"note":{note}}}"#, self.state.seq());
                let extras = Extras {
                    ignorable: self.chance(50),
                    ..Extras::default()
                };
                self.emit("plugin/note", &data, extras);
            }
        }
    }

    fn user_message(&mut self) {
        let text = self.plain_text();
        let data = format!(
            r#"{{"id":"u{}","role":"user","content":[{{"type":"text","text":{text}}}]}}"#,
            self.state.seq()
        );
        let extras = self.surface_extras();
        self.emit("user/message", &data, extras);
    }

    /// An event named like a packed tag: ignorable (as upstream stores them
    /// with `ignorable = 1`) or a plain plugin event (`ignorable` NULL),
    /// with data that may even look like a packed row's.
    fn tag_named(&mut self) {
        let tag = self.pick(&TAGS);
        let plugin;
        let tag = if self.no_row_tags {
            plugin = format!("plugin/{tag}");
            plugin.as_str()
        } else {
            self.stats.tag_named += 1;
            tag
        };
        let data = match self.rng.below(3) {
            0 => format!(
                r#"{{"turn":{},"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#,
                self.state.turn().max(1)
            ),
            1 => r#"{"turn":1,"step":1,"index":0,"dt":[0,0],"id":"t","args":["{","}",""]}"#.into(),
            _ => format!(r#"{{"plugin":true,"value":{}}}"#, self.payload()),
        };
        let extras = Extras {
            ignorable: self.chance(70),
            ..Extras::default()
        };
        self.emit(tag, &data, extras);
    }

    fn in_turn_outside_step(&mut self) {
        let t = self.state.turn();
        match self.rng.below(12) {
            0..=1 => self.user_message(),
            2 => self.tag_named(),
            3 => self.loose_event(),
            4 => {
                let text = self.payload();
                let data = format!(
                    r#"{{"id":"c{}","role":"system","content":[{{"type":"text","text":{text}}}]}}"#,
                    self.state.seq()
                );
                self.emit("context/message", &data, Extras::default());
            }
            5..=6 if self.state.next_step() > 1 || self.chance(30) => {
                self.state.end_turn();
                let reason = if self.chance(80) {
                    r#"{"kind":"completed"}"#
                } else {
                    r#"{"kind":"x-plugin-stop","by":"test"}"#
                };
                self.emit(
                    "turn/end",
                    &format!(r#"{{"turn":{t},"reason":{reason}}}"#),
                    Extras::default(),
                );
            }
            _ => {
                let s = self.state.start_step();
                self.emit(
                    "step/start",
                    &format!(r#"{{"turn":{t},"step":{s}}}"#),
                    Extras::default(),
                );
            }
        }
    }

    fn in_step(&mut self, step: u64) {
        let t = self.state.turn();
        match self.rng.below(20) {
            0..=7 => self.chunk_run(step),
            8..=9 if self.state.requested().is_empty() && self.state.called().is_empty() => {
                self.names += 1;
                let n = 1 + self.rng.below(3);
                let ids: Vec<String> = (0..n)
                    .map(|i| format!("call-{t}-{step}-{}-{i}", self.names))
                    .collect();
                let blocks = tool_call_blocks(&ids, "run");
                let data = format!(
                    r#"{{"turn":{t},"step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":{}}},{blocks}]}}}}"#,
                    self.payload(),
                );
                let extras = self.surface_extras();
                self.emit("assistant/message", &data, extras);
                self.state.request(ids);
            }
            10..=11 if !self.state.requested().is_empty() => {
                let id = self.state.call().expect("a call was requested");
                let data = format!(
                    r#"{{"turn":{t},"step":{step},"callId":"{id}","name":"run","arguments":"{{\"cmd\":\"ls\"}}"}}"#
                );
                self.emit("tool/call", &data, Extras::default());
            }
            12..=13 if !self.state.called().is_empty() => {
                let (id, call_seq) = self.state.answer().expect("a call was recorded");
                if self.chance(15) {
                    self.closer_shaped(step, &id, Some(call_seq));
                } else {
                    self.tool_result(step, &id, call_seq);
                }
            }
            14 if !self.state.requested().is_empty() && self.chance(50) => {
                // The producer gave up on a requested call and says so in
                // the shape recovery's closer has.
                let id = self.state.abandon().expect("a call was requested");
                self.closer_shaped(step, &id, None);
            }
            15 => self.tag_named(),
            16 => {
                let data = format!(
                    r#"{{"turn":{t},"step":{step},"replaced":{}}}"#,
                    self.payload()
                );
                let mut extras = self.surface_extras();
                let end = self.state.seq().saturating_sub(1);
                let start = self.rng.below(end + 1);
                extras.surface = Some(format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#));
                self.emit("tool/result", &data, extras);
            }
            17 => self.loose_event(),
            _ => {
                self.state.end_step();
                self.emit(
                    "step/end",
                    &format!(r#"{{"turn":{t},"step":{step}}}"#),
                    Extras::default(),
                );
            }
        }
    }

    fn tool_result(&mut self, step: u64, id: &str, call_seq: u64) {
        let t = self.state.turn();
        let data = format!(
            r#"{{"turn":{t},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":{}}}]}}]}}}}"#,
            self.plain_text()
        );
        let mut extras = Extras::default();
        if self.chance(70) {
            extras.surface = Some(r#""append""#.into());
        }
        if self.chance(70) {
            extras.sources = Some(format!("[{call_seq}]"));
        }
        extras.surface_first = self.chance(50);
        self.emit("tool/result", &data, extras);
    }

    /// A tool result in exactly the shape recovery's closers have (the
    /// shape the SQLite row encoding keys its default key order on), in
    /// either key order.
    fn closer_shaped(&mut self, step: u64, id: &str, call_seq: Option<u64>) {
        self.stats.closer_shaped += 1;
        let t = self.state.turn();
        let (name, code, text) = match call_seq {
            Some(_) => (
                "ToolOutcomeUnknownError",
                "TOOL_OUTCOME_UNKNOWN",
                OUTCOME_UNKNOWN_TEXT,
            ),
            None => ("ToolNotStartedError", "TOOL_NOT_STARTED", NOT_STARTED_TEXT),
        };
        let data = format!(
            r#"{{"turn":{t},"step":{step},"message":{{"id":"interrupted-tool-result-{id}-{}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","isError":true,"content":[{{"type":"text","text":{}}}]}}]}},"error":{{"name":"{name}","code":"{code}"}}}}"#,
            self.state.seq(),
            quote(text)
        );
        let extras = Extras {
            ignorable: false,
            sources: call_seq.map(|s| format!("[{s}]")),
            surface: self.chance(90).then(|| r#""append""#.to_owned()),
            surface_first: self.chance(50),
        };
        self.emit("tool/result", &data, extras);
    }

    fn run_length(&mut self) -> usize {
        if self.chance(self.shapes.long_runs) {
            // Exactly one row's worth now and then, else anything up to
            // three rows.
            return match self.rng.below(4) {
                0 => 1_024,
                1 => 1_025,
                _ => 1_024 + self.rng.below(1_100) as usize,
            };
        }
        match self.rng.below(100) {
            0..=14 => 1,
            15..=29 => 2,
            30..=44 => 3,
            45..=91 => 4 + self.rng.below(12) as usize,
            _ => 16 + self.rng.below(100) as usize,
        }
    }

    fn chunk_run(&mut self, step: u64) {
        let t = self.state.turn();
        let kind = self.rng.below(3) as usize;
        // Runs over the 1 MiB row bound: a few members of 250 to 450 KiB.
        let huge = self.chance(self.shapes.huge_runs);
        let len = if huge {
            self.stats.huge_runs += 1;
            3 + self.rng.below(4) as usize
        } else {
            self.run_length()
        };
        let mut index = self.rng.below(3);
        self.names += 1;
        let mut tool_id = format!("tc-{}", self.names);
        let name_mode = self.rng.below(3); // always, never, first member only
        let bucket = match len {
            1 => 0,
            2 => 1,
            3 => 2,
            4..=1023 => 3,
            _ => 4,
        };
        self.stats.runs[kind][bucket] += 1;
        let cheap = len >= 1_024;
        for member in 0..len {
            // Now and then something that breaks the run.
            if !cheap && member > 0 && self.chance(4) {
                match self.rng.below(2) {
                    0 => index += 1,
                    _ => {
                        self.names += 1;
                        tool_id = format!("tc-{}", self.names);
                    }
                }
            }
            let payload = if huge {
                quote(&"h".repeat(250_000 + self.rng.below(200_000) as usize))
            } else if cheap {
                ["\"x\"", "\"\"", "\"yz\""][self.rng.below(3) as usize].to_owned()
            } else if self.chance(8) {
                self.stats.unpackable += 1;
                self.pick(NON_CANONICAL).to_owned()
            } else {
                self.payload()
            };
            let chunk = match kind {
                0 | 1 => format!(
                    r#"{{"type":"{}","index":{index},"text":{payload}}}"#,
                    if kind == 0 {
                        "text-delta"
                    } else {
                        "reasoning-delta"
                    }
                ),
                _ => {
                    let name = match name_mode {
                        0 => r#","name":"shell""#,
                        2 if member == 0 => r#","name":"shell""#,
                        _ => "",
                    };
                    format!(
                        r#"{{"type":"tool-call-delta","index":{index},"id":"{tool_id}"{name},"argumentsDelta":{payload}}}"#
                    )
                }
            };
            let data = if !cheap && !huge && self.chance(5) {
                self.stats.unpackable += 1;
                match self.rng.below(5) {
                    0 => format!(r#"{{"step":{step},"turn":{t},"chunk":{chunk}}}"#),
                    1 => format!(r#"{{"turn":{t}, "step":{step}, "chunk":{chunk}}}"#),
                    2 => {
                        let extra = chunk.trim_end_matches('}').to_owned();
                        format!(
                            r#"{{"turn":{t},"step":{step},"chunk":{extra},"providerMetadata":{{}}}}}}"#
                        )
                    }
                    3 => format!(
                        r#"{{"turn":{t},"step":{step},"chunk":{{"type":"finish","reason":"stop"}}}}"#
                    ),
                    _ => format!(
                        r#"{{"turn":{t},"step":{step},"chunk":{{"type":"text-delta","index":-0,"text":"z"}}}}"#
                    ),
                }
            } else {
                format!(r#"{{"turn":{t},"step":{step},"chunk":{chunk}}}"#)
            };
            if cheap {
                // Keep 1024+ runs cheap: small steady time steps.
                let time = self.state.time() + self.rng.below(2) as i64;
                self.state.set_time(time.min(MAX_SAFE_INTEGER as i64));
                let line = format!(
                    r#"{{"type":"assistant/chunk","seq":{},"time":{},"data":{data}}}"#,
                    self.state.take_seq(),
                    self.state.time()
                );
                let event = Event::from_json(line.as_bytes()).expect("a valid delta");
                self.pending.push_back(event);
            } else {
                self.emit("assistant/chunk", &data, Extras::default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_logs_obey_the_contract() {
        for seed in 0..40 {
            for policy in [Policy::Strict, Policy::Lenient] {
                let shapes = Shapes {
                    long_runs: if seed % 8 == 0 { 20 } else { 0 },
                    huge_runs: 0,
                    lean: seed % 2 == 0,
                    realistic: seed % 5 == 0,
                };
                let mut g = LogGen::new(seed, policy, shapes);
                if seed % 2 == 1 {
                    g = g.without_row_tags();
                }
                let log = g.batch(600);
                Tracker::new(policy).accept_batch(&log).unwrap();
                // JSONL's read-time normalization leaves every generated
                // event as it is.
                let normalized = turnwal::backend::jsonl::normalize::normalize(&log, "s").unwrap();
                assert!(
                    normalized == log,
                    "seed {seed}: normalization changed an event"
                );
                if seed % 2 == 1 {
                    assert!(log.iter().all(|e| !TAGS.contains(&e.event_type())));
                }
            }
        }
    }
}
