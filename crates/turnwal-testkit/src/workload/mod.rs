//! The turn/step/tool-call state machine every event generator shares: the
//! bench's workload ([`turnwal_cli::bench::workload`]), the crash lab's
//! ([`crate::crashlab::workload`]) and the differential lab's log generator.
//! Each generator chooses its own content (what comes next, its payloads,
//! its clock); [`TurnState`] keeps where the log stands: the next seq, the
//! clock, the open turn and step, the tool calls the open step's assistant
//! message requested and the recorded calls still waiting for a result.
//!
//! ```
//! use turnwal_testkit::workload::{TurnState, tool_call_blocks};
//! use turnwal::{Policy, Tracker};
//!
//! let mut s = TurnState::new(1_000);
//! let mut log = Vec::new();
//! let turn = s.start_turn();
//! log.push(s.event("turn/start", &format!(r#"{{"turn":{turn}}}"#)));
//! let step = s.start_step();
//! log.push(s.event("step/start", &format!(r#"{{"turn":{turn},"step":{step}}}"#)));
//! s.request(vec!["c1".into()]);
//! let blocks = tool_call_blocks(&["c1".to_owned()], "run");
//! let message = format!(r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":[{blocks}]}}}}"#);
//! log.push(s.event("assistant/message", &message));
//! let id = s.call().unwrap();
//! let call = format!(r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"run","arguments":"{{}}"}}"#);
//! log.push(s.event("tool/call", &call));
//! Tracker::new(Policy::Strict).accept_batch(&log).unwrap();
//!
//! // A log that ends inside an open turn resumes where it stands.
//! let resumed = TurnState::resume(1_000, &log);
//! assert_eq!((resumed.seq(), resumed.turn(), resumed.step()), (4, 1, Some(1)));
//! assert_eq!(resumed.called(), [("c1".to_owned(), 3)]);
//! ```

use serde_json::Value;

use turnwal::event::{Event, EventKind};

pub mod realistic;

/// The tool-call blocks of an assistant message requesting `ids`, each
/// calling `name` with no arguments, joined with commas (empty for none).
pub fn tool_call_blocks(ids: &[String], name: &str) -> String {
    let blocks: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(r#"{{"type":"tool-call","id":"{id}","name":"{name}","arguments":"{{}}"}}"#)
        })
        .collect();
    blocks.join(",")
}

/// Where a generated log stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnState {
    seq: u64,
    time: i64,
    /// The last turn started (0 before the first).
    turn: u64,
    in_turn: bool,
    step: Option<u64>,
    next_step: u64,
    /// Tool-call ids the open step's assistant message requested, not yet
    /// recorded as started.
    requested: Vec<String>,
    /// Recorded calls of the open step without a result: (id, seq).
    called: Vec<(String, u64)>,
}

impl TurnState {
    /// An empty log whose clock reads `time`.
    pub fn new(time: i64) -> TurnState {
        TurnState {
            seq: 0,
            time,
            turn: 0,
            in_turn: false,
            step: None,
            next_step: 1,
            requested: Vec::new(),
            called: Vec::new(),
        }
    }

    /// The state after `log` (seqs from 0, as a stored log has them): the
    /// clock at its last event's time (`time` when it is empty), and, when
    /// it ends inside a turn, that turn, its open step, the calls requested
    /// and the calls recorded without a result, so a generator continues
    /// the turn instead of starting a new one.
    pub fn resume(time: i64, log: &[Event]) -> TurnState {
        let mut state = TurnState::new(time);
        for event in log {
            state.replay(event);
        }
        state
    }

    /// Applies one stored event (the next seq) to the state.
    fn replay(&mut self, event: &Event) {
        let seq = self.seq;
        self.seq += 1;
        self.time = event.time();
        let kind = event.kind();
        if matches!(kind, EventKind::Other) {
            return;
        }
        let data: Value = serde_json::from_str(event.data().get()).unwrap_or(Value::Null);
        let number = |key: &str| data.get(key).and_then(Value::as_u64);
        match kind {
            EventKind::TurnStart => {
                self.start_turn();
                if let Some(turn) = number("turn") {
                    self.turn = turn;
                }
            }
            EventKind::TurnEnd => self.end_turn(),
            EventKind::StepStart => {
                self.start_step();
                if let Some(step) = number("step") {
                    self.step = Some(step);
                    self.next_step = step + 1;
                }
            }
            EventKind::StepEnd => self.end_step(),
            EventKind::AssistantMessage if self.step.is_some() => {
                let blocks = data.pointer("/message/content").and_then(Value::as_array);
                let ids = blocks.into_iter().flatten().filter_map(|block| {
                    (block.get("type")?.as_str()? == "tool-call")
                        .then(|| block.get("id")?.as_str().map(str::to_owned))?
                });
                self.requested.extend(ids);
            }
            EventKind::ToolCall if self.step.is_some() => {
                if let Some(id) = data.get("callId").and_then(Value::as_str) {
                    self.requested.retain(|r| r != id);
                    self.called.push((id.to_owned(), seq));
                }
            }
            EventKind::ToolResult if self.step.is_some() => {
                if let Some(id) = data
                    .pointer("/message/source/callId")
                    .and_then(Value::as_str)
                {
                    self.requested.retain(|r| r != id);
                    self.called.retain(|(c, _)| c != id);
                }
            }
            _ => {}
        }
    }

    /// The seq the next event gets.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Takes the next seq for an event the caller builds itself.
    pub fn take_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    /// The clock: the time of the last event (or the start).
    pub fn time(&self) -> i64 {
        self.time
    }

    /// Sets the clock; the generator owns its time policy.
    pub fn set_time(&mut self, time: i64) {
        self.time = time;
    }

    /// An event of `event_type` with `data` at the next seq and the clock's
    /// time. Panics on invalid data: generated events are valid.
    pub fn event(&mut self, event_type: &str, data: &str) -> Event {
        let event =
            Event::new(event_type, self.seq, self.time, data).expect("generated events are valid");
        self.seq += 1;
        event
    }

    /// The last turn started (0 before the first).
    pub fn turn(&self) -> u64 {
        self.turn
    }

    /// Whether a turn is open.
    pub fn in_turn(&self) -> bool {
        self.in_turn
    }

    /// The open step's number.
    pub fn step(&self) -> Option<u64> {
        self.step
    }

    /// The number the next step of the open turn gets (1 for its first).
    pub fn next_step(&self) -> u64 {
        self.next_step
    }

    /// Tool-call ids requested in the open step, not yet recorded.
    pub fn requested(&self) -> &[String] {
        &self.requested
    }

    /// Recorded calls of the open step without a result: (id, seq).
    pub fn called(&self) -> &[(String, u64)] {
        &self.called
    }

    /// Opens the next turn; returns its number.
    pub fn start_turn(&mut self) -> u64 {
        self.turn += 1;
        self.in_turn = true;
        self.step = None;
        self.next_step = 1;
        self.requested.clear();
        self.called.clear();
        self.turn
    }

    /// Closes the open turn.
    pub fn end_turn(&mut self) {
        self.end_step();
        self.in_turn = false;
    }

    /// Opens the turn's next step; returns its number.
    pub fn start_step(&mut self) -> u64 {
        let step = self.next_step;
        self.step = Some(step);
        self.next_step += 1;
        self.requested.clear();
        self.called.clear();
        step
    }

    /// Closes the open step, forgetting its calls.
    pub fn end_step(&mut self) {
        self.step = None;
        self.requested.clear();
        self.called.clear();
    }

    /// Records the tool calls an assistant message requests.
    pub fn request(&mut self, ids: Vec<String>) {
        self.requested.extend(ids);
    }

    /// Starts the first requested call at the next seq (the `tool/call`
    /// event the caller emits next); returns its id.
    pub fn call(&mut self) -> Option<String> {
        if self.requested.is_empty() {
            return None;
        }
        let id = self.requested.remove(0);
        self.called.push((id.clone(), self.seq));
        Some(id)
    }

    /// Answers the first recorded call: its id and the seq of its
    /// `tool/call`.
    pub fn answer(&mut self) -> Option<(String, u64)> {
        (!self.called.is_empty()).then(|| self.called.remove(0))
    }

    /// Gives up the first requested call, never started; returns its id.
    pub fn abandon(&mut self) -> Option<String> {
        (!self.requested.is_empty()).then(|| self.requested.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_replays_a_balanced_log() {
        let mut s = TurnState::new(7);
        let mut log = Vec::new();
        for _ in 0..2 {
            let t = s.start_turn();
            log.push(s.event("turn/start", &format!(r#"{{"turn":{t}}}"#)));
            s.end_turn();
            log.push(s.event(
                "turn/end",
                &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
            ));
        }
        assert_eq!(TurnState::resume(7, &log), s);
        assert_eq!(TurnState::resume(7, &[]), TurnState::new(7));
    }
}
