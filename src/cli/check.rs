//! `turnwal verify` and `turnwal recover`.

use std::io::Write;

use super::args::VerifyArgs;
use super::listing::report_foreign;
use super::output::{
    VerifyJson, count, cut_text, display_id, json_line, live_word, verify_text, write_events,
};
use super::progress::Progress;
use super::{Failure, Outcome, exit};
use turnwal::Error;
use turnwal::scan::LogState;
use turnwal::store::Store;

/// Verifies one session, or every session of the store (in natural order),
/// and prints a line for each. Returns the worst status: 0 clean, 1
/// recoverable tail, 2 corrupt; when checking every session, a session
/// that cannot be read is reported on stderr and the others are still
/// checked, on every core (the lines still come out in order), and a
/// summary ends the output.
pub(crate) fn verify(store: &Store, args: &VerifyArgs, out: &mut dyn Write) -> Outcome {
    let only = args.session.as_deref();
    let ids = match only {
        Some(id) => vec![id.to_owned()],
        None => {
            report_foreign(store)?;
            let mut ids: Vec<String> = store.list()?.into_iter().map(|s| s.id).collect();
            super::listing::sort_natural(&mut ids);
            ids
        }
    };
    let progress = Progress::new("verifying", only.is_none(), ids.len());
    let mut worst = exit::SUCCESS;
    let mut summary = Summary::default();
    let mut failure = None;
    in_order(
        &ids,
        |id| store.verify(id),
        |i, result| {
            if failure.is_some() {
                return Ok(());
            }
            progress.show(i, &ids[i]);
            let report = match result {
                Ok(report) => report,
                Err(e) if only.is_none() => {
                    progress.clear();
                    let f = Failure::from(e);
                    super::terminal::warn(&f);
                    worst = worst.max(f.exit_status());
                    summary.unreadable += 1;
                    return Ok(());
                }
                Err(e) => {
                    failure = Some(Failure::from(e));
                    return Ok(());
                }
            };
            progress.clear();
            summary.count(report.state);
            worst = worst.max(report.exit_code());
            if args.problems_only && report.state == LogState::Clean {
                return Ok(());
            }
            if args.json {
                json_line(out, &VerifyJson::from(&report))?;
            } else {
                writeln!(out, "{}", verify_text(&report))?;
            }
            if progress.active {
                out.flush()?;
            }
            Ok(())
        },
    )?;
    progress.clear();
    if let Some(f) = failure {
        return Err(f);
    }
    if args.deep {
        for problem in store.deep_check()? {
            if args.json {
                json_line(out, &serde_json::json!({ "deep": problem }))?;
            } else {
                writeln!(out, "deep: {problem}")?;
            }
            worst = worst.max(exit::CORRUPT);
        }
    }
    // What earlier repairs cut is still here: say where.
    for path in store.quarantined()? {
        if args.json {
            json_line(
                out,
                &serde_json::json!({ "quarantined": path.to_string_lossy() }),
            )?;
        } else {
            writeln!(out, "quarantined: {}", path.display())?;
        }
    }
    if only.is_none() {
        if args.json {
            json_line(out, &serde_json::json!({ "summary": summary }))?;
        } else {
            writeln!(out, "{}", summary.text())?;
        }
    }
    Ok(worst)
}

/// How many sessions a store-wide verify found in each state.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    sessions: u64,
    clean: u64,
    open_turn: u64,
    torn: u64,
    corrupt: u64,
    /// Sessions that could not be read at all (named on stderr).
    unreadable: u64,
}

impl Summary {
    fn count(&mut self, state: LogState) {
        self.sessions += 1;
        match state {
            LogState::Clean => self.clean += 1,
            LogState::OpenTurn => self.open_turn += 1,
            LogState::Torn => self.torn += 1,
            LogState::Corrupt => self.corrupt += 1,
        }
    }

    fn text(&self) -> String {
        let mut text = format!(
            "{}: {} clean, {} open-turn, {} torn, {} corrupt",
            count(self.sessions + self.unreadable, "session"),
            self.clean,
            self.open_turn,
            self.torn,
            self.corrupt
        );
        if self.unreadable > 0 {
            text.push_str(&format!(", {} unreadable", self.unreadable));
        }
        text
    }
}

/// Runs `work` on every item on up to four threads (one per core) and hands
/// each result to `emit` in the items' order, as soon as the results before
/// it are in. A failure of `emit` (stdout gone) stops the work.
fn in_order<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> R + Sync,
    mut emit: impl FnMut(usize, R) -> Result<(), Failure>,
) -> Result<(), Failure> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4)
        .min(items.len());
    if workers <= 1 {
        for (i, item) in items.iter().enumerate() {
            emit(i, work(item))?;
        }
        return Ok(());
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop, work) = (&next, &stop, &work);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    if tx.send((i, work(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut waiting = std::collections::BTreeMap::new();
        let mut due = 0;
        for (i, result) in rx {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&due) {
                if let Err(e) = emit(due, result) {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                due += 1;
            }
        }
        Ok(())
    })
}

/// `recover --all`: every session that is not clean, in natural order, as
/// `recover` does one; a session that cannot be recovered is named on
/// stderr and the others are still recovered. Returns the worst status.
pub(crate) fn recover_all(
    store: &Store,
    dry_run: bool,
    salvage: bool,
    out: &mut dyn Write,
) -> Outcome {
    report_foreign(store)?;
    let mut sessions = store.list()?;
    sessions.sort_by(|a, b| super::listing::natural_cmp(&a.id, &b.id));
    let mut worst = exit::SUCCESS;
    let (mut recovered, mut failed, mut clean, mut live) = (0u64, 0u64, 0u64, 0u64);
    for s in &sessions {
        if s.state == LogState::Clean {
            clean += 1;
            continue;
        }
        // A session a live writer holds is that writer's: its open turn is
        // live, not crashed, and closing it would break the writer's next
        // batch.
        let skip = |out: &mut dyn Write, why: &dyn std::fmt::Display| {
            writeln!(out, "skipped {}: {why}", display_id(&s.id))
        };
        if let Some(holder) = store.holders(std::slice::from_ref(&s.id))?.remove(0) {
            skip(
                out,
                &format_args!("{}, left to its writer", live_word(&holder)),
            )?;
            live += 1;
            continue;
        }
        match recover(store, &s.id, dry_run, salvage, false, out) {
            Ok(_) => recovered += 1,
            Err(Failure::Output(e)) => return Err(Failure::Output(e)),
            Err(Failure::Store(e @ (Error::Locked { .. } | Error::Leased { .. }))) => {
                // Taken by a writer since the listing.
                skip(out, &e)?;
                live += 1;
            }
            Err(f) => {
                super::terminal::warn(&f);
                worst = worst.max(f.exit_status());
                failed += 1;
            }
        }
    }
    writeln!(
        out,
        "{}: {clean} clean, {live} live (skipped), {recovered} {}, {failed} not recovered",
        count(clean + live + recovered + failed, "session"),
        if dry_run {
            "to recover (dry run)"
        } else {
            "recovered"
        },
    )?;
    Ok(worst)
}

/// Commits (or with `dry_run` only shows) the repair of a session: the state
/// before, what is cut, the closers appended (as JSONL), and whether it was
/// written.
pub(crate) fn recover(
    store: &Store,
    id: &str,
    dry_run: bool,
    salvage: bool,
    steal: bool,
    out: &mut dyn Write,
) -> Outcome {
    if dry_run
        && !steal
        && let Some(holder) = store.holders(&[id.to_owned()])?.remove(0)
    {
        // A dry run takes no lock, so it would show closers for a live
        // turn: say instead that there is nothing to recover.
        writeln!(
            out,
            "session {}: {}; a live turn is not recovered",
            display_id(id),
            live_word(&holder)
        )?;
        return Err(Failure::Other(format!(
            "session {} is held by a live writer ({}); recovery leaves it to that writer",
            display_id(id),
            holder.who
        )));
    }
    let report = if salvage {
        store.recover_salvage(id, dry_run)?
    } else {
        store.recover(id, dry_run)?
    };
    writeln!(
        out,
        "session {}: {} before recovery",
        display_id(id),
        report.state
    )?;
    writeln!(out, "kept: {} stored events", report.kept)?;
    match &report.cut {
        Some(cut) => writeln!(out, "cut: {}", cut_text(cut))?,
        None => writeln!(out, "cut: nothing")?,
    }
    writeln!(out, "closers: {}", report.closers.len())?;
    write_events(out, &report.closers)?;
    let written = if report.committed {
        "yes"
    } else if dry_run {
        "no (dry run)"
    } else {
        "no (nothing to repair)"
    };
    writeln!(out, "written: {written}")?;
    if let Some(path) = &report.quarantine {
        writeln!(out, "quarantine: {}", path.display())?;
    }
    Ok(exit::SUCCESS)
}
