//! The bytes of the native format (docs/FORMAT.md): the file header, record
//! framing, and record encode/decode. Pure functions over byte slices.

use crate::contract::{Placement, Policy};
use crate::event::{Event, EventKind, RawJson};
use crate::header::SessionHeader;

/// `\x89TWAL\r\n\x1a`.
pub const MAGIC: [u8; 8] = [0x89, b'T', b'W', b'A', b'L', b'\r', b'\n', 0x1a];
/// The format version this build reads and writes.
pub const FORMAT_VERSION: u16 = 1;
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

const REC_IGNORABLE: u8 = 1;
const REC_SURFACE_FIRST: u8 = 1 << 1;
const REC_IN_TURN: u8 = 1 << 2;
const REC_SYNTHETIC: u8 = 1 << 3;
const REC_RESERVED: u8 = !0b1111;

/// The kind byte of type names outside the known set.
pub const KIND_OTHER: u8 = 14;

// Field offsets inside a record.
const CRC_AT: usize = 0;
const KIND_AT: usize = 4;
const FLAGS_AT: usize = 5;
const TYPE_LEN_AT: usize = 6;
const DATA_LEN_AT: usize = 8;
const SOURCES_LEN_AT: usize = 12;
const SURFACE_LEN_AT: usize = 16;
const TURN_AT: usize = 20;
const SEQ_AT: usize = 24;
const TIME_AT: usize = 32;
const WATERMARK_AT: usize = 40;
const STEP_AT: usize = 48;
const _: () = assert!(STEP_AT + 4 == RECORD_HEADER_LEN);

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

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The decoded fixed part of a session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// The session's policy.
    pub policy: Policy,
    /// The per-file checksum salt.
    pub salt: u32,
    /// The session header.
    pub header: SessionHeader,
    /// Where the first record starts.
    pub records_start: u64,
}

/// Why a file header cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileHeaderError {
    /// Too short, bad magic, bad checksum, bad JSON: the file is corrupt.
    Corrupt(String),
    /// A turnwal format of another version.
    Unsupported(String),
}

/// Encodes the file header for a new session file.
pub fn encode_file_header(out: &mut Vec<u8>, header: &SessionHeader, policy: Policy, salt: u32) {
    let json = header.to_json();
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let flags: u16 = if policy == Policy::Lenient {
        FLAG_LENIENT
    } else {
        0
    };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&salt.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[start..start + 20]);
    crc.update(json.as_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(json.as_bytes());
}

/// How many bytes the file header occupies, read from its first 24 bytes
/// (or `None` if those do not even hold a plausible length).
pub fn file_header_len(prefix: &[u8]) -> Option<u64> {
    if prefix.len() < FILE_HEADER_LEN || prefix[..8] != MAGIC {
        return None;
    }
    let json_len = u32_at(prefix, 16);
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
    if bytes[..8] != MAGIC {
        return corrupt("not a turnwal session file (bad magic)".into());
    }
    let version = u16_at(bytes, 8);
    if version != FORMAT_VERSION {
        let side = if version > FORMAT_VERSION {
            "a newer turnwal; upgrade turnwal to open it"
        } else {
            "an older turnwal, and this build ships no upgrade path for it"
        };
        return Err(FileHeaderError::Unsupported(format!(
            "session file format v{version} was written by {side} (this build reads v{FORMAT_VERSION})"
        )));
    }
    let flags = u16_at(bytes, 10);
    if flags & !FLAG_LENIENT != 0 {
        return corrupt(format!(
            "file header has reserved flag bits set ({flags:#06x})"
        ));
    }
    let salt = u32_at(bytes, 12);
    let json_len = u32_at(bytes, 16);
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
    crc.update(&bytes[..20]);
    crc.update(&bytes[FILE_HEADER_LEN..end]);
    if crc.finalize() != u32_at(bytes, 20) {
        return corrupt("file header checksum mismatch".into());
    }
    let json = std::str::from_utf8(&bytes[FILE_HEADER_LEN..end])
        .map_err(|_| FileHeaderError::Corrupt("session header is not UTF-8".into()))?;
    let header = match SessionHeader::from_json(json) {
        Ok(h) => h,
        Err(e) if e.0.contains("log format v") => return Err(FileHeaderError::Unsupported(e.0)),
        Err(e) => return corrupt(format!("invalid session header: {e}")),
    };
    let policy = if flags & FLAG_LENIENT != 0 {
        Policy::Lenient
    } else {
        Policy::Strict
    };
    Ok(FileHeader {
        policy,
        salt,
        header,
        records_start: end as u64,
    })
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
    /// The record's total length.
    pub fn record_len(&self) -> u64 {
        (RECORD_HEADER_LEN + TRAILER_LEN) as u64
            + u64::from(self.type_len)
            + u64::from(self.data_len)
            + u64::from(self.sources_len)
            + u64::from(self.surface_len)
    }

    /// The event kind.
    pub fn event_kind(&self) -> EventKind {
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

/// Parses a record header and checks the framing fields (kind, flags,
/// lengths). `bytes` must hold at least [`RECORD_HEADER_LEN`] bytes.
pub fn parse_head(bytes: &[u8]) -> Result<RecordHead, String> {
    let head = RecordHead {
        kind: bytes[KIND_AT],
        flags: bytes[FLAGS_AT],
        type_len: u16_at(bytes, TYPE_LEN_AT),
        data_len: u32_at(bytes, DATA_LEN_AT),
        sources_len: u32_at(bytes, SOURCES_LEN_AT),
        surface_len: u32_at(bytes, SURFACE_LEN_AT),
        turn: u32_at(bytes, TURN_AT),
        seq: u64_at(bytes, SEQ_AT),
        time: u64_at(bytes, TIME_AT) as i64,
        watermark: u64_at(bytes, WATERMARK_AT),
        step: u32_at(bytes, STEP_AT),
    };
    if event_kind(head.kind).is_none() {
        return Err(format!("invalid record kind {}", head.kind));
    }
    if head.flags & REC_RESERVED != 0 {
        return Err(format!(
            "reserved record flag bits set ({:#04x})",
            head.flags
        ));
    }
    if (head.type_len != 0) != (head.kind == KIND_OTHER) {
        return Err(format!(
            "type length {} does not fit record kind {}",
            head.type_len, head.kind
        ));
    }
    if head.data_len == 0 || head.data_len > MAX_DATA_LEN {
        return Err(format!("data length {} is out of range", head.data_len));
    }
    if head.sources_len > MAX_EXTRA_LEN || head.surface_len > MAX_EXTRA_LEN {
        return Err("sourceEventSeqs or surfaceOp length out of range".into());
    }
    Ok(head)
}

/// Checks a whole record (`record` spans exactly `head.record_len()` bytes):
/// trailer and checksum.
pub fn check_record(record: &[u8], head: &RecordHead, salt: u32) -> Result<(), String> {
    let len = record.len();
    let trailer = u32_at(record, len - TRAILER_LEN);
    if u64::from(trailer) != head.record_len() {
        return Err(format!(
            "record trailer {trailer} does not match its length {len}"
        ));
    }
    let stored = u32_at(record, CRC_AT);
    if checksum(salt, &record[4..]) != stored {
        return Err("record checksum mismatch".into());
    }
    Ok(())
}

fn checksum(salt: u32, body: &[u8]) -> u32 {
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
    let record_len = RECORD_HEADER_LEN
        + type_name.len()
        + data.len()
        + sources.len()
        + surface.len()
        + TRAILER_LEN;
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
    let start = out.len();
    out.reserve(record_len);
    out.extend_from_slice(&[0; 4]);
    out.push(kind_byte(kind));
    out.push(flags);
    out.extend_from_slice(&(type_name.len() as u16).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&(sources.len() as u32).to_le_bytes());
    out.extend_from_slice(&(surface.len() as u32).to_le_bytes());
    out.extend_from_slice(&placement.turn.to_le_bytes());
    out.extend_from_slice(&event.seq().to_le_bytes());
    out.extend_from_slice(&event.time().to_le_bytes());
    out.extend_from_slice(&watermark.to_le_bytes());
    out.extend_from_slice(&placement.step.to_le_bytes());
    out.extend_from_slice(type_name);
    out.extend_from_slice(data);
    out.extend_from_slice(sources);
    out.extend_from_slice(surface);
    out.extend_from_slice(&(record_len as u32).to_le_bytes());
    let crc = checksum(salt, &out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Checks that an event fits the format's limits (the shared ones,
/// [`crate::limits::check_event`]) before it is encoded.
pub fn check_limits(event: &Event) -> Result<(), String> {
    crate::limits::check_event(event).map_err(|e| e.reason)
}

/// Decodes a checked record back into its event.
pub fn decode_record(record: &[u8], head: &RecordHead) -> Result<Event, String> {
    let mut at = RECORD_HEADER_LEN;
    let mut take = |len: usize| {
        let s = &record[at..at + len];
        at += len;
        simdutf8::basic::from_utf8(s).map_err(|_| "record payload is not UTF-8".to_owned())
    };
    let type_name = take(head.type_len as usize)?;
    let data = take(head.data_len as usize)?;
    let sources = take(head.sources_len as usize)?;
    let surface = take(head.surface_len as usize)?;
    let kind = head.event_kind();
    let name = match kind.name() {
        Some(name) => name,
        None if EventKind::of(type_name) == EventKind::Other => type_name,
        None => return Err(format!("record kind 14 names the known type {type_name:?}")),
    };
    let mut event = Event::from_parts(name, head.seq, head.time, RawJson::trusted(data))
        .map_err(|e| e.reason)?;
    let extra = |s: &str| (!s.is_empty()).then(|| RawJson::trusted(s));
    event.set_extras(
        head.flags & REC_IGNORABLE != 0,
        extra(sources),
        extra(surface),
        head.flags & REC_SURFACE_FIRST != 0,
    );
    Ok(event)
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

        let mut newer = out.clone();
        newer[8] = 2;
        assert!(
            matches!(decode_file_header(&newer), Err(FileHeaderError::Unsupported(m)) if m.contains("newer turnwal"))
        );
        let mut flipped = out.clone();
        flipped[30] ^= 1;
        assert!(
            matches!(decode_file_header(&flipped), Err(FileHeaderError::Corrupt(m)) if m.contains("checksum"))
        );
    }
}
