//! macOS: `flock` writer holds (there are no open-file-description locks),
//! `F_FULLFSYNC`, the kernel's boot session UUID.

use std::fs::File;
use std::io;

/// Byte locks (the SQLite backend's per-session bytes) are traditional
/// POSIX locks, owned by the process: macOS has no open-file-description
/// locks. The SQLite backend keeps one descriptor per database open for the
/// process's life and refuses a second writer of the process itself from
/// its own table; but closing any other descriptor of the database in this
/// process (a read-only SQLite connection ending) drops them
/// (docs/PLATFORMS.md says so).
pub(super) const SET_LOCK: libc::c_int = libc::F_SETLK;
pub(super) const GET_LOCK: libc::c_int = libc::F_GETLK;

/// No mapped reads: the writer's hold is an exclusive `flock` on the log,
/// so readers cannot take the shared `flock` that keeps a shrinking writer
/// from pulling a mapping's pages away. Readers read the file into memory.
pub(in crate::storage) const MAPS: bool = false;

/// The writer's hold: an exclusive `flock` on the log (`at` is unused).
/// `flock` belongs to the open file description, as Linux's OFD locks do:
/// it refuses a second open in the same process as in another, and the
/// kernel drops it when the holder dies. `false` when another open holds
/// it.
pub(in crate::storage) fn hold_writer(file: &File, _at: u64) -> io::Result<bool> {
    flock(file, libc::LOCK_EX | libc::LOCK_NB)
}

/// Whether another open holds the writer's hold: a shared `flock` tried
/// and let go at once (macOS cannot ask without taking). A writer opening
/// in that instant is refused for it and tries again (`retry_held`).
pub(in crate::storage) fn writer_held(file: &File, _at: u64) -> io::Result<bool> {
    if flock(file, libc::LOCK_SH | libc::LOCK_NB)? {
        flock(file, libc::LOCK_UN)?;
        Ok(false)
    } else {
        Ok(true)
    }
}

fn flock(file: &File, op: libc::c_int) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

/// `fcntl(F_FULLFSYNC)`: macOS's `fsync` hands the data to the drive but
/// does not make the drive write its cache; only `F_FULLFSYNC` promises
/// stable storage (Apple's fsync(2) man page). It costs a drive cache
/// flush per call.
pub(in crate::storage) fn sync_data(file: &File) -> io::Result<()> {
    full_fsync(file)
}

/// As [`sync_data`]: `F_FULLFSYNC` writes metadata too.
pub(in crate::storage) fn sync_all(file: &File) -> io::Result<()> {
    full_fsync(file)
}

fn full_fsync(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_FULLFSYNC) } == 0 {
        return Ok(());
    }
    Err(io::Error::last_os_error())
}

/// `kern.bootsessionuuid`, hashed: a new value at every boot.
pub(in crate::storage) fn boot_id() -> Option<u64> {
    let mut buf = [0u8; 64];
    let mut len = buf.len();
    // SAFETY: a NUL-terminated name, a buffer and its length we own.
    let rc = unsafe {
        libc::sysctlbyname(
            c"kern.bootsessionuuid".as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return None;
    }
    let text = std::str::from_utf8(&buf[..len]).ok()?;
    let text = text.trim_end_matches('\0').trim();
    (!text.is_empty()).then(|| super::hash_id(text.as_bytes()))
}

/// How long the machine has been up: now less `kern.boottime`.
pub(in crate::storage) fn uptime() -> Option<std::time::Duration> {
    let mut boot = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let mut len = std::mem::size_of::<libc::timeval>();
    // SAFETY: a NUL-terminated name, a timeval and its size we own.
    let rc = unsafe {
        libc::sysctlbyname(
            c"kern.boottime".as_ptr(),
            (&mut boot as *mut libc::timeval).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return None;
    }
    let booted = std::time::UNIX_EPOCH
        + std::time::Duration::new(boot.tv_sec as u64, boot.tv_usec as u32 * 1000);
    std::time::SystemTime::now().duration_since(booted).ok()
}
