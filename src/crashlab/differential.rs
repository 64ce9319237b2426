//! The differential check of the backends: the same operations run against
//! a native WAL store, a SQLite store and (when the [`Config`] asks) the
//! upstream JSONL store raw (`session.jsonl`), zstd (`session.jsonl.zstd`)
//! or both, and every answer must be the same as the WAL's
//! (docs/RELIABILITY.md, "Differential").
//!
//! - [`LogGen`] generates valid logs built to exercise the SQLite and JSONL
//!   row encodings: `assistant/chunk` runs of every packed kind (text,
//!   reasoning, tool-call deltas) and length (1, 2, 3, longer, now and then
//!   1024+ and runs over the 1 MiB row bound), deltas that must stay scalar
//!   rows (keys reordered, whitespace, escapes `JSON.stringify` would not
//!   write, extra keys), run breaks (index, tool id, `name` presence, time
//!   jumps past the safe integers), decreasing times, tool calls and
//!   results (including producer-written results shaped like recovery's
//!   closers), `surfaceOp`/`sourceEventSeqs` in both key orders, ignorable
//!   and plain events named like the packed tags, plugin events, large
//!   payloads; and, under `Lenient`, events between turns.
//! - [`Differential`] holds the stores in a scratch directory and applies
//!   [`DiffOp`]s to each: appends in any partition, flush, close, reopen
//!   (fresh `Store`s over the same storage: a crash), torn tails written
//!   into each backend's own storage, recover, load, delete, reads. After
//!   every operation it compares the results, and [`Differential::check`]
//!   compares everything a reader can see: `inspect`, `view`, `verify`,
//!   `list`, `read_from` at every seq from 0 to length+1, and that reads
//!   leave the revision alone while appends and repairs move every
//!   backend's revision in lockstep.
//!
//! Events are compared by their full content: type, seq, time, the exact
//! `data` bytes, `ignorable`, `sourceEventSeqs` and `surfaceOp` text and
//! their key order. What is the backend's own and so never compared: byte
//! sizes, the byte offset or row position of a cut and the decoder's words
//! for it (of `list`'s `problem`, the reason code is compared), revision
//! token text (only whether it moved).
//!
//! Limits of the model, each a rule of a backend, not a tolerance:
//!
//! - SQLite commits a transaction whole, so a torn tail never splits the
//!   closers of a WAL repair (a crash inside a WAL repair has no SQLite
//!   counterpart; `recovery.rs` and the crash lab test it on the WAL), and
//!   a cut never falls inside a packed row or line: a crash would lose the
//!   whole row in SQLite and the whole line in JSONL, one event in the WAL.
//!   `CutLast` on a log whose last row or JSONL line is packed tears a
//!   partial next record instead; `DropLast` across a packed row or line
//!   replaces it with its kept members, packed as a batch of them would be.
//! - `sourceEventSeqs` is generated in its canonical spelling (`[1,2]`,
//!   the only one SQLite keeps); parsing gives any other spelling that one
//!   (`tests/differential.rs::source_event_seqs_spelling_is_the_same_in_every_backend`).
//! - JSONL (docs/JSONL.md): a JSONL log cannot hold an event whose type is
//!   a packed tag (`text-chunks`, …) — a JSONL store refuses the batch,
//!   naming the seq (`tests/differential.rs::jsonl_refuses_an_event_named_like_a_packed_tag`)
//!   — so with a JSONL store the generator names those events
//!   `plugin/<tag>`. A JSONL header always stores `delegationDepth` (0
//!   when none was given; a live session shows it too:
//!   `jsonl_header_depth_is_the_same_live_and_reopened`), and a line
//!   holding `surfaceOp` without `sourceEventSeqs` cannot show their key
//!   order (the reader takes the default for the event's shape): the WAL's
//!   answers are compared with both applied ([`Kind`]).
//!   Every generated event reads through JSONL's read-time normalization
//!   unchanged (no `trigger`, no legacy `turn/end` reasons or message
//!   shapes, no retired types; unknown `turn/end` kinds pass as they are).
//! - JSONL torn tails are written as upstream's writer could leave them:
//!   raw, a fragment of a line without its newline (`PartialNext`: half a
//!   copy of the last line; `CutLast(k)`: the last line cut to 1 to all of
//!   its bytes); zstd, a torn final frame, built as two blocks (the lines
//!   to keep, a flush, then the rest) and cut inside the second, so
//!   upstream's reader recovers exactly the complete records before the
//!   cut (`CutLast`: every line of the last batch but the last;
//!   `PartialNext`: alternately all of the last batch, rewritten by the
//!   repair through a temp file, or a torn frame of nothing after it).
//!   `DropLast` on zstd re-compresses the frame it cuts with its kept
//!   lines (the log a smaller batch would have left: a crash inside a
//!   frame leaves a torn frame, which `CutLast` covers).
//!
//! A divergence panics with every answer (for long ones, the lines that
//! differ from the WAL's) and the recent operations, which is what the
//! property test (`tests/differential.rs`) and the fuzz target
//! (`fuzz/fuzz_targets/differential.rs`, through [`fuzz_differential`])
//! report.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::workload::Rng;
use crate::backend::SyncMode;
use crate::backend::jsonl::{Compression, JsonlBackend};
use crate::backend::sqlite::{SqliteOptions, Synchronous};
use crate::backend::wal::WalBackend;
use crate::contract::{NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT, Policy, Tracker};
use crate::error::{Error, Result};
use crate::event::{Event, MAX_SAFE_INTEGER};
use crate::header::SessionHeader;
use crate::scan::SessionSummary;
use crate::store::{Receipt, RecoveryReport, SessionView, Store, StoreOptions};

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
}

/// Generates a valid log, one batch at a time. The generator runs ahead of
/// what was appended: an action (a whole chunk run, a tool round trip) is
/// generated at once and handed out across as many batches as the caller
/// asks for, so runs are split by batch boundaries at random places.
#[derive(Debug, Clone)]
pub struct LogGen {
    rng: Rng,
    policy: Policy,
    shapes: Shapes,
    seq: u64,
    time: i64,
    /// The last turn started.
    turn: u64,
    in_turn: bool,
    step: Option<u64>,
    next_step: u64,
    /// Tool-call ids the open step's assistant message requested, not yet
    /// recorded as started.
    requested: Vec<String>,
    /// Recorded calls of the open step without a result: (id, seq).
    called: Vec<(String, u64)>,
    pending: VecDeque<Event>,
    names: u64,
    /// Name the events [`LogGen`] would name like a packed tag
    /// `plugin/<tag>` instead: a JSONL store cannot hold an event whose
    /// type is `text-chunks`, `reasoning-chunks` or `tool-call-chunks`.
    no_row_tags: bool,
    /// What was generated so far.
    pub stats: RunStats,
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

const TAGS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

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
        LogGen {
            rng,
            policy,
            shapes,
            seq: 0,
            time,
            turn: 0,
            in_turn: false,
            step: None,
            next_step: 1,
            requested: Vec::new(),
            called: Vec::new(),
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
        g.seq = log.len() as u64;
        if let Some(last) = log.last() {
            g.time = last.time();
        }
        g.turn = u64::from(tracker.placement().turn);
        g.stats = self.stats;
        g.no_row_tags = self.no_row_tags;
        g
    }

    /// The next `n` events (at least one).
    pub fn batch(&mut self, n: usize) -> Vec<Event> {
        let n = n.max(1);
        while self.pending.len() < n {
            self.action();
        }
        self.pending.drain(..n).collect()
    }

    /// The seq of the next event [`LogGen::batch`] hands out.
    pub fn next_seq(&self) -> u64 {
        self.seq - self.pending.len() as u64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.below(from.len() as u64) as usize]
    }

    fn advance_time(&mut self) {
        let before = self.time;
        let t = i128::from(self.time);
        self.time = safe_time(match self.rng.below(100) {
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
        });
        if self.time < before {
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
            self.seq,
            self.time
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
        self.seq += 1;
        self.pending.push_back(event);
    }

    /// Random `surfaceOp`/`sourceEventSeqs` for a surface event.
    fn surface_extras(&mut self) -> Extras {
        let mut extras = Extras::default();
        if self.seq > 0 && self.chance(40) {
            let n = 1 + self.rng.below(3.min(self.seq));
            let mut seqs: Vec<u64> = Vec::new();
            while (seqs.len() as u64) < n {
                let s = self.rng.below(self.seq);
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
            extras.surface = Some(if self.seq > 0 && self.chance(30) {
                let end = self.rng.below(self.seq);
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
        if !self.in_turn {
            return self.between_turns();
        }
        match self.step {
            None => self.in_turn_outside_step(),
            Some(step) => self.in_step(step),
        }
    }

    fn between_turns(&mut self) {
        if self.policy == Policy::Lenient && self.seq > 0 && self.chance(25) {
            // Lenient keeps plugin events and user messages between turns.
            return self.loose_event();
        }
        self.turn += 1;
        self.in_turn = true;
        self.step = None;
        self.next_step = 1;
        self.emit(
            "turn/start",
            &format!(r#"{{"turn":{}}}"#, self.turn),
            Extras::default(),
        );
    }

    fn loose_event(&mut self) {
        match self.rng.below(4) {
            0 => self.user_message(),
            1 => self.tag_named(),
            _ => {
                let note = self.payload();
                let data = format!(r#"{{"n":{},"note":{note}}}"#, self.seq);
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
            self.seq
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
                self.turn.max(1)
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
        let t = self.turn;
        match self.rng.below(12) {
            0..=1 => self.user_message(),
            2 => self.tag_named(),
            3 => self.loose_event(),
            4 => {
                let text = self.payload();
                let data = format!(
                    r#"{{"id":"c{}","role":"system","content":[{{"type":"text","text":{text}}}]}}"#,
                    self.seq
                );
                self.emit("context/message", &data, Extras::default());
            }
            5..=6 if self.next_step > 1 || self.chance(30) => {
                self.in_turn = false;
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
                let s = self.next_step;
                self.step = Some(s);
                self.next_step += 1;
                self.requested.clear();
                self.called.clear();
                self.emit(
                    "step/start",
                    &format!(r#"{{"turn":{t},"step":{s}}}"#),
                    Extras::default(),
                );
            }
        }
    }

    fn in_step(&mut self, step: u64) {
        let t = self.turn;
        match self.rng.below(20) {
            0..=7 => self.chunk_run(step),
            8..=9 if self.requested.is_empty() && self.called.is_empty() => {
                self.names += 1;
                let n = 1 + self.rng.below(3);
                let ids: Vec<String> = (0..n)
                    .map(|i| format!("call-{t}-{step}-{}-{i}", self.names))
                    .collect();
                let blocks: Vec<String> = ids
                    .iter()
                    .map(|id| {
                        format!(
                            r#"{{"type":"tool-call","id":"{id}","name":"run","arguments":"{{}}"}}"#
                        )
                    })
                    .collect();
                let data = format!(
                    r#"{{"turn":{t},"step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":{}}},{}]}}}}"#,
                    self.payload(),
                    blocks.join(",")
                );
                let extras = self.surface_extras();
                self.emit("assistant/message", &data, extras);
                self.requested = ids;
            }
            10..=11 if !self.requested.is_empty() => {
                let id = self.requested.remove(0);
                let data = format!(
                    r#"{{"turn":{t},"step":{step},"callId":"{id}","name":"run","arguments":"{{\"cmd\":\"ls\"}}"}}"#
                );
                let seq = self.seq;
                self.emit("tool/call", &data, Extras::default());
                self.called.push((id, seq));
            }
            12..=13 if !self.called.is_empty() => {
                let (id, call_seq) = self.called.remove(0);
                if self.chance(15) {
                    self.closer_shaped(step, &id, Some(call_seq));
                } else {
                    self.tool_result(step, &id, call_seq);
                }
            }
            14 if !self.requested.is_empty() && self.chance(50) => {
                // The producer gave up on a requested call and says so in
                // the shape recovery's closer has.
                let id = self.requested.remove(0);
                self.closer_shaped(step, &id, None);
            }
            15 => self.tag_named(),
            16 => {
                let data = format!(
                    r#"{{"turn":{t},"step":{step},"replaced":{}}}"#,
                    self.payload()
                );
                let mut extras = self.surface_extras();
                let end = self.seq.saturating_sub(1);
                let start = self.rng.below(end + 1);
                extras.surface = Some(format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#));
                self.emit("tool/result", &data, extras);
            }
            17 => self.loose_event(),
            _ => {
                self.step = None;
                self.requested.clear();
                self.called.clear();
                self.emit(
                    "step/end",
                    &format!(r#"{{"turn":{t},"step":{step}}}"#),
                    Extras::default(),
                );
            }
        }
    }

    fn tool_result(&mut self, step: u64, id: &str, call_seq: u64) {
        let t = self.turn;
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
        let t = self.turn;
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
            self.seq,
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
        let t = self.turn;
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
                self.time += self.rng.below(2) as i64;
                self.time = self.time.min(MAX_SAFE_INTEGER as i64);
                let line = format!(
                    r#"{{"type":"assistant/chunk","seq":{},"time":{},"data":{data}}}"#,
                    self.seq, self.time
                );
                let event = Event::from_json(line.as_bytes()).expect("a valid delta");
                self.seq += 1;
                self.pending.push_back(event);
            } else {
                self.emit("assistant/chunk", &data, Extras::default());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Two stores, one history
// ---------------------------------------------------------------------------

/// A scratch directory removed when dropped.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(base: &Path) -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!(
            "turnwal-differential-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a torn tail is left in each backend's own storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornTail {
    /// A partial record after the last one: WAL, half of a copy of its last
    /// record; SQLite, a row at the next seq whose JSON text ends early.
    PartialNext,
    /// The last event itself cut short (when it is a scalar row in SQLite
    /// and recovery did not write it; otherwise [`TornTail::PartialNext`]):
    /// WAL, the file truncated inside its last record; SQLite, that row's
    /// `data` cut to its first `(len - 1) * k / 255` bytes (rounded down to
    /// a character) for `CutLast(k)`, so anywhere from nothing to all but
    /// the last byte: inside a key, a string, a number, a literal, a `\u`
    /// escape, a compressed frame.
    CutLast(u8),
    /// The last `n` events (at most all of them) never reached the disk,
    /// as a crash in the middle of writing a batch leaves the WAL: the WAL
    /// file cut at a record boundary; SQLite, the rows from that seq on
    /// deleted (a packed row across the cut replaced by rows of its kept
    /// members, as the codec packs them).
    DropLast(u8),
}

/// One operation applied to both stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffOp {
    /// Append the next `events` generated events of a session (creating it
    /// first if needed; a session whose stored log moved on without the
    /// generator is resumed from it first).
    Append {
        /// Which session.
        session: usize,
        /// How many events.
        events: usize,
    },
    /// `Store::flush`.
    Flush {
        /// Which session.
        session: usize,
    },
    /// `Store::close`.
    Close {
        /// Which session.
        session: usize,
    },
    /// Drop both stores (a crash: nothing is closed) and open fresh ones
    /// over the same storage, then [`Differential::check`].
    Reopen,
    /// A crash that leaves a torn tail in a session, then reopen.
    Tear {
        /// Which session.
        session: usize,
        /// How.
        how: TornTail,
    },
    /// `Store::recover`.
    Recover {
        /// Which session.
        session: usize,
        /// Only report.
        dry_run: bool,
    },
    /// `Store::load`.
    Load {
        /// Which session.
        session: usize,
    },
    /// `Store::delete`.
    Delete {
        /// Which session.
        session: usize,
    },
    /// An append both stores must refuse, changing nothing: `how` picks a
    /// batch that starts past the next seq, one that re-sends the stored
    /// last seq, or one that breaks the turn contract.
    Reject {
        /// Which session.
        session: usize,
        /// Which refusal.
        how: u8,
    },
    /// `Store::read_from` at one seq.
    ReadFrom {
        /// Which session.
        session: usize,
        /// From where.
        seq: u64,
    },
    /// [`Differential::check`].
    Check,
}

/// Counts from a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffStats {
    /// Operations applied.
    pub ops: u64,
    /// Append batches accepted (by both).
    pub batches: u64,
    /// Events appended (to each store).
    pub events: u64,
    /// Full comparisons.
    pub checks: u64,
    /// `read_from` calls compared.
    pub reads: u64,
    /// Reopens (crashes).
    pub reopens: u64,
    /// Torn tails written.
    pub tears: u64,
    /// Repairs committed (by both).
    pub repairs: u64,
    /// Synthetic closers committed by those repairs.
    pub closers: u64,
    /// Packed rows in the SQLite database at the last check, by tag.
    pub packed_rows: [u64; 3],
    /// Events those packed rows hold.
    pub packed_members: u64,
    /// The most events one packed row held.
    pub largest_row: u64,
    /// Packed lines in the JSONL logs at the last check (the most of any
    /// JSONL store), by tag.
    pub jsonl_packed_rows: [u64; 3],
    /// Events those packed lines hold.
    pub jsonl_packed_members: u64,
    /// The most events one packed JSONL line held.
    pub jsonl_largest_row: u64,
    /// Generator coverage.
    pub generated: RunStats,
}

/// What a [`Differential`] run drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Drives the generated content and headers.
    pub seed: u64,
    /// One session per entry (at most [`SESSION_IDS`]`.len()`), with its
    /// policy.
    pub policies: Vec<Policy>,
    /// The costly run shapes.
    pub shapes: Shapes,
    /// `true`: the WAL store fsyncs every batch and SQLite runs with
    /// `synchronous = FULL` (the default). `false`: neither fsyncs a batch
    /// (WAL `SyncMode::Never`, SQLite `NORMAL`). Either way a receipt
    /// reports every accepted event durable on both sides, so receipts are
    /// compared whole.
    pub durable: bool,
    /// Which seqs a check reads from.
    pub sweep: Sweep,
    /// Where the scratch directory goes; `None`: the system's temporary
    /// directory.
    pub scratch: Option<PathBuf>,
    /// The JSONL stores taking part (raw, zstd, both or none), each opened
    /// with the WAL's `SyncMode`. With any, the generator names no event
    /// like a packed row tag ([`LogGen::without_row_tags`]).
    pub jsonl: Vec<Compression>,
}

/// Which seqs [`Differential::check`] calls `read_from` at. A sweep costs
/// the square of the log's length (every call returns the rest of the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Every seq from 0 to length+1.
    Every,
    /// Every seq when there are at most this many; otherwise the first and
    /// last eight and the rest spread evenly, this many in all, plus every
    /// seq within one of where a packed SQLite row starts or ends (where
    /// `read_from` seeks to a covering row). The fuzz target's bound on the
    /// time one input takes, and the cheap path for logs of 1,024+ runs.
    AtMost(u64),
}

impl Sweep {
    /// The seqs to read a log of `stored` events from.
    pub fn seqs(self, stored: u64) -> Vec<u64> {
        let every = stored + 2;
        match self {
            Sweep::AtMost(k) if every > k && k >= 16 => {
                let mut seqs: Vec<u64> = (0..8).chain(every - 8..every).collect();
                let middle = k - 16;
                seqs.extend((0..middle).map(|i| 8 + (i + 1) * (every - 16) / (middle + 1)));
                seqs.sort_unstable();
                seqs.dedup();
                seqs
            }
            _ => (0..every).collect(),
        }
    }
}

/// Per-session bookkeeping.
#[derive(Debug)]
struct Session {
    id: String,
    header: SessionHeader,
    policy: Policy,
    generator: LogGen,
    seed: u64,
    /// Created (pending or live) in the current stores.
    created: bool,
    /// Materialized on disk.
    on_disk: bool,
    /// The stored log may have moved on without the generator (a crash,
    /// close or repair since): resume it from the store before appending.
    stale: bool,
    /// A torn tail was written and not repaired since (a second tear would
    /// damage the damage, not a log).
    torn: bool,
}

/// Whether two answers are the same (the flag: the second is a JSONL
/// store's, see [`Kind::reads_as_jsonl`]).
type SameAs<T> = dyn Fn(&Result<T>, &Result<T>, bool) -> bool;

/// One backend of a [`Differential`] run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The native WAL (the reference every other answer is compared with).
    Wal,
    /// SQLite.
    Sqlite,
    /// The upstream JSONL logs, raw or zstd.
    Jsonl(Compression),
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Wal => "wal",
            Kind::Sqlite => "sqlite",
            Kind::Jsonl(Compression::None) => "jsonl",
            Kind::Jsonl(Compression::Zstd) => "jsonl+zstd",
        }
    }

    /// Whether this backend's answers are compared with the WAL's as a
    /// JSONL store gives them (docs/JSONL.md): a header stored without
    /// `delegationDepth` reads back with `delegationDepth: 0` ("The header
    /// line"), and an event with `surfaceOp` but no `sourceEventSeqs` reads
    /// back in the key order its shape has by default ("Records"; see
    /// `as_jsonl_reads`), so the WAL's answer is compared with those
    /// applied.
    fn reads_as_jsonl(self) -> bool {
        matches!(self, Kind::Jsonl(_))
    }
}

/// A WAL store, a SQLite store and 0 to 2 JSONL stores (raw, zstd) in one
/// scratch directory, driven in lockstep. Every answer is compared with
/// the WAL's; a divergence panics.
pub struct Differential {
    scratch: Scratch,
    /// The stores, the WAL first.
    stores: Vec<(Kind, Store)>,
    wal_options: StoreOptions,
    sqlite_options: SqliteOptions,
    sweep: Sweep,
    /// Inside [`Differential::check`].
    in_check: bool,
    sessions: Vec<Session>,
    rng: Rng,
    /// Counts so far.
    pub stats: DiffStats,
    /// The operations applied so far (for failure messages).
    log: Vec<String>,
}

/// Session ids used, in order: plain, a path-like one, a non-ASCII one.
pub const SESSION_IDS: [&str; 3] = ["alpha", "team/b:1", "sé-ß 😀"];

fn err_key(e: &Error) -> String {
    match e {
        Error::Corrupt(c) => format!("Corrupt(seq {:?})", c.seq),
        Error::Io { op, source, .. } => format!("Io({op}, {:?})", source.kind()),
        Error::Locked { id, .. } => format!("Locked({id})"),
        Error::Unsupported { detail, .. } => format!("Unsupported({detail})"),
        other => format!("{other:?}"),
    }
}

/// An event with everything that makes it this event: its JSON line, and
/// the key order of `surfaceOp` when only it is present (where the line
/// cannot show it).
fn event_key(e: &Event) -> String {
    let mut s = e.to_json();
    if e.surface_op_first() && e.source_event_seqs().is_none() {
        s.push_str(" [surfaceOp first]");
    }
    s
}

/// An event as a JSONL store reads it back: a line holding `surfaceOp`
/// without `sourceEventSeqs` cannot show their key order, so the reader
/// takes the order the event would have been built with (`surfaceOp` first
/// for a tool result in recovery's closer shape; docs/JSONL.md, "Records";
/// `records::decode_line`).
fn as_jsonl_reads(e: &Event) -> std::borrow::Cow<'_, Event> {
    use crate::backend::sqlite::codec::surface_first_by_default;
    match (e.surface_op(), e.source_event_seqs()) {
        (Some(op), None)
            if e.surface_op_first() != surface_first_by_default(e.event_type(), e.data().get()) =>
        {
            let mut read = e.clone();
            read.set_extras(e.ignorable(), None, Some(op.clone()), !e.surface_op_first());
            std::borrow::Cow::Owned(read)
        }
        _ => std::borrow::Cow::Borrowed(e),
    }
}

/// Whether `theirs` is `ours`, as a JSONL store would read `ours` back
/// when `jsonl`.
fn same_events(ours: &[Event], theirs: &[Event], jsonl: bool) -> bool {
    ours.len() == theirs.len()
        && ours.iter().zip(theirs).all(|(a, b)| {
            if jsonl {
                *as_jsonl_reads(a) == *b
            } else {
                a == b
            }
        })
}

fn events_key(events: &[Event], jsonl: bool) -> String {
    let mut out = String::new();
    for e in events {
        let e = if jsonl {
            as_jsonl_reads(e)
        } else {
            std::borrow::Cow::Borrowed(e)
        };
        out.push_str(&event_key(&e));
        out.push('\n');
    }
    out
}

/// A header's JSON; with `fill`, as a JSONL store stores it (a missing
/// `delegationDepth` is 0).
fn header_key(h: &SessionHeader, fill: bool) -> String {
    if fill && h.delegation_depth.is_none() {
        let mut h = h.clone();
        h.delegation_depth = Some(0);
        return h.to_json();
    }
    h.to_json()
}

fn view_key(v: &SessionView, fill: bool) -> String {
    format!(
        "header={} stored={} state={} cut={:?} live={}\n{}",
        header_key(&v.header, fill),
        v.stored,
        v.state,
        v.cut.as_ref().map(|c| (c.seq, c.reason)),
        v.live,
        events_key(&v.events, fill)
    )
}

fn report_key(r: &RecoveryReport, jsonl: bool) -> String {
    format!(
        "state={} kept={} committed={} cut={:?}\n{}",
        r.state,
        r.kept,
        r.committed,
        r.cut.as_ref().map(|c| (c.seq, c.reason)),
        events_key(&r.closers, jsonl)
    )
}

/// A listing row without what is the backend's own: the byte size, and the
/// position and decoder message in a torn session's `problem` (`"<reason
/// code> at byte N: …"` against `"<reason code> at row N: …"`), of which
/// the reason code is compared.
fn summary_key(s: &SessionSummary, fill: bool) -> String {
    format!(
        "{} header={:?} events={} turns={} last={:?} state={} problem={:?}",
        s.id,
        s.header.as_ref().map(|h| header_key(h, fill)),
        s.events,
        s.turns,
        s.last_activity,
        s.state,
        s.problem
            .as_deref()
            .map(|p| p.split_once(" at ").map_or(p, |(code, _)| code))
    )
}

fn key<T>(result: &Result<T>, show: impl FnOnce(&T) -> String) -> String {
    match result {
        Ok(v) => show(v),
        Err(e) => format!("error {}", err_key(e)),
    }
}

impl Differential {
    /// Two empty stores in a fresh scratch directory.
    pub fn new(config: &Config) -> Differential {
        let Config {
            seed,
            ref policies,
            shapes,
            durable,
            sweep,
            ref scratch,
            ref jsonl,
        } = *config;
        assert!(!policies.is_empty() && policies.len() <= SESSION_IDS.len());
        let mut kinds = vec![Kind::Wal, Kind::Sqlite];
        kinds.extend(jsonl.iter().map(|&c| Kind::Jsonl(c)));
        let scratch = Scratch::new(&scratch.clone().unwrap_or_else(std::env::temp_dir));
        let wal_options = StoreOptions {
            sync: if durable {
                SyncMode::Batch
            } else {
                SyncMode::Never
            },
            ..StoreOptions::default()
        };
        let sqlite_options = SqliteOptions {
            synchronous: if durable {
                Synchronous::Full
            } else {
                Synchronous::Normal
            },
            ..SqliteOptions::default()
        };
        let stores = open_stores(&scratch.0, &kinds, wal_options, &sqlite_options);
        let no_row_tags = !jsonl.is_empty();
        let mut rng = Rng::new(seed ^ 0x5eed);
        let sessions = policies
            .iter()
            .enumerate()
            .map(|(i, &policy)| {
                let id = SESSION_IDS[i].to_owned();
                let mut header = SessionHeader::new(id.clone(), 1_700_000_000_000 + i as u64);
                if rng.below(2) == 0 {
                    header.cwd = Some(format!("/work/{i}"));
                }
                if rng.below(3) == 0 {
                    header.parent_session = Some("root".into());
                    header.seed_length = Some(rng.below(5));
                    header.origin = Some("subagent".into());
                    header.delegation_depth = Some(1 + rng.below(3));
                    header.agent_preset = Some("reviewer".into());
                }
                let seed = seed.wrapping_add(i as u64 * 0x9e37_79b9);
                let mut generator = LogGen::new(seed, policy, shapes);
                generator.no_row_tags = no_row_tags;
                Session {
                    id,
                    header,
                    policy,
                    generator,
                    seed,
                    created: false,
                    on_disk: false,
                    stale: false,
                    torn: false,
                }
            })
            .collect();
        Differential {
            scratch,
            stores,
            wal_options,
            sqlite_options,
            sweep,
            in_check: false,
            sessions,
            rng,
            stats: DiffStats::default(),
            log: Vec::new(),
        }
    }

    /// The WAL store's directory.
    pub fn wal_dir(&self) -> PathBuf {
        self.scratch.0.join("wal")
    }

    /// Changes which seqs later checks read from.
    pub fn set_sweep(&mut self, sweep: Sweep) {
        self.sweep = sweep;
    }

    /// The SQLite database.
    pub fn sqlite_path(&self) -> PathBuf {
        self.scratch.0.join("sessions.db")
    }

    /// The root of the JSONL store in `compression`.
    pub fn jsonl_root(&self, compression: Compression) -> PathBuf {
        self.scratch.0.join(match compression {
            Compression::None => "jsonl-raw",
            Compression::Zstd => "jsonl-zstd",
        })
    }

    /// The JSONL compressions taking part.
    fn jsonl_kinds(&self) -> Vec<Compression> {
        self.stores
            .iter()
            .filter_map(|(k, _)| match k {
                Kind::Jsonl(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// How many sessions the run drives.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    fn fail(&self, what: &str, answers: &[(Kind, String)]) -> ! {
        let recent: Vec<&String> = self.log.iter().rev().take(40).collect();
        // Long answers: the lines that differ from the first answer's.
        let clip = |l: &str| -> String {
            if l.len() <= 400 {
                return l.to_owned();
            }
            let mut end = 400;
            while !l.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}… ({} bytes)", &l[..end], l.len())
        };
        let mut shown = String::new();
        let first: Vec<&str> = answers
            .first()
            .map_or("", |a| a.1.as_str())
            .lines()
            .collect();
        for (i, (kind, answer)) in answers.iter().enumerate() {
            let lines: Vec<&str> = answer.lines().collect();
            if i == 0 && answer.len() > 4_000 {
                shown.push_str(&format!(
                    "--- {} ({} lines; the first):\n{}\n",
                    kind.name(),
                    lines.len(),
                    clip(lines.first().copied().unwrap_or(""))
                ));
                continue;
            }
            if answer.len() <= 4_000 {
                let all: Vec<String> = lines.iter().take(60).map(|l| clip(l)).collect();
                shown.push_str(&format!("--- {}:\n{}\n", kind.name(), all.join("\n")));
                continue;
            }
            shown.push_str(&format!(
                "--- {} ({} lines; those that differ):\n",
                kind.name(),
                lines.len()
            ));
            let n = lines.len().max(first.len());
            for at in (0..n).filter(|&j| lines.get(j) != first.get(j)).take(6) {
                let (a, b) = (lines.get(at).copied(), first.get(at).copied());
                // From a little before where the two lines part.
                let (a, b) = (a.unwrap_or("(none)"), b.unwrap_or("(none)"));
                let mut from = a
                    .bytes()
                    .zip(b.bytes())
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()))
                    .saturating_sub(80);
                while !a.is_char_boundary(from) || !b.is_char_boundary(from) {
                    from -= 1;
                }
                shown.push_str(&format!(
                    "  line {at} (from byte {from}): {}\n  first answer:  {}\n",
                    clip(&a[from..]),
                    clip(&b[from..]),
                ));
            }
        }
        panic!("backends diverge: {what}\n{shown}--- last operations (newest first):\n{recent:#?}");
    }

    /// Compares the answers `results` of every store (in store order) with
    /// the WAL's: `show(answer, fill)` must give the same text for each,
    /// where `fill` asks to show the WAL's answer as a JSONL store gives
    /// it (see [`Kind::reads_as_jsonl`]). Panics with every answer otherwise.
    fn compare<T>(&self, what: &str, results: &[Result<T>], show: impl Fn(&T, bool) -> String) {
        let shown: Vec<(Kind, String)> = self
            .stores
            .iter()
            .zip(results)
            .map(|((kind, _), r)| (*kind, key(r, |v| show(v, false))))
            .collect();
        for (i, (kind, answer)) in shown.iter().enumerate().skip(1) {
            let expected = if kind.reads_as_jsonl() {
                key(&results[0], |v| show(v, true))
            } else {
                shown[0].1.clone()
            };
            if *answer != expected {
                let mut answers = shown.clone();
                if expected != shown[0].1 {
                    answers.insert(1, (shown[0].0, format!("(as {}) {expected}", kind.name())));
                }
                self.fail(&format!("{what} ({} differs)", shown[i].0.name()), &answers);
            }
        }
    }

    /// Every session's revision in each store.
    fn revisions(&self) -> Vec<Vec<String>> {
        self.sessions
            .iter()
            .map(|s| {
                self.stores
                    .iter()
                    .map(|(_, store)| key(&store.revision(&s.id), |r| format!("{r:?}")))
                    .collect()
            })
            .collect()
    }

    /// Runs a read on every store, compares the answers, and checks that
    /// no revision moved.
    fn read<T>(
        &mut self,
        what: &str,
        op: impl Fn(&Store) -> Result<T>,
        show: impl Fn(&T, bool) -> String,
    ) -> Result<T> {
        self.read_with(what, op, None, show)
    }

    /// [`Differential::read`] for a list of events, compared as values
    /// (every field, the key order of `surfaceOp` included); the text form
    /// is built only to report a difference.
    fn read_events(
        &mut self,
        what: &str,
        op: impl Fn(&Store) -> Result<Vec<Event>>,
    ) -> Result<Vec<Event>> {
        self.read_with(
            what,
            op,
            Some(
                &|a: &Result<Vec<Event>>, b: &Result<Vec<Event>>, jsonl: bool| match (a, b) {
                    (Ok(a), Ok(b)) => same_events(a, b, jsonl),
                    (Err(a), Err(b)) => err_key(a) == err_key(b),
                    _ => false,
                },
            ),
            |e, jsonl| events_key(e, jsonl),
        )
    }

    fn read_with<T>(
        &mut self,
        what: &str,
        op: impl Fn(&Store) -> Result<T>,
        equal: Option<&SameAs<T>>,
        show: impl Fn(&T, bool) -> String,
    ) -> Result<T> {
        // Inside a check the revisions are compared once around all its
        // reads.
        let before = (!self.in_check).then(|| self.revisions());
        let mut results: Vec<Result<T>> = self.stores.iter().map(|(_, s)| op(s)).collect();
        match equal {
            Some(equal)
                if self.stores[1..]
                    .iter()
                    .zip(&results[1..])
                    .all(|((kind, _), r)| equal(&results[0], r, kind.reads_as_jsonl())) => {}
            _ => self.compare(what, &results, &show),
        }
        if let Some(before) = before {
            let after = self.revisions();
            if after != before {
                self.fail(
                    &format!("{what}: a read changed a revision"),
                    &[(Kind::Wal, format!("{before:?} -> {after:?}"))],
                );
            }
        }
        results.swap_remove(0)
    }

    /// Runs a mutation of session `session` on every store, compares the
    /// answers, and checks that its revisions moved together (and moved,
    /// when `expect` says so) and that no other session's moved. Returns
    /// the WAL's answer and whether the revisions moved.
    fn mutate<T>(
        &mut self,
        what: &str,
        session: usize,
        op: impl Fn(&Store) -> Result<T>,
        show: impl Fn(&T, bool) -> String,
        expect: impl Fn(&Result<T>) -> Option<bool>,
    ) -> (Result<T>, bool) {
        let before = self.revisions();
        let mut results: Vec<Result<T>> = self.stores.iter().map(|(_, s)| op(s)).collect();
        self.compare(what, &results, &show);
        let after = self.revisions();
        for (i, (x, y)) in before.iter().zip(&after).enumerate() {
            let moved: Vec<bool> = x.iter().zip(y).map(|(a, b)| a != b).collect();
            let expected = if i == session {
                expect(&results[0])
            } else {
                Some(false)
            };
            if moved.iter().any(|&m| m != moved[0]) || expected.is_some_and(|e| e != moved[0]) {
                let answers: Vec<(Kind, String)> = self
                    .stores
                    .iter()
                    .zip(x.iter().zip(y))
                    .map(|((kind, _), (a, b))| (*kind, format!("{a} -> {b}")))
                    .collect();
                self.fail(
                    &format!(
                        "{what}: revisions of {:?} moved {moved:?} (in store order), expected {expected:?}",
                        self.sessions[i].id
                    ),
                    &answers,
                );
            }
        }
        let moved = before[session][0] != after[session][0];
        (results.swap_remove(0), moved)
    }

    /// Applies one operation to both stores and compares the results.
    pub fn apply(&mut self, op: &DiffOp) {
        self.stats.ops += 1;
        self.log.push(format!("{op:?}"));
        match *op {
            DiffOp::Append { session, events } => self.append(session, events),
            DiffOp::Flush { session } => {
                let id = self.sessions[session].id.clone();
                // A cold session is opened (and repaired) by a flush.
                let (r, moved) = self.mutate(
                    &format!("flush {id:?}"),
                    session,
                    |s| s.flush(&id),
                    |n, _| format!("durable {n}"),
                    |_| None,
                );
                self.after_repair(session, r.is_ok() && moved);
            }
            DiffOp::Close { session } => {
                let id = self.sessions[session].id.clone();
                let _ = self.mutate(
                    &format!("close {id:?}"),
                    session,
                    |s| s.close(&id),
                    |(), _| "ok".into(),
                    |_| Some(false),
                );
                let s = &mut self.sessions[session];
                s.created = false;
                s.stale = s.on_disk;
            }
            DiffOp::Reopen => {
                self.reopen();
                self.check();
            }
            DiffOp::Tear { session, how } => self.tear(session, how),
            DiffOp::Recover { session, dry_run } => {
                let id = self.sessions[session].id.clone();
                let (r, moved) = self.mutate(
                    &format!("recover {id:?} dry_run={dry_run}"),
                    session,
                    |s| s.recover(&id, dry_run),
                    report_key,
                    |r| r.as_ref().ok().map(|r| r.committed),
                );
                if let Ok(r) = &r
                    && r.committed
                {
                    self.stats.closers += r.closers.len() as u64;
                }
                self.after_repair(session, r.is_ok() && moved);
            }
            DiffOp::Load { session } => {
                let id = self.sessions[session].id.clone();
                let (r, moved) = self.mutate(
                    &format!("load {id:?}"),
                    session,
                    |s| s.load(&id),
                    view_key,
                    |_| None,
                );
                self.after_repair(session, r.is_ok() && moved);
            }
            DiffOp::Delete { session } => {
                let id = self.sessions[session].id.clone();
                let (r, _) = self.mutate(
                    &format!("delete {id:?}"),
                    session,
                    |s| s.delete(&id),
                    |(), _| "ok".into(),
                    |_| None,
                );
                if r.is_ok() {
                    let s = &mut self.sessions[session];
                    s.seed = s.seed.wrapping_add(1);
                    let fresh = LogGen::new(s.seed, s.policy, s.generator.shapes);
                    let (stats, no_row_tags) = (s.generator.stats, s.generator.no_row_tags);
                    s.generator = LogGen {
                        stats,
                        no_row_tags,
                        ..fresh
                    };
                    s.created = false;
                    s.on_disk = false;
                    s.stale = false;
                    s.torn = false;
                }
            }
            DiffOp::Reject { session, how } => self.reject(session, how),
            DiffOp::ReadFrom { session, seq } => {
                let id = self.sessions[session].id.clone();
                self.stats.reads += 1;
                let _ = self.read_events(&format!("read_from {id:?} {seq}"), |s| {
                    s.read_from(&id, seq)
                });
            }
            DiffOp::Check => self.check(),
        }
    }

    fn after_repair(&mut self, session: usize, repaired: bool) {
        if repaired {
            self.stats.repairs += 1;
            self.sessions[session].stale = true;
            self.sessions[session].torn = false;
        }
    }

    /// Continues a session whose stored log moved on without the generator
    /// from what is stored: opening repairs a log a crash left open, in
    /// both stores alike.
    fn resync(&mut self, session: usize) {
        if !self.sessions[session].stale {
            return;
        }
        let id = self.sessions[session].id.clone();
        // Continue from what is stored: opening repairs a log a crash
        // left open, in both stores alike.
        let (r, moved) = self.mutate(
            &format!("resume {id:?}"),
            session,
            |s| s.resume(&id),
            |r: &Receipt, _| format!("{r:?}"),
            |_| None,
        );
        if moved {
            self.stats.repairs += 1;
            self.sessions[session].torn = false;
        }
        r.unwrap_or_else(|e| panic!("resume {id:?} failed on both: {e}"));
        let stored = self
            .read_events(&format!("read_from {id:?} 0 to resume"), |s| {
                s.read_from(&id, 0)
            })
            .unwrap_or_else(|e| panic!("read_from {id:?} 0 failed on both: {e}"));
        let s = &mut self.sessions[session];
        s.seed = s.seed.wrapping_add(1);
        s.generator = s.generator.resume(s.seed, &stored);
        s.stale = false;
        s.created = true;
    }

    fn reject(&mut self, session: usize, how: u8) {
        self.resync(session);
        let id = self.sessions[session].id.clone();
        let next = self.sessions[session].generator.next_seq();
        let turn = self.sessions[session].generator.turn;
        let event = |t: &str, seq: u64, data: &str| Event::new(t, seq, 1, data).expect("valid");
        let batch = match how % 3 {
            0 => vec![event("plugin/x", next + 1, "{}")],
            1 => vec![event("plugin/x", next.checked_sub(1).unwrap_or(3), "{}")],
            _ => vec![
                event("plugin/x", next, "{}"),
                event(
                    "step/end",
                    next + 1,
                    &format!(r#"{{"turn":{},"step":999}}"#, turn + 7),
                ),
            ],
        };
        let (r, _) = self.mutate(
            &format!("reject {id:?} {how}"),
            session,
            |s| s.append(&id, &batch),
            |r, _| format!("{r:?}"),
            |_| Some(false),
        );
        if r.is_ok() {
            panic!(
                "both stores accepted a batch they must refuse: {}",
                events_key(&batch, false)
            );
        }
    }

    fn append(&mut self, session: usize, events: usize) {
        let id = self.sessions[session].id.clone();
        if events == 0 {
            // A no-op that reports where appends continue.
            let _ = self.mutate(
                &format!("append {id:?} nothing"),
                session,
                |s| s.append(&id, &[]),
                |r, _| format!("{r:?}"),
                |_| Some(false),
            );
            return;
        }
        self.resync(session);
        if !self.sessions[session].created && !self.sessions[session].on_disk {
            let header = self.sessions[session].header.clone();
            let policy = self.sessions[session].policy;
            let (r, _) = self.mutate(
                &format!("create {id:?}"),
                session,
                |s| s.create_with_policy(header.clone(), policy),
                |(), _| "ok".into(),
                |_| Some(false),
            );
            r.unwrap_or_else(|e| panic!("create {id:?} failed on both: {e}"));
            self.sessions[session].created = true;
        }
        let batch = self.sessions[session].generator.batch(events);
        let n = batch.len() as u64;
        let (r, _) = self.mutate(
            &format!(
                "append {id:?} seqs {}..{}",
                batch[0].seq(),
                batch[0].seq() + n
            ),
            session,
            |s| s.append(&id, &batch),
            |r, _| format!("{r:?}"),
            |_| Some(true),
        );
        if let Err(e) = r {
            panic!(
                "a generated batch was refused by both stores: {e}\n{}",
                events_key(&batch, false)
            );
        }
        self.stats.batches += 1;
        self.stats.events += n;
        let s = &mut self.sessions[session];
        s.on_disk = true;
        s.created = true;
    }

    /// Drops every store without closing anything (a crash) and opens
    /// fresh ones over the same storage.
    pub fn reopen(&mut self) {
        self.stats.reopens += 1;
        self.drop_stores();
        self.stores = open_stores(
            &self.scratch.0,
            &self.kinds(),
            self.wal_options,
            &self.sqlite_options,
        );
        for s in &mut self.sessions {
            s.created = false;
            s.stale = s.on_disk;
        }
    }

    fn kinds(&self) -> Vec<Kind> {
        self.stores.iter().map(|(k, _)| *k).collect()
    }

    /// Drops the stores (their writer locks are released first), leaving
    /// placeholders.
    fn drop_stores(&mut self) {
        for (_, store) in &mut self.stores {
            drop(std::mem::replace(store, Store::in_memory()));
        }
    }

    fn tear(&mut self, session: usize, how: TornTail) {
        let id = self.sessions[session].id.clone();
        // The crash: every store dropped, then the damage, then fresh ones.
        self.drop_stores();
        let events = if self.sessions[session].on_disk && !self.sessions[session].torn {
            stored_events(&self.sqlite_path(), &id).len() as u64
        } else {
            0
        };
        // A log without records has nothing to tear.
        if events > 0 {
            self.stats.tears += 1;
            let synthetic = wal_synthetic_tail(&self.wal_dir(), &id, events);
            let jsonl = self.jsonl_kinds();
            let how = match how {
                // SQLite cannot cut a row short in a way a crash would; the
                // WAL's last record, if recovery wrote it, is the end of a
                // repair, which SQLite commits whole or not at all. A JSONL
                // line holding a packed row would lose every member with
                // it (a cut never falls inside a packed row).
                TornTail::CutLast(_)
                    if synthetic.0
                        || !last_row_is_scalar(&self.sqlite_path(), &id)
                        || jsonl.iter().any(|&c| {
                            JsonlFile::read(&self.jsonl_root(c), c, &id).last_line_is_packed()
                        }) =>
                {
                    TornTail::PartialNext
                }
                // A crash inside a repair leaves the WAL with some of its
                // closers (recovery redoes the repair: an interrupted
                // repair); SQLite commits a repair whole or not at all. Cut
                // before a partial repair, as if it never ran.
                TornTail::DropLast(k) => {
                    let mut keep = events.saturating_sub(u64::from(k));
                    while keep > 0 && synthetic.1.get(keep as usize - 1) == Some(&true) {
                        keep -= 1;
                    }
                    TornTail::DropLast(u8::try_from(events - keep).unwrap_or(u8::MAX))
                }
                other => other,
            };
            self.log.push(format!("  tear {id:?} as {how:?}"));
            tear_wal(&self.wal_dir(), &id, how, events);
            tear_sqlite(&self.sqlite_path(), &id, how, events);
            for c in jsonl {
                JsonlFile::read(&self.jsonl_root(c), c, &id).tear(how, events);
            }
            // Cutting at a record boundary leaves nothing torn behind.
            self.sessions[session].torn = !matches!(how, TornTail::DropLast(_));
        }
        self.reopen();
        self.check();
    }

    /// Compares everything a reader can see, for every session: `inspect`,
    /// `view`, `verify`, `read_from` at the [`Sweep`]'s seqs (every seq from
    /// 0 to length+1 by default), the revision (reads never move it), and
    /// `list`.
    pub fn check(&mut self) {
        self.stats.checks += 1;
        let before = self.revisions();
        self.in_check = true;
        for i in 0..self.sessions.len() {
            let id = self.sessions[i].id.clone();
            self.check_session(&id);
        }
        let _ = self.read(
            "list",
            |s| s.list(),
            |list, fill| {
                let mut rows: Vec<String> = list.iter().map(|s| summary_key(s, fill)).collect();
                rows.sort();
                rows.join("\n")
            },
        );
        self.in_check = false;
        let after = self.revisions();
        if after != before {
            self.fail(
                "check: a read (inspect, view, read_from or list) changed a revision",
                &[(Kind::Wal, format!("{before:?} -> {after:?}"))],
            );
        }
        self.count_packed();
    }

    fn check_session(&mut self, id: &str) {
        let inspected = self.read(&format!("inspect {id:?}"), |s| s.inspect(id), view_key);
        // `view` reads in place; it must show what `inspect` shows.
        let views: Vec<Result<crate::view::LogView>> =
            self.stores.iter().map(|(_, s)| s.view(id)).collect();
        let show_view = |v: &crate::view::LogView, fill: bool| {
            let events: Vec<Event> = v.iter().map(|e| e.to_event()).collect();
            format!(
                "header={} stored={} state={}\n{}",
                header_key(v.header(), fill),
                v.stored(),
                v.state(),
                events_key(&events, fill)
            )
        };
        self.compare(&format!("view {id:?}"), &views, show_view);
        let wal_shown = key(&views[0], |v| show_view(v, false));
        if let Ok(v) = &inspected {
            let from_inspect = format!(
                "header={} stored={} state={}\n{}",
                v.header.to_json(),
                v.stored,
                v.state,
                events_key(&v.events, false)
            );
            if from_inspect != wal_shown {
                self.fail(
                    &format!("view {id:?} differs from inspect (every backend alike)"),
                    &[(Kind::Wal, wal_shown), (Kind::Wal, from_inspect)],
                );
            }
        }
        let _ = self.read(
            &format!("verify {id:?}"),
            |s| s.verify(id),
            |r, _| {
                format!(
                    "state={} events={} turns={} cut={:?} closers={} problem={:?}",
                    r.state,
                    r.events,
                    r.turns,
                    r.cut.as_ref().map(|c| (c.seq, c.reason)),
                    r.closers,
                    r.problem
                )
            },
        );
        let stored = inspected.as_ref().map_or(0, |v| v.stored);
        let mut seqs = self.sweep.seqs(stored);
        if seqs.len() as u64 != stored + 2 {
            seqs.extend(packed_edges(&self.sqlite_path(), id, stored));
            for c in self.jsonl_kinds() {
                if let Some(file) = JsonlFile::read_as_is(&self.jsonl_root(c), c, id, true) {
                    seqs.extend(file.packed_edges(stored));
                }
            }
            seqs.sort_unstable();
            seqs.dedup();
        }
        for seq in seqs {
            self.stats.reads += 1;
            let _ = self.read_events(&format!("read_from {id:?} {seq}"), |s| s.read_from(id, seq));
        }
    }

    fn count_packed(&mut self) {
        let Ok(conn) = rusqlite::Connection::open(self.sqlite_path()) else {
            return;
        };
        let mut packed = [0; 3];
        for (i, tag) in TAGS.iter().enumerate() {
            packed[i] = conn
                .query_row(
                    "SELECT count(*) FROM events WHERE ignorable = 0 AND type = ?1",
                    [tag],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap_or(0) as u64;
        }
        // A packed row holds the seqs up to the next row's.
        // What the packed rows hold, as the codec decodes them.
        use crate::backend::sqlite::codec::{ROW_COLUMNS, RowIn, decode_row};
        let sizes: Vec<u64> = conn
            .prepare(&format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE ignorable = 0"
            ))
            .and_then(|mut stmt| {
                stmt.query_map([], RowIn::from_row)?
                    .collect::<rusqlite::Result<Vec<RowIn>>>()
            })
            .unwrap_or_default()
            .iter()
            .map(|row| decode_row(row).map_or(0, |m| m.len() as u64))
            .collect();
        let members: u64 = sizes.iter().sum();
        let largest = sizes.iter().copied().max().unwrap_or(0);
        self.stats.largest_row = self.stats.largest_row.max(largest);
        for (most, now) in self.stats.packed_rows.iter_mut().zip(packed) {
            *most = (*most).max(now);
        }
        self.stats.packed_members = self.stats.packed_members.max(members);
        for c in self.jsonl_kinds() {
            let mut rows = [0; 3];
            let mut held = 0;
            for s in &self.sessions {
                let root = self.jsonl_root(c);
                let Some(file) = JsonlFile::read_as_is(&root, c, &s.id, true) else {
                    continue;
                };
                let (r, h, largest) = file.packed();
                self.stats.jsonl_largest_row = self.stats.jsonl_largest_row.max(largest);
                for (a, b) in rows.iter_mut().zip(r) {
                    *a += b;
                }
                held += h;
            }
            for (most, now) in self.stats.jsonl_packed_rows.iter_mut().zip(rows) {
                *most = (*most).max(now);
            }
            self.stats.jsonl_packed_members = self.stats.jsonl_packed_members.max(held);
        }
    }

    /// The end of every run: compare; crash and compare; recover every
    /// session (alternating `recover` and `load`) and compare; append more
    /// to each; crash once more and compare. Returns the counts.
    pub fn finish(mut self) -> DiffStats {
        self.check();
        self.apply(&DiffOp::Reopen);
        for i in 0..self.sessions.len() {
            let op = if i % 2 == 0 {
                DiffOp::Recover {
                    session: i,
                    dry_run: false,
                }
            } else {
                DiffOp::Load { session: i }
            };
            self.apply(&op);
        }
        self.check();
        for i in 0..self.sessions.len() {
            let n = 1 + self.rng.below(40) as usize;
            self.apply(&DiffOp::Append {
                session: i,
                events: n,
            });
        }
        self.apply(&DiffOp::Reopen);
        for s in &self.sessions {
            self.stats.generated.add(&s.generator.stats);
        }
        self.stats
    }
}

fn open_stores(
    root: &Path,
    kinds: &[Kind],
    wal: StoreOptions,
    sqlite: &SqliteOptions,
) -> Vec<(Kind, Store)> {
    kinds
        .iter()
        .map(|&kind| {
            let store = match kind {
                Kind::Wal => {
                    Store::open_with_options(root.join("wal"), wal).expect("the WAL store opens")
                }
                Kind::Sqlite => Store::open_sqlite(
                    root.join("sessions.db"),
                    sqlite.clone(),
                    StoreOptions::default(),
                )
                .expect("the SQLite store opens"),
                Kind::Jsonl(c) => {
                    let dir = root.join(match c {
                        Compression::None => "jsonl-raw",
                        Compression::Zstd => "jsonl-zstd",
                    });
                    let backend = JsonlBackend::open(dir, c).expect("the JSONL store opens");
                    Store::with_backend(Arc::new(backend), wal)
                }
            };
            (kind, store)
        })
        .collect()
}

/// A JSONL transcript taken apart: the bytes kept as they are (the header
/// line; in zstd mode its frame), then one batch per later zstd frame (raw
/// mode: the whole body as one batch), each its frame's bytes and
/// plaintext lines.
struct JsonlFile {
    path: PathBuf,
    compression: Compression,
    head: Vec<u8>,
    /// (the frame's bytes, its lines without their newlines); raw: no
    /// frame bytes.
    batches: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
}

/// The complete lines of `plain`; a final fragment is dropped when
/// `torn` allows one.
fn split_lines(plain: &[u8], torn: bool) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = plain.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    let fragment = lines.pop().expect("split gives one piece at least");
    assert!(torn || fragment.is_empty(), "a batch ends a line");
    lines
}

fn members(line: &[u8]) -> Vec<Event> {
    crate::backend::jsonl::records::decode_line(line).expect("a stored JSONL line decodes")
}

/// One zstd frame holding `first`, then (after a flush: a block boundary)
/// `second`, cut inside what follows `first`: never before its first byte
/// nor after its last but one (`k` picks where, 0 to 255). Upstream's
/// reader of a torn final frame gets back exactly `first` (and at most a
/// part of `second` without its newline, if it was stored raw).
fn torn_frame(first: &[u8], second: &[u8], k: u8) -> Vec<u8> {
    use std::io::Write;
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("a zstd encoder");
    enc.include_checksum(true).expect("the checksum flag");
    enc.write_all(first).expect("compressing into memory");
    enc.flush().expect("a block boundary");
    let l1 = enc.get_ref().len();
    enc.write_all(second).expect("compressing into memory");
    let mut frame = enc.finish().expect("the frame ends");
    let rest = frame.len() - 4 - l1;
    assert!(rest >= 2, "a block follows the flush");
    frame.truncate(l1 + 1 + (rest - 2) * usize::from(k) / 255);
    frame
}

impl JsonlFile {
    /// The transcript of `id`, which must be there and must not be torn.
    fn read(root: &Path, compression: Compression, id: &str) -> JsonlFile {
        JsonlFile::read_as_is(root, compression, id, false).expect("the JSONL log exists")
    }

    /// The transcript of `id` if there is one; with `torn`, a torn tail is
    /// left out (a final fragment, a torn final frame).
    fn read_as_is(
        root: &Path,
        compression: Compression,
        id: &str,
        torn: bool,
    ) -> Option<JsonlFile> {
        let path = JsonlBackend::open(root, compression)
            .and_then(|b| b.find_log(id))
            .expect("the JSONL store opens")?;
        let bytes = std::fs::read(&path).expect("the JSONL log reads");
        let (head, batches) = match compression {
            Compression::None => {
                let end = bytes
                    .iter()
                    .position(|&b| b == b'\n')
                    .expect("a header line")
                    + 1;
                (
                    bytes[..end].to_vec(),
                    vec![(Vec::new(), split_lines(&bytes[end..], torn))],
                )
            }
            Compression::Zstd => {
                use crate::backend::jsonl::zstd::{decompress_frame, scan_frames};
                let scan = scan_frames(&bytes, usize::MAX).expect("the frames scan");
                assert!(torn || scan.torn_start.is_none(), "the log is not torn yet");
                let frames: Vec<Vec<u8>> = scan
                    .frames
                    .iter()
                    .map(|r| bytes[r.clone()].to_vec())
                    .collect();
                let batches = frames[1..]
                    .iter()
                    .map(|f| {
                        let plain = decompress_frame(f).expect("a frame decompresses");
                        (f.clone(), split_lines(&plain, false))
                    })
                    .collect();
                (frames[0].clone(), batches)
            }
        };
        Some(JsonlFile {
            path,
            compression,
            head,
            batches,
        })
    }

    fn last_line(&self) -> &[u8] {
        self.batches
            .iter()
            .rev()
            .find_map(|(_, lines)| lines.last())
            .expect("a log with events has lines")
    }

    fn last_line_is_packed(&self) -> bool {
        members(self.last_line()).len() > 1
    }

    /// Every seq within one of where a packed row starts or ends.
    fn packed_edges(&self, stored: u64) -> Vec<u64> {
        let mut edges = Vec::new();
        for (_, lines) in &self.batches {
            for line in lines {
                let m = members(line);
                if m.len() > 1 {
                    for at in [m[0].seq(), m[0].seq() + m.len() as u64] {
                        edges.extend((at.saturating_sub(1)..=at + 1).filter(|&s| s <= stored + 1));
                    }
                }
            }
        }
        edges
    }

    /// Packed rows (lines of more than one member) by tag, and the members
    /// they hold.
    fn packed(&self) -> ([u64; 3], u64, u64) {
        let mut rows = [0; 3];
        let mut held = 0;
        let mut largest = 0;
        for (_, lines) in &self.batches {
            for line in lines {
                let m = members(line).len() as u64;
                if m > 1 {
                    let text = String::from_utf8_lossy(&line[..line.len().min(40)]).into_owned();
                    if let Some(i) = TAGS.iter().position(|t| text.contains(&format!("\"{t}\""))) {
                        rows[i] += 1;
                    }
                    held += m;
                    largest = largest.max(m);
                }
            }
        }
        (rows, held, largest)
    }

    fn write(&self, body: &[u8]) {
        let mut bytes = self.head.clone();
        bytes.extend_from_slice(body);
        std::fs::write(&self.path, bytes).expect("the JSONL log is writable");
    }

    /// The file's bytes after the head, with the last batch replaced by
    /// `last` (raw: `last` is its plaintext; zstd: its frame bytes).
    fn with_last(&self, last: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        let n = self.batches.len();
        if self.compression == Compression::Zstd {
            for (frame, _) in &self.batches[..n - 1] {
                body.extend_from_slice(frame);
            }
        }
        body.extend_from_slice(last);
        body
    }

    fn last_plain(&self, lines: usize) -> Vec<u8> {
        let (_, last) = self.batches.last().expect("a batch");
        let mut out = Vec::new();
        for line in &last[..lines] {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
        out
    }

    /// Leaves a torn tail in this log of `events` events.
    fn tear(&self, how: TornTail, events: u64) {
        let last_lines = self.batches.last().map_or(0, |(_, l)| l.len());
        let mut line = self.last_line().to_vec();
        line.push(b'\n');
        match (how, self.compression) {
            (TornTail::PartialNext, Compression::None) => {
                // Half of a copy of the last line, without its newline.
                let mut body = self.last_plain(last_lines);
                body.extend_from_slice(&line[..(line.len() - 1).div_ceil(2)]);
                self.write(&self.with_last(&body));
            }
            (TornTail::PartialNext, Compression::Zstd) => {
                // Alternately: a torn frame of a copy of the last line after
                // the last frame (nothing to recover), or the last frame
                // itself torn after all its lines (every one recovered).
                let (frame, last) = self.batches.last().expect("a batch");
                let body = if events.is_multiple_of(2) {
                    let mut body = self.with_last(frame);
                    body.extend_from_slice(&torn_frame(&[], &line, 128));
                    body
                } else {
                    self.with_last(&torn_frame(&self.last_plain(last.len()), &line, 128))
                };
                self.write(&body);
            }
            (TornTail::CutLast(k), Compression::None) => {
                let mut body = self.last_plain(last_lines - 1);
                let len = line.len() - 1;
                body.extend_from_slice(&line[..1 + (len - 1) * usize::from(k) / 255]);
                self.write(&self.with_last(&body));
            }
            (TornTail::CutLast(k), Compression::Zstd) => {
                let before = self.last_plain(last_lines - 1);
                self.write(&self.with_last(&torn_frame(&before, &line, k)));
            }
            (TornTail::DropLast(k), _) => {
                let keep = events - u64::from(k).min(events);
                let mut body = Vec::new();
                for (frame, lines) in &self.batches {
                    let mut plain = Vec::new();
                    let mut whole = true;
                    for line in lines {
                        let m = members(line);
                        let first = m[0].seq();
                        if first >= keep {
                            whole = false;
                            break;
                        }
                        if first + m.len() as u64 > keep {
                            // A packed row across the cut: its kept members,
                            // packed as a batch of them would be.
                            let kept: Vec<Event> =
                                m.into_iter().filter(|e| e.seq() < keep).collect();
                            plain.extend_from_slice(&crate::backend::jsonl::records::encode_batch(
                                &kept, true,
                            ));
                            whole = false;
                            break;
                        }
                        plain.extend_from_slice(line);
                        plain.push(b'\n');
                    }
                    match self.compression {
                        Compression::None => body.extend_from_slice(&plain),
                        Compression::Zstd if whole => body.extend_from_slice(frame),
                        Compression::Zstd if !plain.is_empty() => body.extend_from_slice(
                            &crate::backend::jsonl::zstd::compress_frame(&plain),
                        ),
                        Compression::Zstd => {}
                    }
                    if !whole {
                        break;
                    }
                }
                self.write(&body);
            }
        }
    }
}

/// Of the WAL log of `id`: whether its last record was written by a
/// repair, and for each record whether cutting the log right after it
/// would leave part of a repair (a synthetic closer other than the final
/// `turn/end`) at the end.
fn wal_synthetic_tail(root: &Path, id: &str, events: u64) -> (bool, Vec<bool>) {
    use crate::backend::wal::format::{TRAILER_LEN, parse_head};
    use crate::event::EventKind;
    let path = WalBackend::open(root).expect("the WAL store").log_path(id);
    let bytes = std::fs::read(&path).expect("the WAL log");
    let mut heads = Vec::new();
    let mut end = bytes.len();
    // Walk back over the records: each ends with its length.
    for _ in 0..events {
        let len =
            u32::from_le_bytes(bytes[end - TRAILER_LEN..end].try_into().expect("4 bytes")) as usize;
        let head = parse_head(&bytes[end - len..end]).expect("a valid record");
        heads.push(head);
        end -= len;
    }
    heads.reverse();
    let last = heads.last().is_some_and(|h| h.synthetic());
    let partial = heads
        .iter()
        .map(|h| h.synthetic() && h.event_kind() != EventKind::TurnEnd)
        .collect();
    (last, partial)
}

/// Every seq within one of where a packed row of `id` starts or ends (up
/// to `stored + 1`).
fn packed_edges(db: &Path, id: &str, stored: u64) -> Vec<u64> {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return Vec::new();
    };
    let rows: Vec<(i64, bool)> = conn
        .prepare("SELECT seq, ignorable IS 0 FROM events WHERE session_id = ?1 ORDER BY seq")
        .and_then(|mut stmt| {
            stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default();
    let mut edges = Vec::new();
    for (i, &(seq, packed)) in rows.iter().enumerate() {
        if !packed {
            continue;
        }
        let end = rows.get(i + 1).map_or(stored as i64, |r| r.0);
        for at in [seq, end] {
            edges.extend((at - 1..=at + 1).filter(|&s| s >= 0 && s as u64 <= stored + 1));
        }
    }
    edges.into_iter().map(|s| s as u64).collect()
}

fn last_row_is_scalar(db: &Path, id: &str) -> bool {
    let conn = rusqlite::Connection::open(db).expect("the database opens");
    conn.query_row(
        "SELECT ignorable IS NOT 0 FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
        [id],
        |r| r.get::<_, bool>(0),
    )
    .unwrap_or(false)
}

/// The stored events of `id`, read through a fresh SQLite store.
fn stored_events(db: &Path, id: &str) -> Vec<Event> {
    Store::open_sqlite(db, SqliteOptions::default(), StoreOptions::default())
        .and_then(|s| s.read_from(id, 0))
        .expect("the session reads")
}

/// Leaves a torn tail in the WAL log of `id`, which holds `events` events.
fn tear_wal(root: &Path, id: &str, how: TornTail, events: u64) {
    let path = WalBackend::open(root).expect("the WAL store").log_path(id);
    let mut bytes = std::fs::read(&path).expect("the WAL log");
    let n = bytes.len();
    // Every record ends with its own length.
    let record_len =
        |end: usize| u32::from_le_bytes(bytes[end - 4..end].try_into().expect("4 bytes")) as usize;
    let last = record_len(n);
    match how {
        TornTail::PartialNext => {
            let half = bytes[n - last..n - last / 2].to_vec();
            bytes.extend_from_slice(&half);
        }
        TornTail::CutLast(_) => bytes.truncate(n - last / 2),
        TornTail::DropLast(k) => {
            let mut end = n;
            for _ in 0..u64::from(k).min(events) {
                end -= record_len(end);
            }
            bytes.truncate(end);
        }
    }
    std::fs::write(&path, bytes).expect("the WAL log is writable");
}

/// Leaves a torn tail in the SQLite rows of `id`, which holds `events`
/// events.
fn tear_sqlite(db: &Path, id: &str, how: TornTail, events: u64) {
    let conn = rusqlite::Connection::open(db).expect("the database opens");
    let last: i64 = conn
        .query_row(
            "SELECT max(seq) FROM events WHERE session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("the session has rows");
    match how {
        TornTail::PartialNext => {
            // Rows hold whole events, so the next seq is one past the
            // last row's members.
            let next = (events as i64).max(last + 1);
            conn.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES (?1, ?2, 'assistant/chunk', ?3, ?4)",
                rusqlite::params![id, next, 7, r#"{"turn":1,"step":1,"chunk":{"type":"text-de"#],
            )
            .expect("the torn row inserts");
        }
        TornTail::CutLast(k) => {
            let data: rusqlite::types::Value = conn
                .query_row(
                    "SELECT data FROM events WHERE session_id = ?1 AND seq = ?2",
                    rusqlite::params![id, last],
                    |r| r.get(0),
                )
                .expect("the last row");
            let keep = |len: usize| len.saturating_sub(1) * usize::from(k) / 255;
            let cut = match data {
                rusqlite::types::Value::Text(t) => {
                    let mut end = keep(t.len());
                    while !t.is_char_boundary(end) {
                        end -= 1;
                    }
                    rusqlite::types::Value::Text(t[..end].to_owned())
                }
                rusqlite::types::Value::Blob(b) => {
                    rusqlite::types::Value::Blob(b[..keep(b.len())].to_vec())
                }
                other => other,
            };
            conn.execute(
                "UPDATE events SET data = ?3 WHERE session_id = ?1 AND seq = ?2",
                rusqlite::params![id, last, cut],
            )
            .expect("the torn row updates");
        }
        TornTail::DropLast(k) => {
            use crate::backend::sqlite::codec::{self, Data, ROW_COLUMNS, RowIn};
            let keep = events - u64::from(k).min(events);
            // The row that holds seq `keep - 1`, if it is packed and runs
            // past the cut, is replaced by rows of its kept members.
            let straddling: Option<RowIn> = conn
                .query_row(
                    &format!(
                        "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq < ?2 \
                         ORDER BY seq DESC LIMIT 1"
                    ),
                    rusqlite::params![id, keep as i64],
                    RowIn::from_row,
                )
                .ok();
            let mut from = keep as i64;
            let mut reinsert = Vec::new();
            if let Some(row) = straddling.filter(RowIn::is_packed) {
                let members = codec::decode_row(&row).expect("a stored packed row decodes");
                let kept: Vec<Event> = members.into_iter().filter(|e| e.seq() < keep).collect();
                from = row.seq_key();
                reinsert = codec::encode_batch(&kept).expect("kept members encode");
            }
            conn.execute(
                "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
                rusqlite::params![id, from],
            )
            .expect("the rows delete");
            for row in reinsert {
                let data = match row.data {
                    Data::Text(t) => rusqlite::types::Value::Text(t),
                    Data::Blob(b) => rusqlite::types::Value::Blob(b),
                };
                conn.execute(
                    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, \
                     surface_op, ignorable) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    rusqlite::params![
                        id,
                        row.seq as i64,
                        row.event_type,
                        row.time,
                        data,
                        row.source_event_seqs,
                        row.surface_op,
                        row.ignorable
                    ],
                )
                .expect("the kept members insert");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The fuzz entry
// ---------------------------------------------------------------------------

/// Decodes an operation sequence from arbitrary bytes (at most `limit` ops)
/// for `sessions` sessions. Every byte string decodes to something.
pub fn decode(bytes: &[u8], sessions: usize, limit: usize) -> Vec<DiffOp> {
    let mut ops = Vec::new();
    let mut it = bytes.iter().copied();
    let arg = |it: &mut dyn Iterator<Item = u8>| it.next().unwrap_or(0);
    while ops.len() < limit {
        let Some(code) = it.next() else { break };
        let session = (code >> 4) as usize % sessions;
        let op = match code % 16 {
            0..=6 => DiffOp::Append {
                session,
                events: 1 + arg(&mut it) as usize % 48,
            },
            7 => DiffOp::Flush { session },
            8 => DiffOp::Close { session },
            9 => DiffOp::Reopen,
            10 => DiffOp::Tear {
                session,
                how: match arg(&mut it) {
                    a if a % 4 == 0 => TornTail::PartialNext,
                    a if a % 4 == 1 => TornTail::CutLast(a),
                    a => TornTail::DropLast(a / 4),
                },
            },
            11 => DiffOp::Recover {
                session,
                dry_run: arg(&mut it) % 2 == 0,
            },
            12 => DiffOp::Load { session },
            13 => DiffOp::Delete { session },
            14 => DiffOp::ReadFrom {
                session,
                seq: u64::from(arg(&mut it)),
            },
            _ => match arg(&mut it) {
                a if a < 64 => DiffOp::Append { session, events: 0 },
                a if a < 160 => DiffOp::Reject { session, how: a },
                _ => DiffOp::Check,
            },
        };
        ops.push(op);
    }
    ops
}

/// Encodes ops the way [`decode`] reads them (for seed inputs). Panics on
/// an op outside what the encoding carries: a session above 15, an append
/// of more than 48 events, `DropLast` of more than 63, a read past seq 255,
/// a `Reject` whose `how` is outside 64..160.
pub fn encode(ops: &[DiffOp]) -> Vec<u8> {
    let mut out = Vec::new();
    let code = |session: usize, op: u8| {
        assert!(session < 16, "session {session} does not fit");
        (session as u8) << 4 | op
    };
    for op in ops {
        match *op {
            DiffOp::Append { session, events: 0 } => out.extend([code(session, 15), 0]),
            DiffOp::Append { session, events } => {
                assert!(events <= 48, "an append of {events} events does not fit");
                out.extend([code(session, 0), events as u8 - 1]);
            }
            DiffOp::Flush { session } => out.push(code(session, 7)),
            DiffOp::Close { session } => out.push(code(session, 8)),
            DiffOp::Reopen => out.push(9),
            DiffOp::Tear { session, how } => {
                let arg = match how {
                    TornTail::PartialNext => 0,
                    TornTail::CutLast(k) => {
                        assert_eq!(k % 4, 1, "CutLast({k}) does not fit: k % 4 must be 1");
                        k
                    }
                    TornTail::DropLast(n) => {
                        assert!(n <= 63, "DropLast({n}) does not fit");
                        n * 4 + 2
                    }
                };
                out.extend([code(session, 10), arg]);
            }
            DiffOp::Recover { session, dry_run } => {
                out.extend([code(session, 11), u8::from(!dry_run)]);
            }
            DiffOp::Load { session } => out.push(code(session, 12)),
            DiffOp::Delete { session } => out.push(code(session, 13)),
            DiffOp::ReadFrom { session, seq } => {
                let seq = u8::try_from(seq).expect("a read from seq 0..=255");
                out.extend([code(session, 14), seq]);
            }
            DiffOp::Reject { session, how } => {
                assert!((64..160).contains(&how), "Reject how {how} does not fit");
                out.extend([code(session, 15), how]);
            }
            DiffOp::Check => out.extend([15, 255]),
        }
    }
    out
}

/// The fuzz entry for the differential target: the first byte picks the
/// number of sessions (1 or 2) and their policies, the second the seed of
/// the generated content and (by its value mod 3) the JSONL store taking
/// part: none, raw or zstd; the rest decodes to up to 24 operations, run
/// against a WAL store, a SQLite store and that JSONL store (in `/dev/shm`
/// when it exists),
/// then [`Differential::finish`], reading at most 24 seqs per session at a
/// check ([`Sweep::AtMost`]). Panics on a divergence.
pub fn fuzz_differential(bytes: &[u8]) {
    let head = bytes.first().copied().unwrap_or(0);
    let seed = bytes.get(1).copied().unwrap_or(0);
    let rest = bytes.get(2..).unwrap_or(&[]);
    let policy = |bit: u8| {
        if head & bit == 0 {
            Policy::Strict
        } else {
            Policy::Lenient
        }
    };
    let policies: Vec<Policy> = if head & 1 == 0 {
        vec![policy(2)]
    } else {
        vec![policy(2), policy(4)]
    };
    let ops = decode(rest, policies.len(), 24);
    let mut run = Differential::new(&Config {
        seed: u64::from(seed),
        policies,
        shapes: Shapes {
            lean: true,
            ..Shapes::default()
        },
        durable: false,
        sweep: Sweep::AtMost(24),
        // A RAM file system where there is one: 3 to 4 times the runs.
        scratch: Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()),
        // The seed picks the JSONL store: none (so the generator still
        // names events like packed tags), raw or zstd.
        jsonl: match seed % 3 {
            0 => Vec::new(),
            1 => vec![Compression::None],
            _ => vec![Compression::Zstd],
        },
    });
    for op in &ops {
        run.apply(op);
    }
    run.finish();
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
                };
                let mut g = LogGen::new(seed, policy, shapes);
                if seed % 2 == 1 {
                    g = g.without_row_tags();
                }
                let log = g.batch(600);
                Tracker::new(policy).accept_batch(&log).unwrap();
                // JSONL's read-time normalization leaves every generated
                // event as it is.
                let normalized = crate::backend::jsonl::normalize::normalize(&log, "s").unwrap();
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

    #[test]
    fn every_byte_string_decodes() {
        assert!(decode(&[], 2, 32).is_empty());
        let ops = decode(
            &[
                0x10, 5, 7, 9, 10, 1, 10, 0, 10, 30, 11, 0, 12, 13, 14, 200, 15, 0, 15, 64, 15,
                200, 15,
            ],
            2,
            32,
        );
        assert_eq!(
            ops,
            [
                DiffOp::Append {
                    session: 1,
                    events: 6
                },
                DiffOp::Flush { session: 0 },
                DiffOp::Reopen,
                DiffOp::Tear {
                    session: 0,
                    how: TornTail::CutLast(1)
                },
                DiffOp::Tear {
                    session: 0,
                    how: TornTail::PartialNext
                },
                DiffOp::Tear {
                    session: 0,
                    how: TornTail::DropLast(7)
                },
                DiffOp::Recover {
                    session: 0,
                    dry_run: true
                },
                DiffOp::Load { session: 0 },
                DiffOp::Delete { session: 0 },
                DiffOp::ReadFrom {
                    session: 0,
                    seq: 200
                },
                DiffOp::Append {
                    session: 0,
                    events: 0
                },
                DiffOp::Reject {
                    session: 0,
                    how: 64
                },
                DiffOp::Check,
                DiffOp::Append {
                    session: 0,
                    events: 0
                },
            ]
        );
        // At most `limit` ops.
        assert_eq!(decode(&[9; 100], 1, 32).len(), 32);
        // The encoding round-trips.
        let every = [
            DiffOp::Append {
                session: 1,
                events: 48,
            },
            DiffOp::Append {
                session: 0,
                events: 1,
            },
            DiffOp::Append {
                session: 2,
                events: 0,
            },
            DiffOp::Flush { session: 1 },
            DiffOp::Close { session: 2 },
            DiffOp::Reopen,
            DiffOp::Tear {
                session: 0,
                how: TornTail::PartialNext,
            },
            DiffOp::Tear {
                session: 1,
                how: TornTail::CutLast(129),
            },
            DiffOp::Tear {
                session: 2,
                how: TornTail::DropLast(63),
            },
            DiffOp::Tear {
                session: 2,
                how: TornTail::DropLast(0),
            },
            DiffOp::Recover {
                session: 0,
                dry_run: true,
            },
            DiffOp::Recover {
                session: 1,
                dry_run: false,
            },
            DiffOp::Load { session: 2 },
            DiffOp::Delete { session: 1 },
            DiffOp::ReadFrom {
                session: 0,
                seq: 255,
            },
            DiffOp::Reject {
                session: 1,
                how: 64,
            },
            DiffOp::Reject {
                session: 2,
                how: 159,
            },
            DiffOp::Check,
        ];
        assert_eq!(decode(&encode(&every), 3, 64), every);
    }

    #[test]
    fn sweeps() {
        assert_eq!(Sweep::Every.seqs(3), [0, 1, 2, 3, 4]);
        assert_eq!(Sweep::AtMost(64).seqs(62), (0..64).collect::<Vec<_>>());
        let sampled = Sweep::AtMost(20).seqs(1000);
        assert_eq!(
            sampled,
            [
                0, 1, 2, 3, 4, 5, 6, 7, 205, 402, 599, 796, 994, 995, 996, 997, 998, 999, 1000,
                1001
            ]
        );
    }
}
