//! What Linux and macOS share: POSIX modes and owners, `O_NOFOLLOW`,
//! `dev:ino` identities.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::super::{not_regular, refused};

/// What a file type is, for messages; `None` for a regular file.
pub fn kind_of(file_type: std::fs::FileType) -> Option<&'static str> {
    Some(if file_type.is_file() {
        return None;
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    })
}

/// `dev:ino:size:mtimeNs:ctimeNs`, the form of upstream's revisions.
pub(super) fn revision_of(meta: &std::fs::Metadata) -> String {
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    format!(
        "{}:{}:{}:{}:{}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec())
    )
}

/// The effective uid of this process.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Upstream's checks of the directory its SQLite database lives in, applied
/// to every directory turnwal writes its files in (logs, lock files,
/// sidecars, temp and quarantine files): a real directory (not a symlink),
/// owned by the current effective user, not writable by group or others.
/// Anyone else who can write there could plant a symlink or a file of their
/// own under a name turnwal is about to write.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let dir = super::dir_or_dot(dir);
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(refused(format!(
            "its directory {} is not a real directory ({}); turnwal does not follow symlinks \
             there: use the directory itself",
            dir.display(),
            kind_of(meta.file_type()).unwrap_or("a regular file")
        )));
    }
    if meta.uid() != euid() {
        return Err(refused(format!(
            "its directory {} is owned by uid {}, not by this user ({}); run as its owner or \
             chown it",
            dir.display(),
            meta.uid(),
            euid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refused(format!(
            "its directory {} is writable by group or others (mode {:o}); chmod go-w it",
            dir.display(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Files turnwal creates are `0600`: `options` set to create them so.
pub fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options.mode(0o600)
}

/// Creates one directory, `0700` (as upstream creates its directories: the
/// files turnwal writes are refused in a directory others can write to).
pub(in crate::storage) fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Opens `path` without following a symlink and without blocking (a FIFO
/// opened for reading would wait for a writer), then checks with fstat that
/// it is a regular file and, when `write`, that it is owned by the current
/// effective user. A refusal says what the entry is and what to do.
pub(in crate::storage) fn open_regular(
    path: &Path,
    options: &mut OpenOptions,
    write: bool,
) -> io::Result<File> {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused(
                "is a symbolic link, which turnwal never follows for a store's files; remove it"
                    .into(),
            ));
        }
        // A socket (ENXIO), a directory opened for writing (EISDIR).
        Err(e) => return Err(super::open_error(path, e)),
    };
    let meta = file.metadata()?;
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(not_regular(kind));
    }
    if write && meta.uid() != euid() {
        return Err(refused(format!(
            "is owned by uid {}, not by this user ({}); turnwal writes only files of its own: \
             remove it, or run as its owner",
            meta.uid(),
            euid()
        )));
    }
    Ok(file)
}

/// Makes a directory's entries durable: fsync of the directory.
pub(in crate::storage) fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = File::open(dir)?;
    super::sync_all(&dir)
}

/// Renames `from` over `to`: `rename(2)`, atomic; durable once the
/// directory is synced.
pub(in crate::storage) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

/// A path's bytes, for hashing into a name: the same bytes every run.
pub fn path_bytes(path: &Path) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(path.as_os_str().as_bytes())
}

/// The byte-range lock commands of this OS: open-file-description locks on
/// Linux, traditional (process-owned) ones on macOS (`super::os`).
use super::os::{GET_LOCK, SET_LOCK};

/// An `fcntl` lock request of one byte at `offset`; `kind` is `F_WRLCK` or
/// `F_UNLCK` (`c_int` on Linux, `c_short` on macOS).
fn one_byte(kind: impl Into<i32>, offset: u64) -> libc::flock {
    // SAFETY: a zeroed `flock` is a valid value; every field a lock
    // command reads is set below (`l_pid` must be 0 for the OFD ones).
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind.into() as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = offset as libc::off_t;
    lock.l_len = 1;
    lock
}

/// `SET_LOCK` of byte `offset`: `false` when another holder has it.
fn set_byte(file: &File, kind: impl Into<i32>, offset: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let lock = one_byte(kind, offset);
    // SAFETY: a valid open descriptor and a pointer to an initialized
    // `flock` that outlives the call.
    if unsafe { libc::fcntl(file.as_raw_fd(), SET_LOCK, &lock) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// A write lock of byte `at` of `file` (the writer's hold on Linux, the
/// SQLite backend's per-session bytes everywhere on Unix): `true` when
/// taken.
pub fn lock_byte(file: &File, at: u64) -> io::Result<bool> {
    set_byte(file, libc::F_WRLCK, at)
}

/// Releases a byte taken with [`lock_byte`] explicitly (a forked child
/// shares an open file description until it execs: closing would not
/// release an OFD lock).
pub fn unlock_byte(file: &File, at: u64) -> io::Result<()> {
    set_byte(file, libc::F_UNLCK, at).map(|_| ())
}

/// Whether another holder has byte `at` ([`lock_byte`]), asked with
/// `GET_LOCK`: nothing is taken.
pub fn byte_held(file: &File, at: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut lock = one_byte(libc::F_WRLCK, at);
    // SAFETY: a valid open descriptor and a pointer to an initialized
    // `flock` the call may write, which outlives it.
    if unsafe { libc::fcntl(file.as_raw_fd(), GET_LOCK, &mut lock) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
}
