//! The JSONL backend's [`Cursor`]: the second pass of a read, after
//! [`super::classify`] judged the log. It reads the kept bytes again a
//! window (raw) or a frame (zstd) at a time, decodes one line at a time,
//! migrates each event as upstream's reader does, and lends it; then the
//! good events of a damaged or torn final frame the classification kept.
//! Every event's seq is checked against the one expected, so bytes that
//! changed between the passes end the read with an error instead of
//! lending something the classification never saw.

use std::path::PathBuf;

use super::layout::Compression;
use super::records::decode_line;
use super::source::{FileSource, FrameWalk, Source, Step, WINDOW};
use super::zstd::decompress_frame;
use crate::error::{Corruption, Error, Result, Unit};
use crate::event::{Event, EventKind};
use crate::upstream::normalize::Normalizer;
use crate::view::{Cursor, EventRef};

/// Where the cursor is in the file.
enum Input {
    /// A raw log: the next window starts here.
    Raw { at: u64 },
    /// A zstd log: the frames from the walk's position on.
    Zstd { walk: FrameWalk },
}

/// The classifying scan of the bytes a cursor reads: its refusal, if any.
pub(crate) type Refusal = Box<dyn Fn(&FileSource) -> Option<Error> + Send>;

/// What a single-pass read announced from the log's ends, checked as the
/// cursor reads every line: if the bytes before the last `turn/end` hold
/// anything the ends did not show (damage, a retired form, a seq out of
/// place), the read ends with the error the classifying scan gives them.
pub(crate) struct Expect {
    /// The commit point, as announced.
    pub committed: u64,
    /// Turns started before the commit point, so far.
    pub turn_starts: u64,
    /// The stored events announced.
    pub stored: u64,
    /// The classifying scan's refusal of these bytes (`None`: it refuses
    /// nothing).
    pub refusal: Refusal,
}

pub(crate) struct JsonlCursor {
    src: FileSource,
    path: PathBuf,
    input: Input,
    /// The end of the kept bytes.
    end: u64,
    /// Plaintext not yet split into lines, and where in it the next line
    /// starts; a line the plaintext ends inside of, so far.
    plain: Vec<u8>,
    plain_at: usize,
    fragment: Vec<u8>,
    /// The events of the current line, and the next of them to lend.
    events: Vec<Event>,
    next: usize,
    /// The events the classification kept past the kept bytes, as stored.
    rewrite: Option<Vec<Event>>,
    /// The seq the next event must have.
    seq: u64,
    normalizer: Option<Normalizer>,
    expect: Option<Expect>,
}

impl JsonlCursor {
    /// A cursor over the records of `src` in `[start, end)`, then
    /// `rewrite`; `normalizer` migrates what it lends (none: as stored).
    pub(crate) fn new(
        src: FileSource,
        path: PathBuf,
        compression: Compression,
        start: u64,
        end: u64,
        rewrite: Vec<Event>,
        normalizer: Option<Normalizer>,
    ) -> JsonlCursor {
        let input = match compression {
            Compression::None => Input::Raw { at: start },
            Compression::Zstd => Input::Zstd {
                walk: FrameWalk::new(start),
            },
        };
        JsonlCursor {
            src,
            path,
            input,
            end,
            plain: Vec::new(),
            plain_at: 0,
            fragment: Vec::new(),
            events: Vec::new(),
            next: 0,
            rewrite: Some(rewrite),
            seq: 0,
            normalizer,
            expect: None,
        }
    }

    /// The cursor checking, as it reads, what a single-pass read announced.
    pub(crate) fn expecting(mut self, expect: Expect) -> JsonlCursor {
        self.expect = Some(expect);
        self
    }

    /// What went wrong, in the words the read gives it: a single-pass
    /// read's checks give the classifying scan's refusal of the bytes (or,
    /// when that scan finds nothing to refuse, that the bytes changed).
    fn fail(&self, what: &str) -> Error {
        self.expect
            .as_ref()
            .and_then(|expect| (expect.refusal)(&self.src))
            .unwrap_or_else(|| self.changed(what))
    }

    fn changed(&self, what: &str) -> Error {
        Error::from(Corruption {
            path: self.path.clone(),
            offset: 0,
            unit: Unit::Byte,
            seq: Some(self.seq),
            reason: format!(
                "the session log changed while it was read ({what} at seq {})",
                self.seq
            ),
        })
    }

    /// Reads the next plaintext into `plain`; `false` at the end of the
    /// kept bytes.
    fn refill(&mut self) -> Result<bool> {
        // What was read is consumed (the caller kept any unfinished line).
        self.plain.clear();
        self.plain_at = 0;
        match &mut self.input {
            Input::Raw { at } => {
                if *at >= self.end {
                    return Ok(false);
                }
                let n = ((self.end - *at) as usize).min(WINDOW);
                self.plain.resize(n, 0);
                self.src
                    .read_exact_at(*at, &mut self.plain)
                    .map_err(|e| Error::io("read", &self.path, e))?;
                *at += n as u64;
                Ok(true)
            }
            Input::Zstd { walk } => {
                if walk.position() >= self.end {
                    return Ok(false);
                }
                let step = walk
                    .next_step(&self.src)
                    .map_err(|e| Error::io("read", &self.path, e))?;
                let plain = match step {
                    Step::Frame(frame) if frame.end <= self.end => {
                        decompress_frame(walk.bytes(&frame))
                            .map_err(|e| format!("a frame failed: {e}"))
                    }
                    _ => Err("the frames differ".to_owned()),
                };
                match plain {
                    Ok(plain) => {
                        self.plain = plain;
                        Ok(true)
                    }
                    Err(what) => Err(self.fail(&what)),
                }
            }
        }
    }

    /// Decodes the next line into `events`; `false` at the end of the kept
    /// bytes.
    fn next_line(&mut self) -> Result<bool> {
        loop {
            let rest = &self.plain[self.plain_at..];
            if let Some(nl) = memchr::memchr(b'\n', rest) {
                let line_end = self.plain_at + nl;
                let decoded = if self.fragment.is_empty() {
                    decode_line(&self.plain[self.plain_at..line_end])
                } else {
                    self.fragment
                        .extend_from_slice(&self.plain[self.plain_at..line_end]);
                    let line = std::mem::take(&mut self.fragment);
                    decode_line(&line)
                };
                self.plain_at = line_end + 1;
                self.events = decoded.map_err(|e| self.fail(&e))?;
                self.next = 0;
                return Ok(true);
            }
            self.fragment.extend_from_slice(rest);
            if !self.refill()? {
                if !self.fragment.is_empty() {
                    return Err(self.fail("a line without its newline"));
                }
                return Ok(false);
            }
        }
    }
}

impl Cursor for JsonlCursor {
    fn advance(&mut self) -> Result<bool> {
        while self.next >= self.events.len() {
            if !self.next_line()? {
                match self.rewrite.take() {
                    Some(rewrite) if !rewrite.is_empty() => {
                        self.events = rewrite;
                        self.next = 0;
                    }
                    _ => return self.end(),
                }
            }
        }
        let found = self.events[self.next].seq();
        if found != self.seq {
            return Err(self.fail(&format!("found seq {found}")));
        }
        let event = &mut self.events[self.next];
        let mut migrated = Ok(());
        if let Some(normalizer) = self.normalizer.as_mut() {
            if self.expect.is_some() && normalizer.note(event) {
                migrated = Err(format!("a retired {}", event.event_type()));
            } else if Normalizer::touches(event.event_type()) {
                migrated = normalizer.migrate(event).map_err(|e| e.reason);
            }
        }
        if let Err(what) = migrated {
            return Err(self.fail(&what));
        }
        if let Some(expect) = self.expect.as_mut()
            && self.seq < expect.committed
            && self.events[self.next].kind() == EventKind::TurnStart
        {
            expect.turn_starts += 1;
        }
        self.next += 1;
        self.seq += 1;
        Ok(true)
    }

    fn current(&self) -> Option<EventRef<'_>> {
        self.events
            .get(self.next.checked_sub(1)?)
            .map(EventRef::from)
    }

    /// A single-pass read took the turns started before the commit point
    /// from the last `turn/end`'s number; a log that numbers its turns
    /// otherwise gets the count its lines gave.
    fn settle(&self, scan: &mut crate::scan::Scan) {
        let Some(expect) = &self.expect else {
            return;
        };
        if expect.turn_starts != scan.committed_turn {
            scan.committed_turn = expect.turn_starts;
            scan.last_turn = crate::scan::judge_tail(
                scan.policy,
                scan.committed,
                scan.committed_turn,
                &scan.tail,
                crate::scan::TailRule::KeepAll,
            )
            .last_turn;
        }
    }
}

impl JsonlCursor {
    /// The end of the events: what a single-pass read announced must be
    /// what it read.
    fn end(&mut self) -> Result<bool> {
        if let Some(expect) = &self.expect
            && self.seq != expect.stored
        {
            return Err(self.fail("the log's ends and its lines disagree"));
        }
        Ok(false)
    }
}
