//! The file locks a process holds, as the kernel shows them (Linux):
//! `/proc/<pid>/fdinfo/<fd>` lists, after the descriptor's fields, one
//! `lock:` line per lock taken through that descriptor —
//! `lock:\t1: OFDLCK ADVISORY  WRITE -1 fe:00:1234 start end` for an
//! open-file-description lock (whose pid is always -1, in `/proc/locks`
//! too: a holder is found through its descriptors), `POSIX` with the pid
//! for a traditional one (SQLite's). Each descriptor's list is read under
//! the file's lock-list lock, unlike `/proc/locks`, whose successive reads
//! can skip or repeat entries while other processes lock and unlock.

#![allow(dead_code)] // each test crate uses its own subset

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One lock: `OFDLCK` or `POSIX`, `READ` or `WRITE`, its first and last
/// byte (the last `EOF` for a lock to the end of the file).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lock {
    pub class: String,
    pub kind: String,
    pub start: String,
    pub end: String,
    /// The descriptor it was found through.
    pub fd: i32,
}

/// `maj:min:ino` of `path`, as the kernel prints it (`%02x:%02x:%lu`).
pub fn kernel_id(path: &Path) -> String {
    let meta = std::fs::metadata(path).unwrap();
    let dev = meta.dev();
    format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    )
}

/// Every lock process `pid` holds on `path`, through any of its
/// descriptors, sorted. Empty when the process is gone.
pub fn locks(pid: u32, path: &Path) -> Vec<Lock> {
    let id = kernel_id(path);
    let mut found = Vec::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return found;
    };
    for fd in fds {
        let fd = fd.unwrap();
        // A descriptor may close between the listing and the read.
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        for line in info.lines().filter(|l| l.starts_with("lock:")) {
            // lock: N: CLASS ADVISORY READ|WRITE pid maj:min:ino start end
            let f: Vec<&str> = line.split_whitespace().collect();
            if f[6] != id {
                continue;
            }
            let owner = if f[2] == "OFDLCK" {
                "-1".to_owned()
            } else {
                pid.to_string()
            };
            assert_eq!(f[5], owner, "{line}");
            found.push(Lock {
                class: f[2].to_owned(),
                kind: f[4].to_owned(),
                start: f[7].to_owned(),
                end: f[8].to_owned(),
                fd: fd.file_name().to_str().unwrap().parse().unwrap(),
            });
        }
    }
    found.sort();
    found
}

/// The first bytes of the OFD locks process `pid` holds on `path`, sorted:
/// each must be a write lock of one byte (an SQLite writer's).
pub fn ofd_locks(pid: u32, path: &Path) -> Vec<u64> {
    locks(pid, path)
        .into_iter()
        .filter(|l| l.class == "OFDLCK")
        .map(|l| {
            assert_eq!((l.kind.as_str(), &l.start), ("WRITE", &l.end), "{l:?}");
            l.start.parse().unwrap()
        })
        .collect()
}

/// The descriptor of process `pid` through which it holds the OFD write
/// lock of byte `offset` of `path`, if it does.
pub fn ofd_lock_fd(pid: u32, path: &Path, offset: u64) -> Option<i32> {
    locks(pid, path)
        .into_iter()
        .find(|l| l.class == "OFDLCK" && l.start == offset.to_string())
        .map(|l| l.fd)
}

/// Breaks the OFD lock of byte `offset` of `path` that (live) process `pid`
/// holds, under its feet, as a lock that did not reach it would be (a
/// writer on another host, or one that takes no lock): takes a copy of the
/// holder's descriptor (`pidfd_getfd`, Linux 5.6; this process may trace
/// its children) and unlocks the byte through it — an OFD lock belongs to
/// the open file description, which the copy shares.
///
/// The copy is returned, to be closed only when no SQLite connection of this
/// process has the file open: closing a descriptor drops every POSIX lock
/// this process holds on the file.
pub fn break_ofd_lock(pid: u32, path: &Path, offset: u64) -> OwnedFd {
    let fd = ofd_lock_fd(pid, path, offset)
        .unwrap_or_else(|| panic!("process {pid} holds no lock of byte {offset} of {path:?}"));
    // SAFETY: plain system calls on integers; the results are checked.
    let copy = unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0);
        assert!(
            pidfd >= 0,
            "pidfd_open({pid}): {}",
            std::io::Error::last_os_error()
        );
        let pidfd = OwnedFd::from_raw_fd(pidfd as i32);
        let copy = libc::syscall(
            libc::SYS_pidfd_getfd,
            std::os::fd::AsRawFd::as_raw_fd(&pidfd),
            fd,
            0,
        );
        assert!(
            copy >= 0,
            "pidfd_getfd({pid}, {fd}): {} (breaking another process's lock needs the \
             right to trace it: a child of this process, without a seccomp filter \
             that refuses the call)",
            std::io::Error::last_os_error()
        );
        OwnedFd::from_raw_fd(copy as i32)
    };
    // SAFETY: a zeroed `flock` is valid; every field the call reads is set.
    let mut unlock: libc::flock = unsafe { std::mem::zeroed() };
    unlock.l_type = libc::F_UNLCK as libc::c_short;
    unlock.l_whence = libc::SEEK_SET as libc::c_short;
    unlock.l_start = offset as libc::off_t;
    unlock.l_len = 1;
    // SAFETY: a valid descriptor and an initialized `flock`.
    let rc = unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&copy),
            libc::F_OFD_SETLK,
            &unlock,
        )
    };
    assert_eq!(rc, 0, "unlock: {}", std::io::Error::last_os_error());
    copy
}
