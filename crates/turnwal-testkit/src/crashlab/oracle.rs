//! The one oracle every crash test and fuzz target checks against: [`check`]
//! for a WAL store on the simulated disk ([`check_on`] for a JSONL root
//! there), [`check_sqlite`] for an SQLite database a real crash left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::simdisk::{CrashMode, SimDisk};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::SqliteOptions;
use turnwal::backend::wal::WalBackend;
use turnwal::contract::interrupted_turn_closers;
use turnwal::error::Error;
use turnwal::event::{Event, EventKind};
use turnwal::header::SessionHeader;
use turnwal::scan::LogState;
use turnwal::store::{Store, StoreOptions};

/// What the workload handed to the engine and what the engine acknowledged,
/// per session.
#[derive(Debug, Clone, Default)]
pub struct Model {
    sessions: BTreeMap<String, Written>,
}

/// One session's history as the writer saw it.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Every event handed to `append`, in seq order (a retry re-sends the
    /// same events, so this is one sequence).
    pub sent: Vec<Event>,
    /// How many leading events the engine acknowledged: they survive a
    /// process crash.
    pub acked: u64,
    /// How many leading events are known fsynced: they survive a power loss.
    /// Equal to `acked` except under `SyncMode::Never`, which acknowledges
    /// on write.
    pub synced: u64,
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model::default()
    }

    /// Records that `events` were handed to `append` for `id` (whether or
    /// not it succeeded). Re-sent events must equal what was sent before.
    pub fn sent(&mut self, id: &str, events: &[Event]) {
        let written = self.sessions.entry(id.to_owned()).or_default();
        for event in events {
            let seq = event.seq() as usize;
            match written.sent.get(seq) {
                Some(before) => assert_eq!(before, event, "a retry must re-send the same event"),
                None => {
                    assert_eq!(seq, written.sent.len(), "events are sent in seq order");
                    written.sent.push(event.clone());
                }
            }
        }
    }

    /// Records an acknowledgement: events `0..durable` of `id` survive a
    /// process crash.
    pub fn acked(&mut self, id: &str, durable: u64) {
        let written = self.sessions.entry(id.to_owned()).or_default();
        written.acked = written.acked.max(durable);
    }

    /// Records that events `0..durable` of `id` were fsynced: they survive a
    /// power loss.
    pub fn synced(&mut self, id: &str, durable: u64) {
        let written = self.sessions.entry(id.to_owned()).or_default();
        written.synced = written.synced.max(durable);
        written.acked = written.acked.max(durable);
    }

    /// After a recovery, the stored log is the new truth: later events
    /// continue from it.
    pub fn recovered(&mut self, id: &str, events: Vec<Event>) {
        let acked = events.len() as u64;
        self.sessions.insert(
            id.to_owned(),
            Written {
                sent: events,
                acked,
                synced: acked,
            },
        );
    }

    /// The sessions and their histories.
    pub fn sessions(&self) -> &BTreeMap<String, Written> {
        &self.sessions
    }

    /// Forgets a session (it was deleted).
    pub fn forget(&mut self, id: &str) {
        self.sessions.remove(id);
    }
}

/// A WAL store over a simulated disk, the way every crash test opens one.
pub fn store_on(disk: &SimDisk, root: &Path, options: StoreOptions) -> Store {
    Target::Wal.store_on(disk, root, options)
}

/// The state directory of the JSONL stores the crash lab runs: a path on
/// the simulated disk, beside the store's root, never the real one.
pub const SIM_STATE_DIR: &str = "/turnwal-state";

/// Which kind of store a crash test runs on the simulated disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The native WAL, creating sessions in its default format (version
    /// 3: sealed turns in an archive beside the live file).
    Wal,
    /// The native WAL creating sessions in format version 2 (sealed units
    /// inside the log, by a rewrite), as earlier builds did: such logs are
    /// still appended to and sealed in their own version.
    WalV2,
    /// An upstream JSONL root, raw or zstd.
    Jsonl(Compression),
}

impl Target {
    /// Every kind of store the simulated disk runs.
    pub const ALL: [Target; 4] = [
        Target::Wal,
        Target::WalV2,
        Target::Jsonl(Compression::None),
        Target::Jsonl(Compression::Zstd),
    ];

    /// A store of this kind at `root` on `disk`. A JSONL store keeps its
    /// durability proofs in [`SIM_STATE_DIR`] on the same simulated disk,
    /// so every crash covers them too.
    pub fn store_on(self, disk: &SimDisk, root: &Path, options: StoreOptions) -> Store {
        let storage = Arc::new(disk.clone());
        let backend: Arc<dyn turnwal::backend::Backend> = match self {
            Target::Wal => Arc::new(
                WalBackend::with_storage(root, storage).expect("a simulated store always opens"),
            ),
            Target::WalV2 => Arc::new(
                WalBackend::with_storage(root, storage)
                    .expect("a simulated store always opens")
                    .creating_version(turnwal::backend::wal::format::FORMAT_V2),
            ),
            Target::Jsonl(compression) => Arc::new(
                JsonlBackend::with_storage(root, compression, storage)
                    .and_then(|b| b.with_state_dir(SIM_STATE_DIR))
                    .expect("a simulated store always opens"),
            ),
        };
        Store::with_backend(backend, options)
    }

    /// The header a crash test creates session `id` with (a JSONL session
    /// is placed by its cwd).
    pub fn header(self, id: &str) -> SessionHeader {
        let header = SessionHeader::new(id, 1);
        match self {
            Target::Wal | Target::WalV2 => header,
            Target::Jsonl(_) => header.with_cwd("/work/app"),
        }
    }

    /// The file that holds session `id`'s log.
    pub fn log_path(self, root: &Path, id: &str) -> PathBuf {
        match self {
            Target::Wal | Target::WalV2 => {
                WalBackend::with_storage(root, Arc::new(SimDisk::new(0)))
                    .expect("opens")
                    .log_path(id)
            }
            Target::Jsonl(compression) => {
                // Resolved as the backend resolves its root ("/store" is
                // `C:\store` on Windows).
                let root = std::path::absolute(root).expect("an absolute root");
                turnwal::backend::jsonl::layout::log_path(&root, Some("/work/app"), id, compression)
                    .expect("a valid id")
            }
        }
    }
}

/// What a check found, for the figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// Sessions checked.
    pub sessions: u64,
    /// Acknowledged events found intact.
    pub acked_events: u64,
    /// Sessions that needed closers.
    pub closed_turns: u64,
}

/// Recovers every session of `model` from `disk` (a disk after a crash of
/// the given mode) and checks the oracle:
///
/// 1. the recovered log is a prefix of what was sent, followed by closers
///    only when that prefix ends inside a turn;
/// 2. every acknowledged event is in that prefix, byte-identical (after a
///    power loss, every fsynced one: `SyncMode::Never` promises no more);
/// 3. the repaired log verifies clean;
/// 4. the repair was durable and recovering again gives identical bytes
///    (checked after a further power loss of everything unsynced);
/// 5. the next append continues the seq.
///
/// On success the model is updated to the recovered logs (and the next turn
/// appended), so a workload can continue. Returns a description of the first
/// violation.
pub fn check(
    disk: &SimDisk,
    root: &Path,
    model: &mut Model,
    mode: CrashMode,
) -> Result<Checked, String> {
    check_on(Target::Wal, disk, root, model, mode)
}

/// [`check`] for a store of any [`Target`] kind.
pub fn check_on(
    target: Target,
    disk: &SimDisk,
    root: &Path,
    model: &mut Model,
    mode: CrashMode,
) -> Result<Checked, String> {
    let store_on = |disk: &SimDisk, root: &Path, options| target.store_on(disk, root, options);
    let mut checked = Checked::default();
    let ids: Vec<String> = model.sessions.keys().cloned().collect();
    for id in ids {
        let written = model.sessions[&id].clone();
        let required = if mode == CrashMode::KeepAll {
            written.acked
        } else {
            written.synced
        };
        let store = store_on(disk, root, StoreOptions::default());
        let Some(view) = load_or_forget(&store, model, &id, required)? else {
            continue;
        };
        check_recovered(&store, &id, &view.events, &written, required, &mut checked)?;
        let path = target.log_path(root, &id);
        let bytes = disk
            .read(&path)
            .ok_or_else(|| format!("{id}: log file vanished"))?;
        drop(store);

        // The repair must be durable, and a second recovery a no-op.
        let again_disk = disk.crash(CrashMode::LoseUnsynced);
        let again = store_on(&again_disk, root, StoreOptions::default());
        let view2 = again
            .load(&id)
            .map_err(|e| format!("{id}: second recovery failed: {e}"))?;
        if view2.events != view.events {
            return Err(format!("{id}: a second recovery changed the events"));
        }
        if again_disk.read(&path).as_deref() != Some(&bytes[..]) {
            return Err(format!("{id}: a second recovery changed the bytes"));
        }

        // The next turn continues the seq.
        let next = next_turn(&view.events);
        again
            .append(&id, &next)
            .map_err(|e| format!("{id}: the next append failed: {e}"))?;
        let mut resumed = view.events.clone();
        resumed.extend(next);
        if again.load(&id).map_err(|e| e.to_string())?.events != resumed {
            return Err(format!("{id}: the resumed log does not read back"));
        }
        drop(again);
        disk.replace_with(&again_disk);
        model.recovered(&id, resumed);
    }
    Ok(checked)
}

/// Recovers `id` with `load`: `None` when it is absent and nothing of it
/// was acknowledged (it is dropped from the model), an error naming what
/// was acknowledged when recovery fails.
fn load_or_forget(
    store: &Store,
    model: &mut Model,
    id: &str,
    required: u64,
) -> Result<Option<turnwal::store::SessionView>, String> {
    match store.load(id) {
        Ok(view) => Ok(Some(view)),
        Err(Error::NotFound { .. }) if required == 0 => {
            model.forget(id);
            Ok(None)
        }
        Err(e) => Err(format!(
            "{id}: recovery failed with {required} acknowledged: {e}"
        )),
    }
}

/// Checks 1–3 of [`check`] on one session's recovered log: a prefix of what
/// was sent (at least the `required` acknowledged events, byte for byte)
/// followed by exactly the closers that prefix calls for, and `verify`
/// clean. Returns how many sent events were kept.
fn check_recovered(
    store: &Store,
    id: &str,
    events: &[Event],
    written: &Written,
    required: u64,
    checked: &mut Checked,
) -> Result<usize, String> {
    checked.sessions += 1;
    let kept = events
        .iter()
        .zip(&written.sent)
        .take_while(|(a, b)| a == b)
        .count();
    if (kept as u64) < required {
        return Err(format!(
            "{id}: {required} events acknowledged, only {kept} recovered intact (first difference at seq {kept}: got {:?})",
            events.get(kept)
        ));
    }
    checked.acked_events += required;
    let closers = interrupted_turn_closers(&written.sent[..kept]);
    if events[kept..] != closers[..] {
        return Err(format!(
            "{id}: after {kept} real events expected {} closers, got {:?}",
            closers.len(),
            &events[kept..]
        ));
    }
    if !closers.is_empty() {
        checked.closed_turns += 1;
    }
    let report = store
        .verify(id)
        .map_err(|e| format!("{id}: verify failed: {e}"))?;
    if report.state != LogState::Clean {
        return Err(format!("{id}: not clean after recovery: {report:?}"));
    }
    Ok(kept)
}

/// The oracle for an SQLite store after a crash: the database file at
/// `path` as the crash left it (with its `-wal` or hot `-journal`), opened
/// with `options`. Every acknowledged event counts as durable (under
/// `synchronous=FULL` an append is acknowledged after its commit is synced;
/// the caller records acknowledgements with [`Model::synced`]). Checks
/// SQLite's own `PRAGMA integrity_check` first (the connection that runs it
/// rolls back a hot journal or replays the WAL, as any first opener does),
/// then for every session of `model`:
///
/// 1. to 3. as [`check`]: a prefix of what was sent plus exactly the
///    closers it calls for, every acknowledged event byte for byte, `verify`
///    clean;
/// 4. recovering again (another store over the file, once the first has
///    recovered every session) changes nothing: the same events, the same
///    rows (every column of the session's `events` rows) and the same
///    revision — the repair was committed once;
/// 5. the next append continues the seq, and reads back.
///
/// On success the model is updated to the recovered logs plus that turn.
/// Returns a description of the first violation.
pub fn check_sqlite(
    path: &Path,
    options: &SqliteOptions,
    model: &mut Model,
) -> Result<Checked, String> {
    let open = || {
        Store::open_sqlite(path, options.clone(), StoreOptions::default())
            .map_err(|e| format!("the store does not open after the crash: {e}"))
    };
    let integrity: String =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
            .and_then(|conn| conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)))
            .map_err(|e| format!("integrity_check failed to run: {e}"))?;
    if integrity != "ok" {
        return Err(format!("PRAGMA integrity_check: {integrity}"));
    }
    let mut checked = Checked::default();
    // Recovery, by one store over the file.
    let store = open()?;
    let mut recovered = Vec::new();
    for (id, written) in model.sessions.clone() {
        let required = written.acked;
        let Some(view) = load_or_forget(&store, model, &id, required)? else {
            continue;
        };
        check_recovered(&store, &id, &view.events, &written, required, &mut checked)?;
        let revision = store.revision(&id).map_err(|e| e.to_string())?;
        let rows = sqlite_rows(path, &id)?;
        recovered.push((id, view.events, revision, rows));
    }
    drop(store);

    // A second recovery, by another store, is a no-op; then the next turn
    // continues the seq.
    let again = open()?;
    for (id, events, revision, rows) in recovered {
        let view2 = again
            .load(&id)
            .map_err(|e| format!("{id}: second recovery failed: {e}"))?;
        if view2.events != events {
            return Err(format!("{id}: a second recovery changed the events"));
        }
        if again.revision(&id).map_err(|e| e.to_string())? != revision {
            return Err(format!("{id}: a second recovery wrote (revision moved)"));
        }
        if sqlite_rows(path, &id)? != rows {
            return Err(format!("{id}: a second recovery changed the rows"));
        }
        let next = next_turn(&events);
        again
            .append(&id, &next)
            .map_err(|e| format!("{id}: the next append failed: {e}"))?;
        let mut resumed = events;
        resumed.extend(next);
        if again.load(&id).map_err(|e| e.to_string())?.events != resumed {
            return Err(format!("{id}: the resumed log does not read back"));
        }
        model.recovered(&id, resumed);
    }
    Ok(checked)
}

/// Every column of session `id`'s rows, in seq order.
fn sqlite_rows(path: &Path, id: &str) -> Result<Vec<Vec<rusqlite::types::Value>>, String> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| format!("{id}: rows: {e}"))?;
    let mut stmt = conn
        .prepare("SELECT * FROM events WHERE session_id = ?1 ORDER BY seq")
        .map_err(|e| format!("{id}: rows: {e}"))?;
    let n = stmt.column_count();
    stmt.query_map([id], |row| (0..n).map(|i| row.get(i)).collect())
        .and_then(|rows| rows.collect())
        .map_err(|e| format!("{id}: rows: {e}"))
}

/// A complete turn that continues a balanced log.
pub fn next_turn(log: &[Event]) -> Vec<Event> {
    let seq = log.len() as u64;
    let turn = log
        .iter()
        .filter(|e| e.kind() == EventKind::TurnStart)
        .count()
        + 1;
    let time = log.last().map_or(0, Event::time) + 1;
    vec![
        Event::new("turn/start", seq, time, &format!(r#"{{"turn":{turn}}}"#)).expect("valid"),
        Event::new(
            "turn/end",
            seq + 1,
            time,
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        )
        .expect("valid"),
    ]
}
