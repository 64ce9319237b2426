//! The persisted unit: the harness's own event, stored losslessly.
//!
//! An [`Event`] is the envelope `{type, seq, time, data}` plus the optional
//! upstream keys `ignorable`, `sourceEventSeqs` and `surfaceOp`. Its JSON parts
//! are kept as validated raw text ([`RawJson`]), never as a parsed value tree, so
//! number spelling (`1e+21`, `-0.0`), key order, escapes and lone UTF-16
//! surrogate escapes (`"\ud800"`) come back byte for byte.

mod borrowed;
mod incoming;

pub(crate) use crate::text::abbreviate;
use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::Deserialize;
use serde_json::value::RawValue;

pub use borrowed::EventRef;
pub use incoming::IncomingEvent;

use crate::json::{self, Facts};

/// What the turn contract reads of an event: an owned [`Event`], or one
/// lent from storage (`view::EventRef`), so a whole-session check reads
/// events where they are stored instead of copying each.
pub trait Tracked {
    /// The seq.
    fn seq(&self) -> u64;
    /// The classified type.
    fn kind(&self) -> EventKind;
    /// The type name.
    fn event_type(&self) -> &str;
    /// `data`'s JSON text.
    fn data_text(&self) -> &str;
    /// `surfaceOp`'s JSON text, when present.
    fn surface_op_text(&self) -> Option<&str>;
    /// Whether `sourceEventSeqs` is present.
    fn has_source_event_seqs(&self) -> bool;
    /// Whether the event carries `ignorable: true`.
    fn ignorable(&self) -> bool;
    /// What the contract reads from `data` (`Err` when it is not JSON).
    fn facts(&self) -> Result<json::Facts, json::JsonError>;
}

impl Tracked for Event {
    fn seq(&self) -> u64 {
        Event::seq(self)
    }
    fn kind(&self) -> EventKind {
        Event::kind(self)
    }
    fn event_type(&self) -> &str {
        Event::event_type(self)
    }
    fn data_text(&self) -> &str {
        self.data.get()
    }
    fn surface_op_text(&self) -> Option<&str> {
        self.surface_op.as_ref().map(|r| r.get())
    }
    fn has_source_event_seqs(&self) -> bool {
        self.source_event_seqs.is_some()
    }
    fn ignorable(&self) -> bool {
        Event::ignorable(self)
    }
    fn facts(&self) -> Result<json::Facts, json::JsonError> {
        Event::facts(self)
    }
}

/// Largest integer a JavaScript harness can represent exactly (`2^53 - 1`).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Longest event type name, in bytes (the native format stores it in a `u16`).
pub const MAX_TYPE_LEN: usize = u16::MAX as usize;

/// The event types the engine understands. Everything else is [`EventKind::Other`]
/// and is stored with its type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `turn/start`: opens a turn.
    TurnStart,
    /// `turn/end`: closes the open turn; the commit point.
    TurnEnd,
    /// `step/start`: opens a step inside the open turn.
    StepStart,
    /// `step/end`: closes the open step.
    StepEnd,
    /// `user/message`.
    UserMessage,
    /// `assistant/chunk`: one raw stream chunk of the open step.
    AssistantChunk,
    /// `assistant/message`.
    AssistantMessage,
    /// `tool/call`: a tool call recorded as started.
    ToolCall,
    /// `tool/result`.
    ToolResult,
    /// `session/end-seed`: marks where a fork's inherited history ends.
    EndSeed,
    /// `todo/write`.
    TodoWrite,
    /// `request/header`.
    RequestHeader,
    /// `request/context`.
    RequestContext,
    /// Any other type (plugin events); its name is stored with the event.
    Other,
}

impl EventKind {
    /// Classifies a type name.
    pub fn of(event_type: &str) -> EventKind {
        match event_type {
            "turn/start" => EventKind::TurnStart,
            "turn/end" => EventKind::TurnEnd,
            "step/start" => EventKind::StepStart,
            "step/end" => EventKind::StepEnd,
            "user/message" => EventKind::UserMessage,
            "assistant/chunk" => EventKind::AssistantChunk,
            "assistant/message" => EventKind::AssistantMessage,
            "tool/call" => EventKind::ToolCall,
            "tool/result" => EventKind::ToolResult,
            "session/end-seed" => EventKind::EndSeed,
            "todo/write" => EventKind::TodoWrite,
            "request/header" => EventKind::RequestHeader,
            "request/context" => EventKind::RequestContext,
            _ => EventKind::Other,
        }
    }

    /// The type name of a known kind; `None` for [`EventKind::Other`].
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            EventKind::TurnStart => "turn/start",
            EventKind::TurnEnd => "turn/end",
            EventKind::StepStart => "step/start",
            EventKind::StepEnd => "step/end",
            EventKind::UserMessage => "user/message",
            EventKind::AssistantChunk => "assistant/chunk",
            EventKind::AssistantMessage => "assistant/message",
            EventKind::ToolCall => "tool/call",
            EventKind::ToolResult => "tool/result",
            EventKind::EndSeed => "session/end-seed",
            EventKind::TodoWrite => "todo/write",
            EventKind::RequestHeader => "request/header",
            EventKind::RequestContext => "request/context",
            EventKind::Other => return None,
        })
    }

    /// Surface types are the only ones that may carry `surfaceOp` and
    /// `sourceEventSeqs`.
    pub fn is_surface(self) -> bool {
        matches!(
            self,
            EventKind::UserMessage | EventKind::AssistantMessage | EventKind::ToolResult
        )
    }
}

/// Validated JSON text, kept exactly as written.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// Validates `text` as one JSON value. Surrounding whitespace is removed;
    /// everything else is kept byte for byte.
    ///
    /// ```
    /// use turnwal::RawJson;
    /// let raw = RawJson::parse(r#" {"n": 1e+21, "s": "\ud800"} "#).unwrap();
    /// assert_eq!(raw.get(), r#"{"n": 1e+21, "s": "\ud800"}"#);
    /// assert!(RawJson::parse("NaN").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<RawJson, json::JsonError> {
        let trimmed = text.trim_matches([' ', '\n', '\r', '\t']);
        json::validate(trimmed).map_err(|e| shift(e, text, trimmed))?;
        Ok(RawJson(trimmed.into()))
    }

    /// Wraps text the caller has already validated (bytes read back from a
    /// checksummed record, or produced by our own serializer).
    pub(crate) fn trusted(text: impl Into<Box<str>>) -> RawJson {
        RawJson(text.into())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl From<Box<RawValue>> for RawJson {
    fn from(raw: Box<RawValue>) -> RawJson {
        RawJson(raw.get().into())
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reports an error found in `inner` (a subslice of `outer`) at its offset
/// in `outer`.
fn shift(mut e: json::JsonError, outer: &str, inner: &str) -> json::JsonError {
    e.offset += inner.as_ptr() as usize - outer.as_ptr() as usize;
    e
}

/// The type name of an event: a known kind costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TypeName {
    Known(EventKind),
    Other(Box<str>),
}

impl TypeName {
    fn as_str(&self) -> &str {
        match self {
            TypeName::Known(kind) => kind.name().expect("known kinds have names"),
            TypeName::Other(name) => name,
        }
    }
}

/// One session event.
///
/// ```
/// use turnwal::Event;
/// let e = Event::new("user/message", 1, 1_700_000_000_000, r#"{"id":"m1","text":"hi"}"#).unwrap();
/// assert_eq!(e.event_type(), "user/message");
/// assert_eq!(e.data().get(), r#"{"id":"m1","text":"hi"}"#);
/// assert_eq!(
///     e.to_json(),
///     r#"{"type":"user/message","seq":1,"time":1700000000000,"data":{"id":"m1","text":"hi"}}"#
/// );
/// ```
#[derive(Clone)]
pub struct Event {
    name: TypeName,
    seq: u64,
    time: i64,
    data: RawJson,
    ignorable: bool,
    source_event_seqs: Option<RawJson>,
    surface_op: Option<RawJson>,
    surface_op_first: bool,
    /// What the turn contract reads from `data`, found while validating it;
    /// `None` for events read back from storage, which compute it on demand.
    facts: Option<Facts>,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        // `facts` is derived from `data`: it only says whether it is cached.
        self.name == other.name
            && self.seq == other.seq
            && self.time == other.time
            && self.data == other.data
            && self.ignorable == other.ignorable
            && self.source_event_seqs == other.source_event_seqs
            && self.surface_op == other.surface_op
            && self.surface_op_first == other.surface_op_first
    }
}

impl Eq for Event {}

impl Hash for Event {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.seq.hash(state);
        self.time.hash(state);
        self.data.hash(state);
        self.ignorable.hash(state);
        self.source_event_seqs.hash(state);
        self.surface_op.hash(state);
        self.surface_op_first.hash(state);
    }
}

impl Event {
    /// Builds an event, validating the type name, seq, time and `data` JSON.
    pub fn new(event_type: &str, seq: u64, time: i64, data: &str) -> Result<Event, EventError> {
        let fail = |reason: String| EventError::new(reason).at_seq(seq).of_type(event_type);
        let trimmed = data.trim_matches([' ', '\n', '\r', '\t']);
        let facts = json::data_facts(trimmed).map_err(|e| {
            fail(format!(
                "data is not valid JSON: {}",
                shift(e, data, trimmed)
            ))
        })?;
        let mut event = Event::from_parts(event_type, seq, time, RawJson::trusted(trimmed))?;
        event.facts = Some(facts);
        Ok(event)
    }

    /// Builds an event from already validated JSON.
    pub fn from_parts(
        event_type: &str,
        seq: u64,
        time: i64,
        data: RawJson,
    ) -> Result<Event, EventError> {
        validate_type_name(event_type).map_err(|e| e.at_seq(seq))?;
        check_seq(seq).map_err(|e| e.at_seq(seq).of_type(event_type))?;
        check_time(time).map_err(|e| e.at_seq(seq).of_type(event_type))?;
        Ok(Event {
            name: type_name(event_type),
            seq,
            time,
            data,
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
            surface_op_first: false,
            facts: None,
        })
    }

    /// Parses one complete event from its JSON envelope (`seq` and `time`
    /// required). Any top-level key other than the seven envelope keys is
    /// rejected.
    ///
    /// ```
    /// use turnwal::Event;
    /// let e = Event::from_json(br#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#).unwrap();
    /// assert_eq!((e.seq(), e.time()), (0, 5));
    /// let err = Event::from_json(br#"{"type":"x","seq":0,"time":5,"data":1,"extra":2}"#).unwrap_err();
    /// assert!(err.to_string().contains("unknown field `extra`"));
    /// ```
    pub fn from_json(line: &[u8]) -> Result<Event, EventError> {
        let incoming = IncomingEvent::parse(line)?;
        let seq = incoming
            .seq
            .ok_or_else(|| incoming.error("missing field `seq`"))?;
        let time = incoming
            .time
            .ok_or_else(|| incoming.error("missing field `time`"))?;
        Ok(incoming.into_event(seq, time))
    }

    /// Marks the event `ignorable: true` (readers may skip an unknown type).
    pub fn with_ignorable(mut self) -> Event {
        self.ignorable = true;
        self
    }

    /// Sets `surfaceOp` (`"append"` or `{"op":"replace","start":S,"end":E}`).
    pub fn with_surface_op(mut self, surface_op: &str) -> Result<Event, EventError> {
        let raw = RawJson::parse(surface_op)
            .map_err(|e| self.error(format!("surfaceOp is not valid JSON: {e}")))?;
        check_surface_op(&raw).map_err(|e| self.tag(e))?;
        self.surface_op = Some(raw);
        Ok(self)
    }

    /// Sets `sourceEventSeqs`.
    pub fn with_source_event_seqs(mut self, seqs: &[u64]) -> Result<Event, EventError> {
        let text = serde_json::to_string(seqs).expect("a u64 slice always serializes");
        let raw = RawJson::trusted(text);
        check_source_event_seqs(&raw, self.seq).map_err(|e| self.tag(e))?;
        self.source_event_seqs = Some(raw);
        Ok(self)
    }

    /// Writes `surfaceOp` before `sourceEventSeqs` in the JSON form, as the
    /// upstream harness's synthetic closers do.
    pub(crate) fn with_surface_op_first(mut self) -> Event {
        self.surface_op_first = true;
        self
    }

    /// Sets the envelope's optional members (`ignorable`,
    /// `sourceEventSeqs`, `surfaceOp`, and whether `surfaceOp` is written
    /// first): how a migrated or re-read event keeps what it carried.
    pub fn set_extras(
        &mut self,
        ignorable: bool,
        source_event_seqs: Option<RawJson>,
        surface_op: Option<RawJson>,
        surface_op_first: bool,
    ) {
        self.ignorable = ignorable;
        self.source_event_seqs = source_event_seqs;
        self.surface_op = surface_op;
        self.surface_op_first = surface_op_first;
    }

    /// The type name, e.g. `"turn/start"`.
    pub fn event_type(&self) -> &str {
        self.name.as_str()
    }

    /// The classified type.
    pub fn kind(&self) -> EventKind {
        match &self.name {
            TypeName::Known(kind) => *kind,
            TypeName::Other(_) => EventKind::Other,
        }
    }

    /// Position in the session log: event `i` has seq `i`.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Replaces the seq (used when a caller leaves seqs to the engine).
    pub fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Unix time in milliseconds.
    pub fn time(&self) -> i64 {
        self.time
    }

    /// The payload, exactly as written.
    pub fn data(&self) -> &RawJson {
        &self.data
    }

    /// What the turn contract reads from `data`: cached when the event was
    /// built from text, computed otherwise. `Err` when `data` is not JSON
    /// (only possible for damaged stored bytes).
    pub fn facts(&self) -> Result<Facts, json::JsonError> {
        match self.facts {
            Some(facts) => Ok(facts),
            None => json::data_facts(self.data.get()),
        }
    }

    /// Whether the event carries `ignorable: true`.
    pub fn ignorable(&self) -> bool {
        self.ignorable
    }

    /// `sourceEventSeqs`, as written.
    pub fn source_event_seqs(&self) -> Option<&RawJson> {
        self.source_event_seqs.as_ref()
    }

    /// `surfaceOp`, as written.
    pub fn surface_op(&self) -> Option<&RawJson> {
        self.surface_op.as_ref()
    }

    /// Whether `surfaceOp` is written before `sourceEventSeqs`.
    pub fn surface_op_first(&self) -> bool {
        self.surface_op_first
    }

    /// The envelope as one line of JSON (no newline).
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(self.data.get().len() + 64);
        self.write_json(&mut out);
        String::from_utf8(out).expect("JSON output is UTF-8")
    }

    /// Appends the envelope's JSON to `out`, in the upstream key order:
    /// `type, seq, time, data`, then `ignorable`, `sourceEventSeqs`, `surfaceOp`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        EventRef::from(self).write_json(out);
    }

    fn error(&self, reason: impl Into<String>) -> EventError {
        self.tag(EventError::new(reason))
    }

    /// `e`, naming this event's seq and type.
    fn tag(&self, e: EventError) -> EventError {
        e.at_seq(self.seq).of_type(self.event_type())
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// Writes `s` as a JSON string literal.
pub(crate) fn write_json_string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

fn type_name(event_type: &str) -> TypeName {
    match EventKind::of(event_type) {
        EventKind::Other => TypeName::Other(event_type.into()),
        kind => TypeName::Known(kind),
    }
}

/// What [`Event::from_parts`] checks of an event read from storage (its
/// type name, seq and time), without building it: a reader that borrows
/// stored events checks them once, up front, so that building one later
/// cannot fail.
pub(crate) fn check_stored_parts(event_type: &str, seq: u64, time: i64) -> Result<(), EventError> {
    validate_type_name(event_type)?;
    check_seq(seq)?;
    check_time(time)
}

fn validate_type_name(event_type: &str) -> Result<(), EventError> {
    if event_type.is_empty() {
        return Err(EventError::new("type must be a non-empty string"));
    }
    if event_type.len() > MAX_TYPE_LEN {
        return Err(EventError::new(format!(
            "type is {} bytes long; the limit is {MAX_TYPE_LEN}",
            event_type.len()
        )));
    }
    Ok(())
}

fn check_seq(seq: u64) -> Result<(), EventError> {
    if seq > MAX_SAFE_INTEGER {
        return Err(EventError::new(format!(
            "seq {seq} is not a safe integer (max {MAX_SAFE_INTEGER})"
        )));
    }
    Ok(())
}

fn check_time(time: i64) -> Result<(), EventError> {
    if time.unsigned_abs() > MAX_SAFE_INTEGER {
        return Err(EventError::new(format!(
            "time {time} is not a safe integer"
        )));
    }
    Ok(())
}

/// `surfaceOp` is `"append"` or `{"op":"replace","start":S,"end":E}` with
/// safe-integer seqs `S <= E`.
fn check_surface_op(raw: &RawJson) -> Result<(), EventError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Replace<'a> {
        #[serde(borrow)]
        op: Cow<'a, str>,
        start: u64,
        end: u64,
    }
    if raw.get() == "\"append\"" {
        return Ok(());
    }
    let replace: Replace = serde_json::from_str(raw.get()).map_err(|_| {
        EventError::new(format!(
            "surfaceOp must be \"append\" or {{\"op\":\"replace\",\"start\":S,\"end\":E}}, got {}",
            abbreviate(raw.get())
        ))
    })?;
    if replace.op != "replace" {
        return Err(EventError::new(format!(
            "surfaceOp.op must be \"replace\", got {:?}",
            replace.op
        )));
    }
    if replace.start > replace.end || replace.end > MAX_SAFE_INTEGER {
        return Err(EventError::new(format!(
            "surfaceOp replace range {}..={} is invalid",
            replace.start, replace.end
        )));
    }
    Ok(())
}

/// `sourceEventSeqs` holds unique, earlier, non-negative safe integers.
/// `sourceEventSeqs` as `JSON.stringify` writes it (`[1,2]`): whitespace
/// and any other spelling of the same integers dropped, so that every
/// backend stores and returns the same text (SQLite keeps the list as
/// varints, upstream's JSONL as `JSON.stringify` wrote it).
pub(crate) fn canonical_source_event_seqs(raw: &str) -> Result<RawJson, EventError> {
    let seqs: Vec<u64> = serde_json::from_str(raw).map_err(|_| not_a_seq_list(raw))?;
    Ok(RawJson::trusted(
        serde_json::to_string(&seqs).expect("a u64 list always serializes"),
    ))
}

fn not_a_seq_list(raw: &str) -> EventError {
    EventError::new(format!(
        "sourceEventSeqs must be an array of non-negative safe integers, got {}",
        abbreviate(raw)
    ))
}

fn check_source_event_seqs(raw: &RawJson, seq: u64) -> Result<(), EventError> {
    let seqs: Vec<u64> = serde_json::from_str(raw.get()).map_err(|_| not_a_seq_list(raw.get()))?;
    let mut seen = std::collections::HashSet::with_capacity(seqs.len());
    for s in seqs {
        if s >= seq {
            return Err(EventError::new(format!(
                "sourceEventSeqs entry {s} is not earlier than seq {seq}"
            )));
        }
        if !seen.insert(s) {
            return Err(EventError::new(format!(
                "sourceEventSeqs entry {s} appears twice"
            )));
        }
    }
    Ok(())
}

/// A malformed event, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError {
    /// Input line (1-based), when the event came from a line-oriented input.
    pub line: Option<u64>,
    /// The event's seq, when known.
    pub seq: Option<u64>,
    /// The event's type, when known.
    pub event_type: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl EventError {
    /// An error with only a reason.
    pub fn new(reason: impl Into<String>) -> EventError {
        EventError {
            line: None,
            seq: None,
            event_type: None,
            reason: reason.into(),
        }
    }

    /// Adds the seq.
    pub fn at_seq(mut self, seq: u64) -> EventError {
        self.seq = Some(seq);
        self
    }

    /// Adds the type.
    pub fn of_type(mut self, event_type: &str) -> EventError {
        self.event_type = Some(event_type.to_owned());
        self
    }

    /// Adds the input line number (1-based).
    pub fn at_line(mut self, line: u64) -> EventError {
        self.line = Some(line);
        self
    }
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut place = Vec::new();
        if let Some(line) = self.line {
            place.push(format!("line {line}"));
        }
        if let Some(seq) = self.seq {
            place.push(format!("seq {seq}"));
        }
        if let Some(t) = &self.event_type {
            // A type is whatever the producer wrote: quoted bounded.
            place.push(format!("type {:?}", crate::text::excerpt(t)));
        }
        // A reason may quote the value (a parser's message names an
        // unknown key whole): bounded.
        let reason = crate::text::excerpt_within(&self.reason, crate::text::REASON_CHARS);
        if place.is_empty() {
            write!(f, "invalid event: {reason}")
        } else {
            write!(f, "invalid event at {}: {reason}", place.join(", "))
        }
    }
}

impl std::error::Error for EventError {}

/// Milliseconds since the Unix epoch (the clock events and headers use).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_survives_byte_for_byte() {
        for data in [
            r#"{"n":1e+21,"z":-0.0,"big":123456789012345678901234567890}"#,
            r#"{"b":1,"a":2}"#,
            r#""\ud800""#,
            r#"{"s":"\udc00\ud800x","e":"\u0041\n\/"}"#,
            "null",
        ] {
            let e = Event::new("x/y", 0, 1, data).unwrap();
            assert_eq!(e.data().get(), data);
            let back = Event::from_json(e.to_json().as_bytes()).unwrap();
            assert_eq!(back.data().get(), data);
            assert_eq!(back, e);
        }
    }

    #[test]
    fn source_event_seqs_take_their_canonical_spelling_and_keep_their_place() {
        let line = br#"{"type":"user/message","seq":3,"time":1,"data":{},"surfaceOp":"append","sourceEventSeqs":[ 0 ,
 2,1 ]}"#;
        let e = Event::from_json(line).unwrap();
        assert_eq!(e.source_event_seqs().unwrap().get(), "[0,2,1]");
        assert_eq!(
            e.to_json(),
            r#"{"type":"user/message","seq":3,"time":1,"data":{},"surfaceOp":"append","sourceEventSeqs":[0,2,1]}"#
        );
        for (bad, why) in [
            (r#"[1.0]"#, "non-negative safe integers"),
            (r#"[-1]"#, "non-negative safe integers"),
            (r#""1""#, "non-negative safe integers"),
            (r#"[3]"#, "not earlier than seq 3"),
            (r#"[1,1]"#, "appears twice"),
        ] {
            let line = format!(
                r#"{{"type":"user/message","seq":3,"time":1,"data":{{}},"sourceEventSeqs":{bad}}}"#
            );
            let err = Event::from_json(line.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn rejects_non_json_with_seq_and_reason() {
        let err = Event::new("x", 7, 1, "NaN").unwrap_err();
        assert_eq!(err.seq, Some(7));
        assert!(err.reason.contains("not valid JSON"), "{err}");
        let err = IncomingEvent::parse(b"{\"type\":\"x\",\"data\":\"\xff\"}").unwrap_err();
        assert!(err.reason.contains("invalid UTF-8 at byte 20"), "{err}");
        let err = IncomingEvent::parse(br#"{"type":"x"}"#).unwrap_err();
        assert!(err.reason.contains("missing field `data`"), "{err}");
        let err = IncomingEvent::parse(br#"{"data":1}"#).unwrap_err();
        assert!(err.reason.contains("missing field `type`"), "{err}");
        let err = IncomingEvent::parse(br#"{"type":"x","data":1} x"#).unwrap_err();
        assert!(err.reason.contains("trailing characters"), "{err}");
        let err = IncomingEvent::parse(br#"{"type":"x","data":Infinity}"#).unwrap_err();
        assert!(err.reason.contains("invalid event JSON"), "{err}");
    }

    #[test]
    fn envelope_keys_are_checked() {
        let err = IncomingEvent::parse(br#"{"type":"x","data":1,"ignorable":false}"#).unwrap_err();
        assert!(
            err.reason
                .contains("ignorable must be absent or exactly true")
        );
        let err = IncomingEvent::parse(br#"{"type":"x","data":1,"surfaceOp":null}"#).unwrap_err();
        assert!(err.reason.contains("surfaceOp must be"), "{err}");
        let err = IncomingEvent::parse(br#"{"type":"x","seq":null,"data":1}"#).unwrap_err();
        assert_eq!(err.reason, "seq must be a non-negative integer, got null");
        let err = IncomingEvent::parse(br#"{"type":"x","seq":3,"data":1,"sourceEventSeqs":[1,3]}"#)
            .unwrap_err();
        assert!(
            err.reason.contains("entry 3 is not earlier than seq 3"),
            "{err}"
        );
        let err = IncomingEvent::parse(br#"{"type":"x","seq":-1,"data":1}"#).unwrap_err();
        assert_eq!(err.reason, "seq must be a non-negative integer, got -1");
        let err = IncomingEvent::parse(br#"{"type":"x","seq":1.0,"data":1}"#).unwrap_err();
        assert_eq!(err.reason, "seq must be a non-negative integer, got 1.0");
        let err = IncomingEvent::parse(br#"{"type":"x","time":-5,"seq":1,"data":1,"seq":2}"#)
            .unwrap_err();
        assert_eq!(err.reason, "duplicate field `seq`");
        let e = IncomingEvent::parse(br#"{"type":"x","time":-5,"data":1}"#).unwrap();
        assert_eq!(e.time, Some(-5));
        let err = IncomingEvent::parse(br#"{"type":7,"data":1}"#).unwrap_err();
        assert_eq!(err.reason, "type must be a string");
        let err = IncomingEvent::parse(br#"{"type":"a\ud800","data":1}"#).unwrap_err();
        assert!(
            err.reason.starts_with("type is not a valid string: "),
            "{err}"
        );
        let e = IncomingEvent::parse(br#"{"type":"a\u002Fb","data":1}"#).unwrap();
        assert_eq!(e.event_type(), "a/b");
        let err =
            IncomingEvent::parse(br#"{"type":"x","seq":9007199254740992,"data":1}"#).unwrap_err();
        assert!(err.reason.contains("not a safe integer"), "{err}");
    }

    #[test]
    fn facts_from_a_line_point_into_data() {
        let line =
            br#"{"type":"tool/call","seq":3,"time":1,"data":{"turn":1,"step":1,"callId":"c-7"}}"#;
        let e = Event::from_json(line).unwrap();
        let facts = e.facts().unwrap();
        assert_eq!(facts.call_id.of(e.data().get()), Some("c-7"));
        assert_eq!(facts, crate::json::data_facts(e.data().get()).unwrap());
    }

    #[test]
    fn extras_keep_their_order() {
        let line = r#"{"type":"tool/result","seq":4,"time":2,"data":{},"surfaceOp":"append","sourceEventSeqs":[1]}"#;
        let e = Event::from_json(line.as_bytes()).unwrap();
        assert!(e.surface_op_first());
        assert_eq!(e.to_json(), line);
        let line = r#"{"type":"tool/result","seq":4,"time":2,"data":{},"ignorable":true,"sourceEventSeqs":[1],"surfaceOp":{"op":"replace","start":1,"end":2}}"#;
        let e = Event::from_json(line.as_bytes()).unwrap();
        assert_eq!(e.to_json(), line);
    }
}
