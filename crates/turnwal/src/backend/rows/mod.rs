//! What the stores of rows share (the SQLite and the PostgreSQL stores):
//! upstream's row encoding ([`codec`]) and the reading of a session's rows
//! back ([`scan`]: the commit point, torn tails, corruption, seeks,
//! listings and salvage), through the [`scan::Rows`] trait each store
//! answers from its own transaction. Below the backends: neither store
//! imports the other.

pub mod codec;
pub(crate) mod cursor;
pub(crate) mod scan;

use crate::event::Event;

/// A session's stored prefix as storage records, read in one transaction
/// (`SqliteBackend::stored_records`, `PgBackend::stored_records`): what
/// [`crate::backend::Backend::view`] gives, but
/// the packed rows before the last `turn/end` are handed over as they are
/// stored instead of decoded into events.
#[derive(Debug)]
pub struct StoredRows {
    /// Header, revision, state, cut, closers and count.
    pub head: crate::backend::StoredHead,
    items: Vec<scan::Item>,
    tail: Vec<Event>,
}

impl StoredRows {
    /// The stored events in seq order: scalar rows as events, packed rows
    /// in the canonical spelling as they are stored.
    pub fn records(&self) -> impl Iterator<Item = crate::upstream::chunks::Record<'_>> + '_ {
        self.items.iter().flat_map(scan::Item::records).chain(
            self.tail
                .iter()
                .map(|e| crate::upstream::chunks::Record::Event(e.into())),
        )
    }
}

impl StoredRows {
    /// The records of a classification made by [`scan::full_scan_items`].
    pub(crate) fn of(c: scan::Classified, items: Vec<scan::Item>, revision: String) -> StoredRows {
        let stored = items.iter().map(scan::Item::len).sum::<usize>() + c.events.len();
        StoredRows {
            head: crate::backend::StoredHead::of(c.scan, revision, stored),
            items,
            tail: c.events,
        }
    }
}

impl crate::backend::StoredLog for StoredRows {
    fn head(&self) -> &crate::backend::StoredHead {
        &self.head
    }

    fn records(&self) -> Box<dyn Iterator<Item = crate::upstream::chunks::Record<'_>> + '_> {
        Box::new(StoredRows::records(self))
    }
}

/// The incarnation part of a row store's revision
/// (`…:incarnation:N:revision:M`, drawn when the session row is created,
/// never reused): everything before `:revision:`.
pub(crate) fn incarnation_of(revision: &str) -> Option<String> {
    revision
        .rsplit_once(":revision:")
        .map(|(i, _)| i.to_owned())
}
