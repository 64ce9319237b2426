//! `turnwal ls`, `turnwal stats`, `turnwal fork` and `turnwal rm`: whole
//! sessions.

use std::io::Write;

use super::Failure;
use super::args::{HeadArgs, LsArgs, LsSort};
use super::listing::natural_cmp;
use super::output::{
    SessionJson, Table, display_id, human_bytes, iso_utc, json_line, live_word, local_time,
    state_word,
};
use super::{Outcome, exit};
use turnwal::backend::Holder;
use turnwal::scan::SessionSummary;
use turnwal::store::Store;

/// How many of a session's first events `ls` reads for its title.
const TITLE_EVENTS: usize = 64;
/// How many characters of the title `ls` shows.
const TITLE_CHARS: usize = 48;

/// The first user message's text, whitespace folded, cut to
/// [`TITLE_CHARS`] (`None` when the first events hold none).
fn title(store: &Store, id: &str) -> Option<String> {
    let events = store.read_first(id, TITLE_EVENTS).ok()?;
    let message = events
        .iter()
        .find(|e| e.kind() == turnwal::event::EventKind::UserMessage)?;
    let data: serde_json::Value = serde_json::from_str(message.data().get()).ok()?;
    let text = super::show::message_text(&data);
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.is_empty() {
        return None;
    }
    Some(match folded.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &folded[..cut]),
        None => folded,
    })
}

/// Whether `cwd` is `dir` or inside it.
fn under(cwd: Option<&str>, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    cwd.is_some_and(|c| {
        c == dir
            || c.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
    }) || dir.is_empty() && cwd.is_some_and(|c| c.starts_with('/'))
}

/// Lists the sessions: filtered, sorted (natural order of ids by default),
/// as an aligned table or one JSON object per line.
pub(crate) fn ls(store: &Store, args: &LsArgs, out: &mut dyn Write) -> Outcome {
    let since = args
        .since
        .as_deref()
        .map(|s| super::when::parse_time(s, super::when::now_ms()))
        .transpose()
        .map_err(Failure::Usage)?;
    for state in &args.state {
        if !["clean", "clean-end", "open-turn", "torn", "corrupt", "live"].contains(&state.as_str())
        {
            return Err(Failure::Usage(format!(
                "--state {state:?}: one of clean, clean-end, open-turn, torn, corrupt, live"
            )));
        }
    }
    let sessions = store.list()?;
    super::listing::report_foreign(store)?;
    let ids: Vec<String> = sessions.iter().map(|s| s.id.clone()).collect();
    let holders = store.holders(&ids)?;
    let mut sessions: Vec<(SessionSummary, Option<Holder>)> =
        sessions.into_iter().zip(holders).collect();
    sessions.retain(|(s, holder)| {
        let cwd = s.header.as_ref().and_then(|h| h.cwd.as_deref());
        let word = if holder.is_some() {
            "live"
        } else {
            state_word(s)
        };
        (args.state.is_empty() || args.state.iter().any(|st| st == word))
            && since.is_none_or(|t| s.last_activity.is_some_and(|a| a >= t))
            && args.cwd.as_deref().is_none_or(|dir| under(cwd, dir))
    });
    let created = |s: &SessionSummary| s.header.as_ref().map(|h| h.created_at);
    sessions.sort_by(|(a, _), (b, _)| {
        let by = match args.sort {
            LsSort::Id => std::cmp::Ordering::Equal,
            LsSort::Activity => b.last_activity.cmp(&a.last_activity),
            LsSort::Created => created(b).cmp(&created(a)),
            LsSort::Size => b.bytes.cmp(&a.bytes),
            LsSort::Events => b.events.cmp(&a.events),
        };
        by.then_with(|| natural_cmp(&a.id, &b.id))
    });
    if let Some(limit) = args.limit {
        sessions.truncate(limit);
    }
    if args.json {
        for (s, holder) in &sessions {
            let mut line = SessionJson::from(s);
            line.title = title(store, &s.id);
            if let Some(holder) = holder {
                line.held_by(holder);
            }
            json_line(out, &line)?;
        }
        return Ok(exit::SUCCESS);
    }
    let mut table = Table::new(
        &[
            "ID",
            "STATE",
            "EVENTS",
            "TURNS",
            "SIZE",
            "LAST ACTIVITY",
            "CREATED",
            "CWD",
            "TITLE",
            "CHECKED",
        ],
        &[
            false, false, true, true, true, false, false, false, false, false,
        ],
    );
    for (s, holder) in &sessions {
        let header = s.header.as_ref();
        table.row(vec![
            display_id(&s.id).into_owned(),
            holder
                .as_ref()
                .map_or_else(|| state_word(s).to_owned(), live_word),
            s.events.to_string(),
            s.turns.to_string(),
            human_bytes(s.bytes),
            s.last_activity.map_or_else(|| "-".to_owned(), local_time),
            header
                .and_then(|h| i64::try_from(h.created_at).ok())
                .map_or_else(|| "-".to_owned(), local_time),
            header
                .and_then(|h| h.cwd.as_deref())
                .map_or_else(|| "-".to_owned(), |c| display_id(c).into_owned()),
            title(store, &s.id).unwrap_or_else(|| "-".to_owned()),
            s.checked.code().to_owned(),
        ]);
    }
    table.write(out)?;
    Ok(exit::SUCCESS)
}

/// `turnwal head SESSION`: the stored header, read without the events.
pub(crate) fn head(store: &Store, args: &HeadArgs, out: &mut dyn Write) -> Outcome {
    let header = store.header(&args.session)?;
    if args.json {
        writeln!(out, "{}", header.to_json())?;
        return Ok(exit::SUCCESS);
    }
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let mut table = Table::headless(&[false, false]);
    for (key, value) in [
        ("id", display_id(&header.id).into_owned()),
        ("version", header.version.to_string()),
        (
            "created",
            i64::try_from(header.created_at).map_or_else(
                |_| "-".into(),
                |ms| format!("{} ({})", iso_utc(ms), local_time(ms)),
            ),
        ),
        ("cwd", opt(header.cwd.clone())),
        (
            "parent",
            opt(header
                .parent_session
                .as_deref()
                .map(|p| display_id(p).into_owned())),
        ),
        (
            "seed length",
            opt(header.seed_length.map(|n| n.to_string())),
        ),
        ("origin", opt(header.origin.clone())),
        (
            "delegation depth",
            opt(header.delegation_depth.map(|n| n.to_string())),
        ),
        ("agent preset", opt(header.agent_preset.clone())),
    ] {
        table.row(vec![key.to_owned(), value]);
    }
    table.write(out)?;
    Ok(exit::SUCCESS)
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
    // Each session on its own: one that needs `recover` (or is corrupt, or
    // held) is named on stderr and the others are still compacted; the
    // exit status is the worst.
    let mut worst = exit::SUCCESS;
    for id in ids {
        match store.compact(&id).and_then(|done| {
            store.close(&id)?;
            Ok(done)
        }) {
            Ok(Some(c)) => writeln!(out, "{} {} -> {} bytes", display_id(&id), c.before, c.after)?,
            Ok(None) => writeln!(
                out,
                "{} unchanged (nothing to compact in this store)",
                display_id(&id)
            )?,
            Err(e) => {
                let f = super::Failure::from(e);
                super::terminal::warn(&f);
                worst = worst.max(f.exit_status());
            }
        }
    }
    Ok(worst)
}

pub(crate) fn rm(store: &Store, id: &str, out: &mut dyn Write) -> Outcome {
    store.delete(id)?;
    writeln!(out, "deleted {}", display_id(id))?;
    Ok(exit::SUCCESS)
}
