//! The few fields of `data` the contract reads, deserialized without building
//! a value tree (other fields are skipped, not copied).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::MAX_SAFE_INTEGER;

/// `{turn, step?}`: the position an in-turn event claims.
#[derive(Deserialize)]
pub(crate) struct Position {
    pub turn: Option<u64>,
    pub step: Option<u64>,
}

/// `tool/call` data: `{turn, step, callId}`.
#[derive(Deserialize)]
pub(crate) struct ToolCall<'a> {
    pub turn: Option<u64>,
    pub step: Option<u64>,
    #[serde(rename = "callId", borrow)]
    pub call_id: Option<Cow<'a, str>>,
}

/// `tool/result` data: `{turn, step, message:{source:{callId}}, error?:{code}}`.
#[derive(Deserialize)]
pub(crate) struct ToolResult<'a> {
    pub turn: Option<u64>,
    pub step: Option<u64>,
    #[serde(borrow)]
    pub message: Option<ResultMessage<'a>>,
    #[serde(borrow)]
    pub error: Option<ResultError<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct ResultMessage<'a> {
    #[serde(borrow)]
    pub source: Option<ResultSource<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct ResultSource<'a> {
    #[serde(rename = "callId", borrow)]
    pub call_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(crate) struct ResultError<'a> {
    #[serde(borrow)]
    pub code: Option<Cow<'a, str>>,
}

impl ToolResult<'_> {
    pub fn call_id(&self) -> Option<&str> {
        self.message.as_ref()?.source.as_ref()?.call_id.as_deref()
    }

    pub fn is_not_started(&self) -> bool {
        self.error.as_ref().and_then(|e| e.code.as_deref()) == Some(super::TOOL_NOT_STARTED)
    }
}

/// `assistant/message` data, reduced to its tool-call blocks.
#[derive(Deserialize)]
pub(crate) struct AssistantMessage<'a> {
    pub step: Option<u64>,
    #[serde(borrow)]
    pub message: Option<MessageContent<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct MessageContent<'a> {
    #[serde(borrow, default)]
    pub content: Vec<Block<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub block_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub id: Option<Cow<'a, str>>,
}

/// `turn/end` data: exactly `{turn, reason:{kind, …}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnEnd<'a> {
    pub turn: u64,
    #[serde(borrow)]
    pub reason: &'a RawValue,
}

#[derive(Deserialize)]
pub(crate) struct Reason<'a> {
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// `request/header` data, reduced to its `reason`.
#[derive(Deserialize)]
pub(crate) struct RequestHeader<'a> {
    #[serde(borrow)]
    pub reason: Option<Cow<'a, str>>,
}

pub(crate) fn parse<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, String> {
    serde_json::from_str(data).map_err(|e| e.to_string())
}

/// Checks a `turn/end` reason: an object with a string `kind`; the plain
/// kinds (`completed`, `blocked`, `max-tokens`, `interrupted`) are exactly
/// `{kind}`. Unknown extension kinds pass through.
pub(crate) fn check_turn_end(data: &str) -> Result<u64, String> {
    let end: TurnEnd =
        parse(data).map_err(|e| format!("turn/end data must be exactly {{turn, reason}}: {e}"))?;
    let reason: Reason = parse(end.reason.get())
        .map_err(|_| "turn/end reason must be an object with a string kind".to_owned())?;
    if matches!(
        &*reason.kind,
        "completed" | "blocked" | "max-tokens" | "interrupted"
    ) {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Plain<'a> {
            #[serde(borrow)]
            kind: Cow<'a, str>,
        }
        parse::<Plain>(end.reason.get())
            .map_err(|_| format!("turn/end reason {:?} must be exactly {{kind}}", reason.kind))?;
    }
    Ok(end.turn)
}

/// A turn or step number: a safe integer >= 1.
pub(crate) fn number(value: Option<u64>, what: &str) -> Result<u64, String> {
    match value {
        Some(n) if (1..=MAX_SAFE_INTEGER).contains(&n) => Ok(n),
        Some(n) => Err(format!("data.{what} must be a safe integer >= 1, got {n}")),
        None => Err(format!("data.{what} is missing")),
    }
}
