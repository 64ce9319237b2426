//! One writer per session: an in-process registry of the sessions this
//! backend's writers hold, plus (for a database file opened for writing) an
//! open-file-description `fcntl` write lock (`F_OFD_SETLK`) on one byte of
//! the database file itself, at an offset derived from the session id. Other
//! processes and other backends over the same file see it; the kernel drops
//! it when the holder dies. Readers take no lock.
//!
//! Nothing is created beside the database for it: a SQLite store keeps
//! exactly the files upstream's SQLite store has (the database and SQLite's
//! own `-wal`, `-shm` and journal files), before, while and after a writer
//! holds a session (docs/SQLITE.md, "Locking").
//!
//! Where the byte sits: SQLite's own POSIX locks on the database file live in
//! the 512 bytes from `PENDING_BYTE` (0x40000000), and the WAL and
//! JSONL writers hold the byte at 2^62 of their logs
//! (`storage::hold_writer`). A session's byte is in `[2^62 + 1, 2^63 - 2]`,
//! at `2^62 + 1 + fnv1a64(id) mod (2^62 - 2)`: far from SQLite's bytes, never
//! the WAL's, and below `OFFSET_MAX` (2^63 - 1) so a one-byte range never
//! reaches it. POSIX locks and OFD locks on different bytes never conflict,
//! and SQLite's `F_UNLCK` of the whole file releases only its own (POSIX)
//! locks, never an OFD lock.
//!
//! Two different ids whose hashes meet (odds 1 in 2^62 - 2 for a given pair)
//! lock each other out as if they were one session: the second is refused
//! with [`Error::Locked`] while the first is held, and nothing else goes
//! wrong (the lock guards nothing the stored-next-seq check does not). That
//! is accepted rather than probed for (docs/SQLITE.md).
//!
//! The lock is advisory: a writer that ignores it (the upstream harness, a
//! process on another host, or a turnwal from before this lock, which
//! `flock`ed files in a `<database>.turnwal-locks/` directory) is still
//! stopped by the stored-next-seq check every append runs inside its
//! `BEGIN IMMEDIATE` transaction. Such a legacy directory is ignored: never
//! read, locked, created or removed (docs/SQLITE.md, "Locking").
//!
//! The descriptor the locks are taken on is turnwal's own, opened beside
//! SQLite's, because an OFD lock belongs to the open file description.
//! Closing it needs care: closing *any* descriptor of a file drops every
//! traditional POSIX lock this process holds on that file, and SQLite's
//! locks are such locks (a WAL-mode connection holds a SHARED lock on the
//! database for as long as it is open; a writing one its RESERVED, PENDING
//! and EXCLUSIVE locks). So the process has one such descriptor per
//! database file (by device and inode, [`OPEN_FILES`]), shared by all its
//! backends of the file ([`LockFile`]), and closed only when the last of
//! them ends, after its SQLite connection. Writers of different backends of
//! the process share its description, which an OFD lock cannot tell apart:
//! the per-file set of held bytes refuses them. A writer releases its byte
//! with an explicit `F_UNLCK`, not by closing, so a child process forked
//! meanwhile (which shares the open file description until it execs)
//! cannot keep it held.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::storage::{byte_held, identity, identity_of, lock_byte, open_existing_rw, unlock_byte};
use crate::sync::Table;

use super::Shared;
use crate::error::{Error, Result};

/// Where the session bytes begin: one past the byte the WAL and JSONL
/// writers hold (2^62).
const REGION_START: u64 = (1 << 62) + 1;
/// How many bytes the region has: `[2^62 + 1, 2^63 - 2]`.
const REGION_LEN: u64 = (1 << 62) - 2;

/// FNV-1a, 64 bits, over the id's UTF-8 bytes: written out here so the
/// offset is the same in every build, version and platform (std's hashers
/// promise no such thing), which processes of different builds sharing a
/// database need.
pub(super) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The byte of the database file a writer of session `id` locks.
pub(super) fn lock_offset(id: &str) -> u64 {
    REGION_START + fnv1a64(id.as_bytes()) % REGION_LEN
}

/// Who holds session `id`'s writer lock now, asked without taking it: a
/// writer of this process (its pid), another process (pid unknown: the
/// kernel records none for an OFD lock), or no one.
pub(super) fn holder(shared: &Shared, id: &str) -> Result<Option<Option<u32>>> {
    if shared.held.lock().contains(id) {
        return Ok(Some(Some(std::process::id())));
    }
    let Some(file) = &shared.lock_file else {
        return Ok(None);
    };
    let offset = lock_offset(id);
    let files = open_files();
    let Some(entry) = files.get(&file.key) else {
        return Ok(None);
    };
    if entry.held.contains(&offset) {
        return Ok(Some(Some(std::process::id())));
    }
    match byte_held(&entry.file, offset) {
        Ok(true) => Ok(Some(None)),
        Ok(false) => Ok(None),
        Err(e) => Err(Error::io("lock", shared.lock_path(id), e)),
    }
}

/// This process's descriptor of one database file, by (device, inode):
/// see [`OPEN_FILES`].
#[derive(Debug)]
struct OpenFile {
    /// The descriptor every backend of the file in this process takes its
    /// writers' locks on (one open file description: an OFD lock does not
    /// exclude another writer of the same description, so `held` does that
    /// within the process).
    file: File,
    /// Descriptors of the same file opened meanwhile, when the path led to
    /// it only after a first look found another file (the path was
    /// replaced): never used, only kept until `file` is closed.
    spare: Vec<File>,
    /// How many of this process's SQLite backends have the file open.
    backends: usize,
    /// The bytes this process's writers hold. A writer of the same byte in
    /// another backend of this process is refused here, naming this
    /// process as the holder (the kernel records no pid for an OFD lock:
    /// `F_OFD_GETLK` and `/proc/locks` give -1).
    held: BTreeSet<u64>,
}

/// The database files this process's SQLite backends hold open for their
/// writers' locks. An entry lives as long as one backend of its file does,
/// so closing it drops no SQLite lock of theirs (see the module's comment);
/// sharing it keeps a process at one such descriptor per file however many
/// backends come and go.
static OPEN_FILES: Table<BTreeMap<(u64, u64), OpenFile>> = Table::new(BTreeMap::new());

fn open_files() -> std::sync::MutexGuard<'static, BTreeMap<(u64, u64), OpenFile>> {
    OPEN_FILES.lock()
}

/// A backend's share of its process's descriptor of its database file
/// ([`OPEN_FILES`]), which its writers' OFD locks are taken on.
#[derive(Debug)]
pub(super) struct LockFile {
    key: (u64, u64),
}

impl LockFile {
    /// Joins the descriptor this process has of the database file at
    /// `path` (already checked and opened by SQLite), or opens one for
    /// reading and writing (`fcntl` write locks need a descriptor open for
    /// writing), following no symlink and waiting on nothing.
    pub(super) fn open(path: &Path) -> Result<LockFile> {
        let mut files = open_files();
        // Opening a second descriptor of a file this process has open is
        // harmless; closing one is not: look before opening.
        let key = identity(path).map_err(|e| Error::io("stat", path, e))?;
        if let Some(entry) = files.get_mut(&key) {
            entry.backends += 1;
            return Ok(LockFile { key });
        }
        let file = open_existing_rw(path).map_err(|e| Error::io("open for locking", path, e))?;
        let key = match identity_of(&file) {
            Ok(key) => key,
            Err(e) => {
                // Without its identity it has no place in `OPEN_FILES`, and
                // closing it could drop the locks of this process's
                // connections to the file: it is left open.
                std::mem::forget(file);
                return Err(Error::io("stat", path, e));
            }
        };
        match files.get_mut(&key) {
            Some(entry) => {
                entry.spare.push(file);
                entry.backends += 1;
            }
            None => {
                files.insert(
                    key,
                    OpenFile {
                        file,
                        spare: Vec::new(),
                        backends: 1,
                        held: BTreeSet::new(),
                    },
                );
            }
        }
        Ok(LockFile { key })
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let mut files = open_files();
        let Some(entry) = files.get_mut(&self.key) else {
            return;
        };
        entry.backends -= 1;
        if entry.backends == 0 {
            // No turnwal SQLite connection of this process has the file open
            // any more (each backend's connection is dropped before its
            // share): closing the descriptor drops no lock of ours.
            files.remove(&self.key);
        }
    }
}

/// The writer lock of one session; dropping it releases the session.
#[derive(Debug)]
pub(super) struct WriterLock {
    shared: Arc<Shared>,
    id: String,
    /// The byte locked, when a file lock is held.
    offset: Option<u64>,
}

impl WriterLock {
    /// Takes the lock of session `id`, or fails at once with
    /// [`Error::Locked`]: naming this process as the holder when a writer of
    /// this process has the session, and no one otherwise (the kernel
    /// records no pid for an OFD lock).
    pub(super) fn acquire(shared: &Arc<Shared>, id: &str) -> Result<WriterLock> {
        let path = shared.lock_path(id);
        let locked = |holder| Error::Locked {
            id: id.to_owned(),
            path: path.clone(),
            holder,
        };
        {
            let mut held = shared.held.lock();
            if !held.insert(id.to_owned()) {
                return Err(locked(Some(std::process::id())));
            }
        }
        // From here on, dropping `lock` takes the id back out of `held`.
        let mut lock = WriterLock {
            shared: shared.clone(),
            id: id.to_owned(),
            offset: None,
        };
        // An in-memory database is this backend's alone, and a read-only one
        // cannot be written (its writes fail before anything is changed):
        // neither needs a file lock.
        let Some(file) = &shared.lock_file else {
            return Ok(lock);
        };
        let offset = lock_offset(id);
        let mut files = open_files();
        let entry = files
            .get_mut(&file.key)
            .expect("a backend's open file is registered while it lives");
        if entry.held.contains(&offset) {
            // A writer of another backend of this process.
            return Err(locked(Some(std::process::id())));
        }
        match lock_byte(&entry.file, offset) {
            Ok(true) => {
                entry.held.insert(offset);
                lock.offset = Some(offset);
                Ok(lock)
            }
            // Another process.
            Ok(false) => Err(locked(None)),
            Err(e) => Err(Error::io("lock", &path, e)),
        }
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Release the file lock first, then let this process's writers in.
        // The descriptor stays open (see the module's comment): only the
        // byte is unlocked.
        if let (Some(offset), Some(file)) = (self.offset.take(), &self.shared.lock_file)
            && let Some(entry) = open_files().get_mut(&file.key)
        {
            let _ = unlock_byte(&entry.file, offset);
            entry.held.remove(&offset);
        }
        self.shared.held.lock().remove(&self.id);
    }
}
