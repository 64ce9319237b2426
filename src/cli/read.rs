//! `turnwal cat` and `turnwal tail`: a session's events as JSONL.

use std::io::Write;
use std::thread;
use std::time::Duration;

use super::args::TailArgs;
use super::output::{gap_text, write_events};
use super::{Failure, Outcome, exit};
use turnwal::error::Error;
use turnwal::store::Store;

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

/// Prints the last `-n` stored events; with `--follow`, polls for events
/// another process appends and prints them until interrupted. Reads take no
/// lock, so this never blocks the writer.
///
/// Following stops (exit 4, a message on stderr) when the session it
/// follows is gone: removed, or removed and recreated between two polls (its
/// header changed, it holds fewer events than were read, or the last event
/// read is no longer the one at its seq). The new incarnation's events are
/// never printed after the old one's.
pub(crate) fn tail(store: &Store, args: &TailArgs, out: &mut dyn Write) -> Outcome {
    let id = &args.session;
    // Read from the log's end: the cost is the lines asked for, not the log.
    // One event more than printed is read when following, so `-n 0
    // --follow` still knows where the log ends.
    let wanted = args.lines as u64 + u64::from(args.follow && args.lines == 0);
    // What the log was before it was read: an idle log then costs a stat a
    // poll, not a read (a compacted log's last unit would be decompressed
    // each time). Taken before the read, so a change during it, or before
    // the first poll, is read at the next poll.
    let mut seen = if args.follow {
        store.revision(id)?
    } else {
        None
    };
    let events = store.read_last(id, wanted)?;
    // Read before anything is printed: the incarnation that is followed.
    let header = args.follow.then(|| store.header(id)).transpose()?;
    let skip = events.len().saturating_sub(args.lines);
    write_events(out, &events[skip..])?;
    out.flush()?;
    let Some(header) = header else {
        return Ok(exit::SUCCESS);
    };
    // Event i has seq i, so the next seq to look for follows the last read.
    let mut next = events.last().map_or(0, |e| e.seq() + 1);
    let mut last = events.last().cloned();
    loop {
        thread::sleep(FOLLOW_INTERVAL);
        // Taken before the read: a write during it shows at the next poll.
        let revision = store.revision(id)?;
        if revision.is_none() {
            return Err(gone(id, next, None));
        }
        if revision == seen {
            continue;
        }
        seen = revision;
        // The last event read comes back too, to prove the log continues it.
        let from = next.saturating_sub(1);
        let read = store
            .read_from(id, from)
            .and_then(|events| Ok((events, store.header(id)?)));
        let (mut new, now) = match read {
            Ok(read) => read,
            Err(Error::NotFound { .. }) => return Err(gone(id, next, None)),
            Err(e) => return Err(e.into()),
        };
        if now != header {
            let why = format!(
                "header createdAt {}, now {}",
                header.created_at, now.created_at
            );
            return Err(gone(id, next, Some(&why)));
        }
        if let Some(last) = &last {
            match new.first() {
                None => {
                    let why = format!("it holds fewer events than the {next} read");
                    return Err(gone(id, next, Some(&why)));
                }
                Some(first) if first.to_json() != last.to_json() => {
                    let why = format!("its event at seq {from} is not the one read");
                    return Err(gone(id, next, Some(&why)));
                }
                Some(_) => {
                    new.remove(0);
                }
            }
        }
        if let Some(event) = new.last() {
            next = event.seq() + 1;
            write_events(out, &new)?;
            out.flush()?;
            last = Some(event.clone());
        }
    }
}

/// Why `tail --follow` stopped: the session it followed was removed, or
/// (with `recreated`, saying how that showed) removed and recreated.
fn gone(id: &str, next: u64, recreated: Option<&str>) -> Failure {
    let after = match next {
        0 => "before any event".to_owned(),
        n => format!("after seq {}", n - 1),
    };
    Failure::Other(match recreated {
        None => format!("session {id:?} was removed while following; stopped {after}"),
        Some(why) => format!(
            "session {id:?} was removed and recreated while following ({why}); stopped {after}, \
             printing nothing of the new session"
        ),
    })
}
