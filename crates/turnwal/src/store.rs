//! [`Store`]: the backend-neutral API a harness calls.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sync::Table;

use crate::backend::memory::MemoryBackend;
use crate::backend::wal::WalBackend;
use crate::backend::{Backend, LogWriter, SyncMode};
use crate::contract::{Policy, Tracker};
use crate::error::{Error, Result};
use crate::event::{Event, EventKind, MAX_SAFE_INTEGER, RawJson};
use crate::header::SessionHeader;
use crate::scan::{Cut, LogState, Scan, SessionSummary};

/// How a [`Store`] writes and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreOptions {
    /// When appends become durable. Default: [`SyncMode::Turn`].
    pub sync: SyncMode,
    /// The policy new sessions are created with. Default: [`Policy::Strict`].
    pub policy: Policy,
    /// Refuse (at append and at load) event types outside the upstream
    /// vocabulary unless they carry `ignorable: true`. Default: off, since
    /// plugin events are legitimate in a native store.
    pub require_known_types: bool,
}

/// What an append achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The seq the next event must carry.
    pub next_seq: u64,
    /// How many events are durable (acknowledged): seqs `0..durable`.
    pub durable: u64,
}

/// A session's events as a caller sees them.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// The header.
    pub header: SessionHeader,
    /// The events: the stored ones, then (in an inspect view of a crashed
    /// log) the synthetic closers.
    pub events: Vec<Event>,
    /// How many of `events` are stored; the rest are closers not yet written.
    pub stored: u64,
    /// The state of the stored log when it was read.
    pub state: LogState,
    /// What recovery cuts (or, after `load`, cut).
    pub cut: Option<Cut>,
    /// Whether this store holds the session open with a live, unfinished turn.
    pub live: bool,
}

/// What `recover` found and did.
#[derive(Debug, Clone)]
pub struct RecoveryReport {
    /// The state before recovery.
    pub state: LogState,
    /// Events kept.
    pub kept: u64,
    /// What was (or would be) cut.
    pub cut: Option<Cut>,
    /// The closers that were (or would be) appended.
    pub closers: Vec<Event>,
    /// Whether the repair was written (false for a dry run or a clean log).
    pub committed: bool,
    /// Where the cut bytes (or rows) were kept before they were cut.
    pub quarantine: Option<std::path::PathBuf>,
}

/// The scan a session was opened with, and the quarantine file its repair
/// wrote.
type Opened = (Scan, Option<std::path::PathBuf>);

/// How much of a stored log an operation reads before it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// The end of the log (the WAL's tail probe): appends, which only
    /// continue the log and refuse any damage the probe meets.
    Tail,
    /// All of it, as `verify` reads it: `load`, `recover`, `commit_repair`.
    Full,
    /// All of it, cutting from the first damage instead of refusing.
    Salvage,
}

/// What a caller read of a stored log, to commit its repair against
/// ([`Store::commit_repair`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairBasis {
    /// How many events were stored (and kept).
    pub stored: u64,
    /// Where the cut started, if the log had a tail to cut.
    pub cut_offset: Option<u64>,
}

impl RepairBasis {
    /// The basis of an [`Store::inspect`] view.
    pub fn of(view: &SessionView) -> RepairBasis {
        RepairBasis {
            stored: view.stored,
            cut_offset: view.cut.as_ref().map(|c| c.offset),
        }
    }
}

/// A durable store of agent sessions.
///
/// ```
/// use turnwal::{Event, SessionHeader, Store};
/// let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(dir.path()).unwrap();
/// store.create(SessionHeader::new("s1", 1_700_000_000_000).with_cwd("/work")).unwrap();
/// let receipt = store
///     .append(
///         "s1",
///         &[
///             Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
///             Event::new("user/message", 1, 2, r#"{"id":"u1","text":"hi"}"#).unwrap(),
///             Event::new("turn/end", 2, 3, r#"{"turn":1,"reason":{"kind":"completed"}}"#).unwrap(),
///         ],
///     )
///     .unwrap();
/// assert_eq!(receipt.durable, 3); // the turn/end was fsynced
/// drop(store);
///
/// let store = Store::open(dir.path()).unwrap();
/// let view = store.load("s1").unwrap();
/// assert_eq!(view.events.len(), 3);
/// assert_eq!(view.events[1].data().get(), r#"{"id":"u1","text":"hi"}"#);
/// ```
pub struct Store {
    backend: Arc<dyn Backend>,
    options: StoreOptions,
    slots: Table<HashMap<String, Arc<Mutex<Slot>>>>,
    /// Sessions whose next open here takes them even from a live writer
    /// ([`Store::steal_lease`]).
    steal: Table<std::collections::HashSet<String>>,
    /// Writers taken by [`Store::hold`] and not used yet: the session's
    /// next open here is this writer.
    held: Table<HashMap<String, Box<dyn LogWriter>>>,
    /// The sessions this store has written, by when it last did
    /// ([`Store::touch`]): past [`IDLE_WRITERS`], the least recently
    /// written idle ones are let go.
    recent: Table<(u64, HashMap<String, u64>)>,
}

/// How many sessions a store keeps open for writing once their turns are
/// closed: the least recently written beyond these are let go (synced,
/// their files and locks released) and reopened on demand, a reopen
/// costing a tail scan (~0.2 ms on a WAL store). A session with a turn
/// open is never let go: its writer is live. So a harness that writes
/// thousands of sessions holds the descriptors of a few dozen.
pub const IDLE_WRITERS: usize = 64;

enum Slot {
    /// Not held by this store: on disk or absent.
    Cold,
    /// Created here, not yet appended to (nothing on disk).
    Pending {
        header: SessionHeader,
        policy: Policy,
    },
    /// Open for writing here.
    Live(Live),
}

struct Live {
    header: SessionHeader,
    writer: Box<dyn LogWriter>,
    tracker: Tracker,
}

impl Store {
    /// Opens (creating if needed) a native WAL store in directory `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with_options(path, StoreOptions::default())
    }

    /// Opens a native WAL store with options.
    pub fn open_with_options(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        let backend = WalBackend::open(path.as_ref())?;
        Ok(Store::with_backend(Arc::new(backend), options))
    }

    /// Opens (creating if needed) a SQLite store: every session in the one
    /// database file `path`, in the upstream harness's schema 17
    /// (docs/SQLITE.md). A database that is not a session database is
    /// refused before anything in it changes. The published harness's older
    /// schema-14 store opens read-only ([`crate::backend::sqlite::v14`]).
    ///
    /// ```
    /// use turnwal::backend::sqlite::SqliteOptions;
    /// use turnwal::{Event, SessionHeader, Store, StoreOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("sessions.db");
    /// let store = Store::open_sqlite(&path, SqliteOptions::default(), StoreOptions::default()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// assert_eq!(store.list().unwrap()[0].events, 1);
    /// ```
    #[cfg(feature = "sqlite")]
    pub fn open_sqlite(
        path: impl AsRef<Path>,
        sqlite: crate::backend::sqlite::SqliteOptions,
        options: StoreOptions,
    ) -> Result<Store> {
        let backend = crate::backend::sqlite::open_any(path.as_ref(), sqlite)?;
        Ok(Store::with_backend(backend, options))
    }

    /// A store in the PostgreSQL database at `url` (`postgres://…`,
    /// `postgresql://…` or key=value pairs), its schema created by turnwal
    /// when the database holds none (docs/POSTGRES.md).
    ///
    /// ```no_run
    /// use turnwal::{Store, StoreOptions};
    /// let store = Store::open_postgres("postgres://app@db.internal/turnwal", StoreOptions::default())?;
    /// println!("{} sessions", store.list()?.len());
    /// # Ok::<(), turnwal::Error>(())
    /// ```
    ///
    /// Writers hold leases of the length `TURNWAL_LEASE` names (30 s when
    /// unset); [`Store::open_postgres_with`] takes options instead.
    #[cfg(feature = "postgres")]
    pub fn open_postgres(url: &str, options: StoreOptions) -> Result<Store> {
        let backend = crate::backend::postgres::PgBackend::open(url)?;
        Ok(Store::with_backend(Arc::new(backend), options))
    }

    /// [`Store::open_postgres`] with the given PostgreSQL options (the
    /// lease length; no environment read).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use turnwal::backend::postgres::PgOptions;
    /// use turnwal::{Store, StoreOptions};
    /// let pg = PgOptions::default().with_lease(Duration::from_secs(10))?;
    /// let store = Store::open_postgres_with("postgres://app@db/turnwal", StoreOptions::default(), pg)?;
    /// # Ok::<(), turnwal::Error>(())
    /// ```
    #[cfg(feature = "postgres")]
    pub fn open_postgres_with(
        url: &str,
        options: StoreOptions,
        pg: crate::backend::postgres::PgOptions,
    ) -> Result<Store> {
        let backend = crate::backend::postgres::PgBackend::open_with_options(url, pg)?;
        Ok(Store::with_backend(Arc::new(backend), options))
    }

    /// A store in memory (the reference backend).
    pub fn in_memory() -> Store {
        Store::with_backend(Arc::new(MemoryBackend::new()), StoreOptions::default())
    }

    /// A store over any backend.
    pub fn with_backend(backend: Arc<dyn Backend>, options: StoreOptions) -> Store {
        Store {
            backend,
            options,
            slots: Table::new(HashMap::new()),
            steal: Table::new(std::collections::HashSet::new()),
            held: Table::new(HashMap::new()),
            recent: Table::new((0, HashMap::new())),
        }
    }

    /// Marks `id` as just written; when more than [`IDLE_WRITERS`]
    /// sessions are, lets go of the least recently written ones whose
    /// turns are closed and that no call is using.
    fn touch(&self, id: &str) {
        let mut recent = self.recent.lock();
        recent.0 += 1;
        let now = recent.0;
        recent.1.insert(id.to_owned(), now);
        if recent.1.len() <= IDLE_WRITERS {
            return;
        }
        let mut oldest: Vec<(u64, String)> = recent
            .1
            .iter()
            .filter(|(other, _)| other.as_str() != id)
            .map(|(other, &at)| (at, other.clone()))
            .collect();
        oldest.sort_unstable();
        for (_, other) in oldest {
            if recent.1.len() <= IDLE_WRITERS {
                break;
            }
            let slot = self.slots.lock().get(&other).cloned();
            let Some(slot) = slot else {
                recent.1.remove(&other);
                continue;
            };
            // Never waits: a session another call is using stays.
            let Ok(mut guard) = slot.try_lock() else {
                continue;
            };
            match &mut *guard {
                Slot::Live(live) if live.tracker.in_turn() => continue,
                Slot::Live(live) => {
                    // Synced, then dropped: nothing is sealed or rewritten
                    // (that is a close's work), and a failed sync keeps
                    // the writer, as a call would find it.
                    if live.writer.sync().is_err() {
                        continue;
                    }
                    *guard = Slot::Cold;
                }
                Slot::Pending { .. } => continue,
                Slot::Cold => {
                    // A writer held for a load that was never written
                    // through: its lock is let go too (the next append
                    // takes it again, or is refused if another writer got
                    // it meanwhile).
                    self.held.lock().remove(&other);
                }
            }
            recent.1.remove(&other);
        }
    }

    /// The options in force.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Opens the writer of `id` ([`Backend::open`]), or takes it from a
    /// live writer when [`Store::steal_lease`] asked for that.
    fn open_writer(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        if let Some(writer) = self.held.lock().remove(id) {
            return Ok(Some(writer));
        }
        let steal = self.steal.lock().contains(id);
        if !steal {
            return self.backend.open(id);
        }
        let opened = self.backend.open_stealing(id)?;
        self.steal.lock().remove(id);
        Ok(opened)
    }

    /// Makes this store's next open of session `id` (its next append,
    /// load, recover or repair) take it even while another writer holds a
    /// live lease on it, in a store that keeps leases (PostgreSQL): that
    /// writer is refused from its next batch ([`Error::Superseded`]) and
    /// nothing it acknowledged is lost. For when the holder is known to be
    /// gone or stuck (`turnwal recover --steal`). A file store's lock
    /// belongs to a live process and cannot be taken: there this changes
    /// nothing.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// store.steal_lease("s"); // nothing to steal in memory: no change
    /// assert_eq!(store.inspect("s").unwrap().events.len(), 1);
    /// ```
    pub fn steal_lease(&self, id: &str) {
        self.steal.lock().insert(id.to_owned());
    }

    /// Takes the writer lock (or lease) of stored session `id` now and
    /// keeps it, changing nothing: no scan, no repair. The session's next
    /// open here (its next append, repair or load) uses it. For a harness
    /// that loads a session to write it: a session held live by another
    /// process or host is refused here (`Locked`, or `Leased` naming the
    /// holder and its lease), at load, instead of at the first append.
    /// Released by [`Store::close`] like a session open for writing.
    ///
    /// ```
    /// use turnwal::{Error, Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let first = Store::open(dir.path()).unwrap();
    /// first.create(SessionHeader::new("s", 1)).unwrap();
    /// first.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let second = Store::open(dir.path()).unwrap();
    /// assert!(matches!(second.hold("s"), Err(Error::Locked { .. })));
    /// first.close("s").unwrap();
    /// second.hold("s").unwrap();
    /// assert!(matches!(first.hold("s"), Err(Error::Locked { .. })));
    /// ```
    pub fn hold(&self, id: &str) -> Result<()> {
        let slot = self.slot(id);
        let guard = Store::lock(&slot, id)?;
        match &*guard {
            Slot::Live(_) => return Ok(()),
            Slot::Pending { .. } => return Err(Error::NotFound { id: id.to_owned() }),
            Slot::Cold => {}
        }
        if self.held.lock().contains_key(id) {
            return Ok(());
        }
        let writer = self
            .open_writer(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
        self.held.lock().insert(id.to_owned(), writer);
        drop(guard);
        self.touch(id);
        Ok(())
    }

    /// Whether this store writes `id` now: open for appends, created and
    /// not yet appended to, or held ([`Store::hold`]).
    pub(crate) fn writes_here(&self, id: &str) -> bool {
        let slot = self.slot(id);
        // Asked, not recovered: a poisoned slot is a writer in an unknown
        // state, so it counts as writing.
        let live = slot.lock().map_or(true, |s| !matches!(&*s, Slot::Cold));
        live || self.is_held(id)
    }

    /// Whether [`Store::hold`] holds a writer of `id` not used yet.
    fn is_held(&self, id: &str) -> bool {
        self.held.lock().contains_key(id)
    }

    /// Who holds each of `ids` as a writer now, in this process or any
    /// other (a PostgreSQL lease: on any host), as `turnwal ls` shows a
    /// live session; `None` for one no writer holds (or that does not
    /// exist). Asked, never taken: a writer opening a session meanwhile is
    /// never refused because of it.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let other = Store::open(dir.path()).unwrap();
    /// let held = other.holders(&["s".to_owned()]).unwrap();
    /// assert_eq!(held[0].as_ref().unwrap().pid, Some(std::process::id()));
    /// store.close("s").unwrap();
    /// assert_eq!(other.holders(&["s".to_owned()]).unwrap(), [None]);
    /// ```
    pub fn holders(&self, ids: &[String]) -> Result<Vec<Option<crate::backend::Holder>>> {
        self.backend.holders(ids)
    }

    fn slot(&self, id: &str) -> Arc<Mutex<Slot>> {
        let mut slots = self.slots.lock();
        slots
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(Slot::Cold)))
            .clone()
    }

    /// Session `id`'s slot, locked. A slot poisoned by a panic while it was
    /// held is refused once, as `Poisoned`: its writer's state is unknown,
    /// so the writer is let go (what it acknowledged is on disk) and the
    /// next operation opens the session from disk again, as after a crash.
    fn lock<'a>(slot: &'a Mutex<Slot>, id: &str) -> Result<MutexGuard<'a, Slot>> {
        match slot.lock() {
            Ok(guard) => Ok(guard),
            Err(poisoned) => {
                drop(Store::unpoison(slot, poisoned));
                Err(Error::Poisoned {
                    id: id.to_owned(),
                    cause: "an earlier operation on this session panicked while it held the \
                            session; its writer was let go, and the next operation opens the \
                            session from disk"
                        .to_owned(),
                })
            }
        }
    }

    /// [`Store::lock`] that recovers a poisoned slot without refusing: its
    /// live writer is let go (the slot becomes cold) and the poison cleared.
    fn lock_recovering(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
        match slot.lock() {
            Ok(guard) => guard,
            Err(poisoned) => Store::unpoison(slot, poisoned),
        }
    }

    /// A poisoned slot's guard, its live writer let go and the poison
    /// cleared (still held: the caller releases it).
    fn unpoison<'a>(
        slot: &'a Mutex<Slot>,
        poisoned: std::sync::PoisonError<MutexGuard<'a, Slot>>,
    ) -> MutexGuard<'a, Slot> {
        let mut guard = poisoned.into_inner();
        if matches!(*guard, Slot::Live(_)) {
            *guard = Slot::Cold;
        }
        slot.clear_poison();
        guard
    }

    /// Registers a new session. Nothing reaches disk until the first append
    /// (lazy materialization), and until then the session is not listed.
    /// The store's policy applies.
    pub fn create(&self, header: SessionHeader) -> Result<()> {
        self.create_with_policy(header, self.options.policy)
    }

    /// Registers a new session with a policy of its own.
    ///
    /// A [`Policy::Permissive`] session's header may carry another session
    /// format version, stored as given (as upstream's backends store it):
    /// reading the session then refuses it as [`Error::Unsupported`], with
    /// upstream's text naming the side to upgrade.
    pub fn create_with_policy(&self, header: SessionHeader, policy: Policy) -> Result<()> {
        if policy == Policy::Permissive {
            header.validate_fields()?;
            header.validate_cwd()?;
        } else {
            header.validate()?;
        }
        let header = self.backend.admit_header(header)?;
        let slot = self.slot(&header.id);
        let mut guard = Store::lock(&slot, &header.id)?;
        match &*guard {
            Slot::Pending { .. } => {
                return Err(Error::AlreadyExists {
                    id: header.id,
                    on_disk: false,
                });
            }
            Slot::Live(_) => {
                return Err(Error::AlreadyExists {
                    id: header.id,
                    on_disk: true,
                });
            }
            Slot::Cold => {}
        }
        if self.backend.exists(&header.id)? {
            return Err(Error::AlreadyExists {
                id: header.id,
                on_disk: true,
            });
        }
        *guard = Slot::Pending { header, policy };
        Ok(())
    }

    /// Appends a batch. The whole batch is checked against the turn contract
    /// first; a violating batch is rejected and nothing of it is written. The
    /// first event must carry the stored next seq. Appending to a session on
    /// disk that a crash left open commits its repair first.
    ///
    /// ```
    /// use turnwal::{Error, Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// let start = Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap();
    /// store.append("s", &[start.clone()]).unwrap();
    /// // Re-sending a stored seq is refused with the seq the store expects.
    /// match store.append("s", &[start]) {
    ///     Err(Error::SeqMismatch { expected: 1, got: 0, .. }) => {}
    ///     other => panic!("{other:?}"),
    /// }
    /// // A batch that breaks the turn contract is rejected whole.
    /// let chunk = Event::new("assistant/chunk", 1, 2, r#"{"turn":1,"step":1}"#).unwrap();
    /// let Err(Error::Contract(v)) = store.append("s", &[chunk]) else { panic!() };
    /// assert_eq!((v.seq, v.rule.code()), (1, "outside-step"));
    /// ```
    pub fn append(&self, id: &str, events: &[Event]) -> Result<Receipt> {
        let appended = self.append_here(id, events);
        self.touch(id);
        appended
    }

    fn append_here(&self, id: &str, events: &[Event]) -> Result<Receipt> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        if events.is_empty() {
            return match &*guard {
                Slot::Live(live) => Ok(live.receipt()),
                Slot::Pending { .. } => Ok(Receipt {
                    next_seq: 0,
                    durable: 0,
                }),
                Slot::Cold => {
                    // A no-op: report what the next append would need,
                    // without opening (and repairing) the session.
                    let scan = self
                        .backend
                        .scan(id)?
                        .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
                    Ok(Receipt {
                        next_seq: scan.stored_len() + scan.closers.len() as u64,
                        durable: scan.stored_len(),
                    })
                }
            };
        }
        if let Slot::Pending { header, policy } = &*guard {
            let mut tracker =
                Tracker::new(*policy).require_known_types(self.options.require_known_types);
            check_start(id, &tracker, events)?;
            let placements = tracker.accept_batch(events)?;
            self.backend.admit_batch(events)?;
            let writer = self.backend.create(header, *policy, events, &placements)?;
            let live = Live {
                header: header.clone(),
                writer,
                tracker,
            };
            let receipt = live.receipt();
            *guard = Slot::Live(live);
            return Ok(receipt);
        }
        let live = self.live(id, &mut guard, Reading::Tail)?.0;
        live.append(id, events, self.options.sync, &*self.backend)
    }

    /// Opens `id` for appending in this store, as its first append would
    /// (taking the writer lock and committing any crash repair), and returns
    /// where appends continue: `next_seq` is the seq the next event must
    /// carry, and every stored event (`0..durable`) is durable. A session
    /// created here but not yet appended to gives `next_seq` 0.
    ///
    /// A producer that leaves seqs to the engine calls this before its first
    /// append to learn the seq to start at, without reading the log.
    pub fn resume(&self, id: &str) -> Result<Receipt> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        if matches!(&*guard, Slot::Pending { .. }) {
            return Ok(Receipt {
                next_seq: 0,
                durable: 0,
            });
        }
        Ok(self.live(id, &mut guard, Reading::Tail)?.0.receipt())
    }

    /// Makes every accepted event of `id` durable; returns how many are.
    /// A session on disk that this store does not hold is opened first (as
    /// its next append would), so what it reports durable was fsynced here.
    pub fn flush(&self, id: &str) -> Result<u64> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        if let Slot::Pending { .. } = &*guard {
            return Ok(0);
        }
        self.live(id, &mut guard, Reading::Tail)?.0.writer.sync()
    }

    /// Idle work for session `id`, for a harness to call when nothing waits
    /// on the store (after a batch is acknowledged, between prompts): a
    /// session this store holds open seals its closed turns if enough of
    /// them are left plain that a seal pays for itself (the native WAL:
    /// docs/FORMAT.md, "When a writer seals"), keeping a live log close to
    /// its sealed size without sealing in the append path. `true` if it
    /// sealed. A session not held open here is left alone (`false`).
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// // One open turn, nothing closed: nothing to seal.
    /// assert!(!store.seal_due("s").unwrap());
    /// ```
    pub fn seal_due(&self, id: &str) -> Result<bool> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        match &mut *guard {
            Slot::Live(live) => live.writer.seal_due(),
            Slot::Cold | Slot::Pending { .. } => Ok(false),
        }
    }

    /// Seals every closed turn of `id` (the native WAL's format version 2:
    /// docs/FORMAT.md, "Sealing and compaction"), rewriting its log whole
    /// and atomically under the writer lock; a version-1 log becomes
    /// version 2. Every event reads back byte for byte as before. `None`
    /// for backends with nothing to compact, and for a session not yet
    /// materialized.
    ///
    /// Compaction seals and does nothing else. A session on disk that this
    /// store does not hold is compacted as it is stored, under its writer
    /// lock, and not kept open: an open final turn stays open (a pipeline
    /// streaming it with `append --continue` goes on), and a log that needs
    /// a cut (torn bytes, debris, an interrupted repair) is refused,
    /// naming `recover`, with nothing written. A session this store holds
    /// open is compacted by its writer, whose open already committed any
    /// repair.
    pub fn compact(&self, id: &str) -> Result<Option<crate::backend::Compaction>> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        match &mut *guard {
            Slot::Pending { .. } => Ok(None),
            Slot::Live(live) => live.writer.compact(),
            Slot::Cold if self.is_held(id) => {
                let mut writer = self.open_writer(id)?.expect("held above");
                let done = writer.compact();
                self.held.lock().insert(id.to_owned(), writer);
                done
            }
            Slot::Cold => match self.backend.compact(id)? {
                Some(done) => Ok(Some(done)),
                None if self.backend.exists(id)? => Ok(None),
                None => Err(Error::NotFound { id: id.to_owned() }),
            },
        }
    }

    /// Closes every session this store holds open ([`Store::close`]: a WAL
    /// writer seals the closed turns of a version-2 log at a clean close),
    /// trying each; the first failure, if any.
    pub fn close_all(&self) -> Result<()> {
        self.held.lock().clear();
        let slots: Vec<Arc<Mutex<Slot>>> = self.slots.lock().values().cloned().collect();
        let mut first = Ok(());
        for slot in slots {
            let mut guard = Store::lock_recovering(&slot);
            if let Slot::Live(live) = &mut *guard {
                let closed = live.writer.close();
                *guard = Slot::Cold;
                if first.is_ok() {
                    first = closed;
                }
            }
        }
        first
    }

    /// Flushes and releases a session this store holds open.
    pub fn close(&self, id: &str) -> Result<()> {
        self.held.lock().remove(id);
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        if let Slot::Live(live) = &mut *guard {
            live.writer.close()?;
            *guard = Slot::Cold;
        }
        Ok(())
    }

    /// The balanced logical view, written nowhere: the stored events plus,
    /// for a log a crash left open, the synthetic closers in memory only.
    /// A session this store is writing is returned as it is (its open turn
    /// is live, not interrupted).
    ///
    /// ```
    /// use turnwal::{Event, LogState, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// drop(store); // crash with the turn open
    ///
    /// let store = Store::open(dir.path()).unwrap();
    /// let before = store.revision("s").unwrap();
    /// let view = store.inspect("s").unwrap();
    /// assert_eq!((view.state, view.stored, view.events.len()), (LogState::OpenTurn, 1, 2));
    /// assert_eq!(store.revision("s").unwrap(), before, "inspect writes nothing");
    /// ```
    pub fn inspect(&self, id: &str) -> Result<SessionView> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        match &mut *guard {
            Slot::Live(live) => {
                // What a cold read gives: a live Permissive session's
                // legacy events migrated too.
                let mut view = live.view()?;
                view.events = self.migrate(live.tracker.policy(), id, view.events)?;
                return Ok(view);
            }
            Slot::Pending { .. } => return Err(Error::NotFound { id: id.to_owned() }),
            Slot::Cold => {}
        }
        drop(guard);
        Ok(view_of(self.read_stored(id)?))
    }

    fn read_stored(&self, id: &str) -> Result<crate::backend::Stored> {
        let mut stored = self
            .backend
            .load(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
        stored.events = self.migrate(stored.scan.policy, id, stored.events)?;
        self.check_readable(&stored.scan, &stored.events)?;
        Ok(stored)
    }

    /// Upstream's read-time migrations and refusals
    /// ([`crate::upstream::normalize`]) over a whole logical log of a
    /// [`Policy::Permissive`] session, where the backend does not apply them
    /// itself: what upstream's reader makes of what its backends stored.
    /// Sessions of the other policies were checked when appended and are
    /// read as stored.
    pub(crate) fn migrate(
        &self,
        policy: Policy,
        id: &str,
        events: Vec<Event>,
    ) -> Result<Vec<Event>> {
        if policy != Policy::Permissive || self.backend.normalizes_reads() {
            return Ok(events);
        }
        crate::upstream::normalize::normalize_owned(events, id).map_err(self.refusal_of(id))
    }

    /// Upstream's read-time migrations over a suffix read from `from_seq`
    /// by a seek, as its coordinator runs them over a seek-capable backend:
    /// the suffix alone is migrated (a retired form or malformed legacy
    /// event is refused within it), unless one of its events needs the log
    /// before it ([`needs_legacy_prefix`]: a steering message, a
    /// pre-identity message whose id may come from an earlier event); then
    /// the whole log (`whole`) is migrated and the suffix taken from it. So
    /// a suffix read of a session in the current shapes costs what it
    /// returns.
    ///
    /// [`needs_legacy_prefix`]: crate::upstream::normalize::needs_legacy_prefix
    fn migrate_suffix(
        &self,
        policy: Option<Policy>,
        id: &str,
        events: Vec<Event>,
        from_seq: u64,
        whole: impl FnOnce() -> Result<Vec<Event>>,
    ) -> Result<Vec<Event>> {
        let Some(policy) = policy else {
            return Ok(events);
        };
        if policy == Policy::Permissive
            && !self.backend.normalizes_reads()
            && events
                .iter()
                .any(crate::upstream::normalize::needs_legacy_prefix)
        {
            return Ok(suffix(self.migrate(policy, id, whole()?)?, from_seq));
        }
        self.migrate(policy, id, events)
    }

    /// How a refusal of upstream's reader is reported for session `id`.
    pub(crate) fn refusal_of(&self, id: &str) -> crate::view::Refuse {
        let location = self.backend.location();
        let id = id.to_owned();
        Box::new(move |e| {
            Error::from(crate::error::Corruption {
                path: location.clone().into(),
                offset: e.seq,
                unit: crate::error::Unit::Event,
                seq: Some(e.seq),
                reason: format!("stored session {id:?} failed validation: {}", e.reason),
            })
        })
    }

    /// The balanced logical view read in place, written nowhere: like
    /// [`Store::inspect`], but the events borrow from a memory map of the
    /// stored log instead of being copied, so a session of a million events
    /// costs an index of offsets.
    pub fn view(&self, id: &str) -> Result<crate::view::LogView> {
        let slot = self.slot(id);
        let guard = Store::lock(&slot, id)?;
        let live_open = match &*guard {
            Slot::Pending { .. } => return Err(Error::NotFound { id: id.to_owned() }),
            Slot::Live(live) => live.tracker.in_turn(),
            Slot::Cold => false,
        };
        drop(guard);
        let view = self
            .backend
            .view(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
        self.check_version_of(view.header())?;
        Ok(if live_open {
            view.without_closers()
        } else {
            view
        })
    }

    /// Whether `id`'s inspect view is its stored events as they are (plus
    /// closers), so a reader may take them straight from the backend, in
    /// place or from the log's end: a cold session whose reads nothing
    /// rewrites or vets (not [`Policy::Permissive`], whose reads run
    /// upstream's migrations; not a store that normalizes reads or
    /// requires known types).
    fn read_as_stored(&self, id: &str) -> Result<bool> {
        let cold = matches!(&*Store::lock(&self.slot(id), id)?, Slot::Cold);
        Ok(cold
            && !self.backend.normalizes_reads()
            && !self.options.require_known_types
            && matches!(
                self.backend.policy(id)?,
                Some(Policy::Strict | Policy::Lenient)
            ))
    }

    /// The balanced logical view of `id` read one event at a time: the
    /// events of [`Store::inspect`] (stored ones, then the closers a
    /// crashed log would get), read through the backend's cursor where
    /// nothing is rewritten at read time, so a whole-session read holds what
    /// one chunk run or sealed unit holds, whatever the session's size. A
    /// session whose reads are normalized (a [`Policy::Permissive`]
    /// session's migrations, a JSONL root's checks) is inspected whole and
    /// lent from memory.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let mut reader = store.read("s").unwrap();
    /// let mut read = Vec::new();
    /// while let Some(event) = reader.next_event().unwrap() {
    ///     read.push(event.to_event());
    /// }
    /// assert_eq!(read, store.inspect("s").unwrap().events);
    /// ```
    pub fn read(&self, id: &str) -> Result<crate::view::LogReader> {
        let cold = matches!(&*Store::lock(&self.slot(id), id)?, Slot::Cold);
        if cold {
            let mut reader = self
                .backend
                .read(id)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
            self.check_version_of(reader.header())?;
            let policy = match reader.scan() {
                Some(scan) => Some(scan.policy),
                None => self.backend.policy(id)?,
            };
            if !self.backend.normalizes_reads() && policy == Some(Policy::Permissive) {
                let refuse = self.refusal_of(id);
                reader = reader
                    .map_cursor(|cursor| Box::new(crate::view::Migrating::new(cursor, id, refuse)));
            }
            if self.options.require_known_types {
                let refuse = self.unknown_type_of(id);
                reader = reader
                    .map_cursor(|cursor| Box::new(crate::view::KnownTypes::new(cursor, refuse)));
            }
            return Ok(reader);
        }
        let mut view = self.inspect(id)?;
        let closers = view.events.split_off(view.stored as usize);
        Ok(crate::view::LogReader::new(
            view.header,
            view.state,
            view.stored,
            Box::new(crate::view::Held::new(view.events)),
            closers,
        ))
    }

    /// The stored records of `id` as upstream's `loadStored` hands them
    /// over ([`crate::backend::StoredLog`]): from a backend that keeps
    /// chunk runs packed, its records with the runs as stored (never
    /// expanded); from any other, the events of its view. Read-only (no
    /// lock, no repair, no closers); the revision is read before and after
    /// and must match, so it names exactly what was read. `None` when the
    /// session does not exist.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let log = store.stored_records("s").unwrap().unwrap();
    /// assert_eq!((log.stored(), log.records().count()), (1, 1));
    /// ```
    pub fn stored_records(&self, id: &str) -> Result<Option<Box<dyn crate::backend::StoredLog>>> {
        if let Some(records) = self.backend.stored_records(id) {
            return records;
        }
        for _ in 0..16 {
            let Some(before) = self.backend.revision(id)? else {
                return Ok(None);
            };
            let Some(view) = self.backend.view(id)? else {
                return Ok(None);
            };
            // Only a torn log needs the cut's position.
            let cut = match view.state() {
                LogState::Torn => self.backend.scan(id)?.and_then(|scan| scan.cut),
                _ => None,
            };
            if self.backend.revision(id)?.as_deref() != Some(before.as_str()) {
                continue; // written while read: read again
            }
            let closers = view
                .iter()
                .skip(view.stored())
                .map(|e| e.to_event())
                .collect();
            return Ok(Some(Box::new(ViewRecords {
                head: crate::backend::StoredHead {
                    header: view.header().clone(),
                    revision: before,
                    state: view.state(),
                    cut,
                    closers,
                    stored: view.stored(),
                },
                view,
            })));
        }
        Err(Error::StaleRepair {
            id: id.to_owned(),
            detail: "the stored log kept changing while it was read (16 tries)".into(),
        })
    }

    /// [`Store::inspect`] as a [`crate::view::LogView`]: the same events,
    /// read in place ([`Store::view`]) where nothing has to be rewritten at
    /// read time, so a reader that walks them (`turnwal cat`) holds an index
    /// rather than the log. A session whose reads are normalized (a
    /// [`Policy::Permissive`] session's migrations, a JSONL root's checks)
    /// is read as `inspect` reads it, into memory.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let view = store.inspect_view("s").unwrap();
    /// let inspected = store.inspect("s").unwrap();
    /// assert_eq!(view.iter().map(|e| e.to_event()).collect::<Vec<_>>(), inspected.events);
    /// ```
    pub fn inspect_view(&self, id: &str) -> Result<crate::view::LogView> {
        if self.read_as_stored(id)? {
            return self.view(id);
        }
        let mut view = self.inspect(id)?;
        let closers = view.events.split_off(view.stored as usize);
        Ok(crate::view::LogView::owned(
            view.header,
            view.state,
            view.events,
            closers,
        ))
    }

    /// The events of [`Store::inspect`] with seq >= `from_seq` (stored ones,
    /// then the closers a crashed log would get), read from the log's end
    /// where the backend can seek (the WAL walks back from its end as
    /// [`Store::read_from`] does), so `turnwal cat --from` costs what it
    /// prints. Sessions whose reads are normalized are inspected whole.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[
    ///     Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap(),
    ///     Event::new("user/message", 1, 6, r#"{"id":"u"}"#).unwrap(),
    /// ]).unwrap();
    /// drop(store); // a crash with the turn open
    /// let store = Store::open(dir.path()).unwrap();
    /// let from = store.inspect_from("s", 1).unwrap();
    /// let whole = store.inspect("s").unwrap().events;
    /// assert_eq!(from, whole[1..]); // the stored seq 1 and the closer
    /// ```
    pub fn inspect_from(&self, id: &str, from_seq: u64) -> Result<Vec<Event>> {
        if self.read_as_stored(id)? {
            let header = self
                .backend
                .header(id)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
            self.check_version_of(&header)?;
            let (mut events, closers) = self
                .backend
                .inspect_from(id, from_seq)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
            events.extend(closers.into_iter().filter(|e| e.seq() >= from_seq));
            return Ok(events);
        }
        let mut view = self.inspect(id)?;
        view.events.retain(|e| e.seq() >= from_seq);
        Ok(view.events)
    }

    /// Loads a session: commits its repair once (cut torn bytes, append the
    /// closers, fsync) and returns the balanced log. The session stays open
    /// for appends in this store.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// drop(store); // crash with the turn open
    ///
    /// let store = Store::open(dir.path()).unwrap();
    /// let view = store.load("s").unwrap(); // the closer is now stored
    /// assert_eq!(view.events[1].to_json(), r#"{"type":"turn/end","seq":1,"time":5,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#);
    /// // Appends continue after it.
    /// store.append("s", &[Event::new("turn/start", 2, 6, r#"{"turn":2}"#).unwrap()]).unwrap();
    /// ```
    pub fn load(&self, id: &str) -> Result<SessionView> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        let (live, scan) = self.live(id, &mut guard, Reading::Full)?;
        if live.tracker.in_turn() {
            return Err(Error::OpenTurn {
                id: id.to_owned(),
                reason: "cannot load session while its live turn is open".into(),
            });
        }
        live.writer.sync()?;
        let events = self.migrate(live.tracker.policy(), id, live.writer.read_from(0)?)?;
        let (state, cut) = scan.map_or((LogState::Clean, None), |(s, _)| (s.state(), s.cut));
        Ok(SessionView {
            header: live.header.clone(),
            stored: events.len() as u64,
            events,
            state,
            cut,
            live: false,
        })
    }

    /// The stored events from `from_seq` on, as they are: no closers, no
    /// repair. At or past the end gives an empty list.
    ///
    /// A seek: the WAL finds the suffix from the log's end, SQLite and
    /// PostgreSQL by their seq index. A [`Policy::Permissive`] session's
    /// read-time migrations run over the suffix alone, as upstream's
    /// coordinator runs them over a seek-capable backend (a retired form or
    /// malformed legacy event before `from_seq` is not looked at); only a
    /// suffix holding an event whose migration may need an earlier one
    /// ([`needs_legacy_prefix`]) is migrated from the whole log. A JSONL
    /// root is sequential, as upstream's is: it reads the whole file.
    ///
    /// [`needs_legacy_prefix`]: crate::upstream::normalize::needs_legacy_prefix
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[
    ///     Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap(),
    ///     Event::new("user/message", 1, 6, r#"{"id":"u"}"#).unwrap(),
    /// ]).unwrap();
    /// let suffix = store.read_from("s", 1).unwrap();
    /// assert_eq!(suffix.len(), 1); // no closers: the turn is served as stored
    /// assert!(store.read_from("s", 2).unwrap().is_empty());
    /// ```
    pub fn read_from(&self, id: &str, from_seq: u64) -> Result<Vec<Event>> {
        check_from_seq(from_seq)?;
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        match &mut *guard {
            Slot::Pending { .. } => Err(Error::NotFound { id: id.to_owned() }),
            Slot::Live(live) => {
                let policy = live.tracker.policy();
                let events = live.writer.read_from(from_seq)?;
                let writer = &mut live.writer;
                self.migrate_suffix(Some(policy), id, events, from_seq, || writer.read_from(0))
            }
            Slot::Cold => {
                let not_found = || Error::NotFound { id: id.to_owned() };
                let events = if self.backend.normalizes_reads() {
                    self.backend
                        .read_from(id, from_seq)?
                        .ok_or_else(not_found)?
                } else {
                    let (policy, events) = self
                        .backend
                        .read_suffix(id, from_seq)?
                        .ok_or_else(not_found)?;
                    self.migrate_suffix(policy, id, events, from_seq, || {
                        self.backend.read_from(id, 0)?.ok_or_else(not_found)
                    })?
                };
                // A live session was vetted when it was opened; a cold one
                // is vetted within the suffix served, as a seeking reader can.
                self.check_known_types(id, &events)?;
                Ok(events)
            }
        }
    }

    /// The last `n` stored events (fewer if the log holds fewer), as
    /// [`Store::read_from`] serves them, read from the log's end: where the
    /// backend learns a session's length from its tail (the WAL's last
    /// record, SQLite's session row), only the suffix is read, so the cost
    /// is that of the `n` events, not of the log.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[
    ///     Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap(),
    ///     Event::new("user/message", 1, 6, r#"{"id":"u"}"#).unwrap(),
    /// ]).unwrap();
    /// let last = store.read_last("s", 1).unwrap();
    /// assert_eq!((last.len(), last[0].seq()), (1, 1));
    /// assert_eq!(store.read_last("s", 10).unwrap().len(), 2);
    /// ```
    pub fn read_last(&self, id: &str, n: u64) -> Result<Vec<Event>> {
        let last = |events: Vec<Event>| {
            let skip = events
                .len()
                .saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
            events.into_iter().skip(skip).collect::<Vec<_>>()
        };
        let cold = matches!(&*Store::lock(&self.slot(id), id)?, Slot::Cold);
        if cold && let Some(end) = self.backend.end_hint(id)? {
            // A hint: a log whose tail a full read judges otherwise (debris,
            // a cut) can serve fewer events from there, and is read whole.
            let from = end.saturating_sub(n);
            let events = self.read_from(id, from)?;
            if from == 0 || events.len() as u64 >= n {
                return Ok(last(events));
            }
        }
        Ok(last(self.read_from(id, 0)?))
    }

    /// The first `n` stored events as stored (no read-time normalization),
    /// read from the start of the log: where the WAL is concerned, the
    /// records up to the `n`th, whatever the log's length.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[
    ///     Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap(),
    ///     Event::new("user/message", 1, 6, r#"{"id":"u"}"#).unwrap(),
    /// ]).unwrap();
    /// assert_eq!(store.read_first("s", 1).unwrap()[0].event_type(), "turn/start");
    /// ```
    pub fn read_first(&self, id: &str, n: usize) -> Result<Vec<Event>> {
        if let Slot::Pending { .. } = &*Store::lock(&self.slot(id), id)? {
            return Err(Error::NotFound { id: id.to_owned() });
        }
        self.backend
            .read_first(id, n)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// One session's entry of [`Store::list`] (header, length, size, last
    /// activity, state), read as `list` reads it: the WAL reads the log's
    /// header and last record, SQLite the session's row.
    pub fn summary(&self, id: &str) -> Result<SessionSummary> {
        self.backend
            .summary(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// The session's header as stored, read without its events where the
    /// backend allows it (the WAL's file header, SQLite's session row); with
    /// [`Store::read_from`], a suffix read that never touches the prefix.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// assert!(store.header("s").is_err(), "not materialized yet");
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// assert_eq!(store.header("s").unwrap().id, "s");
    /// ```
    pub fn header(&self, id: &str) -> Result<SessionHeader> {
        let slot = self.slot(id);
        match &*Store::lock(&slot, id)? {
            Slot::Pending { .. } => return Err(Error::NotFound { id: id.to_owned() }),
            Slot::Live(live) => return Ok(live.header.clone()),
            Slot::Cold => {}
        }
        self.backend
            .header(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// The stored events from `from_seq` on exactly as the log holds them:
    /// like [`Store::read_from`], but before read-time normalization (the
    /// JSONL backend's legacy migrations), from the stored log even when
    /// this store writes the session.
    pub fn read_raw(&self, id: &str, from_seq: u64) -> Result<Vec<Event>> {
        check_from_seq(from_seq)?;
        if let Slot::Pending { .. } = &*Store::lock(&self.slot(id), id)? {
            return Err(Error::NotFound { id: id.to_owned() });
        }
        self.backend
            .read_raw(id, from_seq)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// Session `id` as the upstream JSONL backend's log would hold its
    /// stored events after one append of them: the header line, then their
    /// records, runs of chunk deltas packed
    /// ([`crate::backend::jsonl::session_text`]). The stored events only
    /// ([`Store::read_raw`]): an open final turn as stored, no closers, a
    /// torn tail left out. This is the text the dsh app's session export
    /// holds (turnwal-dsh's `readRaw`) and `turnwal export --jsonl` prints.
    /// A session holding an event whose type is a packed-row tag has no
    /// such text: refused as a JSONL store refuses to write it.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// assert_eq!(String::from_utf8(store.jsonl_text("s").unwrap()).unwrap(), concat!(
    ///     r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#, "\n",
    ///     r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#, "\n"));
    /// ```
    #[cfg(feature = "jsonl")]
    pub fn jsonl_text(&self, id: &str) -> Result<Vec<u8>> {
        use crate::backend::jsonl::{records::row_tag_refusal, session_text};
        let header = self.header(id)?;
        let events = self.read_raw(id, 0)?;
        if let Some(refusal) = row_tag_refusal(&events) {
            return Err(Error::Event(refusal));
        }
        Ok(session_text(&header, &events, true))
    }

    /// Whether session `id` has anything on disk.
    pub fn exists(&self, id: &str) -> Result<bool> {
        self.backend.exists(id)
    }

    /// The stored log of `id` classified as `verify` and the next writer
    /// find it (what recovery would cut, the closers it would append, the
    /// policy the log records or its reader applies), without writing
    /// anything. [`Store::append_policy`] says what a writer appends under.
    ///
    /// ```
    /// use turnwal::{Event, LogState, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// drop(store); // a crash with the turn open
    /// let scan = Store::open(dir.path()).unwrap().scan("s").unwrap();
    /// assert_eq!((scan.state(), scan.closers.len()), (LogState::OpenTurn, 1));
    /// ```
    pub fn scan(&self, id: &str) -> Result<Scan> {
        self.backend
            .scan(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// The policy the next writer of a log `scan` classified appends
    /// under: the one the log records, or (a JSONL root records none) the
    /// store's own.
    pub fn append_policy(&self, scan: &Scan) -> Policy {
        if self.backend.keeps_policy() {
            scan.policy
        } else {
            self.options.policy
        }
    }

    /// The policy session `id`'s events are read under: the one its log
    /// records, or (a JSONL root records none) the one its reader applies.
    pub fn policy(&self, id: &str) -> Result<Policy> {
        match self.backend.policy(id)? {
            Some(policy) => Ok(policy),
            None => Ok(self
                .backend
                .scan(id)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?
                .policy),
        }
    }

    /// A token that changes after every append and repair of the stored log
    /// and never after a read. `None` for a session with nothing on disk.
    pub fn revision(&self, id: &str) -> Result<Option<String>> {
        self.backend.revision(id)
    }

    /// Every materialized session (created-but-never-appended ones are not
    /// listed), from headers and log tails.
    ///
    /// ```
    /// use turnwal::{Event, LogState, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("lazy", 1)).unwrap(); // never appended: not listed
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let list = store.list().unwrap();
    /// assert_eq!(list.len(), 1);
    /// assert_eq!((list[0].id.as_str(), list[0].events, list[0].state), ("s", 1, LogState::OpenTurn));
    /// ```
    pub fn list(&self) -> Result<Vec<SessionSummary>> {
        self.backend.list()
    }

    /// Copies events `0..=at` (default: the whole balanced view) of `id` into
    /// a new session `child`, followed by `session/end-seed`. The child's
    /// header takes `cwd` from the parent, `parentSession = id` and
    /// `seedLength` = the number of copied events. Refused when `at` is
    /// inside a turn.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1).with_cwd("/w")).unwrap();
    /// store.append("s", &[
    ///     Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap(),
    ///     Event::new("turn/end", 1, 6, r#"{"turn":1,"reason":{"kind":"completed"}}"#).unwrap(),
    /// ]).unwrap();
    /// let child = store.fork("s", None, "s2").unwrap();
    /// assert_eq!((child.parent_session.as_deref(), child.seed_length), (Some("s"), Some(2)));
    /// let events = store.load("s2").unwrap().events;
    /// assert_eq!(events[2].event_type(), "session/end-seed");
    /// assert!(store.fork("s", Some(0), "s3").is_err(), "seq 0 is inside turn 1");
    /// ```
    pub fn fork(&self, id: &str, at: Option<u64>, child: &str) -> Result<SessionHeader> {
        if child.is_empty() {
            return Err(Error::InvalidArgument(
                "fork child id must be non-empty".into(),
            ));
        }
        let taken = match &*Store::lock(&self.slot(child), child)? {
            Slot::Pending { .. } => Some(false),
            Slot::Live(_) => Some(true),
            Slot::Cold => self.backend.exists(child)?.then_some(true),
        };
        if let Some(on_disk) = taken {
            return Err(Error::AlreadyExists {
                id: child.to_owned(),
                on_disk,
            });
        }
        let view = self.inspect(id)?;
        let last = view.events.len().checked_sub(1).ok_or_else(|| {
            Error::InvalidArgument(format!("session {id:?} has no events to fork"))
        })? as u64;
        let at = at.unwrap_or(last);
        if at > last {
            return Err(Error::InvalidArgument(format!(
                "fork boundary seq {at} is past the end of session {id:?} (last seq {last})"
            )));
        }
        let policy = self
            .backend
            .scan(id)?
            .map_or(self.options.policy, |s| self.with_store_policy(s).policy);
        let mut prefix: Vec<Event> = view.events[..=at as usize].to_vec();
        let mut tracker = Tracker::new(policy);
        tracker.accept_batch(&prefix)?;
        if let Some(turn) = tracker.open_turn() {
            return Err(Error::OpenTurn {
                id: id.to_owned(),
                reason: fork_refusal(&view.events, policy, at, turn),
            });
        }
        let mut header = SessionHeader::new(child, now_ms());
        header.cwd = view.header.cwd.clone();
        header.parent_session = Some(id.to_owned());
        header.seed_length = Some(prefix.len() as u64);
        if prefix.last().map(Event::kind) != Some(EventKind::EndSeed) {
            let seed_end = Event::from_parts(
                "session/end-seed",
                at + 1,
                now_ms() as i64,
                RawJson::trusted("{}"),
            )?;
            prefix.push(seed_end);
        }
        self.create_with_policy(header.clone(), policy)?;
        self.append(child, &prefix)?;
        Ok(header)
    }

    /// Deletes a session and its files. A created-but-never-appended session
    /// is simply forgotten.
    pub fn delete(&self, id: &str) -> Result<()> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        match std::mem::replace(&mut *guard, Slot::Cold) {
            Slot::Pending { .. } => Ok(()),
            Slot::Live(live) => live.writer.delete(),
            Slot::Cold if self.is_held(id) => self.open_writer(id)?.expect("held above").delete(),
            Slot::Cold => {
                if self.backend.delete(id)? {
                    Ok(())
                } else {
                    Err(Error::NotFound { id: id.to_owned() })
                }
            }
        }
    }

    /// Deletes a session only if `check`, shown the session as it is under
    /// its writer lock, agrees ([`Backend::delete_if`]): what a caller that
    /// chose the session from an earlier listing uses, so that a session
    /// written since is kept (`turnwal prune`). A session this store holds
    /// open, or created and has not written, is refused as in use.
    ///
    /// ```
    /// use turnwal::{Deletion, Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 0)).unwrap();
    /// store.append("s", &[
    ///     Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap(),
    ///     Event::new("turn/end", 1, 2, r#"{"turn":1,"reason":{"kind":"completed"}}"#).unwrap(),
    /// ]).unwrap();
    /// store.close("s").unwrap();
    /// // Listed with 2 events: deleted only if it still has 2.
    /// let gone = store.delete_if("s", |now| now.events == 2).unwrap();
    /// assert!(matches!(gone, Deletion::Deleted(s) if s.events == 2));
    /// assert!(matches!(store.delete_if("s", |_| true).unwrap(), Deletion::NotFound));
    /// ```
    pub fn delete_if(
        &self,
        id: &str,
        mut check: impl FnMut(&SessionSummary) -> bool,
    ) -> Result<crate::backend::Deletion> {
        let slot = self.slot(id);
        // Held throughout: no writer of this store opens the session while
        // the backend decides.
        let guard = Store::lock(&slot, id)?;
        match &*guard {
            Slot::Cold => {
                // A writer held here and not used yet is let go: the
                // backend decides under the lock it takes itself.
                self.held.lock().remove(id);
                self.backend.delete_if(id, &mut check)
            }
            Slot::Pending { .. } | Slot::Live(_) => Err(Error::InvalidArgument(format!(
                "session {id:?} is open for writing in this store; close it before deleting it"
            ))),
        }
    }

    /// Recovers a session: with `dry_run`, reports what would be cut and
    /// appended without writing; otherwise commits it (as `load` does).
    pub fn recover(&self, id: &str, dry_run: bool) -> Result<RecoveryReport> {
        self.recover_with(id, dry_run, Reading::Full)
    }

    /// An explicit salvage repair of a corrupt session (`turnwal recover
    /// --salvage`): keeps the longest valid prefix, closes its open turn with
    /// the usual closers, and cuts everything from the first damaged byte
    /// (or row) on — acknowledged or not, which is why no automatic path
    /// does this — after keeping it in a quarantine file. On a log that is
    /// not corrupt it is [`Store::recover`]. With `dry_run`, reports what it
    /// would do and writes nothing.
    ///
    /// ```
    /// use turnwal::{CutReason, Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// let turn = |n: u64, at: u64| [
    ///     Event::new("turn/start", at, 5, &format!(r#"{{"turn":{n}}}"#)).unwrap(),
    ///     Event::new("turn/end", at + 1, 6, &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#)).unwrap(),
    /// ];
    /// store.append("s", &turn(1, 0)).unwrap();
    /// store.append("s", &turn(2, 2)).unwrap();
    /// drop(store);
    /// // A flipped bit in turn 2's turn/start, which turn 2's turn/end proves acknowledged.
    /// let log = dir.path().join("sessions/s.twal");
    /// let mut bytes = std::fs::read(&log).unwrap();
    /// let at = bytes.len() - 2 * 57 - 2 * 27 + 60;
    /// bytes[at] ^= 1;
    /// std::fs::write(&log, &bytes).unwrap();
    ///
    /// let store = Store::open(dir.path()).unwrap();
    /// assert!(store.load("s").is_err(), "corrupt: refused, nothing cut");
    /// let report = store.recover_salvage("s", false).unwrap();
    /// assert_eq!((report.kept, report.cut.unwrap().reason), (2, CutReason::Damaged));
    /// assert!(report.quarantine.unwrap().exists());
    /// assert_eq!(store.load("s").unwrap().events.len(), 2);
    /// ```
    pub fn recover_salvage(&self, id: &str, dry_run: bool) -> Result<RecoveryReport> {
        self.recover_with(id, dry_run, Reading::Salvage)
    }

    fn recover_with(&self, id: &str, dry_run: bool, reading: Reading) -> Result<RecoveryReport> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        let report =
            |scan: Scan, quarantine: Option<std::path::PathBuf>, committed: bool| RecoveryReport {
                state: scan.state(),
                kept: scan.stored_len(),
                committed: committed && scan.needs_repair(),
                cut: scan.cut,
                closers: scan.closers,
                quarantine,
            };
        if dry_run || matches!(&*guard, Slot::Pending { .. }) {
            drop(guard);
            let scan = match reading {
                Reading::Salvage => self.salvage_scan(id)?,
                _ => self
                    .backend
                    .scan(id)?
                    .ok_or_else(|| Error::NotFound { id: id.to_owned() })?,
            };
            self.check_version(&scan)?;
            return Ok(report(scan, None, false));
        }
        if reading == Reading::Salvage && matches!(&*guard, Slot::Cold) {
            let mut writer = self
                .open_writer(id)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
            let scan = writer.salvage_scan()?;
            self.check_version(&scan)?;
            let quarantine = if scan.needs_repair() {
                writer.repair(&scan)?
            } else {
                None
            };
            return Ok(report(scan, quarantine, true));
        }
        let (live, scan) = self.live(id, &mut guard, Reading::Full)?;
        match scan {
            Some((scan, quarantine)) => Ok(report(scan, quarantine, true)),
            None => Ok(RecoveryReport {
                state: LogState::Clean,
                kept: live.tracker.next_seq(),
                cut: None,
                closers: Vec::new(),
                committed: false,
                quarantine: None,
            }),
        }
    }

    /// The salvage classification of a stored log, read without the lock.
    fn salvage_scan(&self, id: &str) -> Result<Scan> {
        match self.backend.scan(id) {
            Err(Error::Corrupt(_)) => {}
            other => return other?.ok_or_else(|| Error::NotFound { id: id.to_owned() }),
        }
        // Only a writer computes the salvage cut; opening one takes the lock
        // but writes nothing until a repair.
        let mut writer = self
            .open_writer(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
        writer.salvage_scan()
    }

    /// Every intact event of a stored session, damaged or not, with the
    /// regions that could not be used named as gaps (`turnwal cat
    /// --salvage`). Never writes. Events after a damaged region are
    /// returned too; a log that loads gives its kept events and its cut (a
    /// torn tail) as the one gap.
    pub fn salvage(&self, id: &str) -> Result<crate::scan::Salvage> {
        if let Slot::Pending { .. } = &*Store::lock(&self.slot(id), id)? {
            return Err(Error::NotFound { id: id.to_owned() });
        }
        self.backend
            .salvage(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// The deeper check of the store's own structure, where its format allows
    /// one (`verify --deep`; see [`crate::backend::Backend::deep_check`]).
    pub fn deep_check(&self) -> Result<Vec<String>> {
        self.backend.deep_check()
    }

    /// The files this store's repairs quarantined, every session's, sorted.
    pub fn quarantined(&self) -> Result<Vec<std::path::PathBuf>> {
        self.backend.quarantined()
    }

    /// Entries named like session logs that are not regular files (a FIFO,
    /// a directory, a symlink), with what each is. [`Store::list`] skips
    /// them without opening them; `turnwal ls` and `verify` report them.
    pub fn foreign_entries(&self) -> Result<Vec<(std::path::PathBuf, &'static str)>> {
        self.backend.foreign_entries()
    }

    /// Opens `id` for appending **without repairing it**, for a harness that
    /// runs recovery itself: the upstream harness's coordinator decides when
    /// a crashed log is closed (with [`Store::commit_repair`]), and a live
    /// session that adopts a stored prefix continues its open turn. Appends
    /// continue right after the stored events; an open final turn stays open.
    /// A log with bytes or records to cut is refused with
    /// [`Error::StaleRepair`] (commit the cut first); a session this store
    /// already holds is left as it is. Returns where appends continue.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// drop(store); // the process ends with the turn open
    ///
    /// let store = Store::open(dir.path()).unwrap();
    /// assert_eq!(store.adopt("s").unwrap().next_seq, 1); // no closers written
    /// store.append("s", &[
    ///     Event::new("turn/end", 1, 6, r#"{"turn":1,"reason":{"kind":"completed"}}"#).unwrap(),
    /// ]).unwrap();
    /// assert_eq!(store.read_from("s", 0).unwrap().len(), 2);
    /// ```
    pub fn adopt(&self, id: &str) -> Result<Receipt> {
        let adopted = self.adopt_here(id);
        self.touch(id);
        adopted
    }

    fn adopt_here(&self, id: &str) -> Result<Receipt> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        match &*guard {
            Slot::Pending { .. } => {
                return Ok(Receipt {
                    next_seq: 0,
                    durable: 0,
                });
            }
            Slot::Live(live) => return Ok(live.receipt()),
            Slot::Cold => {}
        }
        let mut writer = self
            .open_writer(id)?
            .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
        let scan = self.with_store_policy(writer.scan()?);
        self.check_version(&scan)?;
        if let Some(cut) = &scan.cut {
            return Err(Error::StaleRepair {
                id: id.to_owned(),
                detail: format!(
                    "the stored log has a tail to cut ({} at byte {}, seq {}); commit its repair \
                     before appending",
                    cut.reason, cut.offset, cut.seq
                ),
            });
        }
        let tracker = self.as_is_tracker(&scan)?;
        let live = Live {
            header: scan.header.clone(),
            writer,
            tracker,
        };
        let receipt = live.receipt();
        *guard = Slot::Live(live);
        Ok(receipt)
    }

    /// Commits a repair decided from an earlier read of the stored log: cuts
    /// what recovery cuts and appends `closers`, in one crash-safe step, and
    /// holds the session open for appends. This is the upstream harness's
    /// `commitRepair`: its coordinator reads the log (the events and the
    /// [`Cut`] of [`Backend::load`](crate::backend::Backend::load)), computes
    /// the closers itself, then commits.
    ///
    /// - `basis` is what the caller read. A log that changed since (another
    ///   length, another cut) is refused with [`Error::StaleRepair`] and left
    ///   untouched.
    /// - `closers` must be exactly the closers recovery derives for that log
    ///   (compared as JSON values), or empty: a cut alone, which leaves an
    ///   open final turn open for a live session that continues it. Other
    ///   closers are refused with [`Error::InvalidArgument`]: only the derived
    ///   ones are redone identically if a crash interrupts the repair.
    ///
    /// ```
    /// use turnwal::store::RepairBasis;
    /// use turnwal::{Event, SessionHeader, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// drop(store); // crash with the turn open
    ///
    /// let store = Store::open(dir.path()).unwrap();
    /// let view = store.inspect("s").unwrap(); // stored events, then the closers
    /// let basis = RepairBasis::of(&view);
    /// let closers = &view.events[view.stored as usize..];
    /// assert_eq!(store.commit_repair("s", &basis, closers).unwrap().next_seq, 2);
    /// assert_eq!(store.read_from("s", 1).unwrap()[0].event_type(), "turn/end");
    /// // The same basis again is stale: the log has changed.
    /// assert!(store.commit_repair("s", &basis, closers).is_err());
    /// ```
    pub fn commit_repair(
        &self,
        id: &str,
        basis: &RepairBasis,
        closers: &[Event],
    ) -> Result<Receipt> {
        let slot = self.slot(id);
        let mut guard = Store::lock(&slot, id)?;
        let (header, mut writer) = match std::mem::replace(&mut *guard, Slot::Cold) {
            Slot::Pending { header, policy } => {
                *guard = Slot::Pending { header, policy };
                return Err(Error::NotFound { id: id.to_owned() });
            }
            Slot::Live(mut live) => {
                // Make everything accepted durable, so the scan below sees
                // the whole log this store wrote.
                if let Err(e) = live.writer.sync() {
                    *guard = Slot::Live(live);
                    return Err(e);
                }
                (Some(live.header), live.writer)
            }
            Slot::Cold => {
                let writer = self
                    .open_writer(id)?
                    .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
                (None, writer)
            }
        };
        let scan = self.with_store_policy(writer.scan_full()?);
        self.check_version(&scan)?;
        let cut_offset = scan.cut.as_ref().map(|c| c.offset);
        if scan.stored_len() != basis.stored || cut_offset != basis.cut_offset {
            return Err(Error::StaleRepair {
                id: id.to_owned(),
                detail: format!(
                    "the stored log changed since it was read (read: {} stored events, {}; now: \
                     {} stored events, {})",
                    basis.stored,
                    cut_text(basis.cut_offset),
                    scan.stored_len(),
                    cut_text(cut_offset)
                ),
            });
        }
        let mut repair = scan.clone();
        if closers.is_empty() {
            repair.closers.clear();
        } else if !same_events(closers, &scan.closers) {
            return Err(Error::InvalidArgument(format!(
                "session {id:?}: the closers given are not the ones recovery derives from the \
                 stored log (given: {}; derived: {})",
                events_text(closers),
                events_text(&scan.closers)
            )));
        }
        if repair.needs_repair() {
            writer.repair(&repair)?;
        }
        let tracker = if repair.closers.is_empty() {
            self.as_is_tracker(&scan)?
        } else {
            scan.resume_tracker()
                .require_known_types(self.options.require_known_types)
        };
        let live = Live {
            header: header.unwrap_or_else(|| scan.header.clone()),
            writer,
            tracker,
        };
        let receipt = live.receipt();
        *guard = Slot::Live(live);
        Ok(receipt)
    }

    /// A scan a writer of this store continues: for a backend that keeps no
    /// policy with its sessions (JSONL), appends follow this store's.
    fn with_store_policy(&self, mut scan: Scan) -> Scan {
        if !self.backend.keeps_policy() {
            scan.policy = self.options.policy;
        }
        scan
    }

    /// A tracker positioned after the stored events of `scan`, as they are:
    /// an open final turn stays open.
    fn as_is_tracker(&self, scan: &Scan) -> Result<Tracker> {
        let mut tracker = Tracker::resume(scan.policy, scan.committed, scan.committed_turn)
            .require_known_types(self.options.require_known_types);
        tracker.accept_batch(&scan.tail)?;
        Ok(tracker)
    }

    /// The live session behind `guard`, opening it from disk (and committing
    /// its repair) if this store does not hold it yet. Returns the scan it
    /// opened with, if it opened it now.
    ///
    /// `reading` says how much of the log opening reads: the end alone
    /// (an append, which only continues it) or all of it (`load` and
    /// `recover`, which decide exactly as `verify` does).
    fn live<'g>(
        &self,
        id: &str,
        guard: &'g mut MutexGuard<'_, Slot>,
        reading: Reading,
    ) -> Result<(&'g mut Live, Option<Opened>)> {
        let mut opened = None;
        if matches!(&**guard, Slot::Cold) {
            let mut writer = self
                .open_writer(id)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?;
            let scan = self.with_store_policy(match reading {
                Reading::Tail => writer.scan()?,
                Reading::Full | Reading::Salvage => writer.scan_full()?,
            });
            self.check_version(&scan)?;
            if self.options.require_known_types {
                let stored = writer.read_from(0)?;
                self.check_readable(&scan, &stored)?;
            }
            let quarantine = if scan.needs_repair() {
                writer.repair(&scan)?
            } else {
                None
            };
            let tracker = scan
                .resume_tracker()
                .require_known_types(self.options.require_known_types);
            **guard = Slot::Live(Live {
                header: scan.header.clone(),
                writer,
                tracker,
            });
            opened = Some((scan, quarantine));
        }
        match &mut **guard {
            Slot::Live(live) => Ok((live, opened)),
            Slot::Pending { .. } => Err(Error::NotFound { id: id.to_owned() }),
            Slot::Cold => unreachable!("opened above"),
        }
    }

    fn check_version(&self, scan: &Scan) -> Result<()> {
        self.check_version_of(&scan.header)
    }

    fn check_version_of(&self, header: &SessionHeader) -> Result<()> {
        header.check_version().map_err(|detail| Error::Unsupported {
            path: self.backend.location().into(),
            detail: detail.to_string(),
        })
    }

    /// Read-side checks: the header version, and (when the store requires
    /// known types) the vocabulary.
    fn check_readable(&self, scan: &Scan, events: &[Event]) -> Result<()> {
        self.check_version(scan)?;
        self.check_known_types(&scan.header.id, events)
    }

    /// When the store requires known types: no unknown type without
    /// `ignorable: true` among `events`.
    fn check_known_types(&self, id: &str, events: &[Event]) -> Result<()> {
        if self.options.require_known_types
            && let Some(e) = events
                .iter()
                .find(|e| !e.ignorable() && !crate::contract::is_known_type(e.event_type()))
        {
            return Err((self.unknown_type_of(id))(e.seq(), e.event_type()));
        }
        Ok(())
    }

    /// How an event of an unknown type is refused in session `id`.
    fn unknown_type_of(&self, id: &str) -> crate::view::Unknown {
        let location = self.backend.location();
        let id = id.to_owned();
        Box::new(move |seq, event_type| Error::Unsupported {
            path: location.clone().into(),
            detail: format!(
                "session {id:?}: event seq {seq} has type {event_type:?}, which is not a known \
                 session event type and is not marked ignorable"
            ),
        })
    }
}

impl Live {
    /// What this store has written: a live open turn is shown as it is,
    /// without closers (it is not interrupted).
    fn view(&mut self) -> Result<SessionView> {
        let events = self.writer.read_from(0)?;
        let open = self.tracker.in_turn();
        Ok(SessionView {
            header: self.header.clone(),
            stored: events.len() as u64,
            events,
            state: if open {
                LogState::OpenTurn
            } else {
                LogState::Clean
            },
            cut: None,
            live: open,
        })
    }

    fn receipt(&self) -> Receipt {
        Receipt {
            next_seq: self.tracker.next_seq(),
            durable: self.writer.durable_events(),
        }
    }

    fn append(
        &mut self,
        id: &str,
        events: &[Event],
        sync: SyncMode,
        backend: &dyn Backend,
    ) -> Result<Receipt> {
        check_start(id, &self.tracker, events)?;
        let mut tracker = self.tracker.clone();
        let placements = tracker.accept_batch(events)?;
        backend.admit_batch(events)?;
        let durable = self.writer.append(events, &placements, sync)?;
        self.tracker = tracker;
        Ok(Receipt {
            next_seq: self.tracker.next_seq(),
            durable,
        })
    }
}

fn check_start(id: &str, tracker: &Tracker, events: &[Event]) -> Result<()> {
    let first = events[0].seq();
    if first != tracker.next_seq() {
        return Err(Error::SeqMismatch {
            id: id.to_owned(),
            expected: tracker.next_seq(),
            got: first,
        });
    }
    Ok(())
}

/// The events from `from_seq` on of a whole log.
fn suffix(mut events: Vec<Event>, from_seq: u64) -> Vec<Event> {
    let start = usize::try_from(from_seq).map_or(events.len(), |n| n.min(events.len()));
    events.split_off(start)
}

/// Why seq `at` is no fork point, and which seqs are: those after which no
/// turn is open (a closing `turn/end`, or an event between turns).
fn fork_refusal(events: &[Event], policy: Policy, at: u64, turn: u64) -> String {
    let mut tracker = Tracker::new(policy);
    let mut points = Vec::new();
    let mut started = None;
    for event in events {
        let Ok(placement) = tracker.accept(event) else {
            break;
        };
        if event.kind() == EventKind::TurnStart && event.seq() <= at {
            started = Some(event.seq());
        }
        if !placement.in_turn {
            points.push(event.seq());
        }
    }
    let before = points.iter().rev().find(|&&p| p < at);
    let after = points.iter().find(|&&p| p > at);
    let nearest = match (before, after) {
        (Some(b), Some(a)) => format!("the nearest are {b} and {a}"),
        (Some(b), None) => format!("the nearest is {b}"),
        (None, Some(a)) => format!("the nearest is {a}"),
        (None, None) => "this session has none".to_owned(),
    };
    let since = started.map_or_else(String::new, |s| format!(", started at seq {s}"));
    format!(
        "fork boundary seq {at} is inside turn {turn}{since}; a fork ends at a seq after which no \
         turn is open (a turn's closing turn/end): {nearest} ({} in all)",
        points.len()
    )
}

/// [`Store::stored_records`] of a backend without packed records: the
/// events of its view, one record each.
struct ViewRecords {
    view: crate::view::LogView,
    head: crate::backend::StoredHead,
}

impl crate::backend::StoredLog for ViewRecords {
    fn head(&self) -> &crate::backend::StoredHead {
        &self.head
    }

    fn records(&self) -> Box<dyn Iterator<Item = crate::upstream::chunks::Record<'_>> + '_> {
        Box::new(
            self.view
                .iter()
                .take(self.head.stored)
                .map(crate::upstream::chunks::Record::Event),
        )
    }
}

fn view_of(stored: crate::backend::Stored) -> SessionView {
    let crate::backend::Stored { scan, mut events } = stored;
    let n = events.len() as u64;
    events.extend(scan.closers.iter().cloned());
    SessionView {
        header: scan.header.clone(),
        events,
        stored: n,
        state: scan.state(),
        cut: scan.cut,
        live: false,
    }
}

fn cut_text(offset: Option<u64>) -> String {
    match offset {
        Some(offset) => format!("a tail to cut from byte {offset}"),
        None => "nothing to cut".into(),
    }
}

/// Whether two event lists are equal as JSON values (key order and number
/// spelling aside).
fn same_events(a: &[Event], b: &[Event]) -> bool {
    let value = |e: &Event| serde_json::from_str::<serde_json::Value>(&e.to_json()).ok();
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let (x, y) = (value(x), value(y));
            x.is_some() && x == y
        })
}

fn events_text(events: &[Event]) -> String {
    let lines: Vec<String> = events.iter().map(Event::to_json).collect();
    format!("[{}]", lines.join(","))
}

pub use crate::event::now_ms;

/// Refuses a `from_seq` past JavaScript's safe integers, as every seq is.
pub(crate) fn check_from_seq(from_seq: u64) -> Result<()> {
    if from_seq > MAX_SAFE_INTEGER {
        return Err(Error::InvalidArgument(format!(
            "from_seq must be a non-negative safe integer (at most 2^53 - 1), got {from_seq}"
        )));
    }
    Ok(())
}
