//! Upstream's packing of `assistant/chunk` delta runs, shared by the
//! formats that store it (SQLite's packed rows, JSONL's packed lines):
//! which deltas pack (only those whose `data` is byte for byte what a packed
//! record decodes back to, so packing never changes a byte), how a run
//! continues, and the packed record's `data` text.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::strings::canonical_string;
use crate::event::{Event, EventKind, MAX_SAFE_INTEGER};
use crate::view::EventRef;

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
pub(crate) enum DeltaKind {
    Text,
    Reasoning,
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
#[derive(Debug, Clone)]
pub(crate) struct Delta {
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
    let mut out = String::with_capacity(payload.len() + 96);
    let _ = write!(
        out,
        "{{\"turn\":{turn},\"step\":{step},\"chunk\":{{\"type\":\"{}\",\"index\":{index},",
        kind.chunk_type()
    );
    match kind {
        DeltaKind::ToolCall => {
            out.push_str("\"id\":");
            out.push_str(id.unwrap_or("\"\""));
            if let Some(name) = name {
                out.push_str(",\"name\":");
                out.push_str(name);
            }
            out.push_str(",\"argumentsDelta\":");
        }
        _ => out.push_str("\"text\":"),
    }
    out.push_str(payload);
    out.push_str("}}");
    out
}

/// The delta an event is, when it can be packed without changing a byte.
#[cfg(test)]
pub(crate) fn classify(event: &Event) -> Option<Delta> {
    classify_ref(event.into())
}

/// [`classify`] of an event read in place.
pub(crate) fn classify_ref(event: EventRef<'_>) -> Option<Delta> {
    if event.kind() != EventKind::AssistantChunk
        || event.ignorable()
        || event.source_event_seqs().is_some()
        || event.surface_op().is_some()
    {
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
    next.kind == previous.kind
        && next.seq == previous.seq + 1
        && (i128::from(next.time) - i128::from(previous.time)).unsigned_abs()
            <= u128::from(MAX_SAFE_INTEGER)
        && next.turn == previous.turn
        && next.step == previous.step
        && next.index == previous.index
        && (next.kind != DeltaKind::ToolCall
            || (next.id == previous.id && next.name == previous.name))
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
pub(crate) fn fitting_prefix(run: &[Delta]) -> usize {
    let mut len = packed_fixed_len(&run[0]);
    let mut fits = 0;
    for (i, d) in run.iter().take(MAX_PACKED_MEMBERS).enumerate() {
        len += d.payload.len() + usize::from(i > 0);
        if i > 0 {
            len += decimal_len(d.time - run[i - 1].time) + usize::from(i > 1);
        }
        if len > MAX_PACKED_DATA_BYTES {
            break;
        }
        fits = i + 1;
    }
    fits
}

// ---------------------------------------------------------------------------
// Planning a batch, expanding a run
// ---------------------------------------------------------------------------

/// One stored unit of an append batch, as [`plan_batch`] decides it.
#[derive(Debug, Clone)]
pub(crate) enum Piece {
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
pub(crate) fn plan_batch<'a>(events: impl IntoIterator<Item = EventRef<'a>>) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut run: Vec<(usize, Delta)> = Vec::new();
    for (i, event) in events.into_iter().enumerate() {
        match classify_ref(event) {
            None => {
                plan_run(&mut out, &mut run);
                out.push(Piece::One(i));
            }
            Some(delta) => {
                if !run.last().is_some_and(|(_, last)| continues(last, &delta)) {
                    plan_run(&mut out, &mut run);
                }
                run.push((i, delta));
            }
        }
    }
    plan_run(&mut out, &mut run);
    out
}

fn plan_run(out: &mut Vec<Piece>, run: &mut Vec<(usize, Delta)>) {
    let deltas: Vec<Delta> = run.iter().map(|(_, d)| d.clone()).collect();
    let mut offset = 0;
    while deltas.len() - offset >= MIN_PACKED_MEMBERS {
        let k = fitting_prefix(&deltas[offset..]);
        if k < MIN_PACKED_MEMBERS {
            out.push(Piece::One(run[offset].0));
            offset += 1;
            continue;
        }
        out.push(Piece::Run {
            start: run[offset].0,
            deltas: deltas[offset..offset + k].to_vec(),
        });
        offset += k;
    }
    out.extend(run[offset..].iter().map(|(i, _)| Piece::One(*i)));
    run.clear();
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
        let member = canonical_string(raw.get())
            .ok_or_else(|| format!("{payload_key} must contain strings"))?;
        let data = member_data(
            kind,
            run.turn,
            run.step,
            run.index,
            id.as_deref(),
            name.as_deref(),
            &member,
        );
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
