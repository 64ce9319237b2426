//! Storage backends. Each one implements [`Backend`] (the store-wide
//! operations) and hands out one exclusive [`LogWriter`] per session; the
//! [`crate::Store`] above them owns the turn contract and the session
//! lifecycle, so every backend has the same semantics.

#[cfg(feature = "jsonl")]
pub mod jsonl;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod rows;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod wal;

use std::fmt;
use std::str::FromStr;

use crate::contract::{Placement, Policy};
use crate::error::Result;
use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::{Salvage, Scan, SessionSummary};

/// When appended events become durable (and are acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SyncMode {
    /// fdatasync at every batch that holds a `turn/end`: the turn is the unit
    /// of durability. The default.
    #[default]
    Turn,
    /// fdatasync at the end of every append batch.
    Batch,
    /// Leave it to the OS: acknowledged once written. Survives a process
    /// crash, not a power loss.
    Never,
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncMode::Turn => "turn",
            SyncMode::Batch => "batch",
            SyncMode::Never => "never",
        })
    }
}

impl FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<SyncMode, String> {
        match s {
            "turn" => Ok(SyncMode::Turn),
            "batch" => Ok(SyncMode::Batch),
            "never" => Ok(SyncMode::Never),
            other => Err(format!(
                "unknown sync mode {other:?} (expected turn, batch or never)"
            )),
        }
    }
}

pub use crate::scan::Stored;

/// What a compaction did: the log's length before and after (equal when
/// there was nothing to seal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Bytes before.
    pub before: u64,
    /// Bytes after.
    pub after: u64,
}

/// A live writer of a session, as [`Backend::holders`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Who, as it named itself or as the lock tells (`pid 123`,
    /// `host pid 123 writer 9f3a…`, `this process`, `another process`).
    pub who: String,
    /// Its pid, when known.
    pub pid: Option<u32>,
    /// Its writer epoch (a store shared by hosts).
    pub epoch: Option<i64>,
    /// How long its lease runs from now, by the server's clock (a store
    /// shared by hosts; a file store's lock lasts as long as its holder).
    pub lease_expires_in: Option<std::time::Duration>,
}

impl Holder {
    /// A file store's holder: a process, named by its pid when known.
    pub fn of_pid(pid: Option<u32>) -> Holder {
        Holder {
            who: pid.map_or_else(|| "pid unknown".to_owned(), |p| format!("pid {p}")),
            pid,
            epoch: None,
            lease_expires_in: None,
        }
    }
}

/// The store-wide operations of a backend. Everything here is read-only
/// except [`Backend::create`], [`Backend::delete`] and [`Backend::compact`];
/// nothing here repairs.
pub trait Backend: Send + Sync {
    /// Where the store lives, for messages.
    fn location(&self) -> String;

    /// A way to wait for a sign that session `id`'s stored log changed
    /// (`None`: that any session's did, or a session was created), for a
    /// follower ([`crate::Store::follow`]) between two reads of the log's
    /// revision. The default polls ([`crate::storage::watch::Poll`]); file
    /// stores watch the log's directory, PostgreSQL listens for its
    /// writers' notifications.
    fn watch(&self, id: Option<&str>) -> Result<Box<dyn crate::storage::watch::Watch>> {
        let _ = id;
        Ok(Box::new(crate::storage::watch::Poll))
    }

    /// Every materialized session, read from headers and log tails without
    /// reading whole logs where the backend allows it.
    fn list(&self) -> Result<Vec<SessionSummary>>;

    /// One session's [`Backend::list`] entry, read the way `list` reads it
    /// (headers and log tails); `None` when the session does not exist. The
    /// default lists the store.
    fn summary(&self, id: &str) -> Result<Option<SessionSummary>> {
        Ok(self.list()?.into_iter().find(|s| s.id == id))
    }

    /// The first `n` stored events (fewer if the log holds fewer), read
    /// from the log's start without classifying the log: what a listing
    /// shows of a session (its first prompt). Nothing is repaired or
    /// checked beyond each record read. `None` when the session does not
    /// exist. The default reads the stored events whole.
    fn read_first(&self, id: &str, n: usize) -> Result<Option<Vec<Event>>> {
        Ok(self.read_from(id, 0)?.map(|mut events| {
            events.truncate(n);
            events
        }))
    }

    /// The inspect view from `from_seq` on, without reading the events
    /// before it where the backend can seek: the stored events with seq >=
    /// `from_seq`, and the closers recovery would append (all of them,
    /// whatever their seqs). `None` when the session does not exist. The
    /// default loads the log.
    fn inspect_from(&self, id: &str, from_seq: u64) -> Result<Option<(Vec<Event>, Vec<Event>)>> {
        Ok(self.load(id)?.map(|stored| {
            let events = stored
                .events
                .into_iter()
                .filter(|e| e.seq() >= from_seq)
                .collect();
            (events, stored.scan.closers)
        }))
    }

    /// A cheap estimate of where a session's stored events end (the seq
    /// after the last one), read from the log's end, so that its last events
    /// can be read without its prefix; `None` when the backend cannot tell
    /// without reading the log (the caller then reads from seq 0) or the
    /// session does not exist. An estimate: a reader checks what it gets.
    fn end_hint(&self, _id: &str) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Whether a session is materialized.
    fn exists(&self, id: &str) -> Result<bool>;

    /// An opaque token that changes with every append and repair of the
    /// stored log and never with a read; `None` when the session does not
    /// exist.
    fn revision(&self, id: &str) -> Result<Option<String>>;

    /// The part of a [`Backend::revision`] that names the stored log's
    /// incarnation: the same while the log is only appended to; another
    /// when the session is removed and created again, and (file stores)
    /// when its file is rewritten (a compaction, a seal, a repair's copy).
    /// `None` when the backend cannot tell (the default): a follower then
    /// relies on the last event it served being still in place.
    fn incarnation(&self, revision: &str) -> Option<String> {
        let _ = revision;
        None
    }

    /// Holds session `id`'s stored log as it is now for as long as the
    /// value lives, so that its incarnation cannot be taken by another log:
    /// a file store's open handle keeps the file's inode from being reused
    /// by a session removed and created again, which would otherwise get
    /// the same device and inode, and the same revision prefix. `None`
    /// (the default) where incarnations are drawn, never reused.
    fn pin(&self, id: &str) -> Option<Box<dyn Send>> {
        let _ = id;
        None
    }

    /// Reads and classifies a stored log without writing or locking; `None`
    /// when the session does not exist.
    fn scan(&self, id: &str) -> Result<Option<Scan>>;

    /// Like [`Backend::scan`], and decodes every kept event.
    fn load(&self, id: &str) -> Result<Option<Stored>>;

    /// The session's header alone, read without its events where the
    /// backend allows it (the WAL's file header, SQLite's session row);
    /// `None` when the session does not exist. The default scans the log.
    fn header(&self, id: &str) -> Result<Option<SessionHeader>> {
        Ok(self.scan(id)?.map(|scan| scan.header))
    }

    /// The session's policy where the backend can read it without the
    /// session's events (the WAL's file header, SQLite's session row);
    /// `None` when the session does not exist or the backend cannot tell
    /// without reading the log (the default). A seeking read must not
    /// fail on what it does not read, so this never scans.
    fn policy(&self, _id: &str) -> Result<Option<Policy>> {
        Ok(None)
    }

    /// Whether this backend's logical reads (`load`, `read_from`, a
    /// writer's `read_from`) already apply upstream's read-time migrations
    /// ([`crate::upstream::normalize`]) to every session, as the JSONL
    /// backend does. For the others, the store applies them to
    /// [`Policy::Permissive`] sessions.
    fn normalizes_reads(&self) -> bool {
        false
    }

    /// The one read primitive: the stored log's events through a
    /// [`crate::view::Cursor`], with the scan that classified it and the
    /// closers an open turn would get (written nowhere); `None` when the
    /// session does not exist. A backend's own cursor reads its records
    /// as they come, expanding one chunk run or sealed unit at a time (the
    /// native WAL). The default loads the log and lends its events from
    /// memory.
    fn read(&self, id: &str) -> Result<Option<crate::view::LogReader>> {
        Ok(self.load(id)?.map(|stored| {
            let state = stored.scan.state();
            let n = stored.events.len() as u64;
            crate::view::LogReader::new(
                stored.scan.header.clone(),
                state,
                n,
                Box::new(crate::view::Held::new(stored.events)),
                stored.scan.closers.clone(),
            )
            .with_scan(stored.scan)
        }))
    }

    /// The stored log read in place, with the closers an open turn would
    /// get (written nowhere); `None` when the session does not exist. The
    /// default holds decoded events; a file backend borrows from a map.
    fn view(&self, id: &str) -> Result<Option<crate::view::LogView>> {
        Ok(self.load(id)?.map(|stored| {
            let state = stored.scan.state();
            crate::view::LogView::owned(
                stored.scan.header.clone(),
                state,
                stored.events,
                stored.scan.closers.clone(),
            )
        }))
    }

    /// Every intact event of a stored log, damaged or not, with the regions
    /// it could not use named as gaps (`cat --salvage`); `None` when the
    /// session does not exist. Never writes. Unlike [`Backend::load`] it does
    /// not stop at corruption: events after a damaged region are returned
    /// too, in seq order. The default serves [`Backend::load`]'s kept events,
    /// with its cut (if any) as the one gap.
    fn salvage(&self, id: &str) -> Result<Option<Salvage>> {
        Ok(self.load(id)?.map(Salvage::of_stored))
    }

    /// Checks what the store holds beyond its logs, where the format allows
    /// a deeper check than reading every log (`verify --deep`): SQLite's
    /// `PRAGMA integrity_check` of the database's pages and indexes. The
    /// problems found; none when there are none, or nothing more to check
    /// (the native WAL and the JSONL roots check every record's or frame's
    /// checksum on every read already).
    fn deep_check(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// The files this store's repairs quarantined (every session), sorted.
    fn quarantined(&self) -> Result<Vec<std::path::PathBuf>> {
        Ok(Vec::new())
    }

    /// Entries where session logs live that are not regular files (a FIFO,
    /// a directory, a symlink named like a log), with what each is. Listings
    /// skip them without opening them.
    fn foreign_entries(&self) -> Result<Vec<(std::path::PathBuf, &'static str)>> {
        Ok(Vec::new())
    }

    /// The kept events from `from_seq` on, as stored (no closers, no repair).
    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>>;

    /// [`Backend::read_from`] with the session's policy where the backend
    /// knows it without reading the log ([`Backend::policy`]): what a
    /// seeking read needs to decide whether upstream's read-time migrations
    /// apply. The default asks for the policy, then reads; the WAL reads
    /// both from one map.
    fn read_suffix(&self, id: &str, from_seq: u64) -> Result<Option<(Option<Policy>, Vec<Event>)>> {
        let policy = self.policy(id)?;
        Ok(self.read_from(id, from_seq)?.map(|events| (policy, events)))
    }

    /// Like [`Backend::read_from`], but before any read-time normalization:
    /// the events exactly as the log stores them (`cat --raw`). Only the
    /// JSONL backend normalizes (upstream's legacy read migrations).
    fn read_raw(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        self.read_from(id, from_seq)
    }

    /// The header as this backend will store it, or the refusal of one it
    /// cannot store exactly. Called when a session is registered, before
    /// anything reaches disk, so that a harness hears of a refusal at
    /// `create`, and a live session shows the header a reader will find.
    fn admit_header(&self, header: SessionHeader) -> Result<SessionHeader> {
        Ok(header)
    }

    /// Refuses a batch holding an event this backend could write but not
    /// read back as it was given. Called after the turn contract accepts the
    /// batch and before any of it is written. Every backend refuses an event
    /// over the shared size limits ([`crate::limits::check_batch`]); one
    /// that overrides this checks them too.
    fn admit_batch(&self, batch: &[Event]) -> Result<()> {
        crate::limits::check_batch(batch).map_err(crate::error::Error::Event)
    }

    /// Whether the session's policy is stored with it (given at
    /// [`Backend::create`]) and reported by its scans. A backend that keeps
    /// none (the JSONL roots: upstream's format has no place for one)
    /// reports the policy it reads by, and a [`crate::Store`] appends to
    /// such a session under its own policy (`StoreOptions::policy`).
    fn keeps_policy(&self) -> bool {
        true
    }

    /// Materializes a new session with its first batch, atomically, and
    /// returns its writer. Fails with `AlreadyExists` when it exists.
    fn create(
        &self,
        header: &SessionHeader,
        policy: Policy,
        batch: &[Event],
        placements: &[Placement],
    ) -> Result<Box<dyn LogWriter>>;

    /// Takes the writer lock of a stored session; `None` when it does not
    /// exist, `Locked` (`Leased` in a store shared by hosts) when another
    /// writer holds it.
    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>>;

    /// [`Backend::open`], taking the session even from a live writer where
    /// the store can (a lease in a store shared by hosts: that writer is
    /// refused from its next batch). A file store's lock is the kernel's,
    /// held by a live process and released when it dies, so there is
    /// nothing to steal: the default is [`Backend::open`].
    fn open_stealing(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        self.open(id)
    }

    /// Who holds each of `ids` as a writer now (`None`: no one, or a
    /// session that does not exist). Never takes or waits for a lock.
    fn holders(&self, ids: &[String]) -> Result<Vec<Option<Holder>>> {
        ids.iter().map(|id| self.holder(id)).collect()
    }

    /// Who holds `id` as a writer now ([`Backend::holders`] of one).
    fn holder(&self, id: &str) -> Result<Option<Holder>> {
        let _ = id;
        Ok(None)
    }

    /// Deletes a stored session if `check` agrees, deciding from the
    /// session as it is under its writer lock: takes the lock (`Locked`
    /// when a writer holds it), reads the session's summary, shows it to
    /// `check`, and deletes only if `check` returns true. So a caller that
    /// chose the session from an earlier listing (`turnwal prune`) can
    /// refuse to delete one that was written since: nothing acknowledged
    /// after the summary was read can be deleted with it, because no
    /// append gets past the lock until the session is gone.
    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<Deletion>;

    /// Deletes a stored session (taking its writer lock first); `false` when
    /// it does not exist.
    fn delete(&self, id: &str) -> Result<bool> {
        Ok(matches!(
            self.delete_if(id, &mut |_| true)?,
            Deletion::Deleted(_)
        ))
    }

    /// The stored records of `id` as this backend keeps them, its packed
    /// chunk runs as they are stored ([`StoredLog`]): `Some` from a backend
    /// that keeps runs packed (the WAL's run records and units, the row
    /// stores' packed rows), read without expanding them; `None` (the
    /// default) when it keeps none of its own, and
    /// [`crate::Store::stored_records`] reads them from the view.
    fn stored_records(&self, id: &str) -> Option<Result<Option<Box<dyn StoredLog>>>> {
        let _ = id;
        None
    }

    /// Compacts a stored session that no writer holds: takes its writer
    /// lock and seals every closed turn ([`LogWriter::compact`]), and
    /// nothing else: an open final turn stays open as stored, and a log
    /// that needs a cut is refused (naming `recover`) with nothing written. `None` when the backend
    /// has nothing to compact or the session does not exist. The default
    /// does nothing and returns `None` (SQLite, JSONL, memory); the native
    /// WAL rewrites the log into format version 2.
    fn compact(&self, id: &str) -> Result<Option<Compaction>> {
        let _ = id;
        Ok(None)
    }
}

/// What [`Backend::delete_if`] found and did.
#[derive(Debug, Clone)]
pub enum Deletion {
    /// Deleted; the session as it was read under its writer lock.
    Deleted(SessionSummary),
    /// Kept because the check refused; the summary it was shown.
    Kept(SessionSummary),
    /// No such session.
    NotFound,
}

/// A session's stored events as the upstream harness's `loadStored` hands
/// them over: records that are one event each, or a packed run of chunk
/// deltas as it is stored (upstream's storage rows), with the revision of
/// what was read and what recovery would cut. Read-only: no lock, no
/// repair, no closers.
pub trait StoredLog: Send {
    /// What the log says of itself beside its records.
    fn head(&self) -> &StoredHead;
    /// The records, in seq order (each call walks them from the start).
    fn records(&self) -> Box<dyn Iterator<Item = crate::upstream::chunks::Record<'_>> + '_>;

    /// The session header.
    fn header(&self) -> &SessionHeader {
        &self.head().header
    }
    /// The revision token ([`Backend::revision`]) of what was read.
    fn revision(&self) -> &str {
        &self.head().revision
    }
    /// The state of the stored log.
    fn state(&self) -> crate::scan::LogState {
        self.head().state
    }
    /// What recovery would cut, if anything.
    fn cut(&self) -> Option<&crate::scan::Cut> {
        self.head().cut.as_ref()
    }
    /// How many events the records hold (the stored events kept).
    fn stored(&self) -> usize {
        self.head().stored
    }
    /// The closers an open final turn would get (written nowhere; not
    /// among the records).
    fn closers(&self) -> &[Event] {
        &self.head().closers
    }
}

/// What a [`StoredLog`] says of itself beside its records: the same for
/// every store, whatever its records are.
#[derive(Debug, Clone)]
pub struct StoredHead {
    /// The session header.
    pub header: SessionHeader,
    /// The revision token ([`Backend::revision`]) of what was read.
    pub revision: String,
    /// The state of the stored log.
    pub state: crate::scan::LogState,
    /// What recovery would cut, if anything.
    pub cut: Option<crate::scan::Cut>,
    /// The closers an open final turn would get (written nowhere; not
    /// among the records).
    pub closers: Vec<Event>,
    /// How many events the records hold.
    pub stored: usize,
}

impl StoredHead {
    /// The head of a log `scan` classified, whose records hold `stored`
    /// events, read at `revision`.
    pub(crate) fn of(scan: Scan, revision: String, stored: usize) -> StoredHead {
        StoredHead {
            state: scan.state(),
            cut: scan.cut,
            closers: scan.closers,
            header: scan.header,
            revision,
            stored,
        }
    }
}

/// The exclusive writer of one session.
pub trait LogWriter: Send {
    /// Classifies the stored log (under the lock).
    fn scan(&mut self) -> Result<Scan>;

    /// Reads the kept events from `from_seq` on.
    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>>;

    /// Commits a repair found by [`LogWriter::scan`]: cuts `scan.cut`, appends
    /// `scan.closers`, makes it durable. Crash-safe and idempotent: a crash
    /// at any point leaves a log whose next scan gives the same repair.
    ///
    /// The caller may have emptied `scan.closers` (the scan otherwise as
    /// found): that is a cut alone, which leaves an open final turn open for
    /// a writer that continues it ([`crate::Store::commit_repair`] with no
    /// closers, as the upstream harness's live adoption does).
    ///
    /// Before the cut is made durable, the bytes (or rows) it removes are
    /// written and fsynced to a quarantine file (see [`crate::quarantine`]);
    /// its path is returned (`None` when nothing was cut).
    fn repair(&mut self, scan: &Scan) -> Result<Option<std::path::PathBuf>>;

    /// Classifies the stored log (under the lock) from all of it, as
    /// `verify` does: what `load` and `recover` decide from, so that no
    /// entry point decides from less evidence than another. [`LogWriter::scan`]
    /// may read only the log's end (the WAL's tail probe); the default is it.
    fn scan_full(&mut self) -> Result<Scan> {
        self.scan()
    }

    /// Classifies the stored log (under the lock) for an explicit salvage
    /// repair (`recover --salvage`): like [`LogWriter::scan`], except that
    /// where the log is corrupt it does not refuse but cuts from the first
    /// damaged byte (or row) on ([`crate::scan::CutReason::Damaged`]), keeping the
    /// longest valid prefix. The default is [`LogWriter::scan`].
    fn salvage_scan(&mut self) -> Result<Scan> {
        self.scan()
    }

    /// Seals every closed turn of the log, rewriting it whole and
    /// atomically (the native WAL's format version 2, docs/FORMAT.md
    /// "Sealing and compaction"; a version-1 log becomes version 2), after
    /// making every accepted event durable. Every event reads back byte for
    /// byte as before. `None` for a backend with nothing of the kind: the
    /// default, which does nothing (SQLite, JSONL, memory).
    fn compact(&mut self) -> Result<Option<Compaction>> {
        Ok(None)
    }

    /// Idle work: seals the log's closed turns if enough of them are left
    /// plain that a seal pays for itself (the native WAL: docs/FORMAT.md,
    /// "When a writer seals"), off the append path. `true` if it sealed.
    /// Everything acknowledged stays acknowledged whatever happens; a seal
    /// that fails after publishing poisons the writer like a failed append.
    /// The default does nothing (SQLite, JSONL, memory).
    fn seal_due(&mut self) -> Result<bool> {
        Ok(false)
    }

    /// Appends a checked batch (one placement per event). On error nothing
    /// of the batch is acknowledged and the stored log is rolled back to its
    /// last durable length; events accepted earlier but not yet durable are
    /// kept in memory and rewritten by the next append or sync.
    /// Returns how many events are durable.
    fn append(&mut self, batch: &[Event], placements: &[Placement], sync: SyncMode) -> Result<u64>;

    /// Makes every accepted event durable; returns how many events are.
    fn sync(&mut self) -> Result<u64>;

    /// A clean close: makes every accepted event durable, then does what
    /// the backend does at a close (the native WAL seals a version-2 log's
    /// closed turns left plain). The default is [`LogWriter::sync`].
    fn close(&mut self) -> Result<()> {
        self.sync().map(drop)
    }

    /// How many events are known durable.
    fn durable_events(&self) -> u64;

    /// Deletes the session while holding its lock.
    fn delete(self: Box<Self>) -> Result<()>;
}
