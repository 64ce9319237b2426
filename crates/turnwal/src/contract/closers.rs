//! Synthetic closers for a turn a crash left open, byte-compatible with the
//! upstream harness's `interruptedTurnClosers`.

use super::shape::{self, Position};
use crate::event::{Event, EventKind, RawJson, write_json_string};

/// Error code of a closer for a call that was requested but never recorded
/// as started.
pub const TOOL_NOT_STARTED: &str = "TOOL_NOT_STARTED";
/// Error code of a closer for a recorded call whose result never arrived.
pub const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";
/// The text of a `TOOL_NOT_STARTED` closer.
pub const NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
/// The text of a `TOOL_OUTCOME_UNKNOWN` closer.
pub const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

struct PendingCall {
    call_id: String,
    step: u64,
    call_seq: Option<u64>,
}

#[derive(Default)]
struct Fold {
    open_turn: Option<u64>,
    open_step: Option<u64>,
    /// Tool-call blocks of assistant messages still unanswered, in order.
    pending: Vec<PendingCall>,
}

impl Fold {
    fn apply(&mut self, event: &Event) {
        let data = event.data().get();
        match event.kind() {
            EventKind::TurnStart => {
                self.open_turn = shape::parse::<Position>(data).ok().and_then(|p| p.turn);
                self.open_step = None;
                self.pending.clear();
            }
            EventKind::TurnEnd => {
                self.open_turn = None;
                self.open_step = None;
                self.pending.clear();
            }
            EventKind::StepStart => {
                self.open_step = shape::parse::<Position>(data).ok().and_then(|p| p.step);
            }
            EventKind::StepEnd => {
                self.open_step = None;
                self.pending.clear();
            }
            EventKind::AssistantMessage => {
                let Ok(msg) = shape::parse::<shape::AssistantMessage>(data) else {
                    return;
                };
                let step = msg.step.unwrap_or(0);
                for block in msg.blocks() {
                    if block.block_type.as_deref() == Some("tool-call")
                        && let Some(id) = block.id
                    {
                        self.register(id.into_owned(), step);
                    }
                }
            }
            EventKind::ToolCall => {
                let Ok(call) = shape::parse::<shape::ToolCall>(data) else {
                    return;
                };
                if let Some(id) = call.call_id
                    && let Some(p) = self.pending.iter_mut().find(|p| p.call_id == id)
                {
                    p.call_seq = Some(event.seq());
                }
            }
            EventKind::ToolResult => {
                let Ok(result) = shape::parse::<shape::ToolResult>(data) else {
                    return;
                };
                if let Some(id) = result.call_id() {
                    self.pending.retain(|p| p.call_id != id);
                }
            }
            _ => {}
        }
    }

    /// A JavaScript `Map.set` on an existing key keeps its position.
    fn register(&mut self, call_id: String, step: u64) {
        match self.pending.iter_mut().find(|p| p.call_id == call_id) {
            Some(p) => {
                p.step = step;
                p.call_seq = None;
            }
            None => self.pending.push(PendingCall {
                call_id,
                step,
                call_seq: None,
            }),
        }
    }
}

/// The events that close the turn left open at the end of `events`: an error
/// `tool/result` for every tool call the open step left unanswered, then
/// `step/end` if a step is open, then `turn/end {"reason":{"kind":"interrupted"}}`.
/// Seqs continue after the last event; every closer has the last event's
/// time. A balanced or empty log gives none.
///
/// `events` must reach back at least to the open turn's `turn/start`.
///
/// ```
/// use turnwal::{Event, interrupted_turn_closers};
/// let log = [
///     Event::new("turn/start", 0, 7, r#"{"turn":1}"#).unwrap(),
///     Event::new("step/start", 1, 9, r#"{"turn":1,"step":1}"#).unwrap(),
/// ];
/// let closers = interrupted_turn_closers(&log);
/// assert_eq!(closers[0].to_json(), r#"{"type":"step/end","seq":2,"time":9,"data":{"turn":1,"step":1}}"#);
/// assert_eq!(
///     closers[1].to_json(),
///     r#"{"type":"turn/end","seq":3,"time":9,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
/// );
/// ```
pub fn interrupted_turn_closers(events: &[Event]) -> Vec<Event> {
    let mut fold = Fold::default();
    for event in events {
        fold.apply(event);
    }
    let (Some(turn), Some(last)) = (fold.open_turn, events.last()) else {
        return Vec::new();
    };
    let time = last.time();
    let mut seq = last.seq() + 1;
    let mut closers = Vec::with_capacity(fold.pending.len() + 2);
    for call in &fold.pending {
        closers.push(tool_result_closer(turn, call, seq, time));
        seq += 1;
    }
    if let Some(step) = fold.open_step {
        let data = format!(r#"{{"turn":{turn},"step":{step}}}"#);
        closers.push(synthetic("step/end", seq, time, data));
        seq += 1;
    }
    let data = format!(r#"{{"turn":{turn},"reason":{{"kind":"interrupted"}}}}"#);
    closers.push(synthetic("turn/end", seq, time, data));
    closers
}

fn synthetic(event_type: &str, seq: u64, time: i64, data: String) -> Event {
    Event::from_parts(event_type, seq, time, RawJson::trusted(data))
        .expect("closers carry a known type and values taken from a valid log")
}

fn tool_result_closer(turn: u64, call: &PendingCall, seq: u64, time: i64) -> Event {
    let started = call.call_seq.is_some();
    let (name, code, text) = if started {
        (
            "ToolOutcomeUnknownError",
            TOOL_OUTCOME_UNKNOWN,
            OUTCOME_UNKNOWN_TEXT,
        )
    } else {
        ("ToolNotStartedError", TOOL_NOT_STARTED, NOT_STARTED_TEXT)
    };
    let mut data = Vec::with_capacity(text.len() + 2 * call.call_id.len() + 256);
    let id = format!("interrupted-tool-result-{}-{seq}", call.call_id);
    data.extend_from_slice(
        format!(r#"{{"turn":{turn},"step":{},"message":{{"id":"#, call.step).as_bytes(),
    );
    write_json_string(&mut data, &id);
    data.extend_from_slice(br#","role":"user","source":{"kind":"tool","callId":"#);
    write_json_string(&mut data, &call.call_id);
    data.extend_from_slice(br#"},"content":[{"type":"tool-result","toolCallId":"#);
    write_json_string(&mut data, &call.call_id);
    data.extend_from_slice(br#","isError":true,"content":[{"type":"text","text":"#);
    write_json_string(&mut data, text);
    data.extend_from_slice(
        format!(r#"}}]}}]}},"error":{{"name":"{name}","code":"{code}"}}}}"#).as_bytes(),
    );
    let data = String::from_utf8(data).expect("built from UTF-8 parts");
    let event = synthetic("tool/result", seq, time, data)
        .with_surface_op("\"append\"")
        .expect("\"append\" is a valid surfaceOp")
        .with_surface_op_first();
    match call.call_seq {
        Some(call_seq) => event
            .with_source_event_seqs(&[call_seq])
            .expect("the tool/call precedes its closer"),
        None => event,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, Tracker};

    fn ev(t: &str, seq: u64, time: i64, data: &str) -> Event {
        Event::new(t, seq, time, data).unwrap()
    }

    fn open_turn_with_calls() -> Vec<Event> {
        vec![
            ev("turn/start", 0, 1, r#"{"turn":1}"#),
            ev("step/start", 1, 2, r#"{"turn":1,"step":1}"#),
            ev(
                "assistant/message",
                2,
                3,
                r#"{"turn":1,"step":1,"message":{"content":[{"type":"text","text":"x"},{"type":"tool-call","id":"call-a"},{"type":"tool-call","id":"call-b"}]}}"#,
            ),
            ev(
                "tool/call",
                3,
                4,
                r#"{"turn":1,"step":1,"callId":"call-b","name":"t","arguments":"{}"}"#,
            ),
        ]
    }

    #[test]
    fn closers_match_upstream_bytes() {
        let closers = interrupted_turn_closers(&open_turn_with_calls());
        let lines: Vec<String> = closers.iter().map(Event::to_json).collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            format!(
                r#"{{"type":"tool/result","seq":4,"time":4,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-call-a-4","role":"user","source":{{"kind":"tool","callId":"call-a"}},"content":[{{"type":"tool-result","toolCallId":"call-a","isError":true,"content":[{{"type":"text","text":"{NOT_STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
            )
        );
        assert_eq!(
            lines[1],
            format!(
                r#"{{"type":"tool/result","seq":5,"time":4,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-call-b-5","role":"user","source":{{"kind":"tool","callId":"call-b"}},"content":[{{"type":"tool-result","toolCallId":"call-b","isError":true,"content":[{{"type":"text","text":"{OUTCOME_UNKNOWN_TEXT}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[3]}}"#
            )
        );
        assert_eq!(
            lines[2],
            r#"{"type":"step/end","seq":6,"time":4,"data":{"turn":1,"step":1}}"#
        );
        assert_eq!(
            lines[3],
            r#"{"type":"turn/end","seq":7,"time":4,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
        );
    }

    #[test]
    fn closers_satisfy_the_contract() {
        let mut log = open_turn_with_calls();
        log.extend(interrupted_turn_closers(&log));
        let mut t = Tracker::new(Policy::Strict);
        t.accept_batch(&log).unwrap();
        assert!(!t.in_turn());
        assert!(interrupted_turn_closers(&log).is_empty());
    }

    #[test]
    fn answered_and_closed_calls_get_no_result() {
        let mut log = open_turn_with_calls();
        log.push(ev(
            "tool/result",
            4,
            5,
            r#"{"turn":1,"step":1,"message":{"source":{"callId":"call-b"}}}"#,
        ));
        log.push(ev("step/end", 5, 6, r#"{"turn":1,"step":1}"#));
        let closers = interrupted_turn_closers(&log);
        let types: Vec<&str> = closers.iter().map(Event::event_type).collect();
        assert_eq!(types, ["turn/end"]);
        assert_eq!((closers[0].seq(), closers[0].time()), (6, 6));
    }

    #[test]
    fn balanced_and_empty_logs_need_nothing() {
        assert!(interrupted_turn_closers(&[]).is_empty());
        let log = [
            ev("turn/start", 0, 1, r#"{"turn":1}"#),
            ev(
                "turn/end",
                1,
                1,
                r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            ),
        ];
        assert!(interrupted_turn_closers(&log).is_empty());
    }
}
