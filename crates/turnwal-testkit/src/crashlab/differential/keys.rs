//! The comparison keys: each answer as text without what is the
//! backend's own, and JSONL's reading of the WAL's answer.

use turnwal::error::{Error, Result};
use turnwal::event::Event;
use turnwal::header::SessionHeader;
use turnwal::scan::SessionSummary;
use turnwal::store::{RecoveryReport, SessionView};

pub(super) fn err_key(e: &Error) -> String {
    match e {
        Error::Corrupt(c) => format!("Corrupt(seq {:?})", c.seq),
        Error::Io { op, source, .. } => format!("Io({op}, {:?})", source.kind()),
        Error::Locked { id, .. } => format!("Locked({id})"),
        Error::Unsupported { detail, .. } => format!("Unsupported({detail})"),
        other => format!("{other:?}"),
    }
}

/// An event with everything that makes it this event: its JSON line, and
/// the key order of `surfaceOp` when only it is present (where the line
/// cannot show it).
fn event_key(e: &Event) -> String {
    let mut s = e.to_json();
    if e.surface_op_first() && e.source_event_seqs().is_none() {
        s.push_str(" [surfaceOp first]");
    }
    s
}

/// An event as a JSONL store reads it back: a line holding `surfaceOp`
/// without `sourceEventSeqs` cannot show their key order, so the reader
/// takes the order the event would have been built with (`surfaceOp` first
/// for a tool result in recovery's closer shape; docs/JSONL.md, "Records";
/// `records::decode_line`).
fn as_jsonl_reads(e: &Event) -> std::borrow::Cow<'_, Event> {
    use turnwal::backend::rows::codec::surface_first_by_default;
    match (e.surface_op(), e.source_event_seqs()) {
        (Some(op), None)
            if e.surface_op_first() != surface_first_by_default(e.event_type(), e.data().get()) =>
        {
            let mut read = e.clone();
            read.set_extras(e.ignorable(), None, Some(op.clone()), !e.surface_op_first());
            std::borrow::Cow::Owned(read)
        }
        _ => std::borrow::Cow::Borrowed(e),
    }
}

/// Whether `theirs` is `ours`, as a JSONL store would read `ours` back
/// when `jsonl`.
pub(super) fn same_events(ours: &[Event], theirs: &[Event], jsonl: bool) -> bool {
    ours.len() == theirs.len()
        && ours.iter().zip(theirs).all(|(a, b)| {
            if jsonl {
                *as_jsonl_reads(a) == *b
            } else {
                a == b
            }
        })
}

pub(super) fn events_key(events: &[Event], jsonl: bool) -> String {
    let mut out = String::new();
    for e in events {
        let e = if jsonl {
            as_jsonl_reads(e)
        } else {
            std::borrow::Cow::Borrowed(e)
        };
        out.push_str(&event_key(&e));
        out.push('\n');
    }
    out
}

/// A header's JSON; with `fill`, as a JSONL store stores it (a missing
/// `delegationDepth` is 0).
pub(super) fn header_key(h: &SessionHeader, fill: bool) -> String {
    if fill && h.delegation_depth.is_none() {
        let mut h = h.clone();
        h.delegation_depth = Some(0);
        return h.to_json();
    }
    h.to_json()
}

pub(super) fn view_key(v: &SessionView, fill: bool) -> String {
    format!(
        "header={} stored={} state={} cut={:?} live={}\n{}",
        header_key(&v.header, fill),
        v.stored,
        v.state,
        v.cut.as_ref().map(|c| (c.seq, c.reason)),
        v.live,
        events_key(&v.events, fill)
    )
}

pub(super) fn report_key(r: &RecoveryReport, jsonl: bool) -> String {
    format!(
        "state={} kept={} committed={} cut={:?}\n{}",
        r.state,
        r.kept,
        r.committed,
        r.cut.as_ref().map(|c| (c.seq, c.reason)),
        events_key(&r.closers, jsonl)
    )
}

/// A listing row without what is the backend's own: the byte size, and the
/// position and decoder message in a torn session's `problem` (`"<reason
/// code> at byte N: …"` against `"<reason code> at row N: …"`), of which
/// the reason code is compared.
pub(super) fn summary_key(s: &SessionSummary, fill: bool) -> String {
    format!(
        "{} header={:?} events={} turns={} last={:?} state={} problem={:?}",
        s.id,
        s.header.as_ref().map(|h| header_key(h, fill)),
        s.events,
        s.turns,
        s.last_activity,
        s.state,
        s.problem
            .as_deref()
            .map(|p| p.split_once(" at ").map_or(p, |(code, _)| code))
    )
}

pub(super) fn key<T>(result: &Result<T>, show: impl FnOnce(&T) -> String) -> String {
    match result {
        Ok(v) => show(v),
        Err(e) => format!("error {}", err_key(e)),
    }
}
