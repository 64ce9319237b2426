//! The inputs of the benches, built from the [`workload`]: event batches in
//! memory (with their encoded records, JSON lines and JSONL-writer values,
//! so every side of an append comparison starts from the same events) and
//! session files on disk (a log of a given size, a store of many sessions).

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::value::RawValue;

use super::BenchResult;
use super::workload::{self, Workload};
use turnwal::SyncMode;
use turnwal::backend::jsonl::{self, Compression};
use turnwal::backend::sqlite::{SqliteOptions, Synchronous};
use turnwal::backend::wal::{WalBackend, encode_file_name, format};
use turnwal::contract::{Policy, Tracker};
use turnwal::event::Event;
use turnwal::header::SessionHeader;
use turnwal::store::{Store, StoreOptions};
use turnwal::view::EventRef;

/// The checksum salt of the records a fixture encodes itself (a real writer
/// draws one at random; the cost of the CRC does not depend on it).
pub const SALT: u32 = 0x5eed_5a17;

/// An event as the upstream harness's raw JSONL writer holds it: validated
/// already, its `data` a `RawValue` that serializes as the text it holds.
#[derive(Debug, Serialize)]
pub struct JsonlEvent {
    /// The type name.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The seq.
    pub seq: u64,
    /// The time.
    pub time: i64,
    /// The payload.
    pub data: Box<RawValue>,
}

impl JsonlEvent {
    /// The JSONL writer's copy of `event`.
    pub fn of(event: &Event) -> JsonlEvent {
        JsonlEvent {
            event_type: event.event_type().to_owned(),
            seq: event.seq(),
            time: event.time(),
            data: RawValue::from_string(event.data().get().to_owned())
                .expect("an event's data is valid JSON"),
        }
    }
}

/// A session's turns in memory, in every form an append comparison needs.
///
/// The first turn materializes the session in every side's untimed setup
/// (turnwal fsyncs a new session's first batch, which is not what an append
/// costs); the timed part appends `turns`.
#[derive(Debug)]
pub struct AppendFixture {
    /// The session id.
    pub id: String,
    /// The materializing turn.
    pub first: Vec<Event>,
    /// The measured turns.
    pub turns: Vec<Vec<Event>>,
    /// Each measured turn's records, encoded as turnwal writes them.
    pub encoded: Vec<Vec<u8>>,
    /// Each measured turn's events as JSON lines (no newline), the text
    /// `turnwal append` reads.
    pub lines: Vec<Vec<Vec<u8>>>,
    /// Each measured turn as the JSONL writer holds it.
    pub jsonl: Vec<Vec<JsonlEvent>>,
    /// Events in `turns`.
    pub events: u64,
    /// Bytes of `turns` as JSONL (newlines included): the logical volume.
    pub jsonl_bytes: u64,
    /// Bytes of `encoded`.
    pub encoded_bytes: u64,
}

impl AppendFixture {
    /// The first `turns + 1` turns of the workload from `seed`.
    pub fn new(seed: u64, turns: usize) -> AppendFixture {
        AppendFixture::of_turns(workload::session(seed, turns + 1))
    }

    /// The first `turns + 1` turns of the realistic session from `seed`
    /// (upstream's event shapes, mostly streamed deltas:
    /// `turnwal_testkit::workload::realistic`).
    pub fn realistic(seed: u64, turns: usize) -> AppendFixture {
        let mut session = turnwal_testkit::workload::realistic::Realistic::new(seed);
        AppendFixture::of_turns((0..=turns).map(|_| session.next_turn()).collect())
    }

    /// The fixture of `all`: its first turn materializes the session, the
    /// rest are appended.
    fn of_turns(all: Vec<Vec<Event>>) -> AppendFixture {
        let mut all = all.into_iter();
        let first = all.next().expect("at least one turn");
        let turns: Vec<Vec<Event>> = all.collect();
        let mut tracker = Tracker::new(Policy::Strict);
        tracker
            .accept_batch(&first)
            .expect("the workload keeps the contract");
        let encoded: Vec<Vec<u8>> = turns
            .iter()
            .map(|batch| {
                let placements = tracker
                    .accept_batch(batch)
                    .expect("the workload keeps the contract");
                let mut bytes = Vec::new();
                for (e, p) in batch.iter().zip(placements) {
                    format::encode_record(&mut bytes, e, p, 0, SALT);
                }
                bytes
            })
            .collect();
        let lines = turns
            .iter()
            .map(|batch| batch.iter().map(|e| e.to_json().into_bytes()).collect())
            .collect();
        let jsonl = turns
            .iter()
            .map(|batch| batch.iter().map(JsonlEvent::of).collect())
            .collect();
        AppendFixture {
            id: "bench".into(),
            events: turns.iter().map(|t| t.len() as u64).sum(),
            jsonl_bytes: workload::jsonl_bytes(turns.iter().flatten()),
            encoded_bytes: encoded.iter().map(|t| t.len() as u64).sum(),
            first,
            turns,
            encoded,
            lines,
            jsonl,
        }
    }

    /// A new store in `dir` holding the session materialized with the first
    /// turn, ready for the measured appends.
    pub fn prepare(&self, dir: &Path, sync: SyncMode) -> BenchResult<Store> {
        let options = StoreOptions {
            sync,
            ..StoreOptions::default()
        };
        let store = Store::open_with_options(dir, options)?;
        self.materialize(store)
    }

    /// Like [`AppendFixture::prepare`], in a new SQLite store (the database
    /// `dir/sessions.sqlite`, WAL journal) with `PRAGMA synchronous` set to
    /// `synchronous`.
    pub fn prepare_sqlite(
        &self,
        dir: &Path,
        sync: SyncMode,
        synchronous: Synchronous,
    ) -> BenchResult<Store> {
        let options = StoreOptions {
            sync,
            ..StoreOptions::default()
        };
        let sqlite = SqliteOptions {
            synchronous,
            ..SqliteOptions::default()
        };
        let store = Store::open_sqlite(dir.join("sessions.sqlite"), sqlite, options)?;
        self.materialize(store)
    }

    /// Like [`AppendFixture::prepare`], in a new upstream JSONL root
    /// (`dir/jsonl`) in `compression`.
    pub fn prepare_jsonl(
        &self,
        dir: &Path,
        sync: SyncMode,
        compression: Compression,
    ) -> BenchResult<Store> {
        let options = StoreOptions {
            sync,
            ..StoreOptions::default()
        };
        let backend = jsonl::JsonlBackend::open(dir.join("jsonl"), compression)?;
        let store = Store::with_backend(std::sync::Arc::new(backend), options);
        store.create(SessionHeader::new(self.id.clone(), 1_700_000_000_000).with_cwd("/work"))?;
        store.append(&self.id, &self.first)?;
        Ok(store)
    }

    /// Like [`AppendFixture::prepare`], in a new native WAL store at `dir`
    /// creating the session in format `version` (1 or 2), its writer
    /// sealing by itself or not ([`WalBackend::sealing_by_itself`]).
    pub fn prepare_wal(
        &self,
        dir: &Path,
        sync: SyncMode,
        version: u16,
        seal: bool,
    ) -> BenchResult<Store> {
        let options = StoreOptions {
            sync,
            ..StoreOptions::default()
        };
        let backend = WalBackend::open(dir)?
            .creating_version(version)
            .sealing_by_itself(seal);
        self.materialize(Store::with_backend(std::sync::Arc::new(backend), options))
    }

    fn materialize(&self, store: Store) -> BenchResult<Store> {
        store.create(SessionHeader::new(self.id.clone(), 1_700_000_000_000))?;
        store.append(&self.id, &self.first)?;
        Ok(store)
    }
}

/// When a [`SessionFixture`] stops growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// At the first turn boundary where the log holds this many bytes.
    Bytes(u64),
    /// At the first turn boundary where the log holds this many events.
    Events(u64),
}

/// One session on disk, written through the library with `--sync never`
/// and made durable at the end (so nothing is dirty when it is read),
/// optionally with the same events as JSONL beside it. Its last turn is
/// appended after a flush, so the log ends as a `--sync turn` writer leaves
/// it: the last turn's records name the previous turn's end as durable.
#[derive(Debug)]
pub struct SessionFixture {
    /// The store directory.
    pub dir: PathBuf,
    /// The session id.
    pub id: String,
    /// The session's log file.
    pub log: PathBuf,
    /// The same events as one-event-per-line JSONL, if asked for.
    pub jsonl: Option<PathBuf>,
    /// Events stored.
    pub events: u64,
    /// Size of the log.
    pub log_bytes: u64,
    /// Size of the JSONL form of the same events (computed even without
    /// the file).
    pub jsonl_bytes: u64,
    /// Whether the log ends in an open turn.
    pub open_turn: bool,
    workload: Workload,
}

impl SessionFixture {
    /// Writes session `id` into the store at `dir` from the workload of
    /// `seed`, until `until` is reached, and then one more turn.
    pub fn build(
        dir: &Path,
        id: &str,
        seed: u64,
        until: Until,
        with_jsonl: bool,
    ) -> BenchResult<SessionFixture> {
        let options = StoreOptions {
            sync: SyncMode::Never,
            ..StoreOptions::default()
        };
        fs::create_dir_all(dir)?;
        // Plain records: the benches measure scanning and reading them.
        let backend = WalBackend::open(dir)?.sealing_by_itself(false);
        let store = Store::with_backend(std::sync::Arc::new(backend), options);
        store.create(SessionHeader::new(id, 1_700_000_000_000))?;
        let log = WalBackend::open(dir)?.log_path(id);
        let jsonl = with_jsonl.then(|| dir.join(format!("{}.jsonl", encode_file_name(id))));
        let mut out = match &jsonl {
            Some(path) => Some(BufWriter::with_capacity(1 << 20, File::create(path)?)),
            None => None,
        };
        let mut workload = Workload::new(seed);
        let (mut events, mut jsonl_bytes, mut log_bytes) = (0u64, 0u64, 0u64);
        let mut line = Vec::new();
        let mut last = false;
        loop {
            let turn = workload.next_turn();
            store.append(id, &turn)?;
            for e in &turn {
                line.clear();
                e.write_json(&mut line);
                line.push(b'\n');
                jsonl_bytes += line.len() as u64;
                if let Some(out) = &mut out {
                    out.write_all(&line)?;
                }
            }
            events += turn.len() as u64;
            if let Until::Bytes(_) = until {
                log_bytes = fs::metadata(&log)?.len();
            }
            if last {
                break;
            }
            // One more turn once the size is reached, after a flush: its
            // records then carry the previous turn's end as their watermark,
            // as a `--sync turn` writer leaves a log (a `never` writer's last
            // watermark can lie 64 MiB back, and the tail probe of reads and
            // reopens validates everything after it).
            last = match until {
                Until::Bytes(n) => log_bytes >= n,
                Until::Events(n) => events >= n,
            };
            if last {
                store.flush(id)?;
            }
        }
        if let Some(mut out) = out {
            out.flush()?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        }
        store.close(id)?;
        Ok(SessionFixture {
            dir: dir.to_owned(),
            id: id.to_owned(),
            log_bytes: fs::metadata(&log)?.len(),
            log,
            jsonl,
            events,
            jsonl_bytes,
            open_turn: false,
            workload,
        })
    }

    /// Copies the session, as it is stored, into a new SQLite store at
    /// `db` (WAL journal), as `turnwal convert` does: the header, then the
    /// events in batches of 4096 (chunk runs are packed within a batch).
    /// Returns the database's size.
    pub fn copy_to_sqlite(&self, db: &Path) -> BenchResult<u64> {
        let src = Store::open(&self.dir)?;
        let view = src.view(&self.id)?;
        let sqlite = SqliteOptions {
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        };
        let options = StoreOptions {
            sync: SyncMode::Never,
            ..StoreOptions::default()
        };
        let dst = Store::open_sqlite(db, sqlite, options)?;
        dst.create(view.header().clone())?;
        let mut batch = Vec::with_capacity(4096);
        // Only the stored events: an open final turn stays open.
        for i in 0..view.stored() {
            batch.push(view.get(i).expect("in range").to_event());
            if batch.len() == 4096 || i + 1 == view.stored() {
                dst.append(&self.id, &batch)?;
                batch.clear();
            }
        }
        dst.close(&self.id)?;
        drop(dst);
        Ok(fs::metadata(db)?.len())
    }

    /// Appends a turn of about 60 events that stops after a `tool/call`
    /// whose result never comes, and leaves it open (a crash mid-turn): the
    /// log's recovery then has a tail to classify and closers to build. The
    /// JSONL file (if any) gets the same events. Nothing is repaired.
    pub fn open_final_turn(&mut self) -> BenchResult<()> {
        assert!(!self.open_turn, "the final turn is already open");
        let turn = self.workload.turn_of(60, false);
        let options = StoreOptions {
            sync: SyncMode::Never,
            ..StoreOptions::default()
        };
        let backend = WalBackend::open(&self.dir)?.sealing_by_itself(false);
        let store = Store::with_backend(std::sync::Arc::new(backend), options);
        store.append(&self.id, &turn)?;
        // Durable, with the turn still open: flush syncs without closing it.
        store.flush(&self.id)?;
        drop(store);
        let mut lines = Vec::new();
        for e in &turn {
            e.write_json(&mut lines);
            lines.push(b'\n');
        }
        self.jsonl_bytes += lines.len() as u64;
        if let Some(path) = &self.jsonl {
            let mut f = OpenOptions::new().append(true).open(path)?;
            f.write_all(&lines)?;
            f.sync_all()?;
        }
        self.events += turn.len() as u64;
        self.log_bytes = fs::metadata(&self.log)?.len();
        self.open_turn = true;
        Ok(())
    }
}

/// A store of many small sessions (one turn of about 24 events, some 13 KiB
/// each), written as files directly: the bytes `Store::append` would write
/// (the same header and record encoding), without one fsynced
/// materialization per session.
#[derive(Debug)]
pub struct ListFixture {
    /// The store directory.
    pub dir: PathBuf,
    /// Sessions in it.
    pub sessions: usize,
    /// Bytes of all session files.
    pub bytes: u64,
}

impl ListFixture {
    /// Writes `sessions` sessions into a new store at `dir`.
    pub fn build(dir: &Path, sessions: usize, seed: u64) -> BenchResult<ListFixture> {
        let sessions_dir = dir.join("sessions");
        fs::create_dir_all(&sessions_dir)?;
        let mut total = 0;
        let mut bytes = Vec::new();
        for i in 0..sessions {
            let id = format!("session-{i:05}");
            let turn = Workload::new(seed.wrapping_add(i as u64)).turn_of(20, true);
            let placements = Tracker::new(Policy::Strict)
                .accept_batch(&turn)
                .expect("the workload keeps the contract");
            bytes.clear();
            let header = SessionHeader::new(id.clone(), 1_700_000_000_000 + i as u64);
            format::encode_file_header(&mut bytes, &header, Policy::Strict, SALT ^ i as u32);
            for (e, p) in turn.iter().zip(placements) {
                format::encode_record(&mut bytes, e, p, 0, SALT ^ i as u32);
            }
            let path = sessions_dir.join(format!("{}.twal", encode_file_name(&id)));
            turnwal::storage::private_file(OpenOptions::new().write(true).create_new(true))
                .open(&path)?
                .write_all(&bytes)?;
            total += bytes.len() as u64;
        }
        Ok(ListFixture {
            dir: dir.to_owned(),
            sessions,
            bytes: total,
        })
    }
}

/// An upstream JSONL root of many sessions, each one complete turn and an
/// open one, written file by file with the library's encoders.
pub struct JsonlListFixture {
    /// The root.
    pub dir: PathBuf,
    /// Its encoding.
    pub compression: Compression,
    /// Sessions in it.
    pub sessions: usize,
    /// Bytes of all transcripts.
    pub bytes: u64,
    /// Every transcript, for the header-only baseline.
    pub logs: Vec<PathBuf>,
}

impl JsonlListFixture {
    /// Writes `sessions` sessions into a new root at `dir`, spread over ten
    /// project directories.
    pub fn build(
        dir: &Path,
        compression: Compression,
        sessions: usize,
        seed: u64,
    ) -> BenchResult<JsonlListFixture> {
        let mut total = 0;
        let mut logs = Vec::with_capacity(sessions);
        for i in 0..sessions {
            let id = format!("session-{i:05}");
            let mut w = Workload::new(seed.wrapping_add(i as u64));
            let mut events = w.turn_of(20, true);
            events.extend(w.turn_of(20, false));
            let header = SessionHeader::new(id, 1_700_000_000_000 + i as u64)
                .with_cwd(format!("/work/p{}", i % 10));
            let mut head = jsonl::header::header_line(&header).into_bytes();
            head.push(b'\n');
            let mut records = Vec::new();
            jsonl::records::encode_records(
                events.iter().map(EventRef::from),
                true,
                b'\n',
                &mut records,
            );
            records.push(b'\n');
            let bytes = match compression {
                Compression::None => [head, records].concat(),
                Compression::Zstd => [
                    jsonl::zstd::compress_frame(&head),
                    jsonl::zstd::compress_frame(&records),
                ]
                .concat(),
            };
            let path =
                jsonl::layout::log_path(dir, header.cwd.as_deref(), &header.id, compression)?;
            fs::create_dir_all(path.parent().expect("a session directory"))?;
            fs::write(&path, &bytes)?;
            total += bytes.len() as u64;
            logs.push(path);
        }
        Ok(JsonlListFixture {
            dir: dir.to_owned(),
            compression,
            sessions,
            bytes: total,
            logs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::backend::Backend;
    use turnwal::scan::LogState;

    #[test]
    fn jsonl_list_fixtures_are_upstream_roots() {
        let dir = super::super::ScratchDir::new().unwrap();
        for compression in [Compression::None, Compression::Zstd] {
            let root = dir.path().join(compression.config_name());
            let fx = JsonlListFixture::build(&root, compression, 12, 3).unwrap();
            let backend = jsonl::JsonlBackend::open(&root, compression).unwrap();
            let listed = backend.list().unwrap();
            assert_eq!(listed.len(), 12);
            for s in &listed {
                // The full scan agrees with the listing.
                let scan = backend.scan(&s.id).unwrap().unwrap();
                assert_eq!(scan.state(), LogState::OpenTurn, "{}", s.id);
                assert_eq!(
                    (s.state, s.events, s.turns),
                    (scan.state(), scan.stored_len(), 2)
                );
            }
            assert_eq!(fx.logs.len(), 12);
        }
    }

    #[test]
    fn fixtures_are_valid_sessions() {
        let dir = super::super::ScratchDir::new().unwrap();
        let mut s =
            SessionFixture::build(&dir.path().join("s"), "s", 1, Until::Bytes(1 << 20), true)
                .unwrap();
        assert!(s.log_bytes >= 1 << 20);
        let jsonl = fs::read(s.jsonl.as_ref().unwrap()).unwrap();
        assert_eq!(jsonl.len() as u64, s.jsonl_bytes);
        assert_eq!(jsonl.split(|&b| b == b'\n').count() as u64 - 1, s.events);
        let backend = WalBackend::open(&s.dir).unwrap();
        let scan = backend.scan("s").unwrap().unwrap();
        assert_eq!(
            (scan.state(), scan.stored_len()),
            (LogState::Clean, s.events)
        );
        s.open_final_turn().unwrap();
        let scan = backend.scan("s").unwrap().unwrap();
        assert_eq!(
            (scan.state(), scan.stored_len()),
            (LogState::OpenTurn, s.events)
        );
        assert!(!scan.closers.is_empty());

        let list = ListFixture::build(&dir.path().join("l"), 20, 9).unwrap();
        let listed = Store::open(&list.dir).unwrap().list().unwrap();
        assert_eq!(listed.len(), 20);
        assert!(
            listed
                .iter()
                .all(|s| s.state == LogState::Clean && s.events >= 20)
        );
        let report = Store::open(&list.dir)
            .unwrap()
            .verify("session-00007")
            .unwrap();
        assert_eq!(report.exit_code(), 0, "{report:?}");
    }

    #[test]
    fn append_fixture_encodes_what_the_store_writes() {
        let fx = AppendFixture::new(5, 3);
        assert_eq!(
            fx.lines.iter().map(Vec::len).sum::<usize>() as u64,
            fx.events
        );
        let dir = super::super::ScratchDir::new().unwrap();
        let store = fx.prepare(dir.path(), SyncMode::Never).unwrap();
        let before = fs::metadata(WalBackend::open(dir.path()).unwrap().log_path(&fx.id))
            .unwrap()
            .len();
        for t in &fx.turns {
            store.append(&fx.id, t).unwrap();
        }
        store.flush(&fx.id).unwrap();
        let after = fs::metadata(WalBackend::open(dir.path()).unwrap().log_path(&fx.id))
            .unwrap()
            .len();
        assert_eq!(after - before, fx.encoded_bytes);
    }
}
