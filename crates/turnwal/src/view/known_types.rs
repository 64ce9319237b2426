//! A store that requires known types ([`crate::StoreOptions`]; a JSONL
//! root, as upstream's reader does) refuses a log holding an event of an
//! unknown type not marked ignorable. Checked as a cursor lends, with
//! [`crate::Store::inspect`]'s order of refusal: a log the rest of the
//! read refuses (a migration, a damaged record) is refused for that.

use super::{Cursor, EventRef};
use crate::error::{Error, Result};

/// How the refusal of an unknown type is reported: (seq, type) → error.
pub(crate) type Unknown = Box<dyn Fn(u64, &str) -> Error + Send>;

pub(crate) struct KnownTypes {
    inner: Box<dyn Cursor>,
    refuse: Unknown,
}

impl KnownTypes {
    pub(crate) fn new(inner: Box<dyn Cursor>, refuse: Unknown) -> KnownTypes {
        KnownTypes { inner, refuse }
    }
}

impl Cursor for KnownTypes {
    fn advance(&mut self) -> Result<bool> {
        if !self.inner.advance()? {
            return Ok(false);
        }
        let event = self.inner.current().expect("advanced");
        if event.ignorable() || crate::contract::is_known_type(event.event_type()) {
            return Ok(true);
        }
        let unknown = (self.refuse)(event.seq(), event.event_type());
        // What the rest of the read refuses comes first.
        while self.inner.advance()? {}
        Err(unknown)
    }

    fn settle(&self, scan: &mut crate::scan::Scan) {
        self.inner.settle(scan);
    }

    fn current(&self) -> Option<EventRef<'_>> {
        self.inner.current()
    }
}
