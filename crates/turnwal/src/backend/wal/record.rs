//! One record of a WAL log, read where it lies: checked at an offset
//! (`check_at`), walked (`heads`), decoded into its events whatever its
//! kind (`decode_records`), and a sealed unit opened, checked and walked
//! (docs/FORMAT.md, "Records", "Sealed units"). Pure functions over byte
//! slices, on top of [`format`]; the scan, the cursor, the stored-records
//! reader and sealing build on them.
//!
//! Invariants: [`unit_events`] decompresses at most `plain_len` bytes (a
//! frame that inflates past it, or to less, is `sealed-unit-length`), and
//! accepts only what the spec allows inside: plain records of kinds 1–17
//! with salt 0 and watermark 0, seqs contiguous from the unit's, `count`
//! events, the last one a `turn/end` closing a turn at the unit's time.

use std::io::Read;
use std::path::Path;

use super::format::{self, MIN_RECORD_LEN, Malformed, RECORD_HEADER_LEN, RecordHead, RecordRule};
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, EventKind};
use crate::scan::CutReason;

/// Checks the record at `at` (expected seq `seq`). `Ok` carries its head.
pub fn check_at(
    bytes: &[u8],
    at: u64,
    seq: Option<u64>,
    salt: u32,
) -> Result<RecordHead, (CutReason, String)> {
    let rest = &bytes[at as usize..];
    if rest.len() < MIN_RECORD_LEN {
        return Err((
            CutReason::Incomplete,
            format!("{} bytes left, too few for a record", rest.len()),
        ));
    }
    let head = format::parse_head(&rest[..RECORD_HEADER_LEN])
        .map_err(|d| (CutReason::Invalid, d.detail))?;
    let len = head.record_len();
    if len > rest.len() as u64 {
        return Err((
            CutReason::Incomplete,
            format!(
                "record of {len} bytes runs past the end of the file ({} bytes left)",
                rest.len()
            ),
        ));
    }
    let record = &rest[..len as usize];
    format::check_record(record, &head, salt).map_err(|d| (CutReason::Invalid, d.detail))?;
    if let Some(expected) = seq
        && head.seq != expected
    {
        return Err((
            CutReason::Invalid,
            format!("record holds seq {}, expected {expected}", head.seq),
        ));
    }
    if head.kind == format::KIND_OTHER {
        let name = &record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + head.type_len as usize];
        match std::str::from_utf8(name) {
            Ok(n) if EventKind::of(n) == EventKind::Other => {}
            _ => {
                return Err((
                    CutReason::Invalid,
                    "record type name is not a valid other-kind name".into(),
                ));
            }
        }
    }
    Ok(head)
}

/// Iterates the heads of the records in `[from, to)`, which the caller has
/// already validated.
pub fn heads(bytes: &[u8], from: u64, to: u64) -> impl Iterator<Item = (u64, RecordHead)> + '_ {
    let mut at = from;
    std::iter::from_fn(move || {
        if at >= to {
            return None;
        }
        let head = format::parse_head(&bytes[at as usize..at as usize + RECORD_HEADER_LEN])
            .expect("record validated by the scan");
        let here = at;
        at += head.record_len();
        Some((here, head))
    })
}

/// The zstd frame of the sealed unit at `at`, whose head is `head`.
pub(super) fn unit_frame<'a>(bytes: &'a [u8], at: u64, head: &RecordHead) -> &'a [u8] {
    let from = at as usize + RECORD_HEADER_LEN;
    &bytes[from..from + head.data_len as usize]
}

/// Decodes a checked record back into its events: a sealed unit's (every
/// event of its closed turns, the unit checked whole), else a plain
/// record's ([`format::decode_plain_records`]).
pub fn decode_records(record: &[u8], head: &RecordHead) -> Result<Vec<Event>, Malformed> {
    if head.is_sealed() {
        let frame = &record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + head.data_len as usize];
        return unit_events(frame, head).map(|(events, _)| events);
    }
    format::decode_plain_records(record, head)
}

/// Decodes the validated record at `at` into its events (one, or a chunk
/// run's members).
pub fn decode_at(bytes: &[u8], at: u64, head: &RecordHead, path: &Path) -> Result<Vec<Event>> {
    let record = &bytes[at as usize..(at + head.record_len()) as usize];
    decode_records(record, head).map_err(|e| corrupt(path, at, Some(head.seq), e.to_string()))
}

/// The events of a sealed unit whose head is `head` and whose frame is
/// `frame`, with the heads of its inner records. All or nothing.
pub fn unit_events(
    frame: &[u8],
    head: &RecordHead,
) -> Result<(Vec<Event>, Vec<RecordHead>), Malformed> {
    // Not sized from the head's count: that is a number read from disk,
    // and the walk below is what checks it against the events the frame
    // really holds.
    let mut events = Vec::new();
    let inner_heads = walk_unit(frame, head, |record, inner| {
        events.extend(format::decode_plain_records(record, inner)?);
        Ok(())
    })?;
    Ok((events, inner_heads))
}

/// Checks the sealed unit whose head is `head` and whose frame is `frame`
/// as [`unit_events`] does (it decompresses, bounded by `plain_len`, and
/// walks its inner records: checksums, contiguous seqs, the count its head
/// states, the closing `turn/end`, the head's turn and time), without
/// decoding a payload: what a scan checks of every unit, so that every
/// entry point decides from the same evidence (docs/FORMAT.md, "Sealed
/// units").
pub fn check_unit(frame: &[u8], head: &RecordHead) -> Result<(), Malformed> {
    walk_unit(frame, head, |_, _| Ok(())).map(drop)
}

/// Decompresses the sealed unit whose head is `head` and whose frame is
/// `frame`, hands each inner record (its bytes and head) to `each` in
/// order, and checks the unit as [`unit_events`] does (the same checks in
/// the same order, so the same words for the same damage); `each` reads
/// the record's events (or refuses it). Returns the inner records' heads.
pub(super) fn walk_unit(
    frame: &[u8],
    head: &RecordHead,
    each: impl FnMut(&[u8], &RecordHead) -> Result<(), Malformed>,
) -> Result<Vec<RecordHead>, Malformed> {
    let plain = decompress(frame, head.plain_len() as usize)?;
    walk_plain(&plain, head, each)
}

/// Decompresses the sealed unit whose head is `head` and whose frame is
/// `frame`, checks it as [`check_unit`] does, and returns its plain
/// records, laid end to end: what a cursor reads the unit's events from
/// in place, holding this one unit.
pub(super) fn open_unit(frame: &[u8], head: &RecordHead) -> Result<Vec<u8>, Malformed> {
    let plain = decompress(frame, head.plain_len() as usize)?;
    walk_plain(&plain, head, |_, _| Ok(()))?;
    Ok(plain)
}

/// [`walk_unit`] over a unit's decompressed records.
fn walk_plain(
    plain: &[u8],
    head: &RecordHead,
    mut each: impl FnMut(&[u8], &RecordHead) -> Result<(), Malformed>,
) -> Result<Vec<RecordHead>, Malformed> {
    let mut at = 0u64;
    let mut seq = head.seq;
    let mut inner_heads: Vec<RecordHead> = Vec::new();
    while at < plain.len() as u64 {
        let inner = check_at(plain, at, Some(seq), 0).map_err(|(_, d)| {
            Malformed::new(
                RecordRule::SealedUnit,
                format!("sealed unit record at plain byte {at}: {d}"),
            )
        })?;
        if inner.is_sealed() {
            return Err(Malformed::new(
                RecordRule::SealedUnit,
                format!("sealed unit record at plain byte {at} is itself a sealed unit"),
            ));
        }
        if inner.watermark != 0 {
            return Err(Malformed::new(
                RecordRule::SealedUnit,
                format!(
                    "sealed unit record at plain byte {at} has watermark {}, not 0",
                    inner.watermark
                ),
            ));
        }
        let record = &plain[at as usize..(at + inner.record_len()) as usize];
        each(record, &inner)?;
        seq = inner.next_seq();
        at += inner.record_len();
        inner_heads.push(inner);
    }
    if seq - head.seq != head.count() {
        return Err(Malformed::new(
            RecordRule::SealedUnit,
            format!(
                "sealed unit holds {} events, its head states {}",
                seq - head.seq,
                head.count()
            ),
        ));
    }
    let closes = match inner_heads.as_slice() {
        [.., before, last] => last.closes_turn_after(Some(before)),
        _ => false,
    };
    let last = inner_heads.last().expect("count >= 1");
    if !closes || last.turn != head.turn {
        return Err(Malformed::new(
            RecordRule::SealedUnit,
            "sealed unit does not end with the turn/end of its last turn",
        ));
    }
    // The last record is a `turn/end`'s own (a run's members are chunks), so
    // its head's time is its event's.
    if last.time != head.time {
        return Err(Malformed::new(
            RecordRule::SealedUnit,
            "sealed unit's time is not its last event's",
        ));
    }
    Ok(inner_heads)
}

fn decompress(frame: &[u8], plain_len: usize) -> Result<Vec<u8>, Malformed> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame)
        .map_err(|e| {
            Malformed::new(
                RecordRule::SealedUnit,
                format!("sealed unit frame is not zstd: {e}"),
            )
        })?
        .single_frame();
    let mut out = Vec::with_capacity(plain_len);
    (&mut decoder)
        .take(plain_len as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            Malformed::new(
                RecordRule::SealedUnit,
                format!("sealed unit frame does not decompress: {e}"),
            )
        })?;
    if out.len() > plain_len {
        return Err(Malformed::new(
            RecordRule::SealedUnitLength,
            format!(
                "sealed-unit-length: the frame inflates past the {plain_len} bytes its head states"
            ),
        ));
    }
    if out.len() < plain_len {
        return Err(Malformed::new(
            RecordRule::SealedUnitLength,
            format!(
                "sealed-unit-length: the frame decompresses to {} bytes, its head states {plain_len}",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// A corruption at byte `offset` of the log at `path`.
pub(super) fn corrupt(
    path: &Path,
    offset: u64,
    seq: Option<u64>,
    reason: impl std::fmt::Display,
) -> Error {
    Error::from(Corruption {
        path: path.to_owned(),
        offset,
        unit: crate::error::Unit::Byte,
        seq,
        reason: reason.to_string(),
    })
}
