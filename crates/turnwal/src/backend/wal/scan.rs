//! `scan_log`: one pass over a session file's bytes that finds the valid
//! records, the commit point, and what after it is tail, torn or corrupt.
//! Records are checked by framing and checksum only; JSON is parsed only for
//! the records after the commit point.
//!
//! Invariants (pure functions: nothing here writes):
//!
//! - [`Frames`]: `[records_start, valid_end)` is consecutive valid records
//!   of this file's salt with seqs `0..records`; `records_start <=
//!   commit_end <= valid_end <= len`; `invalid` is `Some` exactly when
//!   `valid_end < len`, and then starts at `valid_end`.
//! - The commit point is the end of the last `turn/end` that closes the turn
//!   the record before it left open (no step open); `committed` counts the
//!   records through it.
//! - Invalid bytes are damage (kept, and refused unless salvaging) only with
//!   evidence they were acknowledged: they start below the durability
//!   proof's length, a later valid record's watermark passes them, a later
//!   record of the first batch (watermark 0) follows them, or the record is
//!   damaged in place. A zero fill to the end is damage only by the proof.
//!   Without evidence they are a tear, and cut.
//! - Refusing on damage, a cut never starts below the proof's length (cutting
//!   there would lose acknowledged bytes); only a salvage cuts there
//!   ([`CutReason::Damaged`]). Every cut, a salvage's included, starts at a
//!   record boundary at or after the commit point: committed turns are never
//!   cut.

use std::path::Path;

use super::format::{
    self, FileHeader, FileHeaderError, MIN_RECORD_LEN, RECORD_HEADER_LEN, RecordHead,
};
use super::record::{check_at, check_unit, decode_at, heads, unit_frame};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::scan::{
    Cut, CutReason, Evidence, Extent, Findings, Gap, OnDamage, Outcome, Proof, Scan, TailVerdict,
    classify_tail, decide,
};

/// The framing-level result of a scan.
#[derive(Debug, Clone)]
pub struct Frames {
    /// The decoded file header.
    pub file: FileHeader,
    /// File length.
    pub len: u64,
    /// Events in the valid records before the first invalid byte (a
    /// chunk-run record counts its members): the seq the next record needs.
    pub records: u64,
    /// End of the last valid record.
    pub valid_end: u64,
    /// End of the last valid `turn/end` (the commit point), or the start of
    /// the records when there is none.
    pub commit_end: u64,
    /// Records through the commit point.
    pub committed: u64,
    /// Turn number stored in the last `turn/end`.
    pub committed_turn: u64,
    /// Time of the last `turn/end`.
    pub committed_time: Option<i64>,
    /// The last valid record.
    pub last: Option<RecordHead>,
    /// The valid record stating the largest watermark, as (its offset, its
    /// head): a record of a published copy states the copy's whole length
    /// (docs/FORMAT.md, "Published files"), so bytes below it were durable
    /// before the log could be read at all.
    pub stated: Option<(u64, RecordHead)>,
    /// The first invalid byte range, if the valid records do not reach the end.
    pub invalid: Option<Invalid>,
    /// What proves the invalid bytes acknowledged (or, with no invalid
    /// bytes, acknowledged bytes missing), if anything.
    pub damage: Option<Damage>,
}

/// Bytes after the last valid record.
#[derive(Debug, Clone)]
pub struct Invalid {
    /// Where they start.
    pub offset: u64,
    /// Classification.
    pub reason: CutReason,
    /// Which check failed.
    pub detail: String,
}

pub(super) use super::record::corrupt;

/// Decodes the file header, mapping its failures to errors.
pub fn read_file_header(bytes: &[u8], path: &Path) -> Result<FileHeader> {
    format::decode_file_header(bytes).map_err(|e| match e {
        FileHeaderError::Corrupt(reason) => corrupt(path, 0, None, reason),
        FileHeaderError::Unsupported(detail) => Error::Unsupported {
            path: path.to_owned(),
            detail,
        },
    })
}

/// Whether a scan decompresses and walks every sealed unit it meets.
///
/// Every scan that decides anything — recovery, `verify`, a repair, a
/// compaction — checks them ([`Units::Check`]), so every entry point
/// decides from the same evidence. A read that decodes every kept event
/// anyway ([`Units::OnRead`]: `load`, `cat`, a streamed read) leaves each
/// unit to the decoder, which walks it with the same checks as it
/// decompresses it, and fails at it exactly as the scan would have
/// refused the log there: a unit is decompressed once, not twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// Decompress and walk every unit during the scan.
    Check,
    /// Leave each unit to the reader that decodes it.
    OnRead,
}

/// Walks the records of a mapped session file, whose durability proof
/// states `proven` bytes durable (0 when there is none; see `proof.rs`).
pub fn scan_frames(bytes: &[u8], path: &Path, proven: u64) -> Result<Frames> {
    scan_frames_with(bytes, path, proven, Units::Check)
}

/// [`scan_frames`], with units checked as `units` says.
pub fn scan_frames_with(bytes: &[u8], path: &Path, proven: u64, units: Units) -> Result<Frames> {
    let file = read_file_header(bytes, path)?;
    let len = bytes.len() as u64;
    let mut at = file.records_start;
    // Version 3: the archive reference is a commit point (its events are
    // in the archive, every turn of them closed).
    let base = file.archive;
    let mut frames = Frames {
        len,
        records: base.map_or(0, |a| a.count),
        valid_end: at,
        commit_end: at,
        committed: base.map_or(0, |a| a.count),
        committed_turn: base.map_or(0, |a| u64::from(a.turn)),
        committed_time: base.map(|a| a.time),
        last: None,
        stated: None,
        invalid: None,
        damage: None,
        file,
    };
    let salt = frames.file.salt;
    while at < len {
        let checked = check_at(bytes, at, Some(frames.records), salt).and_then(|head| {
            if head.is_v2() && frames.file.version == format::FORMAT_V1 {
                return Err((
                    CutReason::Invalid,
                    format!(
                        "record kind {} is a version-2 record in a version-1 file",
                        head.kind
                    ),
                ));
            }
            // A unit's inside is checked too (decompressed, bounded by its
            // plain length): every entry point that scans decides from the
            // same evidence as `verify`, and a unit whose count, length or
            // records lie is refused at its own offset.
            if head.is_sealed() && units == Units::Check {
                check_unit(unit_frame(bytes, at, &head), &head)
                    .map_err(|d| (CutReason::Invalid, d.detail))?;
            }
            Ok(head)
        });
        match checked {
            Ok(head) => {
                frames.note(at, head);
                at += head.record_len();
            }
            Err((reason, detail)) => {
                let reason = if bytes[at as usize..].iter().all(|&b| b == 0) {
                    CutReason::ZeroFill
                } else {
                    reason
                };
                frames.invalid = Some(Invalid {
                    offset: at,
                    reason,
                    detail,
                });
                break;
            }
        }
    }
    frames.valid_end = at.min(len);
    frames.damage = damage_of(bytes, &frames, proven);
    Ok(frames)
}

impl Frames {
    /// Takes in the valid record at `at` whose head is `head`.
    fn note(&mut self, at: u64, head: RecordHead) {
        let end = at + head.record_len();
        self.records += head.count();
        // A turn/end commits only if it closes the turn the record before
        // it left open, with no step open (what the tracker required when
        // it was appended). A stray one (say, after its turn already
        // ended) stays in the tail, whose contract check cuts it as
        // debris, instead of committing itself.
        if head.commits_after(self.last.as_ref()) {
            self.commit_end = end;
            self.committed = self.records;
            self.committed_turn = u64::from(head.turn);
            self.committed_time = Some(head.time);
        }
        if self
            .stated
            .is_none_or(|(_, s)| head.watermark > s.watermark)
        {
            self.stated = Some((at, head));
        }
        self.last = Some(head);
    }
}

/// What proves acknowledged bytes damaged or missing once the records are
/// walked: evidence about the first invalid bytes, a durability proof (or a
/// record's watermark) past the end, or a log of no record.
fn damage_of(bytes: &[u8], frames: &Frames, proven: u64) -> Option<Damage> {
    let len = frames.len;
    match &frames.invalid {
        Some(invalid) => {
            damage_evidence(bytes, frames, invalid, proven).map(|(proof, text)| Damage {
                offset: invalid.offset,
                proof,
                detail: format!(
                    "{} ({}); {text} [rule: {}]",
                    invalid.detail,
                    invalid.reason,
                    proof.code()
                ),
            })
        }
        None if proven > len => Some(Damage {
            offset: len,
            proof: Proof::Missing,
            detail: format!(
                "the log ends at byte {len}, but its durability proof shows {proven} bytes had \
                 been made durable [rule: {}]: acknowledged bytes are missing",
                Proof::Missing.code()
            ),
        }),
        // A log is published with its first batch, so a log of no record
        // lost it, unless a salvage cut everything and said so in the proof.
        None if proven == 0 && frames.records == 0 => Some(Damage {
            offset: len,
            proof: Proof::FirstRecord,
            detail: format!(
                "the log holds no record, but a log is published with its first batch, so \
                 its first records are missing [rule: {}]",
                Proof::FirstRecord.code()
            ),
        }),
        None => match frames.stated {
            Some((at, head)) if proven == 0 && head.watermark > len => Some(Damage {
                offset: len,
                proof: Proof::Missing,
                detail: format!(
                    "the log ends at byte {len}, but the record at byte {at} (seq {}) shows the \
                     log was durable through byte {} [rule: {}]: acknowledged bytes are missing",
                    head.seq,
                    head.watermark,
                    Proof::Missing.code()
                ),
            }),
            _ => None,
        },
    }
}

/// Damage the scan can prove acknowledged: where, by what, and the text
/// a refusal gives.
#[derive(Debug, Clone)]
pub struct Damage {
    /// Where the damaged bytes start.
    pub offset: u64,
    /// What proves them acknowledged.
    pub proof: Proof,
    /// For people: the failed check and the proof, naming the rule.
    pub detail: String,
}

/// Gathers what proves the bytes at `invalid` acknowledged (so cutting them
/// would lose acknowledged events) or untearable. A zero fill to the end of
/// the file is proven only by the durability proof: nothing follows it.
pub fn damage_evidence(
    bytes: &[u8],
    frames: &Frames,
    invalid: &Invalid,
    proven: u64,
) -> Option<(Proof, String)> {
    let p = invalid.offset;
    if p < proven {
        return Some((
            Proof::Proven,
            format!(
                "the durability proof shows the log was durable through byte {proven}, so this \
                 record had been acknowledged"
            ),
        ));
    }
    if let Some(published) = published(bytes, frames, p, proven) {
        return Some(published);
    }
    if invalid.reason == CutReason::ZeroFill {
        return None;
    }
    let salt = frames.file.salt;
    let len = bytes.len() as u64;
    let mut materialized = None;
    let mut at = p + 1;
    while at + MIN_RECORD_LEN as u64 <= len {
        let Ok(head) = check_at(bytes, at, None, salt) else {
            at += 1;
            continue;
        };
        if head.watermark > p {
            return Some((
                Proof::Watermark,
                format!(
                    "the record at byte {at} (seq {}) shows the log was durable through byte {}, \
                     so this record had been acknowledged",
                    head.seq, head.watermark
                ),
            ));
        }
        if head.watermark == 0 && materialized.is_none() {
            // Proof too, but a watermark further on names the durable
            // length itself: keep looking for one.
            materialized = Some((
                Proof::Materialized,
                format!(
                    "the record at byte {at} (seq {}) was written with the session's first \
                     batch, which is published only once complete and fsynced, so this \
                     record had been acknowledged",
                    head.seq
                ),
            ));
        }
        at += head.record_len();
    }
    materialized.or_else(|| damaged_in_place(bytes, p, frames.records, salt))
}

/// The evidence that the bytes at `p` were published whole, never
/// appended, so no torn write can have produced them (docs/FORMAT.md,
/// "Published files"; docs/RECOVERY.md, "Proof"):
///
/// - `first-record`: `p` is the first record. A log's first records are
///   written with its file (materialization, or a rewrite: compaction, a
///   seal, a copy), which is fsynced whole before its name points at it.
/// - `inside-published-copy`: a valid record before `p` states a
///   watermark past `p`. An appended record's watermark never passes its
///   own offset; a published file's records state the file's whole length.
/// - `sealed-unit`: the record at `p` is a sealed unit with an intact frame
///   (kind 18, the expected seq, a trailer equal to its length, inside the
///   file). Units only ever reach a log inside a published file.
///
/// The first two are evidence only while no durability proof of this file
/// states less than they would: an explicit salvage that cut below a
/// published length first lowered the proof durably, and the records it
/// kept still state the old length. Whatever else the proof states (or if
/// it states more) decides first, as `inside-proven-length`.
fn published(bytes: &[u8], frames: &Frames, p: u64, proven: u64) -> Option<(Proof, String)> {
    let start = frames.file.records_start;
    let stated = frames.stated.filter(|(_, head)| head.watermark > p);
    let floor = stated.map_or(start + 1, |(_, head)| head.watermark.max(start + 1));
    // A version-3 live file's first record after its archive reference was
    // written with the file only if the seal published it there.
    let first_published = frames.file.archive.is_none_or(|a| p < a.published);
    if proven == 0 || proven >= floor {
        if p == start && first_published {
            return Some((
                Proof::FirstRecord,
                "this is the log's first record, written with the file, which is fsynced whole \
                 before it is published, so no torn write produced it"
                    .to_owned(),
            ));
        }
        if let Some((at, head)) = stated {
            return Some((
                Proof::Published,
                format!(
                    "the record at byte {at} (seq {}) was published in a file durable through \
                     byte {}, so this record had been acknowledged",
                    head.seq, head.watermark
                ),
            ));
        }
    }
    let rest = &bytes[p as usize..];
    if rest.len() < RECORD_HEADER_LEN {
        return None;
    }
    let head = format::parse_head(&rest[..RECORD_HEADER_LEN]).ok()?;
    let len = head.record_len();
    if !head.is_sealed() || head.seq != frames.records || len > rest.len() as u64 {
        return None;
    }
    let trailer = &rest[len as usize - format::TRAILER_LEN..len as usize];
    if u64::from(u32::from_le_bytes(trailer.try_into().expect("4 bytes"))) != len {
        return None;
    }
    Some((
        Proof::SealedUnit,
        format!(
            "it is a sealed unit of {} events, {len} bytes, its frame intact: units reach a log \
             only inside a file published whole, never appended, so no torn write produced it",
            head.count()
        ),
    ))
}

/// The smallest unit a power loss tears or loses: a 512-byte sector.
const SECTOR: u64 = 512;
/// The end of a record head's framing fields and seq (checksum, kind,
/// flags, lengths, turn, seq): 32.
const SEQ_END: u64 = format::REC_SEQ_FIELD.end() as u64;
const _: () = assert!(SEQ_END == 32);

/// The damaged-in-place rule: the record at `p` (expected seq `seq`) has an
/// intact frame (a plausible head with that seq and a trailer matching its
/// length), only its checksum fails, the record right after it is valid with
/// the next seq, and no 512-byte sector could have been torn without
/// breaking that frame: none lies wholly between the head's seq and the
/// trailer, and no sector boundary falls inside the head's first 32 bytes
/// (a sector ending there could garble the checksum, kind and flags alone).
/// A power loss tears or loses whole sectors, so this is damage after the
/// fact (a flipped bit, an overwritten run), never a tear.
fn damaged_in_place(bytes: &[u8], p: u64, seq: u64, salt: u32) -> Option<(Proof, String)> {
    let rest = &bytes[p as usize..];
    if rest.len() < MIN_RECORD_LEN {
        return None;
    }
    let head = format::parse_head(&rest[..RECORD_HEADER_LEN]).ok()?;
    let len = head.record_len();
    if head.seq != seq || len > rest.len() as u64 {
        return None;
    }
    let trailer = &rest[len as usize - format::TRAILER_LEN..len as usize];
    if u64::from(u32::from_le_bytes(trailer.try_into().expect("4 bytes"))) != len {
        return None;
    }
    let next = check_at(bytes, p + len, Some(head.next_seq()), salt).ok()?;
    let boundary_in_head = (p + 1).next_multiple_of(SECTOR) <= p + SEQ_END;
    let interior =
        (p + SEQ_END).next_multiple_of(SECTOR) + SECTOR <= p + len - format::TRAILER_LEN as u64;
    if boundary_in_head || interior {
        return None;
    }
    Some((
        Proof::DamagedInPlace,
        format!(
            "its frame is intact and the record after it (byte {}, seq {}) follows it, so no \
             torn write produced this",
            p + len,
            next.seq
        ),
    ))
}

/// The full classification: frames plus the contract check of the tail.
#[derive(Debug, Clone)]
pub struct Classified {
    /// Framing results.
    pub frames: Frames,
    /// The backend-neutral scan.
    pub scan: Scan,
    /// End of the kept records (where closers go).
    pub kept_end: u64,
    /// What the log's durability proof stated (0: nothing).
    pub proven: u64,
}

/// Scans and classifies a session file's bytes (see docs/FORMAT.md),
/// without its durability proof (tools that hold the bytes alone).
pub fn scan_log(bytes: &[u8], path: &Path) -> Result<Classified> {
    scan_log_proven(bytes, path, 0)
}

/// Scans and classifies a session file's bytes whose durability proof
/// states `proven` bytes durable.
pub fn scan_log_proven(bytes: &[u8], path: &Path, proven: u64) -> Result<Classified> {
    classify(bytes, path, proven, OnDamage::Refuse, Units::Check)
}

/// Like [`scan_log_proven`], but where the log is corrupt it cuts from the
/// first damaged byte on ([`CutReason::Damaged`]) instead of refusing: the
/// longest valid prefix, for an explicit salvage.
pub fn salvage_log(bytes: &[u8], path: &Path, proven: u64) -> Result<Classified> {
    classify(bytes, path, proven, OnDamage::Salvage, Units::Check)
}

/// [`scan_log_proven`] for a read that decodes every kept event: sealed
/// units are left to the decoder ([`Units::OnRead`]).
pub fn scan_log_for_read(bytes: &[u8], path: &Path, proven: u64) -> Result<Classified> {
    classify(bytes, path, proven, OnDamage::Refuse, Units::OnRead)
}

fn classify(
    bytes: &[u8],
    path: &Path,
    proven: u64,
    on_damage: OnDamage,
    units: Units,
) -> Result<Classified> {
    let frames = scan_frames_with(bytes, path, proven, units)?;
    let tail = read_tail(bytes, path, &frames)?;
    let verdict = judge_tail(&frames, &tail);
    let kept_end = tail
        .offsets
        .get(verdict.kept)
        .copied()
        .unwrap_or(tail.interrupted_repair.unwrap_or(frames.valid_end));
    let found = findings(&frames, &tail, &verdict, kept_end);
    let damage = proven_damage(&frames, &found, proven);
    let evidence = Evidence {
        invalid: frames.invalid.as_ref().map(|inv| inv.reason),
        proof: damage.as_ref().map(|d| d.proof),
        debris: found.debris.is_some(),
        interrupted_repair: found.interrupted.is_some(),
        open_turn: !verdict.closers.is_empty(),
    };
    let outcome = decide(&evidence, on_damage);
    let cut = match outcome {
        Outcome::RefuseCorrupt(_) | Outcome::CutDamaged(_) => {
            let d = damage.expect("a proof comes with its damage");
            Some(damage_cut(&frames, &found, d, outcome, path)?)
        }
        _ => found.chosen(outcome),
    };
    let extent = Extent {
        bytes: frames.len,
        committed: frames.committed,
        committed_turn: frames.committed_turn,
        committed_time: frames.committed_time,
    };
    let scan = Scan::new(
        frames.file.header.clone(),
        frames.file.policy,
        extent,
        tail.events,
        verdict,
        outcome,
        cut,
    );
    Ok(Classified {
        frames,
        scan,
        kept_end,
        proven,
    })
}

/// The valid records after the commit point, decoded.
struct Tail {
    events: Vec<Event>,
    /// The offset of each event's record (a run's members share one).
    offsets: Vec<u64>,
    /// Where the closers of an interrupted repair start, if any: the tail
    /// stops there.
    interrupted_repair: Option<u64>,
}

/// Decodes the valid records after the commit point, up to the closers of
/// an interrupted repair: those are cut and the repair redone from the
/// real events, so every crash inside a repair converges on the same bytes
/// (watermarks included).
fn read_tail(bytes: &[u8], path: &Path, frames: &Frames) -> Result<Tail> {
    let mut tail = Tail {
        events: Vec::new(),
        offsets: Vec::new(),
        interrupted_repair: None,
    };
    for (at, head) in heads(bytes, frames.commit_end, frames.valid_end) {
        if head.synthetic() {
            tail.interrupted_repair = Some(at);
            break;
        }
        for event in decode_at(bytes, at, &head, path)? {
            tail.events.push(event);
            tail.offsets.push(at);
        }
    }
    Ok(tail)
}

/// The contract's verdict on the tail. A cut never lands inside a chunk
/// run: if the first debris event is a run's later member, the whole run
/// is debris.
fn judge_tail(frames: &Frames, tail: &Tail) -> TailVerdict {
    let judge = |events: &[Event]| {
        classify_tail(
            frames.file.policy,
            frames.committed,
            frames.committed_turn,
            events,
        )
    };
    let mut verdict = judge(&tail.events);
    let offsets = &tail.offsets;
    if verdict.kept > 0
        && verdict.kept < offsets.len()
        && offsets[verdict.kept - 1] == offsets[verdict.kept]
    {
        let start = offsets[..verdict.kept].partition_point(|&o| o < offsets[verdict.kept]);
        let debris = verdict.debris.take();
        verdict = judge(&tail.events[..start]);
        verdict.debris = verdict.debris.or(debris);
    }
    verdict
}

/// Every cut this log could get, one per outcome; the decision picks.
fn findings(frames: &Frames, tail: &Tail, verdict: &TailVerdict, kept_end: u64) -> Findings<Cut> {
    let after = match tail.interrupted_repair {
        Some(at) => Some(format!("{} at byte {at}", CutReason::InterruptedRepair)),
        None => frames
            .invalid
            .as_ref()
            .map(|inv| format!("{} at byte {}", inv.reason, inv.offset)),
    };
    let debris = verdict.debris.as_ref().map(|v| {
        Cut::to_end(
            kept_end,
            frames.len,
            frames.committed + verdict.kept as u64,
            CutReason::Debris,
            match &after {
                Some(after) => format!("{v}; then {after}"),
                None => v.to_string(),
            },
        )
    });
    let interrupted = tail.interrupted_repair.map(|at| {
        Cut::to_end(
            at,
            frames.len,
            frames.committed + tail.events.len() as u64,
            CutReason::InterruptedRepair,
            "synthetic closers of an interrupted repair; recomputed from the real events".into(),
        )
    });
    let torn = frames.invalid.as_ref().map(|inv| {
        Cut::to_end(
            inv.offset,
            frames.len,
            frames.records,
            inv.reason,
            inv.detail.clone(),
        )
    });
    Findings {
        torn,
        debris,
        interrupted,
    }
}

/// What proves acknowledged data damaged: the framing's own evidence, or
/// debris or an interrupted repair's closers below the durability proof
/// (they were acknowledged too).
fn proven_damage(frames: &Frames, found: &Findings<Cut>, proven: u64) -> Option<Damage> {
    frames.damage.clone().or_else(|| {
        let first = found.debris.as_ref().or(found.interrupted.as_ref())?;
        (first.offset < proven).then(|| Damage {
            offset: first.offset,
            proof: Proof::Proven,
            detail: format!(
                "{} ({}); the durability proof shows the log was durable through byte \
                 {proven}, so these records had been acknowledged [rule: {}]",
                first.detail,
                first.reason,
                Proof::Proven.code()
            ),
        })
    })
}

/// A damage outcome in bytes: the refusal naming the damage's offset and
/// seq (`RefuseCorrupt`), or a salvage's cut from the first byte any cut
/// would take (`CutDamaged`).
fn damage_cut(
    frames: &Frames,
    found: &Findings<Cut>,
    d: Damage,
    outcome: Outcome,
    path: &Path,
) -> Result<Cut> {
    if let Outcome::RefuseCorrupt(_) = outcome {
        let seq = [&found.debris, &found.interrupted]
            .into_iter()
            .flatten()
            .find(|c| c.offset == d.offset)
            .map_or(frames.records, |c| c.seq);
        return Err(corrupt(path, d.offset, Some(seq), d.detail));
    }
    let first = [&found.debris, &found.interrupted, &found.torn]
        .into_iter()
        .flatten()
        .min_by_key(|c| c.offset);
    let (offset, seq) = match first {
        Some(c) if c.offset <= d.offset => (c.offset, c.seq),
        _ => (d.offset, frames.records),
    };
    Ok(Cut::to_end(
        offset,
        frames.len,
        seq,
        CutReason::Damaged,
        d.detail,
    ))
}

/// Every intact record of a session file, in seq order, reading past
/// damage: after an invalid record the walk looks, byte by byte, for the
/// next valid record of this file (its salt) with a seq at least the one
/// expected, and names what it skipped as a gap. A record whose checks
/// hold but whose contents do not decode (a sealed unit that does not
/// decompress) is a damaged gap of its own seqs, and the walk goes on after
/// it; the other gaps are left undamaged for the caller, which knows
/// whether recovery refuses the log, to mark.
pub fn salvage_records(bytes: &[u8], path: &Path) -> Result<(Vec<Event>, Vec<Gap>)> {
    let file = read_file_header(bytes, path)?;
    let len = bytes.len() as u64;
    let mut events = Vec::new();
    let mut gaps = Vec::new();
    let mut at = file.records_start;
    // Version 3: the events before the archive reference's count are the
    // archive's (read by the backend).
    let mut expected = file.archive.map_or(0, |a| a.count);
    while at < len {
        match check_at(bytes, at, Some(expected), file.salt) {
            Ok(head) => {
                match decode_at(bytes, at, &head, path) {
                    Ok(decoded) => events.extend(decoded),
                    // A record whose checksum holds but whose contents do
                    // not decode (a sealed unit that does not decompress, a
                    // run that does not expand) loses its own seqs only: the
                    // records after it are as intact as their checks say.
                    Err(e) => gaps.push(Gap {
                        offset: at,
                        len: head.record_len(),
                        first_seq: head.seq,
                        next_seq: Some(head.next_seq()),
                        reason: match e {
                            Error::Corrupt(c) => c.reason,
                            other => other.to_string(),
                        },
                        damaged: true,
                    }),
                }
                expected = head.next_seq();
                at += head.record_len();
            }
            Err((reason, detail)) => {
                let reason = if bytes[at as usize..].iter().all(|&b| b == 0) {
                    CutReason::ZeroFill
                } else {
                    reason
                };
                let resume =
                    (at + 1..len.saturating_sub(MIN_RECORD_LEN as u64 - 1)).find_map(|q| {
                        check_at(bytes, q, None, file.salt)
                            .ok()
                            .filter(|h| h.seq >= expected)
                            .map(|h| (q, h.seq))
                    });
                let (end, next_seq) = match resume {
                    Some((q, seq)) => (q, Some(seq)),
                    None => (len, None),
                };
                gaps.push(Gap {
                    offset: at,
                    len: end - at,
                    first_seq: expected,
                    next_seq,
                    reason: format!("{reason}: {detail}"),
                    // Damage or a torn tail: the caller knows which
                    // (whether recovery refuses the log).
                    damaged: false,
                });
                at = end;
                if let Some(seq) = next_seq {
                    expected = seq;
                }
            }
        }
    }
    Ok((events, gaps))
}

/// Decodes the kept records with seq >= `from_seq`.
pub(super) fn decode_kept(
    bytes: &[u8],
    classified: &Classified,
    from_seq: u64,
    path: &std::path::Path,
) -> Result<Vec<Event>> {
    let kept = classified.scan.stored_len();
    // At most one event per smallest record of the file up front: a count
    // read from disk never sizes an allocation by itself.
    let mut events = Vec::with_capacity(
        (kept.saturating_sub(from_seq) as usize).min(bytes.len() / format::MIN_RECORD_LEN),
    );
    let start = classified.frames.file.records_start;
    for (at, head) in heads(bytes, start, classified.kept_end) {
        if head.next_seq() > from_seq {
            events.extend(
                decode_at(bytes, at, &head, path)?
                    .into_iter()
                    .filter(|e| e.seq() >= from_seq),
            );
        }
    }
    Ok(events)
}
