//! The mark a failed fdatasync of a transcript leaves, and the durable copy
//! that answers it (docs/JSONL.md, "After a failed fdatasync").
//!
//! Linux drops the dirty pages of a failed writeback and marks them clean:
//! reads still see the bytes, but no later fdatasync of the file writes
//! them, and it returns success. The writer that saw the failure cuts the
//! file back and writes what it holds again; a writer that could not (the
//! cut failed, so it is poisoned) or that is gone leaves the next writer a
//! file whose page cache reads as intact while the disk has a hole. If that
//! writer trusted its opening fdatasync, it would prove and acknowledge
//! events after the hole, and a power loss would turn acknowledged data
//! into corruption. So a failed fdatasync leaves a mark, and an open that
//! finds one publishes a durable copy of what reads see (a temp file
//! written and fsynced, renamed over the transcript) instead of trusting
//! an fdatasync: the copy never writes into the old file, so a crash at any
//! point leaves the old durable bytes or the whole copy.
//!
//! The mark is kept twice: in this process (the backend's clones share
//! it), and as an empty file beside the transcript's durability proof in
//! the state directory (`<proof>.unsynced`), so another process opening
//! the session before the machine restarts finds it too. Without a state
//! directory only this process knows. Neither is fsynced: a mark matters
//! exactly as long as the page cache holding the dropped pages lives, and a
//! power loss that takes the mark takes those pages too. A mark that
//! outlives its need costs one extra copy.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::JsonlBackend;
use crate::error::{Error, Result};
use crate::storage::{OpenMode, StorageFile};

/// The transcripts of this process whose fdatasync failed, shared by a
/// backend's clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct Marks(Arc<Mutex<BTreeSet<PathBuf>>>);

impl Marks {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeSet<PathBuf>) -> T) -> T {
        // A panic while the set was held leaves it whole: take it anyway.
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl JsonlBackend {
    /// The mark's file beside the proof of the transcript at `log`.
    fn mark_file(&self, log: &Path) -> Option<PathBuf> {
        self.proof_path(log).map(|proof| {
            let mut name = proof.into_os_string();
            name.push(".unsynced");
            PathBuf::from(name)
        })
    }

    /// Leaves the mark of the transcript at `log` after a failed
    /// fdatasync. Best effort on disk: the in-process mark always holds.
    pub(crate) fn leave_unsynced_mark(&self, log: &Path) {
        self.unsynced.with(|set| set.insert(log.to_owned()));
        if let Some(mark) = self.mark_file(log) {
            // Already there is as good; a proof directory not yet made, or
            // unwritable, leaves this process the only one that knows.
            let _ = self.storage.open(&mark, OpenMode::CreateNew);
        }
    }

    /// Whether the transcript at `log` carries a mark.
    pub(crate) fn unsynced_marked(&self, log: &Path) -> Result<bool> {
        if self.unsynced.with(|set| set.contains(log)) {
            return Ok(true);
        }
        match self.mark_file(log) {
            Some(mark) => self
                .storage
                .exists(&mark)
                .map_err(|e| Error::io("stat", &mark, e)),
            None => Ok(false),
        }
    }

    /// Removes the mark once what it warned of is durable: after a durable
    /// copy, or an fdatasync that followed writing every byte past the last
    /// good one again.
    pub(crate) fn clear_unsynced_mark(&self, log: &Path) {
        self.unsynced.with(|set| set.remove(log));
        if let Some(mark) = self.mark_file(log) {
            let _ = self.storage.remove_file(&mark);
        }
    }

    /// Replaces the transcript at `log` with a durable copy of what reads
    /// see, and returns the copy's handle, held as the writer's: the temp
    /// file is held before it takes the transcript's name, so the session is
    /// never unheld.
    pub(crate) fn republish(&self, log: &Path) -> Result<Box<dyn StorageFile>> {
        let bytes = self
            .storage
            .read_all(log)
            .map_err(|e| Error::io("read", log, e))?
            .ok_or_else(|| Error::io("read", log, io::ErrorKind::NotFound.into()))?;
        self.remove_temps(log);
        let (tmp, file) = self.write_temp(log, &bytes)?.ok_or_else(|| {
            Error::io(
                "create",
                log,
                io::Error::other("the durable copy's temp file was taken by another writer"),
            )
        })?;
        self.rename(&tmp, log)?;
        self.sync_dir(log.parent().expect("a transcript has a directory"))?;
        Ok(file)
    }
}
