//! The salvage read of a JSONL log (`cat --salvage`): every intact event,
//! including those after a damaged region, with each unusable region named
//! as a [`Gap`].
//!
//! - Raw: every newline-terminated line after the header that decodes is
//!   intact; a line that does not decode is a gap of its bytes (adjacent bad
//!   lines are one gap); a final fragment without a newline is a gap to the
//!   end of the file.
//! - Zstd: every frame that decodes and checks is read line by line; a
//!   frame that does not is a gap of its bytes. Invalid frame structure is
//!   a gap from the damaged frame's start to the next frame magic, where the
//!   read resynchronizes. A bad line inside a good frame is a gap of its
//!   frame's bytes (a line has no byte range in the compressed file). An
//!   incomplete final frame gives the complete lines its decodable prefix
//!   holds, and is a gap to the end of the file.
//! - Seqs: an intact record whose first seq skips ahead is a gap of the
//!   seqs it skips (zero bytes long when no damaged bytes sit there); one
//!   whose seq was already read (an overlap) is unusable and counts as
//!   damaged bytes. So the events are in seq order, without duplicates.

use std::path::Path;

use super::header::parse_header_line;
use super::records::decode_line;
use super::scan::raw_header;
use super::zstd::{decompress_frame, decompress_prefix, next_magic, walk_frames};
use crate::error::{Corruption, Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::{CutReason, Gap};

/// Collects intact records and damaged regions in file order.
#[derive(Default)]
struct Collector {
    events: Vec<Event>,
    gaps: Vec<Gap>,
    expected: u64,
    open: Option<Gap>,
}

impl Collector {
    /// Bytes `offset..offset + len` are unusable.
    fn damaged(&mut self, offset: u64, len: u64, reason: String) {
        match &mut self.open {
            Some(gap) => {
                let end = (offset + len).max(gap.offset + gap.len);
                gap.len = end - gap.offset;
            }
            None => {
                self.open = Some(Gap {
                    offset,
                    len,
                    first_seq: self.expected,
                    next_seq: None,
                    reason,
                    damaged: true,
                });
            }
        }
    }

    /// A record at `offset..offset + len` decoded to `events`.
    fn intact(&mut self, offset: u64, len: u64, events: Vec<Event>) {
        let Some(first) = events.first().map(Event::seq) else {
            return;
        };
        if first < self.expected {
            let reason = format!(
                "{}: record at byte {offset} holds seq {first}, but seq {} was already read",
                CutReason::Invalid,
                self.expected - 1
            );
            self.damaged(offset, len, reason);
            return;
        }
        match self.open.take() {
            Some(mut gap) => {
                gap.next_seq = Some(first);
                self.gaps.push(gap);
            }
            None if first > self.expected => self.gaps.push(Gap {
                offset,
                len: 0,
                first_seq: self.expected,
                next_seq: Some(first),
                reason: format!(
                    "{}: seq gap at byte {offset} (expected {}, got {first})",
                    CutReason::Invalid,
                    self.expected
                ),
                damaged: true,
            }),
            None => {}
        }
        self.expected = events.last().map_or(first, Event::seq) + 1;
        self.events.extend(events);
    }

    /// The plaintext lines of one record region (`at`: its file offset and
    /// length, for a zstd frame; `None`: each line is its own region, raw).
    /// Returns the bytes after the last newline.
    fn lines<'b>(&mut self, plain: &'b [u8], base: u64, frame: Option<(u64, u64)>) -> &'b [u8] {
        let mut start = 0;
        let mut line_no = 0;
        while let Some(nl) = memchr::memchr(b'\n', &plain[start..]) {
            let end = start + nl;
            line_no += 1;
            let (offset, len) = frame.unwrap_or((base + start as u64, (end + 1 - start) as u64));
            match decode_line(&plain[start..end]) {
                Ok(events) => self.intact(offset, len, events),
                Err(why) => {
                    let place = match frame {
                        Some((at, _)) => format!("line {line_no} of the frame at byte {at}"),
                        None => format!("line at byte {offset}"),
                    };
                    self.damaged(
                        offset,
                        len,
                        format!("{}: unparsable {place} ({why})", CutReason::Invalid),
                    );
                }
            }
            start = end + 1;
        }
        &plain[start..]
    }

    fn finish(mut self) -> (Vec<Event>, Vec<Gap>) {
        if let Some(gap) = self.open.take() {
            self.gaps.push(gap);
        }
        (self.events, self.gaps)
    }
}

fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> Error {
    Error::from(Corruption {
        path: path.to_owned(),
        offset,
        unit: crate::error::Unit::Byte,
        seq: None,
        reason: reason.into(),
    })
}

/// The salvage read of a raw log's bytes: its header, every intact event as
/// stored, and the gaps. Only a missing or unreadable header refuses.
pub(crate) fn raw(bytes: &[u8], path: &Path) -> Result<(SessionHeader, Vec<Event>, Vec<Gap>)> {
    let (header, start) = raw_header(bytes, path)?;
    let mut c = Collector::default();
    let rest = c.lines(&bytes[start..], start as u64, None);
    if !rest.is_empty() {
        let at = (bytes.len() - rest.len()) as u64;
        c.damaged(
            at,
            rest.len() as u64,
            format!(
                "{}: incomplete final line: {} bytes without a newline",
                CutReason::Incomplete,
                rest.len()
            ),
        );
    }
    let (events, gaps) = c.finish();
    Ok((header, events, gaps))
}

/// The salvage read of a zstd log's bytes, as [`raw`].
pub(crate) fn zstd(bytes: &[u8], path: &Path) -> Result<(SessionHeader, Vec<Event>, Vec<Gap>)> {
    let (frames, _) = walk_frames(bytes, 1);
    let Some(first) = frames.first().cloned() else {
        return Err(corrupt(
            path,
            0,
            "corrupt Zstandard session log: no complete header frame",
        ));
    };
    let plain = decompress_frame(&bytes[first.clone()]).map_err(|e| {
        corrupt(
            path,
            0,
            format!("corrupt Zstandard session log: header frame failed validation ({e})"),
        )
    })?;
    if plain.is_empty() || plain.iter().position(|&b| b == b'\n') != Some(plain.len() - 1) {
        return Err(corrupt(
            path,
            0,
            "corrupt Zstandard session log: first frame is not exactly one header line",
        ));
    }
    let header = parse_header_line(&plain[..plain.len() - 1]).map_err(|p| match p {
        super::header::HeaderProblem::Corrupt(reason) => corrupt(path, 0, reason),
        super::header::HeaderProblem::Unsupported(detail) => Error::Unsupported {
            path: path.to_owned(),
            detail,
        },
    })?;
    let mut c = Collector::default();
    let len = bytes.len();
    let mut pos = first.end;
    while pos < len {
        let (frames, end) = walk_frames(&bytes[pos..], usize::MAX);
        for f in &frames {
            let (start, stop) = (pos + f.start, pos + f.end);
            let region = (start as u64, (stop - start) as u64);
            match decompress_frame(&bytes[start..stop]) {
                Ok(plain) => {
                    let rest = c.lines(&plain, 0, Some(region));
                    if !rest.is_empty() {
                        c.damaged(
                            region.0,
                            region.1,
                            format!(
                                "{}: the frame at byte {start} ends inside a line",
                                CutReason::Invalid
                            ),
                        );
                    }
                }
                Err(e) => c.damaged(
                    region.0,
                    region.1,
                    format!(
                        "{}: frame at byte {start} failed validation ({e})",
                        CutReason::Invalid
                    ),
                ),
            }
        }
        let after = pos + frames.last().map_or(0, |f| f.end);
        match end {
            Ok(None) => break,
            Ok(Some(torn)) => {
                let torn = pos + torn;
                let recovered = decompress_prefix(&bytes[torn..]);
                let region = (torn as u64, (len - torn) as u64);
                let before = c.events.len();
                c.lines(&recovered, 0, Some(region));
                c.damaged(
                    region.0,
                    region.1,
                    format!(
                        "{}: incomplete final Zstandard frame at byte {torn} ({} bytes; {} complete \
                         events recovered from it)",
                        CutReason::Incomplete,
                        region.1,
                        c.events.len() - before
                    ),
                );
                break;
            }
            Err(e) => {
                let next = next_magic(bytes, after + 1).unwrap_or(len);
                // The walk's offsets are relative to where it started.
                let what = e
                    .reason
                    .strip_suffix(&format!(" at byte {}", e.offset))
                    .unwrap_or(&e.reason);
                c.damaged(
                    after as u64,
                    (next - after) as u64,
                    format!("{}: {what} at byte {}", CutReason::Invalid, pos + e.offset),
                );
                pos = next;
            }
        }
    }
    let (events, gaps) = c.finish();
    Ok((header, events, gaps))
}
