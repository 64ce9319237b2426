//! `turnwal grep PATTERN`: search the stored events of every session (or
//! the named ones), streaming, one line per hit with the session, seq,
//! turn, type and a snippet around the match.

use std::io::Write;

use regex::{Regex, RegexBuilder};
use serde::Serialize;

use super::args::GrepArgs;
use super::digest::Digest;
use super::output::{display_id, id_json, json_line};
use super::{Failure, Outcome, exit, when};
use turnwal::event::EventKind;
use turnwal::store::Store;
use turnwal::view::EventRef;

/// Bytes of context shown before and after a match.
const BEFORE: usize = 40;
const AFTER: usize = 80;

#[derive(Serialize)]
struct Hit<'a> {
    #[serde(serialize_with = "id_json")]
    session: &'a str,
    seq: u64,
    turn: u64,
    #[serde(rename = "type")]
    event_type: &'a str,
    time: i64,
    snippet: String,
}

/// What an event must be to be searched.
struct Filter {
    types: Vec<String>,
    errors: bool,
    since: Option<i64>,
}

impl Filter {
    fn admits(&self, event: EventRef<'_>) -> bool {
        if self.since.is_some_and(|since| event.time() < since) {
            return false;
        }
        let name = event.event_type();
        if !self.types.is_empty()
            && !self.types.iter().any(|t| match t.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == t,
            })
        {
            return false;
        }
        !self.errors || is_error(event)
    }
}

/// A failed tool result, or a turn that ended in an error.
fn is_error(event: EventRef<'_>) -> bool {
    match event.kind() {
        EventKind::ToolResult => {
            let mut digest = Digest::default();
            digest.add(event);
            digest.tool_totals().failures > 0
        }
        EventKind::TurnEnd => {
            let mut digest = Digest::default();
            digest.add(event);
            digest.outcomes.contains_key("error")
        }
        _ => false,
    }
}

/// The text around `range` of `text`, cut at character boundaries, with
/// `…` where it was cut.
fn snippet(text: &str, range: std::ops::Range<usize>) -> String {
    let mut start = range.start.saturating_sub(BEFORE);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (range.end + AFTER).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!(
        "{}{}{}",
        if start > 0 { "…" } else { "" },
        &text[start..end],
        if end < text.len() { "…" } else { "" }
    )
}

/// `turnwal grep`.
pub(crate) fn grep(store: &Store, args: &GrepArgs, out: &mut dyn Write) -> Outcome {
    let pattern = match (&args.pattern, args.errors) {
        (Some(p), _) => Some(compile(p, args)?),
        (None, true) => None,
        (None, false) => {
            return Err(Failure::Usage(
                "grep needs a PATTERN, or --errors to list every error".into(),
            ));
        }
    };
    let filter = Filter {
        types: args.types.clone(),
        errors: args.errors,
        since: args
            .since
            .as_deref()
            .map(|s| when::parse_time(s, when::now_ms()))
            .transpose()
            .map_err(Failure::Usage)?,
    };
    let mut ids = if args.sessions.is_empty() {
        super::listing::report_foreign(store)?;
        store.list()?.into_iter().map(|s| s.id).collect()
    } else {
        args.sessions.clone()
    };
    super::listing::sort_natural(&mut ids);
    let (mut hits, mut worst) = (0u64, exit::SUCCESS);
    for id in &ids {
        match search(store, id, pattern.as_ref(), &filter, args.json, out) {
            Ok(n) => hits += n,
            Err(Failure::Output(e)) => return Err(Failure::Output(e)),
            Err(failure) if args.sessions.is_empty() => {
                // One unreadable session does not stop the search.
                super::terminal::warn(&failure);
                worst = worst.max(failure.exit_status());
            }
            Err(failure) => return Err(failure),
        }
        out.flush()?;
    }
    Ok(match (worst, hits) {
        (exit::SUCCESS, 0) => exit::RECOVERABLE,
        (worst, _) => worst,
    })
}

fn compile(pattern: &str, args: &GrepArgs) -> Result<Regex, Failure> {
    let source = if args.fixed_strings {
        regex::escape(pattern)
    } else {
        pattern.to_owned()
    };
    RegexBuilder::new(&source)
        .case_insensitive(args.ignore_case)
        .build()
        .map_err(|e| Failure::Usage(format!("bad PATTERN: {e}")))
}

fn search(
    store: &Store,
    id: &str,
    pattern: Option<&Regex>,
    filter: &Filter,
    json: bool,
    out: &mut dyn Write,
) -> Result<u64, Failure> {
    let mut reader = store.read(id)?;
    let (mut turn, mut hits) = (0u64, 0u64);
    reader.for_each_stored(|event| -> Result<(), Failure> {
        if event.kind() == EventKind::TurnStart {
            turn += 1;
        }
        if !filter.admits(event) {
            return Ok(());
        }
        let data = event.data();
        let found = match pattern {
            Some(p) => match p.find(data) {
                Some(m) => m.range(),
                None => return Ok(()),
            },
            // --errors alone: the snippet shows where the error is said.
            None => {
                let at = ["\"isError\":true", "\"error\""]
                    .iter()
                    .find_map(|key| data.find(key))
                    .unwrap_or(0);
                at..at
            }
        };
        hits += 1;
        let hit = Hit {
            session: id,
            seq: event.seq(),
            turn,
            event_type: event.event_type(),
            time: event.time(),
            snippet: snippet(data, found),
        };
        if json {
            json_line(out, &hit)?;
        } else {
            writeln!(
                out,
                "{}:{}: turn {} {}: {}",
                display_id(id),
                hit.seq,
                hit.turn,
                hit.event_type,
                hit.snippet
            )?;
        }
        Ok(())
    })?;
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_cut_at_character_boundaries() {
        let text = format!("{}needle{}", "é".repeat(30), "ü".repeat(60));
        let at = text.find("needle").unwrap();
        let s = snippet(&text, at..at + 6);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert_eq!(s, format!("…{}needle{}…", "é".repeat(20), "ü".repeat(40)));
        assert_eq!(snippet("short", 0..5), "short");
    }
}
