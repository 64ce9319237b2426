//! `turnwal cat` and `turnwal tail`: a session's events as JSONL.

use std::io::Write;
use std::thread;
use std::time::Duration;

use super::args::TailArgs;
use super::output::{gap_text, write_events};
use super::{Outcome, exit};
use crate::store::Store;

/// How often `tail --follow` looks for new events.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

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
    } else {
        let view = store.inspect(id)?;
        write_events(out, view.events.iter().filter(|e| e.seq() >= from))?;
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
        eprintln!("turnwal: {}", gap_text(gap));
    }
    let damaged = salvage.gaps.iter().any(|g| g.damaged);
    Ok(if damaged {
        exit::CORRUPT
    } else {
        exit::SUCCESS
    })
}

/// Prints the last `-n` stored events; with `--follow`, polls for events
/// another process appends and prints them until interrupted. Reads take no
/// lock, so this never blocks the writer.
pub(crate) fn tail(store: &Store, args: &TailArgs, out: &mut dyn Write) -> Outcome {
    let events = store.read_from(&args.session, 0)?;
    let skip = events.len().saturating_sub(args.lines);
    write_events(out, &events[skip..])?;
    out.flush()?;
    if !args.follow {
        return Ok(exit::SUCCESS);
    }
    // Event i has seq i, so the stored length is the next seq to look for.
    let mut next = events.len() as u64;
    loop {
        thread::sleep(FOLLOW_INTERVAL);
        let new = store.read_from(&args.session, next)?;
        if let Some(last) = new.last() {
            next = last.seq() + 1;
            write_events(out, &new)?;
            out.flush()?;
        }
    }
}
