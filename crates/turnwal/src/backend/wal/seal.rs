//! Sealed units (docs/FORMAT.md, "Sealed units", "Sealing and
//! compaction"): a unit is one kind-18 record whose payload is a zstd frame
//! of whole closed turns' plain records (salt 0, watermark 0). This module
//! reads a unit's events back and builds a log's sealed copy; the writer
//! publishes it (`WalWriter::compact`).
//!
//! Invariants:
//!
//! - [`unit_events`] decompresses at most `plain_len` bytes (a frame that
//!   inflates past it, or to less, is `sealed-unit-length`), and accepts
//!   only what the spec allows inside: plain records of kinds 1–17 with salt
//!   0 and watermark 0, seqs contiguous from the unit's, `count` events, the
//!   last one a `turn/end` closing a turn at the unit's time.
//! - [`sealed_copy`] changes no event: every event of the copy decodes to
//!   the bytes the original decodes to (tests/store/wal_v2.rs checks it through
//!   every reader); only closed turns (before the commit point) are sealed,
//!   the open tail is copied record for record.

use std::path::Path;

use super::format::{self, FileHeader, KIND_SEALED, RecordHead};
use super::record::{decode_at, heads};
use super::scan::Classified;
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::Event;

/// The zstd level of units sealed at a close or by a compaction, which
/// nothing waits on, so they afford a level that compresses better than
/// upstream's per-batch frames (level 3 gave 1.08× their bytes on the bench
/// workload, level 9 0.96×; `turnwal bench`, docs/PERFORMANCE.md).
pub const UNIT_ZSTD_LEVEL: i32 = 9;
/// The zstd level of units sealed while the session lives (an idle seal,
/// or one after a batch): such a seal runs between a harness's turns, in
/// the process that appends, so it spends 6–7 ms of CPU per MiB sealed
/// instead of level 9's 14–15 (`turnwal bench --live-turns`), for 8% more
/// bytes (0.92× upstream's zstd on a live realistic session against
/// 0.85×; docs/PERFORMANCE.md, "Live sessions").
pub const LIVE_ZSTD_LEVEL: i32 = 3;
/// A unit closes at the first turn boundary after this many plain bytes.
pub const UNIT_TARGET_LEN: usize = 4 << 20;

/// Appends a copy of a valid record with watermark 0 and `salt`'s checksum
/// (the copy is stamped with its length once it is whole).
fn copy_record(out: &mut Vec<u8>, record: &[u8], salt: u32) {
    let start = out.len();
    out.extend_from_slice(record);
    format::restamp(&mut out[start..], 0, salt);
}

/// One plain event of a closed turn, as the copy re-encodes it.
struct Plain {
    event: Event,
    placement: Placement,
    synthetic: bool,
}

/// What [`sealed_copy`] made.
pub struct SealedCopy {
    /// The new file's bytes.
    pub bytes: Vec<u8>,
    /// Events in it.
    pub events: u64,
    /// Sealed units written anew.
    pub new_units: usize,
    /// The copy's commit point: the end of its last unit or closed turn.
    pub commit_end: u64,
}

/// The sealed copy of a classified log (version 1 or 2) with nothing to
/// cut: the file header (version 2, `salt`), the log's sealed units as they
/// are, every closed turn after them sealed (a unit closes at the first
/// turn boundary after [`UNIT_TARGET_LEN`] plain bytes; a turn whose records
/// alone exceed 64 MiB stays plain), the open tail copied record for
/// record. Every record of the copy states the copy's length as its
/// watermark ([`format::stamp_published`]) and has `salt`'s checksum.
/// `None` when there is nothing to seal in a version-2 log. Units are
/// compressed at zstd `level`.
pub fn sealed_copy(
    bytes: &[u8],
    classified: &Classified,
    path: &Path,
    salt: u32,
    level: i32,
) -> Result<Option<SealedCopy>> {
    let frames = &classified.frames;
    let file: &FileHeader = &frames.file;
    let mut out = Vec::with_capacity(bytes.len());
    format::encode_file_header_version(
        &mut out,
        &file.header,
        file.policy,
        salt,
        format::FORMAT_V2,
    );
    let records_start = out.len();
    let mut units = Units::new(salt, level);
    let mut plain_closed = 0usize;
    walk_closed(bytes, file.records_start, frames.commit_end, path, |met| {
        match met {
            Met::Unit(record) => {
                units.emit(&mut out)?;
                copy_record(&mut out, record, salt);
            }
            Met::Turn { events, plain, .. } => {
                plain_closed += plain.len();
                if plain.len() > format::MAX_UNIT_LEN as usize {
                    // Too big for any unit: stays plain, in order.
                    units.emit(&mut out)?;
                    encode_plain(&mut out, &events, salt);
                } else {
                    units.add(&mut out, &events, &plain)?;
                }
            }
        }
        Ok(true)
    })?;
    units.emit(&mut out)?;
    let new_units = units.written;
    // Nothing sealed anew (no plain closed turn, or only turns too big for
    // a unit): a version-2 log stays as it is.
    if file.version == format::FORMAT_V2 && (plain_closed == 0 || new_units == 0) {
        return Ok(None);
    }
    let commit_end = out.len() as u64;
    for (at, head) in heads(bytes, frames.commit_end, classified.kept_end) {
        copy_record(
            &mut out,
            &bytes[at as usize..(at + head.record_len()) as usize],
            salt,
        );
    }
    format::stamp_published(&mut out, records_start, salt);
    Ok(Some(SealedCopy {
        bytes: out,
        events: classified.scan.stored_len(),
        new_units,
        commit_end,
    }))
}

/// What [`walk_closed`] meets.
enum Met<'a> {
    /// A sealed unit, as it is stored.
    Unit(&'a [u8]),
    /// A closed turn (with whatever precedes it since the last one): its
    /// events, their plain records (salt 0, watermark 0: what a unit
    /// holds), and where its records end in the log.
    Turn {
        events: Vec<Plain>,
        plain: Vec<u8>,
        end: u64,
    },
}

/// Walks the records of `bytes` in `[from, to)` (`to` a commit point),
/// handing `each` every sealed unit and every closed turn in order, until
/// `each` says stop (`false`).
fn walk_closed(
    bytes: &[u8],
    from: u64,
    to: u64,
    path: &Path,
    mut each: impl FnMut(Met<'_>) -> Result<bool>,
) -> Result<()> {
    let mut turn: Vec<Plain> = Vec::new();
    let mut previous: Option<RecordHead> = None;
    for (at, head) in heads(bytes, from, to) {
        let end = at + head.record_len();
        if head.is_sealed() {
            previous = Some(head);
            if !each(Met::Unit(&bytes[at as usize..end as usize]))? {
                return Ok(());
            }
            continue;
        }
        let placement = head.placement();
        for event in decode_at(bytes, at, &head, path)? {
            turn.push(Plain {
                event,
                placement,
                synthetic: head.synthetic(),
            });
        }
        let closes = head.closes_turn_after(previous.as_ref());
        previous = Some(head);
        if !closes {
            continue;
        }
        let events = std::mem::take(&mut turn);
        let mut plain = Vec::new();
        encode_plain(&mut plain, &events, 0);
        if !each(Met::Turn { events, plain, end })? {
            return Ok(());
        }
    }
    debug_assert!(turn.is_empty(), "the commit point closes a turn");
    Ok(())
}

/// Encodes plain events (packing runs, keeping the synthetic mark).
fn encode_plain(out: &mut Vec<u8>, events: &[Plain], salt: u32) {
    let batch: Vec<Event> = events.iter().map(|p| p.event.clone()).collect();
    let placements: Vec<Placement> = events.iter().map(|p| p.placement).collect();
    let synthetic: Vec<bool> = events.iter().map(|p| p.synthetic).collect();
    format::encode_batch_marked(out, &batch, &placements, &synthetic, 0, salt);
}

/// Closed turns gathered into sealed units. Each turn's plain records are
/// encoded once, when it closes: a unit's plain bytes are its turns' laid
/// end to end, which is the encoding of all their events, since no chunk
/// run crosses a turn's `turn/end`.
struct Units {
    /// The group's plain records.
    plain: Vec<u8>,
    /// Its first event's seq, its event count, the last event's turn and
    /// time.
    first_seq: u64,
    count: u64,
    last: (u32, i64),
    /// The salt the units are checksummed with, and their zstd level.
    salt: u32,
    level: i32,
    /// Units written.
    written: usize,
}

impl Units {
    fn new(salt: u32, level: i32) -> Units {
        Units {
            plain: Vec::new(),
            first_seq: 0,
            count: 0,
            last: (0, 0),
            salt,
            level,
            written: 0,
        }
    }

    /// Adds a closed turn (`turn`, its plain records `plain`): the group is
    /// sealed first if the turn would take it past a unit's limit, and
    /// after if it reaches [`UNIT_TARGET_LEN`]. `plain` must fit a unit.
    fn add(&mut self, out: &mut Vec<u8>, turn: &[Plain], plain: &[u8]) -> Result<()> {
        if self.plain.len() + plain.len() > format::MAX_UNIT_LEN as usize {
            self.emit(out)?;
        }
        let closing = turn.last().expect("a closed turn has events");
        if self.count == 0 {
            self.first_seq = turn[0].event.seq();
        }
        self.count += turn.len() as u64;
        self.last = (closing.placement.turn, closing.event.time());
        self.plain.extend_from_slice(plain);
        if self.plain.len() >= UNIT_TARGET_LEN {
            self.emit(out)?;
        }
        Ok(())
    }

    /// Appends the group's sealed unit: its plain records (salt 0,
    /// watermark 0) compressed at the group's level, its head stating the
    /// count, the first seq and the last event's turn and time.
    fn encode(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let frame = zstd::bulk::compress(&self.plain, self.level)?;
        let (turn, time) = self.last;
        let head = RecordHead {
            kind: KIND_SEALED,
            flags: 0,
            type_len: 0,
            data_len: frame.len() as u32,
            sources_len: self.plain.len() as u32,
            surface_len: self.count as u32,
            turn,
            seq: self.first_seq,
            time,
            watermark: 0,
            step: 0,
        };
        format::write_record(out, &head, &[&frame], self.salt);
        Ok(())
    }

    /// Seals the group into one unit, if it holds anything.
    fn emit(&mut self, out: &mut Vec<u8>) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        self.encode(out)
            .map_err(|e| Error::io("compress", Path::new("sealed unit"), e))?;
        self.plain.clear();
        self.count = 0;
        self.written += 1;
        Ok(())
    }
}

/// What [`archive_units`] sealed: units to append to a version-3 archive.
pub struct ArchivedUnits {
    /// The units, checksummed with the archive's salt, watermark 0.
    pub bytes: Vec<u8>,
    /// How many units.
    pub units: usize,
    /// The seq after their last event: the archive's new count.
    pub next_seq: u64,
    /// Where in the live file the records they hold end.
    pub end: u64,
    /// The last turn they hold.
    pub last_turn: u32,
    /// The time of their last event.
    pub last_time: i64,
}

/// Seals the closed turns of a version-3 live file's records in `[from,
/// to)` (`to` a commit point) into units for its archive, with the
/// archive's `salt`, grouped as [`sealed_copy`] groups them. Only sealed
/// units go into an archive, so it stops at the first turn too big for a
/// unit (that turn and every later one stay in the live file). `None` when
/// nothing is sealed. Units are compressed at zstd `level`.
pub fn archive_units(
    bytes: &[u8],
    from: u64,
    to: u64,
    path: &Path,
    salt: u32,
    level: i32,
) -> Result<Option<ArchivedUnits>> {
    let mut out = Vec::new();
    let mut units = Units::new(salt, level);
    let mut end = from;
    let mut next_seq = None;
    walk_closed(bytes, from, to, path, |met| {
        let Met::Turn {
            events,
            plain,
            end: turn_end,
        } = met
        else {
            // A version-3 live file holds no units; one found here is left
            // where it is, and so is everything after it.
            return Ok(false);
        };
        if plain.len() > format::MAX_UNIT_LEN as usize {
            // Too big for any unit: it and every later turn stay live.
            return Ok(false);
        }
        units.add(&mut out, &events, &plain)?;
        next_seq = events.last().map(|e| e.event.seq() + 1);
        end = turn_end;
        Ok(true)
    })?;
    let (last_turn, last_time) = units.last;
    units.emit(&mut out)?;
    let Some(next_seq) = next_seq else {
        return Ok(None);
    };
    Ok(Some(ArchivedUnits {
        bytes: out,
        units: units.written,
        next_seq,
        end,
        last_turn,
        last_time,
    }))
}
