//! The one error type of the public API.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::contract::Violation;
use crate::event::EventError;
use crate::header::HeaderError;

/// Everything an operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A malformed event (bad JSON, bad envelope key, bad seq or time).
    #[error(transparent)]
    Event(#[from] EventError),
    /// A batch that breaks the turn contract; nothing of it was written.
    #[error(transparent)]
    Contract(#[from] Violation),
    /// A session header that fails validation.
    #[error("invalid session header: {0}")]
    Header(#[from] HeaderError),
    /// A batch that does not start at the stored next seq (a stale writer, or
    /// a re-sent batch).
    #[error("session {id:?}: stored next seq is {expected}, but the batch starts at seq {got}")]
    SeqMismatch {
        /// Session id.
        id: String,
        /// The seq the batch must start at.
        expected: u64,
        /// The seq it started at.
        got: u64,
    },
    /// A repair computed from a scan that no longer describes the stored log
    /// (another writer repaired or appended since); nothing was changed.
    #[error("session {id:?}: repair is stale: {detail}")]
    StaleRepair {
        /// Session id.
        id: String,
        /// What changed.
        detail: String,
    },
    /// No such session.
    #[error("session {id:?} not found")]
    NotFound {
        /// Session id.
        id: String,
    },
    /// `create` of an id that exists.
    #[error("session {id:?} already exists {}", if *.on_disk { "and has a persisted log on disk; load it instead of creating it" } else { "in this store (created, not yet appended)" })]
    AlreadyExists {
        /// Session id.
        id: String,
        /// Whether a log is on disk (rather than a pending in-memory create).
        on_disk: bool,
    },
    /// Stored data that fails validation at or before the commit point.
    #[error(transparent)]
    Corrupt(Box<Corruption>),
    /// A log in a format or version this build does not read.
    #[error("{path}: {detail}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported, and which side to upgrade.
        detail: String,
    },
    /// Another writer holds the session.
    #[error("session {id:?} is locked by another writer ({}); lock file {}", holder_text(*.holder), .path.display())]
    Locked {
        /// Session id.
        id: String,
        /// The lock file (for an SQLite store, the database, one byte of
        /// which is locked).
        path: PathBuf,
        /// The holder's pid, as it recorded it (`None` when unknown: an
        /// SQLite writer's OFD lock records no pid, so only a holder in
        /// this process is named).
        holder: Option<u32>,
    },
    /// Another writer took the session over (a newer writer epoch, in a
    /// store shared by several hosts): this writer's batches are refused,
    /// and nothing of them was written.
    #[error(
        "session {id:?} was taken over by another writer ({holder}, writer epoch {epoch}); this \
         writer (epoch {stale}) may no longer append: open the session again"
    )]
    Superseded {
        /// Session id.
        id: String,
        /// Who holds the session now, as it named itself.
        holder: String,
        /// The session's writer epoch now.
        epoch: i64,
        /// The epoch this writer held.
        stale: i64,
    },
    /// A live writer holds a lease on the session (a store several hosts
    /// share): it renews the lease while it is open, so the session is
    /// taken over only once the lease expires (a writer that died), or on
    /// purpose ([`crate::Store::steal_lease`], `--steal`).
    #[error(
        "session {id:?} is held by a live writer ({holder}, writer epoch {epoch}) whose lease \
         expires in {} unless renewed; it can be taken over after that, or now with --steal; \
         store {}",
        lease_text(*.expires_in), .location.display()
    )]
    Leased {
        /// Session id.
        id: String,
        /// The store, without its password.
        location: PathBuf,
        /// Who holds the session, as it named itself.
        holder: String,
        /// The holder's writer epoch.
        epoch: i64,
        /// How long its lease runs from now, by the server's clock.
        expires_in: std::time::Duration,
    },
    /// A followed session ([`crate::Store::follow`]) is no longer the one
    /// its follower read: removed (`recreated` is `None`), or removed and
    /// created again (`recreated` says how that showed). Nothing of a new
    /// incarnation is served after the old one's events.
    #[error(
        "session {id:?} was {} while following{}; stopped {}{}",
        if .recreated.is_some() { "removed and recreated" } else { "removed" },
        .recreated.as_ref().map(|why| format!(" ({why})")).unwrap_or_default(),
        if *.next == 0 { "before any event".to_owned() } else { format!("after seq {}", .next - 1) },
        if .recreated.is_some() { ", printing nothing of the new session" } else { "" }
    )]
    FollowLost {
        /// Session id.
        id: String,
        /// The seq the follower was waiting for: every event before it was
        /// served.
        next: u64,
        /// How a new incarnation showed (its header, a shorter log, another
        /// event at a seq already served); `None` for a removed session.
        recreated: Option<String>,
    },
    /// A sync ([`crate::Store::sync_to`]) found the destination holding
    /// another history of a session than the source: another incarnation,
    /// more events, or a different event at the same seq. Nothing of the
    /// session was written.
    #[error(transparent)]
    Diverged(Box<Divergence>),
    /// An operation that needs a balanced log met an open turn.
    #[error("session {id:?}: {reason}")]
    OpenTurn {
        /// Session id.
        id: String,
        /// Why the open turn is in the way.
        reason: String,
    },
    /// A bad argument (seq out of range, empty id, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The writer failed earlier in a way that leaves its state unknown
    /// (a failed rollback); reopen to recover from disk.
    #[error(
        "session {id:?}: writer is poisoned by an earlier failure ({cause}); reopen the store to recover from disk"
    )]
    Poisoned {
        /// Session id.
        id: String,
        /// The failure that poisoned it.
        cause: String,
    },
    /// A thread panicked while it held a store-wide resource (its one
    /// SQLite connection); this call is refused, and the next one goes on
    /// from what is stored (`sync` module docs).
    #[error(
        "{location}: a thread panicked while it held the store's {what}; this call is refused, \
         the next one goes on from what is stored"
    )]
    StorePoisoned {
        /// The store (its path or location string).
        location: String,
        /// What was held.
        what: &'static str,
    },
    /// An I/O failure, with the operation and the path.
    #[error("{op} {}: {source}", .path.display())]
    Io {
        /// What was being done (`"open"`, `"fdatasync"`, …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn holder_text(holder: Option<u32>) -> String {
    match holder {
        Some(pid) => format!("pid {pid}"),
        None => "pid unknown".into(),
    }
}

pub(crate) use crate::text::REASON_CHARS;
pub use crate::text::{excerpt, excerpt_within};

/// A lease's remaining time, to the millisecond below ten seconds.
fn lease_text(left: std::time::Duration) -> String {
    if left < std::time::Duration::from_secs(10) {
        format!("{} ms", left.as_millis())
    } else {
        format!("{} s", left.as_secs())
    }
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The corruption report, if this is one.
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            Error::Corrupt(c) => Some(c),
            _ => None,
        }
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Error {
        Error::Corrupt(Box::new(c))
    }
}

/// Where and why stored data is corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// The file (or database) holding the session.
    pub path: PathBuf,
    /// Where the bad record starts, in [`Corruption::unit`]s: a byte offset
    /// in a file, a row's position in a database.
    pub offset: u64,
    /// What [`Corruption::offset`] counts.
    pub unit: Unit,
    /// The seq the bad record holds or should hold.
    pub seq: Option<u64>,
    /// The rule it breaks.
    pub reason: String,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: corrupt at {} {}",
            self.path.display(),
            self.unit,
            self.offset
        )?;
        if let Some(seq) = self.seq {
            write!(f, " (seq {seq})")?;
        }
        // The reason may quote what was read (an id, a key): bounded.
        write!(f, ": {}", excerpt_within(&self.reason, REASON_CHARS))
    }
}

impl std::error::Error for Corruption {}

/// What a position in stored data counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Bytes from the start of a file (the WAL, JSONL transcripts).
    Byte,
    /// Rows of a session, in seq order, from 0 (SQLite).
    Row,
    /// Events of a session's logical log, by seq: what upstream's read
    /// rules judge, after the bytes and rows decoded cleanly.
    Event,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Byte => "byte",
            Unit::Row => "row",
            Unit::Event => "event",
        })
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corruption_names_its_position_in_its_unit() {
        let at = |unit| Corruption {
            path: PathBuf::from("/s/db.sqlite"),
            offset: 6,
            unit,
            seq: Some(6),
            reason: "bad".into(),
        };
        assert_eq!(
            at(Unit::Row).to_string(),
            "/s/db.sqlite: corrupt at row 6 (seq 6): bad"
        );
        assert_eq!(
            at(Unit::Byte).to_string(),
            "/s/db.sqlite: corrupt at byte 6 (seq 6): bad"
        );
    }
}

/// Where a sync found two histories of one session ([`Error::Diverged`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "session {id:?}: the destination holds another history than the source ({detail}); \
     source {src}, destination {dst}; nothing written"
)]
pub struct Divergence {
    /// Session id.
    pub id: String,
    /// Where the source stands: its store and position.
    pub src: String,
    /// Where the destination stands: its store and position.
    pub dst: String,
    /// How the histories differ.
    pub detail: String,
}
