//! Events as producers hand them in: one JSON object per line, parsed and
//! validated in a single pass that also finds what the turn contract reads.

use std::borrow::Cow;

use super::{
    Event, EventError, MAX_SAFE_INTEGER, RawJson, TypeName, abbreviate,
    canonical_source_event_seqs, check_seq, check_source_event_seqs, check_surface_op, check_time,
    type_name, validate_type_name,
};
use crate::json::{Facts, JsonError, Num, Scanner};

/// An event as a producer hands it in: `seq` and `time` may be left to the
/// engine (the `turnwal append` line format).
#[derive(Debug)]
pub struct IncomingEvent {
    name: TypeName,
    /// The seq the producer gave, if any.
    pub seq: Option<u64>,
    /// The time the producer gave, if any.
    pub time: Option<i64>,
    data: RawJson,
    facts: Facts,
    ignorable: bool,
    source_event_seqs: Option<RawJson>,
    surface_op: Option<RawJson>,
    surface_op_first: bool,
}

const KEYS: &str = "`type`, `seq`, `time`, `data`, `ignorable`, `sourceEventSeqs`, `surfaceOp`";

/// The envelope's fields as found in the text.
#[derive(Default)]
struct Envelope<'a> {
    event_type: Option<Cow<'a, str>>,
    seq: Option<u64>,
    time: Option<i64>,
    data: Option<(&'a str, Facts)>,
    ignorable: Option<&'a str>,
    source_event_seqs: Option<&'a str>,
    surface_op: Option<&'a str>,
    surface_op_first: bool,
}

/// A problem found inside the object: structural (with its offset) or about
/// a field's meaning.
enum Problem {
    Json(JsonError),
    Field(String),
}

impl From<JsonError> for Problem {
    fn from(e: JsonError) -> Problem {
        Problem::Json(e)
    }
}

/// A range of `bytes` the scanner has passed as (part of) a JSON value.
fn scanned(bytes: &[u8], start: usize, end: usize) -> &str {
    let slice = &bytes[start..end];
    debug_assert!(std::str::from_utf8(slice).is_ok());
    // SAFETY: `Scanner::new_unchecked` checked every string in the range
    // for UTF-8, and JSON allows no other non-ASCII bytes: a range that
    // holds whole scanned values (or a string's contents) is UTF-8.
    unsafe { std::str::from_utf8_unchecked(slice) }
}

fn parse_envelope(text: &[u8]) -> Result<Envelope<'_>, String> {
    let mut s = Scanner::new_unchecked(text);
    let mut env = Envelope::default();
    let mut field: Option<String> = None;
    s.ws();
    if s.pos() >= text.len() || text[s.pos()] != b'{' {
        return Err(format!(
            "invalid event JSON: expected an object at byte {}",
            s.pos()
        ));
    }
    let result = s.object(1, |s, key, depth| {
        let name = key.bytes_of(text).unwrap_or_default();
        match member(s, &mut env, name, text, depth) {
            Ok(()) => Ok(()),
            Err(Problem::Json(e)) => Err(e),
            Err(Problem::Field(reason)) => {
                field = Some(reason);
                Err(JsonError {
                    offset: s.pos(),
                    message: "invalid field",
                })
            }
        }
    });
    if let Some(reason) = field {
        return Err(reason);
    }
    result
        .and_then(|()| s.end())
        .map_err(|e| format!("invalid event JSON: {e}"))?;
    if env.event_type.is_none() {
        return Err("missing field `type`".into());
    }
    if env.data.is_none() {
        return Err("missing field `data`".into());
    }
    Ok(env)
}

fn member<'a>(
    s: &mut Scanner<'a>,
    env: &mut Envelope<'a>,
    name: &[u8],
    text: &'a [u8],
    depth: usize,
) -> Result<(), Problem> {
    let duplicate = || {
        Problem::Field(format!(
            "duplicate field `{}`",
            String::from_utf8_lossy(name)
        ))
    };
    s.ws();
    let start = s.pos();
    let next = text.get(start).copied();
    match name {
        b"type" => {
            if env.event_type.is_some() {
                return Err(duplicate());
            }
            if next != Some(b'"') {
                s.value(depth)?;
                return Err(Problem::Field("type must be a string".into()));
            }
            let span = s.string()?;
            let raw = span.bytes_of(text).unwrap_or_default();
            let raw = scanned(raw, 0, raw.len());
            env.event_type = Some(decode_string(raw)?);
        }
        b"seq" => {
            if env.seq.is_some() {
                return Err(duplicate());
            }
            env.seq = Some(integer(s, text, depth, false)?.unsigned_abs());
        }
        b"time" => {
            if env.time.is_some() {
                return Err(duplicate());
            }
            env.time = Some(integer(s, text, depth, true)?);
        }
        b"data" => {
            if env.data.is_some() {
                return Err(duplicate());
            }
            let facts = s.data_value()?.relative_to(start);
            env.data = Some((scanned(text, start, s.pos()), facts));
        }
        b"ignorable" | b"sourceEventSeqs" | b"surfaceOp" => {
            s.value(depth)?;
            let raw = scanned(text, start, s.pos());
            let slot = match name {
                b"ignorable" => &mut env.ignorable,
                b"sourceEventSeqs" => &mut env.source_event_seqs,
                _ => {
                    env.surface_op_first = env.source_event_seqs.is_none();
                    &mut env.surface_op
                }
            };
            if slot.replace(raw).is_some() {
                return Err(duplicate());
            }
        }
        other => {
            return Err(Problem::Field(format!(
                "unknown field `{}`, expected one of {KEYS}",
                String::from_utf8_lossy(other)
            )));
        }
    }
    Ok(())
}

/// A `seq` (non-negative) or `time` (signed) value.
fn integer(s: &mut Scanner<'_>, text: &[u8], depth: usize, signed: bool) -> Result<i64, Problem> {
    let start = s.pos();
    let negative = text.get(start) == Some(&b'-');
    let num = if negative {
        // The digits after the sign, scanned as a non-negative number.
        let mut digits = Scanner::new(&text[start + 1..]);
        let n = digits.number().map_err(|e| JsonError {
            offset: e.offset + start + 1,
            ..e
        })?;
        s.value(depth)?;
        n
    } else if matches!(text.get(start), Some(b'0'..=b'9')) {
        s.number()?
    } else {
        s.value(depth)?;
        Num::Invalid
    };
    let raw = scanned(text, start, s.pos());
    let what = if signed { "time" } else { "seq" };
    match (num, negative) {
        (Num::Int(n), false) if n <= i64::MAX as u64 => Ok(n as i64),
        (Num::Int(n), true) if signed && n <= i64::MAX as u64 => Ok(-(n as i64)),
        _ => Err(Problem::Field(format!(
            "{what} must be {} integer, got {}",
            if signed { "an" } else { "a non-negative" },
            abbreviate(raw)
        ))),
    }
}

/// Checks UTF-8 with SIMD (the scalar check costs as much as all of the JSON
/// scanning on text with non-ASCII characters); the slow check only runs to
/// name the offset of an error.
fn utf8(bytes: &[u8]) -> Result<&str, EventError> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(_) => Err(match std::str::from_utf8(bytes) {
            Err(e) => EventError::new(format!("invalid UTF-8 at byte {}", e.valid_up_to())),
            Ok(_) => EventError::new("invalid UTF-8"),
        }),
    }
}

/// The value of a JSON string's raw contents; escapes are rare in type names.
fn decode_string(raw: &str) -> Result<Cow<'_, str>, Problem> {
    if !raw.contains('\\') {
        return Ok(Cow::Borrowed(raw));
    }
    serde_json::from_str::<String>(&format!("\"{raw}\""))
        .map(Cow::Owned)
        .map_err(|e| Problem::Field(format!("type is not a valid string: {e}")))
}

impl IncomingEvent {
    /// Parses one JSON object. `type` and `data` are required, `seq` and
    /// `time` optional; unknown keys, invalid UTF-8, invalid JSON and
    /// non-JSON tokens (`NaN`, `Infinity`) are rejected with the reason.
    ///
    /// ```
    /// use turnwal::IncomingEvent;
    /// let e = IncomingEvent::parse(br#"{"type":"turn/start","data":{"turn":1}}"#).unwrap();
    /// assert_eq!((e.event_type(), e.seq, e.time), ("turn/start", None, None));
    /// let err = IncomingEvent::parse(br#"{"type":"x","data":NaN}"#).unwrap_err();
    /// assert_eq!(err.reason, "invalid event JSON: expected a value at byte 19");
    /// ```
    pub fn parse(line: &[u8]) -> Result<IncomingEvent, EventError> {
        let env = parse_envelope(line).map_err(|reason| match utf8(line) {
            // A text that is not UTF-8 is reported as that, wherever the
            // scan happened to stop.
            Err(e) => e,
            Ok(_) => EventError::new(reason),
        })?;
        let event_type = env.event_type.expect("checked by parse_envelope");
        let (data, facts) = env.data.expect("checked by parse_envelope");
        let seq = env.seq;
        let tag = |e: EventError| {
            let err = e.of_type(&event_type);
            match seq {
                Some(s) => err.at_seq(s),
                None => err,
            }
        };
        validate_type_name(&event_type).map_err(tag)?;
        if let Some(s) = seq {
            check_seq(s).map_err(tag)?;
        }
        if let Some(t) = env.time {
            check_time(t).map_err(tag)?;
        }
        let ignorable = match env.ignorable {
            None => false,
            Some("true") => true,
            Some(raw) => {
                return Err(tag(EventError::new(format!(
                    "ignorable must be absent or exactly true, got {}",
                    abbreviate(raw)
                ))));
            }
        };
        let source_event_seqs = env
            .source_event_seqs
            .map(canonical_source_event_seqs)
            .transpose()
            .map_err(tag)?;
        let surface_op = env.surface_op.map(RawJson::trusted);
        if let Some(raw) = &surface_op {
            check_surface_op(raw).map_err(tag)?;
        }
        if let Some(raw) = &source_event_seqs {
            // Without a seq the "earlier than" half waits for `complete`.
            check_source_event_seqs(raw, seq.unwrap_or(MAX_SAFE_INTEGER)).map_err(tag)?;
        }
        Ok(IncomingEvent {
            name: type_name(&event_type),
            seq,
            time: env.time,
            data: RawJson::trusted(data),
            facts,
            ignorable,
            surface_op_first: env.surface_op_first
                && source_event_seqs.is_some()
                && surface_op.is_some(),
            source_event_seqs,
            surface_op,
        })
    }

    /// The event's type name.
    pub fn event_type(&self) -> &str {
        self.name.as_str()
    }

    /// Completes the event with its seq and time.
    pub fn into_event(self, seq: u64, time: i64) -> Event {
        Event {
            name: self.name,
            seq,
            time,
            data: self.data,
            ignorable: self.ignorable,
            source_event_seqs: self.source_event_seqs,
            surface_op: self.surface_op,
            surface_op_first: self.surface_op_first,
            facts: Some(self.facts),
        }
    }

    /// Like [`IncomingEvent::into_event`], but re-checks what depends on the
    /// final seq and time (`sourceEventSeqs` must name earlier seqs).
    pub fn complete(self, seq: u64, time: i64) -> Result<Event, EventError> {
        check_seq(seq).map_err(|e| self.tag(e))?;
        check_time(time).map_err(|e| self.tag(e))?;
        if let Some(raw) = &self.source_event_seqs {
            check_source_event_seqs(raw, seq)
                .map_err(|e| e.at_seq(seq).of_type(self.event_type()))?;
        }
        Ok(self.into_event(seq, time))
    }

    /// An error about this event, naming its type and (if given) seq.
    pub(super) fn error(&self, reason: impl Into<String>) -> EventError {
        self.tag(EventError::new(reason))
    }

    /// `e`, naming this event's type and (if given) seq.
    fn tag(&self, e: EventError) -> EventError {
        let err = e.of_type(self.event_type());
        match self.seq {
            Some(s) => err.at_seq(s),
            None => err,
        }
    }
}
