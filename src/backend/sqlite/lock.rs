//! One writer per session: an in-process registry of the sessions this
//! backend's writers hold, plus (for a database file) an `flock` on a lock
//! file per session next to the database, which other processes and other
//! backends over the same file see. Readers take no lock.
//!
//! The lock is advisory: a writer that ignores it (the upstream harness, or
//! a process on another host) is still stopped by the stored-next-seq check
//! every append runs inside its `BEGIN IMMEDIATE` transaction.

use std::path::PathBuf;
use std::sync::Arc;

use super::Shared;
use crate::error::{Error, Result};
use crate::storage::{FsStorage, LockGuard, Storage};

/// The writer lock of one session; dropping it releases the session.
#[derive(Debug)]
pub(super) struct WriterLock {
    shared: Arc<Shared>,
    id: String,
    path: PathBuf,
    file: Option<Box<dyn LockGuard>>,
}

impl WriterLock {
    /// Takes the lock of session `id`, or fails at once with
    /// [`Error::Locked`] naming the holder's pid.
    pub(super) fn acquire(shared: &Arc<Shared>, id: &str) -> Result<WriterLock> {
        let path = shared.lock_path(id);
        let locked = |holder| Error::Locked {
            id: id.to_owned(),
            path: path.clone(),
            holder,
        };
        {
            let mut held = shared.held.lock().unwrap_or_else(|e| e.into_inner());
            if !held.insert(id.to_owned()) {
                return Err(locked(Some(std::process::id())));
            }
        }
        // From here on, dropping `lock` takes the id back out of `held`.
        let mut lock = WriterLock {
            shared: shared.clone(),
            id: id.to_owned(),
            path: path.clone(),
            file: None,
        };
        if shared.memory {
            return Ok(lock);
        }
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::io("create directory", dir, e))?;
        }
        match FsStorage.try_lock(&path) {
            Ok(Ok(guard)) => {
                lock.file = Some(guard);
                Ok(lock)
            }
            Ok(Err(holder)) => Err(locked(holder)),
            Err(e) => Err(Error::io("lock", &path, e)),
        }
    }

    /// Removes the lock file (after the session was deleted), still holding
    /// the lock; best effort.
    pub(super) fn remove_file(&self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Release the flock first, then let this process's writers in.
        self.file = None;
        self.shared
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}
