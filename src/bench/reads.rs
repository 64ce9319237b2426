//! Whole-session reads on a realistic session (issue 27): what an operator
//! waits for when a session is mostly streamed deltas, as real sessions are
//! ([`turnwal_testkit::workload::realistic`]), on every store.
//!
//! One realistic session of a given size of raw JSONL is appended, a turn
//! per batch with `SyncMode::Never` (as `turnwal append --sync never`
//! appends it), into a WAL store (as appended: plain records and chunk
//! runs, nothing sealed), the same WAL store compacted, an SQLite store and
//! a zstd JSONL root. Then the `turnwal` binary runs each whole-session
//! read on each store — `verify`, `cat`, `export`, `stats`, `grep`, `show
//! --format markdown` — as a child process timed from spawn to exit, its
//! heap sampled ([`super::cli`]).
//!
//! The floor is the least any reader of the session must do: serde_json
//! validating every line of the same raw JSONL, mapped, on one thread,
//! timed in this process. A figure's ratio is its median wall time over the
//! floor's (lower is better; the targets are in [`TARGETS`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::BenchResult;
use super::cli::{CliFigure, figure};
use turnwal::backend::SyncMode;
use turnwal::backend::wal::WalBackend;
use turnwal::store::{Store, StoreOptions};
use turnwal_testkit::workload::realistic;

/// The session's id in every store.
pub const ID: &str = "real";

/// The commands timed, after `--store STORE`.
pub const COMMANDS: [&[&str]; 6] = [
    &["verify", ID],
    &["cat", ID],
    &["export", ID],
    &["stats", ID],
    &["grep", "--session", ID, "cargo"],
    &["show", ID, "--format", "markdown"],
];

/// Issue 27's targets: a command's wall time over the floor's, at most
/// this, on the WAL stores and on the others.
pub const TARGETS: [(&str, f64, f64); 6] = [
    ("verify", 0.5, 1.0),
    ("cat", 1.0, 1.5),
    ("export", 1.0, 1.5),
    ("stats", 1.5, 2.0),
    ("grep", 1.5, 2.0),
    ("show", 1.5, 2.0),
];

/// A whole-session read's heap at its peak: at most this (issue 27).
pub const HEAP_TARGET: u64 = 64 << 20;

/// The stores, by the name the report gives them.
pub const STORES: [&str; 5] = ["wal", "wal-compacted", "sqlite", "jsonl", "jsonl-zstd"];

/// One store's session, ready to read.
struct Fixture {
    name: &'static str,
    /// The `--store` value.
    store: PathBuf,
}

/// What the run measured.
#[derive(Debug, Clone)]
pub struct ReadsReport {
    /// The session's events.
    pub events: u64,
    /// Its raw JSONL form's bytes.
    pub jsonl_bytes: u64,
    /// The floor's median.
    pub floor: Duration,
    /// Every store's bytes at rest, by store name.
    pub store_bytes: Vec<(&'static str, u64)>,
    /// Every (store, command) figure.
    pub figures: Vec<(&'static str, CliFigure)>,
}

/// Writes the session of about `bytes` raw JSONL bytes into every store
/// under `dir`, then times every command `reps` times with `exe`.
pub fn run(
    dir: &Path,
    bytes: u64,
    reps: usize,
    exe: &Path,
    progress: &mut dyn FnMut(&str),
) -> BenchResult<ReadsReport> {
    progress("realistic reads: writing the session into every store");
    let jsonl = dir.join("session.jsonl");
    let fixtures = write_fixtures(dir, bytes, &jsonl)?;
    let (events, jsonl_bytes) = {
        let text = std::fs::read(&jsonl)?;
        (
            text.iter().filter(|&&b| b == b'\n').count() as u64,
            text.len() as u64,
        )
    };
    progress("realistic reads: the serde_json floor");
    let floor = floor(&jsonl, reps.max(3))?;
    let mut figures = Vec::new();
    let mut store_bytes = Vec::new();
    for fx in &fixtures {
        store_bytes.push((fx.name, dir_bytes(&fx.store)));
        for args in COMMANDS {
            progress(&format!("realistic reads: {} {}", fx.name, args[0]));
            figures.push((fx.name, figure(exe, &fx.store, args, reps)?));
        }
    }
    Ok(ReadsReport {
        events,
        jsonl_bytes,
        floor,
        store_bytes,
        figures,
    })
}

fn write_fixtures(dir: &Path, bytes: u64, jsonl: &Path) -> BenchResult<Vec<Fixture>> {
    use std::io::Write;
    let wal = dir.join("wal");
    let sqlite = dir.join("store.sqlite");
    let zstd = dir.join("jsonl-zstd");
    let plain = dir.join("jsonl");
    let options = StoreOptions {
        sync: SyncMode::Never,
        ..StoreOptions::default()
    };
    let stores = [
        Store::with_backend(
            Arc::new(WalBackend::open(&wal)?.sealing_by_itself(false)),
            options,
        ),
        Store::open_sqlite(&sqlite, Default::default(), options)?,
        turnwal::location::Location::Jsonl(
            plain.clone(),
            Some(turnwal::backend::jsonl::Compression::None),
        )
        .open(
            &turnwal::location::Opening::new(options)
                .if_missing(turnwal::location::IfMissing::Create),
        )?,
        turnwal::location::Location::Jsonl(
            zstd.clone(),
            Some(turnwal::backend::jsonl::Compression::Zstd),
        )
        .open(
            &turnwal::location::Opening::new(options)
                .if_missing(turnwal::location::IfMissing::Create),
        )?,
    ];
    let header = turnwal::header::SessionHeader::new(ID, 1_796_083_200_000).with_cwd("/work/app");
    for store in &stores {
        store.create(header.clone())?;
    }
    let mut raw = std::io::BufWriter::new(std::fs::File::create(jsonl)?);
    for turn in realistic::turns_of_size(27, bytes) {
        for store in &stores {
            store.append(ID, &turn)?;
        }
        for event in &turn {
            raw.write_all(event.to_json().as_bytes())?;
            raw.write_all(b"\n")?;
        }
    }
    raw.flush()?;
    for store in &stores {
        store.flush(ID)?;
    }
    drop(stores);
    // The WAL store again, compacted (a copy, so the first stays as
    // appended).
    let compacted = dir.join("wal-compacted");
    copy_dir(&wal, &compacted)?;
    let store = Store::open(&compacted)?;
    store.compact(ID)?;
    drop(store);
    Ok(vec![
        Fixture {
            name: "wal",
            store: wal,
        },
        Fixture {
            name: "wal-compacted",
            store: compacted,
        },
        Fixture {
            name: "sqlite",
            store: sqlite,
        },
        Fixture {
            name: "jsonl",
            store: PathBuf::from(format!("jsonl:{}", plain.display())),
        },
        Fixture {
            name: "jsonl-zstd",
            store: PathBuf::from(format!("jsonl+zstd:{}", zstd.display())),
        },
    ])
}

/// serde_json validating every line of the mapped file: the median of
/// `reps` runs.
fn floor(jsonl: &Path, reps: usize) -> BenchResult<Duration> {
    let file = std::fs::File::open(jsonl)?;
    // SAFETY: a file this run wrote and nothing else changes.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let started = Instant::now();
        for line in map.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            serde_json::from_slice::<serde::de::IgnoredAny>(line)?;
        }
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Bytes of every file below `path` (a WAL directory, a JSONL root, an
/// SQLite database and its side files).
fn dir_bytes(path: &Path) -> u64 {
    let root = path.to_str().and_then(|s| {
        s.strip_prefix("jsonl+zstd:")
            .or_else(|| s.strip_prefix("jsonl:"))
    });
    let path = match root {
        Some(root) => PathBuf::from(root),
        None => path.to_owned(),
    };
    fn walk(p: &Path) -> u64 {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p)
                .map(|d| d.flatten().map(|e| walk(&e.path())).sum())
                .unwrap_or(0),
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    walk(&path)
}

impl ReadsReport {
    /// A command's wall time over the floor's.
    pub fn ratio(&self, figure: &CliFigure) -> f64 {
        figure.median.as_secs_f64() / self.floor.as_secs_f64().max(1e-9)
    }

    /// The target of `command` on store `store`, if it has one.
    pub fn target(store: &str, command: &str) -> Option<f64> {
        let wal = store.starts_with("wal");
        TARGETS
            .iter()
            .find(|(c, ..)| *c == command)
            .map(|&(_, on_wal, other)| if wal { on_wal } else { other })
    }

    /// The report as JSON (`turnwal bench --json`, key `realistic_reads`).
    pub fn to_json(&self) -> Value {
        json!({
            "events": self.events,
            "jsonl_bytes": self.jsonl_bytes,
            "floor_s": self.floor.as_secs_f64(),
            "store_bytes": self.store_bytes.iter().map(|(s, b)| json!({"store": s, "bytes": b})).collect::<Vec<_>>(),
            "figures": self.figures.iter().map(|(store, f)| {
                let command = f.args[0].as_str();
                json!({
                    "store": store,
                    "command": command,
                    "median_s": f.median.as_secs_f64(),
                    "ratio_to_floor": self.ratio(f),
                    "target": Self::target(store, command),
                    "max_heap_bytes": f.max_anon,
                    "heap_target_bytes": HEAP_TARGET,
                })
            }).collect::<Vec<_>>(),
        })
    }

    /// The report as a table: a row per store, a column per command (its
    /// ratio to the floor), then the largest heap of any command.
    pub fn table(&self) -> String {
        let mut rows = vec![{
            let mut h = vec!["store".to_owned()];
            h.extend(COMMANDS.iter().map(|c| c[0].to_owned()));
            h.push("peak heap".to_owned());
            h
        }];
        for store in STORES {
            let mut row = vec![store.to_owned()];
            let mut heap = 0;
            for args in COMMANDS {
                let f = self
                    .figures
                    .iter()
                    .find(|(s, f)| *s == store && f.args[0] == args[0]);
                row.push(f.map_or_else(String::new, |(_, f)| {
                    heap = heap.max(f.max_anon);
                    format!("{:.1}×", self.ratio(f))
                }));
            }
            row.push(format!("{} MiB", heap >> 20));
            rows.push(row);
        }
        format!(
            "realistic session: {} events, {:.1} MB of raw JSONL; floor (serde_json validating every \
             line, one thread): {:.3} s; command wall time over the floor, median of runs:\n{}",
            self.events,
            self.jsonl_bytes as f64 / 1e6,
            self.floor.as_secs_f64(),
            super::align(&rows)
        )
    }
}
