//! Upstream's packing of `assistant/chunk` delta runs, shared by the
//! formats that store it (SQLite's packed rows, JSONL's packed lines):
//! which deltas pack (only those whose `data` is byte for byte what a packed
//! record decodes back to, so packing never changes a byte), how a run
//! continues, and the packed record's `data` text.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::strings::canonical_string;
use crate::event::EventRef;
use crate::event::{Event, EventKind, MAX_SAFE_INTEGER};

/// Fewest members of a packed row; shorter runs stay scalar.
pub const MIN_PACKED_MEMBERS: usize = 3;
/// Most members of a packed row; longer runs are split.
pub const MAX_PACKED_MEMBERS: usize = 1024;
/// Largest uncompressed `data` of a packed row, in bytes.
pub const MAX_PACKED_DATA_BYTES: usize = 1 << 20;
/// The packed tag of `text-delta` runs.
pub const TEXT_CHUNKS: &str = "text-chunks";
/// The packed tag of `reasoning-delta` runs.
pub const REASONING_CHUNKS: &str = "reasoning-chunks";
/// The packed tag of `tool-call-delta` runs.
pub const TOOL_CALL_CHUNKS: &str = "tool-call-chunks";

/// The mark turnwal appends to `surface_op` when the event's key order
/// (`surfaceOp` before or after `sourceEventSeqs`) is not the one
/// [`surface_first_by_default`] gives (JSON readers ignore trailing
/// whitespace).
pub const SURFACE_FIRST_MARK: char = ' ';

/// The key order a row without the mark has: `surfaceOp` first for the
/// synthetic `tool/result` closers recovery writes (upstream's
/// `interruptedTurnClosers` creates them in that order), after
/// `sourceEventSeqs` for everything else. So recovery's closer rows, and
/// every event in the usual order, are stored byte for byte as upstream
/// stores them.
pub fn surface_first_by_default(event_type: &str, data: &str) -> bool {
    event_type == "tool/result"
        && data.contains(r#""id":"interrupted-tool-result-"#)
        && (data.contains(r#""code":"TOOL_NOT_STARTED""#)
            || data.contains(r#""code":"TOOL_OUTCOME_UNKNOWN""#))
}

// ---------------------------------------------------------------------------
// Packed runs
// ---------------------------------------------------------------------------

/// The kind of a packable delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaKind {
    /// `text-delta`, packed as `text-chunks`.
    Text,
    /// `reasoning-delta`, packed as `reasoning-chunks`.
    Reasoning,
    /// `tool-call-delta`, packed as `tool-call-chunks`.
    ToolCall,
}

impl DeltaKind {
    pub(crate) fn tag(self) -> &'static str {
        match self {
            DeltaKind::Text => TEXT_CHUNKS,
            DeltaKind::Reasoning => REASONING_CHUNKS,
            DeltaKind::ToolCall => TOOL_CALL_CHUNKS,
        }
    }

    pub(crate) fn of_tag(tag: &str) -> Option<DeltaKind> {
        match tag {
            TEXT_CHUNKS => Some(DeltaKind::Text),
            REASONING_CHUNKS => Some(DeltaKind::Reasoning),
            TOOL_CALL_CHUNKS => Some(DeltaKind::ToolCall),
            _ => None,
        }
    }

    fn chunk_type(self) -> &'static str {
        match self {
            DeltaKind::Text => "text-delta",
            DeltaKind::Reasoning => "reasoning-delta",
            DeltaKind::ToolCall => "tool-call-delta",
        }
    }
}

/// A packable `assistant/chunk` delta, its strings in canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(hidden)]
pub struct Delta {
    pub(crate) kind: DeltaKind,
    pub(crate) seq: u64,
    pub(crate) time: i64,
    pub(crate) turn: i64,
    pub(crate) step: i64,
    pub(crate) index: i64,
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) payload: String,
}

/// Deserializes a present field as itself, so `null` is not taken for
/// absence.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChunkEventData<'a> {
    turn: i64,
    step: i64,
    #[serde(borrow)]
    chunk: ChunkIn<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChunkIn<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a RawValue,
    index: i64,
    #[serde(default, borrow, deserialize_with = "present")]
    text: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    name: Option<&'a RawValue>,
    #[serde(
        rename = "argumentsDelta",
        default,
        borrow,
        deserialize_with = "present"
    )]
    arguments_delta: Option<&'a RawValue>,
}

pub(crate) fn safe(n: i64) -> bool {
    n.unsigned_abs() <= MAX_SAFE_INTEGER
}

/// The `data` text of one member of a run: what a packed row decodes to.
pub(crate) fn member_data(
    kind: DeltaKind,
    turn: i64,
    step: i64,
    index: i64,
    id: Option<&str>,
    name: Option<&str>,
    payload: &str,
) -> String {
    MemberText::new(kind, turn, step, index, id, name).data(payload)
}

/// The text every member of one run shares, before its payload: made once
/// per run, so a run's members cost a copy each, not a formatting.
pub(crate) struct MemberText {
    prefix: String,
}

impl MemberText {
    pub(crate) fn new(
        kind: DeltaKind,
        turn: i64,
        step: i64,
        index: i64,
        id: Option<&str>,
        name: Option<&str>,
    ) -> MemberText {
        let mut prefix = String::with_capacity(96);
        let _ = write!(
            prefix,
            "{{\"turn\":{turn},\"step\":{step},\"chunk\":{{\"type\":\"{}\",\"index\":{index},",
            kind.chunk_type()
        );
        match kind {
            DeltaKind::ToolCall => {
                prefix.push_str("\"id\":");
                prefix.push_str(id.unwrap_or("\"\""));
                if let Some(name) = name {
                    prefix.push_str(",\"name\":");
                    prefix.push_str(name);
                }
                prefix.push_str(",\"argumentsDelta\":");
            }
            _ => prefix.push_str("\"text\":"),
        }
        MemberText { prefix }
    }

    /// The `data` text of the member whose payload is `payload` (a
    /// canonical JSON string).
    pub(crate) fn data(&self, payload: &str) -> String {
        let mut out = String::with_capacity(self.prefix.len() + payload.len() + 2);
        out.push_str(&self.prefix);
        out.push_str(payload);
        out.push_str("}}");
        out
    }

    /// The `data` text of the member whose payload is the JSON string
    /// literal `raw`, made canonical as it is copied; `None` when `raw` is
    /// not a string literal.
    pub(crate) fn data_canonical(&self, raw: &str) -> Option<String> {
        let mut out = String::with_capacity(self.prefix.len() + raw.len() + 2);
        out.push_str(&self.prefix);
        crate::upstream::strings::push_canonical_string(&mut out, raw)?;
        out.push_str("}}");
        Some(out)
    }
}

/// The delta an event is, when it can be packed without changing a byte.
#[cfg(test)]
pub(crate) fn classify(event: &Event) -> Option<Delta> {
    classify_ref(event.into())
}

/// [`classify`] of an event read in place.
///
/// A `data` text in the exact shape a packed row decodes to (what
/// `JSON.stringify` writes) is recognized by [`scan_member`] without a
/// parse; anything else takes [`classify_parsed`], the serde parse, which
/// gives the same answer for every input (the tests compare both).
pub(crate) fn classify_ref(event: EventRef<'_>) -> Option<Delta> {
    candidate(event).map(Candidate::into_delta)
}

/// A packable chunk as [`classify_ref`] finds it, its strings still
/// borrowed where the scanner read them: a planner owns only the members of
/// runs that form.
enum Candidate<'a> {
    Scanned {
        member: ScannedMember<'a>,
        seq: u64,
        time: i64,
    },
    Parsed(Delta),
}

impl Candidate<'_> {
    fn member(&self) -> Member<'_> {
        match self {
            Candidate::Scanned {
                member: m,
                seq,
                time,
            } => Member {
                kind: m.kind,
                seq: *seq,
                time: *time,
                turn: m.turn,
                step: m.step,
                index: m.index,
                id: m.id,
                name: m.name,
            },
            Candidate::Parsed(delta) => delta.member(),
        }
    }

    fn into_delta(self) -> Delta {
        match self {
            Candidate::Scanned { member, seq, time } => member.delta(seq, time),
            Candidate::Parsed(delta) => delta,
        }
    }
}

fn candidate(event: EventRef<'_>) -> Option<Candidate<'_>> {
    if !may_pack(event) {
        return None;
    }
    match scan_member(event.data()) {
        Scanned::Member(member) => Some(Candidate::Scanned {
            member,
            seq: event.seq(),
            time: event.time(),
        }),
        Scanned::NotDelta => None,
        Scanned::Unsure => classify_parsed(event).map(Candidate::Parsed),
    }
}

/// The envelope checks of [`classify_ref`]: an `assistant/chunk` with no
/// envelope extra.
fn may_pack(event: EventRef<'_>) -> bool {
    event.kind() == EventKind::AssistantChunk
        && !event.ignorable()
        && event.source_event_seqs().is_none()
        && event.surface_op().is_none()
}

/// [`classify_ref`] by a serde parse of `data`, the canonical text rebuilt
/// and compared: the reference the scanner answers like.
pub(crate) fn classify_parsed(event: EventRef<'_>) -> Option<Delta> {
    if !may_pack(event) {
        return None;
    }
    let data = event.data();
    let parsed: ChunkEventData<'_> = serde_json::from_str(data).ok()?;
    let chunk = &parsed.chunk;
    if !(safe(parsed.turn) && safe(parsed.step) && safe(chunk.index)) {
        return None;
    }
    let kind = match chunk.kind.get() {
        "\"text-delta\"" => DeltaKind::Text,
        "\"reasoning-delta\"" => DeltaKind::Reasoning,
        "\"tool-call-delta\"" => DeltaKind::ToolCall,
        _ => return None,
    };
    let (id, name, payload) = match kind {
        DeltaKind::ToolCall => {
            if chunk.text.is_some() {
                return None;
            }
            let id = canonical_string(chunk.id?.get())?;
            let name = match chunk.name {
                Some(raw) => Some(canonical_string(raw.get())?),
                None => None,
            };
            (
                Some(id),
                name,
                canonical_string(chunk.arguments_delta?.get())?,
            )
        }
        _ => {
            if chunk.id.is_some() || chunk.name.is_some() || chunk.arguments_delta.is_some() {
                return None;
            }
            (None, None, canonical_string(chunk.text?.get())?)
        }
    };
    let canonical = member_data(
        kind,
        parsed.turn,
        parsed.step,
        chunk.index,
        id.as_deref(),
        name.as_deref(),
        &payload,
    );
    if canonical != data {
        return None;
    }
    Some(Delta {
        kind,
        seq: event.seq(),
        time: event.time(),
        turn: parsed.turn,
        step: parsed.step,
        index: chunk.index,
        id,
        name,
        payload,
    })
}

/// Whether `next` extends a run ending in `previous` (reference §3, "what
/// ends a run").
pub(crate) fn continues(previous: &Delta, next: &Delta) -> bool {
    previous.member().continued_by(&next.member())
}

impl Delta {
    fn member(&self) -> Member<'_> {
        Member {
            kind: self.kind,
            seq: self.seq,
            time: self.time,
            turn: self.turn,
            step: self.step,
            index: self.index,
            id: self.id.as_deref(),
            name: self.name.as_deref(),
        }
    }
}

/// What decides whether one delta continues another: a [`Delta`], or a
/// member of a [`PackedRun`], borrowed.
#[derive(Debug, Clone, Copy)]
struct Member<'a> {
    kind: DeltaKind,
    seq: u64,
    time: i64,
    turn: i64,
    step: i64,
    index: i64,
    /// The canonical string texts (quotes included).
    id: Option<&'a str>,
    name: Option<&'a str>,
}

impl Member<'_> {
    /// Whether `next` extends a run ending in `self`.
    fn continued_by(&self, next: &Member<'_>) -> bool {
        next.kind == self.kind
            && next.seq == self.seq + 1
            && (i128::from(next.time) - i128::from(self.time)).unsigned_abs()
                <= u128::from(MAX_SAFE_INTEGER)
            && next.turn == self.turn
            && next.step == self.step
            && next.index == self.index
            && (next.kind != DeltaKind::ToolCall || (next.id == self.id && next.name == self.name))
    }
}

/// The packed row's `data` (`JSON.stringify(row.data)`, upstream key order).
pub(crate) fn packed_json(run: &[Delta]) -> String {
    let first = &run[0];
    let size = packed_len(run);
    let mut out = String::with_capacity(size);
    let _ = write!(
        out,
        "{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":[",
        first.turn, first.step, first.index
    );
    for (i, pair) in run.windows(2).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", pair[1].time - pair[0].time);
    }
    out.push(']');
    match first.kind {
        DeltaKind::ToolCall => {
            out.push_str(",\"id\":");
            out.push_str(first.id.as_deref().unwrap_or("\"\""));
            if let Some(name) = &first.name {
                out.push_str(",\"name\":");
                out.push_str(name);
            }
            out.push_str(",\"args\":[");
        }
        _ => out.push_str(",\"texts\":["),
    }
    for (i, d) in run.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&d.payload);
    }
    out.push_str("]}");
    debug_assert_eq!(out.len(), size);
    out
}

fn decimal_len(n: i64) -> usize {
    let mut len = usize::from(n < 0);
    let mut v = n.unsigned_abs();
    loop {
        len += 1;
        v /= 10;
        if v == 0 {
            return len;
        }
    }
}

/// The fixed part of a packed row's `data`: everything but the dt values,
/// the payloads and their commas.
fn packed_fixed_len(first: &Delta) -> usize {
    let mut len = "{\"turn\":,\"step\":,\"index\":,\"dt\":[]".len()
        + decimal_len(first.turn)
        + decimal_len(first.step)
        + decimal_len(first.index)
        + "]}".len();
    match first.kind {
        DeltaKind::ToolCall => {
            len += ",\"id\":".len() + first.id.as_deref().map_or(2, str::len) + ",\"args\":[".len();
            if let Some(name) = &first.name {
                len += ",\"name\":".len() + name.len();
            }
        }
        _ => len += ",\"texts\":[".len(),
    }
    len
}

pub(crate) fn packed_len(run: &[Delta]) -> usize {
    let mut len = packed_fixed_len(&run[0]);
    for (i, d) in run.iter().enumerate() {
        len += d.payload.len() + usize::from(i > 0);
        if i > 0 {
            len += decimal_len(d.time - run[i - 1].time) + usize::from(i > 1);
        }
    }
    len
}

/// The most leading members of `run` (at most [`MAX_PACKED_MEMBERS`]) whose
/// packed `data` fits in [`MAX_PACKED_DATA_BYTES`].
pub(crate) fn fitting_prefix<D: std::borrow::Borrow<Delta>>(run: &[D]) -> usize {
    let mut len = packed_fixed_len(run[0].borrow());
    let mut fits = 0;
    for (i, d) in run.iter().take(MAX_PACKED_MEMBERS).enumerate() {
        let d = d.borrow();
        len += d.payload.len() + usize::from(i > 0);
        if i > 0 {
            len += decimal_len(d.time - run[i - 1].borrow().time) + usize::from(i > 1);
        }
        if len > MAX_PACKED_DATA_BYTES {
            break;
        }
        fits = i + 1;
    }
    fits
}

// ---------------------------------------------------------------------------
// Canonical text, scanned
// ---------------------------------------------------------------------------

/// The end of the run of plain string bytes (none of `"`, `\\`, or a
/// control) starting at `i`: eight bytes at a time while none of them is
/// special, then byte by byte.
fn plain_end(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte of `x` is zero exactly where the result has its high bit set
    // (no false positives below the first zero byte, which is all this
    // needs: a hit only ends the fast path).
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let x = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
        let special = zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')))
            // Bytes below 0x20 (with the high bit clear).
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
        if special != 0 {
            break;
        }
        i += 8;
    }
    while bytes
        .get(i)
        .is_some_and(|&b| b != b'"' && b != b'\\' && b >= 0x20)
    {
        i += 1;
    }
    i
}

/// A cursor over JSON text in the one spelling `JSON.stringify` gives it: no
/// whitespace, integers as JavaScript writes them, strings canonical
/// ([`canonical_string`] gives them back unchanged). Anything else stops it.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Cursor<'a> {
        Cursor { text, at: 0 }
    }

    fn done(&self) -> bool {
        self.at == self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Steps over `literal` when the text continues with it.
    fn eat(&mut self, literal: &str) -> bool {
        let ahead = self.text.as_bytes()[self.at..].starts_with(literal.as_bytes());
        if ahead {
            self.at += literal.len();
        }
        ahead
    }

    /// A safe integer spelled as JavaScript writes it (`0`, `-12`; no `-0`,
    /// leading zeros, fraction or exponent).
    fn int(&mut self) -> Option<i64> {
        let bytes = self.text.as_bytes();
        let negative = bytes.get(self.at) == Some(&b'-');
        let digits = self.at + usize::from(negative);
        let mut end = digits;
        match bytes.get(end) {
            Some(b'0') => end += 1,
            Some(b'1'..=b'9') => {
                while bytes.get(end).is_some_and(u8::is_ascii_digit) {
                    end += 1;
                }
            }
            _ => return None,
        }
        // 2^53 - 1 has 16 digits.
        if end - digits > 16 {
            return None;
        }
        let value = bytes[digits..end]
            .iter()
            .fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
        if value.unsigned_abs() > MAX_SAFE_INTEGER || (negative && value == 0) {
            return None;
        }
        self.at = end;
        Some(if negative { -value } else { value })
    }

    /// A string literal (quotes included) that [`canonical_string`] gives
    /// back unchanged: every character raw but `"`, `\` and the controls;
    /// those as `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` or lowercase
    /// `\u00xx`; a lone surrogate as lowercase `\udxxx`, never a high one
    /// escaped right before a low one (that pair is one raw character).
    fn string(&mut self) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        if bytes.get(start) != Some(&b'"') {
            return None;
        }
        let lower_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        let mut i = start + 1;
        // Whether the unit just before is an escaped high surrogate.
        let mut high = false;
        loop {
            match *bytes.get(i)? {
                b'"' => {
                    self.at = i + 1;
                    return Some(&self.text[start..self.at]);
                }
                b'\\' => match *bytes.get(i + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {
                        high = false;
                        i += 2;
                    }
                    b'u' => {
                        let hex = bytes.get(i + 2..i + 6)?;
                        if !hex.iter().all(lower_hex) {
                            return None;
                        }
                        high = match (hex[0], hex[1], hex[2], hex[3]) {
                            // The controls without a short escape.
                            (b'0', b'0', b'0', b'8' | b'9' | b'a' | b'c' | b'd') => return None,
                            (b'0', b'0', b'0' | b'1', _) => false,
                            (b'd', b'8' | b'9' | b'a' | b'b', _, _) => true,
                            (b'd', b'c'..=b'f', _, _) if !high => false,
                            _ => return None,
                        };
                        i += 6;
                    }
                    _ => return None,
                },
                0..=0x1f => return None,
                _ => {
                    high = false;
                    i = plain_end(bytes, i + 1);
                }
            }
        }
    }

    /// The text of a non-empty array of `item`s, brackets excluded: `None`
    /// unless the text continues with `[`, items separated by commas, `]`.
    fn array<T>(
        &mut self,
        mut item: impl FnMut(&mut Cursor<'a>) -> Option<T>,
        mut each: impl FnMut(T) -> Option<()>,
    ) -> Option<std::ops::Range<usize>> {
        if !self.eat("[") {
            return None;
        }
        let start = self.at;
        if self.peek() == Some(b']') {
            self.at += 1;
            return Some(start..start);
        }
        loop {
            each(item(self)?)?;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(start..self.at - 1);
                }
                _ => return None,
            }
        }
    }
}

/// What [`scan_member`] made of a chunk event's `data`.
#[derive(Debug)]
enum Scanned<'a> {
    /// Exactly what a packed row decodes to.
    Member(ScannedMember<'a>),
    /// Not a delta any row holds: the chunk's `type` is none of the three
    /// delta types spelled where a packed member spells it.
    NotDelta,
    /// Not in the canonical spelling: for the serde parse to decide.
    Unsure,
}

/// A delta's fields as [`scan_member`] read them, strings borrowed.
#[derive(Debug)]
struct ScannedMember<'a> {
    kind: DeltaKind,
    turn: i64,
    step: i64,
    index: i64,
    id: Option<&'a str>,
    name: Option<&'a str>,
    payload: &'a str,
}

impl ScannedMember<'_> {
    fn delta(&self, seq: u64, time: i64) -> Delta {
        Delta {
            kind: self.kind,
            seq,
            time,
            turn: self.turn,
            step: self.step,
            index: self.index,
            id: self.id.map(str::to_owned),
            name: self.name.map(str::to_owned),
            payload: self.payload.to_owned(),
        }
    }
}

/// Reads a chunk event's `data` as the text [`member_data`] writes:
/// `{"turn":N,"step":N,"chunk":{"type":"text-delta","index":N,"text":"…"}}`
/// (`reasoning-delta` alike; `tool-call-delta` with `id`, an optional
/// `name` and `argumentsDelta` instead of `text`), numbers safe integers
/// and strings canonical. Such a text is what [`classify_parsed`] packs
/// (it rebuilds exactly this text from the parsed fields); any other
/// spelling is [`Scanned::Unsure`] and left to it, except a canonical head
/// naming another chunk type, which no row holds.
fn scan_member(data: &str) -> Scanned<'_> {
    let mut c = Cursor::new(data);
    let head = match scan_head(&mut c) {
        Scanned::Member(head) => head,
        Scanned::NotDelta => return Scanned::NotDelta,
        Scanned::Unsure => return Scanned::Unsure,
    };
    let Some(payload) = c.string() else {
        return Scanned::Unsure;
    };
    if !(c.eat("}}") && c.done()) {
        return Scanned::Unsure;
    }
    Scanned::Member(ScannedMember { payload, ..head })
}

/// The part of [`scan_member`] before the payload: what decides whether
/// chunks continue one another. Its member's `payload` is empty, and the
/// cursor is left on the payload.
fn scan_head<'a>(c: &mut Cursor<'a>) -> Scanned<'a> {
    let head = (|| {
        if !c.eat(r#"{"turn":"#) {
            return None;
        }
        let turn = c.int()?;
        if !c.eat(r#","step":"#) {
            return None;
        }
        let step = c.int()?;
        c.eat(r#","chunk":{"type":"#).then_some((turn, step))
    })();
    let Some((turn, step)) = head else {
        return Scanned::Unsure;
    };
    let kind = if c.eat(r#""text-delta""#) {
        DeltaKind::Text
    } else if c.eat(r#""reasoning-delta""#) {
        DeltaKind::Reasoning
    } else if c.eat(r#""tool-call-delta""#) {
        DeltaKind::ToolCall
    } else {
        return Scanned::NotDelta;
    };
    let rest = (|| {
        if !c.eat(r#","index":"#) {
            return None;
        }
        let index = c.int()?;
        let (id, name) = match kind {
            DeltaKind::ToolCall => {
                if !c.eat(r#","id":"#) {
                    return None;
                }
                let id = c.string()?;
                let name = if c.eat(r#","name":"#) {
                    Some(c.string()?)
                } else {
                    None
                };
                if !c.eat(r#","argumentsDelta":"#) {
                    return None;
                }
                (Some(id), name)
            }
            _ => {
                if !c.eat(r#","text":"#) {
                    return None;
                }
                (None, None)
            }
        };
        Some(ScannedMember {
            kind,
            turn,
            step,
            index,
            id,
            name,
            payload: "",
        })
    })();
    rest.map_or(Scanned::Unsure, Scanned::Member)
}

/// A chunk's member fields from the head of its `data` alone (`None` when
/// the head does not scan: that decides nothing). Where the whole `data`
/// classifies, its member has these fields, so heads that do not continue
/// one another never share a run.
fn head(event: EventRef<'_>) -> Option<Member<'_>> {
    match scan_head(&mut Cursor::new(event.data())) {
        Scanned::Member(m) => Some(Member {
            kind: m.kind,
            seq: event.seq(),
            time: event.time(),
            turn: m.turn,
            step: m.step,
            index: m.index,
            id: m.id,
            name: m.name,
        }),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Packed rows read as stored
// ---------------------------------------------------------------------------

/// A stored packed row whose `data` is in the spelling [`packed_json`]
/// writes (and upstream's `JSON.stringify` of the row), read without
/// decoding its members: a [`PackedRun::parse`] succeeds only where the
/// row decodes (3 to 1024 members, `dt` one shorter, seqs and times safe
/// integers), and its members are exactly the events decoding gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedRun {
    kind: DeltaKind,
    seq0: u64,
    time0: i64,
    last_time: i64,
    members: usize,
    turn: i64,
    step: i64,
    index: i64,
    data: String,
    id: Option<std::ops::Range<usize>>,
    name: Option<std::ops::Range<usize>>,
    /// The text inside `dt`'s brackets.
    dt: std::ops::Range<usize>,
    /// The text inside `texts`' or `args`' brackets.
    payload: std::ops::Range<usize>,
}

impl PackedRun {
    /// The row of tag `kind`, `seq0` and `time0` (its columns, already
    /// checked as the decoder checks them) with `data` as its text; the
    /// text back when it is in another spelling or the row would not
    /// decode, for the caller to decode it.
    pub(crate) fn parse(
        kind: DeltaKind,
        seq0: u64,
        time0: i64,
        data: String,
    ) -> Result<PackedRun, String> {
        let parsed = Self::layout(kind, seq0, time0, &data);
        match parsed {
            Some(layout) => Ok(PackedRun { data, ..layout }),
            None => Err(data),
        }
    }

    fn layout(kind: DeltaKind, seq0: u64, time0: i64, data: &str) -> Option<PackedRun> {
        if seq0 > MAX_SAFE_INTEGER || !safe(time0) || data.len() > MAX_PACKED_DATA_BYTES {
            return None;
        }
        let mut c = Cursor::new(data);
        if !c.eat(r#"{"turn":"#) {
            return None;
        }
        let turn = c.int()?;
        if !c.eat(r#","step":"#) {
            return None;
        }
        let step = c.int()?;
        if !c.eat(r#","index":"#) {
            return None;
        }
        let index = c.int()?;
        if !c.eat(r#","dt":"#) {
            return None;
        }
        let mut last_time = time0;
        let mut gaps = 0usize;
        let dt = c.array(Cursor::int, |gap| {
            gaps += 1;
            last_time = last_time.checked_add(gap).filter(|t| safe(*t))?;
            Some(())
        })?;
        let (id, name) = match kind {
            DeltaKind::ToolCall => {
                if !c.eat(r#","id":"#) {
                    return None;
                }
                let at = c.at;
                let id = at..at + c.string()?.len();
                let name = if c.eat(r#","name":"#) {
                    let at = c.at;
                    Some(at..at + c.string()?.len())
                } else {
                    None
                };
                if !c.eat(r#","args":"#) {
                    return None;
                }
                (Some(id), name)
            }
            _ => {
                if !c.eat(r#","texts":"#) {
                    return None;
                }
                (None, None)
            }
        };
        let mut members = 0usize;
        let payload = c.array(Cursor::string, |_| {
            members += 1;
            Some(())
        })?;
        let decodes = c.eat("}")
            && c.done()
            && (MIN_PACKED_MEMBERS..=MAX_PACKED_MEMBERS).contains(&members)
            && gaps == members - 1
            && seq0 + members as u64 - 1 <= MAX_SAFE_INTEGER;
        if !decodes {
            return None;
        }
        Some(PackedRun {
            kind,
            seq0,
            time0,
            last_time,
            members,
            turn,
            step,
            index,
            data: String::new(),
            id,
            name,
            dt,
            payload,
        })
    }

    /// How many events the row holds.
    pub fn len(&self) -> usize {
        self.members
    }

    /// Never: a packed row holds at least [`MIN_PACKED_MEMBERS`] events.
    pub fn is_empty(&self) -> bool {
        self.members == 0
    }

    /// The first member's seq.
    pub fn seq0(&self) -> u64 {
        self.seq0
    }

    /// The row's tag (`text-chunks`, …).
    pub fn tag(&self) -> &'static str {
        self.kind.tag()
    }

    /// The row's `data` text, as stored.
    pub fn data(&self) -> &str {
        &self.data
    }

    fn text(&self, range: &std::ops::Range<usize>) -> &str {
        &self.data[range.clone()]
    }

    fn member_at(&self, seq: u64, time: i64) -> Member<'_> {
        Member {
            kind: self.kind,
            seq,
            time,
            turn: self.turn,
            step: self.step,
            index: self.index,
            id: self.id.as_ref().map(|r| self.text(r)),
            name: self.name.as_ref().map(|r| self.text(r)),
        }
    }

    fn first(&self) -> Member<'_> {
        self.member_at(self.seq0, self.time0)
    }

    fn last(&self) -> Member<'_> {
        self.member_at(self.seq0 + self.members as u64 - 1, self.last_time)
    }

    /// The member events, as decoding the row gives them.
    pub fn events(&self) -> Vec<Event> {
        let mut times = Vec::with_capacity(self.members);
        times.push(self.time0);
        let mut dt = Cursor::new(self.text(&self.dt));
        while let Some(gap) = dt.int() {
            times.push(times[times.len() - 1] + gap);
            dt.eat(",");
        }
        let mut payload = Cursor::new(self.text(&self.payload));
        let id = self.id.as_ref().map(|r| self.text(r));
        let name = self.name.as_ref().map(|r| self.text(r));
        let text = MemberText::new(self.kind, self.turn, self.step, self.index, id, name);
        let mut events = Vec::with_capacity(self.members);
        for (k, time) in times.into_iter().enumerate() {
            let member = payload.string().expect("a scanned member");
            payload.eat(",");
            let data = text.data(member);
            events.push(
                Event::from_parts(
                    "assistant/chunk",
                    self.seq0 + k as u64,
                    time,
                    crate::event::RawJson::trusted(data),
                )
                .expect("a scanned member is a valid event"),
            );
        }
        events
    }
}

// ---------------------------------------------------------------------------
// Storage records from stored rows
// ---------------------------------------------------------------------------

/// Stored events as a store read them: one event, or a packed row left as
/// it is stored.
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    /// One event.
    Event(EventRef<'a>),
    /// The members of a packed row.
    Packed(&'a PackedRun),
}

/// Part of a run being packed.
enum Segment<'a> {
    Event(EventRef<'a>, Delta),
    Packed(&'a PackedRun),
}

impl Segment<'_> {
    fn len(&self) -> usize {
        match self {
            Segment::Event(..) => 1,
            Segment::Packed(run) => run.len(),
        }
    }

    fn first(&self) -> Member<'_> {
        match self {
            Segment::Event(_, delta) => delta.member(),
            Segment::Packed(run) => run.first(),
        }
    }

    fn last(&self) -> Member<'_> {
        match self {
            Segment::Event(_, delta) => delta.member(),
            Segment::Packed(run) => run.last(),
        }
    }
}

/// The storage records of the events `records` hold, appended to `out`
/// separated by `separator`, byte for byte what
/// `backend::jsonl::records::encode_records` writes for those events
/// expanded: with `pack`, each run of at least [`MIN_PACKED_MEMBERS`]
/// packable deltas is one packed row — a stored packed row joined with the
/// deltas and rows that continue it, its `dt` and member strings copied as
/// stored — and every other event its envelope verbatim; without, every
/// event verbatim. Returns how many records were written.
pub fn encode_stored_records<'a>(
    records: impl IntoIterator<Item = Record<'a>>,
    pack: bool,
    separator: u8,
    out: &mut Vec<u8>,
) -> usize {
    let mut written = 0;
    let mut next = |out: &mut Vec<u8>| {
        if written > 0 {
            out.push(separator);
        }
        written += 1;
    };
    if !pack {
        for record in records {
            match record {
                Record::Event(event) => {
                    next(out);
                    event.write_json(out);
                }
                Record::Packed(run) => {
                    for event in run.events() {
                        next(out);
                        event.write_json(out);
                    }
                }
            }
        }
        return written;
    }
    let mut run: Vec<Segment<'a>> = Vec::new();
    let flush =
        |out: &mut Vec<u8>, run: &mut Vec<Segment<'a>>, next: &mut dyn FnMut(&mut Vec<u8>)| {
            if run.iter().map(Segment::len).sum::<usize>() >= MIN_PACKED_MEMBERS {
                next(out);
                write_run(out, run);
            } else {
                for segment in run.iter() {
                    let Segment::Event(event, _) = segment else {
                        unreachable!("a packed row holds at least {MIN_PACKED_MEMBERS} members");
                    };
                    next(out);
                    event.write_json(out);
                }
            }
            run.clear();
        };
    for record in records {
        let segment = match record {
            Record::Event(event) => match classify_ref(event) {
                Some(delta) => Segment::Event(event, delta),
                None => {
                    flush(out, &mut run, &mut next);
                    next(out);
                    event.write_json(out);
                    continue;
                }
            },
            Record::Packed(packed) => Segment::Packed(packed),
        };
        if !run
            .last()
            .is_some_and(|last| last.last().continued_by(&segment.first()))
        {
            flush(out, &mut run, &mut next);
        }
        run.push(segment);
    }
    flush(out, &mut run, &mut next);
    written
}

/// One packed record of a run's segments: what [`packed_json`] writes for
/// their members, in its envelope.
fn write_run(out: &mut Vec<u8>, run: &[Segment<'_>]) {
    use std::io::Write as _;
    let first = run[0].first();
    let _ = write!(
        out,
        "{{\"type\":\"{}\",\"seq0\":{},\"time0\":{},\"data\":{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":[",
        first.kind.tag(),
        first.seq,
        first.time,
        first.turn,
        first.step,
        first.index
    );
    let mut gaps = false;
    let mut previous: Option<i64> = None;
    for segment in run {
        if let Some(time) = previous {
            if gaps {
                out.push(b',');
            }
            let _ = write!(out, "{}", segment.first().time - time);
            gaps = true;
        }
        if let Segment::Packed(packed) = segment {
            if gaps {
                out.push(b',');
            }
            out.extend_from_slice(packed.text(&packed.dt).as_bytes());
            gaps = true;
        }
        previous = Some(segment.last().time);
    }
    out.push(b']');
    match first.kind {
        DeltaKind::ToolCall => {
            out.extend_from_slice(b",\"id\":");
            out.extend_from_slice(first.id.unwrap_or("\"\"").as_bytes());
            if let Some(name) = first.name {
                out.extend_from_slice(b",\"name\":");
                out.extend_from_slice(name.as_bytes());
            }
            out.extend_from_slice(b",\"args\":[");
        }
        _ => out.extend_from_slice(b",\"texts\":["),
    }
    for (i, segment) in run.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match segment {
            Segment::Event(_, delta) => out.extend_from_slice(delta.payload.as_bytes()),
            Segment::Packed(packed) => {
                out.extend_from_slice(packed.text(&packed.payload).as_bytes());
            }
        }
    }
    out.extend_from_slice(b"]}}");
}

// ---------------------------------------------------------------------------
// Planning a batch, expanding a run
// ---------------------------------------------------------------------------

/// One stored unit of an append batch, as [`plan_batch`] decides it.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub enum Piece {
    /// The event at this index of the batch, stored alone.
    One(usize),
    /// A packed run of 3 to 1024 deltas starting at batch index `start`.
    Run {
        /// Batch index of the first member.
        start: usize,
        /// The members, in order.
        deltas: Vec<Delta>,
    },
}

/// How an append batch is stored, upstream's SQLite packer's decision
/// (shared by turnwal's SQLite rows and the native WAL's chunk-run
/// records): runs of packable deltas inside the batch become packed runs
/// of 3 to 1024 members and at most 1 MiB of `data` (the largest that fits
/// first; a member that fits in no run of 3 stays alone, and so does a
/// remainder under 3); everything else is stored alone.
#[doc(hidden)] // for the test kit's workload checks
pub fn plan_batch<'a>(events: impl IntoIterator<Item = EventRef<'a>>) -> Vec<Piece> {
    let events: Vec<EventRef<'a>> = events.into_iter().collect();
    let mut out = Vec::with_capacity(events.len());
    let mut group: Vec<(usize, Candidate<'a>)> = Vec::new();
    // The head of the chunk that parted from the stretch before: it starts
    // the next one, so no head is scanned twice.
    let mut parted: Option<Option<Member<'a>>> = None;
    let mut i = 0;
    while i < events.len() {
        if !may_pack(events[i]) {
            out.push(Piece::One(i));
            i += 1;
            continue;
        }
        // The stretch of packable chunks from `i` whose heads do not part
        // (heads that scan and do not continue one another): what can pack
        // is decided within it, and one shorter than a run is stored alone
        // without reading a payload.
        let mut previous = parted.take().unwrap_or_else(|| head(events[i]));
        let mut end = i + 1;
        while let Some(&event) = events.get(end).filter(|&&e| may_pack(e)) {
            let next = head(event);
            if let (Some(a), Some(b)) = (&previous, &next)
                && !a.continued_by(b)
            {
                parted = Some(next);
                break;
            }
            previous = next;
            end += 1;
        }
        if end - i < MIN_PACKED_MEMBERS {
            out.extend((i..end).map(Piece::One));
            i = end;
            continue;
        }
        for (j, &event) in events.iter().enumerate().take(end).skip(i) {
            match candidate(event) {
                None => {
                    plan_group(&mut out, &mut group);
                    out.push(Piece::One(j));
                }
                Some(found) => {
                    if !group
                        .last()
                        .is_some_and(|(_, last)| last.member().continued_by(&found.member()))
                    {
                        plan_group(&mut out, &mut group);
                    }
                    group.push((j, found));
                }
            }
        }
        plan_group(&mut out, &mut group);
        i = end;
    }
    out
}

/// Plans a group of continuing candidates: owned deltas only for a group
/// long enough to pack.
fn plan_group(out: &mut Vec<Piece>, group: &mut Vec<(usize, Candidate<'_>)>) {
    if group.len() < MIN_PACKED_MEMBERS {
        out.extend(group.drain(..).map(|(i, _)| Piece::One(i)));
        return;
    }
    let mut run: Vec<(usize, Delta)> = group.drain(..).map(|(i, c)| (i, c.into_delta())).collect();
    plan_run(out, &mut run);
}

fn plan_run(out: &mut Vec<Piece>, run: &mut Vec<(usize, Delta)>) {
    // Where the pieces split, decided on the borrowed deltas; then the
    // deltas move into them.
    let mut sizes = Vec::new();
    {
        let deltas: Vec<&Delta> = run.iter().map(|(_, d)| d).collect();
        let mut offset = 0;
        while deltas.len() - offset >= MIN_PACKED_MEMBERS {
            let k = fitting_prefix(&deltas[offset..]);
            let k = if k < MIN_PACKED_MEMBERS { 1 } else { k };
            sizes.push(k);
            offset += k;
        }
        sizes.extend(std::iter::repeat_n(1, deltas.len() - offset));
    }
    let mut members = run.drain(..);
    for k in sizes {
        if k == 1 {
            let (i, _) = members.next().expect("sizes sum to the run's length");
            out.push(Piece::One(i));
        } else {
            let taken: Vec<(usize, Delta)> = members.by_ref().take(k).collect();
            out.push(Piece::Run {
                start: taken[0].0,
                deltas: taken.into_iter().map(|(_, d)| d).collect(),
            });
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunIn<'a> {
    turn: i64,
    step: i64,
    index: i64,
    dt: Vec<i64>,
    #[serde(default, borrow, deserialize_with = "present")]
    texts: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    name: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    args: Option<Vec<&'a RawValue>>,
}

/// The member events of a packed run of `kind` whose first member has seq
/// `seq0` and time `time0`, from the packed row's `data` (at most
/// [`MAX_PACKED_DATA_BYTES`], checked by the caller). All or nothing: the
/// error names the first defect (the callers prefix their own context).
pub(crate) fn expand_run(
    kind: DeltaKind,
    seq0: u64,
    time0: i64,
    data: &str,
) -> Result<Vec<Event>, String> {
    let run: RunIn<'_> = serde_json::from_str(data).map_err(|e| e.to_string())?;
    if !(safe(run.turn) && safe(run.step) && safe(run.index)) {
        return Err("turn/step/index must be safe integers".into());
    }
    let (payload, id, name) = match kind {
        DeltaKind::ToolCall => {
            if run.texts.is_some() {
                return Err("invalid tool-call data fields".into());
            }
            let id = run
                .id
                .and_then(|raw| canonical_string(raw.get()))
                .ok_or("id and optional name must be strings")?;
            let name = match run.name {
                None => None,
                Some(raw) => Some(
                    canonical_string(raw.get()).ok_or("id and optional name must be strings")?,
                ),
            };
            let args = run.args.ok_or("invalid tool-call data fields")?;
            (args, Some(id), name)
        }
        _ => {
            if run.id.is_some() || run.name.is_some() || run.args.is_some() {
                return Err("invalid text data fields".into());
            }
            let texts = run.texts.ok_or("invalid text data fields")?;
            (texts, None, None)
        }
    };
    let payload_key = if kind == DeltaKind::ToolCall {
        "args"
    } else {
        "texts"
    };
    if !(MIN_PACKED_MEMBERS..=MAX_PACKED_MEMBERS).contains(&payload.len()) {
        return Err(format!(
            "{payload_key} must contain {MIN_PACKED_MEMBERS}..{MAX_PACKED_MEMBERS} strings"
        ));
    }
    if run.dt.len() != payload.len() - 1 {
        return Err("dt length must match the member count".into());
    }
    if seq0 + payload.len() as u64 - 1 > MAX_SAFE_INTEGER {
        return Err("member seqs exceed safe integers".into());
    }
    let text = MemberText::new(
        kind,
        run.turn,
        run.step,
        run.index,
        id.as_deref(),
        name.as_deref(),
    );
    let mut events = Vec::with_capacity(payload.len());
    let mut time = time0;
    for (k, raw) in payload.iter().enumerate() {
        if k > 0 {
            let gap = run.dt[k - 1];
            if !safe(gap) {
                return Err("dt must be an array of safe integers".into());
            }
            time = time
                .checked_add(gap)
                .filter(|t| safe(*t))
                .ok_or("member times exceed safe integers")?;
        }
        let data = text
            .data_canonical(raw.get())
            .ok_or_else(|| format!("{payload_key} must contain strings"))?;
        let event = Event::from_parts(
            "assistant/chunk",
            seq0 + k as u64,
            time,
            crate::event::RawJson::trusted(data),
        )
        .map_err(|e| e.reason)?;
        events.push(event);
    }
    Ok(events)
}

#[cfg(test)]
mod tests;
