//! The bytes of the native format (docs/FORMAT.md): the file header, record
//! framing, and record encode/decode. Pure functions over byte slices.
//!
//! Invariants this module keeps:
//!
//! - One layout table per fixed part ([`Field`] constants: `FH_*` for the
//!   file header, `REC_*_FIELD` for a record's head) gives every field's
//!   offset and width, in the numbers docs/FORMAT.md prints. The encoders
//!   write each field into its table slot and the parsers read it from
//!   there; const assertions check that each table's fields are contiguous,
//!   start at 0 and end at [`FILE_HEADER_LEN`] / [`RECORD_HEADER_LEN`].
//! - A record is its head, then the payload (type name, `data`,
//!   `sourceEventSeqs`, `surfaceOp`, in that order, lengths from the head),
//!   then a [`TRAILER_LEN`]-byte trailer holding the record's total length:
//!   `encoded_len(e)` is exactly the length `encode_record` appends, and
//!   [`RecordHead::record_len`] of the parsed head equals it.
//! - The record checksum covers the file's salt, then every byte after the
//!   checksum field (trailer included); the file header's checksum covers
//!   its bytes before the checksum field, then the session header JSON.
//! - What `parse_head` accepts has a valid kind, no reserved flag bits, a
//!   type name exactly for kind [`KIND_OTHER`], and lengths within the
//!   limits, so [`RecordHead::event_kind`] never fails and
//!   [`RecordHead::record_len`] never overflows. All-zero bytes are never a
//!   valid head.

use crate::contract::{Placement, Policy};
use crate::event::{Event, EventKind, RawJson};
use crate::header::{SessionHeader, StoredHeaderError};
use crate::upstream::chunks::{Delta, DeltaKind, Piece, expand_run, packed_json, plan_batch};
use crate::view::EventRef;

/// `\x89TWAL\r\n\x1a`.
pub const MAGIC: [u8; 8] = [0x89, b'T', b'W', b'A', b'L', b'\r', b'\n', 0x1a];
/// The format version this build creates new sessions in (it reads and
/// appends to [`FORMAT_V1`] and [`FORMAT_V2`] logs too, each in its own
/// version).
pub const FORMAT_VERSION: u16 = FORMAT_V3;
/// The first format version: no chunk-run records, no sealed units.
pub const FORMAT_V1: u16 = 1;
/// Version 2: chunk-run records packed at append, and sealed units written
/// into the log itself by a rewrite of the file (docs/FORMAT.md,
/// "Version 2").
pub const FORMAT_V2: u16 = 2;
/// Version 3: version 2 whose sealed turns live in an archive file beside
/// the live one, which starts with an archive reference (docs/FORMAT.md,
/// "Version 3").
pub const FORMAT_V3: u16 = 3;
/// Size of the fixed part of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Largest session header JSON.
pub const MAX_HEADER_JSON: u32 = 1 << 20;
/// Size of a record's fixed header.
pub const RECORD_HEADER_LEN: usize = 52;
/// Size of a record's trailer.
pub const TRAILER_LEN: usize = 4;
/// The smallest possible record (one byte of data).
pub const MIN_RECORD_LEN: usize = RECORD_HEADER_LEN + 1 + TRAILER_LEN;
/// Largest `data` text (the limit every store shares, [`crate::limits`]).
pub const MAX_DATA_LEN: u32 = crate::limits::MAX_DATA_LEN as u32;
/// Largest `sourceEventSeqs` or `surfaceOp` text ([`crate::limits`]).
pub const MAX_EXTRA_LEN: u32 = crate::limits::MAX_EXTRA_LEN as u32;

const FLAG_LENIENT: u16 = 1;
/// The session's policy is `Permissive` (never set with [`FLAG_LENIENT`]).
const FLAG_PERMISSIVE: u16 = 2;

const REC_IGNORABLE: u8 = 1;
const REC_SURFACE_FIRST: u8 = 1 << 1;
const REC_IN_TURN: u8 = 1 << 2;
const REC_SYNTHETIC: u8 = 1 << 3;
const REC_RESERVED: u8 = !0b1111;

/// The kind byte of type names outside the known set.
pub const KIND_OTHER: u8 = 14;
/// Version 2: a run of `text-delta` chunks (upstream's `text-chunks` row).
pub const KIND_TEXT_RUN: u8 = 15;
/// Version 2: a run of `reasoning-delta` chunks (`reasoning-chunks`).
pub const KIND_REASONING_RUN: u8 = 16;
/// Version 2: a run of `tool-call-delta` chunks (`tool-call-chunks`).
pub const KIND_TOOL_CALL_RUN: u8 = 17;
/// Version 2: a sealed unit, a zstd frame of whole closed turns' records.
pub const KIND_SEALED: u8 = 18;
/// Version 3: the archive reference, the first record of a live file
/// whose sealed turns are in its archive.
pub const KIND_ARCHIVE: u8 = 19;
/// The archive reference's payload: archive salt, reserved, archive length.
pub const ARCHIVE_REF_DATA_LEN: usize = 16;
/// The archive reference's whole length.
pub const ARCHIVE_REF_LEN: usize = RECORD_HEADER_LEN + ARCHIVE_REF_DATA_LEN + TRAILER_LEN;
/// Largest compressed frame, and largest plain length, of a sealed unit.
pub const MAX_UNIT_LEN: u32 = 64 << 20;
/// Fewest members of a chunk-run record.
pub const MIN_RUN_MEMBERS: u16 = crate::upstream::chunks::MIN_PACKED_MEMBERS as u16;
/// Most members of a chunk-run record.
pub const MAX_RUN_MEMBERS: u16 = crate::upstream::chunks::MAX_PACKED_MEMBERS as u16;
/// Largest `data` of a chunk-run record.
pub const MAX_RUN_DATA_LEN: u32 = crate::upstream::chunks::MAX_PACKED_DATA_BYTES as u32;

/// The delta kind a chunk-run record kind holds.
pub(super) fn run_kind(kind: u8) -> Option<DeltaKind> {
    match kind {
        KIND_TEXT_RUN => Some(DeltaKind::Text),
        KIND_REASONING_RUN => Some(DeltaKind::Reasoning),
        KIND_TOOL_CALL_RUN => Some(DeltaKind::ToolCall),
        _ => None,
    }
}

fn run_kind_byte(kind: DeltaKind) -> u8 {
    match kind {
        DeltaKind::Text => KIND_TEXT_RUN,
        DeltaKind::Reasoning => KIND_REASONING_RUN,
        DeltaKind::ToolCall => KIND_TOOL_CALL_RUN,
    }
}

/// One fixed-width field of a layout table: its offset and its width in
/// bytes. The encoders write a field only through [`put`] and the parsers
/// read it only through [`get`], both from the same table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Offset from the start of the table's structure.
    pub at: usize,
    /// Width in bytes.
    pub width: usize,
}

impl Field {
    /// The first byte after the field.
    pub const fn end(self) -> usize {
        self.at + self.width
    }

    /// The field's byte range.
    pub const fn range(self) -> std::ops::Range<usize> {
        self.at..self.end()
    }
}

/// Whether `fields` are contiguous from offset 0 and end at `len`.
const fn tiles(fields: &[Field], len: usize) -> bool {
    let mut at = 0;
    let mut i = 0;
    while i < fields.len() {
        if fields[i].at != at || fields[i].width == 0 {
            return false;
        }
        at = fields[i].end();
        i += 1;
    }
    at == len
}

// The file header's layout (docs/FORMAT.md, "File header").
/// The magic.
pub const FH_MAGIC: Field = Field { at: 0, width: 8 };
/// The format version.
pub const FH_VERSION: Field = Field { at: 8, width: 2 };
/// The flags (policy).
pub const FH_FLAGS: Field = Field { at: 10, width: 2 };
/// The per-file checksum salt.
pub const FH_SALT: Field = Field { at: 12, width: 4 };
/// The session header JSON's length.
pub const FH_JSON_LEN: Field = Field { at: 16, width: 4 };
/// CRC-32 of the bytes before it, then the session header JSON.
pub const FH_CRC: Field = Field { at: 20, width: 4 };
/// The file header's fixed fields, in order.
pub const FILE_HEADER_FIELDS: [Field; 6] =
    [FH_MAGIC, FH_VERSION, FH_FLAGS, FH_SALT, FH_JSON_LEN, FH_CRC];
const _: () = assert!(tiles(&FILE_HEADER_FIELDS, FILE_HEADER_LEN));
const _: () = assert!(MAGIC.len() == FH_MAGIC.width);

// A record head's layout (docs/FORMAT.md, "Records").
/// CRC-32 of the salt, then every record byte after this field.
pub const REC_CRC_FIELD: Field = Field { at: 0, width: 4 };
/// The kind byte.
pub const REC_KIND_FIELD: Field = Field { at: 4, width: 1 };
/// The flags byte.
pub const REC_FLAGS_FIELD: Field = Field { at: 5, width: 1 };
/// The type name's length.
pub const REC_TYPE_LEN_FIELD: Field = Field { at: 6, width: 2 };
/// `data`'s length.
pub const REC_DATA_LEN_FIELD: Field = Field { at: 8, width: 4 };
/// `sourceEventSeqs`' length.
pub const REC_SOURCES_LEN_FIELD: Field = Field { at: 12, width: 4 };
/// `surfaceOp`'s length.
pub const REC_SURFACE_LEN_FIELD: Field = Field { at: 16, width: 4 };
/// The latest turn started.
pub const REC_TURN_FIELD: Field = Field { at: 20, width: 4 };
/// The seq.
pub const REC_SEQ_FIELD: Field = Field { at: 24, width: 8 };
/// The time, unix ms, signed.
pub const REC_TIME_FIELD: Field = Field { at: 32, width: 8 };
/// The durable length when written.
pub const REC_WATERMARK_FIELD: Field = Field { at: 40, width: 8 };
/// The open step.
pub const REC_STEP_FIELD: Field = Field { at: 48, width: 4 };
/// A record head's fields, in order.
pub const RECORD_HEAD_FIELDS: [Field; 12] = [
    REC_CRC_FIELD,
    REC_KIND_FIELD,
    REC_FLAGS_FIELD,
    REC_TYPE_LEN_FIELD,
    REC_DATA_LEN_FIELD,
    REC_SOURCES_LEN_FIELD,
    REC_SURFACE_LEN_FIELD,
    REC_TURN_FIELD,
    REC_SEQ_FIELD,
    REC_TIME_FIELD,
    REC_WATERMARK_FIELD,
    REC_STEP_FIELD,
];
const _: () = assert!(tiles(&RECORD_HEAD_FIELDS, RECORD_HEADER_LEN));

/// Writes `bytes` into `field` of `out` (panics if the widths differ).
pub(super) fn put<const N: usize>(out: &mut [u8], field: Field, bytes: [u8; N]) {
    out[field.range()].copy_from_slice(&bytes);
}

/// The bytes of `field` in `b` (panics if the widths differ).
fn get<const N: usize>(b: &[u8], field: Field) -> [u8; N] {
    b[field.range()].try_into().expect("field width")
}

fn u16_in(b: &[u8], field: Field) -> u16 {
    u16::from_le_bytes(get(b, field))
}

fn u32_in(b: &[u8], field: Field) -> u32 {
    u32::from_le_bytes(get(b, field))
}

fn u64_in(b: &[u8], field: Field) -> u64 {
    u64::from_le_bytes(get(b, field))
}

/// The kind byte of an event kind.
pub fn kind_byte(kind: EventKind) -> u8 {
    match kind {
        EventKind::TurnStart => 1,
        EventKind::TurnEnd => 2,
        EventKind::StepStart => 3,
        EventKind::StepEnd => 4,
        EventKind::UserMessage => 5,
        EventKind::AssistantChunk => 6,
        EventKind::AssistantMessage => 7,
        EventKind::ToolCall => 8,
        EventKind::ToolResult => 9,
        EventKind::EndSeed => 10,
        EventKind::TodoWrite => 11,
        EventKind::RequestHeader => 12,
        EventKind::RequestContext => 13,
        EventKind::Other => KIND_OTHER,
    }
}

/// The event kind of a kind byte; `None` for an invalid byte.
pub fn event_kind(byte: u8) -> Option<EventKind> {
    Some(match byte {
        1 => EventKind::TurnStart,
        2 => EventKind::TurnEnd,
        3 => EventKind::StepStart,
        4 => EventKind::StepEnd,
        5 => EventKind::UserMessage,
        6 => EventKind::AssistantChunk,
        7 => EventKind::AssistantMessage,
        8 => EventKind::ToolCall,
        9 => EventKind::ToolResult,
        10 => EventKind::EndSeed,
        11 => EventKind::TodoWrite,
        12 => EventKind::RequestHeader,
        13 => EventKind::RequestContext,
        KIND_OTHER => EventKind::Other,
        _ => return None,
    })
}

/// The decoded fixed part of a session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// The format version (1 or 2).
    pub version: u16,
    /// The session's policy.
    pub policy: Policy,
    /// The per-file checksum salt.
    pub salt: u32,
    /// The session header.
    pub header: SessionHeader,
    /// Where the first record starts (version 3: after the archive
    /// reference, if there is one).
    pub records_start: u64,
    /// Version 3: the archive this live file stands on, if any.
    pub archive: Option<ArchiveRef>,
}

/// What a version-3 live file's archive reference states (docs/FORMAT.md,
/// "The archive reference").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveRef {
    /// Events the archive holds (seqs `0..count`): the live file's first
    /// record has seq `count`.
    pub count: u64,
    /// The last turn the archive holds (closed).
    pub turn: u32,
    /// The time of the archive's last event.
    pub time: i64,
    /// The archive file's salt.
    pub salt: u32,
    /// The archive's length this live file stands on.
    pub len: u64,
    /// The live file's length when the seal published it (the reference's
    /// watermark): records below it were written with the file.
    pub published: u64,
}

impl ArchiveRef {
    /// Appends the reference record, with the live file's `salt` (its
    /// watermark is [`ArchiveRef::published`]).
    pub fn encode(&self, out: &mut Vec<u8>, salt: u32) {
        let watermark = self.published;
        let head = RecordHead {
            kind: KIND_ARCHIVE,
            flags: 0,
            type_len: 0,
            data_len: ARCHIVE_REF_DATA_LEN as u32,
            sources_len: 0,
            surface_len: 0,
            turn: self.turn,
            seq: self.count,
            time: self.time,
            watermark,
            step: 0,
        };
        let mut data = [0u8; ARCHIVE_REF_DATA_LEN];
        data[..4].copy_from_slice(&self.salt.to_le_bytes());
        data[8..].copy_from_slice(&self.len.to_le_bytes());
        // 52 + 16 + 4 bytes: `record_len` of a kind-19 head is ARCHIVE_REF_LEN.
        write_record(out, &head, &[&data], salt);
    }

    /// Reads the reference record at the start of `bytes` (a version-3
    /// file's first record, checksummed with the file's `salt`): `Ok(None)`
    /// when the first record is not one, an error when it is one that does
    /// not check.
    fn parse(bytes: &[u8], salt: u32) -> Result<Option<ArchiveRef>, String> {
        if bytes.len() <= REC_KIND_FIELD.at || bytes[REC_KIND_FIELD.at] != KIND_ARCHIVE {
            return Ok(None);
        }
        if bytes.len() < ARCHIVE_REF_LEN {
            return Err(format!(
                "archive reference truncated: {} of {ARCHIVE_REF_LEN} bytes",
                bytes.len()
            ));
        }
        let record = &bytes[..ARCHIVE_REF_LEN];
        if u32_in(record, trailer_field(ARCHIVE_REF_LEN)) != ARCHIVE_REF_LEN as u32 {
            return Err("archive reference trailer does not state its length".into());
        }
        if checksum(salt, &record[REC_CRC_FIELD.end()..]) != u32_in(record, REC_CRC_FIELD) {
            return Err("archive reference checksum mismatch".into());
        }
        let data = &record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + ARCHIVE_REF_DATA_LEN];
        let fixed = u8::from_le_bytes(get(record, REC_FLAGS_FIELD)) == 0
            && u16_in(record, REC_TYPE_LEN_FIELD) == 0
            && u32_in(record, REC_DATA_LEN_FIELD) == ARCHIVE_REF_DATA_LEN as u32
            && u32_in(record, REC_SOURCES_LEN_FIELD) == 0
            && u32_in(record, REC_SURFACE_LEN_FIELD) == 0
            && u32_in(record, REC_STEP_FIELD) == 0
            && data[4..8] == [0; 4];
        let reference = ArchiveRef {
            count: u64_in(record, REC_SEQ_FIELD),
            turn: u32_in(record, REC_TURN_FIELD),
            time: i64::from_le_bytes(get(record, REC_TIME_FIELD)),
            salt: u32::from_le_bytes(data[..4].try_into().expect("4 bytes")),
            len: u64::from_le_bytes(data[8..].try_into().expect("8 bytes")),
            published: u64_in(record, REC_WATERMARK_FIELD),
        };
        if !fixed
            || reference.count == 0
            || reference.count > crate::event::MAX_SAFE_INTEGER
            || reference.turn == 0
        {
            return Err("archive reference with fields out of range".into());
        }
        Ok(Some(reference))
    }
}

/// Why a file header cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileHeaderError {
    /// Too short, bad magic, bad checksum, bad JSON: the file is corrupt.
    Corrupt(String),
    /// A turnwal format of another version.
    Unsupported(String),
}

/// Encodes the file header for a new session file, in [`FORMAT_VERSION`].
pub fn encode_file_header(out: &mut Vec<u8>, header: &SessionHeader, policy: Policy, salt: u32) {
    encode_file_header_version(out, header, policy, salt, FORMAT_VERSION);
}

/// Encodes a file header of format `version` (1, 2 or 3).
pub fn encode_file_header_version(
    out: &mut Vec<u8>,
    header: &SessionHeader,
    policy: Policy,
    salt: u32,
    version: u16,
) {
    debug_assert!(version == FORMAT_V1 || version == FORMAT_V2 || version == FORMAT_V3);
    let json = header.to_json();
    let flags: u16 = match policy {
        Policy::Strict => 0,
        Policy::Lenient => FLAG_LENIENT,
        Policy::Permissive => FLAG_PERMISSIVE,
    };
    let mut fixed = [0; FILE_HEADER_LEN];
    put(&mut fixed, FH_MAGIC, MAGIC);
    put(&mut fixed, FH_VERSION, version.to_le_bytes());
    put(&mut fixed, FH_FLAGS, flags.to_le_bytes());
    put(&mut fixed, FH_SALT, salt.to_le_bytes());
    put(&mut fixed, FH_JSON_LEN, (json.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&fixed[..FH_CRC.at]);
    crc.update(json.as_bytes());
    put(&mut fixed, FH_CRC, crc.finalize().to_le_bytes());
    out.extend_from_slice(&fixed);
    out.extend_from_slice(json.as_bytes());
}

/// The salt of a file whose first 24 bytes are `fixed`, if they start with
/// the magic (the rest of the header unchecked).
pub fn decode_salt(fixed: &[u8]) -> Option<u32> {
    (fixed.len() >= FILE_HEADER_LEN && fixed[FH_MAGIC.range()] == MAGIC)
        .then(|| u32_in(fixed, FH_SALT))
}

/// How many bytes the file header occupies, read from its first 24 bytes
/// (or `None` if those do not even hold a plausible length).
pub fn file_header_len(prefix: &[u8]) -> Option<u64> {
    if prefix.len() < FILE_HEADER_LEN || prefix[FH_MAGIC.range()] != MAGIC {
        return None;
    }
    let json_len = u32_in(prefix, FH_JSON_LEN);
    (json_len <= MAX_HEADER_JSON).then_some(FILE_HEADER_LEN as u64 + u64::from(json_len))
}

/// Decodes and validates the file header at the start of `bytes`.
pub fn decode_file_header(bytes: &[u8]) -> Result<FileHeader, FileHeaderError> {
    let corrupt = |m: String| Err(FileHeaderError::Corrupt(m));
    if bytes.len() < FILE_HEADER_LEN {
        return corrupt(format!(
            "file header truncated: {} of {FILE_HEADER_LEN} bytes",
            bytes.len()
        ));
    }
    if bytes[FH_MAGIC.range()] != MAGIC {
        return corrupt("not a turnwal session file (bad magic)".into());
    }
    let version = u16_in(bytes, FH_VERSION);
    if version != FORMAT_V1 && version != FORMAT_V2 && version != FORMAT_V3 {
        let side = if version > FORMAT_V3 {
            "a newer turnwal; upgrade turnwal to open it"
        } else {
            "an older turnwal, and this build ships no upgrade path for it"
        };
        return Err(FileHeaderError::Unsupported(format!(
            "session file format v{version} was written by {side} (this build reads v{FORMAT_V1} to v{FORMAT_V3})"
        )));
    }
    let flags = u16_in(bytes, FH_FLAGS);
    if flags & !(FLAG_LENIENT | FLAG_PERMISSIVE) != 0 || flags == FLAG_LENIENT | FLAG_PERMISSIVE {
        return corrupt(format!(
            "file header has reserved flag bits set ({flags:#06x})"
        ));
    }
    let salt = u32_in(bytes, FH_SALT);
    let json_len = u32_in(bytes, FH_JSON_LEN);
    if !(2..=MAX_HEADER_JSON).contains(&json_len) {
        return corrupt(format!("session header length {json_len} is out of range"));
    }
    let end = FILE_HEADER_LEN + json_len as usize;
    if bytes.len() < end {
        return corrupt(format!(
            "file header truncated: {} of {end} bytes",
            bytes.len()
        ));
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[..FH_CRC.at]);
    crc.update(&bytes[FILE_HEADER_LEN..end]);
    if crc.finalize() != u32_in(bytes, FH_CRC) {
        return corrupt("file header checksum mismatch".into());
    }
    let json = std::str::from_utf8(&bytes[FILE_HEADER_LEN..end])
        .map_err(|_| FileHeaderError::Corrupt("session header is not UTF-8".into()))?;
    let header = match SessionHeader::from_stored_json(json) {
        Ok(h) => h,
        Err(StoredHeaderError::Foreign(v)) => {
            return Err(FileHeaderError::Unsupported(v.to_string()));
        }
        Err(StoredHeaderError::Invalid(e)) => {
            return corrupt(format!("invalid session header: {e}"));
        }
    };
    let policy = match flags {
        FLAG_LENIENT => Policy::Lenient,
        FLAG_PERMISSIVE => Policy::Permissive,
        _ => Policy::Strict,
    };
    let archive = if version == FORMAT_V3 {
        ArchiveRef::parse(&bytes[end..], salt).map_err(FileHeaderError::Corrupt)?
    } else {
        None
    };
    let records_start = end as u64 + archive.map_or(0, |_| ARCHIVE_REF_LEN as u64);
    Ok(FileHeader {
        version,
        policy,
        salt,
        header,
        records_start,
        archive,
    })
}

/// Why bytes are not a valid record or sealed unit: the rule broken and
/// the words for people. The WAL's readers turn it into a
/// [`crate::error::Corruption`] (or a cut's detail) at their boundary,
/// where the path, offset and seq are known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Malformed {
    /// The rule broken.
    pub rule: RecordRule,
    /// What was found.
    pub detail: String,
}

impl Malformed {
    /// A refusal under `rule`.
    pub fn new(rule: RecordRule, detail: impl Into<String>) -> Malformed {
        Malformed {
            rule,
            detail: detail.into(),
        }
    }
}

/// The rules of docs/FORMAT.md a record can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordRule {
    /// A head field out of range, or a kind that does not exist ("Records").
    Framing,
    /// The trailer does not state the record's length.
    Trailer,
    /// The checksum does not match.
    Checksum,
    /// The payload is not an event's (not UTF-8, a kind-14 record naming a
    /// known type, an invalid type name, seq or time).
    Payload,
    /// A chunk-run record whose payload is not the run its head states
    /// (`chunk-run-mismatch`, "Chunk-run records").
    ChunkRun,
    /// A sealed unit that is not what its head states ("Sealed units").
    SealedUnit,
    /// A sealed unit's frame inflates to another length than its head
    /// states (`sealed-unit-length`).
    SealedUnitLength,
}

/// The fixed fields of one record, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHead {
    /// Kind byte.
    pub kind: u8,
    /// Flags byte.
    pub flags: u8,
    /// Type name length.
    pub type_len: u16,
    /// `data` length.
    pub data_len: u32,
    /// `sourceEventSeqs` length.
    pub sources_len: u32,
    /// `surfaceOp` length.
    pub surface_len: u32,
    /// Latest turn started.
    pub turn: u32,
    /// Seq.
    pub seq: u64,
    /// Time.
    pub time: i64,
    /// Durable length when written.
    pub watermark: u64,
    /// Open step.
    pub step: u32,
}

impl RecordHead {
    /// The record's total length. A chunk-run record's `type_len` is its
    /// member count, not payload bytes.
    pub fn record_len(&self) -> u64 {
        if self.is_sealed() {
            return (RECORD_HEADER_LEN + TRAILER_LEN) as u64 + u64::from(self.data_len);
        }
        let type_len = if self.is_run() { 0 } else { self.type_len };
        (RECORD_HEADER_LEN + TRAILER_LEN) as u64
            + u64::from(type_len)
            + u64::from(self.data_len)
            + u64::from(self.sources_len)
            + u64::from(self.surface_len)
    }

    /// Whether this is a sealed unit (kind 18, version 2).
    pub fn is_sealed(&self) -> bool {
        self.kind == KIND_SEALED
    }

    /// A sealed unit's `plain_len`: what its frame decompresses to.
    pub fn plain_len(&self) -> u32 {
        self.sources_len
    }

    /// Whether the record is of version 2 only (a chunk run or a sealed
    /// unit).
    pub fn is_v2(&self) -> bool {
        self.is_run() || self.is_sealed()
    }

    /// Whether this is a chunk-run record (kinds 15–17, version 2).
    pub fn is_run(&self) -> bool {
        run_kind(self.kind).is_some()
    }

    /// How many events the record holds: 1, or a run's member count.
    pub fn count(&self) -> u64 {
        if self.is_run() {
            u64::from(self.type_len)
        } else if self.is_sealed() {
            u64::from(self.surface_len)
        } else {
            1
        }
    }

    /// The seq of the record's last event.
    pub fn last_seq(&self) -> u64 {
        self.seq + self.count() - 1
    }

    /// The seq the next record must have.
    pub fn next_seq(&self) -> u64 {
        self.seq + self.count()
    }

    /// The event kind (of every member, for a run).
    pub fn event_kind(&self) -> EventKind {
        if self.is_run() {
            return EventKind::AssistantChunk;
        }
        if self.is_sealed() {
            // Every unit ends with the turn/end that closes its last turn.
            return EventKind::TurnEnd;
        }
        event_kind(self.kind).expect("checked by parse_head")
    }

    /// Whether a turn is open after this record.
    pub fn in_turn(&self) -> bool {
        self.flags & REC_IN_TURN != 0
    }

    /// Whether the event carries `ignorable: true`.
    pub fn ignorable(&self) -> bool {
        self.flags & REC_IGNORABLE != 0
    }

    /// Whether `surfaceOp` is written before `sourceEventSeqs`.
    pub fn surface_op_first(&self) -> bool {
        self.flags & REC_SURFACE_FIRST != 0
    }

    /// Whether recovery wrote this record (a synthetic closer).
    pub fn synthetic(&self) -> bool {
        self.flags & REC_SYNTHETIC != 0
    }

    /// The tracker placement stored in this record.
    pub fn placement(&self) -> Placement {
        Placement {
            turn: self.turn,
            step: self.step,
            in_turn: self.in_turn(),
        }
    }
}

impl RecordHead {
    /// The head's bytes as [`RECORD_HEAD_FIELDS`] lay them out, the
    /// checksum field zero: the one place a head is encoded (parsing is
    /// [`parse_head`]).
    pub fn to_bytes(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut b = [0; RECORD_HEADER_LEN];
        put(&mut b, REC_KIND_FIELD, [self.kind]);
        put(&mut b, REC_FLAGS_FIELD, [self.flags]);
        put(&mut b, REC_TYPE_LEN_FIELD, self.type_len.to_le_bytes());
        put(&mut b, REC_DATA_LEN_FIELD, self.data_len.to_le_bytes());
        put(
            &mut b,
            REC_SOURCES_LEN_FIELD,
            self.sources_len.to_le_bytes(),
        );
        put(
            &mut b,
            REC_SURFACE_LEN_FIELD,
            self.surface_len.to_le_bytes(),
        );
        put(&mut b, REC_TURN_FIELD, self.turn.to_le_bytes());
        put(&mut b, REC_SEQ_FIELD, self.seq.to_le_bytes());
        put(&mut b, REC_TIME_FIELD, self.time.to_le_bytes());
        put(&mut b, REC_WATERMARK_FIELD, self.watermark.to_le_bytes());
        put(&mut b, REC_STEP_FIELD, self.step.to_le_bytes());
        b
    }

    /// Whether this record, after `before` (the record preceding it), is a
    /// commit point: a `turn/end` that leaves no turn open after a record
    /// inside the same turn at step 0 — or a sealed unit, which holds only
    /// closed turns. The one statement of the rule (docs/FORMAT.md,
    /// "Commit point"); every reader and the writer ask it here.
    pub fn commits_after(&self, before: Option<&RecordHead>) -> bool {
        self.is_sealed() || self.closes_turn_after(before)
    }

    /// [`RecordHead::commits_after`] for a plain record: a `turn/end`
    /// closing the turn `before` left open at step 0.
    pub fn closes_turn_after(&self, before: Option<&RecordHead>) -> bool {
        !self.is_sealed()
            && self.event_kind() == EventKind::TurnEnd
            && !self.in_turn()
            && before.is_some_and(|p| p.in_turn() && p.step == 0 && p.turn == self.turn)
    }
}

/// Appends one record: `head` (its lengths must be the payload pieces'),
/// the `payload` pieces in order, the trailer, and the checksum with
/// `salt`, computed once the rest of the record is in.
pub(super) fn write_record(out: &mut Vec<u8>, head: &RecordHead, payload: &[&[u8]], salt: u32) {
    let record_len = head.record_len() as usize;
    let start = out.len();
    out.reserve(record_len);
    out.extend_from_slice(&head.to_bytes());
    for piece in payload {
        out.extend_from_slice(piece);
    }
    out.extend_from_slice(&(record_len as u32).to_le_bytes());
    let record = &mut out[start..];
    assert_eq!(record.len(), record_len, "the head states its payload");
    let crc = checksum(salt, &record[REC_CRC_FIELD.end()..]);
    put(record, REC_CRC_FIELD, crc.to_le_bytes());
}

/// Rewrites a whole record's watermark and recomputes its checksum with
/// `salt` (a copy into a published file).
pub(super) fn restamp(record: &mut [u8], watermark: u64, salt: u32) {
    put(record, REC_WATERMARK_FIELD, watermark.to_le_bytes());
    let crc = checksum(salt, &record[REC_CRC_FIELD.end()..]);
    put(record, REC_CRC_FIELD, crc.to_le_bytes());
}

/// The fewest bytes of plain records any one event of a sealed unit takes:
/// a single-event record is at least [`MIN_RECORD_LEN`] bytes, and a chunk
/// run of `n` members at least `56 + 5n` (its packed row holds `n` texts of
/// at least `""` and `n − 1` time deltas of at least one digit, with their
/// commas). So a unit states at most `plain_len / 4` events; a count past
/// that is a lie the head itself gives away, refused before anything is
/// sized from it.
pub const MIN_PLAIN_BYTES_PER_EVENT: u32 = 4;

/// Parses a record header and checks the framing fields (kind, flags,
/// lengths) and the seqs it claims (every one a safe integer; a sealed
/// unit's count within what its plain length can hold). `bytes` must hold
/// at least [`RECORD_HEADER_LEN`] bytes.
pub fn parse_head(bytes: &[u8]) -> Result<RecordHead, Malformed> {
    let head = parse_framing(bytes)?;
    if head.is_sealed() && head.surface_len > head.sources_len / MIN_PLAIN_BYTES_PER_EVENT {
        return Err(Malformed::new(
            RecordRule::SealedUnit,
            format!(
                "sealed unit states {} events, more than its {} plain bytes can hold",
                head.surface_len, head.sources_len
            ),
        ));
    }
    // count >= 1 for every kind (a unit of none is refused above).
    let last = head.seq.checked_add(head.count() - 1);
    if last.is_none_or(|last| last > crate::event::MAX_SAFE_INTEGER) {
        return Err(Malformed::new(
            RecordRule::Framing,
            format!(
                "record seqs {}..{} pass the largest safe integer",
                head.seq,
                head.seq.saturating_add(head.count())
            ),
        ));
    }
    Ok(head)
}

/// [`parse_head`]'s framing checks.
fn parse_framing(bytes: &[u8]) -> Result<RecordHead, Malformed> {
    let head = RecordHead {
        kind: u8::from_le_bytes(get(bytes, REC_KIND_FIELD)),
        flags: u8::from_le_bytes(get(bytes, REC_FLAGS_FIELD)),
        type_len: u16_in(bytes, REC_TYPE_LEN_FIELD),
        data_len: u32_in(bytes, REC_DATA_LEN_FIELD),
        sources_len: u32_in(bytes, REC_SOURCES_LEN_FIELD),
        surface_len: u32_in(bytes, REC_SURFACE_LEN_FIELD),
        turn: u32_in(bytes, REC_TURN_FIELD),
        seq: u64_in(bytes, REC_SEQ_FIELD),
        time: i64::from_le_bytes(get(bytes, REC_TIME_FIELD)),
        watermark: u64_in(bytes, REC_WATERMARK_FIELD),
        step: u32_in(bytes, REC_STEP_FIELD),
    };
    if head.kind == KIND_SEALED {
        if head.flags != 0 || head.type_len != 0 || head.step != 0 {
            return Err(Malformed::new(
                RecordRule::SealedUnit,
                "sealed unit with flags, a type length or a step",
            ));
        }
        if head.data_len == 0 || head.data_len > MAX_UNIT_LEN {
            return Err(Malformed::new(
                RecordRule::SealedUnit,
                format!("sealed unit frame length {} is out of range", head.data_len),
            ));
        }
        if !(MIN_RECORD_LEN as u32..=MAX_UNIT_LEN).contains(&head.sources_len) {
            return Err(Malformed::new(
                RecordRule::SealedUnit,
                format!(
                    "sealed unit plain length {} is out of range",
                    head.sources_len
                ),
            ));
        }
        if head.surface_len == 0 {
            return Err(Malformed::new(
                RecordRule::SealedUnit,
                "sealed unit of no events",
            ));
        }
        return Ok(head);
    }
    if run_kind(head.kind).is_some() {
        if head.flags & !REC_IN_TURN != 0 {
            return Err(Malformed::new(
                RecordRule::ChunkRun,
                format!(
                    "chunk-run record flags {:#04x} other than the in-turn bit",
                    head.flags
                ),
            ));
        }
        if !(MIN_RUN_MEMBERS..=MAX_RUN_MEMBERS).contains(&head.type_len) {
            return Err(Malformed::new(
                RecordRule::ChunkRun,
                format!("chunk-run member count {} is out of range", head.type_len),
            ));
        }
        if head.data_len == 0 || head.data_len > MAX_RUN_DATA_LEN {
            return Err(Malformed::new(
                RecordRule::ChunkRun,
                format!("chunk-run data length {} is out of range", head.data_len),
            ));
        }
        if head.sources_len != 0 || head.surface_len != 0 {
            return Err(Malformed::new(
                RecordRule::ChunkRun,
                "chunk-run record with sourceEventSeqs or surfaceOp",
            ));
        }
        return Ok(head);
    }
    if event_kind(head.kind).is_none() {
        return Err(Malformed::new(
            RecordRule::Framing,
            format!("invalid record kind {}", head.kind),
        ));
    }
    if head.flags & REC_RESERVED != 0 {
        return Err(Malformed::new(
            RecordRule::Framing,
            format!("reserved record flag bits set ({:#04x})", head.flags),
        ));
    }
    if (head.type_len != 0) != (head.kind == KIND_OTHER) {
        return Err(Malformed::new(
            RecordRule::Framing,
            format!(
                "type length {} does not fit record kind {}",
                head.type_len, head.kind
            ),
        ));
    }
    if head.data_len == 0 || head.data_len > MAX_DATA_LEN {
        return Err(Malformed::new(
            RecordRule::Framing,
            format!("data length {} is out of range", head.data_len),
        ));
    }
    if head.sources_len > MAX_EXTRA_LEN || head.surface_len > MAX_EXTRA_LEN {
        return Err(Malformed::new(
            RecordRule::Framing,
            "sourceEventSeqs or surfaceOp length out of range",
        ));
    }
    Ok(head)
}

/// Checks a whole record (`record` spans exactly `head.record_len()` bytes):
/// trailer and checksum.
pub fn check_record(record: &[u8], head: &RecordHead, salt: u32) -> Result<(), Malformed> {
    let len = record.len();
    let trailer = u32_in(record, trailer_field(len));
    if u64::from(trailer) != head.record_len() {
        return Err(Malformed::new(
            RecordRule::Trailer,
            format!("record trailer {trailer} does not match its length {len}"),
        ));
    }
    let stored = u32_in(record, REC_CRC_FIELD);
    if checksum(salt, &record[REC_CRC_FIELD.end()..]) != stored {
        return Err(Malformed::new(
            RecordRule::Checksum,
            "record checksum mismatch",
        ));
    }
    Ok(())
}

pub(super) fn checksum(salt: u32, body: &[u8]) -> u32 {
    let mut crc = salted(salt);
    crc.update(body);
    crc.finalize()
}

/// A hasher that has already taken `salt`'s four bytes. A scan checks every
/// record of one file with the same salt, so the state after the salt is
/// remembered (one entry, shared by all threads) instead of recomputed for
/// every record: a short `update` costs as much as a record's header.
fn salted(salt: u32) -> crc32fast::Hasher {
    use std::sync::atomic::{AtomicU64, Ordering};
    // (salt << 32) | state. u64::MAX marks the empty cache; a real entry
    // equal to it is merely recomputed every time.
    static LAST: AtomicU64 = AtomicU64::new(u64::MAX);
    let last = LAST.load(Ordering::Relaxed);
    let state = if (last >> 32) as u32 == salt && last != u64::MAX {
        last as u32
    } else {
        let state = crc32fast::hash(&salt.to_le_bytes());
        LAST.store(
            (u64::from(salt) << 32) | u64::from(state),
            Ordering::Relaxed,
        );
        state
    };
    crc32fast::Hasher::new_with_initial(state)
}

/// The size of `event`'s record.
pub fn encoded_len(event: &Event) -> usize {
    let type_len = if event.kind() == EventKind::Other {
        event.event_type().len()
    } else {
        0
    };
    RECORD_HEADER_LEN
        + type_len
        + event.data().get().len()
        + event.source_event_seqs().map_or(0, |r| r.get().len())
        + event.surface_op().map_or(0, |r| r.get().len())
        + TRAILER_LEN
}

/// Appends one record for `event` to `out`.
pub fn encode_record(
    out: &mut Vec<u8>,
    event: &Event,
    placement: Placement,
    watermark: u64,
    salt: u32,
) {
    encode(out, event, placement, watermark, salt, false);
}

/// Appends one record for a synthetic closer written by recovery.
pub fn encode_synthetic_record(
    out: &mut Vec<u8>,
    event: &Event,
    placement: Placement,
    watermark: u64,
    salt: u32,
) {
    encode(out, event, placement, watermark, salt, true);
}

fn encode(
    out: &mut Vec<u8>,
    event: &Event,
    placement: Placement,
    watermark: u64,
    salt: u32,
    synthetic: bool,
) {
    let kind = event.kind();
    let type_name: &[u8] = if kind == EventKind::Other {
        event.event_type().as_bytes()
    } else {
        b""
    };
    let data = event.data().get().as_bytes();
    let sources = event
        .source_event_seqs()
        .map_or(&b""[..], |r| r.get().as_bytes());
    let surface = event.surface_op().map_or(&b""[..], |r| r.get().as_bytes());
    let mut flags = 0u8;
    if event.ignorable() {
        flags |= REC_IGNORABLE;
    }
    if event.surface_op_first() {
        flags |= REC_SURFACE_FIRST;
    }
    if placement.in_turn {
        flags |= REC_IN_TURN;
    }
    if synthetic {
        flags |= REC_SYNTHETIC;
    }
    let head = RecordHead {
        kind: kind_byte(kind),
        flags,
        type_len: type_name.len() as u16,
        data_len: data.len() as u32,
        sources_len: sources.len() as u32,
        surface_len: surface.len() as u32,
        turn: placement.turn,
        seq: event.seq(),
        time: event.time(),
        watermark,
        step: placement.step,
    };
    write_record(out, &head, &[type_name, data, sources, surface], salt);
}

/// Appends one chunk-run record (kinds 15–17) for the packed `run`, whose
/// members all have `placement` (docs/FORMAT.md, "Chunk-run records").
pub(crate) fn encode_run_record(
    out: &mut Vec<u8>,
    run: &[Delta],
    placement: Placement,
    watermark: u64,
    salt: u32,
) {
    let first = &run[0];
    let data = packed_json(run);
    let head = RecordHead {
        kind: run_kind_byte(first.kind),
        flags: if placement.in_turn { REC_IN_TURN } else { 0 },
        type_len: run.len() as u16,
        data_len: data.len() as u32,
        sources_len: 0,
        surface_len: 0,
        turn: placement.turn,
        seq: first.seq,
        time: first.time,
        watermark,
        step: placement.step,
    };
    write_record(out, &head, &[data.as_bytes()], salt);
}

/// What [`encode_batch`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// How many records.
    pub records: usize,
    /// The end (relative to where the batch's records start) of its last
    /// `turn/end` record that leaves no turn open: where the batch moves
    /// the commit point to, if anywhere. Learned while encoding, so the
    /// writer never parses the batch's records again to find it.
    pub closing_end: Option<u64>,
}

impl Encoded {
    fn note(&mut self, event: &Event, placement: Placement, start: usize, out: &[u8]) {
        self.records += 1;
        if event.kind() == EventKind::TurnEnd && !placement.in_turn {
            self.closing_end = Some((out.len() - start) as u64);
        }
    }
}

/// Stamps every record of a file about to be published whole
/// (materialization, a compaction's or a seal's rewrite) with the file's
/// length as its watermark, and recomputes each checksum with `salt`. The
/// file is written and fsynced whole before its name points at it, so
/// every byte of it is durable before anyone can read it, and each record
/// says so: damage anywhere below that length is acknowledged data, never
/// a tear, whatever the durability proof beside it says (docs/FORMAT.md,
/// "Published files"). `file` holds the file header and whole records.
pub fn stamp_published(file: &mut [u8], records_start: usize, salt: u32) {
    let len = file.len() as u64;
    let mut at = records_start;
    while at < file.len() {
        let head = parse_head(&file[at..at + RECORD_HEADER_LEN]).expect("a record just encoded");
        let end = at + head.record_len() as usize;
        restamp(&mut file[at..end], len, salt);
        at = end;
    }
    debug_assert_eq!(at, file.len(), "whole records");
}

/// Appends the records of one append batch: in version 2 (`pack`), the
/// runs upstream packs ([`plan_batch`], the SQLite packer's decision) are
/// chunk-run records, everything else one record per event; in version 1
/// one record per event.
pub fn encode_batch(
    out: &mut Vec<u8>,
    batch: &[Event],
    placements: &[Placement],
    watermark: u64,
    salt: u32,
    pack: bool,
) -> Encoded {
    if !pack {
        let start = out.len();
        let mut encoded = Encoded {
            records: 0,
            closing_end: None,
        };
        for (event, placement) in batch.iter().zip(placements) {
            encode_record(out, event, *placement, watermark, salt);
            encoded.note(event, *placement, start, out);
        }
        return encoded;
    }
    encode_packed(out, batch, placements, None, watermark, salt)
}

/// [`encode_batch`], packed, of events some of which are synthetic closers
/// (`synthetic[i]`; a closer is never a chunk, so never in a run): how a
/// sealed copy re-encodes closed turns.
pub fn encode_batch_marked(
    out: &mut Vec<u8>,
    batch: &[Event],
    placements: &[Placement],
    synthetic: &[bool],
    watermark: u64,
    salt: u32,
) -> Encoded {
    encode_packed(out, batch, placements, Some(synthetic), watermark, salt)
}

fn encode_packed(
    out: &mut Vec<u8>,
    batch: &[Event],
    placements: &[Placement],
    synthetic: Option<&[bool]>,
    watermark: u64,
    salt: u32,
) -> Encoded {
    let start = out.len();
    let mut encoded = Encoded {
        records: 0,
        closing_end: None,
    };
    let one = |out: &mut Vec<u8>, encoded: &mut Encoded, i: usize| {
        let marked = synthetic.is_some_and(|s| s[i]);
        encode(out, &batch[i], placements[i], watermark, salt, marked);
        encoded.note(&batch[i], placements[i], start, out);
    };
    for piece in plan_batch(batch.iter().map(EventRef::from)) {
        match piece {
            Piece::One(i) => one(out, &mut encoded, i),
            Piece::Run {
                start: first,
                deltas,
            } => {
                let members = &placements[first..first + deltas.len()];
                // A chunk leaves the tracker where it was, so a run's members
                // share one placement; if they ever did not, store them alone.
                if members.iter().all(|p| *p == members[0]) {
                    encode_run_record(out, &deltas, members[0], watermark, salt);
                    // A run holds no `turn/end`: it moves no commit point.
                    encoded.records += 1;
                } else {
                    for i in first..first + deltas.len() {
                        one(out, &mut encoded, i);
                    }
                }
            }
        }
    }
    encoded
}

/// The trailer of a record `record_len` bytes long: its last
/// [`TRAILER_LEN`] bytes, the record's length.
pub const fn trailer_field(record_len: usize) -> Field {
    Field {
        at: record_len - TRAILER_LEN,
        width: TRAILER_LEN,
    }
}

/// Decodes a checked record back into its event.
pub fn decode_record(record: &[u8], head: &RecordHead) -> Result<Event, Malformed> {
    let mut at = RECORD_HEADER_LEN;
    let mut take = |len: usize| {
        let s = &record[at..at + len];
        at += len;
        simdutf8::basic::from_utf8(s)
            .map_err(|_| Malformed::new(RecordRule::Payload, "record payload is not UTF-8"))
    };
    let type_name = take(head.type_len as usize)?;
    let data = take(head.data_len as usize)?;
    let sources = take(head.sources_len as usize)?;
    let surface = take(head.surface_len as usize)?;
    let kind = head.event_kind();
    let name = match kind.name() {
        Some(name) => name,
        None if EventKind::of(type_name) == EventKind::Other => type_name,
        None => {
            return Err(Malformed::new(
                RecordRule::Payload,
                format!("record kind 14 names the known type {type_name:?}"),
            ));
        }
    };
    let mut event = Event::from_parts(name, head.seq, head.time, RawJson::trusted(data))
        .map_err(|e| Malformed::new(RecordRule::Payload, e.reason))?;
    let extra = |s: &str| (!s.is_empty()).then(|| RawJson::trusted(s));
    event.set_extras(
        head.flags & REC_IGNORABLE != 0,
        extra(sources),
        extra(surface),
        head.flags & REC_SURFACE_FIRST != 0,
    );
    Ok(event)
}

/// Decodes a checked plain record (not a sealed unit: see
/// `record::decode_records`) back into its events: one, or a chunk-run
/// record's members (refused as `chunk-run-mismatch` when its payload does
/// not expand into exactly the member count its head states).
pub fn decode_plain_records(record: &[u8], head: &RecordHead) -> Result<Vec<Event>, Malformed> {
    if head.is_sealed() {
        return Err(Malformed::new(
            RecordRule::SealedUnit,
            "a sealed unit is not a plain record (read it with record::decode_records)",
        ));
    }
    let Some(kind) = run_kind(head.kind) else {
        return decode_record(record, head).map(|e| vec![e]);
    };
    let data = &record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + head.data_len as usize];
    let data = simdutf8::basic::from_utf8(data).map_err(|_| {
        Malformed::new(
            RecordRule::ChunkRun,
            "chunk-run-mismatch: record payload is not UTF-8",
        )
    })?;
    let events = expand_run(kind, head.seq, head.time, data).map_err(|e| {
        Malformed::new(
            RecordRule::ChunkRun,
            format!("chunk-run-mismatch: the packed run does not expand: {e}"),
        )
    })?;
    if events.len() as u64 != head.count() {
        return Err(Malformed::new(
            RecordRule::ChunkRun,
            format!(
                "chunk-run-mismatch: the packed run holds {} members, its head states {}",
                events.len(),
                head.count()
            ),
        ));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let event = Event::new("plugin/x", 3, -5, r#"{"a":"\ud800"}"#)
            .unwrap()
            .with_ignorable();
        let mut out = Vec::new();
        let placement = Placement {
            turn: 2,
            step: 1,
            in_turn: true,
        };
        encode_record(&mut out, &event, placement, 77, 0xdead_beef);
        let head = parse_head(&out).unwrap();
        assert_eq!(head.record_len() as usize, out.len());
        assert_eq!(
            (head.seq, head.time, head.watermark, head.placement()),
            (3, -5, 77, placement)
        );
        check_record(&out, &head, 0xdead_beef).unwrap();
        assert!(
            check_record(&out, &head, 1).is_err(),
            "another file's salt never validates"
        );
        assert_eq!(decode_record(&out, &head).unwrap(), event);
    }

    /// Each field sits at its table offset, with the value the encoder was
    /// given, and the table matches docs/FORMAT.md's numbers.
    #[test]
    fn record_fields_sit_at_their_table_offsets() {
        let event = Event::new("plugin/x", 0x0102_0304_0506, -7, r#"{"k":1}"#)
            .unwrap()
            .with_ignorable();
        let placement = Placement {
            turn: 0x0a0b_0c0d,
            step: 0x1112_1314,
            in_turn: true,
        };
        let watermark = 0x2122_2324_2526_2728;
        let salt = 0x3132_3334;
        let mut out = vec![0xee; 3]; // appended after earlier bytes
        encode_record(&mut out, &event, placement, watermark, salt);
        let record = &out[3..];
        assert_eq!(record.len(), encoded_len(&event));
        let field = |f: Field| &record[f.at..f.at + f.width];
        let type_name = b"plugin/x";
        let data = br#"{"k":1}"#;
        let len = RECORD_HEADER_LEN + type_name.len() + data.len() + TRAILER_LEN;
        assert_eq!(record.len(), len);
        assert_eq!(field(REC_KIND_FIELD), [KIND_OTHER]);
        assert_eq!(field(REC_FLAGS_FIELD), [REC_IGNORABLE | REC_IN_TURN]);
        assert_eq!(field(REC_TYPE_LEN_FIELD), 8u16.to_le_bytes());
        assert_eq!(field(REC_DATA_LEN_FIELD), 7u32.to_le_bytes());
        assert_eq!(field(REC_SOURCES_LEN_FIELD), 0u32.to_le_bytes());
        assert_eq!(field(REC_SURFACE_LEN_FIELD), 0u32.to_le_bytes());
        assert_eq!(field(REC_TURN_FIELD), placement.turn.to_le_bytes());
        assert_eq!(field(REC_SEQ_FIELD), 0x0102_0304_0506u64.to_le_bytes());
        assert_eq!(field(REC_TIME_FIELD), (-7i64).to_le_bytes());
        assert_eq!(field(REC_WATERMARK_FIELD), watermark.to_le_bytes());
        assert_eq!(field(REC_STEP_FIELD), placement.step.to_le_bytes());
        let payload = &record[RECORD_HEADER_LEN..len - TRAILER_LEN];
        assert_eq!(payload, [&type_name[..], &data[..]].concat());
        assert_eq!(
            field(trailer_field(len)),
            (len as u32).to_le_bytes(),
            "the trailer is the record's last bytes"
        );
        let mut crc = crc32fast::Hasher::new();
        crc.update(&salt.to_le_bytes());
        crc.update(&record[4..]);
        assert_eq!(field(REC_CRC_FIELD), crc.finalize().to_le_bytes());
        // docs/FORMAT.md, "Records": offset and size of every field.
        let documented = [
            (0, 4),
            (4, 1),
            (5, 1),
            (6, 2),
            (8, 4),
            (12, 4),
            (16, 4),
            (20, 4),
            (24, 8),
            (32, 8),
            (40, 8),
            (48, 4),
        ];
        let table: Vec<_> = RECORD_HEAD_FIELDS.iter().map(|f| (f.at, f.width)).collect();
        assert_eq!(table, documented);
    }

    /// The same for the file header's fixed fields.
    #[test]
    fn file_header_fields_sit_at_their_table_offsets() {
        let header = SessionHeader::new("s", 9);
        let json = header.to_json();
        let mut out = Vec::new();
        encode_file_header(&mut out, &header, Policy::Lenient, 0x4142_4344);
        let field = |f: Field| &out[f.at..f.at + f.width];
        assert_eq!(field(FH_MAGIC), MAGIC);
        assert_eq!(field(FH_VERSION), FORMAT_VERSION.to_le_bytes());
        assert_eq!(field(FH_FLAGS), FLAG_LENIENT.to_le_bytes());
        assert_eq!(field(FH_SALT), 0x4142_4344u32.to_le_bytes());
        assert_eq!(field(FH_JSON_LEN), (json.len() as u32).to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&out[..20]);
        crc.update(json.as_bytes());
        assert_eq!(field(FH_CRC), crc.finalize().to_le_bytes());
        assert_eq!(&out[FILE_HEADER_LEN..], json.as_bytes());
        let documented = [(0, 8), (8, 2), (10, 2), (12, 4), (16, 4), (20, 4)];
        let table: Vec<_> = FILE_HEADER_FIELDS.iter().map(|f| (f.at, f.width)).collect();
        assert_eq!(table, documented);
    }

    /// A chunk-run record whose payload does not expand into the member
    /// count its head states is refused as `chunk-run-mismatch`.
    #[test]
    fn a_run_whose_payload_disagrees_with_its_head_is_refused() {
        let chunk = |seq: u64, text: &str| {
            let data = format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
            );
            Event::new("assistant/chunk", seq, 10 + seq as i64, &data).unwrap()
        };
        let batch: Vec<Event> = ["a", "b", "c", "d"]
            .iter()
            .enumerate()
            .map(|(i, t)| chunk(7 + i as u64, t))
            .collect();
        let placement = Placement {
            turn: 1,
            step: 1,
            in_turn: true,
        };
        let mut out = Vec::new();
        let encoded = encode_batch(&mut out, &batch, &[placement; 4], 5, 3, true);
        assert_eq!(
            encoded,
            Encoded {
                records: 1,
                closing_end: None
            }
        );
        let head = parse_head(&out).unwrap();
        assert_eq!((head.kind, head.count(), head.next_seq()), (15, 4, 11));
        check_record(&out, &head, 3).unwrap();
        assert_eq!(decode_plain_records(&out, &head).unwrap(), batch);
        // Claim 5 members: the frame and CRC are fine, the expansion is not.
        out[REC_TYPE_LEN_FIELD.range()].copy_from_slice(&5u16.to_le_bytes());
        let crc = checksum(3, &out[REC_CRC_FIELD.end()..]);
        out[REC_CRC_FIELD.range()].copy_from_slice(&crc.to_le_bytes());
        let head = parse_head(&out).unwrap();
        check_record(&out, &head, 3).unwrap();
        let err = decode_plain_records(&out, &head).unwrap_err();
        assert_eq!(err.rule, RecordRule::ChunkRun);
        assert!(err.detail.starts_with("chunk-run-mismatch"), "{err}");
        // Unpacked (version 1): four records.
        let mut v1 = Vec::new();
        assert_eq!(
            encode_batch(&mut v1, &batch, &[placement; 4], 5, 3, false).records,
            4
        );
        // Framing limits of a run head.
        let mut bad = out.clone();
        bad[REC_TYPE_LEN_FIELD.range()].copy_from_slice(&2u16.to_le_bytes());
        let err = parse_head(&bad).unwrap_err();
        assert_eq!(err.rule, RecordRule::ChunkRun);
        assert!(err.detail.contains("member count"), "{err}");
        let mut bad = out.clone();
        bad[REC_FLAGS_FIELD.at] = REC_IGNORABLE | REC_IN_TURN;
        assert!(parse_head(&bad).is_err());
    }

    #[test]
    fn a_batch_reports_where_its_last_closing_turn_end_ends() {
        let ev = |t: &str, seq: u64, data: &str| Event::new(t, seq, 0, data).unwrap();
        let at = |turn, step, in_turn| Placement {
            turn,
            step,
            in_turn,
        };
        // Turn 1 closes, turn 2 opens and stays open: the commit point moves
        // to the end of turn 1's `turn/end`, not to the batch's end.
        let batch = [
            ev("turn/start", 0, r#"{"turn":1}"#),
            ev("turn/end", 1, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
            ev("turn/start", 2, r#"{"turn":2}"#),
        ];
        let placements = [at(1, 0, true), at(1, 0, false), at(2, 0, true)];
        for pack in [false, true] {
            let mut out = vec![0xAA; 5]; // bytes before the batch's records
            let encoded = encode_batch(&mut out, &batch, &placements, 0, 3, pack);
            let first = parse_head(&out[5..]).unwrap().record_len();
            let second = parse_head(&out[5 + first as usize..]).unwrap().record_len();
            assert_eq!(
                encoded,
                Encoded {
                    records: 3,
                    closing_end: Some(first + second)
                }
            );
        }
        // A batch with no closing `turn/end` moves nothing.
        let mut out = Vec::new();
        let encoded = encode_batch(&mut out, &batch[..1], &placements[..1], 0, 3, true);
        assert_eq!(encoded.closing_end, None);
    }

    #[test]
    fn zero_bytes_are_never_a_record() {
        assert!(parse_head(&[0; RECORD_HEADER_LEN]).is_err());
    }

    #[test]
    fn file_header_round_trip_and_refusals() {
        let header = SessionHeader::new("s", 9).with_cwd("/w");
        let mut out = Vec::new();
        encode_file_header(&mut out, &header, Policy::Lenient, 42);
        let decoded = decode_file_header(&out).unwrap();
        assert_eq!(decoded.header, header);
        assert_eq!((decoded.policy, decoded.salt), (Policy::Lenient, 42));
        assert_eq!(decoded.records_start as usize, out.len());
        assert_eq!(file_header_len(&out), Some(out.len() as u64));

        assert_eq!(decoded.version, FORMAT_VERSION);
        let mut v1 = Vec::new();
        encode_file_header_version(&mut v1, &header, Policy::Lenient, 42, FORMAT_V1);
        assert_eq!(decode_file_header(&v1).unwrap().version, FORMAT_V1);
        for (version, side) in [(4u16, "newer turnwal"), (0, "older turnwal")] {
            let mut other = out.clone();
            other[8..10].copy_from_slice(&version.to_le_bytes());
            // (the header CRC covers the version: recompute it)
            let mut crc = crc32fast::Hasher::new();
            crc.update(&other[..FH_CRC.at]);
            crc.update(&other[FILE_HEADER_LEN..]);
            let crc = crc.finalize().to_le_bytes();
            other[FH_CRC.range()].copy_from_slice(&crc);
            assert!(
                matches!(decode_file_header(&other), Err(FileHeaderError::Unsupported(m)) if m.contains(side)),
                "version {version}"
            );
        }
        let mut flipped = out.clone();
        flipped[30] ^= 1;
        assert!(
            matches!(decode_file_header(&flipped), Err(FileHeaderError::Corrupt(m)) if m.contains("checksum"))
        );
    }
}
