//! `turnwal export` and `turnwal import`: a session, header and policy
//! included, as one self-describing file that moves between stores and
//! machines (docs/CLI.md, "Moving a session").
//!
//! The file is JSON lines: a first line naming the format, the header, the
//! policy and the event count; the events, one envelope per line (the
//! session as `cat` shows it: a crashed session's closers included, torn
//! bytes left out); a last line repeating the count, so a truncated file is
//! refused rather than imported short.

use std::io::{BufReader, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::args::{ExportArgs, ImportArgs};
use super::lines::{self, Line};
use super::output::display_id;
use super::{Failure, Outcome, exit};
use turnwal::contract::Policy;
use turnwal::error::Error;
use turnwal::event::Event;
use turnwal::header::SessionHeader;
use turnwal::store::Store;

/// The version of the export format this turnwal writes and reads.
const EXPORT_VERSION: u64 = 1;
/// The longest opening or closing line: a session header (at most 1 MiB of
/// JSON in every store), its policy and counts, with room to spare.
const MAX_FRAME_LINE: usize = 2 << 20;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Opening<'a> {
    turnwal_export: u64,
    #[serde(borrow)]
    header: &'a RawValue,
    policy: String,
    events: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Closing {
    turnwal_export_end: u64,
}

fn policy_named(name: &str) -> Option<Policy> {
    [Policy::Strict, Policy::Lenient, Policy::Permissive]
        .into_iter()
        .find(|p| p.to_string() == name)
}

/// `turnwal export SESSION [-o FILE]`.
pub(crate) fn export(store: &Store, args: &ExportArgs, out: &mut dyn Write) -> Outcome {
    let id = &args.session;
    if args.jsonl {
        let text = store.jsonl_text(id)?;
        match &args.output {
            None => out.write_all(&text).map_err(Failure::from)?,
            Some(path) => write_file(path, |w| w.write_all(&text))?,
        }
        return Ok(exit::SUCCESS);
    }
    // A JSONL root records no policy: its sessions read as the scan reads
    // them (upstream's reader's).
    let policy = store.policy(id)?;
    let reader = std::cell::RefCell::new(store.read(id)?);
    // The store's own error, when the read (not the writing) failed.
    let failed = std::cell::RefCell::new(None::<Error>);
    let count = reader.borrow().len();
    let header = reader.borrow().header().to_json();
    let opening = Opening {
        turnwal_export: EXPORT_VERSION,
        header: &RawValue::from_string(header).map_err(std::io::Error::from)?,
        policy: policy.to_string(),
        events: count,
    };
    // Streamed from the store's cursor: the heap holds one chunk run or
    // sealed unit. A read that fails midway fails the export (a file is
    // then never published).
    let write = |w: &mut dyn Write| -> std::io::Result<()> {
        serde_json::to_writer(&mut *w, &opening)?;
        w.write_all(b"\n")?;
        let mut line = Vec::with_capacity(4096);
        let mut reader = reader.borrow_mut();
        loop {
            let event = match reader.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(e) => {
                    let said = e.to_string();
                    *failed.borrow_mut() = Some(e);
                    return Err(std::io::Error::other(said));
                }
            };
            line.clear();
            event.write_json(&mut line);
            line.push(b'\n');
            w.write_all(&line)?;
        }
        serde_json::to_writer(
            &mut *w,
            &Closing {
                turnwal_export_end: count,
            },
        )?;
        w.write_all(b"\n")
    };
    let written = match &args.output {
        None => write(out).map_err(Failure::from),
        Some(path) => write_file(path, write),
    };
    if let Some(e) = failed.into_inner() {
        return Err(e.into());
    }
    written?;
    Ok(exit::SUCCESS)
}

/// Writes `path` whole or not at all: a temporary file beside it, fsynced,
/// renamed over it, the directory fsynced.
fn write_file(
    path: &Path,
    write: impl Fn(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let io =
        |what: &str, e: std::io::Error| Failure::Other(format!("{what} {}: {e}", path.display()));
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| Failure::Usage(format!("{} names no file", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::new(file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", e));
    }
    Ok(())
}

/// `turnwal import FILE [--as ID]`: the session the file holds, created in
/// the store in one atomic batch, as `convert` copies one.
pub(crate) fn import(store: &Store, args: &ImportArgs, out: &mut dyn Write) -> Outcome {
    let name = args.file.display().to_string();
    let reader: Box<dyn Read> = if name == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&args.file)
                .map_err(|e| Failure::Other(format!("open {name}: {e}")))?,
        )
    };
    let bad = |line: usize, why: String| Failure::Corrupt(format!("{name}: line {line}: {why}"));
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let mut line_no = 0;
    // Every line is refused once it passes the longest its kind can be,
    // while it is read: the opening and closing lines hold a header and
    // counts, an event line at most one event.
    let mut next = |limit: usize| -> Result<Option<(usize, String)>, Failure> {
        let read = lines::read_line(&mut reader, &mut buf, limit)
            .map_err(|e| Failure::Other(format!("read {name}: line {}: {e}", line_no + 1)))?;
        line_no += 1;
        match read {
            Line::Eof => Ok(None),
            Line::TooLong => Err(bad(
                line_no,
                format!(
                    "longer than {limit} bytes, the most a line of a turnwal export can be \
                     here; refused after reading that much of it"
                ),
            )),
            Line::Read => {
                let text = std::str::from_utf8(&buf)
                    .map_err(|e| bad(line_no, format!("not UTF-8: {e}")))?;
                let text = text.strip_suffix('\n').unwrap_or(text);
                let text = text.strip_suffix('\r').unwrap_or(text);
                Ok(Some((line_no, text.to_owned())))
            }
        }
    };
    let (_, first) =
        next(MAX_FRAME_LINE)?.ok_or_else(|| bad(1, "empty: not a turnwal export".into()))?;
    let opening: Opening<'_> = serde_json::from_str(&first)
        .map_err(|e| bad(1, format!("not a turnwal export opening line: {e}")))?;
    if opening.turnwal_export != EXPORT_VERSION {
        return Err(Failure::Store(Error::Unsupported {
            path: args.file.clone(),
            detail: format!(
                "export format {} (this turnwal reads {EXPORT_VERSION})",
                opening.turnwal_export
            ),
        }));
    }
    let mut header = SessionHeader::from_json_any_version(opening.header.get())
        .map_err(|e| bad(1, format!("header: {e}")))?;
    let policy = policy_named(&opening.policy).ok_or_else(|| {
        bad(
            1,
            format!("policy {:?} is not one turnwal knows", opening.policy),
        )
    })?;
    let count = opening.events;
    let mut events = Vec::new();
    let closing = loop {
        let limit = if events.len() as u64 == count {
            MAX_FRAME_LINE
        } else {
            turnwal::limits::MAX_RECORD_LEN
        };
        let Some((n, line)) = next(limit)? else {
            return Err(bad(
                events.len() + 2,
                format!(
                    "the file ends after {} of its {count} events (truncated)",
                    events.len()
                ),
            ));
        };
        if events.len() as u64 == count {
            break (n, line);
        }
        let event = Event::from_json(line.as_bytes()).map_err(|e| bad(n, e.to_string()))?;
        events.push(event);
    };
    let (n, closing_line) = closing;
    match serde_json::from_str::<Closing>(&closing_line) {
        Ok(c) if c.turnwal_export_end == count => {}
        _ => {
            return Err(bad(
                n,
                format!("expected the closing line {{\"turnwalExportEnd\":{count}}}"),
            ));
        }
    }
    if let Some((n, _)) = next(MAX_FRAME_LINE)? {
        return Err(bad(n, "text after the closing line".into()));
    }
    if let Some(id) = &args.as_id {
        header.id = id.clone();
    }
    let id = header.id.clone();
    if store.exists(&id)? {
        return Err(Error::AlreadyExists { id, on_disk: true }.into());
    }
    if events.is_empty() {
        // A session is stored with its first event (as the harness stores
        // it): one without any leaves nothing, and says so.
        writeln!(
            out,
            "nothing imported: {name} holds session {} with no event, and a session is stored \
             only once it has one",
            display_id(&id)
        )?;
        return Ok(exit::SUCCESS);
    }
    store.create_with_policy(header, policy)?;
    let written = (|| -> Result<(), Error> {
        store.append(&id, &events)?;
        store.flush(&id)?;
        store.close(&id)
    })();
    if let Err(e) = written {
        // Nothing half-imported stays behind.
        let _ = store.delete(&id);
        return Err(e.into());
    }
    writeln!(
        out,
        "imported {} ({} events)",
        display_id(&id),
        events.len()
    )?;
    Ok(exit::SUCCESS)
}
