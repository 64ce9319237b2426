//! An event whose JSON parts borrow from storage (a map of the log, a
//! row, a window of a file) or from an [`Event`]: what readers lend one at
//! a time, and what the upstream codecs encode from, without owning it.

use std::fmt;

use super::{Event, EventKind};

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

    /// Appends the envelope's JSON to `out`, in the upstream key order:
    /// `type, seq, time, data`, then `ignorable`, and `sourceEventSeqs` and
    /// `surfaceOp` as stored (in the order they came). The one envelope
    /// writer: [`Event::write_json`] lends itself here.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":");
        crate::event::write_json_string(out, self.event_type);
        out.extend_from_slice(b",\"seq\":");
        out.extend_from_slice(self.seq.to_string().as_bytes());
        out.extend_from_slice(b",\"time\":");
        out.extend_from_slice(self.time.to_string().as_bytes());
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(self.data.as_bytes());
        if self.ignorable {
            out.extend_from_slice(b",\"ignorable\":true");
        }
        let sources = |out: &mut Vec<u8>| {
            if let Some(raw) = self.source_event_seqs {
                out.extend_from_slice(b",\"sourceEventSeqs\":");
                out.extend_from_slice(raw.as_bytes());
            }
        };
        let surface = |out: &mut Vec<u8>| {
            if let Some(raw) = self.surface_op {
                out.extend_from_slice(b",\"surfaceOp\":");
                out.extend_from_slice(raw.as_bytes());
            }
        };
        if self.surface_op_first {
            surface(out);
            sources(out);
        } else {
            sources(out);
            surface(out);
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

impl crate::event::Tracked for EventRef<'_> {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn kind(&self) -> EventKind {
        self.kind
    }
    fn event_type(&self) -> &str {
        self.event_type
    }
    fn data_text(&self) -> &str {
        self.data
    }
    fn surface_op_text(&self) -> Option<&str> {
        self.surface_op
    }
    fn has_source_event_seqs(&self) -> bool {
        self.source_event_seqs.is_some()
    }
    fn ignorable(&self) -> bool {
        self.ignorable
    }
    fn facts(&self) -> Result<crate::json::Facts, crate::json::JsonError> {
        crate::json::data_facts(self.data)
    }
}

impl fmt::Debug for EventRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        self.write_json(&mut out);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}
