//! The WAL's records read in place for a [`LogView`]: the validated records
//! of a mapped session file, decoded into [`EventRef`]s that borrow their
//! payloads from the map.

use super::format::{self, RecordHead};
use crate::storage::Mapped;
use crate::view::{EventRef, InPlace};

/// One event of a view: a validated record read in place, or a chunk
/// run's member, rebuilt.
pub(super) enum Entry {
    /// The single-event record at this offset.
    At(u64),
    /// A member of a chunk-run record.
    Owned(crate::event::Event),
}

/// Validated records of a mapped file, by offset, and run members.
pub(super) struct MappedRecords {
    bytes: Mapped,
    entries: Vec<Entry>,
}

impl MappedRecords {
    /// The events `entries` name in `bytes`. Every record at an
    /// [`Entry::At`] offset must have passed the scan (framing, checksum).
    /// Fails if a payload is not UTF-8 (only possible for damaged bytes that
    /// still passed the checksum), naming the record's offset.
    pub(super) fn new(bytes: Mapped, entries: Vec<Entry>) -> Result<MappedRecords, u64> {
        for entry in &entries {
            let Entry::At(at) = *entry else { continue };
            let head = head_at(&bytes, at);
            let start = at as usize + format::RECORD_HEADER_LEN;
            let end = at as usize + head.record_len() as usize - format::TRAILER_LEN;
            if simdutf8::basic::from_utf8(&bytes[start..end]).is_err() {
                return Err(at);
            }
        }
        Ok(MappedRecords { bytes, entries })
    }
}

impl InPlace for MappedRecords {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn get(&self, i: usize) -> EventRef<'_> {
        match &self.entries[i] {
            Entry::At(at) => record_ref(&self.bytes, *at),
            Entry::Owned(event) => EventRef::from(event),
        }
    }
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
        // SAFETY: `MappedRecords::new` checked that every record's payload is
        // UTF-8, and mapped bytes never change while mapped (writers only
        // append, or rewrite bytes with their own content).
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
