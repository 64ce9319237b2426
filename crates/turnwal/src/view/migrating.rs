//! Upstream's read-time migrations applied as a cursor lends: the stored
//! events of a [`Policy::Permissive`](crate::contract::Policy::Permissive) session
//! read one at a time through [`Normalizer`], so a whole-session read of a
//! session the binding wrote holds one event, not the log.

use super::{Cursor, EventRef};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::upstream::normalize::{NormalizeError, Normalizer};

/// How a refusal is reported: the store names the location, the backend
/// the record.
pub(crate) type Refuse = Box<dyn Fn(NormalizeError) -> Error + Send>;

/// A cursor lending `inner`'s events migrated: events no migration touches
/// (chunks, tool calls: nearly all of them) are lent as `inner` lends them;
/// the few that may change are copied, migrated and lent from here.
pub(crate) struct Migrating {
    inner: Box<dyn Cursor>,
    normalizer: Normalizer,
    /// The migrated copy of the current event, when it is one.
    migrated: Option<Event>,
    refuse: Refuse,
}

impl Migrating {
    pub(crate) fn new(inner: Box<dyn Cursor>, id: &str, refuse: Refuse) -> Migrating {
        Migrating {
            inner,
            normalizer: Normalizer::new(id),
            migrated: None,
            refuse,
        }
    }

    /// The refusal upstream gives the whole log once `failed` (or a retired
    /// form) was met: the rest of it is read for the retired forms that
    /// take precedence.
    fn refusal(&mut self, failed: Option<NormalizeError>) -> Error {
        loop {
            match self.inner.next() {
                Ok(Some(event)) => {
                    self.normalizer.note(&event);
                }
                Ok(None) => break,
                // A log that also fails to read is refused for that.
                Err(e) => return e,
            }
        }
        let why = self
            .normalizer
            .refusal(failed)
            .expect("a retired form or a failed migration was met");
        (self.refuse)(why)
    }
}

impl Cursor for Migrating {
    fn advance(&mut self) -> Result<bool> {
        self.migrated = None;
        if !self.inner.advance()? {
            return Ok(false);
        }
        let event = self.inner.current().expect("advanced");
        let retired = self.normalizer.note(&event);
        if !retired && !Normalizer::touches(event.event_type()) {
            return Ok(true);
        }
        let mut owned = event.to_event();
        if retired {
            return Err(self.refusal(None));
        }
        if let Err(e) = self.normalizer.migrate(&mut owned) {
            return Err(self.refusal(Some(e)));
        }
        self.migrated = Some(owned);
        Ok(true)
    }

    fn settle(&self, scan: &mut crate::scan::Scan) {
        self.inner.settle(scan);
    }

    fn current(&self) -> Option<EventRef<'_>> {
        match &self.migrated {
            Some(event) => Some(EventRef::from(event)),
            None => self.inner.current(),
        }
    }
}
