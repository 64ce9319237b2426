//! Version 3's archive (docs/FORMAT.md, "Version 3"): a session's sealed
//! turns in `<name>.twarc` beside its live file, which stands on the
//! archive's first `len` bytes through its archive reference.
//!
//! Invariants:
//!
//! - Only `[0, reference.len)` of the archive is ever read: bytes past it
//!   are a seal that did not finish.
//! - That prefix is checked before any event of it is lent: its header
//!   (salt, session), then every record's framing and checksum, units
//!   only, contiguous from seq 0, their heads stating exactly `count`
//!   events, the last closing turn `turn` at `time`; each unit's inside is
//!   checked (decompressed, bounded) by the read that decodes it, as a
//!   version-2 read checks its units, so a whole read decompresses each
//!   unit once. Anything else is acknowledged data damaged (the live file
//!   that references it was published whole): `Corrupt`, naming the
//!   archive's path.

use std::io;
use std::path::{Path, PathBuf};

use super::cursor::WalCursor;
use super::format::{self, ArchiveRef, FileHeader};
use super::record::heads;
use super::scan::{Classified, corrupt, read_file_header, scan_log_for_read};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::storage::{Mapped, OpenMode, Storage};

/// The extension of archive files.
pub const ARCHIVE_EXTENSION: &str = ".twarc";

/// The archive beside the live file at `log` (`<name>.twal` →
/// `<name>.twarc`).
pub fn path_of(log: &Path) -> PathBuf {
    let name = super::log_name(log);
    log.with_file_name(format!("{name}{ARCHIVE_EXTENSION}"))
}

/// A version-3 session's archive, mapped and checked against the live
/// file's reference.
pub(super) struct Archive {
    map: Mapped,
    path: PathBuf,
    classified: Classified,
}

impl Archive {
    /// The archive the live file whose header is `meta` (at `log`) stands
    /// on; `None` for a live file with no archive reference.
    pub(super) fn open(
        storage: &dyn Storage,
        log: &Path,
        meta: &FileHeader,
    ) -> Result<Option<Archive>> {
        let Some(reference) = meta.archive else {
            return Ok(None);
        };
        let path = path_of(log);
        let file = match storage.open(&path, OpenMode::Read) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(mismatch(
                    &path,
                    0,
                    &reference,
                    "the archive file is missing",
                ));
            }
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let map = file.into_map().map_err(|e| Error::io("map", &path, e))?;
        let classified = check(&map, &path, meta, &reference)?;
        Ok(Some(Archive {
            map,
            path,
            classified,
        }))
    }

    /// The archive's events with seq >= `from_seq`.
    pub(super) fn events_from(&self, from_seq: u64) -> Result<Vec<Event>> {
        super::scan::decode_kept(&self.map, &self.classified, from_seq, &self.path)
    }

    /// The bytes of the archive this live file stands on.
    pub(super) fn len(&self) -> u64 {
        self.classified.frames.len
    }

    /// The archive's sealed units, as `(offset, head)` of the mapped file.
    pub(super) fn units(&self) -> impl Iterator<Item = (u64, format::RecordHead)> + '_ {
        heads(
            &self.map,
            self.classified.frames.file.records_start,
            self.classified.kept_end,
        )
    }

    /// The mapped archive file.
    pub(super) fn map(&self) -> &Mapped {
        &self.map
    }

    /// The archive's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// A cursor over the archive's events.
    pub(super) fn cursor(self) -> WalCursor {
        let start = self.classified.frames.file.records_start;
        let end = self.classified.kept_end;
        let len = self.classified.frames.len;
        WalCursor::new(self.map, self.path, len, start, end)
    }
}

/// Checks the archive the live file at `path` (whose header is `meta`)
/// stands on, if any, with every unit inside decompressed and walked, as a
/// full scan of a version-2 log checks the units in it: what a full scan
/// of a version-3 log checks beyond the live file, for the scans that
/// decode no event and must still refuse what a read would (a dry-run
/// recovery, the full open of `load` and `recover`).
pub(super) fn check_whole(storage: &dyn Storage, path: &Path, meta: &FileHeader) -> Result<()> {
    let Some(archive) = Archive::open(storage, path, meta)? else {
        return Ok(());
    };
    let len = archive.len();
    super::scan::scan_log_proven(&archive.map[..len as usize], &archive.path, len).map(|_| ())
}

/// Checks the archive's first `reference.len` bytes against the live
/// file's reference (module docs).
fn check(map: &[u8], path: &Path, meta: &FileHeader, reference: &ArchiveRef) -> Result<Classified> {
    let len = reference.len;
    if (map.len() as u64) < len {
        return Err(mismatch(
            path,
            map.len() as u64,
            reference,
            &format!("the archive holds {} bytes, its reference {len}", map.len()),
        ));
    }
    let bytes = &map[..len as usize];
    // The live file wrote this archive in version 3: a header stating any
    // other version is damage to it, never a file for another build.
    let header = match read_file_header(bytes, path) {
        Err(Error::Unsupported { .. }) => None,
        other => Some(other?),
    };
    let Some(header) = header else {
        return Err(mismatch(
            path,
            0,
            reference,
            "its file header states a format version other than 3",
        ));
    };
    if header.version != format::FORMAT_V3
        || header.salt != reference.salt
        || header.header != meta.header
        || header.archive.is_some()
    {
        return Err(mismatch(
            path,
            0,
            reference,
            "its file header is not the one the live file's reference names (another salt, \
             session or version)",
        ));
    }
    // Every byte of the prefix is acknowledged: the live file that
    // references it was published whole. Units are left to the read that
    // decodes them (each checked once, as it is decompressed).
    let classified = scan_log_for_read(bytes, path, len)?;
    let frames = &classified.frames;
    if let Some(unit) = super::record::heads(bytes, header.records_start, frames.valid_end)
        .find(|(_, head)| !head.is_sealed())
    {
        return Err(mismatch(
            path,
            unit.0,
            reference,
            "it holds a record that is not a sealed unit",
        ));
    }
    if classified.scan.cut.is_some()
        || frames.commit_end != len
        || frames.committed != reference.count
        || frames.committed_turn != u64::from(reference.turn)
        || frames.committed_time != Some(reference.time)
    {
        return Err(mismatch(
            path,
            frames.valid_end.min(len),
            reference,
            &format!(
                "its units hold {} events through turn {}, the reference states {} through \
                 turn {}",
                frames.committed, frames.committed_turn, reference.count, reference.turn
            ),
        ));
    }
    Ok(classified)
}

/// An archive that is not the one its live file stands on.
fn mismatch(path: &Path, offset: u64, reference: &ArchiveRef, what: &str) -> Error {
    corrupt(
        path,
        offset,
        None,
        format!(
            "archive-mismatch: {what}; the live file stands on {} bytes of it holding {} events \
             (docs/FORMAT.md, \"The archive reference\")",
            reference.len, reference.count
        ),
    )
}

/// Events of an archive, then of a live file, as one cursor.
pub(super) struct Chain {
    first: Option<WalCursor>,
    second: WalCursor,
}

impl Chain {
    /// The archive's events, then the live file's.
    pub(super) fn new(first: WalCursor, second: WalCursor) -> Chain {
        Chain {
            first: Some(first),
            second,
        }
    }
}

impl crate::view::Cursor for Chain {
    fn advance(&mut self) -> Result<bool> {
        if let Some(first) = &mut self.first {
            if first.advance()? {
                return Ok(true);
            }
            self.first = None;
        }
        self.second.advance()
    }

    fn current(&self) -> Option<crate::view::EventRef<'_>> {
        match &self.first {
            Some(first) => first.current(),
            None => self.second.current(),
        }
    }
}
