//! What a session's events say to an operator: turns and how they ended,
//! tokens, models, tool calls and their failures, the time span. Read from
//! the upstream harness's event shapes (docs/CLI.md, "stats"); an event
//! whose `data` does not have the expected shape counts as its type and
//! adds nothing else, so a digest never fails on a valid log.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use turnwal::event::EventKind;
use turnwal::view::EventRef;

/// Token counts, summed over `assistant/message` events' `usage` (the
/// harness writes each model call's usage there once; `usage` stream
/// chunks repeat it, so they are not counted).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Tokens {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
}

impl Tokens {
    fn add(&mut self, other: &Tokens) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// Calls of one tool and how many of them failed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct ToolCount {
    pub calls: u64,
    pub failures: u64,
}

/// The digest of a run of events (one session, or many added together).
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Digest {
    /// Events digested.
    pub events: u64,
    /// `turn/start` events.
    pub turns: u64,
    /// `turn/end` events by `reason.kind` (`completed`, `interrupted`, …).
    pub outcomes: BTreeMap<String, u64>,
    /// Summed `usage`.
    pub tokens: Tokens,
    /// `assistant/message` events by `provider/model` of their source.
    pub models: BTreeMap<String, u64>,
    /// `tool/call` events by tool name, with the failed results.
    pub tools: BTreeMap<String, ToolCount>,
    /// Time of the first and the last event (unix ms).
    pub first_time: Option<i64>,
    pub last_time: Option<i64>,
    /// Events by type.
    pub types: BTreeMap<String, u64>,
    /// Tool names of calls whose result is still to come, by call id.
    #[serde(skip)]
    pending: HashMap<String, String>,
}

#[derive(Deserialize)]
struct AssistantData<'a> {
    #[serde(borrow, default)]
    message: Option<AssistantMessage<'a>>,
    #[serde(default)]
    usage: Option<Tokens>,
}

#[derive(Deserialize)]
struct AssistantMessage<'a> {
    #[serde(borrow, default)]
    source: Option<ModelSource<'a>>,
}

#[derive(Deserialize)]
struct ModelSource<'a> {
    #[serde(borrow, default)]
    provider: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallData<'a> {
    #[serde(borrow)]
    call_id: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ToolResultData<'a> {
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    message: Option<ToolResultMessage<'a>>,
}

#[derive(Deserialize)]
struct ToolResultMessage<'a> {
    #[serde(borrow, default)]
    content: Vec<ResultBlock<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResultBlock<'a> {
    #[serde(borrow, default)]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(default)]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct TurnEndData<'a> {
    #[serde(borrow, default)]
    reason: Option<Reason<'a>>,
}

#[derive(Deserialize)]
struct Reason<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
}

impl Digest {
    /// Adds one event.
    pub(crate) fn add(&mut self, event: EventRef<'_>) {
        self.events += 1;
        self.first_time.get_or_insert(event.time());
        self.last_time = Some(event.time());
        // Looked up by the borrowed name: a key is made once per type.
        match self.types.get_mut(event.event_type()) {
            Some(n) => *n += 1,
            None => {
                self.types.insert(event.event_type().to_owned(), 1);
            }
        }
        let data = event.data();
        match event.kind() {
            EventKind::TurnStart => self.turns += 1,
            EventKind::TurnEnd => {
                if let Ok(TurnEndData {
                    reason: Some(reason),
                }) = serde_json::from_str(data)
                {
                    *self.outcomes.entry(reason.kind.into_owned()).or_default() += 1;
                }
            }
            EventKind::AssistantMessage => {
                if let Ok(d) = serde_json::from_str::<AssistantData<'_>>(data) {
                    if let Some(usage) = &d.usage {
                        self.tokens.add(usage);
                    }
                    if let Some(source) = d.message.and_then(|m| m.source) {
                        let model = match (source.provider, source.model) {
                            (Some(p), Some(m)) => format!("{p}/{m}"),
                            (None, Some(m)) => m.into_owned(),
                            (Some(p), None) => format!("{p}/?"),
                            (None, None) => return,
                        };
                        *self.models.entry(model).or_default() += 1;
                    }
                }
            }
            EventKind::ToolCall => {
                if let Ok(d) = serde_json::from_str::<ToolCallData<'_>>(data) {
                    self.tools.entry(d.name.to_string()).or_default().calls += 1;
                    self.pending
                        .insert(d.call_id.into_owned(), d.name.into_owned());
                }
            }
            EventKind::ToolResult => {
                if let Ok(d) = serde_json::from_str::<ToolResultData<'_>>(data) {
                    let blocks = d.message.map(|m| m.content).unwrap_or_default();
                    let failed =
                        d.error.is_some() || blocks.iter().any(|b| b.is_error == Some(true));
                    let name = blocks
                        .iter()
                        .find_map(|b| b.tool_call_id.as_deref())
                        .and_then(|id| self.pending.remove(id));
                    if failed {
                        let name = name.unwrap_or_else(|| "(unknown tool)".to_owned());
                        self.tools.entry(name).or_default().failures += 1;
                    }
                }
            }
            _ => {}
        }
    }

    /// Adds another digest (store-wide totals).
    pub(crate) fn merge(&mut self, other: &Digest) {
        self.events += other.events;
        self.turns += other.turns;
        for (k, n) in &other.outcomes {
            *self.outcomes.entry(k.clone()).or_default() += n;
        }
        self.tokens.add(&other.tokens);
        for (k, n) in &other.models {
            *self.models.entry(k.clone()).or_default() += n;
        }
        for (k, t) in &other.tools {
            let mine = self.tools.entry(k.clone()).or_default();
            mine.calls += t.calls;
            mine.failures += t.failures;
        }
        self.first_time = match (self.first_time, other.first_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_time = match (self.last_time, other.last_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        for (k, n) in &other.types {
            *self.types.entry(k.clone()).or_default() += n;
        }
    }

    /// Tool calls in all, and failed ones.
    pub(crate) fn tool_totals(&self) -> ToolCount {
        self.tools
            .values()
            .fold(ToolCount::default(), |a, t| ToolCount {
                calls: a.calls + t.calls,
                failures: a.failures + t.failures,
            })
    }

    /// Turns that ended `interrupted` (the closers a crash repair wrote).
    pub(crate) fn interrupted(&self) -> u64 {
        self.outcomes.get("interrupted").copied().unwrap_or(0)
    }

    /// Milliseconds from the first event to the last.
    pub(crate) fn duration_ms(&self) -> Option<i64> {
        Some(self.last_time? - self.first_time?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::Event;

    fn digest(events: &[(&str, &str)]) -> Digest {
        let mut d = Digest::default();
        for (seq, (t, data)) in events.iter().enumerate() {
            let e = Event::new(t, seq as u64, 100 + seq as i64, data).unwrap();
            d.add(EventRef::from(&e));
        }
        d
    }

    #[test]
    fn tokens_models_tools_and_outcomes_are_read_from_upstream_shapes() {
        let d = digest(&[
            ("turn/start", r#"{"turn":1}"#),
            (
                "assistant/message",
                r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"ds","model":"v4"}},"usage":{"inputTokens":1200,"outputTokens":40,"cacheReadTokens":7}}"#,
            ),
            (
                "tool/call",
                r#"{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}"#,
            ),
            (
                "tool/call",
                r#"{"turn":1,"step":1,"callId":"c2","name":"bash","arguments":"{}"}"#,
            ),
            (
                "tool/result",
                r#"{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[]}]}}"#,
            ),
            (
                "tool/result",
                r#"{"turn":1,"step":1,"message":{"id":"r2","role":"user","source":{"kind":"tool","callId":"c2"},"content":[{"type":"tool-result","toolCallId":"c2","isError":true,"content":[]}]}}"#,
            ),
            (
                "assistant/message",
                r#"{"turn":1,"step":2,"message":{"source":{"kind":"model","provider":"ds","model":"v4"}},"usage":{"inputTokens":1,"outputTokens":2}}"#,
            ),
            ("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
            ("turn/start", r#"{"turn":2}"#),
            (
                "tool/result",
                r#"{"turn":2,"step":1,"message":null,"error":{"name":"x","code":"TOOL_NOT_STARTED"}}"#,
            ),
            ("turn/end", r#"{"turn":2,"reason":{"kind":"interrupted"}}"#),
        ]);
        assert_eq!((d.events, d.turns, d.interrupted()), (11, 2, 1));
        assert_eq!(
            d.tokens,
            Tokens {
                input_tokens: 1201,
                output_tokens: 42,
                cache_read_tokens: 7,
                ..Tokens::default()
            }
        );
        assert_eq!(d.models, BTreeMap::from([("ds/v4".to_owned(), 2)]));
        assert_eq!(
            d.tools,
            BTreeMap::from([
                (
                    "bash".to_owned(),
                    ToolCount {
                        calls: 1,
                        failures: 1
                    }
                ),
                (
                    "read".to_owned(),
                    ToolCount {
                        calls: 1,
                        failures: 0
                    }
                ),
                (
                    "(unknown tool)".to_owned(),
                    ToolCount {
                        calls: 0,
                        failures: 1
                    }
                ),
            ])
        );
        assert_eq!(
            d.outcomes,
            BTreeMap::from([("completed".to_owned(), 1), ("interrupted".to_owned(), 1)])
        );
        assert_eq!(
            (d.first_time, d.last_time, d.duration_ms()),
            (Some(100), Some(110), Some(10))
        );
        let mut total = d.clone();
        total.merge(&d);
        assert_eq!(
            (total.events, total.tokens.input_tokens, total.tool_totals()),
            (
                22,
                2402,
                ToolCount {
                    calls: 4,
                    failures: 4
                }
            )
        );
    }

    #[test]
    fn shapes_it_does_not_know_count_as_their_type_only() {
        let d = digest(&[
            ("assistant/message", r#"{"usage":"lots"}"#),
            ("tool/call", r#"{"name":7}"#),
            ("turn/end", r#"{"turn":1}"#),
        ]);
        assert_eq!(
            (
                d.events,
                d.tokens,
                d.models.len(),
                d.tools.len(),
                d.outcomes.len()
            ),
            (3, Tokens::default(), 0, 0, 0)
        );
        assert_eq!(d.types.len(), 3);
    }
}
