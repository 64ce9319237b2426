//! The turn contract: the rules every stored log obeys, and the synthetic
//! events that close a turn a crash left open.
//!
//! One [`Tracker`] implements the rules; append (the producer-side check),
//! recovery and `verify` all use it. This module knows nothing of files.

mod closers;
mod shape;
mod tracker;

use std::fmt;

pub use closers::{
    NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN,
    interrupted_turn_closers,
};
pub use tracker::{Placement, Tracker};

/// How strictly turn enclosure is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Every event, plugin types included, sits inside an open turn; the one
    /// exception is `session/end-seed`. The default for native stores.
    #[default]
    Strict,
    /// The upstream harness's current rules: only `todo/write`,
    /// `request/header` and `request/context` must be enclosed (besides the
    /// turn, step, chunk and tool rules); plugin events may sit between turns.
    Lenient,
    /// The upstream harness's backends: its coordinator checks what it
    /// appends, and the store keeps what it is handed — legacy shapes
    /// (pre-identity messages, `steering/message`, old `turn/end` reasons),
    /// retired types and malformed events included, which upstream's reader
    /// migrates or refuses when the log is read. Only what storage itself
    /// needs is enforced (contiguous seqs, the envelope, the size limits);
    /// the turn structure is followed the way upstream's
    /// `interruptedTurnClosers` follows it, so the commit point and closers
    /// stay right, and nothing stored under it is ever cut as debris. The
    /// Node binding creates its sessions with it.
    Permissive,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Strict => "strict",
            Policy::Lenient => "lenient",
            Policy::Permissive => "permissive",
        })
    }
}

/// The rule an event broke. [`Rule::code`] is a stable identifier for
/// scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// Seqs are contiguous from 0: event `i` has seq `i`.
    SeqContiguous,
    /// `turn/start` while a turn is open.
    TurnNesting,
    /// `turn/start` must carry the next turn number (1, 2, 3, …).
    TurnNumber,
    /// `turn/end` must name the open turn.
    TurnMismatch,
    /// `turn/end` while a step is still open.
    TurnEndOpenStep,
    /// `step/start` outside an open turn, or naming another turn.
    StepOutsideTurn,
    /// `step/start` while a step is open.
    StepNesting,
    /// Step numbers restart at 1 in each turn and increase by one.
    StepNumber,
    /// `step/end` must name the open turn and step.
    StepMismatch,
    /// Chunks, assistant messages and tool calls belong to the open step.
    OutsideStep,
    /// An appended `tool/result` must answer a `tool/call` of the open step.
    ToolResultUnmatched,
    /// The event sits outside an open turn where the policy requires one.
    Enclosure,
    /// A boundary or tool event's `data` lacks the fields the contract reads.
    Shape,
    /// A retired vocabulary the upstream harness always refuses.
    RefusedType,
    /// `surfaceOp`/`sourceEventSeqs` on a type that is not a surface type.
    SurfaceFields,
    /// An unknown type without `ignorable: true`, where known types are required.
    UnknownType,
    /// A turn or step number beyond what the native format stores (2^32 - 1).
    Limit,
}

impl Rule {
    /// A stable kebab-case identifier.
    pub fn code(self) -> &'static str {
        match self {
            Rule::SeqContiguous => "seq-contiguous",
            Rule::TurnNesting => "turn-nesting",
            Rule::TurnNumber => "turn-number",
            Rule::TurnMismatch => "turn-mismatch",
            Rule::TurnEndOpenStep => "turn-end-open-step",
            Rule::StepOutsideTurn => "step-outside-turn",
            Rule::StepNesting => "step-nesting",
            Rule::StepNumber => "step-number",
            Rule::StepMismatch => "step-mismatch",
            Rule::OutsideStep => "outside-step",
            Rule::ToolResultUnmatched => "tool-result-unmatched",
            Rule::Enclosure => "enclosure",
            Rule::Shape => "shape",
            Rule::RefusedType => "refused-type",
            Rule::SurfaceFields => "surface-fields",
            Rule::UnknownType => "unknown-type",
            Rule::Limit => "limit",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An event that breaks the turn contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "turn contract violation at seq {seq} ({}): rule {rule}: {}",
    crate::text::excerpt(event_type),
    crate::text::excerpt_within(detail, crate::text::REASON_CHARS)
)]
pub struct Violation {
    /// The offending event's seq.
    pub seq: u64,
    /// The offending event's type.
    pub event_type: String,
    /// The rule it broke.
    pub rule: Rule,
    /// What exactly is wrong.
    pub detail: String,
}

/// `KNOWN_SESSION_EVENT_TYPES` of the upstream harness (48 entries).
pub const KNOWN_EVENT_TYPES: &[&str] = &[
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

/// Whether `event_type` is in the upstream vocabulary.
pub fn is_known_type(event_type: &str) -> bool {
    KNOWN_EVENT_TYPES.binary_search(&event_type).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_types_are_sorted_for_binary_search() {
        let mut sorted = super::KNOWN_EVENT_TYPES.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, super::KNOWN_EVENT_TYPES);
        assert_eq!(sorted.len(), 48);
        assert!(super::is_known_type("plan/mode"));
        assert!(!super::is_known_type("future/event"));
    }
}
