//! The WAL's [`Cursor`]: a mapped session file's kept records read from the
//! first on, one event at a time.
//!
//! Invariants:
//!
//! - It reads only `[records_start, kept_end)` of a map the scan validated
//!   (framing and checksum of every record; the scan's `Units::OnRead`
//!   leaves sealed units to it).
//! - A single-event record is lent in place, borrowing the map, after
//!   [`check_in_place`] (what reading it in place relies on).
//! - A chunk run is expanded when it is reached, into one buffer of at most
//!   1,024 events; a sealed unit is decompressed when it is reached
//!   (bounded by its plain length) and walked with every check the scan
//!   makes ([`record::open_unit`]), its records then read in place from the
//!   decompressed bytes. So the cursor holds at most one unit and one run.
//! - Anything that does not decode is corruption at its record's offset,
//!   with its seq: the read ends there, every event lent before it intact.

use std::path::PathBuf;

use super::format::{self, RecordHead};
use super::record::{self, unit_frame};
use super::scan::corrupt;
use super::view::{check_in_place, record_ref};
use crate::error::Result;
use crate::event::Event;
use crate::storage::Mapped;
use crate::view::{Cursor, EventRef};

/// Where the next event comes from.
enum Ready {
    /// The single-event record at this offset of the map.
    Map(u64),
    /// The single-event record at this offset of the open unit's records.
    Unit(u64),
    /// This member of the expanded run.
    Run(usize),
    /// No event is left.
    End,
}

/// A sealed unit being read.
struct OpenUnit {
    /// Its plain records, laid end to end.
    plain: Vec<u8>,
    /// Where the next of them starts.
    next: u64,
    /// The unit's offset in the file (errors inside it name it).
    offset: u64,
}

/// A cursor over a WAL session file's kept records.
pub(super) struct WalCursor {
    map: Mapped,
    path: PathBuf,
    /// What the log's durability proof stated when it was read.
    proven: u64,
    /// The next record of the map, and the end of the kept records.
    at: u64,
    end: u64,
    /// The open sealed unit, if one is.
    unit: Option<OpenUnit>,
    /// The expanded chunk run, and its next member.
    run: Vec<Event>,
    run_next: usize,
    /// The event advanced to.
    ready: Ready,
}

impl WalCursor {
    /// A cursor over the records of `map` in `[start, end)`, which a scan
    /// of the file at `path` validated and kept.
    pub(super) fn new(map: Mapped, path: PathBuf, proven: u64, start: u64, end: u64) -> WalCursor {
        WalCursor {
            map,
            path,
            proven,
            at: start,
            end,
            unit: None,
            run: Vec::new(),
            run_next: 0,
            ready: Ready::End,
        }
    }

    /// Moves to the next event and says where it is: every mutation of a
    /// step happens here, so [`Cursor::current`] only borrows.
    fn step(&mut self) -> Result<Ready> {
        loop {
            if self.run_next < self.run.len() {
                self.run_next += 1;
                return Ok(Ready::Run(self.run_next - 1));
            }
            if let Some(unit) = &mut self.unit {
                if (unit.next as usize) < unit.plain.len() {
                    let here = unit.next;
                    let head = head_of(&unit.plain, here);
                    unit.next += head.record_len();
                    let fail = |reason: format::Malformed| {
                        corrupt(
                            &self.path,
                            unit.offset,
                            Some(head.seq),
                            format!("sealed unit record at plain byte {here}: {reason}"),
                        )
                    };
                    if head.is_run() {
                        let record =
                            &unit.plain[here as usize..(here + head.record_len()) as usize];
                        // The unit's walk checked its frames; the members
                        // decode, or the unit is corrupt.
                        self.run = record::decode_records(record, &head).map_err(fail)?;
                        self.run_next = 0;
                        continue;
                    }
                    check_in_place(&unit.plain, here).map_err(fail)?;
                    return Ok(Ready::Unit(here));
                }
                self.unit = None;
            }
            if self.at >= self.end {
                return Ok(Ready::End);
            }
            let here = self.at;
            let head = head_of(&self.map, here);
            if head.is_sealed() {
                let plain = match record::open_unit(unit_frame(&self.map, here, &head), &head) {
                    Ok(plain) => plain,
                    Err(reason) => return Err(self.refusal(here, head.seq, reason)),
                };
                self.unit = Some(OpenUnit {
                    plain,
                    next: 0,
                    offset: here,
                });
                self.at += head.record_len();
                continue;
            }
            self.at += head.record_len();
            if head.is_run() {
                let record = &self.map[here as usize..(here + head.record_len()) as usize];
                self.run = record::decode_records(record, &head)
                    .map_err(|reason| corrupt(&self.path, here, Some(head.seq), reason))?;
                self.run_next = 0;
                continue;
            }
            check_in_place(&self.map, here)
                .map_err(|reason| corrupt(&self.path, here, Some(head.seq), reason))?;
            return Ok(Ready::Map(here));
        }
    }
}

impl WalCursor {
    /// The refusal of a log whose unit at `at` does not check: the one the
    /// scan that checks every unit gives (its offset, the proof and the
    /// rule), so a read that meets the unit says what `verify` and
    /// `recover` say of it.
    fn refusal(&self, at: u64, seq: u64, reason: impl std::fmt::Display) -> crate::error::Error {
        match super::scan::scan_log_proven(&self.map, &self.path, self.proven) {
            Err(e) => e,
            Ok(_) => corrupt(&self.path, at, Some(seq), reason),
        }
    }
}

fn head_of(bytes: &[u8], at: u64) -> RecordHead {
    let at = at as usize;
    format::parse_head(&bytes[at..at + format::RECORD_HEADER_LEN]).expect("validated by the scan")
}

impl Cursor for WalCursor {
    fn advance(&mut self) -> Result<bool> {
        self.ready = self.step()?;
        Ok(!matches!(self.ready, Ready::End))
    }

    fn current(&self) -> Option<EventRef<'_>> {
        match self.ready {
            Ready::Map(at) => Some(record_ref(&self.map, at)),
            Ready::Unit(at) => Some(record_ref(
                &self.unit.as_ref().expect("a unit is open").plain,
                at,
            )),
            Ready::Run(i) => Some(EventRef::from(&self.run[i])),
            Ready::End => None,
        }
    }
}
