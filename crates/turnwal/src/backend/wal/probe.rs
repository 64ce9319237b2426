//! The tail probe: what a session file's end says, read backwards from the
//! last record, without scanning the whole log.
//!
//! Every record carries the file length that was fsynced when it was written
//! (its watermark). Bytes below the last record's watermark were durable
//! before that record existed, so only `[watermark, end)` can hold a hole a
//! crash left. A backward walk that validates every record of that region
//! (checksum, trailer, descending seqs) and lands exactly on the watermark
//! proves the file is a clean sequence of records to its end — in time
//! proportional to the last unsynced batch, not to the log. Anything else
//! (a torn end, a hole, a mismatch) sends the caller to the full scan, which
//! stays the authority: the probe never decides that something is corrupt
//! or torn, it only recognizes a clean end.
//!
//! Records with watermark 0 were written by materialization, which fsyncs the
//! whole file before it is published, so a file whose last record has
//! watermark 0 is one complete first batch.

use super::format::{MIN_RECORD_LEN, RecordHead, TRAILER_LEN};
use super::record::check_at;

/// Where a file's records are: where the first starts, the seq it has (0,
/// or a version-3 file's archive count) and the file's salt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Records {
    /// Where the first record starts.
    pub start: u64,
    /// The seq it has.
    pub first_seq: u64,
    /// The file's salt.
    pub salt: u32,
}

impl Records {
    /// The records of the file whose header is `meta`.
    pub fn of(meta: &super::format::FileHeader) -> Records {
        Records {
            start: meta.records_start,
            first_seq: meta.archive.map_or(0, |a| a.count),
            salt: meta.salt,
        }
    }
}

/// A record found by the backward walk.
#[derive(Debug, Clone, Copy)]
pub struct Found {
    /// Where it starts.
    pub offset: u64,
    /// Its header.
    pub head: RecordHead,
}

/// A backward walk's result: the records found, last first, and whether
/// `stop` ended it (otherwise it validated every record to the first).
pub struct Walk {
    /// The records, last first.
    pub found: Vec<Found>,
    /// Whether `stop` ended the walk.
    pub stopped: bool,
}

/// Walks back from the end of `bytes` while records are valid and
/// seq-contiguous, collecting them (last first) until `stop(found)` says
/// enough. Returns `None` if the end of the file is not a valid record or a
/// record before the stop fails.
pub fn walk_back(
    bytes: &[u8],
    records: Records,
    mut stop: impl FnMut(&Found) -> bool,
) -> Option<Walk> {
    let Records {
        start: records_start,
        first_seq,
        salt,
    } = records;
    let mut end = bytes.len() as u64;
    let mut found: Vec<Found> = Vec::new();
    loop {
        if end == records_start {
            // The first record of a file has seq 0 (version 3: the count
            // its archive reference states).
            if found.last().is_some_and(|f| f.head.seq != first_seq) {
                return None;
            }
            return Some(Walk {
                found,
                stopped: false,
            });
        }
        if end < records_start + MIN_RECORD_LEN as u64 {
            return None;
        }
        let trailer = &bytes[(end - TRAILER_LEN as u64) as usize..end as usize];
        let len = u64::from(u32::from_le_bytes(trailer.try_into().expect("4 bytes")));
        if len < MIN_RECORD_LEN as u64 || len > end - records_start {
            return None;
        }
        let offset = end - len;
        let head = check_at(&bytes[..end as usize], offset, None, salt).ok()?;
        // Seq-contiguous with the record after it (a chunk run ends just
        // before the next record's seq).
        if head.record_len() != len || found.last().is_some_and(|f| head.next_seq() != f.head.seq) {
            return None;
        }
        let f = Found { offset, head };
        found.push(f);
        if stop(&f) {
            return Some(Walk {
                found,
                stopped: true,
            });
        }
        end = offset;
    }
}

/// Tracks whether a backward walk has covered everything after the last
/// record's watermark, or after the proven length if that is further on.
#[derive(Default)]
struct Coverage {
    /// Bytes the durability proof vouches for (0 when not known): a region
    /// made durable by a later fdatasync whose records still carry an older
    /// watermark (appends with `--sync never` before the final flush) needs
    /// no walk.
    proven: u64,
    watermark: Option<u64>,
    /// Whether the walk has decided (walked past the watermark).
    decided: bool,
    /// Whether the region after the watermark is proven clean.
    covered: bool,
}

impl Coverage {
    /// Notes a found record; true once the walk has decided. The region is
    /// clean when a record ends exactly on the watermark: it and the
    /// record after it were checked as a seq-contiguous pair, so the chain
    /// holds across the boundary (a stale record copied to the end fails
    /// there). A watermark of 0 (materialization's first batch) is checked
    /// all the way to the first record.
    fn note(&mut self, f: &Found) -> bool {
        let w = *self
            .watermark
            .get_or_insert(f.head.watermark.max(self.proven));
        if w != 0 && f.offset < w && !self.decided {
            self.decided = true;
            self.covered = f.offset + f.head.record_len() == w;
        }
        self.decided
    }

    /// Whether a walk that ended (by `stop` or at the first record) proved
    /// the end clean.
    fn clean(&self, walk: &Walk) -> bool {
        self.covered || !walk.stopped
    }
}

/// The end of a clean file: its last record and the one before it (if any),
/// when every byte from the last record's watermark to the end is valid,
/// seq-contiguous records. `None` for a file with no records or an end that
/// is not proven clean.
pub fn clean_end(bytes: &[u8], records: Records) -> Option<(RecordHead, Option<RecordHead>)> {
    let mut coverage = Coverage::default();
    let walk = walk_back(bytes, records, |f| {
        // Two records at least, so the caller sees what the last one closes.
        coverage.note(f) && coverage.watermark.is_some()
    })?;
    if !coverage.clean(&walk) {
        return None;
    }
    let last = walk.found.first()?.head;
    let previous = match walk.found.get(1) {
        Some(f) => Some(f.head),
        // The region was the last record alone: read the one before it.
        None => walk_back_one(bytes, records, walk.found.first()?),
    };
    Some((last, previous))
}

/// The record just before `f`, checked as its predecessor.
fn walk_back_one(bytes: &[u8], records: Records, f: &Found) -> Option<RecordHead> {
    if f.offset == records.start {
        return None;
    }
    let before = &bytes[..f.offset as usize];
    let walk = walk_back(before, records, |_| true)?;
    let prev = walk.found.first()?.head;
    (prev.next_seq() == f.head.seq).then_some(prev)
}

/// The records holding seqs >= `from_seq` at the clean end of the file, in
/// order; `None` when the end is not proven clean (the caller scans).
/// `proven` is the length the durability proof vouches for (at most the
/// file's length; 0 if none): the walk need not go below it, so a suffix
/// read of a wholly proven log costs the suffix, whatever the watermarks.
pub fn clean_suffix(
    bytes: &[u8],
    records: Records,
    from_seq: u64,
    proven: u64,
) -> Option<Vec<Found>> {
    debug_assert!(proven <= bytes.len() as u64, "proof past the end");
    let mut coverage = Coverage {
        proven,
        ..Coverage::default()
    };
    let walk = walk_back(bytes, records, |f| {
        let decided = coverage.note(f);
        // Stop at an unclean boundary, or once clean and back at `from_seq`.
        decided && (!coverage.covered || f.head.seq < from_seq.max(1))
    })?;
    if !coverage.clean(&walk) {
        return None;
    }
    let mut found = walk.found;
    // A chunk run holding `from_seq` is kept whole; the reader drops its
    // members before it.
    found.retain(|f| f.head.next_seq() > from_seq);
    found.reverse();
    Some(found)
}

/// The records after the commit point (the last `turn/end` that closes the
/// turn its predecessor left open, as the scan defines it), in order, with
/// that `turn/end`'s header (`None` when the file has no commit point). A
/// seq-contiguous chain; `None` if the walk meets an invalid record first.
pub fn since_commit(bytes: &[u8], records: Records) -> Option<(Option<RecordHead>, Vec<Found>)> {
    use crate::event::EventKind;
    let walk = walk_back(bytes, records, |f| {
        // Only a turn/end that leaves no turn open needs its predecessor.
        f.head.is_sealed()
            || f.head.event_kind() == EventKind::TurnEnd
                && !f.head.in_turn()
                && f.head
                    .commits_after(walk_back_one(bytes, records, f).as_ref())
    })?;
    let mut found = walk.found;
    let commit = if walk.stopped {
        found.pop().map(|f| f.head)
    } else {
        None
    };
    found.reverse();
    Some((commit, found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::wal::format::{self, encode_file_header, encode_record};
    use crate::contract::{Placement, Policy};
    use crate::{Event, SessionHeader};

    /// The records of a file from [`file`], which start at `start`.
    fn recs(start: u64) -> Records {
        Records {
            start,
            first_seq: 0,
            salt: 9,
        }
    }

    /// A file of `n` records in batches of `batch`, each batch's records
    /// carrying the length before it as watermark (the first batch 0).
    fn file(n: u64, batch: u64) -> (Vec<u8>, u64) {
        let mut bytes = Vec::new();
        encode_file_header(&mut bytes, &SessionHeader::new("s", 1), Policy::Lenient, 9);
        let start = bytes.len() as u64;
        let mut watermark = 0;
        for seq in 0..n {
            if seq > 0 && seq % batch == 0 {
                watermark = bytes.len() as u64;
            }
            let e = Event::new("x/y", seq, 1, &format!("{{\"i\":{seq}}}")).unwrap();
            encode_record(&mut bytes, &e, Placement::default(), watermark, 9);
        }
        (bytes, start)
    }

    #[test]
    fn a_clean_end_is_recognized_from_the_last_batch() {
        let (bytes, start) = file(100, 10);
        let (last, previous) = clean_end(&bytes, recs(start)).unwrap();
        assert_eq!((last.seq, previous.map(|p| p.seq)), (99, Some(98)));
        let suffix = clean_suffix(&bytes, recs(start), 95, 0).unwrap();
        assert_eq!(
            suffix.iter().map(|f| f.head.seq).collect::<Vec<_>>(),
            [95, 96, 97, 98, 99]
        );
        assert_eq!(clean_suffix(&bytes, recs(start), 0, 0).unwrap().len(), 100);
        assert!(
            clean_suffix(&bytes, recs(start), 100, 0)
                .unwrap()
                .is_empty()
        );
        let (first_only, start) = file(5, 10);
        assert_eq!(clean_end(&first_only, recs(start)).unwrap().0.seq, 4);
    }

    #[test]
    fn a_proven_log_is_read_from_its_end_whatever_its_watermarks() {
        // One batch of 100 records, all with watermark 0 (written before any
        // fsync), then made durable and proven whole.
        let (bytes, start) = file(100, 1000);
        let len = bytes.len() as u64;
        let mut walked = 0;
        let walk = walk_back(&bytes, recs(start), |_| {
            walked += 1;
            false
        })
        .unwrap();
        assert_eq!((walked, walk.found.len()), (100, 100));
        // Unproven, the suffix walk must check every record back to the
        // first; proven, it stops below seq 95.
        assert_eq!(clean_suffix(&bytes, recs(start), 95, 0).unwrap().len(), 5);
        let suffix = clean_suffix(&bytes, recs(start), 95, len).unwrap();
        assert_eq!(
            suffix.iter().map(|f| f.head.seq).collect::<Vec<_>>(),
            [95, 96, 97, 98, 99]
        );
        let mut coverage = Coverage {
            proven: len,
            ..Coverage::default()
        };
        let mut visited = 0;
        walk_back(&bytes, recs(start), |f| {
            visited += 1;
            coverage.note(f) && f.head.seq < 95
        })
        .unwrap();
        assert_eq!(visited, 6, "the walk stops at seq 94");
        // A proof that ends inside a record is no boundary: not clean.
        assert!(clean_suffix(&bytes, recs(start), 95, len - 1).is_none());
        // Damage inside the proven suffix is still found.
        let mut damaged = bytes.clone();
        damaged[bytes.len() - 10] ^= 1;
        assert!(clean_suffix(&damaged, recs(start), 95, len).is_none());
    }

    #[test]
    fn damage_after_the_watermark_is_never_called_clean() {
        let (bytes, start) = file(100, 10);
        let last_batch = {
            let mut at = start;
            let mut starts = Vec::new();
            while at < bytes.len() as u64 {
                starts.push(at);
                at += format::parse_head(&bytes[at as usize..])
                    .unwrap()
                    .record_len();
            }
            starts[90]
        };
        for at in last_batch as usize..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(clean_end(&damaged, recs(start)).is_none(), "byte {at}");
            assert!(
                clean_suffix(&damaged, recs(start), 99, 0).is_none(),
                "byte {at}"
            );
        }
        // A copy of an earlier record at the end: its seq breaks the chain.
        let mut stale = bytes.clone();
        let first = format::parse_head(&bytes[start as usize..])
            .unwrap()
            .record_len() as usize;
        stale.extend_from_slice(&bytes[start as usize..start as usize + first]);
        assert!(clean_end(&stale, recs(start)).is_none());
        assert!(clean_suffix(&stale, recs(start), 0, 0).is_none());
        let torn = &bytes[..bytes.len() - 3];
        assert!(clean_end(torn, recs(start)).is_none());
        let mut zeros = bytes.clone();
        zeros.extend([0; 100]);
        assert!(clean_end(&zeros, recs(start)).is_none());
    }
}
