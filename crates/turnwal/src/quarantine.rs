//! Quarantine: what a repair cuts is kept, never destroyed.
//!
//! Before a backend makes a cut durable (a WAL `ftruncate`, a JSONL
//! truncation, a SQLite `DELETE`), it writes the bytes or rows it is about to
//! remove to a file of their own in the store's quarantine directory and
//! fsyncs that file and the directory. Only then does it cut. A crash in
//! between leaves both the quarantine file and the uncut log, and the next
//! repair quarantines the same bytes again under a new time: a copy too many,
//! never one too few.
//!
//! A quarantine file is named `<session>.at-<offset>.seq-<seq>.<unix-ms>.<ext>`,
//! where `<session>` is the session's file-name encoding, `<offset>` where the
//! cut starts (a byte offset, or a row index for SQLite), `<seq>` the seq the
//! first cut record has or should have, and `<ext>` says what the file holds
//! (`twal-cut`: raw WAL bytes; `jsonl-cut`: raw JSONL or zstd bytes;
//! `rows.jsonl`: SQLite rows, one JSON object a line).

use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{FsStorage, OpenMode, Storage};

/// The name of the quarantine directory of a WAL store (beside `sessions/`).
pub const WAL_DIR: &str = "quarantine";

/// Where a quarantine file is written: the directory, the session's
/// file-name encoding, and what the cut started at.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    /// The quarantine directory (created if missing).
    pub dir: &'a Path,
    /// The session's file-name encoding.
    pub name: &'a str,
    /// Where the cut starts: a byte offset (a row index for SQLite).
    pub offset: u64,
    /// The seq the first cut record has or should have.
    pub seq: u64,
    /// The file's extension, saying what it holds.
    pub ext: &'a str,
}

impl Placement<'_> {
    /// The file name, stamped with `time_ms`.
    pub fn file_name(&self, time_ms: u64) -> String {
        format!(
            "{}.at-{}.seq-{}.{time_ms}.{}",
            self.name, self.offset, self.seq, self.ext
        )
    }
}

/// Writes `bytes` durably to a new quarantine file and returns its path:
/// a temp file written and fsynced, renamed to its name, the directory
/// fsynced (a new directory is made durable in its parent). An existing name
/// (two cuts in the same millisecond) gets the next free millisecond.
pub fn keep(storage: &dyn Storage, at: &Placement<'_>, bytes: &[u8]) -> io::Result<PathBuf> {
    storage.create_dir_all(at.dir)?;
    let mut time = crate::event::now_ms();
    let path = loop {
        let path = at.dir.join(at.file_name(time));
        if !storage.exists(&path)? {
            break path;
        }
        time += 1;
    };
    let tmp = at
        .dir
        .join(format!(".{}.{:016x}.tmp", at.name, storage.random()));
    let written = (|| {
        let mut file = storage.open(&tmp, OpenMode::CreateNew)?;
        file.write_all_at(bytes, 0)?;
        file.sync_all()?;
        drop(file);
        storage.rename(&tmp, &path)?;
        storage.sync_dir(at.dir)
    })();
    if let Err(e) = written {
        let _ = storage.remove_file(&tmp);
        return Err(e);
    }
    Ok(path)
}

/// The quarantine files in `dir` (none when it does not exist), sorted by
/// name. Temp files of an interrupted quarantine are not listed.
pub fn list(storage: &dyn Storage, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut names: Vec<String> = storage
        .list_dir(dir)?
        .into_iter()
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// [`keep`] on the real file system: the stores that use no [`Storage`]
/// (SQLite, JSONL).
pub fn keep_file(at: &Placement<'_>, bytes: &[u8]) -> io::Result<PathBuf> {
    keep(&FsStorage, at, bytes)
}

/// [`list`] on the real file system.
pub fn list_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    list(&FsStorage, dir)
}
