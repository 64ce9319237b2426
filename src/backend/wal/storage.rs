//! The file operations the WAL uses, behind a trait: the real file system is
//! one implementation; a simulated, fault-injecting disk is another (the
//! crash tests), so every crash path runs deterministically in `cargo test`.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Deref;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
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
    /// modification times, so it changes with every write.
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
        let _ = self.0.unlock();
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
                options.write(true).create_new(true).mode(0o600);
            }
        }
        let file = options.open(path)?;
        Ok(Box::new(FsFile {
            file,
            path: path.to_owned(),
        }))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn revision(&self, path: &Path) -> io::Result<String> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(format!(
            "{}:{}:{}:{}.{:09}:{}.{:09}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ))
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
        match std::fs::create_dir(dir) {
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
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn try_lock(&self, path: &Path) -> io::Result<Result<Box<dyn LockGuard>, Option<u32>>> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => {
                // A fixed-width pid at offset 0: a contender never reads a
                // half-written number.
                file.write_all_at(format!("{:>10}\n", std::process::id()).as_bytes(), 0)?;
                Ok(Ok(Box::new(FsLock(file))))
            }
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                file.seek(SeekFrom::Start(0))?;
                let _ = file.read_to_string(&mut text);
                Ok(Err(text.trim().parse().ok()))
            }
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

/// The gate readers pass to take their shared flock on a log: a shared flock
/// on the log's directory, held only while taking it. A writer about to
/// shrink a log holds it exclusively while it waits for the log's readers, so
/// a stream of overlapping readers cannot starve it.
fn turnstile(path: &Path) -> io::Result<File> {
    File::open(path.parent().unwrap_or(Path::new(".")))
}

impl StorageFile for FsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(&self.file, buf, offset)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<usize> {
        FileExt::write_at(&self.file, buf, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        if len >= self.len()? {
            return self.file.set_len(len);
        }
        // Readers hold a shared flock on their own handle while mapped. flock
        // has no writer preference, so close the turnstile first: readers
        // arriving now wait at it instead of renewing the shared lock
        // forever, and this waits only for the readers already in.
        let turnstile = turnstile(&self.path)?;
        turnstile.lock()?;
        let guard = File::open(&self.path)?;
        guard.lock()?;
        let result = self.file.set_len(len);
        drop(guard);
        drop(turnstile);
        result
    }

    fn map(&self) -> io::Result<Mapped> {
        let handle = File::open(&self.path)?;
        {
            let turnstile = turnstile(&self.path)?;
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
}
