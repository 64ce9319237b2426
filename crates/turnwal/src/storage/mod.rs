//! Storage: the file operations every file-based backend uses, behind a
//! trait. The real file system ([`FsStorage`]) is one implementation; the
//! simulated, fault-injecting disk ([`simdisk`], feature `testkit`) is
//! another, so every crash path runs deterministically in `cargo test`.
//!
//! Invariants kept here:
//! - nothing is opened through a symbolic link, and nothing that is not a
//!   regular file is opened in a way that could block (FIFOs, devices);
//! - every directory a file is written in is private (owned by this user,
//!   not writable by group or others), every file created is `0600` and
//!   every directory `0700` (on Unix; Windows has ACLs: docs/PLATFORMS.md);
//! - a reader's memory map is never shrunk under it (on Linux readers hold a
//!   shared `flock` and a writer shrinking a file waits for them at a
//!   turnstile; on macOS and Windows readers read into memory instead,
//!   `platform`);
//! - a writer's hold on a log ([`hold_writer`]) lives on the log itself, so
//!   deleting a lock file never lets a second writer in;
//! - session ids map to file names injectively and never leave the
//!   directory ([`encode_file_name`]).

mod naming;
mod platform;
pub mod watch;

pub use naming::{decode_file_name, encode_file_name};
#[cfg(target_os = "linux")]
pub(crate) use platform::NameWatch;
pub use platform::{
    byte_held, check_private_dir, identity, identity_of, kind_of, lock_byte, open_existing_rw,
    path_bytes, private_file, unlock_byte,
};

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write; the file must not exist (created with mode 0600).
    CreateNew,
}

/// A directory-level view of storage.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Opens a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// An identity of a file's current content: device, inode, size and
    /// modification times, so it changes with every write. Its first two
    /// `:`-separated fields name the file itself (device and inode, volume
    /// and file index), whatever its content ([`file_of_revision`]).
    fn revision(&self, path: &Path) -> io::Result<String>;
    /// File names in a directory (empty if the directory does not exist).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates a directory and its missing parents, making each new entry
    /// durable (fsync of the parent directory).
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Renames a file (replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes a directory's entries durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive advisory lock on `path` (created if missing)
    /// without waiting. `Ok(Err(pid))` when another holder has it.
    fn try_lock(&self, path: &Path) -> io::Result<Result<Box<dyn LockGuard>, Option<u32>>>;
    /// A random value, for file salts and temp-file names. A simulated disk
    /// makes it deterministic, so runs can be compared byte for byte.
    fn random(&self) -> u64 {
        random_u64()
    }
    /// What the entry at `path` is, without following a symlink; `None`
    /// when there is none.
    fn entry_kind(&self, path: &Path) -> io::Result<Option<EntryKind>>;
    /// What the entry at `path` is when it is anything but a regular file
    /// (`"a FIFO (named pipe)"`, `"a directory"`, …), without following a
    /// symlink; `None` for a regular file or a missing entry. Listings skip
    /// such entries instead of opening them.
    fn foreign_kind(&self, path: &Path) -> io::Result<Option<&'static str>> {
        Ok(match self.entry_kind(path)? {
            None | Some(EntryKind::File) => None,
            Some(EntryKind::Dir) => Some("a directory"),
            Some(EntryKind::Symlink) => Some("a symbolic link"),
            Some(EntryKind::Other(kind)) => Some(kind),
        })
    }
    /// Gives the file at `from` a second name `to`, failing with
    /// `AlreadyExists` when `to` exists: the one publication that can never
    /// replace a file someone else created meanwhile (a rename would).
    fn link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// `path` with every symbolic link resolved (a simulated disk has none).
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        Ok(path.to_owned())
    }
    /// An identity of the machine's current boot: it changes when the
    /// machine restarts (so after a power loss), never while it runs.
    /// `None` when unknown.
    fn boot_id(&self) -> Option<u64> {
        None
    }
    /// Whether the file at `path` was last modified in the machine's
    /// current boot: `Some(false)` only when it certainly was not (nothing
    /// has written it since the machine started); `None` when unknown.
    fn written_this_boot(&self, path: &Path) -> Option<bool> {
        let _ = path;
        None
    }
    /// Refuses a directory another user could plant files in
    /// ([`check_private_dir`]); a simulated disk has one user and accepts
    /// every directory.
    fn check_private_dir(&self, dir: &Path) -> io::Result<()> {
        let _ = dir;
        Ok(())
    }
}

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed below a store's root).
    Symlink,
    /// Anything else, named for messages (`"a symbolic link"`, …).
    Other(&'static str),
}

impl dyn Storage + '_ {
    /// The whole content of the file at `path`; `None` when it does not
    /// exist.
    pub fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let file = match self.open(path, OpenMode::Read) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = usize::try_from(file.len()?)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "file too large to read"))?;
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, 0)?;
        Ok(Some(bytes))
    }
}

/// A refusal to touch a file or directory another user could have planted
/// or could tamper with (the message says what to do).
fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

fn not_regular(kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is {kind}, not a regular file; remove or rename it"),
    )
}

/// A random value without a dependency: the standard library seeds
/// `RandomState` from the OS; a counter and the time make each call differ.
pub fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// A held lock; dropping it releases the lock.
pub trait LockGuard: Send + fmt::Debug {}

/// One open file.
#[allow(
    clippy::len_without_is_empty,
    reason = "a file's length is a value, not a collection size"
)]
pub trait StorageFile: Send + fmt::Debug {
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    /// Reads at `offset`; may return fewer bytes.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes at `offset`; may write fewer bytes.
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// fdatasync.
    fn sync_data(&mut self) -> io::Result<()>;
    /// fsync (data and metadata).
    fn sync_all(&mut self) -> io::Result<()>;
    /// Changes the length. Shrinking waits until no reader has the file
    /// mapped.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// Maps the whole file read-only. While the map lives, shrinking the file
    /// through [`StorageFile::set_len`] waits.
    fn map(&self) -> io::Result<Mapped>;
    /// [`StorageFile::map`] of a handle no longer needed for anything else:
    /// the real file system's map holds its shared lock on this handle
    /// instead of opening the file again (a seeking read's open, `stat` and
    /// close fewer).
    fn into_map(self: Box<Self>) -> io::Result<Mapped> {
        self.map()
    }
    /// Takes the writer's hold on this open log ([`hold_writer`]); `false`
    /// when another writer holds it (another open of the same file, in this
    /// process or another). A simulated disk models it per open handle.
    fn hold_writer(&self) -> io::Result<bool> {
        Ok(true)
    }
    /// Whether another open of this file holds the writer's hold
    /// ([`writer_held`]): asked, never taken, so a probe never keeps a
    /// writer out. A simulated disk answers from its model.
    fn writer_held(&self) -> io::Result<bool> {
        Ok(false)
    }
    /// Tells the handle that its file was renamed to `path` (a compaction's
    /// temp file published as the log): a handle that reopens its file by
    /// name (the real file system's [`StorageFile::map`]) then reopens the
    /// new name. The default does nothing (a handle that names its file by
    /// identity, like the simulated disk's inode).
    fn renamed(&mut self, path: &Path) {
        let _ = path;
    }
}

/// Where the writer's hold sits: one byte far past any log's data.
const WRITER_HOLD_AT: u64 = 1 << 62;

/// Takes the writer's hold on an open log file, held until the file is
/// closed and released by the system when the holder dies: on Linux an
/// open-file-description `fcntl` write lock (`F_OFD_SETLK`) on the byte at
/// 2^62, far past any data; on macOS an exclusive `flock`; on Windows
/// `LockFileEx` of that byte (docs/PLATFORMS.md). It lives on the log
/// itself, so deleting or replacing the session's lock file does not
/// release it: a second writer that got past a deleted lock file still
/// cannot write. It is the JSONL backend's only writer lock (nothing is
/// added to an upstream root for it), and being tied to the open file, not
/// the process, it also refuses a second open in the same process. `false`
/// when another writer holds it.
pub fn hold_writer(file: &File) -> io::Result<bool> {
    retry_held(|| platform::hold_writer(file, WRITER_HOLD_AT))
}

/// Whether another open of the file holds the writer's hold on `file`
/// ([`hold_writer`]). On Linux nothing is taken (`F_OFD_GETLK`), so a
/// listing that probes every session never refuses a writer opening one;
/// macOS and Windows cannot ask without taking for an instant, which a
/// writer opening then rides out by trying again.
pub fn writer_held(file: &File) -> io::Result<bool> {
    platform::writer_held(file, WRITER_HOLD_AT)
}

/// How long a lock found held is tried again before it is reported held.
///
/// A lock tied to an open file description (an OFD lock, a `flock`) is held
/// as long as any descriptor of that description lives. A process that
/// forks shares every description with the child until the child's `exec`
/// closes them (every descriptor turnwal opens is close-on-exec), so a
/// writer that lets a session go while its process spawns a child (a
/// harness running a tool) leaves the lock held for the instant before the
/// child's `exec`. A writer that takes the session in that instant would
/// be refused as locked by no one; trying again for a few milliseconds
/// rides it out. A lock really held is reported after this delay.
const HELD_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// Calls `take` (which answers whether it got the lock) until it does, or
/// until [`HELD_RETRY`] has passed.
fn retry_held(mut take: impl FnMut() -> io::Result<bool>) -> io::Result<bool> {
    let deadline = std::time::Instant::now() + HELD_RETRY;
    loop {
        if take()? {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl dyn StorageFile + '_ {
    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }

    /// Writes all of `buf` at `offset`, continuing after short writes.
    pub fn write_all_at(&mut self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A read-only view of a whole file.
pub struct Mapped {
    bytes: MappedBytes,
}

enum MappedBytes {
    Empty,
    /// The mapping and the shared-locked handle that keeps shrinkers out.
    Mmap(memmap2::Mmap, #[allow(dead_code)] File),
    Owned(Vec<u8>),
}

impl Mapped {
    /// A view over bytes held in memory (simulated storage).
    pub fn owned(bytes: Vec<u8>) -> Mapped {
        Mapped {
            bytes: MappedBytes::Owned(bytes),
        }
    }
}

impl Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.bytes {
            MappedBytes::Empty => &[],
            MappedBytes::Mmap(m, _) => m,
            MappedBytes::Owned(v) => v,
        }
    }
}

impl fmt::Debug for Mapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mapped({} bytes)", self.len())
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsStorage;

#[derive(Debug)]
struct FsFile {
    file: File,
    path: PathBuf,
}

#[derive(Debug)]
struct FsLock(File);

impl LockGuard for FsLock {}

impl Drop for FsLock {
    fn drop(&mut self) {
        // An flock belongs to the open file description, which a child
        // process forked (between fork and exec) shares: closing our fd
        // alone would leave the session locked until the child execs.
        // Unlocking releases it for every copy at once.
        let _ = platform::unlock_file(&self.0);
    }
}

impl Storage for FsStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let mut options = OpenOptions::new();
        options.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::ReadWrite => {
                options.write(true);
            }
            OpenMode::CreateNew => {
                platform::private_file(options.write(true).create_new(true));
            }
        }
        let write = mode != OpenMode::Read;
        if write {
            check_private_dir(path.parent().unwrap_or(Path::new(".")))?;
        }
        let file = platform::open_regular(path, &mut options, write)?;
        Ok(Box::new(FsFile {
            file,
            path: path.to_owned(),
        }))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn revision(&self, path: &Path) -> io::Result<String> {
        platform::revision(path)
    }

    fn entry_kind(&self, path: &Path) -> io::Result<Option<EntryKind>> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Ok(Some(match kind_of(meta.file_type()) {
                None => EntryKind::File,
                Some(_) if meta.is_dir() => EntryKind::Dir,
                Some(_) if meta.is_symlink() => EntryKind::Symlink,
                Some(kind) => EntryKind::Other(kind),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        check_private_dir(to.parent().unwrap_or(Path::new(".")))?;
        std::fs::hard_link(from, to)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    fn check_private_dir(&self, dir: &Path) -> io::Result<()> {
        check_private_dir(dir)
    }

    /// The boot identity the platform gives (docs/PLATFORMS.md), read once.
    fn boot_id(&self) -> Option<u64> {
        static BOOT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        *BOOT.get_or_init(platform::boot_id)
    }

    /// The file's modification time against the moment the machine
    /// started (now less its uptime). A file modified less than a second
    /// before that counts as modified in this boot: a wrong answer that way
    /// costs a refusal, the other way a cut.
    fn written_this_boot(&self, path: &Path) -> Option<bool> {
        let modified = std::fs::symlink_metadata(path).ok()?.modified().ok()?;
        let booted = std::time::SystemTime::now().checked_sub(platform::uptime()?)?;
        let margin = std::time::Duration::from_secs(1);
        Some(modified + margin >= booted)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in entries {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort_unstable();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        // 0700, as upstream creates its directories: the files turnwal
        // writes are refused in a directory others can write to.
        let created = platform::create_private_dir(dir);
        match created {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
            Err(e) => return Err(e),
        }
        // The new entry lives in the parent; make it durable there.
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        self.sync_dir(parent)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        platform::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        platform::sync_dir(dir)
    }

    fn try_lock(&self, path: &Path) -> io::Result<Result<Box<dyn LockGuard>, Option<u32>>> {
        // Never through a symlink (the pid would be written into its
        // target), only in a directory no one else can plant one in, and
        // only into a regular file of this user's.
        check_private_dir(path.parent().unwrap_or(Path::new(".")))?;
        let mut file = platform::open_regular(
            path,
            platform::private_file(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false),
            ),
            true,
        )?;
        // Tried again for a moment, as `hold_writer` is (a forking process
        // shares the lock file's description until the child's exec).
        match retry_held(|| platform::try_lock_file(&file))? {
            true => {
                // A fixed-width pid at offset 0: a contender never reads a
                // half-written number.
                file.seek(SeekFrom::Start(0))?;
                file.write_all(format!("{:>10}\n", std::process::id()).as_bytes())?;
                Ok(Ok(Box::new(FsLock(file))))
            }
            false => {
                let mut text = String::new();
                file.seek(SeekFrom::Start(0))?;
                let _ = file.read_to_string(&mut text);
                Ok(Err(text.trim().parse().ok()))
            }
        }
    }
}

/// The whole of `handle` read into memory: the view where no file is mapped
/// (docs/PLATFORMS.md).
fn read_whole(handle: File) -> io::Result<Mapped> {
    let len = usize::try_from(handle.metadata()?.len())
        .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "file too large to read"))?;
    let mut bytes = vec![0; len];
    let mut at = 0;
    while at < len {
        match platform::read_at(&handle, &mut bytes[at..], at as u64)? {
            0 => {
                bytes.truncate(at);
                break;
            }
            n => at += n,
        }
    }
    Ok(Mapped::owned(bytes))
}

/// The gate readers pass to take their shared flock on a log: a shared flock
/// on the log's directory, held only while taking it. A writer about to
/// shrink a log holds it exclusively while it waits for the log's readers, so
/// a stream of overlapping readers cannot starve it.
fn turnstile(path: &Path) -> io::Result<File> {
    File::open(path.parent().unwrap_or(Path::new(".")))
}

/// A second read-only handle on an open log (its own flock), opened the
/// way every file is: no symlink followed, nothing that could block.
fn reopen(path: &Path) -> io::Result<File> {
    platform::open_regular(path, OpenOptions::new().read(true), false)
}

/// Maps the whole of `handle` (the file at `path`) read-only, `handle`
/// holding the shared flock for the mapping's lifetime.
fn map_holding(handle: File, path: &Path) -> io::Result<Mapped> {
    if !platform::MAPS {
        return read_whole(handle);
    }
    {
        let turnstile = turnstile(path)?;
        turnstile.lock_shared()?;
        handle.lock_shared()?;
    }
    let len = handle.metadata()?.len();
    if len == 0 {
        return Ok(Mapped {
            bytes: MappedBytes::Empty,
        });
    }
    // SAFETY: the shared flock held by `handle` for the mapping's lifetime
    // keeps every turnwal writer from shrinking the file under it (which
    // would raise SIGBUS), and turnwal writers only write at or past a
    // file's current length, or rewrite bytes with their own content
    // (after a failed fdatasync): no mapped byte changes while mapped.
    let map = unsafe { memmap2::MmapOptions::new().len(len as usize).map(&handle)? };
    Ok(Mapped {
        bytes: MappedBytes::Mmap(map, handle),
    })
}

impl StorageFile for FsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        platform::read_at(&self.file, buf, offset)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<usize> {
        platform::write_at(&self.file, buf, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        platform::sync_data(&self.file)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        platform::sync_all(&self.file)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        // Without mapped readers there is no one to wait for.
        if !platform::MAPS || len >= self.len()? {
            return self.file.set_len(len);
        }
        // Readers hold a shared flock on their own handle while mapped. flock
        // has no writer preference, so close the turnstile first: readers
        // arriving now wait at it instead of renewing the shared lock
        // forever, and this waits only for the readers already in.
        let turnstile = turnstile(&self.path)?;
        turnstile.lock()?;
        let guard = reopen(&self.path)?;
        guard.lock()?;
        let result = self.file.set_len(len);
        drop(guard);
        drop(turnstile);
        result
    }

    fn hold_writer(&self) -> io::Result<bool> {
        hold_writer(&self.file)
    }

    fn writer_held(&self) -> io::Result<bool> {
        writer_held(&self.file)
    }

    fn renamed(&mut self, path: &Path) {
        self.path = path.to_owned();
    }

    fn map(&self) -> io::Result<Mapped> {
        map_holding(reopen(&self.path)?, &self.path)
    }

    fn into_map(self: Box<Self>) -> io::Result<Mapped> {
        map_holding(self.file, &self.path)
    }
}

/// The file a [`Storage::revision`] was read from: its first two fields
/// (device and inode), the same while the file is only written to,
/// another once a rename replaces it.
pub fn file_of_revision(revision: &str) -> String {
    revision
        .splitn(3, ':')
        .take(2)
        .collect::<Vec<_>>()
        .join(":")
}
