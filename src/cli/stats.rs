//! `turnwal stats [SESSION]`: what a session (or the whole store) holds and
//! cost: turns and how they ended, tokens, models, tool calls and failures,
//! the time span, the header's cwd, parent and creation time.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::digest::{Digest, ToolCount};
use super::output::{Table, display_id, id_json, iso_utc, json_line};
use super::{Failure, Outcome, exit};
use turnwal::header::SessionHeader;
use turnwal::scan::LogState;
use turnwal::store::Store;

/// One session's stats: the verdict of `verify` and the digest of its
/// stored events (closers excluded), read in place.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionStats<'a> {
    #[serde(serialize_with = "id_json")]
    id: &'a str,
    state: &'static str,
    events: u64,
    turns: u64,
    bytes: u64,
    closers: usize,
    first_time: Option<i64>,
    last_time: Option<i64>,
    types: &'a BTreeMap<String, u64>,
    created_at: u64,
    cwd: Option<&'a str>,
    parent_session: Option<&'a str>,
    duration_ms: Option<i64>,
    interrupted_turns: u64,
    outcomes: &'a BTreeMap<String, u64>,
    tokens: super::digest::Tokens,
    models: &'a BTreeMap<String, u64>,
    tools: &'a BTreeMap<String, ToolCount>,
}

struct Read {
    id: String,
    header: SessionHeader,
    state: LogState,
    events: u64,
    turns: u64,
    bytes: u64,
    closers: usize,
    digest: Digest,
}

impl Read {
    fn json(&self) -> SessionStats<'_> {
        let d = &self.digest;
        SessionStats {
            id: &self.id,
            state: self.state.code(),
            events: self.events,
            turns: self.turns,
            bytes: self.bytes,
            closers: self.closers,
            first_time: d.first_time,
            last_time: d.last_time,
            types: &d.types,
            created_at: self.header.created_at,
            cwd: self.header.cwd.as_deref(),
            parent_session: self.header.parent_session.as_deref(),
            duration_ms: d.duration_ms(),
            interrupted_turns: d.interrupted(),
            outcomes: &d.outcomes,
            tokens: d.tokens,
            models: &d.models,
            tools: &d.tools,
        }
    }
}

/// Reads one session: `verify`'s verdict (a corrupt session is refused,
/// exit 2) and the digest of its stored events.
fn read(store: &Store, id: &str) -> Result<Read, Failure> {
    // One pass: verify's check hands each event it reads to the digest.
    let mut digest = Digest::default();
    let report = store.verify_visiting(id, |event| digest.add(event))?;
    if report.state == LogState::Corrupt {
        let problem = report.problem.unwrap_or_default();
        return Err(Failure::Corrupt(format!(
            "session {id:?} is corrupt: {problem}"
        )));
    }
    Ok(Read {
        id: id.to_owned(),
        header: store.header(id)?,
        state: report.state,
        events: report.events,
        turns: report.turns,
        bytes: report.bytes,
        closers: report.closers,
        digest,
    })
}

/// `turnwal stats SESSION` or, without one, every session and the total.
pub(crate) fn stats(store: &Store, id: Option<&str>, json: bool, out: &mut dyn Write) -> Outcome {
    match id {
        Some(id) => {
            let read = read(store, id)?;
            if json {
                json_line(out, &read.json())?;
            } else {
                session_text(&read, out)?;
            }
            Ok(exit::SUCCESS)
        }
        None => store_stats(store, json, out),
    }
}

fn store_stats(store: &Store, json: bool, out: &mut dyn Write) -> Outcome {
    let mut ids: Vec<String> = store.list()?.into_iter().map(|s| s.id).collect();
    super::listing::sort_natural(&mut ids);
    let mut total = Digest::default();
    let (mut bytes, mut worst) = (0u64, exit::SUCCESS);
    let mut table = Table::new(
        &[
            "SESSION",
            "STATE",
            "EVENTS",
            "TURNS",
            "INTERRUPTED",
            "TOKENS IN",
            "TOKENS OUT",
            "TOOL CALLS",
            "FAILED",
        ],
        &[false, false, true, true, true, true, true, true, true],
    );
    let mut sessions = 0u64;
    for id in &ids {
        let read = match read(store, id) {
            Ok(read) => read,
            Err(failure) => {
                // One unreadable session does not hide the others.
                super::terminal::warn(&failure);
                worst = worst.max(failure.exit_status());
                continue;
            }
        };
        sessions += 1;
        bytes += read.bytes;
        total.merge(&read.digest);
        if json {
            json_line(out, &read.json())?;
        } else {
            table.row(row(
                &display_id(id),
                read.state.code(),
                read.events,
                read.turns,
                &read.digest,
            ));
        }
    }
    if json {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Total<'a> {
            sessions: u64,
            bytes: u64,
            #[serde(flatten)]
            digest: &'a Digest,
            interrupted_turns: u64,
        }
        json_line(
            out,
            &serde_json::json!({ "total": Total {
                sessions,
                bytes,
                digest: &total,
                interrupted_turns: total.interrupted(),
            }}),
        )?;
        return Ok(worst);
    }
    table.row(row(
        &format!("total ({})", super::output::count(sessions, "session")),
        "",
        total.events,
        total.turns,
        &total,
    ));
    table.write(out)?;
    writeln!(out, "bytes       {bytes}")?;
    writeln!(out, "models      {}", counts(&total.models))?;
    writeln!(out, "tools       {}", tools_text(&total.tools))?;
    Ok(worst)
}

fn row(name: &str, state: &str, events: u64, turns: u64, d: &Digest) -> Vec<String> {
    let tools = d.tool_totals();
    vec![
        name.to_owned(),
        state.to_owned(),
        events.to_string(),
        turns.to_string(),
        d.interrupted().to_string(),
        d.tokens.input_tokens.to_string(),
        d.tokens.output_tokens.to_string(),
        tools.calls.to_string(),
        tools.failures.to_string(),
    ]
}

/// `name n, name n`, or `-`.
fn counts(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "-".to_owned();
    }
    map.iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `read 3 (1 failed), bash 1`, or `-`.
fn tools_text(tools: &BTreeMap<String, ToolCount>) -> String {
    if tools.is_empty() {
        return "-".to_owned();
    }
    tools
        .iter()
        .map(|(name, t)| match t.failures {
            0 => format!("{name} {}", t.calls),
            f => format!("{name} {} ({f} failed)", t.calls),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn session_text(r: &Read, out: &mut dyn Write) -> std::io::Result<()> {
    let d = &r.digest;
    let time = |t: Option<i64>| t.map_or_else(|| "-".to_owned(), iso_utc);
    let tokens = &d.tokens;
    let tool_totals = d.tool_totals();
    let mut table = Table::headless(&[false, false]);
    for (key, value) in [
        ("session", display_id(&r.id).into_owned()),
        ("state", r.state.code().to_owned()),
        ("cwd", r.header.cwd.clone().unwrap_or_else(|| "-".into())),
        (
            "created",
            i64::try_from(r.header.created_at).map_or_else(|_| "-".into(), iso_utc),
        ),
        (
            "parent",
            r.header
                .parent_session
                .as_deref()
                .map_or_else(|| "-".into(), |p| display_id(p).into_owned()),
        ),
        ("events", r.events.to_string()),
        ("turns", r.turns.to_string()),
        ("outcomes", counts(&d.outcomes)),
        (
            "interrupted",
            match r.closers {
                0 => d.interrupted().to_string(),
                _ => format!("{} (and the open turn, on resume)", d.interrupted()),
            },
        ),
        ("bytes", r.bytes.to_string()),
        ("closers", r.closers.to_string()),
        ("first time", time(d.first_time)),
        ("last time", time(d.last_time)),
        (
            "duration",
            d.duration_ms()
                .map_or_else(|| "-".into(), super::output::human_ms),
        ),
        (
            "tokens",
            format!(
                "{} in, {} out (cache read {}, cache write {}, reasoning {})",
                tokens.input_tokens,
                tokens.output_tokens,
                tokens.cache_read_tokens,
                tokens.cache_write_tokens,
                tokens.reasoning_tokens
            ),
        ),
        ("models", counts(&d.models)),
        (
            "tool calls",
            format!("{} ({} failed)", tool_totals.calls, tool_totals.failures),
        ),
        ("tools", tools_text(&d.tools)),
    ] {
        table.row(vec![key.to_owned(), value]);
    }
    table.write(out)?;
    writeln!(out, "types")?;
    let mut types = Table::headless(&[false, true]);
    for (name, count) in &d.types {
        types.row(vec![format!("  {name}"), count.to_string()]);
    }
    types.write(out)
}
