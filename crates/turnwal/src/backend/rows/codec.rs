//! Row encoding of the stores of rows (SQLite, PostgreSQL), exactly as the
//! upstream harness's schema-17 SQLite store writes it (docs/SQLITE.md,
//! "Row encoding"; the PostgreSQL store keeps `data` as text always):
//!
//! - a **scalar row** holds one event: `data` is its JSON text, TEXT under
//!   4096 bytes, else a zstd level-3 BLOB when that is smaller;
//!   `source_event_seqs` is a varint BLOB; `surface_op` JSON text;
//!   `ignorable` 1 or NULL;
//! - a **packed row** (`ignorable = 0`, the discriminator) holds a run of 3 to
//!   1024 `assistant/chunk` deltas of one kind (`text-chunks`,
//!   `reasoning-chunks`, `tool-call-chunks`) in at most 1 MiB of `data`.
//!
//! Decoding is strict: it rejects truncated, non-canonical and out-of-range
//! varints, packed data over 1 MiB before parsing it (and while
//! decompressing it), and invalid UTF-8, and every event it returns is one an
//! append could have written.
//!
//! turnwal stores `data` as the exact text it was given. A delta is packed
//! only when its `data` is byte for byte the text a packed row decodes back
//! to (`JSON.stringify` of `{turn, step, chunk}`), so packing never changes a
//! byte; every other delta stays a scalar row.

use std::io::Read;

use crate::event::{Event, EventError, MAX_SAFE_INTEGER, RawJson};
use crate::scan::CutReason;
#[cfg(test)]
use crate::upstream::chunks::classify;
use crate::upstream::chunks::{
    Delta, DeltaKind, PackedRun, Piece, expand_run, packed_json, plan_batch, safe,
};
pub use crate::upstream::chunks::{
    MAX_PACKED_DATA_BYTES, MAX_PACKED_MEMBERS, MIN_PACKED_MEMBERS, REASONING_CHUNKS,
    SURFACE_FIRST_MARK, TEXT_CHUNKS, TOOL_CALL_CHUNKS, surface_first_by_default,
};
pub use crate::upstream::strings::canonical_string;
use crate::view::EventRef;

/// `data` this long or longer (in bytes) is offered to zstd.
pub const ZSTD_DATA_THRESHOLD: usize = 4096;
/// The zstd level of `data` BLOBs.
pub const ZSTD_LEVEL: i32 = 3;
/// Largest decompressed `data` of a scalar row (the bound every store
/// shares, [`crate::limits::MAX_DATA_LEN`]).
pub const MAX_SCALAR_DATA_BYTES: usize = crate::limits::MAX_DATA_LEN;
/// The `ignorable` value that marks a packed row.
pub const PACKED_DISCRIMINATOR: i64 = 0;
/// A `data` column value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// The JSON text.
    Text(String),
    /// The JSON text as one zstd frame.
    Blob(Vec<u8>),
}

impl Data {
    /// Bytes stored.
    pub fn len(&self) -> usize {
        match self {
            Data::Text(t) => t.len(),
            Data::Blob(b) => b.len(),
        }
    }

    /// Whether nothing is stored (never for valid rows).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One physical row to insert (without `session_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowOut {
    /// `seq` (`seq0` of a packed row).
    pub seq: u64,
    /// `type` (the tag of a packed row).
    pub event_type: String,
    /// `time` (`time0` of a packed row).
    pub time: i64,
    /// `data`.
    pub data: Data,
    /// `source_event_seqs`.
    pub source_event_seqs: Option<Vec<u8>>,
    /// `surface_op`.
    pub surface_op: Option<String>,
    /// `ignorable`: `Some(1)`, `None`, or [`PACKED_DISCRIMINATOR`].
    pub ignorable: Option<i64>,
    /// How many events the row holds.
    pub members: usize,
}

/// A column value as a store returned it, in SQLite's storage classes. TEXT is kept as bytes: a damaged
/// file may hold invalid UTF-8, which decoding reports instead of failing
/// the whole read.
#[derive(Debug, Clone, PartialEq)]
pub enum Col {
    /// NULL.
    Null,
    /// INTEGER.
    Integer(i64),
    /// REAL.
    Real(f64),
    /// TEXT, as stored.
    Text(Vec<u8>),
    /// BLOB.
    Blob(Vec<u8>),
}

/// One physical row as read, each column as SQLite returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct RowIn {
    /// `seq`.
    pub seq: Col,
    /// `type`.
    pub event_type: Col,
    /// `time`.
    pub time: Col,
    /// `data`.
    pub data: Col,
    /// `source_event_seqs`.
    pub source_event_seqs: Col,
    /// `surface_op`.
    pub surface_op: Col,
    /// `ignorable`.
    pub ignorable: Col,
}

/// The columns a row is read by (SQLite's `events` table), in order.
pub const ROW_COLUMNS: &str = "seq, type, time, data, source_event_seqs, surface_op, ignorable";

impl RowIn {
    /// The `seq` column as an integer (`-1` when it is not one): where the
    /// row sorts, and where a repair deletes from.
    pub fn seq_key(&self) -> i64 {
        match self.seq {
            Col::Integer(n) => n,
            _ => -1,
        }
    }

    /// Whether the row carries the packed discriminator.
    pub fn is_packed(&self) -> bool {
        self.ignorable == Col::Integer(PACKED_DISCRIMINATOR)
    }

    /// Bytes of the stored `data` value.
    pub fn data_len(&self) -> u64 {
        match &self.data {
            Col::Text(t) => t.len() as u64,
            Col::Blob(b) => b.len() as u64,
            _ => 0,
        }
    }
}

/// Why a row does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    /// [`CutReason::Incomplete`] when the row's text or frame ends early (as a
    /// cut write leaves it), else [`CutReason::Invalid`].
    pub reason: CutReason,
    /// What is wrong.
    pub detail: String,
}

impl RowError {
    fn invalid(detail: impl Into<String>) -> RowError {
        RowError {
            reason: CutReason::Invalid,
            detail: detail.into(),
        }
    }
}

// ---------------------------------------------------------------------------
// Provenance varints
// ---------------------------------------------------------------------------

fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Encodes `sourceEventSeqs`: the first seq as an unsigned LEB128 varint,
/// each following one as the ZigZag varint of its difference to the one
/// before. `[]` is the empty BLOB.
///
/// ```
/// use turnwal::backend::sqlite::codec::{decode_source_seqs, encode_source_seqs};
/// assert_eq!(encode_source_seqs(&[300, 301, 299]), [0xac, 0x02, 0x02, 0x03]);
/// assert_eq!(decode_source_seqs(&[0xac, 0x02, 0x02, 0x03]).unwrap(), [300, 301, 299]);
/// assert!(encode_source_seqs(&[]).is_empty());
/// ```
pub fn encode_source_seqs(seqs: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(seqs.len() + 2);
    let mut previous = 0u64;
    for (i, &value) in seqs.iter().enumerate() {
        let encoded = if i == 0 {
            value
        } else if value >= previous {
            (value - previous) * 2
        } else {
            (previous - value) * 2 - 1
        };
        push_varint(&mut out, encoded);
        previous = value;
    }
    out
}

const VARINT_ERROR: &str = "malformed source_event_seqs storage value";

fn read_varint(bytes: &[u8], at: &mut usize, limit: u64) -> Result<u64, String> {
    let mut value = 0u64;
    let mut shift = 0u32;
    while let Some(&byte) = bytes.get(*at) {
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            if shift > 0 && byte & 0x7f == 0 {
                return Err(format!("{VARINT_ERROR}: non-canonical varint"));
            }
            if value > limit {
                return Err(format!("{VARINT_ERROR}: varint is out of range"));
            }
            return Ok(value);
        }
        shift += 7;
        if shift > 56 {
            return Err(format!("{VARINT_ERROR}: varint is out of range"));
        }
    }
    Err(format!("{VARINT_ERROR}: truncated varint"))
}

/// Decodes a `source_event_seqs` BLOB, rejecting truncated, non-canonical
/// (a needless zero continuation byte) and out-of-range varints, and seqs
/// outside `0..=2^53-1`.
pub fn decode_source_seqs(bytes: &[u8]) -> Result<Vec<u64>, String> {
    let mut values = Vec::new();
    let mut previous = 0i128;
    let mut at = 0;
    while at < bytes.len() {
        let first = values.is_empty();
        let limit = if first {
            MAX_SAFE_INTEGER
        } else {
            MAX_SAFE_INTEGER * 2
        };
        let raw = read_varint(bytes, &mut at, limit)?;
        let value = if first {
            i128::from(raw)
        } else if raw & 1 == 0 {
            previous + i128::from(raw / 2)
        } else {
            previous - i128::from(raw.div_ceil(2))
        };
        if value < 0 || value > i128::from(MAX_SAFE_INTEGER) {
            return Err(format!("{VARINT_ERROR}: decoded seq is out of range"));
        }
        values.push(value as u64);
        previous = value;
    }
    Ok(values)
}

// ---------------------------------------------------------------------------
// The data column
// ---------------------------------------------------------------------------

/// The `data` column for a JSON text: TEXT under [`ZSTD_DATA_THRESHOLD`]
/// bytes, else the zstd level-3 frame when it is smaller, else TEXT.
///
/// ```
/// use turnwal::backend::sqlite::codec::{Data, encode_data};
/// assert_eq!(encode_data("{}".into()), Data::Text("{}".into()));
/// let big = format!("\"{}\"", "a".repeat(5000));
/// assert!(matches!(encode_data(big), Data::Blob(_)));
/// ```
pub fn encode_data(text: String) -> Data {
    encode_data_with(text, |bytes| zstd::bulk::compress(bytes, ZSTD_LEVEL))
}

/// [`encode_data`] with the compressor given (tests give one that does not
/// pay off: JSON text always compresses under zstd).
fn encode_data_with(text: String, compress: impl Fn(&[u8]) -> std::io::Result<Vec<u8>>) -> Data {
    if text.len() < ZSTD_DATA_THRESHOLD {
        return Data::Text(text);
    }
    match compress(text.as_bytes()) {
        Ok(frame) if frame.len() < text.len() => Data::Blob(frame),
        _ => Data::Text(text),
    }
}

/// The JSON text of a `data` value: TEXT as strict UTF-8, a BLOB decompressed
/// (to at most `max` bytes) and then checked as strict UTF-8.
pub fn decode_data(value: &Col, max: usize) -> Result<String, RowError> {
    let bytes = match value {
        Col::Text(t) => {
            if t.len() > max {
                return Err(RowError::invalid(format!(
                    "data is {} bytes, over the {max}-byte bound",
                    t.len()
                )));
            }
            return String::from_utf8(t.clone()).map_err(|e| {
                RowError::invalid(format!(
                    "data is not valid UTF-8 at byte {}",
                    e.utf8_error().valid_up_to()
                ))
            });
        }
        Col::Blob(frame) => decompress(frame, max)?,
        other => {
            return Err(RowError::invalid(format!(
                "data must be TEXT or BLOB, got {}",
                storage_class(other)
            )));
        }
    };
    String::from_utf8(bytes).map_err(|e| {
        RowError::invalid(format!(
            "decompressed data is not valid UTF-8 at byte {}",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn decompress(frame: &[u8], max: usize) -> Result<Vec<u8>, RowError> {
    let mut decoder = zstd::stream::read::Decoder::new(frame)
        .map_err(|e| RowError::invalid(format!("data BLOB is not a zstd frame: {e}")))?;
    let mut out = Vec::new();
    let limit = (max as u64).saturating_add(1);
    match (&mut decoder).take(limit).read_to_end(&mut out) {
        Ok(_) if out.len() > max => Err(RowError::invalid(format!(
            "data BLOB decompresses past the {max}-byte bound"
        ))),
        Ok(_) => Ok(out),
        Err(e) => {
            let incomplete = e.kind() == std::io::ErrorKind::UnexpectedEof
                || e.to_string().contains("incomplete");
            Err(RowError {
                reason: if incomplete {
                    CutReason::Incomplete
                } else {
                    CutReason::Invalid
                },
                detail: format!("data BLOB does not decompress: {e}"),
            })
        }
    }
}

fn storage_class(value: &Col) -> &'static str {
    match value {
        Col::Null => "NULL",
        Col::Integer(_) => "INTEGER",
        Col::Real(_) => "REAL",
        Col::Text(_) => "TEXT",
        Col::Blob(_) => "BLOB",
    }
}

/// `data` as a store of rows keeps it: [`encode_data`] for SQLite, always
/// TEXT for a store that compresses large values itself (PostgreSQL's
/// TOAST).
fn data_of(text: String, compress: bool) -> Data {
    if compress {
        encode_data(text)
    } else {
        Data::Text(text)
    }
}

fn packed_row(run: &[Delta], compress: bool) -> RowOut {
    RowOut {
        seq: run[0].seq,
        event_type: run[0].kind.tag().to_owned(),
        time: run[0].time,
        data: data_of(packed_json(run), compress),
        source_event_seqs: None,
        surface_op: None,
        ignorable: Some(PACKED_DISCRIMINATOR),
        members: run.len(),
    }
}

/// The scalar row of one event.
pub fn scalar_row(event: &Event) -> Result<RowOut, EventError> {
    scalar_row_as(event, true)
}

fn scalar_row_as(event: &Event, compress: bool) -> Result<RowOut, EventError> {
    let source_event_seqs = match event.source_event_seqs() {
        None => None,
        Some(raw) => {
            let seqs: Vec<u64> = serde_json::from_str(raw.get()).map_err(|e| {
                EventError::new(format!("sourceEventSeqs is not a list of seqs: {e}"))
                    .at_seq(event.seq())
                    .of_type(event.event_type())
            })?;
            Some(encode_source_seqs(&seqs))
        }
    };
    let surface_op = event.surface_op().map(|raw| {
        let mut text = raw.get().to_owned();
        let default = surface_first_by_default(event.event_type(), event.data().get());
        if event.surface_op_first() != default {
            text.push(SURFACE_FIRST_MARK);
        }
        text
    });
    Ok(RowOut {
        seq: event.seq(),
        event_type: event.event_type().to_owned(),
        time: event.time(),
        data: data_of(event.data().get().to_owned(), compress),
        source_event_seqs,
        surface_op,
        ignorable: event.ignorable().then_some(1),
        members: 1,
    })
}

/// The rows of one append batch: runs of packable deltas inside the batch
/// become packed rows of 3 to 1024 members and at most 1 MiB of `data` (the
/// largest that fits first; a member that fits in no row of 3 stays scalar,
/// and so does a remainder under 3); everything else is a scalar row.
///
/// ```
/// use turnwal::Event;
/// use turnwal::backend::sqlite::codec::encode_batch;
/// let chunk = |seq: u64| {
///     let data = format!(r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t{seq}"}}}}"#);
///     Event::new("assistant/chunk", seq, 10 + seq as i64, &data).unwrap()
/// };
/// let rows = encode_batch(&(0..5).map(chunk).collect::<Vec<_>>()).unwrap();
/// assert_eq!(rows.len(), 1);
/// assert_eq!((rows[0].event_type.as_str(), rows[0].ignorable, rows[0].members), ("text-chunks", Some(0), 5));
/// ```
pub fn encode_batch(events: &[Event]) -> Result<Vec<RowOut>, EventError> {
    encode_batch_as(events, true)
}

/// [`encode_batch`] with every `data` as TEXT, never compressed: the rows
/// of a store that compresses large values itself (PostgreSQL).
pub fn encode_batch_text(events: &[Event]) -> Result<Vec<RowOut>, EventError> {
    encode_batch_as(events, false)
}

fn encode_batch_as(events: &[Event], compress: bool) -> Result<Vec<RowOut>, EventError> {
    let mut out = Vec::new();
    for piece in plan_batch(events.iter().map(EventRef::from)) {
        match piece {
            Piece::One(i) => out.push(scalar_row_as(&events[i], compress)?),
            Piece::Run { deltas, .. } => out.push(packed_row(&deltas, compress)),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

fn integer(value: &Col, column: &str) -> Result<i64, RowError> {
    match value {
        Col::Integer(n) => Ok(*n),
        other => Err(RowError::invalid(format!(
            "{column} must be an INTEGER, got {}",
            storage_class(other)
        ))),
    }
}

fn text<'a>(value: &'a Col, column: &str) -> Result<&'a str, RowError> {
    match value {
        Col::Text(t) => std::str::from_utf8(t).map_err(|e| {
            RowError::invalid(format!(
                "{column} is not valid UTF-8 at byte {}",
                e.valid_up_to()
            ))
        }),
        other => Err(RowError::invalid(format!(
            "{column} must be TEXT, got {}",
            storage_class(other)
        ))),
    }
}

fn row_seq(row: &RowIn) -> Result<u64, RowError> {
    let seq = integer(&row.seq, "seq")?;
    if seq < 0 || seq as u64 > MAX_SAFE_INTEGER {
        return Err(RowError::invalid(format!(
            "seq {seq} is not a non-negative safe integer"
        )));
    }
    Ok(seq as u64)
}

fn row_time(row: &RowIn) -> Result<i64, RowError> {
    let time = integer(&row.time, "time")?;
    if !safe(time) {
        return Err(RowError::invalid(format!(
            "time {time} is not a safe integer"
        )));
    }
    Ok(time)
}

/// The events a row holds: one for a scalar row, the members of a packed
/// row. All or nothing: any defect makes the whole row invalid.
pub fn decode_row(row: &RowIn) -> Result<Vec<Event>, RowError> {
    match &row.ignorable {
        Col::Null | Col::Integer(1) => decode_scalar(row).map(|e| vec![e]),
        Col::Integer(PACKED_DISCRIMINATOR) => decode_packed(row),
        Col::Integer(n) => Err(RowError::invalid(format!(
            "ignorable must be 0, 1 or NULL, got {n}"
        ))),
        other => Err(RowError::invalid(format!(
            "ignorable must be 0, 1 or NULL, got {}",
            storage_class(other)
        ))),
    }
}

fn event_error(e: EventError, data: &str) -> RowError {
    let reason = if e.reason.contains("unexpected end of input") || ends_early(data) {
        CutReason::Incomplete
    } else {
        CutReason::Invalid
    };
    RowError {
        reason,
        detail: e.reason,
    }
}

/// Whether `text` is JSON cut short: its first error is where the input
/// ends, or is a `true`/`false`/`null` literal or a `\u` escape that the end
/// of the input cut (the scanner reports those as invalid, not as the end).
fn ends_early(text: &str) -> bool {
    let Err(e) = RawJson::parse(text) else {
        return false;
    };
    let rest = &text.as_bytes()[e.offset.min(text.len())..];
    match e.message {
        "unexpected end of input" => true,
        "invalid literal" => [&b"true"[..], b"false", b"null"]
            .iter()
            .any(|word| word.len() > rest.len() && word.starts_with(rest)),
        "invalid \\u escape" => {
            rest.len() < 5
                && rest.first() == Some(&b'u')
                && rest[1..].iter().all(u8::is_ascii_hexdigit)
        }
        _ => false,
    }
}

fn decode_scalar(row: &RowIn) -> Result<Event, RowError> {
    let seq = row_seq(row)?;
    let event_type = text(&row.event_type, "type")?;
    let time = row_time(row)?;
    let data = decode_data(&row.data, MAX_SCALAR_DATA_BYTES)?;
    let mut event = Event::new(event_type, seq, time, &data).map_err(|e| event_error(e, &data))?;
    if row.ignorable == Col::Integer(1) {
        event = event.with_ignorable();
    }
    match &row.source_event_seqs {
        Col::Null => {}
        Col::Blob(bytes) => {
            let seqs = decode_source_seqs(bytes).map_err(RowError::invalid)?;
            event = event
                .with_source_event_seqs(&seqs)
                .map_err(|e| RowError::invalid(e.reason))?;
        }
        other => {
            return Err(RowError::invalid(format!(
                "source_event_seqs must be a BLOB or NULL, got {}",
                storage_class(other)
            )));
        }
    }
    match &row.surface_op {
        Col::Null => {}
        Col::Text(_) => {
            let op = text(&row.surface_op, "surface_op")?;
            let (op, marked) = match op.strip_suffix(SURFACE_FIRST_MARK) {
                Some(op) => (op, true),
                None => (op, false),
            };
            event = event
                .with_surface_op(op)
                .map_err(|e| RowError::invalid(e.reason))?;
            if marked != surface_first_by_default(event_type, event.data().get()) {
                event = event.with_surface_op_first();
            }
        }
        other => {
            return Err(RowError::invalid(format!(
                "surface_op must be TEXT or NULL, got {}",
                storage_class(other)
            )));
        }
    }
    Ok(event)
}

/// A packed row read as stored, without decoding its members: its columns
/// checked as [`decode_row`] checks them and its `data` (a BLOB
/// decompressed) in the spelling [`PackedRun::parse`] reads. The row's
/// TEXT `data` is taken when it is; `None`, the row untouched, when it is
/// not, for [`decode_row`] to decode or refuse it.
pub(crate) fn stored_run(row: &mut RowIn) -> Option<PackedRun> {
    if !row.is_packed() || row.source_event_seqs != Col::Null || row.surface_op != Col::Null {
        return None;
    }
    let kind = DeltaKind::of_tag(text(&row.event_type, "type").ok()?)?;
    let (seq0, time0) = (row_seq(row).ok()?, row_time(row).ok()?);
    match &mut row.data {
        Col::Text(bytes) if bytes.len() <= MAX_PACKED_DATA_BYTES => {
            let data = String::from_utf8(std::mem::take(bytes)).map_err(|e| e.into_bytes());
            match data.map(|data| PackedRun::parse(kind, seq0, time0, data)) {
                Ok(Ok(run)) => Some(run),
                Ok(Err(data)) => {
                    *bytes = data.into_bytes();
                    None
                }
                Err(data) => {
                    *bytes = data;
                    None
                }
            }
        }
        Col::Blob(frame) => {
            let data = String::from_utf8(decompress(frame, MAX_PACKED_DATA_BYTES).ok()?).ok()?;
            PackedRun::parse(kind, seq0, time0, data).ok()
        }
        _ => None,
    }
}

fn malformed(tag: &str, reason: impl std::fmt::Display) -> RowError {
    RowError::invalid(format!("malformed {tag} storage row: {reason}"))
}

fn decode_packed(row: &RowIn) -> Result<Vec<Event>, RowError> {
    let tag = text(&row.event_type, "type")?;
    let Some(kind) = DeltaKind::of_tag(tag) else {
        return Err(malformed(tag, "packed discriminator requires a chunk tag"));
    };
    if row.source_event_seqs != Col::Null || row.surface_op != Col::Null {
        return Err(malformed(tag, "packed surface fields must be null"));
    }
    let seq0 = row_seq(row)?;
    let time0 = row_time(row)?;
    let data =
        decode_data(&row.data, MAX_PACKED_DATA_BYTES).map_err(|e| malformed(tag, e.detail))?;
    expand_run(kind, seq0, time0, &data).map_err(|e| malformed(tag, e))
}

#[cfg(test)]
mod tests;
