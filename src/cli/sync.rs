//! `turnwal sync SRC DST [SESSION…|--all] [--watch]`: keeps DST holding
//! what SRC has stored of each session ([`Store::sync_to`]; docs/CLI.md,
//! "Keeping stores in step").

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::args::{SqliteArgs, SyncArgs};
use super::location;
use super::output::{count, display_id, json_line};
use super::{Failure, Outcome, exit};
use turnwal::error::Error;
use turnwal::mirror::{SyncOptions, Synced};
use turnwal::store::Store;

/// The hidden test hook: `TURNWAL_TEST_SYNC_ABORT_AFTER=N` aborts the
/// process (no cleanup, as a SIGKILL ends it) once N batches are
/// acknowledged by DST.
const ABORT_HOOK: &str = "TURNWAL_TEST_SYNC_ABORT_AFTER";

/// The shortest pause between two passes of `--watch` over a store that
/// gives no notification (each pass reads every session's revision).
const POLLED_PASS: Duration = Duration::from_millis(250);

/// Runs `turnwal sync`. `store` is the global `--store`, which sync does
/// not use.
pub(crate) fn run(
    store: Option<&str>,
    sqlite: &SqliteArgs,
    args: &SyncArgs,
    out: &mut dyn Write,
) -> Outcome {
    let (src, dst) = location::open_pair(
        store,
        sqlite,
        &location::Pair {
            command: "sync",
            src: ("SRC", &args.src),
            dst: ("DST", &args.dst),
            how: "as SRC and DST",
        },
    )?;
    let mut syncer = Syncer {
        src: &src,
        dst: &dst,
        args,
        synced_at: HashMap::new(),
        last_error: HashMap::new(),
        batches: 0,
        abort_after: std::env::var(ABORT_HOOK).ok().and_then(|n| n.parse().ok()),
    };
    if !args.watch {
        return syncer.pass(out, false);
    }
    // The watch first: a change during a pass wakes the next one.
    let mut watch = src.backend().watch(None)?;
    let recheck = watch.recheck().max(POLLED_PASS);
    loop {
        syncer.pass(out, true)?;
        let until = Instant::now() + recheck;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if left.is_zero() || watch.wait(left)? {
                break;
            }
        }
    }
}

/// One `turnwal sync` run's state across passes.
struct Syncer<'a> {
    src: &'a Store,
    dst: &'a Store,
    args: &'a SyncArgs,
    /// Each session's SRC revision when it was last found in step: an
    /// unchanged session is not read again (`--watch`).
    synced_at: HashMap<String, String>,
    /// Each session's last refusal, said once until it changes (`--watch`).
    last_error: HashMap<String, String>,
    batches: u64,
    abort_after: Option<u64>,
}

impl Syncer<'_> {
    /// Syncs every session once; the exit status (the worst failure's).
    /// `watching` prints only what changed.
    fn pass(&mut self, out: &mut dyn Write, watching: bool) -> Outcome {
        // `--all` names none (clap refuses both).
        let ids = match location::session_ids(self.src, &self.args.sessions) {
            Ok(ids) => ids,
            // A watch outlives a passing failure (a server restart): said
            // once, tried again at the next pass.
            Err(e) if watching => {
                self.failed("SRC", Failure::Store(e));
                return Ok(exit::ERROR);
            }
            Err(e) => return Err(e.into()),
        };
        let mut worst = exit::SUCCESS;
        let (mut in_step, mut copied) = (0usize, 0u64);
        for id in &ids {
            // Read before the sync: a write during it is another change.
            let revision = match self.src.revision(id) {
                Ok(revision) => revision,
                Err(e) => {
                    worst = worst.max(exit::ERROR);
                    if self.args.json {
                        json_line(out, &SyncJson::failed(id, &e.to_string()))?;
                    }
                    out.flush()?;
                    self.failed(id, Failure::Store(e));
                    continue;
                }
            };
            if watching && revision.is_some() && self.synced_at.get(id) == revision.as_ref() {
                in_step += 1;
                continue;
            }
            match self.sync_one(id) {
                Ok(synced) => {
                    in_step += 1;
                    copied += synced.copied;
                    self.last_error.remove(id);
                    if let Some(revision) = revision {
                        self.synced_at.insert(id.clone(), revision);
                    }
                    if self.args.json {
                        json_line(out, &SyncJson::synced(id, &synced))?;
                    } else if !watching || synced.copied > 0 {
                        writeln!(out, "{}", synced_text(id, &synced))?;
                    }
                }
                Err(failure) => {
                    worst = worst.max(failure.exit_status());
                    if self.args.json && self.last_error.get(id) != Some(&failure.to_string()) {
                        json_line(out, &SyncJson::failed(id, &failure.to_string()))?;
                    }
                    out.flush()?;
                    self.failed(id, failure);
                }
            }
            out.flush()?;
        }
        if !watching && !self.args.json {
            writeln!(
                out,
                "{in_step} of {} in step; {} copied",
                count(ids.len() as u64, "session"),
                count(copied, "event")
            )?;
        }
        Ok(worst)
    }

    /// Says on stderr that `id` (or "SRC") was not synced, once until the
    /// reason changes.
    fn failed(&mut self, id: &str, failure: Failure) {
        let reason = failure.to_string();
        if self.last_error.get(id) == Some(&reason) {
            return;
        }
        super::terminal::warn(format_args!("{}: not synced: {reason}", display_id(id)));
        self.last_error.insert(id.to_owned(), reason);
    }

    fn sync_one(&mut self, id: &str) -> Result<Synced, Failure> {
        let (batches, abort_after) = (&mut self.batches, self.abort_after);
        let mut on_batch = |_: u64| {
            *batches += 1;
            if abort_after.is_some_and(|n| *batches >= n) {
                std::process::abort();
            }
        };
        let options = SyncOptions {
            verify: self.args.verify,
            on_batch: Some(&mut on_batch),
        };
        let src = self.src;
        src.sync_to_with(self.dst, id, options)
            .map_err(|e| match e {
                // Which store lacks it: SRC (a name given that it does not
                // hold), or DST (its copy removed while it was synced).
                Error::NotFound { .. } if !src.exists(id).unwrap_or(true) => {
                    Failure::Other(format!("session {id:?} not found in SRC"))
                }
                e => Failure::Store(e),
            })
    }
}

/// `s: copied 12 events (0 -> 12, new)`, `s: in step (18 events)`.
fn synced_text(id: &str, s: &Synced) -> String {
    let id = display_id(id);
    if s.copied == 0 {
        return format!("{id}: in step ({})", count(s.after, "event"));
    }
    let new = if s.created { ", new" } else { "" };
    format!(
        "{id}: copied {} ({} -> {}{new})",
        count(s.copied, "event"),
        s.before,
        s.after
    )
}

/// A line of `sync --json`.
#[derive(Serialize)]
struct SyncJson<'a> {
    id: &'a str,
    synced: bool,
    created: bool,
    before: u64,
    copied: u64,
    after: u64,
    error: Option<&'a str>,
}

impl<'a> SyncJson<'a> {
    fn synced(id: &'a str, s: &Synced) -> SyncJson<'a> {
        SyncJson {
            id,
            synced: true,
            created: s.created,
            before: s.before,
            copied: s.copied,
            after: s.after,
            error: None,
        }
    }

    fn failed(id: &'a str, error: &'a str) -> SyncJson<'a> {
        SyncJson {
            id,
            synced: false,
            created: false,
            before: 0,
            copied: 0,
            after: 0,
            error: Some(error),
        }
    }
}
