//! What a follower waits on between two looks at a log: a sign from the
//! platform that the log may have changed (inotify on Linux, PostgreSQL's
//! `LISTEN`), or, where there is none, the passing of a short interval.
//!
//! A sign only says "look again": the follower then reads the log's
//! revision, which is what decides. So a spurious sign costs one revision
//! read, and a missed one is bounded by [`Watch::recheck`]: a notifier that
//! can miss a change (a network file system's writes made on another host,
//! a notification lost with a dropped connection) is backed by a slow look
//! of its own.

use std::time::Duration;

use crate::error::Result;

/// How often a follower without notification looks at the log's
/// revision: a stat of the file (the WAL, a JSONL transcript), one indexed
/// row (SQLite): about 50 cheap reads a second, for a median delay of half
/// of it.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How long a notified follower goes without a sign before it looks at
/// the log anyway (the notifier's blind spots, module docs).
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A way to wait for a sign that a stored log changed
/// ([`crate::backend::Backend::watch`]). Made before a follower's first
/// read, so that a change during the read is a sign at the next wait.
pub trait Watch: Send {
    /// Waits up to `timeout` for a sign; `true` when one came (the log may
    /// have changed: look), `false` when the time ran out.
    fn wait(&mut self, timeout: Duration) -> Result<bool>;

    /// How long a follower waits for a sign before it looks anyway.
    fn recheck(&self) -> Duration;
}

/// No notification: the follower looks every [`POLL_INTERVAL`].
#[derive(Debug, Default)]
pub struct Poll;

impl Watch for Poll {
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        std::thread::sleep(timeout);
        Ok(false)
    }

    fn recheck(&self) -> Duration {
        POLL_INTERVAL
    }
}

/// A watch on the entries of `dir` whose names start with `prefix` (every
/// entry when it is empty): the kernel's inotify on Linux, a [`Poll`]
/// elsewhere or when inotify cannot be had (out of watches: a follower
/// then polls rather than fails).
pub fn of_names(dir: &std::path::Path, prefix: &[u8]) -> Box<dyn Watch> {
    #[cfg(target_os = "linux")]
    if let Ok(watch) = super::NameWatch::new(dir, prefix) {
        return Box::new(Names(watch));
    }
    let _ = (dir, prefix);
    Box::new(Poll)
}

#[cfg(target_os = "linux")]
struct Names(super::NameWatch);

#[cfg(target_os = "linux")]
impl Watch for Names {
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        // A failing inotify read is a sign: the follower looks, and the
        // next wait tries again.
        Ok(self.0.wait(timeout).unwrap_or(true))
    }

    fn recheck(&self) -> Duration {
        RECHECK_INTERVAL
    }
}

/// The watch of a file store's log at `path`: its directory's entries
/// named like it (`s.wal`, `s.wal.tmp` of a rewrite; `db`, `db-wal`).
pub fn of_file(path: &std::path::Path) -> Box<dyn Watch> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let name = path.file_name().unwrap_or_default();
    of_names(dir, &super::path_bytes(std::path::Path::new(name)))
}
