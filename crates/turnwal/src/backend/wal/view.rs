//! The WAL's records read in place for a [`LogView`]: the validated records
//! of a mapped session file, decoded into [`EventRef`]s that borrow their
//! payloads from the map.

use super::format::{self, Malformed, RecordHead, RecordRule};
use crate::storage::Mapped;
use crate::view::{EventRef, InPlace};

/// Where each event of a view is, eight bytes an event: the offset of a
/// single-event record read in place, or (top bit set) the index of an
/// event held because it was rebuilt (a chunk run's member) or decompressed
/// (a sealed unit's).
#[derive(Default)]
pub(super) struct Entries {
    slots: Vec<u64>,
    held: Vec<crate::event::Event>,
}

/// Marks a slot as an index into [`Entries::held`] (offsets never reach it).
const HELD: u64 = 1 << 63;

impl Entries {
    /// Room for `n` events, taken up front: a doubling vector would hold up
    /// to twice the slots while it grows.
    pub(super) fn with_capacity(n: usize) -> Entries {
        Entries {
            slots: Vec::with_capacity(n),
            held: Vec::new(),
        }
    }

    /// The next event is the single-event record at `offset`.
    pub(super) fn at(&mut self, offset: u64) {
        debug_assert!(offset < HELD);
        self.slots.push(offset);
    }

    /// The next events are these, held.
    pub(super) fn hold(&mut self, events: Vec<crate::event::Event>) {
        for event in events {
            self.slots.push(HELD | self.held.len() as u64);
            self.held.push(event);
        }
    }

    /// The record offsets, in order.
    fn offsets(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots.iter().copied().filter(|s| s & HELD == 0)
    }
}

/// Validated records of a mapped file, by offset, and held events.
pub(super) struct MappedRecords {
    bytes: Mapped,
    entries: Entries,
}

impl MappedRecords {
    /// The events `entries` name in `bytes`. Every record at an offset
    /// must have passed the scan (framing, checksum). Fails, naming the
    /// record's offset and why, where decoding the record would (only
    /// possible for damaged or forged bytes that still passed the checksum):
    /// a payload that is not UTF-8, a type name, seq or time no event may
    /// have, a kind-14 record naming a known type. So every
    /// [`EventRef::to_event`] of the view succeeds.
    pub(super) fn new(bytes: Mapped, entries: Entries) -> Result<MappedRecords, (u64, String)> {
        for at in entries.offsets() {
            check_in_place(&bytes, at).map_err(|e| (at, e.detail))?;
        }
        Ok(MappedRecords { bytes, entries })
    }
}

impl InPlace for MappedRecords {
    fn len(&self) -> usize {
        self.entries.slots.len()
    }

    fn get(&self, i: usize) -> EventRef<'_> {
        let slot = self.entries.slots[i];
        if slot & HELD == 0 {
            record_ref(&self.bytes, slot)
        } else {
            EventRef::from(&self.entries.held[(slot & !HELD) as usize])
        }
    }
}

/// Checks what reading the single-event record at `at` of `bytes` (a
/// validated record: framing and checksum) in place relies on: its
/// payload is UTF-8, a kind-14 record names no known type, and its type
/// name, seq and time are an event's. After it, [`record_ref`] of the
/// record is sound and its `to_event` succeeds.
pub(super) fn check_in_place(bytes: &[u8], at: u64) -> Result<(), Malformed> {
    let head = head_at(bytes, at);
    let start = at as usize + format::RECORD_HEADER_LEN;
    let end = at as usize + head.record_len() as usize - format::TRAILER_LEN;
    if simdutf8::basic::from_utf8(&bytes[start..end]).is_err() {
        return Err(Malformed::new(
            RecordRule::Payload,
            "record payload is not UTF-8",
        ));
    }
    let event = record_ref(bytes, at);
    if event.kind == crate::event::EventKind::Other
        && crate::event::EventKind::of(event.event_type) != crate::event::EventKind::Other
    {
        return Err(Malformed::new(
            RecordRule::Payload,
            format!("record kind 14 names the known type {:?}", event.event_type),
        ));
    }
    crate::event::check_stored_parts(event.event_type, event.seq, event.time)
        .map_err(|e| Malformed::new(RecordRule::Payload, e.reason))
}

fn head_at(bytes: &[u8], at: u64) -> RecordHead {
    let at = at as usize;
    format::parse_head(&bytes[at..at + format::RECORD_HEADER_LEN]).expect("validated by the scan")
}

pub(super) fn record_ref(bytes: &[u8], at: u64) -> EventRef<'_> {
    let head = head_at(bytes, at);
    let mut pos = at as usize + format::RECORD_HEADER_LEN;
    let mut take = |len: usize| {
        let slice = &bytes[pos..pos + len];
        pos += len;
        // SAFETY: every caller ran `check_in_place` on this record first
        // (`MappedRecords::new`, the cursor), so its payload is UTF-8, and
        // mapped bytes never change while mapped (writers only append, or
        // rewrite bytes with their own content).
        unsafe { std::str::from_utf8_unchecked(slice) }
    };
    let type_name = take(head.type_len as usize);
    let data = take(head.data_len as usize);
    let sources = take(head.sources_len as usize);
    let surface = take(head.surface_len as usize);
    let kind = head.event_kind();
    EventRef {
        event_type: kind.name().unwrap_or(type_name),
        kind,
        seq: head.seq,
        time: head.time,
        data,
        source_event_seqs: (!sources.is_empty()).then_some(sources),
        surface_op: (!surface.is_empty()).then_some(surface),
        ignorable: head.ignorable(),
        surface_op_first: head.surface_op_first(),
    }
}
