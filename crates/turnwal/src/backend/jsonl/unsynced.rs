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
//! it), and as a file beside the transcript's durability proof in the state
//! directory (`<proof>.unsynced`, holding the boot it was left in), so
//! another process opening the session before the machine restarts finds
//! it too. Without a state directory only this process knows. Neither is
//! fsynced: a mark matters exactly as long as the page cache holding the
//! dropped pages lives. A mark from an earlier boot (or one a power loss
//! emptied) is stale and ignored: after a power loss what is left past the
//! last good fdatasync is a tear for recovery to judge, and a copy would
//! make it look written in this boot (so corrupt). A mark that outlives its
//! need within a boot costs one extra copy.

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
    /// The file holds the boot it was left in (8 bytes, little-endian; empty
    /// when the boot is unknown).
    pub(crate) fn leave_unsynced_mark(&self, log: &Path) {
        self.unsynced.with(|set| set.insert(log.to_owned()));
        let Some(mark) = self.mark_file(log) else {
            return;
        };
        let boot = self.storage.boot_id().map(u64::to_le_bytes);
        let file = match self.storage.open(&mark, OpenMode::CreateNew) {
            Ok(file) => Ok(file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.storage.open(&mark, OpenMode::ReadWrite)
            }
            Err(e) => Err(e),
        };
        // A proof directory not yet made, or unwritable, leaves this
        // process the only one that knows.
        if let (Ok(mut file), Some(boot)) = (file, boot) {
            let _ = file.write_all_at(&boot, 0);
        }
    }

    /// Whether the transcript at `log` carries a mark. A mark left in an
    /// earlier boot is stale and removed: the pages it warned of died with
    /// that boot's page cache, and what a power loss left of the bytes
    /// after the last good fdatasync is a tear for recovery to judge — a
    /// copy would make it look written in this boot, and so corrupt.
    pub(crate) fn unsynced_marked(&self, log: &Path) -> Result<bool> {
        if self.unsynced.with(|set| set.contains(log)) {
            return Ok(true);
        }
        let Some(mark) = self.mark_file(log) else {
            return Ok(false);
        };
        let left_in = match self.storage.read_all(&mark) {
            Ok(None) => return Ok(false),
            Ok(Some(bytes)) => <[u8; 8]>::try_from(bytes.as_slice())
                .ok()
                .map(u64::from_le_bytes),
            Err(e) => return Err(Error::io("read", &mark, e)),
        };
        // A mark left in this boot reads as this boot: its bytes are in
        // the page cache whether or not they reached the disk. One that
        // names another boot, or reads empty (a power loss kept its name and
        // lost what was written in it), is stale. Without a boot id every
        // mark counts.
        match (left_in, self.storage.boot_id()) {
            (_, None) => Ok(true),
            (Some(then), Some(now)) if then == now => Ok(true),
            _ => {
                let _ = self.storage.remove_file(&mark);
                Ok(false)
            }
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
        let (tmp, mut file) = self.write_temp(log, &bytes)?.ok_or_else(|| {
            Error::io(
                "create",
                log,
                io::Error::other("the durable copy's temp file was taken by another writer"),
            )
        })?;
        self.rename(&tmp, log)?;
        file.renamed(log);
        self.sync_dir(log.parent().expect("a transcript has a directory"))?;
        Ok(file)
    }
}
