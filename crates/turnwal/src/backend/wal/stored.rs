//! A WAL session's stored prefix as storage records
//! ([`WalBackend::stored_records`]): what [`Backend::view`] gives, but each
//! chunk-run record (kinds 15–17, in the log or inside a sealed unit) is
//! handed over as the packed row its payload already is, not expanded into
//! its members.
//!
//! Invariants:
//!
//! - The same records are read and refused as [`Backend::view`] reads and
//!   refuses them: the same classification (committed prefix, kept tail,
//!   cut, closers), the same words for the same damage (a run that does not
//!   expand, a unit that does not decompress or check, a payload that is
//!   not UTF-8), in the same order.
//! - A run is handed over as stored only when [`PackedRun::parse`] reads
//!   it (upstream's spelling, and it decodes, so its members are exactly
//!   the ones expanding it gives) and it holds the member count its head
//!   states; any other run is expanded, as the view expands it, and
//!   refused exactly when the view refuses it.
//! - The revision is read before and after the log is mapped and must
//!   match, so it names exactly what was read.

use std::fmt;

use super::format::{self, RECORD_HEADER_LEN, RecordHead};
use super::record;
use super::scan::corrupt;
use super::{WalBackend, view};
use crate::backend::Backend;
use crate::error::{Corruption, Error, Result};
use crate::event::Event;
use crate::storage::Mapped;
use crate::upstream::chunks::{PackedRun, Record};

/// One stored item: a single-event record read in place, an event rebuilt
/// (inside a unit, or a run's member where the run was expanded), or a
/// chunk run as stored.
enum Item {
    At(u64),
    Event(Event),
    Packed(PackedRun),
}

impl Item {
    fn len(&self) -> usize {
        match self {
            Item::Packed(run) => run.len(),
            _ => 1,
        }
    }
}

/// A WAL session's stored prefix as storage records, read from one mapping
/// of its log ([`WalBackend::stored_records`]).
pub struct StoredWal {
    /// Header, revision, state, cut, closers and count.
    pub head: crate::backend::StoredHead,
    map: Mapped,
    items: Vec<Item>,
}

impl fmt::Debug for StoredWal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "StoredWal({:?}, {} events, {:?})",
            self.head.header.id, self.head.stored, self.head.state
        )
    }
}

impl StoredWal {
    /// The stored events in seq order: single-event records as events
    /// (read in place), chunk runs as the packed rows they store.
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> + '_ {
        self.items.iter().map(|item| match item {
            Item::At(at) => Record::Event(view::record_ref(&self.map, *at)),
            Item::Event(event) => Record::Event(event.into()),
            Item::Packed(run) => Record::Packed(run),
        })
    }
}

/// The run record `record` (head `head`) as stored, when its payload is a
/// packed row [`PackedRun::parse`] reads holding the member count its head
/// states; `None` for the caller to expand it (and refuse it as the view
/// does).
fn packed(record: &[u8], head: &RecordHead) -> Option<PackedRun> {
    let kind = format::run_kind(head.kind)?;
    let data = &record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + head.data_len as usize];
    let data = simdutf8::basic::from_utf8(data).ok()?;
    PackedRun::parse(kind, head.seq, head.time, data.to_owned())
        .ok()
        .filter(|run| run.len() as u64 == head.count())
}

/// The items of the validated record `record` (head `head`), appended to
/// `items`, with the words [`record::decode_records`] refuses it with.
fn read_record(
    record: &[u8],
    head: &RecordHead,
    items: &mut Vec<Item>,
) -> Result<(), format::Malformed> {
    if head.is_sealed() {
        let frame = &record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + head.data_len as usize];
        record::walk_unit(frame, head, |inner, inner_head| {
            read_record(inner, inner_head, items)
        })?;
        return Ok(());
    }
    if let Some(run) = packed(record, head) {
        items.push(Item::Packed(run));
        return Ok(());
    }
    items.extend(
        record::decode_records(record, head)?
            .into_iter()
            .map(Item::Event),
    );
    Ok(())
}

impl WalBackend {
    /// The stored prefix of session `id` as storage records, with what
    /// [`Backend::view`] and [`Backend::revision`] tell of it, from one
    /// mapping of its log; `None` when the session does not exist. The log
    /// is classified exactly as [`Backend::view`] classifies it (the same
    /// kept records, cut and closers, the same refusal of a corrupt log);
    /// only its chunk-run records, in the log and inside sealed units, are
    /// not expanded: each is checked to be a packed row in the spelling
    /// upstream writes that decodes to the member count its head states,
    /// and handed over as stored (one that is not is expanded, and refused
    /// where the view refuses it). Retries while a writer changes the log
    /// under the read; refuses after 16 tries.
    pub fn stored_records(&self, id: &str) -> Result<Option<StoredWal>> {
        for _ in 0..16 {
            let Some(before) = self.revision(id)? else {
                return Ok(None);
            };
            let Some(stored) = self.stored_records_once(id, before)? else {
                return Ok(None);
            };
            if self.revision(id)?.as_deref() == Some(stored.head.revision.as_str()) {
                return Ok(Some(stored));
            }
        }
        Err(Error::StaleRepair {
            id: id.to_owned(),
            detail: "the stored log kept changing while it was read (16 tries)".into(),
        })
    }

    fn stored_records_once(&self, id: &str, revision: String) -> Result<Option<StoredWal>> {
        let Some((map, classified, path)) = self.classify(id)? else {
            return Ok(None);
        };
        let start = classified.frames.file.records_start;
        let mut items = Vec::new();
        // A version-3 session's archived units first: their runs as stored,
        // their other events decoded (the archive is not mapped past here).
        let archive =
            super::archive::Archive::open(self.storage.as_ref(), &path, &classified.frames.file)?;
        for (at, head) in archive.iter().flat_map(|a| a.units()) {
            let archive = archive.as_ref().expect("units come from it");
            let record = &archive.map()[at as usize..(at + head.record_len()) as usize];
            read_record(record, &head, &mut items)
                .map_err(|reason| corrupt(archive.path(), at, Some(head.seq), reason))?;
        }
        for (at, head) in record::heads(&map, start, classified.kept_end) {
            if !head.is_v2() {
                items.push(Item::At(at));
                continue;
            }
            let record = &map[at as usize..(at + head.record_len()) as usize];
            read_record(record, &head, &mut items)
                .map_err(|reason| corrupt(&path, at, Some(head.seq), reason))?;
        }
        // As the view does: every record read in place must be UTF-8,
        // checked after the runs and units were read.
        for item in &items {
            let Item::At(at) = *item else { continue };
            let head = format::parse_head(&map[at as usize..at as usize + RECORD_HEADER_LEN])
                .expect("validated by the scan");
            let start = at as usize + RECORD_HEADER_LEN;
            let end = at as usize + head.record_len() as usize - format::TRAILER_LEN;
            if simdutf8::basic::from_utf8(&map[start..end]).is_err() {
                return Err(Error::from(Corruption {
                    path: path.clone(),
                    offset: at,
                    unit: crate::error::Unit::Byte,
                    seq: None,
                    reason: "record payload is not UTF-8".into(),
                }));
            }
        }
        let stored = items.iter().map(Item::len).sum();
        Ok(Some(StoredWal {
            head: crate::backend::StoredHead::of(classified.scan, revision, stored),
            map,
            items,
        }))
    }
}

impl crate::backend::StoredLog for StoredWal {
    fn head(&self) -> &crate::backend::StoredHead {
        &self.head
    }

    fn records(&self) -> Box<dyn Iterator<Item = crate::upstream::chunks::Record<'_>> + '_> {
        Box::new(StoredWal::records(self))
    }
}
