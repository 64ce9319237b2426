//! Valid event batches for a crash workload, generated step by step from a
//! seed: turns with user messages, steps, streamed chunks, assistant messages
//! that request tools, recorded calls and their results, and now and then a
//! payload large enough to span several sectors.

use crate::event::{Event, EventKind};

/// A small deterministic generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Where one session's generated log stands.
#[derive(Debug, Clone)]
pub struct Generator {
    seq: u64,
    time: i64,
    turn: u64,
    in_turn: bool,
    step: Option<u64>,
    next_step: u64,
    /// Tool calls requested by the open step's assistant message, not yet
    /// recorded as started.
    requested: Vec<String>,
    /// Recorded calls of the open step without a result.
    called: Vec<String>,
}

impl Generator {
    /// A generator for an empty session.
    pub fn new() -> Generator {
        Generator {
            seq: 0,
            time: 1_000,
            turn: 0,
            in_turn: false,
            step: None,
            next_step: 1,
            requested: Vec::new(),
            called: Vec::new(),
        }
    }

    /// A generator continuing a balanced log (as recovery leaves it).
    pub fn resume(log: &[Event]) -> Generator {
        let mut g = Generator::new();
        g.seq = log.len() as u64;
        g.time = log.last().map_or(1_000, Event::time);
        g.turn = log
            .iter()
            .filter(|e| e.kind() == EventKind::TurnStart)
            .count() as u64;
        g
    }

    /// The next `n` events (at least one).
    pub fn batch(&mut self, rng: &mut Rng, n: usize) -> Vec<Event> {
        (0..n.max(1)).map(|_| self.next_event(rng)).collect()
    }

    fn emit(&mut self, event_type: &str, data: String) -> Event {
        self.time += 1;
        let event =
            Event::new(event_type, self.seq, self.time, &data).expect("generated events are valid");
        self.seq += 1;
        event
    }

    fn next_event(&mut self, rng: &mut Rng) -> Event {
        let t = self.turn;
        if !self.in_turn {
            self.turn += 1;
            self.in_turn = true;
            self.next_step = 1;
            return self.emit("turn/start", format!(r#"{{"turn":{}}}"#, self.turn));
        }
        let Some(step) = self.step else {
            return match rng.below(4) {
                0 => self.emit(
                    "user/message",
                    format!(r#"{{"id":"u{t}-{}","role":"user","content":[{{"type":"text","text":"go \u00e9"}}]}}"#, self.seq),
                ),
                1 if self.next_step > 1 => {
                    self.in_turn = false;
                    self.emit("turn/end", format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#))
                }
                _ => {
                    let s = self.next_step;
                    self.step = Some(s);
                    self.next_step += 1;
                    self.emit("step/start", format!(r#"{{"turn":{t},"step":{s}}}"#))
                }
            };
        };
        match rng.below(10) {
            0..=4 => {
                let text = "z".repeat(rng.below(180) as usize);
                self.emit(
                    "assistant/chunk",
                    format!(r#"{{"turn":{t},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"{text}\"\n"}}}}"#),
                )
            }
            5 if self.requested.is_empty() && self.called.is_empty() => {
                let ids: Vec<String> = (0..1 + rng.below(3)).map(|i| format!("c{t}-{step}-{i}")).collect();
                let blocks: Vec<String> = ids
                    .iter()
                    .map(|id| format!(r#"{{"type":"tool-call","id":"{id}","name":"run","arguments":"{{}}"}}"#))
                    .collect();
                self.requested = ids;
                self.emit(
                    "assistant/message",
                    format!(r#"{{"turn":{t},"step":{step},"message":{{"role":"assistant","content":[{}]}}}}"#, blocks.join(",")),
                )
            }
            6 | 7 if !self.requested.is_empty() => {
                let id = self.requested.remove(0);
                self.called.push(id.clone());
                self.emit("tool/call", format!(r#"{{"turn":{t},"step":{step},"callId":"{id}","name":"run","arguments":"{{}}"}}"#))
            }
            6..=8 if !self.called.is_empty() => {
                let id = self.called.remove(0);
                // Now and then a result larger than a 4 KiB sector.
                let body = "r".repeat(if rng.below(4) == 0 { 9000 } else { rng.below(300) as usize });
                self.emit(
                    "tool/result",
                    format!(r#"{{"turn":{t},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{body}"}}]}}]}}}}"#),
                )
            }
            9 => {
                self.step = None;
                self.requested.clear();
                self.called.clear();
                self.emit("step/end", format!(r#"{{"turn":{t},"step":{step}}}"#))
            }
            _ => self.emit(
                "assistant/chunk",
                format!(r#"{{"turn":{t},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"x"}}}}"#),
            ),
        }
    }
}

impl Default for Generator {
    fn default() -> Self {
        Generator::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, Tracker};

    #[test]
    fn generated_logs_obey_the_contract() {
        for seed in 0..50 {
            let mut rng = Rng::new(seed);
            let mut g = Generator::new();
            let log = g.batch(&mut rng, 400);
            Tracker::new(Policy::Strict).accept_batch(&log).unwrap();
            let mut resumed = Generator::resume(&[]);
            resumed.batch(&mut rng, 3);
        }
    }
}
