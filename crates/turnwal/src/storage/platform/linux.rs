//! Linux: open-file-description locks, fdatasync, the kernel's boot id.

use std::fs::File;
use std::io;

use super::unix::{byte_held, lock_byte};

/// Byte locks are open-file-description locks: tied to the open file, not
/// the process, dropped when it is closed or its holder dies.
pub(super) const SET_LOCK: libc::c_int = libc::F_OFD_SETLK;
pub(super) const GET_LOCK: libc::c_int = libc::F_OFD_GETLK;

/// Readers map logs and hold a shared `flock` while mapped; a writer
/// shrinking a log waits for them (the mapping would raise SIGBUS).
pub(in crate::storage) const MAPS: bool = true;

/// The writer's hold: an open-file-description `fcntl` write lock
/// (`F_OFD_SETLK`) on one byte far past the data, held until the file is
/// closed and dropped by the kernel when the holder dies. Tied to the open
/// file description, not the process, it refuses a second open in the
/// same process too; readers' shared `flock`s are another kind of lock and
/// never meet it. `false` when another open holds it.
pub(in crate::storage) fn hold_writer(file: &File, at: u64) -> io::Result<bool> {
    lock_byte(file, at)
}

/// Whether another open holds the writer's hold, asked with `F_OFD_GETLK`:
/// nothing is taken.
pub(in crate::storage) fn writer_held(file: &File, at: u64) -> io::Result<bool> {
    byte_held(file, at)
}

/// `fdatasync`: on Linux it reaches stable storage (the block layer sends
/// the device's cache flush).
pub(in crate::storage) fn sync_data(file: &File) -> io::Result<()> {
    file.sync_data()
}

/// `fsync`.
pub(in crate::storage) fn sync_all(file: &File) -> io::Result<()> {
    file.sync_all()
}

/// `/proc/sys/kernel/random/boot_id`, hashed.
pub(in crate::storage) fn boot_id() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| super::hash_id(text.as_bytes()))
}

/// How long the machine has been up (`CLOCK_BOOTTIME`, suspend included).
pub(in crate::storage) fn uptime() -> Option<std::time::Duration> {
    let mut up = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut up) } != 0 {
        return None;
    }
    Some(std::time::Duration::new(
        up.tv_sec as u64,
        up.tv_nsec as u32,
    ))
}
