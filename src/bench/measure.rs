//! turnwal's side of every comparison, and the comparisons themselves:
//! which sides answer which question, on which fixture.
//!
//! | comparison | turnwal | baselines |
//! |---|---|---|
//! | [`append`] | `Store::append`, `--sync never`, one batch per turn, validated events | [`baselines::RawWrite`], [`baselines::JsonlWrite`], turnwal on SQLite (`synchronous=NORMAL`), bare SQLite inserting the same rows ([`baselines::Sqlite::normal`]) |
//! | [`ingest`] | `IncomingEvent::parse` + `complete` + `Store::append` (the `turnwal append` path) | [`baselines::JsonValidate`] |
//! | [`durable`] | `Store::append`, `--sync turn` (one fdatasync per turn) | [`baselines::RawFsync`], [`baselines::Sqlite`], turnwal on SQLite (`synchronous=FULL`) |
//! | [`scan`] | `Backend::scan` of a page-cached log | [`baselines::MmapCrc`], [`baselines::JsonlParse`]; in `turnwal bench`, also [`SqliteScan`] of the same session in the SQLite backend |
//! | [`full_load`] | `Store::view`, every `EventRef` touched | — (memory reported by [`load_memory`]) |
//! | [`tail_read`] | `Store::read_from(len - 50)` on a large session | the same on a small session |
//! | [`list`] | `Store::list` of a store of many sessions | — |
//! | [`list_jsonl`] | `Store::list` of an upstream JSONL root (raw or zstd) | [`ListJsonlHeaders`]: every header alone, as upstream's `list` reads |
//! | [`reopen`] | `Store::resume` on a fresh `Store` (a writer reopened) on a large session | the same on a small session |

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::baselines;
use super::fixtures::{AppendFixture, JsonlListFixture, ListFixture, SessionFixture};
use super::stats::Memory;
use super::{BenchResult, Comparison, Runs, Side};
use turnwal::SyncMode;
use turnwal::backend::Backend;
use turnwal::backend::jsonl::{self, Compression, JsonlBackend};
use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions, Synchronous};
use turnwal::backend::wal::WalBackend;
use turnwal::event::IncomingEvent;
use turnwal::scan::LogState;
use turnwal::store::{Store, StoreOptions};

/// How a [`StoreAppend`] feeds the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// Validated events, `--sync never`.
    Buffered,
    /// JSON lines parsed and completed as `turnwal append` does, `--sync never`.
    Ingest,
    /// Validated events, `--sync turn`; one latency per turn.
    Durable,
}

/// Which backend a turnwal side stores into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The native WAL (the side named `turnwal`).
    Wal,
    /// The SQLite backend with this `PRAGMA synchronous` (the side named
    /// `turnwal_sqlite_normal` or `turnwal_sqlite_full`).
    Sqlite(Synchronous),
    /// An upstream JSONL root in this encoding (the side named
    /// `turnwal_jsonl_raw` or `turnwal_jsonl_zstd`).
    Jsonl(Compression),
}

/// turnwal appending a fixture's turns, one batch per turn.
pub struct StoreAppend<'a> {
    fx: &'a AppendFixture,
    runs: Runs,
    feed: Feed,
    engine: Engine,
    latencies: Vec<Duration>,
}

impl<'a> StoreAppend<'a> {
    /// Appends `fx`'s turns into fresh WAL stores under `scratch`.
    pub fn new(fx: &'a AppendFixture, scratch: &Path, feed: Feed) -> StoreAppend<'a> {
        StoreAppend::on(fx, scratch, feed, Engine::Wal)
    }

    /// Appends `fx`'s turns into fresh stores of `engine` under `scratch`.
    pub fn on(
        fx: &'a AppendFixture,
        scratch: &Path,
        feed: Feed,
        engine: Engine,
    ) -> StoreAppend<'a> {
        StoreAppend {
            fx,
            runs: Runs::new(scratch, &format!("turnwal-{engine:?}-{feed:?}")),
            feed,
            engine,
            latencies: Vec::new(),
        }
    }
}

impl Side for StoreAppend<'_> {
    fn name(&self) -> &str {
        match self.engine {
            Engine::Wal => "turnwal",
            Engine::Sqlite(Synchronous::Normal) => "turnwal_sqlite_normal",
            Engine::Sqlite(Synchronous::Full) => "turnwal_sqlite_full",
            Engine::Jsonl(Compression::None) => "turnwal_jsonl_raw",
            Engine::Jsonl(Compression::Zstd) => "turnwal_jsonl_zstd",
        }
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let dir = self.runs.fresh()?;
        let sync = match self.feed {
            Feed::Buffered | Feed::Ingest => SyncMode::Never,
            Feed::Durable => SyncMode::Turn,
        };
        let store = match self.engine {
            Engine::Wal => self.fx.prepare(&dir, sync)?,
            Engine::Sqlite(synchronous) => self.fx.prepare_sqlite(&dir, sync, synchronous)?,
            Engine::Jsonl(compression) => self.fx.prepare_jsonl(&dir, sync, compression)?,
        };
        let id = self.fx.id.as_str();
        let start = Instant::now();
        match self.feed {
            Feed::Buffered => {
                for turn in &self.fx.turns {
                    store.append(id, turn)?;
                }
            }
            Feed::Ingest => {
                let mut next = self.fx.first.len() as u64;
                for lines in &self.fx.lines {
                    next = ingest_batch(&store, id, next, lines)?;
                }
            }
            Feed::Durable => {
                for turn in &self.fx.turns {
                    let t = Instant::now();
                    let receipt = store.append(id, turn)?;
                    self.latencies.push(t.elapsed());
                    debug_assert_eq!(receipt.durable, receipt.next_seq);
                }
            }
        }
        let elapsed = start.elapsed();
        drop(store);
        Runs::done(dir);
        Ok(elapsed)
    }

    fn latencies(&self) -> &[Duration] {
        &self.latencies
    }
}

/// What `turnwal append` does with a batch of input lines (minus reading
/// stdin and printing acks): parse and validate each line, check its seq,
/// complete it, and append the batch. Returns the next seq.
pub fn ingest_batch(store: &Store, id: &str, next_seq: u64, lines: &[Vec<u8>]) -> BenchResult<u64> {
    let mut batch = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let expected = next_seq + i as u64;
        let incoming = IncomingEvent::parse(line)?;
        if incoming.seq.is_some_and(|s| s != expected) {
            return Err(format!("seq mismatch at {expected}").into());
        }
        let time = incoming.time.unwrap_or(0);
        batch.push(incoming.complete(expected, time)?);
    }
    Ok(store.append(id, &batch)?.next_seq)
}

/// turnwal's ingest without the append: every line parsed, validated and
/// completed into an event as `turnwal append` does, nothing written — what
/// the engine adds to reading the JSON at all.
pub struct ParseOnly<'a> {
    fx: &'a AppendFixture,
}

impl Side for ParseOnly<'_> {
    fn name(&self) -> &str {
        "turnwal_parse"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let mut seq = self.fx.first.len() as u64;
        for lines in &self.fx.lines {
            for line in lines {
                let incoming = IncomingEvent::parse(line)?;
                let time = incoming.time.unwrap_or(0);
                std::hint::black_box(incoming.complete(seq, time)?);
                seq += 1;
            }
        }
        Ok(start.elapsed())
    }
}

/// Buffered append (`--sync never`) of validated events: turnwal vs the
/// same encoded bytes written with plain `write` calls, one per turn, vs a
/// serde_json + `BufWriter` JSONL writer, vs turnwal's SQLite backend with
/// `synchronous=NORMAL` (its nearest to `--sync never`: a commit is not
/// fsynced in WAL journal mode). Bytes are the events' JSONL volume for
/// every side, so MiB/s compare like events/s.
pub fn append<'a>(fx: &'a AppendFixture, scratch: &Path) -> Comparison<'a> {
    Comparison {
        name: "append_buffered".into(),
        events: fx.events,
        bytes: fx.jsonl_bytes,
        ops: None,
        sides: vec![
            Box::new(StoreAppend::new(fx, scratch, Feed::Buffered)),
            Box::new(baselines::RawWrite::new(fx, scratch)),
            Box::new(baselines::JsonlWrite::new(fx, scratch)),
            Box::new(StoreAppend::on(
                fx,
                scratch,
                Feed::Buffered,
                Engine::Sqlite(Synchronous::Normal),
            )),
            Box::new(baselines::Sqlite::normal(fx, scratch)),
        ],
    }
}

/// Ingest from JSON text (the `turnwal append` path, validation included,
/// `--sync never`) vs serde_json validating the same text and nothing else.
pub fn ingest<'a>(fx: &'a AppendFixture, scratch: &Path) -> Comparison<'a> {
    Comparison {
        name: "ingest_text".into(),
        events: fx.events,
        bytes: fx.jsonl_bytes,
        ops: None,
        sides: vec![
            Box::new(StoreAppend::new(fx, scratch, Feed::Ingest)),
            Box::new(baselines::JsonValidate::new(fx)),
            Box::new(baselines::ValidateWrite::new(fx, scratch)),
            Box::new(ParseOnly { fx }),
        ],
    }
}

/// Durable turns (`--sync turn`): turnwal vs a raw loop writing each turn's
/// encoded bytes and calling fdatasync, vs SQLite (WAL mode,
/// `synchronous=FULL`) inserting each turn's rows in one transaction, vs
/// turnwal's SQLite backend (`--sync turn`, WAL mode, `synchronous=FULL`:
/// the same database settings as the bare SQLite side, plus turnwal's
/// schema, row encoding, ownership and stored-tail checks).
pub fn durable<'a>(fx: &'a AppendFixture, scratch: &Path) -> Comparison<'a> {
    Comparison {
        name: "durable_turns".into(),
        events: fx.events,
        bytes: fx.jsonl_bytes,
        ops: Some((fx.turns.len() as u64, "turns")),
        sides: vec![
            Box::new(StoreAppend::new(fx, scratch, Feed::Durable)),
            Box::new(baselines::RawFsync::new(fx, scratch)),
            Box::new(baselines::Sqlite::new(fx, scratch)),
            Box::new(StoreAppend::on(
                fx,
                scratch,
                Feed::Durable,
                Engine::Sqlite(Synchronous::Full),
            )),
        ],
    }
}

/// turnwal's recovery scan: open the log, validate every record's framing
/// and checksum, find the commit point, classify the tail, build closers.
pub struct Scan {
    backend: WalBackend,
    id: String,
}

impl Scan {
    /// Scans `fx`'s session.
    pub fn new(fx: &SessionFixture) -> BenchResult<Scan> {
        Ok(Scan {
            backend: WalBackend::open(&fx.dir)?,
            id: fx.id.clone(),
        })
    }
}

impl Side for Scan {
    fn name(&self) -> &str {
        "turnwal"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let scan = self
            .backend
            .scan(&self.id)?
            .ok_or("the fixture session is missing")?;
        let elapsed = start.elapsed();
        std::hint::black_box(scan);
        Ok(elapsed)
    }
}

/// turnwal's recovery scan of the same session in its SQLite backend:
/// read every row of the session, decode it (packed chunk runs included),
/// find the commit row, classify the tail.
pub struct SqliteScan {
    backend: SqliteBackend,
    id: String,
    bytes: u64,
}

impl SqliteScan {
    /// Scans session `id` of the database `db`, `bytes` long.
    pub fn new(db: &Path, id: &str, bytes: u64) -> BenchResult<SqliteScan> {
        Ok(SqliteScan {
            backend: SqliteBackend::open(db, SqliteOptions::default())?,
            id: id.to_owned(),
            bytes,
        })
    }
}

impl Side for SqliteScan {
    fn name(&self) -> &str {
        "turnwal_sqlite"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let scan = self
            .backend
            .scan(&self.id)?
            .ok_or("the fixture session is missing from the database")?;
        let elapsed = start.elapsed();
        std::hint::black_box(scan);
        Ok(elapsed)
    }

    fn bytes(&self) -> Option<u64> {
        Some(self.bytes)
    }
}

/// Recovery scan of a page-cached log (`fx`, clean or with an open final
/// turn) vs mmap + CRC-32 of the same bytes vs serde_json parsing the same
/// events as JSONL. Bytes: the log's size (the JSONL side its own).
pub fn scan<'a>(fx: &'a SessionFixture, label: &str) -> BenchResult<Comparison<'a>> {
    let jsonl = fx
        .jsonl
        .as_ref()
        .ok_or("the scan fixture needs its JSONL")?;
    Ok(Comparison {
        name: format!("recovery_scan/{label}"),
        events: fx.events,
        bytes: fx.log_bytes,
        ops: None,
        sides: vec![
            Box::new(Scan::new(fx)?),
            Box::new(baselines::MmapCrc::new(&fx.log)),
            Box::new(baselines::JsonlParse::new(jsonl, fx.jsonl_bytes)),
        ],
    })
}

/// A read of one session through a cold `Store` (one that never opened it
/// for writing).
pub struct Read {
    store: Store,
    id: String,
    events: u64,
    bytes: u64,
    name: String,
    kind: ReadKind,
}

/// What a [`Read`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// `Store::view`, touching every event's type and payload.
    FullLoad,
    /// `Store::read_from` of the last this-many events.
    Tail(u64),
}

impl Read {
    /// Reads `fx`'s session; `name` labels the side.
    pub fn new(fx: &SessionFixture, kind: ReadKind, name: &str) -> BenchResult<Read> {
        Ok(Read {
            store: Store::open(&fx.dir)?,
            id: fx.id.clone(),
            events: fx.events,
            bytes: fx.log_bytes,
            name: name.to_owned(),
            kind,
        })
    }
}

impl Side for Read {
    fn name(&self) -> &str {
        &self.name
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        match self.kind {
            ReadKind::FullLoad => {
                let touched = full_load(&self.store, &self.id)?;
                let elapsed = start.elapsed();
                std::hint::black_box(touched);
                Ok(elapsed)
            }
            ReadKind::Tail(n) => {
                let events = self
                    .store
                    .read_from(&self.id, self.events.saturating_sub(n))?;
                let elapsed = start.elapsed();
                if events.len() as u64 != n.min(self.events) {
                    return Err(format!("tail read gave {} events", events.len()).into());
                }
                Ok(elapsed)
            }
        }
    }

    fn bytes(&self) -> Option<u64> {
        match self.kind {
            ReadKind::FullLoad => Some(self.bytes),
            ReadKind::Tail(_) => None,
        }
    }
}

/// Loads a session in place and touches every event (type, seq and the
/// payload's bytes, so every page is read); returns the bytes touched.
pub fn full_load(store: &Store, id: &str) -> BenchResult<u64> {
    let view = store.view(id)?;
    let mut touched = 0u64;
    for e in view.iter() {
        let data = e.data().as_bytes();
        touched += (e.seq() & 1) + e.event_type().len() as u64 + data.len() as u64;
        touched += u64::from(data[data.len() / 2]);
    }
    Ok(touched)
}

/// Full load of a session (payloads borrowed from the map, not copied):
/// `fx` alone; its memory is reported by [`load_memory`].
pub fn load<'a>(fx: &SessionFixture) -> BenchResult<Comparison<'a>> {
    Ok(Comparison {
        name: format!("full_load/{}", count_label(fx.events)),
        events: fx.events,
        bytes: fx.log_bytes,
        ops: None,
        sides: vec![Box::new(Read::new(fx, ReadKind::FullLoad, "turnwal")?)],
    })
}

/// What loading a session costs in memory.
#[derive(Debug, Clone, Copy)]
pub struct LoadMemory {
    /// The log's size.
    pub file_bytes: u64,
    /// Before the load.
    pub before: Memory,
    /// With the loaded view alive, every event touched.
    pub loaded: Memory,
}

impl LoadMemory {
    /// Growth of the resident set (mapped pages and heap) over the file size.
    pub fn rss_ratio(&self) -> f64 {
        self.loaded.rss.saturating_sub(self.before.rss) as f64 / self.file_bytes.max(1) as f64
    }

    /// Growth of the heap alone over the file size.
    pub fn anon_ratio(&self) -> f64 {
        self.loaded.anon.saturating_sub(self.before.anon) as f64 / self.file_bytes.max(1) as f64
    }
}

/// Loads `fx`'s session with [`full_load`] and reads the process's memory
/// before and while the view is alive. Page-cached file pages a map
/// touches count in the resident set (`RssFile`), so a view of a log costs
/// about its size in RSS; the heap (`RssAnon`) holds the index.
pub fn load_memory(fx: &SessionFixture) -> BenchResult<LoadMemory> {
    let (before, loaded) = memory_of_load(&Store::open(&fx.dir)?, &fx.id)?;
    Ok(LoadMemory {
        file_bytes: fx.log_bytes,
        before,
        loaded,
    })
}

/// What loading `fx`'s session costs in memory once compacted (every
/// closed turn sealed in zstd units, which a load decompresses onto the
/// heap), against the size of the session uncompressed (`fx`'s plain log):
/// issue 16's bound is 1.5×. Compacts a copy in `scratch`; returns the
/// measurement and the compacted file's size.
pub fn compact_load_memory(fx: &SessionFixture, scratch: &Path) -> BenchResult<(LoadMemory, u64)> {
    let dir = scratch.join("compact-load");
    copy_tree(&fx.dir, &dir)?;
    let store = Store::open(&dir)?;
    store.compact(&fx.id)?;
    store.close(&fx.id)?;
    drop(store);
    let compacted = WalBackend::open(&dir)?.session_bytes(&fx.id)?;
    // What compaction freed goes back to the system first, so the load's
    // growth is not hidden in memory the allocator kept.
    // glibc's alone: elsewhere the figure includes what the allocator kept.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; no pointer is involved.
    unsafe {
        libc::malloc_trim(0)
    };
    let (before, loaded) = memory_of_load(&Store::open(&dir)?, &fx.id)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((
        LoadMemory {
            file_bytes: fx.log_bytes,
            before,
            loaded,
        },
        compacted,
    ))
}

/// The process's memory before a full load of `id` and while its view is
/// alive, every event's payload touched (so every page is read).
fn memory_of_load(store: &Store, id: &str) -> BenchResult<(Memory, Memory)> {
    let before = Memory::now();
    let view = store.view(id)?;
    let mut touched = 0u64;
    for e in view.iter() {
        let data = e.data().as_bytes();
        touched += data.len() as u64 + u64::from(data[0]);
    }
    std::hint::black_box(touched);
    Ok((before, Memory::now()))
}

fn copy_tree(from: &Path, to: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Tail read of the last `n` events of a large session vs the same read of
/// a small one (the target: within 2×, so the ratio should stay ≥ 0.5).
pub fn tail_read<'a>(
    large: &SessionFixture,
    small: &SessionFixture,
    n: u64,
) -> BenchResult<Comparison<'a>> {
    Ok(Comparison {
        name: format!("tail_read_{n}"),
        events: n,
        bytes: 0,
        ops: None,
        sides: vec![
            Box::new(Read::new(
                large,
                ReadKind::Tail(n),
                &count_label(large.events),
            )?),
            Box::new(Read::new(
                small,
                ReadKind::Tail(n),
                &count_label(small.events),
            )?),
        ],
    })
}

/// `Store::list` on a fresh `Store` over a page-cached store of many
/// sessions.
pub struct List {
    dir: PathBuf,
    sessions: usize,
}

impl Side for List {
    fn name(&self) -> &str {
        "turnwal"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let store = Store::open(&self.dir)?;
        let listed = store.list()?;
        let elapsed = start.elapsed();
        if listed.len() != self.sessions {
            return Err(format!("listed {} of {} sessions", listed.len(), self.sessions).into());
        }
        Ok(elapsed)
    }
}

/// Listing a store of `fx.sessions` sessions (the rate is sessions/s).
pub fn list<'a>(fx: &ListFixture) -> Comparison<'a> {
    Comparison {
        name: format!("list/{}", count_label(fx.sessions as u64)),
        events: 0,
        bytes: fx.bytes,
        ops: Some((fx.sessions as u64, "sessions")),
        sides: vec![Box::new(List {
            dir: fx.dir.clone(),
            sessions: fx.sessions,
        })],
    }
}

/// `Store::list` on a fresh `Store` over a page-cached upstream JSONL root:
/// every session's line (events, turns, state), read from the log's ends.
pub struct ListJsonl {
    dir: PathBuf,
    compression: Compression,
    sessions: usize,
}

impl Side for ListJsonl {
    fn name(&self) -> &str {
        "turnwal"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let store = Store::with_backend(
            Arc::new(JsonlBackend::open(&self.dir, self.compression)?),
            StoreOptions::default(),
        );
        let listed = store.list()?;
        let elapsed = start.elapsed();
        if listed.len() != self.sessions || listed.iter().any(|s| s.state != LogState::OpenTurn) {
            return Err(
                format!("listed {} of {} open sessions", listed.len(), self.sessions).into(),
            );
        }
        Ok(elapsed)
    }
}

/// Upstream's own `list`: every transcript's header and nothing else (the
/// first line, or the first frame decompressed), parsed.
pub struct ListJsonlHeaders {
    logs: Vec<PathBuf>,
    compression: Compression,
}

impl Side for ListJsonlHeaders {
    fn name(&self) -> &str {
        "headers_only"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        for path in &self.logs {
            let mut head = vec![0; 8192];
            let n = File::open(path)?.read(&mut head)?;
            head.truncate(n);
            let line = match self.compression {
                Compression::None => head,
                Compression::Zstd => {
                    let frames = jsonl::zstd::scan_frames(&head, 1).map_err(|e| e.reason)?;
                    let first = frames.frames.first().ok_or("no header frame")?;
                    jsonl::zstd::decompress_frame(&head[first.clone()])?
                }
            };
            let end = line
                .iter()
                .position(|&b| b == b'\n')
                .ok_or("no header line")?;
            jsonl::header::parse_header_line(&line[..end]).map_err(|e| format!("{e:?}"))?;
        }
        Ok(start.elapsed())
    }
}

/// Listing an upstream JSONL root of `fx.sessions` sessions, against
/// reading their headers alone (what upstream's `list` returns).
pub fn list_jsonl<'a>(fx: &JsonlListFixture) -> Comparison<'a> {
    Comparison {
        name: format!(
            "list_{}/{}",
            match fx.compression {
                Compression::None => "jsonl",
                Compression::Zstd => "jsonl_zstd",
            },
            count_label(fx.sessions as u64)
        ),
        events: 0,
        bytes: fx.bytes,
        ops: Some((fx.sessions as u64, "sessions")),
        sides: vec![
            Box::new(ListJsonl {
                dir: fx.dir.clone(),
                compression: fx.compression,
                sessions: fx.sessions,
            }),
            Box::new(ListJsonlHeaders {
                logs: fx.logs.clone(),
                compression: fx.compression,
            }),
        ],
    }
}

/// Reopening a writer: a fresh `Store` and `Store::resume` (the writer
/// lock, the fdatasync at open, finding where appends continue) on a clean
/// session; the store is dropped (the lock released) untimed.
pub struct Reopen {
    dir: PathBuf,
    id: String,
    events: u64,
    name: String,
}

impl Reopen {
    /// Reopens `fx`'s session; `name` labels the side.
    pub fn new(fx: &SessionFixture, name: &str) -> Reopen {
        Reopen {
            dir: fx.dir.clone(),
            id: fx.id.clone(),
            events: fx.events,
            name: name.to_owned(),
        }
    }
}

impl Side for Reopen {
    fn name(&self) -> &str {
        &self.name
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let options = StoreOptions {
            sync: SyncMode::Turn,
            ..StoreOptions::default()
        };
        let start = Instant::now();
        let store = Store::open_with_options(&self.dir, options)?;
        let receipt = store.resume(&self.id)?;
        let elapsed = start.elapsed();
        drop(store);
        if receipt.next_seq != self.events {
            return Err(format!("resumed at {} of {}", receipt.next_seq, self.events).into());
        }
        Ok(elapsed)
    }
}

/// Reopening a writer on a large clean session vs on a small one (the
/// target: within 2×, ratio ≥ 0.5).
pub fn reopen<'a>(large: &SessionFixture, small: &SessionFixture) -> Comparison<'a> {
    Comparison {
        name: "reopen_writer".into(),
        events: 0,
        bytes: 0,
        ops: Some((1, "reopens")),
        sides: vec![
            Box::new(Reopen::new(large, &size_label(large.log_bytes))),
            Box::new(Reopen::new(small, &size_label(small.log_bytes))),
        ],
    }
}

/// Bytes at rest of one session, every turn closed, the same events
/// appended in the same batches (one per turn) into each store: what
/// [`disk_at_rest`] measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskAtRest {
    /// Events in the session.
    pub events: u64,
    /// The native WAL log in format version 1 (no chunk-run records).
    pub v1: u64,
    /// The version-2 log as its writer leaves it with sealing off: chunk
    /// runs packed, nothing sealed (the size before compaction).
    pub v2_plain: u64,
    /// The version-2 log after `Store::close` (a writer seals by itself
    /// after large batches and at a clean close): every closed turn sealed.
    pub compact: u64,
    /// The upstream JSONL transcript, zstd (one frame per append batch).
    pub jsonl_zstd: u64,
    /// The upstream JSONL transcript, raw (chunk runs packed into rows).
    pub jsonl_raw: u64,
}

impl DiskAtRest {
    /// `bytes` per event.
    pub fn per_event(&self, bytes: u64) -> f64 {
        bytes as f64 / self.events.max(1) as f64
    }
}

/// Writes every turn of `fx` (its first included), one batch per turn with
/// `--sync never`, into a version-1 WAL store, a version-2 one that never
/// seals, a version-2 one that seals as a writer does and is closed, and
/// upstream JSONL roots in zstd and raw, all in `scratch/disk` (removed
/// after); returns their sizes.
pub fn disk_at_rest(fx: &AppendFixture, scratch: &Path) -> BenchResult<DiskAtRest> {
    use turnwal::backend::wal::format::{FORMAT_V1, FORMAT_V2, FORMAT_VERSION};
    let dir = scratch.join("disk");
    let wal = |name: &str, version: u16, seal: bool| -> BenchResult<u64> {
        let at = dir.join(name);
        let store = fx.prepare_wal(&at, SyncMode::Never, version, seal)?;
        for turn in &fx.turns {
            store.append(&fx.id, turn)?;
        }
        store.close(&fx.id)?;
        Ok(WalBackend::open(&at)?.session_bytes(&fx.id)?)
    };
    let jsonl = |name: &str, compression: Compression| -> BenchResult<u64> {
        let at = dir.join(name);
        let store = fx.prepare_jsonl(&at, SyncMode::Never, compression)?;
        for turn in &fx.turns {
            store.append(&fx.id, turn)?;
        }
        store.close(&fx.id)?;
        let header = store.header(&fx.id)?;
        let path = jsonl::layout::log_path(
            &at.join("jsonl"),
            header.cwd.as_deref(),
            &header.id,
            compression,
        )?;
        Ok(std::fs::metadata(path)?.len())
    };
    let sizes = (|| -> BenchResult<DiskAtRest> {
        Ok(DiskAtRest {
            events: fx.events + fx.first.len() as u64,
            v1: wal("v1", FORMAT_V1, false)?,
            v2_plain: wal("v2", FORMAT_V2, false)?,
            compact: wal("compact", FORMAT_VERSION, true)?,
            jsonl_zstd: jsonl("zstd", Compression::Zstd)?,
            jsonl_raw: jsonl("raw", Compression::None)?,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    sizes
}

/// `1k`, `1M`, `10k` for a count.
pub fn count_label(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 < 100_000 => format!("{}M", n / 1_000_000),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// `10MiB`, `1GiB` for a size (rounded down).
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{}GiB", bytes >> 30)
    } else {
        format!("{}MiB", bytes >> 20)
    }
}
