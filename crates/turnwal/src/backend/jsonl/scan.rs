//! Reading a JSONL log the way upstream's `SessionLogScanner` does, and
//! classifying it into turnwal's [`Scan`].
//!
//! - The header must be exactly one newline-terminated line (in zstd mode,
//!   frame 1 holds exactly that line).
//! - Each newline-terminated record is decoded. The first undecodable line
//!   or seq gap is an issue: no later event is kept, but later lines are
//!   still decoded, and if one holds a `turn/end` the issue sits in the
//!   committed region: the log is corrupt.
//! - Raw mode: everything after the last good line is torn (a final
//!   fragment without a newline, or a bad line and what follows it).
//! - Zstd mode: every complete frame must decompress, check and hold only
//!   good lines; an incomplete final frame is torn, and the complete
//!   records its decodable prefix holds are kept (re-encoded by repair).

use std::ops::Range;
use std::path::Path;

use super::header::{HeaderProblem, parse_header_line};
use super::layout::Compression;
use super::normalize::normalize;
use super::proof::Proven;
use super::records::decode_line;
use super::source::{FrameWalk, Source, Step};
use super::zstd::{decompress_frame, decompress_prefix, scan_frames};
use crate::contract::Policy;
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, EventKind};
use crate::header::SessionHeader;
use crate::scan::{
    Cut, CutReason, Evidence, OnDamage, Outcome, Proof, Scan, TailRule, decide, split_log,
};

/// One decoded storage record (a line, or in zstd mode the frame holding
/// it) and the events it holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rec {
    /// File offset where the record's bytes start (its frame's, in zstd).
    pub start: u64,
    /// Seq of its first event.
    pub first_seq: u64,
}

/// What a scan keeps of the events it decodes: every one ([`All`]), or
/// what classifying the log needs ([`super::classify::Classifier`]).
pub(crate) trait Keep {
    /// Events kept so far (the seq the next one must have).
    fn kept(&self) -> u64;
    /// The events of one good line, which belongs to record `rec` (a new
    /// record when `new_record`; in zstd mode a frame's lines share one).
    fn push(&mut self, rec: Rec, new_record: bool, events: Vec<Event>);
    /// The first seq of the first record starting at or after byte `at`.
    fn first_seq_from(&self, at: u64) -> Option<u64>;
    /// Records kept so far.
    fn records(&self) -> usize {
        0
    }
    /// Forgets the records starting at or after byte `at`.
    fn forget_records_from(&mut self, _at: u64) {}
    /// Forgets the records after the first `n`.
    fn truncate_records(&mut self, _n: usize) {}
}

/// Every event and record: what a repair, a salvage read and the stored
/// events as they are (`cat --raw`) are made from.
#[derive(Debug, Clone, Default)]
pub(crate) struct All {
    /// Every event kept, as stored (valid prefix, recovered events included).
    pub raw: Vec<Event>,
    /// Records in order; the recovered events of a torn frame have none.
    pub recs: Vec<Rec>,
}

impl Keep for All {
    fn kept(&self) -> u64 {
        self.raw.len() as u64
    }

    fn push(&mut self, rec: Rec, new_record: bool, events: Vec<Event>) {
        if new_record {
            self.recs.push(rec);
        }
        self.raw.extend(events);
    }

    fn first_seq_from(&self, at: u64) -> Option<u64> {
        self.recs
            .iter()
            .find(|r| r.start >= at)
            .map(|r| r.first_seq)
    }

    fn records(&self) -> usize {
        self.recs.len()
    }

    fn forget_records_from(&mut self, at: u64) {
        self.recs.retain(|r| r.start < at);
    }

    fn truncate_records(&mut self, n: usize) {
        self.recs.truncate(n);
    }
}

/// A log read back, before the turn contract is applied.
#[derive(Debug, Clone)]
pub(crate) struct Parsed<K = All> {
    pub header: SessionHeader,
    /// What the scan kept of the events.
    pub kept: K,
    /// The file bytes that stay as they are.
    pub keep_bytes: u64,
    /// Seq of the first kept event not held by `..keep_bytes`.
    pub rewrite_from: u64,
    /// Why bytes after `keep_bytes` go, when some do.
    pub torn: Option<(CutReason, String)>,
    pub file_len: u64,
    /// Where the records start: after the header line (raw) or frame (zstd).
    pub records_start: u64,
}

/// A log classified from all of its events (a repair, a salvage read): the scan, and what a
/// repair writes.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub scan: Scan,
    /// Bytes of the file a repair keeps.
    pub keep_bytes: u64,
    /// Stored events a repair writes again (before the closers), as stored.
    pub rewrite: Vec<Event>,
}

fn corrupt(path: &Path, offset: u64, seq: Option<u64>, reason: impl Into<String>) -> Error {
    Error::from(Corruption {
        path: path.to_owned(),
        offset,
        unit: crate::error::Unit::Byte,
        seq,
        reason: reason.into(),
    })
}

fn header_error(path: &Path, problem: HeaderProblem) -> Error {
    match problem {
        HeaderProblem::Corrupt(reason) => corrupt(path, 0, None, reason),
        HeaderProblem::Unsupported(detail) => Error::Unsupported {
            path: path.to_owned(),
            detail,
        },
    }
}

/// The first problem the scanner met.
#[derive(Debug, Clone)]
struct Issue {
    offset: u64,
    seq: u64,
    reason: String,
}

/// `SessionLogScanner` over plaintext, tracking file offsets.
struct LineScanner<'p, K> {
    path: &'p Path,
    keep: K,
    /// Where the last record kept starts.
    last_record: Option<u64>,
    fragment: Vec<u8>,
    /// Plaintext bytes consumed, and the end of the last good line.
    input: u64,
    committed: u64,
    line: u64,
    issue: Option<Issue>,
    /// Whether a line after the first issue holds a `turn/end`: the issue
    /// lies in the committed region ([`Proof::LaterCommit`]), and only an
    /// explicit salvage may cut it.
    damaged: bool,
    /// Where the pending fragment's record starts (the offset corruption
    /// reports would name for it).
    fragment_at: u64,
    /// What the file's durability proof proves, if it has one that
    /// describes it: a defect inside the proven length is corruption; past
    /// it, after a restart of the machine, a tear (a later `turn/end`
    /// proves nothing then: it may be the batch whose fdatasync never
    /// returned).
    proven: Option<Proven>,
}

impl<'p, K: Keep> LineScanner<'p, K> {
    fn new(path: &'p Path, start: u64, proven: Option<Proven>, keep: K) -> LineScanner<'p, K> {
        LineScanner {
            proven,
            path,
            keep,
            last_record: None,
            fragment: Vec::new(),
            input: start,
            committed: start,
            line: 0,
            issue: None,
            damaged: false,
            fragment_at: start,
        }
    }

    /// The evidence about the bytes after the last good line: an issue (or
    /// a fragment without a newline) and whether a later commit proves the
    /// issue committed.
    fn evidence(&self, len: u64) -> Evidence {
        let invalid = (self.committed < len).then_some(if self.issue.is_some() {
            CutReason::Invalid
        } else {
            CutReason::Incomplete
        });
        Evidence {
            invalid,
            proof: invalid.and(proof_of(self.proven, self.defect_at(), self.damaged)),
            ..Evidence::default()
        }
    }

    /// Where the first defect lies: the first issue's record, or the end of
    /// the last good line.
    fn defect_at(&self) -> u64 {
        self.issue.as_ref().map_or(self.fragment_at, |i| i.offset)
    }

    /// The refusal of the first issue, proven committed.
    fn refusal(&self) -> Error {
        let Some(issue) = self.issue.as_ref() else {
            let at = self.fragment_at;
            return corrupt(
                self.path,
                at,
                Some(self.keep.kept()),
                with_rule(
                    "corrupt session log: a committed line lacks its newline",
                    self.proven,
                    at,
                ),
            );
        };
        corrupt(
            self.path,
            issue.offset,
            Some(issue.seq),
            with_rule(&issue.reason, self.proven, issue.offset),
        )
    }

    /// Feeds plaintext; `at` is the file offset corruption reports name for
    /// lines that end in this chunk (`None`: the line's own offset, raw mode).
    fn write(&mut self, chunk: &[u8], at: Option<u64>) -> Result<()> {
        let chunk_start = self.input;
        self.input += chunk.len() as u64;
        let mut line_start = 0;
        while let Some(nl) = memchr::memchr(b'\n', &chunk[line_start..]) {
            let nl = line_start + nl;
            let end = chunk_start + nl as u64 + 1;
            if self.fragment.is_empty() {
                let begin = chunk_start + line_start as u64;
                self.consume(&chunk[line_start..nl], begin, end, at)?;
            } else {
                let mut line = std::mem::take(&mut self.fragment);
                let begin = end - 1 - (line.len() + nl - line_start) as u64;
                line.extend_from_slice(&chunk[line_start..nl]);
                self.consume(&line, begin, end, at)?;
            }
            line_start = nl + 1;
        }
        if self.fragment.is_empty() && line_start < chunk.len() {
            self.fragment_at = at.unwrap_or(chunk_start + line_start as u64);
        }
        // A line is held across chunks (zstd frames) only up to one byte past
        // the longest a record can be: enough for `decode_line` to refuse it
        // by its length, whatever the frames still to come hold.
        let rest = &chunk[line_start..];
        let room = (crate::limits::MAX_RECORD_LEN + 1).saturating_sub(self.fragment.len());
        self.fragment
            .extend_from_slice(&rest[..rest.len().min(room)]);
        Ok(())
    }

    fn consume(&mut self, line: &[u8], begin: u64, end: u64, at: Option<u64>) -> Result<()> {
        self.line += 1;
        let offset = at.unwrap_or(begin);
        let seq = self.keep.kept();
        let decoded = match decode_line(line) {
            Ok(events) => events,
            Err(why) => {
                if self.issue.is_none() {
                    self.issue = Some(Issue {
                        offset,
                        seq,
                        reason: format!(
                            "corrupt session log: unparsable committed event at line {} ({why})",
                            self.line
                        ),
                    });
                }
                return Ok(());
            }
        };
        let has_end = decoded.iter().any(|e| e.kind() == EventKind::TurnEnd);
        if self.issue.is_some() {
            self.damaged |= has_end;
            return Ok(());
        }
        for (k, event) in decoded.iter().enumerate() {
            let expected = seq + k as u64;
            if event.seq() != expected {
                let issue = Issue {
                    offset,
                    seq: expected,
                    reason: format!(
                        "corrupt session log: seq gap in committed region at line {} (expected {expected}, got {})",
                        self.line,
                        event.seq()
                    ),
                };
                self.damaged |= has_end;
                self.issue = Some(issue);
                return Ok(());
            }
        }
        // In zstd mode a record is the frame: a repair restarts at its
        // first byte, so it must rewrite from its first event.
        let new_record = !(at.is_some() && self.last_record == Some(offset));
        self.last_record = Some(offset);
        self.keep.push(
            Rec {
                start: offset,
                first_seq: seq,
            },
            new_record,
            decoded,
        );
        self.committed = end;
        Ok(())
    }
}

/// What proves a defect at `at` committed: a durability proof that covers it
/// ([`Proof::Proven`]); past the proven length after a restart, nothing
/// (a power loss tore bytes whose fdatasync never returned); otherwise
/// upstream's rule, a later `turn/end` ([`Proof::LaterCommit`]).
fn proof_of(proven: Option<Proven>, at: u64, later_commit: bool) -> Option<Proof> {
    match proven {
        Some(p) if at < p.len => Some(Proof::Proven),
        Some(p) if p.rebooted => None,
        _ => later_commit.then_some(Proof::LaterCommit),
    }
}

/// Whether a defect at `at` lies where only a tear can be: past the proven
/// length, after a restart.
fn torn_past_proof(proven: Option<Proven>, at: u64) -> bool {
    proven.is_some_and(|p| p.rebooted && at >= p.len)
}

/// A refusal's reason: upstream's text, and when the durability proof is
/// what proves the defect committed, the rule and the proven length.
fn with_rule(reason: &str, proven: Option<Proven>, at: u64) -> String {
    match proven {
        Some(Proven { len, .. }) if at < len => format!(
            "{reason}; the transcript's durability proof states {len} bytes durable \
             [rule: {}]",
            Proof::Proven.code()
        ),
        _ => reason.to_owned(),
    }
}

/// Reads a log's bytes into a [`Parsed`], keeping what `make` (given the
/// header) keeps; with `salvage`, the salvage read of `recover --salvage`:
/// a defect in the committed region (which a plain read refuses as
/// corruption) becomes a cut from the first damaged line or frame to the
/// end of the file ([`CutReason::Damaged`]), keeping the longest valid
/// prefix. A log a plain read accepts parses the same either way.
///
/// `proven` is the length the transcript's durability proof proves durable
/// (when it has one that describes these bytes).
pub(crate) fn parse_for<K: Keep>(
    src: &dyn Source,
    compression: Compression,
    path: &Path,
    salvage: bool,
    proven: Option<Proven>,
    make: impl FnOnce(&SessionHeader) -> K,
) -> Result<Parsed<K>> {
    match compression {
        Compression::None => parse_raw(src, path, salvage, proven, make),
        Compression::Zstd => parse_zstd(src, path, salvage, proven, make),
    }
}

/// The header of a raw log, from its first line alone, and where the
/// records after it start.
pub(crate) fn raw_header(bytes: &[u8], path: &Path) -> Result<(SessionHeader, usize)> {
    let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
        return Err(corrupt(path, 0, None, "empty or header-less session log"));
    };
    let header = parse_header_line(&bytes[..nl]).map_err(|p| header_error(path, p))?;
    Ok((header, nl + 1))
}

/// The header of the log `src` holds and where its records start, read
/// from its front alone (the header line, or the first frame).
pub(crate) fn head_of(
    src: &dyn Source,
    compression: Compression,
    path: &Path,
) -> Result<(SessionHeader, u64)> {
    match compression {
        Compression::None => raw_header_in(src, path),
        Compression::Zstd => {
            let mut walk = FrameWalk::new(0);
            let step = walk
                .next_step(src)
                .map_err(|e| Error::io("read", path, e))?;
            let Step::Frame(first) = step else {
                return Err(corrupt(
                    path,
                    0,
                    None,
                    "empty or header-less Zstandard session log",
                ));
            };
            let header = zstd_header(walk.bytes(&first), path)?;
            Ok((header, first.end))
        }
    }
}

/// [`raw_header`] read from the front of `src`, a piece at a time.
fn raw_header_in(src: &dyn Source, path: &Path) -> Result<(SessionHeader, u64)> {
    const PIECE: u64 = 64 << 10;
    let mut head = Vec::new();
    let mut at = 0;
    while at < src.len() && head.len() <= crate::limits::MAX_RECORD_LEN {
        let n = PIECE.min(src.len() - at);
        let mut piece = vec![0; n as usize];
        src.read_exact_at(at, &mut piece)
            .map_err(|e| Error::io("read", path, e))?;
        if let Some(nl) = piece.iter().position(|&b| b == b'\n') {
            head.extend_from_slice(&piece[..=nl]);
            let (header, start) = raw_header(&head, path)?;
            return Ok((header, start as u64));
        }
        head.extend_from_slice(&piece);
        at += n;
    }
    Err(corrupt(path, 0, None, "empty or header-less session log"))
}

fn parse_raw<K: Keep>(
    src: &dyn Source,
    path: &Path,
    salvage: bool,
    proven: Option<Proven>,
    make: impl FnOnce(&SessionHeader) -> K,
) -> Result<Parsed<K>> {
    let (header, start) = raw_header_in(src, path)?;
    let keep = make(&header);
    let mut scanner = LineScanner::new(path, start, proven, keep);
    let len = src.len();
    src.each_window(start, len, &mut |_, chunk| scanner.write(chunk, None))?;
    let torn = match decide(&scanner.evidence(len), on_damage(salvage)) {
        Outcome::RefuseCorrupt(_) => return Err(scanner.refusal()),
        Outcome::CutDamaged(_) => {
            let issue = scanner.issue.as_ref().expect("a proven issue");
            Some((CutReason::Damaged, damaged(&issue.reason)))
        }
        Outcome::CutTorn => Some(match &scanner.issue {
            Some(issue) => (CutReason::Invalid, issue.reason.clone()),
            None => (
                CutReason::Incomplete,
                format!(
                    "incomplete final line: {} bytes without a newline",
                    len - scanner.committed
                ),
            ),
        }),
        _ => None,
    };
    Ok(Parsed {
        header,
        rewrite_from: scanner.keep.kept(),
        kept: scanner.keep,
        keep_bytes: scanner.committed,
        torn,
        file_len: len,
        records_start: start,
    })
}

/// The header of a zstd log, from its first frame alone (listing and
/// identity checks read no more).
pub(crate) fn zstd_header(bytes: &[u8], path: &Path) -> Result<SessionHeader> {
    let scan = scan_frames(bytes, 1).map_err(|e| corrupt(path, e.offset as u64, None, e.reason))?;
    let Some(first) = scan.frames.first() else {
        return Err(corrupt(
            path,
            0,
            None,
            "empty or header-less Zstandard session log",
        ));
    };
    let plain = decompress_frame(&bytes[first.clone()]).map_err(|e| {
        corrupt(
            path,
            0,
            None,
            format!("corrupt Zstandard session log: header frame failed validation ({e})"),
        )
    })?;
    header_of_frame(&plain, path)
}

/// What a read does with damage proven committed.
fn on_damage(salvage: bool) -> OnDamage {
    if salvage {
        OnDamage::Salvage
    } else {
        OnDamage::Refuse
    }
}

/// The detail of a [`CutReason::Damaged`] cut.
fn damaged(why: &str) -> String {
    format!("damaged committed region, cut by a salvage repair: {why}")
}

fn header_of_frame(plain: &[u8], path: &Path) -> Result<SessionHeader> {
    if plain.is_empty() || plain.iter().position(|&b| b == b'\n') != Some(plain.len() - 1) {
        return Err(corrupt(
            path,
            0,
            None,
            "corrupt Zstandard session log: first frame is not exactly one header line",
        ));
    }
    parse_header_line(&plain[..plain.len() - 1]).map_err(|p| header_error(path, p))
}

fn parse_zstd<K: Keep>(
    src: &dyn Source,
    path: &Path,
    salvage: bool,
    proven: Option<Proven>,
    make: impl FnOnce(&SessionHeader) -> K,
) -> Result<Parsed<K>> {
    let io = |e| Error::io("read", path, e);
    let framing = walk_framing(src, path, salvage, proven)?;
    let past_proof = |at: u64| torn_past_proof(proven, at);
    let changed = || corrupt(path, 0, None, "the session log changed while it was read");
    let mut walk = FrameWalk::new(0);
    if !matches!(walk.next_step(src).map_err(io)?, Step::Frame(f) if f == framing.first) {
        return Err(changed());
    }
    let plain = decompress_frame(walk.bytes(&framing.first))
        .map_err(|e| corrupt(path, 0, None, failed_frame(0, &e)))?;
    let header = header_of_frame(&plain, path)?;
    let keep = make(&header);
    let mut scanner = LineScanner::new(path, plain.len() as u64, proven, keep);
    let mut undecodable = None;
    for _ in 1..framing.count {
        let Step::Frame(frame) = walk.next_step(src).map_err(io)? else {
            return Err(changed());
        };
        let plain = match decompress_frame(walk.bytes(&frame)) {
            Ok(plain) => plain,
            Err(e) if salvage || past_proof(frame.start) => {
                undecodable = Some((frame.start, failed_frame(frame.start, &e)));
                break;
            }
            // Named by the seq its first event would have had.
            Err(e) => {
                return Err(corrupt(
                    path,
                    frame.start,
                    Some(scanner.keep.kept()),
                    failed_frame(frame.start, &e),
                ));
            }
        };
        scanner.write(&plain, Some(frame.start))?;
        if scanner.damaged && !salvage {
            break; // refused below: nothing after it changes that
        }
    }
    let len = src.len();
    let records_start = framing.first.end;
    let parsed = |scanner: LineScanner<'_, K>, keep_bytes, rewrite_from, torn| Parsed {
        header: header.clone(),
        kept: scanner.keep,
        keep_bytes,
        rewrite_from,
        torn,
        file_len: len,
        records_start,
    };
    if let Outcome::RefuseCorrupt(_) = decide(&scanner.evidence(scanner.input), on_damage(salvage))
    {
        return Err(scanner.refusal());
    }
    // The first damage in file order: a bad line (its frame), a record a
    // complete frame leaves unterminated, a frame that does not decode,
    // invalid frame structure. A salvage read cuts it; so does any read
    // when it lies past the proven length (a tear).
    let torn_record = (scanner.issue.is_none() && !scanner.fragment.is_empty())
        .then(|| (scanner.fragment_at, "a line without a newline".to_owned()));
    let damage = [
        scanner.issue.as_ref().map(|i| (i.offset, i.reason.clone())),
        torn_record,
        undecodable,
        framing.broken_frame.clone(),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|(at, _)| *at)
    .filter(|(at, _)| salvage || past_proof(*at));
    if let Some((at, why)) = damage {
        let rewrite_from = scanner
            .keep
            .first_seq_from(at)
            .unwrap_or(scanner.keep.kept());
        scanner.keep.forget_records_from(at);
        let torn = if salvage {
            (CutReason::Damaged, damaged(&why))
        } else {
            (CutReason::Invalid, why)
        };
        return Ok(parsed(scanner, at, rewrite_from, Some(torn)));
    }
    if scanner.committed != scanner.input {
        return Err(torn_in_complete_frame(&scanner, &framing, path));
    }
    let complete = scanner.keep.kept();
    let Some(torn_start) = framing.torn_start else {
        return Ok(parsed(scanner, len, complete, None));
    };
    // What the torn final frame still decodes to: its complete lines.
    let mut torn_bytes = vec![0; (len - torn_start) as usize];
    src.read_exact_at(torn_start, &mut torn_bytes).map_err(io)?;
    let recovered = decompress_prefix(&torn_bytes);
    drop(torn_bytes);
    let recs = scanner.keep.records();
    scanner.write(&recovered, Some(torn_start))?;
    if let Outcome::RefuseCorrupt(_) = decide(&scanner.evidence(scanner.input), on_damage(salvage))
    {
        return Err(scanner.refusal());
    }
    scanner.keep.truncate_records(recs);
    let n = scanner.keep.kept() - complete;
    let torn = (
        CutReason::Incomplete,
        format!(
            "incomplete final Zstandard frame at byte {torn_start} ({} bytes; {n} complete events recovered from it)",
            len - torn_start
        ),
    );
    Ok(parsed(scanner, torn_start, complete, Some(torn)))
}

/// The frame structure of a zstd log.
struct Framing {
    /// Complete frames.
    count: usize,
    /// The first (the header's).
    first: Range<u64>,
    /// The last complete one.
    last: Option<Range<u64>>,
    /// Where an incomplete final frame starts.
    torn_start: Option<u64>,
    /// Invalid structure a read goes past (a salvage, or past the proof):
    /// where the damaged frame starts, and why.
    broken_frame: Option<(u64, String)>,
}

/// Walks the framing of the whole file first, as upstream's scanner walks
/// it before it decompresses anything: invalid structure anywhere is
/// refused before any frame's content is looked at — unless a salvage read
/// (or a tear past the proof) uses the complete frames before it.
fn walk_framing(
    src: &dyn Source,
    path: &Path,
    salvage: bool,
    proven: Option<Proven>,
) -> Result<Framing> {
    let mut walk = FrameWalk::new(0);
    let (mut count, mut first, mut last) = (0usize, None, None);
    let end = loop {
        match walk
            .next_step(src)
            .map_err(|e| Error::io("read", path, e))?
        {
            Step::Frame(frame) => {
                count += 1;
                first.get_or_insert(frame.clone());
                last = Some(frame);
            }
            Step::Torn(at) => break Ok(Some(at)),
            Step::End => break Ok(None),
            Step::Broken(e) => break Err(e),
        }
    };
    let last_end = last.as_ref().map_or(0, |f: &Range<u64>| f.end);
    let (torn_start, broken_frame) = match end {
        Ok(torn_start) => (torn_start, None),
        Err(e) if count > 0 && (salvage || torn_past_proof(proven, last_end)) => {
            (None, Some((last_end, e.reason)))
        }
        Err(e) => return Err(corrupt(path, e.offset as u64, None, e.reason)),
    };
    let Some(first) = first else {
        return Err(corrupt(
            path,
            0,
            None,
            "empty or header-less Zstandard session log",
        ));
    };
    Ok(Framing {
        count,
        first,
        last,
        torn_start,
        broken_frame,
    })
}

/// A frame that failed to decode, for people.
fn failed_frame(start: u64, e: &str) -> String {
    format!("corrupt Zstandard session log: frame at byte {start} failed validation ({e})")
}

/// The refusal of a complete frame whose lines end in a torn record.
fn torn_in_complete_frame<K: Keep>(
    scanner: &LineScanner<'_, K>,
    framing: &Framing,
    path: &Path,
) -> Error {
    let (offset, seq) = scanner
        .issue
        .as_ref()
        .map_or((framing.last.as_ref().map_or(0, |f| f.start), None), |i| {
            (i.offset, Some(i.seq))
        });
    let detail = scanner
        .issue
        .as_ref()
        .map_or("a line without a newline".to_owned(), |i| i.reason.clone());
    corrupt(
        path,
        offset,
        seq,
        format!(
            "corrupt Zstandard session log: complete frame contains a torn JSONL record ({detail})"
        ),
    )
}

/// Applies read-time normalization and the turn contract to a parsed log.
pub(crate) fn plan(parsed: Parsed, policy: Policy, path: &Path) -> Result<Plan> {
    let Parsed {
        header,
        kept: All { raw, recs },
        keep_bytes,
        rewrite_from,
        torn,
        file_len,
        records_start: _,
    } = parsed;
    let offset_of = |seq: u64| -> u64 {
        if seq >= rewrite_from {
            return keep_bytes;
        }
        let i = recs.partition_point(|r| r.first_seq <= seq);
        recs[i.saturating_sub(1)].start
    };
    let events = normalize(&raw, &header.id).map_err(|e| {
        corrupt(
            path,
            offset_of(e.seq),
            Some(e.seq),
            format!(
                "stored session {:?} failed validation: {}",
                header.id, e.reason
            ),
        )
    })?;
    // Upstream's reader keeps every decoded event: no debris (KeepAll), so
    // what the scanner kept is what the log keeps.
    let split = split_log(policy, &events, TailRule::KeepAll);
    let kept = events.len();
    let rewrite = raw[(rewrite_from as usize).min(kept)..kept].to_vec();
    let cut =
        torn.map(|(reason, detail)| Cut::to_end(keep_bytes, file_len, kept as u64, reason, detail));
    let outcome = Outcome::of_cut(cut.as_ref(), !split.verdict.closers.is_empty());
    let scan = Scan::of_split(header, policy, &events, split, file_len, outcome, cut);
    Ok(Plan {
        scan,
        keep_bytes,
        rewrite,
    })
}
