//! The upstream harness's SQLite store against turnwal's SQLite backend
//! (reference/upstream-persistence.md §4, and the cases of §8.5 that apply).
//!
//! The [`upstream`] module is a literal, independent re-statement of the
//! upstream schema-17 store, written from the reference and sharing no code
//! with `src/backend/sqlite`:
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
//! §8.5 cases and where they live:
//! - packing across batch partitions, earlier rowids unchanged:
//!   `packing_across_batch_partitions_keeps_earlier_rows`, and the paced
//!   stream (1,004 events in batches of 40: 31 rows, only inserts):
//!   `paced_stream_only_inserts_rows`;
//! - a packed predecessor covering `fromSeq`, and a malformed one:
//!   `read_from_seeks_through_packed_predecessor`;
//! - busy wait: `append_waits_for_a_writer_holding_begin_immediate`,
//!   `append_fails_clearly_when_busy_timeout_expires`;
//! - refused databases, nothing changed: `refuses_user_version_16`,
//!   `refuses_foreign_application_id`, `refuses_changed_column`,
//!   `refuses_non_strict_table`, `refuses_extra_object`,
//!   `refuses_unversioned_non_pristine_file`, and at mutation time
//!   `detects_ownership_change_at_append`;
//! - stale writer and stale repair: `stale_writer_is_rejected_*`,
//!   `stale_repair_is_rejected`;
//! - malformed rows: `malformed_row_*` (committed corruption before the last
//!   `turn/end`, a torn tail after it);
//! - compression thresholds: `compression_thresholds`;
//! - packing limits: `packing_splits_runs_at_1024_members`,
//!   `packing_splits_runs_at_1_mib`.
//!
//! Not mapped: busy journal-mode switches and journal modes other than the
//! default (they test upstream's open loop, not the file format), POSIX
//! ownership checks of the database file, and the SQL-in-TypeScript boundary
//! check.

#![allow(clippy::too_many_arguments)]

use turnwal::{Event, SessionHeader};

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
    #[derive(Debug, Clone, PartialEq)]
    pub enum Col {
        Null,
        Int(i64),
        Real(f64),
        Text(Vec<u8>),
        Blob(Vec<u8>),
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
            Col::Text(t) => {
                let text = String::from_utf8(t.clone()).map_err(|e| e.to_string())?;
                serde_json::from_str::<Value>(&text).map_err(|e| format!("surface_op: {e}"))?;
                Some(text)
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
        let conn = Connection::open(path).unwrap();
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

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
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
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
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

/// Builds a session log as the harness writes it. Times increase by one per
/// event unless set with [`Log::at`].
struct Log {
    events: Vec<Event>,
    taken: usize,
    turn: u64,
    step: u64,
    time: i64,
}

#[allow(dead_code)] // used by the backend cases, which follow once the backend lands
impl Log {
    fn new() -> Log {
        Log {
            events: Vec::new(),
            taken: 0,
            turn: 0,
            step: 0,
            time: 1_700_000_000_000,
        }
    }

    fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }

    /// Sets the time of the next event.
    fn at(&mut self, time: i64) -> &mut Log {
        self.time = time;
        self
    }

    fn push_event(&mut self, event: Event) -> u64 {
        self.events.push(event);
        self.time += 1;
        self.events.len() as u64 - 1
    }

    fn push(&mut self, event_type: &str, data: &str) -> u64 {
        let e = Event::new(event_type, self.next_seq(), self.time, data).unwrap();
        self.push_event(e)
    }

    fn push_surface(&mut self, event_type: &str, data: &str, sources: Option<&[u64]>) -> u64 {
        let mut e = Event::new(event_type, self.next_seq(), self.time, data)
            .unwrap()
            .with_surface_op("\"append\"")
            .unwrap();
        if let Some(sources) = sources {
            e = e.with_source_event_seqs(sources).unwrap();
        }
        self.push_event(e)
    }

    fn ignorable(&mut self, event_type: &str, data: &str) -> &mut Log {
        let e = Event::new(event_type, self.next_seq(), self.time, data)
            .unwrap()
            .with_ignorable();
        self.push_event(e);
        self
    }

    fn turn_start(&mut self) -> &mut Log {
        self.turn += 1;
        self.step = 0;
        self.push("turn/start", &format!(r#"{{"turn":{}}}"#, self.turn));
        self
    }

    fn turn_end(&mut self) -> &mut Log {
        let data = format!(
            r#"{{"turn":{},"reason":{{"kind":"completed"}}}}"#,
            self.turn
        );
        self.push("turn/end", &data);
        self
    }

    fn step_start(&mut self) -> &mut Log {
        self.step += 1;
        let data = format!(r#"{{"turn":{},"step":{}}}"#, self.turn, self.step);
        self.push("step/start", &data);
        self
    }

    fn step_end(&mut self) -> &mut Log {
        let data = format!(r#"{{"turn":{},"step":{}}}"#, self.turn, self.step);
        self.push("step/end", &data);
        self
    }

    fn user(&mut self, id: &str, text: &str) -> &mut Log {
        let data = format!(
            r#"{{"id":{},"role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
            q(id),
            q(text)
        );
        self.push_surface("user/message", &data, None);
        self
    }

    /// An `assistant/chunk` whose chunk is `chunk` (JSON text).
    fn raw_chunk(&mut self, chunk: &str) -> &mut Log {
        let data = format!(
            r#"{{"turn":{},"step":{},"chunk":{chunk}}}"#,
            self.turn, self.step
        );
        self.push("assistant/chunk", &data);
        self
    }

    fn text(&mut self, index: u32, text: &str) -> &mut Log {
        self.raw_chunk(&format!(
            r#"{{"type":"text-delta","index":{index},"text":{}}}"#,
            q(text)
        ))
    }

    fn reasoning(&mut self, index: u32, text: &str) -> &mut Log {
        self.raw_chunk(&format!(
            r#"{{"type":"reasoning-delta","index":{index},"text":{}}}"#,
            q(text)
        ))
    }

    fn tool_delta(&mut self, index: u32, id: &str, name: Option<&str>, args: &str) -> &mut Log {
        let name = name.map_or(String::new(), |n| format!(r#","name":{}"#, q(n)));
        self.raw_chunk(&format!(
            r#"{{"type":"tool-call-delta","index":{index},"id":{}{name},"argumentsDelta":{}}}"#,
            q(id),
            q(args)
        ))
    }

    /// An assistant message with a text block and one tool-call block per
    /// `(callId, name, arguments)`.
    fn assistant(
        &mut self,
        text: &str,
        calls: &[(&str, &str, &str)],
        sources: Option<&[u64]>,
    ) -> u64 {
        let mut blocks = vec![format!(r#"{{"type":"text","text":{}}}"#, q(text))];
        for (id, name, args) in calls {
            blocks.push(format!(
                r#"{{"type":"tool-call","id":{},"name":{},"arguments":{}}}"#,
                q(id),
                q(name),
                q(args)
            ));
        }
        let data = format!(
            r#"{{"turn":{},"step":{},"message":{{"id":"assistant-{}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"mock","model":"mock"}}}},"usage":{{"inputTokens":12,"outputTokens":3}}}}"#,
            self.turn,
            self.step,
            self.next_seq(),
            blocks.join(",")
        );
        self.push_surface("assistant/message", &data, sources)
    }

    fn tool_call(&mut self, id: &str, name: &str, args: &str) -> u64 {
        let data = format!(
            r#"{{"turn":{},"step":{},"callId":{},"name":{},"arguments":{}}}"#,
            self.turn,
            self.step,
            q(id),
            q(name),
            q(args)
        );
        self.push("tool/call", &data)
    }

    fn tool_result(&mut self, id: &str, text: &str, call_seq: u64) -> &mut Log {
        let data = format!(
            r#"{{"turn":{},"step":{},"message":{{"id":{},"role":"user","source":{{"kind":"tool","callId":{}}},"content":[{{"type":"tool-result","toolCallId":{},"isError":false,"content":[{{"type":"text","text":{}}}]}}]}}}}"#,
            self.turn,
            self.step,
            q(&format!("result-{id}")),
            q(id),
            q(id),
            q(text)
        );
        self.push_surface("tool/result", &data, Some(&[call_seq]));
        self
    }

    /// `turn/start`, a prompt, one step answering it, `turn/end`.
    fn simple_turn(&mut self, prompt: &str, answer: &str) -> &mut Log {
        let id = format!("user-{}", self.next_seq());
        self.turn_start().user(&id, prompt).step_start();
        self.assistant(answer, &[], None);
        self.step_end().turn_end()
    }

    /// Upstream's `chunkLog(n)`: `turn/start`, `step/start`, `n` text
    /// deltas, `step/end`, `turn/end`.
    fn chunk_log(n: usize) -> Log {
        let mut log = Log::new();
        log.turn_start().step_start();
        for i in 0..n {
            log.text(0, &format!("t{i} "));
        }
        log.step_end().turn_end();
        log
    }

    fn batch(&mut self) -> Vec<Event> {
        let batch = self.events[self.taken..].to_vec();
        self.taken = self.events.len();
        batch
    }

    fn all(&self) -> &[Event] {
        &self.events
    }
}

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
    let mut log = Log::new();
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
    let mut log = Log::chunk_log(4);
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
