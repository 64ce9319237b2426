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
use crate::header::SessionHeader;

/// A session's stored prefix as storage records, read in one transaction
/// (`SqliteBackend::stored_records`, `PgBackend::stored_records`): what
/// [`crate::backend::Backend::view`] gives, but
/// the packed rows before the last `turn/end` are handed over as they are
/// stored instead of decoded into events.
#[derive(Debug)]
pub struct StoredRecords {
    /// The session header.
    pub header: SessionHeader,
    /// The revision token ([`crate::backend::Backend::revision`]) of what was read.
    pub revision: String,
    /// The state of the stored log.
    pub state: crate::scan::LogState,
    /// What recovery would cut, if anything.
    pub cut: Option<crate::scan::Cut>,
    /// The closers an open final turn would get (written nowhere; not among
    /// [`StoredRecords::records`]).
    pub closers: Vec<Event>,
    items: Vec<scan::Item>,
    tail: Vec<Event>,
    stored: usize,
}

impl StoredRecords {
    /// How many events are stored (kept): those the records hold.
    pub fn stored(&self) -> usize {
        self.stored
    }

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

impl StoredRecords {
    /// The records of a classification made by [`scan::full_scan_items`].
    pub(crate) fn of(
        c: scan::Classified,
        items: Vec<scan::Item>,
        revision: String,
    ) -> StoredRecords {
        let stored = items.iter().map(scan::Item::len).sum::<usize>() + c.events.len();
        StoredRecords {
            revision,
            state: c.scan.state(),
            cut: c.scan.cut,
            closers: c.scan.closers,
            header: c.scan.header,
            items,
            tail: c.events,
            stored,
        }
    }
}

impl crate::backend::StoredLog for StoredRecords {
    fn header(&self) -> &SessionHeader {
        &self.header
    }

    fn revision(&self) -> &str {
        &self.revision
    }

    fn state(&self) -> crate::scan::LogState {
        self.state
    }

    fn cut(&self) -> Option<&crate::scan::Cut> {
        self.cut.as_ref()
    }

    fn stored(&self) -> usize {
        self.stored
    }

    fn closers(&self) -> &[Event] {
        &self.closers
    }

    fn records(&self) -> Box<dyn Iterator<Item = crate::upstream::chunks::Record<'_>> + '_> {
        Box::new(StoredRecords::records(self))
    }
}
