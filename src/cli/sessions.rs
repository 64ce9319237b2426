//! `turnwal ls`, `turnwal stats`, `turnwal fork` and `turnwal rm`: whole
//! sessions.

use std::collections::BTreeMap;
use std::io::Write;

use super::output::{SessionJson, StatsJson, Table, display_id, iso_utc, json_line};
use super::{Failure, Outcome, exit};
use crate::event::Event;
use crate::scan::LogState;
use crate::store::Store;

/// Lists the sessions, sorted by id: an aligned table with a header row, or
/// one JSON object per line.
pub(crate) fn ls(store: &Store, json: bool, out: &mut dyn Write) -> Outcome {
    let mut sessions = store.list()?;
    sessions.sort_by(|a, b| a.id.cmp(&b.id));
    super::check::report_foreign(store)?;
    if json {
        for s in &sessions {
            json_line(out, &SessionJson::from(s))?;
        }
        return Ok(exit::SUCCESS);
    }
    let mut table = Table::new(
        &[
            "ID",
            "EVENTS",
            "TURNS",
            "BYTES",
            "LAST ACTIVITY",
            "STATE",
            "CHECKED",
        ],
        &[false, true, true, true, false, false, false],
    );
    for s in &sessions {
        table.row(vec![
            display_id(&s.id).into_owned(),
            s.events.to_string(),
            s.turns.to_string(),
            s.bytes.to_string(),
            s.last_activity.map_or_else(|| "-".to_owned(), iso_utc),
            s.state.code().to_owned(),
            s.checked.code().to_owned(),
        ]);
    }
    table.write(out)?;
    Ok(exit::SUCCESS)
}

/// Prints a session's state, size, turns, closers pending, the time span and
/// the count of each event type, all of stored events (closers excluded).
pub(crate) fn stats(store: &Store, id: &str, json: bool, out: &mut dyn Write) -> Outcome {
    let view = store.inspect(id)?;
    let report = store.verify(id)?;
    if report.state == LogState::Corrupt {
        let problem = report.problem.unwrap_or_default();
        return Err(Failure::Corrupt(format!(
            "session {id:?} is corrupt: {problem}"
        )));
    }
    let stored = &view.events[..view.stored as usize];
    let mut types: BTreeMap<&str, u64> = BTreeMap::new();
    for event in stored {
        *types.entry(event.event_type()).or_default() += 1;
    }
    let stats = StatsJson {
        id,
        state: report.state.code(),
        events: view.stored,
        turns: report.turns,
        bytes: report.bytes,
        closers: report.closers,
        first_time: stored.first().map(Event::time),
        last_time: stored.last().map(Event::time),
        types,
    };
    if json {
        json_line(out, &stats)?;
    } else {
        stats_text(&stats, out)?;
    }
    Ok(exit::SUCCESS)
}

fn stats_text(s: &StatsJson<'_>, out: &mut dyn Write) -> std::io::Result<()> {
    let time = |t: Option<i64>| t.map_or_else(|| "-".to_owned(), iso_utc);
    let mut table = Table::headless(&[false, false]);
    for (key, value) in [
        ("session", display_id(s.id).into_owned()),
        ("state", s.state.to_owned()),
        ("events", s.events.to_string()),
        ("turns", s.turns.to_string()),
        ("bytes", s.bytes.to_string()),
        ("closers", s.closers.to_string()),
        ("first time", time(s.first_time)),
        ("last time", time(s.last_time)),
    ] {
        table.row(vec![key.to_owned(), value]);
    }
    table.write(out)?;
    writeln!(out, "types")?;
    let mut types = Table::headless(&[false, true]);
    for (name, count) in &s.types {
        types.row(vec![format!("  {name}"), count.to_string()]);
    }
    types.write(out)
}

/// Forks `id` into `child` (events `0..=at`, by default all) and prints the
/// child's header.
pub(crate) fn fork(
    store: &Store,
    id: &str,
    child: &str,
    at: Option<u64>,
    out: &mut dyn Write,
) -> Outcome {
    let header = store.fork(id, at, child)?;
    writeln!(out, "{}", header.to_json())?;
    Ok(exit::SUCCESS)
}

/// Deletes session `id` (under its writer lock) and says so.
/// `turnwal compact`: seals each session's closed turns, one line each.
pub(crate) fn compact(
    store: &Store,
    args: &super::args::CompactArgs,
    out: &mut dyn Write,
) -> Outcome {
    let ids: Vec<String> = if args.all {
        store.list()?.into_iter().map(|s| s.id).collect()
    } else {
        args.sessions.clone()
    };
    for id in ids {
        let done = store.compact(&id)?;
        store.close(&id)?;
        match done {
            Some(c) => writeln!(out, "{} {} -> {} bytes", display_id(&id), c.before, c.after)?,
            None => writeln!(
                out,
                "{} unchanged (nothing to compact in this store)",
                display_id(&id)
            )?,
        }
    }
    Ok(exit::SUCCESS)
}

pub(crate) fn rm(store: &Store, id: &str, out: &mut dyn Write) -> Outcome {
    store.delete(id)?;
    writeln!(out, "deleted {}", display_id(id))?;
    Ok(exit::SUCCESS)
}
