//! Read-time normalization of stored events, exactly as upstream's
//! coordinator applies it before it validates a stored log (reference §5):
//!
//! - `request/header-delta`, `mode/set` and `request/header` with reason
//!   `"fallback"` are refused, wherever they are;
//! - `turn/start` with a pre-react-loop `trigger` loses it;
//! - every `turn/end` is shape-checked, and old reasons are mapped
//!   (`aborted` → `{aborted, reason:{kind:"legacy"}}`, `disposed` →
//!   `{aborted, reason:{kind:"disposed"}}`, the two old `error` forms →
//!   `{error, error}`);
//! - `steering/message` becomes `user/message`;
//! - pre-identity `user/message`, `assistant/message` and `tool/result`
//!   get ids `legacy-message:<session id>:<seq>` (a replacing tool result
//!   inherits its target's id) and the current wrapper shapes.
//!
//! Only the logical view is normalized: events that match no legacy shape
//! are returned unchanged, byte for byte, and the stored log is never
//! rewritten (`Backend::read_raw` serves it as it is).

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::event::{Event, EventKind, RawJson, write_json_string};
use crate::json::Reason;
use crate::upstream::strings::canonical_string;

/// An event the upstream reader refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizeError {
    /// Its seq.
    pub seq: u64,
    /// Upstream's text.
    pub reason: String,
}

/// A JSON object's members in order (a repeated key keeps its first place
/// and its last value, as `JSON.parse` does).
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut out: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'de RawValue = map.next_value()?;
                    match out.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = value,
                        None => out.push((key, value)),
                    }
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'a> Entries<'a> {
    fn parse(text: &'a str) -> Option<Entries<'a>> {
        serde_json::from_str(text).ok()
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// `hasOnlyKeys`: every required key present, nothing outside
    /// `required + optional`.
    fn only(&self, required: &[&str], optional: &[&str]) -> bool {
        self.0
            .iter()
            .all(|(k, _)| required.contains(&k.as_str()) || optional.contains(&k.as_str()))
            && required.iter().all(|k| self.has(k))
    }

    fn string(&self, key: &str) -> Option<String> {
        self.get(key).and_then(|raw| canonical_string(raw.get()))
    }

    fn object(&self, key: &str) -> Option<Entries<'a>> {
        self.get(key).and_then(|raw| Entries::parse(raw.get()))
    }
}

/// Writes an object from `(key, JSON text)` members.
fn object(members: &[(&str, String)]) -> String {
    let mut out = Vec::new();
    out.push(b'{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(&mut out, key);
        out.push(b':');
        out.extend_from_slice(value.as_bytes());
    }
    out.push(b'}');
    String::from_utf8(out).expect("JSON text is UTF-8")
}

fn json_string(s: &str) -> String {
    let mut out = Vec::new();
    write_json_string(&mut out, s);
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// The members of `entries` with `(key, value)` set: replaced in place when
/// present, appended otherwise (JavaScript's `{...data, key: value}`).
/// The value of a JSON number as JavaScript's `Number.isSafeInteger` sees
/// it: `1.0` and `1e2` are integers; `None` for anything else.
pub fn js_safe_integer(raw: &RawValue) -> Option<i64> {
    let number: serde_json::Number = serde_json::from_str(raw.get()).ok()?;
    if let Some(n) = number.as_i64() {
        return (n.unsigned_abs() <= crate::event::MAX_SAFE_INTEGER).then_some(n);
    }
    if number.as_u64().is_some() {
        return None;
    }
    let f = number.as_f64()?;
    (f.fract() == 0.0 && f.abs() <= crate::event::MAX_SAFE_INTEGER as f64).then_some(f as i64)
}

fn spread(entries: &Entries<'_>, skip: &[&str], set: &[(&str, String)]) -> String {
    let mut members: Vec<(&str, String)> = entries
        .0
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.get().to_owned()))
        .collect();
    for (key, value) in set {
        match members.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.clone(),
            None => members.push((key, value.clone())),
        }
    }
    object(&members)
}

fn legacy_id(id: &str, seq: u64) -> String {
    json_string(&format!("legacy-message:{id}:{seq}"))
}

/// The logical view of `events` (the stored events of session `id`).
pub fn normalize(events: &[Event], id: &str) -> Result<Vec<Event>, NormalizeError> {
    normalize_owned(events.to_vec(), id)
}

/// Whether a seeking read that starts at `event` needs the log before it
/// (upstream's `needsLegacyPrefix`): a `steering/message`, or a message
/// event in a pre-identity shape, whose migration may take an id from an
/// earlier event. A seeking reader ([`Store::read_from`]) migrates the
/// suffix alone unless one of its events says so, as upstream's
/// coordinator does over a seek-capable backend.
///
/// [`Store::read_from`]: crate::Store::read_from
///
/// ```
/// use turnwal::Event;
/// use turnwal::upstream::normalize::needs_legacy_prefix;
/// let current = Event::new("tool/result", 4, 1, r#"{"message":{"id":"m"},"callId":"c"}"#).unwrap();
/// let legacy = Event::new("tool/result", 5, 1, r#"{"callId":"c","content":[],"isError":false}"#).unwrap();
/// assert!(!needs_legacy_prefix(&current));
/// assert!(needs_legacy_prefix(&legacy));
/// ```
pub fn needs_legacy_prefix(event: &impl crate::event::Tracked) -> bool {
    let (absent, present) = match event.event_type() {
        "steering/message" => return true,
        "user/message" => ("id", "content"),
        "assistant/message" => ("message", "content"),
        "tool/result" => ("message", "callId"),
        _ => return false,
    };
    // Keys as `JSON.parse` reads them (an escaped key is the same key);
    // data that is not an object needs nothing.
    Entries::parse(event.data_text()).is_some_and(|data| !data.has(absent) && data.has(present))
}

/// [`normalize`] of events the caller owns: they are rewritten in place,
/// and an event in the current shape (nearly all of them) is neither copied
/// nor parsed beyond its type.
pub fn normalize_owned(mut events: Vec<Event>, id: &str) -> Result<Vec<Event>, NormalizeError> {
    refuse_retired(&events, id)?;
    let mut normalizer = Normalizer::new(id);
    for current in &mut events {
        if Normalizer::touches(current.event_type()) {
            normalizer.migrate(current)?;
        }
    }
    Ok(events)
}

/// Upstream's read-time migrations applied one event at a time, in seq
/// order, as a cursor lends them: what [`normalize_owned`] does to a whole
/// log, without holding it.
///
/// Upstream refuses a retired form wherever it is before it migrates
/// anything, so a reader that lends events as it goes notes the retired
/// forms it passes ([`Normalizer::note`]) and, once it meets one or a
/// malformed event, reads the rest of the log for the retired forms that
/// take precedence ([`Normalizer::refusal`]) before it reports either.
///
/// ```
/// use turnwal::Event;
/// use turnwal::upstream::normalize::{Normalizer, normalize};
/// let events = vec![
///     Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
///     Event::new("steering/message", 1, 2, r#"{"turn":1,"content":"hi","source":"user"}"#).unwrap(),
/// ];
/// let mut normalizer = Normalizer::new("s");
/// let mut one_by_one = Vec::new();
/// for mut event in events.clone() {
///     normalizer.note(&event);
///     if Normalizer::touches(event.event_type()) {
///         normalizer.migrate(&mut event).unwrap();
///     }
///     one_by_one.push(event);
/// }
/// assert_eq!(normalizer.refusal(None), None);
/// assert_eq!(one_by_one, normalize(&events, "s").unwrap());
/// assert_eq!(one_by_one[1].event_type(), "user/message");
/// ```
#[derive(Debug, Clone)]
pub struct Normalizer {
    id: String,
    /// The message ids seen so far, by seq (a replacing tool result takes
    /// its target's).
    message_ids: Vec<(u64, String)>,
    /// The first of each retired form seen, in upstream's order of refusal.
    retired: [Option<u64>; 3],
}

/// The retired forms, in the order `assertSupportedEvents` looks for them.
const RETIRED: [&str; 3] = [
    "request/header-delta event",
    "mode/set event",
    "request/header reason \"fallback\"",
];

impl Normalizer {
    /// A normalizer for the stored events of session `id`.
    pub fn new(id: &str) -> Normalizer {
        Normalizer {
            id: id.to_owned(),
            message_ids: Vec::new(),
            retired: [None; 3],
        }
    }

    /// Whether events of `event_type` may be rewritten or checked by
    /// [`Normalizer::migrate`]; every other event is read as stored.
    pub fn touches(event_type: &str) -> bool {
        matches!(
            event_type,
            "turn/start"
                | "turn/end"
                | "steering/message"
                | "user/message"
                | "assistant/message"
                | "tool/result"
        )
    }

    /// Notes `event` if it is a retired form upstream refuses (its rank in
    /// upstream's order of refusal); returns whether it is one.
    pub fn note(&mut self, event: &impl crate::event::Tracked) -> bool {
        let rank = match event.event_type() {
            "request/header-delta" => 0,
            "mode/set" => 1,
            "request/header" if event.facts().is_ok_and(|f| f.reason == Reason::Fallback) => 2,
            _ => return false,
        };
        let slot = &mut self.retired[rank];
        if slot.is_none() {
            *slot = Some(event.seq());
        }
        true
    }

    /// What upstream refuses the log for, once every event has been
    /// [noted](Normalizer::note): the first retired form in its order of
    /// refusal, else `failed` (the first event [`Normalizer::migrate`]
    /// refused).
    pub fn refusal(&self, failed: Option<NormalizeError>) -> Option<NormalizeError> {
        let retired = self
            .retired
            .iter()
            .zip(RETIRED)
            .find_map(|(seq, what)| Some((((*seq)?), what)));
        match retired {
            Some((seq, what)) => Some(NormalizeError {
                seq,
                reason: format!(
                    "session \"{}\" contains unsupported legacy {what} at seq {seq}",
                    self.id
                ),
            }),
            None => failed,
        }
    }

    /// Migrates `current` in place (the next event in seq order, of a type
    /// [`Normalizer::touches`]); an event already in the current shape is
    /// left as it is.
    pub fn migrate(&mut self, current: &mut Event) -> Result<(), NormalizeError> {
        let id = self.id.as_str();
        let fail = |what: &str| NormalizeError {
            seq: current.seq(),
            reason: format!(
                "session \"{id}\" contains malformed pre-react-loop {what} at seq {}",
                current.seq()
            ),
        };
        let migrated = match current.event_type() {
            "turn/start" => turn_start(current)
                .map_err(|()| fail("turn/start"))?
                .map(|data| rebuild(current, "turn/start", data)),
            "turn/end" => turn_end(current)
                .map_err(|()| fail("turn/end"))?
                .map(|data| rebuild(current, "turn/end", data)),
            "steering/message" => {
                let data = steering(current, id).map_err(|()| fail("steering/message"))?;
                Some(rebuild(current, "user/message", data))
            }
            _ => None,
        };
        if let Some(migrated) = migrated {
            *current = migrated;
        }
        if let Some(data) = message(current, id, &self.message_ids) {
            let event_type = current.event_type().to_owned();
            *current = rebuild(current, &event_type, data);
        }
        if let Some(message_id) = message_id(current) {
            self.message_ids.push((current.seq(), message_id));
        }
        Ok(())
    }
}

fn rebuild(event: &Event, event_type: &str, data: String) -> Event {
    let mut e = Event::from_parts(
        event_type,
        event.seq(),
        event.time(),
        RawJson::trusted(data),
    )
    .expect("a stored event's envelope stays valid");
    e.set_extras(
        event.ignorable(),
        event.source_event_seqs().cloned(),
        event.surface_op().cloned(),
        event.surface_op_first(),
    );
    e
}

/// `assertSupportedEvents`: each retired form is looked for over the whole
/// log, in this order.
fn refuse_retired(events: &[Event], id: &str) -> Result<(), NormalizeError> {
    let mut normalizer = Normalizer::new(id);
    for event in events {
        normalizer.note(event);
    }
    normalizer.refusal(None).map_or(Ok(()), Err)
}

fn positive_turn(entries: &Entries<'_>) -> Option<i64> {
    entries
        .get("turn")
        .and_then(js_safe_integer)
        .filter(|t| *t >= 1)
}

/// A `turn/start` with a `trigger` loses it, once its old shape is checked.
fn turn_start(event: &Event) -> Result<Option<String>, ()> {
    let Some(data) = Entries::parse(event.data().get()) else {
        return Ok(None);
    };
    if !data.has("trigger") {
        return Ok(None);
    }
    let turn = positive_turn(&data).ok_or(())?;
    let trigger = data.object("trigger").ok_or(())?;
    if !data.only(&["turn", "trigger"], &[]) || trigger.string("kind").is_none_or(|k| k.len() <= 2)
    {
        return Err(());
    }
    Ok(Some(format!("{{\"turn\":{turn}}}")))
}

/// Every `turn/end` is shape-checked; old reasons are mapped.
fn turn_end(event: &Event) -> Result<Option<String>, ()> {
    let Some(data) = Entries::parse(event.data().get()) else {
        return Ok(None);
    };
    positive_turn(&data).ok_or(())?;
    let reason = data.object("reason").ok_or(())?;
    if !data.only(&["turn", "reason"], &[]) {
        return Err(());
    }
    let kind = reason.get("kind").ok_or(())?;
    let kind = serde_json::from_str::<String>(kind.get()).map_err(|_| ())?;
    let mapped = match kind.as_str() {
        "completed" | "blocked" | "max-tokens" | "interrupted" => {
            return if reason.only(&["kind"], &[]) {
                Ok(None)
            } else {
                Err(())
            };
        }
        "aborted" => {
            if reason.has("reason") {
                return Ok(None);
            }
            if !reason.only(&["kind"], &[]) {
                return Err(());
            }
            r#"{"kind":"aborted","reason":{"kind":"legacy"}}"#.to_owned()
        }
        "disposed" => {
            if !reason.only(&["kind"], &[]) {
                return Err(());
            }
            r#"{"kind":"aborted","reason":{"kind":"disposed"}}"#.to_owned()
        }
        "error" => {
            if reason.has("error") {
                return Ok(None);
            }
            if reason
                .get("step")
                .and_then(js_safe_integer)
                .is_none_or(|s| s < 0)
            {
                return Err(());
            }
            let number = |e: &Entries<'_>, k: &str| {
                e.get(k)
                    .is_none_or(|raw| serde_json::from_str::<serde_json::Number>(raw.get()).is_ok())
            };
            let failure = reason.object("failure");
            if failure.is_some_and(|f| {
                reason.only(&["kind", "step", "failure"], &[])
                    && f.only(
                        &["message", "code"],
                        &["status", "providerRetryAfterMs", "requestId"],
                    )
                    && f.string("message").is_some()
                    && f.string("code").is_some()
                    && number(&f, "status")
                    && number(&f, "providerRetryAfterMs")
                    && f.get("requestId")
                        .is_none_or(|_| f.string("requestId").is_some())
            }) {
                let raw = reason.get("failure").expect("checked above").get();
                format!(r#"{{"kind":"error","error":{raw}}}"#)
            } else {
                let required: &[&str] = if reason.has("code") {
                    &["kind", "step", "message", "code"]
                } else {
                    &["kind", "step", "message"]
                };
                let message = reason.string("message").ok_or(())?;
                if !reason.only(required, &[]) {
                    return Err(());
                }
                let code = if reason.has("code") {
                    reason.string("code").ok_or(())?
                } else {
                    "\"UNKNOWN\"".to_owned()
                };
                format!(r#"{{"kind":"error","error":{{"message":{message},"code":{code}}}}}"#)
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(spread(&data, &[], &[("reason", mapped)])))
}

/// `steering/message` → `user/message`.
fn steering(event: &Event, id: &str) -> Result<String, ()> {
    let data = Entries::parse(event.data().get()).ok_or(())?;
    let turn_ok = data.get("turn").and_then(js_safe_integer).is_some();
    if let Some(wrapped) = data.get("message")
        && Entries::parse(wrapped.get()).is_some()
        && turn_ok
        && data.only(&["turn", "message"], &[])
    {
        return Ok(wrapped.get().to_owned());
    }
    if !turn_ok || !data.only(&["turn", "content", "source"], &[]) {
        return Err(());
    }
    Ok(spread(
        &data,
        &["turn"],
        &[
            ("id", legacy_id(id, event.seq())),
            ("role", "\"user\"".into()),
        ],
    ))
}

/// Pre-identity message events get an id and the current wrapper.
fn message(event: &Event, id: &str, message_ids: &[(u64, String)]) -> Option<String> {
    if !matches!(
        event.kind(),
        EventKind::UserMessage | EventKind::AssistantMessage | EventKind::ToolResult
    ) {
        return None;
    }
    let text = event.data().get();
    if !text.contains("\"content\"") {
        return None;
    }
    match event.event_type() {
        "user/message" => {
            let data = Entries::parse(text)?;
            if data.has("id")
                || data.has("role")
                || data.has("message")
                || !data.has("content")
                || !data.has("source")
            {
                return None;
            }
            Some(spread(
                &data,
                &[],
                &[
                    ("id", legacy_id(id, event.seq())),
                    ("role", "\"user\"".into()),
                ],
            ))
        }
        "assistant/message" => {
            let data = Entries::parse(text)?;
            if data.has("message") || !data.has("content") || !data.has("provenance") {
                return None;
            }
            let source = match data.object("provenance") {
                Some(provenance) => spread(&provenance, &[], &[("kind", "\"model\"".into())]),
                None => r#"{"kind":"model"}"#.to_owned(),
            };
            let content = data.get("content").expect("checked").get().to_owned();
            let message = object(&[
                ("id", legacy_id(id, event.seq())),
                ("role", "\"assistant\"".into()),
                ("content", content),
                ("source", source),
            ]);
            Some(spread(
                &data,
                &["content", "provenance"],
                &[("message", message)],
            ))
        }
        "tool/result" => {
            let data = Entries::parse(text)?;
            if data.has("message")
                || !data.has("callId")
                || !data.has("content")
                || !data.has("isError")
            {
                return None;
            }
            let call_id = data.get("callId").expect("checked").get().to_owned();
            let inherited = replacement_start(event);
            let message_id = match inherited {
                None => Some(legacy_id(id, event.seq())),
                Some(start) => message_ids
                    .iter()
                    .rev()
                    .find(|(seq, _)| Some(*seq) == Some(start))
                    .map(|(_, id)| id.clone()),
            };
            let block = object(&[
                ("type", "\"tool-result\"".into()),
                ("toolCallId", call_id.clone()),
                (
                    "content",
                    data.get("content").expect("checked").get().to_owned(),
                ),
                (
                    "isError",
                    data.get("isError").expect("checked").get().to_owned(),
                ),
            ]);
            let source = object(&[("kind", "\"tool\"".into()), ("callId", call_id)]);
            let mut members = Vec::new();
            if let Some(message_id) = message_id {
                members.push(("id", message_id));
            }
            members.push(("role", "\"user\"".into()));
            members.push(("content", format!("[{block}]")));
            members.push(("source", source));
            Some(spread(
                &data,
                &["callId", "content", "isError"],
                &[("message", object(&members))],
            ))
        }
        _ => None,
    }
}

/// The `start` of a replacing `surfaceOp`.
fn replacement_start(event: &Event) -> Option<u64> {
    let op = Entries::parse(event.surface_op()?.get())?;
    if op.string("op").as_deref() != Some("\"replace\"") {
        return None;
    }
    op.get("start")
        .and_then(js_safe_integer)
        .and_then(|s| u64::try_from(s).ok())
}

/// The message id an event carries (`data.id` of a user message, else
/// `data.message.id`), as JSON text.
fn message_id(event: &Event) -> Option<String> {
    if !matches!(
        event.kind(),
        EventKind::UserMessage | EventKind::AssistantMessage | EventKind::ToolResult
    ) {
        return None;
    }
    let data = Entries::parse(event.data().get())?;
    if event.kind() == EventKind::UserMessage {
        data.string("id")
    } else {
        data.object("message")?.string("id")
    }
}
