//! The baselines turnwal is measured against: what the machine does with
//! the same bytes or the same events without turnwal.
//!
//! - [`RawWrite`]: the physical floor of a buffered append, the very bytes
//!   turnwal writes (`format::encode_record`), one `write` per turn.
//! - [`JsonlWrite`]: the upstream harness's raw mode, serde_json and a
//!   `BufWriter`, one line per event, flushed at every turn's end (as a
//!   turnwal append hands each batch to the kernel before it returns).
//! - [`JsonValidate`]: the least any ingest of JSON text must do: serde_json
//!   validating each line into [`serde::de::IgnoredAny`], nothing kept.
//! - [`RawFsync`]: the physical floor of a durable turn: each turn's encoded
//!   bytes written, then `fdatasync`.
//! - [`Sqlite`]: the usual embedded alternative: SQLite in WAL mode with
//!   `synchronous=FULL`, each turn's rows inserted in one transaction.
//! - [`MmapCrc`]: the physical floor of a recovery scan: map the log and
//!   CRC-32 all of it.
//! - [`JsonlParse`]: recovering a JSONL log: map it and parse every line
//!   with serde_json (type, seq, time, and `data` validated as a raw value).

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::fixtures::AppendFixture;
use super::{BenchResult, Runs, Side};
use turnwal::event::Event;

/// The fixture's encoded turns written with one plain `write` each.
pub struct RawWrite<'a> {
    fx: &'a AppendFixture,
    runs: Runs,
}

impl<'a> RawWrite<'a> {
    /// Writes into fresh files under `scratch`.
    pub fn new(fx: &'a AppendFixture, scratch: &Path) -> RawWrite<'a> {
        RawWrite {
            fx,
            runs: Runs::new(scratch, "raw-write"),
        }
    }
}

impl Side for RawWrite<'_> {
    fn name(&self) -> &str {
        "raw_write"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let dir = self.runs.fresh()?;
        let mut file = File::create(dir.join("raw"))?;
        let start = Instant::now();
        for turn in &self.fx.encoded {
            file.write_all(turn)?;
        }
        let elapsed = start.elapsed();
        drop(file);
        Runs::done(dir);
        Ok(elapsed)
    }
}

/// serde_json + `BufWriter`, one line per event, flushed per turn.
pub struct JsonlWrite<'a> {
    fx: &'a AppendFixture,
    runs: Runs,
}

impl<'a> JsonlWrite<'a> {
    /// Writes into fresh files under `scratch`.
    pub fn new(fx: &'a AppendFixture, scratch: &Path) -> JsonlWrite<'a> {
        JsonlWrite {
            fx,
            runs: Runs::new(scratch, "jsonl-write"),
        }
    }
}

impl Side for JsonlWrite<'_> {
    fn name(&self) -> &str {
        "jsonl_write"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let dir = self.runs.fresh()?;
        let mut out = BufWriter::new(File::create(dir.join("log.jsonl"))?);
        let start = Instant::now();
        for turn in &self.fx.jsonl {
            for event in turn {
                serde_json::to_writer(&mut out, event)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
        let elapsed = start.elapsed();
        drop(out);
        Runs::done(dir);
        Ok(elapsed)
    }
}

/// serde_json validating every line of the fixture's text, keeping nothing.
pub struct JsonValidate<'a> {
    fx: &'a AppendFixture,
}

impl<'a> JsonValidate<'a> {
    /// Validates `fx`'s lines.
    pub fn new(fx: &'a AppendFixture) -> JsonValidate<'a> {
        JsonValidate { fx }
    }
}

impl Side for JsonValidate<'_> {
    fn name(&self) -> &str {
        "serde_validate"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        for turn in &self.fx.lines {
            for line in turn {
                serde_json::from_slice::<IgnoredAny>(line)?;
            }
        }
        Ok(start.elapsed())
    }
}

/// The physical floor of ingest to disk: serde_json validating each turn's
/// lines, then one plain `write` of the turn's encoded bytes. Any ingest
/// must at least read its JSON and write its bytes.
pub struct ValidateWrite<'a> {
    fx: &'a AppendFixture,
    runs: Runs,
}

impl<'a> ValidateWrite<'a> {
    /// Writes into fresh files under `scratch`.
    pub fn new(fx: &'a AppendFixture, scratch: &Path) -> ValidateWrite<'a> {
        ValidateWrite {
            fx,
            runs: Runs::new(scratch, "validate-write"),
        }
    }
}

impl Side for ValidateWrite<'_> {
    fn name(&self) -> &str {
        "validate_write"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let dir = self.runs.fresh()?;
        let mut file = File::create(dir.join("raw"))?;
        let start = Instant::now();
        for (lines, encoded) in self.fx.lines.iter().zip(&self.fx.encoded) {
            for line in lines {
                serde_json::from_slice::<IgnoredAny>(line)?;
            }
            file.write_all(encoded)?;
        }
        let elapsed = start.elapsed();
        drop(file);
        Runs::done(dir);
        Ok(elapsed)
    }
}

/// Each turn's encoded bytes written, then `fdatasync`.
pub struct RawFsync<'a> {
    fx: &'a AppendFixture,
    runs: Runs,
    latencies: Vec<Duration>,
}

impl<'a> RawFsync<'a> {
    /// Writes into fresh files under `scratch`.
    pub fn new(fx: &'a AppendFixture, scratch: &Path) -> RawFsync<'a> {
        RawFsync {
            fx,
            runs: Runs::new(scratch, "raw-fsync"),
            latencies: Vec::new(),
        }
    }
}

impl Side for RawFsync<'_> {
    fn name(&self) -> &str {
        "raw_fsync"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let dir = self.runs.fresh()?;
        // Created durable (file and directory entry) before the clock
        // starts, as turnwal's session is materialized before its turns.
        let mut file = File::create(dir.join("raw"))?;
        file.sync_all()?;
        File::open(&dir)?.sync_all()?;
        let start = Instant::now();
        for turn in &self.fx.encoded {
            let t = Instant::now();
            file.write_all(turn)?;
            file.sync_data()?;
            self.latencies.push(t.elapsed());
        }
        let elapsed = start.elapsed();
        drop(file);
        Runs::done(dir);
        Ok(elapsed)
    }

    fn latencies(&self) -> &[Duration] {
        &self.latencies
    }
}

/// SQLite, WAL mode, `synchronous=FULL`: one transaction per turn.
pub struct Sqlite<'a> {
    fx: &'a AppendFixture,
    runs: Runs,
    latencies: Vec<Duration>,
    /// `FULL` (durable turns) or `NORMAL` (buffered appends).
    synchronous: &'static str,
    name: &'static str,
}

/// The table a harness would keep events in.
const SCHEMA: &str = "CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time INTEGER NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (session, seq)
)";

const INSERT: &str =
    "INSERT INTO events (session, seq, type, time, data) VALUES (?1, ?2, ?3, ?4, ?5)";

impl<'a> Sqlite<'a> {
    /// Writes into fresh databases under `scratch`, `synchronous=FULL`:
    /// every committed turn is durable (`sqlite_full`).
    pub fn new(fx: &'a AppendFixture, scratch: &Path) -> Sqlite<'a> {
        Sqlite {
            fx,
            runs: Runs::new(scratch, "sqlite"),
            latencies: Vec::new(),
            synchronous: "FULL",
            name: "sqlite_full",
        }
    }

    /// The same with `synchronous=NORMAL`, SQLite's setting for buffered
    /// writes in WAL mode (`sqlite_normal`).
    pub fn normal(fx: &'a AppendFixture, scratch: &Path) -> Sqlite<'a> {
        Sqlite {
            runs: Runs::new(scratch, "sqlite_normal"),
            synchronous: "NORMAL",
            name: "sqlite_normal",
            ..Sqlite::new(fx, scratch)
        }
    }

    /// Inserts one turn in one transaction and commits it.
    fn insert(conn: &mut rusqlite::Connection, session: &str, turn: &[Event]) -> BenchResult<()> {
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare_cached(INSERT)?;
            for e in turn {
                insert.execute(rusqlite::params![
                    session,
                    e.seq() as i64,
                    e.event_type(),
                    e.time(),
                    e.data().get()
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

impl Side for Sqlite<'_> {
    fn name(&self) -> &str {
        self.name
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let dir = self.runs.fresh()?;
        let mut conn = rusqlite::Connection::open(dir.join("events.sqlite"))?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("SQLite refused WAL mode ({mode})").into());
        }
        conn.pragma_update(None, "synchronous", self.synchronous)?;
        conn.execute(SCHEMA, [])?;
        // The first turn creates the WAL, as turnwal's materializes its log.
        Sqlite::insert(&mut conn, &self.fx.id, &self.fx.first)?;
        let start = Instant::now();
        for turn in &self.fx.turns {
            let t = Instant::now();
            Sqlite::insert(&mut conn, &self.fx.id, turn)?;
            self.latencies.push(t.elapsed());
        }
        let elapsed = start.elapsed();
        drop(conn);
        Runs::done(dir);
        Ok(elapsed)
    }

    fn latencies(&self) -> &[Duration] {
        &self.latencies
    }
}

/// Maps `file` read-only. The benches own their files and never
/// shrink them while a map is alive.
fn map(file: &File) -> BenchResult<memmap2::Mmap> {
    // SAFETY: the fixture's files are written before the bench starts and
    // are never truncated while mapped (see above).
    Ok(unsafe { memmap2::Mmap::map(file)? })
}

/// Map a log and CRC-32 all of it.
pub struct MmapCrc {
    path: PathBuf,
}

impl MmapCrc {
    /// Checksums the file at `path`.
    pub fn new(path: &Path) -> MmapCrc {
        MmapCrc {
            path: path.to_owned(),
        }
    }
}

impl Side for MmapCrc {
    fn name(&self) -> &str {
        "mmap_crc32"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let file = File::open(&self.path)?;
        let crc = crc32fast::hash(&map(&file)?);
        let elapsed = start.elapsed();
        std::hint::black_box(crc);
        Ok(elapsed)
    }
}

/// One line of a JSONL log, as a JSONL recovery reads it.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    event_type: Cow<'a, str>,
    seq: u64,
    #[allow(dead_code)]
    time: i64,
    #[serde(borrow)]
    data: &'a RawValue,
}

/// Map a JSONL log and parse every line with serde_json.
pub struct JsonlParse {
    path: PathBuf,
    bytes: u64,
}

impl JsonlParse {
    /// Parses the JSONL file at `path` (`bytes` long).
    pub fn new(path: &Path, bytes: u64) -> JsonlParse {
        JsonlParse {
            path: path.to_owned(),
            bytes,
        }
    }
}

impl Side for JsonlParse {
    fn name(&self) -> &str {
        "jsonl_parse"
    }

    fn once(&mut self) -> BenchResult<Duration> {
        let start = Instant::now();
        let file = File::open(&self.path)?;
        let text = map(&file)?;
        let mut check = 0u64;
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let line: Line = serde_json::from_slice(line)?;
            check = check
                .wrapping_add(line.seq)
                .wrapping_add(line.event_type.len() as u64)
                .wrapping_add(line.data.get().len() as u64);
        }
        let elapsed = start.elapsed();
        std::hint::black_box(check);
        Ok(elapsed)
    }

    fn bytes(&self) -> Option<u64> {
        Some(self.bytes)
    }
}
