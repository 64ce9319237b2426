//! `turnwal convert`: copies sessions from one store to another, any
//! backend to any backend, losslessly.
//!
//! Each session is copied on its own:
//!
//! - The destination must not hold it: an existing session is never
//!   overwritten or appended to ([`Error::AlreadyExists`], exit status 4;
//!   with `--skip-existing` it is skipped, status 0).
//! - The copy is published whole or not at all: every event is appended as
//!   the session's first batch, which each backend materializes atomically
//!   (the WAL and JSONL write a temp file and publish it by rename or link,
//!   SQLite in one transaction). A killed convert leaves no session that
//!   looks complete but is a prefix; a re-run with `--skip-existing` copies
//!   what is missing. The price is memory: the session's events are held
//!   once (the source is read in place, [`Store::view`]).
//! - The source is read and never written: the copy is the source's inspect
//!   view.
//!   A source whose final turn is open gets the synthetic closers recovery
//!   would add, stored in the copy; torn bytes or debris after the commit
//!   point are not copied. Both are said on the session's line.
//! - The header (lineage fields included), every event's type, seq, time,
//!   payload bytes and extras, and the session's policy are kept.
//! - A session that cannot be copied (already in the destination, corrupt,
//!   unreadable, a write that fails) is reported on stderr and the others
//!   are still copied; a failed copy publishes nothing (one that fails
//!   after publishing is deleted). The exit status is 0 when every session was copied,
//!   else the highest of the failures' (2 corrupt, 4 anything else), as
//!   `verify` over a whole store does.

use std::io::Write;

use serde::Serialize;

use super::args::{ConvertArgs, SqliteArgs};
use super::location;
use super::output::{CutJson, count, cut_text, display_id, id_json, json_line};
use super::progress::Progress;
use super::{Failure, Outcome, exit};
use turnwal::error::Error;
use turnwal::event::Event;
use turnwal::scan::{Cut, LogState};
use turnwal::store::Store;

/// How many events are read between two progress reports.
const PROGRESS_EVENTS: usize = 4096;

/// The hidden test hook: `TURNWAL_TEST_CONVERT_ABORT_AFTER=N` aborts the
/// process (as a SIGKILL would end it: no cleanup) once N sessions are
/// copied, or, with `N:EVENTS`, once N sessions are copied and EVENTS events
/// of the next one are read.
const ABORT_HOOK: &str = "TURNWAL_TEST_CONVERT_ABORT_AFTER";

/// Where the test hook aborts: sessions copied, then events of the next.
fn abort_point() -> Option<(usize, Option<usize>)> {
    let value = std::env::var(ABORT_HOOK).ok()?;
    let (sessions, events) = match value.split_once(':') {
        Some((s, e)) => (s, Some(e.parse().ok()?)),
        None => (value.as_str(), None),
    };
    Some((sessions.parse().ok()?, events))
}

/// What was copied from one source session.
#[derive(Debug)]
struct Copied {
    /// The source's state.
    state: LogState,
    /// Stored source events copied.
    stored: u64,
    /// Closers the copy holds that the source does not.
    closers: u64,
    /// What the source holds after its commit point that was not copied.
    cut: Option<Cut>,
}

/// Runs `turnwal convert`. `store` is the global `--store`, which convert
/// does not use.
pub(crate) fn run(
    store: Option<&str>,
    sqlite: &SqliteArgs,
    args: &ConvertArgs,
    out: &mut dyn Write,
) -> Outcome {
    let (src, dst) = location::open_pair(
        store,
        sqlite,
        &location::Pair {
            command: "convert",
            src: ("--from", &args.from),
            dst: ("--to", &args.to),
            how: "with --from and --to",
        },
    )?;
    let ids = location::session_ids(&src, &args.sessions)?;
    let progress = Progress::new("converting", true, ids.len());
    let mut worst = exit::SUCCESS;
    let mut copied = 0usize;
    let mut skipped = 0usize;
    let abort = abort_point();
    for (i, id) in ids.iter().enumerate() {
        if args.skip_existing && dst.exists(id)? {
            skipped += 1;
            if args.json {
                json_line(out, &ConvertJson::skipped(id))?;
            } else {
                writeln!(
                    out,
                    "{}: skipped: the destination already holds it",
                    display_id(id)
                )?;
            }
            continue;
        }
        if let Some((n, events)) = abort
            && n == copied
        {
            // What the hook's kill leaves on stdout: the lines printed so far.
            out.flush()?;
            if events.is_none() {
                std::process::abort();
            }
        }
        progress.show(i, id);
        let result = copy_session(&src, &dst, id, &|done, total| {
            if let Some((n, Some(events))) = abort
                && n == copied
                && done >= events
            {
                std::process::abort();
            }
            progress.show_detail(i, id, &format!("{done}/{total} events"));
        });
        progress.clear();
        match result {
            Ok(c) => {
                copied += 1;
                if args.json {
                    json_line(out, &ConvertJson::copied(id, &c))?;
                } else {
                    writeln!(out, "{}", copied_text(id, &c))?;
                }
            }
            Err(NotCopied { failure, note }) => {
                let mut reason = match &failure {
                    Failure::Store(Error::AlreadyExists { .. }) => {
                        "the destination already holds this session (never overwritten)".into()
                    }
                    failure => failure.to_string(),
                };
                if let Some(note) = &note {
                    reason.push_str("; ");
                    reason.push_str(note);
                }
                if args.json {
                    json_line(out, &ConvertJson::failed(id, &reason))?;
                }
                // Whatever was printed for earlier sessions goes out first.
                out.flush()?;
                super::terminal::warn(format_args!("{}: not copied: {reason}", display_id(id)));
                worst = worst.max(failure.exit_status());
            }
        }
        if progress.active {
            out.flush()?;
        }
    }
    if !args.json {
        write!(
            out,
            "converted {copied} of {}",
            count(ids.len() as u64, "session")
        )?;
        if skipped > 0 {
            write!(out, " ({skipped} skipped: already in the destination)")?;
        }
        writeln!(out)?;
    }
    Ok(worst)
}

/// Why a session was not copied, and what became of a partial copy.
struct NotCopied {
    failure: Failure,
    note: Option<String>,
}

impl<E: Into<Failure>> From<E> for NotCopied {
    fn from(e: E) -> NotCopied {
        NotCopied {
            failure: e.into(),
            note: None,
        }
    }
}

/// Copies session `id` from `src` into `dst`, calling `progress(done,
/// total)` after each batch.
fn copy_session(
    src: &Store,
    dst: &Store,
    id: &str,
    progress: &dyn Fn(usize, usize),
) -> Result<Copied, NotCopied> {
    // Refused before anything is read: an existing session is never touched.
    if dst.exists(id)? {
        return Err(Error::AlreadyExists {
            id: id.to_owned(),
            on_disk: true,
        }
        .into());
    }
    let scan = src.scan(id)?;
    let view = src.view(id)?;
    let stored = view.stored();
    let closers = view.len() - stored;
    if stored as u64 != scan.stored_len() || closers != scan.closers.len() {
        return Err(Failure::Other(format!(
            "session {id:?} changed while it was read (is a writer appending to it?)"
        ))
        .into());
    }
    dst.create_with_policy(view.header().clone(), scan.policy)?;
    // The whole session is the first batch: the destination materializes
    // it atomically, so it is never visible as a prefix.
    let total = view.len();
    let mut events: Vec<Event> = Vec::with_capacity(total);
    for event in view.iter() {
        events.push(event.to_event());
        if events.len().is_multiple_of(PROGRESS_EVENTS) {
            progress(events.len(), total);
        }
    }
    let written = (|| -> Result<(), Error> {
        if !events.is_empty() {
            dst.append(id, &events)?;
        }
        progress(total, total);
        dst.flush(id)?;
        dst.close(id)
    })();
    if let Err(e) = written {
        // Nothing was published (or, if the failure came after, the copy is
        // whole): forget the pending session, delete a published one.
        let note = match dst.delete(id) {
            Ok(()) => None,
            Err(d) => Some(format!(
                "deleting the copy from the destination failed too: {d}"
            )),
        };
        return Err(NotCopied {
            failure: e.into(),
            note,
        });
    }
    Ok(Copied {
        state: view.state(),
        stored: stored as u64,
        closers: closers as u64,
        cut: scan.cut,
    })
}

/// `s1: copied 11 events (source open-turn: 9 stored + 2 closers, …)`.
fn copied_text(id: &str, c: &Copied) -> String {
    let mut line = format!(
        "{}: copied {}",
        display_id(id),
        count(c.stored + c.closers, "event")
    );
    let mut notes = Vec::new();
    if c.closers > 0 {
        notes.push(format!(
            "{} stored + {} added: the source's open final turn is closed as interrupted",
            c.stored,
            count(c.closers, "closer")
        ));
    }
    if let Some(cut) = &c.cut {
        notes.push(format!("not copied: {}", cut_text(cut)));
    }
    if !notes.is_empty() {
        line.push_str(&format!(" (source {}: {})", c.state, notes.join("; ")));
    }
    line
}

/// A `convert --json` line: one per session, copied or not.
#[derive(Serialize)]
struct ConvertJson<'a> {
    #[serde(serialize_with = "id_json")]
    id: &'a str,
    copied: bool,
    /// The source's state (null when it was not copied).
    state: Option<&'static str>,
    /// Events written to the destination: `stored + closers`.
    events: u64,
    /// Stored source events copied.
    stored: u64,
    /// Closers added for the source's open final turn.
    closers: u64,
    /// What the source holds after its commit point that was not copied.
    cut: Option<CutJson<'a>>,
    /// Why it was not copied.
    error: Option<&'a str>,
    /// Skipped by `--skip-existing` (the key appears only then).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    skipped: bool,
}

impl<'a> ConvertJson<'a> {
    fn copied(id: &'a str, c: &'a Copied) -> ConvertJson<'a> {
        ConvertJson {
            id,
            copied: true,
            state: Some(c.state.code()),
            events: c.stored + c.closers,
            stored: c.stored,
            closers: c.closers,
            cut: c.cut.as_ref().map(CutJson::from),
            error: None,
            skipped: false,
        }
    }

    fn skipped(id: &'a str) -> ConvertJson<'a> {
        ConvertJson {
            skipped: true,
            ..ConvertJson::failed(id, "the destination already holds this session")
        }
    }

    fn failed(id: &'a str, error: &'a str) -> ConvertJson<'a> {
        ConvertJson {
            id,
            copied: false,
            state: None,
            events: 0,
            stored: 0,
            closers: 0,
            cut: None,
            error: Some(error),
            skipped: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::scan::CutReason;

    #[test]
    fn lines_say_what_the_copy_holds() {
        let clean = Copied {
            state: LogState::Clean,
            stored: 12,
            closers: 0,
            cut: None,
        };
        assert_eq!(copied_text("s1", &clean), "s1: copied 12 events");
        let open = Copied {
            state: LogState::OpenTurn,
            stored: 9,
            closers: 2,
            cut: None,
        };
        assert_eq!(
            copied_text("a b", &open),
            "\"a b\": copied 11 events (source open-turn: 9 stored + 2 closers added: \
             the source's open final turn is closed as interrupted)"
        );
        let torn = Copied {
            state: LogState::Torn,
            stored: 1,
            closers: 1,
            cut: Some(Cut {
                offset: 300,
                seq: 1,
                len: 13,
                reason: CutReason::Incomplete,
                detail: String::new(),
            }),
        };
        assert_eq!(
            copied_text("s", &torn),
            "s: copied 2 events (source torn: 1 stored + 1 closer added: the source's open \
             final turn is closed as interrupted; not copied: 13 bytes at byte 300 (seq 1): \
             incomplete-record)"
        );
    }
}
