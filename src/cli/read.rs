//! `turnwal cat` and `turnwal tail`: a session's events as JSONL.

use std::io::Write;

use serde::Serialize;
use serde_json::value::RawValue;

use super::args::TailArgs;
use super::output::{gap_text, json_line, write_events};
use super::{Outcome, exit};
use turnwal::error::Error;
use turnwal::event::Event;
use turnwal::store::Store;

/// Prints the inspect view (stored events plus, for a crashed log, the
/// closers recovery would add), or with `raw` the stored events alone, as
/// stored (before the JSONL backend's read-time normalization), from seq
/// `from` on. Writes nothing to the store.
pub(crate) fn cat(
    store: &Store,
    id: &str,
    from: Option<u64>,
    raw: bool,
    out: &mut dyn Write,
) -> Outcome {
    let from = from.unwrap_or(0);
    if raw {
        write_events(out, &store.read_raw(id, from)?)?;
    } else if from > 0 {
        // A suffix: read from the log's end, not the log.
        write_events(out, &store.inspect_from(id, from)?)?;
    } else {
        // Read through the store's cursor and written event by event: the
        // heap holds one chunk run or sealed unit, not the log.
        let mut reader = store.read(id)?;
        let mut line = Vec::with_capacity(4096);
        while let Some(event) = reader.next_event()? {
            line.clear();
            event.write_json(&mut line);
            line.push(b'\n');
            out.write_all(&line)?;
        }
    }
    Ok(exit::SUCCESS)
}

/// `cat --salvage`: every intact event as stored (from seq `from` on), on
/// stdout; each gap named on stderr. Exits 2 when a gap is damage (a torn
/// tail recovery would cut is not).
pub(crate) fn salvage(store: &Store, id: &str, from: Option<u64>, out: &mut dyn Write) -> Outcome {
    let from = from.unwrap_or(0);
    let salvage = store.salvage(id)?;
    write_events(out, salvage.events.iter().filter(|e| e.seq() >= from))?;
    out.flush()?;
    for gap in &salvage.gaps {
        super::terminal::warn(gap_text(gap));
    }
    let damaged = salvage.gaps.iter().any(|g| g.damaged);
    Ok(if damaged {
        exit::CORRUPT
    } else {
        exit::SUCCESS
    })
}

/// Prints the last `-n` stored events (or those from `--from` on); with
/// `--follow`, then each event as it is stored ([`Store::follow`]: inotify,
/// PostgreSQL `LISTEN`, a short poll elsewhere) until interrupted. Reads
/// take no lock, so this never blocks the writer.
///
/// Following stops (exit 4, a message on stderr) when the session it
/// follows is gone: removed, or removed and recreated. The new
/// incarnation's events are never printed after the old one's.
pub(crate) fn tail(store: &Store, args: &TailArgs, out: &mut dyn Write) -> Outcome {
    let id = &args.session;
    // What is printed, and the last event read (printed or not), which the
    // follow checks it continues.
    let (events, last) = match args.from {
        Some(from) => (store.read_from(id, from)?, None),
        None => {
            // Read from the log's end: the cost is the lines asked for, not
            // the log. One event more than printed when following, so that
            // `-n 0 --follow` knows where the log ends.
            let wanted = args.lines as u64 + u64::from(args.follow && args.lines == 0);
            let mut events = store.read_last(id, wanted)?;
            let last = events.last().cloned();
            events.drain(..events.len().saturating_sub(args.lines));
            (events, last)
        }
    };
    let last = events.last().cloned().or(last);
    let next = match (&last, args.from) {
        (Some(e), _) => e.seq() + 1,
        (None, from) => from.unwrap_or(0),
    };
    let print = |out: &mut dyn Write, events: &[Event]| -> Outcome {
        if args.json {
            for event in events {
                json_line(out, &TailJson::event(id, event))?;
            }
        } else {
            write_events(out, events)?;
        }
        out.flush()?;
        Ok(exit::SUCCESS)
    };
    print(out, &events)?;
    if !args.follow {
        return Ok(exit::SUCCESS);
    }
    // Each seq once: the follow starts where the printing stopped, and its
    // first read checks that the last event printed is still there.
    let follow = match store.follow(id, next) {
        Ok(follow) => follow,
        // Read a moment ago, gone now: removed while following.
        Err(Error::NotFound { .. }) => {
            let gone = Error::FollowLost {
                id: id.clone(),
                next,
                recreated: None,
            };
            return stopped(out, args.json, id, next, gone);
        }
        Err(e) => return Err(e.into()),
    };
    let mut follow = match last {
        Some(last) => follow.continuing(last)?,
        None => follow,
    };
    loop {
        match follow.wait(None) {
            Ok(events) => {
                print(out, &events)?;
            }
            Err(e) => return stopped(out, args.json, id, follow.next_seq(), e),
        }
    }
}

/// How a follow ends: its error, after (with `--json`) a last line naming
/// it and the seq to resume from.
fn stopped(out: &mut dyn Write, json: bool, id: &str, next: u64, e: Error) -> Outcome {
    if json {
        let stopped = TailJson {
            session: id,
            next,
            event: None,
            stopped: Some(e.to_string()),
        };
        json_line(out, &stopped)?;
        out.flush()?;
    }
    Err(e.into())
}

/// A line of `tail --json`.
#[derive(Serialize)]
struct TailJson<'a> {
    session: &'a str,
    /// The seq to resume from.
    next: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<String>,
}

impl<'a> TailJson<'a> {
    fn event(session: &'a str, event: &Event) -> TailJson<'a> {
        TailJson {
            session,
            next: event.seq() + 1,
            // An envelope the store serves is one JSON object.
            event: RawValue::from_string(event.to_json()).ok(),
            stopped: None,
        }
    }
}
