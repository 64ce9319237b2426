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

/// Changes to the entries of one directory whose names start with a
/// prefix, from the kernel's inotify: what a follower waits on instead of
/// polling a log's length (`Store::follow`). A watch on the directory, not
/// the file, so a log replaced by rename (a compaction, a repair's
/// rewrite), removed or created again is seen as well as one written.
pub(crate) struct NameWatch {
    fd: std::os::fd::OwnedFd,
    prefix: Vec<u8>,
    /// Where queued events are read into (kept: a wait reads twice).
    buf: Vec<u8>,
}

impl NameWatch {
    /// Watches `dir` for writes, renames, creations and removals of
    /// entries whose names start with `prefix` (every entry when empty).
    pub(crate) fn new(dir: &std::path::Path, prefix: &[u8]) -> io::Result<NameWatch> {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor this function owns from here on.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let dir = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
        let mask = libc::IN_MODIFY
            | libc::IN_CLOSE_WRITE
            | libc::IN_CREATE
            | libc::IN_DELETE
            | libc::IN_MOVED_FROM
            | libc::IN_MOVED_TO
            | libc::IN_DELETE_SELF
            | libc::IN_MOVE_SELF;
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), dir.as_ptr(), mask) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(NameWatch {
            fd,
            prefix: prefix.to_vec(),
            buf: vec![0; 16 * 1024],
        })
    }

    /// Waits up to `timeout` for a change to a watched name; `true` when
    /// one came (every queued event is consumed), `false` when the time
    /// ran out. An overflowed queue counts as a change: something may have
    /// been missed.
    pub(crate) fn wait(&mut self, timeout: std::time::Duration) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        let mut seen = self.drain()?;
        if seen {
            return Ok(true);
        }
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up: a wait of less than a millisecond must not spin.
        let ms = timeout.as_micros().div_ceil(1000);
        let ms = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
        // SAFETY: one pollfd we own.
        let n = unsafe { libc::poll(&mut poll, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        if n > 0 {
            seen = self.drain()?;
        }
        Ok(seen)
    }

    /// Reads every queued event; whether one named a watched entry (or
    /// the queue overflowed, or the directory itself went away).
    fn drain(&mut self) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        let header = std::mem::size_of::<libc::inotify_event>();
        let buf = &mut self.buf;
        let mut seen = false;
        loop {
            // SAFETY: a buffer we own, of the length given.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(seen),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            let n = n as usize;
            if n == 0 {
                return Ok(seen);
            }
            let mut at = 0;
            while at + header <= n {
                // SAFETY: the kernel wrote a whole event header here; read
                // unaligned, as the buffer has no alignment guarantee.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name_len = event.len as usize;
                let name = &buf[at + header..(at + header + name_len).min(n)];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                let whole_dir = event.mask
                    & (libc::IN_Q_OVERFLOW | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF)
                    != 0;
                if whole_dir || name.starts_with(&self.prefix) {
                    seen = true;
                }
                at += header + name_len;
            }
        }
    }
}
