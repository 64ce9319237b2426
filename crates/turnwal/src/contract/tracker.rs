//! The turn-contract state machine.

use super::{Policy, Rule, TOOL_NOT_STARTED, Violation, is_known_type};
use crate::event::{Event, EventKind, MAX_SAFE_INTEGER, Tracked};
use crate::json::{Facts, Num, Reason};

/// Where an accepted event sits, as the tracker sees it after applying it:
/// the latest turn number started so far, the open step (0 if none), and
/// whether a turn is open. The native format stores these in every record
/// header so recovery never parses JSON to find the commit point or the
/// numbers its closers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placement {
    /// The latest turn number started (0 before the first turn).
    pub turn: u32,
    /// The open step's number, 0 when no step is open.
    pub step: u32,
    /// Whether a turn is open after this event.
    pub in_turn: bool,
}

/// The turn contract as a state machine over a session's events.
///
/// ```
/// use turnwal::{Event, Policy, Tracker};
/// let mut t = Tracker::new(Policy::Strict);
/// t.accept(&Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap()).unwrap();
/// let bad = Event::new("step/end", 1, 1, r#"{"turn":1,"step":1}"#).unwrap();
/// let err = t.accept(&bad).unwrap_err();
/// assert_eq!(err.rule.code(), "step-mismatch");
/// assert!(t.in_turn());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    policy: Policy,
    require_known_types: bool,
    next_seq: u64,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    next_turn: u64,
    next_step: u64,
    /// The open step's `tool/call`s that have no result yet, by
    /// [`call_key`].
    step_calls: Vec<u64>,
}

impl Tracker {
    /// A tracker for an empty log.
    pub fn new(policy: Policy) -> Tracker {
        Tracker::resume(policy, 0, 0)
    }

    /// A tracker for a log of `next_seq` events that is balanced (no turn
    /// open) and whose last started turn is `last_turn`.
    pub fn resume(policy: Policy, next_seq: u64, last_turn: u64) -> Tracker {
        Tracker {
            policy,
            require_known_types: false,
            next_seq,
            open_turn: None,
            open_step: None,
            next_turn: last_turn + 1,
            next_step: 1,
            step_calls: Vec::new(),
        }
    }

    /// Also refuse unknown types that lack `ignorable: true` (the upstream
    /// reader's vocabulary check).
    pub fn require_known_types(mut self, on: bool) -> Tracker {
        self.require_known_types = on;
        self
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The seq the next event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Whether a turn is open.
    pub fn in_turn(&self) -> bool {
        self.open_turn.is_some()
    }

    /// The open turn's number.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }

    /// The open step's number.
    pub fn open_step(&self) -> Option<u64> {
        self.open_step
    }

    /// The placement after the last accepted event.
    pub fn placement(&self) -> Placement {
        Placement {
            turn: self.open_turn.unwrap_or(self.next_turn - 1) as u32,
            step: self.open_step.unwrap_or(0) as u32,
            in_turn: self.open_turn.is_some(),
        }
    }

    /// Checks `event` against the rules and applies it. On error the tracker
    /// is unchanged: every rule is checked before any state changes.
    pub fn accept(&mut self, event: &impl Tracked) -> Result<Placement, Violation> {
        self.apply(event).map_err(|(rule, detail)| Violation {
            seq: event.seq(),
            event_type: event.event_type().to_owned(),
            rule,
            detail,
        })?;
        Ok(self.placement())
    }

    /// Checks a whole batch; on success applies it and returns one placement
    /// per event, on error leaves the tracker unchanged.
    pub fn accept_batch(&mut self, events: &[Event]) -> Result<Vec<Placement>, Violation> {
        let mut next = self.clone();
        let mut placements = Vec::with_capacity(events.len());
        for event in events {
            placements.push(next.accept(event)?);
        }
        *self = next;
        Ok(placements)
    }

    fn apply(&mut self, event: &impl Tracked) -> Result<(), (Rule, String)> {
        if event.seq() != self.next_seq {
            return Err((
                Rule::SeqContiguous,
                format!("expected seq {}, got {}", self.next_seq, event.seq()),
            ));
        }
        if self.policy == Policy::Permissive {
            self.follow(event);
            self.next_seq += 1;
            return Ok(());
        }
        self.check_vocabulary(event)?;
        let kind = event.kind();
        if !kind.is_surface()
            && (event.surface_op_text().is_some() || event.has_source_event_seqs())
        {
            return Err((
                Rule::SurfaceFields,
                "surfaceOp and sourceEventSeqs are allowed only on user/message, \
                 assistant/message and tool/result"
                    .into(),
            ));
        }
        let facts = event
            .facts()
            .map_err(|e| (Rule::Shape, format!("data is not valid JSON: {e}")))?;
        let data = event.data_text();
        match kind {
            EventKind::TurnStart => self.open_turn_at(&facts)?,
            EventKind::TurnEnd => self.close_turn_at(&facts)?,
            EventKind::StepStart => self.open_step_at(&facts)?,
            EventKind::StepEnd => self.close_step_at(&facts)?,
            EventKind::AssistantChunk | EventKind::AssistantMessage => {
                self.require_open_step(facts.turn, facts.step)?;
            }
            EventKind::ToolCall => {
                self.require_open_step(facts.turn, facts.step)?;
                let id = facts
                    .call_id
                    .of(data)
                    .ok_or_else(|| (Rule::Shape, "data.callId must be a string".to_owned()))?;
                self.step_calls.push(call_key(id));
            }
            EventKind::ToolResult => self.apply_tool_result(event, &facts)?,
            EventKind::EndSeed => {}
            EventKind::UserMessage => self.require_enclosed(self.policy == Policy::Strict)?,
            EventKind::TodoWrite | EventKind::RequestContext => self.require_enclosed(true)?,
            EventKind::RequestHeader => {
                if facts.reason == Reason::Fallback {
                    return Err((
                        Rule::RefusedType,
                        "request/header with reason \"fallback\" is a retired form".into(),
                    ));
                }
                self.require_enclosed(true)?;
            }
            EventKind::Other => self.require_enclosed(self.policy == Policy::Strict)?,
        }
        self.next_seq += 1;
        Ok(())
    }

    /// A `turn/start`: opens the next turn, none being open.
    fn open_turn_at(&mut self, facts: &Facts) -> Result<(), (Rule, String)> {
        let turn = number(facts.turn, "turn")?;
        if let Some(open) = self.open_turn {
            return Err((Rule::TurnNesting, format!("turn {open} is still open")));
        }
        if turn != self.next_turn {
            return Err((
                Rule::TurnNumber,
                format!("expected turn {}, got {turn}", self.next_turn),
            ));
        }
        limit(turn, "turn")?;
        self.open_turn = Some(turn);
        self.open_step = None;
        self.next_step = 1;
        self.step_calls.clear();
        Ok(())
    }

    /// A `turn/end`: closes the open turn it names, no step being open.
    fn close_turn_at(&mut self, facts: &Facts) -> Result<(), (Rule, String)> {
        let turn = turn_end(facts)?;
        match self.open_turn {
            Some(open) if open == turn => {}
            Some(open) => {
                return Err((
                    Rule::TurnMismatch,
                    format!("names turn {turn}, but turn {open} is open"),
                ));
            }
            None => {
                return Err((Rule::TurnMismatch, format!("turn {turn} is not open")));
            }
        }
        if let Some(step) = self.open_step {
            return Err((Rule::TurnEndOpenStep, format!("step {step} is still open")));
        }
        self.open_turn = None;
        self.next_turn += 1;
        self.step_calls.clear();
        Ok(())
    }

    /// A `step/start`: opens the next step of the open turn it names.
    fn open_step_at(&mut self, facts: &Facts) -> Result<(), (Rule, String)> {
        let turn = number(facts.turn, "turn")?;
        let step = number(facts.step, "step")?;
        if self.open_turn != Some(turn) {
            return Err((Rule::StepOutsideTurn, self.not_open_turn(turn)));
        }
        if let Some(open) = self.open_step {
            return Err((Rule::StepNesting, format!("step {open} is still open")));
        }
        if step != self.next_step {
            return Err((
                Rule::StepNumber,
                format!("expected step {}, got {step}", self.next_step),
            ));
        }
        limit(step, "step")?;
        self.open_step = Some(step);
        self.step_calls.clear();
        Ok(())
    }

    /// A `step/end`: closes the open step it names.
    fn close_step_at(&mut self, facts: &Facts) -> Result<(), (Rule, String)> {
        let turn = number(facts.turn, "turn")?;
        let step = number(facts.step, "step")?;
        if self.open_turn != Some(turn) || self.open_step != Some(step) {
            return Err((Rule::StepMismatch, self.not_open_step(turn, step)));
        }
        self.open_step = None;
        self.next_step += 1;
        self.step_calls.clear();
        Ok(())
    }

    /// [`Policy::Permissive`]: no rule refuses the event; the turn and
    /// step it opens or closes are followed as upstream's
    /// `interruptedTurnClosers` follows them (a `turn/start` opens the turn
    /// its data names, a `turn/end` closes whatever is open), so placements
    /// and the commit point describe any stored log. A number that is not a
    /// safe integer in 1..=2^32-1 counts as the next one.
    fn follow(&mut self, event: &impl Tracked) {
        let Ok(facts) = event.facts() else {
            return;
        };
        let valid = |n: Num| match n {
            Num::Int(n) if (1..=u64::from(u32::MAX)).contains(&n) => Some(n),
            _ => None,
        };
        match event.kind() {
            EventKind::TurnStart => {
                let turn = valid(facts.turn).unwrap_or(self.next_turn.min(u64::from(u32::MAX)));
                self.open_turn = Some(turn);
                self.open_step = None;
                self.next_turn = turn;
                self.next_step = 1;
            }
            EventKind::TurnEnd => {
                if let Some(turn) = self.open_turn.take() {
                    self.next_turn = turn + 1;
                }
                self.open_step = None;
            }
            EventKind::StepStart if self.open_turn.is_some() => {
                let step = valid(facts.step).unwrap_or(self.next_step.min(u64::from(u32::MAX)));
                self.open_step = Some(step);
                self.next_step = step + 1;
            }
            EventKind::StepEnd => self.open_step = None,
            _ => {}
        }
    }

    fn check_vocabulary(&self, event: &impl Tracked) -> Result<(), (Rule, String)> {
        let name = event.event_type();
        if matches!(name, "request/header-delta" | "mode/set") {
            return Err((Rule::RefusedType, format!("{name} is a retired event type")));
        }
        if self.require_known_types && !event.ignorable() && !is_known_type(name) {
            return Err((
                Rule::UnknownType,
                format!(
                    "type {name:?} is not a known session event type and is not marked ignorable"
                ),
            ));
        }
        Ok(())
    }

    fn apply_tool_result(
        &mut self,
        event: &impl Tracked,
        facts: &Facts,
    ) -> Result<(), (Rule, String)> {
        let replacing = event.surface_op_text().is_some_and(|op| op != "\"append\"");
        if replacing {
            return self.require_enclosed(true);
        }
        self.require_open_step(facts.turn, facts.step)?;
        let call_id = facts.source_call_id.of(event.data_text()).ok_or_else(|| {
            (
                Rule::Shape,
                "data.message.source.callId must be a string".to_owned(),
            )
        })?;
        let key = call_key(call_id);
        if let Some(i) = self.step_calls.iter().position(|c| *c == key) {
            self.step_calls.remove(i);
        } else if !not_started(event, facts) && self.policy == Policy::Strict {
            // Under Lenient, as in upstream's stores: a result whose call was
            // never logged is kept (only the harness's dev-time invariants
            // refuse it), and recovery's closers account for it.
            return Err((
                Rule::ToolResultUnmatched,
                format!("no tool/call \"{call_id}\" of the open step is waiting for a result"),
            ));
        }
        Ok(())
    }

    fn require_open_step(&self, turn: Num, step: Num) -> Result<(), (Rule, String)> {
        let turn = number(turn, "turn")?;
        let step = number(step, "step")?;
        if self.open_turn != Some(turn) || self.open_step != Some(step) {
            return Err((Rule::OutsideStep, self.not_open_step(turn, step)));
        }
        Ok(())
    }

    fn require_enclosed(&self, required: bool) -> Result<(), (Rule, String)> {
        if required && self.open_turn.is_none() {
            return Err((
                Rule::Enclosure,
                format!("no turn is open ({} policy)", self.policy),
            ));
        }
        Ok(())
    }

    fn not_open_turn(&self, turn: u64) -> String {
        match self.open_turn {
            Some(open) => format!("names turn {turn}, but turn {open} is open"),
            None => format!("names turn {turn}, but no turn is open"),
        }
    }

    fn not_open_step(&self, turn: u64, step: u64) -> String {
        match (self.open_turn, self.open_step) {
            (Some(t), Some(s)) => {
                format!("names turn {turn} step {step}, but the open step is turn {t} step {s}")
            }
            (Some(t), None) => {
                format!("names turn {turn} step {step}, but turn {t} has no open step")
            }
            _ => format!("names turn {turn} step {step}, but no turn is open"),
        }
    }
}

/// A turn or step number: a safe integer >= 1.
fn number(value: Num, what: &str) -> Result<u64, (Rule, String)> {
    match value {
        Num::Int(n) if (1..=MAX_SAFE_INTEGER).contains(&n) => Ok(n),
        Num::Int(n) => Err((
            Rule::Shape,
            format!("data.{what} must be a safe integer >= 1, got {n}"),
        )),
        Num::Invalid => Err((
            Rule::Shape,
            format!("data.{what} must be a safe integer >= 1"),
        )),
        Num::Absent => Err((Rule::Shape, format!("data.{what} is missing"))),
    }
}

/// `turn/end` data is exactly `{turn, reason}`; `reason` is an object with
/// a string `kind`, and the plain kinds are exactly `{kind}`. Unknown
/// extension kinds pass through.
/// Whether a `tool/result` is a closer's for a call never started:
/// `data.error.code` spelled exactly [`TOOL_NOT_STARTED`].
fn not_started(event: &impl Tracked, facts: &Facts) -> bool {
    facts.error_code.of(event.data_text()) == Some(TOOL_NOT_STARTED)
}

fn turn_end(facts: &Facts) -> Result<u64, (Rule, String)> {
    let shape = |m: &str| (Rule::Shape, m.to_owned());
    if !facts.object || facts.other_keys {
        return Err(shape("turn/end data must be exactly {turn, reason}"));
    }
    let turn = number(facts.turn, "turn")?;
    match facts.reason {
        Reason::Object {
            plain: true,
            other_keys: true,
        } => Err(shape(
            "turn/end reason of a plain kind must be exactly {kind}",
        )),
        Reason::Object { .. } => Ok(turn),
        Reason::Absent => Err(shape("turn/end data must be exactly {turn, reason}")),
        _ => Err(shape(
            "turn/end reason must be an object with a string kind",
        )),
    }
}

/// The key a call id is matched by: a hash of its exact JSON spelling, so
/// tracking calls allocates nothing.
fn call_key(raw: &str) -> u64 {
    raw.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn limit(n: u64, what: &str) -> Result<(), (Rule, String)> {
    if n > u64::from(u32::MAX) {
        return Err((Rule::Limit, format!("{what} number {n} exceeds 2^32 - 1")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;

    fn ev(t: &str, seq: u64, data: &str) -> Event {
        Event::new(t, seq, 10, data).unwrap()
    }

    fn run(policy: Policy, events: &[Event]) -> Result<Vec<Placement>, Violation> {
        Tracker::new(policy).accept_batch(events)
    }

    fn turn_with_tool() -> Vec<Event> {
        vec![
            ev("turn/start", 0, r#"{"turn":1}"#),
            ev("user/message", 1, r#"{"id":"u"}"#),
            ev("step/start", 2, r#"{"turn":1,"step":1}"#),
            ev(
                "assistant/chunk",
                3,
                r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#,
            ),
            ev(
                "assistant/message",
                4,
                r#"{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"c1"}]}}"#,
            ),
            ev(
                "tool/call",
                5,
                r#"{"turn":1,"step":1,"callId":"c1","name":"t","arguments":"{}"}"#,
            ),
            ev(
                "tool/result",
                6,
                r#"{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"}}}"#,
            ),
            ev("step/end", 7, r#"{"turn":1,"step":1}"#),
            ev("turn/end", 8, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        ]
    }

    #[test]
    fn a_complete_turn_is_accepted_with_placements() {
        let p = run(Policy::Strict, &turn_with_tool()).unwrap();
        assert_eq!(
            p[0],
            Placement {
                turn: 1,
                step: 0,
                in_turn: true
            }
        );
        assert_eq!(
            p[2],
            Placement {
                turn: 1,
                step: 1,
                in_turn: true
            }
        );
        assert_eq!(
            p[7],
            Placement {
                turn: 1,
                step: 0,
                in_turn: true
            }
        );
        assert_eq!(
            p[8],
            Placement {
                turn: 1,
                step: 0,
                in_turn: false
            }
        );
    }

    fn violation(policy: Policy, events: &[Event]) -> (u64, Rule) {
        let v = run(policy, events).unwrap_err();
        (v.seq, v.rule)
    }

    #[test]
    fn each_rule_names_seq_and_rule() {
        let mut log = turn_with_tool();
        log[3] = ev("assistant/chunk", 3, r#"{"turn":1,"step":2}"#);
        assert_eq!(violation(Policy::Strict, &log), (3, Rule::OutsideStep));

        let mut log = turn_with_tool();
        log[6] = ev(
            "tool/result",
            6,
            r#"{"turn":1,"step":1,"message":{"source":{"callId":"zz"}}}"#,
        );
        assert_eq!(
            violation(Policy::Strict, &log),
            (6, Rule::ToolResultUnmatched)
        );

        let log = [ev("turn/start", 0, r#"{"turn":2}"#)];
        assert_eq!(violation(Policy::Strict, &log), (0, Rule::TurnNumber));

        let log = [
            ev("turn/start", 0, r#"{"turn":1}"#),
            ev("turn/start", 1, r#"{"turn":2}"#),
        ];
        assert_eq!(violation(Policy::Strict, &log), (1, Rule::TurnNesting));

        let log = [
            ev("turn/start", 0, r#"{"turn":1}"#),
            ev("step/start", 1, r#"{"turn":1,"step":2}"#),
        ];
        assert_eq!(violation(Policy::Strict, &log), (1, Rule::StepNumber));

        let log = [
            ev("turn/start", 0, r#"{"turn":1}"#),
            ev("step/start", 1, r#"{"turn":1,"step":1}"#),
            ev("turn/end", 2, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        ];
        assert_eq!(violation(Policy::Strict, &log), (2, Rule::TurnEndOpenStep));

        let log = [ev("plan/mode", 0, r#"{"active":true}"#)];
        assert_eq!(violation(Policy::Strict, &log), (0, Rule::Enclosure));
        assert!(run(Policy::Lenient, &log).is_ok());

        let log = [ev("todo/write", 0, r#"{"todos":[]}"#)];
        assert_eq!(violation(Policy::Lenient, &log), (0, Rule::Enclosure));

        let log = [ev("turn/start", 1, r#"{"turn":1}"#)];
        assert_eq!(violation(Policy::Strict, &log), (1, Rule::SeqContiguous));

        let log = [ev("mode/set", 0, "{}")];
        assert_eq!(violation(Policy::Lenient, &log), (0, Rule::RefusedType));

        let log = [
            ev("turn/start", 0, r#"{"turn":1}"#),
            ev(
                "turn/end",
                1,
                r#"{"turn":1,"reason":{"kind":"completed","x":1}}"#,
            ),
        ];
        assert_eq!(violation(Policy::Strict, &log), (1, Rule::Shape));
    }

    #[test]
    fn end_seed_may_sit_between_turns_and_not_started_results_pass() {
        let mut log = turn_with_tool();
        log.push(ev("session/end-seed", 9, "{}"));
        log.push(ev("turn/start", 10, r#"{"turn":2}"#));
        log.push(ev("step/start", 11, r#"{"turn":2,"step":1}"#));
        log.push(ev(
            "tool/result",
            12,
            r#"{"turn":2,"step":1,"message":{"source":{"callId":"x"}},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}"#,
        ));
        let p = run(Policy::Strict, &log).unwrap();
        assert_eq!(
            p[9],
            Placement {
                turn: 1,
                step: 0,
                in_turn: false
            }
        );
    }

    #[test]
    fn a_rejected_batch_leaves_the_tracker_unchanged() {
        let mut t = Tracker::new(Policy::Strict);
        let before = t.clone();
        let bad = [ev("turn/start", 0, r#"{"turn":1}"#), ev("oops", 2, "{}")];
        assert!(t.accept_batch(&bad).is_err());
        assert_eq!(t, before);
    }
}
