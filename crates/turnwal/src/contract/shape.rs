//! The fields of `data` the closers read, deserialized without building a
//! value tree (other fields are skipped, not copied). Recovery runs this only
//! over the records of an open final turn.

use std::borrow::Cow;

use serde::Deserialize;

/// `{turn, step}`: the position an in-turn event claims.
#[derive(Deserialize)]
pub(crate) struct Position {
    pub turn: Option<u64>,
    pub step: Option<u64>,
}

/// `tool/call` data, reduced to its `callId`.
#[derive(Deserialize)]
pub(crate) struct ToolCall<'a> {
    #[serde(rename = "callId", borrow)]
    pub call_id: Option<Cow<'a, str>>,
}

/// `tool/result` data, reduced to `message.source.callId` — or, in the
/// pre-identity shape `{turn, step, callId, content, isError}` (which
/// upstream's reader migrates into a message before it computes closers),
/// to `callId`.
#[derive(Deserialize)]
pub(crate) struct ToolResult<'a> {
    #[serde(borrow)]
    pub message: Option<ResultMessage<'a>>,
    #[serde(rename = "callId", borrow)]
    pub legacy_call_id: Option<Cow<'a, str>>,
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

impl ToolResult<'_> {
    pub fn call_id(&self) -> Option<&str> {
        match &self.message {
            Some(message) => message.source.as_ref()?.call_id.as_deref(),
            None => self.legacy_call_id.as_deref(),
        }
    }
}

/// `assistant/message` data, reduced to its tool-call blocks: those of
/// `message.content`, or of `content` in the pre-identity shape
/// `{turn, step, content, provenance}`.
#[derive(Deserialize)]
pub(crate) struct AssistantMessage<'a> {
    pub step: Option<u64>,
    #[serde(borrow)]
    pub message: Option<MessageContent<'a>>,
    /// Read only when `message` is absent, so a current-shape message is
    /// never lost to an unexpected top-level `content`.
    #[serde(borrow, default)]
    pub content: Option<&'a serde_json::value::RawValue>,
}

impl<'a> AssistantMessage<'a> {
    pub fn blocks(self) -> Vec<Block<'a>> {
        match (self.message, self.content) {
            (Some(message), _) => message.content,
            (None, Some(content)) => serde_json::from_str(content.get()).unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }
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

pub(crate) fn parse<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, String> {
    serde_json::from_str(data).map_err(|e| e.to_string())
}
