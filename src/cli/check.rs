//! `turnwal verify` and `turnwal recover`.

use std::io::Write;

use super::output::{VerifyJson, cut_text, display_id, json_line, verify_text, write_events};
use super::progress::Progress;
use super::{Failure, Outcome, exit};
use crate::store::Store;

/// Verifies one session, or every session of the store (sorted by id), and
/// prints a line for each. Returns the worst status: 0 clean, 1 recoverable
/// tail, 2 corrupt; when checking every session, a session that cannot be
/// read is reported on stderr and the others are still checked.
pub(crate) fn verify(
    store: &Store,
    only: Option<&str>,
    json: bool,
    deep: bool,
    out: &mut dyn Write,
) -> Outcome {
    let ids = match only {
        Some(id) => vec![id.to_owned()],
        None => {
            report_foreign(store)?;
            let mut ids: Vec<String> = store.list()?.into_iter().map(|s| s.id).collect();
            ids.sort();
            ids
        }
    };
    let progress = Progress::new("verifying", only.is_none(), ids.len());
    let mut worst = exit::SUCCESS;
    for (i, id) in ids.iter().enumerate() {
        progress.show(i, id);
        let report = match store.verify(id) {
            Ok(report) => report,
            Err(e) if only.is_none() => {
                progress.clear();
                let failure = Failure::from(e);
                eprintln!("turnwal: {failure}");
                worst = worst.max(failure.exit_status());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        progress.clear();
        if json {
            json_line(out, &VerifyJson::from(&report))?;
        } else {
            writeln!(out, "{}", verify_text(&report))?;
        }
        if progress.active {
            out.flush()?;
        }
        worst = worst.max(report.exit_code());
    }
    progress.clear();
    if deep {
        for problem in store.deep_check()? {
            if json {
                json_line(out, &serde_json::json!({ "deep": problem }))?;
            } else {
                writeln!(out, "deep: {problem}")?;
            }
            worst = worst.max(exit::CORRUPT);
        }
    }
    // What earlier repairs cut is still here: say where.
    for path in store.quarantined()? {
        if json {
            json_line(
                out,
                &serde_json::json!({ "quarantined": path.to_string_lossy() }),
            )?;
        } else {
            writeln!(out, "quarantined: {}", path.display())?;
        }
    }
    Ok(worst)
}

/// Reports on stderr each entry named like a session log that is not a
/// regular file (a FIFO, a directory, a symlink): listings skip it without
/// opening it, and go on with the sessions.
pub(crate) fn report_foreign(store: &Store) -> Result<(), Failure> {
    for (path, kind) in store.foreign_entries()? {
        eprintln!(
            "turnwal: skipped {}: {kind}, not a session log; remove or rename it",
            path.display()
        );
    }
    Ok(())
}

/// Commits (or with `dry_run` only shows) the repair of a session: the state
/// before, what is cut, the closers appended (as JSONL), and whether it was
/// written.
pub(crate) fn recover(
    store: &Store,
    id: &str,
    dry_run: bool,
    salvage: bool,
    out: &mut dyn Write,
) -> Outcome {
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
