//! Valid event batches for a crash workload, generated step by step from a
//! seed: turns with user messages, steps, streamed chunks, assistant messages
//! that request tools, recorded calls and their results, and now and then a
//! payload large enough to span several sectors.

use std::collections::VecDeque;

use crate::workload::realistic::Realistic;
use crate::workload::{TurnState, tool_call_blocks};
use turnwal::event::Event;
use turnwal::rng::Rng;

/// Where one session's generated log stands: the shared
/// [`TurnState`], with the crash lab's own choices of what comes next.
///
/// Two workloads: the synthetic one ([`Generator::new`]: every shape the
/// contract allows, in small random steps, with a few payloads that span
/// sectors) and the realistic one ([`Generator::realistic`]: whole turns of
/// [`crate::workload::realistic`], nine events in ten streamed deltas that
/// pack into chunk runs, as harness sessions are).
#[derive(Debug, Clone)]
pub struct Generator {
    state: TurnState,
    /// The realistic session, and the events of its turn not yet handed out.
    realistic: Option<(Realistic, VecDeque<Event>)>,
}

impl Generator {
    /// A generator of the synthetic workload for an empty session.
    pub fn new() -> Generator {
        Generator {
            state: TurnState::new(1_000),
            realistic: None,
        }
    }

    /// A generator of realistic sessions for an empty session.
    pub fn realistic(seed: u64) -> Generator {
        Generator {
            state: TurnState::new(1_000),
            realistic: Some((Realistic::new(seed), VecDeque::new())),
        }
    }

    /// A generator continuing `log` (seqs from 0): a balanced log, as
    /// recovery leaves it, or one that ends inside an open turn, which the
    /// generator then continues (its open step, requested calls and calls
    /// without a result included).
    pub fn resume(log: &[Event]) -> Generator {
        Generator {
            state: TurnState::resume(1_000, log),
            realistic: None,
        }
    }

    /// [`Generator::resume`] in this generator's workload: a realistic
    /// session continues with realistic turns (an open turn it resumes in
    /// is finished by the synthetic steps first).
    pub fn resume_like(&self, log: &[Event]) -> Generator {
        let mut resumed = Generator::resume(log);
        resumed.realistic = self
            .realistic
            .as_ref()
            .map(|(session, _)| (session.clone(), VecDeque::new()));
        resumed
    }

    /// The next `n` events (at least one).
    pub fn batch(&mut self, rng: &mut Rng, n: usize) -> Vec<Event> {
        (0..n.max(1)).map(|_| self.next(rng)).collect()
    }

    fn next(&mut self, rng: &mut Rng) -> Event {
        let Some((session, pending)) = self.realistic.as_mut() else {
            return self.next_event(rng);
        };
        if let Some(event) = pending.pop_front() {
            return event;
        }
        if self.state.in_turn() {
            return self.next_event(rng);
        }
        // A whole realistic turn from where the log stands.
        let mut next = session.clone().continuing(self.state.clone());
        pending.extend(next.next_turn());
        self.state = next.state().clone();
        *session = next;
        pending.pop_front().expect("a turn has events")
    }

    fn emit(&mut self, event_type: &str, data: String) -> Event {
        self.state.set_time(self.state.time() + 1);
        self.state.event(event_type, &data)
    }

    fn next_event(&mut self, rng: &mut Rng) -> Event {
        if !self.state.in_turn() {
            let turn = self.state.start_turn();
            return self.emit("turn/start", format!(r#"{{"turn":{turn}}}"#));
        }
        let t = self.state.turn();
        let Some(step) = self.state.step() else {
            return match rng.below(4) {
                0 => {
                    let seq = self.state.seq();
                    self.emit(
                        "user/message",
                        format!(r#"{{"id":"u{t}-{seq}","role":"user","content":[{{"type":"text","text":"go \u00e9"}}]}}"#),
                    )
                }
                1 if self.state.next_step() > 1 => {
                    self.state.end_turn();
                    self.emit(
                        "turn/end",
                        format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
                    )
                }
                _ => {
                    let s = self.state.start_step();
                    self.emit("step/start", format!(r#"{{"turn":{t},"step":{s}}}"#))
                }
            };
        };
        let idle = self.state.requested().is_empty() && self.state.called().is_empty();
        match rng.below(10) {
            0..=4 => {
                let text = "z".repeat(rng.below(180) as usize);
                self.emit(
                    "assistant/chunk",
                    format!(r#"{{"turn":{t},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"{text}\"\n"}}}}"#),
                )
            }
            5 if idle => {
                let ids: Vec<String> = (0..1 + rng.below(3)).map(|i| format!("c{t}-{step}-{i}")).collect();
                let blocks = tool_call_blocks(&ids, "run");
                self.state.request(ids);
                self.emit(
                    "assistant/message",
                    format!(r#"{{"turn":{t},"step":{step},"message":{{"role":"assistant","content":[{blocks}]}}}}"#),
                )
            }
            6 | 7 if !self.state.requested().is_empty() => {
                let id = self.state.call().expect("a call was requested");
                self.emit("tool/call", format!(r#"{{"turn":{t},"step":{step},"callId":"{id}","name":"run","arguments":"{{}}"}}"#))
            }
            6..=8 if !self.state.called().is_empty() => {
                let (id, _) = self.state.answer().expect("a call was recorded");
                // Now and then a result larger than a 4 KiB sector.
                let body = "r".repeat(if rng.below(4) == 0 { 9000 } else { rng.below(300) as usize });
                self.emit(
                    "tool/result",
                    format!(r#"{{"turn":{t},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{body}"}}]}}]}}}}"#),
                )
            }
            9 => {
                self.state.end_step();
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
    use turnwal::{Policy, Tracker};

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

    #[test]
    fn realistic_sessions_obey_the_contract_and_resume_in_kind() {
        let mut rng = Rng::new(3);
        let mut g = Generator::realistic(11);
        let log = g.batch(&mut rng, 3_000);
        Tracker::new(Policy::Strict).accept_batch(&log).unwrap();
        let chunks = log
            .iter()
            .filter(|e| e.event_type() == "assistant/chunk")
            .count();
        assert!(
            chunks * 10 > log.len() * 8,
            "{chunks} chunks of {}",
            log.len()
        );
        for cut in [0, 1, 57, 1_000, 2_999] {
            let more = g.resume_like(&log[..cut]).batch(&mut rng, 2_000);
            assert_eq!(more[0].seq(), cut as u64);
            let mut tracker = Tracker::new(Policy::Strict);
            tracker.accept_batch(&log[..cut]).unwrap();
            tracker
                .accept_batch(&more)
                .unwrap_or_else(|v| panic!("cut {cut}: {v:?}"));
            // Once the open turn is finished, the turns are realistic again.
            let later = more
                .iter()
                .filter(|e| e.event_type() == "assistant/chunk")
                .count();
            assert!(later * 10 > more.len() * 7, "cut {cut}: {later} chunks");
        }
    }

    #[test]
    fn resume_continues_an_open_turn() {
        let mut rng = Rng::new(9);
        let log = Generator::new().batch(&mut rng, 300);
        let mut open = 0;
        for cut in 0..=log.len() {
            let mut tracker = Tracker::new(Policy::Strict);
            tracker.accept_batch(&log[..cut]).unwrap();
            open += usize::from(tracker.in_turn());
            let more = Generator::resume(&log[..cut]).batch(&mut rng, 40);
            assert_eq!(more[0].seq(), cut as u64);
            if tracker.in_turn() {
                assert_ne!(more[0].event_type(), "turn/start", "cut {cut}");
            }
            tracker
                .accept_batch(&more)
                .unwrap_or_else(|v| panic!("cut {cut}: {v:?}"));
        }
        assert!(open > 200, "{open} cuts inside a turn");
    }
}
