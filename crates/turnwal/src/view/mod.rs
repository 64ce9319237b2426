//! Reading a stored log in place: [`EventRef`]s borrow their payloads from
//! the backend's storage (the WAL's memory map of the file, through
//! `InPlace`), so loading a large session costs an index of records, not
//! a copy of every payload. This module knows no storage format: a backend
//! decodes its own records.

use std::fmt;

mod known_types;
mod migrating;
pub(crate) use known_types::{KnownTypes, Unknown};
pub(crate) use migrating::{Migrating, Refuse};

use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::LogState;

pub use crate::event::EventRef;

/// The one read primitive every backend answers: a cursor over a
/// session's stored events in seq order, each lent until the next call. A
/// backend's cursor reads its checked records and expands a chunk run or a
/// sealed unit only when it reaches it, holding at most one of them, so a
/// whole-session read costs what one run or unit holds, whatever the
/// session's size (docs/ARCHITECTURE.md, "How a read travels").
pub trait Cursor: Send {
    /// Moves to the next stored event; `false` after the last. An error (a
    /// record that does not decode, a unit that does not check) ends the
    /// read: every event lent before it was intact.
    fn advance(&mut self) -> crate::error::Result<bool>;

    /// The event [`Cursor::advance`] moved to (`None` before the first
    /// advance and after the last). Lending it apart from advancing lets a
    /// cursor that wraps another look at an event and then lend either it
    /// or something made from it.
    fn current(&self) -> Option<EventRef<'_>>;

    /// The next stored event, `None` after the last.
    fn next(&mut self) -> crate::error::Result<Option<EventRef<'_>>> {
        Ok(if self.advance()? {
            self.current()
        } else {
            None
        })
    }

    /// Once the cursor has ended, corrects what its reader announced from
    /// less than the whole log (a JSONL read from the log's ends learns the
    /// turns started before the commit point only by reading them). The
    /// default changes nothing.
    fn settle(&self, scan: &mut crate::scan::Scan) {
        let _ = scan;
    }
}

/// Events held in memory, as a [`Cursor`] (a backend without a cursor of
/// its own, a normalized read).
pub(crate) struct Held {
    events: Vec<Event>,
    next: usize,
}

impl Held {
    pub(crate) fn new(events: Vec<Event>) -> Held {
        Held { events, next: 0 }
    }
}

impl Cursor for Held {
    fn advance(&mut self) -> crate::error::Result<bool> {
        self.next += 1;
        Ok(self.next <= self.events.len())
    }

    fn current(&self) -> Option<EventRef<'_>> {
        self.events
            .get(self.next.checked_sub(1)?)
            .map(EventRef::from)
    }
}

/// A session read from its start, one event at a time: its stored events
/// (from a backend's [`Cursor`]), then the synthetic closers a crashed
/// log's open turn would get (written nowhere), with what the scan that
/// classified the log found. What `turnwal cat`, `verify`, `stats`, `grep`,
/// `show` and `export` walk, in bounded memory.
///
/// ```
/// use turnwal::{Event, SessionHeader, Store};
/// let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(dir.path()).unwrap();
/// store.create(SessionHeader::new("s", 1)).unwrap();
/// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
/// drop(store); // a crash with the turn open
/// let mut reader = Store::open(dir.path()).unwrap().read("s").unwrap();
/// assert_eq!((reader.stored(), reader.len()), (1, 2));
/// assert_eq!(reader.next_event().unwrap().unwrap().data(), r#"{"turn":1}"#);
/// assert_eq!(reader.next_event().unwrap().unwrap().event_type(), "turn/end"); // the closer
/// assert!(reader.next_event().unwrap().is_none());
/// ```
pub struct LogReader {
    header: SessionHeader,
    state: LogState,
    scan: Option<Box<crate::scan::Scan>>,
    stored: u64,
    cursor: Box<dyn Cursor>,
    closers: Vec<Event>,
    /// Events lent so far, closers included.
    lent: u64,
    /// Whether the cursor has ended.
    finished: bool,
}

impl LogReader {
    /// A reader of `stored` events from `cursor`, then `closers`.
    pub(crate) fn new(
        header: SessionHeader,
        state: LogState,
        stored: u64,
        cursor: Box<dyn Cursor>,
        closers: Vec<Event>,
    ) -> LogReader {
        LogReader {
            header,
            state,
            scan: None,
            stored,
            cursor,
            closers,
            lent: 0,
            finished: false,
        }
    }

    /// The reader lending through `wrap(cursor)` instead of its cursor.
    pub(crate) fn map_cursor(
        mut self,
        wrap: impl FnOnce(Box<dyn Cursor>) -> Box<dyn Cursor>,
    ) -> LogReader {
        self.cursor = wrap(self.cursor);
        self
    }

    /// The reader with the scan that classified its log.
    /// The reader of the log `scan` classified, lent by `cursor`: its
    /// header, state, stored count and closers, the scan attached.
    pub(crate) fn of_scan(scan: crate::scan::Scan, cursor: Box<dyn Cursor>) -> LogReader {
        LogReader::new(
            scan.header.clone(),
            scan.state(),
            scan.stored_len(),
            cursor,
            scan.closers.clone(),
        )
        .with_scan(scan)
    }

    pub(crate) fn with_scan(mut self, scan: crate::scan::Scan) -> LogReader {
        self.scan = Some(Box::new(scan));
        self
    }

    /// The scan the backend classified the log with, where it attached it.
    pub fn scan(&self) -> Option<&crate::scan::Scan> {
        self.scan.as_deref()
    }

    /// The session header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The state of the stored log when it was read.
    pub fn state(&self) -> LogState {
        self.state
    }

    /// How many events are stored (the rest are closers).
    pub fn stored(&self) -> u64 {
        self.stored
    }

    /// All events: stored ones and closers.
    pub fn len(&self) -> u64 {
        self.stored + self.closers.len() as u64
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The closers the reader ends with.
    pub fn closers(&self) -> &[Event] {
        &self.closers
    }

    /// The next event, stored ones first, then the closers; `None` after
    /// the last.
    pub fn next_event(&mut self) -> crate::error::Result<Option<EventRef<'_>>> {
        let at = self.lent;
        if at < self.stored {
            self.lent += 1;
            return match self.cursor.next()? {
                Some(event) => Ok(Some(event)),
                None => Err(crate::error::Error::Corrupt(Box::new(
                    crate::error::Corruption {
                        path: std::path::PathBuf::from(&self.header.id),
                        offset: at,
                        unit: crate::error::Unit::Event,
                        seq: Some(at),
                        reason: format!(
                            "the log ended after {at} of the {} events its scan found",
                            self.stored
                        ),
                    },
                ))),
            };
        }
        self.finish()?;
        let closer = self.closers.get((at - self.stored) as usize);
        if closer.is_some() {
            self.lent += 1;
        }
        Ok(closer.map(EventRef::from))
    }

    /// After the last stored event: the cursor is asked for one more, so
    /// it ends (and checks what it must at its end), and settles the scan.
    fn finish(&mut self) -> crate::error::Result<()> {
        if self.finished {
            return Ok(());
        }
        if self.cursor.advance()? {
            return Err(crate::error::Error::Corrupt(Box::new(
                crate::error::Corruption {
                    path: std::path::PathBuf::from(&self.header.id),
                    offset: self.stored,
                    unit: crate::error::Unit::Event,
                    seq: Some(self.stored),
                    reason: format!(
                        "the log holds more than the {} events its scan found",
                        self.stored
                    ),
                },
            )));
        }
        if let Some(scan) = self.scan.as_deref_mut() {
            self.cursor.settle(scan);
        }
        self.finished = true;
        Ok(())
    }

    /// Calls `f` with every remaining stored event (not the closers), in
    /// order, stopping at the first error `f` or the cursor returns.
    pub fn for_each_stored<E: From<crate::error::Error>>(
        &mut self,
        mut f: impl FnMut(EventRef<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        while self.lent < self.stored {
            match self.next_event()? {
                Some(event) => f(event)?,
                None => break,
            }
        }
        self.finish()?;
        Ok(())
    }
}

impl fmt::Debug for LogReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LogReader({:?}, {} events, {})",
            self.header.id,
            self.len(),
            self.state
        )
    }
}

/// Stored events a backend reads in place, by index: its own decoding of
/// its storage (the WAL's validated records of a mapped file).
pub(crate) trait InPlace: Send + Sync {
    /// How many events are stored.
    fn len(&self) -> usize;

    /// Event `i`, `i < len()`, borrowing from the storage.
    fn get(&self, i: usize) -> EventRef<'_>;
}

enum Source {
    /// Events a backend reads in place.
    InPlace(Box<dyn InPlace>),
    /// Events held in memory.
    Owned(Vec<Event>),
}

/// A session's events read in place: the stored events, then (for a log a
/// crash left open) the synthetic closers, written nowhere.
///
/// ```
/// use turnwal::{Event, SessionHeader, Store};
/// let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(dir.path()).unwrap();
/// store.create(SessionHeader::new("s", 1)).unwrap();
/// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
/// drop(store); // a crash with the turn open
/// let view = Store::open(dir.path()).unwrap().view("s").unwrap();
/// assert_eq!(view.len(), 2); // the stored turn/start and its closer
/// assert_eq!(view.get(0).unwrap().data(), r#"{"turn":1}"#);
/// assert_eq!(view.iter().last().unwrap().event_type(), "turn/end");
/// ```
pub struct LogView {
    header: SessionHeader,
    state: LogState,
    source: Source,
    closers: Vec<Event>,
}

impl LogView {
    /// A view over events a backend reads in place.
    pub(crate) fn in_place(
        header: SessionHeader,
        state: LogState,
        events: Box<dyn InPlace>,
        closers: Vec<Event>,
    ) -> LogView {
        LogView {
            header,
            state,
            source: Source::InPlace(events),
            closers,
        }
    }

    /// A view over events held in memory.
    pub(crate) fn owned(
        header: SessionHeader,
        state: LogState,
        events: Vec<Event>,
        closers: Vec<Event>,
    ) -> LogView {
        LogView {
            header,
            state,
            source: Source::Owned(events),
            closers,
        }
    }

    /// Drops the closers (a live session's open turn is not interrupted).
    pub(crate) fn without_closers(mut self) -> LogView {
        self.closers.clear();
        self
    }

    /// The session header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The state of the stored log when it was read.
    pub fn state(&self) -> LogState {
        self.state
    }

    /// How many events are stored (the rest are closers).
    pub fn stored(&self) -> usize {
        match &self.source {
            Source::InPlace(events) => events.len(),
            Source::Owned(events) => events.len(),
        }
    }

    /// All events: stored ones and closers.
    pub fn len(&self) -> usize {
        self.stored() + self.closers.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Event `i` (its seq).
    pub fn get(&self, i: usize) -> Option<EventRef<'_>> {
        let stored = self.stored();
        if i >= stored {
            return self.closers.get(i - stored).map(EventRef::from);
        }
        Some(match &self.source {
            Source::InPlace(events) => events.get(i),
            Source::Owned(events) => EventRef::from(&events[i]),
        })
    }

    /// Every event in order.
    pub fn iter(&self) -> impl Iterator<Item = EventRef<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i).expect("in range"))
    }
}

impl fmt::Debug for LogView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LogView({:?}, {} events, {})",
            self.header.id,
            self.len(),
            self.state
        )
    }
}
