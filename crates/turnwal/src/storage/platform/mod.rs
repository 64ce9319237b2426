//! What differs per operating system, behind one set of functions: writer
//! holds and byte locks, durable syncs, directory syncs and renames, the
//! checks of who may have planted a file, boot identity and file identity
//! (docs/PLATFORMS.md). Everything above `storage` is the same everywhere.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::private_file;
#[cfg(unix)]
pub use unix::{byte_held, check_private_dir, kind_of, lock_byte, path_bytes, unlock_byte};
#[cfg(unix)]
pub(super) use unix::{create_private_dir, open_regular, rename, sync_dir};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(target_os = "linux")]
pub(crate) use linux::NameWatch;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as os;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;
#[cfg(windows)]
pub use windows::private_file;
#[cfg(windows)]
pub use windows::{byte_held, check_private_dir, kind_of, lock_byte, path_bytes, unlock_byte};
#[cfg(windows)]
pub(super) use windows::{create_private_dir, open_regular, rename, revision, sync_dir};

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
compile_error!("turnwal builds for Linux, macOS and Windows (docs/PLATFORMS.md)");

pub(super) use os::{MAPS, boot_id, hold_writer, sync_all, sync_data, uptime, writer_held};

/// `dev:ino:size:mtimeNs:ctimeNs`, the form of upstream's revisions.
#[cfg(unix)]
pub(super) fn revision(path: &std::path::Path) -> std::io::Result<String> {
    Ok(unix::revision_of(&std::fs::metadata(path)?))
}

/// A boot identity's text hashed to 64 bits.
fn hash_id(bytes: &[u8]) -> u64 {
    let (a, b) = bytes.split_at(bytes.len() / 2);
    u64::from(crc32fast::hash(a)) << 32 | u64::from(crc32fast::hash(b))
}

/// Takes a lock file's lock without waiting: `flock` on Unix; on Windows,
/// whose locks are mandatory, a byte far past the pid it holds, so a
/// contender can still read who holds it.
pub(super) fn try_lock_file(file: &std::fs::File) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        match file.try_lock() {
            Ok(()) => Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => Ok(false),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
    #[cfg(windows)]
    {
        lock_byte(file, super::WRITER_HOLD_AT)
    }
}

/// Releases [`try_lock_file`]'s lock (explicitly: a child forked meanwhile
/// shares the open file description until it execs).
pub(super) fn unlock_file(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        file.unlock()
    }
    #[cfg(windows)]
    {
        unlock_byte(file, super::WRITER_HOLD_AT)
    }
}

/// Reads at `offset` without moving a shared cursor (`pread`; on Windows a
/// positioned `ReadFile`, which moves the handle's cursor no one else uses).
pub(super) fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

/// Writes at `offset` (`pwrite`; on Windows a positioned `WriteFile`).
pub(super) fn write_at(file: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_write(file, buf, offset)
    }
}

/// A file's identity, the same for every name and open of it: device and
/// inode on Unix, volume serial number and file index on Windows.
pub fn identity_of(file: &std::fs::File) -> std::io::Result<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        Ok((meta.dev(), meta.ino()))
    }
    #[cfg(windows)]
    {
        windows::identity_of(file)
    }
}

/// Opens an existing file for reading and writing without following a
/// symlink or reparse point and without blocking, checked to be a regular
/// file (for a lock descriptor beside another library's own).
pub fn open_existing_rw(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    open_regular(
        path,
        std::fs::OpenOptions::new().read(true).write(true),
        false,
    )
}

/// [`identity_of`] the file at `path`, without following a symlink and, on
/// Unix, without opening it (closing a descriptor of a file drops the
/// process's POSIX locks on it; Windows has no such rule).
pub fn identity(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path)?;
        Ok((meta.dev(), meta.ino()))
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Storage::FileSystem::{
            FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
            .open(path)?;
        windows::identity_of(&file)
    }
}

/// `dir`, or `.` for the empty path (the parent of a bare file name).
fn dir_or_dot(dir: &std::path::Path) -> &std::path::Path {
    if dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        dir
    }
}

/// What a failed open of `path` reports: what the entry is when it is not
/// a regular file (a socket, a directory opened for writing) rather than the
/// errno; the error itself otherwise.
fn open_error(path: &std::path::Path, e: std::io::Error) -> std::io::Error {
    use std::io::ErrorKind::{AlreadyExists, NotFound};
    if !matches!(e.kind(), NotFound | AlreadyExists)
        && let Some(kind) = std::fs::symlink_metadata(path)
            .ok()
            .and_then(|m| kind_of(m.file_type()))
    {
        return super::not_regular(kind);
    }
    e
}
