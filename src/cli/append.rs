//! `turnwal append`: events from stdin, acknowledged as they become durable.

use std::io::{BufReader, Read, Write};

use super::lines::Line;

use super::args::AppendArgs;
use super::{Failure, Outcome, exit};
use turnwal::contract::Policy;
use turnwal::error::Error;
use turnwal::event::{Event, IncomingEvent};
use turnwal::header::SessionHeader;
use turnwal::scan::Scan;
use turnwal::store::{RepairBasis, Store, now_ms};

/// Most events appended as one batch; bounds memory and ack latency when a
/// producer floods stdin.
const MAX_BATCH: usize = 1024;

/// Large enough that a burst of lines arrives in one read and becomes one
/// batch.
const READ_BUFFER: usize = 64 * 1024;

/// Appends the events on `input` to the session and prints `ack SEQ` for
/// each as it becomes durable.
pub(crate) fn run(
    store: &Store,
    args: &AppendArgs,
    input: impl Read,
    out: &mut dyn Write,
) -> Outcome {
    let mut reader = BufReader::with_capacity(READ_BUFFER, input);
    let mut line_no = 0;
    let (start, mut first) = open_session(store, args, &mut reader, &mut line_no)?;
    let mut appender = Appender {
        store,
        id: &args.session,
        next_seq: start,
        acked: start,
        quiet: args.quiet,
        out,
    };
    loop {
        let (batch, end) = match first.take() {
            Some(first) => first,
            None => read_batch(&mut reader, &mut line_no, appender.next_seq)?,
        };
        // A contract violation inside the batch comes before any bad line
        // that ended it, so it is the one reported.
        let rejected = match appender.append(&batch)? {
            Some(rejected) => Some(rejected),
            None => match end {
                End::Rejected(rejected) => Some(rejected),
                End::Eof => {
                    appender.finish()?;
                    return Ok(exit::SUCCESS);
                }
                End::More => None,
            },
        };
        if let Some(Rejected { line, reason }) = rejected {
            appender.finish()?;
            return Err(Failure::Rejected { line, reason });
        }
    }
}

/// Creates the session (`--create`), adopts it as it is (`--continue`), or
/// opens it, committing any crash repair; returns the seq appends start at,
/// and the first batch when it had to be read before the session was opened.
///
/// A repair (cut torn bytes, close a turn an earlier writer left open) is
/// committed only once the first batch is known to hold an event the
/// repaired session accepts: an input rejected outright changes nothing.
/// The closers appended are reported on stderr.
fn open_session(
    store: &Store,
    args: &AppendArgs,
    reader: &mut BufReader<impl Read>,
    line_no: &mut u64,
) -> Result<(u64, Option<(Batch, End)>), Failure> {
    let id = &args.session;
    if args.continue_turn {
        return Ok((store.adopt(id)?.next_seq, None));
    }
    if !args.create {
        // The writer lock (a lease) first: a session another writer holds
        // live is refused at once, before any input is judged against a
        // turn that is live, not interrupted.
        store.hold(id)?;
        // The input is checked under the policy the store will append it
        // under (a JSONL root records none, and the store's own applies).
        let mut scan = store.scan(id)?;
        scan.policy = store.append_policy(&scan);
        if !scan.needs_repair() {
            return Ok((store.resume(id)?.next_seq, None));
        }
        let mut tracker = scan
            .resume_tracker()
            .require_known_types(store.options().require_known_types);
        let (batch, end) = read_batch(reader, line_no, tracker.next_seq())?;
        // Nothing of the input is accepted: refuse it with the log as it is.
        let untouched = |line, reason| Failure::Rejected {
            line,
            reason: format!("{reason}; nothing was written{}", open_turn_note(&scan)),
        };
        if let Err(violation) = tracker.accept_batch(&batch.events)
            && batch.events.first().map(Event::seq) == Some(violation.seq)
        {
            return Err(untouched(
                batch.lines[0],
                Error::Contract(violation).to_string(),
            ));
        }
        if batch.events.is_empty()
            && let End::Rejected(Rejected { line, reason }) = end
        {
            return Err(untouched(line, reason));
        }
        let basis = RepairBasis {
            stored: scan.stored_len(),
            cut_offset: scan.cut.as_ref().map(|c| c.offset),
        };
        let receipt = store.commit_repair(id, &basis, &scan.closers)?;
        report_repair(id, &scan);
        return Ok((receipt.next_seq, Some((batch, end))));
    }
    let mut header = SessionHeader::new(args.session.clone(), now_ms());
    header.cwd = args.cwd.clone();
    let policy = if args.lenient {
        Policy::Lenient
    } else {
        store.options().policy
    };
    store
        .create_with_policy(header, policy)
        .map_err(|e| match e {
            // Only the command line supplies header fields (id, --cwd).
            e @ Error::Header(_) => Failure::Usage(e.to_string()),
            e => Failure::Store(e),
        })?;
    Ok((0, None))
}

/// For a rejection that left the log untouched: the open turn it did not
/// close.
fn open_turn_note(scan: &Scan) -> String {
    if scan.closers.is_empty() {
        return String::new();
    }
    format!(
        " (turn {} an earlier writer left open stays open: no closers were appended)",
        scan.last_turn
    )
}

/// Says on stderr what opening the session repaired before this input.
fn report_repair(id: &str, scan: &Scan) {
    if let Some(cut) = &scan.cut {
        super::terminal::warn(format_args!(
            "session {id:?}: cut {} bytes at byte {} (seq {}: {}) before appending",
            cut.len, cut.offset, cut.seq, cut.reason
        ));
    }
    if scan.closers.is_empty() {
        return;
    }
    let seqs: Vec<String> = scan.closers.iter().map(|e| e.seq().to_string()).collect();
    let (closers, seqs) = match seqs.len() {
        1 => ("closer", format!("seq {}", seqs[0])),
        _ => ("closers", format!("seqs {}", seqs.join(", "))),
    };
    super::terminal::warn(format_args!(
        "session {id:?}: turn {} was left open by an earlier writer; closed it as \
         interrupted before appending (append --continue would continue it): {} synthetic \
         {closers} at {seqs}: {}",
        scan.last_turn,
        scan.closers.len(),
        scan.closers
            .iter()
            .map(|e| e.to_json())
            .collect::<Vec<_>>()
            .join(" ")
    ));
}

/// A line the session refuses.
struct Rejected {
    line: u64,
    reason: String,
}

/// Why a batch ended.
enum End {
    /// Nothing more is buffered yet.
    More,
    /// End of input.
    Eof,
    /// This line is bad; the batch holds the lines before it.
    Rejected(Rejected),
}

/// Parsed events and the input line each came from.
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    lines: Vec<u64>,
}

/// Reads one line (waiting for it), then every further complete line already
/// buffered, up to [`MAX_BATCH`] events. Waiting only for the first line
/// keeps a producer that sends one event at a time from stalling, while a
/// burst still becomes one batch (one fsync).
fn read_batch(
    reader: &mut BufReader<impl Read>,
    line_no: &mut u64,
    next_seq: u64,
) -> Result<(Batch, End), Failure> {
    let mut batch = Batch::default();
    let mut buf = Vec::new();
    loop {
        let read = super::lines::read_line(reader, &mut buf, turnwal::limits::MAX_RECORD_LEN)
            .map_err(|e| Failure::Other(format!("reading stdin: {e}")))?;
        match read {
            Line::Eof => return Ok((batch, End::Eof)),
            Line::Read => {}
            Line::TooLong => {
                *line_no += 1;
                let reason = format!(
                    "the line is longer than {} bytes, the most one event can take (data {} \
                     bytes, sourceEventSeqs and surfaceOp {} bytes each, the rest {} bytes); \
                     refused after reading that much of it",
                    turnwal::limits::MAX_RECORD_LEN,
                    turnwal::limits::MAX_DATA_LEN,
                    turnwal::limits::MAX_EXTRA_LEN,
                    turnwal::limits::MAX_ENVELOPE_LEN
                );
                let line = *line_no;
                return Ok((batch, End::Rejected(Rejected { line, reason })));
            }
        }
        *line_no += 1;
        if !buf.trim_ascii().is_empty() {
            let expected = next_seq + batch.events.len() as u64;
            match parse_line(&buf, expected) {
                Ok(event) => {
                    batch.events.push(event);
                    batch.lines.push(*line_no);
                }
                Err(reason) => {
                    let line = *line_no;
                    return Ok((batch, End::Rejected(Rejected { line, reason })));
                }
            }
        }
        if batch.events.len() >= MAX_BATCH || !reader.buffer().contains(&b'\n') {
            return Ok((batch, End::More));
        }
    }
}

/// One input line as the event with seq `expected`.
fn parse_line(line: &[u8], expected: u64) -> Result<Event, String> {
    // Without its terminator, so JSON error positions fall on the line.
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let incoming = IncomingEvent::parse(line).map_err(|e| e.to_string())?;
    if let Some(seq) = incoming.seq
        && seq != expected
    {
        return Err(format!(
            "seq mismatch: the session's next seq is {expected}, but the line has seq {seq}"
        ));
    }
    let time = incoming.time.unwrap_or_else(|| now_ms() as i64);
    incoming.complete(expected, time).map_err(|e| e.to_string())
}

/// Appends batches to one session and acknowledges what becomes durable.
struct Appender<'a> {
    store: &'a Store,
    id: &'a str,
    next_seq: u64,
    /// Seqs below this were acknowledged (or stored before this run).
    acked: u64,
    /// `--quiet`: acknowledge silently.
    quiet: bool,
    out: &'a mut dyn Write,
}

impl Appender<'_> {
    /// Appends a batch. When the store rejects one of its events (the
    /// contract check refuses the whole batch), appends the events before
    /// that one and returns the rejection.
    fn append(&mut self, batch: &Batch) -> Result<Option<Rejected>, Failure> {
        if batch.events.is_empty() {
            return Ok(None);
        }
        let err = match self.store.append(self.id, &batch.events) {
            Ok(receipt) => {
                self.next_seq = receipt.next_seq;
                self.ack(receipt.durable)?;
                return Ok(None);
            }
            Err(e) => e,
        };
        let index =
            rejected_seq(&err).and_then(|seq| batch.events.iter().position(|e| e.seq() == seq));
        let Some(index) = index else {
            return Err(err.into());
        };
        if index > 0 {
            let receipt = self.store.append(self.id, &batch.events[..index])?;
            self.next_seq = receipt.next_seq;
            self.ack(receipt.durable)?;
        }
        Ok(Some(Rejected {
            line: batch.lines[index],
            reason: err.to_string(),
        }))
    }

    /// Makes everything appended durable and acknowledges it; then, with
    /// nothing left to wait for, does the store's idle work: a native WAL
    /// log seals its closed turns when enough are plain
    /// ([`Store::seal_due`]), so a session appended to by one process after
    /// another stays close to its sealed size. A failed seal changes no
    /// acknowledged event: it is said on stderr, and the exit status stays.
    fn finish(&mut self) -> Result<(), Failure> {
        let durable = self.store.flush(self.id)?;
        self.ack(durable)?;
        if let Err(e) = self.store.seal_due(self.id) {
            eprintln!(
                "turnwal append: session {:?}: every event was acknowledged, but sealing its \
                 closed turns failed ({e}); `turnwal compact` seals them later",
                self.id
            );
        }
        Ok(())
    }

    /// Prints `ack SEQ` for every newly durable seq, then flushes stdout so
    /// the producer sees them at once.
    fn ack(&mut self, durable: u64) -> Result<(), Failure> {
        if durable <= self.acked {
            return Ok(());
        }
        if self.quiet {
            self.acked = durable;
            return Ok(());
        }
        let mut text = String::new();
        for seq in self.acked..durable {
            text.push_str("ack ");
            text.push_str(&seq.to_string());
            text.push('\n');
        }
        self.acked = durable;
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        Ok(())
    }
}

/// The seq of the event an append error blames, for errors caused by the
/// input rather than by the store.
fn rejected_seq(err: &Error) -> Option<u64> {
    match err {
        Error::Contract(v) => Some(v.seq),
        Error::Event(e) => e.seq,
        _ => None,
    }
}
