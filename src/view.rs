//! Reading a stored log in place: [`EventRef`]s borrow their payloads from
//! the backend's storage (the WAL's memory map of the file, through
//! `InPlace`), so loading a large session costs an index of records, not
//! a copy of every payload. This module knows no storage format: a backend
//! decodes its own records.

use std::fmt;

use crate::event::{Event, EventKind, write_json_string};
use crate::header::SessionHeader;
use crate::scan::LogState;

/// An event whose JSON parts borrow from storage (or from an [`Event`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EventRef<'a> {
    pub(crate) event_type: &'a str,
    pub(crate) kind: EventKind,
    pub(crate) seq: u64,
    pub(crate) time: i64,
    pub(crate) data: &'a str,
    pub(crate) source_event_seqs: Option<&'a str>,
    pub(crate) surface_op: Option<&'a str>,
    pub(crate) ignorable: bool,
    pub(crate) surface_op_first: bool,
}

impl<'a> EventRef<'a> {
    /// The type name.
    pub fn event_type(&self) -> &'a str {
        self.event_type
    }

    /// The classified type.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The seq.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The time, unix ms.
    pub fn time(&self) -> i64 {
        self.time
    }

    /// The payload's JSON text, as stored.
    pub fn data(&self) -> &'a str {
        self.data
    }

    /// `sourceEventSeqs`, as stored.
    pub fn source_event_seqs(&self) -> Option<&'a str> {
        self.source_event_seqs
    }

    /// `surfaceOp`, as stored.
    pub fn surface_op(&self) -> Option<&'a str> {
        self.surface_op
    }

    /// Whether the event carries `ignorable: true`.
    pub fn ignorable(&self) -> bool {
        self.ignorable
    }

    /// An owned copy.
    pub fn to_event(&self) -> Event {
        let mut event = Event::from_parts(
            self.event_type,
            self.seq,
            self.time,
            crate::event::RawJson::trusted(self.data),
        )
        .expect("a stored event is valid");
        event.set_extras(
            self.ignorable,
            self.source_event_seqs.map(crate::event::RawJson::trusted),
            self.surface_op.map(crate::event::RawJson::trusted),
            self.surface_op_first,
        );
        event
    }

    /// Appends the envelope's JSON to `out`, exactly as [`Event::write_json`].
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":");
        write_json_string(out, self.event_type);
        out.extend_from_slice(b",\"seq\":");
        out.extend_from_slice(self.seq.to_string().as_bytes());
        out.extend_from_slice(b",\"time\":");
        out.extend_from_slice(self.time.to_string().as_bytes());
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(self.data.as_bytes());
        if self.ignorable {
            out.extend_from_slice(b",\"ignorable\":true");
        }
        let mut extras = [
            ("sourceEventSeqs", self.source_event_seqs),
            ("surfaceOp", self.surface_op),
        ];
        if self.surface_op_first {
            extras.reverse();
        }
        for (key, value) in extras {
            if let Some(text) = value {
                out.extend_from_slice(format!(",\"{key}\":").as_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
        out.push(b'}');
    }
}

impl<'a> From<&'a Event> for EventRef<'a> {
    fn from(e: &'a Event) -> EventRef<'a> {
        EventRef {
            event_type: e.event_type(),
            kind: e.kind(),
            seq: e.seq(),
            time: e.time(),
            data: e.data().get(),
            source_event_seqs: e.source_event_seqs().map(|r| r.get()),
            surface_op: e.surface_op().map(|r| r.get()),
            ignorable: e.ignorable(),
            surface_op_first: e.surface_op_first(),
        }
    }
}

impl fmt::Debug for EventRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        self.write_json(&mut out);
        f.write_str(&String::from_utf8_lossy(&out))
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
    /// How the backend classified the log it read, where it says.
    scan: Option<Box<crate::scan::Scan>>,
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
            scan: None,
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
            scan: None,
        }
    }

    /// The view with the scan that classified its log (header, commit
    /// point, cut, closers and the rest), for readers that report on the
    /// log as well as walk it (`verify`, `stats`).
    pub(crate) fn with_scan(mut self, scan: crate::scan::Scan) -> LogView {
        self.scan = Some(Box::new(scan));
        self
    }

    /// The scan the backend read the log with, if it attached it.
    pub(crate) fn scan(&self) -> Option<&crate::scan::Scan> {
        self.scan.as_deref()
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
