//! The upstream harness's SQLite store against turnwal's SQLite backend
//! (reference/upstream-persistence.md §4, and the cases of §8.5 that apply).
//!
//! The [`upstream`] module is a literal, independent re-statement of the
//! upstream schema-17 store, written from the reference and sharing no code
//! with `crates/turnwal/src/backend/sqlite`:
//! - the schema statements of `resources/sql/schema.sql`, the identity pragmas
//!   (`application_id` 1146308688, `user_version` 17) and the store id row;
//! - the row encoding: scalar rows (`data` TEXT below 4096 bytes, else a zstd
//!   level 3 BLOB when smaller; `source_event_seqs` as a LEB128 first seq then
//!   ZigZag varints of the deltas, `[]` as an empty BLOB; `surface_op` as JSON
//!   text; `ignorable` 1 or NULL), packed `assistant/chunk` runs
//!   (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`, `ignorable` 0,
//!   `seq0`/`time0` in `seq`/`time`, 3 to 1024 members, at most 1 MiB of data,
//!   packed per append batch);
//! - the row decoder and `scanRows` (committed corruption versus a removable
//!   tail), and the schema check upstream runs on every open.
//!
//! A database built with it is what the upstream harness writes; turnwal must
//! read it. A database turnwal writes must pass its checks and decode, row by
//! row, to the events appended.
//!
//! The compatibility test, both ways:
//! `turnwal_reads_a_database_built_the_upstream_way` and
//! `database_written_by_turnwal_passes_upstream_checks`, with
//! `repair_writes_closer_rows_as_upstream_does` for the rows a repair adds.
//! The `upstream_*` tests check the literal model itself against the
//! reference's rules (varint bytes, packing, the schema, compression).
//!
//! §8.5 cases and where they live:
//! - packing across batch partitions, earlier rowids unchanged:
//!   `packing_across_batch_partitions_keeps_earlier_rows`, and the paced
//!   stream (1,004 events in batches of 40: 31 rows, only inserts):
//!   `paced_stream_only_inserts_rows`;
//! - a packed predecessor covering `fromSeq` (also behind an overlapping
//!   scalar row), and a malformed one: `read_from_seeks_through_packed_predecessor`;
//! - busy wait: `append_waits_for_a_writer_holding_begin_immediate`,
//!   `append_fails_clearly_when_busy_timeout_expires`;
//! - refused databases, nothing changed: `refuses_user_version_16`,
//!   `refuses_foreign_application_id`, `refuses_changed_column`,
//!   `refuses_non_strict_table`, `refuses_extra_object`,
//!   `refuses_unversioned_non_pristine_file`, and at mutation time
//!   `detects_ownership_change_at_append`;
//! - stale writer and stale repair: `stale_writer_is_rejected_between_two_stores`
//!   (the per-session lock keeps the second store out while the first
//!   holds the session; its stale batch is refused afterwards),
//!   `stale_writer_is_rejected_after_rows_written_behind_its_back` (a writer
//!   that ignores the lock, as the upstream harness does: the backend's own
//!   stored-next-seq check inside `BEGIN IMMEDIATE`), `stale_repair_is_rejected`;
//! - malformed rows: `malformed_row_*` (committed corruption before the last
//!   `turn/end`, a torn tail after it), and a malformed tail row before an
//!   append: `malformed_tail_row_is_rejected_before_an_append`;
//! - compression thresholds: `compression_thresholds`;
//! - packing limits: `packing_splits_runs_at_1024_members`,
//!   `packing_splits_runs_at_1_mib`.
//!
//! Not mapped: busy journal-mode switches and journal modes other than the
//! default (they test upstream's open loop, not the file format), the
//! ownership and mode checks upstream makes of an existing file and its
//! directory (only the mode of a file turnwal creates is checked), and the
//! SQL-in-TypeScript boundary check.

#![allow(clippy::too_many_arguments)]

use crate::support;

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use support::T0;
use support::log::{Log, q};
use turnwal::backend::Backend;
use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions};
use turnwal::{
    Corruption, Cut, CutReason, Error, Event, LogState, SessionHeader, Store, StoreOptions,
};

// ---------------------------------------------------------------------------
// The upstream store, restated literally
// ---------------------------------------------------------------------------

/// Upstream's schema-17 SQLite store, written out from the reference.
mod upstream {
    use std::path::Path;

    use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
    use rusqlite::{Connection, OptionalExtension, params};
    use serde_json::Value;
    use turnwal::SessionHeader;

    /// `PRAGMA application_id`: 0x44534850, ASCII "DSHP".
    pub const APPLICATION_ID: i64 = 1_146_308_688;
    /// `PRAGMA user_version` of schema 17.
    pub const USER_VERSION: i64 = 17;
    /// `data` below this many bytes stays TEXT.
    pub const ZSTD_DATA_THRESHOLD_BYTES: usize = 4096;
    /// zstd level of a compressed `data` BLOB.
    pub const ZSTD_LEVEL: i32 = 3;
    /// Members of a packed row: at least 3...
    pub const MIN_PACKED_ROW_MEMBERS: usize = 3;
    /// ...and at most 1024.
    pub const MAX_PACKED_ROW_MEMBERS: usize = 1024;
    /// Uncompressed `data` bytes of a packed row: at most 1 MiB.
    pub const MAX_PACKED_DATA_BYTES: usize = 1_048_576;
    /// `Number.MAX_SAFE_INTEGER`.
    pub const MAX_SAFE: u64 = (1 << 53) - 1;
    /// The packed row tags.
    pub const CHUNK_TAGS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

    /// `resources/sql/schema.sql`. The reference (§4) quotes it "in
    /// substance"; upstream compares `sqlite_schema` text after whitespace
    /// normalization only, so the tokens and their spacing must be upstream's
    /// own (`CHECK (singleton = 1)`, `IN (0, 1)`, `PRIMARY KEY (session_id,
    /// seq)`), which is how upstream's schema.sql spells them. Column
    /// alignment is whitespace and does not matter.
    pub const SCHEMA_SQL: &str = "
CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  cwd TEXT,
  parent_session TEXT,
  seed_length INTEGER,
  origin TEXT,
  delegation_depth INTEGER,
  agent_preset TEXT,
  incarnation TEXT NOT NULL,
  revision INTEGER NOT NULL
) STRICT;

CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data ANY NOT NULL,
  source_event_seqs ANY,
  surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
";

    // -- the logical event and the physical row ----------------------------

    /// A logical session event: `{type, seq, time, data, ignorable?,
    /// sourceEventSeqs?, surfaceOp?}`, `data` and `surfaceOp` as JSON text.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Logical {
        pub kind: String,
        pub seq: u64,
        pub time: i64,
        pub data: String,
        pub ignorable: bool,
        pub sources: Option<Vec<u64>>,
        pub surface_op: Option<String>,
    }

    /// One SQLite value, as stored (TEXT kept as bytes: it may be invalid
    /// UTF-8 in a damaged file).
    #[derive(Clone, PartialEq)]
    pub enum Col {
        Null,
        Int(i64),
        Real(f64),
        Text(Vec<u8>),
        Blob(Vec<u8>),
    }

    impl std::fmt::Debug for Col {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let short = |s: &str| -> String {
                if s.len() <= 160 {
                    return s.to_owned();
                }
                let mut end = 160;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}… ({} bytes)", &s[..end], s.len())
            };
            match self {
                Col::Null => write!(f, "NULL"),
                Col::Int(i) => write!(f, "{i}"),
                Col::Real(r) => write!(f, "{r:?}"),
                Col::Text(t) => write!(f, "TEXT {:?}", short(&String::from_utf8_lossy(t))),
                Col::Blob(b) if b.len() <= 32 => write!(f, "BLOB {b:02x?}"),
                Col::Blob(b) => write!(f, "BLOB {:02x?}… ({} bytes)", &b[..32], b.len()),
            }
        }
    }

    impl Col {
        pub fn text(s: &str) -> Col {
            Col::Text(s.as_bytes().to_vec())
        }

        fn of(v: ValueRef<'_>) -> Col {
            match v {
                ValueRef::Null => Col::Null,
                ValueRef::Integer(i) => Col::Int(i),
                ValueRef::Real(f) => Col::Real(f),
                ValueRef::Text(t) => Col::Text(t.to_vec()),
                ValueRef::Blob(b) => Col::Blob(b.to_vec()),
            }
        }
    }

    impl ToSql for Col {
        fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
            Ok(ToSqlOutput::Borrowed(match self {
                Col::Null => ValueRef::Null,
                Col::Int(i) => ValueRef::Integer(*i),
                Col::Real(f) => ValueRef::Real(*f),
                Col::Text(t) => ValueRef::Text(t),
                Col::Blob(b) => ValueRef::Blob(b),
            }))
        }
    }

    /// One physical row of `events` (without `session_id`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct Row {
        pub seq: i64,
        pub kind: String,
        pub time: i64,
        pub data: Col,
        pub sources: Col,
        pub surface_op: Col,
        pub ignorable: Col,
    }

    impl Row {
        /// Whether this is a packed row (`ignorable = 0`).
        pub fn packed(&self) -> bool {
            self.ignorable == Col::Int(0)
        }
    }

    // -- provenance varints -------------------------------------------------

    /// `encodeSourceEventSeqs`: the first seq as an unsigned LEB128 varint,
    /// each following one as the ZigZag varint of its delta.
    pub fn encode_varints(seqs: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut previous = 0u64;
        for (i, &value) in seqs.iter().enumerate() {
            let mut encoded = if i == 0 {
                value
            } else if value >= previous {
                (value - previous) * 2
            } else {
                (previous - value) * 2 - 1
            };
            while encoded >= 0x80 {
                out.push((encoded & 0x7f) as u8 | 0x80);
                encoded >>= 7;
            }
            out.push(encoded as u8);
            previous = value;
        }
        out
    }

    fn read_varint(bytes: &[u8], mut offset: usize, limit: u128) -> Result<(u128, usize), String> {
        let mut value = 0u128;
        let mut shift = 0u32;
        while offset < bytes.len() {
            let byte = bytes[offset];
            offset += 1;
            value |= u128::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                if shift > 0 && byte & 0x7f == 0 {
                    return Err(
                        "malformed source_event_seqs storage value: non-canonical varint".into(),
                    );
                }
                if value > limit {
                    return Err(
                        "malformed source_event_seqs storage value: varint is out of range".into(),
                    );
                }
                return Ok((value, offset));
            }
            shift += 7;
            if shift > 56 {
                return Err(
                    "malformed source_event_seqs storage value: varint is out of range".into(),
                );
            }
        }
        Err("malformed source_event_seqs storage value: truncated varint".into())
    }

    /// `decodeSourceEventSeqs`: rejects truncated, non-canonical and
    /// out-of-range varints.
    pub fn decode_varints(bytes: &[u8]) -> Result<Vec<u64>, String> {
        let mut values = Vec::new();
        let mut previous = 0i128;
        let mut offset = 0;
        while offset < bytes.len() {
            let first = values.is_empty();
            let limit = if first {
                u128::from(MAX_SAFE)
            } else {
                u128::from(MAX_SAFE) * 2
            };
            let (raw, next) = read_varint(bytes, offset, limit)?;
            offset = next;
            let value = if first {
                raw as i128
            } else if raw & 1 == 0 {
                previous + (raw / 2) as i128
            } else {
                previous - raw.div_ceil(2) as i128
            };
            if value < 0 || value > i128::from(MAX_SAFE) {
                return Err(
                    "malformed source_event_seqs storage value: decoded seq is out of range".into(),
                );
            }
            values.push(value as u64);
            previous = value;
        }
        Ok(values)
    }

    // -- data column ----------------------------------------------------------

    /// `encodeData`: TEXT under 4096 bytes; else the zstd level 3 frame when
    /// it is smaller, else TEXT.
    pub fn encode_data(serialized: &str) -> Col {
        let bytes = serialized.as_bytes();
        if bytes.len() < ZSTD_DATA_THRESHOLD_BYTES {
            return Col::text(serialized);
        }
        let frame = zstd::bulk::compress(bytes, ZSTD_LEVEL).expect("zstd compress");
        if frame.len() < bytes.len() {
            Col::Blob(frame)
        } else {
            Col::text(serialized)
        }
    }

    /// `decodeData`: TEXT as is; a BLOB decompressed (bounded by `max` when
    /// given) and decoded as strict UTF-8.
    pub fn decode_data(value: &Col, max: Option<usize>) -> Result<String, String> {
        let bytes = match value {
            Col::Text(t) => t.clone(),
            Col::Blob(b) => match max {
                Some(max) => zstd::bulk::decompress(b, max).map_err(|e| {
                    format!("zstd frame does not decompress within {max} bytes: {e}")
                })?,
                None => zstd::stream::decode_all(&b[..])
                    .map_err(|e| format!("zstd frame does not decompress: {e}"))?,
            },
            other => return Err(format!("data must be TEXT or BLOB, got {other:?}")),
        };
        String::from_utf8(bytes).map_err(|e| format!("data is not valid UTF-8: {e}"))
    }

    // -- packing -----------------------------------------------------------------

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum DeltaKind {
        Text,
        Reasoning,
        ToolCall,
    }

    /// A whitelisted `assistant/chunk` delta.
    #[derive(Debug, Clone)]
    struct Delta {
        kind: DeltaKind,
        seq: u64,
        time: i64,
        turn: Value,
        step: Value,
        index: Value,
        id: Option<String>,
        name: Option<String>,
        payload: String,
    }

    fn exact_keys(map: &serde_json::Map<String, Value>, keys: &[&str]) -> bool {
        map.len() == keys.len() && keys.iter().all(|k| map.contains_key(*k))
    }

    fn same_number(a: &Value, b: &Value) -> bool {
        a.as_f64() == b.as_f64()
    }

    /// `classify`: the delta kind when the whole shape is whitelisted.
    fn classify(event: &Logical) -> Option<Delta> {
        if event.kind != "assistant/chunk"
            || event.ignorable
            || event.sources.is_some()
            || event.surface_op.is_some()
            || event.seq > MAX_SAFE
            || event.time.unsigned_abs() > MAX_SAFE
        {
            return None;
        }
        let data: Value = serde_json::from_str(&event.data).ok()?;
        let data = data.as_object()?;
        if !exact_keys(data, &["turn", "step", "chunk"]) {
            return None;
        }
        let (turn, step) = (data["turn"].clone(), data["step"].clone());
        if !turn.is_number() || !step.is_number() {
            return None;
        }
        let chunk = data["chunk"].as_object()?;
        let index = chunk.get("index")?.clone();
        if !index.is_number() {
            return None;
        }
        let delta = |kind, id, name, payload: &Value| {
            Some(Delta {
                kind,
                seq: event.seq,
                time: event.time,
                turn: turn.clone(),
                step: step.clone(),
                index: index.clone(),
                id,
                name,
                payload: payload.as_str()?.to_owned(),
            })
        };
        match chunk.get("type")?.as_str()? {
            t @ ("text-delta" | "reasoning-delta") => {
                if !exact_keys(chunk, &["type", "index", "text"]) {
                    return None;
                }
                let kind = if t == "text-delta" {
                    DeltaKind::Text
                } else {
                    DeltaKind::Reasoning
                };
                delta(kind, None, None, &chunk["text"])
            }
            "tool-call-delta" => {
                let plain = exact_keys(chunk, &["type", "index", "id", "argumentsDelta"]);
                let named = exact_keys(chunk, &["type", "index", "id", "name", "argumentsDelta"])
                    && chunk["name"].is_string();
                if !(plain || named) {
                    return None;
                }
                let id = chunk["id"].as_str()?.to_owned();
                let name = named.then(|| chunk["name"].as_str().unwrap().to_owned());
                delta(
                    DeltaKind::ToolCall,
                    Some(id),
                    name,
                    &chunk["argumentsDelta"],
                )
            }
            _ => None,
        }
    }

    /// `continues`: whether `next` extends a run ending in `previous`.
    fn continues(previous: &Delta, next: &Delta) -> bool {
        next.kind == previous.kind
            && next.seq == previous.seq + 1
            && (i128::from(next.time) - i128::from(previous.time)).unsigned_abs()
                <= u128::from(MAX_SAFE)
            && same_number(&next.turn, &previous.turn)
            && same_number(&next.step, &previous.step)
            && same_number(&next.index, &previous.index)
            && (next.kind != DeltaKind::ToolCall
                || (next.id == previous.id && next.name == previous.name))
    }

    fn json_string(s: &str) -> String {
        serde_json::to_string(s).unwrap()
    }

    /// `JSON.stringify(row.data)` of the row for `run`, in upstream's key
    /// order: `{turn, step, index, dt, texts}` or `{turn, step, index, dt,
    /// id, name?, args}`.
    fn packed_data(run: &[Delta]) -> String {
        let first = &run[0];
        let dt: Vec<i64> = run.windows(2).map(|w| w[1].time - w[0].time).collect();
        let payload: Vec<&str> = run.iter().map(|d| d.payload.as_str()).collect();
        let mut out = format!(
            "{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":{}",
            first.turn,
            first.step,
            first.index,
            serde_json::to_string(&dt).unwrap()
        );
        match first.kind {
            DeltaKind::ToolCall => {
                out.push_str(",\"id\":");
                out.push_str(&json_string(first.id.as_deref().unwrap()));
                if let Some(name) = &first.name {
                    out.push_str(",\"name\":");
                    out.push_str(&json_string(name));
                }
                out.push_str(",\"args\":");
            }
            _ => out.push_str(",\"texts\":"),
        }
        out.push_str(&serde_json::to_string(&payload).unwrap());
        out.push('}');
        out
    }

    fn tag(kind: DeltaKind) -> &'static str {
        match kind {
            DeltaKind::Text => "text-chunks",
            DeltaKind::Reasoning => "reasoning-chunks",
            DeltaKind::ToolCall => "tool-call-chunks",
        }
    }

    /// One storage record: a logical event stored as is, or a packed run.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Record {
        Scalar(Logical),
        Packed {
            tag: &'static str,
            seq0: u64,
            time0: i64,
            data: String,
        },
    }

    /// `emitBoundedRun`: rows of at most 1024 members and 1 MiB of data,
    /// the largest that fits first; a member that fits in no row of 3 stays
    /// scalar, and so does a remainder under 3.
    fn emit_bounded_run(out: &mut Vec<Record>, run: &[Delta], events: &[Logical]) {
        let packed = |members: &[Delta]| Record::Packed {
            tag: tag(members[0].kind),
            seq0: members[0].seq,
            time0: members[0].time,
            data: packed_data(members),
        };
        let scalar =
            |d: &Delta| Record::Scalar(events.iter().find(|e| e.seq == d.seq).unwrap().clone());
        let mut offset = 0;
        while run.len() - offset >= MIN_PACKED_ROW_MEMBERS {
            let mut low = MIN_PACKED_ROW_MEMBERS;
            let mut high = (run.len() - offset).min(MAX_PACKED_ROW_MEMBERS);
            if packed_data(&run[offset..offset + high]).len() <= MAX_PACKED_DATA_BYTES {
                out.push(packed(&run[offset..offset + high]));
                offset += high;
                continue;
            }
            high -= 1;
            let mut accepted = 0;
            while low <= high {
                let middle = (low + high) / 2;
                if packed_data(&run[offset..offset + middle]).len() <= MAX_PACKED_DATA_BYTES {
                    accepted = middle;
                    low = middle + 1;
                } else {
                    high = middle - 1;
                }
            }
            if accepted == 0 {
                out.push(scalar(&run[offset]));
                offset += 1;
                continue;
            }
            out.push(packed(&run[offset..offset + accepted]));
            offset += accepted;
        }
        out.extend(run[offset..].iter().map(scalar));
    }

    /// `packChunkRuns` of schema 17, over one append batch.
    pub fn pack_chunk_runs(events: &[Logical]) -> Vec<Record> {
        let mut out = Vec::new();
        let mut run: Vec<Delta> = Vec::new();
        for event in events {
            match classify(event) {
                None => {
                    emit_bounded_run(&mut out, &run, events);
                    run.clear();
                    out.push(Record::Scalar(event.clone()));
                }
                Some(delta) => {
                    if run.last().is_some_and(|last| continues(last, &delta)) {
                        run.push(delta);
                    } else {
                        emit_bounded_run(&mut out, &run, events);
                        run = vec![delta];
                    }
                }
            }
        }
        emit_bounded_run(&mut out, &run, events);
        out
    }

    /// `bindRecord`: the column values of one record.
    pub fn bind(record: &Record) -> Row {
        match record {
            Record::Packed {
                tag,
                seq0,
                time0,
                data,
            } => Row {
                seq: *seq0 as i64,
                kind: (*tag).to_owned(),
                time: *time0,
                data: encode_data(data),
                sources: Col::Null,
                surface_op: Col::Null,
                ignorable: Col::Int(0),
            },
            Record::Scalar(e) => Row {
                seq: e.seq as i64,
                kind: e.kind.clone(),
                time: e.time,
                data: encode_data(&e.data),
                sources: e
                    .sources
                    .as_ref()
                    .map_or(Col::Null, |s| Col::Blob(encode_varints(s))),
                surface_op: e.surface_op.as_deref().map_or(Col::Null, Col::text),
                ignorable: if e.ignorable { Col::Int(1) } else { Col::Null },
            },
        }
    }

    /// The rows upstream writes for one append batch.
    pub fn encode_batch(events: &[Logical]) -> Vec<Row> {
        pack_chunk_runs(events).iter().map(bind).collect()
    }

    // -- decoding ---------------------------------------------------------------

    fn malformed(tag: &str, why: &str) -> String {
        format!("malformed {tag} storage row: {why}")
    }

    fn safe_integer(v: &Value) -> Option<i64> {
        let f = v.as_f64()?;
        (f.fract() == 0.0 && f.abs() <= MAX_SAFE as f64).then_some(f as i64)
    }

    /// `decodeSerializedChunkRow`: size bound before parsing, exact keys,
    /// 3 to 1024 string members, `dt` one shorter, safe seqs and times.
    fn decode_packed(tag: &str, seq0: i64, time0: i64, text: &str) -> Result<Vec<Logical>, String> {
        if text.len() > MAX_PACKED_DATA_BYTES {
            return Err(malformed(tag, "data exceeds 1048576 UTF-8 bytes"));
        }
        let value: Value =
            serde_json::from_str(text).map_err(|e| malformed(tag, &format!("bad JSON: {e}")))?;
        let data = value
            .as_object()
            .ok_or_else(|| malformed(tag, "data must be an object"))?;
        if seq0 < 0 || seq0 as u64 > MAX_SAFE {
            return Err(malformed(tag, "seq0 must be non-negative"));
        }
        if time0.unsigned_abs() > MAX_SAFE {
            return Err(malformed(tag, "time0 must be a safe integer"));
        }
        let tool = tag == "tool-call-chunks";
        let with_name =
            tool && exact_keys(data, &["turn", "step", "index", "id", "name", "dt", "args"]);
        if tool {
            if !with_name && !exact_keys(data, &["turn", "step", "index", "id", "dt", "args"]) {
                return Err(malformed(tag, "invalid tool-call data fields"));
            }
            if !data["id"].is_string() || (with_name && !data["name"].is_string()) {
                return Err(malformed(tag, "id and optional name must be strings"));
            }
        } else if !exact_keys(data, &["turn", "step", "index", "dt", "texts"]) {
            return Err(malformed(tag, "invalid text data fields"));
        }
        if !data["turn"].is_number() || !data["step"].is_number() || !data["index"].is_number() {
            return Err(malformed(tag, "turn/step/index must be numbers"));
        }
        let key = if tool { "args" } else { "texts" };
        let members: Vec<&str> = match data[key].as_array() {
            Some(a)
                if (MIN_PACKED_ROW_MEMBERS..=MAX_PACKED_ROW_MEMBERS).contains(&a.len())
                    && a.iter().all(Value::is_string) =>
            {
                a.iter().map(|v| v.as_str().unwrap()).collect()
            }
            _ => {
                return Err(malformed(
                    tag,
                    &format!("{key} must contain 3..1024 strings"),
                ));
            }
        };
        let dt: Vec<i64> = match data["dt"].as_array() {
            Some(a) if a.iter().all(|g| safe_integer(g).is_some()) => {
                a.iter().map(|g| safe_integer(g).unwrap()).collect()
            }
            _ => return Err(malformed(tag, "dt must be an array of safe integers")),
        };
        if dt.len() != members.len() - 1 {
            return Err(malformed(tag, "dt length must match the member count"));
        }
        if seq0 as u64 + members.len() as u64 - 1 > MAX_SAFE {
            return Err(malformed(tag, "member seqs exceed safe integers"));
        }
        let mut times = vec![time0];
        for gap in &dt {
            let next = times.last().unwrap() + gap;
            if next.unsigned_abs() > MAX_SAFE {
                return Err(malformed(tag, "member times exceed safe integers"));
            }
            times.push(next);
        }
        let (turn, step, index) = (&data["turn"], &data["step"], &data["index"]);
        Ok(members
            .iter()
            .enumerate()
            .map(|(k, member)| {
                let chunk = match tag {
                    "text-chunks" => format!(
                        "{{\"type\":\"text-delta\",\"index\":{index},\"text\":{}}}",
                        json_string(member)
                    ),
                    "reasoning-chunks" => format!(
                        "{{\"type\":\"reasoning-delta\",\"index\":{index},\"text\":{}}}",
                        json_string(member)
                    ),
                    _ => format!(
                        "{{\"type\":\"tool-call-delta\",\"index\":{index},\"id\":{}{},\"argumentsDelta\":{}}}",
                        json_string(data["id"].as_str().unwrap()),
                        if with_name {
                            format!(",\"name\":{}", json_string(data["name"].as_str().unwrap()))
                        } else {
                            String::new()
                        },
                        json_string(member)
                    ),
                };
                Logical {
                    kind: "assistant/chunk".into(),
                    seq: seq0 as u64 + k as u64,
                    time: times[k],
                    data: format!("{{\"turn\":{turn},\"step\":{step},\"chunk\":{chunk}}}"),
                    ignorable: false,
                    sources: None,
                    surface_op: None,
                }
            })
            .collect())
    }

    /// `decodeRow`: one physical row into the logical events it holds.
    pub fn decode_row(row: &Row) -> Result<Vec<Logical>, String> {
        if row.packed() {
            if !CHUNK_TAGS.contains(&row.kind.as_str()) {
                return Err(malformed(
                    &row.kind,
                    "packed discriminator requires a chunk tag",
                ));
            }
            if row.sources != Col::Null || row.surface_op != Col::Null {
                return Err(malformed(&row.kind, "packed surface fields must be null"));
            }
            let text = decode_data(&row.data, Some(MAX_PACKED_DATA_BYTES))
                .map_err(|e| malformed(&row.kind, &e))?;
            return decode_packed(&row.kind, row.seq, row.time, &text);
        }
        let sources = match &row.sources {
            Col::Null => None,
            Col::Blob(b) => Some(decode_varints(b)?),
            other => return Err(format!("source_event_seqs must be a BLOB, got {other:?}")),
        };
        let surface_op = match &row.surface_op {
            Col::Null => None,
            // `JSON.parse`: the value counts, not its spelling.
            Col::Text(t) => {
                let text = String::from_utf8(t.clone()).map_err(|e| e.to_string())?;
                let value: Value =
                    serde_json::from_str(&text).map_err(|e| format!("surface_op: {e}"))?;
                Some(value.to_string())
            }
            other => return Err(format!("surface_op must be TEXT, got {other:?}")),
        };
        let data = decode_data(&row.data, None)?;
        serde_json::from_str::<Value>(&data).map_err(|e| format!("data is not JSON: {e}"))?;
        Ok(vec![Logical {
            kind: row.kind.clone(),
            seq: u64::try_from(row.seq).map_err(|_| "negative seq".to_owned())?,
            time: row.time,
            data,
            ignorable: row.ignorable == Col::Int(1),
            sources,
            surface_op,
        }])
    }

    /// What `scanRows` finds: the contiguous logical prefix, and where a
    /// removable tail starts.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Scanned {
        pub preserved: Vec<Logical>,
        pub torn_from: Option<i64>,
    }

    /// `scanRows`: a bad row or gap at or before the last row holding a
    /// `turn/end` is corruption; after it, the start of a removable tail.
    pub fn scan_rows(rows: &[Row], base: u64) -> Result<Scanned, String> {
        let last_turn_end = rows.iter().rposition(|row| {
            decode_row(row).is_ok_and(|events| events.iter().any(|e| e.kind == "turn/end"))
        });
        let mut preserved = Vec::new();
        let mut expected = base;
        for (index, row) in rows.iter().enumerate() {
            let events = decode_row(row).ok().filter(|events| {
                events
                    .iter()
                    .enumerate()
                    .all(|(k, e)| e.seq == expected + k as u64)
            });
            match events {
                Some(events) => {
                    expected += events.len() as u64;
                    preserved.extend(events);
                }
                None if last_turn_end.is_some_and(|last| index <= last) => {
                    return Err(format!(
                        "corrupt session log: invalid committed physical row at seq {}",
                        row.seq
                    ));
                }
                None => {
                    return Ok(Scanned {
                        preserved,
                        torn_from: Some(row.seq),
                    });
                }
            }
        }
        Ok(Scanned {
            preserved,
            torn_from: None,
        })
    }

    // -- the database ---------------------------------------------------------

    /// Collapses every whitespace run to one space and trims.
    pub fn normalize_sql(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// `(type, name, tbl_name, normalized sql)` of every `sqlite_schema` row
    /// except SQLite's own `sqlite_*` objects.
    pub fn schema_objects(conn: &Connection) -> Vec<(String, String, String, String)> {
        let mut stmt = conn
            .prepare(
                "SELECT type, name, tbl_name, sql FROM sqlite_schema \
                 WHERE substr(name, 1, 7) <> 'sqlite_' ORDER BY type, name",
            )
            .unwrap();
        stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                normalize_sql(&r.get::<_, Option<String>>(3)?.unwrap_or_default()),
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    /// The schema objects of a reference in-memory database built from
    /// [`SCHEMA_SQL`].
    pub fn reference_schema() -> Vec<(String, String, String, String)> {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        schema_objects(&conn)
    }

    pub fn pragma_i64(conn: &Connection, name: &str) -> i64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    }

    /// Whether `s` is a UUID in its canonical textual form.
    pub fn is_uuid(s: &str) -> bool {
        let groups: Vec<&str> = s.split('-').collect();
        groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
            && groups
                .iter()
                .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
    }

    /// The checks upstream runs on every open of a versioned database:
    /// application id, user_version, the exact schema objects, STRICT
    /// tables, and a UUID store id.
    pub fn check_database(conn: &Connection) -> Result<(), String> {
        let app = pragma_i64(conn, "application_id");
        if app != APPLICATION_ID {
            return Err(format!("foreign application id {app}"));
        }
        let version = pragma_i64(conn, "user_version");
        if version != USER_VERSION {
            return Err(format!("schema version {version}, incompatible"));
        }
        let got = schema_objects(conn);
        let want = reference_schema();
        if got != want {
            return Err(format!(
                "schema objects differ:\n got  {got:#?}\n want {want:#?}"
            ));
        }
        for table in ["persistence_state", "sessions", "events"] {
            let strict: i64 = conn
                .query_row(
                    "SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
                    [table],
                    |r| r.get(0),
                )
                .map_err(|e| format!("table {table}: {e}"))?;
            if strict != 1 {
                return Err(format!("table {table} is not STRICT"));
            }
        }
        let ids: Vec<(i64, String)> = conn
            .prepare("SELECT singleton, store_id FROM persistence_state")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        match ids.as_slice() {
            [(1, id)] if is_uuid(id) => Ok(()),
            other => Err(format!("persistence_state is not one UUID row: {other:?}")),
        }
    }

    /// Opens a database the way upstream's store does, creating schema 17
    /// in one transaction when the file is pristine.
    pub fn open(path: &Path, store_id: &str) -> Connection {
        let conn = crate::sqlite_upstream::open_0600(path).unwrap();
        conn.pragma_update(None, "trusted_schema", "OFF").unwrap();
        conn.pragma_update(None, "mmap_size", 0).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let version = pragma_i64(&conn, "user_version");
        let app = pragma_i64(&conn, "application_id");
        let objects: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE substr(name, 1, 7) <> 'sqlite_'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if (version, app, objects) == (0, 0, 0) {
            conn.execute_batch(SCHEMA_SQL).unwrap();
            conn.execute(
                "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?1)",
                [store_id],
            )
            .unwrap();
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .unwrap();
            conn.pragma_update(None, "user_version", USER_VERSION)
                .unwrap();
        }
        check_database(&conn).unwrap();
        conn.execute_batch("COMMIT").unwrap();
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "wal", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.pragma_update(None, "synchronous", "FULL").unwrap();
        assert_eq!(pragma_i64(&conn, "synchronous"), 2);
        conn
    }

    /// The physical rows of a session in seq order, with their rowids.
    pub fn read_rows(conn: &Connection, id: &str) -> Vec<(i64, Row)> {
        let mut stmt = conn
            .prepare(
                "SELECT rowid, seq, type, time, data, source_event_seqs, surface_op, ignorable \
                 FROM events WHERE session_id = ?1 ORDER BY seq",
            )
            .unwrap();
        stmt.query_map([id], |r| {
            Ok((
                r.get(0)?,
                Row {
                    seq: r.get(1)?,
                    kind: r.get(2)?,
                    time: r.get(3)?,
                    data: Col::of(r.get_ref(4)?),
                    sources: Col::of(r.get_ref(5)?),
                    surface_op: Col::of(r.get_ref(6)?),
                    ignorable: Col::of(r.get_ref(7)?),
                },
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    /// Inserts one physical row as is.
    pub fn insert_row(conn: &Connection, id: &str, row: &Row) -> rusqlite::Result<usize> {
        conn.execute(
            "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, \
             surface_op, ignorable) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                row.seq,
                row.kind,
                row.time,
                row.data,
                row.sources,
                row.surface_op,
                row.ignorable
            ],
        )
    }

    /// `appendBatch`: one BEGIN IMMEDIATE transaction that checks the stored
    /// tail, materializes the session row (revision 0) on first append,
    /// inserts this batch's rows and bumps the revision.
    pub fn append_batch(
        conn: &Connection,
        header: &SessionHeader,
        incarnation: &str,
        events: &[Logical],
    ) -> Result<(), String> {
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let result = (|| {
            check_database(conn)?;
            let rows: Vec<Row> = read_rows(conn, &header.id)
                .into_iter()
                .map(|(_, r)| r)
                .collect();
            let scanned = scan_rows(&rows, 0)?;
            if scanned.torn_from.is_some() {
                return Err("invalid physical tail".to_owned());
            }
            let next = scanned.preserved.len() as u64;
            if events[0].seq != next {
                return Err(format!(
                    "session {} append starts at seq {}, stored next seq is {next}",
                    header.id, events[0].seq
                ));
            }
            let exists = conn
                .query_row("SELECT 1 FROM sessions WHERE id = ?1", [&header.id], |_| {
                    Ok(())
                })
                .optional()
                .unwrap()
                .is_some();
            if !exists {
                conn.execute(
                    "INSERT INTO sessions (id, version, created_at, cwd, parent_session, \
                     seed_length, origin, delegation_depth, agent_preset, incarnation, revision) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0)",
                    params![
                        header.id,
                        header.version,
                        header.created_at as i64,
                        header.cwd,
                        header.parent_session,
                        header.seed_length.map(|v| v as i64),
                        header.origin,
                        header.delegation_depth.map(|v| v as i64),
                        header.agent_preset,
                        incarnation
                    ],
                )
                .unwrap();
            }
            for row in encode_batch(events) {
                insert_row(conn, &header.id, &row).map_err(|e| e.to_string())?;
            }
            conn.execute(
                "UPDATE sessions SET revision = revision + 1 WHERE id = ?1",
                [&header.id],
            )
            .unwrap();
            Ok(())
        })();
        conn.execute_batch(if result.is_ok() { "COMMIT" } else { "ROLLBACK" })
            .unwrap();
        result
    }
}

use upstream::{Col, Logical, Row};

// ---------------------------------------------------------------------------
// Glue between turnwal's events and the literal upstream model
// ---------------------------------------------------------------------------

fn logical(e: &Event) -> Logical {
    Logical {
        kind: e.event_type().to_owned(),
        seq: e.seq(),
        time: e.time(),
        data: e.data().get().to_owned(),
        ignorable: e.ignorable(),
        sources: e
            .source_event_seqs()
            .map(|raw| serde_json::from_str(raw.get()).unwrap()),
        surface_op: e.surface_op().map(|raw| raw.get().to_owned()),
    }
}

fn logicals(events: &[Event]) -> Vec<Logical> {
    events.iter().map(logical).collect()
}

fn rows_of(conn: &rusqlite::Connection, id: &str) -> Vec<Row> {
    upstream::read_rows(conn, id)
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

/// A JSON string literal of exactly `len` bytes whose bytes are spread
/// almost evenly over everything valid UTF-8 inside a JSON string can hold
/// (printable ASCII, and the lead and continuation bytes of 2-, 3- and
/// 4-byte sequences), so zstd finds nothing to gain. Deterministic.
fn incompressible_json(len: usize) -> String {
    let mut rng = turnwal::rng::Rng::from_state(0x9e37_79b9_7f4a_7c15);
    let mut next = move || rng.next_u64();
    let mut out = String::from("\"");
    while out.len() < len - 1 {
        let r = next();
        let pick = r % 145;
        let body = r >> 8;
        let c = if pick < 94 {
            char::from((0x20 + body % 95) as u8)
        } else if pick < 124 {
            char::from_u32(0x80 + (body % (0x800 - 0x80)) as u32).unwrap()
        } else if pick < 140 {
            match char::from_u32(0x800 + (body % (0x1_0000 - 0x800)) as u32) {
                Some(c) => c,
                None => continue,
            }
        } else {
            char::from_u32(0x1_0000 + (body % (0x11_0000 - 0x1_0000)) as u32).unwrap()
        };
        if c == '"' || c == '\\' || out.len() + c.len_utf8() > len - 1 {
            continue;
        }
        out.push(c);
    }
    out.push('"');
    assert_eq!(out.len(), len);
    out
}

/// A short description of a row layout: `"seq:type"` for a scalar row,
/// `"seq:tag*members"` for a packed one.
fn layout(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|row| {
            if row.packed() {
                let n = upstream::decode_row(row).map_or(0, |e| e.len());
                format!("{}:{}*{}", row.seq, row.kind, n)
            } else {
                format!("{}:{}", row.seq, row.kind)
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Session logs
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// The literal upstream model checks itself against the reference's examples
// ---------------------------------------------------------------------------

/// Provenance varints, byte for byte: LEB128 first seq, then ZigZag deltas.
#[test]
fn upstream_varints_match_the_reference_encoding() {
    let cases: &[(&[u64], &[u8])] = &[
        (&[], &[]),
        (&[0], &[0x00]),
        (&[5], &[0x05]),
        (&[127], &[0x7f]),
        (&[128], &[0x80, 0x01]),
        (&[300], &[0xac, 0x02]),
        // 5, then -2 (ZigZag 3), then +297 (ZigZag 594 = 0xd2 0x04).
        (&[5, 3, 300], &[0x05, 0x03, 0xd2, 0x04]),
        // Equal values: delta 0.
        (&[7, 7], &[0x07, 0x00]),
        // Descending by one: ZigZag 1 each.
        (&[3, 2, 1, 0], &[0x03, 0x01, 0x01, 0x01]),
        // MAX_SAFE = 2^53 - 1: eight 7-bit groups, the last 0x0f.
        (
            &[upstream::MAX_SAFE],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
        // 0 then MAX_SAFE: ZigZag 2^54 - 2.
        (
            &[0, upstream::MAX_SAFE],
            &[0x00, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f],
        ),
    ];
    for (seqs, bytes) in cases {
        assert_eq!(upstream::encode_varints(seqs), *bytes, "encode {seqs:?}");
        assert_eq!(
            upstream::decode_varints(bytes).unwrap(),
            *seqs,
            "decode {bytes:x?}"
        );
    }
    let bad: &[(&[u8], &str)] = &[
        (&[0x80], "truncated varint"),
        (&[0x05, 0x81], "truncated varint"),
        (&[0x80, 0x00], "non-canonical varint"),
        (&[0x05, 0x83, 0x00], "non-canonical varint"),
        // MAX_SAFE + 1 as the first seq.
        (
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10],
            "varint is out of range",
        ),
        // A ninth continuation group.
        (
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
            "varint is out of range",
        ),
        // 0 then a delta of -1.
        (&[0x00, 0x01], "decoded seq is out of range"),
    ];
    for (bytes, why) in bad {
        assert_eq!(
            upstream::decode_varints(bytes).unwrap_err(),
            format!("malformed source_event_seqs storage value: {why}"),
            "{bytes:x?}"
        );
    }
}

/// Packed rows: key order, `dt` gaps (negative too), run breaks, the
/// whitelist, and the per-batch packing.
#[test]
fn upstream_packing_matches_the_reference_rules() {
    let mut log = Log::starting_at(T0);
    log.turn_start().step_start();
    log.at(100)
        .text(0, "a")
        .at(105)
        .text(0, "b")
        .at(103)
        .text(0, "c");
    log.at(200)
        .reasoning(1, "r1")
        .reasoning(1, "r2")
        .reasoning(1, "r3");
    log.tool_delta(2, "c1", Some("read"), "{")
        .tool_delta(2, "c1", Some("read"), "\"p\"")
        .tool_delta(2, "c1", Some("read"), "}");
    // `name` absent on one member breaks the run: 2 + 2, both scalar.
    log.tool_delta(3, "c2", None, "a")
        .tool_delta(3, "c2", None, "b")
        .tool_delta(3, "c2", Some("x"), "c")
        .tool_delta(3, "c2", Some("x"), "d");
    // A chunk with an extra field is stored verbatim and breaks the run.
    log.text(4, "x").text(4, "y");
    log.raw_chunk(r#"{"type":"text-delta","index":4,"text":"z","extra":1}"#);
    log.text(4, "w");
    let events = logicals(log.all());
    let rows = upstream::encode_batch(&events);
    assert_eq!(
        layout(&rows),
        [
            "0:turn/start",
            "1:step/start",
            "2:text-chunks*3",
            "5:reasoning-chunks*3",
            "8:tool-call-chunks*3",
            "11:assistant/chunk",
            "12:assistant/chunk",
            "13:assistant/chunk",
            "14:assistant/chunk",
            "15:assistant/chunk",
            "16:assistant/chunk",
            "17:assistant/chunk",
            "18:assistant/chunk",
        ]
    );
    assert_eq!(
        rows[2].data,
        Col::text(r#"{"turn":1,"step":1,"index":0,"dt":[5,-2],"texts":["a","b","c"]}"#)
    );
    assert_eq!(
        (rows[2].time, rows[2].ignorable.clone()),
        (100, Col::Int(0))
    );
    assert_eq!(
        rows[4].data,
        Col::text(
            r#"{"turn":1,"step":1,"index":2,"dt":[1,1],"id":"c1","name":"read","args":["{","\"p\"","}"]}"#
        )
    );
    // Every row decodes back to exactly the events packed into it.
    let scanned = upstream::scan_rows(&rows, 0).unwrap();
    assert_eq!(scanned.preserved, events);
    assert_eq!(scanned.torn_from, None);
}

/// The literal schema builds the three STRICT tables and passes its own
/// check; the builder writes identity and rows that read back.
#[test]
fn upstream_builder_writes_a_database_its_checks_accept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("up.db");
    let conn = upstream::open(&path, "0b7c5a3e-2f1d-4c8e-9a6b-5d4e3f2a1b0c");
    assert_eq!(upstream::check_database(&conn), Ok(()));
    let names: Vec<String> = upstream::reference_schema()
        .into_iter()
        .map(|o| format!("{} {}", o.0, o.1))
        .collect();
    assert_eq!(
        names,
        ["table events", "table persistence_state", "table sessions"]
    );
    let header = SessionHeader::new("s", 5);
    let mut log = Log::starting_at(T0);
    log.chunk_turn(4);
    upstream::append_batch(&conn, &header, "inc-1", &logicals(&log.batch())).unwrap();
    let rows = rows_of(&conn, "s");
    assert_eq!(
        layout(&rows),
        [
            "0:turn/start",
            "1:step/start",
            "2:text-chunks*4",
            "6:step/end",
            "7:turn/end"
        ]
    );
    assert_eq!(
        upstream::append_batch(&conn, &header, "inc-1", &logicals(&log.events[..1])),
        Err("session s append starts at seq 0, stored next seq is 8".into())
    );
}

/// The incompressible payload used by the compression cases really is:
/// zstd level 3 does not make it smaller, so upstream keeps it TEXT.
#[test]
fn upstream_keeps_incompressible_data_as_text() {
    for len in [4096, 4097, 5000, 20_000] {
        let data = incompressible_json(len);
        serde_json::from_str::<String>(&data).unwrap();
        let frame = zstd::bulk::compress(data.as_bytes(), upstream::ZSTD_LEVEL).unwrap();
        assert!(frame.len() >= len, "{len}: zstd gave {} bytes", frame.len());
        assert_eq!(upstream::encode_data(&data), Col::text(&data));
    }
    let compressible = format!("\"{}\"", "ab".repeat(2047));
    assert_eq!(compressible.len(), 4096);
    let Col::Blob(frame) = upstream::encode_data(&compressible) else {
        panic!("4096 compressible bytes must become a BLOB");
    };
    assert_eq!(
        upstream::decode_data(&Col::Blob(frame), None).unwrap(),
        compressible
    );
    let below = format!("\"{}\"", "ab".repeat(2046));
    assert_eq!(below.len(), 4094);
    assert_eq!(upstream::encode_data(&below), Col::text(&below));
}

// ---------------------------------------------------------------------------
// turnwal's SQLite backend
// ---------------------------------------------------------------------------

const STORE_ID: &str = "3f0e7a52-9c1b-4d8e-a6f4-1b2c3d4e5f60";
const INCARNATION: &str = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d";

fn backend(path: &Path) -> SqliteBackend {
    SqliteBackend::open(path, SqliteOptions::default()).unwrap()
}

fn store_over(backend: SqliteBackend) -> Store {
    Store::with_backend(Arc::new(backend), StoreOptions::default())
}

fn open_store(path: &Path) -> Store {
    store_over(backend(path))
}

fn raw(path: &Path) -> Connection {
    open_0600(path).unwrap()
}

use support::jsons;

/// Every physical row of a session with its rowid: two snapshots are equal
/// only if no row was inserted, changed or removed.
fn snapshot(path: &Path, id: &str) -> Vec<(i64, Row)> {
    upstream::read_rows(&raw(path), id)
}

/// The `sessions` row: `(version, created_at, cwd, parent_session,
/// seed_length, origin, delegation_depth, agent_preset, incarnation,
/// revision)`.
type SessionRow = (
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<String>,
    String,
    i64,
);

fn session_row(path: &Path, id: &str) -> SessionRow {
    raw(path)
        .query_row(
            "SELECT version, created_at, cwd, parent_session, seed_length, origin, \
             delegation_depth, agent_preset, incarnation, revision FROM sessions WHERE id = ?1",
            [id],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                ))
            },
        )
        .unwrap()
}

fn revision_column(path: &Path, id: &str) -> i64 {
    session_row(path, id).9
}

/// Rows equal, a zstd BLOB compared by what it decompresses to (the frame
/// bytes depend on the zstd build; the rule is only "level 3 when smaller").
fn assert_rows_eq(got: &[Row], want: &[Row]) {
    assert_eq!(layout(got), layout(want));
    for (g, w) in got.iter().zip(want) {
        match (&g.data, &w.data) {
            (Col::Blob(gb), Col::Blob(_)) => {
                assert_eq!(
                    &gb[..4],
                    &[0x28, 0xb5, 0x2f, 0xfd],
                    "seq {}: zstd magic",
                    g.seq
                );
                assert_eq!(
                    upstream::decode_data(&g.data, None),
                    upstream::decode_data(&w.data, None),
                    "seq {}",
                    g.seq
                );
                let text = upstream::decode_data(&g.data, None).unwrap();
                assert!(
                    gb.len() < text.len(),
                    "seq {}: a BLOB must be smaller",
                    g.seq
                );
                assert_eq!(
                    Row {
                        data: Col::Null,
                        ..g.clone()
                    },
                    Row {
                        data: Col::Null,
                        ..w.clone()
                    }
                );
            }
            _ => assert_eq!(g, w, "row at seq {}", g.seq),
        }
    }
}

/// The rows upstream writes for `log` appended in batches starting at the
/// seqs in `cuts` (0 implied).
fn upstream_rows(events: &[Event], cuts: &[usize]) -> Vec<Row> {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(events.len());
    bounds
        .windows(2)
        .flat_map(|w| upstream::encode_batch(&logicals(&events[w[0]..w[1]])))
        .collect()
}

fn append_in_batches(store: &Store, id: &str, events: &[Event], cuts: &[usize]) {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(events.len());
    for w in bounds.windows(2) {
        store.append(id, &events[w[0]..w[1]]).unwrap();
    }
}

/// Inspect, and `read_from` at every seq from 0 to length + 1, give exactly
/// `events`, through a store that holds nothing open.
fn assert_reads(path: &Path, id: &str, events: &[Event]) {
    let store = open_store(path);
    let view = store.inspect(id).unwrap();
    assert_eq!(jsons(&view.events), jsons(events), "inspect {id}");
    assert_eq!(view.stored, events.len() as u64);
    assert_eq!((view.state, view.cut), (LogState::Clean, None));
    for from in 0..=events.len() + 1 {
        let got = store.read_from(id, from as u64).unwrap();
        let want = &events[from.min(events.len())..];
        assert_eq!(jsons(&got), jsons(want), "read_from({id}, {from})");
    }
}

/// A rich balanced log: every packed kind (text ×5 split by a batch cut,
/// reasoning ×4 with decreasing times, named tool-call ×4, unnamed ×3), a
/// block-start, a short run, an ignorable delta, a finish, surface events
/// with provenance (jumbled, and `[]`), ignorable events named like the
/// packed tags, compressible and incompressible data above 4096 bytes.
/// Returns the log and its batch cuts.
fn rich_log() -> (Vec<Event>, Vec<usize>) {
    let mut log = Log::starting_at(T0);
    log.turn_start()
        .user("u1", "read a.txt and b.txt")
        .step_start();
    let system = "You are a careful agent. Read before you write. ".repeat(100);
    log.push(
        "request/header",
        &format!(
            r#"{{"header":{{"config":{{"provider":"mock","model":"mock"}},"system":{}}},"reason":"initial"}}"#,
            q(&system)
        ),
    );
    // 4..=8: text ×5; the batch cut at 6 leaves 4,5 scalar and packs 6..=8.
    for t in ["Let", " me", " read", " the", " files."] {
        log.text(0, t);
    }
    // 9..=12: reasoning ×4, times going back.
    let base = log.time;
    for (k, t) in ["r1", "r2", "r3", "r4"].iter().enumerate() {
        log.at(base + 50 - 10 * k as i64).reasoning(1, t);
    }
    // 13..=16: named tool-call ×4; 17..=19: unnamed ×3.
    for a in ["{\"pa", "th\":", "\"a.t", "xt\"}"] {
        log.tool_delta(2, "c1", Some("read_file"), a);
    }
    for a in ["{\"path\":", "\"b.txt\"", "}"] {
        log.tool_delta(3, "c2", None, a);
    }
    log.raw_chunk(r#"{"type":"block-start","index":4,"blockType":"text"}"#);
    log.text(4, "x").text(4, "y");
    let ignorable_delta = format!(
        r#"{{"turn":{},"step":{},"chunk":{{"type":"text-delta","index":4,"text":"z"}}}}"#,
        log.turn, log.step
    );
    log.ignorable("assistant/chunk", &ignorable_delta);
    log.raw_chunk(r#"{"type":"finish","reason":"tool-calls"}"#);
    log.assistant_with_sources(
        "Let me read the files.",
        &[
            ("c1", "read_file", r#"{"path":"a.txt"}"#),
            ("c2", "read_file", r#"{"path":"b.txt"}"#),
        ],
        Some(&[24, 4, 13, 17, 9, 10]),
    );
    let call = log.tool_call("c1", "read_file", r#"{"path":"a.txt"}"#);
    log.tool_result("c1", "hello", call);
    let call = log.tool_call("c2", "read_file", r#"{"path":"b.txt"}"#);
    log.tool_result("c2", "world", call);
    log.step_end();
    log.ignorable(
        "text-chunks",
        r#"{"seq0":0,"note":"a plugin event named like a packed tag"}"#,
    )
    .ignorable(
        "reasoning-chunks",
        r#"{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}"#,
    )
    .ignorable("tool-call-chunks", "[]");
    log.step_start();
    log.assistant_with_sources("Both files read.", &[], Some(&[]));
    log.step_end().turn_end();
    let cut2 = log.events.len();
    // Turn 2: a prompt too random for zstd stays TEXT above 4096 bytes.
    let noise: String = serde_json::from_str(&incompressible_json(6000)).unwrap();
    log.turn_start().user("u2", &noise).step_start();
    log.assistant_with_sources("ok", &[], Some(&[]));
    log.step_end().turn_end();
    (log.events, vec![6, 20, cut2])
}

fn full_header(id: &str) -> SessionHeader {
    SessionHeader {
        version: 0,
        id: id.to_owned(),
        created_at: 1_700_000_000_000,
        cwd: Some("/work/app".into()),
        parent_session: Some("root-session".into()),
        seed_length: Some(4),
        origin: Some("subagent".into()),
        delegation_depth: Some(2),
        agent_preset: Some("coder".into()),
    }
}

/// `rich_log` holds what it claims: compressible data above the threshold,
/// incompressible data above it, and every packed kind, as upstream encodes
/// it.
fn check_rich_log_shape(rows: &[Row]) {
    assert_eq!(
        layout(rows),
        [
            "0:turn/start",
            "1:user/message",
            "2:step/start",
            "3:request/header",
            "4:assistant/chunk",
            "5:assistant/chunk",
            "6:text-chunks*3",
            "9:reasoning-chunks*4",
            "13:tool-call-chunks*4",
            "17:tool-call-chunks*3",
            "20:assistant/chunk",
            "21:assistant/chunk",
            "22:assistant/chunk",
            "23:assistant/chunk",
            "24:assistant/chunk",
            "25:assistant/message",
            "26:tool/call",
            "27:tool/result",
            "28:tool/call",
            "29:tool/result",
            "30:step/end",
            "31:text-chunks",
            "32:reasoning-chunks",
            "33:tool-call-chunks",
            "34:step/start",
            "35:assistant/message",
            "36:step/end",
            "37:turn/end",
            "38:turn/start",
            "39:user/message",
            "40:step/start",
            "41:assistant/message",
            "42:step/end",
            "43:turn/end",
        ]
    );
    assert!(
        matches!(rows[3].data, Col::Blob(_)),
        "request/header is compressed"
    );
    assert!(
        matches!(&rows[29].data, Col::Text(t) if t.len() > 6000),
        "the noisy prompt stays TEXT"
    );
    assert_eq!(
        rows[7].data,
        Col::text(
            r#"{"turn":1,"step":1,"index":1,"dt":[-10,-10,-10],"texts":["r1","r2","r3","r4"]}"#
        )
    );
    assert_eq!(rows[7].time, rows[6].time + 53);
    assert_eq!(rows[13].ignorable, Col::Int(1));
    // 24, then -20, +9, +4, -8, +1 as ZigZag varints.
    assert_eq!(rows[15].sources, Col::Blob(vec![24, 39, 18, 8, 15, 2]));
    assert_eq!(rows[15].surface_op, Col::text("\"append\""));
    assert_eq!(rows[25].sources, Col::Blob(Vec::new()));
    for row in &rows[21..24] {
        assert_eq!(row.ignorable, Col::Int(1));
    }
}

/// A listing row: `(id, header, events, turns, bytes, last_activity, state,
/// problem)`.
type Summary = (
    String,
    Option<SessionHeader>,
    u64,
    u64,
    u64,
    Option<i64>,
    LogState,
    Option<String>,
);

fn summary(s: &turnwal::SessionSummary) -> Summary {
    (
        s.id.clone(),
        s.header.clone(),
        s.events,
        s.turns,
        s.bytes,
        s.last_activity,
        s.state,
        s.problem.clone(),
    )
}

/// A crashed upstream session: turn 1 complete, turn 2 open with a recorded
/// `tool/call` and no result.
fn crashed_log() -> Log {
    let mut log = Log::starting_at(T0);
    log.prompt_turn("hi", "hello");
    log.turn_start().user("u2", "run ls").step_start();
    log.assistant_with_sources("Running it.", &[("c9", "bash", r#"{"cmd":"ls"}"#)], None);
    log.tool_call("c9", "bash", r#"{"cmd":"ls"}"#);
    log
}

/// The closers of `crashed_log`, from the reference (§5): the tool result
/// of an unknown outcome citing the call, `step/end`, `turn/end
/// {interrupted}`, all at the last event's time.
fn crashed_log_closers(log: &Log) -> Vec<Logical> {
    let time = log.events.last().unwrap().time();
    let text = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    let closer = |kind: &str, seq: u64, data: String| Logical {
        kind: kind.into(),
        seq,
        time,
        data,
        ignorable: false,
        sources: None,
        surface_op: None,
    };
    vec![
        Logical {
            sources: Some(vec![10]),
            surface_op: Some("\"append\"".into()),
            ..closer(
                "tool/result",
                11,
                format!(
                    r#"{{"turn":2,"step":1,"message":{{"id":"interrupted-tool-result-c9-11","role":"user","source":{{"kind":"tool","callId":"c9"}},"content":[{{"type":"tool-result","toolCallId":"c9","isError":true,"content":[{{"type":"text","text":{}}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}}"#,
                    q(text)
                ),
            )
        },
        closer("step/end", 12, r#"{"turn":2,"step":1}"#.into()),
        closer(
            "turn/end",
            13,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#.into(),
        ),
    ]
}

/// Compatibility, upstream → turnwal: a database built the way the upstream
/// harness builds it (literal schema, identity, row encoding, per-batch
/// packing) lists, inspects, reads from every seq, repairs and appends, and
/// stays a database upstream accepts, with only inserted rows.
#[test]
fn turnwal_reads_a_database_built_the_upstream_way() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.sqlite");
    let conn = upstream::open(&path, STORE_ID);
    let (events, cuts) = rich_log();
    let header_a = full_header("upstream-a");
    let mut bounds = vec![0];
    bounds.extend_from_slice(&cuts);
    bounds.push(events.len());
    for w in bounds.windows(2) {
        upstream::append_batch(
            &conn,
            &header_a,
            INCARNATION,
            &logicals(&events[w[0]..w[1]]),
        )
        .unwrap();
    }
    let crashed = crashed_log();
    let header_b = SessionHeader::new("upstream-b", 1_700_000_000_500).with_cwd("/work/other");
    upstream::append_batch(&conn, &header_b, INCARNATION, &logicals(crashed.all())).unwrap();
    drop(conn);
    let rows_a = snapshot(&path, "upstream-a");
    let plain_rows_a: Vec<Row> = rows_a.iter().map(|(_, r)| r.clone()).collect();
    check_rich_log_shape(&plain_rows_a);
    let rows_b = snapshot(&path, "upstream-b");

    // list: the headers from the sessions table, exactly (delegation_depth
    // NULL reads as absent), with what the rows hold; `bytes` is the stored
    // size of the data column.
    let store = open_store(&path);
    let stored_bytes = |rows: &[(i64, Row)]| -> u64 {
        rows.iter()
            .map(|(_, r)| match &r.data {
                Col::Text(b) | Col::Blob(b) => b.len() as u64,
                other => panic!("{other:?}"),
            })
            .sum()
    };
    let list: Vec<Summary> = store.list().unwrap().iter().map(summary).collect();
    assert_eq!(
        list,
        [
            (
                "upstream-a".to_owned(),
                Some(header_a.clone()),
                44,
                2,
                stored_bytes(&rows_a),
                Some(events[43].time()),
                LogState::Clean,
                None,
            ),
            (
                "upstream-b".to_owned(),
                Some(header_b.clone()),
                11,
                2,
                stored_bytes(&rows_b),
                Some(crashed.events[10].time()),
                LogState::OpenTurn,
                None,
            ),
        ]
    );

    // Balanced session: inspect and every read_from are the logical events.
    assert_reads(&path, "upstream-a", &events);

    // Crashed session: inspect adds the closers in memory only.
    let view = store.inspect("upstream-b").unwrap();
    assert_eq!(view.state, LogState::OpenTurn);
    assert_eq!(view.stored, crashed.events.len() as u64);
    assert_eq!(jsons(&view.events[..11]), jsons(crashed.all()));
    assert_eq!(logicals(&view.events[11..]), crashed_log_closers(&crashed));
    assert_eq!(snapshot(&path, "upstream-a"), rows_a, "reads write nothing");
    assert_eq!(
        snapshot(&path, "upstream-b"),
        rows_b,
        "inspect writes nothing"
    );
    assert_eq!(revision_column(&path, "upstream-a"), 4);
    assert_eq!(revision_column(&path, "upstream-b"), 1);

    // load commits the closers as scalar rows after the untouched ones,
    // bumping the revision once. (`surface_op` compared as JSON values here;
    // `repair_writes_closer_rows_as_upstream_does` compares its bytes.)
    let loaded = store.load("upstream-b").unwrap();
    assert_eq!(loaded.events.len(), 14);
    let after = snapshot(&path, "upstream-b");
    assert_eq!(after[..rows_b.len()], rows_b[..]);
    let closer_rows: Vec<Row> = after[rows_b.len()..]
        .iter()
        .map(|(_, r)| surface_op_as_value(r))
        .collect();
    assert_rows_eq(
        &closer_rows,
        &crashed_log_closers(&crashed)
            .iter()
            .map(|c| upstream::bind(&upstream::Record::Scalar(c.clone())))
            .collect::<Vec<_>>(),
    );
    assert_eq!(revision_column(&path, "upstream-b"), 2);

    // An append through turnwal inserts upstream's rows for that batch and
    // changes nothing before them.
    let mut more = Log::starting_at(T0);
    more.events = events.clone();
    more.taken = events.len();
    more.turn = 2;
    more.turn_start().user("u3", "again").step_start();
    for t in ["a", "b", "c", "d"] {
        more.text(0, t);
    }
    more.assistant_with_sources("abcd", &[], Some(&[47, 46, 45, 44]));
    more.step_end().turn_end();
    let batch = more.batch();
    store.append("upstream-a", &batch).unwrap();
    let after = snapshot(&path, "upstream-a");
    assert_eq!(after[..rows_a.len()], rows_a[..]);
    let new_rows: Vec<Row> = after[rows_a.len()..]
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    assert_rows_eq(&new_rows, &upstream::encode_batch(&logicals(&batch)));
    assert_eq!(revision_column(&path, "upstream-a"), 5);
    drop(store);

    // Upstream still accepts the file and decodes every session.
    let conn = raw(&path);
    assert_eq!(upstream::check_database(&conn), Ok(()));
    let scanned = upstream::scan_rows(&rows_of(&conn, "upstream-a"), 0).unwrap();
    assert_eq!(
        (scanned.preserved, scanned.torn_from),
        (logicals(more.all()), None)
    );
    let scanned = upstream::scan_rows(&rows_of(&conn, "upstream-b"), 0).unwrap();
    let mut want = logicals(crashed.all());
    want.extend(crashed_log_closers(&crashed));
    assert_eq!((scanned.preserved, scanned.torn_from), (want, None));
    let (store_id, count): (String, i64) = conn
        .query_row(
            "SELECT max(store_id), count(*) FROM persistence_state",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (store_id.as_str(), count),
        (STORE_ID, 1),
        "the store id is kept"
    );
    drop(conn);
    assert_reads(&path, "upstream-a", more.all());
}

/// The row with `surface_op` rewritten as `JSON.stringify(JSON.parse(..))`.
fn surface_op_as_value(row: &Row) -> Row {
    let surface_op = match &row.surface_op {
        Col::Text(t) => {
            let value: serde_json::Value = serde_json::from_slice(t).unwrap();
            Col::text(&value.to_string())
        }
        other => other.clone(),
    };
    Row {
        surface_op,
        ..row.clone()
    }
}

/// The closers a repair inserts are the rows upstream's `commitRepair`
/// writes for them, byte for byte: scalar rows, `surface_op` exactly
/// `JSON.stringify("append")`, provenance as a varint BLOB.
#[test]
fn repair_writes_closer_rows_as_upstream_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("closers.sqlite");
    let conn = upstream::open(&path, STORE_ID);
    let crashed = crashed_log();
    let header = SessionHeader::new("crashed", 1);
    upstream::append_batch(&conn, &header, INCARNATION, &logicals(crashed.all())).unwrap();
    drop(conn);
    let before = snapshot(&path, "crashed");
    open_store(&path).load("crashed").unwrap();
    let after = snapshot(&path, "crashed");
    assert_eq!(after[..before.len()], before[..]);
    let closer_rows: Vec<Row> = after[before.len()..]
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    let want: Vec<Row> = crashed_log_closers(&crashed)
        .iter()
        .map(|c| upstream::bind(&upstream::Record::Scalar(c.clone())))
        .collect();
    assert_eq!(want[0].surface_op, Col::text("\"append\""));
    assert_eq!(want[0].sources, Col::Blob(vec![10]));
    assert_rows_eq(&closer_rows, &want);
}

/// Compatibility, turnwal → upstream: a database turnwal creates passes
/// upstream's open-time checks (identity, the exact schema objects, STRICT
/// tables, a UUID store id), holds the session rows and the physical rows
/// upstream would have written for the same batches, and upstream can go on
/// appending to it.
#[test]
fn database_written_by_turnwal_passes_upstream_checks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("turnwal.sqlite");
    let (events, cuts) = rich_log();
    let store = open_store(&path);
    store.create(full_header("full")).unwrap();
    append_in_batches(&store, "full", &events, &cuts);
    let plain = SessionHeader::new("plain", 7);
    store.create(plain.clone()).unwrap();
    let mut small = Log::starting_at(T0);
    small.prompt_turn("hi", "hello");
    store.append("plain", small.all()).unwrap();
    store
        .create(SessionHeader::new("never-appended", 9))
        .unwrap();
    drop(store);

    // Upstream's POSIX checks of the file: a regular file (not a symlink),
    // owned by this user, no group or world bits.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.mode() & 0o077, 0, "mode {:o}", meta.mode());
        assert_eq!(meta.uid(), std::fs::metadata(dir.path()).unwrap().uid());
    }
    let conn = raw(&path);
    assert_eq!(upstream::check_database(&conn), Ok(()));
    assert_eq!(
        upstream::schema_objects(&conn),
        upstream::reference_schema(),
        "whitespace-normalized sqlite_schema rows"
    );
    assert_eq!(upstream::pragma_i64(&conn, "application_id"), 1_146_308_688);
    assert_eq!(upstream::pragma_i64(&conn, "user_version"), 17);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM sessions ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(ids, ["full", "plain"], "lazy materialization");

    let full = session_row(&path, "full");
    assert!(upstream::is_uuid(&full.8), "incarnation {:?}", full.8);
    assert_eq!(
        full,
        (
            0,
            1_700_000_000_000,
            Some("/work/app".into()),
            Some("root-session".into()),
            Some(4),
            Some("subagent".into()),
            Some(2),
            Some("coder".into()),
            full.8.clone(),
            4,
        ),
        "one revision per append batch"
    );
    let plain_row = session_row(&path, "plain");
    assert_eq!(
        plain_row,
        (
            0,
            7,
            None,
            None,
            None,
            None,
            None,
            None,
            plain_row.8.clone(),
            1
        )
    );
    assert_ne!(full.8, plain_row.8, "each session its own incarnation");

    let rows = rows_of(&conn, "full");
    check_rich_log_shape(&rows);
    assert_rows_eq(&rows, &upstream_rows(&events, &cuts));
    let scanned = upstream::scan_rows(&rows, 0).unwrap();
    assert_eq!(
        (scanned.preserved, scanned.torn_from),
        (logicals(&events), None)
    );
    assert_rows_eq(&rows_of(&conn, "plain"), &upstream_rows(small.all(), &[]));

    // The upstream harness appends a turn to turnwal's session; turnwal
    // reads the whole log back.
    let mut more = Log::starting_at(T0);
    more.events = small.events.clone();
    more.taken = small.events.len();
    more.turn = 1;
    more.prompt_turn("again", "sure");
    let batch = more.batch();
    upstream::append_batch(&conn, &plain, INCARNATION, &logicals(&batch)).unwrap();
    assert_eq!(revision_column(&path, "plain"), 2);
    drop(conn);
    assert_reads(&path, "plain", more.all());
    assert_reads(&path, "full", &events);
}

/// Upstream's `chunkLog(100)` appended as `[0..3)`, `[3..4)`, `[4..)`: 7
/// physical rows, one packed (runs pack per batch), every earlier row
/// (rowid and content) unchanged by each later append, and exact reads from
/// every seq, 0, 2, 25, 101, 104 and 105 among them.
#[test]
fn packing_across_batch_partitions_keeps_earlier_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut log = Log::starting_at(T0);
    log.chunk_turn(100);
    let events = log.all();
    assert_eq!(events.len(), 104);
    let store = open_store(&path);
    store.create(SessionHeader::new("s", 1)).unwrap();
    let mut seen: Vec<(i64, Row)> = Vec::new();
    for w in [0, 3, 4, 104].windows(2) {
        store.append("s", &events[w[0]..w[1]]).unwrap();
        let now = snapshot(&path, "s");
        assert_eq!(
            now[..seen.len()],
            seen[..],
            "append of [{}..{})",
            w[0],
            w[1]
        );
        seen = now;
    }
    let rows: Vec<Row> = seen.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(
        layout(&rows),
        [
            "0:turn/start",
            "1:step/start",
            "2:assistant/chunk",
            "3:assistant/chunk",
            "4:text-chunks*98",
            "102:step/end",
            "103:turn/end",
        ]
    );
    assert_rows_eq(&rows, &upstream_rows(events, &[3, 4]));
    // Through the live writer, then through a fresh store (the seek path).
    let view = store.inspect("s").unwrap();
    assert_eq!(jsons(&view.events), jsons(events));
    for from in [0usize, 2, 25, 101, 104, 105] {
        let got = store.read_from("s", from as u64).unwrap();
        assert_eq!(
            jsons(&got),
            jsons(&events[from.min(104)..]),
            "live read_from({from})"
        );
    }
    drop(store);
    assert_reads(&path, "s", events);
}

/// Upstream's paced stream: 1,004 events in batches of 40 become 31 rows,
/// every append only inserts, the largest row is at most 1 MiB, and reading
/// while idle does not grow the WAL.
#[test]
fn paced_stream_only_inserts_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("paced.db");
    let mut log = Log::starting_at(T0);
    log.chunk_turn(1000);
    let events = log.all();
    assert_eq!(events.len(), 1004);
    let store = open_store(&path);
    store.create(SessionHeader::new("paced", 1)).unwrap();
    let mut seen: Vec<(i64, Row)> = Vec::new();
    let cuts: Vec<usize> = (40..1004).step_by(40).collect();
    let mut bounds = vec![0];
    bounds.extend_from_slice(&cuts);
    bounds.push(1004);
    for w in bounds.windows(2) {
        store.append("paced", &events[w[0]..w[1]]).unwrap();
        let now = snapshot(&path, "paced");
        assert_eq!(
            now[..seen.len()],
            seen[..],
            "append of [{}..{})",
            w[0],
            w[1]
        );
        seen = now;
    }
    let rows: Vec<Row> = seen.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(rows.len(), 31);
    assert_eq!(rows.iter().filter(|r| r.packed()).count(), 25);
    assert_rows_eq(&rows, &upstream_rows(events, &cuts));
    let largest = rows
        .iter()
        .map(|r| upstream::decode_data(&r.data, None).unwrap().len())
        .max()
        .unwrap();
    assert!(largest <= upstream::MAX_PACKED_DATA_BYTES, "{largest}");
    let wal = dir.path().join("paced.db-wal");
    let idle = std::fs::metadata(&wal).unwrap().len();
    assert_reads(&path, "paced", events);
    store.list().unwrap();
    assert_eq!(
        std::fs::metadata(&wal).unwrap().len(),
        idle,
        "reads grow the WAL"
    );
    assert_eq!(snapshot(&path, "paced"), seen);
}

/// `read_from` seeks: a seq inside a packed row is served from that row
/// (also when an overlapping scalar row sits between the packed row and the
/// seq), and a malformed packed predecessor makes the read fail closed to
/// `[]`, as upstream's does.
#[test]
fn read_from_seeks_through_packed_predecessor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seek.db");
    let conn = upstream::open(&path, STORE_ID);
    // Packed row at 2 covering 2..=6, then a scalar row at 4 that overlaps
    // it, then nothing closes the turn.
    let mut log = Log::starting_at(T0);
    log.turn_start().step_start();
    for t in ["a", "b", "c", "d", "e"] {
        log.text(0, t);
    }
    let header = SessionHeader::new("overlap", 1);
    upstream::append_batch(&conn, &header, INCARNATION, &logicals(log.all())).unwrap();
    let overlap = upstream::bind(&upstream::Record::Scalar(logical(&log.events[4])));
    assert_eq!(overlap.seq, 4);
    upstream::insert_row(&conn, "overlap", &overlap).unwrap();
    drop(conn);
    let store = open_store(&path);
    for from in 2..=7usize {
        let got = store.read_from("overlap", from as u64).unwrap();
        assert_eq!(jsons(&got), jsons(&log.events[from..]), "read_from({from})");
    }
    drop(store);

    // A malformed packed row at 2 (not JSON), a valid scalar chunk at 5.
    let path = dir.path().join("malformed.db");
    let conn = upstream::open(&path, STORE_ID);
    let mut log = Log::starting_at(T0);
    log.turn_start().step_start();
    let header = SessionHeader::new("bad", 1);
    upstream::append_batch(&conn, &header, INCARNATION, &logicals(log.all())).unwrap();
    let bad = Row {
        seq: 2,
        kind: "text-chunks".into(),
        time: 5,
        data: Col::text("{not valid json"),
        sources: Col::Null,
        surface_op: Col::Null,
        ignorable: Col::Int(0),
    };
    upstream::insert_row(&conn, "bad", &bad).unwrap();
    for t in ["a", "b", "c"] {
        log.text(0, t);
    }
    log.text(0, "d");
    let tail = upstream::bind(&upstream::Record::Scalar(logical(&log.events[5])));
    upstream::insert_row(&conn, "bad", &tail).unwrap();
    drop(conn);
    let store = open_store(&path);
    for from in [2u64, 3, 5, 6] {
        assert_eq!(
            jsons(&store.read_from("bad", from).unwrap()),
            Vec::<String>::new(),
            "read_from({from})"
        );
    }
    assert_eq!(
        jsons(&store.read_from("bad", 0).unwrap()),
        jsons(&log.events[..2])
    );
}

/// Holds `BEGIN IMMEDIATE` on a second connection of `path` for `hold`,
/// from a thread; returns once the lock is held.
fn hold_write_lock(path: &Path, hold: Duration) -> thread::JoinHandle<()> {
    let path = path.to_owned();
    let (held, is_held) = mpsc::channel();
    let holder = thread::spawn(move || {
        let conn = open_0600(&path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        held.send(()).unwrap();
        thread::sleep(hold);
        conn.execute_batch("COMMIT").unwrap();
    });
    is_held.recv().unwrap();
    holder
}

/// A session "s" holding one complete turn (seqs 0..=5), and the log to
/// continue it.
fn one_turn_session(path: &Path, store: &Store) -> Log {
    let mut log = Log::starting_at(T0);
    log.prompt_turn("hi", "hello");
    store.create(SessionHeader::new("s", 1)).unwrap();
    store.append("s", &log.batch()).unwrap();
    assert!(path.exists());
    log
}

/// Busy wait: another connection holds `BEGIN IMMEDIATE` for 200 ms; the
/// append waits for it (default busy_timeout 5 s) and succeeds.
#[test]
fn append_waits_for_a_writer_holding_begin_immediate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let store = open_store(&path);
    let mut log = one_turn_session(&path, &store);
    log.prompt_turn("again", "sure");
    let batch = log.batch();
    let holder = hold_write_lock(&path, Duration::from_millis(200));
    let started = Instant::now();
    let receipt = store.append("s", &batch).unwrap();
    let waited = started.elapsed();
    holder.join().unwrap();
    assert_eq!(receipt.next_seq, 12);
    assert!(
        waited >= Duration::from_millis(150),
        "did not wait: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "waited past the lock: {waited:?}"
    );
    drop(store);
    assert_reads(&path, "s", log.all());
}

/// With a tiny busy_timeout the same wait fails with an error that says the
/// database is busy, nothing of the batch is stored, and the batch can be
/// retried at the same seq once the lock is gone.
#[test]
fn append_fails_clearly_when_busy_timeout_expires() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(20),
        ..SqliteOptions::default()
    };
    let store = store_over(SqliteBackend::open(&path, options).unwrap());
    let mut log = one_turn_session(&path, &store);
    log.prompt_turn("again", "sure");
    let batch = log.batch();
    let before = snapshot(&path, "s");
    let holder = hold_write_lock(&path, Duration::from_millis(1500));
    let started = Instant::now();
    let err = store.append("s", &batch).unwrap_err();
    let failed_after = started.elapsed();
    assert!(
        failed_after < Duration::from_millis(1000),
        "{failed_after:?}"
    );
    let text = err.to_string();
    assert!(
        matches!(
            &err,
            Error::Io {
                op: "begin immediate",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        text,
        format!("begin immediate {}: database is locked", path.display())
    );
    holder.join().unwrap();
    assert_eq!(snapshot(&path, "s"), before, "nothing of the failed batch");
    assert_eq!(store.append("s", &batch).unwrap().next_seq, 12);
    drop(store);
    assert_reads(&path, "s", log.all());
}

// -- refused databases ------------------------------------------------------

/// A file holding `schema` (not through turnwal), stamped with `app` and
/// `version`, with a session row, in rollback-journal mode so that the
/// database is this one file.
fn crafted_database(path: &Path, schema: &str, app: i64, version: i64) {
    let conn = open_0600(path).unwrap();
    conn.execute_batch(schema).unwrap();
    if schema.contains("persistence_state") {
        conn.execute(
            "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?1)",
            [STORE_ID],
        )
        .unwrap();
    }
    conn.pragma_update(None, "application_id", app).unwrap();
    conn.pragma_update(None, "user_version", version).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "delete", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
}

/// Opening (or, if opening is lazy, first using) `path` is refused, and the
/// file is byte for byte what it was, with no journal left beside it.
/// Returns the error text.
fn assert_refused(path: &Path) -> String {
    let before = std::fs::read(path).unwrap();
    let err = match SqliteBackend::open(path, SqliteOptions::default()) {
        Err(e) => e,
        Ok(b) => b.list().expect_err("a refused database must not list"),
    };
    assert_eq!(std::fs::read(path).unwrap(), before, "the file changed");
    let name = path.file_name().unwrap().to_str().unwrap();
    for suffix in ["-wal", "-journal", "-shm"] {
        let side = path.with_file_name(format!("{name}{suffix}"));
        assert!(!side.exists(), "{} left behind", side.display());
    }
    err.to_string()
}

#[test]
fn refuses_user_version_16() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v16.db");
    crafted_database(&path, upstream::SCHEMA_SQL, upstream::APPLICATION_ID, 16);
    assert_eq!(
        assert_refused(&path),
        format!(
            "{}: session database has schema version 16, incompatible with this build (17); \
             there is no migration",
            path.display()
        )
    );
}

#[test]
fn refuses_foreign_application_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.db");
    crafted_database(&path, upstream::SCHEMA_SQL, 0x1234_5678, 17);
    assert_eq!(
        assert_refused(&path),
        format!(
            "{}: session database has application id 305419896, expected 1146308688 \
             (0x44534850, \"DSHP\")",
            path.display()
        )
    );
}

#[test]
fn refuses_changed_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("column.db");
    let schema = upstream::SCHEMA_SQL.replace(
        "  agent_preset TEXT,\n",
        "  agent_preset TEXT,\n  color TEXT,\n",
    );
    assert_ne!(schema, upstream::SCHEMA_SQL);
    crafted_database(&path, &schema, upstream::APPLICATION_ID, 17);
    let sessions = |extra: &str| {
        format!(
            "table sessions: CREATE TABLE sessions ( id TEXT PRIMARY KEY, version INTEGER NOT \
             NULL, created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length \
             INTEGER, origin TEXT, delegation_depth INTEGER, agent_preset TEXT,{extra} \
             incarnation TEXT NOT NULL, revision INTEGER NOT NULL ) STRICT"
        )
    };
    assert_eq!(
        assert_refused(&path),
        format!(
            "{}: session database does not contain the required schema objects (unexpected: \
             [{}]; missing: [{}])",
            path.display(),
            sessions(" color TEXT,"),
            sessions("")
        )
    );
}

#[test]
fn refuses_non_strict_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loose.db");
    let schema = upstream::SCHEMA_SQL.replace(
        "  PRIMARY KEY (session_id, seq)\n) STRICT;",
        "  PRIMARY KEY (session_id, seq)\n);",
    );
    assert_ne!(schema, upstream::SCHEMA_SQL);
    crafted_database(&path, &schema, upstream::APPLICATION_ID, 17);
    let events = |strict: &str| {
        format!(
            "table events: CREATE TABLE events ( session_id TEXT NOT NULL REFERENCES \
             sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL, type TEXT NOT NULL, time \
             INTEGER NOT NULL, data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT, \
             ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)), PRIMARY KEY \
             (session_id, seq) ){strict}"
        )
    };
    assert_eq!(
        assert_refused(&path),
        format!(
            "{}: session database does not contain the required schema objects (unexpected: \
             [{}]; missing: [{}])",
            path.display(),
            events(""),
            events(" STRICT")
        )
    );
}

#[test]
fn refuses_extra_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("extra.db");
    let schema = format!(
        "{}\nCREATE INDEX events_by_type ON events(type);",
        upstream::SCHEMA_SQL
    );
    crafted_database(&path, &schema, upstream::APPLICATION_ID, 17);
    assert_eq!(
        assert_refused(&path),
        format!(
            "{}: session database does not contain the required schema objects (unexpected: \
             [index events_by_type: CREATE INDEX events_by_type ON events(type)]; missing: [])",
            path.display()
        )
    );
}

#[test]
fn refuses_unversioned_non_pristine_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    crafted_database(&path, "CREATE TABLE notes (body TEXT);", 0, 0);
    assert_eq!(
        assert_refused(&path),
        format!(
            "{}: session database has an unversioned schema or application identity (it is \
             not empty, and not a session database)",
            path.display()
        )
    );
}

/// Ownership is re-checked inside each append's transaction: a database
/// whose application id or user_version changed after turnwal opened it
/// refuses the append and keeps its rows.
#[test]
fn detects_ownership_change_at_append() {
    for (pragma, value, says) in [
        (
            "application_id",
            7,
            "session database application id changed before mutation (expected 1146308688, \
             got 7)",
        ),
        (
            "user_version",
            18,
            "session database schema changed before mutation (expected 17, got 18)",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owned.db");
        let store = open_store(&path);
        let mut log = one_turn_session(&path, &store);
        raw(&path).pragma_update(None, pragma, value).unwrap();
        let before = snapshot(&path, "s");
        log.prompt_turn("again", "sure");
        let text = store.append("s", &log.batch()).unwrap_err().to_string();
        assert_eq!(text, format!("{}: {says}", path.display()), "{pragma}");
        assert_eq!(snapshot(&path, "s"), before, "{pragma}");
        assert_eq!(upstream::pragma_i64(&raw(&path), pragma), value);
    }
}

// -- stale writers and repairs ------------------------------------------------

/// Two stores over two backends on one file. While the winner holds "s",
/// the other store cannot take its writer (the per-session lock); once the
/// winner appended turn 2 and let go, the other store's turn 2, built from
/// its stale view (next seq 6), is rejected with the stored next seq, and
/// the winner's rows are untouched.
#[test]
fn stale_writer_is_rejected_between_two_stores() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.db");
    let winner = open_store(&path);
    let log = one_turn_session(&path, &winner);
    let stale = open_store(&path);
    assert_eq!(stale.inspect("s").unwrap().events.len(), 6);
    match stale.resume("s").unwrap_err() {
        Error::Locked {
            id,
            path: lock,
            holder,
        } => {
            assert_eq!(id, "s");
            assert_eq!(lock, backend(&path).lock_path("s"));
            assert_eq!(holder, Some(std::process::id()));
        }
        other => panic!("{other:?}"),
    }
    let mut ours = Log::starting_at(T0);
    ours.events = log.events.clone();
    ours.taken = 6;
    ours.turn = 1;
    ours.prompt_turn("winner", "won");
    winner.append("s", &ours.batch()).unwrap();
    winner.close("s").unwrap();
    let rows = snapshot(&path, "s");
    let revision = revision_column(&path, "s");

    let mut theirs = Log::starting_at(T0);
    theirs.events = log.events.clone();
    theirs.taken = 6;
    theirs.turn = 1;
    theirs.prompt_turn("stale", "lost");
    let err = stale.append("s", &theirs.batch()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SeqMismatch {
                expected: 12,
                got: 6,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "session \"s\": stored next seq is 12, but the batch starts at seq 6"
    );
    assert_eq!(
        snapshot(&path, "s"),
        rows,
        "the winner's rows are untouched"
    );
    assert_eq!(revision_column(&path, "s"), revision);
    drop((winner, stale));
    assert_reads(&path, "s", ours.all());
}

/// The upstream harness appends behind the back of a turnwal writer that
/// holds the session open: turnwal's next append is rejected with the
/// stored next seq and the upstream rows stay as they are.
#[test]
fn stale_writer_is_rejected_after_rows_written_behind_its_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("behind.db");
    let store = open_store(&path);
    let mut log = one_turn_session(&path, &store);
    let mut upstream_log = Log::starting_at(T0);
    upstream_log.events = log.events.clone();
    upstream_log.taken = 6;
    upstream_log.turn = 1;
    upstream_log
        .prompt_turn("from upstream", "ok")
        .prompt_turn("and again", "ok");
    let header = SessionHeader::new("s", 1);
    upstream::append_batch(
        &raw(&path),
        &header,
        INCARNATION,
        &logicals(&upstream_log.batch()),
    )
    .unwrap();
    let rows = snapshot(&path, "s");
    log.prompt_turn("stale", "lost");
    let err = store.append("s", &log.batch()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SeqMismatch {
                expected: 18,
                got: 6,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "session \"s\": stored next seq is 18, but the batch starts at seq 6"
    );
    assert_eq!(snapshot(&path, "s"), rows);
    drop(store);
    assert_reads(&path, "s", upstream_log.all());
}

/// A session whose turn 2 is open with a torn row after it: turn 1 (0..=5),
/// `turn/start` 6, `user/message` 7, and upstream's `corruptTail` row
/// (`'{not valid json'` as an `assistant/chunk`) at 8.
fn torn_session(path: &Path) -> Log {
    let conn = upstream::open(path, STORE_ID);
    let mut log = Log::starting_at(T0);
    log.prompt_turn("hi", "hello");
    log.turn_start().user("u2", "more");
    upstream::append_batch(
        &conn,
        &SessionHeader::new("s", 1),
        INCARNATION,
        &logicals(log.all()),
    )
    .unwrap();
    let torn = Row {
        seq: 8,
        kind: "assistant/chunk".into(),
        time: 99,
        data: Col::text("{not valid json"),
        sources: Col::Null,
        surface_op: Col::Null,
        ignorable: Col::Null,
    };
    upstream::insert_row(&conn, "s", &torn).unwrap();
    log
}

/// A repair found by one writer is refused once the tail changed under it
/// (the winner repaired and appended), and the winner's rows survive.
#[test]
fn stale_repair_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repair.db");
    let log = torn_session(&path);
    let loser = backend(&path);
    let mut writer = loser.open("s").unwrap().expect("session exists");
    let scan = writer.scan().unwrap();
    assert_eq!(scan.stored_len(), 8);
    assert_eq!(scan.cut.as_ref().map(|c| c.seq), Some(8));
    assert_eq!(scan.closers.len(), 1);

    // The winner (the upstream harness here) deletes the torn row, closes
    // the turn and appends turn 3.
    let conn = raw(&path);
    conn.execute("DELETE FROM events WHERE session_id = 's' AND seq >= 8", [])
        .unwrap();
    let mut winner = Log::starting_at(T0);
    winner.events = log.events.clone();
    winner.taken = 8;
    winner.turn = 2;
    winner.push("turn/end", r#"{"turn":2,"reason":{"kind":"interrupted"}}"#);
    winner.prompt_turn("turn three", "done");
    let header = SessionHeader::new("s", 1);
    upstream::append_batch(&conn, &header, INCARNATION, &logicals(&winner.batch())).unwrap();
    let rows = snapshot(&path, "s");

    let err = writer.repair(&scan).unwrap_err();
    assert_eq!(
        snapshot(&path, "s"),
        rows,
        "the winner's tail is not deleted"
    );
    assert_eq!(revision_column(&path, "s"), 2);
    assert!(err.to_string().contains("repair is stale"), "{err:?}");
    drop(writer);
    drop(loser);
    assert_reads(&path, "s", winner.all());
}

/// Upstream's `corruptTail` row (`'{not valid json'` as an `assistant/chunk`)
/// inserted at the next seq behind the back of a live writer: its next
/// append is refused before anything is written ("invalid physical tail"),
/// and the session recovers from a fresh store.
#[test]
fn malformed_tail_row_is_rejected_before_an_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tail.db");
    let store = open_store(&path);
    let mut log = one_turn_session(&path, &store);
    let torn = Row {
        seq: 6,
        kind: "assistant/chunk".into(),
        time: 99,
        data: Col::text("{not valid json"),
        sources: Col::Null,
        surface_op: Col::Null,
        ignorable: Col::Null,
    };
    upstream::insert_row(&raw(&path), "s", &torn).unwrap();
    let rows = snapshot(&path, "s");
    log.prompt_turn("again", "sure");
    let err = store.append("s", &log.batch()).unwrap_err();
    assert_eq!(
        err.corruption(),
        Some(&Corruption {
            path: path.clone(),
            offset: 6,
            unit: turnwal::Unit::Row,
            seq: Some(6),
            reason: "session \"s\" has an invalid physical tail at seq 6: data is not valid \
                     JSON: expected a string key at byte 1 [invalid-record]; recover the session \
                     before appending"
                .into(),
        }),
        "{err:?}"
    );
    assert_eq!(snapshot(&path, "s"), rows, "nothing written");
    assert_eq!(revision_column(&path, "s"), 1);
    drop(store);
    let store = open_store(&path);
    let view = store.load("s").unwrap();
    assert_eq!((view.state, view.events.len()), (LogState::Torn, 6));
    store.append("s", &log.events[6..]).unwrap();
    drop(store);
    assert_reads(&path, "s", log.all());
}

// -- malformed rows -----------------------------------------------------------

/// Turn 1 (0..=5), then turn 2: `turn/start` 6, `user/message` 7,
/// `step/start` 8, three text deltas packed at 9, `assistant/message` 12
/// citing them; `closed` adds `step/end` 13 and `turn/end` 14, so that the
/// rows at 9 and 12 are committed.
fn victim_session(path: &Path, closed: bool) -> Log {
    let conn = upstream::open(path, STORE_ID);
    let mut log = Log::starting_at(T0);
    log.prompt_turn("hi", "hello");
    log.turn_start().user("u2", "more").step_start();
    log.text(0, "a").text(0, "b").text(0, "c");
    log.assistant_with_sources("abc", &[], Some(&[9, 10, 11]));
    if closed {
        log.step_end().turn_end();
    }
    upstream::append_batch(
        &conn,
        &SessionHeader::new("s", 1),
        INCARNATION,
        &logicals(log.all()),
    )
    .unwrap();
    let rows = rows_of(&conn, "s");
    assert_eq!(rows[9].kind, "text-chunks");
    assert_eq!(rows[10].sources, Col::Blob(vec![9, 2, 2]));
    log
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    TruncatedVarint,
    NonCanonicalVarint,
    InvalidUtf8Blob,
    OversizedPackedText,
    OversizedPackedBlob,
    TwoMemberPacked,
}

/// Damages one row of `victim_session` the way the name says; returns the
/// seq of the damaged row.
fn damage(path: &Path, how: Damage) -> i64 {
    let conn = raw(path);
    let set = |column: &str, seq: i64, value: Col| {
        let n = conn
            .execute(
                &format!("UPDATE events SET {column} = ?1 WHERE session_id = 's' AND seq = ?2"),
                params![value, seq],
            )
            .unwrap();
        assert_eq!(n, 1);
        seq
    };
    let oversized = || {
        let member = "m".repeat(350_000);
        format!(
            r#"{{"turn":2,"step":1,"index":0,"dt":[1,1],"texts":[{},{},{}]}}"#,
            q(&member),
            q(&member),
            q(&member)
        )
    };
    match how {
        // 9, then a continuation byte with nothing after it.
        Damage::TruncatedVarint => set("source_event_seqs", 12, Col::Blob(vec![0x09, 0x82])),
        // 9, then +1 spelled in two bytes.
        Damage::NonCanonicalVarint => {
            set("source_event_seqs", 12, Col::Blob(vec![0x09, 0x82, 0x00]))
        }
        Damage::InvalidUtf8Blob => {
            let mut bytes = br#"{"turn":2,"step":1,"text":""#.to_vec();
            bytes.extend_from_slice(&[0xff, 0xfe, 0xc3]);
            bytes.extend_from_slice(br#""}"#);
            set(
                "data",
                12,
                Col::Blob(zstd::bulk::compress(&bytes, 3).unwrap()),
            )
        }
        Damage::OversizedPackedText => {
            let data = oversized();
            assert!(data.len() > upstream::MAX_PACKED_DATA_BYTES);
            set("data", 9, Col::text(&data))
        }
        Damage::OversizedPackedBlob => {
            let frame = zstd::bulk::compress(oversized().as_bytes(), 3).unwrap();
            assert!(frame.len() < 4096);
            set("data", 9, Col::Blob(frame))
        }
        Damage::TwoMemberPacked => set(
            "data",
            9,
            Col::text(r#"{"turn":2,"step":1,"index":0,"dt":[1],"texts":["a","b"]}"#),
        ),
    }
}

/// What is wrong with the damaged row, in the words of turnwal's report
/// (upstream's own words where upstream has them).
fn damage_detail(how: Damage) -> &'static str {
    match how {
        Damage::TruncatedVarint => "malformed source_event_seqs storage value: truncated varint",
        Damage::NonCanonicalVarint => {
            "malformed source_event_seqs storage value: non-canonical varint"
        }
        // `{"turn":2,"step":1,"text":"` is 27 bytes.
        Damage::InvalidUtf8Blob => "decompressed data is not valid UTF-8 at byte 27",
        Damage::OversizedPackedText => {
            "malformed text-chunks storage row: data is 1050059 bytes, over the 1048576-byte \
             bound"
        }
        Damage::OversizedPackedBlob => {
            "malformed text-chunks storage row: data BLOB decompresses past the 1048576-byte \
             bound"
        }
        Damage::TwoMemberPacked => {
            "malformed text-chunks storage row: texts must contain 3..1024 strings"
        }
    }
}

/// One operation on a store, its result reduced to success or the error.
type StoreOp<'a> = dyn Fn(&Store) -> turnwal::Result<()> + 'a;

/// A damaged row at or before the last `turn/end`: inspect and load refuse
/// the session as corrupt at that row's seq, and nothing is changed.
fn assert_committed_corruption(how: Damage) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.db");
    let log = victim_session(&path, true);
    let bad = damage(&path, how);
    let rows = snapshot(&path, "s");
    let plain: Vec<Row> = rows.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(
        upstream::scan_rows(&plain, 0),
        Err(format!(
            "corrupt session log: invalid committed physical row at seq {bad}"
        )),
        "{how:?}: upstream's own verdict"
    );
    let index = rows.iter().position(|(_, r)| r.seq == bad).unwrap() as u64;
    let want = Corruption {
        path: path.clone(),
        offset: index,
        unit: turnwal::Unit::Row,
        seq: Some(bad as u64),
        reason: format!(
            "session \"s\": invalid committed row (its seq column is {bad}) at seq {bad}: {} \
             [invalid-record]; a later row holds a turn/end, so this row had been committed \
             [rule: before-a-later-commit]",
            damage_detail(how)
        ),
    };
    // Each through a store of its own that holds nothing open: reading,
    // loading (which would commit a repair), and appending a new turn (a
    // cold append adopts the session, which upstream's coordinator does by
    // loading it first).
    let mut next = Log::starting_at(T0);
    next.events = log.events.clone();
    next.taken = log.events.len();
    next.turn = 2;
    next.prompt_turn("three", "ok");
    let batch = next.batch();
    let ops: [(&str, &StoreOp); 3] = [
        ("inspect", &|s| s.inspect("s").map(|_| ())),
        ("load", &|s| s.load("s").map(|_| ())),
        ("append", &|s| s.append("s", &batch).map(|_| ())),
    ];
    for (op, run) in ops {
        match run(&open_store(&path)) {
            Err(err) => assert_eq!(err.corruption(), Some(&want), "{how:?} {op}: {err:?}"),
            Ok(()) => panic!("{how:?} {op}: accepted a session with a corrupt committed row"),
        }
        assert_eq!(snapshot(&path, "s"), rows, "{how:?} {op}: nothing changed");
    }
    assert_eq!(snapshot(&path, "s"), rows, "{how:?}: nothing changed");
    assert_eq!(revision_column(&path, "s"), 1);
}

/// A damaged row after the last `turn/end`: a torn tail. inspect keeps the
/// events before it and closes the open turn in memory; load deletes the
/// damaged row and everything after it, and inserts the closers, once.
fn assert_torn_tail(how: Damage) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.db");
    let log = victim_session(&path, false);
    let bad = damage(&path, how) as usize;
    let rows = snapshot(&path, "s");
    let plain: Vec<Row> = rows.iter().map(|(_, r)| r.clone()).collect();
    let upstream_verdict = upstream::scan_rows(&plain, 0).unwrap();
    assert_eq!(upstream_verdict.torn_from, Some(bad as i64), "{how:?}");
    assert_eq!(
        upstream_verdict.preserved,
        logicals(&log.events[..bad]),
        "{how:?}"
    );

    let time = log.events[bad - 1].time();
    let closers = vec![
        Logical {
            kind: "step/end".into(),
            seq: bad as u64,
            time,
            data: r#"{"turn":2,"step":1}"#.into(),
            ignorable: false,
            sources: None,
            surface_op: None,
        },
        Logical {
            kind: "turn/end".into(),
            seq: bad as u64 + 1,
            time,
            data: r#"{"turn":2,"reason":{"kind":"interrupted"}}"#.into(),
            ignorable: false,
            sources: None,
            surface_op: None,
        },
    ];
    let store = open_store(&path);
    let view = store.inspect("s").unwrap();
    assert_eq!(view.state, LogState::Torn, "{how:?}");
    assert_eq!(view.stored, bad as u64, "{how:?}");
    let index = rows
        .iter()
        .position(|(_, r)| r.seq as usize == bad)
        .unwrap() as u64;
    assert_eq!(
        view.cut,
        Some(Cut {
            offset: index,
            seq: bad as u64,
            len: rows.len() as u64 - index,
            reason: CutReason::Invalid,
            detail: damage_detail(how).to_owned(),
        }),
        "{how:?}: the damaged row and every row after it"
    );
    assert_eq!(
        jsons(&view.events[..bad]),
        jsons(&log.events[..bad]),
        "{how:?}"
    );
    assert_eq!(logicals(&view.events[bad..]), closers, "{how:?}");
    assert_eq!(
        snapshot(&path, "s"),
        rows,
        "{how:?}: inspect writes nothing"
    );

    let loaded = store.load("s").unwrap();
    assert_eq!(loaded.events.len(), bad + 2, "{how:?}");
    let after = snapshot(&path, "s");
    let kept = rows
        .iter()
        .take_while(|(_, r)| (r.seq as usize) < bad)
        .count();
    assert_eq!(after[..kept], rows[..kept], "{how:?}: rows before the tail");
    let new_rows: Vec<Row> = after[kept..].iter().map(|(_, r)| r.clone()).collect();
    let want: Vec<Row> = closers
        .iter()
        .map(|c| upstream::bind(&upstream::Record::Scalar(c.clone())))
        .collect();
    assert_rows_eq(&new_rows, &want);
    assert_eq!(revision_column(&path, "s"), 2, "{how:?}: one repair");
    drop(store);
    let mut repaired = logicals(&log.events[..bad]);
    repaired.extend(closers);
    let scanned = upstream::scan_rows(&rows_of(&raw(&path), "s"), 0).unwrap();
    assert_eq!(
        (scanned.preserved, scanned.torn_from),
        (repaired, None),
        "{how:?}"
    );
    // Loading again changes nothing.
    open_store(&path).load("s").unwrap();
    assert_eq!(snapshot(&path, "s"), after, "{how:?}: repair happens once");
}

#[test]
fn malformed_row_truncated_varint() {
    assert_committed_corruption(Damage::TruncatedVarint);
    assert_torn_tail(Damage::TruncatedVarint);
}

#[test]
fn malformed_row_non_canonical_varint() {
    assert_committed_corruption(Damage::NonCanonicalVarint);
    assert_torn_tail(Damage::NonCanonicalVarint);
}

#[test]
fn malformed_row_invalid_utf8_blob() {
    assert_committed_corruption(Damage::InvalidUtf8Blob);
    assert_torn_tail(Damage::InvalidUtf8Blob);
}

#[test]
fn malformed_row_oversized_packed_text() {
    assert_committed_corruption(Damage::OversizedPackedText);
    assert_torn_tail(Damage::OversizedPackedText);
}

#[test]
fn malformed_row_oversized_packed_blob() {
    assert_committed_corruption(Damage::OversizedPackedBlob);
    assert_torn_tail(Damage::OversizedPackedBlob);
}

#[test]
fn malformed_row_packed_with_two_members() {
    assert_committed_corruption(Damage::TwoMemberPacked);
    assert_torn_tail(Damage::TwoMemberPacked);
}

// -- compression and packing limits ------------------------------------------

/// `data` of `len` bytes that compresses well: a JSON string of `a`s.
fn compressible_json(len: usize) -> String {
    format!("\"{}\"", "a".repeat(len - 2))
}

/// `data` is TEXT under 4096 bytes whatever it is; from 4096 bytes on it is
/// a zstd BLOB when that is smaller and TEXT when it is not. Packed rows
/// follow the same rule.
#[test]
fn compression_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zstd.db");
    let mut log = Log::starting_at(T0);
    log.turn_start();
    let payloads = [
        compressible_json(4095),
        compressible_json(4096),
        incompressible_json(4096),
        incompressible_json(4097),
        compressible_json(200_000),
        incompressible_json(50_000),
    ];
    for p in &payloads {
        log.push("test/payload", p);
    }
    log.step_start();
    for _ in 0..3 {
        log.text(0, &"b".repeat(2000));
    }
    log.step_end().turn_end();
    let store = open_store(&path);
    store.create(SessionHeader::new("z", 1)).unwrap();
    store.append("z", log.all()).unwrap();
    drop(store);
    let rows = rows_of(&raw(&path), "z");
    assert_eq!(
        layout(&rows),
        [
            "0:turn/start",
            "1:test/payload",
            "2:test/payload",
            "3:test/payload",
            "4:test/payload",
            "5:test/payload",
            "6:test/payload",
            "7:step/start",
            "8:text-chunks*3",
            "11:step/end",
            "12:turn/end",
        ]
    );
    let kinds: Vec<&str> = rows
        .iter()
        .map(|r| match r.data {
            Col::Text(_) => "TEXT",
            Col::Blob(_) => "BLOB",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "TEXT", "TEXT", "BLOB", "TEXT", "TEXT", "BLOB", "TEXT", "TEXT", "BLOB", "TEXT", "TEXT"
        ]
    );
    assert_eq!(
        rows[1].data,
        Col::text(&payloads[0]),
        "4095 bytes stay TEXT"
    );
    assert_eq!(
        rows[3].data,
        Col::text(&payloads[2]),
        "no smaller frame: TEXT"
    );
    assert_eq!(rows[4].data, Col::text(&payloads[3]));
    assert_eq!(rows[6].data, Col::text(&payloads[5]));
    for (row, payload) in [(&rows[2], &payloads[1]), (&rows[5], &payloads[4])] {
        let Col::Blob(frame) = &row.data else {
            unreachable!()
        };
        assert_eq!(&upstream::decode_data(&row.data, None).unwrap(), payload);
        assert_eq!(
            zstd::bulk::decompress(frame, payload.len()).unwrap(),
            payload.as_bytes(),
            "one zstd frame of exactly the data"
        );
        assert!(frame.len() < payload.len());
        // The level shows only in the output: the same zstd build at level
        // 3 gives this very frame.
        assert_eq!(
            frame,
            &zstd::bulk::compress(payload.as_bytes(), 3).unwrap(),
            "level 3"
        );
    }
    assert_rows_eq(&rows, &upstream::encode_batch(&logicals(log.all())));
    assert_reads(&path, "z", log.all());
}

/// `turn/start`, `step/start`, one text delta per member, `step/end`,
/// `turn/end`, in one batch.
fn run_session(path: &Path, id: &str, members: &[String]) -> (Log, Vec<Row>) {
    let mut log = Log::starting_at(T0);
    log.turn_start().step_start();
    for m in members {
        log.text(0, m);
    }
    log.step_end().turn_end();
    let store = open_store(path);
    store.create(SessionHeader::new(id, 1)).unwrap();
    store.append(id, log.all()).unwrap();
    drop(store);
    let rows = rows_of(&raw(path), id);
    assert_rows_eq(&rows, &upstream::encode_batch(&logicals(log.all())));
    (log, rows)
}

/// Reads `id` back through a fresh store: inspect, and `read_from` at
/// `froms` (plus the end and one past it).
fn assert_reads_at(path: &Path, id: &str, events: &[Event], froms: &[usize]) {
    let store = open_store(path);
    assert_eq!(
        jsons(&store.inspect(id).unwrap().events),
        jsons(events),
        "inspect {id}"
    );
    let mut froms = froms.to_vec();
    froms.extend([events.len(), events.len() + 1]);
    for from in froms {
        let got = store.read_from(id, from as u64).unwrap();
        assert_eq!(
            jsons(&got),
            jsons(&events[from.min(events.len())..]),
            "read_from({id}, {from})"
        );
    }
}

/// Runs split at 1024 members: 1025 → 1024 packed + 1 scalar, 1026 → 1024
/// + 2 scalars, 1027 → 1024 + 3 packed.
#[test]
fn packing_splits_runs_at_1024_members() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("members.db");
    let cases: [(usize, &[&str]); 3] = [
        (
            1025,
            &[
                "0:turn/start",
                "1:step/start",
                "2:text-chunks*1024",
                "1026:assistant/chunk",
                "1027:step/end",
                "1028:turn/end",
            ],
        ),
        (
            1026,
            &[
                "0:turn/start",
                "1:step/start",
                "2:text-chunks*1024",
                "1026:assistant/chunk",
                "1027:assistant/chunk",
                "1028:step/end",
                "1029:turn/end",
            ],
        ),
        (
            1027,
            &[
                "0:turn/start",
                "1:step/start",
                "2:text-chunks*1024",
                "1026:text-chunks*3",
                "1029:step/end",
                "1030:turn/end",
            ],
        ),
    ];
    for (n, want) in cases {
        let members: Vec<String> = (0..n).map(|i| format!("w{i} ")).collect();
        let id = format!("run-{n}");
        let (log, rows) = run_session(&path, &id, &members);
        assert_eq!(layout(&rows), want, "{n} members");
        assert_reads_at(&path, &id, log.all(), &[0, 1, 2, 3, 700, 1025, 1026, 1027]);
    }
}

/// Runs split at 1 MiB of uncompressed data: exactly 1,048,576 bytes is one
/// row and one byte more is not; 4 × 300,000-byte members → 3 packed + 1
/// scalar; 3 × 400,000 stay scalar; 10 × 150,000 → 6 + 4.
#[test]
fn packing_splits_runs_at_1_mib() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bytes.db");
    let overhead = r#"{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["","",""]}"#.len();
    let exact = |extra: usize| -> Vec<String> {
        let total = upstream::MAX_PACKED_DATA_BYTES - overhead + extra;
        let third = total / 3;
        vec![
            "x".repeat(third),
            "y".repeat(third),
            "z".repeat(total - 2 * third),
        ]
    };
    let same = |n: usize, len: usize| -> Vec<String> {
        (0..n)
            .map(|i| char::from(b'a' + i as u8).to_string().repeat(len))
            .collect()
    };
    let cases: [(&str, Vec<String>, &[&str]); 5] = [
        ("exactly-1mib", exact(0), &["2:text-chunks*3", "5:step/end"]),
        (
            "1mib-plus-1",
            exact(1),
            &[
                "2:assistant/chunk",
                "3:assistant/chunk",
                "4:assistant/chunk",
                "5:step/end",
            ],
        ),
        (
            "4x300k",
            same(4, 300_000),
            &["2:text-chunks*3", "5:assistant/chunk", "6:step/end"],
        ),
        (
            "3x400k",
            same(3, 400_000),
            &[
                "2:assistant/chunk",
                "3:assistant/chunk",
                "4:assistant/chunk",
                "5:step/end",
            ],
        ),
        (
            "10x150k",
            same(10, 150_000),
            &["2:text-chunks*6", "8:text-chunks*4", "12:step/end"],
        ),
    ];
    for (id, members, want) in cases {
        let (log, rows) = run_session(&path, id, &members);
        assert_eq!(layout(&rows)[2..rows.len() - 1], want[..], "{id}");
        for row in rows.iter().filter(|r| r.packed()) {
            let size = upstream::decode_data(&row.data, None).unwrap().len();
            assert!(size <= upstream::MAX_PACKED_DATA_BYTES, "{id}: {size}");
            if id == "exactly-1mib" {
                assert_eq!(size, upstream::MAX_PACKED_DATA_BYTES);
            }
        }
        let n = log.events.len();
        assert_reads_at(&path, id, log.all(), &(0..n).collect::<Vec<_>>());
    }
}

/// Opens (creating it 0600 if absent, as upstream creates its databases) a
/// plain rusqlite connection to `path`.
fn open_0600(path: impl AsRef<std::path::Path>) -> rusqlite::Result<rusqlite::Connection> {
    let path = path.as_ref();
    let _ =
        turnwal::storage::private_file(std::fs::OpenOptions::new().write(true).create_new(true))
            .open(path);
    rusqlite::Connection::open(path)
}
