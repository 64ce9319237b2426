//! The Node.js addon of `turnwal-dsh`: turnwal's [`Store`] behind Node-API.
//!
//! The JavaScript side (`bindings/node/index.js`) is a persistence backend of
//! the upstream harness's `PersistenceCoordinator`; this addon gives it the
//! storage primitives it needs (`loadStored`, `readStoredRevision`,
//! `appendBatch`, `commitRepair`, `list`, `listSnapshots`, `close`), and the
//! library's explicit salvage (`salvage`, `salvageRepair`) beside them.
//!
//! - **Off the JavaScript thread, off libuv's pool.** Every operation that
//!   touches a file or the database runs on the store's own threads
//!   ([`workers`]): a lock wait (SQLite's busy handler, a PostgreSQL row
//!   lock) never holds a thread the harness's `fs`, `dns` or `crypto` work
//!   needs. Only the conversion of the result to a JavaScript value runs on
//!   the JavaScript thread (a napi deferred settles the Promise).
//! - **JSON text across the boundary.** Events go in as their JSON text (one
//!   envelope per line, as `JSON.stringify` writes it) and come back as the
//!   stored text (one JSON document the caller parses once, runs of chunk
//!   deltas packed as upstream's JSONL packs them), so every `data` payload
//!   is stored and returned byte for byte: it is never re-serialized from a
//!   JavaScript object graph here.
//! - **Errors** reject with an `Error` whose message is
//!   `turnwal[CODE] message`; the JavaScript layer turns it into a
//!   `TurnwalError` with `code` (see [`code_of`]).

#![deny(clippy::all)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Object, Utf16String};
use napi::{Env, Status};
use napi_derive::napi;
use turnwal::backend::jsonl::records::{encode_records, is_row_tag};
use turnwal::backend::postgres::PgOptions;
use turnwal::backend::sqlite::{JournalMode, SqliteOptions, Synchronous};
use turnwal::backend::wal::{LOG_EXTENSION, encode_file_name};
use turnwal::location::{IfMissing, Location, Opening};
use turnwal::upstream::chunks::{Record, encode_stored_records};
use turnwal::view::EventRef;
use turnwal::{
    Cut, Error, Event, LogState, Policy, RecoveryReport, RepairBasis, Salvage, SessionHeader,
    Store, StoreOptions, SyncMode,
};

/// A stable code per error kind, for scripts (`error.code` in JavaScript).
fn code_of(error: &Error) -> &'static str {
    match error {
        Error::Event(_) => "INVALID_EVENT",
        Error::Contract(_) => "CONTRACT_VIOLATION",
        Error::Header(_) => "INVALID_HEADER",
        Error::SeqMismatch { .. } => "SEQ_MISMATCH",
        Error::StaleRepair { .. } => "STALE_REPAIR",
        Error::NotFound { .. } => "NOT_FOUND",
        Error::AlreadyExists { .. } => "ALREADY_EXISTS",
        Error::Corrupt(_) => "CORRUPT",
        Error::Unsupported { .. } => "UNSUPPORTED",
        Error::Locked { .. } | Error::Leased { .. } => "LOCKED",
        Error::Superseded { .. } => "SUPERSEDED",
        Error::OpenTurn { .. } => "OPEN_TURN",
        Error::FollowLost { .. } => "FOLLOW_LOST",
        Error::Diverged(_) => "DIVERGED",
        Error::InvalidArgument(_) => "INVALID_ARGUMENT",
        Error::Poisoned { .. } | Error::StorePoisoned { .. } => "POISONED",
        Error::Io { .. } => "IO",
        _ => "ERROR",
    }
}

fn js_error(error: Error) -> napi::Error {
    let message = match &error {
        // Upstream's text as its stores word it: the refusal, then the
        // raw log.
        Error::Unsupported { path, detail } => {
            format!("{detail} (raw log: {})", path.display())
        }
        other => other.to_string(),
    };
    napi::Error::new(
        Status::GenericFailure,
        format!("turnwal[{}] {message}", code_of(&error)),
    )
}

fn invalid(message: impl Into<String>) -> napi::Error {
    js_error(Error::InvalidArgument(message.into()))
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Parses a batch: one event envelope per line (no line is empty).
fn parse_events(id: &str, lines: &str) -> Result<Vec<Event>, Error> {
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    lines
        .split('\n')
        .enumerate()
        .map(|(i, line)| {
            Event::from_json(line.as_bytes()).map_err(|mut e| {
                // Named as a harness reads it: the session, the event's
                // place in the batch, and its seq and type when the line
                // shows them.
                e.line.get_or_insert(i as u64 + 1);
                if e.seq.is_none() {
                    e.seq = sniff(line, "\"seq\":").and_then(|v| v.parse().ok());
                }
                if e.event_type.is_none() {
                    e.event_type = sniff(line, "\"type\":\"")
                        .map(|t| turnwal::error::excerpt(t.trim_end_matches('"')));
                }
                e.reason = format!("session {id:?}, event {} of the batch: {}", i + 1, e.reason);
                Error::from(e)
            })
        })
        .collect()
}

/// The text after the first `key` in `line` up to the next `,` or `}`
/// (a refused line's seq or type, found without parsing it).
fn sniff<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// How to open a store (`openStore`'s second argument). Which store the
/// path names is read from the path itself (`storeKind`).
#[napi(object)]
pub struct OpenOptions {
    /// When an append is durable: `batch` (fdatasync every append),
    /// `turn` (at every `turn/end`) or `never` (left to the OS).
    pub durability: String,
    /// SQLite only: how long to wait for another connection's lock, in
    /// ms (an integer from 0 to 2^31 - 1, SQLite's limit).
    pub busy_timeout_ms: Option<f64>,
    /// SQLite only: `wal` (default), `delete`, `truncate` or `persist`.
    pub journal_mode: Option<String>,
    /// PostgreSQL only: how long a writer's lease runs from each renewal
    /// (1,000 to 86,400,000 ms; default `TURNWAL_LEASE`, else 30 s).
    pub lease_ms: Option<f64>,
}

/// An open store. Every method returns a Promise settled by work on the
/// store's own threads.
#[napi]
pub struct NativeStore {
    store: Arc<Mutex<Option<Arc<Store>>>>,
    /// The threads its operations run on (never libuv's pool).
    workers: Workers,
    /// Set when an operation panicked inside turnwal: the store's state is
    /// unknown, so every later operation is refused (`POISONED`) until the
    /// store is closed and opened again.
    poisoned: Arc<std::sync::atomic::AtomicBool>,
    /// The followers of this store's sessions, stopped when it closes.
    followers: Arc<Mutex<Vec<follower::Handle>>>,
}

/// [`guarded`] for an operation on a store: a panic marks the store
/// poisoned, so every later operation on it is refused.
fn guarded_poisoning<T>(
    op: &str,
    poisoned: &std::sync::atomic::AtomicBool,
    f: impl FnOnce() -> napi::Result<T>,
) -> napi::Result<T> {
    let (result, panicked) = guarded(op, f);
    if panicked {
        poisoned.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    result
}

/// Queues the store's idle work for session `id` behind an acknowledged
/// append ([`Store::seal_due`]: the native WAL seals closed turns once
/// enough are plain), so the append's Promise settles first and a live
/// session stays close to its sealed size without sealing in the append
/// path. Its failure changes no acknowledged event; a writer it poisons is
/// reported by the session's next operation, and a panic poisons the store
/// as any operation's does.
fn seal_when_idle(
    workers: &Workers,
    store: &Arc<Store>,
    id: &str,
    poisoned: &Arc<std::sync::atomic::AtomicBool>,
) {
    let (store, id, poisoned) = (store.clone(), id.to_owned(), poisoned.clone());
    workers.later(Box::new(move || {
        if poisoned.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let _ = guarded_poisoning("sealDue", &poisoned, || {
            store.seal_due(&id).map_err(js_error)
        });
    }));
}

/// A `fromSeq` argument: a non-negative safe integer.
fn from_seq_arg(from_seq: f64) -> napi::Result<u64> {
    if !(from_seq >= 0.0 && from_seq.fract() == 0.0 && from_seq <= 9_007_199_254_740_991.0) {
        return Err(invalid(format!(
            "fromSeq must be a non-negative safe integer, got {from_seq}"
        )));
    }
    Ok(from_seq as u64)
}

/// The test hook behind bindings/node/test/panic.test.mjs: when
/// `TURNWAL_DSH_PANIC_IN` names `op`, panics here, so a test can check
/// that every entry point turns a panic into an error and the process
/// lives on. Nothing else sets it.
fn fault_point(op: &str) {
    if std::env::var_os("TURNWAL_DSH_PANIC_IN").is_some_and(|v| v == op) {
        panic!("forced panic in {op} (TURNWAL_DSH_PANIC_IN)");
    }
}

/// Runs `f`, turning a panic inside turnwal into an error naming `op`: a
/// panic must never unwind into the harness's process, where it aborts
/// it. Returns whether it panicked beside the result.
fn guarded<T>(op: &str, f: impl FnOnce() -> napi::Result<T>) -> (napi::Result<T>, bool) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fault_point(op);
        f()
    })) {
        Ok(result) => (result, false),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            let message = format!(
                "turnwal[PANIC] {op} failed inside turnwal ({}); the store's state is unknown: \
                 close it and open it again, and report this",
                turnwal::error::excerpt(&what)
            );
            (Err(napi::Error::new(Status::GenericFailure, message)), true)
        }
    }
}

impl NativeStore {
    fn store(&self) -> napi::Result<Arc<Store>> {
        if self.poisoned.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(napi::Error::new(
                Status::GenericFailure,
                "turnwal[POISONED] an earlier operation panicked inside turnwal: close the store \
                 and open it again",
            ));
        }
        self.store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| invalid("the store is closed"))
    }
}

/// One operation on a store, run off the JavaScript thread.
pub struct Op {
    store: Arc<Store>,
    kind: OpKind,
    poisoned: Arc<std::sync::atomic::AtomicBool>,
}

enum OpKind {
    LoadStored {
        id: String,
    },
    LoadStoredFrom {
        id: String,
        from_seq: u64,
    },
    Revision {
        id: String,
    },
    Hold {
        id: String,
        steal: bool,
    },
    Append {
        id: String,
        meta: String,
        lines: String,
        materialized: bool,
    },
    CommitRepair {
        id: String,
        stored: Option<u64>,
        cut: Option<u64>,
        closers: String,
    },
    List {
        revisions: bool,
    },
    Salvage {
        id: String,
    },
    SalvageRepair {
        id: String,
        dry_run: bool,
    },
    ReadRaw {
        id: String,
    },
    Release {
        id: String,
    },
}

impl Op {
    /// Runs the operation on the store's threads; the Promise resolves to
    /// its JSON text (or null).
    fn start<'env>(self, env: &'env Env, workers: &Workers) -> napi::Result<Object<'env>> {
        let later = workers.clone();
        workers.run(
            env,
            move || {
                let done = guarded_poisoning(self.kind.name(), &self.poisoned, || {
                    self.run().map_err(js_error)
                });
                if done.is_ok()
                    && let OpKind::Append { id, .. } = &self.kind
                {
                    seal_when_idle(&later, &self.store, id, &self.poisoned);
                }
                done
            },
            Ok,
        )
    }
}

/// A read handed to JavaScript in pieces (see `load_stored_pieces`), as
/// Buffers that own the bytes Rust wrote (no copy into one string).
pub struct Pieces {
    store: Arc<Store>,
    id: String,
    /// `None`: the stored prefix; `Some(seq)`: the events from `seq` on.
    from_seq: Option<u64>,
    poisoned: Arc<std::sync::atomic::AtomicBool>,
}

impl Pieces {
    /// Reads on the store's threads; the Promise resolves to the pieces as
    /// Buffers that own the bytes Rust wrote (no copy into one string).
    fn start<'env>(self, env: &'env Env, workers: &Workers) -> napi::Result<Object<'env>> {
        let op = if self.from_seq.is_some() {
            "loadStoredFromPieces"
        } else {
            "loadStoredPieces"
        };
        workers.run(
            env,
            move || {
                guarded_poisoning(op, &self.poisoned, || {
                    match self.from_seq {
                        None => load_stored_pieces(&self.store, &self.id),
                        Some(seq) => load_stored_from_pieces(&self.store, &self.id, seq),
                    }
                    .map_err(js_error)
                })
            },
            |pieces| Ok(pieces.map(|p| p.into_iter().map(Buffer::from).collect::<Vec<_>>())),
        )
    }
}

impl OpKind {
    /// The operation, as a panic's error names it.
    fn name(&self) -> &'static str {
        match self {
            OpKind::LoadStored { .. } => "loadStored",
            OpKind::LoadStoredFrom { .. } => "loadStoredFrom",
            OpKind::Revision { .. } => "revision",
            OpKind::Hold { .. } => "hold",
            OpKind::Append { .. } => "append",
            OpKind::CommitRepair { .. } => "commitRepair",
            OpKind::List { .. } => "list",
            OpKind::Salvage { .. } => "salvage",
            OpKind::SalvageRepair { .. } => "salvageRepair",
            OpKind::ReadRaw { .. } => "readRaw",
            OpKind::Release { .. } => "release",
        }
    }
}

impl Op {
    fn run(&self) -> Result<Option<String>, Error> {
        let store = &self.store;
        match &self.kind {
            OpKind::LoadStored { id } => load_stored(store, id),
            OpKind::LoadStoredFrom { id, from_seq } => load_stored_from(store, id, *from_seq),
            OpKind::Revision { id } => store.revision(id),
            OpKind::Hold { id, steal } => {
                if *steal {
                    store.steal_lease(id);
                }
                store.hold(id).map(|()| None)
            }
            OpKind::Append {
                id,
                meta,
                lines,
                materialized,
            } => {
                let events = parse_events(id, lines)?;
                if events.is_empty() {
                    return Ok(None);
                }
                if *materialized {
                    // Never a repair here: the coordinator commits it first.
                    store.adopt(id)?;
                } else {
                    // Stored as handed over, as upstream's backends store
                    // it: a foreign format version is refused when read.
                    let header = SessionHeader::from_json_any_version(meta)?;
                    if header.id != *id {
                        return Err(Error::InvalidArgument(format!(
                            "metadata names session {:?}, not {id:?}",
                            header.id
                        )));
                    }
                    match store.create(header) {
                        // Created by an earlier first append that failed.
                        Ok(()) | Err(Error::AlreadyExists { on_disk: false, .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                store.append(id, &events)?;
                Ok(None)
            }
            OpKind::CommitRepair {
                id,
                stored,
                cut,
                closers,
            } => {
                let closers = parse_events(id, closers)?;
                let stored = match (stored, closers.first()) {
                    (Some(n), _) => *n,
                    (None, Some(first)) => first.seq(),
                    (None, None) => return Ok(None),
                };
                let basis = RepairBasis {
                    stored,
                    cut_offset: *cut,
                };
                store.commit_repair(id, &basis, &closers)?;
                Ok(None)
            }
            OpKind::List { revisions } => list(store, *revisions).map(Some),
            OpKind::Salvage { id } => store.salvage(id).map(|s| Some(salvage_json(&s))),
            OpKind::SalvageRepair { id, dry_run } => store
                .recover_salvage(id, *dry_run)
                .map(|report| Some(report_json(&report))),
            OpKind::Release { id } => store.close(id).map(|()| None),
            // `readRaw`: the session as upstream's JSONL backend holds it.
            OpKind::ReadRaw { id } => match store.jsonl_text(id) {
                Err(Error::NotFound { .. }) => Ok(None),
                text => Ok(Some(
                    String::from_utf8(text?).expect("a header and stored events are UTF-8"),
                )),
            },
        }
    }
}

/// The stored prefix of a session as one JSON document:
/// `{"meta":…,"revision":…,"torn":null|{"stored":N,"cut":OFFSET,…},"packed":…,"events":[…]}`
/// (the events as storage records: see `write_records`).
/// Read-only: no lock, no repair, no closers. The records come from
/// `Store::stored_records`: a WAL store's chunk-run records (in the log and
/// inside sealed units) and a row store's packed rows as they are stored,
/// never decoded into owned events first; any other store's events from its
/// view. `write_stored_records` joins a packed run with what continues it
/// (a run split across batches), so the document is byte for byte the one
/// the events give. The revision names exactly what was read.
fn load_stored(store: &Store, id: &str) -> Result<Option<String>, Error> {
    let Some(log) = store.stored_records(id)? else {
        return Ok(None);
    };
    Ok(Some(stored_document(
        log.header(),
        log.revision(),
        log.state(),
        log.cut(),
        log.stored(),
        || log.records(),
    )))
}

/// `load_stored`'s document of stored records.
fn stored_document<'a, I: Iterator<Item = Record<'a>>>(
    header: &SessionHeader,
    revision: &str,
    state: LogState,
    cut: Option<&Cut>,
    stored: usize,
    records: impl Fn() -> I,
) -> String {
    let cut = match state {
        LogState::Torn => cut,
        _ => None,
    };
    let mut out = stored_head(&header.to_json(), revision, stored, cut, stored * 80);
    write_stored_records(&mut out, records);
    String::from_utf8(out).expect("stored events are validated UTF-8")
}

/// `{"meta":…,"revision":…,"torn":…` of `load_stored`'s document, with room
/// for `events` more bytes.
fn stored_head(
    header: &str,
    revision: &str,
    stored: usize,
    cut: Option<&Cut>,
    events: usize,
) -> Vec<u8> {
    let torn = match cut {
        None => "null".to_owned(),
        Some(cut) => format!(
            r#"{{"stored":{stored},"cut":{},"seq":{},"bytes":{},"reason":{}}}"#,
            cut.offset,
            cut.seq,
            cut.len,
            json_string(cut.reason.code())
        ),
    };
    let mut out = Vec::with_capacity(events + header.len() + 256);
    out.extend_from_slice(br#"{"meta":"#);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(br#","revision":"#);
    out.extend_from_slice(json_string(revision).as_bytes());
    out.extend_from_slice(br#","torn":"#);
    out.extend_from_slice(torn.as_bytes());
    out
}

/// Appends `,"packed":…,"events":[…]}`: the events as upstream's storage
/// records. Each run of chunk deltas is one packed row (`text-chunks`,
/// `reasoning-chunks`, `tool-call-chunks`) that upstream's
/// `decodeStorageRecord` expands back into exactly the stored events (a delta
/// packs only when its `data` is byte for byte what the row expands to);
/// every other event is its envelope verbatim. A run of 17 chunks is one
/// record of a few hundred bytes instead of 17 of ~120, so JavaScript parses
/// less than half the text and builds the chunk events from object literals.
/// When a stored event's own type is a row tag (a plugin event may be named
/// so) nothing is packed and `packed` is false, so no event is mistaken for
/// a row.
fn write_records<'a, I: Iterator<Item = EventRef<'a>>>(out: &mut Vec<u8>, events: impl Fn() -> I) {
    let start = out.len();
    let mut tagged = false;
    out.extend_from_slice(br#","packed":true,"events":["#);
    let checked = events().inspect(|e| tagged |= is_row_tag(e.event_type()));
    encode_records(checked, true, b',', out);
    if tagged {
        out.truncate(start);
        out.extend_from_slice(br#","packed":false,"events":["#);
        encode_records(events(), false, b',', out);
    }
    out.extend_from_slice(b"]}");
}

/// `write_records` of stored records (packed rows as stored, see
/// `encode_stored_records`): the same text the events they hold give.
fn write_stored_records<'a, I: Iterator<Item = Record<'a>>>(
    out: &mut Vec<u8>,
    records: impl Fn() -> I,
) {
    let tagged = records().any(|r| matches!(r, Record::Event(e) if is_row_tag(e.event_type())));
    out.extend_from_slice(if tagged {
        br#","packed":false,"events":["#
    } else {
        br#","packed":true,"events":["#
    });
    encode_stored_records(records(), !tagged, b',', out);
    out.extend_from_slice(b"]}");
}

/// The header and the stored events from `from_seq` on, as one JSON
/// document `{"meta":…,"packed":…,"events":[…]}` (see `write_records`), or
/// `None` when the session is absent. A seek (`Store::read_raw`): the WAL
/// finds the suffix from the end of the log, SQLite by its seq index; the
/// events before `from_seq` are never decoded. The events are handed over
/// as stored, as upstream's seek-capable SQLite backend hands them: the
/// coordinator runs the read-time migrations over them, and reads the
/// whole log itself when one needs the prefix (`needsLegacyPrefix`).
/// Read-only: no lock, no repair, no closers; a torn tail is left out, an
/// open turn served as it is stored.
fn load_stored_from(store: &Store, id: &str, from_seq: u64) -> Result<Option<String>, Error> {
    let header = match store.header(id) {
        Ok(header) => header,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let events = match store.read_raw(id, from_seq) {
        Ok(events) => events,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let header = header.to_json();
    let size: usize = events.iter().map(|e| e.data().get().len() + 64).sum();
    let mut out = Vec::with_capacity(size + header.len() + 64);
    out.extend_from_slice(br#"{"meta":"#);
    out.extend_from_slice(header.as_bytes());
    write_records(&mut out, || events.iter().map(EventRef::from));
    Ok(Some(
        String::from_utf8(out).expect("stored events are validated UTF-8"),
    ))
}

/// How much record text one piece of a loaded session holds: parsing a
/// piece in JavaScript is short (no long event-loop gap), and no piece is
/// near V8's string limit however large the session.
const PIECE_BYTES: usize = 1 << 20;

/// What a record adds to its piece, about.
fn record_bytes(record: &Record<'_>) -> usize {
    match record {
        Record::Event(e) => e.data().len() + 64,
        Record::Packed(run) => run.data().len() + 64,
    }
}

/// `load_stored`'s document in pieces: first
/// `{"meta":…,"revision":…,"torn":…,"packed":…}`, then the records as JSON
/// arrays of about [`PIECE_BYTES`] each (a record larger than that is a
/// piece alone). JavaScript parses and expands them one at a time,
/// yielding to its event loop between pieces; the events they give are
/// those of `load_stored`'s document, in order.
fn load_stored_pieces(store: &Store, id: &str) -> Result<Option<Vec<Vec<u8>>>, Error> {
    let Some(log) = store.stored_records(id)? else {
        return Ok(None);
    };
    let cut = match log.state() {
        LogState::Torn => log.cut(),
        _ => None,
    };
    let mut head = stored_head(
        &log.header().to_json(),
        log.revision(),
        log.stored(),
        cut,
        0,
    );
    let tagged = log
        .records()
        .any(|r| matches!(r, Record::Event(e) if is_row_tag(e.event_type())));
    head.extend_from_slice(if tagged {
        br#","packed":false}"#
    } else {
        br#","packed":true}"#
    });
    let mut pieces = vec![head];
    let mut records = log.records().peekable();
    while records.peek().is_some() {
        let mut budget = 0;
        let group = std::iter::from_fn(|| {
            if budget >= PIECE_BYTES {
                return None;
            }
            let record = records.next()?;
            budget += record_bytes(&record);
            Some(record)
        });
        let mut piece = vec![b'['];
        encode_stored_records(group, !tagged, b',', &mut piece);
        piece.push(b']');
        pieces.push(piece);
    }
    Ok(Some(pieces))
}

/// `load_stored_from`'s document in pieces, as [`load_stored_pieces`]
/// gives `load_stored`'s: `{"meta":…,"packed":…}`, then the records.
fn load_stored_from_pieces(
    store: &Store,
    id: &str,
    from_seq: u64,
) -> Result<Option<Vec<Vec<u8>>>, Error> {
    let header = match store.header(id) {
        Ok(header) => header,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let events = match store.read_raw(id, from_seq) {
        Ok(events) => events,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let tagged = events.iter().any(|e| is_row_tag(e.event_type()));
    let mut head = br#"{"meta":"#.to_vec();
    head.extend_from_slice(header.to_json().as_bytes());
    head.extend_from_slice(if tagged {
        br#","packed":false}"#
    } else {
        br#","packed":true}"#
    });
    let mut pieces = vec![head];
    let mut rest = events.as_slice();
    while !rest.is_empty() {
        let mut budget = 0;
        let n = rest
            .iter()
            .take_while(|e| {
                let fits = budget < PIECE_BYTES;
                budget += e.data().get().len() + 64;
                fits
            })
            .count();
        let mut piece = vec![b'['];
        encode_records(
            rest[..n].iter().map(EventRef::from),
            !tagged,
            b',',
            &mut piece,
        );
        piece.push(b']');
        pieces.push(piece);
        rest = &rest[n..];
    }
    Ok(Some(pieces))
}

/// A salvage read (`Store::salvage`) as one JSON document
/// `{"header":…,"gaps":[{"offset":…,"length":…,"firstSeq":…,"nextSeq":…|null,"reason":…,"damaged":…}],"packed":…,"events":[…]}`
/// (the events as storage records: see `write_records`).
fn salvage_json(salvage: &Salvage) -> String {
    let header = salvage.header.to_json();
    let size: usize = salvage
        .events
        .iter()
        .map(|e| e.data().get().len() + 64)
        .sum();
    let mut out = Vec::with_capacity(size + header.len() + 128 * (salvage.gaps.len() + 1));
    out.extend_from_slice(br#"{"header":"#);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(br#","gaps":["#);
    for (i, gap) in salvage.gaps.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let next = gap
            .next_seq
            .map_or_else(|| "null".to_owned(), |n| n.to_string());
        out.extend_from_slice(
            format!(
                r#"{{"offset":{},"length":{},"firstSeq":{},"nextSeq":{next},"reason":{},"damaged":{}}}"#,
                gap.offset,
                gap.len,
                gap.first_seq,
                json_string(&gap.reason),
                gap.damaged
            )
            .as_bytes(),
        );
    }
    out.push(b']');
    write_records(&mut out, || salvage.events.iter().map(EventRef::from));
    String::from_utf8(out).expect("stored events are validated UTF-8")
}

/// An explicit salvage repair's report (`Store::recover_salvage`) as one
/// JSON document
/// `{"state":…,"kept":…,"cut":null|{"offset":…,"seq":…,"length":…,"reason":…,"detail":…},"committed":…,"quarantine":null|PATH,"packed":…,"events":[…]}`
/// (`events`: the closers, as storage records: see `write_records`).
fn report_json(report: &RecoveryReport) -> String {
    let cut = report.cut.as_ref().map_or_else(
        || "null".to_owned(),
        |Cut {
             offset,
             seq,
             len,
             reason,
             detail,
         }| {
            format!(
                r#"{{"offset":{offset},"seq":{seq},"length":{len},"reason":{},"detail":{}}}"#,
                json_string(reason.code()),
                json_string(detail)
            )
        },
    );
    let quarantine = report.quarantine.as_ref().map_or_else(
        || "null".to_owned(),
        |path| json_string(&path.to_string_lossy()),
    );
    let mut out = format!(
        r#"{{"state":{},"kept":{},"cut":{cut},"committed":{},"quarantine":{quarantine}"#,
        json_string(report.state.code()),
        report.kept,
        report.committed
    )
    .into_bytes();
    write_records(&mut out, || report.closers.iter().map(EventRef::from));
    String::from_utf8(out).expect("closers are valid UTF-8")
}

/// `[{"header":…,"revision":…}, …]` (or headers alone) for every
/// materialized session whose header is readable.
fn list(store: &Store, revisions: bool) -> Result<String, Error> {
    let mut items = Vec::new();
    for summary in store.list()? {
        let Some(header) = summary.header else {
            continue; // no readable header: not a session to list
        };
        if revisions {
            let Some(revision) = store.revision(&summary.id)? else {
                continue; // deleted since it was listed
            };
            items.push(format!(
                r#"{{"header":{},"revision":{}}}"#,
                header.to_json(),
                json_string(&revision)
            ));
        } else {
            items.push(header.to_json());
        }
    }
    Ok(format!("[{}]", items.join(",")))
}

#[napi]
impl NativeStore {
    /// The stored prefix (see `load_stored`), or null when absent.
    #[napi(catch_unwind, ts_return_type = "Promise<string | null>")]
    pub fn load_stored<'env>(&self, env: &'env Env, id: Utf16String) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::LoadStored {
                id: session_id(&id)?,
            },
        )
    }

    /// The stored prefix in pieces (see `load_stored_pieces`): a head
    /// document, then arrays of records; null when absent.
    #[napi(catch_unwind, ts_return_type = "Promise<Buffer[] | null>")]
    pub fn load_stored_pieces<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
    ) -> napi::Result<Object<'env>> {
        fault_point("loadStoredPieces.call");
        Pieces {
            store: self.store()?,
            id: session_id(&id)?,
            from_seq: None,
            poisoned: self.poisoned.clone(),
        }
        .start(env, &self.workers)
    }

    /// The header and the events from `fromSeq` on in pieces (see
    /// `load_stored_from_pieces`); null when absent.
    #[napi(catch_unwind, ts_return_type = "Promise<Buffer[] | null>")]
    pub fn load_stored_from_pieces<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
        from_seq: f64,
    ) -> napi::Result<Object<'env>> {
        fault_point("loadStoredFromPieces.call");
        let from_seq = from_seq_arg(from_seq)?;
        Pieces {
            store: self.store()?,
            id: session_id(&id)?,
            from_seq: Some(from_seq),
            poisoned: self.poisoned.clone(),
        }
        .start(env, &self.workers)
    }

    /// The header and the stored events from `fromSeq` on (see
    /// `load_stored_from`), or null when absent.
    #[napi(catch_unwind, ts_return_type = "Promise<string | null>")]
    pub fn load_stored_from<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
        from_seq: f64,
    ) -> napi::Result<Object<'env>> {
        let from_seq = from_seq_arg(from_seq)?;
        self.op(
            env,
            OpKind::LoadStoredFrom {
                id: session_id(&id)?,
                from_seq,
            },
        )
    }

    /// Takes the session's writer lock (a PostgreSQL store: its lease) now
    /// and keeps it for the session's next append or repair, changing
    /// nothing. Refused with `LOCKED` naming the holder while another
    /// process or host holds the session live; with `steal`, a PostgreSQL
    /// lease is taken anyway (its holder is refused from its next batch).
    /// Resolves null; a session with nothing stored is `NOT_FOUND`.
    #[napi(catch_unwind, ts_return_type = "Promise<null>")]
    pub fn hold<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
        steal: bool,
    ) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::Hold {
                id: session_id(&id)?,
                steal,
            },
        )
    }

    /// The revision token, or null when the session has nothing stored.
    #[napi(catch_unwind, ts_return_type = "Promise<string | null>")]
    pub fn revision<'env>(&self, env: &'env Env, id: Utf16String) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::Revision {
                id: session_id(&id)?,
            },
        )
    }

    /// Appends a batch (one envelope per line), durable as the store's
    /// durability mode says when the Promise resolves. With `materialized`
    /// false, the session is created from `meta` (its header as JSON) and
    /// the batch is its first, written atomically with it.
    #[napi(catch_unwind, ts_return_type = "Promise<null>")]
    pub fn append<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
        meta: String,
        lines: String,
        materialized: bool,
    ) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::Append {
                id: session_id(&id)?,
                meta,
                lines,
                materialized,
            },
        )
    }

    /// Cuts the torn tail read with `loadStored` (`stored`, `cut`: the
    /// marker's fields, null without one) and appends the closers (one
    /// envelope per line), in one crash-safe step. A stale marker is
    /// refused.
    #[napi(catch_unwind, ts_return_type = "Promise<null>")]
    pub fn commit_repair<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
        stored: Option<f64>,
        cut: Option<f64>,
        closers: String,
    ) -> napi::Result<Object<'env>> {
        let count = |v: Option<f64>, what: &str| -> napi::Result<Option<u64>> {
            match v {
                None => Ok(None),
                Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= 9_007_199_254_740_991.0 => {
                    Ok(Some(x as u64))
                }
                Some(x) => Err(invalid(format!(
                    "torn marker {what} must be a non-negative safe integer, got {x}"
                ))),
            }
        };
        self.op(
            env,
            OpKind::CommitRepair {
                id: session_id(&id)?,
                stored: count(stored, "stored")?,
                cut: count(cut, "cut")?,
                closers,
            },
        )
    }

    /// Every materialized session: `[{"header":…,"revision":…}]` with
    /// `revisions`, else `[header, …]`.
    #[napi(catch_unwind, ts_return_type = "Promise<string>")]
    pub fn list<'env>(&self, env: &'env Env, revisions: bool) -> napi::Result<Object<'env>> {
        self.op(env, OpKind::List { revisions })
    }

    /// Every intact event of a stored session, those after a damaged region
    /// included, and the regions that could not be used (see
    /// `salvage_json`). Never writes; a corrupt log is read, not refused.
    #[napi(catch_unwind, ts_return_type = "Promise<string>")]
    pub fn salvage<'env>(&self, env: &'env Env, id: Utf16String) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::Salvage {
                id: session_id(&id)?,
            },
        )
    }

    /// An explicit salvage repair (`turnwal recover --salvage`): keeps the
    /// longest valid prefix, closes its open turn, and cuts everything from
    /// the first damage on after quarantining it. With `dryRun`, reports
    /// what it would do and writes nothing. Resolves to the report (see
    /// `report_json`).
    #[napi(catch_unwind, ts_return_type = "Promise<string>")]
    pub fn salvage_repair<'env>(
        &self,
        env: &'env Env,
        id: Utf16String,
        dry_run: bool,
    ) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::SalvageRepair {
                id: session_id(&id)?,
                dry_run,
            },
        )
    }

    /// Closes the session's writer if this store holds one (flushed, its
    /// lock let go; the next append or hold takes it again): after a load
    /// or resume that took the lock and then failed. Resolves null.
    #[napi(catch_unwind, ts_return_type = "Promise<null>")]
    pub fn release<'env>(&self, env: &'env Env, id: Utf16String) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::Release {
                id: session_id(&id)?,
            },
        )
    }

    /// The session as the upstream JSONL backend would hold it
    /// (`Store::jsonl_text`); null when nothing is stored. Read-only: no
    /// lock, no repair.
    #[napi(catch_unwind, ts_return_type = "Promise<string | null>")]
    pub fn read_raw<'env>(&self, env: &'env Env, id: Utf16String) -> napi::Result<Object<'env>> {
        self.op(
            env,
            OpKind::ReadRaw {
                id: session_id(&id)?,
            },
        )
    }

    /// Follows session `id` from `fromSeq` (`Store::follow`, serving the
    /// events as stored): a `NativeFollow` whose `next()` resolves each
    /// new batch. Nothing is read until its first `next()`.
    #[napi(catch_unwind)]
    pub fn follow(&self, id: Utf16String, from_seq: f64) -> napi::Result<follower::NativeFollow> {
        fault_point("follow.call");
        let from_seq = from_seq_arg(from_seq)?;
        let (store, id) = (self.store()?, session_id(&id)?);
        let (follow, handle) = follower::NativeFollow::new(store, id, from_seq);
        let mut followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        followers.retain(|f| !f.is_stopped());
        followers.push(handle);
        Ok(follow)
    }

    /// Releases the store: every session this store holds is closed
    /// (flushed; a version-2 WAL log's closed turns sealed) and its writer
    /// lock released. Later calls reject.
    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        fault_point("close.call");
        for follower in self
            .followers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            follower.stop();
        }
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.workers.run(env, move || close_store(store), Ok)
    }

    fn op<'env>(&self, env: &'env Env, kind: OpKind) -> napi::Result<Object<'env>> {
        fault_point(&format!("{}.call", kind.name()));
        Op {
            store: self.store()?,
            kind,
            poisoned: self.poisoned.clone(),
        }
        .start(env, &self.workers)
    }
}

/// Closes a store off the JavaScript thread: every session it holds is
/// closed (`Store::close_all`), then the store dropped.
fn close_store(store: Option<Arc<Store>>) -> napi::Result<()> {
    // Close every session first (a WAL writer seals a version-2 log's
    // closed turns at a clean close), then drop the store; writers still
    // held by an operation in flight flush when it drops them.
    guarded("close", || {
        let closed = store.as_ref().map_or(Ok(()), |s| s.close_all());
        drop(store);
        closed.map_err(js_error)
    })
    .0
}

/// Opens a store off the JavaScript thread.
pub struct Open {
    path: String,
    options: StoreOptions,
    sqlite_options: SqliteOptions,
    lease_ms: Option<f64>,
}

impl Open {
    fn open(&mut self) -> napi::Result<Store> {
        let location = location_of(&self.path)?;
        kind_of(&location)?;
        let mut opening = Opening::new(self.options)
            .if_missing(IfMissing::Create)
            .sqlite(self.sqlite_options.clone());
        if let Location::Postgres { .. } = location {
            let mut pg = PgOptions::from_env().map_err(js_error)?;
            if let Some(ms) = self.lease_ms {
                if !(ms.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&ms)) {
                    return Err(invalid(format!(
                        "leaseMs must be an integer number of milliseconds, got {ms}"
                    )));
                }
                pg = pg
                    .with_lease(Duration::from_millis(ms as u64))
                    .map_err(js_error)?;
            }
            opening = opening.postgres(pg);
        }
        location.open(&opening).map_err(js_error)
    }
}

/// The store `path` names, read as every turnwal tool reads a store string
/// (`turnwal::location`: the one place a string becomes a backend).
fn location_of(path: &str) -> napi::Result<Location> {
    Location::parse(path).map_err(|e| invalid(e.to_string()))
}

/// `wal`, `sqlite` or `postgres`; a JSONL root is not a store turnwal-dsh
/// mounts (the harness has its own JSONL backend for it).
fn kind_of(location: &Location) -> napi::Result<&'static str> {
    match location {
        Location::Wal(_) => Ok("wal"),
        Location::Sqlite(_) => Ok("sqlite"),
        Location::Postgres { .. } => Ok("postgres"),
        Location::Jsonl(root, _) => Err(invalid(format!(
            "{} names the upstream harness's own JSONL root: turnwal-dsh stores sessions in a \
             WAL directory, an SQLite database (.sqlite, .db) or PostgreSQL; mount the \
             harness's JSONL backend for it, or `turnwal convert` it",
            root.display()
        ))),
    }
}

/// The kind of store `path` names: `wal` (a directory, or a path that is
/// neither of the others), `sqlite` (a `.sqlite` or `.db` path, or a file
/// starting with SQLite's header) or `postgres` (`postgres://…`,
/// `postgresql://…`), as `turnwal --store` reads it.
#[napi(catch_unwind)]
pub fn store_kind(path: String) -> napi::Result<String> {
    fault_point("storeKind");
    kind_of(&location_of(&path)?).map(str::to_owned)
}

/// Opens (creating if needed) a store: a native WAL directory, a SQLite
/// database file, or a PostgreSQL database (`postgres://…`,
/// `postgresql://…`). New sessions are `Permissive`, as upstream's backends
/// are: the coordinator checks what it appends, turnwal stores it as
/// handed over (legacy shapes, foreign format versions and malformed
/// events included), and upstream's reader migrates or refuses it.
#[napi(catch_unwind, ts_return_type = "Promise<NativeStore>")]
pub fn open_store(env: &Env, path: String, options: OpenOptions) -> napi::Result<Object<'_>> {
    fault_point("openStore.call");
    let sync = match options.durability.as_str() {
        "batch" => SyncMode::Batch,
        "turn" => SyncMode::Turn,
        "never" => SyncMode::Never,
        other => {
            return Err(invalid(format!(
                "durability must be \"batch\", \"turn\" or \"never\", got {other:?}"
            )));
        }
    };
    let mut sqlite_options = SqliteOptions::default();
    if let Some(ms) = options.busy_timeout_ms {
        if !(ms.fract() == 0.0 && (0.0..=f64::from(i32::MAX)).contains(&ms)) {
            return Err(invalid(format!(
                "busyTimeoutMs must be an integer from 0 to {} (SQLite's limit), got {ms}",
                i32::MAX
            )));
        }
        sqlite_options.busy_timeout = Duration::from_millis(ms as u64);
    }
    if let Some(mode) = &options.journal_mode {
        sqlite_options.journal_mode = match mode.as_str() {
            "wal" => JournalMode::Wal,
            "delete" => JournalMode::Delete,
            "truncate" => JournalMode::Truncate,
            "persist" => JournalMode::Persist,
            other => {
                return Err(invalid(format!(
                    "journalMode must be \"wal\", \"delete\", \"truncate\" or \"persist\", got {other:?}"
                )));
            }
        };
    }
    // SQLite commits every append batch as its own transaction; `never`
    // relaxes its fsync the way `never` relaxes the WAL's.
    if sync == SyncMode::Never {
        sqlite_options.synchronous = Synchronous::Normal;
    }
    let mut open = Open {
        path,
        options: StoreOptions {
            sync,
            policy: Policy::Permissive,
            require_known_types: false,
        },
        sqlite_options,
        lease_ms: options.lease_ms,
    };
    // Opening waits too (SQLite's journal-mode switch behind another
    // connection's lock): on the new store's own threads, which it keeps.
    let workers = Workers::default();
    workers.clone().run(
        env,
        move || guarded("openStore", || open.open()).0,
        move |store| {
            Ok(NativeStore {
                store: Arc::new(Mutex::new(Some(Arc::new(store)))),
                workers,
                poisoned: Arc::new(std::sync::atomic::AtomicBool::new(false)),
                followers: Arc::default(),
            })
        },
    )
}

/// The log file a native WAL store at `root` keeps for session `id`
/// (computed, never touched).
#[napi(catch_unwind)]
pub fn wal_log_path(root: String, id: Utf16String) -> napi::Result<String> {
    fault_point("walLogPath");
    Ok(Path::new(&root)
        .join("sessions")
        .join(format!(
            "{}{LOG_EXTENSION}",
            encode_file_name(&session_id(&id)?)
        ))
        .to_string_lossy()
        .into_owned())
}

/// A session id as JavaScript holds it, UTF-16 units and all: napi's UTF-8
/// conversion would turn a lone surrogate into U+FFFD and so name another
/// session. turnwal spells it exactly (`turnwal::jsstr`).
fn session_id(units: &[u16]) -> napi::Result<String> {
    turnwal::jsstr::from_utf16(units).map_err(|why| invalid(format!("session id: {why}")))
}

/// The turnwal library version this addon was built from.
#[napi(catch_unwind)]
pub fn version() -> String {
    fault_point("version");
    env!("CARGO_PKG_VERSION").to_owned()
}

mod follower;
mod workers;
use workers::Workers;

#[cfg(test)]
mod tests;
